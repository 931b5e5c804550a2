//! The rules' inputs from what the service reads: API objects (JSON) →
//! [`Csr`] and Nodes, the plan → the inventory, the timeline → evidence;
//! and the approval body the service writes back, the one
//! `kubectl certificate approve` writes (an `Approved` condition).
//!
//! Pure: no I/O; RFC 3339 times by hand (UTC `Z` form, as the API server
//! writes them) rather than a date crate for two functions.

use std::collections::BTreeMap;
use std::net::IpAddr;

use base64::Engine as _;
use serde_json::{Value, json};

use super::request;
use super::rules::{Csr, Evidence, InventoryNode};
use crate::model::cluster::{Cluster, Role};
use crate::timeline::status::TimelineStatus;

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `2026-11-28T16:42:57Z` → Unix seconds.
pub fn parse_time(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let days = days_from_civil(n(0..4)?, n(5..7)?, n(8..10)?);
    let secs = days * 86_400 + n(11..13)? * 3600 + n(14..16)? * 60 + n(17..19)?;
    u64::try_from(secs).ok()
}

/// Unix seconds → `2026-11-28T16:42:57Z`.
pub fn format_time(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A CSR object → the rules' view (`None` without a name).
pub fn csr(obj: &Value) -> Option<Csr> {
    let name = obj["metadata"]["name"].as_str()?.to_string();
    let spec = &obj["spec"];
    let pem = spec["request"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    let decided = obj["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| matches!(c["type"].as_str(), Some("Approved" | "Denied" | "Failed")))
    });
    Some(Csr {
        name,
        signer: spec["signerName"].as_str().unwrap_or_default().to_string(),
        username: spec["username"].as_str().unwrap_or_default().to_string(),
        groups: strings(&spec["groups"]),
        usages: strings(&spec["usages"]),
        expiration_seconds: spec["expirationSeconds"].as_u64(),
        created: obj["metadata"]["creationTimestamp"]
            .as_str()
            .and_then(parse_time)
            .unwrap_or(0),
        request: pem
            .as_deref()
            .map_or(Err(request::RequestError::NotPem), request::parse_pem),
        pending: !decided,
    })
}

/// Node objects → name → Ready.
pub fn nodes(list: &Value) -> BTreeMap<String, bool> {
    let items = list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    items
        .iter()
        .filter_map(|n| {
            let name = n["metadata"]["name"].as_str()?.to_string();
            let ready = n["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            Some((name, ready))
        })
        .collect()
}

/// The nodes of the cluster file that may join (not the bootstrap).
pub fn inventory(c: &Cluster) -> Vec<InventoryNode> {
    c.nodes
        .iter()
        .filter(|n| n.role != Role::Bootstrap)
        .map(|n| {
            let mut addrs = vec![IpAddr::V4(n.ip)];
            addrs.extend(n.ipv6.filter(|_| c.network.ipv6.is_some()).map(IpAddr::V6));
            InventoryNode {
                name: n.name.clone(),
                fqdn: c.fqdn(&n.name),
                addrs,
            }
        })
        .collect()
}

/// What the timeline saw of each node: its ignition fetch from its own
/// address (this attempt), and its lease renewal, BMC power-on or VM start.
pub fn evidence(t: &TimelineStatus) -> BTreeMap<String, Evidence> {
    t.nodes
        .iter()
        .map(|n| {
            let boots = [n.lease_renewed, n.bmc_power_on, n.vm_started]
                .into_iter()
                .flatten()
                .collect();
            let ev = Evidence {
                ignition: n.ignition.into_iter().collect(),
                boots,
            };
            (n.node.clone(), ev)
        })
        .collect()
}

/// The body of `PUT …/approval`: the object with an `Approved` condition
/// added, as `kubectl certificate approve` sends it.
pub fn approval(obj: &Value, message: &str, now: u64) -> Value {
    let mut obj = obj.clone();
    let condition = json!({
        "type": "Approved",
        "status": "True",
        "reason": "CrcApplianceApprove",
        "message": message,
        "lastUpdateTime": format_time(now),
    });
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    match obj["status"]["conditions"].as_array_mut() {
        Some(list) => list.push(condition),
        None => obj["status"]["conditions"] = json!([condition]),
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        for (text, secs) in [
            ("1970-01-01T00:00:00Z", 0),
            ("2026-11-28T16:42:57Z", 1_795_884_177),
            ("2000-02-29T23:59:59Z", 951_868_799),
        ] {
            assert_eq!(parse_time(text), Some(secs), "{text}");
            assert_eq!(format_time(secs), text);
        }
        assert_eq!(parse_time("2026-11-28 16:42:57"), None);
        assert_eq!(parse_time("2026-11-28T16:42:57.5Z"), None);
    }

    #[test]
    fn approval_adds_the_condition_kubectl_adds() {
        let obj = json!({"metadata": {"name": "a", "resourceVersion": "7"}, "spec": {}});
        let a = approval(&obj, "why", 0);
        assert_eq!(a["status"]["conditions"][0]["type"], "Approved");
        assert_eq!(a["status"]["conditions"][0]["status"], "True");
        assert_eq!(a["metadata"]["resourceVersion"], "7");
        assert!(csr(&a).is_some_and(|c| !c.pending));
    }
}
