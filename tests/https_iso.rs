//! The boot ISOs over HTTPS (issue #30), with real `curl` and `openssl`:
//!
//! - the generated certificate: `curl --cacert` with it gets the same
//!   bytes as plain HTTP for `/boot/<node>.iso` (whole, a range, a suffix
//!   range), the same HEAD headers and ETag (and 304 on `If-None-Match`);
//!   other paths are 404 there; its key file is mode 0600; `/status`,
//!   the metrics, `status` and `check` show its path and the SHA-256 that
//!   `openssl x509 -fingerprint` prints; a restart reuses it;
//! - `http.tls` files are served instead, a reload with new files swaps
//!   them and one whose key does not match is refused (the old one stays);
//! - in network namespaces, the HTTPS route keeps the per-node access rule:
//!   the node, its BMC and `http.bootIsoCidrs` get the ISO, another node
//!   and a host outside get 403; the listener defaults to
//!   `<applianceIP>:8443` when a node has a `bmc`, and the generated
//!   certificate names `applianceIP`.
//!
//! The appliance runs in this process (`common::inproc`), in the
//! network-namespace lab too (inside the server namespace,
//! `InProc::in_netns`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::initramfs::{ISOLINUX_BIN, LDLINUX_C32, rhcos_iso};
use common::inproc::InProc;
use common::{BIN, Netns, have, netns_available, run, run_ok, unique_name};
use crc_appliance::serve::status::ReloadStatus;
use crc_appliance::services::http::status::HttpsStatus;

/// curl, openssl, and what `rhcos_iso` builds with; the reason otherwise.
fn tools() -> Result<(), String> {
    for t in ["curl", "openssl", "xorriso"] {
        if !have(t) {
            return Err(format!("{t} is not installed"));
        }
    }
    for f in [ISOLINUX_BIN, LDLINUX_C32] {
        if !Path::new(f).is_file() {
            return Err(format!(
                "{f} missing (install isolinux and syslinux-common)"
            ));
        }
    }
    Ok(())
}

macro_rules! require_tools {
    () => {
        if let Err(why) = tools() {
            common::note_skip(&format!("SKIPPED {}: {why}", module_path!()));
            return;
        }
    };
}

/// One curl answer.
struct Got {
    code: String,
    headers: String,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<String> {
        let want = format!("{}:", name.to_ascii_lowercase());
        self.headers
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with(&want))
            .map(|l| l[want.len()..].trim().to_string())
    }
}

/// Run curl (`prefix` e.g. `ip netns exec ns`) with `args` and `url`;
/// `None` when curl itself failed (TLS refused, connection refused).
fn curl_in(prefix: &[&str], args: &[&str], url: &str) -> Option<Got> {
    let d = tempfile::tempdir().unwrap();
    let (h, b) = (d.path().join("h"), d.path().join("b"));
    let mut all: Vec<&str> = prefix.to_vec();
    all.extend([
        "curl",
        "-sS",
        "--max-time",
        "20",
        "-D",
        h.to_str().unwrap(),
        "-o",
        b.to_str().unwrap(),
        "-w",
        "%{http_code}",
    ]);
    all.extend_from_slice(args);
    all.push(url);
    let out = Command::new(all[0])
        .args(&all[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    Some(Got {
        code: String::from_utf8_lossy(&out.stdout).into_owned(),
        headers: std::fs::read_to_string(&h).unwrap_or_default(),
        body: std::fs::read(&b).unwrap_or_default(),
    })
}

fn curl(args: &[&str], url: &str) -> Option<Got> {
    curl_in(&[], args, url)
}

/// `openssl x509 -fingerprint -sha256` of `cert`: `AA:BB:…`.
fn openssl_fingerprint(cert: &Path) -> String {
    let out = run_ok(
        "openssl",
        &[
            "x509",
            "-noout",
            "-fingerprint",
            "-sha256",
            "-in",
            cert.to_str().unwrap(),
        ],
    );
    out.trim().rsplit('=').next().unwrap().to_string()
}

/// A self-signed certificate for IP `ip` (`rsa` or `ec` key).
fn ip_cert(cert: &Path, key: &Path, ip: &str, rsa: bool) {
    let kind: &[&str] = if rsa {
        &["-newkey", "rsa:2048"]
    } else {
        &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    };
    let mut args = vec!["req", "-x509"];
    args.extend_from_slice(kind);
    let san = format!("subjectAltName=IP:{ip}");
    args.extend([
        "-nodes",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        cert.to_str().unwrap(),
        "-days",
        "2",
        "-subj",
        "/CN=operator",
        "-addext",
        &san,
    ]);
    run_ok("openssl", &args);
}

/// Role ignition files, the images dir and a live ISO with embed areas
/// under `d`; the ISO's path.
fn content(d: &Path) -> PathBuf {
    std::fs::create_dir_all(d.join("images")).unwrap();
    std::fs::create_dir_all(d.join("ign")).unwrap();
    for role in ["bootstrap", "master", "worker"] {
        std::fs::write(
            d.join(format!("ign/{role}.ign")),
            "{\"ignition\":{\"version\":\"3.2.0\"}}",
        )
        .unwrap();
    }
    rhcos_iso(d, "https", [b"kernel", b"initrd"], 1024).path
}

/// A loopback cluster file in `d` serving HTTP and HTTPS on 127.0.0.1
/// (port 0), plus `http_extra` (indented lines) in its `http` section.
fn loopback_cluster(d: &Path, http_extra: &str) -> PathBuf {
    let iso = content(d);
    let dd = d.display();
    // A real port: `status --cluster` reads it from the file.
    let admin = common::free_port();
    let yaml = common::loopback_cluster_with(&format!(
        "dns: {{ enabled: false }}\n\
         dhcp: {{ enabled: false, leaseFile: \"{dd}/state/leases.json\" }}\n\
         loadBalancer: {{ enabled: false }}\n\
         http:\n  listen: 127.0.0.1:0\n  tlsListen: 127.0.0.1:0\n  imagesDir: \"{dd}/images\"\n  ignitionDir: \"{dd}/ign\"\n{http_extra}\
         admin: {{ listen: \"127.0.0.1:{admin}\" }}\n\
         rhcos: {{ iso: \"{}\" }}\n",
        iso.display()
    ));
    let f = d.join("cluster.yaml");
    std::fs::write(&f, yaml).unwrap();
    f
}

/// The status document's `http.https`: the listener runs.
fn https_status(app: &InProc) -> HttpsStatus {
    let http = app.status().http.expect("an http section");
    http.https.expect("an http.https section")
}

#[test]
fn generated_certificate_serves_the_http_bytes_and_is_kept_across_restarts() {
    require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cluster = loopback_cluster(d, "");
    let cert = d.join("state/test-https-cert.pem");
    let key = d.join("state/test-https-key.pem");
    // `check` says where the certificate will be before it exists.
    let (code, out, err) = run(BIN, &["check", "--cluster", cluster.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "https on 127.0.0.1:0 certificate {} (generated at serve's first start)",
            cert.display()
        )),
        "{out}"
    );

    let mut app = InProc::start_path(&cluster);
    let http = format!("http://{}", app.addr("http"));
    let https = format!("https://{}", app.addr("https"));
    let ca = cert.to_str().unwrap().to_string();
    let tls = |args: &[&str], path: &str| {
        let mut a = vec!["--cacert", ca.as_str()];
        a.extend_from_slice(args);
        curl(&a, &format!("{https}{path}")).expect("curl over https")
    };
    let plain = |args: &[&str], path: &str| curl(args, &format!("{http}{path}")).unwrap();
    assert!(cert.is_file() && key.is_file());
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the key file is private");
    let fp = openssl_fingerprint(&cert);

    // The whole ISO: the same bytes (kargs patched in) and validators.
    let a = plain(&[], "/boot/master-0.iso");
    let b = tls(&[], "/boot/master-0.iso");
    assert_eq!((a.code.as_str(), b.code.as_str()), ("200", "200"));
    assert!(a.body.len() > 100_000, "{}", a.body.len());
    assert!(a.body == b.body, "same bytes over https");
    let etag = a.header("etag").expect("etag");
    assert_eq!(b.header("etag").as_deref(), Some(etag.as_str()));
    // Ranges, as a BMC reads a CD.
    for (range, want) in [
        ("1000-5999", a.body[1000..6000].to_vec()),
        ("-500", a.body[a.body.len() - 500..].to_vec()),
    ] {
        let r = tls(&["-r", range], "/boot/master-0.iso");
        assert_eq!(r.code, "206", "{range}");
        assert!(r.body == want, "range {range}");
        let p = plain(&["-r", range], "/boot/master-0.iso");
        assert_eq!(r.header("content-range"), p.header("content-range"));
    }
    // HEAD and the conditionals.
    let (ha, hb) = (
        plain(&["-I"], "/boot/master-0.iso"),
        tls(&["-I"], "/boot/master-0.iso"),
    );
    assert_eq!(hb.code, "200");
    for h in ["content-length", "etag", "accept-ranges", "content-type"] {
        assert_eq!(ha.header(h), hb.header(h), "{h}");
    }
    let inm = format!("If-None-Match: {etag}");
    assert_eq!(tls(&["-H", &inm], "/boot/master-0.iso").code, "304");
    // Only the ISOs there.
    assert_eq!(plain(&[], "/ignition/master.ign").code, "200");
    for p in [
        "/ignition/master.ign",
        "/master.ign",
        "/boot/boot.ipxe",
        "/images/x",
    ] {
        assert_eq!(tls(&[], p).code, "404", "{p}");
    }
    // Without the certificate, curl refuses the server.
    assert!(curl(&[], &format!("{https}/boot/master-0.iso")).is_none());

    // What an operator reads.
    let st = https_status(&app);
    assert_eq!(st.cert.sha256, fp, "{st:#?}");
    assert!(st.cert.generated, "{st:#?}");
    assert_eq!(st.cert.cert_file, cert);
    assert!(st.handshakes >= 6, "{st:#?}");
    let metrics = || {
        run_ok(
            "curl",
            &["-sS", &format!("http://{}/metrics", app.addr("admin"))],
        )
    };
    let m = metrics();
    assert!(
        m.contains(&format!(
            "crc_appliance_http_tls_certificate_info{{sha256=\"{fp}\",generated=\"true\"}} 1"
        )),
        "{m}"
    );
    // The refused handshake is counted once the server has read curl's alert.
    common::wait_until(
        "the failed handshake counted",
        Duration::from_secs(5),
        || metrics().contains("crc_appliance_http_tls_handshakes_total{result=\"failed\"} 1"),
    );
    let (code, out, err) = run(BIN, &["status", "--cluster", cluster.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "https boot ISOs on {}: certificate {} (generated), SHA-256 {fp}",
            app.addr("https"),
            cert.display()
        )),
        "{out}"
    );
    assert!(app.log().contains(&format!("SHA-256 {fp}")));
    let (_, out, _) = run(BIN, &["check", "--cluster", cluster.to_str().unwrap()]);
    assert!(
        out.contains(&format!("certificate {} SHA-256 {fp}", cert.display())),
        "{out}"
    );

    // A restart keeps it.
    app.stop().expect("serve stops cleanly");
    drop(app);
    let app = InProc::start_path(&cluster);
    assert_eq!(openssl_fingerprint(&cert), fp);
    assert_eq!(https_status(&app).cert.sha256, fp);
    assert!(
        !app.log().contains("generated a self-signed"),
        "{}",
        app.log()
    );
    let https = format!("https://{}", app.addr("https"));
    let again = curl(&["--cacert", &ca], &format!("{https}/boot/master-0.iso")).unwrap();
    assert!(again.body == a.body);
}

/// Reload (as `POST /api/reload` does) and check that the status
/// document counts `n` reload attempts; the outcome.
fn reloaded(app: &InProc, n: u64) -> ReloadStatus {
    let outcome = app.reload();
    let st = app.status().reload;
    assert_eq!(st.attempts, n, "{st:#?}");
    assert_eq!(st, outcome);
    outcome
}

#[test]
fn operator_certificate_is_served_and_a_reload_swaps_it() {
    require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a_cert, a_key) = (d.join("a.pem"), d.join("a.key"));
    let (b_cert, b_key) = (d.join("b.pem"), d.join("b.key"));
    ip_cert(&a_cert, &a_key, "127.0.0.1", true);
    ip_cert(&b_cert, &b_key, "127.0.0.1", false);
    let (cert, key) = (d.join("tls.pem"), d.join("tls.key"));
    std::fs::copy(&a_cert, &cert).unwrap();
    std::fs::copy(&a_key, &key).unwrap();
    let cluster = loopback_cluster(
        d,
        &format!(
            "  tls: {{ certFile: \"{}\", keyFile: \"{}\" }}\n",
            cert.display(),
            key.display()
        ),
    );
    let app = InProc::start_path(&cluster);
    let url = format!("https://{}/boot/worker-0.iso", app.addr("https"));
    let with = |ca: &Path| curl(&["--cacert", ca.to_str().unwrap()], &url);
    assert_eq!(with(&a_cert).unwrap().code, "200");
    assert!(
        with(&b_cert).is_none(),
        "B does not sign what A's key serves"
    );
    let st = https_status(&app);
    assert!(!st.cert.generated, "{st:#?}");
    assert_eq!(st.cert.sha256, openssl_fingerprint(&a_cert));
    assert!(
        !d.join("state/test-https-cert.pem").exists(),
        "nothing generated"
    );

    // New files, same paths: a reload serves them.
    std::fs::copy(&b_cert, &cert).unwrap();
    std::fs::copy(&b_key, &key).unwrap();
    assert!(reloaded(&app, 1).ok);
    assert_eq!(with(&b_cert).unwrap().code, "200");
    assert!(with(&a_cert).is_none());
    assert_eq!(https_status(&app).cert.sha256, openssl_fingerprint(&b_cert));

    // A key that does not match: refused, B stays.
    std::fs::copy(&a_cert, &cert).unwrap();
    let r = reloaded(&app, 2);
    assert!(!r.ok, "{r:#?}");
    let error = r.error.as_deref().unwrap_or_default();
    assert!(error.contains("http.tls"), "{r:#?}");
    assert_eq!(with(&b_cert).unwrap().code, "200");
}

/// `serve` on `cluster` ends before it is ready: its error and its log.
fn refused(cluster: &Path) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    match InProc::try_start_file(dir, cluster.into()) {
        Ok(app) => panic!("serve started; log:\n{}", app.log()),
        Err(refusal) => refusal,
    }
}

#[test]
fn a_broken_certificate_stops_serve_before_it_binds() {
    require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a_cert, a_key) = (d.join("a.pem"), d.join("a.key"));
    let (b_cert, b_key) = (d.join("b.pem"), d.join("b.key"));
    ip_cert(&a_cert, &a_key, "127.0.0.1", false);
    ip_cert(&b_cert, &b_key, "127.0.0.1", false);
    let cluster = loopback_cluster(
        d,
        &format!(
            "  tls: {{ certFile: \"{}\", keyFile: \"{}\" }}\n",
            a_cert.display(),
            b_key.display()
        ),
    );
    let (err, log) = refused(&cluster);
    assert!(err.contains("http.tls"), "{err}");
    assert!(!log.contains("listening for"), "{log}");
}

/// Issue #40 item 9 (audit L5): a private key that group or others can
/// read is refused, as token and password files are: `http.tls.keyFile`
/// by `check` (and so by `serve`), a kept generated key by `serve` and
/// `check`; at 0600 both are accepted. The old code took both silently.
#[test]
fn tls_keys_readable_by_others_are_refused() {
    require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let chmod = |f: &Path, mode: u32| {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let check = |cluster: &Path| {
        let (code, out, err) = run(BIN, &["check", "--cluster", cluster.to_str().unwrap()]);
        (code, format!("{out}{err}"))
    };
    // The generated key, made by a first start, then widened.
    let cluster = loopback_cluster(d, "");
    let key = d.join("state/test-https-key.pem");
    let mut app = InProc::start_path(&cluster);
    app.stop().expect("serve stops cleanly");
    drop(app);
    chmod(&key, 0o644);
    let (code, out) = check(&cluster);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains(&format!("{} has mode 0644", key.display())) && out.contains("chmod 600"),
        "{out}"
    );
    let (err, log) = refused(&cluster);
    assert!(err.contains("has mode 0644"), "{err}");
    assert!(!log.contains("listening for https"), "{log}");
    chmod(&key, 0o600);
    let (code, out) = check(&cluster);
    assert_eq!(code, 0, "{out}");

    // The operator's key.
    let (cert, key) = (d.join("op.pem"), d.join("op.key"));
    ip_cert(&cert, &key, "127.0.0.1", false);
    let cluster = loopback_cluster(
        d,
        &format!(
            "  tls: {{ certFile: \"{}\", keyFile: \"{}\" }}\n",
            cert.display(),
            key.display()
        ),
    );
    chmod(&key, 0o640);
    let (code, out) = check(&cluster);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("http.tls.keyFile") && out.contains("has mode 0640"),
        "{out}"
    );
    chmod(&key, 0o600);
    let (code, out) = check(&cluster);
    assert_eq!(code, 0, "{out}");
}

/// The lab of the access test: the appliance in one namespace
/// (applianceIP 10.67.0.1), clients in another joined by a veth pair.
const APPLIANCE: &str = "10.67.0.1";
const MASTER0: &str = "10.67.0.10";
const WORKER0: &str = "10.67.0.20";
/// master-0's BMC (its `bmc.redfish` host).
const MASTER0_BMC: &str = "10.67.0.60";
/// Inside `http.bootIsoCidrs`.
const BMC_NET: &str = "192.0.2.5";
const OUTSIDE: &str = "198.51.100.5";

#[test]
fn https_isos_follow_the_per_node_access_rule() {
    require_tools!();
    if let Err(why) = netns_available("tis") {
        common::note_skip(&format!("SKIPPED {}: {why}", module_path!()));
        return;
    }
    let base = unique_name("tis");
    let (ifs, ifc) = (format!("{base}s"), format!("{base}c"));
    let srv = Netns::new(format!("{base}srv"));
    let cli = Netns::new(format!("{base}cli"));
    common::veth(&ifs, &srv, &ifc, &cli);
    srv.ip(&["addr", "add", &format!("{APPLIANCE}/24"), "dev", &ifs]);
    srv.ip(&["link", "set", &ifs, "up"]);
    for net in ["192.0.2.0/24", "198.51.100.0/24"] {
        srv.ip(&["route", "add", net, "dev", &ifs]);
    }
    for a in [MASTER0, WORKER0, MASTER0_BMC] {
        cli.ip(&["addr", "add", &format!("{a}/24"), "dev", &ifc]);
    }
    for a in [BMC_NET, OUTSIDE] {
        cli.ip(&["addr", "add", &format!("{a}/24"), "dev", &ifc]);
    }
    cli.ip(&["link", "set", &ifc, "up"]);

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let iso = content(d);
    std::fs::write(d.join("user"), "admin\n").unwrap();
    std::fs::write(d.join("pass"), "secret\n").unwrap();
    std::fs::set_permissions(d.join("pass"), std::fs::Permissions::from_mode(0o600)).unwrap();
    // No tlsListen: master-0's bmc (media auto) turns the listener on at
    // <applianceIP>:8443.
    let yaml = format!(
        r#"name: tis
baseDomain: crc.testing
network: {{ cidr: 10.67.0.0/24, gateway: 10.67.0.254, applianceIP: {APPLIANCE} }}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:43:00:05", ip: 10.67.0.5 }}
  - name: master-0
    role: master
    mac: "52:54:00:43:00:0a"
    ip: {MASTER0}
    bmc: {{ redfish: "http://{MASTER0_BMC}/redfish/v1/Systems/1", usernameFile: user, passwordFile: pass }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:43:00:14", ip: {WORKER0} }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false, leaseFile: "{d}/leases.json" }}
loadBalancer: {{ enabled: false }}
http:
  listen: {APPLIANCE}:8080
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
  bootIsoCidrs: [192.0.2.0/24]
admin:
  listen: 127.0.0.1:0
rhcos:
  iso: {}
"#,
        iso.display(),
        d = d.display(),
    );
    let cluster = d.join("cluster.yaml");
    std::fs::write(&cluster, yaml).unwrap();
    let cert = d.join("tis-https-cert.pem");
    let app = InProc::in_netns(srv.name()).start_file(dir, cluster.clone());
    assert_eq!(app.addr("https").to_string(), format!("{APPLIANCE}:8443"));
    let ns = ["ip", "netns", "exec", cli.name()];
    let get = |from: &str, path: &str| {
        let ca = cert.to_str().unwrap();
        let url = format!("https://{APPLIANCE}:8443{path}");
        curl_in(&ns, &["--cacert", ca, "--interface", from], &url)
            .unwrap_or_else(|| panic!("curl from {from} {path} failed"))
            .code
    };
    for (from, path, want) in [
        (MASTER0, "/boot/master-0.iso", "200"),
        (MASTER0_BMC, "/boot/master-0.iso", "200"),
        (BMC_NET, "/boot/master-0.iso", "200"),
        (WORKER0, "/boot/master-0.iso", "403"),
        (OUTSIDE, "/boot/master-0.iso", "403"),
        (MASTER0_BMC, "/boot/worker-0.iso", "403"),
        (WORKER0, "/boot/worker-0.iso", "200"),
        (OUTSIDE, "/boot/worker-0.iso", "403"),
    ] {
        assert_eq!(get(from, path), want, "{from} {path}");
    }
    // The same answers as the plain route for the same clients.
    let plain = |from: &str| {
        let url = format!("http://{APPLIANCE}:8080/boot/master-0.iso");
        curl_in(&ns, &["--interface", from, "-r", "0-99"], &url)
            .unwrap()
            .code
    };
    assert_eq!(plain(WORKER0), "403");
    assert_eq!(plain(MASTER0), "206");
    assert!(
        app.log()
            .contains("boot iso master-0.iso refused to 10.67.0.20"),
        "{}",
        app.log()
    );
}

/// The cipher suite `openssl s_client` (`extra` options) ends with on
/// `addr`, as it prints it (`Cipher is …`).
fn negotiated_suite(addr: &str, ca: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "s_client",
        "-connect",
        addr,
        "-CAfile",
        ca,
        "-verify_return_error",
    ];
    args.extend_from_slice(extra);
    let (_, out, err) = run("openssl", &args);
    out.lines()
        .find_map(|l| {
            l.split_once("Cipher is ")
                .map(|(_, c)| c.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no cipher in:\n{out}{err}"))
}

/// The server picks the suite, AES-128-GCM first, as Go's and BoringSSL's
/// servers do: OpenSSL, which lists AES-256-GCM first, gets AES-128-GCM
/// over TLS 1.3 and 1.2; a client that offers only ChaCha20 gets it.
#[test]
fn the_server_picks_aes_128_gcm_first_and_chacha20_when_offered_alone() {
    require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let cluster = loopback_cluster(dir.path(), "");
    let app = InProc::start_path(&cluster);
    let addr = app.addr("https").to_string();
    let ca = dir.path().join("state/test-https-cert.pem");
    let ca = ca.to_str().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&[], "TLS_AES_128_GCM_SHA256"),
        (&["-tls1_2"], "ECDHE-ECDSA-AES128-GCM-SHA256"),
        (
            &["-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"],
            "TLS_CHACHA20_POLY1305_SHA256",
        ),
    ];
    for (extra, want) in cases {
        assert_eq!(
            negotiated_suite(&addr, ca, extra),
            want,
            "openssl s_client {extra:?}"
        );
    }
}
