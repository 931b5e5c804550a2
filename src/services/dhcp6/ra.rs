//! Router advertisements (RFC 4861 §6.2) when
//! `network.ipv6.routerAdvertisements` is on: M=1 and O=1 (addresses and
//! other configuration from DHCPv6), the cluster prefix with L=1 and A=0
//! (on-link, no SLAAC), router lifetime 0 (the appliance is no default
//! router; the gateway advertises itself), the interface's link-layer
//! address.
//!
//! The packet is built and Router Solicitations are recognised with
//! smoltcp's `wire` types (no hand-written ICMPv6). It is sent on a raw
//! ICMPv6 socket bound to `network.interface` (hop limit 255, as receivers
//! require; the kernel fills in the checksum for ICMPv6 raw sockets) to
//! `ff02::1`: unsolicited every [`MIN_INTERVAL`]–[`MAX_INTERVAL`] s (the
//! first [`INITIAL_COUNT`] every [`INITIAL_INTERVAL`] s), and in answer to
//! a Router Solicitation (joined `ff02::2`), multicast, at most one per
//! [`MIN_DELAY`] (§6.2.6).
//!
//! Invariants: a received packet that is not a valid Router Solicitation
//! is ignored; a send error is counted and logged (rate-limited), never
//! ends the loop.

use std::net::{Ipv6Addr, SocketAddrV6};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    Icmpv6Message, Icmpv6Packet, Icmpv6Repr, NdiscPrefixInfoFlags, NdiscPrefixInformation,
    NdiscRepr, NdiscRouterFlags, RawHardwareAddress,
};
use socket2::{Domain, Protocol, Socket, Type};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::model::cluster::MacAddr;
use crate::runtime::lograte::LogRate;

/// MaxRtrAdvInterval / MinRtrAdvInterval (§6.2.1 defaults: 600 s, ⅓ of it).
pub const MAX_INTERVAL: Duration = Duration::from_secs(600);
pub const MIN_INTERVAL: Duration = Duration::from_secs(200);
/// MAX_INITIAL_RTR_ADVERTISEMENTS / _INTERVAL (§10).
pub const INITIAL_COUNT: u32 = 3;
pub const INITIAL_INTERVAL: Duration = Duration::from_secs(16);
/// MIN_DELAY_BETWEEN_RAS (§10).
pub const MIN_DELAY: Duration = Duration::from_secs(3);
/// The prefix's valid and preferred lifetimes (§6.2.1 defaults).
const VALID_LIFETIME: u64 = 2_592_000;
const PREFERRED_LIFETIME: u64 = 604_800;

/// What an advertisement says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RaCfg {
    pub interface: String,
    pub prefix: Ipv6Addr,
    pub prefix_len: u8,
    /// The interface's MAC (source link-layer address option).
    pub mac: Option<MacAddr>,
}

/// The Router Advertisement (ICMPv6 message, no IP header).
pub fn build(cfg: &RaCfg) -> Vec<u8> {
    let repr = Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
        hop_limit: 64,
        flags: NdiscRouterFlags::MANAGED | NdiscRouterFlags::OTHER,
        router_lifetime: smoltcp::time::Duration::from_secs(0),
        reachable_time: smoltcp::time::Duration::from_millis(0),
        retrans_time: smoltcp::time::Duration::from_millis(0),
        lladdr: cfg.mac.map(|m| RawHardwareAddress::from_bytes(&m.0)),
        mtu: None,
        prefix_info: Some(NdiscPrefixInformation {
            prefix_len: cfg.prefix_len,
            flags: NdiscPrefixInfoFlags::ON_LINK,
            valid_lifetime: smoltcp::time::Duration::from_secs(VALID_LIFETIME),
            preferred_lifetime: smoltcp::time::Duration::from_secs(PREFERRED_LIFETIME),
            prefix: cfg.prefix,
        }),
    });
    let mut buf = vec![0u8; repr.buffer_len()];
    // The addresses only feed the checksum, which the kernel computes for
    // ICMPv6 raw sockets (RFC 3542 §3.1): skipped here.
    repr.emit(
        &Ipv6Addr::UNSPECIFIED,
        &Ipv6Addr::UNSPECIFIED,
        &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
        &ChecksumCapabilities::ignored(),
    );
    buf
}

/// Is `data` (an ICMPv6 message) a Router Solicitation?
pub fn is_solicitation(data: &[u8]) -> bool {
    Icmpv6Packet::new_checked(data)
        .is_ok_and(|p| p.msg_type() == Icmpv6Message::RouterSolicit && p.msg_code() == 0)
}

/// Counters for `/status` and metrics.
#[derive(Default)]
pub struct RaCounters {
    pub sent: AtomicU64,
    pub solicitations: AtomicU64,
    pub send_errors: AtomicU64,
}

/// The interface's index and MAC, asked of the kernel (getifaddrs: a
/// netlink dump in the calling thread's network namespace, unlike
/// `/sys/class/net`, which shows the namespace that mounted sysfs).
pub fn interface_info(name: &str) -> anyhow::Result<(u32, Option<MacAddr>)> {
    let link = nix::ifaddrs::getifaddrs()
        .context("listing the network interfaces")?
        .filter(|i| i.interface_name == name)
        .find_map(|i| i.address.as_ref()?.as_link_addr().copied())
        .with_context(|| format!("interface {name} not found"))?;
    let index =
        u32::try_from(link.ifindex()).with_context(|| format!("interface {name}: bad ifindex"))?;
    let mac = link.addr().map(MacAddr).filter(|m| m.0 != [0; 6]);
    Ok((index, mac))
}

/// The raw ICMPv6 socket on `interface`, joined to all-routers. Blocking
/// with a short read timeout: a thread of its own receives (tokio has no
/// raw sockets, and `AsyncFd` registration is `unsafe`, which the library
/// forbids).
pub fn open(interface: &str, index: u32) -> anyhow::Result<Socket> {
    let s = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))
        .context("creating the ICMPv6 raw socket (needs CAP_NET_RAW)")?;
    s.bind_device(Some(interface.as_bytes()))
        .with_context(|| format!("binding the RA socket to {interface}"))?;
    s.set_multicast_hops_v6(255)?;
    s.set_unicast_hops_v6(255)?;
    s.set_multicast_loop_v6(false)?;
    s.join_multicast_v6(&Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2), index)
        .context("joining ff02::2")?;
    s.set_read_timeout(Some(RECV_POLL))?;
    Ok(s)
}

/// How often the receiving thread looks at its stop flag.
const RECV_POLL: Duration = Duration::from_millis(250);

/// Receive on `sock` until `stop`; one message on `tx` per Router
/// Solicitation.
fn receive(sock: Arc<Socket>, tx: tokio::sync::mpsc::Sender<()>, stop: CancellationToken) {
    let mut buf = vec![0u8; 1500];
    while !stop.is_cancelled() {
        match std::io::Read::read(&mut &*sock, &mut buf) {
            Ok(n) if is_solicitation(&buf[..n]) => {
                // Full: an answer is already due.
                let _ = tx.try_send(());
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                debug!("dhcp6 ra recv: {e}");
                std::thread::sleep(RECV_POLL);
            }
        }
    }
}

/// A pseudo-random duration in `[lo, hi]` (jitter only: the clock's
/// nanoseconds are enough).
fn jitter(lo: Duration, hi: Duration) -> Duration {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos()))
        .unwrap_or(0);
    let span = hi.saturating_sub(lo).as_millis().max(1) as u64;
    lo + Duration::from_millis(n % span)
}

/// Advertise on `sock` until `shutdown`, counting in `counters` and
/// warning about send errors at most as often as `warnings` allows.
pub async fn run(
    sock: Arc<Socket>,
    cfg: RaCfg,
    index: u32,
    counters: Arc<RaCounters>,
    warnings: Arc<LogRate>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let packet = build(&cfg);
    let to = socket2::SockAddr::from(SocketAddrV6::new(
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
        0,
        0,
        index,
    ));
    info!(
        "sending router advertisements on {} (M=1 O=1, prefix {}/{} L=1 A=0)",
        cfg.interface, cfg.prefix, cfg.prefix_len
    );
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let stop = shutdown.child_token();
    let _stop_guard = stop.clone().drop_guard();
    let (s2, st2) = (sock.clone(), stop.clone());
    let log = tracing::dispatcher::get_default(Clone::clone);
    std::thread::Builder::new()
        .name("dhcp6-ra-recv".into())
        .spawn(move || tracing::dispatcher::with_default(&log, || receive(s2, tx, st2)))
        .context("starting the RA receiver thread")?;
    let send = || match sock.send_to(&packet, &to) {
        Ok(_) => {
            counters.sent.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            counters.send_errors.fetch_add(1, Ordering::Relaxed);
            match warnings.check("send error", None) {
                Some(tail) => warn!(
                    "dhcp6: sending a router advertisement on {}: {e}{tail}",
                    cfg.interface
                ),
                None => debug!("dhcp6 ra send: {e}"),
            }
        }
    };
    let mut initial = 0u32;
    let mut last = tokio::time::Instant::now();
    send();
    let mut next = last + INITIAL_INTERVAL;
    let mut answer_at: Option<tokio::time::Instant> = None;
    loop {
        let wake = answer_at.map_or(next, |a| a.min(next));
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep_until(wake) => {
                let now = tokio::time::Instant::now();
                send();
                last = now;
                answer_at = None;
                initial += 1;
                next = now + if initial < INITIAL_COUNT {
                    INITIAL_INTERVAL
                } else {
                    jitter(MIN_INTERVAL, MAX_INTERVAL)
                };
            }
            got = rx.recv() => {
                if got.is_none() {
                    anyhow::bail!("the RA receiver thread ended");
                }
                counters.solicitations.fetch_add(1, Ordering::Relaxed);
                // §6.2.6: a multicast answer at most every MIN_DELAY, after
                // a short random delay.
                let soon = tokio::time::Instant::now()
                    + jitter(Duration::ZERO, Duration::from_millis(200));
                let at = soon.max(last + MIN_DELAY);
                answer_at = Some(answer_at.map_or(at, |a| a.min(at)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_info_asks_the_kernel_of_this_threads_namespace() {
        // `lo` exists in every network namespace, without a MAC.
        let (index, mac) = interface_info("lo").unwrap();
        assert!(index >= 1);
        assert_eq!(mac, None);
        let err = interface_info("no-such-if0").unwrap_err();
        assert!(err.to_string().contains("no-such-if0 not found"), "{err}");
    }

    #[test]
    fn the_advertisement_says_managed_other_and_on_link_without_slaac() {
        let cfg = RaCfg {
            interface: "x".into(),
            prefix: "fd00:10::".parse().unwrap(),
            prefix_len: 64,
            mac: Some(MacAddr([2, 0, 0, 0, 0, 1])),
        };
        let b = build(&cfg);
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.msg_type(), Icmpv6Message::RouterAdvert);
        let NdiscRepr::RouterAdvert {
            flags,
            router_lifetime,
            lladdr,
            prefix_info,
            ..
        } = NdiscRepr::parse(&p).unwrap()
        else {
            panic!("not an RA")
        };
        assert_eq!(flags, NdiscRouterFlags::MANAGED | NdiscRouterFlags::OTHER);
        assert_eq!(router_lifetime.secs(), 0);
        assert_eq!(
            lladdr,
            Some(RawHardwareAddress::from_bytes(&[2, 0, 0, 0, 0, 1]))
        );
        let pi = prefix_info.unwrap();
        assert_eq!(pi.flags, NdiscPrefixInfoFlags::ON_LINK, "A must be 0");
        assert_eq!((pi.prefix, pi.prefix_len), (cfg.prefix, 64));
        // Raw bytes: M and O bits of the flags octet.
        assert_eq!(b[5], 0xc0);
        assert!(!is_solicitation(&b));
        assert!(is_solicitation(&[133, 0, 0, 0, 0, 0, 0, 0]));
        assert!(!is_solicitation(&[133, 1, 0, 0, 0, 0, 0, 0]));
        assert!(!is_solicitation(&[133]));
    }
}
