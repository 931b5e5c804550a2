//! Boot file names → files under a root (TFTP, HTTP network boot), and the
//! iPXE binaries a root offers (the DHCP boot answers, `check`).
//!
//! [`sanitize`] is pure: leading `/` are stripped (clients send both
//! `ipxe.efi` and `/ipxe.efi`; an absolute name therefore means "under the
//! root", so `/etc/passwd` is looked up as `<root>/etc/passwd`); empty
//! segments are skipped; `.`/`..` segments, backslashes, control characters
//! and non-UTF-8 names are refused (access violation).
//!
//! [`open`] then canonicalises `<root>/<name>` and requires the result to lie
//! under the canonical root or under one of the `allowSymlinksTo`
//! directories (symlinks that escape elsewhere → access violation), to be a
//! regular file (a directory or special file → access violation), and to be
//! readable; a name that does not exist → file not found. The canonical path
//! has no symlinks left, so it is opened with `O_NOFOLLOW` (a link swapped in
//! after the check is refused, not followed).

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use crate::model::cluster::TftpCfg;

/// The class of a refusal (TFTP maps it to its error codes, HTTP to 404/403).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    FileNotFound,
    AccessViolation,
}

/// Why a name was refused: its class and a message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub code: ErrorCode,
    pub message: &'static str,
}

const fn refused(code: ErrorCode, message: &'static str) -> Refused {
    Refused { code, message }
}

/// Turn a requested name into a relative path of plain components.
pub fn sanitize(name: &[u8]) -> Result<PathBuf, Refused> {
    let av = ErrorCode::AccessViolation;
    let Ok(text) = std::str::from_utf8(name) else {
        return Err(refused(av, "file name is not UTF-8"));
    };
    if text.chars().any(char::is_control) {
        return Err(refused(av, "control character in file name"));
    }
    if text.contains('\\') {
        return Err(refused(av, "backslash in file name"));
    }
    let mut out = PathBuf::new();
    for seg in text.split('/') {
        match seg {
            "" => continue,
            "." | ".." => return Err(refused(av, "dot segment in file name")),
            s => out.push(s),
        }
    }
    // Belt and braces: only normal components may remain.
    if out.as_os_str().is_empty() || !out.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(refused(av, "no file name"));
    }
    Ok(out)
}

/// A file opened for a transfer.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    pub size: u64,
    /// Canonical path (for logs).
    pub path: PathBuf,
}

/// Open `rel` (from [`sanitize`]) under the canonical `root`; symlinks may
/// lead into `root` or into one of `allowed` (canonical directories).
pub fn open(root: &Path, allowed: &[PathBuf], rel: &Path) -> Result<Opened, Refused> {
    let av = ErrorCode::AccessViolation;
    let joined = root.join(rel);
    let canon = match joined.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            // Missing, or a dangling symlink: nothing to serve either way.
            return Err(refused(ErrorCode::FileNotFound, "file not found"));
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            return Err(refused(av, "permission denied"));
        }
        Err(_) => return Err(refused(ErrorCode::FileNotFound, "file not found")),
    };
    if !canon.starts_with(root) && !allowed.iter().any(|a| canon.starts_with(a)) {
        return Err(refused(av, "outside the TFTP root"));
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&canon)
    {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(refused(ErrorCode::FileNotFound, "file not found"));
        }
        Err(_) => return Err(refused(av, "cannot open file")),
    };
    let meta = file
        .metadata()
        .map_err(|_| refused(av, "cannot read file metadata"))?;
    if !meta.is_file() {
        return Err(refused(av, "not a regular file"));
    }
    Ok(Opened {
        file,
        size: meta.len(),
        path: canon,
    })
}

/// Boot files `check` looks for: the first name of each entry that exists
/// counts (Debian `ipxe` names first, then Fedora/RHEL `ipxe-bootimgs-*`).
pub const BOOT_FILES: [&[&str]; 5] = [
    &["undionly.kpxe"],
    &["ipxe.efi", "ipxe-x86_64.efi"],
    &["snponly.efi", "ipxe-snponly-x86_64.efi"],
    &["ipxe.pxe"],
    &["arm64-efi/snponly.efi"],
];

/// The iPXE binaries present under the root (names relative to it), for
/// the DHCP boot answers.
pub fn present_boot_files(c: &TftpCfg) -> Vec<String> {
    let Ok(root) = c.root.canonicalize() else {
        return Vec::new();
    };
    let allowed: Vec<PathBuf> = c
        .allow_symlinks_to
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    BOOT_FILES
        .iter()
        .flat_map(|names| names.iter())
        .filter(|n| open(&root, &allowed, Path::new(n)).is_ok())
        .map(|n| n.to_string())
        .collect()
}

/// `tftp on|off <addr> root <dir> (found: …; missing: …)` for `check`.
/// A file counts as found only if the server would serve it (same rules).
pub fn check_line(c: &TftpCfg) -> String {
    let root = c.root.canonicalize();
    let allowed: Vec<PathBuf> = c
        .allow_symlinks_to
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for names in BOOT_FILES {
        let hit = names.iter().find(|n| match &root {
            Ok(r) => open(r, &allowed, Path::new(n)).is_ok(),
            Err(_) => false,
        });
        match hit {
            Some(n) => found.push(*n),
            None => missing.push(names[0]),
        }
    }
    let root_note = if root.is_err() {
        " (does not exist)"
    } else {
        ""
    };
    format!(
        "tftp {} {} root {}{root_note} (found: {}; missing: {})",
        if c.enabled { "on" } else { "off" },
        c.listen,
        c.root.display(),
        if found.is_empty() {
            "none".into()
        } else {
            found.join(", ")
        },
        if missing.is_empty() {
            "none".into()
        } else {
            missing.join(", ")
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn code(r: Result<impl std::fmt::Debug, Refused>) -> ErrorCode {
        match r {
            Ok(v) => panic!("accepted: {v:?}"),
            Err(e) => e.code,
        }
    }

    #[test]
    fn sanitize_rules() {
        assert_eq!(sanitize(b"ipxe.efi"), Ok(PathBuf::from("ipxe.efi")));
        assert_eq!(sanitize(b"/ipxe.efi"), Ok(PathBuf::from("ipxe.efi")));
        assert_eq!(sanitize(b"//a//b/"), Ok(PathBuf::from("a/b")));
        assert_eq!(sanitize(b"/etc/passwd"), Ok(PathBuf::from("etc/passwd")));
        for bad in [
            &b"../etc/passwd"[..],
            b"a/../../x",
            b"./a",
            b"a\\..\\b",
            b"a\nb",
            b"\xff\xfe",
            b"/",
            b"",
        ] {
            assert_eq!(
                code(sanitize(bad)),
                ErrorCode::AccessViolation,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn open_rules() {
        let outside = tempfile::tempdir().expect("tempdir");
        let allowed = tempfile::tempdir().expect("tempdir");
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canon");
        let allowed_c = allowed.path().canonicalize().expect("canon");
        std::fs::write(root.join("f"), b"hello").expect("write");
        std::fs::create_dir(root.join("sub")).expect("mkdir");
        std::fs::write(root.join("sub/g"), b"").expect("write");
        std::fs::write(outside.path().join("secret"), b"x").expect("write");
        std::fs::write(allowed.path().join("boot.efi"), b"efi").expect("write");
        symlink(outside.path().join("secret"), root.join("escape")).expect("symlink");
        symlink(outside.path(), root.join("escdir")).expect("symlink");
        symlink("sub/g", root.join("inner")).expect("symlink");
        symlink(allowed.path().join("boot.efi"), root.join("ok.efi")).expect("symlink");
        let al = std::slice::from_ref(&allowed_c);
        let open = |p: &str| open(&root, al, Path::new(p));

        let f = open("f").expect("f");
        assert_eq!(f.size, 5);
        assert_eq!(open("sub/g").expect("g").size, 0);
        assert_eq!(open("inner").expect("inner").size, 0);
        assert_eq!(open("ok.efi").expect("ok").size, 3);
        assert_eq!(code(open("missing")), ErrorCode::FileNotFound);
        assert_eq!(code(open("sub")), ErrorCode::AccessViolation);
        assert_eq!(code(open("escape")), ErrorCode::AccessViolation);
        assert_eq!(code(open("escdir/secret")), ErrorCode::AccessViolation);
        // The allow list is not a blanket pass for the root's symlinks.
        assert_eq!(
            code(super::open(&root, &[], Path::new("ok.efi"))),
            ErrorCode::AccessViolation
        );
        if cfg!(target_os = "linux") {
            assert_eq!(
                code(super::open(Path::new("/dev"), &[], Path::new("null"))),
                ErrorCode::AccessViolation
            );
        }
    }
}
