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
        .env("KMIRROR_ONCALL_TOKEN", "oncall-token-123")
        .env("KMIRROR_VIEWER_TOKEN", "viewer-token-456")
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
