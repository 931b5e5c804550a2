//! What can go wrong in one replication round ([`ReplicaError`]): one
//! variant per cause, each saying what failed and, where there is one, the
//! fix. The texts are the ones the log and `/status` → `registry` →
//! `replica.error` show; the next round tries again whatever the cause.
//!
//! Invariant: no variant carries the pair key or a MAC.

use super::super::names::Digest;
use super::super::replica::MAX_INVENTORY;
use crate::runtime::haauth::AuthError;

/// Why a round with the peer stopped (what it took before stays).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplicaError {
    /// Connecting to the peer's registry port failed.
    #[error("{0}")]
    Connect(std::io::Error),
    /// The TLS client could not start (rustls' reason).
    #[error("{0}")]
    Tls(rustls::Error),
    /// Sending the request failed.
    #[error("{0}")]
    Send(std::io::Error),
    /// Reading the answer failed or it stalled ([`super::STALL`]).
    #[error("{0}")]
    Receive(std::io::Error),
    /// The answer's status line is not HTTP's.
    #[error("malformed answer")]
    MalformedAnswer,
    /// The answer does not say its length (the peer always does).
    #[error("an answer without Content-Length")]
    NoContentLength,
    /// The inventory is larger than any this member accepts.
    #[error("an inventory over {MAX_INVENTORY} bytes")]
    InventoryTooLarge,
    /// The peer refused our request's authentication.
    #[error(
        "HTTP 401 (the peer refused our authentication: ha.tokenFile differs, or the clocks are apart)"
    )]
    Unauthorized,
    /// The peer answered the inventory with another status than 200.
    #[error("HTTP {0}")]
    Refused(u16),
    /// The inventory's authentication does not verify: it is not used.
    #[error("unauthenticated inventory, ignored: {0}")]
    Unauthenticated(AuthError),
    /// The (authenticated) inventory does not decode.
    #[error("a malformed inventory: {0}")]
    MalformedInventory(serde_json::Error),
    /// The inventory names a repository distribution's grammar refuses.
    #[error("a bad repository name {0:?}")]
    BadRepositoryName(String),
    /// The inventory names something that is not a sha256 digest.
    #[error("a bad digest {0:?}")]
    BadDigest(String),
    /// The peer answered a blob's request with another status than 200,
    /// or 206 to a resumed fetch.
    #[error("blob {digest}: HTTP {status}")]
    BlobRefused { digest: Digest, status: u16 },
    /// Copying a blob from the peer into its upload file failed.
    #[error("blob {digest}: {err}")]
    BlobCopy { digest: Digest, err: std::io::Error },
    /// The peer closed before the blob's end (the next round resumes).
    #[error("blob {digest}: cut after {bytes} bytes")]
    BlobCut { digest: Digest, bytes: u64 },
    /// A fetched blob's bytes do not hash to its digest: it never lands.
    #[error("blob {0} from the peer does not match its digest")]
    BlobMismatch(Digest),
    /// A manifest's bytes do not hash to its digest (or are too large).
    #[error("manifest {0} from the peer does not match its digest")]
    ManifestMismatch(Digest),
    /// The store (this member's disk) failed.
    #[error("{0}")]
    Store(std::io::Error),
    /// An upload this round started is gone.
    #[error("no upload")]
    NoUpload,
    /// An upload id the store does not accept.
    #[error("bad upload id")]
    BadUploadId,
    /// The round's blocking thread failed (panicked or was cancelled).
    #[error("{0}")]
    Task(tokio::task::JoinError),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts the log and `/status` show.
    #[test]
    fn each_error_says_what_failed() {
        let d = Digest::of(b"layer");
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let json = || serde_json::from_slice::<u8>(b"x").unwrap_err();
        let cases: Vec<(ReplicaError, String)> = vec![
            (ReplicaError::Connect(io()), "connection refused".into()),
            (ReplicaError::Send(io()), "connection refused".into()),
            (ReplicaError::Receive(io()), "connection refused".into()),
            (
                ReplicaError::Tls(rustls::Error::General("x".into())),
                "unexpected error: x".into(),
            ),
            (ReplicaError::MalformedAnswer, "malformed answer".into()),
            (
                ReplicaError::NoContentLength,
                "an answer without Content-Length".into(),
            ),
            (
                ReplicaError::InventoryTooLarge,
                "an inventory over 67108864 bytes".into(),
            ),
            (
                ReplicaError::Unauthorized,
                "HTTP 401 (the peer refused our authentication: ha.tokenFile differs, or the clocks are apart)".into(),
            ),
            (ReplicaError::Refused(503), "HTTP 503".into()),
            (
                ReplicaError::Unauthenticated(AuthError::BadMac),
                "unauthenticated inventory, ignored: bad MAC: the sender does not hold this pair key (ha.tokenFile differs between the members?)".into(),
            ),
            (
                ReplicaError::MalformedInventory(json()),
                "a malformed inventory: expected value at line 1 column 1".into(),
            ),
            (
                ReplicaError::BadRepositoryName("A".into()),
                "a bad repository name \"A\"".into(),
            ),
            (
                ReplicaError::BadDigest("md5:x".into()),
                "a bad digest \"md5:x\"".into(),
            ),
            (
                ReplicaError::BlobRefused {
                    digest: d,
                    status: 404,
                },
                format!("blob {d}: HTTP 404"),
            ),
            (
                ReplicaError::BlobCopy {
                    digest: d,
                    err: io(),
                },
                format!("blob {d}: connection refused"),
            ),
            (
                ReplicaError::BlobCut {
                    digest: d,
                    bytes: 9,
                },
                format!("blob {d}: cut after 9 bytes"),
            ),
            (
                ReplicaError::BlobMismatch(d),
                format!("blob {d} from the peer does not match its digest"),
            ),
            (
                ReplicaError::ManifestMismatch(d),
                format!("manifest {d} from the peer does not match its digest"),
            ),
            (ReplicaError::Store(io()), "connection refused".into()),
            (ReplicaError::NoUpload, "no upload".into()),
            (ReplicaError::BadUploadId, "bad upload id".into()),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), text);
        }
        assert!(d.to_string().starts_with("sha256:"));
    }
}
