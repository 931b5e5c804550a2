//! Authentication of the HA pair's exchange (`serve::hasync`, docs/ha.md
//! "Threat model"): every request and every answer carries an
//! HMAC-SHA256 keyed by the pair key (the content of `ha.tokenFile`),
//! never the key itself.
//!
//! A request's MAC covers the method, the path, the sender's member id
//! (its own IPv4 address, which the receiver requires to be its
//! `ha.peer`), a timestamp, a random nonce and the body. An answer's MAC
//! covers its status, the answering member's id, its own timestamp and
//! nonce, the body, and the nonce of the request it answers: a recorded
//! answer cannot be replayed to another request, a request or answer
//! cannot be reflected as the other (each starts with its own label), and
//! a request recorded on the wire is refused as stale after [`SKEW`] or as
//! a repeat before ([`Nonces`]).
//!
//! Pure: the clock is an argument, no I/O; every rule is unit-tested. The
//! MAC is checked with `ring::hmac::verify` (constant time) before the
//! body is decoded.

use std::collections::{HashSet, VecDeque};
use std::net::Ipv4Addr;

use ring::hmac;
use ring::rand::{SecureRandom as _, SystemRandom};

use crate::runtime::statefile::{hex, unhex};

/// The sender's member id (its own IPv4 address).
pub const H_MEMBER: &str = "x-crc-ha-member";
/// Unix seconds at the sender.
pub const H_TIME: &str = "x-crc-ha-time";
/// A random nonce, 16 bytes in hex.
pub const H_NONCE: &str = "x-crc-ha-nonce";
/// The HMAC-SHA256, hex.
pub const H_MAC: &str = "x-crc-ha-mac";

/// How far a message's timestamp may be from the receiver's clock
/// (seconds, either way).
pub const SKEW: u64 = 60;
/// Request nonces remembered against replays: far more than the requests
/// of one [`SKEW`] window (a heartbeat a second, a few changes).
pub const NONCES: usize = 4096;

/// Label the MAC starts with: the protocol and its version.
const LABEL: &[u8] = b"crc-appliance ha sync v2";

/// The pair key. Its `Debug` shows nothing of it.
pub struct PairKey(hmac::Key);

impl std::fmt::Debug for PairKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PairKey(..)")
    }
}

impl PairKey {
    /// The key of the pair secret `secret` (`ha.tokenFile`'s token).
    pub fn new(secret: &str) -> PairKey {
        PairKey(hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()))
    }
}

/// What a message's MAC covers besides its role and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The sending member's own address.
    pub member: Ipv4Addr,
    /// Unix seconds at the sender.
    pub time: u64,
    pub nonce: [u8; 16],
}

impl Stamp {
    /// A stamp for a message `member` sends at `time`, with a fresh random
    /// nonce.
    pub fn new(member: Ipv4Addr, time: u64) -> Stamp {
        let mut nonce = [0u8; 16];
        // The system RNG does not fail on Linux; a zero nonce would only
        // be refused as a repeat by the peer.
        let _ = SystemRandom::new().fill(&mut nonce);
        Stamp {
            member,
            time,
            nonce,
        }
    }
}

/// Which message is signed.
#[derive(Debug, Clone, Copy)]
pub enum Role<'a> {
    Request { method: &'a str, path: &'a str },
    Answer { status: u16, request: &'a [u8; 16] },
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error(
        "no HA authentication headers (a peer of version 1 sends the token itself: upgrade it)"
    )]
    Missing,
    #[error("malformed HA authentication header {0}")]
    Malformed(&'static str),
    #[error("the sender says it is member {0}, not this member's ha.peer {1}")]
    WrongMember(Ipv4Addr, Ipv4Addr),
    #[error(
        "timestamp {0} s off this member's clock (at most {SKEW} s): clocks out of step, or a replay"
    )]
    Stale(i128),
    #[error(
        "bad MAC: the sender does not hold this pair key (ha.tokenFile differs between the members?)"
    )]
    BadMac,
    #[error("a repeated nonce: a replayed message")]
    Replay,
}

fn field(msg: &mut Vec<u8>, bytes: &[u8]) {
    msg.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    msg.extend_from_slice(bytes);
}

/// The bytes the MAC is computed over: each part length-prefixed.
fn message(role: Role<'_>, stamp: &Stamp, body: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(body.len() + 160);
    field(&mut msg, LABEL);
    match role {
        Role::Request { method, path } => {
            field(&mut msg, b"request");
            field(&mut msg, method.as_bytes());
            field(&mut msg, path.as_bytes());
        }
        Role::Answer { status, request } => {
            field(&mut msg, b"answer");
            field(&mut msg, &status.to_be_bytes());
            field(&mut msg, request);
        }
    }
    field(&mut msg, &stamp.member.octets());
    field(&mut msg, &stamp.time.to_be_bytes());
    field(&mut msg, &stamp.nonce);
    field(&mut msg, body);
    msg
}

/// The headers of a message with `stamp` and `body` in `role`.
pub fn sign(
    key: &PairKey,
    role: Role<'_>,
    stamp: &Stamp,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let tag = hmac::sign(&key.0, &message(role, stamp, body));
    vec![
        (H_MEMBER, stamp.member.to_string()),
        (H_TIME, stamp.time.to_string()),
        (H_NONCE, hex(&stamp.nonce)),
        (H_MAC, hex(tag.as_ref())),
    ]
}

/// Check a message's headers (`header` looks one up by its lower-case
/// name) against `key`: sent by `expect` within [`SKEW`] of `now`, with a
/// valid MAC over `body` in `role`. The stamp when it holds; nonces are
/// the caller's ([`Nonces`]).
pub fn verify(
    key: &PairKey,
    role: Role<'_>,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    expect: Ipv4Addr,
    now: u64,
) -> Result<Stamp, AuthError> {
    let (Some(member), Some(time), Some(nonce), Some(mac)) = (
        header(H_MEMBER),
        header(H_TIME),
        header(H_NONCE),
        header(H_MAC),
    ) else {
        return Err(AuthError::Missing);
    };
    let member: Ipv4Addr = member
        .trim()
        .parse()
        .map_err(|_| AuthError::Malformed(H_MEMBER))?;
    let time: u64 = time
        .trim()
        .parse()
        .map_err(|_| AuthError::Malformed(H_TIME))?;
    let nonce: [u8; 16] = unhex(nonce.trim())
        .and_then(|n| n.try_into().ok())
        .ok_or(AuthError::Malformed(H_NONCE))?;
    let mac = unhex(mac.trim()).ok_or(AuthError::Malformed(H_MAC))?;
    if member != expect {
        return Err(AuthError::WrongMember(member, expect));
    }
    let off = i128::from(time) - i128::from(now);
    if off.unsigned_abs() > u128::from(SKEW) {
        return Err(AuthError::Stale(off));
    }
    let stamp = Stamp {
        member,
        time,
        nonce,
    };
    // ring compares in constant time.
    hmac::verify(&key.0, &message(role, &stamp, body), &mac).map_err(|_| AuthError::BadMac)?;
    Ok(stamp)
}

/// The request nonces seen lately (the last [`NONCES`]): a request whose
/// nonce is among them is a replay.
#[derive(Debug, Default)]
pub struct Nonces {
    seen: HashSet<[u8; 16]>,
    order: VecDeque<[u8; 16]>,
}

impl Nonces {
    /// Remember `nonce`; false when it was seen already.
    pub fn fresh(&mut self, nonce: [u8; 16]) -> bool {
        if !self.seen.insert(nonce) {
            return false;
        }
        self.order.push_back(nonce);
        if self.order.len() > NONCES
            && let Some(old) = self.order.pop_front()
        {
            self.seen.remove(&old);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 251);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 252);
    const REQ: Role<'static> = Role::Request {
        method: "POST",
        path: "/api/ha/state",
    };

    fn lookup<'h>(h: &'h [(&'static str, String)]) -> impl Fn(&str) -> Option<String> + 'h {
        move |n| h.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone())
    }

    #[test]
    fn a_signed_request_verifies_and_carries_no_key() {
        let key = PairKey::new("pair-secret-0123456789");
        let stamp = Stamp::new(A, 1000);
        let h = sign(&key, REQ, &stamp, b"{}");
        assert!(h.iter().all(|(_, v)| !v.contains("pair-secret")));
        assert_eq!(verify(&key, REQ, &lookup(&h), b"{}", A, 1030), Ok(stamp));
        assert!(!format!("{key:?}").contains("pair"));
    }

    #[test]
    fn every_covered_part_matters() {
        let key = PairKey::new("pair-secret-0123456789");
        let stamp = Stamp::new(A, 1000);
        let h = sign(&key, REQ, &stamp, b"{}");
        let f = lookup(&h);
        let other = PairKey::new("another-secret-0123456");
        assert_eq!(
            verify(&other, REQ, &f, b"{}", A, 1000),
            Err(AuthError::BadMac)
        );
        assert_eq!(
            verify(&key, REQ, &f, b"{ }", A, 1000),
            Err(AuthError::BadMac)
        );
        let get = Role::Request {
            method: "GET",
            path: "/api/ha/state",
        };
        assert_eq!(
            verify(&key, get, &f, b"{}", A, 1000),
            Err(AuthError::BadMac)
        );
        // A request cannot pass as an answer.
        let ans = Role::Answer {
            status: 200,
            request: &stamp.nonce,
        };
        assert_eq!(
            verify(&key, ans, &f, b"{}", A, 1000),
            Err(AuthError::BadMac)
        );
        // The member is checked, and covered.
        assert!(matches!(
            verify(&key, REQ, &f, b"{}", B, 1000),
            Err(AuthError::WrongMember(..))
        ));
        let mut forged = h.clone();
        forged[0].1 = B.to_string();
        assert_eq!(
            verify(&key, REQ, &lookup(&forged), b"{}", B, 1000),
            Err(AuthError::BadMac)
        );
        // Stale either way, missing, malformed.
        assert!(matches!(
            verify(&key, REQ, &f, b"{}", A, 1000 + SKEW + 1),
            Err(AuthError::Stale(_))
        ));
        assert!(matches!(
            verify(&key, REQ, &f, b"{}", A, 1000 - SKEW - 1),
            Err(AuthError::Stale(_))
        ));
        assert_eq!(
            verify(&key, REQ, &|_| None, b"{}", A, 1000),
            Err(AuthError::Missing)
        );
        let mut bad = h.clone();
        bad[2].1 = "zz".into();
        assert_eq!(
            verify(&key, REQ, &lookup(&bad), b"{}", A, 1000),
            Err(AuthError::Malformed(H_NONCE))
        );
    }

    #[test]
    fn an_answer_is_bound_to_its_request() {
        let key = PairKey::new("pair-secret-0123456789");
        let (r1, r2) = (Stamp::new(A, 1000), Stamp::new(A, 1001));
        assert_ne!(r1.nonce, r2.nonce);
        let role = |r: &'static [u8; 16]| Role::Answer {
            status: 200,
            request: r,
        };
        let n1: &'static [u8; 16] = Box::leak(Box::new(r1.nonce));
        let n2: &'static [u8; 16] = Box::leak(Box::new(r2.nonce));
        let h = sign(&key, role(n1), &Stamp::new(B, 1000), b"doc");
        assert!(verify(&key, role(n1), &lookup(&h), b"doc", B, 1000).is_ok());
        assert_eq!(
            verify(&key, role(n2), &lookup(&h), b"doc", B, 1001),
            Err(AuthError::BadMac),
            "replayed to another request"
        );
    }

    #[test]
    fn nonces_are_refused_when_repeated_and_bounded() {
        let mut n = Nonces::default();
        assert!(n.fresh([1; 16]));
        assert!(!n.fresh([1; 16]));
        for i in 0..NONCES as u32 + 10 {
            let mut x = [0u8; 16];
            x[..4].copy_from_slice(&i.to_be_bytes());
            x[15] = 9;
            n.fresh(x);
        }
        assert!(n.seen.len() <= NONCES && n.order.len() <= NONCES);
    }
}
