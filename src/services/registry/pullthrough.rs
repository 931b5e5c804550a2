//! The pull-through cache (issue #36 item 4, docs/registry.md): a
//! repository `<registry>/<repository>` whose first component is a
//! `registry.pullThrough[].registry` is filled from that upstream on a miss
//! and then served from storage as any other (`pull.rs`).
//!
//! - A tag is resolved upstream (`HEAD`, the client's `Accept` passed on)
//!   at most every [`TAG_TTL`] (60 s); the manifest is fetched by digest when
//!   storage lacks it, checked against its digest and stored as a push
//!   stores it (blob, revision link, tag links). With the upstream
//!   unreachable, the tag last resolved is served and counted in status
//!   (`staleTags`).
//! - A manifest by digest and a blob come from storage when there, else
//!   are fetched once (blobs: `pullblob.rs` over `flight.rs`): the fetch
//!   streams into an upload file while every client asking for the blob
//!   reads it as it grows; the blob lands through `Store::finish_upload`
//!   (hashed, synced, renamed) only when its SHA-256 matched, else the
//!   waiters' streams end in an error and the upload is removed.
//! - A miss that cannot be fetched is `503 UNAVAILABLE` with the reason
//!   (within [`super::upstream::HEAD_DEADLINE`] for the answer's head),
//!   logged (rate-limited) and in status; an upstream 404 is the usual
//!   `MANIFEST_UNKNOWN`/`BLOB_UNKNOWN`.
//!
//! The fetch runs in its own task: a client that goes away does not stop
//! it for the others (nor the storing).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::{HeaderMap, Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tracing::{info, warn};

use super::Ctx;
use super::flight::{Failure, Flights};
use super::manifest::{self, MAX_MANIFEST};
use super::names::{Digest, Name, Reference};
use super::reply::{self, Code, Resp};
use super::storage::Check;
use super::upstream::Upstream;
use super::upstream_auth::PullSecret;
use crate::model::registry::RegistryCfg;
use crate::runtime::context::Context;
use crate::runtime::lograte::{CLIENT_EVENTS, LogRate};
use crate::runtime::metrics::{Kind, family};
use crate::runtime::sync::LockExt as _;

/// A tag is asked upstream again after this (a moved tag is seen then).
pub const TAG_TTL: Duration = Duration::from_secs(60);
/// An upstream body that sends nothing this long is cut.
pub(super) const STALL: Duration = Duration::from_secs(30);

/// One upstream in `registry.pullThrough` on `/status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamStatus {
    pub registry: String,
    pub url: String,
    /// Whether its last exchange got an answer (`None`: none yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reachable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Unix seconds of `lastError`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_at: Option<u64>,
    /// Requests made to it (manifests, tags, blobs).
    pub fetches: u64,
    /// Connections opened to it, its token realm and its redirect targets
    /// (kept and reused: far fewer than requests).
    pub connections: u64,
    /// Requests under it served from storage / needing it.
    pub hits: u64,
    pub misses: u64,
    /// Blob bytes fetched from it.
    pub bytes: u64,
    /// Tags served as last resolved because it could not be asked.
    pub stale_tags: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stale_tag: Option<String>,
}

/// The cache's state: the upstreams (rebuilt on reload), their counters,
/// the fetches in flight, when each tag was last resolved, and the
/// limiter of its warnings.
pub struct PullThrough {
    upstreams: ArcSwap<Vec<Arc<Upstream>>>,
    stats: std::sync::Mutex<BTreeMap<String, UpstreamStatus>>,
    pub(super) flights: Flights<(Name, Digest)>,
    resolved: std::sync::Mutex<HashMap<(Name, String), Instant>>,
    /// Failed fetches and stale tags: one line per reason every
    /// [`CLIENT_EVENTS`] (the serve's `registry upstream` limiter).
    log: Arc<LogRate>,
    /// Another [`TAG_TTL`]: a test build's hook
    /// (`runtime::faults::TAG_TTL_ENV`; the tests of the upstream-gone path
    /// use 0: every tag is asked upstream). Never in the shipped binary.
    tag_ttl: Option<Duration>,
}

/// The upstream clients `cfg` names, with the pull secret's credentials.
/// Blocking (reads the secret and CA files).
pub fn build(cfg: &RegistryCfg) -> Result<Vec<Arc<Upstream>>, String> {
    if cfg.pull_through.is_empty() {
        return Ok(Vec::new());
    }
    let secret = match &cfg.pull_secret_file {
        Some(p) => Some(PullSecret::load(p).map_err(|e| format!("registry.pullSecretFile: {e}"))?),
        None => None,
    };
    cfg.pull_through
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Upstream::new(p, secret.as_ref())
                .map(Arc::new)
                .map_err(|e| format!("registry.pullThrough[{i}]: {e}"))
        })
        .collect()
}

impl PullThrough {
    /// No upstream yet; warnings rate limited by the run-time context's
    /// `registry upstream` limiter; tags live [`TAG_TTL`], or the run-time
    /// context's test hook.
    pub fn new(rt: &Context) -> PullThrough {
        PullThrough {
            upstreams: ArcSwap::default(),
            stats: std::sync::Mutex::default(),
            flights: Flights::default(),
            resolved: std::sync::Mutex::default(),
            log: rt.log_rate("registry upstream", CLIENT_EVENTS),
            tag_ttl: rt.faults.tag_ttl(),
        }
    }

    /// Take a reload's upstreams (their counters are kept by name; the
    /// replaced clients' connections close as their last requests end).
    pub fn set(&self, ups: Vec<Arc<Upstream>>) {
        let mut stats = self.stats.locked();
        for old in self.upstreams.load().iter() {
            if let Some(row) = stats.get_mut(&old.registry) {
                row.connections += old.connections_opened();
            }
        }
        stats.retain(|k, _| ups.iter().any(|u| &u.registry == k));
        for u in &ups {
            let row = stats.entry(u.registry.clone()).or_default();
            row.registry = u.registry.clone();
            row.url = u.url.clone();
        }
        self.upstreams.store(Arc::new(ups));
    }

    /// The `/status` rows, one per upstream.
    pub fn status(&self) -> Vec<UpstreamStatus> {
        let mut rows = self.stats.locked().clone();
        for up in self.upstreams.load().iter() {
            if let Some(row) = rows.get_mut(&up.registry) {
                row.connections += up.connections_opened();
            }
        }
        rows.into_values().collect()
    }

    /// Per upstream: requests made and connections opened, for
    /// `/metrics` (their ratio shows the connections' reuse).
    pub fn metrics(&self, out: &mut String) {
        let rows = self.status();
        if rows.is_empty() {
            return;
        }
        let requests = (
            "crc_appliance_registry_upstream_requests_total",
            "Requests made to each pull-through upstream.",
        );
        let connections = (
            "crc_appliance_registry_upstream_connections_total",
            "Connections opened to each pull-through upstream (kept and reused).",
        );
        for ((name, help), opened) in [(requests, false), (connections, true)] {
            let mut f = family(out, name, Kind::Counter, help);
            for row in &rows {
                let value = if opened { row.connections } else { row.fetches };
                f.sample(&[("upstream", &row.registry)], value);
            }
        }
    }

    /// The upstream serving `name` and the repository there.
    pub(super) fn route(&self, name: &Name) -> Option<(Arc<Upstream>, String)> {
        let (first, repo) = name.as_str().split_once('/')?;
        let up = self
            .upstreams
            .load()
            .iter()
            .find(|u| u.registry == first)?
            .clone();
        Some((up, repo.to_string()))
    }

    pub(super) fn count(&self, up: &Upstream, f: impl FnOnce(&mut UpstreamStatus)) {
        if let Some(row) = self.stats.locked().get_mut(&up.registry) {
            f(row);
        }
    }
}

/// Count a hit or a miss under `up`, here and in the registry's counters.
pub(super) fn hit(ctx: &Ctx, up: &Upstream, hit: bool) {
    if hit {
        ctx.stats.cache_hit();
        ctx.pull.count(up, |r| r.hits += 1);
    } else {
        ctx.stats.cache_miss();
        ctx.pull.count(up, |r| r.misses += 1);
    }
}

/// The upstream answered (whatever it said).
fn reached(ctx: &Ctx, up: &Upstream) {
    ctx.pull.count(up, |r| {
        r.reachable = Some(true);
        r.fetches += 1;
    });
}

/// A fetch from `up` failed: status, counters, a rate-limited line.
pub(super) fn failed(ctx: &Ctx, up: &Upstream, f: &Failure) {
    if let Failure::Unknown(_) = f {
        return;
    }
    let what = format!("upstream {} ({}): {}", up.registry, up.url, f.message());
    ctx.stats.upstream_error(what.clone());
    ctx.pull.count(up, |r| {
        r.last_error = Some(f.message().to_string());
        r.last_error_at = Some(crate::runtime::clock::unix_now());
    });
    if let Some(tail) = ctx.pull.log.check("fetch failed", None) {
        warn!("registry: {what}{tail}");
    }
}

/// A transport failure: unreachable.
pub(super) fn unreachable(ctx: &Ctx, up: &Upstream, why: String) -> Failure {
    ctx.pull.count(up, |r| r.reachable = Some(false));
    Failure::Unavailable(why)
}

/// The answer for a failure under `name`.
pub(super) fn refuse(f: &Failure, unknown: Code, what: serde_json::Value) -> Resp {
    match f {
        Failure::Unknown(m) => reply::error_with(unknown, Some(m), what),
        Failure::Unavailable(m) => reply::error_with(Code::Unavailable, Some(m), what),
    }
}

/// The `Accept` sent upstream: the client's, else every type served.
fn accept_of(headers: &HeaderMap) -> Vec<String> {
    let a = manifest::accepted(
        headers
            .get_all(hyper::header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    if a.is_empty() {
        [
            manifest::OCI_INDEX,
            manifest::OCI_MANIFEST,
            manifest::DOCKER_LIST,
            manifest::DOCKER_V2,
        ]
        .map(str::to_string)
        .to_vec()
    } else {
        a
    }
}

/// Before a manifest `GET`/`HEAD` of `name`: fill storage from the
/// upstream when `name` is pulled through. `Some` is the answer when the
/// manifest cannot be had; `None`: serve from storage.
pub(super) async fn manifest(
    ctx: &Arc<Ctx>,
    headers: &HeaderMap,
    name: &Name,
    r: &Reference,
) -> Option<Resp> {
    let (up, repo) = ctx.pull.route(name)?;
    let accept = accept_of(headers);
    let outcome = match r {
        Reference::Digest(d) => by_digest(ctx, &up, name, &repo, d, &accept).await,
        Reference::Tag(t) => by_tag(ctx, &up, name, &repo, t, &accept).await,
    };
    let f = outcome.err()?;
    failed(ctx, &up, &f);
    let what = match r {
        Reference::Tag(t) => json!({"Tag": t}),
        Reference::Digest(d) => json!({"Name": name.as_str(), "Revision": d.to_string()}),
    };
    Some(refuse(&f, Code::ManifestUnknown, what))
}

/// Run blocking store work.
pub(super) async fn blocking<T: Send + 'static>(
    ctx: &Arc<Ctx>,
    f: impl FnOnce(&Ctx) -> T + Send + 'static,
) -> Option<T> {
    let c = ctx.clone();
    tokio::task::spawn_blocking(move || f(&c)).await.ok()
}

async fn by_digest(
    ctx: &Arc<Ctx>,
    up: &Upstream,
    name: &Name,
    repo: &str,
    d: &Digest,
    accept: &[String],
) -> Result<(), Failure> {
    let (n, d2) = (name.clone(), *d);
    let have = blocking(ctx, move |c| {
        c.store.has_revision(&n, &d2) && c.store.verified(&d2) == Check::Good
    })
    .await
    .unwrap_or(false);
    hit(ctx, up, have);
    if have {
        return Ok(());
    }
    let bytes = fetch_manifest(ctx, up, repo, &d.to_string(), accept).await?;
    store_manifest(ctx, name, bytes, Some(*d), None).await
}

async fn by_tag(
    ctx: &Arc<Ctx>,
    up: &Upstream,
    name: &Name,
    repo: &str,
    tag: &str,
    accept: &[String],
) -> Result<(), Failure> {
    let key = (name.clone(), tag.to_string());
    let fresh = ctx
        .pull
        .resolved
        .locked()
        .get(&key)
        .is_some_and(|at| at.elapsed() < ctx.pull.tag_ttl.unwrap_or(TAG_TTL));
    let (n, t) = (name.clone(), tag.to_string());
    let stored = blocking(ctx, move |c| c.store.tag(&n, &t)).await.flatten();
    if fresh && stored.is_some() {
        hit(ctx, up, true);
        return Ok(());
    }
    // Just found unreachable: the stored tag at once, not another wait.
    let held = stored.is_some() && up.down();
    let result = if held {
        Err(Failure::Unavailable(format!("{} is unreachable", up.url)))
    } else {
        resolve_tag(ctx, up, name, repo, tag, accept).await
    };
    match result {
        Ok(hit_) => {
            hit(ctx, up, hit_);
            ctx.pull.resolved.locked().insert(key, Instant::now());
            Ok(())
        }
        // Not reachable (or refusing us): the tag as last resolved.
        Err(Failure::Unavailable(why)) if stored.is_some() => {
            hit(ctx, up, true);
            if !held {
                failed(ctx, up, &Failure::Unavailable(why));
            }
            let shown = format!("{}:{tag}", name.as_str());
            if let Some(tail) = ctx.pull.log.check("stale tag", None) {
                info!("registry: serving {shown} as last resolved (upstream unavailable){tail}");
            }
            ctx.pull.count(up, |r| {
                r.stale_tags += 1;
                r.last_stale_tag = Some(shown);
            });
            Ok(())
        }
        Err(f) => {
            hit(ctx, up, false);
            Err(f)
        }
    }
}

/// Ask the upstream what `tag` is and store it: `Ok(true)` when the
/// manifest was already stored (only the tag link was written).
async fn resolve_tag(
    ctx: &Arc<Ctx>,
    up: &Upstream,
    name: &Name,
    repo: &str,
    tag: &str,
    accept: &[String],
) -> Result<bool, Failure> {
    let path = format!("manifests/{tag}");
    let what = format!("manifest {repo}:{tag}");
    let head = ask(ctx, up, Method::HEAD, (repo, &path), accept, &what).await?;
    let digest = head
        .headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Digest::parse(v).ok());
    if let Some(d) = digest {
        let (n, t) = (name.clone(), tag.to_string());
        let relinked = blocking(ctx, move |c| -> Option<bool> {
            if c.store.tag(&n, &t) == Some(d) {
                return Some(true);
            }
            if !c.store.has_revision(&n, &d) || c.store.verified(&d) != Check::Good {
                return None;
            }
            let bytes = std::fs::read(c.store.blob_path(&d)).ok()?;
            Some(c.store.put_manifest(&n, &bytes, Some(&t)).is_ok())
        })
        .await
        .flatten();
        if relinked == Some(true) {
            return Ok(true);
        }
    }
    let reference = digest.map_or(tag.to_string(), |d| d.to_string());
    let bytes = fetch_manifest(ctx, up, repo, &reference, accept).await?;
    store_manifest(ctx, name, bytes, digest, Some(tag.to_string())).await?;
    Ok(false)
}

/// `method` on `/v2/<repo>/<rest>` at `up`, counted in its status row: no
/// answer is [`unreachable`], any answer [`reached`] it, and an answer
/// other than 200 is the failure [`check_status`] names with `what`.
pub(super) async fn ask(
    ctx: &Ctx,
    up: &Upstream,
    method: Method,
    (repo, rest): (&str, &str),
    accept: &[String],
    what: &str,
) -> Result<hyper::Response<hyper::body::Incoming>, Failure> {
    let answer = up
        .send(method, repo, rest, accept)
        .await
        .map_err(|e| unreachable(ctx, up, e.to_string()))?;
    reached(ctx, up);
    check_status(up, answer.status(), what)?;
    Ok(answer)
}

/// An upstream status other than 200 as a failure.
fn check_status(up: &Upstream, s: StatusCode, what: &str) -> Result<(), Failure> {
    match s {
        StatusCode::OK => Ok(()),
        StatusCode::NOT_FOUND => Err(Failure::Unknown(format!(
            "{what} is not known to the upstream {} ({})",
            up.registry, up.url
        ))),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(Failure::Unavailable(format!(
            "the upstream {} refused {what}: {s} (check registry.pullSecretFile's entry for it)",
            up.url
        ))),
        s => Err(Failure::Unavailable(format!(
            "the upstream {} answered {s} for {what}",
            up.url
        ))),
    }
}

/// `GET` a manifest (at most [`MAX_MANIFEST`] bytes).
async fn fetch_manifest(
    ctx: &Arc<Ctx>,
    up: &Upstream,
    repo: &str,
    reference: &str,
    accept: &[String],
) -> Result<Bytes, Failure> {
    let path = format!("manifests/{reference}");
    let what = format!("manifest {repo}@{reference}");
    let answer = ask(ctx, up, Method::GET, (repo, &path), accept, &what).await?;
    let body = http_body_util::Limited::new(answer.into_body(), MAX_MANIFEST);
    tokio::time::timeout(STALL, body.collect())
        .await
        .map_err(|_| Failure::Unavailable(format!("{}: manifest body stalled", up.url)))?
        .map(|b| b.to_bytes())
        .map_err(|e| Failure::Unavailable(format!("{}: manifest body: {e}", up.url)))
}

/// Store fetched manifest bytes (which must hash to `want` when given).
async fn store_manifest(
    ctx: &Arc<Ctx>,
    name: &Name,
    bytes: Bytes,
    want: Option<Digest>,
    tag: Option<String>,
) -> Result<(), Failure> {
    let got = Digest::of(&bytes);
    if want.is_some_and(|w| w != got) {
        return Err(Failure::Unavailable(format!(
            "the upstream sent a manifest whose digest is {got}, not the {} asked: not stored",
            want.map(|w| w.to_string()).unwrap_or_default()
        )));
    }
    if manifest::media_type(&bytes).is_none() {
        return Err(Failure::Unavailable(
            "the upstream sent a manifest that is not schema 2 or OCI: not stored".into(),
        ));
    }
    let n = name.clone();
    blocking(ctx, move |c| {
        c.store
            .put_manifest(&n, &bytes, tag.as_deref())
            .map(|_| ())
            .map_err(|e| Failure::Unavailable(format!("storing the manifest: {e}")))
    })
    .await
    .unwrap_or_else(|| {
        Err(Failure::Unavailable(
            "storing the manifest: task failed".into(),
        ))
    })
}
