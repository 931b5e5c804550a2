//! `preflight`'s check of `registry.releaseImage` (issue #36 item 6): the
//! release pullspec resolved by digest through the appliance's mirror as a
//! node resolves it — the source repository mapped to the mirror by the
//! same `imageDigestSources` `render mirror` prints
//! (`services/registry/sources.rs`), the registry's name looked up through
//! the appliance's DNS (the host's resolver when `dns:` is off), TLS
//! trusting only the appliance's CA (or `registry.tls`'s certificate), the
//! manifest by digest (for a manifest list, its linux/amd64 manifests, or
//! all of them when it has none), and every config and layer blob with a
//! `HEAD`. What is missing is named (repository and digest).
//!
//! It checks a running appliance (`serve` answers DNS and the registry),
//! so it runs from the `preflight` command only, not at `serve`'s start.
//! Only the release image itself is checked, not the component images its
//! payload names.
//!
//! Invariants: read-only (`GET` and `HEAD`); every network step bounded by
//! [`STEP`]; a manifest is used only when its bytes hash to the digest
//! asked for (as a node checks it); never a panic on a bad answer.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

mod problem;

use problem::{ConnectError, Problem, RequestError, ResolveError};

use super::{Finding, Severity};
use crate::model::catalogue::ServiceKind;
use crate::model::cluster::Cluster;
use crate::model::registry::RegistryCfg;
use crate::services::registry::manifest::{
    DOCKER_LIST, DOCKER_V2, MAX_MANIFEST, OCI_INDEX, OCI_MANIFEST,
};
use crate::services::registry::sources;

/// Each DNS query, connection, handshake and request gets this long.
const STEP: Duration = Duration::from_secs(10);
/// The most missing blobs named in the finding (the rest are counted).
const NAMED: usize = 20;

/// The `release` finding of `c` (none without `registry.releaseImage`).
pub async fn release_image(c: &Cluster) -> Vec<Finding> {
    let Some(r) = c.registry.as_ref() else {
        return Vec::new();
    };
    let Some(spec) = r.release_image.as_deref() else {
        return Vec::new();
    };
    let finding = |severity, problem: String, fix: &str| Finding {
        severity,
        check: "release",
        problem,
        fix: fix.to_string(),
    };
    match check(c, r, spec).await {
        Ok(ok) => vec![finding(Severity::Info, ok, "nothing to do")],
        Err(p) => vec![finding(Severity::Warn, p.to_string(), p.fix())],
    }
}

/// The OK line, or the problem.
async fn check(c: &Cluster, r: &RegistryCfg, spec: &str) -> Result<String, Problem> {
    let Some((repo, digest)) = spec.split_once('@') else {
        return Err(Problem::ByTag { spec: spec.into() });
    };
    let host = sources::pull_host(r);
    let mirrors = sources::mirrors_for(&sources::digest_sources(r), &host, repo);
    if mirrors.is_empty() {
        return Err(Problem::NotMirrored { repo: repo.into() });
    }
    let ip = resolve(c, &r.name)
        .await
        .map_err(|why| Problem::Unresolved {
            name: r.name.clone(),
            why,
        })?;
    // The one trust anchor a node is given (additionalTrustBundle).
    let anchor = match &r.tls {
        Some(t) => t.cert_file.clone(),
        None => crate::runtime::certs::ca::paths(c).0,
    };
    let mut conn = Conn::open(r, ip, &anchor)
        .await
        .map_err(|why| Problem::Unreachable {
            name: r.name.clone(),
            port: r.listen.port(),
            ip,
            why,
        })?;
    let mut missing = Vec::new();
    let mut blobs = 0;
    for (i, mirror) in mirrors.iter().enumerate() {
        match conn.manifest(mirror, digest).await? {
            Some(m) => {
                let last = i + 1 == mirrors.len();
                let (n, gone) = conn.image(mirror, &m, digest).await?;
                if gone.is_empty() || last {
                    blobs = n;
                    missing = gone;
                    break;
                }
            }
            None if i + 1 == mirrors.len() => {
                missing.push(format!("{mirror}@{digest} (the release manifest)"));
            }
            None => {}
        }
    }
    if missing.is_empty() {
        return Ok(format!(
            "registry.releaseImage {spec} resolves through {} ({ip}) by digest: manifest and {blobs} blobs present",
            r.name
        ));
    }
    let more = missing.len().saturating_sub(NAMED);
    let mut named = missing
        .into_iter()
        .take(NAMED)
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        named.push_str(&format!(" and {more} more"));
    }
    Err(Problem::Missing {
        spec: spec.into(),
        host,
        named,
    })
}

/// `name`'s first IPv4 address from the appliance's DNS (the host's
/// resolver when the cluster has no `dns:` service).
async fn resolve(c: &Cluster, name: &str) -> Result<IpAddr, ResolveError> {
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::{Name, RData, RecordType};
    let Some(server) = c
        .listen_addrs(ServiceKind::Dns)
        .into_iter()
        .next()
        .filter(|_| c.dns.enabled)
    else {
        let found = tokio::time::timeout(STEP, tokio::net::lookup_host((name, 0)))
            .await
            .map_err(|_| ResolveError::Timeout)?
            .map_err(ResolveError::Lookup)?
            .next();
        return found.map(|a| a.ip()).ok_or(ResolveError::NoAddress);
    };
    let server = match server.ip() {
        ip if ip.is_unspecified() => SocketAddr::new(c.network.appliance_ip.into(), server.port()),
        _ => server,
    };
    let qname = Name::from_ascii(format!("{name}.")).map_err(ResolveError::Query)?;
    let mut q = Message::query();
    q.metadata.recursion_desired = true;
    q.add_query(Query::query(qname, RecordType::A));
    let wire = q.to_vec().map_err(ResolveError::Query)?;
    let any: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse().unwrap_or(server)
    } else {
        "[::]:0".parse().unwrap_or(server)
    };
    let sock = tokio::net::UdpSocket::bind(any)
        .await
        .map_err(ResolveError::Socket)?;
    let ask = async {
        sock.send_to(&wire, server).await?;
        let mut buf = vec![0u8; 4096];
        loop {
            let (n, from) = sock.recv_from(&mut buf).await?;
            match Message::from_vec(&buf[..n]) {
                Ok(m) if from == server && m.metadata.id == q.metadata.id => return Ok(m),
                _ => continue,
            }
        }
    };
    let answer = tokio::time::timeout(STEP, ask)
        .await
        .map_err(|_| ResolveError::NoAnswer { server })?
        .map_err(|err| ResolveError::Dns { server, err })?;
    answer
        .answers
        .iter()
        .find_map(|rec| match &rec.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        })
        .ok_or(ResolveError::NoARecord { server })
}

/// One keep-alive HTTP/1.1 connection to the registry, TLS verified
/// against the one trust anchor a node is given.
struct Conn {
    send: SendRequest<Empty<Bytes>>,
    authority: String,
}

impl Conn {
    async fn open(r: &RegistryCfg, ip: IpAddr, anchor: &Path) -> Result<Conn, ConnectError> {
        let mut roots = rustls::RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(anchor).map_err(|err| ConnectError::Anchor {
            path: anchor.to_path_buf(),
            err,
        })?;
        for cert in certs.flatten() {
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(ConnectError::NoCertificate(anchor.to_path_buf()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(ConnectError::Config)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server = ServerName::try_from(r.name.clone()).map_err(ConnectError::ServerName)?;
        let addr = SocketAddr::new(ip, r.listen.port());
        let connect = async {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            tokio_rustls::TlsConnector::from(Arc::new(cfg))
                .connect(server, tcp)
                .await
        };
        let tls = tokio::time::timeout(STEP, connect)
            .await
            .map_err(|_| ConnectError::Timeout)?
            .map_err(|err| ConnectError::Tls {
                anchor: anchor.to_path_buf(),
                err,
            })?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(ConnectError::Http)?;
        tokio::spawn(conn);
        Ok(Conn {
            send,
            authority: sources::pull_host(r),
        })
    }

    /// `method path`: status and body (at most a manifest's size).
    async fn call(&mut self, method: &'static str, path: &str) -> Result<(u16, Bytes), Problem> {
        let fail = |why| Problem::Request {
            authority: self.authority.clone(),
            method,
            path: path.into(),
            why,
        };
        let accept = [OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_V2].join(", ");
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::ACCEPT, accept)
            .body(Empty::new())
            .map_err(|e| fail(RequestError::Build(e)))?;
        let call = async {
            // The previous answer's end must be read before the next request.
            self.send.ready().await.map_err(RequestError::Http)?;
            let resp = self
                .send
                .send_request(req)
                .await
                .map_err(RequestError::Http)?;
            let status = resp.status().as_u16();
            let body = Limited::new(resp.into_body(), MAX_MANIFEST)
                .collect()
                .await
                .map_err(RequestError::Body)?;
            Ok::<_, RequestError>((status, body.to_bytes()))
        };
        tokio::time::timeout(STEP, call)
            .await
            .map_err(|_| fail(RequestError::Timeout))?
            .map_err(fail)
    }

    /// The manifest `digest` of `repo` when it is there and hashes to it.
    async fn manifest(&mut self, repo: &str, digest: &str) -> Result<Option<Value>, Problem> {
        let (status, body) = self
            .call("GET", &format!("/v2/{repo}/manifests/{digest}"))
            .await?;
        if status != 200 || sha256(&body) != digest {
            return Ok(None);
        }
        Ok(serde_json::from_slice(&body).ok())
    }

    /// Blobs checked and what is missing of the image `m` (`digest`) in
    /// `repo`: a list's platform manifests, then every config and layer.
    async fn image(
        &mut self,
        repo: &str,
        m: &Value,
        digest: &str,
    ) -> Result<(usize, Vec<String>), Problem> {
        let mut missing = Vec::new();
        let mut images = Vec::new();
        match m.get("manifests").and_then(Value::as_array) {
            Some(list) => {
                for d in platform_manifests(list) {
                    match self.manifest(repo, &d).await? {
                        Some(img) => images.push((d, img)),
                        None => missing.push(format!("{repo}@{d} (a platform manifest)")),
                    }
                }
            }
            None => images.push((digest.to_string(), m.clone())),
        }
        let mut checked = 0;
        for (of, img) in &images {
            for blob in blobs_of(img) {
                checked += 1;
                let (status, _) = self
                    .call("HEAD", &format!("/v2/{repo}/blobs/{blob}"))
                    .await?;
                if status != 200 {
                    missing.push(format!("{repo}@{blob} (blob of {of})"));
                }
            }
        }
        Ok((checked, missing))
    }
}

/// A list's linux/amd64 manifests (every one when it names none).
fn platform_manifests(list: &[Value]) -> Vec<String> {
    let digest = |e: &Value| e.get("digest").and_then(Value::as_str).map(str::to_string);
    let amd64: Vec<String> = list
        .iter()
        .filter(|e| {
            let p = e.get("platform");
            let field = |k: &str| p.and_then(|p| p.get(k)).and_then(Value::as_str);
            field("os") == Some("linux") && field("architecture") == Some("amd64")
        })
        .filter_map(digest)
        .collect();
    if amd64.is_empty() {
        list.iter().filter_map(digest).collect()
    } else {
        amd64
    }
}

/// The config and layer digests of an image manifest (foreign layers, with
/// `urls`, are not in any registry and are left out).
fn blobs_of(m: &Value) -> Vec<String> {
    let config = m.pointer("/config/digest").and_then(Value::as_str);
    let layers = m
        .get("layers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|l| l.get("urls").is_none())
        .filter_map(|l| l.get("digest").and_then(Value::as_str));
    config
        .into_iter()
        .chain(layers)
        .map(str::to_string)
        .collect()
}

fn sha256(b: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, b);
    let hex: String = d.as_ref().iter().map(|x| format!("{x:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lists_amd64_manifests_and_an_images_blobs() {
        let list: Vec<Value> = serde_json::from_str(
            r#"[{"digest":"sha256:a","platform":{"os":"linux","architecture":"arm64"}},
                {"digest":"sha256:b","platform":{"os":"linux","architecture":"amd64"}}]"#,
        )
        .unwrap();
        assert_eq!(platform_manifests(&list), ["sha256:b"]);
        assert_eq!(platform_manifests(&list[..1]), ["sha256:a"]);
        let m: Value = serde_json::from_str(
            r#"{"config":{"digest":"sha256:c"},"layers":[{"digest":"sha256:l1"},
                {"digest":"sha256:f","urls":["https://x"]},{"digest":"sha256:l2"}]}"#,
        )
        .unwrap();
        assert_eq!(blobs_of(&m), ["sha256:c", "sha256:l1", "sha256:l2"]);
    }

    /// A request's failure is the reason hyper gives (the `Http`
    /// variant's error needs a live connection to make; it prints the same
    /// way).
    #[tokio::test]
    async fn a_failed_request_says_hypers_reason() {
        let body = http_body_util::Full::new(Bytes::from_static(b"12345"));
        let err = Limited::new(body, 4).collect().await.unwrap_err();
        assert_eq!(RequestError::Body(err).to_string(), "length limit exceeded");
    }
}
