//! The architecture, checked: which module may import which.
//!
//! Modules are taken from the file tree (`src/services/dns/handler.rs` is
//! the module `services::dns::handler`), references from the code's
//! `crate::`, `super::` and `self::` paths (including `use crate::{a, b::{c,
//! d}}` trees) and from paths through the file's own child modules (`mod
//! udp;` … `udp::run`); test code is left out. A reference lands on the
//! file of the longest module prefix it names. Units are the folders under
//! the layer folders (`services::dns`, `serve::admin`, `boot::iso9660`) and
//! the other top-level modules (`model`, `config`, `plan`, `timeline`).
//!
//! Rules:
//! - every top-level module sits on a floor ([`FLOORS`]) and no file imports
//!   a file on a higher floor: the kit (`runtime`) knows nothing built on
//!   it, only the composition root (`serve`) and `cmd` see everything;
//! - no import circle between files (a file's use of its own folder's
//!   `mod.rs`, the folder's face, is not an edge for this rule);
//! - no service or driver imports another service or driver (they share
//!   through `runtime`, `boot`, `model`, `timeline`);
//! - no import cycle between units; `model` is a leaf; `plan` does not
//!   depend on `config`.
//!
//! The checker is tested on made-up trees first, so a rule that stopped
//! matching would fail here rather than pass silently.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/srctree.rs"]
mod srctree;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layer folders whose sub-modules are units of their own.
const LAYERS: [&str; 7] = [
    "runtime", "serve", "services", "drivers", "boot", "host", "cmd",
];

/// The floors of the house, lowest first: a file may import files on its
/// own floor or below, never above. `main`, `lib` and `bin` are the roof
/// (they may import anything and nothing imports them).
const FLOORS: [(&str, u8); 11] = [
    ("model", 0),
    ("plan", 1),
    ("config", 2),
    ("runtime", 3),
    ("boot", 4),
    ("timeline", 5),
    ("services", 6),
    ("drivers", 6),
    ("host", 7),
    ("serve", 8),
    ("cmd", 9),
];
const ROOF: [&str; 3] = ["main", "lib", "bin"];

/// File-level circles known today, each with the files in it and why. A
/// circle in the tree is tolerated only if all of its files are in one entry
/// (so a circle may shrink, never grow or appear); delete an entry when its
/// circle is broken.
const KNOWN_CIRCLES: &[(&str, &[&str])] = &[
    (
        "the BMC client falls back to a session that calls through the client; \
         the error names the client's connect timeout",
        &[
            "drivers/bmc/client.rs",
            "drivers/bmc/error.rs",
            "drivers/bmc/session.rs",
        ],
    ),
    (
        "driver.rs re-exports install.rs's outcome, install.rs drives the Driver",
        &["drivers/libvirt/driver.rs", "drivers/libvirt/install.rs"],
    ),
    (
        "reply.rs re-exports relay.rs's verdicts, relay.rs takes reply's Config",
        &["services/dhcp/relay.rs", "services/dhcp/reply.rs"],
    ),
];
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
        if kind == "self" {
            let mut base = module.to_vec();
            base.extend(segs(rest));
            return base;
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
        for kind in ["crate", "super", "self"] {
            if let Some(body) = stmt.trim_start().strip_prefix(&format!("{kind}::")) {
                for p in expand(body) {
                    out.push(resolve(kind, &p));
                }
            }
        }
    }
    // Inline paths: `crate::a::b`, `super::a`, `self::a`.
    for kind in ["crate", "super", "self"] {
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
            out.push(resolve(kind, &path));
        }
    }
    out
}

/// The code of a production file with comments and its inline test module
/// (`#[cfg(test)] mod tests {`, last in the file) left out, or `None` for a
/// test file or the roof.
fn production_code(rel: &Path, text: &str) -> Option<String> {
    let name = rel.file_name()?.to_string_lossy();
    let top = module_of(rel).first().cloned().unwrap_or_default();
    if name.ends_with("tests.rs") || ROOF.contains(&top.as_str()) {
        return None;
    }
    Some(
        text.split("#[cfg(test)]\nmod tests {")
            .next()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// The unit graph of `files` (path relative to `src/`, text).
fn graph_of(files: &[(PathBuf, String)]) -> Graph {
    let mut g = Graph::new();
    for (rel, text) in files {
        let module = module_of(rel);
        let Some(from) = unit(&module) else { continue };
        let Some(code) = production_code(rel, text) else {
            continue;
        };
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

/// The file graph of `files`: `src/`-relative path → the files it imports
/// (never itself).
fn file_graph_of(files: &[(PathBuf, String)]) -> Graph {
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|(rel, _)| (module_of(rel), rel.to_string_lossy().into_owned()))
        .collect();
    let file_of = |path: &[String]| -> Option<&String> {
        (1..=path.len()).rev().find_map(|n| modules.get(&path[..n]))
    };
    let mut g = Graph::new();
    for (rel, text) in files {
        let Some(code) = production_code(rel, text) else {
            continue;
        };
        let module = module_of(rel);
        let me = rel.to_string_lossy().into_owned();
        let deps = g.entry(me.clone()).or_default();
        let mut paths = references(&module, &code);
        paths.extend(child_references(&module, &code));
        for path in paths {
            if let Some(to) = file_of(&path)
                && *to != me
            {
                deps.insert(to.clone());
            }
        }
    }
    g
}

/// Paths through the file's own (non-test) child modules: `mod udp;` then
/// `udp::run()` or `use udp::Worker;`.
fn child_references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut children = Vec::new();
    let mut test_attr = false;
    for line in code.lines().map(str::trim) {
        let decl = line
            .strip_prefix("pub ")
            .or_else(|| line.strip_prefix("pub(crate) "))
            .unwrap_or(line);
        if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';'))
            && !test_attr
        {
            children.push(name.trim().to_string());
        }
        test_attr = line.starts_with("#[cfg(test)]") || (test_attr && line.starts_with("#["));
    }
    let mut out = Vec::new();
    for child in children {
        let pat = format!("{child}::");
        let mut rest = code;
        while let Some(i) = rest.find(&pat) {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + pat.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path = module.to_vec();
            path.push(child.clone());
            path.extend(
                rest.split("::")
                    .map(|p| {
                        p.chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect::<String>()
                    })
                    .take_while(|p| !p.is_empty() && p.chars().all(|c| !c.is_ascii_uppercase())),
            );
            out.push(path);
        }
    }
    out
}

fn floor(file: &str) -> Option<u8> {
    let top = module_of(Path::new(file)).first().cloned()?;
    FLOORS.iter().find(|(m, _)| *m == top).map(|(_, f)| *f)
}

/// `a → b` file edges that climb to a higher floor.
fn upward_imports(g: &Graph) -> Vec<String> {
    g.iter()
        .flat_map(|(a, ds)| ds.iter().map(move |b| (a, b)))
        .filter_map(|(a, b)| {
            let (fa, fb) = (floor(a)?, floor(b)?);
            (fb > fa).then(|| format!("{a} (floor {fa}) → {b} (floor {fb})"))
        })
        .collect()
}

/// Whether `to` is the face of a folder `from` is inside (`x/mod.rs`, or
/// `x.rs` beside `x/`): a file using it is using its own folder.
fn is_own_folder(from: &str, to: &str) -> bool {
    let dir = match to.strip_suffix("mod.rs") {
        Some(dir) => dir.to_string(),
        None => format!("{}/", to.trim_end_matches(".rs")),
    };
    from.starts_with(&dir) && from != to
}

/// The file-level circles (strongly connected sets of two or more files),
/// edges into one's own folder's `mod.rs` left out.
fn file_circles(g: &Graph) -> Vec<BTreeSet<String>> {
    let fwd: Graph = g
        .iter()
        .map(|(a, ds)| {
            let ds = ds
                .iter()
                .filter(|b| !is_own_folder(a, b))
                .cloned()
                .collect();
            (a.clone(), ds)
        })
        .collect();
    let mut circles: Vec<BTreeSet<String>> = Vec::new();
    for a in fwd.keys() {
        if circles.iter().any(|c| c.contains(a)) {
            continue;
        }
        let circle: BTreeSet<String> = fwd
            .keys()
            .filter(|b| *b == a || (reaches(&fwd, a, b) && reaches(&fwd, b, a)))
            .cloned()
            .collect();
        if circle.len() > 1 {
            circles.push(circle);
        }
    }
    circles
}

fn tree() -> Graph {
    graph_of(&srctree::tree_files())
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

fn fakes(files: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
    files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect()
}

fn fake(files: &[(&str, &str)]) -> Graph {
    graph_of(&fakes(files))
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
        "serve::admin",
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

#[test]
fn the_checker_finds_an_upward_import_in_every_spelling() {
    for (what, file, code) in [
        (
            "use",
            "runtime/registry.rs",
            "use crate::services::dns::Dns;",
        ),
        (
            "inline path",
            "runtime/status.rs",
            "fn f(h: &crate::serve::hub::Hub) {}",
        ),
        (
            "use tree",
            "runtime/reload.rs",
            "use crate::{model::Cluster, timeline::Events};",
        ),
        (
            "super climb",
            "runtime/limits/mod.rs",
            "use super::super::serve::hub::Hub;",
        ),
        (
            "one floor up",
            "timeline/recorder.rs",
            "use crate::services::dns::DnsStatus;",
        ),
        (
            "the kit to a driver",
            "runtime/ha.rs",
            "crate::drivers::bmc::go();",
        ),
    ] {
        let g = file_graph_of(&fakes(&[
            (file, code),
            ("model/mod.rs", ""),
            ("runtime/service.rs", ""),
            (
                "services/dns/mod.rs",
                "use crate::runtime::service::Service;",
            ),
            ("serve/hub.rs", "use crate::services::dns::Dns;"),
            ("timeline/mod.rs", "use crate::runtime::service::Tasks;"),
            ("drivers/bmc/mod.rs", "use crate::timeline::Events;"),
        ]));
        let found = upward_imports(&g);
        assert_eq!(found.len(), 1, "{what}: {found:?} in {g:#?}");
        assert!(found[0].starts_with(file), "{what}: {found:?}");
    }
}

#[test]
fn the_checker_finds_a_file_circle_but_not_a_folders_face() {
    let circles = |files: &[(&str, &str)]| file_circles(&file_graph_of(&fakes(files)));
    let found = circles(&[
        ("services/dhcp/relay.rs", "use super::reply::Config;"),
        (
            "services/dhcp/reply.rs",
            "pub use super::relay::{Dropped, Subnet};",
        ),
        (
            "services/dhcp/mod.rs",
            "mod relay;\nmod reply;\nfn f() { reply::handle(); }",
        ),
    ]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 2, "{found:?}");
    let found = circles(&[
        (
            "services/dns/mod.rs",
            "mod udp;\nuse udp::Worker;\npub struct Dns;",
        ),
        (
            "services/dns/udp.rs",
            "use super::Dns;\nuse self::inner::X;",
        ),
        (
            "config/validate/dhcp.rs",
            "mod proxy;\nfn f() { proxy::build(); }",
        ),
        ("config/validate/dhcp/proxy.rs", "use super::Segment;"),
    ]);
    assert!(
        found.is_empty(),
        "a folder's face is not a circle: {found:?}"
    );
    let found = circles(&[
        ("a/mod.rs", "mod x;\nmod y;\nmod z;\nfn f() { x::f(); }"),
        ("a/x.rs", "fn f() { super::y::g(); }"),
        ("a/y.rs", "use crate::a::z::Z;"),
        ("a/z.rs", "use self::super::x::X;\nuse super::x::X;"),
    ]);
    assert_eq!(found.len(), 1, "three files: {found:?}");
    assert_eq!(found[0].len(), 3, "{found:?}");
}

#[test]
fn every_top_level_module_has_a_floor() {
    let missing: BTreeSet<String> = srctree::tree_files()
        .iter()
        .filter_map(|(rel, _)| module_of(rel).first().cloned())
        .filter(|top| !ROOF.contains(&top.as_str()) && !FLOORS.iter().any(|(m, _)| m == top))
        .collect();
    assert!(
        missing.is_empty(),
        "put these on a floor in FLOORS: {missing:?}"
    );
}

#[test]
fn no_file_imports_a_file_on_a_higher_floor() {
    let g = file_graph_of(&srctree::tree_files());
    assert!(g.contains_key("serve/registry.rs") && g.contains_key("runtime/service.rs"));
    let found = upward_imports(&g);
    assert!(
        found.is_empty(),
        "imports that climb (see FLOORS): {found:#?}"
    );
}

#[test]
fn files_form_no_circle_but_the_known_ones() {
    let g = file_graph_of(&srctree::tree_files());
    let found: Vec<_> = file_circles(&g)
        .into_iter()
        .filter(|c| {
            !KNOWN_CIRCLES
                .iter()
                .any(|(_, files)| c.iter().all(|f| files.contains(&f.as_str())))
        })
        .collect();
    assert!(found.is_empty(), "files importing each other: {found:#?}");
}
