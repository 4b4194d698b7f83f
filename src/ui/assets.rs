//! Static files (CSS, the page scripts, vendored htmx and Swagger UI), embedded in the binary so a deployment
//! is one file. Served under `/static/<name>?v=<content hash>`: a request with the current hash
//! is cached for a year (`immutable`); anything else must revalidate (ETag).

use std::sync::LazyLock;

use axum::extract::{Path, RawQuery};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset { name: "app.css", content_type: "text/css; charset=utf-8", body: include_bytes!("../../static/app.css") },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../static/app.js"),
    },
    Asset {
        name: "htmx.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../static/vendor/htmx-2.0.11.min.js"),
    },
    Asset {
        name: "api-docs.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../static/api-docs.js"),
    },
    Asset {
        name: "swagger-ui-bundle.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../static/vendor/swagger-ui-5.35.0/swagger-ui-bundle.js"),
    },
    Asset {
        name: "swagger-ui.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../static/vendor/swagger-ui-5.35.0/swagger-ui.css"),
    },
    Asset { name: "favicon.svg", content_type: "image/svg+xml", body: include_bytes!("../../static/favicon.svg") },
];

/// FNV-1a, 64 bit: a cache key, not a security measure.
fn fnv1a(data: &[u8], mut h: u64) -> u64 {
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One version key for all assets (they change together, with the binary).
static VERSION: LazyLock<String> = LazyLock::new(|| {
    let h = ASSETS.iter().fold(0xcbf2_9ce4_8422_2325, |h, a| fnv1a(a.body, fnv1a(a.name.as_bytes(), h)));
    format!("{:012x}", h & 0xffff_ffff_ffff)
});

/// The cache-busting key appended to asset URLs.
pub fn version() -> &'static str {
    &VERSION
}

pub async fn serve(Path(name): Path<String>, RawQuery(query): RawQuery, headers: HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let etag = format!("\"{}\"", version());
    let versioned = query.as_deref().is_some_and(|q| q.split('&').any(|kv| kv == format!("v={}", version())));
    let cache = if versioned { "public, max-age=31536000, immutable" } else { "no-cache" };
    let mut out = HeaderMap::new();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        out.insert(header::ETAG, v);
    }
    if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains(etag.as_str())) {
        return (StatusCode::NOT_MODIFIED, out).into_response();
    }
    out.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    (out, asset.body).into_response()
}
