//! `/boot/<name>.iso`: the configured RHCOS live ISO (`rhcos.iso`) with a
//! node's — or a role's — install kernel arguments in its kernel-argument
//! embed areas, for a BMC's virtual media or a USB stick.
//!
//! Invariants:
//! - The answer is the ISO's bytes unchanged except inside the embed areas
//!   `coreos/kargs.json` lists ([`crate::boot::liveiso`]); those hold the ISO's
//!   own kargs followed by [`iso_install_kargs`] (the node's ignition URL,
//!   install disk, `rhcos.kargs`, role and node kargs), as
//!   `coreos-installer iso kargs modify --append` would write them.
//! - Nothing is copied: the file is streamed with `pread` in chunks and the
//!   patched bytes come from a small overlay (a few KiB per request), so
//!   memory is constant whatever the ISO's size. Range, HEAD and the
//!   conditionals work as for images (`Ctx::serve_region` of a patched
//!   `Region`).
//! - The `ETag` covers the file (inode, size, mtime) and the overlay, so it
//!   changes when the ISO or the node's kargs change; no `Last-Modified`
//!   (a kargs change does not move the file's date).
//! - Served only to the node it is for (a role's: that role's nodes, any
//!   node for master and worker), the node's own BMC, the appliance host,
//!   `http.bootIsoCidrs` and `http.ignitionClientCidrs`
//!   ([`crate::model::access::boot_iso`]); 403 otherwise, the first refusal
//!   per address logged. An ISO without embed areas, or kargs longer than
//!   its area, → 500 and an error log.

use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use tracing::{debug, error, info, warn};

use super::range::Validators;
use super::{Ctx, Region, Resp, plain};
use crate::boot::iso9660::{IsoError, IsoImage};
use crate::boot::liveiso::embed::{IgnArea, ignition_initrd};
use crate::boot::liveiso::{EmbedError, KargAreas, Patches};
use crate::model::access::{self, Decision, Owner};
use crate::model::boot::{IsoTarget, iso_install_kargs, single_node_kargs};
use crate::model::cluster::{BootSource, Role};
use crate::model::mode::BIP_IGNITION;
use crate::runtime::sync::LockExt as _;
use std::sync::Arc;

/// The ISO file opened, with its overlay and validators.
struct Prepared {
    file: File,
    len: u64,
    patches: Patches,
    etag: String,
}

/// Largest bootstrap-in-place Ignition read (real ones are about 1 MiB).
const MAX_BIP: u64 = 64 << 20;

/// Why a boot ISO cannot be served (a 500 with this text, and an error
/// log): each names the file at fault.
#[derive(Debug, thiserror::Error)]
enum BootIsoError {
    /// Reading `rhcos.iso` or the bootstrap-in-place Ignition failed.
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    /// The ISO's metadata could not be read (it was open).
    #[error("{0}")]
    Metadata(std::io::Error),
    /// The bootstrap-in-place Ignition is larger than [`MAX_BIP`].
    #[error("{} is larger than {MAX_BIP} bytes", path.display())]
    IgnitionTooLarge { path: PathBuf },
    /// The Ignition initrd could not be made.
    #[error("{0}")]
    Initrd(EmbedError),
    /// `rhcos.iso` is not an ISO 9660 image.
    #[error("{}: {err}", path.display())]
    NotIso { path: PathBuf, err: IsoError },
    /// `rhcos.iso` lacks an embed area, or the kargs or Ignition do not fit.
    #[error("{}: {err}", path.display())]
    Embed { path: PathBuf, err: EmbedError },
}

impl BootIsoError {
    /// An I/O error at `path`.
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BootIsoError {
        let path = path.to_path_buf();
        move |err| BootIsoError::Io { path, err }
    }

    /// An embed-area error of the ISO at `path`.
    fn embed(path: &Path) -> impl Fn(EmbedError) -> BootIsoError {
        let path = path.to_path_buf();
        move |err| BootIsoError::Embed {
            path: path.clone(),
            err,
        }
    }
}

/// The last compressed Ignition initrd and the file state it was made
/// from (inode, size, mtime): a BMC reads the ISO in many ranges, and each
/// would otherwise compress the config again.
#[derive(Default)]
pub(crate) struct InitrdCache(std::sync::Mutex<Option<(InitrdKey, Arc<Vec<u8>>)>>);

type InitrdKey = (std::path::PathBuf, u64, u64, i64, i64);

impl InitrdCache {
    /// The initrd of the config at `path` (read and compressed on a miss).
    fn get(&self, path: &Path) -> Result<Arc<Vec<u8>>, BootIsoError> {
        let f = File::open(path).map_err(BootIsoError::io(path))?;
        let m = f.metadata().map_err(BootIsoError::io(path))?;
        if m.len() > MAX_BIP {
            return Err(BootIsoError::IgnitionTooLarge {
                path: path.to_path_buf(),
            });
        }
        let key = (
            path.to_path_buf(),
            m.ino(),
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
        );
        if let Some((k, v)) = self.0.locked().as_ref()
            && *k == key
        {
            return Ok(v.clone());
        }
        let mut config = Vec::with_capacity(m.len() as usize);
        std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_BIP), &mut config)
            .map_err(BootIsoError::io(path))?;
        let initrd = Arc::new(ignition_initrd(&config).map_err(BootIsoError::Initrd)?);
        *self.0.locked() = Some((key, initrd.clone()));
        Ok(initrd)
    }
}

/// Open `iso`, locate its embed areas and patch `extra` in, and the
/// compressed Ignition `ign` into its Ignition embed area.
fn prepare(iso: &Path, extra: &str, ign: Option<Arc<Vec<u8>>>) -> Result<Prepared, BootIsoError> {
    let file = File::open(iso).map_err(BootIsoError::io(iso))?;
    let meta = file.metadata().map_err(BootIsoError::Metadata)?;
    let mut img = IsoImage::open(&file).map_err(|err| BootIsoError::NotIso {
        path: iso.to_path_buf(),
        err,
    })?;
    let at = BootIsoError::embed(iso);
    let areas = KargAreas::locate(&mut img).map_err(&at)?;
    let mut patches = areas.patches(&areas.with_extra(extra)).map_err(&at)?;
    if let Some(initrd) = ign {
        let area = IgnArea::locate(&mut img).map_err(&at)?;
        patches = patches
            .with(vec![area.patch(&initrd).map_err(&at)?])
            .map_err(&at)?;
    }
    let nanos = meta
        .modified()
        .ok()
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let etag = format!(
        "\"{:x}-{:x}-{nanos:x}-{:016x}\"",
        meta.ino(),
        meta.len(),
        patches.fingerprint()
    );
    Ok(Prepared {
        file,
        len: meta.len(),
        patches,
        etag,
    })
}

/// The `<name>` of a `/boot/` path's rest `<name>.iso` (one component).
pub(crate) fn iso_name(rest: &str) -> Option<&str> {
    rest.strip_suffix(".iso").filter(|n| !n.contains('/'))
}

impl Ctx {
    /// `/boot/<name>.iso` (`name` without the suffix).
    pub(crate) async fn serve_boot_iso(
        &self,
        req: &Request<Incoming>,
        peer: SocketAddr,
        name: &str,
    ) -> Resp {
        let plan = self.plan.load_full();
        let c = &plan.cluster;
        let target = IsoTarget::find(c, name);
        // An unknown name is judged as a role's ISO: 403 or 404 tell a
        // stranger nothing about which names exist.
        let owner = match target {
            Some(IsoTarget::Node(n)) => Owner::Node(n),
            Some(IsoTarget::Role(r)) => Owner::Role(r),
            None => Owner::Role(Role::Worker),
        };
        let client = peer.ip();
        if access::boot_iso(c, client, owner) == Decision::Deny {
            let who = access::describe(c, client);
            match self.refusals.check(client) {
                Some(n) => warn!(
                    "boot iso {name}.iso refused to {client} ({who}): served only to {}, its BMC, the appliance host, http.bootIsoCidrs and http.ignitionClientCidrs{}",
                    owner.audience(),
                    crate::runtime::once::not_logged(n)
                ),
                None => debug!("boot iso {name}.iso refused to {client} ({who})"),
            }
            return plain(StatusCode::FORBIDDEN, "forbidden");
        }
        let Some(target) = target else {
            debug!(%peer, "boot iso: {name:?} is neither a node nor a role");
            return plain(StatusCode::NOT_FOUND, "not a node or role");
        };
        let Some(BootSource::Iso(iso)) = c.rhcos.as_ref().map(|r| &r.source) else {
            return plain(StatusCode::NOT_FOUND, "boot ISOs need rhcos.iso");
        };
        let single = match target {
            IsoTarget::Node(n) if c.is_single_node_master(n) => Some(n),
            IsoTarget::Role(Role::Master) if c.mode.is_single_node() => {
                return plain(
                    StatusCode::NOT_FOUND,
                    "single-node: the master's ISO is /boot/<node>.iso",
                );
            }
            _ => None,
        };
        let extra = match single {
            Some(n) => single_node_kargs(c, n, None),
            None => iso_install_kargs(c, target),
        };
        let bip = single.map(|_| c.http.ignition_dir.join(BIP_IGNITION));
        let iso = iso.clone();
        let cache = self.sno_initrd.clone();
        let prepared = tokio::task::spawn_blocking(move || {
            let ign = bip.map(|p| cache.get(&p)).transpose()?;
            prepare(&iso, &extra, ign)
        })
        .await;
        let p = match prepared {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                error!(%peer, "boot iso {name}.iso: {e}");
                return plain(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
            }
            Err(_) => return plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
        };
        // A BMC reads the CD by ranges: one info line per whole fetch or
        // HEAD, the ranges at debug.
        if req.headers().contains_key(hyper::header::RANGE) {
            debug!(%peer, "boot iso {name}.iso: range of {} bytes, etag {}", p.len, p.etag);
        } else {
            info!(%peer, "boot iso {name}.iso served ({} {} bytes)", req.method(), p.len);
        }
        let v = Validators {
            etag: p.etag,
            modified: None,
        };
        if let IsoTarget::Node(node) = target {
            self.events.record(crate::timeline::Event::BootIso {
                node: node.name.clone(),
            });
        }
        let region = Region::new(p.file, 0, p.len).patched(p.patches);
        self.serve_region(req, region, &v, "application/x-iso9660-image")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts of the 500 answer and the error log: each names the file.
    #[test]
    fn each_error_names_the_file_at_fault() {
        let iso = Path::new("/srv/rhcos.iso");
        let bip = Path::new("/srv/ign/bootstrap-in-place-for-live-iso.ign");
        let gone = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let cases = [
            (
                BootIsoError::io(iso)(gone()),
                "/srv/rhcos.iso: entity not found",
            ),
            (BootIsoError::Metadata(gone()), "entity not found"),
            (
                BootIsoError::IgnitionTooLarge {
                    path: bip.to_path_buf(),
                },
                "/srv/ign/bootstrap-in-place-for-live-iso.ign is larger than 67108864 bytes",
            ),
            (
                BootIsoError::Initrd(EmbedError::BadArea("x".into())),
                "kernel-argument embed area: x",
            ),
            (
                BootIsoError::NotIso {
                    path: iso.to_path_buf(),
                    err: IsoError::NotIso("no CD001".into()),
                },
                "/srv/rhcos.iso: not an ISO 9660 image: no CD001",
            ),
            (
                BootIsoError::embed(iso)(EmbedError::TooLong {
                    len: 200,
                    size: 120,
                }),
                "/srv/rhcos.iso: kernel arguments are 200 bytes; the ISO's embed area holds at most 119 (kargs.json size 120 minus the line end)",
            ),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), text);
        }
    }

    #[test]
    fn a_missing_iso_is_refused_with_its_path() {
        let d = tempfile::tempdir().unwrap();
        let iso = d.path().join("rhcos.iso");
        let err = prepare(&iso, "", None).err().unwrap();
        assert!(matches!(err, BootIsoError::Io { ref path, .. } if *path == iso));
        std::fs::write(&iso, b"not an iso").unwrap();
        let err = prepare(&iso, "", None).err().unwrap();
        assert!(
            err.to_string().starts_with(&format!("{}: ", iso.display())),
            "{err}"
        );
    }
}
