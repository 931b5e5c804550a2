//! Why a BMC call failed, typed ([`BmcError`]): no answer ([`Transport`])
//! or none in time, credentials refused, another refusal with the BMC's
//! Redfish error, an unexpected document, something the BMC does not
//! offer ([`Unsupported`]), a spent budget, a failed task. The driver turns
//! each into its sentence for the operator (`driver.rs`); the texts here
//! are that sentence's tail. Every text in them that the BMC wrote is
//! bounded and escaped ([`bounded`]) before it reaches an error sentence.

use std::time::Duration;

use super::client::{CONNECT_TIMEOUT, MAX_REQUESTS, MAX_TIME};
use super::plan::{self, Refusal};
use super::redfish::{RedfishError, bounded};

pub use super::plan::Unsupported;

/// Why no HTTP answer came (the cause of [`BmcError::Transport`]).
#[derive(Debug, thiserror::Error)]
pub enum Transport {
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    #[error("cannot connect within {}s", CONNECT_TIMEOUT.as_secs())]
    ConnectTimeout,
    #[error("bad request: {0}")]
    Request(hyper::http::Error),
    #[error("TLS handshake timed out")]
    TlsTimeout,
    #[error("TLS handshake failed: {0}")]
    Tls(std::io::Error),
    #[error("HTTP handshake failed: {0}")]
    Handshake(hyper::Error),
    #[error("no HTTP answer: {0}")]
    NoAnswer(hyper::Error),
    #[error("reading the answer: {}", body_error(.0))]
    Body(Box<dyn std::error::Error + Send + Sync>),
}

/// Why a BMC call failed. `call` is the request (`GET https://bmc/redfish/…`).
#[derive(Debug, thiserror::Error)]
pub enum BmcError {
    /// No HTTP answer: connect refused or timed out, TLS failure, broken
    /// reply.
    #[error("{call}: {cause}")]
    Transport { call: String, cause: Transport },
    /// The call's time ran out before the answer was read.
    #[error("{call}: no answer within {}s", .after.as_secs())]
    Timeout { call: String, after: Duration },
    /// The BMC refused the credentials (401) or the account (403), with
    /// its Redfish error if it sent one.
    #[error("{}", refused(.status, .error, &1))]
    Auth {
        status: u16,
        error: Option<RedfishError>,
    },
    /// Another HTTP error status, with the BMC's Redfish error if it sent
    /// one, after `attempts` tries.
    #[error("{}", refused(.status, .error, .attempts))]
    Status {
        status: u16,
        error: Option<RedfishError>,
        attempts: u32,
    },
    /// A 2xx whose body is not the JSON document expected, or a redirect
    /// the client does not follow.
    #[error("{0}")]
    Unexpected(String),
    /// The BMC does not offer what the step needs.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The command's budget ([`MAX_REQUESTS`], [`MAX_TIME`]) is spent:
    /// `call` was not sent.
    #[error(
        "{call}: not sent, this command has made {made} requests in {}s (at most {MAX_REQUESTS} in {}s)",
        .spent.as_secs(),
        MAX_TIME.as_secs()
    )]
    Budget {
        call: String,
        made: u32,
        spent: Duration,
    },
    /// A task the BMC started (202 Accepted) failed or did not finish.
    #[error("{0}")]
    Task(String),
}

/// `HTTP 404: <the BMC's message> (3 attempts)`.
fn refused(status: &u16, error: &Option<RedfishError>, attempts: &u32) -> String {
    let mut s = format!("HTTP {status}");
    if let Some(m) = error.as_ref().and_then(|e| e.message.as_deref()) {
        s.push_str(": ");
        s.push_str(m);
    }
    if *attempts > 1 {
        s.push_str(&format!(" ({attempts} attempts)"));
    }
    s
}

/// A body that could not be read, bounded (it may quote the BMC).
fn body_error<E: std::fmt::Display + ?Sized>(e: &E) -> String {
    bounded(&e.to_string())
}

impl BmcError {
    /// The error of an HTTP error status (401 and 403: [`BmcError::Auth`]).
    pub fn refusal_of(status: u16, error: Option<RedfishError>) -> BmcError {
        match status {
            401 | 403 => BmcError::Auth { status, error },
            _ => BmcError::Status {
                status,
                error,
                attempts: 1,
            },
        }
    }

    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            BmcError::Auth { status, .. } | BmcError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// How the BMC refused (see [`plan::classify`]); `None` for no answer.
    pub fn refusal(&self) -> Option<Refusal> {
        self.status().map(|s| plan::classify(s, self.error()))
    }

    /// The BMC's Redfish error, if it sent one.
    pub fn error(&self) -> Option<&RedfishError> {
        match self {
            BmcError::Auth { error, .. } | BmcError::Status { error, .. } => error.as_ref(),
            _ => None,
        }
    }

    /// The BMC's message, if it sent one.
    pub fn message(&self) -> Option<&str> {
        self.error().and_then(|e| e.message.as_deref())
    }

    /// No answer came at all (transport or time).
    pub fn unreachable(&self) -> bool {
        matches!(self, BmcError::Transport { .. } | BmcError::Timeout { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::bmc::redfish::Power;

    fn said(m: &str) -> Option<RedfishError> {
        Some(RedfishError {
            message: Some(m.into()),
            ..RedfishError::default()
        })
    }

    /// The texts the driver's sentences end with (tests/bmc*.rs read them).
    #[test]
    fn each_kind_reads_as_before() {
        let auth = BmcError::refusal_of(401, said("bad password"));
        assert!(matches!(auth, BmcError::Auth { status: 401, .. }));
        assert_eq!(auth.to_string(), "HTTP 401: bad password");
        assert_eq!(auth.refusal(), Some(Refusal::Auth));
        let gone = BmcError::Status {
            status: 503,
            error: None,
            attempts: 5,
        };
        assert_eq!(gone.to_string(), "HTTP 503 (5 attempts)");
        assert_eq!(gone.refusal(), Some(Refusal::Transient));
        let late = BmcError::Timeout {
            call: "GET http://b/redfish/v1".into(),
            after: Duration::from_secs(90),
        };
        assert!(late.unreachable() && late.status().is_none());
        assert_eq!(
            late.to_string(),
            "GET http://b/redfish/v1: no answer within 90s"
        );
        let none = BmcError::from(Unsupported::ResetType {
            power: Power::Off,
            allowed: vec!["ForceOff".into()],
        });
        assert!(!none.unreachable() && none.refusal().is_none());
        assert_eq!(
            none.to_string(),
            "no power-on reset type among the allowed ForceOff"
        );
    }
}
