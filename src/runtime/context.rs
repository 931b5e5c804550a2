//! What the services of one `serve` share at run time, as one value
//! handed to each service when it is created (after linkerd's `App`
//! config and pingora's `ServerConf`, passed down rather than read from
//! globals): the connection caps sized from the open-files limit
//! ([`Caps`]), this member's HA view ([`HaView`]: whether it holds the
//! VIPs, its member id, the `ha` status), how listeners bind
//! ([`BindOptions`]: `IP_FREEBIND` for an HA member) and, in test builds
//! only, the test hooks ([`Faults`]: faults to inject, the NTP host clock,
//! the registry's quiet time and tag TTL forced; the process reads them
//! from its environment, an embedded serve is handed its own); the day-2
//! workers' pointer config the CSR approver shares with HTTP
//! ([`WorkerIgnition`]); the limiters of the services' rate-limited log
//! lines ([`LogRates`], whose summaries `serve`'s flusher writes); and how
//! helper processes are started ([`HelperProcs`]: where the libvirt helper
//! is, where its log goes).
//!
//! Built once by `serve` from the plan ([`Context::for_plan`] plus the caps
//! `limits::apply` chose); a clone is cheap (the HA view is one `Arc`, the
//! rest is plain data). Invariant: nothing here is process-global, so two
//! appliances (or two instances of one service) in one process, each with
//! its own `Context`, do not see each other's caps, HA state or log
//! counts.

use std::sync::Arc;
use std::time::Duration;

use crate::plan::Plan;
use crate::runtime::bind::BindOptions;
use crate::runtime::faults::Faults;
use crate::runtime::ha::HaView;
use crate::runtime::helperproc::HelperProcs;
use crate::runtime::limits::cap::Caps;
use crate::runtime::lograte::{LogRate, LogRates};
use crate::runtime::service::Tasks;
use crate::runtime::workerign::WorkerIgnition;

/// The run-time context of one `serve`'s services.
#[derive(Clone, Default)]
pub struct Context {
    /// The connection caps in force (as configured by default).
    pub caps: Caps,
    /// This member's HA view (a single appliance by default: it holds the
    /// VIPs).
    pub ha: HaView,
    /// How listeners bind.
    pub bind: BindOptions,
    /// Test builds: the test hooks, tasks to fail on purpose and values
    /// forced (none by default).
    pub faults: Faults,
    /// The day-2 workers' pointer config: the CSR approver writes it, HTTP
    /// serves it (neither imports the other).
    pub worker_ign: Arc<WorkerIgnition>,
    /// The rate-limited log lines' limiters of this serve, by name.
    pub log_rates: LogRates,
    /// Where helper programs are and where their log goes (the process's
    /// way by default: next to the executable, stderr shared).
    pub helpers: HelperProcs,
}

impl Context {
    /// The context `plan` asks for: its HA view started (the first VIP
    /// observation made now, before any service answers), `IP_FREEBIND`
    /// for an HA member, and `caps`; no test hooks ([`Context::with_faults`]
    /// sets them).
    pub fn for_plan(plan: &Plan, caps: Caps) -> Context {
        let c = &plan.cluster;
        let ha = match &c.ha {
            Some(h) => HaView::start(h.peer, c.network.appliance_ip, h.own_ip),
            None => HaView::single(),
        };
        Context {
            caps,
            ha,
            bind: BindOptions::for_plan(plan),
            faults: Faults::default(),
            worker_ign: Arc::default(),
            log_rates: LogRates::default(),
            helpers: HelperProcs::default(),
        }
    }

    /// This context with the test hooks `faults` (the process's
    /// environment's, or those an embedding host gives).
    pub fn with_faults(self, faults: Faults) -> Context {
        Context { faults, ..self }
    }

    /// The task set of `service`, with this context's faults.
    pub fn tasks(&self, service: &'static str) -> Tasks {
        Tasks::with_faults(service, self.faults.clone())
    }

    /// This serve's limiter `name` (its summary lines' prefix), made with
    /// `interval` on first use: the same name is the same limiter.
    pub fn log_rate(&self, name: &'static str, interval: Duration) -> Arc<LogRate> {
        self.log_rates.get(name, interval)
    }
}
