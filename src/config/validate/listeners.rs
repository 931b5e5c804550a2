//! No two enabled listeners on the same port and address (an unspecified
//! address collides with every address), per protocol. Port 0 (pick one)
//! never collides.

use std::net::SocketAddr;

use super::Errs;
use crate::config::raw::ClusterFile;
use crate::model::cluster::{AdminCfg, DhcpCfg, DnsCfg, HttpCfg, LbCfg, TftpCfg};

/// The sections with listeners, as far as they could be assembled.
pub(crate) struct Enabled<'a> {
    pub dns: Option<&'a DnsCfg>,
    pub dhcp: Option<&'a DhcpCfg>,
    pub lb: Option<&'a LbCfg>,
    pub http: Option<&'a HttpCfg>,
    pub admin: Option<&'a AdminCfg>,
    pub tftp: Option<&'a TftpCfg>,
}

pub(crate) fn check(raw: &ClusterFile, s: &Enabled<'_>, e: &mut Errs) {
    let Enabled {
        dns,
        dhcp,
        lb,
        http,
        admin,
        tftp,
    } = *s;
    let mut tcp: Vec<(String, SocketAddr)> = Vec::new();
    let mut udp: Vec<(String, SocketAddr)> = Vec::new();
    if let Some(d) = dns.filter(|_| raw.dns.enabled) {
        for (i, a) in d.listen.iter().enumerate() {
            tcp.push((format!("dns.listen[{i}]"), *a));
            udp.push((format!("dns.listen[{i}]"), *a));
        }
    }
    if let Some(h) = dhcp.filter(|_| raw.dhcp.enabled) {
        udp.push(("dhcp.listen".into(), h.listen));
    }
    if let Some(l) = lb.filter(|_| raw.load_balancer.enabled) {
        for (f, a) in [
            ("api", l.api),
            ("machineConfig", l.machine_config),
            ("ingressHttp", l.ingress_http),
            ("ingressHttps", l.ingress_https),
        ] {
            tcp.push((format!("loadBalancer.listen.{f}"), a));
        }
    }
    if let Some(h) = http.filter(|_| raw.http.enabled) {
        tcp.push(("http.listen".into(), h.listen));
    }
    if let Some(a) = admin.filter(|_| raw.admin.enabled) {
        tcp.push(("admin.listen".into(), a.listen));
    }
    if let Some(t) = tftp.filter(|t| t.enabled) {
        udp.push(("pxe.tftpListen".into(), t.listen));
    }
    for (proto, list) in [("TCP", &tcp), ("UDP", &udp)] {
        for (i, (pa, a)) in list.iter().enumerate() {
            for (pb, b) in &list[..i] {
                let same_ip =
                    a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified();
                if a.port() != 0 && a.port() == b.port() && same_ip {
                    e.push(pa.clone(), format!("{proto} {a} collides with {pb} ({b})"));
                }
            }
        }
    }
}
