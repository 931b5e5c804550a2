//! The top-level `ha:` section: this appliance is one member of a pair
//! behind keepalived (issue #26; docs/ha.md). Its defaults and validation
//! (the raw type: `raw/ha.rs`).
//!
//! With `ha`, `network.applianceIP`, `apiVIP` and `ingressVIP` are virtual
//! addresses that keepalived moves between the members; each member has
//! its own address on `network.interface` as well (`ownIP`, optional:
//! keepalived's `unicast_src_ip`, else the interface's primary address).
//!
//! Rules: `peer` is an IPv4 address inside `network.cidr` that is none of
//! the VIPs, nodes or `ownIP`, and neither it nor `ownIP` is inside a DHCP
//! pool (`dhcp.pool`, the segments' pools); `network.interface` is set
//! (keepalived's `interface`); `tokenFile` is a private token file (the
//! pair key: the exchange's HMAC key), neither `admin.tokenFile` nor
//! holding the same token; `priority` 1 to 254 (default 100); `virtualRouterId` 1 to 255
//! (default [`derived_vrid`] of the cluster domain, printed by `check`);
//! the admin API is on and listens on a non-loopback address (the peer
//! sends its state there); `libvirt.startOnServe` is refused (it would
//! start the VMs on both members).

use std::net::Ipv4Addr;
use std::path::Path;

use crate::config::FieldError;
use crate::config::raw::RawHa;
use crate::model::cluster::Cluster;
use crate::model::cluster::HaCfg;

/// Default VRRP priority.
pub(super) const DEFAULT_PRIORITY: u8 = 100;

/// The default virtual router id of `domain`: FNV-1a of its bytes mapped
/// onto 1..=255, so that two clusters on one segment rarely collide and a
/// pair always agrees without writing it down.
pub(super) fn derived_vrid(domain: &str) -> u8 {
    let mut h: u32 = 0x811c_9dc5;
    for b in domain.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    // 1..=255: 0 is not a valid VRID.
    u8::try_from(h % 255).map_or(1, |v| v + 1)
}

/// Validate `ha:` against the rest of the validated cluster `c`. `None`
/// when absent or invalid (errors pushed with their field paths).
pub(super) fn ha(
    raw: Option<&RawHa>,
    c: &Cluster,
    base: &Path,
    errs: &mut Vec<FieldError>,
) -> Option<HaCfg> {
    let raw = raw?;
    let before = errs.len();
    let mut push = |path: &str, message: String| {
        errs.push(FieldError {
            path: path.into(),
            message,
        })
    };
    let net = &c.network;
    let peer = member_address(c, &mut push, "ha.peer", &raw.peer);
    let own_ip = match &raw.own_ip {
        Some(t) => member_address(c, &mut push, "ha.ownIP", t),
        None => None,
    };
    if peer.is_some() && peer == own_ip {
        push("ha.ownIP", "is the same address as ha.peer".into());
    }
    let priority = raw.priority.unwrap_or(DEFAULT_PRIORITY);
    if !(1..=254).contains(&priority) {
        push(
            "ha.priority",
            format!("{priority} is out of range (1 to 254)"),
        );
    }
    if raw.virtual_router_id == Some(0) {
        push("ha.virtualRouterId", "0 is out of range (1 to 255)".into());
    }
    let token_file = super::resolve(base, &raw.token_file);
    if let Err(m) = crate::config::secret::check_token_file(&token_file) {
        push("ha.tokenFile", m.to_string());
    } else if let Some(m) = c
        .admin
        .token_file
        .as_deref()
        .and_then(|admin| same_secret(&token_file, admin))
    {
        push("ha.tokenFile", m);
    }
    let Some(interface) = net.interface.clone() else {
        push(
            "network.interface",
            "ha needs the interface the VIPs live on (keepalived's `interface`)".into(),
        );
        return None;
    };
    if !c.admin.enabled || c.admin.listen.ip().is_loopback() {
        push(
            "admin.listen",
            format!(
                "ha: the peer sends its state to this member's admin API, which must be on and listen on a non-loopback address (e.g. 0.0.0.0:{}), not {}",
                c.admin.listen.port(),
                c.admin.listen
            ),
        );
    }
    if c.libvirt.as_ref().is_some_and(|l| l.start_on_serve) {
        push(
            "libvirt.startOnServe",
            "ha: both members would start the VMs; run `crc-appliance vm up` on the member holding the VIPs instead".into(),
        );
    }
    if errs.len() != before {
        return None;
    }
    Some(HaCfg {
        peer: peer?,
        own_ip,
        interface,
        priority,
        virtual_router_id: raw
            .virtual_router_id
            .unwrap_or_else(|| derived_vrid(&c.domain)),
        token_file,
    })
}

/// A member's own address at `path` (`ha.peer`, `ha.ownIP`): an IPv4
/// address inside `network.cidr` that is none of the VIPs, no node's, and
/// outside every DHCP pool. `None` when it is not (the reason pushed).
fn member_address(
    c: &Cluster,
    push: &mut dyn FnMut(&str, String),
    path: &str,
    text: &str,
) -> Option<Ipv4Addr> {
    let net = &c.network;
    let vips = [net.appliance_ip, net.api_vip, net.ingress_vip];
    let ip = text
        .trim()
        .parse::<Ipv4Addr>()
        .map_err(|_| push(path, format!("{text:?} is not an IPv4 address")))
        .ok()?;
    if !net.cidr.contains(ip) {
        push(path, format!("{ip} is outside network.cidr {}", net.cidr));
        return None;
    }
    if vips.contains(&ip) {
        push(
            path,
            format!(
                "{ip} is a VIP (applianceIP, apiVIP or ingressVIP): give the member's own address"
            ),
        );
        return None;
    }
    if let Some(n) = c.nodes.iter().find(|n| n.ip == ip) {
        push(path, format!("{ip} is node {}'s address", n.name));
        return None;
    }
    if let Some(pool) = pool_of(c, ip) {
        push(
            path,
            format!(
                "{ip} is inside the DHCP pool {pool}: the appliance could lease it to any client, which would then receive the pair's exchanges; give the member an address outside every pool"
            ),
        );
        return None;
    }
    Some(ip)
}

/// The DHCP pool (`dhcp.pool` or a segment's) holding `ip`, for messages.
/// (`ha.peer` and `ownIP` are IPv4: the DHCPv6 pool cannot hold them.)
fn pool_of(c: &Cluster, ip: Ipv4Addr) -> Option<String> {
    let inside = |p: &Option<(Ipv4Addr, Ipv4Addr)>| {
        p.filter(|(s, e)| (*s..=*e).contains(&ip))
            .map(|(s, e)| format!("{s}-{e}"))
    };
    inside(&c.dhcp.pool)
        .map(|p| format!("dhcp.pool {p}"))
        .or_else(|| {
            c.dhcp
                .segments
                .iter()
                .find_map(|seg| inside(&seg.pool).map(|p| format!("of segment {} ({p})", seg.cidr)))
        })
}

/// Why the pair key file `ha` cannot be used beside the admin token file
/// `admin`, if it cannot: the pair key must be its own secret (a member
/// that leaked it must not give the admin API away, and the other way
/// round), so neither the same file nor the same token.
fn same_secret(ha: &Path, admin: &Path) -> Option<String> {
    let fix = "create a separate pair key on one member (openssl rand -hex 32 > /etc/crc-appliance/ha.key; chmod 600), copy it to the other, and point ha.tokenFile at it";
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if canon(ha) == canon(admin) {
        return Some(format!(
            "is admin.tokenFile too: the pair key must be a different file from the admin token; {fix}"
        ));
    }
    let (Ok(a), Ok(b)) = (
        crate::config::secret::read_token(ha),
        crate::config::secret::read_token(admin),
    ) else {
        return None;
    };
    (a == b).then(|| {
        format!(
            "{} holds the same token as admin.tokenFile: the pair key must be a different secret; {fix}",
            ha.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_vrid_is_stable_and_in_range() {
        assert_eq!(
            derived_vrid("ocp.lab.example"),
            derived_vrid("ocp.lab.example")
        );
        assert_ne!(derived_vrid("a.example"), derived_vrid("b.example"));
        for d in [
            "",
            "x",
            "ocp.example.com",
            "averyveryverylongclustername.example",
        ] {
            assert!(derived_vrid(d) >= 1);
        }
    }

    const FILE: &str = r#"name: ocp4
baseDomain: example.com
network:
  cidr: 192.168.131.0/24
  gateway: 192.168.131.1
  applianceIP: 192.168.131.2
  apiVIP: 192.168.131.3
  interface: br0
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:05", ip: 192.168.131.5 }
  - { name: master-0, role: master, mac: "52:54:00:00:00:0a", ip: 192.168.131.10 }
admin: { listen: "0.0.0.0:9180", tokenFile: admin.token }
dhcp: { pool: { start: 192.168.131.100, end: 192.168.131.199 } }
"#;

    fn load(ha: &str, network_tail: Option<&str>) -> Result<HaCfg, Vec<String>> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("ha.token", "0123456789abcdef0123\n"),
            ("admin.token", "admin-0123456789abcdef\n"),
            ("copy.token", "admin-0123456789abcdef\n"),
        ] {
            let f = dir.path().join(name);
            std::fs::write(&f, text).unwrap();
            std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
        }
        let mut text = FILE.to_string();
        if let Some(t) = network_tail {
            text = text.replace("  interface: br0\n", t);
        }
        text.push_str(&format!("ha: {ha}\n"));
        match crate::config::from_str(&text, dir.path(), Path::new("c.yaml")) {
            Ok(p) => Ok(p.cluster.ha.expect("ha")),
            Err(e) => Err(e
                .field_errors()
                .iter()
                .map(|f| format!("{}: {}", f.path, f.message))
                .collect()),
        }
    }

    #[test]
    fn defaults_and_explicit_values() {
        let h = load("{peer: 192.168.131.252, tokenFile: ha.token}", None).unwrap();
        assert_eq!(h.peer, Ipv4Addr::new(192, 168, 131, 252));
        assert_eq!(h.priority, DEFAULT_PRIORITY);
        assert_eq!(h.virtual_router_id, derived_vrid("ocp4.example.com"));
        assert_eq!(h.interface, "br0");
        assert_eq!(h.own_ip, None);
        let h = load(
            "{peer: 192.168.131.252, tokenFile: ha.token, priority: 150, virtualRouterId: 7, ownIP: 192.168.131.251}",
            None,
        )
        .unwrap();
        assert_eq!((h.priority, h.virtual_router_id), (150, 7));
        assert_eq!(h.own_ip, Some(Ipv4Addr::new(192, 168, 131, 251)));
    }

    #[test]
    fn errors_name_their_fields() {
        let e = load(
            "{peer: 192.168.131.3, tokenFile: missing, priority: 255, virtualRouterId: 0, ownIP: 192.168.131.10}",
            None,
        )
        .unwrap_err();
        let paths: Vec<&str> = e.iter().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "ha.peer",
                "ha.ownIP",
                "ha.priority",
                "ha.virtualRouterId",
                "ha.tokenFile"
            ],
            "{e:?}"
        );
        assert!(e[0].contains("VIP"), "{e:?}");
        let e = load("{peer: 10.9.9.9, tokenFile: ha.token}", None).unwrap_err();
        assert!(
            e[0].starts_with("ha.peer") && e[0].contains("outside"),
            "{e:?}"
        );
        let e = load("{peer: 192.168.131.252, tokenFile: ha.token}", Some("")).unwrap_err();
        assert!(e[0].starts_with("network.interface"), "{e:?}");
    }

    #[test]
    fn the_pair_key_is_not_the_admin_token_and_members_are_outside_the_pools() {
        let e = load("{peer: 192.168.131.252, tokenFile: admin.token}", None).unwrap_err();
        assert!(
            e[0].starts_with("ha.tokenFile") && e[0].contains("different file"),
            "{e:?}"
        );
        let e = load("{peer: 192.168.131.252, tokenFile: copy.token}", None).unwrap_err();
        assert!(e[0].contains("same token as admin.tokenFile"), "{e:?}");
        assert!(e[0].contains("openssl rand"), "the fix: {e:?}");
        let e = load("{peer: 192.168.131.150, tokenFile: ha.token}", None).unwrap_err();
        assert!(
            e[0].starts_with("ha.peer")
                && e[0].contains("dhcp.pool 192.168.131.100-192.168.131.199"),
            "{e:?}"
        );
        let e = load(
            "{peer: 192.168.131.252, ownIP: 192.168.131.199, tokenFile: ha.token}",
            None,
        )
        .unwrap_err();
        assert!(
            e[0].starts_with("ha.ownIP") && e[0].contains("pool"),
            "{e:?}"
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(
            serde_saphyr::from_str::<RawHa>("{peer: 10.0.0.3, tokenFile: t, prio: 3}").is_err()
        );
        let r: RawHa =
            serde_saphyr::from_str("{peer: 10.0.0.3, tokenFile: t, ownIP: 10.0.0.2}").unwrap();
        assert_eq!(r.own_ip.as_deref(), Some("10.0.0.2"));
    }
}
