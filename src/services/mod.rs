//! One folder per service, each in the shape of [`crate::runtime::service`]:
//! DNS, DHCP (v4 and v6), the TCP load balancer, HTTP, TFTP and NTP (the
//! admin API is `serve`'s face, [`crate::serve::admin`]).
//!
//! Rule (checked by `tests/module_graph.rs`): no service imports another
//! service or driver; what two of them share lives in `runtime`, `boot`,
//! `model` or `timeline`.

pub mod dhcp;
pub mod dhcp6;
pub mod dns;
pub mod http;
pub mod lb;
pub mod ntp;
pub mod tftp;
