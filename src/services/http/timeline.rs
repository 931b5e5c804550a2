//! What the HTTP service tells the install timeline outside a request:
//! its install state follows the machine-config connections the LB
//! records ([`follow_machine_config`]: a subscription, no polling), and
//! the bootstrap-in-place Ignition's write time ([`watch_bootstrap_in_place`]).
//!
//! Invariants: the install state hears every machine-config connection
//! from a node's address once, when it is recorded (here or by the HA
//! peer), and again for every node at each commit; the file's time is
//! recorded only when it changes (appears, is rewritten, goes away, or
//! the cluster stops or starts being single-node), within
//! [`BIP_WATCH`] — the one timer here: a file rewritten by the operator is
//! no event any service sees.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use arc_swap::ArcSwap;
use tokio_util::sync::CancellationToken;

use super::Ctx;
use crate::model::cluster::Cluster;
use crate::plan::Plan;
use crate::timeline::{Event, Events};

/// How often the bootstrap-in-place Ignition's time is looked at.
pub(super) const BIP_WATCH: Duration = Duration::from_secs(1);

/// Take each machine-config connection the timeline records into the
/// network-boot install state (the installed system's first contact is
/// its install end). Holds `ctx` weakly: the recorder must not keep a
/// stopped service's state alive.
pub(crate) fn follow_machine_config(ctx: &Arc<Ctx>, events: &Events) {
    let weak = Arc::downgrade(ctx);
    events.subscribe(move |ev| {
        if let Event::MachineConfigConnect { node } = ev
            && let Some(ctx) = weak.upgrade()
            && ctx.plan.load().cluster.rhcos.is_some()
        {
            ctx.sync_first_boot(node);
        }
    });
}

/// Every node's latest machine-config connection into the install state
/// (at each commit: a reload may turn network boot on).
pub(crate) fn sync_install_state(ctx: &Ctx) {
    let plan = ctx.plan.load_full();
    if plan.cluster.rhcos.is_some() {
        for n in &plan.cluster.nodes {
            ctx.sync_first_boot(&n.name);
        }
    }
}

/// When the bootstrap-in-place Ignition was written (Unix seconds), for a
/// single-node cluster whose file is readable.
pub(super) fn bip_written(c: &Cluster) -> Option<u64> {
    if !c.mode.is_single_node() {
        return None;
    }
    let f = c.http.ignition_dir.join(crate::model::mode::BIP_IGNITION);
    let m = std::fs::metadata(f).and_then(|m| m.modified()).ok()?;
    m.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// Record [`Event::BootstrapInPlaceWritten`] at start and whenever the
/// file's time changes, looking every [`BIP_WATCH`] until `stop`.
pub(super) async fn watch_bootstrap_in_place(
    plan: Arc<ArcSwap<Plan>>,
    events: Events,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut told = None;
    loop {
        let at = bip_written(&plan.load().cluster);
        if told != Some(at) {
            events.record(Event::BootstrapInPlaceWritten { at });
            told = Some(at);
        }
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(BIP_WATCH) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn plan(dir: &Path) -> Plan {
        use crate::config::fixture::{MASTER_0, plan};
        plan(
            &[MASTER_0],
            &format!("http:\n  ignitionDir: \"{}\"\n", dir.display()),
        )
    }

    /// The file's time is recorded once at start and once per change, not
    /// at every look.
    #[tokio::test(start_paused = true)]
    async fn the_bootstrap_in_place_time_is_recorded_once_per_change() {
        let dir = tempfile::tempdir().unwrap();
        let bip = dir.path().join(crate::model::mode::BIP_IGNITION);
        std::fs::write(&bip, "{}").unwrap();
        let old = std::time::SystemTime::now() - Duration::from_secs(21 * 3600);
        std::fs::File::options()
            .write(true)
            .open(&bip)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let p = plan(dir.path());
        let events = crate::timeline::Recorder::new(&p);
        events.recorded();
        let stop = CancellationToken::new();
        let task = tokio::spawn(watch_bootstrap_in_place(
            Arc::new(ArcSwap::from_pointee(p)),
            events.clone(),
            stop.clone(),
        ));
        tokio::time::sleep(BIP_WATCH * 5).await;
        let at = old.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let written = |at| Event::BootstrapInPlaceWritten { at };
        assert_eq!(events.recorded(), [written(Some(at))]);
        let hints = events.view().hints;
        assert!(
            hints.iter().any(|h| h.message.contains("21 h ago")),
            "{hints:?}"
        );
        std::fs::remove_file(&bip).unwrap();
        tokio::time::sleep(BIP_WATCH * 5).await;
        assert_eq!(events.recorded(), [written(None)]);
        stop.cancel();
        task.await.unwrap().unwrap();
        let hint = events.view().hints;
        assert!(hint.is_empty(), "no file, no hint: {hint:?}");
    }
}
