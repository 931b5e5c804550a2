//! The pure decision: one request datagram → a reply or a reason to drop
//! it, from the host clock's state, the times, and the rate limiter's
//! verdict. No sockets, no clock reads.
//!
//! Invariants:
//! - Only client-mode requests (mode 3) of versions 1 to 4 are answered,
//!   in server mode (4) with the request's version; symmetric, broadcast,
//!   control (6) and private (7) modes are refused (dropped, counted): the
//!   appliance never becomes anyone's peer and never answers the
//!   monlist-style amplification modes.
//! - A reply is the 48-byte header: never longer than the request.
//! - The leap indicator is 3 and the stratum 16 (unsynchronised: clients
//!   do not select the server) unless the host clock is synchronised or
//!   `localStratum` declares it authoritative.
//! - Over the client's rate: a KoD RATE (LI 3, stratum 0, reference id
//!   `RATE`) when the KoD budget allows, otherwise nothing.

use super::packet::{self, HEADER_LEN, Header, Mode, Timestamp};

/// Stratum served for a synchronised host clock without `localStratum`.
/// The host's own upstream stratum is not known to us (adjtimex does not
/// carry it); 3 sits below typical public/pool servers (1–2) so a client
/// that has those prefers them.
pub const SYNCED_STRATUM: u8 = 3;
/// `2^-20 s` ≈ 1 µs: the resolution of the timestamps we read.
pub const PRECISION: i8 = -20;
/// Root dispersion announced under `localStratum` with an unsynchronised
/// host (the kernel's own `maxerror` then says 16 s).
pub const LOCAL_DISPERSION: f64 = 0.010;

/// The host clock as the service sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostClock {
    /// adjtimex: no `STA_UNSYNC`.
    pub synchronised: bool,
    /// adjtimex `maxerror`, seconds.
    pub max_error: f64,
    /// `ntp.localStratum`.
    pub local_stratum: Option<u8>,
}

/// How the host clock is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Serving {
    pub leap: u8,
    pub stratum: u8,
    pub reference_id: [u8; 4],
}

impl HostClock {
    /// Leap indicator, stratum and reference id for replies.
    pub fn serving(&self) -> Serving {
        match (self.local_stratum, self.synchronised) {
            (Some(s), _) => Serving {
                leap: 0,
                stratum: s,
                reference_id: *b"LOCL",
            },
            (None, true) => Serving {
                leap: 0,
                stratum: SYNCED_STRATUM,
                reference_id: *b"LOCL",
            },
            (None, false) => Serving {
                leap: 3,
                stratum: 16,
                reference_id: *b"INIT",
            },
        }
    }

    fn root_dispersion(&self) -> f64 {
        if self.synchronised {
            self.max_error.clamp(0.0, 16.0)
        } else if self.local_stratum.is_some() {
            LOCAL_DISPERSION
        } else {
            16.0
        }
    }
}

/// Why a datagram got no normal reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    /// Shorter than the header.
    Malformed,
    /// Version 0 or 5 to 7.
    BadVersion,
    /// Not client mode (symmetric, server, broadcast, control, private).
    RefusedMode(Mode),
    /// A client request with a zero transmit timestamp: nothing to echo.
    NoTransmit,
    /// Over the client's rate and the KoD budget.
    RateLimited,
}

/// What the rate limiter said about this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Allowed,
    /// Over the rate; a KoD may be sent.
    Kod,
    /// Over the rate and the KoD budget.
    Silent,
}

/// The outcome for one datagram.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// A normal reply, with the client's clock offset estimate (its
    /// transmit timestamp against our receive time, seconds; positive:
    /// the client is behind).
    Reply {
        bytes: [u8; HEADER_LEN],
        offset: f64,
    },
    /// KoD RATE.
    Kod([u8; HEADER_LEN]),
    Drop(Drop),
}

/// The validated request header, or why it is dropped.
pub fn check(datagram: &[u8]) -> Result<Header, Drop> {
    let h = packet::parse(datagram).map_err(|_| Drop::Malformed)?;
    if !(1..=4).contains(&h.version) {
        return Err(Drop::BadVersion);
    }
    if h.mode != Mode::Client {
        return Err(Drop::RefusedMode(h.mode));
    }
    if h.transmit.is_zero() {
        return Err(Drop::NoTransmit);
    }
    Ok(h)
}

/// Answer `req` (already [`check`]ed) received at `recv`, sent at `send`.
pub fn answer(
    req: &Header,
    clock: &HostClock,
    rate: Rate,
    recv: Timestamp,
    send: Timestamp,
) -> Decision {
    let s = clock.serving();
    let mut h = Header {
        leap: s.leap,
        version: req.version,
        mode: Mode::Server,
        stratum: s.stratum,
        poll: req.poll.clamp(4, 17),
        precision: PRECISION,
        root_delay: 0,
        root_dispersion: packet::short(clock.root_dispersion()),
        reference_id: s.reference_id,
        reference: recv,
        origin: req.transmit,
        receive: recv,
        transmit: send,
    };
    match rate {
        Rate::Allowed => Decision::Reply {
            bytes: h.write(),
            offset: recv.diff_secs(req.transmit),
        },
        Rate::Kod => {
            h.leap = 3;
            h.stratum = 0;
            h.reference_id = *b"RATE";
            Decision::Kod(h.write())
        }
        Rate::Silent => Decision::Drop(Drop::RateLimited),
    }
}

/// [`check`] then [`answer`]; the rate verdict is asked only for a valid
/// request (invalid ones cost a client nothing but are not answered).
pub fn decide(
    datagram: &[u8],
    clock: &HostClock,
    rate: impl FnOnce() -> Rate,
    recv: Timestamp,
    send: Timestamp,
) -> Decision {
    match check(datagram) {
        Ok(h) => answer(&h, clock, rate(), recv, send),
        Err(d) => Decision::Drop(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const SYNCED: HostClock = HostClock {
        synchronised: true,
        max_error: 0.002,
        local_stratum: None,
    };
    const UNSYNCED: HostClock = HostClock {
        synchronised: false,
        max_error: 16.0,
        local_stratum: None,
    };

    fn t(secs: u64) -> Timestamp {
        Timestamp::from_unix(Duration::from_secs(1_700_000_000 + secs))
    }

    fn request(first: u8, tx: Timestamp) -> Vec<u8> {
        let mut b = vec![0u8; 48];
        b[0] = first;
        b[2] = 6;
        b[40..48].copy_from_slice(&tx.0.to_be_bytes());
        b
    }

    fn reply(d: Decision) -> Header {
        match d {
            Decision::Reply { bytes, .. } | Decision::Kod(bytes) => packet::parse(&bytes).unwrap(),
            Decision::Drop(d) => panic!("dropped: {d:?}"),
        }
    }

    #[test]
    fn a_synchronised_host_is_served_in_server_mode() {
        let req = request(0x23, t(0));
        let d = decide(&req, &SYNCED, || Rate::Allowed, t(1), t(2));
        let h = reply(d);
        assert_eq!(
            (h.leap, h.version, h.mode, h.stratum),
            (0, 4, Mode::Server, SYNCED_STRATUM)
        );
        assert_eq!(h.origin, t(0));
        assert_eq!((h.receive, h.transmit), (t(1), t(2)));
        assert_eq!(h.poll, 6);
        assert_eq!(h.root_dispersion, packet::short(0.002));
    }

    #[test]
    fn the_version_is_echoed() {
        let h = reply(decide(
            &request(0x1b, t(0)),
            &SYNCED,
            || Rate::Allowed,
            t(0),
            t(0),
        ));
        assert_eq!(h.version, 3);
    }

    #[test]
    fn an_unsynchronised_host_says_so_unless_local_stratum() {
        let h = reply(decide(
            &request(0x23, t(0)),
            &UNSYNCED,
            || Rate::Allowed,
            t(0),
            t(0),
        ));
        assert_eq!((h.leap, h.stratum), (3, 16));
        let local = HostClock {
            local_stratum: Some(10),
            ..UNSYNCED
        };
        let h = reply(decide(
            &request(0x23, t(0)),
            &local,
            || Rate::Allowed,
            t(0),
            t(0),
        ));
        assert_eq!((h.leap, h.stratum, &h.reference_id), (0, 10, b"LOCL"));
        assert_eq!(h.root_dispersion, packet::short(LOCAL_DISPERSION));
    }

    #[test]
    fn other_modes_and_versions_are_refused() {
        for (first, want) in [
            (0x21, Drop::RefusedMode(Mode::SymmetricActive)),
            (0x22, Drop::RefusedMode(Mode::SymmetricPassive)),
            (0x24, Drop::RefusedMode(Mode::Server)),
            (0x25, Drop::RefusedMode(Mode::Broadcast)),
            (0x26, Drop::RefusedMode(Mode::Control)),
            (0x17, Drop::RefusedMode(Mode::Private)),
            (0x03, Drop::BadVersion),
            (0x2b, Drop::BadVersion),
        ] {
            let d = decide(
                &request(first, t(0)),
                &SYNCED,
                || panic!("no rate check"),
                t(0),
                t(0),
            );
            assert_eq!(d, Decision::Drop(want), "{first:#x}");
        }
        let d = decide(
            &request(0x23, Timestamp(0)),
            &SYNCED,
            || Rate::Allowed,
            t(0),
            t(0),
        );
        assert_eq!(d, Decision::Drop(Drop::NoTransmit));
        let d = decide(&[0x23; 20], &SYNCED, || Rate::Allowed, t(0), t(0));
        assert_eq!(d, Decision::Drop(Drop::Malformed));
    }

    #[test]
    fn over_the_rate_a_kod_then_silence() {
        let h = reply(decide(
            &request(0x23, t(0)),
            &SYNCED,
            || Rate::Kod,
            t(0),
            t(0),
        ));
        assert_eq!((h.leap, h.stratum, &h.reference_id), (3, 0, b"RATE"));
        assert_eq!(h.origin, t(0));
        let d = decide(&request(0x23, t(0)), &SYNCED, || Rate::Silent, t(0), t(0));
        assert_eq!(d, Decision::Drop(Drop::RateLimited));
    }

    #[test]
    fn the_offset_estimate_is_receive_minus_client_transmit() {
        let d = decide(
            &request(0x23, t(0)),
            &SYNCED,
            || Rate::Allowed,
            t(3600),
            t(3600),
        );
        let Decision::Reply { offset, .. } = d else {
            panic!()
        };
        assert!((offset - 3600.0).abs() < 1e-6);
    }

    /// Random and mutated datagrams: never a panic, never a reply longer
    /// than the request, and a reply only to a client-mode request.
    #[test]
    fn fuzzed_datagrams() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let valid = request(0x23, t(0));
        for i in 0..200_000 {
            let data: Vec<u8> = if i % 2 == 0 {
                let len = (next() % 120) as usize;
                (0..len).map(|_| next() as u8).collect()
            } else {
                let mut d = valid.clone();
                for _ in 0..(next() % 4 + 1) {
                    let at = (next() as usize) % d.len();
                    d[at] = next() as u8;
                }
                d.truncate((next() % 60) as usize + 1);
                d
            };
            let rate = match next() % 3 {
                0 => Rate::Allowed,
                1 => Rate::Kod,
                _ => Rate::Silent,
            };
            let clock = if i % 3 == 0 { UNSYNCED } else { SYNCED };
            match decide(&data, &clock, || rate, Timestamp(next()), Timestamp(next())) {
                Decision::Reply { bytes, .. } | Decision::Kod(bytes) => {
                    assert!(bytes.len() <= data.len());
                    assert_eq!(data[0] & 7, 3, "answered a non-client mode");
                }
                Decision::Drop(_) => {}
            }
        }
    }
}
