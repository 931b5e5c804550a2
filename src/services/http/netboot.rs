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
//! Install state (persisted next to the DHCP lease file as
//! `<cluster>-netboot.json`, shown in `/status` → `http.netboot`) moves only
//! on evidence from the node's own address: its script fetch (a new
//! attempt), its ignition fetch, the complete download of the image it
//! installs (`coreos.inst.image_url` on the appliance) after that, or its
//! installed system's machine-config connection (the LB reports it to the
//! timeline). A script fetch from any other address is an operator's: it
//! shows what the node would get and changes nothing. An ignition fetch
//! without an install end gets [`Script::DiskOrInstall`] (BIOS: `sanboot`
//! the disk, else install), never `exit`. `crc-appliance node reinstall
//! NAME` (admin API) sets a node back. How the state is kept and
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
use crate::boot::bootfiles::Refused;
use crate::boot::iso9660::{IsoError, IsoImage};
use crate::model::boot::{http_base, install_kargs, ipxe_kernel_args};
use crate::model::cluster::{BootSource, Cluster, MacAddr, NodeCfg};
use crate::timeline::Event;

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
    let install = || {
        format!(
            "kernel {base}/boot/vmlinuz {}\ninitrd --name main {base}/boot/initrd.img\nboot\n",
            ipxe_kernel_args(c, node)
        )
    };
    match script {
        Script::LocalBoot => format!(
            "#!ipxe\n# crc-appliance: {} is installed; boot its disk\nexit\n",
            node.name
        ),
        Script::Install => format!(
            "#!ipxe\n# crc-appliance: install {} ({})\n{}",
            node.name,
            node.role,
            install()
        ),
        // BIOS: `sanboot` of the first disk returns only when it does not
        // boot (blank, or wiped by a failed coreos-installer, which writes
        // the first MiB last); then the install follows. UEFI iPXE cannot
        // boot a local disk by number and `exit` would hand a blank disk
        // to the firmware, so it installs again.
        Script::DiskOrInstall => format!(
            "#!ipxe\n# crc-appliance: {} fetched its ignition but its install end was not seen: \
             boot the disk if it boots (BIOS), else install ({})\n\
             iseq ${{platform}} pcbios && sanboot --no-describe --drive 0x80 ||\n{}",
            node.name,
            node.role,
            install()
        ),
    }
}

/// The request path of the image `node` installs (the last
/// `coreos.inst.image_url`, as coreos-installer's service script reads
/// it) when the appliance serves it: its complete download is the evidence
/// that the install finished.
pub fn install_image_path(c: &Cluster, node: &NodeCfg) -> Option<String> {
    let base = http_base(c);
    let kargs = install_kargs(c, node, "", "", "");
    let url = kargs
        .split_ascii_whitespace()
        .filter_map(|a| a.strip_prefix("coreos.inst.image_url="))
        .next_back()?;
    let path = url.strip_prefix(&base)?;
    path.starts_with('/').then(|| path.to_string())
}

/// `52-54-00-ab-cd-ef.ipxe` or with colons → the MAC.
fn mac_of(name: &str) -> Option<MacAddr> {
    name.strip_suffix(".ipxe")?.parse().ok()
}

/// Why an artifact cannot be served (logged at debug; the client gets
/// 404).
#[derive(Debug, thiserror::Error)]
enum ArtifactError {
    /// A name other than `vmlinuz`, `initrd.img`, `rootfs.img`.
    #[error("no such artifact")]
    NoSuchArtifact,
    /// The ISO or the artifact file does not open.
    #[error("{}: {err}", path.display())]
    Open { path: PathBuf, err: std::io::Error },
    /// The file is not an ISO 9660 image.
    #[error("{}: {err}", path.display())]
    NotIso { path: PathBuf, err: IsoError },
    /// The artifact is not in the image, or its extent is not usable.
    #[error("{0}")]
    InIso(IsoError),
    /// The artifact file's size cannot be read.
    #[error("{0}")]
    Metadata(std::io::Error),
}

/// Why an iPXE binary of the TFTP root cannot be served (logged at debug;
/// the client gets 404).
#[derive(Debug, thiserror::Error)]
enum IpxeBinaryError {
    /// The TFTP root cannot be resolved.
    #[error("{0}")]
    Root(std::io::Error),
    /// The path rules of TFTP refuse the name.
    #[error("{0:?}")]
    Refused(Refused),
}

/// An artifact: the file holding it and its region.
fn open_artifact(src: &BootSource, name: &str) -> Result<(File, u64, u64, String), ArtifactError> {
    let open = |path: &PathBuf| {
        File::open(path).map_err(|err| ArtifactError::Open {
            path: path.clone(),
            err,
        })
    };
    match src {
        BootSource::Iso(iso) => {
            let (_, inner) = ISO_PATHS
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or(ArtifactError::NoSuchArtifact)?;
            let f = open(iso)?;
            let mut img = IsoImage::open(&f).map_err(|err| ArtifactError::NotIso {
                path: iso.clone(),
                err,
            })?;
            let entry = img.lookup(inner).map_err(ArtifactError::InIso)?;
            let (off, len) = img.region(&entry).map_err(ArtifactError::InIso)?;
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
                _ => return Err(ArtifactError::NoSuchArtifact),
            };
            let f = open(p)?;
            let len = f.metadata().map_err(ArtifactError::Metadata)?.len();
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
                node_script(c, node, self.node_script_for(peer, c, node))
            };
            let mut r = plain(StatusCode::OK, "");
            *r.body_mut() = super::full(text);
            return r;
        }
        if let Some(file) = rest.strip_prefix("ipxe/") {
            return self.serve_ipxe_binary(req, c, file).await;
        }
        if let Some(name) = super::iso::iso_name(rest) {
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

    /// The script `node` gets for a fetch from `peer`. Only a fetch from
    /// the node's own address is a network boot and moves its install
    /// state; anyone else (loopback, the appliance host, another node) is
    /// an operator looking, shown what the node would get now.
    fn node_script_for(&self, peer: std::net::SocketAddr, c: &Cluster, node: &NodeCfg) -> Script {
        // By address, as the ignition route does: in a test cluster node
        // addresses may be loopback aliases.
        let own = super::ignition::node_by_ip(c, peer.ip()).is_some_and(|n| n.name == node.name);
        if !own {
            let script = self.boot.peek(&node.name);
            info!(%peer, node = %node.name, ?script, "netboot: operator fetch of the script (not the node's address): install state unchanged");
            return script;
        }
        self.sync_first_boot(&node.name);
        // In memory only (the writer persists it): never blocks.
        let script = self.boot.script_for(&node.name);
        if script != Script::LocalBoot {
            self.events.record(Event::NetbootScript {
                node: node.name.clone(),
            });
        }
        info!(%peer, node = %node.name, ?script, "netboot: script served");
        script
    }

    /// Take the installed system's machine-config contact (the LB tells
    /// the timeline) as evidence for `node`'s install state.
    pub(crate) fn sync_first_boot(&self, node: &str) {
        if let Some(at) = self.events.last_machine_config(node)
            && self.boot.system_booted(node, at)
        {
            self.events.record(Event::InstallFinished {
                node: node.to_string(),
            });
        }
    }

    /// When `path` is the install image of the node at `peer`'s address,
    /// report its complete download as that node's install evidence.
    pub(crate) fn track_install_image(
        &self,
        r: Resp,
        path: &str,
        peer: std::net::SocketAddr,
    ) -> Resp {
        let plan = self.plan.load();
        let c = &plan.cluster;
        if c.rhcos.is_none() {
            return r;
        }
        let Some(node) = super::ignition::node_by_ip(c, peer.ip()) else {
            return r;
        };
        if install_image_path(c, node).as_deref() != Some(path) {
            return r;
        }
        let (boot, events, name) = (self.boot.clone(), self.events.clone(), node.name.clone());
        super::track::on_complete(
            r,
            Box::new(move |_, _| {
                if boot.image_downloaded(&name) {
                    events.record(Event::InstallFinished { node: name });
                }
            }),
        )
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
            let root = t.root.canonicalize().map_err(IpxeBinaryError::Root)?;
            let allowed: Vec<PathBuf> = t
                .allow_symlinks_to
                .iter()
                .filter_map(|p| p.canonicalize().ok())
                .collect();
            crate::boot::bootfiles::open(&root, &allowed, &rel).map_err(IpxeBinaryError::Refused)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boot::bootfiles::ErrorCode;

    /// The reasons the debug log gives for a 404 on `/boot/<artifact>`
    /// and `/boot/ipxe/<file>`.
    #[test]
    fn each_refused_artifact_says_why() {
        let io = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let cases: [(ArtifactError, &str); 5] = [
            (ArtifactError::NoSuchArtifact, "no such artifact"),
            (
                ArtifactError::Open {
                    path: "/srv/rhcos.iso".into(),
                    err: io(),
                },
                "/srv/rhcos.iso: entity not found",
            ),
            (
                ArtifactError::NotIso {
                    path: "/srv/rhcos.iso".into(),
                    err: IsoError::NotIso("no primary volume descriptor".into()),
                },
                "/srv/rhcos.iso: not an ISO 9660 image: no primary volume descriptor",
            ),
            (
                ArtifactError::InIso(IsoError::NotFound("images/pxeboot/vmlinuz".into())),
                "images/pxeboot/vmlinuz: no such file or directory in the ISO",
            ),
            (ArtifactError::Metadata(io()), "entity not found"),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), text);
        }
        let missing = BootSource::Files {
            kernel: "/nonexistent/vmlinuz".into(),
            initramfs: "/nonexistent/initrd".into(),
            rootfs: "/nonexistent/rootfs".into(),
        };
        assert!(matches!(
            open_artifact(&missing, "grub.cfg"),
            Err(ArtifactError::NoSuchArtifact)
        ));
        assert!(matches!(
            open_artifact(&missing, "vmlinuz"),
            Err(ArtifactError::Open { .. })
        ));
        assert_eq!(IpxeBinaryError::Root(io()).to_string(), "entity not found");
        let refused = Refused {
            code: ErrorCode::AccessViolation,
            message: "dot segment in file name",
        };
        assert_eq!(
            IpxeBinaryError::Refused(refused).to_string(),
            "Refused { code: AccessViolation, message: \"dot segment in file name\" }"
        );
    }
}
