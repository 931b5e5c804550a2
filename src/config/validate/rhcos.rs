//! `rhcos`: the one boot source (live ISO, or the three PXE artifacts) and
//! the install kernel arguments, shared by the libvirt VMs and network boot.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Errs, resolve};
use crate::config::raw;
use crate::model::cluster::{BootSource, RhcosCfg, Role};

use crate::model::boot::{
    DEFAULT_INSTALL_DEV, IsoTarget, MAX_KARGS_AREA, MAX_KERNEL_CMDLINE, ipxe_kernel_args,
    iso_install_kargs,
};
use crate::model::cluster::Cluster;

/// Every node's and role's boot ISO kargs (the shortest of its install
/// command lines) fit a live ISO's embed area and the kernel's command
/// line ([`MAX_KARGS_AREA`]); the ISO's own area may be smaller, which
/// `preflight` checks against the file.
pub(crate) fn check_kargs_fit(c: &Cluster, e: &mut Errs) {
    if c.rhcos.is_none() {
        return;
    }
    let nodes = c
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("nodes[{i}].kargs"), IsoTarget::Node(n)));
    let roles = Role::ALL
        .into_iter()
        .filter(|r| c.nodes_with_role(*r).next().is_some())
        .map(|r| (format!("rhcos.roleKargs.{r}"), IsoTarget::Role(r)));
    for (path, t) in nodes.chain(roles) {
        let len = iso_install_kargs(c, t).len();
        if len >= MAX_KARGS_AREA {
            e.push(
                path,
                format!(
                    "the install kernel arguments of {} are {len} bytes (with rhcos.kargs and the role's); the kernel command line and a live ISO's embed area hold at most {}",
                    t.name(),
                    MAX_KARGS_AREA - 1
                ),
            );
        }
    }
}

/// Every node's iPXE kernel line (`initrd=main`, the live rootfs URL and
/// the install kargs: longer than the ISO's) fits the x86 kernel's
/// command line ([`MAX_KERNEL_CMDLINE`]); beyond it the kernel silently
/// loses the last arguments, the node's own. The error names the
/// configured kargs, longest first, as the ones to shorten.
pub(crate) fn check_ipxe_cmdline(c: &Cluster, e: &mut Errs) {
    let Some(r) = &c.rhcos else {
        return;
    };
    for (i, n) in c.nodes.iter().enumerate() {
        let len = ipxe_kernel_args(c, n).len();
        // A node whose ISO line is too long already has its error.
        let iso_too_long = iso_install_kargs(c, IsoTarget::Node(n)).len() >= MAX_KARGS_AREA;
        if len <= MAX_KERNEL_CMDLINE || iso_too_long {
            continue;
        }
        let mut own: Vec<(String, &String)> = r
            .kargs
            .iter()
            .enumerate()
            .map(|(j, k)| (format!("rhcos.kargs[{j}]"), k))
            .chain(
                r.role_kargs
                    .get(&n.role)
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .map(|(j, k)| (format!("rhcos.roleKargs.{}[{j}]", n.role), k)),
            )
            .chain(
                n.kargs
                    .iter()
                    .enumerate()
                    .map(|(j, k)| (format!("nodes[{i}].kargs[{j}]"), k)),
            )
            .collect();
        own.sort_by_key(|(_, k)| std::cmp::Reverse(k.len()));
        let names: Vec<String> = own
            .iter()
            .map(|(p, k)| format!("{p} ({} bytes)", k.len()))
            .collect();
        e.push(
            format!("nodes[{i}].kargs"),
            format!(
                "the iPXE kernel command line of {} would be {len} bytes; the x86 kernel takes at most {MAX_KERNEL_CMDLINE} and drops the rest; shorten {} by {} bytes: {}",
                n.name,
                if names.len() == 1 { "this karg" } else { "these kargs" },
                len - MAX_KERNEL_CMDLINE,
                if names.is_empty() { "(none configured: shorten the appliance's URLs)".to_string() } else { names.join(", ") }
            ),
        );
    }
}

/// Why a kernel argument cannot be passed as one word, if it cannot.
pub(crate) fn karg_problem(k: &str) -> Option<&'static str> {
    if k.is_empty() {
        Some("must not be empty")
    } else if !k.bytes().all(|b| b.is_ascii_graphic()) {
        Some("must be one word of visible ASCII (no spaces or quotes needed)")
    } else if k.len() > 512 {
        Some("is longer than 512 characters")
    } else {
        None
    }
}

/// Record an error unless `dev` is a /dev/ path.
pub(crate) fn check_install_dev(e: &mut Errs, path: &str, dev: &str) {
    if !dev.starts_with("/dev/") || dev.contains(char::is_whitespace) {
        e.push(path, format!("{dev:?} must be a /dev/ path"));
    }
}

pub(crate) fn build(r: &raw::Rhcos, base: &Path, e: &mut Errs) -> Option<RhcosCfg> {
    let files = [&r.kernel, &r.initramfs, &r.rootfs];
    let source = match (
        &r.iso,
        files.iter().all(|f| f.is_some()),
        files.iter().any(|f| f.is_some()),
    ) {
        (Some(iso), _, false) if !iso.trim().is_empty() => BootSource::Iso(resolve(base, iso)),
        (Some(_), _, false) => {
            e.push("rhcos.iso", "must not be empty");
            return None;
        }
        (None, true, _) => BootSource::Files {
            kernel: resolve(base, r.kernel.as_deref().unwrap_or_default()),
            initramfs: resolve(base, r.initramfs.as_deref().unwrap_or_default()),
            rootfs: resolve(base, r.rootfs.as_deref().unwrap_or_default()),
        },
        (Some(_), _, true) => {
            e.push(
                "rhcos",
                "name either iso or kernel + initramfs + rootfs, not both",
            );
            return None;
        }
        (None, false, _) => {
            e.push(
                "rhcos",
                "needs iso (the live ISO) or all of kernel, initramfs and rootfs (the PXE artifacts)",
            );
            return None;
        }
    };
    let install_dev = r
        .install_dev
        .clone()
        .unwrap_or_else(|| DEFAULT_INSTALL_DEV.to_string());
    check_install_dev(e, "rhcos.installDev", &install_dev);
    let mut check = |path: String, list: &[String]| {
        for (i, k) in list.iter().enumerate() {
            if let Some(why) = karg_problem(k) {
                e.push(format!("{path}[{i}]"), format!("{k:?} {why}"));
            }
        }
    };
    check("rhcos.kargs".into(), &r.kargs);
    let mut role_kargs = BTreeMap::new();
    for (role, list) in [
        (Role::Bootstrap, &r.role_kargs.bootstrap),
        (Role::Master, &r.role_kargs.master),
        (Role::Worker, &r.role_kargs.worker),
    ] {
        check(format!("rhcos.roleKargs.{role}"), list);
        role_kargs.insert(role, list.clone());
    }
    Some(RhcosCfg {
        source,
        install_dev,
        kargs: r.kargs.clone(),
        role_kargs,
    })
}
