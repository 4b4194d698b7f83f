//! The real `kmirror serve` binary on the rig, called over real HTTP: the failed-login limiter
//! never locks out a valid token (issue 43, item 4), HTTP metrics cannot be blown up by invented
//! methods or paths (item 5), and tokens come from files and per-role environment variables
//! (item 8).

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

/// Files removed when the test ends.
struct TempFiles(Vec<std::path::PathBuf>);

impl TempFiles {
    fn token(&mut self, token: &str) -> String {
        let p = std::env::temp_dir().join(unique("kmirror-access-token"));
        std::fs::write(&p, format!("{token}\n")).unwrap();
        self.0.push(p.clone());
        p.to_str().unwrap().to_string()
    }
}

impl Drop for TempFiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `kmirror serve` on a free loopback port with its own state topic (deleted on drop), stderr
/// collected, killed on drop.
struct Serve {
    child: std::process::Child,
    base: String,
    stderr: Arc<Mutex<String>>,
    state_topic: String,
    http: reqwest::Client,
}

impl Serve {
    /// Starts it with `args` and `env` (every `KMIRROR_*` token variable of the test's own
    /// environment removed) and waits until `ready_token` is served.
    async fn start(args: &[String], env: &[(&str, &str)], ready_token: &str) -> Serve {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let id = unique("access");
        let state_topic = format!("__mirror_state-{id}");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kmirror"));
        cmd.args(["serve", "--destination-bootstrap", &Cluster::Destination.bootstrap(), "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--state-topic", &state_topic, "--state-partitions", "1", "--instance-id", &id])
            .args(["--membership", "standalone"])
            .args(args)
            .env_remove("KMIRROR_CONFIG")
            .env("RUST_LOG", "info,rdkafka=warn");
        for var in kmirror::config::role_token_variables() {
            cmd.env_remove(var);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(&mut pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let mut serve = Serve { child, base, stderr, state_topic, http };
        let url = format!("{}/api/v1/mirrors", serve.base);
        let started = Instant::now();
        loop {
            if let Some(status) = serve.child.try_wait().unwrap() {
                panic!("kmirror serve exited with {status}: {}", serve.stderr());
            }
            if let Ok(r) = serve.http.get(&url).bearer_auth(ready_token).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "kmirror serve not ready: {}", serve.stderr());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        serve.http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
        serve
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value, String) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let res = r.send().await.expect("HTTP request");
        let status = res.status().as_u16();
        let retry_after = res.headers().get("retry-after").is_some();
        let text = res.text().await.unwrap();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status == 429 {
            assert!(retry_after, "429 comes with Retry-After: {text}");
        }
        (status, json, text)
    }

    /// One raw HTTP/1.1 request (any method token, however odd); the status line's code, if any.
    async fn raw(&self, method: &str, path: &str) -> Option<u16> {
        let mut s = tokio::net::TcpStream::connect(self.base.trim_start_matches("http://")).await.unwrap();
        let head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        s.write_all(head.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).split(' ').nth(1).and_then(|c| c.parse().ok())
    }

    /// SIGTERM, wait for the exit, and the whole stderr.
    fn terminate(mut self) -> String {
        // SAFETY: sends a signal to the child process we spawned.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        assert_eq!(rc, 0);
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "kmirror serve did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The reader thread ends with the pipe; give it the last lines.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(&self.stderr) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stderr()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let topic = self.state_topic.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let _ = rt.block_on(Cluster::Destination.admin().delete_topic(&topic));
        })
        .join();
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// The partitions' states of `topic` in `mirror`.
async fn states(srv: &Serve, mirror: &str, topic: &str, token: &str) -> Vec<String> {
    let (_, t, _) = srv.call(Method::GET, &format!("/api/v1/mirrors/{mirror}/topics/{topic}"), Some(token), None).await;
    t["partitions"]
        .as_array()
        .map_or_else(Vec::new, |ps| ps.iter().map(|p| p["state"].as_str().unwrap_or_default().to_string()).collect())
}

/// Item 4: 50 wrong tokens from one address (all of the test's requests come from 127.0.0.1, as
/// all clients behind an ingress share one address), then the operator's `topics:stop` is served
/// and fails the topic over; wrong tokens are still throttled before and after, the dashboard
/// sign-in follows the same rule, and no token reaches the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiter_serves_a_valid_stop_after_50_bad_tokens() {
    let _rig = shared().await;
    let (operator, admin) = ("access-operator-0123456789abcdef0123", "access-admin-0123456789abcdef012345");
    let mut files = TempFiles(Vec::new());
    let args = [
        "--token-file".to_string(),
        format!("ops:operator:{}", files.token(operator)),
        "--token-file".to_string(),
        format!("adm:admin:{}", files.token(admin)),
    ];
    let srv = Serve::start(&args, &[], operator).await;

    let topic = TestTopic::create(Cluster::Source, "access-stop", 1, &[]).await;
    let mirror = unique("access-stop");
    let body = json!({"name": mirror, "source": {"bootstrap_servers": Cluster::Source.bootstrap()}});
    let (status, _, text) = srv.call(Method::POST, "/api/v1/mirrors", Some(admin), Some(body)).await;
    assert_eq!(status, 201, "{text}");
    let mp = format!("/api/v1/mirrors/{mirror}");
    let topics = json!({"topics": [topic.name]});
    let (status, r, text) =
        srv.call(Method::POST, &format!("{mp}/topics:start"), Some(operator), Some(topics.clone())).await;
    assert!(status == 200 && r["results"][0]["ok"] == true, "{text}");
    eventually("the topic mirroring", Duration::from_secs(60), || async {
        (states(&srv, &mirror, &topic.name, operator).await == ["MIRRORING"]).then_some(())
    })
    .await;

    // 50 wrong tokens on the failover call itself: 401 for the burst, then 429.
    let stop = format!("{mp}/topics:stop");
    let started = Instant::now();
    let mut statuses = Vec::new();
    for i in 0..50 {
        let (status, _, text) =
            srv.call(Method::POST, &stop, Some(&format!("guess-{i:04}")), Some(topics.clone())).await;
        assert!(!text.contains("guess-"), "the token is never echoed: {text}");
        statuses.push(status);
    }
    let burst = kmirror::auth::FAILURE_BURST as usize;
    // One more attempt comes back per refill period while the 50 are sent.
    let refilled = (started.elapsed().as_secs_f64() / kmirror::auth::FAILURE_REFILL.as_secs_f64()).ceil() as usize;
    assert!(statuses[..burst].iter().all(|s| *s == 401), "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 401 || *s == 429), "{statuses:?}");
    let unauthorized = statuses.iter().filter(|s| **s == 401).count();
    assert!(unauthorized <= burst + refilled, "throttled after the burst: {statuses:?}");
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");

    // The operator's stop is served from the same, throttled, address: a failover nothing blocks.
    let (status, r, text) = srv.call(Method::POST, &stop, Some(operator), Some(topics.clone())).await;
    assert_eq!(status, 200, "a valid topics:stop after 50 bad tokens: {text}");
    assert_eq!(r["results"][0]["ok"], true, "{text}");
    eventually("the topic stopped", Duration::from_secs(60), || async {
        (states(&srv, &mirror, &topic.name, operator).await == ["STOPPED"]).then_some(())
    })
    .await;
    // Wrong tokens are still throttled, and valid ones still served, in any order.
    let (status, r, text) = srv.call(Method::GET, "/api/v1/mirrors", Some("guess-after"), None).await;
    assert_eq!(status, 429, "{text}");
    assert_eq!(r["type"], "too-many-requests", "{text}");
    assert!(r["detail"].as_str().unwrap_or_default().contains("a valid token is accepted at any time"), "{text}");
    let (status, _, text) = srv.call(Method::GET, "/api/v1/mirrors", Some(admin), None).await;
    assert_eq!(status, 200, "{text}");

    // The dashboard's sign-in: wrong tokens throttled, the right one signs in.
    let form = srv.http.get(format!("{}/signin", srv.base)).send().await.unwrap();
    let cookie = form
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("kmirror_signin="))
        .map(|c| c.split(';').next().unwrap().to_string())
        .expect("sign-in cookie");
    let page = form.text().await.unwrap();
    let csrf = regex::Regex::new(r#"name="_csrf" value="([^"]*)""#).unwrap().captures(&page).unwrap()[1].to_string();
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let sign_in = |token: &str| {
        let req = no_redirects.post(format!("{}/signin", srv.base)).header("cookie", &cookie).form(&[
            ("_csrf", csrf.as_str()),
            ("token", token),
            ("next", "/"),
        ]);
        async move { req.send().await.unwrap() }
    };
    let r = sign_in("guess-on-the-form").await;
    assert_eq!(r.status().as_u16(), 429, "the form shares the address's failures");
    let text = r.text().await.unwrap();
    assert!(
        text.contains("Too many failed sign-ins from your address") && !text.contains("guess-on-the-form"),
        "{text}"
    );
    let r = sign_in(operator).await;
    assert_eq!(r.status().as_u16(), 303, "a valid sign-in from a throttled address");
    let session = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|c| c.starts_with("kmirror_session=") && !c.starts_with("kmirror_session=;"));
    assert!(session, "a session cookie: {:?}", r.headers());

    let log = srv.terminate();
    assert!(log.contains("too many failed attempts from this client address"), "{log}");
    for secret in [operator, admin, "guess-0001", "guess-on-the-form"] {
        assert!(!log.contains(secret), "a token in the log: {log}");
    }
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

/// The HTTP series of `/metrics`: the label sets of every `_count` line.
async fn http_series(srv: &Serve, token: &str) -> std::collections::BTreeSet<String> {
    let (status, _, text) = srv.call(Method::GET, "/metrics", Some(token), None).await;
    assert_eq!(status, 200, "{text}");
    text.lines()
        .filter_map(|l| l.strip_prefix("kmirror_http_request_duration_seconds_count{"))
        .filter_map(|l| l.split_once('}').map(|(labels, _)| labels.to_string()))
        .collect()
}

/// Item 5: requests with invented methods (a 6,000-character one included) and invented paths,
/// without credentials, add no series to `/metrics`: methods are labelled from the standard set
/// or `other`, paths by route template or `unmatched`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_series_stay_constant_under_invented_methods_and_paths() {
    let _rig = shared().await;
    let viewer = "access-metrics-viewer-0123456789abcdef";
    let srv = Serve::start(&[], &[("KMIRROR_VIEWER_TOKEN", viewer)], viewer).await;
    let long_method = "X".repeat(6_000);
    let invent = |i: usize| {
        let srv = &srv;
        let long_method = long_method.clone();
        async move {
            let method = Method::from_bytes(format!("INVENTED{i}").as_bytes()).unwrap();
            for path in ["/api/v1/mirrors".to_string(), format!("/nope/{i}"), format!("/static/nope-{i}.css")] {
                srv.call(method.clone(), &path, None, None).await;
            }
            for path in [format!("/nope/{i}/deeper-{i}"), format!("/api/v1/mirrors/invented-{i}"), format!("/x{i}")] {
                srv.call(Method::GET, &path, None, None).await;
            }
            // What reqwest will not send: a lower-case standard method, a very long one.
            for method in ["get", long_method.as_str()] {
                srv.raw(method, "/api/v1/mirrors").await;
                srv.raw(method, &format!("/nope/{i}")).await;
            }
        }
    };
    // One of each kind, then a /metrics call (its own series appears from the next one on).
    invent(0).await;
    http_series(&srv, viewer).await;
    let before = http_series(&srv, viewer).await;
    for i in 1..=300 {
        invent(i).await;
    }
    let after = http_series(&srv, viewer).await;
    assert_eq!(after, before, "invented methods and paths added series");
    assert!(before.len() < 40, "{before:#?}");
    let methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "other"];
    for labels in &after {
        let method = labels.strip_prefix("method=\"").and_then(|l| l.split('"').next()).unwrap_or_default();
        assert!(methods.contains(&method), "method label {method:?}: {labels}");
        assert!(!labels.contains("nope") && !labels.contains("invented"), "a raw path as a label: {labels}");
    }
    assert!(after.iter().any(|l| l.starts_with("method=\"other\",route=\"unmatched\"")), "{after:#?}");
    srv.terminate();
}

/// Item 8: tokens from `--token-file`, `KMIRROR_VIEWER_TOKEN` and `KMIRROR_ADMIN_TOKEN_FILE`
/// authenticate with their roles; only the `--token` one is on the command line, which a warning
/// says, and no token is ever logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_from_files_and_the_environment_authenticate() {
    let _rig = shared().await;
    let operator = "access-file-operator-0123456789abcdef";
    let admin = "access-env-file-admin-0123456789abcdef";
    let viewer = "access-env-viewer-0123456789abcdef0123";
    let cli = "access-cli-viewer-0123456789abcdef01234";
    let mut files = TempFiles(Vec::new());
    let (operator_file, admin_file) = (files.token(operator), files.token(admin));
    let args =
        strings(&["--token-file", &format!("ops:operator:{operator_file}"), "--token", &format!("cli:viewer:{cli}")]);
    let env = [("KMIRROR_VIEWER_TOKEN", viewer), ("KMIRROR_ADMIN_TOKEN_FILE", admin_file.as_str())];
    let srv = Serve::start(&args, &env, viewer).await;

    let stop = "/api/v1/mirrors/no-such-mirror/topics:stop";
    let body = || Some(json!({"topics": ["t"]}));
    let delete = "/api/v1/mirrors/no-such-mirror";
    // The viewer from the environment reads, and is named after its variable.
    for token in [viewer, cli] {
        let (status, _, text) = srv.call(Method::GET, "/api/v1/mirrors", Some(token), None).await;
        assert_eq!(status, 200, "{text}");
    }
    let (status, r, text) = srv.call(Method::POST, stop, Some(viewer), body()).await;
    assert_eq!((status, r["type"].as_str()), (403, Some("forbidden")), "{text}");
    assert!(text.contains("viewer (KMIRROR_VIEWER_TOKEN)") && text.contains("role viewer"), "{text}");
    // The operator from the file may stop (the mirror does not exist), not delete.
    let (status, r, text) = srv.call(Method::POST, stop, Some(operator), body()).await;
    assert_eq!((status, r["type"].as_str()), (404, Some("mirror-not-found")), "{text}");
    let (status, r, text) = srv.call(Method::DELETE, delete, Some(operator), None).await;
    assert!(
        status == 403 && r["detail"].as_str().unwrap_or_default().starts_with("\"ops\" has role operator"),
        "{text}"
    );
    // The admin from the file named by KMIRROR_ADMIN_TOKEN_FILE may delete.
    let (status, r, text) = srv.call(Method::DELETE, delete, Some(admin), None).await;
    assert_eq!((status, r["type"].as_str()), (404, Some("mirror-not-found")), "{text}");
    // A token that only starts like a configured one is refused.
    for wrong in [format!("{operator}x"), operator[..operator.len() - 1].to_string(), "not-a-token".to_string()] {
        let (status, _, text) = srv.call(Method::GET, "/api/v1/mirrors", Some(&wrong), None).await;
        assert_eq!(status, 401, "{text}");
    }

    // `ps` shows the --token one only.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", srv.child.id())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains(&operator_file) && cmdline.contains(cli), "{cmdline}");
    for secret in [operator, admin, viewer] {
        assert!(!cmdline.contains(secret), "{cmdline}");
    }
    let log = srv.terminate();
    let warning = log.lines().find(|l| l.contains(kmirror::config::COMMAND_LINE_TOKEN_WARNING)).unwrap_or_default();
    assert!(warning.contains("WARN") && warning.contains("cli"), "the --token warning: {log}");
    for secret in [operator, admin, viewer, cli] {
        assert!(!log.contains(secret), "a token in the log: {log}");
    }
}
