//! Ignition bodies: located, read (and merged: a node's hostname, a static
//! node's keyfile) once, then shared.
//!
//! Role: `/ignition/` answers used to read the file (and merge the
//! hostname) per request, so 8 parallel fetches of a 50 MB config held 8+
//! copies (RSS 52 → 945 MB). Then each node's merged body was a copy of its
//! role file of its own, and each merge built the document three times: a
//! 50 MB `master.ign` served to three masters took 25 → 471 MB. Now a file
//! is read into one [`Bytes`] per version, shared by every response, and a
//! node's merged body is pieces of it: slices of that one body and the few
//! bytes the merge adds (`ignmerge`). Memory is one body per file version
//! plus a little per node.
//!
//! Invariants:
//! - A cache key is the file's `(path, dev, inode, size, mtime)` — plus the
//!   entries merged in, for a node's body — taken with `fstat` on the
//!   handle that is read, so a rewritten or replaced file is a new key and
//!   is served fresh; a file that changes while being read is served but
//!   not cached. Inserting a key drops the entries of older versions of the
//!   same file (same path, and same entries for merges).
//! - A merged entry is kept only while the entry of the file version it
//!   slices is (dropping a file's entry drops its merges), so every cached
//!   file body is counted once, in its own entry; a merged entry counts
//!   the bytes it adds.
//! - At most [`MAX_CACHE_BYTES`] are counted; the least recently used
//!   entries go first. A hit costs a path resolution and an `fstat` on the
//!   blocking pool — at most once per [`RECHECK`] per (dir, target): in
//!   between, the entry found last is trusted (while the cache keeps it),
//!   so a rewritten file is served within [`RECHECK`] and a burst of
//!   fetches costs no thread hop (the hop, not the syscalls, was most of
//!   the per-request CPU). Such a hit hashes the target only (no path, no
//!   key) and allocates nothing: the body's pieces, ETag and detail are
//!   shared (`Arc`, `Bytes`).
//! - One load per key at a time (the others wait for it and share its
//!   result: N parallel first fetches of a file, or of several nodes of one
//!   role, read the file once), and at most [`MAX_LOADS`] reads/merges at
//!   once (a semaphore permit).

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::HeaderValue;
use tokio::sync::Semaphore;

mod source;

use super::ignition::Target;
use crate::runtime::sync::LockExt as _;
pub(super) use source::of_bytes;
use source::{Key, Located, locate, merge, read};

/// Bytes of bodies the cache keeps at most.
pub(super) const MAX_CACHE_BYTES: usize = 256 * 1024 * 1024;
/// Ignition reads/merges running at once.
pub(super) const MAX_LOADS: usize = 2;
/// How long the file found for a (dir, target) is trusted unlooked-at.
pub(super) const RECHECK: Duration = Duration::from_secs(1);

/// Why an ignition body could not be made.
#[derive(Debug, thiserror::Error)]
pub(super) enum IgnError {
    /// The file to serve does not exist (name relative to ignitionDir).
    #[error("{0} missing")]
    Missing(String),
    /// The file exists but cannot be served (unreadable, too big, invalid).
    #[error("{0}")]
    Broken(String),
}

/// One shared body (in pieces) and its validator.
#[derive(Debug, Clone)]
pub(super) struct IgnBody {
    /// The body: one piece for a file served as it is; a merged body is
    /// slices of its role file's cached bytes and the bytes the merge adds.
    pub parts: Arc<[Bytes]>,
    pub etag: Arc<str>,
    /// `etag` as a header value, made once per body.
    pub etag_value: HeaderValue,
    /// How it was made (`role file`, `node file`, `master.ign + hostname …`).
    pub detail: Arc<str>,
}

impl IgnBody {
    fn new(parts: Arc<[Bytes]>, etag: String, detail: Arc<str>) -> IgnBody {
        let etag_value = HeaderValue::from_maybe_shared(Bytes::from(etag.clone()))
            .unwrap_or_else(|_| HeaderValue::from_static("\"invalid\""));
        IgnBody {
            parts,
            etag: etag.into(),
            etag_value,
            detail,
        }
    }

    /// Body bytes.
    pub(super) fn len(&self) -> u64 {
        self.parts.iter().map(|p| p.len() as u64).sum()
    }
}

/// A cached body and when it was last served (for LRU).
struct Cached {
    body: IgnBody,
    used: AtomicU64,
}

struct Entry {
    cached: Arc<Cached>,
    /// Bytes counted against [`MAX_CACHE_BYTES`].
    cost: usize,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Key, Entry>,
    bytes: usize,
}

/// The entry located last for a target, trusted for the recheck window.
struct Recent {
    dir: PathBuf,
    at: Instant,
    /// Gone when the cache dropped the entry (then the file is located
    /// again).
    hit: Weak<Cached>,
}

impl Inner {
    /// Drop `key`, and with a file's body the merges that slice it.
    fn remove(&mut self, key: &Key) {
        if let Some(e) = self.map.remove(key) {
            self.bytes -= e.cost;
        }
        if !key.is_merge() {
            let merges: Vec<Key> = self
                .map
                .keys()
                .filter(|k| k.is_merge() && k.file == key.file)
                .cloned()
                .collect();
            for k in merges {
                self.remove(&k);
            }
        }
    }
}

/// Shared ignition bodies plus the bounds on loads.
pub(super) struct IgnCache {
    inner: Mutex<Inner>,
    loads: Semaphore,
    /// Keys being loaded: later requests for one wait for its first load.
    flights: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    /// Target → the entry located last for it (and under which dir, when).
    recent: Mutex<HashMap<Target, Recent>>,
    /// LRU clock: bumped per served body.
    tick: AtomicU64,
    recheck: Duration,
}

impl Default for IgnCache {
    fn default() -> Self {
        IgnCache::with_recheck(RECHECK)
    }
}

impl IgnCache {
    /// A cache that trusts a located file for `recheck` ([`RECHECK`] by
    /// default; zero: look at the file on every request).
    pub(super) fn with_recheck(recheck: Duration) -> IgnCache {
        IgnCache {
            inner: Mutex::default(),
            loads: Semaphore::new(MAX_LOADS),
            flights: Mutex::default(),
            recent: Mutex::default(),
            tick: AtomicU64::new(0),
            recheck,
        }
    }
}

impl IgnCache {
    /// Mark `c` served now (LRU) and share its body.
    fn serve(&self, c: &Cached) -> IgnBody {
        let tick = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        c.used.store(tick, Ordering::Relaxed);
        c.body.clone()
    }

    /// The cached body located for `t` under `dir` less than [`RECHECK`]
    /// ago, if the cache still holds it.
    fn recent_body(&self, dir: &Path, t: &Target) -> Option<IgnBody> {
        let hit = {
            let recent = self.recent.locked();
            let r = recent.get(t)?;
            if r.dir != dir || r.at.elapsed() >= self.recheck {
                return None;
            }
            r.hit.upgrade()?
        };
        Some(self.serve(&hit))
    }

    /// Trust the entry of `key` (if cached) for `t` under `dir` for the
    /// recheck window.
    fn remember(&self, dir: &Path, t: &Target, key: &Key) {
        let hit = self
            .inner
            .locked()
            .map
            .get(key)
            .map_or_else(Weak::new, |e| Arc::downgrade(&e.cached));
        let mut recent = self.recent.locked();
        // Bounded by the cluster's targets; forget stale ones when it grows.
        if recent.len() > 1024 {
            recent.retain(|_, r| r.at.elapsed() < self.recheck);
        }
        let r = Recent {
            dir: dir.to_path_buf(),
            at: Instant::now(),
            hit,
        };
        recent.insert(t.clone(), r);
    }

    fn get(&self, key: &Key) -> Option<IgnBody> {
        let hit = self.inner.locked().map.get(key)?.cached.clone();
        Some(self.serve(&hit))
    }

    /// Cache `body` under `key`, counting `cost` bytes. A merged body is
    /// kept only while the body it slices is.
    fn insert(&self, key: Key, body: IgnBody, cost: usize) {
        if cost > MAX_CACHE_BYTES {
            return;
        }
        let mut g = self.inner.locked();
        let inner = &mut *g;
        // Older versions of the same source are never served again.
        let stale: Vec<Key> = inner
            .map
            .keys()
            .filter(|k| k.same_source(&key) && **k != key)
            .cloned()
            .collect();
        for k in stale {
            inner.remove(&k);
        }
        while inner.bytes + cost > MAX_CACHE_BYTES {
            let Some(oldest) = inner
                .map
                .iter()
                .min_by_key(|(_, e)| e.cached.used.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            inner.remove(&oldest);
        }
        if key.is_merge() && !inner.map.contains_key(&key.base()) {
            return;
        }
        inner.remove(&key);
        inner.bytes += cost;
        let used = AtomicU64::new(self.tick.fetch_add(1, Ordering::Relaxed) + 1);
        let cached = Arc::new(Cached { body, used });
        inner.map.insert(key, Entry { cached, cost });
    }

    /// The body of `key`: from the cache, else made by `make` — one load
    /// per key at a time (later callers wait and find it cached), at most
    /// [`MAX_LOADS`] at once — and cached unless `make` says the file
    /// changed meanwhile.
    async fn once<F, Fut>(&self, key: &Key, make: F) -> Result<IgnBody, IgnError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(IgnBody, usize, bool), IgnError>>,
    {
        if let Some(b) = self.get(key) {
            return Ok(b);
        }
        let flight = self
            .flights
            .locked()
            .entry(key.clone())
            .or_default()
            .clone();
        let r = async {
            let _turn = flight.lock().await;
            if let Some(b) = self.get(key) {
                return Ok(b);
            }
            let _permit = self
                .loads
                .acquire()
                .await
                .map_err(|e| IgnError::Broken(format!("ignition load bound: {e}")))?;
            let (body, cost, cacheable) = make().await?;
            if cacheable {
                self.insert(key.clone(), body.clone(), cost);
            }
            Ok(body)
        }
        .await;
        let mut flights = self.flights.locked();
        // Forget the flight when no one else holds it (the map and us).
        if flights.get(key).is_some_and(|f| Arc::strong_count(f) <= 2) {
            flights.remove(key);
        }
        r
    }

    /// The file body of `l` (its key's base: a merge reads its role file).
    async fn file_body(&self, l: Located) -> Result<IgnBody, IgnError> {
        let key = l.key.base();
        self.once(&key, || async move {
            let (body, fresh) = tokio::task::spawn_blocking(move || read(&l))
                .await
                .map_err(|e| IgnError::Broken(format!("ignition task failed: {e}")))??;
            let cost = body.len() as usize;
            Ok((body, cost, fresh))
        })
        .await
    }

    /// The body answering `t` from `dir`: shared from the cache while the
    /// source file is unchanged, else read (and merged) under the load
    /// bounds and cached.
    pub(super) async fn load(&self, dir: &Path, t: &Target) -> Result<IgnBody, IgnError> {
        if let Some(b) = self.recent_body(dir, t) {
            return Ok(b);
        }
        // Boxed: the hit above keeps the caller's future small.
        Box::pin(self.locate_and_load(dir, t)).await
    }

    /// [`IgnCache::load`] past the recent hit: locate the file, then its
    /// body.
    async fn locate_and_load(&self, dir: &Path, t: &Target) -> Result<IgnBody, IgnError> {
        let (d, tt) = (dir.to_path_buf(), t.clone());
        let located = tokio::task::spawn_blocking(move || locate(&d, &tt))
            .await
            .map_err(|e| IgnError::Broken(format!("ignition task failed: {e}")))??;
        let key = located.key.clone();
        let body = self.located_body(located).await;
        // Trusted only once cached (a file that changed while read is not).
        self.remember(dir, t, &key);
        body
    }

    /// The body of a located file: cached, else read (and merged).
    async fn located_body(&self, located: Located) -> Result<IgnBody, IgnError> {
        if let Some(b) = self.get(&located.key) {
            return Ok(b);
        }
        let key = located.key.clone();
        if !key.is_merge() {
            return self.file_body(located).await;
        }
        let (path, detail) = (located.path.clone(), located.detail.clone());
        let name = located.name.clone();
        let base = self.file_body(located).await?;
        let entries = key.added.clone();
        self.once(&key, || async move {
            let (merged, added) =
                tokio::task::spawn_blocking(move || merge(&base, &entries, (&path, &name), detail))
                    .await
                    .map_err(|e| IgnError::Broken(format!("ignition task failed: {e}")))??;
            // The slices of the base are counted with the base.
            Ok((merged, added, true))
        })
        .await
    }

    /// Bytes counted now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.inner.locked().bytes
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use super::source::FileId;
    use super::*;
    use crate::model::cluster::Role;
    use crate::services::http::ignmerge::FileEntry;
    use crate::services::http::range;

    fn text(b: &IgnBody) -> String {
        b.parts
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect()
    }

    #[tokio::test]
    async fn a_rewrite_is_seen_after_the_recheck_window() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("master.ign"), br#"{"ignition":{"version":"3.2.0"}}"#).unwrap();
        let c = IgnCache::with_recheck(Duration::from_millis(200));
        let role = Target::Role(Role::Master);
        let a = c.load(d, &role).await.unwrap();
        std::fs::write(d.join("master.ign"), br#"{"ignition":{"version":"3.4.0"}}"#).unwrap();
        // Within the window the file is not looked at again...
        let b = c.load(d, &role).await.unwrap();
        assert_eq!(a.parts[0].as_ptr(), b.parts[0].as_ptr());
        // ...after it, the rewrite is served.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let fresh = c.load(d, &role).await.unwrap();
        assert!(text(&fresh).contains("3.4.0"));
    }

    #[tokio::test]
    async fn shares_bodies_and_sees_changes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("master.ign"), br#"{"ignition":{"version":"3.2.0"}}"#).unwrap();
        let c = IgnCache::with_recheck(Duration::ZERO);
        let role = Target::Role(Role::Master);
        let a = c.load(d, &role).await.unwrap();
        let b = c.load(d, &role).await.unwrap();
        assert_eq!(a.parts[0].as_ptr(), b.parts[0].as_ptr(), "one shared body");
        let node = Target::Node {
            node: "m0".into(),
            role: Role::Master,
            hostname: "m0.c.example.com".into(),
            keyfile: None,
        };
        let m = c.load(d, &node).await.unwrap();
        assert!(text(&m).contains("m0.c.example.com"));
        assert_eq!(m.len(), text(&m).len() as u64);
        assert_eq!(
            m.parts[0].as_ptr(),
            c.load(d, &node).await.unwrap().parts[0].as_ptr()
        );
        let held = c.held();
        // A rewrite (new size) is served fresh and replaces the old entries.
        std::fs::write(d.join("master.ign"), br#"{"ignition":{"version":"3.4.0"}}"#).unwrap();
        let a2 = c.load(d, &role).await.unwrap();
        assert!(text(&a2).contains("3.4.0"));
        assert_ne!(a2.etag, a.etag);
        assert!(c.held() <= held + 2);
        assert!(matches!(
            c.load(d, &Target::Role(Role::Worker)).await,
            Err(IgnError::Missing(_))
        ));
    }

    /// A static node's keyfile is merged into its role's file after the
    /// hostname, and into its own file alone; the DHCP twin of each is
    /// what it was (the role file + hostname; its own file verbatim).
    #[tokio::test]
    async fn a_static_nodes_keyfile_goes_into_its_role_or_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("master.ign"), br#"{"ignition":{"version":"3.2.0"}}"#).unwrap();
        let c = IgnCache::with_recheck(Duration::ZERO);
        let keyfile = FileEntry {
            path: "/etc/NetworkManager/system-connections/eth0.nmconnection".into(),
            mode: 0o600,
            contents: "[connection]\nid=eth0\n".into(),
            what: "the static address keyfile",
            yields_to: Some("/etc/NetworkManager/system-connections/"),
        };
        let node = |keyfile: Option<FileEntry>| Target::Node {
            node: "m0".into(),
            role: Role::Master,
            hostname: "m0.c.example.com".into(),
            keyfile,
        };
        let paths = |b: &IgnBody| -> Vec<(String, u64)> {
            let v: serde_json::Value = serde_json::from_str(&text(b)).unwrap();
            v["storage"]["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["path"].as_str().unwrap().into(),
                        f["mode"].as_u64().unwrap(),
                    )
                })
                .collect()
        };
        let kf = (keyfile.path.clone(), 384);
        let st = c.load(d, &node(Some(keyfile.clone()))).await.unwrap();
        assert_eq!(paths(&st), [("/etc/hostname".into(), 420), kf.clone()]);
        assert_eq!(
            &*st.detail,
            "master.ign + hostname m0.c.example.com + eth0.nmconnection"
        );
        let dhcp = c.load(d, &node(None)).await.unwrap();
        assert_eq!(paths(&dhcp), [("/etc/hostname".into(), 420)]);
        assert_eq!(&*dhcp.detail, "master.ign + hostname m0.c.example.com");
        // Its own file: the keyfile alone; verbatim for a DHCP node.
        let own = br#"{"ignition":{"version":"3.4.0"},"storage":{"files":[]}}"#;
        std::fs::write(d.join("m0.ign"), own).unwrap();
        let st = c.load(d, &node(Some(keyfile.clone()))).await.unwrap();
        assert_eq!(paths(&st), [kf]);
        assert_eq!(&*st.detail, "m0.ign + eth0.nmconnection");
        let dhcp = c.load(d, &node(None)).await.unwrap();
        assert_eq!(text(&dhcp).as_bytes(), own);
        assert_eq!(&*dhcp.detail, "node file");
        // Its own file writes a connection of its own: served as it is.
        let bond = br#"{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/NetworkManager/system-connections/bond0.nmconnection"}]}}"#;
        std::fs::write(d.join("m0.ign"), bond).unwrap();
        let st = c.load(d, &node(Some(keyfile.clone()))).await.unwrap();
        assert_eq!(text(&st).as_bytes(), bond);
        assert_eq!(
            &*st.detail,
            "m0.ign, its own NetworkManager connections (no eth0.nmconnection)"
        );
    }

    fn master(n: usize) -> Target {
        Target::Node {
            node: format!("master-{n}"),
            role: Role::Master,
            hostname: format!("master-{n}.c.example.com"),
            keyfile: None,
        }
    }

    /// Three masters merged from one large role file, fetched at once:
    /// their bodies are slices of one cached copy of the file (it was one
    /// copy per node), the cache counts the file once, and the merged
    /// bodies are right.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn node_merges_share_their_role_files_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut doc = String::from(r#"{"ignition":{"version":"3.2.0"},"pad":""#);
        doc.push_str(&"x".repeat(2_000_000));
        doc.push_str(r#"","storage":{"files":[{"path":"/etc/motd"}]}}"#);
        std::fs::write(d.join("master.ign"), &doc).unwrap();
        let c = Arc::new(IgnCache::with_recheck(Duration::ZERO));
        let tasks: Vec<_> = (0..3)
            .map(|n| {
                let (c, d) = (c.clone(), d.to_path_buf());
                tokio::spawn(async move { c.load(&d, &master(n)).await.unwrap() })
            })
            .collect();
        let mut bodies = Vec::new();
        for t in tasks {
            bodies.push(t.await.unwrap());
        }
        let role = c.load(d, &Target::Role(Role::Master)).await.unwrap();
        let file = role.parts[0].as_ptr_range();
        for (n, b) in bodies.iter().enumerate() {
            let big = b.parts.iter().find(|p| p.len() > 1_000_000).unwrap();
            assert!(file.contains(&big.as_ptr()), "master-{n} copied the file");
            let v: serde_json::Value = serde_json::from_str(&text(b)).unwrap();
            assert_eq!(v["storage"]["files"][0]["path"], "/etc/motd");
            assert_eq!(
                v["storage"]["files"][1]["contents"]["source"],
                format!("data:,master-{n}.c.example.com%0A")
            );
            assert_eq!(&*b.etag, range::content_etag(text(b).as_bytes()));
        }
        assert!(c.held() < doc.len() + 3 * 1024, "held {}", c.held());
        // Dropping the file's entry drops the merges that slice it.
        c.inner.locked().remove(&Key {
            file: FileId::of(
                &d.join("master.ign"),
                &File::open(d.join("master.ign")).unwrap(),
            )
            .unwrap(),
            added: Vec::new(),
        });
        assert_eq!((c.held(), c.inner.locked().map.len()), (0, 0));
    }
}
