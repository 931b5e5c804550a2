//! Why a BMC call failed, typed: no answer ([`Transport`]), a refusal with
//! the BMC's Redfish error, a bad answer, a spent budget, a failed task.
//! Every text in them that the BMC wrote is bounded and escaped
//! ([`bounded`]) before it reaches an error sentence.

use super::client::CONNECT_TIMEOUT;
use super::plan::{self, Refusal};
use super::redfish::{RedfishError, bounded};

/// Why no HTTP answer came (the text of [`CallError::Unreachable`]).
#[derive(Debug)]
pub enum Transport {
    Connect(std::io::Error),
    ConnectTimeout,
    Request(hyper::http::Error),
    TlsTimeout,
    Tls(std::io::Error),
    Handshake(hyper::Error),
    NoAnswer(hyper::Error),
    Body(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Connect(e) => write!(f, "cannot connect: {e}"),
            Transport::ConnectTimeout => {
                write!(f, "cannot connect within {}s", CONNECT_TIMEOUT.as_secs())
            }
            Transport::Request(e) => write!(f, "bad request: {e}"),
            Transport::TlsTimeout => f.write_str("TLS handshake timed out"),
            Transport::Tls(e) => write!(f, "TLS handshake failed: {e}"),
            Transport::Handshake(e) => write!(f, "HTTP handshake failed: {e}"),
            Transport::NoAnswer(e) => write!(f, "no HTTP answer: {e}"),
            Transport::Body(e) => write!(f, "reading the answer: {}", bounded(&e.to_string())),
        }
    }
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// No HTTP answer: connect refused, timeout, TLS failure, broken reply.
    Unreachable(String),
    /// An HTTP error status, with the BMC's Redfish error if it sent one,
    /// after `attempts` tries.
    Status {
        status: u16,
        error: Option<RedfishError>,
        attempts: u32,
    },
    /// A 2xx whose body is not the JSON expected.
    Bad(String),
    /// The command's budget ([`MAX_REQUESTS`], [`MAX_TIME`]) is spent.
    Budget(String),
    /// A task the BMC started (202 Accepted) failed or did not finish.
    Task(String),
}

impl CallError {
    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// How the BMC refused (see [`plan::classify`]); `None` for no answer.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            CallError::Status { status, error, .. } => {
                Some(plan::classify(*status, error.as_ref()))
            }
            _ => None,
        }
    }

    /// The BMC's Redfish error, if it sent one.
    pub fn error(&self) -> Option<&RedfishError> {
        match self {
            CallError::Status { error, .. } => error.as_ref(),
            _ => None,
        }
    }

    /// The BMC's message, if it sent one.
    pub fn message(&self) -> Option<&str> {
        match self {
            CallError::Status { error, .. } => error.as_ref().and_then(|e| e.message.as_deref()),
            _ => None,
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(m)
            | CallError::Bad(m)
            | CallError::Budget(m)
            | CallError::Task(m) => f.write_str(m),
            CallError::Status {
                status, attempts, ..
            } => {
                write!(f, "HTTP {status}")?;
                if let Some(m) = self.message() {
                    write!(f, ": {m}")?;
                }
                if *attempts > 1 {
                    write!(f, " ({attempts} attempts)")?;
                }
                Ok(())
            }
        }
    }
}
