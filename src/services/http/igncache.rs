//! Ignition bodies: located, read (and hostname-merged) once, then shared.
//!
//! Role: `/ignition/` answers used to read the file (and merge the
//! hostname) per request, so 8 parallel fetches of a 50 MB config held 8+
//! copies (RSS 52 → 945 MB). Now every body is one [`Bytes`] shared by all
//! responses, cached under the identity of the file it came from.
//!
//! Invariants:
//! - A cache key is the file's `(path, dev, inode, size, mtime)` — plus the
//!   hostname for a merged node body — taken with `fstat` on the handle
//!   that is read, so a rewritten or replaced file is a new key and is
//!   served fresh; a file that changes while being read is served but not
//!   cached. Inserting a key drops the entries of older versions of the
//!   same file (same path, and hostname for merges).
//! - At most [`MAX_CACHE_BYTES`] of bodies are kept; the least recently
//!   used go first. A hit costs a path resolution and an `fstat` on the
//!   blocking pool — at most once per [`RECHECK`] per (dir, target): in
//!   between, the key found last is trusted, so a rewritten file is served
//!   within [`RECHECK`] and a burst of fetches costs no thread hop (the
//!   hop, not the syscalls, was most of the per-request CPU).
//! - At most [`MAX_LOADS`] reads/merges run at once ([`IgnCache::load`]
//!   holds a semaphore permit), and a waiter re-checks the cache first, so
//!   N parallel first fetches of one file read it once.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Semaphore;

use super::ignition::{self, Target};
use super::{MAX_IGNITION, path, range};
use crate::runtime::sync::LockExt as _;

/// Bytes of bodies the cache keeps at most.
pub const MAX_CACHE_BYTES: usize = 256 * 1024 * 1024;
/// Ignition reads/merges running at once.
pub const MAX_LOADS: usize = 2;
/// How long the file found for a (dir, target) is trusted unlooked-at.
pub const RECHECK: Duration = Duration::from_secs(1);

/// Why an ignition body could not be made.
#[derive(Debug, thiserror::Error)]
pub enum IgnError {
    /// The file to serve does not exist (name relative to ignitionDir).
    #[error("{0} missing")]
    Missing(String),
    /// The file exists but cannot be served (unreadable, too big, invalid).
    #[error("{0}")]
    Broken(String),
}

/// Which version of which file a body was made from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileId {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileId {
    fn of(path: &Path, file: &File) -> std::io::Result<FileId> {
        let m = file.metadata()?;
        Ok(FileId {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    file: FileId,
    /// The hostname merged in, for a node served from its role file.
    hostname: Option<String>,
}

impl Key {
    fn same_source(&self, other: &Key) -> bool {
        self.file.path == other.file.path && self.hostname == other.hostname
    }
}

/// One shared body and its validator.
#[derive(Debug, Clone)]
pub struct IgnBody {
    pub bytes: Bytes,
    pub etag: String,
    /// How it was made (`role file`, `node file`, `master.ign + hostname …`).
    pub detail: String,
}

struct Entry {
    body: IgnBody,
    used: u64,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Key, Entry>,
    bytes: usize,
    tick: u64,
}

/// The located source of a body: the opened file and its key.
struct Located {
    key: Key,
    path: PathBuf,
    file: File,
    detail: String,
}

/// Shared ignition bodies plus the bound on concurrent loads.
pub struct IgnCache {
    inner: Mutex<Inner>,
    loads: Semaphore,
    /// (dir, target) → the key located last, and when.
    recent: Mutex<HashMap<(PathBuf, Target), (Instant, Key)>>,
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
    pub fn with_recheck(recheck: Duration) -> IgnCache {
        IgnCache {
            inner: Mutex::default(),
            loads: Semaphore::new(MAX_LOADS),
            recent: Mutex::default(),
            recheck,
        }
    }
}

/// Open `<name>.ign` under `dir`: `Ok(None)` when it does not exist.
fn open_ign(dir: &Path, name: &str) -> Result<Option<(PathBuf, File, FileId)>, IgnError> {
    let rel = PathBuf::from(format!("{name}.ign"));
    match path::resolve(dir, &rel) {
        path::Resolved::NotFound(_) => Ok(None),
        path::Resolved::File { path, file, .. } => {
            let id = FileId::of(&path, &file)
                .map_err(|e| IgnError::Broken(format!("stat {}: {e}", path.display())))?;
            if id.size > MAX_IGNITION {
                return Err(IgnError::Broken(format!(
                    "{} is larger than {MAX_IGNITION} bytes",
                    path.display()
                )));
            }
            Ok(Some((path, file, id)))
        }
    }
}

/// Which file answers `t`, opened. Blocking.
fn locate(dir: &Path, t: &Target) -> Result<Located, IgnError> {
    match t {
        Target::Role(role) => {
            let (path, file, id) = open_ign(dir, role.as_str())?
                .ok_or_else(|| IgnError::Missing(format!("{role}.ign")))?;
            Ok(Located {
                key: Key {
                    file: id,
                    hostname: None,
                },
                path,
                file,
                detail: "role file".into(),
            })
        }
        Target::Node {
            node,
            role,
            hostname,
        } => {
            if let Some((path, file, id)) = open_ign(dir, node)? {
                return Ok(Located {
                    key: Key {
                        file: id,
                        hostname: None,
                    },
                    path,
                    file,
                    detail: "node file".into(),
                });
            }
            let (path, file, id) = open_ign(dir, role.as_str())?
                .ok_or_else(|| IgnError::Missing(format!("{node}.ign and {role}.ign")))?;
            Ok(Located {
                key: Key {
                    file: id,
                    hostname: Some(hostname.clone()),
                },
                path,
                file,
                detail: format!("{role}.ign + hostname {hostname}"),
            })
        }
    }
}

/// Read (and merge) the located file; `cacheable` is false when the file
/// changed while it was read. Blocking.
fn build(l: &Located) -> Result<(IgnBody, bool), IgnError> {
    use std::io::Read as _;
    // Sized up front: the shared body keeps its allocation.
    let mut buf = Vec::with_capacity(l.key.file.size as usize + 1);
    (&l.file)
        .take(MAX_IGNITION + 1)
        .read_to_end(&mut buf)
        .map_err(|e| IgnError::Broken(format!("reading {}: {e}", l.path.display())))?;
    if buf.len() as u64 > MAX_IGNITION {
        return Err(IgnError::Broken(format!(
            "{} is larger than {MAX_IGNITION} bytes",
            l.path.display()
        )));
    }
    let unchanged = FileId::of(&l.path, &l.file).is_ok_and(|id| id == l.key.file)
        && buf.len() as u64 == l.key.file.size;
    if let Some(hostname) = &l.key.hostname {
        buf = ignition::merge_hostname(&buf, hostname).map_err(|e| {
            IgnError::Broken(format!(
                "cannot merge the hostname into {}: {e}",
                l.path.display()
            ))
        })?;
    }
    let etag = range::content_etag(&buf);
    Ok((
        IgnBody {
            bytes: Bytes::from(buf),
            etag,
            detail: l.detail.clone(),
        },
        unchanged,
    ))
}

impl IgnCache {
    /// The cached body of the key located for `id` less than [`RECHECK`] ago.
    fn recent_body(&self, id: &(PathBuf, Target)) -> Option<IgnBody> {
        let key = {
            let recent = self.recent.locked();
            let (at, key) = recent.get(id)?;
            if at.elapsed() >= self.recheck {
                return None;
            }
            key.clone()
        };
        self.get(&key)
    }

    fn remember(&self, id: (PathBuf, Target), key: &Key) {
        let mut recent = self.recent.locked();
        // Bounded by the cluster's targets; forget stale ones when it grows.
        if recent.len() > 1024 {
            recent.retain(|_, (at, _)| at.elapsed() < self.recheck);
        }
        recent.insert(id, (Instant::now(), key.clone()));
    }

    fn get(&self, key: &Key) -> Option<IgnBody> {
        let mut g = self.inner.locked();
        g.tick += 1;
        let tick = g.tick;
        let e = g.map.get_mut(key)?;
        e.used = tick;
        Some(e.body.clone())
    }

    fn insert(&self, key: Key, body: IgnBody) {
        let size = body.bytes.len();
        if size > MAX_CACHE_BYTES {
            return;
        }
        let mut g = self.inner.locked();
        let inner = &mut *g;
        // Older versions of the same source are never served again.
        inner.map.retain(|k, e| {
            let stale = k.same_source(&key);
            if stale {
                inner.bytes -= e.body.bytes.len();
            }
            !stale
        });
        while inner.bytes + size > MAX_CACHE_BYTES {
            let Some(oldest) = inner
                .map
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = inner.map.remove(&oldest) {
                inner.bytes -= e.body.bytes.len();
            }
        }
        inner.tick += 1;
        inner.bytes += size;
        let used = inner.tick;
        inner.map.insert(key, Entry { body, used });
    }

    /// The body answering `t` from `dir`: shared from the cache while the
    /// source file is unchanged, else read (and merged) under the load
    /// bound and cached.
    pub async fn load(&self, dir: &Path, t: &Target) -> Result<IgnBody, IgnError> {
        let id = (dir.to_path_buf(), t.clone());
        if let Some(b) = self.recent_body(&id) {
            return Ok(b);
        }
        let (dir, t) = id.clone();
        let located = tokio::task::spawn_blocking(move || locate(&dir, &t))
            .await
            .map_err(|e| IgnError::Broken(format!("ignition task failed: {e}")))??;
        self.remember(id, &located.key);
        if let Some(b) = self.get(&located.key) {
            return Ok(b);
        }
        let _permit = self
            .loads
            .acquire()
            .await
            .map_err(|e| IgnError::Broken(format!("ignition load bound: {e}")))?;
        // Another request may have built it while this one waited.
        if let Some(b) = self.get(&located.key) {
            return Ok(b);
        }
        let (key, (body, cacheable)) = tokio::task::spawn_blocking(move || {
            let built = build(&located);
            built.map(|b| (located.key, b))
        })
        .await
        .map_err(|e| IgnError::Broken(format!("ignition task failed: {e}")))??;
        if cacheable {
            self.insert(key, body.clone());
        }
        Ok(body)
    }

    /// Bytes held now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.inner.locked().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Role;

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
        assert_eq!(a.bytes.as_ptr(), b.bytes.as_ptr());
        // ...after it, the rewrite is served.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let fresh = c.load(d, &role).await.unwrap();
        assert!(String::from_utf8_lossy(&fresh.bytes).contains("3.4.0"));
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
        assert_eq!(a.bytes.as_ptr(), b.bytes.as_ptr(), "one shared body");
        let node = Target::Node {
            node: "m0".into(),
            role: Role::Master,
            hostname: "m0.c.example.com".into(),
        };
        let m = c.load(d, &node).await.unwrap();
        assert!(String::from_utf8_lossy(&m.bytes).contains("m0.c.example.com"));
        assert_eq!(
            m.bytes.as_ptr(),
            c.load(d, &node).await.unwrap().bytes.as_ptr()
        );
        let held = c.held();
        // A rewrite (new size) is served fresh and replaces the old entries.
        std::fs::write(d.join("master.ign"), br#"{"ignition":{"version":"3.4.0"}}"#).unwrap();
        let a2 = c.load(d, &role).await.unwrap();
        assert!(String::from_utf8_lossy(&a2.bytes).contains("3.4.0"));
        assert_ne!(a2.etag, a.etag);
        assert!(c.held() <= held + 2);
        assert!(matches!(
            c.load(d, &Target::Role(Role::Worker)).await,
            Err(IgnError::Missing(_))
        ));
    }
}
