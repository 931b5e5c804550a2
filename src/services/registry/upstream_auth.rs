//! What the pull-through cache's upstream client (`upstream.rs`)
//! authenticates with and parses: the OpenShift pull secret
//! (`registry.pullSecretFile`, credentials by registry host[:port]), a
//! `WWW-Authenticate` challenge (Bearer or Basic) and a token realm's
//! answer.
//!
//! Invariant: a password never leaves [`Creds`] in text: `Debug` redacts
//! it, and only [`Creds::basic`] hands it on (as the `Authorization`
//! header the upstream asked for).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;

/// A token without `expires_in` is kept this long (the Docker spec's 60 s).
const TOKEN_DEFAULT_TTL: u64 = 60;

/// Why a pull secret was refused (no variant carries a credential).
#[derive(Debug, thiserror::Error)]
pub enum PullSecretError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {problem}", path.display())]
    Bad {
        path: PathBuf,
        problem: PullSecretProblem,
    },
}

/// What is wrong inside a pull secret (`host` is an `auths` key).
#[derive(Debug, thiserror::Error)]
pub enum PullSecretProblem {
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("no \"auths\" object (the OpenShift pull-secret format)")]
    NoAuths,
    #[error("auths.{host}.auth is not base64")]
    NotBase64 { host: String },
    #[error("auths.{host}.auth is not user:password")]
    NotUserPassword { host: String },
}

/// A user and password from the pull secret (never shown).
#[derive(Clone, PartialEq, Eq)]
pub struct Creds {
    user: String,
    pass: String,
}

impl std::fmt::Debug for Creds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Creds(<redacted>)")
    }
}

impl Creds {
    pub(super) fn basic(&self) -> String {
        let token = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", self.user, self.pass));
        format!("Basic {token}")
    }
}

/// The OpenShift pull secret: credentials by registry host[:port].
#[derive(Debug, Default)]
pub struct PullSecret(HashMap<String, Creds>);

impl PullSecret {
    pub fn load(path: &Path) -> Result<PullSecret, PullSecretError> {
        let bytes = std::fs::read(path).map_err(|source| PullSecretError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        PullSecret::parse(&bytes).map_err(|problem| PullSecretError::Bad {
            path: path.to_path_buf(),
            problem,
        })
    }

    /// `{"auths":{"host":{"auth":"base64(user:pass)"}}}` (or `username`
    /// and `password` in an entry, as Docker's config.json may have).
    pub fn parse(bytes: &[u8]) -> Result<PullSecret, PullSecretProblem> {
        let v: serde_json::Value =
            serde_json::from_slice(bytes).map_err(PullSecretProblem::NotJson)?;
        let auths = v
            .get("auths")
            .and_then(serde_json::Value::as_object)
            .ok_or(PullSecretProblem::NoAuths)?;
        let mut out = HashMap::new();
        for (host, entry) in auths {
            let creds = if let Some(a) = entry.get("auth").and_then(serde_json::Value::as_str) {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(a.trim())
                    .map_err(|_| PullSecretProblem::NotBase64 { host: host.clone() })?;
                let not_user_password =
                    || PullSecretProblem::NotUserPassword { host: host.clone() };
                let text = String::from_utf8(raw).map_err(|_| not_user_password())?;
                let (u, p) = text.split_once(':').ok_or_else(not_user_password)?;
                Creds {
                    user: u.to_string(),
                    pass: p.to_string(),
                }
            } else {
                let get = |k: &str| entry.get(k).and_then(serde_json::Value::as_str);
                match (get("username"), get("password")) {
                    (Some(u), Some(p)) => Creds {
                        user: u.to_string(),
                        pass: p.to_string(),
                    },
                    _ => continue,
                }
            };
            out.insert(host.trim_end_matches('/').to_ascii_lowercase(), creds);
        }
        Ok(PullSecret(out))
    }

    /// The first of `keys` the secret has credentials for.
    pub fn find(&self, keys: &[String]) -> Option<Creds> {
        keys.iter().find_map(|k| self.0.get(k).cloned())
    }
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

/// Parse a `WWW-Authenticate` value (RFC 7235 auth-params, quoted or not).
pub(super) fn parse_challenge(v: &str) -> Option<Challenge> {
    let v = v.trim();
    let (scheme, rest) = v.split_once(char::is_whitespace).unwrap_or((v, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let params = auth_params(rest);
    let get = |k: &str| {
        params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
    };
    Some(Challenge::Bearer {
        realm: get("realm")?,
        service: get("service"),
        scope: get("scope"),
    })
}

/// `k=v, k="v, with comma"` pairs.
fn auth_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some((k, after)) = rest.split_once('=') else {
            break;
        };
        let key = k.trim().trim_start_matches(',').trim().to_string();
        let after = after.trim_start();
        let (value, tail) = if let Some(q) = after.strip_prefix('"') {
            let mut val = String::new();
            let mut chars = q.char_indices();
            let mut end = q.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            val.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => val.push(c),
                }
            }
            (val, &q[end.min(q.len())..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        out.push((key, value));
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

/// A token answer's token and lifetime (seconds).
pub(super) fn parse_token(body: &[u8]) -> Option<(String, u64)> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let token = v
        .get("token")
        .or_else(|| v.get("access_token"))
        .and_then(serde_json::Value::as_str)
        .filter(|t| !t.is_empty())?;
    let ttl = v
        .get("expires_in")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(TOKEN_DEFAULT_TTL);
    Some((token.to_string(), ttl))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges() {
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull".into()),
            })
        );
        assert_eq!(
            parse_challenge(r#"bearer realm=https://q/t, service="a,b""#),
            Some(Challenge::Bearer {
                realm: "https://q/t".into(),
                service: Some("a,b".into()),
                scope: None,
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge("Bearer service=x"), None);
        assert_eq!(parse_challenge("Negotiate"), None);
        assert_eq!(parse_challenge(""), None);
    }

    #[test]
    fn tokens() {
        assert_eq!(
            parse_token(br#"{"token":"abc","expires_in":300}"#),
            Some(("abc".into(), 300))
        );
        assert_eq!(
            parse_token(br#"{"access_token":"x"}"#),
            Some(("x".into(), TOKEN_DEFAULT_TTL))
        );
        assert_eq!(parse_token(br#"{"token":""}"#), None);
        assert_eq!(parse_token(b"nope"), None);
    }

    #[test]
    fn pull_secret_lookup() {
        let auth = base64::engine::general_purpose::STANDARD.encode("u:p:w");
        let s = PullSecret::parse(
            format!(r#"{{"auths":{{"quay.io":{{"auth":"{auth}","email":"x"}},"h:5001":{{"username":"a","password":"b"}},"n":{{}}}}}}"#)
                .as_bytes(),
        )
        .expect("valid");
        let c = s.find(&["quay.io".into()]).expect("quay");
        assert_eq!((c.user.as_str(), c.pass.as_str()), ("u", "p:w"));
        assert!(s.find(&["nope".into(), "h:5001".into()]).is_some());
        assert!(s.find(&["n".into()]).is_none());
        assert!(!format!("{c:?}").contains('p'));
        assert!(PullSecret::parse(b"{}").is_err());
        assert!(PullSecret::parse(br#"{"auths":{"q":{"auth":"!!"}}}"#).is_err());
    }

    #[test]
    fn each_refusal_reads_as_before_and_holds_no_secret() {
        let text = |b: &[u8]| PullSecret::parse(b).err().map(|e| e.to_string());
        assert_eq!(
            text(b"{").as_deref(),
            Some("not JSON: EOF while parsing an object at line 1 column 1")
        );
        assert_eq!(
            text(b"{}").as_deref(),
            Some("no \"auths\" object (the OpenShift pull-secret format)")
        );
        assert_eq!(
            text(br#"{"auths":{"q":{"auth":"!!sekrit"}}}"#).as_deref(),
            Some("auths.q.auth is not base64")
        );
        let no_colon = base64::engine::general_purpose::STANDARD.encode("sekrit");
        let bad = format!(r#"{{"auths":{{"q":{{"auth":"{no_colon}"}}}}}}"#);
        assert_eq!(
            text(bad.as_bytes()).as_deref(),
            Some("auths.q.auth is not user:password")
        );
        let not_utf8 = base64::engine::general_purpose::STANDARD.encode([0xff, b':', b'x']);
        let bad = format!(r#"{{"auths":{{"q":{{"auth":"{not_utf8}"}}}}}}"#);
        assert_eq!(
            text(bad.as_bytes()).as_deref(),
            Some("auths.q.auth is not user:password")
        );
        let gone = Path::new("/nonexistent/pull-secret.json");
        let e = PullSecret::load(gone).expect_err("no file").to_string();
        assert!(
            e.starts_with("/nonexistent/pull-secret.json: No such file"),
            "{e}"
        );
        let e = PullSecretError::Bad {
            path: PathBuf::from("/p.json"),
            problem: PullSecretProblem::NoAuths,
        };
        assert_eq!(
            e.to_string(),
            "/p.json: no \"auths\" object (the OpenShift pull-secret format)"
        );
    }
}
