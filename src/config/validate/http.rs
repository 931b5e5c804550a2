//! `http` (images and ignition) and `admin` (status, metrics, control API).

use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};

use super::{Errs, NetParts, client_cidrs, resolve, sock};
use crate::config::{raw, secret};
use crate::model::boot::HTTPS_PORT;
use crate::model::cluster::{AdminCfg, HttpCfg, HttpTlsCfg, Ipv4Net, NodeCfg};
use crate::model::sourcenet::SourceNet;

pub(crate) fn build_http(
    t: &raw::Http,
    net: &NetParts,
    nodes: Option<&[NodeCfg]>,
    base: &Path,
    e: &mut Errs,
) -> Option<HttpCfg> {
    let listen = match &t.listen {
        Some(s) => sock(e, "http.listen", s, Some(8080)),
        None => net.appliance_ip.map(|ip| SocketAddr::new(ip.into(), 8080)),
    };
    let tls = t.tls.as_ref().and_then(|x| tls_files(x, base, e));
    let tls_listen = tls_listen(t, net, nodes, e);
    for (f, v) in [
        ("imagesDir", &t.images_dir),
        ("ignitionDir", &t.ignition_dir),
    ] {
        if v.trim().is_empty() {
            e.push(format!("http.{f}"), "must not be empty");
        }
    }
    if t.max_connections_per_client == 0 {
        e.push("http.maxConnectionsPerClient", "must be at least 1");
    }
    let boot_iso_cidrs = t
        .boot_iso_cidrs
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            e.parse::<Ipv4Net>(
                &format!("http.bootIsoCidrs[{i}]"),
                c,
                "IPv4 CIDR (a.b.c.d/prefix)",
            )
        })
        .collect();
    let ignition_client_cidrs = client_cidrs(
        e,
        "http.ignitionClientCidrs",
        &t.ignition_client_cidrs,
        "every ignition config, bootstrap.ign's CA keys included",
    );
    let images_dir = resolve(base, &t.images_dir);
    let ignition_dir = resolve(base, &t.ignition_dir);
    if !t.images_dir.trim().is_empty()
        && !t.ignition_dir.trim().is_empty()
        && let Some(why) = dirs_overlap(&images_dir, &ignition_dir)
    {
        e.push("http.ignitionDir", why);
    }
    Some(HttpCfg {
        enabled: t.enabled,
        listen: listen?,
        images_dir,
        ignition_dir,
        max_connections_per_client: t.max_connections_per_client as usize,
        boot_iso_cidrs,
        ignition_client_cidrs,
        tls_listen: tls_listen?,
        tls,
    })
}

/// The HTTPS listener's address when it runs: `http.tlsListen` (default
/// port 8443), else `<applianceIP>:8443` when `http.tls` is set or a
/// node's BMC may be given the `https://` URL; `Some(None)`: it does not
/// run; `None`: an error was pushed.
fn tls_listen(
    t: &raw::Http,
    net: &NetParts,
    nodes: Option<&[NodeCfg]>,
    e: &mut Errs,
) -> Option<Option<SocketAddr>> {
    if let Some(s) = &t.tls_listen {
        return sock(e, "http.tlsListen", s, Some(HTTPS_PORT)).map(Some);
    }
    let https_media = nodes.unwrap_or_default().iter().any(|n| {
        n.bmc
            .as_ref()
            .is_some_and(|b| b.media != crate::model::bmc::BmcMedia::Http)
    });
    if t.tls.is_none() && !https_media {
        return Some(None);
    }
    // Without applianceIP the network section has already reported it.
    net.appliance_ip
        .map(|ip| Some(SocketAddr::new(ip.into(), HTTPS_PORT)))
}

/// `http.tls`: both files readable, the key by its owner only (as token
/// and password files: `secret::check_secret_file`); parsing and the key
/// matching the certificate are checked before the listener binds.
fn tls_files(t: &raw::HttpTls, base: &Path, e: &mut Errs) -> Option<HttpTlsCfg> {
    let cert_file = resolve(base, &t.cert_file);
    let key_file = resolve(base, &t.key_file);
    let mut ok = true;
    for (field, f) in [("certFile", &cert_file), ("keyFile", &key_file)] {
        if let Err(err) = std::fs::File::open(f) {
            e.push(
                format!("http.tls.{field}"),
                format!("{}: {err}", f.display()),
            );
            ok = false;
        } else if field == "keyFile"
            && let Err(m) = secret::check_secret_file(f, true)
        {
            e.push("http.tls.keyFile", m.to_string());
            ok = false;
        }
    }
    ok.then_some(HttpTlsCfg {
        cert_file,
        key_file,
    })
}

/// Why the two dirs must not be served as they are: `/images` serves
/// everything under imagesDir to anyone, while ignition (and the install
/// dir's `auth/kubeconfig`) must only reach the cluster network. Compared
/// after resolving symlinks where the dirs exist, lexically otherwise.
fn dirs_overlap(images: &Path, ignition: &Path) -> Option<String> {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| lexical(p));
    let (i, g) = (real(images), real(ignition));
    let what = if i == g {
        "is the same directory as http.imagesDir"
    } else if g.starts_with(&i) {
        "is inside http.imagesDir"
    } else if i.starts_with(&g) {
        "contains http.imagesDir"
    } else {
        return None;
    };
    Some(format!(
        "{} {what} ({}): /images serves everything there to anyone, so ignition files and the install's auth/ would bypass the ignition access rule; use separate directories",
        ignition.display(),
        i.display()
    ))
}

/// `p` without `.` and `..` components (no filesystem access).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

pub(crate) fn build_admin(a: &raw::Admin, base: &Path, e: &mut Errs) -> Option<AdminCfg> {
    let listen = sock(e, "admin.listen", &a.listen, None);
    let token_file = a.token_file.as_deref().map(|f| resolve(base, f));
    if let Some(f) = &token_file
        && let Err(m) = secret::check_token_file(f)
    {
        e.push("admin.tokenFile", m.to_string());
    }
    if a.enabled
        && token_file.is_none()
        && let Some(l) = listen
        && !l.ip().is_loopback()
    {
        e.push(
            "admin.listen",
            format!(
                "{l} is not a loopback address: set admin.tokenFile (a file with mode 0600 holding the API token) or listen on 127.0.0.1"
            ),
        );
    }
    let allow_from = a.allow_from.as_ref().map(|l| allow_from(l, e));
    Some(AdminCfg {
        enabled: a.enabled,
        listen: listen?,
        token_file,
        allow_from,
    })
}

/// `admin.allowFrom`: IPv4 or IPv6 CIDRs, none of them every address.
fn allow_from(list: &[String], e: &mut Errs) -> Vec<SourceNet> {
    let mut out = Vec::new();
    for (i, text) in list.iter().enumerate() {
        let field = format!("admin.allowFrom[{i}]");
        let what = "CIDR (a.b.c.d/prefix or an IPv6 prefix/length)";
        let Some(net) = e.parse::<SourceNet>(&field, text, what) else {
            continue;
        };
        if net.prefix() == 0 {
            e.push(
                field,
                format!("{text:?} lets every address in; remove admin.allowFrom to allow every source, or list the networks that need the admin API"),
            );
            continue;
        }
        out.push(net);
    }
    out
}
