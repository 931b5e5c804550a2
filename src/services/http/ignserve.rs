//! Ignition configs over HTTP (`/ignition/<name>.ign` and `/<name>.ign`):
//! who may have which file, where its body comes from, and the record of
//! every fetch.
//!
//! Invariants: a config is answered only to the node it belongs to, the
//! appliance host and `http.ignitionClientCidrs` (an unknown name is judged
//! as a role file, so a stranger learns nothing: 403 either way), the first
//! refusal per address logged as a warning; the body is the day-2 pointer
//! config for a day-2 worker, else the cached file ([`super::igncache`]),
//! never re-read per request; every answer (200, 304, 403, 404, 500) is
//! recorded in [`super::stats::Stats`], and a 200 also marks the node's
//! network boot and the install timeline.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::SystemTime;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tracing::{debug, error, info, warn};

use super::body::{empty, head_only, plain, shared_body};
use super::igncache::{IgnBody, IgnError};
use super::range::{self, Conditions, Precondition, Validators};
use super::stats::Fetch;
use super::{Ctx, Resp, ignition, path};
use crate::model::access::{self, Decision, Owner};
use crate::model::cluster::{Cluster, Role};
use crate::plan::Plan;

/// The last ignition fetch told to the timeline: client, file and second.
/// A fetch equal to it is the same event (the timeline keeps seconds, and
/// applying an event twice changes nothing), so it is not told again: a
/// client fetching one file in a loop costs the timeline one event a
/// second, not one per request.
#[derive(Default)]
pub(super) struct LastTold(std::sync::Mutex<Option<(IpAddr, Arc<str>, u64)>>);

impl LastTold {
    /// Whether (`client`, `file`, `at`) is new; it becomes the last one.
    fn is_new(&self, client: IpAddr, file: &Arc<str>, at: u64) -> bool {
        use crate::runtime::sync::LockExt as _;
        let mut last = self.0.locked();
        if let Some((c, f, t)) = last.as_ref()
            && *c == client
            && *t == at
            && f == file
        {
            return false;
        }
        *last = Some((client, file.clone(), at));
        true
    }
}

/// Who fetched which ignition config (for the log line).
#[derive(Clone, Copy)]
struct Served<'a> {
    file: &'a str,
    client: IpAddr,
    /// The node at the client's address.
    node: Option<&'a str>,
}

/// One ignition request being answered: what every record of it names.
struct Asked<'a> {
    cluster: &'a Cluster,
    client: IpAddr,
    /// The node at the client's address.
    node: Option<String>,
    /// The file name asked for, sanitised.
    file: Arc<str>,
}

/// The file name of an ignition request (`master-0.ign`), sanitised, or
/// `None` for a path that is not one plain file name.
fn ignition_file(name: &str) -> Option<Arc<str>> {
    match path::plain_name(name) {
        // The usual `master-0.ign`: nothing to decode or resolve.
        Some(n) => Some(n.into()),
        None => match path::sanitize(name) {
            Ok(p) if p.components().count() == 1 => Some(p.to_string_lossy().into()),
            _ => None,
        },
    }
}

impl Ctx {
    pub(super) async fn serve_ignition(
        &self,
        req: &Request<Incoming>,
        plan: &Plan,
        peer: SocketAddr,
        name: &str,
    ) -> Resp {
        let c = &plan.cluster;
        let client = peer.ip();
        let Some(file) = ignition_file(name) else {
            debug!("http: refused ignition path {:?}", req.uri().path());
            return plain(StatusCode::BAD_REQUEST, "bad path");
        };
        let asked = Asked {
            cluster: c,
            client,
            node: ignition::node_by_ip(c, client).map(|n| n.name.clone()),
            file,
        };
        let record = |status, detail, bytes| self.record_fetch(&asked, status, detail, bytes);
        let file = &asked.file;
        let target = ignition::target(c, file);
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
        let day2 = self.day2.worker_body(c, &target, file).await;
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
            file,
            client,
            node: asked.node.as_deref(),
        };
        self.ignition_response(req, ign, &served, record)
    }

    /// Note one answer to an ignition request in [`super::stats::Stats`];
    /// a 200 to a node also marks its network boot and the install timeline.
    fn record_fetch(&self, asked: &Asked<'_>, status: StatusCode, detail: Arc<str>, bytes: u64) {
        let Asked {
            cluster: c,
            client,
            node,
            file,
        } = asked;
        // Network boot: the node itself fetched its ignition (the
        // installer did), so its next network boot boots the disk.
        if status == StatusCode::OK
            && c.rhcos.is_some()
            && let Some(n) = node
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
        let at = time
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if status == StatusCode::OK && self.ign_told.is_new(*client, file, at) {
            // The timeline's ignition step, at the fetch's own time.
            self.events.record(crate::timeline::Event::Ignition {
                node: node.clone(),
                client: client.to_string(),
                file: file.to_string(),
                at,
            });
        }
        self.stats.ignition(Fetch {
            time,
            client: *client,
            node: node.clone(),
            file: file.clone(),
            status: status.as_u16(),
            detail,
            bytes,
        });
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a repeat of the last fetch (same client, file and second) is
    /// not told again; any difference is.
    #[test]
    fn a_repeat_of_the_last_fetch_is_told_once() {
        let told = LastTold::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let (m, w): (Arc<str>, Arc<str>) = ("master.ign".into(), "worker.ign".into());
        assert!(told.is_new(a, &m, 100));
        assert!(!told.is_new(a, &m, 100));
        assert!(told.is_new(a, &m, 101));
        assert!(told.is_new(b, &m, 101));
        assert!(told.is_new(b, &w, 101));
        assert!(!told.is_new(b, &w, 101));
        assert!(told.is_new(a, &m, 101));
    }
}
