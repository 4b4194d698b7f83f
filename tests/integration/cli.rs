//! The `kmirror` binary: configuration loading and graceful shutdown.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kmirror::domain::PartitionState;
use kmirror::engine::{LifecycleOp, Truncation};

use crate::engine::{TestEngine, Traffic, assert_same_content};
use crate::support::*;

fn kmirror() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kmirror"))
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("{}-{name}", unique("kmirror-cli")));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_example_config_is_valid() {
    let out = kmirror()
        .args(["serve", "--config", concat!(env!("CARGO_MANIFEST_DIR"), "/kmirror.example.toml"), "--check-config"])
        .env("KMIRROR_ONCALL_TOKEN", "oncall-token-123-0123456789abcdef")
        .env("KMIRROR_VIEWER_TOKEN", "viewer-token-456-0123456789abcdef")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("kafka-dr-1:9092"), "{stdout}");
    assert!(!stdout.contains("oncall-token-123"), "tokens are never printed: {stdout}");
}

#[test]
fn environment_overrides_the_file_and_flags_override_both() {
    let f = temp_file("env.toml", "listen = \"127.0.0.1:1111\"\n[destination]\nbootstrap_servers = \"a:9092\"\n");
    let run = |extra: &[&str]| {
        let out = kmirror()
            .args(["serve", "--config", f.to_str().unwrap(), "--check-config"])
            .args(extra)
            .env("KMIRROR_LISTEN", "127.0.0.1:2222")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(run(&[]).contains("127.0.0.1:2222"));
    assert!(run(&["--listen", "127.0.0.1:3333"]).contains("127.0.0.1:3333"));
    let _ = std::fs::remove_file(f);
}

#[test]
fn an_invalid_field_exits_2_and_names_it() {
    for (text, field) in [
        ("[destination]\nbootstrap_servers = \"a:1\"\n[engine]\ncommit_interval_ms = 0\n", "engine.commit_interval_ms"),
        ("lisen = \"127.0.0.1:1\"\n", "lisen"),
        (
            "[destination]\nbootstrap_servers = \"a:1\"\n[[auth.tokens]]\nname = \"x\"\nrole = \"root\"\ntoken = \"0123456789\"\n",
            "auth.tokens[0].role",
        ),
        ("listen = \"not-an-address\"\n[destination]\nbootstrap_servers = \"a:1\"\n", "listen"),
    ] {
        let f = temp_file("bad.toml", text);
        let out = kmirror().args(["serve", "--config", f.to_str().unwrap()]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(field), "error names {field}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one clear error: {stderr}");
        let _ = std::fs::remove_file(f);
    }
}

/// Tokens shorter than 32 characters stop kmirror at startup with exit code 2 and one error that
/// names the token (never shows it): flags, the file, `KMIRROR_ADMIN_TOKEN` and the demo's.
#[test]
fn short_tokens_are_refused_at_startup() {
    let secret = "tiny-secret-7";
    let file = temp_file(
        "short-token.toml",
        &format!(
            "[destination]\nbootstrap_servers = \"a:1\"\n[[auth.tokens]]\nname = \"ci\"\nrole = \"viewer\"\ntoken = \"{secret}\"\n"
        ),
    );
    let cases: Vec<(Vec<String>, Option<&str>, &str)> = vec![
        (
            strings(&["serve", "--destination-bootstrap", "a:1", "--token", &format!("oncall:admin:{secret}")]),
            None,
            "\"oncall\"",
        ),
        (strings(&["serve", "--config", file.to_str().unwrap()]), None, "auth.tokens[0]"),
        (strings(&["serve", "--destination-bootstrap", "a:1", "--check-config"]), Some(secret), "KMIRROR_ADMIN_TOKEN"),
        (strings(&["serve", "--destination-bootstrap", "a:1", "--no-auth"]), Some(secret), "KMIRROR_ADMIN_TOKEN"),
        (strings(&["demo", "--listen", "127.0.0.1:0", "--token", secret]), None, "\"demo\""),
    ];
    for (args, admin_token, names) in cases {
        let mut cmd = kmirror();
        cmd.args(&args).env_remove("KMIRROR_ADMIN_TOKEN").env_remove("KMIRROR_DEMO_TOKEN");
        if let Some(t) = admin_token {
            cmd.env("KMIRROR_ADMIN_TOKEN", t);
        }
        // Refused before anything starts; a regression must not hang the test (a demo with an
        // accepted token would serve forever).
        let (code, stderr) = exit_within(&mut cmd, Duration::from_secs(30));
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(names) && stderr.contains("32 characters"), "{args:?} names {names}: {stderr}");
        assert!(!stderr.contains(secret), "{args:?}: the token is never shown: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one clear error: {stderr}");
    }
    // 32 characters are enough.
    let out = kmirror()
        .args(["serve", "--destination-bootstrap", "a:1", "--check-config"])
        .env("KMIRROR_ADMIN_TOKEN", "0123456789abcdef0123456789abcdef")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("admin (KMIRROR_ADMIN_TOKEN)"));
    let _ = std::fs::remove_file(file);
}

/// Runs `cmd` to its exit (killed after `limit`): exit code and stderr.
fn exit_within(cmd: &mut Command, limit: Duration) -> (Option<i32>, String) {
    let mut child = Child::spawn(cmd);
    let code = child.wait_for_exit(limit);
    (code, child.stderr_text())
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// A child process whose stderr is collected by a thread (so the pipe never fills), killed when
/// dropped.
struct Child {
    child: std::process::Child,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Child {
    fn spawn(cmd: &mut Command) -> Child {
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(&mut pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Child { child, stderr, reader: Some(reader) }
    }

    /// The exit code once the process exits by itself, or `None` (killed) after `limit`.
    fn wait_for_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The whole stderr of an exited process.
    fn stderr_text(mut self) -> String {
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM, wait for the exit, and the whole stderr.
    fn terminate(mut self) -> String {
        // SAFETY: sends a signal to the child process we spawned.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        assert_eq!(rc, 0);
        let status = self.child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "graceful shutdown exits 0");
        self.stderr_text()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kmirror serve` throttles wrong bearer tokens (429 with Retry-After after the burst) and logs
/// each failure with the client address and path, never the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_are_throttled_and_logged_without_the_token() {
    let _rig = shared().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let id = unique("authlog");
    let token = "authlog-admin-0123456789abcdef0123";
    let server = Child::spawn(
        kmirror()
            .args(["serve", "--destination-bootstrap", &Cluster::Destination.bootstrap(), "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--state-topic", &format!("__mirror_state-{id}"), "--state-partitions", "1", "--instance-id", &id])
            .args(["--token", &format!("ops:operator:{token}")])
            .env_remove("KMIRROR_ADMIN_TOKEN")
            .env("RUST_LOG", "warn"),
    );
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/v1/mirrors");
    eventually("kmirror answers", Duration::from_secs(60), || async {
        let r = http.get(&url).bearer_auth(token).send().await.ok()?;
        r.status().is_success().then_some(())
    })
    .await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for i in 0..30 {
        let r = http.get(&url).bearer_auth(format!("guess-{i:04}")).send().await.unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            retry_after = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
            break;
        }
    }
    let burst = kmirror::auth::FAILURE_BURST as usize;
    assert!(statuses.len() > burst && statuses[..burst].iter().all(|s| *s == 401), "{statuses:?}");
    assert_eq!(statuses.last(), Some(&429), "throttled after repeated failures: {statuses:?}");
    assert!(retry_after.is_some_and(|s| s.parse::<u64>().is_ok()));
    let stderr = server.terminate();
    let failures: Vec<&str> = stderr.lines().filter(|l| l.contains("Authentication failed")).collect();
    assert_eq!(failures.len(), statuses.len() - 1, "one line per failure: {stderr}");
    for line in &failures {
        assert!(line.contains("WARN") && line.contains("127.0.0.1") && line.contains("/api/v1/mirrors"), "{line}");
    }
    assert!(stderr.contains("too many failed attempts"), "{stderr}");
    assert!(!stderr.contains("guess-0") && !stderr.contains(token), "tokens are never logged: {stderr}");
    let _ = Cluster::Destination.admin().delete_topic(&format!("__mirror_state-{id}")).await;
}

/// SIGTERM while mirroring under load: exit 0, and a restart continues exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_cleanly_and_a_restart_continues_exactly_once() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Source, "sigterm", 2, &[]).await;
    let eng = TestEngine::start().await;
    let config = eng.config.clone();
    let mirror = unique("m-sigterm");
    eng.create_mirror(&mirror).await;
    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Start { truncation: Truncation::None }).await;
    eng.stop().await;

    let traffic = Traffic::start(&topic.name, 2);
    let mut child = kmirror()
        .args(["serve", "--destination-bootstrap", &Cluster::Destination.bootstrap()])
        .args(["--state-topic", &config.state_topic, "--instance-id", &config.instance_id])
        .args(["--cluster-name", &config.cluster_name])
        .args(["--state-partitions", &config.state_partitions.to_string(), "--listen", "127.0.0.1:0", "--no-auth"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let q: Vec<_> = (0..2).map(|p| (topic.name.clone(), p, kmirror::kafka::OffsetSpec::Latest)).collect();
    eventually("the child mirrors", Duration::from_secs(60), || async {
        let ends =
            Cluster::Destination.admin().list_offsets(&q, kmirror::kafka::IsolationLevel::ReadCommitted).await.ok()?;
        (ends.iter().map(|o| o.offset).sum::<i64>() > 100).then_some(())
    })
    .await;
    // SAFETY: sends a signal to the child process we spawned.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "kmirror did not exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status.code(), Some(0), "graceful shutdown exits 0");

    let produced = tokio::task::spawn_blocking(move || traffic.finish()).await.unwrap();
    let eng = TestEngine::with_config(config).await;
    eng.wait_state(&mirror, &topic.name, PartitionState::Mirroring).await;
    eng.wait_caught_up(&mirror, &topic.name, 2).await;
    assert_eq!(assert_same_content(&topic.name, 2).await, produced);
    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Stop).await;
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

/// `kmirror demo` as a child process: within 30 s the API shows the demo mirror MIRRORING with
/// records flowing, and pause / resume / stop / restart work through the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_mirrors_within_30_seconds_and_obeys_the_api() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let token = "demo-token-for-tests-0123456789abcdef";
    /// Kills the demo when the test ends, however it ends.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _demo = Kill(
        kmirror()
            .args(["demo", "--listen", &format!("127.0.0.1:{port}"), "--token", token, "--rate", "200"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}/api/v1/mirrors/demo");
    let http = reqwest::Client::new();
    let get = |path: String| {
        let http = http.clone();
        async move {
            let r = http.get(path).bearer_auth(token).send().await.ok()?;
            if !r.status().is_success() {
                return None;
            }
            r.json::<serde_json::Value>().await.ok()
        }
    };
    let started = Instant::now();
    let records = |v: &serde_json::Value| -> u64 {
        v["items"].as_array().map_or(0, |a| a.iter().map(|p| p["records_mirrored"].as_u64().unwrap_or(0)).sum())
    };
    let first = eventually("demo partitions MIRRORING with records", Duration::from_secs(30), || async {
        let v = get(format!("{base}/partitions?page_size=1000")).await?;
        let items = v["items"].as_array()?;
        (items.len() == 10 && items.iter().all(|p| p["state"] == "MIRRORING") && records(&v) > 0).then_some(v)
    })
    .await;
    assert!(started.elapsed() < Duration::from_secs(30));
    // Records keep flowing.
    let before = records(&first);
    eventually("more records mirrored", Duration::from_secs(20), || async {
        let v = get(format!("{base}/partitions?page_size=1000")).await?;
        (records(&v) > before).then_some(())
    })
    .await;
    let post = |op: &str| {
        let http = http.clone();
        let url = format!("{base}/topics:{op}");
        async move {
            let r = http
                .post(url)
                .bearer_auth(token)
                .json(&serde_json::json!({"topics": ["orders"]}))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            let v: serde_json::Value = r.json().await.unwrap();
            assert_eq!(v["results"][0]["ok"], true, "{v}");
        }
    };
    let topic_state = |want: &'static str| {
        let get = &get;
        let base = &base;
        async move {
            eventually(&format!("orders {want}"), Duration::from_secs(30), || async {
                let v = get(format!("{base}/topics/orders")).await?;
                (v["state"] == want).then_some(())
            })
            .await
        }
    };
    post("pause").await;
    topic_state("PAUSED").await;
    post("resume").await;
    topic_state("MIRRORING").await;
    post("stop").await;
    topic_state("STOPPED").await;
    // Restart (start on the STOPPED topic, nothing written locally): mirroring again.
    post("start").await;
    topic_state("MIRRORING").await;
}

/// `[tls]` in the config file: the API answers over HTTPS with that certificate, not over HTTP;
/// a missing key file is a configuration error naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_serves_https_with_the_configured_certificate() {
    let _rig = shared().await;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_path = temp_file("cert.pem", &cert.cert.pem());
    let key_path = temp_file("key.pem", &cert.key_pair.serialize_pem());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let id = unique("tls");
    let config = temp_file(
        "tls.toml",
        &format!(
            "listen = \"127.0.0.1:{port}\"\n[tls]\ncert = \"{}\"\nkey = \"{}\"\n[destination]\nbootstrap_servers = \"{}\"\n[engine]\nstate_topic = \"__mirror_state-{id}\"\nstate_partitions = 1\ninstance_id = \"{id}\"\ncluster_name = \"{id}\"\n",
            cert_path.display(),
            key_path.display(),
            Cluster::Destination.bootstrap()
        ),
    );
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = Kill(
        kmirror()
            .args(["serve", "--config", config.to_str().unwrap(), "--no-auth"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let curl = |scheme: &str| {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "5", "--cacert", cert_path.to_str().unwrap()])
            .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
            .arg(format!("{scheme}://localhost:{port}/healthz"))
            .output()
            .unwrap();
        out.status.success()
    };
    let start = Instant::now();
    while !curl("https") {
        assert!(start.elapsed() < Duration::from_secs(60), "HTTPS never answered");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(!curl("http"), "plain HTTP is not served on the TLS listener");
    // HSTS (and the other security headers) under TLS.
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "--cacert", cert_path.to_str().unwrap(), "-D", "-", "-o", "/dev/null"])
        .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
        .arg(format!("https://localhost:{port}/static/app.css"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(head.contains(&format!("strict-transport-security: {}", kmirror::app::HSTS)), "{head}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");

    let broken = temp_file(
        "tls-bad.toml",
        &format!(
            "[tls]\ncert = \"{}\"\nkey = \"/nonexistent/key.pem\"\n[destination]\nbootstrap_servers = \"a:1\"\n",
            cert_path.display()
        ),
    );
    let out = kmirror().args(["serve", "--config", broken.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tls.key"));
    for p in [cert_path, key_path, config, broken] {
        let _ = std::fs::remove_file(p);
    }
    let _ = Cluster::Destination.admin().delete_topic(&format!("__mirror_state-{id}")).await;
}
