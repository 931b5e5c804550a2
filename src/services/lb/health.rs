//! The LB's pure health rules (no I/O). The rise/fall state machine,
//! [`Health`], lives in [`crate::runtime::health`] (the timeline's
//! single-node prober uses it too) and is re-exported here.
//!
//! The bootstrap rules: [`bootstrap_api_gone`] (the evidence
//! that bootstrap is complete), [`marker_fresh`] (whether a
//! `bootstrap-complete` marker belongs to this install) and
//! [`bootstrap_removable`] (when the bootstrap node leaves the pools).

use std::time::SystemTime;

pub use crate::runtime::health::Health;

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

/// Whether every one of `healthy` is, and there is at least one.
fn all_healthy(healthy: &[bool]) -> bool {
    !healthy.is_empty() && healthy.iter().all(|h| *h)
}

/// The evidence that bootstrap is complete: bootkube tears the bootstrap
/// control plane down once the masters run their own, so the bootstrap's
/// api backend turns unhealthy after having been healthy, while every
/// master (at least one) is healthy in the api pool (`/readyz` on 6443)
/// and in the machine-config pool (22623).
///
/// A bootstrap that never became healthy is not evidence (it may still
/// be booting), nor is one that falls while a master is not serving yet:
/// the rule holds only once the last master is healthy in both pools.
pub fn bootstrap_api_gone(
    bootstrap_api: &Health,
    masters_api: &[bool],
    masters_mcs: &[bool],
) -> bool {
    bootstrap_api.ever_healthy()
        && !bootstrap_api.healthy()
        && all_healthy(masters_api)
        && all_healthy(masters_mcs)
}

/// Whether a `bootstrap-complete` marker modified at `marker` belongs to
/// this install: not older than the newest ignition file. A marker left
/// from an earlier install predates `openshift-install create
/// ignition-configs` of this one. Without ignition files it counts.
pub fn marker_fresh(marker: SystemTime, newest_ignition: Option<SystemTime>) -> bool {
    newest_ignition.is_none_or(|ign| marker >= ign)
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

    fn fell() -> Health {
        let mut h = Health::new(1, 2);
        h.observe(true);
        h.observe(false);
        h.observe(false);
        h
    }

    #[test]
    fn ever_healthy_is_kept_across_a_fall_and_reset_by_new() {
        let mut h = Health::new(2, 1);
        h.observe(true);
        assert!(!h.ever_healthy(), "one success of two");
        h.observe(true);
        assert!(h.ever_healthy());
        h.observe(false);
        assert!(!h.healthy() && h.ever_healthy());
        assert!(!Health::new(2, 1).ever_healthy());
    }

    #[test]
    fn bootstrap_api_gone_needs_a_fall_and_every_master_in_both_pools() {
        let never = {
            let mut h = Health::new(1, 1);
            h.observe(false);
            h
        };
        let up = {
            let mut h = Health::new(1, 1);
            h.observe(true);
            h
        };
        let falling = {
            let mut h = Health::new(1, 2);
            h.observe(true);
            h.observe(false);
            h
        };
        assert!(bootstrap_api_gone(&fell(), &[true, true], &[true, true]));
        assert!(
            !bootstrap_api_gone(&never, &[true], &[true]),
            "never up: still booting"
        );
        assert!(!bootstrap_api_gone(&up, &[true], &[true]), "still serving");
        assert!(
            !bootstrap_api_gone(&falling, &[true], &[true]),
            "one failure of two"
        );
        assert!(
            !bootstrap_api_gone(&fell(), &[true, false], &[true, true]),
            "a master's API"
        );
        assert!(
            !bootstrap_api_gone(&fell(), &[true, true], &[true, false]),
            "a master's MCS"
        );
        assert!(!bootstrap_api_gone(&fell(), &[], &[]), "no masters");
    }

    #[test]
    fn a_marker_older_than_the_ignition_files_is_stale() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let hour = std::time::Duration::from_secs(3600);
        assert!(marker_fresh(t, None));
        assert!(marker_fresh(t, Some(t)));
        assert!(marker_fresh(t + hour, Some(t)));
        assert!(!marker_fresh(t - hour, Some(t)));
    }
}
