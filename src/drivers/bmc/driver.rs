//! One node's BMC: find its system and virtual CD, read the state the
//! plans in [`super::redfish`] start from, run their steps, and turn every
//! failure into a sentence that names the node, the URL and, when the BMC
//! sent one, its Redfish message.
//!
//! Links are followed, never built: the system's `@odata.id` (a BMC may
//! redirect a name to a UUID), its `VirtualMedia` collection first, else
//! its managers' (`Links.ManagedBy`), and the actions' `target`s.

use anyhow::anyhow;
use hyper::Method;
use serde::Serialize;
use serde_json::{Value, json};

use super::client::{CallError, Client};
use super::redfish::{MediaView, State, Step, SystemView, insert_bodies, members, names_system};

/// Systems read when looking for an unknown one.
const MAX_LISTED: usize = 32;
use crate::config::bmc::read_first_line;
use crate::model::bmc::BmcCfg;
use crate::model::cluster::NodeCfg;

/// One node's row of `bmc status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    pub node: String,
    pub power: String,
    pub boot_target: String,
    pub boot_enabled: String,
    /// The virtual CD's `@odata.id`.
    pub media: String,
    pub inserted: bool,
    pub image: Option<String>,
    /// Why the BMC could not be read (the other fields are then empty).
    pub error: Option<String>,
}

/// A node's BMC.
#[derive(Debug)]
pub struct Bmc {
    node: String,
    cfg: BmcCfg,
    client: Client,
}

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

    /// `what` failed with `e`, as a sentence for the operator.
    fn fail(&self, what: &str, e: CallError) -> anyhow::Error {
        match e {
            CallError::Status {
                status: 401,
                message,
            } => anyhow!(
                "wrong credentials for BMC of {} ({}){}",
                self.node,
                self.client.origin(),
                message.map(|m| format!(": {m}")).unwrap_or_default()
            ),
            CallError::Unreachable(m) => anyhow!("BMC of {} unreachable: {m}", self.node),
            e => anyhow!("BMC of {}: {what}: {e}", self.node),
        }
    }

    /// The system, or why it cannot be read.
    async fn system(&self) -> anyhow::Result<SystemView> {
        let url = &self.cfg.url;
        match self.client.get(&self.cfg.path).await {
            Ok((path, v)) => {
                let mut s = SystemView::parse(&v);
                if s.odata_id.is_empty() {
                    s.odata_id = path;
                }
                Ok(s)
            }
            Err(CallError::Status {
                status: 404,
                message,
            }) => Err(anyhow!(
                "no such system at {url} (BMC of {}){}",
                self.node,
                message.map(|m| format!(": {m}")).unwrap_or_default()
            )),
            Err(e @ CallError::Status { status, .. }) if status != 401 && status != 403 => {
                // Some BMCs (sushy-emulator) answer an unknown id with a
                // 5xx: look for it among the systems the BMC lists.
                Err(match self.listed_systems().await {
                    Some((false, listed)) => anyhow!(
                        "no such system at {url} (BMC of {}; it has: {listed}): {e}",
                        self.node
                    ),
                    Some((true, _)) | None => {
                        anyhow!("BMC of {}: cannot read the system at {url}: {e}", self.node)
                    }
                })
            }
            Err(e) => Err(self.fail(&format!("GET {url}"), e)),
        }
    }

    /// Whether the BMC lists our system (by path, `Id`, `Name` or `UUID`),
    /// and the systems it lists; `None` when the list cannot be read.
    async fn listed_systems(&self) -> Option<(bool, String)> {
        let (_, v) = self.client.get("/redfish/v1/Systems").await.ok()?;
        let id = self.cfg.path.rsplit('/').next().unwrap_or_default();
        let mut found = false;
        let mut names = Vec::new();
        for m in members(&v).into_iter().take(MAX_LISTED) {
            let doc = self.client.get(&m).await.ok().map(|(_, d)| d);
            found |= m == self.cfg.path || doc.as_ref().is_some_and(|d| names_system(d, id));
            let name = doc
                .as_ref()
                .and_then(|d| d.get("Name"))
                .and_then(|n| n.as_str());
            names.push(match name {
                Some(n) => format!("{n} ({m})"),
                None => m,
            });
        }
        if names.is_empty() {
            names.push("no systems".into());
        }
        Some((found, names.join(", ")))
    }

    /// The first CD/DVD of a VirtualMedia collection.
    async fn cd_in(&self, collection: &str) -> anyhow::Result<Option<MediaView>> {
        let (_, v) = self
            .client
            .get(collection)
            .await
            .map_err(|e| self.fail(&format!("GET {collection}"), e))?;
        for m in members(&v) {
            let (path, doc) = self
                .client
                .get(&m)
                .await
                .map_err(|e| self.fail(&format!("GET {m}"), e))?;
            let mut media = MediaView::parse(&doc);
            if media.odata_id.is_empty() {
                media.odata_id = path;
            }
            if media.is_cd() {
                return Ok(Some(media));
            }
        }
        Ok(None)
    }

    /// The virtual CD: the system's VirtualMedia first, else its managers'.
    async fn media(&self, sys: &SystemView) -> anyhow::Result<MediaView> {
        let mut looked = Vec::new();
        if let Some(c) = &sys.virtual_media {
            if let Some(m) = self.cd_in(c).await? {
                return Ok(m);
            }
            looked.push(c.clone());
        }
        for mgr in &sys.managers {
            let (_, v) = self
                .client
                .get(mgr)
                .await
                .map_err(|e| self.fail(&format!("GET {mgr}"), e))?;
            let Some(c) = SystemView::parse(&v).virtual_media else {
                looked.push(mgr.clone());
                continue;
            };
            if let Some(m) = self.cd_in(&c).await? {
                return Ok(m);
            }
            looked.push(c);
        }
        Err(anyhow!(
            "BMC of {} has no virtual media CD/DVD for {} (looked at: {})",
            self.node,
            self.cfg.url,
            if looked.is_empty() {
                "the system has no VirtualMedia link and no manager".to_string()
            } else {
                looked.join(", ")
            }
        ))
    }

    /// The system, its virtual CD and the plans' starting state.
    pub async fn read(&self) -> anyhow::Result<(SystemView, MediaView, State)> {
        let sys = self.system().await?;
        let media = self.media(&sys).await?;
        let state = State {
            power: sys.power(),
            boot_target: sys.boot_target.clone(),
            cd_target: sys.cd_target(),
            inserted: media.inserted,
            image: media.image.clone(),
        };
        Ok((sys, media, state))
    }

    /// Run `steps` in order; the lines say what was done.
    pub async fn apply(
        &self,
        sys: &SystemView,
        media: &MediaView,
        steps: &[Step],
    ) -> anyhow::Result<Vec<String>> {
        let mut done = Vec::new();
        for step in steps {
            let (method, target, body) = match step {
                Step::Eject => (
                    Method::POST,
                    self.action(&media.eject_target, "EjectMedia", &media.odata_id)?,
                    json!({}),
                ),
                Step::Insert(url) => (
                    Method::POST,
                    self.action(&media.insert_target, "InsertMedia", &media.odata_id)?,
                    insert_bodies(url)[0].clone(),
                ),
                Step::Boot(t) => (
                    Method::PATCH,
                    sys.odata_id.clone(),
                    json!({"Boot": {"BootSourceOverrideTarget": t.as_str(), "BootSourceOverrideEnabled": "Once"}}),
                ),
                Step::Reset(r) => (
                    Method::POST,
                    sys.reset_target.clone().unwrap_or_else(|| {
                        format!("{}/Actions/ComputerSystem.Reset", sys.odata_id)
                    }),
                    json!({ "ResetType": r.as_str() }),
                ),
            };
            let res = self.send_step(sys, step, method, &target, &body).await;
            if let Err(e) = res {
                let what = match step {
                    Step::Eject => format!(
                        "cannot eject {} from {} (media busy?)",
                        media.image.as_deref().unwrap_or("the inserted image"),
                        media.odata_id
                    ),
                    Step::Insert(url) => format!("cannot insert {url} into {}", media.odata_id),
                    Step::Boot(t) => format!("cannot set the next boot to {}", t.as_str()),
                    Step::Reset(r) => format!("cannot reset the system ({})", r.as_str()),
                };
                let err = self.fail(&what, e);
                return Err(if done.is_empty() {
                    err
                } else {
                    anyhow!("{err:#} (done before the failure: {})", done.join(", "))
                });
            }
            done.push(step.to_string());
        }
        Ok(done)
    }

    /// Send one step's call, with the retries some BMCs need: a PATCH
    /// refused for want of an ETag goes again with `If-Match`; an
    /// InsertMedia refused with 400/422 goes again with the optional
    /// transfer fields ([`insert_bodies`]). The first refusal is reported.
    async fn send_step(
        &self,
        sys: &SystemView,
        step: &Step,
        method: Method,
        target: &str,
        body: &Value,
    ) -> Result<(), CallError> {
        let first = self.client.send(method.clone(), target, body, None).await;
        let Err(CallError::Status { status, .. }) = &first else {
            return first;
        };
        match (step, *status, &sys.etag) {
            (Step::Boot(_), 412 | 428, Some(tag)) => {
                self.client.send(method, target, body, Some(tag)).await
            }
            (Step::Insert(url), 400 | 422, _) => {
                for b in insert_bodies(url).iter().skip(1) {
                    if self
                        .client
                        .send(method.clone(), target, b, None)
                        .await
                        .is_ok()
                    {
                        return Ok(());
                    }
                }
                first
            }
            _ => first,
        }
    }

    fn action(&self, target: &Option<String>, name: &str, media: &str) -> anyhow::Result<String> {
        target.clone().ok_or_else(|| {
            anyhow!(
                "BMC of {}: the virtual CD {media} has no VirtualMedia.{name} action \
                 (PATCH-style virtual media is not supported)",
                self.node
            )
        })
    }

    /// `bmc status` for this node.
    pub async fn status(&self) -> NodeStatus {
        match self.read().await {
            Ok((sys, media, _)) => NodeStatus {
                node: self.node.clone(),
                power: sys.power_state,
                boot_target: sys.boot_target,
                boot_enabled: sys.boot_enabled,
                media: media.odata_id,
                inserted: media.inserted,
                image: media.image,
                error: None,
            },
            Err(e) => NodeStatus {
                node: self.node.clone(),
                error: Some(format!("{e:#}")),
                ..NodeStatus::default()
            },
        }
    }
}
