//! The protocol between `crc-appliance` and its libvirt helper
//! (`crc-appliance-libvirt`, [`super::helper`]): one JSON object per line,
//! requests on the helper's stdin, one response per request on its stdout,
//! in order. Pure types: no I/O, no libvirt.
//!
//! Why a second process: linking libvirt.so.0 maps ~50 shared libraries
//! (10.6-11.2 MB resident, bench/RESULTS-memory.md) into every process at
//! exec. Only the helper links it; `serve` starts it when the cluster file
//! has a `libvirt:` section, and the `vm` commands run it once.
//!
//! Invariants: the parent sends one request at a time and reads its
//! response before the next ([`super::client::Helper::call`] holds a lock
//! across both); the helper answers every request it can parse and
//! answers [`Response::Error`] to one it cannot; stdin EOF (the parent
//! closed it or died) ends the helper.

use serde::{Deserialize, Serialize};

use super::spec::Spec;
use super::{Fetched, VmAction};
use crate::drivers::libvirt::status::VmRow;

/// The helper's file name; it is installed next to `crc-appliance`.
pub const HELPER: &str = "crc-appliance-libvirt";

/// parent → helper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "camelCase")]
pub enum Request {
    /// Connect to libvirt for `spec` and keep the driver as generation
    /// `id` (`serve`'s start and every reload that changes the plan). With
    /// `network_up`, bring the cluster network up first. Answer: [`Response::Opened`].
    #[serde(rename_all = "camelCase")]
    Open {
        id: u64,
        spec: Box<Spec>,
        network_up: bool,
    },
    /// With driver `id` (a reload committed it; every other one is closed):
    /// run `vm up` when `up`, turn finished installs into disk boots on the
    /// evidence `fetched`, read the status. Answer: [`Response::Polled`].
    Poll {
        id: u64,
        up: bool,
        fetched: Option<Vec<String>>,
    },
    /// One `vm up|down|status|remove-bootstrap` command. Answer: [`Response::Output`].
    Vm {
        spec: Box<Spec>,
        action: VmAction,
        fetched: Option<Vec<String>>,
    },
}

/// helper → parent: the answer to one [`Request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "response", rename_all = "camelCase")]
pub enum Response {
    /// The driver is open; `lines` say what bringing the network up did.
    #[serde(rename_all = "camelCase")]
    Opened {
        domain_type: String,
        lines: Vec<String>,
    },
    /// One poll's results.
    Polled(Box<Polled>),
    /// What a `vm` command prints.
    Output { text: String },
    /// The request failed (libvirt error, unknown driver, bad request).
    Error { message: String },
}

/// The results of one [`Request::Poll`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Polled {
    /// What `vm up` did (empty when it did not run or had nothing to do).
    pub lines: Vec<String>,
    /// Install VMs found shut off: booted from their disk, or installing again.
    pub installs: Vec<Install>,
    /// The network's state line (`/status` `libvirt.network`).
    pub network: String,
    /// One row per node (`/status` `libvirt.nodes`).
    pub nodes: Vec<VmRow>,
}

/// What became of one shut-off install VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Install {
    pub node: String,
    /// `None`: it finished and boots its disk; `Some(reason)`: installing again.
    pub rejected: Option<String>,
}

/// The evidence sent over the pipe (a set does not keep an order).
pub fn fetched_list(f: Fetched) -> Option<Vec<String>> {
    f.map(|set| {
        let mut v: Vec<String> = set.into_iter().collect();
        v.sort();
        v
    })
}

/// One line of JSON (no newline inside: serde_json escapes them).
pub fn encode<T: Serialize>(msg: &T) -> String {
    let mut s = serde_json::to_string(msg)
        .unwrap_or_else(|e| format!("{{\"response\":\"error\",\"message\":\"encode: {e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_without_embedded_newlines() {
        let r = Response::Output {
            text: "a\nb\n".into(),
        };
        let line = encode(&r);
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        let back: Response = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(back, r);
        let q = Request::Poll {
            id: 3,
            up: true,
            fetched: fetched_list(Some(["b".to_string(), "a".to_string()].into())),
        };
        let line = encode(&q);
        assert!(line.contains("\"request\":\"poll\""), "{line}");
        assert!(line.contains("[\"a\",\"b\"]"), "{line}");
        assert_eq!(serde_json::from_str::<Request>(line.trim_end()).unwrap(), q);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in ["", "{", "{\"request\":\"nope\"}", "[1,2]", "null"] {
            assert!(serde_json::from_str::<Request>(bad).is_err(), "{bad}");
        }
    }
}
