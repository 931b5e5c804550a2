//! The process's open-files limit (RLIMIT_NOFILE) and the connection caps
//! sized from it.
//!
//! Role: every served connection is a descriptor (two for an LB
//! connection: client and backend), and the default soft limit (often 1024)
//! is far below the caps the services allow. At start, `serve` raises the
//! soft limit to the hard one ([`raise_nofile`]), logs it, and sizes the
//! caps ([`allocate`]; [`apply`] returns them as a [`cap::Caps`] value,
//! which `serve` hands to each service in its run-time context): as configured when they fit; else each kind (LB
//! frontends, HTTP, DNS TCP) keeps a floor derived from the cluster's node
//! count and the rest is shared in proportion — as HAProxy derives its
//! maxconn from `ulimit -n`, but without letting the LB's large default
//! squeeze HTTP and DNS to a handful of connections. It always says at INFO
//! what the limit means in clients (`open files 1024: http 64 connections
//! (8 per client: 8 clients at their limit), …`) and warns when it scaled.
//!
//! Invariants: the limit is only ever raised, never lowered; failures are
//! reported, never fatal. Descriptors for health checks, listeners, files,
//! the admin listener and libvirt ([`reserve`]) are never handed to client
//! connections: one flooded frontend hits its own (scaled) cap and is
//! refused there, while the checks and the other frontends still find
//! descriptors. The caps are sized once, at start (a reload that adds
//! nodes keeps them). No unsafe code: rustix's safe wrappers (the crate
//! root forbids `unsafe`).

pub mod cap;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use crate::model::catalogue::ServiceKind;
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

/// Descriptors never given to client connections: [`FD_SLACK`], the
/// admin listener's and its health socket's caps when it is enabled, plus, with the LB on, one per
/// health-checked backend of the plan's pools (a check holds one socket
/// while it runs; masters are in all four pools when there are no workers)
/// and two per splice pipe ([`cap::LB_SPLICE_PIPES`]).
pub fn reserve(plan: &Plan) -> u64 {
    let lb: usize = if plan.cluster.lb.enabled {
        plan.pools.iter().map(|p| p.backends.len()).sum::<usize>() + 2 * cap::LB_SPLICE_PIPES
    } else {
        0
    };
    let admin = if plan.cluster.admin.enabled {
        (cap::ADMIN_MAX_CONNECTIONS + cap::HEALTH_SOCKET_CONNECTIONS) as u64
    } else {
        0
    };
    FD_SLACK + admin + lb as u64
}

/// What the enabled services' client connections may need: the LB's
/// configured cap per frontend (`None`: LB off), HTTP on or off, the DNS
/// listen addresses (0: DNS off), and the cluster's node count (for the
/// floors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demand {
    pub lb: Option<u64>,
    pub http: bool,
    pub dns_addrs: u64,
    pub nodes: u64,
}

impl Demand {
    pub fn of(c: &Cluster) -> Demand {
        let mut d = Demand {
            lb: None,
            http: false,
            dns_addrs: 0,
            nodes: c.nodes.len() as u64,
        };
        // Exhaustive: a new service decides here whether it holds capped
        // connections.
        for kind in c.services() {
            match kind {
                ServiceKind::Lb => d.lb = Some(c.lb.max_connections as u64),
                ServiceKind::Http => d.http = true,
                ServiceKind::Dns => d.dns_addrs = c.dns.listen.len() as u64,
                // Datagram services, the libvirt driver, the admin API
                // (its descriptors are in `reserve`) and the CSR approver
                // (one client connection) hold none.
                ServiceKind::Libvirt
                | ServiceKind::Csr
                | ServiceKind::Dhcp
                | ServiceKind::Dhcp6
                | ServiceKind::Admin
                | ServiceKind::Tftp
                | ServiceKind::Ntp => {}
                // Its connections have their own cap (services/registry,
                // 1024), well under the open-files limit asked for.
                ServiceKind::Registry => {}
            }
        }
        d
    }
}

/// One cap per kind: LB per frontend, HTTP, DNS TCP per listen address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Per {
    lb: u64,
    http: u64,
    dns: u64,
}

impl Demand {
    /// Descriptors `p` takes: two per LB connection on 4 frontends, one per
    /// HTTP and DNS TCP connection.
    fn fds(&self, p: &Per) -> u64 {
        let lb = if self.lb.is_some() { 8 * p.lb } else { 0 };
        let http = if self.http { p.http } else { 0 };
        lb + http + self.dns_addrs * p.dns
    }

    fn full(&self) -> Per {
        Per {
            lb: self.lb.unwrap_or(0),
            http: cap::HTTP_MAX_CONNECTIONS as u64,
            dns: cap::DNS_MAX_TCP_CONNECTIONS as u64,
        }
    }

    /// What the cluster's nodes need at least (never above the full cap):
    /// 8 connections per node (and one more client, the operator) for the
    /// LB frontends and HTTP (9 descriptors each: HTTP keeps a sixteenth to
    /// judge newcomers, `cap::http_headroom`), 2 per node for DNS over TCP.
    fn floor(&self) -> Per {
        let clients = self.nodes + 1;
        let full = self.full();
        Per {
            lb: (8 * clients).max(64).min(full.lb),
            http: (9 * clients).max(72).min(full.http),
            dns: (2 * clients).max(16).min(full.dns),
        }
    }

    /// Per-client HTTP limit when the caps are scaled: the cluster's
    /// nodes (and one more client) at their limit fit the HTTP connections
    /// served (`served`).
    fn per_client(&self, served: u64) -> u64 {
        (served / (self.nodes + 1).max(8)).max(2)
    }
}

/// How the caps fit the open-files limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// As configured: the limit is large enough (or unlimited).
    Full,
    /// Scaled down, each kind keeping at least what the nodes need.
    Scaled,
    /// Even the nodes' floors do not fit: they are scaled too.
    BelowFloors,
}

/// The caps that make the client connections fit `soft` descriptors after
/// `reserve`: as configured when they fit (or the limit is unlimited);
/// else every kind keeps its floor ([`Demand::floor`], derived from the
/// node count) and the descriptors left over are shared in proportion to
/// what each kind would take beyond its floor — so the LB's 80,000 cannot
/// squeeze HTTP and DNS to a handful of connections; when not even the
/// floors fit, they are scaled alike (each cap at least 1).
pub fn allocate(soft: Option<u64>, reserve: u64, d: &Demand) -> (cap::Caps, Fit) {
    let full = d.full();
    let to_caps = |p: Per, per_client: u64| cap::Caps {
        http: usize::try_from(p.http.max(1)).unwrap_or(usize::MAX),
        http_per_client: usize::try_from(per_client).unwrap_or(usize::MAX),
        dns_tcp: usize::try_from(p.dns.max(1)).unwrap_or(usize::MAX),
        lb: usize::try_from(p.lb.max(1)).unwrap_or(usize::MAX),
        lb_configured: usize::try_from(full.lb.max(1)).unwrap_or(usize::MAX),
    };
    let soft = match soft {
        Some(s) if d.fds(&full) + reserve > s => s,
        _ => return (to_caps(full, u64::MAX), Fit::Full),
    };
    let budget = soft.saturating_sub(reserve);
    let floor = d.floor();
    let (need, head) = (d.fds(&floor), d.fds(&full) - d.fds(&floor));
    let (per, fit) = if need <= budget && head > 0 {
        let extra = budget - need;
        let grow = |f: u64, c: u64| f + ((c - f) as u128 * extra as u128 / head as u128) as u64;
        let per = Per {
            lb: grow(floor.lb, full.lb),
            http: grow(floor.http, full.http),
            dns: grow(floor.dns, full.dns),
        };
        (per, Fit::Scaled)
    } else {
        let shrink = |f: u64| ((f as u128 * budget as u128 / need.max(1) as u128) as u64).max(1);
        let per = Per {
            lb: shrink(floor.lb),
            http: shrink(floor.http),
            dns: shrink(floor.dns),
        };
        (per, Fit::BelowFloors)
    };
    let fds = usize::try_from(per.http.max(1)).unwrap_or(usize::MAX);
    let served = (fds - cap::http_headroom(fds)) as u64;
    (to_caps(per, d.per_client(served)), fit)
}

/// Descriptors the enabled services' client connections may hold at their
/// caps: two per LB connection (4 frontends × `loadBalancer.maxConnections`),
/// the HTTP cap and the DNS-over-TCP cap per DNS listen address.
pub fn client_fds(c: &Cluster) -> u64 {
    let d = Demand::of(c);
    d.fds(&d.full())
}

/// What the caps mean, for the start-up line: `http 70 connections (8 per
/// client: 8 clients at their limit), dns tcp 16 per listen address, lb 90
/// per frontend (of 10000 configured)`, enabled services only.
fn describe(c: &Cluster, caps: &cap::Caps) -> String {
    let mut parts = Vec::new();
    if c.http.enabled {
        let per = caps.http_per_client(c.http.max_connections_per_client);
        let served = caps.http - cap::http_headroom(caps.http);
        parts.push(format!(
            "http {served} connections ({per} per client: {} clients at their limit)",
            served / per.max(1)
        ));
    }
    if c.dns.enabled {
        parts.push(format!("dns tcp {} per listen address", caps.dns_tcp));
    }
    if c.lb.enabled {
        parts.push(format!(
            "lb {} per frontend (of {} configured)",
            caps.lb_scaled(c.lb.max_connections),
            c.lb.max_connections
        ));
    }
    if parts.is_empty() {
        "no connection caps".into()
    } else {
        parts.join(", ")
    }
}

/// Raise the limit, log it, size the caps to it (see the module doc and
/// [`allocate`]), say what they mean in clients, and warn when they had to
/// be scaled; the caps chosen, for the services' context.
pub fn apply(plan: &Plan) -> cap::Caps {
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
    let d = Demand::of(c);
    let (clients, reserve) = (client_fds(c), reserve(plan));
    let need = clients + reserve;
    let (caps, fit) = allocate(soft, reserve, &d);
    let what = describe(c, &caps);
    tracing::info!("open files {}: {what}", show(soft));
    let Some(soft) = soft.filter(|s| *s < need) else {
        return caps;
    };
    let floors = match fit {
        Fit::BelowFloors => format!(
            "even what the cluster's {} nodes need does not fit, every cap is smaller than that",
            d.nodes
        ),
        _ => format!(
            "each keeps at least what the cluster's {} nodes need",
            d.nodes
        ),
    };
    let msg = format!(
        "open files limit {soft} is below the {need} the configured connection caps may need \
         (loadBalancer.maxConnections × 4 frontends × 2, http 1024, dns tcp 256 per address, \
         +{reserve} kept for health checks, LB pipes, listeners, the admin listener and files); \
         connection caps scaled to fit ({floors}): {what}; \
         raise LimitNOFILE (systemd) or ulimit -n, or lower loadBalancer.maxConnections",
    );
    // Scaled caps that still serve every node are an ordinary host (the
    // demo on a 20000-descriptor box): said at INFO. A warning is for a
    // limit too low for the cluster itself.
    if fit == Fit::BelowFloors {
        tracing::warn!("{msg}");
    } else {
        tracing::info!("{msg}");
    }
    caps
}

#[cfg(test)]
mod tests {
    use super::{Demand, Fit, allocate};

    const AUDIT: Demand = Demand {
        lb: Some(10_000),
        http: true,
        dns_addrs: 1,
        nodes: 7,
    };

    #[test]
    fn caps_are_as_configured_when_they_fit() {
        for soft in [None, Some(1 << 20), Some(8 * 10_000 + 1024 + 256 + 140)] {
            let (c, fit) = allocate(soft, 140, &AUDIT);
            assert_eq!(fit, Fit::Full, "{soft:?}");
            assert_eq!(
                (c.http, c.dns_tcp, c.http_per_client),
                (1024, 256, usize::MAX)
            );
            assert_eq!((c.lb, c.lb_configured), (10_000, 10_000));
        }
    }

    #[test]
    fn a_short_limit_keeps_the_floors_and_shares_the_rest() {
        // The audit: ulimit -n 1024 left http 10 and dns tcp 2.
        let (c, fit) = allocate(Some(1024), 140, &AUDIT);
        assert_eq!(fit, Fit::Scaled);
        let served = c.http - super::cap::http_headroom(c.http);
        assert!(served >= 64 && c.dns_tcp >= 16 && c.lb >= 64, "{c:?}");
        assert_eq!(c.http_per_client, served / 8);
        // 7 nodes and the operator at their per-client limit fit.
        assert!(8 * c.http_per_client <= served);
        // Everything fits the limit after the reserve.
        assert!(8 * c.lb + c.http + c.dns_tcp + 140 <= 1024, "{c:?}");
        // The floors grow with the cluster.
        let big = Demand { nodes: 40, ..AUDIT };
        let (c, _) = allocate(Some(4096), 140, &big);
        let served = c.http - super::cap::http_headroom(c.http);
        assert!(
            served >= 8 * 41 && c.lb >= 8 * 41 && c.dns_tcp >= 82,
            "{c:?}"
        );
        assert!(41 * c.http_per_client <= served, "{c:?}");
        assert!(8 * c.lb + c.http + c.dns_tcp + 140 <= 4096, "{c:?}");
    }

    #[test]
    fn below_the_floors_everything_shrinks_alike_never_to_zero() {
        let (c, fit) = allocate(Some(400), 142, &AUDIT);
        assert_eq!(fit, Fit::BelowFloors);
        assert!(8 * c.lb + c.http + c.dns_tcp + 142 <= 400, "{c:?}");
        let (c, fit) = allocate(Some(100), 140, &AUDIT);
        assert_eq!(fit, Fit::BelowFloors);
        assert!(c.lb >= 1 && c.http >= 1 && c.dns_tcp >= 1 && c.http_per_client >= 1);
        // Only HTTP: it gets what is left.
        let http = Demand {
            lb: None,
            http: true,
            dns_addrs: 0,
            nodes: 3,
        };
        let (c, fit) = allocate(Some(1024), 140, &http);
        assert_eq!((c.http, fit), (1024 - 140, Fit::Scaled));
    }
}
