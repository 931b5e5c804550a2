//! The exchange's client side: one authenticated `POST /api/ha/state` to
//! the peer, blocking, within one total [`DEADLINE`] (a dripping peer is
//! cut), the answer bounded by the document limit and used only once its
//! MAC verifies and binds it to our request's nonce.
//!
//! A few lines of HTTP/1.1 on a `spawn_blocking` thread, like the CLI's
//! admin client: one small request to a known peer, no pooling or TLS, not
//! worth an HTTP client stack.

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::error::SyncError;
use super::{DEADLINE, PATH};
use crate::runtime::clock::unix_now;
use crate::runtime::haauth::{self, PairKey, Role, Stamp};

/// Connect bound of one exchange.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Time left until `deadline`, or the error of an exchange cut by it.
fn left(deadline: Instant) -> Result<Duration, SyncError> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or(SyncError::Deadline)
}

/// At most 200 characters of a peer's error text, control characters
/// replaced.
fn printable(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_string()
}

/// One exchange with the peer (blocking): our document out, theirs back,
/// within [`DEADLINE`]; the answer's body once authenticated.
pub(super) fn post(
    peer: SocketAddr,
    key: &PairKey,
    me: Ipv4Addr,
    body: &[u8],
    limit: usize,
) -> Result<Vec<u8>, SyncError> {
    let deadline = Instant::now() + DEADLINE;
    let IpAddr::V4(peer_ip) = peer.ip() else {
        return Err(SyncError::PeerNotIpv4);
    };
    let stamp = Stamp::new(me, unix_now());
    let role = Role::Request {
        method: "POST",
        path: PATH,
    };
    let mut head = format!(
        "POST {PATH} HTTP/1.1\r\nHost: {peer}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in haauth::sign(key, role, &stamp, body) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut s = TcpStream::connect_timeout(&peer, CONNECT_TIMEOUT.min(left(deadline)?))
        .map_err(SyncError::Connect)?;
    s.set_write_timeout(Some(left(deadline)?))
        .and_then(|()| s.write_all(head.as_bytes()))
        .and_then(|()| s.write_all(body))
        .map_err(SyncError::Send)?;
    let buf = receive(&mut s, deadline, limit)?;
    let (status, headers, answer) = parse_answer(&buf)?;
    match status {
        200 => {}
        401 => {
            return Err(SyncError::Unauthorized {
                body: printable(answer),
            });
        }
        status => {
            return Err(SyncError::Refused {
                status,
                body: printable(answer),
            });
        }
    }
    let header = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let role = Role::Answer {
        status,
        request: &stamp.nonce,
    };
    haauth::verify(key, role, &header, answer, peer_ip, unix_now())
        .map_err(SyncError::Unauthenticated)?;
    Ok(answer.to_vec())
}

/// The whole answer from `s` until the peer closes, by `deadline`, at
/// most a `limit`-byte document plus room for the head.
fn receive(s: &mut TcpStream, deadline: Instant, limit: usize) -> Result<Vec<u8>, SyncError> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        s.set_read_timeout(Some(left(deadline)?))
            .map_err(SyncError::Receive)?;
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                left(deadline)?;
                continue;
            }
            Err(e) => return Err(SyncError::Receive(e)),
        };
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > limit + 16 * 1024 {
            return Err(SyncError::AnswerTooLarge { limit });
        }
    }
}

/// An answer's headers: lower-case name, value.
type Headers = Vec<(String, String)>;

/// An HTTP/1.1 answer's status, headers and body (cut to its
/// `Content-Length`).
fn parse_answer(buf: &[u8]) -> Result<(u16, Headers, &[u8]), SyncError> {
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or(SyncError::MalformedAnswer)?;
    let head = std::str::from_utf8(&buf[..split]).map_err(|_| SyncError::MalformedAnswer)?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or(SyncError::MalformedAnswer)?;
    let headers: Headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = &buf[split + 4..];
    if let Some(len) = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        if body.len() < len {
            return Err(SyncError::AnswerEndedEarly);
        }
        body = &body[..len];
    }
    Ok((status, headers, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_cut_to_its_length_and_headers_are_read() {
        let (st, h, body) = parse_answer(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Crc-Ha-Time: 5\r\n\r\n{}garbage",
        )
        .unwrap();
        assert_eq!((st, body), (200, &b"{}"[..]));
        assert!(h.contains(&("x-crc-ha-time".to_string(), "5".to_string())));
        assert!(matches!(
            parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}"),
            Err(SyncError::AnswerEndedEarly)
        ));
        assert!(matches!(
            parse_answer(b"HTTP/1.1 OK\r\n\r\n{}"),
            Err(SyncError::MalformedAnswer)
        ));
        assert!(matches!(
            parse_answer(b"HTTP/1.1 200 OK\r\n"),
            Err(SyncError::MalformedAnswer)
        ));
    }

    #[test]
    fn a_peers_text_is_bounded_and_printable() {
        assert_eq!(printable(b" a\x1b[2Jb\n "), "a [2Jb");
        assert_eq!(printable(&[b'x'; 500]).len(), 200);
    }
}
