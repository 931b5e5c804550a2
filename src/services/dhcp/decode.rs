//! Decoding a datagram into a request worth deciding on: a BOOTREQUEST
//! with the DHCP magic cookie, an Ethernet hardware address (htype 1, hlen
//! 6) and a message type.
//!
//! Invariant: every field is hostile; option lengths that dhcproto 0.15
//! would panic on are rejected before it sees them, nothing indexes
//! unchecked (fuzzed in the reply tests). Option 81 (Client FQDN) never
//! reaches dhcproto, whose decoder cannot read its ASCII form and would
//! lose every option after it: it is cut out of the datagram and kept raw
//! ([`super::fqdn`]).

use dhcproto::v4::{self, DhcpOption, HType, Message, Opcode, OptionCode, UnknownOption};
use dhcproto::{Decodable, Decoder};

/// Why a datagram was not even considered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("cannot decode: {0}")]
    Decode(String),
    #[error("not a BOOTREQUEST")]
    NotRequest,
    #[error("hardware type/length {0:?}/{1} is not Ethernet/6")]
    Hardware(HType, u8),
    #[error("no DHCP message type (plain BOOTP is not served)")]
    NoMessageType,
    #[error("bad magic cookie")]
    Magic,
    #[error("option {0} has an invalid length {1}")]
    OptionLength(u8, usize),
}

/// Reject options whose length dhcproto 0.15 only `debug_assert!`s or
/// subtracts from unchecked (a panic in debug builds): 80 (0), 94 (3), 151
/// (≥ 1), 152–155 (4); 81 is taken out before ([`take_option`]).
/// Consecutive options with the same code are concatenated first (RFC
/// 3396), as dhcproto does.
fn check_option_lengths(opts: &[u8]) -> Result<(), Malformed> {
    fn ok(code: u8, len: usize) -> Result<(), Malformed> {
        let good = match code {
            80 => len == 0,
            94 => len == 3,
            151 => len >= 1,
            152..=155 => len == 4,
            _ => true,
        };
        if good {
            Ok(())
        } else {
            Err(Malformed::OptionLength(code, len))
        }
    }
    let mut run: Option<(u8, usize)> = None;
    let mut i = 0;
    while i < opts.len() {
        let code = opts[i];
        if code == 0 || code == 255 {
            if let Some((c, l)) = run.take() {
                ok(c, l)?;
            }
            if code == 255 {
                break;
            }
            i += 1;
            continue;
        }
        let Some(&len) = opts.get(i + 1) else { break };
        let len = usize::from(len);
        match &mut run {
            Some((c, total)) if *c == code => *total += len,
            _ => {
                if let Some((c, l)) = run.take() {
                    ok(c, l)?;
                }
                run = Some((code, len));
            }
        }
        i += 2 + len;
    }
    if let Some((c, l)) = run {
        ok(c, l)?;
    }
    Ok(())
}

/// The options area without option `code`, and the data of its instances
/// concatenated (RFC 3396); `None` when `code` does not occur. A truncated
/// last option is left in place (dhcproto stops there, as it would have).
fn take_option(opts: &[u8], code: u8) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut rest = Vec::new();
    let mut data = Vec::new();
    let mut found = false;
    let mut i = 0;
    while let Some(&c) = opts.get(i) {
        if c == 0 || c == 255 {
            rest.push(c);
            i += 1;
            continue;
        }
        let end = opts
            .get(i + 1)
            .map(|l| i + 2 + usize::from(*l))
            .filter(|e| *e <= opts.len());
        let Some(end) = end else {
            rest.extend_from_slice(&opts[i..]);
            break;
        };
        if c == code {
            found = true;
            data.extend_from_slice(&opts[i + 2..end]);
        } else {
            rest.extend_from_slice(&opts[i..end]);
        }
        i = end;
    }
    found.then_some((rest, data))
}

/// Decode a datagram into a request we are willing to look at.
pub fn decode(buf: &[u8]) -> Result<Message, Malformed> {
    if buf.len() < 240 {
        return Err(Malformed::Decode(format!(
            "{} bytes is too short",
            buf.len()
        )));
    }
    if buf[236..240] != v4::MAGIC {
        return Err(Malformed::Magic);
    }
    let fqdn = take_option(&buf[240..], u8::from(OptionCode::ClientFQDN));
    let stripped;
    let buf = match &fqdn {
        Some((rest, _)) => {
            stripped = [&buf[..240], rest.as_slice()].concat();
            stripped.as_slice()
        }
        None => buf,
    };
    check_option_lengths(&buf[240..])?;
    let mut msg =
        Message::decode(&mut Decoder::new(buf)).map_err(|e| Malformed::Decode(e.to_string()))?;
    if let Some((_, data)) = fqdn {
        msg.opts_mut()
            .insert(DhcpOption::Unknown(UnknownOption::new(
                OptionCode::ClientFQDN,
                data,
            )));
    }
    if msg.opcode() != Opcode::BootRequest {
        return Err(Malformed::NotRequest);
    }
    // `Message::chaddr()` slices by hlen, which would panic above 16.
    if msg.htype() != HType::Eth || msg.hlen() != 6 {
        return Err(Malformed::Hardware(msg.htype(), msg.hlen()));
    }
    if msg.opts().msg_type().is_none() {
        return Err(Malformed::NoMessageType);
    }
    Ok(msg)
}
