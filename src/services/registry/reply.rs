//! Responses as the distribution registry writes them: the error body
//! (`{"errors":[{"code","message","detail"}]}`), its status per code
//! (`registry/api/v2/errors.go`), and the headers every answer carries.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, combinators::UnsyncBoxBody};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};

pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;
pub type Resp = Response<Body>;

pub const JSON: &str = "application/json; charset=utf-8";
pub const API_VERSION: &str = "Docker-Distribution-Api-Version";

/// The error codes of the distribution API that this registry answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    BlobUnknown,
    BlobUploadInvalid,
    BlobUploadUnknown,
    DigestInvalid,
    ManifestBlobUnknown,
    ManifestInvalid,
    ManifestUnknown,
    NameInvalid,
    NameUnknown,
    SizeInvalid,
    Unauthorized,
    Unsupported,
    TagInvalid,
    PaginationNumberInvalid,
    /// A pull-through miss the upstream could not serve (503).
    Unavailable,
    Unknown,
}

impl Code {
    fn parts(self) -> (&'static str, &'static str, StatusCode) {
        use StatusCode as S;
        match self {
            Code::BlobUnknown => ("BLOB_UNKNOWN", "blob unknown to registry", S::NOT_FOUND),
            Code::BlobUploadInvalid => {
                ("BLOB_UPLOAD_INVALID", "blob upload invalid", S::BAD_REQUEST)
            }
            Code::BlobUploadUnknown => (
                "BLOB_UPLOAD_UNKNOWN",
                "blob upload unknown to registry",
                S::NOT_FOUND,
            ),
            Code::DigestInvalid => (
                "DIGEST_INVALID",
                "provided digest did not match uploaded content",
                S::BAD_REQUEST,
            ),
            Code::ManifestBlobUnknown => (
                "MANIFEST_BLOB_UNKNOWN",
                "blob unknown to registry",
                S::BAD_REQUEST,
            ),
            Code::ManifestInvalid => ("MANIFEST_INVALID", "manifest invalid", S::BAD_REQUEST),
            Code::ManifestUnknown => ("MANIFEST_UNKNOWN", "manifest unknown", S::NOT_FOUND),
            Code::NameInvalid => ("NAME_INVALID", "invalid repository name", S::BAD_REQUEST),
            Code::NameUnknown => (
                "NAME_UNKNOWN",
                "repository name not known to registry",
                S::NOT_FOUND,
            ),
            Code::SizeInvalid => (
                "SIZE_INVALID",
                "provided length did not match content length",
                S::BAD_REQUEST,
            ),
            Code::Unauthorized => ("UNAUTHORIZED", "authentication required", S::UNAUTHORIZED),
            Code::Unsupported => (
                "UNSUPPORTED",
                "The operation is unsupported.",
                S::METHOD_NOT_ALLOWED,
            ),
            Code::TagInvalid => (
                "TAG_INVALID",
                "manifest tag did not match URI",
                S::BAD_REQUEST,
            ),
            Code::PaginationNumberInvalid => (
                "PAGINATION_NUMBER_INVALID",
                "invalid number of results requested",
                S::BAD_REQUEST,
            ),
            Code::Unavailable => ("UNAVAILABLE", "service unavailable", S::SERVICE_UNAVAILABLE),
            Code::Unknown => ("UNKNOWN", "unknown error", S::INTERNAL_SERVER_ERROR),
        }
    }
}

/// The error answer for `code` with `detail` (JSON).
pub fn error(code: Code, detail: serde_json::Value) -> Resp {
    error_with(code, None, detail)
}

/// The error answer with another message than the code's own.
pub fn error_with(code: Code, message: Option<&str>, detail: serde_json::Value) -> Resp {
    let (c, m, status) = code.parts();
    // Go's encoder leaves out a nil detail (`omitempty`).
    let mut e = serde_json::json!({"code": c, "message": message.unwrap_or(m)});
    if !detail.is_null() {
        e["detail"] = detail;
    }
    let body = serde_json::json!({ "errors": [e] });
    let mut text = body.to_string();
    text.push('\n');
    json(status, text)
}

/// A JSON answer.
pub fn json(status: StatusCode, text: String) -> Resp {
    let len = text.len();
    let mut r = Response::new(full(Bytes::from(text)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    r.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(len));
    r
}

/// Go's `http.NotFound`: what distribution answers for a path that is no
/// route.
pub fn page_not_found() -> Resp {
    let text = "404 page not found\n";
    let mut r = Response::new(full(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = StatusCode::NOT_FOUND;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(text.len()));
    r
}

/// An answer with no body and `Content-Length: 0`.
pub fn empty(status: StatusCode) -> Resp {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    r
}

pub fn full(b: Bytes) -> Body {
    Full::new(b).map_err(|never| match never {}).boxed_unsync()
}

/// Set a header from text (dropped when the text is not a header value).
pub fn set(r: &mut Resp, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().insert(name, v);
    }
}

/// A method the route does not take (gorilla's `MethodHandler`).
pub fn method_not_allowed() -> Resp {
    empty(StatusCode::METHOD_NOT_ALLOWED)
}
