//! The pure planning core of the Redfish driver: every decision `bmc
//! up|down|eject` makes from the Redfish JSON a BMC returned, with no I/O
//! (the vendor rules are unit tests against recorded trees).
//!
//! - **Slot**: a CD/DVD virtual media slot ([`MediaView::is_cd`]: its
//!   `MediaTypes`, else its id/name or its InsertMedia ActionInfo; HPE's
//!   slot 1 is floppy/USB), never Lenovo's `RDOC*`/`Remote*` (they take no
//!   URL); the one holding our image, else the first (its foreign image is
//!   ejected first).
//! - **Insert**: the `InsertMedia` action when the slot has one: with the
//!   parameters its ActionInfo lists ([`insert_body`]), plus what a 400
//!   names as missing ([`add_missing`]), then the image alone, then with
//!   `TransferProtocolType` from the URL's scheme, then with
//!   `TransferMethod: Stream` (sushy's order); without the action, a PATCH
//!   of the slot (`Image`, `Inserted`, `WriteProtected`, `If-Match`).
//!   Eject the same way (`{}` to the action: iLO answers 415 to an empty
//!   body; else PATCH `Image: null, Inserted: false`).
//! - **Boot**: `UsbCd` when the system lists it (Supermicro's virtual
//!   media; its `Cd` is the physical drive), else `Cd`; one PATCH with
//!   `Once`, the target and the mode ([`boot_mode`]: the current one, else
//!   from its `AllowableValues`), checked against the allowed values
//!   ([`check_boot`]) (Supermicro reverts omitted fields; iLO refuses a
//!   mode change).
//! - **Reset**: `On` when off; when on `ForceRestart`, else the first
//!   allowed of `PowerCycle`, `GracefulRestart`.
//! - **Errors**: 5xx (not 501/505), 409 and a 400 whose message id says
//!   the host is in POST are transient (retried with back-off); a refusal
//!   of the image URL's scheme or format lets `media: auto` try HTTPS.
//! - **Convergence**: [`Journal`] (the steps of the current boot done)
//!   with the observed state decides `up`: a finished boot whose image is
//!   still in the slot plans nothing; a part-done one plans only the rest.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::redfish::{ActionParam, MediaView, Power, RedfishError, SystemView};

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

/// The override target of the virtual CD: `UsbCd` when listed, else `Cd`.
pub fn cd_target(sys: &SystemView) -> BootTarget {
    if sys.boot_targets.iter().any(|t| t == "UsbCd") {
        BootTarget::UsbCd
    } else {
        BootTarget::Cd
    }
}

/// The Boot PATCH: `Once`, the target and the mode, all three together
/// (some firmware refuses a PATCH that omits one, some reverts what is
/// omitted); no mode when the BMC shows none and lists none.
pub fn boot_body(target: BootTarget, mode: Option<&str>) -> Value {
    let mut boot = json!({
        "BootSourceOverrideEnabled": "Once",
        "BootSourceOverrideTarget": target.as_str(),
    });
    if let Some(m) = mode {
        boot["BootSourceOverrideMode"] = json!(m);
    }
    json!({ "Boot": boot })
}

/// The mode a Boot PATCH carries: the system's current one (never changed:
/// iLO refuses a change); else, from `BootSourceOverrideMode@Redfish.
/// AllowableValues`, `UEFI` when listed, else the first; else none.
pub fn boot_mode(sys: &SystemView) -> Option<String> {
    if let Some(m) = &sys.boot_mode {
        return Some(m.clone());
    }
    let m = &sys.boot_modes;
    m.iter()
        .find(|v| *v == "UEFI")
        .or_else(|| m.first())
        .cloned()
}

/// Check a Boot PATCH against the system's `@Redfish.AllowableValues`:
/// `Once` and the target must be allowed where the BMC lists them (a
/// `Continuous` override would boot the ISO again at every restart).
pub fn check_boot(sys: &SystemView, target: BootTarget) -> Result<(), Unsupported> {
    let listed = |vals: &[String], v: &str| vals.is_empty() || vals.iter().any(|a| a == v);
    if !listed(&sys.boot_enabled_values, "Once") {
        return Err(Unsupported::OneTimeBoot {
            allowed: sys.boot_enabled_values.clone(),
        });
    }
    if !listed(&sys.boot_targets, target.as_str()) {
        return Err(Unsupported::BootTarget {
            target,
            allowed: sys.boot_targets.clone(),
        });
    }
    Ok(())
}

/// What the BMC does not offer that a step needs (the driver's sentence
/// names the node before it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error(
        "the BMC does not allow a one-time boot override (BootSourceOverrideEnabled allows {})",
        .allowed.join(", ")
    )]
    OneTimeBoot { allowed: Vec<String> },
    #[error(
        "the BMC does not offer the boot target {} (BootSourceOverrideTarget allows {})",
        .target.as_str(),
        .allowed.join(", ")
    )]
    BootTarget {
        target: BootTarget,
        allowed: Vec<String>,
    },
    #[error(
        "no {} reset type among the allowed {}",
        reset_kind(.power),
        .allowed.join(", ")
    )]
    ResetType { power: Power, allowed: Vec<String> },
    /// The BMC refused every InsertMedia body without a refusal to report.
    #[error("no InsertMedia body left")]
    InsertBodies,
    /// Nothing to insert: the command has no image URL.
    #[error("no image URL to insert")]
    NoImageUrl,
}

/// What a reset of a system in `power` is called in an error.
fn reset_kind(power: &Power) -> &'static str {
    if *power == Power::Off {
        "power-on"
    } else {
        "restart"
    }
}

/// Does a settings object (`@Redfish.Settings`) take the Boot override?
/// Only when it lists the property (sushy's rule: else the system does).
pub fn settings_takes_boot(doc: &Value) -> bool {
    doc.get("Boot")
        .is_some_and(|b| b.get("BootSourceOverrideTarget").is_some())
}

/// Restart types in order of preference for a running system.
const RESTARTS: [&str; 3] = ["ForceRestart", "PowerCycle", "GracefulRestart"];

/// The reset type for `power` among `allowed` (empty: not listed, the
/// standard types are assumed).
pub fn reset_type(power: Power, allowed: &[String]) -> Result<String, Unsupported> {
    let ok = |t: &str| allowed.is_empty() || allowed.iter().any(|a| a == t);
    let pick = match power {
        Power::Off => ["On", "ForceOn"].into_iter().find(|t| ok(t)),
        Power::On => RESTARTS.into_iter().find(|t| ok(t)),
    };
    pick.map(str::to_string)
        .ok_or_else(|| Unsupported::ResetType {
            power,
            allowed: allowed.to_vec(),
        })
}

/// The power-off type for `down`.
pub fn off_type(allowed: &[String]) -> String {
    let ok = |t: &str| allowed.is_empty() || allowed.iter().any(|a| a == t);
    if ok("ForceOff") {
        "ForceOff"
    } else {
        "GracefulShutdown"
    }
    .to_string()
}

/// Can a URL be inserted into this slot (by its path)? Lenovo's `RDOC*`
/// (uploaded images) and `Remote*` (the remote console's) cannot.
pub fn insertable(path: &str) -> bool {
    let id = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    !(id.starts_with("RDOC") || id.starts_with("Remote"))
}

/// The slot to use among `slots`: CD-capable and insertable; the one
/// holding one of `ours`, else the first (a foreign image in it is
/// ejected: with two CD slots, as on iDRAC, an image left in the first
/// would be the one the host boots).
pub fn choose_slot<'a>(slots: &'a [MediaView], ours: &[String]) -> Option<&'a MediaView> {
    let mut cds = slots
        .iter()
        .filter(|s| s.is_cd() && insertable(&s.odata_id));
    let first = cds.clone().next();
    cds.find(|s| holds(s, ours)).or(first)
}

/// Does `slot` hold one of `ours`?
pub fn holds(slot: &MediaView, ours: &[String]) -> bool {
    slot.inserted && slot.image.as_ref().is_some_and(|i| ours.contains(i))
}

/// `TransferProtocolType` for a URL's scheme.
pub fn protocol_of(url: &str) -> String {
    url.split_once("://")
        .map(|(s, _)| s.to_ascii_uppercase())
        .unwrap_or_else(|| "HTTP".into())
}

/// The InsertMedia body an ActionInfo's parameters ask for: the image and
/// each listed parameter the driver has a value for (`Inserted` and
/// `WriteProtected` true, `TransferProtocolType` from the URL's scheme,
/// `TransferMethod: Stream`); `UserName`/`Password` (empty: the
/// appliance's ISO needs none) and `MediaType` (`CD`) only where the
/// ActionInfo marks them `Required`.
pub fn insert_body(url: &str, params: &[ActionParam]) -> Value {
    let mut b = json!({ "Image": url });
    for p in params {
        let n = p.name.as_str();
        match n {
            "Inserted" | "WriteProtected" => b[n] = json!(true),
            "TransferProtocolType" => b[n] = json!(protocol_of(url)),
            "TransferMethod" => b[n] = json!("Stream"),
            "UserName" | "Password" if p.required => b[n] = json!(""),
            "MediaType" if p.required => {
                let t = ["CD", "DVD"]
                    .into_iter()
                    .find(|t| p.values.is_empty() || p.values.iter().any(|v| v == t));
                b[n] = json!(t.unwrap_or("CD"));
            }
            _ => {}
        }
    }
    b
}

/// Insert parameters a refusal may name as missing, and their values.
const SUPPLIABLE: [&str; 4] = [
    "TransferProtocolType",
    "TransferMethod",
    "UserName",
    "Password",
];

/// Add to `body` the parameters a 400 names as missing (its message id
/// `ActionParameterMissing`/`PropertyMissing`, or a message saying
/// "required"/"missing") that the driver can supply; their names (none:
/// the refusal is not about a missing parameter the driver knows).
pub fn add_missing(body: &mut Value, url: &str, e: &RedfishError) -> Vec<&'static str> {
    let msg = e.message.as_deref().unwrap_or("").to_ascii_lowercase();
    let says_missing = e.has_id("ActionParameterMissing")
        || e.has_id("PropertyMissing")
        || msg.contains("requir")
        || msg.contains("missing");
    if !says_missing {
        return Vec::new();
    }
    let mut added = Vec::new();
    for n in SUPPLIABLE {
        if body.get(n).is_none() && e.mentions(n) {
            body[n] = match n {
                "TransferProtocolType" => json!(protocol_of(url)),
                "TransferMethod" => json!("Stream"),
                _ => json!(""),
            };
            added.push(n);
        }
    }
    added
}

/// The InsertMedia bodies tried blindly after a refusal that names nothing
/// (sushy's order): the image alone, then with `TransferProtocolType`, then
/// also `TransferMethod: Stream`; the ActionInfo's body first when it has
/// parameters.
pub fn insert_bodies(url: &str, params: Option<&[ActionParam]>) -> Vec<Value> {
    let proto = protocol_of(url);
    let mut out = Vec::new();
    if let Some(ps) = params.filter(|p| !p.is_empty()) {
        out.push(insert_body(url, ps));
    }
    for b in [
        json!({ "Image": url }),
        json!({ "Image": url, "TransferProtocolType": proto }),
        json!({ "Image": url, "TransferProtocolType": proto, "TransferMethod": "Stream" }),
    ] {
        if !out.contains(&b) {
            out.push(b);
        }
    }
    out
}

/// The PATCH-style insert body.
pub fn patch_insert_body(url: &str) -> Value {
    json!({ "Image": url, "Inserted": true, "WriteProtected": true })
}

/// The PATCH-style eject body.
pub fn patch_eject_body() -> Value {
    json!({ "Image": null, "Inserted": false })
}

/// How the BMC refused a call, for the retry and fallback rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Try the same call again after a back-off.
    Transient,
    /// The image URL's scheme or format is refused (try HTTPS).
    Scheme,
    /// The body is refused (try the next InsertMedia body).
    Body,
    /// `401`/`403`: stop at once.
    Auth,
    /// `412`: the ETag is stale (re-read, retry once).
    Stale,
    /// `428`: an ETag is required.
    NeedsEtag,
    /// Anything else: stop.
    Fatal,
}

/// Does a message id say the host is in POST (iLO's
/// `UnableToModifyDuringSystemPOST`)?
fn in_post(e: &RedfishError) -> bool {
    e.ids
        .iter()
        .any(|id| id.rsplit('.').next().unwrap_or("").contains("POST"))
}

/// Does the error refuse the image URL's scheme or format (bmcweb:
/// `ResourceAtUriInUnknownFormat` for `http://`)?
fn refuses_scheme(e: &RedfishError) -> bool {
    e.has_id("ResourceAtUriInUnknownFormat")
        || ((e.has_id("PropertyValueNotInList")
            || e.has_id("ActionParameterValueNotInList")
            || e.has_id("ActionParameterValueFormatError")
            || e.has_id("ActionParameterValueTypeError"))
            && (e.mentions("TransferProtocolType") || e.mentions("Image")))
}

/// Classify an HTTP error status with its Redfish error body.
pub fn classify(status: u16, err: Option<&RedfishError>) -> Refusal {
    match status {
        401 | 403 => Refusal::Auth,
        409 => Refusal::Transient,
        412 => Refusal::Stale,
        428 => Refusal::NeedsEtag,
        501 | 505 => Refusal::Fatal,
        500..=599 => Refusal::Transient,
        400 if err.is_some_and(in_post) => Refusal::Transient,
        400..=499 if err.is_some_and(refuses_scheme) => Refusal::Scheme,
        400 | 405 | 415 | 422 => Refusal::Body,
        _ => Refusal::Fatal,
    }
}

/// What the driver saw, as the plans need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub power: Power,
    pub boot_target: String,
    pub boot_enabled: String,
    /// What "boot from the virtual CD" is called on this BMC.
    pub cd_target: BootTarget,
    /// The chosen slot holds something.
    pub inserted: bool,
    pub image: Option<String>,
}

impl Observed {
    fn boot_is(&self, t: BootTarget) -> bool {
        self.boot_target == t.as_str() && self.boot_enabled == "Once"
    }
}

/// Per node, the steps of the current boot done (a file in the state
/// directory): what makes `up` converge across runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    /// The node's ISO URL (`http://…`) this boot is for.
    pub url: String,
    /// The URL actually inserted (the `http://` or the `https://` one).
    pub inserted: Option<String>,
    /// The boot override was set.
    pub boot: bool,
    /// The system was reset: this boot is done.
    pub reset: bool,
}

/// One Redfish call of a plan, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Eject what is in the slot.
    Eject,
    /// Insert our image (the driver picks the URL: `media`).
    Insert,
    /// PATCH `Boot` {target, `Once`, mode}.
    Boot(BootTarget),
    /// `ComputerSystem.Reset` with this type.
    Reset(String),
}

impl Step {
    /// What the step did, for the operator.
    pub fn done(&self, url: &str) -> String {
        match self {
            Step::Eject => "ejected the virtual media".into(),
            Step::Insert => format!("inserted {url}"),
            Step::Boot(t) => format!("set the next boot to {} (once)", t.as_str()),
            Step::Reset(r) => match r.as_str() {
                "On" | "ForceOn" => "powered on".into(),
                "ForceOff" | "GracefulShutdown" => "powered off".into(),
                r => format!("restarted ({r})"),
            },
        }
    }
}

/// `bmc up` from what was observed and the journal of this node's current
/// boot (`None`: none, or one for another URL); `ours` are the URLs of the
/// node's ISO. Empty when nothing is to be done.
pub fn plan_up(
    o: &Observed,
    j: Option<&Journal>,
    ours: &[String],
    reset_types: &[String],
) -> Result<Vec<Step>, Unsupported> {
    let have = o.inserted && o.image.as_ref().is_some_and(|i| ours.contains(i));
    match j {
        // This boot is done and our image is still in: nothing.
        Some(j) if j.reset && have => return Ok(Vec::new()),
        // No record (an earlier version, a lost state directory): running
        // from our image counts as done, as before journals.
        None if have && o.power == Power::On => return Ok(Vec::new()),
        _ => {}
    }
    // The record of an unfinished boot (a finished one is a new boot).
    let part = j.filter(|j| !j.reset);
    let mut steps = Vec::new();
    if !have {
        if o.inserted {
            steps.push(Step::Eject);
        }
        steps.push(Step::Insert);
    }
    let boot_done = part.is_some_and(|j| j.boot) && have;
    if !boot_done && !o.boot_is(o.cd_target) {
        steps.push(Step::Boot(o.cd_target));
    }
    steps.push(Step::Reset(reset_type(o.power, reset_types)?));
    Ok(steps)
}

/// `bmc down`: power off, then eject.
pub fn plan_down(o: &Observed, reset_types: &[String]) -> Vec<Step> {
    let mut steps = Vec::new();
    if o.power == Power::On {
        steps.push(Step::Reset(off_type(reset_types)));
    }
    if o.inserted {
        steps.push(Step::Eject);
    }
    steps
}

/// `bmc eject`: eject, next boot from disk (once), no reset.
pub fn plan_eject(o: &Observed) -> Vec<Step> {
    let mut steps = Vec::new();
    if o.inserted {
        steps.push(Step::Eject);
    }
    if !o.boot_is(BootTarget::Hdd) {
        steps.push(Step::Boot(BootTarget::Hdd));
    }
    steps
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
