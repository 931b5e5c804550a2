//! `tags/list` of a pulled-through repository (`<registry>/<repository>`
//! under a `registry.pullThrough[]` entry, docs/registry.md): the
//! upstream's tags joined with the tags stored here.
//!
//! - The upstream is asked for every page (`Link: <…>; rel="next"` as the
//!   distribution spec pages, followed on the same path only), at most
//!   [`MAX_PAGES`] pages of at most [`MAX_PAGE_BYTES`] each, all within
//!   [`LIST_DEADLINE`]. A tag the spec's grammar refuses is left out, so a
//!   hostile upstream cannot put a name in the answer that a client could
//!   not ask for.
//! - Stored tags stay listed when the upstream no longer has them: the
//!   mirror still serves them.
//! - The upstream unreachable or refusing: the stored tags, the reason in
//!   status and the log; none stored: `503 UNAVAILABLE` with the reason.
//!   An upstream that does not know the repository and nothing stored:
//!   `NAME_UNKNOWN`, as for any repository.
//!
//! `_catalog` stays what storage holds, as distribution's own proxy does:
//! an upstream's catalog (quay.io's has none to give) is not the mirror's.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::Method;
use hyper::header::LINK;
use serde_json::json;

use super::Ctx;
use super::flight::Failure;
use super::names::{Name, tag_ok};
use super::pullthrough::{ask, failed, refuse, unreachable};
use super::reply::{Code, Resp};
use super::upstream::Upstream;

/// Pages asked of an upstream for one listing.
const MAX_PAGES: usize = 100;
/// One page's body (a page of 1,000 long tags is under 200 KiB).
const MAX_PAGE_BYTES: usize = 4 << 20;
/// The whole listing, every page (issue #36: a clear error within 10 s).
const LIST_DEADLINE: Duration = Duration::from_secs(9);
/// The page size asked of the upstream.
const UPSTREAM_PAGE: usize = 1000;

/// The tags to list for `name`, given what storage holds (`None`: no such
/// repository here). `Ok(None)`: `name` is not pulled through, list
/// storage; `Err`: the answer (the upstream failed and nothing is stored).
pub(super) async fn list(
    ctx: &Arc<Ctx>,
    name: &Name,
    stored: Option<Vec<String>>,
) -> Result<Option<Vec<String>>, Resp> {
    let Some((up, repo)) = ctx.pull.route(name) else {
        return Ok(stored);
    };
    let asked = tokio::time::timeout(LIST_DEADLINE, upstream_tags(ctx, &up, &repo))
        .await
        .unwrap_or_else(|_| {
            Err(unreachable(
                ctx,
                &up,
                format!(
                    "{}: tags of {repo} not listed within {LIST_DEADLINE:?}",
                    up.url
                ),
            ))
        });
    match (asked, stored) {
        (Ok(remote), stored) => {
            let mut all: BTreeSet<String> = remote.into_iter().collect();
            all.extend(stored.unwrap_or_default());
            Ok(Some(all.into_iter().collect()))
        }
        (Err(Failure::Unknown(_)), stored) => Ok(stored),
        (Err(f), Some(stored)) => {
            failed(ctx, &up, &f);
            Ok(Some(stored))
        }
        (Err(f), None) => {
            failed(ctx, &up, &f);
            Err(refuse(
                &f,
                Code::NameUnknown,
                json!({"name": name.as_str()}),
            ))
        }
    }
}

/// Every page of the upstream's `tags/list` for `repo`.
async fn upstream_tags(ctx: &Ctx, up: &Upstream, repo: &str) -> Result<Vec<String>, Failure> {
    let mut tags = Vec::new();
    let mut rest = format!("tags/list?n={UPSTREAM_PAGE}");
    for _ in 0..MAX_PAGES {
        let what = format!("the tags of {repo}");
        let answer = ask(ctx, up, Method::GET, (repo, &rest), &[], &what).await?;
        let next = answer
            .headers()
            .get(LINK)
            .and_then(|v| v.to_str().ok())
            .and_then(|l| next_page(l, repo));
        let body = http_body_util::Limited::new(answer.into_body(), MAX_PAGE_BYTES)
            .collect()
            .await
            .map_err(|e| Failure::Unavailable(format!("{}: tags of {repo}: {e}", up.url)))?
            .to_bytes();
        tags.extend(page_tags(&body).ok_or_else(|| {
            Failure::Unavailable(format!("{}: tags of {repo}: not a tag list", up.url))
        })?);
        match next {
            Some(n) => rest = n,
            None => return Ok(tags),
        }
    }
    Ok(tags)
}

/// The tags of one page (`{"name": …, "tags": [...] | null}`), the ones
/// the grammar allows.
fn page_tags(body: &[u8]) -> Option<Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Page {
        tags: Option<Vec<String>>,
    }
    let p: Page = serde_json::from_slice(body).ok()?;
    Some(
        p.tags
            .unwrap_or_default()
            .into_iter()
            .filter(|t| tag_ok(t))
            .collect(),
    )
}

/// The next page's `tags/list?…` from a `Link` header, only when it names
/// `repo`'s own `tags/list` (a relative path or an absolute URL).
fn next_page(link: &str, repo: &str) -> Option<String> {
    let part = link.split(',').find(|p| p.contains("rel=\"next\""))?;
    let target = part.split_once('<')?.1.split_once('>')?.0.trim();
    let path = match target.split_once("://") {
        Some((_, after)) => &after[after.find('/')?..],
        None => target,
    };
    let rest = path.strip_prefix(&format!("/v2/{repo}/"))?;
    (rest.starts_with("tags/list?") && !rest.contains(['\r', '\n', ' '])).then(|| rest.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_is_followed_on_the_repository_own_path_only() {
        let l = r#"</v2/lib/app/tags/list?last=b&n=2>; rel="next""#;
        assert_eq!(
            next_page(l, "lib/app").as_deref(),
            Some("tags/list?last=b&n=2")
        );
        let abs = r#"<https://quay.io/v2/lib/app/tags/list?last=b&n=2>; rel="next""#;
        assert_eq!(
            next_page(abs, "lib/app").as_deref(),
            Some("tags/list?last=b&n=2")
        );
        for other in [
            r#"</v2/lib/other/tags/list?last=b>; rel="next""#,
            r#"</v2/lib/app/manifests/x>; rel="next""#,
            r#"</v2/lib/app/tags/list?last=b>; rel="prev""#,
            "garbage",
        ] {
            assert_eq!(next_page(other, "lib/app"), None, "{other}");
        }
    }

    #[test]
    fn a_page_keeps_only_tags_the_grammar_allows() {
        let body = br#"{"name":"lib/app","tags":["v1","../x","","UPPER.ok_1","-bad"]}"#;
        assert_eq!(page_tags(body).unwrap(), ["v1", "UPPER.ok_1"]);
        assert_eq!(
            page_tags(br#"{"name":"a","tags":null}"#).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(page_tags(b"<html>"), None);
    }
}
