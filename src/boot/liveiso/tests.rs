use std::io::Cursor;

use super::*;
use crate::boot::iso9660::testiso::{Node, build};

const DEFAULT: &str = "coreos.liveiso=live ignition.firstboot ignition.platform.id=metal";
const SIZE: usize = 200;

/// A bootloader config whose embed area starts at the returned offset.
fn cfg(prefix: &str, kargs: &str) -> (Vec<u8>, u64) {
    let mut area = format!("{kargs}\n").into_bytes();
    area.resize(SIZE, b'#');
    let mut out = prefix.as_bytes().to_vec();
    let off = out.len() as u64;
    out.extend_from_slice(&area);
    out.extend_from_slice(b"# COREOS_KARG_EMBED_AREA\n");
    (out, off)
}

fn iso_with(json: impl Fn(u64, u64) -> String, kargs2: &str) -> Vec<u8> {
    let (iso_cfg, o1) = cfg("label l\n  append initrd=/x ", DEFAULT);
    let (grub, o2) = cfg("menuentry {\n linux /vmlinuz ", kargs2);
    build(
        "live",
        &[
            Node::Dir(
                "coreos",
                vec![Node::File("kargs.json", json(o1, o2).into_bytes())],
            ),
            Node::Dir("isolinux", vec![Node::File("isolinux.cfg", iso_cfg)]),
            Node::Dir("grub", vec![Node::File("grub.cfg", grub)]),
        ],
        true,
    )
}

fn good_json(o1: u64, o2: u64) -> String {
    format!(
        r##"{{"default": "{DEFAULT}", "files": [{{"path": "isolinux/isolinux.cfg", "offset": {o1}}}, {{"path": "grub/grub.cfg", "offset": {o2}, "pad": "#", "end": "\n"}}], "size": {SIZE}}}"##
    )
}

fn locate(iso: &[u8]) -> Result<KargAreas, EmbedError> {
    KargAreas::locate(&mut IsoImage::open(Cursor::new(iso.to_vec()))?)
}

#[test]
fn locates_areas_and_patches_every_one() {
    let iso = iso_with(good_json, DEFAULT);
    let k = locate(&iso).unwrap();
    assert_eq!(k.size, SIZE);
    assert_eq!(k.current, DEFAULT);
    assert_eq!(k.areas.len(), 2);
    for a in &k.areas {
        assert_eq!(
            &iso[a.offset as usize..][..DEFAULT.len()],
            DEFAULT.as_bytes()
        );
    }
    let want = k.with_extra("ignition.firstboot coreos.inst.install_dev=/dev/sda x=1");
    assert_eq!(
        want,
        format!("{DEFAULT} coreos.inst.install_dev=/dev/sda x=1")
    );
    let p = k.patches(&want).unwrap();
    let mut out = iso.clone();
    p.apply(0, &mut out);
    assert_eq!(out.len(), iso.len());
    for a in &k.areas {
        let area = &out[a.offset as usize..][..SIZE];
        assert!(area.starts_with(format!("{want}\n#").as_bytes()));
        assert!(area.ends_with(b"##"));
        assert!(out[a.offset as usize + SIZE..].starts_with(b"# COREOS_KARG_EMBED_AREA"));
    }
    // Outside the areas the bytes are the original ones.
    let mut masked = (out.clone(), iso.clone());
    for (o, l) in p.regions() {
        for b in [&mut masked.0, &mut masked.1] {
            b[o as usize..(o + l) as usize].fill(0);
        }
    }
    assert_eq!(masked.0, masked.1);
    // The patched image reads back with the new kargs, as coreos-installer would.
    assert_eq!(locate(&out).unwrap().current, want);
}

#[test]
fn too_long_kargs_are_an_error() {
    let k = locate(&iso_with(good_json, DEFAULT)).unwrap();
    let long = "x".repeat(SIZE);
    match k.patches(&long) {
        Err(EmbedError::TooLong { len, size }) => assert_eq!((len, size), (SIZE, SIZE)),
        other => panic!("{other:?}"),
    }
    // One byte is kept for the line end.
    assert!(k.patches(&"x".repeat(SIZE - 1)).is_ok());
    assert!(k.patches(&"x".repeat(SIZE - 2)).is_ok());
    let msg = k.patches(&long).unwrap_err().to_string();
    assert!(msg.contains("at most 199"), "{msg}");
}

/// A kargs.json text from its parts.
fn info(default: &str, files: &[String], size: &str) -> String {
    let files = files.join(", ");
    format!(r#"{{"default": "{default}", "files": [{files}], "size": {size}}}"#)
}

/// One `files` entry.
fn entry(path: &str, offset: impl std::fmt::Display, extra: &str) -> String {
    format!(r#"{{"path": "{path}", "offset": {offset}{extra}}}"#)
}

#[test]
fn lying_or_malformed_kargs_json_is_an_error() {
    const CFG: &str = "isolinux/isolinux.cfg";
    let size = SIZE.to_string();
    let long_default = "d".repeat(SIZE);
    // (what, kargs.json given the area's true offset in isolinux.cfg)
    type Json<'a> = Box<dyn Fn(u64) -> String + 'a>;
    let cases: Vec<(&str, Json<'_>)> = vec![
        ("not json", Box::new(|_| "{nope".into())),
        ("no files", Box::new(|_| info("a", &[], &size))),
        (
            "size too big",
            Box::new(|o| info("a", &[entry(CFG, o, "")], "4096")),
        ),
        (
            "size zero",
            Box::new(|o| info("", &[entry(CFG, o, "")], "0")),
        ),
        (
            "negative size",
            Box::new(|o| info("", &[entry(CFG, o, "")], "-1")),
        ),
        (
            "offset past the file",
            Box::new(|_| info("a", &[entry(CFG, 100_000, "")], &size)),
        ),
        (
            "offset u64::MAX",
            Box::new(|_| info("a", &[entry(CFG, u64::MAX, "")], &size)),
        ),
        (
            "negative offset",
            Box::new(|_| info("a", &[entry(CFG, -1, "")], &size)),
        ),
        (
            "area runs past the file",
            Box::new(|o| info("a", &[entry(CFG, o + 100, "")], &size)),
        ),
        (
            "missing file",
            Box::new(|o| info("a", &[entry("nope/x.cfg", o, "")], &size)),
        ),
        (
            "a directory",
            Box::new(|o| info("a", &[entry("isolinux", o, "")], &size)),
        ),
        (
            "default too long",
            Box::new(|o| info(&long_default, &[entry(CFG, o, "")], &size)),
        ),
        (
            "non-ASCII pad",
            Box::new(|o| info("a", &[entry(CFG, o, r#", "pad": "é""#)], &size)),
        ),
        (
            "unknown field",
            Box::new(|o| info("a", &[entry(CFG, o, r#", "x": 1"#)], &size)),
        ),
        (
            "overlapping areas",
            Box::new(|o| info("a", &[entry(CFG, o, ""), entry(CFG, o + 1, "")], &size)),
        ),
    ];
    for (what, json) in cases {
        match locate(&iso_with(|o, _| json(o), DEFAULT)) {
            Err(e) => assert!(!e.to_string().is_empty(), "{what}"),
            Ok(k) => panic!("{what}: accepted {k:?}"),
        }
    }
    // Areas that disagree (one was edited by hand).
    let e = locate(&iso_with(good_json, "something else")).unwrap_err();
    assert!(e.to_string().contains("another area"), "{e}");
}

#[test]
fn iso_without_kargs_json() {
    let iso = build("x", &[Node::File("a.txt", b"a".to_vec())], false);
    assert!(matches!(locate(&iso), Err(EmbedError::NoKargsJson)));
    // Not an ISO at all.
    assert!(matches!(locate(&[0u8; 4096]), Err(EmbedError::Iso(_))));
}

#[test]
fn patches_apply_at_any_offset_and_length() {
    let p = Patches::new(vec![(10, b"ABCDE".to_vec()), (3, b"xy".to_vec())]).unwrap();
    let orig: Vec<u8> = (0u8..32).collect();
    let mut whole = orig.clone();
    p.apply(0, &mut whole);
    assert_eq!(&whole[3..5], b"xy");
    assert_eq!(&whole[10..15], b"ABCDE");
    // Any chunking gives the same bytes.
    for chunk in 1..=32 {
        let mut got = Vec::new();
        for start in (0..32).step_by(chunk) {
            let mut b = orig[start..(start + chunk).min(32)].to_vec();
            p.apply(start as u64, &mut b);
            got.extend(b);
        }
        assert_eq!(got, whole, "chunk {chunk}");
    }
    assert_eq!(p.end(), 15);
    assert!(Patches::new(vec![(0, b"abc".to_vec()), (2, b"x".to_vec())]).is_err());
    assert!(Patches::new(vec![(u64::MAX, b"ab".to_vec()), (u64::MAX, b"x".to_vec())]).is_err());
    let mut far = [0u8; 4];
    Patches::new(vec![(u64::MAX - 1, b"ab".to_vec())])
        .unwrap()
        .apply(u64::MAX - 3, &mut far);
    assert_eq!(&far, &[0, 0, b'a', 0]);
    assert_ne!(p.fingerprint(), Patches::default().fingerprint());
    assert_ne!(
        p.fingerprint(),
        Patches::new(vec![(10, b"ABCDF".to_vec()), (3, b"xy".to_vec())])
            .unwrap()
            .fingerprint()
    );
}

#[test]
fn merge_appends_consoles_even_when_the_iso_has_them() {
    // The audit's case: an ISO given a serial console with `coreos-installer
    // iso kargs modify -a console=ttyS0,115200n8`.
    let iso =
        "coreos.liveiso=x ignition.firstboot ignition.platform.id=metal console=ttyS0,115200n8";
    let node = "ignition.firstboot ignition.platform.id=metal coreos.inst.install_dev=/dev/sda \
                console=tty0 console=ttyS0,115200n8 ip=dhcp";
    let got = merge(iso, node);
    // `coreos-installer iso kargs modify --append W` for each added word
    // (KargsEditor: the words joined by one space after the current ones).
    let added = [
        "coreos.inst.install_dev=/dev/sda",
        "console=tty0",
        "console=ttyS0,115200n8",
        "ip=dhcp",
    ];
    assert_eq!(got, format!("{iso} {}", added.join(" ")));
    let last_console = got.split_whitespace().rfind(|w| w.starts_with("console="));
    assert_eq!(
        last_console,
        Some("console=ttyS0,115200n8"),
        "serial stays /dev/console"
    );
}

#[test]
fn merge_keeps_order_and_skips_duplicates() {
    assert_eq!(merge("a b", "b c a d"), "a b c d");
    assert_eq!(merge("", " x  y "), "x y");
    assert_eq!(merge("  a ", ""), "a");
}
