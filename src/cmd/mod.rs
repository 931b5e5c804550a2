//! The command line: one function per command, each a thin call into the
//! library (`serve` into the runtime, `check`/`render` into config and plan,
//! `lb`/`node`/`reload`/`status`/`wait-for` through the admin API).

pub mod admin_client;
mod check;
pub mod cli;
pub mod control;
pub mod generate;
pub mod mirror;
pub mod watch;

use std::sync::Arc;

use crate::drivers::{bmc, libvirt};
use crate::host::{firewall, preflight};
use crate::serve::{hub, supervisor};
use crate::{config, plan};
pub use check::summary;
use check::{check_https_key, check_mode};
use cli::{Cli, Command, LbAction, RenderWhat};
use plan::Plan;

/// Exit code for an invalid cluster file (EX_CONFIG).
pub const EXIT_CONFIG: i32 = 78;

/// Run a parsed command line. Errors carry their own exit code via [`exit_code`].
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    if !cli.command.needs_cluster() {
        return generate::run(cli.command);
    }
    let env = std::env::var_os(cli::CLUSTER_ENV);
    let cluster = cli::cluster_file(cli.cluster, env, std::path::Path::exists)?;
    match cli.command {
        Command::Serve => supervisor::serve(cluster).await,
        Command::Check => {
            let plan = config::load(&cluster)?;
            check_mode(&plan, &cluster)?;
            check_https_key(&plan, &cluster)?;
            print!("{}", summary(&plan));
            Ok(())
        }
        Command::Render {
            what,
            resolver,
            login,
        } => {
            print!("{}", render(&cluster, what, resolver, login.of(what)?)?);
            Ok(())
        }
        Command::Lb { action } => lb_command(&cluster, action).await,
        Command::Node { action } => match action {
            cli::NodeAction::Reinstall { node } => node_reinstall(&cluster, &node).await,
            cli::NodeAction::Boot { node } => control::node_boot(&cluster, &node).await,
        },
        Command::Reload => reload_running(&cluster).await,
        Command::Vm { action, node } => {
            let action = match action {
                cli::VmAction::Up => libvirt::VmAction::Up,
                cli::VmAction::Down => libvirt::VmAction::Down,
                cli::VmAction::Status => libvirt::VmAction::Status,
                cli::VmAction::RemoveBootstrap => libvirt::VmAction::RemoveBootstrap,
                // Needs no libvirt connection: the log file only.
                cli::VmAction::Console => return vm_console(&cluster, node),
            };
            let plan = Arc::new(config::load(&cluster)?);
            let fetched = match action {
                libvirt::VmAction::Up => ignition_evidence(&cluster, &plan).await,
                _ => None,
            };
            libvirt::vm(plan, action, fetched).await
        }
        Command::Bmc { action, node, json } => {
            let plan = config::load(&cluster)?;
            let action = match action {
                cli::BmcAction::Up => bmc::BmcAction::Up,
                cli::BmcAction::Down => bmc::BmcAction::Down,
                cli::BmcAction::Eject => bmc::BmcAction::Eject,
                cli::BmcAction::Status => bmc::BmcAction::Status,
            };
            bmc::run(&plan, action, node.as_deref(), json).await
        }
        Command::Firewall {
            action: cli::FirewallAction::Print { xml },
        } => {
            let c = config::load(&cluster)?.cluster;
            if xml {
                print!("{}", firewall::render_xml(&c));
            } else {
                print!("{}", firewall::render(&c));
            }
            Ok(())
        }
        Command::Firewall {
            action: cli::FirewallAction::Apply,
        } => {
            let c = config::load(&cluster)?.cluster;
            print!("{}", firewall::apply::apply(&c)?);
            Ok(())
        }
        Command::Health => health(&cluster),
        Command::Status { json } => watch::status(&admin_target(&cluster)?, json).await,
        Command::WaitFor {
            goal,
            node,
            timeout,
        } => {
            let notice = watch::notice_interval()?;
            let want = watch::Want { goal, node };
            watch::wait_for(&admin_target(&cluster)?, &want, timeout, notice).await
        }
        // Returned above, before the cluster file is needed.
        c @ (Command::Completion { .. } | Command::Schema | Command::Manpage { .. }) => {
            generate::run(c)
        }
        Command::Preflight => {
            let plan = config::load(&cluster)?;
            let mut findings = preflight::run(&plan);
            findings.extend(preflight::release_image(&plan.cluster).await);
            print!("{}", preflight::report(&findings));
            match preflight::problems(&findings) {
                0 => Ok(()),
                n => Err(preflight::Failed(n).into()),
            }
        }
    }
}

/// `render <what>`: the text to print.
fn render(
    cluster: &std::path::Path,
    what: RenderWhat,
    resolver: Option<crate::host::sitedns::SiteResolver>,
    login: Option<(String, std::path::PathBuf)>,
) -> anyhow::Result<String> {
    let plan = config::load(cluster)?;
    let text = match what {
        RenderWhat::Zone => plan::render_zones(&plan),
        RenderWhat::Dhcp => plan::render_dhcp(&plan),
        RenderWhat::Lb => plan::render_lb(&plan),
        RenderWhat::Libvirt => libvirt::render(&plan)?,
        RenderWhat::HostDns => crate::host::hostdns::render(&plan),
        RenderWhat::SiteDns => match resolver {
            Some(r) => crate::host::sitedns::render(&plan, r),
            None => anyhow::bail!(
                "render site-dns needs the resolver: bind, unbound, dnsmasq or windows"
            ),
        },
        RenderWhat::Chrony => crate::model::chrony::render(&plan.cluster)?,
        RenderWhat::Keepalived => render_keepalived(&plan, cluster)?,
        RenderWhat::CsrRbac => crate::services::csr::rbac::render(),
        RenderWhat::Mirror => mirror::render(&plan, login.as_ref())?,
    };
    Ok(text)
}

/// `render keepalived`: this member's keepalived.conf, its track script
/// naming this binary and the cluster file by absolute paths, run as the
/// service user when this host has it ([`SERVICE_USER`]), else as root.
fn render_keepalived(plan: &Plan, cluster: &std::path::Path) -> anyhow::Result<String> {
    let exe = std::env::current_exe()?;
    let file = std::path::absolute(cluster)?;
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let user = if has_user(&passwd, SERVICE_USER) {
        SERVICE_USER
    } else {
        "root"
    };
    crate::model::keepalived::render(&plan.cluster, &exe, &file, user).ok_or_else(|| {
        anyhow::anyhow!("render keepalived: the cluster file has no `ha:` section (docs/ha.md)")
    })
}

/// The system user the unit runs as (systemd/crc-appliance.sysusers).
const SERVICE_USER: &str = "crc-appliance";

/// Whether `passwd` (the text of /etc/passwd) has `user`.
fn has_user(passwd: &str, user: &str) -> bool {
    passwd.lines().any(|l| l.split(':').next() == Some(user))
}

/// How long `health` may wait for each read and write: the whole check
/// stays under the track script's 2 s timeout.
const HEALTH_BOUND: std::time::Duration = std::time::Duration::from_millis(700);

/// `health`: `GET /api/health` of the `serve` running `cluster`, on its
/// private health socket (`serve::admin::health_sock`: never reachable
/// from the segment); Ok only on 200. Only `admin.enabled` is read from the
/// file (parsed, not validated: no file checks, so the whole run stays
/// well under a second on a loaded host; serve validated the file it runs).
fn health(cluster: &std::path::Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(cluster)
        .map_err(|e| anyhow::anyhow!("cannot read cluster file {}: {e}", cluster.display()))?;
    let raw =
        config::parse_str(&text).map_err(|m| anyhow::anyhow!("{}: {m}", cluster.display()))?;
    if !raw.admin.enabled {
        anyhow::bail!("health: the admin API is off (admin.enabled: false); nothing to ask");
    }
    let socket = config::health_socket_name(cluster)
        .map_err(|e| anyhow::anyhow!("cannot read cluster file {}: {e}", cluster.display()))?;
    let (status, body) = admin_client::request_abstract(&socket, "/api/health", HEALTH_BOUND)?;
    if status == 200 {
        return Ok(());
    }
    let why = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.trim().to_string());
    anyhow::bail!("not healthy (HTTP {status}): {why}")
}

/// `vm console NODE`: the end of the node's serial console log.
fn vm_console(cluster: &std::path::Path, node: Option<String>) -> anyhow::Result<()> {
    let plan = config::load(cluster)?;
    let node = node.ok_or_else(|| anyhow::anyhow!("vm console: which node? (vm console NODE)"))?;
    print!("{}", libvirt::console(&plan, &node)?);
    Ok(())
}

/// One admin API call for the CLI: the address and token from the cluster
/// file; (HTTP status, body).
async fn admin_call(
    c: &crate::model::cluster::Cluster,
    method: &'static str,
    path: String,
) -> anyhow::Result<(u16, String)> {
    let addr = c.admin.listen;
    let token = admin_token(c.admin.token_file.as_deref())?;
    tokio::task::spawn_blocking(move || {
        admin_client::request(addr, token.as_deref(), method, &path)
    })
    .await?
}

/// `lb status [--json]`, `lb enable|disable NODE`: a table or one line.
async fn lb_command(cluster: &std::path::Path, action: LbAction) -> anyhow::Result<()> {
    let c = config::load(cluster)?.cluster;
    let (what, path) = match &action {
        LbAction::Status { json } => {
            let (status, body) = admin_call(&c, "GET", "/api/lb/backends".into()).await?;
            let body = control::answer("lb status", status, &body)?;
            if *json {
                println!("{body}");
                return Ok(());
            }
            let s: crate::services::lb::status::LbStatus = serde_json::from_str(&body)
                .map_err(|e| anyhow::anyhow!("lb status: unexpected answer from serve: {e}"))?;
            print!("{}", control::lb_table(&s, control::unix_now()));
            return Ok(());
        }
        LbAction::Disable { node } => (
            format!("lb disable {node}"),
            format!("/api/lb/backends/{node}/disable"),
        ),
        LbAction::Enable { node } => (
            format!("lb enable {node}"),
            format!("/api/lb/backends/{node}/enable"),
        ),
    };
    let (status, body) = admin_call(&c, "POST", path).await?;
    println!("{}", control::answer(&what, status, &body)?);
    Ok(())
}

/// `node reinstall NODE`: refused when the cluster file serves no network
/// boot; otherwise one line, and a note when nothing sends the node to
/// the install script.
async fn node_reinstall(cluster: &std::path::Path, node: &str) -> anyhow::Result<()> {
    let c = config::load(cluster)?.cluster;
    if let Some(why) = control::reinstall_refusal(&c, node) {
        anyhow::bail!(why);
    }
    let path = format!("/api/nodes/{node}/reinstall");
    let (status, body) = admin_call(&c, "POST", path).await?;
    println!(
        "{}",
        control::answer(&format!("node reinstall {node}"), status, &body)?
    );
    if let Some(note) = control::reinstall_note(&c, node) {
        eprintln!("{note}");
    }
    Ok(())
}

/// For `vm up`: the nodes whose ignition the running `serve` saw them
/// fetch. `None` (the shut-off reason alone decides) when `serve` does not
/// serve HTTP or cannot be asked.
async fn ignition_evidence(cluster: &std::path::Path, plan: &Plan) -> libvirt::Fetched {
    let c = &plan.cluster;
    if !c.http.enabled || !c.admin.enabled {
        return None;
    }
    match watch::fetch(&admin_target(cluster).ok()?).await {
        Ok(t) => Some(
            t.nodes
                .into_iter()
                .filter(|n| n.ignition.is_some())
                .map(|n| n.node)
                .collect(),
        ),
        Err(e) => {
            eprintln!(
                "note: no install evidence from serve ({e:#}); a stopped install VM counts as installed only if the guest shut it down"
            );
            None
        }
    }
}

/// The admin listener of the cluster file and its token.
fn admin_target(cluster: &std::path::Path) -> anyhow::Result<watch::Target> {
    let c = config::load(cluster)?.cluster;
    Ok(watch::Target {
        addr: c.admin.listen,
        token: admin_token(c.admin.token_file.as_deref())?,
    })
}

/// The admin API token from `admin.tokenFile`, if one is configured.
fn admin_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    file.map(|f| config::secret::read_token(f).map_err(|e| anyhow::anyhow!("admin.tokenFile: {e}")))
        .transpose()
}

/// A running instance refused a reload because the file is invalid.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReloadInvalid(String);

/// `reload --cluster FILE`: ask the running `serve` (at the file's
/// `admin.listen`) to reload and print the outcome.
async fn reload_running(path: &std::path::Path) -> anyhow::Result<()> {
    // The admin address comes from the file; when the file does not
    // validate, its raw `admin.listen` still tells where to ask (the running
    // instance then reports the file invalid and keeps its configuration).
    let (addr, token_file) = match config::load(path) {
        Ok(p) => (p.cluster.admin.listen, p.cluster.admin.token_file),
        Err(e) => {
            let text = std::fs::read_to_string(path).map_err(|_| e)?;
            let raw =
                config::parse_str(&text).map_err(|m| anyhow::anyhow!("{}: {m}", path.display()))?;
            let addr = raw.admin.listen.trim().parse().map_err(|_| {
                anyhow::anyhow!("admin.listen {:?} is not an address", raw.admin.listen)
            })?;
            let base = path.parent().unwrap_or(std::path::Path::new("."));
            (addr, raw.admin.token_file.map(|f| base.join(f)))
        }
    };
    let token = admin_token(token_file.as_deref())?;
    let (status, body) = tokio::task::spawn_blocking(move || {
        admin_client::request(addr, token.as_deref(), "POST", "/api/reload")
    })
    .await??;
    let outcome: hub::ReloadStatus = serde_json::from_str(&body)
        .map_err(|_| anyhow::anyhow!("admin API answered HTTP {status}: {}", body.trim()))?;
    match outcome.result {
        Some(hub::ReloadResult::Applied) => {
            println!("reloaded: generation {}", outcome.generation);
            for c in &outcome.changes {
                println!("  {c}");
            }
            if outcome.changes.is_empty() {
                println!("  no changes");
            }
            Ok(())
        }
        Some(hub::ReloadResult::Invalid) => Err(ReloadInvalid(format!(
            "reload rejected (generation {} kept): {}",
            outcome.generation,
            outcome.error.unwrap_or_default()
        ))
        .into()),
        _ => anyhow::bail!(
            "reload not applied (generation {} kept): {}",
            outcome.generation,
            outcome.error.unwrap_or_default()
        ),
    }
}

/// Whether the command already printed what went wrong (its own report on
/// stdout), so that `main` adds no `error:` line repeating it.
pub fn reported(err: &anyhow::Error) -> bool {
    err.downcast_ref::<preflight::Failed>().is_some()
}

/// Process exit code for an error returned by [`run`].
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err.downcast_ref::<cli::NoClusterFile>().is_some() {
        2
    } else if err.downcast_ref::<config::ConfigError>().is_some()
        || err.downcast_ref::<ReloadInvalid>().is_some()
    {
        EXIT_CONFIG
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn has_user_matches_the_whole_name() {
        let passwd = "root:x:0:0::/root:/bin/bash\ncrc-appliance:x:990:990::/var/lib/crc-appliance:/sbin/nologin\n";
        assert!(super::has_user(passwd, "crc-appliance"));
        assert!(!super::has_user(passwd, "crc"));
        assert!(!super::has_user(
            "crc-appliance-x:x:1:1::/:/bin/sh\n",
            "crc-appliance"
        ));
    }
}
