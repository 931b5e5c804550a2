//! The top-level `registry:` section: the appliance as the lab's mirror
//! registry (issue #36, docs/registry.md). Its defaults and validation
//! (the raw type: `raw/registry.rs`).
//!
//! Defaults: the section absent = no registry (nothing listens); present =
//! `listen: <applianceIP>:5000`, `name: mirror.<name>.<baseDomain>`,
//! `allowDelete: false`, the certificate signed by the appliance's CA.
//! `storage` is required (the distribution registry's filesystem root).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use crate::config::FieldError;
use crate::config::raw::{RawPullThrough, RawRegistry};
pub(super) use crate::model::registry::{
    MIRROR_LABEL, PullThroughCfg, RegistryCfg, RegistryTlsCfg,
};

/// The registry's default port.
pub(super) const REGISTRY_PORT: u16 = 5000;

/// What the builder needs from the rest of the file.
pub(super) struct Context<'a> {
    pub appliance_ip: Option<Ipv4Addr>,
    /// `<name>.<baseDomain>`.
    pub domain: &'a str,
    pub base: &'a Path,
}

/// Validate `registry:`. `None` when absent or invalid (errors pushed with
/// their field paths).
pub(super) fn registry(
    raw: Option<&RawRegistry>,
    cx: &Context<'_>,
    errs: &mut Vec<FieldError>,
) -> Option<RegistryCfg> {
    let raw = raw?;
    let before = errs.len();
    let mut push = |path: &str, message: String| {
        errs.push(FieldError {
            path: path.into(),
            message,
        })
    };
    let listen = match &raw.listen {
        Some(text) => super::parse_sock(text, Some(REGISTRY_PORT))
            .map_err(|err| push("registry.listen", err.to_string()))
            .ok(),
        None => cx
            .appliance_ip
            .map(|ip| SocketAddr::new(ip.into(), REGISTRY_PORT)),
    };
    let name = match &raw.name {
        Some(n) => {
            let n = n.trim_end_matches('.').to_ascii_lowercase();
            if let Err(m) = check_dns_name(&n) {
                push("registry.name", format!("{n:?}: {m}"));
            }
            n
        }
        None => format!("{MIRROR_LABEL}.{}", cx.domain),
    };
    if raw.storage.trim().is_empty() {
        push(
            "registry.storage",
            "is empty: give the directory holding (or to hold) docker/registry/v2".into(),
        );
    }
    let storage = super::resolve(cx.base, &raw.storage);
    let file = |field: &str, p: &Option<String>, push: &mut dyn FnMut(&str, String)| {
        p.as_ref().map(|p| {
            let path = super::resolve(cx.base, p);
            if let Err(e) = std::fs::File::open(&path) {
                push(field, format!("{}: {e}", path.display()));
            }
            path
        })
    };
    let htpasswd_file = file("registry.htpasswdFile", &raw.htpasswd_file, &mut push);
    let pull_secret_file = file("registry.pullSecretFile", &raw.pull_secret_file, &mut push);
    let tls = raw.tls.as_ref().map(|t| {
        let cfg = RegistryTlsCfg {
            cert_file: super::resolve(cx.base, &t.cert_file),
            key_file: super::resolve(cx.base, &t.key_file),
        };
        if let Err(e) = std::fs::File::open(&cfg.cert_file) {
            push(
                "registry.tls.certFile",
                format!("{}: {e}", cfg.cert_file.display()),
            );
        }
        if let Err(m) = crate::config::secret::check_secret_file(&cfg.key_file, true) {
            push("registry.tls.keyFile", m.to_string());
        }
        cfg
    });
    let mut pull_through = pull_through(&raw.pull_through, &mut push);
    for (i, (p, raw)) in pull_through.iter_mut().zip(&raw.pull_through).enumerate() {
        let field = format!("registry.pullThrough[{i}].caFile");
        p.ca_file = file(&field, &raw.ca_file, &mut push);
    }
    if let Some(r) = &raw.release_image
        && !r.contains('@')
        && !r.contains(':')
    {
        push(
            "registry.releaseImage",
            format!(
                "{r:?}: not a pullspec (quay.io/openshift-release-dev/ocp-release@sha256:… or …:<tag>)"
            ),
        );
    }
    if errs.len() != before {
        return None;
    }
    Some(RegistryCfg {
        listen: listen?,
        name,
        storage,
        htpasswd_file,
        allow_delete: raw.allow_delete,
        tls,
        pull_through,
        pull_secret_file,
        release_image: raw.release_image.clone(),
    })
}

fn pull_through(raw: &[RawPullThrough], push: &mut dyn FnMut(&str, String)) -> Vec<PullThroughCfg> {
    let mut out: Vec<PullThroughCfg> = Vec::new();
    for (i, p) in raw.iter().enumerate() {
        let registry = p.registry.trim_end_matches('/').to_ascii_lowercase();
        if let Err(m) = check_dns_name(registry.split(':').next().unwrap_or_default()) {
            push(
                &format!("registry.pullThrough[{i}].registry"),
                format!("{:?}: {m} (a registry host such as quay.io)", p.registry),
            );
        } else if registry.contains(':') {
            push(
                &format!("registry.pullThrough[{i}].registry"),
                format!(
                    "{registry:?}: a repository path cannot hold ':' (mirror…/<registry>/…): \
                     name the host alone, the url carries the port"
                ),
            );
        } else if out.iter().any(|o| o.registry == registry) {
            push(
                &format!("registry.pullThrough[{i}].registry"),
                format!("{registry} is listed twice: keep one entry"),
            );
        }
        let url = p.url.trim_end_matches('/').to_string();
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() < 9 {
            push(
                &format!("registry.pullThrough[{i}].url"),
                format!(
                    "{:?}: give https://<host>[:port] (or http:// for a lab's own upstream)",
                    p.url
                ),
            );
        }
        out.push(PullThroughCfg {
            registry,
            url,
            ca_file: None,
        });
    }
    out
}

/// Why a name is not a DNS name a client can use (`registry.name`, a
/// pull-through's `registry` host).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum DnsNameError {
    /// Empty, or over 253 characters.
    #[error("not a DNS name (1 to 253 characters)")]
    Length,
    /// A label empty, over 63 characters, with a character other than
    /// letters, digits and `-`, or starting or ending with `-`.
    #[error("label {0:?} is not a DNS label (letters, digits, '-')")]
    Label(String),
}

/// Why `n` is not a DNS name a client can use.
fn check_dns_name(n: &str) -> Result<(), DnsNameError> {
    if n.is_empty() || n.len() > 253 {
        return Err(DnsNameError::Length);
    }
    for label in n.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return Err(DnsNameError::Label(label.into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(yaml: &str) -> Result<RegistryCfg, Vec<FieldError>> {
        let raw: RawRegistry = serde_saphyr::from_str(yaml).expect("yaml");
        let cx = Context {
            appliance_ip: Some("10.0.0.2".parse().expect("ip")),
            domain: "lab.example.com",
            base: Path::new("/"),
        };
        let mut errs = Vec::new();
        registry(Some(&raw), &cx, &mut errs).ok_or(errs)
    }

    #[test]
    fn defaults() {
        let r = build("storage: /var/lib/mirror").expect("valid");
        assert_eq!(r.listen, "10.0.0.2:5000".parse().expect("addr"));
        assert_eq!(r.name, "mirror.lab.example.com");
        assert!(!r.allow_delete);
        assert!(r.tls.is_none());
    }

    #[test]
    fn every_mistake_at_its_path() {
        let errs = build(
            "{storage: '', listen: 'nope:x', name: 'bad_name', htpasswdFile: /nonexistent/h, \
             pullThrough: [{registry: quay.io, url: ftp://x}, {registry: quay.io, url: https://q, caFile: /nonexistent/ca}, \
             {registry: 'lab:5000', url: 'http://lab:5000'}], \
             releaseImage: foo}",
        )
        .expect_err("invalid");
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        for p in [
            "registry.storage",
            "registry.listen",
            "registry.name",
            "registry.htpasswdFile",
            "registry.pullThrough[0].url",
            "registry.pullThrough[1].registry",
            "registry.pullThrough[1].caFile",
            "registry.pullThrough[2].registry",
            "registry.releaseImage",
        ] {
            assert!(paths.contains(&p), "{p} missing in {paths:?}");
        }
    }

    /// The texts after `registry.name: "<name>": `.
    #[test]
    fn a_bad_dns_name_says_which_rule() {
        assert_eq!(check_dns_name("mirror.lab"), Ok(()));
        assert_eq!(check_dns_name(""), Err(DnsNameError::Length));
        assert_eq!(
            check_dns_name("a.-b.c"),
            Err(DnsNameError::Label("-b".into()))
        );
        assert_eq!(
            DnsNameError::Length.to_string(),
            "not a DNS name (1 to 253 characters)"
        );
        assert_eq!(
            DnsNameError::Label("bad_name".into()).to_string(),
            "label \"bad_name\" is not a DNS label (letters, digits, '-')"
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_saphyr::from_str::<RawRegistry>("{storage: /x, allowdelete: true}").is_err());
    }
}
