//! The day-2 join's worker ignition (issue #37 item 6): the cluster's
//! current worker pointer config, read through the kubeconfig from the
//! Secret `openshift-machine-api/worker-user-data-managed` (key
//! `userData`), into the shared [`WorkerIgnition`] the HTTP service serves
//! workers from. Read at start, every [`REREAD_EVERY`], and whenever a
//! worker's ignition request finds the copy older than
//! `runtime::workerign::MAX_AGE`.
//!
//! Invariants: each read is bounded (the client's 10 s); a failed read is
//! stored with its reason (HTTP then serves `worker.ign`), logged once per
//! reason, and shown in `/status` (`csr.workerIgnition`); when the read
//! fails and `worker.ign` is older than [`STALE_AFTER`], the warning says
//! the node will not be accepted (a pointer config carries the cluster's
//! CA bundle, and `openshift-install` writes `worker.ign` once).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use bytes::Bytes;
use hyper::StatusCode;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::client::{CallError, Client};
use super::rbac::{NAMESPACE, USER_DATA_SECRET};
use super::status::WorkerIgnitionStatus;
use crate::runtime::clock::unix_now;
use crate::runtime::sync::LockExt as _;
use crate::runtime::workerign::WorkerIgnition;

/// A read at least this often, requests or not (status stays current).
pub const REREAD_EVERY: Duration = Duration::from_secs(300);
/// `worker.ign` older than this is stale when the secret cannot be read.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// What the reader needs of the plan (replaced at each reload's commit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderCfg {
    pub kubeconfig: PathBuf,
    pub ignition_dir: PathBuf,
}

pub struct Reader {
    pub cfg: arc_swap::ArcSwap<ReaderCfg>,
    pub shared: Arc<WorkerIgnition>,
    pub status: Mutex<Option<WorkerIgnitionStatus>>,
}

/// The secret's path in the core API.
pub fn secret_path() -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/secrets/{USER_DATA_SECRET}")
}

/// A Secret object → its `userData`, which must be an Ignition config.
pub fn user_data(secret: &serde_json::Value) -> Result<Bytes, String> {
    let name = format!("secret {NAMESPACE}/{USER_DATA_SECRET}");
    let b64 = secret["data"]["userData"]
        .as_str()
        .ok_or_else(|| format!("{name} has no data.userData"))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("{name}: userData is not base64: {e}"))?;
    let doc: serde_json::Value =
        serde_json::from_slice(&raw).map_err(|e| format!("{name}: userData is not JSON: {e}"))?;
    if !doc["ignition"]["version"].is_string() {
        return Err(format!(
            "{name}: userData is not an Ignition config (no ignition.version)"
        ));
    }
    Ok(Bytes::from(raw))
}

/// Why `worker.ign` is a bad fallback, when it is older than [`STALE_AFTER`].
pub fn stale_warning(ignition_dir: &Path, now: SystemTime) -> Option<String> {
    let path = ignition_dir.join("worker.ign");
    let age = now
        .duration_since(std::fs::metadata(&path).ok()?.modified().ok()?)
        .ok()?;
    (age > STALE_AFTER).then(|| {
        format!(
            "{} is {} h old and the secret cannot be read: a worker served it will NOT be accepted (its pointer config's CA bundle is stale); give the kubeconfig get on secret {NAMESPACE}/{USER_DATA_SECRET} (`crc-appliance render csr-rbac`), or write the current one: oc -n {NAMESPACE} get secret {USER_DATA_SECRET} -o jsonpath='{{.data.userData}}' | base64 -d > {}",
            path.display(),
            age.as_secs() / 3600,
            path.display()
        )
    })
}

impl Reader {
    /// Read the secret once; the body or why not.
    async fn read(&self) -> Result<Bytes, String> {
        let cfg = self.cfg.load();
        let kc = super::kubeconfig::load(&cfg.kubeconfig).map_err(|e| format!("{e:#}"))?;
        let client = Client::new(kc).map_err(|e| format!("{e:#}"))?;
        match client.get_json(&secret_path()).await {
            Ok(v) => user_data(&v),
            Err(CallError::Status(StatusCode::NOT_FOUND, _)) => Err(format!(
                "secret {NAMESPACE}/{USER_DATA_SECRET} does not exist"
            )),
            Err(CallError::Status(StatusCode::FORBIDDEN, _)) => Err(super::watch::forbidden(
                &format!("get secret {NAMESPACE}/{USER_DATA_SECRET}"),
            )),
            Err(e) => Err(format!(
                "reading secret {NAMESPACE}/{USER_DATA_SECRET}: {e}"
            )),
        }
    }

    /// One read: shared, shown, logged when the outcome changes.
    async fn once(&self) {
        let res = self.read().await;
        let mut next = WorkerIgnitionStatus {
            read_at: Some(unix_now()),
            ..WorkerIgnitionStatus::default()
        };
        match &res {
            Ok(_) => next.source = "secret".into(),
            Err(why) => {
                next.source = "worker.ign".into();
                next.error = Some(why.clone());
                next.warning = stale_warning(&self.cfg.load().ignition_dir, SystemTime::now());
            }
        }
        let mut st = self.status.locked();
        let before = st.as_ref().map(|s| (&s.source, &s.error, &s.warning));
        if before != Some((&next.source, &next.error, &next.warning)) {
            match (&next.error, &next.warning) {
                (None, _) => info!(
                    "csr: workers are served secret {NAMESPACE}/{USER_DATA_SECRET} (the cluster's current worker pointer config)"
                ),
                (Some(e), None) => warn!("csr: workers are served worker.ign: {e}"),
                (Some(e), Some(w)) => warn!("csr: ALERT: workers are served worker.ign: {e}; {w}"),
            }
        }
        *st = Some(next);
        drop(st);
        self.shared.store(res);
    }

    /// Read at start, on request and every [`REREAD_EVERY`], until `shutdown`.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        loop {
            self.once().await;
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = self.shared.wanted() => {}
                () = tokio::time::sleep(REREAD_EVERY) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(user_data: &[u8]) -> serde_json::Value {
        let b64 = base64::engine::general_purpose::STANDARD.encode(user_data);
        serde_json::json!({"kind": "Secret", "data": {"userData": b64, "disableTemplating": "dHJ1ZQ=="}})
    }

    #[test]
    fn user_data_is_the_decoded_ignition_config() {
        let ign = br#"{"ignition":{"config":{"merge":[{"source":"https://api-int.c.example.com:22623/config/worker"}]},"version":"3.2.0"}}"#;
        assert_eq!(user_data(&secret(ign)).unwrap(), Bytes::from_static(ign));
        for (bad, why) in [
            (serde_json::json!({"data": {}}), "no data.userData"),
            (
                serde_json::json!({"data": {"userData": "%%"}}),
                "not base64",
            ),
            (secret(b"#cloud-config"), "not JSON"),
            (secret(b"{\"a\":1}"), "not an Ignition config"),
        ] {
            let e = user_data(&bad).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn worker_ign_older_than_a_day_is_called_stale() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(stale_warning(d.path(), SystemTime::now()), None, "no file");
        std::fs::write(d.path().join("worker.ign"), "{}").unwrap();
        assert_eq!(stale_warning(d.path(), SystemTime::now()), None);
        let later = SystemTime::now() + Duration::from_secs(25 * 3600);
        let w = stale_warning(d.path(), later).unwrap();
        assert!(
            w.contains("25 h old") && w.contains("NOT be accepted"),
            "{w}"
        );
    }
}
