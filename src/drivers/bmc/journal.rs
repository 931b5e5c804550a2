//! Where a node's [`Journal`] lives: `<cluster>-bmc-<node>.json` in the
//! appliance's state directory (the directory of the DHCP lease file),
//! written atomically (temp file, fsync, rename) after every step of `up`.
//!
//! Invariants: an unreadable or unparsable file reads as no journal (then
//! `up` decides from what the BMC shows, as before journals); a journal of
//! another URL is not this boot's. A failed write is reported to the
//! caller, which warns and goes on (the BMC's state is the truth; the
//! journal only saves a second reset).
//!
//! An HA pair shares the journals ([`Journals`], the `bmc` part of
//! `serve::hasync`'s document): per node the journal with the later
//! modification time wins and is written to the other member's state
//! directory with that time, so both sides agree and a repeat changes
//! nothing. A cleared journal (`eject`, `down`) is not sent: the peer keeps
//! its copy (its next `up` then asks the BMC, as without a journal).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::plan::Journal;
use crate::model::cluster::Cluster;

/// The journal file of `node`.
pub fn path_of(c: &Cluster, node: &str) -> PathBuf {
    let dir = c
        .dhcp
        .lease_file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    dir.join(format!("{}-bmc-{node}.json", c.name))
}

/// The journal at `path` if it is of the boot from `url`.
pub fn load(path: &Path, url: &str) -> Option<Journal> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice::<Journal>(&text)
        .ok()
        .filter(|j| j.url == url)
}

/// Write `j` to `path` (temp file, fsync, rename).
pub fn save(path: &Path, j: &Journal) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let res = (|| {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(j).unwrap_or_default())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// Forget the journal (`eject`, `down`: the next `up` is a new boot).
pub fn clear(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// How far ahead of this member's clock a peer's journal time may be.
const FUTURE_MS: u64 = 24 * 3600 * 1000;

/// One node's journal as the HA pair exchanges it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shared {
    /// The file's modification time, Unix milliseconds.
    pub modified: u64,
    pub journal: Journal,
}

/// The journals of the cluster's nodes with a BMC, for the HA pair.
pub struct Journals {
    files: Vec<(String, PathBuf)>,
}

impl Journals {
    pub fn new(c: &Cluster) -> Self {
        let files = c
            .nodes
            .iter()
            .filter(|n| n.bmc.is_some())
            .map(|n| (n.name.clone(), path_of(c, &n.name)))
            .collect();
        Journals { files }
    }

    /// Every readable journal by node.
    pub fn read(&self) -> BTreeMap<String, Shared> {
        let mut out = BTreeMap::new();
        for (node, path) in &self.files {
            let Some(modified) = modified_ms(path) else {
                continue;
            };
            let Some(journal) = std::fs::read(path)
                .ok()
                .and_then(|t| serde_json::from_slice::<Journal>(&t).ok())
            else {
                continue;
            };
            out.insert(node.clone(), Shared { modified, journal });
        }
        out
    }

    /// A value that changes when a journal file is written, added or
    /// removed: their modification times (a `stat` each, nothing read).
    pub fn version(&self) -> u64 {
        self.files
            .iter()
            .filter_map(|(_, path)| modified_ms(path))
            .fold(0u64, |v, m| v.rotate_left(13) ^ m)
    }

    /// Take the peer's journals that are newer than ours (nodes of this
    /// cluster with a BMC only); how many were written.
    pub fn merge(&self, peer: BTreeMap<String, Shared>) -> usize {
        let ours = self.read();
        let now_ms = now_ms();
        let mut taken = 0;
        for (node, path) in &self.files {
            let Some(theirs) = peer.get(node) else {
                continue;
            };
            if ours
                .get(node)
                .is_some_and(|o| o.modified >= theirs.modified)
            {
                continue;
            }
            // A time more than a day ahead (a broken clock, a bad
            // document) is refused: it would win over every later `up`.
            if theirs.modified > now_ms.saturating_add(FUTURE_MS) {
                continue;
            }
            let at = UNIX_EPOCH + Duration::from_millis(theirs.modified);
            let res = save(path, &theirs.journal).and_then(|()| {
                std::fs::File::options()
                    .write(true)
                    .open(path)?
                    .set_modified(at)
            });
            match res {
                Ok(()) => taken += 1,
                // The next exchange tries again; the other parts go on.
                Err(e) => tracing::warn!("ha: writing {}: {e}", path.display()),
            }
        }
        taken
    }
}

fn now_ms() -> u64 {
    UNIX_EPOCH
        .elapsed()
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// When `path` was last modified, in ms since the epoch (None: no file).
fn modified_ms(path: &Path) -> Option<u64> {
    let t = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    let since = t.duration_since(UNIX_EPOCH).ok()?;
    Some(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

impl crate::runtime::control::SyncControl for Journals {
    fn part(&self) -> &'static str {
        "bmc"
    }

    fn sync_version(&self) -> u64 {
        self.version()
    }

    fn sync_state(&self) -> (u64, serde_json::Value) {
        let version = self.version();
        (
            version,
            serde_json::to_value(self.read()).unwrap_or_default(),
        )
    }

    fn prepare<'a>(
        &'a self,
        peer: serde_json::Value,
        skipped: &mut crate::runtime::control::Skipped,
    ) -> Result<crate::runtime::control::Staged<'a>, crate::runtime::control::PartError> {
        let peer: BTreeMap<String, Shared> = serde_json::from_value(peer).map_err(
            crate::runtime::control::PartError::undecodable("BMC journals"),
        )?;
        let latest = now_ms().saturating_add(FUTURE_MS);
        for (node, j) in &peer {
            if !self.files.iter().any(|(n, _)| n == node) {
                skipped
                    .note(|| "bmc: a journal of a node without a BMC in the cluster file".into());
            } else if j.modified > latest {
                skipped.note(|| format!("bmc: {node}'s journal is more than a day ahead"));
            }
        }
        Ok(Box::new(move || self.merge(peer)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_other_url_and_garbage() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = d.path().join("sub/c-bmc-n.json");
        let j = Journal {
            url: "http://a/boot/n.iso".into(),
            inserted: Some("https://a:8443/boot/n.iso".into()),
            boot: true,
            reset: false,
        };
        save(&p, &j).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(load(&p, "http://a/boot/n.iso"), Some(j));
        assert_eq!(load(&p, "http://b/boot/n.iso"), None);
        std::fs::write(&p, "{not json").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(load(&p, "http://a/boot/n.iso"), None);
        clear(&p).unwrap_or_else(|e| panic!("{e}"));
        clear(&p).unwrap_or_else(|e| panic!("{e}"));
        assert!(!p.exists());
    }

    fn member(dir: &Path) -> Cluster {
        let text = format!(
            "name: c\nbaseDomain: example.com\nnetwork: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.1, applianceIP: 10.0.0.1 }}\ndhcp: {{ leaseFile: {}/leases.json }}\nnodes:\n  - {{ name: m0, role: master, mac: '52:54:00:00:00:02', ip: 10.0.0.10 }}\n  - {{ name: metal-0, role: worker, mac: '52:54:00:00:00:03', ip: 10.0.0.11, bmc: {{ redfish: 'http://127.0.0.1:1/redfish/v1/Systems/1', usernameFile: {0}/u, passwordFile: {0}/p }} }}\n",
            dir.display()
        );
        std::fs::write(dir.join("u"), "admin\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("p"), "pw\n").unwrap_or_else(|e| panic!("{e}"));
        for f in ["u", "p"] {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o600))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        crate::config::from_str(&text, Path::new("/"), Path::new("t"))
            .unwrap_or_else(|e| panic!("{e:#}"))
            .cluster
    }

    /// HA: B takes A's journal with A's time; a repeat and an older one
    /// change nothing; a newer one on B wins back.
    #[test]
    fn ha_merge_newer_journal_wins() {
        use crate::runtime::control::SyncControl as _;
        let (da, db) = (
            tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
            tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
        );
        let (ca, cb) = (member(da.path()), member(db.path()));
        let (a, b) = (Journals::new(&ca), Journals::new(&cb));
        let done = Journal {
            url: "http://a/boot/metal-0.iso".into(),
            inserted: Some("http://a/boot/metal-0.iso".into()),
            boot: true,
            reset: true,
        };
        save(&path_of(&ca, "metal-0"), &done).unwrap_or_else(|e| panic!("{e}"));
        let (va, doc) = a.sync_state();
        assert_eq!(b.sync_state().1, serde_json::json!({}));
        assert_eq!(b.merge_state(doc.clone()).unwrap(), 1);
        let pb = path_of(&cb, "metal-0");
        assert_eq!(load(&pb, &done.url), Some(done.clone()));
        // Same time on both sides now: nothing moves either way.
        assert_eq!(b.read(), a.read());
        assert_eq!(b.merge_state(doc).unwrap(), 0);
        assert_eq!(a.merge_state(b.sync_state().1).unwrap(), 0);
        assert_eq!(a.sync_state().0, va);
        // A newer journal on B (a later `up` there) goes to A.
        std::thread::sleep(Duration::from_millis(20));
        let next = Journal {
            reset: false,
            ..done.clone()
        };
        save(&pb, &next).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.merge_state(b.sync_state().1).unwrap(), 1);
        assert_eq!(
            load(&path_of(&ca, "metal-0"), &done.url),
            Some(next.clone())
        );
        // Nodes without a BMC and unknown nodes are ignored; garbage refused.
        let stray = serde_json::json!({"m0": {"modified": u64::MAX, "journal": done}});
        assert_eq!(b.merge_state(stray).unwrap(), 0);
        assert!(!path_of(&cb, "m0").exists());
        let huge = serde_json::json!({"metal-0": {"modified": u64::MAX, "journal": next}});
        assert_eq!(b.merge_state(huge).unwrap(), 0);
        let refused = b.merge_state(serde_json::json!([1]));
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .starts_with("BMC journals: ")
        );
    }
}
