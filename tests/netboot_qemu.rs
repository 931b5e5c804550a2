//! Network boot with real firmware in qemu (TCG), end to end through the
//! appliance alone, on a bridge in a network namespace of the test's own:
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
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::initramfs::live_iso;
use common::qemu::{CMDLINE_MARK, Qemu, cmdline_initramfs, host_kernel, tail, wait_for};
use common::{Appliance, Netns, netns_available, unique_name};

/// Boot one VM with `firmware` args in a fresh namespace; returns the
/// guest's command line line and the appliance log.
fn boot(firmware: &[&str], nic: &str, octet: u8) -> (Option<String>, String, String, u64) {
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
    let app = Appliance::launch()
        .netns(&ns.0)
        .ready_timeout(Duration::from_secs(60))
        .start(&yaml);
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
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.0, "qemu-system-x86_64"])
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _vm = Qemu(cmd.spawn().expect("qemu"));
    let line = wait_for(&log, CMDLINE_MARK, Duration::from_secs(420));
    let serial = tail(&log, 3000);
    // TFTP transfers that completed, from /status inside the namespace.
    let status = ns.exec(&[
        "curl",
        "-sS",
        "--max-time",
        "5",
        &format!("http://{}/status", app.addr("admin")),
    ]);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap_or_default();
    let tftp_done = v["tftp"]["transfers"]["completed"].as_u64().unwrap_or(0);
    (line, app.log(), serial, tftp_done)
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

#[test]
fn seabios_ipxe_rom_boots_the_node_script() {
    if let Err(why) = tools_ok() {
        skipped!("SKIPPED seabios_ipxe_rom_boots_the_node_script: {why}");
        return;
    }
    // i440fx + e1000 with iPXE's ROM: SeaBIOS runs it and boots from it
    // (Debian's 2019 virtio ROM registers no boot entry on q35).
    let rom = "/usr/lib/ipxe/qemu/pxe-e1000.rom";
    require!(Path::new(rom).is_file(), "ipxe-qemu is not installed");
    let (line, log, serial, tftp) = boot(
        &["-machine", "pc", "-boot", "n"],
        &format!("e1000,romfile={rom}"),
        87,
    );
    check(line, &log, &serial, 87);
    assert_eq!(tftp, 0, "the iPXE ROM should go straight to HTTP");
}

#[test]
fn ovmf_pxe_tftp_ipxe_boots_the_node_script() {
    if let Err(why) = tools_ok() {
        skipped!("SKIPPED ovmf_pxe_tftp_ipxe_boots_the_node_script: {why}");
        return;
    }
    let fw = "/usr/share/ovmf/OVMF.fd";
    require!(Path::new(fw).is_file(), "ovmf is not installed");
    require!(
        Path::new("/usr/lib/ipxe/snponly.efi").exists(),
        "ipxe (snponly.efi) is not installed"
    );
    // q35 + OVMF's own virtio-net driver and PXE client (no NIC ROM).
    let (line, log, serial, tftp) = boot(
        &["-machine", "q35", "-bios", fw],
        "virtio-net-pci,romfile=",
        88,
    );
    check(line, &log, &serial, 88);
    // EDK2's PXE fetched the iPXE binary over TFTP first.
    assert!(tftp >= 1, "no completed TFTP transfer:\n{log}");
}
