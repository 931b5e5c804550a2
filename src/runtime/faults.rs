//! Fault injection for the tests of the supervision and reload paths: a
//! named task fails or panics after a delay, a reload stalls in staging.
//!
//! Test-only: the faults are read from [`FAULT_ENV`] only in a build with
//! the cargo feature `test-hooks` (off by default; `cargo test` turns it
//! on through the crate's dev-dependency on itself, so the binary the
//! integration tests spawn has it). The shipped binary (`cargo build
//! --release`) has no parser, no variable and no injected panic:
//! [`Faults`] is then empty and [`Faults::wrap`] returns the task as is.
//!
//! The faults are a value (`runtime::context::Context` carries them from
//! `serve` to every service's [`super::service::Tasks`]), not process
//! state. Invariant: read once, at the start of `serve`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A supervised task's future.
pub type TaskFuture = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

/// Environment variable naming tasks to fail (test builds only):
/// comma-separated prefixes of task names (`dns udp`, `dhcp lease writer`,
/// `lb frontend api`, `serve single-node prober`, …), each optionally with
/// `@<milliseconds>` after which the task fails (default: at once) and
/// `:panic` to make it panic instead of returning an error. `reload
/// stage@<ms>` instead holds every reload that long in its staging phase.
pub const FAULT_ENV: &str = "CRC_APPLIANCE_FAIL_TASK";

/// The faults to inject (none in a build without `test-hooks`).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    #[cfg(feature = "test-hooks")]
    list: std::sync::Arc<[Fault]>,
}

/// One injected fault: tasks whose name starts with `prefix` fail after
/// `after`, by an error or by a panic.
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fault {
    prefix: String,
    after: Duration,
    panic: bool,
}

impl Faults {
    /// The faults [`FAULT_ENV`] names (none without `test-hooks`).
    pub fn from_env() -> Faults {
        #[cfg(feature = "test-hooks")]
        {
            let list = std::env::var(FAULT_ENV)
                .map(|v| parse(&v))
                .unwrap_or_default();
            Faults { list: list.into() }
        }
        #[cfg(not(feature = "test-hooks"))]
        Faults {}
    }

    /// How long the step `name` stalls (`reload stage@<ms>` holds every
    /// reload in its staging phase), if a fault names it.
    pub fn stall(&self, name: &str) -> Option<Duration> {
        #[cfg(feature = "test-hooks")]
        {
            self.find(name).map(|f| f.after)
        }
        #[cfg(not(feature = "test-hooks"))]
        {
            let _ = name;
            None
        }
    }

    /// `fut`, made to fail (or panic) after its fault's delay when a fault
    /// names the task `name`.
    pub fn wrap(&self, name: &str, fut: TaskFuture) -> TaskFuture {
        #[cfg(feature = "test-hooks")]
        if let Some(fault) = self.find(name) {
            let n = name.to_string();
            return Box::pin(async move {
                tokio::select! {
                    r = fut => r,
                    _ = tokio::time::sleep(fault.after) => {
                        if fault.panic {
                            panic!("{n}: panic injected by {FAULT_ENV}");
                        }
                        Err(anyhow::anyhow!("{n}: failed by {FAULT_ENV}"))
                    }
                }
            });
        }
        let _ = name;
        fut
    }

    #[cfg(feature = "test-hooks")]
    fn find(&self, name: &str) -> Option<Fault> {
        self.list
            .iter()
            .find(|f| name.starts_with(f.prefix.as_str()))
            .cloned()
    }
}

/// Parse a [`FAULT_ENV`] value.
#[cfg(feature = "test-hooks")]
fn parse(v: &str) -> Vec<Fault> {
    v.split(',')
        .filter_map(|item| {
            let item = item.trim();
            let (item, panic) = match item.strip_suffix(":panic") {
                Some(rest) => (rest, true),
                None => (item, false),
            };
            let (prefix, ms) = match item.split_once('@') {
                Some((p, ms)) => (p.trim(), ms.trim().parse().ok()?),
                None => (item, 0),
            };
            (!prefix.is_empty()).then(|| Fault {
                prefix: prefix.to_string(),
                after: Duration::from_millis(ms),
                panic,
            })
        })
        .collect()
}

#[cfg(all(test, feature = "test-hooks"))]
mod tests {
    use super::*;

    #[test]
    fn fault_plans_parse_prefixes_and_delays() {
        let f = |p: &str, ms, panic| Fault {
            prefix: p.to_string(),
            after: Duration::from_millis(ms),
            panic,
        };
        assert_eq!(
            parse("dns udp, lb check@250 ,,@5, bad@x, serve timeline sampler@100:panic"),
            vec![
                f("dns udp", 0, false),
                f("lb check", 250, false),
                f("serve timeline sampler", 100, true),
            ]
        );
    }

    #[tokio::test]
    async fn a_named_task_fails_and_a_stall_is_found() {
        let faults = Faults {
            list: parse("dns tcp@10, reload stage@60000").into(),
        };
        assert_eq!(faults.stall("reload stage"), Some(Duration::from_secs(60)));
        assert_eq!(faults.stall("dns udp"), None);
        let forever: TaskFuture = Box::pin(std::future::pending());
        let err = faults.wrap("dns tcp 127.0.0.1:53", forever).await;
        assert!(format!("{err:?}").contains("failed by"), "{err:?}");
        let other = faults.wrap("dns udp", Box::pin(async { Ok(()) })).await;
        assert!(other.is_ok());
    }
}
