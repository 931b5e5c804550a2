//! One folder per service, each in the shape of [`crate::runtime::service`]:
//! DNS, DHCP, the TCP load balancer, HTTP, TFTP, NTP and the admin API.
//!
//! Rule (checked by `tests/module_graph.rs`): no service imports another
//! service or driver; what two of them share lives in `runtime`, `boot`,
//! `model` or `timeline`.

pub mod admin;
pub mod dhcp;
pub mod dhcp6;
pub mod dns;
pub mod http;
pub mod lb;
pub mod ntp;
pub mod registry;
pub mod tftp;
