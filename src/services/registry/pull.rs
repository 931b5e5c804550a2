//! The pull side: `/v2/`, `_catalog`, `tags/list`, manifests and blobs by
//! `GET`/`HEAD`, with the headers distribution sends (`Docker-Content-
//! Digest`, `Etag`, `Content-Type`, `Accept-Ranges`, `Cache-Control`) and
//! single byte ranges (a multi-range request gets the whole blob).

use std::io::SeekFrom;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::Frame;
use hyper::header::{ACCEPT, IF_NONE_MATCH, RANGE};
use hyper::{HeaderMap, Method, Response, StatusCode};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};

use super::Ctx;
use super::manifest;
use super::names::{BadDigest, Digest, Name, Reference};
use super::ranges::{blob_headers, partial, range, unsatisfiable};
use super::reply::{self, Code, Resp, set};
use super::storage::Check;

/// Most entries of one `_catalog` page without `n`.
const CATALOG_PAGE: usize = 100;

/// `n`/`last` of a paged list: the page and the `Link` to the next one.
fn page(all: Vec<String>, query: &[(String, String)]) -> Result<(Vec<String>, bool), Resp> {
    let get = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.as_str());
    let n = match get("n") {
        None | Some("") => None,
        Some(s) => match s.parse::<usize>() {
            Ok(n) => Some(n),
            Err(_) => return Err(reply::error(Code::PaginationNumberInvalid, json!({"n": s}))),
        },
    };
    let mut items: Vec<String> = match get("last") {
        Some(last) if !last.is_empty() => all.into_iter().filter(|t| t.as_str() > last).collect(),
        _ => all,
    };
    let more = n.is_some_and(|n| items.len() > n);
    if let Some(n) = n {
        items.truncate(n);
    }
    Ok((items, more))
}

fn link(r: &mut Resp, path: &str, last: Option<&String>, n: usize) {
    if let Some(last) = last {
        set(
            r,
            "Link",
            &format!("<{path}?last={last}&n={n}>; rel=\"next\""),
        );
    }
}

pub(super) async fn catalog(ctx: &Arc<Ctx>, query: &[(String, String)]) -> Resp {
    let c = ctx.clone();
    let all = tokio::task::spawn_blocking(move || c.store.catalog())
        .await
        .unwrap_or_default();
    let mut q = query.to_vec();
    if !q.iter().any(|(k, _)| k == "n") {
        q.push(("n".into(), CATALOG_PAGE.to_string()));
    }
    let (items, more) = match page(all, &q) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let n = items.len();
    let mut r = reply::json(
        StatusCode::OK,
        json!({"repositories": items}).to_string() + "\n",
    );
    if more {
        link(&mut r, "/v2/_catalog", items.last(), n);
    }
    r
}

pub(super) async fn tags(ctx: &Arc<Ctx>, name: Name, query: &[(String, String)]) -> Resp {
    let c = ctx.clone();
    let n2 = name.clone();
    let found =
        tokio::task::spawn_blocking(move || c.store.repo_exists(&n2).then(|| c.store.tags(&n2)))
            .await
            .ok()
            .flatten();
    let all = match super::pulltags::list(ctx, &name, found).await {
        Ok(Some(all)) => all,
        Ok(None) => return reply::error(Code::NameUnknown, json!({"name": name.as_str()})),
        Err(refused) => return refused,
    };
    let (items, more) = match page(all, query) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let n = items.len();
    let body = json!({"name": name.as_str(), "tags": items}).to_string() + "\n";
    let mut r = reply::json(StatusCode::OK, body);
    if more {
        link(
            &mut r,
            &format!("/v2/{}/tags/list", name.as_str()),
            items.last(),
            n,
        );
    }
    r
}

/// `GET`/`HEAD` of a manifest by tag or digest.
pub(super) async fn manifest(
    ctx: &Arc<Ctx>,
    method: &Method,
    headers: &HeaderMap,
    name: Name,
    reference: &str,
) -> Resp {
    let r = match Reference::parse(reference) {
        None => return reply::page_not_found(),
        Some(Err(BadDigest::Unsupported | BadDigest::Malformed)) => {
            return reply::error(Code::DigestInvalid, json!(null));
        }
        Some(Ok(r)) => r,
    };
    if let Some(refused) = super::pullthrough::manifest(ctx, headers, &name, &r).await {
        return refused;
    }
    let c = ctx.clone();
    let (n2, r2) = (name.clone(), r.clone());
    let found = tokio::task::spawn_blocking(move || -> Option<(Digest, Vec<u8>)> {
        let d = match &r2 {
            Reference::Tag(t) => c.store.tag(&n2, t)?,
            Reference::Digest(d) => *d,
        };
        if !c.store.has_revision(&n2, &d) || c.store.verified(&d) != Check::Good {
            return None;
        }
        let bytes = std::fs::read(c.store.blob_path(&d)).ok()?;
        (Digest::of(&bytes) == d).then_some((d, bytes))
    })
    .await
    .ok()
    .flatten();
    let Some((digest, bytes)) = found else {
        let detail = match &r {
            Reference::Tag(t) => json!({"Tag": t}),
            Reference::Digest(d) => json!({"Name": name.as_str(), "Revision": d.to_string()}),
        };
        return reply::error(Code::ManifestUnknown, detail);
    };
    let Some(media) = manifest::media_type(&bytes) else {
        return reply::error(Code::ManifestUnknown, json!(null));
    };
    let accept = manifest::accepted(
        headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    if let Some(why) = manifest::refusal(media, &accept, matches!(r, Reference::Tag(_))) {
        return reply::error_with(Code::ManifestUnknown, Some(why), json!(null));
    }
    let etag = format!("\"{digest}\"");
    if not_modified(headers, &etag) {
        let mut resp = reply::empty(StatusCode::NOT_MODIFIED);
        resp.headers_mut().remove(hyper::header::CONTENT_LENGTH);
        return resp;
    }
    let len = bytes.len();
    let body = if method == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(bytes)
    };
    let mut resp = Response::new(reply::full(body));
    set(&mut resp, "Content-Type", media);
    set(&mut resp, "Content-Length", &len.to_string());
    set(&mut resp, "Docker-Content-Digest", &digest.to_string());
    set(&mut resp, "Etag", &etag);
    resp
}

fn not_modified(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag))
}

/// `GET`/`HEAD` of a blob linked into `name`.
pub(super) async fn blob(
    ctx: &Arc<Ctx>,
    method: &Method,
    headers: &HeaderMap,
    name: Name,
    digest: &str,
    peer: std::net::IpAddr,
) -> Resp {
    let d = match Digest::parse(digest) {
        Ok(d) => d,
        Err(BadDigest::Malformed) => return reply::page_not_found(),
        // distribution: a well-formed digest it does not store is unknown.
        Err(BadDigest::Unsupported) => return reply::error(Code::BlobUnknown, json!(digest)),
    };
    let want = super::pullblob::Want {
        range: headers.get(RANGE).and_then(|v| v.to_str().ok()),
        peer,
    };
    if let Some(fetched) = super::pullblob::blob(ctx, method, &name, &d, want).await {
        return fetched;
    }
    let c = ctx.clone();
    let n2 = name.clone();
    let size = tokio::task::spawn_blocking(move || {
        if !c.store.has_layer(&n2, &d) {
            return None;
        }
        match c.store.verified(&d) {
            Check::Good => c.store.blob_size(&d),
            Check::Corrupt => {
                c.stats
                    .error(format!("blob {d} does not match its digest: not served"));
                None
            }
            Check::Missing => None,
        }
    })
    .await
    .ok()
    .flatten();
    let Some(size) = size else {
        return reply::error(Code::BlobUnknown, json!(d.to_string()));
    };
    let etag = format!("\"{d}\"");
    if not_modified(headers, &etag) {
        let mut resp = reply::empty(StatusCode::NOT_MODIFIED);
        resp.headers_mut().remove(hyper::header::CONTENT_LENGTH);
        return resp;
    }
    let rng = range(headers.get(RANGE).and_then(|v| v.to_str().ok()), size);
    let mut resp = match rng {
        Err(()) => return unsatisfiable(&d, size),
        Ok(Some((start, end))) => {
            let mut r = body_of(ctx, &d, method, start, end + 1 - start, peer).await;
            partial(&mut r, start, end, size);
            r
        }
        Ok(None) => body_of(ctx, &d, method, 0, size, peer).await,
    };
    blob_headers(&mut resp, &d);
    resp
}

/// `len` bytes of blob `d` from `start`, streamed (nothing for `HEAD`).
async fn body_of(
    ctx: &Arc<Ctx>,
    d: &Digest,
    method: &Method,
    start: u64,
    len: u64,
    peer: std::net::IpAddr,
) -> Resp {
    let mut resp = if method == Method::HEAD {
        Response::new(reply::full(Bytes::new()))
    } else {
        match tokio::fs::File::open(ctx.store.blob_path(d)).await {
            Ok(mut f) => {
                if f.seek(SeekFrom::Start(start)).await.is_err() {
                    return reply::error(Code::BlobUnknown, json!(d.to_string()));
                }
                let stats = ctx.stats.clone();
                let stream = tokio_util::io::ReaderStream::with_capacity(f.take(len), 256 * 1024)
                    .map(move |r| {
                        r.inspect(|b| stats.sent(peer, b.len() as u64))
                            .map(Frame::data)
                    });
                Response::new(StreamBody::new(stream).boxed_unsync())
            }
            Err(_) => return reply::error(Code::BlobUnknown, json!(d.to_string())),
        }
    };
    set(&mut resp, "Content-Length", &len.to_string());
    resp
}
