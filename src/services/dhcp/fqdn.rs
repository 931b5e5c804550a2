//! The Client FQDN option (81, RFC 4702) in both encodings: the canonical
//! wire format (E bit 1) and the deprecated ASCII form (E bit 0, §2.3.1)
//! that older clients (the Windows DHCP client among them) still send.
//!
//! Why not dhcproto's: its decoder reads the name as a wire-format name
//! whatever the E bit, so an ASCII name (and a partial wire name, which has
//! no terminating root label) fails to decode, and dhcproto then stops
//! reading options: those after 81 (requested address 50, server id 54)
//! are lost and the REQUEST looks like one for another server — the client
//! never got a lease. [`super::decode`] therefore takes option 81 out of
//! the datagram before dhcproto sees it and keeps its data raw (an unknown
//! option with code 81); [`parse`] reads it here, and [`answer`] builds the
//! reply's option in the client's encoding (§4: "the server MUST use the
//! same encoding format … that the client used").
//!
//! What the server answers (§3, §4): it performs no DNS updates (the
//! cluster's names come from the cluster file), so N = 1 and S = 0, O = 1
//! when the client had asked for S = 1; RCODE1/2 = 255 (§2.2). The name is
//! the server's notion of the client's FQDN: `<node>.<cluster domain>` for
//! a reserved node (the name its DNS serves), else the client's own name
//! as it sent it (§4 allows the copy).
//!
//! Invariant: the data is hostile. A name that is not valid in its
//! encoding makes the option ignored (§2.3.1: a server "MUST ignore" an
//! option it cannot use), never the request; nothing indexes unchecked.

/// Flag bits (§2.1).
const S: u8 = 0x01;
const O: u8 = 0x02;
const E: u8 = 0x04;
const N: u8 = 0x08;

/// Longest name, in either encoding (RFC 1035 2.3.4).
const MAX_NAME: usize = 255;

/// A client's option 81 that can be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ClientFqdn {
    pub flags: u8,
    /// The name as sent: wire-format labels (E = 1, possibly partial: no
    /// root label) or ASCII (E = 0, trailing NULs removed).
    pub name: Vec<u8>,
}

impl ClientFqdn {
    /// The client used the wire format.
    pub(super) fn wire(&self) -> bool {
        self.flags & E != 0
    }
}

/// Read option 81's data (its instances concatenated, RFC 3396). `None`:
/// too short or the name is not valid in its encoding (the option is then
/// ignored).
pub(super) fn parse(data: &[u8]) -> Option<ClientFqdn> {
    let (&flags, rest) = data.split_first()?;
    let name = rest.get(2..)?;
    let name = if flags & E != 0 {
        wire_ok(name).then(|| name.to_vec())?
    } else {
        let end = name.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
        let name = name.get(..end)?;
        ascii_ok(name).then(|| name.to_vec())?
    };
    Some(ClientFqdn { flags, name })
}

/// Wire-format labels, no compression, at most [`MAX_NAME`] bytes; the
/// root label, if present, ends the data (else a partial name).
fn wire_ok(name: &[u8]) -> bool {
    if name.len() > MAX_NAME {
        return false;
    }
    let mut i = 0;
    while let Some(&len) = name.get(i) {
        if len == 0 {
            return i + 1 == name.len();
        }
        if len > 63 {
            return false;
        }
        i += 1 + usize::from(len);
    }
    i == name.len()
}

/// Printable ASCII without spaces, at most [`MAX_NAME`] bytes (empty: the
/// client leaves the name to the server).
fn ascii_ok(name: &[u8]) -> bool {
    name.len() <= MAX_NAME && name.iter().all(|b| b.is_ascii_graphic())
}

/// The data of the reply's option 81 for `req`: `fqdn` (a dotted name,
/// no trailing dot) when the server knows the client's name, else the
/// client's own name echoed, in the client's encoding.
pub(super) fn answer(req: &ClientFqdn, fqdn: Option<&str>) -> Vec<u8> {
    let mut flags = (req.flags & E) | N;
    if req.flags & S != 0 {
        flags |= O;
    }
    let mut out = vec![flags, 255, 255];
    match fqdn.filter(|n| !n.is_empty() && n.len() < MAX_NAME) {
        Some(n) if req.wire() => {
            for label in n.split('.').filter(|l| !l.is_empty()) {
                let bytes = label.as_bytes();
                out.push(u8::try_from(bytes.len().min(63)).unwrap_or(63));
                out.extend(bytes.iter().take(63).map(u8::to_ascii_lowercase));
            }
            out.push(0);
        }
        // A fully qualified name ends with a dot in the ASCII form.
        Some(n) => {
            out.extend(n.to_ascii_lowercase().bytes());
            out.push(b'.');
        }
        None => out.extend_from_slice(&req.name),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_and_wire_names_parse() {
        let a = parse(b"\x01\x00\x00winbox.example.org\x00").unwrap();
        assert!(!a.wire());
        assert_eq!(a.name, b"winbox.example.org");
        let w = parse(b"\x05\x00\x00\x06winbox\x07example\x03org\x00").unwrap();
        assert!(w.wire());
        // A partial wire name (no root label) is allowed.
        let p = parse(b"\x04\x00\x00\x06winbox").unwrap();
        assert_eq!(p.name, b"\x06winbox");
        // The client may leave the name to the server.
        assert_eq!(parse(b"\x00\x00\x00").unwrap().name, b"");
    }

    #[test]
    fn invalid_names_make_the_option_ignored() {
        for bad in [
            &b""[..],
            b"\x00\x00",
            b"\x00\x00\x00win box",                // space
            b"\x00\x00\x00\xffbox",                // not ASCII
            b"\x04\x00\x00\xc0\x0c",               // compression pointer
            b"\x04\x00\x00\x06win",                // label runs past the end
            b"\x04\x00\x00\x03win\x00\x03box\x00", // data after the root label
            b"\x04\x00\x00\x40aaaa",               // label over 63
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        let mut long = vec![0u8, 0, 0];
        long.extend(std::iter::repeat_n(b'a', 256));
        assert_eq!(parse(&long), None);
    }

    #[test]
    fn the_answer_is_in_the_clients_encoding() {
        // ASCII, S=1 asked: N=1, O=1, E=0; the node's name with a dot.
        let a = parse(b"\x01\x00\x00winbox\x00").unwrap();
        assert_eq!(
            answer(&a, Some("Master-0.c.example.com")),
            b"\x0a\xff\xffmaster-0.c.example.com."
        );
        // Unknown to the server: the client's name echoed.
        assert_eq!(answer(&a, None), b"\x0a\xff\xffwinbox");
        // Wire: E=1, N=1, the node's name as labels.
        let w = parse(b"\x04\x00\x00\x06winbox\x00").unwrap();
        assert_eq!(
            answer(&w, Some("m0.c.io")),
            b"\x0c\xff\xff\x02m0\x01c\x02io\x00"
        );
        assert_eq!(answer(&w, None), b"\x0c\xff\xff\x06winbox\x00");
    }
}
