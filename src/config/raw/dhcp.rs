//! `dhcp:` as written: the DHCP server or proxy, its pool, relayed segments
//! and boot options. Checked by `validate/dhcp.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Pool;
use crate::config::Dur;

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dhcp {
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// UDP listen address (default `0.0.0.0:67`).
    #[serde(default)]
    pub listen: Option<String>,
    #[serde(default = "lease_time")]
    pub lease_time: Dur,
    /// Dynamic range for unknown MACs; without it unknown MACs are ignored.
    #[serde(default)]
    pub pool: Option<Pool>,
    /// Where leases are persisted (default `/var/lib/crc-appliance/<name>-leases.json`).
    #[serde(default)]
    pub lease_file: Option<String>,
    /// Optional network boot options.
    #[serde(default)]
    pub pxe: Option<Pxe>,
    /// Remote subnets behind DHCP relays.
    #[serde(default)]
    pub segments: Vec<Segment>,
    /// Relay agent addresses answered: IPv4 ones are giaddrs (besides
    /// every segment's gateway); IPv6 ones are the sources of the DHCPv6
    /// Relay-Forwards answered (no other is).
    #[serde(default)]
    pub relays: Vec<String>,
    /// DHCPv6 UDP listen address (default `[::]:547`; only with
    /// `network.ipv6`).
    #[serde(default)]
    pub listen6: Option<String>,
    /// Where DHCPv6 bindings are persisted (default: the lease file's name
    /// with `-v6` before its extension).
    #[serde(default)]
    pub binding_file6: Option<String>,
    /// `server` (default: the appliance owns the segment's DHCP) or `proxy`
    /// (proxyDHCP beside the site's server: boot answers to the
    /// inventory's PXE clients only, never an address).
    #[serde(default)]
    pub mode: Option<String>,
    /// Start in `server` mode even when another DHCP server answers on
    /// the segment (default false: `serve` refuses to start).
    #[serde(default)]
    pub allow_other_servers: bool,
}

impl Default for Dhcp {
    fn default() -> Self {
        Dhcp {
            enabled: true,
            listen: None,
            lease_time: lease_time(),
            pool: None,
            lease_file: None,
            pxe: None,
            segments: Vec::new(),
            relays: Vec::new(),
            listen6: None,
            binding_file6: None,
            mode: None,
            allow_other_servers: false,
        }
    }
}

/// `dhcp.segments[]`: a subnet behind a DHCP relay.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Segment {
    pub cidr: String,
    pub gateway: String,
    #[serde(default)]
    pub pool: Option<Pool>,
    #[serde(default)]
    pub dns: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pxe {
    /// siaddr / TFTP server (default: applianceIP).
    #[serde(default)]
    pub next_server: Option<String>,
    /// Boot file for BIOS/UEFI PXE firmware (option 67), e.g. `undionly.kpxe`.
    #[serde(default)]
    pub boot_file: Option<String>,
    /// Script URL handed to clients that identify as iPXE (user class `iPXE`).
    #[serde(default)]
    pub ipxe_script_url: Option<String>,
}

fn lease_time() -> Dur {
    Dur::secs(3600)
}
