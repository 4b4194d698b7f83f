//! The documentation, checked against the product (CONTRIBUTING.md, "Runnable documentation").
//!
//! - Every fenced block marked ` ```sh kmirror-test` in README.md and docs/*.md runs with
//!   `bash -euo pipefail` against a real `kmirror serve` on the rig, in the order of the file;
//!   a block that exits non-zero (a wrong path or header fails `curl -fsS`) fails the test with
//!   the file and line. A shell block that calls the API without the marker fails too, so no
//!   example escapes the check.
//! - docs/configuration.md names every field of the configuration file (read from the code by
//!   probing `kmirror::config::parse_file`, whose unknown-field errors list each section's
//!   fields), every key of kmirror.example.toml and every flag and variable of `kmirror serve`.
//! - docs/performance.md is what `bench/report.py --docs` generates.
//! - The README stays short, and no user-facing page carries history ("session 12").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The info-string word that marks a fenced block as runnable.
const MARK: &str = "kmirror-test";
/// How long one block may run (it is killed after that).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(180);
/// Records the test produces into `$TOPIC` before the first block.
const TOPIC_RECORDS: i32 = 300;
const TOPIC_PARTITIONS: i32 = 3;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// README.md and every docs/*.md, as paths relative to the repository.
fn doc_files() -> Vec<String> {
    let mut files = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// A fenced code block: where it starts (1-based line of the fence), its info string, its text.
#[derive(Debug, Clone)]
struct Block {
    line: usize,
    info: String,
    code: String,
}

impl Block {
    fn runnable(&self) -> bool {
        self.info.split_whitespace().any(|w| w == MARK)
    }
}

/// The fenced code blocks of a Markdown text (``` or ~~~ fences, not nested).
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, Block)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                for fence in ["```", "~~~"] {
                    if let Some(info) = trimmed.strip_prefix(fence) {
                        let info = info.trim_start_matches(fence.chars().next().unwrap()).trim().to_string();
                        open = Some((fence.to_string(), Block { line: i + 1, info, code: String::new() }));
                        break;
                    }
                }
            }
            Some((fence, block)) => {
                if trimmed.starts_with(fence.as_str())
                    && trimmed.trim_start_matches(fence.chars().next().unwrap()).trim().is_empty()
                {
                    out.push(open.take().unwrap().1);
                } else {
                    block.code.push_str(line);
                    block.code.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "an unclosed code fence");
    out
}

/// Fixtures a page asks for in a comment `<!-- kmirror-test: mirror site-a -->`.
fn fixtures(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.trim().strip_prefix("<!-- kmirror-test:") {
            for w in rest.trim_end_matches("-->").split_whitespace() {
                out.insert(w.to_string());
            }
        }
    }
    for f in &out {
        assert!(["mirror", "site-a"].contains(&f.as_str()), "unknown kmirror-test fixture {f:?}");
    }
    out
}

/// Whether a block talks to a running kmirror (and so must be marked runnable).
fn talks_to_kmirror(b: &Block) -> bool {
    let shell = matches!(b.info.split_whitespace().next(), Some("sh" | "bash" | "shell" | "console") | None);
    shell
        && b.code.lines().any(|l| {
            l.contains("curl")
                && ["/api/", "/metrics", "/healthz", "/readyz", "KMIRROR_URL"].iter().any(|p| l.contains(p))
        })
}

// ----- a kmirror serve process --------------------------------------------------------------------

/// A `kmirror serve` child process, killed when dropped; its log goes to a file.
struct Server {
    child: std::process::Child,
    url: String,
    log: PathBuf,
}

impl Server {
    /// Starts `kmirror serve` attached to `cluster` and waits until `/readyz` answers 200.
    async fn start(cluster: Cluster, id: &str, state_topic: &str, tokens: &[(&str, &str, &str)], dir: &Path) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = dir.join(format!("kmirror-{id}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kmirror"));
        cmd.args(["serve", "--destination-bootstrap", &cluster.bootstrap(), "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--state-topic", state_topic, "--state-partitions", "1"])
            .args(["--instance-id", id, "--cluster-name", id])
            .env_remove("KMIRROR_ADMIN_TOKEN")
            .env("RUST_LOG", "info,rdkafka=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (name, role, token) in tokens {
            cmd.arg("--token").arg(format!("{name}:{role}:{token}"));
        }
        let child = cmd.spawn().expect("start kmirror serve");
        let server = Server { child, url: format!("http://127.0.0.1:{port}"), log };
        let http = reqwest::Client::new();
        let ready = format!("{}/readyz", server.url);
        eventually(&format!("kmirror serve ({id}) ready"), Duration::from_secs(120), || async {
            let r = http.get(&ready).send().await.ok()?;
            r.status().is_success().then_some(())
        })
        .await;
        server
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Random hex, for tokens.
fn random_hex(bytes: usize) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..bytes).map(|_| format!("{:02x}", rng.random::<u8>())).collect()
}

/// Deletes the named topics on both clusters when dropped (also when the test fails).
struct Cleanup(Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let names = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                for cluster in [Cluster::Source, Cluster::Destination] {
                    let admin = cluster.admin();
                    for n in &names {
                        let _ = admin.delete_topic(n).await;
                    }
                }
            })
        })
        .join();
    }
}

/// Runs every runnable block of `file` against a fresh `kmirror serve` (and, with the `site-a`
/// fixture, a second one attached to the source cluster), in order.
async fn run_examples(file: &str) {
    for tool in ["curl", "jq"] {
        let found = Command::new("bash").args(["-c", &format!("command -v {tool}")]).output().unwrap().status.success();
        assert!(found, "the documentation's examples need `{tool}` (Debian package {tool})");
    }
    let _rig = shared().await;
    let text = read(file);
    let runnable: Vec<Block> = blocks(&text).into_iter().filter(Block::runnable).collect();
    assert!(!runnable.is_empty(), "{file} has no runnable examples: remove it from the list in docs.rs");
    let fixtures = fixtures(&text);
    let id = unique("docs");
    let dir = std::env::temp_dir().join(&id);
    std::fs::create_dir_all(&dir).unwrap();
    let state_topic = format!("__mirror_state-{id}");
    let topic = TestTopic::create(Cluster::Source, &format!("{id}-orders"), TOPIC_PARTITIONS, &[]).await;
    let _cleanup = Cleanup(vec![topic.name.clone(), format!("{}.kmirror-diverged", topic.name), state_topic.clone()]);
    let records: Vec<Rec> = (0..TOPIC_RECORDS)
        .map(|i| Rec {
            partition: i % TOPIC_PARTITIONS,
            key: Some(format!("order-{i}").into_bytes()),
            value: Some(format!("{{\"order\": {i}}}").into_bytes()),
            headers: vec![],
            timestamp: None,
        })
        .collect();
    let name = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &records)).await.unwrap();

    let (admin, operator, viewer) = (random_hex(24), random_hex(24), random_hex(24));
    let tokens = [
        ("docs-admin", "admin", admin.as_str()),
        ("docs-operator", "operator", operator.as_str()),
        ("docs-viewer", "viewer", viewer.as_str()),
    ];
    let b = Server::start(Cluster::Destination, &id, &state_topic, &tokens, &dir).await;
    let a = if fixtures.contains("site-a") {
        Some(Server::start(Cluster::Source, &format!("{id}-a"), &state_topic, &tokens, &dir).await)
    } else {
        None
    };
    if fixtures.contains("mirror") {
        mirror_fixture(&b.url, &admin, &topic.name).await;
    }
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_kmirror")).parent().unwrap().to_path_buf();
    let mut env: BTreeMap<&str, String> = BTreeMap::new();
    env.insert("KMIRROR_URL", b.url.clone());
    env.insert("TOKEN", admin.clone());
    env.insert("OPERATOR_TOKEN", operator.clone());
    env.insert("VIEWER_TOKEN", viewer.clone());
    env.insert("SOURCE_BOOTSTRAP", Cluster::Source.bootstrap());
    env.insert("DESTINATION_BOOTSTRAP", Cluster::Destination.bootstrap());
    env.insert("TOPIC", topic.name.clone());
    if let Some(a) = &a {
        env.insert("KMIRROR_A_URL", a.url.clone());
    }
    env.insert("PATH", format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default()));
    for block in &runnable {
        let out = dir.join("block.out");
        let started = Instant::now();
        let mut child = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &block.code])
            .current_dir(&dir)
            .env_remove("KMIRROR_ADMIN_TOKEN")
            .envs(&env)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(dir.join("block.err")).unwrap())
            .spawn()
            .unwrap();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if started.elapsed() > BLOCK_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if status.is_none_or(|s| !s.success()) {
            let stdout = std::fs::read_to_string(&out).unwrap_or_default();
            let stderr = std::fs::read_to_string(dir.join("block.err")).unwrap_or_default();
            let why = match status {
                Some(s) => format!("exited with {s}"),
                None => format!("did not finish within {BLOCK_TIMEOUT:?}"),
            };
            panic!(
                "{file}:{}: the example {why}\n--- example ---\n{}--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n--- kmirror log (last lines) ---\n{}{}",
                block.line,
                block.code,
                b.log_tail(),
                a.as_ref().map(|a| format!("\n--- site A log ---\n{}", a.log_tail())).unwrap_or_default()
            );
        }
    }
    drop(a);
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `mirror` fixture: mirror `eu-to-dr` from the source cluster, with `$TOPIC` mirrored and
/// caught up.
async fn mirror_fixture(url: &str, token: &str, topic: &str) {
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{url}/api/v1/mirrors"))
        .bearer_auth(token)
        .json(&serde_json::json!({"name": "eu-to-dr", "source": {"bootstrap_servers": Cluster::Source.bootstrap()}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "create the fixture mirror: {}", r.text().await.unwrap());
    let r = http
        .post(format!("{url}/api/v1/mirrors/eu-to-dr/topics:start"))
        .bearer_auth(token)
        .json(&serde_json::json!({"topics": [topic]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "start the fixture topic: {}", r.text().await.unwrap());
    let t = format!("{url}/api/v1/mirrors/eu-to-dr/topics/{topic}");
    eventually("the fixture topic mirrored and caught up", Duration::from_secs(120), || async {
        let v: serde_json::Value = http.get(&t).bearer_auth(token).send().await.ok()?.json().await.ok()?;
        let parts = v["partitions"].as_array()?;
        let mirrored: u64 = parts.iter().map(|p| p["records_mirrored"].as_u64().unwrap_or(0)).sum();
        (v["state"] == "MIRRORING" && v["lag_records"] == 0 && mirrored == TOPIC_RECORDS as u64).then_some(())
    })
    .await;
}

/// The pages with runnable examples, each run by its own test below.
const PAGES: &[&str] = &[
    "README.md",
    "docs/api.md",
    "docs/cli.md",
    "docs/configuration.md",
    "docs/getting-started.md",
    "docs/instances.md",
    "docs/metrics.md",
    "docs/operations.md",
    "docs/security.md",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_readme_examples_run() {
    run_examples("README.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_api_examples_run() {
    run_examples("docs/api.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_cli_examples_run() {
    run_examples("docs/cli.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_configuration_examples_run() {
    run_examples("docs/configuration.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_getting_started_examples_run() {
    run_examples("docs/getting-started.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_instances_examples_run() {
    run_examples("docs/instances.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_metrics_examples_run() {
    run_examples("docs/metrics.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_operations_examples_run() {
    run_examples("docs/operations.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_security_examples_run() {
    run_examples("docs/security.md").await;
}

/// Every page with runnable blocks has its test above, and every shell block that calls
/// kmirror's API is marked runnable.
#[test]
fn docs_every_api_example_is_runnable_and_run() {
    let mut with_examples = Vec::new();
    let mut unmarked = Vec::new();
    for file in doc_files() {
        let text = read(&file);
        let bs = blocks(&text);
        if bs.iter().any(Block::runnable) {
            with_examples.push(file.clone());
        }
        for b in bs.iter().filter(|b| !b.runnable() && talks_to_kmirror(b)) {
            unmarked.push(format!("{file}:{}", b.line));
        }
    }
    assert!(unmarked.is_empty(), "shell examples that call kmirror must be ```sh {MARK} blocks: {unmarked:?}");
    let mut pages: Vec<String> = PAGES.iter().map(|p| p.to_string()).collect();
    pages.sort();
    with_examples.sort();
    assert_eq!(with_examples, pages, "pages with runnable examples vs the pages docs.rs runs");
}

#[test]
fn docs_extraction_finds_marked_blocks_only() {
    let md = "text\n```sh kmirror-test\ncurl -fsS \"$KMIRROR_URL/healthz\"\n```\n\n```sh\nscripts/test\n```\n\n~~~json\n{}\n~~~\n";
    let bs = blocks(md);
    assert_eq!(bs.len(), 3);
    assert!(bs[0].runnable() && bs[0].line == 2 && bs[0].code == "curl -fsS \"$KMIRROR_URL/healthz\"\n");
    assert!(!bs[1].runnable() && !bs[2].runnable());
    assert!(talks_to_kmirror(&bs[0]) && !talks_to_kmirror(&bs[1]));
}

// ----- configuration reference ------------------------------------------------------------------

/// The names an unknown-field error lists: "unknown field `x`, expected one of `a`, `b`" (or
/// "expected `a` or `b`", "expected `a`").
fn expected_fields(message: &str) -> Vec<String> {
    let Some(rest) = message.split_once("expected").map(|(_, r)| r) else { return Vec::new() };
    rest.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// A TOML document that puts `body` into the table at `path` (`[]`-suffixed parts are arrays of
/// tables).
fn toml_at(path: &[String], body: &str) -> String {
    if path.is_empty() {
        return format!("{body}\n");
    }
    let dotted: Vec<&str> = path.iter().map(|p| p.trim_end_matches("[]")).collect();
    let dotted = dotted.join(".");
    if path.last().is_some_and(|p| p.ends_with("[]")) {
        format!("[[{dotted}]]\n{body}\n")
    } else {
        format!("[{dotted}]\n{body}\n")
    }
}

fn parse_message(toml: &str) -> Option<String> {
    kmirror::config::parse_file(toml).err().map(|e| e.message)
}

/// Every field of the configuration file, from the code: the table at `path` lists its fields
/// in the error for an unknown one; a field that refuses an integer as "expected struct" is a
/// table, as "a sequence" an array (of tables when its entries refuse an unknown field).
fn config_fields(path: &[String], out: &mut BTreeSet<String>) {
    let probe = "kmirror_docs_probe = 1";
    let message = parse_message(&toml_at(path, probe)).expect("an unknown field is refused");
    let fields = expected_fields(&message);
    assert!(!fields.is_empty(), "no field list in {message:?}");
    for f in fields {
        let mut child = path.to_vec();
        match parse_message(&toml_at(path, &format!("{f} = 1"))) {
            Some(m) if m.contains("expected struct") => {
                child.push(f);
                config_fields(&child, out);
            }
            Some(m) if m.contains("expected a sequence") => {
                child.push(format!("{f}[]"));
                match parse_message(&toml_at(&child, probe)) {
                    Some(m) if m.contains("kmirror_docs_probe") => config_fields(&child, out),
                    _ => {
                        child.pop();
                        child.push(f);
                        out.insert(child.join("."));
                    }
                }
            }
            _ => {
                child.push(f);
                out.insert(child.join("."));
            }
        }
    }
}

/// Every key of kmirror.example.toml, commented-out ones included (`# key = ...` lines and
/// `# [section]` headers); the entries of `properties` maps are client properties, not fields.
fn example_keys() -> BTreeSet<String> {
    let text = read("kmirror.example.toml");
    let mut out = BTreeSet::new();
    let mut section: Vec<String> = Vec::new();
    // A commented-out key is `# key = value` (one space): prose that shows a key indented
    // further (`#   token_file = ...  what it does`) is not one.
    let key = regex::Regex::new(r"^(?:# )?([a-z_]+) = ").unwrap();
    let header = regex::Regex::new(r"^(?:# )?(\[\[?)([a-z_.]+)\]\]?\s*$").unwrap();
    for line in text.lines() {
        if let Some(c) = header.captures(line) {
            let array = &c[1] == "[[";
            section = c[2].split('.').map(str::to_string).collect();
            if array && let Some(last) = section.last_mut() {
                last.push_str("[]");
            }
            continue;
        }
        if section.last().is_some_and(|s| s == "properties") {
            continue;
        }
        if let Some(c) = key.captures(line) {
            let mut path = section.clone();
            path.push(c[1].to_string());
            out.insert(path.join("."));
        }
    }
    out
}

/// `--flag`s and `KMIRROR_*` variables in `kmirror serve --help`.
fn serve_options() -> (BTreeSet<String>, BTreeSet<String>) {
    let out = Command::new(env!("CARGO_BIN_EXE_kmirror")).args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let flag = regex::Regex::new(r"(?m)^\s+(?:-\w, )?(--[a-z][a-z-]*)").unwrap();
    let var = regex::Regex::new(r"\[env: (KMIRROR_[A-Z_]+)=").unwrap();
    let flags = flag.captures_iter(&help).map(|c| c[1].to_string()).filter(|f| f != "--help").collect();
    let vars = var.captures_iter(&help).map(|c| c[1].to_string()).collect();
    (flags, vars)
}

#[test]
fn docs_configuration_documents_every_field_flag_and_variable() {
    let doc = read("docs/configuration.md");
    let mut fields = BTreeSet::new();
    config_fields(&[], &mut fields);
    // Sanity: the probe finds what the code has (a broken probe must not pass vacuously).
    for f in ["listen", "engine.commit_interval_ms", "auth.tokens[].token_env", "destination.properties", "tls.cert"] {
        assert!(fields.contains(f), "the probe lost {f}: {fields:?}");
    }
    let example = example_keys();
    for k in ["listen", "tls.cert", "engine.instance_id", "engine.commit_interval_ms", "auth.tokens[].token_env"] {
        assert!(example.contains(k), "the example parser lost {k}: {example:?}");
    }
    let unknown: Vec<&String> = example.difference(&fields).collect();
    assert!(unknown.is_empty(), "kmirror.example.toml has keys the code does not know: {unknown:?}");
    let (flags, vars) = serve_options();
    assert!(flags.contains("--destination-bootstrap") && vars.contains("KMIRROR_LISTEN"), "{flags:?} {vars:?}");
    let undocumented: BTreeSet<String> = fields
        .iter()
        .chain(&example)
        .chain(&flags)
        .chain(&vars)
        .chain(std::iter::once(&"KMIRROR_ADMIN_TOKEN".to_string()))
        .filter(|f| !doc.contains(&format!("`{f}`")))
        .cloned()
        .collect();
    assert!(undocumented.is_empty(), "docs/configuration.md does not document (as `name`): {undocumented:?}");
    // And the other way: every field the reference table lists exists.
    let row = regex::Regex::new(r"(?m)^\| `([a-z_]+(?:\[\])?(?:\.[a-z_]+(?:\[\])?)*)` \|").unwrap();
    let listed: BTreeSet<String> = row.captures_iter(&doc).map(|c| c[1].to_string()).collect();
    let stale: Vec<&String> = listed.difference(&fields).collect();
    assert!(stale.is_empty(), "docs/configuration.md lists fields the code does not have: {stale:?}");
}

#[test]
fn docs_config_probe_reads_field_lists() {
    assert_eq!(expected_fields("unknown field `x`, expected one of `a`, `b_c`"), ["a", "b_c"]);
    assert_eq!(expected_fields("unknown field `x`, expected `a` or `b`"), ["a", "b"]);
    assert_eq!(expected_fields("unknown field `x`, expected `a`"), ["a"]);
    assert_eq!(toml_at(&["auth".into(), "tokens[]".into()], "x = 1"), "[[auth.tokens]]\nx = 1\n");
}

// ----- generated and general rules ----------------------------------------------------------------

#[test]
fn docs_performance_is_generated_from_the_bench_results() {
    let out = Command::new("python3")
        .arg(Path::new(ROOT).join("bench/report.py"))
        .arg("--docs")
        .output()
        .expect("python3 bench/report.py --docs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let generated = String::from_utf8(out.stdout).unwrap();
    assert!(
        generated == read("docs/performance.md"),
        "docs/performance.md differs from `python3 bench/report.py --docs`: regenerate it with \
         `python3 bench/report.py --docs > docs/performance.md`"
    );
}

/// The README's performance lines are the generator's, between its markers.
#[test]
fn docs_readme_performance_summary_is_generated() {
    let out = Command::new("python3")
        .arg(Path::new(ROOT).join("bench/report.py"))
        .arg("--readme-summary")
        .output()
        .expect("python3 bench/report.py --readme-summary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let generated = String::from_utf8(out.stdout).unwrap();
    let readme = read("README.md");
    let start = readme.find("<!-- performance-summary").expect("the README's performance-summary marker");
    let body = &readme[start..];
    let body = &body[body.find("-->").unwrap() + 4..];
    let body = &body[..body.find("<!-- /performance-summary -->").expect("the closing marker")];
    assert_eq!(body, generated, "README.md's performance lines differ from `python3 bench/report.py --readme-summary`");
}

#[test]
fn docs_readme_is_short_and_pages_carry_no_history() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines (at most 300)");
    assert!(readme.contains("scripts/test"), "the README shows the test command");
    let history = regex::Regex::new(r"(?i)\b(session|issue) \d+\b").unwrap();
    for file in doc_files() {
        let text = read(&file);
        for (i, line) in text.lines().enumerate() {
            assert!(!history.is_match(line), "{file}:{}: {line}", i + 1);
        }
    }
}

/// Relative links between the pages point at files that exist.
#[test]
fn docs_relative_links_resolve() {
    let link = regex::Regex::new(r"\]\(([^)#\s]+)(#[^)\s]*)?\)").unwrap();
    let mut broken = Vec::new();
    for file in doc_files() {
        let text = read(&file);
        let base = Path::new(ROOT).join(&file);
        let dir = base.parent().unwrap();
        for c in link.captures_iter(&text) {
            let target = &c[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !dir.join(target).exists() {
                broken.push(format!("{file}: {target}"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:?}");
}

/// What docs/configuration.md says about `--log-color`: text logs into a pipe carry no ANSI
/// codes unless asked for. `kmirror demo` logs as soon as it starts (no Kafka needed).
#[test]
fn docs_logs_are_coloured_only_when_asked() {
    let first_lines = |extra: &[&str]| -> String {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kmirror"))
            .args(["demo", "--listen", "127.0.0.1:0", "--log-level", "info"])
            .args(extra)
            .env_remove("NO_COLOR")
            .env_remove("KMIRROR_LOG_COLOR")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut text = String::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while text.lines().count() < 2 && Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(text.lines().count() >= 2, "kmirror demo logged nothing within 60 s: {text:?}");
        text
    };
    let plain = first_lines(&[]);
    assert!(!plain.contains('\u{1b}') && plain.contains("INFO"), "auto into a pipe: no colour codes: {plain:?}");
    assert!(!first_lines(&["--log-color", "never"]).contains('\u{1b}'));
    assert!(first_lines(&["--log-color", "always"]).contains("\u{1b}["), "--log-color always colours");
}
