//! The process's open-files limit (RLIMIT_NOFILE).
//!
//! Role: every served connection is a descriptor (two for an LB
//! connection: client and backend), and the default soft limit (often 1024)
//! is far below the caps the services allow. At start, `serve` raises the
//! soft limit to the hard one ([`raise_nofile`]), logs it, and warns when
//! the configured caps ([`fd_need`]) could exceed it.
//!
//! Invariants: the limit is only ever raised, never lowered; failures are
//! reported, never fatal (the services run under the old limit and their
//! accept loops back off on EMFILE). No unsafe code: rustix's safe
//! wrappers (the crate root forbids `unsafe`).

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use crate::model::cluster::Cluster;

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

/// Descriptors the enabled services may hold at their caps: two per LB
/// connection (4 frontends × `loadBalancer.maxConnections`), the HTTP cap
/// and the DNS-over-TCP cap per DNS listen address, plus [`FD_SLACK`].
pub fn fd_need(c: &Cluster) -> u64 {
    let mut n = FD_SLACK;
    if c.lb.enabled {
        n += 4 * 2 * c.lb.max_connections as u64;
    }
    if c.http.enabled {
        n += crate::http::MAX_CONNECTIONS as u64;
    }
    if c.dns.enabled {
        n += (crate::dns::MAX_TCP_CONNECTIONS * c.dns.listen.len()) as u64;
    }
    n
}

/// Raise the limit, log it, and warn when `c`'s caps could exceed it.
pub fn apply(c: &Cluster) {
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
    let need = fd_need(c);
    if let Some(soft) = soft.filter(|s| *s < need) {
        tracing::warn!(
            "open files limit {soft} is below the {need} the configured connection caps may need \
             (loadBalancer.maxConnections × 4 frontends × 2, http 1024, dns tcp 256 per address, +{FD_SLACK}); \
             raise LimitNOFILE (systemd) or ulimit -n, or lower loadBalancer.maxConnections"
        );
    }
}
