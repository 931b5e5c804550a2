//! `loadBalancer`: frontends (default on the VIPs), health checks, limits,
//! backend ports and per-node backend overrides.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use super::{Errs, NetParts, client_cidrs, resolve, sock};
use crate::config::raw;
use crate::model::cluster::{
    BackendOverrideCfg, BackendPortsCfg, HealthCfg, LbCfg, RemoveBootstrap,
};

pub(crate) fn build(
    l: &raw::LoadBalancer,
    raw_nodes: &[raw::Node],
    net: &NetParts,
    base: &Path,
    e: &mut Errs,
) -> Option<LbCfg> {
    let addr = |e: &mut Errs, f: &str, v: &Option<String>, ip: Option<Ipv4Addr>, port| match v {
        Some(s) => sock(e, &format!("loadBalancer.listen.{f}"), s, Some(port)),
        None => ip.map(|ip| SocketAddr::new(ip.into(), port)),
    };
    let api = addr(e, "api", &l.listen.api, net.api_vip, 6443);
    let mc = addr(
        e,
        "machineConfig",
        &l.listen.machine_config,
        net.api_vip,
        22623,
    );
    let http = addr(
        e,
        "ingressHttp",
        &l.listen.ingress_http,
        net.ingress_vip,
        80,
    );
    let https = addr(
        e,
        "ingressHttps",
        &l.listen.ingress_https,
        net.ingress_vip,
        443,
    );
    let health = health_check(e, &l.health_check);
    if l.max_connections == 0 {
        e.push("loadBalancer.maxConnections", "must be greater than zero");
    }
    if l.idle_timeout.get().is_zero() {
        e.push("loadBalancer.idleTimeout", "must be greater than zero");
    }
    if l.connect_timeout.get().is_zero() {
        e.push("loadBalancer.connectTimeout", "must be greater than zero");
    }
    let backend_ports = backend_ports(e, &l.backend_ports);
    let backend_overrides = backend_overrides(e, &l.backend_overrides, raw_nodes);
    let remove_bootstrap = match l.remove_bootstrap.as_deref().unwrap_or("auto") {
        "auto" => RemoveBootstrap::Auto,
        "manual" => RemoveBootstrap::Manual,
        other => {
            e.push(
                "loadBalancer.removeBootstrap",
                format!("unknown value {other:?} (expected auto or manual)"),
            );
            RemoveBootstrap::Auto
        }
    };
    if l.csr_hint_after.get().is_zero() {
        e.push("loadBalancer.csrHintAfter", "must be greater than zero");
    }
    let machine_config_client_cidrs = client_cidrs(
        e,
        "loadBalancer.machineConfigClientCidrs",
        &l.machine_config_client_cidrs,
        "the machine-config server's rendered configs and kubelet bootstrap credentials",
    );
    Some(LbCfg {
        enabled: l.enabled.unwrap_or(true),
        api: api?,
        machine_config: mc?,
        ingress_http: http?,
        ingress_https: https?,
        backend_ports,
        health,
        api_ca_file: l
            .ca_files
            .api
            .as_ref()
            .or(l.ca_file.as_ref())
            .map(|f| resolve(base, f)),
        machine_config_ca_file: l
            .ca_files
            .machine_config
            .as_ref()
            .or(l.ca_file.as_ref())
            .map(|f| resolve(base, f)),
        max_connections: l.max_connections,
        idle_timeout: l.idle_timeout.get(),
        connect_timeout: l.connect_timeout.get(),
        backend_overrides,
        machine_config_client_cidrs,
        remove_bootstrap,
        csr_hint_after: l.csr_hint_after.get(),
    })
}

/// `loadBalancer.healthCheck`: interval and timeout above zero, the
/// timeout within the interval, rise and fall 1..100.
fn health_check(e: &mut Errs, hc: &raw::HealthCheck) -> HealthCfg {
    if hc.interval.get().is_zero() {
        e.push(
            "loadBalancer.healthCheck.interval",
            "must be greater than zero",
        );
    }
    if hc.timeout.get().is_zero() {
        e.push(
            "loadBalancer.healthCheck.timeout",
            "must be greater than zero",
        );
    } else if hc.timeout.get() > hc.interval.get() {
        e.push(
            "loadBalancer.healthCheck.timeout",
            format!("{} is longer than interval {}", hc.timeout, hc.interval),
        );
    }
    for (f, v) in [("rise", hc.rise), ("fall", hc.fall)] {
        if v == 0 || v > 100 {
            e.push(format!("loadBalancer.healthCheck.{f}"), "must be 1..100");
        }
    }
    HealthCfg {
        interval: hc.interval.get(),
        timeout: hc.timeout.get(),
        rise: hc.rise,
        fall: hc.fall,
    }
}

/// `loadBalancer.backendPorts`: none is 0.
fn backend_ports(e: &mut Errs, bp: &raw::BackendPorts) -> BackendPortsCfg {
    for (f, v) in [
        ("api", bp.api),
        ("machineConfig", bp.machine_config),
        ("ingressHttp", bp.ingress_http),
        ("ingressHttps", bp.ingress_https),
    ] {
        if v == 0 {
            e.push(format!("loadBalancer.backendPorts.{f}"), "must not be 0");
        }
    }
    BackendPortsCfg {
        api: bp.api,
        machine_config: bp.machine_config,
        ingress_http: bp.ingress_http,
        ingress_https: bp.ingress_https,
    }
}

/// `loadBalancer.backendOverrides`: each key a node's name, each address
/// `ip:port`.
fn backend_overrides(
    e: &mut Errs,
    overrides: &BTreeMap<String, raw::PoolAddrs>,
    raw_nodes: &[raw::Node],
) -> BTreeMap<String, BackendOverrideCfg> {
    let mut backend_overrides = BTreeMap::new();
    for (node, o) in overrides {
        let base_path = format!("loadBalancer.backendOverrides.{node}");
        if !raw_nodes.iter().any(|n| &n.name == node) {
            e.push(&base_path, "is not a node name");
        }
        let mut one = |f: &str, v: &Option<String>| {
            v.as_ref()
                .and_then(|t| sock(e, &format!("{base_path}.{f}"), t, None))
        };
        let cfg = BackendOverrideCfg {
            api: one("api", &o.api),
            machine_config: one("machineConfig", &o.machine_config),
            ingress_http: one("ingressHttp", &o.ingress_http),
            ingress_https: one("ingressHttps", &o.ingress_https),
        };
        backend_overrides.insert(node.clone(), cfg);
    }
    backend_overrides
}
