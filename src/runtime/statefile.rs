//! Atomic, durable replacement of a small state file (the DHCPv4 lease file,
//! the DHCPv6 binding file): the bytes go to `.<name>.tmp` in the same
//! directory, are fdatasync'd, renamed over the old file, and the directory
//! is fsync'd — so a crash leaves either the old or the new file, never a
//! torn one, and a successful write leaves no temp file behind. Also the
//! name a corrupt file is kept aside under, and the files' encoding of byte
//! strings (client identifiers, DUIDs): lowercase hex ([`hex`], [`unhex`]).

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

/// Write `value` as pretty JSON (with a final newline) to `path`
/// atomically and durably. `what` names the contents in errors
/// (`serializing <what>`) and is the temp file's name if `path` has none.
pub fn save_json<T: Serialize>(path: &Path, value: &T, what: &str) -> anyhow::Result<()> {
    let mut body =
        serde_json::to_vec_pretty(value).with_context(|| format!("serializing {what}"))?;
    body.push(b'\n');
    write(path, &body, what)
}

/// Write `body` to `path` atomically and durably (`fallback` names the
/// temp file if `path` has no file name).
pub fn write(path: &Path, body: &[u8], fallback: &str) -> anyhow::Result<()> {
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| fallback.into());
    let tmp = dir.join(format!(".{name}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(body)?;
        // fdatasync: the data and the size; the mtime need not be durable.
        f.sync_data()?;
        drop(f);
        fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    };
    write().with_context(|| format!("writing {}", path.display()))
}

/// The name a corrupt `path` is moved aside to: `<path>.corrupt-<now>`.
pub fn corrupt_name(path: &Path, now: u64) -> PathBuf {
    let mut n = path.as_os_str().to_owned();
    n.push(format!(".corrupt-{now}"));
    PathBuf::from(n)
}

/// `b` as lowercase hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes of a hex string (None: odd length or a non-hex digit).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        save_json(&p, &vec![1, 2], "numbers").unwrap();
        save_json(&p, &vec![3], "numbers").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "[\n  3\n]\n");
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["state.json"]);
        assert_eq!(corrupt_name(&p, 7), d.path().join("state.json.corrupt-7"));
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_file() {
        let e = write(Path::new("/nonexistent/dir/f.json"), b"x", "f").unwrap_err();
        assert!(
            format!("{e:#}").contains("writing /nonexistent/dir/f.json"),
            "{e:#}"
        );
    }

    #[test]
    fn hex_round_trips_and_rejects_bad_digits() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(unhex("00ab10"), Some(vec![0, 0xab, 0x10]));
        assert_eq!(unhex("00AB"), Some(vec![0, 0xab]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("é1"), None);
        assert_eq!(unhex(""), Some(vec![]));
    }
}
