//! The socket side of proxyDHCP (`dhcp.mode: proxy`, decisions in
//! [`super::proxy`]): one datagram on the DHCP port, within the main
//! socket loop's batch, and the loop of the PXE boot server port (4011).
//!
//! Invariants: a proxy never touches the lease table or the lease file
//! (its replies need nothing on disk); a bad datagram is counted and
//! dropped, never ends a loop; a PXE client that is not in the inventory
//! is logged at warn at most once per interval (the service's limiter), with the
//! count of the rest, else at debug.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::runtime::datagram::{Datagrams, Gate};

use super::proxy::{self, Port};
use super::reply::{self, Config, Dest};
use super::status::Counters;
use super::{Dhcp, Pending, Processed, decode_counted, warn_client};

/// Decode and decide one datagram in proxy mode, received on `port`.
/// Never panics on input.
pub(super) fn process(
    cfg: &Config,
    counters: &Counters,
    data: &[u8],
    src: SocketAddr,
    port: Port,
) -> Processed {
    let none = Processed {
        reply: None,
        durability: reply::Durability::None,
        bound: None,
    };
    let Some((msg, kind, mac)) = decode_counted(&cfg.log, counters, data, src) else {
        return none;
    };
    let src4 = match src {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
    };
    let d = proxy::handle(cfg, &msg, port, src4);
    let Some(r) = d.reply else {
        counters.ignored.fetch_add(1, Ordering::Relaxed);
        if d.unknown_client {
            warn_client(
                &cfg.log,
                "unknown network boot client",
                src,
                Some(&mac),
                || format!("{kind:?} ignored (proxy mode): {}", d.note),
            );
        } else {
            debug!(%src, %mac, "dhcp proxy {kind:?}: no reply: {}", d.note);
        }
        return none;
    };
    info!(%src, %mac, "dhcp {kind:?} ({port:?} port): {}", d.note);
    let to = match r.dest {
        Dest::Unicast(a) => SocketAddr::V4(a),
        // Only unicast or broadcast from a proxy.
        Dest::Broadcast | Dest::Link { .. } => {
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::BROADCAST, cfg.client_port))
        }
    };
    Processed {
        reply: Some(Pending {
            bytes: reply::encode(&r, &msg),
            to,
            link: None,
            kind: r.kind,
        }),
        durability: reply::Durability::None,
        bound: None,
    }
}

/// Serve the PXE boot server port until `shutdown`: every reply goes out
/// of this socket (clients accept the ACK only from port 4011).
pub(super) async fn serve_boot_server(
    dhcp: Arc<Dhcp>,
    socket: UdpSocket,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 4096];
    let counters = &dhcp.shared.counters;
    let mut datagrams = Datagrams::new(
        "dhcp boot server",
        dhcp.log.clone(),
        Gate::VipHolder(dhcp.ha.clone()),
    );
    while let Some((n, src)) = datagrams.next(&socket, &mut buf, &shutdown).await? {
        let cfg = dhcp.cfg.load_full();
        if !cfg.proxy {
            continue;
        }
        let data = buf.get(..n).unwrap_or(&[]);
        let on_panic = || {
            counters.malformed.fetch_add(1, Ordering::Relaxed);
        };
        let done = datagrams.guarded(src, n, on_panic, || {
            process(&cfg, counters, data, src, Port::BootServer)
        });
        if let Some(p) = done.and_then(|p| p.reply) {
            match socket.send_to(&p.bytes, p.to).await {
                Ok(_) => counters.tx(p.kind),
                Err(e) => {
                    counters.send_errors.fetch_add(1, Ordering::Relaxed);
                    debug!("dhcp boot server send to {}: {e}", p.to);
                }
            }
        }
    }
    Ok(())
}
