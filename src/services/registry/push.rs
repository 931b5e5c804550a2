//! The push side: blob uploads (monolithic `POST ?digest=`, `POST` then
//! `PATCH`… then `PUT ?digest=`, cross-repository mount), their status and
//! cancellation, manifest `PUT` by tag and by digest, and `DELETE` (only
//! with `registry.allowDelete`).
//!
//! Invariants: an upload's bytes go to its own file under the
//! repository's `_uploads`; a `PATCH` whose `Content-Range` does not start
//! at the bytes received so far is refused (416) and changes nothing; the
//! blob appears only when the digest matched (`storage::finish_upload`),
//! on disk and synced before the 201. A write error (a full disk) removes
//! the upload and answers 500 with the reason, logged once per upload.

use std::sync::Arc;

use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::{HeaderMap, StatusCode};
use serde_json::json;
use tokio::io::AsyncWriteExt as _;
use tracing::warn;

use super::Ctx;
use super::manifest::{self, MAX_MANIFEST};
use super::names::{BadDigest, Digest, Name, Reference};
use super::reply::{self, Code, Resp, set};

fn query_get<'a>(q: &'a [(String, String)], k: &str) -> Option<&'a str> {
    q.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

fn accepted(name: &Name, id: &str, size: u64) -> Resp {
    let mut r = reply::empty(StatusCode::ACCEPTED);
    set(
        &mut r,
        "Location",
        &format!("/v2/{}/blobs/uploads/{id}", name.as_str()),
    );
    set(&mut r, "Range", &format!("0-{}", size.saturating_sub(1)));
    set(&mut r, "Docker-Upload-UUID", id);
    r
}

fn created_blob(name: &Name, d: &Digest) -> Resp {
    let mut r = reply::empty(StatusCode::CREATED);
    set(
        &mut r,
        "Location",
        &format!("/v2/{}/blobs/{d}", name.as_str()),
    );
    set(&mut r, "Docker-Content-Digest", &d.to_string());
    r
}

/// Run blocking storage work; a panic or I/O error is a 500 with its text.
async fn blocking<T: Send + 'static>(
    ctx: &Arc<Ctx>,
    f: impl FnOnce(&Ctx) -> std::io::Result<T> + Send + 'static,
) -> Result<T, Resp> {
    let c = ctx.clone();
    match tokio::task::spawn_blocking(move || f(&c)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(write_failed(ctx, &e)),
        Err(e) => Err(write_failed(ctx, &std::io::Error::other(e.to_string()))),
    }
}

fn write_failed(ctx: &Ctx, e: &std::io::Error) -> Resp {
    let msg = format!("registry: storage write failed: {e}");
    warn!("{msg}");
    ctx.stats.error(msg);
    reply::error_with(
        Code::Unknown,
        Some(&format!("storage write failed: {e}")),
        json!(null),
    )
}

/// `POST /v2/<name>/blobs/uploads/`.
pub(super) async fn start(
    ctx: &Arc<Ctx>,
    name: Name,
    query: &[(String, String)],
    body: Incoming,
) -> Resp {
    if let (Some(m), Some(from)) = (query_get(query, "mount"), query_get(query, "from"))
        && let (Ok(d), Some(from)) = (Digest::parse(m), Name::parse(from))
    {
        let n2 = name.clone();
        let mounted = blocking(ctx, move |c| {
            if c.store.has_layer(&from, &d) && c.store.blob_size(&d).is_some() {
                c.store.link_layer(&n2, &d)?;
                return Ok(true);
            }
            Ok(false)
        })
        .await;
        match mounted {
            Ok(true) => return created_blob(&name, &d),
            Ok(false) => {}
            Err(r) => return r,
        }
    }
    let n2 = name.clone();
    let id = match blocking(ctx, move |c| c.store.start_upload(&n2)).await {
        Ok(id) => id,
        Err(r) => return r,
    };
    match query_get(query, "digest") {
        Some(d) => finish(ctx, name, &id, d, body).await,
        None => accepted(&name, &id, 0),
    }
}

/// Append a request body to upload `id`: the new size.
async fn append(ctx: &Arc<Ctx>, name: &Name, id: &str, body: Incoming) -> Result<u64, Resp> {
    let Some(path) = ctx.store.upload_file(name, id) else {
        return Err(reply::error(Code::BlobUploadUnknown, json!(null)));
    };
    let mut f = match tokio::fs::OpenOptions::new().append(true).open(&path).await {
        Ok(f) => f,
        Err(_) => return Err(reply::error(Code::BlobUploadUnknown, json!(null))),
    };
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| reply::error(Code::BlobUploadInvalid, json!(null)))?;
        ctx.stats.received(chunk.len() as u64);
        if let Err(e) = f.write_all(&chunk).await {
            ctx.store.remove_upload(name, id);
            let failed = write_failed(ctx, &e);
            drain(&mut stream).await;
            return Err(failed);
        }
    }
    if let Err(e) = f.flush().await {
        ctx.store.remove_upload(name, id);
        return Err(write_failed(ctx, &e));
    }
    Ok(f.metadata().await.map(|m| m.len()).unwrap_or(0))
}

/// After a failed write, read and drop the rest of the body (at most
/// 256 MiB, 10 s): a client still sending then reads the error, where a
/// close with its bytes unread would reset the connection under it.
async fn drain<S, E>(stream: &mut S)
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
{
    let mut left: u64 = 256 << 20;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(Ok(chunk)) = stream.next().await {
            left = left.saturating_sub(chunk.len() as u64);
            if left == 0 {
                break;
            }
        }
    })
    .await;
}

/// The size received so far of upload `id`.
fn upload_size(ctx: &Ctx, name: &Name, id: &str) -> Option<u64> {
    let p = ctx.store.upload_file(name, id)?;
    std::fs::metadata(p).ok().map(|m| m.len())
}

/// `PATCH /v2/<name>/blobs/uploads/<id>`.
pub(super) async fn patch(
    ctx: &Arc<Ctx>,
    name: Name,
    id: &str,
    headers: &HeaderMap,
    body: Incoming,
) -> Resp {
    let Some(have) = upload_size(ctx, &name, id) else {
        return reply::error(Code::BlobUploadUnknown, json!(null));
    };
    if let Some(cr) = headers.get("content-range").and_then(|v| v.to_str().ok()) {
        let start = cr
            .trim()
            .trim_start_matches("bytes ")
            .split('-')
            .next()
            .and_then(|s| s.trim().parse::<u64>().ok());
        if start != Some(have) {
            let mut r = reply::empty(StatusCode::RANGE_NOT_SATISFIABLE);
            set(
                &mut r,
                "Location",
                &format!("/v2/{}/blobs/uploads/{id}", name.as_str()),
            );
            set(&mut r, "Range", &format!("0-{}", have.saturating_sub(1)));
            set(&mut r, "Docker-Upload-UUID", id);
            return r;
        }
    }
    match append(ctx, &name, id, body).await {
        Ok(size) => accepted(&name, id, size),
        Err(r) => r,
    }
}

/// `PUT /v2/<name>/blobs/uploads/<id>?digest=`.
pub(super) async fn put(
    ctx: &Arc<Ctx>,
    name: Name,
    id: &str,
    query: &[(String, String)],
    body: Incoming,
) -> Resp {
    if upload_size(ctx, &name, id).is_none() {
        return reply::error(Code::BlobUploadUnknown, json!(null));
    }
    match query_get(query, "digest") {
        Some(d) => finish(ctx, name, id, d, body).await,
        None => reply::error_with(Code::DigestInvalid, Some("digest missing"), json!(null)),
    }
}

async fn finish(ctx: &Arc<Ctx>, name: Name, id: &str, digest: &str, body: Incoming) -> Resp {
    let Ok(want) = Digest::parse(digest) else {
        ctx.store.remove_upload(&name, id);
        return reply::error_with(Code::DigestInvalid, Some("invalid digest"), json!(null));
    };
    if let Err(r) = append(ctx, &name, id, body).await {
        return r;
    }
    let (n2, id2) = (name.clone(), id.to_string());
    match blocking(ctx, move |c| c.store.finish_upload(&n2, &id2, &want)).await {
        Ok(true) => created_blob(&name, &want),
        // distribution's detail: the digest asked for and an empty reason.
        Ok(false) => reply::error(
            Code::DigestInvalid,
            json!({"Digest": want.to_string(), "Reason": {}}),
        ),
        Err(r) => {
            ctx.store.remove_upload(&name, id);
            r
        }
    }
}

/// `GET /v2/<name>/blobs/uploads/<id>`.
pub(super) fn status(ctx: &Arc<Ctx>, name: &Name, id: &str) -> Resp {
    match upload_size(ctx, name, id) {
        Some(size) => {
            let mut r = accepted(name, id, size);
            *r.status_mut() = StatusCode::NO_CONTENT;
            r
        }
        None => reply::error(Code::BlobUploadUnknown, json!(null)),
    }
}

/// `DELETE /v2/<name>/blobs/uploads/<id>`.
pub(super) fn cancel(ctx: &Arc<Ctx>, name: &Name, id: &str) -> Resp {
    if upload_size(ctx, name, id).is_none() {
        return reply::error(Code::BlobUploadUnknown, json!(null));
    }
    ctx.store.remove_upload(name, id);
    reply::empty(StatusCode::NO_CONTENT)
}

/// `PUT /v2/<name>/manifests/<reference>`.
pub(super) async fn put_manifest(
    ctx: &Arc<Ctx>,
    name: Name,
    reference: &str,
    headers: &HeaderMap,
    body: Incoming,
) -> Resp {
    let r = match Reference::parse(reference) {
        None => return reply::error(Code::TagInvalid, json!(null)),
        Some(Err(_)) => return reply::error(Code::DigestInvalid, json!(null)),
        Some(Ok(r)) => r,
    };
    let limited = http_body_util::Limited::new(body, MAX_MANIFEST);
    let bytes = match limited.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            let mut resp = reply::error_with(
                Code::ManifestInvalid,
                Some("manifest too large: over 4 MiB"),
                json!({"limit": MAX_MANIFEST}),
            );
            *resp.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
            return resp;
        }
    };
    ctx.stats.received(bytes.len() as u64);
    let ct = headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let refs = match manifest::check_put(ct, &bytes) {
        Ok(refs) => refs,
        Err(why) => {
            let why = why.to_string();
            return reply::error_with(Code::ManifestInvalid, Some(&why), json!(null));
        }
    };
    let d = Digest::of(&bytes);
    if let Reference::Digest(want) = &r
        && *want != d
    {
        return reply::error(Code::DigestInvalid, json!(null));
    }
    let n2 = name.clone();
    let missing = blocking(ctx, move |c| {
        let blob = refs.blobs.iter().find(|b| !c.store.has_layer(&n2, b));
        let man = refs
            .manifests
            .iter()
            .find(|m| !c.store.has_revision(&n2, m));
        Ok(blob.or(man).copied())
    })
    .await;
    match missing {
        Ok(Some(b)) => return reply::error(Code::ManifestBlobUnknown, json!(b.to_string())),
        Ok(None) => {}
        Err(resp) => return resp,
    }
    let n2 = name.clone();
    let tag = match &r {
        Reference::Tag(t) => Some(t.clone()),
        Reference::Digest(_) => None,
    };
    match blocking(ctx, move |c| {
        c.store.put_manifest(&n2, &bytes, tag.as_deref())
    })
    .await
    {
        Ok(d) => {
            let mut resp = reply::empty(StatusCode::CREATED);
            set(
                &mut resp,
                "Location",
                &format!("/v2/{}/manifests/{d}", name.as_str()),
            );
            set(&mut resp, "Docker-Content-Digest", &d.to_string());
            resp
        }
        Err(resp) => resp,
    }
}

/// `DELETE` of a manifest (by digest) or of a blob's link.
pub(super) async fn delete(ctx: &Arc<Ctx>, name: Name, target: &str, blob: bool) -> Resp {
    if !ctx.allow_delete() {
        return reply::error(Code::Unsupported, json!(null));
    }
    let d = match Digest::parse(target) {
        Ok(d) => d,
        Err(BadDigest::Malformed) if !blob => {
            return reply::error(Code::Unsupported, json!(null));
        }
        Err(_) => return reply::error(Code::DigestInvalid, json!(null)),
    };
    let n2 = name.clone();
    let done = blocking(ctx, move |c| {
        if blob {
            c.store.unlink_layer(&n2, &d)
        } else {
            c.store.delete_manifest(&n2, &d)
        }
    })
    .await;
    match done {
        Ok(true) => reply::empty(StatusCode::ACCEPTED),
        Ok(false) if blob => reply::error(Code::BlobUnknown, json!(d.to_string())),
        Ok(false) => reply::error(Code::ManifestUnknown, json!(null)),
        Err(r) => r,
    }
}
