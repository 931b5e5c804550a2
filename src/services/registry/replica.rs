//! The HA pair's registry replication (issue #36 item 8, docs/ha.md): a
//! blob, manifest or tag stored on one member (pushed, or fetched
//! through it) is on the other within seconds, by digest, both ways.
//!
//! Design: each member serves its inventory ([`Inventory`]: per
//! repository its layer links, manifest revisions and tags, and every
//! blob's size) and its blobs by digest on two peer-only paths under
//! [`PREFIX`], on the registry's own port. Every [`LOOK`] the other member
//! asks for the inventory and pulls what it lacks (`replica_sync.rs`, which imports this file, never the reverse):
//! blobs first, through an upload file that a cut leaves in place and the
//! next round resumes with `Range`, then manifest revisions, then tags, so
//! nothing is linked before what it names is stored. Repeats are
//! harmless; the two directions are the same code.
//!
//! Security (docs/ha.md "Threat model"): requests to [`PREFIX`] carry the
//! HA pair's HMAC (`runtime::haauth`, keyed by `ha.tokenFile`, the same as
//! the state sync) and are refused from anyone else, replays included; the
//! inventory answer is signed too and bound to the request's nonce, so
//! repositories, manifests and tags come only from the authenticated peer.
//! Blob bytes are not signed: each is hashed on arrival and lands (by
//! rename, `storage.rs`) only when it matches the digest the signed
//! inventory named. TLS to the peer is not verified (each member may have
//! its own CA); the HMAC and the digests carry the integrity.
//!
//! Invariants: a member without `ha:` serves and replicates nothing here
//! (404); only `ha.peer`'s address is answered (403); a bad request is
//! answered, never a panic; the key never appears
//! in logs or status.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};

use super::names::{Digest, Name};
use super::reply::{self, Resp};
use super::storage::{Store, read_link};
use super::{Ctx, ranges};
use crate::plan::Plan;
use crate::runtime::bind::BindOptions;
use crate::runtime::context::Context;
use crate::runtime::ha::HaView;
use crate::runtime::haauth::{self, Nonces, PairKey, Role, Stamp};
use crate::runtime::sync::LockExt as _;

/// The peer-only paths: `<PREFIX>inventory`, `<PREFIX>blob/<digest>`.
pub const PREFIX: &str = "/_ha/registry/";
/// How often a member asks its peer for the inventory.
pub const LOOK: Duration = Duration::from_secs(1);
/// An inventory larger than this is refused (about 200k blobs).
pub const MAX_INVENTORY: usize = 64 << 20;

/// One repository's links.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoInventory {
    pub layers: BTreeSet<String>,
    pub manifests: BTreeSet<String>,
    /// Tag → (digest, when the tag was last written, Unix ms): the later
    /// write wins when the members disagree.
    pub tags: BTreeMap<String, (String, u64)>,
}

/// What a member stores.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inventory {
    pub repos: BTreeMap<String, RepoInventory>,
    /// Every blob a repository links (layers and manifests) → its size.
    pub sizes: BTreeMap<String, u64>,
}

/// The digests linked under `dir` (`.../sha256/<hex>/link`; a link whose
/// directory names another digest is not counted).
fn links(dir: &Path) -> BTreeSet<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let d = read_link(&e.path().join("link"))?;
            (e.file_name().to_str() == Some(d.hex())).then(|| d.to_string())
        })
        .collect()
}

fn mtime_ms(p: &Path) -> u64 {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every repository under `dir` with layers or manifests (a blob pushed
/// before its manifest is replicated too; the catalog lists only
/// repositories with manifests).
fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    if depth > 64 {
        return;
    }
    for e in rd.flatten() {
        let Ok(n) = e.file_name().into_string() else {
            continue;
        };
        if n.starts_with('_') || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = if prefix.is_empty() {
            n
        } else {
            format!("{prefix}/{n}")
        };
        let p = e.path();
        if p.join("_layers").is_dir() || p.join("_manifests").is_dir() {
            out.push(name.clone());
        }
        walk(&p, &name, depth + 1, out);
    }
}

/// The inventory of `store` (blocking: it walks the tree).
pub fn inventory(store: &Store) -> Inventory {
    let mut inv = Inventory::default();
    let mut repos = Vec::new();
    walk(&store.root().join("repositories"), "", 0, &mut repos);
    for repo in repos {
        let Some(name) = Name::parse(&repo) else {
            continue;
        };
        let dir = store.root().join("repositories").join(&repo);
        let mut r = RepoInventory {
            layers: links(&dir.join("_layers/sha256")),
            manifests: links(&dir.join("_manifests/revisions/sha256")),
            tags: BTreeMap::new(),
        };
        for t in store.tags(&name) {
            if let Some(d) = store.tag(&name, &t) {
                let at = mtime_ms(&dir.join("_manifests/tags").join(&t).join("current/link"));
                r.tags.insert(t, (d.to_string(), at));
            }
        }
        for d in r.layers.iter().chain(&r.manifests) {
            if let Some(size) = Digest::parse(d).ok().and_then(|d| store.blob_size(&d)) {
                inv.sizes.insert(d.clone(), size);
            }
        }
        inv.repos.insert(repo, r);
    }
    inv
}

/// What one side stores that the other lacks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lack {
    pub blobs: u64,
    pub bytes: u64,
    pub manifests: u64,
    pub tags: u64,
}

/// What `have` stores that `other` lacks (a tag counts when `other` has
/// it at another digest and an older write).
pub fn lacking(have: &Inventory, other: &Inventory) -> Lack {
    let mut lack = Lack::default();
    for (d, size) in &have.sizes {
        if !other.sizes.contains_key(d) {
            lack.blobs += 1;
            lack.bytes += size;
        }
    }
    let empty = RepoInventory::default();
    for (repo, r) in &have.repos {
        let o = other.repos.get(repo).unwrap_or(&empty);
        lack.manifests += r.manifests.difference(&o.manifests).count() as u64;
        lack.tags += r
            .tags
            .iter()
            .filter(|(t, (d, at))| o.tags.get(*t).is_none_or(|(od, oat)| od != d && oat < at))
            .count() as u64;
    }
    lack
}

/// `/status` → `registry` → `replica`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    pub peer: String,
    /// Unix seconds of the last complete round with the peer.
    pub last_sync: Option<u64>,
    pub error: Option<String>,
    /// What the peer still lacks of ours (as of its last inventory).
    pub peer_lacks: Lack,
    /// What we still lack of the peer's.
    pub we_lack: Lack,
    /// Blobs and bytes taken from the peer since start.
    pub pulled_blobs: u64,
    pub pulled_bytes: u64,
    /// Blob fetches cut and resumed from where they stopped.
    pub resumed: u64,
}

/// The pair's side of the registry: `None` members replicate nothing.
pub struct Replica {
    pub(super) peer: Ipv4Addr,
    pub(super) key: PairKey,
    nonces: Mutex<Nonces>,
    pub(super) status: Mutex<ReplicaStatus>,
    /// This member's HA view and how it binds (the run-time context).
    ha: HaView,
    pub(super) bind: BindOptions,
}

impl Replica {
    /// The replica of `plan`'s member (`Ok(None)` without `ha:`).
    pub fn of(plan: &Plan, rt: &Context) -> anyhow::Result<Option<Arc<Replica>>> {
        let Some(ha) = &plan.cluster.ha else {
            return Ok(None);
        };
        let token = crate::config::secret::read_token(&ha.token_file)
            .map_err(|e| anyhow::anyhow!("ha.tokenFile: {e}"))?;
        Ok(Some(Arc::new(Replica {
            peer: ha.peer,
            key: PairKey::new(&token),
            nonces: Mutex::default(),
            status: Mutex::new(ReplicaStatus {
                peer: ha.peer.to_string(),
                ..ReplicaStatus::default()
            }),
            ha: rt.ha.clone(),
            bind: rt.bind,
        })))
    }

    /// This member's own address (0.0.0.0 until `runtime::ha` knows it).
    pub fn me(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.ha.member_id())
    }
}

/// The `replica` part of the registry's status (`None` without `ha:`).
pub(crate) fn status_of(ctx: &Ctx) -> Option<ReplicaStatus> {
    ctx.replica.as_ref().map(|r| r.status.locked().clone())
}

fn plain(status: StatusCode, text: &str) -> Resp {
    let mut r = Response::new(reply::full(Bytes::from(format!("{text}\n"))));
    *r.status_mut() = status;
    r
}

/// Answer a request under [`PREFIX`] (`None`: not one; the caller goes on).
pub(crate) async fn answer(ctx: &Arc<Ctx>, req: &Request<Incoming>, peer: IpAddr) -> Option<Resp> {
    let path = req.uri().path().strip_prefix(PREFIX)?;
    let Some(replica) = &ctx.replica else {
        return Some(reply::page_not_found());
    };
    if peer != IpAddr::V4(replica.peer) {
        return Some(plain(StatusCode::FORBIDDEN, "only ha.peer replicates"));
    }
    let header = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let role = Role::Request {
        method: req.method().as_str(),
        path: req.uri().path(),
    };
    let stamp = haauth::verify(
        &replica.key,
        role,
        &header,
        b"",
        replica.peer,
        crate::runtime::clock::unix_now(),
    );
    let stamp = match stamp {
        Ok(s) if replica.nonces.locked().fresh(s.nonce) => s,
        Ok(_) => return Some(plain(StatusCode::UNAUTHORIZED, "a replayed request")),
        Err(e) => {
            tracing::debug!("registry replica: refused {peer}: {e}");
            return Some(plain(StatusCode::UNAUTHORIZED, &e.to_string()));
        }
    };
    if req.method() != hyper::Method::GET {
        return Some(reply::method_not_allowed());
    }
    if path == "inventory" {
        return Some(inventory_answer(ctx, replica, &stamp).await);
    }
    let d = path.strip_prefix("blob/").map(Digest::parse);
    Some(match d {
        Some(Ok(d)) => blob_answer(ctx, &d, header("range").as_deref()).await,
        _ => reply::page_not_found(),
    })
}

async fn inventory_answer(ctx: &Arc<Ctx>, replica: &Replica, request: &Stamp) -> Resp {
    let c = ctx.clone();
    let inv = tokio::task::spawn_blocking(move || inventory(&c.store))
        .await
        .unwrap_or_default();
    let body = serde_json::to_vec(&inv).unwrap_or_default();
    let stamp = Stamp::new(replica.me(), crate::runtime::clock::unix_now());
    let role = Role::Answer {
        status: 200,
        request: &request.nonce,
    };
    let signed = haauth::sign(&replica.key, role, &stamp, &body);
    let mut r = Response::new(reply::full(Bytes::from(body)));
    for (k, v) in signed {
        reply::set(&mut r, k, &v);
    }
    reply::set(&mut r, "Content-Type", "application/json");
    r
}

/// Blob `d` from the offset `range` names (`bytes=N-`), streamed; only a
/// blob whose content matches its digest is sent.
async fn blob_answer(ctx: &Arc<Ctx>, d: &Digest, range: Option<&str>) -> Resp {
    let (c, dd) = (ctx.clone(), *d);
    let check =
        tokio::task::spawn_blocking(move || (c.store.verified(&dd), c.store.blob_size(&dd))).await;
    let Ok((super::storage::Check::Good, Some(size))) = check else {
        return plain(StatusCode::NOT_FOUND, "blob unknown");
    };
    let start = match ranges::range(range, size) {
        Ok(r) => r.map_or(0, |(s, _)| s),
        Err(()) => return plain(StatusCode::RANGE_NOT_SATISFIABLE, "bad range"),
    };
    let Ok(mut f) = tokio::fs::File::open(ctx.store.blob_path(d)).await else {
        return plain(StatusCode::NOT_FOUND, "blob unknown");
    };
    if f.seek(std::io::SeekFrom::Start(start)).await.is_err() {
        return plain(StatusCode::NOT_FOUND, "blob unknown");
    }
    let stream = tokio_util::io::ReaderStream::with_capacity(f.take(size - start), 256 * 1024)
        .map(|r| r.map(Frame::data));
    let mut r = Response::new(StreamBody::new(stream).boxed_unsync());
    if start > 0 {
        *r.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    reply::set(&mut r, "Content-Length", &(size - start).to_string());
    r
}
