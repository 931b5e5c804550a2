//! `dhcp.mode` and what `proxy` rules out: in proxy mode the site's DHCP
//! server lends every address, so the settings that only a server that
//! lends addresses uses (`pool`, relayed `segments`, `relays`) are
//! mistakes, one message each with the fix; so are the DHCPv6 settings
//! (the appliance runs no DHCPv6 in proxy mode: [`ipv6_rules`]).

use super::super::Errs;
use crate::config::raw;
use crate::model::cluster::DhcpMode;

/// `dhcp.mode` (default `server`), and in proxy mode one error per setting
/// that a proxy never uses.
pub(super) fn mode(h: &raw::Dhcp, e: &mut Errs) -> DhcpMode {
    let mode = match h.mode.as_deref() {
        None | Some("server") => DhcpMode::Server,
        Some("proxy") => DhcpMode::Proxy,
        Some(other) => {
            e.push(
                "dhcp.mode",
                format!(
                    "unknown mode {other:?}: use server (the appliance lends the addresses) or proxy (beside the site's DHCP server)"
                ),
            );
            DhcpMode::Server
        }
    };
    if mode == DhcpMode::Proxy {
        let why = "is not used with dhcp.mode: proxy (the site's DHCP server lends the addresses); remove it";
        if h.pool.is_some() {
            e.push("dhcp.pool", why);
        }
        if !h.segments.is_empty() {
            e.push(
                "dhcp.segments",
                "are not served with dhcp.mode: proxy (a proxy answers PXE clients on network.cidr only); remove them",
            );
        }
        if !h.relays.is_empty() {
            e.push("dhcp.relays", why);
        }
        if h.allow_other_servers {
            e.push(
                "dhcp.allowOtherServers",
                "is for dhcp.mode: server (a proxy always runs beside another server); remove it",
            );
        }
        let no_v6 = "is not used with dhcp.mode: proxy (the appliance runs no DHCPv6 beside the site's DHCP server); remove it";
        if h.listen6.is_some() {
            e.push("dhcp.listen6", no_v6);
        }
        if h.binding_file6.is_some() {
            e.push("dhcp.bindingFile6", no_v6);
        }
    }
    mode
}

/// `network.ipv6` beside `dhcp.mode: proxy`: the site owns the segment's
/// addressing, so the appliance runs no DHCPv6 and sends no router
/// advertisements (`catalogue`'s `runs(Dhcp6)`); asking for either is a
/// mistake, one message each.
pub(crate) fn ipv6_rules(n: &raw::Network, mode: Option<DhcpMode>, e: &mut Errs) {
    let (Some(DhcpMode::Proxy), Some(v6)) = (mode, &n.ipv6) else {
        return;
    };
    if v6.router_advertisements {
        e.push(
            "network.ipv6.routerAdvertisements",
            "is not sent with dhcp.mode: proxy (the site's router advertises the segment; the appliance runs no DHCPv6 there); remove it",
        );
    }
    if v6.pool.is_some() {
        e.push(
            "network.ipv6.pool",
            "is not used with dhcp.mode: proxy (the appliance runs no DHCPv6 beside the site's DHCP server); remove it",
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::parse_str;
    use crate::config::validate::validate;
    use crate::model::cluster::DhcpMode;

    const BASE: &str = "name: c\nbaseDomain: example.com\nnetwork: { cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1 }\nnodes:\n  - { name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10 }\n";

    fn errors(dhcp: &str) -> Vec<String> {
        let text = format!("{BASE}dhcp:\n{dhcp}");
        match validate(parse_str(&text).unwrap(), Path::new("/base")) {
            Ok(_) => Vec::new(),
            Err(errs) => errs.iter().map(|x| format!("{x:?}")).collect(),
        }
    }

    #[test]
    fn mode_defaults_to_server_and_takes_proxy() {
        for (yaml, want) in [
            ("  leaseTime: 1h\n", DhcpMode::Server),
            (
                "  mode: server\n  allowOtherServers: true\n",
                DhcpMode::Server,
            ),
            ("  mode: proxy\n", DhcpMode::Proxy),
        ] {
            let text = format!("{BASE}dhcp:\n{yaml}");
            let c = validate(parse_str(&text).unwrap(), Path::new("/base")).unwrap();
            assert_eq!(c.dhcp.mode, want, "{yaml}");
        }
    }

    #[test]
    fn proxy_mode_runs_no_dhcpv6_and_refuses_its_settings() {
        let v6 = "network: { cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1, interface: br0, ipv6: { cidr: 'fd00::/64', applianceIP: 'fd00::1', routerAdvertisements: true, pool: { start: 'fd00::100', end: 'fd00::1ff' } } }";
        let text = BASE.replace(
            "network: { cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1 }",
            v6,
        );
        let text = format!("{text}dhcp:\n  mode: proxy\n  listen6: '[::]:547'\n");
        let e: Vec<String> = match validate(parse_str(&text).unwrap(), Path::new("/base")) {
            Ok(_) => Vec::new(),
            Err(errs) => errs.iter().map(|x| x.path.clone()).collect(),
        };
        assert_eq!(
            e,
            [
                "dhcp.listen6",
                "network.ipv6.routerAdvertisements",
                "network.ipv6.pool"
            ],
            "{e:?}"
        );
        // Without them: valid, and DHCPv6 does not run (server mode: it does).
        let ok = text
            .replace(
                ", routerAdvertisements: true, pool: { start: 'fd00::100', end: 'fd00::1ff' }",
                "",
            )
            .replace("  listen6: '[::]:547'\n", "");
        let c = validate(parse_str(&ok).unwrap(), Path::new("/base")).unwrap();
        assert!(!c.runs(crate::model::catalogue::ServiceKind::Dhcp6));
        assert!(c.runs(crate::model::catalogue::ServiceKind::Dhcp));
        let server = ok.replace("  mode: proxy\n", "  mode: server\n");
        let c = validate(parse_str(&server).unwrap(), Path::new("/base")).unwrap();
        assert!(c.runs(crate::model::catalogue::ServiceKind::Dhcp6));
    }

    #[test]
    fn proxy_mode_rejects_what_only_a_server_uses_one_message_each() {
        let e = errors(
            "  mode: proxy\n  allowOtherServers: true\n  pool: { start: 10.0.0.100, end: 10.0.0.110 }\n  relays: [10.0.0.2]\n  segments: [{ cidr: 10.1.0.0/24, gateway: 10.1.0.1 }]\n",
        );
        assert_eq!(e.len(), 4, "{e:?}");
        for field in [
            "dhcp.pool",
            "dhcp.segments",
            "dhcp.relays",
            "dhcp.allowOtherServers",
        ] {
            assert!(
                e.iter()
                    .any(|m| m.contains(&format!("\"{field}\"")) && m.contains("proxy")),
                "{field}: {e:?}"
            );
        }
        let e = errors("  mode: relay\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("dhcp.mode") && e[0].contains("server") && e[0].contains("proxy"));
    }
}
