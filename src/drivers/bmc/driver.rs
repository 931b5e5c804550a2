//! One node's BMC: find its system and virtual media slot, read what the
//! plans in [`super::plan`] decide from, run their steps (the calls of each
//! are in `steps.rs`), keep the node's [`Journal`] after each step, and turn every
//! failure into a sentence naming the node, the call and, when the BMC
//! sent one, its Redfish message.
//!
//! Links are followed, never built: the system's `@odata.id` (a BMC may
//! redirect a name to a UUID), its `VirtualMedia` collection first, else
//! its managers' (`Links.ManagedBy`), the actions' `target`s and
//! `@Redfish.ActionInfo`s, the `@Redfish.Settings` object.

use std::path::Path;

use anyhow::anyhow;
use serde::Serialize;
use tracing::warn;

use super::client::{BmcError, Client};
use super::journal;
use super::plan::{self, Journal, Observed, Step, choose_slot, insertable};
use super::redfish::{
    MediaView, SystemView, bounded, members, names_system, parameter_values, text,
};
use crate::config::secret::read_first_line;
use crate::model::bmc::BmcCfg;
use crate::model::cluster::NodeCfg;

/// Systems read when looking for an unknown one.
const MAX_LISTED: usize = 32;
/// Slots read per VirtualMedia collection.
const MAX_SLOTS: usize = 16;

/// One node's row of `bmc status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    pub node: String,
    pub power: String,
    pub boot_target: String,
    pub boot_enabled: String,
    /// The slot in use: its `@odata.id`.
    pub media: String,
    pub inserted: bool,
    pub image: Option<String>,
    /// The system's `Manufacturer` and `Model`.
    pub manufacturer: String,
    pub model: String,
    /// The BMC's (manager's) `FirmwareVersion`.
    pub firmware: String,
    /// Why the BMC could not be read (the other fields are then empty).
    pub error: Option<String>,
}

/// What one command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// What changed, one line per step.
    pub lines: Vec<String>,
    /// The system was powered on or restarted by this command.
    pub reset: bool,
    /// What the driver did beyond the plain calls (a Redfish session,
    /// `If-Match: *`, an InsertMedia parameter the BMC asked for).
    pub notes: Vec<String>,
}

/// The node's ISO URLs for one command.
#[derive(Debug, Clone)]
pub struct Urls {
    /// The boot's identity (the `http://` URL).
    pub id: String,
    /// The URLs to insert, in order (`media`: auto gives http then https).
    pub insert: Vec<String>,
    /// Every URL of the node's ISO (what counts as "ours" in a slot).
    pub ours: Vec<String>,
}

/// A node's BMC.
#[derive(Debug)]
pub struct Bmc {
    node: String,
    cfg: BmcCfg,
    pub(super) client: Client,
}

/// A failed step: what it was, and the call's error.
pub(super) type StepError = (String, BmcError);

impl Bmc {
    /// Read the node's credentials and prepare its client; `None` for a
    /// node without `bmc`.
    pub fn open(node: &NodeCfg) -> anyhow::Result<Option<Bmc>> {
        let Some(cfg) = &node.bmc else {
            return Ok(None);
        };
        let user = read_first_line(&cfg.username_file)
            .map_err(|m| anyhow!("BMC of {}: usernameFile: {m}", node.name))?;
        let password = read_first_line(&cfg.password_file)
            .map_err(|m| anyhow!("BMC of {}: passwordFile: {m}", node.name))?;
        let client = Client::new(cfg, &user, &password)
            .map_err(|e| anyhow!("BMC of {}: {e:#}", node.name))?;
        Ok(Some(Bmc {
            node: node.name.clone(),
            cfg: cfg.clone(),
            client,
        }))
    }

    /// Requests made so far.
    pub fn requests(&self) -> u32 {
        self.client.requests()
    }

    /// What was done beyond the plain calls so far (emptied).
    pub fn take_notes(&self) -> Vec<String> {
        self.client.take_notes()
    }

    /// End the command (its Redfish session, if one was made).
    pub async fn close(&self) {
        self.client.close().await;
    }

    /// `what` failed with `e`, as a sentence for the operator.
    fn fail(&self, what: &str, e: BmcError) -> anyhow::Error {
        match e {
            BmcError::Auth { status: 401, .. } => anyhow!(
                "wrong credentials for BMC of {} ({}){}",
                self.node,
                self.client.origin(),
                e.message().map(|m| format!(": {m}")).unwrap_or_default()
            ),
            e if e.unreachable() => anyhow!("BMC of {} unreachable: {e}", self.node),
            e => anyhow!("BMC of {}: {what}: {e}", self.node),
        }
    }

    /// GET `path`, failing with a sentence.
    async fn get(&self, path: &str) -> anyhow::Result<super::client::Doc> {
        self.client
            .get(path)
            .await
            .map_err(|e| self.fail(&format!("GET {path}"), e))
    }

    /// The system, or why it cannot be read.
    async fn system(&self) -> anyhow::Result<SystemView> {
        let url = &self.cfg.url;
        match self.client.get(&self.cfg.path).await {
            Ok(d) => {
                let mut s = SystemView::parse(&d.doc);
                if s.odata_id.is_empty() {
                    s.odata_id = d.path;
                }
                if s.etag.is_none() {
                    s.etag = d.etag;
                }
                Ok(s)
            }
            Err(e @ BmcError::Status { status: 404, .. }) => Err(anyhow!(
                "no such system at {url} (BMC of {}){}",
                self.node,
                e.message().map(|m| format!(": {m}")).unwrap_or_default()
            )),
            Err(e @ BmcError::Status { .. }) => {
                // Some BMCs (sushy-emulator) answer an unknown id with a
                // 5xx: look for it among the systems the BMC lists.
                Err(match self.listed_systems().await {
                    Some((false, listed)) => anyhow!(
                        "no such system at {url} (BMC of {}; it has: {listed}): {e}",
                        self.node
                    ),
                    Some((true, _)) | None => {
                        anyhow!(
                            "BMC of {}: cannot read the system at {url} (GET {}): {e}",
                            self.node,
                            self.cfg.path
                        )
                    }
                })
            }
            Err(e) => Err(self.fail(&format!("GET {url}"), e)),
        }
    }

    /// Whether the BMC lists our system (by path, `Id`, `Name` or `UUID`),
    /// and the systems it lists; `None` when the list cannot be read.
    /// Read without retries: this runs after a failure, within its budget.
    async fn listed_systems(&self) -> Option<(bool, String)> {
        let v = self.client.get_once("/redfish/v1/Systems").await.ok()?.doc;
        let id = self.cfg.path.rsplit('/').next().unwrap_or_default();
        let mut found = false;
        let mut names = Vec::new();
        for m in members(&v).into_iter().take(MAX_LISTED) {
            let doc = self.client.get_once(&m).await.ok().map(|d| d.doc);
            found |= m == self.cfg.path || doc.as_ref().is_some_and(|d| names_system(d, id));
            let name = doc
                .as_ref()
                .and_then(|d| d.get("Name"))
                .and_then(|n| n.as_str());
            names.push(bounded(&match name {
                Some(n) => format!("{n} ({m})"),
                None => m,
            }));
        }
        if names.is_empty() {
            names.push("no systems".into());
        }
        Some((found, names.join(", ")))
    }

    /// The insertable slots of a VirtualMedia collection.
    async fn slots_in(&self, collection: &str) -> anyhow::Result<Vec<MediaView>> {
        let v = self.get(collection).await?.doc;
        let mut out = Vec::new();
        for m in members(&v)
            .into_iter()
            .filter(|m| insertable(m))
            .take(MAX_SLOTS)
        {
            let d = self.get(&m).await?;
            let mut media = MediaView::parse(&d.doc);
            if media.odata_id.is_empty() {
                media.odata_id = d.path;
            }
            if media.etag.is_none() {
                media.etag = d.etag;
            }
            // `MediaTypes` is optional: a slot without it whose name says
            // nothing is a CD if its InsertMedia ActionInfo allows one.
            if media.media_types.is_empty()
                && !media.named_cd()
                && let Some(info) = &media.insert_info
                && let Ok(i) = self.client.get(info).await
            {
                media.info_media_types = parameter_values(&i.doc, "MediaType");
            }
            out.push(media);
        }
        Ok(out)
    }

    /// The slot to use: the system's VirtualMedia first, else its managers'.
    async fn slot(&self, sys: &SystemView, ours: &[String]) -> anyhow::Result<MediaView> {
        let mut looked = Vec::new();
        if let Some(c) = &sys.virtual_media {
            let slots = self.slots_in(c).await?;
            if let Some(m) = choose_slot(&slots, ours) {
                return Ok(m.clone());
            }
            looked.push(offered(c, &slots));
        }
        for mgr in &sys.managers {
            let v = self.get(mgr).await?.doc;
            let Some(c) = text(&v, &["VirtualMedia", "@odata.id"]) else {
                looked.push(mgr.clone());
                continue;
            };
            if sys.virtual_media.as_ref() == Some(&c) {
                continue;
            }
            let slots = self.slots_in(&c).await?;
            if let Some(m) = choose_slot(&slots, ours) {
                return Ok(m.clone());
            }
            looked.push(offered(&c, &slots));
        }
        Err(anyhow!(
            "BMC of {} has no virtual media CD/DVD for {} (looked at: {})",
            self.node,
            self.cfg.url,
            if looked.is_empty() {
                "the system has no VirtualMedia link and no manager".to_string()
            } else {
                looked.join("; ")
            }
        ))
    }

    /// The reset types allowed: listed inline, else in the ActionInfo.
    async fn reset_types(&self, sys: &SystemView) -> Vec<String> {
        if !sys.reset_types.is_empty() {
            return sys.reset_types.clone();
        }
        let Some(info) = &sys.reset_info else {
            return Vec::new();
        };
        match self.client.get(info).await {
            Ok(d) => parameter_values(&d.doc, "ResetType"),
            Err(_) => Vec::new(),
        }
    }

    /// The system, the slot in use, what the plans start from, and the
    /// reset types allowed.
    async fn read(&self, ours: &[String]) -> anyhow::Result<(SystemView, MediaView, Observed)> {
        let sys = self.system().await?;
        let slot = self.slot(&sys, ours).await?;
        let o = Observed {
            power: sys.power(),
            boot_target: sys.boot_target.clone(),
            boot_enabled: sys.boot_enabled.clone(),
            cd_target: plan::cd_target(&sys),
            inserted: slot.inserted,
            image: slot.image.clone(),
        };
        Ok((sys, slot, o))
    }

    /// `bmc up`: boot once from the node's ISO (see [`plan::plan_up`]);
    /// the journal at `jpath` records each step done.
    pub async fn up(&self, urls: &Urls, jpath: &Path) -> anyhow::Result<Outcome> {
        let (sys, slot, o) = self.read(&urls.ours).await?;
        let types = self.reset_types(&sys).await;
        let j = journal::load(jpath, &urls.id);
        let steps = plan::plan_up(&o, j.as_ref(), &urls.ours, &types)
            .map_err(|m| anyhow!("BMC of {}: {m}", self.node))?;
        if steps.is_empty() {
            return Ok(Outcome::default());
        }
        let have = plan::holds(&slot, &urls.ours);
        let mut cur = match j.filter(|j| !j.reset) {
            Some(j) if have => j,
            _ => Journal {
                url: urls.id.clone(),
                inserted: have.then(|| slot.image.clone()).flatten(),
                boot: false,
                reset: false,
            },
        };
        self.run(&sys, &slot, &steps, &urls.insert, Some((jpath, &mut cur)))
            .await
    }

    /// `bmc down`: power off and eject; the node's journal is cleared.
    pub async fn down(&self, urls: &Urls, jpath: &Path) -> anyhow::Result<Outcome> {
        let (sys, slot, o) = self.read(&urls.ours).await?;
        let types = self.reset_types(&sys).await;
        self.clear(jpath);
        self.run(&sys, &slot, &plan::plan_down(&o, &types), &[], None)
            .await
    }

    /// `bmc eject`: eject and boot from disk once, no reset; the node's
    /// journal is cleared.
    pub async fn eject(&self, urls: &Urls, jpath: &Path) -> anyhow::Result<Outcome> {
        let (sys, slot, o) = self.read(&urls.ours).await?;
        self.clear(jpath);
        self.run(&sys, &slot, &plan::plan_eject(&o), &[], None)
            .await
    }

    fn clear(&self, jpath: &Path) {
        if let Err(e) = journal::clear(jpath) {
            warn!("bmc: {}: cannot remove {}: {e}", self.node, jpath.display());
        }
    }

    /// Run `steps` in order, recording each in the journal.
    async fn run(
        &self,
        sys: &SystemView,
        slot: &MediaView,
        steps: &[Step],
        urls: &[String],
        mut journal: Option<(&Path, &mut Journal)>,
    ) -> anyhow::Result<Outcome> {
        let mut out = Outcome::default();
        let mut slot = slot.clone();
        for step in steps {
            let res = match step {
                Step::Eject => self.eject_slot(&slot).await.map(|tag| {
                    // The slot's new ETag for a PATCH-style insert next.
                    slot.etag = tag.or(slot.etag.take());
                    None
                }),
                Step::Insert => self.insert(&slot, urls).await.map(Some),
                Step::Boot(t) => self.boot(sys, *t).await.map(|()| None),
                Step::Reset(r) => self.reset(sys, r).await.map(|()| None),
            };
            let inserted = match res {
                Ok(u) => u,
                Err((what, e)) => {
                    let err = self.fail(&what, e);
                    return Err(if out.lines.is_empty() {
                        err
                    } else {
                        anyhow!(
                            "{err:#} (done before the failure: {})",
                            out.lines.join(", ")
                        )
                    });
                }
            };
            out.lines
                .push(step.done(inserted.as_deref().unwrap_or_default()));
            if let Some((path, j)) = journal.as_mut() {
                match step {
                    Step::Eject => j.inserted = None,
                    Step::Insert => j.inserted = inserted,
                    Step::Boot(_) => j.boot = true,
                    Step::Reset(_) => j.reset = true,
                }
                if let Err(e) = journal::save(path, j) {
                    warn!(
                        "bmc: {}: cannot record the step in {}: {e}",
                        self.node,
                        path.display()
                    );
                }
            }
            out.reset |=
                matches!(step, Step::Reset(r) if r != "ForceOff" && r != "GracefulShutdown");
        }
        Ok(out)
    }

    /// `bmc status` for this node.
    pub async fn status(&self, ours: &[String]) -> NodeStatus {
        let read = async {
            let (sys, slot, _) = self.read(ours).await?;
            let firmware = match sys.managers.first() {
                Some(m) => self
                    .client
                    .get(m)
                    .await
                    .ok()
                    .and_then(|d| text(&d.doc, &["FirmwareVersion"]))
                    .unwrap_or_default(),
                None => String::new(),
            };
            // What the BMC wrote is shown bounded and escaped.
            Ok::<_, anyhow::Error>(NodeStatus {
                node: self.node.clone(),
                power: bounded(&sys.power_state),
                boot_target: bounded(&sys.boot_target),
                boot_enabled: bounded(&sys.boot_enabled),
                media: bounded(&slot.odata_id),
                inserted: slot.inserted,
                image: slot.image.as_deref().map(bounded),
                manufacturer: bounded(&sys.manufacturer),
                model: bounded(&sys.model),
                firmware: bounded(&firmware),
                error: None,
            })
        };
        match read.await {
            Ok(s) => s,
            Err(e) => NodeStatus {
                node: self.node.clone(),
                error: Some(format!("{e:#}")),
                ..NodeStatus::default()
            },
        }
    }
}

/// A VirtualMedia collection and what each of its slots offered, for the
/// error when none is a CD/DVD.
fn offered(collection: &str, slots: &[MediaView]) -> String {
    if slots.is_empty() {
        return format!("{collection} (no insertable slot)");
    }
    let each: Vec<String> = slots.iter().map(MediaView::offered).collect();
    format!("{collection}: {}", each.join(", "))
}
