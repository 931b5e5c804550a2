//! Counters and the recent-transfer log of the TFTP service (the `tftp`
//! [`StatusSource`] on the admin listener), and the `check` summary line.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::config::TftpCfg;
use crate::hub::StatusSource;
use crate::metrics::{Kind, family};

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
    /// Over `maxTransfers`.
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
    listen: SocketAddr,
    root: PathBuf,
    pub started: AtomicU64,
    outcomes: [AtomicU64; 5],
    pub bytes: AtomicU64,
    pub retransmits: AtomicU64,
    pub malformed: AtomicU64,
    pub active: AtomicI64,
    recent: Mutex<VecDeque<Finished>>,
}

impl Stats {
    pub fn new(listen: SocketAddr, root: PathBuf) -> Stats {
        Stats {
            listen,
            root,
            started: AtomicU64::new(0),
            outcomes: Default::default(),
            bytes: AtomicU64::new(0),
            retransmits: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            active: AtomicI64::new(0),
            recent: Mutex::default(),
        }
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
        let mut q = self.recent.lock().unwrap_or_else(|e| e.into_inner());
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

impl StatusSource for Stats {
    fn name(&self) -> &'static str {
        "tftp"
    }

    fn status(&self) -> Value {
        let recent: Vec<Value> = self
            .recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|f| {
                json!({
                    "unixTime": f.time.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
                    "client": f.client.to_string(),
                    "file": f.file,
                    "result": name_of(f.outcome),
                    "detail": f.detail,
                    "bytes": f.bytes,
                })
            })
            .collect();
        let mut by = serde_json::Map::new();
        for (o, n) in OUTCOMES {
            by.insert(n.into(), self.count(o).into());
        }
        json!({
            "listen": self.listen.to_string(),
            "root": self.root.display().to_string(),
            "started": self.started.load(Ordering::Relaxed),
            "active": self.active.load(Ordering::Relaxed),
            "transfers": by,
            "bytes": self.bytes.load(Ordering::Relaxed),
            "retransmittedBlocks": self.retransmits.load(Ordering::Relaxed),
            "malformed": self.malformed.load(Ordering::Relaxed),
            "recent": recent,
        })
    }

    fn metrics(&self, out: &mut String) {
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
            "crc_appliance_tftp_active",
            Kind::Gauge,
            "TFTP transfers in progress.",
        )
        .sample(&[], self.active.load(Ordering::Relaxed));
    }
}

/// Boot files `check` looks for: the first name of each entry that exists
/// counts (Debian `ipxe` names first, then Fedora/RHEL `ipxe-bootimgs-*`).
pub const BOOT_FILES: [&[&str]; 5] = [
    &["undionly.kpxe"],
    &["ipxe.efi", "ipxe-x86_64.efi"],
    &["snponly.efi", "ipxe-snponly-x86_64.efi"],
    &["ipxe.pxe"],
    &["arm64-efi/snponly.efi"],
];

/// `tftp on|off <addr> root <dir> (found: …; missing: …)` for `check`.
/// A file counts as found only if the server would serve it (same rules).
pub fn check_line(c: &TftpCfg) -> String {
    let root = c.root.canonicalize();
    let allowed: Vec<PathBuf> = c
        .allow_symlinks_to
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for names in BOOT_FILES {
        let hit = names.iter().find(|n| match &root {
            Ok(r) => super::path::open(r, &allowed, Path::new(n)).is_ok(),
            Err(_) => false,
        });
        match hit {
            Some(n) => found.push(*n),
            None => missing.push(names[0]),
        }
    }
    let root_note = if root.is_err() {
        " (does not exist)"
    } else {
        ""
    };
    format!(
        "tftp {} {} root {}{root_note} (found: {}; missing: {})",
        if c.enabled { "on" } else { "off" },
        c.listen,
        c.root.display(),
        if found.is_empty() {
            "none".into()
        } else {
            found.join(", ")
        },
        if missing.is_empty() {
            "none".into()
        } else {
            missing.join(", ")
        },
    )
}
