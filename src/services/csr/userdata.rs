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

/// Why the secret could not be read or used (workers are then served
/// `worker.ign`): the text the log, `/status` → `csr.workerIgnition` and
/// HTTP's warning show. Never the secret's content.
#[derive(Debug, thiserror::Error)]
pub enum SecretReadError {
    /// The kubeconfig could not be loaded.
    #[error("{0:#}")]
    Kubeconfig(anyhow::Error),
    /// The API client could not be made from it.
    #[error("{0:#}")]
    Client(anyhow::Error),
    /// The API server has no such secret (404).
    #[error("secret {NAMESPACE}/{USER_DATA_SECRET} does not exist")]
    NotFound,
    /// The kubeconfig's identity may not read it (403): the fix is RBAC.
    #[error("{}", super::watch::forbidden(&format!("get secret {NAMESPACE}/{USER_DATA_SECRET}")))]
    Forbidden,
    /// Any other failed call.
    #[error("reading secret {NAMESPACE}/{USER_DATA_SECRET}: {0}")]
    Call(CallError),
    /// The secret has no `data.userData`.
    #[error("secret {NAMESPACE}/{USER_DATA_SECRET} has no data.userData")]
    NoUserData,
    /// `userData` does not decode as base64.
    #[error("secret {NAMESPACE}/{USER_DATA_SECRET}: userData is not base64: {0}")]
    NotBase64(base64::DecodeError),
    /// `userData` is not JSON.
    #[error("secret {NAMESPACE}/{USER_DATA_SECRET}: userData is not JSON: {0}")]
    NotJson(serde_json::Error),
    /// `userData` is JSON but not an Ignition config.
    #[error(
        "secret {NAMESPACE}/{USER_DATA_SECRET}: userData is not an Ignition config (no ignition.version)"
    )]
    NotIgnition,
}

/// A Secret object → its `userData`, which must be an Ignition config.
pub fn user_data(secret: &serde_json::Value) -> Result<Bytes, SecretReadError> {
    let b64 = secret["data"]["userData"]
        .as_str()
        .ok_or(SecretReadError::NoUserData)?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(SecretReadError::NotBase64)?;
    let doc: serde_json::Value = serde_json::from_slice(&raw).map_err(SecretReadError::NotJson)?;
    if !doc["ignition"]["version"].is_string() {
        return Err(SecretReadError::NotIgnition);
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
    async fn read(&self) -> Result<Bytes, SecretReadError> {
        let cfg = self.cfg.load();
        let kc = super::kubeconfig::load(&cfg.kubeconfig).map_err(SecretReadError::Kubeconfig)?;
        let client = Client::new(kc).map_err(SecretReadError::Client)?;
        match client.get_json(&secret_path()).await {
            Ok(v) => user_data(&v),
            Err(CallError::Status(StatusCode::NOT_FOUND, _)) => Err(SecretReadError::NotFound),
            Err(CallError::Status(StatusCode::FORBIDDEN, _)) => Err(SecretReadError::Forbidden),
            Err(e) => Err(SecretReadError::Call(e)),
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
                next.error = Some(why.to_string());
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
        let name = "secret openshift-machine-api/worker-user-data-managed";
        for (bad, why) in [
            (
                serde_json::json!({"data": {}}),
                format!("{name} has no data.userData"),
            ),
            (
                serde_json::json!({"data": {"userData": "%%"}}),
                format!("{name}: userData is not base64: Invalid symbol 37, offset 0."),
            ),
            (
                secret(b"#cloud-config"),
                format!("{name}: userData is not JSON: expected value at line 1 column 1"),
            ),
            (
                secret(b"{\"a\":1}"),
                format!("{name}: userData is not an Ignition config (no ignition.version)"),
            ),
        ] {
            assert_eq!(user_data(&bad).unwrap_err().to_string(), why);
        }
    }

    /// The texts of the API's refusals (tests/csr_day2.rs looks for "does
    /// not exist").
    #[test]
    fn a_refused_read_says_why_and_the_fix() {
        let cases = [
            (
                SecretReadError::NotFound,
                "secret openshift-machine-api/worker-user-data-managed does not exist",
            ),
            (
                SecretReadError::Forbidden,
                "the kubeconfig's identity may not get secret openshift-machine-api/worker-user-data-managed: apply `crc-appliance render csr-rbac` and use its identity, or the installer's auth/kubeconfig",
            ),
            (
                SecretReadError::Call(CallError::Status(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "etcd".into(),
                )),
                "reading secret openshift-machine-api/worker-user-data-managed: 500 Internal Server Error: etcd",
            ),
            (
                SecretReadError::Kubeconfig(
                    anyhow::anyhow!("no such file").context("kubeconfig /k"),
                ),
                "kubeconfig /k: no such file",
            ),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), text);
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
