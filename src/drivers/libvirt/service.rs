//! `serve` integration (`libvirt.startOnServe: true`, feature `libvirt`).
//!
//! [`Libvirt::new`] runs before the other services bind: it brings the
//! cluster network up, so in appliance mode the bridge already carries
//! applianceIP when DNS, DHCP and HTTP bind to it. Its poller then does what
//! `vm up` does (pool, boot files, volumes, install domains) and every
//! [`POLL`] turns installs whose VM powered off into disk boots
//! ([`Driver::finish_installs`]), until shutdown. libvirt errors are logged
//! and retried; they never stop the appliance. A reload opens a driver for
//! the new plan and runs `up` again (idempotent: a node added to the file
//! gets its VM). Status (`/status` key `libvirt`) and metrics come from the
//! last poll.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::ArcSwap;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::driver::{Driver, NodeStatus};
use super::spec::Spec;
use crate::plan::Plan;
use crate::runtime::metrics::{Kind, family};
use crate::runtime::service::{Commit, Service, Tasks};
use crate::runtime::status::{LibvirtStatus, ServiceStatus};
use crate::runtime::status::{VmPhase, VmState};
use crate::runtime::sync::LockExt as _;
use crate::timeline::{Event, Events};

/// How often installs are checked for completion.
pub const POLL: Duration = Duration::from_secs(5);

/// The libvirt service (`libvirt.startOnServe`).
pub struct Libvirt {
    driver: ArcSwap<Driver>,
    /// The plan the current driver was opened for.
    plan: Mutex<Arc<Plan>>,
    /// `up` must run (start, or a reload changed the plan).
    up_needed: AtomicBool,
    status: Status,
    tasks: Tasks,
    /// The install timeline: evidence for finished installs, and verdicts.
    events: Events,
}

fn open(plan: &Arc<Plan>, network_up: bool, events: &Events) -> anyhow::Result<Driver> {
    let spec = Spec::new(plan)?;
    for w in &spec.warnings {
        warn!("{w}");
    }
    let mut d = Driver::open(spec)?;
    // Only our HTTP service sees the ignition fetches; with another server
    // the shut-off reason alone decides.
    if plan.cluster.http.enabled {
        let ev = events.clone();
        d.set_evidence(Box::new(move |node| ev.fetched_ignition(node)));
    }
    if network_up {
        for line in d.network_up()? {
            info!("libvirt: {line}");
        }
    }
    Ok(d)
}

impl Libvirt {
    /// Connect and bring the network up (blocking calls on the blocking pool).
    pub async fn new(plan: &Arc<Plan>, events: Events) -> anyhow::Result<Arc<Libvirt>> {
        let (p, ev) = (plan.clone(), events.clone());
        let driver = tokio::task::spawn_blocking(move || open(&p, true, &ev))
            .await
            .context("libvirt task")??;
        info!(
            "libvirt network {} ready on {}",
            driver.spec().network_name,
            driver.spec().uri
        );
        let lv = Arc::new(Libvirt {
            driver: ArcSwap::from_pointee(driver),
            plan: Mutex::new(plan.clone()),
            up_needed: AtomicBool::new(true),
            status: Status {
                network: Mutex::new(String::new()),
                nodes: Mutex::new(Vec::new()),
            },
            tasks: Tasks::new("libvirt"),
            events,
        });
        let stop = lv.tasks.shutdown_token();
        lv.tasks
            .spawn("libvirt poller", stop.clone(), lv.clone().poll(stop));
        Ok(lv)
    }

    async fn poll(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        loop {
            let d = self.driver.load_full();
            let me = self.clone();
            let need_up = self.up_needed.swap(false, Ordering::SeqCst);
            let res = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
                if need_up {
                    for line in d.up()? {
                        info!("libvirt: {line}");
                    }
                }
                for o in d.finish_installs()? {
                    me.events.record(match o.result {
                        Ok(()) => Event::InstallFinished { node: o.node },
                        Err(reason) => Event::InstallRejected {
                            node: o.node,
                            reason,
                        },
                    });
                }
                *me.status.network.locked() = d.network_status()?;
                *me.status.nodes.locked() = d.status()?;
                Ok(())
            })
            .await;
            let wait = match res {
                Ok(Ok(())) => POLL,
                Ok(Err(e)) => {
                    if need_up {
                        self.up_needed.store(true, Ordering::SeqCst);
                    }
                    warn!("libvirt: {e:#}; retrying in 30s");
                    Duration::from_secs(30)
                }
                Err(e) => {
                    if need_up {
                        self.up_needed.store(true, Ordering::SeqCst);
                    }
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

struct Status {
    network: Mutex<String>,
    nodes: Mutex<Vec<NodeStatus>>,
}

#[async_trait]
impl Service for Libvirt {
    fn name(&self) -> &'static str {
        "libvirt"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let same = Arc::ptr_eq(&self.plan.locked(), &plan);
        if same {
            return Ok(Box::new(|| {}));
        }
        let (p, ev) = (plan.clone(), self.events.clone());
        let driver = tokio::task::spawn_blocking(move || open(&p, false, &ev))
            .await
            .context("libvirt task")??;
        Ok(Box::new(move || {
            self.driver.store(Arc::new(driver));
            *self.plan.locked() = plan;
            self.up_needed.store(true, Ordering::SeqCst);
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::LIBVIRT_TASKS)
            .await
    }

    fn status(&self) -> ServiceStatus {
        let network = self.status.network.locked().clone();
        let nodes = self.status.nodes.locked().clone();
        ServiceStatus::Libvirt(LibvirtStatus { network, nodes })
    }

    fn metrics(&self, out: &mut String) {
        let nodes = self.status.nodes.locked();
        let mut f = family(
            out,
            "crc_appliance_libvirt_domain_running",
            Kind::Gauge,
            "1 when the node's VM is running.",
        );
        for n in nodes.iter() {
            f.sample(&[("node", &n.node)], u8::from(n.state == VmState::Running));
        }
        let mut f = family(
            out,
            "crc_appliance_libvirt_domain_installed",
            Kind::Gauge,
            "1 when the node's install finished (it boots its disk).",
        );
        for n in nodes.iter() {
            f.sample(
                &[("node", &n.node)],
                u8::from(n.phase == VmPhase::Installed),
            );
        }
    }
}
