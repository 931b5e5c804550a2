//! The parent's end of the libvirt helper ([`super::proto`]): start
//! `crc-appliance-libvirt` where this serve's [`HelperProcs`] says (the
//! process: from the directory of the running executable; an embedded
//! serve: the directory its host names), exchange requests and responses,
//! notice when it exits.
//!
//! This module must not use the `virt` crate (nor anything that does): the
//! `crc-appliance` binary then does not link libvirt.so.0 (rustc links with
//! `--as-needed`; tests/libvirt.rs checks NEEDED).
//!
//! Invariants: one exchange at a time, and an exchange is never cut in
//! half: it runs in its own task, so a caller that stops waiting (a reload
//! timing out) leaves it to finish and the next request reads its own
//! response. The helper gets stdin/stdout pipes; its log lines land where
//! `serve`'s go: it shares the process's stderr, or, for an embedded
//! serve, its lines are relayed into that serve's log
//! ([`HelperProcs::relay`]).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::proto::{HELPER, Request, Response, encode};
use crate::runtime::helperproc::HelperProcs;
use crate::runtime::sync::LockExt as _;

/// The helper where `procs` says it is, or why it cannot be used.
pub fn helper_path(procs: &HelperProcs) -> anyhow::Result<PathBuf> {
    let (path, expected) = procs.program(HELPER)?;
    if !path.is_file() {
        anyhow::bail!(
            "the libvirt helper {} is missing: libvirt support runs in {HELPER}, \
             installed {expected} (the packages install both; `cargo build` with the \
             default `libvirt` feature builds both)",
            path.display(),
        );
    }
    Ok(path)
}

struct Io {
    /// `None` once closed (shutdown): the helper sees EOF and exits.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

/// A running helper.
pub struct Helper {
    io: Arc<tokio::sync::Mutex<Io>>,
    /// Taken by [`Helper::take_child`] (whoever waits for the exit).
    child: Mutex<Option<Child>>,
    path: PathBuf,
    pid: u32,
}

impl Helper {
    /// Start the helper as `procs` says (dies with this process: stdin
    /// EOF, PR_SET_PDEATHSIG in the helper, kill on drop here).
    pub fn spawn(procs: &HelperProcs) -> anyhow::Result<Helper> {
        let path = helper_path(procs)?;
        let mut child = procs
            .command(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the libvirt helper {}", path.display()))?;
        procs.relay(&mut child, HELPER);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            anyhow::bail!("libvirt helper {}: no pipes", path.display());
        };
        let pid = child.id().unwrap_or(0);
        Ok(Helper {
            io: Arc::new(tokio::sync::Mutex::new(Io {
                stdin: Some(stdin),
                stdout: BufReader::new(stdout),
            })),
            child: Mutex::new(Some(child)),
            path,
            pid,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Send `req` and read its response; [`Response::Error`] is an `Err`.
    pub async fn call(&self, req: Request) -> anyhow::Result<Response> {
        let io = self.io.clone();
        let path = self.path.clone();
        let exchange = tokio::spawn(async move {
            let mut io = io.lock().await;
            exchange(&mut io, &req, &path).await
        });
        match exchange.await.context("libvirt helper exchange")?? {
            Response::Error { message } => Err(anyhow::anyhow!(message)),
            r => Ok(r),
        }
    }

    /// The child process, for the one task that waits for it to exit.
    pub fn take_child(&self) -> Option<Child> {
        self.child.locked().take()
    }

    /// Close stdin (the helper exits at EOF) unless an exchange is in
    /// flight; then give it `grace` to exit before killing it.
    pub async fn stop(&self, child: &mut Child, grace: Duration) -> Option<ExitStatus> {
        if let Ok(mut io) = self.io.try_lock() {
            io.stdin = None;
        }
        match tokio::time::timeout(grace, child.wait()).await {
            Ok(r) => r.ok(),
            Err(_) => {
                let _ = child.start_kill();
                child.wait().await.ok()
            }
        }
    }

    /// One request in a helper of its own (the `vm` commands).
    pub async fn once(procs: &HelperProcs, req: Request) -> anyhow::Result<Response> {
        let h = Helper::spawn(procs)?;
        let r = h.call(req).await;
        if let Some(mut child) = h.take_child() {
            h.stop(&mut child, Duration::from_secs(5)).await;
        }
        r
    }
}

async fn exchange(io: &mut Io, req: &Request, path: &Path) -> anyhow::Result<Response> {
    let gone = || {
        format!(
            "the libvirt helper {} is not running (it exited)",
            path.display()
        )
    };
    let stdin = io.stdin.as_mut().with_context(gone)?;
    stdin
        .write_all(encode(req).as_bytes())
        .await
        .with_context(gone)?;
    stdin.flush().await.with_context(gone)?;
    let mut line = String::new();
    if io.stdout.read_line(&mut line).await.with_context(gone)? == 0 {
        anyhow::bail!(gone());
    }
    serde_json::from_str(&line)
        .with_context(|| format!("libvirt helper {}: bad response", path.display()))
}
