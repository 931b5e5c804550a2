//! Issue #41's rules, one test each, against a recorded tree
//! (tests/fixtures/redfish/<vendor>) served on 127.0.0.1 with one property
//! removed or one behaviour injected (a hook that answers before the
//! tree); and issue #40 item 8 (a hostile BMC's error text).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use super::tests::{cluster, node};
use super::{BmcAction, Outcome, act};
use crate::model::cluster::NodeCfg;
use crate::runtime::sync::LockExt as _;

/// One request as the hook sees it.
#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    /// The head, lower-cased (header lookups).
    head: String,
    body: Value,
}

impl Req {
    fn header(&self, name: &str) -> Option<String> {
        let key = format!("\r\n{}:", name.to_ascii_lowercase());
        let at = self.head.find(&key)? + key.len();
        let rest = &self.head[at..];
        Some(
            rest[..rest.find("\r\n").unwrap_or(rest.len())]
                .trim()
                .to_string(),
        )
    }
}

/// An answer: status, extra headers, body (`Null`: none).
type Reply = (u16, Vec<(&'static str, String)>, Value);
type Docs = HashMap<String, Value>;
type Hook = Arc<dyn Fn(&Req, &Docs) -> Option<Reply> + Send + Sync>;
type Log = Arc<Mutex<Vec<Req>>>;

/// The recorded tree of `vendor`, by path.
fn tree(vendor: &str) -> Docs {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/redfish");
    let mut docs = Docs::new();
    let mut dirs = vec![root.join(vendor).join("redfish")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.file_name().is_some_and(|n| n == "index.json") {
                let rel = d.strip_prefix(root.join(vendor)).unwrap();
                let doc = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                docs.insert(format!("/{}", rel.display()), doc);
            }
        }
    }
    docs
}

/// The tree's answer to `r` (after the hook): GET a document (its
/// `@odata.etag` as `ETag`), any other method 204.
fn from_tree(r: &Req, docs: &Docs) -> Reply {
    if r.method != "GET" {
        return (204, Vec::new(), Value::Null);
    }
    match docs.get(&r.path) {
        Some(d) => {
            let tag = d.get("@odata.etag").and_then(Value::as_str);
            let h = tag
                .map(|t| vec![("ETag", t.to_string())])
                .unwrap_or_default();
            (200, h, d.clone())
        }
        None => (404, Vec::new(), json!({"error": {"message": "not here"}})),
    }
}

/// Serve `docs` with `hook` first; every request is logged.
async fn serve(docs: Docs, hook: Hook) -> (u16, Log) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let log: Log = Arc::default();
    let rec = log.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            let head_end = loop {
                let n = s.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
            let mut r = Req {
                method: String::new(),
                path: String::new(),
                head: head.clone(),
                body: Value::Null,
            };
            let len: usize = r
                .header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < head_end + len {
                let n = s.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
            }
            let first = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let mut words = first.split_whitespace();
            r.method = words.next().unwrap_or_default().to_string();
            r.path = words.next().unwrap_or_default().to_string();
            r.body = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
            rec.locked().push(r.clone());
            let (status, headers, body) = hook(&r, &docs).unwrap_or_else(|| from_tree(&r, &docs));
            let text = if body.is_null() {
                String::new()
            } else {
                body.to_string()
            };
            let mut reply = format!("HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n");
            for (k, v) in headers {
                reply.push_str(&format!("{k}: {v}\r\n"));
            }
            reply.push_str(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            ));
            let _ = s.write_all(reply.as_bytes()).await;
        }
    });
    (port, log)
}

/// Node `metal-0` with its BMC at `system` on `port`.
fn node_at(dir: &Path, port: u16, system: &str) -> NodeCfg {
    let mut n = node(dir, port);
    if let Some(b) = n.bmc.as_mut() {
        b.path = system.to_string();
        b.url = format!("http://127.0.0.1:{port}{system}");
    }
    n
}

/// Run `action` on `vendor`'s tree (changed by `edit`) with `hook`.
async fn run(
    vendor: &str,
    system: &str,
    edit: impl FnOnce(&mut Docs),
    hook: impl Fn(&Req, &Docs) -> Option<Reply> + Send + Sync + 'static,
    action: BmcAction,
) -> (anyhow::Result<Outcome>, Vec<Req>, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut docs = tree(vendor);
    edit(&mut docs);
    let (port, log) = serve(docs, Arc::new(hook)).await;
    let n = node_at(dir.path(), port, system);
    let c = cluster(&n);
    let url = super::iso_url(&c, &n);
    let res = act(&c, &n, action).await;
    let log = log.locked().clone();
    (res, log, url)
}

fn calls<'a>(log: &'a [Req], method: &str, path: &str) -> Vec<&'a Req> {
    log.iter()
        .filter(|r| r.method == method && r.path == path)
        .collect()
}

fn redfish_error(id: &str, msg: &str, arg: &str) -> Value {
    json!({"error": {"code": id, "message": msg, "@Message.ExtendedInfo": [
        {"MessageId": id, "Message": msg, "MessageArgs": [arg], "RelatedProperties": [format!("#/{arg}")]}]}})
}

const HPE_SYS: &str = "/redfish/v1/Systems/1";
const HPE_SLOTS: [&str; 2] = [
    "/redfish/v1/Managers/1/VirtualMedia/1",
    "/redfish/v1/Managers/1/VirtualMedia/2",
];
const HPE_INSERT: &str = "/redfish/v1/Managers/1/VirtualMedia/2/Actions/VirtualMedia.InsertMedia";

/// HPE's slots without `MediaTypes`.
fn no_media_types(docs: &mut Docs) {
    for s in HPE_SLOTS {
        if let Some(o) = docs.get_mut(s).and_then(Value::as_object_mut) {
            o.remove("MediaTypes");
        }
    }
}

#[tokio::test]
async fn a_slot_without_media_types_is_a_cd_by_its_name_or_its_action_info() {
    // By name: slot 2 is called "CD/DVD".
    let (res, log, url) = run(
        "hpe",
        HPE_SYS,
        |d| {
            no_media_types(d);
            d.get_mut(HPE_SLOTS[1]).unwrap()["Name"] = json!("CD/DVD");
        },
        |_, _| None,
        BmcAction::Up,
    )
    .await;
    let o = res.unwrap();
    assert!(o.lines.contains(&format!("inserted {url}")), "{o:?}");
    assert_eq!(calls(&log, "POST", HPE_INSERT).len(), 1);
    // By the InsertMedia ActionInfo's MediaType values.
    let info = "/redfish/v1/Managers/1/VirtualMedia/2/InsertMediaActionInfo";
    let (res, _, _) = run(
        "hpe",
        HPE_SYS,
        |d| {
            no_media_types(d);
            let slot = d.get_mut(HPE_SLOTS[1]).unwrap();
            slot["Actions"]["#VirtualMedia.InsertMedia"]["@Redfish.ActionInfo"] = json!(info);
            d.insert(
                info.into(),
                json!({"Parameters": [{"Name": "Image", "Required": true},
                    {"Name": "MediaType", "AllowableValues": ["CD", "DVD"]}]}),
            );
        },
        |_, _| None,
        BmcAction::Up,
    )
    .await;
    assert!(res.is_ok(), "{res:?}");
    // Neither: the error says what each slot offered.
    let (res, _, _) = run("hpe", HPE_SYS, no_media_types, |_, _| None, BmcAction::Up).await;
    let e = format!("{:#}", res.unwrap_err());
    assert!(
        e.contains("has no virtual media CD/DVD")
            && e.contains(
                "/redfish/v1/Managers/1/VirtualMedia/1 (no MediaTypes, Name \"VirtualMedia\")"
            )
            && e.contains("/redfish/v1/Managers/1/VirtualMedia/2 (no MediaTypes"),
        "{e}"
    );
}

#[test]
fn cd_names() {
    use super::redfish::names_cd;
    for yes in [
        "CD1",
        "Cd",
        "CD/DVD",
        "VirtualCD",
        "CD-ROM",
        "DVD2",
        "Virtual CD",
        "vcd",
    ] {
        assert!(names_cd(yes), "{yes}");
    }
    for no in [
        "abcd",
        "CDC",
        "VirtualMedia",
        "USB1",
        "Floppy",
        "1",
        "RemovableDisk",
        "",
    ] {
        assert!(!names_cd(no), "{no}");
    }
}

const LENOVO_SYS: &str = "/redfish/v1/Systems/1";

#[tokio::test]
async fn a_weak_etag_refused_by_its_own_bmc_is_replaced_by_a_star() {
    // Lenovo inserts by PATCH of the slot; here every ETag is weak and
    // only `If-Match: *` is taken (RFC 9110 §13.1.1: strong comparison).
    let weak = |d: &mut Docs| {
        for doc in d.values_mut() {
            if let Some(t) = doc.get("@odata.etag").and_then(Value::as_str) {
                doc["@odata.etag"] = json!(format!("W/{t}"));
            }
        }
    };
    let (res, log, _) = run(
        "lenovo",
        LENOVO_SYS,
        weak,
        |r, _| match (r.method.as_str(), r.header("if-match").as_deref()) {
            ("PATCH", None) => Some((
                428,
                vec![],
                json!({"error": {"message": "If-Match required"}}),
            )),
            ("PATCH", Some("*")) => None,
            ("PATCH", Some(_)) => {
                Some((412, vec![], json!({"error": {"message": "ETag mismatch"}})))
            }
            _ => None,
        },
        BmcAction::Up,
    )
    .await;
    let o = res.unwrap();
    assert!(o.reset, "{o:?}");
    let patches: Vec<_> = log.iter().filter(|r| r.method == "PATCH").collect();
    let stars = patches
        .iter()
        .filter(|r| r.header("if-match").as_deref() == Some("*"))
        .count();
    assert_eq!(stars, 2, "the slot and the boot override: {patches:?}");
    assert!(patches.len() <= 6, "bounded: {}", patches.len());
    assert!(
        o.notes
            .iter()
            .any(|n| n.contains("sent again with If-Match: *")),
        "{:?}",
        o.notes
    );
}

const DELL_SYS: &str = "/redfish/v1/Systems/System.Embedded.1";
const DELL_INSERT: &str =
    "/redfish/v1/Systems/System.Embedded.1/VirtualMedia/1/Actions/VirtualMedia.InsertMedia";

#[tokio::test]
async fn a_400_naming_transfer_protocol_type_is_answered_with_it() {
    let (res, log, url) = run(
        "dell",
        DELL_SYS,
        |_| {},
        |r, _| {
            (r.path == DELL_INSERT && r.body.get("TransferProtocolType").is_none()).then(|| {
                let body = include_str!(
                    "../../../tests/fixtures/redfish/sushy-errors/transfer_proto_required_error3.json"
                );
                (400, vec![], serde_json::from_str(body).unwrap())
            })
        },
        BmcAction::Up,
    )
    .await;
    let o = res.unwrap();
    let inserts = calls(&log, "POST", DELL_INSERT);
    assert_eq!(inserts.len(), 2, "{inserts:?}");
    assert_eq!(
        inserts[1].body,
        json!({"Image": url, "TransferProtocolType": "HTTP"})
    );
    assert!(
        o.notes
            .iter()
            .any(|n| n.contains("asked for TransferProtocolType")),
        "{:?}",
        o.notes
    );
    // UserName and Password, named by a 400 (no blind body has them).
    let (res, log, _) = run(
        "dell",
        DELL_SYS,
        |_| {},
        |r, _| {
            (r.path == DELL_INSERT && r.body.get("UserName").is_none()).then(|| {
                let body = include_str!(
                    "../../../tests/fixtures/redfish/sushy-errors/credentials_required_error.json"
                );
                (400, vec![], serde_json::from_str(body).unwrap())
            })
        },
        BmcAction::Up,
    )
    .await;
    assert!(res.is_ok(), "{res:?}");
    let inserts = calls(&log, "POST", DELL_INSERT);
    assert_eq!(inserts.len(), 2, "{inserts:?}");
    assert_eq!(
        (&inserts[1].body["UserName"], &inserts[1].body["Password"]),
        (&json!(""), &json!(""))
    );
}

#[tokio::test]
async fn a_boot_patch_refused_without_its_mode_gets_one() {
    let refuse = |r: &Req, _: &Docs| {
        let boot = r.body.get("Boot")?;
        (r.method == "PATCH" && boot.get("BootSourceOverrideMode").is_none()).then(|| {
            let m = "The property BootSourceOverrideMode is a required property and must be included in the request.";
            (400, vec![], redfish_error("Base.1.12.PropertyMissing", m, "BootSourceOverrideMode"))
        })
    };
    let no_mode = |d: &mut Docs| {
        let boot = d.get_mut(DELL_SYS).unwrap()["Boot"]
            .as_object_mut()
            .unwrap();
        boot.remove("BootSourceOverrideMode");
    };
    // The system shows no mode and lists none: the 400 is answered once.
    let (res, log, _) = run("dell", DELL_SYS, no_mode, refuse, BmcAction::Up).await;
    let o = res.unwrap();
    let patches = calls(&log, "PATCH", DELL_SYS);
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert_eq!(
        patches[1].body["Boot"],
        json!({"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once",
               "BootSourceOverrideMode": "UEFI"})
    );
    assert!(
        o.notes
            .iter()
            .any(|n| n.contains("without BootSourceOverrideMode"))
    );
    // It lists the modes: the first PATCH carries one.
    let (res, log, _) = run(
        "dell",
        DELL_SYS,
        |d| {
            no_mode(d);
            d.get_mut(DELL_SYS).unwrap()["Boot"]["BootSourceOverrideMode@Redfish.AllowableValues"] =
                json!(["Legacy", "UEFI"]);
        },
        refuse,
        BmcAction::Up,
    )
    .await;
    assert!(res.is_ok(), "{res:?}");
    assert_eq!(calls(&log, "PATCH", DELL_SYS).len(), 1);
    // `Once` not allowed: a clear refusal, no PATCH.
    let (res, log, _) = run(
        "dell",
        DELL_SYS,
        |d| {
            d.get_mut(DELL_SYS).unwrap()["Boot"]["BootSourceOverrideEnabled@Redfish.AllowableValues"] =
                json!(["Disabled", "Continuous"]);
        },
        |_, _| None,
        BmcAction::Up,
    )
    .await;
    let e = format!("{:#}", res.unwrap_err());
    assert!(e.contains("does not allow a one-time boot override"), "{e}");
    assert!(calls(&log, "PATCH", DELL_SYS).is_empty());
}

#[tokio::test]
async fn a_401_to_basic_auth_with_sessions_advertised_signs_in() {
    const TOKEN: &str = "tok-0123456789abcdef";
    const SESSION: &str = "/redfish/v1/SessionService/Sessions/9";
    let (res, log, _) = run(
        "hpe",
        HPE_SYS,
        |_| {},
        |r, _| {
            if r.path == "/redfish/v1" {
                return None;
            }
            if r.method == "POST" && r.path == "/redfish/v1/SessionService/Sessions" {
                let ok = r.body == json!({"UserName": "admin", "Password": "pw"});
                return Some(if ok {
                    (
                        201,
                        vec![("X-Auth-Token", TOKEN.into()), ("Location", SESSION.into())],
                        json!({"@odata.id": SESSION}),
                    )
                } else {
                    (401, vec![], json!({"error": {"message": "bad login"}}))
                });
            }
            (r.header("x-auth-token").as_deref() != Some(TOKEN)).then(|| {
                (
                    401,
                    vec![],
                    json!({"error": {"message": "There is no valid session"}}),
                )
            })
        },
        BmcAction::Up,
    )
    .await;
    let o = res.unwrap();
    assert!(o.reset, "{o:?}");
    assert!(
        o.notes.iter().any(|n| n.contains("Redfish session")),
        "{:?}",
        o.notes
    );
    assert!(
        !format!("{o:?}").contains(TOKEN),
        "the token is never shown"
    );
    let last = log.last().unwrap();
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("DELETE", SESSION)
    );
    assert_eq!(last.header("x-auth-token").as_deref(), Some(TOKEN));
    let basic = log
        .iter()
        .filter(|r| r.header("authorization").is_some())
        .count();
    assert_eq!(basic, 1, "Basic once, then the token");
}

const TASK: &str = "/redfish/v1/TaskService/Tasks/7";

/// Dell's InsertMedia answered 202 with a task monitor; the task runs for
/// `running` polls, then ends `end`.
fn task_hook(running: usize, end: Value) -> impl Fn(&Req, &Docs) -> Option<Reply> + Send + Sync {
    let polls = Mutex::new(0usize);
    move |r: &Req, _: &Docs| {
        if r.method == "POST" && r.path == DELL_INSERT {
            let task = json!({"@odata.id": TASK, "TaskState": "New"});
            return Some((202, vec![("Location", TASK.into())], task));
        }
        if r.method == "GET" && r.path == TASK {
            let mut n = polls.locked();
            *n += 1;
            return Some(if *n <= running {
                (
                    202,
                    vec![],
                    json!({"@odata.id": TASK, "TaskState": "Running"}),
                )
            } else {
                (200, vec![], end.clone())
            });
        }
        None
    }
}

#[tokio::test]
async fn an_insert_answered_202_is_followed_until_its_task_completes() {
    let done = json!({"@odata.id": TASK, "TaskState": "Completed", "TaskStatus": "OK"});
    let (res, log, _) = run("dell", DELL_SYS, |_| {}, task_hook(1, done), BmcAction::Up).await;
    assert!(res.is_ok(), "{res:?}");
    assert_eq!(
        calls(&log, "GET", TASK).len(),
        2,
        "completes after two polls"
    );
    let at = |p: &str| log.iter().position(|r| r.path.ends_with(p)).unwrap();
    assert!(
        at(TASK) < at("ComputerSystem.Reset"),
        "the boot waits for the insert"
    );
    // A task that fails: its state and message, nothing after it.
    let failed = json!({"TaskState": "Exception", "TaskStatus": "Critical",
        "Messages": [{"Message": "Unable to mount the image.\nFORGED"}]});
    let (res, log, _) = run(
        "dell",
        DELL_SYS,
        |_| {},
        task_hook(1, failed),
        BmcAction::Up,
    )
    .await;
    let e = format!("{:#}", res.unwrap_err());
    assert!(
        e.contains("task ended Exception: Unable to mount the image.\\nFORGED"),
        "{e}"
    );
    assert!(!log.iter().any(|r| r.path.ends_with("ComputerSystem.Reset")));
    // One that never ends: bounded.
    let (res, log, _) = run(
        "dell",
        DELL_SYS,
        |_| {},
        task_hook(usize::MAX, Value::Null),
        BmcAction::Up,
    )
    .await;
    let e = format!("{:#}", res.unwrap_err());
    assert!(e.contains("did not finish"), "{e}");
    assert!(calls(&log, "GET", TASK).len() <= super::task::MAX_TASK_POLLS as usize);
}

#[tokio::test]
async fn a_hostile_bmc_error_text_is_bounded_and_escaped() {
    // fakebmc.py errmsg (audit L4): 2 MB with forged log lines.
    let forged = format!(
        "boom\n2026-11-28T00:00:00.000000Z  INFO crc_appliance: FORGED LOG LINE\r\n\u{1b}[2J{}",
        "B".repeat(2 << 20)
    );
    let hostile = move |r: &Req, _: &Docs| {
        (r.path == DELL_SYS).then(|| {
            (
                400,
                vec![],
                json!({"error": {"code": "Base.1.0.GeneralError", "message": forged}}),
            )
        })
    };
    for action in [BmcAction::Up, BmcAction::Status] {
        let (res, _, _) = run("dell", DELL_SYS, |_| {}, hostile.clone(), action).await;
        let e = format!("{:#}", res.unwrap_err());
        assert!(e.len() < 2048, "{} bytes", e.len());
        assert!(!e.contains(['\n', '\r', '\u{1b}']), "{e}");
        assert!(
            e.contains("boom\\n2026-11-28T00:00:00.000000Z  INFO crc_appliance: FORGED LOG LINE\\r\\n\\u{1b}[2J"),
            "{e}"
        );
        assert!(e.contains("more bytes)"), "{e}");
    }
}
