//! `libvirt:` as written: the hypervisor, its storage pool and network, the
//! VMs' resources. Checked by `validate/libvirt.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Libvirt {
    /// Connection URI (default `qemu:///system`).
    #[serde(default = "libvirt_uri")]
    pub uri: String,
    /// Moved to `rhcos.iso` (kept only to say so).
    #[serde(default)]
    pub iso: Option<String>,
    #[serde(default)]
    pub pool: LibvirtPool,
    #[serde(default)]
    pub network: LibvirtNetwork,
    #[serde(default)]
    pub resources: Resources,
    /// Install disk inside the guest (default `/dev/vda`).
    #[serde(default = "install_dev")]
    pub install_dev: String,
    /// Start the VMs when `serve` starts.
    #[serde(default)]
    pub start_on_serve: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LibvirtPool {
    #[serde(default = "pool_name")]
    pub name: String,
    /// Directory of the pool (default `/var/lib/libvirt/images/crc-appliance`).
    #[serde(default = "pool_path")]
    pub path: String,
}

impl Default for LibvirtPool {
    fn default() -> Self {
        LibvirtPool {
            name: pool_name(),
            path: pool_path(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LibvirtNetwork {
    /// Network name (default: the cluster name).
    #[serde(default)]
    pub name: Option<String>,
    /// Bridge device (default `crc-<name>`, at most 15 characters).
    #[serde(default)]
    pub bridge: Option<String>,
    /// `appliance` (no libvirt DHCP/DNS; the appliance serves both) or
    /// `forwarder` (libvirt's dnsmasq forwards the cluster domain to the appliance).
    #[serde(default)]
    pub mode: Option<String>,
    /// Add `<forward mode='nat'/>` (default false: an isolated network).
    #[serde(default)]
    pub nat: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resources {
    #[serde(default = "res_bootstrap")]
    pub bootstrap: Resource,
    #[serde(default = "res_master")]
    pub master: Resource,
    #[serde(default = "res_worker")]
    pub worker: Resource,
}

impl Default for Resources {
    fn default() -> Self {
        Resources {
            bootstrap: res_bootstrap(),
            master: res_master(),
            worker: res_worker(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resource {
    pub cpus: u32,
    /// MiB.
    pub memory_mib: u64,
    /// GiB.
    pub disk_gib: u64,
}

fn libvirt_uri() -> String {
    "qemu:///system".into()
}

fn install_dev() -> String {
    "/dev/vda".into()
}

fn pool_name() -> String {
    "crc-appliance".into()
}

fn pool_path() -> String {
    "/var/lib/libvirt/images/crc-appliance".into()
}

fn res_bootstrap() -> Resource {
    Resource {
        cpus: 4,
        memory_mib: 16384,
        disk_gib: 100,
    }
}

fn res_master() -> Resource {
    res_bootstrap()
}

fn res_worker() -> Resource {
    Resource {
        cpus: 2,
        memory_mib: 8192,
        disk_gib: 100,
    }
}
