//! The kernel-argument embed areas of an RHCOS/FCOS live ISO, and byte
//! patches over a file: the pure core of the per-node boot ISO
//! (`/boot/<node>.iso`, `http::iso`).
//!
//! Layout (as `coreos-installer iso kargs modify` reads it): the ISO holds
//! `coreos/kargs.json` = `{"default": str, "files": [{"path", "offset",
//! "pad"?, "end"?}], "size"}`. Each listed file (`isolinux/isolinux.cfg`,
//! `EFI/redhat/grub.cfg`) has an area of `size` bytes at `offset` in its
//! data, i.e. at `extent(path) * 2048 + offset` in the image, holding the
//! live kernel arguments, then `end` (default `\n`), then `pad` (default
//! `#`) up to `size`; the bootloader line after it (`# COREOS_KARG_EMBED_AREA`)
//! makes the padding a comment. Writing kargs = `kargs + end`, padded with
//! `pad` to `size`, in every area.
//!
//! Invariants: every value read from the image is checked (areas lie inside
//! their file, `size` ≤ [`MAX_AREA`], pad/end are one ASCII byte, every
//! area holds the same kargs, areas do not overlap); bad input is an
//! [`EmbedError`], never a panic. Memory: `size` bytes per area.

pub mod embed;

use std::io::{Read, Seek};
use std::path::Path;

use serde::Deserialize;

use crate::boot::iso9660::{IsoError, IsoImage};
use crate::model::boot::{IsoTarget, iso_install_kargs};
use crate::model::cluster::{Cluster, Role};

/// Where the embed areas are described inside the ISO.
pub const KARGS_JSON: &str = "coreos/kargs.json";
/// Largest embed area accepted (coreos-installer's limit).
pub const MAX_AREA: usize = crate::model::boot::MAX_KARGS_AREA;
/// Largest `kargs.json` and bootloader config read.
const MAX_INFO: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("{0}")]
    Iso(#[from] IsoError),
    #[error("no {KARGS_JSON}: not an RHCOS/FCOS live ISO with kernel-argument embed areas")]
    NoKargsJson,
    #[error("{KARGS_JSON} is invalid: {0}")]
    BadInfo(String),
    #[error("kernel-argument embed area: {0}")]
    BadArea(String),
    /// `igninfo.json`'s area does not fit its file.
    #[error("Ignition embed area: {file}: {why}")]
    BadIgnitionArea { file: String, why: embed::AreaError },
    #[error(
        "no Ignition embed area ({0} is missing): not an RHCOS/FCOS live ISO coreos-installer can embed a config in"
    )]
    NoIgnitionArea(String),
    #[error(
        "the compressed Ignition is {len} bytes; the ISO's Ignition embed area holds {area} (coreos-installer has the same limit)"
    )]
    IgnitionTooLarge { len: usize, area: usize },
    #[error(
        "kernel arguments are {len} bytes; the ISO's embed area holds at most {max} (kargs.json size {size} minus the line end)",
        max = size - 1
    )]
    TooLong { len: usize, size: usize },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Info {
    default: String,
    files: Vec<Location>,
    size: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Location {
    path: String,
    offset: u64,
    pad: Option<char>,
    end: Option<char>,
}

/// One area: its offset in the image and its framing bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Area {
    pub path: String,
    pub offset: u64,
    pub pad: u8,
    pub end: u8,
}

/// The embed areas of one image and the kargs they hold now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KargAreas {
    /// Bytes per area.
    pub size: usize,
    /// The build's kargs (`kargs.json` `default`).
    pub default: String,
    /// The kargs in the areas now (the default unless the ISO was modified).
    pub current: String,
    /// Sorted by offset, non-overlapping.
    pub areas: Vec<Area>,
}

fn ascii(c: Option<char>, dflt: u8, what: &str, path: &str) -> Result<u8, EmbedError> {
    match c {
        None => Ok(dflt),
        Some(c) if c.is_ascii() => Ok(c as u8),
        Some(c) => Err(EmbedError::BadArea(format!(
            "{path}: {what} {c:?} is not one ASCII character"
        ))),
    }
}

/// The text of an area without its padding, line end and surrounding blanks.
fn area_text(bytes: &[u8], pad: u8, end: u8, path: &str) -> Result<String, EmbedError> {
    let s = std::str::from_utf8(bytes)
        .map_err(|_| EmbedError::BadArea(format!("{path}: not UTF-8")))?;
    Ok(s.trim_end_matches(pad as char)
        .trim_end_matches(end as char)
        .trim()
        .to_string())
}

impl KargAreas {
    /// Read `kargs.json` and every area of the image.
    pub fn locate<R: Read + Seek>(img: &mut IsoImage<R>) -> Result<KargAreas, EmbedError> {
        let json = match img.read_file(KARGS_JSON, MAX_INFO) {
            Ok(j) => j,
            Err(IsoError::NotFound(_)) => return Err(EmbedError::NoKargsJson),
            Err(e) => return Err(e.into()),
        };
        KargAreas::parse(&json, |path| {
            let e = img.lookup(path)?;
            let (at, _) = img.region(&e)?;
            let data = img.read_file(path, MAX_INFO)?;
            Ok((at, data))
        })
    }

    /// Parse `json` (kargs.json); `file(path)` gives a listed file's offset
    /// in the image and its contents.
    pub fn parse(
        json: &[u8],
        mut file: impl FnMut(&str) -> Result<(u64, Vec<u8>), EmbedError>,
    ) -> Result<KargAreas, EmbedError> {
        let info: Info =
            serde_json::from_slice(json).map_err(|e| EmbedError::BadInfo(e.to_string()))?;
        if info.size == 0 || info.size > MAX_AREA {
            return Err(EmbedError::BadInfo(format!(
                "size {} (must be 1..={MAX_AREA})",
                info.size
            )));
        }
        if info.default.len() >= info.size {
            return Err(EmbedError::BadInfo(format!(
                "default kargs ({} bytes) do not fit the areas ({} bytes)",
                info.default.len(),
                info.size
            )));
        }
        if info.files.is_empty() || info.files.len() > 16 {
            return Err(EmbedError::BadInfo(format!(
                "{} files (must be 1..=16)",
                info.files.len()
            )));
        }
        let mut areas = Vec::new();
        let mut current: Option<String> = None;
        for loc in &info.files {
            let p = &loc.path;
            let pad = ascii(loc.pad, b'#', "pad", p)?;
            let end = ascii(loc.end, b'\n', "end", p)?;
            let (at, data) = file(p)?;
            let start = usize::try_from(loc.offset).ok();
            let bytes = start
                .and_then(|s| data.get(s..s.checked_add(info.size)?))
                .ok_or_else(|| {
                    EmbedError::BadArea(format!(
                        "{p}: {} bytes at offset {} run past the file ({} bytes)",
                        info.size,
                        loc.offset,
                        data.len()
                    ))
                })?;
            let text = area_text(bytes, pad, end, p)?;
            match &current {
                Some(c) if *c != text => {
                    return Err(EmbedError::BadArea(format!(
                        "{p} holds {text:?}, another area {c:?}"
                    )));
                }
                _ => current = Some(text),
            }
            areas.push(Area {
                path: p.clone(),
                offset: at + loc.offset,
                pad,
                end,
            });
        }
        areas.sort_by_key(|a| a.offset);
        if let Some(w) = areas
            .windows(2)
            .find(|w| w[0].offset + info.size as u64 > w[1].offset)
        {
            return Err(EmbedError::BadArea(format!(
                "the areas of {} and {} overlap",
                w[0].path, w[1].path
            )));
        }
        Ok(KargAreas {
            size: info.size,
            default: info.default,
            current: current.unwrap_or_default(),
            areas,
        })
    }

    /// The ISO's current kargs followed by `extra` (words already present
    /// are not repeated, except `console=`; see [`merge`]).
    pub fn with_extra(&self, extra: &str) -> String {
        merge(&self.current, extra)
    }

    /// Every area holding `kargs` (then `end`, padded with `pad`).
    pub fn patches(&self, kargs: &str) -> Result<Patches, EmbedError> {
        let k = kargs.trim();
        if k.len() >= self.size {
            return Err(EmbedError::TooLong {
                len: k.len(),
                size: self.size,
            });
        }
        Patches::new(
            self.areas
                .iter()
                .map(|a| {
                    let mut b = vec![a.pad; self.size];
                    b[..k.len()].copy_from_slice(k.as_bytes());
                    b[k.len()] = a.end;
                    (a.offset, b)
                })
                .collect(),
        )
    }
}

/// The boot ISOs (every node, and every role that has nodes) whose install
/// kargs do not fit the embed areas of `iso`, with why; an error when `iso`
/// has no usable areas at all (for `preflight`).
pub fn unfit(c: &Cluster, iso: &Path) -> Result<Vec<(String, EmbedError)>, EmbedError> {
    let f = std::fs::File::open(iso).map_err(IsoError::Io)?;
    let areas = KargAreas::locate(&mut IsoImage::open(std::io::BufReader::new(f))?)?;
    let roles = Role::ALL
        .into_iter()
        .filter(|r| c.nodes_with_role(*r).next().is_some())
        .map(IsoTarget::Role);
    Ok(c.nodes
        .iter()
        .map(IsoTarget::Node)
        .chain(roles)
        .filter_map(|t| {
            let k = areas.with_extra(&iso_install_kargs(c, t));
            areas.patches(&k).err().map(|e| (t.name().to_string(), e))
        })
        .collect())
}

/// `base` then the words of `extra` that `base` lacks, and every
/// `console=` of `extra` even when `base` has it: the result is what
/// `coreos-installer iso kargs modify --append W…` writes for those words.
///
/// Why `console=` is always appended: it is order-sensitive (the last one
/// is `/dev/console`, where the installer's output and the emergency shell
/// go). Dropping the node's `console=ttyS0,115200n8` because the ISO already
/// has it (`iso kargs modify -a console=ttyS0,115200n8`, the usual serial
/// set-up) would leave the node's `console=tty0` last, on VGA. Other words
/// the ISO has (`ignition.firstboot`, `ignition.platform.id=metal`) are set
/// once, and repeating them would only use up the area.
pub fn merge(base: &str, extra: &str) -> String {
    let have: Vec<&str> = base.split_whitespace().collect();
    let mut out = base.trim().to_string();
    let wanted = |w: &&str| !have.contains(w) || w.starts_with("console=");
    for w in extra.split_whitespace().filter(wanted) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// Byte replacements over a file: `(offset, bytes)`, sorted and
/// non-overlapping. Reading through them ([`Patches::apply`]) gives the
/// file with those bytes replaced, whatever the read's offset and length.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patches(Vec<(u64, Vec<u8>)>);

impl Patches {
    pub fn new(mut v: Vec<(u64, Vec<u8>)>) -> Result<Patches, EmbedError> {
        v.retain(|(_, b)| !b.is_empty());
        v.sort_by_key(|(o, _)| *o);
        for w in v.windows(2) {
            let end = w[0].0.checked_add(w[0].1.len() as u64);
            if end.is_none_or(|e| e > w[1].0) {
                return Err(EmbedError::BadArea(format!(
                    "patches at {} and {} overlap",
                    w[0].0, w[1].0
                )));
            }
        }
        Ok(Patches(v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These patches and `more` (which must not overlap them).
    pub fn with(self, more: Vec<(u64, Vec<u8>)>) -> Result<Patches, EmbedError> {
        let mut v = self.0;
        v.extend(more);
        Patches::new(v)
    }

    /// The highest offset a patch reaches (0 without patches).
    pub fn end(&self) -> u64 {
        self.0
            .last()
            .map_or(0, |(o, b)| o.saturating_add(b.len() as u64))
    }

    /// `(offset, length)` of each patch.
    pub fn regions(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().map(|(o, b)| (*o, b.len() as u64))
    }

    /// Overwrite the bytes of `buf` — the file's bytes from offset `at` —
    /// that a patch covers.
    pub fn apply(&self, at: u64, buf: &mut [u8]) {
        let end = at.saturating_add(buf.len() as u64);
        for (o, b) in &self.0 {
            let pend = o.saturating_add(b.len() as u64);
            if pend <= at || *o >= end {
                continue;
            }
            let from = o.max(&at);
            let to = pend.min(end);
            let (bi, pi) = ((from - at) as usize, (from - o) as usize);
            let n = (to - from) as usize;
            buf[bi..bi + n].copy_from_slice(&b[pi..pi + n]);
        }
    }

    /// FNV-1a 64 over the offsets and bytes (for entity tags).
    pub fn fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (o, b) in &self.0 {
            for x in o.to_le_bytes().iter().chain(b.iter()) {
                h ^= u64::from(*x);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }
}

#[cfg(test)]
mod tests;
