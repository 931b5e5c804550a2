//! A minimal, read-only ISO 9660 reader: enough to pull the kernel, initramfs
//! and rootfs out of an unmodified RHCOS/FCOS live ISO.
//!
//! Layout (ECMA-119): 2048-byte logical sectors; volume descriptors start at
//! sector 16 and end with a terminator (type 255); the primary volume
//! descriptor (type 1, `CD001`) holds the volume id (bytes 40..72) and the
//! root directory record (bytes 156..190). A directory is an extent of
//! variable-length records that never cross a sector boundary (a zero length
//! byte means "continue at the next sector"). Record: length @0, extent LBA
//! u32le @2, data length u32le @10, flags @25 (bit 1 directory, bit 7 "more
//! extents follow"), name length @32, name @33, then the System Use area.
//!
//! Names: the primary-volume name (`VMLINUZ.;1`, version and trailing dot
//! stripped) and, when the image carries Rock Ridge (SUSP `SP` in the root's
//! `.` record), the `NM` name (`vmlinuz`), following `CE` continuation areas.
//! Lookups compare both case-insensitively, like coreos-installer does with
//! its 8.3 constants. Joliet is not needed for that and is ignored.
//!
//! Invariants: every offset read from the image is bounds-checked; a
//! truncated or corrupt image yields an [`IsoError`], never a panic; memory
//! is bounded (directories up to [`MAX_DIR_BYTES`], file copies stream
//! through a fixed buffer).

use std::io::{self, Read, Seek, SeekFrom, Write};

pub const SECTOR: u64 = 2048;
/// Largest directory extent we read into memory.
pub const MAX_DIR_BYTES: u64 = 16 << 20;
/// Deepest path we follow (ISO 9660 allows 8 levels; Rock Ridge more).
const MAX_DEPTH: usize = 64;
/// Volume descriptors scanned before giving up on a terminator.
const MAX_DESCRIPTORS: u64 = 64;
/// Rock Ridge continuation areas followed per record.
const MAX_CONTINUATIONS: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum IsoError {
    #[error("I/O error reading the ISO: {0}")]
    Io(#[from] io::Error),
    #[error("not an ISO 9660 image: {0}")]
    NotIso(String),
    #[error("corrupt ISO 9660 image: {0}")]
    Corrupt(String),
    #[error("{0}: no such file or directory in the ISO")]
    NotFound(String),
    #[error("{0}: not a directory in the ISO")]
    NotADirectory(String),
    #[error("{0}: is a directory in the ISO")]
    IsADirectory(String),
}

fn corrupt(msg: impl Into<String>) -> IsoError {
    IsoError::Corrupt(msg.into())
}

/// A file or directory in the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Rock Ridge name if present, else the primary-volume name without
    /// `;version` and trailing dot.
    pub name: String,
    /// Primary-volume name without `;version` and trailing dot.
    pub iso_name: String,
    pub is_dir: bool,
    /// Total size in bytes.
    pub size: u64,
    /// (LBA, length) of each extent, in order.
    extents: Vec<(u32, u32)>,
}

impl DirEntry {
    fn matches(&self, want: &str) -> bool {
        self.name.eq_ignore_ascii_case(want) || self.iso_name.eq_ignore_ascii_case(want)
    }
}

/// An opened image over any seekable reader (a `File`, a `Cursor<Vec<u8>>`).
pub struct IsoImage<R> {
    r: R,
    len: u64,
    volume_id: String,
    root: DirEntry,
    /// Rock Ridge present: bytes to skip at the start of each System Use area.
    rr_skip: Option<usize>,
}

fn u16le(b: &[u8], at: usize) -> Result<u16, IsoError> {
    b.get(at..at + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| corrupt("record too short"))
}

fn u32le(b: &[u8], at: usize) -> Result<u32, IsoError> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| corrupt("record too short"))
}

/// One parsed directory record (before multi-extent merging).
struct RawRecord {
    lba: u32,
    len: u32,
    flags: u8,
    iso_name: Vec<u8>,
    su: Vec<u8>,
}

fn parse_record(rec: &[u8]) -> Result<RawRecord, IsoError> {
    if rec.len() < 34 {
        return Err(corrupt(format!(
            "directory record of {} bytes (< 34)",
            rec.len()
        )));
    }
    let name_len = rec[32] as usize;
    let name_end = 33 + name_len;
    if name_end > rec.len() {
        return Err(corrupt("directory record name runs past the record"));
    }
    let su_start = (name_end + usize::from(name_len.is_multiple_of(2))).min(rec.len());
    Ok(RawRecord {
        lba: u32le(rec, 2)?,
        len: u32le(rec, 10)?,
        flags: rec[25],
        iso_name: rec[33..name_end].to_vec(),
        su: rec[su_start..].to_vec(),
    })
}

fn strip_iso_name(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    let s = match s.rfind(';') {
        Some(i) => &s[..i],
        None => &s[..],
    };
    s.strip_suffix('.').unwrap_or(s).to_string()
}

impl<R: Read + Seek> IsoImage<R> {
    /// Read the volume descriptors and detect Rock Ridge.
    pub fn open(mut r: R) -> Result<Self, IsoError> {
        let len = r.seek(SeekFrom::End(0))?;
        if len < 17 * SECTOR {
            return Err(IsoError::NotIso(format!(
                "{len} bytes is too small for an ISO 9660 image"
            )));
        }
        let mut pvd: Option<Vec<u8>> = None;
        for i in 0..MAX_DESCRIPTORS {
            let at = (16 + i) * SECTOR;
            if at + SECTOR > len {
                break;
            }
            let mut sec = vec![0u8; SECTOR as usize];
            r.seek(SeekFrom::Start(at))?;
            r.read_exact(&mut sec)?;
            if &sec[1..6] != b"CD001" {
                if i == 0 {
                    return Err(IsoError::NotIso(
                        "no CD001 volume descriptor at sector 16".into(),
                    ));
                }
                return Err(corrupt(format!("volume descriptor {i} lacks CD001")));
            }
            match sec[0] {
                1 if pvd.is_none() => pvd = Some(sec),
                255 => break,
                _ => {}
            }
        }
        let pvd = pvd.ok_or_else(|| IsoError::NotIso("no primary volume descriptor".into()))?;
        let block = u16le(&pvd, 128)?;
        if u64::from(block) != SECTOR {
            return Err(corrupt(format!(
                "logical block size {block} (only 2048 is supported)"
            )));
        }
        let volume_id = String::from_utf8_lossy(&pvd[40..72])
            .trim_end_matches([' ', '\0'])
            .to_string();
        let root_rec = parse_record(&pvd[156..190])?;
        if root_rec.flags & 2 == 0 {
            return Err(corrupt("root directory record is not a directory"));
        }
        let root = DirEntry {
            name: String::new(),
            iso_name: String::new(),
            is_dir: true,
            size: u64::from(root_rec.len),
            extents: vec![(root_rec.lba, root_rec.len)],
        };
        let mut img = IsoImage {
            r,
            len,
            volume_id,
            root,
            rr_skip: None,
        };
        img.rr_skip = img.detect_rock_ridge()?;
        Ok(img)
    }

    /// The primary volume id (e.g. `rhcos-417.94.202410090854-0`).
    pub fn volume_id(&self) -> &str {
        &self.volume_id
    }

    pub fn has_rock_ridge(&self) -> bool {
        self.rr_skip.is_some()
    }

    pub fn root(&self) -> &DirEntry {
        &self.root
    }

    fn check_extent(&self, lba: u32, len: u32) -> Result<u64, IsoError> {
        let start = u64::from(lba) * SECTOR;
        let end = start + u64::from(len);
        if end > self.len {
            return Err(corrupt(format!(
                "extent at sector {lba} ({len} bytes) ends past the image end ({} bytes); truncated?",
                self.len
            )));
        }
        Ok(start)
    }

    fn read_extent(&mut self, lba: u32, len: u32) -> Result<Vec<u8>, IsoError> {
        if u64::from(len) > MAX_DIR_BYTES {
            return Err(corrupt(format!("directory of {len} bytes is too large")));
        }
        let start = self.check_extent(lba, len)?;
        let mut buf = vec![0u8; len as usize];
        self.r.seek(SeekFrom::Start(start))?;
        self.r.read_exact(&mut buf)?;
        Ok(buf)
    }

    /// SUSP `SP` in the System Use area of the root's `.` record.
    fn detect_rock_ridge(&mut self) -> Result<Option<usize>, IsoError> {
        let (lba, len) = self.root.extents[0];
        let first = len.min(SECTOR as u32);
        let buf = self.read_extent(lba, first)?;
        let rlen = *buf.first().ok_or_else(|| corrupt("empty root directory"))? as usize;
        if rlen == 0 || rlen > buf.len() {
            return Err(corrupt("root directory has no valid `.` record"));
        }
        let rec = parse_record(&buf[..rlen])?;
        let su = &rec.su;
        if su.len() >= 7 && &su[0..2] == b"SP" && su[2] >= 7 && su[4] == 0xBE && su[5] == 0xEF {
            return Ok(Some(su[6] as usize));
        }
        Ok(None)
    }

    /// Rock Ridge `NM` name from a System Use area, following `CE`.
    fn rr_name(&mut self, su: &[u8]) -> Result<Option<String>, IsoError> {
        let Some(skip) = self.rr_skip else {
            return Ok(None);
        };
        let mut area = su.get(skip..).unwrap_or(&[]).to_vec();
        let mut name: Vec<u8> = Vec::new();
        let mut found = false;
        for _ in 0..=MAX_CONTINUATIONS {
            let mut next: Option<(u32, u32, u32)> = None;
            let mut p = 0usize;
            while p + 4 <= area.len() {
                let sig = [area[p], area[p + 1]];
                let elen = area[p + 2] as usize;
                if elen < 4 || p + elen > area.len() {
                    break; // padding or garbage: stop this area
                }
                let e = &area[p..p + elen];
                match &sig {
                    b"NM" if elen >= 5 => {
                        let flags = e[4];
                        if flags & 0b110 == 0 {
                            name.extend_from_slice(&e[5..]);
                            found = true;
                        }
                    }
                    b"CE" if elen >= 28 => {
                        next = Some((u32le(e, 4)?, u32le(e, 12)?, u32le(e, 20)?));
                    }
                    b"ST" => break,
                    _ => {}
                }
                p += elen;
            }
            match next {
                Some((lba, off, len)) => {
                    if off >= SECTOR as u32 || len > SECTOR as u32 {
                        return Err(corrupt("Rock Ridge continuation area out of range"));
                    }
                    let sec = self.read_extent(lba, SECTOR as u32)?;
                    let end = (off + len).min(SECTOR as u32) as usize;
                    area = sec[off as usize..end].to_vec();
                }
                None => break,
            }
        }
        Ok(found.then(|| String::from_utf8_lossy(&name).into_owned()))
    }

    /// Entries of a directory (without `.` and `..`).
    pub fn read_dir(&mut self, dir: &DirEntry) -> Result<Vec<DirEntry>, IsoError> {
        if !dir.is_dir {
            return Err(IsoError::NotADirectory(dir.name.clone()));
        }
        let mut out: Vec<DirEntry> = Vec::new();
        // A multi-extent file in progress (flag bit 7 on all but the last record).
        let mut pending: Option<DirEntry> = None;
        for &(lba, len) in &dir.extents {
            let buf = self.read_extent(lba, len)?;
            let mut pos = 0usize;
            while pos < buf.len() {
                let rlen = buf[pos] as usize;
                if rlen == 0 {
                    // Rest of this sector is padding.
                    pos = (pos / SECTOR as usize + 1) * SECTOR as usize;
                    continue;
                }
                let sector_end = (pos / SECTOR as usize + 1) * SECTOR as usize;
                if pos + rlen > buf.len() || pos + rlen > sector_end {
                    return Err(corrupt(format!(
                        "directory record at sector {lba} offset {pos} crosses its sector"
                    )));
                }
                let rec = parse_record(&buf[pos..pos + rlen])?;
                pos += rlen;
                if rec.iso_name == [0] || rec.iso_name == [1] {
                    continue; // `.` and `..`
                }
                if out.len() > 1_000_000 {
                    return Err(corrupt("directory has too many entries"));
                }
                let iso_name = strip_iso_name(&rec.iso_name);
                let name = self.rr_name(&rec.su)?.unwrap_or_else(|| iso_name.clone());
                let is_dir = rec.flags & 2 != 0;
                if let Some(p) = pending.as_mut() {
                    if p.iso_name != iso_name {
                        return Err(corrupt(format!(
                            "multi-extent file {} is not followed by its next extent",
                            p.name
                        )));
                    }
                    p.size += u64::from(rec.len);
                    p.extents.push((rec.lba, rec.len));
                    if p.size > self.len || p.extents.len() > 4096 {
                        return Err(corrupt(format!(
                            "multi-extent file {} is larger than the image",
                            p.name
                        )));
                    }
                } else {
                    pending = Some(DirEntry {
                        name,
                        iso_name,
                        is_dir,
                        size: u64::from(rec.len),
                        extents: vec![(rec.lba, rec.len)],
                    });
                }
                if rec.flags & 0x80 == 0 {
                    out.extend(pending.take());
                }
            }
        }
        if let Some(p) = pending {
            return Err(corrupt(format!(
                "multi-extent file {} is incomplete",
                p.name
            )));
        }
        Ok(out)
    }

    /// Look up `path` (`/`-separated, case-insensitive, RR or ISO names).
    pub fn lookup(&mut self, path: &str) -> Result<DirEntry, IsoError> {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.len() > MAX_DEPTH {
            return Err(IsoError::NotFound(path.to_string()));
        }
        let mut cur = self.root.clone();
        for (i, part) in parts.iter().enumerate() {
            if !cur.is_dir {
                return Err(IsoError::NotADirectory(parts[..i].join("/")));
            }
            let entries = self.read_dir(&cur)?;
            cur = entries
                .into_iter()
                .find(|e| e.matches(part))
                .ok_or_else(|| IsoError::NotFound(path.to_string()))?;
        }
        Ok(cur)
    }

    /// Where a file's bytes lie in the image, as one `(offset, length)`
    /// region, when its extents are contiguous (always for files written as
    /// one extent, i.e. under 4 GiB); checked against the image size. Lets a
    /// server stream the file straight out of the image with ranges.
    pub fn region(&self, file: &DirEntry) -> Result<(u64, u64), IsoError> {
        if file.is_dir {
            return Err(IsoError::IsADirectory(file.name.clone()));
        }
        let mut start = None;
        let mut end = 0u64;
        for &(lba, len) in &file.extents {
            let s = self.check_extent(lba, len)?;
            match start {
                None => start = Some(s),
                Some(_) if s == end => {}
                Some(_) => {
                    return Err(corrupt(format!(
                        "{}: its extents are not contiguous",
                        file.name
                    )));
                }
            }
            end = s + u64::from(len);
        }
        let start = start.unwrap_or(0);
        Ok((start, end.saturating_sub(start)))
    }

    /// Copy a file's contents to `w` through a fixed buffer; returns the size.
    pub fn copy_to(&mut self, file: &DirEntry, w: &mut impl Write) -> Result<u64, IsoError> {
        if file.is_dir {
            return Err(IsoError::IsADirectory(file.name.clone()));
        }
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        for &(lba, len) in &file.extents {
            let start = self.check_extent(lba, len)?;
            self.r.seek(SeekFrom::Start(start))?;
            let mut left = u64::from(len);
            while left > 0 {
                let n = left.min(buf.len() as u64) as usize;
                self.r.read_exact(&mut buf[..n]).map_err(|e| {
                    if e.kind() == io::ErrorKind::UnexpectedEof {
                        corrupt(format!("{}: file data truncated", file.name))
                    } else {
                        IsoError::Io(e)
                    }
                })?;
                w.write_all(&buf[..n])?;
                left -= n as u64;
                total += n as u64;
            }
        }
        Ok(total)
    }

    /// Read a whole file into memory, refusing files larger than `limit`.
    pub fn read_file(&mut self, path: &str, limit: u64) -> Result<Vec<u8>, IsoError> {
        let e = self.lookup(path)?;
        if e.size > limit {
            return Err(corrupt(format!(
                "{path} is {} bytes, more than the {limit} allowed",
                e.size
            )));
        }
        let mut out = Vec::with_capacity(e.size as usize);
        self.copy_to(&e, &mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod testiso {
    //! A tiny ISO 9660 writer for unit tests (optionally with Rock Ridge NM).

    use super::SECTOR;

    pub(crate) enum Node {
        File(&'static str, Vec<u8>),
        Dir(&'static str, Vec<Node>),
    }

    fn iso_name(name: &str, is_dir: bool) -> Vec<u8> {
        let up = name.to_ascii_uppercase().replace('-', "_");
        if is_dir {
            up.into_bytes()
        } else if up.contains('.') {
            format!("{up};1").into_bytes()
        } else {
            format!("{up}.;1").into_bytes()
        }
    }

    fn record(name: &[u8], lba: u32, len: u32, dir: bool, su: &[u8]) -> Vec<u8> {
        let pad = usize::from(name.len().is_multiple_of(2));
        let total = 33 + name.len() + pad + su.len();
        let mut r = vec![0u8; total];
        r[0] = total as u8;
        r[2..6].copy_from_slice(&lba.to_le_bytes());
        r[6..10].copy_from_slice(&lba.to_be_bytes());
        r[10..14].copy_from_slice(&len.to_le_bytes());
        r[14..18].copy_from_slice(&len.to_be_bytes());
        r[25] = if dir { 2 } else { 0 };
        r[28] = 1;
        r[32] = name.len() as u8;
        r[33..33 + name.len()].copy_from_slice(name);
        r[33 + name.len() + pad..].copy_from_slice(su);
        r
    }

    fn nm(name: &str) -> Vec<u8> {
        let mut e = vec![b'N', b'M', (5 + name.len()) as u8, 1, 0];
        e.extend_from_slice(name.as_bytes());
        e
    }

    struct W {
        img: Vec<u8>,
        rr: bool,
    }

    impl W {
        fn alloc(&mut self, data: &[u8]) -> u32 {
            let lba = (self.img.len() as u64 / SECTOR) as u32;
            self.img.extend_from_slice(data);
            let rem = self.img.len() % SECTOR as usize;
            if rem != 0 || data.is_empty() {
                self.img.resize(self.img.len() + (SECTOR as usize - rem), 0);
            }
            lba
        }
        /// Write a directory; returns (lba, len).
        fn dir(&mut self, children: &[Node], is_root: bool) -> (u32, u32) {
            type Rec = (Vec<u8>, u32, u32, bool, Vec<u8>);
            let mut recs: Vec<Rec> = Vec::new();
            for c in children {
                match c {
                    Node::File(n, data) => {
                        let lba = self.alloc(data);
                        let su = if self.rr { nm(n) } else { vec![] };
                        recs.push((iso_name(n, false), lba, data.len() as u32, false, su));
                    }
                    Node::Dir(n, kids) => {
                        let (lba, len) = self.dir(kids, false);
                        let su = if self.rr { nm(n) } else { vec![] };
                        recs.push((iso_name(n, true), lba, len, true, su));
                    }
                }
            }
            // Directory size: one sector is plenty for tests.
            let lba = (self.img.len() as u64 / SECTOR) as u32;
            let mut body = Vec::new();
            let sp: Vec<u8> = if self.rr && is_root {
                vec![b'S', b'P', 7, 1, 0xBE, 0xEF, 0]
            } else {
                vec![]
            };
            body.extend(record(&[0], lba, SECTOR as u32, true, &sp));
            body.extend(record(&[1], lba, SECTOR as u32, true, &[]));
            for (n, l, len, d, su) in recs {
                body.extend(record(&n, l, len, d, &su));
            }
            assert!(body.len() <= SECTOR as usize);
            self.alloc(&body);
            (lba, SECTOR as u32)
        }
    }

    /// Build an image with the given volume id and tree.
    pub(crate) fn build(volid: &str, tree: &[Node], rr: bool) -> Vec<u8> {
        let mut w = W {
            img: vec![0u8; 18 * SECTOR as usize],
            rr,
        };
        let (root_lba, root_len) = w.dir(tree, true);
        let mut pvd = vec![0u8; SECTOR as usize];
        pvd[0] = 1;
        pvd[1..6].copy_from_slice(b"CD001");
        pvd[6] = 1;
        let mut vid = [b' '; 32];
        vid[..volid.len()].copy_from_slice(volid.as_bytes());
        pvd[40..72].copy_from_slice(&vid);
        let blocks = (w.img.len() as u64 / SECTOR) as u32;
        pvd[80..84].copy_from_slice(&blocks.to_le_bytes());
        pvd[128..130].copy_from_slice(&(SECTOR as u16).to_le_bytes());
        pvd[156..190].copy_from_slice(&record(&[0], root_lba, root_len, true, &[]));
        let s = 16 * SECTOR as usize;
        w.img[s..s + SECTOR as usize].copy_from_slice(&pvd);
        let t = 17 * SECTOR as usize;
        w.img[t] = 255;
        w.img[t + 1..t + 6].copy_from_slice(b"CD001");
        w.img[t + 6] = 1;
        w.img
    }
}

#[cfg(test)]
mod tests;
