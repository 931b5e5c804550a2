//! The bare-metal install path with the real installer (issue #28): the
//! appliance in one network namespace, each node in its own (a veth on the
//! appliance's bridge, the node's own address), and on the node side
//! coreos-installer 0.27.0 from crates.io with the crate's own, unmodified
//! `systemd/coreos-installer-generator` and `scripts/coreos-installer-service`
//! — the code RHCOS's live system runs for `coreos.inst.*` kernel arguments —
//! installing to a loop device (`losetup -P` over a sparse file).
//!
//! The live system is emulated as the boot audit did
//! (`research/audits-2026-11-24/boot.md`): the node's kernel command line is
//! the iPXE script's `kernel` line, fetched from the node's address (its
//! `coreos.inst.*` kargs are checked against `coreos-installer iso kargs
//! show` of the node's served ISO too); in a private mount namespace it is
//! bind-mounted over `/proc/cmdline`, `/dev/kmsg` is a file, `/run` a tmpfs
//! with `/run/udev/control` (no udevd). Environment shims, not part of the
//! installer: `lsblk` first runs `partx -a` on the disk (some kernels parse
//! no GPT, e.g. one without `CONFIG_EFI_PARTITION`; with one that does,
//! partx finds the partitions present and adds nothing), and `udevadm` is a
//! no-op when not installed. The RHCOS metal image is a 48 MiB GPT disk the
//! test builds (BIOS-BOOT, EFI-SYSTEM, ext4 `boot` with a BLS entry and the
//! `ignition.firstboot` stamp, ext4 `root` with the aleph file), xz'd and
//! served from `http.imagesDir`; it is unsigned, so the kargs carry
//! `coreos.inst.insecure` (as for any image without a `.sig`).
//!
//! Tests:
//! - a successful PXE install → the next PXE boot gets `exit`, `/status`
//!   says installed (netboot state and timeline), and so does
//!   `crc-appliance status`; the ignition on the disk's `boot` partition is
//!   the node's;
//! - an install whose image fetch fails (404) after its ignition fetch →
//!   the disk stays blank and the next PXE boot gets the install script
//!   behind a BIOS local-disk attempt, never `exit`; an operator's `curl` of
//!   the node's script from loopback (before, during and after) changes
//!   nothing;
//! - the installed system's first machine-config fetch through the LB's
//!   22623 (a fake MCS on the bootstrap's address) makes a node installed
//!   and booted; another node's and the appliance's own fetches do not;
//! - a static node (issue #38) installs with its `ip=`/`nameserver=`, and
//!   Debian's Ignition, applying the disk's config to the installed root,
//!   writes its NetworkManager keyfile (0600) with the static addresses,
//!   the same `[ipv4]`/`[ipv6]` as nm-initrd-generator's from those kargs;
//! - the served ISO equals `coreos-installer iso kargs modify --append`
//!   of the node's kargs for source ISOs that already carry
//!   `console=ttyS0,115200n8` (in their default kargs, and added with
//!   `iso kargs modify -a` to the test ISO and to CoreOS's own fixture).
//!
//! The appliance runs in this process (`common::inproc`): inside the
//! appliance's namespace for the lab tests (`InProc::in_netns`: its threads
//! join the namespace before anything binds), on loopback for the
//! served-ISO comparison; its status is read through the typed document.
//! None spawns the binary (no signal, exit code or crash is checked);
//! `crc-appliance status`, the CLI an operator runs, is the real binary.
//!
//! These need root (namespaces, loop devices); without it they print
//! SKIPPED. As root, a missing tool is a failure: `scripts/test-tools.sh`
//! builds coreos-installer into /var/cache/crc-appliance-tests/cargo and
//! keeps the crate's scripts next to it, `scripts/prereqs.sh` installs the
//! rest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::initramfs::{RhcosIso, rhcos_iso_with_default};
use common::inproc::InProc;
use common::{Netns, free_port, have, is_root, run, run_ok, unique_name};
use crc_appliance::model::catalogue::PoolKind;
use crc_appliance::services::http::status::NetbootRow;
use crc_appliance::timeline::status::NodeTimeline;

/// Where `scripts/test-tools.sh` installs crates.io tools (unless
/// `CRC_TEST_TOOLS` names another root).
const TOOLS_ROOT: &str = "/var/cache/crc-appliance-tests/cargo";
const INSTALLER_VERSION: &str = "0.27.0";

/// coreos-installer and the files of its crate the tests use.
struct Installer {
    bin: PathBuf,
    /// The crate's files kept by `scripts/test-tools.sh`
    /// (`scripts/`, `systemd/`, `fixtures/iso/`).
    share: PathBuf,
}

impl Installer {
    fn service(&self) -> PathBuf {
        self.share.join("scripts/coreos-installer-service")
    }
    fn generator(&self) -> PathBuf {
        self.share.join("systemd/coreos-installer-generator")
    }
    fn bin_dir(&self) -> PathBuf {
        self.bin.parent().unwrap().to_path_buf()
    }
    /// `coreos-installer ARGS`, asserting success.
    fn run(&self, args: &[&str]) -> String {
        run_ok(self.bin.to_str().unwrap(), args)
    }
}

/// The installer and every tool `tools` names, or why not. Not root: a
/// skip (the caller prints it). Root: a failure, since CI runs as root.
fn need(test: &str, tools: &[&str]) -> Option<Installer> {
    if !is_root() {
        skipped!("SKIPPED {test}: needs root (network namespaces, loop devices)");
        return None;
    }
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    assert!(
        missing.is_empty(),
        "{test}: missing {missing:?}: run scripts/prereqs.sh"
    );
    let root = PathBuf::from(std::env::var("CRC_TEST_TOOLS").unwrap_or(TOOLS_ROOT.into()));
    let bin = root.join("bin/coreos-installer");
    let share = root.join(format!("share/coreos-installer-{INSTALLER_VERSION}"));
    let fix = "run scripts/test-tools.sh (cargo install coreos-installer --locked into the cache)";
    assert!(bin.is_file(), "{test}: {} missing: {fix}", bin.display());
    let i = Installer { bin, share };
    for f in [i.service(), i.generator()] {
        assert!(f.is_file(), "{test}: {} missing: {fix}", f.display());
    }
    let v = i.run(&["--version"]);
    assert!(v.contains(INSTALLER_VERSION), "{test}: {v}");
    Some(i)
}

// ---------------------------------------------------------------- the lab

/// The appliance's namespace with a bridge holding `<net>.1/24`, and one
/// namespace per host on it.
struct Lab {
    appl: Netns,
    net: String,
    hosts: Vec<(String, Netns)>,
}

impl Lab {
    fn new(octet: u8) -> Lab {
        let appl = Netns::new(unique_name("crcciA"));
        let net = format!("10.{octet}.0");
        appl.ip(&["link", "add", "br0", "type", "bridge"]);
        appl.ip(&["addr", "add", &format!("{net}.1/24"), "dev", "br0"]);
        appl.ip(&["link", "set", "br0", "up"]);
        Lab {
            appl,
            net,
            hosts: Vec::new(),
        }
    }

    /// A host namespace with address `<net>.<last>` on a veth to the bridge.
    fn add_host(&mut self, last: u8) {
        let ns = Netns::new(unique_name("crcciH"));
        let veth = unique_name("vci");
        self.appl.ip(&[
            "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns.0,
        ]);
        self.appl.ip(&["link", "set", &veth, "master", "br0"]);
        self.appl.ip(&["link", "set", &veth, "up"]);
        let ip = format!("{}.{last}", self.net);
        ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
        ns.ip(&["link", "set", "eth0", "up"]);
        self.hosts.push((ip, ns));
    }

    fn host(&self, last: u8) -> &Netns {
        let ip = format!("{}.{last}", self.net);
        &self.hosts.iter().find(|(i, _)| *i == ip).unwrap().1
    }

    /// `curl -sS URL` in namespace `ns`: (HTTP code, body).
    fn curl(ns: &Netns, args: &[&str], url: &str) -> (String, Vec<u8>) {
        let out = ns
            .cmd(&["curl", "-sS", "--max-time", "20", "-w", "\n%{http_code}"])
            .args(args)
            .arg(url)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let mut body = out.stdout;
        let nl = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
        let code = String::from_utf8_lossy(&body[nl + 1..]).to_string();
        body.truncate(nl);
        (code, body)
    }
}

/// `node`'s network-boot row in the appliance's typed status.
fn netboot_row(app: &InProc, node: &str) -> NetbootRow {
    let rows = app.status().http.expect("an http section").netboot;
    rows.iter()
        .find(|r| r.node == node)
        .unwrap_or_else(|| panic!("no netboot row for {node}: {rows:#?}"))
        .clone()
}

/// `node`'s row of the appliance's install timeline (which must list it).
fn timeline(app: &InProc, node: &str) -> NodeTimeline {
    let nodes = app.status().timeline.expect("a timeline").nodes;
    nodes
        .iter()
        .find(|r| r.node == node)
        .unwrap_or_else(|| panic!("no timeline row for {node}: {nodes:#?}"))
        .clone()
}

fn is_local_boot(s: &str) -> bool {
    s.contains("\nexit\n") && !s.contains("kernel ")
}

/// The kernel command line a script boots: its `kernel` line after the URL.
fn kernel_cmdline(script: &str) -> String {
    let line = script
        .lines()
        .find(|l| l.starts_with("kernel "))
        .unwrap_or_else(|| panic!("no kernel line:\n{script}"));
    let mut words = line.split_ascii_whitespace().skip(2);
    let mut out = words.next().unwrap_or_default().to_string();
    for w in words {
        out.push(' ');
        out.push_str(w);
    }
    out
}

/// The value of the last `key=` in `cmdline`.
fn karg<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline
        .split_ascii_whitespace()
        .filter_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .next_back()
}

// ------------------------------------------------------- the install disk

/// A loop device over a sparse file, with partition scanning; detached on
/// drop.
struct LoopDisk {
    dev: String,
    file: PathBuf,
}

/// Held by the test whose loop disks exist (see [`LoopDisk::one_test_at_a_time`]).
static LOOP_DISKS: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl LoopDisk {
    /// The loop disks of one test at a time in this process: without udev,
    /// two tests' installs at once race in re-reading partition tables
    /// (coreos-installer's BLKRRPART, the lsblk shim's `partx -a`) and one
    /// finds "no partitions" (1 run in 5 with the tests on 4 threads; none
    /// in 8 one at a time). Hold the guard while the disks live.
    fn one_test_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        use crc_appliance::runtime::sync::LockExt as _;
        LOOP_DISKS.locked()
    }

    fn new(file: PathBuf, size: u64) -> LoopDisk {
        let f = std::fs::File::create(&file).unwrap();
        f.set_len(size).unwrap();
        drop(f);
        let dev = run_ok("losetup", &["-P", "-f", "--show", file.to_str().unwrap()])
            .trim()
            .to_string();
        assert!(dev.starts_with("/dev/loop"), "{dev}");
        LoopDisk { dev, file }
    }

    /// The first MiB (the installer writes it last: all zero = blank).
    fn first_mib(&self) -> Vec<u8> {
        let mut b = std::fs::read(&self.file).unwrap();
        b.truncate(1 << 20);
        b
    }

    /// `cat PATH` out of the ext4 filesystem at sector `start` of the disk.
    fn ext4_cat(&self, start: u64, sectors: u64, path: &str, work: &Path) -> String {
        self.debugfs(start, sectors, &format!("cat {path}"), work)
    }

    /// debugfs's `request` on the ext4 filesystem at sector `start` of the
    /// disk (a copy of it: the disk stays as it is).
    fn debugfs(&self, start: u64, sectors: u64, request: &str, work: &Path) -> String {
        let part = work.join(format!("part-{start}.img"));
        let all = std::fs::read(&self.file).unwrap();
        let (a, b) = ((start * 512) as usize, ((start + sectors) * 512) as usize);
        std::fs::write(&part, &all[a..b]).unwrap();
        run_ok("debugfs", &["-R", request, part.to_str().unwrap()])
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        let _ = run("partx", &["-d", &self.dev]);
        let _ = run("losetup", &["-d", &self.dev]);
    }
}

/// The `boot` partition of [`metal_image`]: first sector and size.
const BOOT_PART: (u64, u64) = (20480, 32768);
/// The `root` partition of [`metal_image`]: first sector and size.
const ROOT_PART: (u64, u64) = (53248, 32768);

/// A stand-in for `rhcos-metal.x86_64.raw.xz`: a 48 MiB GPT disk with
/// RHCOS's partitions (BIOS-BOOT, EFI-SYSTEM, ext4 `boot` with a BLS entry
/// and an empty `ignition.firstboot`, ext4 `root` with
/// `.coreos-aleph-version.json`), xz-compressed into `images`.
fn metal_image(work: &Path, images: &Path, name: &str) {
    let d = work.join("metal");
    std::fs::create_dir_all(d.join("boot/loader/entries")).unwrap();
    std::fs::create_dir_all(d.join("root")).unwrap();
    std::fs::write(d.join("boot/ignition.firstboot"), "").unwrap();
    std::fs::write(
        d.join("boot/loader/entries/ostree-1.conf"),
        "title CRC test CoreOS\nversion 1\nlinux /vmlinuz\ninitrd /initramfs.img\noptions root=LABEL=root ignition.platform.id=metal $ignition_firstboot\n",
    )
    .unwrap();
    std::fs::write(
        d.join("root/.coreos-aleph-version.json"),
        r#"{"build":"crc-test","imgid":"rhcos-metal.x86_64.raw"}"#,
    )
    .unwrap();
    // What Ignition's files stage relabels with (RHCOS's root has the full
    // policy; these two lines are enough for `setfiles`).
    let contexts = d.join("root/etc/selinux/targeted/contexts/files");
    std::fs::create_dir_all(&contexts).unwrap();
    std::fs::write(
        d.join("root/etc/selinux/config"),
        "SELINUX=enforcing\nSELINUXTYPE=targeted\n",
    )
    .unwrap();
    std::fs::write(
        contexts.join("file_contexts"),
        "/etc(/.*)?\tsystem_u:object_r:etc_t:s0\n\
         /etc/NetworkManager/system-connections(/.*)?\tsystem_u:object_r:NetworkManager_etc_rw_t:s0\n",
    )
    .unwrap();
    let raw = d.join("disk.raw");
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let sized = |f: &Path, sectors: u64| {
        let h = std::fs::File::create(f).unwrap();
        h.set_len(sectors * 512).unwrap();
    };
    sized(&raw, 98_304);
    let layout = format!(
        "label: gpt\n\
         start=2048, size=2048, type=21686148-6449-6E6F-744E-656564454649, name=\"BIOS-BOOT\"\n\
         start=4096, size=16384, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=\"EFI-SYSTEM\"\n\
         start={}, size={}, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"boot\"\n\
         start={}, size={}, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"root\"\n",
        BOOT_PART.0, BOOT_PART.1, ROOT_PART.0, ROOT_PART.1
    );
    let mut sf = Command::new("sfdisk")
        .args(["-q", &p(&raw)])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("sfdisk");
    std::io::Write::write_all(sf.stdin.as_mut().unwrap(), layout.as_bytes()).unwrap();
    assert!(sf.wait().unwrap().success(), "sfdisk failed");
    let (efi, boot, root) = (d.join("efi.img"), d.join("boot.img"), d.join("root.img"));
    sized(&efi, 16_384);
    run_ok("mformat", &["-i", &p(&efi), "-v", "EFI-SYSTEM", "::"]);
    sized(&boot, BOOT_PART.1);
    run_ok(
        "mkfs.ext4",
        &["-q", "-L", "boot", "-d", &p(&d.join("boot")), &p(&boot)],
    );
    sized(&root, 32_768);
    run_ok(
        "mkfs.ext4",
        &["-q", "-L", "root", "-d", &p(&d.join("root")), &p(&root)],
    );
    assert_eq!(ROOT_PART.1, 32_768);
    let mut disk = std::fs::read(&raw).unwrap();
    for (img, at) in [
        (&efi, 4096usize),
        (&boot, BOOT_PART.0 as usize),
        (&root, ROOT_PART.0 as usize),
    ] {
        let b = std::fs::read(img).unwrap();
        disk[at * 512..at * 512 + b.len()].copy_from_slice(&b);
    }
    std::fs::write(&raw, disk).unwrap();
    run_ok("xz", &["-T1", "-0", "-f", &p(&raw)]);
    std::fs::create_dir_all(images).unwrap();
    std::fs::rename(d.join("disk.raw.xz"), images.join(name)).unwrap();
}

// --------------------------------------------------- the emulated live OS

/// What one run of the live system's installer gave.
struct LiveRun {
    /// The service script's exit code.
    rc: i32,
    /// Its output (and the shell's).
    out: String,
}

/// Boot the "live system" of a node in namespace `ns` with `cmdline`: run
/// the crate's generator (which must pick the installer target) and then
/// its service script, which runs coreos-installer.
fn live_install(ns: &Netns, inst: &Installer, cmdline: &str, work: &Path) -> LiveRun {
    let w = work.join(format!("live-{}", unique_name("")));
    let shim = w.join("shim");
    std::fs::create_dir_all(&shim).unwrap();
    std::fs::write(w.join("cmdline"), format!("{cmdline}\n")).unwrap();
    std::fs::write(w.join("kmsg"), "").unwrap();
    // Environment shims (see the module doc), not coreos-installer's code.
    let lsblk = ["/usr/bin/lsblk", "/bin/lsblk"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("lsblk (util-linux)");
    // What udevd would do: add the partitions the kernel may not have
    // parsed (BLKPG via partx), and give lsblk the LABEL/FSTYPE udev's
    // database would hold (probed with blkid).
    let shim_lsblk = format!(
        r#"#!/bin/sh
# test shim for lsblk (see tests/coreos_install.rs), not coreos-installer's code
for a in "$@"; do case "$a" in /dev/loop*) partx -a "$a" >/dev/null 2>&1 ;; esac; done
case " $* " in *" --pairs "*) ;; *) exec {lsblk} "$@" ;; esac
out=$({lsblk} "$@") || exit $?
printf '%s\n' "$out" | while IFS= read -r line; do
  name=${{line#NAME=\"}}; name=${{name%%\"*}}
  case "$line" in
    *'LABEL="" FSTYPE=""'*)
      label=$(blkid -p -s LABEL -o value "$name" 2>/dev/null)
      fstype=$(blkid -p -s TYPE -o value "$name" 2>/dev/null)
      line=$(printf '%s' "$line" | sed "s|LABEL=\"\" FSTYPE=\"\"|LABEL=\"$label\" FSTYPE=\"$fstype\"|")
      ;;
  esac
  printf '%s\n' "$line"
done
"#
    );
    std::fs::write(shim.join("lsblk"), shim_lsblk).unwrap();
    if !have("udevadm") {
        std::fs::write(shim.join("udevadm"), "#!/bin/sh\nexit 0\n").unwrap();
    }
    for f in std::fs::read_dir(&shim).unwrap() {
        run_ok("chmod", &["+x", f.unwrap().path().to_str().unwrap()]);
    }
    let script = format!(
        r#"set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/udev && : > /run/udev/control
mount --bind {w}/cmdline /proc/cmdline
mount --bind {w}/kmsg /dev/kmsg
mkdir -p {w}/units
bash {gen} {w}/units
if [ ! -L {w}/units/default.target ]; then echo "generator did not pick the installer"; cat {w}/kmsg; exit 90; fi
[ -e /run/coreos-installer-reboot ] || {{ echo "generator did not ask for the reboot"; exit 91; }}
export PATH={shim}:{bin}:$PATH
set +e
bash {svc} 2>&1
echo "service-rc=$?"
"#,
        w = w.display(),
        gen = inst.generator().display(),
        svc = inst.service().display(),
        shim = shim.display(),
        bin = inst.bin_dir().display(),
    );
    let out = ns
        .cmd(&[
            "unshare",
            "-m",
            "--propagation",
            "private",
            "bash",
            "-c",
            &script,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let rc = text
        .lines()
        .find_map(|l| l.strip_prefix("service-rc="))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("the live system did not run the service:\n{text}"));
    eprintln!("--- live system ({cmdline})\n{text}");
    LiveRun { rc, out: text }
}

/// A node's PXE boot as iPXE does it, from the node's namespace: the entry
/// script, the node's script, and (unless it says `exit`) the kernel and
/// initrd it names, then the live rootfs as the initramfs fetches it.
/// Returns the node's script.
fn pxe_boot(ns: &Netns, base: &str) -> String {
    let (code, entry) = Lab::curl(ns, &[], &format!("{base}/boot/boot.ipxe"));
    assert_eq!(code, "200");
    let entry = String::from_utf8(entry).unwrap();
    let chain = entry
        .lines()
        .find_map(|l| l.strip_prefix("chain "))
        .unwrap_or_else(|| panic!("no chain line:\n{entry}"))
        .to_string();
    let mac = ns.exec(&["cat", "/sys/class/net/eth0/address"]);
    let url = chain.replace("${mac:hexhyp}", &mac.trim().replace(':', "-"));
    let (code, script) = Lab::curl(ns, &[], &url);
    assert_eq!(code, "200", "{url}");
    let script = String::from_utf8(script).unwrap();
    if is_local_boot(&script) {
        return script;
    }
    for l in script.lines() {
        let u = match l.split_ascii_whitespace().collect::<Vec<_>>()[..] {
            ["kernel", u, ..] | ["initrd", "--name", _, u] => u,
            _ => continue,
        };
        assert_eq!(Lab::curl(ns, &["-o", "/dev/null"], u).0, "200", "{u}");
    }
    let cmdline = kernel_cmdline(&script);
    let rootfs = karg(&cmdline, "coreos.live.rootfs_url").expect("a rootfs URL");
    assert_eq!(Lab::curl(ns, &["-o", "/dev/null"], rootfs).0, "200");
    script
}

// ---------------------------------------------------------------- tests

/// The cluster file of the install tests: master-0 installs the image,
/// master-1's kargs point its image URL at a file that does not exist.
fn install_cluster(net: &str, iso: &Path, disks: [&str; 2], o: u8) -> String {
    format!(
        r#"name: ci
baseDomain: crc.testing
network: {{ cidr: {net}.0/24, gateway: {net}.1, applianceIP: {net}.1 }}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:{o:02x}:00:05", ip: {net}.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:{o:02x}:00:0a", ip: {net}.10, installDev: {d0} }}
  - {{ name: master-1, role: master, mac: "52:54:00:{o:02x}:00:0b", ip: {net}.11, installDev: {d1}, kargs: ["coreos.inst.image_url=http://{net}.1:8080/images/not-there.raw.xz"] }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false, leaseFile: "{{dir}}/leases.json" }}
loadBalancer: {{ enabled: false }}
admin: {{ listen: "127.0.0.1:9000" }}
http:
  listen: 0.0.0.0:8080
  imagesDir: "{{dir}}/images"
  ignitionDir: "{{dir}}/ign"
rhcos:
  iso: {iso}
  kargs: ["coreos.inst.image_url=http://{net}.1:8080/images/rhcos-metal.x86_64.raw.xz", coreos.inst.insecure, ip=dhcp]
"#,
        d0 = disks[0],
        d1 = disks[1],
        iso = iso.display(),
    )
}

/// Role ignition files in `dir/ign`.
fn ignition_files(dir: &Path) {
    std::fs::create_dir_all(dir.join("ign")).unwrap();
    for r in ["bootstrap", "master", "worker"] {
        std::fs::write(
            dir.join(format!("ign/{r}.ign")),
            format!(r#"{{"ignition":{{"version":"3.2.0"}},"storage":{{"files":[{{"path":"/etc/crc-role","contents":{{"source":"data:,{r}"}}}}]}}}}"#),
        )
        .unwrap();
    }
}

#[test]
fn real_coreos_installer_install_state_from_evidence() {
    let tools = [
        "curl",
        "xorriso",
        "losetup",
        "partx",
        "sfdisk",
        "mkfs.ext4",
        "debugfs",
        "mformat",
        "xz",
        "unshare",
        "ip",
    ];
    let Some(inst) = need("real_coreos_installer_install_state_from_evidence", &tools) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    // Read by `coreos-installer iso kargs show` below: no El Torito.
    let iso = rhcos_iso_with_default(work.path(), "rhcos-ci", [b"kernel", b"initrd"], 1024, "");
    let _disks = LoopDisk::one_test_at_a_time();
    let d0 = LoopDisk::new(work.path().join("master-0.disk"), 64 << 20);
    let d1 = LoopDisk::new(work.path().join("master-1.disk"), 64 << 20);
    let mut lab = Lab::new(93);
    for last in [10, 11] {
        lab.add_host(last);
    }
    for (last, mac) in [(10, "0a"), (11, "0b")] {
        lab.host(last).ip(&[
            "link",
            "set",
            "eth0",
            "address",
            &format!("52:54:00:5d:00:{mac}"),
        ]);
    }
    let net = lab.net.clone();
    let yaml = install_cluster(&net, &iso.path, [&d0.dev, &d1.dev], 0x5d);
    let app = InProc::in_netns(lab.appl.name()).start_yaml(&yaml);
    let dir = app.dir.path().to_path_buf();
    ignition_files(&dir);
    metal_image(
        work.path(),
        &dir.join("images"),
        "rhcos-metal.x86_64.raw.xz",
    );
    let base = format!("http://{net}.1:8080");
    let operator = |node_mac: &str| {
        let (code, s) = Lab::curl(
            &lab.appl,
            &[],
            &format!("http://127.0.0.1:8080/boot/{node_mac}.ipxe"),
        );
        assert_eq!(code, "200");
        String::from_utf8(s).unwrap()
    };

    // ---- master-0: the operator looks first; nothing moves.
    let m0_mac = "52-54-00-5d-00-0a";
    let before = netboot_row(&app, "master-0");
    assert!(operator(m0_mac).contains("\nkernel "));
    assert_eq!(
        netboot_row(&app, "master-0"),
        before,
        "an operator fetch moved it"
    );

    // Its network boot, then the live system installs from the script's kargs.
    let m0 = lab.host(10);
    let script = pxe_boot(m0, &base);
    assert!(
        script.contains("# crc-appliance: install master-0"),
        "{script}"
    );
    let cmdline = kernel_cmdline(&script);
    assert_eq!(
        karg(&cmdline, "coreos.inst.install_dev"),
        Some(d0.dev.as_str())
    );
    // The node's ISO carries the same install kargs (read by the real tool).
    let served = work.path().join("master-0.iso");
    let (code, _) = Lab::curl(
        &lab.appl,
        &["-o", served.to_str().unwrap()],
        "http://127.0.0.1:8080/boot/master-0.iso",
    );
    assert_eq!(code, "200");
    let iso_kargs = inst.run(&["iso", "kargs", "show", served.to_str().unwrap()]);
    let inst_kargs = |s: &str| -> Vec<String> {
        s.split_ascii_whitespace()
            .filter(|w| w.starts_with("coreos.inst."))
            .map(String::from)
            .collect()
    };
    assert_eq!(inst_kargs(&iso_kargs), inst_kargs(&cmdline), "{iso_kargs}");
    let run0 = live_install(m0, &inst, &cmdline, work.path());
    assert_eq!(run0.rc, 0, "the install failed:\n{}", run0.out);
    assert!(run0.out.contains("Install complete."), "{}", run0.out);
    assert!(
        run0.out.contains("--firstboot-args rd.neednet=1 ip=dhcp"),
        "{}",
        run0.out
    );
    // The disk holds the image and the node's ignition.
    assert!(d0.first_mib().iter().any(|b| *b != 0), "blank disk");
    disk_ignition_is_master_0s(&lab, &d0, work.path());
    let firstboot = d0.ext4_cat(BOOT_PART.0, BOOT_PART.1, "/ignition.firstboot", work.path());
    assert!(firstboot.contains("ip=dhcp"), "{firstboot:?}");

    // Installed: the netboot state, the timeline, the CLI's table.
    common::wait_until("master-0 installed", Duration::from_secs(10), || {
        netboot_row(&app, "master-0").state == "installed"
    });
    let r = netboot_row(&app, "master-0");
    assert!(r.install_finished_at.is_some(), "{r:?}");
    let tl = timeline(&app, "master-0");
    let steps = [
        ("netbootScript", tl.netboot_script),
        ("rootfs", tl.rootfs),
        ("ignition", tl.ignition),
        ("installFinished", tl.install_finished),
    ];
    for (step, at) in steps {
        assert!(at.is_some(), "timeline lacks {step}: {tl:?}");
    }
    let cf = app.cluster_file.to_str().unwrap();
    let table = lab.appl.exec(&[common::BIN, "status", "--cluster", cf]);
    let header = table
        .lines()
        .find(|l| l.starts_with("NODE"))
        .unwrap_or_else(|| panic!("{table}"));
    let col = header
        .split_ascii_whitespace()
        .position(|c| c == "INSTALL")
        .unwrap_or_else(|| panic!("no INSTALL column:\n{table}"));
    let m0_row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("master-0"))
        .unwrap()
        .split_ascii_whitespace()
        .collect();
    assert!(
        m0_row[col].len() == 8 && m0_row[col].contains(':'),
        "INSTALL of master-0 is {:?}:\n{table}",
        m0_row[col]
    );
    // Its next network boot boots the disk.
    let again = pxe_boot(m0, &base);
    assert!(is_local_boot(&again), "after the install:\n{again}");

    // ---- master-1: its image URL answers 404 after the ignition fetch.
    let m1_mac = "52-54-00-5d-00-0b";
    let m1 = lab.host(11);
    let script = pxe_boot(m1, &base);
    let cmdline = kernel_cmdline(&script);
    assert!(
        karg(&cmdline, "coreos.inst.image_url")
            .unwrap()
            .ends_with("/not-there.raw.xz"),
        "{cmdline}"
    );
    let run1 = live_install(m1, &inst, &cmdline, work.path());
    assert_ne!(run1.rc, 0, "the install should fail:\n{}", run1.out);
    assert!(run1.out.contains("404"), "{}", run1.out);
    assert!(
        d1.first_mib().iter().all(|b| *b == 0),
        "the failed install wrote the disk"
    );
    let r = netboot_row(&app, "master-1");
    assert_ne!(r.state, "installed", "{r:?}");
    assert!(
        r.ignition_at.is_some(),
        "the installer fetched no ignition: {r:?}"
    );
    // The operator looks (the audit's finding 2): nothing moves.
    let looked = operator(m1_mac);
    assert!(!looked.contains("\nexit\n"), "{looked}");
    assert_eq!(
        netboot_row(&app, "master-1"),
        r,
        "an operator fetch moved it"
    );
    app.wait_log("operator fetch of the script", Duration::from_secs(5));
    // The node reboots: never `exit` onto its blank disk; the installer
    // follows a BIOS disk attempt.
    let next = pxe_boot(m1, &base);
    assert!(!next.contains("\nexit\n"), "a failed install got:\n{next}");
    assert!(
        next.contains("sanboot --no-describe --drive 0x80 ||\nkernel "),
        "{next}"
    );
    assert_eq!(
        kernel_cmdline(&next),
        cmdline,
        "not the same install after the failure"
    );
    let r = netboot_row(&app, "master-1");
    assert_ne!(r.state, "installed", "{r:?}");
    assert!(timeline(&app, "master-1").install_finished.is_none());
}

/// nm-initrd-generator as scripts/prereqs.sh extracts it (package
/// network-manager, which is not installed: it would take over the host's
/// network).
const NM_INITRD_GENERATOR: &str = "/var/cache/crc-appliance-tests/extract/network-manager/usr/lib/NetworkManager/nm-initrd-generator";

/// The network words of a command line: its `ip=` and `nameserver=`.
fn net_kargs(cmdline: &str) -> Vec<&str> {
    cmdline
        .split_ascii_whitespace()
        .filter(|w| w.starts_with("ip=") || w.starts_with("nameserver="))
        .collect()
}

/// Debian's Ignition (package `ignition`): the program RHCOS's initramfs
/// runs on first boot, shipped as its dracut module.
const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";

/// The ignition on `disk`'s boot partition, checked to be the one the
/// appliance serves master-0 (as JSON).
fn disk_ignition_is_master_0s(lab: &Lab, disk: &LoopDisk, work: &Path) -> String {
    let on_disk = disk.ext4_cat(BOOT_PART.0, BOOT_PART.1, "/ignition/config.ign", work);
    let (code, served_ign) = Lab::curl(
        &lab.appl,
        &[],
        "http://127.0.0.1:8080/ignition/master-0.ign",
    );
    assert_eq!(code, "200");
    let a: serde_json::Value =
        serde_json::from_str(&on_disk).unwrap_or_else(|e| panic!("{e}: {on_disk:?}"));
    let b: serde_json::Value = serde_json::from_slice(&served_ign).unwrap();
    assert_eq!(a, b, "the ignition on the disk is not the node's");
    on_disk
}

/// The installed system's first boot, as far as Ignition goes: Ignition's
/// own `fetch-offline` and `files` stages (platform `file`, reading
/// `config`: the config coreos-installer wrote to the disk) on the disk's
/// `root` partition (`<loop device>p4`), mounted in a private mount
/// namespace (gone with it). `setfiles` (policycoreutils) relabels what it wrote, as on RHCOS.
fn ignite_root(disk: &LoopDisk, config: &str, work: &Path) {
    let w = work.join("ignite");
    std::fs::create_dir_all(w.join("root")).unwrap();
    std::fs::write(w.join("config.ign"), config).unwrap();
    let script = format!(
        r#"set -e
partx -a {dev} 2>/dev/null || partx -u {dev}
[ "$(blkid -p -s PART_ENTRY_NAME -o value {dev}p4)" = root ] || {{ echo "{dev}p4 is not root"; exit 93; }}
mount {dev}p4 {w}/root
export IGNITION_CONFIG_FILE={w}/config.ign
common="-platform file -root {w}/root -config-cache {w}/cache.json -state-file {w}/state -log-to-stdout"
{ign} $common -stage fetch-offline -neednet {w}/neednet
if [ -e {w}/neednet ]; then echo "ignition asks for the network"; exit 92; fi
{ign} $common -stage files
umount {w}/root
"#,
        dev = disk.dev,
        w = w.display(),
        ign = IGNITION,
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "bash", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "ignition failed:\n{text}");
    assert!(text.contains("files: files passed"), "{text}");
}

/// The lines of `[section]` of a keyfile, without the `dhcp-*` settings
/// (they apply to DHCP only, and nm-initrd-generator writes them for any
/// method).
fn keyfile_section(text: &str, section: &str) -> Vec<String> {
    text.split("\n[")
        .find(|s| s.starts_with(&format!("{section}]")))
        .unwrap_or_else(|| panic!("no [{section}] in {text}"))
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty() && !l.starts_with("dhcp-"))
        .map(String::from)
        .collect()
}

/// Issue #38 item 2 end to end: a dual-stack node with `network.addressing:
/// static` gets exactly its `ip=` (both families) and `nameserver=` (the
/// appliance, its DNS on) in its iPXE script and in its `/boot/<node>.iso`
/// (read by `coreos-installer iso kargs show`); the real installer, run by
/// its own service from that command line, installs with them: the disk's
/// ignition is the one the appliance served the node, and Debian's
/// Ignition (the program RHCOS runs on first boot) applying it to the
/// installed root (loop-mounted) writes
/// `/etc/NetworkManager/system-connections/eth0.nmconnection`, mode 0600,
/// with the static addresses, gateways and DNS. Its `[ipv4]` and `[ipv6]`
/// sections are what NetworkManager's own `nm-initrd-generator` writes from
/// the same arguments (the disk's first-boot arguments,
/// `--firstboot-args`), under the same id and file name, so first boot
/// keeps one profile for the interface.
#[test]
fn static_node_installs_with_its_ip_and_nameserver() {
    let tools = [
        "curl",
        "xorriso",
        "losetup",
        "partx",
        "sfdisk",
        "mkfs.ext4",
        "debugfs",
        "mformat",
        "xz",
        "unshare",
        "ip",
        "mount",
        "setfiles",
        IGNITION,
    ];
    let Some(inst) = need("static_node_installs_with_its_ip_and_nameserver", &tools) else {
        return;
    };
    assert!(
        Path::new(NM_INITRD_GENERATOR).is_file(),
        "{NM_INITRD_GENERATOR} missing: run scripts/prereqs.sh"
    );
    let work = tempfile::tempdir().unwrap();
    let iso = rhcos_iso_with_default(work.path(), "rhcos-st", [b"kernel", b"initrd"], 1024, "");
    let _disks = LoopDisk::one_test_at_a_time();
    let d0 = LoopDisk::new(work.path().join("static-0.disk"), 64 << 20);
    let mut lab = Lab::new(95);
    lab.add_host(10);
    let m0 = lab.host(10);
    m0.ip(&["link", "set", "eth0", "address", "52:54:00:5f:00:0a"]);
    let net = lab.net.clone();
    let yaml = format!(
        r#"name: st
baseDomain: crc.testing
network:
  cidr: {net}.0/24
  gateway: {net}.254
  applianceIP: {net}.1
  addressing: static
  ipv6: {{ cidr: "fd00:95::/64", applianceIP: "fd00:95::1", gateway: "fd00:95::fe" }}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:5f:00:05", ip: {net}.5, interface: eth0 }}
  - {{ name: master-0, role: master, mac: "52:54:00:5f:00:0a", ip: {net}.10, ipv6: "fd00:95::10", installDev: {dev}, interface: eth0 }}
dhcp: {{ enabled: false, leaseFile: "{{dir}}/leases.json" }}
loadBalancer: {{ enabled: false }}
admin: {{ listen: "127.0.0.1:9000" }}
http:
  listen: 0.0.0.0:8080
  imagesDir: "{{dir}}/images"
  ignitionDir: "{{dir}}/ign"
rhcos:
  iso: {iso}
  kargs: ["coreos.inst.image_url=http://{net}.1:8080/images/rhcos-metal.x86_64.raw.xz", coreos.inst.insecure]
"#,
        dev = d0.dev,
        iso = iso.path.display(),
    );
    lab.appl
        .ip(&["addr", "add", "fd00:95::1/64", "dev", "br0", "nodad"]);
    let app = InProc::in_netns(lab.appl.name()).start_yaml(&yaml);
    let dir = app.dir.path().to_path_buf();
    ignition_files(&dir);
    metal_image(
        work.path(),
        &dir.join("images"),
        "rhcos-metal.x86_64.raw.xz",
    );
    let host = "master-0.st.crc.testing";
    let want = [
        format!("ip={net}.10::{net}.254:255.255.255.0:{host}:eth0:none"),
        format!("ip=[fd00:95::10]::[fd00:95::fe]:64:{host}:eth0:none"),
        format!("nameserver={net}.1"),
    ];

    // The iPXE script (fetched as the node) and the ISO carry exactly them.
    let script = pxe_boot(m0, &format!("http://{net}.1:8080"));
    let cmdline = kernel_cmdline(&script);
    assert_eq!(net_kargs(&cmdline), want, "{cmdline}");
    let served = work.path().join("master-0.iso");
    let (code, _) = Lab::curl(
        &lab.appl,
        &["-o", served.to_str().unwrap()],
        "http://127.0.0.1:8080/boot/master-0.iso",
    );
    assert_eq!(code, "200");
    let iso_kargs = inst.run(&["iso", "kargs", "show", served.to_str().unwrap()]);
    assert_eq!(net_kargs(&iso_kargs), want, "{iso_kargs}");

    // The live system installs from that command line.
    let run0 = live_install(m0, &inst, &cmdline, work.path());
    assert_eq!(run0.rc, 0, "the install failed:\n{}", run0.out);
    assert!(run0.out.contains("Install complete."), "{}", run0.out);
    let firstboot = d0.ext4_cat(BOOT_PART.0, BOOT_PART.1, "/ignition.firstboot", work.path());
    let kcmdline = firstboot
        .lines()
        .find_map(|l| l.strip_prefix("set ignition_network_kcmdline=\""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or_else(|| panic!("no first-boot network arguments: {firstboot:?}"));
    assert_eq!(net_kargs(kcmdline), want, "{kcmdline}");
    assert!(kcmdline.starts_with("rd.neednet=1 "), "{kcmdline}");

    // The disk's ignition is the one served to the node.
    let on_disk = disk_ignition_is_master_0s(&lab, &d0, work.path());

    // First boot: Ignition applies it to the installed root.
    ignite_root(&d0, &on_disk, work.path());
    let path = "/etc/NetworkManager/system-connections/eth0.nmconnection";
    let stat = d0.debugfs(
        ROOT_PART.0,
        ROOT_PART.1,
        &format!("stat {path}"),
        work.path(),
    );
    let mode = stat
        .split_ascii_whitespace()
        .skip_while(|w| *w != "Mode:")
        .nth(1);
    assert_eq!(mode, Some("0600"), "{stat}");
    let keyfile = d0.ext4_cat(ROOT_PART.0, ROOT_PART.1, path, work.path());
    for line in [
        "id=eth0".to_string(),
        "interface-name=eth0".into(),
        format!("address1={net}.10/24,{net}.254"),
        format!("dns={net}.1;"),
        "address1=fd00:95::10/64,fd00:95::fe".into(),
    ] {
        assert!(
            keyfile.lines().any(|l| l == line),
            "lacks {line}: {keyfile}"
        );
    }
    let hostname = d0.ext4_cat(ROOT_PART.0, ROOT_PART.1, "/etc/hostname", work.path());
    assert_eq!(hostname, format!("{host}\n"));

    // NetworkManager's initrd generator on the first-boot arguments writes
    // the same addressing under the same id and file name.
    let nm = work.path().join("nm");
    let sub = |d: &str| nm.join(d).to_str().unwrap().to_string();
    let mut args = vec![
        "-c".to_string(),
        sub("system-connections"),
        "-i".into(),
        sub("initrd"),
        "-r".into(),
        sub("conf.d"),
        "-p".into(),
        sub("persistent"),
        "--".into(),
    ];
    args.extend(kcmdline.split_ascii_whitespace().map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_ok(NM_INITRD_GENERATOR, &args);
    let generated = nm.join("system-connections/eth0.nmconnection");
    let text = std::fs::read_to_string(&generated)
        .unwrap_or_else(|e| panic!("{}: {e}", generated.display()));
    for section in ["ipv4", "ipv6"] {
        assert_eq!(
            keyfile_section(&keyfile, section),
            keyfile_section(&text, section),
            "[{section}] differs:\n{keyfile}\n--- nm-initrd-generator:\n{text}"
        );
    }
    let conn = |t: &str| -> Vec<String> {
        keyfile_section(t, "connection")
            .into_iter()
            .filter(|l| l.starts_with("id=") || l.starts_with("interface-name="))
            .collect()
    };
    assert_eq!(conn(&keyfile), conn(&text));
}

/// The fake machine-config server: HTTPS on `ip:22623`, `/healthz` and
/// `/config/<role>`, each request logged to stdout as `GET <path>`.
const FAKE_MCS: &str = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("GET " + self.path, flush=True)
        if self.path == "/healthz":
            body = b"ok\n"
        elif self.path.startswith("/config/"):
            body = b'{"ignition":{"version":"3.2.0"},"storage":{"files":[]}}'
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer((sys.argv[1], 22623), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"#;

/// Issue #28's last evidence step end to end: a node whose install end was
/// not seen (its ignition came, no image download) becomes installed and
/// booted on its installed system's first machine-config fetch through the
/// LB's 22623, from its own address, to a fake MCS on the bootstrap's
/// address; the appliance host's and another node's fetches change nothing.
#[test]
fn machine_config_fetch_through_the_lb_is_boot_evidence() {
    if !is_root() {
        skipped!(
            "SKIPPED machine_config_fetch_through_the_lb_is_boot_evidence: needs root (network namespaces)"
        );
        return;
    }
    for t in ["curl", "python3", "openssl", "ip"] {
        assert!(have(t), "{t} missing: run scripts/prereqs.sh");
    }
    let work = tempfile::tempdir().unwrap();
    let mut lab = Lab::new(94);
    for last in [5, 10, 11] {
        lab.add_host(last);
    }
    let net = lab.net.clone();
    let (cert, key) = (work.path().join("mcs.pem"), work.path().join("mcs.key"));
    common::self_signed_cert(&cert, &key, "api-int.mcs.crc.testing");
    let mcs_log = work.path().join("mcs.log");
    let _mcs = common::qemu::Qemu(
        lab.host(5)
            .cmd(&["python3", "-c", FAKE_MCS, &format!("{net}.5")])
            .args([&cert, &key])
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::fs::File::create(&mcs_log).unwrap()))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3"),
    );
    for f in ["k", "i", "r"] {
        std::fs::write(work.path().join(f), f).unwrap();
    }
    let w = work.path().display();
    let yaml = format!(
        r#"name: mcs
baseDomain: crc.testing
network: {{ cidr: {net}.0/24, gateway: {net}.1, applianceIP: {net}.1 }}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:5e:00:05", ip: {net}.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:5e:00:0a", ip: {net}.10 }}
  - {{ name: master-1, role: master, mac: "52:54:00:5e:00:0b", ip: {net}.11 }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false, leaseFile: "{{dir}}/leases.json" }}
admin: {{ listen: "127.0.0.1:9000" }}
loadBalancer:
  listen: {{ api: "{net}.1:6443", machineConfig: "{net}.1:22623", ingressHttp: "{net}.1:80", ingressHttps: "{net}.1:443" }}
  healthCheck: {{ interval: 300ms, timeout: 300ms, rise: 1, fall: 2 }}
http:
  listen: {net}.1:8080
  imagesDir: "{{dir}}/images"
  ignitionDir: "{{dir}}/ign"
rhcos: {{ kernel: {w}/k, initramfs: {w}/i, rootfs: {w}/r }}
"#
    );
    let app = InProc::in_netns(lab.appl.name()).start_yaml(&yaml);
    ignition_files(app.dir.path());
    let base = format!("http://{net}.1:8080");
    common::wait_until(
        "the fake MCS healthy behind 22623",
        Duration::from_secs(20),
        || {
            let pools = app.status().lb.map(|lb| lb.pools).unwrap_or_default();
            pools.iter().any(|p| {
                p.name == PoolKind::MachineConfig
                    && p.backends
                        .iter()
                        .any(|b| b.node == "bootstrap" && b.healthy)
            })
        },
    );
    let mcs = |ns: &Netns| {
        let (code, body) = Lab::curl(ns, &["-k"], &format!("https://{net}.1:22623/config/master"));
        assert_eq!(code, "200", "{}", String::from_utf8_lossy(&body));
        assert!(String::from_utf8_lossy(&body).contains("\"ignition\""));
    };

    // master-0 network-boots and its installer fetches the ignition; the
    // image download never comes (an offline install, or not on the
    // appliance): its install end is not known.
    let m0 = lab.host(10);
    let s = String::from_utf8(Lab::curl(m0, &[], &format!("{base}/boot/52-54-00-5e-00-0a.ipxe")).1)
        .unwrap();
    assert!(s.contains("\nkernel "), "{s}");
    assert_eq!(
        Lab::curl(
            m0,
            &["-o", "/dev/null"],
            &format!("{base}/ignition/master-0.ign")
        )
        .0,
        "200"
    );
    common::wait_until("master-0 unconfirmed", Duration::from_secs(5), || {
        netboot_row(&app, "master-0").state == "unconfirmed"
    });

    // The appliance host and another node fetch from the MCS: no evidence
    // for master-0.
    mcs(&lab.appl);
    mcs(lab.host(11));
    std::thread::sleep(Duration::from_millis(1500));
    let r = netboot_row(&app, "master-0");
    assert_eq!(r.state, "unconfirmed", "{r:?}");
    assert!(r.booted_at.is_none(), "{r:?}");
    assert!(timeline(&app, "master-0").first_boot.is_none());

    // Its installed system's first contact: the machine config, through the LB.
    mcs(m0);
    common::wait_until("master-0 booted", Duration::from_secs(10), || {
        let r = netboot_row(&app, "master-0");
        r.state == "installed" && r.booted_at.is_some()
    });
    let tl = timeline(&app, "master-0");
    let steps = [
        ("netbootScript", tl.netboot_script),
        ("ignition", tl.ignition),
        ("installFinished", tl.install_finished),
        ("firstBoot", tl.first_boot),
    ];
    for (step, at) in steps {
        assert!(at.is_some(), "timeline lacks {step}: {tl:?}");
    }
    let s = String::from_utf8(Lab::curl(m0, &[], &format!("{base}/boot/52-54-00-5e-00-0a.ipxe")).1)
        .unwrap();
    assert!(is_local_boot(&s), "{s}");
    // The fetches reached the fake MCS through the LB (from the appliance).
    let log = std::fs::read_to_string(&mcs_log).unwrap();
    assert!(log.matches("GET /config/master").count() >= 3, "{log}");
    assert!(log.contains("GET /healthz"), "{log}");
    app.wait_log("installed system booted", Duration::from_secs(5));
}

/// The kargs the appliance appends for worker-1 of [`iso_cluster`] and for
/// the `worker` role, in order.
fn appended(base: &str, who: &str) -> Vec<String> {
    let (dev, tail) = match who {
        "worker-1" => ("/dev/vdb", " crc.node=worker-1"),
        _ => ("/dev/sda", ""),
    };
    format!(
        "coreos.inst.install_dev={dev} coreos.inst.ignition_url={base}/ignition/{who}.ign console=tty0 console=ttyS0,115200n8 crc.test=1 crc.role=worker{tail}"
    )
    .split(' ')
    .map(String::from)
    .collect()
}

fn iso_cluster(iso: &Path, http: u16) -> String {
    common::loopback_cluster_with_nodes(
        "  - { name: worker-1, role: worker, mac: \"52:54:00:14:00:15\", ip: 127.0.20.21, installDev: /dev/vdb, kargs: [crc.node=worker-1] }\n",
        &format!(
            "http:\n  listen: 127.0.20.1:{http}\n  imagesDir: \"{{dir}}/images\"\n  ignitionDir: \"{{dir}}/ign\"\nadmin:\n  enabled: false\ndns:\n  enabled: false\nloadBalancer:\n  enabled: false\ndhcp:\n  enabled: false\n  leaseFile: \"{{dir}}/leases.json\"\nrhcos:\n  iso: {}\n  kargs: [crc.test=1]\n  roleKargs: {{ worker: [crc.role=worker] }}\n",
            iso.display()
        ),
    )
}

/// Serve `src` and compare `/boot/worker-1.iso` and `/boot/worker.iso`
/// byte for byte with `coreos-installer iso kargs modify --append` of the
/// appended kargs on `src`.
fn served_equals_append(inst: &Installer, src: &Path, work: &Path, label: &str) {
    let http = free_port();
    let app = InProc::start_yaml(&iso_cluster(src, http));
    let base = format!("http://127.0.20.1:{http}");
    let src_kargs = inst.run(&["iso", "kargs", "show", src.to_str().unwrap()]);
    assert!(
        src_kargs.contains("console=ttyS0,115200n8"),
        "{label}: the source ISO lacks the serial console: {src_kargs}"
    );
    for who in ["worker-1", "worker"] {
        let served = work.join(format!("{label}-{who}.served.iso"));
        let (code, _, err) = run(
            "curl",
            &[
                "-sS",
                "-f",
                "-o",
                served.to_str().unwrap(),
                &format!("{base}/boot/{who}.iso"),
            ],
        );
        assert_eq!(code, 0, "{label} {who}: {err}\n{}", app.log());
        let reference = work.join(format!("{label}-{who}.ref.iso"));
        let mut args = vec!["iso", "kargs", "modify"];
        let kargs = appended(&base, who);
        for k in &kargs {
            args.extend(["--append", k.as_str()]);
        }
        args.extend(["-o", reference.to_str().unwrap(), src.to_str().unwrap()]);
        inst.run(&args);
        let (a, b) = (
            std::fs::read(&served).unwrap(),
            std::fs::read(&reference).unwrap(),
        );
        if a != b {
            let shown = inst.run(&["iso", "kargs", "show", served.to_str().unwrap()]);
            let want = inst.run(&["iso", "kargs", "show", reference.to_str().unwrap()]);
            panic!(
                "{label} {who}: the served ISO is not `coreos-installer iso kargs modify --append`'s:\n served: {shown}\n   tool: {want}"
            );
        }
        // The serial console stays /dev/console (the last console=).
        let shown = inst.run(&["iso", "kargs", "show", served.to_str().unwrap()]);
        let last = shown
            .split_ascii_whitespace()
            .rfind(|w| w.starts_with("console="));
        assert_eq!(last, Some("console=ttyS0,115200n8"), "{label}: {shown}");
    }
}

#[test]
fn served_iso_is_coreos_installer_append_with_a_serial_console_iso() {
    let tools = ["curl", "xorriso", "xz"];
    let Some(inst) = need(
        "served_iso_is_coreos_installer_append_with_a_serial_console_iso",
        &tools,
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // 1. The console in the ISO's default kargs (kargs.json `default`).
    let iso: RhcosIso = rhcos_iso_with_default(
        w,
        "ci-default-console",
        [b"kernel", b"initrd"],
        1024,
        "console=ttyS0,115200n8",
    );
    assert!(iso.default_kargs.ends_with(" console=ttyS0,115200n8"));
    served_equals_append(&inst, &iso.path, w, "default");
    // 2. The usual way to get a serial console: `iso kargs modify -a`.
    let plain = rhcos_iso_with_default(w, "ci-plain", [b"kernel", b"initrd"], 1024, "");
    let modified = w.join("modified.iso");
    inst.run(&[
        "iso",
        "kargs",
        "modify",
        "-a",
        "console=ttyS0,115200n8",
        "-o",
        modified.to_str().unwrap(),
        plain.path.to_str().unwrap(),
    ]);
    served_equals_append(&inst, &modified, w, "modified");
    // 3. The same on an ISO coreos-assembler built (the crate's fixture).
    let fixture = inst
        .share
        .join("fixtures/iso/embed-areas-2023-07.x86_64.iso.xz");
    assert!(fixture.is_file(), "{} missing", fixture.display());
    let cosa = w.join("cosa.iso");
    let out = Command::new("xz")
        .args(["-dc", fixture.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&cosa, out.stdout).unwrap();
    let cosa_serial = w.join("cosa-serial.iso");
    inst.run(&[
        "iso",
        "kargs",
        "modify",
        "-a",
        "console=ttyS0,115200n8",
        "-o",
        cosa_serial.to_str().unwrap(),
        cosa.to_str().unwrap(),
    ]);
    served_equals_append(&inst, &cosa_serial, w, "cosa-2023-07");
}
