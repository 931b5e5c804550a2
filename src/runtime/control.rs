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

    /// The install state for the HA peer (`runtime::hasync`): the change
    /// counter (a new value means something changed) and the state as
    /// JSON (node → entry).
    fn sync_state(&self) -> (u64, serde_json::Value);

    /// Merge the HA peer's install state (newer entries win); how many
    /// entries were taken, or why the document was refused.
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
