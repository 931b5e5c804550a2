//! Inventory-bound CSR approval (`csr:`; issue #37): the kubelets' client
//! and serving CSRs of the nodes this appliance booted are approved, and
//! nothing else.
//!
//! [`request`] parses the PKCS#10 request; [`rules`] is the pure decision
//! (CSR, Nodes, inventory, evidence, now → approve or a reason).

pub mod rbac;
pub mod request;
pub mod rules;
