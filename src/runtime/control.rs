//! What the admin API may ask of a running service, as traits the services
//! implement (the load balancer's drain switch, network boot's reinstall),
//! so that the admin service never imports another service.

/// Runtime control of the load balancer, used by the admin API.
pub trait LbControl: Send + Sync {
    /// Disable (drain) or re-enable the backends of node `node` in every
    /// pool. Returns a human-readable summary.
    fn set_disabled(&self, node: &str, disabled: bool) -> Result<String, LbControlError>;
}

/// Network-boot control (the HTTP service), used by the admin API.
pub trait BootControl: Send + Sync {
    /// Make `node` install again at its next network boot.
    fn reinstall(&self, node: &str) -> Result<String, NodeControlError>;
}

/// State a service shares with the HA peer (`serve::hasync`): network
/// boot's install state, DHCP's pool leases, the timeline's events, the
/// BMC journals.
pub trait SyncControl: Send + Sync {
    /// This part's key in the exchanged document (`netboot`, `leases`).
    fn part(&self) -> &'static str;

    /// A value that changes whenever the state does. Cheap: the exchange
    /// loop looks at it every 100 ms and builds the document
    /// ([`SyncControl::sync_state`]) only when it moved.
    fn sync_version(&self) -> u64;

    /// [`SyncControl::sync_version`] and the state as JSON.
    fn sync_state(&self) -> (u64, serde_json::Value);

    /// Decode and validate the peer's part without changing anything: the
    /// merge to apply (the newer entry wins; how many entries it took), or
    /// why the part is refused. Entries that cannot be taken (a node not
    /// in the plan, a time or revision too far ahead, an unknown event
    /// kind) are left out and noted in `skipped`; they do not refuse the
    /// part. `serve::hasync` prepares every part before it applies any,
    /// so a document is taken whole or not at all.
    fn prepare<'a>(
        &'a self,
        peer: serde_json::Value,
        skipped: &mut Skipped,
    ) -> Result<Staged<'a>, PartError>;

    /// Prepare and apply the peer's part at once (one part alone: tests).
    fn merge_state(&self, peer: serde_json::Value) -> Result<usize, PartError> {
        let mut skipped = Skipped::default();
        self.prepare(peer, &mut skipped).map(|apply| apply())
    }
}

/// A peer's part, decoded and validated, waiting to be applied: how many
/// entries it took.
pub type Staged<'a> = Box<dyn FnOnce() -> usize + Send + 'a>;

/// Entries of a peer's document left out while preparing it: how many,
/// and the first one's reason (for the log and `/status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    pub count: u64,
    pub first: Option<String>,
}

impl Skipped {
    /// One entry left out, for the reason `why` gives.
    pub fn note(&mut self, why: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(why());
        }
    }
}

/// Why a peer's part of the HA document is refused whole (and with it the
/// document: `serve::hasync`). Entries that cannot be taken are not
/// errors: they are left out and counted ([`Skipped`]).
#[derive(Debug, thiserror::Error)]
pub enum PartError {
    /// The part is not what this member's version sends for it: `what`
    /// names it as the log and `/status` show it (`leases`, `netboot
    /// state`, `timeline events`, `BMC journals`), `err` is serde's reason.
    #[error("{what}: {err}")]
    Undecodable {
        what: &'static str,
        err: serde_json::Error,
    },
}

impl PartError {
    /// The error of part `what` that serde could not decode.
    pub fn undecodable(what: &'static str) -> impl FnOnce(serde_json::Error) -> PartError {
        move |err| PartError::Undecodable { what, err }
    }
}

/// How far ahead of this member's clock a peer's time (a lease expiry
/// beyond its lease time, an event, a journal) may be: one day.
pub const FUTURE_SECS: u64 = 24 * 3600;

/// Why a node control request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeControlError {
    #[error("node {0:?} is not in the cluster file")]
    UnknownNode(String),
}

/// Why an LB control request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LbControlError {
    #[error("node {0:?} is not a backend of any pool")]
    UnknownNode(String),
}

impl LbControlError {
    /// The HTTP status the admin API answers with.
    pub fn http_status(&self) -> u16 {
        match self {
            LbControlError::UnknownNode(_) => 404,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_that_does_not_decode_is_named_with_serdes_reason() {
        let err = serde_json::from_value::<Vec<u8>>(serde_json::json!({"a": 1}))
            .map_err(PartError::undecodable("leases"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "leases: invalid type: map, expected a sequence"
        );
    }
}
