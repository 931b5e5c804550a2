//! `crc-appliance bmc` against a real Redfish BMC: sushy-emulator (PyPI
//! `sushy-tools`, pinned) with its libvirt driver on `qemu:///system`,
//! listening on 127.0.0.1 only, with an htpasswd (bcrypt) auth file and
//! `ALLOWED_INSTANCES` limited to the one TCG domain this test defines
//! (unique name, a disk and an empty CD-ROM, no network interface).
//!
//! The node's ISO (`<http base>/boot/<node>.iso`) is served by the
//! appliance itself (`serve` run in this process, `common::inproc`, HTTP on
//! 127.0.0.1; the `bmc` commands are the real binary): a live ISO with the RHCOS
//! layout and a real ISOLINUX (tests/common/initramfs.rs `rhcos_iso`) whose
//! kernel is the host's and whose initramfs prints `/proc/cmdline` on the
//! serial console; sushy downloads it when media is inserted.
//!
//! Checks: `up` inserts our URL (VirtualMedia: Inserted, Image), powers the
//! domain on with the CD-ROM first in boot order, the CD-ROM holds the
//! bytes the appliance served, and the guest boots it and reports a kernel
//! command line with the node's install kargs; `up` again changes nothing; `status` (table and `--json`)
//! shows power and media; wrong credentials, an unknown system and an
//! unreachable BMC each fail with a clear message and change nothing;
//! `eject` empties the drive, `up` then restarts the running node from our
//! ISO; `down` powers off and ejects.
//!
//! Needs root, virsh + libvirtd (+ qemu-system-x86_64), xorriso, ISOLINUX,
//! a host kernel in /boot, Debian's
//! python3 with venv and python3-libvirt, and PyPI for the first run (the
//! venv is cached under target/tmp); skipped with a reason otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "bmc/sushy.rs"]
mod sushy;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::initramfs::{ISOLINUX_BIN, rhcos_iso};
use common::inproc::InProc;
use common::qemu::{CMDLINE_MARK, cmdline_initramfs_then, host_kernel, tail, wait_for};
use common::{BIN, free_port, run, wait_until};
use sushy::{
    Libvirt, URI, cdrom, domain_xml, make_certs, redfish, start_emulator, sushy_venv, virsh_ok,
};

const NODE: &str = "metal-0";

fn bmc(cluster: &Path, args: &[&str]) -> (i32, String, String) {
    let mut a = vec!["--cluster", cluster.to_str().unwrap(), "bmc"];
    a.extend_from_slice(args);
    run(BIN, &a)
}

/// What must not change when a command fails: the domain's run (its id),
/// the CD-ROM and the virtual media as sushy reports it.
fn snapshot(domain: &str, base: &str, vmedia: &str) -> (String, String, String, String) {
    let m = redfish(base, vmedia);
    (
        virsh_ok(&["domid", domain]),
        cdrom(domain),
        m["Inserted"].to_string(),
        m["Image"].to_string(),
    )
}

fn cluster_file(dir: &Path, file: &str, redfish: &str, password_file: &str, http: u16) -> PathBuf {
    write_cluster(dir, file, redfish, password_file, http, "", false)
}

/// A cluster file with one bare-metal node whose BMC is `redfish` (plus
/// `bmc_extra` in its mapping, e.g. `, insecure: true`); HTTP on
/// 127.0.0.1:`http` serves `<dir>/rhcos.iso` per node; with `serve`, the
/// node has `startOnServe`.
fn write_cluster(
    dir: &Path,
    file: &str,
    redfish: &str,
    password_file: &str,
    http: u16,
    bmc_extra: &str,
    serve: bool,
) -> PathBuf {
    let start = if serve { ", startOnServe: true" } else { "" };
    let node = format!(
        "  - name: {NODE}\n    role: worker\n    mac: \"52:54:00:14:00:1e\"\n    ip: 127.0.20.30\n    \
         kargs: [crc.node={NODE}]\n    \
         bmc: {{ redfish: \"{redfish}\", usernameFile: user, passwordFile: {password_file}{bmc_extra}{start} }}\n"
    );
    let d = dir.display();
    let sections = format!(
        "http:\n  listen: 127.0.0.1:{http}\n  imagesDir: \"{d}/images\"\n  ignitionDir: \"{d}/ign\"\n\
         rhcos: {{ iso: \"{d}/rhcos.iso\" }}\n\
         dns: {{ enabled: false }}\ndhcp: {{ enabled: false, leaseFile: \"{d}/leases.json\" }}\n\
         loadBalancer: {{ enabled: false }}\nadmin: {{ listen: \"127.0.0.1:0\" }}\n"
    );
    let path = dir.join(file);
    std::fs::write(&path, common::loopback_cluster_with_nodes(&node, &sections)).unwrap();
    path
}

/// A second sushy-emulator with TLS on the same domain: `bmc status`
/// works with `caFile` and with `insecure: true`, and fails clearly with a
/// CA that did not sign the BMC's certificate.
fn tls_checks(d: &Path, venv: &Path, name: &str, http_port: u16, url: &str) {
    make_certs(d);
    let port = free_port();
    let conf = std::fs::read_to_string(d.join("emu.conf"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("SUSHY_EMULATOR_LISTEN_PORT"))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        + &format!(
            "SUSHY_EMULATOR_LISTEN_PORT = {port}\nSUSHY_EMULATOR_SSL_CERT = '{}'\nSUSHY_EMULATOR_SSL_KEY = '{}'\n",
            d.join("tls.pem").display(),
            d.join("tls.key").display()
        );
    std::fs::write(d.join("emu-tls.conf"), conf).unwrap();
    let _emu = start_emulator(venv, &d.join("emu-tls.conf"), &d.join("emu-tls.log"));
    let base = format!("https://127.0.0.1:{port}");
    let ca = d.join("ca.pem");
    wait_until(
        "sushy-emulator answering on TLS",
        Duration::from_secs(60),
        || {
            run(
                "curl",
                &[
                    "-sf",
                    "--cacert",
                    ca.to_str().unwrap(),
                    "-u",
                    "admin:secret",
                    &format!("{base}/redfish/v1/Systems"),
                ],
            )
            .0 == 0
        },
    );
    let system = format!("{base}/redfish/v1/Systems/{name}");
    for (file, extra) in [
        ("tls-ca.yaml", ", caFile: ca.pem"),
        ("tls-insecure.yaml", ", insecure: true"),
    ] {
        let f = write_cluster(d, file, &system, "pass", http_port, extra, false);
        let (code, out, err) = bmc(&f, &["status"]);
        assert_eq!(code, 0, "{file}: {out}{err}");
        let row = out
            .lines()
            .find(|l| l.starts_with(NODE))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(row.contains("On") && row.contains(url), "{file}: {out}");
    }
    let f = write_cluster(
        d,
        "tls-wrong-ca.yaml",
        &system,
        "pass",
        http_port,
        ", caFile: tls.pem",
        false,
    );
    let (code, out, err) = bmc(&f, &["up"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!("BMC of {NODE} unreachable")) && err.contains("TLS handshake failed"),
        "{err}"
    );
}

#[test]
fn bmc_boots_a_libvirt_domain_through_sushy_emulator() {
    require!(common::is_root(), "needs root (qemu:///system)");
    require_tools!(
        "virsh",
        "libvirtd",
        "qemu-system-x86_64",
        "xorriso",
        "curl",
        "openssl"
    );
    require!(
        Path::new(ISOLINUX_BIN).is_file(),
        "ISOLINUX (Debian isolinux) is not installed"
    );
    let Some(kernel) = host_kernel() else {
        skipped!("SKIPPED bmc: no kernel in /boot for the guest");
        return;
    };
    require!(
        Path::new("/usr/bin/python3").is_file(),
        "Debian's /usr/bin/python3 is not installed"
    );
    let venv = match sushy_venv() {
        Ok(v) => v,
        Err(why) => {
            skipped!("SKIPPED bmc: {why}");
            return;
        }
    };
    let _daemons = match common::libvirtd::start() {
        Ok(d) => d,
        Err(why) => {
            skipped!("SKIPPED bmc: {why}");
            return;
        }
    };

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // qemu runs as libvirt-qemu: it must reach the disk and the pool.
    std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    // A live ISO with the RHCOS layout and ISOLINUX; the guest prints its
    // kernel command line and stays up (so power state is the BMC's doing).
    let files = [
        std::fs::read(&kernel).unwrap(),
        cmdline_initramfs_then("exec /bin/busybox sleep 3600"),
    ];
    let built = rhcos_iso(d, "rhcos-bmc", [&files[0], &files[1]], 1024);
    std::fs::rename(&built.path, d.join("rhcos.iso")).unwrap();
    for sub in ["images", "ign"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    let http_port = free_port();
    let url = format!("http://127.0.0.1:{http_port}/boot/{NODE}.iso");

    // The domain and the pool sushy uploads inserted images to.
    let name = format!("crcbmc-{}", std::process::id());
    std::fs::create_dir_all(d.join("pool")).unwrap();
    std::fs::write(d.join("disk.img"), vec![0u8; 1 << 20]).unwrap();
    std::fs::write(
        d.join("dom.xml"),
        domain_xml(&name, &d.join("disk.img"), &d.join("serial.log")),
    )
    .unwrap();
    let lv = Libvirt {
        domain: name.clone(),
        pool: name.clone(),
    };
    virsh_ok(&[
        "pool-create-as",
        &lv.pool,
        "dir",
        "--target",
        d.join("pool").to_str().unwrap(),
    ]);
    virsh_ok(&["define", d.join("dom.xml").to_str().unwrap()]);
    let uuid = virsh_ok(&["domuuid", &name]);

    // sushy-emulator on loopback with Basic auth (bcrypt htpasswd).
    let hash = common::run_ok(
        venv.join("bin/python").to_str().unwrap(),
        &[
            "-c",
            "import bcrypt; print(bcrypt.hashpw(b'secret', bcrypt.gensalt()).decode())",
        ],
    );
    std::fs::write(d.join("htpasswd"), format!("admin:{}\n", hash.trim())).unwrap();
    let bmc_port = free_port();
    std::fs::write(
        d.join("emu.conf"),
        format!(
            "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = {bmc_port}\n\
             SUSHY_EMULATOR_AUTH_FILE = '{}'\nSUSHY_EMULATOR_LIBVIRT_URI = '{URI}'\n\
             SUSHY_EMULATOR_ALLOWED_INSTANCES = ['{name}', '{uuid}']\n\
             SUSHY_EMULATOR_STORAGE_POOL = '{name}'\n",
            d.join("htpasswd").display()
        ),
    )
    .unwrap();
    let _emu = start_emulator(&venv, &d.join("emu.conf"), &d.join("emu.log"));
    let base = format!("http://127.0.0.1:{bmc_port}");
    wait_until("sushy-emulator answering", Duration::from_secs(60), || {
        run(
            "curl",
            &[
                "-sf",
                "-u",
                "admin:secret",
                &format!("{base}/redfish/v1/Systems"),
            ],
        )
        .0 == 0
    });
    let vmedia = format!("/redfish/v1/Systems/{uuid}/VirtualMedia/Cd");

    // Credentials and cluster files.
    std::fs::write(d.join("user"), "admin\n").unwrap();
    for (f, p) in [("pass", "secret\n"), ("wrong-pass", "not-the-password\n")] {
        std::fs::write(d.join(f), p).unwrap();
        std::fs::set_permissions(
            d.join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
    }
    let system = format!("{base}/redfish/v1/Systems/{name}");
    let good = cluster_file(d, "cluster.yaml", &system, "pass", http_port);
    // The appliance serves /boot/<node>.iso (the BMC CLI runs beside it).
    let server = InProc::start_path(&good);

    let (code, out, err) = run(BIN, &["--cluster", good.to_str().unwrap(), "check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("bmc 1 {NODE}\n")),
        "check names the BMC nodes: {out}"
    );

    // Before: off, nothing inserted.
    let (code, out, err) = bmc(&good, &["status"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(NODE) && out.contains("Off") && out.contains("empty"),
        "{out}"
    );
    assert_eq!(virsh_ok(&["domstate", &name]), "shut off");

    // up: insert, boot from CD, power on.
    let (code, out, err) = bmc(&good, &["up", NODE]);
    assert_eq!(code, 0, "bmc up: {out}{err}");
    assert!(out.contains(&format!("{NODE}: inserted {url}")), "{out}");
    assert!(out.contains(&format!("{NODE}: powered on")), "{out}");
    let m = redfish(&base, &vmedia);
    assert_eq!(m["Inserted"], true, "{m}");
    assert_eq!(m["Image"], url.as_str(), "{m}");
    assert_eq!(virsh_ok(&["domstate", &name]), "running");
    let cd = cdrom(&name);
    assert!(
        cd.contains("<boot order='1'/>"),
        "the CD-ROM boots first: {cd}"
    );
    let src = cd
        .split("source file='")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .unwrap_or_else(|| panic!("the CD-ROM has a medium: {cd}"));
    let served = d.join("served.iso");
    common::run_ok("curl", &["-sSf", "-o", served.to_str().unwrap(), &url]);
    assert_eq!(
        std::fs::read(src).unwrap(),
        std::fs::read(&served).unwrap(),
        "the CD-ROM holds the ISO served at {url}"
    );
    let sys = redfish(&base, &format!("/redfish/v1/Systems/{uuid}"));
    assert_eq!(sys["Boot"]["BootSourceOverrideTarget"], "Cd", "{sys}");
    // The guest boots the served ISO (SeaBIOS, ISOLINUX, TCG) and its
    // kernel command line carries this node's install kargs.
    let serial = d.join("serial.log");
    let Some(cmdline) = wait_for(&serial, CMDLINE_MARK, Duration::from_secs(420)) else {
        panic!(
            "the guest did not report its kernel command line; serial log:\n{}\nappliance:\n{}",
            tail(&serial, 3000),
            server.log()
        );
    };
    // The install timeline shows the ISO fetch (not a serve-side power-on:
    // the CLI did that).
    let tl = server.timeline_row(NODE);
    assert!(tl.boot_iso.is_some(), "{tl:?}");
    assert!(tl.bmc_power_on.is_none(), "{tl:?}");
    for want in [
        format!("coreos.inst.ignition_url=http://127.0.0.1:{http_port}/ignition/{NODE}.ign"),
        "coreos.inst.install_dev=".to_string(),
        format!("crc.node={NODE}"),
        built.default_kargs.clone(),
    ] {
        assert!(cmdline.contains(&want), "{want:?} not in {cmdline}");
    }

    // up again: nothing changes (same run of the domain, same medium).
    let before = snapshot(&name, &base, &vmedia);
    let (code, out, err) = bmc(&good, &["up"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), format!("{NODE}: nothing to do"));
    assert_eq!(snapshot(&name, &base, &vmedia), before);

    // status: table and JSON.
    let (code, out, err) = bmc(&good, &["status"]);
    assert_eq!(code, 0, "{out}{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with(NODE))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        row.contains("On")
            && row.contains("Cd (")
            && row.contains("inserted")
            && row.contains(&url),
        "{out}"
    );
    let (code, out, _) = bmc(&good, &["status", "--json"]);
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j[0]["node"], NODE);
    assert_eq!(j[0]["power"], "On");
    assert_eq!(j[0]["inserted"], true);
    assert_eq!(j[0]["image"], url.as_str());

    // The same BMC over TLS (rustls): verified against its CA, insecure,
    // and refused with the wrong CA.
    tls_checks(d, &venv, &name, http_port, &url);

    // Failures: a clear message each, and nothing changes.
    let wrong = cluster_file(d, "wrong.yaml", &system, "wrong-pass", http_port);
    let nosys = cluster_file(
        d,
        "nosys.yaml",
        &format!("{base}/redfish/v1/Systems/{name}-nope"),
        "pass",
        http_port,
    );
    let dead_port = free_port();
    let dead = cluster_file(
        d,
        "dead.yaml",
        &format!("http://127.0.0.1:{dead_port}/redfish/v1/Systems/{name}"),
        "pass",
        http_port,
    );
    for (file, action, wants) in [
        (
            &wrong,
            "up",
            vec![
                format!("wrong credentials for BMC of {NODE}"),
                "Incorrect username or password".into(),
            ],
        ),
        (
            &wrong,
            "down",
            vec![format!("wrong credentials for BMC of {NODE}")],
        ),
        (
            &nosys,
            "up",
            vec![
                format!("no such system at {base}/redfish/v1/Systems/{name}-nope"),
                format!("it has: {name} (/redfish/v1/Systems/{uuid})"),
            ],
        ),
        (
            &dead,
            "down",
            vec![
                format!("BMC of {NODE} unreachable"),
                "Connection refused".into(),
            ],
        ),
    ] {
        let (code, out, err) = bmc(file, &[action]);
        assert_eq!(code, 1, "{file:?} {action}: {out}{err}");
        for w in wants {
            assert!(err.contains(&w), "{file:?} {action}: want {w:?} in: {err}");
        }
        assert_eq!(
            snapshot(&name, &base, &vmedia),
            before,
            "{file:?} {action} changed something"
        );
    }

    // eject: empty drive, next boot from disk; up then restarts from our ISO.
    let (code, out, err) = bmc(&good, &["eject", NODE]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ejected the virtual media"), "{out}");
    assert_eq!(redfish(&base, &vmedia)["Inserted"], false);
    assert_eq!(
        virsh_ok(&["domstate", &name]),
        "running",
        "eject leaves power alone"
    );
    let id = virsh_ok(&["domid", &name]);
    let (code, out, err) = bmc(&good, &["up", NODE]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("{NODE}: restarted")), "{out}");
    assert_ne!(virsh_ok(&["domid", &name]), id, "a new run of the domain");
    assert_eq!(redfish(&base, &vmedia)["Image"], url.as_str());

    // down: off and ejected; again: nothing to do.
    let (code, out, err) = bmc(&good, &["down"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("powered off") && out.contains("ejected"),
        "{out}"
    );
    assert_eq!(virsh_ok(&["domstate", &name]), "shut off");
    assert_eq!(redfish(&base, &vmedia)["Inserted"], false);
    let (code, out, _) = bmc(&good, &["down"]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("{NODE}: nothing to do").as_str())
    );

    // serve with bmc.startOnServe boots the node once it is ready (the
    // first appliance gives up the HTTP port to it).
    drop(server);
    let serve = write_cluster(d, "serve.yaml", &system, "pass", http_port, "", true);
    let app = InProc::start_path(&serve);
    app.wait_log(
        &format!("bmc: {NODE}: powered on"),
        Duration::from_secs(120),
    );
    assert!(
        app.log().contains(&format!("bmc: {NODE}: inserted {url}")),
        "{}",
        app.log()
    );
    assert!(
        !app.log().contains("secret"),
        "credentials in the log: {}",
        app.log()
    );
    assert_eq!(virsh_ok(&["domstate", &name]), "running");
    assert_eq!(redfish(&base, &vmedia)["Image"], url.as_str());
    // The install timeline: serve powered the node on through its BMC, and
    // the BMC fetched the boot ISO.
    wait_until(
        "the BMC steps in the timeline",
        Duration::from_secs(60),
        || {
            let tl = app.timeline_row(NODE);
            tl.bmc_power_on.is_some() && tl.boot_iso.is_some()
        },
    );
    drop(app);
    let (code, out, err) = bmc(&good, &["down"]);
    assert_eq!(code, 0, "{out}{err}");
    drop(lv);
}

/// `check` reports every `nodes[].bmc` problem at once, with its path
/// (no root, no emulator needed).
#[test]
fn check_reports_every_bmc_problem_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("user"), "admin\n").unwrap();
    std::fs::write(d.join("pass"), "secret\n").unwrap(); // mode 0644: refused
    let node = "  - name: metal-0\n    role: worker\n    mac: \"52:54:00:14:00:1e\"\n    ip: 127.0.20.30\n    \
                bmc: { redfish: \"https://10.0.0.9/redfish/v1/Managers/1\", usernameFile: nouser, passwordFile: pass, \
                insecure: true, caFile: ca.pem }\n";
    let f = d.join("cluster.yaml");
    std::fs::write(&f, common::loopback_cluster_with_nodes(node, "")).unwrap();
    let (code, out, err) = run(BIN, &["--cluster", f.to_str().unwrap(), "check"]);
    assert_eq!(code, 78, "{out}{err}");
    for want in [
        "nodes[5].bmc.redfish: \"https://10.0.0.9/redfish/v1/Managers/1\" must name one system",
        "nodes[5].bmc.usernameFile: ",
        "nodes[5].bmc.passwordFile: ",
        "chmod 600",
        "nodes[5].bmc.caFile: ",
    ] {
        assert!(err.contains(want), "want {want:?} in: {err}");
    }
    let (code, _, err) = run(BIN, &["--cluster", f.to_str().unwrap(), "bmc", "status"]);
    assert_eq!(code, 78, "an invalid file stops bmc too: {err}");
}
