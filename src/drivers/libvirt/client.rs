//! The parent's end of the libvirt helper ([`super::proto`]): start
//! `crc-appliance-libvirt` from the directory of the running executable,
//! exchange requests and responses, notice when it exits.
//!
//! This module must not use the `virt` crate (nor anything that does): the
//! `crc-appliance` binary then does not link libvirt.so.0 (rustc links with
//! `--as-needed`; tests/libvirt.rs checks NEEDED).
//!
//! Invariants: one exchange at a time, and an exchange is never cut in
//! half: it runs in its own task, so a caller that stops waiting (a reload
//! timing out) leaves it to finish and the next request reads its own
//! response. The helper gets stdin/stdout pipes and shares stderr (its
//! log lines land where `serve`'s go).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::proto::{HELPER, Request, Response, encode};
use crate::runtime::sync::LockExt as _;

/// The helper next to the running executable, or why it cannot be used.
pub fn helper_path() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the running crc-appliance")?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let path = dir.join(HELPER);
    if !path.is_file() {
        anyhow::bail!(
            "the libvirt helper {} is missing: libvirt support runs in {HELPER}, \
             installed next to {} (the packages install both; `cargo build` with the \
             default `libvirt` feature builds both)",
            path.display(),
            exe.display()
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
    /// Start the helper (dies with this process: stdin EOF, PR_SET_PDEATHSIG
    /// in the helper, kill on drop here).
    pub fn spawn() -> anyhow::Result<Helper> {
        use clap::ValueEnum as _;
        let path = helper_path()?;
        let format = crate::runtime::telemetry::format();
        let mut cmd = tokio::process::Command::new(&path);
        if let Some(v) = format.to_possible_value() {
            cmd.arg("--log-format").arg(v.get_name());
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the libvirt helper {}", path.display()))?;
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
    pub async fn once(req: Request) -> anyhow::Result<Response> {
        let h = Helper::spawn()?;
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
