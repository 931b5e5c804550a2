//! Logging conventions, checked with the real binary (issue #27 item 11).
//!
//! One scenario produces an event at each level: `serve` with DHCP on
//! `0.0.0.0:<port>` and no `network.interface` (WARN at start, INFO
//! "listening" and "ready"), a malformed datagram to that port (DEBUG with
//! a `src` field), a reload of a now invalid file (ERROR), SIGTERM. It runs
//! under four sinks:
//! - a real `systemd-journald`, started by the test in a private mount
//!   namespace with its sockets and journal files in a temp dir; `serve`
//!   gets its stderr from journald's stream socket the way systemd connects
//!   a unit (the stream header, `JOURNAL_STREAM=<dev>:<ino>`), and sees the
//!   native socket at /run/systemd/journal/socket through a bind mount: the
//!   entries carry `PRIORITY` 3/4/6/7, `TARGET`, `F_SRC`, transport
//!   `journal`; `journalctl` reads them back;
//! - the same journald without the native socket in `serve`'s namespace:
//!   the `<N>`-prefixed lines on the stream become entries with the same
//!   priorities (what the real journald's `SyslogLevelPrefix=` accepts), and
//!   no timestamp in the message;
//! - no journald at all, stderr a file whose device:inode is
//!   `JOURNAL_STREAM`: every line starts with `<N>`; with a
//!   `JOURNAL_STREAM` naming another file the lines stay plain text;
//! - `--log-format json`: every line is a JSON object with `level`,
//!   `target` and `fields`.
//!
//! The namespaces need root (unshare -m); skipped with a reason otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{BIN, Proc, have, is_root, run, wait_until};

/// Mounts a tmpfs on /run/systemd (hiding any journald of the host),
/// optionally binds `$BIND` at /run/systemd/journal, then execs the rest.
const CLIENT_NS: &str = "set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run/systemd
mkdir -p /run/systemd/journal
if [ -n \"$BIND\" ]; then mount --bind \"$BIND\" /run/systemd/journal; fi
exec \"$@\"";

/// journald with its sockets in `$J` and its runtime journal in `$L`.
const JOURNALD_NS: &str = "set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run/systemd
mkdir -p /run/systemd/journal /run/log
mount --bind \"$J\" /run/systemd/journal
mount --bind \"$L\" /run/log
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi
exec \"$JOURNALD\"";

/// What systemd does for `StandardError=journal`: connect to journald's
/// stream socket, send the stream header (identifier, unit, priority,
/// level prefix on, no forwarding), make the socket stdout and stderr and
/// name it in JOURNAL_STREAM.
const STREAM_WRAPPER: &str = r#"import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b"crc-appliance\n\n6\n1\n0\n0\n0\n")
s.shutdown(socket.SHUT_RD)
st = os.fstat(s.fileno())
os.environ["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
os.dup2(s.fileno(), 1)
os.dup2(s.fileno(), 2)
os.execv(sys.argv[2], sys.argv[2:])
"#;

/// Root and `unshare -m` available, else why not.
fn namespaces() -> Result<(), String> {
    if !is_root() {
        return Err("needs root for a private mount namespace".into());
    }
    if !have("unshare") {
        return Err("unshare (util-linux) is not installed".into());
    }
    let (code, _, err) = run("unshare", &["-m", "true"]);
    if code != 0 {
        return Err(format!("unshare -m fails: {err}"));
    }
    Ok(())
}

fn journald_binary() -> Option<&'static str> {
    [
        "/lib/systemd/systemd-journald",
        "/usr/lib/systemd/systemd-journald",
    ]
    .into_iter()
    .find(|p| Path::new(p).is_file())
}

/// A UDP port on 0.0.0.0 that was free a moment ago.
fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The scenario's cluster file in `dir`; the port of its DHCP listener.
fn cluster(dir: &Path) -> (PathBuf, u16) {
    let port = free_udp_port();
    let yaml = common::only(&format!(
        "dhcp:\n  listen: 0.0.0.0:{port}\n  leaseFile: {}/leases.json\n",
        dir.display()
    ));
    let f = dir.join("cluster.yaml");
    std::fs::write(&f, yaml).unwrap();
    (f, port)
}

/// `serve` on the scenario's file, started by `start` (given the
/// `crc-appliance serve --cluster F` words); `read` returns everything
/// logged so far. Drives the scenario to the end and waits for the exit.
fn scenario(dir: &Path, start: impl FnOnce(&[&str]) -> Proc, read: impl Fn() -> String) {
    let (file, port) = cluster(dir);
    let mut app = start(&[BIN, "serve", "--cluster", file.to_str().unwrap()]);
    let pid = app.0.id().to_string();
    let mut logged = |what: &str| {
        wait_until(what, Duration::from_secs(30), || {
            if let Some(status) = app.0.try_wait().unwrap() {
                panic!(
                    "serve exited ({status}) before logging {what:?}:\n{}",
                    read()
                );
            }
            read().contains(what)
        });
    };
    logged("crc-appliance ready");
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    // The first malformed datagram is a (rate-limited) warning, the next
    // one within the interval a debug event: both levels from one source.
    udp.send_to(b"not dhcp", ("127.0.0.1", port)).unwrap();
    logged("dhcp: malformed datagram from");
    udp.send_to(b"not dhcp", ("127.0.0.1", port)).unwrap();
    logged("dhcp: malformed datagram:");
    std::fs::write(&file, "name: [not a cluster\n").unwrap();
    run("kill", &["-HUP", &pid]);
    logged("reload rejected");
    run("kill", &["-TERM", &pid]);
    let mut status = None;
    wait_until("serve to exit", Duration::from_secs(20), || {
        status = app.0.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "{}", read());
}

/// The env and command for `serve` in a client namespace (`bind`: the
/// socket dir to show at /run/systemd/journal).
fn in_client_ns(bind: Option<&Path>, words: &[&str]) -> Command {
    let mut c = Command::new("unshare");
    c.args(["-m", "sh", "-c", CLIENT_NS, "client-ns"])
        .args(words)
        .env(
            "BIND",
            bind.map(|b| b.display().to_string()).unwrap_or_default(),
        )
        .env("RUST_LOG", "info,crc_appliance=debug")
        .stdin(Stdio::null());
    c
}

/// A journald of the test's own; `journal()` reads its entries.
struct Journald {
    _proc: Proc,
    sockets: PathBuf,
    log: PathBuf,
}

impl Journald {
    fn start(dir: &Path, journald: &str) -> Journald {
        let sockets = dir.join("journal-sockets");
        let log = dir.join("journal-log");
        std::fs::create_dir_all(&sockets).unwrap();
        std::fs::create_dir_all(&log).unwrap();
        let proc = Proc(
            Command::new("unshare")
                .args(["-m", "sh", "-c", JOURNALD_NS])
                .env("J", &sockets)
                .env("L", &log)
                .env("JOURNALD", journald)
                // Not the READY=1 of a service manager running the tests.
                .env_remove("NOTIFY_SOCKET")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_until("journald's sockets", Duration::from_secs(20), || {
            sockets.join("socket").exists() && sockets.join("stdout").exists()
        });
        Journald {
            _proc: proc,
            sockets,
            log,
        }
    }

    /// `serve` with its stderr on this journald's stream, the native
    /// socket visible or not.
    fn serve(&self, dir: &Path, words: &[&str], native: bool) -> Proc {
        let wrapper = dir.join("stream.py");
        std::fs::write(&wrapper, STREAM_WRAPPER).unwrap();
        let stream = self.sockets.join("stdout");
        let mut all = vec![
            "/usr/bin/python3",
            wrapper.to_str().unwrap(),
            stream.to_str().unwrap(),
        ];
        all.extend_from_slice(words);
        let bind = native.then_some(self.sockets.as_path());
        Proc(
            in_client_ns(bind, &all)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    /// Our entries (identifier crc-appliance), one JSON object each.
    fn entries(&self) -> Vec<serde_json::Value> {
        let (_, out, _) = run(
            "journalctl",
            &[
                "-D",
                self.log.join("journal").to_str().unwrap(),
                "-o",
                "json",
                "--no-pager",
                "SYSLOG_IDENTIFIER=crc-appliance",
            ],
        );
        out.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn messages(&self) -> String {
        self.entries()
            .iter()
            .map(|e| format!("{} {}\n", e["PRIORITY"], e["MESSAGE"]))
            .collect()
    }
}

/// `2026-11-25T…`: the text format's RFC 3339 time.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[7] == b'-'
}

/// The checks that do not depend on the transport: each level's event
/// with its priority, and no timestamp inside a message.
fn check_priorities(entries: &[serde_json::Value], transport: &str) {
    let dump: String = entries.iter().map(|e| format!("{e}\n")).collect();
    let with = |needle: &str| -> &serde_json::Value {
        entries
            .iter()
            .find(|e| e["MESSAGE"].as_str().unwrap_or("").contains(needle))
            .unwrap_or_else(|| panic!("no entry with {needle:?}:\n{dump}"))
    };
    for (needle, prio) in [
        ("reload rejected", "3"),
        ("network.interface is not set", "4"),
        ("crc-appliance ready", "6"),
        ("dhcp: malformed datagram:", "7"),
    ] {
        let e = with(needle);
        assert_eq!(e["PRIORITY"], prio, "{needle}: {e}");
        assert_eq!(e["_TRANSPORT"], transport, "{needle}: {e}");
        let m = e["MESSAGE"].as_str().unwrap();
        assert!(
            !m.starts_with('<') && !is_timestamp(m),
            "prefix or timestamp left in the message: {m:?}"
        );
    }
    let prios: BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| e["PRIORITY"].as_str())
        .collect();
    assert!(prios.is_subset(&["3", "4", "6", "7"].into()), "{prios:?}");
}

#[test]
fn journald_native_entries_carry_priority_target_and_fields() {
    let test = "journald_native_entries_carry_priority_target_and_fields";
    if let Err(why) = namespaces() {
        skipped!("SKIPPED {test}: {why}");
        return;
    }
    let Some(jd) = journald_binary() else {
        skipped!("SKIPPED {test}: systemd-journald is not installed");
        return;
    };
    require_tools!("journalctl");
    let d = tempfile::tempdir().unwrap();
    let journald = Journald::start(d.path(), jd);
    scenario(
        d.path(),
        |w| journald.serve(d.path(), w, true),
        || journald.messages(),
    );
    let entries = journald.entries();
    check_priorities(&entries, "journal");
    let dropped = entries
        .iter()
        .find(|e| {
            e["MESSAGE"]
                .as_str()
                .unwrap()
                .contains("dhcp: malformed datagram:")
        })
        .unwrap();
    // Fields as journal fields, not inside the message.
    assert!(
        dropped["F_SRC"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{dropped}"
    );
    assert!(
        dropped["TARGET"]
            .as_str()
            .unwrap()
            .starts_with("crc_appliance::services::dhcp"),
        "{dropped}"
    );
    assert!(dropped["CODE_FILE"].as_str().is_some(), "{dropped}");
    assert!(
        !dropped["MESSAGE"].as_str().unwrap().contains("src="),
        "{dropped}"
    );
}

#[test]
fn journal_stream_without_native_socket_uses_priority_prefixes() {
    let test = "journal_stream_without_native_socket_uses_priority_prefixes";
    if let Err(why) = namespaces() {
        skipped!("SKIPPED {test}: {why}");
        return;
    }
    let Some(jd) = journald_binary() else {
        skipped!("SKIPPED {test}: systemd-journald is not installed");
        return;
    };
    require_tools!("journalctl");
    let d = tempfile::tempdir().unwrap();
    let journald = Journald::start(d.path(), jd);
    scenario(
        d.path(),
        |w| journald.serve(d.path(), w, false),
        || journald.messages(),
    );
    // journald parsed each `<N>` into the entry's priority.
    check_priorities(&journald.entries(), "stdout");
}

#[test]
fn fake_journal_stream_gives_prefixed_lines_without_timestamps() {
    let test = "fake_journal_stream_gives_prefixed_lines_without_timestamps";
    if let Err(why) = namespaces() {
        skipped!("SKIPPED {test}: {why}");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("stderr.log");
    std::fs::write(&log, "").unwrap();
    let meta = std::fs::metadata(&log).unwrap();
    let stream = format!("{}:{}", meta.dev(), meta.ino());
    let read = || std::fs::read_to_string(&log).unwrap();
    scenario(
        d.path(),
        |w| {
            Proc(
                in_client_ns(None, w)
                    .env("JOURNAL_STREAM", &stream)
                    .stdout(Stdio::null())
                    .stderr(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
                    .spawn()
                    .unwrap(),
            )
        },
        read,
    );
    let text = read();
    let mut prios = BTreeSet::new();
    for l in text.lines() {
        let (p, rest) = l
            .strip_prefix('<')
            .and_then(|r| r.split_once('>'))
            .unwrap_or_else(|| panic!("line without a <N> prefix: {l:?}\n{text}"));
        let first = rest.split_whitespace().next().unwrap_or("");
        assert!(
            !is_timestamp(first) && !["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&first),
            "a timestamp or level after the prefix: {l:?}"
        );
        prios.insert(p.to_string());
    }
    let want: BTreeSet<String> = ["3", "4", "6", "7"].map(String::from).into();
    assert_eq!(prios, want, "{text}");
    for (needle, prio) in [
        ("reload rejected", "<3>"),
        ("network.interface is not set", "<4>"),
        ("crc-appliance ready", "<6>"),
        ("dhcp: malformed datagram:", "<7>"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(prio) && l.contains(needle)),
            "{needle} not at {prio}:\n{text}"
        );
    }

    // A fatal error keeps its priority on every line; with JOURNAL_STREAM
    // naming another file (stderr redirected away from the journal) the
    // output is plain text again.
    let bad = d.path().join("bad.yaml");
    std::fs::write(&bad, "name: x\n").unwrap();
    for (js, prefixed) in [(stream.as_str(), true), ("1:2", false)] {
        std::fs::write(&log, "").unwrap();
        let status = in_client_ns(None, &[BIN, "check", "--cluster", bad.to_str().unwrap()])
            .env("JOURNAL_STREAM", js)
            .stdout(Stdio::null())
            .stderr(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(78));
        let text = read();
        assert!(text.lines().count() > 2, "{text}");
        if prefixed {
            assert!(text.lines().all(|l| l.starts_with("<3>")), "{text}");
        } else {
            assert!(text.starts_with("error: cluster file"), "{text}");
            assert!(!text.contains("<3>"), "{text}");
        }
    }
}

#[test]
fn log_format_json_lines_parse_with_level_target_fields() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("stderr.log");
    std::fs::write(&log, "").unwrap();
    let read = || std::fs::read_to_string(&log).unwrap();
    scenario(
        d.path(),
        |w| {
            Proc(
                Command::new(w[0])
                    .args(&w[1..])
                    .arg("--log-format")
                    .arg("json")
                    .env("RUST_LOG", "info,crc_appliance=debug")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
                    .spawn()
                    .unwrap(),
            )
        },
        read,
    );
    let text = read();
    let mut levels = BTreeSet::new();
    let mut src = None;
    for l in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"));
        let level = v["level"]
            .as_str()
            .unwrap_or_else(|| panic!("no level: {l}"));
        assert!(
            v["target"].as_str().is_some_and(|t| !t.is_empty()),
            "no target: {l}"
        );
        let msg = v["fields"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no fields.message: {l}"));
        assert!(v["timestamp"].as_str().is_some(), "no timestamp: {l}");
        levels.insert(level.to_string());
        if level == "DEBUG" && msg.contains("dhcp: malformed datagram:") {
            src = v["fields"]["src"].as_str().map(String::from);
        }
    }
    let want: BTreeSet<String> = ["ERROR", "WARN", "INFO", "DEBUG"].map(String::from).into();
    assert_eq!(levels, want, "{text}");
    assert!(
        src.as_deref().is_some_and(|s| s.starts_with("127.0.0.1:")),
        "the DEBUG event's src field: {src:?}\n{text}"
    );
}
