//! `loadBalancer:` as written: frontends, backend ports and overrides,
//! health checks, timeouts. Checked by `validate/lb.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::Dur;

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancer {
    /// Default on; off for single-node OpenShift (api and `*.apps` resolve
    /// to the node) unless set to `true` here.
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub listen: PoolAddrs,
    #[serde(default)]
    pub health_check: HealthCheck,
    /// PEM CA bundle to verify API/MCS certificates; unverified when absent.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// Per-pool CA bundles (the API and the machine-config server are
    /// signed by different CAs in OpenShift); each overrides `caFile`.
    #[serde(default)]
    pub ca_files: CaFiles,
    /// Concurrent client connections per frontend.
    #[serde(default = "max_connections")]
    pub max_connections: usize,
    /// Close a proxied connection idle this long in both directions.
    #[serde(default = "idle_timeout")]
    pub idle_timeout: Dur,
    #[serde(default = "connect_timeout")]
    pub connect_timeout: Dur,
    /// Ports the backends listen on (defaults 6443, 22623, 80, 443); lets a lab
    /// or a test run backends on unprivileged ports.
    #[serde(default)]
    pub backend_ports: BackendPorts,
    /// Per node, `ip:port` the LB connects to instead of `<node ip>:<backend
    /// port>` in a pool (backends behind NAT, or several on one host, as in
    /// the benchmark). Keys are node names.
    #[serde(default)]
    pub backend_overrides: std::collections::BTreeMap<String, PoolAddrs>,
    /// Networks (IPv4 CIDRs) besides the nodes and the appliance host whose
    /// connections the machine-config frontend (22623) accepts.
    #[serde(default)]
    pub machine_config_client_cidrs: Vec<String>,
    /// `auto` (default): the LB drains the bootstrap by itself once the
    /// bootstrap is complete; `manual`: only `lb disable bootstrap` does.
    #[serde(default)]
    pub remove_bootstrap: Option<String>,
    /// How long a worker may go from its first machine-config contact
    /// without a healthy ingress backend before `status`, `wait-for` and
    /// the page suggest approving its pending CSRs (default 10m).
    #[serde(default = "csr_hint_after")]
    pub csr_hint_after: Dur,
}

/// `loadBalancer.caFiles`: a CA bundle per HTTPS-checked pool.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaFiles {
    #[serde(default)]
    pub api: Option<String>,
    #[serde(default)]
    pub machine_config: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendPorts {
    #[serde(default = "p6443")]
    pub api: u16,
    #[serde(default = "p22623")]
    pub machine_config: u16,
    #[serde(default = "p80")]
    pub ingress_http: u16,
    #[serde(default = "p443")]
    pub ingress_https: u16,
}

impl Default for BackendPorts {
    fn default() -> Self {
        BackendPorts {
            api: 6443,
            machine_config: 22623,
            ingress_http: 80,
            ingress_https: 443,
        }
    }
}

fn p6443() -> u16 {
    6443
}

fn p22623() -> u16 {
    22623
}

fn p80() -> u16 {
    80
}

fn p443() -> u16 {
    443
}

impl Default for LoadBalancer {
    fn default() -> Self {
        LoadBalancer {
            enabled: None,
            listen: PoolAddrs::default(),
            health_check: HealthCheck::default(),
            ca_file: None,
            ca_files: CaFiles::default(),
            max_connections: max_connections(),
            idle_timeout: idle_timeout(),
            connect_timeout: connect_timeout(),
            backend_ports: BackendPorts::default(),
            backend_overrides: Default::default(),
            machine_config_client_cidrs: Vec::new(),
            remove_bootstrap: None,
            csr_hint_after: csr_hint_after(),
        }
    }
}

/// One optional address per LB pool: the frontend listen addresses
/// (`loadBalancer.listen`, each defaulting to `<apiVIP or ingressVIP>:<port>`)
/// and one node's backend addresses (`loadBalancer.backendOverrides.<node>`,
/// `ip:port`, defaulting to `<node ip>:<backendPorts>`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolAddrs {
    /// Kubernetes API, 6443.
    #[serde(default)]
    pub api: Option<String>,
    /// Machine Config Server, 22623.
    #[serde(default)]
    pub machine_config: Option<String>,
    /// Ingress HTTP, 80.
    #[serde(default)]
    pub ingress_http: Option<String>,
    /// Ingress HTTPS, 443.
    #[serde(default)]
    pub ingress_https: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheck {
    #[serde(default = "hc_interval")]
    pub interval: Dur,
    #[serde(default = "hc_timeout")]
    pub timeout: Dur,
    /// Consecutive successes before a backend becomes healthy.
    #[serde(default = "hc_rise")]
    pub rise: u32,
    /// Consecutive failures before a backend becomes unhealthy.
    #[serde(default = "hc_fall")]
    pub fall: u32,
}

impl Default for HealthCheck {
    fn default() -> Self {
        HealthCheck {
            interval: hc_interval(),
            timeout: hc_timeout(),
            rise: hc_rise(),
            fall: hc_fall(),
        }
    }
}

fn max_connections() -> usize {
    10_000
}

fn idle_timeout() -> Dur {
    Dur::secs(3600)
}

fn connect_timeout() -> Dur {
    Dur::secs(3)
}

fn csr_hint_after() -> Dur {
    Dur::secs(600)
}

fn hc_interval() -> Dur {
    Dur::secs(5)
}

fn hc_timeout() -> Dur {
    Dur::secs(3)
}

fn hc_rise() -> u32 {
    2
}

fn hc_fall() -> u32 {
    3
}
