//! The HTTP service: its listener, its place in the service shape, and the
//! accept loop that hands each connection to hyper with the request
//! handler of [`super`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use hyper::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, info, info_span, warn};

use super::clients::Clients;
use super::netboot::BootState;
use super::stats::Stats;
use super::version::MinorVersion;
use super::{Ctx, DRAIN, HEADER_TIMEOUT, MAX_CONNECTIONS};
use crate::plan::Plan;
use crate::runtime::net;
use crate::runtime::service::{Commit, Listeners, Service, Tasks};

/// The HTTP service: one listener on `http.listen`; the plan (dirs, nodes,
/// ACL) is swapped by a reload and read per request.
pub struct Http {
    ctx: Arc<Ctx>,
    listeners: Listeners<SocketAddr>,
    tasks: Tasks,
}

fn warn_missing_dirs(plan: &Plan) {
    let cfg = &plan.cluster.http;
    for (what, dir) in [
        ("imagesDir", &cfg.images_dir),
        ("ignitionDir", &cfg.ignition_dir),
    ] {
        if !dir.is_dir() {
            warn!(
                "http.{what} {} is not a directory (yet); its files answer 404",
                dir.display()
            );
        }
    }
}

impl Http {
    /// The service for `plan`, serving nothing until its first commit.
    pub fn new(plan: &Arc<Plan>, events: crate::timeline::Events) -> Arc<Http> {
        let shared = Arc::new(ArcSwap::new(plan.clone()));
        let boot = Arc::new(BootState::open(&plan.cluster));
        let tasks = Tasks::new("http");
        // Persists the install state, retrying while the disk is full.
        let token = tasks.token();
        tasks.spawn(
            "http netboot state writer",
            token.clone(),
            boot.clone().run_writer(token),
        );
        Arc::new(Http {
            ctx: Arc::new(Ctx {
                stats: Arc::new(Stats::new(shared.clone())),
                boot,
                plan: shared,
                boundary_seq: AtomicU64::new(1),
                clients: Arc::new(Clients::default()),
                ign_cache: Default::default(),
                events,
                refusals: Default::default(),
            }),
            listeners: Listeners::default(),
            tasks,
        })
    }

    fn start_listener(&self, addr: SocketAddr, listener: TcpListener) {
        let token = self.tasks.token();
        if let Ok(local) = listener.local_addr() {
            info!("listening for http on {local}");
            self.ctx.stats.set_listen(local);
        }
        self.tasks.spawn(
            format!("http listener {addr}"),
            token.clone(),
            serve_listener(self.ctx.clone(), listener, token.clone()),
        );
        self.listeners.insert(addr, token);
    }
}

#[async_trait]
impl Service for Http {
    fn name(&self) -> &'static str {
        "http"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let addr = plan.cluster.http.listen;
        let new = self.listeners.bind_tcp_if_missing(addr).await?;
        Ok(Box::new(move || {
            warn_missing_dirs(&plan);
            self.ctx.plan.store(plan);
            for gone in self.listeners.retain(&[addr]) {
                info!("http: closed listener {gone}");
            }
            if let Some(l) = new {
                self.start_listener(addr, l);
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::service(DRAIN))
            .await
    }

    fn status(&self) -> crate::runtime::status::ServiceStatus {
        let mut s = self.ctx.stats.status();
        let plan = self.ctx.plan.load_full();
        if plan.cluster.rhcos.is_some() {
            // `serve` samples this every tick: the installed systems'
            // machine-config contacts reach the install state here too.
            for n in &plan.cluster.nodes {
                self.ctx.sync_first_boot(&n.name);
            }
            s.netboot = self.ctx.boot.rows(&plan.cluster);
            s.netboot_state = Some(self.ctx.boot.store_status());
        }
        crate::runtime::status::ServiceStatus::Http(s)
    }

    fn metrics(&self, out: &mut String) {
        self.ctx.stats.metrics(out);
        if self.ctx.plan.load().cluster.rhcos.is_some() {
            self.ctx.boot.metrics(out);
        }
    }
}

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Wait until hyper-util can tell HTTP/1 from h2 without blocking: the
/// bytes received differ from the h2 preface, or hold all of it. Its own
/// sniffing has no timeout, so a client that sent nothing (or `P`, `PRI`…)
/// and stalled held its connection for ever; the caller bounds this wait.
/// `false` when the client closed first. `peek`, not `readable()`: the
/// latter reported fresh sockets ready with no byte in them.
async fn sniffable(stream: &tokio::net::TcpStream) -> bool {
    let mut buf = [0u8; H2_PREFACE.len()];
    loop {
        match stream.peek(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if n == buf.len() || buf[..n] != H2_PREFACE[..n] => return true,
            // A prefix of the preface: wait for more (peek returns at once
            // while bytes are queued, so poll gently).
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Accept and serve HTTP connections on `listener` until `shutdown`.
async fn serve_listener(
    ctx: Arc<Ctx>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let limits = net::Limits {
        max_conns: Some(crate::runtime::limits::cap::scaled(MAX_CONNECTIONS)),
        backoff: Duration::from_millis(100),
        drain: None,
    };
    // EMFILE and friends: back off instead of spinning; one line a second.
    let every = net::LogEvery::new(Duration::from_secs(1));
    let on_error = |e: &std::io::Error| {
        if let Some(n) = every.allow() {
            warn!("http accept: {e} ({n} more suppressed)");
        }
    };
    net::serve(&listener, limits, &shutdown, on_error, |stream, peer| {
        let limit = ctx.plan.load().cluster.http.max_connections_per_client;
        let slot = ctx.clients.try_acquire(peer.ip(), limit);
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        let shutdown = shutdown.clone();
        let span = info_span!("http", %peer);
        async move {
            let Some(_slot) = slot else {
                // Closed at once: one host cannot hold every slot (slowloris).
                debug!("http connection closed: the client already holds {limit}");
                ctx.stats.refused_per_client();
                return;
            };
            // A client that connects and stays silent holds no slot for
            // long; hyper's header timeout then bounds each request head
            // (the first and every keep-alive follow-up), however slowly
            // it trickles in: its deadline is not reset by partial data.
            let silent = tokio::select! {
                r = tokio::time::timeout(HEADER_TIMEOUT, sniffable(&stream)) => !matches!(r, Ok(true)),
                _ = shutdown.cancelled() => true,
            };
            if silent {
                debug!("http connection closed: no request");
                return;
            }
            ctx.stats.conn_open();
            let c2 = ctx.clone();
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let ctx = c2.clone();
                async move { Ok::<_, Infallible>(ctx.handle(req, peer).await) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                // A client that shuts down its write side after the request
                // (busybox nc, HTTP/1.0 tools) still gets the whole body.
                .half_close(true)
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let stream = MinorVersion::new(stream);
            if let Err(e) = net::serve_http(&builder, stream, svc, &shutdown, DRAIN).await {
                debug!("http connection: {e}");
            }
            ctx.stats.conn_close();
        }
        .instrument(span)
    })
    .await;
    Ok(())
}

impl crate::runtime::control::BootControl for Http {
    fn reinstall(&self, node: &str) -> Result<String, crate::runtime::control::NodeControlError> {
        let plan = self.ctx.plan.load_full();
        if plan.cluster.node(node).is_none() {
            return Err(crate::runtime::control::NodeControlError::UnknownNode(
                node.to_string(),
            ));
        }
        self.ctx.boot.reinstall(node);
        Ok(format!(
            "{node} will install again at its next network boot"
        ))
    }
}
