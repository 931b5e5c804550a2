//! Inventory-bound CSR approval (`csr:`; issue #37): the kubelets' client
//! and serving CSRs of the nodes this appliance booted are approved, and
//! nothing else; nothing is ever denied.
//!
//! [`request`] parses the PKCS#10 request; [`rules`] is the pure decision
//! (CSR, Nodes, inventory, evidence, now → approve or a reason);
//! [`objects`] turns API objects, the plan and the timeline into its
//! inputs; [`watch`] is the loop over the API server ([`client`],
//! [`kubeconfig`]); [`rbac`] the least-privilege identity
//! (`render csr-rbac`); [`userdata`] reads the cluster's current worker
//! pointer config for day-2 workers (shared with the HTTP service through
//! `runtime::workerign`, which `serve` hands to both).
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
pub mod userdata;
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
    reader: Arc<userdata::Reader>,
    tasks: Tasks,
}

fn reader_cfg(plan: &Plan, csr: &crate::model::cluster::CsrCfg) -> userdata::ReaderCfg {
    userdata::ReaderCfg {
        kubeconfig: csr.kubeconfig_file.clone(),
        ignition_dir: plan.cluster.http.ignition_dir.clone(),
    }
}

impl Csr {
    /// The approver for `plan` (which has a `csr:` section), started at
    /// once, and the reader of the worker pointer config it shares through
    /// `rt.worker_ign`.
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
        let reader = Arc::new(userdata::Reader {
            cfg: arc_swap::ArcSwap::from_pointee(reader_cfg(plan, &cfg)),
            shared: rt.worker_ign.clone(),
            status: Mutex::new(None),
        });
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
        let (r, token) = (reader.clone(), tasks.token());
        tasks.spawn("csr worker ignition reader", token.clone(), r.run(token));
        Ok(Arc::new(Csr {
            approver,
            reader,
            tasks,
        }))
    }

    /// The `csr` section of `/status`.
    pub fn status(&self) -> status::CsrStatus {
        let mut s = self.approver.state.locked().status.clone();
        s.worker_ignition = self.reader.status.locked().clone();
        s
    }
}

#[async_trait]
impl Service for Csr {
    fn name(&self) -> &'static str {
        "csr"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let next = plan.cluster.csr.clone().map(|c| {
            let reader = reader_cfg(&plan, &c);
            ((c, objects::inventory(&plan.cluster)), reader)
        });
        Ok(Box::new(move || {
            if let Some((next, reader)) = next {
                self.approver.cfg.store(Arc::new(next));
                self.reader.cfg.store(Arc::new(reader));
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::service(Duration::ZERO))
            .await
    }

    fn metrics(&self, out: &mut String) {
        self.status().metrics(out);
    }
}
