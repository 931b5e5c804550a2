//! How a node installs RHCOS: the one source of its install kernel
//! arguments, used by the libvirt install domain and by the iPXE scripts
//! of network boot alike, and the URLs the appliance serves them under.

use std::net::IpAddr;

use super::cluster::{Cluster, NodeCfg};

/// Default install disk of a bare-metal node (`rhcos.installDev`).
pub const DEFAULT_INSTALL_DEV: &str = "/dev/sda";

/// `http://<applianceIP or http.listen>:<port>`: where nodes fetch from.
pub fn http_base(c: &Cluster) -> String {
    let http = c.http.listen;
    let ip = match http.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(c.network.appliance_ip),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V4(c.network.appliance_ip),
        ip => ip,
    };
    match ip {
        IpAddr::V4(ip) => format!("http://{ip}:{}", http.port()),
        IpAddr::V6(ip) => format!("http://[{ip}]:{}", http.port()),
    }
}

/// The install kernel command line of `node`: the live rootfs and the
/// ignition URL, the install disk (the node's own `installDev`, else
/// `default_dev`), first-boot ignition on metal, serial and VGA consoles,
/// then `rhcos.kargs`, the role's and the node's extra arguments.
pub fn install_kargs(
    c: &Cluster,
    node: &NodeCfg,
    default_dev: &str,
    rootfs_url: &str,
    ignition_url: &str,
) -> String {
    let dev = node.install_dev.as_deref().unwrap_or(default_dev);
    let mut k = format!(
        "coreos.live.rootfs_url={rootfs_url} ignition.firstboot ignition.platform.id=metal \
         coreos.inst.install_dev={dev} coreos.inst.ignition_url={ignition_url} \
         console=tty0 console=ttyS0,115200n8"
    );
    let extra = c.rhcos.iter().flat_map(|r| {
        r.kargs
            .iter()
            .chain(r.role_kargs.get(&node.role).into_iter().flatten())
    });
    for a in extra.chain(node.kargs.iter()) {
        k.push(' ');
        k.push_str(a);
    }
    k
}
