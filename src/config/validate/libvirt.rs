//! `libvirt`: the URI, ISO, pool, network and per-role resources of the
//! VMs (only for `vm ...` and `startOnServe`).

use std::path::{Path, PathBuf};

use super::{Errs, resolve};
use crate::config::raw;
use crate::model::cluster::{BootSource, LibvirtCfg, NetMode, ResourceCfg, RhcosCfg};
use crate::model::names::is_label;

pub(crate) fn build(
    e: &mut Errs,
    v: &raw::Libvirt,
    rhcos: Option<&RhcosCfg>,
    cluster: &str,
    base: &Path,
) -> Option<LibvirtCfg> {
    let mut ok = true;
    if v.uri.trim().is_empty() {
        e.push("libvirt.uri", "must not be empty");
        ok = false;
    }
    if v.iso.is_some() {
        e.push(
            "libvirt.iso",
            "moved to rhcos.iso (one boot source for the VMs and network boot): write `rhcos: { iso: … }`",
        );
        ok = false;
    }
    let iso = boot_iso(e, v, rhcos);
    let network_name = v
        .network
        .name
        .clone()
        .unwrap_or_else(|| cluster.to_string());
    if network_name.is_empty()
        || network_name.len() > 50
        || !network_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        e.push(
            "libvirt.network.name",
            format!("{network_name:?} must be 1-50 characters of a-z, 0-9, '-' or '_'"),
        );
        ok = false;
    }
    let bridge = v.network.bridge.clone().unwrap_or_else(|| {
        let mut b = format!("crc-{cluster}");
        b.truncate(15);
        b
    });
    if bridge.is_empty() || bridge.len() > 15 || bridge.contains(['/', ' ']) {
        e.push(
            "libvirt.network.bridge",
            format!("{bridge:?} is not a valid bridge name (1-15 characters)"),
        );
        ok = false;
    }
    let mode = match v.network.mode.as_deref().unwrap_or("appliance") {
        "appliance" => NetMode::Appliance,
        "forwarder" => NetMode::Forwarder,
        other => {
            e.push(
                "libvirt.network.mode",
                format!("unknown mode {other:?} (expected appliance or forwarder)"),
            );
            ok = false;
            NetMode::Appliance
        }
    };
    if !is_label(&v.pool.name.to_ascii_lowercase().replace('_', "-")) {
        e.push(
            "libvirt.pool.name",
            format!("{:?} is not a valid pool name", v.pool.name),
        );
        ok = false;
    }
    if !v.install_dev.starts_with("/dev/") {
        super::rhcos::check_install_dev(e, "libvirt.installDev", &v.install_dev);
        ok = false;
    }
    let bootstrap = resources(e, "bootstrap", &v.resources.bootstrap, &mut ok);
    let master = resources(e, "master", &v.resources.master, &mut ok);
    let worker = resources(e, "worker", &v.resources.worker, &mut ok);
    let iso = iso?;
    ok.then(|| LibvirtCfg {
        uri: v.uri.clone(),
        iso,
        pool_name: v.pool.name.clone(),
        pool_path: resolve(base, &v.pool.path),
        network_name,
        bridge,
        mode,
        nat: v.network.nat,
        bootstrap,
        master,
        worker,
        install_dev: v.install_dev.clone(),
        start_on_serve: v.start_on_serve,
    })
}

/// The live ISO the VMs boot from: `rhcos.iso` (PXE artifacts are no
/// boot source for a VM; `libvirt.iso` moved to `rhcos.iso`).
fn boot_iso(e: &mut Errs, v: &raw::Libvirt, rhcos: Option<&RhcosCfg>) -> Option<PathBuf> {
    match rhcos.map(|r| &r.source) {
        Some(BootSource::Iso(p)) => Some(p.clone()),
        Some(BootSource::Files { .. }) => {
            e.push(
                "libvirt",
                "the VMs boot from the live ISO: set rhcos.iso (rhcos names PXE artifacts)",
            );
            None
        }
        None => {
            if v.iso.is_none() {
                e.push("libvirt", "the VMs need rhcos.iso (the RHCOS live ISO)");
            }
            None
        }
    }
}

/// `libvirt.resources.<role>`: 1..256 CPUs, at least 512 MiB, a disk;
/// clears `ok` on a violation.
fn resources(e: &mut Errs, role: &str, r: &raw::Resource, ok: &mut bool) -> ResourceCfg {
    let p = |f: &str| format!("libvirt.resources.{role}.{f}");
    if r.cpus == 0 || r.cpus > 256 {
        e.push(p("cpus"), "must be 1..256");
        *ok = false;
    }
    if r.memory_mib < 512 {
        e.push(p("memoryMib"), "must be at least 512");
        *ok = false;
    }
    if r.disk_gib == 0 {
        e.push(p("diskGib"), "must be greater than zero");
        *ok = false;
    }
    ResourceCfg {
        cpus: r.cpus,
        memory_mib: r.memory_mib,
        disk_gib: r.disk_gib,
    }
}
