//! Redfish BMC driver (issue #13): boots bare-metal nodes from the
//! appliance's per-node ISO (`<http base>/boot/<node>.iso`) through virtual
//! media, like `vm up` does for VMs.
//!
//! Layers: [`redfish`] (pure: JSON → typed views), [`plan`] (pure: every
//! decision, vendor rules included, from those views and the node's
//! journal), [`client`] (HTTP/1.1 over TCP or rustls, Basic auth, bounded,
//! retries of transient refusals within a per-command budget), [`session`]
//! (a Redfish session when Basic auth is refused), [`task`] (a 202's task
//! followed to its end), [`journal`] (the steps of the current boot, per
//! node, in the state directory), [`driver`] (one node's BMC: links, error
//! sentences) and `steps` (each step's calls: InsertMedia parameters,
//! If-Match per RFC 9110, the Boot PATCH). Needs no libvirt: it is for bare
//! metal. docs/bare-metal.md has the vendor table and the schema rules.
//!
//! Invariants: `up`, `down` and `eject` converge (a second run after a
//! successful one makes no call that changes anything; an `up` that failed
//! part-way is finished by the next with one reset in all); a failure
//! leaves later steps undone and says which steps were done; one command
//! makes at most 40 requests within 90 s per node; credentials (and a
//! session's token) are read from their files per command and never
//! printed or logged; a BMC's own text is shown bounded and escaped.

pub mod client;
pub mod driver;
pub mod error;
pub mod journal;
pub mod plan;
pub mod redfish;
pub mod session;
mod steps;
pub mod task;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;

use tracing::{info, warn};

use crate::model::bmc::BmcMedia;
use crate::model::boot::{http_base, iso_urls};
use crate::model::cluster::{Cluster, NodeCfg};
use crate::plan::Plan;
pub use driver::{Bmc, NodeStatus, Outcome, Urls};

/// What `crc-appliance bmc` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BmcAction {
    /// Insert the node's ISO, boot once from CD, power on (idempotent).
    Up,
    /// Power off and eject.
    Down,
    /// Eject and boot once from disk.
    Eject,
    /// Power, boot override and media per node.
    Status,
}

/// The ISO URL a node boots from: `<http base>/boot/<node>.iso`.
pub fn iso_url(c: &Cluster, node: &NodeCfg) -> String {
    format!("{}/boot/{}.iso", http_base(c), node.name)
}

/// The node's ISO URLs for its BMC: the `http://` one is the boot's
/// identity; `bmc.media` says which are inserted (`auto`: `http://`, then
/// `https://` when the BMC refuses the scheme or format).
pub fn urls(c: &Cluster, node: &NodeCfg) -> Urls {
    let u = iso_urls(c, node);
    let media = node.bmc.as_ref().map(|b| b.media).unwrap_or_default();
    let mut ours = vec![u.http.clone()];
    ours.extend(u.https.clone());
    let insert = match (media, &u.https) {
        (BmcMedia::Http, _) | (_, None) => vec![u.http.clone()],
        (BmcMedia::Https, Some(s)) => vec![s.clone()],
        (BmcMedia::Auto, Some(s)) => vec![u.http.clone(), s.clone()],
    };
    Urls {
        id: u.http,
        insert,
        ours,
    }
}

/// The nodes a command acts on: `node`, or every node with a `bmc`.
fn select<'a>(c: &'a Cluster, node: Option<&str>) -> anyhow::Result<Vec<&'a NodeCfg>> {
    match node {
        Some(name) => {
            let n = c
                .nodes
                .iter()
                .find(|n| n.name == name)
                .ok_or_else(|| anyhow!("no node {name:?} in the cluster file"))?;
            if n.bmc.is_none() {
                anyhow::bail!("node {name} has no bmc in the cluster file");
            }
            Ok(vec![n])
        }
        None => {
            let v: Vec<_> = c.nodes.iter().filter(|n| n.bmc.is_some()).collect();
            if v.is_empty() {
                anyhow::bail!("no node in the cluster file has a bmc");
            }
            Ok(v)
        }
    }
}

/// Run `action` on one node; the outcome says what changed.
pub async fn act(c: &Cluster, node: &NodeCfg, action: BmcAction) -> anyhow::Result<Outcome> {
    let Some(bmc) = Bmc::open(node)? else {
        anyhow::bail!("node {} has no bmc", node.name);
    };
    let u = urls(c, node);
    let jpath = journal::path_of(c, &node.name);
    let res = match action {
        BmcAction::Up => bmc.up(&u, &jpath).await,
        BmcAction::Down => bmc.down(&u, &jpath).await,
        BmcAction::Eject => bmc.eject(&u, &jpath).await,
        BmcAction::Status => match bmc.status(&u.ours).await.error {
            Some(e) => Err(anyhow!("{e}")),
            None => Ok(Outcome::default()),
        },
    };
    let notes = bmc.take_notes();
    bmc.close().await;
    res.map(|o| Outcome { notes, ..o })
}

/// `bmc status` as a table.
pub fn status_table(rows: &[NodeStatus]) -> String {
    let mut out = format!(
        "{:<16} {:<10} {:<18} {:<9} {:<40} {:<40} {}\n",
        "NODE", "POWER", "BOOT OVERRIDE", "MEDIA", "IMAGE", "SLOT", "BMC"
    );
    for r in rows {
        if let Some(e) = &r.error {
            let _ = writeln!(out, "{:<16} error: {e}", r.node);
            continue;
        }
        let boot = format!("{} ({})", r.boot_target, r.boot_enabled);
        let media = if r.inserted { "inserted" } else { "empty" };
        let bmc = [r.manufacturer.as_str(), r.model.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let bmc = match (bmc.is_empty(), r.firmware.is_empty()) {
            (true, true) => "-".to_string(),
            (_, true) => bmc,
            (_, false) => format!("{bmc} (firmware {})", r.firmware)
                .trim()
                .to_string(),
        };
        let _ = writeln!(
            out,
            "{:<16} {:<10} {:<18} {:<9} {:<40} {:<40} {}",
            r.node,
            r.power,
            boot,
            media,
            r.image.as_deref().unwrap_or("-"),
            r.media,
            bmc
        );
    }
    out
}

/// `crc-appliance bmc up|down|eject|status [NODE] [--json]`.
pub async fn run(
    plan: &Plan,
    action: BmcAction,
    node: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let c = &plan.cluster;
    let nodes = select(c, node)?;
    let mut failed = Vec::new();
    if action == BmcAction::Status {
        let mut rows = Vec::new();
        for n in &nodes {
            rows.push(match Bmc::open(n) {
                Ok(Some(b)) => {
                    let row = b.status(&urls(c, n).ours).await;
                    b.close().await;
                    row
                }
                Ok(None) => continue,
                Err(e) => NodeStatus {
                    node: n.name.clone(),
                    error: Some(format!("{e:#}")),
                    ..NodeStatus::default()
                },
            });
        }
        if json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            print!("{}", status_table(&rows));
        }
        failed.extend(rows.iter().filter_map(|r| r.error.clone()));
    } else {
        for n in &nodes {
            match act(c, n, action).await {
                Ok(o) => {
                    for l in &o.notes {
                        println!("{}: note: {l}", n.name);
                    }
                    if o.lines.is_empty() {
                        println!("{}: nothing to do", n.name);
                    }
                    for l in o.lines {
                        println!("{}: {l}", n.name);
                    }
                }
                Err(e) => failed.push(format!("{e:#}")),
            }
        }
    }
    match failed.len() {
        0 => Ok(()),
        1 if nodes.len() == 1 => Err(anyhow!("{}", failed[0])),
        k => Err(anyhow!(
            "{k} of {} BMCs failed:\n  {}",
            nodes.len(),
            failed.join("\n  ")
        )),
    }
}

/// How often `serve` tries `bmc up` for a `startOnServe` node.
pub const START_ATTEMPTS: u32 = 10;
/// Pause between those attempts.
pub const START_RETRY: Duration = Duration::from_secs(30);

/// `serve`: once every service is up (the BMC fetches the ISO from us),
/// run `up` for each node with `bmc.startOnServe`, retrying failures
/// [`START_ATTEMPTS`] times; errors are logged and never stop the appliance.
/// Runs once per `serve` (a reload does not re-run it). A node this run
/// powered on or restarted is a `bmcPowerOn` step of its install timeline
/// (one found already booted from its ISO is not: nothing happened).
pub fn start_on_serve(
    plan: &Arc<Plan>,
    events: crate::timeline::Events,
    tasks: &crate::runtime::service::Tasks,
    ha: &crate::runtime::ha::HaView,
) {
    let names: Vec<String> = plan
        .cluster
        .nodes
        .iter()
        .filter(|n| n.bmc.as_ref().is_some_and(|b| b.start_on_serve))
        .map(|n| n.name.clone())
        .collect();
    for name in names {
        let plan = plan.clone();
        let stop = tasks.shutdown_token();
        let (events, ha) = (events.clone(), ha.clone());
        tasks.spawn_oneshot(format!("bmc startOnServe {name}"), async move {
            let c = &plan.cluster;
            let Some(node) = c.nodes.iter().find(|n| n.name == name) else {
                return Ok(());
            };
            // HA: only the member holding the VIPs drives installs; the
            // other waits until it takes them over (runtime::ha).
            if !ha.holds_vips() {
                info!("bmc: {name}: startOnServe waits until this member holds the VIPs");
            }
            if !ha.until_holder(&stop).await {
                return Ok(());
            }
            for attempt in 1..=START_ATTEMPTS {
                let res = tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    r = act(c, node, BmcAction::Up) => r,
                };
                match res {
                    Ok(o) => {
                        for l in &o.notes {
                            info!("bmc: {name}: note: {l}");
                        }
                        for l in &o.lines {
                            info!("bmc: {name}: {l}");
                        }
                        if o.lines.is_empty() {
                            info!("bmc: {name}: already booted from {}", iso_url(c, node));
                        }
                        if o.reset {
                            events.record(crate::timeline::Event::BmcPowerOn { node: name });
                        }
                        return Ok(());
                    }
                    Err(e) => {
                        warn!("bmc: {name}: up failed (attempt {attempt}/{START_ATTEMPTS}): {e:#}")
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(START_RETRY) => {}
                }
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod rule_tests;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn table_shows_state_and_errors() {
        let rows = vec![
            NodeStatus {
                node: "master-0".into(),
                power: "On".into(),
                boot_target: "Cd".into(),
                boot_enabled: "Once".into(),
                media: "/redfish/v1/Systems/1/VirtualMedia/Cd".into(),
                inserted: true,
                image: Some("http://10.0.0.1:8080/boot/master-0.iso".into()),
                manufacturer: "Dell Inc.".into(),
                model: "PowerEdge R750".into(),
                firmware: "6.00.30.00".into(),
                error: None,
            },
            NodeStatus {
                node: "worker-0".into(),
                error: Some("BMC of worker-0 unreachable: cannot connect".into()),
                ..NodeStatus::default()
            },
        ];
        let t = status_table(&rows);
        assert!(t.contains("master-0         On         Cd (Once)          inserted  http://10.0.0.1:8080/boot/master-0.iso"), "{t}");
        assert!(
            t.contains("/redfish/v1/Systems/1/VirtualMedia/Cd")
                && t.contains("Dell Inc. PowerEdge R750 (firmware 6.00.30.00)"),
            "{t}"
        );
        assert!(
            t.contains("worker-0         error: BMC of worker-0 unreachable"),
            "{t}"
        );
    }
}
