//! The SKIPPED gate of `scripts/test.sh`: a test that skips records its
//! `SKIPPED` line in `CRC_SKIP_LOG` even though libtest hides the output of
//! passing tests, and `scripts/skip-gate.sh` fails on CI (CI=true) when any
//! test skipped, passes otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

fn gate(log: &Path, ci: Option<&str>) -> (i32, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/skip-gate.sh");
    let mut c = Command::new("bash");
    c.arg(&script).arg(log).env_remove("CI");
    if let Some(v) = ci {
        c.env("CI", v);
    }
    let out = c.output().expect("run skip-gate.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A fake test's output, recorded the way every skipping test records it
/// (`require!` → `note_skip` → `record_skip` into `CRC_SKIP_LOG`).
fn fake_skip(log: &Path) {
    let line = "SKIPPED dhcp::some_test: needs root (network namespaces)";
    common::record_skip(line, log);
    let text = std::fs::read_to_string(log).unwrap();
    assert_eq!(text, format!("{line}\n"), "what the skipping test recorded");
}

#[test]
fn on_ci_a_skipped_test_fails_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skips");
    fake_skip(&log);
    let (code, text) = gate(&log, Some("true"));
    assert_ne!(
        code, 0,
        "the gate passed with a skipped test on CI:\n{text}"
    );
    assert!(text.contains("dhcp::some_test"), "{text}");
    assert!(text.contains("every test must run"), "{text}");
}

#[test]
fn off_ci_skipped_tests_are_listed_and_pass() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skips");
    fake_skip(&log);
    let (code, text) = gate(&log, None);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("1 test(s) skipped") && text.contains("dhcp::some_test"),
        "{text}"
    );
}

#[test]
fn on_ci_a_run_without_skips_passes() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("skips");
    std::fs::write(&empty, "").unwrap();
    let (code, text) = gate(&empty, Some("true"));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("no test skipped"), "{text}");
    let (code, text) = gate(&dir.path().join("missing"), Some("true"));
    assert_eq!(code, 0, "no log file = nothing skipped: {text}");
}

/// Every `SKIPPED` line a test prints goes through `note_skip` (directly or
/// through `require!`, `require_netns!`, `skipped!`): a bare `eprintln!` or
/// `println!` of one is hidden by libtest and never reaches the gate.
#[test]
fn no_test_prints_a_skip_past_the_gate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut leaks = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let bare = ["eprintln!(\"SKIPPED", "println!(\"SKIPPED"]
                        .iter()
                        .any(|p| line.contains(p));
                    if bare {
                        leaks.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "SKIPPED printed without note_skip (the gate never sees it):\n{}",
        leaks.join("\n")
    );
}
