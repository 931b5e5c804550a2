//! `nodes[].bmc`: a bare-metal node's Redfish BMC (issue #13). Its
//! validation (the raw type: `raw/bmc.rs`); `validate/nodes.rs` calls
//! [`build`] per node.
//!
//! Rules (all reported at once, each with its field path):
//! - `redfish` is `https://host[:port]/redfish/v1/Systems/<id>` (`http://`
//!   is accepted for labs and emulators), no user info (credentials live in
//!   files), no query or fragment;
//! - `usernameFile` and `passwordFile` are readable regular files with a
//!   non-empty first line; the password file is not readable by group or
//!   others (chmod 600);
//! - `https://` needs exactly one of `insecure: true` and `caFile` (the
//!   appliance carries no system trust store and BMCs mostly present
//!   self-signed certificates); `http://` takes neither.

use std::path::Path;

use super::resolve;
use crate::config::FieldError;
use crate::config::raw::{RawBmc, RawMedia};
use crate::model::bmc::{BmcCfg, BmcMedia, BmcTls};

impl From<RawMedia> for BmcMedia {
    fn from(m: RawMedia) -> BmcMedia {
        match m {
            RawMedia::Auto => BmcMedia::Auto,
            RawMedia::Http => BmcMedia::Http,
            RawMedia::Https => BmcMedia::Https,
        }
    }
}

/// Why `redfish` is not a Redfish system URL. Each variant carries the URL
/// as given, except user info (`user:password@`), which is never echoed.
#[derive(Debug, thiserror::Error)]
pub(super) enum RedfishUrlError {
    /// Not a URL at all (`reason`: hyper's).
    #[error("{url:?} is not a URL ({reason})")]
    NotUrl {
        url: String,
        reason: hyper::http::uri::InvalidUri,
    },
    /// A scheme other than `https` or `http`.
    #[error("{0:?} must start with https:// (or http:// for labs and emulators)")]
    Scheme(String),
    /// No host (or an empty one: `https://[]/…`).
    #[error("{0:?} has no host")]
    NoHost(String),
    /// `user[:password]@host`: the credentials belong in files.
    #[error("{0:?} carries user info; put the credentials in usernameFile and passwordFile")]
    UserInfo(String),
    /// `?…` or `#…`.
    #[error("{0:?} must not have a query or fragment")]
    QueryOrFragment(String),
    /// The path is not `/redfish/v1/Systems/<id>`.
    #[error("{0:?} must name one system: https://<bmc>/redfish/v1/Systems/<id>")]
    NotOneSystem(String),
}

/// `url` with any user info in its authority replaced by `***` (the
/// password must not reach an error message, the log or `/status`).
fn without_user_info(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_string(),
    }
}

/// The parts of a valid Redfish system URL: origin, host, port, path.
pub(super) fn parse_system_url(
    url: &str,
) -> Result<(String, String, u16, String, bool), RedfishUrlError> {
    let shown = || without_user_info(url);
    let uri: hyper::Uri = url.parse().map_err(|e| RedfishUrlError::NotUrl {
        url: shown(),
        reason: e,
    })?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(RedfishUrlError::Scheme(shown())),
    };
    let auth = uri
        .authority()
        .ok_or_else(|| RedfishUrlError::NoHost(shown()))?;
    if auth.as_str().contains('@') {
        return Err(RedfishUrlError::UserInfo(shown()));
    }
    if uri.query().is_some() || url.contains('#') {
        return Err(RedfishUrlError::QueryOrFragment(shown()));
    }
    let path = uri.path();
    let id = path.strip_prefix("/redfish/v1/Systems/").unwrap_or("");
    if id.is_empty() || id.contains('/') {
        return Err(RedfishUrlError::NotOneSystem(shown()));
    }
    let host = auth.host().trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(RedfishUrlError::NoHost(shown()));
    }
    let port = auth.port_u16().unwrap_or(if https { 443 } else { 80 });
    let origin = format!(
        "{}://{}",
        if https { "https" } else { "http" },
        auth.as_str()
    );
    Ok((origin, host.to_string(), port, path.to_string(), https))
}

/// Why `path` cannot hold a credential, if it cannot; `private` also
/// rejects group/other read access.
fn check_credential_file(
    path: &Path,
    private: bool,
) -> Result<(), crate::config::secret::SecretFileError> {
    crate::config::secret::check_secret_file(path, private)?;
    crate::config::secret::read_first_line(path).map(|_| ())
}

/// Validate one `bmc` mapping at field path `at` (`nodes[i].bmc`).
pub(crate) fn build(
    raw: &RawBmc,
    base: &Path,
    at: &str,
    errs: &mut Vec<FieldError>,
) -> Option<BmcCfg> {
    let before = errs.len();
    let mut push = |field: &str, message: String| {
        errs.push(FieldError {
            path: format!("{at}.{field}"),
            message,
        })
    };
    let url = raw.redfish.trim();
    let parts = parse_system_url(url)
        .map_err(|err| push("redfish", err.to_string()))
        .ok();
    let user = resolve(base, &raw.username_file);
    if let Err(m) = check_credential_file(&user, false) {
        push("usernameFile", m.to_string());
    }
    let pass = resolve(base, &raw.password_file);
    if let Err(m) = check_credential_file(&pass, true) {
        push("passwordFile", m.to_string());
    }
    let ca = raw.ca_file.as_deref().map(|f| resolve(base, f));
    if let Some(ca) = &ca
        && let Err(e) = std::fs::File::open(ca)
    {
        push("caFile", format!("{}: {e}", ca.display()));
    }
    let tls = match (parts.as_ref().map(|p| p.4), raw.insecure, ca) {
        (None, _, _) => None,
        (Some(false), false, None) => Some(BmcTls::Plain),
        (Some(false), _, _) => {
            push(
                if raw.insecure { "insecure" } else { "caFile" },
                "only applies to an https:// BMC URL".into(),
            );
            None
        }
        (Some(true), true, Some(_)) => {
            push(
                "caFile",
                "set either insecure: true or caFile, not both".into(),
            );
            None
        }
        (Some(true), true, None) => Some(BmcTls::Insecure),
        (Some(true), false, Some(ca)) => Some(BmcTls::CaFile(ca)),
        (Some(true), false, None) => {
            push(
                "caFile",
                "an https:// BMC needs caFile (the CA its certificate chains to) or insecure: true"
                    .into(),
            );
            None
        }
    };
    let (origin, host, port, path, _) = parts?;
    if errs.len() != before {
        return None;
    }
    Some(BmcCfg {
        url: url.to_string(),
        origin,
        host,
        port,
        path,
        username_file: user,
        password_file: pass,
        tls: tls?,
        start_on_serve: raw.start_on_serve,
        media: raw.media.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn raw(url: &str) -> RawBmc {
        RawBmc {
            redfish: url.into(),
            username_file: "user".into(),
            password_file: "pass".into(),
            insecure: false,
            ca_file: None,
            start_on_serve: false,
            media: RawMedia::Auto,
        }
    }

    fn dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("user"), "admin\n").unwrap();
        std::fs::write(d.path().join("pass"), "secret\n").unwrap();
        std::fs::set_permissions(
            d.path().join("pass"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        std::fs::write(d.path().join("ca.pem"), "x").unwrap();
        d
    }

    fn errors(r: &RawBmc, base: &Path) -> Vec<String> {
        let mut e = Vec::new();
        let got = build(r, base, "nodes[0].bmc", &mut e);
        assert_eq!(got.is_none(), !e.is_empty(), "{e:?}");
        e.iter()
            .map(|f| format!("{}: {}", f.path, f.message))
            .collect()
    }

    #[test]
    fn accepts_http_and_https_forms() {
        let d = dir();
        let mut e = Vec::new();
        let c = build(
            &raw("http://127.0.0.1:8000/redfish/v1/Systems/node1"),
            d.path(),
            "b",
            &mut e,
        )
        .unwrap();
        assert_eq!(c.origin, "http://127.0.0.1:8000");
        assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 8000));
        assert_eq!(c.path, "/redfish/v1/Systems/node1");
        assert_eq!(c.tls, BmcTls::Plain);
        let mut r = raw("https://[fd00::5]/redfish/v1/Systems/1");
        r.insecure = true;
        let c = build(&r, d.path(), "b", &mut e).unwrap();
        assert_eq!((c.host.as_str(), c.port), ("fd00::5", 443));
        assert_eq!(c.tls, BmcTls::Insecure);
        let mut r = raw("https://bmc.lab/redfish/v1/Systems/1");
        r.ca_file = Some("ca.pem".into());
        let c = build(&r, d.path(), "b", &mut e).unwrap();
        assert_eq!(c.tls, BmcTls::CaFile(d.path().join("ca.pem")));
        assert!(e.is_empty(), "{e:?}");
    }

    /// Each text the `redfish` field error shows; user info is never
    /// echoed (it may hold the BMC's password).
    #[test]
    fn each_redfish_url_mistake_says_the_fix() {
        let text = |url: &str| parse_system_url(url).unwrap_err().to_string();
        let cases = [
            (
                "not a url",
                "\"not a url\" is not a URL (invalid uri character)",
            ),
            (
                "ftp://h/redfish/v1/Systems/1",
                "\"ftp://h/redfish/v1/Systems/1\" must start with https:// (or http:// for labs and emulators)",
            ),
            (
                "http://[]/redfish/v1/Systems/1",
                "\"http://[]/redfish/v1/Systems/1\" has no host",
            ),
            (
                "https://root:calvin@h/redfish/v1/Systems/1",
                "\"https://***@h/redfish/v1/Systems/1\" carries user info; put the credentials in usernameFile and passwordFile",
            ),
            (
                "http://h/redfish/v1/Systems/1?x=1",
                "\"http://h/redfish/v1/Systems/1?x=1\" must not have a query or fragment",
            ),
            (
                "http://h/redfish/v1/Systems/",
                "\"http://h/redfish/v1/Systems/\" must name one system: https://<bmc>/redfish/v1/Systems/<id>",
            ),
        ];
        for (url, want) in cases {
            assert_eq!(text(url), want, "{url}");
        }
        assert_eq!(
            RedfishUrlError::NoHost("http:///x".into()).to_string(),
            "\"http:///x\" has no host"
        );
        assert_eq!(
            without_user_info("https://u:p@w@h:443/redfish?a@b"),
            "https://***@h:443/redfish?a@b"
        );
        assert_eq!(without_user_info("not a url"), "not a url");
    }

    #[test]
    fn rejects_each_problem_with_its_path() {
        let d = dir();
        let b = d.path();
        for (url, want) in [
            ("ftp://h/redfish/v1/Systems/1", "must start with https://"),
            ("https://u:p@h/redfish/v1/Systems/1", "user info"),
            ("http://h/redfish/v1/Systems/", "must name one system"),
            ("http://h/redfish/v1/Systems/1/Bios", "must name one system"),
            ("http://h/redfish/v1/Systems/1?x=1", "query"),
            ("not a url", "not a URL"),
        ] {
            let e = errors(&raw(url), b);
            assert!(
                e.iter()
                    .any(|m| m.starts_with("nodes[0].bmc.redfish: ") && m.contains(want)),
                "{url}: {e:?}"
            );
        }
        let e = errors(&raw("https://h/redfish/v1/Systems/1"), b);
        assert!(
            e[0].contains("caFile") && e[0].contains("insecure: true"),
            "{e:?}"
        );
        let mut r = raw("https://h/redfish/v1/Systems/1");
        r.insecure = true;
        r.ca_file = Some("ca.pem".into());
        assert!(errors(&r, b)[0].contains("not both"));
        let mut r = raw("http://h/redfish/v1/Systems/1");
        r.insecure = true;
        assert!(errors(&r, b)[0].contains("nodes[0].bmc.insecure: only applies to an https://"));
        std::fs::set_permissions(b.join("pass"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut r = raw("http://h/redfish/v1/Systems/1");
        r.username_file = "missing".into();
        r.ca_file = Some("nope.pem".into());
        let e = errors(&r, b);
        assert_eq!(e.len(), 4, "all at once: {e:?}");
        assert!(e[0].starts_with("nodes[0].bmc.usernameFile: "), "{e:?}");
        assert!(
            e[1].contains("passwordFile") && e[1].contains("chmod 600"),
            "{e:?}"
        );
        assert!(e[2].starts_with("nodes[0].bmc.caFile: "), "{e:?}");
    }
}
