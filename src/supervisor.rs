//! `serve`: bind every enabled service, run them under one cancellation token,
//! shut down gracefully on SIGTERM/SIGINT, reload the cluster file on SIGHUP.
//!
//! Order: load + validate the file (nothing is bound if it is invalid) → bind
//! all sockets (a port conflict fails before any service runs) → spawn every
//! service → log `crc-appliance ready` and notify systemd. A service that
//! fails or stops on its own stops the whole process with an error.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::hub::Hub;
use crate::plan::Plan;
use crate::{admin, config, dhcp, dns, http, lb, tftp};

/// How long services get to finish after shutdown is requested.
pub const GRACE: Duration = Duration::from_secs(10);

type ServiceFuture = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

/// A bound service, ready to run.
struct Ready {
    name: &'static str,
    start: Box<dyn FnOnce(Arc<Hub>, CancellationToken) -> ServiceFuture + Send>,
}

macro_rules! ready {
    ($name:literal, $bound:expr) => {{
        let b = $bound;
        Ready {
            name: $name,
            start: Box::new(move |hub, tok| Box::pin(b.run(hub, tok))),
        }
    }};
}

/// Bind every enabled service of `plan`.
async fn bind_all(plan: &Arc<Plan>) -> anyhow::Result<Vec<Ready>> {
    let c = &plan.cluster;
    let mut out = Vec::new();
    // First: with `libvirt.startOnServe` the network (bridge + applianceIP)
    // must exist before DNS/DHCP/HTTP bind to it.
    #[cfg(feature = "libvirt")]
    if c.libvirt.as_ref().is_some_and(|v| v.start_on_serve) {
        out.push(ready!(
            "libvirt",
            crate::libvirt::service::bind(plan)
                .await
                .context("libvirt")?
        ));
    }
    if c.dns.enabled {
        out.push(ready!("dns", dns::bind(plan).await.context("DNS")?));
    }
    if c.dhcp.enabled {
        out.push(ready!("dhcp", dhcp::bind(plan).await.context("DHCP")?));
    }
    if c.lb.enabled {
        out.push(ready!("lb", lb::bind(plan).await.context("load balancer")?));
    }
    if c.http.enabled {
        out.push(ready!("http", http::bind(plan).await.context("HTTP")?));
    }
    if c.admin.enabled {
        out.push(ready!("admin", admin::bind(plan).await.context("admin")?));
    }
    if c.tftp.as_ref().is_some_and(|t| t.enabled) {
        out.push(ready!("tftp", tftp::bind(plan).await.context("TFTP")?));
    }
    Ok(out)
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

enum Outcome {
    Shutdown,
    Reload(Box<Plan>),
}

/// Run one generation of services until shutdown, reload or failure.
async fn run_generation(
    plan: Arc<Plan>,
    bound: Vec<Ready>,
    path: &Path,
    root: &CancellationToken,
    hup: &mut tokio::signal::unix::Signal,
) -> anyhow::Result<Outcome> {
    let gen_token = root.child_token();
    let hub = Hub::new(plan.clone());
    let mut set = JoinSet::new();
    for r in bound {
        let fut = (r.start)(hub.clone(), gen_token.clone());
        let name = r.name;
        set.spawn(async move { (name, fut.await) });
    }
    info!(
        cluster = %plan.cluster.domain,
        nodes = plan.cluster.nodes.len(),
        "crc-appliance ready"
    );
    sd_notify("READY=1");
    let mut outcome: anyhow::Result<Outcome> = Ok(Outcome::Shutdown);
    loop {
        tokio::select! {
            biased;
            _ = root.cancelled() => break,
            _ = hup.recv() => {
                info!("SIGHUP: reloading {}", path.display());
                match config::load(path) {
                    Ok(c) => {
                        outcome = Ok(Outcome::Reload(Box::new(Plan::new(c))));
                        break;
                    }
                    Err(e) => error!("reload rejected, keeping the running configuration: {e}"),
                }
            }
            joined = set.join_next() => {
                if root.is_cancelled() {
                    // Services end on their own once shutdown was requested.
                    if let Some(Ok((name, Err(e)))) = joined {
                        warn!("service {name} stopped with an error: {e:#}");
                    }
                    break;
                }
                match joined {
                    None => {
                        outcome = Err(anyhow::anyhow!("no services are enabled"));
                    }
                    Some(Ok((name, Ok(())))) => {
                        outcome = Err(anyhow::anyhow!("service {name} stopped unexpectedly"));
                    }
                    Some(Ok((name, Err(e)))) => {
                        outcome = Err(e.context(format!("service {name} failed")));
                    }
                    Some(Err(e)) => {
                        outcome = Err(anyhow::anyhow!("a service task panicked: {e}"));
                    }
                }
                break;
            }
        }
    }
    gen_token.cancel();
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
    outcome
}

/// `serve --cluster FILE`.
pub async fn serve(path: PathBuf) -> anyhow::Result<()> {
    let cluster = config::load(&path)?;
    let mut plan = Arc::new(Plan::new(cluster));
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
    let mut bound = bind_all(&plan).await?;
    loop {
        match run_generation(plan.clone(), bound, &path, &root, &mut hup).await? {
            Outcome::Shutdown => {
                info!("stopped");
                return Ok(());
            }
            Outcome::Reload(new) => {
                let new = Arc::new(*new);
                sd_notify("RELOADING=1");
                match bind_all(&new).await {
                    Ok(b) => {
                        info!("configuration reloaded");
                        plan = new;
                        bound = b;
                    }
                    Err(e) => {
                        error!("new configuration cannot bind ({e:#}); restoring the previous one");
                        bound = bind_all(&plan)
                            .await
                            .context("re-binding the previous configuration")?;
                    }
                }
            }
        }
    }
}
