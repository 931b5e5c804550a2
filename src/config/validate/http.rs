//! `http` (images and ignition) and `admin` (status, metrics, control API).

use std::net::SocketAddr;
use std::path::Path;

use super::{Errs, NetParts, resolve, sock};
use crate::config::{raw, secret};
use crate::model::cluster::{AdminCfg, HttpCfg};

pub(crate) fn build_http(
    t: &raw::Http,
    net: &NetParts,
    base: &Path,
    e: &mut Errs,
) -> Option<HttpCfg> {
    let listen = match &t.listen {
        Some(s) => sock(e, "http.listen", s, Some(8080)),
        None => net.appliance_ip.map(|ip| SocketAddr::new(ip.into(), 8080)),
    };
    for (f, v) in [
        ("imagesDir", &t.images_dir),
        ("ignitionDir", &t.ignition_dir),
    ] {
        if v.trim().is_empty() {
            e.push(format!("http.{f}"), "must not be empty");
        }
    }
    Some(HttpCfg {
        enabled: t.enabled,
        listen: listen?,
        images_dir: resolve(base, &t.images_dir),
        ignition_dir: resolve(base, &t.ignition_dir),
    })
}

pub(crate) fn build_admin(a: &raw::Admin, base: &Path, e: &mut Errs) -> Option<AdminCfg> {
    let listen = sock(e, "admin.listen", &a.listen, None);
    let token_file = a.token_file.as_deref().map(|f| resolve(base, f));
    if let Some(f) = &token_file
        && let Err(m) = secret::check_token_file(f)
    {
        e.push("admin.tokenFile", m);
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
    Some(AdminCfg {
        enabled: a.enabled,
        listen: listen?,
        token_file,
    })
}
