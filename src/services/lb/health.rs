//! Pure health state machine (no I/O), after pingora's `observe_health`.
//!
//! A backend starts **unhealthy**. `rise` consecutive successful checks make
//! it healthy, `fall` consecutive failed checks make it unhealthy again. A
//! result that agrees with the current state resets the opposite counter, so
//! one flapping check never flips the state. [`Health::observe`] reports a
//! flip exactly once, which is when the caller logs it.
//!
//! [`bootstrap_removable`] is the rule for retiring the bootstrap node.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Health {
    healthy: bool,
    /// Consecutive successes while unhealthy (toward `rise`), or while
    /// healthy (informational).
    successes: u32,
    /// Consecutive failures while healthy (toward `fall`), or while
    /// unhealthy (informational).
    failures: u32,
    #[serde(skip)]
    rise: u32,
    #[serde(skip)]
    fall: u32,
}

impl Health {
    /// A new backend: unhealthy until `rise` checks pass.
    pub fn new(rise: u32, fall: u32) -> Health {
        Health {
            healthy: false,
            successes: 0,
            failures: 0,
            rise: rise.max(1),
            fall: fall.max(1),
        }
    }

    pub fn healthy(&self) -> bool {
        self.healthy
    }

    /// Consecutive successful checks so far.
    pub fn successes(&self) -> u32 {
        self.successes
    }

    /// Consecutive failed checks so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Record one check result. Returns `Some(new_state)` when the state
    /// flipped, `None` otherwise.
    pub fn observe(&mut self, ok: bool) -> Option<bool> {
        if ok {
            self.successes = self.successes.saturating_add(1);
            self.failures = 0;
            if !self.healthy && self.successes >= self.rise {
                self.healthy = true;
                return Some(true);
            }
        } else {
            self.failures = self.failures.saturating_add(1);
            self.successes = 0;
            if self.healthy && self.failures >= self.fall {
                self.healthy = false;
                return Some(false);
            }
        }
        None
    }
}

/// Whether the bootstrap node can leave the LB for good: the operator
/// disabled it or the install signalled completion, and every master is
/// healthy in the api pool (there is at least one master).
pub fn bootstrap_removable(
    bootstrap_disabled: bool,
    install_complete: bool,
    masters_healthy: &[bool],
) -> bool {
    (bootstrap_disabled || install_complete)
        && !masters_healthy.is_empty()
        && masters_healthy.iter().all(|h| *h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_unhealthy_and_rises_after_rise_successes() {
        let mut h = Health::new(2, 3);
        assert!(!h.healthy());
        assert_eq!(h.observe(true), None);
        assert!(!h.healthy());
        assert_eq!(h.observe(true), Some(true));
        assert!(h.healthy());
        // Further successes do not flip again.
        assert_eq!(h.observe(true), None);
    }

    #[test]
    fn falls_after_fall_consecutive_failures_only() {
        let mut h = Health::new(1, 3);
        assert_eq!(h.observe(true), Some(true));
        assert_eq!(h.observe(false), None);
        assert_eq!(h.observe(false), None);
        // A success in between resets the failure count.
        assert_eq!(h.observe(true), None);
        assert_eq!(h.observe(false), None);
        assert_eq!(h.observe(false), None);
        assert_eq!(h.observe(false), Some(false));
        assert!(!h.healthy());
        assert_eq!(h.failures(), 3);
        assert_eq!(h.observe(false), None);
    }

    #[test]
    fn interrupted_rise_starts_over() {
        let mut h = Health::new(3, 1);
        h.observe(true);
        h.observe(true);
        h.observe(false);
        assert_eq!(h.successes(), 0);
        h.observe(true);
        h.observe(true);
        assert!(!h.healthy());
        assert_eq!(h.observe(true), Some(true));
    }

    #[test]
    fn rise_and_fall_of_one() {
        let mut h = Health::new(1, 1);
        assert_eq!(h.observe(false), None);
        assert_eq!(h.observe(true), Some(true));
        assert_eq!(h.observe(false), Some(false));
        assert_eq!(h.observe(true), Some(true));
    }

    #[test]
    fn bootstrap_removal_rule() {
        assert!(!bootstrap_removable(false, false, &[true, true]));
        assert!(bootstrap_removable(true, false, &[true, true, true]));
        assert!(bootstrap_removable(false, true, &[true]));
        assert!(!bootstrap_removable(true, true, &[true, false]));
        assert!(!bootstrap_removable(true, true, &[]));
    }
}
