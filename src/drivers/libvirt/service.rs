//! `serve` integration (`libvirt.startOnServe: true`, feature `libvirt`).
//!
//! The driver runs in the libvirt helper process ([`super::client`]):
//! [`Libvirt::new`] starts it, and `serve` fails as soon as it exits on its
//! own, the rule for any task that dies. [`Libvirt::new`] runs before the
//! other services bind: it brings the
//! cluster network up, so in appliance mode the bridge already carries
//! applianceIP when DNS, DHCP and HTTP bind to it. Its poller then does what
//! `vm up` does (pool, boot files, volumes, install domains) and every
//! [`POLL`] turns installs whose VM powered off into disk boots
//! (`Driver::finish_installs` in the helper), until shutdown. libvirt errors are logged
//! and retried; they never stop the appliance. A reload opens a driver for
//! the new plan in the helper (a new generation, polled once committed)
//! and runs `up` again (idempotent: a node added to the file
//! gets its VM). Status (`/status` key `libvirt`) and metrics come from the
//! last poll; the install timeline hears from each poll what changed: an
//! install VM started ([`Event::InstallRunning`], once per start) and the
//! helper's verdicts (finished or rejected), told after the poll's status
//! is in place (a status read that shows the news shows its VMs).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::client::Helper;
use super::proto::{Polled, Request, Response};
use super::spec::Spec;
use crate::drivers::libvirt::status::{LibvirtStatus, VmRow};
use crate::drivers::libvirt::status::{VmPhase, VmState};
use crate::plan::Plan;
use crate::runtime::metrics::{Kind, family};
use crate::runtime::service::{Commit, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use crate::timeline::{Event, Events};

/// How often installs are checked for completion.
pub const POLL: Duration = Duration::from_secs(5);

/// How long the helper gets to exit at shutdown before it is killed.
const HELPER_GRACE: Duration = Duration::from_secs(2);

/// The libvirt service (`libvirt.startOnServe`).
pub struct Libvirt {
    helper: Arc<Helper>,
    /// The plan the committed driver was opened for, and its nodes.
    plan: Mutex<(Arc<Plan>, Vec<String>)>,
    /// The helper's driver generation in use (a reload commits a new one).
    current: AtomicU64,
    next: AtomicU64,
    /// `up` must run (start, or a reload changed the plan).
    up_needed: AtomicBool,
    status: Status,
    tasks: Tasks,
    /// The install timeline: evidence for finished installs, and verdicts.
    events: Events,
}

fn spec(plan: &Plan) -> anyhow::Result<(Spec, Vec<String>)> {
    let spec = Spec::new(plan)?;
    for w in &spec.warnings {
        warn!("{w}");
    }
    let nodes = spec.nodes.iter().map(|n| n.node.clone()).collect();
    Ok((spec, nodes))
}

impl Libvirt {
    /// Start the helper, connect and bring the network up.
    pub async fn new(
        plan: &Arc<Plan>,
        events: Events,
        rt: &crate::runtime::context::Context,
    ) -> anyhow::Result<Arc<Libvirt>> {
        let (sp, nodes) = spec(plan)?;
        let helper = Arc::new(Helper::spawn(&rt.helpers)?);
        info!(
            "libvirt helper {} started (pid {})",
            helper.path().display(),
            helper.pid()
        );
        let (network, uri) = (sp.network_name.clone(), sp.uri.clone());
        let open = Request::Open {
            id: 0,
            spec: Box::new(sp),
            network_up: true,
        };
        if let Response::Opened { lines, .. } = helper.call(open).await? {
            for line in lines {
                info!("libvirt: {line}");
            }
        }
        info!("libvirt network {network} ready on {uri}");
        let lv = Arc::new(Libvirt {
            helper,
            plan: Mutex::new((plan.clone(), nodes)),
            current: AtomicU64::new(0),
            next: AtomicU64::new(1),
            up_needed: AtomicBool::new(true),
            status: Status {
                network: Mutex::new(String::new()),
                nodes: Mutex::new(Vec::new()),
            },
            tasks: rt.tasks("libvirt"),
            events,
        });
        let stop = lv.tasks.shutdown_token();
        if let Some(child) = lv.helper.take_child() {
            lv.tasks.spawn(
                "libvirt helper",
                stop.clone(),
                lv.clone().watch(child, stop.clone()),
            );
        }
        lv.tasks
            .spawn("libvirt poller", stop.clone(), lv.clone().poll(stop));
        Ok(lv)
    }

    /// `serve` fails when the helper exits on its own (like any task).
    async fn watch(
        self: Arc<Self>,
        mut child: tokio::process::Child,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        tokio::select! {
            status = child.wait() => {
                let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                anyhow::bail!(
                    "the libvirt helper {} (pid {}) exited unexpectedly ({status})",
                    self.helper.path().display(),
                    self.helper.pid()
                )
            }
            _ = shutdown.cancelled() => {
                self.helper.stop(&mut child, HELPER_GRACE).await;
                Ok(())
            }
        }
    }

    /// The nodes that fetched their ignition, when our HTTP service can
    /// tell (with another server the shut-off reason alone decides).
    fn evidence(&self, plan: &Plan, nodes: &[String]) -> Option<Vec<String>> {
        plan.cluster.http.enabled.then(|| {
            nodes
                .iter()
                .filter(|n| self.events.fetched_ignition(n))
                .cloned()
                .collect()
        })
    }

    /// One poll; what `up` did.
    async fn poll_once(&self, up: bool) -> anyhow::Result<Vec<String>> {
        let fetched = {
            let p = self.plan.locked();
            self.evidence(&p.0, &p.1)
        };
        let req = Request::Poll {
            id: self.current.load(Ordering::SeqCst),
            up,
            fetched,
        };
        let Response::Polled(p) = self.helper.call(req).await? else {
            anyhow::bail!("libvirt helper: unexpected answer to a poll");
        };
        let Polled {
            lines,
            installs,
            network,
            nodes,
        } = *p;
        for line in &lines {
            info!("libvirt: {line}");
        }
        let verdicts: Vec<String> = installs.iter().map(|i| i.node.clone()).collect();
        // The section first: whoever sees the timeline's news sees the VMs
        // it is about.
        *self.status.network.locked() = network;
        let started = {
            let mut rows = self.status.nodes.locked();
            let started = installs_started(&rows, &nodes, &verdicts);
            *rows = nodes;
            started
        };
        for i in installs {
            self.events.record(match i.rejected {
                None => Event::InstallFinished { node: i.node },
                Some(reason) => Event::InstallRejected {
                    node: i.node,
                    reason,
                },
            });
        }
        for node in started {
            self.events.record(Event::InstallRunning { node });
        }
        Ok(lines)
    }

    /// `node boot NODE`: `vm up` now (idempotent: it creates and starts
    /// the node's VM if it has none, starts an installed one that is shut
    /// off), then what was done for the node or the state its VM is in.
    pub async fn boot(&self, node: &str) -> anyhow::Result<Vec<String>> {
        let lines = self.poll_once(true).await?;
        let row = self
            .status
            .nodes
            .locked()
            .iter()
            .find(|r| r.node == node)
            .cloned();
        let Some(row) = row else {
            anyhow::bail!("node {node} has no VM in the libvirt plan");
        };
        let mut done: Vec<String> = lines
            .into_iter()
            .filter(|l| l.split_whitespace().any(|w| w == row.domain))
            .collect();
        if done.is_empty() {
            let state = serde_json::to_value(row.state).unwrap_or_default();
            let phase = serde_json::to_value(row.phase).unwrap_or_default();
            done.push(format!(
                "{} is already {} ({})",
                row.domain,
                state.as_str().unwrap_or("?"),
                phase.as_str().unwrap_or("?")
            ));
        }
        Ok(done)
    }

    async fn poll(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        loop {
            let need_up = self.up_needed.swap(false, Ordering::SeqCst);
            let res = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                r = self.poll_once(need_up) => r.map(drop),
            };
            let wait = match res {
                Ok(()) => POLL,
                Err(e) => {
                    if need_up {
                        self.up_needed.store(true, Ordering::SeqCst);
                    }
                    warn!("libvirt: {e:#}; retrying in 30s");
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
    nodes: Mutex<Vec<VmRow>>,
}

/// Whether `r` is an install VM that runs.
fn installing(r: &VmRow) -> bool {
    r.state == VmState::Running && r.phase == VmPhase::Install
}

/// The nodes whose install VM runs in `now` and did not at the last poll
/// (`before`), or got a verdict in this poll (`verdicts`: a rejected
/// install started again between two polls is a new attempt): the
/// timeline's [`Event::InstallRunning`], told once per start.
fn installs_started(before: &[VmRow], now: &[VmRow], verdicts: &[String]) -> Vec<String> {
    now.iter()
        .filter(|r| installing(r))
        .filter(|r| {
            verdicts.contains(&r.node) || !before.iter().any(|b| b.node == r.node && installing(b))
        })
        .map(|r| r.node.clone())
        .collect()
}

impl Libvirt {
    /// `/status` → `libvirt`: this service's section.
    pub fn status(&self) -> super::status::LibvirtStatus {
        let network = self.status.network.locked().clone();
        let nodes = self.status.nodes.locked().clone();
        LibvirtStatus { network, nodes }
    }
}

#[async_trait]
impl Service for Libvirt {
    fn name(&self) -> &'static str {
        "libvirt"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let same = Arc::ptr_eq(&self.plan.locked().0, &plan);
        if same {
            return Ok(Box::new(|| {}));
        }
        let (sp, nodes) = spec(&plan)?;
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let open = Request::Open {
            id,
            spec: Box::new(sp),
            network_up: false,
        };
        self.helper.call(open).await.context("libvirt helper")?;
        Ok(Box::new(move || {
            self.current.store(id, Ordering::SeqCst);
            *self.plan.locked() = (plan, nodes);
            self.up_needed.store(true, Ordering::SeqCst);
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::LIBVIRT_TASKS)
            .await
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cluster::Role;

    fn row(node: &str, state: VmState, phase: VmPhase) -> VmRow {
        VmRow {
            node: node.into(),
            domain: format!("c-{node}"),
            role: Role::Master,
            state,
            phase,
            mac: String::new(),
            ip: String::new(),
            serial_log: String::new(),
        }
    }

    /// Told when the install VM starts, not at every poll while it runs;
    /// again for a new attempt (a verdict), not for a disk boot.
    #[test]
    fn an_install_start_is_told_once_per_attempt() {
        let off = [row("m0", VmState::ShutOff, VmPhase::Install)];
        let on = [row("m0", VmState::Running, VmPhase::Install)];
        let none: [String; 0] = [];
        assert_eq!(installs_started(&[], &on, &none), ["m0"], "first poll");
        assert_eq!(installs_started(&off, &on, &none), ["m0"]);
        assert!(
            installs_started(&on, &on, &none).is_empty(),
            "still running"
        );
        assert!(installs_started(&on, &off, &none).is_empty());
        assert_eq!(installs_started(&on, &on, &["m0".into()]), ["m0"], "again");
        let disk = [row("m0", VmState::Running, VmPhase::Installed)];
        assert!(installs_started(&on, &disk, &["m0".into()]).is_empty());
    }
}
