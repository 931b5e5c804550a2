//! The admin HTML status page, rendered by a real headless Chromium: the
//! node table and the ignition fetch log only exist after its script ran.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Appliance, run};

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
    let app = Appliance::start(&common::only(&format!(
        "http:\n  listen: 127.0.0.1:0\n  imagesDir: {d}/images\n  ignitionDir: {i}\nadmin:\n  listen: 127.0.0.1:0\n",
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

    let profile = tempfile::tempdir().unwrap();
    let (code, dom, err) = run(
        "timeout",
        &[
            "90",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.path().display()),
            "--dump-dom",
            "--virtual-time-budget=5000",
            &format!("http://{admin}/"),
        ],
    );
    assert_eq!(code, 0, "chromium failed: {err}");
    // Rows rendered by the script from /status.
    for node in ["bootstrap", "master-0", "master-1", "master-2", "worker-0"] {
        assert!(
            dom.contains(&format!("data-node=\"{node}\"")),
            "node {node} not rendered:\n{dom}"
        );
    }
    assert!(dom.contains("test.crc.testing (crc-appliance"), "{dom}");
    // master-1's fetch shows in its row and in the generic http section.
    assert!(
        dom.contains("master-1.ign 200 from 127.0.20.11"),
        "fetch not shown:\n{dom}"
    );
    assert!(dom.contains("id=\"svc-http\""), "{dom}");
    assert!(dom.contains("<h3>ignition fetches</h3>"), "{dom}");
    assert!(dom.contains("id=\"updated\">updated "), "{dom}");
}
