//! Inventory-bound CSR approval (`csr:`; issue #37): the kubelets' client
//! and serving CSRs of the nodes this appliance booted are approved, and
//! nothing else; nothing is ever denied.
//!
//! [`request`] parses the PKCS#10 request; [`rules`] is the pure decision
//! (CSR, Nodes, inventory, evidence, now → approve or a reason);
//! [`objects`] turns API objects, the plan and the timeline into its
//! inputs; [`watch`] is the loop over the API server ([`client`],
//! [`kubeconfig`]); [`rbac`] the least-privilege identity
//! (`render csr-rbac`).
//!
//! The evidence comes from the timeline (`timeline::Recorder::view`: the
//! node's ignition fetch from its own address, lease renewals, BMC and
//! libvirt boots), never from another service.

pub mod client;
pub mod kubeconfig;
pub mod objects;
pub mod rbac;
pub mod request;
pub mod rules;
pub mod status;
pub mod watch;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::plan::Plan;
use crate::runtime::service::{Commit, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use crate::timeline::Events;

pub struct Csr {
    approver: Arc<watch::Approver>,
    tasks: Tasks,
}

impl Csr {
    /// The approver for `plan` (which has a `csr:` section), started at once.
    pub fn new(
        plan: &Plan,
        events: Events,
        rt: &crate::runtime::context::Context,
    ) -> anyhow::Result<Arc<Csr>> {
        let cfg = plan
            .cluster
            .csr
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no csr: section"))?;
        let approver = Arc::new(watch::Approver {
            cfg: arc_swap::ArcSwap::from_pointee((cfg, objects::inventory(&plan.cluster))),
            events,
            state: Mutex::new(watch::State::default()),
        });
        let tasks = rt.tasks("csr");
        let a = approver.clone();
        let token = tasks.token();
        tasks.spawn(
            "csr approver",
            token.clone(),
            async move { a.run(token).await },
        );
        Ok(Arc::new(Csr { approver, tasks }))
    }

    /// The `csr` section of `/status`.
    pub fn status(&self) -> status::CsrStatus {
        self.approver.state.locked().status.clone()
    }
}

#[async_trait]
impl Service for Csr {
    fn name(&self) -> &'static str {
        "csr"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let next = plan
            .cluster
            .csr
            .clone()
            .map(|c| (c, objects::inventory(&plan.cluster)));
        Ok(Box::new(move || {
            if let Some(next) = next {
                self.approver.cfg.store(Arc::new(next));
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::service(Duration::ZERO))
            .await
    }

    fn metrics(&self, out: &mut String) {
        self.approver.state.locked().status.metrics(out);
    }
}
