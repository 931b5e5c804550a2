//! Files and file regions over HTTP: `/images/<path>` resolved under its
//! root, and any [`Region`] (a whole file, a file inside an ISO image, a
//! patched ISO) answered with the RFC 9110 conditionals and ranges.
//!
//! Invariants: a path is sanitised without touching the disk and resolved
//! under the canonical root on the blocking pool; install secrets under
//! `imagesDir`, directories, special files and anything outside the root
//! are 404; the decisions (conditionals, single, multiple, suffix and open
//! ranges, 416) are the pure [`range`] module's, this file only builds the
//! response and streams the body ([`super::body`]).

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tracing::{debug, error, warn};

use super::body::{empty, file_stream, head_only, hv, multipart_stream, plain, stream_body};
use super::range::{self, Conditions, Precondition, RangeOutcome, Validators};
use super::{Body, Ctx, Region, Resp, path};

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

impl Ctx {
    pub(super) async fn serve_file(
        &self,
        req: &Request<Incoming>,
        root: &Path,
        rest: &str,
    ) -> Resp {
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
    pub(super) fn serve_region(
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
}
