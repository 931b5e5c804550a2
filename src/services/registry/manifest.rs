//! Manifests as distribution reads and checks them (pure): the media type
//! of stored bytes (`registry/storage/manifeststore.go`), what an `Accept`
//! header supports (`registry/handlers/manifests.go`), and what a pushed
//! manifest references.

use super::names::Digest;

pub const DOCKER_V2: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// Largest manifest accepted on `PUT` (distribution v3's limit).
pub const MAX_MANIFEST: usize = 4 << 20;

/// The media type distribution serves stored `bytes` with; `None` when
/// they are not a schema 2 manifest it knows.
pub fn media_type(bytes: &[u8]) -> Option<&'static str> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if v.get("schemaVersion").and_then(serde_json::Value::as_i64) != Some(2) {
        return None;
    }
    match v.get("mediaType").and_then(serde_json::Value::as_str) {
        Some(DOCKER_V2) => Some(DOCKER_V2),
        Some(DOCKER_LIST) => Some(DOCKER_LIST),
        Some(OCI_MANIFEST) => Some(OCI_MANIFEST),
        Some(OCI_INDEX) => Some(OCI_INDEX),
        Some("") | None if v.get("manifests").is_some_and(|m| !m.is_null()) => Some(OCI_INDEX),
        Some("") | None => Some(OCI_MANIFEST),
        Some(_) => None,
    }
}

/// Whether a client whose `Accept` headers are `accept` may be given a
/// manifest of `media` (fetched by tag when `by_tag`): the message of
/// distribution's 404 when not. Docker schema 2 types fetched by tag
/// without being accepted are converted to schema 1 by distribution 2.8;
/// this registry does not serve schema 1 and answers 404 instead.
pub fn refusal(media: &str, accept: &[String], by_tag: bool) -> Option<&'static str> {
    let has = |t: &str| accept.iter().any(|a| a == t);
    match media {
        OCI_MANIFEST if !has(OCI_MANIFEST) => {
            Some("OCI manifest found, but accept header does not support OCI manifests")
        }
        OCI_INDEX if !has(OCI_INDEX) => {
            Some("OCI index found, but accept header does not support OCI indexes")
        }
        DOCKER_V2 if by_tag && !has(DOCKER_V2) => Some(
            "schema 2 manifest found, but accept header does not support it (schema 1 is not served)",
        ),
        DOCKER_LIST if by_tag && !has(DOCKER_LIST) => Some(
            "manifest list found, but accept header does not support it (schema 1 is not served)",
        ),
        _ => None,
    }
}

/// The media types of `Accept` header values (parameters dropped).
pub fn accepted<'a>(values: impl Iterator<Item = &'a str>) -> Vec<String> {
    values
        .flat_map(|v| v.split(','))
        .map(|t| {
            t.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|t| !t.is_empty())
        .collect()
}

/// What a pushed manifest refers to.
#[derive(Debug, PartialEq, Eq)]
pub struct Refs {
    /// Blobs that must be in the repository (config, layers without URLs).
    pub blobs: Vec<Digest>,
    /// Manifests that must be in the repository (an index's entries).
    pub manifests: Vec<Digest>,
}

/// Why a pushed manifest is refused (`MANIFEST_INVALID`, this text as its
/// detail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error(
        "unsupported manifest media type {0:?} (schema 2 and OCI manifests and indexes are served)"
    )]
    UnsupportedType(String),
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("schemaVersion is not 2")]
    SchemaVersion,
    #[error("mediaType in manifest should be '{sent_as}' not '{declared}'")]
    MediaTypeDiffers { sent_as: String, declared: String },
    #[error("mediaType in manifest should be '{0}'")]
    MediaTypeMissing(String),
    #[error("a descriptor has no digest")]
    NoDigest,
    #[error("descriptor digest {0:?} is not a sha256 digest")]
    BadDigest(String),
    #[error("an index without manifests")]
    NoManifests,
    #[error("a manifest without config")]
    NoConfig,
}

/// Check a pushed manifest sent as `content_type`: its references, or the
/// reason it is invalid.
pub fn check_put(content_type: &str, bytes: &[u8]) -> Result<Refs, ManifestError> {
    let ct = content_type.split(';').next().unwrap_or_default().trim();
    if ![DOCKER_V2, DOCKER_LIST, OCI_MANIFEST, OCI_INDEX].contains(&ct) {
        return Err(ManifestError::UnsupportedType(ct.to_string()));
    }
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ManifestError::NotJson(e.to_string()))?;
    if v.get("schemaVersion").and_then(serde_json::Value::as_i64) != Some(2) {
        return Err(ManifestError::SchemaVersion);
    }
    let body_type = v.get("mediaType").and_then(serde_json::Value::as_str);
    if let Some(t) = body_type.filter(|t| !t.is_empty() && *t != ct) {
        return Err(ManifestError::MediaTypeDiffers {
            sent_as: ct.to_string(),
            declared: t.to_string(),
        });
    }
    if matches!(ct, DOCKER_V2) && body_type != Some(DOCKER_V2) {
        return Err(ManifestError::MediaTypeMissing(ct.to_string()));
    }
    let digest_of = |d: &serde_json::Value| -> Result<Digest, ManifestError> {
        let s = d
            .get("digest")
            .and_then(serde_json::Value::as_str)
            .ok_or(ManifestError::NoDigest)?;
        Digest::parse(s).map_err(|_| ManifestError::BadDigest(s.to_string()))
    };
    let mut refs = Refs {
        blobs: Vec::new(),
        manifests: Vec::new(),
    };
    if matches!(ct, DOCKER_LIST | OCI_INDEX) {
        let list = v
            .get("manifests")
            .and_then(serde_json::Value::as_array)
            .ok_or(ManifestError::NoManifests)?;
        for m in list {
            refs.manifests.push(digest_of(m)?);
        }
        return Ok(refs);
    }
    let config = v.get("config").ok_or(ManifestError::NoConfig)?;
    refs.blobs.push(digest_of(config)?);
    let layers = v
        .get("layers")
        .and_then(serde_json::Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for l in layers {
        // Foreign layers (with URLs) live elsewhere.
        if l.get("urls")
            .is_some_and(|u| u.as_array().is_some_and(|a| !a.is_empty()))
        {
            continue;
        }
        refs.blobs.push(digest_of(l)?);
    }
    Ok(refs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_as_distribution_reads_them() {
        assert_eq!(media_type(br#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}"#), Some(DOCKER_V2));
        assert_eq!(
            media_type(br#"{"schemaVersion":2,"config":{}}"#),
            Some(OCI_MANIFEST)
        );
        assert_eq!(
            media_type(br#"{"schemaVersion":2,"manifests":[]}"#),
            Some(OCI_INDEX)
        );
        assert_eq!(media_type(br#"{"schemaVersion":1}"#), None);
        assert_eq!(media_type(b"junk"), None);
    }

    #[test]
    fn accept_rules() {
        let a = accepted(["application/vnd.oci.image.manifest.v1+json; q=0.5, */*"].into_iter());
        assert_eq!(refusal(OCI_MANIFEST, &a, true), None);
        assert!(refusal(OCI_INDEX, &a, false).is_some());
        assert!(refusal(DOCKER_V2, &a, true).is_some());
        assert_eq!(refusal(DOCKER_V2, &a, false), None);
    }

    #[test]
    fn put_checks() {
        let d = format!("sha256:{}", "a".repeat(64));
        let m = format!(
            r#"{{"schemaVersion":2,"config":{{"digest":"{d}"}},"layers":[{{"digest":"{d}"}},{{"digest":"{d}","urls":["http://x"]}}]}}"#
        );
        let r = check_put(OCI_MANIFEST, m.as_bytes()).unwrap();
        assert_eq!(r.blobs.len(), 2);
        assert!(check_put("text/plain", m.as_bytes()).is_err());
        assert!(check_put(DOCKER_V2, m.as_bytes()).is_err());
        assert!(check_put(OCI_MANIFEST, b"{").is_err());
    }

    #[test]
    fn refusal_texts() {
        let ct = || OCI_MANIFEST.to_string();
        let texts = [
            (
                ManifestError::UnsupportedType("text/plain".into()),
                "unsupported manifest media type \"text/plain\" (schema 2 and OCI manifests and indexes are served)",
            ),
            (ManifestError::NotJson("EOF".into()), "not JSON: EOF"),
            (ManifestError::SchemaVersion, "schemaVersion is not 2"),
            (
                ManifestError::MediaTypeDiffers {
                    sent_as: ct(),
                    declared: "x".into(),
                },
                "mediaType in manifest should be 'application/vnd.oci.image.manifest.v1+json' not 'x'",
            ),
            (
                ManifestError::MediaTypeMissing(ct()),
                "mediaType in manifest should be 'application/vnd.oci.image.manifest.v1+json'",
            ),
            (ManifestError::NoDigest, "a descriptor has no digest"),
            (
                ManifestError::BadDigest("md5:x".into()),
                "descriptor digest \"md5:x\" is not a sha256 digest",
            ),
            (ManifestError::NoManifests, "an index without manifests"),
            (ManifestError::NoConfig, "a manifest without config"),
        ];
        for (e, text) in texts {
            assert_eq!(e.to_string(), text);
        }
        let m = r#"{"schemaVersion":2,"mediaType":"x","config":{}}"#;
        assert_eq!(
            check_put(OCI_MANIFEST, m.as_bytes()),
            Err(ManifestError::MediaTypeDiffers {
                sent_as: ct(),
                declared: "x".into()
            })
        );
    }
}
