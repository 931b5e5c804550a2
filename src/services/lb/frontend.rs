//! The frontends' data path: accept a client connection, refuse it when
//! the machine-config frontend does not serve its address or the
//! frontend is at its cap (the LB's share of the open-files limit, from
//! the service's run-time context), pick a backend (round robin over the
//! healthy, enabled ones of the client's family first; a failed connect
//! moves on to the next untried one) and forward the bytes ([`super::proxy`]).
//!
//! Invariants: nothing a client does ends the accept loop; a connection
//! that finds no backend is closed and counted, logged at most once per
//! pool and [`lograte::CLIENT_EVENTS`]; every connection is tracked by the
//! service's `conns` so that shutdown drains it. A connection loads the
//! LB's current [`Generation`] once, at accept: its ACL check, cap, backend
//! pick and timeouts are of one plan even when a reload commits meanwhile
//! (it lets the generation go once its backend is connected).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, info_span, warn};

use super::Lb;
use super::generation::Generation;
use super::state::{Backend, PoolKind};
use super::{proxy, select::Tried};
use crate::model::access::{self, Decision};
use crate::runtime::context::Context;
use crate::runtime::lograte::{self, LogRate};
use crate::runtime::net;
use crate::runtime::once;

/// The frontends' rate-limited lines (the serve's `lb accept` and `lb`
/// limiters).
pub(super) struct Logs {
    /// Accept errors: at most one line a second per frontend.
    accept: Arc<LogRate>,
    /// Client connections closed for want of a backend: at most one line
    /// per pool and [`lograte::CLIENT_EVENTS`], with the counts of the rest.
    client: Arc<LogRate>,
}

impl Logs {
    pub(super) fn new(ctx: &Context) -> Logs {
        Logs {
            accept: ctx.log_rate("lb accept", Duration::from_secs(1)),
            client: ctx.log_rate("lb", lograte::CLIENT_EVENTS),
        }
    }
}

/// The [`Logs::client`] key of a pool without a backend.
fn no_backend_key(kind: PoolKind) -> &'static str {
    match kind {
        PoolKind::Api => "api: no healthy enabled backend",
        PoolKind::MachineConfig => "machine-config: no healthy enabled backend",
        PoolKind::IngressHttp => "ingress-http: no healthy enabled backend",
        PoolKind::IngressHttps => "ingress-https: no healthy enabled backend",
    }
}

pub(super) async fn accept_loop(
    lb: Arc<Lb>,
    kind: PoolKind,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let stats = &lb.frontend(kind).stats;
    // The frontend's family: its connections prefer backends of it.
    let v6 = listener.local_addr().is_ok_and(|a| a.is_ipv6());
    loop {
        // EMFILE and friends: back off a little, keep serving; one line a second.
        let on_error = |e: &std::io::Error| {
            if let Some(tail) = lb.logs.accept.check(kind.as_str(), None) {
                warn!("lb {kind}: accept: {e}{tail}");
            }
        };
        let Some((stream, peer)) =
            net::accept(&listener, &shutdown, Duration::from_millis(50), on_error).await
        else {
            return Ok(());
        };
        stats.total.fetch_add(1, Ordering::Relaxed);
        let generation = lb.current.load_full();
        if kind == PoolKind::MachineConfig {
            if refuse_machine_config(&lb, &generation, peer) {
                stats.refused.fetch_add(1, Ordering::Relaxed);
                drop(stream);
                continue;
            }
            lb.events.machine_config_connect(peer.ip());
        }
        let cap = lb
            .frontend(kind)
            .cap(lb.caps.lb_scaled(generation.cfg().max_connections));
        let Ok(permit) = cap.try_acquire_owned() else {
            stats.over_cap.fetch_add(1, Ordering::Relaxed);
            debug!(%peer, "lb {kind}: over maxConnections; closing");
            drop(stream);
            continue;
        };
        let lb2 = lb.clone();
        let stop = lb.conns_stop.clone();
        let span = info_span!("lb", pool = %kind, %peer);
        lb.conns.spawn(
            async move {
                let stats = &lb2.frontend(kind).stats;
                stats.active.fetch_add(1, Ordering::Relaxed);
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = serve_conn(&lb2, generation, kind, stream, v6) => {}
                }
                stats.active.fetch_sub(1, Ordering::Relaxed);
                drop(permit);
            }
            .instrument(span),
        );
    }
}

/// Should the machine-config frontend refuse `peer` (close it at once,
/// never connect a backend)? The rendered configs the machine-config server
/// hands out carry the kubelet bootstrap credentials, so only nodes, the
/// appliance host and `loadBalancer.machineConfigClientCidrs` may connect.
/// The first refusal per address is logged as a warning.
fn refuse_machine_config(lb: &Lb, generation: &Generation, peer: SocketAddr) -> bool {
    let c = generation.cluster();
    if access::machine_config(c, peer.ip()) == Decision::Allow {
        return false;
    }
    let who = access::describe(c, peer.ip());
    match lb.refusals.check(peer.ip()) {
        Some(n) => warn!(
            "lb machine-config: connection from {} ({who}) refused: only nodes, the appliance host and loadBalancer.machineConfigClientCidrs may connect{}",
            peer.ip(),
            once::not_logged(n)
        ),
        None => debug!(%peer, "lb machine-config: refused ({who})"),
    }
    true
}

/// Connect to the next ready backend of the connection's generation,
/// retrying the others on failure: those of the client's frontend family
/// (`v6`) first, then the others.
async fn connect_backend(
    generation: &Generation,
    kind: PoolKind,
    v6: bool,
) -> Option<(Arc<Backend>, TcpStream)> {
    let pool = generation.pools.get(kind)?;
    let connect_timeout = generation.cfg().connect_timeout;
    let mut tried = Tried::default();
    loop {
        let eligible = |i: usize, family: bool| {
            let b = &pool.backends[i];
            !tried.contains(i) && (!family || b.key.addr.is_ipv6() == v6) && b.ready()
        };
        let n = pool.backends.len();
        let i = pool
            .rr
            .pick(n, |i| eligible(i, true))
            .or_else(|| pool.rr.pick(n, |i| eligible(i, false)))?;
        tried.insert(i);
        let b = &pool.backends[i];
        match tokio::time::timeout(connect_timeout, TcpStream::connect(b.key.addr)).await {
            Ok(Ok(s)) => return Some((b.clone(), s)),
            Ok(Err(e)) => {
                b.connect_failures.fetch_add(1, Ordering::Relaxed);
                debug!(
                    "lb {kind}: connect {} {}: {e}; trying the next",
                    b.key.node, b.key.addr
                );
            }
            Err(_) => {
                b.connect_failures.fetch_add(1, Ordering::Relaxed);
                debug!(
                    "lb {kind}: connect {} {} timed out; trying the next",
                    b.key.node, b.key.addr
                );
            }
        }
    }
}

/// Proxy one client connection (inside its `lb` span: pool and peer) with
/// the settings of `generation`, which it lets go of once connected (a
/// long connection does not keep an old plan alive).
async fn serve_conn(
    lb: &Lb,
    generation: Arc<Generation>,
    kind: PoolKind,
    mut client: TcpStream,
    v6: bool,
) {
    let stats = &lb.frontend(kind).stats;
    let _ = client.set_nodelay(true);
    let Some((b, mut backend)) = connect_backend(&generation, kind, v6).await else {
        stats.no_backend.fetch_add(1, Ordering::Relaxed);
        let peer = client.peer_addr().ok();
        match lb.logs.client.check(no_backend_key(kind), peer) {
            Some(tail) => warn!(
                "lb {kind}: no healthy enabled backend; closing client connections until one is (closed {}){tail}",
                peer.map_or_else(
                    || "a connection".to_string(),
                    |p| format!("the one from {p}")
                )
            ),
            None => debug!("lb {kind}: no backend available; closing"),
        }
        return;
    };
    let _ = backend.set_nodelay(true);
    b.active.fetch_add(1, Ordering::Relaxed);
    b.total.fetch_add(1, Ordering::Relaxed);
    let idle = generation.cfg().idle_timeout;
    drop(generation);
    let end = proxy::splice(&mut client, &mut backend, idle, &lb.pipes).await;
    b.active.fetch_sub(1, Ordering::Relaxed);
    let node = &b.key.node;
    match end {
        proxy::End::Done(up, down) => debug!(%node, up, down, "lb connection done"),
        proxy::End::Idle => debug!(%node, "lb connection idle timeout"),
        proxy::End::Error(e) => debug!(%node, error = %e, "lb connection error"),
    }
}
