//! The Ignition embed area of an RHCOS/FCOS live ISO, and the initrd that
//! goes in it: the pure core of the single-node boot ISO (an ISO that
//! carries the bootstrap-in-place Ignition, `http::iso`).
//!
//! Layout (as coreos-installer 0.27 `src/live/embed.rs` reads it): the ISO
//! holds `coreos/igninfo.json` = `{"file", "offset"?, "length"?}`; the area
//! is `length` bytes (default: the rest of the file) at `offset` (default 0)
//! in `file` (usually `images/ignition.img`, also the default when the JSON
//! is absent). The bootloaders load that file as an extra initrd. Embedding
//! = an xz-compressed newc cpio archive holding `config.ign` (mode 0100600)
//! then zeros up to the area's end, as `coreos-installer iso ignition
//! embed` writes it (`src/io/initrd.rs`): xz preset 9 with a CRC32 check,
//! which the kernel's initramfs unpacker requires (it has no CRC64/SHA-256).
//!
//! Why xz2 and cpio: they are the crates coreos-installer itself writes the
//! area with (liblzma underneath, the reference xz implementation), so the
//! stream is what its reader and the kernel expect. xz2 is passively
//! maintained (last release 2022) but only wraps the system liblzma;
//! pure-Rust `lzma-rs` cannot choose the CRC32 check.
//!
//! Invariants: every value read from the image is checked (the area lies
//! inside its file and is at most [`MAX_IGN_AREA`]); an initrd larger than
//! the area is an [`EmbedError::IgnitionTooLarge`], never truncated.
//! Memory: the config, its compressed initrd and one area-sized patch; the
//! encoder's dictionary is capped near the config's size (preset 9 would
//! take 674 MiB for a 64 MiB dictionary; a smaller dictionary than the
//! input compresses identically).

use std::io::{Read, Seek, Write};

use serde::Deserialize;

use super::EmbedError;
use crate::boot::iso9660::{IsoError, IsoImage};

/// Where the Ignition embed area is described.
pub const IGNINFO_JSON: &str = "coreos/igninfo.json";
/// The embed area's file when `igninfo.json` is absent (older ISOs).
pub const DEFAULT_IGN_FILE: &str = "images/ignition.img";
/// The config's path inside the embedded initrd (Ignition reads it there).
pub const CONFIG_IGN: &str = "config.ign";
/// Largest Ignition embed area accepted (RHCOS ships 256 KiB).
pub const MAX_IGN_AREA: u64 = 64 << 20;

#[derive(Debug, Deserialize)]
struct IgnInfo {
    file: String,
    offset: Option<u64>,
    length: Option<u64>,
}

/// Why `igninfo.json`'s area does not fit its file (`len`: the file's
/// size).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AreaError {
    #[error("offset {off} is past the file's {len} bytes")]
    OffsetPastFile { off: u64, len: u64 },
    #[error("{length} bytes at offset {off} run past the file's {len} bytes")]
    RunsPastFile { length: u64, off: u64, len: u64 },
    /// Empty, or over [`MAX_IGN_AREA`].
    #[error("area of {0} bytes (must be 1..={MAX_IGN_AREA})")]
    Size(u64),
}

/// The Ignition embed area: `length` bytes at `offset` in the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IgnArea {
    pub offset: u64,
    pub length: u64,
}

impl IgnArea {
    /// Read `igninfo.json` (or assume `images/ignition.img`) and locate
    /// the area in the image.
    pub fn locate<R: Read + Seek>(img: &mut IsoImage<R>) -> Result<IgnArea, EmbedError> {
        let info = match img.read_file(IGNINFO_JSON, 1 << 16) {
            Ok(j) => serde_json::from_slice::<IgnInfo>(&j)
                .map_err(|e| EmbedError::BadInfo(format!("{IGNINFO_JSON}: {e}")))?,
            Err(IsoError::NotFound(_)) => IgnInfo {
                file: DEFAULT_IGN_FILE.into(),
                offset: None,
                length: None,
            },
            Err(e) => return Err(e.into()),
        };
        let entry = match img.lookup(&info.file) {
            Ok(e) => e,
            Err(IsoError::NotFound(_)) => return Err(EmbedError::NoIgnitionArea(info.file)),
            Err(e) => return Err(e.into()),
        };
        let (at, len) = img.region(&entry)?;
        IgnArea::within(at, len, info.offset, info.length).map_err(|why| {
            EmbedError::BadIgnitionArea {
                file: info.file,
                why,
            }
        })
    }

    /// The area `offset`/`length` of a file at `at` of `len` bytes.
    pub fn within(
        at: u64,
        len: u64,
        offset: Option<u64>,
        length: Option<u64>,
    ) -> Result<IgnArea, AreaError> {
        let off = offset.unwrap_or(0);
        let avail = len
            .checked_sub(off)
            .ok_or(AreaError::OffsetPastFile { off, len })?;
        let length = length.unwrap_or(avail);
        if length > avail {
            return Err(AreaError::RunsPastFile { length, off, len });
        }
        if length == 0 || length > MAX_IGN_AREA {
            return Err(AreaError::Size(length));
        }
        Ok(IgnArea {
            offset: at + off,
            length,
        })
    }

    /// The area's bytes holding `initrd`, zero-padded to its length.
    pub fn patch(&self, initrd: &[u8]) -> Result<(u64, Vec<u8>), EmbedError> {
        let cap = usize::try_from(self.length).unwrap_or(usize::MAX);
        if initrd.len() > cap {
            return Err(EmbedError::IgnitionTooLarge {
                len: initrd.len(),
                area: cap,
            });
        }
        let mut b = vec![0u8; cap];
        b[..initrd.len()].copy_from_slice(initrd);
        Ok((self.offset, b))
    }
}

/// The xz-compressed newc cpio archive holding `config` as `config.ign`.
pub fn ignition_initrd(config: &[u8]) -> Result<Vec<u8>, EmbedError> {
    let io = |e: std::io::Error| EmbedError::BadArea(format!("compressing the Ignition: {e}"));
    // Preset 9 as coreos-installer, the dictionary only as large as needed.
    let mut opts = xz2::stream::LzmaOptions::new_preset(9).map_err(|e| io(e.into()))?;
    let dict = (config.len() as u64 + 4096)
        .next_power_of_two()
        .clamp(4096, 64 << 20);
    opts.dict_size(u32::try_from(dict).unwrap_or(64 << 20));
    let mut filters = xz2::stream::Filters::new();
    filters.lzma2(&opts);
    let stream = xz2::stream::Stream::new_stream_encoder(&filters, xz2::stream::Check::Crc32)
        .map_err(|e| io(e.into()))?;
    let enc = xz2::write::XzEncoder::new_stream(Vec::new(), stream);
    if u32::try_from(config.len()).is_err() {
        return Err(EmbedError::BadArea(
            "the Ignition config is over 4 GiB".into(),
        ));
    }
    let member = (
        cpio::newc::Builder::new(CONFIG_IGN).mode(0o100_600),
        std::io::Cursor::new(config),
    );
    let mut enc = cpio::write_cpio(std::iter::once(member), enc).map_err(io)?;
    enc.flush().map_err(io)?;
    enc.finish().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn area_bounds() {
        assert_eq!(
            IgnArea::within(4096, 262_144, None, None),
            Ok(IgnArea {
                offset: 4096,
                length: 262_144
            })
        );
        assert_eq!(
            IgnArea::within(4096, 1000, Some(100), Some(900)),
            Ok(IgnArea {
                offset: 4196,
                length: 900
            })
        );
        assert_eq!(
            IgnArea::within(0, 1000, Some(100), Some(901)),
            Err(AreaError::RunsPastFile {
                length: 901,
                off: 100,
                len: 1000
            })
        );
        assert_eq!(
            IgnArea::within(0, 1000, Some(1001), None),
            Err(AreaError::OffsetPastFile {
                off: 1001,
                len: 1000
            })
        );
        assert_eq!(IgnArea::within(0, 0, None, None), Err(AreaError::Size(0)));
    }

    /// The texts of a bad Ignition embed area, as the boot ISO's error
    /// shows them (after the area's file).
    #[test]
    fn a_bad_area_says_where_it_lies() {
        let cases = [
            (
                AreaError::OffsetPastFile {
                    off: 1001,
                    len: 1000,
                },
                "offset 1001 is past the file's 1000 bytes",
            ),
            (
                AreaError::RunsPastFile {
                    length: 901,
                    off: 100,
                    len: 1000,
                },
                "901 bytes at offset 100 run past the file's 1000 bytes",
            ),
            (AreaError::Size(0), "area of 0 bytes (must be 1..=67108864)"),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), text);
        }
        let embed = EmbedError::BadIgnitionArea {
            file: "images/ignition.img".into(),
            why: AreaError::Size(0),
        };
        assert_eq!(
            embed.to_string(),
            "Ignition embed area: images/ignition.img: area of 0 bytes (must be 1..=67108864)"
        );
    }

    #[test]
    fn initrd_is_xz_crc32_newc_with_config_ign() {
        let cfg = br#"{"ignition":{"version":"3.2.0"}}"#;
        let x = ignition_initrd(cfg).unwrap();
        // xz stream header: magic, flags 00 01 = CRC32.
        assert_eq!(&x[..6], b"\xfd7zXZ\0");
        assert_eq!(&x[6..8], &[0, 1]);
        let mut cpio = Vec::new();
        xz2::read::XzDecoder::new(&x[..])
            .read_to_end(&mut cpio)
            .unwrap();
        let r = cpio::NewcReader::new(&cpio[..]).unwrap();
        assert_eq!(r.entry().name(), CONFIG_IGN);
        assert_eq!(r.entry().mode(), 0o100_600);
        assert_eq!(r.entry().file_size() as usize, cfg.len());
        let area = IgnArea {
            offset: 10,
            length: x.len() as u64 + 5,
        };
        let (at, b) = area.patch(&x).unwrap();
        assert_eq!(at, 10);
        assert_eq!(&b[..x.len()], &x[..]);
        assert_eq!(&b[x.len()..], &[0; 5]);
        let small = IgnArea {
            offset: 0,
            length: x.len() as u64 - 1,
        };
        assert!(matches!(
            small.patch(&x),
            Err(EmbedError::IgnitionTooLarge { .. })
        ));
    }
}
