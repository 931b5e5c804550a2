//! The one shape every service has (after pingora's `Service`,
//! `pingora-core/src/services/mod.rs`), and the task set that makes a dead
//! inner task fail its service (after hickory's `block_until_done`).
//!
//! A service is created once per `serve` and lives until shutdown. Plans
//! reach it in two phases, the same for the first start and every reload:
//!
//! 1. [`Service::stage`] acquires what the new plan needs that is not held
//!    yet — sockets for added or changed listen addresses, a rebuilt zone
//!    catalog — without changing anything observable. It may fail (a port in
//!    use); dropping the returned [`Commit`] releases what it acquired.
//! 2. The [`Commit`] swaps the plan in and cannot fail: listeners whose
//!    address did not change keep their sockets, added ones start serving,
//!    removed ones close. Requests in flight finish on the data they started
//!    with.
//!
//! The supervisor stages every service before committing any, so a reload
//! either applies everywhere or nowhere.
//!
//! [`Service::run`] serves until shutdown and returns an error as soon as any
//! task it spawned ends without having been asked to ([`Tasks`]): a listener
//! loop that stops, a lease writer that dies, a panic. `serve` then exits
//! non-zero instead of running half alive.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::FutureExt as _;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::plan::Plan;
use crate::runtime::bind::BindOptions;
use crate::runtime::faults::{Faults, TaskFuture};
use crate::runtime::sync::LockExt as _;

/// Phase two of applying a plan: swap it in. Dropping it instead undoes
/// phase one (its sockets close).
pub type Commit = Box<dyn FnOnce() + Send>;

/// A long-running part of the appliance (DNS, DHCP, LB, HTTP, admin, …).
#[async_trait]
pub trait Service: Send + Sync + 'static {
    /// Key in `/status`, prefix of its log lines and metrics.
    fn name(&self) -> &'static str;

    /// Acquire what `plan` needs beyond what is running; change nothing.
    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit>;

    /// Serve until `shutdown` is cancelled (then drain and return `Ok`), or
    /// return an error when one of its tasks ends on its own.
    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()>;

    /// Append this service's Prometheus families.
    fn metrics(&self, out: &mut String);
}

struct Spawn {
    name: String,
    token: CancellationToken,
    fut: TaskFuture,
}

/// The tasks of one service. Tasks may be added at any time (a reload adds
/// listeners); [`Tasks::supervise`], called from the service's `run`, owns
/// them. Each task has a token, a child of the service's root token: a task
/// whose token was cancelled (listener removed by a reload, shutdown) may end
/// quietly; any other end is the service's failure.
pub struct Tasks {
    service: &'static str,
    /// Test builds: tasks to fail on purpose (`runtime::faults`).
    faults: Faults,
    root: CancellationToken,
    tx: mpsc::UnboundedSender<Spawn>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Spawn>>>,
}

impl Tasks {
    /// The tasks of `service`, none failed on purpose.
    pub fn new(service: &'static str) -> Tasks {
        Tasks::with_faults(service, Faults::default())
    }

    /// The tasks of `service`, those `faults` names failed on purpose
    /// (test builds; `runtime::context::Context::tasks`).
    pub fn with_faults(service: &'static str, faults: Faults) -> Tasks {
        let (tx, rx) = mpsc::unbounded_channel();
        Tasks {
            service,
            faults,
            root: CancellationToken::new(),
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }

    /// A token for a new task: cancelled by shutdown, or by the caller to
    /// stop just that task.
    pub fn token(&self) -> CancellationToken {
        self.root.child_token()
    }

    /// Cancelled once the service shuts down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.root.clone()
    }

    /// Add a task named `name` that stops when `token` is cancelled.
    pub fn spawn<F>(&self, name: impl Into<String>, token: CancellationToken, fut: F)
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let name = name.into();
        let fut = self.faults.wrap(&name, Box::pin(fut));
        // The receiver lives as long as the service runs; after that there
        // is nothing left to serve with the task anyway.
        let _ = self.tx.send(Spawn { name, token, fut });
    }

    /// Add a task that may end on its own (a one-shot job): ending `Ok` is
    /// quiet, an error or a panic fails the service like any other task.
    pub fn spawn_oneshot<F>(&self, name: impl Into<String>, fut: F)
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let token = self.token();
        let done = token.clone();
        self.spawn(name, token, async move {
            let r = fut.await;
            if r.is_ok() {
                done.cancel();
            }
            r
        });
    }

    /// Run the tasks until `shutdown` (then cancel them all and give them
    /// `drain`, then abort) or until one ends on its own (then the same,
    /// and return its error).
    pub async fn supervise(
        &self,
        shutdown: &CancellationToken,
        drain: Duration,
    ) -> anyhow::Result<()> {
        let taken = self.rx.locked().take();
        let Some(mut rx) = taken else {
            anyhow::bail!("{}: run called twice", self.service);
        };
        let mut set: JoinSet<(String, bool, anyhow::Result<()>)> = JoinSet::new();
        let mut outcome = Ok(());
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some(s) = rx.recv() => {
                    let Spawn { name, token, fut } = s;
                    set.spawn(async move {
                        // A panic is this task's failure, under its name.
                        let r = match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
                            Ok(r) => r,
                            Err(p) => Err(anyhow::anyhow!("panicked: {}", panic_message(&*p))),
                        };
                        (name, token.is_cancelled(), r)
                    });
                }
                Some(joined) = set.join_next() => match joined {
                    Ok((name, true, Ok(()))) => debug!("{}: {name} stopped", self.service),
                    Ok((name, _, Err(e))) => {
                        outcome = Err(e.context(format!("{}: {name} failed", self.service)));
                        break;
                    }
                    Ok((name, false, Ok(()))) => {
                        outcome = Err(anyhow::anyhow!("{}: {name} ended unexpectedly", self.service));
                        break;
                    }
                    Err(e) => {
                        outcome = Err(anyhow::anyhow!("{}: a task panicked or was aborted: {e}", self.service));
                        break;
                    }
                },
            }
        }
        self.root.cancel();
        let finish = async {
            while let Some(j) = set.join_next().await {
                if let Ok((name, _, Err(e))) = j {
                    warn!("{}: {name} stopped with an error: {e:#}", self.service);
                }
            }
        };
        if tokio::time::timeout(drain, finish).await.is_err() {
            debug!(
                "{}: aborting tasks still running after {drain:?}",
                self.service
            );
            set.abort_all();
        }
        outcome
    }
}

/// The text of a panic payload (`panic!` with a literal or a format).
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

/// How a listener's key reads in the `closed listener` log line.
pub trait ListenerKey {
    fn label(&self) -> String;
}

impl ListenerKey for std::net::SocketAddr {
    fn label(&self) -> String {
        self.to_string()
    }
}

/// An address and the interface it is bound to (DHCP, DHCPv6): the address.
impl ListenerKey for (std::net::SocketAddr, Option<String>) {
    fn label(&self) -> String {
        self.0.to_string()
    }
}

/// Listeners keyed by their configured address, each with the token that
/// stops its task(s). A reload keeps the entries whose key is unchanged.
pub struct Listeners<K: std::hash::Hash + Eq + Clone> {
    map: Mutex<HashMap<K, CancellationToken>>,
}

impl<K: std::hash::Hash + Eq + Clone> Default for Listeners<K> {
    fn default() -> Self {
        Listeners {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl Listeners<std::net::SocketAddr> {
    /// A TCP listener on `addr` unless one is held for it already (the
    /// stage step of a one-listener service).
    pub async fn bind_tcp_if_missing(
        &self,
        addr: std::net::SocketAddr,
        bind: BindOptions,
    ) -> anyhow::Result<Option<tokio::net::TcpListener>> {
        if self.missing(&[addr]).is_empty() {
            return Ok(None);
        }
        let l = bind
            .tcp(addr)
            .map_err(|e| anyhow::anyhow!("bind TCP {addr}: {e}"))?;
        Ok(Some(l))
    }

    /// TCP listeners on those of `addrs` not held yet (a service with an
    /// IPv6 twin, [`crate::model::catalogue::v6_twin`]).
    pub async fn bind_tcp_missing(
        &self,
        addrs: &[std::net::SocketAddr],
        bind: BindOptions,
    ) -> anyhow::Result<Vec<(std::net::SocketAddr, tokio::net::TcpListener)>> {
        let mut out = Vec::new();
        for a in addrs {
            if let Some(l) = self.bind_tcp_if_missing(*a, bind).await? {
                out.push((*a, l));
            }
        }
        Ok(out)
    }
}

impl<K: std::hash::Hash + Eq + Clone> Listeners<K> {
    /// Of `wanted`, the keys not held yet (to bind in `stage`).
    pub fn missing<'a>(&self, wanted: impl IntoIterator<Item = &'a K>) -> Vec<K>
    where
        K: 'a,
    {
        let map = self.map.locked();
        wanted
            .into_iter()
            .filter(|k| !map.contains_key(k))
            .cloned()
            .collect()
    }

    /// Record a started listener.
    pub fn insert(&self, key: K, token: CancellationToken) {
        let old = self.map.locked().insert(key, token);
        if let Some(old) = old {
            old.cancel();
        }
    }

    /// Start serving the listener `key`: a fresh token from `tasks`
    /// (cancelled by shutdown, or when a reload drops `key`), the task
    /// `serve(token)` supervised under `name`, and the token recorded under
    /// `key` (a listener already held under it is stopped). Returns the
    /// token, for a listener served by more than one task (DNS: UDP and
    /// TCP).
    pub fn start<F>(
        &self,
        tasks: &Tasks,
        key: K,
        name: impl Into<String>,
        serve: impl FnOnce(CancellationToken) -> F,
    ) -> CancellationToken
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let token = tasks.token();
        tasks.spawn(name, token.clone(), serve(token.clone()));
        self.insert(key, token.clone());
        token
    }

    /// Stop every listener not in `keep`, logging each as
    /// `<service>: closed listener <key>` (the close half of a commit).
    pub fn close_except(&self, service: &str, keep: &[K])
    where
        K: ListenerKey,
    {
        for gone in self.retain(keep) {
            info!("{service}: closed listener {}", gone.label());
        }
    }

    /// Stop and forget every listener not in `keep`; returns their keys.
    pub fn retain(&self, keep: &[K]) -> Vec<K> {
        let mut map = self.map.locked();
        let gone: Vec<K> = map.keys().filter(|k| !keep.contains(k)).cloned().collect();
        for k in &gone {
            if let Some(t) = map.remove(k) {
                t.cancel();
            }
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_ending_on_its_own_fails_the_service() {
        let tasks = Tasks::new("test");
        let quiet = tasks.token();
        tasks.spawn("forever", quiet.clone(), {
            let t = quiet.clone();
            async move {
                t.cancelled().await;
                Ok(())
            }
        });
        tasks.spawn("short", tasks.token(), async { Ok(()) });
        let shutdown = CancellationToken::new();
        let err = tasks
            .supervise(&shutdown, Duration::from_secs(1))
            .await
            .expect_err("an unexpected end is an error");
        assert!(
            format!("{err:#}").contains("short ended unexpectedly"),
            "{err:#}"
        );
        assert!(quiet.is_cancelled(), "the other tasks are stopped");
    }

    #[tokio::test]
    async fn errors_and_panics_fail_the_service() {
        let tasks = Tasks::new("test");
        tasks.spawn("bad", tasks.token(), async { anyhow::bail!("boom") });
        let err = tasks
            .supervise(&CancellationToken::new(), Duration::from_secs(1))
            .await
            .expect_err("error");
        assert!(format!("{err:#}").contains("boom"), "{err:#}");

        let tasks = Tasks::new("test");
        tasks.spawn("panics", tasks.token(), async { panic!("on purpose") });
        assert!(
            tasks
                .supervise(&CancellationToken::new(), Duration::from_secs(1))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn cancelled_tasks_end_quietly_and_shutdown_is_ok() {
        let tasks = Tasks::new("test");
        let removed = tasks.token();
        let t = removed.clone();
        tasks.spawn("removed listener", removed.clone(), async move {
            t.cancelled().await;
            Ok(())
        });
        let shutdown = CancellationToken::new();
        let s2 = shutdown.clone();
        tokio::spawn(async move {
            removed.cancel();
            tokio::time::sleep(Duration::from_millis(50)).await;
            s2.cancel();
        });
        tasks
            .supervise(&shutdown, Duration::from_secs(1))
            .await
            .expect("a removed listener and shutdown are not failures");
    }

    #[test]
    fn listeners_keep_unchanged_keys() {
        let l: Listeners<u16> = Listeners::default();
        let a = CancellationToken::new();
        let b = CancellationToken::new();
        l.insert(1, a.clone());
        l.insert(2, b.clone());
        assert_eq!(l.missing(&[1, 3]), vec![3]);
        assert_eq!(l.retain(&[1, 3]), vec![2]);
        assert!(b.is_cancelled() && !a.is_cancelled());
    }
}
