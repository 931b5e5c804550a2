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

/// State a service shares with the HA peer (`runtime::hasync`): network
/// boot's install state, DHCP's pool leases.
pub trait SyncControl: Send + Sync {
    /// This part's key in the exchanged document (`netboot`, `leases`).
    fn part(&self) -> &'static str;

    /// A value that changes whenever the state does. Cheap: the exchange
    /// loop looks at it every 100 ms and builds the document
    /// ([`SyncControl::sync_state`]) only when it moved.
    fn sync_version(&self) -> u64;

    /// [`SyncControl::sync_version`] and the state as JSON.
    fn sync_state(&self) -> (u64, serde_json::Value);

    /// Merge the peer's state (the newer entry wins); how many entries
    /// were taken, or why the document was refused.
    fn merge_state(&self, peer: serde_json::Value) -> Result<usize, String>;
}

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
