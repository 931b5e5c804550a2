//! The mirror registry's storage under failure (issue #36 item 5), in
//! network namespaces with real `curl` pushes:
//!
//! - a full filesystem (storage on a small loop-mounted ext4 image, 8 MiB,
//!   detached in every path by a guard): the upload that does not
//!   fit fails with a clear error and a log line, leaves no partial blob and
//!   no upload behind, and the registry keeps serving (and accepts a push
//!   that fits afterwards);
//! - two concurrent pushes of one blob (three rounds, the first into one
//!   repository): both 201, the blob stored once, no upload left;
//! - kill -9 in the middle of pushes: after a restart on the same tree every
//!   blob acknowledged (201) is served with its digest, and no blob in the
//!   tree differs from its name.
//!
//! The first two run the appliance in-process (`registry/lab.rs`); the
//! kill -9 test spawns the binary ([`Lab::spawned`]): the process's death
//! mid-write is what it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;
#[path = "registry/lab.rs"]
mod lab;

use std::path::Path;
use std::sync::{Arc, Mutex};

use lab::{Lab, PASS, USER, sha256};

fn tools() -> Result<(), String> {
    lab::tools_present(
        "rgk",
        &[
            "htpasswd",
            "curl",
            "tar",
            "gzip",
            "mount",
            "umount",
            "truncate",
            "mkfs.ext4",
            "losetup",
        ],
    )
}

macro_rules! require_lab {
    () => {
        if let Err(why) = tools() {
            common::note_skip(&format!("SKIPPED {}: {why}", module_path!()));
            return;
        }
    };
}

/// Push `data` as a blob of `repo` (POST, then PUT with the bytes): the
/// final status and body.
fn push<A>(lab: &Lab<A>, repo: &str, data: &[u8], file: &Path) -> (u16, String) {
    let auth = format!("{USER}:{PASS}");
    let start = lab.curl(
        &["-u", &auth, "-X", "POST"],
        &format!("/v2/{repo}/blobs/uploads/"),
    );
    let Some(loc) = start.header("Location") else {
        return (start.code, start.text());
    };
    std::fs::write(file, data).unwrap();
    let g = lab.curl(
        &[
            "-u",
            &auth,
            "-X",
            "PUT",
            "-H",
            "Content-Type: application/octet-stream",
            "--data-binary",
            &format!("@{}", file.display()),
        ],
        &format!("{loc}?digest={}", sha256(data)),
    );
    (g.code, g.text())
}

/// Every blob file under `storage` hashes to its name.
fn every_blob_matches(storage: &Path) -> usize {
    let root = storage.join("docker/registry/v2/blobs/sha256");
    let mut n = 0;
    for pre in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for b in std::fs::read_dir(pre.path()).unwrap().flatten() {
            let data = b.path().join("data");
            if let Ok(bytes) = std::fs::read(&data) {
                let name = b.file_name().into_string().unwrap();
                assert_eq!(
                    sha256(&bytes),
                    format!("sha256:{name}"),
                    "{}",
                    data.display()
                );
                n += 1;
            }
        }
    }
    n
}

/// A small ext4 filesystem in an image file, attached to a loop device and
/// mounted; unmounted and detached on drop (every path, a panic included).
struct LoopFs {
    mountpoint: std::path::PathBuf,
    device: String,
    mounted: bool,
}

impl LoopFs {
    /// `size` (as `truncate -s` takes it) of ext4 in `image`, mounted on
    /// `mountpoint`.
    fn new(image: &Path, size: &str, mountpoint: &Path) -> LoopFs {
        let image = image.to_str().unwrap();
        common::run_ok("truncate", &["-s", size, image]);
        common::run_ok("mkfs.ext4", &["-q", "-F", "-m", "0", image]);
        let device = common::run_ok("losetup", &["--find", "--show", image])
            .trim()
            .to_string();
        assert!(device.starts_with("/dev/loop"), "losetup: {device}");
        let mut fs = LoopFs {
            mountpoint: mountpoint.to_path_buf(),
            device,
            mounted: false,
        };
        common::run_ok("mount", &[&fs.device, mountpoint.to_str().unwrap()]);
        fs.mounted = true;
        fs
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let at = self.mountpoint.to_str().unwrap();
            if common::run("umount", &[at]).0 != 0 {
                let _ = common::run("umount", &["-l", at]);
            }
        }
        let _ = common::run("losetup", &["-d", &self.device]);
    }
}

#[test]
fn a_full_filesystem_fails_the_upload_cleanly_and_the_registry_keeps_serving() {
    require_lab!();
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    // The image lives outside the lab's directory (removed before the
    // guard unmounts).
    let image_dir = tempfile::tempdir().unwrap();
    let _fs = LoopFs::new(&image_dir.path().join("fs.img"), "8M", &storage);
    let lab = Lab::start_on(dir, storage.clone(), "");
    let file = lab.dir.path().join("blob");
    let small = common::pattern(1 << 20, 1);
    assert_eq!(push(&lab, "disk/app", &small, &file).0, 201);
    let big = common::pattern(8 << 20, 2);
    let (code, body) = push(&lab, "disk/app", &big, &file);
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("storage write failed"), "{body}");
    lab.app.wait_log(
        "registry: storage write failed",
        std::time::Duration::from_secs(5),
    );
    // Nothing partial: no blob of it, no upload left.
    let hex = &sha256(&big)[7..];
    assert!(
        !storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .exists()
    );
    let uploads = storage.join("docker/registry/v2/repositories/disk/app/_uploads");
    assert_eq!(
        std::fs::read_dir(&uploads).map(|d| d.count()).unwrap_or(0),
        0
    );
    // Still serving what it has, and a push that fits works.
    let g = lab.curl(
        &["-u", &format!("{USER}:{PASS}")],
        &format!("/v2/disk/app/blobs/{}", sha256(&small)),
    );
    assert_eq!(g.code, 200);
    assert_eq!(sha256(&g.body), sha256(&small));
    assert_eq!(
        push(&lab, "disk/app", &common::pattern(100_000, 3), &file).0,
        201
    );
    assert_eq!(every_blob_matches(&storage), 2);
    let status = lab.app.status().registry.expect("a registry section");
    let last_error = status.last_error.unwrap_or_default();
    assert!(
        last_error.contains("storage write failed"),
        "{last_error:?}"
    );
}

#[test]
fn kill_9_during_pushes_loses_no_acknowledged_blob() {
    require_lab!();
    let mut lab = Lab::spawned("");
    let acked = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    std::thread::scope(|s| {
        let lab = &lab;
        let mine = acked.clone();
        let pusher = s.spawn(move || {
            let file = lab.dir.path().join("blob-k");
            for i in 0..200u32 {
                let data = common::pattern(200_000 + (i as usize % 7) * 30_000, 100 + i);
                let (code, _) = push(lab, "kill/app", &data, &file);
                if code != 201 {
                    break;
                }
                mine.lock().unwrap().push(data);
            }
        });
        common::wait_until(
            "a few acknowledged pushes",
            std::time::Duration::from_secs(30),
            || acked.lock().unwrap().len() >= 5,
        );
        lab.app.signal("KILL");
        pusher.join().unwrap();
    });
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 5);
    lab.app.wait_exit(std::time::Duration::from_secs(10));
    let file = lab.dir.path().join("cluster.yaml");
    lab.app = common::Appliance::launch()
        .netns(lab.srv.name())
        .start_path(&file);
    lab.app
        .wait_log("listening for registry", std::time::Duration::from_secs(20));
    for data in &acked {
        let g = lab.curl(&[], &format!("/v2/kill/app/blobs/{}", sha256(data)));
        assert_eq!(g.code, 200, "an acknowledged blob is lost");
        assert_eq!(sha256(&g.body), sha256(data));
    }
    assert!(every_blob_matches(&lab.storage) >= acked.len());
}

#[test]
fn two_concurrent_pushes_of_one_blob_both_succeed_and_store_it_once() {
    require_lab!();
    let lab = Lab::start("");
    let data = common::pattern(3 << 20, 77);
    for round in 0..3 {
        let codes: Vec<u16> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|i| {
                    let (lab, data) = (&lab, &data);
                    s.spawn(move || {
                        let file = lab.dir.path().join(format!("same-{round}-{i}"));
                        // Round 0 into one repository, then into two.
                        let repo = format!("same/app{}", if round == 0 { 0 } else { i });
                        push(lab, &repo, data, &file).0
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(codes, vec![201, 201], "round {round}");
    }
    assert_eq!(every_blob_matches(&lab.storage), 1);
    for i in 0..2 {
        let g = lab.curl(&[], &format!("/v2/same/app{i}/blobs/{}", sha256(&data)));
        assert_eq!(g.code, 200);
        assert_eq!(sha256(&g.body), sha256(&data));
    }
    let uploads = lab
        .storage
        .join("docker/registry/v2/repositories/same/app0/_uploads");
    assert_eq!(
        std::fs::read_dir(&uploads).map(|d| d.count()).unwrap_or(0),
        0
    );
}
