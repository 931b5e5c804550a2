//! The state an HA pair shares (`ha:`, docs/ha.md): the network-boot
//! install state (which node installed: a node that installed through one
//! member must get `exit` from the other, never the install script),
//! DHCP's pool leases (the survivor does not hand a leased address to
//! another client), the install timeline's events (`timeline::shared`:
//! the survivor's `status` shows what happened through the other) and the
//! nodes' BMC journals (`drivers::bmc::journal`: a `bmc up` on the
//! survivor does not redo the other's steps). Each is a part
//! ([`SyncControl`]) of one document.
//!
//! Transport: each member POSTs its whole state to the peer's admin API
//! (`POST /api/ha/state`, `Authorization: Bearer <ha.tokenFile>`; refused
//! without it) at start, on every change, and every [`HEARTBEAT`]; the
//! answer carries the peer's whole state, so one exchange brings both up
//! to date — a member that comes back (re)connects and is in step after
//! its first exchange. Merging is per node by revision (the newer entry
//! wins, `BootState::merge`), so it is the same in both directions and
//! repeats are harmless. A peer that does not answer is retried with
//! back-off (up to [`MAX_BACKOFF`]) and shown in `/status` → `ha`; the
//! loop is a background task with bounded I/O, so serving never waits for
//! it.
//!
//! The client is a few lines of blocking HTTP/1.1 on a `spawn_blocking`
//! thread, like the CLI's admin client: one small request to a known peer,
//! no pooling or TLS, not worth an HTTP client stack.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeMap;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::runtime::clock::unix_now;
use crate::runtime::control::SyncControl;
use crate::runtime::ha;
use crate::runtime::hub::Hub;

/// Path of the exchange on the admin API.
pub const PATH: &str = "/api/ha/state";
/// An exchange also happens this often without changes (peer liveness).
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// How often the local state is looked at for changes.
const LOOK: Duration = Duration::from_millis(100);
/// Connect and read bound of one exchange.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait between attempts while the peer does not answer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(4);
/// Largest state document accepted.
pub const MAX_DOC: usize = 1 << 20;

/// One member's shared state, as exchanged: part name (`netboot`,
/// `leases`) → that part's state. A part this member does not run is
/// absent and ignored on the other side.
pub type SyncDoc = BTreeMap<String, serde_json::Value>;

/// Call `f` with every part this member shares: the services' (netboot,
/// leases), the timeline's events and the BMC journals.
fn with_parts<R>(hub: &Hub, f: impl FnOnce(&[&dyn SyncControl]) -> R) -> R {
    let events = hub.events();
    let bmc = crate::drivers::bmc::journal::Journals::new(&hub.plan().cluster);
    let mut parts = hub.services.sync_parts();
    parts.push(&*events);
    parts.push(&bmc);
    f(&parts)
}

/// A value that changes whenever this member's state does (cheap: no
/// document is built).
fn version(hub: &Hub) -> u64 {
    with_parts(hub, |parts| {
        parts
            .iter()
            .fold(0u64, |v, p| v.rotate_left(17) ^ p.sync_version())
    })
}

/// This member's state.
fn local(hub: &Hub) -> SyncDoc {
    with_parts(hub, |parts| {
        parts
            .iter()
            .map(|p| (p.part().to_string(), p.sync_state().1))
            .collect()
    })
}

/// Merge `peer`'s state into ours; how many entries were taken.
fn merge(hub: &Hub, peer: SyncDoc) -> Result<usize, String> {
    with_parts(hub, |parts| merge_into(parts, peer))
}

fn merge_into(parts: &[&dyn SyncControl], mut peer: SyncDoc) -> Result<usize, String> {
    let mut taken = 0;
    for p in parts {
        if let Some(v) = peer.remove(p.part()) {
            let n = p.merge_state(v)?;
            if n > 0 {
                info!("ha: took {n} {} entr(y/ies) from the peer", p.part());
            }
            taken += n;
        }
    }
    if taken > 0 {
        ha::update(|s| s.learned += taken as u64);
    }
    Ok(taken)
}

/// `POST /api/ha/state` (token already checked): merge the peer's state
/// and answer with ours.
pub fn exchange(hub: &Hub, body: &[u8]) -> Result<SyncDoc, String> {
    let doc: SyncDoc =
        serde_json::from_slice(body).map_err(|e| format!("not an HA state document: {e}"))?;
    merge(hub, doc)?;
    // The peer just reached us: it is up.
    ha::update(|s| {
        s.peer_reachable = true;
        s.last_sync = Some(unix_now());
        s.peer_error = None;
    });
    Ok(local(hub))
}

/// One exchange with the peer (blocking): our document out, theirs back.
fn post(peer: SocketAddr, token: &str, body: &[u8]) -> Result<Vec<u8>, String> {
    let mut s = TcpStream::connect_timeout(&peer, IO_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| s.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "POST {PATH} HTTP/1.1\r\nHost: {peer}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())
        .and_then(|()| s.write_all(body))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.take(MAX_DOC as u64 + 4096)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("malformed answer")?;
    let status = std::str::from_utf8(&buf[..split])
        .ok()
        .and_then(|h| h.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or("malformed answer")?;
    let body = buf[split + 4..].to_vec();
    if status != 200 {
        return Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body).trim()
        ));
    }
    Ok(body)
}

/// Exchange with the peer at `peer` (its admin API) until `stop`: at
/// start, on every local change, every [`HEARTBEAT`]; back-off while it
/// does not answer.
pub async fn run(
    hub: Arc<Hub>,
    peer: SocketAddr,
    token: String,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut sent: Option<u64> = None;
    let mut last = Instant::now();
    let mut backoff = Duration::ZERO;
    let mut was_up: Option<bool> = None;
    loop {
        let wait = if backoff.is_zero() { LOOK } else { backoff };
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(wait) => {}
        }
        // The version before the document: a change in between is in the
        // document and, as the version moved, sent again at the next look.
        let changes = version(&hub);
        if backoff.is_zero() && sent == Some(changes) && last.elapsed() < HEARTBEAT {
            continue;
        }
        last = Instant::now();
        let body = serde_json::to_vec(&local(&hub))?;
        let token = token.clone();
        let res = tokio::task::spawn_blocking(move || post(peer, &token, &body))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r)
            .and_then(|b| {
                serde_json::from_slice::<SyncDoc>(&b).map_err(|e| format!("bad answer: {e}"))
            })
            .and_then(|d| merge(&hub, d));
        match res {
            Ok(_) => {
                // What we sent; a merge that took entries changed the
                // counter, and the next look sends them back (harmless).
                sent = Some(changes);
                backoff = Duration::ZERO;
                if was_up != Some(true) {
                    info!("ha: peer {peer} reachable; install state exchanged");
                }
                was_up = Some(true);
                ha::update(|s| {
                    s.peer_reachable = true;
                    s.last_sync = Some(unix_now());
                    s.peer_error = None;
                });
            }
            Err(e) => {
                if was_up != Some(false) {
                    warn!(
                        "ha: peer {peer} unreachable ({e}); retrying with back-off, serving goes on"
                    );
                }
                was_up = Some(false);
                sent = None;
                backoff = (backoff * 2).clamp(Duration::from_millis(250), MAX_BACKOFF);
                ha::update(|s| {
                    s.peer_reachable = false;
                    s.peer_error = Some(e);
                });
            }
        }
    }
}
