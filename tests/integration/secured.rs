//! Secured clusters: credentials must reach every client kmirror builds, the data path's consumer
//! and transactional producer included (they once got rdkafka's `config_map()` placeholder instead
//! of the secret, while the admin client worked).
//!
//! The rig serves SASL_PLAINTEXT (SCRAM-SHA-512) and SSL (mutual TLS, encrypted client key) on
//! both clusters; `scripts/kafka-rig env` says where and with which credentials.

use std::collections::BTreeMap;
use std::time::Duration;

use kmirror::domain::PartitionState;
use kmirror::domain::secrets::ReferencePolicy;
use kmirror::engine::{Actor, EngineConfig, LifecycleOp, MirrorSpec, ProblemKind, SourceSpec};

use crate::engine::TestEngine;
use crate::support::*;

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| {
        panic!("{key} is not set: run the tests through scripts/test (eval \"$(scripts/kafka-rig env)\")")
    })
}

fn props(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// SCRAM-SHA-512 client properties for the rig's SASL listeners.
fn sasl(password: &str) -> BTreeMap<String, String> {
    props(&[
        ("security.protocol", "SASL_PLAINTEXT".into()),
        ("sasl.mechanism", env("KMIRROR_TEST_SASL_MECHANISM")),
        ("sasl.username", env("KMIRROR_TEST_SASL_USERNAME")),
        ("sasl.password", password.to_string()),
    ])
}

/// Mutual-TLS client properties for the rig's SSL listeners. The key is an encrypted PEM; its
/// password is given as a `${file:...}` reference, resolved when each client is built.
fn mtls() -> BTreeMap<String, String> {
    props(&[
        ("security.protocol", "SSL".into()),
        ("ssl.ca.location", env("KMIRROR_TEST_SSL_CA")),
        ("ssl.certificate.location", env("KMIRROR_TEST_SSL_CERT")),
        ("ssl.key.location", env("KMIRROR_TEST_SSL_KEY")),
        ("ssl.key.password", format!("${{file:{}}}", env("KMIRROR_TEST_SSL_KEY_PASSWORD_FILE"))),
    ])
}

/// Lets `${file:...}` name the rig's TLS directory (kmirror's `[secrets] file_dirs`).
fn allow_rig_secret_files() {
    let file = env("KMIRROR_TEST_SSL_KEY_PASSWORD_FILE");
    let dir = std::path::Path::new(&file).parent().expect("a directory").to_string_lossy().to_string();
    let mut policy = ReferencePolicy::default();
    policy.file_dirs.push(dir);
    kmirror::kafka::client::set_reference_policy(policy);
}

fn actor() -> Actor {
    Actor { identity: "test".into(), address: None }
}

/// Source over SCRAM, destination (state topic, admin, transactional producer) over mutual TLS;
/// then the other way round. Records must flow end to end both times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_end_to_end_through_sasl_scram_and_mutual_tls() {
    let _rig = shared().await;
    allow_rig_secret_files();
    let password = env("KMIRROR_TEST_SASL_PASSWORD");
    for (source, destination, source_props, destination_props) in [
        (
            env("KMIRROR_TEST_SOURCE_SASL_BOOTSTRAP"),
            env("KMIRROR_TEST_DESTINATION_SSL_BOOTSTRAP"),
            sasl(&password),
            mtls(),
        ),
        (
            env("KMIRROR_TEST_SOURCE_SSL_BOOTSTRAP"),
            env("KMIRROR_TEST_DESTINATION_SASL_BOOTSTRAP"),
            mtls(),
            sasl(&password),
        ),
    ] {
        let topic = TestTopic::create(Cluster::Source, "secured", 2, &[]).await;
        let records: Vec<Rec> = (0..200)
            .map(|i| Rec {
                partition: i % 2,
                key: Some(format!("k{i}").into_bytes()),
                value: Some(format!("v{i}").into_bytes()),
                headers: vec![],
                timestamp: None,
            })
            .collect();
        produce(Cluster::Source, &topic.name, &records);

        let id = unique("sec");
        let mut config = EngineConfig::new(destination.clone());
        config.destination_properties = destination_props;
        config.state_topic = format!("__mirror_state-{id}");
        config.state_partitions = 2;
        config.instance_id = format!("kmirror-{id}");
        config.cluster_name = format!("kmirror-{id}");
        config.metadata_refresh_interval = Duration::from_secs(3600);
        config.sealer = test_sealer();
        let engine = TestEngine::with_config(config).await;
        let mirror = unique("sec-m");
        engine
            .handle
            .create_mirror(
                MirrorSpec {
                    topic_include: Vec::new(),
                    topic_exclude: kmirror::domain::topic_policy::default_exclude(),
                    name: mirror.clone(),
                    source: SourceSpec { bootstrap_servers: source.clone(), properties: source_props },
                    expected_source_cluster_id: None,
                    sync: Default::default(),
                    replication_throttle_bytes_per_sec: None,
                    approval: Default::default(),
                },
                actor(),
            )
            .await
            .expect("create mirror over a secured source");
        engine.op_ok(&mirror, &[&topic.name], LifecycleOp::Start { truncation: Default::default() }).await;
        engine.wait_state(&mirror, &topic.name, PartitionState::Mirroring).await;
        engine.wait_caught_up(&mirror, &topic.name, 2).await;
        let copied = read_topic(Cluster::Destination, &topic.name, 2, 200);
        let mut values: Vec<String> =
            copied.iter().map(|c| String::from_utf8_lossy(c.value.as_deref().unwrap()).to_string()).collect();
        values.sort();
        let mut want: Vec<String> = (0..200).map(|i| format!("v{i}")).collect();
        want.sort();
        assert_eq!(values, want);
        engine.op_ok(&mirror, &[&topic.name], LifecycleOp::Stop).await;
        engine.stop().await;
        let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
    }
}

/// A wrong password is refused with an error that names no secret, and a refused property
/// (code loading, a typo) never reaches librdkafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_and_refused_properties_never_echo_values() {
    let _rig = shared().await;
    let engine = TestEngine::start().await;
    let wrong = "wrong-password-4f1c9e";
    let e = engine
        .handle
        .create_mirror(
            MirrorSpec {
                topic_include: Vec::new(),
                topic_exclude: kmirror::domain::topic_policy::default_exclude(),
                name: unique("sec-bad"),
                source: SourceSpec {
                    bootstrap_servers: env("KMIRROR_TEST_SOURCE_SASL_BOOTSTRAP"),
                    properties: sasl(wrong),
                },
                expected_source_cluster_id: None,
                sync: Default::default(),
                replication_throttle_bytes_per_sec: None,
                approval: Default::default(),
            },
            actor(),
        )
        .await
        .expect_err("a wrong SASL password must not create a mirror");
    assert!(!e.to_string().contains(wrong), "{e}");

    // A mirror with these source properties, expected to be refused.
    let refused = |mirror: &str, properties: BTreeMap<String, String>| {
        let spec = MirrorSpec {
            topic_include: Vec::new(),
            topic_exclude: kmirror::domain::topic_policy::default_exclude(),
            name: mirror.to_string(),
            source: SourceSpec { bootstrap_servers: Cluster::Source.bootstrap(), properties },
            expected_source_cluster_id: None,
            sync: Default::default(),
            replication_throttle_bytes_per_sec: None,
            approval: Default::default(),
        };
        let handle = engine.handle.clone();
        async move { handle.create_mirror(spec, actor()).await.expect_err("refused properties") }
    };
    for (name, value, kind) in [
        ("plugin.library.paths", "/tmp/evil-plugin.so", ProblemKind::InvalidProperty),
        ("sasl.passwrd", "typo-secret-value", ProblemKind::InvalidProperty),
        ("security.protocol", "SASL_HUNTER2", ProblemKind::InvalidProperty),
        ("sasl.password", "${env:KMIRROR_ADMIN_TOKEN}", ProblemKind::InvalidProperty),
    ] {
        let mirror = unique("sec-refused");
        let e = refused(&mirror, props(&[(name, value.to_string())])).await;
        assert_eq!(e.kind(), kind, "{name}: {e}");
        let text = e.to_string();
        assert!(text.contains(name), "{name}: {text}");
        for part in ["evil-plugin", "typo-secret", "HUNTER2"] {
            assert!(!text.contains(part), "{name}: the value leaked: {text}");
        }
        assert!(engine.handle.snapshot().mirror(&mirror).is_none(), "nothing stored for {name}");
    }

    // One property under two of librdkafka's names: librdkafka would take both in a hash map's
    // order, so which mechanism authenticated was chance. Refused, naming both, values left out.
    let mirror = unique("sec-alias");
    let e = refused(&mirror, props(&[("sasl.mechanism", "PLAIN".into()), ("sasl.mechanisms", "SCRAM-SHA-512".into())]))
        .await;
    assert_eq!(e.kind(), ProblemKind::InvalidProperty, "{e}");
    let text = e.to_string();
    assert!(text.contains("\"sasl.mechanism\"") && text.contains("\"sasl.mechanisms\""), "{text}");
    assert!(!text.contains("SCRAM") && !text.contains("PLAIN"), "{text}");
    assert!(engine.handle.snapshot().mirror(&mirror).is_none(), "nothing stored");
    engine.stop().await;
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("{}-{name}", unique("kmirror-secured")));
    std::fs::write(&p, text).unwrap();
    p
}

/// `kmirror serve` attached to a SCRAM destination whose password is an `${env:...}` reference:
/// it starts (creates its state topic through the SASL listener), and neither the password nor the
/// reference's value appears in its log. A code-loading property in the file stops it with exit
/// code 2 and an error that names the property only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_resolves_an_env_reference_for_the_destination_and_never_logs_it() {
    use std::process::{Command, Stdio};
    let _rig = shared().await;
    let id = unique("sec-cli");
    let state_topic = format!("__mirror_state-{id}");
    let config = temp_file(
        "dest.toml",
        &format!(
            "[destination]\nbootstrap_servers = {:?}\n[destination.properties]\n\"security.protocol\" = \"SASL_PLAINTEXT\"\n\
             \"sasl.mechanism\" = {:?}\n\"sasl.username\" = {:?}\n\"sasl.password\" = \"${{env:RIG_DEST_SASL_PASSWORD}}\"\n\
             \"fetch.wait.max.ms\" = \"500\"\n\"linger.ms\" = \"5\"\n",
            env("KMIRROR_TEST_DESTINATION_SASL_BOOTSTRAP"),
            env("KMIRROR_TEST_SASL_MECHANISM"),
            env("KMIRROR_TEST_SASL_USERNAME"),
        ),
    );
    let password = env("KMIRROR_TEST_SASL_PASSWORD");
    let log = temp_file("serve.log", "");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(["serve", "--config", config.to_str().unwrap(), "--state-topic", &state_topic])
        .args([
            "--instance-id",
            &format!("kmirror-{id}"),
            "--state-partitions",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--no-auth",
        ])
        .env("RIG_DEST_SASL_PASSWORD", &password)
        .env("RUST_LOG", "debug,rdkafka=debug")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let admin = Cluster::Destination.admin();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while admin.describe_topic(&state_topic).await.is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("kmirror exited early ({status}): {}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kmirror did not create its state topic through the SASL listener"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // SAFETY: sends a signal to the child process we spawned.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.is_empty(), "the debug log was written");
    assert!(!text.contains(&password), "the SASL password appeared in the log");
    // A consumer property (fetch.wait.max.ms) and a producer one (linger.ms) in the destination's
    // properties reach only the clients that use them: librdkafka warned once per other client
    // (the admin client at start-up, the state readers) that it ignores them.
    assert!(!text.contains("CONFWARN"), "{text}");
    let _ = admin.delete_topic(&state_topic).await;

    let bad = temp_file(
        "bad.toml",
        "[destination]\nbootstrap_servers = \"a:1\"\n[destination.properties]\n\"plugin.library.paths\" = \"/tmp/evil-lib.so\"\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(["serve", "--config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("plugin.library.paths") && !stderr.contains("evil-lib"), "{stderr}");
    for f in [config, log, bad] {
        let _ = std::fs::remove_file(f);
    }
}

/// Secrets at rest: a mirror's SCRAM password given in plaintext is stored encrypted in the
/// state topic (no record holds it), the mirror authenticates with it; an instance with another
/// key fails only that mirror's data path, with the reason, while a mirror without secrets runs
/// on; with the old key as the previous one it works again, and its next write is encrypted
/// under the new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_encrypted_at_rest_and_a_wrong_key_fails_only_that_mirror() {
    use kmirror::engine::{DataPathStatus, MirrorUpdate};
    use kmirror::store::seal::{Sealer, SecretKey};
    let _rig = shared().await;
    let password = env("KMIRROR_TEST_SASL_PASSWORD");
    let secured = TestTopic::create(Cluster::Source, "sec-rest", 1, &[]).await;
    let plain = TestTopic::create(Cluster::Source, "sec-rest-plain", 1, &[]).await;
    let recs = |n: usize, tag: &str| -> Vec<Rec> {
        (0..n)
            .map(|i| Rec {
                partition: 0,
                key: None,
                value: Some(format!("{tag}-{i}").into_bytes()),
                headers: vec![],
                timestamp: None,
            })
            .collect()
    };
    produce(Cluster::Source, &secured.name, &recs(20, "s"));
    produce(Cluster::Source, &plain.name, &recs(20, "p"));
    let mut config = TestEngine::config();
    let engine = TestEngine::with_config(config.clone()).await;
    let (m_sec, m_plain) = (unique("rest-sec"), unique("rest-plain"));
    let spec = |name: &str, bootstrap: String, properties| MirrorSpec {
        topic_include: Vec::new(),
        topic_exclude: kmirror::domain::topic_policy::default_exclude(),
        name: name.to_string(),
        source: SourceSpec { bootstrap_servers: bootstrap, properties },
        expected_source_cluster_id: None,
        sync: Default::default(),
        replication_throttle_bytes_per_sec: None,
        approval: Default::default(),
    };
    engine
        .handle
        .create_mirror(spec(&m_sec, env("KMIRROR_TEST_SOURCE_SASL_BOOTSTRAP"), sasl(&password)), actor())
        .await
        .expect("create the SCRAM mirror");
    engine.create_mirror(&m_plain).await;
    const START: LifecycleOp = LifecycleOp::Start { truncation: kmirror::engine::Truncation::None };
    engine.op_ok(&m_sec, &[&secured.name], START).await;
    engine.op_ok(&m_plain, &[&plain.name], START).await;
    engine.wait_caught_up(&m_sec, &secured.name, 1).await;
    engine.wait_caught_up(&m_plain, &plain.name, 1).await;

    // No record of the state topic holds the password; the mirror's record holds it sealed.
    let raw = |state_topic: String| async move {
        tokio::task::spawn_blocking(move || {
            crate::engine::read_all(Cluster::Destination, &state_topic, 4)
                .into_values()
                .flatten()
                .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).to_string())
                .collect::<Vec<_>>()
        })
        .await
        .unwrap()
    };
    let records = raw(config.state_topic.clone()).await;
    assert!(!records.is_empty());
    assert!(records.iter().all(|r| !r.contains(&password)), "the password is in the state topic");
    let sealed_under = |records: &[String], id: &str| {
        records.iter().any(|r| r.contains(&format!("\"sasl.password\":\"${{sealed:v1:{id}:")) && r.contains(&m_sec))
    };
    assert!(sealed_under(&records, test_key().id()), "sealed under the test key");
    engine.stop().await;

    // Another key: only the SCRAM mirror fails, saying why; the other one mirrors on.
    let other = SecretKey::from_bytes(&[0x77; 32]);
    config.sealer = Sealer::new(Some(other.clone()), None, false);
    let engine = TestEngine::with_config(config.clone()).await;
    let why = eventually("the SCRAM mirror's data path failed", Duration::from_secs(60), || async {
        match &engine.handle.snapshot().mirror(&m_sec)?.data_path {
            DataPathStatus::Failed { message } => Some(message.clone()),
            _ => None,
        }
    })
    .await;
    assert!(why.contains("does not have") && why.contains(test_key().id()), "{why}");
    assert!(!why.contains(&password), "{why}");
    produce(Cluster::Source, &plain.name, &recs(5, "p2"));
    engine.wait_caught_up(&m_plain, &plain.name, 1).await;
    engine.stop().await;

    // Rotation: the old key as the previous one opens it; the next write seals under the new.
    config.sealer = Sealer::new(Some(other.clone()), Some(test_key()), false);
    let engine = TestEngine::with_config(config.clone()).await;
    produce(Cluster::Source, &secured.name, &recs(5, "s2"));
    engine.wait_caught_up(&m_sec, &secured.name, 1).await;
    let update = MirrorUpdate { replication_throttle_bytes_per_sec: Some(50 << 20), ..Default::default() };
    engine.handle.update_mirror(&m_sec, update, actor()).await.expect("update");
    let records = raw(config.state_topic.clone()).await;
    assert!(sealed_under(&records, other.id()), "re-encrypted under the new key");
    assert!(records.iter().all(|r| !r.contains(&password)));
    for (m, t) in [(&m_sec, &secured.name), (&m_plain, &plain.name)] {
        engine.op_ok(m, &[t], LifecycleOp::Stop).await;
        let _ = Cluster::Destination.admin().delete_topic(t).await;
    }
    engine.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&config.state_topic).await;
}

/// A reference is accepted in secret properties only: `sasl.mechanism: ${env:...}` would have
/// answered "Unsupported SASL mechanism: <the value>" (and stored it in the audit trail), and
/// `client.id: ${env:...}` sent the value in every request header. Environment variables resolve
/// only when the deployment allows them by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_resolve_only_in_secret_properties_and_only_allowed_variables() {
    let _rig = shared().await;
    let engine = TestEngine::start().await;
    let create = |properties: BTreeMap<String, String>| {
        let handle = engine.handle.clone();
        let spec = MirrorSpec {
            topic_include: Vec::new(),
            topic_exclude: kmirror::domain::topic_policy::default_exclude(),
            name: unique("sec-ref"),
            source: SourceSpec { bootstrap_servers: Cluster::Source.bootstrap(), properties },
            expected_source_cluster_id: None,
            sync: Default::default(),
            replication_throttle_bytes_per_sec: None,
            approval: Default::default(),
        };
        async move { handle.create_mirror(spec, actor()).await }
    };
    // PATH is set in every test process: were it resolved, its value would show.
    let path = std::env::var("PATH").unwrap();
    for (name, value) in
        [("sasl.mechanism", "${env:PATH}"), ("client.id", "${env:PATH}"), ("sasl.username", "${env:PATH}")]
    {
        let e = create(props(&[(name, value.to_string())])).await.expect_err("refused");
        assert_eq!(e.kind(), ProblemKind::InvalidProperty, "{name}: {e}");
        let text = e.to_string();
        assert!(text.contains(name) && text.contains("secret properties only"), "{text}");
        assert!(!text.contains(&path), "{text}");
    }
    // In a secret property, a variable the deployment did not allow is refused by name.
    let e = create(props(&[("sasl.password", "${env:PATH}".to_string())])).await.expect_err("not allowed");
    assert!(e.to_string().contains("env_allow") && !e.to_string().contains(&path), "{e}");
    engine.stop().await;
}

/// Refused credentials are said as such, as fast as the broker answers: a wrong SCRAM password
/// is `source-authentication-failed` naming the mechanism and user (never the password), an
/// untrusted broker certificate is `source-tls-failed`; a running mirror whose credentials stop
/// working shows "authentication failed" in its data path and its cluster-ID check, not
/// "unreachable".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_and_tls_handshakes_are_said_as_such() {
    use kmirror::engine::{ClusterIdStatus, MirrorUpdate};
    let _rig = shared().await;
    allow_rig_secret_files();
    let engine = TestEngine::start().await;
    let spec = |name: &str, bootstrap: String, properties| MirrorSpec {
        topic_include: Vec::new(),
        topic_exclude: kmirror::domain::topic_policy::default_exclude(),
        name: name.to_string(),
        source: SourceSpec { bootstrap_servers: bootstrap, properties },
        expected_source_cluster_id: None,
        sync: Default::default(),
        replication_throttle_bytes_per_sec: None,
        approval: Default::default(),
    };
    let wrong = "wrong-password-9d2e71";
    let t0 = std::time::Instant::now();
    let e = engine
        .handle
        .create_mirror(spec(&unique("auth-bad"), env("KMIRROR_TEST_SOURCE_SASL_BOOTSTRAP"), sasl(wrong)), actor())
        .await
        .expect_err("refused");
    let took = t0.elapsed();
    assert_eq!(e.kind(), ProblemKind::SourceAuthenticationFailed, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("SCRAM-SHA-512") && text.contains(&format!("{:?}", env("KMIRROR_TEST_SASL_USERNAME"))),
        "{text}"
    );
    assert!(text.contains("authentication failed") && !text.contains(wrong), "{text}");
    assert!(took < Duration::from_secs(8), "the refusal took {took:?} (the probe's timeout is 10 s)");

    // A broker certificate the client does not trust (the system's CAs, not the rig's).
    let mut untrusted = mtls();
    untrusted.insert("ssl.ca.location".into(), "/etc/ssl/certs/ca-certificates.crt".into());
    let e = engine
        .handle
        .create_mirror(spec(&unique("tls-bad"), env("KMIRROR_TEST_SOURCE_SSL_BOOTSTRAP"), untrusted), actor())
        .await
        .expect_err("refused");
    assert_eq!(e.kind(), ProblemKind::SourceTlsFailed, "{e}");
    assert!(e.to_string().contains("TLS handshake"), "{e}");

    // A running mirror whose password stops working (changed to a wrong one).
    let topic = TestTopic::create(Cluster::Source, "auth-run", 1, &[]).await;
    let m = unique("auth-run");
    let password = env("KMIRROR_TEST_SASL_PASSWORD");
    engine
        .handle
        .create_mirror(spec(&m, env("KMIRROR_TEST_SOURCE_SASL_BOOTSTRAP"), sasl(&password)), actor())
        .await
        .expect("create");
    engine.op_ok(&m, &[&topic.name], LifecycleOp::Start { truncation: Default::default() }).await;
    engine.wait_state(&m, &topic.name, PartitionState::Mirroring).await;
    let source = SourceSpec { bootstrap_servers: env("KMIRROR_TEST_SOURCE_SASL_BOOTSTRAP"), properties: sasl(wrong) };
    engine
        .handle
        .update_mirror(&m, MirrorUpdate { source: Some(source), ..Default::default() }, actor())
        .await
        .expect("update");
    let _ = engine.handle.refresh_now(&m).await;
    let (status, error, data_path) = eventually("authentication failed is shown", Duration::from_secs(60), || async {
        let snap = engine.handle.snapshot();
        let mm = snap.mirror(&m)?;
        let data_path = mm.data_path.to_string();
        (mm.cluster_id_status == ClusterIdStatus::AuthenticationFailed && data_path.contains("authentication failed"))
            .then(|| (mm.cluster_id_status, mm.cluster_id_error.clone().unwrap_or_default(), data_path))
    })
    .await;
    assert_eq!(status, ClusterIdStatus::AuthenticationFailed);
    assert!(error.contains("authentication failed") && !error.contains("unreachable"), "{error}");
    for t in [&error, &data_path] {
        assert!(!t.contains(wrong) && !t.contains(&password), "{t}");
    }
    engine.op_ok(&m, &[&topic.name], LifecycleOp::Stop).await;
    engine.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}
