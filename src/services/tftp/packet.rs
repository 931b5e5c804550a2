//! TFTP packets (RFC 1350 §5, OACK from RFC 2347): parse and encode, no I/O.
//!
//! Invariants: [`parse`] never panics and never allocates more than the
//! datagram's size; every malformed datagram is a [`ParseError`]. Option
//! names are lower-cased (RFC 2347: case-insensitive); a duplicate option is
//! an error. The mode string is lower-cased too.

use std::fmt;

pub const RRQ: u16 = 1;
pub const WRQ: u16 = 2;
pub const DATA: u16 = 3;
pub const ACK: u16 = 4;
pub const ERROR: u16 = 5;
pub const OACK: u16 = 6;

/// RFC 1350 / RFC 2347 error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    Undefined = 0,
    FileNotFound = 1,
    AccessViolation = 2,
    DiskFull = 3,
    IllegalOperation = 4,
    UnknownTid = 5,
    FileExists = 6,
    NoSuchUser = 7,
    OptionNegotiation = 8,
}

/// A read or write request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The file name exactly as sent (not necessarily UTF-8).
    pub filename: Vec<u8>,
    /// `octet`, `netascii` or `mail`, lower case.
    pub mode: String,
    /// Options in order, names lower case.
    pub options: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet<'a> {
    Rrq(Request),
    Wrq(Request),
    Data { block: u16, data: &'a [u8] },
    Ack(u16),
    Error { code: u16, message: String },
    Oack(Vec<(String, String)>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("datagram shorter than 4 bytes")]
    TooShort,
    #[error("unknown opcode {0}")]
    UnknownOpcode(u16),
    #[error("string not NUL-terminated")]
    Unterminated,
    #[error("empty file name")]
    EmptyFilename,
    #[error("mode or option is not ASCII")]
    NotAscii,
    #[error("option {0:?} has no value")]
    MissingValue(String),
    #[error("duplicate option {0:?}")]
    DuplicateOption(String),
    #[error("wrong length for this opcode")]
    BadLength,
}

/// Split `b` into NUL-terminated fields; the last byte must be NUL.
fn fields(b: &[u8]) -> Result<Vec<&[u8]>, ParseError> {
    match b.split_last() {
        Some((0, body)) => Ok(body.split(|&c| c == 0).collect()),
        Some(_) => Err(ParseError::Unterminated),
        None => Err(ParseError::Unterminated),
    }
}

fn ascii(b: &[u8]) -> Result<String, ParseError> {
    if b.iter().all(|c| c.is_ascii() && !c.is_ascii_control()) {
        Ok(String::from_utf8_lossy(b).to_ascii_lowercase())
    } else {
        Err(ParseError::NotAscii)
    }
}

/// Parse `name\0value\0` pairs.
fn options(f: &[&[u8]]) -> Result<Vec<(String, String)>, ParseError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for pair in f.chunks(2) {
        let name = ascii(pair[0])?;
        let Some(value) = pair.get(1) else {
            return Err(ParseError::MissingValue(name));
        };
        if out.iter().any(|(n, _)| *n == name) {
            return Err(ParseError::DuplicateOption(name));
        }
        out.push((name, ascii(value)?));
    }
    Ok(out)
}

fn request(b: &[u8]) -> Result<Request, ParseError> {
    let f = fields(b)?;
    // `fields` returns at least one element for a non-empty input.
    let (name, rest) = f.split_first().ok_or(ParseError::Unterminated)?;
    if name.is_empty() {
        return Err(ParseError::EmptyFilename);
    }
    let (mode, rest) = rest.split_first().ok_or(ParseError::Unterminated)?;
    Ok(Request {
        filename: name.to_vec(),
        mode: ascii(mode)?,
        options: options(rest)?,
    })
}

/// Parse one datagram.
pub fn parse(b: &[u8]) -> Result<Packet<'_>, ParseError> {
    if b.len() < 4 {
        // ACK, DATA and ERROR are at least 4 bytes; RRQ at least `op a\0 m\0`.
        return Err(ParseError::TooShort);
    }
    let op = u16::from_be_bytes([b[0], b[1]]);
    let rest = &b[2..];
    let block = u16::from_be_bytes([b[2], b[3]]);
    match op {
        RRQ => Ok(Packet::Rrq(request(rest)?)),
        WRQ => Ok(Packet::Wrq(request(rest)?)),
        DATA => Ok(Packet::Data {
            block,
            data: &b[4..],
        }),
        ACK if b.len() == 4 => Ok(Packet::Ack(block)),
        ACK => Err(ParseError::BadLength),
        ERROR => {
            // Be lenient with the message: some clients omit the NUL.
            let msg = &b[4..];
            let msg = msg.strip_suffix(&[0]).unwrap_or(msg);
            Ok(Packet::Error {
                code: block,
                message: String::from_utf8_lossy(msg).into_owned(),
            })
        }
        OACK => {
            if rest.is_empty() {
                return Ok(Packet::Oack(Vec::new()));
            }
            Ok(Packet::Oack(options(&fields(rest)?)?))
        }
        other => Err(ParseError::UnknownOpcode(other)),
    }
}

/// DATA header (4 bytes) for `block`; the payload follows it.
pub fn data_header(block: u16) -> [u8; 4] {
    let b = block.to_be_bytes();
    let o = DATA.to_be_bytes();
    [o[0], o[1], b[0], b[1]]
}

pub fn ack(block: u16) -> Vec<u8> {
    let mut v = ACK.to_be_bytes().to_vec();
    v.extend_from_slice(&block.to_be_bytes());
    v
}

/// ERROR packet; non-ASCII and control characters in `message` become `?`.
pub fn error(code: ErrorCode, message: &str) -> Vec<u8> {
    let mut v = ERROR.to_be_bytes().to_vec();
    v.extend_from_slice(&(code as u16).to_be_bytes());
    v.extend(message.bytes().take(400).map(|c| {
        if c.is_ascii() && !c.is_ascii_control() {
            c
        } else {
            b'?'
        }
    }));
    v.push(0);
    v
}

pub fn oack(opts: &[(String, String)]) -> Vec<u8> {
    let mut v = OACK.to_be_bytes().to_vec();
    for (n, val) in opts {
        v.extend_from_slice(n.as_bytes());
        v.push(0);
        v.extend_from_slice(val.as_bytes());
        v.push(0);
    }
    v
}

/// RRQ/WRQ encoding (used by tests and tools).
pub fn request_bytes(op: u16, r: &Request) -> Vec<u8> {
    let mut v = op.to_be_bytes().to_vec();
    v.extend_from_slice(&r.filename);
    v.push(0);
    v.extend_from_slice(r.mode.as_bytes());
    v.push(0);
    for (n, val) in &r.options {
        v.extend_from_slice(n.as_bytes());
        v.push(0);
        v.extend_from_slice(val.as_bytes());
        v.push(0);
    }
    v
}

/// A file name for logs: lossy UTF-8, control characters escaped.
pub struct Shown<'a>(pub &'a [u8]);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(name: &str, mode: &str, opts: &[(&str, &str)]) -> Request {
        Request {
            filename: name.as_bytes().to_vec(),
            mode: mode.into(),
            options: opts
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        }
    }

    #[test]
    fn rrq_round_trip_with_options() {
        let r = req("ipxe.efi", "octet", &[("blksize", "1468"), ("tsize", "0")]);
        let b = request_bytes(RRQ, &r);
        assert_eq!(parse(&b), Ok(Packet::Rrq(r)));
    }

    #[test]
    fn names_and_mode_are_lowercased() {
        let b = b"\x00\x01File\x00OCTET\x00BlkSize\x00512\x00";
        let Ok(Packet::Rrq(r)) = parse(b) else {
            panic!("not an RRQ")
        };
        assert_eq!(r.filename, b"File");
        assert_eq!(r.mode, "octet");
        assert_eq!(r.options, vec![("blksize".into(), "512".into())]);
    }

    #[test]
    fn malformed_requests() {
        assert_eq!(parse(b"\x00\x01"), Err(ParseError::TooShort));
        assert_eq!(parse(b"\x00\x01ab"), Err(ParseError::Unterminated));
        assert_eq!(parse(b"\x00\x01a\x00"), Err(ParseError::Unterminated));
        assert_eq!(
            parse(b"\x00\x01\x00octet\x00"),
            Err(ParseError::EmptyFilename)
        );
        assert_eq!(
            parse(b"\x00\x01a\x00octet\x00blksize\x00"),
            Err(ParseError::MissingValue("blksize".into()))
        );
        assert_eq!(
            parse(b"\x00\x01a\x00octet\x00tsize\x000\x00TSIZE\x000\x00"),
            Err(ParseError::DuplicateOption("tsize".into()))
        );
        assert_eq!(
            parse(b"\x00\x01a\x00oc\xfft\x00"),
            Err(ParseError::NotAscii)
        );
        assert_eq!(parse(b"\x00\x09abcd"), Err(ParseError::UnknownOpcode(9)));
        assert_eq!(parse(b"\x00\x04\x00\x01\x00"), Err(ParseError::BadLength));
    }

    #[test]
    fn data_ack_error_oack() {
        assert_eq!(
            parse(b"\x00\x03\x12\x34xyz"),
            Ok(Packet::Data {
                block: 0x1234,
                data: b"xyz"
            })
        );
        assert_eq!(parse(&ack(65535)), Ok(Packet::Ack(65535)));
        assert_eq!(
            parse(&error(ErrorCode::FileNotFound, "no\nsuch é")),
            Ok(Packet::Error {
                code: 1,
                message: "no?such ??".into()
            })
        );
        assert_eq!(
            parse(b"\x00\x05\x00\x08abc"),
            Ok(Packet::Error {
                code: 8,
                message: "abc".into()
            })
        );
        let o = vec![("blksize".to_string(), "1428".to_string())];
        assert_eq!(parse(&oack(&o)), Ok(Packet::Oack(o)));
        assert_eq!(data_header(513), [0, 3, 2, 1]);
    }

    /// A tiny xorshift generator: deterministic "random" datagrams.
    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut buf = Vec::new();
        for i in 0..200_000 {
            buf.clear();
            let len = (xorshift(&mut s) % 80) as usize;
            for _ in 0..len {
                // Bias towards NULs and small opcodes so requests get parsed deep.
                let r = xorshift(&mut s);
                buf.push(match r % 4 {
                    0 => 0,
                    1 => (r >> 8) as u8 % 7,
                    _ => (r >> 16) as u8,
                });
            }
            if i % 3 == 0 && buf.len() >= 2 {
                buf[0] = 0;
                buf[1] = 1;
            }
            let _ = parse(&buf);
        }
    }
}
