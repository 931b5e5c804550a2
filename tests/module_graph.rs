//! No module imports one that imports it back (the one-model rule): the
//! top-level modules of `src/` and their `crate::` references, test code
//! excluded, must form an acyclic graph, with `model` a leaf.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
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

/// `crate::<name>` references of non-test code, by top-level module.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "found only {} files", files.len());
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "main" || top == "lib" || rel.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let deps = g.entry(top.clone()).or_default();
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                deps.insert(name);
            }
        }
        // `use crate::{a, b}` lists
        for line in code
            .lines()
            .filter(|l| l.trim_start().starts_with("use crate::{"))
        {
            for name in line.split(['{', '}', ',']).skip(1) {
                let n = name.trim().split("::").next().unwrap_or("").to_string();
                if !n.is_empty()
                    && n != top
                    && n.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                {
                    deps.insert(n);
                }
            }
        }
    }
    g
}

fn reaches(g: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(m) = stack.pop() {
        for d in g.get(&m).into_iter().flatten() {
            if d == to {
                return true;
            }
            if seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    false
}

#[test]
fn top_level_modules_form_no_cycle() {
    let g = graph();
    assert!(g.contains_key("config") && g.contains_key("plan") && g.contains_key("model"));
    let cycles: Vec<String> = g
        .iter()
        .flat_map(|(a, ds)| ds.iter().map(move |b| (a, b)))
        .filter(|(a, b)| reaches(&g, b, a))
        .map(|(a, b)| format!("{a} → {b} → … → {a}"))
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles: {cycles:#?}\ngraph: {g:#?}"
    );
    assert!(
        g["model"].is_empty(),
        "model must be a leaf, imports {:?}",
        g["model"]
    );
    assert!(
        !reaches(&g, "plan", "config"),
        "plan must not depend on config: {g:#?}"
    );
}
