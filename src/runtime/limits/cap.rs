//! The connection caps' share of the open-files limit, set once at start by
//! `limits::apply` and read by every service where it takes a connection
//! slot (LB frontends, HTTP, DNS over TCP).
//!
//! A leaf (imports nothing of the crate); the services read their caps
//! here, so `limits`, which sizes the open-files need from them, imports no
//! service. Invariant: a scaled cap is never 0, and 1000 ‰ (the default, also
//! before `set_scale`) leaves every cap as configured.

use std::sync::atomic::{AtomicU64, Ordering};

/// Connections the HTTP service serves at once (before scaling).
pub const HTTP_MAX_CONNECTIONS: usize = 1024;

/// DNS-over-TCP connections per listen address (before scaling).
pub const DNS_MAX_TCP_CONNECTIONS: usize = 256;

/// Per mille of every connection cap that fits the open-files limit.
static CAP_SCALE: AtomicU64 = AtomicU64::new(1000);

/// Set the scale (per mille, clamped to 1..=1000).
pub fn set_scale(per_mille: u64) {
    CAP_SCALE.store(per_mille.clamp(1, 1000), Ordering::Relaxed);
}

/// `cap` scaled to the open-files limit (at least 1).
pub fn scaled(cap: usize) -> usize {
    let scale = CAP_SCALE.load(Ordering::Relaxed);
    if scale >= 1000 {
        return cap;
    }
    usize::try_from(cap as u64 * scale / 1000)
        .unwrap_or(cap)
        .max(1)
}
