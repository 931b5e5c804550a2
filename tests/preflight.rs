//! `crc-appliance preflight`: busy ports named with their owning process
//! (sockets held by this test and by a real `python3 -m http.server` on
//! loopback), the ISO layout, ignition files, and `serve` logging findings
//! (`serve` run in this process, `common::inproc`: its log is the point,
//! not the process).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::inproc::InProc;
use common::{BIN, have, only, run};

const IGN: &str = r#"{"ignition":{"version":"3.2.0"}}"#;

/// A directory with images/ and ign/ (all three ignition files valid).
fn dirs() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("images")).unwrap();
    std::fs::create_dir_all(d.path().join("ign")).unwrap();
    for r in ["bootstrap", "master", "worker"] {
        std::fs::write(d.path().join(format!("ign/{r}.ign")), IGN).unwrap();
    }
    d
}

fn http_section(d: &Path, listen: &str) -> String {
    format!(
        "http:\n  listen: {listen}\n  imagesDir: {0}/images\n  ignitionDir: {0}/ign\n",
        d.display()
    )
}

fn preflight(d: &Path, yaml: &str) -> (i32, String) {
    let f = d.join("cluster.yaml");
    std::fs::write(&f, yaml).unwrap();
    let (code, out, err) = run(BIN, &["preflight", "--cluster", f.to_str().unwrap()]);
    (code, format!("{out}{err}"))
}

fn my_comm() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn clean_host_passes() {
    let d = dirs();
    let (code, out) = preflight(d.path(), &only(&http_section(d.path(), "127.0.20.1:0")));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("preflight: ok"), "{out}");
}

#[test]
fn busy_tcp_port_names_the_owner() {
    let d = dirs();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (code, out) = preflight(
        d.path(),
        &only(&http_section(d.path(), &format!("127.0.0.1:{port}"))),
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("http wants {port}/tcp")), "{out}");
    let owner = format!("{} (pid {})", my_comm(), std::process::id());
    assert!(out.contains(&owner), "expected {owner:?} in {out}");
    assert!(out.contains("fix: stop that process"), "{out}");
}

#[test]
fn busy_udp_port_on_wildcard_conflicts_with_a_specific_address() {
    let d = dirs();
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    let port = s.local_addr().unwrap().port();
    let yaml = only(&format!(
        "{}dns:\n  listen: [\"127.0.20.1:{port}\"]\n",
        http_section(d.path(), "127.0.20.1:0")
    ));
    let (code, out) = preflight(d.path(), &yaml);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("dns wants {port}/udp")), "{out}");
    assert!(out.contains(&format!("0.0.0.0:{port}")), "{out}");
    assert!(
        out.contains(&format!("pid {}", std::process::id())),
        "{out}"
    );
}

/// A real other process: python3's HTTP server on loopback.
#[test]
fn port_held_by_python_http_server() {
    if !have("python3") {
        skipped!("SKIPPED port_held_by_python_http_server: python3 not installed");
        return;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = dirs();
    let mut child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
        ])
        .current_dir(d.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    common::wait_until("python3 http.server", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let (code, out) = preflight(
        d.path(),
        &only(&http_section(d.path(), &format!("127.0.0.1:{port}"))),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("{port}/tcp")), "{out}");
    assert!(out.contains("python3"), "{out}");
    assert!(out.contains(&format!("pid {}", child.id())), "{out}");
}

#[test]
fn missing_and_invalid_ignition_files() {
    let d = dirs();
    std::fs::write(d.path().join("ign/master.ign"), "not json {").unwrap();
    std::fs::write(d.path().join("ign/bootstrap.ign"), r#"{"a": 1}"#).unwrap();
    std::fs::remove_file(d.path().join("ign/worker.ign")).unwrap();
    let (code, out) = preflight(d.path(), &only(&http_section(d.path(), "127.0.20.1:0")));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("master.ign: not JSON"), "{out}");
    assert!(
        out.contains("bootstrap.ign: JSON but not an ignition config"),
        "{out}"
    );
    assert!(out.contains("worker.ign: No such file"), "{out}");
    assert!(
        out.contains("openshift-install create ignition-configs"),
        "{out}"
    );
    assert!(out.contains("preflight: 3 problem(s)"), "{out}");
}

fn libvirt_yaml(d: &Path, iso: &Path) -> String {
    let pid = std::process::id() % 100000;
    only(&format!(
        "{}rhcos:\n  iso: {}\nlibvirt:\n  uri: \"test:///default\"\n  pool: {{ name: pf-{pid}, path: {}/pool }}\n  \
         network: {{ name: pf-{pid}, bridge: pf{pid} }}\n",
        http_section(d, "127.0.20.1:0"),
        iso.display(),
        d.display()
    ))
}

fn make_iso(dir: &Path, files: &[&str]) -> PathBuf {
    let tree = dir.join("tree");
    for f in files {
        let p = tree.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }
    let iso = dir.join("live.iso");
    let (code, o, e) = run(
        "xorriso",
        &[
            "-as",
            "mkisofs",
            "-quiet",
            "-R",
            "-o",
            iso.to_str().unwrap(),
            tree.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "xorriso: {o}{e}");
    iso
}

#[test]
fn missing_iso_is_reported_with_the_download_hint() {
    let d = dirs();
    let (code, out) = preflight(
        d.path(),
        &libvirt_yaml(d.path(), &d.path().join("nope.iso")),
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("WARN iso: rhcos.iso"), "{out}");
    assert!(out.contains("nope.iso: No such file"), "{out}");
    assert!(out.contains("print-stream-json"), "{out}");
    // The kvm check ran and named the CPU model either way.
    assert!(
        out.contains("CPU host-passthrough") || out.contains("Nehalem"),
        "{out}"
    );
}

#[test]
fn iso_layout_is_checked() {
    if !have("xorriso") {
        skipped!("SKIPPED iso_layout_is_checked: xorriso not installed");
        return;
    }
    let d = dirs();
    let iso = make_iso(
        d.path(),
        &["images/pxeboot/vmlinuz", "images/pxeboot/initrd.img"],
    );
    let (_, out) = preflight(d.path(), &libvirt_yaml(d.path(), &iso));
    assert!(
        out.contains("is not an RHCOS live ISO: missing images/pxeboot/rootfs.img"),
        "{out}"
    );
    std::fs::remove_file(&iso).unwrap();
    let iso = make_iso(d.path(), &["images/pxeboot/rootfs.img"]);
    let (_, out) = preflight(d.path(), &libvirt_yaml(d.path(), &iso));
    assert!(!out.contains("WARN iso"), "{out}");
    // The pool dir does not exist yet; its parent is writable: no finding.
    assert!(!out.contains("WARN pool"), "{out}");
}

#[test]
fn unwritable_pool_is_reported() {
    // /proc refuses new files even for root.
    let d = dirs();
    let f = d.path().join("cluster.yaml");
    let yaml = libvirt_yaml(d.path(), &d.path().join("x.iso"))
        .replace(&format!("{}/pool", d.path().display()), "/proc/pool");
    std::fs::write(&f, yaml).unwrap();
    let (_, out, err) = run(BIN, &["preflight", "--cluster", f.to_str().unwrap()]);
    assert!(out.contains("WARN pool"), "{out}{err}");
}

/// On a host with SELinux labels the pool dir must be `virt_image_t` (as
/// /var/lib/libvirt/images is). The label is set as an xattr, which ext4
/// keeps for root without SELinux; a filesystem that refuses it skips.
#[test]
fn pool_selinux_type_is_checked() {
    require!(common::is_root(), "needs root (security.* xattrs)");
    let d = dirs();
    let pool = d.path().join("pool");
    std::fs::create_dir_all(&pool).unwrap();
    let f = d.path().join("cluster.yaml");
    std::fs::write(&f, libvirt_yaml(d.path(), &d.path().join("x.iso"))).unwrap();
    let label = |ctx: &str| {
        run(
            "setfattr",
            &["-n", "security.selinux", "-v", ctx, pool.to_str().unwrap()],
        )
    };
    if !common::have("setfattr") || label("system_u:object_r:var_t:s0").0 != 0 {
        skipped!("SKIPPED pool_selinux_type_is_checked: cannot set security.selinux here");
        return;
    }
    let (_, out, err) = run(BIN, &["preflight", "--cluster", f.to_str().unwrap()]);
    assert!(
        out.contains("SELinux type var_t") && out.contains("semanage fcontext -a -t virt_image_t"),
        "{out}{err}"
    );
    assert_eq!(label("system_u:object_r:virt_image_t:s0").0, 0);
    let (_, out, _) = run(BIN, &["preflight", "--cluster", f.to_str().unwrap()]);
    assert!(!out.contains("SELinux"), "{out}");
}

#[test]
fn serve_logs_preflight_findings() {
    let d = dirs();
    std::fs::remove_file(d.path().join("ign/worker.ign")).unwrap();
    let yaml = only(&http_section(d.path(), "127.0.20.1:0"));
    let app = InProc::start_yaml(&yaml);
    app.wait_log("preflight ignition", Duration::from_secs(10));
    assert!(app.log().contains("worker.ign"), "{}", app.log());
}

#[test]
fn busy_tftp_port_is_reported_and_loopback_tftp_not_opened() {
    let d = dirs();
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = s.local_addr().unwrap().port();
    let yaml = only(&format!(
        "{}pxe:\n  tftpListen: 127.0.0.1:{port}\n  tftpRoot: {}/images\n",
        http_section(d.path(), "127.0.20.1:0"),
        d.path().display()
    ));
    let (code, out) = preflight(d.path(), &yaml);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("tftp wants {port}/udp")), "{out}");
    // A loopback-only TFTP listener is not opened in the firewall; on a
    // routable address it is.
    let f = d.path().join("cluster.yaml");
    std::fs::write(
        &f,
        yaml.replace(&format!("127.0.0.1:{port}"), "127.0.20.1:69"),
    )
    .unwrap();
    let (code, xml, err) = run(
        BIN,
        &[
            "firewall",
            "print",
            "--xml",
            "--cluster",
            f.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        !xml.contains("port=\"69\""),
        "127.0.20.1 is loopback: {xml}"
    );
}

#[test]
fn missing_rhcos_pxe_files_are_reported() {
    let d = dirs();
    std::fs::write(d.path().join("vmlinuz"), b"k").unwrap();
    let p = d.path().display();
    let yaml = only(&format!(
        "{}rhcos:\n  kernel: {p}/vmlinuz\n  initramfs: {p}/initrd.img\n  rootfs: {p}/rootfs.img\n",
        http_section(d.path(), "127.0.20.1:0")
    ));
    let (code, out) = preflight(d.path(), &yaml);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("initrd.img: No such file"), "{out}");
    assert!(out.contains("rootfs.img: No such file"), "{out}");
    assert!(!out.contains("vmlinuz:"), "{out}");
    assert!(out.contains("preflight: 2 problem(s)"), "{out}");
}

/// A pointer config as `openshift-install create ignition-configs` writes
/// it: merge from `source`, trust the PEM in `ca` (a base64 data URL).
fn pointer(source: &str, ca_pem: &[u8]) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        r#"{{"ignition":{{"config":{{"merge":[{{"source":"{source}"}}]}},"security":{{"tls":{{"certificateAuthorities":[{{"source":"data:text/plain;charset=utf-8;base64,{ca}"}}]}}}},"version":"3.2.0"}}}}"#
    )
}

/// `preflight` checks the role pointer configs against this cluster (their
/// merge source is `api-int.<cluster>:22623/config/<role>`, their CA
/// parses) and warns when the files are older than 20 h (their
/// certificates expire at 24 h). A `master.ign` of another cluster used to
/// pass as "ok".
#[test]
fn pointer_configs_must_point_at_this_cluster_and_be_fresh() {
    require_tools!("openssl", "touch");
    let d = dirs();
    let (cert, key) = (d.path().join("ca.crt"), d.path().join("ca.key"));
    common::self_signed_cert(&cert, &key, "root-ca");
    let pem = std::fs::read(&cert).unwrap();
    let ign = d.path().join("ign");
    let yaml = only(&http_section(d.path(), "127.0.20.1:0"));
    let domain = "test.crc.testing";
    std::fs::write(
        ign.join("master.ign"),
        pointer(
            "https://api-int.othercluster.crc.testing:22623/config/master",
            &pem,
        ),
    )
    .unwrap();
    std::fs::write(
        ign.join("worker.ign"),
        pointer(
            &format!("https://api-int.{domain}:22623/config/worker"),
            b"not a certificate",
        ),
    )
    .unwrap();
    let (code, out) = preflight(d.path(), &yaml);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "master.ign: merges https://api-int.othercluster.crc.testing:22623/config/master"
        ) && out.contains(&format!("https://api-int.{domain}:22623/config/master")),
        "{out}"
    );
    assert!(
        out.contains("worker.ign: security.tls.certificateAuthorities[0]"),
        "{out}"
    );
    // Both right: ok.
    for role in ["master", "worker"] {
        std::fs::write(
            ign.join(format!("{role}.ign")),
            pointer(
                &format!("https://api-int.{domain}:22623/config/{role}"),
                &pem,
            ),
        )
        .unwrap();
    }
    let (code, out) = preflight(d.path(), &yaml);
    assert_eq!(code, 0, "{out}");
    // 21 hours old: a warning with the age.
    let old = ign.join("bootstrap.ign");
    common::run_ok("touch", &["-d", "21 hours ago", old.to_str().unwrap()]);
    let (code, out) = preflight(d.path(), &yaml);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("bootstrap.ign: written 21 h ago"), "{out}");
}
