//! Packaging, checked with the real tools: the systemd unit
//! (`systemd-analyze verify` and `security --offline`), the sysusers file
//! (`systemd-sysusers --root`), the firewalld service files (xmllint,
//! firewalld's own parser, `firewall-offline-cmd` in a scratch config dir,
//! and the script `firewall print` emits), the .deb built by
//! scripts/package.sh (dpkg-deb, dpkg -c, dpkg --root, the installed binary
//! checking the installed example), the RPM spec (rpmspec, rpmbuild with
//! the prebuilt binary) and the Containerfile (static checks only: no
//! docker/podman on the test hosts).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{BIN, have, run};

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn read(p: &str) -> String {
    std::fs::read_to_string(repo(p)).unwrap()
}

/// The unit with the binary path pointing at the test build.
fn unit_copy(dir: &Path) -> PathBuf {
    let u = dir.join("crc-appliance.service");
    let text = read("systemd/crc-appliance.service").replace("/usr/bin/crc-appliance", BIN);
    std::fs::write(&u, text).unwrap();
    u
}

#[test]
fn systemd_unit_verifies() {
    if !have("systemd-analyze") {
        skipped!("SKIPPED systemd_unit_verifies: systemd-analyze not installed");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let u = unit_copy(d.path());
    let (code, out, err) = verify(&u, &man_path(d.path()));
    // verify exits 0 on unknown keys and bad values, but prints them with
    // the file name: any such line is a failure.
    let ours: Vec<&str> = err
        .lines()
        .chain(out.lines())
        .filter(|l| l.contains("crc-appliance.service"))
        .collect();
    assert_eq!(code, 0, "{out}{err}");
    assert!(ours.is_empty(), "systemd-analyze verify: {ours:?}");
}

/// The pages `crc-appliance manpage` writes, as a MANPATH (`<dir>/man1`).
fn man_path(dir: &Path) -> PathBuf {
    let man = dir.join("man");
    let (code, _, err) = run(BIN, &["manpage", man.join("man1").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    man
}

/// `systemd-analyze verify` with `man_path` as MANPATH: verify runs `man`
/// for each `Documentation=man:` and fails when the page is missing.
fn verify(unit: &Path, man_path: &Path) -> (i32, String, String) {
    let out = std::process::Command::new("systemd-analyze")
        .args(["verify", unit.to_str().unwrap()])
        .env("MANPATH", man_path)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn systemd_unit_verify_catches_a_bad_key() {
    // The check above can fail: a typo in the unit is reported.
    if !have("systemd-analyze") {
        skipped!("SKIPPED systemd_unit_verify_catches_a_bad_key: systemd-analyze not installed");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let u = unit_copy(d.path());
    let text = std::fs::read_to_string(&u)
        .unwrap()
        .replace("Type=notify", "Type=notifyy");
    std::fs::write(&u, text).unwrap();
    let (_, out, err) = run("systemd-analyze", &["verify", u.to_str().unwrap()]);
    assert!(format!("{out}{err}").contains("notifyy"), "{out}{err}");
}

#[test]
fn systemd_unit_exposure_is_ok() {
    if !have("systemd-analyze") {
        skipped!("SKIPPED systemd_unit_exposure_is_ok: systemd-analyze not installed");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let u = unit_copy(d.path());
    let (code, out, err) = run(
        "systemd-analyze",
        &["security", "--offline=true", u.to_str().unwrap()],
    );
    if err.contains("unrecognized option") || err.contains("Unknown option") {
        skipped!(
            "SKIPPED systemd_unit_exposure_is_ok: systemd-analyze has no --offline (systemd < 252)"
        );
        return;
    }
    assert_eq!(code, 0, "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.contains("Overall exposure level for crc-appliance.service:"))
        .unwrap_or_else(|| panic!("no overall exposure line: {out}{err}"));
    let level: f64 = line
        .rsplit(':')
        .next()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(level <= 3.0, "exposure {level} > 3.0:\n{out}");
    assert!(line.contains("OK"), "{line}");
}

#[test]
fn systemd_unit_contract() {
    let u = read("systemd/crc-appliance.service");
    for needle in [
        "Type=notify",
        "User=crc-appliance",
        "SupplementaryGroups=libvirt",
        "ProtectSystem=strict",
        "ReadWritePaths=/var/lib/crc-appliance -/var/lib/libvirt/images",
        "After=virtqemud.socket virtnetworkd.socket",
        "libvirtd.service",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "AmbientCapabilities=CAP_NET_BIND_SERVICE CAP_NET_RAW\n",
        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_NET_RAW\n",
        "Documentation=file:///usr/share/doc/crc-appliance/install.md",
    ] {
        assert!(u.contains(needle), "unit lacks {needle:?}");
    }
    // Every documented path is a file the packages install (every guide:
    // the .deb and .rpm tests check the installed lists).
    let pkg = read("scripts/package.sh");
    assert!(pkg.contains("\"$root\"/docs/*.md"), "package.sh docs");
}

#[test]
fn sysusers_creates_the_user_in_the_libvirt_group() {
    if !have("systemd-sysusers") {
        skipped!(
            "SKIPPED sysusers_creates_the_user_in_the_libvirt_group: systemd-sysusers not installed"
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("etc")).unwrap();
    let root = format!("--root={}", d.path().display());
    let f = repo("systemd/crc-appliance.sysusers");
    let (code, out, err) = run("systemd-sysusers", &[&root, f.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let passwd = std::fs::read_to_string(d.path().join("etc/passwd")).unwrap();
    let group = std::fs::read_to_string(d.path().join("etc/group")).unwrap();
    let user = passwd
        .lines()
        .find(|l| l.starts_with("crc-appliance:"))
        .unwrap_or_else(|| panic!("{passwd}"));
    assert!(
        user.ends_with(":/var/lib/crc-appliance:/usr/sbin/nologin"),
        "{user}"
    );
    let libvirt = group
        .lines()
        .find(|l| l.starts_with("libvirt:"))
        .unwrap_or_else(|| panic!("{group}"));
    assert!(libvirt.ends_with(":crc-appliance"), "{libvirt}");
}

// ---- firewalld ------------------------------------------------------------

fn example() -> String {
    repo("configs/example.yaml").display().to_string()
}

/// firewalld's own parser (python3-firewall), the one firewall-cmd uses.
fn firewalld_parse(file: &Path) -> Option<Result<String, String>> {
    let py = "/usr/bin/python3";
    let (code, _, _) = run(py, &["-c", "import firewall.core.io.service"]);
    if code != 0 {
        return None;
    }
    let script = "import sys, os\n\
        from firewall.core.io.service import service_reader\n\
        s = service_reader(os.path.basename(sys.argv[1]), os.path.dirname(sys.argv[1]))\n\
        print(' '.join('%s/%s' % p for p in s.ports))";
    let (code, out, err) = run(py, &["-c", script, file.to_str().unwrap()]);
    Some(if code == 0 {
        Ok(out.trim().to_string())
    } else {
        Err(err)
    })
}

fn check_service_file(test: &str, file: &Path, ports: &str) {
    if have("xmllint") {
        let (code, o, e) = run("xmllint", &["--noout", file.to_str().unwrap()]);
        assert_eq!(code, 0, "xmllint {}: {o}{e}", file.display());
    } else {
        skipped!("SKIPPED {test} (xmllint part): xmllint not installed");
    }
    match firewalld_parse(file) {
        None => skipped!("SKIPPED {test} (firewalld parser part): python3-firewall not installed"),
        Some(r) => assert_eq!(r.unwrap(), ports, "{}", file.display()),
    }
}

/// Where scripts/prereqs.sh extracts the firewalld package (see
/// scripts/packages.txt; tests/firewalld.rs runs that daemon).
const FIREWALLD_EXTRACTED: &str = "/var/cache/crc-appliance-tests/extract/firewalld";

const EXAMPLE_PORTS: &str = "53/tcp 80/tcp 443/tcp 6443/tcp 8080/tcp 22623/tcp 53/udp 67/udp";

#[test]
fn shipped_firewalld_service_is_valid() {
    check_service_file(
        "shipped_firewalld_service_is_valid",
        &repo("packaging/firewalld/crc-appliance.xml"),
        "53/udp 53/tcp 67/udp 69/udp 80/tcp 443/tcp 6443/tcp 8080/tcp 22623/tcp",
    );
}

#[test]
fn firewall_print_xml_is_a_valid_service() {
    let (code, xml, err) = run(
        BIN,
        &["firewall", "print", "--xml", "--cluster", &example()],
    );
    assert_eq!(code, 0, "{err}");
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("crc-appliance-ocp4.xml");
    std::fs::write(&f, &xml).unwrap();
    check_service_file("firewall_print_xml_is_a_valid_service", &f, EXAMPLE_PORTS);
}

#[test]
fn firewalld_parser_rejects_a_bad_port() {
    // The validation above can fail.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("bad.xml");
    let text = read("packaging/firewalld/crc-appliance.xml").replace("\"6443\"", "\"64x43\"");
    std::fs::write(&f, text).unwrap();
    match firewalld_parse(&f) {
        None => {
            skipped!("SKIPPED firewalld_parser_rejects_a_bad_port: python3-firewall not installed")
        }
        Some(r) => assert!(r.unwrap_err().contains("INVALID_PORT")),
    }
}

/// Run the script `firewall print` emits with `firewall-cmd` replaced by
/// `firewall-offline-cmd` on a scratch config dir; the service lands in the
/// libvirt zone with exactly the cluster's ports.
#[test]
fn firewall_print_script_installs_the_service() {
    let test = "firewall_print_script_installs_the_service";
    // The installed firewall-offline-cmd, else the one scripts/prereqs.sh
    // extracts from the firewalld package (not installed: it would start
    // the daemon on the host), with that package's default config.
    let extracted = Path::new(FIREWALLD_EXTRACTED);
    let (offline, default_config, conf): (String, Option<PathBuf>, PathBuf) =
        if have("firewall-offline-cmd") {
            (
                "firewall-offline-cmd".into(),
                None,
                "/etc/firewalld/firewalld.conf".into(),
            )
        } else if extracted.join("usr/bin/firewall-offline-cmd").is_file() {
            (
                format!(
                    "/usr/bin/python3 {}",
                    extracted.join("usr/bin/firewall-offline-cmd").display()
                ),
                Some(extracted.join("usr/lib/firewalld")),
                extracted.join("etc/firewalld/firewalld.conf"),
            )
        } else {
            skipped!(
                "SKIPPED {test}: firewall-offline-cmd neither installed nor extracted in \
                 {FIREWALLD_EXTRACTED} (scripts/prereqs.sh extracts the firewalld package)"
            );
            return;
        };
    let libvirt_zone = Path::new("/usr/lib/firewalld/zones/libvirt.xml");
    if !libvirt_zone.exists() {
        skipped!("SKIPPED {test}: no libvirt firewalld zone (libvirt-daemon-driver-network)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let etc = d.path().join("etc-firewalld");
    std::fs::create_dir_all(etc.join("zones")).unwrap();
    // Quiets "Using fallback firewalld configuration settings".
    let _ = std::fs::copy(&conf, etc.join("firewalld.conf"));
    let mut cfg_args = format!("--system-config={}", etc.display());
    if let Some(def) = &default_config {
        // libvirt's zone lives in the host's /usr/lib/firewalld, not in the
        // extracted default config: make it a system zone of the scratch dir.
        std::fs::copy(libvirt_zone, etc.join("zones/libvirt.xml")).unwrap();
        cfg_args.push_str(&format!(" --default-config={}", def.display()));
    }
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let stub = bin.join("firewall-cmd");
    std::fs::write(
        &stub,
        format!(
            "#!/bin/sh\n# firewall-cmd stand-in: offline, on {etc}\nargs=\"\"\nfor a in \"$@\"; do\n  \
             case \"$a\" in --permanent) ;; --reload) exit 0 ;; *) args=\"$args $a\" ;; esac\ndone\n\
             exec {offline} {cfg_args} $args\n",
            etc = etc.display()
        ),
    )
    .unwrap();
    run("chmod", &["+x", stub.to_str().unwrap()]);
    let (code, script, err) = run(BIN, &["firewall", "print", "--cluster", &example()]);
    assert_eq!(code, 0, "{err}");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "script failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let offline_cmd = |args: &[&str]| {
        let words: Vec<&str> = offline.split_whitespace().collect();
        let mut all: Vec<&str> = words[1..].to_vec();
        all.extend(cfg_args.split_whitespace());
        all.extend_from_slice(args);
        run(words[0], &all)
    };
    let (code, info, err) = offline_cmd(&["--info-service=crc-appliance-ocp4"]);
    assert_eq!(code, 0, "{info}{err}");
    let ports = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("ports:"))
        .unwrap_or_default()
        .trim()
        .to_string();
    assert_eq!(ports, EXAMPLE_PORTS, "{info}");
    let (_, zone, _) = offline_cmd(&["--zone=libvirt", "--list-services"]);
    assert!(
        zone.split_whitespace().any(|s| s == "crc-appliance-ocp4"),
        "{zone}"
    );
}

// ---- .deb -----------------------------------------------------------------

const DEB_FILES: &[&str] = &[
    "./usr/bin/crc-appliance",
    "./usr/lib/systemd/system/crc-appliance.service",
    "./usr/lib/sysusers.d/crc-appliance.conf",
    "./usr/lib/systemd/system/keepalived.service.d/crc-appliance.conf",
    "./usr/lib/firewalld/services/crc-appliance.xml",
    "./usr/share/doc/crc-appliance/README.md",
    "./usr/share/doc/crc-appliance/install.md",
    "./usr/share/doc/crc-appliance/operations.md",
    "./etc/crc-appliance/example.yaml",
];

/// Which package a file list is for (paths differ by convention).
#[derive(Clone, Copy, PartialEq)]
enum Pkg {
    Deb,
    Rpm,
}

/// What both packages must ship beyond [`DEB_FILES`] (issue #27 items
/// 12, 13, 15): every guide in docs/, man pages, completions for bash, zsh
/// and fish, the cluster file's schema, the licence, the LGPL notice and
/// the bundled crates' licences.
/// Absolute paths; man pages without their compression suffix.
fn shipped(kind: Pkg) -> Vec<String> {
    let doc = "/usr/share/doc/crc-appliance";
    let mut v: Vec<String> = std::fs::read_dir(repo("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("{doc}/{n}"))
        .collect();
    assert!(v.len() >= 10, "{v:?}");
    for m in [
        "crc-appliance",
        "crc-appliance-serve",
        "crc-appliance-wait-for",
        "crc-appliance-lb-disable",
    ] {
        v.push(format!("/usr/share/man/man1/{m}.1"));
    }
    v.push("/usr/share/bash-completion/completions/crc-appliance".into());
    v.push("/usr/share/fish/vendor_completions.d/crc-appliance.fish".into());
    v.push("/usr/share/crc-appliance/cluster.schema.json".into());
    let (zsh, licences) = match kind {
        Pkg::Deb => ("/usr/share/zsh/vendor-completions", doc),
        Pkg::Rpm => (
            "/usr/share/zsh/site-functions",
            "/usr/share/licenses/crc-appliance",
        ),
    };
    v.push(format!("{zsh}/_crc-appliance"));
    for l in ["LICENSE", "NOTICE", "THIRD-PARTY-LICENSES"] {
        v.push(format!("{licences}/{l}"));
    }
    if kind == Pkg::Deb {
        v.push(format!("{doc}/copyright"));
    }
    v
}

/// `want` is in the package's file list (man pages compressed or not).
fn listed(list: &[String], want: &str) -> bool {
    list.iter().any(|l| {
        l == want
            || (want.starts_with("/usr/share/man/")
                && l.strip_prefix(want)
                    .is_some_and(|r| r == ".gz" || r == ".xz" || r == ".bz2"))
    })
}

fn build_deb(out: &Path) -> PathBuf {
    let (code, o, e) = run(
        repo("scripts/package.sh").to_str().unwrap(),
        &["--binary", BIN, "--out", out.to_str().unwrap()],
    );
    assert_eq!(code, 0, "package.sh: {o}{e}");
    PathBuf::from(o.trim())
}

#[test]
fn deb_builds_installs_and_checks_its_example() {
    let test = "deb_builds_installs_and_checks_its_example";
    if !have("dpkg-deb") {
        skipped!("SKIPPED {test}: dpkg-deb not installed (not a Debian host)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let deb = build_deb(d.path());
    let (code, list, err) = run("dpkg", &["-c", deb.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for f in DEB_FILES {
        assert!(
            list.lines().any(|l| l.ends_with(f)),
            "{f} missing from the .deb:\n{list}"
        );
    }
    assert!(
        list.lines()
            .all(|l| l.contains(" root/root ") || l.is_empty()),
        "{list}"
    );
    // `dpkg -c` lines end with `./usr/...`.
    let paths: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(|p| p.trim_start_matches('.').to_string())
        .collect();
    for f in shipped(Pkg::Deb) {
        assert!(listed(&paths, &f), "{f} missing from the .deb:\n{list}");
    }
    let (_, info, _) = run("dpkg", &["-I", deb.to_str().unwrap()]);
    assert!(info.contains("Package: crc-appliance"), "{info}");
    // The test build has default features: its libvirt helper, installed
    // next to crc-appliance, links libvirt.
    let libvirt = cfg!(feature = "libvirt");
    assert_eq!(info.contains("Depends: libc6, libvirt0"), libvirt, "{info}");
    assert_eq!(
        listed(&paths, "/usr/bin/crc-appliance-libvirt"),
        libvirt,
        "{list}"
    );
    let (_, conf, _) = run(
        "dpkg-deb",
        &[
            "-e",
            deb.to_str().unwrap(),
            d.path().join("ctl").to_str().unwrap(),
        ],
    );
    let _ = conf;
    let conffiles = std::fs::read_to_string(d.path().join("ctl/conffiles")).unwrap();
    assert_eq!(conffiles.trim(), "/etc/crc-appliance/example.yaml");

    // Install into an empty dpkg root (unpack: no maintainer scripts run
    // against the host), then use the installed files.
    let root = d.path().join("root");
    for sub in ["var/lib/dpkg/info", "var/lib/dpkg/updates"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    let root_arg = format!("--root={}", root.display());
    let (code, o, e) = run(
        "dpkg",
        &[
            &root_arg,
            "--force-depends",
            "--force-not-root",
            "--unpack",
            deb.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "dpkg --unpack: {o}{e}");
    let (code, status, e) = run("dpkg", &[&root_arg, "-s", "crc-appliance"]);
    assert_eq!(code, 0, "{e}");
    assert!(status.contains("Status: install ok unpacked"), "{status}");
    // Until `configure`, dpkg keeps a new conffile as .dpkg-new.
    assert!(
        root.join("etc/crc-appliance/example.yaml.dpkg-new")
            .is_file()
    );
    // The configured layout: dpkg -x into a second root.
    let root = d.path().join("xroot");
    let (code, o, e) = run(
        "dpkg",
        &["-x", deb.to_str().unwrap(), root.to_str().unwrap()],
    );
    assert_eq!(code, 0, "dpkg -x: {o}{e}");
    let installed = root.join("usr/bin/crc-appliance");
    let example = root.join("etc/crc-appliance/example.yaml");
    let (code, o, e) = run(
        installed.to_str().unwrap(),
        &["check", "--cluster", example.to_str().unwrap()],
    );
    assert_eq!(code, 0, "installed check: {o}{e}");
    assert!(o.contains("cluster ocp4.example.com is valid"), "{o}");
    installed_extras_work(
        &root,
        "/usr/share/doc/crc-appliance",
        "/usr/share/zsh/vendor-completions",
    );
    // The unit's Documentation= files are installed.
    let unit =
        std::fs::read_to_string(root.join("usr/lib/systemd/system/crc-appliance.service")).unwrap();
    for l in unit
        .lines()
        .filter_map(|l| l.strip_prefix("Documentation=file://"))
    {
        assert!(
            root.join(l.trim_start_matches('/')).is_file(),
            "Documentation={l} not installed"
        );
    }
    // `systemctl help crc-appliance` opens an installed page.
    let man: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("Documentation=man:"))
        .collect();
    assert!(!man.is_empty(), "no Documentation=man: in the unit");
    for m in man {
        let (name, section) = m.trim_end_matches(')').split_once('(').unwrap();
        let page = format!("usr/share/man/man{section}/{name}.{section}.gz");
        assert!(
            root.join(&page).is_file(),
            "Documentation=man:{m}: no {page}"
        );
    }
    // And the installed unit still verifies against the installed binary.
    if have("systemd-analyze") {
        let u = d.path().join("crc-appliance.service");
        std::fs::write(
            &u,
            unit.replace("/usr/bin/crc-appliance", installed.to_str().unwrap()),
        )
        .unwrap();
        let (code, o, e) = verify(&u, &root.join("usr/share/man"));
        assert_eq!(code, 0, "{o}{e}");
    }
}

// ---- licences ---------------------------------------------------------------

/// THIRD-PARTY-LICENSES is what scripts/third-party-licenses.py generates
/// from the current Cargo.lock (the script also fails on a licence outside
/// its allow list), it names every crate `cargo tree` says the binary is
/// built from (an independent count), and NOTICE names the libvirt
/// bindings' locked versions.
#[test]
fn third_party_licenses_are_current_and_complete() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new("/usr/bin/python3")
        .arg(repo("scripts/third-party-licenses.py"))
        .arg("--check")
        .env("CARGO", &cargo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = read("THIRD-PARTY-LICENSES");
    let (code, tree, err) = run(
        &cargo,
        &[
            "tree",
            "--manifest-path",
            repo("Cargo.toml").to_str().unwrap(),
            "-e",
            "normal",
            "--target",
            "x86_64-unknown-linux-gnu",
            "--prefix",
            "none",
            "--locked",
            "--offline",
        ],
    );
    assert_eq!(code, 0, "cargo tree: {err}");
    let mut crates = std::collections::BTreeSet::new();
    for l in tree.lines().filter(|l| !l.contains(" (/")) {
        let mut w = l.split_whitespace();
        let (Some(name), Some(version)) = (w.next(), w.next()) else {
            continue;
        };
        crates.insert(format!("{name} {}", version.trim_start_matches('v')));
    }
    assert!(crates.len() > 100, "{tree}");
    for c in &crates {
        assert!(
            listed.lines().any(|l| l.starts_with(&format!("  {c} "))),
            "{c} is built into the binary but not in THIRD-PARTY-LICENSES"
        );
    }
    let lock = read("Cargo.lock");
    let notice = read("NOTICE");
    for name in ["virt", "virt-sys"] {
        let version = lock
            .split("[[package]]")
            .find(|p| p.contains(&format!("\nname = \"{name}\"\n")))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
            .unwrap()
            .trim_end_matches('"');
        assert!(
            notice.contains(&format!("{name} {version}")),
            "NOTICE does not name {name} {version} (Cargo.lock)"
        );
    }
    assert!(
        read("LICENSE").contains("Apache License")
            && read("LICENSE").contains("Version 2.0, January 2004")
    );
}

// ---- RPM ------------------------------------------------------------------

#[test]
fn rpm_spec_parses_and_builds_with_a_prebuilt_binary() {
    let test = "rpm_spec_parses_and_builds_with_a_prebuilt_binary";
    if !have("rpmspec") || !have("rpmbuild") {
        skipped!("SKIPPED {test}: rpmspec/rpmbuild not installed (Debian package rpm)");
        return;
    }
    let spec = repo("packaging/rpm/crc-appliance.spec");
    let (code, parsed, err) = run("rpmspec", &["-P", spec.to_str().unwrap()]);
    assert_eq!(code, 0, "rpmspec -P: {err}");
    let version = read("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .unwrap()
        .trim_end_matches('"')
        .to_string();
    assert!(
        parsed
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Version:", &version]),
        "spec Version must match Cargo.toml {version}"
    );
    let d = tempfile::tempdir().unwrap();
    let top = format!("_topdir {}", d.path().display());
    let prebuilt = format!("prebuilt {BIN}");
    let src = format!("_sourcedir {}", env!("CARGO_MANIFEST_DIR"));
    let (code, o, e) = run(
        "rpmbuild",
        &[
            "-bb",
            "--nodeps",
            "--define",
            &top,
            "--define",
            &prebuilt,
            "--define",
            &src,
            spec.to_str().unwrap(),
        ],
    );
    assert_eq!(
        code,
        0,
        "rpmbuild: {}{}",
        &o[o.len().saturating_sub(2000)..],
        e
    );
    let rpm = walk(&d.path().join("RPMS"))
        .into_iter()
        .find(|p| p.extension().is_some_and(|x| x == "rpm"))
        .unwrap();
    let (code, list, e) = run("rpm", &["-qlp", rpm.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    for f in DEB_FILES {
        let f = f.trim_start_matches('.');
        assert!(
            list.lines().any(|l| l == f),
            "{f} missing from the rpm:\n{list}"
        );
    }
    assert!(
        list.lines().any(|l| l == "/var/lib/crc-appliance"),
        "{list}"
    );
    let paths: Vec<String> = list.lines().map(str::to_string).collect();
    assert!(listed(&paths, "/usr/bin/crc-appliance-libvirt"), "{list}");
    for f in shipped(Pkg::Rpm) {
        assert!(listed(&paths, &f), "{f} missing from the rpm:\n{list}");
    }
    // The licence files are marked %license.
    let (code, licences, e) = run("rpm", &["-qp", "--licensefiles", rpm.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    for l in ["LICENSE", "NOTICE", "THIRD-PARTY-LICENSES"] {
        let f = format!("/usr/share/licenses/crc-appliance/{l}");
        assert!(
            licences.lines().any(|x| x == f),
            "{f} not a %license file:\n{licences}"
        );
    }
    // Unpacked, the pages, completions and licences are usable.
    if have("rpm2cpio") && have("cpio") {
        let root = d.path().join("rpmroot");
        std::fs::create_dir_all(&root).unwrap();
        let script = format!("rpm2cpio '{}' | cpio -idm --quiet", rpm.display());
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        installed_extras_work(
            &root,
            "/usr/share/licenses/crc-appliance",
            "/usr/share/zsh/site-functions",
        );
    } else {
        skipped!("SKIPPED {test} (unpacked checks): rpm2cpio or cpio not installed");
    }
}

/// In an unpacked package under `root`: the man page renders (`man -l`),
/// the completions parse (bash -n, and zsh -n / fish -n when installed),
/// the schema is JSON, the licence files are the repository's.
fn installed_extras_work(root: &Path, licences: &str, zsh_dir: &str) {
    let at = |p: &str| root.join(p.trim_start_matches('/'));
    let man_dir = at("/usr/share/man/man1");
    let page = std::fs::read_dir(&man_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("crc-appliance.1"))
        })
        .unwrap_or_else(|| panic!("no crc-appliance.1* in {}", man_dir.display()));
    if have("man") {
        let out = std::process::Command::new("man")
            .args(["--warnings=w", "-l", page.to_str().unwrap()])
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && err.trim().is_empty(),
            "man -l {}: {err}",
            page.display()
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("crc-appliance-serve(1)"));
    }
    let bash = at("/usr/share/bash-completion/completions/crc-appliance");
    let (code, o, e) = run("bash", &["-n", bash.to_str().unwrap()]);
    assert_eq!(code, 0, "bash -n: {o}{e}");
    let zsh = at(&format!("{zsh_dir}/_crc-appliance"));
    if have("zsh") {
        let (code, o, e) = run("zsh", &["-n", zsh.to_str().unwrap()]);
        assert_eq!(code, 0, "zsh -n: {o}{e}");
    }
    let fish = at("/usr/share/fish/vendor_completions.d/crc-appliance.fish");
    if have("fish") {
        let (code, o, e) = run("fish", &["--no-execute", fish.to_str().unwrap()]);
        assert_eq!(code, 0, "fish -n: {o}{e}");
    }
    let schema =
        std::fs::read_to_string(at("/usr/share/crc-appliance/cluster.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&schema).unwrap();
    assert_eq!(schema["title"], "crc-appliance cluster file");
    for l in ["LICENSE", "NOTICE", "THIRD-PARTY-LICENSES"] {
        let installed = std::fs::read_to_string(at(&format!("{licences}/{l}"))).unwrap();
        assert_eq!(installed, read(l), "{l} differs from the repository's");
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

// ---- Containerfile --------------------------------------------------------

/// docker/podman cannot run here: check the file's shape and that every
/// COPY source from the build context exists.
#[test]
fn containerfile_is_multistage_non_root_and_complete() {
    let c = read("packaging/Containerfile");
    let froms: Vec<&str> = c.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "{froms:?}");
    assert!(froms[0].contains(" AS build"), "{froms:?}");
    assert!(c.lines().any(|l| l == "USER crc-appliance"));
    assert!(c.contains("--network host"));
    assert!(c.contains("VOLUME [\"/var/lib/crc-appliance\"]"));
    for l in c
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from="))
    {
        let parts: Vec<&str> = l.split_whitespace().collect();
        for src in &parts[1..parts.len() - 1] {
            if *src != "." {
                assert!(repo(src).exists(), "COPY source {src} missing");
            }
        }
    }
}

// ---- capabilities ---------------------------------------------------------

/// The capability names of the unit's `AmbientCapabilities=`, for setpriv
/// (`net_bind_service`, …).
fn unit_caps() -> Vec<String> {
    read("systemd/crc-appliance.service")
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .unwrap()
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_lowercase())
        .collect()
}

/// `ip netns exec NS setpriv` as nobody with exactly `caps`.
fn as_nobody(ns: &str, caps: &[String]) -> Vec<String> {
    let set = std::iter::once("-all".to_string())
        .chain(caps.iter().map(|c| format!("+{c}")))
        .collect::<Vec<_>>()
        .join(",");
    [
        "ip",
        "netns",
        "exec",
        ns,
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--no-new-privs",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("--inh-caps={set}"),
        format!("--ambient-caps={set}"),
        format!("--bounding-set={set}"),
    ])
    .collect()
}

/// A cluster on veth `d0` (10.77.0.1/24) binding every privileged
/// port: DNS :53, DHCP 0.0.0.0:67 on d0 (SO_BINDTODEVICE), LB :80/:443.
fn privileged_cluster(dir: &Path) -> PathBuf {
    for sub in ["images", "ign"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::create_dir_all(dir.join("state")).unwrap();
    run_ok_chmod(dir, "755");
    run_ok_chmod(&dir.join("state"), "777");
    let text = format!(
        r#"name: caps
baseDomain: caps.test
network:
  cidr: 10.77.0.0/24
  gateway: 10.77.0.254
  applianceIP: 10.77.0.1
  interface: d0
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:4d:00:05", ip: 10.77.0.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:4d:00:0a", ip: 10.77.0.10 }}
dns:
  listen: ["10.77.0.1:53"]
dhcp:
  listen: 0.0.0.0:67
  leaseFile: {d}/state/leases.json
http:
  listen: 10.77.0.1:8080
  imagesDir: {d}/images
  ignitionDir: {d}/ign
admin:
  listen: 127.0.0.1:9180
"#,
        d = dir.display()
    );
    let f = dir.join("cluster.yaml");
    std::fs::write(&f, text).unwrap();
    run_ok_chmod(&f, "644");
    f
}

fn run_ok_chmod(p: &Path, mode: &str) {
    let (code, _, e) = run("chmod", &[mode, p.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
}

/// The unit's capabilities are enough for an unprivileged user to bind
/// every socket (ports 53, 67, 80, 443 and SO_BINDTODEVICE), and they are
/// needed: without CAP_NET_BIND_SERVICE the start fails. (CAP_NET_RAW is
/// for SO_BINDTODEVICE on kernels before 5.7, e.g. RHEL 8; newer kernels
/// allow it unprivileged, so it cannot be shown necessary here.)
#[test]
fn unit_capabilities_suffice_for_an_unprivileged_user() {
    let test = "unit_capabilities_suffice_for_an_unprivileged_user";
    if let Err(why) = common::netns_available("pkcap") {
        skipped!("SKIPPED {test}: {why}");
        return;
    }
    if !have("setpriv") {
        skipped!("SKIPPED {test}: setpriv (util-linux) not installed");
        return;
    }
    let ns = common::Netns::new(common::unique_name("pkcap"));
    ns.ip(&["link", "add", "d0", "type", "veth", "peer", "name", "d1"]);
    ns.ip(&["link", "set", "d1", "up"]);
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "d0"]);
    ns.ip(&["link", "set", "d0", "up"]);
    let d = tempfile::tempdir().unwrap();
    let f = privileged_cluster(d.path());
    let caps = unit_caps();
    assert_eq!(caps, ["net_bind_service", "net_raw"]);
    let prefix = as_nobody(ns.name(), &caps);
    let prefix: Vec<&str> = prefix.iter().map(|s| s.as_str()).collect();
    let app = common::Appliance::launch()
        .prefix(&prefix)
        .ready_timeout(std::time::Duration::from_secs(30))
        .start_path(&f);
    let log = app.log();
    for what in [
        "10.77.0.1:53",
        "0.0.0.0:67",
        "10.77.0.1:80",
        "10.77.0.1:443",
    ] {
        assert!(log.contains(what), "{what} not bound:\n{log}");
    }
    drop(app);

    // Negative control: without CAP_NET_BIND_SERVICE the start fails.
    let no_bind: Vec<String> = caps
        .into_iter()
        .filter(|c| c != "net_bind_service")
        .collect();
    let prefix = as_nobody(ns.name(), &no_bind);
    let mut child = std::process::Command::new(&prefix[0])
        .args(&prefix[1..])
        .arg(BIN)
        .args(["serve", "--cluster", f.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve without CAP_NET_BIND_SERVICE did not fail");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains("Permission denied"), "{err}");
}

// ---- system call filter ---------------------------------------------------

/// The system calls of a `systemd-analyze syscall-filter` group, expanded.
fn syscall_group(name: &str, seen: &mut std::collections::BTreeSet<String>) -> Vec<String> {
    if !seen.insert(name.to_string()) {
        return Vec::new();
    }
    let (code, out, err) = run("systemd-analyze", &["syscall-filter", name]);
    assert_eq!(code, 0, "syscall-filter {name}: {err}");
    let mut v = Vec::new();
    for l in out.lines().filter(|l| l.starts_with(' ')) {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if l.starts_with('@') {
            v.extend(syscall_group(l, seen));
        } else {
            v.push(l.to_string());
        }
    }
    v
}

/// What the unit's `SystemCallFilter=` lines allow, applied in order (the
/// first is an allow list; a later `~` line removes, a later plain line adds
/// back).
fn unit_syscalls() -> std::collections::BTreeSet<String> {
    let unit = read("systemd/crc-appliance.service");
    let mut allow = std::collections::BTreeSet::new();
    for (i, l) in unit
        .lines()
        .filter_map(|l| l.strip_prefix("SystemCallFilter="))
        .enumerate()
    {
        let (deny, list) = match l.strip_prefix('~') {
            Some(rest) => (true, rest),
            None => (false, l),
        };
        assert!(
            i > 0 || !deny,
            "the first SystemCallFilter= must be an allow list"
        );
        let mut names = Vec::new();
        for g in list.split_whitespace() {
            if g.starts_with('@') {
                names.extend(syscall_group(g, &mut Default::default()));
            } else {
                names.push(g.to_string());
            }
        }
        for n in names {
            if deny {
                allow.remove(&n);
            } else {
                allow.insert(n);
            }
        }
    }
    assert!(
        !allow.is_empty(),
        "the unit has no SystemCallFilter allow list"
    );
    allow
}

/// `serve` under strace through start, traffic on every service, a reload
/// and shutdown uses only system calls the unit's filter allows (a call
/// outside it would fail with EPERM under systemd).
#[test]
fn unit_syscall_filter_allows_what_serve_uses() {
    let test = "unit_syscall_filter_allows_what_serve_uses";
    if !have("strace") || !have("systemd-analyze") {
        skipped!("SKIPPED {test}: strace or systemd-analyze not installed");
        return;
    }
    let allowed = unit_syscalls();
    let dir = tempfile::tempdir().unwrap();
    for sub in ["images", "ign", "tftp"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    std::fs::write(dir.path().join("images/a.txt"), "hello").unwrap();
    std::fs::write(
        dir.path().join("ign/master.ign"),
        r#"{"ignition":{"version":"3.2.0"}}"#,
    )
    .unwrap();
    let d = dir.path().display().to_string();
    let yaml = common::loopback_cluster_with(&format!(
        r#"dns:
  listen: ["127.0.0.1:0"]
dhcp:
  listen: 127.0.0.1:0
  leaseFile: "{d}/leases.json"
loadBalancer:
  listen: {{ api: 127.0.0.1:0, machineConfig: 127.0.0.1:0, ingressHttp: 127.0.0.1:0, ingressHttps: 127.0.0.1:0 }}
http:
  listen: 127.0.0.1:0
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
admin:
  listen: 127.0.0.1:0
pxe:
  tftpListen: 127.0.0.1:0
  tftpRoot: "{d}/tftp"
"#
    ));
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let trace = dir.path().join("strace.out");
    let trace_s = trace.to_str().unwrap().to_string();
    let mut app = common::Appliance::launch()
        .prefix(&["strace", "-f", "-qq", "-o", &trace_s])
        .ready_timeout(std::time::Duration::from_secs(60))
        .start_file(tempfile::tempdir().unwrap(), file.clone());
    // Traffic: DNS over UDP and TCP, HTTP (image + ignition), admin, an LB
    // connection, a TFTP read request.
    let q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03api\x04test\x0bcrc\x2dtesting\x00\x00\x01\x00\x01";
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    udp.send_to(q, app.addr("dns udp")).unwrap();
    let mut buf = [0u8; 1500];
    let _ = udp.recv_from(&mut buf);
    let http = |addr: std::net::SocketAddr, path: &str| {
        use std::io::{Read, Write};
        if let Ok(mut s) = std::net::TcpStream::connect(addr) {
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let _ = write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            );
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            out
        } else {
            String::new()
        }
    };
    assert!(
        http(app.addr("http"), "/images/a.txt").contains("hello"),
        "{}",
        app.log()
    );
    http(app.addr("http"), "/ignition/master.ign");
    http(app.addr("admin"), "/status");
    http(app.addr("admin"), "/metrics");
    let _ = std::net::TcpStream::connect(app.addr("lb api"));
    let tftp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    tftp.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    tftp.send_to(b"\x00\x01nothere\x00octet\x00", app.addr("tftp"))
        .unwrap();
    let _ = tftp.recv_from(&mut buf);
    // Signals go to the traced serve, not to strace.
    let children = format!("/proc/{0}/task/{0}/children", app.pid());
    let serve = std::fs::read_to_string(&children).unwrap();
    let serve = serve.split_whitespace().next().unwrap().to_string();
    run("kill", &["-HUP", &serve]);
    app.wait_log("reload", std::time::Duration::from_secs(10));
    run("kill", &["-TERM", &serve]);
    assert_eq!(
        app.wait_exit(std::time::Duration::from_secs(20)),
        Some(Some(0)),
        "{}",
        app.log()
    );
    drop(app);

    let text = std::fs::read_to_string(&trace).unwrap();
    let mut used = std::collections::BTreeSet::new();
    for l in text.lines() {
        // "<pid> name(args) = ret"; skip "<... x resumed>" and signal lines.
        let Some(rest) = l.split_once(' ').map(|(_, r)| r.trim_start()) else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && rest[name.len()..].starts_with('(') {
            used.insert(name);
        }
    }
    assert!(used.len() > 20, "too few syscalls traced: {used:?}");
    // execve belongs to strace starting the binary: allowed anyway.
    let denied: Vec<&String> = used.iter().filter(|s| !allowed.contains(*s)).collect();
    assert!(
        denied.is_empty(),
        "serve used system calls the unit's SystemCallFilter= denies: {denied:?}"
    );
}
