//! The test BMC (`tests/bmcsim/bmcsim.py`) itself, checked with curl over
//! TLS for each recorded vendor and the OpenBMC rule set: Basic auth (401
//! without or with wrong credentials), ETag/If-Match (412, Lenovo's 428),
//! one vendor quirk each (Dell's SYS446 after an eject, HPE's POST 400 and
//! 415, Lenovo's PATCH-only slots, Supermicro's `UsbCd` and mode revert,
//! OpenBMC's https-only images), the simulated boot, injected faults, the
//! request log and `/_sim/state`. The driver's end-to-end tests rely on
//! these behaviours, so they are pinned here.
//!
//! Needs python3, openssl and curl; skipped with a reason otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "bmcsim/harness.rs"]
mod bmcsim;
mod common;

use bmcsim::{Opts, Sim};
use serde_json::json;

const ISO: &str = "http://127.0.0.1:8080/boot/node-0.iso";
const ISO_S: &str = "https://127.0.0.1:8443/boot/node-0.iso";

macro_rules! need_tools {
    () => {
        require_tools!("python3", "openssl", "curl");
    };
}

fn etag(sim: &Sim, path: &str) -> String {
    let r = sim.req("GET", path, None, &[]);
    assert_eq!(r.status, 200, "{path}: {r:?}");
    r.header("etag").expect("ETag header").to_string()
}

fn boot_once(target: &str) -> String {
    json!({"Boot": {"BootSourceOverrideEnabled": "Once",
                    "BootSourceOverrideTarget": target,
                    "BootSourceOverrideMode": "UEFI"}})
    .to_string()
}

fn reset(sim: &Sim, system: &str, kind: &str) -> u16 {
    sim.req(
        "POST",
        &format!("{system}/Actions/ComputerSystem.Reset"),
        Some(&json!({ "ResetType": kind }).to_string()),
        &[],
    )
    .status
}

fn insert_body(url: &str) -> String {
    json!({ "Image": url }).to_string()
}

#[test]
fn auth_etag_and_state_on_every_tree() {
    need_tools!();
    for (vendor, system) in [
        ("dell", "/redfish/v1/Systems/System.Embedded.1"),
        ("hpe", "/redfish/v1/Systems/1"),
        ("lenovo", "/redfish/v1/Systems/1"),
        ("supermicro", "/redfish/v1/Systems/1"),
    ] {
        let sim = Sim::start(Opts::new(vendor));
        // The service root is open (DSP0266), the rest needs credentials.
        assert_eq!(sim.curl("GET", "/redfish/v1/", None, &[], None).status, 200);
        let r = sim.curl("GET", system, None, &[], None);
        assert_eq!(r.status, 401, "{vendor}: no credentials");
        assert!(r.header("www-authenticate").is_some());
        assert_eq!(r.message_id(), "Base.1.0.NoValidSession", "sushy's body");
        let r = sim.curl("GET", system, None, &[], Some(("admin", "wrong")));
        assert_eq!(r.status, 401, "{vendor}: wrong password");
        let r = sim.req("GET", "/redfish/v1/Systems", None, &[]);
        assert_eq!(r.status, 200);
        assert_eq!(r.body["Members"][0]["@odata.id"], system);
        // ETag: a mismatching If-Match is 412, the current one is accepted.
        let tag = etag(&sim, system);
        let body = json!({"Boot": {"BootSourceOverrideEnabled": "Disabled",
                                   "BootSourceOverrideMode": "UEFI"}})
        .to_string();
        let r = sim.req("PATCH", system, Some(&body), &["If-Match: \"stale\""]);
        assert_eq!(r.status, 412, "{vendor}: {r:?}");
        let r = sim.req("PATCH", system, Some(&body), &[&format!("If-Match: {tag}")]);
        assert_eq!(r.status, 200, "{vendor}: {r:?}");
        assert_eq!(sim.curl("GET", "/nope", None, &[], None).status, 401);
        assert_eq!(sim.req("GET", "/redfish/v1/nope", None, &[]).status, 404);
        let st = sim.state();
        assert_eq!(st["power"], "On", "{vendor}");
        assert_eq!(st["boot"]["mode"], "UEFI", "{vendor}");
        assert_eq!(st["resets"], json!([]));
        assert_eq!(st["booted_from"], json!([]));
        assert!(st["requests"].as_u64().unwrap() >= 7, "{st}");
        assert!(
            st["slots"].as_object().unwrap().len() >= 2,
            "{vendor}: slots {st}"
        );
        let log = sim.log();
        assert_eq!(log.len() as u64, st["requests"].as_u64().unwrap());
        let patch = log
            .iter()
            .find(|l| l["method"] == "PATCH" && l["status"] == 200)
            .expect("the PATCH is logged");
        assert_eq!(patch["path"], system);
        assert_eq!(
            patch["body"]["Boot"]["BootSourceOverrideEnabled"],
            "Disabled"
        );
        assert_eq!(log[0]["body"], serde_json::Value::Null);
    }
}

#[test]
fn dell_refuses_an_insert_right_after_an_eject_once_then_boots_the_cd() {
    need_tools!();
    let sim = Sim::start(Opts::new("dell").foreign(ISO_S));
    let sys = "/redfish/v1/Systems/System.Embedded.1";
    let slot = format!("{sys}/VirtualMedia/1");
    let st = sim.state();
    assert_eq!(st["slots"][&slot]["image"], ISO_S, "foreign image: {st}");
    let ej = format!("{slot}/Actions/VirtualMedia.EjectMedia");
    let ins = format!("{slot}/Actions/VirtualMedia.InsertMedia");
    // Occupied slot: eject first.
    assert_eq!(
        sim.req("POST", &ins, Some(&insert_body(ISO)), &[]).status,
        409
    );
    assert_eq!(sim.req("POST", &ej, Some("{}"), &[]).status, 204);
    let r = sim.req("POST", &ins, Some(&insert_body(ISO)), &[]);
    assert_eq!(r.status, 500);
    assert_eq!(r.message_id(), "IDRAC.2.8.SYS446");
    assert_eq!(
        sim.req("POST", &ins, Some(&insert_body(ISO)), &[]).status,
        204
    );
    let r = sim.req("GET", &slot, None, &[]);
    assert_eq!(
        (&r.body["Image"], &r.body["Inserted"]),
        (&json!(ISO), &json!(true))
    );
    assert_eq!(
        sim.req("PATCH", sys, Some(&boot_once("Cd")), &[]).status,
        200
    );
    assert_eq!(reset(&sim, sys, "ForceRestart"), 204);
    // A reset without override boots the disk.
    assert_eq!(reset(&sim, sys, "ForceRestart"), 204);
    assert_eq!(reset(&sim, sys, "Bogus"), 400);
    let st = sim.state();
    assert_eq!(st["booted_from"], json!([ISO, "disk"]), "{st}");
    assert_eq!(st["resets"], json!(["ForceRestart", "ForceRestart"]));
    assert_eq!(st["boot"]["enabled"], "Disabled", "Once is consumed");
    assert_eq!(st["boots"][0]["target"], "Cd");
    let rules: Vec<_> = sim
        .log()
        .into_iter()
        .filter_map(|l| l["rule"].as_str().map(String::from))
        .collect();
    assert!(rules.iter().any(|r| r.contains("SYS446")), "{rules:?}");
}

#[test]
fn hpe_post_window_empty_action_body_and_mode() {
    need_tools!();
    let sim = Sim::start(Opts::new("hpe").power("Off"));
    let sys = "/redfish/v1/Systems/1";
    let cd = "/redfish/v1/Managers/1/VirtualMedia/2";
    let floppy = "/redfish/v1/Managers/1/VirtualMedia/1";
    // An action with an empty body is 415; `{}` is fine (200 + iLO's body).
    let ej = format!("{cd}/Actions/VirtualMedia.EjectMedia");
    assert_eq!(sim.req("POST", &ej, None, &[]).status, 415);
    let r = sim.req("POST", &ej, Some("{}"), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.message_id(), "Base.1.4.Success");
    // Changing the mode is refused.
    assert_eq!(
        sim.req(
            "PATCH",
            sys,
            Some(r#"{"Boot":{"BootSourceOverrideMode":"Legacy"}}"#),
            &[]
        )
        .status,
        400
    );
    // The image in the floppy/USB slot does not boot as a CD.
    let ins = format!("{floppy}/Actions/VirtualMedia.InsertMedia");
    assert_eq!(
        sim.req("POST", &ins, Some(&insert_body(ISO)), &[]).status,
        200
    );
    assert_eq!(
        sim.req("PATCH", sys, Some(&boot_once("Cd")), &[]).status,
        200
    );
    assert_eq!(reset(&sim, sys, "On"), 200);
    // In POST now: the first Boot PATCH is refused, the next accepted.
    let r = sim.req("PATCH", sys, Some(&boot_once("Cd")), &[]);
    assert_eq!(r.status, 400);
    assert_eq!(r.message_id(), "iLO.2.14.UnableToModifyDuringSystemPOST");
    assert_eq!(
        sim.req("PATCH", sys, Some(&boot_once("Cd")), &[]).status,
        200
    );
    let ins = format!("{cd}/Actions/VirtualMedia.InsertMedia");
    assert_eq!(
        sim.req("POST", &ins, Some(&insert_body(ISO)), &[]).status,
        200
    );
    assert_eq!(reset(&sim, sys, "ForceRestart"), 200);
    let st = sim.state();
    assert_eq!(st["booted_from"], json!(["disk", ISO]), "{st}");
    assert_eq!(st["power"], "On");
    assert_eq!(st["in_post"], true);
}

#[test]
fn lenovo_slots_take_a_patch_with_if_match_and_settings_apply_at_reset() {
    need_tools!();
    let sim = Sim::start(Opts::new("lenovo"));
    let sys = "/redfish/v1/Systems/1";
    let slot = format!("{sys}/VirtualMedia/EXT1");
    let r = sim.req("GET", &slot, None, &[]);
    assert!(r.body["Actions"].is_null(), "no InsertMedia action");
    assert!(r.header("allow").unwrap().contains("PATCH"));
    let ins = format!("{slot}/Actions/VirtualMedia.InsertMedia");
    assert_eq!(
        sim.req("POST", &ins, Some(&insert_body(ISO)), &[]).status,
        404
    );
    let body = json!({"Image": ISO, "Inserted": true, "WriteProtected": true}).to_string();
    assert_eq!(sim.req("PATCH", &slot, Some(&body), &[]).status, 428);
    let tag = etag(&sim, &slot);
    let r = sim.req("PATCH", &slot, Some(&body), &[&format!("If-Match: {tag}")]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_ne!(etag(&sim, &slot), tag, "the ETag follows the content");
    // The old ETag no longer matches.
    let r = sim.req(
        "PATCH",
        &slot,
        Some(r#"{"Image":null,"Inserted":false}"#),
        &[&format!("If-Match: {tag}")],
    );
    assert_eq!(r.status, 412);
    // RDOC*/Remote* slots cannot be inserted into.
    for s in ["RDOC1", "Remote1"] {
        let p = format!("{sys}/VirtualMedia/{s}");
        let t = etag(&sim, &p);
        assert_eq!(
            sim.req("PATCH", &p, Some(&body), &[&format!("If-Match: {t}")])
                .status,
            400,
            "{s}"
        );
    }
    // The boot override PATCHed to @Redfish.Settings applies at the reset.
    let pending = format!("{sys}/Pending");
    let t = etag(&sim, &pending);
    assert_eq!(
        sim.req(
            "PATCH",
            &pending,
            Some(&boot_once("Cd")),
            &[&format!("If-Match: {t}")]
        )
        .status,
        200
    );
    let st = sim.state();
    assert_eq!(st["boot"]["enabled"], "Disabled");
    assert_eq!(st["pending_boot"]["BootSourceOverrideTarget"], "Cd");
    assert_eq!(reset(&sim, sys, "ForceRestart"), 204);
    let st = sim.state();
    assert_eq!(st["booted_from"], json!([ISO]), "{st}");
    assert_eq!(st["pending_boot"], serde_json::Value::Null);
    assert_eq!(st["slots"][&slot], json!({"image": ISO, "inserted": true}));
}

#[test]
fn supermicro_boots_vmedia_as_usbcd_and_reverts_an_omitted_mode() {
    need_tools!();
    let sim = Sim::start(Opts::new("supermicro"));
    let sys = "/redfish/v1/Systems/1";
    let slot = "/redfish/v1/Managers/1/VirtualMedia/VirtualMedia1";
    let ins = format!("{slot}/Actions/VirtualMedia.InsertMedia");
    // Parameters outside the slot's ActionInfo are refused.
    let r = sim.req(
        "POST",
        &ins,
        Some(&json!({"Image": ISO, "Bogus": 1}).to_string()),
        &[],
    );
    assert_eq!(r.status, 400);
    assert_eq!(
        sim.req("POST", &ins, Some(&insert_body(ISO)), &[]).status,
        204
    );
    // `Cd` is the physical drive.
    assert_eq!(
        sim.req("PATCH", sys, Some(&boot_once("Cd")), &[]).status,
        200
    );
    assert_eq!(reset(&sim, sys, "ForceRestart"), 204);
    // A PATCH without the mode reverts it to Legacy.
    let r = sim.req(
        "PATCH",
        sys,
        Some(r#"{"Boot":{"BootSourceOverrideEnabled":"Once","BootSourceOverrideTarget":"UsbCd"}}"#),
        &[],
    );
    assert_eq!(r.status, 200);
    assert_eq!(sim.state()["boot"]["mode"], "Legacy");
    assert_eq!(
        sim.req("PATCH", sys, Some(&boot_once("UsbCd")), &[]).status,
        200
    );
    assert_eq!(reset(&sim, sys, "ForceRestart"), 204);
    let st = sim.state();
    assert_eq!(st["booted_from"], json!(["disk", ISO]), "{st}");
    assert_eq!(st["boots"][1]["mode"], "UEFI");
    // Eject is offered while the slot holds an image.
    let r = sim.req("GET", slot, None, &[]);
    let ej = r.body["Actions"]["#VirtualMedia.EjectMedia"]["target"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(sim.req("POST", &ej, Some("{}"), &[]).status, 204);
    assert_eq!(sim.state()["slots"][slot]["inserted"], false);
}

#[test]
fn openbmc_rules_take_only_https_images_and_stream() {
    need_tools!();
    let sim = Sim::start(Opts::new("dell").openbmc());
    let slot = "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD";
    let ins = format!("{slot}/Actions/VirtualMedia.InsertMedia");
    for body in [
        json!({"Image": ISO}),
        json!({"Image": ISO, "TransferProtocolType": "HTTP"}),
        json!({"Image": ISO, "TransferProtocolType": "HTTPS"}),
    ] {
        let r = sim.req("POST", &ins, Some(&body.to_string()), &[]);
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(
            r.message_id(),
            "Base.1.12.ResourceAtUriInUnknownFormat",
            "{body}"
        );
    }
    let r = sim.req(
        "POST",
        &ins,
        Some(&json!({"Image": ISO_S, "TransferMethod": "Upload"}).to_string()),
        &[],
    );
    assert_eq!(r.status, 400);
    let r = sim.req(
        "POST",
        &ins,
        Some(
            &json!({"Image": ISO_S, "TransferProtocolType": "HTTPS", "TransferMethod": "Stream"})
                .to_string(),
        ),
        &[],
    );
    assert_eq!(r.status, 204, "{r:?}");
    let r = sim.req("GET", slot, None, &[]);
    assert_eq!(r.body["TransferMethod"], "Stream");
    assert_eq!(r.body["Image"], ISO_S);
}

#[test]
fn faults_are_injected_as_specified() {
    need_tools!();
    let sys = "/redfish/v1/Systems/1";
    let sim = Sim::start(Opts::new("supermicro").fault("any=500"));
    assert_eq!(sim.req("GET", sys, None, &[]).status, 500);
    assert_eq!(reset(&sim, sys, "ForceRestart"), 500);
    assert_eq!(
        sim.state()["resets"],
        json!([]),
        "a faulted request changes nothing"
    );
    drop(sim);

    let sim = Sim::start(Opts::new("supermicro").fault("auth=401"));
    assert_eq!(sim.req("GET", sys, None, &[]).status, 401);
    drop(sim);

    let sim = Sim::start(
        Opts::new("supermicro")
            .fault("reset=409x1")
            .fault("boot=post400x1")
            .fault("insert=503:error_single_ext_infox1+1")
            .arg("--require-insert-param")
            .arg("TransferMethod"),
    );
    assert_eq!(reset(&sim, sys, "ForceRestart"), 409);
    assert_eq!(reset(&sim, sys, "ForceRestart"), 204);
    let r = sim.req("PATCH", sys, Some(&boot_once("UsbCd")), &[]);
    assert_eq!(
        (r.status, r.message_id().as_str()),
        (400, "iLO.2.14.UnableToModifyDuringSystemPOST")
    );
    assert_eq!(
        sim.req("PATCH", sys, Some(&boot_once("UsbCd")), &[]).status,
        200
    );
    let ins = "/redfish/v1/Managers/1/VirtualMedia/VirtualMedia2/Actions/VirtualMedia.InsertMedia";
    // First insert: passes the fault (+1) but lacks TransferMethod.
    let r = sim.req("POST", ins, Some(&insert_body(ISO)), &[]);
    assert_eq!(r.status, 400);
    assert!(
        r.body["error"]["@Message.ExtendedInfo"][0]["Message"]
            .as_str()
            .unwrap()
            .contains("TransferMethod")
    );
    // Second: the fault, with sushy's single-object ExtendedInfo.
    let with_method = json!({"Image": ISO, "TransferMethod": "Stream"}).to_string();
    let r = sim.req("POST", ins, Some(&with_method), &[]);
    assert_eq!(r.status, 503);
    assert!(r.body["error"]["@Message.ExtendedInfo"].is_object());
    assert_eq!(sim.req("POST", ins, Some(&with_method), &[]).status, 204);
    let st = sim.state();
    assert_eq!(st["resets"], json!(["ForceRestart"]));
    let faults = sim
        .log()
        .iter()
        .filter(|l| l["rule"].as_str().is_some_and(|r| r.starts_with("fault")))
        .count();
    assert_eq!(faults, 3);
}

/// A one-file HTTP server on 127.0.0.1 (a thread): `/node.iso` is `bytes`,
/// anything else 404. Returns its port.
fn serve_file(bytes: Vec<u8>) -> u16 {
    use std::io::{Read as _, Write as _};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let ok = req.starts_with(b"GET /node.iso ");
            let body: &[u8] = if ok { &bytes } else { b"" };
            let head = format!(
                "HTTP/1.1 {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                if ok { "200 OK" } else { "404 Not Found" },
                body.len()
            );
            let _ = s
                .write_all(head.as_bytes())
                .and_then(|()| s.write_all(body));
        }
    });
    port
}

#[test]
fn fetch_images_gets_the_image_before_accepting_the_insert() {
    need_tools!();
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let port = serve_file(bytes.clone());
    let sim = Sim::start(Opts::new("hpe").arg("--fetch-images"));
    let ins = "/redfish/v1/Managers/1/VirtualMedia/2/Actions/VirtualMedia.InsertMedia";
    let missing = format!("http://127.0.0.1:{port}/missing.iso");
    let r = sim.req("POST", ins, Some(&insert_body(&missing)), &[]);
    assert_eq!(r.status, 400);
    assert_eq!(r.message_id(), "Base.1.12.CouldNotEstablishConnection");
    // Not loopback: refused without a connection attempt.
    assert_eq!(
        sim.req(
            "POST",
            ins,
            Some(&insert_body("http://192.0.2.1/x.iso")),
            &[]
        )
        .status,
        400
    );
    let good = format!("http://127.0.0.1:{port}/node.iso");
    assert_eq!(
        sim.req("POST", ins, Some(&insert_body(&good)), &[]).status,
        200
    );
    let st = sim.state();
    let f = &st["fetches"];
    assert_eq!(f[0]["status"], 404, "{st}");
    assert!(
        f[1]["error"].as_str().unwrap().contains("not a loopback"),
        "{st}"
    );
    assert_eq!(f[2]["bytes"], 200_000, "{st}");
    let file = sim.dir.path().join("node.iso");
    std::fs::write(&file, &bytes).unwrap();
    let sum = common::run_ok("sha256sum", &[file.to_str().unwrap()]);
    assert_eq!(
        f[2]["sha256"],
        sum.split_whitespace().next().unwrap(),
        "{st}"
    );
    assert_eq!(
        st["slots"]["/redfish/v1/Managers/1/VirtualMedia/2"]["image"],
        good.as_str()
    );
}

/// `--strict` (issue #41): Basic refused but a session works and is
/// deleted; no `MediaTypes` (the CD is known from the ActionInfo); weak
/// ETags, If-Match required and only `*` matching; `TransferProtocolType`
/// required; a Boot PATCH without its mode refused.
#[test]
fn strict_switch_turns_every_schema_behaviour_on() {
    need_tools!();
    let sim = Sim::start(Opts::new("hpe").arg("--strict"));
    let system = "/redfish/v1/Systems/1";
    assert_eq!(
        sim.req("GET", system, None, &[]).status,
        401,
        "Basic refused"
    );
    let login = json!({"UserName": sim.user, "Password": sim.password}).to_string();
    let s = "/redfish/v1/SessionService/Sessions";
    assert_eq!(sim.curl("POST", s, Some("{}"), &[], None).status, 401);
    let r = sim.curl("POST", s, Some(&login), &[], None);
    assert_eq!(r.status, 201, "{r:?}");
    let token = format!("X-Auth-Token: {}", r.header("x-auth-token").unwrap());
    let session = r.header("location").unwrap().to_string();
    let get = |p: &str| sim.curl("GET", p, None, &[&token], None);
    let slot = get("/redfish/v1/Managers/1/VirtualMedia/2");
    assert_eq!(slot.status, 200);
    assert!(slot.body.get("MediaTypes").is_none(), "{:?}", slot.body);
    let info = slot.body["Actions"]["#VirtualMedia.InsertMedia"]["@Redfish.ActionInfo"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(get(&info).body["Parameters"].to_string().contains("\"CD\""));
    let tag = get(system).header("etag").unwrap().to_string();
    assert!(tag.starts_with("W/"), "{tag}");
    let patch = |h: &[&str], body: &str| {
        let mut hs = vec![token.as_str()];
        hs.extend_from_slice(h);
        sim.curl("PATCH", system, Some(body), &hs, None)
    };
    let full = boot_once("Cd");
    assert_eq!(patch(&[], &full).status, 428);
    assert_eq!(patch(&[&format!("If-Match: {tag}")], &full).status, 412);
    let no_mode = json!({"Boot": {"BootSourceOverrideEnabled": "Once",
                                  "BootSourceOverrideTarget": "Cd"}});
    let r = patch(&["If-Match: *"], &no_mode.to_string());
    assert_eq!(
        (r.status, r.message_id().ends_with("PropertyMissing")),
        (400, true)
    );
    assert_eq!(patch(&["If-Match: *"], &full).status, 200);
    let insert = "/redfish/v1/Managers/1/VirtualMedia/2/Actions/VirtualMedia.InsertMedia";
    let r = sim.curl("POST", insert, Some(&insert_body(ISO)), &[&token], None);
    assert_eq!(r.status, 400, "TransferProtocolType required");
    let with = json!({"Image": ISO, "TransferProtocolType": "HTTP"}).to_string();
    let r = sim.curl("POST", insert, Some(&with), &[&token], None);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        sim.curl("DELETE", &session, None, &[&token], None).status,
        204
    );
    assert_eq!(get(system).status, 401, "the session is gone");
    let st = sim.state();
    assert_eq!(
        st["sessions"],
        json!({"created": 1, "deleted": 1, "open": 0})
    );
    let logged = std::fs::read_to_string(&sim.log_path).unwrap();
    assert!(
        !logged.contains(&sim.password),
        "the log redacts the password"
    );
}
