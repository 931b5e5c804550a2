//! The private health socket: `GET /api/health` on an abstract Unix socket
//! (`config::health_socket_name`: named after the cluster file), for
//! `crc-appliance health` — keepalived's track script.
//!
//! Why a socket of its own: the admin TCP listener is reachable from the
//! segment (HA puts it off loopback), and anything a host there can fill
//! — slots, the accept backlog — would fail the track script and make
//! keepalived drop the VIPs. An abstract socket is reachable only from
//! this host's network namespace (like loopback), needs no file (nothing
//! stale after a crash, nothing for the unit's file-system sandbox to
//! hide), and has its own [`HEALTH_SOCKET_CONNECTIONS`] slots.
//!
//! Invariants: it answers `GET /api/health` (and `HEAD`) only, 404 for
//! anything else; every connection is closed after [`CONN_BUDGET`]
//! whatever the client does; it is bound once per `serve` (the cluster
//! file, hence the name, never changes on a reload), and a second `serve`
//! of the same file in the same namespace fails to bind it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::{Method, Request, StatusCode, body::Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::UnixListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::runtime::limits::cap::HEALTH_SOCKET_CONNECTIONS;
use crate::serve::hub::Hub;

/// The most one connection may last (head, answer, all of it).
pub const CONN_BUDGET: Duration = Duration::from_secs(2);

/// Bind the abstract socket `name`.
pub fn bind(name: &str) -> anyhow::Result<UnixListener> {
    use std::os::linux::net::SocketAddrExt as _;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let l = std::os::unix::net::UnixListener::bind_addr(&addr).map_err(|e| {
        anyhow::anyhow!("bind the health socket @{name}: {e} (another serve of this cluster file?)")
    })?;
    l.set_nonblocking(true)?;
    Ok(UnixListener::from_std(l)?)
}

/// Serve the socket until `shutdown`.
pub async fn serve(
    hub: Arc<Hub>,
    listener: UnixListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let slots = Arc::new(Semaphore::new(HEALTH_SOCKET_CONNECTIONS));
    let mut conns = JoinSet::new();
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = slots.clone().acquire_owned() => p?,
        };
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    debug!("admin health socket accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        while conns.try_join_next().is_some() {}
        let hub = hub.clone();
        conns.spawn(async move {
            let _permit = permit;
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let hub = hub.clone();
                async move { Ok::<_, Infallible>(answer(&hub, &req)) }
            });
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(TokioTimer::new())
                .header_read_timeout(CONN_BUDGET)
                .keep_alive(false);
            let conn = b.serve_connection(TokioIo::new(stream), svc);
            if let Ok(Err(e)) = tokio::time::timeout(CONN_BUDGET, conn).await {
                debug!("admin health socket connection: {e}");
            }
        });
    }
    conns.abort_all();
    Ok(())
}

fn answer(hub: &Hub, req: &Request<Incoming>) -> super::Resp {
    let path = req.uri().path();
    match (req.method(), path) {
        (&Method::GET | &Method::HEAD, "/api/health") => super::health(hub),
        _ => super::json_resp(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"error": "this socket answers GET /api/health only"}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_is_bound_once() {
        let name = format!("crc-appliance-health-test-{}", std::process::id());
        let l = bind(&name).unwrap();
        let err = bind(&name).unwrap_err().to_string();
        assert!(err.contains("another serve"), "{err}");
        drop(l);
        let _again = bind(&name).unwrap();
    }
}
