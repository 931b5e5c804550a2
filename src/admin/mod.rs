//! Admin listener: /status, /metrics, status page and control API.
//!
//! Entry points used by the supervisor: [`bind`] acquires every socket (so a
//! port conflict fails before any service starts), then [`Bound::run`] serves
//! until `shutdown` is cancelled.

use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::hub::Hub;
use crate::plan::Plan;

/// Sockets acquired by [`bind`].
pub struct Bound {
    listener: TcpListener,
}

/// Bind this service's sockets and log `listening for admin on <addr>`.
pub async fn bind(plan: &Arc<Plan>) -> anyhow::Result<Bound> {
    let addr = plan.cluster.admin.listen;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("bind TCP {addr}"))?;
    info!("listening for admin on {}", listener.local_addr()?);
    Ok(Bound { listener })
}

impl Bound {
    /// Serve until `shutdown` is cancelled, then finish in-flight work and return.
    pub async fn run(self, _hub: Arc<Hub>, shutdown: CancellationToken) -> anyhow::Result<()> {
        // TODO: the HTTP API (issue 6); the socket is held so the port is ours.
        let _listener = self.listener;
        shutdown.cancelled().await;
        Ok(())
    }
}
