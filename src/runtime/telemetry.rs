//! Logging: `RUST_LOG` filter (default `info`), to stderr.
//!
//! hickory's catalog logs errors only unless `RUST_LOG` names
//! `hickory_server`: it warns once per odd query (an unimplemented opcode,
//! an EDNS version above 0, a malformed update) without the client's
//! address, so a client could fill the disk with them; the DNS service
//! logs those itself, rate-limited ([`crate::runtime::lograte`]).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The directive that quiets hickory's per-query warnings.
const QUIET_CATALOG: &str = "hickory_server::zone_handler::catalog=error";

pub fn init() {
    let mut filter = EnvFilter::builder()
        .with_default_directive(tracing::level_filters::LevelFilter::INFO.into())
        .from_env_lossy();
    let named = std::env::var("RUST_LOG").is_ok_and(|v| v.contains("hickory_server"));
    if !named && let Ok(d) = QUIET_CATALOG.parse() {
        filter = filter.add_directive(d);
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
