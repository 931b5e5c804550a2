//! `ha:` as written: one member of a keepalived pair (issue #26,
//! docs/ha.md). Validated by `validate/ha.rs`, which holds the rules and
//! the defaults not given here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `ha:` as written.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawHa {
    /// The other appliance's own address on `network.interface`.
    pub peer: String,
    /// VRRP priority of this member (1 to 254, default 100). With the
    /// default `nopreempt` it only decides who wins when both start.
    #[serde(default)]
    pub priority: Option<u8>,
    /// VRRP virtual router id (1 to 255; default derived from the cluster
    /// domain, printed by `check`). Both members must use the same one.
    #[serde(default)]
    pub virtual_router_id: Option<u8>,
    /// File (mode 0600) holding the pair key: the state sync between the
    /// members is authenticated with an HMAC keyed by it (the key is never
    /// sent). Both members use the same key; it must be another file, and
    /// another secret, than `admin.tokenFile`.
    pub token_file: String,
    /// This member's own address on `network.interface` (keepalived's
    /// `unicast_src_ip`; default: the interface's primary address).
    #[serde(default, rename = "ownIP")]
    pub own_ip: Option<String>,
}
