use super::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;

fn names() -> Vec<String> {
    ["bootstrap", "master-0"].map(String::from).to_vec()
}

/// A save that fails while `full` is set, else writes for real.
fn flaky(full: Arc<AtomicBool>, calls: Arc<AtomicUsize>) -> SaveFn {
    Arc::new(move |p: &Path, b: &[u8]| {
        calls.fetch_add(1, Ordering::SeqCst);
        if full.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("No space left on device (test)"));
        }
        write_file(p, b)
    })
}

async fn wait_for(what: &str, f: impl Fn() -> bool) {
    for _ in 0..100 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn ha_merge_takes_newer_entries_in_both_directions_and_forgets_reinstalls() {
    let dir = tempfile::tempdir().unwrap();
    let a = BootState::load(dir.path().join("a.json"), &names(), Arc::new(write_file));
    let b = BootState::load(dir.path().join("b.json"), &names(), Arc::new(write_file));
    // master-0 installs through A.
    assert_eq!(a.script_for("master-0"), Script::Install);
    a.ignition_fetched("master-0");
    assert!(a.image_downloaded("master-0"));
    let (_, snap) = a.snapshot();
    assert_eq!(b.merge(snap.clone(), &names()), 1);
    assert_eq!(b.peek("master-0"), Script::LocalBoot, "B learned it: exit");
    // Again: nothing newer, nothing taken; unknown nodes are ignored.
    assert_eq!(b.merge(snap, &names()), 0);
    let mut stray = BTreeMap::new();
    stray.insert(
        "ghost".to_string(),
        NodeBoot {
            rev: u64::MAX,
            ..NodeBoot::default()
        },
    );
    assert_eq!(b.merge(stray, &names()), 0);
    // A reinstall on B wins over A's older entry, and reaches A.
    b.reinstall("master-0");
    assert_eq!(a.merge(b.snapshot().1, &names()), 1);
    assert_eq!(a.peek("master-0"), Script::Install);
    // An older entry never overwrites a newer one.
    let (_, old) = a.snapshot();
    a.ignition_fetched("master-0");
    assert_eq!(a.merge(old, &names()), 0);
    assert_eq!(a.rows_state("master-0"), "pending");
}

#[test]
fn a_revision_from_the_future_is_refused_and_a_later_change_always_wins() {
    let dir = tempfile::tempdir().unwrap();
    let a = BootState::load(dir.path().join("a.json"), &names(), Arc::new(write_file));
    assert_eq!(a.script_for("master-0"), Script::Install);
    a.ignition_fetched("master-0");
    assert!(a.image_downloaded("master-0"));
    let forged = |rev| {
        let mut m = BTreeMap::new();
        m.insert(
            "master-0".to_string(),
            NodeBoot {
                rev,
                ..NodeBoot::default()
            },
        );
        m
    };
    let mut skipped = crate::runtime::control::Skipped::default();
    assert!(
        a.check_peer(forged(u64::MAX), &names(), &mut skipped)
            .is_empty()
    );
    assert_eq!(skipped.count, 1);
    assert!(skipped.first.unwrap().contains("a day ahead"));
    assert_eq!(a.merge(forged(u64::MAX), &names()), 0);
    assert_eq!(a.peek("master-0"), Script::LocalBoot, "still installed");
    // The highest revision allowed is taken, and the next local change
    // still wins over it on the peer (no saturation).
    let high = now_ms() + REV_AHEAD - 1000;
    assert_eq!(a.merge(forged(high), &names()), 1);
    a.reinstall("master-0");
    let (_, snap) = a.snapshot();
    assert!(snap["master-0"].rev > high);
    let b = BootState::load(dir.path().join("b.json"), &names(), Arc::new(write_file));
    assert_eq!(b.merge(forged(high), &names()), 1);
    assert_eq!(b.merge(snap, &names()), 1);
    assert_eq!(b.peek("master-0"), Script::Install);
}

#[test]
fn a_file_with_wall_clock_or_saturated_revisions_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    std::fs::write(
        &path,
        r#"{"version":1,"nodes":{"master-0":{"installedAt":5,"rev":1764331343000},"bootstrap":{"installedAt":5,"rev":18446744073709551615}}}"#,
    )
    .unwrap();
    let s = BootState::load(path, &names(), Arc::new(write_file));
    let (_, snap) = s.snapshot();
    assert_eq!(snap["master-0"].rev, 1_764_331_343_000);
    assert!(snap["bootstrap"].rev < u64::MAX / 2, "reset");
    s.reinstall("master-0");
    assert!(s.snapshot().1["master-0"].rev > 1_764_331_343_000);
}

#[test]
fn the_single_node_master_boots_its_disk_after_its_live_ignition_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let s = BootState::load(
        dir.path().join("c-netboot.json"),
        &names(),
        Arc::new(|p: &Path, b: &[u8]| write_file(p, b)),
    );
    assert_eq!(s.script_for("master-0"), Script::Install);
    s.ignition_fetched("master-0");
    // Without the bootstrap-in-place evidence: disk or install again.
    assert_eq!(s.peek("master-0"), Script::DiskOrInstall);
    s.bootstrap_in_place("master-0");
    assert_eq!(s.script_for("master-0"), Script::LocalBoot);
    s.reinstall("master-0");
    assert_eq!(s.script_for("master-0"), Script::Install);
}

#[tokio::test]
async fn a_failed_write_is_retried_until_it_works() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c-netboot.json");
    let (full, calls) = (Arc::new(AtomicBool::new(true)), Arc::default());
    let s = Arc::new(BootState::load(
        path.clone(),
        &names(),
        flaky(full.clone(), Arc::clone(&calls)),
    ));
    let stop = CancellationToken::new();
    let task = tokio::spawn(s.clone().run_writer(stop.clone()));
    assert_eq!(s.script_for("bootstrap"), Script::Install);
    s.ignition_fetched("bootstrap");
    assert!(s.image_downloaded("bootstrap"));
    wait_for("a failed attempt", || calls.load(Ordering::SeqCst) >= 1).await;
    wait_for("the error in the status", || {
        s.store_status().write_error.is_some()
    })
    .await;
    // Memory is the truth meanwhile: the node boots its disk.
    assert_eq!(s.script_for("bootstrap"), Script::LocalBoot);
    let st = s.store_status();
    assert!(!st.durable && st.unwritten_changes >= 1, "{st:?}");
    assert!(!path.exists());
    // Let the writer try that last change too (and fail), so that
    // only the retry timer can write from here on.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!s.durable());
    // Space again: the retry writes it without any new change.
    let before = calls.load(Ordering::SeqCst);
    full.store(false, Ordering::SeqCst);
    wait_for("a durable state", || s.durable()).await;
    assert!(calls.load(Ordering::SeqCst) > before);
    let st = s.store_status();
    assert_eq!((st.write_error, st.unwritten_changes), (None, 0));
    let again = BootState::load(path.clone(), &names(), Arc::new(write_file));
    assert_eq!(again.script_for("bootstrap"), Script::LocalBoot);
    stop.cancel();
    task.await.unwrap().unwrap();
}

fn state() -> (tempfile::TempDir, BootState) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c-netboot.json");
    let s = BootState::load(path, &names(), Arc::new(write_file));
    (dir, s)
}

#[test]
fn an_ignition_fetch_alone_never_boots_the_disk() {
    let (_d, s) = state();
    assert_eq!(s.script_for("master-0"), Script::Install);
    s.ignition_fetched("master-0");
    // The install failed after the ignition fetch (image 404): the
    // next boot must reach the installer when the disk is blank.
    assert_eq!(s.script_for("master-0"), Script::DiskOrInstall);
    assert_eq!(s.rows_state("master-0"), "installing");
    s.ignition_fetched("master-0");
    assert_eq!(s.peek("master-0"), Script::DiskOrInstall);
    assert_eq!(s.rows_state("master-0"), "unconfirmed");
}

#[test]
fn a_complete_image_download_after_the_ignition_finishes_the_install() {
    let (_d, s) = state();
    assert_eq!(s.script_for("master-0"), Script::Install);
    assert!(!s.image_downloaded("master-0"), "no ignition yet");
    s.ignition_fetched("master-0");
    assert!(s.image_downloaded("master-0"));
    assert!(!s.image_downloaded("master-0"), "reported once");
    assert_eq!(s.script_for("master-0"), Script::LocalBoot);
    assert_eq!(s.rows_state("master-0"), "installed");
}

#[test]
fn the_installed_systems_contact_after_the_ignition_finishes_the_install() {
    let (_d, s) = state();
    assert_eq!(s.script_for("master-0"), Script::Install);
    s.ignition_fetched("master-0");
    let ign = s.inner().nodes["master-0"].ignition_at.unwrap();
    assert!(!s.system_booted("master-0", ign - 1), "before the ignition");
    assert_eq!(s.peek("master-0"), Script::DiskOrInstall);
    assert!(s.system_booted("master-0", ign));
    assert_eq!(s.script_for("master-0"), Script::LocalBoot);
    assert!(!s.system_booted("bootstrap", ign), "never served a script");
}

#[test]
fn peek_changes_nothing() {
    let (_d, s) = state();
    assert_eq!(s.peek("master-0"), Script::Install);
    assert_eq!(s.rows_state("master-0"), "pending");
    assert_eq!(s.script_for("master-0"), Script::Install);
    s.ignition_fetched("master-0");
    let before = s.inner().nodes["master-0"].clone();
    assert_eq!(s.peek("master-0"), Script::DiskOrInstall);
    assert_eq!(s.inner().nodes["master-0"], before);
}

#[tokio::test]
async fn shutdown_writes_what_is_pending() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c-netboot.json");
    let s = Arc::new(BootState::load(
        path.clone(),
        &names(),
        Arc::new(write_file),
    ));
    s.reinstall("master-0");
    let stop = CancellationToken::new();
    stop.cancel();
    s.clone().run_writer(stop).await.unwrap();
    assert!(s.durable() && path.exists());
}

#[test]
fn a_failed_write_leaves_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    // The target is a directory: the rename fails after the temp file
    // was written.
    let path = dir.path().join("state.json");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("x"), b"x").unwrap();
    assert!(write_file(&path, b"{}").is_err());
    assert!(!tmp_of(&path).exists());
}

#[test]
fn an_unreadable_file_takes_every_node_as_installed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c-netboot.json");
    std::fs::write(&path, b"{\"version\": 1, \"nodes\": {").unwrap();
    std::fs::write(tmp_of(&path), b"").unwrap();
    let s = BootState::load(path.clone(), &names(), Arc::new(write_file));
    assert_eq!(s.script_for("bootstrap"), Script::LocalBoot);
    assert_eq!(s.script_for("master-0"), Script::LocalBoot);
    let st = s.store_status();
    assert!(!st.durable, "the assumed state is not written yet");
    assert!(st.load_error.unwrap().contains("kept as"));
    assert!(dir.path().join("c-netboot.json.corrupt").exists());
    assert!(!tmp_of(&path).exists(), "a stale temp file is removed");
    // Only an explicit reinstall sends a node to the installer.
    s.reinstall("master-0");
    assert_eq!(s.script_for("master-0"), Script::Install);
    assert_eq!(s.script_for("bootstrap"), Script::LocalBoot);
}
