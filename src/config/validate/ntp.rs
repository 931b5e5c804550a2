//! The top-level `ntp:` section: the appliance's NTP server (issue #24).
//! Its defaults and validation (the raw type: `raw/ntp.rs`).
//!
//! Defaults: the section absent = no NTP service (the port is privileged
//! and a host may already run chronyd; existing cluster files keep their
//! exact DHCP answers); present = `enabled: true`, `listen:
//! <applianceIP>:123`, no `localStratum` (the host clock is served as
//! synchronised only when the kernel says it is), `clientRate: 8`
//! requests per second per client address with a burst of `2 × clientRate`,
//! no `allowFrom` (every client is answered; with it, only clients inside
//! one of its networks).

use std::net::{Ipv4Addr, SocketAddr};

use crate::config::FieldError;
use crate::config::raw::RawNtp;
use crate::model::cluster::IpNet;
use crate::model::cluster::NtpCfg;

/// Validate `ntp:`. `None` when absent or invalid (errors pushed with
/// their field paths).
pub(super) fn ntp(
    raw: Option<&RawNtp>,
    appliance_ip: Option<Ipv4Addr>,
    errs: &mut Vec<FieldError>,
) -> Option<NtpCfg> {
    let raw = raw?;
    let before = errs.len();
    let mut push = |path: &str, message: String| {
        errs.push(FieldError {
            path: path.into(),
            message,
        })
    };
    let listen = match &raw.listen {
        Some(text) => super::parse_sock(text, Some(123))
            .map_err(|err| push("ntp.listen", err.to_string()))
            .ok(),
        None => appliance_ip.map(|ip| SocketAddr::new(ip.into(), 123)),
    };
    if let Some(s) = raw.local_stratum
        && !(1..=15).contains(&s)
    {
        push("ntp.localStratum", format!("{s} is out of range (1 to 15)"));
    }
    if raw.client_rate == 0 || raw.client_rate > 100_000 {
        push(
            "ntp.clientRate",
            format!("{} is out of range (1 to 100000)", raw.client_rate),
        );
    }
    let allow_from = raw.allow_from.as_ref().map(|list| {
        if list.is_empty() {
            push(
                "ntp.allowFrom",
                "is empty, which refuses every client: list the client networks, or omit it to answer every client".into(),
            );
        }
        list.iter()
            .enumerate()
            .filter_map(|(i, text)| {
                text.parse::<IpNet>()
                    .map_err(|e| {
                        push(
                            &format!("ntp.allowFrom[{i}]"),
                            format!("{text:?}: {e} (a CIDR such as 10.0.0.0/24 or fd00::/64, or one address)"),
                        )
                    })
                    .ok()
            })
            .collect()
    });
    if errs.len() != before {
        return None;
    }
    Some(NtpCfg {
        enabled: raw.enabled,
        listen: listen?,
        local_stratum: raw.local_stratum,
        client_rate: raw.client_rate,
        allow_from,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(yaml: &str) -> (Option<NtpCfg>, Vec<String>) {
        let raw: RawNtp = serde_saphyr::from_str(yaml).expect("yaml");
        let mut errs = Vec::new();
        let out = ntp(Some(&raw), Some(Ipv4Addr::new(10, 0, 0, 1)), &mut errs);
        (out, errs.into_iter().map(|e| e.path).collect())
    }

    #[test]
    fn defaults() {
        let (c, e) = run("{}");
        assert!(e.is_empty());
        let c = c.unwrap();
        assert!(c.enabled);
        assert_eq!(c.listen, "10.0.0.1:123".parse().unwrap());
        assert_eq!(c.local_stratum, None);
        assert_eq!(c.client_rate, 8);
    }

    #[test]
    fn explicit_values_and_a_bare_ip() {
        let (c, _) =
            run("{enabled: false, listen: '127.0.0.1:1123', localStratum: 10, clientRate: 2}");
        let c = c.unwrap();
        assert!(!c.enabled);
        assert_eq!(c.listen.port(), 1123);
        assert_eq!(c.local_stratum, Some(10));
        let (c, _) = run("{listen: '127.0.0.9'}");
        assert_eq!(c.unwrap().listen, "127.0.0.9:123".parse().unwrap());
    }

    #[test]
    fn errors_name_their_fields() {
        let (c, e) = run("{listen: nope, localStratum: 16, clientRate: 0}");
        assert!(c.is_none());
        assert_eq!(e, ["ntp.listen", "ntp.localStratum", "ntp.clientRate"]);
        let (_, e) = run("{localStratum: 0}");
        assert_eq!(e, ["ntp.localStratum"]);
    }

    #[test]
    fn allow_from_takes_cidrs_and_addresses_of_both_families() {
        let (c, e) = run("{allowFrom: ['10.0.0.0/24', '127.0.0.1', 'fd00:1::/64', '::1']}");
        assert!(e.is_empty(), "{e:?}");
        let nets = c.unwrap().allow_from.unwrap();
        assert_eq!(nets.len(), 4);
        let inside = |ip: &str| nets.iter().any(|n| n.contains(ip.parse().unwrap()));
        assert!(inside("10.0.0.9") && inside("127.0.0.1") && inside("fd00:1::5"));
        assert!(inside("::ffff:10.0.0.9") && inside("::1"));
        assert!(!inside("10.0.1.9") && !inside("127.0.0.2") && !inside("fd00:2::5"));
        assert_eq!(run("{}").0.unwrap().allow_from, None);
        let (c, e) = run("{allowFrom: ['10.0.0.1/24', nope, '10.0.0.0/33']}");
        assert!(c.is_none());
        assert_eq!(
            e,
            ["ntp.allowFrom[0]", "ntp.allowFrom[1]", "ntp.allowFrom[2]"]
        );
        assert_eq!(run("{allowFrom: []}").1, ["ntp.allowFrom"]);
    }

    #[test]
    fn unknown_fields_are_refused_and_absent_is_off() {
        assert!(serde_saphyr::from_str::<RawNtp>("{localstratum: 3}").is_err());
        assert!(ntp(None, None, &mut Vec::new()).is_none());
    }
}
