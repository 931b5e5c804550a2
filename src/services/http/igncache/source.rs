//! Where an ignition body comes from: which file answers a target
//! (located and opened), the key of that file's version, and reading it
//! (and merging a node's entries into it) on the blocking pool.
//!
//! Invariants: a key is taken with `fstat` on the very handle that is read,
//! so a rewritten or replaced file is a new key; a file that changes while
//! being read is reported not cacheable; nothing over [`MAX_IGNITION`]
//! bytes is read whole; a merged body is slices of its file's one body plus
//! the bytes the merge adds (no copy of the file).

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::{IgnBody, IgnError};
use crate::services::http::ignition::Target;
use crate::services::http::ignmerge::{self, FileEntry, Piece};
use crate::services::http::{MAX_IGNITION, path, range};

/// Which version of which file a body was made from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct FileId {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileId {
    pub(super) fn of(path: &Path, file: &File) -> std::io::Result<FileId> {
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
pub(super) struct Key {
    pub(super) file: FileId,
    /// The files merged in (a node's hostname, a static node's keyfile);
    /// empty: the file as it is.
    pub(super) added: Vec<FileEntry>,
}

impl Key {
    pub(super) fn same_source(&self, other: &Key) -> bool {
        self.file.path == other.file.path && self.added == other.added
    }

    /// The key of the file body a merged body slices.
    pub(super) fn base(&self) -> Key {
        Key {
            file: self.file.clone(),
            added: Vec::new(),
        }
    }

    pub(super) fn is_merge(&self) -> bool {
        !self.added.is_empty()
    }
}

/// The located source of a body: the opened file and its key.
pub(super) struct Located {
    pub(super) key: Key,
    pub(super) path: PathBuf,
    file: File,
    pub(super) detail: String,
    /// How the file itself is served (`role file`, `node file`).
    file_detail: &'static str,
    /// The file's name as asked for (`master.ign`; `path` is resolved).
    pub(super) name: String,
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

impl Located {
    /// `opened` (from [`open_ign`] as `name`), a `file_detail`, served
    /// with `added` merged in (none: as it is, `file_detail`).
    fn of(
        (path, file, id): (PathBuf, File, FileId),
        (name, file_detail): (String, &'static str),
        added: Vec<FileEntry>,
    ) -> Located {
        let detail = match added.iter().map(detail_of).collect::<Vec<_>>() {
            parts if parts.is_empty() => file_detail.to_string(),
            parts => format!("{name} + {}", parts.join(" + ")),
        };
        Located {
            key: Key { file: id, added },
            path,
            file,
            detail,
            file_detail,
            name,
        }
    }
}

/// How an added entry shows in a fetch's detail: `hostname <fqdn>`, else
/// the file's name.
fn detail_of(e: &FileEntry) -> String {
    match e.path.as_str() {
        "/etc/hostname" => format!("hostname {}", e.contents.trim_end()),
        p => p.rsplit('/').next().unwrap_or(p).to_string(),
    }
}

/// Which file answers `t`, opened. Blocking.
pub(super) fn locate(dir: &Path, t: &Target) -> Result<Located, IgnError> {
    match t {
        Target::SingleNode { .. } => {
            let stem = crate::model::mode::BIP_IGNITION.trim_end_matches(".ign");
            let opened = open_ign(dir, stem)?
                .ok_or_else(|| IgnError::Missing(crate::model::mode::BIP_IGNITION.into()))?;
            let name = (
                crate::model::mode::BIP_IGNITION.into(),
                "bootstrap-in-place file",
            );
            Ok(Located::of(opened, name, Vec::new()))
        }
        Target::Role(role) => {
            let opened = open_ign(dir, role.as_str())?
                .ok_or_else(|| IgnError::Missing(format!("{role}.ign")))?;
            Ok(Located::of(
                opened,
                (format!("{role}.ign"), "role file"),
                Vec::new(),
            ))
        }
        Target::Node {
            node,
            role,
            hostname,
            keyfile,
        } => {
            if let Some(opened) = open_ign(dir, node)? {
                let added = keyfile.iter().cloned().collect();
                return Ok(Located::of(
                    opened,
                    (format!("{node}.ign"), "node file"),
                    added,
                ));
            }
            let opened = open_ign(dir, role.as_str())?
                .ok_or_else(|| IgnError::Missing(format!("{node}.ign and {role}.ign")))?;
            let mut added = vec![FileEntry::hostname(hostname)];
            added.extend(keyfile.iter().cloned());
            Ok(Located::of(
                opened,
                (format!("{role}.ign"), "role file"),
                added,
            ))
        }
    }
}

/// Read the located file as it is; `cacheable` is false when the file
/// changed while it was read. Blocking.
pub(super) fn read(l: &Located) -> Result<(IgnBody, bool), IgnError> {
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
    let etag = range::content_etag(&buf);
    let detail: &str = if l.key.is_merge() {
        l.file_detail
    } else {
        &l.detail
    };
    Ok((
        IgnBody::new(Arc::new([Bytes::from(buf)]), etag, detail.into()),
        unchanged,
    ))
}

/// `base` (a role or node file's body) with `added` merged in, as slices
/// of `base` and the merge's new bytes, and how many bytes those are.
/// Blocking (it scans the whole document).
pub(super) fn merge(
    base: &IgnBody,
    added: &[FileEntry],
    (path, name): (&Path, &str),
    detail: String,
) -> Result<(IgnBody, usize), IgnError> {
    let whole = base.parts.first().cloned().unwrap_or_default();
    let splice = ignmerge::files_splice(&whole, added).map_err(|e| {
        IgnError::Broken(format!(
            "cannot merge {} into {}: {e}",
            ignmerge::describe(added),
            path.display()
        ))
    })?;
    let detail = if splice.left_out.is_empty() {
        detail
    } else {
        // Say what was added, and what not.
        let mut d = name.to_string();
        for e in added.iter().filter(|e| !splice.left_out.contains(e)) {
            d = format!("{d} + {}", detail_of(e));
        }
        let out: Vec<String> = splice.left_out.iter().map(|e| detail_of(e)).collect();
        format!(
            "{d}, its own NetworkManager connections (no {})",
            out.join(", ")
        )
    };
    let pieces = splice.pieces;
    let mut added = 0;
    let parts: Vec<Bytes> = pieces
        .into_iter()
        .map(|p| match p {
            Piece::Base(r) => whole.slice(r),
            Piece::New(s) => {
                added += s.len();
                Bytes::from(s)
            }
        })
        .filter(|b| !b.is_empty())
        .collect();
    let refs: Vec<&[u8]> = parts.iter().map(|b| b.as_ref()).collect();
    let etag = range::content_etag_of(&refs);
    let body = IgnBody::new(parts.into(), etag, detail.into());
    Ok((body, added))
}

/// A body made from `raw` rather than a file (the day-2 workers' pointer
/// config, a few hundred bytes: made per request, not cached), with
/// `added` (a node's hostname, a static node's keyfile) merged in.
pub(crate) fn of_bytes(raw: Bytes, added: &[FileEntry], detail: &str) -> Result<IgnBody, IgnError> {
    let etag = range::content_etag(&raw);
    let base = IgnBody::new(Arc::new([raw]), etag, detail.into());
    if added.is_empty() {
        return Ok(base);
    }
    let mut d = detail.to_string();
    for e in added {
        d = format!("{d} + {}", detail_of(e));
    }
    merge(&base, added, (Path::new(detail), detail), d).map(|(body, _)| body)
}
