//! Request paths of the OCI Distribution API, parsed and checked (pure):
//! repository names, tags, digests, upload ids, as distribution's
//! `reference` grammar and its `v2` routes accept them.
//!
//! Invariants: a [`Name`] has only `[a-z0-9._-]` path components separated
//! by single `/`, none of them `.` or `..`, at most 255 bytes, so it can be
//! joined under the storage root without leaving it; a [`Digest`] is
//! `sha256:` and 64 lower-case hex digits (the one algorithm stored).

/// Longest repository name (distribution's `NameTotalLengthMax`).
pub const NAME_MAX: usize = 255;

/// A checked repository name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(String);

impl Name {
    pub fn parse(s: &str) -> Option<Name> {
        if s.is_empty() || s.len() > NAME_MAX {
            return None;
        }
        s.split('/').all(component_ok).then(|| Name(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn component_ok(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: ".", "_", "__" or "-+".
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// A tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
pub fn tag_ok(t: &str) -> bool {
    let b = t.as_bytes();
    let w = |x: u8| x.is_ascii_alphanumeric() || x == b'_';
    !b.is_empty()
        && b.len() <= 128
        && w(b[0])
        && b[1..].iter().all(|&x| w(x) || x == b'.' || x == b'-')
}

/// A sha256 digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest([u8; 64]);

/// Why a digest string was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadDigest {
    /// Not `algorithm:hex` at all.
    Malformed,
    /// Well formed, another algorithm (sha512, …) or wrong length.
    Unsupported,
}

impl Digest {
    pub fn parse(s: &str) -> Result<Digest, BadDigest> {
        let (alg, hex) = s.split_once(':').ok_or(BadDigest::Malformed)?;
        let alg_ok = !alg.is_empty()
            && alg.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'+' | b'.' | b'_' | b'-')
            });
        if !alg_ok || hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BadDigest::Malformed);
        }
        if alg != "sha256" || hex.len() != 64 || hex.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(BadDigest::Unsupported);
        }
        let mut out = [0u8; 64];
        out.copy_from_slice(hex.as_bytes());
        Ok(Digest(out))
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest::from_sha256(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
    }

    pub fn from_sha256(sum: &[u8]) -> Digest {
        let mut out = [0u8; 64];
        for (i, b) in sum.iter().take(32).enumerate() {
            let hex = format!("{b:02x}");
            out[2 * i..2 * i + 2].copy_from_slice(hex.as_bytes());
        }
        Digest(out)
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

/// A manifest reference: a tag or a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    Tag(String),
    Digest(Digest),
}

impl Reference {
    /// `None`: neither a tag nor a well-formed digest; `Err`: a digest of
    /// an algorithm not stored.
    pub fn parse(s: &str) -> Option<Result<Reference, BadDigest>> {
        if s.contains(':') {
            return match Digest::parse(s) {
                Ok(d) => Some(Ok(Reference::Digest(d))),
                Err(BadDigest::Unsupported) => Some(Err(BadDigest::Unsupported)),
                Err(BadDigest::Malformed) => None,
            };
        }
        tag_ok(s).then(|| Ok(Reference::Tag(s.to_string())))
    }
}

/// An upload session id: what this registry hands out (32 hex digits) or
/// distribution's UUIDs (hex and dashes), nothing else.
pub fn upload_id_ok(id: &str) -> bool {
    (8..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// One API route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Base,
    Catalog,
    Tags(Name),
    Manifest(Name, String),
    Blob(Name, String),
    /// Upload start (`None`) or an upload session.
    Upload(Name, Option<String>),
}

/// Why a path is not served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadRoute {
    /// No such endpoint.
    NotFound,
    /// An endpoint, with an invalid repository name.
    Name,
}

/// The route of `path` (already percent-decoded? no: raw; a `%` anywhere
/// is refused as a bad name).
pub fn route(path: &str) -> Result<Route, BadRoute> {
    if path == "/v2/" || path == "/v2" {
        return Ok(Route::Base);
    }
    if path == "/v2/_catalog" {
        return Ok(Route::Catalog);
    }
    let rest = path.strip_prefix("/v2/").ok_or(BadRoute::NotFound)?;
    let name = |s: &str| Name::parse(s).ok_or(BadRoute::Name);
    if let Some(n) = rest.strip_suffix("/tags/list") {
        return Ok(Route::Tags(name(n)?));
    }
    if let Some(i) = rest.rfind("/blobs/uploads/") {
        let id = &rest[i + "/blobs/uploads/".len()..];
        let id = (!id.is_empty()).then(|| id.to_string());
        return Ok(Route::Upload(name(&rest[..i])?, id));
    }
    if let Some(n) = rest.strip_suffix("/blobs/uploads") {
        return Ok(Route::Upload(name(n)?, None));
    }
    if let Some(i) = rest.rfind("/blobs/") {
        let d = &rest[i + "/blobs/".len()..];
        if d.is_empty() || d.contains('/') {
            return Err(BadRoute::NotFound);
        }
        return Ok(Route::Blob(name(&rest[..i])?, d.to_string()));
    }
    if let Some(i) = rest.rfind("/manifests/") {
        let r = &rest[i + "/manifests/".len()..];
        if r.is_empty() || r.contains('/') {
            return Err(BadRoute::NotFound);
        }
        return Ok(Route::Manifest(name(&rest[..i])?, r.to_string()));
    }
    Err(BadRoute::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "library/busybox", "a.b_c__d--e/f", "x/y/z", "0"] {
            assert!(Name::parse(ok).is_some(), "{ok}");
        }
        let long = "a".repeat(256);
        for bad in [
            "", "A", "a/", "/a", "a//b", "../a", "a/../b", "a/.", ".a", "a_", "a___b", "a.-b",
            "a%2fb", "a b", &long,
        ] {
            assert!(Name::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn digests() {
        let hex = "a".repeat(64);
        assert!(Digest::parse(&format!("sha256:{hex}")).is_ok());
        assert_eq!(
            Digest::parse(&format!("sha256:{}", "A".repeat(64))),
            Err(BadDigest::Unsupported)
        );
        assert_eq!(Digest::parse("sha256:abc"), Err(BadDigest::Unsupported));
        assert_eq!(
            Digest::parse(&format!("sha512:{}", "a".repeat(128))),
            Err(BadDigest::Unsupported)
        );
        assert_eq!(Digest::parse("sha256"), Err(BadDigest::Malformed));
        assert_eq!(Digest::parse("sha256:zz"), Err(BadDigest::Malformed));
        assert_eq!(
            Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn routes() {
        assert_eq!(route("/v2/"), Ok(Route::Base));
        let n = |s: &str| Name::parse(s).unwrap();
        assert_eq!(route("/v2/a/b/tags/list"), Ok(Route::Tags(n("a/b"))));
        assert_eq!(
            route("/v2/a/blobs/uploads/"),
            Ok(Route::Upload(n("a"), None))
        );
        assert_eq!(
            route("/v2/a/blobs/uploads/abc123ef"),
            Ok(Route::Upload(n("a"), Some("abc123ef".into())))
        );
        assert_eq!(
            route("/v2/a/manifests/latest"),
            Ok(Route::Manifest(n("a"), "latest".into()))
        );
        assert_eq!(route("/v2/../etc/manifests/x"), Err(BadRoute::Name));
        assert_eq!(route("/v3/x"), Err(BadRoute::NotFound));
        assert_eq!(route("/v2/a/manifests/"), Err(BadRoute::NotFound));
    }

    #[test]
    fn tags() {
        assert!(tag_ok("v1.0-rc_1"));
        assert!(!tag_ok(".x"));
        assert!(!tag_ok(&"a".repeat(129)));
        assert!(matches!(
            Reference::parse("latest"),
            Some(Ok(Reference::Tag(_)))
        ));
        assert!(Reference::parse("a:zz").is_none());
    }
}
