//! The approver's kubeconfig: the current context's server, CA, and
//! credentials (client certificate or bearer token), as a rustls client
//! configuration (ring) and an `Authorization` header.
//!
//! Invariants: only `https` servers; the server is verified against the
//! kubeconfig's CA (`insecure-skip-tls-verify` is refused); a token is
//! never logged (the [`Kubeconfig`] `Debug` redacts it). Paths inside the
//! file are relative to the file's directory, as kubectl reads them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use base64::Engine as _;
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    item: T,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct RawCluster {
    server: String,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    tls_server_name: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct RawUser {
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(alias = "tokenFile")]
    token_file: Option<String>,
}

#[derive(Deserialize)]
struct RawContext {
    cluster: String,
    user: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawKubeconfig {
    #[serde(default)]
    clusters: Vec<Named<RawCluster>>,
    #[serde(default)]
    users: Vec<Named<RawUser>>,
    #[serde(default)]
    contexts: Vec<Named<RawContext>>,
    #[serde(default)]
    current_context: String,
}

/// What the client needs to reach the API server.
pub struct Kubeconfig {
    /// `host:port` of the server.
    pub authority: String,
    /// The TLS name the server's certificate must carry.
    pub server_name: String,
    pub tls: Arc<ClientConfig>,
    /// `Bearer <token>` when the user has a token.
    pub authorization: Option<String>,
}

impl std::fmt::Debug for Kubeconfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubeconfig")
            .field("authority", &self.authority)
            .field("server_name", &self.server_name)
            .field("token", &self.authorization.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The bytes of `data` (base64) or of the file `path` (relative to `dir`).
fn material(
    dir: &Path,
    data: Option<&String>,
    path: Option<&String>,
    what: &str,
) -> anyhow::Result<Option<Vec<u8>>> {
    if let Some(d) = data {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .with_context(|| format!("{what}-data is not base64"))?;
        return Ok(Some(bytes));
    }
    let Some(p) = path else { return Ok(None) };
    let full: PathBuf = dir.join(p);
    std::fs::read(&full)
        .map(Some)
        .with_context(|| format!("{what} {}", full.display()))
}

/// Read and check the kubeconfig at `path`.
pub fn load(path: &Path) -> anyhow::Result<Kubeconfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("kubeconfig {}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse(&text, dir).with_context(|| format!("kubeconfig {}", path.display()))
}

/// Parse kubeconfig `text` whose relative paths are under `dir`.
pub fn parse(text: &str, dir: &Path) -> anyhow::Result<Kubeconfig> {
    let raw: RawKubeconfig = serde_saphyr::from_str(text).context("not a kubeconfig")?;
    let (cluster, user) = current(&raw)?;
    if cluster.insecure_skip_tls_verify {
        bail!("insecure-skip-tls-verify is refused: give the cluster's certificate-authority");
    }
    let (authority, host) = authority(&cluster.server)?;
    let server_name = cluster.tls_server_name.clone().unwrap_or(host);
    let tls = client_config(dir, cluster, user)?;
    let token = token(dir, user)?;
    Ok(Kubeconfig {
        authority,
        server_name,
        tls: Arc::new(tls),
        authorization: token
            .filter(|t| !t.is_empty())
            .map(|t| format!("Bearer {t}")),
    })
}

/// The cluster and user of the current context (of the only context when
/// `current-context` names none).
fn current(raw: &RawKubeconfig) -> anyhow::Result<(&RawCluster, &RawUser)> {
    let ctx = match raw.contexts.iter().find(|c| c.name == raw.current_context) {
        Some(c) => &c.item,
        None if raw.contexts.len() == 1 => &raw.contexts[0].item,
        None => bail!(
            "current-context {:?} is not among its contexts",
            raw.current_context
        ),
    };
    let cluster = raw
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .map(|c| &c.item)
        .with_context(|| format!("no cluster {:?}", ctx.cluster))?;
    let user = raw
        .users
        .iter()
        .find(|u| u.name == ctx.user)
        .map(|u| &u.item)
        .with_context(|| format!("no user {:?}", ctx.user))?;
    Ok((cluster, user))
}

/// `host:port` of an `https://host[:port]` server (port 443 by default)
/// and the bare host (no IPv6 brackets).
fn authority(server: &str) -> anyhow::Result<(String, String)> {
    let authority = server
        .strip_prefix("https://")
        .map(|s| s.trim_end_matches('/'))
        .filter(|s| !s.is_empty() && !s.contains('/'))
        .with_context(|| format!("server {server:?} is not https://host[:port]"))?;
    let authority = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:443")
    };
    let host = authority
        .rsplit_once(':')
        .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']'))
        .unwrap_or_default()
        .to_string();
    Ok((authority, host))
}

/// The rustls client (ring) trusting the cluster's CA only, with the
/// user's client certificate when it has one.
fn client_config(dir: &Path, cluster: &RawCluster, user: &RawUser) -> anyhow::Result<ClientConfig> {
    let ca = material(
        dir,
        cluster.certificate_authority_data.as_ref(),
        cluster.certificate_authority.as_ref(),
        "certificate-authority",
    )?
    .context("the cluster has no certificate-authority")?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&ca) {
        roots
            .add(c.context("certificate-authority: bad PEM")?)
            .context("certificate-authority: bad certificate")?;
    }
    if roots.is_empty() {
        bail!("certificate-authority holds no certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots);
    let cert = material(
        dir,
        user.client_certificate_data.as_ref(),
        user.client_certificate.as_ref(),
        "client-certificate",
    )?;
    let key = material(
        dir,
        user.client_key_data.as_ref(),
        user.client_key.as_ref(),
        "client-key",
    )?;
    Ok(match (cert, key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_slice_iter(&cert)
                .collect::<Result<Vec<_>, _>>()
                .context("client-certificate: bad PEM")?;
            let key = PrivateKeyDer::from_pem_slice(&key).context("client-key: bad PEM")?;
            builder
                .with_client_auth_cert(chain, key)
                .context("client-certificate and client-key do not match")?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => bail!("the user has a client-certificate without a client-key, or the reverse"),
    })
}

/// The user's bearer token, trimmed: given inline or in `tokenFile`.
fn token(dir: &Path, user: &RawUser) -> anyhow::Result<Option<String>> {
    Ok(match (&user.token, &user.token_file) {
        (Some(t), _) => Some(t.trim().to_string()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(dir.join(f))
                .with_context(|| format!("tokenFile {f}"))?
                .trim()
                .to_string(),
        ),
        (None, None) => None,
    })
}
