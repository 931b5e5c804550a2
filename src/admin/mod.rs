//! Admin listener (loopback by default): `/status` (JSON), `/metrics`
//! (Prometheus text) and the load balancer control API used by
//! `crc-appliance lb ...`:
//!
//! | method | path | answer |
//! |---|---|---|
//! | GET | `/` | self-contained HTML status page (polls `/status` every 2 s) |
//! | GET | `/status` | plan summary plus every registered service's status |
//! | GET | `/metrics` | every registered service's metrics |
//! | GET | `/api/lb/backends` | the `lb` service's status (503 when the LB is off) |
//! | POST | `/api/lb/backends/{node}/disable` | drain `node` in every pool |
//! | POST | `/api/lb/backends/{node}/enable` | put `node` back |
//!
//! Entry points used by the supervisor: [`bind`] acquires the socket (so a
//! port conflict fails before any service starts), then [`Bound::run`] serves
//! until `shutdown` is cancelled.

use std::convert::Infallible;
use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, body::Incoming};
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::hub::Hub;
use crate::metrics::Kind;
use crate::net;
use crate::plan::Plan;

/// Sockets acquired by [`bind`].
pub struct Bound {
    listener: TcpListener,
}

/// Bind this service's socket and log `listening for admin on <addr>`.
pub async fn bind(plan: &Arc<Plan>) -> anyhow::Result<Bound> {
    let addr = plan.cluster.admin.listen;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("bind TCP {addr}"))?;
    info!("listening for admin on {}", listener.local_addr()?);
    Ok(Bound { listener })
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

/// The `/status` document.
pub fn status(hub: &Hub) -> serde_json::Value {
    let c = &hub.plan.cluster;
    let mut doc = json!({
        "cluster": c.domain,
        "version": env!("CARGO_PKG_VERSION"),
        "network": {
            "cidr": c.network.cidr.to_string(),
            "gateway": c.network.gateway,
            "applianceIP": c.network.appliance_ip,
            "apiVIP": c.network.api_vip,
            "ingressVIP": c.network.ingress_vip,
        },
        "nodes": c.nodes.iter().map(|n| json!({
            "name": n.name, "role": n.role, "mac": n.mac, "ip": n.ip,
            "fqdn": c.fqdn(&n.name),
        })).collect::<Vec<_>>(),
    });
    for s in hub.sources() {
        doc[s.name()] = s.status();
    }
    doc
}

/// The `/metrics` text.
pub fn metrics(hub: &Hub) -> String {
    let mut out = String::new();
    crate::metrics::family(
        &mut out,
        "crc_appliance_info",
        Kind::Gauge,
        "Build and cluster of this appliance.",
    )
    .sample(
        &[
            ("version", &env!("CARGO_PKG_VERSION")),
            ("cluster", &hub.plan.cluster.domain),
        ],
        1,
    );
    for s in hub.sources() {
        s.metrics(&mut out);
    }
    out
}

/// Route one request. Public so tests and other listeners can reuse it.
pub fn route(hub: &Hub, method: &Method, path: &str) -> Resp {
    let path = path.split('?').next().unwrap_or(path);
    match (method, path) {
        (&Method::GET, "/" | "/index.html") => {
            respond(StatusCode::OK, "text/html; charset=utf-8", STATUS_PAGE)
        }
        (&Method::GET, "/status") => json_resp(StatusCode::OK, &status(hub)),
        (&Method::GET, "/metrics") => respond(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics(hub),
        ),
        (&Method::GET, "/api/lb/backends") => {
            match hub.sources().into_iter().find(|s| s.name() == "lb") {
                Some(s) => json_resp(StatusCode::OK, &s.status()),
                None => json_resp(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &json!({"error": "the load balancer is not running"}),
                ),
            }
        }
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
            match hub.lb_control() {
                None => json_resp(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &json!({"error": "the load balancer is not running"}),
                ),
                Some(lb) => match lb.set_disabled(node, disabled) {
                    Ok(msg) => json_resp(StatusCode::OK, &json!({"ok": msg})),
                    Err(e) => json_resp(StatusCode::NOT_FOUND, &json!({"error": e})),
                },
            }
        }
        (_, "/status" | "/metrics" | "/api/lb/backends") => json_resp(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "method not allowed"}),
        ),
        _ => json_resp(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
    }
}

impl Bound {
    /// Serve until `shutdown` is cancelled, then finish in-flight work and return.
    pub async fn run(self, hub: Arc<Hub>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let limits = net::Limits {
            max_conns: None,
            backoff: std::time::Duration::from_millis(50),
            drain: None,
        };
        let on_error = |e: &std::io::Error| debug!("admin accept: {e}");
        net::serve(
            &self.listener,
            limits,
            &shutdown,
            on_error,
            |stream, peer| {
                let hub = hub.clone();
                let shutdown = shutdown.clone();
                async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let r = route(&hub, req.method(), req.uri().path());
                        async move { Ok::<_, Infallible>(r) }
                    });
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let drain = std::time::Duration::from_secs(5);
                    if let Err(e) = net::serve_http(&builder, stream, svc, &shutdown, drain).await {
                        debug!(%peer, "admin connection: {e}");
                    }
                }
            },
        )
        .await;
        Ok(())
    }
}
