//! Guests for the boot tests: the host kernel, an initramfs that prints
//! its command line on the serial console, a qemu process stopped on drop,
//! and the serial log they are checked by.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use super::initramfs::busybox_base;

/// The newest /boot/vmlinuz-*.
pub fn host_kernel() -> Option<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("/boot")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .collect();
    v.sort();
    v.pop()
}

/// The line the guest of [`cmdline_initramfs`] prints before `/proc/cmdline`.
pub const CMDLINE_MARK: &str = "CRC-CMDLINE:";

/// busybox, its libraries, and an init that prints `CRC-CMDLINE: <kernel
/// command line>` on ttyS0 and powers off.
pub fn cmdline_initramfs() -> Vec<u8> {
    cmdline_initramfs_then("/bin/busybox poweroff -f")
}

/// Like [`cmdline_initramfs`], but the init ends with the shell command
/// `last` (e.g. a long sleep, so the guest stays powered on).
pub fn cmdline_initramfs_then(last: &str) -> Vec<u8> {
    let mut c = busybox_base(&[]);
    let init = format!(
        "#!/bin/busybox sh\n/bin/busybox mount -t proc proc /proc\n\
         echo \"CRC-CMDLINE: $(/bin/busybox cat /proc/cmdline)\" > /dev/ttyS0\n\
         /bin/busybox sync\n{last}\n"
    );
    c.file("init", 0o755, init.as_bytes());
    c.finish()
}

/// A qemu (or any) process, killed and reaped on drop.
pub struct Qemu(pub Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Poll `log` every 500 ms until a whole line (ended by its newline)
/// contains `needle`; that line.
pub fn wait_for(log: &Path, needle: &str, timeout: Duration) -> Option<String> {
    wait_for_any(log, &[needle], timeout)
}

/// Poll `log` every 500 ms until a whole line (ended by its newline) holds
/// one of `needles`; that line. A guest on TCG writes its serial console
/// slowly: a line still being written is not taken (it was, and a command
/// line cut in the middle failed the test).
pub fn wait_for_any(log: &Path, needles: &[&str], timeout: Duration) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let text = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).to_string();
        let whole = text
            .split_inclusive('\n')
            .find(|l| l.ends_with('\n') && needles.iter().any(|n| l.contains(n)));
        if let Some(line) = whole {
            return Some(line.trim_end_matches(['\r', '\n']).to_string());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    None
}

/// The last `n` characters of `log` (for failure messages).
pub fn tail(log: &Path, n: usize) -> String {
    let text = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).to_string();
    let skip = text.chars().count().saturating_sub(n);
    text.chars().skip(skip).collect()
}
