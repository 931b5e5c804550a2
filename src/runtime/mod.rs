//! The kit every service stands on: the service shape and its task
//! supervision, the `/status` schema, resource limits, the TCP accept loop and an HTTP connection's life, the
//! Prometheus writer and logging (with a once-per-address limiter for
//! refusals, [`once`], and the rate limiter of per-client log lines,
//! [`lograte`]), and the health probes with their rise/fall state machine
//! ([`probe`], [`health`]) that the LB and the single-node prober share.
//!
//! What the services of one `serve` share at run time (connection caps,
//! the HA view, bind options, test-only fault hooks, how helper processes
//! start: [`helperproc`]) is a value,
//! [`context::Context`], handed to each service when it is created: the
//! kit holds no process-global mutable state, so two appliances can run
//! in one process.
//!
//! Invariant (checked by `tests/module_graph.rs`): the kit imports nothing
//! built on it (`services`, `drivers`, `timeline`, `serve`, `host`, `cmd`);
//! the composition root that builds the services is [`crate::serve`].

pub mod admission;
pub mod bind;
pub mod certs;
pub mod clock;
pub mod context;
pub mod control;
pub mod datagram;
pub mod drain;
pub mod faults;
pub mod groupcommit;
pub mod ha;
pub mod haauth;
pub mod health;
pub mod helperproc;
pub mod httpconn;
pub mod lazytcp;
pub mod limits;
pub mod lograte;
pub mod metrics;
pub mod net;
pub mod once;
pub mod probe;
pub mod service;
pub mod statefile;
pub mod status;
pub mod sync;
pub mod telemetry;
pub mod tls;
pub mod workerign;
pub mod writestall;
