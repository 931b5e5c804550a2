//! Every validation rule of the cluster file, each with its exact field path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use crc_appliance::config::{self, ConfigError};

const BASE: &str = r#"name: ocp4
baseDomain: example.com
network:
  cidr: 192.168.131.0/24
  gateway: 192.168.131.1
  applianceIP: 192.168.131.2
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:05", ip: 192.168.131.5 }
  - { name: master-0, role: master, mac: "52:54:00:00:00:0a", ip: 192.168.131.10 }
  - { name: worker-0, role: worker, mac: "52:54:00:00:00:14", ip: 192.168.131.20 }
"#;

fn load(text: &str) -> Result<crc_appliance::model::cluster::Cluster, ConfigError> {
    config::from_str(text, Path::new("/base"), Path::new("test.yaml")).map(|p| p.cluster)
}

/// Validation errors as `path: message` lines.
fn errors(text: &str) -> Vec<String> {
    match load(text) {
        Ok(_) => panic!("expected errors for:\n{text}"),
        Err(e) => {
            let list: Vec<String> = e.field_errors().iter().map(|f| f.to_string()).collect();
            assert!(!list.is_empty(), "expected field errors, got: {e}");
            list
        }
    }
}

/// Assert one error at `path` whose message contains `needle`.
fn expect(text: &str, path: &str, needle: &str) {
    let errs = errors(text);
    assert!(
        errs.iter()
            .any(|e| e.starts_with(&format!("{path}: ")) && e.contains(needle)),
        "no error `{path}: ...{needle}...` in {errs:#?}"
    );
}

fn with_nodes(nodes: &str) -> String {
    let head = BASE.split("nodes:").next().unwrap();
    format!("{head}nodes:\n{nodes}")
}

#[test]
fn base_is_valid() {
    let c = load(BASE).unwrap();
    assert_eq!(c.domain, "ocp4.example.com");
    assert_eq!(c.network.api_vip.to_string(), "192.168.131.2");
    assert_eq!(
        c.dhcp.lease_file,
        Path::new("/var/lib/crc-appliance/ocp4-leases.json")
    );
    assert_eq!(c.dns.listen[0].to_string(), "192.168.131.2:53");
    assert_eq!(c.lb.api.to_string(), "192.168.131.2:6443");
    assert_eq!(c.http.images_dir, Path::new("/base/images"));
}

#[test]
fn unknown_field_is_a_parse_error_with_location() {
    let text = format!("{BASE}bogus: 1\n");
    let e = load(&text).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ConfigError::Parse { .. }), "{msg}");
    assert!(msg.contains("bogus"), "{msg}");
    let nested = BASE.replace("  gateway:", "  gatway: x\n  gateway:");
    let msg = load(&nested).unwrap_err().to_string();
    assert!(msg.contains("gatway"), "{msg}");
}

#[test]
fn duplicate_mac_ip_and_name() {
    let t = with_nodes(
        r#"  - { name: master-0, role: master, mac: "52:54:00:00:00:0a", ip: 192.168.131.10 }
  - { name: master-0, role: master, mac: "52:54:00:00:00:0A", ip: 192.168.131.10 }
"#,
    );
    expect(
        &t,
        "nodes[1].name",
        "duplicate node name \"master-0\" (also nodes[0].name)",
    );
    expect(
        &t,
        "nodes[1].mac",
        "duplicate MAC 52:54:00:00:00:0a (also nodes[0].mac)",
    );
    expect(
        &t,
        "nodes[1].ip",
        "duplicate IP 192.168.131.10 (also nodes[0].ip)",
    );
}

#[test]
fn ip_outside_cidr_and_reserved() {
    let t = with_nodes(
        r#"  - { name: master-0, role: master, mac: "52:54:00:00:00:0a", ip: 10.0.0.1 }
  - { name: master-1, role: master, mac: "52:54:00:00:00:0b", ip: 192.168.131.255 }
  - { name: master-2, role: master, mac: "52:54:00:00:00:0c", ip: 192.168.131.2 }
"#,
    );
    expect(
        &t,
        "nodes[0].ip",
        "10.0.0.1 is outside network.cidr 192.168.131.0/24",
    );
    expect(&t, "nodes[1].ip", "broadcast");
    expect(&t, "nodes[2].ip", "already used by network.applianceIP");
    let g = BASE.replace("gateway: 192.168.131.1", "gateway: 192.168.9.1");
    expect(&g, "network.gateway", "outside network.cidr");
}

#[test]
fn invalid_labels() {
    let t = with_nodes(
        r#"  - { name: Master_0, role: master, mac: "52:54:00:00:00:0a", ip: 192.168.131.10 }
  - { name: -m1, role: master, mac: "52:54:00:00:00:0b", ip: 192.168.131.11 }
  - { name: api, role: worker, mac: "52:54:00:00:00:0c", ip: 192.168.131.12 }
  - { name: etcd-0, role: worker, mac: "52:54:00:00:00:0d", ip: 192.168.131.13 }
"#,
    );
    expect(&t, "nodes[0].name", "must be lower case");
    expect(&t, "nodes[1].name", "not a valid DNS label");
    expect(&t, "nodes[2].name", "reserved");
    expect(&t, "nodes[3].name", "reserved");
    expect(
        &BASE.replace("name: ocp4", "name: ocp_4"),
        "name",
        "not a valid DNS label",
    );
    expect(
        &BASE.replace("baseDomain: example.com", "baseDomain: exa mple..com"),
        "baseDomain",
        "not a valid",
    );
}

#[test]
fn no_master_and_two_bootstraps() {
    let t = with_nodes(
        r#"  - { name: b1, role: bootstrap, mac: "52:54:00:00:00:01", ip: 192.168.131.21 }
  - { name: b2, role: bootstrap, mac: "52:54:00:00:00:02", ip: 192.168.131.22 }
  - { name: w1, role: worker, mac: "52:54:00:00:00:03", ip: 192.168.131.23 }
"#,
    );
    expect(&t, "nodes", "at least one node with role master");
    expect(&t, "nodes", "at most one node may have role bootstrap");
    expect(
        &with_nodes("  []\n").replace("nodes:\n  []", "nodes: []"),
        "nodes",
        "at least one node",
    );
}

#[test]
fn bad_role_mac_and_ip_syntax() {
    let t = with_nodes(
        r#"  - { name: master-0, role: boss, mac: "52:54:00:00:0a", ip: 192.168.131.300 }
  - { name: master-1, role: master, mac: "01:00:5e:00:00:01", ip: 192.168.131.11 }
"#,
    );
    expect(&t, "nodes[0].role", "unknown role \"boss\"");
    expect(&t, "nodes[0].mac", "is not a MAC address");
    expect(&t, "nodes[0].ip", "is not a valid IPv4 address");
    expect(&t, "nodes[1].mac", "multicast");
}

#[test]
fn network_fields() {
    let t = BASE
        .replace("cidr: 192.168.131.0/24", "cidr: 192.168.131.7/24")
        .replace("applianceIP: 192.168.131.2", "applianceIP: nope");
    expect(&t, "network.cidr", "host bits set");
    expect(&t, "network.applianceIP", "not a valid IPv4 address");
    let t = BASE.replace(
        "applianceIP: 192.168.131.2",
        "applianceIP: 192.168.131.2\n  apiVIP: 10.1.1.1\n  upstreamDNS: [\"192.168.131.2\", \"x\"]",
    );
    expect(&t, "network.apiVIP", "outside network.cidr");
    expect(&t, "network.upstreamDNS[0]", "forwarding loop");
    expect(&t, "network.upstreamDNS[1]", "not a valid address");
    expect(
        &BASE.replace("cidr: 192.168.131.0/24", "cidr: 192.0.0.0/8"),
        "network.cidr",
        "not supported",
    );
}

#[test]
fn dhcp_pool_rules() {
    let t = format!("{BASE}dhcp:\n  pool: {{ start: 192.168.131.100, end: 192.168.131.50 }}\n");
    expect(
        &t,
        "dhcp.pool",
        "start 192.168.131.100 is after end 192.168.131.50",
    );
    let t = format!(
        "{BASE}dhcp:\n  pool: {{ start: 192.168.131.3, end: 192.168.131.30 }}\n  leaseTime: 10s\n"
    );
    expect(&t, "dhcp.pool", "192.168.131.10 (master-0)");
    expect(&t, "dhcp.leaseTime", "at least 60s");
    let t = format!("{BASE}dhcp:\n  pool: {{ start: 192.168.132.3, end: 192.168.131.30 }}\n");
    expect(&t, "dhcp.pool.start", "outside network.cidr");
}

#[test]
fn health_check_rules() {
    let t = format!(
        "{BASE}loadBalancer:\n  healthCheck: {{ interval: 1s, timeout: 5s, rise: 0, fall: 101 }}\n  maxConnections: 0\n"
    );
    expect(
        &t,
        "loadBalancer.healthCheck.timeout",
        "longer than interval",
    );
    expect(&t, "loadBalancer.healthCheck.rise", "1..100");
    expect(&t, "loadBalancer.healthCheck.fall", "1..100");
    expect(&t, "loadBalancer.maxConnections", "greater than zero");
    let t = format!("{BASE}loadBalancer:\n  healthCheck: {{ interval: 5x }}\n");
    let msg = load(&t).unwrap_err().to_string();
    assert!(msg.contains("unknown unit"), "{msg}");
}

#[test]
fn listener_collisions() {
    let t = format!(
        "{BASE}dns:\n  listen: [\"127.0.0.1:8080\"]\nhttp:\n  listen: 127.0.0.1:8080\nadmin:\n  listen: 0.0.0.0:8080\n"
    );
    expect(
        &t,
        "http.listen",
        "TCP 127.0.0.1:8080 collides with dns.listen[0]",
    );
    expect(&t, "admin.listen", "collides with");
    expect(
        &format!("{BASE}admin:\n  listen: localhost\n"),
        "admin.listen",
        "not a valid address",
    );
}

#[test]
fn extra_records() {
    let t = format!(
        r#"{BASE}dns:
  records:
    - {{ name: registry, type: A, value: 192.168.131.3 }}
    - {{ name: bad, type: A, value: nope }}
    - {{ name: www.other.org., type: A, value: 1.2.3.4 }}
    - {{ name: x, type: MX, value: "10 mail" }}
    - {{ name: _svc._tcp, type: SRV, value: "0 10" }}
"#
    );
    expect(&t, "dns.records[1]", "not an IPv4 address");
    expect(&t, "dns.records[2]", "outside the zones served");
    expect(&t, "dns.records[3]", "not supported");
    expect(&t, "dns.records[4]", "priority weight port target");
    let ok = format!(
        "{BASE}dns:\n  records:\n    - {{ name: registry, type: A, value: 192.168.131.3 }}\n    - {{ name: 3.131.168.192.in-addr.arpa., type: PTR, value: registry }}\n"
    );
    let c = load(&ok).unwrap();
    assert_eq!(c.dns.records.len(), 2);
    assert_eq!(c.dns.records[1].name, "3.131.168.192.in-addr.arpa.");
}

/// User records that contradict the generated ones (or each other) are
/// refused with their field path, so `check`, `render zone` and `serve`
/// agree: a CNAME at `api` used to pass `check`, render as an invalid
/// A+CNAME pair and be dropped silently by `serve`.
#[test]
fn user_records_that_conflict_with_generated_ones() {
    let t = format!(
        r#"{BASE}dns:
  records:
    - {{ name: api, type: CNAME, value: elsewhere.example.org. }}
    - {{ name: master-0, type: CNAME, value: elsewhere.example.org. }}
    - {{ name: ns1, type: A, value: 192.168.131.99 }}
    - {{ name: "*.apps", type: A, value: 192.168.131.99 }}
    - {{ name: _etcd-server-ssl._tcp, type: SRV, value: "0 10 2380 master-0" }}
    - {{ name: registry, type: CNAME, value: mirror.example.org. }}
    - {{ name: registry, type: A, value: 192.168.131.3 }}
    - {{ name: registry-txt, type: TXT, value: hello }}
    - {{ name: registry-txt, type: TXT, value: hello }}
    - {{ name: master-0, type: TXT, value: "rack 3" }}
    - {{ name: 10.131.168.192.in-addr.arpa., type: PTR, value: other.example.org. }}
"#
    );
    expect(
        &t,
        "dns.records[0]",
        "CNAME at api.ocp4.example.com. conflicts with the A record",
    );
    expect(
        &t,
        "dns.records[1]",
        "CNAME at master-0.ocp4.example.com. conflicts with the A record",
    );
    expect(
        &t,
        "dns.records[2]",
        "already has the A record the appliance serves",
    );
    expect(
        &t,
        "dns.records[3]",
        "already has the A record the appliance serves",
    );
    expect(&t, "dns.records[4]", "already has the SRV record");
    expect(
        &t,
        "dns.records[6]",
        "conflicts with dns.records[5] (CNAME)",
    );
    expect(&t, "dns.records[8]", "duplicate of dns.records[7]");
    expect(&t, "dns.records[10]", "already has the PTR record");
    // The TXT at master-0 meets the user CNAME at master-0 (records[1]).
    expect(
        &t,
        "dns.records[9]",
        "conflicts with dns.records[1] (CNAME)",
    );
    let errs = errors(&t);
    assert!(
        !errs
            .iter()
            .any(|e| e.starts_with("dns.records[7]") || e.starts_with("dns.records[5]")),
        "the first of a pair is fine: {errs:#?}"
    );
    // A TXT beside a node's A, or a name under *.apps, is fine.
    let ok = format!(
        "{BASE}dns:\n  records:\n    - {{ name: master-0, type: TXT, value: \"rack 3\" }}\n    - {{ name: console.apps, type: A, value: 192.168.131.7 }}\n"
    );
    assert_eq!(load(&ok).unwrap().dns.records.len(), 2);
}

/// imagesDir is served to anyone: ignitionDir may not be it, be inside it,
/// or contain it — compared after resolving symlinks.
#[test]
fn ignition_and_images_dirs_must_not_overlap() {
    let http = |images: &str, ign: &str| {
        format!("{BASE}http: {{ imagesDir: \"{images}\", ignitionDir: \"{ign}\" }}\n")
    };
    expect(
        &http("/srv/www", "/srv/www"),
        "http.ignitionDir",
        "is the same directory",
    );
    expect(
        &http("/srv/www", "/srv/www/ign"),
        "http.ignitionDir",
        "is inside http.imagesDir",
    );
    expect(
        &http("/srv/www/img", "/srv/www"),
        "http.ignitionDir",
        "contains http.imagesDir",
    );
    expect(
        &http("/srv/www/", "/srv/./www/x/../"),
        "http.ignitionDir",
        "is the same directory",
    );
    assert!(load(&http("/srv/www/images", "/srv/www/ignition")).is_ok());
    // Through a symlink: imagesDir names a link to the dir that holds
    // ignitionDir.
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("www/ign")).unwrap();
    std::os::unix::fs::symlink(d.path().join("www"), d.path().join("link")).unwrap();
    let t = http(
        &d.path().join("link").display().to_string(),
        &d.path().join("www/ign").display().to_string(),
    );
    expect(&t, "http.ignitionDir", "is inside http.imagesDir");
}

/// A node FQDN over 63 characters would be served as an `/etc/hostname`
/// Linux refuses: refused in validation, with the node's field path.
#[test]
fn node_fqdn_fits_a_linux_hostname() {
    let long = "a-very-long-node-name-that-makes-the-fqdn-too-long-x";
    let t = with_nodes(&format!(
        "  - {{ name: master-0, role: master, mac: \"52:54:00:00:00:0a\", ip: 192.168.131.10 }}\n  - {{ name: {long}, role: worker, mac: \"52:54:00:00:00:14\", ip: 192.168.131.20 }}\n"
    ));
    expect(&t, "nodes[1].name", "Linux refuses a hostname over 63");
    assert_eq!(errors(&t).len(), 1, "{:?}", errors(&t));
}

/// `rhcos`: the one boot source (ISO or PXE artifacts), install disk and
/// kernel arguments with field paths; the kargs reach the install command
/// line of the VMs (and network boot) through one function.
#[test]
fn rhcos_section() {
    expect(&format!("{BASE}rhcos: {{}}\n"), "rhcos", "needs iso");
    expect(
        &format!("{BASE}rhcos: {{ iso: a.iso, kernel: k }}\n"),
        "rhcos",
        "not both",
    );
    expect(
        &format!("{BASE}rhcos: {{ kernel: k, initramfs: i }}\n"),
        "rhcos",
        "needs iso",
    );
    expect(
        &format!("{BASE}rhcos: {{ iso: a.iso, installDev: sda, kargs: [\"a b\"] }}\n"),
        "rhcos.installDev",
        "must be a /dev/ path",
    );
    expect(
        &format!("{BASE}rhcos: {{ iso: a.iso, kargs: [\"a b\"] }}\n"),
        "rhcos.kargs[0]",
        "one word",
    );
    let files = format!(
        "{BASE}rhcos: {{ kernel: k, initramfs: i, rootfs: r, kargs: [ip=dhcp], roleKargs: {{ worker: [w=1] }} }}\n"
    );
    let c = load(&files).unwrap();
    let r = c.rhcos.unwrap();
    assert_eq!(
        r.source,
        crc_appliance::model::cluster::BootSource::Files {
            kernel: "/base/k".into(),
            initramfs: "/base/i".into(),
            rootfs: "/base/r".into()
        }
    );
    assert_eq!(r.install_dev, "/dev/sda");
    let t = with_nodes(
        "  - { name: master-0, role: master, mac: \"52:54:00:00:00:0a\", ip: 192.168.131.10, installDev: nvme0n1 }\n",
    );
    expect(&t, "nodes[0].installDev", "must be a /dev/ path");
}

#[test]
fn libvirt_rules() {
    let t = format!(
        "{BASE}libvirt:\n  iso: /old/place.iso\n  installDev: vda\n  network: {{ mode: bridge, bridge: this-name-is-too-long }}\n  resources:\n    master: {{ cpus: 0, memoryMib: 100, diskGib: 0 }}\n"
    );
    // The old key says where it went; without rhcos the VMs have no ISO.
    expect(&t, "libvirt.iso", "moved to rhcos.iso");
    expect(
        &format!("{BASE}libvirt: {{}}\n"),
        "libvirt",
        "need rhcos.iso",
    );
    expect(&t, "libvirt.installDev", "must be a /dev/ path");
    expect(&t, "libvirt.network.mode", "unknown mode \"bridge\"");
    expect(&t, "libvirt.network.bridge", "not a valid bridge name");
    expect(&t, "libvirt.resources.master.cpus", "1..256");
    expect(&t, "libvirt.resources.master.memoryMib", "at least 512");
    expect(&t, "libvirt.resources.master.diskGib", "greater than zero");
}

#[test]
fn all_errors_reported_at_once() {
    let t = with_nodes(
        r#"  - { name: master-0, role: master, mac: "bad", ip: 10.0.0.1 }
"#,
    )
    .replace("gateway: 192.168.131.1", "gateway: 1.1.1.1");
    let errs = errors(&t);
    assert!(errs.len() >= 3, "{errs:#?}");
    let msg = load(&t).unwrap_err().to_string();
    assert!(
        msg.contains(&format!("has {} error(s)", errs.len())),
        "{msg}"
    );
}

#[test]
fn shipped_configs_validate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "yaml") {
            config::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            n += 1;
        }
    }
    assert!(n >= 2, "found only {n} configs in {}", dir.display());
}

#[test]
fn lb_backend_override_rules() {
    let t = format!(
        "{BASE}loadBalancer:\n  backendOverrides:\n    nobody: {{ api: \"10.0.0.1:6443\" }}\n    worker-0: {{ ingressHttp: \"not-an-address\" }}\n"
    );
    expect(
        &t,
        "loadBalancer.backendOverrides.nobody",
        "not a node name",
    );
    expect(
        &t,
        "loadBalancer.backendOverrides.worker-0.ingressHttp",
        "not a valid address",
    );
    let t = format!(
        "{BASE}loadBalancer:\n  backendOverrides:\n    worker-0: {{ ingressHttp: \"127.0.0.1:18081\" }}\n"
    );
    let plan = crc_appliance::plan::Plan::new(load(&t).unwrap());
    let http = plan
        .pool(crc_appliance::plan::PoolKind::IngressHttp)
        .unwrap();
    assert_eq!(http.backends[0].addr.to_string(), "127.0.0.1:18081");
    let https = plan
        .pool(crc_appliance::plan::PoolKind::IngressHttps)
        .unwrap();
    assert_eq!(https.backends[0].addr.to_string(), "192.168.131.20:443");
}

/// `dhcp.relays`: relay agent addresses answered besides the segments'
/// gateways; each one an address a relay can have, listed once.
#[test]
fn dhcp_relays() {
    let ok = format!(
        "{BASE}dhcp:\n  relays: [192.168.131.254, 10.99.0.1]\n  segments:\n    - {{ cidr: 10.77.0.0/24, gateway: 10.77.0.1 }}\n"
    );
    let c = load(&ok).unwrap();
    assert_eq!(c.dhcp.relays.len(), 2);
    let all: Vec<String> = c
        .dhcp
        .relay_addresses()
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(all, ["10.77.0.1", "10.99.0.1", "192.168.131.254"]);
    // None by default: no relayed request is answered but a segment's.
    assert!(load(BASE).unwrap().dhcp.relay_addresses().is_empty());
    let bad = format!(
        "{BASE}dhcp:\n  relays: [x, 192.168.131.2, 192.168.131.255, 10.77.0.0, 224.0.0.1, 127.0.0.1, 0.0.0.0, 10.99.0.1, 10.99.0.1]\n  segments:\n    - {{ cidr: 10.77.0.0/24, gateway: 10.77.0.1 }}\n"
    );
    expect(&bad, "dhcp.relays[0]", "IPv4 or IPv6 address");
    expect(&bad, "dhcp.relays[1]", "applianceIP");
    expect(
        &bad,
        "dhcp.relays[2]",
        "broadcast address of 192.168.131.0/24",
    );
    expect(
        &bad,
        "dhcp.relays[3]",
        "network or broadcast address of 10.77.0.0/24",
    );
    expect(&bad, "dhcp.relays[4]", "not a unicast address");
    expect(&bad, "dhcp.relays[5]", "loopback");
    expect(&bad, "dhcp.relays[6]", "0/8");
    expect(&bad, "dhcp.relays[8]", "listed twice");
    assert!(
        !errors(&bad).iter().any(|e| e.starts_with("dhcp.relays[7]")),
        "{:#?}",
        errors(&bad)
    );
}

#[test]
fn dhcp_segments() {
    // Valid: a node on a relayed segment; default DNS is the appliance.
    let ok = format!(
        "{BASE}  - {{ name: worker-1, role: worker, mac: \"52:54:00:00:00:15\", ip: 10.77.0.21 }}\ndhcp:\n  segments:\n    - {{ cidr: 10.77.0.0/24, gateway: 10.77.0.1, pool: {{ start: 10.77.0.100, end: 10.77.0.120 }} }}\n    - {{ cidr: 10.78.0.0/24, gateway: 10.78.0.1, dns: [10.78.0.53, 192.168.131.2] }}\n"
    );
    let c = load(&ok).unwrap();
    assert_eq!(c.dhcp.segments.len(), 2);
    assert_eq!(c.dhcp.segments[0].dns[0].to_string(), "192.168.131.2");
    assert_eq!(c.dhcp.segments[1].dns.len(), 2);
    assert!(c.is_cluster_client("10.77.0.21".parse().unwrap()));
    assert!(!c.is_cluster_client("10.79.0.21".parse().unwrap()));
    // Every error at once, with its field path.
    let bad = format!(
        "{BASE}  - {{ name: worker-1, role: worker, mac: \"52:54:00:00:00:15\", ip: 10.77.0.1 }}\n  - {{ name: worker-2, role: worker, mac: \"52:54:00:00:00:16\", ip: 10.99.0.5 }}\n  - {{ name: worker-3, role: worker, mac: \"52:54:00:00:00:17\", ip: 10.77.0.110 }}\ndhcp:\n  segments:\n    - {{ cidr: 10.77.0.0/24, gateway: 10.77.0.1, pool: {{ start: 10.77.0.100, end: 10.77.0.120 }} }}\n    - {{ cidr: 192.168.131.128/25, gateway: 192.168.131.129 }}\n    - {{ cidr: 10.77.0.128/25, gateway: 10.78.0.1, dns: [] }}\n    - {{ cidr: 10.80.0.0/24, gateway: 10.80.0.255, dns: [x], pool: {{ start: 10.80.0.9, end: 10.80.0.2 }} }}\n"
    );
    expect(&bad, "nodes[3].ip", "gateway of dhcp.segments[0]");
    expect(
        &bad,
        "nodes[4].ip",
        "outside network.cidr 192.168.131.0/24 and every dhcp.segments[].cidr",
    );
    expect(&bad, "dhcp.segments[0].pool", "10.77.0.110 (worker-3)");
    expect(&bad, "dhcp.segments[1].cidr", "overlaps network.cidr");
    expect(
        &bad,
        "dhcp.segments[2].cidr",
        "overlaps dhcp.segments[0].cidr",
    );
    expect(&bad, "dhcp.segments[2].gateway", "outside the segment");
    expect(&bad, "dhcp.segments[2].dns", "at least one");
    expect(&bad, "dhcp.segments[3].gateway", "broadcast address");
    expect(&bad, "dhcp.segments[3].dns[0]", "IPv4 address");
    expect(&bad, "dhcp.segments[3].pool", "is after end");
    // Strict: unknown keys are refused.
    let unknown = format!(
        "{BASE}dhcp:\n  segments:\n    - {{ cidr: 10.77.0.0/24, gateway: 10.77.0.1, router: 10.77.0.1 }}\n"
    );
    let e = load(&unknown).unwrap_err().to_string();
    assert!(e.contains("router"), "{e}");
}

/// Errors at `path`, and the whole list (for "one mistake, one message").
fn at(errs: &[String], path: &str) -> Vec<String> {
    errs.iter()
        .filter(|e| e.starts_with(&format!("{path}: ")))
        .cloned()
        .collect()
}

/// #27 item 17: one mistake, one message with the fix. A MAC in another
/// notation states its reason once, and any OUI is fine.
#[test]
fn a_bad_mac_says_why_once() {
    let errs = errors(&BASE.replace("52:54:00:00:00:0a", "5254.0014.000a"));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with("nodes[1].mac: \"5254.0014.000a\" is not a MAC address ("),
        "{errs:#?}"
    );
    assert_eq!(errs[0].matches("MAC").count(), 1, "said twice: {errs:#?}");
    assert!(
        !errs[0].contains("xx:xx"),
        "implies only 52:54:00 is valid: {errs:#?}"
    );
}

/// An unsupported prefix: no cascade over every address.
#[test]
fn an_unsupported_prefix_is_one_error() {
    let errs = errors(&BASE.replace("192.168.131.0/24", "10.0.0.0/8"));
    assert_eq!(
        errs,
        ["network.cidr: prefix /8 is not supported (use /16 to /30)"]
    );
}

/// A node on the appliance's address (also the VIPs'): one line.
#[test]
fn a_node_on_the_appliance_address_is_one_error() {
    let errs = errors(&BASE.replace("ip: 192.168.131.10", "ip: 192.168.131.2"));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = &at(&errs, "nodes[1].ip")[0];
    assert!(
        e.contains("network.applianceIP, network.apiVIP, network.ingressVIP")
            && e.contains("its own address"),
        "{e}"
    );
}

/// A pool over three node addresses: one line listing them.
#[test]
fn a_pool_over_node_addresses_is_one_error() {
    let errs = errors(&format!(
        "{BASE}dhcp:\n  pool: {{ start: 192.168.131.3, end: 192.168.131.30 }}\n"
    ));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with("dhcp.pool: ")
            && errs[0].contains(
                "192.168.131.5 (bootstrap), 192.168.131.10 (master-0), 192.168.131.20 (worker-0)"
            ),
        "{errs:#?}"
    );
}

/// A typo in a role: did you mean, the aliases, and no "no master" echo.
#[test]
fn an_unknown_role_suggests_the_right_one() {
    let errs = errors(&BASE.replace("role: master", "role: maser"));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with("nodes[1].role: unknown role \"maser\" (did you mean \"master\"?")
            && errs[0].contains("control-plane")
            && errs[0].contains("compute"),
        "{errs:#?}"
    );
}

/// Issue 28 item 4: an iPXE kernel line over the x86 kernel's 2047 bytes is
/// refused (the ISO line, shorter, still fits), naming the kargs to shorten.
#[test]
fn ipxe_kernel_line_over_2047_bytes_is_refused() {
    let long = |n: usize| format!("\"x={}\"", "a".repeat(n));
    let text = format!(
        "{}rhcos: {{ iso: a.iso, kargs: [{}, {}, {}, {}] }}\n",
        BASE,
        long(498),
        long(498),
        long(498),
        long(340)
    );
    expect(
        &text,
        "nodes[1].kargs",
        "iPXE kernel command line of master-0 would be",
    );
    expect(&text, "nodes[1].kargs", "rhcos.kargs[0] (500 bytes)");
    assert!(
        !errors(&text).iter().any(|e| e.contains("embed area")),
        "the ISO line fits: {:#?}",
        errors(&text)
    );
}
