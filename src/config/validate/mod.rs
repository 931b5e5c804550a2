//! Raw cluster file → validated [`Cluster`]. Every rule is checked and every
//! violation reported, each with the path of its field.
//!
//! One builder per section ([`identity`], [`network`] with [`ipv6`],
//! [`nodes`] with [`addressing`], [`dns`],
//! [`dhcp`], [`lb`], [`http`] for `http` and `admin`, [`libvirt`], the
//! optional sections [`pxe`], [`ntp`], [`registry`], [`ha`], [`csr`], each
//! node's [`bmc`], and the listener collision check in [`listeners`]). The
//! builders read `config::raw`, which never imports them. Each returns
//! `Option<Section>` and records its errors. A builder returns `Some` whenever
//! it can assemble the section (even with errors recorded, so later checks
//! such as listener collisions still run on it), and `None` only when an
//! error was recorded — for its own fields or for a section it depends on,
//! such as a VIP in `network` (tested for every section in `tests.rs`).
//! [`validate`] then assembles the cluster with one `let … else` and never
//! panics; any recorded error makes it fail. Later sections check against whatever earlier
//! ones could parse ([`NetParts`]), so one bad field does not hide the
//! others' errors.

mod addressing;
mod bmc;
mod csr;
mod dhcp;
mod dns;
mod ha;
mod http;
mod identity;
mod ipv6;
mod lb;
mod libvirt;
mod listeners;
mod network;
mod nodes;
mod ntp;
mod pxe;
mod registry;
mod rhcos;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::FieldError;
use super::raw::ClusterFile;
use crate::model::cluster::*;

pub(crate) use network::NetParts;

/// Collects errors while converting fields.
#[derive(Default)]
pub(crate) struct Errs(Vec<FieldError>);

impl Errs {
    pub(crate) fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            path: path.into(),
            message: message.into(),
        });
    }

    /// Parse `text` as `T`, recording a failure at `path`.
    pub(crate) fn parse<T: FromStr>(&mut self, path: &str, text: &str, what: &str) -> Option<T>
    where
        T::Err: std::fmt::Display,
    {
        match text.trim().parse::<T>() {
            Ok(v) => Some(v),
            Err(err) => {
                let err = err.to_string();
                // An error that already names the value says it all once.
                let said =
                    err.starts_with(&format!("{:?}", text.trim())) || err.starts_with(text.trim());
                if said {
                    self.push(path, err);
                } else {
                    self.push(path, format!("{text:?} is not a valid {what} ({err})"));
                }
                None
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// `p` resolved against the cluster file's directory.
pub(crate) fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Parse `ip:port`, or a bare `ip` with `default_port`.
pub(crate) fn sock(
    e: &mut Errs,
    path: &str,
    text: &str,
    default_port: Option<u16>,
) -> Option<SocketAddr> {
    parse_sock(text, default_port)
        .map_err(|err| e.push(path, err.to_string()))
        .ok()
}

/// Why a listener address does not parse: the forms accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SockError {
    /// Neither `ip:port` nor a bare `ip` (the port has a default).
    #[error("{0:?} is not a valid address (ip or ip:port)")]
    NotIpOrIpPort(String),
    /// Not `ip:port` (no default port).
    #[error("{0:?} is not a valid address (ip:port)")]
    NotIpPort(String),
}

/// [`sock`] for the section validators that keep their own error list
/// (`pxe:`, `ntp:`): the address, or the error naming the forms accepted.
pub(crate) fn parse_sock(text: &str, default_port: Option<u16>) -> Result<SocketAddr, SockError> {
    let t = text.trim();
    if let Ok(sa) = t.parse::<SocketAddr>() {
        return Ok(sa);
    }
    match default_port {
        Some(p) => t
            .parse::<IpAddr>()
            .map(|ip| SocketAddr::new(ip, p))
            .map_err(|_| SockError::NotIpOrIpPort(text.into())),
        None => Err(SockError::NotIpPort(text.into())),
    }
}

/// An access list of extra client networks (`http.ignitionClientCidrs`,
/// `loadBalancer.machineConfigClientCidrs`): IPv4 CIDRs in network form,
/// each reported as `path[i]`. `0.0.0.0/0` is refused: it would hand
/// `grants` to every address, which is what the list exists to prevent.
pub(crate) fn client_cidrs(
    e: &mut Errs,
    path: &str,
    list: &[String],
    grants: &str,
) -> Vec<Ipv4Net> {
    let mut out = Vec::new();
    for (i, text) in list.iter().enumerate() {
        let field = format!("{path}[{i}]");
        let Some(net) = e.parse::<Ipv4Net>(&field, text, "IPv4 CIDR (a.b.c.d/prefix)") else {
            continue;
        };
        if net.prefix() == 0 {
            e.push(
                field,
                format!("{text:?} would give {grants} to every address; list the hosts (a.b.c.d/32) or networks that need it"),
            );
            continue;
        }
        out.push(net);
    }
    out
}

/// Every section of the file, each `None` when it had an error.
pub(crate) struct Sections {
    pub identity: Option<identity::Identity>,
    pub network: Option<NetworkCfg>,
    pub nodes: Option<Vec<NodeCfg>>,
    pub dns: Option<DnsCfg>,
    pub dhcp: Option<DhcpCfg>,
    pub lb: Option<LbCfg>,
    pub http: Option<HttpCfg>,
    pub admin: Option<AdminCfg>,
    /// The `pxe:` section (TFTP), `None` when absent or invalid.
    pub tftp: Option<TftpCfg>,
    /// The `ntp:` section, `None` when absent or invalid.
    pub ntp: Option<crate::model::cluster::NtpCfg>,
    /// The `registry:` section, `None` when absent or invalid.
    pub registry: Option<crate::model::registry::RegistryCfg>,
    /// `Some(None)`: no `rhcos` section.
    pub rhcos: Option<Option<RhcosCfg>>,
    /// `Some(None)`: no `libvirt` section.
    pub libvirt: Option<Option<LibvirtCfg>>,
}

/// Run every section builder.
pub(crate) fn sections(raw: &ClusterFile, base: &Path, e: &mut Errs) -> Sections {
    let identity = identity::build(raw, e);
    let domain = format!("{}.{}", raw.name, raw.base_domain.trim_end_matches('.'));
    let mut net = network::parts(&raw.network, e);
    // Before the nodes: a node's address may lie in a segment.
    let segments = dhcp::segments(&raw.dhcp, &net, e);
    net.segments = segments.iter().map(|s| (s.cidr, s.gateway)).collect();
    let nodes = nodes::build(&raw.nodes, &net, &domain, base, e);
    if let (Some(v6), Some(r)) = (net.v6.as_mut(), raw.network.ipv6.as_ref()) {
        v6.check_pool(r, nodes.as_deref(), e);
    }
    let dns = dns::build(&raw.dns, &net, &domain, e);
    let dhcp = dhcp::build(
        &raw.dhcp,
        &raw.name,
        &net,
        nodes.as_deref(),
        segments,
        base,
        e,
    );
    dhcp::proxy_ipv6_rules(&raw.network, dhcp.as_ref().map(|d| d.mode), e);
    let lb = lb::build(&raw.load_balancer, &raw.nodes, &net, base, e);
    let http = http::build_http(&raw.http, &net, nodes.as_deref(), base, e);
    let admin = http::build_admin(&raw.admin, base, e);
    let tftp = pxe::tftp(raw.pxe.as_ref(), net.appliance_ip, base, &mut e.0);
    let ntp = ntp::ntp(raw.ntp.as_ref(), net.appliance_ip, &mut e.0);
    let registry_cx = registry::Context {
        appliance_ip: net.appliance_ip,
        domain: &domain,
        base,
    };
    let registry = registry::registry(raw.registry.as_ref(), &registry_cx, &mut e.0);
    // The IPv6 twins of the listeners (`network.ipv6`, as far as it parsed).
    let ipv6 = net.v6.as_ref().and_then(|v| v.finish());
    listeners::check(
        &crate::model::catalogue::Sections {
            dns: dns.as_ref(),
            dhcp: dhcp.as_ref(),
            lb: lb.as_ref(),
            http: http.as_ref(),
            admin: admin.as_ref(),
            tftp: tftp.as_ref(),
            ntp: ntp.as_ref(),
            registry: registry.as_ref(),
            ipv6: ipv6.as_ref(),
        },
        e,
    );
    let rhcos = match &raw.rhcos {
        None => Some(None),
        Some(r) => rhcos::build(r, base, e).map(Some),
    };
    let libvirt = match &raw.libvirt {
        None => Some(None),
        Some(v) => libvirt::build(
            e,
            v,
            rhcos.as_ref().and_then(Option::as_ref),
            &raw.name,
            base,
        )
        .map(Some),
    };
    Sections {
        identity,
        network: net.finish(&raw.network),
        nodes,
        dns,
        dhcp,
        lb,
        http,
        admin,
        tftp,
        ntp,
        registry,
        rhcos,
        libvirt,
    }
}

pub fn validate(raw: ClusterFile, base: &Path) -> Result<Cluster, Vec<FieldError>> {
    let mut e = Errs::default();
    let raw_lb_enabled = raw.load_balancer.enabled;
    let raw_ha = raw.ha.clone();
    let raw_csr = raw.csr.clone();
    let s = sections(&raw, base, &mut e);
    let Sections {
        identity: Some(id),
        network: Some(network),
        nodes: Some(nodes),
        dns: Some(dns),
        dhcp: Some(dhcp),
        lb: Some(lb),
        http: Some(http),
        admin: Some(admin),
        rhcos: Some(rhcos),
        libvirt: Some(libvirt),
        tftp,
        ntp,
        registry,
    } = s
    else {
        if e.0.is_empty() {
            // The builders' invariant makes this unreachable (tests::
            // every_none_comes_with_an_error); never panic on it.
            e.push(
                "",
                "internal error: a section was rejected without a reason",
            );
        }
        return Err(e.0);
    };
    if !e.0.is_empty() {
        return Err(e.0);
    }
    let c = Cluster {
        name: id.name,
        base_domain: id.base_domain,
        domain: id.domain,
        network,
        nodes,
        dns,
        dhcp,
        lb,
        http,
        admin,
        rhcos,
        libvirt,
        tftp,
        mode: Default::default(),
        ingress: Vec::new(),
        ntp,
        registry,
        ha: None,
        csr: None,
    };
    let mut c = c;
    install_mode(&mut c, raw_lb_enabled, &mut e);
    c.ingress = nodes::ingress(&raw.ingress, &c.nodes, &mut e);
    addressing::check_kargs(&c, &mut e);
    rhcos::check_kargs_fit(&c, &mut e);
    rhcos::check_ipxe_cmdline(&c, &mut e);
    c.ha = ha::ha(raw_ha.as_ref(), &c, base, &mut e.0);
    c.csr = csr::csr(raw_csr.as_ref(), base, &mut e.0);
    if !e.0.is_empty() {
        return Err(e.0);
    }
    Ok(c)
}

/// Set the install mode from the inventory and the bootstrap-in-place
/// file ([`crate::model::mode`]); single-node turns the load balancer off
/// unless `loadBalancer.enabled` is set.
fn install_mode(c: &mut Cluster, raw_lb_enabled: Option<bool>, e: &mut Errs) {
    use crate::model::mode::{self, BIP_IGNITION};
    let bip = c.http.ignition_dir.join(BIP_IGNITION).is_file();
    match mode::detect(c.shape(), bip) {
        Ok(m) => c.mode = m,
        Err(why) => e.push("nodes", format!("{}; {}", why.problem, why.fix)),
    }
    if c.mode.is_single_node() && raw_lb_enabled.is_none() {
        c.lb.enabled = false;
    }
}
