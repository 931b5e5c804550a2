//! `rhcos`: the one boot source (live ISO, or the three PXE artifacts) and
//! the install kernel arguments, shared by the libvirt VMs and network boot.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Errs, resolve};
use crate::config::raw;
use crate::model::cluster::{BootSource, RhcosCfg, Role};

use crate::model::boot::DEFAULT_INSTALL_DEV;

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
