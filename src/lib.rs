//! crc-appliance: the user-provisioned infrastructure of an OpenShift 4
//! install (DNS, DHCP, L4 load balancer, HTTP for images and ignition, and
//! libvirt VMs) in one process, driven by one cluster file.
//!
//! # Layout (by layer; `docs/architecture.md` has the picture)
//! - [`model`]: the validated cluster, DNS names and records, conflict rules,
//!   the service catalogue and its listeners (a leaf everything uses).
//! - [`config`]: the cluster file (raw serde structs, validation); `load`
//!   returns the plan.
//! - [`plan`]: pure derivation of DNS zones, DHCP reservations, LB pools.
//! - [`runtime`]: the kit every service stands on: the service shape and
//!   its task supervision, the `/status` schema, limits, the accept loop,
//!   metrics, HA primitives; it imports nothing built on it.
//! - [`services`]: DNS, DHCP(v4/v6), LB, HTTP, TFTP, NTP; one folder each,
//!   none importing another.
//! - [`drivers`]: libvirt (network, disks, VMs) and Redfish BMCs.
//! - [`boot`]: boot-media primitives (ISO 9660 reader, live ISO embed
//!   areas, boot files under a root).
//! - [`timeline`]: the install timeline per node and the cluster phase.
//! - [`host`]: `preflight` and `firewall` (the machine `serve` runs on).
//! - [`serve`]: the composition root: builds, runs, reloads and stops the
//!   services; the hub, HA sync and the admin API (serve's face).
//! - [`cmd`]: the command line, one thin function per command.

#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]
#![warn(unreachable_pub)]

pub mod boot;
pub mod cmd;
pub mod config;
pub mod drivers;
pub mod host;
pub mod model;
pub mod plan;
pub mod runtime;
pub mod serve;
pub mod services;
pub mod timeline;

pub use cmd::{EXIT_CONFIG, exit_code, run};
