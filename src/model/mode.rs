//! The install mode a cluster file describes: the usual install with a
//! bootstrap node (multi-node, or compact: three masters that also run
//! ingress), or single-node OpenShift installed by bootstrap-in-place.
//!
//! Single-node is recognised from the inventory and one file: exactly one
//! master, no bootstrap node, and `bootstrap-in-place-for-live-iso.ign`
//! (what `openshift-install create single-node-ignition-config` writes) in
//! `http.ignitionDir`. Workers may be listed too (workers added to an
//! installed single-node cluster, OpenShift 4.11 and later).
//!
//! Invariants: pure (the file's presence is an input); a contradiction (the
//! file with a bootstrap node or several masters) is a [`Contradiction`]
//! with the fix, never a guess.

use serde::Serialize;

/// The bootstrap-in-place Ignition file's name in `http.ignitionDir`.
pub const BIP_IGNITION: &str = "bootstrap-in-place-for-live-iso.ign";

/// How the cluster installs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstallMode {
    /// A bootstrap node brings up the control plane (multi-node, compact).
    #[default]
    Bootstrap,
    /// One master boots the live system with the bootstrap-in-place
    /// Ignition, bootstraps itself, writes its disk and reboots.
    SingleNode,
}

impl InstallMode {
    pub fn is_single_node(self) -> bool {
        self == InstallMode::SingleNode
    }
}

/// The inventory's shape: how many nodes of each role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub bootstrap: usize,
    pub masters: usize,
    pub workers: usize,
}

impl Shape {
    /// One master and no bootstrap node: single-node's inventory.
    pub fn is_single_master(&self) -> bool {
        self.masters == 1 && self.bootstrap == 0
    }
}

/// An inventory and the bootstrap-in-place file that contradict each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contradiction {
    pub problem: String,
    pub fix: String,
}

/// The mode of `shape` given whether the bootstrap-in-place file exists,
/// or what contradicts.
pub fn detect(shape: Shape, bip_file: bool) -> Result<InstallMode, Contradiction> {
    if !bip_file {
        return Ok(InstallMode::Bootstrap);
    }
    if shape.bootstrap > 0 {
        return Err(Contradiction {
            problem: format!(
                "{BIP_IGNITION} is in http.ignitionDir (single-node, bootstrap-in-place) but the inventory has a bootstrap node"
            ),
            fix: format!(
                "for single-node remove the bootstrap node (the master bootstraps itself); for a multi-node install remove {BIP_IGNITION} and use `openshift-install create ignition-configs`"
            ),
        });
    }
    if shape.masters != 1 {
        return Err(Contradiction {
            problem: format!(
                "{BIP_IGNITION} is in http.ignitionDir (single-node) but the inventory has {} masters",
                shape.masters
            ),
            fix: format!(
                "single-node has exactly one master; for {} masters add a bootstrap node, remove {BIP_IGNITION} and use `openshift-install create ignition-configs`",
                shape.masters
            ),
        });
    }
    Ok(InstallMode::SingleNode)
}

/// Why a single-master inventory without the bootstrap-in-place file
/// cannot install (for `check`), `None` when it can.
pub fn missing_bip(shape: Shape, bip_file: bool, ignition_dir: &str) -> Option<Contradiction> {
    (shape.is_single_master() && shape.workers == 0 && !bip_file).then(|| Contradiction {
        problem: format!(
            "one master and no bootstrap node is single-node OpenShift, but {ignition_dir}/{BIP_IGNITION} does not exist"
        ),
        fix: format!(
            "run `openshift-install create single-node-ignition-config --dir <dir>` (install-config.yaml: controlPlane.replicas 1, compute replicas 0, bootstrapInPlace.installationDisk) and copy <dir>/{BIP_IGNITION} to {ignition_dir}; or add a bootstrap node for a bootstrap install"
        ),
    })
}

/// One line for `check` and `status`: which install this is.
pub fn describe(mode: InstallMode, shape: Shape) -> String {
    match mode {
        InstallMode::SingleNode if shape.workers > 0 => format!(
            "single-node (bootstrap-in-place) with {} worker(s) added",
            shape.workers
        ),
        InstallMode::SingleNode => "single-node (bootstrap-in-place)".into(),
        InstallMode::Bootstrap if shape.workers == 0 => format!(
            "compact: {} master(s) also run ingress, {} bootstrap",
            shape.masters, shape.bootstrap
        ),
        InstallMode::Bootstrap => format!(
            "multi-node: {} bootstrap, {} master(s), {} worker(s)",
            shape.bootstrap, shape.masters, shape.workers
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(bootstrap: usize, masters: usize, workers: usize) -> Shape {
        Shape {
            bootstrap,
            masters,
            workers,
        }
    }

    #[test]
    fn single_node_needs_the_file_and_one_master_without_bootstrap() {
        assert_eq!(detect(shape(0, 1, 0), true), Ok(InstallMode::SingleNode));
        assert_eq!(detect(shape(0, 1, 2), true), Ok(InstallMode::SingleNode));
        assert_eq!(detect(shape(0, 1, 0), false), Ok(InstallMode::Bootstrap));
        assert_eq!(detect(shape(1, 3, 0), false), Ok(InstallMode::Bootstrap));
        let e = detect(shape(1, 1, 0), true).unwrap_err();
        assert!(e.problem.contains("bootstrap node"), "{e:?}");
        assert!(e.fix.contains("remove the bootstrap node"), "{e:?}");
        let e = detect(shape(0, 3, 0), true).unwrap_err();
        assert!(e.problem.contains("3 masters"), "{e:?}");
    }

    #[test]
    fn a_lone_master_without_the_file_is_refused_with_the_command() {
        let e = missing_bip(shape(0, 1, 0), false, "/ign").unwrap();
        assert!(
            e.problem
                .contains("/ign/bootstrap-in-place-for-live-iso.ign")
        );
        assert!(e.fix.contains("create single-node-ignition-config"));
        assert!(missing_bip(shape(0, 1, 0), true, "/ign").is_none());
        assert!(missing_bip(shape(1, 1, 0), false, "/ign").is_none());
        assert!(missing_bip(shape(0, 1, 1), false, "/ign").is_none());
    }

    #[test]
    fn described() {
        assert!(describe(InstallMode::SingleNode, shape(0, 1, 0)).starts_with("single-node"));
        assert!(describe(InstallMode::Bootstrap, shape(1, 3, 0)).starts_with("compact"));
        assert!(describe(InstallMode::Bootstrap, shape(1, 3, 2)).starts_with("multi-node"));
    }
}
