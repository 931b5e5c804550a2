//! The top-level `pxe:` section: the read-only TFTP server that hands iPXE
//! binaries to PXE firmware (issue #12). Its defaults and validation (the raw
//! type: `raw/pxe.rs`); `validate/mod.rs` calls [`tftp`] once and adds the
//! listener to its collision check.
//!
//! Not to be confused with `dhcp.pxe` ([`crate::model::cluster::PxeCfg`]: next-server and
//! boot-file options in DHCP replies); this section only runs the TFTP side.
//!
//! Defaults: `enabled: true` when the section exists, `tftpListen:
//! <applianceIP>:69`, `tftpRoot`: the first of [`DISTRO_ROOTS`] that exists
//! (else the first), `maxTransfers: 64`, `maxTransfersPerClient: 4`,
//! `timeout: 1s`, `retries: 5`,
//! `allowSymlinksTo`: `[/boot]` when `tftpRoot` is defaulted (Debian's `ipxe`
//! links `ipxe.efi` and `ipxe.lkrn` to `/boot`), otherwise empty.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::FieldError;
use crate::config::raw::RawPxe;

/// Where distributions install the iPXE binaries: Debian/Ubuntu `ipxe`,
/// Fedora/RHEL `ipxe-bootimgs-x86` / `ipxe-bootimgs-aarch64`.
pub(super) const DISTRO_ROOTS: [&str; 2] = ["/usr/lib/ipxe", "/usr/share/ipxe"];

use crate::model::cluster::TftpCfg;

/// The default `tftpRoot`: the first distro directory that exists.
pub(super) fn default_root() -> PathBuf {
    DISTRO_ROOTS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_dir())
        .unwrap_or_else(|| PathBuf::from(DISTRO_ROOTS[0]))
}

/// Validate `pxe:`. Returns `None` when the section is absent or has errors
/// (each pushed to `errs` with its field path). `base` resolves relative
/// paths; `appliance_ip` is `None` when `network.applianceIP` was invalid.
pub(super) fn tftp(
    raw: Option<&RawPxe>,
    appliance_ip: Option<Ipv4Addr>,
    base: &Path,
    errs: &mut Vec<FieldError>,
) -> Option<TftpCfg> {
    let raw = raw?;
    let before = errs.len();
    let mut push = |path: &str, message: String| {
        errs.push(FieldError {
            path: path.into(),
            message,
        })
    };
    let listen = match &raw.tftp_listen {
        Some(text) => super::parse_sock(text, Some(69))
            .map_err(|err| push("pxe.tftpListen", err.to_string()))
            .ok(),
        None => appliance_ip.map(|ip| SocketAddr::new(ip.into(), 69)),
    };
    let resolve = |p: &str| {
        let p = Path::new(p.trim());
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };
    let root = match &raw.tftp_root {
        Some(r) if r.trim().is_empty() => {
            push("pxe.tftpRoot", "must not be empty".into());
            None
        }
        Some(r) => Some(resolve(r)),
        None => Some(default_root()),
    };
    if raw.max_transfers == 0 || raw.max_transfers > 10_000 {
        push(
            "pxe.maxTransfers",
            format!("{} is out of range (1 to 10000)", raw.max_transfers),
        );
    }
    if raw.max_transfers_per_client == 0 || raw.max_transfers_per_client > 10_000 {
        push(
            "pxe.maxTransfersPerClient",
            format!(
                "{} is out of range (1 to 10000)",
                raw.max_transfers_per_client
            ),
        );
    }
    let t = raw.timeout.get();
    if t < Duration::from_millis(100) || t > Duration::from_secs(255) {
        push(
            "pxe.timeout",
            "must be between 100ms and 255s (RFC 2349 allows 1 to 255 s)".into(),
        );
    }
    if raw.retries > 100 {
        push(
            "pxe.retries",
            format!("{} is out of range (0 to 100)", raw.retries),
        );
    }
    let allow = match &raw.allow_symlinks_to {
        Some(list) => {
            let mut out = Vec::new();
            for (i, d) in list.iter().enumerate() {
                if d.trim().is_empty() {
                    push(
                        &format!("pxe.allowSymlinksTo[{i}]"),
                        "must not be empty".into(),
                    );
                } else {
                    out.push(resolve(d));
                }
            }
            out
        }
        None if raw.tftp_root.is_none() => vec![PathBuf::from("/boot")],
        None => Vec::new(),
    };
    if errs.len() != before {
        return None;
    }
    Some(TftpCfg {
        enabled: raw.enabled,
        listen: listen?,
        root: root?,
        max_transfers: raw.max_transfers,
        max_transfers_per_client: raw.max_transfers_per_client,
        timeout: t,
        retries: raw.retries,
        allow_symlinks_to: allow,
        pool: raw.pool,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> RawPxe {
        serde_saphyr::from_str(yaml).expect("yaml")
    }

    fn run(yaml: &str) -> (Option<TftpCfg>, Vec<String>) {
        let mut errs = Vec::new();
        let raw = parse(yaml);
        let out = tftp(
            Some(&raw),
            Some(Ipv4Addr::new(10, 0, 0, 2)),
            Path::new("/etc/crc"),
            &mut errs,
        );
        (out, errs.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn defaults() {
        let (c, e) = run("{}");
        assert!(e.is_empty(), "{e:?}");
        let c = c.expect("cfg");
        assert!(c.enabled);
        assert_eq!(c.listen, "10.0.0.2:69".parse().expect("addr"));
        assert!(DISTRO_ROOTS.iter().any(|r| Path::new(r) == c.root));
        assert_eq!(c.max_transfers, 64);
        assert_eq!(c.max_transfers_per_client, 4);
        assert_eq!(c.timeout, Duration::from_secs(1));
        assert_eq!(c.retries, 5);
        assert_eq!(c.allow_symlinks_to, vec![PathBuf::from("/boot")]);
    }

    #[test]
    fn explicit_values_and_relative_root() {
        let (c, e) = run(
            "{enabled: false, tftpListen: '127.0.0.1:6969', tftpRoot: boot, maxTransfers: 3, maxTransfersPerClient: 2, timeout: 500ms, retries: 2}",
        );
        assert!(e.is_empty(), "{e:?}");
        let c = c.expect("cfg");
        assert!(!c.enabled);
        assert_eq!(c.listen, "127.0.0.1:6969".parse().expect("addr"));
        assert_eq!(c.root, PathBuf::from("/etc/crc/boot"));
        assert_eq!(c.timeout, Duration::from_millis(500));
        assert_eq!((c.max_transfers, c.max_transfers_per_client), (3, 2));
        assert!(c.allow_symlinks_to.is_empty());
        let (c, _) = run("{tftpListen: '127.0.0.9'}");
        assert_eq!(c.expect("cfg").listen.port(), 69);
    }

    #[test]
    fn all_errors_at_once_with_paths() {
        let (c, e) = run(
            "{tftpListen: 'nope', tftpRoot: ' ', maxTransfers: 0, maxTransfersPerClient: 0, timeout: 300s, retries: 101, allowSymlinksTo: ['']}",
        );
        assert!(c.is_none());
        let paths: Vec<_> = e
            .iter()
            .map(|s| s.split(':').next().unwrap_or(""))
            .collect();
        assert_eq!(
            paths,
            [
                "pxe.tftpListen",
                "pxe.tftpRoot",
                "pxe.maxTransfers",
                "pxe.maxTransfersPerClient",
                "pxe.timeout",
                "pxe.retries",
                "pxe.allowSymlinksTo[0]"
            ],
            "{e:?}"
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(serde_saphyr::from_str::<RawPxe>("{tftpRot: x}").is_err());
    }

    #[test]
    fn absent_section_is_none() {
        let mut errs = Vec::new();
        assert!(tftp(None, None, Path::new("/"), &mut errs).is_none());
        assert!(errs.is_empty());
    }
}
