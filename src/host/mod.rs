//! Host tooling: checks of the machine `serve` runs on (`preflight`) and
//! its firewall (`firewall print|apply`).

pub mod firewall;
pub mod preflight;
