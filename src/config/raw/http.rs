//! `http:` and `admin:` as written: the file server (and its HTTPS
//! listener) and the admin API. Checked by `validate/http.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// Default `<applianceIP>:8080`.
    #[serde(default)]
    pub listen: Option<String>,
    /// RHCOS images (ISO, kernel, initramfs, rootfs), served under /images/.
    #[serde(default = "images_dir")]
    pub images_dir: String,
    /// `<role>.ign` and optional `<node>.ign` files, served under /ignition/.
    #[serde(default = "ignition_dir")]
    pub ignition_dir: String,
    /// Connections one client address may hold at once (default 64).
    #[serde(default = "max_connections_per_client")]
    pub max_connections_per_client: u32,
    /// Networks (IPv4 CIDRs) besides the cluster's that may fetch the
    /// per-node boot ISOs `/boot/<node>.iso`: the BMCs' management network.
    #[serde(default)]
    pub boot_iso_cidrs: Vec<String>,
    /// Networks (IPv4 CIDRs) that may fetch every ignition config and boot
    /// ISO besides the nodes they belong to and the appliance host: an
    /// operator's jump host (`a.b.c.d/32`).
    #[serde(default)]
    pub ignition_client_cidrs: Vec<String>,
    /// The HTTPS listener of the boot ISOs (`/boot/<node>.iso` only);
    /// default `<applianceIP>:8443`. It runs when this or `tls` is set, or
    /// when a node has a `bmc` whose `media` is not `http`.
    #[serde(default)]
    pub tls_listen: Option<String>,
    /// The certificate and key of the HTTPS listener; without it the
    /// appliance generates a self-signed one for its address and keeps it
    /// in its state directory.
    #[serde(default)]
    pub tls: Option<HttpTls>,
}

/// `http.tls`: PEM files of the HTTPS listener.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpTls {
    /// Certificate chain (PEM), the server's certificate first.
    pub cert_file: String,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_file: String,
}

fn max_connections_per_client() -> u32 {
    64
}

impl Default for Http {
    fn default() -> Self {
        Http {
            enabled: true,
            listen: None,
            images_dir: images_dir(),
            ignition_dir: ignition_dir(),
            max_connections_per_client: max_connections_per_client(),
            boot_iso_cidrs: Vec::new(),
            ignition_client_cidrs: Vec::new(),
            tls_listen: None,
            tls: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Admin {
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// Status, metrics and control API (default `127.0.0.1:9180`).
    #[serde(default = "admin_listen")]
    pub listen: String,
    /// File (mode 0600) holding the token that control requests must carry;
    /// required when `listen` is not a loopback address.
    #[serde(default)]
    pub token_file: Option<String>,
    /// Source networks (IPv4 or IPv6 CIDR) whose connections the admin
    /// listener answers, besides loopback, this host and `ha.peer`; others
    /// are closed at once. Absent: every source may read `/status`,
    /// `/metrics` and the page.
    #[serde(default)]
    pub allow_from: Option<Vec<String>>,
}

impl Default for Admin {
    fn default() -> Self {
        Admin {
            enabled: true,
            listen: admin_listen(),
            token_file: None,
            allow_from: None,
        }
    }
}

fn images_dir() -> String {
    "images".into()
}

fn ignition_dir() -> String {
    "ignition".into()
}

fn admin_listen() -> String {
    "127.0.0.1:9180".into()
}
