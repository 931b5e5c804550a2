//! Hitless reload and supervision, end to end: DNS under a bounded query
//! load across reloads (a raw UDP client and `dig`), a reload while
//! a forwarded query hangs on an upstream that never answers,
//! `crc-appliance reload` with a taken port and with an invalid file, and a
//! service task that dies stopping `serve` with an error naming it.
//! The LB side (keep-alive TLS through the API frontend across reloads) is
//! in `tests/lb.rs` next to its nginx backends.
//!
//! The appliance runs in this process (`common::inproc`) where the reload
//! comes from the real CLI (`crc-appliance reload`, the binary, over the
//! admin API) or from the hub (`InProc::reload`, what SIGHUP and
//! `POST /api/reload` request: the load test checks that a reload is
//! hitless, not how it was asked for), and where a task is failed by this
//! appliance's own test hook (`runtime::faults::FAULT_ENV`: `serve`'s
//! outcome is its error). The binary is spawned where the process is the
//! point: SIGHUP then SIGTERM during a stalled reload (the signals, and the
//! exit code 0 within the grace period), and the exit code 1 of a
//! panicking task (the only test of the code a failed `serve` exits with).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{Appliance, BIN, Served, run};
use crc_appliance::runtime::faults::FAULT_ENV;
use crc_appliance::serve::status::{ReloadResult, StatusDoc};

/// A DNS query for `name` A with `id` (RD clear, no EDNS).
fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

fn dig_a(server: SocketAddr, name: &str) -> String {
    let out = common::run_ok(
        "dig",
        &[
            &format!("@{}", server.ip()),
            "-p",
            &server.port().to_string(),
            "+short",
            "+time=2",
            "+tries=1",
            name,
            "A",
        ],
    );
    out.trim().to_string()
}

/// `crc-appliance reload` (the binary) on `app`'s cluster file.
fn reload_cli(app: &impl Served) -> (i32, String, String) {
    let f = app.cluster_file().display().to_string();
    run(BIN, &["reload", "--cluster", &f])
}

/// A port that was free a moment ago: the admin listener needs a fixed
/// one so that `crc-appliance reload` can find it from the file.
fn admin_port() -> u16 {
    common::free_port()
}

fn dns_cluster(extra_nodes: &str, dns_extra: &str) -> String {
    common::loopback_cluster_with_nodes(
        extra_nodes,
        &format!(
            "dns:\n  listen: [\"127.0.0.1:0\"]\n{dns_extra}dhcp: {{ enabled: false }}\nloadBalancer: {{ enabled: false }}\nhttp: {{ enabled: false }}\nadmin:\n  listen: 127.0.0.1:{}\n",
            admin_port()
        ),
    )
}

/// 10 s of ~2,000 queries/s over UDP with five reloads (as SIGHUP asks
/// for them), two of which change a node's address and add a node: every
/// query is answered NOERROR, and `dig` sees the new data right after each
/// reload.
#[test]
fn dns_answers_every_query_across_reloads_under_load() {
    require_tools!("dig");
    let app = InProc::start_yaml(&dns_cluster("", ""));
    let server = app.addr("dns udp");
    assert_eq!(dig_a(server, "worker-0.test.crc.testing"), "127.0.20.20");

    const TOTAL: usize = 20_000;
    const PER_TICK: usize = 20; // every 10 ms → 2,000 q/s
    let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // The answers queue here while the receiver thread waits for a core
    // on a loaded host: a deep queue, so only the server can lose one.
    let _ = socket2::SockRef::from(&*sock).set_recv_buffer_size(4 << 20);
    let answered = Arc::new(Mutex::new(vec![false; TOTAL]));
    let bad_rcode = Arc::new(AtomicU64::new(0));
    let sending = Arc::new(AtomicBool::new(true));
    let receiver = {
        let (sock, answered, bad, sending) = (
            sock.clone(),
            answered.clone(),
            bad_rcode.clone(),
            sending.clone(),
        );
        std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            let mut quiet_since: Option<Instant> = None;
            loop {
                match sock.recv_from(&mut buf) {
                    Ok((n, _)) if n >= 12 => {
                        quiet_since = None;
                        let id = usize::from(u16::from_be_bytes([buf[0], buf[1]]));
                        if buf[3] & 0x0f != 0 {
                            bad.fetch_add(1, Ordering::Relaxed);
                        }
                        if id < TOTAL {
                            answered.lock().unwrap()[id] = true;
                        }
                    }
                    _ => {
                        if !sending.load(Ordering::Relaxed) {
                            let t = *quiet_since.get_or_insert_with(Instant::now);
                            if t.elapsed() > Duration::from_secs(2) {
                                return;
                            }
                        }
                    }
                }
            }
        })
    };
    let sender = {
        let (sock, sending) = (sock.clone(), sending.clone());
        std::thread::spawn(move || {
            let names = ["master-0.test.crc.testing", "foo.apps.test.crc.testing"];
            let start = Instant::now();
            for tick in 0..TOTAL / PER_TICK {
                for k in 0..PER_TICK {
                    let id = tick * PER_TICK + k;
                    let q = query(id as u16, names[id % 2]);
                    sock.send_to(&q, server).unwrap();
                }
                let due = start + Duration::from_millis(10 * (tick as u64 + 1));
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            sending.store(false, Ordering::Relaxed);
        })
    };

    let good = std::fs::read_to_string(&app.cluster_file).unwrap();
    let moved = good.replace("ip: 127.0.20.20 }", "ip: 127.0.20.30 }");
    let added = moved.replace(
        "nodes:\n",
        "nodes:\n  - { name: worker-1, role: worker, mac: \"52:54:00:14:00:15\", ip: 127.0.20.21 }\n",
    );
    let steps: [(&str, Option<&str>); 5] = [
        ("unchanged", None),
        ("worker-0 moved", Some(&moved)),
        ("unchanged again", None),
        ("worker-1 added", Some(&added)),
        ("unchanged once more", None),
    ];
    for (i, (what, text)) in steps.iter().enumerate() {
        std::thread::sleep(Duration::from_millis(1500));
        if let Some(t) = text {
            std::fs::write(&app.cluster_file, t).unwrap();
        }
        app.reload();
        let st = app.status().reload;
        assert_eq!(st.attempts, i as u64 + 1, "reload {what} not done");
        assert!(st.ok, "{what}: {st:#?}");
        if i >= 1 {
            assert_eq!(
                dig_a(server, "worker-0.test.crc.testing"),
                "127.0.20.30",
                "right after reload {what}"
            );
        }
        if i >= 3 {
            assert_eq!(
                dig_a(server, "worker-1.test.crc.testing"),
                "127.0.20.21",
                "right after reload {what}"
            );
        }
    }
    sender.join().unwrap();
    receiver.join().unwrap();
    let answered = answered.lock().unwrap();
    let lost: Vec<usize> = (0..TOTAL).filter(|i| !answered[*i]).collect();
    assert!(
        lost.is_empty(),
        "{} of {TOTAL} queries unanswered (first: {:?})",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    assert_eq!(bad_rcode.load(Ordering::Relaxed), 0, "answers not NOERROR");
    assert!(!app.log().contains("closed listener"), "{}", app.log());
    let st = app.status().reload;
    assert_eq!(st.generation, 6, "{st:#?}");
}

/// An upstream that takes queries and never answers (UDP and TCP).
struct Blackhole {
    addr: SocketAddr,
    _udp: Arc<UdpSocket>,
    _tcp: TcpListener,
}

fn blackhole() -> Blackhole {
    for _ in 0..50 {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = udp.local_addr().unwrap();
        let Ok(tcp) = TcpListener::bind(addr) else {
            continue;
        };
        let udp = Arc::new(udp);
        let u2 = udp.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while u2.recv_from(&mut buf).is_ok() {}
        });
        return Blackhole {
            addr,
            _udp: udp,
            _tcp: tcp,
        };
    }
    panic!("no port for the blackhole upstream");
}

/// A reload while a forwarded query waits on an upstream that never
/// answers: the reload does not wait for it, and nothing is lost.
#[test]
fn reload_does_not_wait_for_a_hanging_forward() {
    require_tools!("dig", "curl");
    let up = blackhole();
    let mut yaml = dns_cluster("", "  forwardTimeout: 3s\n");
    yaml = yaml.replace(
        "  applianceIP: 127.0.20.1\n",
        &format!(
            "  applianceIP: 127.0.20.1\n  upstreamDNS: [\"{}\"]\n",
            up.addr
        ),
    );
    let app = InProc::start_yaml(&yaml);
    let server = app.addr("dns udp");
    let mut forward = Command::new("dig")
        .args([
            &format!("@{}", server.ip()),
            "-p",
            &server.port().to_string(),
            "+time=15",
            "+tries=1",
            "example.org",
            "A",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = reload_cli(&app);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        forward.try_wait().unwrap().is_none(),
        "the forwarded query already finished: the test proves nothing"
    );
    let st = app.status().reload;
    let took = st.duration_ms.unwrap();
    // The forward waits up to 3 s (× attempts); the reload must not.
    assert!(took < 1000, "reload took {took} ms: {st:#?}");
    eprintln!("reload with a hanging forward took {took} ms");
    assert_eq!(dig_a(server, "api.test.crc.testing"), "127.0.20.1");
    let out = forward.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("status: SERVFAIL"),
        "the forwarded query got no answer: {text}"
    );
}

/// `crc-appliance reload` to a file whose new listen address is taken by
/// another socket (this test's), then to an invalid file: each time the
/// running configuration is kept, the error reported, and the appliance
/// serving; then a valid change applies.
#[test]
fn reload_cli_reports_taken_ports_and_invalid_files() {
    require_tools!("curl");
    let app = InProc::start_yaml(&common::only(&format!(
        "http:\n  listen: 127.0.0.1:0\n  imagesDir: \"{{dir}}/images\"\n  ignitionDir: \"{{dir}}/ign\"\nadmin:\n  listen: 127.0.0.1:{}\n",
        admin_port()
    )));
    std::fs::create_dir_all(app.dir.path().join("images")).unwrap();
    std::fs::write(app.dir.path().join("images/hello.txt"), "hello\n").unwrap();
    let http = app.addr("http");
    let get = |addr: SocketAddr| {
        let (code, out, _) = run(
            "curl",
            &[
                "-sS",
                "--max-time",
                "5",
                &format!("http://{addr}/images/hello.txt"),
            ],
        );
        (code, out)
    };
    assert_eq!(get(http), (0, "hello\n".to_string()));
    let good = std::fs::read_to_string(&app.cluster_file).unwrap();

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap();
    let http_line = "http:\n  listen: 127.0.0.1:0\n";
    assert!(good.contains(http_line));
    std::fs::write(
        &app.cluster_file,
        good.replace(http_line, &format!("http:\n  listen: {taken_addr}\n")),
    )
    .unwrap();
    let (code, out, err) = reload_cli(&app);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!("bind TCP {taken_addr}")) && err.contains("generation 1 kept"),
        "{err}"
    );
    assert_eq!(get(http), (0, "hello\n".to_string()), "old listener kept");
    let st = app.status().reload;
    assert_eq!(st.result, Some(ReloadResult::Failed), "{st:#?}");
    assert_eq!(st.generation, 1, "{st:#?}");

    std::fs::write(&app.cluster_file, good.replace("name: test", "name: BAD")).unwrap();
    let (code, out, err) = reload_cli(&app);
    assert_eq!(code, 78, "{out}{err}");
    assert!(err.contains("must be lower case"), "{err}");
    assert_eq!(get(http), (0, "hello\n".to_string()));
    assert_eq!(app.status().reload.result, Some(ReloadResult::Invalid));
    assert!(!app.ended(), "a failed reload stopped serve");

    drop(taken);
    std::fs::write(
        &app.cluster_file,
        good.replace(http_line, &format!("http:\n  listen: {taken_addr}\n")),
    )
    .unwrap();
    let (code, out, err) = reload_cli(&app);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("reloaded: generation 2") && out.contains("http listen"),
        "{out}"
    );
    assert_eq!(get(taken_addr), (0, "hello\n".to_string()), "new listener");
    let (code, _) = get(http);
    assert_ne!(code, 0, "the old listener was closed");
    let metrics = common::run_ok(
        "curl",
        &["-sS", &format!("http://{}/metrics", app.addr("admin"))],
    );
    assert!(
        metrics.contains("crc_appliance_config_generation 2")
            && metrics.contains("crc_appliance_reload_attempts_total 3"),
        "{metrics}"
    );
}

/// A task of each service dying while it serves stops `serve` with an
/// error naming the task (each appliance's own `CRC_APPLIANCE_FAIL_TASK`
/// hook, after 3 s; four appliances at a time, in this process: the exit
/// code that error becomes is the panicking task's test below).
#[test]
fn a_dead_service_task_stops_serve_with_an_error() {
    let yaml = common::loopback_cluster_with(
        "dns:\n  listen: [\"127.0.0.1:0\"]\ndhcp:\n  listen: 127.0.20.1:0\n  leaseFile: \"{dir}/leases.json\"\nloadBalancer:\n  listen: { api: \"127.0.0.1:0\", machineConfig: \"127.0.0.1:0\", ingressHttp: \"127.0.0.1:0\", ingressHttps: \"127.0.0.1:0\" }\nhttp:\n  listen: 127.0.0.1:0\n  imagesDir: \"{dir}/images\"\n  ignitionDir: \"{dir}/ign\"\nadmin:\n  listen: 127.0.0.1:0\npxe:\n  tftpListen: 127.0.20.1:0\n  tftpRoot: \"{dir}\"\n",
    );
    let tasks = [
        "dns udp",
        "dns tcp",
        "dhcp socket",
        "dhcp lease writer",
        "lb frontend api",
        "lb check machine-config master-0",
        "lb bootstrap watch",
        "http listener",
        "http netboot state writer",
        "admin listener",
        "tftp listener",
    ];
    // Four appliances at a time (each waits out its fault's delay).
    let mut seen = HashSet::new();
    for batch in tasks.chunks(4) {
        std::thread::scope(|s| {
            let runs: Vec<_> = batch
                .iter()
                .map(|task| s.spawn(|| dies_of_its_fault(&yaml, task)))
                .collect();
            for run in runs {
                seen.insert(run.join().expect("a fault run panicked"));
            }
        });
    }
    assert_eq!(seen.len(), tasks.len());
}

/// `serve` on `yaml` with task `task` failing after 3 s: it serves every
/// section first, then stops with an error naming the task. Returns `task`.
fn dies_of_its_fault<'t>(yaml: &str, task: &'t str) -> &'t str {
    let mut app = InProc::with_hook(FAULT_ENV, &format!("{task}@3000")).start_yaml(yaml);
    // It serves normally first, every section in the typed schema.
    let admin = app.addr("admin");
    let (code, out, _) = run(
        "curl",
        &["-sS", "--max-time", "5", &format!("http://{admin}/status")],
    );
    assert_eq!(code, 0, "{task}: not serving before the fault");
    let doc: StatusDoc = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(
        doc.dns.is_some()
            && doc.dhcp.is_some()
            && doc.lb.as_ref().is_some_and(|l| l.pools.len() == 4)
            && doc.http.is_some()
            && doc.admin.is_some()
            && doc.tftp.is_some(),
        "{out}"
    );
    common::wait_until(
        &format!("{task}: serve ended"),
        Duration::from_secs(15),
        || app.ended(),
    );
    let err = app.stop().expect_err("serve ended without an error");
    let log = app.log();
    assert!(
        err.contains(task) && err.contains("failed by CRC_APPLIANCE_FAIL_TASK"),
        "{task}: {err}\n{log}"
    );
    assert!(
        log.contains(task) && log.contains("failed by CRC_APPLIANCE_FAIL_TASK"),
        "{task}: {log}"
    );
    assert!(log.contains("stopping"), "{task}: {log}");
    task
}

/// `serve`'s own tasks are supervised like a service's: the single-node
/// prober (it runs, idle, in every cluster) panicking (injected by
/// `CRC_APPLIANCE_FAIL_TASK`) stops `serve` with exit 1 and an error naming
/// the task, instead of freezing the timeline silently.
#[test]
fn a_panicking_serve_task_stops_serve_naming_it() {
    let yaml = common::loopback_cluster_with(
        "dns:\n  listen: [\"127.0.0.1:0\"]\nadmin:\n  listen: 127.0.0.1:0\n",
    );
    let mut app = Appliance::launch()
        .env(
            "CRC_APPLIANCE_FAIL_TASK",
            "serve single-node prober@1500:panic",
        )
        .start(&yaml);
    let admin = app.addr("admin");
    let (code, _, _) = run(
        "curl",
        &["-sS", "--max-time", "5", &format!("http://{admin}/status")],
    );
    assert_eq!(code, 0, "not serving before the fault");
    let code = app.wait_exit(Duration::from_secs(15));
    let log = app.log();
    assert_eq!(code, Some(Some(1)), "{log}");
    assert!(
        log.contains("serve single-node prober") && log.contains("panicked"),
        "{log}"
    );
    assert!(log.contains("stopping"), "{log}");
}

/// SIGTERM while a reload is stuck in staging (held 60 s by
/// `CRC_APPLIANCE_FAIL_TASK=reload stage@60000`) is honoured: the reload is
/// abandoned and `serve` stops cleanly within the grace period instead of
/// after the stage.
#[test]
fn sigterm_during_a_stalled_reload_stops_serve_within_the_grace_period() {
    let yaml = common::loopback_cluster_with(
        "dns:\n  listen: [\"127.0.0.1:0\"]\nadmin:\n  listen: 127.0.0.1:0\n",
    );
    let mut app = Appliance::launch()
        .env("CRC_APPLIANCE_FAIL_TASK", "reload stage@60000")
        .start(&yaml);
    app.signal("HUP");
    app.wait_log("SIGHUP: reloading", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    app.signal("TERM");
    let grace = crc_appliance::runtime::drain::GRACE;
    let code = app.wait_exit(grace);
    let log = app.log();
    assert_eq!(code, Some(Some(0)), "not stopped within {grace:?}: {log}");
    assert!(log.contains("reload abandoned"), "{log}");
    assert!(!log.contains("configuration reloaded"), "{log}");
}

/// `reload` lists every field that changed: a changed `network.upstreamDNS`
/// (once reported as "no changes" although it was applied) shows up in
/// the CLI's answer and in `/status`.
#[test]
fn reload_lists_a_changed_upstream_dns() {
    let app = InProc::start_yaml(&common::only(&format!(
        "dns:\n  listen: [\"127.0.0.1:0\"]\nadmin:\n  listen: 127.0.0.1:{}\n",
        admin_port()
    )));
    let good = std::fs::read_to_string(&app.cluster_file).unwrap();
    let edited = good.replace(
        "  applianceIP: 127.0.20.1\n",
        "  applianceIP: 127.0.20.1\n  upstreamDNS: [\"127.0.0.53\"]\n",
    );
    assert_ne!(good, edited);
    std::fs::write(&app.cluster_file, edited).unwrap();
    let (code, out, err) = reload_cli(&app);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("network.upstreamDns") && out.contains("127.0.0.53:53"),
        "{out}"
    );
    assert!(!out.contains("no changes"), "{out}");
    let changes = app.status().reload.changes;
    assert!(
        changes.iter().any(|c| c.contains("network.upstreamDns")),
        "{changes:?}"
    );
}
