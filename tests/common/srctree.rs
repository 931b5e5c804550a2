//! The crate's source files, for the tests that read the tree
//! (`module_graph`, `file_size`): include with
//! `#[path = "common/srctree.rs"] mod srctree;`.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `.rs` file under `src/`: its path relative to `src/` and its text.
pub fn tree_files() -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    assert!(paths.len() > 20, "found only {} files", paths.len());
    paths
        .iter()
        .map(|p| {
            (
                p.strip_prefix(&src).unwrap().to_path_buf(),
                std::fs::read_to_string(p).unwrap(),
            )
        })
        .collect()
}
