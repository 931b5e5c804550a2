//! `crc-appliance render mirror` (issue #36, docs/registry.md): the
//! install-config fragments that point a cluster at the appliance's mirror
//! registry — `additionalTrustBundle` (the appliance's CA, made now when
//! it does not exist yet), the pull secret's `auths` entry, and
//! `imageDigestSources` (`services/registry/sources.rs`: every
//! `pullThrough` upstream, every repository in storage named after its
//! source, every entry of an oc-mirror `idms-oc-mirror.yaml` next to the
//! storage tree, rewritten to the registry's name).
//!
//! The `auths` entry is real with `--user U --password-file F` (the
//! password checked against `registry.htpasswdFile` with bcrypt first: a
//! wrong one is an error, never an entry that fails later); without them
//! the output says that nodes pull anonymously and shows the entry's shape.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::model::registry::RegistryCfg;
use crate::plan::Plan;

use crate::services::registry::sources::pull_host;

/// `base64(user:password)` once the password, read from `file` (its
/// trailing newline dropped), matches `user`'s bcrypt hash in the
/// registry's htpasswd file.
fn checked_auth(r: &RegistryCfg, user: &str, file: &Path) -> anyhow::Result<String> {
    let Some(htpasswd) = &r.htpasswd_file else {
        anyhow::bail!(
            "render mirror --user: registry.htpasswdFile is not set, so the mirror has no users (make one with htpasswd -B)"
        );
    };
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("--password-file {}: {e}", file.display()))?;
    let password = text.strip_suffix('\n').unwrap_or(&text);
    let password = password.strip_suffix('\r').unwrap_or(password);
    let users = crate::services::registry::auth::Users::load(htpasswd)
        .map_err(|e| anyhow::anyhow!("registry.htpasswdFile: {e}"))?;
    if !users.has(user) {
        anyhow::bail!(
            "render mirror: {} has no user {user:?} (add it with htpasswd -B {} {user})",
            htpasswd.display(),
            htpasswd.display()
        );
    }
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    if users.check(&format!("Basic {auth}")).is_none() {
        anyhow::bail!(
            "render mirror: the password in {} is not {user:?}'s in {} (bcrypt check failed): no pull-secret entry printed",
            file.display(),
            htpasswd.display()
        );
    }
    Ok(auth)
}

/// The pull secret's lines: the entry for `login`'s user, or why none is
/// needed and its shape.
fn auths_lines(
    out: &mut String,
    r: &RegistryCfg,
    host: &str,
    login: Option<&(String, PathBuf)>,
) -> anyhow::Result<()> {
    if let Some((user, file)) = login {
        let auth = checked_auth(r, user, file)?;
        let _ = writeln!(
            out,
            "# pullSecret: merge this into \"auths\" (user {user} of registry.htpasswdFile, password checked):"
        );
        let entry = serde_json::json!({ "auths": { host: { "auth": auth } } });
        let _ = writeln!(out, "{entry}");
        return Ok(());
    }
    let _ = writeln!(
        out,
        "# pullSecret: add this entry to \"auths\" (nodes in the cluster's networks pull without it;\n# for pushes put base64 of user:password from registry.htpasswdFile: echo -n user:pass | base64 -w0)"
    );
    let _ = writeln!(
        out,
        "# cluster pulls are anonymous from the cluster's networks; `render mirror --user U --password-file F` prints the entry filled in"
    );
    let _ = writeln!(
        out,
        "# {{\"auths\": {{\"{host}\": {{\"auth\": \"<base64 of user:password>\", \"email\": \"\"}}}}}}"
    );
    Ok(())
}

pub fn render(plan: &Plan, login: Option<&(String, PathBuf)>) -> anyhow::Result<String> {
    let c = &plan.cluster;
    let r = c.registry.as_ref().ok_or_else(|| {
        anyhow::anyhow!(
            "the registry: section is absent: there is no mirror to point the install at"
        )
    })?;
    let host = pull_host(r);
    let ca = if r.tls.is_some() {
        None
    } else {
        Some(crate::runtime::certs::ca::load_or_create(c)?)
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# install-config.yaml fragments for the mirror registry {host}"
    );
    match (&ca, &r.tls) {
        (Some(ca), _) => {
            let _ = writeln!(out, "# the appliance's CA ({}):", ca.cert_file.display());
            let _ = writeln!(out, "additionalTrustBundle: |");
            for line in ca.cert_pem.lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        (None, Some(t)) => {
            let _ = writeln!(
                out,
                "# registry.tls is set: put the CA that signed {} in additionalTrustBundle",
                t.cert_file.display()
            );
        }
        (None, None) => {}
    }
    auths_lines(&mut out, r, &host, login)?;
    let pairs = crate::services::registry::sources::digest_sources(r);
    let _ = writeln!(out, "imageDigestSources:");
    for (source, mirror) in &pairs {
        let _ = writeln!(out, "- source: {source}\n  mirrors:\n  - {mirror}");
    }
    if pairs.is_empty() {
        let _ = writeln!(
            out,
            "# (none yet: add registry.pullThrough, or mirror into storage as <registry host>/<path>)\n[]"
        );
    }
    Ok(out)
}
