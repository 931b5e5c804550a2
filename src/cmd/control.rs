//! `lb status|enable|disable`, `node reinstall` and `node boot`: admin API calls
//! answered in text for people (`--json` keeps the API's JSON for
//! machines).
//!
//! `lb status` is a table after HAProxy's `show stat`: one FRONTEND row per
//! pool, one row per backend with its state (UP, DOWN, DRAIN, MAINT, and
//! `UP 1/3` / `DOWN 1/2` while checks move it, as HAProxy prints them),
//! connections, the time since its last change and its last check. An
//! action answers one line; a refusal is one error line (the API's own
//! reason), never the JSON body.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::cmd::watch::go_duration;
use crate::model::cluster::Cluster;
use crate::services::lb::status::{BackendStatus, LbStatus, PoolStatus};

/// A 2xx answer's `ok` text (else its body), or one error line with the
/// API's reason and the HTTP status.
pub fn answer(what: &str, status: u16, body: &str) -> anyhow::Result<String> {
    #[derive(Deserialize)]
    struct Reply {
        ok: Option<String>,
        error: Option<String>,
    }
    let reply: Option<Reply> = serde_json::from_str(body).ok();
    if (200..300).contains(&status) {
        return Ok(match reply.and_then(|r| r.ok) {
            Some(ok) => ok,
            None => body.trim_end().to_string(),
        });
    }
    match reply.and_then(|r| r.error) {
        Some(why) => anyhow::bail!("{what}: {why} (HTTP {status})"),
        None => anyhow::bail!("{what}: admin API answered HTTP {status}: {}", body.trim()),
    }
}

/// `node boot NODE`: `serve` boots the node by its route and answers
/// what it did, one line per step.
pub async fn node_boot(cluster: &std::path::Path, node: &str) -> anyhow::Result<()> {
    let c = crate::config::load(cluster)?.cluster;
    if c.node(node).is_none() {
        anyhow::bail!("node boot {node}: node {node:?} is not in the cluster file");
    }
    let path = format!("/api/nodes/{node}/boot");
    let (status, body) = super::admin_call(&c, "POST", path).await?;
    for line in answer(&format!("node boot {node}"), status, &body)?.lines() {
        println!("{node}: {line}");
    }
    Ok(())
}

/// Why `node reinstall NODE` cannot work with this cluster file, if it
/// cannot: the install scripts are served only with an `rhcos` section
/// and the HTTP service.
pub fn reinstall_refusal(c: &Cluster, node: &str) -> Option<String> {
    let why = if c.node(node).is_none() {
        format!("node {node:?} is not in the cluster file")
    } else if !c.http.enabled {
        "the HTTP service is disabled, so the appliance serves no network boot; nothing to reset"
            .to_string()
    } else if c.rhcos.is_none() {
        "the cluster file has no `rhcos` section, so the appliance serves no install script (network boot); nothing to reset".to_string()
    } else {
        return None;
    };
    Some(format!("node reinstall {node}: {why}"))
}

/// What `node reinstall NODE` changes in practice, when the cluster file
/// does not send the node to the install script itself.
pub fn reinstall_note(c: &Cluster, node: &str) -> Option<String> {
    if c.tftp.is_some() || c.dhcp.pxe.is_some() {
        return None;
    }
    let base = crate::model::boot::http_base(c);
    let mut note = format!(
        "note: this cluster file has no `pxe:` section, so the appliance's DHCP sends no node to {base}/boot/boot.ipxe; {node} installs again only if its firmware or another DHCP server boots that script"
    );
    if c.node(node).is_some_and(|n| n.bmc.is_some()) {
        let _ = write!(
            note,
            " (it has a BMC: `bmc down {node}` then `bmc up {node}` boots its ISO, which installs)"
        );
    } else if c.libvirt.is_some() {
        note.push_str(" (libvirt VMs boot the ISO or their disk, not the network)");
    }
    Some(note)
}

/// `lb status` as a table.
pub fn lb_table(s: &LbStatus, now: u64) -> String {
    let mut rows = vec![
        [
            "POOL",
            "BACKEND",
            "ADDRESS",
            "STATE",
            "ACTIVE",
            "TOTAL",
            "LAST CHANGE",
            "LAST CHECK",
        ]
        .map(String::from),
    ];
    for p in &s.pools {
        rows.push(frontend_row(p));
        if let Some(v6) = &p.frontend_v6 {
            rows.push(
                [
                    p.name.as_str(),
                    "FRONTEND",
                    v6,
                    "OPEN",
                    "-",
                    "-",
                    "-",
                    "IPv6 (counted with the row above)",
                ]
                .map(String::from),
            );
        }
        for b in &p.backends {
            rows.push(backend_row(p, b, s, now));
        }
    }
    let mut out = columns(&rows);
    let h = &s.health;
    let _ = writeln!(
        out,
        "checks every {} (timeout {}): UP after {} passed, DOWN after {} failed; bootstrap-complete marker {} ({})",
        h.interval,
        h.timeout,
        h.rise,
        h.fall,
        s.bootstrap_complete_marker,
        if s.bootstrap_complete_marker_present {
            "present"
        } else {
            "absent"
        }
    );
    out
}

fn frontend_row(p: &PoolStatus) -> [String; 8] {
    let mut note = format!("check {}", p.check);
    for (n, what) in [
        (p.refused_clients, "refused (not a node)"),
        (p.closed_no_backend, "closed (no backend)"),
        (p.rejected_over_cap, "rejected (over the cap)"),
    ] {
        if n > 0 {
            let _ = write!(note, "; {n} {what}");
        }
    }
    [
        p.name.to_string(),
        "FRONTEND".into(),
        p.frontend.clone(),
        "OPEN".into(),
        p.active_connections.to_string(),
        p.total_connections.to_string(),
        "-".into(),
        note,
    ]
}

fn backend_row(p: &PoolStatus, b: &BackendStatus, s: &LbStatus, now: u64) -> [String; 8] {
    let changed = b.last_change.map_or("-".to_string(), |t| {
        format!(
            "{} ago",
            go_duration(Duration::from_secs(now.saturating_sub(t)))
        )
    });
    let check = if b.removed {
        "- (not checked while removed)".to_string()
    } else if b.consecutive_successes > 0 {
        format!("ok ({} in a row)", b.consecutive_successes)
    } else if b.consecutive_failures > 0 {
        let why = b
            .last_check_error
            .as_deref()
            .unwrap_or("no reason recorded");
        format!("failed ({} in a row): {why}", b.consecutive_failures)
    } else {
        "- (not checked yet)".to_string()
    };
    [
        p.name.to_string(),
        b.node.clone(),
        b.address.clone(),
        state(b, s.health.rise, s.health.fall),
        b.active_connections.to_string(),
        b.total_connections.to_string(),
        changed,
        check,
    ]
}

/// HAProxy's words: MAINT (removed), DRAIN (no new connections), UP or
/// DOWN, with `n/m` while checks are moving it the other way.
fn state(b: &BackendStatus, rise: u32, fall: u32) -> String {
    if b.removed {
        "MAINT".into()
    } else if b.disabled {
        "DRAIN".into()
    } else if b.healthy && b.consecutive_failures > 0 {
        format!("UP {}/{fall}", b.consecutive_failures)
    } else if b.healthy {
        "UP".into()
    } else if b.consecutive_successes > 0 {
        format!("DOWN {}/{rise}", b.consecutive_successes)
    } else {
        "DOWN".into()
    }
}

/// Left-aligned columns two spaces apart, each as wide as its widest cell
/// (the last one unpadded).
pub fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0; N];
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, (cell, w)) in r.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let _ = write!(line, "{cell:<w$}");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Now, in Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::catalogue::PoolKind;
    use crate::model::cluster::Role;
    use crate::services::lb::status::HealthStatus;

    fn backend(node: &str) -> BackendStatus {
        BackendStatus {
            node: node.into(),
            role: Role::Master,
            address: "10.0.0.10:6443".into(),
            healthy: false,
            disabled: false,
            removed: false,
            consecutive_successes: 0,
            consecutive_failures: 0,
            last_check_error: None,
            active_connections: 0,
            total_connections: 0,
            connect_failures: 0,
            last_change: Some(1000),
        }
    }

    #[test]
    fn states_are_haproxys_words() {
        let b = |f: &dyn Fn(&mut BackendStatus)| {
            let mut b = backend("m");
            f(&mut b);
            state(&b, 2, 3)
        };
        assert_eq!(b(&|_| {}), "DOWN");
        assert_eq!(b(&|b| b.consecutive_successes = 1), "DOWN 1/2");
        assert_eq!(b(&|b| b.healthy = true), "UP");
        assert_eq!(
            b(&|b| {
                b.healthy = true;
                b.consecutive_failures = 2
            }),
            "UP 2/3"
        );
        assert_eq!(
            b(&|b| {
                b.healthy = true;
                b.disabled = true
            }),
            "DRAIN"
        );
        assert_eq!(
            b(&|b| {
                b.disabled = true;
                b.removed = true
            }),
            "MAINT"
        );
    }

    #[test]
    fn the_table_has_a_frontend_row_per_pool_and_aligned_columns() {
        let mut up = backend("master-0");
        up.healthy = true;
        up.consecutive_successes = 4;
        up.active_connections = 2;
        up.total_connections = 17;
        let mut down = backend("master-1");
        down.address = "10.0.0.11:6443".into();
        down.consecutive_failures = 3;
        down.last_check_error = Some("connect: Connection refused".into());
        let s = LbStatus {
            health: HealthStatus {
                interval: "5s".into(),
                timeout: "3s".into(),
                rise: 2,
                fall: 3,
            },
            max_connections: 100,
            bootstrap_complete_marker: "/ign/bootstrap-complete".into(),
            bootstrap_complete_marker_present: false,
            bootstrap_complete_marker_stale: false,
            bootstrap_complete: None,
            remove_bootstrap: Default::default(),
            pools: vec![PoolStatus {
                name: PoolKind::Api,
                frontend: "10.0.0.1:6443".into(),
                frontend_v6: None,
                check: "https GET /readyz".into(),
                active_connections: 2,
                total_connections: 20,
                rejected_over_cap: 0,
                closed_no_backend: 3,
                refused_clients: 0,
                backends: vec![up, down],
            }],
        };
        let t = lb_table(&s, 1000 + 125);
        let want = "\
POOL  BACKEND   ADDRESS         STATE  ACTIVE  TOTAL  LAST CHANGE  LAST CHECK
api   FRONTEND  10.0.0.1:6443   OPEN   2       20     -            check https GET /readyz; 3 closed (no backend)
api   master-0  10.0.0.10:6443  UP     2       17     2m5s ago     ok (4 in a row)
api   master-1  10.0.0.11:6443  DOWN   0       0      2m5s ago     failed (3 in a row): connect: Connection refused
checks every 5s (timeout 3s): UP after 2 passed, DOWN after 3 failed; bootstrap-complete marker /ign/bootstrap-complete (absent)
";
        assert_eq!(t, want);
    }
}
