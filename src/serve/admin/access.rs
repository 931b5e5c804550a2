//! Who may use the admin API: the pure checks run on every request before
//! it is routed (no sockets; unit-tested).
//!
//! - **Host** (DNS rebinding): the `Host` header (or the HTTP/2 authority)
//!   must be an IP literal or `localhost`, with an optional port. A browser
//!   that reached the listener through a name it resolved (`evil.example`
//!   rebinding to 127.0.0.1) sends that name and is refused. Browsers always
//!   send one; a request without any (an HTTP/1.0 tool) is not a browser's.
//! - **Cross-site requests**: a state-changing request (anything but GET and
//!   HEAD) with an `Origin` whose host differs from `Host`, or with
//!   `Sec-Fetch-Site` other than `same-origin`/`none`, is refused — a page on
//!   another site cannot drive the API through the operator's browser.
//! - **Token**: with `admin.tokenFile`, state-changing requests must carry
//!   `Authorization: Bearer <token>` (compared in constant time). Required
//!   by validation whenever `admin.listen` is not a loopback address, like
//!   HAProxy's runtime API is kept off the network. Reads (`/status`,
//!   `/metrics`, the page) stay open unless `admin.allowFrom` is set:
//!   Prometheus scrapes them.
//! - **Source** ([`Sources`], checked at accept, before any byte is read):
//!   with `admin.allowFrom`, a connection is answered only from loopback,
//!   this host (its source is the address it reached), `ha.peer` or a
//!   listed network; any other is closed at once. `POST /api/ha/state` is
//!   refused (403) from any address but `ha.peer`'s, whatever the list.

use std::net::IpAddr;

use hyper::header::{AUTHORIZATION, HOST, HeaderMap, ORIGIN};
use hyper::{Method, StatusCode};

use crate::model::sourcenet::{SourceNet, canonical};

/// Which sources the listener answers (`admin.allowFrom`, `ha.peer`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// `None`: every source.
    pub allow_from: Option<Vec<SourceNet>>,
    /// The HA peer's address (`ha.peer`), without `ha:` none.
    pub ha_peer: Option<IpAddr>,
}

impl Sources {
    /// Whether a connection from `peer` that reached `local` is answered.
    pub fn admits(&self, peer: IpAddr, local: Option<IpAddr>) -> bool {
        let Some(nets) = &self.allow_from else {
            return true;
        };
        let ip = canonical(peer);
        ip.is_loopback()
            || local.map(canonical) == Some(ip)
            || self.is_ha_peer(ip)
            || nets.iter().any(|n| n.contains(ip))
    }

    /// Whether `peer` is `ha.peer` (the only source of `/api/ha/state`).
    pub fn is_ha_peer(&self, peer: IpAddr) -> bool {
        self.ha_peer
            .is_some_and(|p| canonical(p) == canonical(peer))
    }
}

/// Why a request is refused: the status and a message for the JSON body.
pub type Refusal = (StatusCode, &'static str);

/// Check one request. `authority` is the request URI's authority (HTTP/2),
/// used when there is no `Host` header.
pub fn check(
    method: &Method,
    headers: &HeaderMap,
    authority: Option<&str>,
    token: Option<&str>,
) -> Result<(), Refusal> {
    let host = match headers.get(HOST) {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| (StatusCode::BAD_REQUEST, "Host header is not text"))?,
        ),
        None => authority,
    };
    if let Some(host) = host
        && !host_is_literal(host)
    {
        return Err((
            StatusCode::FORBIDDEN,
            "Host must be an IP address or localhost (DNS rebinding protection)",
        ));
    }
    if method == Method::GET || method == Method::HEAD {
        return Ok(());
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let same = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://").map(|(_, rest)| rest))
            .zip(host)
            .is_some_and(|(o, h)| o.trim_end_matches('/').eq_ignore_ascii_case(h));
        if !same {
            return Err((StatusCode::FORBIDDEN, "cross-origin request refused"));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && site != "same-origin"
        && site != "none"
    {
        return Err((StatusCode::FORBIDDEN, "cross-site request refused"));
    }
    if let Some(want) = token {
        let got = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(got.trim().as_bytes(), want.as_bytes()) {
            return Err((
                StatusCode::UNAUTHORIZED,
                "a valid admin token is required (Authorization: Bearer, see admin.tokenFile)",
            ));
        }
    }
    Ok(())
}

/// `127.0.0.1`, `127.0.0.1:9180`, `[::1]:9180`, `::1`, `localhost:9180`.
fn host_is_literal(host: &str) -> bool {
    let h = host.trim();
    if let Some(rest) = h.strip_prefix('[') {
        return rest
            .split_once(']')
            .is_some_and(|(ip, port)| ip.parse::<std::net::Ipv6Addr>().is_ok() && port_ok(port));
    }
    if h.parse::<std::net::Ipv6Addr>().is_ok() {
        return true;
    }
    let (name, port) = match h.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (h, None),
    };
    let port_fine = port.is_none_or(|p| port_ok(&format!(":{p}")));
    port_fine
        && (name.parse::<std::net::Ipv4Addr>().is_ok() || name.eq_ignore_ascii_case("localhost"))
}

fn port_ok(s: &str) -> bool {
    s.is_empty()
        || s.strip_prefix(':')
            .is_some_and(|p| p.parse::<u16>().is_ok())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn sources_without_a_list_admit_everyone() {
        let open = Sources {
            allow_from: None,
            ha_peer: Some(ip("10.0.0.12")),
        };
        assert!(open.admits(ip("192.0.2.1"), Some(ip("10.0.0.11"))));
        assert!(open.is_ha_peer(ip("::ffff:10.0.0.12")));
        assert!(!open.is_ha_peer(ip("10.0.0.13")));
        assert!(!Sources::default().is_ha_peer(ip("10.0.0.12")));
    }

    #[test]
    fn sources_with_a_list_admit_loopback_this_host_the_peer_and_the_list() {
        let s = Sources {
            allow_from: Some(vec![
                "10.0.5.0/24".parse().unwrap(),
                "fd00:5::/64".parse().unwrap(),
            ]),
            ha_peer: Some(ip("10.0.0.12")),
        };
        let local = Some(ip("10.0.0.11"));
        for ok in [
            "127.0.0.1",
            "127.0.0.5",
            "::1",
            "10.0.0.11",
            "::ffff:10.0.0.11",
            "10.0.0.12",
            "10.0.5.200",
            "::ffff:10.0.5.1",
            "fd00:5::9",
        ] {
            assert!(s.admits(ip(ok), local), "{ok}");
        }
        for refused in ["10.0.0.13", "10.0.6.1", "fd00:6::1", "192.0.2.1"] {
            assert!(!s.admits(ip(refused), local), "{refused}");
        }
        // An empty list: loopback, this host and the peer only.
        let empty = Sources {
            allow_from: Some(Vec::new()),
            ha_peer: None,
        };
        assert!(empty.admits(ip("127.0.0.1"), local));
        assert!(!empty.admits(ip("10.0.0.12"), local));
        assert!(!empty.admits(ip("10.0.5.200"), None));
    }

    #[test]
    fn hosts() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:9180",
            "[::1]:9180",
            "::1",
            "localhost:9180",
            "10.0.0.1:1",
        ] {
            assert!(host_is_literal(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:9180",
            "127.0.0.1.nip.io",
            "[::1",
            "127.0.0.1:x",
            "",
        ] {
            assert!(!host_is_literal(bad), "{bad}");
        }
    }

    #[test]
    fn reads_need_a_literal_host_only() {
        let h = headers(&[("host", "127.0.0.1:9180")]);
        assert_eq!(
            check(&Method::GET, &h, None, Some("t0k3n-t0k3n-t0k3n")),
            Ok(())
        );
        let h = headers(&[("host", "evil.example:9180")]);
        assert_eq!(
            check(&Method::GET, &h, None, None).unwrap_err().0,
            StatusCode::FORBIDDEN
        );
        // No Host at all (HTTP/1.0 tools): not a browser, allowed.
        assert_eq!(check(&Method::GET, &HeaderMap::new(), None, None), Ok(()));
        assert_eq!(
            check(&Method::GET, &HeaderMap::new(), Some("evil.example"), None)
                .unwrap_err()
                .0,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            check(&Method::GET, &HeaderMap::new(), Some("127.0.0.1:1"), None),
            Ok(())
        );
    }

    #[test]
    fn state_changes_refuse_cross_origin_and_need_the_token() {
        let post = Method::POST;
        let same = headers(&[
            ("host", "127.0.0.1:9180"),
            ("origin", "http://127.0.0.1:9180"),
        ]);
        assert_eq!(check(&post, &same, None, None), Ok(()));
        let cross = headers(&[
            ("host", "127.0.0.1:9180"),
            ("origin", "http://evil.example"),
        ]);
        assert_eq!(
            check(&post, &cross, None, None).unwrap_err().0,
            StatusCode::FORBIDDEN
        );
        let site = headers(&[("host", "127.0.0.1:9180"), ("sec-fetch-site", "cross-site")]);
        assert_eq!(
            check(&post, &site, None, None).unwrap_err().0,
            StatusCode::FORBIDDEN
        );
        let token = Some("0123456789abcdef");
        let none = headers(&[("host", "127.0.0.1:9180")]);
        assert_eq!(
            check(&post, &none, None, token).unwrap_err().0,
            StatusCode::UNAUTHORIZED
        );
        let wrong = headers(&[
            ("host", "127.0.0.1:9180"),
            ("authorization", "Bearer 0123456789abcdeX"),
        ]);
        assert_eq!(
            check(&post, &wrong, None, token).unwrap_err().0,
            StatusCode::UNAUTHORIZED
        );
        let right = headers(&[
            ("host", "127.0.0.1:9180"),
            ("authorization", "Bearer 0123456789abcdef"),
        ]);
        assert_eq!(check(&post, &right, None, token), Ok(()));
    }
}
