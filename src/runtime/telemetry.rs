//! Logging: the `RUST_LOG` filter (default `info`) and one of three sinks.
//!
//! - **text** (the default on a terminal or a file): one line per event on
//!   stderr with time, level, target, message and fields; ANSI colours on a
//!   terminal only.
//! - **json** (`--log-format json`, for log shippers): one JSON object per
//!   line on stderr: `timestamp`, `level`, `target`, `fields` (the message
//!   is `fields.message`), and `span`/`spans` inside a span.
//! - **journal** (automatic under systemd): when `JOURNAL_STREAM` names
//!   stderr's own device and inode, as systemd sets it for a unit whose
//!   stderr goes to the journal. Events go to journald's native socket with
//!   `PRIORITY`, `TARGET`, `CODE_FILE`/`CODE_LINE`, `SYSLOG_IDENTIFIER` and
//!   each field as `F_<NAME>`. If that socket cannot be reached (a
//!   container with only the stream), each line on stderr starts with the
//!   sd-daemon priority prefix `<N>` (journald's `SyslogLevelPrefix=`, on by
//!   default, turns it into the entry's priority) and carries no timestamp:
//!   journald stamps every entry itself.
//!
//! Invariants: levels map to syslog priorities as sd-daemon(3) does:
//! ERROR 3, WARN 4, INFO 6, DEBUG and TRACE 7 (both sinks of the journal
//! mode agree). `JOURNAL_STREAM` alone is not enough: a command run from a
//! unit with its stderr redirected elsewhere (`2>file`) keeps text lines,
//! which is the check systemd.exec(5) asks programs to make. An explicit
//! `--log-format` wins over the detection.
//!
//! hickory's catalog logs errors only unless `RUST_LOG` names
//! `hickory_server`: it warns once per odd query (an unimplemented opcode,
//! an EDNS version above 0, a malformed update) without the client's
//! address, so a client could fill the disk with them; the DNS service
//! logs those itself, rate-limited ([`crate::runtime::lograte`]).

use std::io::IsTerminal;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The directive that quiets hickory's per-query warnings.
const QUIET_CATALOG: &str = "hickory_server::zone_handler::catalog=error";

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// journald when stderr is the unit's journal stream, else text.
    #[default]
    Auto,
    /// Human-readable lines with timestamps.
    Text,
    /// One JSON object per line (timestamp, level, target, fields, spans).
    Json,
}

/// The sink [`init`] installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    Text,
    Json,
    /// journald's native protocol.
    Journal,
    /// `<N>`-prefixed lines on stderr (the journal stream without the socket).
    JournalStream,
}

impl Sink {
    /// Whether a fatal error should be logged as an event rather than
    /// printed as `error: …` (structured sinks keep every line parseable
    /// and every journal entry prioritised).
    pub fn structured(self) -> bool {
        self != Sink::Text
    }
}

/// The syslog priority of a level (sd-daemon(3)).
pub fn priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// The format [`init`] was called with (helper processes log the same way).
static FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// The `--log-format` value [`init`] was given (`auto` before it ran).
pub fn format() -> LogFormat {
    FORMAT.get().copied().unwrap_or_default()
}

/// What every sink logs: `RUST_LOG` (default `info`), hickory's catalog
/// at error unless `RUST_LOG` names `hickory_server`. The in-process test
/// harness filters an embedded appliance's log with it too.
pub fn filter() -> EnvFilter {
    let f = EnvFilter::builder()
        .with_default_directive(tracing::level_filters::LevelFilter::INFO.into())
        .from_env_lossy();
    let named = std::env::var("RUST_LOG").is_ok_and(|v| v.contains("hickory_server"));
    match QUIET_CATALOG.parse() {
        Ok(d) if !named => f.add_directive(d),
        _ => f,
    }
}

/// Install the global subscriber; returns the sink in use.
pub fn init(format: LogFormat) -> Sink {
    let _ = FORMAT.set(format);
    let journal = format == LogFormat::Auto && stderr_is_journal_stream();
    let sink = match format {
        LogFormat::Json => Sink::Json,
        _ if journal => match journald_layer() {
            Ok(layer) => {
                let _ = tracing_subscriber::registry()
                    .with(filter())
                    .with(layer)
                    .try_init();
                return Sink::Journal;
            }
            Err(_) => Sink::JournalStream,
        },
        _ => Sink::Text,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr);
    let _ = match sink {
        Sink::Json => builder.json().try_init(),
        Sink::JournalStream => builder
            .with_ansi(false)
            .event_format(Prefixed(
                tracing_subscriber::fmt::format()
                    .without_time()
                    .with_level(false)
                    .with_ansi(false),
            ))
            .try_init(),
        _ => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
    sink
}

/// A fatal error at exit: `error: …` on stderr for people, an ERROR event
/// for the structured sinks.
pub fn fatal(sink: Sink, err: &anyhow::Error) {
    if sink.structured() {
        tracing::error!(target: "crc_appliance", "{err:#}");
    } else {
        eprintln!("error: {err:#}");
    }
}

/// journald's native protocol, priorities as [`priority`].
fn journald_layer() -> std::io::Result<tracing_journald::Layer> {
    use tracing_journald::{Priority, PriorityMappings};
    let mappings = PriorityMappings {
        error: Priority::Error,
        warn: Priority::Warning,
        info: Priority::Informational,
        debug: Priority::Debug,
        trace: Priority::Debug,
    };
    Ok(tracing_journald::layer()?
        .with_syslog_identifier("crc-appliance".into())
        .with_priority_mappings(mappings))
}

/// `JOURNAL_STREAM` (`<device>:<inode>`, decimal) is stderr's own.
fn stderr_is_journal_stream() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = value.to_str().and_then(parse_stream) else {
        return false;
    };
    rustix::fs::fstat(std::io::stderr()).is_ok_and(|st| st.st_dev == dev && st.st_ino == ino)
}

fn parse_stream(value: &str) -> Option<(u64, u64)> {
    let (dev, ino) = value.trim().split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// The text format without time and level, behind an sd-daemon `<N>`
/// priority prefix on every line: journald makes one entry per line, so a
/// multi-line message (a config error) keeps its priority throughout.
struct Prefixed<F>(F);

impl<S, N, F> FormatEvent<S, N> for Prefixed<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut text = String::new();
        self.0.format_event(ctx, Writer::new(&mut text), event)?;
        let prio = priority(*event.metadata().level());
        for line in text.lines() {
            writeln!(writer, "<{prio}>{line}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_value() {
        assert_eq!(parse_stream("8:12345"), Some((8, 12345)));
        assert_eq!(parse_stream("8:12345\n"), Some((8, 12345)));
        assert_eq!(parse_stream("8"), None);
        assert_eq!(parse_stream("x:1"), None);
    }

    #[test]
    fn priorities_follow_sd_daemon() {
        assert_eq!(priority(Level::ERROR), 3);
        assert_eq!(priority(Level::WARN), 4);
        assert_eq!(priority(Level::INFO), 6);
        assert_eq!(priority(Level::DEBUG), 7);
        assert_eq!(priority(Level::TRACE), 7);
    }
}
