//! Host tooling: checks of the machine `serve` runs on (`preflight`), its
//! firewall (`firewall print|apply`), its own resolver (`render
//! host-dns`) and the site's resolver (`render site-dns`).

pub mod firewall;
pub mod hostdns;
pub mod preflight;
pub mod sitedns;
