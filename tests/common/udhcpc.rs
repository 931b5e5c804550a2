//! Busybox `udhcpc` as a test DHCP client: one lease attempt in a
//! namespace, its settings read back as `KEY=VALUE` lines.
#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;

use super::{Netns, run_ok, unique_name};

/// Run udhcpc once on `ifname` in `ns` with `tries` DISCOVERs; the bound
/// script's `KEY=VALUE` output (ip, hostname, router, dns, domain, subnet,
/// broadcast, serverid, lease, ntpsrv), or None if no lease was obtained.
pub fn udhcpc_once(ns: &Netns, ifname: &str, dir: &Path, tries: &str) -> Option<String> {
    udhcpc_with(ns, ifname, dir, tries, &[])
}

/// [`udhcpc_once`] with more udhcpc options (e.g. `-B`: ask for broadcast
/// replies).
pub fn udhcpc_with(
    ns: &Netns,
    ifname: &str,
    dir: &Path,
    tries: &str,
    extra: &[&str],
) -> Option<String> {
    let out = dir.join(format!("udhcpc-{}.env", unique_name("")));
    let script = dir.join("udhcpc.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n[ \"$1\" = bound ] || exit 0\n{{ echo ip=$ip; echo hostname=$hostname; echo router=$router; echo dns=$dns; echo domain=$domain; echo subnet=$subnet; echo broadcast=$broadcast; echo serverid=$serverid; echo lease=$lease; echo ntpsrv=$ntpsrv; }} > {}\n",
            out.display()
        ),
    )
    .unwrap();
    run_ok("chmod", &["+x", script.to_str().unwrap()]);
    let mut args = vec![
        "timeout",
        "40",
        "udhcpc",
        "-i",
        ifname,
        "-f",
        "-q",
        "-n",
        "-t",
        tries,
        "-T",
        "2",
        "-A",
        "1",
        "-s",
        script.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let status = ns
        .cmd(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run udhcpc");
    let env = std::fs::read_to_string(&out).ok();
    if status.success() {
        assert!(env.is_some(), "udhcpc succeeded but the script did not run");
    }
    env
}

/// The last value of `key` in `KEY=VALUE` lines.
pub fn kv(text: &str, key: &str) -> Option<String> {
    text.lines().rev().find_map(|l| {
        l.strip_prefix(&format!("{key}="))
            .map(|v| v.trim().to_string())
    })
}
