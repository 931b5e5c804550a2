//! The network-boot install state: which node installed, kept in memory and
//! persisted by a background writer next to the DHCP lease file as
//! `<cluster>-netboot.json` (see [`super::netboot`] for what the states
//! mean).
//!
//! Role: the state decides between the install script, the disk-or-install
//! script and `exit` (boot the disk). A node is installed only on evidence
//! ([`BootState::image_downloaded`], [`BootState::system_booted`]); an
//! ignition fetch alone never sends a node to `exit`, since a failed install
//! leaves a blank disk. Serving the install script to an installed node
//! wipes its disk, so every failure of the file here must end in `exit`,
//! never in an install:
//!
//! - **Writes** happen off the request path: a change bumps a counter and
//!   wakes [`BootState::run_writer`] (a task of the HTTP service), which
//!   writes a snapshot (temp file, fsync, rename, fsync of the directory)
//!   and, while writes fail (a full disk), tries again every [`RETRY`]
//!   until one works, as the DHCP lease writer does. A failed attempt
//!   removes its temp file. Meanwhile the memory is the truth: a node that
//!   fetched its ignition still gets `exit`; `/status` → `http.netbootState`
//!   says `durable: false` and the log says so (first failure, then every
//!   [`RELOG`]). Shutdown tries one last write.
//! - **Reads** happen once, at start. A missing file is an empty state. A
//!   file that cannot be read or parsed is never taken as empty: nobody
//!   knows which node installed, so every node of the cluster is taken as
//!   installed (`assumed`), boots its disk, and only `crc-appliance node
//!   reinstall NAME` sends one to the installer again. A corrupt file is
//!   kept as `<file>.corrupt`; the assumed state is written in its place,
//!   so a restart keeps the same safe answer.
//!
//! Invariants: `written <= changes`; the state is durable exactly when they
//! are equal (every change is on disk); no temp file outlives an attempt.
//! The lock is a std `Mutex` held for field updates only, never across an
//! `.await` or a file operation.
//!
//! Parts: this file holds the state and its transitions; `file.rs` the
//! file (its form, the atomic write, the read at start, the writer task);
//! `report.rs` the `/status` rows and the metrics.

mod file;
mod report;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tracing::{error, info};

use crate::model::cluster::Cluster;
use crate::runtime::ha::HaView;
use crate::runtime::sync::LockExt as _;
pub(super) use file::write_file;
use file::{Loaded, read_state, tmp_of};

/// Wait between write attempts while writes fail.
pub(super) const RETRY: Duration = Duration::from_secs(1);
/// How often a write that keeps failing is logged again.
pub(super) const RELOG: Duration = Duration::from_secs(60);

use crate::runtime::clock::unix_now as now;

fn is_false(b: &bool) -> bool {
    !*b
}

/// One node's install progress, as persisted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeBoot {
    /// Unix time the install script was last served.
    pub install_script_at: Option<u64>,
    /// Unix time the node last fetched its ignition from its own address.
    pub ignition_at: Option<u64>,
    /// Unix time the node was found installed; then it boots its disk.
    pub installed_at: Option<u64>,
    /// Unix time the node, after its ignition fetch, completed the
    /// download of the image it installs (`coreos.inst.image_url` on the
    /// appliance): the install finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_finished_at: Option<u64>,
    /// Unix time the installed system first contacted the appliance (its
    /// machine-config fetch through 22623) after the ignition fetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub booted_at: Option<u64>,
    /// Taken as installed because the state file was unreadable.
    #[serde(default, skip_serializing_if = "is_false")]
    pub assumed: bool,
    /// The node fetched its ignition since its last install script (the
    /// current install attempt); times alone are seconds, too coarse.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignition_in_attempt: bool,
    /// Revision of this entry, a Lamport counter: every change sets it to
    /// one more than the highest revision this member has seen (its own
    /// and the peer's); the newer `(rev, revBy)` wins when the members of
    /// an HA pair merge their states ([`BootState::merge`]). Files of
    /// earlier versions hold wall-clock milliseconds here: they load as
    /// they are and the counter goes on from them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rev: u64,
    /// The member that made revision `rev` (`runtime::ha::HaView::member_id`, its
    /// own IPv4 address; 0 without HA): breaks ties between equal
    /// revisions the same way on both members.
    #[serde(default, rename = "revBy", skip_serializing_if = "is_zero32")]
    pub rev_by: u32,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero32(v: &u32) -> bool {
    *v == 0
}

/// How far ahead of `max(our highest revision, now in ms)` a peer's
/// revision may be (one day of milliseconds: revisions of earlier
/// versions were wall-clock milliseconds). A revision beyond it (a forged
/// or broken document) is refused, so a revision never gets near
/// `u64::MAX` and a later change always wins.
pub(super) const REV_AHEAD: u64 = 24 * 3600 * 1000;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What a node's script says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// Install: kernel, initrd and the install kargs.
    Install,
    /// The node fetched its ignition, but no evidence says its install
    /// finished: boot the local disk if it boots (BIOS `sanboot`), else
    /// install (UEFI: always install). Never `exit` onto a blank disk.
    DiskOrInstall,
    /// Installed on evidence: `exit`, the firmware boots the disk.
    LocalBoot,
}

/// How the state file is written: the real [`write_file`], or a failing
/// one in unit tests.
pub(super) type SaveFn = Arc<dyn Fn(&Path, &[u8]) -> std::io::Result<()> + Send + Sync>;

struct Inner {
    nodes: BTreeMap<String, NodeBoot>,
    /// Changes made so far; each one bumps it.
    changes: u64,
    /// The value of `changes` the file on disk reflects.
    written: u64,
    /// The last attempt's error, while writes fail.
    write_error: Option<String>,
    /// Why the file could not be read at start.
    load_error: Option<String>,
    writes: u64,
    write_failures: u64,
    /// The Lamport clock: the highest revision seen (own and the peer's).
    clock: u64,
    /// Whose revisions these are (the HA member id; 0 for a single one).
    member: HaView,
}

impl Inner {
    fn changed(&mut self) {
        self.changes += 1;
    }

    /// `node`'s entry changed here: its revision becomes the next one.
    fn bump(&mut self, node: &str) {
        self.clock = self.clock.saturating_add(1);
        if let Some(e) = self.nodes.get_mut(node) {
            (e.rev, e.rev_by) = (self.clock, self.member.member_id());
        }
        self.changed();
    }

    /// The highest revision a peer's entry may have.
    fn rev_bound(&self) -> u64 {
        self.clock.max(now_ms()).saturating_add(REV_AHEAD)
    }

    fn durable(&self) -> bool {
        self.written >= self.changes
    }
}

/// The per-node install state, its file and its writer.
pub struct BootState {
    path: PathBuf,
    inner: Mutex<Inner>,
    wake: Notify,
    save: SaveFn,
}

/// The node fetched its ignition after its last install script.
fn ignition_in_attempt(e: &NodeBoot) -> bool {
    e.install_script_at.is_some() && e.ignition_in_attempt
}

/// The script a node's state calls for: its disk once installed on
/// evidence; after an ignition fetch without that evidence its disk if
/// bootable, else the installer; otherwise the installer.
fn decide(e: &NodeBoot) -> Script {
    if e.installed_at.is_some() {
        Script::LocalBoot
    } else if ignition_in_attempt(e) {
        Script::DiskOrInstall
    } else {
        Script::Install
    }
}

impl BootState {
    /// The state file of `c` (next to its lease file).
    pub fn path_of(c: &Cluster) -> PathBuf {
        let dir = c
            .dhcp
            .lease_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        dir.join(format!("{}-netboot.json", c.name))
    }

    /// The state of `c`, read from its file; its revisions are `ha`'s.
    pub fn open(c: &Cluster, ha: &HaView) -> BootState {
        let names: Vec<String> = c.nodes.iter().map(|n| n.name.clone()).collect();
        let state = BootState::load(BootState::path_of(c), &names, Arc::new(write_file));
        state.inner().member = ha.clone();
        state
    }

    /// Read `path` (see the module doc for an unreadable file: every one
    /// of `nodes` is taken as installed); `save` writes it from now on.
    pub fn load(path: PathBuf, nodes: &[String], save: SaveFn) -> BootState {
        // A temp file left by a kill during a write is garbage.
        let _ = std::fs::remove_file(tmp_of(&path));
        let mut inner = Inner {
            nodes: BTreeMap::new(),
            changes: 0,
            written: 0,
            write_error: None,
            load_error: None,
            writes: 0,
            write_failures: 0,
            clock: 0,
            member: HaView::single(),
        };
        match read_state(&path) {
            Loaded::Nodes(n) => {
                inner.nodes = n;
                // A revision beyond the bound (a forged document taken by
                // an earlier version) would win over every later change.
                let bound = inner.rev_bound();
                for (node, e) in &mut inner.nodes {
                    if e.rev > bound {
                        error!(
                            "netboot state {}: {node}'s revision {} is far in the future; reset to now",
                            path.display(),
                            e.rev
                        );
                        e.rev = now_ms();
                        inner.changes += 1;
                    }
                }
            }
            Loaded::Missing => {}
            Loaded::Unreadable(why) => {
                error!(
                    "netboot state {} is unreadable: {why}; which node installed is unknown, so \
                     every node is taken as installed and boots its disk (never the install \
                     script); `crc-appliance node reinstall NAME` installs one again",
                    path.display()
                );
                let at = Some(now());
                for name in nodes {
                    inner.nodes.insert(
                        name.clone(),
                        NodeBoot {
                            installed_at: at,
                            assumed: true,
                            // The lowest revision: any state the HA peer
                            // really saw wins over this guess.
                            rev: 1,
                            ..NodeBoot::default()
                        },
                    );
                }
                inner.load_error = Some(why);
                // Write the safe state in place of the unreadable one.
                inner.changed();
            }
        }
        BootState {
            path,
            inner: Mutex::new({
                inner.clock = inner.nodes.values().map(|e| e.rev).max().unwrap_or(0);
                inner
            }),
            wake: Notify::new(),
            save,
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    /// Decide `node`'s script for a fetch from the node's own address, and
    /// record it (a new install attempt unless it boots its disk).
    pub fn script_for(&self, node: &str) -> Script {
        let script = {
            let mut st = self.inner();
            let e = st.nodes.entry(node.to_string()).or_default();
            let script = decide(e);
            if script == Script::LocalBoot {
                return script;
            }
            if script == Script::DiskOrInstall {
                info!(
                    "netboot: {node} fetched its ignition and booted again, but its install end \
                     was not seen (no complete image download, no contact from the installed \
                     system): boot its disk if it boots, else install again"
                );
            }
            e.install_script_at = Some(now());
            e.ignition_in_attempt = false;
            st.bump(node);
            script
        };
        self.wake.notify_one();
        script
    }

    /// What `node`'s script would be now, changing nothing: for fetches
    /// from anyone but the node (the operator).
    pub fn peek(&self, node: &str) -> Script {
        let st = self.inner();
        st.nodes.get(node).map_or(Script::Install, decide)
    }

    /// `node` fetched its ignition from its own address.
    pub fn ignition_fetched(&self, node: &str) {
        {
            let mut st = self.inner();
            let e = st.nodes.entry(node.to_string()).or_default();
            e.ignition_at = Some(now());
            e.ignition_in_attempt = true;
            st.bump(node);
        }
        self.wake.notify_one();
    }

    /// `node` completed, from its own address, the download of the image it
    /// installs. Evidence that the install finished when it follows the
    /// ignition fetch of the current attempt (coreos-installer fetches the
    /// ignition first, then writes the image). True when this made the node
    /// installed.
    pub fn image_downloaded(&self, node: &str) -> bool {
        let done = {
            let mut st = self.inner();
            let Some(e) = st.nodes.get_mut(node) else {
                return false;
            };
            if e.installed_at.is_some() || !ignition_in_attempt(e) {
                return false;
            }
            let at = now();
            (e.install_finished_at, e.installed_at) = (Some(at), Some(at));
            st.bump(node);
            true
        };
        self.wake.notify_one();
        info!(
            "netboot: {node} downloaded its install image after its ignition: installed; it boots its disk from now on"
        );
        done
    }

    /// The single-node master `node` fetched its bootstrap-in-place config
    /// from its own address: no installer runs and no image is downloaded
    /// (the live system writes the disk itself at the end of bootstrap and
    /// reboots into it), so this is the install end as far as network
    /// boot is concerned: from now on its script boots the disk.
    pub fn bootstrap_in_place(&self, node: &str) {
        {
            let mut st = self.inner();
            let Some(e) = st.nodes.get_mut(node) else {
                return;
            };
            if e.installed_at.is_some() {
                return;
            }
            let at = now();
            (e.install_finished_at, e.installed_at) = (Some(at), Some(at));
            st.bump(node);
        }
        self.wake.notify_one();
        info!(
            "netboot: {node} (single-node) fetched its bootstrap-in-place config: it writes its disk and reboots into it; it boots its disk from now on"
        );
    }

    /// The installed system of `node` contacted the appliance at `at` (its
    /// machine-config connection). Evidence of an installed system when it
    /// follows the node's ignition fetch. True when this made the node
    /// installed.
    pub fn system_booted(&self, node: &str, at: u64) -> bool {
        let newly = {
            let mut st = self.inner();
            let Some(e) = st.nodes.get_mut(node) else {
                return false;
            };
            if e.booted_at.is_some() || e.ignition_at.is_none_or(|i| at < i) {
                return false;
            }
            e.booted_at = Some(at);
            let newly = e.installed_at.is_none();
            if newly {
                e.installed_at = Some(at);
            }
            st.bump(node);
            newly
        };
        self.wake.notify_one();
        if newly {
            info!(
                "netboot: {node}'s installed system booted (machine-config contact): installed; it boots its disk from now on"
            );
        }
        newly
    }

    /// Forget that `node` installed: its next network boot installs again.
    pub fn reinstall(&self, node: &str) {
        {
            let mut st = self.inner();
            // A blank entry (the same script as none) with a newer
            // revision, so that the peer of an HA pair forgets it too.
            st.nodes.insert(node.to_string(), NodeBoot::default());
            st.bump(node);
        }
        self.wake.notify_one();
        info!("netboot: {node} will install again at its next network boot");
    }

    /// Every node's entry, and the change counter they reflect (for the HA
    /// peer: a new counter means something changed).
    /// The change counter alone (what [`BootState::snapshot`] starts with).
    pub fn changes(&self) -> u64 {
        self.inner().changes
    }

    pub fn snapshot(&self) -> (u64, BTreeMap<String, NodeBoot>) {
        let st = self.inner();
        (st.changes, st.nodes.clone())
    }

    /// The HA peer's entries this state may take: those of `known` nodes
    /// whose revision is not beyond [`REV_AHEAD`] (the others are noted in
    /// `skipped`). Changes nothing.
    pub fn check_peer(
        &self,
        peer: BTreeMap<String, NodeBoot>,
        known: &[String],
        skipped: &mut crate::runtime::control::Skipped,
    ) -> BTreeMap<String, NodeBoot> {
        let bound = self.inner().rev_bound();
        peer.into_iter()
            .filter(|(node, theirs)| {
                if !known.contains(node) {
                    skipped.note(|| "netboot: an entry for a node not in the cluster file".into());
                    false
                } else if theirs.rev > bound {
                    skipped.note(|| {
                        format!(
                            "netboot: {node}'s revision {} is more than a day ahead of ours",
                            theirs.rev
                        )
                    });
                    false
                } else {
                    true
                }
            })
            .collect()
    }

    /// Take the HA peer's entries that are newer (higher `(rev, revBy)`)
    /// than ours, for the nodes of `known` and revisions within
    /// [`REV_AHEAD`]; how many were taken. The writer persists them like
    /// any change.
    pub fn merge(&self, peer: BTreeMap<String, NodeBoot>, known: &[String]) -> usize {
        let mut taken = 0;
        {
            let mut st = self.inner();
            let bound = st.rev_bound();
            for (node, theirs) in peer {
                if !known.contains(&node) || theirs.rev > bound {
                    continue;
                }
                let ours = st.nodes.get(&node).map_or((0, 0), |e| (e.rev, e.rev_by));
                if (theirs.rev, theirs.rev_by) > ours {
                    st.clock = st.clock.max(theirs.rev);
                    st.nodes.insert(node, theirs);
                    taken += 1;
                }
            }
            if taken > 0 {
                st.changed();
            }
        }
        if taken > 0 {
            self.wake.notify_one();
        }
        taken
    }

    /// True when every change is on disk.
    pub fn durable(&self) -> bool {
        self.inner().durable()
    }
}

#[cfg(test)]
mod tests;
