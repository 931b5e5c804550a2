//! `dhcp`: listener, lease time, the pool (clear of every reserved and
//! appliance address), lease file, PXE options.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use super::{Errs, NetParts, resolve, sock};
use crate::config::raw;
use crate::model::cluster::{DhcpCfg, NodeCfg, PxeCfg};

pub(crate) fn build(
    h: &raw::Dhcp,
    cluster_name: &str,
    net: &NetParts,
    nodes: Option<&[NodeCfg]>,
    base: &Path,
    e: &mut Errs,
) -> Option<DhcpCfg> {
    let listen = match &h.listen {
        Some(s) => sock(e, "dhcp.listen", s, Some(67)),
        None => Some(SocketAddr::from(([0, 0, 0, 0], 67))),
    };
    if h.lease_time.get().as_secs() < 60 {
        e.push("dhcp.leaseTime", "must be at least 60s");
    } else if h.lease_time.get().as_secs() > u64::from(u32::MAX) {
        e.push("dhcp.leaseTime", "is too long (max about 136 years)");
    }
    let pool = h.pool.as_ref().and_then(|p| {
        let s = e.parse::<Ipv4Addr>("dhcp.pool.start", &p.start, "IPv4 address");
        net.in_net(e, "dhcp.pool.start", s);
        let t = e.parse::<Ipv4Addr>("dhcp.pool.end", &p.end, "IPv4 address");
        net.in_net(e, "dhcp.pool.end", t);
        let (s, t) = (s?, t?);
        if u32::from(s) > u32::from(t) {
            e.push("dhcp.pool", format!("start {s} is after end {t}"));
            return None;
        }
        let inside = |ip: Ipv4Addr| (u32::from(s)..=u32::from(t)).contains(&u32::from(ip));
        for (j, node) in nodes.unwrap_or_default().iter().enumerate() {
            if inside(node.ip) {
                e.push(
                    "dhcp.pool",
                    format!(
                        "range {s}-{t} contains reserved address {} of nodes[{j}] ({})",
                        node.ip, node.name
                    ),
                );
            }
        }
        for (what, ip) in net.taken() {
            if let Some(ip) = ip.filter(|ip| inside(*ip)) {
                e.push("dhcp.pool", format!("range {s}-{t} contains {what} {ip}"));
            }
        }
        Some((s, t))
    });
    let lease_file = match &h.lease_file {
        Some(f) if f.trim().is_empty() => {
            e.push("dhcp.leaseFile", "must not be empty");
            PathBuf::new()
        }
        Some(f) => resolve(base, f),
        None => PathBuf::from(format!("/var/lib/crc-appliance/{cluster_name}-leases.json")),
    };
    let pxe = h.pxe.as_ref().map(|x| PxeCfg {
        next_server: x
            .next_server
            .as_ref()
            .and_then(|s| e.parse::<Ipv4Addr>("dhcp.pxe.nextServer", s, "IPv4 address"))
            .or(net.appliance_ip)
            .unwrap_or(Ipv4Addr::UNSPECIFIED),
        boot_file: x.boot_file.clone(),
        ipxe_script_url: x.ipxe_script_url.clone(),
    });
    if let Some(x) = &h.pxe {
        for (path, v, max) in [
            ("dhcp.pxe.bootFile", &x.boot_file, 127),
            ("dhcp.pxe.ipxeScriptUrl", &x.ipxe_script_url, 255),
        ] {
            if let Some(v) = v
                && (v.is_empty() || v.len() > max || !v.is_ascii())
            {
                e.push(path, format!("must be 1-{max} ASCII characters"));
            }
        }
    }
    Some(DhcpCfg {
        enabled: h.enabled,
        listen: listen?,
        lease_time: h.lease_time.get(),
        pool,
        lease_file,
        pxe,
    })
}
