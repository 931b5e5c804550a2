//! `status --cluster F` and `wait-for GOAL --cluster F`: read the running
//! `serve`'s timeline through the admin API (`GET /status`).
//!
//! `wait-for` polls every [`POLL`] until the goal's phase is reached (exit
//! 0) or `--timeout` passes (error listing what is missing); it prints the
//! deadline first, one line per step as steps happen, "Still waiting" with
//! the reason after every [`NOTICE_EVERY`] without other output, and the
//! time elapsed at the end (the messages of `openshift-install wait-for`).
//! An unreachable admin API is retried until the timeout (serve may be
//! restarting); its error is the "Still waiting" reason meanwhile.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cmd::admin_client;
use crate::serve::status::StatusDoc;
use crate::timeline::render::{self, Goal};
use crate::timeline::status::TimelineStatus;

/// How often `wait-for` asks.
pub const POLL: Duration = Duration::from_secs(1);

/// The admin listener and its token.
pub struct Target {
    pub addr: SocketAddr,
    pub token: Option<String>,
}

/// The timeline of the running `serve`.
pub async fn fetch(t: &Target) -> anyhow::Result<TimelineStatus> {
    fetch_doc(t)
        .await?
        .timeline
        .ok_or_else(|| anyhow::anyhow!("the running serve has no install timeline"))
}

/// The running `serve`'s `/status` document.
pub async fn fetch_doc(t: &Target) -> anyhow::Result<StatusDoc> {
    let (addr, token) = (t.addr, t.token.clone());
    let (status, body) = tokio::task::spawn_blocking(move || {
        admin_client::request(addr, token.as_deref(), "GET", "/status")
    })
    .await??;
    if status != 200 {
        anyhow::bail!("admin API answered HTTP {status}: {}", body.trim());
    }
    serde_json::from_str(&body).map_err(|e| anyhow::anyhow!("unexpected /status document: {e}"))
}

/// `status`: the table, or the `timeline` JSON with `--json`.
pub async fn status(t: &Target, json: bool) -> anyhow::Result<()> {
    let doc = fetch_doc(t).await?;
    let tl = doc
        .timeline
        .ok_or_else(|| anyhow::anyhow!("the running serve has no install timeline"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&tl)?);
    } else {
        print!("{}", render::table(&tl));
        for line in doc
            .ntp
            .iter()
            .flat_map(crate::services::ntp::status::clock_lines)
        {
            println!("{line}");
        }
        if let Some(h) = doc.http.as_ref().and_then(|h| h.https.as_ref()) {
            println!("{}", https_line(h));
        }
        if let Some(h) = &doc.ha {
            println!("{}", ha_line(h));
        }
    }
    Ok(())
}

/// The HTTPS boot ISO listener and its certificate, for an operator who
/// uploads it to a BMC's trust store.
pub fn https_line(h: &crate::services::http::status::HttpsStatus) -> String {
    let origin = if h.cert.generated {
        "generated"
    } else {
        "http.tls"
    };
    format!(
        "https boot ISOs on {}: certificate {} ({origin}), SHA-256 {}",
        h.listen.as_deref().unwrap_or("-"),
        h.cert.cert_file.display(),
        h.cert.sha256
    )
}

/// `status`'s line for an HA member: who holds the VIPs, the peer, the
/// last sync.
pub fn ha_line(h: &crate::runtime::ha::HaStatus) -> String {
    let holder = if h.holds_vips {
        "this member holds the VIPs".to_string()
    } else {
        format!("the peer {} holds the VIPs", h.peer)
    };
    let peer = if h.peer_reachable {
        "peer reachable".to_string()
    } else {
        format!(
            "peer {} UNREACHABLE{}",
            h.peer,
            h.peer_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        )
    };
    let sync = match h.last_sync {
        Some(t) => format!(
            "last sync {}",
            clock(std::time::UNIX_EPOCH + Duration::from_secs(t))
        ),
        None => "never synced".to_string(),
    };
    let at = |t: u64| clock(std::time::UNIX_EPOCH + Duration::from_secs(t));
    let direction = |d: &crate::runtime::ha::SyncDirection| {
        let last = d.last_ok.map_or("never worked".to_string(), |t| {
            format!("last worked {}", at(t))
        });
        match (&d.error, d.error_at) {
            (Some(e), t) => format!(
                "FAILING since {} ({e}); {last}",
                t.map_or("-".to_string(), at)
            ),
            (None, _) => format!("{last} ({} bytes)", d.bytes),
        }
    };
    let mut out = format!(
        "ha: {holder}; {peer}; {sync}; {} entries learned from the peer",
        h.learned
    );
    out.push_str(&format!(
        "\n  ha sent (our exchanges): {}",
        direction(&h.sent)
    ));
    out.push_str(&format!(
        "\n  ha received (the peer's exchanges): {}",
        direction(&h.received)
    ));
    if h.doc_limit > 0 && h.doc_bytes > h.doc_limit {
        out.push_str(&format!(
            "\n  ha: SYNC STOPPED: our document is {} bytes, over the {}-byte limit",
            h.doc_bytes, h.doc_limit
        ));
    }
    if h.skipped > 0 {
        out.push_str(&format!(
            "\n  ha: {} entries of the peer's documents left out (latest: {})",
            h.skipped,
            h.last_skipped.as_deref().unwrap_or("-")
        ));
    }
    out
}

/// The goal was not reached in time.
#[derive(Debug, thiserror::Error)]
#[error("{goal} not reached after {}; missing:\n  {}", go_duration(*waited), missing.join("\n  "))]
pub struct NotReached {
    pub goal: &'static str,
    pub waited: Duration,
    pub missing: Vec<String>,
}

/// How often `wait-for` says "Still waiting" while nothing else was
/// printed, unless [`NOTICE_ENV`] says otherwise.
pub const NOTICE_EVERY: Duration = Duration::from_secs(30);

/// Environment variable overriding [`NOTICE_EVERY`] (a duration such as
/// `1s`). For tests, which cannot wait 30 s per notice; documented as such.
pub const NOTICE_ENV: &str = "CRC_APPLIANCE_WAIT_NOTICE_INTERVAL";

/// The "Still waiting" interval: [`NOTICE_ENV`] or [`NOTICE_EVERY`].
pub fn notice_interval() -> anyhow::Result<Duration> {
    match std::env::var(NOTICE_ENV) {
        Err(_) => Ok(NOTICE_EVERY),
        Ok(v) => crate::config::duration::parse(&v)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| anyhow::anyhow!("{NOTICE_ENV}={v:?} is not a duration such as 30s")),
    }
}

/// `wait-for GOAL`, as `openshift-install wait-for` reports: the deadline
/// first, the progress lines as they happen, "Still waiting: <why>" after
/// every `notice` without other output (with the admin API's error while
/// `serve` cannot be reached), and the time it took at the end.
pub async fn wait_for(
    t: &Target,
    goal: Goal,
    timeout: Duration,
    notice: Duration,
) -> anyhow::Result<()> {
    let name = goal.name();
    let start = Instant::now();
    println!(
        "Waiting up to {} (until {} UTC) for {name}...",
        go_duration(timeout),
        clock(SystemTime::now() + timeout)
    );
    let mut last: Option<TimelineStatus> = None;
    let mut quiet_since = start;
    loop {
        let last_err = match fetch(t).await {
            Ok(tl) => {
                let lines = render::progress(last.as_ref(), &tl);
                if !lines.is_empty() {
                    quiet_since = Instant::now();
                }
                for line in lines {
                    println!("{line}");
                }
                if goal.reached(&tl) {
                    println!("{name}: reached");
                    println!("Time elapsed: {}", go_duration(start.elapsed()));
                    return Ok(());
                }
                last = Some(tl);
                None
            }
            Err(e) => Some(e),
        };
        if start.elapsed() >= timeout {
            let mut missing = last
                .as_ref()
                .map(|tl| render::missing(tl, goal))
                .unwrap_or_default();
            if let Some(e) = last_err {
                missing.push(format!("admin API: {e:#}"));
            }
            return Err(NotReached {
                goal: name,
                waited: start.elapsed(),
                missing,
            }
            .into());
        }
        if quiet_since.elapsed() >= notice {
            println!(
                "Still waiting for {name}: {}",
                reason(last.as_ref(), last_err.as_ref(), goal)
            );
            quiet_since = Instant::now();
        }
        tokio::time::sleep(POLL.min(timeout.saturating_sub(start.elapsed()))).await;
    }
}

/// Why the goal is not reached yet, on one line: the admin API's error
/// when `serve` cannot be asked, else the first things missing.
fn reason(tl: Option<&TimelineStatus>, err: Option<&anyhow::Error>, goal: Goal) -> String {
    if let Some(e) = err {
        return format!("{e:#}");
    }
    let missing = tl.map(|tl| render::missing(tl, goal)).unwrap_or_default();
    const SHOWN: usize = 3;
    let mut out = missing
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if missing.len() > SHOWN {
        out.push_str(&format!(" (and {} more)", missing.len() - SHOWN));
    }
    out
}

/// A duration as Go prints one (`40m0s`, `1h0m0s`, `3s`), the form
/// openshift-install's messages use; whole seconds, `ms` below one.
pub fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s == 0 && d.as_millis() > 0 {
        return format!("{}ms", d.as_millis());
    }
    let (h, m, s) = (s / 3600, (s / 60) % 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

/// `HH:MM:SS` of a point in time, UTC.
fn clock(t: SystemTime) -> String {
    let s = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_openshift_install_prints_them() {
        let d = Duration::from_secs;
        assert_eq!(go_duration(d(40 * 60)), "40m0s");
        assert_eq!(go_duration(d(3600)), "1h0m0s");
        assert_eq!(go_duration(d(86)), "1m26s");
        assert_eq!(go_duration(d(3)), "3s");
        assert_eq!(go_duration(d(0)), "0s");
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(go_duration(Duration::from_millis(2900)), "2s");
    }

    #[test]
    fn the_reason_is_the_error_or_the_first_things_missing() {
        let e = anyhow::anyhow!("cannot reach the admin API");
        assert_eq!(
            reason(None, Some(&e), Goal::BootstrapComplete),
            "cannot reach the admin API"
        );
        let mut tl = TimelineStatus::default();
        for n in ["a", "b", "c", "d"] {
            tl.nodes.push(crate::timeline::status::NodeTimeline {
                node: n.into(),
                role: Some(crate::model::cluster::Role::Master),
                ..Default::default()
            });
        }
        assert_eq!(
            reason(Some(&tl), None, Goal::BootstrapComplete),
            "a: no DHCP lease yet; b: no DHCP lease yet; c: no DHCP lease yet (and 2 more)"
        );
    }
}
