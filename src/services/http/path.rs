//! Request paths → files, safely; content types by extension.
//!
//! [`normalize`] merges repeated slashes and drops `.` segments of the
//! whole request path before routing, like nginx (`merge_slashes`), so
//! `//images/x`, `/images//x` and `/images/./x` are `/images/x`.
//! [`sanitize`] is pure: it percent-decodes the part of the URL path after
//! the route prefix and returns a relative path of plain components, or an
//! error for anything hostile (`..` in any spelling, NUL, backslashes, an
//! encoded `/`, bad escapes, a trailing `/`); empty and `.` segments (also
//! `%2e`) are skipped, as nginx does. [`resolve`] then canonicalises the result
//! under the canonical root and requires the target to stay under the root
//! (symlinks are followed only while they point inside it) and to be a
//! regular file; everything else is "not found", so probing reveals nothing.

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why a request path was refused before touching the filesystem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("bad percent-encoding")]
    BadEscape,
    #[error("NUL byte")]
    Nul,
    #[error("backslash")]
    Backslash,
    #[error("dot segment")]
    Dot,
    #[error("trailing slash or encoded slash")]
    Empty,
}

/// Whether `p` holds `//`, `/./` or ends in `/.`: one pass over the bytes
/// (three substring searches cost ~700 instructions a request).
fn needs_normalizing(p: &[u8]) -> bool {
    p.iter().enumerate().any(|(i, &b)| {
        b == b'/'
            && match p.get(i + 1) {
                Some(b'/') => true,
                Some(b'.') => matches!(p.get(i + 2), None | Some(b'/')),
                _ => false,
            }
    })
}

/// The request path with repeated `/` merged and `.` segments (raw `.`,
/// the percent-decoded forms are handled by [`sanitize`]) removed, as
/// nginx does before matching locations. `..` is left for [`sanitize`] to
/// refuse. A trailing `/` is kept. Borrowed when nothing changes.
pub fn normalize(p: &str) -> std::borrow::Cow<'_, str> {
    if !needs_normalizing(p.as_bytes()) {
        return std::borrow::Cow::Borrowed(p);
    }
    let mut out = String::with_capacity(p.len());
    let segs: Vec<&str> = p.split('/').collect();
    let last = segs.len().saturating_sub(1);
    for (i, seg) in segs.iter().enumerate() {
        if i == 0 {
            out.push_str(seg);
            continue;
        }
        if seg.is_empty() || *seg == "." {
            // A trailing `/`, `/.` or `//` keeps one trailing slash.
            if i == last && !out.ends_with('/') {
                out.push('/');
            }
            continue;
        }
        if !out.ends_with('/') {
            out.push('/');
        }
        out.push_str(seg);
    }
    if out.is_empty() {
        out.push('/');
    }
    std::borrow::Cow::Owned(out)
}

/// Percent-decode `s` (RFC 3986 §2.1). `+` is kept literally.
pub fn percent_decode(s: &str) -> Result<Vec<u8>, PathError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) else {
                return Err(PathError::BadEscape);
            };
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// `name` itself when it is one plain file name (ASCII letters, digits,
/// `-`, `_`, `.`; not `.` or `..`): what [`sanitize`] would return for it,
/// without decoding or building a path.
pub fn plain_name(name: &str) -> Option<&str> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then_some(name)
}

/// Turn the (still percent-encoded) rest of a URL path into a safe relative
/// path. An empty rest is the root itself (returned as an empty path).
pub fn sanitize(rest: &str) -> Result<PathBuf, PathError> {
    // Reject before decoding too: `%2f` must not smuggle separators in, so
    // segments are split on the raw path and decoded one by one.
    if rest.is_empty() {
        return Ok(PathBuf::new());
    }
    if rest.ends_with('/') {
        // A directory (no index pages); nginx answers it 403/404.
        return Err(PathError::Empty);
    }
    let mut out = PathBuf::new();
    for seg in rest.split('/') {
        if seg.is_empty() {
            // `a//b`, a leading `/`: merged, as nginx's merge_slashes does.
            continue;
        }
        let bytes = percent_decode(seg)?;
        if bytes.contains(&0) {
            return Err(PathError::Nul);
        }
        if bytes.contains(&b'\\') {
            return Err(PathError::Backslash);
        }
        if bytes.contains(&b'/') {
            // An encoded slash inside one segment.
            return Err(PathError::Empty);
        }
        if bytes == b"." {
            // `a/./b`, `a/%2e/b`: the same directory, as nginx resolves it.
            continue;
        }
        if bytes == b".." {
            return Err(PathError::Dot);
        }
        out.push(OsStr::from_bytes(&bytes));
    }
    Ok(out)
}

/// MIME type for a file name, by extension.
pub fn content_type(name: &Path) -> &'static str {
    let ext = name
        .extension()
        .and_then(OsStr::to_str)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "iso" => "application/x-iso9660-image",
        "ign" => "application/vnd.coreos.ignition+json",
        "json" => "application/json",
        "txt" | "sha256" | "sha512" | "sha256sum" | "ipxe" | "cfg" | "conf" => {
            "text/plain; charset=utf-8"
        }
        "html" | "htm" => "text/html; charset=utf-8",
        "yaml" | "yml" => "application/yaml",
        "gz" => "application/gzip",
        "xz" => "application/x-xz",
        "zst" => "application/zstd",
        "sig" | "asc" => "application/pgp-signature",
        // img, raw, qcow2, kernel, initramfs, rootfs and everything else.
        _ => "application/octet-stream",
    }
}

/// Is `rel` (a path under `http.imagesDir`, after symlinks) one of the
/// install's secrets, which `/images` never serves whatever the layout?
/// Ignition configs (`*.ign`), anything under a directory named `auth`
/// (`auth/kubeconfig`, `auth/kubeadmin-password`), dotfiles and dot-dirs
/// (`.openshift_install_state.json`, `.openshift_install.log`), the install
/// metadata (`metadata.json`) and `install-config.yaml` (it holds the pull
/// secret) and its copies. They answer 404, like a missing file.
pub fn is_install_secret(rel: &Path) -> bool {
    let mut comps = rel.components().peekable();
    while let Some(c) = comps.next() {
        let name = c.as_os_str().to_string_lossy();
        let last = comps.peek().is_none();
        if name.starts_with('.') || (!last && name == "auth") {
            return true;
        }
        if last {
            let lower = name.to_ascii_lowercase();
            return lower.ends_with(".ign")
                || lower == "metadata.json"
                || lower.starts_with("install-config.yaml");
        }
    }
    false
}

/// Where a sanitised path led.
#[derive(Debug)]
pub enum Resolved {
    /// A regular file under the root, opened read-only; `rel` is its
    /// canonical path relative to the canonical root (symlinks resolved).
    File {
        path: PathBuf,
        rel: PathBuf,
        file: File,
    },
    /// Missing, a directory, a special file, outside the root, or unreadable.
    NotFound(&'static str),
}

/// Open `rel` (from [`sanitize`]) under `root`, refusing anything that
/// resolves outside the canonical root or is not a regular file.
/// Blocking: call from `spawn_blocking`.
pub fn resolve(root: &Path, rel: &Path) -> Resolved {
    let Ok(root) = root.canonicalize() else {
        return Resolved::NotFound("root directory missing");
    };
    let Ok(real) = root.join(rel).canonicalize() else {
        return Resolved::NotFound("no such file");
    };
    if !real.starts_with(&root) {
        return Resolved::NotFound("resolves outside the root");
    }
    // `real` is canonical, so its last component is no symlink; O_NOFOLLOW
    // refuses a symlink swapped in since.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
    {
        Ok(f) => f,
        Err(_) => return Resolved::NotFound("cannot open"),
    };
    match file.metadata() {
        Ok(m) if m.is_file() => Resolved::File {
            rel: real
                .strip_prefix(&root)
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            path: real,
            file,
        },
        Ok(_) => Resolved::NotFound("not a regular file"),
        Err(_) => Resolved::NotFound("cannot stat"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_secrets() {
        for p in [
            "master.ign",
            "ocp4/bootstrap.IGN",
            "ocp4/auth/kubeconfig",
            "auth/kubeadmin-password",
            ".openshift_install_state.json",
            "ocp4/.openshift_install.log",
            ".git/config",
            "ocp4/metadata.json",
            "install-config.yaml",
            "install-config.yaml.bak",
        ] {
            assert!(is_install_secret(Path::new(p)), "{p}");
        }
        for p in [
            "rhcos-live.x86_64.iso",
            "rhcos/4.16/rootfs.img",
            "authority.txt",
            "auth",
            "ignition.img",
            "sha256sum.txt",
        ] {
            assert!(!is_install_secret(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn good_paths() {
        assert_eq!(sanitize("a.iso").unwrap(), PathBuf::from("a.iso"));
        assert_eq!(
            sanitize("rhcos/4.16/live%20rootfs.img").unwrap(),
            PathBuf::from("rhcos/4.16/live rootfs.img")
        );
        assert_eq!(sanitize("a+b..c").unwrap(), PathBuf::from("a+b..c"));
        assert_eq!(sanitize("...").unwrap(), PathBuf::from("..."));
        assert_eq!(sanitize("").unwrap(), PathBuf::new());
        // nginx serves these (merge_slashes, `.` segments resolved); a
        // leading `/` stays under the root.
        assert_eq!(sanitize("a//b").unwrap(), PathBuf::from("a/b"));
        assert_eq!(sanitize("a/./b").unwrap(), PathBuf::from("a/b"));
        assert_eq!(sanitize("a/%2e/b").unwrap(), PathBuf::from("a/b"));
        assert_eq!(
            sanitize("/etc/passwd").unwrap(),
            PathBuf::from("etc/passwd")
        );
        assert_eq!(sanitize(".").unwrap(), PathBuf::new());
    }

    /// Every string over `/`, `.`, `a` up to 7 bytes: the one-pass test
    /// agrees with the substring rule it replaced, and a plain name is
    /// what `sanitize` makes of it.
    #[test]
    fn fast_checks_agree_with_the_full_rules() {
        let mut all = vec![String::new()];
        for _ in 0..7 {
            let next: Vec<String> = all
                .iter()
                .flat_map(|s| ["/", ".", "a"].map(|c| format!("{s}{c}")))
                .collect();
            all.extend(next);
        }
        all.sort();
        all.dedup();
        for p in &all {
            let old = p.contains("//") || p.contains("/./") || p.ends_with("/.");
            assert_eq!(needs_normalizing(p.as_bytes()), old, "{p:?}");
            if let Some(n) = plain_name(p) {
                assert_eq!(sanitize(n).unwrap(), PathBuf::from(n), "{p:?}");
                assert_eq!(sanitize(n).unwrap().components().count(), 1);
            }
        }
        assert_eq!(plain_name("master-0.ign"), Some("master-0.ign"));
        for bad in ["", ".", "..", "a/b", "a%2fb", "a b", "é.ign"] {
            assert_eq!(plain_name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn normalized_request_paths() {
        for (p, want) in [
            ("/images/x", "/images/x"),
            ("//images/x", "/images/x"),
            ("/images//rhcos.iso", "/images/rhcos.iso"),
            ("/images/./x", "/images/x"),
            ("/./images/.//./x", "/images/x"),
            ("/images/a/", "/images/a/"),
            ("/images/a//", "/images/a/"),
            ("/images/a/.", "/images/a/"),
            ("//", "/"),
            ("/", "/"),
            ("/images/../x", "/images/../x"),
            ("/a.b/.c", "/a.b/.c"),
        ] {
            assert_eq!(normalize(p), want, "{p}");
        }
    }

    #[test]
    fn hostile_paths() {
        use PathError::*;
        for (p, e) in [
            ("..", Dot),
            ("../etc/passwd", Dot),
            ("a/../../etc/passwd", Dot),
            ("%2e%2e/etc/passwd", Dot),
            ("%2E%2E", Dot),
            ("a/./../b", Dot),
            ("a//..//b", Dot),
            ("a/%2e%2e", Dot),
            ("a/", Empty),
            ("..%2fetc", Empty),
            ("a%2f..%2fb", Empty),
            ("a%00.iso", Nul),
            ("..%5c..%5cetc", Backslash),
            ("a\\b", Backslash),
            ("a%zz", BadEscape),
            ("a%2", BadEscape),
            ("%", BadEscape),
        ] {
            assert_eq!(sanitize(p), Err(e), "{p}");
        }
    }

    #[test]
    fn content_types() {
        let ct = |n: &str| content_type(Path::new(n));
        assert_eq!(ct("rhcos-live.x86_64.ISO"), "application/x-iso9660-image");
        assert_eq!(ct("master.ign"), "application/vnd.coreos.ignition+json");
        assert_eq!(ct("rootfs.img"), "application/octet-stream");
        assert_eq!(ct("disk.raw"), "application/octet-stream");
        assert_eq!(ct("vmlinuz"), "application/octet-stream");
        assert_eq!(ct("sha256sum.txt"), "text/plain; charset=utf-8");
        assert_eq!(ct("x.raw.gz"), "application/gzip");
    }

    #[test]
    fn resolve_stays_under_the_root() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/f.img"), b"x").unwrap();
        std::fs::write(base.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(base.path().join("secret"), root.join("out")).unwrap();
        std::os::unix::fs::symlink("sub/f.img", root.join("in")).unwrap();
        std::os::unix::fs::symlink("/", root.join("slash")).unwrap();
        let ok = |p: &str| matches!(resolve(&root, Path::new(p)), Resolved::File { .. });
        assert!(ok("sub/f.img"));
        assert!(ok("in"), "symlink inside the root is followed");
        assert!(!ok("out"), "symlink out of the root");
        assert!(!ok("slash/etc/passwd"));
        assert!(!ok("sub"), "directory");
        assert!(!ok("nope"));
        assert!(!ok(""));
    }
}
