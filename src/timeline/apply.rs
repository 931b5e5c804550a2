//! Applying one [`Event`] to the [`Timeline`]: one small step per kind of
//! observation.
//!
//! Invariants (the module's, see [`super`]): every step is idempotent and
//! keeps first times; ignition counts as install progress only within the
//! current attempt; only [`Event::InstallFinished`] and a single-node
//! master's reboot end an install.

use super::status::OperatorFetch;
use super::{Event, OPERATOR_FETCHES, Pool, Single, Timeline, first};

impl Timeline {
    /// Apply `ev`, observed at `now` (Unix seconds).
    pub fn apply(&mut self, now: u64, ev: Event) {
        match ev {
            Event::InstallRunning { node } => {
                let n = self.node(&node);
                if !n.install_running && n.t.install_finished.is_none() {
                    n.install_running = true;
                    n.t.install_attempts += 1;
                    first(&mut n.t.vm_started, now);
                }
            }
            Event::BmcPowerOn { node } => first(&mut self.node(&node).t.bmc_power_on, now),
            Event::BootIso { node } => first(&mut self.node(&node).t.boot_iso, now),
            Event::CsrApproved { node, serving } => {
                let n = &mut self.node(&node).t;
                first(
                    if serving {
                        &mut n.csr_serving
                    } else {
                        &mut n.csr_client
                    },
                    now,
                );
            }
            Event::NodeReady { node } => first(&mut self.node(&node).t.node_ready, now),
            Event::CsrAlert { node, message } => match message {
                Some(m) => {
                    self.csr_alerts.insert(node, m);
                }
                None => {
                    self.csr_alerts.remove(&node);
                }
            },
            Event::RegistryPulling { node, at } => first(&mut self.node(&node).t.pulling, at),
            Event::RegistryPulled { node, at } => first(&mut self.node(&node).t.pulled, at),
            Event::NetbootScript { node } => {
                first(&mut self.node(&node).t.netboot_script, now);
            }
            Event::InstallFinished { node } => {
                let n = self.node(&node);
                n.install_running = false;
                first(&mut n.t.install_finished, now);
            }
            Event::InstallRejected { node, reason } => self.install_rejected(&node, reason, now),
            Event::Lease { node, expires } => self.lease(&node, expires, now),
            Event::Rootfs { node, bytes, ms } => {
                let n = self.node(&node);
                if n.t.rootfs.is_none() {
                    n.t.rootfs = Some(now);
                    n.t.rootfs_bytes = Some(bytes);
                    n.t.rootfs_ms = Some(ms);
                }
            }
            Event::Ignition {
                node,
                client,
                file,
                at,
            } => match node {
                Some(node) => self.node_ignition(&node, at),
                None => self.operator_fetch(OperatorFetch {
                    unix_time: at,
                    client,
                    file,
                }),
            },
            Event::MachineConfigConnect { node } => self.machine_config_connect(&node, now),
            Event::Healthy { node, pool } => self.healthy(&node, pool, now),
            Event::BootstrapComplete => first(&mut self.bootstrap_complete, now),
            Event::BootstrapRemoved => first(&mut self.bootstrap_removed, now),
            Event::StaleMarker { path } => self.stale_marker = path,
            Event::SingleNode { node } => self.single_node(node),
            Event::BootstrapInPlaceWritten { at } => self.bip_written = at,
            Event::ApiDown { node } => self.api_down(&node, now),
        }
    }

    /// A rejected install: a new attempt starts, its steps cleared; the
    /// last ten reasons are kept.
    fn install_rejected(&mut self, node: &str, reason: String, now: u64) {
        let n = self.node(node);
        n.install_running = false;
        n.attempt_since = now;
        n.t.ignition = None;
        n.t.rootfs = None;
        n.t.rootfs_bytes = None;
        n.t.rootfs_ms = None;
        n.t.errors.push(reason);
        if n.t.errors.len() > 10 {
            n.t.errors.remove(0);
        }
    }

    /// A lease seen: the first one, or a renewal when it expires later.
    fn lease(&mut self, node: &str, expires: u64, now: u64) {
        let n = self.node(node);
        match n.lease_expires {
            None => first(&mut n.t.lease, now),
            Some(e) if expires > e => {
                n.t.lease_renewals += 1;
                n.t.lease_renewed = Some(now);
            }
            Some(_) => return,
        }
        n.lease_expires = Some(expires);
    }

    /// A node fetched its ignition at `at`: install progress only within
    /// the current attempt.
    fn node_ignition(&mut self, node: &str, at: u64) {
        let n = self.node(node);
        // A fetch carries its own time: one from before the install end
        // recorded after it still counts.
        if at >= n.attempt_since && n.t.install_finished.is_none_or(|f| at <= f) {
            first(&mut n.t.ignition, at);
        }
    }

    /// A fetch by no node: kept among the last [`OPERATOR_FETCHES`].
    fn operator_fetch(&mut self, fetch: OperatorFetch) {
        self.operator.insert(fetch);
        while self.operator.len() > OPERATOR_FETCHES {
            self.operator.pop_first();
        }
    }

    /// A machine-config connection from the node's address.
    fn machine_config_connect(&mut self, node: &str, now: u64) {
        let n = self.node(node);
        n.last_machine_config = Some(n.last_machine_config.map_or(now, |t| t.max(now)));
        // The live system fetches from the HTTP server; the first
        // 22623 connection after the install is the disk's first boot.
        if n.t.install_finished.is_some() || !n.install_running {
            first(&mut n.t.first_boot, now);
        }
    }

    /// A node healthy in an LB pool (and a single-node master's API phases).
    fn healthy(&mut self, node: &str, pool: Pool, now: u64) {
        if pool == Pool::Api
            && let Some(sn) = self.single.as_mut().filter(|s| s.node == node)
        {
            match (sn.bootstrap_api, sn.rebooted) {
                (None, _) => sn.bootstrap_api = Some(now),
                (Some(_), Some(_)) => first(&mut sn.node_api, now),
                (Some(_), None) => {}
            }
        }
        let n = self.node(node);
        let slot = match pool {
            Pool::Api => &mut n.t.api_healthy,
            Pool::MachineConfig => &mut n.t.mcs_healthy,
            Pool::Ingress => &mut n.t.ingress_healthy,
        };
        first(slot, now);
    }

    /// The single-node master named (a new one starts over), or none.
    fn single_node(&mut self, node: Option<String>) {
        match node {
            Some(node) if self.single.as_ref().is_none_or(|s| s.node != node) => {
                self.single = Some(Single {
                    node,
                    ..Single::default()
                });
            }
            Some(_) => {}
            None => self.single = None,
        }
    }

    /// The single-node master's API went down after its bootstrap API was
    /// up: disk written, rebooting (its install end).
    fn api_down(&mut self, node: &str, now: u64) {
        if let Some(sn) = self.single.as_mut().filter(|s| s.node == node)
            && sn.bootstrap_api.is_some()
            && sn.rebooted.is_none()
        {
            sn.rebooted = Some(now);
            let n = self.node(node);
            first(&mut n.t.install_finished, now);
        }
    }
}
