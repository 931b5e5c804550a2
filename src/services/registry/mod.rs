//! The mirror registry (`registry:`, issue #36, docs/registry.md): an OCI
//! Distribution registry over TLS on `registry.listen`, serving and
//! writing the distribution registry's filesystem layout in
//! `registry.storage` (`storage.rs`), with the pull side in `pull.rs`, the
//! push side in `push.rs` and who may do what in `auth.rs`.
//!
//! Connections live as the HTTP service's do (`runtime::httpconn`: the
//! handshake and each request head bounded, idle and stalled connections
//! closed, in-flight requests drained at shutdown). Blobs are streamed from
//! their files: over TLS, sendfile/splice cannot carry them (no kTLS).
//!
//! Invariants: nothing listens unless the section is present; the
//! certificate is made or loaded in `stage`, before anything binds (a
//! broken one fails the start or the reload and the running one stays);
//! every answer carries `Docker-Distribution-Api-Version: registry/2.0`;
//! a request is authorised before any storage is touched (a push needs a
//! user, a pull needs one from outside the cluster's networks); a bad
//! request is answered and logged at debug, never a panic.

// Handlers return `Result<_, Resp>`: the error is the answer itself (a
// hyper `Response`, 128 bytes), sent once on a cold path; boxing it would
// only add an allocation.
#![allow(clippy::result_large_err)]

pub mod auth;
mod flight;
pub mod manifest;
pub mod names;
mod pull;
mod pullblob;
mod pulls;
mod pulltags;
pub mod pullthrough;
mod push;
mod ranges;
pub mod replica;
mod replica_sync;
pub mod reply;
pub mod sources;
pub mod status;
pub mod storage;
mod upstream;
mod upstream_auth;
mod upstream_error;
mod upstream_pool;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::{ArcSwap, ArcSwapOption};
use async_trait::async_trait;
use hyper::body::Incoming;
use hyper::{Method, Request};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, info, info_span};

use crate::model::cluster::IpNet;
use crate::model::registry::RegistryCfg;
use crate::plan::Plan;
use crate::runtime::httpconn::{self, Activity, Builders};
use crate::runtime::lazytcp::LazyListener;
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use names::{BadRoute, Name, Route};
use reply::{Code, Resp};
use status::{RegistryStatus, Stats};

/// A request head (and the TLS handshake) must arrive within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection with no request in flight this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// At shutdown, what requests in flight get.
const DRAIN: Duration = crate::runtime::drain::HTTP_REQUESTS;
/// Connections served at once.
const MAX_CONNS: usize = 1024;

/// What a reload may change.
struct Live {
    cfg: RegistryCfg,
    users: Option<Arc<auth::Users>>,
    anonymous: auth::Anonymous,
    nodes: HashMap<IpAddr, String>,
}

pub(crate) struct Ctx {
    store: storage::Store,
    stats: Arc<Stats>,
    live: ArcSwap<Live>,
    tls: ArcSwapOption<rustls::ServerConfig>,
    cert: std::sync::Mutex<(String, bool)>,
    replica: Option<Arc<replica::Replica>>,
    pull: pullthrough::PullThrough,
    /// The install timeline's `pulling` and `pulled` of each node.
    pulls: Arc<pulls::Pulls>,
}

impl Ctx {
    fn allow_delete(&self) -> bool {
        self.live.load().cfg.allow_delete
    }
}

pub struct Registry {
    ctx: Arc<Ctx>,
    listeners: Listeners<SocketAddr>,
    tasks: Tasks,
    bind: crate::runtime::bind::BindOptions,
}

fn live_of(plan: &Plan) -> anyhow::Result<Live> {
    let c = &plan.cluster;
    let cfg = c
        .registry
        .clone()
        .context("the registry section is not configured")?;
    let users = match &cfg.htpasswd_file {
        Some(p) => {
            Some(Arc::new(auth::Users::load(p).map_err(|e| {
                anyhow::anyhow!("registry.htpasswdFile: {e}")
            })?))
        }
        None => None,
    };
    let networks = std::iter::once(IpNet::V4(c.network.cidr))
        .chain(c.network.ipv6.as_ref().map(|v| IpNet::V6(v.cidr)))
        .chain(c.dhcp.segments.iter().map(|s| IpNet::V4(s.cidr)))
        .collect();
    let own = std::iter::once(IpAddr::V4(c.network.appliance_ip))
        .chain(c.ipv6().map(|v| IpAddr::V6(v.appliance_ip)))
        .chain(std::iter::once(cfg.listen.ip()))
        .collect();
    let nodes = c
        .nodes
        .iter()
        .flat_map(|n| {
            std::iter::once(IpAddr::V4(n.ip))
                .chain(n.ipv6.map(IpAddr::V6))
                .map(|ip| (ip, n.name.clone()))
        })
        .collect();
    Ok(Live {
        cfg,
        users,
        anonymous: auth::Anonymous { networks, own },
        nodes,
    })
}

/// The server configuration: `registry.tls`, else a certificate for the
/// registry's name and addresses signed by the appliance's CA. Blocking.
///
/// HTTP/1.1 only, whichever the certificate: the clients of a mirror
/// (CRI-O, podman and skopeo through containers/image, Docker) speak it,
/// and a blob then streams on its own connection, in large writes (h2
/// would cut it into 16 KiB frames of one stream, each its own write).
fn server_tls(
    plan: &Plan,
    cfg: &RegistryCfg,
) -> anyhow::Result<(Arc<rustls::ServerConfig>, String, bool)> {
    let (mut config, sha, from_ca) = match &cfg.tls {
        Some(t) => {
            let s = crate::runtime::certs::from_files(&t.cert_file, &t.key_file, false)
                .map_err(|e| anyhow::anyhow!("registry.tls: {e}"))?;
            (Arc::unwrap_or_clone(s.config), s.info.sha256, false)
        }
        None => {
            let (config, sha) = ca_issued(plan, cfg)?;
            (config, sha, true)
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((Arc::new(config), sha, from_ca))
}

/// A server configuration with a certificate of the appliance's CA for the
/// registry's name and addresses, and its fingerprint.
fn ca_issued(plan: &Plan, cfg: &RegistryCfg) -> anyhow::Result<(rustls::ServerConfig, String)> {
    let ca = crate::runtime::certs::ca::load_or_create(&plan.cluster)?;
    let c = &plan.cluster;
    let mut ips: Vec<IpAddr> = vec![IpAddr::V4(c.network.appliance_ip)];
    ips.extend(c.ipv6().map(|v| IpAddr::V6(v.appliance_ip)));
    if !cfg.listen.ip().is_unspecified() && !ips.contains(&cfg.listen.ip()) {
        ips.push(cfg.listen.ip());
    }
    let (chain, key) = ca.issue(std::slice::from_ref(&cfg.name), &ips)?;
    use rustls::pki_types::pem::PemObject as _;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(chain.as_bytes())
        .collect::<Result<Vec<_>, _>>()?;
    let sha =
        crate::runtime::certs::fingerprint(certs.first().map(|c| c.as_ref()).unwrap_or_default());
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes())?;
    let config = crate::runtime::certs::server_config(certs, key)?;
    Ok((config, sha))
}

impl Registry {
    pub fn new(
        plan: &Plan,
        events: crate::timeline::Events,
        rt: &crate::runtime::context::Context,
    ) -> anyhow::Result<Arc<Registry>> {
        let live = live_of(plan)?;
        let store = storage::Store::new(&live.cfg.storage);
        std::fs::create_dir_all(store.root()).with_context(|| {
            format!("registry.storage: cannot create {}", store.root().display())
        })?;
        let stats: Arc<Stats> = Arc::default();
        let pulls = Arc::new(pulls::Pulls::new(events, rt.faults.pull_quiet_secs()));
        let tasks = rt.tasks("registry");
        let t = tasks.token();
        tasks.spawn(
            "registry pull watch",
            t.clone(),
            pulls.clone().watch(stats.clone(), t),
        );
        Ok(Arc::new(Registry {
            ctx: Arc::new(Ctx {
                store,
                stats,
                live: ArcSwap::from_pointee(live),
                tls: ArcSwapOption::empty(),
                cert: std::sync::Mutex::default(),
                replica: replica::Replica::of(plan, rt)?,
                pull: pullthrough::PullThrough::new(rt),
                pulls,
            }),
            listeners: Listeners::default(),
            tasks,
            bind: rt.bind,
        }))
    }
}

impl Registry {
    /// The `/status` section.
    pub fn status(&self) -> RegistryStatus {
        let live = self.ctx.live.load();
        let (sha, from_ca) = crate::runtime::sync::LockExt::locked(&self.ctx.cert).clone();
        let base = RegistryStatus {
            listen: vec![live.cfg.listen.to_string()],
            name: live.cfg.name.clone(),
            storage: live.cfg.storage.display().to_string(),
            cert_sha256: sha,
            cert_from_ca: from_ca,
            ..RegistryStatus::default()
        };
        let mut s = self.ctx.stats.status(base, self.ctx.store.corrupt());
        s.replica = replica::status_of(&self.ctx);
        s.pull_through = self.ctx.pull.status();
        s
    }
}

#[async_trait]
impl Service for Registry {
    fn name(&self) -> &'static str {
        "registry"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let live = live_of(&plan)?;
        let p = plan.clone();
        let cfg = live.cfg.clone();
        let (tls, sha, from_ca) = tokio::task::spawn_blocking(move || server_tls(&p, &cfg))
            .await
            .map_err(|e| anyhow::anyhow!("registry certificate: {e}"))?
            .map_err(|e| anyhow::anyhow!("registry certificate: {e:#}"))?;
        let cfg = live.cfg.clone();
        let upstreams = tokio::task::spawn_blocking(move || pullthrough::build(&cfg))
            .await?
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let addrs = plan
            .cluster
            .listen_addrs(crate::model::catalogue::ServiceKind::Registry);
        let mut new = Vec::new();
        for addr in self.listeners.missing(&addrs) {
            let l = self
                .bind
                .tcp(addr)
                .with_context(|| format!("bind TCP {addr}"))?;
            new.push((addr, l));
        }
        Ok(Box::new(move || {
            let ctx = &self.ctx;
            ctx.tls.store(Some(tls));
            *crate::runtime::sync::LockExt::locked(&ctx.cert) = (sha, from_ca);
            ctx.live.store(Arc::new(live));
            ctx.pull.set(upstreams);
            for gone in self.listeners.retain(&addrs) {
                info!("registry: closed listener {gone}");
            }
            for (addr, l) in new {
                let token = self.tasks.token();
                let local = l.local_addr().unwrap_or(addr);
                info!("listening for registry on {local}");
                self.tasks.spawn(
                    format!("registry listener {addr}"),
                    token.clone(),
                    serve_listener(ctx.clone(), l, token.clone()),
                );
                self.listeners.insert(addr, token);
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        if self.ctx.replica.is_some() {
            let t = self.tasks.token();
            let replica = replica_sync::serve_and_replicate(self.ctx.clone(), t.clone());
            self.tasks.spawn("registry replica", t, replica);
        }
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::service(DRAIN))
            .await
    }

    fn metrics(&self, out: &mut String) {
        self.ctx.stats.metrics(out, self.ctx.store.corrupt().len());
        self.ctx.pull.metrics(out);
    }
}

/// Accept and serve TLS connections until `shutdown`.
async fn serve_listener(
    ctx: Arc<Ctx>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let limits = crate::runtime::net::Limits {
        max_conns: Some(MAX_CONNS),
        backoff: Duration::from_millis(100),
        drain: None,
    };
    let builders = Arc::new(Builders::new(httpconn::builder(HEADER_TIMEOUT)));
    let listener = LazyListener::new(listener)?;
    let on_error = |e: &std::io::Error| debug!("registry accept: {e}");
    crate::runtime::net::serve(&listener, limits, &shutdown, on_error, |stream, peer| {
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        let builders = builders.clone();
        let shutdown = shutdown.clone();
        let conn = Box::pin(async move {
            let Some(tls) = ctx.tls.load_full() else {
                return;
            };
            let acceptor = tokio_rustls::TlsAcceptor::from(tls);
            let activity = Activity::new();
            let started =
                httpconn::tls_start(acceptor, stream, HEADER_TIMEOUT, &activity, &shutdown).await;
            let (proto, s) = match started {
                Ok(x) => x,
                Err(end) => {
                    debug!("registry connection closed before a request: {end:?}");
                    return;
                }
            };
            let c2 = ctx.clone();
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let ctx = c2.clone();
                async move { Ok::<_, Infallible>(handle(&ctx, req, peer).await) }
            });
            let t = httpconn::Timeouts {
                idle: IDLE_TIMEOUT,
                drain: DRAIN,
            };
            let end = httpconn::serve(&builders, proto, s, svc, &activity, t, &shutdown).await;
            debug!("registry connection ended: {end:?}");
        });
        conn.instrument(info_span!("registry", %peer))
    })
    .await;
    Ok(())
}

/// Pull (GET/HEAD) or push (anything else)?
fn is_pull(m: &Method) -> bool {
    m == Method::GET || m == Method::HEAD
}

/// Whether the request may go on; `Err` the 401.
///
/// `/v2/` challenges every client without a valid user when there are
/// users (as distribution does): Docker clients decide from it whether to
/// send their credentials at all, and one that has them must be told to
/// (a client without them goes on anonymously: c/image sends an empty
/// Basic, which pulls from the cluster's networks do not need).
async fn authorise(ctx: &Arc<Ctx>, req: &Request<Incoming>, peer: IpAddr) -> Result<(), Resp> {
    let live = ctx.live.load_full();
    let base = matches!(req.uri().path(), "/v2/" | "/v2");
    let challenge_base = base && live.users.as_ref().is_some_and(|u| !u.is_empty());
    if is_pull(req.method()) && live.anonymous.allows(peer) && !challenge_base {
        return Ok(());
    }
    let given = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let (Some(users), Some(given)) = (live.users.clone(), given) {
        let ok = tokio::task::spawn_blocking(move || users.check(&given))
            .await
            .ok()
            .flatten();
        if ok.is_some() {
            return Ok(());
        }
    }
    ctx.stats
        .unauthorized
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut r = reply::error(Code::Unauthorized, json!(null));
    reply::set(
        &mut r,
        "WWW-Authenticate",
        &format!("Basic realm=\"{}\"", live.cfg.name),
    );
    Err(r)
}

fn query_of(req: &Request<Incoming>) -> Vec<(String, String)> {
    req.uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decoding of a query component (`+` is a space, as in Go's
/// `url.ParseQuery`).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (x, _) => out.push(x),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Answer one request.
async fn handle(ctx: &Arc<Ctx>, req: Request<Incoming>, peer: SocketAddr) -> Resp {
    let ip = match peer.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer.ip(), IpAddr::V4),
        v4 => v4,
    };
    if let Some(r) = replica::answer(ctx, &req, ip).await {
        return r;
    }
    let mut resp = match authorise(ctx, &req, ip).await {
        Ok(()) => dispatch(ctx, req, ip).await,
        Err(r) => r,
    };
    let len = resp
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0u64);
    let streamed = resp.headers().contains_key("accept-ranges");
    let node = ctx.live.load().nodes.get(&ip).cloned();
    let first = ctx
        .stats
        .request(ip, node.as_deref(), if streamed { 0 } else { len });
    if let (Some(at), Some(node)) = (first, node) {
        ctx.pulls.first_request(node, at);
    }
    reply::set(&mut resp, reply::API_VERSION, "registry/2.0");
    resp
}

async fn dispatch(ctx: &Arc<Ctx>, req: Request<Incoming>, ip: IpAddr) -> Resp {
    let route = match names::route(req.uri().path()) {
        Ok(r) => r,
        Err(BadRoute::NotFound) => return reply::page_not_found(),
        Err(BadRoute::Name) => {
            return reply::error(Code::NameInvalid, json!(null));
        }
    };
    let query = query_of(&req);
    let method = req.method().clone();
    let headers = req.headers().clone();
    let body = req.into_body();
    match (route, method.clone()) {
        (Route::Base, Method::GET | Method::HEAD) => {
            reply::json(hyper::StatusCode::OK, "{}".into())
        }
        (Route::Catalog, Method::GET) => pull::catalog(ctx, &query).await,
        (Route::Tags(n), Method::GET) => pull::tags(ctx, n, &query).await,
        (Route::Manifest(n, r), Method::GET | Method::HEAD) => {
            pull::manifest(ctx, &method, &headers, n, &r).await
        }
        (Route::Manifest(n, r), Method::PUT) => {
            push::put_manifest(ctx, n, &r, &headers, body).await
        }
        (Route::Manifest(n, r), Method::DELETE) => push::delete(ctx, n, &r, false).await,
        (Route::Blob(n, d), Method::GET | Method::HEAD) => {
            pull::blob(ctx, &method, &headers, n, &d, ip).await
        }
        (Route::Blob(n, d), Method::DELETE) => push::delete(ctx, n, &d, true).await,
        (Route::Upload(n, None), Method::POST) => push::start(ctx, n, &query, body).await,
        (Route::Upload(n, Some(id)), m) => upload(ctx, n, &id, m, &headers, &query, body).await,
        _ => reply::method_not_allowed(),
    }
}

async fn upload(
    ctx: &Arc<Ctx>,
    name: Name,
    id: &str,
    method: Method,
    headers: &hyper::HeaderMap,
    query: &[(String, String)],
    body: Incoming,
) -> Resp {
    if !names::upload_id_ok(id) {
        return reply::error(Code::BlobUploadUnknown, json!(null));
    }
    match method {
        Method::GET => push::status(ctx, &name, id),
        Method::PATCH => push::patch(ctx, name, id, headers, body).await,
        Method::PUT => push::put(ctx, name, id, query, body).await,
        Method::DELETE => push::cancel(ctx, &name, id),
        _ => reply::method_not_allowed(),
    }
}
