//! `serve`: create every enabled service, apply the plan to them (which
//! binds every socket), run them under one cancellation token, shut down
//! gracefully on SIGTERM/SIGINT, and reload the cluster file on SIGHUP or
//! `POST /api/reload` without stopping anything ([`crate::serve::reload`]).
//!
//! Order: load + validate the file (nothing is bound if it is invalid) →
//! the run-time context every service is given (caps, HA view, bind
//! options, test hooks: `runtime::context`) → create the services
//! (libvirt first: its network must exist before the others bind to it)
//! → stage + commit the plan everywhere (a port conflict
//! fails before any service runs) → run → log `crc-appliance ready` and
//! notify systemd. A service whose `run` returns — an inner task died —
//! stops the whole process with an error; a reload never does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config;
use crate::model::catalogue::ServiceKind;
use crate::plan::Plan;
use crate::runtime::context::Context;
use crate::runtime::faults::Faults;
use crate::runtime::helperproc::HelperProcs;
use crate::runtime::service::{Service, Tasks};
use crate::serve::admin;
use crate::serve::hub::Hub;
use crate::serve::registry::Services;
use crate::serve::reload;

pub use crate::runtime::drain::GRACE;

/// The name of `serve`'s own task set (signals, the single-node prober,
/// BMC `startOnServe`): its tasks fail `serve` like a service's would.
pub const BACKGROUND: &str = "serve";

/// Cancel `root` on SIGTERM or SIGINT (handlers installed by the caller at
/// start, so a signal during start-up waits here instead of killing).
async fn watch_signals(
    mut term: Signal,
    mut int: Signal,
    root: CancellationToken,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    tokio::select! {
        _ = stop.cancelled() => return Ok(()),
        _ = term.recv() => info!("SIGTERM: shutting down"),
        _ = int.recv() => info!("SIGINT: shutting down"),
    }
    sd_notify("STOPPING=1");
    root.cancel();
    Ok(())
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

/// Where a `serve` runs, and what ends it.
pub enum Host {
    /// The process: SIGTERM/SIGINT stop it, SIGHUP reloads, systemd is
    /// notified.
    Process,
    /// Inside another program (the in-process test harness): no signal
    /// handlers are installed (the host's signals stay the host's);
    /// cancelling `stop` shuts it down as SIGTERM would, and `ready` is
    /// handed the hub once every service runs (its typed status, reloads).
    /// Helper processes (the libvirt helper) are started as `helpers`
    /// says: from its directory, their log lines into this serve's log
    /// (`HelperProcs::embedded`), with its environment.
    Embedded {
        stop: CancellationToken,
        ready: tokio::sync::oneshot::Sender<Arc<Hub>>,
        helpers: HelperProcs,
        /// This appliance's test hooks (test builds; the process reads
        /// its own from the environment, `runtime::faults`).
        faults: Faults,
    },
}

impl Host {
    /// The test hooks of the `serve` it hosts: the process's environment's,
    /// or the embedded appliance's own.
    fn faults(&self) -> Faults {
        match self {
            Host::Process => Faults::from_env(),
            Host::Embedded { faults, .. } => faults.clone(),
        }
    }
}

/// The signal streams of a [`Host::Process`]; none when embedded.
struct Signals {
    hup: Option<Signal>,
}

impl Signals {
    /// Install the handlers at start (a signal during start-up waits for
    /// them instead of killing) and, for the process, cancel `root` on
    /// SIGTERM/SIGINT; for an embedded host, on its `stop`.
    fn install(host: &Host, background: &Tasks, root: &CancellationToken) -> anyhow::Result<Self> {
        let t = background.token();
        match host {
            Host::Process => {
                let term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
                let int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
                background.spawn(
                    "serve signals",
                    t.clone(),
                    watch_signals(term, int, root.clone(), t),
                );
                let hup = signal(SignalKind::hangup()).context("installing SIGHUP handler")?;
                Ok(Signals { hup: Some(hup) })
            }
            Host::Embedded { stop, .. } => {
                let (stop, root) = (stop.clone(), root.clone());
                background.spawn("serve host stop", t.clone(), async move {
                    tokio::select! {
                        _ = t.cancelled() => {}
                        _ = stop.cancelled() => root.cancel(),
                    }
                    Ok(())
                });
                Ok(Signals { hup: None })
            }
        }
    }

    /// The next SIGHUP (never, when embedded).
    async fn hangup(&mut self) {
        match &mut self.hup {
            Some(h) => {
                h.recv().await;
            }
            None => std::future::pending().await,
        }
    }
}

/// `serve --cluster FILE`: the process.
pub async fn serve(path: PathBuf) -> anyhow::Result<()> {
    serve_hosted(path, Host::Process).await
}

/// `serve` on `path`, hosted by `host`.
pub async fn serve_hosted(path: PathBuf, host: Host) -> anyhow::Result<()> {
    let plan = Arc::new(config::load(&path)?);
    let ha_token = match &plan.cluster.ha {
        Some(h) => Some(
            config::secret::read_token(&h.token_file)
                .map_err(|e| anyhow::anyhow!("ha.tokenFile: {e}"))?,
        ),
        None => None,
    };
    // What every service is given: the caps sized to the open-files
    // limit, the HA view (the VIP holder known before any service
    // answers), IP_FREEBIND for an HA member's VIP listeners, test hooks;
    // an embedded serve's helper processes as its host says.
    let mut ctx =
        Context::for_plan(&plan, crate::runtime::limits::apply(&plan)).with_faults(host.faults());
    if let Host::Embedded { helpers, .. } = &host {
        ctx.helpers = helpers.clone();
    }
    crate::host::preflight::log(&plan)?;
    let root = CancellationToken::new();
    let background = ctx.tasks(BACKGROUND);
    let mut signals = Signals::install(&host, &background, &root)?;
    let events = crate::timeline::Recorder::new(&plan);
    let registry = Services::create(&plan, &events, &ctx).await?;
    let (hub, mut reload_requests) = Hub::new(plan.clone(), registry, events, ctx.clone());
    let mut services = hub.services.all();
    if plan.cluster.runs(ServiceKind::Admin) {
        services.push(admin::Admin::new(hub.clone(), &path));
    }
    reload::apply(&services, &plan).await?;

    let mut set = JoinSet::new();
    spawn_background(&background, &hub, &plan, ha_token);
    // The summaries of this serve's rate-limited lines (its context's
    // limiters), embedded or not.
    {
        let (t, rates) = (background.token(), ctx.log_rates.clone());
        background.spawn("serve log summaries", t.clone(), async move {
            rates.flush_every(t).await;
            Ok(())
        });
    }
    for s in &services {
        let (s, token) = (s.clone(), root.clone());
        set.spawn(async move { (s.name(), s.run(token).await) });
    }
    {
        let (bg, token) = (Arc::new(background), root.clone());
        let b = bg.clone();
        set.spawn(async move { (BACKGROUND, b.supervise(&token, GRACE).await) });
        info!(
            cluster = %plan.cluster.domain,
            nodes = plan.cluster.nodes.len(),
            "crc-appliance ready"
        );
        sd_notify("READY=1");
        crate::drivers::bmc::start_on_serve(&plan, hub.events(), &bg, &ctx.ha);
    }
    if let Host::Embedded { ready, .. } = host {
        let _ = ready.send(hub.clone());
    }
    let outcome = run_until_done(
        &path,
        &hub,
        &services,
        &root,
        &mut signals,
        &mut reload_requests,
        &mut set,
    )
    .await;
    hub.set_stopping(&match &outcome {
        Ok(()) => "shutting down".to_string(),
        Err(e) => format!("{e:#}"),
    });
    root.cancel();
    drain(set).await;
    // The counts of rate-limited lines not written yet.
    ctx.log_rates.flush_final();
    if outcome.is_ok() {
        info!("stopped");
    }
    outcome
}

/// Start `serve`'s own tasks in `background`: the single-node prober and,
/// for an HA member (its pair
/// key `ha_token`), the VIP watch and the exchange with the peer.
fn spawn_background(background: &Tasks, hub: &Arc<Hub>, plan: &Plan, ha_token: Option<String>) {
    let t = background.token();
    let h = hub.clone();
    background.spawn(
        "serve single-node prober",
        t.clone(),
        crate::timeline::prober::run(move || h.plan(), hub.events(), t),
    );
    if let (Some(h), Some(token)) = (&plan.cluster.ha, ha_token) {
        let vip = plan.cluster.network.appliance_ip;
        let t = background.token();
        background.spawn(
            "serve ha vip watch",
            t.clone(),
            hub.ha().clone().watch(vip, t),
        );
        let peer = std::net::SocketAddr::new(h.peer.into(), plan.cluster.admin.listen.port());
        let t = background.token();
        background.spawn(
            "serve ha sync",
            t.clone(),
            crate::serve::hasync::run(hub.clone(), peer, token, t),
        );
    }
}

/// Wait up to [`GRACE`] for the services in `set` to stop (shutdown was
/// requested), logging how each ended; abort the rest.
async fn drain(mut set: Running) {
    let all = async {
        while let Some(r) = set.join_next().await {
            match r {
                Ok((name, Err(e))) => warn!("service {name} stopped with an error: {e:#}"),
                Ok((name, Ok(()))) => info!("service {name} stopped"),
                Err(e) => warn!("service task ended abnormally: {e}"),
            }
        }
    };
    if tokio::time::timeout(GRACE, all).await.is_err() {
        warn!("services did not stop within {GRACE:?}; aborting them");
        set.abort_all();
    }
}

type Running = JoinSet<(&'static str, anyhow::Result<()>)>;

/// Serve reloads until shutdown (`Ok`) or until a service stops (`Err`).
async fn run_until_done(
    path: &Path,
    hub: &Hub,
    services: &[Arc<dyn Service>],
    root: &CancellationToken,
    signals: &mut Signals,
    requests: &mut tokio::sync::mpsc::Receiver<crate::serve::hub::ReloadRequest>,
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
            _ = signals.hangup() => {
                if reload_unless_stopped(path, hub, services, "SIGHUP", root).await.is_none() {
                    return Ok(());
                }
            }
            Some(req) = requests.recv() => {
                match reload_unless_stopped(path, hub, services, "admin API", root).await {
                    Some(st) => { let _ = req.reply.send(st); }
                    None => return Ok(()),
                }
            }
        }
    }
}

/// One reload, given up (dropped: nothing staged is committed, its sockets
/// close) as soon as shutdown is requested, so that SIGTERM during a slow
/// stage is honoured within the grace period. `None` when it was given up.
async fn reload_unless_stopped(
    path: &Path,
    hub: &Hub,
    services: &[Arc<dyn Service>],
    trigger: &str,
    root: &CancellationToken,
) -> Option<crate::serve::hub::ReloadStatus> {
    sd_notify("RELOADING=1");
    let st = tokio::select! {
        biased;
        _ = root.cancelled() => {
            warn!("{trigger}: reload abandoned, shutting down");
            return None;
        }
        st = reload::reload(path, hub, services, trigger) => st,
    };
    sd_notify("READY=1");
    Some(st)
}
