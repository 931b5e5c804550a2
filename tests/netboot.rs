//! Network boot over HTTP against the real services (in this process; the
//! binary where it is killed), with curl and the CLI:
//! the RHCOS artifacts streamed out of an xorriso-built live ISO (ranges,
//! HEAD, ETag), the entry and per-node iPXE scripts with the install kernel
//! arguments, the switch to local boot once the node fetched its ignition
//! and booted again (persisted across a restart), and `node reinstall`;
//! the install state on a full disk (a tmpfs, retried writes, kill -9) and
//! a corrupt state file (every node boots its disk).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::initramfs::live_iso;
use common::inproc::InProc;
use common::{Appliance, BIN, Served, free_port, pattern, run};
use crc_appliance::serve::status::StatusDoc;
use crc_appliance::services::http::status::{NetbootRow, NetbootStateStatus};

/// A live-ISO look-alike; returns (iso, kernel, initrd, rootfs bytes).
fn make_iso(dir: &Path) -> (PathBuf, Vec<u8>, Vec<u8>, Vec<u8>) {
    let (k, i, r) = (
        pattern(70_001, 1),
        pattern(300_007, 2),
        pattern(2_100_003, 3),
    );
    let iso = live_iso(dir, "rhcos-test", [&k, &i, &r], &[], true);
    (iso, k, i, r)
}

/// curl; (exit code, HTTP code, body bytes).
fn get(args: &[&str], url: &str) -> (i32, String, Vec<u8>) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    let mut body = out.stdout;
    let nl = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let code = String::from_utf8_lossy(&body[nl + 1..]).to_string();
    body.truncate(nl);
    (out.status.code().unwrap_or(-1), code, body)
}

#[test]
fn artifacts_scripts_and_install_state() {
    require_tools!("curl", "xorriso");
    let work = tempfile::tempdir().unwrap();
    let (iso, kernel, _initrd, rootfs) = make_iso(work.path());
    let admin = free_port();
    // A fixed port: the scripts name the appliance's URL (http.listen).
    let http = free_port();
    let yaml = common::only(&format!(
        "http:\n  listen: 127.0.0.1:{http}\n  imagesDir: \"{{dir}}/images\"\n  ignitionDir: \"{{dir}}/ign\"\nadmin:\n  listen: 127.0.0.1:{admin}\ndhcp:\n  enabled: false\n  leaseFile: \"{{dir}}/leases.json\"\nrhcos:\n  iso: {}\n  kargs: [\"coreos.inst.image_url=http://127.0.0.1:{http}/images/metal.raw.xz\", ip=dhcp]\n  roleKargs: {{ master: [rd.neednet=1] }}\n",
        iso.display()
    ))
    .replace(
        "mac: \"52:54:00:14:00:0a\", ip: 127.0.20.10 }",
        "mac: \"52:54:00:14:00:0a\", ip: 127.0.20.10, installDev: /dev/nvme0n1, kargs: [node=1] }",
    );
    assert!(yaml.contains("installDev: /dev/nvme0n1"));
    let mut app = InProc::start_yaml(&yaml);
    let dir = app.dir.path().to_path_buf();
    std::fs::create_dir_all(dir.join("ign")).unwrap();
    std::fs::write(
        dir.join("ign/master.ign"),
        r#"{"ignition":{"version":"3.2.0"}}"#,
    )
    .unwrap();
    let base = format!("http://{}", app.addr("http"));

    // Artifacts out of the ISO: whole, a range, HEAD, a conditional.
    let (c, code, body) = get(&[], &format!("{base}/boot/vmlinuz"));
    assert_eq!((c, code.as_str()), (0, "200"));
    assert!(body == kernel, "vmlinuz differs from the ISO's");
    let (_, code, body) = get(&["-r", "1000-1999"], &format!("{base}/boot/rootfs.img"));
    assert_eq!(code, "206");
    assert_eq!(body, rootfs[1000..2000]);
    let (_, _, head) = get(&["-I"], &format!("{base}/boot/rootfs.img"));
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(
        head.contains(&format!("content-length: {}", rootfs.len())),
        "{head}"
    );
    let etag = head
        .lines()
        .find_map(|l| l.strip_prefix("etag: "))
        .expect("an ETag")
        .trim()
        .to_string();
    let (_, code, _) = get(
        &["-H", &format!("If-None-Match: {etag}")],
        &format!("{base}/boot/rootfs.img"),
    );
    assert_eq!(code, "304");
    assert_eq!(get(&[], &format!("{base}/boot/nope.img")).1, "404");

    // The entry script chains by MAC; the node's script installs.
    let (_, code, entry) = get(&[], &format!("{base}/boot/boot.ipxe"));
    assert_eq!(code, "200");
    let entry = String::from_utf8(entry).unwrap();
    assert!(entry.starts_with("#!ipxe\n"), "{entry}");
    assert!(entry.contains("/boot/${mac:hexhyp}.ipxe"), "{entry}");
    let script_url = format!("{base}/boot/52-54-00-14-00-0a.ipxe");
    let script = |url: &str| String::from_utf8(get(&[], url).2).unwrap();
    let s = script(&script_url);
    for needle in [
        "#!ipxe\n",
        &format!("kernel {base}/boot/vmlinuz initrd=main "),
        &format!("coreos.live.rootfs_url={base}/boot/rootfs.img"),
        &format!("coreos.inst.ignition_url={base}/ignition/master-0.ign"),
        "coreos.inst.install_dev=/dev/nvme0n1",
        "ignition.firstboot ignition.platform.id=metal",
        " ip=dhcp rd.neednet=1 node=1\n",
        &format!("initrd --name main {base}/boot/initrd.img\nboot\n"),
    ] {
        assert!(s.contains(needle), "install script lacks {needle:?}:\n{s}");
    }
    // A worker without node settings: the default disk, no master kargs.
    let w = script(&format!("{base}/boot/52:54:00:14:00:14.ipxe"));
    assert!(
        w.contains("coreos.inst.install_dev=/dev/sda") && !w.contains("rd.neednet"),
        "{w}"
    );
    assert_eq!(
        get(&[], &format!("{base}/boot/52-54-00-99-99-99.ipxe")).1,
        "404"
    );

    // Fetched by someone else (the operator's shell): still installing.
    assert_eq!(get(&[], &format!("{base}/ignition/master-0.ign")).1, "200");
    assert!(
        script(&script_url).contains("kernel "),
        "an operator fetch is no install"
    );
    // The node boots, its installer fetches the ignition and the image it
    // installs, then it boots again: local boot.
    std::fs::create_dir_all(dir.join("images")).unwrap();
    std::fs::write(dir.join("images/metal.raw.xz"), pattern(300_000, 4)).unwrap();
    let own = |url: &str| get(&["--interface", "127.0.20.10"], url);
    assert!(
        String::from_utf8(own(&script_url).2)
            .unwrap()
            .contains("kernel ")
    );
    assert_eq!(own(&format!("{base}/ignition/master-0.ign")).1, "200");
    assert_eq!(own(&format!("{base}/images/metal.raw.xz")).1, "200");
    std::thread::sleep(Duration::from_millis(300));
    let s = String::from_utf8(own(&script_url).2).unwrap();
    assert!(s.starts_with("#!ipxe\n") && s.contains("\nexit\n"), "{s}");
    let row = netboot_row(&app.status(), "master-0");
    assert_eq!(row.state, "installed", "{row:?}");

    // Persisted: a restart keeps the node on its disk.
    assert_eq!(app.stop(), Ok(()));
    let app2 = InProc::start_path(&app.cluster_file);
    let base2 = format!("http://{}", app2.addr("http"));
    let s = script(&format!("{base2}/boot/52-54-00-14-00-0a.ipxe"));
    assert!(s.contains("\nexit\n"), "{s}");
    // `node reinstall` sets it back.
    let f = app.cluster_file.to_str().unwrap();
    let (code, out, err) = run(BIN, &["node", "reinstall", "master-0", "--cluster", f]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(script(&format!("{base2}/boot/52-54-00-14-00-0a.ipxe")).contains("kernel "));
    let (code, _, err) = run(BIN, &["node", "reinstall", "nobody", "--cluster", f]);
    assert_ne!(code, 0, "{err}");
}

/// The three PXE artifacts as files instead of the ISO.
#[test]
fn artifacts_from_pxe_files() {
    require_tools!("curl");
    let work = tempfile::tempdir().unwrap();
    let initrd = pattern(123_457, 9);
    for (f, b) in [
        ("k", pattern(1000, 7)),
        ("i", initrd.clone()),
        ("r", pattern(10, 8)),
    ] {
        std::fs::write(work.path().join(f), b).unwrap();
    }
    let w = work.path().display();
    let app = InProc::start_yaml(&common::only(&format!(
        "http:\n  listen: 127.0.0.1:0\n  imagesDir: \"{{dir}}/images\"\n  ignitionDir: \"{{dir}}/ign\"\ndhcp:\n  enabled: false\n  leaseFile: \"{{dir}}/leases.json\"\nrhcos: {{ kernel: {w}/k, initramfs: {w}/i, rootfs: {w}/r }}\n"
    )));
    let base = format!("http://{}", app.addr("http"));
    let (_, code, body) = get(&[], &format!("{base}/boot/initrd.img"));
    assert_eq!(code, "200");
    assert!(body == initrd);
    let (_, code, body) = get(&["-r", "-100"], &format!("{base}/boot/initrd.img"));
    assert_eq!(code, "206");
    assert_eq!(body, initrd[initrd.len() - 100..]);
}

/// The DHCP boot answers per client, on the wire (a relay-addressed socket
/// on loopback, as in tests/dhcp.rs): firmware PXE by architecture (option
/// 93) gets an iPXE binary by TFTP with option 60/43 as dnsmasq sends them,
/// UEFI HTTP Boot gets option 60 `HTTPClient` and an http:// URL of the EFI
/// binary (which the appliance serves), iPXE gets the script URL, and an
/// installed OS's client — no vendor class — gets no boot options at all.
#[test]
fn dhcp_boot_answers_by_client() {
    use dhcproto::v4::{
        Architecture, DhcpOption, Flags, Message, MessageType, OptionCode, UnknownOption,
    };
    use dhcproto::{Decodable, Decoder, Encodable};
    use std::net::{Ipv4Addr, UdpSocket};
    require_tools!("curl");
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("ipxe");
    std::fs::create_dir_all(&root).unwrap();
    let efi = pattern(40_000, 5);
    std::fs::write(root.join("undionly.kpxe"), pattern(1000, 4)).unwrap();
    std::fs::write(root.join("snponly.efi"), &efi).unwrap();
    for f in ["k", "i", "r"] {
        std::fs::write(work.path().join(f), b"x").unwrap();
    }
    let w = work.path().display();
    let http = free_port();
    let app = InProc::start_yaml(&common::only(&format!(
        "http:\n  listen: 127.0.0.1:{http}\n  imagesDir: \"{{dir}}/images\"\n  ignitionDir: \"{{dir}}/ign\"\ndhcp:\n  listen: 127.0.20.1:0\n  leaseFile: \"{{dir}}/leases.json\"\n  relays: [127.0.20.4]\npxe:\n  tftpListen: 127.0.20.1:0\n  tftpRoot: {w}/ipxe\nrhcos: {{ kernel: {w}/k, initramfs: {w}/i, rootfs: {w}/r }}\n"
    )));
    let srv = app.addr("dhcp");
    let relay = Ipv4Addr::new(127, 0, 20, 4);
    let sock = UdpSocket::bind((relay, srv.port())).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mac = [0x52, 0x54, 0x00, 0x14, 0x00, 0x0a]; // master-0
    let mut xid = 1u32;
    let mut ask = |opts: Vec<DhcpOption>| -> Message {
        xid += 1;
        let u = Ipv4Addr::UNSPECIFIED;
        let mut m = Message::new_with_id(xid, u, u, u, relay, &mac);
        m.set_flags(Flags::default());
        m.opts_mut()
            .insert(DhcpOption::MessageType(MessageType::Discover));
        for o in opts {
            m.opts_mut().insert(o);
        }
        sock.send_to(&m.to_vec().unwrap(), srv).unwrap();
        let mut buf = [0u8; 1500];
        loop {
            let (n, _) = sock.recv_from(&mut buf).expect("an offer");
            let r = Message::decode(&mut Decoder::new(&buf[..n])).unwrap();
            if r.xid() == xid {
                return r;
            }
        }
    };
    let file = |m: &Message| match m.opts().get(OptionCode::BootfileName) {
        Some(DhcpOption::BootfileName(b)) => String::from_utf8_lossy(b).to_string(),
        _ => String::new(),
    };
    let class = |m: &Message| match m.opts().get(OptionCode::ClassIdentifier) {
        Some(DhcpOption::ClassIdentifier(b)) => String::from_utf8_lossy(b).to_string(),
        _ => String::new(),
    };
    // An installed OS: nothing about booting.
    let plain = ask(vec![DhcpOption::ClassIdentifier(b"MSFT 5.0".to_vec())]);
    assert_eq!(plain.opts().msg_type(), Some(MessageType::Offer));
    assert_eq!(file(&plain), "", "boot options to a non-boot client");
    assert_eq!(plain.siaddr(), Ipv4Addr::UNSPECIFIED);
    // BIOS PXE.
    let pxe = |arch: u16| {
        vec![
            DhcpOption::ClassIdentifier(
                format!("PXEClient:Arch:{arch:05}:UNDI:003000").into_bytes(),
            ),
            DhcpOption::ClientSystemArchitecture(Architecture::from(arch)),
        ]
    };
    let bios = ask(pxe(0));
    assert_eq!(file(&bios), "undionly.kpxe");
    assert_eq!(bios.siaddr(), Ipv4Addr::new(127, 0, 20, 1));
    assert_eq!(class(&bios), "PXEClient");
    assert_eq!(
        bios.opts().get(OptionCode::VendorExtensions),
        Some(&DhcpOption::VendorExtensions(vec![6, 1, 8, 255]))
    );
    // UEFI x64 PXE (7, and 9 as old iPXE/firmware send it).
    assert_eq!(file(&ask(pxe(7))), "snponly.efi");
    assert_eq!(file(&ask(pxe(9))), "snponly.efi");
    // UEFI HTTP Boot: a URL of the EFI binary, which is served.
    let h = ask(vec![
        DhcpOption::ClassIdentifier(b"HTTPClient:Arch:00016:UNDI:003000".to_vec()),
        DhcpOption::ClientSystemArchitecture(Architecture::from(16)),
    ]);
    assert_eq!(class(&h), "HTTPClient");
    let url = file(&h);
    assert_eq!(
        url,
        format!("http://127.0.0.1:{http}/boot/ipxe/snponly.efi")
    );
    let (_, code, body) = get(&[], &url);
    assert_eq!(code, "200");
    assert!(body == efi);
    // iPXE (user class, or option 175): the entry script over HTTP.
    let ipxe = ask(vec![
        DhcpOption::UserClass(b"iPXE".to_vec()),
        DhcpOption::ClientSystemArchitecture(Architecture::from(7)),
    ]);
    assert_eq!(
        file(&ipxe),
        format!("http://127.0.0.1:{http}/boot/boot.ipxe")
    );
    assert_eq!(class(&ipxe), "");
    let e175 = ask(vec![DhcpOption::Unknown(UnknownOption::new(
        OptionCode::Unknown(175),
        vec![19, 1, 1],
    ))]);
    assert!(file(&e175).ends_with("/boot/boot.ipxe"), "{}", file(&e175));
    // ARM64 without a binary for it: no boot options, the reason logged.
    assert_eq!(file(&ask(pxe(11))), "");
    app.wait_log(
        "no iPXE binary for client architecture 11",
        Duration::from_secs(5),
    );
}

/// A small tmpfs mounted on a temp dir, unmounted on drop.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(dir: PathBuf, size: &str) -> SmallFs {
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.to_str().unwrap();
        let (code, out, err) = run(
            "mount",
            &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", d],
        );
        assert_eq!(code, 0, "mount tmpfs: {out}{err}");
        SmallFs(dir)
    }

    /// Fill it with `fill` until the disk is full.
    fn fill(&self) {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.0.join("fill")).unwrap();
        let block = [0u8; 4096];
        for _ in 0..10_000 {
            if f.write_all(&block).and_then(|_| f.sync_all()).is_err() {
                return;
            }
        }
        panic!("the tmpfs never filled up");
    }

    /// File names in it, sorted.
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let d = self.0.to_str().unwrap_or_default();
        if run("umount", &[d]).0 != 0 {
            let _ = run("umount", &["-l", d]);
        }
    }
}

/// A netboot cluster with its state dir (`dhcp.leaseFile`'s) at `state`,
/// the PXE artifacts as files and `bootstrap.ign` in `work/ign`, admin on
/// `admin`.
fn netboot_cluster(work: &Path, state: &Path, admin: u16) -> String {
    netboot_cluster_on(work, state, admin, free_port())
}

/// As [`netboot_cluster`], HTTP on `http`, and the nodes install
/// `/images/metal.raw.xz` (`coreos.inst.image_url`), which exists.
fn netboot_cluster_on(work: &Path, state: &Path, admin: u16, http: u16) -> String {
    std::fs::create_dir_all(work.join("images")).unwrap();
    std::fs::write(work.join("images/metal.raw.xz"), pattern(200_000, 5)).unwrap();
    for (f, b) in [
        ("k", pattern(1000, 7)),
        ("i", pattern(100, 9)),
        ("r", pattern(10, 8)),
    ] {
        std::fs::write(work.join(f), b).unwrap();
    }
    std::fs::create_dir_all(work.join("ign")).unwrap();
    for f in ["bootstrap", "master", "worker"] {
        std::fs::write(
            work.join(format!("ign/{f}.ign")),
            r#"{"ignition":{"version":"3.2.0"}}"#,
        )
        .unwrap();
    }
    let (w, s) = (work.display(), state.display());
    common::only(&format!(
        "http:\n  listen: 127.0.0.1:{http}\n  imagesDir: \"{w}/images\"\n  ignitionDir: \"{w}/ign\"\nadmin:\n  listen: 127.0.0.1:{admin}\ndhcp:\n  enabled: false\n  leaseFile: \"{s}/leases.json\"\nrhcos: {{ kernel: {w}/k, initramfs: {w}/i, rootfs: {w}/r, kargs: [\"coreos.inst.image_url=http://127.0.0.1:{http}/images/metal.raw.xz\"] }}\n"
    ))
}

/// The script of the node with `mac` (`52-54-00-…`), fetched from `from`.
fn node_script(app: &impl Served, mac: &str, from: &str) -> String {
    let url = format!("http://{}/boot/{mac}.ipxe", app.addr("http"));
    let (c, code, body) = get(&["--interface", from], &url);
    assert_eq!((c, code.as_str()), (0, "200"), "{url}");
    String::from_utf8(body).unwrap()
}

fn is_install(s: &str) -> bool {
    s.contains("\nkernel ") && !s.contains("\nexit\n")
}

fn is_local_boot(s: &str) -> bool {
    s.contains("\nexit\n") && !s.contains("kernel ")
}

/// `GET /status` of the spawned appliance whose admin listens on `admin`.
fn status_over_http(admin: u16) -> StatusDoc {
    let (_, code, body) = get(&[], &format!("http://127.0.0.1:{admin}/status"));
    assert_eq!(code, "200");
    serde_json::from_slice(&body).unwrap()
}

/// The install state of `node` in `http.netboot`.
fn netboot_row(st: &StatusDoc, node: &str) -> NetbootRow {
    let http = st.http.as_ref().expect("an http section");
    let row = http.netboot.iter().find(|r| r.node == node);
    row.unwrap_or_else(|| panic!("no netboot row for {node}: {http:?}"))
        .clone()
}

/// `http.netbootState`.
fn netboot_state(st: &StatusDoc) -> NetbootStateStatus {
    let http = st.http.as_ref().expect("an http section");
    http.netboot_state.clone().expect("an http.netbootState")
}

const BOOTSTRAP_MAC: &str = "52-54-00-14-00-05";

/// The audit's D2: with the state dir on a full tmpfs, a node installs
/// (script, ignition from its own address, script again → `exit`); the
/// write fails, leaves no temp file, `/status` says not durable; once space
/// is back the writer retries on its own and the file appears; after a
/// kill -9 and a restart the node still boots its disk.
#[test]
fn install_state_survives_a_full_disk_and_a_kill() {
    require!(common::is_root(), "needs root (mount -t tmpfs)");
    require_tools!("curl", "mount", "umount");
    let work = tempfile::tempdir().unwrap();
    let small = SmallFs::mount(work.path().join("state"), "64k");
    let admin = free_port();
    let yaml = netboot_cluster(work.path(), &small.0, admin);
    // Spawned: it is killed (-9) below.
    let mut app = Appliance::start(&yaml);
    small.fill();

    // The bootstrap node installs while nothing can be written.
    assert!(is_install(&node_script(&app, BOOTSTRAP_MAC, "127.0.20.5")));
    let ign = format!("http://{}/ignition/bootstrap.ign", app.addr("http"));
    assert_eq!(get(&["--interface", "127.0.20.5"], &ign).1, "200");
    common::wait_until(
        "the ignition fetch recorded",
        Duration::from_secs(5),
        || {
            netboot_row(&status_over_http(admin), "bootstrap")
                .ignition_at
                .is_some()
        },
    );
    let image = format!("http://{}/images/metal.raw.xz", app.addr("http"));
    assert_eq!(get(&["--interface", "127.0.20.5"], &image).1, "200");
    common::wait_until("the install finished", Duration::from_secs(5), || {
        netboot_row(&status_over_http(admin), "bootstrap").state == "installed"
    });
    let s = node_script(&app, BOOTSTRAP_MAC, "127.0.20.5");
    assert!(
        is_local_boot(&s),
        "an installed node must boot its disk:\n{s}"
    );
    app.wait_log("cannot write the netboot state", Duration::from_secs(5));
    assert_eq!(small.names(), ["fill"], "a failed write left a file behind");
    let st = netboot_state(&status_over_http(admin));
    assert!(!st.durable, "{st:?}");
    assert!(
        st.write_error
            .as_deref()
            .unwrap_or("")
            .contains("No space left"),
        "{st:?}"
    );
    assert!(app.log().contains("NOT durable"), "{}", app.log());

    // Space again: the writer retries by itself, no request needed.
    std::fs::remove_file(small.0.join("fill")).unwrap();
    let file = small.0.join("test-netboot.json");
    common::wait_until(
        "the state file written by a retry",
        Duration::from_secs(10),
        || file.exists(),
    );
    assert_eq!(small.names(), ["test-netboot.json"], "a temp file remains");
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(
        saved["nodes"]["bootstrap"]["installedAt"].is_u64(),
        "{saved}"
    );
    common::wait_until("durable in /status", Duration::from_secs(5), || {
        netboot_state(&status_over_http(admin)).durable
    });
    app.wait_log("durable again", Duration::from_secs(5));

    // kill -9 and a restart: the node still boots its disk.
    assert_eq!(app.stop_with("KILL"), None);
    let app2 = Appliance::launch().start_path(&app.cluster_file);
    let s = node_script(&app2, BOOTSTRAP_MAC, "127.0.20.5");
    assert!(is_local_boot(&s), "the installed node got:\n{s}");
    // Another node, never installed, still installs.
    assert!(is_install(&node_script(
        &app2,
        "52-54-00-14-00-0a",
        "127.0.20.10"
    )));
}

/// A state file that cannot be parsed at start: nobody knows which node
/// installed, so every node boots its disk (never the install script), the
/// file is kept as `.corrupt`, `/status` and the log say why, the safe
/// state is written in its place (a restart answers the same), and only
/// `node reinstall` sends a node to the installer.
#[test]
fn corrupt_install_state_boots_every_node_from_disk() {
    require_tools!("curl");
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let garbage = b"{\"version\": 1, \"nodes\": {\"master-0\": {\"installedAt\": 17";
    std::fs::write(state.join("test-netboot.json"), garbage).unwrap();
    let admin = free_port();
    let yaml = netboot_cluster(work.path(), &state, admin);
    let mut app = InProc::start_yaml(&yaml);
    app.wait_log("is unreadable", Duration::from_secs(5));
    let nodes = [
        (BOOTSTRAP_MAC, "127.0.20.5"),
        ("52-54-00-14-00-0a", "127.0.20.10"),
        ("52-54-00-14-00-14", "127.0.20.20"),
    ];
    for (mac, ip) in nodes {
        let s = node_script(&app, mac, ip);
        assert!(is_local_boot(&s), "{mac} got:\n{s}");
    }
    let st = app.status();
    let load = netboot_state(&st).load_error.unwrap_or_default();
    assert!(load.contains("kept as"), "{st:?}");
    let row = netboot_row(&st, "bootstrap");
    assert_eq!((row.state.as_str(), row.assumed), ("installed", true));
    assert_eq!(
        std::fs::read(state.join("test-netboot.json.corrupt")).unwrap(),
        garbage
    );
    common::wait_until("the safe state written", Duration::from_secs(5), || {
        netboot_state(&app.status()).durable
    });

    // The operator's way back to an install, for one node only.
    let f = app.cluster_file.to_str().unwrap().to_string();
    let (code, out, err) = run(BIN, &["node", "reinstall", "master-0", "--cluster", &f]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(is_install(&node_script(
        &app,
        "52-54-00-14-00-0a",
        "127.0.20.10"
    )));
    assert!(is_local_boot(&node_script(
        &app,
        BOOTSTRAP_MAC,
        "127.0.20.5"
    )));

    // A restart reads the safe state: the same answers.
    assert_eq!(app.stop(), Ok(()));
    let app2 = InProc::start_path(&app.cluster_file);
    assert!(is_local_boot(&node_script(
        &app2,
        BOOTSTRAP_MAC,
        "127.0.20.5"
    )));
    assert!(is_local_boot(&node_script(
        &app2,
        "52-54-00-14-00-14",
        "127.0.20.20"
    )));
    assert!(is_install(&node_script(
        &app2,
        "52-54-00-14-00-0a",
        "127.0.20.10"
    )));
}

/// Issue 28 items 1, 2 and 5: only the node's own fetches move its install
/// state (the operator's curl from loopback, or another node's, changes
/// nothing); an ignition fetch alone (the install failed after it: no image
/// download) gets the install script again, behind a BIOS local-disk boot,
/// never `exit`; a complete download of the image it installs after the
/// ignition makes it installed: `exit`, and the timeline shows the steps.
#[test]
fn install_state_moves_only_on_the_nodes_own_evidence() {
    require_tools!("curl");
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let (admin, http) = (free_port(), free_port());
    let yaml = netboot_cluster_on(work.path(), &state, admin, http);
    let app = InProc::start_yaml(&yaml);
    let master0 = || netboot_row(&app.status(), "master-0");
    let base = format!("http://{}", app.addr("http"));
    let mac = "52-54-00-14-00-0a";
    let (me, other, operator) = ("127.0.20.10", "127.0.20.11", "127.0.0.1");
    let as_ = |from: &str, url: &str| get(&["--interface", from], url);

    // The operator looks before the install: nothing moves.
    assert!(is_install(&node_script(&app, mac, operator)));
    assert_eq!(master0().state, "pending");
    app.wait_log("operator fetch of the script", Duration::from_secs(5));

    // The node boots and its installer fetches the ignition.
    assert!(is_install(&node_script(&app, mac, me)));
    assert_eq!(as_(me, &format!("{base}/ignition/master-0.ign")).1, "200");
    common::wait_until("the ignition recorded", Duration::from_secs(5), || {
        master0().state == "unconfirmed"
    });
    // Compared as the JSON `/status` serves.
    let as_json = |row: NetbootRow| serde_json::to_value(row).unwrap();
    let before = as_json(master0());

    // Mid-install, the operator and another node look: nothing moves.
    for from in [operator, other] {
        let s = node_script(&app, mac, from);
        assert!(!s.contains("\nexit\n"), "{from} got:\n{s}");
        assert_eq!(as_json(master0()), before, "after {from}");
    }

    // The install failed after the ignition (its image never came): the
    // next boot reaches the installer (after a BIOS disk boot attempt).
    let s = node_script(&app, mac, me);
    assert!(!s.contains("\nexit\n"), "a failed install got:\n{s}");
    assert!(
        s.contains("iseq ${platform} pcbios && sanboot --no-describe --drive 0x80 ||\nkernel "),
        "{s}"
    );
    assert_eq!(master0().state, "installing");

    // It installs again; part of the image is no evidence, all of it is.
    assert_eq!(as_(me, &format!("{base}/ignition/master-0.ign")).1, "200");
    let image = format!("{base}/images/metal.raw.xz");
    assert_eq!(get(&["--interface", me, "-r", "0-999"], &image).1, "206");
    assert_eq!(as_(operator, &image).1, "200", "the operator's download");
    std::thread::sleep(Duration::from_millis(300));
    assert_ne!(master0().state, "installed");
    assert_eq!(as_(me, &image).1, "200");
    common::wait_until("installed on evidence", Duration::from_secs(5), || {
        master0().state == "installed"
    });
    let row = master0();
    assert!(row.install_finished_at.is_some(), "{row:?}");
    assert!(is_local_boot(&node_script(&app, mac, me)));
    // The timeline: script served, ignition, install finished.
    let timeline = app.status().timeline.expect("a timeline section");
    let tl = timeline
        .nodes
        .iter()
        .find(|n| n.node == "master-0")
        .unwrap();
    for (step, at) in [
        ("netbootScript", tl.netboot_script),
        ("ignition", tl.ignition),
        ("installFinished", tl.install_finished),
    ] {
        assert!(at.is_some(), "{step} missing: {tl:?}");
    }
}
