//! Without a `csr:` section nothing of the approver runs (issue #37 item
//! 7): no `csr` section in `/status`, no `csr:` log line, no CSR steps on
//! the timeline; the pending-CSR hint (tests/timeline.rs) is unchanged.
//! The appliance runs in this process (`common::inproc`); `/status` is
//! read over its admin API (the keys the wire carries).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::inproc::InProc;
use crc_appliance::serve::status::StatusDoc;

#[test]
fn without_a_csr_section_the_approver_does_not_exist() {
    require_tools!("curl");
    let app = InProc::start_yaml(&common::only("admin:\n  listen: 127.0.0.1:0\n"));
    let url = format!("http://{}/status", app.addr("admin"));
    let out = Command::new("curl").args(["-sf", &url]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let status: StatusDoc = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status.timeline.is_some(), "{text}");
    assert!(status.csr.is_none(), "{text}");
    assert!(!text.contains("\"csr\""), "{text}");
    for key in ["csrClient", "csrServing", "nodeReady"] {
        assert!(!text.contains(key), "{key} in {text}");
    }
    assert!(!app.log().contains("csr:"), "{}", app.log());
}
