//! The CSR approval rules (issue #37 items 2-5) as a table: every request
//! is made by `openssl req` the way a kubelet makes it (EC P-256 or RSA
//! 2048 key; subject `O=system:nodes, CN=system:node:<n>`; serving SANs),
//! or deliberately not, and judged by `services::csr::rules::decide`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crc_appliance::services::csr::request::{RequestError, parse_der, parse_pem};
use crc_appliance::services::csr::rules::{
    BOOTSTRAPPER, BOOTSTRAPPER_GROUPS, CLIENT_SIGNER, Csr, Decision, Evidence, InventoryNode, Kind,
    NODE_GROUPS, Refusal, SERVING_SIGNER, World, decide, pending_clients,
};

const T0: u64 = 1_800_000_000;
const WINDOW: u64 = 3600;

struct Keys {
    dir: tempfile::TempDir,
    ec: PathBuf,
    rsa: PathBuf,
}

fn openssl(args: &[&str]) -> Vec<u8> {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

impl Keys {
    fn new() -> Keys {
        let dir = tempfile::tempdir().unwrap();
        let ec = dir.path().join("ec.key");
        let rsa = dir.path().join("rsa.key");
        let p = |p: &Path| p.to_str().unwrap().to_string();
        openssl(&[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &p(&ec),
        ]);
        openssl(&[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            &p(&rsa),
        ]);
        // A config with nothing in it: the request holds only what the
        // command line asks for (no distro defaults).
        std::fs::write(
            dir.path().join("req.cnf"),
            "[req]\ndistinguished_name = dn\n[dn]\n",
        )
        .unwrap();
        Keys { dir, ec, rsa }
    }

    /// `openssl req -new` for `subj` with optional `-addext` values; DER.
    fn der(&self, rsa: bool, subj: &str, addext: &[&str]) -> Vec<u8> {
        let key = if rsa { &self.rsa } else { &self.ec };
        let cnf = self.dir.path().join("req.cnf");
        let mut args = vec![
            "req",
            "-new",
            "-key",
            key.to_str().unwrap(),
            "-config",
            cnf.to_str().unwrap(),
            "-subj",
            subj,
            "-outform",
            "DER",
        ];
        for e in addext {
            args.extend(["-addext", e]);
        }
        openssl(&args)
    }

    fn pem(&self, rsa: bool, subj: &str, addext: &[&str]) -> Vec<u8> {
        let key = if rsa { &self.rsa } else { &self.ec };
        let cnf = self.dir.path().join("req.cnf");
        let mut args = vec![
            "req",
            "-new",
            "-key",
            key.to_str().unwrap(),
            "-config",
            cnf.to_str().unwrap(),
            "-subj",
            subj,
        ];
        for e in addext {
            args.extend(["-addext", e]);
        }
        openssl(&args)
    }
}

fn inventory() -> Vec<InventoryNode> {
    let node = |name: &str, addrs: &[&str]| InventoryNode {
        name: name.to_string(),
        fqdn: format!("{name}.lab.example.com"),
        addrs: addrs.iter().map(|a| a.parse::<IpAddr>().unwrap()).collect(),
    };
    vec![
        node("master-0", &["10.0.0.10", "fd00::10"]),
        node("worker-0", &["10.0.0.20"]),
        node("worker-1", &["10.0.0.21"]),
    ]
}

/// One case: the CSR's fields (a kubelet's unless changed) and the world.
#[derive(Clone)]
struct Case {
    what: &'static str,
    rsa: bool,
    subj: String,
    addext: Vec<String>,
    signer: &'static str,
    username: String,
    groups: Vec<String>,
    usages: Vec<&'static str>,
    expiration: Option<u64>,
    created: u64,
    pending: bool,
    /// Node name → Ready.
    nodes: Vec<(&'static str, bool)>,
    recovery: bool,
    /// master-0's boots (lease renewals) and its last recovery approval.
    boots: Vec<u64>,
    recovered: Option<u64>,
    now: u64,
    /// Another pending client CSR for the same subject.
    twin: bool,
}

fn client(node: &str) -> Case {
    Case {
        what: "",
        rsa: false,
        subj: format!("/O=system:nodes/CN=system:node:{node}"),
        addext: vec![],
        signer: CLIENT_SIGNER,
        username: BOOTSTRAPPER.to_string(),
        groups: BOOTSTRAPPER_GROUPS.iter().map(|g| g.to_string()).collect(),
        usages: vec!["digital signature", "client auth"],
        expiration: None,
        created: T0 + 30,
        pending: true,
        nodes: vec![],
        recovery: false,
        boots: vec![],
        recovered: None,
        now: T0 + 31,
        twin: false,
    }
}

fn serving(node: &str, sans: &str) -> Case {
    Case {
        subj: format!("/O=system:nodes/CN=system:node:{node}"),
        addext: vec![format!("subjectAltName={sans}")],
        signer: SERVING_SIGNER,
        username: format!("system:node:{node}"),
        groups: NODE_GROUPS.iter().map(|g| g.to_string()).collect(),
        usages: vec!["digital signature", "server auth"],
        nodes: vec![(leak(node), false)],
        ..client(node)
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn with(mut c: Case, what: &'static str, f: impl FnOnce(&mut Case)) -> Case {
    c.what = what;
    f(&mut c);
    c
}

fn csr_of(keys: &Keys, c: &Case, name: &str) -> Csr {
    let addext: Vec<&str> = c.addext.iter().map(String::as_str).collect();
    let pem = keys.pem(c.rsa, &c.subj, &addext);
    Csr {
        name: name.to_string(),
        signer: c.signer.to_string(),
        username: c.username.clone(),
        groups: c.groups.clone(),
        usages: c.usages.iter().map(|u| u.to_string()).collect(),
        expiration_seconds: c.expiration,
        created: c.created,
        request: parse_pem(&pem),
        pending: c.pending,
    }
}

/// Decide `c` (and its twin, which must get the same decision).
fn judge(keys: &Keys, c: &Case) -> Decision {
    let inv = inventory();
    let mut csrs = vec![csr_of(keys, c, "csr-a")];
    if c.twin {
        csrs.push(csr_of(keys, c, "csr-b"));
    }
    let decisions = judge_csrs(&inv, c, &csrs);
    assert!(
        decisions.windows(2).all(|w| w[0] == w[1]),
        "{}: twins differ: {decisions:?}",
        c.what
    );
    decisions[0].clone()
}

/// Every CSR's decision, in order.
fn judge_csrs(inv: &[InventoryNode], c: &Case, csrs: &[Csr]) -> Vec<Decision> {
    let nodes: BTreeMap<String, bool> = c.nodes.iter().map(|(n, r)| (n.to_string(), *r)).collect();
    let mut evidence = BTreeMap::new();
    for n in ["master-0", "worker-0"] {
        evidence.insert(
            n.to_string(),
            Evidence {
                ignition: vec![T0],
                boots: vec![],
            },
        );
    }
    evidence.get_mut("master-0").unwrap().boots = c.boots.clone();
    let recovered: BTreeMap<String, u64> = c
        .recovered
        .map(|t| ("master-0".to_string(), t))
        .into_iter()
        .collect();
    let pending = pending_clients(csrs, inv);
    let world = World {
        window: WINDOW,
        recovery: c.recovery,
        inventory: inv,
        nodes: &nodes,
        evidence: &evidence,
        recovered: &recovered,
        pending: &pending,
        now: c.now,
    };
    csrs.iter().map(|csr| decide(csr, &world)).collect()
}

type Check = fn(&Decision) -> bool;
/// What a case expects of its decision.
type Expect = Box<dyn Fn(&Decision) -> bool>;

fn approved(kind: Kind) -> impl Fn(&Decision) -> bool {
    move |d| matches!(d, Decision::Approve { kind: k, node, .. } if *k == kind && node == "master-0")
}

#[allow(clippy::too_many_lines)]
fn table() -> Vec<(Case, Expect)> {
    let refused = |f: Check| -> Expect { Box::new(f) };
    let m = || client("master-0");
    let s = || {
        serving(
            "master-0",
            "DNS:master-0,DNS:master-0.lab.example.com,IP:10.0.0.10,IP:fd00::10",
        )
    };
    let recovering = |c: &mut Case| {
        c.recovery = true;
        c.nodes = vec![("master-0", false)];
        c.boots = vec![T0 + 7200];
        c.created = T0 + 7230;
        c.now = T0 + 7231;
    };
    vec![
        // Item 2, accept side.
        (
            with(m(), "client EC P-256 within the window", |_| {}),
            Box::new(approved(Kind::Client)),
        ),
        (
            with(m(), "client RSA 2048 with key encipherment", |c| {
                c.rsa = true;
                c.usages = vec!["digital signature", "key encipherment", "client auth"];
            }),
            Box::new(approved(Kind::Client)),
        ),
        (
            with(m(), "client RSA 2048 without key encipherment", |c| {
                c.rsa = true
            }),
            Box::new(approved(Kind::Client)),
        ),
        (
            with(
                client("master-0.lab.example.com"),
                "client named by FQDN",
                |_| {},
            ),
            Box::new(approved(Kind::Client)),
        ),
        (
            with(m(), "client at the window's last second", |c| {
                c.created = T0 + WINDOW
            }),
            Box::new(approved(Kind::Client)),
        ),
        (
            with(m(), "client expirationSeconds one day", |c| {
                c.expiration = Some(86_400)
            }),
            Box::new(approved(Kind::Client)),
        ),
        (
            with(m(), "subject CN before O", |c| {
                c.subj = "/CN=system:node:master-0/O=system:nodes".into()
            }),
            Box::new(approved(Kind::Client)),
        ),
        // Item 2 and 4, reject side.
        (
            with(
                m(),
                "CVE-2026-19706: CN=system:admin O=system:masters from node-bootstrapper",
                |c| {
                    c.subj = "/O=system:masters/CN=system:admin".into();
                },
            ),
            refused(
                |d| matches!(d, Decision::Refuse(Refusal::NotNodeSubject(s)) if s.contains("system:admin")),
            ),
        ),
        (
            with(m(), "CN=system:admin in O=system:nodes", |c| {
                c.subj = "/O=system:nodes/CN=system:admin".into()
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NotNodeSubject(_)))),
        ),
        (
            with(m(), "an extra OU in the subject", |c| {
                c.subj = "/O=system:nodes/OU=x/CN=system:node:master-0".into()
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NotNodeSubject(_)))),
        ),
        (
            with(m(), "two O values", |c| {
                c.subj = "/O=system:nodes/O=system:masters/CN=system:node:master-0".into()
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NotNodeSubject(_)))),
        ),
        (
            with(m(), "signer kube-apiserver-client", |c| {
                c.signer = "kubernetes.io/kube-apiserver-client"
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Signer(_)))),
        ),
        (
            with(m(), "requested by another service account", |c| {
                c.username = "system:serviceaccount:default:default".into()
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Username(_)))),
        ),
        (
            with(m(), "a group missing", |c| {
                c.groups.pop();
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Groups(_)))),
        ),
        (
            with(m(), "an extra group system:masters", |c| {
                c.groups.push("system:masters".into())
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Groups(_)))),
        ),
        (
            with(client("intruder"), "a node not in the file", |_| {}),
            refused(
                |d| matches!(d, Decision::Refuse(Refusal::NotInInventory(n)) if n == "intruder"),
            ),
        ),
        (
            with(client("bootstrap"), "the bootstrap never joins", |_| {}),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NotInInventory(_)))),
        ),
        (
            with(m(), "a client request with a SAN", |c| {
                c.addext = vec!["subjectAltName=DNS:master-0".into()]
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Sans))),
        ),
        (
            with(m(), "client EC with key encipherment", |c| {
                c.usages = vec!["digital signature", "key encipherment", "client auth"]
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Usages(_)))),
        ),
        (
            with(m(), "client with cert sign", |c| c.usages.push("cert sign")),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Usages(_)))),
        ),
        (
            with(m(), "client with server auth", |c| {
                c.usages = vec!["digital signature", "client auth", "server auth"]
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Usages(_)))),
        ),
        (
            with(m(), "expirationSeconds above the signer's", |c| {
                c.expiration = Some(10 * 365 * 86_400)
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Expiration(_)))),
        ),
        (
            with(m(), "the Node exists (recovery off)", |c| {
                c.nodes = vec![("master-0", true)]
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NodeExists(_)))),
        ),
        (
            with(client("worker-1"), "a node that fetched nothing", |_| {}),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NoIgnition(n)) if n == "worker-1")),
        ),
        (
            with(m(), "just outside the window", |c| {
                c.created = T0 + WINDOW + 1;
                c.now = c.created;
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::OutsideWindow { .. }))),
        ),
        (
            with(m(), "long before the ignition fetch", |c| {
                c.created = T0 - 600
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::OutsideWindow { .. }))),
        ),
        (
            with(m(), "two pending for one name: both left, an alert", |c| {
                c.twin = true
            }),
            refused(
                |d| matches!(d, Decision::Refuse(r @ Refusal::Duplicate { count: 2, .. }) if r.is_alert()),
            ),
        ),
        (
            with(m(), "already approved: nothing to decide", |c| {
                c.pending = false
            }),
            refused(|d| *d == Decision::NotPending),
        ),
        (
            with(m(), "an extension other than SAN (keyUsage)", |c| {
                c.addext = vec!["keyUsage=digitalSignature".into()]
            }),
            refused(|d| {
                matches!(
                    d,
                    Decision::Refuse(Refusal::Request(RequestError::ExtraExtension(_)))
                )
            }),
        ),
        // Item 3.
        (
            with(s(), "serving EC with IPv4 and IPv6 SANs", |_| {}),
            Box::new(approved(Kind::Serving)),
        ),
        (
            with(s(), "serving RSA with key encipherment", |c| {
                c.rsa = true;
                c.usages = vec!["digital signature", "key encipherment", "server auth"];
            }),
            Box::new(approved(Kind::Serving)),
        ),
        (
            with(
                serving("master-0", "DNS:master-0,IP:10.0.0.20"),
                "serving with another node's IP",
                |_| {},
            ),
            refused(
                |d| matches!(d, Decision::Refuse(Refusal::IpSan(ip)) if ip.to_string() == "10.0.0.20"),
            ),
        ),
        (
            with(
                serving("master-0", "DNS:master-0,IP:192.0.2.1"),
                "serving with a foreign IP",
                |_| {},
            ),
            refused(|d| matches!(d, Decision::Refuse(Refusal::IpSan(_)))),
        ),
        (
            with(
                serving("master-0", "DNS:master-0,DNS:api.lab.example.com"),
                "serving with api.<cluster>",
                |_| {},
            ),
            refused(
                |d| matches!(d, Decision::Refuse(Refusal::DnsSan(n)) if n == "api.lab.example.com"),
            ),
        ),
        (
            with(s(), "serving for A requested by B", |c| {
                c.username = "system:node:worker-0".into()
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::ServingUser { .. }))),
        ),
        (
            with(s(), "serving before its Node exists", |c| c.nodes = vec![]),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NoNode(_)))),
        ),
        (
            with(s(), "serving asking client auth too", |c| {
                c.usages.push("client auth")
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Usages(_)))),
        ),
        (
            with(s(), "serving from node-bootstrapper", |c| {
                c.username = BOOTSTRAPPER.into();
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::ServingUser { .. }))),
        ),
        (
            with(s(), "serving with the bootstrapper's groups", |c| {
                c.groups = BOOTSTRAPPER_GROUPS.iter().map(|g| g.to_string()).collect();
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::Groups(_)))),
        ),
        // Item 5.
        (
            with(
                m(),
                "recovery: NotReady Node after a lease renewal",
                recovering,
            ),
            Box::new(approved(Kind::Recovery)),
        ),
        (
            with(m(), "recovery: no renewal seen", |c| {
                recovering(c);
                c.boots.clear();
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NoBootEvidence(_)))),
        ),
        (
            with(m(), "recovery: renewal older than the window", |c| {
                recovering(c);
                c.now = T0 + 7200 + WINDOW + 5;
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NoBootEvidence(_)))),
        ),
        (
            with(m(), "recovery: one already approved in the window", |c| {
                recovering(c);
                c.recovered = Some(T0 + 7210);
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::RecoveryDone(_)))),
        ),
        (
            with(m(), "recovery: the last one a window ago", |c| {
                recovering(c);
                c.recovered = Some(T0 + 7231 - WINDOW);
            }),
            Box::new(approved(Kind::Recovery)),
        ),
        (
            with(m(), "recovery off: NotReady Node", |c| {
                recovering(c);
                c.recovery = false;
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NodeExists(_)))),
        ),
        (
            with(m(), "recovery on: Ready Node", |c| {
                recovering(c);
                c.nodes = vec![("master-0", true)];
            }),
            refused(|d| matches!(d, Decision::Refuse(Refusal::NodeExists(_)))),
        ),
    ]
}

#[test]
fn kubelet_csrs_made_by_openssl_are_judged_by_the_rules() {
    require_tools!("openssl");
    let keys = Keys::new();
    let table = table();
    assert!(table.len() >= 25);
    let mut wrong = Vec::new();
    for (case, check) in &table {
        let d = judge(&keys, case);
        if !check(&d) {
            wrong.push(format!("{}: {d:?}", case.what));
        }
        if let Decision::Refuse(r) = &d {
            assert!(!r.to_string().is_empty());
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases wrong:\n{}",
        wrong.len(),
        table.len(),
        wrong.join("\n")
    );
}

#[test]
fn requests_that_are_not_self_signed_or_not_pkcs10_are_refused() {
    require_tools!("openssl");
    let keys = Keys::new();
    let mut der = keys.der(false, "/O=system:nodes/CN=system:node:master-0", &[]);
    assert!(parse_der(&der).is_ok());
    let last = der.len() - 1;
    der[last] ^= 1;
    assert_eq!(parse_der(&der), Err(RequestError::BadSignature));
    assert_eq!(parse_pem(b"not a request"), Err(RequestError::NotPem));
    let cert = openssl(&[
        "req",
        "-x509",
        "-key",
        keys.ec.to_str().unwrap(),
        "-config",
        keys.dir.path().join("req.cnf").to_str().unwrap(),
        "-subj",
        "/CN=x",
        "-days",
        "1",
    ]);
    assert_eq!(parse_pem(&cert), Err(RequestError::NotPem));
}

/// A pending client CSR with an approved one for the same node is not a
/// duplicate; a pending one for the short name and one for the FQDN are.
#[test]
fn duplicates_count_pending_client_requests_per_inventory_node() {
    require_tools!("openssl");
    let keys = Keys::new();
    let inv = inventory();
    let c = client("master-0");
    let mut done = csr_of(&keys, &c, "old");
    done.pending = false;
    let fresh = csr_of(&keys, &c, "new");
    let both = judge_csrs(&inv, &c, &[fresh.clone(), done]);
    assert!(matches!(both[0], Decision::Approve { .. }), "{both:?}");
    assert_eq!(both[1], Decision::NotPending);
    let fqdn = csr_of(&keys, &client("master-0.lab.example.com"), "fqdn");
    let d = decide(
        &fresh,
        &World {
            window: WINDOW,
            recovery: false,
            inventory: &inv,
            nodes: &BTreeMap::new(),
            evidence: &[(
                "master-0".to_string(),
                Evidence {
                    ignition: vec![T0],
                    boots: vec![],
                },
            )]
            .into(),
            recovered: &BTreeMap::new(),
            pending: &pending_clients(&[fresh.clone(), fqdn], &inv),
            now: T0 + 31,
        },
    );
    assert!(
        matches!(d, Decision::Refuse(Refusal::Duplicate { count: 2, .. })),
        "{d:?}"
    );
}
