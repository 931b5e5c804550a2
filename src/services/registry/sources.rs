//! The image sources the mirror stands in for (issue #36 items 6 and 2):
//! the `imageDigestSources` pairs `render mirror` prints and `preflight`
//! follows to find the release image in the mirror — every `pullThrough`
//! upstream, every repository in storage named after its source
//! (`<registry host>/<path>`), and every entry of an oc-mirror
//! `idms-oc-mirror.yaml` found in or next to the storage tree (its mirrors
//! rewritten to the registry's name).
//!
//! Invariant: one list for both, so what `preflight` checks is what the
//! install-config fragment tells the nodes.

use super::storage::Store;
use crate::model::registry::RegistryCfg;

/// `host[:port]` clients use (`:443` left out).
pub fn pull_host(r: &RegistryCfg) -> String {
    match r.listen.port() {
        443 => r.name.clone(),
        p => format!("{}:{p}", r.name),
    }
}

/// (source, mirror) pairs from an oc-mirror IDMS file's text.
pub fn idms_pairs(text: &str, host: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for doc in text.split("\n---") {
        let Ok(v) = serde_saphyr::from_str::<serde_json::Value>(doc) else {
            continue;
        };
        let list = v
            .pointer("/spec/imageDigestMirrors")
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default();
        for m in list {
            let Some(source) = m.get("source").and_then(serde_json::Value::as_str) else {
                continue;
            };
            for mirror in m
                .get("mirrors")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
            {
                // Keep the path, put the appliance's name in place of the host.
                let path = mirror.split_once('/').map_or("", |(_, p)| p);
                out.push((source.to_string(), format!("{host}/{path}")));
            }
        }
    }
    out
}

/// Every (source, mirror) pair, sorted, without duplicates.
pub fn digest_sources(r: &RegistryCfg) -> Vec<(String, String)> {
    let host = pull_host(r);
    let mut pairs: Vec<(String, String)> = r
        .pull_through
        .iter()
        .map(|p| (p.registry.clone(), format!("{host}/{}", p.registry)))
        .collect();
    for repo in Store::new(&r.storage).catalog() {
        let first = repo.split('/').next().unwrap_or_default();
        let covered = r.pull_through.iter().any(|p| p.registry == first);
        if (first.contains('.') || first.contains(':')) && !covered {
            pairs.push((repo.clone(), format!("{host}/{repo}")));
        }
    }
    if let Some(parent) = r.storage.parent() {
        for dir in [r.storage.as_path(), parent] {
            if let Ok(text) = std::fs::read_to_string(dir.join("idms-oc-mirror.yaml")) {
                pairs.extend(idms_pairs(&text, &host));
                break;
            }
        }
    }
    pairs.sort();
    pairs.dedup();
    pairs
}

/// The mirror repositories (paths on `host`, in `pairs` order) that stand
/// in for `repo` (`quay.io/ns/name`): a source matches the repository
/// itself or a namespace above it, as `imageDigestSources` do.
pub fn mirrors_for(pairs: &[(String, String)], host: &str, repo: &str) -> Vec<String> {
    pairs
        .iter()
        .filter_map(|(source, mirror)| {
            let rest = match repo.strip_prefix(source.as_str())? {
                "" => "",
                r => r.strip_prefix('/')?,
            };
            let path = mirror.strip_prefix(host)?.strip_prefix('/')?;
            Some(match (path, rest) {
                (p, "") => p.to_string(),
                ("", r) => r.to_string(),
                (p, r) => format!("{p}/{r}"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idms_mirrors_get_the_appliance_name() {
        let text = "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nspec:\n  imageDigestMirrors:\n  - mirrors:\n    - old.example:8443/openshift/release\n    source: quay.io/openshift-release-dev/ocp-v4.0-art-dev\n";
        assert_eq!(
            idms_pairs(text, "mirror.lab.test:5000"),
            vec![(
                "quay.io/openshift-release-dev/ocp-v4.0-art-dev".to_string(),
                "mirror.lab.test:5000/openshift/release".to_string()
            )]
        );
    }

    #[test]
    fn a_source_matches_its_repository_and_the_ones_below_it() {
        let h = "m.lab:5000";
        let pairs = vec![
            ("quay.io".to_string(), format!("{h}/quay.io")),
            (
                "quay.io/openshift-release-dev/ocp-release".to_string(),
                format!("{h}/openshift/release-images"),
            ),
        ];
        assert_eq!(
            mirrors_for(&pairs, h, "quay.io/openshift-release-dev/ocp-release"),
            vec![
                "quay.io/openshift-release-dev/ocp-release".to_string(),
                "openshift/release-images".to_string()
            ]
        );
        assert!(mirrors_for(&pairs, h, "quay.iox/a").is_empty());
        assert!(mirrors_for(&pairs, h, "docker.io/library/x").is_empty());
    }
}
