//! `serve`: create every enabled service, apply the plan to them (which
//! binds every socket), run them under one cancellation token, shut down
//! gracefully on SIGTERM/SIGINT, and reload the cluster file on SIGHUP or
//! `POST /api/reload` without stopping anything ([`crate::runtime::reload`]).
//!
//! Order: load + validate the file (nothing is bound if it is invalid) →
//! create the services (libvirt first: its network must exist before the
//! others bind to it) → stage + commit the plan everywhere (a port conflict
//! fails before any service runs) → run → log `crc-appliance ready` and
//! notify systemd. A service whose `run` returns — an inner task died —
//! stops the whole process with an error; a reload never does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config;
use crate::plan::Plan;
use crate::runtime::hub::Hub;
use crate::runtime::reload;
use crate::runtime::service::Service;
use crate::services::{admin, dhcp, dns, http, lb, tftp};

pub use super::drain::GRACE;

/// Create the enabled services of `plan` (no sockets yet), in start order.
async fn create(plan: &Arc<Plan>, hub: &Arc<Hub>) -> anyhow::Result<Vec<Arc<dyn Service>>> {
    let c = &plan.cluster;
    let mut out: Vec<Arc<dyn Service>> = Vec::new();
    for name in reload::service_names(plan) {
        match name {
            #[cfg(feature = "libvirt")]
            "libvirt" => out.push(
                crate::drivers::libvirt::service::Libvirt::new(plan, hub.events())
                    .await
                    .context("libvirt")?,
            ),
            "dns" => out.push(dns::Dns::new(plan).context("DNS")?),
            "dhcp" => out.push(dhcp::Dhcp::new(plan).await.context("DHCP")?),
            "lb" => {
                let lb = lb::Lb::new(plan, hub.events()).context("load balancer")?;
                hub.set_lb_control(lb.clone());
                out.push(lb);
            }
            "http" => {
                let h = http::Http::new(plan, hub.events());
                hub.set_boot_control(h.clone());
                out.push(h);
            }
            "admin" => out.push(admin::Admin::new(hub.clone())),
            "tftp" => out.push(tftp::Tftp::new(plan).context("TFTP")?),
            other => anyhow::bail!("unknown service {other} in {}", c.domain),
        }
    }
    Ok(out)
}

/// Sample the services' status into the install timeline every
/// [`crate::timeline::recorder::TICK`] until shutdown.
async fn sample_timeline(hub: Arc<Hub>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(crate::timeline::recorder::TICK) => {}
        }
        let _ = admin::status(&hub);
    }
}

/// Tell systemd (Type=notify) about our state, if it is listening.
fn sd_notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let sock = match std::os::unix::net::UnixDatagram::unbound() {
        Ok(s) => s,
        Err(_) => return,
    };
    let p = PathBuf::from(&path);
    let res = if let Some(abs) = path.to_str().and_then(|s| s.strip_prefix('@')) {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(abs.as_bytes())
            .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), &p)
    };
    if let Err(e) = res {
        warn!("sd_notify {state:?} failed: {e}");
    }
}

/// `serve --cluster FILE`.
pub async fn serve(path: PathBuf) -> anyhow::Result<()> {
    let plan = Arc::new(config::load(&path)?);
    crate::runtime::service::load_faults();
    crate::runtime::limits::apply(&plan);
    crate::host::preflight::log(&plan);
    let root = CancellationToken::new();
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let mut hup = signal(SignalKind::hangup()).context("installing SIGHUP handler")?;
    {
        let root = root.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => info!("SIGTERM: shutting down"),
                _ = int.recv() => info!("SIGINT: shutting down"),
            }
            sd_notify("STOPPING=1");
            root.cancel();
        });
    }
    let (hub, mut reload_requests) = Hub::new(plan.clone());
    let services = create(&plan, &hub).await?;
    hub.set_services(services.clone());
    reload::apply(&services, &plan).await?;

    let mut set = JoinSet::new();
    tokio::spawn(sample_timeline(hub.clone(), root.clone()));
    tokio::spawn(crate::runtime::lograte::flush_every(root.clone()));
    for s in &services {
        let (s, token) = (s.clone(), root.clone());
        set.spawn(async move { (s.name(), s.run(token).await) });
    }
    info!(
        cluster = %plan.cluster.domain,
        nodes = plan.cluster.nodes.len(),
        "crc-appliance ready"
    );
    sd_notify("READY=1");
    crate::drivers::bmc::start_on_serve(&plan, hub.events(), root.clone());
    let outcome = run_until_done(
        &path,
        &hub,
        &services,
        &root,
        &mut hup,
        &mut reload_requests,
        &mut set,
    )
    .await;
    root.cancel();
    let drain = async {
        while let Some(r) = set.join_next().await {
            match r {
                Ok((name, Err(e))) => warn!("service {name} stopped with an error: {e:#}"),
                Ok((name, Ok(()))) => info!("service {name} stopped"),
                Err(e) => warn!("service task ended abnormally: {e}"),
            }
        }
    };
    if tokio::time::timeout(GRACE, drain).await.is_err() {
        warn!("services did not stop within {GRACE:?}; aborting them");
        set.abort_all();
    }
    // The counts of rate-limited lines not written yet.
    crate::runtime::lograte::flush_final();
    if outcome.is_ok() {
        info!("stopped");
    }
    outcome
}

type Running = JoinSet<(&'static str, anyhow::Result<()>)>;

/// Serve reloads until shutdown (`Ok`) or until a service stops (`Err`).
async fn run_until_done(
    path: &Path,
    hub: &Hub,
    services: &[Arc<dyn Service>],
    root: &CancellationToken,
    hup: &mut tokio::signal::unix::Signal,
    requests: &mut tokio::sync::mpsc::Receiver<crate::runtime::hub::ReloadRequest>,
    set: &mut Running,
) -> anyhow::Result<()> {
    loop {
        tokio::select! {
            biased;
            _ = root.cancelled() => return Ok(()),
            joined = set.join_next() => {
                if root.is_cancelled() {
                    return Ok(());
                }
                let err = match joined {
                    None => anyhow::anyhow!("no services are enabled"),
                    Some(Ok((name, Ok(())))) => anyhow::anyhow!("service {name} stopped unexpectedly"),
                    Some(Ok((name, Err(e)))) => e.context(format!("service {name} failed")),
                    Some(Err(e)) => anyhow::anyhow!("a service task panicked: {e}"),
                };
                error!("{err:#}; stopping");
                return Err(err);
            }
            _ = hup.recv() => {
                sd_notify("RELOADING=1");
                reload::reload(path, hub, services, "SIGHUP").await;
                sd_notify("READY=1");
            }
            Some(req) = requests.recv() => {
                sd_notify("RELOADING=1");
                let st = reload::reload(path, hub, services, "admin API").await;
                sd_notify("READY=1");
                let _ = req.reply.send(st);
            }
        }
    }
}
