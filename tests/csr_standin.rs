//! The stand-in API server of the CSR approver's tests
//! (`tests/kubesim/kubesim.py`) is honest: the real `kubectl` drives it
//! (`create -f`, `get csr -o json`, `certificate approve`, `get -w`,
//! `get nodes`, `apply -f` of `render csr-rbac`), the server fills in who
//! asked, and the RBAC of `render csr-rbac` is enforced: its identity may
//! read CSRs and Nodes and approve kubelet CSRs, and nothing else.
//!
//! `create`/`apply` run with kubectl's validation on (its default,
//! `--validate=strict`): the stand-in serves `/openapi/v3` with the
//! upstream schemas and the `fieldValidation` parameter, so kubectl leaves
//! field validation to the server, which rejects an unknown field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "kubesim/harness.rs"]
mod kubesim;

use std::process::Command;
use std::time::Duration;

use kubesim::Sim;

const CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// A kubelet's client request for `node`, by `openssl req` (EC P-256).
fn kubelet_request(dir: &std::path::Path, node: &str) -> Vec<u8> {
    let key = dir.join(format!("{node}.key"));
    let out = Command::new("openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ])
        .arg("-keyout")
        .arg(&key)
        .args(["-subj", &format!("/O=system:nodes/CN=system:node:{node}")])
        .output()
        .unwrap();
    assert!(out.status.success());
    out.stdout
}

fn csr_json(sim: &Sim, context: &str, name: &str) -> serde_json::Value {
    let out = sim.kubectl_ok(context, &["get", "csr", name, "-o", "json"]);
    serde_json::from_str(&out).unwrap()
}

#[test]
fn kubectl_creates_lists_watches_and_approves_csrs() {
    require!(
        kubesim::tools_present(),
        "python3, openssl or kubectl is missing"
    );
    let sim = Sim::start();
    // A watch from before the CSR exists sees it added, then modified.
    let mut watch = Command::new(kubesim::kubectl_bin().unwrap())
        .env("KUBECONFIG", &sim.kubeconfig)
        .env("HOME", sim.dir.path())
        .args(["--context", "admin", "get", "csr", "-w", "-o", "name"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let req = kubelet_request(sim.dir.path(), "master-0");
    let file = sim.file(
        "csr.yaml",
        &Sim::csr_yaml(
            "csr-m0",
            CLIENT,
            &["digital signature", "client auth"],
            &req,
        ),
    );
    sim.kubectl_ok("boot", &["create", "-f", file.to_str().unwrap()]);
    let obj = csr_json(&sim, "admin", "csr-m0");
    assert_eq!(
        obj["spec"]["username"],
        "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
    );
    let groups = obj["spec"]["groups"].as_array().unwrap();
    assert!(
        groups
            .iter()
            .any(|g| g == "system:serviceaccounts:openshift-machine-config-operator")
    );
    assert!(obj["status"].get("conditions").is_none());
    // The node-bootstrapper may create but not approve.
    let (code, _, err) = sim.kubectl("boot", &["certificate", "approve", "csr-m0"]);
    assert_ne!(code, 0, "the bootstrapper approved: {err}");
    assert!(
        err.contains("Forbidden") || err.contains("forbidden"),
        "{err}"
    );
    sim.kubectl_ok("admin", &["certificate", "approve", "csr-m0"]);
    let obj = csr_json(&sim, "admin", "csr-m0");
    let cond = &obj["status"]["conditions"][0];
    assert_eq!(cond["type"], "Approved");
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "KubectlApprove");
    std::thread::sleep(Duration::from_millis(1500));
    let _ = watch.kill();
    let out = watch.wait_with_output().unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(
        seen.lines().filter(|l| l.contains("csr-m0")).count() >= 2,
        "the watch did not see csr-m0 added and approved: {seen:?}"
    );
}

#[test]
fn kubectl_creates_and_lists_nodes() {
    require!(
        kubesim::tools_present(),
        "python3, openssl or kubectl is missing"
    );
    let sim = Sim::start();
    let node = sim.file(
        "node.json",
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-0"},"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"starting"}]}}"#,
    );
    sim.kubectl_ok("admin", &["create", "-f", node.to_str().unwrap()]);
    let out = sim.kubectl_ok("admin", &["get", "nodes", "-o", "name"]);
    assert_eq!(out.trim(), "node/worker-0");
    let ready = sim.kubectl_ok(
        "admin",
        &[
            "get",
            "node",
            "worker-0",
            "-o",
            "jsonpath={.status.conditions[0].status}",
        ],
    );
    assert_eq!(ready, "False");
}

#[test]
fn the_render_csr_rbac_identity_has_exactly_the_approver_rights() {
    require!(
        kubesim::tools_present(),
        "python3, openssl or kubectl is missing"
    );
    let sim = Sim::start();
    let token = sim.apply_render_csr_rbac();
    // Every object `apply` created came back checked against its schema
    // (ServiceAccount, Secret, ClusterRole, Role, the bindings).
    let created: Vec<_> = sim
        .log()
        .into_iter()
        .filter(|e| e["method"] == "POST" && e["status"] == 201)
        .collect();
    assert!(created.len() >= 5, "{created:?}");
    assert!(
        created.iter().all(|e| e["validated"] == true),
        "{created:?}"
    );
    sim.add_token_context("sa", &token);
    let secret = sim.file(
        "secret.json",
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"worker-user-data-managed","namespace":"openshift-machine-api"},"data":{"userData":"e30="}}"#,
    );
    sim.kubectl_ok("admin", &["create", "-f", secret.to_str().unwrap()]);
    // Kubelet CSRs, and one for a signer the approver must not touch.
    let req = kubelet_request(sim.dir.path(), "worker-0");
    for (name, signer) in [
        ("kubelet", CLIENT),
        ("other", "kubernetes.io/kube-apiserver-client"),
    ] {
        let f = sim.file(
            &format!("{name}.yaml"),
            &Sim::csr_yaml(name, signer, &["digital signature", "client auth"], &req),
        );
        sim.kubectl_ok("boot", &["create", "-f", f.to_str().unwrap()]);
    }
    // Allowed: read CSRs and Nodes, the one secret, approve a kubelet CSR.
    sim.kubectl_ok("sa", &["get", "csr", "-o", "json"]);
    sim.kubectl_ok("sa", &["get", "nodes"]);
    sim.kubectl_ok(
        "sa",
        &[
            "-n",
            "openshift-machine-api",
            "get",
            "secret",
            "worker-user-data-managed",
        ],
    );
    sim.kubectl_ok("sa", &["certificate", "approve", "kubelet"]);
    // Refused: another signer, other secrets, writes, other resources.
    for args in [
        vec!["certificate", "approve", "other"],
        vec![
            "-n",
            "openshift-machine-api",
            "get",
            "secret",
            "crc-appliance-csr-approver-token",
        ],
        vec!["-n", "openshift-machine-api", "get", "secrets"],
        vec!["delete", "csr", "kubelet"],
        vec!["get", "clusterroles"],
    ] {
        let (code, out, err) = sim.kubectl("sa", &args);
        assert_ne!(code, 0, "the approver identity may {args:?}: {out}");
        assert!(
            err.contains("forbidden") || err.contains("Forbidden"),
            "{args:?}: {err}"
        );
    }
    let other = csr_json(&sim, "admin", "other");
    assert!(other["status"].get("conditions").is_none(), "{other}");
    let sa_user = "system:serviceaccount:openshift-machine-api:crc-appliance-csr-approver";
    let denied = sim
        .log()
        .iter()
        .filter(|e| e["user"] == sa_user && e["status"] == 403)
        .count();
    assert!(denied >= 5, "the access log shows {denied} refusals");
}

#[test]
fn kubectl_validates_through_the_servers_openapi_and_unknown_fields_are_refused() {
    require!(
        kubesim::tools_present(),
        "python3, openssl or kubectl is missing"
    );
    let sim = Sim::start();
    let req = kubelet_request(sim.dir.path(), "master-0");
    let good = Sim::csr_yaml("typo", CLIENT, &["digital signature", "client auth"], &req);
    // A misspelt field: kubectl (validation on) asks the server to be
    // strict, and the server names the field.
    let typo = sim.file(
        "typo.yaml",
        &good.replace("  signerName:", "  expirationSecond: 3600\n  signerName:"),
    );
    let (code, out, err) = sim.kubectl("boot", &["create", "-f", typo.to_str().unwrap()]);
    assert_ne!(code, 0, "created with an unknown field: {out}");
    assert!(
        err.contains("strict decoding error: unknown field \"spec.expirationSecond\""),
        "{err}"
    );
    // kubectl really asked: the server's documents and the strict create.
    let log = sim.log();
    let asked = |p: &str| {
        log.iter()
            .any(|e| e["path"].as_str().is_some_and(|x| x.starts_with(p)))
    };
    assert!(asked("/openapi/v3/apis/certificates.k8s.io/v1"), "{log:?}");
    assert!(
        log.iter().any(|e| e["method"] == "POST"
            && e["status"] == 400
            && e["path"]
                .as_str()
                .is_some_and(|p| p.contains("fieldValidation=Strict"))),
        "{log:?}"
    );
    // With validation off the server drops the field, as kube-apiserver
    // does: what it returns validates, and holds no such field.
    sim.kubectl_ok(
        "boot",
        &["create", "--validate=false", "-f", typo.to_str().unwrap()],
    );
    let obj = csr_json(&sim, "admin", "typo");
    assert!(obj["spec"].get("expirationSecond").is_none(), "{obj}");
}
