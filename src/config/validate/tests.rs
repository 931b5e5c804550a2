//! The builders' invariant: a section is `None` only when an error was
//! recorded, so `validate` never has to invent one (and never panics).

use std::path::Path;

use super::*;
use crate::config::parse_str;

const BASE: &str = r#"name: ocp4
baseDomain: example.com
network:
  cidr: 192.168.131.0/24
  gateway: 192.168.131.1
  applianceIP: 192.168.131.2
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:05", ip: 192.168.131.5 }
  - { name: master-0, role: master, mac: "52:54:00:00:00:0a", ip: 192.168.131.10 }
rhcos: { iso: /x.iso }
libvirt: {}
"#;

fn run(text: &str) -> (Sections, Errs) {
    let raw = parse_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut e = Errs::default();
    let s = sections(&raw, Path::new("/base"), &mut e);
    (s, e)
}

fn nones(s: &Sections) -> Vec<&'static str> {
    let mut v = Vec::new();
    for (name, none) in [
        ("identity", s.identity.is_none()),
        ("network", s.network.is_none()),
        ("nodes", s.nodes.is_none()),
        ("dns", s.dns.is_none()),
        ("dhcp", s.dhcp.is_none()),
        ("lb", s.lb.is_none()),
        ("http", s.http.is_none()),
        ("admin", s.admin.is_none()),
        ("rhcos", s.rhcos.is_none()),
        ("libvirt", s.libvirt.is_none()),
    ] {
        if none {
            v.push(name);
        }
    }
    v
}

#[test]
fn the_base_builds_every_section_without_errors() {
    let (s, e) = run(BASE);
    assert!(e.0.is_empty(), "{:?}", e.0);
    assert!(nones(&s).is_empty(), "{:?}", nones(&s));
}

#[test]
fn every_none_comes_with_an_error() {
    let with = |extra: &str| format!("{BASE}{extra}");
    // (the section that must be None, or "" when it is still assembled
    // with its error recorded; the input)
    let cases: Vec<(&str, String)> = vec![
        ("identity", BASE.replace("name: ocp4", "name: BAD")),
        (
            "network",
            BASE.replace("cidr: 192.168.131.0/24", "cidr: nope"),
        ),
        (
            "network",
            BASE.replace("gateway: 192.168.131.1", "gateway: 10.0.0.1"),
        ),
        (
            "network",
            BASE.replace("applianceIP: 192.168.131.2", "applianceIP: nope"),
        ),
        ("", BASE.replace("role: master", "role: captain")),
        ("", with("dns: { ttl: 30d }\n")),
        (
            "",
            with("dns:\n  records:\n    - { name: x, type: MX, value: y }\n"),
        ),
        ("", with("dhcp: { leaseTime: 1s }\n")),
        (
            "",
            with("dhcp: { pool: { start: 192.168.131.9, end: 192.168.131.1 } }\n"),
        ),
        ("dhcp", with("dhcp: { listen: nope }\n")),
        ("", with("loadBalancer: { maxConnections: 0 }\n")),
        ("lb", with("loadBalancer: { listen: { api: nope } }\n")),
        ("", with("http: { imagesDir: \"\" }\n")),
        ("http", with("http: { listen: nope }\n")),
        ("", with("admin: { listen: 0.0.0.0:9180 }\n")),
        ("admin", with("admin: { listen: nope }\n")),
        ("rhcos", BASE.replace("iso: /x.iso", "iso: \"\"")),
        // Sections that default to a VIP depend on the network: None then
        // too, with the network's error recorded.
        (
            "lb",
            BASE.replace("applianceIP: 192.168.131.2", "applianceIP: nope"),
        ),
        (
            "http",
            BASE.replace("applianceIP: 192.168.131.2", "applianceIP: nope"),
        ),
    ];
    for (section, text) in cases {
        let (s, e) = run(&text);
        let none = nones(&s);
        assert!(
            section.is_empty() || none.contains(&section),
            "{section} should be None for:\n{text}"
        );
        assert!(
            !e.0.is_empty(),
            "sections {none:?} returned None without an error for:\n{text}"
        );
        // And validate() reports, never panics.
        let raw = parse_str(&text).unwrap();
        assert!(validate(raw, Path::new("/base")).is_err());
    }
}

#[test]
fn boot_iso_cidrs_are_checked() {
    let (_, e) = run(&format!(
        "{BASE}http: {{ bootIsoCidrs: [10.1.0.0/16, 10.2.0.1/16, nope] }}\n"
    ));
    let msgs: Vec<String> = e.0.iter().map(|x| format!("{x:?}")).collect();
    assert_eq!(e.0.len(), 2, "{msgs:?}");
    assert!(msgs[0].contains("http.bootIsoCidrs[1]"), "{msgs:?}");
    assert!(msgs[1].contains("http.bootIsoCidrs[2]"), "{msgs:?}");
    let (s2, e2) = run(&format!("{BASE}http: {{ bootIsoCidrs: [10.1.0.0/16] }}\n"));
    assert!(e2.0.is_empty(), "{:?}", e2.0);
    let cidrs = &s2.http.unwrap().boot_iso_cidrs;
    assert_eq!(cidrs.len(), 1);
    assert!(cidrs[0].contains("10.1.2.3".parse().unwrap()));
}

#[test]
fn admin_allow_from_takes_v4_and_v6_cidrs_and_names_each_mistake() {
    let (_, e) = run(&format!(
        "{BASE}admin: {{ allowFrom: [10.1.0.0/16, 10.2.0.1/16, nope, 'fd00:5::/64', 0.0.0.0/0, '::/0'] }}\n"
    ));
    let msgs: Vec<String> = e.0.iter().map(|x| format!("{x:?}")).collect();
    assert_eq!(e.0.len(), 4, "{msgs:?}");
    for (m, i) in msgs.iter().zip([1, 2, 4, 5]) {
        assert!(m.contains(&format!("admin.allowFrom[{i}]")), "{msgs:?}");
    }
    assert!(msgs[0].contains("10.2.0.0/16"), "the fix: {msgs:?}");
    assert!(msgs[2].contains("remove admin.allowFrom"), "{msgs:?}");
    let (s, e) = run(&format!(
        "{BASE}admin: {{ allowFrom: [10.1.0.0/16, 'fd00:5::/64'] }}\n"
    ));
    assert!(e.0.is_empty(), "{:?}", e.0);
    let allow = s.admin.unwrap().allow_from.unwrap();
    assert!(allow[0].contains("10.1.2.3".parse().unwrap()));
    assert!(allow[1].contains("fd00:5::9".parse().unwrap()));
    let (s, _) = run(BASE);
    assert_eq!(s.admin.unwrap().allow_from, None, "absent: every source");
}

#[test]
fn extra_client_cidrs_are_checked() {
    let (_, e) = run(&format!(
        "{BASE}http: {{ ignitionClientCidrs: [192.168.131.40/32, 10.2.0.1/16, 0.0.0.0/0, x] }}\n\
         loadBalancer: {{ machineConfigClientCidrs: [0.0.0.0/0, 10.9.0.0/24] }}\n"
    ));
    let msgs: Vec<String> = e.0.iter().map(|x| format!("{x:?}")).collect();
    assert_eq!(e.0.len(), 4, "{msgs:?}");
    for (m, want) in msgs.iter().zip([
        "loadBalancer.machineConfigClientCidrs[0]",
        "http.ignitionClientCidrs[1]",
        "http.ignitionClientCidrs[2]",
        "http.ignitionClientCidrs[3]",
    ]) {
        assert!(m.contains(want), "{want}: {msgs:?}");
    }
    assert!(msgs[0].contains("every address"), "{msgs:?}");
    let (s, e) = run(&format!(
        "{BASE}http: {{ ignitionClientCidrs: [192.168.131.40/32] }}\n\
         loadBalancer: {{ machineConfigClientCidrs: [10.9.0.0/24] }}\n"
    ));
    assert!(e.0.is_empty(), "{:?}", e.0);
    let http = s.http.unwrap();
    assert!(http.ignition_client_cidrs[0].contains("192.168.131.40".parse().unwrap()));
    assert!(!http.ignition_client_cidrs[0].contains("192.168.131.41".parse().unwrap()));
    assert!(s.lb.unwrap().machine_config_client_cidrs[0].contains("10.9.0.7".parse().unwrap()));
}

#[test]
fn install_kargs_must_fit_a_live_iso_area() {
    let long = vec![format!("x={}", "a".repeat(498)); 4].join(", ");
    let text = BASE.replace(
        "ip: 192.168.131.10 }",
        &format!("ip: 192.168.131.10, kargs: [{long}] }}"),
    );
    let raw = parse_str(&text).unwrap();
    let errs = validate(raw, Path::new("/base")).unwrap_err();
    let msgs: Vec<String> = errs.iter().map(|x| format!("{x:?}")).collect();
    assert_eq!(errs.len(), 1, "{msgs:?}");
    assert!(msgs[0].contains("nodes[1].kargs"), "{msgs:?}");
    assert!(msgs[0].contains("master-0 are 2"), "{msgs:?}");
    // Three of them fit.
    let ok = BASE.replace(
        "ip: 192.168.131.10 }",
        &format!(
            "ip: 192.168.131.10, kargs: [{}] }}",
            vec![format!("x={}", "a".repeat(498)); 3].join(", ")
        ),
    );
    assert!(validate(parse_str(&ok).unwrap(), Path::new("/base")).is_ok());
}

#[test]
fn bootstrap_removal_and_the_csr_hint_are_configurable() {
    let (s, e) = run(BASE);
    assert!(e.0.is_empty(), "{:?}", e.0);
    let lb = s.lb.unwrap();
    assert_eq!(lb.remove_bootstrap, RemoveBootstrap::Auto);
    assert_eq!(lb.csr_hint_after, std::time::Duration::from_secs(600));
    let (s, e) = run(&format!(
        "{BASE}loadBalancer: {{ removeBootstrap: manual, csrHintAfter: 3m }}\n"
    ));
    assert!(e.0.is_empty(), "{:?}", e.0);
    let lb = s.lb.unwrap();
    assert_eq!(lb.remove_bootstrap, RemoveBootstrap::Manual);
    assert_eq!(lb.csr_hint_after, std::time::Duration::from_secs(180));
    let (_, e) = run(&format!(
        "{BASE}loadBalancer: {{ removeBootstrap: never, csrHintAfter: 0s }}\n"
    ));
    let msgs: Vec<String> = e.0.iter().map(|x| format!("{x:?}")).collect();
    assert_eq!(e.0.len(), 2, "{msgs:?}");
    assert!(
        msgs[0].contains("loadBalancer.removeBootstrap") && msgs[0].contains("auto or manual"),
        "{msgs:?}"
    );
    assert!(msgs[1].contains("loadBalancer.csrHintAfter"), "{msgs:?}");
}

#[test]
fn the_ipxe_kernel_line_must_fit_the_kernels_command_line() {
    // The ISO line fits (under 2048 bytes) but the iPXE line, with
    // `initrd=main` and the rootfs URL, does not (the audit's case).
    let with = |n: usize| {
        let kargs = vec![format!("x={}", "a".repeat(498)); 3]
            .into_iter()
            .chain([format!("y={}", "b".repeat(n))])
            .collect::<Vec<_>>()
            .join(", ");
        let text = BASE.replace(
            "ip: 192.168.131.10 }",
            &format!("ip: 192.168.131.10, kargs: [{kargs}] }}"),
        );
        validate(parse_str(&text).unwrap(), Path::new("/base"))
    };
    let mut fits = None;
    let mut refused = None;
    for n in 1..400 {
        match with(n) {
            Ok(c) => fits = Some((n, c)),
            Err(e) => {
                refused = Some((n, e));
                break;
            }
        }
    }
    let (n, errs) = refused.expect("a long enough iPXE line is refused");
    let msgs: Vec<String> = errs.iter().map(|x| format!("{x:?}")).collect();
    assert_eq!(errs.len(), 1, "{msgs:?}");
    let m = &msgs[0];
    assert!(m.contains("nodes[1].kargs"), "{m}");
    assert!(
        m.contains("iPXE kernel command line of master-0 would be 2048 bytes"),
        "{m}"
    );
    assert!(m.contains("at most 2047"), "{m}");
    assert!(m.contains("by 1 bytes"), "{m}");
    assert!(m.contains("nodes[1].kargs[0] (500 bytes)"), "{m}");
    // The ISO line of that node still fits its area: only the iPXE line is
    // too long.
    let (ok_n, c) = fits.expect("a shorter line passes");
    assert_eq!(ok_n, n - 1);
    let node = &c.nodes[1];
    assert_eq!(crate::model::boot::ipxe_kernel_args(&c, node).len(), 2047);
    let iso = crate::model::boot::iso_install_kargs(&c, crate::model::boot::IsoTarget::Node(node));
    assert!(iso.len() < 2048, "{}", iso.len());
}

#[test]
fn ingress_names_existing_non_bootstrap_nodes_once() {
    let text = format!(
        "{BASE}  - {{ name: worker-0, role: worker, mac: \"52:54:00:00:00:14\", ip: 192.168.131.20 }}\ningress: [worker-0, bootstrap, nope, worker-0]\n"
    )
    .replace("rhcos: { iso: /x.iso }\nlibvirt: {}\n  - ", "  - ");
    let text = format!("{text}rhcos: {{ iso: /x.iso }}\nlibvirt: {{}}\n");
    let errs = validate(parse_str(&text).unwrap(), Path::new("/base")).unwrap_err();
    let msgs: Vec<String> = errs.iter().map(|x| format!("{x:?}")).collect();
    assert_eq!(errs.len(), 3, "{msgs:?}");
    assert!(msgs[0].contains("ingress[1]") && msgs[0].contains("bootstrap node"));
    assert!(msgs[1].contains("ingress[2]") && msgs[1].contains("no node named"));
    assert!(msgs[2].contains("ingress[3]") && msgs[2].contains("twice"));
    let ok = text.replace("[worker-0, bootstrap, nope, worker-0]", "[master-0]");
    let c = validate(parse_str(&ok).unwrap(), Path::new("/base")).unwrap();
    let names: Vec<_> = c.ingress_nodes().iter().map(|n| n.name.clone()).collect();
    assert_eq!(names, ["master-0"], "the router moved to the master");
    let default = ok.replace("ingress: [master-0]\n", "");
    let c = validate(parse_str(&default).unwrap(), Path::new("/base")).unwrap();
    let names: Vec<_> = c.ingress_nodes().iter().map(|n| n.name.clone()).collect();
    assert_eq!(names, ["worker-0"], "default with workers: the workers");
}

#[test]
fn https_listener_runs_when_asked_for_or_a_bmc_may_need_it() {
    let (s, e) = run(BASE);
    assert!(e.0.is_empty(), "{:?}", e.0);
    assert_eq!(s.http.unwrap().tls_listen, None, "off by default");
    let (s, e) = run(&format!("{BASE}http: {{ tlsListen: 127.0.0.1 }}\n"));
    assert!(e.0.is_empty(), "{:?}", e.0);
    assert_eq!(
        s.http.unwrap().tls_listen,
        Some("127.0.0.1:8443".parse().unwrap())
    );
    let (_, e) = run(&format!("{BASE}http: {{ tlsListen: nope }}\n"));
    assert_eq!(e.0.len(), 1, "{:?}", e.0);
    assert_eq!(e.0[0].path, "http.tlsListen");
    // Files that cannot be opened are named with their field.
    let (_, e) = run(&format!(
        "{BASE}http: {{ tls: {{ certFile: /nonexistent/c.pem, keyFile: k.pem }} }}\n"
    ));
    let paths: Vec<&str> = e.0.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["http.tls.certFile", "http.tls.keyFile"],
        "{:?}",
        e.0
    );
    // A key that group or others can read is refused (#40 item 9); 0600 is not.
    let d = tempfile::tempdir().unwrap();
    let (cert, key) = (d.path().join("c.pem"), d.path().join("k.pem"));
    std::fs::write(&cert, "c").unwrap();
    std::fs::write(&key, "k").unwrap();
    let tls = format!(
        "{BASE}http: {{ tls: {{ certFile: {}, keyFile: {} }} }}\n",
        cert.display(),
        key.display()
    );
    for (mode, refused) in [(0o644, true), (0o640, true), (0o600, false), (0o400, false)] {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        let (_, e) = run(&tls);
        let hit = e.0.iter().any(|f| {
            f.path == "http.tls.keyFile" && f.message.contains(&format!("has mode {mode:04o}"))
        });
        assert_eq!(hit, refused, "mode {mode:o}: {:?}", e.0);
        assert_eq!(e.0.len(), usize::from(refused), "{:?}", e.0);
    }
    // Unknown keys are refused.
    assert!(
        parse_str(&format!(
            "{BASE}http: {{ tls: {{ certFile: a, keyFile: b, x: 1 }} }}\n"
        ))
        .is_err()
    );
    // The same port and address as http.listen collides.
    let (_, e) = run(&format!(
        "{BASE}http: {{ listen: 127.0.0.1:8443, tlsListen: 127.0.0.1 }}\n"
    ));
    assert!(
        e.0.iter()
            .any(|f| f.path == "http.tlsListen" && f.message.contains("collides with http.listen")),
        "{:?}",
        e.0
    );
}

#[test]
fn bmc_media_and_the_iso_urls_of_both_schemes() {
    use crate::model::bmc::BmcMedia;
    use crate::model::boot::{IsoUrls, iso_urls};
    use std::os::unix::fs::PermissionsExt as _;
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("user"), "admin\n").unwrap();
    std::fs::write(d.path().join("pass"), "secret\n").unwrap();
    std::fs::set_permissions(
        d.path().join("pass"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(d.path().join("c.pem"), "x").unwrap();
    std::fs::write(d.path().join("k.pem"), "x").unwrap();
    std::fs::set_permissions(
        d.path().join("k.pem"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let with = |media: &str, http: &str| {
        let text = BASE.replace(
            "ip: 192.168.131.10 }",
            &format!(
                "ip: 192.168.131.10, bmc: {{ redfish: 'http://10.9.0.5/redfish/v1/Systems/1', usernameFile: user, passwordFile: pass{media} }} }}"
            ),
        ) + http;
        crate::config::from_str(&text, d.path(), Path::new("t"))
            .unwrap_or_else(|e| panic!("{e}"))
            .cluster
    };
    // auto (the default) and https need the HTTPS listener: it runs on
    // <applianceIP>:8443.
    for media in ["", ", media: auto", ", media: https"] {
        let c = with(media, "");
        let want = if media.contains("https") {
            BmcMedia::Https
        } else {
            BmcMedia::Auto
        };
        assert_eq!(c.nodes[1].bmc.as_ref().unwrap().media, want);
        assert_eq!(
            iso_urls(&c, &c.nodes[1]),
            IsoUrls {
                http: "http://192.168.131.2:8080/boot/master-0.iso".into(),
                https: Some("https://192.168.131.2:8443/boot/master-0.iso".into()),
            }
        );
    }
    // http only: no HTTPS listener unless asked for.
    let c = with(", media: http", "");
    assert_eq!(c.http.tls_listen, None);
    assert_eq!(iso_urls(&c, &c.nodes[1]).https, None);
    let c = with(
        ", media: http",
        "http: { listen: 0.0.0.0:81, tlsListen: '0.0.0.0:9443', tls: { certFile: c.pem, keyFile: k.pem } }\n",
    );
    assert_eq!(
        iso_urls(&c, &c.nodes[1]),
        IsoUrls {
            http: "http://192.168.131.2:81/boot/master-0.iso".into(),
            https: Some("https://192.168.131.2:9443/boot/master-0.iso".into()),
        }
    );
    let tls = c.http.tls.unwrap();
    assert_eq!(tls.cert_file, d.path().join("c.pem"));
    assert_eq!(tls.key_file, d.path().join("k.pem"));
    let text = BASE.replace(
        "ip: 192.168.131.10 }",
        "ip: 192.168.131.10, bmc: { redfish: 'http://10.9.0.5/redfish/v1/Systems/1', usernameFile: user, passwordFile: pass, media: ftp } }",
    );
    assert!(crate::config::from_str(&text, d.path(), Path::new("t")).is_err());
}

/// The listener address texts every section's field error shows.
#[test]
fn a_bad_listener_address_names_the_forms_accepted() {
    assert_eq!(
        parse_sock("nope:x", Some(53)),
        Err(SockError::NotIpOrIpPort("nope:x".into()))
    );
    assert_eq!(
        parse_sock("10.0.0.1", None),
        Err(SockError::NotIpPort("10.0.0.1".into()))
    );
    assert_eq!(
        parse_sock(" 10.0.0.1 ", Some(53)),
        Ok("10.0.0.1:53".parse().unwrap())
    );
    assert_eq!(
        SockError::NotIpOrIpPort("nope:x".into()).to_string(),
        "\"nope:x\" is not a valid address (ip or ip:port)"
    );
    assert_eq!(
        SockError::NotIpPort("10.0.0.1".into()).to_string(),
        "\"10.0.0.1\" is not a valid address (ip:port)"
    );
}
