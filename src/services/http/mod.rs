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

mod body;
mod bootstate;
mod day2;
mod files;
mod https;
mod igncache;
pub mod ignition;
pub mod ignmerge;
mod ignserve;
mod iso;
mod lastsend;
pub mod netboot;
pub mod path;
pub mod range;
mod server;
pub mod stats;
pub mod status;
mod timeline;
mod track;
mod version;

use std::fs::File;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Version};
use tracing::debug;

use crate::boot::liveiso::Patches;
use crate::plan::Plan;
use body::{empty, full, plain};
pub use server::Http;
use stats::Stats;

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
    /// The ignition fetch the timeline was told last (an identical one is
    /// not told again).
    ign_told: ignserve::LastTold,
}

impl Ctx {
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
