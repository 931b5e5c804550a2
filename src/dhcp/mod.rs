//! DHCPv4 server with MAC reservations.
//!
//! Entry points used by the supervisor: [`bind`] acquires every socket (so a
//! port conflict fails before any service starts), then [`Bound::run`] serves
//! until `shutdown` is cancelled.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::hub::Hub;
use crate::plan::Plan;

/// Sockets acquired by [`bind`].
pub struct Bound {
    _plan: Arc<Plan>,
}

/// Bind this service's sockets and log `listening for dhcp... on <addr>`.
pub async fn bind(plan: &Arc<Plan>) -> anyhow::Result<Bound> {
    Ok(Bound {
        _plan: plan.clone(),
    })
}

impl Bound {
    /// Serve until `shutdown` is cancelled, then finish in-flight work and return.
    pub async fn run(self, _hub: Arc<Hub>, shutdown: CancellationToken) -> anyhow::Result<()> {
        // TODO: not implemented yet.
        shutdown.cancelled().await;
        Ok(())
    }
}
