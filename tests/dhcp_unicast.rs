//! DHCP replies to a client that cleared the broadcast flag go by unicast
//! to its MAC and `yiaddr` (RFC 2131 §4.1), so the other hosts of the
//! segment do not see every node's name and address.
//!
//! Root + `ip netns`: the appliance runs in-process inside a server
//! namespace (`InProc::in_netns`) on a Linux bridge (`network.interface`)
//! with two ports: the node (busybox `udhcpc`, which clears the flag unless
//! given `-B`) and a bystander.
//! `tcpdump` on both ports records which frames arrived where. The bridge
//! forwards a unicast frame only to the port that learned the node's MAC,
//! so the bystander sees the replies only when they are broadcast — which
//! the second half checks with `udhcpc -B`, so the capture is known to work.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::udhcpc::{kv, udhcpc_with};
use common::{Netns, unique_name};

const NODE_MAC: &str = "52:54:00:e8:00:0a";
const NODE_IP: &str = "10.232.0.10";
const SERVER_IP: &str = "10.232.0.1";

/// The server namespace with its bridge, and the node and bystander
/// namespaces on two of its ports.
struct Segment {
    node: Netns,
    bystander: Netns,
    srv: Netns,
    bridge: String,
    node_if: String,
    bystander_if: String,
}

impl Segment {
    fn new() -> Segment {
        let base = unique_name("dhu");
        let tag = &base["dhu".len()..];
        let seg = Segment {
            srv: Netns::new(format!("{base}s")),
            node: Netns::new(format!("{base}n")),
            bystander: Netns::new(format!("{base}b")),
            bridge: format!("dub{tag}"),
            node_if: format!("dun{tag}"),
            bystander_if: format!("duy{tag}"),
        };
        seg.srv.ip(&["link", "add", &seg.bridge, "type", "bridge"]);
        seg.srv.ip(&[
            "addr",
            "add",
            &format!("{SERVER_IP}/24"),
            "dev",
            &seg.bridge,
        ]);
        seg.srv.ip(&["link", "set", &seg.bridge, "up"]);
        seg.port(&seg.node, &seg.node_if, "n");
        seg.port(&seg.bystander, &seg.bystander_if, "y");
        seg.node.ip(&["link", "set", &seg.node_if, "down"]);
        seg.node
            .ip(&["link", "set", "dev", &seg.node_if, "address", NODE_MAC]);
        seg.node.ip(&["link", "set", &seg.node_if, "up"]);
        seg
    }

    /// A veth pair: `ifname` inside `ns`, its peer a port of the bridge.
    fn port(&self, ns: &Netns, ifname: &str, tag: &str) {
        let peer = format!("{}{tag}", &self.bridge);
        common::veth(ifname, ns, &peer, &self.srv);
        self.srv.ip(&["link", "set", &peer, "master", &self.bridge]);
        self.srv.ip(&["link", "set", &peer, "up"]);
        ns.ip(&["link", "set", ifname, "up"]);
    }

    fn cluster_yaml(&self, dir: &Path) -> std::path::PathBuf {
        let text = format!(
            r#"name: lab
baseDomain: unicast.test
network:
  cidr: 10.232.0.0/24
  gateway: 10.232.0.254
  applianceIP: {SERVER_IP}
  interface: {bridge}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:e8:00:05", ip: 10.232.0.5 }}
  - {{ name: master-0, role: master, mac: "{NODE_MAC}", ip: {NODE_IP} }}
dns:
  enabled: false
dhcp:
  listen: 0.0.0.0:67
  leaseFile: "{dir}/leases.json"
loadBalancer:
  enabled: false
http:
  enabled: false
admin:
  listen: 127.0.0.1:0
"#,
            bridge = self.bridge,
            dir = dir.display()
        );
        let f = dir.join("cluster.yaml");
        std::fs::write(&f, text).unwrap();
        f
    }
}

/// `tcpdump` on `ifname` in `ns` for DHCP replies (UDP to port 68), with
/// link-level headers; stopped (and its lines returned) by [`Capture::lines`].
struct Capture {
    child: Child,
    out: std::path::PathBuf,
}

impl Capture {
    fn start(ns: &Netns, ifname: &str, out: std::path::PathBuf) -> Capture {
        let file = std::fs::File::create(&out).unwrap();
        let mut child = ns
            .cmd(&[
                "timeout",
                "120",
                "tcpdump",
                "-i",
                ifname,
                "-n",
                "-e",
                "-l",
                "-U",
                "udp and dst port 68",
            ])
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tcpdump");
        // Wait for "listening on <if>" so no frame is missed.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut line = String::new();
        while Instant::now() < deadline {
            line.clear();
            if err.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            if line.contains("listening on") {
                return Capture { child, out };
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("tcpdump did not start on {ifname}: {line}");
    }

    /// Stop tcpdump (SIGINT flushes) and return what it printed.
    fn lines(mut self) -> Vec<String> {
        // Let frames in flight arrive before stopping.
        std::thread::sleep(Duration::from_millis(500));
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Replies from the server seen in a capture, and which of them were
/// broadcast (to ff:ff:ff:ff:ff:ff, 255.255.255.255).
fn replies(lines: &[String]) -> (Vec<&String>, Vec<&String>) {
    let from_server: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(&format!("{SERVER_IP}.67 > ")))
        .collect();
    let broadcast = from_server
        .iter()
        .copied()
        .filter(|l| l.contains("ff:ff:ff:ff:ff:ff") && l.contains("255.255.255.255.68"))
        .collect();
    (from_server, broadcast)
}

#[test]
fn replies_are_unicast_to_a_client_that_cleared_the_broadcast_flag() {
    require_netns!("dhu");
    require_tools!("udhcpc", "tcpdump");
    let dir = tempfile::tempdir().unwrap();
    let seg = Segment::new();
    let cluster = seg.cluster_yaml(dir.path());
    let srv = InProc::in_netns(seg.srv.name())
        .log_filter("info,crc_appliance::services::dhcp=debug")
        .start_path(&cluster);
    srv.wait_log("packet socket", Duration::from_secs(10));

    // 1. udhcpc without -B: the broadcast flag is clear.
    let at_node = Capture::start(&seg.node, &seg.node_if, dir.path().join("node1.txt"));
    let at_bystander = Capture::start(
        &seg.bystander,
        &seg.bystander_if,
        dir.path().join("bystander1.txt"),
    );
    let env = udhcpc_with(&seg.node, &seg.node_if, dir.path(), "5", &[])
        .unwrap_or_else(|| panic!("udhcpc got no lease; server:\n{}", srv.log()));
    assert_eq!(kv(&env, "ip").as_deref(), Some(NODE_IP), "{env}");
    assert_eq!(kv(&env, "hostname").as_deref(), Some("master-0"), "{env}");
    let node_lines = at_node.lines();
    let bystander_lines = at_bystander.lines();
    let (to_node, broadcast) = replies(&node_lines);
    assert!(
        to_node.len() >= 2,
        "the node saw no OFFER and ACK: {node_lines:#?}\nserver:\n{}",
        srv.log()
    );
    assert!(
        broadcast.is_empty(),
        "replies were broadcast: {broadcast:#?}"
    );
    for l in &to_node {
        assert!(
            l.contains(&format!("> {NODE_MAC}")) && l.contains(&format!("> {NODE_IP}.68")),
            "not a unicast to the node's MAC and address: {l}"
        );
    }
    let (seen, _) = replies(&bystander_lines);
    assert!(
        seen.is_empty(),
        "the bystander saw the node's replies: {seen:#?}"
    );

    // 2. udhcpc -B asks for broadcast replies: now the bystander sees them
    // (this is what every reply looked like before unicast).
    let at_bystander = Capture::start(
        &seg.bystander,
        &seg.bystander_if,
        dir.path().join("bystander2.txt"),
    );
    let env = udhcpc_with(&seg.node, &seg.node_if, dir.path(), "5", &["-B"])
        .unwrap_or_else(|| panic!("udhcpc -B got no lease; server:\n{}", srv.log()));
    assert_eq!(kv(&env, "ip").as_deref(), Some(NODE_IP), "{env}");
    let bystander_lines = at_bystander.lines();
    let (_, broadcast) = replies(&bystander_lines);
    assert!(
        broadcast.len() >= 2,
        "with -B the bystander should see the broadcast OFFER and ACK: {bystander_lines:#?}"
    );
}
