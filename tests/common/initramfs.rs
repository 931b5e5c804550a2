//! Building guest images for tests: a tiny initramfs (a newc cpio writer
//! and the shared libraries a dynamic busybox needs) and a live-ISO
//! look-alike with the RHCOS layout.
#![allow(dead_code)]

use super::run;

/// Newc (SVR4, no CRC) cpio writer for the initramfs.
pub struct Cpio {
    out: Vec<u8>,
    ino: u32,
}

impl Cpio {
    pub fn new() -> Self {
        Cpio {
            out: Vec::new(),
            ino: 1,
        }
    }
    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }
    pub fn entry(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
        let fields = [
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0,
        ];
        self.ino += 1;
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }
    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, &[], (0, 0));
    }
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100000 | mode, data, (0, 0));
    }
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[], (0, 0));
        self.out
    }
}

impl Default for Cpio {
    fn default() -> Self {
        Cpio::new()
    }
}

/// Shared libraries a dynamic /bin/busybox needs (absolute paths), from ldd.
pub fn busybox_libs() -> Vec<String> {
    let (_, out, _) = run("ldd", &["/bin/busybox"]);
    out.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, r)) => r.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| path.to_string())
        })
        .collect()
}

/// A cpio holding `bin dev proc sys` plus `extra_dirs`, the console and
/// ttyS0 devices, /bin/busybox (also as /bin/sh) and the libraries it
/// needs; the caller adds its own files and `init`.
pub fn busybox_base(extra_dirs: &[&str]) -> Cpio {
    let mut c = Cpio::new();
    let libs = busybox_libs();
    let mut dirs: Vec<String> = ["bin", "dev", "proc", "sys"]
        .iter()
        .chain(extra_dirs)
        .map(|d| d.to_string())
        .collect();
    for l in &libs {
        let mut p = std::path::Path::new(l.trim_start_matches('/')).parent();
        let mut chain = Vec::new();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            chain.push(d.display().to_string());
            p = d.parent();
        }
        for d in chain.into_iter().rev() {
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    }
    for d in &dirs {
        c.dir(d);
    }
    c.entry("dev/console", 0o020600, &[], (5, 1));
    c.entry("dev/ttyS0", 0o020600, &[], (4, 64));
    let bb = std::fs::read("/bin/busybox").expect("read /bin/busybox");
    c.file("bin/busybox", 0o755, &bb);
    c.file("bin/sh", 0o755, &bb);
    for l in &libs {
        let lib = std::fs::read(l).expect("read a busybox library");
        c.file(l.trim_start_matches('/'), 0o755, &lib);
    }
    c
}

/// Build a live-ISO look-alike with xorriso: `images/pxeboot/{vmlinuz,
/// initrd.img,rootfs.img}` plus `extra` (path, bytes) files, written to
/// `dir/<volid>.iso` from the tree `dir/tree-<volid>`. Without
/// `rock_ridge` the image has plain ISO 9660 names only.
pub fn live_iso(
    dir: &std::path::Path,
    volid: &str,
    [kernel, initrd, rootfs]: [&[u8]; 3],
    extra: &[(&str, &[u8])],
    rock_ridge: bool,
) -> std::path::PathBuf {
    let tree = dir.join(format!("tree-{volid}"));
    let px = tree.join("images/pxeboot");
    std::fs::create_dir_all(&px).expect("create the ISO tree");
    let files = [
        ("vmlinuz", kernel),
        ("initrd.img", initrd),
        ("rootfs.img", rootfs),
    ];
    for (name, data) in files {
        std::fs::write(px.join(name), data).expect("write an ISO file");
    }
    for (path, data) in extra {
        let path = tree.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create an ISO directory");
        }
        std::fs::write(path, data).expect("write an ISO file");
    }
    let iso = dir.join(format!("{volid}.iso"));
    let mut args = vec!["-as", "mkisofs", "-quiet", "-V", volid];
    if rock_ridge {
        args.extend(["-R", "-J"]);
    } else {
        // xorriso writes Rock Ridge by default; plain ISO 9660 names only.
        args.push("--norock");
    }
    let (out, t) = (iso.display().to_string(), tree.display().to_string());
    args.extend(["-o", &out, &t]);
    let (code, o, e) = run("xorriso", &args);
    assert_eq!(code, 0, "xorriso failed: {o}{e}");
    iso
}
