//! Redfish sessions (DSP0266 "Redfish session login authentication") for a
//! BMC that refuses Basic auth: on the first 401 of a command, the service
//! root (readable without credentials) is asked for `Links.Sessions`; the
//! user and password are POSTed there (without credentials), and the
//! `X-Auth-Token` of the answer replaces Basic auth for the rest of the
//! command. [`Client::close`] DELETEs the session (its `Location`, else
//! its `@odata.id`) at the end of the command.
//!
//! Invariants: one try per command (a refused login leaves the first 401
//! as the answer: wrong credentials); the token is never shown (`Debug`
//! redacts it) and never sent anywhere but this BMC's origin; the DELETE
//! is sent even when the command's budget is spent, bounded by
//! [`CLOSE_TIMEOUT`].

use std::sync::atomic::Ordering;
use std::time::Duration;

use hyper::Method;
use serde_json::{Value, json};

use super::client::{Answer, Auth, Client};
use super::redfish::text;
use crate::runtime::sync::LockExt as _;

/// How long the session's DELETE may take.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// The session in use: its token and where to delete it.
pub struct Session {
    pub(super) token: String,
    pub(super) location: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("token", &"<redacted>")
            .field("location", &self.location)
            .finish()
    }
}

/// The sessions collection the service root advertises.
pub fn sessions_link(root: &Value) -> Option<String> {
    text(root, &["Links", "Sessions", "@odata.id"])
}

impl Client {
    /// After `refused` (a 401): sign in with a session, once per command;
    /// whether the request is worth sending again.
    pub(super) async fn login(&self, refused: &Answer) -> bool {
        if refused.status != 401 || self.session_tried.swap(true, Ordering::Relaxed) {
            return false;
        }
        let Ok(root) = self
            .call_as(Auth::No, Method::GET, "/redfish/v1", None, None)
            .await
        else {
            return false;
        };
        let root: Value = serde_json::from_slice(&root.body).unwrap_or(Value::Null);
        let Some(path) = sessions_link(&root).and_then(|p| self.same_origin(Some(p.as_str())))
        else {
            return false;
        };
        let body = json!({ "UserName": self.user, "Password": self.password });
        let Ok(a) = self
            .call_as(Auth::No, Method::POST, &path, Some(&body), None)
            .await
        else {
            return false;
        };
        let Some(token) = a.token.filter(|_| (200..300).contains(&a.status)) else {
            return false;
        };
        let doc: Value = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
        let location = a
            .location
            .as_deref()
            .and_then(|l| self.same_origin(Some(l)))
            .or_else(|| text(&doc, &["@odata.id"]));
        *self.session.locked() = Some(Session { token, location });
        self.note(
            "Basic auth refused (HTTP 401): signed in with a Redfish session (X-Auth-Token)".into(),
        );
        true
    }

    /// End the command: DELETE its session, if one was made (a failure
    /// is ignored: the BMC expires it).
    pub async fn close(&self) {
        let location = self
            .session
            .locked()
            .as_ref()
            .and_then(|s| s.location.clone());
        if let Some(loc) = location {
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.delete_unbudgeted(&loc)).await;
        }
        *self.session.locked() = None;
    }
}
