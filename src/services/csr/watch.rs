//! The approver's loop: list CSRs and Nodes, decide each pending CSR with
//! [`rules::decide`], approve through `/approval`; then wait for the CSR
//! watch to report a change or for [`PASS_EVERY`] (new evidence, a Node
//! appearing), and pass again. A failed pass or an ended watch reconnects
//! with back-off (1 s doubling to 30 s), relisting everything.
//!
//! Invariants: a CSR is approved only on an `Approve` decision of the
//! pass that read it (its resourceVersion goes back in the PUT, so a CSR
//! changed since is refused by the server with 409 and decided again);
//! a refusal is logged once per CSR and reason; a 403 names the missing
//! right (`render csr-rbac` has them all) and nothing further is
//! approved in that pass.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::client::{CallError, Client, message};
use super::objects;
use super::rules::{self, Decision, Kind, Refusal, World};
use super::status::{APPROVALS_KEPT, CsrRow, CsrStatus};
use crate::model::cluster::CsrCfg;
use crate::runtime::clock::unix_now;
use crate::runtime::sync::LockExt as _;
use crate::timeline::Events;

pub const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
pub const NODES: &str = "/api/v1/nodes";
/// A pass at least this often, watch events or not.
pub const PASS_EVERY: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What the loop keeps between passes.
#[derive(Default)]
pub struct State {
    pub status: CsrStatus,
    /// (CSR, reason) pairs already logged.
    logged: BTreeSet<(String, String)>,
    /// Inventory node → its last recovery approval.
    recovered: BTreeMap<String, u64>,
    /// The nodes with a duplicate alert on the timeline.
    alerted: BTreeSet<String>,
}

pub struct Approver {
    pub cfg: arc_swap::ArcSwap<(CsrCfg, Vec<rules::InventoryNode>)>,
    pub events: Events,
    pub state: Mutex<State>,
}

pub fn forbidden(what: &str) -> String {
    format!(
        "the kubeconfig's identity may not {what}: apply `crc-appliance render csr-rbac` and use its identity, or the installer's auth/kubeconfig"
    )
}

impl Approver {
    /// Run until `shutdown`: sessions, reconnecting with back-off.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut backoff = Duration::from_secs(1);
        loop {
            let err = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                r = self.session() => match r {
                    Ok(()) => continue,
                    Err(e) => e,
                },
            };
            self.note_error(format!("{err:#}"));
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// A failed session: logged when the reason changes, shown in status.
    fn note_error(&self, text: String) {
        let mut st = self.state.locked();
        if st.status.error.as_deref() != Some(text.as_str()) {
            warn!("csr: {text}; retrying");
        }
        st.status.connected = false;
        st.status.error = Some(text);
    }

    /// One connection: passes until an error.
    async fn session(&self) -> anyhow::Result<()> {
        let path = self.cfg.load().0.kubeconfig_file.clone();
        let client = Client::new(super::kubeconfig::load(&path)?)?;
        self.state.locked().status.server = client.authority().to_string();
        let mut watch = None;
        loop {
            let rv = self.pass(&client).await?;
            if watch.is_none() {
                let path = format!("{CSRS}?watch=true&resourceVersion={rv}&timeoutSeconds=300");
                watch = Some(client.watch(&path).await?);
            }
            let Some(w) = watch.as_mut() else { continue };
            tokio::select! {
                line = w.next_line() => match line {
                    Ok(Some(l)) if !l.windows(7).any(|x| x == b"\"ERROR\"") => {}
                    _ => watch = None,
                },
                () = tokio::time::sleep(PASS_EVERY) => {}
            }
        }
    }

    /// List, decide, approve; the CSR list's resourceVersion.
    async fn pass(&self, client: &Client) -> anyhow::Result<String> {
        let list = client.get_json(CSRS).await.map_err(|e| match e {
            CallError::Status(StatusCode::FORBIDDEN, _) => {
                anyhow::anyhow!(forbidden("list certificatesigningrequests"))
            }
            e => anyhow::anyhow!("list CSRs: {e}"),
        })?;
        let nodes = client.get_json(NODES).await.map_err(|e| match e {
            CallError::Status(StatusCode::FORBIDDEN, _) => anyhow::anyhow!(forbidden("list nodes")),
            e => anyhow::anyhow!("list Nodes: {e}"),
        })?;
        let rv = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .to_string();
        let objs: Vec<Value> = list["items"].as_array().cloned().unwrap_or_default();
        let csrs: Vec<rules::Csr> = objs.iter().filter_map(objects::csr).collect();
        let nodes = objects::nodes(&nodes);
        let cfg = self.cfg.load();
        let (csr_cfg, inventory) = (&cfg.0, &cfg.1);
        for n in inventory {
            if [&n.name, &n.fqdn]
                .iter()
                .any(|k| nodes.get(k.as_str()) == Some(&true))
            {
                self.events.record(crate::timeline::Event::NodeReady {
                    node: n.name.clone(),
                });
            }
        }
        let evidence = objects::evidence(&self.events.view());
        let pending = rules::pending_clients(&csrs, inventory);
        let recovered = self.state.locked().recovered.clone();
        let now = unix_now();
        let world = World {
            window: csr_cfg.window.as_secs(),
            recovery: csr_cfg.recovery,
            inventory,
            nodes: &nodes,
            evidence: &evidence,
            recovered: &recovered,
            pending: &pending,
            now,
        };
        let mut refused = Vec::new();
        let mut alerts = BTreeSet::new();
        let mut duplicates: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (obj, csr) in objs.iter().zip(&csrs) {
            match rules::decide(csr, &world) {
                Decision::NotPending => {}
                Decision::Refuse(r) => {
                    self.note_refusal(&csr.name, &r.to_string(), r.is_alert());
                    if r.is_alert() {
                        alerts.insert(r.to_string());
                    }
                    if let Refusal::Duplicate { node, .. } = &r {
                        duplicates
                            .entry(node.clone())
                            .or_default()
                            .push(csr.name.clone());
                    }
                    refused.push(CsrRow {
                        name: csr.name.clone(),
                        node: None,
                        signer: Some(csr.signer.clone()),
                        what: r.to_string(),
                        at: now,
                    });
                }
                Decision::Approve {
                    node,
                    kind,
                    because,
                } => {
                    self.approve(client, obj, &csr.name, &csr.signer, &node, kind, &because)
                        .await?;
                }
            }
        }
        let mut st = self.state.locked();
        st.status.connected = true;
        st.status.error = None;
        // Forget the log marks of CSRs no longer refused (bounded memory).
        st.logged
            .retain(|(name, _)| refused.iter().any(|r| r.name == *name));
        st.status.refused = refused;
        st.status.alerts = alerts.into_iter().collect();
        drop(st);
        self.record_alerts(duplicates);
        Ok(rv)
    }

    /// The duplicate alerts as timeline hints: raised for the nodes in
    /// `duplicates` (node → its pending client CSRs), cleared for the
    /// others raised before.
    fn record_alerts(&self, duplicates: BTreeMap<String, Vec<String>>) {
        let mut st = self.state.locked();
        for node in std::mem::take(&mut st.alerted) {
            if !duplicates.contains_key(&node) {
                let message = None;
                self.events
                    .record(crate::timeline::Event::CsrAlert { node, message });
            }
        }
        for (node, names) in duplicates {
            let message = Some(format!(
                "{} pending client CSRs for {node} ({}): none is approved, one of them is not the node's; approve the node's own by hand (`oc describe csr` shows each requester) and deny the other",
                names.len(),
                names.join(", ")
            ));
            st.alerted.insert(node.clone());
            self.events
                .record(crate::timeline::Event::CsrAlert { node, message });
        }
    }

    fn note_refusal(&self, name: &str, reason: &str, alert: bool) {
        let mut st = self.state.locked();
        if st.logged.insert((name.to_string(), reason.to_string())) {
            if alert {
                warn!("csr: ALERT: {name} left pending: {reason}");
            } else {
                info!("csr: {name} left pending: {reason}");
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn approve(
        &self,
        client: &Client,
        obj: &Value,
        name: &str,
        signer: &str,
        node: &str,
        kind: Kind,
        because: &str,
    ) -> anyhow::Result<()> {
        let now = unix_now();
        let body = objects::approval(obj, &format!("Approved by crc-appliance: {because}"), now);
        let path = format!("{CSRS}/{name}/approval");
        let a = client
            .call(Method::PUT, &path, Some(Bytes::from(body.to_string())))
            .await?;
        match a.status {
            StatusCode::OK | StatusCode::CREATED => {}
            // Changed since it was read: decided again on the next pass.
            StatusCode::CONFLICT => return Ok(()),
            StatusCode::FORBIDDEN => anyhow::bail!(forbidden(&format!(
                "update certificatesigningrequests/approval or approve signers {signer} ({})",
                message(&a.body)
            ))),
            s => anyhow::bail!("approve {name}: {s} {}", message(&a.body)),
        }
        let what = match kind {
            Kind::Client => "client",
            Kind::Recovery => "recovery",
            Kind::Serving => "serving",
        };
        info!("csr: approved {name} ({what}) for {node}: {because}");
        self.events.record(crate::timeline::Event::CsrApproved {
            node: node.to_string(),
            serving: kind == Kind::Serving,
        });
        let mut st = self.state.locked();
        if kind == Kind::Recovery {
            st.recovered.insert(node.to_string(), now);
        }
        st.status.approved.push(CsrRow {
            name: name.to_string(),
            node: Some(node.to_string()),
            signer: Some(signer.to_string()),
            what: what.to_string(),
            at: now,
        });
        let excess = st.status.approved.len().saturating_sub(APPROVALS_KEPT);
        st.status.approved.drain(..excess);
        Ok(())
    }
}
