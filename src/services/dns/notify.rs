//! NOTIFY (RFC 1996) to the site's secondaries (`dns.notify`) when a
//! zone's served serial moves (at start and after a reload that changed
//! it), so they copy the zone at once instead of at their next refresh.
//!
//! [`message`] is pure; [`send`] sends one NOTIFY per zone and secondary
//! over UDP from the DNS listen address of the same family (a secondary
//! accepts a NOTIFY only from its primary's address), and retransmits
//! until the secondary answers or [`ATTEMPTS`] are spent (RFC 1996 3.6).
//! Nothing a secondary answers can do more than end its retries.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, Record, RecordType};
use tracing::{debug, info, warn};

/// Sends per zone and secondary before giving up.
pub const ATTEMPTS: u32 = 5;
/// Wait for an answer before the next send.
pub const RETRY_AFTER: Duration = Duration::from_secs(2);

/// The NOTIFY for `zone` (its SOA in the answer section, RFC 1996 3.7).
pub fn message(id: u16, zone: &Name, soa: &Record) -> Option<Vec<u8>> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Notify);
    m.metadata.authoritative = true;
    m.add_query(Query::query(zone.clone(), RecordType::SOA));
    m.answers.push(soa.clone());
    m.to_vec().ok()
}

/// Is `reply` the answer to NOTIFY `id`?
fn acknowledges(reply: &[u8], id: u16) -> bool {
    reply.len() >= 12
        && u16::from_be_bytes([reply[0], reply[1]]) == id
        && reply[2] & 0x80 != 0
        && (reply[2] >> 3) & 0x0f == 4
}

/// The source address for NOTIFYs to `to`: the first listen address of
/// its family that is not a wildcard, else the wildcard.
pub fn source_for(to: SocketAddr, listen: &[SocketAddr]) -> SocketAddr {
    let ip = listen
        .iter()
        .map(SocketAddr::ip)
        .find(|ip| ip.is_ipv4() == to.is_ipv4() && !ip.is_unspecified())
        .unwrap_or(if to.is_ipv4() {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        });
    SocketAddr::new(ip, 0)
}

/// Notify `to` of `zone` (its SOA `soa`) from `from`; true when it answered.
pub async fn send(
    zone: Name,
    soa: Record,
    to: SocketAddr,
    from: SocketAddr,
    bind: crate::runtime::bind::BindOptions,
) -> bool {
    let sock = match bind.udp(from) {
        Ok(s) => s,
        Err(e) => {
            warn!("dns: NOTIFY {zone} to {to}: cannot bind {from}: {e}");
            return false;
        }
    };
    let id: u16 = rand_id();
    let Some(msg) = message(id, &zone, &soa) else {
        return false;
    };
    let mut buf = vec![0u8; 512];
    for attempt in 1..=ATTEMPTS {
        if let Err(e) = sock.send_to(&msg, to).await {
            debug!("dns: NOTIFY {zone} to {to}: {e}");
        }
        let deadline = tokio::time::Instant::now() + RETRY_AFTER;
        loop {
            match tokio::time::timeout_at(deadline, sock.recv_from(&mut buf)).await {
                Ok(Ok((n, peer))) if peer == to && acknowledges(&buf[..n], id) => {
                    info!("dns: NOTIFY {zone} acknowledged by {to}");
                    return true;
                }
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => {
                    debug!("dns: NOTIFY {zone} to {to} (attempt {attempt}): {e}");
                    tokio::time::sleep_until(deadline).await;
                    break;
                }
                Err(_) => break,
            }
        }
    }
    warn!("dns: NOTIFY {zone} to {to}: no answer after {ATTEMPTS} attempts");
    false
}

/// A message ID a blind attacker cannot guess.
fn rand_id() -> u16 {
    let mut b = [0u8; 2];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b).is_err() {
        return 0x4e4f;
    }
    u16::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::RData;
    use hickory_proto::rr::rdata::SOA;

    #[test]
    fn notify_carries_the_zone_and_its_soa() {
        let z = Name::from_ascii("c.example.com.").unwrap();
        let soa = Record::from_rdata(
            z.clone(),
            30,
            RData::SOA(SOA::new(z.clone(), z.clone(), 77, 3600, 600, 1_209_600, 30)),
        );
        let b = message(9, &z, &soa).unwrap();
        let m = Message::from_vec(&b).unwrap();
        assert_eq!(m.metadata.op_code, OpCode::Notify);
        assert!(m.metadata.authoritative);
        assert_eq!(m.queries[0].name(), &z);
        assert_eq!(m.queries[0].query_type(), RecordType::SOA);
        assert_eq!(m.answers.len(), 1);
        let mut reply = b.clone();
        reply[2] |= 0x80;
        assert!(acknowledges(&reply, 9));
        assert!(!acknowledges(&reply, 10));
        assert!(!acknowledges(&b, 9));
    }

    #[test]
    fn source_is_the_listen_address_of_the_family() {
        let to: SocketAddr = "10.0.0.5:53".parse().unwrap();
        let listen: Vec<SocketAddr> = vec![
            "[fd00::2]:53".parse().unwrap(),
            "10.0.0.2:53".parse().unwrap(),
        ];
        assert_eq!(source_for(to, &listen), "10.0.0.2:0".parse().unwrap());
        let to6: SocketAddr = "[fd00::5]:53".parse().unwrap();
        assert_eq!(source_for(to6, &listen), "[fd00::2]:0".parse().unwrap());
        assert_eq!(
            source_for(to, &["0.0.0.0:53".parse().unwrap()]),
            "0.0.0.0:0".parse().unwrap()
        );
    }
}
