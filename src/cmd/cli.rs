//! Command line: `serve`, `check`, `reload`, `render`, `lb`, `node`, `vm`,
//! `bmc`, `firewall`, `status`, `wait-for`, `preflight`, and `completion`,
//! `schema`, `manpage` (which read no cluster file).
//!
//! The cluster file is `--cluster FILE`, else `$CRC_APPLIANCE_CLUSTER`,
//! else `/etc/crc-appliance/cluster.yaml` (the systemd unit's) when it
//! exists ([`cluster_file`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "crc-appliance",
    version,
    about = "DNS, DHCP, load balancer, HTTP and libvirt VMs for an OpenShift 4 UPI cluster, in one process"
)]
pub struct Cli {
    /// The cluster file (YAML). Accepted anywhere on the command line:
    /// `crc-appliance --cluster F lb disable bootstrap` and
    /// `crc-appliance lb disable bootstrap --cluster F` are the same.
    /// Default: $CRC_APPLIANCE_CLUSTER, else /etc/crc-appliance/cluster.yaml.
    #[arg(long, short = 'c', value_name = "FILE", global = true)]
    pub cluster: Option<PathBuf>,
    /// Log format: `auto` is journald when stderr is the unit's journal
    /// stream (JOURNAL_STREAM), else text; `json` is one object per line.
    #[arg(long, value_enum, default_value_t, global = true)]
    pub log_format: crate::runtime::telemetry::LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parse the command line (clap exits 2 on a usage error).
    pub fn parse_args() -> Cli {
        Cli::parse()
    }
}

/// Environment variable naming the cluster file when `--cluster` is not given.
pub const CLUSTER_ENV: &str = "CRC_APPLIANCE_CLUSTER";

/// The cluster file of the packaged systemd unit (systemd/crc-appliance.service).
pub const DEFAULT_CLUSTER: &str = "/etc/crc-appliance/cluster.yaml";

/// No cluster file was named and the default does not exist (exit 2, a
/// usage error like clap's).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoClusterFile(String);

/// The cluster file: `given` (`--cluster`), else `env` (the value of
/// [`CLUSTER_ENV`], ignored when empty), else [`DEFAULT_CLUSTER`] when
/// `exists` says it does.
pub fn cluster_file(
    given: Option<PathBuf>,
    env: Option<OsString>,
    exists: impl Fn(&Path) -> bool,
) -> Result<PathBuf, NoClusterFile> {
    if let Some(f) = given {
        return Ok(f);
    }
    if let Some(f) = env.filter(|v| !v.is_empty()).map(PathBuf::from) {
        if exists(&f) {
            return Ok(f);
        }
        return Err(NoClusterFile(format!(
            "{CLUSTER_ENV} names {}, which does not exist (pass --cluster <FILE> to use another)",
            f.display()
        )));
    }
    let default = Path::new(DEFAULT_CLUSTER);
    if exists(default) {
        return Ok(default.to_path_buf());
    }
    Err(NoClusterFile(format!(
        "no cluster file: pass --cluster <FILE> or set {CLUSTER_ENV} ({DEFAULT_CLUSTER}, the default, does not exist)"
    )))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every enabled service until SIGTERM/SIGINT; SIGHUP reloads the file.
    Serve,
    /// Validate the cluster file and print a summary; exit 78 when invalid.
    Check,
    /// Ask the running `serve` to reload the cluster file (admin API); exit
    /// 0 applied, 78 invalid file, 1 not applied.
    Reload,
    /// Print what would be served.
    Render {
        what: RenderWhat,
        /// The site's resolver, for `site-dns`.
        #[arg(required_if_eq("what", "site-dns"))]
        resolver: Option<crate::host::sitedns::SiteResolver>,
        #[command(flatten)]
        login: MirrorLogin,
    },
    /// Control the running load balancer through the admin API.
    Lb {
        #[command(subcommand)]
        action: LbAction,
    },
    /// Per-node actions through the admin API (boot, network reinstall).
    Node {
        #[command(subcommand)]
        action: NodeAction,
    },
    /// Create, remove or inspect the cluster's libvirt network and VMs.
    Vm {
        action: VmAction,
        /// The node (`vm console NODE`).
        node: Option<String>,
    },
    /// Boot bare-metal nodes through their Redfish BMC (`nodes[].bmc`):
    /// virtual media with the node's ISO, boot once from CD, power.
    Bmc {
        action: BmcAction,
        /// One node (default: every node with a `bmc`).
        node: Option<String>,
        /// `status` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Host firewall openings this cluster needs (firewalld).
    Firewall {
        #[command(subcommand)]
        action: FirewallAction,
    },
    /// The install timeline of the running `serve`: the cluster phase and
    /// one row per node with the time of each step.
    Status {
        /// Print the `timeline` section of `/status` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Wait until the install reaches a goal, printing steps as they happen
    /// and "Still waiting" with the reason every 30 s of silence; exit 0
    /// when reached, 1 on timeout with what is missing.
    WaitFor {
        goal: crate::timeline::render::Goal,
        /// The node, for `node-ready`.
        #[arg(required_if_eq("goal", "node-ready"))]
        node: Option<String>,
        /// How long to wait (`90s`, `40m`, `1h`).
        #[arg(long, default_value = "40m", value_parser = crate::config::duration::parse)]
        timeout: std::time::Duration,
    },
    /// Exit 0 only when `serve` is up and every enabled service is serving
    /// (asks its admin API, bounded to under a second, changes nothing):
    /// keepalived's track script of an HA pair (`render keepalived`).
    Health,
    /// Check the host before `serve`/`vm up`: busy ports and their owners,
    /// /dev/kvm, the ISO, the pool dir, ignition files. Exit 1 on findings.
    Preflight,
    /// Print the shell completion script
    /// (`crc-appliance completion bash > /etc/bash_completion.d/crc-appliance`).
    Completion { shell: clap_complete::Shell },
    /// Print the JSON Schema of the cluster file (for editors:
    /// yaml-language-server, docs/configuration.md).
    Schema,
    /// Write the man pages (crc-appliance.1 and one per subcommand) into DIR.
    #[command(hide = true)]
    Manpage { dir: PathBuf },
}

impl Command {
    /// False for the commands that read no cluster file.
    pub fn needs_cluster(&self) -> bool {
        !matches!(
            self,
            Command::Completion { .. } | Command::Schema | Command::Manpage { .. }
        )
    }
}

#[derive(Debug, Clone, Subcommand)]
pub enum FirewallAction {
    /// Print a shell script installing a firewalld service with exactly this
    /// cluster's ports (`| sudo sh`); `--xml` prints the service XML alone.
    Print {
        #[arg(long)]
        xml: bool,
    },
    /// Install (or replace) that service with firewall-cmd and add it to
    /// the zone (libvirt's with a libvirt section, else the default zone).
    Apply,
}

/// `render mirror --user U --password-file F`.
#[derive(Debug, Clone, clap::Args)]
pub struct MirrorLogin {
    /// `mirror`: print the pull secret's `auths` entry for this user of
    /// `registry.htpasswdFile` (its password checked against it).
    #[arg(long, requires = "password_file")]
    pub user: Option<String>,
    /// `mirror`: the file holding `--user`'s password (one line).
    #[arg(long, requires = "user")]
    pub password_file: Option<std::path::PathBuf>,
}

impl MirrorLogin {
    /// The user and password file, refused for anything but `mirror`.
    pub fn of(self, what: RenderWhat) -> anyhow::Result<Option<(String, std::path::PathBuf)>> {
        let login = self.user.zip(self.password_file);
        if login.is_some() && !matches!(what, RenderWhat::Mirror) {
            anyhow::bail!("--user and --password-file are options of `render mirror`");
        }
        Ok(login)
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RenderWhat {
    /// BIND-format forward and reverse zones.
    Zone,
    /// DHCP reservations.
    Dhcp,
    /// Load balancer frontends, checks and backends.
    Lb,
    /// libvirt network, volume and domain XML.
    Libvirt,
    /// How this host's resolver reaches the cluster names (NetworkManager
    /// dnsmasq, systemd-resolved, libvirt default network).
    HostDns,
    /// The stanza that makes the site's resolver (bind, unbound, dnsmasq,
    /// windows) send the cluster zones to the appliance.
    SiteDns,
    /// MachineConfigs (master, worker) whose chrony.conf names the
    /// appliance's NTP server and keeps `sourcedir /run/chrony-dhcp`
    /// (optional: DHCP option 42 already does it).
    Chrony,
    /// keepalived.conf of this member of an HA pair (`ha:`, docs/ha.md).
    Keepalived,
    /// The CSR approver's least-privilege ServiceAccount, roles and
    /// bindings (`csr:`, docs/operations.md).
    CsrRbac,
    /// install-config fragments for the mirror registry (`registry:`,
    /// docs/registry.md): additionalTrustBundle, the pull-secret entry,
    /// imageDigestSources.
    Mirror,
}

#[derive(Debug, Clone, Subcommand)]
pub enum LbAction {
    /// Drain a node's backends (e.g. `bootstrap`): no new connections.
    Disable { node: String },
    /// Put a drained node's backends back into rotation.
    Enable { node: String },
    /// Frontends and backends as a table (state, connections, last
    /// change, last check), like HAProxy's `show stat`.
    Status {
        /// The admin API's JSON (`GET /api/lb/backends`) instead.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum NodeAction {
    /// Make the node install again at its next network boot (it boots its
    /// disk once installed).
    Reinstall { node: String },
    /// Boot the node by the route it has: its BMC (`bmc up`), its libvirt
    /// VM (`vm up`), or network boot (then it says to power it on).
    Boot { node: String },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BmcAction {
    /// Insert the node's ISO, boot once from CD and power on (idempotent;
    /// a running node without our ISO is restarted).
    Up,
    /// Power off (ForceOff) and eject.
    Down,
    /// Eject and make the next boot the disk (after the install).
    Eject,
    /// Power state, boot override and media per node.
    Status,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum VmAction {
    /// Define the network, volumes and VMs and start the install (idempotent).
    Up,
    /// Remove everything `up` created (idempotent).
    Down,
    /// Show each VM's state.
    Status,
    /// Print the end of a node's serial console log (`vm console NODE`).
    Console,
    /// Destroy and remove the bootstrap VM and its disk.
    RemoveBootstrap,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    #[test]
    fn cluster_file_prefers_the_flag_then_the_environment_then_the_default() {
        let all = |_: &Path| true;
        let none = |_: &Path| false;
        let flag = Some(PathBuf::from("/f.yaml"));
        let env = || Some(OsString::from("/e.yaml"));
        assert_eq!(
            cluster_file(flag, env(), none).unwrap(),
            Path::new("/f.yaml")
        );
        assert_eq!(
            cluster_file(None, env(), all).unwrap(),
            Path::new("/e.yaml")
        );
        assert_eq!(
            cluster_file(None, Some(OsString::new()), all).unwrap(),
            Path::new(DEFAULT_CLUSTER)
        );
        let e = cluster_file(None, env(), |p: &Path| p == Path::new(DEFAULT_CLUSTER));
        assert!(
            e.unwrap_err()
                .0
                .contains("CRC_APPLIANCE_CLUSTER names /e.yaml")
        );
        let e = cluster_file(None, None, none).unwrap_err().0;
        assert!(
            e.contains("--cluster <FILE>")
                && e.contains(CLUSTER_ENV)
                && e.contains(DEFAULT_CLUSTER),
            "{e}"
        );
    }
}
