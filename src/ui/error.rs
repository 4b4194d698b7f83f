//! The dashboard's error type: HTML, never JSON.
//!
//! A handler returns `Err(UiError)`; the response carries the error as an extension and the
//! session middleware turns it into the right HTML for the caller (kanidm's `HtmxError` idea):
//! an htmx request gets a toast fragment retargeted into `#toasts`, a plain request a full error
//! page with the same status code.

use askama::Template;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use crate::engine::{EngineError, ProblemKind};

use super::chrome::Chrome;
use super::view::Viewer;

/// An error shown to a person.
#[derive(Debug, Clone)]
pub struct UiError {
    pub status: StatusCode,
    pub title: String,
    pub detail: String,
}

impl UiError {
    pub fn new(status: StatusCode, title: impl Into<String>, detail: impl Into<String>) -> UiError {
        UiError { status, title: title.into(), detail: detail.into() }
    }

    pub fn not_found(title: impl Into<String>, detail: impl Into<String>) -> UiError {
        UiError::new(StatusCode::NOT_FOUND, title, detail)
    }

    pub fn bad_request(title: impl Into<String>, detail: impl Into<String>) -> UiError {
        UiError::new(StatusCode::BAD_REQUEST, title, detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> UiError {
        UiError::new(StatusCode::FORBIDDEN, "Not allowed", detail)
    }

    pub fn csrf() -> UiError {
        UiError::new(
            StatusCode::FORBIDDEN,
            "This form has expired",
            "The form's security token does not match your session (it may be from before you signed in again). \
             Reload the page and try again.",
        )
    }

    pub fn internal(detail: impl Into<String>) -> UiError {
        UiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong in kmirror", detail)
    }

    /// A whole engine call failed: the status and title of the problem kind from the engine's
    /// problem table (the same the API answers with), and the engine's detail.
    pub fn engine(e: &EngineError) -> UiError {
        UiError::problem(e.kind(), e.to_string())
    }

    /// A problem of kind `kind`, with its status and title from the problem table.
    pub fn problem(kind: ProblemKind, detail: impl Into<String>) -> UiError {
        let status = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        UiError::new(status, kind.title(), detail)
    }
}

impl From<askama::Error> for UiError {
    fn from(e: askama::Error) -> UiError {
        tracing::error!(error = %e, "Rendering a dashboard template failed.");
        UiError::internal("A page could not be rendered. The server log has the details.")
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let mut r = self.status.into_response();
        r.extensions_mut().insert(self);
        r
    }
}

/// Renders a [`UiError`] carried by `resp` (if any) for an htmx or a plain request.
pub fn render(resp: Response, htmx: bool, viewer: Option<&Viewer>) -> Response {
    let Some(err) = resp.extensions().get::<UiError>().cloned() else {
        return resp;
    };
    let css = if err.status.is_server_error() { "bad" } else { "warn" };
    if htmx {
        let body = Toast { css, title: err.title.clone(), detail: err.detail.clone() }
            .render()
            .unwrap_or_else(|_| "<div class=\"toast bad\" role=\"alert\">Error</div>".into());
        let mut r = (err.status, Html(body)).into_response();
        r.headers_mut().insert("HX-Retarget", HeaderValue::from_static("#toasts"));
        r.headers_mut().insert("HX-Reswap", HeaderValue::from_static("innerHTML"));
        return r;
    }
    let page = ErrorPage {
        chrome: Chrome::new(&err.title, "", viewer.cloned()),
        status: err.status.as_u16(),
        title: err.title.clone(),
        detail: err.detail.clone(),
        back: "/".into(),
    };
    match page.render() {
        Ok(body) => (err.status, Html(body)).into_response(),
        Err(_) => (err.status, format!("{}: {}", err.title, err.detail)).into_response(),
    }
}

#[derive(Debug, Template)]
#[template(path = "pages/error.html")]
pub struct ErrorPage {
    pub chrome: Chrome,
    pub status: u16,
    pub title: String,
    pub detail: String,
    pub back: String,
}

#[derive(Debug, Template)]
#[template(path = "fragments/toast.html")]
pub struct Toast {
    pub css: &'static str,
    pub title: String,
    pub detail: String,
}
