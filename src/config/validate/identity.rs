//! `name` and `baseDomain`: the cluster domain `<name>.<baseDomain>`.

use super::Errs;
use crate::config::raw::ClusterFile;
use crate::model::names::{is_domain, is_label, label_problem};

pub(crate) struct Identity {
    pub name: String,
    pub base_domain: String,
    /// `<name>.<baseDomain>`, lower case, no trailing dot.
    pub domain: String,
}

pub(crate) fn build(raw: &ClusterFile, e: &mut Errs) -> Option<Identity> {
    let before = e.len();
    if !is_label(&raw.name) {
        e.push("name", label_problem(&raw.name));
    }
    let base_domain = raw.base_domain.trim_end_matches('.').to_string();
    if !is_domain(&base_domain) {
        e.push(
            "baseDomain",
            format!(
                "{:?} is not a valid lower-case domain name",
                raw.base_domain
            ),
        );
    }
    let domain = format!("{}.{}", raw.name, base_domain);
    if domain.len() > 200 {
        e.push(
            "baseDomain",
            format!("cluster domain {domain:?} is too long (max 200 characters)"),
        );
    }
    (e.len() == before).then(|| Identity {
        name: raw.name.clone(),
        base_domain,
        domain,
    })
}
