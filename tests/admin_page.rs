//! The admin HTML status page, rendered by a real headless Chromium at
//! 1280×800 and at a phone's 390×844: the cluster phase, the install
//! timeline (a row per node, a card per node on the phone), one health line
//! per service and the ignition fetch log only exist after its script ran;
//! every time is UTC; nothing is wider than the window; screenshots are left
//! in `target/admin-page-1280x800.png` and `target/admin-page-390x844.png`.
//!
//! The appliance runs in this process (`common::inproc`); the mirror test
//! gives its appliance a 1 s quiet time through the test hook
//! (`runtime::faults::PULL_QUIET_ENV`: its own, not the environment's).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::inproc::InProc;
use common::{chromium, chromium_sized, run};
use crc_appliance::runtime::faults::PULL_QUIET_ENV;

#[test]
fn admin_status_page_renders_in_chromium() {
    require_tools!("curl", "chromium");
    let dir = tempfile::tempdir().unwrap();
    let ign = dir.path().join("ignition");
    std::fs::create_dir_all(&ign).unwrap();
    std::fs::write(
        ign.join("master.ign"),
        r#"{"ignition":{"version":"3.2.0"}}"#,
    )
    .unwrap();
    let app = InProc::start_yaml(&common::only(&format!(
        "http:\n  listen: 127.0.0.1:0\n  imagesDir: {d}/images\n  ignitionDir: {i}\nadmin:\n  listen: 127.0.0.1:0\nloadBalancer:\n  listen: {{ api: \"127.0.0.1:0\", machineConfig: \"127.0.0.1:0\", ingressHttp: \"127.0.0.1:0\", ingressHttps: \"127.0.0.1:0\" }}\n",
        d = dir.path().display(),
        i = ign.display()
    )));
    let http = app.addr("http");
    let admin = app.addr("admin");
    // master-1 fetches its ignition from its own address.
    let (code, out, err) = run(
        "curl",
        &[
            "-sS",
            "--max-time",
            "10",
            "--interface",
            "127.0.20.11",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("http://{http}/ignition/master-1.ign"),
        ],
    );
    assert_eq!((code, out.as_str()), (0, "200"), "{err}");

    // The page itself is static: no node names before the script runs.
    let (_, raw, _) = run(
        "curl",
        &["-sS", "--max-time", "10", &format!("http://{admin}/")],
    );
    assert!(
        raw.contains("<script>") && !raw.contains("master-2"),
        "{raw}"
    );

    // The operator fetches master-0's: listed apart, not progress.
    let (code, _, err) = run(
        "curl",
        &[
            "-sSf",
            "-o",
            "/dev/null",
            &format!("http://{http}/ignition/master-0.ign"),
        ],
    );
    assert_eq!(code, 0, "{err}");

    let dom = chromium(&format!("http://{admin}/"), &["--dump-dom"]);
    for node in ["bootstrap", "master-0", "master-1", "master-2", "worker-0"] {
        assert!(
            dom.contains(&format!("data-node=\"{node}\"")),
            "node {node} not rendered:\n{dom}"
        );
    }
    assert!(dom.contains("test.crc.testing (crc-appliance"), "{dom}");
    // The phase at the top, a time in master-1's ignition cell only.
    assert!(
        dom.contains("class=\"step current\" data-phase=\"provisioning\""),
        "{dom}"
    );
    let row = |node: &str| {
        let at = dom.find(&format!("data-node=\"{node}\"")).unwrap();
        dom[at..at + dom[at..].find("</tr>").unwrap()].to_string()
    };
    let m1 = row("master-1");
    let ign_cell = &m1[m1.find("data-step=\"ignition\"").unwrap()..];
    assert!(ign_cell.contains("class=\"ok\""), "{m1}");
    let m0 = row("master-0");
    let ign_cell = &m0[m0.find("data-step=\"ignition\"").unwrap()..];
    assert!(
        !ign_cell.starts_with("data-step=\"ignition\"><span class=\"ok\""),
        "operator fetch is not progress: {m0}"
    );
    assert!(
        dom.contains("master-0.ign from 127.0.0.1"),
        "operator fetch listed: {dom}"
    );
    assert!(
        dom.contains("data-overflow-x=\"no\""),
        "wider than 1280 px: {dom}"
    );
    assert!(dom.contains("id=\"svc-lb\""), "{dom}");
    assert_eq!(
        dom.matches("data-pool=").count(),
        4 + 4 + 1 + 1,
        "one LB row per pool and backend: {dom}"
    );
    // master-1's fetch shows in its row and in the generic http section.
    assert!(
        dom.contains("master-1.ign 200 from 127.0.20.11"),
        "fetch not shown:\n{dom}"
    );
    assert!(dom.contains("id=\"svc-http\""), "{dom}");
    assert!(dom.contains("<h3>ignition fetches</h3>"), "{dom}");
    assert!(dom.contains("id=\"updated\">updated "), "{dom}");

    // One health line per service with its counters; times in UTC.
    for svc in ["lb", "http", "admin"] {
        let at = dom
            .find(&format!("class=\"svc\" data-service=\"{svc}\""))
            .unwrap_or_else(|| panic!("no health line for {svc}: {dom}"));
        let line = &dom[at..at + dom[at..].find("</div>").unwrap()];
        assert!(line.contains(">up<"), "{line}");
    }
    assert!(dom.contains("0/10 backends healthy"), "{dom}");
    assert!(
        dom.contains("1 requests") || dom.contains("2 requests") || dom.contains("3 requests"),
        "{dom}"
    );
    let updated = &dom[dom.find("id=\"updated\">").unwrap()..];
    assert!(
        updated[..updated.find("</span>").unwrap()].ends_with(" UTC"),
        "header clock in UTC: {updated}"
    );
    // The operator's fetch of master-0.ign is not in master-0's cell title.
    assert!(!m0.contains("title=\"master-0.ign"), "{m0}");

    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    for (size, name) in [("1280,800", "1280x800"), ("390,844", "390x844")] {
        let shot = target.join(format!("admin-page-{name}.png"));
        let _ = std::fs::remove_file(&shot);
        chromium_sized(
            &format!("http://{admin}/"),
            size,
            &[&format!("--screenshot={}", shot.display())],
        );
        let png = std::fs::read(&shot).expect("a screenshot");
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        eprintln!("screenshot: {}", shot.display());
    }
    // On a phone the node rows are readable cards: nothing wider than 390.
    let phone = chromium_sized(&format!("http://{admin}/"), "390,844", &["--dump-dom"]);
    assert!(
        phone.contains("data-overflow-x=\"no\""),
        "wider than 390 px: {}",
        &phone[phone.find("data-overflow-x").unwrap_or(0)..][..80]
    );
    assert!(phone.contains("data-label=\"ignition\""), "{phone}");
}

/// Single-node: a bootstrap-in-place Ignition written 21 h ago (its
/// certificates expire 24 h after it was made) shows the warning box on the
/// page, with the command that makes it again; a fresh one shows none.
#[test]
fn the_page_warns_about_an_old_bootstrap_in_place_ignition() {
    require_tools!("chromium");
    let dir = tempfile::tempdir().unwrap();
    let ign = dir.path().join("ignition");
    std::fs::create_dir_all(&ign).unwrap();
    let bip = ign.join("bootstrap-in-place-for-live-iso.ign");
    std::fs::write(&bip, r#"{"ignition":{"version":"3.2.0"}}"#).unwrap();
    let yaml = format!(
        r#"name: sno
baseDomain: crc.testing
network:
  cidr: 127.0.20.0/24
  gateway: 127.0.20.1
  applianceIP: 127.0.20.1
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:14:00:0a", ip: 127.0.20.10 }}
dns:
  enabled: false
dhcp:
  enabled: false
http:
  listen: 127.0.0.1:0
  imagesDir: {d}/images
  ignitionDir: {i}
admin:
  listen: 127.0.0.1:0
"#,
        d = dir.path().display(),
        i = ign.display()
    );
    let app = InProc::start_yaml(&yaml);
    let admin = app.addr("admin");
    let hint = "data-hint=\"stale-bootstrap-in-place\"";
    let dom = chromium(&format!("http://{admin}/"), &["--dump-dom"]);
    assert!(dom.contains("data-node=\"master-0\""), "{dom}");
    assert!(!dom.contains(hint), "a fresh file is no warning: {dom}");

    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(21 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&bip)
        .unwrap()
        .set_modified(old)
        .unwrap();
    // HTTP looks at the file's time once a second and records a change.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let dom = loop {
        let dom = chromium(&format!("http://{admin}/"), &["--dump-dom"]);
        if dom.contains(hint) || std::time::Instant::now() > deadline {
            break dom;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let at = dom
        .find(hint)
        .unwrap_or_else(|| panic!("no warning: {dom}"));
    let boxed = &dom[at..at + dom[at..].find("</div>").unwrap()];
    assert!(boxed.contains("21 h ago"), "{boxed}");
    assert!(
        boxed.contains("openshift-install create single-node-ignition-config"),
        "{boxed}"
    );
}

/// A mirror registry: master-1 pulls a blob from its own address (anonymous,
/// from the cluster network); its row gets the images column ("since" its
/// first request, then the time it pulled: the test's quiet time is 1 s,
/// not the minute), the registry gets a health line with its counters, and
/// `/metrics` has the registry's counters and master-1's bytes.
#[test]
fn the_page_shows_each_nodes_pulls_from_the_mirror() {
    require_tools!("curl", "chromium", "openssl");
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("mirror");
    let blob = common::pattern(300_000, 9);
    let digest = {
        let d = ring::digest::digest(&ring::digest::SHA256, &blob);
        d.as_ref()
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    };
    let v2 = storage.join("docker/registry/v2");
    let data = v2.join("blobs/sha256").join(&digest[..2]).join(&digest);
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("data"), &blob).unwrap();
    let link = v2.join("repositories/lab/app/_layers/sha256").join(&digest);
    std::fs::create_dir_all(&link).unwrap();
    std::fs::write(link.join("link"), format!("sha256:{digest}")).unwrap();
    let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    common::self_signed_cert(&cert, &key, "mirror.test.crc.testing");
    // The quiet time is this appliance's test hook (1 s, not the minute).
    let app = InProc::with_hook(PULL_QUIET_ENV, "1")
        .start_yaml(&common::only(&format!(
            "admin:\n  listen: 127.0.0.1:0\nregistry:\n  storage: {s}\n  listen: 127.0.0.1:0\n  tls: {{ certFile: {c}, keyFile: {k} }}\n",
            s = storage.display(),
            c = cert.display(),
            k = key.display()
        )));
    let admin = app.addr("admin");
    let reg = app.addr("registry");
    let (code, out, err) = run(
        "curl",
        &[
            "-sSk",
            "--max-time",
            "10",
            "--interface",
            "127.0.20.11",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("https://{reg}/v2/lab/app/blobs/sha256:{digest}"),
        ],
    );
    assert_eq!((code, out.as_str()), (0, "200"), "{err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let dom = loop {
        let dom = chromium(&format!("http://{admin}/"), &["--dump-dom"]);
        if images_cell(&dom, "master-1").contains("<span class=\"ok\">")
            || std::time::Instant::now() > deadline
        {
            break dom;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let m1 = images_cell(&dom, "master-1");
    assert!(m1.contains("<span class=\"ok\">"), "pulled: {m1}");
    assert!(m1.contains("title=\"300000 bytes in 1 requests"), "{m1}");
    let m0 = images_cell(&dom, "master-0");
    assert!(m0.contains("<span class=\"muted\">"), "{m0}");
    let at = dom
        .find("class=\"svc\" data-service=\"registry\"")
        .unwrap_or_else(|| panic!("no registry health line: {dom}"));
    let line = &dom[at..at + dom[at..].find("</div>").unwrap()];
    for fact in [
        "1 requests",
        "300000 bytes sent",
        "0 cache hits",
        "0 cache misses",
        "0 upstream errors",
    ] {
        assert!(line.contains(fact), "{fact}: {line}");
    }
    assert!(
        dom.contains("data-overflow-x=\"no\""),
        "wider than 1280 px: {dom}"
    );
    let (_, metrics, _) = run(
        "curl",
        &[
            "-sS",
            "--max-time",
            "10",
            &format!("http://{admin}/metrics"),
        ],
    );
    for line in [
        "crc_appliance_registry_requests_total 1",
        "crc_appliance_registry_sent_bytes_total 300000",
        "crc_appliance_registry_cache_hits_total 0",
        "crc_appliance_registry_cache_misses_total 0",
        "crc_appliance_registry_upstream_errors_total 0",
        "crc_appliance_registry_client_pulled_bytes_total{client=\"127.0.20.11\",node=\"master-1\"} 300000",
    ] {
        assert!(metrics.contains(line), "{line}:\n{metrics}");
    }
}

/// The images cell of `node`'s row (empty when there is none).
fn images_cell(dom: &str, node: &str) -> String {
    let Some(at) = dom.find(&format!("data-node=\"{node}\"")) else {
        return String::new();
    };
    let row = &dom[at..at + dom[at..].find("</tr>").unwrap()];
    let Some(c) = row.find("data-label=\"images\"") else {
        return String::new();
    };
    row[c..c + row[c..].find("</td>").unwrap()].to_string()
}
