//! libvirt driver: the cluster network, disks and VMs booted unattended from
//! the RHCOS live ISO.
//!
//! Boot route (docs/libvirt.md, research libvirt-boot.md route A1): the
//! kernel and initramfs are read out of the unmodified ISO with our own
//! ISO 9660 reader ([`iso9660`]) into the pool directory, the live rootfs
//! into `http.imagesDir`; each node first runs a transient install domain
//! (direct kernel boot with `coreos.inst.install_dev`,
//! `coreos.inst.ignition_url`, `coreos.live.rootfs_url`, `on_reboot=destroy`),
//! while its persistent definition with the same UUID boots the disk.
//!
//! Layers: [`spec`] (names, paths, URLs, UUIDs — pure), [`xml`] (XML — pure),
//! [`iso9660`] (reader — pure over `Read + Seek`), `driver` (virt calls,
//! feature `libvirt`, blocking).
//!
//! Processes: only the helper binary `crc-appliance-libvirt` links libvirt
//! (`helper` runs `driver` there); `crc-appliance` talks to it over a pipe
//! ([`proto`], `client`; `service` in `serve`, [`vm`] for the `vm`
//! commands), so a `serve` without a `libvirt:` section never maps
//! libvirt's ~50 shared libraries (bench/RESULTS-memory.md). Nothing
//! reachable from `crc-appliance`'s `main` may use `driver`, `install`,
//! `teardown` or `helper`.
//!
//! Invariants: everything created carries the cluster name (`<cluster>-...`)
//! or our `<metadata>`; `vm down` removes only such objects; `vm up` and
//! `vm down` are idempotent.

pub mod proto;
pub mod spec;
pub mod status;
pub mod xml;

#[cfg(feature = "libvirt")]
pub mod client;
#[cfg(feature = "libvirt")]
pub mod driver;
#[cfg(feature = "libvirt")]
pub mod helper;
#[cfg(feature = "libvirt")]
mod install;
#[cfg(feature = "libvirt")]
pub mod service;
#[cfg(feature = "libvirt")]
mod teardown;

use std::sync::Arc;

use crate::plan::Plan;
pub use spec::Spec;

/// `render libvirt`: the pool, network, volume and domain XML that `vm up` defines.
pub fn render(plan: &Plan) -> anyhow::Result<String> {
    Ok(xml::render(&Spec::new(plan)?))
}

/// How much of the end of a serial log `vm console` prints.
pub const CONSOLE_TAIL: u64 = 256 * 1024;

/// `vm console NODE`: the end of the node's serial console log (install
/// and disk boots append to it), so a stuck boot can be read.
pub fn console(plan: &Plan, node: &str) -> anyhow::Result<String> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let spec = Spec::new(plan)?;
    let n = spec
        .node(node)
        .ok_or_else(|| anyhow::anyhow!("node {node:?} is not in the cluster file"))?;
    let path = &n.serial_log;
    let mut f = std::fs::File::open(path).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e} (the log exists once `vm up` has started the VM)",
            path.display()
        )
    })?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(CONSOLE_TAIL)))?;
    let mut buf = Vec::new();
    f.take(CONSOLE_TAIL).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// What `crc-appliance vm` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VmAction {
    /// Define the network, volumes and VMs and start the install (idempotent).
    Up,
    /// Remove everything `up` created (idempotent).
    Down,
    /// Show each VM's state.
    Status,
    /// Destroy and remove the bootstrap VM and its disk.
    RemoveBootstrap,
}

/// The nodes that fetched their ignition, from the running `serve`'s
/// timeline: the evidence `vm up` needs besides the shut-off reason.
/// `None` when nobody can tell (then the reason alone decides).
pub type Fetched = Option<std::collections::HashSet<String>>;

/// `vm up|down|status|remove-bootstrap`.
pub async fn vm(plan: Arc<Plan>, action: VmAction, fetched: Fetched) -> anyhow::Result<()> {
    let spec = Spec::new(&plan)?;
    for w in &spec.warnings {
        tracing::warn!("{w}");
    }
    run_vm(spec, action, fetched).await
}

#[cfg(not(feature = "libvirt"))]
async fn run_vm(_spec: Spec, action: VmAction, _fetched: Fetched) -> anyhow::Result<()> {
    anyhow::bail!(
        "vm {}: this crc-appliance was built without libvirt support \
         (rebuild with the default `libvirt` feature)",
        format!("{action:?}").to_lowercase()
    )
}

/// What a `vm up|down|remove-bootstrap` prints for the lines it did.
pub fn vm_output(lines: Vec<String>) -> String {
    let mut o = String::new();
    if lines.is_empty() {
        o.push_str("nothing to do\n");
    }
    for l in lines {
        o.push_str(&l);
        o.push('\n');
    }
    o
}

/// In the libvirt helper process ([`client::Helper::once`]).
#[cfg(feature = "libvirt")]
async fn run_vm(spec: Spec, action: VmAction, fetched: Fetched) -> anyhow::Result<()> {
    let procs = crate::runtime::helperproc::HelperProcs::default();
    print!("{}", vm_text(&procs, spec, action, fetched).await?);
    Ok(())
}

/// What a `vm` command prints, run in a helper process of its own started
/// as `procs` says (also `serve`'s `node boot` without
/// `libvirt.startOnServe`, with its context's helpers).
#[cfg(feature = "libvirt")]
pub async fn vm_text(
    procs: &crate::runtime::helperproc::HelperProcs,
    spec: Spec,
    action: VmAction,
    fetched: Fetched,
) -> anyhow::Result<String> {
    let req = proto::Request::Vm {
        spec: Box::new(spec),
        action,
        fetched: proto::fetched_list(fetched),
    };
    match client::Helper::once(procs, req).await? {
        proto::Response::Output { text } => Ok(text),
        other => anyhow::bail!("libvirt helper: unexpected answer {other:?}"),
    }
}
