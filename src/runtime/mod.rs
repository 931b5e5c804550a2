//! The runtime every service runs in: the service shape and its task
//! supervision, `serve` (create, run, shut down), hitless reload, the state
//! shared with the admin API (the hub), the `/status` schema, resource
//! limits, the TCP accept loop and an HTTP connection's life, the
//! Prometheus writer and logging (with a once-per-address limiter for
//! refusals, [`once`], and the rate limiter of per-client log lines,
//! [`lograte`]), and the health probes with their rise/fall state machine
//! ([`probe`], [`health`]) that the LB and the single-node prober share.

pub mod admission;
pub mod bind;
pub mod certs;
pub mod changes;
pub mod clock;
pub mod control;
pub mod datagram;
pub mod drain;
pub mod groupcommit;
pub mod ha;
pub mod haauth;
pub mod hasync;
pub mod health;
pub mod httpconn;
pub mod hub;
pub mod lazytcp;
pub mod limits;
pub mod lograte;
pub mod metrics;
pub mod net;
pub mod once;
pub mod probe;
pub mod registry;
pub mod reload;
pub mod service;
pub mod statefile;
pub mod status;
pub mod supervisor;
pub mod sync;
pub mod telemetry;
pub mod tls;
pub mod writestall;
