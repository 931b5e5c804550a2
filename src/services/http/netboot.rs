//! Network boot over HTTP: the RHCOS artifacts and a per-node iPXE script.
//!
//! Routes (under `/boot/`):
//! - `vmlinuz`, `initrd.img`, `rootfs.img`: read straight out of `rhcos.iso`
//!   (`images/pxeboot/…`, streamed from the image's region with Range, HEAD
//!   and ETag; no copy on disk) or from the `rhcos` PXE artifact files.
//! - `boot.ipxe`: the entry script; it chains `/boot/${mac:hexhyp}.ipxe`.
//! - `ipxe/<file>`: an iPXE binary from the `pxe:` TFTP root, for UEFI HTTP
//!   Boot firmware (the DHCP answer to `HTTPClient` points here).
//! - `<node>.iso`, `<role>.iso`: the live ISO with the node's (role's)
//!   install kargs in its embed areas (`super::iso`).
//! - `<mac>.ipxe` (`52-54-00-…` or with colons): the node's script — kernel,
//!   initrd and the install kernel arguments of [`install_kargs`] while it
//!   has to install; `exit` (back to the firmware, which boots the disk)
//!   once it has installed. Scripts are for the cluster network and
//!   loopback only, like ignition.
//!
//! Install state (matchbox-like, persisted next to the DHCP lease file as
//! `<cluster>-netboot.json`, shown in `/status` → `http.netboot`): a node
//! is *installed* when it asks for its script again after it fetched its
//! ignition (from its own address) following an install script — the
//! installer fetched it, wrote the disk and rebooted. `crc-appliance node
//! reinstall NAME` (admin API) sets it back. How the state is kept and
//! why every failure there ends in `exit`: [`super::bootstate`].

use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use tracing::{debug, info};

pub use super::bootstate::{BootState, NodeBoot, Script};
use super::range::{self, Validators};
use super::{Ctx, Resp, plain};
use crate::boot::iso9660::IsoImage;
use crate::config::{BootSource, Cluster, MacAddr, NodeCfg};
use crate::model::boot::{http_base, install_kargs};

/// Paths of the artifacts inside the live ISO.
const ISO_PATHS: [(&str, &str); 3] = [
    ("vmlinuz", "images/pxeboot/vmlinuz"),
    ("initrd.img", "images/pxeboot/initrd.img"),
    ("rootfs.img", "images/pxeboot/rootfs.img"),
];

/// The entry script every machine can be pointed at (DHCP option 67 for
/// iPXE clients): chains to the machine's own script by MAC.
pub fn entry_script(base: &str) -> String {
    format!(
        "#!ipxe\n# crc-appliance: chain to this machine's script\nchain {base}/boot/${{mac:hexhyp}}.ipxe\n"
    )
}

/// The script of `node`.
pub fn node_script(c: &Cluster, node: &NodeCfg, script: Script) -> String {
    let base = http_base(c);
    match script {
        Script::LocalBoot => format!(
            "#!ipxe\n# crc-appliance: {} is installed; boot its disk\nexit\n",
            node.name
        ),
        Script::Install => {
            let dev = c
                .rhcos
                .as_ref()
                .map(|r| r.install_dev.as_str())
                .unwrap_or(crate::model::boot::DEFAULT_INSTALL_DEV);
            let kargs = install_kargs(
                c,
                node,
                dev,
                &format!("{base}/boot/rootfs.img"),
                &format!("{base}/ignition/{}.ign", node.name),
            );
            format!(
                "#!ipxe\n# crc-appliance: install {} ({})\nkernel {base}/boot/vmlinuz initrd=main {kargs}\ninitrd --name main {base}/boot/initrd.img\nboot\n",
                node.name, node.role
            )
        }
    }
}

/// `52-54-00-ab-cd-ef.ipxe` or with colons → the MAC.
fn mac_of(name: &str) -> Option<MacAddr> {
    name.strip_suffix(".ipxe")?.parse().ok()
}

/// An artifact: the file holding it and its region.
fn open_artifact(src: &BootSource, name: &str) -> Result<(File, u64, u64, String), String> {
    match src {
        BootSource::Iso(iso) => {
            let (_, inner) = ISO_PATHS
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or("no such artifact")?;
            let f = File::open(iso).map_err(|e| format!("{}: {e}", iso.display()))?;
            let mut img = IsoImage::open(&f).map_err(|e| format!("{}: {e}", iso.display()))?;
            let entry = img.lookup(inner).map_err(|e| e.to_string())?;
            let (off, len) = img.region(&entry).map_err(|e| e.to_string())?;
            Ok((f, off, len, format!("{}#{inner}", iso.display())))
        }
        BootSource::Files {
            kernel,
            initramfs,
            rootfs,
        } => {
            let p = match name {
                "vmlinuz" => kernel,
                "initrd.img" => initramfs,
                "rootfs.img" => rootfs,
                _ => return Err("no such artifact".into()),
            };
            let f = File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let len = f.metadata().map_err(|e| e.to_string())?.len();
            Ok((f, 0, len, p.display().to_string()))
        }
    }
}

impl Ctx {
    /// `/boot/<rest>`.
    pub(crate) async fn serve_boot(
        &self,
        req: &Request<Incoming>,
        peer: std::net::SocketAddr,
        rest: &str,
    ) -> Resp {
        let plan = self.plan.load_full();
        let c = &plan.cluster;
        let Some(rhcos) = &c.rhcos else {
            return plain(StatusCode::NOT_FOUND, "network boot needs an rhcos section");
        };
        if rest.ends_with(".ipxe") {
            if !c.network.cidr.contains_or_loopback(peer.ip()) {
                debug!(%peer, "netboot: script refused outside the cluster network");
                return plain(StatusCode::FORBIDDEN, "forbidden");
            }
            let text = if rest == "boot.ipxe" {
                entry_script(&http_base(c))
            } else {
                let Some(node) = mac_of(rest).and_then(|m| c.nodes.iter().find(|n| n.mac == m))
                else {
                    debug!(%peer, "netboot: no node has {rest}");
                    return plain(StatusCode::NOT_FOUND, "no node has this MAC");
                };
                // In memory only (the writer persists it): never blocks.
                let script = self.boot.script_for(&node.name);
                info!(%peer, node = %node.name, ?script, "netboot: script served");
                node_script(c, node, script)
            };
            let mut r = plain(StatusCode::OK, "");
            *r.body_mut() = super::full(text);
            return r;
        }
        if let Some(file) = rest.strip_prefix("ipxe/") {
            return self.serve_ipxe_binary(req, c, file).await;
        }
        if let Some(name) = rest.strip_suffix(".iso")
            && !name.contains('/')
        {
            return self.serve_boot_iso(req, peer, name).await;
        }
        let src = rhcos.source.clone();
        let name = rest.to_string();
        let opened = tokio::task::spawn_blocking(move || open_artifact(&src, &name)).await;
        let (file, off, len, label) = match opened {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                debug!("netboot: {rest}: {e}");
                return plain(StatusCode::NOT_FOUND, "not found");
            }
            Err(_) => return plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
        };
        let meta = match file.metadata() {
            Ok(m) => m,
            Err(_) => return plain(StatusCode::NOT_FOUND, "not found"),
        };
        let modified = meta.modified().ok();
        // The region's offset is part of the tag: another ISO at the same
        // inode and size would still differ.
        let v = Validators {
            etag: range::file_etag(meta.ino() ^ off.rotate_left(17), len, modified),
            modified,
        };
        debug!("netboot: {rest} from {label} ({len} bytes at {off})");
        let region = super::Region::new(file, off, len);
        self.serve_region(req, region, &v, "application/octet-stream")
    }

    /// `/boot/ipxe/<file>`: an iPXE binary from the TFTP root, for UEFI
    /// HTTP Boot firmware (same path rules as TFTP).
    async fn serve_ipxe_binary(&self, req: &Request<Incoming>, c: &Cluster, file: &str) -> Resp {
        let Some(t) = c.tftp.as_ref().filter(|t| t.enabled) else {
            return plain(StatusCode::NOT_FOUND, "no pxe section");
        };
        let Ok(rel) = super::path::sanitize(file) else {
            return plain(StatusCode::BAD_REQUEST, "bad path");
        };
        let t = t.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let root = t.root.canonicalize().map_err(|e| e.to_string())?;
            let allowed: Vec<PathBuf> = t
                .allow_symlinks_to
                .iter()
                .filter_map(|p| p.canonicalize().ok())
                .collect();
            crate::boot::bootfiles::open(&root, &allowed, &rel).map_err(|r| format!("{r:?}"))
        })
        .await;
        let o = match opened {
            Ok(Ok(o)) => o,
            Ok(Err(why)) => {
                debug!("netboot: ipxe/{file}: {why}");
                return plain(StatusCode::NOT_FOUND, "not found");
            }
            Err(_) => return plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
        };
        let Ok(meta) = o.file.metadata() else {
            return plain(StatusCode::NOT_FOUND, "not found");
        };
        let modified = meta.modified().ok();
        let v = Validators {
            etag: range::file_etag(meta.ino(), o.size, modified),
            modified,
        };
        let region = super::Region::new(o.file, 0, o.size);
        self.serve_region(req, region, &v, "application/efi")
    }
}
