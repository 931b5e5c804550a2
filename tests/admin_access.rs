//! Admin API access control with curl and the CLI against the real admin
//! API (served in this process; `check` is the binary):
//! DNS-rebinding Host names and cross-origin state changes are refused, a
//! non-loopback listener needs `admin.tokenFile`, and with a token the
//! control API (reload, lb) needs it while reads stay open.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;

use common::inproc::InProc;
use common::{BIN, free_port, run};

/// curl; returns the HTTP status code.
fn code(args: &[&str]) -> String {
    let mut v = vec![
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "10",
    ];
    v.extend_from_slice(args);
    run("curl", &v).1
}

#[test]
fn rebinding_hosts_and_cross_origin_posts_are_refused() {
    require_tools!("curl");
    let port = free_port();
    let app = InProc::start_yaml(&common::only(&format!(
        "admin:\n  listen: 127.0.0.1:{port}\n"
    )));
    let base = format!("http://{}", app.addr("admin"));
    let status = format!("{base}/status");
    let reload = format!("{base}/api/reload");
    assert_eq!(code(&[&status]), "200");
    assert_eq!(code(&["-H", "Host: localhost", &status]), "200");
    assert_eq!(code(&["-H", "Host: evil.example", &status]), "403");
    assert_eq!(code(&["-H", "Host: evil.example:9180", &status]), "403");
    assert_eq!(
        code(&["-X", "POST", "-H", "Host: evil.example", &reload]),
        "403"
    );
    assert_eq!(
        code(&["-X", "POST", "-H", "Origin: http://evil.example", &reload]),
        "403"
    );
    assert_eq!(
        code(&["-X", "POST", "-H", "Sec-Fetch-Site: cross-site", &reload]),
        "403"
    );
    assert_eq!(
        code(&["-X", "POST", "-H", &format!("Origin: {base}"), &reload]),
        "200",
        "same-origin POST"
    );
    assert_eq!(code(&["-X", "POST", &reload]), "200", "a CLI-style POST");
    let (c, out, err) = run(
        BIN,
        &["reload", "--cluster", app.cluster_file.to_str().unwrap()],
    );
    assert_eq!(c, 0, "{out}{err}");
}

#[test]
fn non_loopback_admin_requires_a_private_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.yaml");
    let token = dir.path().join("admin.token");
    let port = free_port();
    std::fs::write(
        &f,
        common::only(&format!("admin:\n  listen: 0.0.0.0:{port}\n")),
    )
    .unwrap();
    let (c, _, err) = run(BIN, &["check", "--cluster", f.to_str().unwrap()]);
    assert_eq!(c, 78, "{err}");
    assert!(
        err.contains("admin.listen: 0.0.0.0") && err.contains("admin.tokenFile"),
        "{err}"
    );
    std::fs::write(&token, "s3cret-s3cret-s3cret\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(
        &f,
        common::only(&format!(
            "admin:\n  listen: 0.0.0.0:{port}\n  tokenFile: admin.token\n"
        )),
    )
    .unwrap();
    let (c, _, err) = run(BIN, &["check", "--cluster", f.to_str().unwrap()]);
    assert_eq!(c, 78, "{err}");
    assert!(
        err.contains("admin.tokenFile") && err.contains("mode 0644"),
        "{err}"
    );
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (c, out, err) = run(BIN, &["check", "--cluster", f.to_str().unwrap()]);
    assert_eq!(c, 0, "{out}{err}");
    assert!(
        !out.contains("s3cret") && !err.contains("s3cret"),
        "token printed"
    );
}

#[test]
fn with_a_token_control_needs_it_and_reads_stay_open() {
    require_tools!("curl");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("admin.token");
    std::fs::write(&token, "t0ken-t0ken-t0ken-t0ken\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let f = dir.path().join("cluster.yaml");
    std::fs::write(
        &f,
        common::only(&format!(
            "admin:\n  listen: 0.0.0.0:{port}\n  tokenFile: admin.token\n"
        )),
    )
    .unwrap();
    let app = InProc::start_path(&f);
    let base = format!("http://127.0.0.1:{port}");
    let reload = format!("{base}/api/reload");
    assert_eq!(code(&[&format!("{base}/status")]), "200");
    assert_eq!(code(&[&format!("{base}/metrics")]), "200");
    assert_eq!(code(&["-X", "POST", &reload]), "401");
    assert_eq!(
        code(&[
            "-X",
            "POST",
            "-H",
            "Authorization: Bearer wrong-wrong-wrong-wrong",
            &reload
        ]),
        "401"
    );
    assert_eq!(
        code(&[
            "-X",
            "POST",
            "-H",
            "Authorization: Bearer t0ken-t0ken-t0ken-t0ken",
            &reload
        ]),
        "200"
    );
    assert_eq!(
        code(&[
            "-X",
            "POST",
            &format!("{base}/api/lb/backends/master-0/disable")
        ]),
        "401"
    );
    // The CLI reads the token file named in the cluster file.
    let (c, out, err) = run(BIN, &["reload", "--cluster", f.to_str().unwrap()]);
    assert_eq!(c, 0, "{out}{err}");
    assert!(out.contains("reloaded: generation 3"), "{out}");
    let (c, out, err) = run(BIN, &["lb", "--cluster", f.to_str().unwrap(), "status"]);
    assert_ne!(c, 0, "the LB is off: {out}{err}");
    assert!(
        err.contains("503"),
        "refused for the LB being off, not the token: {err}"
    );
    assert!(!app.log().contains("t0ken"), "token logged");
}
