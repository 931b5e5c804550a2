//! `status --cluster F` and `wait-for GOAL --cluster F`: read the running
//! `serve`'s timeline through the admin API (`GET /status`).
//!
//! `wait-for` polls every [`POLL`] until the goal's phase is reached (exit
//! 0) or `--timeout` passes (error listing what is missing); it prints one
//! line per step as steps happen. An unreachable admin API is retried
//! until the timeout (serve may be restarting) and reported then.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::cmd::admin_client;
use crate::runtime::status::{StatusDoc, TimelineStatus};
use crate::timeline::render::{self, Goal};

/// How often `wait-for` asks.
pub const POLL: Duration = Duration::from_secs(1);

/// The admin listener and its token.
pub struct Target {
    pub addr: SocketAddr,
    pub token: Option<String>,
}

/// The timeline of the running `serve`.
pub async fn fetch(t: &Target) -> anyhow::Result<TimelineStatus> {
    let (addr, token) = (t.addr, t.token.clone());
    let (status, body) = tokio::task::spawn_blocking(move || {
        admin_client::request(addr, token.as_deref(), "GET", "/status")
    })
    .await??;
    if status != 200 {
        anyhow::bail!("admin API answered HTTP {status}: {}", body.trim());
    }
    let doc: StatusDoc = serde_json::from_str(&body)
        .map_err(|e| anyhow::anyhow!("unexpected /status document: {e}"))?;
    doc.timeline
        .ok_or_else(|| anyhow::anyhow!("the running serve has no install timeline"))
}

/// `status`: the table, or the `timeline` JSON with `--json`.
pub async fn status(t: &Target, json: bool) -> anyhow::Result<()> {
    let tl = fetch(t).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&tl)?);
    } else {
        print!("{}", render::table(&tl));
    }
    Ok(())
}

/// The goal was not reached in time.
#[derive(Debug, thiserror::Error)]
#[error("{goal} not reached after {waited}s; missing:\n  {}", missing.join("\n  "))]
pub struct NotReached {
    pub goal: &'static str,
    pub waited: u64,
    pub missing: Vec<String>,
}

/// `wait-for GOAL`.
pub async fn wait_for(t: &Target, goal: Goal, timeout: Duration) -> anyhow::Result<()> {
    let name = match goal {
        Goal::BootstrapComplete => "bootstrap-complete",
        Goal::InstallComplete => "install-complete",
    };
    let start = Instant::now();
    let mut last: Option<TimelineStatus> = None;
    loop {
        let last_err = match fetch(t).await {
            Ok(tl) => {
                for line in render::progress(last.as_ref(), &tl) {
                    println!("{line}");
                }
                if goal.reached(&tl) {
                    println!("{name}: reached");
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
                waited: start.elapsed().as_secs(),
                missing,
            }
            .into());
        }
        tokio::time::sleep(POLL.min(timeout.saturating_sub(start.elapsed()))).await;
    }
}
