//! A bare-metal node's BMC as the cluster file declares it (`nodes[].bmc`):
//! the Redfish system URL, where the credentials are read from, and how its
//! TLS certificate is checked. Validated in `config/validate/bmc.rs`; used by the
//! `bmc` driver.
//!
//! Invariants: `url` is `http(s)://host[:port]/redfish/v1/Systems/<id>`
//! with no user info, query or fragment; `tls` is [`BmcTls::Plain`] exactly
//! for `http://` URLs. The credentials themselves never enter these types
//! (only the files' paths), so printing a cluster cannot leak them.

use std::path::PathBuf;

use serde::Serialize;

/// `nodes[].bmc`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BmcCfg {
    /// `http(s)://host[:port]/redfish/v1/Systems/<id>`.
    pub url: String,
    /// `scheme://host[:port]` of `url`.
    pub origin: String,
    /// The host of `url` (a name or an IP, without brackets).
    pub host: String,
    pub port: u16,
    /// The path of `url` (`/redfish/v1/Systems/<id>`).
    pub path: String,
    /// File whose first line is the user name.
    pub username_file: PathBuf,
    /// File whose first line is the password (mode 0600 or stricter).
    pub password_file: PathBuf,
    pub tls: BmcTls,
    /// `serve` runs `bmc up` for this node once it is ready.
    pub start_on_serve: bool,
    /// Which URL of the node's boot ISO the BMC is given.
    pub media: BmcMedia,
}

/// Which of the node's boot ISO URLs ([`crate::model::boot::iso_urls`])
/// the BMC is given (`nodes[].bmc.media`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BmcMedia {
    /// The `http://` URL first, the `https://` one when the BMC refuses
    /// the URL's scheme or format (OpenBMC takes only `https://`).
    #[default]
    Auto,
    /// The `http://` URL only.
    Http,
    /// The `https://` URL only.
    Https,
}

/// How the BMC's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum BmcTls {
    /// `http://`: no TLS (labs and emulators only).
    Plain,
    /// `https://` with `insecure: true`: any certificate is accepted.
    Insecure,
    /// `https://` verified against this CA bundle (PEM) and the URL's host.
    CaFile(PathBuf),
}
