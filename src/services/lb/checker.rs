//! The health check loop of one backend, and the bootstrap watch: when
//! bootstrap is complete (evidence from the checks, or the operator's
//! marker) and when the bootstrap node leaves the pools.
//!
//! A check loop runs from the moment its backend enters the pools until a
//! reload drops the backend (its `retired` token) or the LB shuts down. It
//! reads the health settings and the prober of the current generation
//! ([`Generation`]) at each tick, so a reload that changes `interval` or
//! `caFile` applies to the next check without resetting the backend's
//! state. Flips are logged once. The bootstrap watch loads the generation
//! once per tick too: the pools, marker and removal mode it looks at are
//! of one plan.
//!
//! The install timeline hears from here when things happen, once each: a
//! backend's health flip (healthy in its pool; an api backend going down,
//! a single-node master's reboot), bootstrap completion, the bootstrap's
//! removal and a stale marker appearing or going away ([`Told`]).
//!
//! The probe is a trait ([`Probe`](super::generation::Probe), after pingora's `HealthCheck`) so the
//! loop is tested in-process with scripted results and paused time.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::generation::Generation;
use super::health::{self, Health};
use super::state::{Backend, NodeMemory, PoolKind, Pools};
use crate::model::cluster::{RemoveBootstrap, Role};
use crate::runtime::lograte::LogRate;
use crate::runtime::probe::ProbeError;
use crate::runtime::sync::LockExt as _;
use crate::services::lb::status::BootstrapCompleteBy;
use crate::timeline::prober::health_event;
use crate::timeline::{Event, Events};

/// Local errors of one backend's checks: at most one line a minute.
const LOCAL_ERROR_LOG: std::time::Duration = std::time::Duration::from_secs(60);

/// Resolves when a check loop must end: its task's token, or its backend
/// retired by a reload (then the token is cancelled too, so the end counts
/// as asked for and does not fail the service).
async fn halted(stop: &CancellationToken, retired: &CancellationToken) {
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = retired.cancelled() => stop.cancel(),
    }
}

/// Check `b` every `interval` until `stop` (shutdown) or its retirement;
/// each flip is recorded in `events`.
pub async fn check_loop(
    b: Arc<Backend>,
    current: Arc<ArcSwap<Generation>>,
    events: Events,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let pool = b.key.pool;
    let mut next = tokio::time::Instant::now();
    // One per backend (each loop has its own); on tokio's clock, which
    // the tests pause.
    let local_errors = LogRate::new("lb health check", LOCAL_ERROR_LOG);
    loop {
        tokio::select! {
            _ = halted(&stop, &b.retired) => return Ok(()),
            _ = tokio::time::sleep_until(next) => {}
        }
        // This tick's settings: the current generation's, held only as
        // long as the tick (not the whole generation).
        let s = current.load().checks.clone();
        let h = s.health;
        next += h.interval;
        if b.state().removed {
            // A retired bootstrap is not checked; if the operator brings it
            // back it starts unhealthy and must rise again.
            let mut st = b.state();
            st.health = Health::new(h.rise, h.fall);
        } else {
            let result = tokio::select! {
                _ = halted(&stop, &b.retired) => return Ok(()),
                r = tokio::time::timeout(h.timeout, s.prober_for(pool).probe(&b.key.check, b.key.addr)) => match r {
                    Ok(r) => r,
                    Err(_) => Err(ProbeError::Timeout(h.timeout)),
                },
            };
            if let Err(e) = &result
                && e.is_local()
            {
                // Our own shortage (EMFILE …) says nothing about the backend:
                // its state stays; logged at most once per backend and minute.
                let now = tokio::time::Instant::now().into_std();
                if let Some(tail) = local_errors.check_at("local error", None, now) {
                    warn!(%pool, node = %b.key.node, "lb health check not run: {e} (a local error; the backend keeps its state){tail}");
                }
                continue_after(&mut next);
                continue;
            }
            // The text `/status` (`lastError`) and the log show.
            let why = result.as_ref().err().map(ToString::to_string);
            let flip = {
                let mut st = b.state();
                let flip = st.health.observe(why.is_none());
                if why.is_some() {
                    st.last_error.clone_from(&why);
                }
                flip
            };
            let (node, addr, check) = (&b.key.node, b.key.addr, &b.key.check);
            match flip {
                Some(true) => info!(%pool, %node, %addr, %check, "lb backend is healthy"),
                Some(false) => warn!(
                    %pool, %node, %addr, %check,
                    error = why.as_deref().unwrap_or("?"),
                    "lb backend is unhealthy"
                ),
                None => {}
            }
            if let Some(ev) = flip.and_then(|up| health_event(b.key.pool, &b.key.node, up)) {
                events.record(ev);
            }
        }
        continue_after(&mut next);
    }
}

/// Skip missed ticks instead of bursting after a stall.
fn continue_after(next: &mut tokio::time::Instant) {
    let now = tokio::time::Instant::now();
    if *next < now {
        *next = now;
    }
}

/// Whether `<ignitionDir>/bootstrap-complete` counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Marker {
    #[default]
    Absent,
    /// Present and not older than the ignition files.
    Fresh,
    /// Present but older than the newest ignition file: ignored.
    Stale,
}

/// What the bootstrap watch found, read by `/status`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BootstrapReport {
    pub marker: Marker,
    /// Latched: once complete, the bootstrap stays complete.
    pub complete: Option<BootstrapCompleteBy>,
    /// The modification time of the stale marker last warned about (one
    /// warning per marker, not per tick).
    warned_stale: Option<SystemTime>,
}

/// The bootstrap watch's findings (its settings are the current
/// generation's).
#[derive(Default)]
pub struct BootstrapWatch {
    pub report: Mutex<BootstrapReport>,
}

impl BootstrapWatch {
    pub fn report(&self) -> BootstrapReport {
        *self.report.locked()
    }
}

/// What the bootstrap watch told the install timeline so far.
#[derive(Debug, Default)]
struct Told {
    complete: bool,
    removed: bool,
    stale: Option<String>,
}

impl Told {
    /// The events of what changed since the last look: completion and
    /// removal once (the timeline keeps their first time), the stale
    /// marker whenever it appears, changes or goes away.
    fn news(&mut self, complete: bool, removed: bool, stale: Option<String>) -> Vec<Event> {
        let mut evs = Vec::new();
        if complete && !self.complete {
            self.complete = true;
            evs.push(Event::BootstrapComplete);
        }
        if removed && !self.removed {
            self.removed = true;
            evs.push(Event::BootstrapRemoved);
        }
        if stale != self.stale {
            self.stale.clone_from(&stale);
            evs.push(Event::StaleMarker { path: stale });
        }
        evs
    }
}

/// Decide the bootstrap's completion and retirement every `interval`
/// ([`bootstrap_tick`]); the marker is looked at here, once per tick; what
/// changed is recorded in `events`.
pub async fn bootstrap_watch(
    current: Arc<ArcSwap<Generation>>,
    memory: Arc<NodeMemory>,
    watch: Arc<BootstrapWatch>,
    events: Events,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut told = Told::default();
    loop {
        let interval = {
            let g = current.load();
            let path = g.marker();
            let (marker, mtime) = look_at_marker(&path);
            let auto = g.cfg().remove_bootstrap == RemoveBootstrap::Auto;
            let news = {
                let mut report = watch.report.locked();
                note_marker(&mut report, marker, mtime, &path);
                let removed = bootstrap_tick(&g.pools, &memory, auto, &mut report);
                let stale = (marker == Marker::Stale).then(|| path.display().to_string());
                told.news(report.complete.is_some(), removed, stale)
            };
            for ev in news {
                events.record(ev);
            }
            g.checks.health.interval
        };
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// The marker's state and modification time: fresh or stale against the
/// newest `*.ign` file beside it ([`health::marker_fresh`]). Unreadable
/// times count as fresh (the marker is the operator's override).
fn look_at_marker(path: &Path) -> (Marker, Option<SystemTime>) {
    let Ok(meta) = std::fs::metadata(path) else {
        return (Marker::Absent, None);
    };
    let Ok(mtime) = meta.modified() else {
        return (Marker::Fresh, None);
    };
    let newest = path
        .parent()
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "ign"))
        .filter_map(|e| std::fs::metadata(e.path()).and_then(|m| m.modified()).ok())
        .max();
    if health::marker_fresh(mtime, newest) {
        (Marker::Fresh, Some(mtime))
    } else {
        (Marker::Stale, Some(mtime))
    }
}

/// Record the marker's state; a stale marker is logged once per marker.
fn note_marker(r: &mut BootstrapReport, marker: Marker, mtime: Option<SystemTime>, path: &Path) {
    r.marker = marker;
    if marker == Marker::Stale && r.warned_stale != mtime {
        r.warned_stale = mtime;
        if r.complete.is_none() {
            warn!(
                "lb: ignoring {}: it is older than the ignition files beside it (left from an earlier install?); bootstrap-complete is detected from the LB's health checks, or touch the file again to declare it by hand",
                path.display()
            );
        }
    }
}

/// The healthy flag of every master of pool `kind`, in pool order: healthy
/// when one of its backends is (a dual-stack node has one per family).
fn masters_healthy(pools: &Pools, kind: PoolKind) -> Vec<bool> {
    let Some(p) = pools.get(kind) else {
        return Vec::new();
    };
    let mut out: Vec<(&str, bool)> = Vec::new();
    for b in p.backends.iter().filter(|b| b.role == Role::Master) {
        let healthy = b.state().health.healthy();
        match out.iter_mut().find(|(n, _)| *n == b.key.node) {
            Some((_, h)) => *h |= healthy,
            None => out.push((&b.key.node, healthy)),
        }
    }
    out.into_iter().map(|(_, h)| h).collect()
}

/// Why bootstrap is complete now, if it is: the evidence of
/// [`health::bootstrap_api_gone`] (a removed bootstrap is not checked, so
/// its reset health is no evidence), else a fresh marker.
fn completion(
    pools: &Pools,
    boot: &[&Arc<Backend>],
    marker: Marker,
) -> Option<BootstrapCompleteBy> {
    let gone = boot
        .iter()
        .find(|b| b.key.pool == PoolKind::Api)
        .is_some_and(|b| {
            let s = b.state();
            !s.removed
                && health::bootstrap_api_gone(
                    &s.health,
                    &masters_healthy(pools, PoolKind::Api),
                    &masters_healthy(pools, PoolKind::MachineConfig),
                )
        });
    if gone {
        Some(BootstrapCompleteBy::Evidence)
    } else if marker == Marker::Fresh {
        Some(BootstrapCompleteBy::Marker)
    } else {
        None
    }
}

/// One tick of the bootstrap watch: latch completion, then retire the
/// bootstrap once [`health::bootstrap_removable`] holds (completion counts
/// only with `auto`). True when the bootstrap is (now) removed.
pub fn bootstrap_tick(
    pools: &Pools,
    memory: &NodeMemory,
    auto: bool,
    report: &mut BootstrapReport,
) -> bool {
    let boot: Vec<&Arc<Backend>> = pools
        .backends()
        .filter(|(_, b)| b.role == Role::Bootstrap)
        .map(|(_, b)| b)
        .collect();
    let Some(first) = boot.first() else {
        return false;
    };
    if report.complete.is_none() {
        report.complete = completion(pools, &boot, report.marker);
        match report.complete {
            Some(BootstrapCompleteBy::Evidence) => info!(
                "lb: bootstrap complete: every master is healthy in the api and machine-config pools and the bootstrap's API went away (bootkube tore the bootstrap control plane down)"
            ),
            Some(BootstrapCompleteBy::Marker) => {
                info!("lb: bootstrap complete: the bootstrap-complete marker is present")
            }
            None => {}
        }
    }
    let flags = memory.get(&first.key.node);
    if flags.removed {
        return true;
    }
    if flags.kept && !flags.disabled {
        return false;
    }
    let complete = auto && !flags.kept && report.complete.is_some();
    let masters = masters_healthy(pools, PoolKind::Api);
    if !health::bootstrap_removable(flags.disabled, complete, &masters) {
        return false;
    }
    memory.update(&first.key.node, |f| {
        f.removed = true;
        f.kept = false;
    });
    for b in &boot {
        b.state().removed = true;
    }
    let why = match (flags.disabled, report.complete) {
        (true, _) => "disabled by the operator",
        (false, Some(BootstrapCompleteBy::Marker)) => "bootstrap-complete marker present",
        (false, _) => "bootstrap complete: its API went away",
    };
    info!("lb: bootstrap removed from every pool ({why}, all masters healthy in the api pool)");
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cluster::HealthCfg;
    use crate::plan::Check;
    use crate::runtime::probe::{ProbeError, StatusLineError};
    use crate::services::lb::generation::{CheckSettings, Probe, test_plan};
    use crate::services::lb::state::{BackendKey, NodeFlags};
    use async_trait::async_trait;
    use std::net::SocketAddr;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Scripted probe results, the last one repeating.
    struct Script {
        results: Mutex<Vec<bool>>,
        calls: AtomicUsize,
    }

    #[async_trait]
    impl Probe for Script {
        async fn probe(&self, _: &Check, _: SocketAddr) -> Result<(), ProbeError> {
            let i = self.calls.fetch_add(1, Ordering::SeqCst);
            let r = self.results.locked();
            let ok = *r.get(i).or(r.last()).unwrap_or(&false);
            if ok {
                Ok(())
            } else {
                Err(ProbeError::BadResponse(StatusLineError::BadLine(
                    "scripted failure".into(),
                )))
            }
        }
    }

    const INTERVAL: Duration = Duration::from_secs(2);

    fn health(rise: u32, fall: u32) -> HealthCfg {
        HealthCfg {
            interval: INTERVAL,
            timeout: Duration::from_secs(1),
            rise,
            fall,
        }
    }

    fn backend(node: &str, role: Role, pool: PoolKind, h: &HealthCfg) -> Arc<Backend> {
        let key = BackendKey {
            pool,
            node: node.into(),
            addr: "127.0.0.1:1".parse().unwrap(),
            check: Check::Tcp,
        };
        Arc::new(Backend::new(key, role, h, NodeFlags::default()))
    }

    /// A generation of a test plan (marker under `base`) with these
    /// pools and check settings.
    fn generation(base: &Path, h: HealthCfg, prober: Arc<dyn Probe>, pools: Pools) -> Generation {
        Generation {
            plan: test_plan(base, ""),
            pools,
            checks: Arc::new(CheckSettings {
                health: h,
                probers: Default::default(),
                prober,
            }),
        }
    }

    /// The current generation of check loops that need no pools.
    fn settings(h: HealthCfg, prober: Arc<dyn Probe>) -> Arc<ArcSwap<Generation>> {
        let g = generation(Path::new("/"), h, prober, Pools::default());
        Arc::new(ArcSwap::from_pointee(g))
    }

    /// A timeline of a cluster with the nodes these tests name.
    fn events() -> Events {
        use crate::config::fixture::{BOOTSTRAP, MASTER_0, plan, worker};
        let p = plan(&[BOOTSTRAP, MASTER_0, &worker("w")], "");
        let r = crate::timeline::Recorder::new(&p);
        r.recorded();
        r
    }

    fn script(results: &[bool]) -> Arc<Script> {
        Arc::new(Script {
            results: Mutex::new(results.to_vec()),
            calls: AtomicUsize::new(0),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn rises_after_rise_checks_and_falls_after_fall() {
        let h = health(3, 2);
        let b = backend("w", Role::Worker, PoolKind::IngressHttp, &h);
        let probe = script(&[true, true, true, true, false, false, true]);
        let stop = CancellationToken::new();
        tokio::spawn(check_loop(
            b.clone(),
            settings(h, probe.clone()),
            events(),
            stop.clone(),
        ));
        // Checks at t = 0, 2, 4, …: healthy after the third.
        tokio::time::sleep(INTERVAL * 1 + Duration::from_millis(10)).await;
        assert!(!b.ready(), "2 of 3 successes");
        tokio::time::sleep(INTERVAL * 1).await;
        assert!(b.ready(), "3 successes");
        // Checks 4 (ok), 5 (fail), 6 (fail): unhealthy after the sixth.
        tokio::time::sleep(INTERVAL * 2).await;
        assert!(b.ready(), "one failure is not enough");
        tokio::time::sleep(INTERVAL * 1).await;
        assert!(!b.ready(), "two failures");
        assert_eq!(
            b.state().last_error.as_deref(),
            Some("bad status line \"scripted failure\"")
        );
        tokio::time::sleep(INTERVAL).await;
        assert!(!b.ready(), "one success of three");
        tokio::time::sleep(INTERVAL * 2).await;
        assert!(b.ready(), "three successes again");
        stop.cancel();
    }

    /// The timeline hears of a flip once, not at every check: up, then
    /// (api pool) down.
    #[tokio::test(start_paused = true)]
    async fn a_health_flip_is_recorded_once() {
        let h = health(2, 2);
        let b = backend("master-0", Role::Master, PoolKind::Api, &h);
        let mut results = vec![true; 10];
        results.extend([false; 10]);
        let probe = script(&results);
        let ev = events();
        let stop = CancellationToken::new();
        tokio::spawn(check_loop(
            b.clone(),
            settings(h, probe),
            ev.clone(),
            stop.clone(),
        ));
        tokio::time::sleep(INTERVAL * 9 + Duration::from_millis(10)).await;
        let node = || "master-0".to_string();
        let healthy = Event::Healthy {
            node: node(),
            pool: crate::timeline::Pool::Api,
        };
        assert_eq!(ev.recorded(), [healthy], "ten successes, one flip");
        tokio::time::sleep(INTERVAL * 10).await;
        assert_eq!(ev.recorded(), [Event::ApiDown { node: node() }]);
        assert!(ev.view().nodes[1].api_healthy.is_some());
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_of_settings_keeps_state_and_changes_the_pace() {
        let h = health(1, 1);
        let b = backend("w", Role::Worker, PoolKind::IngressHttp, &h);
        let probe = script(&[true]);
        let s = settings(h, probe.clone());
        let ev = events();
        let stop = CancellationToken::new();
        tokio::spawn(check_loop(b.clone(), s.clone(), ev.clone(), stop.clone()));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(b.ready());
        let slow = HealthCfg {
            interval: Duration::from_secs(10),
            ..h
        };
        s.store(Arc::new(generation(
            Path::new("/"),
            slow,
            probe.clone(),
            Pools::default(),
        )));
        let before = probe.calls.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(30)).await;
        let after = probe.calls.load(Ordering::SeqCst);
        assert!(b.ready(), "still healthy after the settings changed");
        assert!(
            (3..=5).contains(&(after - before)),
            "about one check per 10 s: {}",
            after - before
        );
        stop.cancel();
    }

    /// Out of descriptors here (EMFILE) is not the backend's fault: a
    /// healthy backend stays healthy however long it lasts.
    #[tokio::test(start_paused = true)]
    async fn local_errors_do_not_count_against_the_backend() {
        struct Emfile(AtomicUsize);
        #[async_trait]
        impl Probe for Emfile {
            async fn probe(&self, _: &Check, _: SocketAddr) -> Result<(), ProbeError> {
                if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                    Ok(())
                } else {
                    Err(ProbeError::Connect(std::io::Error::from_raw_os_error(
                        libc::EMFILE,
                    )))
                }
            }
        }
        let h = health(1, 1);
        let b = backend("w", Role::Worker, PoolKind::IngressHttp, &h);
        let probe = Arc::new(Emfile(AtomicUsize::new(0)));
        let stop = CancellationToken::new();
        tokio::spawn(check_loop(
            b.clone(),
            settings(h, probe.clone()),
            events(),
            stop.clone(),
        ));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(b.ready());
        tokio::time::sleep(INTERVAL * 10).await;
        assert!(probe.0.load(Ordering::SeqCst) >= 10, "checks kept running");
        assert!(b.ready(), "EMFILE marked the backend down");
        assert_eq!(b.state().health.failures(), 0);
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_retired_backend_stops_checking() {
        let h = health(1, 1);
        let b = backend("w", Role::Worker, PoolKind::IngressHttp, &h);
        let probe = script(&[true]);
        let task = tokio::spawn(check_loop(
            b.clone(),
            settings(h, probe.clone()),
            events(),
            b.retired.clone(),
        ));
        tokio::time::sleep(Duration::from_millis(10)).await;
        b.retired.cancel();
        task.await.unwrap().unwrap();
        let n = probe.calls.load(Ordering::SeqCst);
        tokio::time::sleep(INTERVAL * 5).await;
        assert_eq!(probe.calls.load(Ordering::SeqCst), n);
    }

    fn pools_with(boot: &Arc<Backend>, masters: &[Arc<Backend>]) -> Pools {
        let mut backends = vec![boot.clone()];
        backends.extend(masters.iter().cloned());
        Pools {
            list: vec![pool(PoolKind::Api, backends)],
        }
    }

    fn pool(kind: PoolKind, backends: Vec<Arc<Backend>>) -> crate::services::lb::state::Pool {
        crate::services::lb::state::Pool {
            kind,
            frontend: "127.0.0.1:6443".parse().unwrap(),
            frontend_v6: None,
            check: Check::Tcp,
            backends,
            rr: Default::default(),
        }
    }

    fn tick(pools: &Pools, memory: &NodeMemory, r: &mut BootstrapReport) -> bool {
        bootstrap_tick(pools, memory, true, r)
    }

    #[tokio::test(start_paused = true)]
    async fn bootstrap_is_removed_when_disabled_and_masters_healthy_and_can_come_back() {
        let h = health(1, 1);
        let boot = backend("bootstrap", Role::Bootstrap, PoolKind::Api, &h);
        let m0 = backend("master-0", Role::Master, PoolKind::Api, &h);
        let m1 = backend("master-1", Role::Master, PoolKind::Api, &h);
        let pools = pools_with(&boot, &[m0.clone(), m1.clone()]);
        let memory = NodeMemory::default();
        let mut r = BootstrapReport::default();
        memory.update("bootstrap", |f| f.disabled = true);
        boot.state().enabled = false;
        m0.state().health.observe(true);
        assert!(!tick(&pools, &memory, &mut r), "master-1 not healthy");
        m1.state().health.observe(true);
        assert!(tick(&pools, &memory, &mut r));
        assert!(boot.state().removed && memory.get("bootstrap").removed);
        assert_eq!(r.complete, None, "an operator's removal is no evidence");
        // The operator brings it back (what `lb enable bootstrap` does).
        memory.update("bootstrap", |f| {
            *f = NodeFlags {
                kept: true,
                ..NodeFlags::default()
            }
        });
        {
            let mut s = boot.state();
            s.removed = false;
            s.enabled = true;
        }
        assert!(!tick(&pools, &memory, &mut r), "kept until disabled again");
        assert!(!boot.state().removed);
    }

    /// bootstrap, master-0 and master-1 in the api and machine-config pools.
    struct Cluster {
        pools: Pools,
        boot_api: Arc<Backend>,
        masters: Vec<Arc<Backend>>,
    }

    fn cluster() -> Cluster {
        let h = health(1, 1);
        let mut list = Vec::new();
        let mut boot_api = None;
        let mut masters = Vec::new();
        for kind in [PoolKind::Api, PoolKind::MachineConfig] {
            let boot = backend("bootstrap", Role::Bootstrap, kind, &h);
            let ms: Vec<_> = ["master-0", "master-1"]
                .iter()
                .map(|m| backend(m, Role::Master, kind, &h))
                .collect();
            if kind == PoolKind::Api {
                boot_api = Some(boot.clone());
            }
            masters.extend(ms.iter().cloned());
            let mut all = vec![boot];
            all.extend(ms);
            list.push(pool(kind, all));
        }
        Cluster {
            pools: Pools { list },
            boot_api: boot_api.unwrap(),
            masters,
        }
    }

    #[test]
    fn the_bootstrap_api_going_away_completes_bootstrap_and_removes_it() {
        let c = cluster();
        let memory = NodeMemory::default();
        let mut r = BootstrapReport::default();
        // Booting: the bootstrap's API never up yet, masters not either.
        assert!(!tick(&c.pools, &memory, &mut r));
        c.boot_api.state().health.observe(true);
        for m in &c.masters[..3] {
            m.state().health.observe(true);
        }
        // The bootstrap goes away while master-1's MCS is not serving yet.
        c.boot_api.state().health.observe(false);
        assert!(!tick(&c.pools, &memory, &mut r), "a master's MCS is down");
        assert_eq!(r.complete, None);
        c.masters[3].state().health.observe(true);
        assert!(tick(&c.pools, &memory, &mut r));
        assert_eq!(r.complete, Some(BootstrapCompleteBy::Evidence));
        for (_, b) in c
            .pools
            .backends()
            .filter(|(_, b)| b.role == Role::Bootstrap)
        {
            assert!(b.state().removed, "{} left every pool", b.key.pool);
        }
        // Latched: a master flapping later does not undo it.
        c.masters[0].state().health.observe(false);
        assert!(tick(&c.pools, &memory, &mut r));
        assert_eq!(r.complete, Some(BootstrapCompleteBy::Evidence));
    }

    #[test]
    fn manual_removal_completes_but_keeps_the_bootstrap_until_disabled() {
        let c = cluster();
        let memory = NodeMemory::default();
        let mut r = BootstrapReport::default();
        c.boot_api.state().health.observe(true);
        for m in &c.masters {
            m.state().health.observe(true);
        }
        c.boot_api.state().health.observe(false);
        assert!(!bootstrap_tick(&c.pools, &memory, false, &mut r));
        assert_eq!(r.complete, Some(BootstrapCompleteBy::Evidence));
        assert!(!c.boot_api.state().removed);
        memory.update("bootstrap", |f| f.disabled = true);
        assert!(bootstrap_tick(&c.pools, &memory, false, &mut r));
    }

    #[test]
    fn a_stale_marker_is_ignored_and_a_fresh_one_completes() {
        let c = cluster();
        let memory = NodeMemory::default();
        for m in &c.masters {
            m.state().health.observe(true);
        }
        let mut r = BootstrapReport {
            marker: Marker::Stale,
            ..BootstrapReport::default()
        };
        assert!(!tick(&c.pools, &memory, &mut r));
        assert_eq!(r.complete, None);
        r.marker = Marker::Fresh;
        assert!(tick(&c.pools, &memory, &mut r));
        assert_eq!(r.complete, Some(BootstrapCompleteBy::Marker));
    }

    #[test]
    fn a_removed_bootstrap_is_no_evidence() {
        let c = cluster();
        let memory = NodeMemory::default();
        let mut r = BootstrapReport::default();
        for m in &c.masters {
            m.state().health.observe(true);
        }
        c.boot_api.state().health.observe(true);
        c.boot_api.state().health.observe(false);
        c.boot_api.state().removed = true;
        memory.update("bootstrap", |f| f.kept = true);
        assert!(!tick(&c.pools, &memory, &mut r));
        assert_eq!(r.complete, None);
    }

    #[test]
    fn the_marker_is_stale_when_older_than_an_ignition_file() {
        let d = tempfile::tempdir().unwrap();
        let marker = d.path().join("bootstrap-complete");
        assert_eq!(look_at_marker(&marker).0, Marker::Absent);
        std::fs::write(&marker, "").unwrap();
        assert_eq!(
            look_at_marker(&marker).0,
            Marker::Fresh,
            "no ignition files"
        );
        let ign = d.path().join("master.ign");
        std::fs::write(&ign, "{}").unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&marker)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(look_at_marker(&marker).0, Marker::Stale);
        std::fs::File::options()
            .write(true)
            .open(&marker)
            .unwrap()
            .set_modified(SystemTime::now() + Duration::from_secs(1))
            .unwrap();
        assert_eq!(look_at_marker(&marker).0, Marker::Fresh, "touched again");
    }

    /// Probe results per backend address.
    struct ByAddr(Mutex<std::collections::HashMap<SocketAddr, bool>>);

    #[async_trait]
    impl Probe for ByAddr {
        async fn probe(&self, _: &Check, addr: SocketAddr) -> Result<(), ProbeError> {
            if self.0.locked().get(&addr).copied().unwrap_or(false) {
                Ok(())
            } else {
                Err(ProbeError::BadResponse(StatusLineError::Closed))
            }
        }
    }

    /// The check loops and the watch together, in paused time: the
    /// bootstrap's API stops answering once the masters serve, and within
    /// `fall` checks plus one watch tick it is complete and gone.
    #[tokio::test(start_paused = true)]
    async fn the_watch_removes_the_bootstrap_after_its_api_goes_away() {
        let h = health(1, 2);
        let addr = |i: u8| -> SocketAddr { format!("127.0.0.{i}:1").parse().unwrap() };
        let mut list = Vec::new();
        let mut all = Vec::new();
        for kind in [PoolKind::Api, PoolKind::MachineConfig] {
            let mut bs = Vec::new();
            for (i, (node, role)) in [("bootstrap", Role::Bootstrap), ("master-0", Role::Master)]
                .into_iter()
                .enumerate()
            {
                let key = BackendKey {
                    pool: kind,
                    node: node.into(),
                    addr: addr(10 * (kind as u8 + 1) + i as u8),
                    check: Check::Tcp,
                };
                bs.push(Arc::new(Backend::new(key, role, &h, NodeFlags::default())));
            }
            all.extend(bs.iter().cloned());
            list.push(pool(kind, bs));
        }
        let up = Arc::new(ByAddr(Mutex::new(
            all.iter().map(|b| (b.key.addr, true)).collect(),
        )));
        let d = tempfile::tempdir().unwrap();
        let g = generation(d.path(), h, up.clone(), Pools { list });
        assert_eq!(g.cfg().remove_bootstrap, RemoveBootstrap::Auto);
        let current = Arc::new(ArcSwap::from_pointee(g));
        let ev = events();
        let stop = CancellationToken::new();
        for b in &all {
            tokio::spawn(check_loop(
                b.clone(),
                current.clone(),
                ev.clone(),
                stop.clone(),
            ));
        }
        let memory = Arc::new(NodeMemory::default());
        let watch = Arc::new(BootstrapWatch::default());
        tokio::spawn(bootstrap_watch(
            current,
            memory.clone(),
            watch.clone(),
            ev.clone(),
            stop.clone(),
        ));
        tokio::time::sleep(INTERVAL * 5).await;
        assert_eq!(watch.report().complete, None, "the bootstrap still serves");
        assert!(!memory.get("bootstrap").removed);
        up.0.locked().insert(addr(10), false);
        tokio::time::sleep(INTERVAL * 4).await;
        assert_eq!(watch.report().complete, Some(BootstrapCompleteBy::Evidence));
        assert!(memory.get("bootstrap").removed);
        assert!(
            all.iter()
                .filter(|b| b.role == Role::Bootstrap)
                .all(|b| !b.ready())
        );
        assert!(
            all.iter()
                .filter(|b| b.role == Role::Master)
                .all(|b| b.ready())
        );
        // Each told once, though the watch looked every interval.
        let told: Vec<Event> = ev
            .recorded()
            .into_iter()
            .filter(|e| !matches!(e, Event::Healthy { .. } | Event::ApiDown { .. }))
            .collect();
        assert_eq!(told, [Event::BootstrapComplete, Event::BootstrapRemoved]);
        stop.cancel();
    }

    /// A stale marker is told when it appears and when it goes away.
    #[test]
    fn the_watch_tells_each_change_once() {
        let mut t = Told::default();
        assert!(t.news(false, false, None).is_empty());
        let stale = || Some("/ign/bootstrap-complete".to_string());
        assert_eq!(
            t.news(false, false, stale()),
            [Event::StaleMarker { path: stale() }]
        );
        assert!(t.news(false, false, stale()).is_empty());
        assert_eq!(
            t.news(true, false, None),
            [Event::BootstrapComplete, Event::StaleMarker { path: None }]
        );
        assert_eq!(t.news(true, true, None), [Event::BootstrapRemoved]);
        assert!(t.news(true, true, None).is_empty());
        assert!(t.news(true, false, None).is_empty(), "a revived bootstrap");
    }
}
