//! Network boot with real firmware in qemu (TCG) beside the site's DHCP
//! server: Kea or dnsmasq lends the address, the appliance in
//! `dhcp.mode: proxy` gives the boot answers (tests/common/segment.rs:
//! one bridge, the site server, the appliance, qemu's tap). The appliance
//! runs in-process inside its namespace (`InProc::in_netns`); its status is
//! the typed document.
//!
//! - SeaBIOS with the iPXE NIC ROM: iPXE's DHCP takes the site's address
//!   and the proxy OFFER, asks the proxy on port 4011, and gets the entry
//!   script URL.
//! - OVMF's own PXE client (arch 7): the site's address and the proxy's
//!   `snponly.efi` over TFTP → iPXE (again beside the site's server) →
//!   the entry script.
//!
//! Both chain to the node's script, fetched from the address the site
//! lent (not the inventory's), boot the kernel and initramfs of a live-ISO
//! look-alike, and the guest prints its `/proc/cmdline`, which must carry
//! the node's kernel arguments.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::initramfs::live_iso;
use common::inproc::InProc;
use common::netns_available;
use common::qemu::{CMDLINE_MARK, Qemu, cmdline_initramfs, host_kernel, tail, wait_for};
use common::segment::{Segment, Site};

const SEABIOS_ROM: &str = "/usr/lib/ipxe/qemu/pxe-e1000.rom";
const OVMF: &str = "/usr/share/ovmf/OVMF.fd";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Firmware {
    SeaBios,
    Ovmf,
}

fn tools(site: Site, fw: Firmware) -> Result<(), String> {
    netns_available("crcpq")?;
    site.available()?;
    for t in ["qemu-system-x86_64", "xorriso", "busybox"] {
        if !common::have(t) {
            return Err(format!("{t} is not installed"));
        }
    }
    host_kernel().ok_or("no /boot/vmlinuz-*")?;
    let needed: &[&str] = match fw {
        Firmware::SeaBios => &[SEABIOS_ROM],
        Firmware::Ovmf => &[OVMF, "/usr/lib/ipxe/snponly.efi"],
    };
    for f in needed {
        if !Path::new(f).exists() {
            return Err(format!("{f} is not installed"));
        }
    }
    Ok(())
}

/// Boot master-0 with `fw` beside `site` on `10.<octet>.0.0/24` and check
/// what the guest and the appliance show.
fn boot_beside(site: Site, fw: Firmware, octet: u8) {
    let work = tempfile::tempdir().unwrap();
    let kernel = std::fs::read(host_kernel().unwrap()).unwrap();
    let iso = live_iso(
        work.path(),
        "live",
        [&kernel, &cmdline_initramfs(), b"rootfs"],
        &[],
        true,
    );
    let seg = Segment::new(site, octet);
    let app = InProc::in_netns(seg.app.name()).start_yaml(&seg.cluster_yaml("proxy", Some(&iso)));
    let log = work.path().join("serial.log");
    let (machine, nic): (&[&str], String) = match fw {
        Firmware::SeaBios => (
            &["-machine", "pc", "-boot", "n"],
            format!("e1000,romfile={SEABIOS_ROM}"),
        ),
        Firmware::Ovmf => (
            &["-machine", "q35", "-bios", OVMF],
            "virtio-net-pci,romfile=".to_string(),
        ),
    };
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", seg.site.name(), "qemu-system-x86_64"])
        .args(machine)
        .args([
            "-m",
            "768",
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
        ])
        .args(["-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no"])
        .arg("-device")
        .arg(format!("{nic},netdev=n0,mac={}", seg.node_mac()))
        .arg("-serial")
        .arg(format!("file:{}", log.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let vm = Qemu(cmd.spawn().expect("qemu"));
    let line = wait_for(&log, CMDLINE_MARK, Duration::from_secs(420));
    drop(vm);
    let app_log = app.log();
    let fail = |what: &str| -> ! {
        panic!(
            "{what};\nserial tail:\n{}\nappliance:\n{app_log}\nsite server:\n{}",
            tail(&log, 3000),
            seg.server_log()
        )
    };
    let Some(line) = line else {
        fail("the guest never printed its command line")
    };
    let net = format!("10.{octet}.0");
    for needle in [
        format!("coreos.inst.ignition_url=http://{net}.1:8080/ignition/master-0.ign"),
        format!("coreos.live.rootfs_url=http://{net}.1:8080/boot/rootfs.img"),
        "crc.test=1".to_string(),
    ] {
        if !line.contains(&needle) {
            fail(&format!("the command line lacks {needle}: {line}"));
        }
    }
    // The node's script went to the address the site lent (its pool is
    // .100-.150), not to the inventory's .10.
    let fetched = app_log.lines().find(|l| {
        l.contains("netboot:")
            && l.contains("node=master-0")
            && (100..=150).any(|h| l.contains(&format!("peer={net}.{h}:")))
    });
    if fetched.is_none() {
        fail("no script fetch of master-0 from a site-lent address");
    }
    // The proxy answered, and never with an address (nor a NAK).
    let st = app.status();
    let dhcp = st.dhcp.expect("dhcp runs");
    let sent = |kind: &str| dhcp.sent.get(kind).copied().unwrap_or(0);
    if sent("offer") == 0 || sent("nak") != 0 {
        fail(&format!("unexpected proxy counters: {:?}", dhcp.sent));
    }
    if !dhcp.leases.is_empty() {
        fail(&format!("a proxy holds leases: {:?}", dhcp.leases));
    }
    let tftp_done = st.tftp.and_then(|t| t.transfers.get("completed").copied());
    if fw == Firmware::Ovmf && tftp_done.unwrap_or(0) == 0 {
        fail("EDK2 fetched no iPXE binary over TFTP");
    }
}

#[test]
fn seabios_boots_beside_kea() {
    if let Err(why) = tools(Site::Kea, Firmware::SeaBios) {
        skipped!("SKIPPED seabios_boots_beside_kea: {why}");
        return;
    }
    boot_beside(Site::Kea, Firmware::SeaBios, 74);
}

#[test]
fn ovmf_boots_beside_kea() {
    if let Err(why) = tools(Site::Kea, Firmware::Ovmf) {
        skipped!("SKIPPED ovmf_boots_beside_kea: {why}");
        return;
    }
    boot_beside(Site::Kea, Firmware::Ovmf, 75);
}

#[test]
fn seabios_boots_beside_dnsmasq() {
    if let Err(why) = tools(Site::Dnsmasq, Firmware::SeaBios) {
        skipped!("SKIPPED seabios_boots_beside_dnsmasq: {why}");
        return;
    }
    boot_beside(Site::Dnsmasq, Firmware::SeaBios, 76);
}

#[test]
fn ovmf_boots_beside_dnsmasq() {
    if let Err(why) = tools(Site::Dnsmasq, Firmware::Ovmf) {
        skipped!("SKIPPED ovmf_boots_beside_dnsmasq: {why}");
        return;
    }
    boot_beside(Site::Dnsmasq, Firmware::Ovmf, 77);
}
