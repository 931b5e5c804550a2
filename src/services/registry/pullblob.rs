//! The pull-through cache's blob misses (`pullthrough.rs` has the
//! design): the first request for a missing blob leads its fetch in its
//! own task (a client that goes away does not stop it), streaming into an
//! upload file; every request for it meanwhile follows (`flight.rs`),
//! reading the file as it grows. The blob lands through
//! `Store::finish_upload` (hashed, synced, renamed) only when its SHA-256
//! matched; else every follower's stream ends in an error (the connection
//! closes short of the whole blob) and the upload file is removed.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::Frame;
use hyper::{Method, Response};
use serde_json::json;
use tokio::sync::watch;

use super::Ctx;
use super::flight::{Failure, Joined, Phase, Progress};
use super::names::{Digest, Name};
use super::pullthrough::{STALL, ask, blocking, failed, hit, refuse};
use super::ranges::{blob_headers, partial, range, unsatisfiable};
use super::reply::{self, Code, Resp, set};
use super::storage::Check;
use super::upstream::Upstream;

/// Bytes written (and shown to followers) at a time.
const CHUNK: usize = 256 * 1024;

/// Before a blob `GET`/`HEAD` of `name`: `None` when storage serves it
/// (present, or present under another repository and confirmed upstream);
/// else the answer, streamed from the (single) upstream fetch.
pub(super) async fn blob(
    ctx: &Arc<Ctx>,
    method: &Method,
    name: &Name,
    d: &Digest,
    want: Want<'_>,
) -> Option<Resp> {
    let (up, repo) = ctx.pull.route(name)?;
    let (n, d2) = (name.clone(), *d);
    let (linked, stored) = blocking(ctx, move |c| {
        let good = c.store.verified(&d2) == Check::Good;
        (good && c.store.has_layer(&n, &d2), good)
    })
    .await
    .unwrap_or((false, false));
    if linked {
        hit(ctx, &up, true);
        return None;
    }
    if stored {
        // Stored for another repository: link it here once the upstream
        // confirms this repository has it.
        let r = confirm_and_link(ctx, &up, name, &repo, d).await;
        hit(ctx, &up, r.is_ok());
        return match r {
            Ok(()) => None,
            Err(f) => {
                failed(ctx, &up, &f);
                Some(refuse(&f, Code::BlobUnknown, json!(d.to_string())))
            }
        };
    }
    hit(ctx, &up, false);
    let key = (name.clone(), *d);
    let rx = match ctx.pull.flights.join(&key) {
        Joined::Follower(rx) => rx,
        Joined::Leader(tx, rx) => {
            let (c, up2, repo2) = (ctx.clone(), up.clone(), repo.clone());
            tokio::spawn(async move { lead(c, up2, key, repo2, tx).await });
            rx
        }
    };
    Some(follow(ctx, rx, method, d, want).await)
}

/// What the client asked for besides the blob: its `Range` header (a
/// resumed pull asks the rest of a blob still being fetched) and who it is.
pub(super) struct Want<'a> {
    pub range: Option<&'a str>,
    pub peer: IpAddr,
}

async fn confirm_and_link(
    ctx: &Arc<Ctx>,
    up: &Upstream,
    name: &Name,
    repo: &str,
    d: &Digest,
) -> Result<(), Failure> {
    let (path, what) = (format!("blobs/{d}"), format!("blob {d} of {repo}"));
    ask(ctx, up, Method::HEAD, (repo, &path), &[], &what).await?;
    let (n, d2) = (name.clone(), *d);
    blocking(ctx, move |c| c.store.link_layer(&n, &d2))
        .await
        .and_then(Result::ok)
        .ok_or_else(|| Failure::Unavailable("storing the blob's link failed".into()))
}

/// The fetch of one blob: publish its progress, store it, end the flight.
async fn lead(
    ctx: Arc<Ctx>,
    up: Arc<Upstream>,
    key: (Name, Digest),
    repo: String,
    tx: watch::Sender<Progress>,
) {
    let (name, d) = key.clone();
    let n = name.clone();
    let id = blocking(&ctx, move |c| c.store.start_upload(&n).ok())
        .await
        .flatten();
    let result = match &id {
        Some(id) => fetch_blob(&ctx, &up, &name, &repo, &d, id, &tx).await,
        None => Err(Failure::Unavailable(
            "storage: cannot start an upload file".into(),
        )),
    };
    if let Err(f) = &result {
        failed(&ctx, &up, f);
        if let Some(id) = id {
            let n = name.clone();
            blocking(&ctx, move |c| c.store.remove_upload(&n, &id)).await;
        }
    }
    tx.send_modify(|p| {
        p.phase = match result {
            Ok(()) => Phase::Done,
            Err(f) => Phase::Failed(f),
        }
    });
    ctx.pull.flights.end(&key);
}

/// Stream blob `d` from the upstream into upload `id`, publishing
/// progress; store it when its digest matched.
async fn fetch_blob(
    ctx: &Arc<Ctx>,
    up: &Upstream,
    name: &Name,
    repo: &str,
    d: &Digest,
    id: &str,
    tx: &watch::Sender<Progress>,
) -> Result<(), Failure> {
    let (path, what) = (format!("blobs/{d}"), format!("blob {d} of {repo}"));
    let answer = ask(ctx, up, Method::GET, (repo, &path), &[], &what).await?;
    let total: u64 = answer
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Failure::Unavailable(format!("{}: blob without Content-Length", up.url)))?;
    let path = ctx
        .store
        .upload_file(name, id)
        .ok_or_else(|| Failure::Unavailable("storage: bad upload id".into()))?;
    let io = |e: io::Error| Failure::Unavailable(format!("storage: {e}"));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(io)?;
    let reader = Arc::new(std::fs::File::open(&path).map_err(io)?);
    tx.send_modify(|p| {
        p.phase = Phase::Running;
        p.total = total;
        p.file = Some(reader);
    });
    let mut hasher = ring::digest::Context::new(&ring::digest::SHA256);
    let mut body = answer.into_body();
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut written = 0u64;
    loop {
        let frame = tokio::time::timeout(STALL, body.frame())
            .await
            .map_err(|_| Failure::Unavailable(format!("{}: blob {d} stalled", up.url)))?;
        let data = match frame {
            None => None,
            Some(Err(e)) => {
                return Err(Failure::Unavailable(format!(
                    "{}: blob {d} cut after {} bytes: {e}",
                    up.url,
                    written + buf.len() as u64
                )));
            }
            Some(Ok(f)) => Some(f.into_data().unwrap_or_default()),
        };
        let end = data.is_none();
        if let Some(data) = data {
            if written + (buf.len() + data.len()) as u64 > total {
                return Err(Failure::Unavailable(format!(
                    "{}: blob {d} longer than its Content-Length",
                    up.url
                )));
            }
            hasher.update(&data);
            buf.extend_from_slice(&data);
        }
        if buf.len() >= CHUNK || (end && !buf.is_empty()) {
            let chunk = std::mem::replace(&mut buf, Vec::with_capacity(CHUNK));
            let n = chunk.len() as u64;
            out = tokio::task::spawn_blocking(move || {
                use std::io::Write as _;
                out.write_all(&chunk).map(|()| out)
            })
            .await
            .map_err(|e| Failure::Unavailable(format!("storage: {e}")))?
            .map_err(io)?;
            written += n;
            ctx.pull.count(up, |r| r.bytes += n);
            tx.send_modify(|p| p.written = written);
        }
        if end {
            break;
        }
    }
    if written != total {
        return Err(Failure::Unavailable(format!(
            "{}: blob {d} ended after {written} of {total} bytes",
            up.url
        )));
    }
    let got = Digest::from_sha256(hasher.finish().as_ref());
    if got != *d {
        return Err(Failure::Unavailable(format!(
            "the upstream {} sent bytes for {d} that hash to {got}: not served, not stored",
            up.url
        )));
    }
    let (n, id, d2) = (name.clone(), id.to_string(), *d);
    match blocking(ctx, move |c| c.store.finish_upload(&n, &id, &d2)).await {
        Some(Ok(true)) => Ok(()),
        Some(Ok(false)) => Err(Failure::Unavailable(format!(
            "blob {d} did not match its digest on disk: not stored"
        ))),
        Some(Err(e)) => Err(io(e)),
        None => Err(Failure::Unavailable("storage: task failed".into())),
    }
}

/// The answer of a client following a fetch: the error when it failed
/// before a byte, else the blob (or the byte range asked for, as storage
/// answers it: 206 with `Content-Range`, 416 past the end) streamed as it
/// arrives.
async fn follow(
    ctx: &Arc<Ctx>,
    mut rx: watch::Receiver<Progress>,
    method: &Method,
    d: &Digest,
    want: Want<'_>,
) -> Resp {
    let total = loop {
        let p = rx.borrow_and_update().clone();
        match p.phase {
            Phase::Starting => {}
            Phase::Failed(f) => return refuse(&f, Code::BlobUnknown, json!(d.to_string())),
            Phase::Running | Phase::Done => break p.total,
        }
        if rx.changed().await.is_err() {
            let f = Failure::Unavailable("the fetch ended without an answer".into());
            return refuse(&f, Code::BlobUnknown, json!(d.to_string()));
        }
    };
    let (start, end) = match range(want.range, total) {
        Err(()) => return unsatisfiable(d, total),
        Ok(Some((first, last))) => (first, last + 1),
        Ok(None) => (0, total),
    };
    let mut resp = if method == Method::HEAD {
        Response::new(reply::full(Bytes::new()))
    } else {
        let (stats, peer) = (ctx.stats.clone(), want.peer);
        let from = Follow {
            rx,
            off: start,
            end,
        };
        let stream = futures_util::stream::unfold(from, next_chunk).map(move |r| {
            r.inspect(|b: &Bytes| stats.sent(peer, b.len() as u64))
                .map(Frame::data)
        });
        Response::new(StreamBody::new(stream).boxed_unsync())
    };
    if (start, end) != (0, total) {
        partial(&mut resp, start, end - 1, total);
    }
    set(&mut resp, "Content-Length", &(end - start).to_string());
    blob_headers(&mut resp, d);
    resp
}

/// A follower's place: the bytes `off..end` of the blob are still to send.
struct Follow {
    rx: watch::Receiver<Progress>,
    off: u64,
    end: u64,
}

/// The next piece a follower may send: what is visible past `off`, or
/// wait for more; an error ends the stream (the connection closes).
async fn next_chunk(mut f: Follow) -> Option<(io::Result<Bytes>, Follow)> {
    if f.off >= f.end {
        return None;
    }
    loop {
        let p = f.rx.borrow_and_update().clone();
        if let Phase::Failed(fail) = &p.phase {
            let e = io::Error::other(fail.message().to_string());
            f.end = 0;
            return Some((Err(e), f));
        }
        let visible = p.visible_until(f.end);
        if f.off < visible
            && let Some(file) = p.file.clone()
        {
            let (off, len) = (f.off, (visible - f.off).min(CHUNK as u64) as usize);
            let read = tokio::task::spawn_blocking(move || {
                use std::os::unix::fs::FileExt as _;
                let mut b = vec![0u8; len];
                file.read_exact_at(&mut b, off).map(|()| Bytes::from(b))
            })
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e)));
            match &read {
                Ok(_) => f.off += len as u64,
                Err(_) => f.end = 0,
            }
            return Some((read, f));
        }
        if f.rx.changed().await.is_err() {
            let e = io::Error::other("the upstream fetch ended");
            f.end = 0;
            return Some((Err(e), f));
        }
    }
}
