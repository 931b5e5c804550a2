//! Command line: `serve`, `check`, `reload`, `render`, `lb`, `vm`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "crc-appliance",
    version,
    about = "DNS, DHCP, load balancer, HTTP and libvirt VMs for an OpenShift 4 UPI cluster, in one process"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone)]
pub struct ClusterArg {
    /// The cluster file (YAML).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub cluster: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every enabled service until SIGTERM/SIGINT; SIGHUP reloads the file.
    Serve(ClusterArg),
    /// Validate the cluster file and print a summary; exit 78 when invalid.
    Check(ClusterArg),
    /// Ask the running `serve` to reload the cluster file (admin API); exit
    /// 0 applied, 78 invalid file, 1 not applied.
    Reload(ClusterArg),
    /// Print what would be served.
    Render {
        #[command(flatten)]
        cluster: ClusterArg,
        what: RenderWhat,
    },
    /// Control the running load balancer through the admin API.
    Lb {
        #[command(flatten)]
        cluster: ClusterArg,
        #[command(subcommand)]
        action: LbAction,
    },
    /// Create, remove or inspect the cluster's libvirt network and VMs.
    Vm {
        #[command(flatten)]
        cluster: ClusterArg,
        action: VmAction,
    },
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
}

#[derive(Debug, Clone, Subcommand)]
pub enum LbAction {
    /// Drain a node's backends (e.g. `bootstrap`): no new connections.
    Disable { node: String },
    /// Put a drained node's backends back into rotation.
    Enable { node: String },
    /// Print backend health as JSON.
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
}
