//! One kmirror server: its URL, the bearer token, TLS trust, and what its answers mean for the
//! exit code. Errors from the server are RFC 9457 problems (`type` slug and `detail`).

use std::fmt;
use std::time::Duration;

use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Conn;

/// An RFC 9457 problem as the server words it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The stable slug (`mirror-not-found`, `topic-not-found`, ...).
    #[serde(rename = "type")]
    pub problem_type: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.problem_type, self.detail)
    }
}

/// Why a command did not fully succeed, and so its exit code.
#[derive(Debug)]
pub enum Failure {
    /// Exit 2: flags, files or arguments that cannot work.
    Usage(String),
    /// Exit 2: the server cannot be reached, or what answered is not a kmirror server.
    Connection(String),
    /// Exit 2: 401, 403 or 429 (wrong, missing or too weak a token).
    Auth(Problem),
    /// Exit 1: the server refused what was asked.
    Problem(Problem),
    /// Exit 1: some items failed; each was printed already. The text sums it up.
    Failed(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) | Failure::Connection(_) | Failure::Auth(_) => 2,
            Failure::Problem(_) | Failure::Failed(_) => 1,
        }
    }

    /// Prints the failure on standard error.
    pub fn report(&self) {
        match self {
            Failure::Usage(m) => eprintln!("kmirror: {m}"),
            Failure::Connection(m) => eprintln!("kmirror: {m}"),
            Failure::Auth(p) => eprintln!("kmirror: {p}"),
            Failure::Problem(p) => eprintln!("kmirror: {p}"),
            Failure::Failed(m) => eprintln!("kmirror: {m}"),
        }
    }
}

/// Parses an answer already read as JSON into the client's struct.
pub fn parse<T: serde::de::DeserializeOwned>(v: &Value, what: &str) -> Result<T, Failure> {
    serde_json::from_value(v.clone()).map_err(|e| {
        Failure::Connection(format!("the server's {what} is not what this client understands ({e}); same version?"))
    })
}

/// Prints one failed item (`kmirror: <what>: <slug>: <detail>`) on standard error.
pub fn report_item(what: &str, slug: &str, detail: &str) {
    eprintln!("kmirror: {what}: {slug}: {detail}");
}

/// The longest answer text quoted in an error about an unexpected answer.
const QUOTE_LIMIT: usize = 200;

/// A kmirror server.
#[derive(Debug, Clone)]
pub struct Server {
    /// The URL without a trailing slash (a path prefix behind a proxy is kept).
    base: String,
    http: reqwest::Client,
    /// `Bearer <token>`, marked sensitive (never printed or logged).
    authorization: Option<HeaderValue>,
    /// How long one request may take (`--request-timeout`).
    timeout: Duration,
}

/// The bearer token: the first line of `--token-file`, else `KMIRROR_TOKEN`, else none.
fn token(conn: &Conn) -> Result<Option<String>, Failure> {
    if let Some(path) = &conn.token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Usage(format!("cannot read the token file {}: {e}", path.display())))?;
        let first = text.lines().next().unwrap_or("").trim();
        if first.is_empty() {
            return Err(Failure::Usage(format!("the token file {} is empty", path.display())));
        }
        return Ok(Some(first.to_string()));
    }
    Ok(std::env::var("KMIRROR_TOKEN").ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()))
}

impl Server {
    pub fn new(conn: &Conn) -> Result<Server, Failure> {
        let url = reqwest::Url::parse(&conn.url)
            .map_err(|e| Failure::Usage(format!("--url {:?} is not a URL: {e}", conn.url)))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(Failure::Usage(format!("--url {:?} must be an http:// or https:// URL", conn.url)));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
            return Err(Failure::Usage(
                "--url must not carry credentials, a query or a fragment (give the token with --token-file or KMIRROR_TOKEN)"
                    .into(),
            ));
        }
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(Duration::from_secs(10))
            .timeout(conn.request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("kmirror-cli/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &conn.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| Failure::Usage(format!("cannot read the CA file {}: {e}", path.display())))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| Failure::Usage(format!("the CA file {} is not PEM: {e}", path.display())))?;
            if certs.is_empty() {
                return Err(Failure::Usage(format!("the CA file {} holds no certificate", path.display())));
            }
            for c in certs {
                builder = builder.add_root_certificate(c);
            }
        }
        let http = builder.build().map_err(|e| Failure::Usage(format!("cannot set up the HTTP client: {e}")))?;
        let authorization = match token(conn)? {
            None => None,
            Some(t) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {t}"))
                    .map_err(|_| Failure::Usage("the token holds characters a header cannot carry".into()))?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        Ok(Server {
            base: url.as_str().trim_end_matches('/').to_string(),
            http,
            authorization,
            timeout: conn.request_timeout,
        })
    }

    /// The server's URL as given (for messages).
    pub fn url(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(a) = &self.authorization {
            r = r.header(header::AUTHORIZATION, a.clone());
        }
        r
    }

    /// Sends `req`; a non-2xx answer becomes the failure it means.
    async fn send(&self, req: reqwest::RequestBuilder, path: &str) -> Result<reqwest::Response, Failure> {
        let res = req.send().await.map_err(|e| Failure::Connection(connection_error(&self.base, &e)))?;
        if res.status().is_success() {
            return Ok(res);
        }
        let status = res.status();
        let is_json =
            res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("json"));
        let text = res.text().await.unwrap_or_default();
        let problem = if is_json { serde_json::from_str::<Problem>(&text).ok() } else { None };
        match problem {
            Some(p) if matches!(status.as_u16(), 401 | 403 | 429) => Err(Failure::Auth(p)),
            Some(p) => Err(Failure::Problem(p)),
            None => Err(Failure::Connection(format!(
                "{}{path} answered HTTP {status} without a problem document (is --url a kmirror server?): {}",
                self.base,
                quote(&text)
            ))),
        }
    }

    async fn json<T: DeserializeOwned>(&self, res: reqwest::Response, path: &str) -> Result<T, Failure> {
        let bytes = res.bytes().await.map_err(|e| Failure::Connection(connection_error(&self.base, &e)))?;
        serde_json::from_slice(&bytes).map_err(|e| unexpected(&self.base, path, &e))
    }

    /// GET `path` as JSON.
    pub async fn get<T: DeserializeOwned>(&self, path: &str, query: &[(&str, String)]) -> Result<T, Failure> {
        let res = self.send(self.request(Method::GET, path).query(query), path).await?;
        self.json(res, path).await
    }

    /// GET `path` as JSON with its `ETag`.
    pub async fn get_tagged<T: DeserializeOwned>(&self, path: &str) -> Result<(T, Option<String>), Failure> {
        let res = self.send(self.request(Method::GET, path), path).await?;
        let etag = etag(res.headers());
        Ok((self.json(res, path).await?, etag))
    }

    /// GET `path` as text (e.g. the Markdown report).
    pub async fn get_text(&self, path: &str, query: &[(&str, String)]) -> Result<String, Failure> {
        let res = self.send(self.request(Method::GET, path).query(query), path).await?;
        res.text().await.map_err(|e| Failure::Connection(connection_error(&self.base, &e)))
    }

    /// POST a JSON body.
    pub async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T, Failure> {
        let res = self.send(self.request(Method::POST, path).json(body), path).await?;
        self.json(res, path).await
    }

    /// POST a JSON body to a call that answers after waiting up to `waits` on the server (a
    /// promote): the request may take that long plus `--request-timeout`.
    pub async fn post_waiting<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
        waits: Duration,
    ) -> Result<T, Failure> {
        let req = self.request(Method::POST, path).json(body).timeout(self.timeout.saturating_add(waits));
        let res = self.send(req, path).await?;
        self.json(res, path).await
    }

    /// PATCH a JSON body, with `If-Match` when a version is given.
    pub async fn patch<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
        if_match: Option<&str>,
    ) -> Result<T, Failure> {
        let mut req = self.request(Method::PATCH, path).json(body);
        if let Some(tag) = if_match {
            req = req.header(header::IF_MATCH, tag);
        }
        let res = self.send(req, path).await?;
        self.json(res, path).await
    }

    /// DELETE `path`.
    pub async fn delete(&self, path: &str) -> Result<(), Failure> {
        self.send(self.request(Method::DELETE, path), path).await.map(drop)
    }

    /// DELETE `path` with `query`; the answer's JSON body, if it has one (a 202 request).
    pub async fn delete_with(&self, path: &str, query: &[(&str, String)]) -> Result<Option<Value>, Failure> {
        let res = self.send(self.request(Method::DELETE, path).query(query), path).await?;
        if res.status() == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        Ok(Some(self.json(res, path).await?))
    }
}

fn etag(headers: &HeaderMap) -> Option<String> {
    headers.get(header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// What went wrong reaching the server, with the cause chain (reqwest's own message is terse).
fn connection_error(base: &str, e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        format!("kmirror at {base} did not answer in time")
    } else {
        format!("cannot reach kmirror at {base}")
    };
    let mut source = std::error::Error::source(e);
    let mut last = String::new();
    while let Some(s) = source {
        let m = s.to_string();
        if m != last {
            text.push_str(": ");
            text.push_str(&m);
            last = m;
        }
        source = s.source();
    }
    text
}

fn unexpected(base: &str, path: &str, e: &serde_json::Error) -> Failure {
    Failure::Connection(format!(
        "{base}{path} answered something this client does not understand ({e}); is it a kmirror server of the same version?"
    ))
}

fn quote(text: &str) -> String {
    let t: String = text.chars().take(QUOTE_LIMIT).filter(|c| !c.is_control() || *c == ' ').collect();
    if t.is_empty() { "(empty body)".into() } else { t }
}

/// Checks a mirror or topic name given on the command line before it becomes part of a URL path
/// (`[a-zA-Z0-9._-]{1,249}`, not `.` or `..`).
pub fn check_name(what: &str, name: &str) -> Result<(), Failure> {
    let ok = !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Failure::Usage(format!(
            "{what} {name:?} is not a valid name (letters, digits, '.', '_' and '-', at most 249; not '.' or '..')"
        )))
    }
}

/// The status the server answers a problem with, when the failure is one.
pub fn problem_status(f: &Failure) -> Option<StatusCode> {
    match f {
        Failure::Problem(p) | Failure::Auth(p) => StatusCode::from_u16(p.status).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        let p = Problem { problem_type: "x".into(), title: String::new(), status: 404, detail: "d".into() };
        assert_eq!(Failure::Usage("u".into()).exit_code(), 2);
        assert_eq!(Failure::Connection("c".into()).exit_code(), 2);
        assert_eq!(Failure::Auth(p.clone()).exit_code(), 2);
        assert_eq!(Failure::Problem(p).exit_code(), 1);
        assert_eq!(Failure::Failed("f".into()).exit_code(), 1);
    }

    #[test]
    fn names_that_could_change_the_path_are_refused() {
        for good in ["a", "eu-to-us", "orders.v2", "A_b-1"] {
            assert!(check_name("mirror", good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "a?b", "a b", "%2e", &"x".repeat(250)] {
            assert!(check_name("mirror", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quotes_are_short_and_printable() {
        assert_eq!(quote(""), "(empty body)");
        assert_eq!(quote("a\u{1b}[31mb\nc"), "a[31mbc");
        assert_eq!(quote(&"x".repeat(500)).len(), QUOTE_LIMIT);
    }
}
