//! What can go wrong in one exchange of the HA pair's state
//! ([`SyncError`]): one variant per cause, each saying what failed and,
//! where there is one, the fix. The texts are the ones the log, `/status`
//! → `ha` (`peerError`, `sent`, `received`) and the 400 answer to the peer
//! show.
//!
//! Invariant: no variant carries the pair key or a MAC; a peer's own text
//! is kept to 200 printable characters ([`super::client`]).

use super::{DEADLINE, VERSION};
use crate::runtime::control::PartError;
use crate::runtime::haauth::AuthError;

/// Why an exchange with the peer failed, or why its document was refused.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The (authenticated) body is not JSON, or not a document's shape.
    #[error("not an HA state document: {0}")]
    NotADocument(serde_json::Error),
    /// A document of another version than [`VERSION`].
    #[error(
        "an HA document of version {0}; this member speaks version {VERSION}: run the same crc-appliance version on both members"
    )]
    OtherVersion(u64),
    /// A document without `version`: a member of version 1.
    #[error(
        "an HA document of version 1 (no version); this member speaks version {VERSION}: upgrade the peer"
    )]
    VersionOne,
    /// A part of the document refused it (nothing was applied).
    #[error(transparent)]
    Part(#[from] PartError),
    /// The member id (our address towards the peer) is not known yet.
    #[error("this member's own address is unknown (no route to ha.peer): set ha.ownIP")]
    OwnAddressUnknown,
    /// Our document outgrew what the peer accepts ([`super::max_doc`]):
    /// the pair stops sharing until it shrinks or the pools grow.
    #[error(
        "SYNC STOPPED: our document is {bytes} bytes, over the {limit}-byte limit the peer accepts"
    )]
    DocumentTooLarge { bytes: usize, limit: usize },
    /// Our document could not be serialized.
    #[error("{0}")]
    Encode(serde_json::Error),
    /// The blocking exchange's thread failed (panicked or was cancelled).
    #[error("{0}")]
    Task(tokio::task::JoinError),
    /// `ha.peer` is an IPv6 address (the member id is an IPv4 address).
    #[error("ha.peer is not IPv4")]
    PeerNotIpv4,
    /// Connecting to the peer's admin API failed.
    #[error("{0}")]
    Connect(std::io::Error),
    /// Sending our request failed.
    #[error("{0}")]
    Send(std::io::Error),
    /// Reading the peer's answer failed.
    #[error("{0}")]
    Receive(std::io::Error),
    /// The exchange took longer than [`DEADLINE`] (a dripping peer).
    #[error(
        "no complete answer within {} s (exchange deadline)",
        DEADLINE.as_secs()
    )]
    Deadline,
    /// The answer is larger than a document may be (`limit`) plus room
    /// for its head.
    #[error("the answer is over the {limit}-byte limit")]
    AnswerTooLarge { limit: usize },
    /// The answer is not an HTTP/1.1 response.
    #[error("malformed answer")]
    MalformedAnswer,
    /// The answer is shorter than its `Content-Length`.
    #[error("the answer ended early")]
    AnswerEndedEarly,
    /// The peer refused our request's authentication (`body`: its text).
    #[error(
        "HTTP 401 (the peer refused our authentication: a different pair key in ha.tokenFile, clocks more than 60 s apart, or a peer of an older version): {body}"
    )]
    Unauthorized { body: String },
    /// The peer answered another status than 200 (`body`: its text).
    #[error("HTTP {status}: {body}")]
    Refused { status: u16, body: String },
    /// The answer's authentication does not verify: it is not used.
    #[error("unauthenticated answer, ignored: {0}")]
    Unauthenticated(AuthError),
}

impl SyncError {
    /// Whether the pair has stopped sharing its state until someone acts
    /// (logged as an error, not as a retried failure).
    pub fn stops_sync(&self) -> bool {
        matches!(self, SyncError::DocumentTooLarge { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts the log, `/status` and the peer see (tests/ha_hostile.rs
    /// looks for "unauthenticated answer" and "exchange deadline").
    #[test]
    fn each_error_says_what_failed_and_the_fix() {
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let json = || serde_json::from_slice::<u8>(b"x").unwrap_err();
        let cases: Vec<(SyncError, &str)> = vec![
            (
                SyncError::NotADocument(json()),
                "not an HA state document: expected value at line 1 column 1",
            ),
            (
                SyncError::OtherVersion(3),
                "an HA document of version 3; this member speaks version 2: run the same crc-appliance version on both members",
            ),
            (
                SyncError::VersionOne,
                "an HA document of version 1 (no version); this member speaks version 2: upgrade the peer",
            ),
            (
                PartError::undecodable("netboot state")(json()).into(),
                "netboot state: expected value at line 1 column 1",
            ),
            (
                SyncError::OwnAddressUnknown,
                "this member's own address is unknown (no route to ha.peer): set ha.ownIP",
            ),
            (
                SyncError::DocumentTooLarge {
                    bytes: 10,
                    limit: 9,
                },
                "SYNC STOPPED: our document is 10 bytes, over the 9-byte limit the peer accepts",
            ),
            (SyncError::PeerNotIpv4, "ha.peer is not IPv4"),
            (SyncError::Connect(io()), "connection refused"),
            (SyncError::Send(io()), "connection refused"),
            (SyncError::Receive(io()), "connection refused"),
            (
                SyncError::Deadline,
                "no complete answer within 5 s (exchange deadline)",
            ),
            (
                SyncError::AnswerTooLarge { limit: 7 },
                "the answer is over the 7-byte limit",
            ),
            (SyncError::MalformedAnswer, "malformed answer"),
            (SyncError::AnswerEndedEarly, "the answer ended early"),
            (
                SyncError::Unauthorized {
                    body: "{\"error\":\"bad MAC\"}".into(),
                },
                "HTTP 401 (the peer refused our authentication: a different pair key in ha.tokenFile, clocks more than 60 s apart, or a peer of an older version): {\"error\":\"bad MAC\"}",
            ),
            (
                SyncError::Refused {
                    status: 404,
                    body: "no".into(),
                },
                "HTTP 404: no",
            ),
            (
                SyncError::Unauthenticated(AuthError::Replay),
                "unauthenticated answer, ignored: a repeated nonce: a replayed message",
            ),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), text);
            assert_eq!(err.stops_sync(), text.starts_with("SYNC STOPPED"));
        }
    }
}
