//! The libvirt helper process (`crc-appliance-libvirt`, feature `libvirt`):
//! the only binary that links libvirt.so.0. It reads [`Request`]s from
//! stdin, runs them on the [`Driver`] (blocking libvirt calls, one at a
//! time) and writes one [`Response`] per request to stdout
//! ([`super::proto`]). Its logs (the driver's own `tracing` lines) go to
//! stderr in the `--log-format` it is given: the process's stderr, shared
//! with `serve` in `serve`'s format, or, under an embedded `serve`, a pipe
//! whose JSON lines that serve relays into its own log
//! (`runtime::helperproc`).
//!
//! Invariants: stdout carries protocol lines only; the helper ends on stdin
//! EOF and, through `PR_SET_PDEATHSIG`, with the thread that started it
//! (`serve` killed by SIGKILL cannot leave it behind); at most two drivers
//! are open: the one `serve` polls and the one a reload is staging.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead as _, Write as _};
use std::process::ExitCode;

use super::driver::{Driver, status_table};
use super::proto::{self, Install, Polled, Request, Response};
use super::spec::Spec;
use super::{VmAction, vm_output};
use crate::runtime::telemetry::{self, LogFormat};

/// `crc-appliance-libvirt [--log-format auto|text|json]`.
pub fn main() -> ExitCode {
    let format = log_format(std::env::args().skip(1));
    telemetry::init(format);
    // Die with the parent even while blocked in a libvirt call (stdin EOF
    // is only seen between requests).
    if let Err(e) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        tracing::warn!("libvirt helper: PR_SET_PDEATHSIG: {e}");
    }
    let mut helper = Helper::default();
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let Ok(line) = line else { break };
        let resp = match serde_json::from_str::<Request>(&line) {
            Ok(req) => helper.handle(req),
            Err(e) => Response::Error {
                message: format!("libvirt helper: bad request: {e}"),
            },
        };
        if stdout
            .write_all(proto::encode(&resp).as_bytes())
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    ExitCode::SUCCESS
}

/// The value of `--log-format` (default `auto`; unknown values too).
fn log_format(mut args: impl Iterator<Item = String>) -> LogFormat {
    use clap::ValueEnum as _;
    while let Some(a) = args.next() {
        let v = match a.strip_prefix("--log-format=") {
            Some(v) => Some(v.to_string()),
            None if a == "--log-format" => args.next(),
            None => None,
        };
        if let Some(f) = v.and_then(|v| LogFormat::from_str(&v, true).ok()) {
            return f;
        }
    }
    LogFormat::Auto
}

/// The open drivers, by generation.
#[derive(Default)]
struct Helper {
    drivers: BTreeMap<u64, Driver>,
    /// The generation the last poll used (kept when a newer one is opened).
    polled: Option<u64>,
}

impl Helper {
    fn handle(&mut self, req: Request) -> Response {
        let res = match req {
            Request::Open {
                id,
                spec,
                network_up,
            } => self.open(id, *spec, network_up),
            Request::Poll { id, up, fetched } => self.poll(id, up, fetched),
            Request::Vm {
                spec,
                action,
                fetched,
            } => vm(*spec, action, fetched),
        };
        res.unwrap_or_else(|e| Response::Error {
            message: format!("{e:#}"),
        })
    }

    fn open(&mut self, id: u64, spec: Spec, network_up: bool) -> anyhow::Result<Response> {
        // A staged driver whose reload was not committed is replaced.
        let keep = self.polled;
        self.drivers.retain(|k, _| Some(*k) == keep);
        let d = Driver::open(spec)?;
        let lines = if network_up { d.network_up()? } else { vec![] };
        let domain_type = d.spec().domain_type.clone();
        self.drivers.insert(id, d);
        Ok(Response::Opened { domain_type, lines })
    }

    fn poll(
        &mut self,
        id: u64,
        up: bool,
        fetched: Option<Vec<String>>,
    ) -> anyhow::Result<Response> {
        self.drivers.retain(|k, _| *k == id);
        self.polled = Some(id);
        let d = self
            .drivers
            .get_mut(&id)
            .ok_or_else(|| anyhow::anyhow!("libvirt helper: no driver {id} is open"))?;
        set_evidence(d, fetched);
        let lines = if up { d.up()? } else { vec![] };
        let installs = d
            .finish_installs()?
            .into_iter()
            .map(|o| Install {
                node: o.node,
                rejected: o.result.err().map(|why| why.to_string()),
            })
            .collect();
        Ok(Response::Polled(Box::new(Polled {
            lines,
            installs,
            network: d.network_status()?,
            nodes: d.status()?,
        })))
    }
}

/// Only `serve`'s HTTP service sees the ignition fetches: without evidence
/// the shut-off reason alone decides.
fn set_evidence(d: &mut Driver, fetched: Option<Vec<String>>) {
    match fetched {
        Some(v) => {
            let set: HashSet<String> = v.into_iter().collect();
            d.set_evidence(Box::new(move |node| set.contains(node)));
        }
        None => d.evidence = None,
    }
}

fn vm(spec: Spec, action: VmAction, fetched: Option<Vec<String>>) -> anyhow::Result<Response> {
    let mut d = Driver::open(spec)?;
    if fetched.is_some() {
        set_evidence(&mut d, fetched);
    }
    let text = match action {
        VmAction::Up => {
            let mut l = d.up()?;
            l.extend(d.finish_installs()?.iter().map(|o| o.line()));
            vm_output(l)
        }
        VmAction::Down => vm_output(d.down()?),
        VmAction::RemoveBootstrap => vm_output(d.remove_bootstrap()?),
        VmAction::Status => {
            let mut o = d.network_status()?;
            o.push('\n');
            o.push_str(&status_table(&d.status()?));
            o
        }
    };
    Ok(Response::Output { text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_format_is_read_from_the_arguments() {
        let f = |a: &[&str]| log_format(a.iter().map(|s| s.to_string()));
        assert_eq!(f(&[]), LogFormat::Auto);
        assert_eq!(f(&["--log-format", "json"]), LogFormat::Json);
        assert_eq!(f(&["--log-format=text"]), LogFormat::Text);
        assert_eq!(f(&["--log-format", "bogus"]), LogFormat::Auto);
        assert_eq!(f(&["--log-format"]), LogFormat::Auto);
    }
}
