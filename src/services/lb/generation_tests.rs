use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::*;
use crate::model::cluster::HealthCfg;
use crate::runtime::probe::StatusLineError;

/// A probe that never runs (the tests here start no check loop).
struct Never;

#[async_trait]
impl Probe for Never {
    async fn probe(&self, _: &Check, _: SocketAddr) -> Result<(), ProbeError> {
        Err(ProbeError::BadResponse(StatusLineError::Closed))
    }
}

/// Check settings whose interval tells which plan they were made for.
fn checks_of(plan: &Plan) -> CheckSettings {
    CheckSettings {
        health: plan.cluster.lb.health,
        probers: HashMap::new(),
        prober: Arc::new(Never),
    }
}

/// Plan A and plan B: different caps, health intervals and ingress-http
/// backend ports (so different worker backends); the same api pool.
fn plans(base: &std::path::Path) -> (Arc<Plan>, Arc<Plan>) {
    (
        test_plan(
            base,
            "maxConnections: 100, healthCheck: { interval: 5s }, backendPorts: { ingressHttp: 8080 }",
        ),
        test_plan(
            base,
            "maxConnections: 200, healthCheck: { interval: 6s }, backendPorts: { ingressHttp: 9090 }",
        ),
    )
}

/// What each part of a generation says about the plan it belongs to:
/// its cap, its check interval and its ingress-http backend port, each as
/// 0 (plan A) or 1 (plan B).
fn marks(g: &Generation) -> [u8; 3] {
    let cap = u8::from(g.cfg().max_connections == 200);
    let interval = u8::from(g.checks.health.interval == Duration::from_secs(6));
    let port = g
        .pools
        .get(PoolKind::IngressHttp)
        .and_then(|p| p.backends.first())
        .map_or(9, |b| u8::from(b.key.addr.port() == 9090));
    [cap, interval, port]
}

#[test]
fn the_next_generation_keeps_unchanged_backends_and_lists_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = plans(d.path());
    let memory = NodeMemory::default();
    let first = Generation::empty(a.clone(), checks_of(&a)).next(a.clone(), checks_of(&a), &memory);
    assert!(first.gone.is_empty());
    let g1 = first.generation;
    assert_eq!(first.fresh.len(), g1.pools.backends().count());
    let api = g1.pools.get(PoolKind::Api).unwrap().backends[0].clone();
    api.state().health = crate::runtime::health::Health::new(1, 1);
    api.state().health.observe(true);
    api.total.store(7, Ordering::Relaxed);

    let next = g1.next(b.clone(), checks_of(&b), &memory);
    let g2 = &next.generation;
    let api2 = &g2.pools.get(PoolKind::Api).unwrap().backends[0];
    assert!(
        Arc::ptr_eq(&api, api2),
        "an unchanged key keeps its backend"
    );
    assert!(api2.ready(), "its health carried over");
    assert_eq!(api2.total.load(Ordering::Relaxed), 7, "its counters too");
    let ports = |v: &[Arc<Backend>]| -> Vec<(PoolKind, u16)> {
        v.iter().map(|b| (b.key.pool, b.key.addr.port())).collect()
    };
    assert_eq!(ports(&next.fresh), [(PoolKind::IngressHttp, 9090)]);
    assert_eq!(ports(&next.gone), [(PoolKind::IngressHttp, 8080)]);
    assert!(!next.fresh[0].ready(), "a new backend starts unhealthy");
    assert_eq!(marks(&g1), [0, 0, 0]);
    assert_eq!(marks(g2), [1, 1, 1]);
    assert_eq!(g2.cfg().max_connections, 200);
    assert_eq!(g2.marker(), d.path().join("ignition/bootstrap-complete"));
}

/// Readers on other threads load the current generation while reloads
/// swap A and B back and forth: every generation a reader loads is all A
/// or all B (cap, check settings and pools of one plan), never a mix.
#[test]
fn a_reader_sees_the_old_or_the_new_generation_never_a_mix() {
    const SWAPS: usize = 2_000;
    let d = tempfile::tempdir().unwrap();
    let (a, b) = plans(d.path());
    let memory = NodeMemory::default();
    let first = Generation::empty(a.clone(), checks_of(&a)).next(a.clone(), checks_of(&a), &memory);
    let current = Arc::new(ArcSwap::from_pointee(first.generation));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (current, done) = (current.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = [0usize; 2];
                // Bounded: the writer's swaps end, and so does this loop.
                while !done.load(Ordering::Acquire) {
                    let g = current.load();
                    let m = marks(&g);
                    assert!(
                        m == [0, 0, 0] || m == [1, 1, 1],
                        "a mixed generation: {m:?}"
                    );
                    seen[usize::from(m[0])] += 1;
                }
                seen
            })
        })
        .collect();
    for i in 0..SWAPS {
        let plan = if i % 2 == 0 { &b } else { &a };
        let next = current.load().next(plan.clone(), checks_of(plan), &memory);
        current.store(Arc::new(next.generation));
        if i % 64 == 0 {
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::Release);
    for r in readers {
        let seen = r.join().unwrap();
        assert!(seen.iter().sum::<usize>() > 0, "the reader read");
    }
    let backends = current.load().pools.backends().count();
    assert_eq!(backends, first.fresh.len(), "the pools did not grow");
}

#[test]
fn the_check_settings_are_the_plans() {
    let d = tempfile::tempdir().unwrap();
    let (a, _) = plans(d.path());
    let checks = CheckSettings::of(&a).unwrap();
    let expected: HealthCfg = a.cluster.lb.health;
    assert_eq!(checks.health, expected);
    assert_eq!(checks.health.interval, Duration::from_secs(5));
}
