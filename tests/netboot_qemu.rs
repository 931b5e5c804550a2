//! Network boot with real firmware in qemu (TCG), end to end through the
//! appliance alone (in-process, inside the namespace: `InProc::in_netns`),
//! on a bridge in a network namespace of the test's own:
//!
//! - SeaBIOS with the iPXE NIC ROM (Debian `ipxe-qemu`): iPXE's DHCP (user
//!   class `iPXE`) gets the entry script URL straight away.
//! - OVMF (Debian `ovmf`) with the NIC ROM disabled, so EDK2's own PXE
//!   client asks (arch 7): DHCP → `snponly.efi` over the appliance's TFTP →
//!   iPXE → the entry script over HTTP.
//!
//! Both then chain to the node's script, boot the kernel and initramfs read
//! out of a live-ISO look-alike (the host's Debian kernel and a busybox
//! initramfs), and the guest prints its `/proc/cmdline` on the serial
//! console, which must carry the node's `coreos.inst.*` kernel arguments.
//!
//! After an install whose end was not seen (issue #28: master-0 fetched its
//! script and ignition from its own address first, nothing more), the
//! disk-or-install script with a disk attached: on SeaBIOS a blank disk
//! (what a failed coreos-installer leaves) falls through `sanboot` to the
//! installer, and a bootable one (a boot sector that prints a mark on
//! COM1) boots instead; on OVMF a blank disk gets the installer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::initramfs::live_iso;
use common::inproc::InProc;
use common::qemu::{CMDLINE_MARK, Qemu, cmdline_initramfs, host_kernel, tail, wait_for_any};
use common::{Netns, netns_available, unique_name};

/// The VM's first disk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Disk {
    /// No disk.
    None,
    /// All zeros: what a failed coreos-installer leaves (it writes the
    /// first MiB last).
    Blank,
    /// An MBR whose boot code prints [`DISK_MARK`] on COM1 and halts.
    Bootable,
}

/// What the boot code of [`Disk::Bootable`] prints on the serial port.
const DISK_MARK: &str = "CRC-DISK-BOOTED";

/// A 1 MiB disk image: blank, or with a boot sector (hand-assembled 16-bit
/// code: `out` each byte of [`DISK_MARK`] to 0x3f8, then `hlt`).
fn disk_image(path: &Path, kind: Disk) {
    let mut img = vec![0u8; 1 << 20];
    if kind == Disk::Bootable {
        #[rustfmt::skip]
        let code: [u8; 22] = [
            0xfa,             // cli
            0x31, 0xc0,       // xor ax, ax
            0x8e, 0xd8,       // mov ds, ax
            0xbe, 0x16, 0x7c, // mov si, 0x7c16 (the message, after the code)
            0xba, 0xf8, 0x03, // mov dx, 0x3f8 (COM1)
            0xac,             // lodsb
            0x84, 0xc0,       // test al, al
            0x74, 0x03,       // jz +3 (to hlt)
            0xee,             // out dx, al
            0xeb, 0xf8,       // jmp -8 (to lodsb)
            0xf4,             // hlt
            0xeb, 0xfd,       // jmp -3 (to hlt)
        ];
        img[..code.len()].copy_from_slice(&code);
        let msg = format!("{DISK_MARK}\r\n\0");
        img[code.len()..code.len() + msg.len()].copy_from_slice(msg.as_bytes());
        img[510] = 0x55;
        img[511] = 0xaa;
    }
    std::fs::write(path, img).unwrap();
}

/// What a boot showed.
struct Booted {
    /// The guest's command-line line, when the install kernel ran.
    line: Option<String>,
    /// The disk's boot code ran.
    disk_booted: bool,
    app_log: String,
    serial: String,
    tftp_done: u64,
}

/// Boot one VM with `firmware` args and `disk` in a fresh namespace. With
/// `unconfirmed`, master-0 first fetches its script and its ignition from
/// its own address (a temporary address in the namespace), so the VM's
/// boot is the one after an install whose end was not seen.
fn boot(firmware: &[&str], nic: &str, octet: u8, disk: Disk, unconfirmed: bool) -> Booted {
    let work = tempfile::tempdir().unwrap();
    let kernel = std::fs::read(host_kernel().unwrap()).unwrap();
    let iso = live_iso(
        work.path(),
        "live",
        [&kernel, &cmdline_initramfs(), b"rootfs"],
        &[],
        true,
    );

    let ns = Netns::new(unique_name("crcnb"));
    let net = format!("10.{octet}.0");
    ns.ip(&["link", "set", "lo", "up"]);
    ns.ip(&["link", "add", "br0", "type", "bridge"]);
    ns.ip(&["addr", "add", &format!("{net}.1/24"), "dev", "br0"]);
    ns.ip(&["link", "set", "br0", "up"]);
    ns.ip(&["tuntap", "add", "dev", "tap0", "mode", "tap"]);
    ns.ip(&["link", "set", "tap0", "master", "br0"]);
    ns.ip(&["link", "set", "tap0", "up"]);
    let yaml = format!(
        r#"name: nb
baseDomain: crc.testing
network: {{ cidr: {net}.0/24, gateway: {net}.1, applianceIP: {net}.1, interface: br0 }}
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:{octet:02x}:00:0a", ip: {net}.10 }}
dns: {{ enabled: false }}
loadBalancer: {{ enabled: false }}
dhcp:
  listen: 0.0.0.0:67
  leaseFile: "{{dir}}/leases.json"
http:
  listen: {net}.1:8080
  imagesDir: "{{dir}}/images"
  ignitionDir: "{{dir}}/ign"
admin:
  listen: 127.0.0.1:0
pxe:
  tftpListen: {net}.1:69
rhcos:
  iso: {}
  kargs: [crc.test=1]
"#,
        iso.display()
    );
    let app = InProc::in_netns(&ns.0).start_yaml(&yaml);
    if unconfirmed {
        make_unconfirmed(&ns, &app, &net, octet);
    }
    let log = work.path().join("serial.log");
    let mut args: Vec<String> = firmware.iter().map(|s| s.to_string()).collect();
    args.extend(
        [
            "-m",
            "768",
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
            "-netdev",
            "tap,id=n0,ifname=tap0,script=no,downscript=no",
        ]
        .map(String::from),
    );
    args.push("-device".into());
    args.push(format!("{nic},netdev=n0,mac=52:54:00:{octet:02x}:00:0a"));
    args.push("-serial".into());
    args.push(format!("file:{}", log.display()));
    if disk != Disk::None {
        let img = work.path().join("disk.img");
        disk_image(&img, disk);
        args.push("-drive".into());
        args.push(format!("file={},format=raw,if=ide,index=0", img.display()));
    }
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.0, "qemu-system-x86_64"])
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _vm = Qemu(cmd.spawn().expect("qemu"));
    let found = wait_for_any(&log, &[CMDLINE_MARK, DISK_MARK], Duration::from_secs(420));
    let serial = tail(&log, 3000);
    // TFTP transfers that completed, from the typed status.
    let tftp_done = app
        .status()
        .tftp
        .and_then(|t| t.transfers.get("completed").copied())
        .unwrap_or(0);
    Booted {
        disk_booted: found.as_deref().is_some_and(|l| l.contains(DISK_MARK)),
        line: found.filter(|l| l.contains(CMDLINE_MARK)),
        app_log: app.log(),
        serial,
        tftp_done,
    }
}

/// master-0 (`<net>.10`) fetches its install script and its ignition from
/// its own address (on `lo` for the moment; the VM gets it by DHCP later):
/// its state is `unconfirmed`, as after an install that failed after its
/// ignition fetch.
fn make_unconfirmed(ns: &Netns, app: &InProc, net: &str, octet: u8) {
    std::fs::create_dir_all(app.dir.path().join("ign")).unwrap();
    std::fs::write(
        app.dir.path().join("ign/master.ign"),
        r#"{"ignition":{"version":"3.2.0"}}"#,
    )
    .unwrap();
    let me = format!("{net}.10");
    ns.ip(&["addr", "add", &format!("{me}/32"), "dev", "lo"]);
    let get = |path: &str| {
        let url = format!("http://{net}.1:8080{path}");
        ns.exec(&[
            "curl",
            "-sS",
            "-f",
            "--max-time",
            "10",
            "--interface",
            &me,
            &url,
        ])
    };
    let script = get(&format!("/boot/52-54-00-{octet:02x}-00-0a.ipxe"));
    assert!(script.contains("\nkernel "), "{script}");
    get("/ignition/master-0.ign");
    ns.ip(&["addr", "del", &format!("{me}/32"), "dev", "lo"]);
    let http = app.status().http.expect("http runs");
    let state = http.netboot.first().map(|n| n.state.as_str());
    assert_eq!(state, Some("unconfirmed"), "{:?}", http.netboot);
}

fn check(line: Option<String>, app_log: &str, serial: &str, octet: u8) {
    let Some(line) = line else {
        panic!(
            "the guest never printed its command line;\nserial tail:\n{serial}\nappliance:\n{app_log}"
        );
    };
    let net = format!("10.{octet}.0");
    for needle in [
        format!("coreos.inst.ignition_url=http://{net}.1:8080/ignition/master-0.ign"),
        format!("coreos.live.rootfs_url=http://{net}.1:8080/boot/rootfs.img"),
        "coreos.inst.install_dev=/dev/sda".to_string(),
        "ignition.platform.id=metal".to_string(),
        "crc.test=1".to_string(),
    ] {
        assert!(line.contains(&needle), "cmdline lacks {needle}: {line}");
    }
    assert!(app_log.contains("netboot: script served"), "{app_log}");
}

fn tools_ok() -> Result<(), String> {
    netns_available("crcnbq")?;
    for t in ["qemu-system-x86_64", "xorriso", "busybox"] {
        if !common::have(t) {
            return Err(format!("{t} is not installed"));
        }
    }
    host_kernel().ok_or("no /boot/vmlinuz-*")?;
    Ok(())
}

/// SeaBIOS + the iPXE ROM of an e1000 on `-machine pc`.
const SEABIOS_ROM: &str = "/usr/lib/ipxe/qemu/pxe-e1000.rom";
const OVMF: &str = "/usr/share/ovmf/OVMF.fd";

fn seabios(octet: u8, disk: Disk, unconfirmed: bool) -> Booted {
    boot(
        &["-machine", "pc", "-boot", "n"],
        &format!("e1000,romfile={SEABIOS_ROM}"),
        octet,
        disk,
        unconfirmed,
    )
}

/// q35 + OVMF's own virtio-net driver and PXE client (no NIC ROM).
fn ovmf(octet: u8, disk: Disk, unconfirmed: bool) -> Booted {
    boot(
        &["-machine", "q35", "-bios", OVMF],
        "virtio-net-pci,romfile=",
        octet,
        disk,
        unconfirmed,
    )
}

fn ovmf_ok() -> Result<(), String> {
    tools_ok()?;
    if !Path::new(OVMF).is_file() {
        return Err("ovmf is not installed".into());
    }
    if !Path::new("/usr/lib/ipxe/snponly.efi").exists() {
        return Err("ipxe (snponly.efi) is not installed".into());
    }
    Ok(())
}

/// The appliance served master-0 the disk-or-install script.
fn served_disk_or_install(b: &Booted) {
    assert!(
        b.app_log.contains("script=DiskOrInstall"),
        "not the disk-or-install script:\n{}",
        b.app_log
    );
}

#[test]
fn seabios_ipxe_rom_boots_the_node_script() {
    if let Err(why) = tools_ok() {
        skipped!("SKIPPED seabios_ipxe_rom_boots_the_node_script: {why}");
        return;
    }
    // i440fx + e1000 with iPXE's ROM: SeaBIOS runs it and boots from it
    // (Debian's 2019 virtio ROM registers no boot entry on q35).
    require!(
        Path::new(SEABIOS_ROM).is_file(),
        "ipxe-qemu is not installed"
    );
    let b = seabios(87, Disk::None, false);
    check(b.line, &b.app_log, &b.serial, 87);
    assert_eq!(b.tftp_done, 0, "the iPXE ROM should go straight to HTTP");
}

#[test]
fn ovmf_pxe_tftp_ipxe_boots_the_node_script() {
    if let Err(why) = ovmf_ok() {
        skipped!("SKIPPED ovmf_pxe_tftp_ipxe_boots_the_node_script: {why}");
        return;
    }
    let b = ovmf(88, Disk::None, false);
    check(b.line, &b.app_log, &b.serial, 88);
    // EDK2's PXE fetched the iPXE binary over TFTP first.
    assert!(
        b.tftp_done >= 1,
        "no completed TFTP transfer:\n{}",
        b.app_log
    );
}

/// Issue #28: after an install whose end was not seen (ignition fetched,
/// no image download), BIOS iPXE gets `sanboot` of the first disk with
/// the installer behind it: a blank disk (a failed install) does not boot,
/// so the installer runs.
#[test]
fn seabios_unconfirmed_blank_disk_falls_back_to_the_installer() {
    if let Err(why) = tools_ok() {
        skipped!("SKIPPED seabios_unconfirmed_blank_disk_falls_back_to_the_installer: {why}");
        return;
    }
    require!(
        Path::new(SEABIOS_ROM).is_file(),
        "ipxe-qemu is not installed"
    );
    let b = seabios(89, Disk::Blank, true);
    assert!(!b.disk_booted);
    served_disk_or_install(&b);
    check(b.line, &b.app_log, &b.serial, 89);
}

/// The same script on BIOS with a bootable disk (the install did finish,
/// its end just was not seen): `sanboot` boots the disk, no install.
#[test]
fn seabios_unconfirmed_bootable_disk_boots_the_disk() {
    if let Err(why) = tools_ok() {
        skipped!("SKIPPED seabios_unconfirmed_bootable_disk_boots_the_disk: {why}");
        return;
    }
    require!(
        Path::new(SEABIOS_ROM).is_file(),
        "ipxe-qemu is not installed"
    );
    let b = seabios(90, Disk::Bootable, true);
    served_disk_or_install(&b);
    assert!(
        b.disk_booted && b.line.is_none(),
        "the disk's boot code did not run (line {:?});\nserial:\n{}\nappliance:\n{}",
        b.line,
        b.serial,
        b.app_log
    );
}

/// UEFI: iPXE skips the BIOS disk attempt (`${platform}` is `efi`), so a
/// blank disk gets the installer (as any disk does: see
/// docs/bare-metal.md).
#[test]
fn ovmf_unconfirmed_blank_disk_gets_the_installer() {
    if let Err(why) = ovmf_ok() {
        skipped!("SKIPPED ovmf_unconfirmed_blank_disk_gets_the_installer: {why}");
        return;
    }
    let b = ovmf(91, Disk::Blank, true);
    served_disk_or_install(&b);
    check(b.line, &b.app_log, &b.serial, 91);
}
