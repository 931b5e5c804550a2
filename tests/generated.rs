//! What the binary generates for other tools, checked with those tools
//! (issue #27 items 12 and 13):
//! - `completion bash|zsh|fish`: each script parses (`bash -n`, `zsh -n`,
//!   `fish -n`), and bash and fish complete subcommands, a subcommand's
//!   values (`completion <TAB>`, `lb <TAB>`) and `--log-format` values, but
//!   not the hidden `manpage`;
//! - `manpage DIR`: man-db renders every page (`man -l`, groff warnings on)
//!   without a diagnostic (all groff warnings on), `lexgrog` finds each NAME line (what `mandb`
//!   indexes for apropos), the top page lists the subcommand pages;
//! - `schema`: a JSON Schema that a real validator (python `jsonschema`
//!   from PyPI in a venv under target/tmp, cached) accepts as draft-07,
//!   that every shipped `configs/*.yaml` satisfies, and that rejects a
//!   misspelt key at the top, in a section, in a node, and a malformed
//!   duration, each of which `check` rejects too (the schema and the
//!   parser agree).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{BIN, run};

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn completion(shell: &str) -> String {
    let (code, out, err) = run(BIN, &["completion", shell]);
    assert_eq!(code, 0, "completion {shell}: {err}");
    assert!(!out.is_empty());
    out
}

// ---- completion -------------------------------------------------------------

/// What bash offers for `words` (the last one being completed) with the
/// generated script sourced, as readline would call it.
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let body = format!(
        "source {}\nCOMP_WORDS=(\"$@\")\nCOMP_CWORD=$(($# - 1))\nCOMP_LINE=\"$*\"\nCOMP_POINT=${{#COMP_LINE}}\n\
         _crc__appliance crc-appliance \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let mut args = vec!["-c", body.as_str(), "bash"];
    args.extend_from_slice(words);
    let (code, out, err) = run("bash", &args);
    assert_eq!(code, 0, "{err}");
    out.lines().map(str::to_string).collect()
}

#[test]
fn bash_completion_parses_and_completes() {
    require_tools!("bash");
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("crc-appliance.bash");
    std::fs::write(&f, completion("bash")).unwrap();
    let (code, out, err) = run("bash", &["-n", f.to_str().unwrap()]);
    assert_eq!(code, 0, "bash -n: {out}{err}");

    let top = bash_complete(&f, &["crc-appliance", ""]);
    for w in [
        "serve",
        "status",
        "wait-for",
        "lb",
        "completion",
        "schema",
        "--cluster",
    ] {
        assert!(top.iter().any(|x| x == w), "{w} not offered: {top:?}");
    }
    assert!(
        !top.iter().any(|x| x == "manpage"),
        "hidden manpage offered: {top:?}"
    );
    assert_eq!(bash_complete(&f, &["crc-appliance", "l"]), ["lb"]);
    // Below a subcommand (broken in clap_complete for hyphenated names,
    // clap-rs/clap#6421; the binary patches the labels).
    let shells = bash_complete(&f, &["crc-appliance", "completion", ""]);
    for s in ["bash", "zsh", "fish"] {
        assert!(shells.iter().any(|x| x == s), "{s}: {shells:?}");
    }
    let lb = bash_complete(&f, &["crc-appliance", "lb", ""]);
    for s in ["disable", "enable", "status"] {
        assert!(lb.iter().any(|x| x == s), "{s}: {lb:?}");
    }
    assert_eq!(
        bash_complete(&f, &["crc-appliance", "wait-for", "b"]),
        ["bootstrap-complete"]
    );
    assert_eq!(
        bash_complete(&f, &["crc-appliance", "--log-format", ""]),
        ["auto", "text", "json"]
    );
}

#[test]
fn zsh_completion_parses() {
    require_tools!("zsh");
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("_crc-appliance");
    let script = completion("zsh");
    assert!(script.starts_with("#compdef crc-appliance"), "{script:.80}");
    assert!(
        !script.contains("manpage"),
        "hidden manpage in the zsh script"
    );
    std::fs::write(&f, script).unwrap();
    let (code, out, err) = run("zsh", &["-n", f.to_str().unwrap()]);
    assert_eq!(code, 0, "zsh -n: {out}{err}");
}

#[test]
fn fish_completion_parses_and_completes() {
    require_tools!("fish");
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("crc-appliance.fish");
    std::fs::write(&f, completion("fish")).unwrap();
    let (code, out, err) = run("fish", &["--no-execute", f.to_str().unwrap()]);
    assert_eq!(code, 0, "fish -n: {out}{err}");
    let offered = |line: &str| -> Vec<String> {
        let cmd = format!("source {}; complete -C '{line}'", f.display());
        let (code, out, err) = run("fish", &["--no-config", "-c", &cmd]);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    };
    let top = offered("crc-appliance ");
    assert!(top.iter().any(|x| x == "wait-for"), "{top:?}");
    assert!(!top.iter().any(|x| x == "manpage"), "{top:?}");
    let lb = offered("crc-appliance lb ");
    assert!(lb.iter().any(|x| x == "disable"), "{lb:?}");
}

// ---- man pages ----------------------------------------------------------------

fn manpages(dir: &Path) -> Vec<PathBuf> {
    let (code, out, err) = run(BIN, &["manpage", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "manpage: {err}");
    let files: Vec<PathBuf> = out.lines().map(PathBuf::from).collect();
    assert!(files.len() > 10, "{out}");
    files
}

/// `man -l` with every groff warning on (`w`): (exit code, text,
/// diagnostics).
fn man_l(page: &Path) -> (i32, String, String) {
    let out = std::process::Command::new("man")
        .args(["--warnings=w", "-l", page.to_str().unwrap()])
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn man_pages_render_with_man_db_without_warnings() {
    require_tools!("man", "lexgrog");
    let d = tempfile::tempdir().unwrap();
    let files = manpages(d.path());
    for page in &files {
        let (code, text, diag) = man_l(page);
        assert_eq!(code, 0, "man -l {}: {diag}", page.display());
        assert!(diag.trim().is_empty(), "man -l {}: {diag}", page.display());
        assert!(text.contains("NAME") && text.contains("SYNOPSIS"), "{text}");
        let (code, whatis, err) = run("lexgrog", &[page.to_str().unwrap()]);
        assert_eq!(code, 0, "lexgrog {}: {whatis}{err}", page.display());
        assert!(whatis.contains(" - "), "{whatis}");
    }
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("manpage")), "{names:?}");
    let (_, top, _) = man_l(&d.path().join("crc-appliance.1"));
    for needle in [
        "crc-appliance-serve(1)",
        "crc-appliance-wait-for(1)",
        "ENVIRONMENT",
        "JOURNAL_STREAM",
        "EXIT STATUS",
        "--log-format",
    ] {
        assert!(top.contains(needle), "{needle} not in the page:\n{top}");
    }
    // The negative control: a broken page is reported by the same call.
    let bad = d.path().join("bad.1");
    let page = std::fs::read_to_string(d.path().join("crc-appliance.1")).unwrap();
    std::fs::write(&bad, page.replacen(".SH NAME", ".SH NAME\n.BOGUS", 1)).unwrap();
    let (_, _, diag) = man_l(&bad);
    assert!(
        diag.contains("BOGUS"),
        "groff did not warn about .BOGUS: {diag}"
    );
}

// ---- schema ---------------------------------------------------------------------

/// python `jsonschema` and PyYAML from PyPI in a venv under target/tmp
/// (created once; pinned).
fn schema_venv() -> Result<PathBuf, String> {
    const PACKAGES: [&str; 2] = ["jsonschema==4.23.0", "PyYAML==6.0.2"];
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("schema-venv");
    let py = venv.join("bin/python");
    let ready = |py: &Path| run(py.to_str().unwrap(), &["-c", "import jsonschema, yaml"]).0 == 0;
    if py.is_file() && ready(&py) {
        return Ok(py);
    }
    let (code, out, err) = run("/usr/bin/python3", &["-m", "venv", venv.to_str().unwrap()]);
    if code != 0 {
        return Err(format!("cannot create a venv (python3-venv): {out}{err}"));
    }
    let mut args = vec!["-m", "pip", "install", "-q"];
    args.extend(PACKAGES);
    let (code, out, err) = run(py.to_str().unwrap(), &args);
    if code != 0 {
        return Err(format!("pip install {PACKAGES:?} failed: {out}{err}"));
    }
    Ok(py)
}

/// Validate each YAML file against the schema: one line per file,
/// `ok <file>` or `invalid <file>: <errors>`; exit 1 on a bad schema.
const VALIDATE: &str = r#"import json, sys, yaml, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft7Validator.check_schema(schema)
v = jsonschema.Draft7Validator(schema)
for f in sys.argv[2:]:
    errors = sorted(v.iter_errors(yaml.safe_load(open(f))), key=lambda e: list(e.path))
    if errors:
        print("invalid %s: %s" % (f, "; ".join("%s: %s" % ("/".join(map(str, e.path)), e.message) for e in errors)))
    else:
        print("ok %s" % f)
"#;

#[test]
fn schema_validates_shipped_configs_and_rejects_unknown_keys() {
    let test = "schema_validates_shipped_configs_and_rejects_unknown_keys";
    let py = match schema_venv() {
        Ok(py) => py,
        Err(why) => {
            skipped!("SKIPPED {test}: {why}");
            return;
        }
    };
    let d = tempfile::tempdir().unwrap();
    let (code, schema, err) = run(BIN, &["schema"]);
    assert_eq!(code, 0, "{err}");
    let schema_file = d.path().join("cluster.schema.json");
    std::fs::write(&schema_file, &schema).unwrap();
    let script = d.path().join("validate.py");
    std::fs::write(&script, VALIDATE).unwrap();

    let mut configs: Vec<PathBuf> = std::fs::read_dir(repo("configs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    configs.sort();
    assert!(configs.len() >= 2, "{configs:?}");

    let example = std::fs::read_to_string(repo("configs/example.yaml")).unwrap();
    let mutate = |from: &str, to: &str| {
        assert!(example.contains(from), "example.yaml lacks {from:?}");
        example.replacen(from, to, 1)
    };
    // (file name, text, what the validator must name)
    let broken = [
        (
            "top.yaml",
            format!("{example}\nbogusKey: 1\n"),
            "'bogusKey' was unexpected",
        ),
        (
            "section.yaml",
            mutate(
                "healthCheck: { interval: 5s",
                "healthCheck: { intervall: 5s",
            ),
            "'intervall' was unexpected",
        ),
        (
            "node.yaml",
            mutate("role: bootstrap, mac:", "role: bootstrap, macc:"),
            "'macc' was unexpected",
        ),
        (
            "duration.yaml",
            mutate("leaseTime: 12h", "leaseTime: 12 hours"),
            "dhcp/leaseTime",
        ),
    ];
    let mut files: Vec<String> = configs.iter().map(|p| p.display().to_string()).collect();
    for (name, text, _) in &broken {
        let f = d.path().join(name);
        std::fs::write(&f, text).unwrap();
        files.push(f.display().to_string());
    }
    let mut args = vec![script.to_str().unwrap(), schema_file.to_str().unwrap()];
    args.extend(files.iter().map(String::as_str));
    let (code, out, err) = run(py.to_str().unwrap(), &args);
    assert_eq!(code, 0, "the validator rejected the schema: {out}{err}");
    for c in &configs {
        let line = format!("ok {}", c.display());
        assert!(out.lines().any(|l| l == line), "{line} expected:\n{out}");
    }
    for (name, _, why) in &broken {
        let f = d.path().join(name);
        let line = out
            .lines()
            .find(|l| l.contains(&f.display().to_string()))
            .unwrap();
        assert!(line.starts_with("invalid "), "{name} passed the schema");
        assert!(line.contains(why), "{name}: {line}");
        // The parser agrees.
        let (code, o, e) = run(BIN, &["check", "--cluster", f.to_str().unwrap()]);
        assert_eq!(code, 78, "check {name}: {o}{e}");
    }
}
