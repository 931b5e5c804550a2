//! How one `serve` starts its helper processes (today the libvirt
//! driver's `crc-appliance-libvirt`): where their programs are and where
//! their log lines go, a per-serve value in the run-time context
//! (`runtime::context`) rather than something read from the process.
//!
//! - The process (`crc-appliance serve`, the `vm` commands;
//!   [`HelperProcs::default`]): a helper is found next to the running
//!   executable and shares its stderr, in its log format
//!   (`--log-format`), so its lines land where the process's go.
//! - An embedded `serve` (the in-process test harness;
//!   [`HelperProcs::embedded`]): the host names the directory (a test's
//!   executable is not next to the helper), and the helper's log joins
//!   the embedded appliance's own log: the helper writes JSON lines to a
//!   pipe and [`HelperProcs::relay`] logs each again through `tracing`, at
//!   its level, as its message followed by its fields (`k=v`), as the
//!   text format writes them. The host may also set variables in the
//!   helpers' environment (`CRC_APPLIANCE_DOMAIN_TYPE`, which the libvirt
//!   helper reads), for that appliance only.
//!
//! Invariants: the relay reads until EOF (the helper's exit), so the
//! helper never blocks on a full stderr pipe; a line that is not a JSON
//! event (a panic message) is relayed as it is, at WARN.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tracing::{debug, error, info, trace, warn};

use crate::runtime::telemetry::{self, LogFormat};

/// Where a helper's log lines go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HelperLog {
    /// The helper shares this process's stderr, in its log format.
    #[default]
    Inherit,
    /// The helper writes JSON lines to a pipe; each is logged again here.
    Relay,
}

/// How one `serve` starts its helper processes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HelperProcs {
    /// The directory the helper programs are in; `None`: the running
    /// executable's.
    pub dir: Option<PathBuf>,
    pub log: HelperLog,
    /// Set in the helpers' environment, on top of this process's (none
    /// for the process).
    pub env: Vec<(String, String)>,
}

impl HelperProcs {
    /// An embedded `serve`'s: helpers from `dir` (`None`: next to the
    /// running executable), their log relayed into the appliance's own.
    pub fn embedded(dir: Option<PathBuf>) -> HelperProcs {
        HelperProcs {
            dir,
            log: HelperLog::Relay,
            env: Vec::new(),
        }
    }

    /// The path of the helper program `name`, and where it is expected
    /// (for the message when it is missing): `next to <executable>` or
    /// `in <dir>`.
    pub fn program(&self, name: &str) -> anyhow::Result<(PathBuf, String)> {
        if let Some(dir) = &self.dir {
            return Ok((dir.join(name), format!("in {}", dir.display())));
        }
        let exe = std::env::current_exe().context("locating the running crc-appliance")?;
        let dir = exe.parent().unwrap_or(Path::new("/"));
        Ok((dir.join(name), format!("next to {}", exe.display())))
    }

    /// The command that starts the helper at `path`: `--log-format` and
    /// stderr as this serve's log wants them, and [`HelperProcs::env`]
    /// (stdin/stdout are the caller's).
    pub fn command(&self, path: &Path) -> tokio::process::Command {
        use clap::ValueEnum as _;
        let (format, stderr) = match self.log {
            HelperLog::Inherit => (telemetry::format(), Stdio::inherit()),
            HelperLog::Relay => (LogFormat::Json, Stdio::piped()),
        };
        let mut cmd = tokio::process::Command::new(path);
        if let Some(v) = format.to_possible_value() {
            cmd.arg("--log-format").arg(v.get_name());
        }
        cmd.stderr(stderr)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// With [`HelperLog::Relay`], log the started `child`'s stderr lines
    /// here (a task on the current runtime, until the helper's stderr
    /// closes), each with `helper = name`.
    pub fn relay(&self, child: &mut tokio::process::Child, name: &'static str) {
        let Some(stderr) = child.stderr.take() else {
            return;
        };
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                relay_line(&line, name);
            }
        });
    }
}

/// One line of a helper's stderr, logged again at its level.
fn relay_line(line: &str, helper: &'static str) {
    let (level, text) = event_text(line).unwrap_or_else(|| ("WARN".into(), line.to_string()));
    match level.as_str() {
        "ERROR" => error!(helper, "{text}"),
        "WARN" => warn!(helper, "{text}"),
        "INFO" => info!(helper, "{text}"),
        "DEBUG" => debug!(helper, "{text}"),
        _ => trace!(helper, "{text}"),
    }
}

/// A JSON event line of `tracing-subscriber`'s json format → its level,
/// and its message followed by its other fields as `k=v` (strings
/// unquoted, as the text format writes a displayed value).
fn event_text(line: &str) -> Option<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let level = v.get("level")?.as_str()?.to_string();
    let fields = v.get("fields")?.as_object()?;
    let mut text = fields
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or_default()
        .to_string();
    for (k, v) in fields.iter().filter(|(k, _)| *k != "message") {
        let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
        text.push_str(&format!(" {k}={v}"));
    }
    Some((level, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_event_becomes_its_level_message_and_fields() {
        let line = r#"{"timestamp":"2026-11-29T02:00:00Z","level":"WARN","fields":{"message":"install VM stopped; installing again","domain":"test-master-0","n":3},"target":"crc_appliance::drivers::libvirt::install"}"#;
        assert_eq!(
            event_text(line),
            Some((
                "WARN".into(),
                "install VM stopped; installing again domain=test-master-0 n=3".into()
            ))
        );
        assert_eq!(event_text("thread 'main' panicked at x"), None);
        assert_eq!(event_text(r#"{"level":"INFO"}"#), None);
    }

    #[test]
    fn the_process_finds_helpers_next_to_itself_an_embedded_serve_where_told() {
        let exe = std::env::current_exe().unwrap();
        let (path, at) = HelperProcs::default().program("h").unwrap();
        assert_eq!(path, exe.with_file_name("h"));
        assert_eq!(at, format!("next to {}", exe.display()));
        let e = HelperProcs::embedded(Some("/opt/x".into()));
        assert_eq!(e.log, HelperLog::Relay);
        let (path, at) = e.program("h").unwrap();
        assert_eq!(
            (path, at.as_str()),
            (PathBuf::from("/opt/x/h"), "in /opt/x")
        );
        let mut e = e;
        e.env
            .push(("CRC_APPLIANCE_DOMAIN_TYPE".into(), "qemu".into()));
        let cmd = e.command(Path::new("/opt/x/h"));
        let envs: Vec<_> = cmd.as_std().get_envs().collect();
        assert_eq!(
            envs,
            [(
                std::ffi::OsStr::new("CRC_APPLIANCE_DOMAIN_TYPE"),
                Some(std::ffi::OsStr::new("qemu"))
            )]
        );
        let args: Vec<_> = cmd.as_std().get_args().collect();
        assert_eq!(args, ["--log-format", "json"], "relayed lines are JSON");
    }
}
