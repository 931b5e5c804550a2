//! libvirt driver: the cluster network, disks and VMs booted unattended from
//! the RHCOS live ISO.

use crate::plan::Plan;

/// `render libvirt`: the network, volume and domain XML that `vm up` defines.
pub fn render(_plan: &Plan) -> anyhow::Result<String> {
    anyhow::bail!("render libvirt is not implemented yet")
}

/// `vm up|down|status`.
pub async fn vm(_plan: std::sync::Arc<Plan>, action: crate::cli::VmAction) -> anyhow::Result<()> {
    anyhow::bail!("vm {action:?} is not implemented yet")
}
