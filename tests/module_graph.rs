//! The architecture, checked: which module may import which.
//!
//! Modules are taken from the file tree (`src/services/dns/handler.rs` is in
//! `services::dns`), references from the code's `crate::` paths (including
//! `use crate::{a, b::{c, d}}` trees) and `super::` paths resolved against
//! the file's own module; test code is left out. Units are the folders under
//! the layer folders (`services::dns`, `runtime::reload`, `boot::iso9660`)
//! and the other top-level modules (`model`, `config`, `plan`, `timeline`).
//!
//! Rules:
//! - no service or driver imports another service or driver (they share
//!   through `runtime`, `boot`, `model`, `timeline`);
//! - no import cycle between units; `model` is a leaf; `plan` does not
//!   depend on `config`.
//!
//! The checker is tested on made-up trees first, so a rule that stopped
//! matching would fail here rather than pass silently.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layer folders whose sub-modules are units of their own.
const LAYERS: [&str; 6] = ["runtime", "services", "drivers", "boot", "host", "cmd"];
/// Layers whose units must not import each other.
const SERVICE_LAYERS: [&str; 2] = ["services", "drivers"];

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The unit an absolute module path (`["services", "dns", "handler"]`)
/// belongs to.
fn unit(path: &[String]) -> Option<String> {
    let first = path.first()?;
    if LAYERS.contains(&first.as_str()) {
        let second = path.get(1)?;
        Some(format!("{first}::{second}"))
    } else {
        Some(first.clone())
    }
}

/// The module path of a source file relative to `src/`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

/// Expand a `use` tree body (after `crate::` or `super::`): `a::{b, c::d}`
/// → `a::b`, `a::c::d`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or("").trim().to_string()];
    };
    let prefix = tree[..open].trim();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .flat_map(expand)
        .map(|rest| {
            if rest == "self" {
                prefix.trim_end_matches("::").to_string()
            } else {
                format!("{prefix}{rest}")
            }
        })
        .collect()
}

/// Module paths (absolute, as segments) that `code`, in module `module`,
/// refers to.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let segs = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| p.trim().to_string())
            .take_while(|p| {
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            })
            .collect()
    };
    let resolve = |kind: &str, rest: &str| -> Vec<String> {
        if kind == "crate" {
            return segs(rest);
        }
        // super::super::x from module m: strip one level per `super`.
        let mut base = module.to_vec();
        let mut rest = rest;
        base.pop();
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        base.extend(segs(rest));
        base
    };
    // `use crate::{…};` / `use super::{…};` trees.
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        rest = &rest[i + 4..];
        let end = rest.find(';').unwrap_or(rest.len());
        let stmt = &rest[..end];
        for kind in ["crate", "super"] {
            if let Some(body) = stmt.trim_start().strip_prefix(&format!("{kind}::")) {
                for p in expand(body) {
                    out.push(resolve(kind, &p));
                }
            }
        }
    }
    // Inline paths: `crate::a::b`, `super::a`.
    for kind in ["crate", "super"] {
        let pat = format!("{kind}::");
        let mut rest = code;
        while let Some(i) = rest.find(&pat) {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + pat.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            if kind == "super" {
                // Re-attach the chain of `super::` segments that follow.
                out.push(resolve("super", &path));
            } else {
                out.push(resolve("crate", &path));
            }
        }
    }
    out
}

/// The unit graph of `files` (path relative to `src/`, text).
fn graph_of(files: &[(PathBuf, String)]) -> Graph {
    let mut g = Graph::new();
    for (rel, text) in files {
        let module = module_of(rel);
        let Some(from) = unit(&module) else { continue };
        if from == "main" || from == "lib" || rel.ends_with("tests.rs") {
            continue;
        }
        let code: String = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let deps = g.entry(from.clone()).or_default();
        for path in references(&module, &code) {
            if let Some(to) = unit(&path)
                && to != from
            {
                deps.insert(to);
            }
        }
    }
    g
}

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

fn tree() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    assert!(paths.len() > 20, "found only {} files", paths.len());
    let files: Vec<(PathBuf, String)> = paths
        .iter()
        .map(|p| {
            (
                p.strip_prefix(&src).unwrap().to_path_buf(),
                std::fs::read_to_string(p).unwrap(),
            )
        })
        .collect();
    graph_of(&files)
}

fn is_service(unit: &str) -> bool {
    SERVICE_LAYERS
        .iter()
        .any(|l| unit.strip_prefix(l).is_some_and(|r| r.starts_with("::")))
}

/// `a → b` edges where both are services or drivers.
fn service_imports(g: &Graph) -> Vec<String> {
    g.iter()
        .filter(|(a, _)| is_service(a))
        .flat_map(|(a, ds)| {
            ds.iter()
                .filter(|b| is_service(b))
                .map(move |b| format!("{a} → {b}"))
        })
        .collect()
}

fn reaches(g: &Graph, from: &str, to: &str) -> bool {
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

fn cycles(g: &Graph) -> Vec<String> {
    g.iter()
        .flat_map(|(a, ds)| ds.iter().map(move |b| (a, b)))
        .filter(|(a, b)| reaches(g, b, a))
        .map(|(a, b)| format!("{a} → {b} → … → {a}"))
        .collect()
}

fn fake(files: &[(&str, &str)]) -> Graph {
    let files: Vec<(PathBuf, String)> = files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
    graph_of(&files)
}

#[test]
fn the_checker_finds_a_service_importing_a_service_in_every_spelling() {
    for (what, code) in [
        ("inline path", "fn f() { crate::services::http::serve(); }"),
        ("use", "use crate::services::http::Http;"),
        ("use tree", "use crate::{config, services::{http, lb}};"),
        ("nested tree", "use crate::{services::{http::{self, Ctx}}};"),
        ("driver", "use crate::drivers::bmc::BmcAction;"),
        ("super climb", "use super::super::http::Ctx;"),
    ] {
        let g = fake(&[
            ("services/dns/handler.rs", code),
            (
                "services/http/mod.rs",
                "use crate::runtime::service::Service;",
            ),
            ("drivers/bmc/mod.rs", ""),
        ]);
        let found = service_imports(&g);
        assert!(!found.is_empty(), "{what}: not found in {g:#?}");
        assert!(
            found.iter().all(|e| e.starts_with("services::dns → ")),
            "{what}: {found:?}"
        );
    }
}

#[test]
fn the_checker_allows_shared_layers_and_its_own_submodules() {
    let g = fake(&[
        (
            "services/dns/handler.rs",
            "use super::records::Rec;\nuse crate::runtime::service::Tasks;\nuse crate::boot::bootfiles;\nuse crate::{model::cluster::Cluster, timeline::Events};",
        ),
        ("services/dns/records.rs", "use crate::plan::Plan;"),
        (
            "services/dns/mod.rs",
            "#[cfg(test)]\nmod tests {\n use crate::services::http::X;\n}",
        ),
    ]);
    assert!(service_imports(&g).is_empty(), "{g:#?}");
    assert_eq!(
        g["services::dns"].iter().cloned().collect::<Vec<_>>(),
        [
            "boot::bootfiles",
            "model",
            "plan",
            "runtime::service",
            "timeline"
        ],
        "test code and own submodules are not edges"
    );
}

#[test]
fn the_checker_finds_a_cycle() {
    let g = fake(&[
        ("model/mod.rs", "use crate::plan::Plan;"),
        ("plan.rs", "use crate::model::Cluster;"),
    ]);
    assert_eq!(cycles(&g).len(), 2, "{g:#?}");
}

#[test]
fn no_service_imports_another_service() {
    let g = tree();
    for s in [
        "services::dns",
        "services::dhcp",
        "services::dhcp6",
        "services::lb",
        "services::http",
        "services::tftp",
        "services::admin",
        "drivers::libvirt",
        "drivers::bmc",
    ] {
        assert!(g.contains_key(s), "{s} missing from the graph: {g:#?}");
    }
    let found = service_imports(&g);
    assert!(found.is_empty(), "service → service imports: {found:#?}");
}

#[test]
fn units_form_no_cycle_and_model_is_a_leaf() {
    let g = tree();
    assert!(g.contains_key("config") && g.contains_key("plan") && g.contains_key("model"));
    let found = cycles(&g);
    assert!(found.is_empty(), "import cycles: {found:#?}\ngraph: {g:#?}");
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

/// `docs/architecture.md`'s picture of the tree names every module: each
/// entry of `src/` and of the layer folders.
#[test]
fn the_architecture_doc_names_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "mod.rs" && n != "tests.rs" && !n.ends_with(".html"))
            .collect()
    };
    let mut missing = Vec::new();
    for n in names(&root.join("src")) {
        let shown = if n.ends_with(".rs") {
            n.clone()
        } else {
            format!("{n}/")
        };
        if !doc.contains(&shown) {
            missing.push(format!("src/{shown}"));
        }
    }
    for layer in LAYERS {
        for n in names(&root.join("src").join(layer)) {
            let stem = n.trim_end_matches(".rs");
            if !doc.contains(stem) {
                missing.push(format!("src/{layer}/{n}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in docs/architecture.md: {missing:?}"
    );
}
