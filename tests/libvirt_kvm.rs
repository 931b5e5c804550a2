//! End to end under real KVM: `serve` with `libvirt.startOnServe` on
//! `qemu:///system` defines an isolated network (no `<forward>`), extracts
//! the kernel/initramfs from an ISO built here with xorriso, and boots a
//! tiny Linux (the host's Debian kernel + a busybox initramfs) through the
//! install phase. The guest reads our kernel command line, asks for a DHCP
//! lease, resolves `api.<cluster>`, fetches the ignition URL and the rootfs
//! URL, prints markers to ttyS0 (the serial log) and powers off; the serve
//! loop must then boot the persistent definition from disk. `vm down`
//! removes everything.
//!
//! Needs root, /dev/kvm, qemu-system-x86_64, libvirtd + virtlogd, a kernel
//! in /boot with its modules, busybox (its libraries are copied in) and
//! xorriso; skipped with a clear message otherwise. When /dev/kvm exists but
//! cannot boot a Linux guest (broken nested virtualization), the guest runs
//! under TCG (`CRC_APPLIANCE_DOMAIN_TYPE=qemu`) and the test says so. The network checks need the DNS, DHCP and HTTP
//! services; when this build's `serve` does not log their listeners, those
//! checks are reported as skipped and only the libvirt boot path is checked.
//!
//! `serve` runs in the test process (`common::inproc`): its libvirt helper
//! from the target dir, the helper's log lines in the appliance's log,
//! and `CRC_APPLIANCE_DOMAIN_TYPE=qemu` (TCG) set for that helper only
//! (`HelperProcs::env`) rather than in a spawned process's environment;
//! status is asserted through the typed document. The `vm down` commands
//! are the binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "libvirt")]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::initramfs::{busybox_base, live_iso};
use common::inproc::InProc;
use common::{BIN, run};
use crc_appliance::drivers::libvirt::status::{VmPhase, VmState};

/// The newest /boot/vmlinuz-* with a modules.dep.
fn host_kernel() -> Option<(PathBuf, PathBuf)> {
    let mut found: Vec<(PathBuf, PathBuf)> = std::fs::read_dir("/boot")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let ver = name.strip_prefix("vmlinuz-")?.to_string();
            let moddir = PathBuf::from("/lib/modules").join(&ver);
            moddir
                .join("modules.dep")
                .is_file()
                .then(|| (e.path(), moddir))
        })
        .collect();
    found.sort();
    found.pop()
}

/// Modules (paths relative to moddir) to load for virtio-pci + virtio-net,
/// dependencies first, from modules.dep. Built-in drivers need nothing.
fn module_order(moddir: &Path) -> Vec<String> {
    let dep = std::fs::read_to_string(moddir.join("modules.dep")).unwrap_or_default();
    let map: HashMap<String, Vec<String>> = dep
        .lines()
        .filter_map(|l| {
            let (m, d) = l.split_once(':')?;
            Some((
                m.to_string(),
                d.split_whitespace().map(str::to_string).collect(),
            ))
        })
        .collect();
    let mut order: Vec<String> = Vec::new();
    for want in ["virtio_pci.ko", "virtio_net.ko"] {
        let Some((m, deps)) = map
            .iter()
            .find(|(m, _)| m.rsplit('/').next().is_some_and(|f| f.starts_with(want)))
        else {
            continue;
        };
        for d in deps.iter().rev().chain(std::iter::once(m)) {
            if !order.contains(d) {
                order.push(d.clone());
            }
        }
    }
    order
}

const UDHCPC_SCRIPT: &str = r#"#!/bin/sh
case "$1" in
  bound|renew)
    ifconfig "$interface" "$ip" netmask "$subnet" up
    echo "$ip" > /tmp/ip
    echo "${dns%% *}" > /tmp/dns
    echo "$hostname" > /tmp/hostname
    ;;
esac
exit 0
"#;

fn init_script(domain: &str, modules: &[String]) -> String {
    let insmods: String = modules
        .iter()
        .map(|m| {
            format!(
                "insmod /lib/modules/{} || echo \"CRC-E2E insmod failed {m}\"\n",
                m.rsplit('/').next().unwrap_or(m)
            )
        })
        .collect();
    format!(
        r#"#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec >/dev/ttyS0 2>&1
echo "CRC-E2E booted"
{insmods}
for a in $(cat /proc/cmdline); do
  case "$a" in
    coreos.inst.ignition_url=*) IGN="${{a#*=}}" ;;
    coreos.live.rootfs_url=*) ROOTFS="${{a#*=}}" ;;
    coreos.inst.install_dev=*) DEV="${{a#*=}}" ;;
  esac
done
echo "CRC-E2E kargs dev=$DEV ign=$IGN rootfs=$ROOTFS"
# HTTP GET with nc (busybox wget crashes in this bare initramfs).
fetch() {{
  u="${{1#http://}}"; hp="${{u%%/*}}"; path="/${{u#*/}}"
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$hp" | nc -w 10 "${{hp%:*}}" "${{hp##*:}}" | tr -d '\r' > /tmp/resp
}}
ip link set lo up
ip link set eth0 up && echo "CRC-E2E eth0 up"
if udhcpc -i eth0 -n -q -t 10 -T 2 -s /udhcpc.sh; then
  echo "CRC-E2E lease ip=$(cat /tmp/ip) dns=$(cat /tmp/dns) host=$(cat /tmp/hostname)"
  echo "CRC-E2E resolve $(nslookup api.{domain} $(cat /tmp/dns) 2>&1 | tr '\n' ' ')"
  fetch "$IGN" && head -n 1 /tmp/resp | grep -q ' 200' && echo "CRC-E2E ignition $(sed '1,/^$/d' /tmp/resp)"
  fetch "$ROOTFS" && echo "CRC-E2E rootfs $(head -n 1 /tmp/resp | cut -d' ' -f2) $(grep -i '^content-length:' /tmp/resp | tr -d ' ' | tr A-Z a-z)"
else
  echo "CRC-E2E no lease"
fi
echo "CRC-E2E done"
sync
poweroff -f
"#
    )
}

fn build_initramfs(domain: &str, moddir: &Path) -> Vec<u8> {
    let modules = module_order(moddir);
    let mut c = busybox_base(&["tmp", "lib", "lib/modules"]);
    for m in &modules {
        let name = m.rsplit('/').next().unwrap_or(m);
        c.file(
            &format!("lib/modules/{name}"),
            0o644,
            &std::fs::read(moddir.join(m)).expect("read module"),
        );
    }
    c.file("udhcpc.sh", 0o755, UDHCPC_SCRIPT.as_bytes());
    c.file("init", 0o755, init_script(domain, &modules).as_bytes());
    c.finish()
}

/// Does KVM actually run a Linux guest here (nested virtualization can
/// expose /dev/kvm and still fail)? Boots the kernel with `-cpu host`, as
/// libvirt's host-passthrough would, and waits for its banner.
fn kvm_boots(vmlinuz: &Path, dir: &Path) -> bool {
    let out = dir.join("kvm-probe.log");
    let mut child = match Command::new("qemu-system-x86_64")
        .args([
            "-enable-kvm",
            "-machine",
            "q35",
            "-cpu",
            "host",
            "-m",
            "256",
        ])
        .args(["-display", "none", "-nic", "none", "-no-reboot", "-serial"])
        .arg(format!("file:{}", out.display()))
        .arg("-kernel")
        .arg(vmlinuz)
        .args(["-append", "console=ttyS0 panic=-1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(_) => return false,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut ok = false;
    while Instant::now() < deadline {
        if std::fs::read_to_string(&out)
            .unwrap_or_default()
            .contains("Linux version")
        {
            ok = true;
            break;
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    let _ = child.wait();
    ok
}

/// Stand-ins for the appliance's DHCP, DNS and HTTP services, used only when
/// this build's `serve` does not provide them (the services live in other
/// modules): busybox udhcpd and httpd, and a minimal UDP DNS responder for
/// `api.<domain>`. They check the libvirt side: an isolated bridge that
/// carries applianceIP, reachable from the guest for DHCP, DNS and HTTP.
struct StandIns {
    children: Vec<std::process::Child>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    dns: Option<std::thread::JoinHandle<()>>,
}

impl StandIns {
    #[allow(clippy::too_many_arguments)]
    fn start(
        dir: &Path,
        bridge: &str,
        net: &str,
        mac: &str,
        http_port: u32,
        www: &Path,
        api_name: &str,
    ) -> StandIns {
        let conf = dir.join("udhcpd.conf");
        std::fs::write(
            &conf,
            format!(
                "start {net}.100\nend {net}.200\ninterface {bridge}\nlease_file {}\n\
                 pidfile {}\noption subnet 255.255.255.0\noption router {net}.1\n\
                 option dns {net}.1\noption hostname master-0\nstatic_lease {mac} {net}.10\n",
                dir.join("udhcpd.leases").display(),
                dir.join("udhcpd.pid").display()
            ),
        )
        .unwrap();
        std::fs::write(dir.join("udhcpd.leases"), b"").unwrap();
        let mut children = Vec::new();
        for args in [
            vec![
                "udhcpd".to_string(),
                "-f".into(),
                conf.display().to_string(),
            ],
            vec![
                "httpd".into(),
                "-f".into(),
                "-p".into(),
                format!("{net}.1:{http_port}"),
                "-h".into(),
                www.display().to_string(),
            ],
        ] {
            children.push(
                Command::new("busybox")
                    .args(&args)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .expect("busybox stand-in"),
            );
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sock = std::net::UdpSocket::bind(format!("{net}.1:53")).expect("bind stand-in DNS");
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let answer: std::net::Ipv4Addr = format!("{net}.1").parse().unwrap();
        let api = api_name.to_string();
        let st = stop.clone();
        let dns = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                if let Some(resp) = dns_answer(&buf[..n], &api, answer) {
                    let _ = sock.send_to(&resp, peer);
                }
            }
        });
        StandIns {
            children,
            stop,
            dns: Some(dns),
        }
    }
}

/// Answer one query: A for `api` → `ip`, NODATA for its other types,
/// NXDOMAIN for other names.
fn dns_answer(q: &[u8], api: &str, ip: std::net::Ipv4Addr) -> Option<Vec<u8>> {
    if q.len() < 12 {
        return None;
    }
    let mut p = 12;
    let mut labels = Vec::new();
    loop {
        let l = *q.get(p)? as usize;
        p += 1;
        if l == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(q.get(p..p + l)?).to_lowercase());
        p += l;
    }
    let qtype = u16::from_be_bytes([*q.get(p)?, *q.get(p + 1)?]);
    let qend = p + 4;
    let name = labels.join(".");
    let mut r = q.get(..qend)?.to_vec();
    r[2] = 0x84 | (q[2] & 0x01); // QR, AA, RD copied
    r[3] = if name == api { 0 } else { 3 };
    r[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
    if name == api && qtype == 1 {
        r[7] = 1;
        r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4]);
        r.extend_from_slice(&ip.octets());
    }
    Some(r)
}

impl Drop for StandIns {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.dns.take() {
            let _ = t.join();
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `vm down` on drop, so a failed test leaves nothing behind.
struct VmDown(PathBuf);

impl Drop for VmDown {
    fn drop(&mut self) {
        let (code, out, err) = run(BIN, &["vm", "--cluster", self.0.to_str().unwrap(), "down"]);
        if code != 0 {
            eprintln!("vm down failed: {out}{err}");
        }
    }
}

#[test]
fn kvm_guest_boots_from_the_iso_and_reaches_the_appliance() {
    require!(common::is_root(), "needs root (libvirtd, bridges)");
    require!(Path::new("/dev/kvm").exists(), "no /dev/kvm");
    require_tools!(
        "qemu-system-x86_64",
        "libvirtd",
        "virtlogd",
        "virsh",
        "xorriso",
        "ldd"
    );
    let Some((vmlinuz, moddir)) = host_kernel() else {
        skipped!(
            "SKIPPED kvm e2e: no /boot/vmlinuz-* with /lib/modules (install linux-image-amd64)"
        );
        return;
    };
    require!(
        Path::new("/bin/busybox").exists(),
        "no /bin/busybox (install busybox)"
    );
    let _daemons = match common::libvirtd::start() {
        Ok(d) => d,
        Err(e) => {
            skipped!("SKIPPED kvm e2e: {e}");
            return;
        }
    };

    let pid = std::process::id();
    let octet = 100 + pid % 150;
    let net = format!("10.231.{octet}");
    let domain = "e2e.crc.testing";
    let http_port = 28000 + pid % 1000;
    let work = tempfile::tempdir().unwrap();
    let w = work.path();

    // The "live ISO": host kernel + our initramfs + a rootfs blob.
    let kernel = std::fs::read(&vmlinuz).unwrap();
    let initrd = build_initramfs(domain, &moddir);
    let rootfs = vec![0x5a; 123_457];
    let iso = live_iso(w, "crc-e2e", [&kernel, &initrd, &rootfs], &[], true);
    std::fs::create_dir_all(w.join("www/ignition")).unwrap();
    let marker = format!("crc-e2e-ignition-{pid}");
    std::fs::write(
        w.join("www/ignition/master.ign"),
        format!("{{\"ignition\":{{\"version\":\"3.2.0\"}},\"m\":\"{marker}\"}}"),
    )
    .unwrap();

    let pool = PathBuf::from(format!("/var/lib/libvirt/images/crc-e2e-{pid}"));
    let bridge = format!("crce2e{}", pid % 100000);
    let yaml = format!(
        r#"name: e2e
baseDomain: crc.testing
network:
  cidr: {net}.0/24
  gateway: {net}.1
  applianceIP: {net}.1
  interface: {bridge}
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:e2:{:02x}:0a", ip: {net}.10 }}
dns:
  listen: ["{net}.1:53"]
dhcp:
  listen: 0.0.0.0:67
  leaseFile: {w}/leases.json
loadBalancer:
  enabled: false
http:
  listen: {net}.1:{http_port}
  imagesDir: {w}/www/images
  ignitionDir: {w}/www/ignition
admin:
  listen: 127.0.0.1:0
rhcos:
  iso: {iso}
libvirt:
  uri: qemu:///system
  pool: {{ name: crc-e2e-{pid}, path: {pool} }}
  network: {{ name: crc-e2e-{pid}, bridge: {bridge}, mode: appliance }}
  startOnServe: true
  resources:
    master: {{ cpus: 1, memoryMib: 512, diskGib: 1 }}
"#,
        octet,
        w = w.display(),
        iso = iso.display(),
        pool = pool.display(),
    );
    let cluster = w.join("cluster.yaml");
    std::fs::write(&cluster, &yaml).unwrap();
    let _down = VmDown(cluster.clone());

    let kvm = kvm_boots(&vmlinuz, w);
    if !kvm {
        eprintln!(
            "NOTE kvm e2e: /dev/kvm cannot boot a Linux guest on this host (nested \
             virtualization); running the guest under TCG (CRC_APPLIANCE_DOMAIN_TYPE=qemu)"
        );
    }
    let mut helpers = common::inproc::helpers();
    if !kvm {
        let forced = ("CRC_APPLIANCE_DOMAIN_TYPE".into(), "qemu".into());
        helpers.env.push(forced);
    }
    let started =
        InProc::try_start_with_helpers(tempfile::tempdir().unwrap(), cluster.clone(), helpers);
    let mut app = started.unwrap_or_else(|(e, log)| panic!("serve did not start: {e}\n{log}"));
    let services = ["dns udp", "dhcp", "http"]
        .iter()
        .all(|s| app.addrs.contains_key(*s));
    let mac = format!("52:54:00:e2:{octet:02x}:0a");
    let _stand_ins = (!services).then(|| {
        eprintln!(
            "NOTE kvm e2e: this build's serve has no DNS/DHCP/HTTP listeners; using \
             stand-ins (busybox udhcpd/httpd, a tiny DNS responder) on the bridge"
        );
        StandIns::start(
            w,
            &bridge,
            &net,
            &mac,
            http_port,
            &w.join("www"),
            &format!("api.{domain}"),
        )
    });

    // `virsh destroy` of the install VM is no finished install: the serve
    // loop starts the install domain again and says why.
    common::wait_until("the install VM running", Duration::from_secs(60), || {
        run(
            "virsh",
            &["-c", "qemu:///system", "domstate", "e2e-master-0"],
        )
        .1
        .trim()
            == "running"
    });
    let (code, _, err) = run(
        "virsh",
        &["-c", "qemu:///system", "destroy", "e2e-master-0"],
    );
    assert_eq!(code, 0, "virsh destroy: {err}");
    app.wait_log(
        "not shut down by the installer; installing again",
        Duration::from_secs(30),
    );

    let log = pool.join("e2e-master-0-serial.log");
    let deadline = Instant::now() + Duration::from_secs(150);
    let serial = loop {
        let s = std::fs::read_to_string(&log).unwrap_or_default();
        if s.contains("CRC-E2E done") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "guest never finished; serial log {}:\n{s}\nappliance log:\n{}",
            log.display(),
            app.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for l in serial.lines().filter(|l| l.contains("CRC-E2E")) {
        eprintln!("guest: {}", l.trim());
    }
    // The install phase really ran our kernel with our kargs.
    assert!(serial.contains("CRC-E2E booted"), "{serial}");
    assert!(
        serial.contains("CRC-E2E eth0 up"),
        "virtio-net missing: {serial}"
    );
    let ign_url = format!("http://{net}.1:{http_port}/ignition/master.ign");
    assert!(
        serial.contains(&format!("dev=/dev/vda ign={ign_url} rootfs=http://{net}.1:{http_port}/images/e2e-live-rootfs.img")),
        "{serial}"
    );
    let host = if services { " host=master-0" } else { "" };
    assert!(
        serial.contains(&format!("CRC-E2E lease ip={net}.10 dns={net}.1{host}")),
        "{serial}"
    );
    let resolve = serial
        .lines()
        .find(|l| l.contains("CRC-E2E resolve"))
        .unwrap_or_default();
    assert!(
        resolve.contains(&format!("Address: {net}.1"))
            && resolve.contains(&format!("api.{domain}")),
        "{serial}"
    );
    assert!(serial.contains(&marker), "ignition not fetched:\n{serial}");
    assert!(
        serial.contains("CRC-E2E rootfs 200 content-length:123457"),
        "rootfs not fetched: {serial}"
    );
    // After the power-off the serve loop boots the persistent definition.
    let (_, xml, _) = run(
        "virsh",
        &["-c", "qemu:///system", "dumpxml", "e2e-master-0"],
    );
    assert!(
        xml.contains(if kvm { "type='kvm'" } else { "type='qemu'" }),
        "{xml}"
    );
    let mut st = app.status();
    common::wait_until(
        "the VM booted from its disk",
        Duration::from_secs(60),
        || {
            st = app.status();
            st.libvirt
                .as_ref()
                .and_then(|l| l.nodes.first())
                .is_some_and(|n| n.phase == VmPhase::Installed && n.state == VmState::Running)
        },
    );
    // The timeline saw it all: the destroyed attempt, then the install
    // that fetched its ignition and shut down.
    let t = &st.timeline.as_ref().expect("a timeline").nodes[0];
    if services {
        for (step, at) in [
            ("vmStarted", t.vm_started),
            ("lease", t.lease),
            ("rootfs", t.rootfs),
            ("ignition", t.ignition),
            ("installFinished", t.install_finished),
        ] {
            assert!(at.is_some(), "{step}: {t:?}");
        }
    }
    assert!(t.install_attempts >= 2, "{t:?}");
    let why = t.errors.first().map(String::as_str).unwrap_or_default();
    assert!(why.contains("(destroyed)"), "{t:?}");
    let (_, xml, _) = run(
        "virsh",
        &["-c", "qemu:///system", "dumpxml", "e2e-master-0"],
    );
    assert!(
        !xml.contains("<kernel>") && xml.contains("<boot order='1'/>"),
        "{xml}"
    );
    if let Err(e) = app.stop() {
        panic!("serve did not stop cleanly: {e}");
    }

    let (code, out, err) = run(BIN, &["vm", "--cluster", cluster.to_str().unwrap(), "down"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("removed domain e2e-master-0"), "{out}");
    assert!(
        out.contains(&format!("removed network crc-e2e-{pid}")),
        "{out}"
    );
    let (code, _, _) = run(
        "virsh",
        &["-c", "qemu:///system", "dominfo", "e2e-master-0"],
    );
    assert_ne!(code, 0, "domain still defined");
    assert!(!pool.exists(), "pool dir left behind");
}
