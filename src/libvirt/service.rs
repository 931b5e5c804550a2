//! `serve` integration (`libvirt.startOnServe: true`, feature `libvirt`).
//!
//! [`bind`] runs before the other services bind: it brings the cluster
//! network up, so in appliance mode the bridge already carries applianceIP
//! when DNS, DHCP and HTTP bind to it. [`Bound::run`] then does what `vm up`
//! does (pool, boot files, volumes, install domains) and every
//! [`POLL`] turns installs whose VM powered off into disk boots
//! ([`Driver::finish_installs`]), until shutdown. libvirt errors in `run` are
//! logged and retried; they never stop the appliance. Status (`/status` key
//! `libvirt`) and metrics come from the last poll.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::driver::{Driver, NodeStatus};
use super::spec::Spec;
use crate::hub::{Hub, StatusSource};
use crate::metrics::{Kind, family};
use crate::plan::Plan;

/// How often installs are checked for completion.
pub const POLL: Duration = Duration::from_secs(5);

pub struct Bound {
    driver: Arc<Driver>,
}

/// Connect and bring the network up (blocking calls on the blocking pool).
pub async fn bind(plan: &Arc<Plan>) -> anyhow::Result<Bound> {
    let spec = Spec::new(plan)?;
    for w in &spec.warnings {
        warn!("{w}");
    }
    let driver = tokio::task::spawn_blocking(move || -> anyhow::Result<Driver> {
        let d = Driver::open(spec)?;
        for line in d.network_up()? {
            info!("libvirt: {line}");
        }
        Ok(d)
    })
    .await
    .context("libvirt task")??;
    info!(
        "libvirt network {} ready on {}",
        driver.spec().network_name,
        driver.spec().uri
    );
    Ok(Bound {
        driver: Arc::new(driver),
    })
}

struct Status {
    network: Mutex<String>,
    nodes: Mutex<Vec<NodeStatus>>,
}

impl StatusSource for Status {
    fn name(&self) -> &'static str {
        "libvirt"
    }
    fn status(&self) -> serde_json::Value {
        let net = self
            .network
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        json!({ "network": net, "nodes": nodes })
    }
    fn metrics(&self, out: &mut String) {
        let nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let mut f = family(
            out,
            "crc_appliance_libvirt_domain_running",
            Kind::Gauge,
            "1 when the node's VM is running.",
        );
        for n in nodes.iter() {
            f.sample(
                &[("node", &n.node), ("phase", &n.phase)],
                u8::from(n.state == "running"),
            );
        }
    }
}

impl Bound {
    pub async fn run(self, hub: Arc<Hub>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let status = Arc::new(Status {
            network: Mutex::new(String::new()),
            nodes: Mutex::new(Vec::new()),
        });
        hub.register(status.clone());
        let mut up_done = false;
        loop {
            let d = self.driver.clone();
            let st = status.clone();
            let need_up = !up_done;
            let res = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
                if need_up {
                    for line in d.up()? {
                        info!("libvirt: {line}");
                    }
                }
                d.finish_installs()?;
                *st.network.lock().unwrap_or_else(|e| e.into_inner()) = d.network_status()?;
                *st.nodes.lock().unwrap_or_else(|e| e.into_inner()) = d.status()?;
                Ok(())
            })
            .await;
            let wait = match res {
                Ok(Ok(())) => {
                    up_done = true;
                    POLL
                }
                Ok(Err(e)) => {
                    warn!("libvirt: {e:#}; retrying in 30s");
                    Duration::from_secs(30)
                }
                Err(e) => {
                    warn!("libvirt task failed: {e}; retrying in 30s");
                    Duration::from_secs(30)
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}
