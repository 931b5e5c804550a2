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
    files: [&[u8]; 3],
    extra: &[(&str, &[u8])],
    rock_ridge: bool,
) -> std::path::PathBuf {
    let mut opts = vec![];
    if rock_ridge {
        opts.extend(["-R", "-J"]);
    } else {
        // xorriso writes Rock Ridge by default; plain ISO 9660 names only.
        opts.push("--norock");
    }
    xorriso_iso(dir, volid, files, extra, &opts)
}

/// [`live_iso`] with `opts` given to `xorriso -as mkisofs` (El Torito …).
fn xorriso_iso(
    dir: &std::path::Path,
    volid: &str,
    [kernel, initrd, rootfs]: [&[u8]; 3],
    extra: &[(&str, &[u8])],
    opts: &[&str],
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
    args.extend_from_slice(opts);
    let (out, t) = (iso.display().to_string(), tree.display().to_string());
    args.extend(["-o", &out, &t]);
    // xorriso 1.5.4 has crashed (SIGSEGV, "UNIX-SIGNAL") building one of
    // these small trees, once in a whole suite: the tool's crash is not
    // what any test here checks, so a crash is tried again (at most twice);
    // any other failure fails at once.
    let mut tries = 0;
    loop {
        let (code, o, e) = run("xorriso", &args);
        tries += 1;
        if code == 0 {
            return iso;
        }
        let crashed = format!("{o}{e}").contains("UNIX-SIGNAL");
        assert!(crashed && tries < 3, "xorriso failed: {o}{e}");
        eprintln!("xorriso crashed building {out} (try {tries}); trying again: {o}{e}");
        let _ = std::fs::remove_file(&iso);
    }
}

/// Debian's BIOS ISOLINUX (package `isolinux`) and its `ldlinux.c32`
/// (`syslinux-common`), when installed.
pub const ISOLINUX_BIN: &str = "/usr/lib/ISOLINUX/isolinux.bin";
pub const LDLINUX_C32: &str = "/usr/lib/syslinux/modules/bios/ldlinux.c32";

/// A live ISO built by [`rhcos_iso`].
pub struct RhcosIso {
    pub path: std::path::PathBuf,
    /// The kargs its embed areas hold (`kargs.json` `default`).
    pub default_kargs: String,
    /// Bytes per embed area (`kargs.json` `size`).
    pub area_size: usize,
}

/// A bootable ISO with the RHCOS live layout, written to `dir/<volid>.iso`:
/// El Torito BIOS boot by ISOLINUX ([`ISOLINUX_BIN`], [`LDLINUX_C32`];
/// Debian `isolinux` + `syslinux-common`) whose `isolinux/isolinux.cfg`
/// boots `images/pxeboot/vmlinuz` and `initrd.img` at once (no menu, serial
/// console) with the kargs of its embed area; a second area in
/// `EFI/redhat/grub.cfg` (booted only by [`rhcos_iso_uefi`]);
/// `coreos/kargs.json` listing both, `coreos/igninfo.json` and a zeroed
/// `images/ignition.img`, as in RHCOS. Each area holds
/// `coreos.liveiso=<volid> ignition.firstboot ignition.platform.id=metal
/// crc.iso.default=1`, then `\n`, then `#` up to `area_size` bytes,
/// followed by `# COREOS_KARG_EMBED_AREA`.
pub fn rhcos_iso(
    dir: &std::path::Path,
    volid: &str,
    files: [&[u8]; 2],
    area_size: usize,
) -> RhcosIso {
    rhcos_iso_with(dir, volid, files, area_size, Boot::Bios, "")
}

/// [`rhcos_iso`] whose default kargs end with `extra` (e.g. a serial
/// console the ISO was built with), without El Torito boot records: for
/// coreos-installer's `iso kargs` commands, whose ISO 9660 reader looks
/// names up in upper case as genisoimage (RHCOS) writes them, while
/// xorriso's mkisofs mode with `-boot-info-table` writes them in lower
/// case. Not bootable.
pub fn rhcos_iso_with_default(
    dir: &std::path::Path,
    volid: &str,
    files: [&[u8]; 2],
    area_size: usize,
    extra: &str,
) -> RhcosIso {
    rhcos_iso_with(dir, volid, files, area_size, Boot::None, extra)
}

/// GRUB for x86_64 UEFI (Debian `grub-efi-amd64-bin`) and mtools, which
/// [`rhcos_iso_uefi`] needs.
pub fn uefi_tools() -> Result<(), String> {
    for t in ["grub-mkstandalone", "mformat", "mmd", "mcopy"] {
        if !super::have(t) {
            return Err(format!("{t} is not installed (grub-efi-amd64-bin, mtools)"));
        }
    }
    if !std::path::Path::new("/usr/lib/grub/x86_64-efi").is_dir() {
        return Err("grub-efi-amd64-bin is not installed".into());
    }
    Ok(())
}

/// [`rhcos_iso`] that also boots on UEFI: an El Torito EFI image
/// `images/efiboot.img` (FAT, `EFI/BOOT/BOOTX64.EFI` = a standalone GRUB
/// that finds the CD by `coreos/kargs.json` and runs its
/// `EFI/redhat/grub.cfg`), as RHCOS has. Needs [`uefi_tools`].
pub fn rhcos_iso_uefi(
    dir: &std::path::Path,
    volid: &str,
    files: [&[u8]; 2],
    area_size: usize,
) -> RhcosIso {
    rhcos_iso_with(dir, volid, files, area_size, Boot::BiosAndUefi, "")
}

/// The FAT image of [`rhcos_iso_uefi`].
fn efiboot_img(dir: &std::path::Path) -> Vec<u8> {
    let stub = dir.join("grub-stub.cfg");
    std::fs::write(
        &stub,
        "search --no-floppy --set=root --file /coreos/kargs.json\nconfigfile ($root)/EFI/redhat/grub.cfg\n",
    )
    .expect("write the GRUB stub config");
    let efi = dir.join("BOOTX64.EFI");
    let (e, s) = (efi.display().to_string(), stub.display().to_string());
    super::run_ok(
        "grub-mkstandalone",
        &[
            "-O",
            "x86_64-efi",
            "--install-modules=linux normal iso9660 search search_fs_file configfile echo test all_video",
            "--locales=",
            "--fonts=",
            "--themes=",
            "-o",
            &e,
            &format!("boot/grub/grub.cfg={s}"),
        ],
    );
    let img = dir.join("efiboot.img");
    let i = img.display().to_string();
    let f = std::fs::File::create(&img).expect("create efiboot.img");
    f.set_len(4 << 20).expect("size efiboot.img");
    drop(f);
    super::run_ok(
        "mformat",
        &["-i", &i, "-T", "8192", "-h", "2", "-s", "32", "::"],
    );
    super::run_ok("mmd", &["-i", &i, "::/EFI", "::/EFI/BOOT"]);
    super::run_ok("mcopy", &["-i", &i, &e, "::/EFI/BOOT/"]);
    std::fs::read(&img).expect("read efiboot.img")
}

/// The El Torito boot records of [`rhcos_iso_with`]'s image.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Boot {
    None,
    Bios,
    BiosAndUefi,
}

fn rhcos_iso_with(
    dir: &std::path::Path,
    volid: &str,
    [kernel, initrd]: [&[u8]; 2],
    area_size: usize,
    boot_by: Boot,
    extra_default: &str,
) -> RhcosIso {
    let uefi = boot_by == Boot::BiosAndUefi;
    let mut default_kargs = format!(
        "coreos.liveiso={volid} ignition.firstboot ignition.platform.id=metal crc.iso.default=1"
    );
    if !extra_default.is_empty() {
        default_kargs = format!("{default_kargs} {extra_default}");
    }
    assert!(default_kargs.len() < area_size, "area_size too small");
    let mut area = format!("{default_kargs}\n").into_bytes();
    area.resize(area_size, b'#');
    // (file text, offset of the area in it)
    let with_area = |head: &str, tail: &str| -> (Vec<u8>, usize) {
        let mut t = head.as_bytes().to_vec();
        let at = t.len();
        t.extend_from_slice(&area);
        t.extend_from_slice(b"# COREOS_KARG_EMBED_AREA\n");
        t.extend_from_slice(tail.as_bytes());
        (t, at)
    };
    let (isolinux_cfg, iso_at) = with_area(
        "serial 0 115200\nprompt 0\ntimeout 1\ndefault linux\nlabel linux\n  kernel /images/pxeboot/vmlinuz\n  append initrd=/images/pxeboot/initrd.img,/images/ignition.img ",
        "",
    );
    let (grub_cfg, grub_at) = with_area(
        "set default=0\nset timeout=0\nmenuentry 'RHCOS (Live)' --class fedora --class gnu-linux --class gnu --class os {\n\tlinux /images/pxeboot/vmlinuz ",
        "\tinitrd /images/pxeboot/initrd.img /images/ignition.img\n}\n",
    );
    let kargs_json = format!(
        r#"{{"default": "{default_kargs}", "files": [{{"path": "EFI/redhat/grub.cfg", "offset": {grub_at}}}, {{"path": "isolinux/isolinux.cfg", "offset": {iso_at}}}], "size": {area_size}}}"#
    );
    let isolinux = std::fs::read(ISOLINUX_BIN).expect("isolinux is not installed");
    let ldlinux = std::fs::read(LDLINUX_C32).expect("syslinux-common is not installed");
    let ignition_img = vec![0u8; 64 * 1024];
    let efiboot = if uefi { efiboot_img(dir) } else { Vec::new() };
    let mut extra: Vec<(&str, &[u8])> = vec![
        ("isolinux/isolinux.bin", &isolinux),
        ("isolinux/ldlinux.c32", &ldlinux),
        ("isolinux/isolinux.cfg", &isolinux_cfg),
        ("EFI/redhat/grub.cfg", &grub_cfg),
        ("coreos/kargs.json", kargs_json.as_bytes()),
        ("coreos/igninfo.json", br#"{"file": "images/ignition.img"}"#),
        ("images/ignition.img", &ignition_img),
    ];
    let mut boot = vec![
        "-R",
        "-J",
        "-b",
        "isolinux/isolinux.bin",
        "-c",
        "isolinux/boot.cat",
        "-no-emul-boot",
        "-boot-load-size",
        "4",
        "-boot-info-table",
    ];
    if uefi {
        extra.push(("images/efiboot.img", &efiboot));
        boot.extend([
            "-eltorito-alt-boot",
            "-e",
            "images/efiboot.img",
            "-no-emul-boot",
        ]);
    }
    if boot_by == Boot::None {
        boot.truncate(2); // -R -J
    }
    let path = xorriso_iso(dir, volid, [kernel, initrd, b"rootfs"], &extra, &boot);
    RhcosIso {
        path,
        default_kargs,
        area_size,
    }
}
