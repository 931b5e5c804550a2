//! The distribution registry's filesystem layout (`registry/storage/
//! paths.go`), read and written in place: what Debian's `docker-registry`,
//! `registry:2` and oc-mirror v2's cache write is served as is, and what is
//! written here they serve as is.
//!
//!     <storage>/docker/registry/v2/
//!       blobs/sha256/<2 hex>/<64 hex>/data
//!       repositories/<name>/_layers/sha256/<hex>/link          "sha256:<hex>"
//!       repositories/<name>/_manifests/revisions/sha256/<hex>/link
//!       repositories/<name>/_manifests/tags/<tag>/current/link
//!       repositories/<name>/_manifests/tags/<tag>/index/sha256/<hex>/link
//!       repositories/<name>/_uploads/<id>/{data,startedat}
//!
//! Invariants:
//! - Nothing is written outside the root: every path is built from a
//!   checked [`Name`], tag, [`Digest`] or upload id (`names.rs`).
//! - A blob appears only by `rename` of a complete upload whose SHA-256
//!   matched, after `fsync` of the file; its directory is synced before the
//!   caller answers 201. A link is written the same way (temp file, sync,
//!   rename). Two uploads of one blob both succeed: the second rename finds
//!   the blob in place and leaves it.
//! - A blob is served only once its content was hashed since this process
//!   started (or it was written by it) and matched ([`Store::verified`]); a
//!   mismatch is remembered and reported, never served.
//!
//! Every function here does blocking file I/O: callers use
//! `spawn_blocking`.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};

use super::names::{Digest, Name, tag_ok, upload_id_ok};
use crate::runtime::sync::LockExt as _;

/// The registry root under `registry.storage`.
pub const ROOT: &str = "docker/registry/v2";

/// Whether a blob's content matches its digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Good,
    Missing,
    Corrupt,
}

pub struct Store {
    root: PathBuf,
    verified: std::sync::Mutex<BTreeSet<Digest>>,
    corrupt: std::sync::Mutex<BTreeSet<Digest>>,
}

impl Store {
    pub fn new(storage: &Path) -> Store {
        Store {
            root: storage.join(ROOT),
            verified: std::sync::Mutex::default(),
            corrupt: std::sync::Mutex::default(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        let hex = d.hex();
        self.root
            .join("blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn repo(&self, name: &Name) -> PathBuf {
        self.root.join("repositories").join(name.as_str())
    }

    fn layer_link(&self, name: &Name, d: &Digest) -> PathBuf {
        self.repo(name)
            .join("_layers/sha256")
            .join(d.hex())
            .join("link")
    }

    fn revision_link(&self, name: &Name, d: &Digest) -> PathBuf {
        self.repo(name)
            .join("_manifests/revisions/sha256")
            .join(d.hex())
            .join("link")
    }

    fn tag_dir(&self, name: &Name, tag: &str) -> PathBuf {
        self.repo(name).join("_manifests/tags").join(tag)
    }

    /// The blob's size when it is stored.
    pub fn blob_size(&self, d: &Digest) -> Option<u64> {
        fs::metadata(self.blob_path(d))
            .ok()
            .filter(fs::Metadata::is_file)
            .map(|m| m.len())
    }

    /// Whether `name` links blob `d` (a layer or config pushed to it or
    /// mounted into it).
    pub fn has_layer(&self, name: &Name, d: &Digest) -> bool {
        read_link(&self.layer_link(name, d)) == Some(*d)
    }

    /// Hash the blob unless already done since start; the result is kept.
    pub fn verified(&self, d: &Digest) -> Check {
        if self.verified.locked().contains(d) {
            return Check::Good;
        }
        let Ok(mut f) = File::open(self.blob_path(d)) else {
            return Check::Missing;
        };
        match hash_reader(&mut f) {
            Ok((sum, _)) if sum == *d => {
                self.verified.locked().insert(*d);
                self.corrupt.locked().remove(d);
                Check::Good
            }
            Ok(_) => {
                self.corrupt.locked().insert(*d);
                Check::Corrupt
            }
            Err(_) => Check::Missing,
        }
    }

    /// Blobs found not to match their digest since start.
    pub fn corrupt(&self) -> Vec<String> {
        self.corrupt
            .locked()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// Link blob `d` into `name` (after a push or a mount).
    pub fn link_layer(&self, name: &Name, d: &Digest) -> io::Result<()> {
        write_link(&self.layer_link(name, d), d)
    }

    pub fn unlink_layer(&self, name: &Name, d: &Digest) -> io::Result<bool> {
        remove_link(&self.layer_link(name, d))
    }

    /// The digest a tag points at.
    pub fn tag(&self, name: &Name, tag: &str) -> Option<Digest> {
        read_link(&self.tag_dir(name, tag).join("current/link"))
    }

    /// Whether `name` has manifest revision `d`.
    pub fn has_revision(&self, name: &Name, d: &Digest) -> bool {
        read_link(&self.revision_link(name, d)) == Some(*d)
    }

    /// Store a manifest's bytes as a blob and link it as a revision of
    /// `name` (and under `tag`).
    pub fn put_manifest(&self, name: &Name, bytes: &[u8], tag: Option<&str>) -> io::Result<Digest> {
        let d = Digest::of(bytes);
        if self.blob_size(&d) != Some(bytes.len() as u64) {
            let tmp = self.uploads(name).join(format!("manifest-{}", random_id()));
            fs::create_dir_all(self.uploads(name))?;
            let mut f = File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            self.place_blob(&tmp, &d)?;
        }
        self.verified.locked().insert(d);
        write_link(&self.revision_link(name, &d), &d)?;
        if let Some(t) = tag {
            let dir = self.tag_dir(name, t);
            write_link(&dir.join("index/sha256").join(d.hex()).join("link"), &d)?;
            write_link(&dir.join("current/link"), &d)?;
        }
        Ok(d)
    }

    /// Remove revision `d` of `name` and the tags pointing at it.
    pub fn delete_manifest(&self, name: &Name, d: &Digest) -> io::Result<bool> {
        if !remove_link(&self.revision_link(name, d))? {
            return Ok(false);
        }
        for t in self.tags(name) {
            if self.tag(name, &t) == Some(*d) {
                let _ = fs::remove_dir_all(self.tag_dir(name, &t));
            }
        }
        Ok(true)
    }

    /// The tags of `name`, sorted; `None` when the repository is unknown.
    pub fn tags(&self, name: &Name) -> Vec<String> {
        let Ok(rd) = fs::read_dir(self.repo(name).join("_manifests/tags")) else {
            return Vec::new();
        };
        let mut out: Vec<String> = rd
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|t| tag_ok(t))
            .collect();
        out.sort();
        out
    }

    pub fn repo_exists(&self, name: &Name) -> bool {
        self.repo(name).join("_manifests").is_dir() || self.repo(name).join("_layers").is_dir()
    }

    /// Every repository with manifests, sorted (distribution's catalog).
    pub fn catalog(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk_repos(&self.root.join("repositories"), "", 0, &mut out);
        out.sort();
        out
    }

    fn uploads(&self, name: &Name) -> PathBuf {
        self.repo(name).join("_uploads")
    }

    /// The data file of upload `id` of `name` (`None`: a bad id).
    pub fn upload_file(&self, name: &Name, id: &str) -> Option<PathBuf> {
        upload_id_ok(id).then(|| self.uploads(name).join(id).join("data"))
    }

    /// Start an upload: its id.
    pub fn start_upload(&self, name: &Name) -> io::Result<String> {
        let id = random_id();
        let dir = self.uploads(name).join(&id);
        fs::create_dir_all(&dir)?;
        File::create(dir.join("data"))?;
        let now = httpdate::fmt_http_date(std::time::SystemTime::now());
        fs::write(dir.join("startedat"), now)?;
        Ok(id)
    }

    /// Drop upload `id` (cancelled, failed or completed).
    pub fn remove_upload(&self, name: &Name, id: &str) {
        if upload_id_ok(id) {
            let _ = fs::remove_dir_all(self.uploads(name).join(id));
        }
    }

    /// Finish upload `id` as blob `want`: `Ok(false)` when its content does
    /// not hash to `want` (the upload is removed either way).
    pub fn finish_upload(&self, name: &Name, id: &str, want: &Digest) -> io::Result<bool> {
        let Some(data) = self.upload_file(name, id) else {
            return Ok(false);
        };
        let result = (|| {
            let mut f = File::open(&data)?;
            let (sum, _) = hash_reader(&mut f)?;
            if sum != *want {
                return Ok(false);
            }
            f.sync_all()?;
            self.place_blob(&data, want)?;
            self.link_layer(name, want)?;
            self.verified.locked().insert(*want);
            Ok(true)
        })();
        self.remove_upload(name, id);
        result
    }

    /// Move a complete, synced file into place as blob `d` (kept when the
    /// blob is already there), and sync the directories.
    fn place_blob(&self, file: &Path, d: &Digest) -> io::Result<()> {
        let dest = self.blob_path(d);
        let dir = dest.parent().unwrap_or(&self.root).to_path_buf();
        fs::create_dir_all(&dir)?;
        if self.blob_size(d).is_some() && self.verified(d) == Check::Good {
            let _ = fs::remove_file(file);
            return Ok(());
        }
        fs::rename(file, &dest)?;
        sync_dir(&dir)?;
        if let Some(p) = dir.parent() {
            sync_dir(p)?;
        }
        Ok(())
    }
}

fn walk_repos(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) {
    if depth > 64 {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let Ok(n) = e.file_name().into_string() else {
            continue;
        };
        if n.starts_with('_') || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let full = if prefix.is_empty() {
            n.clone()
        } else {
            format!("{prefix}/{n}")
        };
        if e.path().join("_manifests").is_dir() {
            out.push(full.clone());
        }
        walk_repos(&e.path(), &full, depth + 1, out);
    }
}

/// SHA-256 and length of everything `r` yields.
pub fn hash_reader(r: &mut impl io::Read) -> io::Result<(Digest, u64)> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 256 * 1024];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        ctx.update(&buf[..k]);
        n += k as u64;
    }
    Ok((Digest::from_sha256(ctx.finish().as_ref()), n))
}

/// The digest a link file names.
pub fn read_link(p: &Path) -> Option<Digest> {
    let mut s = String::new();
    File::open(p).ok()?.take(200).read_to_string(&mut s).ok()?;
    Digest::parse(s.trim()).ok()
}

/// Write a link durably: temp file, sync, rename, directory sync.
fn write_link(p: &Path, d: &Digest) -> io::Result<()> {
    let dir = p.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir)?;
    if read_link(p) == Some(*d) {
        return Ok(());
    }
    let tmp = dir.join(format!(".link-{}", random_id()));
    let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    f.write_all(d.to_string().as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, p)?;
    sync_dir(dir)
}

fn remove_link(p: &Path) -> io::Result<bool> {
    match fs::remove_file(p) {
        Ok(()) => {
            if let Some(dir) = p.parent() {
                let _ = fs::remove_dir(dir);
            }
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn sync_dir(d: &Path) -> io::Result<()> {
    File::open(d)?.sync_all()
}

/// 32 random hex digits.
pub fn random_id() -> String {
    use ring::rand::SecureRandom as _;
    let mut b = [0u8; 16];
    // A failing system RNG: fall back on the time (ids need only be unique).
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b = t.to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_link_and_verify() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path());
        let n = Name::parse("lib/app").unwrap();
        let id = s.start_upload(&n).unwrap();
        fs::write(s.upload_file(&n, &id).unwrap(), b"hello").unwrap();
        let good = Digest::of(b"hello");
        assert!(!s.finish_upload(&n, &id, &Digest::of(b"x")).unwrap());
        assert!(s.upload_file(&n, &id).is_some_and(|p| !p.exists()));
        let id = s.start_upload(&n).unwrap();
        fs::write(s.upload_file(&n, &id).unwrap(), b"hello").unwrap();
        assert!(s.finish_upload(&n, &id, &good).unwrap());
        assert!(s.has_layer(&n, &good));
        assert_eq!(s.verified(&good), Check::Good);
        let m = s.put_manifest(&n, b"{}", Some("v1")).unwrap();
        assert_eq!(s.tag(&n, "v1"), Some(m));
        assert_eq!(s.tags(&n), vec!["v1".to_string()]);
        assert_eq!(s.catalog(), vec!["lib/app".to_string()]);
        // Corrupted on disk: found on a fresh start.
        fs::write(s.blob_path(&good), b"HELLO").unwrap();
        let fresh = Store::new(d.path());
        assert_eq!(fresh.verified(&good), Check::Corrupt);
        assert_eq!(fresh.corrupt(), vec![good.to_string()]);
    }
}
