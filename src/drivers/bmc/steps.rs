//! The calls of one step of a plan ([`super::plan::Step`]) the way this
//! BMC takes them, following the schema and RFC 9110 rather than a vendor
//! table (issue #41):
//!
//! - **Insert**: the InsertMedia action with the body its ActionInfo asks
//!   for ([`plan::insert_body`]); a 400 that names a missing parameter the
//!   driver can supply (`TransferProtocolType`, `TransferMethod`,
//!   `UserName`/`Password`) is answered by sending it, then the blind
//!   sequence ([`plan::insert_bodies`]); at most [`MAX_INSERT_TRIES`]
//!   bodies per URL. Without the action, a PATCH of the slot.
//! - **If-Match** (RFC 9110 §13.1.1): a PATCH refused with 412 or 428 is
//!   sent again with the resource's fresh ETag when that differs from the
//!   one refused, else with `If-Match: *` (a weak ETag never matches, so
//!   some BMCs refuse their own); at most two more PATCHes, noted.
//! - **Boot**: Target, Enabled and Mode in one PATCH ([`plan::boot_body`],
//!   [`plan::boot_mode`]) checked against the `@Redfish.AllowableValues`;
//!   a 400 naming `BootSourceOverrideMode` when none was sent is answered
//!   once with `UEFI`.
//! - **Reset**: the type the plan chose from the allowed ones.

use hyper::Method;
use serde_json::{Value, json};

use super::client::BmcError;
use super::driver::{Bmc, StepError};
use super::plan::{self, BootTarget, Refusal, Unsupported};
use super::redfish::{ActionParam, MediaView, SystemView, action_params};

/// InsertMedia bodies tried per URL at most.
pub(super) const MAX_INSERT_TRIES: usize = 5;

impl Bmc {
    /// Insert the first of `urls` the BMC takes; the URL inserted.
    pub(super) async fn insert(
        &self,
        slot: &MediaView,
        urls: &[String],
    ) -> Result<String, StepError> {
        let params = match &slot.insert_info {
            Some(i) => self.client.get(i).await.ok().map(|d| action_params(&d.doc)),
            None => None,
        };
        let mut last: Option<StepError> = None;
        for url in urls {
            let res = match &slot.insert_target {
                Some(target) => {
                    self.insert_action(slot, target, url, params.as_deref())
                        .await
                }
                None => self
                    .patch_slot(slot, &plan::patch_insert_body(url))
                    .await
                    .map(|_| ())
                    .map_err(|e| {
                        let what = format!(
                            "cannot insert {url} into {} (PATCH {})",
                            slot.odata_id, slot.odata_id
                        );
                        (what, e)
                    }),
            };
            match res {
                Ok(()) => return Ok(url.clone()),
                Err(err) if matches!(err.1.refusal(), Some(Refusal::Body | Refusal::Scheme)) => {
                    last = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        let Some((what, e)) = last else {
            return Err((
                format!("cannot insert into {}", slot.odata_id),
                BmcError::Unsupported(Unsupported::NoImageUrl),
            ));
        };
        let hint = if e.refusal() == Some(Refusal::Scheme) && urls.len() == 1 {
            " (the BMC refuses this URL's scheme: try bmc.media: https)"
        } else {
            ""
        };
        Err((format!("{what}{hint}"), e))
    }

    /// POST InsertMedia of `url`: the ActionInfo's body, then what the
    /// BMC's refusals name as missing, then the blind sequence. A refusal
    /// of the scheme ends it; else the first refusal is the one reported
    /// (the later bodies are variants of it).
    async fn insert_action(
        &self,
        slot: &MediaView,
        target: &str,
        url: &str,
        params: Option<&[ActionParam]>,
    ) -> Result<(), StepError> {
        let what = || format!("cannot insert {url} into {} (POST {target})", slot.odata_id);
        let mut body = plan::insert_body(url, params.unwrap_or_default());
        let mut blind = plan::insert_bodies(url, params).into_iter();
        let mut tried: Vec<Value> = Vec::new();
        let mut first: Option<StepError> = None;
        for _ in 0..MAX_INSERT_TRIES {
            tried.push(body.clone());
            let e = match self.client.send(Method::POST, target, &body, None).await {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            let added = match (e.refusal(), e.error()) {
                (Some(Refusal::Body), Some(re)) => plan::add_missing(&mut body, url, re),
                _ => Vec::new(),
            };
            match e.refusal() {
                Some(Refusal::Body) => first = first.or(Some((what(), e))),
                _ => return Err((what(), e)),
            }
            if !added.is_empty() && !tried.contains(&body) {
                self.client.note(format!(
                    "InsertMedia: the BMC asked for {} (HTTP 400): sent again with it",
                    added.join(", ")
                ));
                continue;
            }
            match blind.find(|b| !tried.contains(b)) {
                Some(b) => body = b,
                None => break,
            }
        }
        Err(first.unwrap_or_else(|| (what(), Unsupported::InsertBodies.into())))
    }

    /// Eject what is in the slot: its action with `{}`, else a PATCH; the
    /// slot's new ETag when the answer has one.
    pub(super) async fn eject_slot(&self, slot: &MediaView) -> Result<Option<String>, StepError> {
        let what = |call: &str| {
            format!(
                "cannot eject {} from {} ({call}; media busy?)",
                slot.image.as_deref().unwrap_or("the inserted image"),
                slot.odata_id
            )
        };
        match &slot.eject_target {
            Some(t) => self
                .client
                .send(Method::POST, t, &json!({}), None)
                .await
                .map_err(|e| (what(&format!("POST {t}")), e)),
            None => self
                .patch_slot(slot, &plan::patch_eject_body())
                .await
                .map_err(|e| (what(&format!("PATCH {}", slot.odata_id)), e)),
        }
    }

    /// PATCH a slot with `If-Match` from its ETag.
    async fn patch_slot(&self, slot: &MediaView, body: &Value) -> Result<Option<String>, BmcError> {
        self.patch_with_etag(&slot.odata_id, body, slot.etag.clone(), true)
            .await
    }

    /// PATCH `path` (with `If-Match: etag` when `eager`); a 412 or 428 is
    /// answered with the fresh ETag when it differs from the one refused,
    /// else with `If-Match: *` (RFC 9110 §13.1.1), at most twice.
    async fn patch_with_etag(
        &self,
        path: &str,
        body: &Value,
        etag: Option<String>,
        eager: bool,
    ) -> Result<Option<String>, BmcError> {
        let mut sent = etag.clone().filter(|_| eager);
        let mut res = self
            .client
            .send(Method::PATCH, path, body, sent.as_deref())
            .await;
        for _ in 0..2 {
            let Err(e) = &res else { break };
            let status = e.status().unwrap_or_default();
            if !matches!(e.refusal(), Some(Refusal::Stale | Refusal::NeedsEtag))
                || sent.as_deref() == Some("*")
            {
                break;
            }
            let fresh = match self.client.get(path).await {
                Ok(d) => d.etag,
                Err(_) => None,
            }
            .or(etag.clone());
            let next = match fresh.filter(|t| Some(t) != sent.as_ref()) {
                Some(t) => t,
                None => {
                    self.client.note(format!(
                        "PATCH {path}: If-Match {} refused (HTTP {status}): sent again with If-Match: * \
                         (RFC 9110 §13.1.1: a weak ETag never matches)",
                        sent.as_deref().unwrap_or("(none)")
                    ));
                    "*".to_string()
                }
            };
            sent = Some(next);
            res = self
                .client
                .send(Method::PATCH, path, body, sent.as_deref())
                .await;
        }
        res
    }

    /// Set the next boot (once) to `t`, in the settings object when the
    /// system has one that takes the Boot override.
    pub(super) async fn boot(&self, sys: &SystemView, t: BootTarget) -> Result<(), StepError> {
        let mut path = sys.odata_id.clone();
        let mut etag = sys.etag.clone();
        let mut eager = false;
        if let Some(so) = &sys.settings_object
            && let Ok(d) = self.client.get(so).await
            && plan::settings_takes_boot(&d.doc)
        {
            path = d.path;
            etag = d.etag;
            eager = true;
        }
        let what = format!("cannot set the next boot to {} (PATCH {path})", t.as_str());
        plan::check_boot(sys, t).map_err(|u| (what.clone(), u.into()))?;
        let mode = plan::boot_mode(sys);
        let body = plan::boot_body(t, mode.as_deref());
        let res = match self
            .patch_with_etag(&path, &body, etag.clone(), eager)
            .await
        {
            Err(e)
                if mode.is_none()
                    && e.refusal() == Some(Refusal::Body)
                    && e.error()
                        .is_some_and(|r| r.mentions("BootSourceOverrideMode")) =>
            {
                self.client.note(format!(
                    "PATCH {path}: refused without BootSourceOverrideMode (HTTP 400): sent again with UEFI"
                ));
                let body = plan::boot_body(t, Some("UEFI"));
                self.patch_with_etag(&path, &body, etag, eager).await
            }
            r => r,
        };
        res.map(|_| ()).map_err(|e| (what, e))
    }

    pub(super) async fn reset(&self, sys: &SystemView, r: &str) -> Result<(), StepError> {
        let target = sys
            .reset_target
            .clone()
            .unwrap_or_else(|| format!("{}/Actions/ComputerSystem.Reset", sys.odata_id));
        self.client
            .send(Method::POST, &target, &json!({ "ResetType": r }), None)
            .await
            .map(|_| ())
            .map_err(|e| (format!("cannot reset the system ({r}, POST {target})"), e))
    }
}
