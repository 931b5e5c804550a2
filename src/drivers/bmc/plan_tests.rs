//! The planning core against the recorded trees of real BMCs
//! (tests/fixtures/redfish/<vendor>, DMTF Mockup-Creator captures) and
//! real error bodies (sushy's samples), one test per vendor rule.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;
use crate::drivers::bmc::redfish::{MediaView, RedfishError, SystemView, action_params};

const URL: &str = "http://10.0.0.1:8080/boot/master-0.iso";
const HTTPS: &str = "https://10.0.0.1:8443/boot/master-0.iso";

/// The recorded document at `path` of `vendor`'s tree.
fn doc(vendor: &str, path: &str) -> Value {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/redfish")
        .join(vendor)
        .join(path.trim_start_matches('/'))
        .join("index.json");
    let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()))
}

/// The slots of a recorded VirtualMedia collection (insertable paths only,
/// as the driver reads them).
fn slots(vendor: &str, collection: &str) -> Vec<MediaView> {
    crate::drivers::bmc::redfish::members(&doc(vendor, collection))
        .into_iter()
        .filter(|m| insertable(m))
        .map(|m| MediaView::parse(&doc(vendor, &m)))
        .collect()
}

fn ours() -> Vec<String> {
    vec![URL.to_string(), HTTPS.to_string()]
}

#[test]
fn dell_idrac9_system_slot_cd_action_and_inline_reset_types() {
    let sys = SystemView::parse(&doc("dell", "/redfish/v1/Systems/System.Embedded.1"));
    assert_eq!(cd_target(&sys), BootTarget::Cd, "no UsbCd listed");
    assert_eq!(sys.boot_mode.as_deref(), Some("UEFI"));
    assert_eq!(
        boot_body(cd_target(&sys), sys.boot_mode.as_deref()),
        json!({"Boot": {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Cd",
                        "BootSourceOverrideMode": "UEFI"}})
    );
    assert_eq!(
        reset_type(Power::On, &sys.reset_types).as_deref(),
        Ok("ForceRestart")
    );
    let v = sys.virtual_media.clone().unwrap_or_default();
    let s = slots("dell", &v);
    let slot = choose_slot(&s, &ours()).unwrap_or_else(|| panic!("{s:?}"));
    assert_eq!(
        slot.odata_id,
        "/redfish/v1/Systems/System.Embedded.1/VirtualMedia/1"
    );
    assert!(slot.insert_target.is_some() && slot.eject_target.is_some());
    // No ActionInfo: the image alone first, then the transfer fields.
    let b = insert_bodies(URL, None);
    assert_eq!(b[0], json!({"Image": URL}));
    assert_eq!(b[1]["TransferProtocolType"], "HTTP");
    assert_eq!(b[2]["TransferMethod"], "Stream");
    assert_eq!(b.len(), 3);
    // iDRAC's SYS446 after an eject is a 500: transient.
    assert_eq!(classify(500, None), Refusal::Transient);
}

#[test]
fn hpe_ilo5_manager_slot_2_is_the_cd_and_post_400_is_transient() {
    let sys = SystemView::parse(&doc("hpe", "/redfish/v1/Systems/1"));
    assert_eq!(
        sys.virtual_media, None,
        "iLO: virtual media under the manager"
    );
    assert_eq!(sys.managers, vec!["/redfish/v1/Managers/1".to_string()]);
    let mgr = SystemView::parse(&doc("hpe", "/redfish/v1/Managers/1"));
    let v = mgr.virtual_media.unwrap_or_default();
    let s = slots("hpe", &v);
    assert_eq!(s.len(), 2);
    assert!(!s[0].is_cd(), "slot 1 is floppy/USB");
    let slot = choose_slot(&s, &ours()).unwrap_or_else(|| panic!("{s:?}"));
    assert_eq!(slot.odata_id, "/redfish/v1/Managers/1/VirtualMedia/2");
    assert_eq!(cd_target(&sys), BootTarget::Cd);
    // The mode goes along unchanged (iLO refuses a mode change).
    assert_eq!(
        boot_body(BootTarget::Cd, sys.boot_mode.as_deref())["Boot"]["BootSourceOverrideMode"],
        "UEFI"
    );
    let post = RedfishError::parse(
        br#"{"error":{"code":"iLO.0.10.ExtendedInfo","message":"See @Message.ExtendedInfo for more information.",
        "@Message.ExtendedInfo":[{"MessageId":"iLO.2.14.UnableToModifyDuringSystemPOST"}]}}"#,
    );
    assert_eq!(classify(400, post.as_ref()), Refusal::Transient);
    assert_eq!(
        reset_type(Power::On, &sys.reset_types).as_deref(),
        Ok("ForceRestart")
    );
    assert_eq!(
        reset_type(Power::Off, &sys.reset_types).as_deref(),
        Ok("On")
    );
}

#[test]
fn lenovo_xcc_patch_style_slots_skip_rdoc_and_remote() {
    let sys = SystemView::parse(&doc("lenovo", "/redfish/v1/Systems/1"));
    let v = sys.virtual_media.clone().unwrap_or_default();
    let all = crate::drivers::bmc::redfish::members(&doc("lenovo", &v));
    assert_eq!(all.len(), 10);
    let s = slots("lenovo", &v);
    assert_eq!(s.len(), 4, "RDOC* and Remote* are not read");
    assert!(!insertable("/redfish/v1/Systems/1/VirtualMedia/RDOC1"));
    assert!(!insertable("/redfish/v1/Systems/1/VirtualMedia/Remote2"));
    let slot = choose_slot(&s, &ours()).unwrap_or_else(|| panic!("{s:?}"));
    assert_eq!(slot.odata_id, "/redfish/v1/Systems/1/VirtualMedia/EXT1");
    assert!(slot.insert_target.is_none() && slot.eject_target.is_none());
    assert!(slot.etag.is_some(), "If-Match comes from the slot's ETag");
    assert_eq!(
        patch_insert_body(URL),
        json!({"Image": URL, "Inserted": true, "WriteProtected": true})
    );
    assert_eq!(
        patch_eject_body(),
        json!({"Image": null, "Inserted": false})
    );
    assert_eq!(
        sys.settings_object.as_deref(),
        Some("/redfish/v1/Systems/1/Pending")
    );
    assert!(settings_takes_boot(
        &json!({"Boot": {"BootSourceOverrideTarget": "None"}})
    ));
    assert!(!settings_takes_boot(&json!({"AssetTag": ""})));
    assert_eq!(classify(412, None), Refusal::Stale);
    assert_eq!(classify(428, None), Refusal::NeedsEtag);
    // A slot of ours, whatever its position, is the one used.
    let mut s2 = s.clone();
    s2[2].inserted = true;
    s2[2].image = Some(URL.into());
    s2[0].inserted = true;
    s2[0].image = Some("http://old/x.iso".into());
    assert_eq!(
        choose_slot(&s2, &ours()).map(|m| m.odata_id.as_str()),
        Some("/redfish/v1/Systems/1/VirtualMedia/EXT3")
    );
}

#[test]
fn supermicro_x13_usbcd_actioninfo_parameters_and_patch_eject() {
    let sys = SystemView::parse(&doc("supermicro", "/redfish/v1/Systems/1"));
    assert!(
        sys.boot_targets.iter().any(|t| t == "Cd"),
        "both are listed"
    );
    assert_eq!(cd_target(&sys), BootTarget::UsbCd);
    assert_eq!(
        boot_body(cd_target(&sys), sys.boot_mode.as_deref()),
        json!({"Boot": {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "UsbCd",
                        "BootSourceOverrideMode": "UEFI"}}),
        "one PATCH with the mode (Supermicro reverts omitted fields)"
    );
    // The reset types are in the ActionInfo only.
    assert!(sys.reset_types.is_empty());
    let info = doc("supermicro", sys.reset_info.as_deref().unwrap_or(""));
    let types = crate::drivers::bmc::redfish::parameter_values(&info, "ResetType");
    assert_eq!(reset_type(Power::On, &types).as_deref(), Ok("ForceRestart"));
    let v = sys.virtual_media.clone().unwrap_or_default();
    let s = slots("supermicro", &v);
    let slot = choose_slot(&s, &ours()).unwrap_or_else(|| panic!("{s:?}"));
    assert_eq!(
        slot.odata_id,
        "/redfish/v1/Managers/1/VirtualMedia/VirtualMedia1"
    );
    assert!(slot.eject_target.is_none(), "eject is a PATCH here");
    let params = action_params(&doc(
        "supermicro",
        slot.insert_info.as_deref().unwrap_or(""),
    ));
    let b = insert_bodies(URL, Some(&params));
    assert_eq!(
        b[0],
        json!({"Image": URL, "Inserted": true, "WriteProtected": true,
               "TransferProtocolType": "HTTP", "TransferMethod": "Stream"})
    );
    assert_eq!(b[1], json!({"Image": URL}), "then the plain sequence");
    assert_eq!(b.len(), 4);
}

#[test]
fn openbmc_refuses_http_urls_by_format() {
    let e = RedfishError::parse(
        br#"{"error":{"code":"Base.1.13.0.ResourceAtUriInUnknownFormat","message":"The resource at the URI 'http://x/a.iso' is in a format not recognized by the service.",
        "@Message.ExtendedInfo":[{"MessageId":"Base.1.13.0.ResourceAtUriInUnknownFormat","MessageArgs":["http://x/a.iso"]}]}}"#,
    );
    assert_eq!(classify(400, e.as_ref()), Refusal::Scheme);
    let e = RedfishError::parse(
        br#"{"error":{"@Message.ExtendedInfo":[{"MessageId":"Base.1.13.0.PropertyValueNotInList","MessageArgs":["HTTP","TransferProtocolType"]}]}}"#,
    );
    assert_eq!(classify(400, e.as_ref()), Refusal::Scheme);
    assert_eq!(
        insert_bodies(HTTPS, None)[1]["TransferProtocolType"],
        "HTTPS"
    );
    assert_eq!(
        insert_bodies(HTTPS, None)[2]["TransferMethod"],
        "Stream",
        "bmcweb streams"
    );
}

#[test]
fn error_classes() {
    let sample = |f: &str| {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/redfish/sushy-errors")
            .join(f);
        RedfishError::parse(&std::fs::read(p).unwrap_or_default())
    };
    let missing = sample("transfer_proto_required_error.json");
    assert_eq!(classify(400, missing.as_ref()), Refusal::Body);
    assert_eq!(classify(415, None), Refusal::Body);
    assert_eq!(classify(401, None), Refusal::Auth);
    assert_eq!(classify(403, missing.as_ref()), Refusal::Auth);
    assert_eq!(classify(409, None), Refusal::Transient);
    assert_eq!(classify(503, None), Refusal::Transient);
    assert_eq!(classify(501, None), Refusal::Fatal);
    assert_eq!(classify(404, None), Refusal::Fatal);
    let general = sample("error.json");
    assert_eq!(classify(400, general.as_ref()), Refusal::Body);
}

#[test]
fn reset_types_follow_what_is_allowed() {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        reset_type(
            Power::On,
            &v(&["On", "ForceOff", "PowerCycle", "GracefulRestart"])
        )
        .as_deref(),
        Ok("PowerCycle")
    );
    assert_eq!(
        reset_type(Power::On, &v(&["On", "GracefulRestart"])).as_deref(),
        Ok("GracefulRestart")
    );
    assert!(reset_type(Power::On, &v(&["On", "ForceOff"])).is_err());
    assert_eq!(
        reset_type(Power::Off, &v(&["ForceOn"])).as_deref(),
        Ok("ForceOn")
    );
    assert_eq!(reset_type(Power::On, &[]).as_deref(), Ok("ForceRestart"));
    assert_eq!(
        off_type(&v(&["On", "GracefulShutdown"])),
        "GracefulShutdown"
    );
}

fn obs(power: Power, target: &str, enabled: &str, image: Option<&str>) -> Observed {
    Observed {
        power,
        boot_target: target.into(),
        boot_enabled: enabled.into(),
        cd_target: BootTarget::Cd,
        inserted: image.is_some(),
        image: image.map(str::to_string),
    }
}

fn journal(boot: bool, reset: bool) -> Journal {
    Journal {
        url: URL.into(),
        inserted: Some(URL.into()),
        boot,
        reset,
    }
}

fn up(o: &Observed, j: Option<&Journal>) -> Vec<Step> {
    plan_up(o, j, &ours(), &[]).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn up_from_off_and_empty() {
    assert_eq!(
        up(&obs(Power::Off, "None", "Disabled", None), None),
        vec![
            Step::Insert,
            Step::Boot(BootTarget::Cd),
            Step::Reset("On".into())
        ]
    );
}

#[test]
fn up_on_a_running_host_over_a_foreign_image() {
    assert_eq!(
        up(
            &obs(Power::On, "Hdd", "Once", Some("http://x/other.iso")),
            None
        ),
        vec![
            Step::Eject,
            Step::Insert,
            Step::Boot(BootTarget::Cd),
            Step::Reset("ForceRestart".into())
        ]
    );
    // Also when an earlier boot of ours was finished: a new boot.
    assert_eq!(
        up(
            &obs(Power::On, "None", "Disabled", Some("http://x/other.iso")),
            Some(&journal(true, true))
        )
        .len(),
        4
    );
}

#[test]
fn a_finished_up_plans_nothing() {
    // Whatever the override became after the boot consumed it.
    for (t, e) in [("Cd", "Once"), ("None", "Disabled"), ("Hdd", "Continuous")] {
        assert!(up(&obs(Power::On, t, e, Some(URL)), Some(&journal(true, true))).is_empty());
        assert!(
            up(
                &obs(Power::Off, t, e, Some(URL)),
                Some(&journal(true, true))
            )
            .is_empty()
        );
    }
    // No journal (older state): running from our image counts as done.
    assert!(up(&obs(Power::On, "Cd", "Once", Some(HTTPS)), None).is_empty());
}

#[test]
fn a_part_done_up_is_finished_with_one_reset() {
    // Inserted, the Boot PATCH failed (iLO in POST): boot + reset, no
    // second insert.
    assert_eq!(
        up(
            &obs(Power::On, "None", "Disabled", Some(URL)),
            Some(&journal(false, false))
        ),
        vec![
            Step::Boot(BootTarget::Cd),
            Step::Reset("ForceRestart".into())
        ]
    );
    // Override set, the reset failed: the reset only.
    assert_eq!(
        up(
            &obs(Power::On, "Cd", "Once", Some(URL)),
            Some(&journal(true, false))
        ),
        vec![Step::Reset("ForceRestart".into())]
    );
    // Journal says the override was set but the BMC lost it and the
    // image: everything again, one reset.
    assert_eq!(
        up(
            &obs(Power::On, "None", "Disabled", None),
            Some(&journal(true, false))
        ),
        vec![
            Step::Insert,
            Step::Boot(BootTarget::Cd),
            Step::Reset("ForceRestart".into())
        ]
    );
}

#[test]
fn up_with_our_image_but_off_rearms_only_what_is_missing() {
    assert_eq!(
        up(&obs(Power::Off, "Cd", "Once", Some(URL)), None),
        vec![Step::Reset("On".into())]
    );
    assert_eq!(
        up(&obs(Power::Off, "Hdd", "Once", Some(URL)), None),
        vec![Step::Boot(BootTarget::Cd), Step::Reset("On".into())]
    );
    let mut o = obs(Power::Off, "UsbCd", "Once", Some(URL));
    o.cd_target = BootTarget::UsbCd;
    assert_eq!(up(&o, None), vec![Step::Reset("On".into())]);
}

#[test]
fn down_and_eject() {
    assert_eq!(
        plan_down(&obs(Power::On, "Cd", "Once", Some(URL)), &[]),
        vec![Step::Reset("ForceOff".into()), Step::Eject]
    );
    assert!(plan_down(&obs(Power::Off, "Cd", "Once", None), &[]).is_empty());
    assert_eq!(
        plan_eject(&obs(Power::On, "Cd", "Once", Some(URL))),
        vec![Step::Eject, Step::Boot(BootTarget::Hdd)]
    );
    // Hdd but not Once is set again.
    assert_eq!(
        plan_eject(&obs(Power::On, "Hdd", "Continuous", None)),
        vec![Step::Boot(BootTarget::Hdd)]
    );
    assert!(plan_eject(&obs(Power::On, "Hdd", "Once", None)).is_empty());
}

#[test]
fn step_lines() {
    assert_eq!(Step::Insert.done(URL), format!("inserted {URL}"));
    assert_eq!(Step::Reset("On".into()).done(URL), "powered on");
    assert_eq!(
        Step::Reset("PowerCycle".into()).done(URL),
        "restarted (PowerCycle)"
    );
    assert_eq!(
        Step::Boot(BootTarget::UsbCd).done(URL),
        "set the next boot to UsbCd (once)"
    );
}
