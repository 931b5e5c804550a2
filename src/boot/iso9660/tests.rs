//! Unit tests of [`super`] (iso9660).

use super::testiso::{Node, build};
use super::*;
use std::io::Cursor;

fn sample(rr: bool) -> Vec<u8> {
    build(
        "rhcos-test-0",
        &[
            Node::Dir(
                "images",
                vec![Node::Dir(
                    "pxeboot",
                    vec![
                        Node::File("vmlinuz", b"KERNEL".repeat(1000)),
                        Node::File("initrd.img", b"INITRD".to_vec()),
                        Node::File("rootfs.img", (0..5000u32).map(|i| i as u8).collect()),
                    ],
                )],
            ),
            Node::File("readme-first.txt", b"hi".to_vec()),
        ],
        rr,
    )
}

#[test]
fn reads_files_by_rr_and_iso_names() {
    for rr in [false, true] {
        let mut iso = IsoImage::open(Cursor::new(sample(rr))).unwrap();
        assert_eq!(iso.volume_id(), "rhcos-test-0");
        assert_eq!(iso.has_rock_ridge(), rr);
        let k = iso.read_file("images/pxeboot/vmlinuz", 1 << 20).unwrap();
        assert_eq!(k, b"KERNEL".repeat(1000));
        let k2 = iso.read_file("/IMAGES/PXEBOOT/VMLINUZ", 1 << 20).unwrap();
        assert_eq!(k, k2);
        let r = iso.read_file("images/pxeboot/rootfs.img", 1 << 20).unwrap();
        assert_eq!(r.len(), 5000);
        assert_eq!(r[4999], (4999u32 % 256) as u8);
        let names: Vec<String> = {
            let root = iso.root().clone();
            iso.read_dir(&root)
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect()
        };
        if rr {
            assert_eq!(names, ["images", "readme-first.txt"]);
        } else {
            assert_eq!(names, ["IMAGES", "README_FIRST.TXT"]);
        }
        assert!(matches!(
            iso.lookup("images/pxeboot/nope"),
            Err(IsoError::NotFound(_))
        ));
        assert!(matches!(
            iso.lookup("images/pxeboot/vmlinuz/x"),
            Err(IsoError::NotADirectory(_))
        ));
        let d = iso.lookup("images").unwrap();
        assert!(matches!(
            iso.copy_to(&d, &mut Vec::new()),
            Err(IsoError::IsADirectory(_))
        ));
        assert!(iso.read_file("images/pxeboot/vmlinuz", 10).is_err());
    }
}

#[test]
fn rejects_non_iso_and_truncation() {
    assert!(matches!(
        IsoImage::open(Cursor::new(vec![0u8; 100])),
        Err(IsoError::NotIso(_))
    ));
    assert!(matches!(
        IsoImage::open(Cursor::new(vec![0u8; 40 * 2048])),
        Err(IsoError::NotIso(_))
    ));
    let img = sample(true);
    // Cut in the middle of the file data: lookups work, reads fail cleanly.
    for cut in [17 * 2048, 18 * 2048 + 100, img.len() - 2048, img.len() - 1] {
        let r = IsoImage::open(Cursor::new(img[..cut].to_vec())).and_then(|mut iso| {
            let mut sink = Vec::new();
            for p in [
                "images/pxeboot/vmlinuz",
                "images/pxeboot/initrd.img",
                "images/pxeboot/rootfs.img",
            ] {
                let e = iso.lookup(p)?;
                iso.copy_to(&e, &mut sink)?;
            }
            Ok(())
        });
        assert!(r.is_err(), "cut at {cut} should fail");
    }
}

/// Deterministic xorshift so failures reproduce.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn mutated_images_never_panic() {
    for rr in [false, true] {
        let base = sample(rr);
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        // Focus mutations on the metadata sectors (16.. and the directories).
        for round in 0..3000 {
            let mut img = base.clone();
            let n = 1 + rng(&mut seed) % 8;
            for _ in 0..n {
                let region = if round % 2 == 0 {
                    16 * 2048..18 * 2048
                } else {
                    18 * 2048..img.len()
                };
                let at = region.start + (rng(&mut seed) as usize % (region.end - region.start));
                img[at] = rng(&mut seed) as u8;
            }
            if round % 7 == 0 {
                let cut = rng(&mut seed) as usize % img.len();
                img.truncate(cut);
            }
            if let Ok(mut iso) = IsoImage::open(Cursor::new(img)) {
                let root = iso.root().clone();
                let _ = iso.read_dir(&root);
                for p in ["images/pxeboot/vmlinuz", "images/pxeboot/rootfs.img", "x/y"] {
                    if let Ok(e) = iso.lookup(p) {
                        let mut sink = Vec::new();
                        let _ = iso.copy_to(&e, &mut sink);
                        // A corrupt length may claim a huge file: the copy is
                        // bounded by the image size.
                        assert!(sink.len() as u64 <= base.len() as u64);
                    }
                }
            }
        }
    }
}
