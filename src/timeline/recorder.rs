//! The socket side of the timeline: one [`Recorder`] per `serve`, held by
//! the Hub and handed to the services ([`Events`]), which record what
//! happens when it happens: the DHCP service a lease it bound or renewed,
//! the LB a backend's health flip, bootstrap completion, its removal and
//! an ignored marker, and every machine-config connection; HTTP its
//! ignition fetches, rootfs downloads, boot ISOs, iPXE scripts, install
//! ends and the bootstrap-in-place file's time; the registry a node's
//! first request and its pull's end; the libvirt driver an install VM
//! running and its verdicts; BMC power-ons; the CSR approver its
//! approvals.
//!
//! Invariants: nothing samples the services' status (the timeline never
//! reads another module's type, and reading `/status` records nothing);
//! an event is applied under one lock at the time it is recorded (or at
//! the time it carries: fetches, registry steps); a subscriber
//! ([`Recorder::subscribe`]) hears every event applied, local or from the
//! HA peer, after the lock is released, so it may read or record again.

use std::net::{IpAddr, Ipv4Addr};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::shared::{Shared, is_shared};
use super::{Event, Timeline};
use crate::model::cluster::MacAddr;
use crate::model::cluster::Role;
use crate::plan::Plan;
use crate::runtime::metrics::{Kind, family};
use crate::runtime::sync::LockExt as _;
use crate::timeline::status::{ClusterPhase, TimelineStatus};

/// The handle the services report to.
pub type Events = Arc<Recorder>;

/// Told of every event applied ([`Recorder::subscribe`]).
type Subscriber = Arc<dyn Fn(&Event) + Send + Sync>;

struct NodeRef {
    name: String,
    role: Role,
    ip: Ipv4Addr,
    /// The node's IPv6 address (dual-stack clusters).
    ipv6: Option<std::net::Ipv6Addr>,
    mac: MacAddr,
}

/// The timeline of the running cluster, behind one lock.
pub struct Recorder {
    tl: Mutex<Timeline>,
    /// The events shared with an HA peer (locked after `tl`).
    shared: Mutex<Shared>,
    nodes: ArcSwap<Vec<NodeRef>>,
    /// `loadBalancer.csrHintAfter` in seconds.
    csr_hint_after: AtomicU64,
    /// Told of each event after it was applied (lock released).
    subscribers: ArcSwap<Vec<Subscriber>>,
    /// Unit tests: every event recorded, in order ([`Recorder::recorded`]).
    #[cfg(test)]
    recorded: Mutex<Vec<Event>>,
}

use crate::runtime::clock::unix_now as now;

fn refs(plan: &Plan) -> Vec<NodeRef> {
    plan.cluster
        .nodes
        .iter()
        .map(|n| NodeRef {
            name: n.name.clone(),
            role: n.role,
            ip: n.ip,
            ipv6: n.ipv6.filter(|_| plan.cluster.network.ipv6.is_some()),
            mac: n.mac,
        })
        .collect()
}

/// The install mode's event: the single-node master, if any.
fn single_node(plan: &Plan) -> Event {
    Event::SingleNode {
        node: plan.cluster.single_node().map(|n| n.name.clone()),
    }
}

impl Recorder {
    pub fn new(plan: &Plan) -> Events {
        let r = Arc::new(Recorder {
            tl: Mutex::new(Timeline::default()),
            shared: Mutex::new(Shared::default()),
            nodes: ArcSwap::from_pointee(refs(plan)),
            csr_hint_after: AtomicU64::new(plan.cluster.lb.csr_hint_after.as_secs()),
            subscribers: ArcSwap::from_pointee(Vec::new()),
            #[cfg(test)]
            recorded: Mutex::new(Vec::new()),
        });
        r.record(single_node(plan));
        r
    }

    /// A reload may add or remove nodes, or change the hint's threshold.
    pub fn set_plan(&self, plan: &Plan) {
        self.nodes.store(Arc::new(refs(plan)));
        self.csr_hint_after
            .store(plan.cluster.lb.csr_hint_after.as_secs(), Ordering::Relaxed);
        self.record(single_node(plan));
    }

    fn lock(&self) -> MutexGuard<'_, Timeline> {
        self.tl.locked()
    }

    /// Apply `ev`, observed now, then tell the subscribers.
    pub fn record(&self, ev: Event) {
        #[cfg(test)]
        self.recorded.locked().push(ev.clone());
        let told = self.has_subscribers().then(|| ev.clone());
        {
            let mut tl = self.lock();
            self.apply_local(&mut tl, now(), ev);
        }
        if let Some(ev) = told {
            self.tell(&ev);
        }
    }

    /// Call `f` with every event applied from now on (recorded here or
    /// taken from the HA peer), outside the timeline's lock. A service
    /// that acts on another's observation (HTTP's install state on the
    /// LB's machine-config connections) subscribes instead of polling.
    pub fn subscribe(&self, f: impl Fn(&Event) + Send + Sync + 'static) {
        let f: Subscriber = Arc::new(f);
        self.subscribers.rcu(|v| {
            let mut v = Vec::clone(v);
            v.push(f.clone());
            v
        });
    }

    fn has_subscribers(&self) -> bool {
        !self.subscribers.load().is_empty()
    }

    /// Call each subscriber, no lock held (one may record again).
    fn tell(&self, ev: &Event) {
        for f in self.subscribers.load_full().iter() {
            f(ev);
        }
    }

    /// Unit tests: the events recorded since the last call.
    #[cfg(test)]
    pub fn recorded(&self) -> Vec<Event> {
        std::mem::take(&mut *self.recorded.locked())
    }

    /// Apply a local observation; one that changed the timeline and is of
    /// a shared kind enters the HA log.
    fn apply_local(&self, tl: &mut Timeline, at: u64, ev: Event) {
        if !is_shared(&ev) {
            tl.apply(at, ev);
        } else if tl.apply_changed(at, ev.clone()) {
            self.shared.locked().note(at, ev);
        }
    }

    /// The node whose address `ip` is.
    pub fn node_by_ip(&self, ip: IpAddr) -> Option<String> {
        let (v4, v6) = match ip {
            IpAddr::V4(v4) => (Some(v4), None),
            IpAddr::V6(v6) => (v6.to_ipv4_mapped(), Some(v6)),
        };
        self.nodes
            .load()
            .iter()
            .find(|n| match v4 {
                Some(v4) => n.ip == v4,
                None => v6.is_some() && n.ipv6 == v6,
            })
            .map(|n| n.name.clone())
    }

    /// A client connected to the machine-config frontend (the LB).
    pub fn machine_config_connect(&self, client: IpAddr) {
        if let Some(node) = self.node_by_ip(client) {
            self.record(Event::MachineConfigConnect { node });
        }
    }

    /// A complete download of the live rootfs (the HTTP service).
    pub fn rootfs(&self, client: IpAddr, bytes: u64, took: Duration) {
        if let Some(node) = self.node_by_ip(client) {
            let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
            self.record(Event::Rootfs { node, bytes, ms });
        }
    }

    /// The latest machine-config connection from `node`'s address.
    pub fn last_machine_config(&self, node: &str) -> Option<u64> {
        self.lock().last_machine_config(node)
    }

    /// Whether `node` fetched its ignition in its current install attempt.
    pub fn fetched_ignition(&self, node: &str) -> bool {
        self.lock().fetched_ignition(node)
    }

    /// The node whose MAC address `mac` is.
    pub fn node_by_mac(&self, mac: MacAddr) -> Option<String> {
        self.nodes
            .load()
            .iter()
            .find(|n| n.mac == mac)
            .map(|n| n.name.clone())
    }

    /// The `/status` section.
    pub fn view(&self) -> TimelineStatus {
        let nodes: Vec<(String, Role)> = self
            .nodes
            .load()
            .iter()
            .map(|n| (n.name.clone(), n.role))
            .collect();
        let after = self.csr_hint_after.load(Ordering::Relaxed);
        self.lock().view_at(&nodes, now(), after)
    }

    /// `crc_appliance_timeline_*`: the phase (one series per phase, 1 for
    /// the current one) and each node's step times.
    pub fn metrics(&self, out: &mut String) {
        let v = self.view();
        let mut f = family(
            out,
            "crc_appliance_timeline_phase",
            Kind::Gauge,
            "1 for the cluster's current install phase, 0 for the others.",
        );
        for p in ClusterPhase::ALL {
            f.sample(&[("phase", &p.as_str())], u8::from(v.phase == p));
        }
        let mut f = family(
            out,
            "crc_appliance_timeline_step_timestamp_seconds",
            Kind::Gauge,
            "Unix time a node first reached an install step.",
        );
        for n in &v.nodes {
            for (step, _, at) in super::render::steps(n) {
                if let Some(at) = at {
                    f.sample(&[("node", &n.node), ("step", &step)], at);
                }
            }
        }
        let mut f = family(
            out,
            "crc_appliance_timeline_install_attempts",
            Kind::Gauge,
            "Install attempts started per node (a rejected install runs again).",
        );
        for n in &v.nodes {
            f.sample(&[("node", &n.node)], n.install_attempts);
        }
    }
}

/// The HA pair's `timeline` part (`serve::hasync`, `super::shared`): the
/// log out, the peer's unseen events applied at their own time.
impl crate::runtime::control::SyncControl for Recorder {
    fn part(&self) -> &'static str {
        "timeline"
    }

    fn sync_version(&self) -> u64 {
        self.shared.locked().changes()
    }

    fn sync_state(&self) -> (u64, serde_json::Value) {
        let (changes, log) = self.shared.locked().log();
        (changes, serde_json::to_value(log).unwrap_or_default())
    }

    fn prepare<'a>(
        &'a self,
        peer: serde_json::Value,
        skipped: &mut crate::runtime::control::Skipped,
    ) -> Result<crate::runtime::control::Staged<'a>, crate::runtime::control::PartError> {
        // Each event on its own: one this version does not know (a newer
        // peer) is skipped and counted, never fatal.
        let peer: Vec<serde_json::Value> = serde_json::from_value(peer).map_err(
            crate::runtime::control::PartError::undecodable("timeline events"),
        )?;
        let known: Vec<String> = self.nodes.load().iter().map(|n| n.name.clone()).collect();
        let events = super::shared::check_peer(peer, &known, now(), skipped);
        Ok(Box::new(move || {
            let subscribed = self.has_subscribers();
            let (n, told) = {
                let mut tl = self.lock();
                let new = self.shared.locked().take(events);
                let n = new.len();
                let mut told = Vec::new();
                for s in new {
                    if subscribed {
                        told.push(s.event.clone());
                    }
                    tl.apply(s.at, s.event);
                }
                (n, told)
            };
            for ev in &told {
                self.tell(ev);
            }
            n
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        use crate::config::fixture::{BOOTSTRAP, MASTER_0, plan};
        plan(&[BOOTSTRAP, MASTER_0], "")
    }

    /// A subscriber hears each event recorded here or taken from the HA
    /// peer, outside the lock (it may read the timeline and record).
    #[test]
    fn subscribers_hear_local_and_peer_events_and_may_record() {
        use crate::runtime::control::SyncControl as _;
        let p = plan();
        let (a, b) = (Recorder::new(&p), Recorder::new(&p));
        let heard = Arc::new(Mutex::new(Vec::new()));
        let weak = Arc::downgrade(&b);
        let h = heard.clone();
        b.subscribe(move |ev| {
            h.locked().push(ev.clone());
            if let (Event::MachineConfigConnect { node }, Some(b)) = (ev, weak.upgrade())
                && b.last_machine_config(node).is_some()
            {
                b.record(Event::InstallFinished { node: node.clone() });
            }
        });
        a.machine_config_connect("10.9.0.10".parse().unwrap());
        let (_, doc) = a.sync_state();
        assert_eq!(b.merge_state(doc).unwrap(), 1);
        let connect = Event::MachineConfigConnect {
            node: "master-0".into(),
        };
        let finished = Event::InstallFinished {
            node: "master-0".into(),
        };
        assert_eq!(*heard.locked(), [connect, finished]);
        assert!(b.view().nodes[1].install_finished.is_some());
    }

    /// HA: B applies what A observed (at A's times) once, relays it, and
    /// A takes nothing back.
    #[test]
    fn ha_peer_events_merge_once_without_ping_pong() {
        use crate::runtime::control::SyncControl as _;
        let p = plan();
        let a = Recorder::new(&p);
        let b = Recorder::new(&p);
        a.record(Event::NetbootScript {
            node: "master-0".into(),
        });
        a.record(Event::InstallFinished {
            node: "master-0".into(),
        });
        // Repeats that change nothing are not logged.
        a.record(Event::InstallFinished {
            node: "master-0".into(),
        });
        let (va, doc) = a.sync_state();
        assert_eq!(va, 2);
        let (vb, _) = b.sync_state();
        assert_eq!(b.merge_state(doc.clone()).unwrap(), 2);
        let row = |r: &Recorder| {
            r.view()
                .nodes
                .into_iter()
                .find(|n| n.node == "master-0")
                .unwrap()
        };
        let (ra, rb) = (row(&a), row(&b));
        assert!(rb.install_finished.is_some());
        assert_eq!(rb.install_finished, ra.install_finished);
        assert_eq!(rb.netboot_script, ra.netboot_script);
        // B relays them, but A has seen them: nothing comes back.
        let (vb2, back) = b.sync_state();
        assert_ne!(vb2, vb);
        assert_eq!(a.merge_state(back.clone()).unwrap(), 0);
        // A restarted A (empty timeline) gets its own events back.
        let a2 = Recorder::new(&p);
        assert_eq!(a2.merge_state(back).unwrap(), 2);
        assert_eq!(row(&a2).install_finished, ra.install_finished);
        assert_eq!(a.sync_state().0, va);
        // Every exchange resends the whole log: taken once only.
        assert_eq!(b.merge_state(doc).unwrap(), 0);
        let refused = b.merge_state(serde_json::json!({"not": "a log"}));
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .starts_with("timeline events: ")
        );
    }
}
