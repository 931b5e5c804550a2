//! HTTP server (hyper 1, HTTP/1.1 and h2c) for RHCOS images and ignition.
//!
//! Routes (GET and HEAD; OPTIONS → 200 with `Allow`; other methods → 405;
//! an HTTP/1.1 request without `Host`, or any with two, → 400; `HTTP/1.2`
//! and up are read as 1.1, `version`; the path is normalised first,
//! [`path::normalize`]):
//!
//! | path | served from |
//! |---|---|
//! | `/images/<path>` | `http.imagesDir`, any depth |
//! | `/ignition/<name>.ign` | `http.ignitionDir`: role or node config ([`ignition`]) |
//! | `/boot/…` | network boot ([`netboot`]) and the per-node boot ISO (`iso`) |
//! | `/<name>.ign` | alias of `/ignition/<name>.ign` (same access rule) |
//! | `/<path>` | alias of `/images/<path>` (flat nginx-style layout) |
//!
//! Invariants:
//! - Files are streamed in [`CHUNK`]-sized `pread`s on the blocking pool,
//!   one chunk in flight per response: memory per download is constant
//!   whatever the file size (no mmap, no whole-file buffers). Multi-range
//!   answers stream each part the same way.
//! - Paths are sanitised without touching the disk ([`path::sanitize`]) and
//!   resolved under the canonical root ([`path::resolve`]); hostile paths
//!   get 400, anything outside the root, a directory or a special file 404.
//! - Range (single, multi, suffix, open), 416, ETag / Last-Modified and the
//!   RFC 9110 conditionals live in the pure [`range`] module.
//! - Ignition configs and boot ISOs are answered only to the node they
//!   belong to, the appliance host and the configured extra networks
//!   ([`crate::model::access`]; 403 otherwise, the first refusal per address
//!   logged as a warning with the address and the file); each file is read
//!   once per version and shared by every response, a node's hostname merge
//!   as slices of its role file's body ([`igncache`]: bounded cache, bounded
//!   loads); every ignition request is recorded in [`stats::Stats`]
//!   (client IP ↔ node, file, status, time) and shown by the admin listener.
//! - A bad request or a broken connection is logged at debug and never ends
//!   the listener; a listener that ends on its own fails the service.
//!   Silent or trickling connections are closed after [`HEADER_TIMEOUT`],
//!   connections with no request in flight (h2 included) after
//!   [`IDLE_TIMEOUT`] (`runtime::httpconn`); at most `limits::cap::Caps::http_served`
//!   are served at once (1024 descriptors less a sixteenth kept to judge
//!   newcomers, fewer under a short open-files limit), at most
//!   `http.maxConnectionsPerClient` per client address, and when all are
//!   taken a lighter client takes an idle slot of the heaviest (`runtime::admission`).
//! - A reload swaps the plan (dirs, nodes, ACL) for the next request and
//!   keeps the listening socket when `http.listen` did not change.

mod bootstate;
mod day2;
mod https;
mod igncache;
pub mod ignition;
pub mod ignmerge;
mod iso;
mod lastsend;
pub mod netboot;
pub mod path;
pub mod range;
mod server;
pub mod stats;
pub mod status;
mod track;
mod version;

use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use bytes::Bytes;
use futures_util::stream::{self, Stream, StreamExt};
use http_body_util::{BodyExt, Empty, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Version};
use tracing::{debug, error, info, warn};

use crate::boot::liveiso::Patches;
use crate::model::access::{self, Decision, Owner};
use crate::model::cluster::Role;
use crate::plan::Plan;
use igncache::{IgnBody, IgnError};
use range::{ByteRange, Conditions, Precondition, RangeOutcome, Validators};
pub use server::Http;
use stats::{Fetch, Stats};

/// Bytes read per `pread` and sent per body frame.
pub const CHUNK: usize = 256 * 1024;
/// Largest ignition file served (bootstrap.ign is a few hundred kB).
pub const MAX_IGNITION: u64 = 64 * 1024 * 1024;
/// How long a new connection may stay silent, and how long a client may
/// take to send an HTTP/1 request head (from when it is awaited, trickled
/// or not).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection with no request in flight stays open: an h2
/// connection with no open stream (or that never completed a request's
/// headers), an HTTP/1 keep-alive between requests.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// The methods served (`Allow` of 405 and OPTIONS answers).
const ALLOW: &str = "GET, HEAD, OPTIONS";
/// How long in-flight responses get after shutdown is requested.
const DRAIN: Duration = crate::runtime::drain::HTTP_REQUESTS;

type Body = UnsyncBoxBody<Bytes, std::io::Error>;
type Resp = Response<Body>;

/// What a response streams: `len` bytes of `file` from `base`, with
/// `patches` (in file offsets) replacing some of them.
pub(crate) struct Region {
    file: File,
    base: u64,
    len: u64,
    patches: Arc<Patches>,
}

impl Region {
    /// The bytes as they are in the file.
    pub(crate) fn new(file: File, base: u64, len: u64) -> Region {
        Region {
            file,
            base,
            len,
            patches: Arc::default(),
        }
    }

    /// The same bytes with `patches` applied.
    pub(crate) fn patched(self, patches: Patches) -> Region {
        Region {
            patches: Arc::new(patches),
            ..self
        }
    }
}

/// Which listener a request came in on: `http.listen` serves every route,
/// `http.tlsListen` the boot ISOs only ([`https`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Http,
    Https,
}

pub(crate) struct Ctx {
    plan: Arc<ArcSwap<Plan>>,
    stats: Arc<Stats>,
    boundary_seq: AtomicU64,
    /// Network-boot install state (`/boot/<mac>.ipxe`).
    boot: Arc<netboot::BootState>,
    clients: Arc<crate::runtime::admission::Clients>,
    ign_cache: igncache::IgnCache,
    /// The install timeline (completed rootfs downloads).
    events: crate::timeline::Events,
    /// Refused ignition and boot ISO requests: one warning per address.
    refusals: crate::runtime::once::OncePerAddress,
    /// The single-node ISO's compressed Ignition initrd, by source file.
    sno_initrd: Arc<iso::InitrdCache>,
    /// The HTTPS listener's certificate and counters.
    https: https::HttpsState,
    /// Day-2 workers' ignition: the cluster's current pointer config.
    day2: day2::Day2,
}

fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A body of shared pieces (an ignition body: slices of one cached file),
/// sent as they are, no copy: one frame per piece, its exact length known
/// (no per-response list of frames, no stream machinery).
struct Parts {
    parts: Arc<[Bytes]>,
    next: usize,
    left: u64,
}

impl hyper::body::Body for Parts {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::io::Result<Frame<Bytes>>>> {
        let Some(p) = self.parts.get(self.next).cloned() else {
            return std::task::Poll::Ready(None);
        };
        self.next += 1;
        self.left = self.left.saturating_sub(p.len() as u64);
        std::task::Poll::Ready(Some(Ok(Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.next >= self.parts.len()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.left)
    }
}

fn shared_body(parts: Arc<[Bytes]>) -> Body {
    let left = parts.iter().map(|p| p.len() as u64).sum();
    Parts {
        parts,
        next: 0,
        left,
    }
    .boxed_unsync()
}

fn hv(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

fn plain(status: StatusCode, msg: &str) -> Resp {
    let mut r = Response::new(full(format!("{msg}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Strip the body of a HEAD answer, keeping `Content-Length`.
fn head_only(mut r: Resp, len: u64) -> Resp {
    r.headers_mut().insert(header::CONTENT_LENGTH, len.into());
    *r.body_mut() = empty();
    r
}

/// `len` bytes of `file` from `offset`, in [`CHUNK`]s read on the blocking
/// pool, with `patches` (in file offsets) applied to each chunk.
fn file_stream(
    file: Arc<File>,
    offset: u64,
    len: u64,
    stats: Arc<Stats>,
    patches: Arc<Patches>,
) -> impl Stream<Item = std::io::Result<Frame<Bytes>>> + Send + 'static {
    stream::unfold((file, offset, len), move |(file, off, left)| {
        let stats = stats.clone();
        let patches = patches.clone();
        async move {
            if left == 0 {
                return None;
            }
            let n = left.min(CHUNK as u64) as usize;
            let f = file.clone();
            let read = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; n];
                let mut got = 0;
                while got < n {
                    match f.read_at(&mut buf[got..], off + got as u64) {
                        Ok(0) => {
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                "file shrank while being sent",
                            ));
                        }
                        Ok(k) => got += k,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                patches.apply(off, &mut buf);
                Ok(Bytes::from(buf))
            })
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            match read {
                Ok(b) => {
                    stats.sent(b.len() as u64);
                    Some((Ok(Frame::data(b)), (file, off + n as u64, left - n as u64)))
                }
                // Yield the error once, then end (state with nothing left).
                Err(e) => Some((Err(e), (file, off, 0))),
            }
        }
    })
}

fn stream_body<S>(s: S) -> Body
where
    S: Stream<Item = std::io::Result<Frame<Bytes>>> + Send + 'static,
{
    BodyExt::boxed_unsync(StreamBody::new(s))
}

fn conditions(h: &HeaderMap) -> Conditions<'_> {
    let get = |n: header::HeaderName| h.get(n).and_then(|v| v.to_str().ok());
    Conditions {
        if_match: get(header::IF_MATCH),
        if_none_match: get(header::IF_NONE_MATCH),
        if_modified_since: get(header::IF_MODIFIED_SINCE),
        if_unmodified_since: get(header::IF_UNMODIFIED_SINCE),
        if_range: get(header::IF_RANGE),
    }
}

fn with_validators(r: &mut Resp, v: &Validators) {
    r.headers_mut().insert(header::ETAG, hv(&v.etag));
    if let Some(lm) = v.last_modified() {
        r.headers_mut().insert(header::LAST_MODIFIED, hv(&lm));
    }
}

/// Who fetched which ignition config (for the log line).
#[derive(Clone, Copy)]
struct Served<'a> {
    file: &'a str,
    client: std::net::IpAddr,
    /// The node at the client's address.
    node: Option<&'a str>,
}

impl Ctx {
    async fn serve_file(&self, req: &Request<Incoming>, root: &Path, rest: &str) -> Resp {
        let rel = match path::sanitize(rest) {
            Ok(p) => p,
            Err(e) => {
                debug!("http: refused path {:?}: {e}", req.uri().path());
                return plain(StatusCode::BAD_REQUEST, "bad path");
            }
        };
        let root = root.to_path_buf();
        let resolved = tokio::task::spawn_blocking(move || path::resolve(&root, &rel)).await;
        let (real, file) = match resolved {
            Ok(path::Resolved::File { rel, .. }) if path::is_install_secret(&rel) => {
                debug!(
                    "http: {:?} not served: an install secret under imagesDir",
                    req.uri().path()
                );
                return plain(StatusCode::NOT_FOUND, "not found");
            }
            Ok(path::Resolved::File { path, file, .. }) => (path, file),
            Ok(path::Resolved::NotFound(why)) => {
                debug!("http: {:?} not served: {why}", req.uri().path());
                return plain(StatusCode::NOT_FOUND, "not found");
            }
            Err(e) => {
                error!("http: resolver task failed: {e}");
                return plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
            }
        };
        let meta = match file.metadata() {
            Ok(m) => m,
            Err(e) => {
                warn!("http: stat {}: {e}", real.display());
                return plain(StatusCode::NOT_FOUND, "not found");
            }
        };
        let len = meta.len();
        let modified = meta.modified().ok();
        let v = Validators {
            etag: range::file_etag(meta.ino(), len, modified),
            modified,
        };
        let ctype = path::content_type(&real);
        self.serve_region(req, Region::new(file, 0, len), &v, ctype)
    }

    /// Answer a GET/HEAD for a [`Region`] (a whole file, a file inside an
    /// ISO image, a patched ISO): conditionals, single and multiple
    /// ranges, streamed in [`CHUNK`] preads.
    fn serve_region(
        &self,
        req: &Request<Incoming>,
        region: Region,
        v: &Validators,
        ctype: &str,
    ) -> Resp {
        let Region {
            file,
            base,
            len,
            patches,
        } = region;
        let v = v.clone();
        let is_head = req.method() == Method::HEAD;
        let mut use_range = true;
        match range::evaluate_conditions(&conditions(req.headers()), &v) {
            Precondition::NotModified => {
                let mut r = Response::new(empty());
                *r.status_mut() = StatusCode::NOT_MODIFIED;
                with_validators(&mut r, &v);
                return r;
            }
            Precondition::Failed => {
                return plain(StatusCode::PRECONDITION_FAILED, "precondition failed");
            }
            Precondition::Proceed { use_range: u } => use_range = use_range && u,
        }
        let outcome = match req.headers().get(header::RANGE) {
            Some(h) if use_range && !is_head => match h.to_str() {
                Ok(s) => range::evaluate_range(s, len),
                Err(_) => RangeOutcome::Full,
            },
            _ => RangeOutcome::Full,
        };
        let file = Arc::new(file);
        let mut r = Response::new(empty());
        r.headers_mut()
            .insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        with_validators(&mut r, &v);
        let (body_len, body): (u64, Option<Body>) = match outcome {
            RangeOutcome::Full => {
                r.headers_mut().insert(header::CONTENT_TYPE, hv(ctype));
                let s = (!is_head).then(|| {
                    let s = file_stream(file, base, len, self.stats.clone(), patches);
                    stream_body(s)
                });
                (len, s)
            }
            RangeOutcome::Unsatisfiable => {
                *r.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
                r.headers_mut()
                    .insert(header::CONTENT_RANGE, hv(&format!("bytes */{len}")));
                return r;
            }
            RangeOutcome::Partial(ranges) if ranges.len() == 1 => {
                let br = ranges[0];
                *r.status_mut() = StatusCode::PARTIAL_CONTENT;
                r.headers_mut().insert(header::CONTENT_TYPE, hv(ctype));
                r.headers_mut()
                    .insert(header::CONTENT_RANGE, hv(&br.content_range(len)));
                let s = file_stream(file, base + br.start, br.len(), self.stats.clone(), patches);
                (br.len(), Some(stream_body(s)))
            }
            RangeOutcome::Partial(ranges) => {
                *r.status_mut() = StatusCode::PARTIAL_CONTENT;
                let seq = self.boundary_seq.fetch_add(1, Ordering::Relaxed);
                let salt = SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                let boundary = format!("crc-appliance-{salt:016x}{seq:08x}");
                let m = range::Multipart::new(&boundary, ctype, &ranges, len);
                r.headers_mut()
                    .insert(header::CONTENT_TYPE, hv(&m.content_type()));
                let total = m.content_length();
                (
                    total,
                    Some(stream_body(multipart_stream(
                        m,
                        file,
                        base,
                        self.stats.clone(),
                        patches,
                    ))),
                )
            }
        };
        r.headers_mut()
            .insert(header::CONTENT_LENGTH, body_len.into());
        match body {
            Some(b) => *r.body_mut() = b,
            None => return head_only(r, body_len),
        }
        r
    }

    async fn serve_ignition(
        &self,
        req: &Request<Incoming>,
        plan: &Plan,
        peer: SocketAddr,
        name: &str,
    ) -> Resp {
        let c = &plan.cluster;
        let client = peer.ip();
        let node = ignition::node_by_ip(c, client).map(|n| n.name.clone());
        let file: Arc<str> = match path::plain_name(name) {
            // The usual `master-0.ign`: nothing to decode or resolve.
            Some(n) => n.into(),
            None => match path::sanitize(name) {
                Ok(p) if p.components().count() == 1 => p.to_string_lossy().into(),
                _ => {
                    debug!("http: refused ignition path {:?}", req.uri().path());
                    return plain(StatusCode::BAD_REQUEST, "bad path");
                }
            },
        };
        let record = |status: StatusCode, detail: Arc<str>, bytes: u64| {
            // Network boot: the node itself fetched its ignition (the
            // installer did), so its next network boot boots the disk.
            if status == StatusCode::OK
                && c.rhcos.is_some()
                && let Some(n) = &node
            {
                let (boot, n) = (self.boot.clone(), n.clone());
                // The single-node master's live system fetched the
                // bootstrap-in-place config: it writes its disk itself and
                // reboots into it, so later network boots boot the disk.
                let live = c.node(&n).is_some_and(|x| c.is_single_node_master(x));
                tokio::task::spawn_blocking(move || {
                    boot.ignition_fetched(&n);
                    if live {
                        boot.bootstrap_in_place(&n);
                    }
                });
            }
            let time = SystemTime::now();
            if status == StatusCode::OK {
                // The timeline's ignition step, at the fetch's own time.
                self.events.record(crate::timeline::Event::Ignition {
                    node: node.clone(),
                    client: client.to_string(),
                    file: file.to_string(),
                    at: time
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                });
            }
            self.stats.ignition(Fetch {
                time,
                client,
                node: node.clone(),
                file: file.clone(),
                status: status.as_u16(),
                detail,
                bytes,
            });
        };
        let target = ignition::target(c, &file);
        // An unknown name is judged as a role file (any node may ask), so a
        // stranger learns nothing about which names exist: 403 either way.
        let owner = target
            .as_ref()
            .map_or(Owner::Role(Role::Worker), |t| ignition::owner(c, t));
        if access::ignition(c, client, owner) == Decision::Deny {
            let who = access::describe(c, client);
            match self.refusals.check(client) {
                Some(n) => warn!(
                    "ignition {file} refused to {client} ({who}): served only to {}, the appliance host and http.ignitionClientCidrs{}",
                    owner.audience(),
                    crate::runtime::once::not_logged(n)
                ),
                None => debug!("ignition {file} refused to {client} ({who})"),
            }
            record(StatusCode::FORBIDDEN, format!("refused: {who}").into(), 0);
            return plain(
                StatusCode::FORBIDDEN,
                "ignition is only served to the node it belongs to",
            );
        }
        let Some(target) = target else {
            record(StatusCode::NOT_FOUND, "not a node or role".into(), 0);
            return plain(StatusCode::NOT_FOUND, "not found");
        };
        let day2 = self.day2.worker_body(c, &target, &file).await;
        let loaded = match day2 {
            Some(b) => Ok(b),
            None => self.ign_cache.load(&c.http.ignition_dir, &target).await,
        };
        let ign = match loaded {
            Ok(b) => b,
            Err(IgnError::Missing(f)) => {
                info!("ignition {file} for {client}: {f} does not exist");
                record(StatusCode::NOT_FOUND, format!("{f} missing").into(), 0);
                return plain(StatusCode::NOT_FOUND, "not found");
            }
            Err(IgnError::Broken(msg)) => {
                error!("ignition {file} for {client}: {msg}");
                record(StatusCode::INTERNAL_SERVER_ERROR, msg.as_str().into(), 0);
                return plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "ignition config is invalid",
                );
            }
        };
        let served = Served {
            file: &file,
            client,
            node: node.as_deref(),
        };
        self.ignition_response(req, ign, &served, record)
    }

    /// The response for an ignition config the client may have: 304 for a
    /// matching `If-None-Match`, else the body (no body for HEAD);
    /// `record` notes the fetch.
    fn ignition_response(
        &self,
        req: &Request<Incoming>,
        ign: IgnBody,
        served: &Served<'_>,
        record: impl FnOnce(StatusCode, Arc<str>, u64),
    ) -> Resp {
        let Served { file, client, node } = *served;
        let len = ign.len();
        let mut r = Response::new(empty());
        // The ETag header value is made once per body (`IgnBody`).
        r.headers_mut().insert(header::ETAG, ign.etag_value.clone());
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        let if_none_match = req
            .headers()
            .get(header::IF_NONE_MATCH)
            .and_then(|h| h.to_str().ok());
        if let Some(inm) = if_none_match {
            let v = Validators {
                etag: ign.etag.to_string(),
                modified: None,
            };
            let cond = Conditions {
                if_none_match: Some(inm),
                ..Default::default()
            };
            if range::evaluate_conditions(&cond, &v) == Precondition::NotModified {
                *r.status_mut() = StatusCode::NOT_MODIFIED;
                record(StatusCode::NOT_MODIFIED, ign.detail, 0);
                return r;
            }
        }
        let detail = &ign.detail;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/vnd.coreos.ignition+json"),
        );
        info!(
            "ignition {file} served to {client}{} ({detail}, {len} bytes)",
            node.map(|n| format!(" (node {n})")).unwrap_or_default()
        );
        record(StatusCode::OK, detail.clone(), len);
        if req.method() == Method::HEAD {
            return head_only(r, len);
        }
        self.stats.sent(len);
        // No Content-Length header: hyper writes it from the body's exact
        // size (no header value to build per response).
        *r.body_mut() = shared_body(ign.parts);
        r
    }

    async fn handle(&self, req: Request<Incoming>, peer: SocketAddr, scheme: Scheme) -> Resp {
        let mut r = self.route(&req, peer, scheme).await;
        if r.status() == StatusCode::OK
            && req.method() == Method::GET
            && track::is_rootfs(req.uri().path())
        {
            r = track::rootfs(r, peer.ip(), self.events.clone());
        }
        if r.status() == StatusCode::OK && req.method() == Method::GET {
            r = self.track_install_image(r, req.uri().path(), peer);
        }
        self.stats.response(r.status().as_u16());
        debug!(
            "http {peer} {} {} -> {}",
            req.method(),
            req.uri().path(),
            r.status().as_u16()
        );
        r
    }

    async fn route(&self, req: &Request<Incoming>, peer: SocketAddr, scheme: Scheme) -> Resp {
        // RFC 9112 §3.2: an HTTP/1.1 request without Host, or any request
        // with several, is answered 400 (as nginx does).
        let hosts = req.headers().get_all(header::HOST).iter().count();
        if hosts > 1 || (hosts == 0 && req.version() == Version::HTTP_11) {
            return plain(StatusCode::BAD_REQUEST, "missing or repeated Host header");
        }
        if req.method() == Method::OPTIONS {
            // `OPTIONS *` (RFC 9110 §9.3.7) and `OPTIONS /path` alike.
            let mut r = Response::new(empty());
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(ALLOW));
            r.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
            return r;
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(ALLOW));
            return r;
        }
        let p = path::normalize(req.uri().path());
        if scheme == Scheme::Https {
            return Box::pin(self.route_https(req, peer, &p)).await;
        }
        let plan = self.plan.load_full();
        let cfg = &plan.cluster.http;
        // The file and boot futures are boxed: kept inline, their state
        // made every request's future larger, and hyper and the counting
        // wrapper move it (a `memcpy` of it per request, ignition too).
        if let Some(rest) = p.strip_prefix("/images/") {
            Box::pin(self.serve_file(req, &cfg.images_dir, rest)).await
        } else if let Some(rest) = p.strip_prefix("/boot/") {
            Box::pin(self.serve_boot(req, peer, rest)).await
        } else if let Some(rest) = p.strip_prefix("/ignition/") {
            self.serve_ignition(req, &plan, peer, rest).await
        } else if let Some(rest) = p.strip_prefix('/') {
            if rest.ends_with(".ign") && !rest.contains('/') {
                self.serve_ignition(req, &plan, peer, rest).await
            } else {
                Box::pin(self.serve_file(req, &cfg.images_dir, rest)).await
            }
        } else {
            plain(StatusCode::BAD_REQUEST, "bad path")
        }
    }
}

fn multipart_stream(
    m: range::Multipart,
    file: Arc<File>,
    base: u64,
    stats: Arc<Stats>,
    patches: Arc<Patches>,
) -> impl Stream<Item = std::io::Result<Frame<Bytes>>> + Send + 'static {
    let trailer = Bytes::from(m.trailer);
    let parts: Vec<(Bytes, ByteRange)> = m
        .parts
        .into_iter()
        .map(|(h, r)| (Bytes::from(h), r))
        .collect();
    let stats2 = stats.clone();
    stream::iter(parts)
        .flat_map(move |(h, r)| {
            stats.sent(h.len() as u64);
            stream::once(async move { Ok(Frame::data(h)) }).chain(file_stream(
                file.clone(),
                base + r.start,
                r.len(),
                stats.clone(),
                patches.clone(),
            ))
        })
        .chain(stream::once(async move {
            stats2.sent(trailer.len() as u64);
            Ok(Frame::data(trailer))
        }))
}
