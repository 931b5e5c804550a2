//! The kit's share of `/status`: the vocabulary more than one section
//! uses ([`LeaseState`]: DHCPv4 leases and DHCPv6 bindings) and [`named`],
//! the `as_str`/`Display` of a typed state that serializes to its name.
//!
//! The document itself is `serve`'s ([`crate::serve::status`]); each
//! service owns its section's type (`services/<name>/status.rs`).

use serde::{Deserialize, Serialize};

/// A lease's state in `dhcp.leases[]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseState {
    Offered,
    Bound,
    Released,
    Expired,
}

/// `as_str` (the serde name), `Display` with it, and `== "name"`.
macro_rules! named {
    ($t:ty { $($v:ident => $s:literal),* $(,)? }) => {
        impl $t {
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),* }
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }
        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}
pub(crate) use named;

named!(LeaseState { Offered => "offered", Bound => "bound", Released => "released", Expired => "expired" });

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_state_serializes_as_its_name() {
        for l in [LeaseState::Bound, LeaseState::Expired, LeaseState::Offered] {
            assert_eq!(serde_json::to_value(l).unwrap(), l.as_str());
        }
        assert_eq!(format!("{:<7}|", LeaseState::Bound), "bound  |");
        assert!(LeaseState::Released == "released");
    }
}
