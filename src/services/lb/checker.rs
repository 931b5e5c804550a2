//! The health check loop of one backend, and the bootstrap removal watch.
//!
//! A check loop runs from the moment its backend enters the pools until a
//! reload drops the backend (its `retired` token) or the LB shuts down. It
//! reads the health settings and the prober current at each tick, so a
//! reload that changes `interval` or `caFile` applies to the next check
//! without resetting the backend's state. Flips are logged once.
//!
//! The probe is a trait ([`Probe`], after pingora's `HealthCheck`) so the
//! loop is tested in-process with scripted results and paused time.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::check::ProbeError;
use super::health::{self, Health};
use super::state::{Backend, NodeMemory, PoolKind, Pools};
use crate::config::{HealthCfg, Role};
use crate::plan::Check;
use crate::runtime::lograte::LogRate;

/// Local errors of one backend's checks: at most one line a minute.
const LOCAL_ERROR_LOG: std::time::Duration = std::time::Duration::from_secs(60);

/// One health probe of a backend.
#[async_trait]
pub trait Probe: Send + Sync {
    async fn probe(&self, check: &Check, addr: SocketAddr) -> Result<(), ProbeError>;
}

#[async_trait]
impl Probe for super::check::Prober {
    async fn probe(&self, check: &Check, addr: SocketAddr) -> Result<(), ProbeError> {
        super::check::Prober::probe(self, check, addr).await
    }
}

/// What the check loops read at every tick; swapped by a reload.
pub struct CheckSettings {
    pub health: HealthCfg,
    /// The prober of each pool (its own CA for HTTPS checks).
    pub probers: std::collections::HashMap<PoolKind, Arc<dyn Probe>>,
    /// For pools without their own.
    pub prober: Arc<dyn Probe>,
}

impl CheckSettings {
    pub fn prober_for(&self, pool: PoolKind) -> &Arc<dyn Probe> {
        self.probers.get(&pool).unwrap_or(&self.prober)
    }
}

/// Check `b` every `interval` until `stop` (retired or shutdown).
pub async fn check_loop(
    b: Arc<Backend>,
    settings: Arc<ArcSwap<CheckSettings>>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let pool = b.key.pool;
    let mut next = tokio::time::Instant::now();
    // One per backend (each loop has its own); on tokio's clock, which
    // the tests pause.
    let local_errors = LogRate::new("lb health check", LOCAL_ERROR_LOG);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep_until(next) => {}
        }
        let s = settings.load_full();
        let h = s.health;
        next += h.interval;
        if b.state().removed {
            // A retired bootstrap is not checked; if the operator brings it
            // back it starts unhealthy and must rise again.
            let mut st = b.state();
            st.health = Health::new(h.rise, h.fall);
        } else {
            let result = tokio::select! {
                _ = stop.cancelled() => return Ok(()),
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
            let result = result.map_err(|e| e.to_string());
            let flip = {
                let mut st = b.state();
                let flip = st.health.observe(result.is_ok());
                if let Err(e) = &result {
                    st.last_error = Some(e.clone());
                }
                flip
            };
            let (node, addr, check) = (&b.key.node, b.key.addr, &b.key.check);
            match flip {
                Some(true) => info!(%pool, %node, %addr, %check, "lb backend is healthy"),
                Some(false) => warn!(
                    %pool, %node, %addr, %check,
                    error = result.as_ref().err().map(String::as_str).unwrap_or("?"),
                    "lb backend is unhealthy"
                ),
                None => {}
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

/// Retire the bootstrap node once the rule of
/// [`health::bootstrap_removable`] holds; checked every `interval`.
pub async fn bootstrap_watch(
    pools: Arc<ArcSwap<Pools>>,
    settings: Arc<ArcSwap<CheckSettings>>,
    memory: Arc<NodeMemory>,
    marker: Arc<ArcSwap<PathBuf>>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    loop {
        maybe_remove_bootstrap(&pools.load(), &memory, &marker.load());
        let interval = settings.load().health.interval;
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// Apply the removal rule once; true when the bootstrap is (now) removed.
pub fn maybe_remove_bootstrap(pools: &Pools, memory: &NodeMemory, marker: &Path) -> bool {
    let boot: Vec<&Arc<Backend>> = pools
        .backends()
        .filter(|(_, b)| b.role == Role::Bootstrap)
        .map(|(_, b)| b)
        .collect();
    let Some(first) = boot.first() else {
        return false;
    };
    let flags = memory.get(&first.key.node);
    if flags.removed {
        return true;
    }
    if flags.kept && !flags.disabled {
        return false;
    }
    let complete = !flags.kept && marker.exists();
    let masters: Vec<bool> = pools
        .get(PoolKind::Api)
        .map(|p| {
            p.backends
                .iter()
                .filter(|b| b.role == Role::Master)
                .map(|b| b.state().health.healthy())
                .collect()
        })
        .unwrap_or_default();
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
    let why = if flags.disabled {
        "disabled by the operator"
    } else {
        "install complete marker present"
    };
    info!("lb: bootstrap removed from every pool ({why}, all masters healthy in the api pool)");
    debug!("lb: bootstrap marker {}", marker.display());
    true
}

/// Settings for tests and the first generation.
pub fn settings(health: HealthCfg, prober: Arc<dyn Probe>) -> Arc<ArcSwap<CheckSettings>> {
    Arc::new(ArcSwap::from_pointee(CheckSettings {
        health,
        probers: Default::default(),
        prober,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::sync::LockExt as _;
    use crate::services::lb::state::{BackendKey, NodeFlags};
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
                Err(ProbeError::BadResponse("scripted failure".into()))
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
        assert_eq!(b.state().last_error.as_deref(), Some("scripted failure"));
        tokio::time::sleep(INTERVAL).await;
        assert!(!b.ready(), "one success of three");
        tokio::time::sleep(INTERVAL * 2).await;
        assert!(b.ready(), "three successes again");
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_of_settings_keeps_state_and_changes_the_pace() {
        let h = health(1, 1);
        let b = backend("w", Role::Worker, PoolKind::IngressHttp, &h);
        let probe = script(&[true]);
        let s = settings(h, probe.clone());
        let stop = CancellationToken::new();
        tokio::spawn(check_loop(b.clone(), s.clone(), stop.clone()));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(b.ready());
        let slow = HealthCfg {
            interval: Duration::from_secs(10),
            ..h
        };
        s.store(Arc::new(CheckSettings {
            health: slow,
            probers: Default::default(),
            prober: probe.clone(),
        }));
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
            list: vec![crate::services::lb::state::Pool {
                kind: PoolKind::Api,
                frontend: "127.0.0.1:6443".parse().unwrap(),
                check: Check::Tcp,
                backends,
                rr: Default::default(),
            }],
        }
    }

    #[tokio::test(start_paused = true)]
    async fn bootstrap_is_removed_when_disabled_and_masters_healthy_and_can_come_back() {
        let h = health(1, 1);
        let boot = backend("bootstrap", Role::Bootstrap, PoolKind::Api, &h);
        let m0 = backend("master-0", Role::Master, PoolKind::Api, &h);
        let m1 = backend("master-1", Role::Master, PoolKind::Api, &h);
        let pools = pools_with(&boot, &[m0.clone(), m1.clone()]);
        let memory = NodeMemory::default();
        let marker = PathBuf::from("/nonexistent/bootstrap-complete");
        memory.update("bootstrap", |f| f.disabled = true);
        boot.state().enabled = false;
        m0.state().health.observe(true);
        assert!(
            !maybe_remove_bootstrap(&pools, &memory, &marker),
            "master-1 not healthy"
        );
        m1.state().health.observe(true);
        assert!(maybe_remove_bootstrap(&pools, &memory, &marker));
        assert!(boot.state().removed && memory.get("bootstrap").removed);
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
        assert!(
            !maybe_remove_bootstrap(&pools, &memory, &marker),
            "kept until disabled again"
        );
        assert!(!boot.state().removed);
    }
}
