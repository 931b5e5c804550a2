//! The command line and the `serve` lifecycle, through the real binary.
//! `serve` itself is spawned where the process is the point (SIGTERM,
//! SIGHUP, its exit codes); the admin API test runs the appliance in this
//! process (`common::inproc`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::inproc::InProc;
use common::{Appliance, BIN, run, run_ok};
use crc_appliance::serve::status::StatusDoc;

fn configs(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("configs")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn check_accepts_shipped_configs() {
    for f in ["demo.yaml", "example.yaml", "dualstack.yaml"] {
        let (code, out, err) = run(BIN, &["check", "--cluster", &configs(f)]);
        assert_eq!(code, 0, "{f}: {out}{err}");
        assert!(out.contains("is valid"), "{out}");
        // The IPv6 line only for the dual-stack file.
        assert_eq!(out.contains("\nipv6 "), f == "dualstack.yaml", "{f}: {out}");
    }
    let (_, out, _) = run(BIN, &["check", "--cluster", &configs("dualstack.yaml")]);
    assert!(
        out.contains("ipv6 fd00:131::/64 gateway - appliance fd00:131::1 api fd00:131::1 ingress fd00:131::1 router-advertisements on pool fd00:131::1000-fd00:131::1fff"),
        "{out}"
    );
    assert!(
        out.contains("dns on [192.168.131.1:53, [fd00:131::1]:53]"),
        "{out}"
    );
    // One line per service the file declares: NTP's after TFTP's, only
    // where there is an `ntp:` section.
    let (_, out, _) = run(BIN, &["check", "--cluster", &configs("demo.yaml")]);
    assert!(
        out.contains(
            "\nntp on 127.0.0.1:10123 stratum 10 (8 requests/s per client, clients any)\n"
        ),
        "{out}"
    );
    let (_, out, _) = run(BIN, &["check", "--cluster", &configs("example.yaml")]);
    assert!(!out.contains("\nntp "), "{out}");
}

#[test]
fn check_reports_all_errors_with_exit_78() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    std::fs::write(
        &f,
        r#"name: Bad_Name
baseDomain: example.com
network: { cidr: 10.0.0.0/24, gateway: 10.0.1.1, applianceIP: 10.0.0.2 }
nodes:
  - { name: w, role: worker, mac: "52:54:00:00:00:01", ip: 10.0.0.9 }
  - { name: w, role: worker, mac: "52:54:00:00:00:01", ip: 10.0.0.9 }
"#,
    )
    .unwrap();
    let (code, out, err) = run(BIN, &["check", "--cluster", f.to_str().unwrap()]);
    assert_eq!(code, 78, "{out}{err}");
    for needle in [
        "name: \"Bad_Name\"",
        "network.gateway: 10.0.1.1 is outside network.cidr 10.0.0.0/24",
        "nodes[1].name: duplicate node name",
        "nodes[1].mac: duplicate MAC",
        "nodes[1].ip: duplicate IP",
        "nodes: at least one node with role master",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
}

/// `addressing: static` (issue #38): every mistake at its field in one
/// run, naming the node; the valid file lists its static nodes and their
/// name server (none with the appliance's DNS off and no upstreamDNS).
#[test]
fn check_static_addressing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("static.yaml");
    let write = |nodes: &str| {
        std::fs::write(
            &f,
            format!(
                "name: st\nbaseDomain: example.com\n\
                 network: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.2, addressing: static }}\n\
                 nodes:\n{nodes}"
            ),
        )
        .unwrap();
    };
    write(
        "  - { name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10 }\n\
         \x20 - { name: worker-0, role: worker, mac: '52:54:00:00:00:14', ip: 10.0.0.20, addressing: manual }\n\
         \x20 - { name: worker-1, role: worker, mac: '52:54:00:00:00:15', ip: 10.0.0.21, interface: 'eth 0' }\n",
    );
    let (code, out, err) = run(BIN, &["check", "--cluster", f.to_str().unwrap()]);
    assert_eq!(code, 78, "{out}{err}");
    for needle in [
        "nodes[0].interface: node master-0 has a static address (network.addressing: static) and needs the NIC it goes on",
        "nodes[1].addressing: unknown addressing \"manual\"",
        "nodes[2].interface: \"eth 0\" is not a valid interface name",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    write(
        "  - { name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10, interface: ens3 }\n\
         \x20 - { name: worker-0, role: worker, mac: '52:54:00:00:00:14', ip: 10.0.0.20, addressing: dhcp }\n",
    );
    let (code, out, err) = run(BIN, &["check", "--cluster", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("\nstatic addresses master-0(ens3) nameserver 10.0.0.2\n"),
        "{out}"
    );
    // The appliance's DNS off and no site resolver named: no name server.
    write(
        "  - { name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10, interface: ens3 }\n\
         \x20 - { name: worker-0, role: worker, mac: '52:54:00:00:00:14', ip: 10.0.0.20, addressing: dhcp }\n\
         dns: { enabled: false }\n",
    );
    let (code, out, err) = run(BIN, &["check", "--cluster", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("\nstatic addresses master-0(ens3) nameserver none\n"),
        "{out}"
    );
}

#[test]
fn check_missing_file_and_yaml_errors() {
    let (code, _, err) = run(BIN, &["check", "--cluster", "/nonexistent/x.yaml"]);
    assert_eq!(code, 78);
    assert!(
        err.contains("cannot read cluster file /nonexistent/x.yaml"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    std::fs::write(&f, "name: [unclosed\n").unwrap();
    let (code, _, err) = run(BIN, &["check", "--cluster", f.to_str().unwrap()]);
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("not valid YAML"), "{err}");
}

#[test]
fn render_zone_matches_golden_file() {
    let (code, out, err) = run(
        BIN,
        &["render", "--cluster", &configs("example.yaml"), "zone"],
    );
    assert_eq!(code, 0, "{err}");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/example.zone");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &out).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("golden file (UPDATE_GOLDEN=1 to create)");
    assert_eq!(
        out, want,
        "render zone changed; rerun with UPDATE_GOLDEN=1 if intended"
    );
}

#[test]
fn render_dhcp_and_lb() {
    let (code, out, _) = run(
        BIN,
        &["render", "--cluster", &configs("example.yaml"), "dhcp"],
    );
    assert_eq!(code, 0);
    assert!(
        out.contains("52:54:00:a1:31:0a   192.168.131.10  master     master-0"),
        "{out}"
    );
    let (code, out, _) = run(
        BIN,
        &["render", "--cluster", &configs("example.yaml"), "lb"],
    );
    assert_eq!(code, 0);
    assert!(
        out.contains("frontend api 192.168.131.1:6443 check https GET /readyz"),
        "{out}"
    );
    assert!(
        out.contains("backend bootstrap        192.168.131.5:22623"),
        "{out}"
    );
    assert!(
        out.contains("frontend ingress-https 192.168.131.1:443 check tls handshake"),
        "{out}"
    );
}

/// A cluster with every service on loopback port 0 (DHCP on a high port).
fn serve_yaml() -> String {
    common::loopback_cluster_with(
        r#"dns:
  listen: ["127.0.0.1:0"]
dhcp:
  listen: 127.0.0.1:0
  leaseFile: "{dir}/leases.json"
loadBalancer:
  listen: { api: 127.0.0.1:0, machineConfig: 127.0.0.1:0, ingressHttp: 127.0.0.1:0, ingressHttps: 127.0.0.1:0 }
http:
  listen: 127.0.0.1:0
  imagesDir: "{dir}/images"
  ignitionDir: "{dir}/ign"
admin:
  listen: 127.0.0.1:0
"#,
    )
}

#[test]
fn serve_stops_gracefully_on_sigterm() {
    let mut app = Appliance::start(&serve_yaml());
    assert_eq!(app.stop(), Some(0), "log:\n{}", app.log());
    assert!(
        app.log().contains("SIGTERM: shutting down"),
        "{}",
        app.log()
    );
    assert!(app.log().contains("stopped"), "{}", app.log());
}

#[test]
fn serve_reload_rejects_invalid_file_and_applies_valid_one() {
    let app = Appliance::start(&serve_yaml());
    let good = std::fs::read_to_string(&app.cluster_file).unwrap();
    std::fs::write(&app.cluster_file, good.replace("name: test", "name: BAD")).unwrap();
    app.signal("HUP");
    app.wait_log("reload rejected", Duration::from_secs(20));
    std::fs::write(
        &app.cluster_file,
        good.replace("name: test", "name: reloaded"),
    )
    .unwrap();
    app.signal("HUP");
    app.wait_log("configuration reloaded", Duration::from_secs(30));
    app.wait_log("cluster=reloaded.crc.testing", Duration::from_secs(10));
}

#[test]
fn serve_refuses_invalid_file_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.yaml");
    std::fs::write(
        &f,
        serve_yaml()
            .replace("{dir}", "/tmp")
            .replace("gateway: 127.0.20.1", "gateway: 10.9.9.9"),
    )
    .unwrap();
    let (code, _, err) = run(
        "timeout",
        &["30", BIN, "serve", "--cluster", f.to_str().unwrap()],
    );
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("network.gateway"), "{err}");
    assert!(
        !err.contains("listening for"),
        "bound before validating:\n{err}"
    );
}

#[test]
fn serve_fails_cleanly_on_port_conflict() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.yaml");
    let yaml = common::only(&format!("admin:\n  listen: 127.0.0.1:{port}\n"));
    std::fs::write(&f, yaml).unwrap();
    // `timeout` turns a server that wrongly keeps running into a failure (124).
    let (code, _, err) = run(
        "timeout",
        &["30", BIN, "serve", "--cluster", f.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("admin"), "{err}");
    drop(busy);
}

#[test]
fn admin_serves_status_metrics_and_lb_api() {
    require_tools!("curl");
    let app = InProc::start_yaml(&common::only("admin:\n  listen: 127.0.0.1:0\n"));
    let base = format!("http://{}", app.addr("admin"));
    let (code, out, err) = run(
        "curl",
        &["-sS", "--max-time", "10", &format!("{base}/status")],
    );
    assert_eq!(code, 0, "{err}");
    let v: StatusDoc = serde_json::from_str(&out).expect("status is the document");
    assert_eq!(v.cluster, "test.crc.testing");
    assert_eq!(v.nodes.len(), 5, "{out}");
    assert_eq!(v.nodes[1].mac, "52:54:00:14:00:0a");
    let (_, out, _) = run(
        "curl",
        &["-sS", "--max-time", "10", &format!("{base}/metrics")],
    );
    assert!(
        out.contains("crc_appliance_info{version=") && out.contains("cluster=\"test.crc.testing\""),
        "{out}"
    );
    // The LB is disabled in this cluster: the control API says so.
    let code_of = |method: &str, path: &str| {
        let url = format!("{base}{path}");
        let args = [
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            method,
            &url,
        ];
        run("curl", &args).1
    };
    assert_eq!(code_of("POST", "/api/lb/backends/bootstrap/disable"), "503");
    assert_eq!(code_of("GET", "/api/lb/backends"), "503");
    assert_eq!(code_of("GET", "/nope"), "404");
}

/// `--cluster` is accepted before the subcommand, after it and after its
/// arguments (docs show `lb disable bootstrap --cluster F`); without it the
/// command is a usage error.
#[test]
fn cluster_option_is_accepted_in_every_position() {
    let f = configs("example.yaml");
    let golden = run_ok(BIN, &["render", "--cluster", &f, "zone"]);
    for args in [
        vec!["--cluster", f.as_str(), "render", "zone"],
        vec!["render", "zone", "--cluster", f.as_str()],
        vec!["-c", f.as_str(), "render", "zone"],
    ] {
        assert_eq!(run_ok(BIN, &args), golden, "{args:?}");
    }
    // `lb ... --cluster F` parses and gets as far as the admin API, on a
    // loopback port this test holds bound and not listening (so nothing
    // else on the host, an appliance on the default 9180 included, answers).
    let held = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    held.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    let port = held.local_addr().unwrap().as_socket().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(&f).unwrap();
    assert!(
        example.contains("listen: 127.0.0.1:9180"),
        "example.yaml's admin"
    );
    let held_file = dir.path().join("example.yaml");
    std::fs::write(
        &held_file,
        example.replace(
            "listen: 127.0.0.1:9180",
            &format!("listen: 127.0.0.1:{port}"),
        ),
    )
    .unwrap();
    let f = held_file.to_str().unwrap().to_string();
    for args in [
        vec!["lb", "disable", "bootstrap", "--cluster", f.as_str()],
        vec!["--cluster", f.as_str(), "lb", "disable", "bootstrap"],
        vec!["lb", "--cluster", f.as_str(), "disable", "bootstrap"],
    ] {
        let (code, _, err) = run(BIN, &args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("cannot reach the admin API"),
            "{args:?}: {err}"
        );
    }
    let (code, _, err) = run(BIN, &["check"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--cluster <FILE>"), "{err}");
}

/// `check`, `render zone` and `serve` agree on a user CNAME at `api`: all
/// three refuse the file with the field path (exit 78).
#[test]
fn a_cname_at_a_generated_name_is_refused_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.yaml");
    let text = std::fs::read_to_string(configs("example.yaml")).unwrap();
    let text = text.replace(
        "\n  records:\n",
        "\n  records:\n    - { name: api, type: CNAME, value: elsewhere.example.org. }\n",
    );
    assert!(
        text.contains("type: CNAME"),
        "example.yaml has no dns.records"
    );
    std::fs::write(&f, text).unwrap();
    let f = f.to_str().unwrap();
    for args in [
        vec!["check", "--cluster", f],
        vec!["render", "zone", "--cluster", f],
        vec!["serve", "--cluster", f],
    ] {
        let (code, out, err) = run(BIN, &args);
        assert_eq!(code, 78, "{args:?}: {out}{err}");
        assert!(
            err.contains("dns.records[0]: CNAME at api.") && !out.contains("CNAME"),
            "{args:?}: {out}{err}"
        );
    }
}

/// `render host-dns`: the three recipes for this host's resolver, each
/// checked by the tool that reads it: dnsmasq's syntax check for the
/// NetworkManager/dnsmasq lines, `virt-xml-validate` for the libvirt
/// default network with the forwarders, and the resolvectl routing domains.
#[test]
fn render_host_dns_recipes_are_what_the_tools_accept() {
    require_tools!("dnsmasq", "virt-xml-validate");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.yaml");
    std::fs::write(
        &f,
        common::loopback_cluster_with("dns:\n  listen: [\"127.0.20.1:5353\"]\n"),
    )
    .unwrap();
    let (code, out, err) = run(
        BIN,
        &["render", "--cluster", f.to_str().unwrap(), "host-dns"],
    );
    assert_eq!(code, 0, "{err}");
    let zone = "test.crc.testing";
    let servers: Vec<&str> = out.lines().filter(|l| l.starts_with("server=/")).collect();
    assert_eq!(
        servers,
        [
            format!("server=/{zone}/127.0.20.1#5353").as_str(),
            "server=/20.0.127.in-addr.arpa/127.0.20.1#5353"
        ],
        "{out}"
    );
    let conf = dir.path().join("dnsmasq.conf");
    std::fs::write(&conf, servers.join("\n") + "\n").unwrap();
    let (code, o, e) = run(
        "dnsmasq",
        &["--test", &format!("--conf-file={}", conf.display())],
    );
    assert_eq!(code, 0, "{o}{e}");
    assert!(format!("{o}{e}").contains("syntax check OK"), "{o}{e}");
    assert!(
        out.contains(&format!(
            "resolvectl domain <bridge> ~{zone} ~20.0.127.in-addr.arpa"
        )) && out.contains("resolvectl dns <bridge> 127.0.20.1:5353"),
        "{out}"
    );
    let start = out.find("<dns>").unwrap();
    let end = out.find("</dns>").unwrap() + "</dns>".len();
    let net = format!(
        "<network><name>default</name><bridge name='virbr0'/>{}<ip address='192.168.122.1' netmask='255.255.255.0'/></network>\n",
        &out[start..end]
    );
    let xml = dir.path().join("net.xml");
    std::fs::write(&xml, net).unwrap();
    let (code, o, e) = run("virt-xml-validate", &[xml.to_str().unwrap(), "network"]);
    assert_eq!(code, 0, "{o}{e}");
    assert!(
        out.contains(&format!("<forwarder domain='{zone}' addr='127.0.20.1'/>")),
        "{out}"
    );
    assert!(
        out.contains("has no port"),
        "a non-53 port is called out: {out}"
    );
}

/// An ordinary host (20000 open files, the default LB cap of 10000 per
/// frontend) does not start with a warning: the caps are scaled to fit,
/// every node is still served, and the effective caps are logged at INFO.
/// A limit too low even for the cluster's nodes still warns.
#[test]
fn an_ordinary_open_files_limit_scales_caps_without_a_warning() {
    require_tools!("prlimit");
    let yaml = common::loopback_cluster_with(
        "loadBalancer:\n  listen: { api: \"127.0.0.1:0\", machineConfig: \"127.0.0.1:0\", ingressHttp: \"127.0.0.1:0\", ingressHttps: \"127.0.0.1:0\" }\nhttp:\n  listen: 127.0.0.1:0\n  imagesDir: \"{dir}/images\"\n  ignitionDir: \"{dir}/ign\"\nadmin:\n  listen: 127.0.0.1:0\ndns:\n  listen: [\"127.0.0.1:0\"]\ndhcp:\n  enabled: false\n",
    );
    let app = common::Launch::default()
        .prefix(&["prlimit", "--nofile=20000:20000", "--"])
        .start(&yaml);
    app.wait_log("open files 20000: http", Duration::from_secs(10));
    let log = app.log();
    let limits: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("runtime::limits"))
        .collect();
    assert!(
        limits.iter().all(|l| !l.contains(" WARN ")),
        "a default host warned: {limits:#?}"
    );
    assert!(
        limits
            .iter()
            .any(|l| l.contains(" INFO ") && l.contains("is below the")),
        "the scaling is still said: {limits:#?}"
    );
    drop(app);
    let app = common::Launch::default()
        .prefix(&["prlimit", "--nofile=160:160", "--"])
        .start(&yaml);
    app.wait_log("open files limit 160 is below the", Duration::from_secs(10));
    assert!(
        app.log()
            .lines()
            .any(|l| l.contains(" WARN ") && l.contains("even what the cluster's")),
        "{}",
        app.log()
    );
}

/// Issue #24: `render chrony` is two MachineConfigs (master, worker) whose
/// chrony.conf names the appliance and keeps `sourcedir /run/chrony-dhcp`;
/// golden file, parsed as YAML, the data URL decoded. Without `ntp:` it
/// refuses (there would be no server to name).
#[test]
fn render_chrony_matches_golden_file_and_keeps_sourcedir() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(configs("example.yaml")).unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, format!("{example}\nntp:\n  localStratum: 10\n")).unwrap();
    let (code, out, err) = run(
        BIN,
        &["render", "--cluster", file.to_str().unwrap(), "chrony"],
    );
    assert_eq!(code, 0, "{err}");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/chrony.yaml");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &out).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("golden file (UPDATE_GOLDEN=1 to create)");
    assert_eq!(
        out, want,
        "render chrony changed; rerun with UPDATE_GOLDEN=1 if intended"
    );

    let appliance = {
        let v: serde_json::Value = serde_saphyr::from_str(&example).unwrap();
        v["network"]["applianceIP"].as_str().unwrap().to_string()
    };
    let docs: Vec<&str> = out.split("\n---\n").collect();
    assert_eq!(docs.len(), 2, "{out}");
    for (doc, role) in docs.iter().zip(["master", "worker"]) {
        let v: serde_json::Value = serde_saphyr::from_str(doc).expect("valid YAML");
        assert_eq!(v["kind"], "MachineConfig");
        assert_eq!(
            v["metadata"]["labels"]["machineconfiguration.openshift.io/role"],
            role
        );
        let f = &v["spec"]["config"]["storage"]["files"][0];
        assert_eq!(f["path"], "/etc/chrony.conf");
        let src = f["contents"]["source"].as_str().unwrap();
        let b64 = src.split_once("base64,").unwrap().1;
        let conf = String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap();
        assert!(
            conf.lines().any(|l| l == "sourcedir /run/chrony-dhcp"),
            "{conf}"
        );
        assert!(
            conf.lines()
                .any(|l| l == format!("server {appliance} iburst")),
            "{conf}"
        );
    }

    let (code, _, err) = run(
        BIN,
        &["render", "--cluster", &configs("example.yaml"), "chrony"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("ntp"), "{err}");
}
