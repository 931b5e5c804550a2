//! The connection caps: a value ([`Caps`]) sized once at start by
//! `limits::apply` from the open-files limit, carried to the services in
//! the run-time context (`runtime::context::Context`), and read by each
//! service where it takes a connection slot (LB frontends, HTTP, DNS over
//! TCP); the admin listener's caps are constants.
//!
//! A leaf (imports nothing of the crate); the services read their caps
//! from the value they were given, so `limits`, which sizes them, imports
//! no service, and two services in one process (an in-process test) may
//! have different caps. Invariants: a cap read through [`Caps`]'s methods
//! is never 0; [`Caps::default`] (and the caps when the limit is large
//! enough) is every cap as configured, the HTTP per-client limit
//! `http.maxConnectionsPerClient` as configured.

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

impl Caps {
    /// HTTP descriptors: connections accepted at once.
    pub fn http(&self) -> usize {
        self.http.max(1)
    }

    /// HTTP connections served at once: [`Caps::http`] less [`http_headroom`].
    pub fn http_served(&self) -> usize {
        let fds = self.http();
        fds - http_headroom(fds)
    }

    /// The per-client HTTP limit for `configured` (`http.maxConnectionsPerClient`).
    pub fn http_per_client(&self, configured: usize) -> usize {
        configured.min(self.http_per_client).max(1)
    }

    /// DNS-over-TCP connections per listen address.
    pub fn dns_tcp(&self) -> usize {
        self.dns_tcp.max(1)
    }

    /// The LB cap for a configured `loadBalancer.maxConnections` of `cap`:
    /// scaled by the LB's share of the open-files limit (`lb` of
    /// `lb_configured`, a fraction, so that a reload that changes
    /// `loadBalancer.maxConnections` gets the same share; at least 1).
    pub fn lb_scaled(&self, cap: usize) -> usize {
        let (num, den) = (self.lb.max(1), self.lb_configured.max(1));
        if num >= den {
            return cap;
        }
        usize::try_from(cap as u128 * num as u128 / den as u128)
            .unwrap_or(cap)
            .max(1)
    }
}

/// Of `fds` HTTP descriptors, those kept to accept and judge a newcomer
/// when every slot is taken (admission refuses or evicts at once, so a
/// few suffice): a sixteenth, at least 4, never all.
pub fn http_headroom(fds: usize) -> usize {
    (fds / 16).max(4).min(fds.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cap_values_are_independent_and_never_zero() {
        let full = Caps::default();
        let small = Caps {
            http: 20,
            http_per_client: 2,
            dns_tcp: 0,
            lb: 1,
            lb_configured: 10,
        };
        assert_eq!((full.http(), full.http_per_client(8)), (1024, 8));
        assert_eq!((small.http(), small.http_per_client(8)), (20, 2));
        assert_eq!((full.lb_scaled(100), small.lb_scaled(100)), (100, 10));
        assert_eq!((small.dns_tcp(), small.lb_scaled(1)), (1, 1));
        assert_eq!(small.http_served(), 16);
    }
}
