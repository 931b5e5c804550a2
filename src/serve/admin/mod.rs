//! Admin listener (loopback by default): `/status` (JSON), `/metrics`
//! (Prometheus text) and the load balancer control API used by
//! `crc-appliance lb ...`:
//!
//! | method | path | answer |
//! |---|---|---|
//! | GET | `/` | self-contained HTML status page (polls `/status` every 2 s) |
//! | GET | `/status` | plan summary plus every registered service's status |
//! | GET | `/metrics` | every registered service's metrics |
//! | GET | `/api/health` | 200 when every enabled service is serving, else 503 with the reason (`crc-appliance health`) |
//! | GET | `/api/lb/backends` | the `lb` service's status (503 when the LB is off) |
//! | POST | `/api/lb/backends/{node}/disable` | drain `node` in every pool |
//! | POST | `/api/lb/backends/{node}/enable` | put `node` back |
//! | POST | `/api/nodes/{node}/reinstall` | network boot: `node` installs again at its next boot |
//! | POST | `/api/nodes/{node}/boot` | boot `node` by its BMC, libvirt, or say it boots from the network ([`crate::serve::nodeboot`]) |
//! | POST | `/api/ha/state` | HA pair only, each request and answer HMAC-authenticated with the pair key (`ha.tokenFile`, never sent): merge the peer's shared state, answer ours (`serve::hasync`) |
//! | POST | `/api/reload` | reload the cluster file; answers its [`crate::serve::status::ReloadStatus`] (200 applied, 422 invalid file, 409 not applicable) |
//!
//! Every request passes [`access::check`] first: the Host must be an IP
//! literal or `localhost` (DNS rebinding), state changes must not come from
//! another origin, and with `admin.tokenFile` they must carry the token
//! (required when `admin.listen` is not loopback).
//!
//! Who holds a connection (HA puts this listener on the segment, where any
//! host can try to fill it): with `admin.allowFrom`, only loopback, this
//! host, `ha.peer` and the listed networks are answered ([`access::Sources`],
//! at accept); `/api/ha/state` only from `ha.peer`. Each client address
//! holds at most [`ADMIN_PER_CLIENT`] connections and, when all
//! [`ADMIN_SERVED`] are taken, a lighter client takes the slot of an idle
//! or head-waiting connection of the heaviest ([`crate::runtime::admission`],
//! as the HTTP listener); a request head must arrive within
//! [`HEAD_TIMEOUT`]. `crc-appliance health` (keepalived's track script) does
//! not use this listener at all: it asks the private Unix socket of
//! [`health_sock`], which the segment cannot reach.
//!
//! It is a [`Service`] like the others: a reload that changes
//! `admin.listen` moves it, one that does not keeps its socket.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, body::Incoming};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::plan::Plan;
use crate::serve::hub::{Hub, ReloadResult};

use crate::runtime::admission::{self, Clients, Refused};
use crate::runtime::limits::cap::{ADMIN_PER_CLIENT, ADMIN_SERVED};
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use crate::runtime::{drain, httpconn, net};
use crate::serve::status::AdminStatus;

pub mod access;
pub mod health_sock;

/// How long a connection may take to send a request head (the CLI and the
/// HA peer send theirs at once).
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a connection may stay open with no request in flight (the page
/// polls every 2 s on one keep-alive connection).
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The admin listener.
pub struct Admin {
    hub: Arc<Hub>,
    /// The API token (`admin.tokenFile`), read at each commit.
    token: Arc<ArcSwapOption<String>>,
    /// The HA pair's token (`ha.tokenFile`), read at each commit; `None`
    /// without `ha:` (then `/api/ha/state` does not exist).
    ha_token: Arc<ArcSwapOption<String>>,
    listen: std::sync::Mutex<Option<SocketAddr>>,
    /// The IPv6 twin's bound address (dual-stack).
    listen_v6: std::sync::Mutex<Option<SocketAddr>>,
    listeners: Listeners<SocketAddr>,
    /// Who is answered (`admin.allowFrom`, `ha.peer`), set at each commit.
    sources: Arc<ArcSwap<access::Sources>>,
    /// Connections per client address, all listeners together.
    clients: Arc<Clients>,
    /// The cluster file `serve` runs (names the private health socket).
    cluster_file: PathBuf,
    /// The private health socket, once bound.
    health_sock: Listeners<String>,
    tasks: Tasks,
}

impl Admin {
    /// The admin service of `hub`, `serve` running `cluster_file`.
    pub fn new(hub: Arc<Hub>, cluster_file: &std::path::Path) -> Arc<Admin> {
        Arc::new(Admin {
            token: Arc::new(ArcSwapOption::empty()),
            ha_token: Arc::new(ArcSwapOption::empty()),
            listen: std::sync::Mutex::new(None),
            listen_v6: std::sync::Mutex::new(None),
            listeners: Listeners::default(),
            sources: Arc::new(ArcSwap::from_pointee(access::Sources::default())),
            clients: Arc::new(Clients::default()),
            cluster_file: cluster_file.to_path_buf(),
            health_sock: Listeners::default(),
            tasks: hub.ctx().tasks("admin"),
            hub,
        })
    }
}

impl Admin {
    /// Serve the health socket `name` when it was just `bound`.
    fn start_health_socket(&self, name: String, bound: Option<tokio::net::UnixListener>) {
        let Some(l) = bound else {
            return;
        };
        info!("admin health socket on @{name}");
        let token = self.tasks.token();
        self.tasks.spawn(
            "admin health socket",
            token.clone(),
            health_sock::serve(self.hub.clone(), l, token.clone()),
        );
        self.health_sock.insert(name, token);
    }
}

impl Admin {
    /// `/status` → `admin`: this listener's section.
    pub fn status(&self) -> AdminStatus {
        let listen = *self.listen.locked();
        let listen_v6 = *self.listen_v6.locked();
        AdminStatus {
            listen: listen.map(|a| a.to_string()),
            listen_v6: listen_v6.map(|a| a.to_string()),
        }
    }
}

#[async_trait]
impl Service for Admin {
    fn name(&self) -> &'static str {
        "admin"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        // `admin.listen` and its IPv6 twin (dual-stack, not on loopback).
        let addrs = plan
            .cluster
            .listen_addrs(crate::model::catalogue::ServiceKind::Admin);
        let token = match &plan.cluster.admin.token_file {
            Some(f) => Some(crate::config::secret::read_token(f).map_err(|e| anyhow::anyhow!(e))?),
            None => None,
        };
        let ha_token = match &plan.cluster.ha {
            Some(h) => Some(
                crate::config::secret::read_token(&h.token_file)
                    .map_err(|e| anyhow::anyhow!("ha.tokenFile: {e}"))?,
            ),
            None => None,
        };
        let new = self
            .listeners
            .bind_tcp_missing(&addrs, self.hub.ctx().bind)
            .await?;
        let sources = access::Sources {
            allow_from: plan.cluster.admin.allow_from.clone(),
            ha_peer: plan.cluster.ha.as_ref().map(|h| h.peer.into()),
        };
        let sock = crate::config::health_socket_name(&self.cluster_file).map_err(|e| {
            anyhow::anyhow!("health socket of {}: {e}", self.cluster_file.display())
        })?;
        let new_sock = match self.health_sock.missing([&sock]).is_empty() {
            true => None,
            false => Some(health_sock::bind(&sock)?),
        };
        Ok(Box::new(move || {
            self.token.store(token.map(Arc::new));
            self.ha_token.store(ha_token.map(Arc::new));
            self.sources.store(Arc::new(sources));
            self.start_health_socket(sock, new_sock);
            self.listeners.close_except("admin", &addrs);
            if addrs.len() < 2 {
                *self.listen_v6.locked() = None;
            }
            for (addr, l) in new {
                if let Ok(local) = l.local_addr() {
                    info!("listening for admin on {local}");
                    let twin = Some(&addr) != addrs.first();
                    *(if twin { &self.listen_v6 } else { &self.listen }).locked() = Some(local);
                }
                let tokens = Tokens {
                    api: self.token.clone(),
                    ha: self.ha_token.clone(),
                };
                let guard = Guard {
                    sources: self.sources.clone(),
                    clients: self.clients.clone(),
                };
                let hub = self.hub.clone();
                self.listeners
                    .start(&self.tasks, addr, format!("admin listener {addr}"), |t| {
                        serve_listener(hub, tokens, guard, l, t)
                    });
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, drain::service(drain::HTTP_REQUESTS))
            .await
    }

    fn metrics(&self, _out: &mut String) {}
}

type Resp = Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

fn json_resp(status: StatusCode, v: &serde_json::Value) -> Resp {
    let mut text = serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    respond(status, "application/json", text)
}

/// The HTML status page served at `/`: no external assets; its script
/// renders the nodes (with their last ignition fetch) and every service
/// section of `/status` generically.
pub const STATUS_PAGE: &str = include_str!("page.html");

/// `/api/health`: 200 when every enabled service is serving, else 503.
fn health(hub: &Hub) -> Resp {
    match hub.health() {
        Ok(serving) => json_resp(StatusCode::OK, &json!({ "ok": true, "serving": serving })),
        Err(why) => json_resp(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({ "error": why.to_string() }),
        ),
    }
}

/// Route one request; `me` is this listener's own `/status` section.
pub async fn route(hub: &Hub, me: &AdminStatus, method: &Method, path: &str) -> Resp {
    let path = path.split('?').next().unwrap_or(path);
    match (method, path) {
        (&Method::GET, "/" | "/index.html") => {
            respond(StatusCode::OK, "text/html; charset=utf-8", STATUS_PAGE)
        }
        (&Method::GET, "/status") => {
            let mut doc = hub.status_doc();
            doc.admin = Some(me.clone());
            json_resp(
                StatusCode::OK,
                &serde_json::to_value(doc).unwrap_or_default(),
            )
        }
        (&Method::GET, "/api/health") => health(hub),
        (&Method::GET, "/metrics") => respond(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            hub.metrics(),
        ),
        (&Method::POST, "/api/reload") => match hub.request_reload().await {
            None => json_resp(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({"error": "shutting down"}),
            ),
            Some(r) => {
                let code = match r.result {
                    Some(ReloadResult::Applied) => StatusCode::OK,
                    Some(ReloadResult::Invalid) => StatusCode::UNPROCESSABLE_ENTITY,
                    _ => StatusCode::CONFLICT,
                };
                json_resp(code, &serde_json::to_value(r).unwrap_or_default())
            }
        },
        (&Method::POST, p) if p.starts_with("/api/nodes/") && p.ends_with("/reinstall") => {
            let node = &p["/api/nodes/".len()..p.len() - "/reinstall".len()];
            match hub.services.boot_control() {
                None => json_resp(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &json!({"error": "the HTTP service (network boot) is not running"}),
                ),
                Some(b) => match b.reinstall(node) {
                    Ok(msg) => json_resp(StatusCode::OK, &json!({"ok": msg})),
                    Err(e) => json_resp(StatusCode::NOT_FOUND, &json!({"error": e.to_string()})),
                },
            }
        }
        (&Method::POST, p) if p.starts_with("/api/nodes/") && p.ends_with("/boot") => {
            let node = &p["/api/nodes/".len()..p.len() - "/boot".len()];
            match crate::serve::nodeboot::boot(hub, node).await {
                Ok(lines) => json_resp(StatusCode::OK, &json!({"ok": lines.join("\n")})),
                Err(e) => json_resp(
                    StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::CONFLICT),
                    &json!({"error": e.to_string()}),
                ),
            }
        }
        (&Method::GET, "/api/lb/backends") => match hub.services.lb_status() {
            Some(s) => json_resp(StatusCode::OK, &serde_json::to_value(s).unwrap_or_default()),
            None => json_resp(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({"error": "the load balancer is not running"}),
            ),
        },
        (&Method::POST, p) if p.starts_with("/api/lb/backends/") => {
            let rest = &p["/api/lb/backends/".len()..];
            let (node, disabled) = match rest.rsplit_once('/') {
                Some((n, "disable")) => (n, true),
                Some((n, "enable")) => (n, false),
                _ => {
                    return json_resp(
                        StatusCode::NOT_FOUND,
                        &json!({"error": "expected /api/lb/backends/<node>/disable|enable"}),
                    );
                }
            };
            match hub.services.lb_control() {
                None => json_resp(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &json!({"error": "the load balancer is not running"}),
                ),
                Some(lb) => match lb.set_disabled(node, disabled) {
                    Ok(msg) => json_resp(StatusCode::OK, &json!({"ok": msg})),
                    Err(e) => json_resp(
                        StatusCode::from_u16(e.http_status())
                            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                        &json!({"error": e.to_string()}),
                    ),
                },
            }
        }
        (_, "/status" | "/metrics" | "/api/lb/backends" | "/api/reload") => json_resp(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "method not allowed"}),
        ),
        _ => json_resp(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
    }
}

/// The tokens requests are checked against.
#[derive(Clone)]
struct Tokens {
    api: Arc<ArcSwapOption<String>>,
    ha: Arc<ArcSwapOption<String>>,
}

/// `POST /api/ha/state` from the HA peer (404 without `ha:`): the body is
/// read within the document limit, then [`crate::serve::hasync::answer`]
/// authenticates it with the pair key (an HMAC, never a bearer token),
/// merges and answers signed.
async fn ha_state(
    hub: &Hub,
    ha_token: Option<Arc<String>>,
    req: Request<Incoming>,
    client: SocketAddr,
) -> Resp {
    use http_body_util::BodyExt as _;
    let Some(token) = ha_token else {
        return json_resp(
            StatusCode::NOT_FOUND,
            &json!({"error": "this appliance is not an HA member (no ha: section)"}),
        );
    };
    if req.method() != Method::POST {
        return json_resp(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "method not allowed"}),
        );
    }
    let headers = req.headers().clone();
    let limit = crate::serve::hasync::max_doc(&hub.plan().cluster);
    let limited = http_body_util::Limited::new(req.into_body(), limit);
    let body = match limited.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return json_resp(
                StatusCode::BAD_REQUEST,
                &json!({ "error": format!("cannot read the state document (limit {limit} bytes): {e}") }),
            );
        }
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let a = crate::serve::hasync::answer(hub, &token, &header, &body, client);
    let mut resp = Response::new(Full::new(Bytes::from(a.body)));
    *resp.status_mut() = StatusCode::from_u16(a.status).unwrap_or(StatusCode::BAD_REQUEST);
    let h = resp.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    for (k, v) in a.headers {
        if let Ok(v) = hyper::header::HeaderValue::from_str(&v) {
            h.insert(k, v);
        }
    }
    resp
}

/// Who may hold a connection: the source rules and the per-client counts.
#[derive(Clone)]
struct Guard {
    sources: Arc<ArcSwap<access::Sources>>,
    clients: Arc<Clients>,
}

impl Guard {
    /// Admit a connection from `peer` that reached `local`: `None` (it is
    /// closed) when its source is not answered, its client holds
    /// [`ADMIN_PER_CLIENT`], or every slot is taken and none can be freed.
    fn admit(
        &self,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        activity: &Arc<httpconn::Activity>,
    ) -> Option<admission::ClientSlot> {
        if !self.sources.load().admits(peer.ip(), local.map(|l| l.ip())) {
            debug!(%peer, "admin connection closed: source not in admin.allowFrom");
            return None;
        }
        let lim = admission::Limits {
            per_client: ADMIN_PER_CLIENT,
            total: ADMIN_SERVED,
        };
        match self.clients.admit(peer.ip(), activity, lim) {
            Ok((slot, evicted)) => {
                if let Some(from) = evicted {
                    debug!(%peer, "admin: closing an idle connection of {from} to serve it");
                }
                Some(slot)
            }
            Err(Refused::PerClient) => {
                debug!(%peer, "admin connection closed: the client holds its limit");
                None
            }
            Err(Refused::Full) => {
                debug!(%peer, "admin connection closed: every slot is taken, none idle");
                None
            }
        }
    }
}

async fn serve_listener(
    hub: Arc<Hub>,
    tokens: Tokens,
    guard: Guard,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    // The HTTP listener's connection rules (admission, an idle connection
    // closed after 10 s) with a short head timeout, and a small cap: its
    // descriptors are kept out of the other services' share
    // (`limits::reserve`).
    let limits = net::Limits {
        max_conns: Some(crate::runtime::limits::cap::ADMIN_MAX_CONNECTIONS),
        backoff: Duration::from_millis(50),
        drain: None,
    };
    let builders = Arc::new(httpconn::Builders::new(httpconn::builder(HEAD_TIMEOUT)));
    let on_error = |e: &std::io::Error| debug!("admin accept: {e}");
    let listener_addr = listener.local_addr().ok();
    let listener = crate::runtime::lazytcp::LazyListener::new(listener)?;
    net::serve(&listener, limits, &shutdown, on_error, |mut stream, peer| {
        let hub = hub.clone();
        let tokens = tokens.clone();
        let shutdown = shutdown.clone();
        let builders = builders.clone();
        let activity = httpconn::Activity::new();
        let slot = guard.admit(peer, stream.local_addr().ok(), &activity);
        let sources = guard.sources.clone();
        async move {
            let Some(_slot) = slot else {
                return;
            };
            let (proto, first) =
                match httpconn::request_start(&mut stream, HEAD_TIMEOUT, &activity, &shutdown).await {
                    Ok(p) => p,
                    Err(end) => {
                        debug!(%peer, "admin connection closed before a request: {end:?}");
                        return;
                    }
                };
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let hub = hub.clone();
                let me = AdminStatus {
                    listen: listener_addr.map(|a| a.to_string()),
                    listen_v6: None,
                };
                let token = tokens.api.load_full();
                let ha_token = tokens.ha.load_full();
                let sources = sources.load_full();
                async move {
                    if req.uri().path() == crate::serve::hasync::PATH
                        && sources.ha_peer.is_some()
                        && !sources.is_ha_peer(peer.ip())
                    {
                        debug!(%peer, "admin: refused the HA state from an address other than ha.peer");
                        return Ok(json_resp(
                            StatusCode::FORBIDDEN,
                            &json!({ "error": "only ha.peer may send the pair's state" }),
                        ));
                    }
                    if req.uri().path() == crate::serve::hasync::PATH {
                        return Ok::<_, Infallible>(ha_state(&hub, ha_token, req, peer).await);
                    }
                    let checked = access::check(
                        req.method(),
                        req.headers(),
                        req.uri().authority().map(|a| a.as_str()),
                        token.as_deref().map(String::as_str),
                    );
                    let r = match checked {
                        Ok(()) => route(&hub, &me, req.method(), req.uri().path()).await,
                        Err((code, why)) => {
                            debug!(%peer, "admin: refused {} {}: {why}", req.method(), req.uri().path());
                            json_resp(code, &json!({ "error": why }))
                        }
                    };
                    Ok::<_, Infallible>(r)
                }
            });
            let t = httpconn::Timeouts {
                idle: IDLE_TIMEOUT,
                drain: drain::HTTP_REQUESTS,
            };
            if let httpconn::Ended::Failed(e) =
                httpconn::serve(&builders, proto, httpconn::Replay::new(stream, first), svc, &activity, t, &shutdown).await
            {
                debug!(%peer, "admin connection: {e}");
            }
        }
    })
    .await;
    Ok(())
}
