use super::render::{Goal, missing, progress, table};
use super::*;
use crate::timeline::status::HintKind;

fn nodes() -> Vec<(String, Role)> {
    [
        ("bootstrap", Role::Bootstrap),
        ("master-0", Role::Master),
        ("worker-0", Role::Worker),
    ]
    .into_iter()
    .map(|(n, r)| (n.to_string(), r))
    .collect()
}

fn s(x: &str) -> String {
    x.to_string()
}

fn ign(node: Option<&str>, client: &str, at: u64) -> Event {
    Event::Ignition {
        node: node.map(s),
        client: s(client),
        file: s("master-0.ign"),
        at,
    }
}

fn healthy(node: &str, pool: Pool) -> Event {
    Event::Healthy {
        node: s(node),
        pool,
    }
}

#[test]
fn a_cluster_goes_through_every_phase() {
    let mut t = Timeline::default();
    let v = t.view(&nodes());
    assert_eq!(v.phase, ClusterPhase::Provisioning);
    assert_eq!(v.nodes.len(), 3);
    for n in ["bootstrap", "master-0", "worker-0"] {
        t.apply(100, Event::InstallRunning { node: s(n) });
        t.apply(
            110,
            Event::Lease {
                node: s(n),
                expires: 3700,
            },
        );
    }
    t.apply(
        120,
        Event::Rootfs {
            node: s("master-0"),
            bytes: 1000,
            ms: 5,
        },
    );
    t.apply(130, ign(Some("master-0"), "127.0.10.10", 125));
    assert!(t.fetched_ignition("master-0"));
    assert!(!t.fetched_ignition("worker-0"));
    t.apply(140, healthy("bootstrap", Pool::Api));
    assert_eq!(t.view(&nodes()).phase, ClusterPhase::Bootstrapping);
    t.apply(
        150,
        Event::InstallFinished {
            node: s("master-0"),
        },
    );
    t.apply(
        160,
        Event::MachineConfigConnect {
            node: s("master-0"),
        },
    );
    t.apply(170, healthy("master-0", Pool::Api));
    t.apply(180, Event::BootstrapComplete);
    t.apply(181, Event::BootstrapComplete);
    let v = t.view(&nodes());
    assert_eq!(v.phase, ClusterPhase::BootstrapComplete);
    assert!(Goal::BootstrapComplete.reached(&v));
    assert!(!Goal::InstallComplete.reached(&v));
    t.apply(190, Event::BootstrapRemoved);
    t.apply(200, healthy("worker-0", Pool::Ingress));
    let v = t.view(&nodes());
    assert_eq!(v.phase, ClusterPhase::IngressReady);
    assert_eq!(v.phase_times["bootstrapping"], 140);
    assert_eq!(v.phase_times["bootstrap-complete"], 180);
    assert_eq!(v.phase_times["ingress-ready"], 200);
    let m = &v.nodes[1];
    assert_eq!(
        (m.vm_started, m.lease, m.rootfs, m.rootfs_bytes, m.ignition),
        (Some(100), Some(110), Some(120), Some(1000), Some(125))
    );
    assert_eq!(
        (m.install_finished, m.first_boot, m.api_healthy),
        (Some(150), Some(160), Some(170))
    );
    assert_eq!(m.install_attempts, 1);
}

#[test]
fn an_operator_fetch_is_not_progress() {
    let mut t = Timeline::default();
    t.apply(10, ign(None, "127.0.0.1", 9));
    t.apply(11, ign(None, "127.0.0.1", 9));
    let v = t.view(&nodes());
    assert_eq!(v.nodes[1].ignition, None);
    assert_eq!(v.operator_fetches.len(), 1, "idempotent");
    assert_eq!(v.operator_fetches[0].client, "127.0.0.1");
    for i in 0..100 {
        t.apply(20, ign(None, "127.0.0.1", 100 + i));
    }
    let v = t.view(&nodes());
    assert_eq!(v.operator_fetches.len(), OPERATOR_FETCHES);
    assert_eq!(v.operator_fetches[0].unix_time, 199, "newest first");
}

/// A fetch carries its own time and may be applied after the install end
/// (recorded by another task, or taken from the HA peer): a fast install
/// (image download right after the ignition) must not lose its ignition
/// step; a fetch after the install end is not one.
#[test]
fn an_ignition_sampled_after_the_install_end_still_counts() {
    let mut t = Timeline::default();
    t.apply(
        101,
        Event::InstallFinished {
            node: s("master-0"),
        },
    );
    t.apply(102, ign(Some("master-0"), "127.0.10.10", 101));
    t.apply(103, ign(Some("worker-0"), "127.0.10.20", 100));
    t.apply(
        100,
        Event::InstallFinished {
            node: s("worker-0"),
        },
    );
    t.apply(
        109,
        Event::InstallFinished {
            node: s("bootstrap"),
        },
    );
    t.apply(111, ign(Some("bootstrap"), "127.0.10.5", 111));
    let v = t.view(&nodes());
    assert_eq!(v.nodes[1].ignition, Some(101), "same second as the end");
    assert_eq!(v.nodes[2].ignition, Some(100), "before the end");
    assert_eq!(v.nodes[0].ignition, None, "after the end");
}

#[test]
fn a_rejected_install_starts_a_new_attempt() {
    let mut t = Timeline::default();
    let run = Event::InstallRunning {
        node: s("master-0"),
    };
    t.apply(100, run.clone());
    t.apply(101, run.clone());
    t.apply(110, ign(Some("master-0"), "127.0.10.10", 110));
    t.apply(
        120,
        Event::InstallRejected {
            node: s("master-0"),
            reason: s("install VM stopped (destroyed)"),
        },
    );
    assert!(!t.fetched_ignition("master-0"), "a new attempt");
    // The old fetch, applied again (the HA peer's log), stays in the past.
    t.apply(125, ign(Some("master-0"), "127.0.10.10", 110));
    assert!(!t.fetched_ignition("master-0"));
    t.apply(130, run);
    t.apply(140, ign(Some("master-0"), "127.0.10.10", 140));
    assert!(t.fetched_ignition("master-0"));
    let v = t.view(&nodes());
    let m = &v.nodes[1];
    assert_eq!(m.install_attempts, 2);
    assert_eq!(m.errors, ["install VM stopped (destroyed)"]);
    assert_eq!(m.vm_started, Some(100), "first start kept");
}

#[test]
fn renewals_count_only_a_later_expiry() {
    let mut t = Timeline::default();
    let lease = |e| Event::Lease {
        node: s("worker-0"),
        expires: e,
    };
    t.apply(10, lease(1000));
    t.apply(11, lease(1000));
    t.apply(12, lease(900));
    t.apply(500, lease(1500));
    let v = t.view(&nodes());
    let w = &v.nodes[2];
    assert_eq!(
        (w.lease, w.lease_renewed, w.lease_renewals),
        (Some(10), Some(500), 1)
    );
}

#[test]
fn removal_implies_the_earlier_phases_and_missing_says_what_is_left() {
    let mut t = Timeline::default();
    let v = t.view(&nodes());
    let m = missing(&v, Goal::BootstrapComplete);
    assert!(m.contains(&s("master-0: no DHCP lease yet")), "{m:?}");
    assert!(m.contains(&s("bootstrap: no DHCP lease yet")), "{m:?}");
    assert!(!m.iter().any(|l| l.starts_with("worker-0")), "{m:?}");
    assert!(
        m.last()
            .is_some_and(|l| l.contains("waiting for bootstrap-complete")),
        "{m:?}"
    );
    t.apply(
        5,
        Event::Lease {
            node: s("master-0"),
            expires: 100,
        },
    );
    let m = missing(&t.view(&nodes()), Goal::BootstrapComplete);
    assert!(
        m.contains(&s(
            "master-0: has not fetched its ignition from its own address yet"
        )),
        "{m:?}"
    );
    t.apply(50, Event::BootstrapRemoved);
    let v = t.view(&nodes());
    assert_eq!(v.phase, ClusterPhase::BootstrapRemoved);
    assert_eq!(v.phase_times["bootstrap-complete"], 50);
    assert!(Goal::BootstrapComplete.reached(&v));
}

#[test]
fn progress_lists_new_steps_once_and_the_table_has_a_row_per_node() {
    let mut t = Timeline::default();
    let before = t.view(&nodes());
    t.apply(
        3661,
        Event::Lease {
            node: s("master-0"),
            expires: 9000,
        },
    );
    let after = t.view(&nodes());
    assert_eq!(
        progress(Some(&before), &after),
        ["01:01:01 master-0: DHCP lease"]
    );
    assert!(progress(Some(&after), &after).is_empty());
    assert_eq!(progress(None, &after)[0], "cluster: phase provisioning");
    let tab = table(&after);
    assert!(tab.starts_with("cluster phase: provisioning\n"), "{tab}");
    assert_eq!(tab.lines().count(), 2 + 3, "{tab}");
    assert!(
        tab.lines()
            .any(|l| l.starts_with("master-0") && l.contains("01:01:01")),
        "{tab}"
    );
}

#[test]
fn bmc_steps_keep_their_first_time_and_show_in_the_table() {
    let mut t = Timeline::default();
    let iso = || Event::BootIso {
        node: s("worker-0"),
    };
    t.apply(20, iso());
    t.apply(25, iso());
    t.apply(
        30,
        Event::BmcPowerOn {
            node: s("worker-0"),
        },
    );
    t.apply(
        90,
        Event::BmcPowerOn {
            node: s("worker-0"),
        },
    );
    let v = t.view(&nodes());
    let w = &v.nodes[2];
    assert_eq!((w.boot_iso, w.bmc_power_on), (Some(20), Some(30)));
    assert_eq!(v.nodes[1].boot_iso, None);
    let steps = render::steps(w);
    assert!(steps.contains(&("bmcPowerOn", "BMC power on", Some(30))));
    assert!(steps.contains(&("bootIso", "boot ISO fetched", Some(20))));
}

#[test]
fn the_table_header_names_the_step_under_it() {
    let mut t = Timeline::default();
    t.apply(
        3600,
        Event::Lease {
            node: s("master-0"),
            expires: 9000,
        },
    );
    t.apply(7322, healthy("master-0", Pool::Api));
    t.apply(7323, healthy("worker-0", Pool::Ingress));
    let tab = table(&t.view(&nodes()));
    let lines: Vec<&str> = tab.lines().collect();
    let header = lines[1];
    // Only the steps some node reached have a column.
    let words: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(words, ["NODE", "LEASE", "API", "INGRESS"], "{tab}");
    let m0 = lines.iter().find(|l| l.starts_with("master-0")).unwrap();
    let w0 = lines.iter().find(|l| l.starts_with("worker-0")).unwrap();
    let at = |col: &str| header.find(col).unwrap();
    assert_eq!(&m0[at("LEASE")..at("LEASE") + 8], "01:00:00", "{tab}");
    assert_eq!(&m0[at("API")..at("API") + 8], "02:02:02", "{tab}");
    assert_eq!(m0[at("INGRESS")..].trim(), "-", "{tab}");
    assert_eq!(&w0[at("INGRESS")..], "02:02:03", "{tab}");
}

#[test]
fn every_step_has_a_unique_key_and_a_column_as_wide_as_a_time() {
    let keys: std::collections::BTreeSet<_> = render::STEPS.iter().map(|s| s.key).collect();
    let cols: std::collections::BTreeSet<_> = render::STEPS.iter().map(|s| s.column).collect();
    assert_eq!(
        (keys.len(), cols.len()),
        (render::STEPS.len(), render::STEPS.len())
    );
    for st in &render::STEPS {
        assert!(st.column.len() <= render::TIME_WIDTH, "{}", st.column);
    }
    let n = NodeTimeline {
        first_boot: Some(5),
        ..NodeTimeline::default()
    };
    let steps = render::steps(&n);
    assert_eq!(
        steps.iter().filter(|s| s.2.is_some()).collect::<Vec<_>>(),
        [&("firstBoot", "first boot from disk", Some(5))]
    );
}

/// worker-0 fetched its ignition at 100 and its machine config at 200.
fn booted_worker() -> Timeline {
    let mut t = Timeline::default();
    t.apply(100, ign(Some("worker-0"), "127.0.10.20", 100));
    t.apply(
        200,
        Event::MachineConfigConnect {
            node: s("worker-0"),
        },
    );
    t
}

#[test]
fn a_worker_without_ingress_past_the_threshold_gets_the_csr_hint() {
    let t = booted_worker();
    assert!(
        t.view_at(&nodes(), 200 + 599, 600).hints.is_empty(),
        "not yet"
    );
    let v = t.view_at(&nodes(), 200 + 600, 600);
    assert_eq!(v.hints.len(), 1, "{v:?}");
    let h = &v.hints[0];
    assert_eq!(
        (h.kind, h.nodes.as_slice()),
        (HintKind::PendingCsr, &[s("worker-0")][..])
    );
    assert!(h.message.contains("10 min ago"), "{}", h.message);
    assert_eq!(h.commands, CSR_COMMANDS);
    assert_eq!(
        CSR_COMMANDS[1],
        r#"oc get csr -o go-template='{{range .items}}{{if not .status}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}' | xargs oc adm certificate approve"#
    );
    // Rendered: the table, wait-for's progress once, and what is missing.
    let tab = table(&v);
    assert!(
        tab.contains("hint: worker-0 fetched its machine config"),
        "{tab}"
    );
    assert!(tab.contains(&format!("\n  {}\n", CSR_COMMANDS[1])), "{tab}");
    let before = t.view_at(&nodes(), 300, 600);
    let p = progress(Some(&before), &v);
    assert!(p.iter().any(|l| l == "  oc get csr"), "{p:?}");
    assert!(progress(Some(&v), &v).is_empty(), "once");
    let m = missing(&v, Goal::InstallComplete);
    assert!(m.iter().any(|l| l.contains(CSR_COMMANDS[1])), "{m:?}");
    assert!(
        !missing(&v, Goal::BootstrapComplete)
            .iter()
            .any(|l| l.contains("csr"))
    );
}

#[test]
fn a_node_error_is_the_last_column_of_its_row() {
    let mut t = Timeline::default();
    t.apply(
        10,
        Event::InstallRejected {
            node: s("master-0"),
            reason: s("install VM stopped (unknown)"),
        },
    );
    let tab = table(&t.view(&nodes()));
    assert!(tab.contains("\nNODE       LAST ERROR\n"), "{tab}");
    assert!(
        tab.contains("\nmaster-0   install VM stopped (unknown)\n"),
        "{tab}"
    );
    assert!(
        tab.contains("no node has reached an install step yet"),
        "{tab}"
    );
}

#[test]
fn no_csr_hint_without_both_steps_or_with_ingress_or_for_masters() {
    let mut t = Timeline::default();
    t.apply(100, ign(Some("worker-0"), "127.0.10.20", 100));
    assert!(
        t.view_at(&nodes(), 10_000, 60).hints.is_empty(),
        "no first boot"
    );
    let mut t = Timeline::default();
    t.apply(
        100,
        Event::MachineConfigConnect {
            node: s("worker-0"),
        },
    );
    assert!(
        t.view_at(&nodes(), 10_000, 60).hints.is_empty(),
        "no ignition"
    );
    let mut t = booted_worker();
    t.apply(300, healthy("worker-0", Pool::Ingress));
    assert!(t.view_at(&nodes(), 10_000, 60).hints.is_empty(), "joined");
    let mut t = Timeline::default();
    t.apply(100, ign(Some("master-0"), "127.0.10.10", 100));
    t.apply(
        200,
        Event::MachineConfigConnect {
            node: s("master-0"),
        },
    );
    assert!(t.view_at(&nodes(), 10_000, 60).hints.is_empty(), "a master");
}

#[test]
fn a_stale_marker_is_a_hint_until_bootstrap_completes() {
    let mut t = Timeline::default();
    let path = Some(s("/srv/ign/bootstrap-complete"));
    t.apply(10, Event::StaleMarker { path: path.clone() });
    t.apply(11, Event::StaleMarker { path });
    let v = t.view_at(&nodes(), 20, 600);
    assert_eq!(
        v.phase,
        ClusterPhase::Provisioning,
        "a stale marker completes nothing"
    );
    assert_eq!(v.hints.len(), 1);
    assert_eq!(v.hints[0].kind, HintKind::StaleBootstrapMarker);
    let m = missing(&v, Goal::BootstrapComplete);
    assert!(
        m.iter()
            .any(|l| l.contains("ignoring /srv/ign/bootstrap-complete")),
        "{m:?}"
    );
    t.apply(30, Event::BootstrapComplete);
    assert!(t.view_at(&nodes(), 40, 600).hints.is_empty());
    t.apply(50, Event::StaleMarker { path: None });
    assert!(t.view_at(&nodes(), 60, 600).hints.is_empty());
}

#[test]
fn a_single_node_cluster_bootstraps_in_place_reboots_and_completes() {
    let sno = vec![(s("master-0"), Role::Master)];
    let mut t = Timeline::default();
    t.apply(
        1,
        Event::SingleNode {
            node: Some(s("master-0")),
        },
    );
    t.apply(
        10,
        Event::BootIso {
            node: s("master-0"),
        },
    );
    t.apply(20, ign(Some("master-0"), "10.0.0.10", 20));
    // Not up yet: provisioning; a down API before it ever came up is no reboot.
    t.apply(
        25,
        Event::ApiDown {
            node: s("master-0"),
        },
    );
    assert_eq!(t.view(&sno).phase, ClusterPhase::Provisioning);
    // The bootstrap control plane on the live system.
    t.apply(100, healthy("master-0", Pool::Api));
    t.apply(110, healthy("master-0", Pool::Api));
    let v = t.view(&sno);
    assert_eq!(v.phase, ClusterPhase::Bootstrapping);
    assert_eq!(v.nodes[0].install_finished, None);
    // Disk written, reboot: the API goes away.
    t.apply(
        200,
        Event::ApiDown {
            node: s("master-0"),
        },
    );
    t.apply(
        210,
        Event::ApiDown {
            node: s("master-0"),
        },
    );
    let v = t.view(&sno);
    assert_eq!(v.phase, ClusterPhase::Bootstrapping);
    assert_eq!(v.nodes[0].install_finished, Some(200));
    assert!(!Goal::BootstrapComplete.reached(&v));
    // Ingress healthy before the node's own API does not complete it.
    t.apply(250, healthy("master-0", Pool::Ingress));
    // The node's own API from its disk.
    t.apply(300, healthy("master-0", Pool::Api));
    let v = t.view(&sno);
    assert_eq!(v.phase, ClusterPhase::IngressReady);
    assert_eq!(v.phase_times["bootstrap-complete"], 300);
    assert_eq!(v.phase_times["ingress-ready"], 300);
    assert!(!v.phase_times.contains_key("bootstrap-removed"));
    assert_eq!(v.nodes[0].first_boot, Some(300));
    assert!(Goal::InstallComplete.reached(&v));
    // A reload keeping the mode keeps the progress; a later outage of the
    // installed node is no second reboot.
    t.apply(
        400,
        Event::SingleNode {
            node: Some(s("master-0")),
        },
    );
    t.apply(
        410,
        Event::ApiDown {
            node: s("master-0"),
        },
    );
    let v = t.view(&sno);
    assert_eq!(v.phase, ClusterPhase::IngressReady);
    assert_eq!(v.nodes[0].install_finished, Some(200));
}

#[test]
fn an_old_bootstrap_in_place_file_is_a_hint_until_the_install_completes() {
    let sno = vec![(s("master-0"), Role::Master)];
    let mut t = Timeline::default();
    t.apply(
        1,
        Event::SingleNode {
            node: Some(s("master-0")),
        },
    );
    t.apply(2, Event::BootstrapInPlaceWritten { at: Some(1_000) });
    assert!(t.view_at(&sno, 1_000 + 19 * 3600, 600).hints.is_empty());
    t.apply(4, Event::BootstrapInPlaceWritten { at: Some(500) });
    let v = t.view_at(&sno, 500 + 21 * 3600 + 5, 600);
    assert_eq!(v.hints.len(), 1, "{v:?}");
    assert_eq!(v.hints[0].kind, HintKind::StaleBootstrapInPlace);
    assert!(v.hints[0].message.contains("21 h ago"), "{:?}", v.hints[0]);
    // Not single-node: no hint whatever the age.
    // The age grows with the clock, without a new event.
    assert!(!t.view_at(&sno, 1_000 + 21 * 3600, 600).hints.is_empty());
    t.apply(6, Event::SingleNode { node: None });
    assert!(t.view_at(&sno, 500 + 21 * 3600, 600).hints.is_empty());
}
