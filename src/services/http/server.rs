//! The HTTP service: its listener, its place in the service shape, and the
//! accept loop that admits each connection ([`clients`]: per-client limit,
//! global cap, eviction of idle or stalled connections when full) and
//! hands it to hyper with the request handler of [`super`] ([`httpconn`]:
//! request-start, header, idle and write-progress timeouts).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use async_trait::async_trait;
use hyper::body::Incoming;
use hyper::{Request, Version};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, info, info_span, warn};

use super::lastsend::{self, LastSend};
use super::netboot::BootState;
use super::stats::Stats;
use super::version::MinorVersion;
use super::{Ctx, DRAIN, HEADER_TIMEOUT, IDLE_TIMEOUT, Scheme};
use crate::plan::Plan;
use crate::runtime::admission::{self as clients, ClientSlot, Clients, Refused};
use crate::runtime::bind::BindOptions;
use crate::runtime::context::Context;
use crate::runtime::httpconn::{self, Activity, Builders, Ended, WRITE_STALL_TIMEOUT};
use crate::runtime::lazytcp::{LazyListener, LazyTcp};
use crate::runtime::limits::cap::Caps;
use crate::runtime::lograte::LogRate;
use crate::runtime::net;
use crate::runtime::service::{Commit, Listeners, Service, Tasks};

/// The HTTP service: one listener on `http.listen` and, when it runs, the
/// boot ISOs' HTTPS listener on `http.tlsListen`; the plan (dirs, nodes,
/// ACL) and the certificate are swapped by a reload and read per request
/// (per connection for the certificate).
pub struct Http {
    ctx: Arc<Ctx>,
    listeners: Listeners<SocketAddr>,
    tls_listeners: Listeners<SocketAddr>,
    /// The HTTPS listener's configuration (`None` while it does not run).
    tls: TlsConfig,
    tasks: Tasks,
    /// The connection caps and how listeners bind (the run-time context).
    caps: Caps,
    bind: BindOptions,
    /// Accept errors: at most one line a second, with the counts of the
    /// rest (the serve's `http` limiter).
    accept_log: Arc<LogRate>,
}

/// The current server configuration of the HTTPS listener.
type TlsConfig = Arc<ArcSwapOption<rustls::ServerConfig>>;

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
    /// With `csr:`, workers are served the cluster's current pointer
    /// config from `rt.worker_ign` (the CSR approver reads it; [`super::day2`]).
    pub fn new(plan: &Arc<Plan>, events: crate::timeline::Events, rt: &Context) -> Arc<Http> {
        let shared = Arc::new(ArcSwap::new(plan.clone()));
        let boot = Arc::new(BootState::open(&plan.cluster, &rt.ha));
        let tasks = rt.tasks("http");
        // Persists the install state, retrying while the disk is full.
        let token = tasks.token();
        tasks.spawn(
            "http netboot state writer",
            token.clone(),
            boot.clone().run_writer(token),
        );
        // What the timeline hears outside a request: the LB's
        // machine-config connections, the bootstrap-in-place file's time.
        let token = tasks.token();
        tasks.spawn(
            "http bootstrap-in-place watch",
            token.clone(),
            super::timeline::watch_bootstrap_in_place(shared.clone(), events.clone(), token),
        );
        let ctx = Arc::new(Ctx {
            stats: Arc::new(Stats::new(shared.clone())),
            boot,
            plan: shared,
            boundary_seq: AtomicU64::new(1),
            clients: Arc::new(Clients::default()),
            ign_cache: Default::default(),
            events: events.clone(),
            refusals: Default::default(),
            sno_initrd: Default::default(),
            https: Default::default(),
            day2: super::day2::Day2::new(rt.worker_ign.clone()),
            ign_told: Default::default(),
        });
        super::timeline::follow_machine_config(&ctx, &events);
        Arc::new(Http {
            ctx,
            listeners: Listeners::default(),
            tls_listeners: Listeners::default(),
            tls: TlsConfig::default(),
            tasks,
            caps: rt.caps,
            bind: rt.bind,
            accept_log: rt.log_rate("http", Duration::from_secs(1)),
        })
    }

    /// Serve `listener` (bound for `addr`): plain HTTP, or HTTPS with the
    /// current [`TlsConfig`] when `tls`; `twin` marks the IPv6 copy of
    /// `http.listen` (dual-stack).
    fn start_listener(&self, addr: SocketAddr, listener: TcpListener, tls: bool, twin: bool) {
        // Accepted sockets inherit TCP_NODELAY from the listener (Linux):
        // one `setsockopt` per listener, not per connection. Without it,
        // each connection sets it (see `serve_listener`).
        let nodelay_inherited = socket2::SockRef::from(&listener)
            .set_tcp_nodelay(true)
            .is_ok();
        let what = if tls { "https" } else { "http" };
        if let Ok(local) = listener.local_addr() {
            info!("listening for {what} on {local}");
            if tls {
                self.ctx.https.set_listen(Some(local));
            } else {
                self.ctx.stats.set_listen(local, twin);
            }
        }
        let config = tls.then(|| self.tls.clone());
        let set = if tls {
            &self.tls_listeners
        } else {
            &self.listeners
        };
        let (ctx, caps, log) = (self.ctx.clone(), self.caps, self.accept_log.clone());
        set.start(&self.tasks, addr, format!("{what} listener {addr}"), |t| {
            serve_listener(ctx, listener, nodelay_inherited, config, caps, log, t)
        });
    }
}

impl Http {
    /// `/status` → `http`: this service's section.
    pub fn status(&self) -> super::status::HttpStatus {
        let mut s = self.ctx.stats.status();
        let plan = self.ctx.plan.load_full();
        if plan.cluster.rhcos.is_some() {
            s.netboot = self.ctx.boot.rows(&plan.cluster);
            s.netboot_state = Some(self.ctx.boot.store_status());
        }
        s.https = self.ctx.https.status();
        s
    }
}

#[async_trait]
impl Service for Http {
    fn name(&self) -> &'static str {
        "http"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        // `http.listen` and its IPv6 twin (dual-stack); the HTTPS
        // listener is bound apart below.
        let addrs: Vec<SocketAddr> = plan
            .cluster
            .listeners()
            .into_iter()
            .filter(|l| l.service == crate::model::catalogue::ServiceKind::Http && l.what == "http")
            .map(|l| l.addr)
            .collect();
        // The certificate is checked (made, when generated) before any
        // bind: a broken one fails the start or the reload, nothing else.
        let https = match plan.cluster.http.tls_listen {
            Some(a) => Some((a, super::https::load_cert(&plan).await?)),
            None => None,
        };
        let new = self.listeners.bind_tcp_missing(&addrs, self.bind).await?;
        let new_tls = match &https {
            Some((a, _)) => {
                self.tls_listeners
                    .bind_tcp_if_missing(*a, self.bind)
                    .await?
            }
            None => None,
        };
        Ok(Box::new(move || {
            warn_missing_dirs(&plan);
            self.ctx.plan.store(plan);
            super::timeline::sync_install_state(&self.ctx);
            self.listeners.close_except("http", &addrs);
            if addrs.len() < 2 {
                self.ctx.stats.clear_twin();
            }
            for (addr, l) in new {
                self.start_listener(addr, l, false, Some(&addr) != addrs.first());
            }
            let keep: Vec<SocketAddr> = https.iter().map(|(a, _)| *a).collect();
            self.tls_listeners.close_except("https", &keep);
            let cert = https.map(|(_, c)| c);
            self.ctx.https.use_cert(&self.tls, cert);
            if let (Some(l), Some(a)) = (new_tls, keep.first()) {
                self.start_listener(*a, l, true, false);
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::service(DRAIN))
            .await
    }

    fn metrics(&self, out: &mut String) {
        self.ctx.stats.metrics(out);
        self.ctx.https.metrics(out);
        if self.ctx.plan.load().cluster.rhcos.is_some() {
            self.ctx.boot.metrics(out);
        }
    }
}

/// The slot of an admitted connection; `None` (counted) when refused.
fn admitted_slot(
    ctx: &Ctx,
    peer: SocketAddr,
    admitted: Result<(ClientSlot, Option<std::net::IpAddr>), Refused>,
) -> Option<ClientSlot> {
    match admitted {
        Ok((slot, evicted)) => {
            if let Some(from) = evicted {
                debug!("http: closing an idle or stalled connection of {from} to serve {peer}");
                ctx.stats.evicted();
            }
            Some(slot)
        }
        Err(Refused::PerClient) => {
            // Closed at once: one host cannot hold every slot (slowloris).
            debug!("http connection closed: the client holds its limit");
            ctx.stats.refused_per_client();
            None
        }
        Err(Refused::Full) => {
            debug!("http connection closed: every slot is taken, none idle to give way");
            ctx.stats.refused_full();
            None
        }
    }
}

/// How an admitted connection is served: per-client and global limits
/// with eviction ([`clients`]), then the request-start (or TLS handshake)
/// and idle timeouts of [`httpconn`].
#[allow(clippy::too_many_arguments)]
async fn serve_conn(
    ctx: Arc<Ctx>,
    builders: Arc<Builders>,
    mut stream: LazyTcp,
    peer: SocketAddr,
    admitted: Result<(ClientSlot, Option<std::net::IpAddr>), Refused>,
    activity: Arc<Activity>,
    tls: Option<Option<Arc<rustls::ServerConfig>>>,
    shutdown: CancellationToken,
) {
    let Some(_slot) = admitted_slot(&ctx, peer, admitted) else {
        return;
    };
    // `Some(None)`: an HTTPS listener with no certificate (not yet, or no
    // longer, configured): nothing to serve with.
    let tls = match tls {
        Some(None) => return,
        Some(Some(cfg)) => Some(tokio_rustls::TlsAcceptor::from(cfg)),
        None => None,
    };
    let conn = Conn {
        ctx,
        builders,
        peer,
        activity,
        shutdown,
    };
    if let Some(acceptor) = tls {
        // Boxed: the TLS state would otherwise enlarge every plain
        // connection's future too.
        Box::pin(serve_tls(conn, acceptor, stream)).await;
        return;
    }
    // A client that connects and stays silent holds no slot for long;
    // hyper's header timeout then bounds each HTTP/1 request head, and the
    // idle timeout every connection with no request in flight (h2 too).
    let (proto, first) =
        match httpconn::request_start(&mut stream, HEADER_TIMEOUT, &conn.activity, &conn.shutdown)
            .await
        {
            Ok(p) => p,
            Err(end) => {
                debug!("http connection closed before a request: {end:?}");
                return;
            }
        };
    // A closing response's last bytes leave with the FIN (`lastsend`).
    let stream = LastSend::new(stream, conn.activity.clone());
    let stream = MinorVersion::new(httpconn::Replay::new(stream, first));
    conn.serve(proto, stream, Scheme::Http).await;
}

/// An admitted HTTPS connection: the handshake, bounded like a request
/// head, then the same connection life as plain HTTP with the HTTPS routes.
async fn serve_tls(conn: Conn, acceptor: tokio_rustls::TlsAcceptor, stream: LazyTcp) {
    let started = httpconn::tls_start(
        acceptor,
        stream,
        HEADER_TIMEOUT,
        &conn.activity,
        &conn.shutdown,
    )
    .await;
    match started {
        Ok((proto, s)) => {
            conn.ctx.https.handshake(true);
            conn.serve(proto, MinorVersion::new(s), Scheme::Https).await;
        }
        Err(end) => {
            if matches!(end, Ended::Failed(_) | Ended::Silent) {
                conn.ctx.https.handshake(false);
            }
            debug!("https connection closed before a request: {end:?}");
        }
    }
}

/// An admitted connection, its protocol known.
struct Conn {
    ctx: Arc<Ctx>,
    builders: Arc<Builders>,
    peer: SocketAddr,
    activity: Arc<Activity>,
    shutdown: CancellationToken,
}

impl Conn {
    /// Serve requests on `io` with the routes of `scheme` until it ends.
    async fn serve<I>(self, proto: httpconn::Proto, io: I, scheme: Scheme)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let Conn {
            ctx,
            builders,
            peer,
            activity,
            shutdown,
        } = self;
        ctx.stats.conn_open();
        let c2 = ctx.clone();
        let a2 = activity.clone();
        let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
            // hyper answers such a request last: its bytes go with the FIN.
            if matches!(req.version(), Version::HTTP_10 | Version::HTTP_11)
                && lastsend::asks_close(req.headers())
            {
                a2.set_closing();
            }
            let ctx = c2.clone();
            async move { Ok::<_, Infallible>(ctx.handle(req, peer, scheme).await) }
        });
        let t = httpconn::Timeouts {
            idle: IDLE_TIMEOUT,
            drain: DRAIN,
        };
        match httpconn::serve(&builders, proto, io, svc, &activity, t, &shutdown).await {
            Ended::Idle => ctx.stats.closed_idle(),
            Ended::Stalled => {
                debug!("http connection closed: no write progress for {WRITE_STALL_TIMEOUT:?}");
                ctx.stats.closed_stalled();
            }
            Ended::Failed(e) => debug!("http connection: {e}"),
            _ => {}
        }
        ctx.stats.conn_close();
    }
}

/// Accept and serve HTTP connections on `listener` until `shutdown`,
/// within `caps`, accept errors rate limited by `accept_log`.
async fn serve_listener(
    ctx: Arc<Ctx>,
    listener: TcpListener,
    nodelay_inherited: bool,
    tls: Option<TlsConfig>,
    caps: Caps,
    accept_log: Arc<LogRate>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    // Descriptors bound what is accepted; admission what is served (the
    // difference lets a newcomer be judged when every slot is taken).
    let limits = net::Limits {
        max_conns: Some(caps.http()),
        backoff: Duration::from_millis(100),
        drain: None,
    };
    let total = caps.http_served();
    let mut builder = httpconn::builder(HEADER_TIMEOUT);
    // A client that shuts down its write side after the request (busybox
    // nc, HTTP/1.0 tools) still gets the whole body.
    builder.http1().half_close(true);
    let builders = Arc::new(Builders::new(builder));
    // EMFILE and friends: back off instead of spinning; one line a second.
    let on_error = |e: &std::io::Error| {
        if let Some(tail) = accept_log.check("accept error", None) {
            warn!("http accept: {e}{tail}");
        }
    };
    // Connections join the reactor only when they have to wait (a one-shot
    // request that arrived with its connection never does: `lazytcp`).
    let listener = LazyListener::new(listener)?;
    net::serve(&listener, limits, &shutdown, on_error, |stream, peer| {
        let configured = ctx.plan.load().cluster.http.max_connections_per_client;
        let lim = clients::Limits {
            per_client: caps.http_per_client(configured),
            total,
        };
        let activity = Activity::new();
        let admitted = ctx.clients.admit(peer.ip(), &activity, lim);
        // HTTPS: the certificate current at accept (a reload swaps it).
        let acceptor = tls.as_ref().map(|t| t.load_full());
        if !nodelay_inherited {
            let _ = stream.set_nodelay(true);
        }
        // Boxed: the connection's state (hyper's h1 and h2 machines) is
        // large, and the task would otherwise copy it in and out whole.
        let conn = Box::pin(serve_conn(
            ctx.clone(),
            builders.clone(),
            stream,
            peer,
            admitted,
            activity,
            acceptor,
            shutdown.clone(),
        ));
        conn.instrument(info_span!("http", %peer))
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

impl crate::runtime::control::SyncControl for Http {
    fn part(&self) -> &'static str {
        "netboot"
    }

    fn sync_version(&self) -> u64 {
        self.ctx.boot.changes()
    }

    fn sync_state(&self) -> (u64, serde_json::Value) {
        let (changes, nodes) = self.ctx.boot.snapshot();
        (changes, serde_json::to_value(nodes).unwrap_or_default())
    }

    fn prepare<'a>(
        &'a self,
        peer: serde_json::Value,
        skipped: &mut crate::runtime::control::Skipped,
    ) -> Result<crate::runtime::control::Staged<'a>, crate::runtime::control::PartError> {
        let nodes: std::collections::BTreeMap<String, super::netboot::NodeBoot> =
            serde_json::from_value(peer).map_err(
                crate::runtime::control::PartError::undecodable("netboot state"),
            )?;
        let plan = self.ctx.plan.load_full();
        let known: Vec<String> = plan.cluster.nodes.iter().map(|n| n.name.clone()).collect();
        let nodes = self.ctx.boot.check_peer(nodes, &known, skipped);
        Ok(Box::new(move || self.ctx.boot.merge(nodes, &known)))
    }
}

#[cfg(test)]
mod tests {
    /// `start_listener` relies on it: an accepted socket inherits
    /// TCP_NODELAY from its listener (Linux), so no per-connection call.
    #[tokio::test]
    async fn accepted_sockets_inherit_nodelay_from_the_listener() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        socket2::SockRef::from(&l).set_tcp_nodelay(true).unwrap();
        let _c = tokio::net::TcpStream::connect(l.local_addr().unwrap())
            .await
            .unwrap();
        let (s, _) = l.accept().await.unwrap();
        assert!(s.nodelay().unwrap());
    }
}
