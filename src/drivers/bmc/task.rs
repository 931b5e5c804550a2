//! A call the BMC answers 202 Accepted (DSP0266 "Asynchronous operations"):
//! its task monitor (the `Location` header, else the `@odata.id` of the
//! Task in the body) is polled until the operation ends: a 202 is still
//! running; a Task document with a running `TaskState` too; a finished
//! Task or any other answer is the operation's result.
//!
//! Invariants: at most [`MAX_TASK_POLLS`] polls within [`MAX_TASK_TIME`]
//! (and within the command's budget); the pause is the BMC's `Retry-After`
//! capped at [`MAX_TASK_PAUSE`], else the client's back-off base; a task
//! that failed or did not finish is an error naming its state and
//! messages (bounded, escaped).

use std::time::Duration;

use hyper::Method;
use serde_json::Value;

use super::client::{Answer, BmcError, Client};
use super::redfish::{TaskState, task_state, text};

/// Polls of one task monitor at most.
pub const MAX_TASK_POLLS: u32 = 20;
/// How long one task is waited for at most.
pub const MAX_TASK_TIME: Duration = Duration::from_secs(60);
/// The longest pause between two polls.
pub const MAX_TASK_PAUSE: Duration = Duration::from_secs(5);

/// Where an accepted call's task is watched: the answer's `Location`, else
/// the Task's `@odata.id` (same origin only).
fn monitor_of(c: &Client, a: &Answer, doc: &Value) -> Option<String> {
    a.location
        .as_deref()
        .and_then(|l| c.same_origin(Some(l)))
        .or_else(|| text(doc, &["@odata.id"]).and_then(|p| c.same_origin(Some(p.as_str()))))
}

impl Client {
    /// Follow the task `accepted` started (`what`: the call, for errors);
    /// the operation's final answer (a 200 for a finished Task).
    pub(super) async fn follow_task(
        &self,
        what: &str,
        accepted: Answer,
    ) -> Result<Answer, BmcError> {
        let doc: Value = serde_json::from_slice(&accepted.body).unwrap_or(Value::Null);
        if let Some(TaskState::Failed(m)) = task_state(&doc) {
            return Err(BmcError::Task(format!("{what}: {m}")));
        }
        let Some(monitor) = monitor_of(self, &accepted, &doc) else {
            // Accepted, with nothing to watch: taken as done.
            return Ok(accepted);
        };
        let start = tokio::time::Instant::now();
        let mut pace = accepted.retry_after;
        for _ in 0..MAX_TASK_POLLS {
            let pause = pace
                .map_or(self.backoff, Duration::from_secs)
                .min(MAX_TASK_PAUSE);
            if start.elapsed() + pause > MAX_TASK_TIME {
                break;
            }
            tokio::time::sleep(pause).await;
            let a = self.call(Method::GET, &monitor, None, None).await?;
            pace = a.retry_after;
            if a.status == 202 {
                continue;
            }
            if !(200..300).contains(&a.status) {
                return Ok(a);
            }
            let doc: Value = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
            match task_state(&doc) {
                Some(TaskState::Running) => continue,
                Some(TaskState::Failed(m)) => {
                    return Err(BmcError::Task(format!("{what}: {m}")));
                }
                Some(TaskState::Done) | None => return Ok(Answer { status: 200, ..a }),
            }
        }
        Err(BmcError::Task(format!(
            "{what}: the BMC's task at {monitor} did not finish within {} s ({MAX_TASK_POLLS} polls at most)",
            MAX_TASK_TIME.as_secs()
        )))
    }
}
