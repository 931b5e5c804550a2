//! Relay-Forward / Relay-Reply envelopes (RFC 8415 §9, §19), pure.
//!
//! Written here rather than with dhcproto's `RelayMessage`: in dhcproto
//! 0.15 that type has no constructor (a Relay-Reply cannot be built) and
//! its Relay Message option (9) decodes the payload as another relay
//! message, not as the client's message. The envelope is a fixed 34-octet
//! header and a list of type-length-value options, so the hand-written code
//! is short; the client's message inside is decoded with dhcproto.
//!
//! Invariants: at most [`HOP_LIMIT`] nested envelopes are unwrapped; a
//! truncated header or option is an error, never a panic; a Relay-Reply
//! carries the Interface-Id option (18) back when the Relay-Forward had it
//! (RFC 8415 §19.3).

use std::net::Ipv6Addr;

/// Relay-Forward and Relay-Reply message types.
pub const RELAY_FORW: u8 = 12;
pub const RELAY_REPL: u8 = 13;
/// RFC 8415 §7.6 HOP_COUNT_LIMIT.
pub const HOP_LIMIT: usize = 8;
const OPT_RELAY_MSG: u16 = 9;
const OPT_INTERFACE_ID: u16 = 18;
const OPT_CLIENT_LINKLAYER: u16 = 79;
const HEADER: usize = 34;

/// One relay agent on the way from the client (outermost first in
/// [`Unwrapped::hops`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub hop_count: u8,
    pub link: Ipv6Addr,
    pub peer: Ipv6Addr,
    pub interface_id: Option<Vec<u8>>,
    /// Option 79's data, when this relay added it.
    pub client_linklayer: Option<Vec<u8>>,
}

/// A datagram with its relay envelopes taken off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwrapped<'a> {
    /// Outermost (the relay that sent the datagram to us) first.
    pub hops: Vec<Hop>,
    /// The client's message.
    pub inner: &'a [u8],
}

impl Unwrapped<'_> {
    /// The relay next to the client.
    pub fn innermost(&self) -> Option<&Hop> {
        self.hops.last()
    }
}

/// Why a datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RelayError {
    #[error("truncated relay header")]
    Header,
    #[error("truncated relay option")]
    Option,
    #[error("relay message without a Relay Message option")]
    NoRelayMsg,
    #[error("more than {HOP_LIMIT} relay envelopes")]
    TooDeep,
    #[error("empty datagram")]
    Empty,
}

/// The options of an envelope as `(code, data)`.
fn options(mut b: &[u8]) -> Result<Vec<(u16, &[u8])>, RelayError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let (Some(h), Some(l)) = (b.get(..2), b.get(2..4)) else {
            return Err(RelayError::Option);
        };
        let code = u16::from_be_bytes([h[0], h[1]]);
        let len = usize::from(u16::from_be_bytes([l[0], l[1]]));
        let data = b.get(4..4 + len).ok_or(RelayError::Option)?;
        out.push((code, data));
        b = &b[4 + len..];
    }
    Ok(out)
}

/// Take the relay envelopes off `data` (none when it is a client message).
pub fn unwrap(data: &[u8]) -> Result<Unwrapped<'_>, RelayError> {
    let mut hops = Vec::new();
    let mut cur = data;
    loop {
        match cur.first() {
            None => return Err(RelayError::Empty),
            Some(&RELAY_FORW) => {}
            Some(_) => return Ok(Unwrapped { hops, inner: cur }),
        }
        if hops.len() >= HOP_LIMIT {
            return Err(RelayError::TooDeep);
        }
        let h = cur.get(..HEADER).ok_or(RelayError::Header)?;
        let addr = |r: std::ops::Range<usize>| -> Ipv6Addr {
            let mut o = [0u8; 16];
            o.copy_from_slice(&h[r]);
            Ipv6Addr::from(o)
        };
        let mut hop = Hop {
            hop_count: h[1],
            link: addr(2..18),
            peer: addr(18..34),
            interface_id: None,
            client_linklayer: None,
        };
        let mut next = None;
        for (code, d) in options(&cur[HEADER..])? {
            match code {
                OPT_RELAY_MSG => next = Some(d),
                OPT_INTERFACE_ID => hop.interface_id = Some(d.to_vec()),
                OPT_CLIENT_LINKLAYER => hop.client_linklayer = Some(d.to_vec()),
                _ => {}
            }
        }
        hops.push(hop);
        cur = next.ok_or(RelayError::NoRelayMsg)?;
    }
}

fn push_option(out: &mut Vec<u8>, code: u16, data: &[u8]) {
    out.extend_from_slice(&code.to_be_bytes());
    // Datagrams are far below 64 KiB: the reply is built from one.
    out.extend_from_slice(&u16::try_from(data.len()).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(data);
}

/// Wrap `reply` in one Relay-Reply per hop (innermost first), mirroring
/// the Relay-Forward envelopes.
pub fn wrap(hops: &[Hop], reply: Vec<u8>) -> Vec<u8> {
    hops.iter().rev().fold(reply, |inner, hop| {
        let mut out = Vec::with_capacity(HEADER + inner.len() + 32);
        out.push(RELAY_REPL);
        out.push(hop.hop_count);
        out.extend_from_slice(&hop.link.octets());
        out.extend_from_slice(&hop.peer.octets());
        if let Some(id) = &hop.interface_id {
            push_option(&mut out, OPT_INTERFACE_ID, id);
        }
        push_option(&mut out, OPT_RELAY_MSG, &inner);
        out
    })
}

/// A Relay-Forward around `inner` (tests and the relay test tool).
pub fn forward(hop: &Hop, inner: &[u8]) -> Vec<u8> {
    let mut out = vec![RELAY_FORW, hop.hop_count];
    out.extend_from_slice(&hop.link.octets());
    out.extend_from_slice(&hop.peer.octets());
    if let Some(id) = &hop.interface_id {
        push_option(&mut out, OPT_INTERFACE_ID, id);
    }
    if let Some(ll) = &hop.client_linklayer {
        push_option(&mut out, OPT_CLIENT_LINKLAYER, ll);
    }
    push_option(&mut out, OPT_RELAY_MSG, inner);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(n: u8) -> Hop {
        Hop {
            hop_count: n,
            link: format!("2001:db8:{n}::1").parse().unwrap(),
            peer: format!("fe80::{n}").parse().unwrap(),
            interface_id: Some(vec![n, n]),
            client_linklayer: (n == 1).then(|| vec![0, 1, 2, 0, 0, 0, 0, 1]),
        }
    }

    #[test]
    fn two_envelopes_round_trip() {
        let client = [1u8, 0xaa, 0xbb, 0xcc];
        let inner = forward(&hop(1), &client);
        let outer = forward(&hop(0), &inner);
        let u = unwrap(&outer).unwrap();
        assert_eq!(u.inner, &client);
        assert_eq!(u.hops, vec![hop(0), hop(1)]);
        assert_eq!(
            u.innermost().unwrap().client_linklayer.as_deref(),
            Some(&[0, 1, 2, 0, 0, 0, 0, 1][..])
        );
        // The reply: Relay-Repl(hop 0, Relay-Repl(hop 1, reply)).
        let r = wrap(&u.hops, vec![7, 1, 2, 3]);
        assert_eq!(r[0], RELAY_REPL);
        let mut again = r.clone();
        again[0] = RELAY_FORW;
        let inner_at = HEADER + 4 + 2 + 4;
        again[inner_at] = RELAY_FORW;
        let u2 = unwrap(&again).unwrap();
        assert_eq!(u2.inner, &[7, 1, 2, 3]);
        assert_eq!(u2.hops.len(), 2);
        assert_eq!(u2.hops[1].interface_id, Some(vec![1, 1]));
        assert_eq!(u2.hops[1].client_linklayer, None, "option 79 is not echoed");
    }

    #[test]
    fn client_message_passes_and_bad_envelopes_are_errors() {
        let u = unwrap(&[1, 2, 3, 4]).unwrap();
        assert!(u.hops.is_empty());
        assert_eq!(unwrap(&[]), Err(RelayError::Empty));
        assert_eq!(unwrap(&[RELAY_FORW, 0, 1]), Err(RelayError::Header));
        let mut m = forward(&hop(0), &[1, 2]);
        m.truncate(m.len() - 1);
        assert_eq!(unwrap(&m), Err(RelayError::Option));
        let mut no_msg = vec![RELAY_FORW; 1];
        no_msg.resize(HEADER, 0);
        assert_eq!(unwrap(&no_msg), Err(RelayError::NoRelayMsg));
        let mut deep = vec![1u8, 0, 0, 0];
        for _ in 0..=HOP_LIMIT {
            deep = forward(&hop(0), &deep);
        }
        assert_eq!(unwrap(&deep), Err(RelayError::TooDeep));
        // Every truncation of a valid envelope: an error, never a panic.
        let full = forward(&hop(1), &[1, 2, 3]);
        for n in 0..full.len() {
            let _ = unwrap(&full[..n]);
        }
    }
}
