//! The DHCPv6 binding file: JSON, written atomically and durably (temp
//! file, fdatasync, rename, fsync of the directory: [`statefile`]) like
//! the DHCPv4 lease file; a corrupt file is moved aside and logged, never silently dropped.

use std::fs;
use std::path::Path;

use anyhow::Context as _;
use tracing::{error, info, warn};

use super::bindings::{BindingFile, Scope, Table};
use crate::runtime::statefile;

/// Load `path` under `scope` (a missing file is an empty table; the
/// directory is created so that a bad directory fails at start).
pub fn load(path: &Path, scope: Scope) -> anyhow::Result<Table> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)
            .with_context(|| format!("creating the binding directory {}", dir.display()))?;
    }
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Table::new(scope)),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    match serde_json::from_str::<BindingFile>(&text) {
        Ok(f) => {
            let (t, notes) = Table::from_file(scope, &f);
            for n in notes {
                warn!("binding file {}: {n}", path.display());
            }
            info!(
                "loaded {} DHCPv6 binding(s) from {}",
                t.bindings().count(),
                path.display()
            );
            Ok(t)
        }
        Err(e) => {
            let aside = statefile::corrupt_name(path, super::now());
            fs::rename(path, &aside).map_err(|re| {
                anyhow::anyhow!(
                    "binding file {} is corrupt ({e}) and cannot be moved aside ({re})",
                    path.display()
                )
            })?;
            error!(
                "binding file {} is corrupt ({e}); moved it to {} and starting with no bindings",
                path.display(),
                aside.display()
            );
            Ok(Table::new(scope))
        }
    }
}

/// Write `file` to `path` atomically and durably.
pub fn save(path: &Path, file: &BindingFile) -> anyhow::Result<()> {
    statefile::save_json(path, file, "bindings")
}

#[cfg(test)]
mod tests {
    use super::super::bindings::Client;
    use super::*;

    #[test]
    fn round_trip_and_corrupt_file_kept_aside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/b6.json");
        let scope = Scope {
            prefix: "fd00::".parse().unwrap(),
            prefix_len: 64,
            pool: Some(("fd00::100".parse().unwrap(), "fd00::1ff".parse().unwrap())),
            reserved: Default::default(),
            lease_time: 60,
        };
        let mut t = load(&p, scope.clone()).unwrap();
        let c = Client {
            duid: vec![0, 2, 1],
            iaid: 7,
            mac: None,
        };
        t.bind(&c, "fd00::100".parse().unwrap(), 5);
        save(&p, &t.to_file()).unwrap();
        assert_eq!(load(&p, scope.clone()).unwrap().to_file(), t.to_file());
        fs::write(&p, "{ nope").unwrap();
        assert_eq!(load(&p, scope).unwrap().bindings().count(), 0);
        let names: Vec<String> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            names.len() == 1 && names[0].starts_with("b6.json.corrupt-"),
            "{names:?}"
        );
    }
}
