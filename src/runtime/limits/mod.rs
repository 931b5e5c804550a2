//! The process's open-files limit (RLIMIT_NOFILE).
//!
//! Role: every served connection is a descriptor (two for an LB
//! connection: client and backend), and the default soft limit (often 1024)
//! is far below the caps the services allow. At start, `serve` raises the
//! soft limit to the hard one ([`raise_nofile`]), logs it, and when the
//! configured caps ([`client_fds`] plus [`reserve`]) could exceed it, scales every connection
//! cap down so that they fit ([`cap_scale`], applied through
//! `cap::scaled` where each service reads its cap) — as HAProxy
//! derives its maxconn from `ulimit -n` — and warns.
//!
//! Invariants: the limit is only ever raised, never lowered; failures are
//! reported, never fatal. Descriptors for health checks, listeners, files
//! and libvirt ([`reserve`]) are never handed to client connections: one
//! flooded frontend hits its own (scaled) cap and is refused there, while
//! the checks and the other frontends still find descriptors. No unsafe
//! code: rustix's safe wrappers (the crate root forbids `unsafe`).

pub mod cap;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use crate::model::cluster::Cluster;
use crate::plan::Plan;

/// Descriptors kept for listeners, files being served, the lease file,
/// libvirt, logs.
pub const FD_SLACK: u64 = 128;

/// The open-files limit before and after [`raise_nofile`]. `None`: unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFile {
    pub before: Option<u64>,
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// Raise the soft RLIMIT_NOFILE to the hard limit.
pub fn raise_nofile() -> Result<NoFile, std::io::Error> {
    let cur = getrlimit(Resource::Nofile);
    if cur.current == cur.maximum {
        return Ok(NoFile {
            before: cur.current,
            soft: cur.current,
            hard: cur.maximum,
        });
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: cur.maximum,
            maximum: cur.maximum,
        },
    )?;
    let now = getrlimit(Resource::Nofile);
    Ok(NoFile {
        before: cur.current,
        soft: now.current,
        hard: now.maximum,
    })
}

/// Descriptors never given to client connections: [`FD_SLACK`] plus one
/// per health-checked backend of the plan's pools (a check holds one
/// socket while it runs; masters are in all four pools when there are no
/// workers).
pub fn reserve(plan: &Plan) -> u64 {
    let checks: usize = if plan.cluster.lb.enabled {
        plan.pools.iter().map(|p| p.backends.len()).sum()
    } else {
        0
    };
    FD_SLACK + checks as u64
}

/// The per-mille scale that makes `caps` client descriptors fit `soft`
/// after `reserve`: 1000 when they fit or the limit is unlimited, else
/// the largest fraction that fits (at least 1).
pub fn cap_scale(soft: Option<u64>, caps: u64, reserve: u64) -> u64 {
    match soft {
        Some(soft) if caps > 0 && soft < caps + reserve => {
            (soft.saturating_sub(reserve) * 1000 / caps).clamp(1, 1000)
        }
        _ => 1000,
    }
}

/// Descriptors the enabled services' client connections may hold at their
/// caps: two per LB connection (4 frontends × `loadBalancer.maxConnections`),
/// the HTTP cap and the DNS-over-TCP cap per DNS listen address.
pub fn client_fds(c: &Cluster) -> u64 {
    let mut n = 0;
    if c.lb.enabled {
        n += 4 * 2 * c.lb.max_connections as u64;
    }
    if c.http.enabled {
        n += cap::HTTP_MAX_CONNECTIONS as u64;
    }
    if c.dns.enabled {
        n += (cap::DNS_MAX_TCP_CONNECTIONS * c.dns.listen.len()) as u64;
    }
    n
}

/// Raise the limit, log it, and when the plan's caps could exceed it, scale
/// them (see the module doc) and warn.
pub fn apply(plan: &Plan) {
    let c = &plan.cluster;
    let show = |v: Option<u64>| v.map_or("unlimited".to_string(), |v| v.to_string());
    let soft = match raise_nofile() {
        Ok(l) if l.before != l.soft => {
            tracing::info!(
                "open files limit raised from {} to {} (hard limit)",
                show(l.before),
                show(l.soft)
            );
            l.soft
        }
        Ok(l) => {
            tracing::info!("open files limit {}", show(l.soft));
            l.soft
        }
        Err(e) => {
            let l = getrlimit(Resource::Nofile);
            tracing::warn!(
                "cannot raise the open files limit {} to {}: {e}",
                show(l.current),
                show(l.maximum)
            );
            l.current
        }
    };
    let (clients, reserve) = (client_fds(c), reserve(plan));
    let need = clients + reserve;
    let scale = cap_scale(soft, clients, reserve);
    cap::set_scale(scale);
    if let Some(soft) = soft.filter(|s| *s < need) {
        tracing::warn!(
            "open files limit {soft} is below the {need} the configured connection caps may need \
             (loadBalancer.maxConnections × 4 frontends × 2, http 1024, dns tcp 256 per address, \
             +{reserve} kept for health checks, listeners and files); connection caps scaled to {}.{}% \
             (lb {} per frontend, http {}, dns tcp {} per address); \
             raise LimitNOFILE (systemd) or ulimit -n, or lower loadBalancer.maxConnections",
            scale / 10,
            scale % 10,
            cap::scaled(c.lb.max_connections),
            cap::scaled(cap::HTTP_MAX_CONNECTIONS),
            cap::scaled(cap::DNS_MAX_TCP_CONNECTIONS),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::cap_scale;

    #[test]
    fn caps_are_scaled_only_when_they_do_not_fit() {
        // Unlimited, or enough: as configured.
        assert_eq!(cap_scale(None, 80_000, 140), 1000);
        assert_eq!(cap_scale(Some(1 << 20), 80_000, 140), 1000);
        assert_eq!(cap_scale(Some(80_140), 80_000, 140), 1000);
        // 1024 with 4 × 2 × 10000 LB descriptors: (1024 - 140) / 80000.
        assert_eq!(cap_scale(Some(1024), 80_000, 140), 11);
        // Scaled caps plus the reserve stay within the limit.
        let s = cap_scale(Some(400), 8 * 10_000, 142);
        assert!(8 * 10_000 * s / 1000 + 142 <= 400);
        // Less than the reserve: the smallest scale, never 0.
        assert_eq!(cap_scale(Some(100), 80_000, 140), 1);
        assert_eq!(cap_scale(Some(100), 0, 140), 1000);
    }
}
