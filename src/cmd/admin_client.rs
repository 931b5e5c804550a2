//! A minimal HTTP/1.1 client for the admin API on loopback (used by `lb ...`)
//! and for the admin service's private health socket (`health`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Send `method path` to the admin listener, with the API token when one is
/// configured; returns (status, body).
pub fn request(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    path: &str,
) -> anyhow::Result<(u16, String)> {
    // A reload may open libvirt and bind sockets before it answers.
    request_within(
        addr,
        token,
        method,
        path,
        Duration::from_secs(3),
        Duration::from_secs(90),
    )
}

/// [`request`] with its own bounds: `connect` for the connection, `read`
/// for each read of the answer (`health` keeps both well under a second).
pub fn request_within(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    path: &str,
    connect: Duration,
    read: Duration,
) -> anyhow::Result<(u16, String)> {
    // A wildcard listener is reached on loopback.
    let addr = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
        }
        _ => addr,
    };
    let s = TcpStream::connect_timeout(&addr, connect).map_err(|e| {
        anyhow::anyhow!("cannot reach the admin API at {addr} (is `serve` running?): {e}")
    })?;
    s.set_read_timeout(Some(read))?;
    s.set_write_timeout(Some(read))?;
    exchange(s, &addr.to_string(), token, method, path)
}

/// `GET path` on the abstract Unix socket `name`, each step bounded by
/// `bound`; (status, body).
pub fn request_abstract(name: &str, path: &str, bound: Duration) -> anyhow::Result<(u16, String)> {
    use std::os::linux::net::SocketAddrExt as _;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let s = std::os::unix::net::UnixStream::connect_addr(&addr).map_err(|e| {
        anyhow::anyhow!("cannot reach the admin API's health socket @{name} (is `serve` running this cluster file?): {e}")
    })?;
    s.set_read_timeout(Some(bound))?;
    s.set_write_timeout(Some(bound))?;
    exchange(s, "localhost", None, "GET", path)
}

/// One request on `s` (closed after the answer); (status, body).
fn exchange(
    mut s: impl Read + Write,
    host: &str,
    token: Option<&str>,
    method: &str,
    path: &str,
) -> anyhow::Result<(u16, String)> {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("malformed response from {host}"))?;
    Ok((status, body.to_string()))
}
