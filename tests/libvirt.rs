//! libvirt driver: generated XML checked with `virt-xml-validate`, the ISO
//! reader on images built by `xorriso`, the driver against the libvirt test
//! driver (`test:///<per-test node XML>`, private state per connection) and
//! the `vm`/`render libvirt` commands of the real binary.
//!
//! `serve` runs in the test process (`common::inproc`): the embedded
//! serve starts its libvirt helper from the target dir and relays the
//! helper's log lines, which the tests wait for, into its own log
//! (`runtime::helperproc`). The helper killed under `serve` is observed as
//! `serve_hosted` returning the error naming it: the same error the
//! process turns into exit code 1, as `tests/reload.rs` checks for any
//! failed task. Spawned, because the process is the point:
//! `the_libvirt_helper_dies_with_serve` (serve killed by SIGKILL takes the
//! helper with it: PR_SET_PDEATHSIG), and the `vm`, `render` and `status`
//! commands, which are the binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::initramfs::live_iso;
use common::{BIN, run};
use crc_appliance::boot::iso9660::{IsoError, IsoImage};
use crc_appliance::drivers::libvirt::spec::Phase;
use crc_appliance::drivers::libvirt::{Spec, xml};
use crc_appliance::plan::Plan;

const KERNEL: &[u8] = b"fake kernel image\n";
const INITRD: &[u8] = b"fake initramfs\n";

fn rootfs() -> Vec<u8> {
    // > 64 KiB so the copy loop takes several rounds.
    (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect()
}

/// A live-ISO look-alike with fixed kernel/initrd/rootfs and coreos/kargs.json.
fn make_iso(dir: &Path, volid: &str, rock_ridge: bool) -> PathBuf {
    let extra: [(&str, &[u8]); 1] = [("coreos/kargs.json", b"{}")];
    live_iso(dir, volid, [KERNEL, INITRD, &rootfs()], &extra, rock_ridge)
}

fn cluster_yaml(dir: &Path, uri: &str, iso: &Path, extra: &str) -> String {
    cluster_yaml_net(dir, uri, iso, "", extra)
}

/// `net` is appended inside `libvirt.network` (e.g. `, mode: forwarder`);
/// `extra` is appended as top-level sections (e.g. `dhcp: {}`).
fn cluster_yaml_net(dir: &Path, uri: &str, iso: &Path, net: &str, extra: &str) -> String {
    let d = dir.display();
    common::only(&format!(
        "http:\n  listen: 127.0.20.1:18080\n  imagesDir: {d}/images\n  ignitionDir: {d}/ign\n\
         rhcos:\n  iso: {}\nlibvirt:\n  uri: \"{uri}\"\n  pool: {{ name: crc-test-{pid}, path: {d}/pool }}\n  \
         network: {{ name: crc-test-{pid}, bridge: crct{pid}{net} }}\n  resources:\n    \
         bootstrap: {{ cpus: 1, memoryMib: 1024, diskGib: 1 }}\n    \
         master: {{ cpus: 1, memoryMib: 1024, diskGib: 2 }}\n    \
         worker: {{ cpus: 1, memoryMib: 1024, diskGib: 1 }}\n{extra}",
        iso.display(),
        pid = std::process::id() % 100000
    ))
}

fn load(dir: &Path, yaml: &str) -> (PathBuf, Plan) {
    let f = dir.join("cluster.yaml");
    std::fs::write(&f, yaml).unwrap();
    let plan = crc_appliance::config::load(&f).expect("valid cluster file");
    (f, plan)
}

/// A private test-driver hypervisor: an empty `<node/>` file.
#[cfg_attr(not(feature = "libvirt"), allow(dead_code))]
fn test_uri(dir: &Path) -> String {
    let node = dir.join("node.xml");
    std::fs::write(&node, "<node/>\n").unwrap();
    format!("test://{}", node.display())
}

// ------------------------------------------------------------ XML schema

#[test]
fn generated_xml_validates_against_libvirt_schemas() {
    require_tools!("virt-xml-validate", "xmllint");
    let dir = tempfile::tempdir().unwrap();
    let iso = dir.path().join("x.iso");
    for name in ["appliance", "appliance-nat", "forwarder", "forwarder-dhcp"] {
        let (net, extra) = match name {
            "appliance" => ("", ""),
            "appliance-nat" => (", nat: true", ""),
            // The appliance's DHCP on: libvirt runs no DHCP.
            "forwarder" => (", mode: forwarder", "dhcp:\n  listen: 0.0.0.0:16767\n"),
            // The appliance's DHCP off: libvirt hands out the reservations.
            _ => (", mode: forwarder, nat: true", ""),
        };
        let mut yaml = cluster_yaml_net(dir.path(), "test:///default", &iso, net, extra);
        if name.starts_with("forwarder") {
            yaml = yaml.replace("applianceIP: 127.0.20.1", "applianceIP: 127.0.20.2");
        }
        let (_, plan) = load(dir.path(), &yaml);
        let s = Spec::new(&plan).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let mut docs = vec![
            ("network", xml::network_xml(&s)),
            ("storagepool", xml::pool_xml(&s)),
        ];
        for n in &s.nodes {
            docs.push(("storagevol", xml::volume_xml(n)));
            docs.push(("domain", xml::install_domain_xml(&s, n)));
            docs.push(("domain", xml::final_domain_xml(&s, n, Phase::Installing)));
        }
        for (i, (kind, text)) in docs.iter().enumerate() {
            let f = dir.path().join(format!("{name}-{i}-{kind}.xml"));
            std::fs::write(&f, text).unwrap();
            let (code, out, err) = run("virt-xml-validate", &[f.to_str().unwrap(), kind]);
            assert_eq!(
                code, 0,
                "{name} {kind} does not validate:\n{text}\n{out}{err}"
            );
        }
        let net = &docs[0].1;
        match name {
            "appliance" => assert!(net.contains("<dns enable='no'/>") && !net.contains("<forward")),
            "appliance-nat" => assert!(net.contains("<forward mode='nat'/>")),
            "forwarder" => assert!(
                net.contains("<forwarder domain='test.crc.testing' addr='127.0.20.2'/>")
                    && !net.contains("<dhcp>"),
                "{net}"
            ),
            _ => assert!(net.contains("<host mac='52:54:00:14:00:0a'"), "{net}"),
        }
    }
}

// ------------------------------------------------------------ ISO reader

#[test]
fn iso_reader_extracts_files_from_xorriso_images() {
    require_tools!("xorriso");
    let dir = tempfile::tempdir().unwrap();
    for rr in [true, false] {
        let iso = make_iso(
            dir.path(),
            if rr { "rhcos-rr-1" } else { "RHCOS_PLAIN" },
            rr,
        );
        let mut img = IsoImage::open(std::fs::File::open(&iso).unwrap()).unwrap();
        assert_eq!(
            img.volume_id(),
            if rr { "rhcos-rr-1" } else { "RHCOS_PLAIN" }
        );
        assert_eq!(img.has_rock_ridge(), rr);
        assert_eq!(
            img.read_file("images/pxeboot/vmlinuz", 1 << 20).unwrap(),
            KERNEL
        );
        // coreos-installer style 8.3 primary-volume names work too.
        assert_eq!(
            img.read_file("IMAGES/PXEBOOT/INITRD.IMG", 1 << 20).unwrap(),
            INITRD
        );
        let e = img.lookup("images/pxeboot/rootfs.img").unwrap();
        assert_eq!(e.size, rootfs().len() as u64);
        let mut out = Vec::new();
        assert_eq!(img.copy_to(&e, &mut out).unwrap(), e.size);
        assert_eq!(out, rootfs());
        if rr {
            assert_eq!(img.lookup("coreos/kargs.json").unwrap().name, "kargs.json");
        }
        assert!(matches!(
            img.lookup("images/pxeboot/missing"),
            Err(IsoError::NotFound(_))
        ));
    }
}

#[test]
fn iso_reader_survives_truncated_and_mutated_xorriso_images() {
    require_tools!("xorriso");
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read(make_iso(dir.path(), "rhcos-fuzz", true)).unwrap();
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut opened = 0;
    for round in 0..1500 {
        let mut img = base.clone();
        // Mutate the descriptors and directory sectors (the first ~40 sectors).
        let meta = img.len().min(40 * 2048);
        for _ in 0..(1 + next() % 6) {
            let at = (16 * 2048 + next() as usize % (meta - 16 * 2048)) % img.len();
            img[at] = next() as u8;
        }
        if round % 5 == 0 {
            let cut = next() as usize % img.len();
            img.truncate(cut);
        }
        if let Ok(mut iso) = IsoImage::open(std::io::Cursor::new(img)) {
            opened += 1;
            for p in [
                "images/pxeboot/vmlinuz",
                "images/pxeboot/rootfs.img",
                "coreos",
            ] {
                if let Ok(e) = iso.lookup(p) {
                    let mut sink = Vec::new();
                    let _ = iso.copy_to(&e, &mut sink);
                    assert!(sink.len() <= base.len());
                }
            }
        }
    }
    assert!(
        opened > 100,
        "mutations should mostly keep the image openable"
    );
    // A cut right after the descriptors: lookups or reads fail with an error.
    let cut = IsoImage::open(std::io::Cursor::new(base[..20 * 2048].to_vec()))
        .and_then(|mut i| i.read_file("images/pxeboot/rootfs.img", 1 << 30));
    assert!(cut.is_err());
}

// ------------------------------------------------------------ driver

#[cfg(feature = "libvirt")]
mod driver {
    use super::*;
    use crc_appliance::drivers::libvirt::driver::Driver;
    use crc_appliance::drivers::libvirt::spec::InstallRejected;

    /// The driver for the cluster file `yaml` (written to `dir`).
    fn open_driver(dir: &Path, yaml: &str) -> (Spec, Driver) {
        let (_, plan) = load(dir, yaml);
        let spec = Spec::new(&plan).unwrap();
        let d = Driver::open(spec.clone()).unwrap();
        (spec, d)
    }

    /// The driver for the default test cluster on a private test:// hypervisor.
    fn test_driver(dir: &Path, iso: &Path) -> (Spec, Driver) {
        open_driver(dir, &cluster_yaml(dir, &test_uri(dir), iso, ""))
    }

    fn domain_xml(d: &Driver, name: &str, inactive: bool) -> String {
        let dom = d.conn().lookup_domain_by_name(name).unwrap();
        let flags = if inactive {
            virt::sys::VIR_DOMAIN_XML_INACTIVE
        } else {
            0
        };
        dom.xml_desc(flags).unwrap()
    }

    fn row<'a>(
        rows: &'a [crc_appliance::drivers::libvirt::driver::NodeStatus],
        node: &str,
    ) -> &'a crc_appliance::drivers::libvirt::driver::NodeStatus {
        rows.iter().find(|r| r.node == node).unwrap()
    }

    #[test]
    fn up_is_idempotent_installs_finish_and_down_removes_everything() {
        require_tools!("xorriso");
        let dir = tempfile::tempdir().unwrap();
        let iso = make_iso(dir.path(), "rhcos-drv", true);
        let (spec, mut d) = test_driver(dir.path(), &iso);

        let first = d.up().unwrap().join("\n");
        for needle in [
            "defined storage pool",
            "defined network",
            "created volume test-master-0.qcow2 (2 GiB)",
            "extracted images/pxeboot/rootfs.img (200000 bytes)",
            "started test-bootstrap from the live ISO kernel",
            "started test-worker-0 from the live ISO kernel",
        ] {
            assert!(first.contains(needle), "missing {needle:?} in:\n{first}");
        }
        assert_eq!(std::fs::read(&spec.kernel).unwrap(), KERNEL);
        assert_eq!(std::fs::read(&spec.initrd).unwrap(), INITRD);
        assert_eq!(std::fs::read(&spec.rootfs).unwrap(), rootfs());
        assert!(spec.rootfs.starts_with(dir.path().join("images")));

        // Network: appliance mode, no dnsmasq, active, ours.
        let net = d.conn().lookup_network_by_name(&spec.network_name).unwrap();
        assert!(net.is_active().unwrap());
        let nx = net.xml_desc(0).unwrap();
        assert!(nx.contains("<dns enable='no'/>"), "{nx}");
        assert!(nx.contains("address='127.0.20.1'"), "{nx}");

        // Two phases: the running instance boots the ISO kernel with the
        // install kargs and powers off on reboot; the persistent one boots the disk.
        let live = domain_xml(&d, "test-master-0", false);
        assert!(live.contains("<kernel>"), "{live}");
        assert!(live.contains("coreos.inst.install_dev=/dev/vda"), "{live}");
        assert!(
            live.contains("coreos.inst.ignition_url=http://127.0.20.1:18080/ignition/master.ign"),
            "{live}"
        );
        assert!(
            live.contains(
                "coreos.live.rootfs_url=http://127.0.20.1:18080/images/test-live-rootfs.img"
            ),
            "{live}"
        );
        assert!(live.contains("<on_reboot>destroy</on_reboot>"), "{live}");
        let fin = domain_xml(&d, "test-master-0", true);
        assert!(!fin.contains("<kernel>"), "{fin}");
        assert!(fin.contains("<on_reboot>restart</on_reboot>"), "{fin}");
        assert!(fin.contains("<boot order='1'/>"), "{fin}");
        assert!(fin.contains("52:54:00:14:00:0a"), "{fin}");
        let m0 = spec.node("master-0").unwrap();
        assert!(fin.contains(&m0.uuid), "same UUID in both phases: {fin}");

        // Idempotent: nothing to do the second time.
        let second = d.up().unwrap();
        assert!(second.is_empty(), "second up did: {second:?}");

        let st = d.status().unwrap();
        assert_eq!(st.len(), 5);
        assert!(
            st.iter()
                .all(|r| r.state == "running" && r.phase == "install"),
            "{st:?}"
        );
        assert_eq!(row(&st, "master-0").ip, "127.0.20.10");

        // `virsh destroy` of the install VM is no finished install: the
        // install domain runs again (its kernel and kargs) and says why.
        d.conn()
            .lookup_domain_by_name("test-master-0")
            .unwrap()
            .destroy()
            .unwrap();
        assert_eq!(row(&d.status().unwrap(), "master-0").state, "shut off");
        let out = d.finish_installs().unwrap();
        assert_eq!(out.len(), 1, "{out:?}");
        let why = out[0].result.clone().unwrap_err();
        assert_eq!(why, InstallRejected::Stopped("destroyed".into()));
        let live = domain_xml(&d, "test-master-0", false);
        assert!(live.contains("<kernel>"), "installs again: {live}");
        let st = d.status().unwrap();
        assert_eq!(
            (
                row(&st, "master-0").state.as_str(),
                row(&st, "master-0").phase.as_str()
            ),
            ("running", "install")
        );
        // Shut down without the ignition fetch (the evidence says no): again.
        d.set_evidence(Box::new(|node| node != "master-0"));
        let dom = d.conn().lookup_domain_by_name("test-master-0").unwrap();
        dom.shutdown().unwrap();
        let out = d.finish_installs().unwrap();
        let why = out[0].result.clone().unwrap_err();
        assert_eq!(why, InstallRejected::BeforeIgnition);
        assert_eq!(row(&d.status().unwrap(), "master-0").phase, "install");

        // The installer shuts master-0 down after its ignition fetch → it
        // is started from its disk.
        d.set_evidence(Box::new(|_| true));
        d.conn()
            .lookup_domain_by_name("test-master-0")
            .unwrap()
            .shutdown()
            .unwrap();
        let out = d.finish_installs().unwrap();
        assert_eq!(
            out.iter().map(|o| o.line()).collect::<Vec<_>>(),
            ["started test-master-0 from its disk"]
        );
        let live = domain_xml(&d, "test-master-0", false);
        assert!(!live.contains("<kernel>"), "now boots the disk: {live}");
        let st = d.status().unwrap();
        assert_eq!(row(&st, "master-0").phase, "installed");
        assert_eq!(row(&st, "master-0").state, "running");
        assert!(d.finish_installs().unwrap().is_empty());

        // remove-bootstrap: domain and volume gone, the rest untouched, and a
        // later `up` does not bring it back.
        let rb = d.remove_bootstrap().unwrap().join("\n");
        assert!(rb.contains("removed domain test-bootstrap"), "{rb}");
        assert!(rb.contains("deleted volume test-bootstrap.qcow2"), "{rb}");
        assert_eq!(row(&d.status().unwrap(), "bootstrap").state, "absent");
        let pool = d
            .conn()
            .lookup_storage_pool_by_name(&spec.pool_name)
            .unwrap();
        let vols = pool.list_volumes().unwrap();
        assert!(
            !vols.contains(&"test-bootstrap.qcow2".to_string()),
            "{vols:?}"
        );
        assert!(
            vols.contains(&"test-master-1.qcow2".to_string()),
            "{vols:?}"
        );
        assert!(d.up().unwrap().is_empty());
        assert_eq!(row(&d.status().unwrap(), "bootstrap").state, "absent");

        // down: everything created is gone; a second down has nothing to do.
        let down = d.down().unwrap().join("\n");
        for needle in [
            "removed domain test-master-0",
            "deleted volume test-worker-0.qcow2",
            "removed network",
            "removed storage pool",
        ] {
            assert!(down.contains(needle), "missing {needle:?} in:\n{down}");
        }
        assert!(d.conn().list_all_domains(0).unwrap().is_empty());
        assert!(d.conn().list_all_networks(0).unwrap().is_empty());
        assert!(d.conn().list_all_storage_pools(0).unwrap().is_empty());
        for f in [&spec.kernel, &spec.initrd, &spec.rootfs, &spec.state_file] {
            assert!(!f.exists(), "{} left behind", f.display());
        }
        assert!(
            !spec.pool_path.exists(),
            "pool dir created by up is removed"
        );
        assert!(d.down().unwrap().is_empty());
    }

    /// Single-node (bootstrap-in-place) on the test driver: the install
    /// domain boots the live kernel with the bootstrap-in-place Ignition URL
    /// and no `coreos.inst.*`; its reboot is a guest shutdown
    /// (`on_reboot=destroy`), and the first shutdown after the node's
    /// Ignition fetch means "disk written": the VM is started again from the
    /// persistent definition, which boots the disk.
    #[test]
    fn single_node_boots_live_with_bootstrap_in_place_then_its_disk() {
        require_tools!("xorriso");
        let dir = tempfile::tempdir().unwrap();
        let iso = make_iso(dir.path(), "rhcos-sno", true);
        std::fs::create_dir_all(dir.path().join("ign")).unwrap();
        std::fs::write(
            dir.path().join("ign/bootstrap-in-place-for-live-iso.ign"),
            r#"{"ignition":{"version":"3.2.0"}}"#,
        )
        .unwrap();
        // The test cluster's nodes minus all but master-0.
        let yaml: String = cluster_yaml(dir.path(), &test_uri(dir.path()), &iso, "")
            .lines()
            .filter(|l| {
                !["bootstrap,", "master-1,", "master-2,", "worker-0,"]
                    .iter()
                    .any(|n| l.contains(&format!("name: {n}")))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let (spec, mut d) = open_driver(dir.path(), &yaml);
        let (_, plan) = load(dir.path(), &yaml);
        assert!(plan.cluster.mode.is_single_node(), "{yaml}");

        let up = d.up().unwrap().join("\n");
        assert!(
            up.contains("started test-master-0 from the live ISO kernel"),
            "{up}"
        );
        let live = domain_xml(&d, "test-master-0", false);
        assert!(live.contains("<kernel>"), "{live}");
        assert!(live.contains("<initrd>"), "{live}");
        assert!(
            live.contains("ignition.config.url=http://127.0.20.1:18080/ignition/master-0.ign"),
            "the bootstrap-in-place URL (the node's own): {live}"
        );
        assert!(
            live.contains("ignition.firstboot ignition.platform.id=metal"),
            "{live}"
        );
        assert!(
            live.contains(
                "coreos.live.rootfs_url=http://127.0.20.1:18080/images/test-live-rootfs.img"
            ),
            "{live}"
        );
        assert!(!live.contains("coreos.inst"), "no install kargs: {live}");
        assert!(live.contains("<on_reboot>destroy</on_reboot>"), "{live}");
        let fin = domain_xml(&d, "test-master-0", true);
        assert!(!fin.contains("<kernel>"), "{fin}");
        assert!(fin.contains("<boot order='1'/>"), "{fin}");
        assert!(fin.contains(&spec.node("master-0").unwrap().uuid), "{fin}");

        // A shutdown before the Ignition fetch: the live system again.
        d.set_evidence(Box::new(|_| false));
        let dom = d.conn().lookup_domain_by_name("test-master-0").unwrap();
        dom.shutdown().unwrap();
        let out = d.finish_installs().unwrap();
        assert_eq!(
            out[0].result,
            Err(InstallRejected::BeforeIgnition),
            "{out:?}"
        );
        assert!(domain_xml(&d, "test-master-0", false).contains("<kernel>"));
        assert_eq!(row(&d.status().unwrap(), "master-0").phase, "install");

        // The node wrote its disk and rebooted (a guest shutdown, after its
        // Ignition fetch): started from the disk, not the live system.
        d.set_evidence(Box::new(|_| true));
        d.conn()
            .lookup_domain_by_name("test-master-0")
            .unwrap()
            .shutdown()
            .unwrap();
        let out = d.finish_installs().unwrap();
        assert_eq!(
            out.iter().map(|o| o.line()).collect::<Vec<_>>(),
            ["started test-master-0 from its disk"]
        );
        let live = domain_xml(&d, "test-master-0", false);
        assert!(!live.contains("<kernel>"), "boots the disk: {live}");
        assert!(!live.contains("ignition.config.url"), "{live}");
        let st = d.status().unwrap();
        assert_eq!(
            (
                row(&st, "master-0").state.as_str(),
                row(&st, "master-0").phase.as_str()
            ),
            ("running", "installed")
        );
        assert!(d.finish_installs().unwrap().is_empty());
        assert!(!d.down().unwrap().is_empty());
    }

    #[test]
    fn down_leaves_foreign_objects_alone() {
        require_tools!("xorriso");
        let dir = tempfile::tempdir().unwrap();
        let iso = make_iso(dir.path(), "rhcos-foreign", true);
        let (spec, d) = test_driver(dir.path(), &iso);
        // Someone else's network with our name, and a domain named like a node.
        let net = d
            .conn()
            .define_network_xml(&format!(
                "<network><name>{}</name><bridge name='foreign0'/></network>",
                spec.network_name
            ))
            .unwrap();
        net.create().unwrap();
        let w = spec.node("worker-0").unwrap();
        d.conn()
            .define_domain_xml(&format!(
                "<domain type='test'><name>{}</name><memory>1024</memory><os><type>hvm</type></os></domain>",
                w.domain
            ))
            .unwrap();
        let up = d.up().unwrap().join("\n");
        assert!(!up.contains("defined network"), "{up}");
        assert!(!up.contains("started test-worker-0"), "{up}");
        assert!(up.contains("started test-master-0"), "{up}");
        let st = d.status().unwrap();
        assert_eq!(row(&st, "worker-0").phase, "foreign");
        assert!(d.network_status().unwrap().contains("(not ours)"));
        d.down().unwrap();
        assert!(d.conn().lookup_network_by_name(&spec.network_name).is_ok());
        assert!(d.conn().lookup_domain_by_name(&w.domain).is_ok());
        assert!(d.conn().lookup_domain_by_name("test-master-0").is_err());
    }

    #[test]
    fn forwarder_network_is_accepted_by_libvirt() {
        require_tools!("xorriso");
        let dir = tempfile::tempdir().unwrap();
        let iso = make_iso(dir.path(), "rhcos-fwd", true);
        // The appliance's DHCP is off (`only`), so libvirt serves the reservations.
        let yaml = cluster_yaml_net(
            dir.path(),
            &test_uri(dir.path()),
            &iso,
            ", mode: forwarder, nat: true",
            "",
        )
        .replace("applianceIP: 127.0.20.1", "applianceIP: 127.0.20.2");
        let (spec, d) = open_driver(dir.path(), &yaml);
        d.up().unwrap();
        let net = d.conn().lookup_network_by_name(&spec.network_name).unwrap();
        assert!(net.is_active().unwrap());
        let x = net.xml_desc(0).unwrap();
        for needle in [
            "<forward mode='nat'",
            "<forwarder domain='test.crc.testing' addr='127.0.20.2'/>",
            "<forwarder domain='20.0.127.in-addr.arpa' addr='127.0.20.2'/>",
            "<host mac='52:54:00:14:00:0b' name='master-1' ip='127.0.20.11'/>",
            "address='127.0.20.1'",
        ] {
            assert!(x.contains(needle), "missing {needle:?} in:\n{x}");
        }
        assert!(!x.contains("enable='no'"), "{x}");
        d.down().unwrap();
        assert!(d.conn().list_all_networks(0).unwrap().is_empty());
    }

    #[test]
    fn an_existing_pool_elsewhere_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (spec, d) = test_driver(dir.path(), &dir.path().join("x.iso"));
        d.conn()
            .define_storage_pool_xml(
                &format!(
                    "<pool type='dir'><name>{}</name><target><path>/somewhere/else</path></target></pool>",
                    spec.pool_name
                ),
                0,
            )
            .unwrap();
        let e = format!("{:#}", d.up().unwrap_err());
        assert!(e.contains("already exists with another directory"), "{e}");
        // Not ours: down leaves it.
        d.down().unwrap();
        assert!(
            d.conn()
                .lookup_storage_pool_by_name(&spec.pool_name)
                .is_ok()
        );
    }

    #[test]
    fn up_fails_clearly_without_the_iso() {
        let dir = tempfile::tempdir().unwrap();
        let (_, d) = test_driver(dir.path(), &dir.path().join("nope.iso"));
        let e = format!("{:#}", d.up().unwrap_err());
        assert!(
            e.contains("opening the live ISO") && e.contains("nope.iso"),
            "{e}"
        );
        // Nothing half-created that down would not clean.
        d.down().unwrap();
        assert!(d.conn().list_all_storage_pools(0).unwrap().is_empty());
    }
}

// ------------------------------------------------------------ CLI

#[test]
fn render_libvirt_prints_every_object() {
    let dir = tempfile::tempdir().unwrap();
    let (f, _) = load(
        dir.path(),
        &cluster_yaml(dir.path(), "qemu:///system", &dir.path().join("x.iso"), ""),
    );
    let (code, out, err) = run(
        BIN,
        &["render", "--cluster", f.to_str().unwrap(), "libvirt"],
    );
    assert_eq!(code, 0, "{err}");
    for needle in [
        "<pool type='dir'>",
        "<dns enable='no'/>",
        "<name>test-master-2.qcow2</name>",
        "<name>test-worker-0</name>",
        "<on_reboot>destroy</on_reboot>",
        "<on_reboot>restart</on_reboot>",
        "coreos.inst.ignition_url=http://127.0.20.1:18080/ignition/worker.ign",
    ] {
        assert!(out.contains(needle), "missing {needle:?}:\n{out}");
    }
}

#[cfg(feature = "libvirt")]
#[test]
fn vm_commands_run_against_the_test_driver() {
    require_tools!("xorriso");
    let dir = tempfile::tempdir().unwrap();
    let iso = make_iso(dir.path(), "rhcos-cli", true);
    let (f, plan) = load(
        dir.path(),
        &cluster_yaml(dir.path(), &test_uri(dir.path()), &iso, ""),
    );
    let f = f.to_str().unwrap();
    let (code, out, err) = run(BIN, &["vm", "--cluster", f, "up"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("started test-master-0 from the live ISO kernel"),
        "{out}"
    );
    assert!(dir.path().join("images/test-live-rootfs.img").is_file());
    // Each process gets fresh test-driver state from node.xml: status shows absent.
    let (code, out, err) = run(BIN, &["vm", "--cluster", f, "status"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("NODE") && out.contains("master-0"), "{out}");
    assert!(
        out.contains("52:54:00:14:00:0a") && out.contains("127.0.20.10"),
        "{out}"
    );
    // `vm console NODE`: the end of the serial log (the test driver writes
    // none: a line stands in for the guest's output).
    let (code, _, err) = run(BIN, &["vm", "--cluster", f, "console", "master-0"]);
    assert_ne!(code, 0);
    assert!(err.contains("test-master-0-serial.log"), "{err}");
    let (code, _, err) = run(BIN, &["vm", "--cluster", f, "console", "nope"]);
    assert!(
        code != 0 && err.contains("\"nope\" is not in the cluster file"),
        "{err}"
    );
    let (code, _, err) = run(BIN, &["vm", "--cluster", f, "console"]);
    assert!(code != 0 && err.contains("which node"), "{err}");
    let spec = Spec::new(&plan).unwrap();
    let log = &spec.node("master-0").unwrap().serial_log;
    std::fs::write(
        log,
        "BdsDxe: failed to load Boot0001\nNo bootable device.\n",
    )
    .unwrap();
    let (code, out, err) = run(BIN, &["vm", "--cluster", f, "console", "master-0"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("No bootable device.\n"), "{out}");

    let (code, out, err) = run(BIN, &["vm", "--cluster", f, "remove-bootstrap"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run(BIN, &["vm", "--cluster", f, "down"]);
    assert_eq!(code, 0, "{out}{err}");
    // Files `up` extracted are ours by name and removed.
    assert!(out.contains("test-live-rootfs.img"), "{out}");
    assert!(!dir.path().join("images/test-live-rootfs.img").exists());
}

#[cfg(feature = "libvirt")]
#[test]
fn vm_up_works_on_the_demo_config() {
    require_tools!("xorriso");
    let dir = tempfile::tempdir().unwrap();
    let iso = make_iso(dir.path(), "rhcos-demo", true);
    let demo =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/demo.yaml"))
            .unwrap();
    let d = dir.path().display();
    let text = demo
        .replace(
            "iso: /tmp/crc-appliance-demo/rhcos-live.x86_64.iso",
            &format!("iso: {}", iso.display()),
        )
        .replace(
            "path: /tmp/crc-appliance-demo/pool",
            &format!("path: {d}/pool"),
        )
        .replace(
            "imagesDir: ../assets/demo/images",
            &format!("imagesDir: {d}/images"),
        )
        .replace(
            "ignitionDir: ../assets/demo/ignition",
            &format!("ignitionDir: {d}/ign"),
        )
        .replace(
            "/tmp/crc-appliance-demo/leases.json",
            &format!("{d}/leases.json"),
        );
    assert!(
        text.contains("uri: test:///default"),
        "demo uses the test driver"
    );
    assert!(
        text.contains(&format!("iso: {}", iso.display())),
        "the demo's iso line was rewritten"
    );
    let f = dir.path().join("demo.yaml");
    std::fs::write(&f, text).unwrap();
    let (code, out, err) = run(BIN, &["vm", "--cluster", f.to_str().unwrap(), "up"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("started demo-worker-1 from the live ISO kernel"),
        "{out}"
    );
    let (code, _, err) = run(BIN, &["vm", "--cluster", f.to_str().unwrap(), "down"]);
    assert_eq!(code, 0, "{err}");
}

#[cfg(feature = "libvirt")]
#[test]
fn serve_with_start_on_serve_brings_the_vms_up() {
    use crc_appliance::drivers::libvirt::status::{VmPhase, VmState};
    require_tools!("xorriso");
    let (_aux, app) = start_on_serve_appliance("rhcos-serve");
    app.wait_log(
        "started test-worker-0 from the live ISO kernel",
        std::time::Duration::from_secs(30),
    );
    let mut vms = None;
    common::wait_until(
        "libvirt status with 5 running installs",
        std::time::Duration::from_secs(30),
        || {
            vms = app.status().libvirt;
            vms.as_ref().is_some_and(|l| {
                l.nodes.len() == 5
                    && l.nodes
                        .iter()
                        .all(|n| n.state == VmState::Running && n.phase == VmPhase::Install)
            })
        },
    );
    let vms = vms.expect("a libvirt section");
    assert!(vms.network.contains("active"), "{vms:?}");
    assert!(app.dir.path().join("images/test-live-rootfs.img").is_file());
}

/// A stopped install VM that no installer shut down (here: defined shut
/// off with reason `unknown` in the test hypervisor's initial state) is no
/// finished install: `serve` installs it again and shows why in `/status`,
/// `status --cluster F` and, in red, on the status page.
#[cfg(feature = "libvirt")]
#[test]
fn serve_installs_a_stopped_install_again_and_shows_why() {
    use crc_appliance::drivers::libvirt::status::{VmPhase, VmState};
    use crc_appliance::serve::status::StatusDoc;
    use crc_appliance::timeline::status::ClusterPhase;
    require_tools!("xorriso");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let iso = make_iso(d, "rhcos-again", true);
    let admin = format!("127.0.0.1:{}", common::free_port());
    let yaml = cluster_yaml(
        d,
        &test_uri(d),
        &iso,
        &format!("admin:\n  listen: {admin}\n"),
    )
    .replace("  resources:\n", "  startOnServe: true\n  resources:\n")
    .replace(
        "http:\n  listen: 127.0.20.1:18080\n",
        "http:\n  enabled: false\n  listen: 127.0.20.1:18080\n",
    );
    let (f, plan) = load(d, &yaml);
    let spec = Spec::new(&plan).unwrap();
    let m0 = spec.node("master-0").unwrap();
    let dom = xml::final_domain_xml(&spec, m0, Phase::Installing)
        .replacen(
            "<domain type=",
            "<domain xmlns:test='http://libvirt.org/schemas/domain/test/1.0' type=",
            1,
        )
        .replacen(
            "</domain>",
            "  <test:runstate>5</test:runstate>\n</domain>",
            1,
        );
    std::fs::write(d.join("node.xml"), format!("<node>\n{dom}</node>\n")).unwrap();

    let app = common::inproc::InProc::start_path(&f);
    app.wait_log(
        "install VM stopped (unknown), not shut down by the installer; installing again domain=test-master-0",
        std::time::Duration::from_secs(30),
    );
    let mut v: Option<StatusDoc> = None;
    common::wait_until(
        "master-0's error in the timeline",
        std::time::Duration::from_secs(20),
        || {
            v = Some(app.status());
            v.as_ref()
                .and_then(|d| d.timeline.as_ref()?.nodes.get(1)?.errors.first().cloned())
                .is_some_and(|e| e.contains("(unknown)"))
        },
    );
    let v = v.expect("a status document");
    let tl = v.timeline.as_ref().expect("a timeline");
    let m0 = &tl.nodes[1];
    assert_eq!(m0.node, "master-0", "{v:?}");
    assert_eq!(m0.install_finished, None, "{v:?}");
    assert_eq!(tl.phase, ClusterPhase::Provisioning, "{v:?}");
    let vm = &v.libvirt.as_ref().expect("a libvirt section").nodes[1];
    assert_eq!(
        (vm.state, vm.phase),
        (VmState::Running, VmPhase::Install),
        "installs again: {v:?}"
    );

    let (code, out, err) = run(BIN, &["status", "--cluster", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("master-0"))
        .unwrap_or_default();
    assert!(row.contains("not shut down by the installer"), "{out}");

    if common::have("chromium") {
        let dom = common::chromium(&format!("http://{admin}/"), &["--dump-dom"]);
        let at = dom.find("data-node=\"master-0\"").expect("master-0 row");
        let row = &dom[at..at + dom[at..].find("</tr>").unwrap()];
        assert!(
            row.contains("class=\"err\">install VM stopped (unknown)"),
            "error not in red in master-0's row: {row}"
        );
    } else {
        skipped!("SKIPPED status page part: chromium is not installed");
    }
}

// ------------------------------------------------------- helper process

/// The helper next to the binary under test (cargo builds both).
#[cfg(feature = "libvirt")]
fn helper_bin() -> PathBuf {
    Path::new(BIN).with_file_name("crc-appliance-libvirt")
}

/// `(pid N)` of the `libvirt helper ... started (pid N)` log line.
#[cfg(feature = "libvirt")]
fn helper_pid(app: &impl common::Served) -> u32 {
    let started = |l: &str| l.contains("libvirt helper ") && l.contains("started (pid ");
    common::wait_until(
        "the helper's start line",
        std::time::Duration::from_secs(30),
        || app.log().lines().any(started),
    );
    let log = app.log();
    let line = log.lines().find(|l| started(l)).unwrap();
    let rest = &line[line.find("(pid ").unwrap() + 5..];
    rest[..rest.find(')').unwrap()].parse().unwrap()
}

/// Whether `pid` is gone (or a zombie nobody reaped yet).
#[cfg(feature = "libvirt")]
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// The cluster file of a serve that starts the VMs (`{dir}`: its temp
/// dir), its ISO and test hypervisor in the returned temp dir.
#[cfg(feature = "libvirt")]
fn start_on_serve_yaml(volid: &str) -> (tempfile::TempDir, String) {
    let aux = tempfile::tempdir().unwrap();
    let iso = make_iso(aux.path(), volid, true);
    let yaml = cluster_yaml(
        Path::new("{dir}"),
        &test_uri(aux.path()),
        &iso,
        "admin:\n  listen: 127.0.0.1:0\n",
    )
    .replace("  resources:\n", "  startOnServe: true\n  resources:\n")
    .replace(
        "http:\n  listen: 127.0.20.1:18080\n",
        "http:\n  enabled: false\n  listen: 127.0.20.1:18080\n",
    );
    (aux, yaml)
}

/// A serve that starts the VMs, in this process.
#[cfg(feature = "libvirt")]
fn start_on_serve_appliance(volid: &str) -> (tempfile::TempDir, common::inproc::InProc) {
    let (aux, yaml) = start_on_serve_yaml(volid);
    (aux, common::inproc::InProc::start_yaml(&yaml))
}

/// libvirt runs in the helper: `crc-appliance` itself does not link
/// libvirt.so.0 (its ~50 libraries would be resident in every serve), the
/// helper does.
#[cfg(feature = "libvirt")]
#[test]
fn only_the_helper_links_libvirt() {
    require_tools!("readelf");
    let needed = |bin: &str| {
        let (code, out, err) = run("readelf", &["-d", bin]);
        assert_eq!(code, 0, "readelf -d {bin}: {err}");
        out.lines()
            .filter(|l| l.contains("(NEEDED)"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let main = needed(BIN);
    assert!(
        main.iter().any(|l| l.contains("libc.so")),
        "readelf output not understood: {main:?}"
    );
    assert!(
        !main.iter().any(|l| l.contains("libvirt")),
        "{BIN} links libvirt: {main:?}"
    );
    let helper = helper_bin();
    let h = needed(helper.to_str().unwrap());
    assert!(h.iter().any(|l| l.contains("libvirt.so.0")), "{h:?}");
}

/// The helper killed under `serve`: serve fails and says why (a service
/// that cannot drive its VMs does not run half alive). In this process:
/// `serve` returns the error the process exits 1 with.
#[cfg(feature = "libvirt")]
#[test]
fn serve_fails_when_the_libvirt_helper_dies() {
    require_tools!("xorriso");
    let (_aux, mut app) = start_on_serve_appliance("rhcos-kill");
    let pid = helper_pid(&app);
    app.wait_log(
        "started test-worker-0 from the live ISO kernel",
        std::time::Duration::from_secs(30),
    );
    let (code, _, err) = run("kill", &["-KILL", &pid.to_string()]);
    assert_eq!(code, 0, "{err}");
    common::wait_until(
        "serve to end on its own",
        std::time::Duration::from_secs(20),
        || app.ended(),
    );
    let outcome = app.stop();
    let log = app.log();
    let err = outcome.expect_err(&format!("serve did not fail:\n{log}"));
    assert!(
        err.contains(&format!("(pid {pid}) exited unexpectedly")) && err.contains("SIGKILL"),
        "{err}\n{log}"
    );
    assert!(
        log.contains("exited unexpectedly") && log.contains("stopping"),
        "{log}"
    );
}

/// `serve` killed with SIGKILL (no cleanup runs) takes the helper with it
/// (PR_SET_PDEATHSIG in the helper). Spawned: the process is what dies.
#[cfg(feature = "libvirt")]
#[test]
fn the_libvirt_helper_dies_with_serve() {
    require_tools!("xorriso");
    let (_aux, yaml) = start_on_serve_yaml("rhcos-orphan");
    let mut app = common::Appliance::start(&yaml);
    let pid = helper_pid(&app);
    assert!(!dead(pid));
    app.stop_with("KILL");
    common::wait_until(
        "the helper to die with serve",
        std::time::Duration::from_secs(10),
        || dead(pid),
    );
}

/// An embedded serve whose helper directory has no helper fails before it
/// is ready and says where the helper was expected.
#[cfg(feature = "libvirt")]
#[test]
fn serve_without_the_helper_says_where_it_is_expected() {
    use crc_appliance::runtime::helperproc::HelperProcs;
    require_tools!("xorriso");
    let (_aux, yaml) = start_on_serve_yaml("rhcos-nohelper");
    let dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let f = dir.path().join("cluster.yaml");
    std::fs::write(&f, yaml.replace("{dir}", &dir.path().display().to_string())).unwrap();
    let helpers = HelperProcs::embedded(Some(empty.path().to_path_buf()));
    let Err((err, log)) = common::inproc::InProc::try_start_with_helpers(dir, f, helpers) else {
        panic!("serve started without its libvirt helper");
    };
    let want = format!(
        "{}/crc-appliance-libvirt is missing: libvirt support runs in crc-appliance-libvirt, installed in {}",
        empty.path().display(),
        empty.path().display()
    );
    assert!(err.contains(&want), "{err}\n{log}");
}

/// A `crc-appliance` without its helper beside it says what is missing.
#[cfg(feature = "libvirt")]
#[test]
fn vm_without_the_helper_says_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let iso = dir.path().join("rhcos.iso");
    std::fs::write(&iso, b"not read").unwrap();
    let (f, _) = load(
        dir.path(),
        &cluster_yaml(dir.path(), "test:///default", &iso, ""),
    );
    // A hard link (same file system as the build) rather than a copy: a
    // file just written may still be open in a child another test thread
    // forked meanwhile, and exec then fails with ETXTBSY.
    let bindir = tempfile::tempdir_in(Path::new(BIN).parent().unwrap()).unwrap();
    let bin = bindir.path().join("crc-appliance");
    std::fs::hard_link(BIN, &bin).unwrap();
    let (code, out, err) = run(
        bin.to_str().unwrap(),
        &["vm", "--cluster", f.to_str().unwrap(), "status"],
    );
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("crc-appliance-libvirt is missing"), "{err}");
}

/// A reload (as `POST /api/reload` or SIGHUP does) reaches the helper: a
/// node added to the file gets its VM (the helper opens a driver for the
/// new plan, serve polls it once committed).
#[cfg(feature = "libvirt")]
#[test]
fn reload_forwards_the_new_plan_to_the_helper() {
    require_tools!("xorriso");
    let (_aux, app) = start_on_serve_appliance("rhcos-reload");
    app.wait_log(
        "started test-worker-0 from the live ISO kernel",
        std::time::Duration::from_secs(30),
    );
    assert!(!app.log().contains("test-worker-1"), "{}", app.log());
    let text = std::fs::read_to_string(&app.cluster_file).unwrap();
    let w0 = "  - { name: worker-0, role: worker, mac: \"52:54:00:14:00:14\", ip: 127.0.20.20 }\n";
    assert!(text.contains(w0), "{text}");
    let text = text.replace(
        w0,
        &format!(
            "{w0}  - {{ name: worker-1, role: worker, mac: \"52:54:00:14:00:15\", ip: 127.0.20.21 }}\n"
        ),
    );
    std::fs::write(&app.cluster_file, text).unwrap();
    let st = app.reload();
    assert!(st.ok, "{st:?}\n{}", app.log());
    app.wait_log(
        "started test-worker-1 from the live ISO kernel",
        std::time::Duration::from_secs(30),
    );
}
