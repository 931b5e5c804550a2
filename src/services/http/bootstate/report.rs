//! What the install state reports: the per-node rows and the file's health
//! of `/status` (`http.netbootState`), and the Prometheus families. Read
//! only: nothing here changes the state.

use crate::model::cluster::Cluster;
use crate::runtime::metrics::{Kind, family};
use crate::services::http::status::{NetbootRow, NetbootStateStatus};

use super::{BootState, NodeBoot, ignition_in_attempt};

/// The state name in `/status`.
fn row_state(b: &NodeBoot) -> &'static str {
    if b.installed_at.is_some() {
        "installed"
    } else if ignition_in_attempt(b) {
        "unconfirmed"
    } else if b.install_script_at.is_some() {
        "installing"
    } else {
        "pending"
    }
}

impl BootState {
    #[cfg(test)]
    pub(super) fn rows_state(&self, node: &str) -> String {
        let b = self.inner().nodes.get(node).cloned().unwrap_or_default();
        row_state(&b).to_string()
    }

    /// Rows for `/status`.
    pub fn rows(&self, c: &Cluster) -> Vec<NetbootRow> {
        let st = self.inner();
        c.nodes
            .iter()
            .map(|n| {
                let b = st.nodes.get(&n.name).cloned().unwrap_or_default();
                NetbootRow {
                    node: n.name.clone(),
                    state: row_state(&b).to_string(),
                    install_script_at: b.install_script_at,
                    ignition_at: b.ignition_at,
                    installed_at: b.installed_at,
                    install_finished_at: b.install_finished_at,
                    booted_at: b.booted_at,
                    assumed: b.assumed,
                }
            })
            .collect()
    }

    /// The file's health for `/status`.
    pub fn store_status(&self) -> NetbootStateStatus {
        let st = self.inner();
        NetbootStateStatus {
            file: self.path.display().to_string(),
            durable: st.durable(),
            unwritten_changes: st.changes - st.written.min(st.changes),
            write_error: st.write_error.clone(),
            load_error: st.load_error.clone(),
            writes: st.writes,
            write_failures: st.write_failures,
        }
    }

    /// Its Prometheus families.
    pub fn metrics(&self, out: &mut String) {
        let st = self.store_status();
        family(
            out,
            "crc_appliance_http_netboot_state_durable",
            Kind::Gauge,
            "1 when every network-boot install state change is on disk.",
        )
        .sample(&[], u8::from(st.durable));
        family(
            out,
            "crc_appliance_http_netboot_state_write_failures_total",
            Kind::Counter,
            "Failed writes of the network-boot install state file.",
        )
        .sample(&[], st.write_failures);
    }
}
