//! The pure core of the Redfish driver: Redfish JSON → typed views, and the
//! plan of calls `up`, `down` and `eject` make from the current state. No
//! I/O here, so idempotency is a unit test: a state that already is the
//! goal plans no call.
//!
//! `up` (boot the node from `url`):
//! - media: eject when another image is inserted, then insert `url`;
//!   nothing when `url` is already inserted;
//! - off: boot override `Cd` (Once), then `On`;
//! - on with `url` already inserted: nothing (it booted, or is booting,
//!   from our image; re-arming the override would reinstall it at its
//!   next reboot);
//! - on without `url` inserted: insert, override `Cd` (Once), then
//!   `ForceRestart` (the running OS did not come from our image).
//!
//! `down`: `ForceOff` unless off, then eject whatever is inserted.
//! `eject`: eject, then boot override `Hdd` (Once) so the next boot is the
//! installed disk.

use serde_json::Value;

/// A system's power state as far as the plans care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    On,
    Off,
}

/// `Systems/<id>`: what the driver reads from it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SystemView {
    /// The system's canonical `@odata.id` (BMCs may redirect a name to it).
    pub odata_id: String,
    /// `PowerState` as the BMC wrote it (`On`, `Off`, `PoweringOn`, …).
    pub power_state: String,
    pub boot_target: String,
    pub boot_enabled: String,
    /// `Boot.BootSourceOverrideTarget@Redfish.AllowableValues`.
    pub boot_targets: Vec<String>,
    /// `@odata.etag` (sent as `If-Match` when a PATCH demands one).
    pub etag: Option<String>,
    /// `Actions.#ComputerSystem.Reset.target`.
    pub reset_target: Option<String>,
    /// `VirtualMedia.@odata.id` of the system.
    pub virtual_media: Option<String>,
    /// `Links.ManagedBy[].@odata.id`.
    pub managers: Vec<String>,
}

/// One virtual media device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MediaView {
    pub odata_id: String,
    pub media_types: Vec<String>,
    pub inserted: bool,
    /// The inserted image's URL (`None` when empty or absent).
    pub image: Option<String>,
    pub insert_target: Option<String>,
    pub eject_target: Option<String>,
}

fn text(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str().map(str::to_string)
}

/// The strings of a JSON array (none when absent or not an array).
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl SystemView {
    pub fn parse(v: &Value) -> SystemView {
        SystemView {
            odata_id: text(v, &["@odata.id"]).unwrap_or_default(),
            power_state: text(v, &["PowerState"]).unwrap_or_default(),
            boot_target: text(v, &["Boot", "BootSourceOverrideTarget"]).unwrap_or_default(),
            boot_enabled: text(v, &["Boot", "BootSourceOverrideEnabled"]).unwrap_or_default(),
            boot_targets: strings(
                v.get("Boot")
                    .and_then(|b| b.get("BootSourceOverrideTarget@Redfish.AllowableValues")),
            ),
            etag: text(v, &["@odata.etag"]),
            reset_target: text(v, &["Actions", "#ComputerSystem.Reset", "target"]),
            virtual_media: text(v, &["VirtualMedia", "@odata.id"]),
            managers: members_of(v.get("Links").and_then(|l| l.get("ManagedBy"))),
        }
    }

    /// `On` for `On`/`PoweringOn`, `Off` for `Off`/`PoweringOff`; anything
    /// else counts as on (so `down` powers it off and `up` does not start it twice).
    /// The override target for the virtual CD: `Cd`, or `UsbCd` when the
    /// BMC allows that and not `Cd` (most Supermicro boards).
    pub fn cd_target(&self) -> BootTarget {
        let allows = |t: &str| self.boot_targets.iter().any(|a| a == t);
        if !allows("Cd") && allows("UsbCd") {
            BootTarget::UsbCd
        } else {
            BootTarget::Cd
        }
    }

    pub fn power(&self) -> Power {
        match self.power_state.as_str() {
            "Off" | "PoweringOff" => Power::Off,
            _ => Power::On,
        }
    }
}

impl MediaView {
    pub fn parse(v: &Value) -> MediaView {
        let image = text(v, &["Image"]).filter(|s| !s.is_empty());
        MediaView {
            odata_id: text(v, &["@odata.id"]).unwrap_or_default(),
            media_types: strings(v.get("MediaTypes")),
            // Some BMCs omit `Inserted`; an image URL then means inserted.
            inserted: v
                .get("Inserted")
                .and_then(Value::as_bool)
                .unwrap_or(image.is_some()),
            image,
            insert_target: text(v, &["Actions", "#VirtualMedia.InsertMedia", "target"]),
            eject_target: text(v, &["Actions", "#VirtualMedia.EjectMedia", "target"]),
        }
    }

    /// A CD or DVD drive (what an ISO is inserted into).
    pub fn is_cd(&self) -> bool {
        self.media_types.iter().any(|t| t == "CD" || t == "DVD")
    }
}

/// The `@odata.id`s of a `Members` array (or any array of links).
pub fn members_of(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|m| text(m, &["@odata.id"])).collect())
        .unwrap_or_default()
}

/// The `Members` of a collection.
pub fn members(v: &Value) -> Vec<String> {
    members_of(v.get("Members"))
}

/// Does the system document `doc` answer to the id `id` (its `Id`,
/// `Name` or `UUID`)?
pub fn names_system(doc: &Value, id: &str) -> bool {
    ["Id", "Name", "UUID"]
        .iter()
        .any(|k| doc.get(k).and_then(Value::as_str) == Some(id))
}

/// The BMC's own words from a Redfish error body: `error.message` and each
/// `error.@Message.ExtendedInfo[].Message`, joined with "; ".
pub fn error_message(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let err = v.get("error")?;
    let mut parts: Vec<String> = Vec::new();
    if let Some(m) = err.get("message").and_then(Value::as_str) {
        parts.push(m.to_string());
    }
    for info in err
        .get("@Message.ExtendedInfo")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(m) = info.get("Message").and_then(Value::as_str)
            && !parts.iter().any(|p| p == m)
        {
            parts.push(m.to_string());
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// What a plan starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub power: Power,
    pub boot_target: String,
    /// What "boot from the virtual CD" is called on this BMC.
    pub cd_target: BootTarget,
    pub inserted: bool,
    pub image: Option<String>,
}

/// Boot override targets the driver sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootTarget {
    Cd,
    UsbCd,
    Hdd,
}

impl BootTarget {
    pub fn as_str(self) -> &'static str {
        match self {
            BootTarget::Cd => "Cd",
            BootTarget::UsbCd => "UsbCd",
            BootTarget::Hdd => "Hdd",
        }
    }
}

/// `ComputerSystem.Reset` types the driver sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    On,
    ForceOff,
    ForceRestart,
}

impl Reset {
    pub fn as_str(self) -> &'static str {
        match self {
            Reset::On => "On",
            Reset::ForceOff => "ForceOff",
            Reset::ForceRestart => "ForceRestart",
        }
    }
}

/// One Redfish call of a plan, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `VirtualMedia.EjectMedia`.
    Eject,
    /// `VirtualMedia.InsertMedia` with this image URL.
    Insert(String),
    /// PATCH `Boot` {target, `Once`}.
    Boot(BootTarget),
    /// `ComputerSystem.Reset`.
    Reset(Reset),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Eject => write!(f, "ejected the virtual media"),
            Step::Insert(u) => write!(f, "inserted {u}"),
            Step::Boot(t) => write!(f, "set the next boot to {} (once)", t.as_str()),
            Step::Reset(Reset::On) => write!(f, "powered on"),
            Step::Reset(Reset::ForceOff) => write!(f, "powered off"),
            Step::Reset(Reset::ForceRestart) => write!(f, "restarted"),
        }
    }
}

fn ours(s: &State, url: &str) -> bool {
    s.inserted && s.image.as_deref() == Some(url)
}

/// The InsertMedia bodies to try, in order: the image alone (what the
/// spec requires; `Inserted`/`WriteProtected` are left to their default
/// `true`, some BMCs reject them), then with `TransferProtocolType`, then
/// also `TransferMethod: Stream` (as sushy/ironic retry for picky BMCs).
pub fn insert_bodies(url: &str) -> [Value; 3] {
    let proto = if url.starts_with("https:") {
        "HTTPS"
    } else {
        "HTTP"
    };
    [
        serde_json::json!({ "Image": url }),
        serde_json::json!({ "Image": url, "TransferProtocolType": proto }),
        serde_json::json!({ "Image": url, "TransferProtocolType": proto, "TransferMethod": "Stream" }),
    ]
}

/// `bmc up`: boot from `url` (see the module docs).
pub fn plan_up(s: &State, url: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let have = ours(s, url);
    if have && s.power == Power::On {
        return steps;
    }
    if !have {
        if s.inserted {
            steps.push(Step::Eject);
        }
        steps.push(Step::Insert(url.to_string()));
    }
    if !have || s.boot_target != s.cd_target.as_str() {
        steps.push(Step::Boot(s.cd_target));
    }
    steps.push(Step::Reset(match s.power {
        Power::Off => Reset::On,
        Power::On => Reset::ForceRestart,
    }));
    steps
}

/// `bmc down`: power off, then eject.
pub fn plan_down(s: &State) -> Vec<Step> {
    let mut steps = Vec::new();
    if s.power == Power::On {
        steps.push(Step::Reset(Reset::ForceOff));
    }
    if s.inserted {
        steps.push(Step::Eject);
    }
    steps
}

/// `bmc eject`: eject, next boot from disk.
pub fn plan_eject(s: &State) -> Vec<Step> {
    let mut steps = Vec::new();
    if s.inserted {
        steps.push(Step::Eject);
    }
    if s.boot_target != BootTarget::Hdd.as_str() {
        steps.push(Step::Boot(BootTarget::Hdd));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const URL: &str = "http://10.0.0.1:8080/boot/master-0.iso";

    fn st(power: Power, target: &str, image: Option<&str>) -> State {
        State {
            power,
            boot_target: target.into(),
            cd_target: BootTarget::Cd,
            inserted: image.is_some(),
            image: image.map(str::to_string),
        }
    }

    #[test]
    fn up_from_off_and_empty() {
        assert_eq!(
            plan_up(&st(Power::Off, "Hdd", None), URL),
            vec![
                Step::Insert(URL.into()),
                Step::Boot(BootTarget::Cd),
                Step::Reset(Reset::On)
            ]
        );
    }

    #[test]
    fn up_is_idempotent() {
        // The state `up` leaves plans nothing, whatever the override became.
        assert!(plan_up(&st(Power::On, "Cd", Some(URL)), URL).is_empty());
        assert!(plan_up(&st(Power::On, "None", Some(URL)), URL).is_empty());
    }

    #[test]
    fn up_replaces_another_image_and_restarts_a_running_system() {
        assert_eq!(
            plan_up(&st(Power::On, "Hdd", Some("http://x/other.iso")), URL),
            vec![
                Step::Eject,
                Step::Insert(URL.into()),
                Step::Boot(BootTarget::Cd),
                Step::Reset(Reset::ForceRestart)
            ]
        );
    }

    #[test]
    fn up_with_our_image_but_off_rearms_only_what_is_missing() {
        assert_eq!(
            plan_up(&st(Power::Off, "Cd", Some(URL)), URL),
            vec![Step::Reset(Reset::On)]
        );
        assert_eq!(
            plan_up(&st(Power::Off, "Hdd", Some(URL)), URL),
            vec![Step::Boot(BootTarget::Cd), Step::Reset(Reset::On)]
        );
    }

    #[test]
    fn supermicro_boots_usbcd() {
        let sys = SystemView::parse(&json!({"@odata.etag": "W/\"1\"", "Boot": {
            "BootSourceOverrideTarget@Redfish.AllowableValues": ["Pxe", "Hdd", "UsbCd"]}}));
        assert_eq!(sys.cd_target(), BootTarget::UsbCd);
        assert_eq!(sys.etag.as_deref(), Some("W/\"1\""));
        let mut s = st(Power::Off, "UsbCd", Some(URL));
        s.cd_target = BootTarget::UsbCd;
        assert_eq!(plan_up(&s, URL), vec![Step::Reset(Reset::On)]);
        s.boot_target = "Hdd".into();
        assert_eq!(
            plan_up(&s, URL),
            vec![Step::Boot(BootTarget::UsbCd), Step::Reset(Reset::On)]
        );
    }

    #[test]
    fn down_and_eject() {
        assert_eq!(
            plan_down(&st(Power::On, "Cd", Some(URL))),
            vec![Step::Reset(Reset::ForceOff), Step::Eject]
        );
        assert!(plan_down(&st(Power::Off, "Cd", None)).is_empty());
        assert_eq!(
            plan_eject(&st(Power::On, "Cd", Some(URL))),
            vec![Step::Eject, Step::Boot(BootTarget::Hdd)]
        );
        assert!(plan_eject(&st(Power::On, "Hdd", None)).is_empty());
    }

    #[test]
    fn parses_sushy_documents() {
        let sys = SystemView::parse(&json!({
            "@odata.id": "/redfish/v1/Systems/abc",
            "PowerState": "PoweringOn",
            "Boot": {"BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideTarget": "Hdd"},
            "Actions": {"#ComputerSystem.Reset": {"target": "/redfish/v1/Systems/abc/Actions/ComputerSystem.Reset"}},
            "VirtualMedia": {"@odata.id": "/redfish/v1/Systems/abc/VirtualMedia"},
            "Links": {"ManagedBy": [{"@odata.id": "/redfish/v1/Managers/abc"}]}
        }));
        assert_eq!(sys.power(), Power::On);
        assert_eq!(sys.boot_target, "Hdd");
        assert_eq!(sys.cd_target(), BootTarget::Cd);
        assert_eq!(sys.managers, vec!["/redfish/v1/Managers/abc".to_string()]);
        assert_eq!(
            sys.reset_target.as_deref(),
            Some("/redfish/v1/Systems/abc/Actions/ComputerSystem.Reset")
        );
        let m = MediaView::parse(&json!({
            "@odata.id": "/redfish/v1/Systems/abc/VirtualMedia/Cd",
            "MediaTypes": ["CD", "DVD"], "Image": "", "Inserted": false,
            "Actions": {"#VirtualMedia.InsertMedia": {"target": "/i"}, "#VirtualMedia.EjectMedia": {"target": "/e"}}
        }));
        assert!(m.is_cd() && !m.inserted && m.image.is_none());
        assert_eq!(
            (m.insert_target.as_deref(), m.eject_target.as_deref()),
            (Some("/i"), Some("/e"))
        );
        let floppy =
            MediaView::parse(&json!({"MediaTypes": ["Floppy", "USBStick"], "Image": "http://x"}));
        assert!(!floppy.is_cd() && floppy.inserted);
    }

    #[test]
    fn a_system_answers_to_its_id_name_or_uuid() {
        let d = json!({"Id": "d3ae", "Name": "node-1", "UUID": "d3ae-uuid"});
        assert!(
            names_system(&d, "node-1") && names_system(&d, "d3ae") && names_system(&d, "d3ae-uuid")
        );
        assert!(!names_system(&d, "node-2"));
    }

    #[test]
    fn error_messages() {
        let body = br#"{"error":{"code":"Base.1.0.GeneralError","message":"Incorrect username or password",
            "@Message.ExtendedInfo":[{"MessageId":"Base.1.0.GeneralError"},{"Message":"Try again"}]}}"#;
        assert_eq!(
            error_message(body).as_deref(),
            Some("Incorrect username or password; Try again")
        );
        assert_eq!(error_message(b"<html>"), None);
        assert_eq!(error_message(br#"{"error":{}}"#), None);
    }
}
