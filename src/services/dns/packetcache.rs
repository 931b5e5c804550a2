//! The DNS packet cache: a query message minus its ID → the encoded
//! authoritative answer minus its ID (PowerDNS style, docs/dns.md).
//!
//! Role: lets [`super::handler::Core`] answer a repeated query with one hash
//! lookup instead of hickory's decode / catalog / encode path.
//!
//! Invariants:
//! - Transparent: [`PacketCache::get_into`] writes exactly the bytes that
//!   were stored with [`PacketCache::put`] (with the new query's ID).
//! - Bounded: at most [`PACKET_CACHE_ENTRIES`] answers of at most
//!   [`PACKET_CACHE_MAX_ANSWER`] bytes; once full, new queries are answered
//!   but not stored.
//! - Compact (the cache is most of a DNS-only server's heap after a run of
//!   distinct names, bench/RESULTS-memory.md): entries are appended to one
//!   byte arena (no allocation, malloc header or rounding per entry; the
//!   cache never removes an entry, it is replaced whole with its zones) and
//!   the hash table holds 4-byte offsets into it (hashbrown's `HashTable`,
//!   which std's `HashSet` cannot do: the key lives in the arena). The
//!   answer's question section is not stored, because it is the query's
//!   own question byte for byte (hickory echoes the original question
//!   bytes), and identical answers are stored once: a run of distinct
//!   names under the `*.apps` wildcard (or of nonexistent names) adds only
//!   its keys. An answer whose question differs from the query's is not
//!   cached.
//! - Never waits for its lock: the UDP worker threads (`udp.rs`) share it,
//!   and a thread preempted while holding it must not stall the other. A
//!   lookup that finds a writer in the way is a miss (the catalog answers),
//!   and an insert that finds the lock taken is skipped (a later miss
//!   stores it).

use std::hash::BuildHasher as _;

use crate::runtime::sync::RwLockExt as _;

/// Most distinct queries kept in each packet cache (UDP, TCP).
pub(super) const PACKET_CACHE_ENTRIES: usize = 65_536;
/// Largest answer stored in a packet cache (bigger ones are always rebuilt).
pub(super) const PACKET_CACHE_MAX_ANSWER: usize = 1232;

/// Offset of the question section in a DNS message.
const QUESTION: usize = 12;

/// The entries and their answers, back to back in `arena`: an entry is
/// `[key length: u16 BE][answer offset: u32 BE][key]`, an answer
/// `[length: u16 BE][answer]`, where key = the query without its ID and
/// answer = the response without its ID and without its question section.
/// Identical answers are stored once (`answers`): every name under a
/// wildcard, and most negative answers, get the same bytes, because the
/// answer names the question through a compression pointer. `index` holds
/// each entry's offset hashed by its key, `answers` each answer's offset
/// hashed by its bytes. Offsets fit a u32: at most
/// [`PACKET_CACHE_ENTRIES`] entries of at most 6 + 510 + 2 + 1232 bytes.
#[derive(Default)]
struct Store {
    arena: Vec<u8>,
    index: hashbrown::HashTable<u32>,
    answers: hashbrown::HashTable<u32>,
    hasher: std::hash::RandomState,
}

/// Big-endian u16 and u32 at `o` in `b` (offsets the store wrote).
fn u16_at(b: &[u8], o: usize) -> usize {
    usize::from(u16::from_be_bytes([b[o], b[o + 1]]))
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// The key of the entry at `off`.
fn key_at(arena: &[u8], off: u32) -> &[u8] {
    let o = off as usize;
    &arena[o + 6..o + 6 + u16_at(arena, o)]
}

/// The answer stored at `off`.
fn answer_at(arena: &[u8], off: u32) -> &[u8] {
    let o = off as usize;
    &arena[o + 2..o + 2 + u16_at(arena, o)]
}

/// The hash of the concatenation of `parts` (the same for the same bytes
/// however they are split).
fn hash_parts(h: &std::hash::RandomState, parts: &[&[u8]]) -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut s = h.build_hasher();
    for p in parts {
        s.write(p);
    }
    s.finish()
}

impl Store {
    fn find(&self, key: &[u8]) -> Option<&[u8]> {
        let h = self.hasher.hash_one(key);
        let off = self.index.find(h, |&o| key_at(&self.arena, o) == key)?;
        Some(answer_at(
            &self.arena,
            u32_at(&self.arena, *off as usize + 2),
        ))
    }

    /// The offset of the answer `parts` (concatenated), stored now unless
    /// an identical one is.
    fn intern(&mut self, parts: [&[u8]; 2]) -> Option<u32> {
        let Store {
            arena,
            answers,
            hasher,
            ..
        } = self;
        let h = hash_parts(hasher, &parts);
        let same = |&o: &u32| {
            let a = answer_at(arena, o);
            a.len() == parts[0].len() + parts[1].len()
                && a[..parts[0].len()] == *parts[0]
                && a[parts[0].len()..] == *parts[1]
        };
        if let Some(&o) = answers.find(h, same) {
            return Some(o);
        }
        let len = u16::try_from(parts[0].len() + parts[1].len()).ok()?;
        let off = u32::try_from(arena.len()).ok()?;
        arena.extend_from_slice(&len.to_be_bytes());
        arena.extend_from_slice(parts[0]);
        arena.extend_from_slice(parts[1]);
        answers.insert_unique(h, off, |&o| hash_parts(hasher, &[answer_at(arena, o)]));
        Some(off)
    }

    /// Append an entry whose answer is the concatenation of `answer`.
    fn insert(&mut self, key: &[u8], answer: [&[u8]; 2]) {
        let Ok(k) = u16::try_from(key.len()) else {
            return;
        };
        let Some(ans) = self.intern(answer) else {
            return;
        };
        let Ok(off) = u32::try_from(self.arena.len()) else {
            return;
        };
        self.arena.extend_from_slice(&k.to_be_bytes());
        self.arena.extend_from_slice(&ans.to_be_bytes());
        self.arena.extend_from_slice(key);
        let h = self.hasher.hash_one(key);
        let Store {
            arena,
            index,
            hasher,
            ..
        } = self;
        index.insert_unique(h, off, |&o| hasher.hash_one(key_at(arena, o)));
    }
}

/// The packet cache of one transport (see the module doc).
#[derive(Default)]
pub(super) struct PacketCache {
    store: std::sync::RwLock<Store>,
}

/// Length of the single question (QNAME without compression, QTYPE,
/// QCLASS) starting at offset 12 of `msg`; None when it does not fit.
fn question_len(msg: &[u8]) -> Option<usize> {
    let mut i = QUESTION;
    loop {
        let l = usize::from(*msg.get(i)?);
        if l == 0 {
            break;
        }
        if l > 63 {
            return None; // a compression pointer or a reserved label type
        }
        i += 1 + l;
    }
    let end = i + 1 + 4;
    (end <= msg.len()).then_some(end - QUESTION)
}

impl PacketCache {
    /// Only plain single-question queries (at most one additional, the OPT) are cached.
    fn cacheable(msg: &[u8]) -> bool {
        msg.len() >= 17
            && msg.len() <= 512
            && msg[2] & 0xf8 == 0 // QR=0, OPCODE=QUERY
            && msg[4..6] == [0, 1]
            && msg[6..10] == [0, 0, 0, 0]
            && msg[10] == 0
            && msg[11] <= 1
    }

    /// Write the cached answer to `msg` into `out`; false when not cached.
    pub(super) fn get_into(&self, msg: &[u8], out: &mut Vec<u8>) -> bool {
        if !Self::cacheable(msg) {
            return false;
        }
        let Some(qlen) = question_len(msg) else {
            return false;
        };
        let Some(store) = self.store.try_read_locked() else {
            return false;
        };
        let Some(answer) = store.find(&msg[2..]) else {
            return false;
        };
        let (header, rest) = answer.split_at(QUESTION - 2);
        out.clear();
        out.extend_from_slice(&msg[..2]);
        out.extend_from_slice(header);
        out.extend_from_slice(&msg[QUESTION..QUESTION + qlen]);
        out.extend_from_slice(rest);
        true
    }

    /// Store `resp` as the answer to `msg` (when both qualify and there is room).
    pub(super) fn put(&self, msg: &[u8], resp: &[u8]) {
        if !Self::cacheable(msg) || resp.len() > PACKET_CACHE_MAX_ANSWER {
            return;
        }
        let Some(qlen) = question_len(msg) else {
            return;
        };
        let q = QUESTION..QUESTION + qlen;
        if resp.len() < q.end || resp[4..6] != [0, 1] || resp[q.clone()] != msg[q.clone()] {
            return;
        }
        let key = &msg[2..];
        let Some(mut store) = self.store.try_write_locked() else {
            return;
        };
        if store.index.len() >= PACKET_CACHE_ENTRIES || store.find(key).is_some() {
            return;
        }
        store.insert(key, [&resp[2..QUESTION], &resp[q.end..]]);
    }

    /// Entries stored.
    pub(super) fn len(&self) -> usize {
        self.store.read_locked().index.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query for `name` A with ID `id` (and an OPT record when `edns`).
    fn query(id: u16, name: &str, edns: bool) -> Vec<u8> {
        let mut m = id.to_be_bytes().to_vec();
        m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(edns)]);
        for l in name.split('.') {
            m.push(u8::try_from(l.len()).unwrap_or(0));
            m.extend_from_slice(l.as_bytes());
        }
        m.extend_from_slice(&[0, 0, 1, 0, 1]);
        if edns {
            m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        }
        m
    }

    /// An answer to `q`: its question plus one A record (compressed name).
    fn answer(q: &[u8]) -> Vec<u8> {
        let qlen = question_len(q).unwrap_or(0);
        let mut r = q[..2].to_vec();
        r.extend_from_slice(&[0x85, 0x00, 0, 1, 0, 1, 0, 0, 0, 0]);
        r.extend_from_slice(&q[12..12 + qlen]);
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 5]);
        r
    }

    #[test]
    fn a_cached_answer_is_the_stored_one_with_the_new_id() {
        let c = PacketCache::default();
        for edns in [false, true] {
            let q = query(0x1234, "aBc.apps.mycluster.example.com", edns);
            let a = answer(&q);
            let mut out = Vec::new();
            assert!(!c.get_into(&q, &mut out));
            c.put(&q, &a);
            let q2 = query(0x9876, "aBc.apps.mycluster.example.com", edns);
            assert!(c.get_into(&q2, &mut out));
            assert_eq!(out[..2], [0x98, 0x76]);
            assert_eq!(out[2..], a[2..]);
        }
        assert_eq!(c.len(), 2);
        // Another case of the same name is another key.
        let mut out = Vec::new();
        assert!(!c.get_into(&query(1, "abc.apps.mycluster.example.com", false), &mut out));
    }

    /// Past several index resizes (which rehash the keys out of the arena),
    /// every name still finds its own answer, and the bound holds.
    #[test]
    fn many_names_each_find_their_answer_up_to_the_bound() {
        let c = PacketCache::default();
        let name = |i: usize| format!("n{i}.apps.mycluster.example.com");
        for i in 0..PACKET_CACHE_ENTRIES + 10 {
            let q = query(1, &name(i), i % 2 == 0);
            let mut a = answer(&q);
            let n = a.len();
            a[n - 2..].copy_from_slice(&u16::try_from(i % 65_536).unwrap().to_be_bytes());
            c.put(&q, &a);
        }
        assert_eq!(c.len(), PACKET_CACHE_ENTRIES);
        let mut out = Vec::new();
        for i in (0..PACKET_CACHE_ENTRIES).step_by(97) {
            let q = query(0x4242, &name(i), i % 2 == 0);
            assert!(c.get_into(&q, &mut out), "{i}");
            let n = out.len();
            assert_eq!(out[n - 2..], u16::try_from(i).unwrap().to_be_bytes(), "{i}");
            assert_eq!(out[..2], [0x42, 0x42]);
        }
        let q = query(1, &name(PACKET_CACHE_ENTRIES + 1), false);
        assert!(!c.get_into(&q, &mut out), "over the bound: not stored");
        // The other EDNS variant of a stored name is another key.
        assert!(!c.get_into(&query(1, &name(0), false), &mut out));
    }

    /// Distinct names under a wildcard get the same answer bytes (the
    /// owner is a pointer to the question): it is stored once, each name
    /// adds only its key; a different answer is stored apart.
    #[test]
    fn identical_answers_are_stored_once() {
        let c = PacketCache::default();
        let arena = |c: &PacketCache| c.store.read_locked().arena.len();
        let name = |i: usize| format!("r{i:05}.apps.mycluster.example.com");
        let q0 = query(1, &name(0), true);
        c.put(&q0, &answer(&q0));
        let after_first = arena(&c);
        for i in 1..1000 {
            let q = query(1, &name(i), true);
            c.put(&q, &answer(&q));
        }
        let key_len = q0.len() - 2;
        assert_eq!(arena(&c) - after_first, 999 * (6 + key_len));
        let q = query(1, "other.apps.mycluster.example.com", true);
        let mut a = answer(&q);
        let n = a.len();
        a[n - 1] = 6; // 192.0.2.6
        c.put(&q, &a);
        let mut out = Vec::new();
        for i in [0, 1, 500, 999] {
            let q = query(0x0102, &name(i), true);
            assert!(c.get_into(&q, &mut out), "{i}");
            assert_eq!(out[2..], answer(&q)[2..], "{i}");
        }
        assert!(c.get_into(
            &query(3, "other.apps.mycluster.example.com", true),
            &mut out
        ));
        assert_eq!(out[out.len() - 1], 6);
    }

    #[test]
    fn an_answer_with_another_question_is_not_cached() {
        let c = PacketCache::default();
        let q = query(7, "api.mycluster.example.com", false);
        let mut a = answer(&q);
        a[13] = b'A'; // "Api" in the answer's question
        c.put(&q, &a);
        assert_eq!(c.len(), 0);
        // A truncated answer without its question is not cached either.
        c.put(&q, &a[..12]);
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn malformed_questions_are_neither_stored_nor_found() {
        let c = PacketCache::default();
        let mut q = query(7, "api.mycluster.example.com", false);
        q[12] = 0xc0; // a compression pointer in the query's name
        let a = q.clone();
        c.put(&q, &a);
        assert_eq!(c.len(), 0);
        let mut out = Vec::new();
        assert!(!c.get_into(&q, &mut out));
        // A name running past the end of the message.
        let q = query(7, "api", false);
        assert!(question_len(&q[..15]).is_none());
    }
}
