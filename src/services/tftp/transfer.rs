//! Option negotiation (RFC 2347/2348/2349/7440) and the sending side of one
//! read transfer as a pure state machine: no sockets, no clock, no file.
//!
//! Blocks are counted from 1 in 64 bits ([`Transfer::blocks`] = size /
//! blksize + 1: the last block is short, possibly empty); on the wire the
//! number is the low 16 bits, so block 65536 is sent as 0 (rollover to 0, as
//! tftp-hpa, atftp and curl expect). An ACK is mapped back to 64 bits
//! relative to the last acknowledged block.
//!
//! Invariants:
//! - Only an ACK for a block that was sent and not yet acknowledged moves
//!   the transfer; duplicate and old ACKs are ignored (no Sorcerer's
//!   Apprentice re-sends, RFC 1123 §4.2.3.1).
//! - After any progress the next window starts right after the acknowledged
//!   block (RFC 7440 §4: an ACK in mid-window means the rest was lost).
//! - A timeout rolls back to the block after the last acknowledged one and
//!   re-sends the window (or the OACK); after `retries` timeouts in a row
//!   without progress the transfer is abandoned.
//!
//! Negotiation policy: unknown options and values we cannot accept are left
//! out of the OACK (RFC 2347 allows this), never refused with ERROR 8:
//! `blksize` < 8 or not a number → default 512, larger than [`MAX_BLKSIZE`] →
//! clamped; `timeout` outside 1..=255 → ignored; `windowsize` 0 → ignored,
//! larger than [`MAX_WINDOW`] or than [`WINDOW_BYTES`] / blksize → lowered;
//! `tsize` → the file's size.

use std::ops::RangeInclusive;
use std::time::Duration;

/// RFC 2348 maximum. Clients choose; iPXE and EDK2 ask for ≤ 1468.
pub const MAX_BLKSIZE: u16 = 65464;
/// Blocks in flight per window (RFC 7440 allows 65535).
pub const MAX_WINDOW: u16 = 64;
/// One window is read from the file in one go; this caps its buffer.
pub const WINDOW_BYTES: usize = 512 * 1024;

/// What the server agreed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    pub blksize: u16,
    pub windowsize: u16,
    /// Retransmit timeout asked for by the client.
    pub timeout: Option<Duration>,
    /// The OACK's options; empty means "no OACK, send DATA 1 at once".
    pub oack: Vec<(String, String)>,
}

/// Decide the options of an RRQ for a file of `size` bytes.
pub fn negotiate(options: &[(String, String)], size: u64) -> Negotiated {
    let mut n = Negotiated {
        blksize: 512,
        windowsize: 1,
        timeout: None,
        oack: Vec::new(),
    };
    let mut window_asked = None;
    for (name, value) in options {
        let num = value.trim().parse::<u64>().ok();
        match (name.as_str(), num) {
            ("blksize", Some(v)) if v >= 8 => {
                n.blksize = v.min(u64::from(MAX_BLKSIZE)) as u16;
                n.oack.push((name.clone(), n.blksize.to_string()));
            }
            ("timeout", Some(v @ 1..=255)) => {
                n.timeout = Some(Duration::from_secs(v));
                n.oack.push((name.clone(), v.to_string()));
            }
            ("tsize", Some(_)) => n.oack.push((name.clone(), size.to_string())),
            ("windowsize", Some(v)) if v >= 1 => window_asked = Some(v),
            _ => {}
        }
    }
    if let Some(v) = window_asked {
        let by_bytes = (WINDOW_BYTES / usize::from(n.blksize)).max(1) as u64;
        n.windowsize = v.min(u64::from(MAX_WINDOW)).min(by_bytes) as u16;
        n.oack.push(("windowsize".into(), n.windowsize.to_string()));
    }
    n
}

/// What the socket layer must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send the OACK (again).
    SendOack,
    /// Send these blocks (64-bit numbers), in order.
    Send(RangeInclusive<u64>),
    /// Nothing to send; keep waiting.
    Wait,
    /// Every block was acknowledged.
    Done,
    /// Too many timeouts without progress.
    GiveUp,
}

#[derive(Debug, Clone)]
pub struct Transfer {
    size: u64,
    blksize: u64,
    window: u64,
    blocks: u64,
    /// Highest block acknowledged (0 = none).
    acked: u64,
    /// Highest block sent.
    sent: u64,
    oack_pending: bool,
    retries: u32,
    timeouts: u32,
    retransmits: u64,
}

impl Transfer {
    pub fn new(size: u64, n: &Negotiated, retries: u32) -> Transfer {
        let blksize = u64::from(n.blksize.max(8));
        Transfer {
            size,
            blksize,
            window: u64::from(n.windowsize.max(1)),
            blocks: size / blksize + 1,
            acked: 0,
            sent: 0,
            oack_pending: !n.oack.is_empty(),
            retries,
            timeouts: 0,
            retransmits: 0,
        }
    }

    /// Number of DATA blocks in the transfer.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Blocks re-sent after timeouts so far.
    pub fn retransmits(&self) -> u64 {
        self.retransmits
    }

    /// The first step: OACK, or the first window.
    pub fn start(&mut self) -> Step {
        if self.oack_pending {
            Step::SendOack
        } else {
            self.window_from(1)
        }
    }

    fn window_from(&mut self, first: u64) -> Step {
        let last = (first + self.window - 1).min(self.blocks);
        self.sent = self.sent.max(last);
        Step::Send(first..=last)
    }

    /// Wire number of a 64-bit block.
    pub fn wire(block: u64) -> u16 {
        block as u16
    }

    /// File offset and payload length of `block` (1-based).
    pub fn extent(&self, block: u64) -> (u64, usize) {
        let off = (block - 1).saturating_mul(self.blksize);
        let len = self.size.saturating_sub(off).min(self.blksize);
        (off, len as usize)
    }

    /// The client acknowledged wire block `w`.
    pub fn on_ack(&mut self, w: u16) -> Step {
        if self.oack_pending {
            if w != 0 {
                return Step::Wait;
            }
            self.oack_pending = false;
            self.timeouts = 0;
            return self.window_from(1);
        }
        let delta = u64::from(w.wrapping_sub(self.acked as u16));
        if delta == 0 || delta > self.sent - self.acked {
            return Step::Wait; // duplicate, old or never sent
        }
        self.acked += delta;
        self.timeouts = 0;
        if self.acked == self.blocks {
            return Step::Done;
        }
        // Window complete, or blocks after `acked` were lost: next window.
        self.window_from(self.acked + 1)
    }

    /// No ACK arrived within the timeout.
    pub fn on_timeout(&mut self) -> Step {
        self.timeouts += 1;
        if self.timeouts > self.retries {
            return Step::GiveUp;
        }
        if self.oack_pending {
            return Step::SendOack;
        }
        let step = self.window_from(self.acked + 1);
        if let Step::Send(r) = &step {
            self.retransmits += r.end() - r.start() + 1;
        }
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(o: &[(&str, &str)]) -> Vec<(String, String)> {
        o.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn negotiation() {
        let n = negotiate(&opts(&[]), 10);
        assert_eq!((n.blksize, n.windowsize, n.timeout), (512, 1, None));
        assert!(n.oack.is_empty());
        let n = negotiate(
            &opts(&[
                ("blksize", "1468"),
                ("tsize", "0"),
                ("timeout", "3"),
                ("windowsize", "8"),
                ("multicast", ""),
            ]),
            1234,
        );
        assert_eq!(
            n.oack,
            opts(&[
                ("blksize", "1468"),
                ("tsize", "1234"),
                ("timeout", "3"),
                ("windowsize", "8")
            ])
        );
        assert_eq!(n.timeout, Some(Duration::from_secs(3)));
        // Clamped, ignored and lowered values.
        let n = negotiate(
            &opts(&[
                ("blksize", "70000"),
                ("timeout", "0"),
                ("windowsize", "1000"),
            ]),
            0,
        );
        assert_eq!(n.blksize, MAX_BLKSIZE);
        assert_eq!(n.windowsize, (WINDOW_BYTES / 65464) as u16);
        assert_eq!(n.oack, opts(&[("blksize", "65464"), ("windowsize", "8")]));
        let n = negotiate(
            &opts(&[("blksize", "7"), ("windowsize", "0"), ("tsize", "x")]),
            0,
        );
        assert_eq!((n.blksize, n.windowsize), (512, 1));
        assert!(n.oack.is_empty());
        let n = negotiate(&opts(&[("windowsize", "500")]), 0);
        assert_eq!(n.windowsize, MAX_WINDOW);
    }

    fn plain(size: u64, blksize: u16, window: u16) -> Transfer {
        let n = Negotiated {
            blksize,
            windowsize: window,
            timeout: None,
            oack: Vec::new(),
        };
        Transfer::new(size, &n, 3)
    }

    #[test]
    fn block_counts_and_extents() {
        for (size, blocks, last_len) in [(0, 1, 0), (511, 1, 511), (512, 2, 0), (513, 2, 1)] {
            let t = plain(size, 512, 1);
            assert_eq!(t.blocks(), blocks, "size {size}");
            assert_eq!(t.extent(blocks).1, last_len, "size {size}");
        }
        let t = plain(1025, 512, 1);
        assert_eq!(t.extent(2), (512, 512));
        assert_eq!(t.extent(3), (1024, 1));
    }

    #[test]
    fn lock_step_without_options() {
        let mut t = plain(1000, 512, 1);
        assert_eq!(t.start(), Step::Send(1..=1));
        assert_eq!(t.on_ack(0), Step::Wait); // old
        assert_eq!(t.on_ack(2), Step::Wait); // never sent
        assert_eq!(t.on_ack(1), Step::Send(2..=2));
        assert_eq!(t.on_ack(1), Step::Wait); // duplicate: no re-send
        assert_eq!(t.on_ack(2), Step::Done);
    }

    #[test]
    fn oack_then_windows_with_mid_window_ack() {
        let n = negotiate(&opts(&[("windowsize", "4")]), 512 * 9);
        let mut t = Transfer::new(512 * 9, &n, 3);
        assert_eq!(t.blocks(), 10);
        assert_eq!(t.start(), Step::SendOack);
        assert_eq!(t.on_ack(1), Step::Wait);
        assert_eq!(t.on_timeout(), Step::SendOack);
        assert_eq!(t.on_ack(0), Step::Send(1..=4));
        assert_eq!(t.on_ack(2), Step::Send(3..=6)); // 3, 4 lost
        assert_eq!(t.on_ack(6), Step::Send(7..=10));
        assert_eq!(t.on_ack(4), Step::Wait); // old
        assert_eq!(t.on_ack(10), Step::Done);
    }

    #[test]
    fn timeout_rolls_back_and_gives_up() {
        let mut t = plain(512 * 5, 512, 3);
        assert_eq!(t.start(), Step::Send(1..=3));
        assert_eq!(t.on_ack(1), Step::Send(2..=4));
        assert_eq!(t.on_timeout(), Step::Send(2..=4));
        assert_eq!(t.on_timeout(), Step::Send(2..=4));
        assert_eq!(t.retransmits(), 6);
        assert_eq!(t.on_ack(4), Step::Send(5..=6)); // progress resets the count
        assert_eq!(t.on_timeout(), Step::Send(5..=6));
        assert_eq!(t.on_timeout(), Step::Send(5..=6));
        assert_eq!(t.on_timeout(), Step::Send(5..=6));
        assert_eq!(t.on_timeout(), Step::GiveUp);
    }

    #[test]
    fn wraparound_past_65535_blocks() {
        let blocks = 65536u64 + 10;
        let mut t = plain((blocks - 1) * 512 + 7, 512, 1);
        assert_eq!(t.blocks(), blocks);
        let mut step = t.start();
        let mut n = 0u64;
        loop {
            match step {
                Step::Send(r) => {
                    assert_eq!(r.start(), r.end());
                    n = *r.start();
                    step = t.on_ack(Transfer::wire(n));
                }
                Step::Done => break,
                other => panic!("{other:?} at {n}"),
            }
        }
        assert_eq!(n, blocks);
        assert_eq!(Transfer::wire(65536), 0);
        assert_eq!(Transfer::wire(65537), 1);
        assert_eq!(t.extent(blocks), ((blocks - 1) * 512, 7));
    }

    #[test]
    fn windowed_wraparound_and_stale_acks() {
        let mut t = plain(512 * 70_000, 512, 64);
        let mut step = t.start();
        let mut last = 0;
        while let Step::Send(r) = step.clone() {
            // A stale ACK from two windows ago must not move anything.
            if last > 128 {
                assert_eq!(t.on_ack(Transfer::wire(last - 100)), Step::Wait);
            }
            last = *r.end();
            step = t.on_ack(Transfer::wire(last));
        }
        assert_eq!(step, Step::Done);
        assert_eq!(last, 70_001);
    }
}
