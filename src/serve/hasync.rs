//! The state an HA pair shares (`ha:`, docs/ha.md): the network-boot
//! install state (which node installed: a node that installed through one
//! member must get `exit` from the other, never the install script),
//! DHCP's pool leases (the survivor does not hand a leased address to
//! another client), the install timeline's events (`timeline::shared`:
//! the survivor's `status` shows what happened through the other) and the
//! nodes' BMC journals (`drivers::bmc::journal`: a `bmc up` on the
//! survivor does not redo the other's steps). Each is a part
//! ([`SyncControl`]) of one versioned document ([`SyncDoc`], version
//! [`VERSION`]).
//!
//! Transport: each member POSTs its whole state to the peer's admin API
//! (`POST /api/ha/state`) at start, on every change, and every
//! [`HEARTBEAT`]; the answer carries the peer's whole state, so one
//! exchange brings both up to date — a member that comes back
//! (re)connects and is in step after its first exchange. Merging is per
//! entry by revision (the newer entry wins), so it is the same in both
//! directions and repeats are harmless. A peer that does not answer is
//! retried with back-off (up to [`MAX_BACKOFF`]); the loop is a background
//! task with bounded I/O, so serving never waits for it.
//!
//! Security (docs/ha.md "Threat model"): every request and every answer is
//! authenticated with an HMAC keyed by the pair key (`ha.tokenFile`,
//! [`super::haauth`]); the key is never sent. A message is verified before
//! anything in it is decoded; a request's nonce is refused when repeated;
//! an answer must be bound to our request's nonce. One exchange has one
//! total [`DEADLINE`] (a dripping peer is cut). A document is decoded and
//! validated whole ([`SyncControl::prepare`]) before any part is applied:
//! taken whole or not at all. Its size is bounded by [`max_doc`], which
//! grows with the configured pools only, never with what clients send.
//! `/status` → `ha` shows each direction (`sent`, `received`) honestly.
//! A document without `version` (a member of version 1, which also sends
//! the token in clear) is refused loudly: both members must be upgraded.
//!
//! The client side of one exchange is [`client`] (blocking HTTP/1.1 on a
//! `spawn_blocking` thread); what can go wrong, in the texts the log and
//! `/status` show, is [`SyncError`].

mod client;
mod error;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::model::cluster::Cluster;
use crate::runtime::clock::unix_now;
use crate::runtime::control::{Skipped, SyncControl};
use crate::runtime::ha::HaView;
use crate::runtime::haauth::{self, AuthError, PairKey, Role, Stamp};
use crate::runtime::lograte::LogRate;
use crate::runtime::sync::LockExt as _;
use crate::serve::hub::Hub;
pub use error::SyncError;

/// Path of the exchange on the admin API.
pub const PATH: &str = "/api/ha/state";
/// An exchange also happens this often without changes (peer liveness).
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// How often the local state is looked at for changes.
const LOOK: Duration = Duration::from_millis(100);
/// Total bound of one exchange, connect to the answer's last byte.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Longest wait between attempts while the peer does not answer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(4);
/// The exchanged document's version.
pub const VERSION: u32 = 2;
/// Largest document accepted without a pool.
pub const BASE_DOC: usize = 1 << 20;
/// What each pool address adds to [`max_doc`]: more than one shared lease
/// takes (its client id is at most 64 bytes, its hostname 63).
pub const PER_POOL_ADDRESS: usize = 512;

/// Rate limit of the exchange's warnings (refused requests, entries).
const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// The limiter of the exchange's warnings: the serve's `ha` limiter.
fn log(hub: &Hub) -> Arc<LogRate> {
    hub.ctx().log_rate("ha", LOG_INTERVAL)
}

/// One member's shared state, as exchanged: the version and part name
/// (`netboot`, `leases`, `timeline`, `bmc`) → that part's state. A part
/// this member does not run is absent and ignored on the other side.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SyncDoc {
    pub version: u32,
    pub parts: BTreeMap<String, serde_json::Value>,
}

/// The largest document either member accepts for cluster `c`:
/// [`BASE_DOC`] plus [`PER_POOL_ADDRESS`] per DHCP pool address (the
/// shared leases are the only part that grows with the network).
pub fn max_doc(c: &Cluster) -> usize {
    let size = |p: &Option<(Ipv4Addr, Ipv4Addr)>| {
        p.map_or(0, |(s, e)| {
            (u64::from(u32::from(e)).saturating_sub(u64::from(u32::from(s))) + 1) as usize
        })
    };
    let addresses =
        size(&c.dhcp.pool) + c.dhcp.segments.iter().map(|s| size(&s.pool)).sum::<usize>();
    BASE_DOC.saturating_add(addresses.saturating_mul(PER_POOL_ADDRESS))
}

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
    with_parts(hub, |parts| SyncDoc {
        version: VERSION,
        parts: parts
            .iter()
            .map(|p| (p.part().to_string(), p.sync_state().1))
            .collect(),
    })
}

/// Decode a document (already authenticated), refusing other versions.
fn decode(body: &[u8]) -> Result<SyncDoc, SyncError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(SyncError::NotADocument)?;
    match v.get("version").and_then(serde_json::Value::as_u64) {
        Some(n) if n == u64::from(VERSION) => {}
        Some(n) => return Err(SyncError::OtherVersion(n)),
        None => return Err(SyncError::VersionOne),
    }
    serde_json::from_value(v).map_err(SyncError::NotADocument)
}

/// Merge `peer`'s state into ours; how many entries were taken.
fn merge(hub: &Hub, peer: SyncDoc) -> Result<usize, SyncError> {
    with_parts(hub, |parts| {
        merge_into(parts, peer.parts, hub.ha(), &log(hub))
    })
}

/// Prepare every part of `peer` (decode and validate), then apply them
/// all: a part that cannot be decoded refuses the whole document before
/// anything changed. Parts this member does not know are ignored.
fn merge_into(
    parts: &[&dyn SyncControl],
    mut peer: BTreeMap<String, serde_json::Value>,
    ha: &HaView,
    log: &LogRate,
) -> Result<usize, SyncError> {
    let mut skipped = Skipped::default();
    let mut staged = Vec::new();
    for p in parts {
        if let Some(v) = peer.remove(p.part()) {
            staged.push((p.part(), p.prepare(v, &mut skipped)?));
        }
    }
    let mut taken = 0;
    for (part, apply) in staged {
        let n = apply();
        if n > 0 {
            info!("ha: took {n} {part} entr(y/ies) from the peer");
        }
        taken += n;
    }
    if skipped.count > 0 {
        let why = skipped.first.clone().unwrap_or_default();
        if let Some(tail) = log.check("peer entries refused", None) {
            warn!(
                "ha: left out {} entr(y/ies) of the peer's document, e.g. {why}{tail}",
                skipped.count
            );
        }
        ha.update(|s| {
            s.skipped += skipped.count;
            s.last_skipped = Some(why);
        });
    }
    if taken > 0 {
        ha.update(|s| s.learned += taken as u64);
    }
    Ok(taken)
}

/// The answer to a `POST /api/ha/state`.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    fn error(status: u16, why: &str) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: serde_json::to_vec(&serde_json::json!({ "error": why })).unwrap_or_default(),
        }
    }
}

/// `POST /api/ha/state` from the peer, `secret` being the pair key and
/// `header` a lookup of the request's headers by lower-case name:
/// authenticate it (before decoding anything), merge the peer's state and
/// answer ours, signed and bound to the request.
pub fn answer(
    hub: &Hub,
    secret: &str,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    client: SocketAddr,
) -> Answer {
    let Some(peer) = hub.plan().cluster.ha.as_ref().map(|h| h.peer) else {
        return Answer::error(404, "this appliance is not an HA member (no ha: section)");
    };
    let key = PairKey::new(secret);
    let role = Role::Request {
        method: "POST",
        path: PATH,
    };
    let checked = haauth::verify(&key, role, header, body, peer, unix_now()).and_then(|st| {
        if hub.ha_nonces.locked().fresh(st.nonce) {
            Ok(st)
        } else {
            Err(AuthError::Replay)
        }
    });
    let request = match checked {
        Ok(st) => st,
        Err(e) => {
            if let Some(tail) = log(hub).check("refused exchange", Some(client)) {
                warn!("ha: refused an exchange from {client}: {e}{tail}");
            }
            hub.ha()
                .update(|s| s.received.failed(format!("from {client}: {e}"), unix_now()));
            return Answer::error(401, &e.to_string());
        }
    };
    if let Err(e) = decode(body).and_then(|d| merge(hub, d)) {
        warn!("ha: refused the peer's document: {e}");
        let why = e.to_string();
        hub.ha()
            .update(|s| s.received.failed(why.clone(), unix_now()));
        return Answer::error(400, &why);
    }
    hub.ha()
        .update(|s| s.received.worked(body.len(), unix_now()));
    let doc = serde_json::to_vec(&local(hub)).unwrap_or_default();
    let me = Ipv4Addr::from(hub.ha().member_id());
    let stamp = Stamp::new(me, unix_now());
    let role = Role::Answer {
        status: 200,
        request: &request.nonce,
    };
    Answer {
        status: 200,
        headers: haauth::sign(&key, role, &stamp, &doc),
        body: doc,
    }
}

/// One exchange from the loop: build, check the size, post, decode and
/// merge. The size of our document on success.
async fn exchange_once(
    hub: &Arc<Hub>,
    peer: SocketAddr,
    key: &Arc<PairKey>,
) -> Result<usize, SyncError> {
    let me = hub.ha().member_id();
    if me == 0 {
        return Err(SyncError::OwnAddressUnknown);
    }
    let body = serde_json::to_vec(&local(hub)).map_err(SyncError::Encode)?;
    let limit = max_doc(&hub.plan().cluster);
    hub.ha().update(|s| {
        s.doc_bytes = body.len() as u64;
        s.doc_limit = limit as u64;
    });
    if body.len() > limit {
        return Err(SyncError::DocumentTooLarge {
            bytes: body.len(),
            limit,
        });
    }
    let key = key.clone();
    let sent = body.len();
    let answer = tokio::task::spawn_blocking(move || {
        client::post(peer, &key, Ipv4Addr::from(me), &body, limit)
    })
    .await
    .map_err(SyncError::Task)??;
    merge(hub, decode(&answer)?)?;
    Ok(sent)
}

/// How the last exchange went, so that each change is logged once.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Exchanged,
    /// It failed with this text (the same failure again is not logged).
    Failed(String),
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
    let key = Arc::new(PairKey::new(&token));
    drop(token);
    let mut sent: Option<u64> = None;
    let mut last = Instant::now();
    let mut backoff = Duration::ZERO;
    let mut was: Option<Outcome> = None;
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
        match exchange_once(&hub, peer, &key).await {
            Ok(bytes) => {
                // What we sent; a merge that took entries changed the
                // counter, and the next look sends them back (harmless).
                sent = Some(changes);
                backoff = Duration::ZERO;
                if was != Some(Outcome::Exchanged) {
                    info!("ha: peer {peer} reachable; state exchanged (authenticated)");
                }
                was = Some(Outcome::Exchanged);
                hub.ha().update(|s| {
                    s.peer_reachable = true;
                    s.last_sync = Some(unix_now());
                    s.peer_error = None;
                    s.sent.worked(bytes, unix_now());
                });
            }
            Err(e) => {
                let failed = Outcome::Failed(e.to_string());
                if was.as_ref() != Some(&failed) {
                    if e.stops_sync() {
                        error!("ha: {e}; the pair no longer shares its state");
                    } else {
                        warn!(
                            "ha: exchange with {peer} failed ({e}); retrying with back-off, serving goes on"
                        );
                    }
                }
                was = Some(failed);
                sent = None;
                backoff = (backoff * 2).clamp(Duration::from_millis(250), MAX_BACKOFF);
                let why = e.to_string();
                hub.ha().update(|s| {
                    s.peer_reachable = false;
                    s.peer_error = Some(why.clone());
                    s.sent.failed(why, unix_now());
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::control::PartError;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A part that counts what it applied, refusing documents that are
    /// not numbers.
    struct Part(&'static str, AtomicUsize);

    impl SyncControl for Part {
        fn part(&self) -> &'static str {
            self.0
        }
        fn sync_version(&self) -> u64 {
            0
        }
        fn sync_state(&self) -> (u64, serde_json::Value) {
            (0, serde_json::Value::Null)
        }
        fn prepare<'a>(
            &'a self,
            peer: serde_json::Value,
            _: &mut Skipped,
        ) -> Result<crate::runtime::control::Staged<'a>, PartError> {
            let n: usize = serde_json::from_value(peer).map_err(PartError::undecodable(self.0))?;
            Ok(Box::new(move || {
                self.1.fetch_add(n, Ordering::Relaxed);
                n
            }))
        }
    }

    #[test]
    fn a_document_is_taken_whole_or_not_at_all() {
        let (a, b) = (
            Part("a", AtomicUsize::new(0)),
            Part("b", AtomicUsize::new(0)),
        );
        let parts: [&dyn SyncControl; 2] = [&a, &b];
        let doc = |b: serde_json::Value| {
            BTreeMap::from([
                ("a".to_string(), serde_json::json!(3)),
                ("b".to_string(), b),
                (
                    "newer".to_string(),
                    serde_json::json!("a part of a newer version"),
                ),
            ])
        };
        let (ha, log) = (HaView::single(), LogRate::new("ha", LOG_INTERVAL));
        let refused = merge_into(&parts, doc(serde_json::json!("bad")), &ha, &log);
        assert_eq!(
            refused.unwrap_err().to_string(),
            "b: invalid type: string \"bad\", expected usize"
        );
        assert_eq!(a.1.load(Ordering::Relaxed), 0, "nothing applied");
        assert_eq!(
            merge_into(&parts, doc(serde_json::json!(2)), &ha, &log).unwrap(),
            5
        );
        assert_eq!(
            (a.1.load(Ordering::Relaxed), b.1.load(Ordering::Relaxed)),
            (3, 2)
        );
    }

    #[test]
    fn documents_of_other_versions_are_refused() {
        assert!(matches!(
            decode(br#"{"netboot":{}}"#),
            Err(SyncError::VersionOne)
        ));
        assert!(matches!(
            decode(br#"{"version":3,"parts":{}}"#),
            Err(SyncError::OtherVersion(3))
        ));
        assert!(matches!(
            decode(br#"{"version":2,"parts":[]}"#),
            Err(SyncError::NotADocument(_))
        ));
        assert!(matches!(decode(b"\x01"), Err(SyncError::NotADocument(_))));
        assert_eq!(decode(br#"{"version":2,"parts":{}}"#).unwrap().version, 2);
    }

    #[test]
    fn the_document_limit_grows_with_the_pools_only() {
        let yaml = r#"name: t
baseDomain: crc.testing
network: { cidr: 10.9.0.0/16, gateway: 10.9.0.1, applianceIP: 10.9.0.1 }
dhcp: { pool: { start: 10.9.1.0, end: 10.9.7.255 } }
nodes:
  - { name: master-0, role: master, mac: "52:54:00:00:00:0A", ip: 10.9.0.10 }
"#;
        let p = crate::config::from_str(
            yaml,
            std::path::Path::new("/"),
            std::path::Path::new("/t.yaml"),
        );
        let p = p.unwrap();
        assert_eq!(max_doc(&p.cluster), BASE_DOC + 1792 * PER_POOL_ADDRESS);
    }
}
