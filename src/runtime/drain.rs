//! Every shutdown budget in one place, and how they relate to [`GRACE`].
//!
//! On SIGTERM `serve` cancels the services and gives them [`GRACE`]; a
//! service cancels its tasks and gives work in flight its budget below
//! (queries, connections, transfers, the last lease write), then its loops
//! [`TASK_SLACK`] more to return, then aborts them. Each service's total
//! stays under [`GRACE`] (checked at compile time below), so a clean stop
//! never reaches the supervisor's abort.

use std::time::Duration;

/// What `serve` gives all services together to stop after SIGTERM/SIGINT.
pub const GRACE: Duration = Duration::from_secs(10);

/// Beyond its in-flight budget: for a service's loops to return.
pub const TASK_SLACK: Duration = Duration::from_secs(1);

/// DNS queries in flight (UDP answers, open TCP connections).
pub const DNS_QUERIES: Duration = Duration::from_secs(2);

/// LB frontends and health checks stop, then connections get
/// [`LB_CONNECTIONS`] before they are cut.
pub const LB_TASKS: Duration = Duration::from_secs(2);
pub const LB_CONNECTIONS: Duration = Duration::from_secs(3);

/// HTTP (and admin API) requests and downloads in flight.
pub const HTTP_REQUESTS: Duration = Duration::from_secs(5);

/// TFTP transfers in flight.
pub const TFTP_TRANSFERS: Duration = Duration::from_secs(5);

/// The DHCP lease writer's last write.
pub const DHCP_WRITER: Duration = Duration::from_secs(5);

/// The libvirt service's tasks (a start in progress is not cut short
/// before the supervisor's own abort).
pub const LIBVIRT_TASKS: Duration = GRACE;

/// The whole budget of a service whose in-flight work gets `in_flight`.
pub const fn service(in_flight: Duration) -> Duration {
    in_flight.saturating_add(TASK_SLACK)
}

const _: () = {
    let g = GRACE.as_millis();
    assert!(service(DNS_QUERIES).as_millis() < g);
    assert!(LB_TASKS.as_millis() + LB_CONNECTIONS.as_millis() < g);
    assert!(service(HTTP_REQUESTS).as_millis() < g);
    assert!(service(TFTP_TRANSFERS).as_millis() < g);
    assert!(service(DHCP_WRITER).as_millis() < g);
    assert!(LIBVIRT_TASKS.as_millis() <= g);
};
