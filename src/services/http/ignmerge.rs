//! The per-node file merge as a splice of the served file's bytes.
//!
//! Role: a node without its own `<node>.ign` gets its role's `<role>.ign`
//! with an `/etc/hostname` entry in `storage.files`; a static node
//! (`addressing: static`) also gets its NetworkManager keyfile there, in
//! its role's file or in its own `<node>.ign` ([`FileEntry`]; the entries
//! come from `ignition::target`). Building that as a
//! new document (parse into a `serde_json::Value`, edit, serialise) cost
//! three copies of the role file per merge and one cached copy per node:
//! a 50 MB `master.ign` served to three masters took the process from 25
//! to 471 MB. Here the merge is computed as a few [`Piece`]s: ranges of
//! the role file's bytes and a little new text. The cache (`igncache`)
//! turns them into slices of the one cached role body, so a node's body
//! costs the entries' bytes, not a copy of the file.
//!
//! The document is validated in full (serde_json, borrowing: the values
//! are skipped, never built) and only the spans that change are looked at:
//! the top-level object, `ignition.config.replace`, `storage`,
//! `storage.files` and the `path` of each entry.
//!
//! Invariants (what the old `Value` merge did, tested against it):
//! - every key and value outside `storage.files` is kept byte for byte;
//!   entries of `storage.files` whose path is not one of the added ones are
//!   kept in order; existing entries with an added path are removed and the
//!   added ones are appended in their order, each `{contents: {source:
//!   "data:,<text>"}, mode, overwrite: true, path}` (RFC 2397 data URL,
//!   URL-encoded, valid for Ignition spec 3.x): `/etc/hostname` is
//!   `{… "data:,<fqdn>%0A", mode: 420, …}`, byte for byte what it was
//!   before the keyfile existed, so a DHCP node's body is unchanged;
//! - an entry that yields to a directory ([`FileEntry::yields_to`]: the
//!   keyfile, to `/etc/NetworkManager/system-connections/`) is left out
//!   when the config already writes a file there (the operator's own
//!   network setup, e.g. a bond, wins), and [`Splice::left_out`] says so;
//! - a config with a non-null `ignition.config.replace` pointer is refused
//!   (Ignition would fetch that config *instead of* this one and drop the
//!   added files; a `merge` pointer, as openshift-install writes, keeps
//!   them);
//! - a top level that is not an object, a `storage` that is not an object
//!   or a `storage.files` that is not an array is refused;
//! - with duplicate keys the last one counts, as for every JSON reader that
//!   keeps one (serde_json, Go's encoding/json that Ignition uses).

use std::collections::BTreeMap;
use std::ops::Range;

use serde_json::json;
use serde_json::value::RawValue;

/// Why a role config could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not UTF-8: {0}")]
    Utf8(#[from] std::str::Utf8Error),
    #[error("{0}")]
    Shape(&'static str),
}

/// One piece of a merged document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// These bytes of the role file.
    Base(Range<usize>),
    /// New text.
    New(String),
}

/// `data:` URL for a small text file (percent-encoding what is not unreserved).
pub fn data_url(text: &str) -> String {
    let mut out = String::from("data:,");
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One `storage.files` entry the appliance adds: a small text file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileEntry {
    /// Absolute path in the installed root.
    pub path: String,
    /// Its mode (decimal in the JSON: 420 = 0644, 384 = 0600).
    pub mode: u32,
    /// Its text.
    pub contents: String,
    /// What it is, for messages ("the hostname").
    pub what: &'static str,
    /// Not added when the config already writes a file under this
    /// directory: the operator's own setup there wins.
    pub yields_to: Option<&'static str>,
}

impl FileEntry {
    /// `/etc/hostname` = `fqdn` (0644).
    pub fn hostname(fqdn: &str) -> FileEntry {
        FileEntry {
            path: "/etc/hostname".into(),
            mode: 0o644,
            contents: format!("{fqdn}\n"),
            what: "the hostname",
            yields_to: None,
        }
    }

    /// The entry as JSON (keys sorted, as `serde_json` writes a map).
    fn json(&self) -> String {
        json!({
            "path": self.path,
            "mode": self.mode,
            "overwrite": true,
            "contents": { "source": data_url(&self.contents) },
        })
        .to_string()
    }
}

/// What `entries` are, for messages: "the hostname and the static keyfile".
pub fn describe(entries: &[FileEntry]) -> String {
    let names: Vec<&str> = entries.iter().map(|e| e.what).collect();
    names.join(" and ")
}

type Object<'a> = BTreeMap<String, &'a RawValue>;

/// Where `part` (a slice of `doc`) starts in `doc`.
fn offset(doc: &str, part: &str) -> usize {
    part.as_ptr() as usize - doc.as_ptr() as usize
}

/// The span of a raw value in `doc`.
fn span(doc: &str, v: &RawValue) -> Range<usize> {
    let start = offset(doc, v.get());
    start..start + v.get().len()
}

fn is_object(v: &RawValue) -> bool {
    v.get().starts_with('{')
}

/// The members of `v` when it is an object.
fn object(v: &RawValue) -> Result<Option<Object<'_>>, MergeError> {
    if !is_object(v) {
        return Ok(None);
    }
    Ok(Some(serde_json::from_str(v.get())?))
}

/// The `path` of a `storage.files` entry, when it has a string one.
fn entry_path(v: &RawValue) -> Result<Option<String>, MergeError> {
    let Some(entry) = object(v)? else {
        return Ok(None);
    };
    Ok(match entry.get("path") {
        Some(p) if p.get().starts_with('"') => Some(serde_json::from_str::<String>(p.get())?),
        _ => None,
    })
}

/// Refuse a non-null `ignition.config.replace`.
fn check_no_replace(top: &Object<'_>) -> Result<(), MergeError> {
    let replace = match top.get("ignition").map(|v| object(v)).transpose()? {
        Some(Some(ign)) => match ign.get("config").map(|v| object(v)).transpose()? {
            Some(Some(config)) => config.get("replace").map(|r| r.get() != "null"),
            _ => None,
        },
        _ => None,
    };
    if replace == Some(true) {
        return Err(MergeError::Shape(
            "it has an ignition.config.replace pointer, which would discard the files the appliance adds \
             (the node's /etc/hostname, a static node's keyfile); use ignition.config.merge \
             (a node with addressing: dhcp may also have its own <node>.ign)",
        ));
    }
    Ok(())
}

/// `text` inserted before the closing bracket of the container `v` (an
/// object or array of `doc`), after a comma unless it is empty.
fn append(doc: &str, v: &RawValue, empty: bool, text: String) -> Vec<Piece> {
    let close = span(doc, v).end - 1;
    let sep = if empty { "" } else { "," };
    vec![
        Piece::Base(0..close),
        Piece::New(format!("{sep}{text}")),
        Piece::Base(close..doc.len()),
    ]
}

/// A merged document, and the entries left out of it.
#[derive(Debug)]
pub struct Splice<'e> {
    /// The document as pieces of the config and new text.
    pub pieces: Vec<Piece>,
    /// Entries not added: the config writes a file where they yield
    /// ([`FileEntry::yields_to`]).
    pub left_out: Vec<&'e FileEntry>,
}

/// The merged document of `config` with `entries` in `storage.files`, as
/// pieces of `config` and new text (see the module doc).
pub fn files_splice<'e>(config: &[u8], entries: &'e [FileEntry]) -> Result<Splice<'e>, MergeError> {
    let doc = std::str::from_utf8(config)?;
    let root: &RawValue = serde_json::from_str(doc)?;
    let top = object(root)?.ok_or(MergeError::Shape("top level is not a JSON object"))?;
    check_no_replace(&top)?;
    let whole = |left_out| Splice {
        pieces: vec![Piece::Base(0..doc.len())],
        left_out,
    };
    let json = |list: &[&FileEntry]| -> String {
        let all: Vec<String> = list.iter().map(|e| e.json()).collect();
        all.join(",")
    };
    let all: Vec<&FileEntry> = entries.iter().collect();
    if entries.is_empty() {
        return Ok(whole(Vec::new()));
    }
    let added = |pieces| Splice {
        pieces,
        left_out: Vec::new(),
    };
    let Some(storage_raw) = top.get("storage") else {
        let storage = format!(r#""storage":{{"files":[{}]}}"#, json(&all));
        return Ok(added(append(doc, root, top.is_empty(), storage)));
    };
    let storage = object(storage_raw)?.ok_or(MergeError::Shape("storage is not an object"))?;
    let Some(files_raw) = storage.get("files") else {
        let files = format!(r#""files":[{}]"#, json(&all));
        return Ok(added(append(doc, storage_raw, storage.is_empty(), files)));
    };
    if !files_raw.get().starts_with('[') {
        return Err(MergeError::Shape("storage.files is not an array"));
    }
    let files: Vec<&RawValue> = serde_json::from_str(files_raw.get())?;
    let existing = files
        .iter()
        .map(|f| entry_path(f))
        .collect::<Result<Vec<_>, _>>()?;
    let (add, left_out): (Vec<&FileEntry>, Vec<&FileEntry>) = entries.iter().partition(|e| {
        !e.yields_to
            .is_some_and(|dir| existing.iter().flatten().any(|p| p.starts_with(dir)))
    });
    if add.is_empty() {
        return Ok(whole(left_out));
    }
    let paths: Vec<&str> = add.iter().map(|e| e.path.as_str()).collect();
    let keep: Vec<bool> = existing
        .iter()
        .map(|p| !p.as_deref().is_some_and(|p| paths.contains(&p)))
        .collect();
    let entry = json(&add);
    let pieces = if keep.iter().all(|k| *k) {
        append(doc, files_raw, files.is_empty(), entry)
    } else {
        rebuild(doc, files_raw, &files, &keep, &entry)
    };
    Ok(Splice { pieces, left_out })
}

/// `storage.files` rebuilt: runs of the kept entries (contiguous in the
/// file, commas included), then `entry`.
fn rebuild(
    doc: &str,
    files_raw: &RawValue,
    files: &[&RawValue],
    keep: &[bool],
    entry: &str,
) -> Vec<Piece> {
    let array = span(doc, files_raw);
    let mut pieces = vec![Piece::Base(0..array.start + 1)];
    let mut run: Option<Range<usize>> = None;
    let mut wrote = false;
    let mut flush = |run: &mut Option<Range<usize>>, pieces: &mut Vec<Piece>| {
        if let Some(r) = run.take() {
            if wrote {
                pieces.push(Piece::New(",".into()));
            }
            pieces.push(Piece::Base(r));
            wrote = true;
        }
    };
    for (f, k) in files.iter().zip(keep) {
        if !*k {
            flush(&mut run, &mut pieces);
            continue;
        }
        let s = span(doc, f);
        run = Some(match run.take() {
            Some(r) => r.start..s.end,
            None => s,
        });
    }
    flush(&mut run, &mut pieces);
    let any_kept = keep.iter().any(|k| *k);
    let sep = if any_kept { "," } else { "" };
    pieces.push(Piece::New(format!("{sep}{entry}")));
    pieces.push(Piece::Base(array.end - 1..doc.len()));
    pieces
}

/// The merged document as one buffer (serving keeps the pieces).
#[cfg(test)]
fn merge_files(config: &[u8], entries: &[FileEntry]) -> Result<Vec<u8>, MergeError> {
    let pieces = files_splice(config, entries)?.pieces;
    let mut out = Vec::with_capacity(config.len() + 128);
    for p in pieces {
        match p {
            Piece::Base(r) => out.extend_from_slice(&config[r]),
            Piece::New(s) => out.extend_from_slice(s.as_bytes()),
        }
    }
    Ok(out)
}

/// [`merge_files`] with the hostname entry alone.
#[cfg(test)]
fn merge_hostname(role_config: &[u8], hostname: &str) -> Result<Vec<u8>, MergeError> {
    merge_files(role_config, &[FileEntry::hostname(hostname)])
}

/// The old merge, through a whole `Value` (the reference the splice is
/// tested against), for any list of entries.
#[cfg(test)]
fn merge_by_value(config: &[u8], entries: &[FileEntry]) -> Option<serde_json::Value> {
    use serde_json::Value;
    let mut doc: Value = serde_json::from_slice(config).ok()?;
    let files = doc
        .as_object_mut()?
        .entry("storage")
        .or_insert_with(|| json!({}))
        .as_object_mut()?
        .entry("files")
        .or_insert_with(|| json!([]))
        .as_array_mut()?;
    let path = |f: &Value| f.get("path").and_then(Value::as_str).map(String::from);
    let existing: Vec<String> = files.iter().filter_map(path).collect();
    let entries: Vec<&FileEntry> = entries
        .iter()
        .filter(|e| {
            !e.yields_to
                .is_some_and(|d| existing.iter().any(|p| p.starts_with(d)))
        })
        .collect();
    files.retain(|f| !entries.iter().any(|e| Some(&e.path) == path(f).as_ref()));
    for e in entries {
        files.push(serde_json::from_str(&e.json()).ok()?);
    }
    Some(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn merged(role: &[u8], h: &str) -> Value {
        let out = merge_hostname(role, h).unwrap();
        serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
    }

    #[test]
    fn data_urls() {
        assert_eq!(data_url("m0.c.example.com\n"), "data:,m0.c.example.com%0A");
        assert_eq!(data_url("a b/c"), "data:,a%20b%2Fc");
    }

    /// The hostname entry is byte for byte what it was before the keyfile
    /// existed: a DHCP node's body is unchanged.
    #[test]
    fn the_hostname_entry_bytes() {
        assert_eq!(
            FileEntry::hostname("m0.c.example.com").json(),
            r#"{"contents":{"source":"data:,m0.c.example.com%0A"},"mode":420,"overwrite":true,"path":"/etc/hostname"}"#
        );
    }

    fn hostname_entries(v: &Value) -> Vec<&Value> {
        v["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["path"] == "/etc/hostname")
            .collect()
    }

    #[test]
    fn merge_into_pointer_config() {
        let role = br#"{"ignition":{"config":{"merge":[{"source":"https://api-int.c.example.com:22623/config/master"}]},"version":"3.2.0"}}"#;
        let v = merged(role, "m0.c.example.com");
        assert_eq!(
            v["ignition"]["config"]["merge"][0]["source"],
            "https://api-int.c.example.com:22623/config/master"
        );
        assert_eq!(v["ignition"]["version"], "3.2.0");
        let h = hostname_entries(&v);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0]["mode"], 420);
        assert_eq!(h[0]["overwrite"], true);
        assert_eq!(h[0]["contents"]["source"], "data:,m0.c.example.com%0A");
    }

    #[test]
    fn merge_replaces_existing_hostname_and_keeps_other_files() {
        let role = br#"{"ignition":{"version":"3.4.0"},"storage":{"disks":[],"files":[
            {"path":"/etc/hostname","contents":{"source":"data:,old"}},
            {"path":"/etc/motd","contents":{"source":"data:,hi"}}]},"systemd":{"units":[{"name":"a.service"}]}}"#;
        let v = merged(role, "w0.c.example.com");
        let h = hostname_entries(&v);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0]["contents"]["source"], "data:,w0.c.example.com%0A");
        assert_eq!(v["storage"]["files"].as_array().unwrap().len(), 2);
        assert_eq!(v["storage"]["files"][0]["path"], "/etc/motd");
        assert_eq!(v["storage"]["disks"], json!([]));
        assert_eq!(v["systemd"]["units"][0]["name"], "a.service");
    }

    /// Every shape the merge meets gives what the old `Value` merge gave.
    #[test]
    fn the_splice_equals_the_value_merge() {
        let cases: &[&str] = &[
            "{}",
            " { } \n",
            r#"{"ignition":{"version":"3.2.0"}}"#,
            r#"{"storage":{}}"#,
            r#"{"storage":{"disks":[]}}"#,
            r#"{"storage":{"files":[]}}"#,
            r#"{"storage":{"files":[ ]}, "x": 1}"#,
            r#"{"storage":{"files":[{"path":"/etc/hostname"}]}}"#,
            r#"{"storage":{"files":[{"path":"/etc/hostname"},{"path":"/etc/hostname","mode":1}]}}"#,
            r#"{"storage":{"files":[{"path":"/a"},{"path":"/etc/hostname"},{"path":"/b"},{"path":"/c"},{"path":"/etc/hostname"},{"path":"/d"}]}}"#,
            r#"{"storage":{"files":[{"path":"/etc/hostname"},{"path":"/a"}]}}"#,
            r#"{"storage":{"files":[ 1, "s", null, [], {"path":5}, {"path":"\/etc\/hostname"} ]}}"#,
            r#"{"storage":{"files":[{"path":"/a"}]},"storage":{"files":[{"path":"/b"}]}}"#,
            "{\n  \"ignition\": {\"config\": {\"replace\": null}},\n  \"storage\": {\n    \"files\": [\n      {\"path\": \"/x\"}\n    ]\n  }\n}\n",
            r#"{"ignition":[1],"st\u006frage":{"files":[]}}"#,
            r#"{"storage":{"files":[{"path":"/etc/NetworkManager/system-connections/bond0.nmconnection"},{"path":"/etc/hostname"}]}}"#,
            r#"{"storage":{"files":[{"path":"/etc/NetworkManager/system-connections-x"}]}}"#,
        ];
        let keyfile = FileEntry {
            path: "/etc/NetworkManager/system-connections/eth0.nmconnection".into(),
            mode: 0o600,
            contents: "[connection]\nid=eth0\n".into(),
            what: "the static keyfile",
            yields_to: Some("/etc/NetworkManager/system-connections/"),
        };
        let both = [FileEntry::hostname("n.c.example.com"), keyfile.clone()];
        for c in cases {
            let want = merge_by_value(c.as_bytes(), &both[..1]).unwrap();
            assert_eq!(merged(c.as_bytes(), "n.c.example.com"), want, "{c}");
            // Two entries, and the keyfile alone (a static node's own file).
            for entries in [&both[..], &both[1..]] {
                let want = merge_by_value(c.as_bytes(), entries).unwrap();
                let out = merge_files(c.as_bytes(), entries).unwrap();
                let got: Value = serde_json::from_slice(&out).unwrap();
                assert_eq!(got, want, "{c} with {}", describe(entries));
            }
        }
        // A keyfile with no yield rule replaces an entry at its path.
        let c = r#"{"storage":{"files":[{"path":"/etc/NetworkManager/system-connections/eth0.nmconnection"},{"path":"/a"}]}}"#;
        let both = [
            both[0].clone(),
            FileEntry {
                yields_to: None,
                ..keyfile
            },
        ];
        let got: Value =
            serde_json::from_slice(&merge_files(c.as_bytes(), &both).unwrap()).unwrap();
        assert_eq!(got, merge_by_value(c.as_bytes(), &both).unwrap());
        assert_eq!(got["storage"]["files"].as_array().unwrap().len(), 3);
        assert_eq!(got["storage"]["files"][2]["mode"], 384);
        // No entries: the file as it is.
        assert_eq!(merge_files(c.as_bytes(), &[]).unwrap(), c.as_bytes());
    }

    /// A config that writes a NetworkManager connection of its own gets no
    /// keyfile (the hostname still), and says so; one that does not gets it.
    #[test]
    fn a_keyfile_yields_to_the_configs_own_connections() {
        let keyfile = FileEntry {
            path: "/etc/NetworkManager/system-connections/eth0.nmconnection".into(),
            mode: 0o600,
            contents: "x".into(),
            what: "the static keyfile",
            yields_to: Some("/etc/NetworkManager/system-connections/"),
        };
        let both = [FileEntry::hostname("n.c.example.com"), keyfile];
        let own = br#"{"storage":{"files":[{"path":"/etc/NetworkManager/system-connections/eth0.nmconnection","contents":{"source":"data:,mine"}}]}}"#;
        let s = files_splice(own, &both).unwrap();
        assert_eq!(s.left_out, [&both[1]]);
        let v: Value = serde_json::from_slice(&merge_files(own, &both).unwrap()).unwrap();
        let files = v["storage"]["files"].as_array().unwrap();
        assert_eq!(files.len(), 2, "{v}");
        assert_eq!(files[0]["contents"]["source"], "data:,mine");
        assert_eq!(files[1]["path"], "/etc/hostname");
        // The keyfile alone: the file as it is.
        let s = files_splice(own, &both[1..]).unwrap();
        assert_eq!(
            (s.pieces, s.left_out.len()),
            (vec![Piece::Base(0..own.len())], 1)
        );
        let none = br#"{"storage":{"files":[{"path":"/etc/motd"}]}}"#;
        assert!(files_splice(none, &both).unwrap().left_out.is_empty());
    }

    #[test]
    fn merge_errors() {
        let err = |doc: &[u8]| merge_hostname(doc, "h").unwrap_err();
        assert!(matches!(err(b"{not json"), MergeError::Json(_)));
        assert!(matches!(err(br#"{"a":1} x"#), MergeError::Json(_)));
        assert!(matches!(err(br#"{"a":[1,}"#), MergeError::Json(_)));
        assert!(matches!(err(b"{\"a\":\"\xff\"}"), MergeError::Utf8(_)));
        assert!(matches!(err(b"[]"), MergeError::Shape(_)));
        assert!(matches!(err(br#"{"storage":[]}"#), MergeError::Shape(_)));
        assert!(matches!(
            err(br#"{"storage":{"files":{}}}"#),
            MergeError::Shape(_)
        ));
        // A replace pointer would discard the hostname: refused, clearly.
        let replace =
            br#"{"ignition":{"version":"3.2.0","config":{"replace":{"source":"https://x/c"}}}}"#;
        match merge_hostname(replace, "h") {
            Err(MergeError::Shape(m)) => assert!(m.contains("ignition.config.replace"), "{m}"),
            other => panic!("{other:?}"),
        }
        // A merge pointer (what openshift-install writes) is fine.
        let merge =
            br#"{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://x/c"}]}}}"#;
        assert!(merge_hostname(merge, "h").is_ok());
    }

    #[test]
    fn the_pieces_are_mostly_the_role_file() {
        let mut role = String::from(r#"{"ignition":{"version":"3.2.0"},"storage":{"files":["#);
        for i in 0..1000 {
            role.push_str(&format!(
                r#"{{"path":"/etc/f{i}","contents":{{"source":"data:,x"}}}},"#
            ));
        }
        role.push_str(r#"{"path":"/etc/hostname"},{"path":"/etc/last"}]}}"#);
        let entries = [FileEntry::hostname("n.example.com")];
        let pieces = files_splice(role.as_bytes(), &entries).unwrap().pieces;
        let new: usize = pieces
            .iter()
            .map(|p| match p {
                Piece::New(s) => s.len(),
                Piece::Base(_) => 0,
            })
            .sum();
        assert!(pieces.len() <= 6, "{pieces:?}");
        assert!(new < 150, "{new} new bytes");
    }
}
