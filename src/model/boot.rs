//! How a node installs RHCOS: the one source of its install kernel
//! arguments (and of the single-node master's live arguments, which have no
//! `coreos.inst.*`: bootstrap-in-place writes the disk itself), used by the libvirt install domain, the iPXE scripts of
//! network boot and the per-node live ISO alike, and the URLs the
//! appliance serves them under.
//!
//! Dual-stack (`network.ipv6`): a node with an IPv6 address (and a role ISO
//! of such a cluster) also gets [`DUAL_STACK_KARG`] unless its own or the
//! configured kernel arguments carry an `ip=` already. `ip=dhcp` alone
//! makes NetworkManager's initrd generator require IPv4; `dhcp,dhcp6`
//! asks for both families and waits for both (docs/ipv6.md).
//!
//! Static addresses (`addressing: static`, docs/bare-metal.md): such a
//! node gets [`static_kargs`] instead — its inventory address as dracut's
//! `ip=<ip>::<gateway>:<netmask>:<fqdn>:<interface>:none` (and the IPv6
//! twin `ip=[<ip6>]::[<gw6>]:<prefix>:<fqdn>:<interface>:none` on
//! dual-stack) and `nameserver=<applianceIP>` (the site's resolvers when
//! the appliance's DNS is off: [`super::staticnet`]), in its iPXE script and
//! its ISO alike. The installed system keeps the address through the
//! NetworkManager keyfile the node's ignition carries (`http/ignmerge`);
//! coreos-installer's service also forwards the arguments to its first
//! boot (`--firstboot-args`).

use std::net::{IpAddr, SocketAddr};

use super::cluster::{Cluster, NodeCfg, Role};

/// Largest kernel-argument embed area of a live ISO (coreos-installer's
/// limit), and the x86 kernel's command-line size: install kargs must be
/// shorter.
pub const MAX_KARGS_AREA: usize = 2048;

/// The x86 kernel's command-line size (the bzImage header's
/// `cmdline_size`): a boot loader copies at most this many bytes, so
/// arguments beyond it are silently lost.
pub const MAX_KERNEL_CMDLINE: usize = 2047;

/// The initramfs network argument of a dual-stack node: DHCPv4 and DHCPv6.
pub const DUAL_STACK_KARG: &str = "ip=dhcp,dhcp6";

/// Is `node` dual-stack: `network.ipv6` set and the node has an IPv6
/// address?
pub fn dual_stack(c: &Cluster, node: &NodeCfg) -> bool {
    c.network.ipv6.is_some() && node.ipv6.is_some()
}

/// The network arguments of a static node (`None` for a DHCP one):
/// [`super::staticnet::StaticNet::kargs`] — its address (both families on
/// dual-stack) on its interface, no DHCP, then its name servers.
pub fn static_kargs(c: &Cluster, node: &NodeCfg) -> Option<Vec<String>> {
    super::staticnet::StaticNet::of(c, node).map(|s| s.kargs())
}

/// Default install disk of a bare-metal node (`rhcos.installDev`).
pub const DEFAULT_INSTALL_DEV: &str = "/dev/sda";

/// Default port of the boot ISOs' HTTPS listener (`http.tlsListen`).
pub const HTTPS_PORT: u16 = 8443;

/// `http://<applianceIP or http.listen>:<port>`: where nodes fetch from.
pub fn http_base(c: &Cluster) -> String {
    base("http", c, c.http.listen)
}

/// `https://<applianceIP or http.tlsListen>:<port>` when the HTTPS
/// listener runs.
pub fn https_base(c: &Cluster) -> Option<String> {
    c.http.tls_listen.map(|l| base("https", c, l))
}

/// `<scheme>://<ip>:<port>` of a listener, `applianceIP` for an
/// unspecified address.
fn base(scheme: &str, c: &Cluster, listen: SocketAddr) -> String {
    let ip = match listen.ip() {
        ip if ip.is_unspecified() => IpAddr::V4(c.network.appliance_ip),
        ip => ip,
    };
    match ip {
        IpAddr::V4(ip) => format!("{scheme}://{ip}:{}", listen.port()),
        IpAddr::V6(ip) => format!("{scheme}://[{ip}]:{}", listen.port()),
    }
}

/// A node's boot ISO URLs: what a BMC's virtual media is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsoUrls {
    /// `http://<applianceIP>:<port>/boot/<node>.iso`.
    pub http: String,
    /// `https://<applianceIP>:8443/boot/<node>.iso`, when the HTTPS
    /// listener runs (`http.tlsListen`).
    pub https: Option<String>,
}

/// The boot ISO URLs of `node` over both schemes.
pub fn iso_urls(c: &Cluster, node: &NodeCfg) -> IsoUrls {
    let path = format!("/boot/{}.iso", node.name);
    IsoUrls {
        http: format!("{}{path}", http_base(c)),
        https: https_base(c).map(|b| format!("{b}{path}")),
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
    kargs(
        c,
        (node.role, net_kargs(c, node)),
        &node.kargs,
        dev,
        Some(rootfs_url),
        ignition_url,
    )
}

/// The kernel arguments of `node`'s iPXE install script (its `kernel` line
/// after the image URL): `initrd=main` and its [`install_kargs`] with the
/// appliance's rootfs and ignition URLs. What the kernel receives.
pub fn ipxe_kernel_args(c: &Cluster, node: &NodeCfg) -> String {
    let base = http_base(c);
    if c.is_single_node_master(node) {
        return format!(
            "initrd=main coreos.live.rootfs_url={base}/boot/rootfs.img {}",
            single_node_kargs(c, node, Some(&format!("{base}/ignition/{}.ign", node.name)))
        );
    }
    let dev = c
        .rhcos
        .as_ref()
        .map_or(DEFAULT_INSTALL_DEV, |r| r.install_dev.as_str());
    let kargs = install_kargs(
        c,
        node,
        dev,
        &format!("{base}/boot/rootfs.img"),
        &format!("{base}/ignition/{}.ign", node.name),
    );
    format!("initrd=main {kargs}")
}

/// Who a boot ISO (`/boot/<name>.iso`) is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsoTarget<'a> {
    /// One node: its ignition, install disk and kargs.
    Node(&'a NodeCfg),
    /// Any node of a role: the role's ignition file, `rhcos.installDev`,
    /// the role's kargs (no node's own).
    Role(Role),
}

impl<'a> IsoTarget<'a> {
    /// `name` is a node, else a role name (`master`, `worker`, …).
    pub fn find(c: &'a Cluster, name: &str) -> Option<IsoTarget<'a>> {
        if let Some(n) = c.nodes.iter().find(|n| n.name == name) {
            return Some(IsoTarget::Node(n));
        }
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == name)
            .map(IsoTarget::Role)
    }

    /// The node's or the role's name (also the ignition file's stem).
    pub fn name(&self) -> &str {
        match self {
            IsoTarget::Node(n) => &n.name,
            IsoTarget::Role(r) => r.as_str(),
        }
    }
}

/// `http://…/boot/<name>.iso`: the live ISO carrying `name`'s install
/// kernel arguments (a node or a role), e.g. for a BMC's virtual media.
pub fn boot_iso_url(c: &Cluster, name: &str) -> String {
    format!("{}/boot/{name}.iso", http_base(c))
}

/// The install arguments a live ISO for `t` carries after the ISO's own
/// (which boot the live system from the ISO, so no rootfs URL): as
/// [`install_kargs`] with the ignition URL `/ignition/<name>.ign`.
pub fn iso_install_kargs(c: &Cluster, t: IsoTarget<'_>) -> String {
    let default_dev = c
        .rhcos
        .as_ref()
        .map_or(DEFAULT_INSTALL_DEV, |r| r.install_dev.as_str());
    let ignition_url = format!("{}/ignition/{}.ign", http_base(c), t.name());
    match t {
        IsoTarget::Node(n) => {
            let dev = n.install_dev.as_deref().unwrap_or(default_dev);
            kargs(
                c,
                (n.role, net_kargs(c, n)),
                &n.kargs,
                dev,
                None,
                &ignition_url,
            )
        }
        // Any node of the role may boot it: dual-stack with the cluster.
        IsoTarget::Role(r) => kargs(
            c,
            (r, NetKargs::Dhcp(c.network.ipv6.is_some())),
            &[],
            default_dev,
            None,
            &ignition_url,
        ),
    }
}

/// The network arguments a node's install gets besides the configured ones.
enum NetKargs {
    /// DHCP: whether dual-stack ([`DUAL_STACK_KARG`] unless an `ip=` is
    /// configured).
    Dhcp(bool),
    /// Its [`static_kargs`].
    Static(Vec<String>),
}

fn net_kargs(c: &Cluster, node: &NodeCfg) -> NetKargs {
    static_kargs(c, node).map_or(NetKargs::Dhcp(dual_stack(c, node)), NetKargs::Static)
}

/// `(role, net)`: the role's extra arguments, and the network arguments.
fn kargs(
    c: &Cluster,
    (role, net): (Role, NetKargs),
    own: &[String],
    dev: &str,
    rootfs_url: Option<&str>,
    ignition_url: &str,
) -> String {
    let mut k = String::new();
    if let Some(url) = rootfs_url {
        k.push_str(&format!("coreos.live.rootfs_url={url} "));
    }
    k.push_str(&format!(
        "ignition.firstboot ignition.platform.id=metal \
         coreos.inst.install_dev={dev} coreos.inst.ignition_url={ignition_url} \
         console=tty0 console=ttyS0,115200n8"
    ));
    let extra: Vec<&String> = c
        .rhcos
        .iter()
        .flat_map(|r| {
            r.kargs
                .iter()
                .chain(r.role_kargs.get(&role).into_iter().flatten())
        })
        .chain(own.iter())
        .collect();
    push_extra(&mut k, net, &extra);
    k
}

/// Append the network arguments — a static node's [`static_kargs`], else
/// [`DUAL_STACK_KARG`] when dual-stack and no `extra` argument is an `ip=`
/// (the operator's network setup wins) — then `extra`.
fn push_extra(k: &mut String, net: NetKargs, extra: &[&String]) {
    match net {
        NetKargs::Static(own) => {
            for a in own {
                k.push(' ');
                k.push_str(&a);
            }
        }
        NetKargs::Dhcp(dual) => {
            if dual && !extra.iter().any(|a| a.starts_with("ip=")) {
                k.push(' ');
                k.push_str(DUAL_STACK_KARG);
            }
        }
    }
    for a in extra {
        k.push(' ');
        k.push_str(a);
    }
}

/// The live kernel arguments of the single-node master (bootstrap-in-place:
/// no `coreos.inst.*`; the Ignition itself writes the disk): first-boot
/// Ignition on metal from `ignition_url` when given (iPXE; the ISO embeds
/// the config instead), serial and VGA consoles, then `rhcos.kargs`, the
/// master role's and the node's extra arguments.
pub fn single_node_kargs(c: &Cluster, node: &NodeCfg, ignition_url: Option<&str>) -> String {
    let mut k = String::from("ignition.firstboot ignition.platform.id=metal ");
    if let Some(url) = ignition_url {
        k.push_str(&format!("ignition.config.url={url} "));
    }
    k.push_str("console=tty0 console=ttyS0,115200n8");
    let extra: Vec<&String> = c
        .rhcos
        .iter()
        .flat_map(|r| {
            r.kargs
                .iter()
                .chain(r.role_kargs.get(&node.role).into_iter().flatten())
        })
        .chain(node.kargs.iter())
        .collect();
    push_extra(&mut k, net_kargs(c, node), &extra);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(v6: bool, extra: &str) -> Cluster {
        let (net6, node6) = if v6 {
            (
                ", ipv6: { cidr: 'fd00::/64', applianceIP: 'fd00::1' }",
                ", ipv6: 'fd00::10'",
            )
        } else {
            ("", "")
        };
        let text = format!(
            "name: c\nbaseDomain: example.com\n\
             network: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.1, applianceIP: 10.0.0.1{net6} }}\n\
             nodes:\n\
             \x20 - {{ name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10{node6} }}\n\
             \x20 - {{ name: w0, role: worker, mac: '52:54:00:00:00:02', ip: 10.0.0.20 }}\n{extra}"
        );
        crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap_or_else(|e| panic!("{e}"))
            .cluster
    }

    #[test]
    fn dual_stack_nodes_ask_for_dhcp_and_dhcpv6() {
        let c = cluster(true, "");
        let m0 = c.node("m0").unwrap();
        let w0 = c.node("w0").unwrap();
        let k = ipxe_kernel_args(&c, m0);
        assert!(k.ends_with("console=ttyS0,115200n8 ip=dhcp,dhcp6"), "{k}");
        assert!(iso_install_kargs(&c, IsoTarget::Node(m0)).ends_with(" ip=dhcp,dhcp6"));
        // A node without an IPv6 address is IPv4-only: no argument.
        assert!(!ipxe_kernel_args(&c, w0).contains("ip="));
        assert!(!iso_install_kargs(&c, IsoTarget::Node(w0)).contains("ip="));
        // A role ISO may boot any node of a dual-stack cluster.
        assert!(iso_install_kargs(&c, IsoTarget::Role(Role::Worker)).contains(DUAL_STACK_KARG));
    }

    #[test]
    fn an_ip_argument_of_the_operator_wins() {
        let c = cluster(true, "rhcos: { iso: /x.iso, kargs: ['ip=ens3:dhcp6'] }\n");
        let k = ipxe_kernel_args(&c, c.node("m0").unwrap());
        assert_eq!(k.matches("ip=").count(), 1, "{k}");
        assert!(k.ends_with("ip=ens3:dhcp6"), "{k}");
    }

    #[test]
    fn ipv4_only_kargs_are_unchanged() {
        let c = cluster(false, "");
        let m0 = c.node("m0").unwrap();
        assert_eq!(
            ipxe_kernel_args(&c, m0),
            "initrd=main coreos.live.rootfs_url=http://10.0.0.1:8080/boot/rootfs.img \
             ignition.firstboot ignition.platform.id=metal coreos.inst.install_dev=/dev/sda \
             coreos.inst.ignition_url=http://10.0.0.1:8080/ignition/m0.ign \
             console=tty0 console=ttyS0,115200n8"
        );
        assert!(!iso_install_kargs(&c, IsoTarget::Role(Role::Master)).contains("ip="));
    }

    #[test]
    fn a_static_node_carries_its_address_and_the_appliance_as_dns() {
        let text = "rhcos: { iso: /x.iso }\n";
        let mut c = cluster(true, text);
        c.network.ipv6.as_mut().unwrap().gateway = Some("fd00::1".parse().unwrap());
        for n in &mut c.nodes {
            n.static_address = true;
            n.interface = Some("ens3".into());
        }
        let (m0, w0) = (c.node("m0").unwrap(), c.node("w0").unwrap());
        let want_m0 = "ip=10.0.0.10::10.0.0.1:255.255.255.0:m0.c.example.com:ens3:none \
                       ip=[fd00::10]::[fd00::1]:64:m0.c.example.com:ens3:none nameserver=10.0.0.1";
        assert!(
            ipxe_kernel_args(&c, m0).ends_with(want_m0),
            "{}",
            ipxe_kernel_args(&c, m0)
        );
        assert!(iso_install_kargs(&c, IsoTarget::Node(m0)).ends_with(want_m0));
        // No DHCP argument beside them; an IPv4-only node has one ip=.
        assert!(!ipxe_kernel_args(&c, m0).contains(DUAL_STACK_KARG));
        let want_w0 =
            "ip=10.0.0.20::10.0.0.1:255.255.255.0:w0.c.example.com:ens3:none nameserver=10.0.0.1";
        assert!(iso_install_kargs(&c, IsoTarget::Node(w0)).ends_with(want_w0));
        // A role ISO may boot any node: no node's address.
        let role = iso_install_kargs(&c, IsoTarget::Role(Role::Master));
        assert!(!role.contains("nameserver="), "{role}");
        // Without network.ipv6.gateway the IPv6 twin has no gateway.
        c.network.ipv6.as_mut().unwrap().gateway = None;
        let k = static_kargs(&c, c.node("m0").unwrap()).unwrap();
        assert_eq!(k[1], "ip=[fd00::10]:::64:m0.c.example.com:ens3:none");
    }
}
