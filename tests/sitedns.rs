//! The site's DNS (issue #38 item 3), end to end with the real servers:
//! - `render site-dns bind|unbound|dnsmasq`: BIND (`named`), Unbound and
//!   dnsmasq, each started with the rendered stanza as a validating or
//!   rebind-filtering resolver, resolve api, api-int, a `*.apps` name and
//!   a node's PTR through the appliance, with the appliance's own answers;
//!   `render site-dns windows` is compared with a golden file;
//! - `dns.transfer`/`dns.notify`: BIND as a secondary copies the zones
//!   (its IXFR gets a full answer), gets a NOTIFY after a reload that
//!   changed the zone, and moves to the new serial well before its SOA
//!   refresh (an hour) would have; an AXFR from an address outside
//!   `dns.transfer` is REFUSED, from inside it is the whole zone.
//!
//! Everything runs inside a network namespace of its own with only `lo`
//! up (the appliance in-process, `InProc::in_netns`, on 127.0.20.1, the resolvers on 127.0.0.1 at high
//! ports), so a resolver's root priming or DNSSEC fetches cannot leave
//! the machine. BIND and Unbound are the Debian packages extracted (not
//! installed: installing them starts their services) by scripts/prereqs.sh.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::inproc::InProc;
use common::{BIN, Netns, run, run_ok, unique_name, wait_until};

const EXTRACT: &str = "/var/cache/crc-appliance-tests/extract";
const APPLIANCE_DNS: &str = "127.0.20.1:5300";
const DOMAIN: &str = "test.crc.testing";
/// The root zone's KSK-2017 as a DS: Unbound validates with it, so the
/// rendered `domain-insecure` lines are what lets the answers through.
const ROOT_DS: &str =
    ". DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D";

fn named() -> PathBuf {
    Path::new(EXTRACT).join("bind9/usr/sbin/named")
}

fn unbound() -> PathBuf {
    Path::new(EXTRACT).join("unbound/usr/sbin/unbound")
}

/// The loopback test cluster with only DNS, on [`APPLIANCE_DNS`].
fn cluster(extra_dns: &str) -> String {
    common::only(&format!("dns:\n  listen: ['{APPLIANCE_DNS}']\n{extra_dns}"))
}

/// A server process killed (by its PID) on drop.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn start(ns: &Netns, args: &[&str], log: PathBuf) -> Proc {
        let out = std::fs::File::create(&log).unwrap();
        let child = ns
            .cmd(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        Proc { child, log }
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    /// Wait (20 s at most) for `needle` in the log; panic with the log if
    /// the process exits first.
    fn wait_for(&mut self, needle: &str) {
        for _ in 0..200 {
            if self.log().contains(needle) {
                return;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("exited ({st}) before {needle:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no {needle:?} within 20 s:\n{}", self.log());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `dig` inside `ns`: the answer lines' data (`+short`).
fn dig(ns: &Netns, server: &str, port: u16, args: &[&str]) -> Vec<String> {
    let p = port.to_string();
    let at = format!("@{server}");
    let mut a = vec!["dig", "+short", "+time=2", "+tries=1", &at, "-p", &p];
    a.extend_from_slice(args);
    let mut c = ns.cmd(&a);
    let out = c.output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with(';'))
        .map(str::to_string)
        .collect()
}

fn render(cluster_file: &Path, resolver: &str) -> String {
    run_ok(
        BIN,
        &[
            "render",
            "site-dns",
            resolver,
            "--cluster",
            cluster_file.to_str().unwrap(),
        ],
    )
}

/// The names every resolver must resolve, and the type to ask.
const NAMES: [(&str, &str); 4] = [
    ("api.test.crc.testing", "A"),
    ("api-int.test.crc.testing", "A"),
    ("console-openshift-console.apps.test.crc.testing", "A"),
    ("10.20.0.127.in-addr.arpa", "PTR"),
];

/// Resolve [`NAMES`] through the resolver at 127.0.0.1:`port` and compare
/// with the appliance's own answers.
fn resolves_like_the_appliance(ns: &Netns, what: &str, port: u16, log: &dyn Fn() -> String) {
    for (name, t) in NAMES {
        let want = dig(ns, "127.0.20.1", 5300, &[name, t]);
        assert!(!want.is_empty(), "the appliance has no {t} for {name}");
        let mut got = Vec::new();
        for _ in 0..50 {
            got = dig(ns, "127.0.0.1", port, &[name, t]);
            if got == want {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(got, want, "{what}: {name} {t}\n{}", log());
    }
    assert_eq!(
        dig(ns, "127.0.0.1", port, &["10.20.0.127.in-addr.arpa", "PTR"]),
        ["master-0.test.crc.testing."]
    );
}

fn start_appliance(ns: &Netns, yaml: &str) -> InProc {
    let app = InProc::in_netns(ns.name()).start_yaml(yaml);
    app.wait_log("listening for dns tcp", Duration::from_secs(10));
    app
}

#[test]
fn site_resolvers_resolve_the_cluster_through_the_appliance() {
    require_netns!("sd");
    require_tools!("dig", "dnsmasq");
    require!(
        named().exists(),
        "bind9 is not extracted (scripts/prereqs.sh)"
    );
    require!(
        unbound().exists(),
        "unbound is not extracted (scripts/prereqs.sh)"
    );
    let ns = Netns::new(unique_name("sd"));
    let app = start_appliance(&ns, &cluster(""));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();

    // BIND, validating (its built-in root anchor), with the stanza's
    // options inside `options { }` and its zones at the top level.
    let stanza = render(&app.cluster_file, "bind");
    let options: String = stanza
        .lines()
        .filter_map(|l| l.strip_prefix("//    "))
        .map(|l| format!("  {l}\n"))
        .collect();
    assert!(options.contains("validate-except"), "{stanza}");
    let conf = format!(
        "options {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n  session-keyfile \"{d}/session.key\";\n  managed-keys-directory \"{d}\";\n  listen-on port 5301 {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n  recursion yes;\n  allow-query {{ any; }};\n  dnssec-validation auto;\n{options}}};\ncontrols {{ }};\n{stanza}"
    );
    std::fs::write(dir.path().join("named.conf"), &conf).unwrap();
    let named_conf = format!("{d}/named.conf");
    let mut bind = Proc::start(
        &ns,
        &[named().to_str().unwrap(), "-g", "-4", "-c", &named_conf],
        dir.path().join("named.log"),
    );
    bind.wait_for("running");
    resolves_like_the_appliance(&ns, "bind", 5301, &|| format!("{conf}\n{}", bind.log()));

    // Unbound, validating with the root DS: the stanza's domain-insecure
    // and local-zone lines are what make the answers usable.
    let stanza = render(&app.cluster_file, "unbound");
    let conf = format!(
        "server:\n  interface: 127.0.0.1@5303\n  do-ip6: no\n  username: \"\"\n  chroot: \"\"\n  directory: \"{d}\"\n  pidfile: \"{d}/unbound.pid\"\n  use-syslog: no\n  logfile: \"\"\n  do-daemonize: no\n  access-control: 127.0.0.0/8 allow\n  do-not-query-localhost: no\n  module-config: \"validator iterator\"\n  trust-anchor: \"{ROOT_DS}\"\n  verbosity: 1\n{stanza}"
    );
    std::fs::write(dir.path().join("unbound.conf"), &conf).unwrap();
    let unbound_conf = format!("{d}/unbound.conf");
    let mut ub = Proc::start(
        &ns,
        &[unbound().to_str().unwrap(), "-d", "-c", &unbound_conf],
        dir.path().join("unbound.log"),
    );
    ub.wait_for("start of service");
    resolves_like_the_appliance(&ns, "unbound", 5303, &|| format!("{conf}\n{}", ub.log()));

    // dnsmasq with bogus-priv and stop-dns-rebind, which would otherwise
    // drop the private reverse zone and the loopback answers.
    let stanza = render(&app.cluster_file, "dnsmasq");
    std::fs::write(dir.path().join("site.conf"), &stanza).unwrap();
    let conf = format!(
        "port=5304\nlisten-address=127.0.0.1\nbind-interfaces\nno-resolv\nno-hosts\nbogus-priv\nstop-dns-rebind\nuser=root\npid-file={d}/dnsmasq.pid\nlog-queries\nlog-facility=-\nconf-file={d}/site.conf\n"
    );
    std::fs::write(dir.path().join("dnsmasq.conf"), &conf).unwrap();
    let dm_conf = format!("--conf-file={d}/dnsmasq.conf");
    let mut dm = Proc::start(
        &ns,
        &["dnsmasq", "-k", &dm_conf],
        dir.path().join("dnsmasq.log"),
    );
    dm.wait_for("started");
    resolves_like_the_appliance(&ns, "dnsmasq", 5304, &|| format!("{stanza}\n{}", dm.log()));
}

/// The SOA serial of `zone` at `server:port`, if it answered.
fn serial(ns: &Netns, server: &str, port: u16, zone: &str) -> Option<u32> {
    dig(ns, server, port, &[zone, "SOA"])
        .first()
        .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
}

#[test]
fn bind_secondary_copies_the_zones_and_follows_notify() {
    require_netns!("sx");
    require_tools!("dig", "kdig");
    require!(
        named().exists(),
        "bind9 is not extracted (scripts/prereqs.sh)"
    );
    let ns = Netns::new(unique_name("sx"));
    let yaml = cluster("  transfer: [127.0.0.1/32]\n  notify: ['127.0.0.1:5302']\n");
    let app = start_appliance(&ns, &yaml);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let rev = "20.0.127.in-addr.arpa";
    let zone = |z: &str, f: &str| {
        format!(
            "zone \"{z}\" {{ type secondary; primaries {{ 127.0.20.1 port 5300; }}; file \"{d}/{f}\"; }};\n"
        )
    };
    let conf = format!(
        "options {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n  session-keyfile \"{d}/session.key\";\n  listen-on port 5302 {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n  recursion no;\n  dnssec-validation no;\n  notify no;\n}};\ncontrols {{ }};\n{}{}",
        zone(DOMAIN, "fwd.db"),
        zone(rev, "rev.db")
    );
    std::fs::write(dir.path().join("named.conf"), &conf).unwrap();
    let named_conf = format!("{d}/named.conf");
    let bind = Proc::start(
        &ns,
        &[named().to_str().unwrap(), "-g", "-4", "-c", &named_conf],
        dir.path().join("named.log"),
    );
    let first = serial(&ns, "127.0.20.1", 5300, DOMAIN).expect("the appliance's SOA");
    wait_until(
        "the secondary copies both zones",
        Duration::from_secs(30),
        || {
            serial(&ns, "127.0.0.1", 5302, DOMAIN) == Some(first)
                && serial(&ns, "127.0.0.1", 5302, rev).is_some()
        },
    );
    assert_eq!(
        dig(&ns, "127.0.0.1", 5302, &["api.test.crc.testing", "A"]),
        dig(&ns, "127.0.20.1", 5300, &["api.test.crc.testing", "A"])
    );
    assert_eq!(
        dig(&ns, "127.0.0.1", 5302, &["10.20.0.127.in-addr.arpa", "PTR"]),
        ["master-0.test.crc.testing."]
    );

    // A reload that changes the zone: a new serial, and a NOTIFY that makes
    // the secondary copy it long before its refresh (an hour).
    let changed = yaml.replace(
        "  transfer:",
        "  records:\n    - { name: added, type: A, value: 127.0.20.77 }\n  transfer:",
    );
    std::fs::write(&app.cluster_file, changed).unwrap();
    let reload = app.reload();
    assert!(reload.ok, "{reload:?}\n{}", app.log());
    wait_until(
        "the appliance serves the new zone",
        Duration::from_secs(10),
        || serial(&ns, "127.0.20.1", 5300, DOMAIN).is_some_and(|s| s != first),
    );
    let second = serial(&ns, "127.0.20.1", 5300, DOMAIN).unwrap();
    assert!(
        second.wrapping_sub(first) < 0x8000_0000,
        "{first} -> {second}"
    );
    wait_until(
        "the secondary follows the NOTIFY",
        Duration::from_secs(20),
        || serial(&ns, "127.0.0.1", 5302, DOMAIN) == Some(second),
    );
    assert_eq!(
        dig(&ns, "127.0.0.1", 5302, &["added.test.crc.testing", "A"]),
        ["127.0.20.77"]
    );
    let log = bind.log();
    assert!(
        log.contains(&format!("received notify for zone '{DOMAIN}")),
        "{log}"
    );
    assert!(app.log().contains("NOTIFY"), "{}", app.log());
    drop(bind);

    axfr_only_inside_the_transfer_list(&ns, second);
}

/// AXFR: the whole zone to 127.0.0.1, REFUSED to 127.0.0.9 (outside
/// dns.transfer); an IXFR from outside is REFUSED too.
fn axfr_only_inside_the_transfer_list(ns: &Netns, second: u32) {
    let axfr = |from: &str, t: &str| -> String {
        let mut c = ns.cmd(&[
            "kdig",
            "-b",
            from,
            "+time=3",
            "+retry=0",
            "-p",
            "5300",
            "@127.0.20.1",
            DOMAIN,
            t,
        ]);
        let o = c.output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let whole = axfr("127.0.0.1", "AXFR");
    assert!(whole.contains("added.test.crc.testing."), "{whole}");
    assert_eq!(whole.matches("\tSOA\t").count(), 2, "{whole}");
    let refused = axfr("127.0.0.9", "AXFR");
    assert!(refused.contains("REFUSED"), "{refused}");
    assert!(!refused.contains("127.0.20.77"), "{refused}");
    let refused = axfr("127.0.0.9", &format!("IXFR={second}"));
    assert!(refused.contains("REFUSED"), "{refused}");
}

#[test]
fn render_site_dns_windows_matches_golden_file() {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/dualstack.yaml");
    let (code, out, err) = run(
        BIN,
        &[
            "render",
            "site-dns",
            "windows",
            "--cluster",
            cfg.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/site-dns-windows.ps1");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &out).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("golden file (UPDATE_GOLDEN=1 to create)");
    assert_eq!(
        out, want,
        "render site-dns windows changed; UPDATE_GOLDEN=1 if intended"
    );
    // Without the resolver: a usage error naming the choices.
    let (code, _, err) = run(
        BIN,
        &["render", "site-dns", "--cluster", cfg.to_str().unwrap()],
    );
    assert_ne!(code, 0);
    assert!(err.to_lowercase().contains("resolver"), "{err}");
}
