//! The virt-backed driver (feature `libvirt`). Every call blocks in libvirt's
//! C library: async callers go through `tokio::task::spawn_blocking`.
//!
//! Ownership: `vm up` marks what it defines (network, domains) with our
//! `<metadata>` element and names everything `<cluster>-...`; the storage
//! pool and the pool directory are recorded in `<pool>/.crc-appliance-<cluster>.json`
//! when `vm up` created them. `vm down` removes exactly those things.
//!
//! Install flow per node (libvirt-boot.md §1.2): `create_domain_xml(install)`
//! (transient, direct kernel boot, `on_reboot=destroy`), then
//! `define_domain_xml(final)` with the same UUID and `phase='installing'`.
//! When the installer powers the VM off, [`Driver::finish_installs`]
//! (`install.rs`) marks it `installed` and starts it from its disk — only
//! on evidence; any other stop starts the install domain again.

use std::fs;
use std::io::{self, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Once;

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use tracing::warn;
use virt::connect::Connect;
use virt::domain::{Domain, DomainState};
use virt::enumutil::Enum;
use virt::error::ErrorNumber;
use virt::network::Network;
use virt::storage_pool::StoragePool;
use virt::storage_vol::StorageVol;

pub use super::install::{Evidence, InstallOutcome};
use super::spec::{NodeSpec, Phase, Spec};
use super::xml;
use crate::boot::iso9660::IsoImage;
use crate::model::cluster::Role;

/// What `vm up` created that is not recognisable by name or metadata.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    pub pool_created: bool,
    pub pool_dir_created: bool,
    /// `remove-bootstrap` ran: later `vm up` runs leave the bootstrap out.
    #[serde(default)]
    pub bootstrap_removed: bool,
}

/// One row of `vm status` (the `/status` schema's type).
pub use crate::drivers::libvirt::status::VmRow as NodeStatus;
use crate::drivers::libvirt::status::{VmPhase, VmState};

pub(super) fn is_code(e: &virt::error::Error, code: ErrorNumber) -> bool {
    e.code() == Enum::Known(code)
}

/// `Ok(None)` when libvirt says "not found" with `code`.
pub(super) fn found<T>(
    r: Result<T, virt::error::Error>,
    code: ErrorNumber,
) -> anyhow::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_code(&e, code) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub(super) fn state_name(d: &Domain) -> String {
    match d.state() {
        Ok((Enum::Known(s), _)) => match s {
            DomainState::NoState => "no state",
            DomainState::Running => "running",
            DomainState::Blocked => "blocked",
            DomainState::Paused => "paused",
            DomainState::Shutdown => "shutting down",
            DomainState::Shutoff => "shut off",
            DomainState::Crashed => "crashed",
            DomainState::PMSuspended => "suspended",
        }
        .to_string(),
        _ => "unknown".to_string(),
    }
}

pub struct Driver {
    pub(super) conn: Connect,
    pub(super) spec: Spec,
    pub(super) evidence: Option<Evidence>,
}

static CLEAR_ERRORS: Once = Once::new();

/// Environment variable forcing the domain type (`kvm` or `qemu`).
pub const DOMAIN_TYPE_ENV: &str = "CRC_APPLIANCE_DOMAIN_TYPE";

impl Driver {
    /// Connect to `spec.uri` and pick the domain type (`kvm` when the host
    /// offers it, `qemu` without KVM).
    pub fn open(spec: Spec) -> anyhow::Result<Driver> {
        CLEAR_ERRORS.call_once(virt::error::clear_error_callback);
        let conn = Connect::open(Some(&spec.uri))
            .with_context(|| format!("connecting to libvirt at {}", spec.uri))?;
        Ok(Self::with_connect(conn, spec))
    }

    /// Use an existing connection (tests keep one `test:///` state per Connect).
    pub fn with_connect(conn: Connect, mut spec: Spec) -> Driver {
        CLEAR_ERRORS.call_once(virt::error::clear_error_callback);
        if let Ok(caps) = conn.capabilities()
            && !caps.contains("<domain type='kvm'")
            && caps.contains("<domain type='qemu'")
        {
            spec.domain_type = "qemu".into();
        }
        // Escape hatch for hosts whose /dev/kvm cannot run guests (broken
        // nested virtualization): force TCG with CRC_APPLIANCE_DOMAIN_TYPE=qemu.
        match std::env::var(DOMAIN_TYPE_ENV).as_deref() {
            Ok(t @ ("kvm" | "qemu")) => spec.domain_type = t.to_string(),
            Ok(other) => warn!("ignoring {DOMAIN_TYPE_ENV}={other:?} (expected kvm or qemu)"),
            Err(_) => {}
        }
        Driver {
            conn,
            spec,
            evidence: None,
        }
    }

    /// Require the ignition fetch for an install to count as finished.
    pub fn set_evidence(&mut self, e: Evidence) {
        self.evidence = Some(e);
    }

    pub fn conn(&self) -> &Connect {
        &self.conn
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    pub(super) fn load_state(&self) -> State {
        fs::read(&self.spec.state_file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub(super) fn save_state(&self, s: &State) -> anyhow::Result<()> {
        let f = &self.spec.state_file;
        let tmp = f.with_extension("json.tmp");
        fs::write(&tmp, serde_json::to_vec_pretty(s)?)
            .and_then(|()| fs::rename(&tmp, f))
            .with_context(|| format!("writing {}", f.display()))
    }

    // ---------------------------------------------------------------- up

    /// `vm up`: pool, boot files, network, volumes, domains. Idempotent.
    /// Returns a human-readable line per action taken.
    pub fn up(&self) -> anyhow::Result<Vec<String>> {
        let mut done = Vec::new();
        let pool = self.ensure_pool(&mut done)?;
        self.extract_boot_files(&mut done)?;
        if let Err(e) = pool.refresh(0) {
            warn!("refreshing pool {}: {e}", self.spec.pool_name);
        }
        self.ensure_network(&mut done)?;
        let skip_bootstrap = self.load_state().bootstrap_removed;
        for n in &self.spec.nodes {
            if skip_bootstrap && n.role == Role::Bootstrap {
                continue;
            }
            self.ensure_volume(&pool, n, &mut done)?;
            self.ensure_domain(n, &mut done)?;
        }
        Ok(done)
    }

    /// Only the network (what `serve` needs before binding on the bridge).
    pub fn network_up(&self) -> anyhow::Result<Vec<String>> {
        let mut done = Vec::new();
        self.ensure_network(&mut done)?;
        Ok(done)
    }

    fn ensure_pool(&self, done: &mut Vec<String>) -> anyhow::Result<StoragePool> {
        let s = &self.spec;
        let mut state = self.load_state();
        let pool = match found(
            self.conn.lookup_storage_pool_by_name(&s.pool_name),
            ErrorNumber::NoStoragePool,
        )? {
            Some(p) => {
                let x = p.xml_desc(0)?;
                let have = x
                    .split_once("<path>")
                    .and_then(|(_, r)| r.split_once("</path>"))
                    .map(|(v, _)| unescape(v));
                if have.as_deref().map(Path::new) != Some(s.pool_path.as_path()) {
                    bail!(
                        "storage pool {} already exists with another directory than {} (libvirt.pool.path)",
                        s.pool_name,
                        s.pool_path.display()
                    );
                }
                p
            }
            None => {
                if !s.pool_path.exists() {
                    fs::create_dir_all(&s.pool_path)
                        .with_context(|| format!("creating {}", s.pool_path.display()))?;
                    state.pool_dir_created = true;
                }
                let p = self
                    .conn
                    .define_storage_pool_xml(&xml::pool_xml(s), 0)
                    .with_context(|| format!("defining storage pool {}", s.pool_name))?;
                state.pool_created = true;
                if let Err(e) = p.build(0) {
                    warn!("building pool {}: {e}", s.pool_name);
                }
                done.push(format!(
                    "defined storage pool {} at {}",
                    s.pool_name,
                    s.pool_path.display()
                ));
                p
            }
        };
        fs::create_dir_all(&s.pool_path)
            .with_context(|| format!("creating {}", s.pool_path.display()))?;
        self.save_state(&state)?;
        if !pool.is_active()? {
            pool.create(0)
                .with_context(|| format!("starting storage pool {}", s.pool_name))?;
            done.push(format!("started storage pool {}", s.pool_name));
        }
        let _ = pool.set_autostart(true);
        Ok(pool)
    }

    /// Copy kernel, initrd and rootfs out of the ISO unless the destination
    /// already has the same size and is newer than the ISO.
    fn extract_boot_files(&self, done: &mut Vec<String>) -> anyhow::Result<()> {
        let s = &self.spec;
        let file = fs::File::open(&s.iso)
            .with_context(|| format!("opening the live ISO {} (rhcos.iso)", s.iso.display()))?;
        let iso_mtime = file.metadata().and_then(|m| m.modified()).ok();
        let mut iso = IsoImage::open(io::BufReader::new(file))
            .with_context(|| format!("reading {}", s.iso.display()))?;
        for (src, dest) in s.extracted_files() {
            let entry = iso
                .lookup(src)
                .with_context(|| format!("{}: {src}", s.iso.display()))?;
            if let Ok(m) = fs::metadata(dest)
                && m.len() == entry.size
                && match (m.modified().ok(), iso_mtime) {
                    (Some(d), Some(i)) => d >= i,
                    _ => false,
                }
            {
                continue;
            }
            if let Some(dir) = dest.parent() {
                fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            let tmp = part_path(dest);
            let res = (|| -> anyhow::Result<u64> {
                let mut w = BufWriter::new(fs::File::create(&tmp)?);
                let n = iso.copy_to(&entry, &mut w)?;
                w.flush()?;
                w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
                fs::rename(&tmp, dest)?;
                Ok(n)
            })();
            match res {
                Ok(n) => done.push(format!("extracted {src} ({n} bytes) to {}", dest.display())),
                Err(e) => {
                    let _ = fs::remove_file(&tmp);
                    return Err(e.context(format!(
                        "extracting {src} from {} to {}",
                        s.iso.display(),
                        dest.display()
                    )));
                }
            }
        }
        Ok(())
    }

    pub(super) fn our_network(&self, n: &Network) -> bool {
        n.xml_desc(0)
            .map(|x| xml::owner_phase(&x, &self.spec.domain).is_some())
            .unwrap_or(false)
    }

    fn ensure_network(&self, done: &mut Vec<String>) -> anyhow::Result<()> {
        let s = &self.spec;
        let net = match found(
            self.conn.lookup_network_by_name(&s.network_name),
            ErrorNumber::NoNetwork,
        )? {
            Some(n) => {
                if !self.our_network(&n) {
                    warn!(
                        "network {} was not created by crc-appliance for {}; using it as it is",
                        s.network_name, s.domain
                    );
                }
                n
            }
            None => {
                let n = self
                    .conn
                    .define_network_xml(&xml::network_xml(s))
                    .with_context(|| format!("defining network {}", s.network_name))?;
                done.push(format!(
                    "defined network {} (bridge {})",
                    s.network_name, s.bridge
                ));
                n
            }
        };
        if !net.is_active()? {
            net.create()
                .with_context(|| format!("starting network {}", s.network_name))?;
            done.push(format!("started network {}", s.network_name));
        }
        let _ = net.set_autostart(true);
        Ok(())
    }

    fn ensure_volume(
        &self,
        pool: &StoragePool,
        n: &NodeSpec,
        done: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        if found(
            pool.lookup_storage_vol_by_name(&n.volume),
            ErrorNumber::NoStorageVolume,
        )?
        .is_none()
        {
            StorageVol::create_xml(pool, &xml::volume_xml(n), 0)
                .with_context(|| format!("creating volume {} ({} GiB)", n.volume, n.disk_gib))?;
            done.push(format!("created volume {} ({} GiB)", n.volume, n.disk_gib));
        }
        Ok(())
    }

    /// Our metadata phase from the persistent (inactive) definition, or the
    /// live one for a transient domain.
    pub(super) fn phase_of(&self, d: &Domain) -> Option<String> {
        let flags = if d.is_persistent().unwrap_or(false) {
            virt::sys::VIR_DOMAIN_XML_INACTIVE
        } else {
            0
        };
        d.xml_desc(flags)
            .ok()
            .and_then(|x| xml::owner_phase(&x, &self.spec.domain))
    }

    fn ensure_domain(&self, n: &NodeSpec, done: &mut Vec<String>) -> anyhow::Result<()> {
        let s = &self.spec;
        match found(
            self.conn.lookup_domain_by_name(&n.domain),
            ErrorNumber::NoDomain,
        )? {
            None => {
                self.conn
                    .create_domain_xml(&xml::install_domain_xml(s, n), 0)
                    .map_err(|e| {
                        self.start_error(format!("starting the install domain {}", n.domain), e)
                    })?;
                self.conn
                    .define_domain_xml(&xml::final_domain_xml(s, n, Phase::Installing))
                    .with_context(|| format!("defining domain {}", n.domain))?;
                done.push(format!(
                    "started {} from the live ISO kernel (installing to {})",
                    n.domain,
                    n.disk_path.display()
                ));
            }
            Some(d) => {
                let Some(phase) = self.phase_of(&d) else {
                    warn!(
                        "domain {} exists but was not created by crc-appliance; leaving it alone",
                        n.domain
                    );
                    return Ok(());
                };
                if !d.is_persistent()? {
                    // A previous run died between create and define.
                    self.conn
                        .define_domain_xml(&xml::final_domain_xml(s, n, Phase::Installing))
                        .with_context(|| format!("defining domain {}", n.domain))?;
                    done.push(format!("defined {} (install already running)", n.domain));
                } else if !d.is_active()? && phase != Phase::Installing.as_str() {
                    // A stopped install is decided by `finish_installs`,
                    // which every caller runs after `up`.
                    self.boot_from_disk(n, &d, &phase)?;
                    done.push(format!("started {} from its disk", n.domain));
                }
            }
        }
        Ok(())
    }

    pub(super) fn boot_from_disk(
        &self,
        n: &NodeSpec,
        d: &Domain,
        phase: &str,
    ) -> anyhow::Result<()> {
        let d = if phase == Phase::Installing.as_str() {
            self.conn
                .define_domain_xml(&xml::final_domain_xml(&self.spec, n, Phase::Installed))
                .with_context(|| format!("redefining domain {}", n.domain))?
        } else {
            d.clone()
        };
        d.create()
            .map_err(|e| self.start_error(format!("starting domain {}", n.domain), e))?;
        Ok(())
    }

    /// A failed domain start, explained: with KVM the usual cause is a host
    /// whose /dev/kvm cannot run guests (nested virtualization).
    pub(super) fn start_error(&self, what: String, e: virt::error::Error) -> anyhow::Error {
        if self.spec.domain_type == "kvm" {
            anyhow::anyhow!(
                "{what}: {e}\nKVM could not run the guest (no usable hardware virtualization here, e.g. nested without VMX/SVM or a busy /dev/kvm). \
                 {DOMAIN_TYPE_ENV}=qemu runs it under software emulation instead (much slower; CPU model Nehalem for RHCOS's x86-64-v2). \
                 The network, pool and volumes created so far are kept; `vm up` again continues, `vm down` removes them."
            )
        } else {
            anyhow::anyhow!("{what}: {e}")
        }
    }

    // ------------------------------------------------------------ status

    pub fn status(&self) -> anyhow::Result<Vec<NodeStatus>> {
        let mut out = Vec::new();
        for n in &self.spec.nodes {
            let (state, phase) = match found(
                self.conn.lookup_domain_by_name(&n.domain),
                ErrorNumber::NoDomain,
            )? {
                None => ("absent".to_string(), "-".to_string()),
                Some(d) => {
                    let live = d
                        .xml_desc(0)
                        .ok()
                        .and_then(|x| xml::owner_phase(&x, &self.spec.domain));
                    let phase = match (d.is_active().unwrap_or(false), live) {
                        (true, Some(p)) if p == "install" => "install".to_string(),
                        _ => self.phase_of(&d).unwrap_or_else(|| "foreign".into()),
                    };
                    (state_name(&d), phase)
                }
            };
            out.push(NodeStatus {
                node: n.node.clone(),
                domain: n.domain.clone(),
                role: n.role,
                state: vm_state(&state),
                phase: vm_phase(&phase),
                mac: n.mac.to_string(),
                ip: n.ip.to_string(),
                serial_log: n.serial_log.display().to_string(),
            });
        }
        Ok(out)
    }

    /// Network line for `vm status`.
    pub fn network_status(&self) -> anyhow::Result<String> {
        let s = &self.spec;
        Ok(
            match found(
                self.conn.lookup_network_by_name(&s.network_name),
                ErrorNumber::NoNetwork,
            )? {
                None => format!("network {}: absent", s.network_name),
                Some(n) => format!(
                    "network {}: {} bridge {}{}",
                    s.network_name,
                    if n.is_active()? { "active" } else { "inactive" },
                    n.bridge_name().unwrap_or_else(|_| s.bridge.clone()),
                    if self.our_network(&n) {
                        ""
                    } else {
                        " (not ours)"
                    }
                ),
            },
        )
    }
}

/// Undo XML escaping of a text node.
pub(super) fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&apos;", "'")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

pub(super) fn part_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".part");
    PathBuf::from(s)
}

/// Remove a file; `Ok(false)` when it did not exist.
pub(super) fn remove_file(p: &Path) -> anyhow::Result<bool> {
    match fs::remove_file(p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(anyhow::Error::new(e).context(format!("removing {}", p.display()))),
    }
}

/// The typed state of a [`state_name`] (`absent` when not defined).
fn vm_state(name: &str) -> VmState {
    match name {
        "absent" => VmState::Absent,
        "no state" => VmState::NoState,
        "running" => VmState::Running,
        "blocked" => VmState::Blocked,
        "paused" => VmState::Paused,
        "shutting down" => VmState::ShuttingDown,
        "shut off" => VmState::ShutOff,
        "crashed" => VmState::Crashed,
        "suspended" => VmState::Suspended,
        _ => VmState::Unknown,
    }
}

/// The typed phase of a domain: its owner metadata's phase, `install`
/// while the live ISO runs, `foreign`, or `-` when absent.
fn vm_phase(name: &str) -> VmPhase {
    match name {
        "install" => VmPhase::Install,
        "installing" => VmPhase::Installing,
        "installed" => VmPhase::Installed,
        "-" => VmPhase::None,
        _ => VmPhase::Foreign,
    }
}

/// Render `vm status` as a table: each column as wide as its widest cell
/// (domain names carry the cluster name and grow with it).
pub fn status_table(rows: &[NodeStatus]) -> String {
    let header = ["NODE", "DOMAIN", "ROLE", "STATE", "PHASE", "MAC", "IP"].map(String::from);
    let cells = rows.iter().map(|r| {
        [
            &r.node as &dyn std::fmt::Display,
            &r.domain,
            &r.role,
            &r.state,
            &r.phase,
            &r.mac,
            &r.ip,
        ]
        .map(|c| c.to_string())
    });
    let table: Vec<[String; 7]> = std::iter::once(header).chain(cells).collect();
    let mut widths = [0; 7];
    for r in &table {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut o = String::new();
    for r in &table {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        o.push_str(line.join("  ").trim_end());
        o.push('\n');
    }
    o
}
