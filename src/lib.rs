//! crc-appliance: the user-provisioned infrastructure of an OpenShift 4
//! install (DNS, DHCP, L4 load balancer, HTTP for images and ignition, and
//! libvirt VMs) in one process, driven by one cluster file.
//!
//! # Layout
//! - [`config`]: the cluster file (raw serde structs, validation).
//! - [`plan`]: pure derivation of DNS zones, DHCP reservations, LB pools.
//! - [`supervisor`]: `serve` — binds, runs and stops the services.
//! - [`dns`], [`dhcp`], [`lb`], [`http`], [`admin`]: one service each, with
//!   `bind(plan)` then `Bound::run(hub, shutdown)`.
//! - [`tftp`]: read-only TFTP for network boot (the `pxe:` section).
//! - [`libvirt`]: network, disks and VMs.
//! - [`hub`]: status, metrics and control shared between services.
//! - [`metrics`]: the Prometheus text writer every service uses.
//! - [`net`]: the TCP accept loop of the DNS, HTTP, admin and LB listeners.

#![forbid(unsafe_code)]

pub mod admin;
pub mod admin_client;
pub mod cli;
pub mod config;
pub mod dhcp;
pub mod dns;
pub mod http;
pub mod hub;
pub mod lb;
pub mod libvirt;
pub mod metrics;
pub mod net;
pub mod plan;
pub mod supervisor;
pub mod telemetry;
pub mod tftp;

use std::sync::Arc;

use cli::{Cli, Command, LbAction, RenderWhat};
use plan::Plan;

/// Exit code for an invalid cluster file (EX_CONFIG).
pub const EXIT_CONFIG: i32 = 78;

/// Run a parsed command line. Errors carry their own exit code via [`exit_code`].
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(c) => supervisor::serve(c.cluster).await,
        Command::Check(c) => {
            let plan = Plan::new(config::load(&c.cluster)?);
            print!("{}", summary(&plan));
            Ok(())
        }
        Command::Render { cluster, what } => {
            let plan = Plan::new(config::load(&cluster.cluster)?);
            let text = match what {
                RenderWhat::Zone => plan::render_zones(&plan),
                RenderWhat::Dhcp => plan::render_dhcp(&plan),
                RenderWhat::Lb => plan::render_lb(&plan),
                RenderWhat::Libvirt => libvirt::render(&plan)?,
            };
            print!("{text}");
            Ok(())
        }
        Command::Lb { cluster, action } => {
            let c = config::load(&cluster.cluster)?;
            let (method, path) = match &action {
                LbAction::Disable { node } => ("POST", format!("/api/lb/backends/{node}/disable")),
                LbAction::Enable { node } => ("POST", format!("/api/lb/backends/{node}/enable")),
                LbAction::Status => ("GET", "/api/lb/backends".to_string()),
            };
            let addr = c.admin.listen;
            let (status, body) =
                tokio::task::spawn_blocking(move || admin_client::request(addr, method, &path))
                    .await??;
            println!("{}", body.trim_end());
            if !(200..300).contains(&status) {
                anyhow::bail!("admin API answered HTTP {status}");
            }
            Ok(())
        }
        Command::Vm { cluster, action } => {
            let plan = Arc::new(Plan::new(config::load(&cluster.cluster)?));
            libvirt::vm(plan, action).await
        }
    }
}

/// Process exit code for an error returned by [`run`].
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err.downcast_ref::<config::ConfigError>().is_some() {
        EXIT_CONFIG
    } else {
        1
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
        "network {} gateway {} appliance {} api {} ingress {}",
        c.network.cidr,
        c.network.gateway,
        c.network.appliance_ip,
        c.network.api_vip,
        c.network.ingress_vip
    );
    for r in config::Role::ALL {
        let names: Vec<_> = c.nodes_with_role(r).map(|n| n.name.as_str()).collect();
        let _ = writeln!(out, "{:<9} {} {}", r.as_str(), names.len(), names.join(" "));
    }
    let on = |b: bool| if b { "on" } else { "off" };
    let _ = writeln!(
        out,
        "dns {} {:?} ({} zones, {} records)",
        on(c.dns.enabled),
        c.dns.listen,
        plan.zones.len(),
        plan.zones.iter().map(|z| z.records.len()).sum::<usize>()
    );
    let _ = writeln!(
        out,
        "dhcp {} {} ({} reservations)",
        on(c.dhcp.enabled),
        c.dhcp.listen,
        plan.reservations.len()
    );
    let _ = writeln!(
        out,
        "lb {} api {} machine-config {} http {} https {}",
        on(c.lb.enabled),
        c.lb.api,
        c.lb.machine_config,
        c.lb.ingress_http,
        c.lb.ingress_https
    );
    let _ = writeln!(out, "http {} {}", on(c.http.enabled), c.http.listen);
    let _ = writeln!(out, "admin {} {}", on(c.admin.enabled), c.admin.listen);
    if let Some(t) = &c.tftp {
        let _ = writeln!(out, "{}", tftp::stats::check_line(t));
    }
    if let Some(v) = &c.libvirt {
        let _ = writeln!(
            out,
            "libvirt {} network {} ({:?})",
            v.uri, v.network_name, v.mode
        );
    }
    out
}
