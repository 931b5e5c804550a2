//! The stand-in API server (`tests/kubesim`) is held to the Kubernetes
//! OpenAPI v3 documents (trimmed upstream copies in tests/kubesim/openapi/):
//! every object it sends is validated on the way out, so every CSR test
//! checks it. Here: the check can fail. A malformed object put into the
//! store (a CSR condition without `type`, a Node whose name is a number, a
//! misspelt field, a bad timestamp) is never sent: GET, LIST and watch get
//! a 500 Status or an ERROR event, and the failure is recorded for the
//! harness, which fails any other test that produced one. The validator
//! itself is checked on a table of objects (`kubesim.py --check`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "kubesim/harness.rs"]
mod kubesim;

use std::path::Path;
use std::process::Command;

use kubesim::Sim;
use serde_json::{Value, json};

const CERTS: &str = "certificates.k8s.io";

fn csr(name: &str) -> Value {
    json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name, "resourceVersion": "5", "uid": "u-1",
                     "creationTimestamp": "2026-11-28T10:00:00Z"},
        "spec": {"request": "aGVsbG8=", "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                 "usages": ["digital signature", "client auth"],
                 "username": "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper",
                 "groups": ["system:authenticated"], "uid": "u-2"},
        "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "R",
                                   "message": "m", "lastUpdateTime": "2026-11-28T10:00:01Z",
                                   "lastTransitionTime": "2026-11-28T10:00:01Z"}]}
    })
}

fn node(name: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.10"}],
                   "capacity": {"cpu": "4", "memory": "16Gi"}}
    })
}

/// The recorded failures' problems, as one string.
fn problems(invalid: &[Value]) -> String {
    invalid
        .iter()
        .map(|i| i["problems"].to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_malformed_object_is_never_sent_and_fails_the_test() {
    require!(
        kubesim::tools_present() && common::have("curl"),
        "python3 (with the validator's venv), openssl, kubectl or curl is missing"
    );
    let sim = Sim::start();
    // A CSR whose condition has no `type`: GET and LIST refuse it.
    let mut bad = csr("no-type");
    bad["status"]["conditions"][0]
        .as_object_mut()
        .unwrap()
        .remove("type");
    sim.put_raw(CERTS, "certificatesigningrequests", &bad);
    let (code, out, err) = sim.kubectl("admin", &["get", "csr", "no-type", "-o", "json"]);
    assert_ne!(code, 0, "kubectl got the malformed CSR: {out}");
    assert!(err.contains("OpenAPI validation"), "{err}");
    let (code, _, err) = sim.kubectl("admin", &["get", "csr"]);
    assert_ne!(code, 0);
    assert!(err.contains("OpenAPI validation"), "{err}");
    let invalid = sim.take_invalid();
    assert!(
        problems(&invalid).contains("status.conditions.0: 'type' is a required property"),
        "{invalid:?}"
    );
    // A watch sends an ERROR event instead of the object.
    let watch = sim.curl(&[&format!(
        "https://127.0.0.1:{}/apis/{CERTS}/v1/certificatesigningrequests?watch=true&timeoutSeconds=1",
        sim.port
    )]);
    assert!(watch.contains("\"ERROR\""), "{watch}");
    assert!(!watch.contains("\"ADDED\""), "{watch}");
    assert!(!sim.take_invalid().is_empty());
}

#[test]
fn wrong_types_unknown_fields_and_bad_formats_are_caught_on_the_wire() {
    require!(
        kubesim::tools_present() && common::have("curl"),
        "python3 (with the validator's venv), openssl, kubectl or curl is missing"
    );
    let sim = Sim::start();
    let base = format!("https://127.0.0.1:{}", sim.port);
    // A Node whose name is a number.
    sim.put_raw("core", "nodes", &node(json!(7)));
    let list = sim.curl(&[&format!("{base}/api/v1/nodes")]);
    assert!(list.contains("\"code\": 500"), "{list}");
    let invalid = sim.take_invalid();
    assert!(
        problems(&invalid).contains("metadata.name: 7 is not of type 'string'"),
        "{invalid:?}"
    );
    // A misspelt field the Kubernetes schema would let through (no
    // additionalProperties: false): the unknown-field walk catches it.
    let mut typo = csr("typo");
    typo["spec"]["signerNmae"] = json!("kubernetes.io/kubelet-serving");
    sim.put_raw(CERTS, "certificatesigningrequests", &typo);
    let one = sim.curl(&[&format!(
        "{base}/apis/{CERTS}/v1/certificatesigningrequests/typo"
    )]);
    assert!(one.contains("\"code\": 500"), "{one}");
    assert!(
        problems(&sim.take_invalid()).contains("spec.signerNmae: field not in the schema"),
        "{one}"
    );
    // A timestamp that is not RFC 3339.
    let mut when = csr("when");
    when["metadata"]["creationTimestamp"] = json!("yesterday");
    sim.put_raw(CERTS, "certificatesigningrequests", &when);
    let one = sim.curl(&[&format!(
        "{base}/apis/{CERTS}/v1/certificatesigningrequests/when"
    )]);
    assert!(one.contains("\"code\": 500"), "{one}");
    assert!(
        problems(&sim.take_invalid()).contains("'yesterday' is not a 'date-time'"),
        "{one}"
    );
    // The well-formed ones pass, and the access log says they were checked.
    sim.put_raw("core", "nodes", &node(json!("master-0")));
    sim.put_raw(CERTS, "certificatesigningrequests", &csr("fine"));
    let out = sim.kubectl_ok("admin", &["get", "node", "master-0", "-o", "json"]);
    assert!(out.contains("InternalIP"), "{out}");
    sim.kubectl_ok("admin", &["get", "csr", "fine", "-o", "json"]);
    let checked = sim
        .log()
        .iter()
        .filter(|e| e["status"] == 200 && e["method"] == "GET")
        .filter(|e| {
            e["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/nodes/master-0") || p.ends_with("/fine"))
        })
        .all(|e| e["validated"] == true);
    assert!(checked, "{:?}", sim.log());
}

/// `kubesim.py --openapi DIR --check FILE`: one verdict line per object.
fn check(dir: &Path, objects: &[Value]) -> Vec<String> {
    let file = dir.join("objects.jsonl");
    let lines: Vec<String> = objects.iter().map(Value::to_string).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubesim/kubesim.py");
    let out = Command::new(kubesim::validator_python().unwrap())
        .arg(script)
        .arg("--openapi")
        .arg(kubesim::openapi_dir())
        .arg("--check")
        .arg(&file)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_validator_accepts_real_shapes_and_names_each_mistake() {
    require!(
        kubesim::tools_present(),
        "python3 (with the validator's venv) is missing"
    );
    let d = tempfile::tempdir().unwrap();
    let with = |mut v: Value, path: &[&str], value: Value| {
        let (last, parents) = path.split_last().unwrap();
        let mut at = &mut v;
        for p in parents {
            at = match p.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[*p],
            };
        }
        match last.parse::<usize>() {
            Ok(i) => at[i] = value,
            Err(_) => at[*last] = value,
        }
        v
    };
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "worker-user-data-managed", "namespace": "openshift-machine-api"},
        "data": {"userData": "e30="}});
    let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {},
        "status": "Failure", "reason": "Forbidden", "message": "no", "code": 403});
    // (object, the verdict's start)
    let table: Vec<(Value, &str)> = vec![
        (csr("ok"), "ok"),
        (node(json!("master-0")), "ok"),
        (secret.clone(), "ok"),
        (status.clone(), "ok"),
        (json!({"type": "MODIFIED", "object": csr("ev")}), "ok"),
        (
            json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequestList",
                   "metadata": {"resourceVersion": "9"}, "items": [csr("a"), csr("b")]}),
            "ok",
        ),
        (
            with(csr("x"), &["spec", "expirationSeconds"], json!(1_u64 << 40)),
            "invalid: spec.expirationSeconds: 1099511627776 is not a 'int32'",
        ),
        (
            with(csr("x"), &["spec", "usages"], json!("client auth")),
            "invalid: spec.usages: 'client auth' is not of type 'array'",
        ),
        (
            with(csr("x"), &["spec", "request"], json!("not base64!")),
            "invalid: spec.request: 'not base64!' is not a 'byte'",
        ),
        (
            with(
                csr("x"),
                &["status", "conditions", "0", "reson"],
                json!("R"),
            ),
            "invalid: status.conditions[0].reson: field not in the schema",
        ),
        (
            with(
                node(json!("n")),
                &["status", "capacity", "cpu"],
                json!(true),
            ),
            "invalid: status.capacity.cpu: True is not valid under any of the given schemas",
        ),
        (
            with(
                node(json!("n")),
                &["status", "addresses", "0"],
                json!({"type": "InternalIP", "adress": "10.0.0.10"}),
            ),
            "invalid: status.addresses.0: 'address' is a required property; \
             status.addresses[0].adress: field not in the schema",
        ),
        (
            with(secret.clone(), &["data", "userData"], json!(42)),
            "invalid: data.userData: 42 is not of type 'string'",
        ),
        (
            with(status, &["code"], json!("403")),
            "invalid: code: '403' is not of type 'integer'",
        ),
        (
            json!({"object": csr("ev")}),
            "invalid: (root): 'type' is a required property",
        ),
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "r"},
                   "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}),
            "ok",
        ),
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "b"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole"},
                   "subjects": [{"kind": "ServiceAccount", "name": "a", "namespace": "n"}]}),
            "invalid: roleRef: 'name' is a required property",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "a", "namespace": "n"}, "secret": []}),
            "invalid: secret: field not in the schema",
        ),
        (
            json!({"apiVersion": "v1", "kind": "APIResourceList", "groupVersion": "v1",
                   "resources": []}),
            "not covered",
        ),
    ];
    let objects: Vec<Value> = table.iter().map(|(o, _)| o.clone()).collect();
    let verdicts = check(d.path(), &objects);
    assert_eq!(verdicts.len(), table.len(), "{verdicts:?}");
    for ((obj, want), got) in table.iter().zip(&verdicts) {
        assert!(got.starts_with(want), "{obj}\n want {want}\n got  {got}");
    }
}

#[test]
fn a_test_whose_standin_caught_an_invalid_object_fails_when_the_sim_drops() {
    require!(
        kubesim::tools_present() && common::have("curl"),
        "python3 (with the validator's venv), openssl, kubectl or curl is missing"
    );
    let sim = Sim::start();
    let mut bad = csr("bad");
    bad["spec"]["usages"] = json!("client auth");
    sim.put_raw(CERTS, "certificatesigningrequests", &bad);
    let (code, _, _) = sim.kubectl("admin", &["get", "csr", "bad"]);
    assert_ne!(code, 0);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(sim)));
    let why = dropped.expect_err("the drop did not fail the test");
    let why = why.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(why.contains("fail the Kubernetes OpenAPI schemas"), "{why}");
}
