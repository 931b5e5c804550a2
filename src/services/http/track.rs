//! Completed downloads, for the install timeline and the network-boot
//! install state (the live rootfs, a node's install image): a response
//! body wrapper that counts the bytes hyper takes and reports once, when
//! the whole `Content-Length` has been sent, with the time it took.
//!
//! Invariant: a download cut short (client gone, error) is never reported;
//! the report happens at most once per response.

use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Frame, SizeHint};
use hyper::header;

use super::{Body, Resp};
use crate::timeline::Events;

/// Whether `path` names a live rootfs image.
pub(super) fn is_rootfs(path: &str) -> bool {
    path.ends_with("rootfs.img")
}

struct Tracked {
    inner: Body,
    sent: u64,
    expected: u64,
    start: Instant,
    report: Option<Report>,
}

/// What runs once a download completed: (bytes sent, time taken).
pub(super) type Report = Box<dyn FnOnce(u64, std::time::Duration) + Send>;

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &r
            && let Some(d) = f.data_ref()
        {
            this.sent += d.len() as u64;
        }
        if this.sent >= this.expected
            && let Some(report) = this.report.take()
        {
            report(this.sent, this.start.elapsed());
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Wrap a 200 answer with a body so its completion is reported.
pub(super) fn rootfs(r: Resp, client: IpAddr, events: Events) -> Resp {
    on_complete(
        r,
        Box::new(move |bytes, took| events.rootfs(client, bytes, took)),
    )
}

/// Wrap a 200 answer with a body so that `report` runs once the whole body
/// was sent (never for a download cut short).
pub(super) fn on_complete(r: Resp, report: Report) -> Resp {
    let expected = r
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let Some(expected) = expected else {
        return r;
    };
    let (parts, inner) = r.into_parts();
    let body = Tracked {
        inner,
        sent: 0,
        expected,
        start: Instant::now(),
        report: Some(report),
    };
    hyper::Response::from_parts(parts, body.boxed_unsync())
}
