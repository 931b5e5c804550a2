//! `check`: the refusals `check` adds to the config's own validation (as
//! `serve` would refuse), and the summary it prints of a valid file.
//!
//! Invariants: nothing here binds, writes or connects; the summary lists
//! every service through [`ServiceKind::ALL`] and an exhaustive match, so a
//! new service does not compile until it says what `check` prints for it.

use crate::config;
use crate::model::catalogue::ServiceKind;
use crate::plan::Plan;

/// `check` refuses a single-master inventory that has neither a bootstrap
/// node nor the bootstrap-in-place Ignition (`serve` runs it as a bootstrap
/// install and preflight warns).
pub(super) fn check_mode(plan: &Plan, path: &std::path::Path) -> Result<(), config::ConfigError> {
    use crate::model::mode::{BIP_IGNITION, missing_bip};
    let c = &plan.cluster;
    let dir = &c.http.ignition_dir;
    let bip = dir.join(BIP_IGNITION).is_file();
    match missing_bip(c.shape(), bip, &dir.display().to_string()) {
        None => Ok(()),
        Some(why) => Err(config::ConfigError::Invalid {
            path: path.to_path_buf(),
            errors: vec![config::FieldError {
                path: "nodes".into(),
                message: format!("{}; {}", why.problem, why.fix),
            }],
        }),
    }
}

/// `check` refuses a kept generated HTTPS key that group or others can
/// read, as `serve` does (`http.tls.keyFile` is checked with the config).
pub(super) fn check_https_key(
    plan: &Plan,
    path: &std::path::Path,
) -> Result<(), config::ConfigError> {
    let c = &plan.cluster;
    if c.http.tls_listen.is_none() || c.http.tls.is_some() {
        return Ok(());
    }
    crate::runtime::certs::check_kept_key(c).map_err(|message| config::ConfigError::Invalid {
        path: path.to_path_buf(),
        errors: vec![config::FieldError {
            path: "http.tlsListen".into(),
            message: message.to_string(),
        }],
    })
}

/// `check`'s HTTPS line: the certificate a BMC must trust, when it exists
/// (it is generated at `serve`'s first start otherwise).
fn https_check_line(c: &crate::model::cluster::Cluster, l: std::net::SocketAddr) -> String {
    use crate::runtime::certs;
    let on = if c.http.enabled { "on" } else { "off" };
    let cert = match certs::peek(c) {
        Some(i) => format!("{} SHA-256 {}", i.cert_file.display(), i.sha256),
        None => match &c.http.tls {
            Some(t) => format!(
                "{} (does not load: serve will say why)",
                t.cert_file.display()
            ),
            None => format!(
                "{} (generated at serve's first start)",
                certs::generated_paths(c).0.display()
            ),
        },
    };
    format!("https {on} {l} certificate {cert}")
}

/// `check`'s lines for one service. The match is exhaustive: a new
/// service does not compile until it says what `check` prints for it.
fn service_lines(plan: &Plan, kind: ServiceKind) -> Vec<String> {
    let c = &plan.cluster;
    let on = |b: bool| if b { "on" } else { "off" };
    match kind {
        // Printed after the BMC line, with the other node drivers.
        ServiceKind::Libvirt => vec![],
        ServiceKind::Registry => c
            .registry
            .iter()
            .map(|r| {
                format!(
                    "registry on {} as {} (storage {}, delete {})",
                    r.listen,
                    r.name,
                    r.storage.display(),
                    on(r.allow_delete)
                )
            })
            .collect(),
        ServiceKind::Dns => vec![format!(
            "dns {} {:?} ({} zones, {} records)",
            on(c.dns.enabled),
            c.dns.listen,
            plan.zones.len(),
            plan.zones.iter().map(|z| z.records.len()).sum::<usize>()
        )],
        ServiceKind::Dhcp => vec![format!(
            "dhcp {} {} ({} reservations)",
            on(c.dhcp.enabled),
            c.dhcp.listen,
            plan.reservations.len()
        )],
        ServiceKind::Dhcp6 => c
            .network
            .ipv6
            .iter()
            .map(|v6| {
                format!(
                    "dhcp6 {} {} ({} reservations, router advertisements {})",
                    on(c.runs(ServiceKind::Dhcp6)),
                    c.dhcp.listen6,
                    c.nodes.iter().filter(|n| n.ipv6.is_some()).count(),
                    on(v6.router_advertisements)
                )
            })
            .collect(),
        ServiceKind::Lb => vec![format!(
            "lb {} api {} machine-config {} http {} https {}",
            on(c.lb.enabled),
            c.lb.api,
            c.lb.machine_config,
            c.lb.ingress_http,
            c.lb.ingress_https
        )],
        ServiceKind::Http => {
            let mut v = vec![format!("http {} {}", on(c.http.enabled), c.http.listen)];
            v.extend(c.http.tls_listen.map(|l| https_check_line(c, l)));
            v
        }
        ServiceKind::Admin => vec![format!("admin {} {}", on(c.admin.enabled), c.admin.listen)],
        ServiceKind::Tftp => c
            .tftp
            .iter()
            .map(crate::boot::bootfiles::check_line)
            .collect(),
        ServiceKind::Ntp => c
            .ntp
            .iter()
            .map(|n| {
                let allow = n.allow_from.as_ref().map_or("any".to_string(), |nets| {
                    nets.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                });
                format!(
                    "ntp {} {} stratum {} ({} requests/s per client, clients {allow})",
                    on(n.enabled),
                    n.listen,
                    n.local_stratum
                        .map_or("from the host clock".to_string(), |s| s.to_string()),
                    n.client_rate
                )
            })
            .collect(),
        ServiceKind::Csr => c
            .csr
            .iter()
            .map(|x| {
                format!(
                    "csr on kubeconfig {} window {}s recovery {}",
                    x.kubeconfig_file.display(),
                    x.window.as_secs(),
                    on(x.recovery)
                )
            })
            .collect(),
    }
}

/// `check` output: what the file declares and what will be served.
pub fn summary(plan: &Plan) -> String {
    use std::fmt::Write as _;
    let c = &plan.cluster;
    let mut out = String::new();
    let _ = writeln!(out, "cluster {} is valid", c.domain);
    let _ = writeln!(
        out,
        "mode {}",
        crate::model::mode::describe(c.mode, c.shape())
    );
    let _ = writeln!(
        out,
        "network {} gateway {} appliance {} api {} ingress {}",
        c.network.cidr,
        c.network.gateway,
        c.network.appliance_ip,
        c.api_address(),
        c.apps_addresses()
            .iter()
            .map(|ip| ip.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    if let Some(v6) = c.ipv6() {
        let opt = |ip: Option<std::net::Ipv6Addr>| ip.map_or("-".to_string(), |ip| ip.to_string());
        let _ = writeln!(
            out,
            "ipv6 {} gateway {} appliance {} api {} ingress {} router-advertisements {} pool {}",
            v6.cidr,
            opt(v6.gateway),
            v6.appliance_ip,
            opt(c.api_address_v6()),
            c.apps_addresses_v6()
                .iter()
                .map(|ip| ip.to_string())
                .collect::<Vec<_>>()
                .join(","),
            if v6.router_advertisements {
                "on"
            } else {
                "off"
            },
            v6.pool.map_or("-".to_string(), |(s, e)| format!("{s}-{e}")),
        );
    }
    for r in crate::model::cluster::Role::ALL {
        let names: Vec<_> = c.nodes_with_role(r).map(|n| n.name.as_str()).collect();
        let _ = writeln!(out, "{:<9} {} {}", r.as_str(), names.len(), names.join(" "));
    }
    let statics: Vec<String> = c
        .nodes
        .iter()
        .filter(|n| n.static_address)
        .map(|n| format!("{}({})", n.name, n.interface.as_deref().unwrap_or("-")))
        .collect();
    if !statics.is_empty() {
        let ns: Vec<String> = crate::model::staticnet::nameservers(c)
            .iter()
            .map(ToString::to_string)
            .collect();
        let ns = if ns.is_empty() {
            "none".into()
        } else {
            ns.join(",")
        };
        let _ = writeln!(
            out,
            "static addresses {} nameserver {ns}",
            statics.join(" ")
        );
    }
    for kind in ServiceKind::ALL {
        for line in service_lines(plan, kind) {
            let _ = writeln!(out, "{line}");
        }
    }
    let bmc: Vec<_> = c
        .nodes
        .iter()
        .filter(|n| n.bmc.is_some())
        .map(|n| n.name.as_str())
        .collect();
    if !bmc.is_empty() {
        let _ = writeln!(out, "bmc {} {}", bmc.len(), bmc.join(" "));
    }
    if let Some(v) = &c.libvirt {
        let _ = writeln!(
            out,
            "libvirt {} network {} ({:?})",
            v.uri, v.network_name, v.mode
        );
    }
    if let Some(h) = &c.ha {
        let _ = writeln!(
            out,
            "ha peer {} interface {} priority {} virtualRouterId {}",
            h.peer, h.interface, h.priority, h.virtual_router_id
        );
    }
    out
}
