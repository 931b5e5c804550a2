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

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use tracing::{debug, error, info, warn};

use super::range::Validators;
use super::{Ctx, Region, Resp, plain};
use crate::boot::iso9660::IsoImage;
use crate::boot::liveiso::{KargAreas, Patches};
use crate::model::access::{self, Decision, Owner};
use crate::model::boot::{IsoTarget, iso_install_kargs};
use crate::model::cluster::{BootSource, Role};

/// The ISO file opened, with its overlay and validators.
struct Prepared {
    file: File,
    len: u64,
    patches: Patches,
    etag: String,
}

/// Open `iso`, locate its embed areas and patch `extra` in.
fn prepare(iso: &std::path::Path, extra: &str) -> Result<Prepared, String> {
    let file = File::open(iso).map_err(|e| format!("{}: {e}", iso.display()))?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    let mut img = IsoImage::open(&file).map_err(|e| format!("{}: {e}", iso.display()))?;
    let areas = KargAreas::locate(&mut img).map_err(|e| format!("{}: {e}", iso.display()))?;
    let patches = areas
        .patches(&areas.with_extra(extra))
        .map_err(|e| format!("{}: {e}", iso.display()))?;
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
        let (iso, extra) = (iso.clone(), iso_install_kargs(c, target));
        let prepared = tokio::task::spawn_blocking(move || prepare(&iso, &extra)).await;
        let p = match prepared {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                error!(%peer, "boot iso {name}.iso: {e}");
                return plain(StatusCode::INTERNAL_SERVER_ERROR, &e);
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
