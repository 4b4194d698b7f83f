//! `kmirror demo`: the whole product on one machine with no Kafka installed. Two in-process mock
//! clusters (`crate::kafka::mock`), a demo mirror with three topics and live traffic, and the API
//! and dashboard on a loopback address with a printed demo token.

use std::net::SocketAddr;
use std::time::Duration;

use crate::auth::{Role, TokenEntry, TokenStore};
use crate::engine::{Actor, EngineConfig, LifecycleOp, MirrorSpec, SourceSpec, TopicSelector, Truncation};
use crate::kafka::mock::{DemoClusters, DemoSpec};

/// The demo's topics: name and partition count.
pub const DEMO_TOPICS: [(&str, i32); 3] = [("orders", 4), ("payments", 4), ("inventory", 2)];

/// Settings of a demo run.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub listen: SocketAddr,
    /// Records per second produced to the source.
    pub rate_per_sec: u32,
    /// The bearer token the demo prints (and the dashboard accepts); random when `None`. At
    /// least [`crate::auth::MIN_TOKEN_LEN`] characters (`kmirror demo` checks a given one).
    pub token: Option<String>,
}

/// A random token of [`crate::auth::MIN_TOKEN_LEN`] characters from a 32-symbol alphabet
/// (160 bits).
fn random_token() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..crate::auth::MIN_TOKEN_LEN)
        .map(|_| char::from(b"abcdefghijkmnpqrstuvwxyz23456789"[rng.random_range(0..32)]))
        .collect()
}

/// Runs the demo until `shutdown` resolves: the mock clusters, then [`crate::app::run`] with the
/// demo's engine settings and token, creating and starting the demo mirror once the engine is up.
pub async fn run(
    options: DemoOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    if let Some(t) = &options.token {
        crate::auth::check_token_strength("demo", t)?;
    }
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|e| format!("listen on {}: {e}", options.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let state_topic = "__mirror_state".to_string();
    let spec = DemoSpec {
        topics: DEMO_TOPICS.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
        destination_topics: vec![(state_topic.clone(), 4)],
        rate_per_sec: options.rate_per_sec,
        leader_move_every: Duration::from_secs(20),
    };
    let clusters =
        tokio::task::spawn_blocking(move || DemoClusters::start(spec)).await.map_err(|e| e.to_string())??;
    tracing::info!(source = %clusters.source_bootstrap, destination = %clusters.destination_bootstrap, "demo clusters up");

    let mut engine = EngineConfig::new(clusters.destination_bootstrap.clone());
    engine.state_topic = state_topic;
    engine.state_partitions = 4;
    engine.instance_id = "kmirror-demo".into();
    engine.metadata_refresh_interval = Duration::from_secs(15);
    // The mock clusters answer fast or never (requests they do not serve time out).
    engine.request_timeout = Duration::from_secs(3);
    // The demo's state lives as long as the process: a key of its own seals the secrets a user
    // gives the New mirror form, as a real deployment's key would.
    engine.sealer = crate::store::seal::Sealer::new(Some(crate::store::seal::SecretKey::generate().0), None, false);
    let token = options.token.clone().unwrap_or_else(random_token);
    let auth = TokenStore::new(vec![TokenEntry { name: "demo".into(), token: token.clone(), role: Role::Admin }]);
    let source_bootstrap = clusters.source_bootstrap.clone();
    let on_started: crate::app::OnStarted =
        Box::new(move |handle| Box::pin(start_demo_mirror(handle, source_bootstrap, addr, token)));
    let config = crate::app::RunConfig {
        engine,
        auth,
        tls: None,
        secret_references: Default::default(),
        on_started: Some(on_started),
    };
    let ran = crate::app::run(listener, config, shutdown).await;
    drop(clusters);
    ran.map_err(|e| e.to_string())
}

/// Creates the demo mirror, starts its topics, and prints how to reach the dashboard.
async fn start_demo_mirror(
    handle: crate::engine::EngineHandle,
    source_bootstrap: String,
    addr: SocketAddr,
    token: String,
) -> Result<(), String> {
    let actor = Actor { identity: "demo".into(), address: None };
    handle
        .create_mirror(
            MirrorSpec {
                name: "demo".into(),
                source: SourceSpec { bootstrap_servers: source_bootstrap, properties: Default::default() },
                expected_source_cluster_id: None,
                sync: Default::default(),
                replication_throttle_bytes_per_sec: None,
                topic_include: Vec::new(),
                topic_exclude: crate::domain::topic_policy::default_exclude(),
                approval: Default::default(),
            },
            actor.clone(),
        )
        .await
        .map_err(|e| format!("create the demo mirror: {e}"))?;
    let names = DEMO_TOPICS.iter().map(|(t, _)| t.to_string()).collect();
    let started = handle
        .lifecycle(
            "demo",
            TopicSelector::Names(names),
            LifecycleOp::Start { truncation: Truncation::None },
            false,
            actor,
        )
        .await
        .map_err(|e| format!("start the demo topics: {e}"))?;
    for r in started.results.iter().filter(|r| !r.ok) {
        tracing::warn!(topic = %r.topic, "demo topic did not start: {:?}", r.error);
    }
    println!("kmirror demo is running.");
    println!("  dashboard: http://{addr}/   (sign in with the token below)");
    println!("  API:       http://{addr}/api/v1/mirrors");
    println!("  token:     {token}");
    println!("  e.g.       curl -H 'Authorization: Bearer {token}' http://{addr}/api/v1/mirrors/demo/topics");
    println!("Press Ctrl-C to stop.");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_generated_token_is_long_enough() {
        let t = super::random_token();
        assert!(crate::auth::check_token_strength("demo", &t).is_ok(), "{}", t.len());
        assert_ne!(t, super::random_token());
    }
}
