//! Building a tiny initramfs for guest tests: a newc cpio writer and the
//! shared libraries a dynamic busybox needs.
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
