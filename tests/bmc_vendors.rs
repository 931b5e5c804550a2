//! `crc-appliance bmc up|eject|status` through the real CLI against the
//! test BMC (tests/bmcsim/bmcsim.py) serving the recorded trees of a Dell
//! iDRAC9, an HPE iLO 5, a Lenovo XCC and a Supermicro X13 (and the
//! OpenBMC rule set on the Dell tree) over TLS with Basic auth, with each
//! vendor's rules (issue #30).
//!
//! Per BMC: `up` on a running host boots it exactly once from the node's
//! ISO, in a CD-capable slot, with override `Once` and the vendor's
//! virtual-CD target, its boot mode kept; a second `up` changes nothing;
//! `eject` empties the slot and sets `Hdd` (Once) without a reset, and a
//! re-`up` boots once more from the ISO; `status`
//! shows manufacturer, model, firmware and slot; `up` over a foreign image
//! boots once from ours; an `up` whose calls first hit transient errors
//! (500, iDRAC's SYS446, iLO's 400 in POST, 409, 503) finishes in the same
//! run, and one whose error outlasts the retries is finished by the next
//! `up` with one reset in all. A BMC answering only 500 gets a clear error
//! within 90 s and 40 requests (with the real back-off); a 401 fails at
//! once.
//!
//! Each BMC also as its `--strict` variant (issue #41: no `MediaTypes`,
//! its own weak ETag refused, `TransferProtocolType` required, a Boot
//! PATCH without its mode refused, Basic auth refused so a Redfish session
//! is needed): `up`, a second `up`, `eject` and a re-`up`, as above.
//!
//! The back-off is shortened with `CRC_APPLIANCE_BMC_BACKOFF_MS` except in
//! the one test of the real bound. Needs python3 (3.11), openssl, curl.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "bmcsim/harness.rs"]
mod bmcsim;
mod common;
#[path = "bmcsim/lab.rs"]
mod lab;

use std::time::Duration;

use bmcsim::{Opts, Sim};
use common::free_port;
use common::inproc::InProc;
use lab::*;
use serde_json::Value;

const FOREIGN: &str = "http://192.0.2.7/old-install.iso";

fn ready() -> bool {
    if let Some(t) = Sim::TOOLS.iter().find(|t| !common::have(t)) {
        skipped!("SKIPPED bmc_vendors: needs {t}");
        return false;
    }
    true
}

/// The state after one good boot from `url`.
fn assert_booted_once(lab: &Lab, v: Vendor, url: &str) -> Value {
    let st = lab.state();
    assert_eq!(
        st["booted_from"],
        serde_json::json!([url]),
        "{}: one boot from our ISO: {st}\n{}",
        v.name,
        lab.log_tail()
    );
    assert_eq!(st["resets"].as_array().map(Vec::len), Some(1), "{st}");
    let boot = &st["boots"][0];
    assert_eq!(boot["enabled"], "Once", "{st}");
    assert_eq!(boot["target"], v.cd, "{st}");
    assert_eq!(boot["mode"], "UEFI", "the boot mode is kept: {st}");
    let slot = slot_with(&st, url).unwrap_or_else(|| panic!("{st}"));
    assert!(
        !slot.ends_with("/VirtualMedia/1") || v.name != "hpe",
        "HPE slot 1 is floppy: {slot}"
    );
    assert!(!slot.contains("RDOC") && !slot.contains("Remote"), "{slot}");
    st
}

/// The output without the driver's notes (`<node>: note: …`).
fn without_notes(out: &str) -> String {
    let note = format!("{NODE}: note: ");
    out.lines()
        .filter(|l| !l.starts_with(&note))
        .collect::<Vec<_>>()
        .join("\n")
}

fn boots_once_converges_and_ejects(v: Vendor, strict: bool) {
    if !ready() {
        return;
    }
    let lab = Lab::start(v, |o| if strict { o.arg("--strict") } else { o });
    let url = lab.ours(v).to_string();
    let out = lab.up_ok();
    assert!(out.contains(&format!("{NODE}: inserted {url}")), "{out}");
    assert!(
        out.contains(&format!("{NODE}: restarted (ForceRestart)")),
        "{out}"
    );
    let st = assert_booted_once(&lab, v, &url);
    assert_eq!(st["resets"][0], "ForceRestart");

    // A second up changes nothing.
    let mark = lab.log().len();
    let (code, out, err, _) = lab.bmc(&["up"]);
    assert_eq!(
        (code, without_notes(&out).trim()),
        (0, format!("{NODE}: nothing to do").as_str()),
        "{err}"
    );
    assert!(
        lab.changes_since(mark).is_empty(),
        "{:?}",
        lab.changes_since(mark)
    );
    assert_eq!(lab.state()["resets"].as_array().map(Vec::len), Some(1));

    // status: manufacturer, model, firmware, slot.
    let (code, out, err, _) = lab.bmc(&["status", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j[0]["manufacturer"], v.manufacturer, "{j}");
    assert!(j[0]["model"].as_str().is_some_and(|m| !m.is_empty()), "{j}");
    assert!(
        j[0]["firmware"].as_str().is_some_and(|m| !m.is_empty()),
        "{j}"
    );
    assert_eq!(
        Some(j[0]["media"].as_str().unwrap_or("").to_string()),
        slot_with(&st, &url),
        "{j}"
    );
    assert_eq!(j[0]["image"], url.as_str());

    // eject: the slot is empty, next boot Hdd once, no reset.
    let (code, out, err, _) = lab.bmc(&["eject", NODE]);
    assert_eq!(code, 0, "{out}{err}\n{}", lab.log_tail());
    assert!(
        out.contains("ejected the virtual media")
            && out.contains("set the next boot to Hdd (once)"),
        "{out}"
    );
    let st = lab.state();
    assert!(slot_with(&st, &url).is_none(), "{st}");
    // Lenovo takes the override in its settings object (applied at reset).
    let (t, e) = if st["pending_boot"].is_object() {
        let p = &st["pending_boot"];
        (
            &p["BootSourceOverrideTarget"],
            &p["BootSourceOverrideEnabled"],
        )
    } else {
        (&st["boot"]["target"], &st["boot"]["enabled"])
    };
    assert_eq!(
        (t.as_str(), e.as_str()),
        (Some("Hdd"), Some("Once")),
        "{st}"
    );
    assert_eq!(
        st["resets"].as_array().map(Vec::len),
        Some(1),
        "no reset: {st}"
    );

    // A re-up boots once more from our ISO.
    let out = lab.up_ok();
    assert!(out.contains(&format!("{NODE}: inserted {url}")), "{out}");
    let st = lab.state();
    assert_eq!(st["booted_from"], serde_json::json!([url, url]), "{st}");
    if strict {
        // A session per command, each deleted; the BMC's own ETag refused.
        let s = &st["sessions"];
        assert!(s["created"].as_u64() >= Some(4) && s["open"] == 0, "{st}");
        assert_eq!(s["created"], s["deleted"], "{st}");
        let rules: Vec<Value> = lab.log().iter().map(|l| l["rule"].clone()).collect();
        assert!(rules.contains(&"strict: weak If-Match refused".into()));
    }
}

fn up_over_a_foreign_image_boots_once(v: Vendor) {
    if !ready() {
        return;
    }
    let lab = Lab::start(v, |o| o.foreign(FOREIGN));
    assert!(slot_with(&lab.state(), FOREIGN).is_some());
    let out = lab.up_ok();
    assert!(out.contains("ejected the virtual media"), "{out}");
    let url = lab.ours(v).to_string();
    assert_booted_once(&lab, v, &url);
    let (code, out, _, _) = lab.bmc(&["up"]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("{NODE}: nothing to do").as_str())
    );
}

/// Each transient error once, in one `up`: finished by that `up`.
fn transient_errors_are_retried(v: Vendor) {
    if !ready() {
        return;
    }
    let mut faults = vec![
        "get=500x1",
        "eject=503x1",
        "insert=500x1",
        "boot=post400x1",
        "reset=409x1",
    ];
    if v.name == "dell" {
        faults.push("insert=sys446x1");
    }
    let lab = Lab::start(v, |o| {
        faults.iter().fold(o.foreign(FOREIGN), |o, f| o.fault(f))
    });
    lab.up_ok();
    let url = lab.ours(v).to_string();
    assert_booted_once(&lab, v, &url);
    let faulted = lab
        .log()
        .iter()
        .filter(|l| l["rule"].as_str().is_some_and(|r| r.starts_with("fault ")))
        .count();
    assert!(
        faulted >= faults.len(),
        "every fault was hit: {}",
        lab.log_tail()
    );
}

/// An error that outlasts one `up`'s retries: the next `up` finishes the
/// boot, with one reset in all.
fn a_part_done_up_is_finished_by_the_next(v: Vendor) {
    if !ready() {
        return;
    }
    let lab = Lab::start(v, |o| o.fault("boot=post400x5"));
    let (code, out, err, _) = lab.bmc(&["up", NODE]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!("BMC of {NODE}"))
            && err.contains("cannot set the next boot")
            && err.contains("UnableToModifyDuringSystemPOST")
            && err.contains("done before the failure: inserted"),
        "{err}"
    );
    let st = lab.state();
    assert_eq!(st["resets"].as_array().map(Vec::len), Some(0), "{st}");
    let out = lab.up_ok();
    assert!(!out.contains("inserted"), "not inserted twice: {out}");
    let url = lab.ours(v).to_string();
    assert_booted_once(&lab, v, &url);
    let (code, out, _, _) = lab.bmc(&["up"]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("{NODE}: nothing to do").as_str())
    );
}

macro_rules! per_vendor {
    ($($v:ident => $m:ident),* $(,)?) => {$(
        mod $m {
            use super::*;
            #[test]
            fn boots_once_converges_and_ejects() {
                super::boots_once_converges_and_ejects($v, false);
            }
            #[test]
            fn strict_variant_boots_once_converges_and_ejects() {
                super::boots_once_converges_and_ejects($v, true);
            }
            #[test]
            fn up_over_a_foreign_image_boots_once() {
                super::up_over_a_foreign_image_boots_once($v);
            }
            #[test]
            fn transient_errors_are_retried() {
                super::transient_errors_are_retried($v);
            }
            #[test]
            fn a_part_done_up_is_finished_by_the_next() {
                super::a_part_done_up_is_finished_by_the_next($v);
            }
        }
    )*};
}

per_vendor!(DELL => dell, HPE => hpe, LENOVO => lenovo, SUPERMICRO => supermicro, OPENBMC => openbmc);

/// The real bound (no shortened back-off): a BMC answering only 500.
#[test]
fn a_bmc_answering_only_500_fails_clearly_within_90s_and_40_requests() {
    if !ready() {
        return;
    }
    let lab = Lab::start(DELL, |o| o.fault("any=500"));
    let (code, out, err, took) = lab.bmc_env(&["up", NODE], None);
    assert_eq!(code, 1, "{out}{err}");
    assert!(took < Duration::from_secs(90), "{took:?}");
    let n = lab.state()["requests"].as_u64().unwrap();
    eprintln!("any=500: failed after {n} requests in {took:?}");
    assert!(n <= 40, "{n} requests");
    assert!(
        err.contains(&format!("BMC of {NODE}"))
            && err.contains("GET /redfish/v1/Systems/System.Embedded.1")
            && err.contains("HTTP 500: The request failed due to an internal service error.")
            && err.contains("attempts)"),
        "{err}"
    );
}

/// 401 fails at once, naming the node and the BMC's message.
#[test]
fn wrong_credentials_fail_at_once() {
    if !ready() {
        return;
    }
    let lab = Lab::start(HPE, |o| o.fault("auth=401"));
    let (code, out, err, took) = lab.bmc(&["up", NODE]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!("wrong credentials for BMC of {NODE}"))
            && err.contains("There is no valid session"),
        "{err}"
    );
    // The 401, the service root, the refused session: no retry.
    assert_eq!(lab.state()["requests"], 3, "no retry of a 401");
    assert!(took < Duration::from_secs(10));
}

/// A hostile BMC (the audit's L4, issue #40 item 8): a 2 MB error message
/// with newlines, a forged log line and an escape sequence reaches the
/// output bounded and escaped, for `status` and `up`.
#[test]
fn a_hostile_bmc_error_text_is_bounded_and_escaped() {
    if !ready() {
        return;
    }
    let lab = Lab::start(DELL, |o| o.fault("get=hostile"));
    for args in [&["status", NODE][..], &["up", NODE]] {
        let (code, out, err, _) = lab.bmc(args);
        let all = format!("{out}{err}");
        assert_eq!(code, 1, "{args:?}");
        assert!(all.len() < 8192, "{args:?}: {} bytes", all.len());
        assert!(
            all.contains("boom\\n2026-11-28T00:00:00.000000Z  INFO crc_appliance: FORGED LOG LINE\\r\\n\\u{1b}[2J"),
            "{all}"
        );
        assert!(
            !all.contains('\u{1b}') && all.contains("more bytes)"),
            "{all}"
        );
        assert!(!all.lines().any(|l| l.starts_with("2026-11-28")), "{all}");
    }
}

/// End to end with `serve` running: the BMC (bmcsim `--fetch-images`)
/// fetches what `bmc up` inserted, and gets the node's ISO. OpenBMC refuses
/// the `http://` URL, so `media: auto` inserts the `https://` one, served
/// by the appliance with its generated certificate; Dell takes `http://`.
#[test]
fn the_bmc_fetches_the_inserted_iso_from_serve() {
    if !ready() || !can_serve() {
        return;
    }
    require_tools!("sha256sum");
    for v in [OPENBMC, DELL] {
        let mut o = Opts::new(v.name).power("On").arg("--fetch-images");
        if v.openbmc {
            o = o.openbmc();
        }
        let lab = Lab::around(Sim::start(o), v, free_port(), free_port());
        let d = lab.dir.path();
        servable(d);
        let app = InProc::start_path(&lab.cluster);
        let out = lab.up_ok();
        let url = lab.ours(v).to_string();
        assert!(out.contains(&format!("inserted {url}")), "{out}");
        let st = lab.state();
        let fetched = st["fetches"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["url"] == url.as_str()))
            .unwrap_or_else(|| panic!("{}: not fetched: {st}\n{}", v.name, app.log()));
        assert_eq!(fetched["status"], 200, "{st}");
        // The same bytes as the appliance serves for the node.
        let file = d.join("served.iso");
        common::run_ok("curl", &["-sSfk", "-o", file.to_str().unwrap(), &url]);
        let sum = common::run_ok("sha256sum", &[file.to_str().unwrap()]);
        assert_eq!(
            fetched["sha256"].as_str(),
            sum.split_whitespace().next(),
            "{st}"
        );
        assert_booted_once(&lab, v, &url);
        drop(app);
    }
}

/// Whether `serve` can run here (a live ISO needs xorriso and ISOLINUX).
fn can_serve() -> bool {
    use common::initramfs::{ISOLINUX_BIN, LDLINUX_C32};
    if !common::have("xorriso") {
        skipped!("SKIPPED bmc_vendors: xorriso is not installed");
        return false;
    }
    if ![ISOLINUX_BIN, LDLINUX_C32]
        .iter()
        .all(|f| std::path::Path::new(f).is_file())
    {
        skipped!("SKIPPED bmc_vendors: isolinux/syslinux-common are not installed");
        return false;
    }
    true
}

/// A live ISO and role ignition files in the lab, so `serve` can run.
fn servable(d: &std::path::Path) {
    let built = common::initramfs::rhcos_iso(d, "bmc", [b"kernel", b"initrd"], 1024);
    std::fs::rename(&built.path, d.join("rhcos.iso")).unwrap();
    for role in ["bootstrap", "master", "worker"] {
        std::fs::write(
            d.join(format!("ign/{role}.ign")),
            "{\"ignition\":{\"version\":\"3.2.0\"}}",
        )
        .unwrap();
    }
}

/// `startOnServe` records `bmcPowerOn` when its `up` powered the node on
/// or restarted it, and not when it found the boot already done.
#[test]
fn start_on_serve_records_a_power_on_only_when_it_happened() {
    if !ready() || !can_serve() {
        return;
    }
    for already in [true, false] {
        let sim = Sim::start(Opts::new("hpe").power("Off"));
        let lab = Lab::around_with(sim, HPE, free_port(), free_port(), ", startOnServe: true");
        servable(lab.dir.path());
        if already {
            let out = lab.up_ok();
            assert!(out.contains("powered on"), "{out}");
        }
        let app = InProc::start_path(&lab.cluster);
        let line = if already {
            // ("already booting from" before this driver)
            format!("bmc: {NODE}: already boot")
        } else {
            format!("bmc: {NODE}: powered on")
        };
        app.wait_log(&line, Duration::from_secs(60));
        let st = lab.state();
        assert_eq!(
            st["resets"],
            serde_json::json!(["On"]),
            "one power-on in all: {st}"
        );
        if already {
            // (the old code recorded right after that line)
            std::thread::sleep(Duration::from_secs(1));
            let tl = app.timeline_row(NODE);
            assert!(tl.bmc_power_on.is_none(), "{tl:?}\n{}", app.log());
        } else {
            common::wait_until(
                "bmcPowerOn in the timeline",
                Duration::from_secs(20),
                || app.timeline_row(NODE).bmc_power_on.is_some(),
            );
        }
        drop(app);
    }
}
