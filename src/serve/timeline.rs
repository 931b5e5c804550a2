//! What the services' typed `/status` sections tell the install timeline:
//! `serve` (the one place that sees both) turns them into
//! [`crate::timeline::Event`]s for [`Recorder::observe`] every tick
//! ([`tick`]), so the timeline never reads a service's type and `GET
//! /status` changes nothing.

use crate::drivers::libvirt::status::LibvirtStatus;
use crate::drivers::libvirt::status::{VmPhase, VmState};
use crate::model::cluster::Role;
use crate::runtime::status::LeaseState;
use crate::serve::registry::Services;
use crate::services::dhcp::status::DhcpStatus;
use crate::services::http::status::HttpStatus;
use crate::services::lb::status::LbStatus;
use crate::services::registry::status::ClientRow;
use crate::timeline::prober::pool_of;
use crate::timeline::recorder::Recorder;
use crate::timeline::{Event, PULL_QUIET_SECS, Pool};

/// One timeline tick: the HTTP service takes the machine-config contacts
/// into its install state, then the services' sections are sampled. (What
/// happens at one moment the services record themselves, when it
/// happens: the LB's machine-config connections, HTTP's ignition fetches
/// and rootfs downloads, libvirt's install verdicts, BMC power-ons.)
pub fn tick(services: &Services, rec: &Recorder) {
    if let Some(h) = &services.http {
        h.sync_install_state();
    }
    let mut doc = Sections::default();
    let Services {
        #[cfg(feature = "libvirt")]
        libvirt,
        dhcp,
        lb,
        http,
        // Nothing of theirs is an install step.
        dns: _,
        dhcp6: _,
        tftp: _,
        ntp: _,
        // Records its steps itself (Event::CsrApproved, Event::NodeReady).
        csr: _,
        registry,
    } = services;
    doc.registry = registry.as_ref().map(|s| s.node_pulls());
    doc.dhcp = dhcp.as_ref().map(|s| s.status());
    doc.lb = lb.as_ref().map(|s| s.status());
    doc.http = http.as_ref().map(|s| s.status());
    #[cfg(feature = "libvirt")]
    {
        doc.libvirt = libvirt.as_ref().map(|s| s.status());
    }
    rec.observe(sample(&doc, rec));
}

/// The sections that tell the timeline something.
#[derive(Default)]
pub struct Sections {
    pub dhcp: Option<DhcpStatus>,
    pub lb: Option<LbStatus>,
    pub http: Option<HttpStatus>,
    pub libvirt: Option<LibvirtStatus>,
    /// The registry's rows of clients that are nodes.
    pub registry: Option<Vec<ClientRow>>,
}

/// The events of one sample of the sections (the recorder orders them).
pub fn sample(doc: &Sections, rec: &Recorder) -> Vec<Event> {
    let mut evs = Vec::new();
    if let Some(d) = &doc.dhcp {
        for l in d.leases.iter().filter(|l| l.state == LeaseState::Bound) {
            if let Some(node) = rec.node_by_mac(l.mac) {
                evs.push(Event::Lease {
                    node,
                    expires: l.expires,
                });
            }
        }
    }
    if let Some(lb) = &doc.lb {
        if lb.bootstrap_complete.is_some() {
            evs.push(Event::BootstrapComplete);
        }
        evs.push(Event::StaleMarker {
            path: lb
                .bootstrap_complete_marker_stale
                .then(|| lb.bootstrap_complete_marker.clone()),
        });
        for p in &lb.pools {
            let pool = pool_of(p.name);
            for b in &p.backends {
                if b.removed && b.role == Role::Bootstrap {
                    evs.push(Event::BootstrapRemoved);
                } else if b.healthy {
                    evs.push(Event::Healthy {
                        node: b.node.clone(),
                        pool,
                    });
                } else if pool == Pool::Api {
                    evs.push(Event::ApiDown {
                        node: b.node.clone(),
                    });
                }
            }
        }
    }
    if let Some(h) = &doc.http {
        evs.push(Event::BootstrapInPlaceAge {
            secs: h.bootstrap_in_place_age,
        });
    }
    if let Some(rows) = &doc.registry {
        let now = crate::runtime::clock::unix_now();
        evs.extend(registry_events(rows, now, pull_quiet_secs()));
    }
    if let Some(lv) = &doc.libvirt {
        for r in &lv.nodes {
            if r.state == VmState::Running && r.phase == VmPhase::Install {
                evs.push(Event::InstallRunning {
                    node: r.node.clone(),
                });
            }
        }
    }
    evs
}

/// [`PULL_QUIET_SECS`], or in a `test-hooks` build (never the shipped
/// binary) `CRC_APPLIANCE_TEST_PULL_QUIET_SECS`: a registry test does not
/// wait a minute.
fn pull_quiet_secs() -> u64 {
    #[cfg(feature = "test-hooks")]
    if let Some(secs) = std::env::var("CRC_APPLIANCE_TEST_PULL_QUIET_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return secs;
    }
    PULL_QUIET_SECS
}

/// A node's first registry request is `pulling`; `pulled` once it pulled
/// blobs and then asked nothing for `quiet` seconds (its latest request's
/// time: a blob still streaming counts as a request).
fn registry_events(rows: &[ClientRow], now: u64, quiet: u64) -> impl Iterator<Item = Event> + '_ {
    rows.iter()
        .flat_map(move |r| {
            let node = r.node.clone()?;
            let quiet = r.blob_bytes > 0 && now.saturating_sub(r.latest_request) >= quiet;
            let pulled = quiet.then(|| Event::RegistryPulled {
                node: node.clone(),
                at: r.latest_request,
            });
            let pulling = Event::RegistryPulling {
                node,
                at: r.first_request,
            };
            Some(std::iter::once(pulling).chain(pulled))
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::plan::Plan;
    use crate::services::dhcp::status::LeaseRow;

    fn plan() -> Plan {
        let yaml = r#"name: t
baseDomain: crc.testing
network: { cidr: 10.9.0.0/24, gateway: 10.9.0.1, applianceIP: 10.9.0.1 }
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:05", ip: 10.9.0.5 }
  - { name: master-0, role: master, mac: "52:54:00:00:00:0A", ip: 10.9.0.10 }
"#;
        crate::config::from_str(yaml, Path::new("/"), Path::new("/t.yaml")).unwrap()
    }

    #[test]
    fn hooks_and_samples_map_addresses_and_macs_to_nodes() {
        let p = plan();
        let r = Recorder::new(&p);
        let mapped: IpAddr = "::ffff:10.9.0.10".parse().unwrap();
        assert_eq!(r.node_by_ip(mapped).as_deref(), Some("master-0"));
        r.machine_config_connect("10.9.0.99".parse().unwrap());
        r.rootfs(mapped, 42, Duration::from_millis(7));
        let mut d = Sections::default();
        let mut dhcp: crate::services::dhcp::status::DhcpStatus =
            serde_json::from_value(serde_json::json!({
                "listen": null, "interface": null, "leaseFile": "", "leases": [], "declined": [],
                "received": {}, "sent": {}, "malformed": 0, "ignored": 0, "sendErrors": 0,
                "leaseFileWrites": 0, "leaseFileErrors": 0
            }))
            .unwrap();
        for (mac, state) in [
            ("52:54:00:00:00:0a", LeaseState::Bound),
            ("52:54:00:00:00:05", LeaseState::Offered),
        ] {
            dhcp.leases.push(LeaseRow {
                mac: mac.parse().unwrap(),
                ip: Ipv4Addr::UNSPECIFIED,
                hostname: None,
                client_id: None,
                state,
                expires: 100,
                reserved: true,
            });
        }
        d.dhcp = Some(dhcp);
        r.observe(sample(&d, &r));
        let v = r.view();
        let (boot, m0) = (&v.nodes[0], &v.nodes[1]);
        assert!(m0.lease.is_some(), "MACs compare case-insensitively");
        assert!(boot.lease.is_none(), "an offer is no lease");
        assert_eq!((m0.rootfs_bytes, m0.rootfs_ms), (Some(42), Some(7)));
        assert!(v.nodes.iter().all(|n| n.first_boot.is_none()), "not a node");
        let mut m = String::new();
        r.metrics(&mut m);
        assert!(
            m.contains("crc_appliance_timeline_phase{phase=\"provisioning\"} 1"),
            "{m}"
        );
        assert!(m.contains("step=\"rootfs\""), "{m}");
    }

    #[test]
    fn a_node_is_pulling_from_its_first_request_and_pulled_after_a_quiet_minute() {
        let row = |node: Option<&str>, first, latest, blob_bytes| ClientRow {
            client: "10.9.0.10".into(),
            node: node.map(str::to_string),
            first_request: first,
            latest_request: latest,
            requests: 3,
            bytes_pulled: blob_bytes + 10,
            blob_bytes,
        };
        let evs = |rows: &[ClientRow], now| {
            registry_events(rows, now, PULL_QUIET_SECS).collect::<Vec<_>>()
        };
        let pulling = Event::RegistryPulling {
            node: "master-0".into(),
            at: 100,
        };
        let rows = [row(Some("master-0"), 100, 150, 5000)];
        assert_eq!(evs(&rows, 209).len(), 1, "59 s quiet: still pulling");
        assert_eq!(
            evs(&rows, 210),
            [
                pulling.clone(),
                Event::RegistryPulled {
                    node: "master-0".into(),
                    at: 150
                }
            ]
        );
        // Manifests only (no blob byte): never pulled; not a node: nothing.
        assert_eq!(evs(&[row(Some("master-0"), 100, 150, 0)], 999), [pulling]);
        assert!(evs(&[row(None, 100, 150, 5000)], 999).is_empty());

        let p = plan();
        let r = Recorder::new(&p);
        let d = Sections {
            registry: Some(vec![row(Some("master-0"), 100, 150, 5000)]),
            ..Sections::default()
        };
        r.observe(sample(&d, &r));
        let m0 = &r.view().nodes[1];
        assert_eq!((m0.pulling, m0.pulled), (Some(100), Some(150)));
    }
}
