//! `ntp:` as written: the appliance's NTP server (issue #24). Validated by
//! `validate/ntp.rs`, which holds the rules and the defaults not given
//! here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `ntp:` as written.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawNtp {
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// UDP address of the server (default `<applianceIP>:123`).
    #[serde(default)]
    pub listen: Option<String>,
    /// Declare the host clock authoritative at this stratum (1 to 15) even
    /// when the kernel says it is not synchronised: a lab with no upstream
    /// time at all. Absent: unsynchronised host → leap indicator 3 and
    /// stratum 16, so clients do not select the appliance.
    #[serde(default)]
    pub local_stratum: Option<u8>,
    /// Requests per second one client address may send (a burst of twice
    /// as many); more get a KoD RATE reply.
    #[serde(default = "client_rate")]
    pub client_rate: u32,
    /// Client networks answered (CIDRs, or addresses for one host; IPv4 or
    /// IPv6), e.g. `[192.168.131.0/24, 127.0.0.1]`. Absent: every client.
    #[serde(default)]
    pub allow_from: Option<Vec<String>>,
}

fn client_rate() -> u32 {
    8
}
