//! Who may do what (issue #36): pushes need a user of `registry.
//! htpasswdFile` (bcrypt lines, as `htpasswd -B` writes them); pulls are
//! anonymous from the cluster's networks and the appliance itself and need
//! a user from anywhere else. A refusal is 401 with `WWW-Authenticate:
//! Basic`, answered at once.
//!
//! Invariants: passwords are never logged or kept; a verified
//! (user, SHA-256 of the password) pair is remembered so bcrypt runs once
//! per credential, not once per request (skopeo sends them on every one);
//! only `$2a$`, `$2b$` and `$2y$` hashes are accepted (plain, crypt and
//! MD5 lines are refused at load with their line number).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::Path;

use base64::Engine as _;

use crate::model::cluster::IpNet;
use crate::runtime::sync::LockExt as _;

/// Why an htpasswd file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HtpasswdError {
    #[error("{}: {err}", path.display())]
    Read {
        path: std::path::PathBuf,
        err: std::io::Error,
    },
    #[error("{} line {line}: not user:hash", path.display())]
    NotUserHash {
        path: std::path::PathBuf,
        line: usize,
    },
    #[error(
        "{} line {line}: user {user:?} has no bcrypt hash (make it with htpasswd -B)",
        path.display()
    )]
    NotBcrypt {
        path: std::path::PathBuf,
        line: usize,
        user: String,
    },
}

/// The users and their bcrypt hashes.
#[derive(Default)]
pub struct Users {
    hashes: HashMap<String, String>,
    /// (user, SHA-256 of the password) that verified.
    good: std::sync::Mutex<HashSet<(String, [u8; 32])>>,
}

impl Users {
    /// Read an htpasswd file; errors name the line.
    pub fn load(path: &Path) -> Result<Users, HtpasswdError> {
        let text = std::fs::read_to_string(path).map_err(|err| HtpasswdError::Read {
            path: path.to_path_buf(),
            err,
        })?;
        let mut hashes = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((user, hash)) = line.split_once(':') else {
                return Err(HtpasswdError::NotUserHash {
                    path: path.to_path_buf(),
                    line: i + 1,
                });
            };
            if !(hash.starts_with("$2a$") || hash.starts_with("$2b$") || hash.starts_with("$2y$")) {
                return Err(HtpasswdError::NotBcrypt {
                    path: path.to_path_buf(),
                    line: i + 1,
                    user: user.to_string(),
                });
            }
            hashes.insert(user.to_string(), hash.to_string());
        }
        Ok(Users {
            hashes,
            good: std::sync::Mutex::default(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Whether `user` has a line.
    pub fn has(&self, user: &str) -> bool {
        self.hashes.contains_key(user)
    }

    /// Whether an `Authorization` header value names a user with the right
    /// password (blocking: bcrypt).
    pub fn check(&self, authorization: &str) -> Option<String> {
        let (user, pass) = basic(authorization)?;
        let hash = self.hashes.get(&user)?;
        let sum: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, pass.as_bytes())
            .as_ref()
            .try_into()
            .ok()?;
        let key = (user.clone(), sum);
        if self.good.locked().contains(&key) {
            return Some(user);
        }
        if bcrypt::verify(&pass, hash).unwrap_or(false) {
            self.good.locked().insert(key);
            return Some(user);
        }
        None
    }
}

/// `Basic <base64(user:password)>` decoded.
fn basic(v: &str) -> Option<(String, String)> {
    let (scheme, b64) = v.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    let (u, p) = s.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// Clients that pull without credentials: the cluster's networks and the
/// appliance's own addresses.
pub struct Anonymous {
    pub networks: Vec<IpNet>,
    pub own: Vec<IpAddr>,
}

impl Anonymous {
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        ip.is_loopback() || self.own.contains(&ip) || self.networks.iter().any(|n| n.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcrypt_lines_and_cache() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("h");
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        std::fs::write(&p, format!("# users\nalice:{hash}\n")).unwrap();
        let u = Users::load(&p).unwrap();
        let hdr = |up: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(up)
            )
        };
        assert_eq!(u.check(&hdr("alice:s3cret")).as_deref(), Some("alice"));
        assert_eq!(u.check(&hdr("alice:s3cret")).as_deref(), Some("alice"));
        assert_eq!(u.check(&hdr("alice:wrong")), None);
        assert_eq!(u.check(&hdr("bob:s3cret")), None);
        assert_eq!(u.check("Bearer x"), None);
        std::fs::write(&p, "alice:{SHA}abc\n").unwrap();
        let e = Users::load(&p).err().unwrap().to_string();
        assert!(e.contains("line 1") && e.contains("htpasswd -B"), "{e}");
    }

    #[test]
    fn htpasswd_error_texts() {
        let path = std::path::PathBuf::from("/etc/h");
        let err = std::io::Error::from(std::io::ErrorKind::NotFound);
        let texts = [
            (
                HtpasswdError::Read {
                    path: path.clone(),
                    err,
                },
                "/etc/h: entity not found",
            ),
            (
                HtpasswdError::NotUserHash {
                    path: path.clone(),
                    line: 3,
                },
                "/etc/h line 3: not user:hash",
            ),
            (
                HtpasswdError::NotBcrypt {
                    path,
                    line: 1,
                    user: "alice".into(),
                },
                "/etc/h line 1: user \"alice\" has no bcrypt hash (make it with htpasswd -B)",
            ),
        ];
        for (e, text) in texts {
            assert_eq!(e.to_string(), text);
        }
    }
}
