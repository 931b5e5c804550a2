//! The NTP header (RFC 5905 §7.3): 48 bytes, parsed and written by hand.
//!
//! Why our own codec and not a crate: `ntp-proto` (ntpd-rs, well kept)
//! states that it "is not intended as a public interface"; since 1.x its
//! `packet` module is private (exported only behind an `__internal-api`
//! feature) and it pulls in the NTS/TLS stack. The older `ntp` crate is
//! unmaintained (time 0.1, byteorder). A server needs the fixed header
//! only: we ignore extension fields and MACs (and never echo them), so a
//! reply is always exactly [`HEADER_LEN`] bytes, never more than the
//! request.
//!
//! Invariants: [`parse`] never panics and accepts any input of at least
//! [`HEADER_LEN`] bytes (the fields are plain bits; meaning is decided in
//! `core`); [`Header::write`] always yields [`HEADER_LEN`] bytes.

/// Bytes of the fixed NTP header.
pub const HEADER_LEN: usize = 48;
/// Seconds from 1900-01-01 (the NTP era 0 origin) to 1970-01-01.
pub const UNIX_OFFSET: u64 = 2_208_988_800;

/// A 64-bit NTP timestamp: seconds since 1900 (era 0) and a binary fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// From a duration since the Unix epoch.
    pub fn from_unix(d: std::time::Duration) -> Timestamp {
        let secs = d.as_secs().wrapping_add(UNIX_OFFSET) & 0xffff_ffff;
        let frac = (u64::from(d.subsec_nanos()) << 32) / 1_000_000_000;
        Timestamp((secs << 32) | frac)
    }

    /// `self - other` in seconds, taking the shorter way round the era
    /// (valid for differences under 68 years).
    pub fn diff_secs(self, other: Timestamp) -> f64 {
        let d = self.0.wrapping_sub(other.0) as i64;
        d as f64 / 4_294_967_296.0
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

/// Association mode (RFC 5905 figure 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Reserved,
    SymmetricActive,
    SymmetricPassive,
    Client,
    Server,
    Broadcast,
    Control,
    Private,
}

impl Mode {
    fn from_bits(b: u8) -> Mode {
        match b & 7 {
            0 => Mode::Reserved,
            1 => Mode::SymmetricActive,
            2 => Mode::SymmetricPassive,
            3 => Mode::Client,
            4 => Mode::Server,
            5 => Mode::Broadcast,
            6 => Mode::Control,
            _ => Mode::Private,
        }
    }

    fn bits(self) -> u8 {
        match self {
            Mode::Reserved => 0,
            Mode::SymmetricActive => 1,
            Mode::SymmetricPassive => 2,
            Mode::Client => 3,
            Mode::Server => 4,
            Mode::Broadcast => 5,
            Mode::Control => 6,
            Mode::Private => 7,
        }
    }
}

/// The fixed header, field by field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Leap indicator, 0..=3 (3: clock unsynchronised).
    pub leap: u8,
    pub version: u8,
    pub mode: Mode,
    pub stratum: u8,
    pub poll: i8,
    pub precision: i8,
    /// NTP short format (16.16 seconds).
    pub root_delay: u32,
    /// NTP short format (16.16 seconds).
    pub root_dispersion: u32,
    pub reference_id: [u8; 4],
    pub reference: Timestamp,
    pub origin: Timestamp,
    pub receive: Timestamp,
    pub transmit: Timestamp,
}

/// Why a datagram is not an NTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    TooShort(usize),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::TooShort(n) => write!(f, "{n} bytes, shorter than the 48-byte header"),
        }
    }
}

fn u32_at(b: &[u8; HEADER_LEN], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn ts_at(b: &[u8; HEADER_LEN], i: usize) -> Timestamp {
    Timestamp((u64::from(u32_at(b, i)) << 32) | u64::from(u32_at(b, i + 4)))
}

/// The header of `datagram` (extension fields and MACs after it ignored).
pub fn parse(datagram: &[u8]) -> Result<Header, ParseError> {
    let Some(b) = datagram
        .get(..HEADER_LEN)
        .and_then(|h| <&[u8; HEADER_LEN]>::try_from(h).ok())
    else {
        return Err(ParseError::TooShort(datagram.len()));
    };
    Ok(Header {
        leap: b[0] >> 6,
        version: (b[0] >> 3) & 7,
        mode: Mode::from_bits(b[0]),
        stratum: b[1],
        poll: b[2] as i8,
        precision: b[3] as i8,
        root_delay: u32_at(b, 4),
        root_dispersion: u32_at(b, 8),
        reference_id: [b[12], b[13], b[14], b[15]],
        reference: ts_at(b, 16),
        origin: ts_at(b, 24),
        receive: ts_at(b, 32),
        transmit: ts_at(b, 40),
    })
}

impl Header {
    /// The 48 bytes on the wire.
    pub fn write(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = ((self.leap & 3) << 6) | ((self.version & 7) << 3) | self.mode.bits();
        b[1] = self.stratum;
        b[2] = self.poll as u8;
        b[3] = self.precision as u8;
        b[4..8].copy_from_slice(&self.root_delay.to_be_bytes());
        b[8..12].copy_from_slice(&self.root_dispersion.to_be_bytes());
        b[12..16].copy_from_slice(&self.reference_id);
        for (i, t) in [self.reference, self.origin, self.receive, self.transmit]
            .into_iter()
            .enumerate()
        {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&t.0.to_be_bytes());
        }
        b
    }
}

/// Seconds as NTP short format (16.16), saturating.
pub fn short(secs: f64) -> u32 {
    if secs.is_nan() || secs <= 0.0 {
        return 0;
    }
    let v = secs * 65536.0;
    if v >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        v as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A request as `sntp` sends it (v4, client, transmit set).
    fn request() -> [u8; 48] {
        let mut b = [0u8; 48];
        b[0] = 0x23;
        b[40..48].copy_from_slice(&0xe8a1_b2c3_1234_5678u64.to_be_bytes());
        b
    }

    #[test]
    fn parse_and_write_round_trip() {
        let h = parse(&request()).unwrap();
        assert_eq!((h.leap, h.version, h.mode), (0, 4, Mode::Client));
        assert_eq!(h.transmit, Timestamp(0xe8a1_b2c3_1234_5678));
        assert_eq!(h.write(), request());
    }

    #[test]
    fn short_datagrams_are_errors_and_extensions_are_ignored() {
        assert_eq!(parse(&[0x23; 47]), Err(ParseError::TooShort(47)));
        assert_eq!(parse(&[]), Err(ParseError::TooShort(0)));
        let mut long = request().to_vec();
        long.extend_from_slice(&[0xff; 72]);
        assert_eq!(parse(&long).unwrap().write(), request());
    }

    #[test]
    fn timestamps_from_unix_time() {
        let t = Timestamp::from_unix(Duration::new(0, 500_000_000));
        assert_eq!(t.0 >> 32, UNIX_OFFSET);
        assert_eq!(t.0 & 0xffff_ffff, 0x8000_0000);
        let later = Timestamp::from_unix(Duration::new(3600, 0));
        assert!((later.diff_secs(t) - 3599.5).abs() < 1e-6);
        assert!((t.diff_secs(later) + 3599.5).abs() < 1e-6);
    }

    #[test]
    fn short_format_saturates() {
        assert_eq!(short(1.0), 65536);
        assert_eq!(short(-1.0), 0);
        assert_eq!(short(f64::NAN), 0);
        assert_eq!(short(1e9), u32::MAX);
    }
}
