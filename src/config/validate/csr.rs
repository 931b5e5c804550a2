//! The top-level `csr:` section: inventory-bound CSR approval (issue #37,
//! `services/csr`). Its defaults and validation (the raw type:
//! `raw/csr.rs`).
//!
//! Defaults: the section absent = no approver (today's hint with the `oc`
//! commands stays); present = `window: 60m`, `recovery: false`.
//! `kubeconfigFile` is required, relative to the cluster file's directory;
//! it is read when the service starts (a missing file is reported then,
//! and on every reconnect, not here: the installer writes it later).

use std::path::Path;
use std::time::Duration;

use crate::config::FieldError;
use crate::config::raw::RawCsr;
use crate::model::cluster::CsrCfg;

/// Validate `csr:`; `None` when absent or invalid (errors pushed with
/// their field paths).
pub(super) fn csr(raw: Option<&RawCsr>, base: &Path, errs: &mut Vec<FieldError>) -> Option<CsrCfg> {
    let raw = raw?;
    let before = errs.len();
    if raw.kubeconfig_file.trim().is_empty() {
        errs.push(FieldError {
            path: "csr.kubeconfigFile".into(),
            message: "is empty: name the installer's auth/kubeconfig or the kubeconfig of `crc-appliance render csr-rbac`'s identity".into(),
        });
    }
    let window = raw.window.get();
    if window < Duration::from_secs(60) || window > Duration::from_secs(7 * 86_400) {
        errs.push(FieldError {
            path: "csr.window".into(),
            message: format!(
                "{}s is out of range (1m to 7d): a node's first CSRs follow its ignition fetch within minutes",
                window.as_secs()
            ),
        });
    }
    if errs.len() != before {
        return None;
    }
    Some(CsrCfg {
        kubeconfig_file: super::resolve(base, &raw.kubeconfig_file),
        window,
        recovery: raw.recovery,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn run(yaml: &str) -> (Option<CsrCfg>, Vec<String>) {
        let raw: RawCsr = serde_saphyr::from_str(yaml).expect("yaml");
        let mut errs = Vec::new();
        let c = csr(Some(&raw), Path::new("/etc/crc"), &mut errs);
        (
            c,
            errs.iter()
                .map(|e| format!("{}: {}", e.path, e.message))
                .collect(),
        )
    }

    #[test]
    fn defaults_and_relative_path() {
        let (c, errs) = run("kubeconfigFile: auth/kubeconfig");
        assert!(errs.is_empty(), "{errs:?}");
        let c = c.expect("valid");
        assert_eq!(c.kubeconfig_file, PathBuf::from("/etc/crc/auth/kubeconfig"));
        assert_eq!(c.window, Duration::from_secs(3600));
        assert!(!c.recovery);
    }

    #[test]
    fn every_mistake_with_its_path() {
        let (c, errs) = run("{kubeconfigFile: ' ', window: 5s, recovery: true}");
        assert!(c.is_none());
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with("csr.kubeconfigFile: is empty"));
        assert!(errs[1].starts_with("csr.window: 5s is out of range"));
        assert!(serde_saphyr::from_str::<RawCsr>("{kubeconfigFile: a, windows: 1m}").is_err());
        assert!(serde_saphyr::from_str::<RawCsr>("{window: 1m}").is_err());
    }
}
