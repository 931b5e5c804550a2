//! Pure health state machine (no I/O), after pingora's `observe_health`,
//! shared by the load balancer's check loops and the timeline's single-node
//! prober.
//!
//! A backend starts **unhealthy**. `rise` consecutive successful checks make
//! it healthy, `fall` consecutive failed checks make it unhealthy again. A
//! result that agrees with the current state resets the opposite counter, so
//! one flapping check never flips the state. [`Health::observe`] reports a
//! flip exactly once, which is when the caller logs it.

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
    /// Has been healthy since it was created (or reset): an unhealthy
    /// backend with this set *went* down, it did not just never come up.
    #[serde(skip)]
    ever_healthy: bool,
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
            ever_healthy: false,
            rise: rise.max(1),
            fall: fall.max(1),
        }
    }

    pub fn healthy(&self) -> bool {
        self.healthy
    }

    /// Healthy now, or was at some point and fell since.
    pub fn ever_healthy(&self) -> bool {
        self.ever_healthy
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
                self.ever_healthy = true;
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
