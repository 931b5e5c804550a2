//! TCP accept loops shared by the DNS (TCP), HTTP, admin and LB listeners.
//!
//! [`accept`] is the common step: accept one connection, and on an error
//! (EMFILE and friends) log it and back off instead of spinning; it returns
//! `None` as soon as `shutdown` is cancelled, also during the back-off.
//! [`serve`] is the whole loop for services that wait for a connection slot
//! before accepting: take a permit, accept, reap finished connection tasks,
//! spawn the handler (holding the permit until it ends), and at shutdown
//! drain the connections (optionally bounded, then aborted).
//!
//! One HTTP connection's life (timeouts, idling, drain) is in
//! `runtime::httpconn`.
//!
//! The log callbacks are the caller's so each service keeps its own message,
//! level and tracing target; they rate-limit with
//! [`crate::runtime::lograte`] (one line per second for EMFILE storms).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::lazytcp::{LazyListener, LazyTcp};

/// A listening socket the accept loops take connections from: tokio's
/// [`TcpListener`] (registered streams) or the HTTP listeners'
/// [`LazyListener`] (streams registered when they first wait).
pub trait Accept {
    /// An accepted connection.
    type Conn: Send + 'static;
    /// The next connection and its peer.
    fn accept_conn(&self)
    -> impl Future<Output = std::io::Result<(Self::Conn, SocketAddr)>> + Send;
}

impl Accept for TcpListener {
    type Conn = TcpStream;
    fn accept_conn(&self) -> impl Future<Output = std::io::Result<(TcpStream, SocketAddr)>> + Send {
        self.accept()
    }
}

impl Accept for LazyListener {
    type Conn = LazyTcp;
    fn accept_conn(&self) -> impl Future<Output = std::io::Result<(LazyTcp, SocketAddr)>> + Send {
        self.accept()
    }
}

/// Accept one connection. On an accept error, `on_error` logs it and the
/// loop sleeps `backoff` before trying again. `None` once `shutdown` is
/// cancelled.
pub async fn accept<L: Accept>(
    listener: &L,
    shutdown: &CancellationToken,
    backoff: Duration,
    on_error: impl Fn(&std::io::Error),
) -> Option<(L::Conn, SocketAddr)> {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            r = listener.accept_conn() => match r {
                Ok(x) => return Some(x),
                Err(e) => on_error(&e),
            },
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(backoff) => {}
        }
    }
}

/// How [`serve`] limits, backs off and drains.
pub struct Limits {
    /// Connections served at once; the next accept waits for a free slot.
    /// `None`: no limit.
    pub max_conns: Option<usize>,
    /// Sleep after an accept error.
    pub backoff: Duration,
    /// At shutdown, wait this long for connection tasks, then abort the
    /// rest. `None`: wait for all (the handlers bound their own drain).
    pub drain: Option<Duration>,
}

/// Accept and serve connections until `shutdown` is cancelled, then drain.
/// `handle` is called in the accept loop (so per-socket setup in its body
/// runs before the next accept) and the future it returns is spawned.
pub async fn serve<L, F, Fut>(
    listener: &L,
    limits: Limits,
    shutdown: &CancellationToken,
    on_error: impl Fn(&std::io::Error),
    mut handle: F,
) where
    L: Accept,
    F: FnMut(L::Conn, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = limits.max_conns.map(|n| Arc::new(Semaphore::new(n)));
    let mut conns = JoinSet::new();
    loop {
        let permit = match &slots {
            Some(s) => tokio::select! {
                _ = shutdown.cancelled() => break,
                p = s.clone().acquire_owned() => match p {
                    Ok(p) => Some(p),
                    Err(_) => break,
                },
            },
            None => None,
        };
        let Some((stream, peer)) = accept(listener, shutdown, limits.backoff, &on_error).await
        else {
            break;
        };
        while conns.try_join_next().is_some() {}
        let conn = handle(stream, peer);
        conns.spawn(async move {
            let _permit = permit;
            conn.await;
        });
    }
    let drain = async { while conns.join_next().await.is_some() {} };
    match limits.drain {
        None => drain.await,
        Some(d) => {
            if tokio::time::timeout(d, drain).await.is_err() {
                conns.abort_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn serves_until_shutdown_then_drains() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let served = Arc::new(AtomicUsize::new(0));
        let s2 = served.clone();
        let sd = shutdown.clone();
        let task = tokio::spawn(async move {
            let limits = Limits {
                max_conns: Some(1),
                backoff: Duration::from_millis(10),
                drain: Some(Duration::from_secs(2)),
            };
            serve(
                &l,
                limits,
                &sd,
                |_| {},
                move |_s, _p| {
                    let n = s2.clone();
                    async move {
                        n.fetch_add(1, Ordering::SeqCst);
                    }
                },
            )
            .await;
        });
        for _ in 0..3 {
            let _ = TcpStream::connect(addr).await.unwrap();
        }
        for _ in 0..200 {
            if served.load(Ordering::SeqCst) == 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(served.load(Ordering::SeqCst), 3);
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }
}
