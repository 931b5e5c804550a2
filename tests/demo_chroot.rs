//! README's quick start on "a machine where only Rust and the demo's needs
//! are installed": scripts/demo-chroot.sh runs ./scripts/demo.sh unmodified
//! in a Debian 12 minbase root (debootstrap, plus gcc/libc6-dev, the C
//! toolchain a rustup Rust needs) with the host's rustup toolchain, cargo
//! registry and this repository bind-mounted, in its own network namespace;
//! this test checks what it recorded:
//!
//! - demo.sh installed only its own packages (xorriso, pkg-config,
//!   libvirt-dev) and their libraries: no daemon, no service unit;
//! - the appliance came up and answered README's `dig`/`curl` queries and
//!   `crc-appliance lb status` on loopback in that namespace;
//! - it stopped cleanly on SIGINT (demo.sh's "Stop with Ctrl-C").
//!
//! The binary: demo.sh's own `cargo build --release` inside that root takes
//! ~14 min on 2 busy cores when target/release is cold (measured; it builds
//! there with nothing but gcc/libc6-dev and demo.sh's packages), too slow
//! for CI, so by default the test build (`CARGO_BIN_EXE_crc-appliance`) is
//! copied into the root and demo.sh runs it (`CRC_APPLIANCE_BIN`; run under
//! the root's libraries, so its runtime dependencies are also only what
//! demo.sh installed). `CRC_DEMO_CHROOT_BUILD=1` makes demo.sh build (or,
//! with an up-to-date target/release, reuse) the release binary instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::have;

fn lines(p: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Packages demo.sh may pull in: the three it asks for and what they
/// depend on — libraries (`lib*`: libvirt0, libxml2, libburnia's, …),
/// pkgconf, and readline's data. Anything else (a daemon, a tool, a VM
/// stack) fails the test.
fn allowed(pkg: &str) -> bool {
    const EXACT: &[&str] = &[
        "xorriso",
        "pkg-config",
        "pkgconf",
        "pkgconf-bin",
        "readline-common",
    ];
    let lib = pkg.starts_with("lib")
        && !pkg.starts_with("libvirt-daemon")
        && !pkg.starts_with("libvirt-clients");
    EXACT.contains(&pkg) || lib
}

/// Packages that would mean demo.sh installed a daemon or a VM stack.
fn forbidden(pkg: &str) -> bool {
    pkg.starts_with("libvirt-daemon")
        || pkg.starts_with("qemu")
        || pkg.starts_with("dnsmasq")
        || pkg == "systemd"
        || pkg == "dbus"
        || pkg == "polkitd"
}

fn read(dir: &Path, f: &str) -> String {
    std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

#[test]
fn demo_runs_on_a_bare_debian_with_rust() {
    let test = "demo_runs_on_a_bare_debian_with_rust";
    if !common::is_root() {
        skipped!("SKIPPED {test}: needs root (debootstrap, chroot, mounts, netns)");
        return;
    }
    for tool in [
        "debootstrap",
        "unshare",
        "nsenter",
        "ip",
        "dig",
        "curl",
        "flock",
    ] {
        if !have(tool) {
            skipped!("SKIPPED {test}: {tool} is not installed");
            return;
        }
    }
    let home = std::env::var("HOME").unwrap_or_default();
    for d in [".rustup", ".cargo/bin"] {
        if !Path::new(&home).join(d).is_dir() {
            skipped!("SKIPPED {test}: no ~/{d}: the chroot reuses a rustup-installed Rust");
            return;
        }
    }
    if let Err(why) = common::netns_available("dch") {
        skipped!("SKIPPED {test}: {why}");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/demo-chroot.sh");
    let t0 = Instant::now();
    let mut cmd = std::process::Command::new(&script);
    cmd.arg("--out").arg(out.path());
    let build = std::env::var("CRC_DEMO_CHROOT_BUILD").is_ok_and(|v| v == "1");
    if !build {
        cmd.arg("--bin").arg(common::BIN);
    }
    let mut child = cmd.stdin(std::process::Stdio::null()).spawn().unwrap();
    // Bounded: the script bounds each step; this is the backstop.
    let deadline = t0 + Duration::from_secs(45 * 60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("demo-chroot.sh still running after 45 min");
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let o = out.path();
    let demo_log = std::fs::read_to_string(o.join("demo.log")).unwrap_or_default();
    assert!(
        status.success(),
        "demo-chroot.sh: {status}\ndemo.log:\n{demo_log}\nprefetch.log:\n{}",
        std::fs::read_to_string(o.join("prefetch.log")).unwrap_or_default()
    );
    eprintln!(
        "{test}: {:?} in all; demo.sh up after {} s (apt install{})",
        t0.elapsed(),
        read(o, "build-seconds").trim(),
        if build {
            " + cargo build --release"
        } else {
            ""
        }
    );

    // Only the demo's packages were installed, and no daemon.
    let before = lines(&o.join("dpkg-before.txt"));
    let after = lines(&o.join("dpkg-after.txt"));
    assert!(
        before.contains("gcc") && before.contains("dpkg"),
        "{before:?}"
    );
    assert!(
        before.is_subset(&after),
        "demo.sh removed packages: {:?}",
        before.difference(&after).collect::<Vec<_>>()
    );
    let added: Vec<&String> = after.difference(&before).collect();
    for want in ["xorriso", "libvirt-dev", "libvirt0"] {
        assert!(
            added.iter().any(|p| *p == want),
            "{want} not installed: {added:?}"
        );
    }
    assert!(
        added.iter().any(|p| p.starts_with("pkg")),
        "no pkg-config: {added:?}"
    );
    let bad: Vec<&&String> = added
        .iter()
        .filter(|p| forbidden(p) || !allowed(p))
        .collect();
    assert!(bad.is_empty(), "demo.sh installed {bad:?} (all: {added:?})");
    let units_before = lines(&o.join("units-before.txt"));
    let units_after = lines(&o.join("units-after.txt"));
    let new_units: Vec<&String> = units_after.difference(&units_before).collect();
    assert!(
        new_units.is_empty(),
        "demo.sh installed services: {new_units:?}"
    );

    // README's queries.
    let q = |f: &str| read(o, &format!("q-{f}.txt"));
    let answer = |f: &str| -> String {
        let t = q(f);
        assert!(t.contains("status: NOERROR"), "{f}: {t}");
        t.split(";; ANSWER SECTION:")
            .nth(1)
            .unwrap_or_else(|| panic!("{f}: no answer: {t}"))
            .split("\n\n")
            .next()
            .unwrap_or("")
            .to_string()
    };
    let api = answer("api");
    assert!(
        api.contains("api.demo.crc.testing.") && api.contains("\tA\t127.0.10.1"),
        "{api}"
    );
    let apps = answer("apps");
    assert!(apps.contains("foo.apps.demo.crc.testing."), "{apps}");
    let ptr = answer("ptr");
    assert!(
        ptr.contains("10.10.0.127.in-addr.arpa.") && ptr.contains("master-0.demo.crc.testing."),
        "{ptr}"
    );
    let srv = answer("srv");
    for i in 0..3 {
        assert!(
            srv.contains(&format!("2380 etcd-{i}.demo.crc.testing.")),
            "{srv}"
        );
    }
    let ign = q("ignition");
    assert!(
        ign.starts_with("{\"ignition\"") && ign.contains("master-0.demo.crc.testing"),
        "{ign}"
    );
    let status = q("status");
    assert!(
        status.trim_start().starts_with('{') && status.contains("demo.crc.testing"),
        "{status}"
    );
    let metrics = q("metrics");
    assert!(metrics.contains("# TYPE"), "{metrics}");
    let lb = q("lb-status");
    assert!(
        lb.contains("bootstrap") && lb.contains("master-0") && !lb.contains("exit "),
        "{lb}"
    );

    // Ctrl-C: a clean stop.
    assert_eq!(read(o, "exit-status").trim(), "0", "{demo_log}");
    assert!(demo_log.contains("SIGINT: shutting down"), "{demo_log}");
    assert!(
        demo_log.lines().any(|l| l.ends_with("stopped")),
        "{demo_log}"
    );
}
