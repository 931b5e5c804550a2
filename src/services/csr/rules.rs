//! The approval rules (issue #37 items 2-5), pure: a CSR, the cluster's
//! Nodes, the inventory, the evidence the appliance saw and the time →
//! a [`Decision`] with its reason. No I/O, no clock: the watcher
//! (`super::watch`) gathers the inputs and writes the approvals.
//!
//! Invariants:
//! - Only two shapes are ever approved: a kubelet's first client CSR
//!   ([`Kind::Client`], or [`Kind::Recovery`] for a NotReady Node with
//!   `csr.recovery`) and a kubelet's serving CSR ([`Kind::Serving`]). Every
//!   field the kubelet sets is compared exactly; anything else is a
//!   [`Refusal`] naming the first rule it breaks.
//! - A client CSR needs evidence from this appliance: the node's ignition
//!   served to the node's own address, the CSR created within the window
//!   after it (recovery: the node's reserved lease renewed, or a BMC or
//!   libvirt boot of it). Two pending client CSRs for one node are both
//!   refused ([`Refusal::Duplicate`], an alert).
//! - Nothing here denies: a refused CSR stays pending for a person.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use super::request::{KeyKind, Request, RequestError};

pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The service account whose bootstrap kubeconfig every new kubelet uses.
pub const BOOTSTRAPPER: &str =
    "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
/// The groups the API server gives that service account.
pub const BOOTSTRAPPER_GROUPS: [&str; 3] = [
    "system:serviceaccounts",
    "system:serviceaccounts:openshift-machine-config-operator",
    "system:authenticated",
];
/// The groups of a kubelet authenticated by its client certificate.
pub const NODE_GROUPS: [&str; 2] = ["system:nodes", "system:authenticated"];
/// The longest `expirationSeconds` accepted: the kubelet signers' default
/// on OpenShift (kube-controller-manager `--cluster-signing-duration`,
/// 720 h). Kubelets leave the field out.
pub const MAX_EXPIRATION_SECS: u64 = 720 * 3600;
/// How much earlier than the evidence a CSR's `creationTimestamp` (the API
/// server's clock) may be: the appliance's and the cluster's clocks differ
/// by a little even with the appliance's own NTP.
pub const CLOCK_SLACK_SECS: u64 = 120;

/// A CSR as the rules read it (from a `certificates.k8s.io/v1` object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Csr {
    pub name: String,
    pub signer: String,
    pub username: String,
    pub groups: Vec<String>,
    pub usages: Vec<String>,
    pub expiration_seconds: Option<u64>,
    /// `metadata.creationTimestamp`, Unix seconds.
    pub created: u64,
    pub request: Result<Request, RequestError>,
    /// No Approved, Denied or Failed condition yet.
    pub pending: bool,
}

/// A node of the cluster file that may join (not the bootstrap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryNode {
    pub name: String,
    /// `<name>.<cluster>.<baseDomain>`.
    pub fqdn: String,
    /// Its addresses, either family.
    pub addrs: Vec<IpAddr>,
}

/// What the appliance saw of one inventory node (Unix seconds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// Its ignition served to its own address, in this install.
    pub ignition: Vec<u64>,
    /// Its reserved lease renewed by its MAC, or a BMC or libvirt boot.
    pub boots: Vec<u64>,
}

/// Everything but the CSR.
#[derive(Debug, Clone, Copy)]
pub struct World<'a> {
    /// `csr.window`, seconds.
    pub window: u64,
    /// `csr.recovery`.
    pub recovery: bool,
    pub inventory: &'a [InventoryNode],
    /// The cluster's Nodes by name → Ready.
    pub nodes: &'a BTreeMap<String, bool>,
    /// By inventory name.
    pub evidence: &'a BTreeMap<String, Evidence>,
    /// By inventory name: when its last recovery approval was made.
    pub recovered: &'a BTreeMap<String, u64>,
    /// By inventory name: how many pending client CSRs ask for it
    /// ([`pending_clients`]).
    pub pending: &'a BTreeMap<String, usize>,
    pub now: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    Client,
    Recovery,
    Serving,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Approve for inventory node `node`; `because` names the evidence.
    Approve {
        node: String,
        kind: Kind,
        because: String,
    },
    /// Leave pending (logged once, shown on the page).
    Refuse(Refusal),
    /// Already approved, denied or failed: nothing to decide.
    NotPending,
}

/// Why a CSR is left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Request(RequestError),
    Signer(String),
    Username(String),
    Groups(Vec<String>),
    NotNodeSubject(String),
    NotInInventory(String),
    Sans,
    Usages(Vec<String>),
    Expiration(u64),
    NodeExists(String),
    NoIgnition(String),
    OutsideWindow { node: String, created: u64 },
    Duplicate { node: String, count: usize },
    NoBootEvidence(String),
    RecoveryDone(String),
    ServingUser { username: String, node: String },
    NoNode(String),
    DnsSan(String),
    IpSan(IpAddr),
}

impl Refusal {
    /// Two pending client CSRs for one node: an alert, not just a log line.
    pub fn is_alert(&self) -> bool {
        matches!(self, Refusal::Duplicate { .. })
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Request(e) => write!(f, "{e}"),
            Refusal::Signer(s) => write!(f, "signer {s} is not a kubelet signer"),
            Refusal::Username(u) => write!(f, "requested by {u}, not by {BOOTSTRAPPER}"),
            Refusal::Groups(g) => write!(f, "groups [{}] are not the requester's", g.join(", ")),
            Refusal::NotNodeSubject(s) => {
                write!(
                    f,
                    "subject {s} is not O=system:nodes, CN=system:node:<name>"
                )
            }
            Refusal::NotInInventory(n) => write!(f, "{n} is not a node of the cluster file"),
            Refusal::Sans => f.write_str("a client request with subjectAltNames"),
            Refusal::Usages(u) => write!(f, "usages [{}] are not the kubelet's", u.join(", ")),
            Refusal::Expiration(s) => {
                write!(f, "expirationSeconds {s} is above {MAX_EXPIRATION_SECS}")
            }
            Refusal::NodeExists(n) => write!(f, "Node {n} already exists"),
            Refusal::NoIgnition(n) => {
                write!(f, "{n} has not fetched its ignition from its own address")
            }
            Refusal::OutsideWindow { node, created } => write!(
                f,
                "created at {created}, outside csr.window after {node}'s evidence"
            ),
            Refusal::Duplicate { node, count } => {
                write!(
                    f,
                    "{count} pending client CSRs for {node}: none is approved"
                )
            }
            Refusal::NoBootEvidence(n) => write!(
                f,
                "Node {n} is NotReady but no lease renewal or boot of it was seen in csr.window"
            ),
            Refusal::RecoveryDone(n) => {
                write!(
                    f,
                    "a recovery CSR of {n} was already approved in csr.window"
                )
            }
            Refusal::ServingUser { username, node } => {
                write!(f, "requested by {username}, not by system:node:{node}")
            }
            Refusal::NoNode(n) => write!(f, "no Node {n} exists"),
            Refusal::DnsSan(d) => write!(f, "DNS name {d} is not the node's"),
            Refusal::IpSan(ip) => write!(f, "IP address {ip} is not the node's"),
        }
    }
}

/// Pending client CSRs per inventory node (the duplicate rule's count).
pub fn pending_clients(csrs: &[Csr], inventory: &[InventoryNode]) -> BTreeMap<String, usize> {
    let mut count = BTreeMap::new();
    for csr in csrs
        .iter()
        .filter(|c| c.pending && c.signer == CLIENT_SIGNER)
    {
        let name = csr.request.as_ref().ok().and_then(Request::node_subject);
        if let Some(node) = name.and_then(|n| find(inventory, n)) {
            *count.entry(node.name.clone()).or_insert(0) += 1;
        }
    }
    count
}

/// The inventory node `n` names (short name or FQDN).
fn find<'a>(inventory: &'a [InventoryNode], n: &str) -> Option<&'a InventoryNode> {
    inventory.iter().find(|i| i.name == n || i.fqdn == n)
}

/// The decision for one CSR.
pub fn decide(csr: &Csr, world: &World<'_>) -> Decision {
    if !csr.pending {
        return Decision::NotPending;
    }
    let result = match csr.signer.as_str() {
        CLIENT_SIGNER => client(csr, world),
        SERVING_SIGNER => serving(csr, world),
        other => Err(Refusal::Signer(other.to_string())),
    };
    result.unwrap_or_else(Decision::Refuse)
}

fn same_set(got: &[String], want: &[&str]) -> bool {
    let mut g: Vec<&str> = got.iter().map(String::as_str).collect();
    g.sort_unstable();
    let mut w = want.to_vec();
    w.sort_unstable();
    g == w
}

/// The request, its node subject and inventory node, and the usages.
fn common<'w>(
    csr: &Csr,
    world: &World<'w>,
    auth: &str,
) -> Result<(&'w InventoryNode, String), Refusal> {
    let req = csr
        .request
        .as_ref()
        .map_err(|e| Refusal::Request(e.clone()))?;
    let n = req
        .node_subject()
        .ok_or_else(|| Refusal::NotNodeSubject(req.subject_text()))?;
    let node = find(world.inventory, n).ok_or_else(|| Refusal::NotInInventory(n.to_string()))?;
    let plain: [&str; 2] = ["digital signature", auth];
    let rsa: [&str; 3] = ["digital signature", "key encipherment", auth];
    if !(same_set(&csr.usages, &plain) || req.key == KeyKind::Rsa && same_set(&csr.usages, &rsa)) {
        return Err(Refusal::Usages(csr.usages.clone()));
    }
    if let Some(secs) = csr.expiration_seconds.filter(|s| *s > MAX_EXPIRATION_SECS) {
        return Err(Refusal::Expiration(secs));
    }
    Ok((node, n.to_string()))
}

/// Item 2 (and item 5 for an existing NotReady Node).
fn client(csr: &Csr, world: &World<'_>) -> Result<Decision, Refusal> {
    if csr.username != BOOTSTRAPPER {
        return Err(Refusal::Username(csr.username.clone()));
    }
    if !same_set(&csr.groups, &BOOTSTRAPPER_GROUPS) {
        return Err(Refusal::Groups(csr.groups.clone()));
    }
    let (node, n) = common(csr, world, "client auth")?;
    if csr.request.as_ref().is_ok_and(Request::has_sans) {
        return Err(Refusal::Sans);
    }
    let count = world.pending.get(&node.name).copied().unwrap_or(0);
    if count > 1 {
        return Err(Refusal::Duplicate {
            node: node.name.clone(),
            count,
        });
    }
    let evidence = world.evidence.get(&node.name);
    let existing = [&node.name, &node.fqdn]
        .into_iter()
        .find_map(|name| world.nodes.get(name.as_str()).map(|ready| (name, *ready)));
    if let Some((name, ready)) = existing {
        if ready || !world.recovery {
            return Err(Refusal::NodeExists(name.clone()));
        }
        return recovery(csr, world, node, evidence);
    }
    let fetches = evidence.map(|e| e.ignition.as_slice()).unwrap_or_default();
    if fetches.is_empty() {
        return Err(Refusal::NoIgnition(node.name.clone()));
    }
    let at = within(fetches, csr.created, world.window).ok_or(Refusal::OutsideWindow {
        node: node.name.clone(),
        created: csr.created,
    })?;
    Ok(Decision::Approve {
        node: node.name.clone(),
        kind: Kind::Client,
        because: format!("{n}: ignition served to its own address at {at}"),
    })
}

/// The evidence time `created` follows within `window` (allowing
/// [`CLOCK_SLACK_SECS`] the other way), the latest if several.
fn within(times: &[u64], created: u64, window: u64) -> Option<u64> {
    times
        .iter()
        .copied()
        .filter(|t| created.saturating_add(CLOCK_SLACK_SECS) >= *t && created <= t + window)
        .max()
}

/// Item 5: a NotReady Node's new client CSR after its lease renewal or boot.
fn recovery(
    csr: &Csr,
    world: &World<'_>,
    node: &InventoryNode,
    evidence: Option<&Evidence>,
) -> Result<Decision, Refusal> {
    if let Some(last) = world.recovered.get(&node.name)
        && world.now < last + world.window
    {
        return Err(Refusal::RecoveryDone(node.name.clone()));
    }
    let boots = evidence.map(|e| e.boots.as_slice()).unwrap_or_default();
    let recent = boots
        .iter()
        .copied()
        .filter(|b| world.now <= b + world.window)
        .collect::<Vec<_>>();
    let at = within(&recent, csr.created, world.window)
        .ok_or_else(|| Refusal::NoBootEvidence(node.name.clone()))?;
    Ok(Decision::Approve {
        node: node.name.clone(),
        kind: Kind::Recovery,
        because: format!("{}: NotReady, lease renewed or booted at {at}", node.name),
    })
}

/// Item 3.
fn serving(csr: &Csr, world: &World<'_>) -> Result<Decision, Refusal> {
    let (node, n) = common(csr, world, "server auth")?;
    if csr.username != format!("system:node:{n}") {
        return Err(Refusal::ServingUser {
            username: csr.username.clone(),
            node: n,
        });
    }
    if !same_set(&csr.groups, &NODE_GROUPS) {
        return Err(Refusal::Groups(csr.groups.clone()));
    }
    if !world.nodes.contains_key(&n) {
        return Err(Refusal::NoNode(n));
    }
    let Ok(req) = csr.request.as_ref() else {
        return Err(Refusal::NotNodeSubject(String::new()));
    };
    if let Some(d) = req
        .dns_sans
        .iter()
        .find(|d| **d != node.name && **d != node.fqdn)
    {
        return Err(Refusal::DnsSan(d.clone()));
    }
    if let Some(ip) = req.ip_sans.iter().find(|ip| !node.addrs.contains(ip)) {
        return Err(Refusal::IpSan(*ip));
    }
    Ok(Decision::Approve {
        node: node.name.clone(),
        kind: Kind::Serving,
        because: format!("{n}: Node exists, names and addresses of the cluster file"),
    })
}
