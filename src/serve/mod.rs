//! The composition root: `serve` builds every service the cluster runs,
//! runs them under one supervision, reloads them (stage all, then commit
//! all), shares their state with the admin API (the hub) and with the HA
//! peer, and shuts them down.
//!
//! Invariant (checked by `tests/module_graph.rs`): this is the only place
//! that knows the concrete services, drivers and the timeline recorder
//! together; nothing below it (`runtime`, `services`, `drivers`,
//! `timeline`) imports it. The admin API ([`admin`]) is serve's face: it
//! reaches the services only through the [`hub`].

pub mod admin;
pub mod changes;
pub mod hasync;
pub mod hub;
pub mod nodeboot;
pub mod registry;
pub mod reload;
pub mod status;
pub mod supervisor;
