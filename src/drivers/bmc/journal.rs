//! Where a node's [`Journal`] lives: `<cluster>-bmc-<node>.json` in the
//! appliance's state directory (the directory of the DHCP lease file),
//! written atomically (temp file, fsync, rename) after every step of `up`.
//!
//! Invariants: an unreadable or unparsable file reads as no journal (then
//! `up` decides from what the BMC shows, as before journals); a journal of
//! another URL is not this boot's. A failed write is reported to the
//! caller, which warns and goes on (the BMC's state is the truth; the
//! journal only saves a second reset).

use std::io::Write as _;
use std::path::{Path, PathBuf};

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
}
