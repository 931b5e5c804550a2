//! Counters and the recent-transfer log of the TFTP service (the `tftp`
//! `tftp` section of `/status` and its metrics).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::runtime::metrics::{Kind, family};
use crate::runtime::sync::LockExt as _;
use crate::services::tftp::status::{TftpStatus, TftpTransferRow};

/// How many finished transfers `/status` keeps (newest first).
pub const RECENT: usize = 50;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every block acknowledged.
    Completed,
    /// Timed out, socket error, shutdown or illegal packet mid-transfer.
    Failed,
    /// The client sent ERROR (e.g. the EDK2 `tsize` probe after the OACK).
    Aborted,
    /// Refused before any data: bad name, missing file, write request, mode.
    Refused,
    /// Over `maxTransfers` or `maxTransfersPerClient`.
    Busy,
}

const OUTCOMES: [(Outcome, &str); 5] = [
    (Outcome::Completed, "completed"),
    (Outcome::Failed, "failed"),
    (Outcome::Aborted, "aborted"),
    (Outcome::Refused, "refused"),
    (Outcome::Busy, "busy"),
];

fn name_of(o: Outcome) -> &'static str {
    OUTCOMES
        .iter()
        .find(|(x, _)| *x == o)
        .map(|(_, n)| *n)
        .unwrap_or("failed")
}

#[derive(Debug, Clone)]
struct Finished {
    time: SystemTime,
    client: SocketAddr,
    file: String,
    outcome: Outcome,
    detail: String,
    bytes: u64,
}

pub struct Stats {
    /// The bound listener and the canonical root, set at each commit.
    bound: Mutex<Option<(SocketAddr, PathBuf)>>,
    /// The IPv6 twin's bound address (dual-stack).
    bound_v6: Mutex<Option<SocketAddr>>,
    pub started: AtomicU64,
    outcomes: [AtomicU64; 5],
    pub bytes: AtomicU64,
    pub retransmits: AtomicU64,
    pub malformed: AtomicU64,
    /// Requests refused by `maxTransfersPerClient` (part of `busy`).
    pub client_limit: AtomicU64,
    pub active: AtomicI64,
    recent: Mutex<VecDeque<Finished>>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            bound: Mutex::new(None),
            bound_v6: Mutex::new(None),
            started: AtomicU64::new(0),
            outcomes: Default::default(),
            bytes: AtomicU64::new(0),
            retransmits: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            client_limit: AtomicU64::new(0),
            active: AtomicI64::new(0),
            recent: Mutex::default(),
        }
    }

    /// The bound address of `pxe.tftpListen`, or (`twin`) of its IPv6 twin.
    pub fn set_bound(&self, listen: SocketAddr, root: PathBuf, twin: bool) {
        if twin {
            *self.bound_v6.locked() = Some(listen);
        } else {
            *self.bound.locked() = Some((listen, root));
        }
    }

    /// The IPv6 twin was closed (a reload dropped `network.ipv6`).
    pub fn clear_twin(&self) {
        *self.bound_v6.locked() = None;
    }

    /// Record how one request ended.
    pub fn finish(
        &self,
        client: SocketAddr,
        file: &str,
        outcome: Outcome,
        detail: &str,
        bytes: u64,
    ) {
        if let Some(i) = OUTCOMES.iter().position(|(o, _)| *o == outcome) {
            self.outcomes[i].fetch_add(1, Ordering::Relaxed);
        }
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        let mut q = self.recent.locked();
        if q.len() == RECENT {
            q.pop_back();
        }
        q.push_front(Finished {
            time: SystemTime::now(),
            client,
            file: file.chars().take(200).collect(),
            outcome,
            detail: detail.into(),
            bytes,
        });
    }

    pub fn count(&self, outcome: Outcome) -> u64 {
        OUTCOMES
            .iter()
            .position(|(o, _)| *o == outcome)
            .map(|i| self.outcomes[i].load(Ordering::Relaxed))
            .unwrap_or(0)
    }
}

impl Stats {
    pub fn status(&self) -> TftpStatus {
        let recent = self
            .recent
            .locked()
            .iter()
            .map(|f| TftpTransferRow {
                unix_time: f
                    .time
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
                client: f.client.to_string(),
                file: f.file.clone(),
                result: name_of(f.outcome).to_string(),
                detail: f.detail.clone(),
                bytes: f.bytes,
            })
            .collect();
        let bound = self.bound.locked().clone();
        TftpStatus {
            listen: bound.as_ref().map(|b| b.0.to_string()),
            listen_v6: self.bound_v6.locked().map(|a| a.to_string()),
            root: bound.map(|b| b.1.display().to_string()),
            started: self.started.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed),
            transfers: OUTCOMES
                .iter()
                .map(|(o, n)| (n.to_string(), self.count(*o)))
                .collect(),
            bytes: self.bytes.load(Ordering::Relaxed),
            retransmitted_blocks: self.retransmits.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            busy_client_limit: self.client_limit.load(Ordering::Relaxed),
            recent,
        }
    }

    pub fn metrics(&self, out: &mut String) {
        family(
            out,
            "crc_appliance_tftp_started_total",
            Kind::Counter,
            "TFTP transfers that started sending (OACK or DATA 1).",
        )
        .sample(&[], self.started.load(Ordering::Relaxed));
        let mut f = family(
            out,
            "crc_appliance_tftp_requests_total",
            Kind::Counter,
            "TFTP requests by result.",
        );
        for (o, n) in OUTCOMES {
            f.sample(&[("result", &n)], self.count(o));
        }
        family(
            out,
            "crc_appliance_tftp_sent_bytes_total",
            Kind::Counter,
            "File bytes of completed TFTP transfers.",
        )
        .sample(&[], self.bytes.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_tftp_retransmitted_blocks_total",
            Kind::Counter,
            "DATA blocks re-sent after a timeout.",
        )
        .sample(&[], self.retransmits.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_tftp_malformed_total",
            Kind::Counter,
            "Malformed or unexpected datagrams on the TFTP listener.",
        )
        .sample(&[], self.malformed.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_tftp_client_limit_total",
            Kind::Counter,
            "TFTP read requests refused because the client held maxTransfersPerClient.",
        )
        .sample(&[], self.client_limit.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_tftp_active",
            Kind::Gauge,
            "TFTP transfers in progress.",
        )
        .sample(&[], self.active.load(Ordering::Relaxed));
    }
}
