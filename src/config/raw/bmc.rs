//! `nodes[].bmc` as written: a bare-metal node's Redfish BMC (issue #13).
//! Validated by `validate/bmc.rs`, which holds the rules.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `nodes[].bmc` as written.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawBmc {
    /// `https://host/redfish/v1/Systems/<id>`.
    pub redfish: String,
    pub username_file: String,
    pub password_file: String,
    /// Accept any certificate (`https://` only).
    #[serde(default)]
    pub insecure: bool,
    /// CA bundle (PEM) the BMC's certificate must chain to (`https://` only).
    #[serde(default)]
    pub ca_file: Option<String>,
    /// `serve` boots this node through its BMC (`bmc up`) once it is ready.
    #[serde(default)]
    pub start_on_serve: bool,
    /// Which URL of the node's boot ISO the BMC is given: `auto` (the
    /// `http://` one, then the `https://` one when the BMC refuses the
    /// scheme), `http` or `https`.
    #[serde(default)]
    pub media: RawMedia,
}

/// `nodes[].bmc.media` as written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RawMedia {
    #[default]
    Auto,
    Http,
    Https,
}
