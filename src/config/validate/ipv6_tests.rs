//! Unit tests of `network.ipv6` and `nodes[].ipv6` validation, through
//! `config::from_str` (every error with its path, the plan's AAAA and
//! `ip6.arpa` records, the accessors the services use).

use std::net::Ipv6Addr;
use std::path::Path;

use crate::config::{ConfigError, from_str};
use crate::model::names::RData;
use crate::plan::Plan;

const V4: &str = r#"name: ocp4
baseDomain: example.com
network:
  cidr: 192.168.131.0/24
  gateway: 192.168.131.1
  applianceIP: 192.168.131.2
"#;

const NODES: &str = r#"nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:05", ip: 192.168.131.5, ipv6: "fd00:131::5" }
  - { name: master-0, role: master, mac: "52:54:00:00:00:0a", ip: 192.168.131.10, ipv6: "fd00:131::a" }
  - { name: worker-0, role: worker, mac: "52:54:00:00:00:14", ip: 192.168.131.20 }
"#;

fn file(v6: &str, nodes: &str) -> String {
    format!("{V4}{v6}{nodes}")
}

fn load(text: &str) -> Result<Plan, ConfigError> {
    from_str(text, Path::new("/base"), Path::new("t.yaml"))
}

/// The `path: message` lines of a file that must be refused.
fn errors(text: &str) -> Vec<String> {
    match load(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(ConfigError::Invalid { errors, .. }) => errors.iter().map(|e| e.to_string()).collect(),
        Err(e) => panic!("{e}"),
    }
}

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

const GOOD: &str = "  ipv6:\n    cidr: fd00:131::/64\n    applianceIP: fd00:131::2\n";

#[test]
fn a_v4_only_file_has_no_ipv6_anywhere() {
    let plan = load(&file(
        "",
        &NODES
            .replace(", ipv6: \"fd00:131::5\"", "")
            .replace(", ipv6: \"fd00:131::a\"", ""),
    ))
    .unwrap();
    let c = &plan.cluster;
    assert!(c.network.ipv6.is_none());
    assert!(c.nodes.iter().all(|n| n.ipv6.is_none()));
    assert_eq!(c.api_address_v6(), None);
    assert!(c.apps_addresses_v6().is_empty());
    assert_eq!(c.dns.listen, ["192.168.131.2:53".parse().unwrap()]);
    let aaaa = plan
        .zones
        .iter()
        .flat_map(|z| &z.records)
        .filter(|r| matches!(r.data, RData::Aaaa(_)) || r.name.ends_with("ip6.arpa."))
        .count();
    assert_eq!(aaaa, 0);
    assert_eq!(plan.zones.len(), 2);
}

#[test]
fn dual_stack_defaults_and_accessors() {
    let plan = load(&file(
        &format!("{GOOD}    pool: {{ start: \"fd00:131::1000\", end: \"fd00:131::1fff\" }}\n"),
        NODES,
    ))
    .unwrap();
    let c = &plan.cluster;
    let v6 = c.ipv6().unwrap();
    assert_eq!(v6.cidr.to_string(), "fd00:131::/64");
    assert_eq!(v6.vips(), (ip("fd00:131::2"), ip("fd00:131::2")));
    assert!(!v6.router_advertisements);
    assert_eq!(v6.gateway, None);
    assert_eq!(v6.pool, Some((ip("fd00:131::1000"), ip("fd00:131::1fff"))));
    assert!(v6.in_pool(ip("fd00:131::1234")));
    assert_eq!(c.node_ipv6("master-0"), Some(ip("fd00:131::a")));
    assert_eq!(c.node_ipv6("worker-0"), None);
    assert_eq!(c.api_address_v6(), Some(ip("fd00:131::2")));
    assert_eq!(c.apps_addresses_v6(), [ip("fd00:131::2")]);
    assert_eq!(
        c.dns.listen,
        [
            "192.168.131.2:53".parse().unwrap(),
            "[fd00:131::2]:53".parse().unwrap()
        ]
    );
    assert!(c.is_cluster_client("fd00:131::99".parse().unwrap()));
    assert!(!c.is_cluster_client("fd00:132::99".parse().unwrap()));
    assert_eq!(
        c.reverse_zones(),
        [
            "131.168.192.in-addr.arpa.",
            "0.0.0.0.0.0.0.0.1.3.1.0.0.0.d.f.ip6.arpa."
        ]
    );
}

#[test]
fn vips_gateway_and_upstreams() {
    let v6 = "  interface: br0\n  upstreamDNS: [\"[fd00:99::53]:5353\", \"fd00:99::54\", \"10.0.0.53\"]\n  ipv6:\n    cidr: 2001:db8:131::/48\n    applianceIP: 2001:db8:131::2\n    gateway: fe80::1\n    routerAdvertisements: true\n    apiVIP: 2001:db8:131::3\n    ingressVIP: 2001:db8:131::4\n";
    let plan = load(&file(v6, &NODES.replace("fd00:131::", "2001:db8:131::"))).unwrap();
    let c = &plan.cluster;
    let v6 = c.ipv6().unwrap();
    assert!(v6.router_advertisements);
    assert_eq!(v6.gateway, Some(ip("fe80::1")));
    assert_eq!(v6.vips(), (ip("2001:db8:131::3"), ip("2001:db8:131::4")));
    let up: Vec<String> = c
        .network
        .upstream_dns
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(
        up,
        ["[fd00:99::53]:5353", "[fd00:99::54]:53", "10.0.0.53:53"]
    );
    // Router advertisements need the link to advertise on.
    let no_if = "  ipv6:\n    cidr: 2001:db8:131::/48\n    applianceIP: 2001:db8:131::2\n    routerAdvertisements: true\n";
    assert!(
        errors(&file(no_if, &NODES.replace("fd00:131::", "2001:db8:131::")))
            .iter()
            .any(|e| e.starts_with("network.ipv6.routerAdvertisements: needs network.interface")),
    );
    // A gateway inside the prefix is fine too.
    let g = GOOD.to_string() + "    gateway: fd00:131::1\n";
    assert!(load(&file(&g, NODES)).is_ok());
}

#[test]
fn every_ipv6_error_at_once_with_its_path() {
    let v6 = "  ipv6:\n    cidr: fd00:131::/64\n    applianceIP: fd00:132::2\n    gateway: \"fd00:131::\"\n    apiVIP: fd00:131::a\n    ingressVIP: nope\n    pool: { start: \"fd00:131::9\", end: \"fd00:131::20\" }\n";
    let nodes = NODES.replace(
        "ip: 192.168.131.20 }",
        "ip: 192.168.131.20, ipv6: \"fd00:131::5\" }",
    );
    let got = errors(&file(v6, &nodes));
    let want = [
        "network.ipv6.applianceIP: fd00:132::2 is outside network.ipv6.cidr fd00:131::/64",
        "network.ipv6.gateway: fd00:131:: is the subnet-router anycast address of fd00:131::/64 (all host bits zero)",
        "network.ipv6.ingressVIP: \"nope\" is not a valid IPv6 address (invalid IPv6 address syntax)",
        "nodes[1].ipv6: fd00:131::a is already used by network.ipv6.apiVIP (give the node its own address)",
        "nodes[2].ipv6: duplicate IPv6 address fd00:131::5 (also nodes[0].ipv6)",
        "network.ipv6.pool: range fd00:131::9-fd00:131::20 contains network.ipv6.apiVIP fd00:131::a",
        "network.ipv6.pool: range fd00:131::9-fd00:131::20 contains the reserved address of 1 node: fd00:131::a (master-0) (move the pool clear of the nodes' addresses)",
    ];
    assert_eq!(got, want, "{got:#?}");
}

#[test]
fn prefix_lengths_off_the_nibble_boundary_are_refused() {
    let got = errors(&file(&GOOD.replace("/64", "/62"), NODES));
    assert_eq!(
        got,
        [
            "network.ipv6.cidr: prefix length /62 is not a multiple of 4: the reverse zone (ip6.arpa) is delegated per 4-bit nibble, so the prefix must end on one (use /60 or /64)"
        ],
    );
    // One message: no address is checked against that prefix.
    for (cidr, want) in [
        ("fd00::/8", "is not supported"),
        ("fd00:131::/128", "is not supported"),
        ("fe80::/64", "link-local"),
        ("ff00::/64", "multicast"),
        ("fd00:131::1/64", "host bits"),
        ("192.168.0.0/24", "not an IPv6 address"),
    ] {
        let got = errors(&file(&GOOD.replace("fd00:131::/64", cidr), NODES));
        assert!(
            got.len() == 1 && got[0].starts_with("network.ipv6.cidr: ") && got[0].contains(want),
            "{cidr}: {got:?}"
        );
    }
}

#[test]
fn node_ipv6_needs_network_ipv6_and_pool_order() {
    let got = errors(&file("", NODES));
    assert_eq!(
        got,
        [
            "nodes[0].ipv6: needs network.ipv6 (a dual-stack network: its cidr and applianceIP)",
            "nodes[1].ipv6: needs network.ipv6 (a dual-stack network: its cidr and applianceIP)",
        ]
    );
    let pool = format!("{GOOD}    pool: {{ start: \"fd00:131::2f\", end: \"fd00:131::20\" }}\n");
    assert_eq!(
        errors(&file(&pool, NODES)),
        ["network.ipv6.pool: start fd00:131::2f is after end fd00:131::20"]
    );
    let pool = format!("{GOOD}    pool: {{ start: \"fd00:131::1\", end: \"fd00:131::3\" }}\n");
    assert_eq!(
        errors(&file(&pool, NODES)),
        [
            "network.ipv6.pool: range fd00:131::1-fd00:131::3 contains network.ipv6.applianceIP fd00:131::2",
            "network.ipv6.pool: range fd00:131::1-fd00:131::3 contains network.ipv6.apiVIP fd00:131::2",
            "network.ipv6.pool: range fd00:131::1-fd00:131::3 contains network.ipv6.ingressVIP fd00:131::2",
        ]
    );
    // Unknown keys are refused like everywhere else.
    let typo = format!("{GOOD}    routerAdvertisement: true\n");
    assert!(matches!(
        load(&file(&typo, NODES)),
        Err(ConfigError::Parse { .. })
    ));
}

#[test]
fn user_records_in_the_ip6_arpa_zone() {
    let rec = "dns:\n  records:\n    - { name: \"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.3.1.0.0.0.d.f.ip6.arpa.\", type: PTR, value: gw }\n    - { name: registry, type: AAAA, value: \"fd00:131::50\" }\n";
    let plan = load(&file(GOOD, &format!("{NODES}{rec}"))).unwrap();
    let z6 = plan.zones.last().unwrap();
    assert_eq!(z6.origin, "0.0.0.0.0.0.0.0.1.3.1.0.0.0.d.f.ip6.arpa.");
    assert!(
        z6.records
            .iter()
            .any(|r| r.data == RData::Ptr("gw.ocp4.example.com.".into()))
    );
    // An AAAA at a name the appliance serves one at is a conflict.
    let rec = "dns:\n  records:\n    - { name: api, type: AAAA, value: \"fd00:131::50\" }\n";
    let got = errors(&file(GOOD, &format!("{NODES}{rec}")));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("dns.records[0]: api.ocp4.example.com. already has the AAAA"),
        "{got:?}"
    );
}
/// Single-node without the load balancer: api, api-int and `*.apps`
/// resolve to the master in each family, and only the master's PTR
/// names its address; a master without `ipv6` leaves them IPv4-only.
#[test]
fn single_node_without_the_lb_resolves_to_the_master_in_both_families() {
    let dir = tempfile::tempdir().unwrap();
    let ign = dir.path().join("ignition");
    std::fs::create_dir_all(&ign).unwrap();
    std::fs::write(ign.join(crate::model::mode::BIP_IGNITION), "{}").unwrap();
    let text = |v6: &str| {
        format!(
            "{V4}{GOOD}nodes:\n  - {{ name: sno, role: master, mac: \"52:54:00:00:00:0a\", ip: 192.168.131.10{v6} }}\n"
        )
    };
    let load_in = |t: &str| from_str(t, dir.path(), Path::new("t.yaml")).unwrap();
    let plan = load_in(&text(", ipv6: \"fd00:131::a\""));
    let c = &plan.cluster;
    assert!(c.mode.is_single_node() && !c.lb.enabled);
    assert_eq!(c.api_address_v6(), Some(ip("fd00:131::a")));
    assert_eq!(c.apps_addresses_v6(), [ip("fd00:131::a")]);
    let z6 = plan.zones.last().unwrap();
    let master = crate::plan::ptr_name6("fd00:131::a".parse().unwrap());
    let ptrs: Vec<String> = z6
        .records
        .iter()
        .filter(|r| r.name == master)
        .filter_map(|r| match &r.data {
            RData::Ptr(t) => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ptrs, ["sno.ocp4.example.com."]);
    let plan = load_in(&text(""));
    let c = &plan.cluster;
    assert_eq!(c.api_address_v6(), None);
    assert!(c.apps_addresses_v6().is_empty());
    let aaaa: Vec<&str> = plan.zones[0]
        .records
        .iter()
        .filter(|r| matches!(r.data, RData::Aaaa(_)))
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(aaaa, ["ns1.ocp4.example.com."]);
}

/// `dhcp.relays` takes the DHCPv6 relays too: IPv6 entries go to
/// `relays6`, IPv4 ones stay DHCPv4 giaddrs.
#[test]
fn dhcp_relays_take_ipv6_relays_with_their_own_rules() {
    let relays = |list: &str| format!("dhcp:\n  relays: [{list}]\n");
    let plan = load(&format!(
        "{}{}",
        file(GOOD, NODES),
        relays("192.168.131.3, 'fd00:131::fe', 'fe80::1'")
    ))
    .unwrap();
    let d = &plan.cluster.dhcp;
    assert_eq!(
        d.relays,
        vec!["192.168.131.3".parse::<std::net::Ipv4Addr>().unwrap()]
    );
    assert_eq!(d.relays6, vec![ip("fd00:131::fe"), ip("fe80::1")]);
    let e = errors(&format!(
        "{}{}",
        file(GOOD, NODES),
        relays("'ff02::1:2', '::1', 'fd00:131::2', 'fd00:131::fe', 'fd00:131::fe', nope")
    ));
    assert_eq!(e.len(), 5, "{e:#?}");
    for (i, what) in [
        (0, "not a unicast address"),
        (1, "a loopback address"),
        (2, "network.ipv6.applianceIP"),
        (4, "listed twice"),
        (5, "IPv4 or IPv6 address"),
    ] {
        assert!(
            e.iter()
                .any(|l| l.starts_with(&format!("dhcp.relays[{i}]")) && l.contains(what)),
            "{i} {what}: {e:#?}"
        );
    }
    let e = errors(&format!(
        "{}{}",
        file(
            "",
            &NODES
                .replace(", ipv6: \"fd00:131::5\"", "")
                .replace(", ipv6: \"fd00:131::a\"", "")
        ),
        relays("'fd00:131::fe'")
    ));
    assert!(e[0].contains("network.ipv6 is not set"), "{e:#?}");
}
