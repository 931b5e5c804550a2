//! The lease file: JSON ([`LeaseFile`]), written atomically — a temp file
//! in the same directory, fsync, rename over the old file, fsync the
//! directory ([`statefile`]) — so a crash leaves either the old or the new
//! file, never a torn one. A missing file is an empty table; a corrupt one is logged as
//! an error and kept aside as `<file>.corrupt-<unix time>`, never silently
//! dropped.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tracing::{error, info, warn};

use super::leases::{FILE_VERSION, LeaseFile, LeaseTable, Scope};
use crate::runtime::statefile;

/// Load the table from `path` under `scope`. Errors only for an unusable
/// directory (cannot be created) or unreadable file, which must fail bind.
pub fn load(path: &Path, scope: Scope) -> anyhow::Result<LeaseTable> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)
            .with_context(|| format!("creating the lease directory {}", dir.display()))?;
    }
    let text = match fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            info!("no lease file {} yet; starting empty", path.display());
            return Ok(LeaseTable::new(scope));
        }
        Err(e) => {
            return Err(e).with_context(|| format!("reading the lease file {}", path.display()));
        }
    };
    let parsed = serde_json::from_slice::<LeaseFile>(&text)
        .map_err(Corrupt::NotALeaseFile)
        .and_then(|f| {
            if f.version == FILE_VERSION {
                Ok(f)
            } else {
                Err(Corrupt::Version(f.version))
            }
        });
    match parsed {
        Ok(f) => {
            let (table, notes) = LeaseTable::from_file(scope, &f);
            for n in notes {
                warn!("lease file {}: {n}", path.display());
            }
            info!(
                "loaded {} lease(s) from {}",
                table.leases().len(),
                path.display()
            );
            Ok(table)
        }
        Err(e) => {
            let aside = corrupt_name(path);
            match fs::rename(path, &aside) {
                Ok(()) => error!(
                    "lease file {} is corrupt ({e}); moved it to {} and starting with no leases",
                    path.display(),
                    aside.display()
                ),
                Err(re) => {
                    return Err(anyhow::anyhow!(
                        "lease file {} is corrupt ({e}) and cannot be moved aside ({re})",
                        path.display()
                    ));
                }
            }
            Ok(LeaseTable::new(scope))
        }
    }
}

fn corrupt_name(path: &Path) -> PathBuf {
    statefile::corrupt_name(path, super::now())
}

/// Why a lease file that was read cannot be used (it is moved aside).
#[derive(Debug, thiserror::Error)]
enum Corrupt {
    /// Not JSON, or not a lease file's shape.
    #[error("{0}")]
    NotALeaseFile(serde_json::Error),
    /// A version other than [`FILE_VERSION`].
    #[error("unsupported version {0}")]
    Version(u32),
}

/// Write `file` to `path` atomically and durably.
pub fn save(path: &Path, file: &LeaseFile) -> anyhow::Result<()> {
    statefile::save_json(path, file, "leases")
}

#[cfg(test)]
mod tests {
    use super::super::leases::Client;
    use super::*;
    use crate::model::cluster::MacAddr;
    use std::net::Ipv4Addr;

    fn scope() -> Scope {
        Scope::new(
            "10.0.0.0/24".parse().unwrap(),
            Some((Ipv4Addr::new(10, 0, 0, 100), Ipv4Addr::new(10, 0, 0, 110))),
            [(MacAddr([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(10, 0, 0, 10))],
            3600,
        )
    }

    #[test]
    fn save_and_load_round_trip_leaving_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/leases.json");
        let mut t = load(&p, scope()).unwrap();
        assert!(t.leases().is_empty());
        let c = Client {
            mac: MacAddr([2, 0, 0, 0, 0, 1]),
            client_id: None,
        };
        t.bind(&c, Ipv4Addr::new(10, 0, 0, 10), Some("m0"), 100);
        save(&p, &t.to_file()).unwrap();
        let names: Vec<_> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["leases.json"]);
        let t2 = load(&p, scope()).unwrap();
        assert_eq!(t2.to_file(), t.to_file());
    }

    /// The reasons the error log gives for a lease file moved aside.
    #[test]
    fn a_corrupt_file_says_why() {
        let json = serde_json::from_str::<LeaseFile>("{ not json").unwrap_err();
        assert_eq!(
            Corrupt::NotALeaseFile(json).to_string(),
            "key must be a string at line 1 column 3"
        );
        assert_eq!(Corrupt::Version(7).to_string(), "unsupported version 7");
    }

    #[test]
    fn corrupt_file_is_kept_aside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("leases.json");
        fs::write(&p, "{ not json").unwrap();
        let t = load(&p, scope()).unwrap();
        assert!(t.leases().is_empty());
        assert!(!p.exists());
        let aside: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(aside.len(), 1);
        assert!(aside[0].starts_with("leases.json.corrupt-"), "{aside:?}");
        assert_eq!(
            fs::read_to_string(d.path().join(&aside[0])).unwrap(),
            "{ not json"
        );
    }
}
