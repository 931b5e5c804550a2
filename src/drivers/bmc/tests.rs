//! The driver against a scripted Redfish server on 127.0.0.1: link
//! following (manager fallback), the calls `up` makes, retries of
//! transient refusals, the journal, and the error sentences for 404, 403,
//! a missing CD and a failing step.

use crate::runtime::sync::LockExt as _;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use super::{BmcAction, act};
use crate::model::bmc::{BmcCfg, BmcTls};
use crate::model::cluster::{MacAddr, NodeCfg, Role};

type Routes = HashMap<(String, String), (u16, Value)>;
type Log = Arc<Mutex<Vec<(String, String, String)>>>;

/// Serve `routes` (unknown: 404) and record every request.
async fn server(routes: Routes) -> (u16, Log) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let log: Log = Arc::default();
    let rec = log.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let head_end = loop {
                let n = s.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            while buf.len() < head_end + len {
                let n = s.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&buf[head_end..]).to_string();
            let mut first = head.split_whitespace();
            let (m, p) = (
                first.next().unwrap().to_string(),
                first.next().unwrap().to_string(),
            );
            rec.locked().push((m.clone(), p.clone(), body.clone()));
            // Variants of a route: `#if-match` for a request with our ETag,
            // `#stream` for an InsertMedia with TransferMethod.
            let key = if head.to_ascii_lowercase().contains("\r\nif-match: w/\"7\"") {
                (m.clone(), format!("{p}#if-match"))
            } else if body.contains("TransferMethod") {
                (m.clone(), format!("{p}#stream"))
            } else {
                (m, p)
            };
            let (status, doc) = routes
                .get(&key)
                .cloned()
                .unwrap_or((404, json!({"error": {"message": "not here"}})));
            let text = doc.to_string();
            let reply = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
            let _ = s.write_all(reply.as_bytes()).await;
        }
    });
    (port, log)
}

pub(super) fn node(dir: &Path, port: u16) -> NodeCfg {
    super::client::TEST_BACKOFF_MS.store(10, std::sync::atomic::Ordering::Relaxed);
    std::fs::write(dir.join("u"), "admin\n").unwrap();
    std::fs::write(dir.join("p"), "pw\n").unwrap();
    NodeCfg {
        name: "metal-0".into(),
        role: Role::Worker,
        mac: "52:54:00:00:00:01".parse::<MacAddr>().unwrap(),
        ip: "127.0.20.30".parse().unwrap(),
        ipv6: None,
        install_dev: None,
        kargs: Vec::new(),
        bmc: Some(BmcCfg {
            url: format!("http://127.0.0.1:{port}/redfish/v1/Systems/1"),
            origin: format!("http://127.0.0.1:{port}"),
            host: "127.0.0.1".into(),
            port,
            path: "/redfish/v1/Systems/1".into(),
            username_file: dir.join("u"),
            password_file: dir.join("p"),
            tls: BmcTls::Plain,
            start_on_serve: false,
            media: crate::model::bmc::BmcMedia::Auto,
        }),
        static_address: false,
        interface: None,
    }
}

pub(super) fn cluster(n: &NodeCfg) -> crate::model::cluster::Cluster {
    // The journal goes next to the lease file: the node's temp directory.
    let dir = n
        .bmc
        .as_ref()
        .and_then(|b| b.username_file.parent())
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let text = format!(
        "name: c\nbaseDomain: example.com\nnetwork: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.1, applianceIP: 10.0.0.1 }}\ndhcp: {{ leaseFile: {dir}/leases.json }}\nnodes:\n  - {{ name: m0, role: master, mac: '52:54:00:00:00:02', ip: 10.0.0.10 }}\n"
    );
    let text = text.as_str();
    let mut c = crate::config::from_str(text, Path::new("/"), Path::new("t"))
        .unwrap()
        .cluster;
    c.nodes.push(n.clone());
    c
}

fn get(r: &mut Routes, path: &str, doc: Value) {
    r.insert(("GET".into(), path.into()), (200, doc));
}

fn post(r: &mut Routes, path: &str, status: u16, doc: Value) {
    r.insert(("POST".into(), path.into()), (status, doc));
}

/// A system off, without VirtualMedia of its own; its manager has a
/// floppy and a CD holding another image.
fn routes() -> Routes {
    let mut r = Routes::new();
    get(
        &mut r,
        "/redfish/v1/Systems/1",
        json!({
            "@odata.id": "/redfish/v1/Systems/1", "PowerState": "Off",
            "Boot": {"BootSourceOverrideTarget": "None", "BootSourceOverrideEnabled": "Disabled"},
            "Actions": {"#ComputerSystem.Reset": {"target": "/reset"}},
            "Links": {"ManagedBy": [{"@odata.id": "/redfish/v1/Managers/1"}]}
        }),
    );
    get(
        &mut r,
        "/redfish/v1/Managers/1",
        json!({"VirtualMedia": {"@odata.id": "/vm"}}),
    );
    get(
        &mut r,
        "/vm",
        json!({"Members": [{"@odata.id": "/vm/Floppy"}, {"@odata.id": "/vm/Cd"}]}),
    );
    get(
        &mut r,
        "/vm/Floppy",
        json!({"@odata.id": "/vm/Floppy", "MediaTypes": ["Floppy"]}),
    );
    get(
        &mut r,
        "/vm/Cd",
        json!({
            "@odata.id": "/vm/Cd", "MediaTypes": ["DVD"], "Inserted": true, "Image": "http://old/x.iso",
            "Actions": {"#VirtualMedia.InsertMedia": {"target": "/vm/Cd/insert"},
                        "#VirtualMedia.EjectMedia": {"target": "/vm/Cd/eject"}}
        }),
    );
    post(&mut r, "/vm/Cd/eject", 204, Value::Null);
    post(&mut r, "/vm/Cd/insert", 204, Value::Null);
    r.insert(
        ("PATCH".into(), "/redfish/v1/Systems/1".into()),
        (204, Value::Null),
    );
    post(&mut r, "/reset", 204, Value::Null);
    r
}

#[tokio::test]
async fn up_follows_the_manager_link_and_replaces_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let (port, log) = server(routes()).await;
    let n = node(dir.path(), port);
    let c = cluster(&n);
    let url = super::iso_url(&c, &n);
    let lines = act(&c, &n, BmcAction::Up).await.unwrap().lines;
    assert_eq!(
        lines,
        vec![
            "ejected the virtual media".to_string(),
            format!("inserted {url}"),
            "set the next boot to Cd (once)".into(),
            "powered on".into()
        ]
    );
    let calls: Vec<_> = log
        .locked()
        .iter()
        .filter(|(m, _, _)| m != "GET")
        .cloned()
        .collect();
    assert_eq!(calls[0].1, "/vm/Cd/eject");
    assert_eq!(calls[1].1, "/vm/Cd/insert");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[1].2).unwrap(),
        json!({"Image": url})
    );
    assert_eq!(
        (calls[2].0.as_str(), calls[2].1.as_str()),
        ("PATCH", "/redfish/v1/Systems/1")
    );
    assert_eq!(
        serde_json::from_str::<Value>(&calls[2].2).unwrap(),
        json!({"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
    );
    assert_eq!(calls[3].2, r#"{"ResetType":"On"}"#);
}

/// Run `action` against `routes`; the error text, the port and the log.
async fn failure(dir: &Path, routes: Routes, action: BmcAction) -> (String, u16, Log) {
    let (port, log) = server(routes).await;
    let n = node(dir, port);
    let e = act(&cluster(&n), &n, action).await.unwrap_err();
    (format!("{e:#}"), port, log)
}

#[tokio::test]
async fn a_patch_refused_without_etag_is_sent_again_with_if_match() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = routes();
    let (_, sys) = r[&("GET".to_string(), "/redfish/v1/Systems/1".to_string())].clone();
    let mut sys = sys;
    sys["@odata.etag"] = json!("W/\"7\"");
    get(&mut r, "/redfish/v1/Systems/1", sys);
    let patch = ("PATCH".to_string(), "/redfish/v1/Systems/1".to_string());
    r.insert(
        patch.clone(),
        (428, json!({"error": {"message": "If-Match required"}})),
    );
    r.insert(
        (patch.0, format!("{}#if-match", patch.1)),
        (204, Value::Null),
    );
    let (port, log) = server(r).await;
    let n = node(dir.path(), port);
    let lines = act(&cluster(&n), &n, BmcAction::Up).await.unwrap().lines;
    assert!(lines.contains(&"powered on".to_string()), "{lines:?}");
    let patches = log.locked().iter().filter(|(m, _, _)| m == "PATCH").count();
    assert_eq!(patches, 2, "the PATCH again, with If-Match");
}

#[tokio::test]
async fn an_insert_refused_with_400_is_tried_with_the_transfer_fields() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = routes();
    post(
        &mut r,
        "/vm/Cd/insert",
        400,
        json!({"error": {"message": "TransferMethod required"}}),
    );
    post(&mut r, "/vm/Cd/insert#stream", 204, Value::Null);
    let (port, log) = server(r).await;
    let n = node(dir.path(), port);
    act(&cluster(&n), &n, BmcAction::Up).await.unwrap();
    let inserts: Vec<Value> = log
        .locked()
        .iter()
        .filter(|(_, p, _)| p == "/vm/Cd/insert")
        .map(|(_, _, b)| serde_json::from_str(b).unwrap())
        .collect();
    // The parameter the 400 names is added (no blind TransferProtocolType).
    assert_eq!(inserts.len(), 2, "{inserts:?}");
    assert_eq!(inserts[1]["TransferMethod"], "Stream");
    assert!(inserts[1].get("TransferProtocolType").is_none());
}

#[tokio::test]
async fn errors_name_the_node_the_url_and_the_bmc_message() {
    let dir = tempfile::tempdir().unwrap();
    // 404 on the system.
    let (e, port, _) = failure(dir.path(), Routes::new(), BmcAction::Up).await;
    assert!(
        e.starts_with(&format!(
            "no such system at http://127.0.0.1:{port}/redfish/v1/Systems/1 (BMC of metal-0)"
        )),
        "{e}"
    );
    assert!(e.contains("not here"), "{e}");
    // 403.
    let mut r = Routes::new();
    r.insert(
        ("GET".into(), "/redfish/v1/Systems/1".into()),
        (
            403,
            json!({"error": {"message": "role lacks ConfigureComponents"}}),
        ),
    );
    let (e, _, _) = failure(dir.path(), r, BmcAction::Status).await;
    assert!(
        e.contains("BMC of metal-0") && e.contains("HTTP 403: role lacks ConfigureComponents"),
        "{e}"
    );
    // No CD anywhere.
    let mut r = routes();
    get(
        &mut r,
        "/vm",
        json!({"Members": [{"@odata.id": "/vm/Floppy"}]}),
    );
    let (e, _, _) = failure(dir.path(), r, BmcAction::Up).await;
    assert!(
        e.contains("BMC of metal-0 has no virtual media CD/DVD") && e.contains("/vm"),
        "{e}"
    );
    // Eject refused (another image is in the drive): nothing else runs.
    let mut r = routes();
    post(
        &mut r,
        "/vm/Cd/eject",
        500,
        json!({"error": {"message": "Virtual media is busy"}}),
    );
    let (e, _, log) = failure(dir.path(), r, BmcAction::Up).await;
    assert!(
        e.contains("cannot eject http://old/x.iso from /vm/Cd (POST /vm/Cd/eject; media busy?): HTTP 500: Virtual media is busy (5 attempts)"),
        "{e}"
    );
    assert_eq!(
        log.locked()
            .iter()
            .filter(|(_, p, _)| p == "/vm/Cd/eject")
            .count(),
        5,
        "a 500 is tried again, boundedly"
    );
    assert!(
        !log.locked().iter().any(|(m, _, _)| m == "PATCH"),
        "stopped at the eject"
    );
    // Insert refused after the eject: the BMC's words and what was done.
    let mut r = routes();
    for p in ["/vm/Cd/insert", "/vm/Cd/insert#stream"] {
        post(
            &mut r,
            p,
            400,
            json!({"error": {"message": "General error",
            "@Message.ExtendedInfo": [{"Message": "The image URL is not reachable."}]}}),
        );
    }
    let (e, _, log) = failure(dir.path(), r, BmcAction::Up).await;
    assert!(
        e.contains("cannot insert http://")
            && e.contains("HTTP 400: General error; The image URL is not reachable."),
        "{e}"
    );
    assert!(
        e.ends_with("(done before the failure: ejected the virtual media)"),
        "{e}"
    );
    assert!(
        !log.locked().iter().any(|(_, p, _)| p == "/reset"),
        "no power call after a failed step"
    );
}

#[tokio::test]
async fn a_bmc_answering_only_500_fails_clearly_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Routes::new();
    for p in ["/redfish/v1/Systems/1", "/redfish/v1/Systems"] {
        r.insert(
            ("GET".into(), p.into()),
            (
                500,
                json!({"error": {"code": "Base.1.8.InternalError",
                "@Message.ExtendedInfo": {"MessageId": "Base.1.8.InternalError",
                    "Message": "The request failed due to an internal service error."}}}),
            ),
        );
    }
    let (e, _, log) = failure(dir.path(), r, BmcAction::Up).await;
    assert!(
        e.contains("BMC of metal-0")
            && e.contains("GET /redfish/v1/Systems/1")
            && e.contains(
                "HTTP 500: The request failed due to an internal service error. (5 attempts)"
            ),
        "{e}"
    );
    let n = log.locked().len();
    assert!((5..=40).contains(&n), "{n} requests");
}

#[tokio::test]
async fn the_journal_records_each_step_of_the_boot() {
    let dir = tempfile::tempdir().unwrap();
    let (port, _) = server(routes()).await;
    let n = node(dir.path(), port);
    let c = cluster(&n);
    let first = act(&c, &n, BmcAction::Up).await.unwrap();
    assert!(first.reset, "{first:?}");
    let j = super::journal::load(
        &super::journal::path_of(&c, "metal-0"),
        &super::iso_url(&c, &n),
    )
    .unwrap();
    assert!(j.boot && j.reset, "{j:?}");
    assert_eq!(j.inserted, Some(super::iso_url(&c, &n)));
    // eject forgets it: the next up is a new boot.
    act(&c, &n, BmcAction::Eject).await.unwrap();
    assert!(!super::journal::path_of(&c, "metal-0").exists());
}
