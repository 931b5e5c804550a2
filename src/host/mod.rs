//! Host tooling: checks of the machine `serve` runs on (`preflight`), its
//! firewall (`firewall print|apply`) and its own resolver (`render
//! host-dns`).

pub mod firewall;
pub mod hostdns;
pub mod preflight;
