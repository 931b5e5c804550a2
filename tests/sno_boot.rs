//! The single-node master's boot routes against the real services, run
//! in-process (`common::inproc`; inside the lab's network namespace with
//! `InProc::in_netns` where the test builds one):
//!
//! - `/boot/<master>.iso` is the live ISO with the bootstrap-in-place
//!   Ignition in its Ignition embed area: the real `coreos-installer`
//!   (`iso ignition show`) reads back exactly the file, `iso kargs show`
//!   has no `coreos.inst.` karg, and every byte outside the embed areas
//!   (`dev show iso --ignition` and the kargs areas) equals the original;
//!   Range and ETag (which changes with the file) as for any boot ISO;
//! - `xz` and `cpio` (independent of the appliance and of coreos-installer)
//!   unpack the area to `config.ign` with a CRC32 check;
//! - in a namespace: the node and the BMC network get the ISO and
//!   `/ignition/<master>.ign` (the bootstrap-in-place file), another address
//!   of the cluster network (a worker, a stranger) gets 403;
//! - qemu (TCG, SeaBIOS + ISOLINUX) boots the served ISO with a stand-in
//!   kernel whose initramfs prints the sha256 of `/config.ign`, unpacked by
//!   the kernel from the `ignition.img` initrd the bootloader loads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::initramfs::{ISOLINUX_BIN, LDLINUX_C32, RhcosIso, rhcos_iso};
use common::inproc::InProc;
use common::qemu::{Qemu, cmdline_initramfs_then, host_kernel, tail, wait_for};
use common::{free_port, have, run_ok};

const BIP: &str = "bootstrap-in-place-for-live-iso.ign";

/// A bootstrap-in-place-like config: valid JSON, tens of KiB of
/// base64-ish data so the compression has work to do.
fn bip_config(seed: u32) -> Vec<u8> {
    let data: String = common::pattern(30_000, seed)
        .iter()
        .map(|b| {
            char::from(
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                    [usize::from(*b % 64)],
            )
        })
        .collect();
    format!(
        "{{\"ignition\":{{\"version\":\"3.2.0\"}},\"storage\":{{\"files\":[{{\"path\":\"/opt/openshift/x\",\"contents\":{{\"source\":\"data:;base64,{data}\"}}}}]}}}}\n"
    )
    .into_bytes()
}

/// The single-node cluster on `net` (`10.78.0` or `127.0.23`): master-0
/// at `.10`, worker-0 at `.20`, the appliance at `.1`, HTTP on `port`.
fn yaml(net: &str, port: u16, iso: &Path, dir: &Path) -> String {
    format!(
        r#"name: sno
baseDomain: crc.testing
network: {{ cidr: {net}.0/24, gateway: {net}.1, applianceIP: {net}.1 }}
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:78:00:0a", ip: {net}.10 }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:78:00:14", ip: {net}.20 }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false, leaseFile: "{d}/leases.json" }}
admin: {{ enabled: false }}
http:
  listen: {net}.1:{port}
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
  bootIsoCidrs: [192.0.2.0/24]
rhcos: {{ iso: {iso}, kargs: [crc.test=1] }}
"#,
        d = dir.display(),
        iso = iso.display()
    )
}

/// A non-bootable ISO with the RHCOS live layout for coreos-installer,
/// whose ISO 9660 reader looks names up in upper case, as genisoimage
/// (RHCOS) writes them; xorriso's mkisofs mode writes them in lower case
/// once `-boot-info-table` (which ISOLINUX needs) is given, so the bootable
/// [`rhcos_iso`] is for qemu only. Kargs areas in `isolinux/isolinux.cfg`
/// and `EFI/redhat/grub.cfg` (listed in `coreos/kargs.json`), and a zeroed
/// 64 KiB `images/ignition.img` named by `coreos/igninfo.json`.
fn installer_iso(dir: &Path, volid: &str) -> RhcosIso {
    let area_size = 1024;
    let default_kargs =
        format!("coreos.liveiso={volid} ignition.firstboot ignition.platform.id=metal");
    let mut area = format!("{default_kargs}\n").into_bytes();
    area.resize(area_size, b'#');
    let with_area = |head: &str| -> (Vec<u8>, usize) {
        let mut t = head.as_bytes().to_vec();
        let at = t.len();
        t.extend_from_slice(&area);
        t.extend_from_slice(b"# COREOS_KARG_EMBED_AREA\n");
        (t, at)
    };
    let (isolinux_cfg, iso_at) = with_area("label linux\n  append ");
    let (grub_cfg, grub_at) = with_area("menuentry 'RHCOS' {\n\tlinux /images/pxeboot/vmlinuz ");
    let kargs_json = format!(
        r#"{{"default": "{default_kargs}", "files": [{{"path": "EFI/redhat/grub.cfg", "offset": {grub_at}}}, {{"path": "isolinux/isolinux.cfg", "offset": {iso_at}}}], "size": {area_size}}}"#
    );
    let ignition_img = vec![0u8; 64 * 1024];
    let extra: Vec<(&str, &[u8])> = vec![
        ("isolinux/isolinux.cfg", &isolinux_cfg),
        ("EFI/redhat/grub.cfg", &grub_cfg),
        ("coreos/kargs.json", kargs_json.as_bytes()),
        ("coreos/igninfo.json", br#"{"file": "images/ignition.img"}"#),
        ("images/ignition.img", &ignition_img),
    ];
    let path =
        common::initramfs::live_iso(dir, volid, [b"kernel", b"initrd", b"rootfs"], &extra, true);
    RhcosIso {
        path,
        default_kargs,
        area_size,
    }
}

/// A temp dir with `ign/<BIP>` = `config` and the cluster file.
fn setup(net: &str, port: u16, iso: &Path, config: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ign")).unwrap();
    std::fs::write(dir.path().join("ign").join(BIP), config).unwrap();
    let f = dir.path().join("cluster.yaml");
    std::fs::write(&f, yaml(net, port, iso, dir.path())).unwrap();
    (dir, f)
}

fn tools_ok() -> Result<(), String> {
    for t in ["curl", "xorriso", "busybox", "xz", "cpio"] {
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

/// `curl -D - -o out ARGS URL` → (status, headers).
fn curl(args: &[&str], url: &str, out: &Path) -> (u16, String) {
    let o = out.display().to_string();
    let mut a = vec!["-sS", "-D", "-", "-o", &o];
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

/// `[start, end)` of each kargs embed area in `orig` (found by scanning for
/// its default kargs, independently of the appliance).
fn kargs_areas(orig: &[u8], iso: &RhcosIso) -> Vec<(usize, usize)> {
    let needle = format!("{}\n#", iso.default_kargs).into_bytes();
    orig.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle.as_slice())
        .map(|(i, _)| (i, i + iso.area_size))
        .collect()
}

/// The Ignition area of `orig`: the zeroed `images/ignition.img`, located by
/// xorriso (its start block) — independent of the appliance's reader.
fn ignition_area(iso: &Path) -> (usize, usize) {
    let out = run_ok(
        "xorriso",
        &[
            "-indev",
            &iso.display().to_string(),
            "-find",
            "/images/ignition.img",
            "-exec",
            "report_lba",
        ],
    );
    // "File data lba:  0 ,  <lba> ,  <blocks> ,  <bytes> , '/images/ignition.img'"
    let line = out
        .lines()
        .find(|l| l.contains("ignition.img"))
        .unwrap_or_else(|| panic!("no ignition.img in {out}"));
    let nums: Vec<usize> = line
        .split(',')
        .filter_map(|f| f.trim().parse().ok())
        .collect();
    let (lba, bytes) = (nums[0], nums[2]);
    (lba * 2048, lba * 2048 + bytes)
}

/// `xz -dc | cpio -i` of `area` (zero padding removed) into a temp dir:
/// the files and the xz check type.
fn unpack(area: &[u8]) -> (Vec<(String, Vec<u8>)>, String) {
    let end = area.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    let dir = tempfile::tempdir().unwrap();
    let xzf = dir.path().join("ign.xz");
    std::fs::write(&xzf, &area[..end]).unwrap();
    let list = run_ok("xz", &["--robot", "--list", &xzf.display().to_string()]);
    let check = list
        .lines()
        .find(|l| l.starts_with("file"))
        .and_then(|l| l.split('\t').nth(6))
        .unwrap_or("?")
        .to_string();
    let cpio = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd {} && xz -dc ign.xz | cpio -i --quiet -d && rm ign.xz",
            dir.path().display()
        ))
        .output()
        .unwrap();
    assert!(cpio.status.success(), "{cpio:?}");
    let files = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    (files, check)
}

#[test]
fn served_iso_carries_the_bootstrap_in_place_ignition_and_nothing_else() {
    if let Err(why) = tools_ok() {
        skipped!(
            "SKIPPED served_iso_carries_the_bootstrap_in_place_ignition_and_nothing_else: {why}"
        );
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let iso = installer_iso(work.path(), "sno");
    let orig = std::fs::read(&iso.path).unwrap();
    let config = bip_config(7);
    let port = free_port();
    let (dir, f) = setup("127.0.23", port, &iso.path, &config);
    let app = InProc::start_file(dir, f);
    let url = format!("http://127.0.23.1:{port}/boot/master-0.iso");
    let served_path = work.path().join("served.iso");
    let (status, h) = curl(&[], &url, &served_path);
    assert_eq!(status, 200, "{h}\n{}", app.log());
    let served = std::fs::read(&served_path).unwrap();
    assert_eq!(served.len(), orig.len());

    // Outside the kargs areas and the Ignition area, the original bytes.
    let mut regions = kargs_areas(&orig, &iso);
    assert_eq!(regions.len(), 2, "two kargs areas");
    let ign = ignition_area(&iso.path);
    regions.push(ign);
    for (i, (a, b)) in orig.iter().zip(&served).enumerate() {
        if a != b {
            assert!(
                regions.iter().any(|(s, e)| (*s..*e).contains(&i)),
                "byte {i} differs outside the embed areas {regions:?}"
            );
        }
    }
    // The Ignition area, unpacked by xz and cpio: config.ign, CRC32.
    let (files, check) = unpack(&served[ign.0..ign.1]);
    assert_eq!(check, "CRC32", "xz check");
    assert_eq!(
        files.len(),
        1,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    assert_eq!(files[0].0, "config.ign");
    assert!(files[0].1 == config, "config.ign differs from {BIP}");
    // The kargs: the ISO's own, the consoles and rhcos.kargs; no install.
    for (s, e) in kargs_areas(&orig, &iso) {
        let k = String::from_utf8_lossy(&served[s..e]).to_string();
        let k = k.split('\n').next().unwrap().to_string();
        assert!(!k.contains("coreos.inst."), "{k}");
        assert!(
            k.starts_with(&iso.default_kargs) && k.contains("console=ttyS0,115200n8 crc.test=1"),
            "{k}"
        );
    }

    // Range across the Ignition area, and the ETag.
    let etag = header(&h, "etag").expect("etag").to_string();
    let part = work.path().join("part");
    let range = format!("bytes={}-{}", ign.0 - 100, ign.0 + 99);
    let (status, h2) = curl(&["-r", &range[6..]], &url, &part);
    assert_eq!(status, 206, "{h2}");
    assert_eq!(
        std::fs::read(&part).unwrap(),
        &served[ign.0 - 100..ign.0 + 100]
    );
    assert_eq!(header(&h2, "etag"), Some(etag.as_str()));
    let (status, _) = curl(&["-H", &format!("If-None-Match: {etag}")], &url, &part);
    assert_eq!(status, 304);

    // The real coreos-installer reads back exactly the file.
    match common::coreos_installer() {
        Err(why) => skipped!(
            "SKIPPED served_iso_carries_the_bootstrap_in_place_ignition_and_nothing_else (coreos-installer part): {why}"
        ),
        Ok(ci) => {
            let ci = ci.display().to_string();
            let p = served_path.display().to_string();
            let out = Command::new(&ci)
                .args(["iso", "ignition", "show", &p])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            assert!(out.stdout == config, "iso ignition show differs from {BIP}");
            let kargs = run_ok(&ci, &["iso", "kargs", "show", &p]);
            assert!(!kargs.contains("coreos.inst."), "{kargs}");
            assert!(kargs.contains("ignition.firstboot"), "{kargs}");
            let hdr = run_ok(&ci, &["dev", "show", "iso", "--ignition", &p]);
            assert!(hdr.contains(&format!("\"offset\": {}", ign.0)), "{hdr}");
            // The original has no config embedded.
            let o = Command::new(&ci)
                .args(["iso", "ignition", "show", &iso.path.display().to_string()])
                .output()
                .unwrap();
            assert!(!o.status.success() || o.stdout.is_empty(), "{o:?}");
        }
    }

    // A new file: a new ETag and the new config.
    let config2 = bip_config(8);
    std::fs::write(app.dir.path().join("ign").join(BIP), &config2).unwrap();
    let _ = &app;
    let (status, h3) = curl(&[], &url, &served_path);
    assert_eq!(status, 200);
    assert_ne!(header(&h3, "etag"), Some(etag.as_str()));
    let served = std::fs::read(&served_path).unwrap();
    let (files, _) = unpack(&served[ign.0..ign.1]);
    assert!(files[0].1 == config2, "the changed file is not served");
}

#[test]
fn only_the_node_and_the_bmc_network_get_the_single_node_iso() {
    if let Err(why) = tools_ok().and_then(|_| common::netns_available("crcsnoacl")) {
        skipped!("SKIPPED only_the_node_and_the_bmc_network_get_the_single_node_iso: {why}");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let iso = rhcos_iso(work.path(), "snoacl", [b"kernel", b"initrd"], 1024);
    let ns = common::Netns::new(common::unique_name("crcsno"));
    ns.ip(&["link", "add", "d0", "type", "bridge"]);
    for a in [
        "10.78.0.1/24",
        "10.78.0.10/24",
        "10.78.0.20/24",
        "10.78.0.99/24",
        "192.0.2.5/24",
    ] {
        ns.ip(&["addr", "add", a, "dev", "d0"]);
    }
    ns.ip(&["link", "set", "d0", "up"]);
    let config = bip_config(9);
    let (dir, f) = setup("10.78.0", 8080, &iso.path, &config);
    let app = InProc::in_netns(ns.name()).start_file(dir, f);
    let fetch = |from: &str, path: &str, out: &str| {
        ns.exec(&[
            "curl",
            "-sS",
            "-o",
            out,
            "-w",
            "%{http_code}",
            "--interface",
            from,
            &format!("http://10.78.0.1:8080{path}"),
        ])
    };
    let out = work.path().join("o");
    let o = out.display().to_string();
    // The node itself: the ISO and its Ignition (the bootstrap-in-place file).
    assert_eq!(
        fetch("10.78.0.10", "/boot/master-0.iso", "/dev/null"),
        "200"
    );
    assert_eq!(fetch("10.78.0.10", "/ignition/master-0.ign", &o), "200");
    assert!(std::fs::read(&out).unwrap() == config, "ignition differs");
    // The BMC network: the ISO, not the Ignition.
    assert_eq!(fetch("192.0.2.5", "/boot/master-0.iso", "/dev/null"), "200");
    assert_eq!(
        fetch("192.0.2.5", "/ignition/master-0.ign", "/dev/null"),
        "403"
    );
    // Anyone else on the cluster network, the worker included: 403.
    for who in ["10.78.0.20", "10.78.0.99"] {
        assert_eq!(
            fetch(who, "/boot/master-0.iso", "/dev/null"),
            "403",
            "{who}"
        );
        assert_eq!(
            fetch(who, "/ignition/master-0.ign", "/dev/null"),
            "403",
            "{who}"
        );
    }
    // No role ISO carries the single-node secrets.
    assert_eq!(fetch("10.78.0.1", "/boot/master.iso", "/dev/null"), "404");
    app.wait_log("boot iso master-0.iso refused", Duration::from_secs(10));
}

/// The line the stand-in guest prints before the sha256 of `/config.ign`.
const SHA_MARK: &str = "CRC-CONFIG-SHA256:";

#[test]
fn qemu_boots_the_served_iso_and_its_initramfs_holds_the_config() {
    let kpath = match tools_ok().and_then(|_| {
        if !have("qemu-system-x86_64") {
            return Err("qemu-system-x86 is not installed".into());
        }
        host_kernel().ok_or_else(|| "no /boot/vmlinuz-*".to_string())
    }) {
        Ok(k) => k,
        Err(why) => {
            skipped!("SKIPPED qemu_boots_the_served_iso_and_its_initramfs_holds_the_config: {why}");
            return;
        }
    };
    let work = tempfile::tempdir().unwrap();
    let kernel = std::fs::read(&kpath).unwrap();
    let initrd = cmdline_initramfs_then(&format!(
        "echo \"{SHA_MARK} $(/bin/busybox sha256sum /config.ign 2>&1)\" > /dev/ttyS0\n/bin/busybox poweroff -f"
    ));
    let iso = rhcos_iso(work.path(), "snoboot", [&kernel, &initrd], 1024);
    let config = bip_config(11);
    let cfg_file = work.path().join("cfg");
    std::fs::write(&cfg_file, &config).unwrap();
    let want = run_ok("sha256sum", &[&cfg_file.display().to_string()]);
    let want = want.split_whitespace().next().unwrap().to_string();
    let port = free_port();
    let (dir, f) = setup("127.0.23", port, &iso.path, &config);
    let app = InProc::start_file(dir, f);
    let cd = work.path().join("cd.iso");
    let (status, _) = curl(
        &[],
        &format!("http://127.0.23.1:{port}/boot/master-0.iso"),
        &cd,
    );
    assert_eq!(status, 200, "{}", app.log());
    let log = work.path().join("serial.log");
    let drive = format!(
        "file={},media=cdrom,readonly=on,format=raw,if=ide",
        cd.display()
    );
    let serial = format!("file:{}", log.display());
    let _vm = Qemu(
        Command::new("qemu-system-x86_64")
            .args([
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
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(work.path().join("qemu.err")).unwrap(),
            ))
            .spawn()
            .expect("qemu"),
    );
    let Some(line) = wait_for(&log, SHA_MARK, Duration::from_secs(420)) else {
        panic!(
            "the guest never printed the config's sha256;\nserial tail:\n{}",
            tail(&log, 3000)
        );
    };
    eprintln!("guest: {line}");
    assert!(
        line.contains(&format!("{SHA_MARK} {want}")),
        "want {want}: {line}"
    );
    let cmdline = wait_for(&log, "CRC-CMDLINE:", Duration::from_secs(5)).unwrap_or_default();
    assert!(!cmdline.contains("coreos.inst."), "{cmdline}");
}

/// The single-node master's iPXE script, fetched by the real iPXE ROM
/// (SeaBIOS, `ipxe-qemu`'s e1000 ROM) in qemu on a bridge in a namespace:
/// DHCP and the script from the appliance, the kernel and initramfs read
/// out of a live-ISO look-alike; the guest's `/proc/cmdline` carries
/// `ignition.config.url` and the live rootfs URL, no `coreos.inst.` karg.
#[test]
fn ipxe_rom_boots_the_single_node_script_without_install_kargs() {
    let rom = "/usr/lib/ipxe/qemu/pxe-e1000.rom";
    let kpath = match common::netns_available("crcsnoq")
        .and_then(|_| {
            for t in ["qemu-system-x86_64", "xorriso", "busybox", "curl"] {
                if !have(t) {
                    return Err(format!("{t} is not installed"));
                }
            }
            if !Path::new(rom).is_file() {
                return Err("ipxe-qemu is not installed".into());
            }
            Ok(())
        })
        .and_then(|_| host_kernel().ok_or_else(|| "no /boot/vmlinuz-*".to_string()))
    {
        Ok(k) => k,
        Err(why) => {
            skipped!("SKIPPED ipxe_rom_boots_the_single_node_script_without_install_kargs: {why}");
            return;
        }
    };
    let work = tempfile::tempdir().unwrap();
    let kernel = std::fs::read(kpath).unwrap();
    let iso = common::initramfs::live_iso(
        work.path(),
        "live",
        [&kernel, &common::qemu::cmdline_initramfs(), b"rootfs"],
        &[],
        true,
    );
    let ns = common::Netns::new(common::unique_name("crcsnq"));
    let net = "10.89.0";
    ns.ip(&["link", "set", "lo", "up"]);
    ns.ip(&["link", "add", "br0", "type", "bridge"]);
    ns.ip(&["addr", "add", &format!("{net}.1/24"), "dev", "br0"]);
    ns.ip(&["link", "set", "br0", "up"]);
    ns.ip(&["tuntap", "add", "dev", "tap0", "mode", "tap"]);
    ns.ip(&["link", "set", "tap0", "master", "br0"]);
    ns.ip(&["link", "set", "tap0", "up"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ign")).unwrap();
    std::fs::write(dir.path().join("ign").join(BIP), bip_config(3)).unwrap();
    let yaml = format!(
        r#"name: sno
baseDomain: crc.testing
network: {{ cidr: {net}.0/24, gateway: {net}.1, applianceIP: {net}.1, interface: br0 }}
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:59:00:0a", ip: {net}.10 }}
dns: {{ enabled: false }}
dhcp:
  listen: 0.0.0.0:67
  leaseFile: "{d}/leases.json"
http:
  listen: {net}.1:8080
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
admin: {{ enabled: false }}
pxe:
  tftpListen: {net}.1:69
rhcos:
  iso: {iso}
  kargs: [crc.test=1]
"#,
        d = dir.path().display(),
        iso = iso.display()
    );
    let f = dir.path().join("cluster.yaml");
    std::fs::write(&f, yaml).unwrap();
    let app = InProc::in_netns(&ns.0).start_file(dir, f);
    let log = work.path().join("serial.log");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.0, "qemu-system-x86_64"])
        .args([
            "-machine",
            "pc",
            "-boot",
            "n",
            "-m",
            "768",
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
            "-netdev",
            "tap,id=n0,ifname=tap0,script=no,downscript=no",
            "-device",
            &format!("e1000,romfile={rom},netdev=n0,mac=52:54:00:59:00:0a"),
            "-serial",
            &format!("file:{}", log.display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _vm = Qemu(cmd.spawn().expect("qemu"));
    let Some(line) = wait_for(&log, common::qemu::CMDLINE_MARK, Duration::from_secs(420)) else {
        panic!(
            "the guest never printed its command line;\nserial tail:\n{}\nappliance:\n{}",
            tail(&log, 3000),
            app.log()
        );
    };
    eprintln!("guest: {line}");
    for needle in [
        format!("ignition.config.url=http://{net}.1:8080/ignition/master-0.ign"),
        format!("coreos.live.rootfs_url=http://{net}.1:8080/boot/rootfs.img"),
        "ignition.firstboot".to_string(),
        "ignition.platform.id=metal".to_string(),
        "crc.test=1".to_string(),
    ] {
        assert!(line.contains(&needle), "cmdline lacks {needle}: {line}");
    }
    assert!(!line.contains("coreos.inst."), "install karg in {line}");
    assert!(
        app.log().contains("netboot: script served"),
        "{}",
        app.log()
    );
}
