//! The replication client (`replica.rs` has the design): every
//! [`super::replica::LOOK`] ask the peer for its signed inventory and take
//! what this member lacks, blobs first, then manifest revisions, then
//! tags.
//!
//! A blob is fetched into an upload file of the repository that links it;
//! a cut (peer gone, connection stalled [`STALL`]) leaves the file, and
//! the next round asks for the rest with `Range: bytes=<have>-`. The blob
//! lands only through `Store::finish_upload`, which hashes it first.
//!
//! The client is blocking HTTP/1.1 over rustls on a `spawn_blocking`
//! thread, like `serve::hasync`'s: two fixed requests to one known peer,
//! not worth an HTTP client stack. What can go wrong is [`ReplicaError`].

mod error;

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Read, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Ctx;
use super::names::{Digest, Name, tag_ok};
use super::replica::{Inventory, LOOK, MAX_INVENTORY, PREFIX, Replica, inventory, lacking};
use super::storage::Store;
use crate::runtime::clock::unix_now;
use crate::runtime::haauth::{self, Role, Stamp};
use crate::runtime::sync::LockExt as _;
pub(super) use error::ReplicaError;

/// Connecting to the peer takes at most this.
const CONNECT: Duration = Duration::from_secs(3);
/// A peer that sends nothing this long is cut (the fetch resumes later).
const STALL: Duration = Duration::from_secs(10);
/// Manifests are at most this large (as the registry accepts them).
const MAX_MANIFEST: u64 = 4 << 20;

type Stream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// Fetch blob `d` from the peer, appending to `file` from `offset`; the
/// bytes written.
pub(super) type Fetch<'a> = dyn FnMut(&Digest, &Path, u64) -> Result<u64, ReplicaError> + 'a;

fn tls() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(crate::runtime::tls::NoVerify(provider)))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The peer's end of one signed request.
struct Peer<'a> {
    addr: SocketAddr,
    replica: &'a Replica,
    tls: Arc<rustls::ClientConfig>,
}

/// An answer's status, its headers (lower-case names) and its body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    length: u64,
    body: BufReader<Stream>,
}

impl Answer {
    fn header(&self, n: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
    }
}

impl Peer<'_> {
    /// Send `GET path` signed with the pair key; the answer's head.
    fn get(&self, path: &str, extra: &str) -> Result<(Answer, Stamp), ReplicaError> {
        let stamp = Stamp::new(self.replica.me(), unix_now());
        let role = Role::Request {
            method: "GET",
            path,
        };
        let mut head = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{extra}",
            self.addr
        );
        for (k, v) in haauth::sign(&self.replica.key, role, &stamp, b"") {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let tcp = TcpStream::connect_timeout(&self.addr, CONNECT).map_err(ReplicaError::Connect)?;
        tcp.set_read_timeout(Some(STALL))
            .and_then(|()| tcp.set_write_timeout(Some(STALL)))
            .map_err(ReplicaError::Connect)?;
        let name = rustls::pki_types::ServerName::IpAddress(self.addr.ip().into());
        let conn = rustls::ClientConnection::new(self.tls.clone(), name.to_owned())
            .map_err(ReplicaError::Tls)?;
        let mut s = rustls::StreamOwned::new(conn, tcp);
        s.write_all(head.as_bytes()).map_err(ReplicaError::Send)?;
        let mut body = BufReader::with_capacity(256 * 1024, s);
        let mut line = String::new();
        body.read_line(&mut line).map_err(ReplicaError::Receive)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or(ReplicaError::MalformedAnswer)?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            body.read_line(&mut line).map_err(ReplicaError::Receive)?;
            let l = line.trim_end();
            if l.is_empty() || headers.len() > 100 {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let length = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .ok_or(ReplicaError::NoContentLength)?;
        let a = Answer {
            status,
            headers,
            length,
            body,
        };
        Ok((a, stamp))
    }

    /// The peer's inventory, authenticated.
    fn inventory(&self) -> Result<Inventory, ReplicaError> {
        let (mut a, stamp) = self.get(&format!("{PREFIX}inventory"), "")?;
        if a.length > MAX_INVENTORY as u64 {
            return Err(ReplicaError::InventoryTooLarge);
        }
        let mut body = vec![0u8; a.length as usize];
        a.body
            .read_exact(&mut body)
            .map_err(ReplicaError::Receive)?;
        match a.status {
            200 => {}
            401 => return Err(ReplicaError::Unauthorized),
            status => return Err(ReplicaError::Refused(status)),
        }
        let role = Role::Answer {
            status: 200,
            request: &stamp.nonce,
        };
        let header = |n: &str| a.header(n);
        haauth::verify(
            &self.replica.key,
            role,
            &header,
            &body,
            self.replica.peer,
            unix_now(),
        )
        .map_err(ReplicaError::Unauthenticated)?;
        serde_json::from_slice(&body).map_err(ReplicaError::MalformedInventory)
    }

    /// Blob `d` from `offset` appended to `file` (truncated first when the
    /// peer sends it whole); the bytes written.
    fn blob(&self, d: &Digest, file: &Path, offset: u64) -> Result<u64, ReplicaError> {
        let range = if offset > 0 {
            format!("Range: bytes={offset}-\r\n")
        } else {
            String::new()
        };
        let (a, _) = self.get(&format!("{PREFIX}blob/{d}"), &range)?;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(file)
            .map_err(ReplicaError::Store)?;
        match a.status {
            206 if offset > 0 => {}
            200 => f.set_len(0).map_err(ReplicaError::Store)?,
            status => {
                return Err(ReplicaError::BlobRefused { digest: *d, status });
            }
        }
        let n = std::io::copy(&mut a.body.take(a.length), &mut f)
            .map_err(|err| ReplicaError::BlobCopy { digest: *d, err })?;
        if n == a.length {
            Ok(n)
        } else {
            Err(ReplicaError::BlobCut {
                digest: *d,
                bytes: n,
            })
        }
    }
}

/// Uploads in progress, by digest: a cut fetch resumes in the same file.
#[derive(Default)]
pub(super) struct Pending(HashMap<Digest, (Name, String)>);

/// What one round took.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Pulled {
    pub blobs: u64,
    pub bytes: u64,
    pub resumed: u64,
}

/// Fetch blob `d` (for `name`) into an upload; its repository, id and
/// path once complete.
fn fetch_upload(
    store: &Store,
    name: &Name,
    d: &Digest,
    pending: &mut Pending,
    fetch: &mut Fetch<'_>,
    pulled: &mut Pulled,
) -> Result<(Name, String), ReplicaError> {
    let usable = |(n, id): &(Name, String)| store.upload_file(n, id).is_some_and(|p| p.is_file());
    if !pending.0.get(d).is_some_and(usable) {
        let id = store.start_upload(name).map_err(ReplicaError::Store)?;
        pending.0.insert(*d, (name.clone(), id));
    }
    let (n, id) = pending.0.get(d).cloned().ok_or(ReplicaError::NoUpload)?;
    let path = store
        .upload_file(&n, &id)
        .ok_or(ReplicaError::BadUploadId)?;
    let have = std::fs::metadata(&path).map_or(0, |m| m.len());
    if have > 0 {
        pulled.resumed += 1;
    }
    let got = fetch(d, &path, have)?;
    pulled.blobs += 1;
    pulled.bytes += got;
    pending.0.remove(d);
    Ok((n, id))
}

/// Take from the peer's inventory `peer` what `store` lacks: blobs,
/// then revisions, then tags (a tag the peer wrote later wins).
pub(super) fn apply(
    store: &Store,
    peer: &Inventory,
    pending: &mut Pending,
    fetch: &mut Fetch<'_>,
) -> Result<Pulled, ReplicaError> {
    let mut pulled = Pulled::default();
    let local = inventory(store);
    let io = ReplicaError::Store;
    let digest = |d: &String| Digest::parse(d).map_err(|_| ReplicaError::BadDigest(d.clone()));
    for (repo, r) in &peer.repos {
        let name =
            Name::parse(repo).ok_or_else(|| ReplicaError::BadRepositoryName(repo.clone()))?;
        for d in &r.layers {
            let d = digest(d)?;
            if store.has_layer(&name, &d) {
                continue;
            }
            if store.blob_size(&d).is_some() {
                store.link_layer(&name, &d).map_err(io)?;
                continue;
            }
            let (n, id) = fetch_upload(store, &name, &d, pending, fetch, &mut pulled)?;
            if !store.finish_upload(&n, &id, &d).map_err(io)? {
                return Err(ReplicaError::BlobMismatch(d));
            }
        }
        let mine = local.repos.get(repo);
        for d in &r.manifests {
            let d = digest(d)?;
            if !store.has_revision(&name, &d) {
                let bytes = manifest_bytes(store, &name, &d, pending, fetch, &mut pulled)?;
                store.put_manifest(&name, &bytes, None).map_err(io)?;
            }
        }
        for (t, (d, at)) in &r.tags {
            let ours = mine.and_then(|m| m.tags.get(t));
            if !tag_ok(t) || ours.is_some_and(|(od, oat)| od == d || oat >= at) {
                continue;
            }
            let d = digest(d)?;
            let bytes = manifest_bytes(store, &name, &d, pending, fetch, &mut pulled)?;
            store.put_manifest(&name, &bytes, Some(t)).map_err(io)?;
        }
    }
    Ok(pulled)
}

/// Manifest `d`'s bytes: stored, else fetched and checked.
fn manifest_bytes(
    store: &Store,
    name: &Name,
    d: &Digest,
    pending: &mut Pending,
    fetch: &mut Fetch<'_>,
    pulled: &mut Pulled,
) -> Result<Vec<u8>, ReplicaError> {
    let read = |p: &Path| -> Result<Vec<u8>, ReplicaError> {
        let f = std::fs::File::open(p).map_err(ReplicaError::Store)?;
        let mut out = Vec::new();
        f.take(MAX_MANIFEST + 1)
            .read_to_end(&mut out)
            .map_err(ReplicaError::Store)?;
        Ok(out)
    };
    let bytes = if store.blob_size(d).is_some() {
        read(&store.blob_path(d))?
    } else {
        let (n, id) = fetch_upload(store, name, d, pending, fetch, pulled)?;
        let b = store
            .upload_file(&n, &id)
            .ok_or(ReplicaError::BadUploadId)
            .map(|p| read(&p));
        store.remove_upload(&n, &id);
        b??
    };
    if bytes.len() as u64 > MAX_MANIFEST || Digest::of(&bytes) != *d {
        return Err(ReplicaError::ManifestMismatch(*d));
    }
    Ok(bytes)
}

/// One round: the peer's inventory, what we lack taken, status updated.
fn round(ctx: &Ctx, peer: &Peer<'_>, pending: &mut Pending) -> Result<(), ReplicaError> {
    let theirs = peer.inventory()?;
    let mut fetch = |d: &Digest, p: &Path, off: u64| peer.blob(d, p, off);
    let got = apply(&ctx.store, &theirs, pending, &mut fetch);
    let ours = inventory(&ctx.store);
    let mut s = peer.replica.status.locked();
    s.peer_lacks = lacking(&ours, &theirs);
    s.we_lack = lacking(&theirs, &ours);
    let got = got?;
    s.pulled_blobs += got.blobs;
    s.pulled_bytes += got.bytes;
    s.resumed += got.resumed;
    s.last_sync = Some(unix_now());
    Ok(())
}

/// Replicate from the peer at `addr` until `stop`.
pub(crate) async fn run(
    ctx: Arc<Ctx>,
    replica: Arc<Replica>,
    addr: SocketAddr,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let tls = tls().map_err(|e| anyhow::anyhow!("registry replica: TLS: {e}"))?;
    let pending = Arc::new(std::sync::Mutex::new(Pending::default()));
    // The last round's error text (`Some(None)`: it worked), so that each
    // change is logged once.
    let mut was: Option<Option<String>> = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(LOOK) => {}
        }
        let (c, r, t, p) = (ctx.clone(), replica.clone(), tls.clone(), pending.clone());
        let job = tokio::task::spawn_blocking(move || {
            let peer = Peer {
                addr,
                replica: &r,
                tls: t,
            };
            round(&c, &peer, &mut p.locked())
        });
        let result = tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            r = job => r.unwrap_or_else(|e| Err(ReplicaError::Task(e))),
        };
        let error = result.err().map(|e| e.to_string());
        match (&error, &was) {
            (None, Some(None)) => {}
            (None, _) => info!("registry replica: in step with {addr}"),
            (Some(e), Some(Some(w))) if e == w => {}
            (Some(e), _) => {
                warn!("registry replica: round with {addr} failed ({e}); retrying every {LOOK:?}")
            }
        }
        replica.status.locked().error = error.clone();
        was = Some(error);
    }
}

/// Serve the registry on this member's own address too (when
/// `registry.listen` is the VIP, the peer must reach us while we do not
/// hold it), then replicate from the peer until `stop`.
pub(crate) async fn serve_and_replicate(
    ctx: Arc<Ctx>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let Some(replica) = ctx.replica.clone() else {
        return Ok(());
    };
    let listen = ctx.live.load().cfg.listen;
    while replica.me().is_unspecified() {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(LOOK) => {}
        }
    }
    let own = SocketAddr::new(replica.me().into(), listen.port());
    if !listen.ip().is_unspecified() && listen != own {
        let l = replica
            .bind
            .tcp(own)
            .map_err(|e| anyhow::anyhow!("registry replica: bind {own}: {e}"))?;
        tracing::info!("registry: serving the HA peer on {own}");
        tokio::spawn(super::serve_listener(ctx.clone(), l, stop.clone()));
    }
    let peer = SocketAddr::new(replica.peer.into(), listen.port());
    run(ctx, replica, peer, stop).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::registry::replica::Lack;

    fn push(store: &Store, repo: &str, layer: &[u8], tag: &str) -> Digest {
        let name = Name::parse(repo).unwrap();
        let d = Digest::of(layer);
        let id = store.start_upload(&name).unwrap();
        std::fs::write(store.upload_file(&name, &id).unwrap(), layer).unwrap();
        assert!(store.finish_upload(&name, &id, &d).unwrap());
        let manifest = format!(r#"{{"schemaVersion":2,"layers":[{{"digest":"{d}"}}]}}"#);
        store
            .put_manifest(&name, manifest.as_bytes(), Some(tag))
            .unwrap()
    }

    /// Copies blobs from `from`, cutting the first fetch after `cut` bytes.
    fn copier(
        from: &Store,
        cut: Option<u64>,
    ) -> impl FnMut(&Digest, &Path, u64) -> Result<u64, ReplicaError> {
        let mut cut = cut;
        move |d, p, off| {
            let all = std::fs::read(from.blob_path(d)).map_err(ReplicaError::Store)?;
            let end = match cut.take() {
                Some(c) => (c as usize).min(all.len()),
                None => all.len(),
            };
            let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(&all[off as usize..end]).unwrap();
            if end < all.len() {
                return Err(ReplicaError::BlobCut {
                    digest: *d,
                    bytes: (end - off as usize) as u64,
                });
            }
            Ok((end - off as usize) as u64)
        }
    }

    #[test]
    fn a_push_on_one_member_reaches_the_other_and_a_cut_resumes() {
        let (ta, tb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (Store::new(ta.path()), Store::new(tb.path()));
        let layer = vec![7u8; 300_000];
        let m = push(&a, "ocp/release", &layer, "4.18");
        assert!(lacking(&inventory(&a), &inventory(&b)).blobs == 2);
        let mut pending = Pending::default();
        let mut cut = copier(&a, Some(1000));
        let e = apply(&b, &inventory(&a), &mut pending, &mut cut).unwrap_err();
        assert!(
            matches!(e, ReplicaError::BlobCut { bytes: 1000, .. }),
            "{e}"
        );
        let name = Name::parse("ocp/release").unwrap();
        assert_eq!(
            b.tag(&name, "4.18"),
            None,
            "nothing is linked before its blobs"
        );
        let got = apply(&b, &inventory(&a), &mut pending, &mut cut).unwrap();
        assert_eq!(got.resumed, 1, "the cut fetch resumed: {got:?}");
        assert_eq!(b.tag(&name, "4.18"), Some(m));
        assert!(b.has_layer(&name, &Digest::of(&layer)));
        let (ia, ib) = (inventory(&a), inventory(&b));
        assert_eq!(ia.sizes, ib.sizes);
        for (k, r) in &ia.repos {
            assert_eq!(
                (&r.layers, &r.manifests),
                (&ib.repos[k].layers, &ib.repos[k].manifests)
            );
        }
        assert_eq!(lacking(&inventory(&b), &inventory(&a)), Lack::default());
        assert_eq!(lacking(&inventory(&a), &inventory(&b)), Lack::default());
        // The other way, and repeats change nothing.
        push(&b, "ocp/other", b"second", "v1");
        let got = apply(
            &a,
            &inventory(&b),
            &mut Pending::default(),
            &mut copier(&b, None),
        )
        .unwrap();
        assert_eq!(got.blobs, 2);
        let again = apply(
            &a,
            &inventory(&b),
            &mut Pending::default(),
            &mut copier(&b, None),
        )
        .unwrap();
        assert_eq!(again, Pulled::default());
    }

    #[test]
    fn a_blob_that_does_not_match_its_digest_never_lands() {
        let (ta, tb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (Store::new(ta.path()), Store::new(tb.path()));
        push(&a, "r", b"layer", "t");
        let mut liar = |_: &Digest, p: &Path, _: u64| {
            std::fs::write(p, b"not the layer")
                .map(|()| 13)
                .map_err(ReplicaError::Store)
        };
        let e = apply(&b, &inventory(&a), &mut Pending::default(), &mut liar).unwrap_err();
        assert!(
            matches!(e, ReplicaError::BlobMismatch(d) if d == Digest::of(b"layer")),
            "{e}"
        );
        assert!(b.blob_size(&Digest::of(b"layer")).is_none());
        assert!(b.blob_size(&Digest::of(b"not the layer")).is_none());
        assert!(inventory(&b).repos.values().all(|r| r.tags.is_empty()));
    }

    #[test]
    fn a_later_tag_wins_and_an_older_one_does_not() {
        let (ta, tb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (Store::new(ta.path()), Store::new(tb.path()));
        push(&b, "r", b"old", "t");
        std::thread::sleep(Duration::from_millis(20));
        let new = push(&a, "r", b"new", "t");
        apply(
            &b,
            &inventory(&a),
            &mut Pending::default(),
            &mut copier(&a, None),
        )
        .unwrap();
        let name = Name::parse("r").unwrap();
        assert_eq!(b.tag(&name, "t"), Some(new));
        apply(
            &a,
            &inventory(&b),
            &mut Pending::default(),
            &mut copier(&b, None),
        )
        .unwrap();
        assert_eq!(a.tag(&name, "t"), Some(new));
    }
}
