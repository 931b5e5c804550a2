//! Teardown (`vm down`, `vm remove-bootstrap`): remove exactly what `vm up`
//! created — domains carrying our metadata, their volumes and serial logs,
//! the network, and the pool and its directory when the state file says
//! `up` created them. Anything else is left alone, with a warning.

use std::fs;
use std::io;
use std::path::Path;

use anyhow::Context as _;
use tracing::warn;
use virt::error::ErrorNumber;

use super::driver::{Driver, found, part_path, remove_file};
use super::spec::NodeSpec;
use crate::model::cluster::Role;

impl Driver {
    /// Destroy and undefine a node's domain (if ours), delete its volume and
    /// serial log. Returns what was removed.
    pub fn remove_node(&self, n: &NodeSpec) -> anyhow::Result<Vec<String>> {
        let mut done = Vec::new();
        if let Some(d) = found(
            self.conn.lookup_domain_by_name(&n.domain),
            ErrorNumber::NoDomain,
        )? {
            if self.phase_of(&d).is_none() {
                warn!(
                    "domain {} was not created by crc-appliance; not removing it",
                    n.domain
                );
            } else {
                let persistent = d.is_persistent()?;
                if d.is_active()? {
                    d.destroy()
                        .with_context(|| format!("destroying domain {}", n.domain))?;
                }
                if persistent {
                    // A transient domain is gone once destroyed.
                    if let Some(d) = found(
                        self.conn.lookup_domain_by_name(&n.domain),
                        ErrorNumber::NoDomain,
                    )? {
                        d.undefine()
                            .with_context(|| format!("undefining domain {}", n.domain))?;
                    }
                }
                done.push(format!("removed domain {}", n.domain));
            }
        }
        if let Some(pool) = found(
            self.conn.lookup_storage_pool_by_name(&self.spec.pool_name),
            ErrorNumber::NoStoragePool,
        )? && pool.is_active()?
            && let Some(v) = found(
                pool.lookup_storage_vol_by_name(&n.volume),
                ErrorNumber::NoStorageVolume,
            )?
        {
            v.delete(0)
                .with_context(|| format!("deleting volume {}", n.volume))?;
            done.push(format!("deleted volume {}", n.volume));
        }
        // A dir pool deletes the file itself; make sure (test driver, inactive pool).
        for f in [&n.disk_path, &n.serial_log] {
            if remove_file(f)? {
                done.push(format!("removed {}", f.display()));
            }
        }
        Ok(done)
    }

    /// `vm remove-bootstrap`.
    pub fn remove_bootstrap(&self) -> anyhow::Result<Vec<String>> {
        let mut done = Vec::new();
        for n in self.spec.nodes.iter().filter(|n| n.role == Role::Bootstrap) {
            done.extend(self.remove_node(n)?);
        }
        if self.spec.state_file.parent().is_some_and(Path::exists) {
            let mut st = self.load_state();
            st.bootstrap_removed = true;
            self.save_state(&st)?;
        }
        Ok(done)
    }

    /// `vm down`: everything `up` created, nothing else. Idempotent.
    pub fn down(&self) -> anyhow::Result<Vec<String>> {
        let s = &self.spec;
        let mut done = Vec::new();
        for n in &s.nodes {
            done.extend(self.remove_node(n)?);
        }
        if let Some(net) = found(
            self.conn.lookup_network_by_name(&s.network_name),
            ErrorNumber::NoNetwork,
        )? {
            if self.our_network(&net) {
                if net.is_active()? {
                    net.destroy()
                        .with_context(|| format!("stopping network {}", s.network_name))?;
                }
                if let Some(net) = found(
                    self.conn.lookup_network_by_name(&s.network_name),
                    ErrorNumber::NoNetwork,
                )? {
                    net.undefine()
                        .with_context(|| format!("undefining network {}", s.network_name))?;
                }
                done.push(format!("removed network {}", s.network_name));
            } else {
                warn!(
                    "network {} was not created by crc-appliance; not removing it",
                    s.network_name
                );
            }
        }
        for (_, f) in s.extracted_files() {
            if remove_file(f)? {
                done.push(format!("removed {}", f.display()));
            }
            let _ = remove_file(&part_path(f));
        }
        let state = self.load_state();
        if state.pool_created
            && let Some(pool) = found(
                self.conn.lookup_storage_pool_by_name(&s.pool_name),
                ErrorNumber::NoStoragePool,
            )?
        {
            if pool.is_active()? {
                let _ = pool.refresh(0);
            }
            let left = if pool.is_active()? {
                pool.list_volumes()?
                    .into_iter()
                    .filter(|v| !v.starts_with('.'))
                    .collect()
            } else {
                Vec::new()
            };
            if left.is_empty() {
                if pool.is_active()? {
                    pool.destroy()
                        .with_context(|| format!("stopping storage pool {}", s.pool_name))?;
                }
                pool.undefine()
                    .with_context(|| format!("undefining storage pool {}", s.pool_name))?;
                done.push(format!("removed storage pool {}", s.pool_name));
            } else {
                warn!(
                    "storage pool {} still holds {} (not ours); keeping it",
                    s.pool_name,
                    left.join(", ")
                );
            }
        }
        let _ = remove_file(&s.state_file);
        if state.pool_dir_created {
            match fs::remove_dir(&s.pool_path) {
                Ok(()) => done.push(format!("removed {}", s.pool_path.display())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => warn!("keeping {}: {e}", s.pool_path.display()),
            }
        }
        Ok(done)
    }
}
