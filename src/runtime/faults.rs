//! The test hooks of one appliance: a named task fails or panics after a
//! delay, a reload stalls in staging ([`FAULT_ENV`]), the NTP service's
//! host clock state is forced ([`HOST_CLOCK_ENV`]), the registry's quiet
//! time before a node counts as `pulled` ([`PULL_QUIET_ENV`]) and its tag
//! TTL ([`TAG_TTL_ENV`]) are shortened.
//!
//! Test-only: the hooks exist only in a build with the cargo feature
//! `test-hooks` (off by default; `cargo test` turns it on through the
//! crate's dev-dependency on itself, so the binary the integration tests
//! spawn has it). The shipped binary (`cargo build --release`) has no
//! parser, no variable and no injected panic: [`Faults`] is then empty,
//! [`Faults::wrap`] returns the task as is and every forced value is
//! `None`.
//!
//! The hooks are a value (`runtime::context::Context` carries them from
//! `serve` to every service's [`super::service::Tasks`] and to the
//! services that read one), not process state: the process reads them
//! from its environment ([`Faults::from_env`]), an appliance embedded in a
//! test is given its own ([`Faults::from_vars`], by the same names), so
//! two appliances in one process have different hooks. Invariant: read
//! once, at the start of `serve`.

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

/// Environment variable forcing the host clock state the NTP service
/// serves (test builds only): `synchronised` or `unsynchronised` replaces
/// the adjtimex reading, so the leap-indicator decision runs the same on
/// any host; any other value is ignored.
pub const HOST_CLOCK_ENV: &str = "CRC_APPLIANCE_TEST_HOST_CLOCK";

/// Environment variable replacing the registry's quiet time (test builds
/// only): whole seconds without a request after which a node that pulled
/// blobs is `pulled` on the timeline (`timeline::PULL_QUIET_SECS`, a
/// minute, otherwise), so a test does not wait a minute.
pub const PULL_QUIET_ENV: &str = "CRC_APPLIANCE_TEST_PULL_QUIET_SECS";

/// Environment variable replacing the pull-through cache's tag TTL (test
/// builds only): milliseconds after which a tag is asked upstream again
/// (the registry's `TAG_TTL`, a minute, otherwise; the tests of the
/// upstream-gone path use 0: every tag is asked upstream).
pub const TAG_TTL_ENV: &str = "CRC_APPLIANCE_REGISTRY_TAG_TTL_MS";

/// The test hooks of one appliance: the faults to inject and the values
/// forced (none in a build without `test-hooks`).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    #[cfg(feature = "test-hooks")]
    list: std::sync::Arc<[Fault]>,
    /// [`HOST_CLOCK_ENV`]: the host clock forced synchronised (`true`) or
    /// not.
    #[cfg(feature = "test-hooks")]
    host_clock: Option<bool>,
    /// [`PULL_QUIET_ENV`], in seconds.
    #[cfg(feature = "test-hooks")]
    pull_quiet_secs: Option<u64>,
    /// [`TAG_TTL_ENV`].
    #[cfg(feature = "test-hooks")]
    tag_ttl: Option<Duration>,
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
    /// The hooks this process's environment sets (none without
    /// `test-hooks`).
    pub fn from_env() -> Faults {
        Faults::from_vars(|name| std::env::var(name).ok())
    }

    /// The hooks `var` sets, by the names of their environment variables
    /// ([`FAULT_ENV`], [`HOST_CLOCK_ENV`], [`PULL_QUIET_ENV`],
    /// [`TAG_TTL_ENV`]): how a test gives an embedded appliance its own.
    /// None without `test-hooks`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Faults {
        #[cfg(feature = "test-hooks")]
        {
            let list = var(FAULT_ENV).map(|v| parse(&v)).unwrap_or_default();
            let host_clock = match var(HOST_CLOCK_ENV).as_deref() {
                Some("synchronised") => Some(true),
                Some("unsynchronised") => Some(false),
                _ => None,
            };
            Faults {
                list: list.into(),
                host_clock,
                pull_quiet_secs: var(PULL_QUIET_ENV).and_then(|v| v.trim().parse().ok()),
                tag_ttl: var(TAG_TTL_ENV)
                    .and_then(|v| v.trim().parse().ok())
                    .map(Duration::from_millis),
            }
        }
        #[cfg(not(feature = "test-hooks"))]
        {
            let _ = var;
            Faults {}
        }
    }

    /// [`HOST_CLOCK_ENV`]: the host clock state to serve instead of the
    /// adjtimex reading (synchronised or not), if forced.
    pub fn host_clock(&self) -> Option<bool> {
        #[cfg(feature = "test-hooks")]
        {
            self.host_clock
        }
        #[cfg(not(feature = "test-hooks"))]
        None
    }

    /// [`PULL_QUIET_ENV`]: the registry's quiet time in seconds, if
    /// shortened.
    pub fn pull_quiet_secs(&self) -> Option<u64> {
        #[cfg(feature = "test-hooks")]
        {
            self.pull_quiet_secs
        }
        #[cfg(not(feature = "test-hooks"))]
        None
    }

    /// [`TAG_TTL_ENV`]: the pull-through cache's tag TTL, if shortened.
    pub fn tag_ttl(&self) -> Option<Duration> {
        #[cfg(feature = "test-hooks")]
        {
            self.tag_ttl
        }
        #[cfg(not(feature = "test-hooks"))]
        None
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
        let faults = Faults::from_vars(|name| {
            (name == FAULT_ENV).then(|| "dns tcp@10, reload stage@60000".to_string())
        });
        assert_eq!(faults.stall("reload stage"), Some(Duration::from_secs(60)));
        assert_eq!(faults.stall("dns udp"), None);
        let forever: TaskFuture = Box::pin(std::future::pending());
        let err = faults.wrap("dns tcp 127.0.0.1:53", forever).await;
        assert!(format!("{err:?}").contains("failed by"), "{err:?}");
        let other = faults.wrap("dns udp", Box::pin(async { Ok(()) })).await;
        assert!(other.is_ok());
    }

    #[test]
    fn forced_values_are_read_by_name_and_a_bad_one_is_ignored() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            Faults::from_vars(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            })
        };
        let set = vars(&[
            (HOST_CLOCK_ENV, "unsynchronised"),
            (PULL_QUIET_ENV, "1"),
            (TAG_TTL_ENV, "0"),
        ]);
        assert_eq!(
            (set.host_clock(), set.pull_quiet_secs(), set.tag_ttl()),
            (Some(false), Some(1), Some(Duration::ZERO))
        );
        assert_eq!(
            vars(&[(HOST_CLOCK_ENV, "synchronised")]).host_clock(),
            Some(true)
        );
        let bad = vars(&[(HOST_CLOCK_ENV, "yes"), (PULL_QUIET_ENV, "soon")]);
        assert_eq!((bad.host_clock(), bad.pull_quiet_secs()), (None, None));
        let none = Faults::default();
        assert_eq!((none.host_clock(), none.pull_quiet_secs()), (None, None));
        assert_eq!(none.tag_ttl(), None);
        assert_eq!(none.stall("reload stage"), None);
    }
}
