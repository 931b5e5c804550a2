//! The commands that read no cluster file and print what other tools
//! consume: `completion SHELL` (clap_complete), `schema` (the cluster file's
//! JSON Schema, `config::schema`) and the hidden `manpage DIR`
//! (clap_mangen; scripts/package.sh and the RPM spec call it).
//!
//! Everything here is derived from the clap definition or the raw config
//! types, so the scripts, pages and schema cannot drift from the binary
//! that ships them. Output is deterministic (no dates): packages built from
//! the same source are identical.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use clap::CommandFactory as _;
use clap_mangen::roff::{Roff, bold, roman};

use super::cli::{Cli, Command};
use crate::config;

/// Run one of the commands for which `Command::needs_cluster` is false.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Completion { shell } => {
            let mut out = std::io::stdout().lock();
            out.write_all(completion(shell).as_bytes())?;
            out.flush()?;
        }
        Command::Schema => {
            let text = serde_json::to_string_pretty(&config::schema::json_schema())?;
            println!("{text}");
        }
        Command::Manpage { dir } => {
            for f in manpages(&dir)? {
                println!("{}", f.display());
            }
        }
        other => anyhow::bail!("{other:?} reads a cluster file"),
    }
    Ok(())
}

const NAME: &str = "crc-appliance";

/// The completion script for `shell`, without the hidden subcommands
/// (clap_complete lists them: `manpage` is for packaging, not for a TAB).
pub fn completion(shell: clap_complete::Shell) -> String {
    let full = Cli::command();
    let mut cmd = clap::Command::new(NAME)
        .about(full.get_about().cloned().unwrap_or_default())
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, NAME, &mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    match shell {
        // clap_complete spells the case labels of a hyphenated binary's
        // subcommands differently from the state its loop computes
        // (`crc__subcmd__appliance__subcmd__lb` vs
        // `crc__appliance__subcmd__lb`), so nothing after a subcommand
        // would complete (clap-rs/clap#6421). Spell them as the loop does;
        // a no-op once clap_complete is fixed.
        clap_complete::Shell::Bash => text.replace("crc__subcmd__appliance", "crc__appliance"),
        _ => text,
    }
}

/// Write `crc-appliance.1` and one page per visible subcommand
/// (`crc-appliance-lb-disable.1`, …) into `dir`; returns the files.
pub fn manpages(dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        subcommand_pages(sub, dir, &mut written)?;
    }
    let top = dir.join(format!("{NAME}.1"));
    let mut text = Vec::new();
    render_top(cmd, &mut text)?;
    std::fs::write(&top, text).with_context(|| format!("writing {}", top.display()))?;
    written.push(top);
    Ok(written)
}

fn subcommand_pages(
    cmd: &clap::Command,
    dir: &Path,
    written: &mut Vec<std::path::PathBuf>,
) -> anyhow::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        subcommand_pages(sub, dir, written)?;
    }
    let man = man(cmd.clone());
    let path = man
        .generate_to(dir)
        .with_context(|| format!("writing a man page into {}", dir.display()))?;
    written.push(path);
    Ok(())
}

fn man(cmd: clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd).manual("crc-appliance manual")
}

/// The top page: clap's sections plus what a reader of `man crc-appliance`
/// looks for and clap does not know (environment, files, exit status).
fn render_top(cmd: clap::Command, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let man = man(cmd);
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    man.render_subcommands_section(w)?;
    let mut roff = Roff::default();
    section(&mut roff, "ENVIRONMENT", ENVIRONMENT);
    section(&mut roff, "FILES", FILES);
    section(&mut roff, "EXIT STATUS", EXIT_STATUS);
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("systemctl"),
        roman("(1), "),
        bold("journalctl"),
        roman("(1), "),
        bold("openshift-install"),
        roman(
            "(1); the guides in /usr/share/doc/crc-appliance (install.md, operations.md, \
             configuration.md).",
        ),
    ]);
    roff.to_writer(w)?;
    man.render_version_section(w)
}

/// A section of tagged paragraphs: `(term, text)`.
fn section(roff: &mut Roff, title: &str, items: &[(&str, &str)]) {
    roff.control("SH", [title]);
    for (term, text) in items {
        roff.control("TP", []);
        roff.text([bold(*term)]);
        roff.text([roman(*text)]);
    }
}

const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "RUST_LOG",
        "Log filter (default info), e.g. debug or crc_appliance::services::lb=debug.",
    ),
    (
        "JOURNAL_STREAM",
        "Set by systemd when stderr is the journal: with --log-format auto, events go to \
         journald with their priority and fields.",
    ),
];

const FILES: &[(&str, &str)] = &[
    (
        "/etc/crc-appliance/cluster.yaml",
        "The cluster file of the systemd unit (crc-appliance.service); \
         /etc/crc-appliance/example.yaml is a commented example.",
    ),
    (
        "/var/lib/crc-appliance",
        "State: DHCP leases and the network-boot install state.",
    ),
];

const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Success."),
    (
        "1",
        "Failure (a service could not start, an admin call was refused, preflight findings).",
    ),
    ("2", "Usage error."),
    ("78", "The cluster file is invalid (EX_CONFIG)."),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_for_every_visible_subcommand_and_none_for_manpage() {
        let d = tempfile::tempdir().unwrap();
        let files = manpages(d.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for n in [
            "crc-appliance.1",
            "crc-appliance-serve.1",
            "crc-appliance-lb-disable.1",
            "crc-appliance-completion.1",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
        }
        assert!(!names.iter().any(|x| x.contains("manpage")), "{names:?}");
        let top = std::fs::read_to_string(d.path().join("crc-appliance.1")).unwrap();
        assert!(top.contains(".SH ENVIRONMENT"), "{top}");
        assert!(top.contains("crc\\-appliance\\-serve(1)"), "{top}");
    }
}
