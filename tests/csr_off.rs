//! Without a `csr:` section nothing of the approver runs (issue #37 item
//! 7): no `csr` section in `/status`, no `csr:` log line, no CSR steps on
//! the timeline; the pending-CSR hint (tests/timeline.rs) is unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::Appliance;

#[test]
fn without_a_csr_section_the_approver_does_not_exist() {
    require_tools!("curl");
    let app = Appliance::start(&common::only("admin:\n  listen: 127.0.0.1:0\n"));
    let url = format!("http://{}/status", app.addr("admin"));
    let out = Command::new("curl").args(["-sf", &url]).output().unwrap();
    assert!(out.status.success());
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status.get("timeline").is_some(), "{status}");
    assert!(status.get("csr").is_none(), "{status}");
    let text = String::from_utf8_lossy(&out.stdout);
    for key in ["csrClient", "csrServing", "nodeReady"] {
        assert!(!text.contains(key), "{key} in {text}");
    }
    assert!(!app.log().contains("csr:"), "{}", app.log());
}
