//! Read-only `adjtimex(2)`: whether the kernel considers the host clock
//! synchronised (no `STA_UNSYNC`, `time_state` not `TIME_ERROR`), with the
//! kernel's error estimates.
//!
//! Why a crate of its own: the main crate forbids `unsafe`, and neither
//! rustix 1.x nor nix 0.29 wraps `adjtimex`; `clock-steering` (ntpd-rs)
//! wraps it but exposes no getter for the status word. This is the one
//! `unsafe` call, with `modes = 0`, which only reads (no privilege needed,
//! nothing changes).

use std::io;

/// What `adjtimex` says about the host clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// No `STA_UNSYNC` and the clock state is not `TIME_ERROR`.
    pub synchronised: bool,
    /// The kernel's estimated error, microseconds (`esterror`).
    pub est_error_us: i64,
    /// The kernel's maximum error, microseconds (`maxerror`).
    pub max_error_us: i64,
}

/// Read the host clock's synchronisation state (`adjtimex` with
/// `modes = 0`).
pub fn read() -> io::Result<Reading> {
    // SAFETY: an all-zero `timex` is a valid value of this plain C struct.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    tx.modes = 0;
    // SAFETY: `tx` is a valid, exclusively borrowed `timex` for the call;
    // with `modes = 0` the kernel only writes the current values into it.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Reading {
        synchronised: state != libc::TIME_ERROR && tx.status & libc::STA_UNSYNC == 0,
        est_error_us: tx.esterror,
        max_error_us: tx.maxerror,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn reading_the_clock_state_needs_no_privilege() {
        assert!(super::read().is_ok());
    }
}
