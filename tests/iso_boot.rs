//! The per-node boot ISO (`/boot/<node>.iso`, `/boot/<role>.iso`) against
//! the real binary:
//!
//! - a bootable ISO with the RHCOS layout (ISOLINUX and GRUB,
//!   `coreos/kargs.json`, embed areas in isolinux.cfg and grub.cfg; the
//!   host's kernel and a busybox initramfs printing `/proc/cmdline`) is
//!   served per node; qemu VMs (TCG, `-machine pc`; SeaBIOS + ISOLINUX,
//!   and OVMF + GRUB) boot it as their CD — read by qemu itself over HTTP
//!   with Range requests when its curl block driver is installed, else
//!   downloaded with curl first — and the guest's command line holds the
//!   node's kargs;
//! - the served bytes equal the original outside the embed areas; ranges
//!   across an area, HEAD and ETags (per node, after a reload, after the
//!   file changes); 404 for non-nodes;
//! - kargs longer than the area → 500 with the reason, and `preflight`
//!   says so beforehand;
//! - only the appliance host and `http.bootIsoCidrs` get the ISO here (a
//!   namespace with three local addresses; who else does, node by node:
//!   `tests/http_acl.rs`);
//! - a 1 GiB (sparse) ISO downloads with the appliance's RSS flat.
//!
//! The appliance runs in this process (`common::inproc`; inside the network
//! namespace with `InProc::in_netns`), except where its own memory is
//! measured.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::initramfs::{
    ISOLINUX_BIN, LDLINUX_C32, RhcosIso, rhcos_iso, rhcos_iso_uefi, uefi_tools,
};
use common::inproc::InProc;
use common::qemu::{CMDLINE_MARK, Qemu, cmdline_initramfs, host_kernel, tail, wait_for};
use common::{Appliance, free_port, have, run, run_ok, vm_rss_kib};

/// The appliance on [`cluster`], in this process.
fn start(iso: &Path, http: u16) -> InProc {
    InProc::start_yaml(&cluster(iso, http))
}

/// The cluster: the loopback one plus worker-1 with its own disk and karg.
fn cluster(iso: &Path, http: u16) -> String {
    common::loopback_cluster_with_nodes(
        "  - { name: worker-1, role: worker, mac: \"52:54:00:14:00:15\", ip: 127.0.20.21, installDev: /dev/vdb, kargs: [crc.node=worker-1] }\n",
        &format!(
            "http:\n  listen: 127.0.20.1:{http}\n  imagesDir: \"{{dir}}/images\"\n  ignitionDir: \"{{dir}}/ign\"\n  bootIsoCidrs: [192.0.2.0/24]\nadmin:\n  listen: 127.0.0.1:0\ndns:\n  enabled: false\nloadBalancer:\n  enabled: false\ndhcp:\n  enabled: false\n  leaseFile: \"{{dir}}/leases.json\"\nrhcos:\n  iso: {}\n  kargs: [crc.test=1]\n  roleKargs: {{ worker: [crc.role=worker] }}\n",
            iso.display()
        ),
    )
}

/// `curl` → (status, headers, body) with the body in a file.
fn curl(args: &[&str], url: &str, out: &Path) -> (u16, String) {
    let mut a = vec!["-sS", "-D", "-", "-o"];
    let o = out.display().to_string();
    a.push(&o);
    a.extend_from_slice(args);
    a.push(url);
    let text = run_ok("curl", &a);
    let status = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

fn header<'a>(headers: &'a str, name: &str) -> Option<&'a str> {
    headers.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Offsets of the embed areas in the original image: where its default
/// kargs are followed by the line end and the padding (found by scanning
/// the bytes, independently of the appliance's ISO reader).
fn areas(orig: &[u8], iso: &RhcosIso) -> Vec<usize> {
    let needle = format!("{}\n#", iso.default_kargs).into_bytes();
    orig.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle.as_slice())
        .map(|(i, _)| i)
        .collect()
}

/// The kargs `served` holds in the area at `at`.
fn area_kargs(served: &[u8], at: usize, size: usize) -> String {
    let a = String::from_utf8_lossy(&served[at..at + size]).to_string();
    assert!(a.ends_with('#'), "area not padded: {a:?}");
    let (k, pad) = a.split_once('\n').expect("area has its line end");
    assert!(pad.bytes().all(|b| b == b'#'), "padding: {pad:?}");
    k.to_string()
}

fn tools_ok() -> Result<(), String> {
    for t in ["curl", "xorriso", "busybox"] {
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

#[test]
fn served_iso_is_the_original_with_the_node_kargs_in_its_areas() {
    if let Err(why) = tools_ok() {
        skipped!("SKIPPED served_iso_is_the_original_with_the_node_kargs_in_its_areas: {why}");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let kernel = common::pattern(300_000, 1);
    let iso = rhcos_iso(work.path(), "rhcos-iso-test", [&kernel, b"initrd"], 1024);
    let orig = std::fs::read(&iso.path).unwrap();
    let at = areas(&orig, &iso);
    assert_eq!(at.len(), 2, "two embed areas in the test ISO");
    let http = free_port();
    let app = start(&iso.path, http);
    assert!(!app.log().contains("preflight bootiso"), "{}", app.log());
    let base = format!("http://127.0.20.1:{http}");
    let out = work.path().join("served.iso");

    let (code, h) = curl(&[], &format!("{base}/boot/worker-1.iso"), &out);
    assert_eq!(code, 200, "{h}\n{}", app.log());
    let served = std::fs::read(&out).unwrap();
    assert_eq!(served.len(), orig.len());
    assert_eq!(
        header(&h, "content-type"),
        Some("application/x-iso9660-image")
    );
    assert_eq!(header(&h, "accept-ranges"), Some("bytes"));
    let etag = header(&h, "etag").unwrap().to_string();
    // Both areas hold the ISO's kargs followed by the node's.
    let want = format!(
        "{} coreos.inst.install_dev=/dev/vdb coreos.inst.ignition_url={base}/ignition/worker-1.ign console=tty0 console=ttyS0,115200n8 crc.test=1 crc.role=worker crc.node=worker-1",
        iso.default_kargs
    );
    for &a in &at {
        assert_eq!(area_kargs(&served, a, iso.area_size), want);
    }
    // Byte-identical outside the areas (cmp with the areas masked).
    let (mut m1, mut m2) = (orig.clone(), served.clone());
    for &a in &at {
        m1[a..a + iso.area_size].fill(0);
        m2[a..a + iso.area_size].fill(0);
    }
    assert!(m1 == m2, "bytes outside the embed areas differ");
    assert_ne!(orig, served);

    // A range across the start of an area, and a multi-range.
    let (s, e) = (at[0] - 100, at[0] + 99);
    let part = work.path().join("part");
    let (code, h) = curl(
        &["-r", &format!("{s}-{e}")],
        &format!("{base}/boot/worker-1.iso"),
        &part,
    );
    assert_eq!(code, 206, "{h}");
    assert_eq!(std::fs::read(&part).unwrap(), &served[s..=e]);
    let (code, h) = curl(
        &["-r", &format!("0-9,{}-{}", at[1], at[1] + 9)],
        &format!("{base}/boot/worker-1.iso"),
        &part,
    );
    assert_eq!(code, 206, "{h}");
    let body = std::fs::read(&part).unwrap();
    let tenth = &served[at[1]..at[1] + 10];
    assert!(body.windows(10).any(|w| w == tenth), "multipart part");
    // HEAD: the length, no body; If-None-Match → 304.
    let (code, h) = curl(&["-I"], &format!("{base}/boot/worker-1.iso"), &part);
    assert_eq!(code, 200);
    assert_eq!(
        header(&h, "content-length"),
        Some(orig.len().to_string().as_str())
    );
    let (code, _) = curl(
        &["-H", &format!("If-None-Match: {etag}")],
        &format!("{base}/boot/worker-1.iso"),
        &part,
    );
    assert_eq!(code, 304);

    // Another node, and a role: other kargs, other tags.
    let (code, h) = curl(&[], &format!("{base}/boot/master-0.iso"), &out);
    assert_eq!(code, 200);
    assert_ne!(header(&h, "etag").unwrap(), etag);
    let k = area_kargs(&std::fs::read(&out).unwrap(), at[1], iso.area_size);
    assert!(
        k.contains("/ignition/master-0.ign ") && k.contains("install_dev=/dev/sda"),
        "{k}"
    );
    assert!(!k.contains("crc.node"), "{k}");
    let (code, _) = curl(&[], &format!("{base}/boot/worker.iso"), &out);
    assert_eq!(code, 200);
    let k = area_kargs(&std::fs::read(&out).unwrap(), at[0], iso.area_size);
    assert!(
        k.contains("/ignition/worker.ign") && k.contains("crc.role=worker"),
        "{k}"
    );
    assert!(!k.contains("crc.node") && !k.contains("/dev/vdb"), "{k}");
    // Not a node or role.
    let (code, _) = curl(&[], &format!("{base}/boot/nobody.iso"), &out);
    assert_eq!(code, 404);

    // The node's kargs change (reload): a new tag and the new kargs.
    let cf = &app.cluster_file;
    let text = std::fs::read_to_string(cf).unwrap();
    std::fs::write(cf, text.replace("crc.node=worker-1", "crc.node=worker-1b")).unwrap();
    let reload = app.reload();
    assert!(reload.ok, "{reload:?}");
    app.wait_log("configuration reloaded", Duration::from_secs(20));
    let (code, h) = curl(&[], &format!("{base}/boot/worker-1.iso"), &out);
    assert_eq!(code, 200);
    let etag2 = header(&h, "etag").unwrap().to_string();
    assert_ne!(etag2, etag);
    let k = area_kargs(&std::fs::read(&out).unwrap(), at[0], iso.area_size);
    assert!(k.ends_with(" crc.node=worker-1b"), "{k}");
    let etag = etag2;

    // The ISO changes (same size, new bytes and date): a new tag.
    std::thread::sleep(Duration::from_millis(20));
    let mut changed = orig.clone();
    changed[0] ^= 1;
    std::fs::write(&iso.path, &changed).unwrap();
    let (code, h) = curl(&["-I"], &format!("{base}/boot/worker-1.iso"), &part);
    assert_eq!(code, 200);
    assert_ne!(header(&h, "etag").unwrap(), etag);
}

#[test]
fn kargs_longer_than_the_area_are_a_500() {
    if let Err(why) = tools_ok() {
        skipped!("SKIPPED kargs_longer_than_the_area_are_a_500: {why}");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let iso = rhcos_iso(work.path(), "small-area", [b"kernel", b"initrd"], 120);
    let http = free_port();
    let app = start(&iso.path, http);
    let out = work.path().join("x");
    let (code, _) = curl(
        &[],
        &format!("http://127.0.20.1:{http}/boot/master-0.iso"),
        &out,
    );
    assert_eq!(code, 500);
    let body = std::fs::read_to_string(&out).unwrap();
    assert!(body.contains("embed area holds at most 119"), "{body}");
    app.wait_log("boot iso master-0.iso", Duration::from_secs(10));
    // Known before any request: `preflight` reads the ISO's areas.
    let cf = app.cluster_file.display().to_string();
    let (code, out, err) = run(common::BIN, &["preflight", "--cluster", &cf]);
    assert_eq!(code, 1, "{out}{err}");
    for name in ["master-0", "worker-1", "worker"] {
        let want = format!("WARN bootiso: /boot/{name}.iso: kernel arguments are");
        assert!(out.contains(&want), "{want}: {out}");
    }
    assert!(app.log().contains("preflight bootiso"), "{}", app.log());
}

#[test]
fn one_gib_iso_downloads_in_constant_memory() {
    if let Err(why) = tools_ok() {
        skipped!("SKIPPED one_gib_iso_downloads_in_constant_memory: {why}");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let iso = rhcos_iso(work.path(), "big", [b"kernel", b"initrd"], 1024);
    // Sparse: the image grows to 1 GiB of zeros after its last extent.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&iso.path)
        .unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let http = free_port();
    // Spawned: its RSS is the point.
    let app = Appliance::start(&cluster(&iso.path, http));
    let url = format!("http://127.0.20.1:{http}/boot/master-0.iso");
    // Warm up (the first response brings in the code paths and pool threads).
    run_ok("curl", &["-sS", "-o", "/dev/null", "-r", "0-1048575", &url]);
    let before = vm_rss_kib(app.pid());
    let got = run_ok(
        "curl",
        &[
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download}",
            &url,
        ],
    );
    let after = vm_rss_kib(app.pid());
    assert_eq!(got.trim(), format!("200 {}", 1u64 << 30));
    let growth = after.saturating_sub(before);
    assert!(
        growth < 32 * 1024,
        "RSS grew by {growth} KiB ({before} → {after}) for a 1 GiB download"
    );
}

/// qemu's curl block driver (Debian `qemu-block-extra`).
fn qemu_has_curl() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu/qemu",
        "/usr/lib/qemu",
        "/usr/lib64/qemu",
    ]
    .iter()
    .any(|d| Path::new(d).join("block-curl.so").is_file())
}

/// Why a qemu boot test cannot run, if it cannot.
fn qemu_ok() -> Result<PathBuf, String> {
    tools_ok()?;
    if !have("qemu-system-x86_64") {
        return Err("qemu-system-x86 is not installed".into());
    }
    host_kernel().ok_or_else(|| "no /boot/vmlinuz-*".to_string())
}

#[test]
fn seabios_isolinux_boots_the_served_iso_with_the_node_kargs() {
    let kpath = match qemu_ok() {
        Ok(k) => k,
        Err(why) => {
            skipped!("SKIPPED seabios_isolinux_boots_the_served_iso_with_the_node_kargs: {why}");
            return;
        }
    };
    boot_served_iso(&kpath, &[], false);
}

#[test]
fn ovmf_grub_boots_the_served_iso_with_the_node_kargs() {
    const OVMF: &str = "/usr/share/ovmf/OVMF.fd";
    let kpath = match qemu_ok()
        .and_then(|k| uefi_tools().map(|_| k))
        .and_then(|k| {
            Path::new(OVMF)
                .is_file()
                .then_some(k)
                .ok_or_else(|| "ovmf is not installed".to_string())
        }) {
        Ok(k) => k,
        Err(why) => {
            skipped!("SKIPPED ovmf_grub_boots_the_served_iso_with_the_node_kargs: {why}");
            return;
        }
    };
    boot_served_iso(&kpath, &["-bios", OVMF], true);
}

/// Serve an ISO (UEFI-bootable too with `uefi`) and boot worker-1's as
/// the CD of a `-machine pc` VM with `firmware` args (SeaBIOS when empty);
/// the guest's command line must hold the node's kargs.
fn boot_served_iso(kpath: &Path, firmware: &[&str], uefi: bool) {
    let work = tempfile::tempdir().unwrap();
    let kernel = std::fs::read(kpath).unwrap();
    let files = [kernel.as_slice(), &cmdline_initramfs()];
    let iso = if uefi {
        rhcos_iso_uefi(work.path(), "rhcos-boot", files, 1024)
    } else {
        rhcos_iso(work.path(), "rhcos-boot", files, 1024)
    };
    let http = free_port();
    let app = start(&iso.path, http);
    let base = format!("http://127.0.20.1:{http}");
    let url = format!("{base}/boot/worker-1.iso");
    // qemu reads the CD straight from the appliance (HEAD, then Range
    // GETs) when it can; otherwise a curl download is the CD.
    let by_http = qemu_has_curl();
    let drive = if by_http {
        format!("file.driver=http,file.url={url},media=cdrom,readonly=on,format=raw,if=ide")
    } else {
        let f = work.path().join("cd.iso");
        run_ok("curl", &["-sS", "-o", &f.display().to_string(), &url]);
        format!(
            "file={},media=cdrom,readonly=on,format=raw,if=ide",
            f.display()
        )
    };
    let log = work.path().join("serial.log");
    let serial = format!("file:{}", log.display());
    let mut args = firmware.to_vec();
    args.extend([
        "-machine",
        "pc",
        "-accel",
        "tcg",
        "-m",
        "512",
        "-display",
        "none",
        "-monitor",
        "none",
        "-no-reboot",
        "-nic",
        "none",
        "-boot",
        "d",
        "-drive",
        &drive,
        "-serial",
        &serial,
    ]);
    let _vm = Qemu(
        Command::new("qemu-system-x86_64")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(work.path().join("qemu.err")).unwrap(),
            ))
            .spawn()
            .expect("qemu"),
    );
    let Some(line) = wait_for(&log, CMDLINE_MARK, Duration::from_secs(420)) else {
        let err = std::fs::read_to_string(work.path().join("qemu.err")).unwrap_or_default();
        panic!(
            "the guest never printed its command line;\nserial tail:\n{}\nqemu: {err}\nappliance:\n{}",
            tail(&log, 3000),
            app.log()
        );
    };
    eprintln!(
        "guest ({}, CD over {}): {line}",
        if uefi {
            "OVMF + GRUB"
        } else {
            "SeaBIOS + ISOLINUX"
        },
        if by_http { "HTTP" } else { "a file" }
    );
    for needle in [
        format!("coreos.inst.ignition_url={base}/ignition/worker-1.ign"),
        "coreos.inst.install_dev=/dev/vdb".to_string(),
        "crc.node=worker-1".to_string(),
        "crc.role=worker".to_string(),
        "crc.test=1".to_string(),
        "coreos.liveiso=rhcos-boot".to_string(),
        "crc.iso.default=1".to_string(),
    ] {
        assert!(line.contains(&needle), "cmdline lacks {needle}: {line}");
    }
    assert!(!line.contains("coreos.live.rootfs_url"), "{line}");
    if by_http {
        // qemu fetched by ranges from the appliance.
        let http = app.status().http.expect("an http section");
        let by_status = &http.responses_by_status;
        let partial = by_status.get("206").copied().unwrap_or(0);
        assert!(partial > 0, "no 206 answers: {by_status:?}");
        eprintln!("qemu read the CD in {partial} range requests");
    }
}

#[test]
fn only_the_cluster_and_boot_iso_networks_get_the_iso() {
    if let Err(why) = tools_ok().and_then(|_| common::netns_available("crcisoacl")) {
        skipped!("SKIPPED only_the_cluster_and_boot_iso_networks_get_the_iso: {why}");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let iso = rhcos_iso(work.path(), "acl", [b"kernel", b"initrd"], 1024);
    // One namespace, three local addresses: the cluster's (the appliance),
    // one in http.bootIsoCidrs (a BMC) and one in neither.
    let ns = common::Netns::new(common::unique_name("crciso"));
    ns.ip(&["link", "add", "d0", "type", "bridge"]);
    for a in ["10.79.0.1/24", "192.0.2.5/24", "198.51.100.5/24"] {
        ns.ip(&["addr", "add", a, "dev", "d0"]);
    }
    ns.ip(&["link", "set", "d0", "up"]);
    let yaml = format!(
        r#"name: acl
baseDomain: crc.testing
network: {{ cidr: 10.79.0.0/24, gateway: 10.79.0.1, applianceIP: 10.79.0.1 }}
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:79:00:0a", ip: 10.79.0.10 }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false, leaseFile: "{{dir}}/leases.json" }}
loadBalancer: {{ enabled: false }}
admin: {{ enabled: false }}
http:
  listen: 10.79.0.1:8080
  imagesDir: "{{dir}}/images"
  ignitionDir: "{{dir}}/ign"
  bootIsoCidrs: [192.0.2.0/24]
rhcos: {{ iso: {} }}
"#,
        iso.path.display()
    );
    let app = InProc::in_netns(ns.name()).start_yaml(&yaml);
    std::fs::create_dir_all(app.dir.path().join("ign")).unwrap();
    std::fs::write(
        app.dir.path().join("ign/master.ign"),
        "{\"ignition\":{\"version\":\"3.2.0\"}}",
    )
    .unwrap();
    let code = |from: &str, path: &str| {
        ns.exec(&[
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--interface",
            from,
            &format!("http://10.79.0.1:8080{path}"),
        ])
    };
    assert_eq!(code("10.79.0.1", "/boot/master-0.iso"), "200");
    assert_eq!(code("192.0.2.5", "/boot/master-0.iso"), "200");
    assert_eq!(code("198.51.100.5", "/boot/master-0.iso"), "403");
    // The BMC network gets the ISO, not the ignition it points to.
    assert_eq!(code("192.0.2.5", "/ignition/master-0.ign"), "403");
    assert_eq!(code("10.79.0.1", "/ignition/master-0.ign"), "200");
    app.wait_log("boot iso master-0.iso refused", Duration::from_secs(10));
    app.wait_log("boot iso master-0.iso served (GET", Duration::from_secs(10));
}
