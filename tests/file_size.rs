//! The size limit, checked: no production file over [`MAX_LINES`] lines.
//!
//! A file's production part is the file without its inline test module
//! (`#[cfg(test)]` followed by `mod tests {`, last in the file); test files
//! (`tests.rs`, `*_tests.rs`) are not production. Every line of the
//! production part counts, blank and comment lines included, so the figure
//! is what `wc -l` shows for a file whose tests live in a sibling `tests.rs`.
//!
//! Files still over the limit are listed in [`OVER_TODAY`] with the issue
//! that splits them; the list may only shrink: a listed file that is under
//! the limit, or gone, fails the test until its entry is deleted.
//! `scripts/long-files.sh` prints the same list from a shell.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/srctree.rs"]
mod srctree;

use std::path::{Path, PathBuf};

/// The most lines a production file may have (issue #39, "done when").
const MAX_LINES: usize = 640;

/// Production files over [`MAX_LINES`] today, each split by another change
/// of issue #39 under way; delete an entry when its file is split. Empty:
/// every production file is under the limit, and a new one over it fails.
const OVER_TODAY: &[&str] = &[];

/// The production part of a source file: everything before its inline
/// `#[cfg(test)] mod tests {`, or `None` for a test file.
fn production_part<'a>(rel: &Path, text: &'a str) -> Option<&'a str> {
    let name = rel.file_name()?.to_string_lossy();
    if name == "tests.rs" || name.ends_with("_tests.rs") {
        return None;
    }
    Some(text.split("#[cfg(test)]\nmod tests {").next().unwrap_or(""))
}

/// The `src/`-relative paths of production files over the limit, with their
/// production line counts.
fn over_limit(files: &[(PathBuf, String)]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = files
        .iter()
        .filter_map(|(rel, text)| {
            let lines = production_part(rel, text)?.lines().count();
            (lines > MAX_LINES).then(|| (rel.to_string_lossy().into_owned(), lines))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_counter_leaves_out_tests_and_counts_the_rest() {
    let long = "fn f() {}\n".repeat(MAX_LINES);
    let files = [
        (PathBuf::from("a/tests.rs"), format!("{long}x\n")),
        (PathBuf::from("a/plan_tests.rs"), format!("{long}x\n")),
        (
            PathBuf::from("a/inline.rs"),
            format!("{long}#[cfg(test)]\nmod tests {{\n{long}}}\n"),
        ),
        (PathBuf::from("a/just.rs"), long.clone()),
        (PathBuf::from("a/over.rs"), format!("{long}\n// one more\n")),
    ];
    assert_eq!(
        over_limit(&files),
        [("a/over.rs".to_string(), MAX_LINES + 2)],
        "only a/over.rs is over: test files and inline test modules do not count"
    );
}

#[test]
fn no_production_file_is_over_the_limit_but_the_listed_ones() {
    let found = over_limit(&srctree::tree_files());
    let unlisted: Vec<_> = found
        .iter()
        .filter(|(f, _)| !OVER_TODAY.contains(&f.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "production files over {MAX_LINES} lines (split them into cohesive \
         submodules; tests may move to a sibling tests.rs): {unlisted:#?}"
    );
    let stale: Vec<_> = OVER_TODAY
        .iter()
        .filter(|f| !found.iter().any(|(g, _)| g == *f))
        .collect();
    assert!(
        stale.is_empty(),
        "under the limit now (or gone): delete from OVER_TODAY: {stale:?}"
    );
}
