//! The TFTP service end to end: the real services on loopback (in this
//! process; the binary where SIGTERM is the point), real clients (tftp-hpa
//! `tftp`, `atftp`, `curl tftp://`) and a raw UDP client for exact error
//! codes, retransmission, TIDs and garbage.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{Appliance, Served, only, run};

/// A root with the sizes of the issue (0, 511, 512, 513, 1 MiB + 1), a
/// subdirectory, a symlink out of the root and one inside it.
fn make_root(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    for (name, size) in [
        ("empty", 0usize),
        ("f511", 511),
        ("f512", 512),
        ("f513", 513),
        ("big", 1024 * 1024 + 1),
    ] {
        std::fs::write(root.join(name), content(size, size as u64)).expect("write");
    }
    std::fs::write(root.join("sub/inner.bin"), content(3000, 7)).expect("write");
    std::os::unix::fs::symlink("/etc/passwd", root.join("passwd-link")).expect("symlink");
    std::os::unix::fs::symlink("sub/inner.bin", root.join("inner-link")).expect("symlink");
    root
}

/// Deterministic non-repeating bytes.
fn content(size: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..size)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// Write the cluster file serving `root` (plus `extra` in `pxe:`) into
/// `dir`.
fn cluster_file(dir: &tempfile::TempDir, root: &Path, extra: &str) -> PathBuf {
    let yaml = only(&format!(
        "pxe:\n  tftpListen: 127.0.0.1:0\n  tftpRoot: {}\n{extra}",
        root.display()
    ));
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, yaml).expect("write");
    file
}

fn start(dir: &tempfile::TempDir, root: &Path, extra: &str) -> InProc {
    InProc::start_path(&cluster_file(dir, root, extra))
}

/// The binary, for the tests whose point is SIGTERM and the exit code.
fn spawn(dir: &tempfile::TempDir, root: &Path, extra: &str) -> Appliance {
    Appliance::launch().start_path(&cluster_file(dir, root, extra))
}

fn port(app: &impl Served) -> String {
    app.addr("tftp").port().to_string()
}

fn same(a: &Path, b: &Path) {
    let x = std::fs::read(a).unwrap_or_else(|e| panic!("{}: {e}", a.display()));
    let y = std::fs::read(b).unwrap_or_else(|e| panic!("{}: {e}", b.display()));
    assert!(
        x == y,
        "{} ({} bytes) differs from {} ({} bytes)",
        b.display(),
        y.len(),
        a.display(),
        x.len()
    );
}

/// Run with a time limit; returns (exit code, stdout+stderr).
fn run_limited(cmd: &str, args: &[&str], secs: u64) -> (i32, String) {
    let secs = secs.to_string();
    let mut all = vec!["-k", "5", &secs, cmd];
    all.extend_from_slice(args);
    let (code, out, err) = run("timeout", &all);
    (code, format!("{out}{err}"))
}

const FILES: [&str; 5] = ["empty", "f511", "f512", "f513", "big"];

#[test]
fn tftp_hpa_downloads_are_byte_identical() {
    require_tools!("tftp", "timeout");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    let app = start(&dir, &root, "");
    let p = port(&app);
    for f in FILES
        .iter()
        .chain(&["sub/inner.bin", "/f513", "inner-link"])
    {
        let out = dir.path().join("out");
        let _ = std::fs::remove_file(&out);
        let (code, text) = run_limited(
            "tftp",
            &[
                "127.0.0.1",
                &p,
                "-m",
                "binary",
                "-c",
                "get",
                f,
                &out.display().to_string(),
            ],
            30,
        );
        assert_eq!(code, 0, "tftp get {f}: {text}");
        same(&root.join(f.trim_start_matches('/')), &out);
    }
}

#[test]
fn atftp_downloads_with_and_without_options() {
    require_tools!("atftp", "timeout");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    let app = start(&dir, &root, "");
    let p = port(&app);
    let sets: [&[&str]; 4] = [
        &[],
        &[
            "--option",
            "blksize 1428",
            "--option",
            "windowsize 8",
            "--option",
            "tsize",
        ],
        &["--option", "blksize 8", "--option", "tsize"],
        &[
            "--option",
            "blksize 65464",
            "--option",
            "windowsize 64",
            "--option",
            "timeout 2",
        ],
    ];
    for opts in sets {
        for f in FILES {
            let out = dir.path().join("out");
            let _ = std::fs::remove_file(&out);
            let (code, text) = atftp_get(&p, f, &out, opts);
            assert_eq!(code, 0, "atftp {opts:?} {f}: {text}");
            same(&root.join(f), &out);
        }
    }
}

/// atftp `-g` of `file` from 127.0.0.1:`p` into `out` with `opts`.
fn atftp_get(p: &str, file: &str, out: &Path, opts: &[&str]) -> (i32, String) {
    let o = out.display().to_string();
    let mut args: Vec<&str> = opts.to_vec();
    args.extend_from_slice(&["-g", "-r", file, "-l", &o, "127.0.0.1", p]);
    run_limited("atftp", &args, 60)
}

/// The `tftp …` line of `crc-appliance check` on `file`.
fn check_tftp_line(file: &Path) -> String {
    let (code, out, err) = run(
        common::BIN,
        &["check", "--cluster", &file.display().to_string()],
    );
    assert_eq!(code, 0, "{err}");
    out.lines()
        .find(|l| l.starts_with("tftp "))
        .expect("tftp line")
        .to_string()
}

fn curl_get(p: &str, file: &str, out: &Path, extra: &[&str]) -> (i32, String) {
    let url = format!("tftp://127.0.0.1:{p}/{file}");
    let o = out.display().to_string();
    let mut args = vec!["-sS", "--max-time", "120", "-o", &o];
    args.extend_from_slice(extra);
    args.push(&url);
    let (code, a, b) = run("curl", &args);
    (code, format!("{a}{b}"))
}

#[test]
fn curl_downloads_with_and_without_blksize() {
    require_tools!("curl");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    let app = start(&dir, &root, "");
    let p = port(&app);
    for extra in [&[][..], &["--tftp-blksize", "1468"], &["--tftp-no-options"]] {
        // Not "empty": curl 7.88 fails every empty TFTP download with
        // "(71) getpeername() failed with errno 107", against tftpd-hpa too.
        for f in &FILES[1..] {
            let out = dir.path().join("out");
            let _ = std::fs::remove_file(&out);
            let (code, text) = curl_get(&p, f, &out, extra);
            assert_eq!(code, 0, "curl {extra:?} {f}: {text}");
            same(&root.join(f), &out);
        }
    }
}

#[test]
fn block_numbers_wrap_past_65535_with_blksize_512() {
    require_tools!("curl", "tftp", "timeout");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    // 65535 * 512 + 3 MiB: about 66 000 blocks of 512 bytes.
    let size = 65535 * 512 + 3 * 1024 * 1024 + 17;
    std::fs::write(root.join("huge"), content(size, 99)).expect("write");
    let app = start(&dir, &root, "");
    let p = port(&app);
    let out = dir.path().join("out-curl");
    let (code, text) = curl_get(&p, "huge", &out, &["--tftp-blksize", "512"]);
    assert_eq!(code, 0, "curl: {text}");
    same(&root.join("huge"), &out);
    let out = dir.path().join("out-hpa");
    let o = out.display().to_string();
    let (code, text) = run_limited(
        "tftp",
        &["127.0.0.1", &p, "-m", "binary", "-c", "get", "huge", &o],
        300,
    );
    assert_eq!(code, 0, "tftp: {text}");
    same(&root.join("huge"), &out);
}

#[test]
fn twenty_concurrent_curl_transfers() {
    require_tools!("curl");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    // All 20 come from 127.0.0.1: allow them all from one address.
    let app = start(
        &dir,
        &root,
        "  maxTransfersPerClient: 20\nadmin:\n  listen: 127.0.0.1:0\n",
    );
    let p = port(&app);
    let children: Vec<_> = (0..20)
        .map(|i| {
            let out = dir.path().join(format!("c{i}"));
            let blk = if i % 2 == 0 { "512" } else { "1468" };
            let child = Command::new("curl")
                .args(["-sS", "--max-time", "120", "--tftp-blksize", blk, "-o"])
                .arg(&out)
                .arg(format!("tftp://127.0.0.1:{p}/big"))
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn curl");
            (child, out)
        })
        .collect();
    for (mut child, out) in children {
        let st = child.wait().expect("wait curl");
        assert!(st.success(), "curl for {} failed: {st}", out.display());
        same(&root.join("big"), &out);
    }
    // The counters on the admin listener saw exactly these 20.
    // (The last ACKs may still be in flight when curl exits: poll briefly.)
    let url = format!("http://{}/metrics", app.addr("admin"));
    let fetch = || run("curl", &["-sS", "--max-time", "10", &url]).1;
    let done = "crc_appliance_tftp_requests_total{result=\"completed\"} 20";
    common::wait_until("20 completed transfers", Duration::from_secs(5), || {
        fetch().lines().any(|l| l == done)
    });
    let metrics = fetch();
    for line in [
        "crc_appliance_tftp_requests_total{result=\"completed\"} 20",
        "crc_appliance_tftp_started_total 20",
        "crc_appliance_tftp_active 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} not in:\n{metrics}"
        );
    }
    let bytes = format!(
        "crc_appliance_tftp_sent_bytes_total {}",
        20 * (1024 * 1024 + 1)
    );
    assert!(
        metrics.lines().any(|l| l == bytes),
        "{bytes} not in:\n{metrics}"
    );
}

// --- raw client: exact error codes, retransmission, TIDs, garbage

fn client() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

fn rrq(name: &[u8], mode: &str, opts: &[(&str, &str)]) -> Vec<u8> {
    let mut v = vec![0, 1];
    v.extend_from_slice(name);
    v.push(0);
    v.extend_from_slice(mode.as_bytes());
    v.push(0);
    for (a, b) in opts {
        v.extend_from_slice(a.as_bytes());
        v.push(0);
        v.extend_from_slice(b.as_bytes());
        v.push(0);
    }
    v
}

fn recv(s: &UdpSocket) -> (Vec<u8>, SocketAddr) {
    let mut buf = vec![0u8; 70000];
    let (n, from) = s.recv_from(&mut buf).expect("no answer from the server");
    buf.truncate(n);
    (buf, from)
}

/// Expect an ERROR packet; returns (code, message).
fn error_of(p: &[u8]) -> (u16, String) {
    assert!(
        p.len() >= 4 && p[..2] == [0, 5],
        "not an ERROR packet: {p:?}"
    );
    let msg = String::from_utf8_lossy(&p[4..])
        .trim_end_matches('\0')
        .to_string();
    (u16::from_be_bytes([p[2], p[3]]), msg)
}

#[test]
fn hostile_names_and_write_requests_get_error_packets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    let app = start(&dir, &root, "");
    let srv = app.addr("tftp");
    let c = client();
    let cases: [(&[u8], u16); 9] = [
        (b"../etc/passwd", 2),
        (b"sub/../../etc/passwd", 2),
        (b"/etc/passwd", 1), // names are relative to the root
        (b"passwd-link", 2), // symlink out of the root
        (b"missing", 1),
        (b"sub", 2), // a directory
        (b"..\\x", 2),
        (b"a\x01b", 2),
        (b"\xff\xfe", 2),
    ];
    for (name, want) in cases {
        c.send_to(&rrq(name, "octet", &[]), srv).expect("send");
        let (p, from) = recv(&c);
        let (code, msg) = error_of(&p);
        assert_eq!(code, want, "{:?}: {msg}", String::from_utf8_lossy(name));
        assert_ne!(from, srv, "errors for a request come from a new TID");
    }
    // Write request: illegal operation.
    let mut wrq = rrq(b"upload", "octet", &[]);
    wrq[1] = 2;
    c.send_to(&wrq, srv).expect("send");
    assert_eq!(error_of(&recv(&c).0).0, 4);
    // netascii is refused rather than silently served as octet.
    c.send_to(&rrq(b"f511", "netascii", &[]), srv)
        .expect("send");
    assert_eq!(error_of(&recv(&c).0).0, 4);
    // A real client's put is refused too, and nothing is written.
    if common::have("tftp") {
        let src = dir.path().join("upload");
        std::fs::write(&src, b"data").expect("write");
        let p = srv.port().to_string();
        let (_, text) = run_limited(
            "tftp",
            &[
                "127.0.0.1",
                &p,
                "-m",
                "binary",
                "-c",
                "put",
                &src.display().to_string(),
                "upload",
            ],
            30,
        );
        assert!(text.contains("Error code 4"), "tftp put: {text}");
        assert!(!root.join("upload").exists());
    }
}

#[test]
fn garbage_datagrams_then_a_normal_download() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    let app = start(&dir, &root, "");
    let srv = app.addr("tftp");
    let c = client();
    c.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut s = 0x1234_5678_9abc_def1u64;
    for i in 0..2000u32 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let len = (s % 600) as usize;
        let mut d = content(len, s);
        if i % 4 == 0 && len >= 2 {
            d[0] = 0;
            d[1] = (s >> 40) as u8 % 8;
        }
        c.send_to(&d, srv).expect("send");
    }
    // Drain the ERROR replies (some); none may be anything but ERROR.
    let mut buf = [0u8; 2048];
    while let Ok((n, _)) = c.recv_from(&mut buf) {
        assert_eq!(&buf[..2], &[0, 5], "reply to garbage: {:?}", &buf[..n]);
    }
    let out = dir.path().join("out");
    if common::have("curl") {
        let (code, text) = curl_get(&srv.port().to_string(), "big", &out, &[]);
        assert_eq!(code, 0, "curl: {text}");
        same(&root.join("big"), &out);
    }
    // And with the raw client, lock-step.
    let got = raw_download(&c, srv, "f513", &[]);
    assert_eq!(got, std::fs::read(root.join("f513")).expect("read"));
}

/// Download `name` with the raw client, ACKing every block.
fn raw_download(c: &UdpSocket, srv: SocketAddr, name: &str, opts: &[(&str, &str)]) -> Vec<u8> {
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    c.send_to(&rrq(name.as_bytes(), "octet", opts), srv)
        .expect("send");
    let mut data = Vec::new();
    let mut blksize = 512;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "raw download too slow");
        let (p, tid) = recv(c);
        match p[1] {
            6 => {
                let f: Vec<_> = p[2..].split(|&b| b == 0).collect();
                for w in f.chunks(2) {
                    if w[0] == b"blksize" {
                        blksize = String::from_utf8_lossy(w[1]).parse().expect("blksize");
                    }
                }
                c.send_to(&[0, 4, 0, 0], tid).expect("ack 0");
            }
            3 => {
                data.extend_from_slice(&p[4..]);
                c.send_to(&[0, 4, p[2], p[3]], tid).expect("ack");
                if p.len() - 4 < blksize {
                    return data;
                }
            }
            _ => panic!("unexpected {:?}", error_of(&p)),
        }
    }
}

#[test]
fn retransmits_on_timeout_then_gives_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    let app = start(&dir, &root, "  timeout: 200ms\n  retries: 2\n");
    let srv = app.addr("tftp");
    let c = client();
    c.send_to(&rrq(b"f513", "octet", &[]), srv).expect("send");
    // DATA 1, then the same block twice more (2 retries), then an ERROR.
    let t0 = Instant::now();
    for _ in 0..3 {
        let (p, _) = recv(&c);
        assert_eq!(&p[..4], &[0, 3, 0, 1], "expected DATA 1");
        assert_eq!(p.len(), 4 + 512);
    }
    let (p, tid) = recv(&c);
    assert_eq!(error_of(&p).0, 0);
    assert!(
        t0.elapsed() >= Duration::from_millis(350),
        "{:?}",
        t0.elapsed()
    );
    // The abandoned transfer does not answer any more.
    c.send_to(&[0, 4, 0, 1], tid).expect("send");
    c.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let mut buf = [0u8; 600];
    if let Ok((n, _)) = c.recv_from(&mut buf) {
        // The kernel may answer with nothing or the server with an ERROR; never DATA.
        assert_ne!(buf[1], 3, "DATA after giving up: {:?}", &buf[..n]);
    }
}

#[test]
fn foreign_tid_gets_error_5_and_the_transfer_continues() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    let app = start(&dir, &root, "");
    let srv = app.addr("tftp");
    let c = client();
    c.send_to(&rrq(b"f513", "octet", &[]), srv).expect("send");
    let (p, tid) = recv(&c);
    assert_eq!(&p[..4], &[0, 3, 0, 1]);
    let intruder = client();
    intruder.send_to(&[0, 4, 0, 1], tid).expect("send");
    assert_eq!(error_of(&recv(&intruder).0).0, 5);
    c.send_to(&[0, 4, 0, 1], tid).expect("ack");
    let (p, _) = recv(&c);
    assert_eq!(&p[..4], &[0, 3, 0, 2]);
    assert_eq!(p.len(), 4 + 1);
    c.send_to(&[0, 4, 0, 2], tid).expect("ack");
}

#[test]
fn over_max_transfers_is_server_busy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    let app = start(
        &dir,
        &root,
        "  maxTransfers: 1\n  timeout: 2s\n  retries: 1\n",
    );
    let srv = app.addr("tftp");
    let a = client();
    a.send_to(&rrq(b"big", "octet", &[]), srv).expect("send");
    assert_eq!(&recv(&a).0[..4], &[0, 3, 0, 1]); // holds the only slot
    let b = client();
    b.send_to(&rrq(b"f511", "octet", &[]), srv).expect("send");
    let (p, from) = recv(&b);
    let (code, msg) = error_of(&p);
    assert_eq!((code, from), (0, srv), "{msg}");
    assert!(msg.contains("busy"), "{msg}");
    // The EDK2-style tsize probe: OACK, then the client aborts with ERROR.
    let c = client();
    std::thread::sleep(Duration::from_secs(5)); // the held slot times out
    c.send_to(
        &rrq(b"f513", "octet", &[("tsize", "0"), ("blksize", "1468")]),
        srv,
    )
    .expect("send");
    let (p, tid) = recv(&c);
    assert_eq!(&p[..2], &[0, 6], "OACK expected: {p:?}");
    let text = String::from_utf8_lossy(&p[2..]).to_string();
    assert!(text.contains("tsize\u{0}513\u{0}"), "{text:?}");
    assert!(text.contains("blksize\u{0}1468\u{0}"), "{text:?}");
    c.send_to(b"\x00\x05\x00\x08abort\x00", tid).expect("send");
    // The slot is free again at once: well before the 2 s transfer timeout
    // (the pause only lets the transfer task read the ERROR first).
    std::thread::sleep(Duration::from_millis(300));
    let got = raw_download(&c, srv, "f512", &[("blksize", "100")]);
    assert_eq!(got, std::fs::read(root.join("f512")).expect("read"));
}

#[test]
fn real_ipxe_binaries_from_the_default_root() {
    let efi = Path::new("/usr/lib/ipxe/ipxe.efi");
    let kpxe = Path::new("/usr/lib/ipxe/undionly.kpxe");
    require!(
        efi.exists() && kpxe.exists(),
        "the ipxe package is not installed"
    );
    require_tools!("curl", "atftp");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, only("pxe:\n  tftpListen: 127.0.0.1:0\n")).expect("write");
    let line = check_tftp_line(&file);
    assert!(line.contains("root /usr/lib/ipxe"), "{line}");
    for f in ["undionly.kpxe", "ipxe.efi", "snponly.efi", "ipxe.pxe"] {
        assert!(line.contains(f), "{line}");
    }
    let app = InProc::start_path(&file);
    let p = port(&app);
    // ipxe.efi is Debian's symlink to /boot/ipxe.efi (allowed by default).
    for (f, src) in [("ipxe.efi", efi), ("undionly.kpxe", kpxe)] {
        let out = dir.path().join(f);
        let (code, text) = curl_get(&p, f, &out, &["--tftp-blksize", "1468"]);
        assert_eq!(code, 0, "{text}");
        same(src, &out);
        let out2 = dir.path().join(format!("{f}.atftp"));
        let opts = ["--option", "blksize 1432", "--option", "windowsize 4"];
        let (code, text) = atftp_get(&p, f, &out2, &opts);
        assert_eq!(code, 0, "{text}");
        same(src, &out2);
    }
}

#[test]
fn check_reports_found_and_missing_boot_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("boot");
    std::fs::create_dir_all(root.join("arm64-efi")).expect("mkdir");
    std::fs::write(root.join("undionly.kpxe"), b"x").expect("write");
    std::fs::write(root.join("ipxe-x86_64.efi"), b"x").expect("write");
    std::fs::write(root.join("arm64-efi/snponly.efi"), b"x").expect("write");
    let file = dir.path().join("cluster.yaml");
    std::fs::write(
        &file,
        only("pxe:\n  enabled: false\n  tftpListen: 127.0.0.1:6969\n  tftpRoot: boot\n"),
    )
    .expect("write");
    let line = check_tftp_line(&file);
    assert_eq!(
        line,
        format!(
            "tftp off 127.0.0.1:6969 root {} (found: undionly.kpxe, ipxe-x86_64.efi, arm64-efi/snponly.efi; missing: snponly.efi, ipxe.pxe)",
            root.display()
        )
    );
}

#[test]
fn config_errors_are_reported_with_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cluster.yaml");
    let yaml = only(
        "dns:\n  listen: ['127.0.0.1:5353']\npxe:\n  tftpListen: 127.0.0.1:5353\n  retries: 1000\n  bogus: 1\n",
    );
    std::fs::write(&file, &yaml).expect("write");
    let (code, _, err) = run(
        common::BIN,
        &["check", "--cluster", &file.display().to_string()],
    );
    assert_ne!(code, 0);
    assert!(err.contains("bogus"), "{err}");
    std::fs::write(&file, yaml.replace("  bogus: 1\n", "")).expect("write");
    let (code, _, err) = run(
        common::BIN,
        &["check", "--cluster", &file.display().to_string()],
    );
    assert_ne!(code, 0);
    assert!(err.contains("pxe.retries: 1000 is out of range"), "{err}");
    // The collision check sees the listener once the section itself is valid.
    let valid = yaml
        .replace("  bogus: 1\n", "")
        .replace("  retries: 1000\n", "");
    std::fs::write(&file, valid).expect("write");
    let (code, _, err) = run(
        common::BIN,
        &["check", "--cluster", &file.display().to_string()],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("pxe.tftpListen: UDP 127.0.0.1:5353 collides with dns.listen[0]"),
        "{err}"
    );
}

/// The audit's D4: one address that keeps asking (and never ACKs) holds at
/// most `maxTransfersPerClient` transfers; the rest of `maxTransfers` stays
/// free, so a second address still downloads with tftp-hpa and atftp.
#[test]
fn one_address_cannot_take_every_slot() {
    require_tools!("tftp", "atftp", "timeout");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    // Each un-ACKed transfer holds its slot for about 2 s × 5.
    let app = start(
        &dir,
        &root,
        "  maxTransfers: 8\n  maxTransfersPerClient: 3\n  timeout: 2s\n  retries: 5\n",
    );
    let srv = app.addr("tftp");
    // The hog: 20 requests from 127.0.0.2, each from its own port.
    let hog: Vec<UdpSocket> = (0..20)
        .map(|_| {
            let s = UdpSocket::bind("127.0.0.2:0").expect("bind 127.0.0.2");
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            s.send_to(&rrq(b"big", "octet", &[]), srv).expect("send");
            s
        })
        .collect();
    let mut held = Vec::new();
    let mut busy = 0;
    for s in &hog {
        let (p, from) = recv(s);
        if p[..4] == [0, 3, 0, 1] {
            held.push((s, from));
        } else {
            let (code, msg) = error_of(&p);
            assert_eq!((code, from), (0, srv), "{msg}");
            assert!(msg.contains("busy"), "{msg}");
            busy += 1;
        }
    }
    assert_eq!((held.len(), busy), (3, 17), "the hog's share");
    // Another address downloads while the hog holds all it may.
    let p = srv.port().to_string();
    let out = dir.path().join("out-hpa");
    let o = out.display().to_string();
    let (code, text) = run_limited(
        "tftp",
        &["127.0.0.1", &p, "-m", "binary", "-c", "get", "big", &o],
        60,
    );
    assert_eq!(code, 0, "tftp-hpa next to the hog: {text}");
    same(&root.join("big"), &out);
    let out = dir.path().join("out-atftp");
    let (code, text) = atftp_get(&p, "f513", &out, &["--option", "blksize 1428"]);
    assert_eq!(code, 0, "atftp next to the hog: {text}");
    same(&root.join("f513"), &out);
    let tftp = app.status().tftp.expect("a tftp section");
    assert_eq!(tftp.busy_client_limit, 17, "{tftp:?}");
    // The hog lets go (ERROR to each transfer), so stopping is quick.
    for (s, tid) in held {
        s.send_to(b"\x00\x05\x00\x00bye\x00", tid).expect("send");
    }
}

/// The audit's D9: SIGTERM lets running transfers finish (docs/operations.md
/// promises the grace period) while new requests get ERROR 0 "server
/// shutting down"; then `serve` exits 0.
#[test]
fn sigterm_lets_running_transfers_finish() {
    require_tools!("atftp");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    std::fs::write(root.join("large"), content(6 * 1024 * 1024 + 7, 5)).expect("write");
    let mut app = spawn(&dir, &root, "");
    let srv = app.addr("tftp");
    let p = srv.port().to_string();
    // A raw client with a transfer in progress: DATA 1 received, not ACKed.
    let slow = client();
    slow.send_to(&rrq(b"f513", "octet", &[]), srv)
        .expect("send");
    let (d1, tid) = recv(&slow);
    assert_eq!(&d1[..4], &[0, 3, 0, 1]);
    // A real client in the middle of a large download.
    let out = dir.path().join("out-large");
    let mut atftp = Command::new("timeout")
        .args(["-k", "5", "60", "atftp", "-g", "-r", "large", "-l"])
        .arg(&out)
        .args(["127.0.0.1", &p])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn atftp");
    // 512-byte blocks in lock-step: about a second on loopback; TERM as
    // soon as the first bytes are written.
    let size = |f: &Path| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while size(&out) == 0 {
        assert!(Instant::now() < deadline, "atftp never started receiving");
        std::thread::sleep(Duration::from_millis(5));
    }
    app.signal("TERM");
    let at_term = size(&out);
    app.wait_log("transfer(s) in progress", Duration::from_secs(5));
    // New requests are refused while the running ones finish.
    let late = client();
    late.send_to(&rrq(b"f511", "octet", &[]), srv)
        .expect("send");
    let (p2, from) = recv(&late);
    let (code, msg) = error_of(&p2);
    assert_eq!((code, from), (0, srv), "{msg}");
    assert!(msg.contains("shutting down"), "{msg}");
    // The raw transfer goes on: ACK 1 → DATA 2 (the last byte) → ACK 2.
    slow.send_to(&[0, 4, 0, 1], tid).expect("ack 1");
    let (d2, _) = recv(&slow);
    assert_eq!(&d2[..], &[0, 3, 0, 2, content(513, 513)[512]]);
    slow.send_to(&[0, 4, 0, 2], tid).expect("ack 2");
    let st = atftp.wait().expect("wait atftp");
    assert!(st.success(), "atftp cut by the shutdown: {st}");
    same(&root.join("large"), &out);
    assert!(at_term < size(&out), "atftp had finished before SIGTERM");
    // GRACE is 10 s; the process is gone well before the harness's kill.
    assert_eq!(app.wait_exit(Duration::from_secs(12)), Some(Some(0)));
    let log = app.log();
    assert!(!log.contains("cut after"), "{log}");
}

/// A transfer that cannot finish (its client stopped ACKing) is kept for
/// the drain budget, then ends with ERROR 0 "server shutting down", and
/// `serve` still exits 0 within the grace period.
#[test]
fn sigterm_cuts_a_stalled_transfer_after_the_drain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = make_root(dir.path());
    // Un-ACKed, it would be retransmitted for 2 s × 5: longer than the drain.
    let mut app = spawn(&dir, &root, "  timeout: 2s\n  retries: 5\n");
    let srv = app.addr("tftp");
    let c = client();
    c.send_to(&rrq(b"f513", "octet", &[]), srv).expect("send");
    assert_eq!(&recv(&c).0[..4], &[0, 3, 0, 1]);
    app.signal("TERM");
    // Still alive after the signal: DATA 1 again (a retransmission), then
    // the goodbye once the drain is over.
    let (p, _) = recv(&c);
    assert_eq!(&p[..4], &[0, 3, 0, 1], "cut at once: {p:?}");
    let deadline = Instant::now() + Duration::from_secs(15);
    let goodbye = loop {
        assert!(Instant::now() < deadline, "never cut");
        let (p, _) = recv(&c);
        if p[1] == 5 {
            break error_of(&p);
        }
    };
    assert_eq!(goodbye.0, 0);
    assert!(goodbye.1.contains("shutting down"), "{}", goodbye.1);
    assert_eq!(app.wait_exit(Duration::from_secs(12)), Some(Some(0)));
    assert!(app.log().contains("1 transfer(s) on"), "{}", app.log());
}
