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
//! reinstall NAME` (admin API) sets it back.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use super::range::{self, Validators};
use super::{Ctx, Resp, plain};
use crate::boot::iso9660::IsoImage;
use crate::config::{BootSource, Cluster, MacAddr, NodeCfg};
use crate::model::boot::{http_base, install_kargs};
use crate::runtime::status::NetbootRow;
use crate::runtime::sync::LockExt as _;

/// Paths of the artifacts inside the live ISO.
const ISO_PATHS: [(&str, &str); 3] = [
    ("vmlinuz", "images/pxeboot/vmlinuz"),
    ("initrd.img", "images/pxeboot/initrd.img"),
    ("rootfs.img", "images/pxeboot/rootfs.img"),
];

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// One node's install progress, as persisted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeBoot {
    /// Unix time the install script was last served.
    pub install_script_at: Option<u64>,
    /// Unix time the node last fetched its ignition from its own address.
    pub ignition_at: Option<u64>,
    /// Unix time the node was found installed; then it boots its disk.
    pub installed_at: Option<u64>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StateFile {
    version: u32,
    nodes: BTreeMap<String, NodeBoot>,
}

/// What a node's script says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    Install,
    LocalBoot,
}

/// The per-node install state and its file.
pub struct BootState {
    path: PathBuf,
    nodes: Mutex<BTreeMap<String, NodeBoot>>,
}

impl BootState {
    /// The state file of `c` (next to its lease file).
    pub fn path_of(c: &Cluster) -> PathBuf {
        let dir = c
            .dhcp
            .lease_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        dir.join(format!("{}-netboot.json", c.name))
    }

    /// Load `path`; a missing file is an empty state, a corrupt one is
    /// logged and started afresh (nodes then install again, never wrongly
    /// boot an empty disk).
    pub fn load(path: PathBuf) -> BootState {
        let nodes = match std::fs::read(&path) {
            Ok(b) => match serde_json::from_slice::<StateFile>(&b) {
                Ok(f) => f.nodes,
                Err(e) => {
                    warn!(
                        "netboot state {} is unreadable ({e}); starting empty",
                        path.display()
                    );
                    BTreeMap::new()
                }
            },
            Err(_) => BTreeMap::new(),
        };
        BootState {
            path,
            nodes: Mutex::new(nodes),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, NodeBoot>> {
        self.nodes.locked()
    }

    /// Write the state (temp file, fsync, rename); failures are logged.
    fn save(&self, nodes: &BTreeMap<String, NodeBoot>) {
        let file = StateFile {
            version: 1,
            nodes: nodes.clone(),
        };
        let tmp = self.path.with_extension("json.tmp");
        let res = serde_json::to_vec_pretty(&file)
            .map_err(std::io::Error::other)
            .and_then(|b| {
                use std::io::Write as _;
                let mut f = File::create(&tmp)?;
                f.write_all(&b)?;
                f.sync_all()?;
                std::fs::rename(&tmp, &self.path)
            });
        if let Err(e) = res {
            warn!(
                "cannot write the netboot state {}: {e}",
                self.path.display()
            );
        }
    }

    /// Decide `node`'s script now, and record it.
    pub fn script_for(&self, node: &str) -> Script {
        let mut nodes = self.lock();
        let e = nodes.entry(node.to_string()).or_default();
        let fetched_after_script = matches!(
            (e.install_script_at, e.ignition_at),
            (Some(s), Some(i)) if i >= s
        );
        let script = if e.installed_at.is_some() {
            Script::LocalBoot
        } else if fetched_after_script {
            e.installed_at = Some(now());
            info!(
                "netboot: {node} fetched its ignition and booted again: installed; it boots its disk from now on"
            );
            Script::LocalBoot
        } else {
            e.install_script_at = Some(now());
            Script::Install
        };
        self.save(&nodes);
        script
    }

    /// `node` fetched its ignition from its own address.
    pub fn ignition_fetched(&self, node: &str) {
        let mut nodes = self.lock();
        let e = nodes.entry(node.to_string()).or_default();
        e.ignition_at = Some(now());
        self.save(&nodes);
    }

    /// Forget that `node` installed: its next network boot installs again.
    pub fn reinstall(&self, node: &str) {
        let mut nodes = self.lock();
        nodes.remove(node);
        self.save(&nodes);
        info!("netboot: {node} will install again at its next network boot");
    }

    /// Rows for `/status`.
    pub fn rows(&self, c: &Cluster) -> Vec<NetbootRow> {
        let nodes = self.lock();
        c.nodes
            .iter()
            .map(|n| {
                let b = nodes.get(&n.name).cloned().unwrap_or_default();
                NetbootRow {
                    node: n.name.clone(),
                    state: if b.installed_at.is_some() {
                        "installed"
                    } else if b.install_script_at.is_some() {
                        "installing"
                    } else {
                        "pending"
                    }
                    .to_string(),
                    install_script_at: b.install_script_at,
                    ignition_at: b.ignition_at,
                    installed_at: b.installed_at,
                }
            })
            .collect()
    }
}

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
                let boot = self.boot.clone();
                let name = node.name.clone();
                let script = match tokio::task::spawn_blocking(move || boot.script_for(&name)).await
                {
                    Ok(s) => s,
                    Err(_) => return plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
                };
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
