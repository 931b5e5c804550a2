//! The running services by their concrete types: one field per
//! [`ServiceKind`], built in one function ([`Services::create`], linkerd's
//! `App` shape) from the catalogue's list for the plan.
//!
//! No string names: the admin API reaches the load balancer and network
//! boot through [`Services::lb_control`] and [`Services::boot_control`];
//! `/status` takes each typed section through [`Services::status_into`],
//! `/metrics` iterates [`Services::all`]. The admin service is not here: it
//! serves the hub this registry lives in, so `serve` creates it after the
//! hub ([`crate::serve::supervisor`]).
//!
//! Invariant: every function that lists all services destructures
//! `Services` (`all`, `sync_parts`, `status_into`), so a
//! field added and not handled there does not compile.

use std::sync::Arc;

use anyhow::Context as _;

use crate::model::catalogue::ServiceKind;
use crate::plan::Plan;
use crate::runtime::context::Context;
use crate::runtime::control::{BootControl, LbControl, SyncControl};
use crate::runtime::service::Service;
use crate::serve::status::StatusDoc;
use crate::services::{csr, dhcp, dhcp6, dns, http, lb, ntp, registry, tftp};
use crate::timeline::Events;

/// The services of one `serve` other than admin; `None` where the plan
/// does not run that service.
#[derive(Default)]
pub struct Services {
    #[cfg(feature = "libvirt")]
    pub libvirt: Option<Arc<crate::drivers::libvirt::service::Libvirt>>,
    pub dns: Option<Arc<dns::Dns>>,
    pub dhcp: Option<Arc<dhcp::Dhcp>>,
    pub dhcp6: Option<Arc<dhcp6::Dhcp6>>,
    pub lb: Option<Arc<lb::Lb>>,
    pub http: Option<Arc<http::Http>>,
    pub tftp: Option<Arc<tftp::Tftp>>,
    pub ntp: Option<Arc<ntp::Ntp>>,
    pub csr: Option<Arc<csr::Csr>>,
    pub registry: Option<Arc<registry::Registry>>,
}

impl Services {
    /// Create the services `plan` runs (no sockets yet), in start order:
    /// libvirt first, its network must exist before the others bind to it.
    /// Each gets `ctx` (caps, HA view, bind options, test faults).
    pub async fn create(
        plan: &Arc<Plan>,
        events: &Events,
        ctx: &Context,
    ) -> anyhow::Result<Services> {
        let mut s = Services::default();
        for kind in plan.cluster.services() {
            match kind {
                ServiceKind::Libvirt => s.create_libvirt(plan, events, ctx).await?,
                ServiceKind::Dns => s.dns = Some(dns::Dns::new(plan, ctx).context("DNS")?),
                ServiceKind::Dhcp => {
                    let d = dhcp::Dhcp::new(plan, events.clone(), ctx);
                    s.dhcp = Some(d.await.context("DHCP")?)
                }
                ServiceKind::Dhcp6 => {
                    s.dhcp6 = Some(dhcp6::Dhcp6::new(plan, ctx).await.context("DHCPv6")?)
                }
                ServiceKind::Lb => {
                    s.lb = Some(lb::Lb::new(plan, events.clone(), ctx).context("load balancer")?)
                }
                ServiceKind::Http => s.http = Some(http::Http::new(plan, events.clone(), ctx)),
                ServiceKind::Tftp => s.tftp = Some(tftp::Tftp::new(plan, ctx).context("TFTP")?),
                ServiceKind::Ntp => s.ntp = Some(ntp::Ntp::new(plan, ctx).context("NTP")?),
                ServiceKind::Csr => {
                    s.csr = Some(csr::Csr::new(plan, events.clone(), ctx).context("CSR approval")?)
                }
                ServiceKind::Registry => {
                    let r = registry::Registry::new(plan, events.clone(), ctx);
                    s.registry = Some(r.context("registry")?)
                }
                // Serves the hub that holds this registry: created after it.
                ServiceKind::Admin => {}
            }
        }
        Ok(s)
    }

    #[cfg(feature = "libvirt")]
    async fn create_libvirt(
        &mut self,
        plan: &Arc<Plan>,
        events: &Events,
        ctx: &Context,
    ) -> anyhow::Result<()> {
        let l = crate::drivers::libvirt::service::Libvirt::new(plan, events.clone(), ctx);
        self.libvirt = Some(l.await.context("libvirt")?);
        Ok(())
    }

    /// Without the libvirt feature the catalogue never lists libvirt.
    #[cfg(not(feature = "libvirt"))]
    async fn create_libvirt(
        &mut self,
        _: &Arc<Plan>,
        _: &Events,
        _: &Context,
    ) -> anyhow::Result<()> {
        Ok(())
    }

    /// Every service, in start order. `Services` is destructured: a service
    /// added to it and not listed here does not compile.
    pub fn all(&self) -> Vec<Arc<dyn Service>> {
        let Services {
            #[cfg(feature = "libvirt")]
            libvirt,
            dns,
            dhcp,
            dhcp6,
            lb,
            http,
            tftp,
            ntp,
            csr,
            registry,
        } = self;
        fn dynamic<S: Service + 'static>(s: &Option<Arc<S>>) -> Option<Arc<dyn Service>> {
            s.clone().map(|s| s as Arc<dyn Service>)
        }
        [
            #[cfg(feature = "libvirt")]
            dynamic(libvirt),
            dynamic(dns),
            dynamic(dhcp),
            dynamic(dhcp6),
            dynamic(lb),
            dynamic(http),
            dynamic(tftp),
            dynamic(ntp),
            dynamic(csr),
            dynamic(registry),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The load balancer's control handle, when it runs.
    pub fn lb_control(&self) -> Option<&dyn LbControl> {
        self.lb.as_deref().map(|l| l as &dyn LbControl)
    }

    /// Network-boot control (the HTTP service), when it runs.
    pub fn boot_control(&self) -> Option<&dyn BootControl> {
        self.http.as_deref().map(|h| h as &dyn BootControl)
    }

    /// The services that share state with an HA peer (`serve::hasync`).
    /// `Services` is destructured: a service added to it has to say here
    /// whether it shares state.
    pub fn sync_parts(&self) -> Vec<&dyn SyncControl> {
        let Services {
            #[cfg(feature = "libvirt")]
                libvirt: _,
            dns: _,
            dhcp,
            dhcp6: _,
            lb: _,
            http,
            tftp: _,
            ntp: _,
            csr: _,
            registry: _,
        } = self;
        let mut v: Vec<&dyn SyncControl> = Vec::new();
        if let Some(h) = http.as_deref() {
            v.push(h);
        }
        if let Some(d) = dhcp.as_deref() {
            v.push(d);
        }
        v
    }

    /// Each running service's `/status` section into `doc`, in start order.
    /// `Services` is destructured: a service added to it and not placed
    /// here does not compile.
    pub fn status_into(&self, doc: &mut StatusDoc) {
        let Services {
            #[cfg(feature = "libvirt")]
            libvirt,
            dns,
            dhcp,
            dhcp6,
            lb,
            http,
            tftp,
            ntp,
            csr,
            registry,
        } = self;
        #[cfg(feature = "libvirt")]
        {
            doc.libvirt = libvirt.as_ref().map(|s| s.status());
        }
        doc.dns = dns.as_ref().map(|s| s.status());
        doc.dhcp = dhcp.as_ref().map(|s| s.status());
        doc.dhcp6 = dhcp6.as_ref().map(|s| s.status());
        doc.lb = lb.as_ref().map(|s| s.status());
        doc.http = http.as_ref().map(|s| s.status());
        doc.tftp = tftp.as_ref().map(|s| s.status());
        doc.ntp = ntp.as_ref().map(|s| s.status());
        doc.csr = csr.as_ref().map(|s| s.status());
        doc.registry = registry.as_ref().map(|s| s.status());
    }

    /// The load balancer's `/status` section, when it runs.
    pub fn lb_status(&self) -> Option<crate::services::lb::status::LbStatus> {
        self.lb.as_ref().map(|l| l.status())
    }
}
