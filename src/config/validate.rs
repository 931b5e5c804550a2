//! Raw cluster file → validated [`Cluster`]. Every rule is checked and every
//! violation reported, each with the path of its field.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::FieldError;
use super::raw::{self, ClusterFile};
use super::types::*;
use crate::plan::{self, RData, Record};

/// Collects errors while converting fields.
struct Errs(Vec<FieldError>);

impl Errs {
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            path: path.into(),
            message: message.into(),
        });
    }
    /// Parse `text` as `T`, recording a failure at `path`.
    fn parse<T: FromStr>(&mut self, path: &str, text: &str, what: &str) -> Option<T>
    where
        T::Err: std::fmt::Display,
    {
        match text.trim().parse::<T>() {
            Ok(v) => Some(v),
            Err(err) => {
                self.push(path, format!("{text:?} is not a valid {what} ({err})"));
                None
            }
        }
    }
}

/// True for an RFC 1123 host label: 1-63 of `a-z0-9-`, not starting or ending with `-`.
pub fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// True for a domain of valid labels, at most 253 characters, no trailing dot.
pub fn is_domain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_label)
}

fn label_problem(s: &str) -> String {
    if s.is_empty() {
        "must not be empty".into()
    } else if s.len() > 63 {
        format!("{s:?} is longer than 63 characters")
    } else if s.bytes().any(|b| b.is_ascii_uppercase()) {
        format!("{s:?} must be lower case (RFC 1123)")
    } else {
        format!(
            "{s:?} is not a valid DNS label (a-z, 0-9 and '-', not starting or ending with '-')"
        )
    }
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Parse `ip:port`, or a bare `ip` with `default_port`.
fn sock(e: &mut Errs, path: &str, text: &str, default_port: Option<u16>) -> Option<SocketAddr> {
    let t = text.trim();
    if let Ok(sa) = t.parse::<SocketAddr>() {
        return Some(sa);
    }
    if let (Some(p), Ok(ip)) = (default_port, t.parse::<IpAddr>()) {
        return Some(SocketAddr::new(ip, p));
    }
    let hint = if default_port.is_some() {
        "ip or ip:port"
    } else {
        "ip:port"
    };
    e.push(path, format!("{text:?} is not a valid address ({hint})"));
    None
}

pub fn validate(raw: ClusterFile, base: &Path) -> Result<Cluster, Vec<FieldError>> {
    let mut e = Errs(Vec::new());

    // --- identity
    if !is_label(&raw.name) {
        e.push("name", label_problem(&raw.name));
    }
    let base_domain = raw.base_domain.trim_end_matches('.').to_string();
    if !is_domain(&base_domain) {
        e.push(
            "baseDomain",
            format!(
                "{:?} is not a valid lower-case domain name",
                raw.base_domain
            ),
        );
    }
    let domain = format!("{}.{}", raw.name, base_domain);
    if domain.len() > 200 {
        e.push(
            "baseDomain",
            format!("cluster domain {domain:?} is too long (max 200 characters)"),
        );
    }

    // --- network
    let n = &raw.network;
    let cidr = e.parse::<Ipv4Net>("network.cidr", &n.cidr, "IPv4 CIDR (a.b.c.d/prefix)");
    if let Some(c) = cidr
        && (c.prefix() < 16 || c.prefix() > 30)
    {
        e.push(
            "network.cidr",
            format!("prefix /{} is not supported (use /16 to /30)", c.prefix()),
        );
    }
    let in_net = |e: &mut Errs, path: &str, ip: Option<Ipv4Addr>| {
        if let (Some(c), Some(ip)) = (cidr, ip) {
            if !c.contains(ip) {
                e.push(path, format!("{ip} is outside network.cidr {c}"));
            } else if c.is_reserved(ip) {
                e.push(
                    path,
                    format!("{ip} is the network or broadcast address of {c}"),
                );
            }
        }
    };
    let gateway = e.parse::<Ipv4Addr>("network.gateway", &n.gateway, "IPv4 address");
    in_net(&mut e, "network.gateway", gateway);
    let appliance_ip = e.parse::<Ipv4Addr>("network.applianceIP", &n.appliance_ip, "IPv4 address");
    in_net(&mut e, "network.applianceIP", appliance_ip);
    let api_vip = match &n.api_vip {
        Some(v) => {
            let ip = e.parse::<Ipv4Addr>("network.apiVIP", v, "IPv4 address");
            in_net(&mut e, "network.apiVIP", ip);
            ip
        }
        None => appliance_ip,
    };
    let ingress_vip = match &n.ingress_vip {
        Some(v) => {
            let ip = e.parse::<Ipv4Addr>("network.ingressVIP", v, "IPv4 address");
            in_net(&mut e, "network.ingressVIP", ip);
            ip
        }
        None => appliance_ip,
    };
    if let Some(ifname) = &n.interface
        && (ifname.is_empty() || ifname.len() > 15 || ifname.contains(['/', ' ']))
    {
        e.push(
            "network.interface",
            format!("{ifname:?} is not a valid interface name (1-15 characters, no '/' or spaces)"),
        );
    }
    let mut upstream_dns = Vec::new();
    for (i, u) in n.upstream_dns.iter().enumerate() {
        if let Some(sa) = sock(&mut e, &format!("network.upstreamDNS[{i}]"), u, Some(53)) {
            upstream_dns.push(sa);
        }
    }

    // --- nodes
    let mut nodes = Vec::new();
    let mut seen_name: HashMap<String, usize> = HashMap::new();
    let mut seen_mac: HashMap<MacAddr, usize> = HashMap::new();
    let mut seen_ip: HashMap<Ipv4Addr, usize> = HashMap::new();
    if raw.nodes.is_empty() {
        e.push("nodes", "at least one node is required");
    }
    for (i, rn) in raw.nodes.iter().enumerate() {
        let p = |f: &str| format!("nodes[{i}].{f}");
        if !is_label(&rn.name) {
            e.push(p("name"), label_problem(&rn.name));
        } else if ["api", "api-int", "apps", "ns1"].contains(&rn.name.as_str())
            || rn.name.starts_with("etcd-")
        {
            e.push(
                p("name"),
                format!(
                    "{:?} is reserved for a record the appliance serves",
                    rn.name
                ),
            );
        }
        if let Some(j) = seen_name.insert(rn.name.clone(), i) {
            e.push(
                p("name"),
                format!("duplicate node name {:?} (also nodes[{j}].name)", rn.name),
            );
        }
        let role = match rn.role.parse::<Role>() {
            Ok(r) => Some(r),
            Err(m) => {
                e.push(p("role"), m);
                None
            }
        };
        let mac = e.parse::<MacAddr>(&p("mac"), &rn.mac, "MAC address (52:54:00:xx:xx:xx)");
        if let Some(m) = mac {
            if m.is_multicast() {
                e.push(p("mac"), format!("{m} is a multicast address"));
            } else if m.0 == [0; 6] {
                e.push(p("mac"), "the all-zero MAC is not valid");
            }
            if let Some(j) = seen_mac.insert(m, i) {
                e.push(p("mac"), format!("duplicate MAC {m} (also nodes[{j}].mac)"));
            }
        }
        let ip = e.parse::<Ipv4Addr>(&p("ip"), &rn.ip, "IPv4 address");
        in_net(&mut e, &p("ip"), ip);
        if let Some(ip) = ip {
            if let Some(j) = seen_ip.insert(ip, i) {
                e.push(p("ip"), format!("duplicate IP {ip} (also nodes[{j}].ip)"));
            }
            for (what, other) in [
                ("network.applianceIP", appliance_ip),
                ("network.gateway", gateway),
                ("network.apiVIP", api_vip),
                ("network.ingressVIP", ingress_vip),
            ] {
                if Some(ip) == other {
                    e.push(p("ip"), format!("{ip} is already used by {what}"));
                }
            }
        }
        if let (Some(role), Some(mac), Some(ip)) = (role, mac, ip) {
            nodes.push(NodeCfg {
                name: rn.name.clone(),
                role,
                mac,
                ip,
            });
        }
    }
    let count = |r: Role| raw.nodes.iter().filter(|n| n.role.parse() == Ok(r)).count();
    if !raw.nodes.is_empty() && count(Role::Master) == 0 {
        e.push("nodes", "at least one node with role master is required");
    }
    if count(Role::Bootstrap) > 1 {
        e.push("nodes", "at most one node may have role bootstrap");
    }

    // --- DNS
    let d = &raw.dns;
    let dns_listen: Vec<SocketAddr> = match &d.listen {
        Some(l) => {
            if l.is_empty() && d.enabled {
                e.push(
                    "dns.listen",
                    "needs at least one address when DNS is enabled",
                );
            }
            l.iter()
                .enumerate()
                .filter_map(|(i, s)| sock(&mut e, &format!("dns.listen[{i}]"), s, Some(53)))
                .collect()
        }
        None => appliance_ip
            .map(|ip| vec![SocketAddr::new(ip.into(), 53)])
            .unwrap_or_default(),
    };
    let ttl = secs_u32(&mut e, "dns.ttl", d.ttl);
    let negative_ttl = secs_u32(&mut e, "dns.negativeTtl", d.negative_ttl);
    if d.forward_timeout.get().is_zero() {
        e.push("dns.forwardTimeout", "must be greater than zero");
    }
    for (i, u) in upstream_dns.iter().enumerate() {
        if dns_listen
            .iter()
            .any(|l| l.port() == u.port() && (l.ip() == u.ip() || l.ip().is_unspecified()))
        {
            e.push(
                format!("network.upstreamDNS[{i}]"),
                format!("{u} is this appliance's own DNS listener (forwarding loop)"),
            );
        }
    }
    let reverse = cidr.map(plan::reverse_zones).unwrap_or_default();
    let mut records = Vec::new();
    for (i, r) in d.records.iter().enumerate() {
        match extra_record(r, &domain, &reverse, ttl) {
            Ok(rec) => records.push(rec),
            Err(m) => e.push(format!("dns.records[{i}]"), m),
        }
    }

    // --- DHCP
    let h = &raw.dhcp;
    let dhcp_listen = match &h.listen {
        Some(s) => sock(&mut e, "dhcp.listen", s, Some(67)),
        None => Some(SocketAddr::from(([0, 0, 0, 0], 67))),
    };
    if h.lease_time.get().as_secs() < 60 {
        e.push("dhcp.leaseTime", "must be at least 60s");
    } else if h.lease_time.get().as_secs() > u64::from(u32::MAX) {
        e.push("dhcp.leaseTime", "is too long (max about 136 years)");
    }
    let pool = h.pool.as_ref().and_then(|p| {
        let s = e.parse::<Ipv4Addr>("dhcp.pool.start", &p.start, "IPv4 address");
        in_net(&mut e, "dhcp.pool.start", s);
        let t = e.parse::<Ipv4Addr>("dhcp.pool.end", &p.end, "IPv4 address");
        in_net(&mut e, "dhcp.pool.end", t);
        let (s, t) = (s?, t?);
        if u32::from(s) > u32::from(t) {
            e.push("dhcp.pool", format!("start {s} is after end {t}"));
            return None;
        }
        let inside = |ip: Ipv4Addr| (u32::from(s)..=u32::from(t)).contains(&u32::from(ip));
        for (j, node) in nodes.iter().enumerate() {
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
        for (what, ip) in [
            ("network.applianceIP", appliance_ip),
            ("network.gateway", gateway),
            ("network.apiVIP", api_vip),
            ("network.ingressVIP", ingress_vip),
        ] {
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
        None => PathBuf::from(format!("/var/lib/crc-appliance/{}-leases.json", raw.name)),
    };
    let pxe = h.pxe.as_ref().map(|x| PxeCfg {
        next_server: x
            .next_server
            .as_ref()
            .and_then(|s| e.parse::<Ipv4Addr>("dhcp.pxe.nextServer", s, "IPv4 address"))
            .or(appliance_ip)
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

    // --- load balancer
    let l = &raw.load_balancer;
    let lb_addr = |e: &mut Errs, f: &str, v: &Option<String>, ip: Option<Ipv4Addr>, port| match v {
        Some(s) => sock(e, &format!("loadBalancer.listen.{f}"), s, Some(port)),
        None => ip.map(|ip| SocketAddr::new(ip.into(), port)),
    };
    let lb_api = lb_addr(&mut e, "api", &l.listen.api, api_vip, 6443);
    let lb_mc = lb_addr(
        &mut e,
        "machineConfig",
        &l.listen.machine_config,
        api_vip,
        22623,
    );
    let lb_http = lb_addr(
        &mut e,
        "ingressHttp",
        &l.listen.ingress_http,
        ingress_vip,
        80,
    );
    let lb_https = lb_addr(
        &mut e,
        "ingressHttps",
        &l.listen.ingress_https,
        ingress_vip,
        443,
    );
    let hc = &l.health_check;
    if hc.interval.get().is_zero() {
        e.push(
            "loadBalancer.healthCheck.interval",
            "must be greater than zero",
        );
    }
    if hc.timeout.get().is_zero() {
        e.push(
            "loadBalancer.healthCheck.timeout",
            "must be greater than zero",
        );
    } else if hc.timeout.get() > hc.interval.get() {
        e.push(
            "loadBalancer.healthCheck.timeout",
            format!("{} is longer than interval {}", hc.timeout, hc.interval),
        );
    }
    for (f, v) in [("rise", hc.rise), ("fall", hc.fall)] {
        if v == 0 || v > 100 {
            e.push(format!("loadBalancer.healthCheck.{f}"), "must be 1..100");
        }
    }
    if l.max_connections == 0 {
        e.push("loadBalancer.maxConnections", "must be greater than zero");
    }
    if l.idle_timeout.get().is_zero() {
        e.push("loadBalancer.idleTimeout", "must be greater than zero");
    }
    if l.connect_timeout.get().is_zero() {
        e.push("loadBalancer.connectTimeout", "must be greater than zero");
    }
    let bp = &l.backend_ports;
    for (f, v) in [
        ("api", bp.api),
        ("machineConfig", bp.machine_config),
        ("ingressHttp", bp.ingress_http),
        ("ingressHttps", bp.ingress_https),
    ] {
        if v == 0 {
            e.push(format!("loadBalancer.backendPorts.{f}"), "must not be 0");
        }
    }
    let ca_file = l.ca_file.as_ref().map(|f| resolve(base, f));
    let mut backend_overrides = std::collections::BTreeMap::new();
    for (node, o) in &l.backend_overrides {
        let base_path = format!("loadBalancer.backendOverrides.{node}");
        if !raw.nodes.iter().any(|n| &n.name == node) {
            e.push(&base_path, "is not a node name");
        }
        let mut one = |f: &str, v: &Option<String>| {
            v.as_ref()
                .and_then(|t| sock(&mut e, &format!("{base_path}.{f}"), t, None))
        };
        let cfg = BackendOverrideCfg {
            api: one("api", &o.api),
            machine_config: one("machineConfig", &o.machine_config),
            ingress_http: one("ingressHttp", &o.ingress_http),
            ingress_https: one("ingressHttps", &o.ingress_https),
        };
        backend_overrides.insert(node.clone(), cfg);
    }

    // --- HTTP and admin
    let t = &raw.http;
    let http_listen = match &t.listen {
        Some(s) => sock(&mut e, "http.listen", s, Some(8080)),
        None => appliance_ip.map(|ip| SocketAddr::new(ip.into(), 8080)),
    };
    for (f, v) in [
        ("imagesDir", &t.images_dir),
        ("ignitionDir", &t.ignition_dir),
    ] {
        if v.trim().is_empty() {
            e.push(format!("http.{f}"), "must not be empty");
        }
    }
    let admin_listen = sock(&mut e, "admin.listen", &raw.admin.listen, None);

    // --- pxe (TFTP)
    let tftp = super::pxe::tftp(raw.pxe.as_ref(), appliance_ip, base, &mut e.0);

    // --- listeners must not collide
    let mut tcp: Vec<(String, SocketAddr)> = Vec::new();
    let mut udp: Vec<(String, SocketAddr)> = Vec::new();
    if d.enabled {
        for (i, a) in dns_listen.iter().enumerate() {
            tcp.push((format!("dns.listen[{i}]"), *a));
            udp.push((format!("dns.listen[{i}]"), *a));
        }
    }
    if h.enabled
        && let Some(a) = dhcp_listen
    {
        udp.push(("dhcp.listen".into(), a));
    }
    if l.enabled {
        for (f, a) in [
            ("api", lb_api),
            ("machineConfig", lb_mc),
            ("ingressHttp", lb_http),
            ("ingressHttps", lb_https),
        ] {
            if let Some(a) = a {
                tcp.push((format!("loadBalancer.listen.{f}"), a));
            }
        }
    }
    if t.enabled
        && let Some(a) = http_listen
    {
        tcp.push(("http.listen".into(), a));
    }
    if raw.admin.enabled
        && let Some(a) = admin_listen
    {
        tcp.push(("admin.listen".into(), a));
    }
    if let Some(t) = tftp.as_ref().filter(|t| t.enabled) {
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

    // --- libvirt
    let libvirt = raw
        .libvirt
        .as_ref()
        .map(|v| libvirt(&mut e, v, &raw.name, base));

    if !e.0.is_empty() {
        return Err(e.0);
    }
    // Every Option below is Some when no error was recorded.
    let missing = "validated";
    Ok(Cluster {
        name: raw.name.clone(),
        base_domain,
        domain,
        network: NetworkCfg {
            cidr: cidr.expect(missing),
            gateway: gateway.expect(missing),
            appliance_ip: appliance_ip.expect(missing),
            api_vip: api_vip.expect(missing),
            ingress_vip: ingress_vip.expect(missing),
            interface: n.interface.clone(),
            upstream_dns,
        },
        nodes,
        dns: DnsCfg {
            enabled: d.enabled,
            listen: dns_listen,
            ttl,
            negative_ttl,
            forward_timeout: d.forward_timeout.get(),
            records,
        },
        dhcp: DhcpCfg {
            enabled: h.enabled,
            listen: dhcp_listen.expect(missing),
            lease_time: h.lease_time.get(),
            pool,
            lease_file,
            pxe,
        },
        lb: LbCfg {
            enabled: l.enabled,
            api: lb_api.expect(missing),
            machine_config: lb_mc.expect(missing),
            ingress_http: lb_http.expect(missing),
            ingress_https: lb_https.expect(missing),
            backend_ports: BackendPortsCfg {
                api: bp.api,
                machine_config: bp.machine_config,
                ingress_http: bp.ingress_http,
                ingress_https: bp.ingress_https,
            },
            health: HealthCfg {
                interval: hc.interval.get(),
                timeout: hc.timeout.get(),
                rise: hc.rise,
                fall: hc.fall,
            },
            ca_file,
            max_connections: l.max_connections,
            idle_timeout: l.idle_timeout.get(),
            connect_timeout: l.connect_timeout.get(),
            backend_overrides,
        },
        http: HttpCfg {
            enabled: t.enabled,
            listen: http_listen.expect(missing),
            images_dir: resolve(base, &t.images_dir),
            ignition_dir: resolve(base, &t.ignition_dir),
        },
        admin: AdminCfg {
            enabled: raw.admin.enabled,
            listen: admin_listen.expect(missing),
        },
        libvirt: libvirt.map(|v| v.expect(missing)),
        tftp,
    })
}

fn secs_u32(e: &mut Errs, path: &str, d: super::Dur) -> u32 {
    match u32::try_from(d.get().as_secs()) {
        Ok(v) if v <= 7 * 86_400 => v,
        _ => {
            e.push(path, "must be at most 7d");
            0
        }
    }
}

fn libvirt(e: &mut Errs, v: &raw::Libvirt, cluster: &str, base: &Path) -> Option<LibvirtCfg> {
    let mut ok = true;
    if v.uri.trim().is_empty() {
        e.push("libvirt.uri", "must not be empty");
        ok = false;
    }
    if v.iso.trim().is_empty() {
        e.push("libvirt.iso", "must not be empty");
        ok = false;
    }
    let network_name = v
        .network
        .name
        .clone()
        .unwrap_or_else(|| cluster.to_string());
    if network_name.is_empty()
        || network_name.len() > 50
        || !network_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        e.push(
            "libvirt.network.name",
            format!("{network_name:?} must be 1-50 characters of a-z, 0-9, '-' or '_'"),
        );
        ok = false;
    }
    let bridge = v.network.bridge.clone().unwrap_or_else(|| {
        let mut b = format!("crc-{cluster}");
        b.truncate(15);
        b
    });
    if bridge.is_empty() || bridge.len() > 15 || bridge.contains(['/', ' ']) {
        e.push(
            "libvirt.network.bridge",
            format!("{bridge:?} is not a valid bridge name (1-15 characters)"),
        );
        ok = false;
    }
    let mode = match v.network.mode.as_deref().unwrap_or("appliance") {
        "appliance" => NetMode::Appliance,
        "forwarder" => NetMode::Forwarder,
        other => {
            e.push(
                "libvirt.network.mode",
                format!("unknown mode {other:?} (expected appliance or forwarder)"),
            );
            ok = false;
            NetMode::Appliance
        }
    };
    if !is_label(&v.pool.name.to_ascii_lowercase().replace('_', "-")) {
        e.push(
            "libvirt.pool.name",
            format!("{:?} is not a valid pool name", v.pool.name),
        );
        ok = false;
    }
    if !v.install_dev.starts_with("/dev/") {
        e.push(
            "libvirt.installDev",
            format!("{:?} must be a /dev/ path", v.install_dev),
        );
        ok = false;
    }
    let mut res = |role: &str, r: &raw::Resource| {
        let p = |f: &str| format!("libvirt.resources.{role}.{f}");
        if r.cpus == 0 || r.cpus > 256 {
            e.push(p("cpus"), "must be 1..256");
            ok = false;
        }
        if r.memory_mib < 512 {
            e.push(p("memoryMib"), "must be at least 512");
            ok = false;
        }
        if r.disk_gib == 0 {
            e.push(p("diskGib"), "must be greater than zero");
            ok = false;
        }
        ResourceCfg {
            cpus: r.cpus,
            memory_mib: r.memory_mib,
            disk_gib: r.disk_gib,
        }
    };
    let bootstrap = res("bootstrap", &v.resources.bootstrap);
    let master = res("master", &v.resources.master);
    let worker = res("worker", &v.resources.worker);
    ok.then(|| LibvirtCfg {
        uri: v.uri.clone(),
        iso: resolve(base, &v.iso),
        pool_name: v.pool.name.clone(),
        pool_path: resolve(base, &v.pool.path),
        network_name,
        bridge,
        mode,
        nat: v.network.nat,
        bootstrap,
        master,
        worker,
        install_dev: v.install_dev.clone(),
        start_on_serve: v.start_on_serve,
    })
}

/// Turn one extra record into a [`Record`] inside the cluster or a reverse zone.
fn extra_record(
    r: &raw::ExtraRecord,
    domain: &str,
    reverse: &[String],
    default_ttl: u32,
) -> Result<Record, String> {
    let name = plan::absolute(&r.name.to_ascii_lowercase(), domain);
    let owner = name.trim_end_matches('.');
    let labels_ok = owner.split('.').enumerate().all(|(i, l)| {
        is_label(l) || (l == "*" && i == 0) || (l.starts_with('_') && is_label(&l[1..]))
    });
    if !labels_ok {
        return Err(format!("name {:?} is not a valid domain name", r.name));
    }
    let in_zone = |z: &str| owner == z || owner.ends_with(&format!(".{z}"));
    if !in_zone(domain) && !reverse.iter().any(|z| in_zone(z.trim_end_matches('.'))) {
        return Err(format!(
            "name {name} is outside the zones served ({domain} and its reverse zones)"
        ));
    }
    let ttl = match r.ttl {
        Some(t) => u32::try_from(t.as_secs()).map_err(|_| "ttl is too large".to_string())?,
        None => default_ttl,
    };
    let v = r.value.trim();
    let target = |v: &str| -> Result<String, String> {
        let t = plan::absolute(&v.to_ascii_lowercase(), domain);
        if t == "."
            || t.trim_end_matches('.')
                .split('.')
                .all(|l| is_label(l) || l.starts_with('_'))
        {
            Ok(t)
        } else {
            Err(format!("{v:?} is not a valid domain name"))
        }
    };
    let data = match r.rtype.to_ascii_uppercase().as_str() {
        "A" => RData::A(
            v.parse()
                .map_err(|_| format!("A value {v:?} is not an IPv4 address"))?,
        ),
        "AAAA" => RData::Aaaa(
            v.parse()
                .map_err(|_| format!("AAAA value {v:?} is not an IPv6 address"))?,
        ),
        "CNAME" => {
            if !owner.starts_with('*') && in_zone(domain) && owner == domain {
                return Err("a CNAME cannot be at the zone apex".into());
            }
            RData::Cname(target(v)?)
        }
        "PTR" => RData::Ptr(target(v)?),
        "TXT" => {
            if v.len() > 255 {
                return Err("TXT value longer than 255 characters".into());
            }
            RData::Txt(v.to_string())
        }
        "SRV" => {
            let f: Vec<&str> = v.split_whitespace().collect();
            let num = |s: &str| s.parse::<u16>().ok();
            match f.as_slice() {
                [p, w, port, t] if num(p).is_some() && num(w).is_some() && num(port).is_some() => {
                    RData::Srv {
                        priority: num(p).unwrap_or_default(),
                        weight: num(w).unwrap_or_default(),
                        port: num(port).unwrap_or_default(),
                        target: target(t)?,
                    }
                }
                _ => {
                    return Err(format!(
                        "SRV value {v:?} must be \"priority weight port target\""
                    ));
                }
            }
        }
        other => {
            return Err(format!(
                "type {other:?} is not supported (A, AAAA, CNAME, PTR, SRV, TXT)"
            ));
        }
    };
    Ok(Record { name, ttl, data })
}
