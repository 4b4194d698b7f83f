//! `KafkaAdmin`: every admin call kmirror makes, as async methods returning owned Rust types.
//!
//! Calls rdkafka 0.39 already wraps (create/delete topics, create partitions, describe configs,
//! delete records) go through `rdkafka::admin::AdminClient`. The ones it lacks (DescribeCluster,
//! DescribeTopics, ListOffsets, IncrementalAlterConfigs, Create/Describe/DeleteAcls,
//! List/DescribeConsumerGroups, List/AlterConsumerGroupOffsets) are issued through
//! `rdkafka::bindings` with the driver in `ffi.rs`, each on tokio's blocking pool.
//!
//! Files: `mod.rs` the client and cluster description, `topics.rs` topics, offsets, configs and
//! records, `acls.rs` ACLs, `groups.rs` consumer groups and their offsets, `convert.rs` the
//! conversions between kmirror's types and librdkafka's.
#![allow(unsafe_code)]

mod acls;
mod convert;
mod groups;
mod topics;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::bindings as rd;
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;

use super::error::{KafkaCode, KafkaError, KafkaResult};
use super::ffi::{self, AdminCall, code_of};
use super::types::*;
use convert::read_node;

/// The admin clients handed out by [`KafkaAdmin::shared`]. An entry lives while a caller holds
/// a clone; the next `shared` call closes the ones nobody holds.
static SHARED: std::sync::Mutex<Vec<SharedAdmin>> = std::sync::Mutex::new(Vec::new());

struct SharedAdmin {
    bootstrap: String,
    properties: BTreeMap<String, String>,
    admin: KafkaAdmin,
}

/// An admin connection to one cluster. Cheap to clone; all clones share one librdkafka client.
#[derive(Clone)]
pub struct KafkaAdmin {
    inner: Arc<Inner>,
}

struct Inner {
    client: AdminClient<DefaultClientContext>,
    /// The last refusal of the credentials or TLS handshake, until a request succeeds: librdkafka
    /// reports it only as a client error event on the main queue while the request itself waits
    /// for its timeout ([`KafkaAdmin::pump`]).
    refused: std::sync::Mutex<Option<Refused>>,
    /// Woken when a refusal is recorded.
    refusal_seen: tokio::sync::Notify,
    timeout: Duration,
    bootstrap: String,
    /// The cluster does not serve DescribeCluster: describe it from Metadata.
    metadata_cluster: std::sync::atomic::AtomicBool,
    /// The cluster does not serve DescribeTopics: describe topics from Metadata.
    metadata_topics: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for KafkaAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Client properties may hold secrets: show only the bootstrap servers.
        f.debug_struct("KafkaAdmin").field("bootstrap", &self.inner.bootstrap).finish()
    }
}

/// A refusal of the client's credentials or TLS handshake, as librdkafka reported it.
#[derive(Clone)]
struct Refused {
    code: KafkaCode,
    reason: String,
}

/// What a client error says the cluster refused: `"authentication failed"` (SASL) or `"TLS
/// handshake failed"`, or `None` for any other error.
fn refusal_of(code_name: &str, reason: &str) -> Option<&'static str> {
    match code_name {
        "_AUTHENTICATION" => Some("authentication failed"),
        "_SSL" => Some("TLS handshake failed"),
        // A broker that drops the connection during the TLS handshake (a client certificate it
        // refuses) is reported as a transport error "... in state SSL_HANDSHAKE".
        "_TRANSPORT" | "_ALL_BROKERS_DOWN" if reason.contains("SSL_HANDSHAKE") || reason.contains("SSL handshake") => {
            Some("TLS handshake failed")
        }
        _ => None,
    }
}

/// [`refusal_of`] for an rdkafka error code (the data path's consumer errors).
pub(in crate::kafka) fn refusal_kind(code: Option<RDKafkaErrorCode>, reason: &str) -> Option<&'static str> {
    let code = code?;
    refusal_of(&code_of(code).name, reason)
}

impl Inner {
    fn refused(&self, operation: &'static str) -> Option<KafkaError> {
        let r = self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()?;
        Some(KafkaError::Kafka { operation, resource: "cluster".to_string(), code: r.code, message: r.reason })
    }
}

pub(in crate::kafka) fn rdkafka_error(
    operation: &'static str,
    resource: &str,
    e: rdkafka::error::KafkaError,
) -> KafkaError {
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::OperationTimedOut) | Some(RDKafkaErrorCode::RequestTimedOut) => {
            KafkaError::Timeout { operation, resource: resource.to_string(), after: Duration::ZERO }
        }
        Some(code) => {
            KafkaError::Kafka { operation, resource: resource.to_string(), code: code_of(code), message: e.to_string() }
        }
        None => KafkaError::Kafka {
            operation,
            resource: resource.to_string(),
            code: KafkaCode { code: -1, name: "UNKNOWN".into() },
            message: e.to_string(),
        },
    }
}

impl KafkaAdmin {
    /// Creates an admin client for the cluster at `bootstrap`. `properties` are librdkafka client
    /// properties (security.protocol, sasl.*, ssl.*). `timeout` bounds every request.
    /// Connecting is lazy: an unreachable cluster shows up as a timeout on the first call.
    pub fn connect(
        bootstrap: &str,
        properties: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> KafkaResult<KafkaAdmin> {
        let cfg = super::client::client_config(Some(super::client::ClientKind::Producer), bootstrap, properties, &[])?;
        let client: AdminClient<DefaultClientContext> = super::client::create(&cfg, "admin client")?;
        Ok(KafkaAdmin {
            inner: Arc::new(Inner {
                client,
                refused: std::sync::Mutex::new(None),
                refusal_seen: tokio::sync::Notify::new(),
                timeout,
                bootstrap: bootstrap.to_string(),
                metadata_cluster: std::sync::atomic::AtomicBool::new(false),
                metadata_topics: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// An admin client for `bootstrap` with `properties`, shared with every other caller of
    /// `shared` that asks for the same cluster, properties and timeout. Data paths use it: a
    /// mirror has one per owned slot (16 by default), and two clients of their own each were 32
    /// librdkafka clients, with their threads and broker connections, for one mirror.
    pub fn shared(
        bootstrap: &str,
        properties: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> KafkaResult<KafkaAdmin> {
        let mut registry = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        // Forget clients nobody else holds any more (the mirror was deleted, or its properties
        // changed, e.g. a rotated password), but close them after unlocking: closing a client
        // waits for its threads.
        let (keep, unused): (Vec<_>, Vec<_>) =
            std::mem::take(&mut *registry).into_iter().partition(|e| Arc::strong_count(&e.admin.inner) > 1);
        *registry = keep;
        let found = registry
            .iter()
            .find(|e| e.bootstrap == bootstrap && &e.properties == properties && e.admin.inner.timeout == timeout)
            .map(|e| e.admin.clone());
        let admin = match found {
            Some(admin) => admin,
            None => {
                let admin = KafkaAdmin::connect(bootstrap, properties, timeout)?;
                registry.push(SharedAdmin {
                    bootstrap: bootstrap.to_string(),
                    properties: properties.clone(),
                    admin: admin.clone(),
                });
                admin
            }
        };
        drop(registry);
        drop(unused);
        Ok(admin)
    }

    /// True once the cluster has shown it serves only the core APIs (no DescribeCluster), as
    /// librdkafka's mock cluster does: requests it does not serve then time out instead of
    /// failing, and callers report them as "not supported by this cluster".
    pub fn is_limited(&self) -> bool {
        self.inner.metadata_cluster.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn bootstrap(&self) -> &str {
        &self.inner.bootstrap
    }

    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    fn options(&self) -> AdminOptions {
        AdminOptions::new().request_timeout(Some(self.inner.timeout)).operation_timeout(Some(self.inner.timeout))
    }

    /// Runs a bindings-level admin call on the blocking pool.
    async fn blocking<R: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&Inner) -> KafkaResult<R> + Send + 'static,
    ) -> KafkaResult<R> {
        let inner = Arc::clone(&self.inner);
        let r = tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| KafkaError::Task { operation, message: e.to_string() })?;
        self.pump();
        r
    }

    /// DescribeCluster: cluster ID, brokers and the active controller. Clusters that do not
    /// implement DescribeCluster (older brokers, librdkafka's mock cluster) are described from a
    /// Metadata request instead.
    pub async fn describe_cluster(&self) -> KafkaResult<ClusterDescription> {
        self.or_refused("DescribeCluster", self.describe_cluster_unchecked()).await
    }

    /// `work`, unless the cluster refuses this client's credentials or TLS handshake first: then
    /// that refusal at once. A request that ends without an answer after a refusal is that
    /// refusal too; one that succeeds forgets it.
    async fn or_refused<T>(
        &self,
        operation: &'static str,
        work: impl std::future::Future<Output = KafkaResult<T>>,
    ) -> KafkaResult<T> {
        let refused = async {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                let woken = self.inner.refusal_seen.notified();
                self.pump();
                if let Some(e) = self.inner.refused(operation) {
                    return e;
                }
                tokio::select! {
                    _ = woken => {}
                    _ = tick.tick() => {}
                }
            }
        };
        let r = tokio::select! {
            r = work => r,
            e = refused => return Err(e),
        };
        self.pump();
        match r {
            Ok(v) => {
                *self.inner.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                Ok(v)
            }
            Err(e) if e.is_no_answer() => Err(self.inner.refused(operation).unwrap_or(e)),
            Err(e) => Err(e),
        }
    }

    /// Reads the events librdkafka left on this client's main queue (nothing else reads them, so
    /// they would pile up for the client's life): its log lines go to the debug log, scrubbed; a
    /// refusal of the credentials or the TLS handshake
    /// is recorded for the next request.
    fn pump(&self) {
        let rk = self.inner.client.inner().native_ptr();
        // SAFETY: `rk` is this live client's handle, held by `self` for the call.
        #[allow(unsafe_code)]
        let events = unsafe { ffi::drain_main_queue(rk, 1_000) };
        for ev in events {
            match ev {
                ffi::MainEvent::Error { code, reason } => {
                    let reason = super::client::scrub_secrets(&reason);
                    if refusal_of(&code.name, &reason).is_some() {
                        *self.inner.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                            Some(Refused { code: code.clone(), reason: reason.clone() });
                        self.inner.refusal_seen.notify_waiters();
                    }
                    tracing::debug!(bootstrap = %self.inner.bootstrap, "admin client error: {code}: {reason}");
                }
                // Debug only: what an admin client's failures mean reaches its callers as request
                // errors (and refusals, above); at error level these lines would repeat every
                // reconnect attempt for as long as a source is down.
                ffi::MainEvent::Log { level, facility, message } => {
                    let message = super::client::scrub_secrets(&message);
                    tracing::debug!(target: "librdkafka", level, %facility, "{message}");
                }
            }
        }
    }

    /// The last refusal of this client's credentials or TLS handshake, if the cluster has not
    /// answered a request since.
    pub fn refusal(&self) -> Option<KafkaError> {
        self.pump();
        self.inner.refused("connect")
    }

    async fn describe_cluster_unchecked(&self) -> KafkaResult<ClusterDescription> {
        use std::sync::atomic::Ordering;
        if self.inner.metadata_cluster.load(Ordering::Relaxed) {
            return self.describe_cluster_from_metadata().await;
        }
        match self.describe_cluster_api().await {
            // Not served (or, on librdkafka's mock cluster, never answered: it has no
            // controller): describe the cluster from Metadata, and from now on only that way if
            // Metadata works.
            Err(e)
                if e.is(crate::kafka::KafkaErrorKind::UnsupportedFeature)
                    || e.is(crate::kafka::KafkaErrorKind::UnsupportedVersion)
                    || e.is(crate::kafka::KafkaErrorKind::InvalidRequest)
                    || matches!(e, KafkaError::Timeout { .. }) =>
            {
                let described = self.describe_cluster_from_metadata().await;
                if described.as_ref().is_ok_and(|d| !d.cluster_id.is_empty()) {
                    self.inner.metadata_cluster.store(true, Ordering::Relaxed);
                    described
                } else {
                    Err(e)
                }
            }
            r => r,
        }
    }

    async fn describe_cluster_from_metadata(&self) -> KafkaResult<ClusterDescription> {
        const OP: &str = "Metadata";
        self.blocking(OP, |inner| {
            let md = inner
                .client
                .inner()
                .fetch_metadata(None, inner.timeout)
                .map_err(|e| rdkafka_error(OP, "cluster", e))?;
            let rk = inner.client.inner().native_ptr();
            let ms = i32::try_from(inner.timeout.as_millis()).unwrap_or(i32::MAX);
            // SAFETY: `rk` is a live client; rd_kafka_clusterid returns NULL or a string we own,
            // freed with rd_kafka_mem_free right after copying it.
            let cluster_id = unsafe {
                let p = rd::rd_kafka_clusterid(rk, ms);
                let id = ffi::opt_string(p);
                if !p.is_null() {
                    rd::rd_kafka_mem_free(rk, p.cast());
                }
                id
            };
            // SAFETY: `rk` is a live client; the call only reads cached metadata.
            let controller_id = unsafe { rd::rd_kafka_controllerid(rk, ms) };
            let nodes: Vec<Node> = md
                .brokers()
                .iter()
                .map(|b| Node { id: b.id(), host: b.host().to_string(), port: b.port() as u16, rack: None })
                .collect();
            Ok(ClusterDescription {
                cluster_id: cluster_id.unwrap_or_default(),
                controller: nodes.iter().find(|n| n.id == controller_id).cloned(),
                nodes,
            })
        })
        .await
    }

    async fn describe_cluster_api(&self) -> KafkaResult<ClusterDescription> {
        const OP: &str = "DescribeCluster";
        self.blocking(OP, |inner| {
            let call = AdminCall {
                operation: OP,
                resource: "cluster".into(),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECLUSTER,
            };
            // SAFETY: the client handle lives as long as `inner`; invoke issues exactly one
            // DescribeCluster; extract copies every field out of the live result event.
            unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |_| Ok(()),
                    |rk, opts, q| rd::rd_kafka_DescribeCluster(rk, opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_DescribeCluster_result(ev);
                        if res.is_null() {
                            return Err(KafkaError::InvalidArgument {
                                operation: OP,
                                message: "unexpected result event".into(),
                            });
                        }
                        let mut n = 0usize;
                        let nodes = ffi::c_array(rd::rd_kafka_DescribeCluster_result_nodes(res, &mut n), n);
                        Ok(ClusterDescription {
                            cluster_id: ffi::string(rd::rd_kafka_DescribeCluster_result_cluster_id(res)),
                            controller: read_node(rd::rd_kafka_DescribeCluster_result_controller(res)),
                            nodes: nodes.iter().filter_map(|&p| read_node(p)).collect(),
                        })
                    },
                )
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &KafkaAdmin, b: &KafkaAdmin) -> bool {
        Arc::ptr_eq(&a.inner, &b.inner)
    }

    #[test]
    fn shared_clients_are_one_per_cluster_properties_and_timeout_while_held() {
        // Clients connect lazily: nothing here talks to a broker.
        let props = BTreeMap::from([("client.rack".to_string(), "r1".to_string())]);
        let t = Duration::from_secs(15);
        let a = KafkaAdmin::shared("shared-test-a:9092", &props, t).unwrap();
        let a2 = KafkaAdmin::shared("shared-test-a:9092", &props, t).unwrap();
        assert!(same(&a, &a2), "the same cluster and properties share one client");
        let other_props = KafkaAdmin::shared("shared-test-a:9092", &BTreeMap::new(), t).unwrap();
        assert!(!same(&a, &other_props), "other properties (e.g. a rotated password) get their own client");
        let other_cluster = KafkaAdmin::shared("shared-test-b:9092", &props, t).unwrap();
        assert!(!same(&a, &other_cluster));
        // Once nobody holds it, the next call closes it and makes a new one.
        let weak = Arc::downgrade(&a.inner);
        drop((a, a2));
        let again = KafkaAdmin::shared("shared-test-a:9092", &props, t).unwrap();
        assert!(weak.upgrade().is_none(), "the unused client was closed");
        drop((again, other_props, other_cluster));
    }
}
