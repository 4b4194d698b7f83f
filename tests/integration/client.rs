//! The `kmirror` client commands against a real `kmirror serve` on the rig: every
//! command and flag, output columns and JSON, the exit codes 0/1/2 from real cases, mirrors as
//! code (`apply`, `export`) and the `ETag` / `If-Match` check that keeps a concurrent change from
//! being overwritten.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::engine::keyed;
use crate::support::*;

pub(crate) const ADMIN: &str = "client-admin-token-0123456789abcdef0123";
const VIEWER: &str = "client-viewer-token-0123456789abcdef012";

pub(crate) fn temp_file(name: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("{}-{name}", unique("kmirror-client")));
    std::fs::write(&p, text).unwrap();
    p
}

/// What a CLI run printed and how it exited.
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Out {
    pub(crate) fn ok(&self) -> &Self {
        assert_eq!(self.code, Some(0), "{self:#?}");
        self
    }
    pub(crate) fn code(&self, want: i32) -> &Self {
        assert_eq!(self.code, Some(want), "{self:#?}");
        self
    }
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {self:#?}"))
    }
    /// The stdout line that starts with `prefix`, split into columns.
    pub(crate) fn row(&self, prefix: &str) -> Vec<String> {
        self.try_row(prefix).unwrap_or_else(|| panic!("no line starting with {prefix:?}: {self:#?}"))
    }
    pub(crate) fn try_row(&self, prefix: &str) -> Option<Vec<String>> {
        let line = self.stdout.lines().find(|l| l.starts_with(prefix))?;
        Some(line.split_whitespace().map(str::to_string).collect())
    }
}

/// A `kmirror serve` child process on the rig with its own state topic, an admin and a viewer
/// token; killed (and its state topic deleted) when dropped.
pub(crate) struct Serve {
    child: std::process::Child,
    pub(crate) url: String,
    state_topic: String,
    ca: Option<PathBuf>,
    files: Vec<PathBuf>,
}

impl Serve {
    pub(crate) async fn start(tls: bool) -> Serve {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let id = unique("client");
        let state_topic = format!("__mirror_state-{id}");
        let mut files = Vec::new();
        let (tls_section, ca, scheme) = if tls {
            let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
            let cert_path = temp_file("cert.pem", &cert.cert.pem());
            let key_path = temp_file("key.pem", &cert.key_pair.serialize_pem());
            files.extend([cert_path.clone(), key_path.clone()]);
            (
                format!("[tls]\ncert = \"{}\"\nkey = \"{}\"\n", cert_path.display(), key_path.display()),
                Some(cert_path),
                "https",
            )
        } else {
            (String::new(), None, "http")
        };
        let config = temp_file(
            "serve.toml",
            &format!(
                "listen = \"127.0.0.1:{port}\"\n{tls_section}[destination]\nbootstrap_servers = \"{}\"\n\
                 [engine]\nstate_topic = \"{state_topic}\"\nstate_partitions = 1\ninstance_id = \"{id}\"\n\
                 cluster_name = \"{id}\"\nmembership = \"standalone\"\nlag_refresh_interval_ms = 500\n\
                 [[auth.tokens]]\nname = \"ops\"\nrole = \"admin\"\ntoken = \"{ADMIN}\"\n\
                 [[auth.tokens]]\nname = \"watcher\"\nrole = \"viewer\"\ntoken = \"{VIEWER}\"\n\
                 [secrets]\nenv_allow = [\"CLIENT_TEST_PW_*\"]\n",
                Cluster::Destination.bootstrap()
            ),
        );
        files.push(config.clone());
        let child = Command::new(env!("CARGO_BIN_EXE_kmirror"))
            .args(["serve", "--config", config.to_str().unwrap()])
            .env_remove("KMIRROR_ADMIN_TOKEN")
            // What the mirrors' `${env:...}` references resolve to.
            .env("CLIENT_TEST_PW_A", "secret-value-a")
            .env("CLIENT_TEST_PW_B", "secret-value-b")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Serve { child, url: format!("{scheme}://localhost:{port}"), state_topic, ca, files };
        eventually("kmirror serve answers", Duration::from_secs(90), || async {
            (server.cli(&["mirrors", "list"]).await.code == Some(0)).then_some(())
        })
        .await;
        server
    }

    /// The CLI with this server's URL, the admin token (from `KMIRROR_TOKEN`) and its CA.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_kmirror"));
        c.args(args)
            .env("KMIRROR_URL", &self.url)
            .env("KMIRROR_TOKEN", ADMIN)
            .env_remove("KMIRROR_TOKEN_FILE")
            .env_remove("KMIRROR_CA_FILE");
        if let Some(ca) = &self.ca {
            c.env("KMIRROR_CA_FILE", ca);
        }
        c
    }

    pub(crate) async fn cli(&self, args: &[&str]) -> Out {
        run(self.command(args)).await
    }

    pub(crate) fn http(&self) -> reqwest::Client {
        let mut b = reqwest::Client::builder();
        if let Some(ca) = &self.ca {
            b = b.add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap());
        }
        b.build().unwrap()
    }

    /// Asks the server to re-read the mirror's source now (what a metadata refresh would find).
    pub(crate) async fn refresh(&self, mirror: &str) {
        let r = self
            .http()
            .post(format!("{}/api/v1/mirrors/{mirror}/refresh", self.url))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
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
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

async fn run(mut cmd: Command) -> Out {
    tokio::task::spawn_blocking(move || {
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        }
    })
    .await
    .unwrap()
}

/// Deletes mirror-topic copies on the destination when the test ends.
pub(crate) struct DestinationTopics(pub(crate) Vec<String>);

impl Drop for DestinationTopics {
    fn drop(&mut self) {
        let names = std::mem::take(&mut self.0);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            for n in names {
                let _ = rt.block_on(Cluster::Destination.admin().delete_topic(&n));
            }
        })
        .join();
    }
}

pub(crate) fn mirror_file(name: &str, extra: &str, props: &[(&str, &str)]) -> String {
    let mut text = format!(
        "[[mirror]]\nname = \"{name}\"\n{extra}[mirror.source]\nbootstrap_servers = \"{}\"\n[mirror.source.properties]\n",
        Cluster::Source.bootstrap()
    );
    for (k, v) in props {
        text.push_str(&format!("\"{k}\" = \"{v}\"\n"));
    }
    text
}

/// `describe` until `topic`'s partitions are all in `state`.
pub(crate) async fn wait_state(s: &Serve, mirror: &str, topic: &str, partitions: usize, state: &str) {
    eventually(&format!("{topic} {state}"), Duration::from_secs(90), || async {
        let out = s.cli(&["describe", "--mirror", mirror, "--topic", topic, "--output", "json"]).await;
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        let items = v["items"].as_array()?;
        (items.len() == partitions && items.iter().all(|p| p["state"] == state)).then_some(())
    })
    .await
}

/// Lifecycle, describe, operations, report and instances against one server: columns, JSON,
/// exit code 1 for a partly failing start, --exclude, --wait, --validate-only, a FAILED
/// partition with RETRY/ERROR, recover, and the flags this server does not support yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_commands_drive_a_mirror_through_its_lifecycle() {
    let _rig = shared().await;
    let s = Serve::start(false).await;
    let prefix = unique("clt");
    let a = TestTopic::create(Cluster::Source, &format!("{prefix}-a"), 2, &[]).await;
    let b = TestTopic::create(Cluster::Source, &format!("{prefix}-b"), 1, &[]).await;
    let _copies = DestinationTopics(vec![a.name.clone(), b.name.clone()]);
    let name = a.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(40, 2, "c"))).await.unwrap();
    let mirror = unique("m-client");
    let file = temp_file("create.toml", &mirror_file(&mirror, "", &[("client.id", "cli-test")]));

    // mirrors create / list / describe
    let out = s.cli(&["mirrors", "create", "-f", file.to_str().unwrap()]).await;
    assert!(out.ok().stdout.contains(&format!("Created mirror {mirror}")), "{out:#?}");
    s.cli(&["mirrors", "create", "-f", file.to_str().unwrap()]).await.code(1);
    let out = s.cli(&["mirrors", "list"]).await;
    assert_eq!(
        out.ok().row("MIRROR"),
        ["MIRROR", "TOPICS", "PARTITIONS", "LAG", "SOURCE-CLUSTER-ID", "SOURCE-BOOTSTRAP-SERVER"]
    );
    assert_eq!(
        out.row(&mirror),
        [
            mirror.clone(),
            "0".into(),
            "0".into(),
            "0".into(),
            Cluster::Source.expected_cluster_id(),
            Cluster::Source.bootstrap()
        ]
    );
    let v = s.cli(&["mirrors", "list", "--output", "json"]).await.json();
    let m = v["mirrors"].as_array().unwrap().iter().find(|m| m["name"] == mirror.as_str()).unwrap().clone();
    assert_eq!(m["source"]["properties"]["client.id"], "cli-test");
    assert_eq!(m["sync"]["acls"], true);
    let out = s.cli(&["mirrors", "describe", &mirror]).await;
    assert!(out.ok().stdout.contains("client.id = cli-test") && out.stdout.contains("Data path"), "{out:#?}");
    assert_eq!(s.cli(&["mirrors", "describe", &mirror, "--output", "json"]).await.json()["name"], mirror.as_str());
    let out = s.cli(&["mirrors", "describe", "no-such-mirror"]).await;
    assert!(out.code(1).stderr.contains("mirror-not-found"), "{out:#?}");

    // A partly failing start: one topic exists, one does not. Exit 1, the failure with its slug.
    let missing = format!("{prefix}-missing");
    let topics = format!("{},{missing}", a.name);
    let out = s.cli(&["topics", "start", "--mirror", &mirror, "--topics", &topics]).await;
    out.code(1);
    assert!(out.stdout.contains(&format!("Started 1 topic(s) in mirror {mirror}: [{}]", a.name)), "{out:#?}");
    assert!(out.stderr.contains(&format!("topic {missing}: topic-not-found: ")), "{out:#?}");
    let op_id = out.row("Operation")[1].clone();
    // operations show --wait: the progress reaches MIRRORING; the operation's failed topic → 1.
    let out = s.cli(&["operations", "show", &op_id, "--wait", "--timeout", "90s"]).await;
    out.code(1);
    assert!(out.stdout.contains("Progress: 2/2 partition(s) in MIRRORING"), "{out:#?}");
    assert_eq!(out.row(&format!("{} ", a.name))[1], "ok");
    let v = s.cli(&["operations", "show", &op_id, "--output", "json"]).await.json();
    assert_eq!(v["id"], op_id.as_str());
    assert_eq!(v["kind"], "start");
    assert_eq!(v["outcome"], "partially_failed");
    assert_eq!(v["progress"]["partitions"].as_array().unwrap().len(), 2);
    s.cli(&["operations", "show", "no-such-operation"]).await.code(1);

    // describe: the KIP's columns, once caught up.
    eventually("caught up", Duration::from_secs(90), || async {
        let out = s.cli(&["describe", "--mirror", &mirror, "--topic", &a.name]).await;
        let rows: Option<Vec<Vec<String>>> =
            (0..2).map(|p| out.try_row(&format!("{mirror}  {}  {p} ", a.name))).collect();
        rows?.iter().all(|r| r[3] == "20" && r[4] == "20" && r[5] == "0" && r[6] == "MIRRORING").then_some(())
    })
    .await;
    let out = s.cli(&["describe", "--mirror", &mirror]).await;
    assert_eq!(
        out.ok().row("MIRROR"),
        ["MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE"]
    );
    assert_eq!(
        out.row(&format!("{mirror}  {}  1 ", a.name)),
        [mirror.as_str(), a.name.as_str(), "1", "20", "20", "0", "MIRRORING"]
    );
    let v = s.cli(&["describe", "--mirror", &mirror, "--output", "json"]).await.json();
    assert_eq!(v["total"], 2);
    let p = &v["items"][0];
    for field in [
        "topic",
        "partition",
        "state",
        "source_last_stable_offset",
        "mirrored_source_offset",
        "destination_high_watermark",
        "lag_records",
    ] {
        assert!(p.get(field).is_some(), "API field {field} in {p}");
    }
    let out = s.cli(&["describe", "--mirror", &mirror, "--failed"]).await;
    assert_eq!(out.ok().stdout.trim(), "No failed partitions found");

    // --validate-only changes nothing; a regex with --exclude is resolved on the server.
    let out = s.cli(&["topics", "start", "--mirror", &mirror, "--topics", &b.name, "--validate-only"]).await;
    assert!(
        out.ok()
            .stdout
            .contains(&format!("Validated (nothing changed): would start 1 topic(s) in mirror {mirror}: [{}]", b.name)),
        "{out:#?}"
    );
    assert_eq!(
        s.cli(&["describe", "--mirror", &mirror, "--topic", &b.name]).await.stdout.trim(),
        "No mirror partitions found"
    );
    let out = s
        .cli(&[
            "topics",
            "start",
            "--mirror",
            &mirror,
            "--topics",
            &a.name,
            "--truncation",
            "resync",
            "--quarantine",
            "--validate-only",
        ])
        .await;
    assert!(matches!(out.code, Some(0 | 1)) && out.stdout.contains("Validated (nothing changed)"), "{out:#?}");
    let out = s.cli(&["topics", "start", "--mirror", &mirror, "--topics", &a.name, "--quarantine"]).await;
    assert!(out.code(2).stderr.contains("--quarantine only applies to --truncation resync"), "{out:#?}");
    let all = format!("{prefix}-.*");
    let out = s
        .cli(&[
            "topics",
            "start",
            "--mirror",
            &mirror,
            "--topics",
            &all,
            "--exclude",
            ".*-a-.*",
            "--wait",
            "--timeout",
            "90s",
        ])
        .await;
    assert!(out.ok().stdout.contains(&format!("Started 1 topic(s) in mirror {mirror}: [{}]", b.name)), "{out:#?}");
    assert!(out.stdout.contains("Progress: 1/1 partition(s) in MIRRORING"), "{out:#?}");

    // pause / resume with a pattern and JSON (the API's fields; --wait adds the operation).
    let v =
        s.cli(&["topics", "pause", "--mirror", &mirror, "--topics", &all, "--wait", "--output", "json"]).await.json();
    let paused: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["topic"].as_str().unwrap()).collect();
    assert_eq!(paused, [a.name.as_str(), b.name.as_str()]);
    assert_eq!(v["operation"]["progress"]["done"], true);
    assert_eq!(v["operation"]["progress"]["target_state"], "PAUSED");
    wait_state(&s, &mirror, &a.name, 2, "PAUSED").await;
    let out = s
        .cli(&["topics", "resume", "--mirror", &mirror, "--topics", &format!("{},{}", a.name, b.name), "--wait"])
        .await;
    assert!(out.ok().stdout.contains("Resumed 2 topic(s)"), "{out:#?}");
    wait_state(&s, &mirror, &b.name, 1, "MIRRORING").await;

    // A FAILED partition: its source topic is deleted. RETRY and ERROR columns; recover.
    let bname = b.name.clone();
    drop(b);
    eventually("b FAILED", Duration::from_secs(90), || async {
        s.refresh(&mirror).await;
        let out = s.cli(&["describe", "--mirror", &mirror, "--failed", "--output", "json"]).await;
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        (v["total"] == 1).then_some(())
    })
    .await;
    let out = s.cli(&["describe", "--mirror", &mirror, "--failed"]).await;
    assert_eq!(out.ok().row("MIRROR"), ["MIRROR", "TOPIC", "PARTITION", "RETRY", "ERROR"]);
    let row = out.row(&format!("{mirror}  {bname}  0 "));
    let retry = &row[3];
    assert!(retry == "NonRetryable" || retry.contains('/'), "{out:#?}");
    assert!(row[4].starts_with("SOURCE_TOPIC"), "ERROR starts with the code: {out:#?}");
    // Its source is gone: the recover is refused for the topic, with its slug (exit 1).
    let out = s.cli(&["topics", "recover", "--mirror", &mirror, "--topics", &bname]).await;
    assert!(out.code(1).stdout.contains(&format!("Recovered 0 topic(s) in mirror {mirror}: []")), "{out:#?}");
    assert!(out.stderr.contains(&format!("kmirror: topic {bname}: source-unreachable: ")), "{out:#?}");

    // --all selects the mirror's topics: a start (which adds topics) cannot take it.
    let out = s.cli(&["topics", "start", "--mirror", &mirror, "--all"]).await;
    assert!(out.code(2).stderr.contains("--all selects the topics of the mirror"), "{out:#?}");

    // report and instances.
    let out = s.cli(&["report", &mirror]).await;
    assert!(out.ok().stdout.starts_with("# ") && out.stdout.contains(&mirror), "{out:#?}");
    let v = s.cli(&["report", &mirror, "--output", "json"]).await.json();
    assert_eq!(v["mirror"]["name"], mirror.as_str(), "{v}");
    let out = s.cli(&["instances"]).await;
    assert_eq!(
        out.ok().row("INSTANCE"),
        ["INSTANCE", "THIS", "VERSION", "SLOTS", "PARTITIONS", "HEARTBEAT-AGE", "URL"]
    );
    assert!(out.stdout.contains("(standalone), 1 slot(s), unowned: none"), "{out:#?}");
    let v = s.cli(&["instances", "--output", "json"]).await.json();
    assert_eq!(v["instances"][0]["this"], true);

    // create and delete with JSON output.
    let other = unique("m-client-json");
    let other_file = temp_file("other.toml", &mirror_file(&other, "", &[]));
    let v = s.cli(&["mirrors", "create", "-f", other_file.to_str().unwrap(), "--output", "json"]).await.json();
    assert_eq!((v["mirrors"][0]["name"].as_str(), &v["mirrors"][0]["created"]), (Some(other.as_str()), &json!(true)));
    assert_eq!(v["mirrors"][0]["mirror"]["name"], other.as_str(), "the API's answer: {v}");
    let v = s.cli(&["mirrors", "delete", &other, "--output", "json"]).await.json();
    assert_eq!(v, json!({ "mirror": other, "deleted": true }));
    let _ = std::fs::remove_file(other_file);

    // stop everything, then delete: a mirror with active topics is refused (1), then deleted.
    s.cli(&["mirrors", "delete", &mirror]).await.code(1);
    let out = s.cli(&["topics", "stop", "--mirror", &mirror, "--topics", &all, "--wait", "--timeout", "90s"]).await;
    assert!(out.stdout.contains("Stopped 2 topic(s)"), "{out:#?}");
    eventually("everything STOPPED", Duration::from_secs(60), || async {
        let v = s.cli(&["describe", "--mirror", &mirror, "--output", "json"]).await.json();
        v["items"].as_array()?.iter().all(|p| p["state"] == "STOPPED").then_some(())
    })
    .await;
    assert!(s.cli(&["mirrors", "delete", &mirror]).await.ok().stdout.contains(&format!("Deleted mirror {mirror}")));
    s.cli(&["mirrors", "delete", &mirror]).await.code(1);
    let _ = std::fs::remove_file(file);
}

/// Exit code 2: a wrong token, a viewer writing, a server that is down, a bad flag, a token
/// given as a flag; TLS with --ca-file and --token-file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_usage_auth_and_connection_errors_exit_2_and_tls_works_with_a_ca_file() {
    let _rig = shared().await;
    let s = Serve::start(true).await;
    // TLS with the CA (KMIRROR_CA_FILE in s.command) and a token file.
    let token_file = temp_file("token", &format!("{ADMIN}\n"));
    let out = run({
        let mut c = s.command(&["mirrors", "list", "--token-file", token_file.to_str().unwrap()]);
        c.env_remove("KMIRROR_TOKEN");
        c
    })
    .await;
    assert_eq!(out.ok().stdout.trim(), "No mirrors found");
    // Without the CA the certificate is not trusted: a connection error.
    let out = run({
        let mut c = s.command(&["mirrors", "list"]);
        c.env_remove("KMIRROR_CA_FILE");
        c
    })
    .await;
    assert!(out.code(2).stderr.contains("cannot reach kmirror"), "{out:#?}");
    // A wrong token: 401, exit 2, never echoed.
    let out = run({
        let mut c = s.command(&["mirrors", "list"]);
        c.env("KMIRROR_TOKEN", "wrong-token-0123456789abcdef0123456789");
        c
    })
    .await;
    assert!(out.code(2).stderr.contains("unauthorized: "), "{out:#?}");
    assert!(!out.stderr.contains("wrong-token"), "{out:#?}");
    // A viewer may read but not write.
    let viewer = |args: &[&str]| {
        let mut c = s.command(args);
        c.env("KMIRROR_TOKEN", VIEWER);
        c
    };
    run(viewer(&["instances"])).await.ok();
    let file = temp_file("viewer.toml", &mirror_file(&unique("m-viewer"), "", &[]));
    let out = run(viewer(&["apply", "-f", file.to_str().unwrap()])).await;
    assert!(out.code(2).stderr.contains("forbidden: "), "{out:#?}");
    // A server that is down.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = run({
        let mut c = s.command(&["mirrors", "list"]);
        c.env("KMIRROR_URL", format!("http://127.0.0.1:{port}"));
        c
    })
    .await;
    assert!(out.code(2).stderr.contains(&format!("cannot reach kmirror at http://127.0.0.1:{port}")), "{out:#?}");
    // --url wins over KMIRROR_URL.
    let out = run({
        let mut c = s.command(&["mirrors", "list", "--url", &s.url]);
        c.env("KMIRROR_URL", format!("http://127.0.0.1:{port}"));
        c
    })
    .await;
    out.ok();
    // A server that accepts connections but never answers: --request-timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let out = s.cli(&["instances", "--url", &silent_url, "--request-timeout", "500ms"]).await;
    assert!(out.code(2).stderr.contains("did not answer in time"), "{out:#?}");
    drop(silent);
    // Usage: a bad mirror name, a bad regex, a missing file, a token as a flag (no such flag).
    for (args, says) in [
        (vec!["mirrors", "describe", "../x"], "not a valid name"),
        (vec!["topics", "pause", "--mirror", "m", "--topics", "a,(unclosed"], "invalid regex"),
        (vec!["apply", "-f", "/nonexistent/mirrors.toml"], "cannot read"),
        (vec!["mirrors", "list", "--token", ADMIN], "unexpected argument"),
        (vec!["topics", "stop", "--mirror", "m"], "--topics"),
        (vec!["mirrors", "list", "--url", "ftp://x"], "http:// or https://"),
    ] {
        let out = s.cli(&args).await;
        assert!(out.code(2).stderr.contains(says), "{args:?}: {out:#?}");
        assert!(!out.stderr.contains(ADMIN), "{out:#?}");
    }
    let empty = temp_file("empty-token", "\n");
    let out = s.cli(&["instances", "--token-file", empty.to_str().unwrap()]).await;
    assert!(out.code(2).stderr.contains("is empty"), "{out:#?}");
    for f in [token_file, file, empty] {
        let _ = std::fs::remove_file(f);
    }
}

/// Reads a child's pipe into a buffer from a thread (prompts have no newline).
fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let buf = Arc::new(Mutex::new(String::new()));
    let sink = buf.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    });
    buf
}

/// `apply` with stdin answers (for --prune and --confirm).
async fn apply_answering(s: &Serve, args: &[&str], answer: &str) -> Out {
    let mut cmd = s.command(args);
    let answer = answer.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(answer.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        }
    })
    .await
    .unwrap()
}

/// Mirrors as code: create from a file, an unchanged second apply, a field change, a secret
/// change without its value, --dry-run, --prune with its confirmation, a concurrent PATCH
/// detected (412), and export then apply changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_makes_the_server_what_the_file_says() {
    let _rig = shared().await;
    let s = Serve::start(false).await;
    let (one, two) = (unique("m-apply"), unique("m-apply"));
    let def = |name: &str, client_id: &str, pw: &str, extra: &str| {
        mirror_file(name, extra, &[("client.id", client_id), ("sasl.password", &format!("${{env:{pw}}}"))])
    };
    let v1 = def(&one, "first", "CLIENT_TEST_PW_A", "")
        + &def(&two, "second", "CLIENT_TEST_PW_A", "replication_throttle_bytes_per_sec = 0\n");
    let file = temp_file("v1.toml", &v1);
    let f = file.to_str().unwrap().to_string();

    // --dry-run on an empty server: the plan, nothing created.
    let out = s.cli(&["apply", "-f", &f, "--dry-run"]).await;
    assert!(out.ok().stdout.contains(&format!("mirror {one}: create")), "{out:#?}");
    assert!(out.stdout.contains("+ source.properties.sasl.password: set (secret)"), "{out:#?}");
    assert!(
        out.stdout.contains("Plan: 2 to create, 0 to change, 0 to delete, 0 unchanged (dry run: nothing changed).")
    );
    assert!(!out.stdout.contains("CLIENT_TEST_PW_A") && !out.stdout.contains("secret-value"), "{out:#?}");
    assert_eq!(s.cli(&["mirrors", "list"]).await.stdout.trim(), "No mirrors found");

    // Create, then the same file again: nothing to do.
    let out = s.cli(&["apply", "-f", &f]).await;
    assert!(
        out.ok().stdout.contains(&format!("Created mirror {one}"))
            && out.stdout.contains(&format!("Created mirror {two}")),
        "{out:#?}"
    );
    let out = s.cli(&["apply", "-f", &f]).await;
    assert!(out.ok().stdout.contains("No changes: 2 mirror(s) unchanged."), "{out:#?}");
    assert!(out.stdout.contains(&format!("mirror {one}: unchanged")), "{out:#?}");

    // A field change, a sync change and a secret change: shown (the secret without its value)
    // and applied.
    let v2 = def(&one, "renamed", "CLIENT_TEST_PW_B", "replication_throttle_bytes_per_sec = 4096\n")
        + "[mirror.sync]\nacls = false\n"
        + &def(&two, "second", "CLIENT_TEST_PW_A", "replication_throttle_bytes_per_sec = 0\n");
    let file2 = temp_file("v2.toml", &v2);
    let f2 = file2.to_str().unwrap().to_string();
    let out = s.cli(&["apply", "-f", &f2, "--dry-run"]).await;
    out.ok();
    for line in [
        format!("mirror {one}: change"),
        "  ~ source.properties.client.id: \"first\" -> \"renamed\"".into(),
        "  ~ source.properties.sasl.password: changed (secret)".into(),
        "  ~ replication_throttle_bytes_per_sec: none -> 4096".into(),
        "  ~ sync.acls: true -> false".into(),
        format!("mirror {two}: unchanged"),
    ] {
        assert!(out.stdout.lines().any(|l| l == line), "{line:?} in {out:#?}");
    }
    assert!(!out.stdout.contains("PW_B") && !out.stdout.contains("secret-value"), "{out:#?}");
    // JSON: the same diff, still without values.
    let v = s.cli(&["apply", "-f", &f2, "--dry-run", "--output", "json"]).await.json();
    let changes = &v["mirrors"][0]["changes"];
    assert_eq!(v["mirrors"][0]["action"], "change");
    assert!(
        changes
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["field"] == "source.properties.sasl.password" && c["change"] == "secret_changed"),
        "{v}"
    );
    assert!(!v.to_string().contains("PW_B"), "{v}");
    // Nothing changed by the dry runs.
    let m = s.cli(&["mirrors", "describe", &one, "--output", "json"]).await.json();
    assert_eq!(m["source"]["properties"]["client.id"], "first");
    let out = s.cli(&["apply", "-f", &f2]).await;
    assert!(out.ok().stdout.contains(&format!("Changed mirror {one}")), "{out:#?}");
    let m = s.cli(&["mirrors", "describe", &one, "--output", "json"]).await.json();
    assert_eq!(m["source"]["properties"]["client.id"], "renamed");
    assert_eq!(m["source"]["properties"]["sasl.password"], "${env:CLIENT_TEST_PW_B}");
    assert_eq!(m["replication_throttle_bytes_per_sec"], 4096);
    assert_eq!(m["sync"]["acls"], false);
    assert!(s.cli(&["apply", "-f", &f2]).await.ok().stdout.contains("No changes: 2 mirror(s) unchanged."));

    // ETag and If-Match on the API itself.
    let http = s.http();
    let url = format!("{}/api/v1/mirrors/{one}", s.url);
    let r = http.get(&url).bearer_auth(ADMIN).send().await.unwrap();
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    let patch = |tag: &str, client_id: &str| {
        http.patch(&url).bearer_auth(ADMIN).header("if-match", tag.to_string()).json(&json!({
            "source": {"bootstrap_servers": Cluster::Source.bootstrap(), "properties": {
                "client.id": client_id, "sasl.password": "[redacted]"}}
        }))
    };
    let r = patch(&etag, "renamed").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["etag"].to_str().unwrap(), etag, "the same definition, the same version");
    let r = patch("\"0000000000000000\"", "stale").send().await.unwrap();
    assert_eq!(r.status(), 412);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["type"], "precondition-failed");
    assert_eq!(p["status"], 412);

    // A concurrent change between apply's read and its write: refused, not overwritten.
    let v3 = v2.replace("\"renamed\"", "\"from-apply\"");
    let file3 = temp_file("v3.toml", &v3);
    let mut cmd = s.command(&["apply", "-f", file3.to_str().unwrap(), "--confirm"]);
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let stdout = collect(child.stdout.take().unwrap());
    let stderr = collect(child.stderr.take().unwrap());
    let started = Instant::now();
    while !stderr.lock().unwrap().contains("[y/N]") {
        assert!(started.elapsed() < Duration::from_secs(30), "no prompt: {}", stderr.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(stdout.lock().unwrap().contains("~ source.properties.client.id: \"renamed\" -> \"from-apply\""));
    let r = patch("*", "someone-else").send().await.unwrap();
    assert_eq!(r.status(), 200);
    child.stdin.take().unwrap().write_all(b"y\n").unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    let err = stderr.lock().unwrap().clone();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("mirror {one}: precondition-failed: it was changed on the server")), "{err}");
    let m = s.cli(&["mirrors", "describe", &one, "--output", "json"]).await.json();
    assert_eq!(m["source"]["properties"]["client.id"], "someone-else", "the concurrent change stays");
    // Declining a --confirm changes nothing.
    let out = apply_answering(&s, &["apply", "-f", file3.to_str().unwrap(), "--confirm"], "n\n").await;
    assert!(out.code(1).stderr.contains("not confirmed: nothing changed"), "{out:#?}");

    // export, then apply of its output: nothing to change.
    let out = s.cli(&["export"]).await;
    out.ok();
    assert!(out.stdout.contains("\"sasl.password\" = \"${env:CLIENT_TEST_PW_B}\""), "{out:#?}");
    assert!(!out.stdout.contains("secret-value"), "{out:#?}");
    let exported = temp_file("export.toml", &out.stdout);
    let out = s.cli(&["apply", "-f", exported.to_str().unwrap()]).await;
    assert!(out.ok().stdout.contains("No changes: 2 mirror(s) unchanged."), "{out:#?}");
    let single = s.cli(&["export", "--mirror", &two]).await;
    assert!(single.ok().stdout.contains(&two) && !single.stdout.contains(&one), "{single:#?}");
    s.cli(&["export", "--mirror", "no-such-mirror"]).await.code(1);

    // --prune: a mirror not in the file is deleted after a confirmation.
    let only_two = temp_file(
        "only-two.toml",
        &def(&two, "second", "CLIENT_TEST_PW_A", "replication_throttle_bytes_per_sec = 0\n"),
    );
    let p = only_two.to_str().unwrap().to_string();
    let out = s.cli(&["apply", "-f", &p]).await;
    assert!(out.ok().stdout.contains(&format!("mirror {one}: not in the file (kept; --prune deletes it)")), "{out:#?}");
    // No answer (end of input): nothing deleted.
    let out = s.cli(&["apply", "-f", &p, "--prune"]).await;
    assert!(out.code(1).stderr.contains("not confirmed"), "{out:#?}");
    assert!(out.stdout.contains(&format!("mirror {one}: delete")), "{out:#?}");
    assert!(s.cli(&["mirrors", "list"]).await.stdout.contains(&one));
    let out = apply_answering(&s, &["apply", "-f", &p, "--prune"], "y\n").await;
    assert!(out.ok().stdout.contains(&format!("Deleted mirror {one}")), "{out:#?}");
    assert!(!s.cli(&["mirrors", "list"]).await.stdout.contains(&one));
    // --yes does not ask.
    let empty = temp_file("none.toml", "");
    let out = s.cli(&["apply", "-f", empty.to_str().unwrap(), "--prune", "--yes"]).await;
    assert!(out.ok().stdout.contains(&format!("Deleted mirror {two}")), "{out:#?}");
    assert_eq!(s.cli(&["mirrors", "list"]).await.stdout.trim(), "No mirrors found");
    for f in [file, file2, file3, exported, only_two, empty] {
        let _ = std::fs::remove_file(f);
    }
}

/// `kmirror completions bash|zsh|fish` prints a script naming the client commands.
#[test]
fn shell_completions() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_kmirror")).args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        for word in ["kmirror", "mirrors", "apply", "export", "describe", "operations"] {
            assert!(text.contains(word), "{shell} completions name {word}");
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kmirror")).args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
