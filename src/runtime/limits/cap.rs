//! The connection caps in force, sized once at start by `limits::apply`
//! from the open-files limit and read by every service where it takes a
//! connection slot (LB frontends, HTTP, DNS over TCP, admin).
//!
//! A leaf (imports nothing of the crate); the services read their caps
//! here, so `limits`, which sizes them, imports no service. Invariants: a
//! cap is never 0; before [`set`] (and when the limit is large enough)
//! every cap is as configured and the HTTP per-client limit is
//! `http.maxConnectionsPerClient` as configured.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Descriptors of HTTP connections (before scaling; [`http_served`] of
/// them are served at once).
pub const HTTP_MAX_CONNECTIONS: usize = 1024;

/// DNS-over-TCP connections per listen address (before scaling).
pub const DNS_MAX_TCP_CONNECTIONS: usize = 256;

/// Connections the admin listener accepts at once (never scaled: its
/// descriptors are kept in `limits::reserve`); [`ADMIN_SERVED`] of them are
/// served, the rest let a newcomer be judged when all are taken.
pub const ADMIN_MAX_CONNECTIONS: usize = 64;

/// Admin connections served at once (admission, `runtime::admission`).
pub const ADMIN_SERVED: usize = ADMIN_MAX_CONNECTIONS - 4;

/// Admin connections one client address may hold (loopback included): the
/// CLI, the HA peer and a Prometheus scraper need one or two each.
pub const ADMIN_PER_CLIENT: usize = 8;

/// Connections the private health socket (`crc-appliance health`, which
/// keepalived runs every second) serves at once.
pub const HEALTH_SOCKET_CONNECTIONS: usize = 8;

/// Pipes the LB may hold at once for zero-copy forwarding (two
/// descriptors each, kept in `limits::reserve`); a pipe serves one
/// direction of one connection while bulk bytes flow, so this many
/// directions are spliced at once and any more copy.
pub const LB_SPLICE_PIPES: usize = 32;

/// The caps `limits::apply` chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// HTTP descriptors (connections accepted at once; some are kept to
    /// judge newcomers: [`http_served`]).
    pub http: usize,
    /// The most connections one HTTP client may hold, whatever
    /// `http.maxConnectionsPerClient` says (`usize::MAX`: as configured).
    pub http_per_client: usize,
    /// DNS-over-TCP connections per listen address.
    pub dns_tcp: usize,
    /// LB connections per frontend, for `lb_configured` configured.
    pub lb: usize,
    pub lb_configured: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            http: HTTP_MAX_CONNECTIONS,
            http_per_client: usize::MAX,
            dns_tcp: DNS_MAX_TCP_CONNECTIONS,
            lb: 1,
            lb_configured: 1,
        }
    }
}

static HTTP: AtomicUsize = AtomicUsize::new(HTTP_MAX_CONNECTIONS);
static HTTP_PER_CLIENT: AtomicUsize = AtomicUsize::new(usize::MAX);
static DNS_TCP: AtomicUsize = AtomicUsize::new(DNS_MAX_TCP_CONNECTIONS);
/// The LB's share as a fraction (numerator / denominator), so that the
/// configured cap maps exactly to the chosen one and a reload that changes
/// `loadBalancer.maxConnections` gets the same fraction.
static LB_NUM: AtomicUsize = AtomicUsize::new(1);
static LB_DEN: AtomicUsize = AtomicUsize::new(1);

/// Put `c` in force (each cap at least 1).
pub fn set(c: &Caps) {
    HTTP.store(c.http.max(1), Ordering::Relaxed);
    HTTP_PER_CLIENT.store(c.http_per_client.max(1), Ordering::Relaxed);
    DNS_TCP.store(c.dns_tcp.max(1), Ordering::Relaxed);
    LB_NUM.store(c.lb.max(1), Ordering::Relaxed);
    LB_DEN.store(c.lb_configured.max(1), Ordering::Relaxed);
}

/// HTTP descriptors: connections accepted at once.
pub fn http() -> usize {
    HTTP.load(Ordering::Relaxed)
}

/// Of `fds` HTTP descriptors, those kept to accept and judge a newcomer
/// when every slot is taken (admission refuses or evicts at once, so a
/// few suffice): a sixteenth, at least 4, never all.
pub fn http_headroom(fds: usize) -> usize {
    (fds / 16).max(4).min(fds.saturating_sub(1))
}

/// HTTP connections served at once: [`http`] less [`http_headroom`].
pub fn http_served() -> usize {
    let fds = http();
    fds - http_headroom(fds)
}

/// The per-client HTTP limit for `configured` (`http.maxConnectionsPerClient`).
pub fn http_per_client(configured: usize) -> usize {
    configured
        .min(HTTP_PER_CLIENT.load(Ordering::Relaxed))
        .max(1)
}

/// DNS-over-TCP connections per listen address.
pub fn dns_tcp() -> usize {
    DNS_TCP.load(Ordering::Relaxed)
}

/// The LB cap for a configured `loadBalancer.maxConnections` of `cap`:
/// scaled by the LB's share of the open-files limit (at least 1).
pub fn scaled(cap: usize) -> usize {
    let (num, den) = (
        LB_NUM.load(Ordering::Relaxed),
        LB_DEN.load(Ordering::Relaxed),
    );
    if num >= den {
        return cap;
    }
    usize::try_from(cap as u128 * num as u128 / den as u128)
        .unwrap_or(cap)
        .max(1)
}
