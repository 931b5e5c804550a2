//! The HA pair (issue #26, docs/ha.md): `render keepalived` (golden, and
//! accepted by the real keepalived's `-t`), `health` (bounded, follows
//! `serve`), and the pair itself in network namespaces with two real
//! keepalived instances (tests/ha_pair.rs).
//!
//! keepalived is extracted, not installed (scripts/packages.txt: its
//! package would start keepalived on this host).
//!
//! `health` is always the real CLI (the binary). The `serve` it checks runs
//! in this process (`common::inproc`) when a task fails by this
//! appliance's own test hook (`runtime::faults::FAULT_ENV`); it is spawned
//! where the process is the point: a `serve` frozen by SIGSTOP (alive but
//! not answering) and one killed with SIGKILL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{Appliance, BIN, Netns, run, unique_name};
use crc_appliance::runtime::faults::FAULT_ENV;

const KEEPALIVED: &str = "/var/cache/crc-appliance-tests/extract/keepalived/usr/sbin/keepalived";

/// The private key files (mode 0600) in `dir`: the pair key `ha.token`
/// and the admin token `admin.token` (two secrets, docs/ha.md).
fn token_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    for (name, text) in [
        ("admin.token", "admin-token-0123456789abcdef\n"),
        ("ha.token", "pair-token-0123456789abcdef\n"),
    ] {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    dir.join("ha.token")
}

const GOLDEN_CLUSTER: &str = r#"name: ocp4
baseDomain: example.com
network:
  cidr: 192.168.131.0/24
  gateway: 192.168.131.1
  applianceIP: 192.168.131.2
  apiVIP: 192.168.131.3
  ingressVIP: 192.168.131.4
  interface: crc-ha0
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:05", ip: 192.168.131.5 }
  - { name: master-0, role: master, mac: "52:54:00:00:00:0a", ip: 192.168.131.10 }
admin: { listen: "0.0.0.0:9180", tokenFile: admin.token }
ha: { peer: 192.168.131.252, ownIP: 192.168.131.251, tokenFile: ha.token }
"#;

#[test]
fn render_keepalived_matches_golden_and_keepalived_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    token_file(dir.path());
    let f = dir.path().join("cluster.yaml");
    std::fs::write(&f, GOLDEN_CLUSTER).unwrap();
    let fs = f.to_str().unwrap();
    let (code, out, err) = run(BIN, &["render", "keepalived", "--cluster", fs]);
    assert_eq!(code, 0, "{err}");
    let exe = std::fs::canonicalize(BIN).unwrap();
    assert!(
        out.contains(&format!(
            "script \"{} health --cluster {fs}\"",
            exe.display()
        )),
        "{out}"
    );
    let generic = out
        .replace(&exe.display().to_string(), "@EXE@")
        .replace(fs, "@CLUSTER@");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/keepalived.conf");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &generic).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("golden file (UPDATE_GOLDEN=1 to create)");
    assert_eq!(
        generic, want,
        "render keepalived changed; rerun with UPDATE_GOLDEN=1 if intended"
    );
    // `check` prints the derived virtual router id that the file uses.
    let (code, check, _) = run(BIN, &["check", "--cluster", fs]);
    assert_eq!(code, 0);
    let vrid = check
        .lines()
        .find_map(|l| l.strip_prefix("ha peer "))
        .and_then(|l| l.rsplit(' ').next())
        .expect("ha line in check")
        .to_string();
    assert!(
        out.contains(&format!("virtual_router_id {vrid}\n")),
        "{check}\n{out}"
    );
    // Without `ha:` there is nothing to render.
    std::fs::write(&f, GOLDEN_CLUSTER.split("admin:").next().unwrap()).unwrap();
    let (code, _, err) = run(BIN, &["render", "keepalived", "--cluster", fs]);
    assert_ne!(code, 0);
    assert!(err.contains("no `ha:` section"), "{err}");

    require!(
        Path::new(KEEPALIVED).is_file(),
        "keepalived is not extracted (scripts/prereqs.sh)"
    );
    require_netns!("hak");
    // keepalived -t checks the interface exists: a namespace that has it.
    let ns = Netns::new(unique_name("hak"));
    ns.ip(&["link", "add", "crc-ha0", "type", "bridge"]);
    let conf = dir.path().join("keepalived.conf");
    std::fs::write(&conf, &out).unwrap();
    let (code, o, e) = run(
        "ip",
        &[
            "netns",
            "exec",
            ns.name(),
            KEEPALIVED,
            "-t",
            "-l",
            "-f",
            conf.to_str().unwrap(),
        ],
    );
    assert_eq!(
        code, 0,
        "keepalived -t refused the rendered file:\n{o}{e}\n{out}"
    );
}

/// `health` of `cluster`: its exit code, and how long it took.
fn health(cluster: &Path) -> (i32, Duration, String) {
    let t = Instant::now();
    let (code, _, err) = run(BIN, &["health", "--cluster", cluster.to_str().unwrap()]);
    (code, t.elapsed(), err)
}

#[test]
fn health_follows_serve_and_is_bounded() {
    let port = common::free_port();
    let yaml = common::only(&format!(
        "dns:\n  listen: [\"127.0.0.1:0\"]\nadmin:\n  listen: \"127.0.0.1:{port}\"\n"
    ));
    let mut app = Appliance::start(&yaml);
    let f = app.cluster_file.clone();
    let (code, took, err) = health(&f);
    assert_eq!(code, 0, "healthy serve: {err}");
    assert!(took < Duration::from_secs(1), "health took {took:?}");
    // A serve that does not answer (stopped): non-zero within 1 s.
    app.signal("STOP");
    let (code, took, err) = health(&f);
    app.signal("CONT");
    assert_ne!(code, 0, "a stopped serve is not healthy");
    assert!(took < Duration::from_secs(1), "health took {took:?}: {err}");
    assert_eq!(health(&f).0, 0, "serve answers again");
    // serve gone: non-zero at once.
    app.stop_with("KILL");
    let (code, took, err) = health(&f);
    assert_ne!(code, 0);
    assert!(took < Duration::from_secs(1), "health took {took:?}");
    assert!(err.contains("cannot reach the admin API"), "{err}");
}

#[test]
fn health_fails_while_a_failed_service_stops_serve() {
    let port = common::free_port();
    let yaml = common::only(&format!(
        "dns:\n  listen: [\"127.0.0.1:0\"]\nadmin:\n  listen: \"127.0.0.1:{port}\"\n"
    ));
    // The DNS TCP loop fails after 1.5 s; serve then stops (and drains).
    let mut app = InProc::with_hook(FAULT_ENV, "dns tcp@1500").start_yaml(&yaml);
    let f = app.cluster_file.clone();
    assert_eq!(health(&f).0, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, took, _) = health(&f);
        assert!(took < Duration::from_secs(1), "health took {took:?}");
        if code != 0 {
            break;
        }
        assert!(Instant::now() < deadline, "health never failed");
        std::thread::sleep(Duration::from_millis(100));
    }
    common::wait_until("serve ended", Duration::from_secs(15), || app.ended());
    let err = app.stop().expect_err("serve ended without an error");
    assert!(err.contains("dns tcp"), "{err}");
}
