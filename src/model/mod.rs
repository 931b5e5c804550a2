//! The model every other module shares: the validated cluster
//! ([`cluster`]), its network types (CIDR, MAC: [`net`]), DNS names and records ([`names`]) and the rules that keep
//! user records from contradicting the generated ones ([`conflicts`]),
//! who may fetch a node's secrets ([`access`]), the IPv6 half of a
//! dual-stack network ([`ipv6`]), and the install mode
//! (bootstrap node or single-node bootstrap-in-place, [`mode`]), and a
//! static node's network ([`staticnet`]: its `ip=` kargs and keyfile).
//!
//! A leaf: it imports nothing from `config`, `plan` or the services, so
//! `config` (which produces a [`cluster::Cluster`] and the plan) and `plan`
//! (which derives what is served) both depend on it and never on each other
//! in a cycle.

pub mod access;
pub mod bmc;
pub mod boot;
pub mod catalogue;
pub mod chrony;
pub mod cluster;
pub mod conflicts;
pub mod ipv6;
pub mod keepalived;
pub mod mode;
pub mod names;
pub mod net;
pub mod registry;
pub mod sourcenet;
pub mod staticnet;
