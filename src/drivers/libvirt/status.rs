//! `/status` → `libvirt`: the types of the libvirt driver's section (one
//! row per node's domain, its state and install phase).

use serde::{Deserialize, Serialize};

use crate::model::cluster::Role;

/// `libvirt`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LibvirtStatus {
    pub network: String,
    pub nodes: Vec<VmRow>,
}

/// One row of `vm status` and of `libvirt.nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmRow {
    pub node: String,
    pub domain: String,
    pub role: Role,
    pub state: VmState,
    pub phase: VmPhase,
    pub mac: String,
    pub ip: String,
    /// The serial console log (`vm console NODE` prints it).
    #[serde(default)]
    pub serial_log: String,
}

/// A domain's libvirt state in `libvirt.nodes[]` (`absent`: not defined).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VmState {
    #[serde(rename = "absent")]
    Absent,
    #[serde(rename = "no state")]
    NoState,
    #[serde(rename = "running")]
    Running,
    #[serde(rename = "blocked")]
    Blocked,
    #[serde(rename = "paused")]
    Paused,
    #[serde(rename = "shutting down")]
    ShuttingDown,
    #[serde(rename = "shut off")]
    ShutOff,
    #[serde(rename = "crashed")]
    Crashed,
    #[serde(rename = "suspended")]
    Suspended,
    #[serde(rename = "unknown")]
    Unknown,
}

/// Where a node's domain is in its install (`libvirt.nodes[]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VmPhase {
    /// The live ISO is running the installer.
    #[serde(rename = "install")]
    Install,
    /// Defined for the install, not finished.
    #[serde(rename = "installing")]
    Installing,
    /// Boots from its disk.
    #[serde(rename = "installed")]
    Installed,
    /// A domain of that name not made by this appliance.
    #[serde(rename = "foreign")]
    Foreign,
    /// No domain.
    #[serde(rename = "-")]
    None,
}

crate::runtime::status::named!(VmState {
    Absent => "absent", NoState => "no state", Running => "running", Blocked => "blocked",
    Paused => "paused", ShuttingDown => "shutting down", ShutOff => "shut off",
    Crashed => "crashed", Suspended => "suspended", Unknown => "unknown",
});
crate::runtime::status::named!(VmPhase {
    Install => "install", Installing => "installing", Installed => "installed",
    Foreign => "foreign", None => "-",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_states_serialize_as_their_names() {
        for s in [VmState::ShutOff, VmState::Running, VmState::Absent] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for p in [VmPhase::Install, VmPhase::None, VmPhase::Foreign] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        assert_eq!(format!("{:<9}|", VmState::ShutOff), "shut off |");
    }
}
