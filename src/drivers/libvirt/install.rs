//! The end of an install (feature `libvirt`): a shut-off install domain
//! boots its disk only on evidence ([`install_verdict`]: libvirt's shut-off
//! reason is a guest shutdown, and the node fetched its ignition when the
//! [`Evidence`] can tell); any other stop (`virsh destroy`, a crash, a host
//! shutdown) starts the install domain again and reports why.

use tracing::{info, warn};
use virt::domain::Domain;
use virt::enumutil::Enum;
use virt::error::ErrorNumber;

use super::driver::{Driver, found};
use super::spec::{InstallRejected, NodeSpec, Phase, install_verdict};
use super::xml;

/// Whether a node fetched its ignition in its current install attempt
/// (the install timeline of `serve`).
pub type Evidence = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// What [`Driver::finish_installs`] decided for a shut-off install VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallOutcome {
    pub node: String,
    pub domain: String,
    /// `Ok`: booted from its disk; `Err(reason)`: installing again.
    pub result: Result<(), InstallRejected>,
}

impl InstallOutcome {
    /// One line for `vm up` and the log.
    pub fn line(&self) -> String {
        match &self.result {
            Ok(()) => format!("started {} from its disk", self.domain),
            Err(why) => format!("{}: {why}", self.domain),
        }
    }
}

/// libvirt's shut-off reason, lower case (`shutdown`, `destroyed`, ...).
fn shutoff_reason(d: &Domain) -> String {
    use virt::domain::{DomainShutoffReason as R, DomainStateReason};
    match d.state() {
        Ok((_, Enum::Known(DomainStateReason::Shutoff(Enum::Known(r))))) => match r {
            R::Shutdown => "shutdown",
            R::Destroyed => "destroyed",
            R::Crashed => "crashed",
            R::Migrated => "migrated",
            R::Saved => "saved",
            R::Failed => "failed",
            R::FromSnapshot => "from snapshot",
            R::Daemon => "daemon",
            R::Unknown => "unknown",
        }
        .to_string(),
        _ => "unknown".to_string(),
    }
}

impl Driver {
    /// A shut-off install domain: boot its disk when the install finished
    /// ([`install_verdict`]), else start the install domain again.
    fn finish_install(&self, n: &NodeSpec, d: &Domain) -> anyhow::Result<InstallOutcome> {
        let reason = shutoff_reason(d);
        let fetched = self.evidence.as_ref().map(|e| e(&n.node));
        let result = install_verdict(&reason, fetched);
        match &result {
            Ok(()) => {
                self.boot_from_disk(n, d, Phase::Installing.as_str())?;
                info!(domain = %n.domain, "installer finished; booted from disk");
            }
            Err(why) => {
                warn!(domain = %n.domain, "{why}");
                self.conn
                    .create_domain_xml(&xml::install_domain_xml(&self.spec, n), 0)
                    .map_err(|e| {
                        self.start_error(format!("restarting the install domain {}", n.domain), e)
                    })?;
            }
        }
        Ok(InstallOutcome {
            node: n.node.clone(),
            domain: n.domain.clone(),
            result,
        })
    }

    /// Decide every install VM that has stopped (phase `installing`, shut
    /// off): boot its disk, or install again. Returns the decisions.
    pub fn finish_installs(&self) -> anyhow::Result<Vec<InstallOutcome>> {
        let mut out = Vec::new();
        for n in &self.spec.nodes {
            let Some(d) = found(
                self.conn.lookup_domain_by_name(&n.domain),
                ErrorNumber::NoDomain,
            )?
            else {
                continue;
            };
            let phase = self.phase_of(&d);
            if phase.as_deref() == Some(Phase::Installing.as_str())
                && d.is_persistent()?
                && !d.is_active()?
            {
                out.push(self.finish_install(n, &d)?);
            }
        }
        Ok(out)
    }
}
