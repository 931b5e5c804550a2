//! Two instances of a service in one process, each with its own run-time
//! context (`runtime::context::Context`), do not see each other's state
//! (issue #39 item 5: caps and HA state are values handed to the services,
//! not process globals).
//!
//! Two HTTP services run in this test process on the same plan, one with
//! the HTTP per-client cap lowered to 1 (as a short open-files limit does),
//! the other with the caps as configured. With one idle keep-alive
//! connection held to each, curl is refused by the first and served by the second; once the
//! held connection to the first closes, curl is served there too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crc_appliance::runtime::context::Context;
use crc_appliance::runtime::limits::cap::Caps;
use crc_appliance::runtime::service::Service;
use crc_appliance::services::http::Http;
use tokio_util::sync::CancellationToken;

/// Start an HTTP service for `plan` with `ctx` in this process; its bound
/// address.
async fn start_http(
    plan: &Arc<crc_appliance::plan::Plan>,
    ctx: &Context,
    stop: &CancellationToken,
) -> (Arc<Http>, SocketAddr) {
    let events = crc_appliance::timeline::Recorder::new(plan);
    let http = Http::new(plan, events, ctx);
    let commit = http.clone().stage(plan.clone()).await.expect("stage");
    commit();
    tokio::spawn(http.clone().run(stop.clone()));
    let listen = http.status().listen.expect("bound");
    (http, listen.parse().unwrap())
}

/// A keep-alive connection to `addr` that has been served one request (so
/// the service has admitted it: a connection without bytes may not even
/// be accepted yet, TCP_DEFER_ACCEPT), left idle.
async fn held_connection(addr: SocketAddr) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /images/hello.txt HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"hello\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("an answer within 5 s")
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    s
}

/// `curl` of `url` (bounded): its exit code and body.
async fn curl(url: String) -> (i32, String) {
    tokio::task::spawn_blocking(move || {
        let (code, out, _) = common::run("curl", &["-sS", "--max-time", "5", &url]);
        (code, out)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_http_services_in_one_process_keep_their_own_caps() {
    if !common::have("curl") {
        common::note_skip(
            "SKIPPED two_http_services_in_one_process_keep_their_own_caps: curl not installed",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    std::fs::create_dir_all(dir.path().join("images")).unwrap();
    std::fs::create_dir_all(dir.path().join("ign")).unwrap();
    std::fs::write(dir.path().join("images/hello.txt"), "hello\n").unwrap();
    let yaml = common::only(&format!(
        "http:\n  listen: 127.0.0.1:0\n  imagesDir: {d}/images\n  ignitionDir: {d}/ign\ndhcp:\n  enabled: false\n  leaseFile: {d}/leases.json\n"
    ));
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, yaml).unwrap();
    let plan = Arc::new(crc_appliance::config::load(&file).expect("valid cluster file"));

    let one_per_client = Context {
        caps: Caps {
            http_per_client: 1,
            ..Caps::default()
        },
        ..Context::default()
    };
    let as_configured = Context::default();
    let stop = CancellationToken::new();
    let (_a, capped) = start_http(&plan, &one_per_client, &stop).await;
    let (_b, free) = start_http(&plan, &as_configured, &stop).await;
    assert_ne!(capped, free);

    // One connection held to each, from this (the same) client address.
    let held_capped = held_connection(capped).await;
    let _held_free = held_connection(free).await;

    let (code, body) = curl(format!("http://{free}/images/hello.txt")).await;
    assert_eq!(
        (code, body.as_str()),
        (0, "hello\n"),
        "served as configured"
    );
    let (code, body) = curl(format!("http://{capped}/images/hello.txt")).await;
    assert_ne!(
        (code, body.as_str()),
        (0, "hello\n"),
        "a second connection from one client is refused at a per-client cap of 1"
    );

    // The first service's cap, not a fault: with its held connection
    // gone the same request is served.
    drop(held_capped);
    let mut served = false;
    for _ in 0..50 {
        if curl(format!("http://{capped}/images/hello.txt")).await == (0, "hello\n".into()) {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "served once the held connection closed");
    stop.cancel();
}
