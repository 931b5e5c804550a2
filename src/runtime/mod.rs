//! The runtime every service runs in: the service shape and its task
//! supervision, `serve` (create, run, shut down), hitless reload, the state
//! shared with the admin API (the hub), the `/status` schema, resource
//! limits, the TCP accept loop, the Prometheus writer, logging and the
//! rate limiter of per-client log lines.

pub mod drain;
pub mod hub;
pub mod limits;
pub mod lograte;
pub mod metrics;
pub mod net;
pub mod reload;
pub mod service;
pub mod status;
pub mod supervisor;
pub mod sync;
pub mod telemetry;
pub mod tls;
