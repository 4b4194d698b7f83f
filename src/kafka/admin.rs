//! `KafkaAdmin`: every admin call kmirror makes, as async methods returning owned Rust types.
//!
//! Calls rdkafka 0.39 already wraps (create/delete topics, create partitions, describe configs,
//! delete records) go through `rdkafka::admin::AdminClient`. The ones it lacks (DescribeCluster,
//! DescribeTopics, ListOffsets, IncrementalAlterConfigs, Create/Describe/DeleteAcls,
//! List/DescribeConsumerGroups, List/AlterConsumerGroupOffsets) are issued through
//! `rdkafka::bindings` with the driver in `ffi.rs`, each on tokio's blocking pool.
#![allow(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{
    AdminClient, AdminOptions, NewPartitions, NewTopic, OwnedResourceSpecifier, ResourceSpecifier, TopicReplication,
};
use rdkafka::bindings as rd;
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;

use super::error::{KafkaCode, KafkaError, KafkaResult};
use super::ffi::{self, AdminCall, NativeTpl, Owned};
use super::types::*;

/// Partitions per ListOffsets call (see [`KafkaAdmin::list_offsets`]).
const LIST_OFFSETS_CHUNK: usize = 500;

/// An admin connection to one cluster. Cheap to clone; all clones share one librdkafka client.
#[derive(Clone)]
pub struct KafkaAdmin {
    inner: Arc<Inner>,
}

struct Inner {
    client: AdminClient<DefaultClientContext>,
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

fn code_of(c: RDKafkaErrorCode) -> KafkaCode {
    let raw = c as i32;
    match rd::rd_kafka_resp_err_t::try_from(raw) {
        Ok(e) => ffi::kafka_code(e),
        Err(_) => KafkaCode { code: raw, name: format!("{c:?}") },
    }
}

fn rdkafka_error(operation: &'static str, resource: &str, e: rdkafka::error::KafkaError) -> KafkaError {
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

fn to_rd_resource(t: ResourceType) -> rd::rd_kafka_ResourceType_t {
    use rd::rd_kafka_ResourceType_t::*;
    match t {
        ResourceType::Any => RD_KAFKA_RESOURCE_ANY,
        ResourceType::Topic => RD_KAFKA_RESOURCE_TOPIC,
        ResourceType::Group => RD_KAFKA_RESOURCE_GROUP,
        ResourceType::Cluster => RD_KAFKA_RESOURCE_BROKER,
        ResourceType::TransactionalId => RD_KAFKA_RESOURCE_TRANSACTIONAL_ID,
    }
}

fn from_rd_resource(t: rd::rd_kafka_ResourceType_t) -> ResourceType {
    use rd::rd_kafka_ResourceType_t::*;
    match t {
        RD_KAFKA_RESOURCE_TOPIC => ResourceType::Topic,
        RD_KAFKA_RESOURCE_GROUP => ResourceType::Group,
        RD_KAFKA_RESOURCE_BROKER => ResourceType::Cluster,
        RD_KAFKA_RESOURCE_TRANSACTIONAL_ID => ResourceType::TransactionalId,
        _ => ResourceType::Any,
    }
}

fn to_rd_pattern(p: PatternType) -> rd::rd_kafka_ResourcePatternType_t {
    use rd::rd_kafka_ResourcePatternType_t::*;
    match p {
        PatternType::Any => RD_KAFKA_RESOURCE_PATTERN_ANY,
        PatternType::Match => RD_KAFKA_RESOURCE_PATTERN_MATCH,
        PatternType::Literal => RD_KAFKA_RESOURCE_PATTERN_LITERAL,
        PatternType::Prefixed => RD_KAFKA_RESOURCE_PATTERN_PREFIXED,
    }
}

fn from_rd_pattern(p: rd::rd_kafka_ResourcePatternType_t) -> PatternType {
    use rd::rd_kafka_ResourcePatternType_t::*;
    match p {
        RD_KAFKA_RESOURCE_PATTERN_LITERAL => PatternType::Literal,
        RD_KAFKA_RESOURCE_PATTERN_PREFIXED => PatternType::Prefixed,
        RD_KAFKA_RESOURCE_PATTERN_MATCH => PatternType::Match,
        _ => PatternType::Any,
    }
}

fn to_rd_operation(o: AclOperation) -> rd::rd_kafka_AclOperation_t {
    use rd::rd_kafka_AclOperation_t::*;
    match o {
        AclOperation::Any => RD_KAFKA_ACL_OPERATION_ANY,
        AclOperation::All => RD_KAFKA_ACL_OPERATION_ALL,
        AclOperation::Read => RD_KAFKA_ACL_OPERATION_READ,
        AclOperation::Write => RD_KAFKA_ACL_OPERATION_WRITE,
        AclOperation::Create => RD_KAFKA_ACL_OPERATION_CREATE,
        AclOperation::Delete => RD_KAFKA_ACL_OPERATION_DELETE,
        AclOperation::Alter => RD_KAFKA_ACL_OPERATION_ALTER,
        AclOperation::Describe => RD_KAFKA_ACL_OPERATION_DESCRIBE,
        AclOperation::ClusterAction => RD_KAFKA_ACL_OPERATION_CLUSTER_ACTION,
        AclOperation::DescribeConfigs => RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS,
        AclOperation::AlterConfigs => RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS,
        AclOperation::IdempotentWrite => RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE,
    }
}

fn from_rd_operation(o: rd::rd_kafka_AclOperation_t) -> AclOperation {
    use rd::rd_kafka_AclOperation_t::*;
    match o {
        RD_KAFKA_ACL_OPERATION_ALL => AclOperation::All,
        RD_KAFKA_ACL_OPERATION_READ => AclOperation::Read,
        RD_KAFKA_ACL_OPERATION_WRITE => AclOperation::Write,
        RD_KAFKA_ACL_OPERATION_CREATE => AclOperation::Create,
        RD_KAFKA_ACL_OPERATION_DELETE => AclOperation::Delete,
        RD_KAFKA_ACL_OPERATION_ALTER => AclOperation::Alter,
        RD_KAFKA_ACL_OPERATION_DESCRIBE => AclOperation::Describe,
        RD_KAFKA_ACL_OPERATION_CLUSTER_ACTION => AclOperation::ClusterAction,
        RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS => AclOperation::DescribeConfigs,
        RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS => AclOperation::AlterConfigs,
        RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE => AclOperation::IdempotentWrite,
        _ => AclOperation::Any,
    }
}

fn to_rd_permission(p: AclPermission) -> rd::rd_kafka_AclPermissionType_t {
    use rd::rd_kafka_AclPermissionType_t::*;
    match p {
        AclPermission::Any => RD_KAFKA_ACL_PERMISSION_TYPE_ANY,
        AclPermission::Deny => RD_KAFKA_ACL_PERMISSION_TYPE_DENY,
        AclPermission::Allow => RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
    }
}

fn from_rd_permission(p: rd::rd_kafka_AclPermissionType_t) -> AclPermission {
    use rd::rd_kafka_AclPermissionType_t::*;
    match p {
        RD_KAFKA_ACL_PERMISSION_TYPE_DENY => AclPermission::Deny,
        RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW => AclPermission::Allow,
        _ => AclPermission::Any,
    }
}

fn from_rd_group_state(s: rd::rd_kafka_consumer_group_state_t) -> GroupState {
    use rd::rd_kafka_consumer_group_state_t::*;
    match s {
        RD_KAFKA_CONSUMER_GROUP_STATE_PREPARING_REBALANCE => GroupState::PreparingRebalance,
        RD_KAFKA_CONSUMER_GROUP_STATE_COMPLETING_REBALANCE => GroupState::CompletingRebalance,
        RD_KAFKA_CONSUMER_GROUP_STATE_STABLE => GroupState::Stable,
        RD_KAFKA_CONSUMER_GROUP_STATE_DEAD => GroupState::Dead,
        RD_KAFKA_CONSUMER_GROUP_STATE_EMPTY => GroupState::Empty,
        _ => GroupState::Unknown,
    }
}

fn from_rd_group_type(t: rd::rd_kafka_consumer_group_type_t) -> GroupType {
    use rd::rd_kafka_consumer_group_type_t::*;
    match t {
        RD_KAFKA_CONSUMER_GROUP_TYPE_CONSUMER => GroupType::Consumer,
        RD_KAFKA_CONSUMER_GROUP_TYPE_CLASSIC => GroupType::Classic,
        _ => GroupType::Unknown,
    }
}

fn from_rd_config_source(s: &rdkafka::admin::ConfigSource) -> ConfigSource {
    use rdkafka::admin::ConfigSource as S;
    match s {
        S::Unknown => ConfigSource::Unknown,
        S::DynamicTopic => ConfigSource::DynamicTopic,
        S::DynamicBroker => ConfigSource::DynamicBroker,
        S::DynamicDefaultBroker => ConfigSource::DynamicDefaultBroker,
        S::StaticBroker => ConfigSource::StaticBroker,
        S::Default => ConfigSource::Default,
    }
}

/// Copies a borrowed node.
///
/// # Safety
/// `n` must be NULL or a valid node borrowed for the call.
unsafe fn read_node(n: *const rd::rd_kafka_Node_t) -> Option<Node> {
    if n.is_null() {
        return None;
    }
    // SAFETY: non-NULL valid node per contract; accessors only read it.
    unsafe {
        Some(Node {
            id: rd::rd_kafka_Node_id(n),
            host: ffi::string(rd::rd_kafka_Node_host(n)),
            port: rd::rd_kafka_Node_port(n),
            rack: ffi::opt_string(rd::rd_kafka_Node_rack(n)),
        })
    }
}

/// Copies a borrowed ACL binding.
///
/// # Safety
/// `a` must be a valid binding borrowed for the call.
unsafe fn read_acl(a: *const rd::rd_kafka_AclBinding_t) -> AclBinding {
    // SAFETY: valid binding per contract; accessors only read it.
    unsafe {
        AclBinding {
            resource_type: from_rd_resource(rd::rd_kafka_AclBinding_restype(a)),
            name: ffi::string(rd::rd_kafka_AclBinding_name(a)),
            pattern_type: from_rd_pattern(rd::rd_kafka_AclBinding_resource_pattern_type(a)),
            principal: ffi::string(rd::rd_kafka_AclBinding_principal(a)),
            host: ffi::string(rd::rd_kafka_AclBinding_host(a)),
            operation: from_rd_operation(rd::rd_kafka_AclBinding_operation(a)),
            permission: from_rd_permission(rd::rd_kafka_AclBinding_permission_type(a)),
        }
    }
}

/// Builds an owned ACL binding filter (also used, with concrete values, as a new binding).
fn new_acl(
    operation: &'static str,
    filter: &AclFilter,
    as_binding: bool,
) -> KafkaResult<Owned<rd::rd_kafka_AclBinding_t>> {
    let name = filter.name.as_deref().map(|s| ffi::cstring(operation, s)).transpose()?;
    let principal = filter.principal.as_deref().map(|s| ffi::cstring(operation, s)).transpose()?;
    let host = filter.host.as_deref().map(|s| ffi::cstring(operation, s)).transpose()?;
    let opt_ptr = |c: &Option<std::ffi::CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    let mut errbuf = [0 as std::ffi::c_char; 512];
    let restype = to_rd_resource(filter.resource_type.unwrap_or(ResourceType::Any));
    let pattern = to_rd_pattern(filter.pattern_type.unwrap_or(PatternType::Any));
    let op = to_rd_operation(filter.operation.unwrap_or(AclOperation::Any));
    let perm = to_rd_permission(filter.permission.unwrap_or(AclPermission::Any));
    // SAFETY: every string pointer is NULL or a CString alive until after the call (librdkafka
    // copies them); errbuf is writable for its full length. The result is owned by the guard.
    let made = unsafe {
        let ptr = if as_binding {
            rd::rd_kafka_AclBinding_new(
                restype,
                opt_ptr(&name),
                pattern,
                opt_ptr(&principal),
                opt_ptr(&host),
                op,
                perm,
                errbuf.as_mut_ptr(),
                errbuf.len(),
            )
        } else {
            rd::rd_kafka_AclBindingFilter_new(
                restype,
                opt_ptr(&name),
                pattern,
                opt_ptr(&principal),
                opt_ptr(&host),
                op,
                perm,
                errbuf.as_mut_ptr(),
                errbuf.len(),
            )
        };
        Owned::new(ptr, rd::rd_kafka_AclBinding_destroy)
    };
    // SAFETY: errbuf is NUL-terminated (zero-initialised, librdkafka writes a C string).
    made.ok_or_else(|| KafkaError::InvalidArgument { operation, message: unsafe { ffi::string(errbuf.as_ptr()) } })
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
        let cfg = super::client::client_config(bootstrap, properties, &[])?;
        let client: AdminClient<DefaultClientContext> = super::client::create(&cfg, "admin client")?;
        Ok(KafkaAdmin {
            inner: Arc::new(Inner {
                client,
                timeout,
                bootstrap: bootstrap.to_string(),
                metadata_cluster: std::sync::atomic::AtomicBool::new(false),
                metadata_topics: std::sync::atomic::AtomicBool::new(false),
            }),
        })
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
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| KafkaError::Task { operation, message: e.to_string() })?
    }

    /// DescribeCluster: cluster ID, brokers and the active controller. Clusters that do not
    /// implement DescribeCluster (older brokers, librdkafka's mock cluster) are described from a
    /// Metadata request instead.
    pub async fn describe_cluster(&self) -> KafkaResult<ClusterDescription> {
        use std::sync::atomic::Ordering;
        if self.inner.metadata_cluster.load(Ordering::Relaxed) {
            return self.describe_cluster_from_metadata().await;
        }
        match self.describe_cluster_api().await {
            // Not served (or, on librdkafka's mock cluster, never answered: it has no
            // controller): describe the cluster from Metadata, and from now on only that way if
            // Metadata works.
            Err(e)
                if e.is("_UNSUPPORTED_FEATURE")
                    || e.is("UNSUPPORTED_VERSION")
                    || e.is("INVALID_REQUEST")
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

    /// DescribeTopics: topic IDs and partitions. One result per requested name, in order; a
    /// missing topic is an `Err` with code `UNKNOWN_TOPIC_OR_PART`. Clusters that do not serve
    /// DescribeTopics (librdkafka's mock cluster) are described from Metadata, without topic IDs.
    pub async fn describe_topics(&self, names: &[String]) -> KafkaResult<Vec<KafkaResult<TopicDescription>>> {
        use std::sync::atomic::Ordering;
        if self.inner.metadata_topics.load(Ordering::Relaxed) {
            return self.describe_topics_from_metadata(names).await;
        }
        match self.describe_topics_api(names).await {
            Err(e)
                if e.is("_UNSUPPORTED_FEATURE")
                    || e.is("UNSUPPORTED_VERSION")
                    || matches!(e, KafkaError::Timeout { .. }) =>
            {
                let described = self.describe_topics_from_metadata(names).await;
                if described.is_ok() {
                    self.inner.metadata_topics.store(true, Ordering::Relaxed);
                    described
                } else {
                    Err(e)
                }
            }
            r => r,
        }
    }

    async fn describe_topics_from_metadata(&self, names: &[String]) -> KafkaResult<Vec<KafkaResult<TopicDescription>>> {
        const OP: &str = "Metadata";
        let names = names.to_vec();
        self.blocking(OP, move |inner| {
            let mut out = Vec::with_capacity(names.len());
            for name in &names {
                let md = inner
                    .client
                    .inner()
                    .fetch_metadata(Some(name), inner.timeout)
                    .map_err(|e| rdkafka_error(OP, name, e))?;
                let Some(t) = md.topics().iter().find(|t| t.name() == name) else {
                    out.push(Err(KafkaError::Kafka {
                        operation: OP,
                        resource: name.clone(),
                        code: KafkaCode { code: 3, name: "UNKNOWN_TOPIC_OR_PART".into() },
                        message: "topic missing from the Metadata answer".into(),
                    }));
                    continue;
                };
                if let Some(err) = t.error() {
                    out.push(Err(KafkaError::Kafka {
                        operation: OP,
                        resource: name.clone(),
                        code: ffi::kafka_code(err),
                        message: "topic error in the Metadata answer".into(),
                    }));
                    continue;
                }
                let mut partitions: Vec<PartitionInfo> = t
                    .partitions()
                    .iter()
                    .map(|p| PartitionInfo {
                        partition: p.id(),
                        leader: (p.leader() >= 0).then_some(p.leader()),
                        replicas: p.replicas().to_vec(),
                        isr: p.isr().to_vec(),
                    })
                    .collect();
                partitions.sort_by_key(|p| p.partition);
                out.push(Ok(TopicDescription {
                    name: name.clone(),
                    topic_id: KafkaUuid::ZERO,
                    is_internal: name.starts_with("__"),
                    partitions,
                }));
            }
            Ok(out)
        })
        .await
    }

    async fn describe_topics_api(&self, names: &[String]) -> KafkaResult<Vec<KafkaResult<TopicDescription>>> {
        const OP: &str = "DescribeTopics";
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let names = names.to_vec();
        self.blocking(OP, move |inner| {
            let cnames = names.iter().map(|n| ffi::cstring(OP, n)).collect::<KafkaResult<Vec<_>>>()?;
            let mut ptrs: Vec<*const std::ffi::c_char> = cnames.iter().map(|c| c.as_ptr()).collect();
            // SAFETY: `ptrs` points at CStrings alive for the call; librdkafka copies the names
            // into the collection, which the guard owns.
            let collection = unsafe {
                Owned::new(
                    rd::rd_kafka_TopicCollection_of_topic_names(ptrs.as_mut_ptr(), ptrs.len()),
                    rd::rd_kafka_TopicCollection_destroy,
                )
            }
            .ok_or_else(|| KafkaError::InvalidArgument {
                operation: OP,
                message: "cannot build topic collection".into(),
            })?;
            let call = AdminCall {
                operation: OP,
                resource: names.join(","),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS,
            };
            // SAFETY: as in describe_cluster; the collection outlives the request call.
            let mut by_name = unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |_| Ok(()),
                    |rk, opts, q| rd::rd_kafka_DescribeTopics(rk, collection.ptr(), opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_DescribeTopics_result(ev);
                        let mut n = 0usize;
                        let topics = ffi::c_array(rd::rd_kafka_DescribeTopics_result_topics(res, &mut n), n);
                        let mut out = BTreeMap::new();
                        for &t in topics {
                            let name = ffi::string(rd::rd_kafka_TopicDescription_name(t));
                            let described =
                                ffi::borrowed_error(OP, &name, rd::rd_kafka_TopicDescription_error(t)).map(|()| {
                                    let id = rd::rd_kafka_TopicDescription_topic_id(t);
                                    let topic_id = if id.is_null() {
                                        KafkaUuid::ZERO
                                    } else {
                                        KafkaUuid {
                                            most_significant_bits: rd::rd_kafka_Uuid_most_significant_bits(id),
                                            least_significant_bits: rd::rd_kafka_Uuid_least_significant_bits(id),
                                        }
                                    };
                                    let mut pn = 0usize;
                                    let parts = ffi::c_array(rd::rd_kafka_TopicDescription_partitions(t, &mut pn), pn);
                                    let mut partitions: Vec<PartitionInfo> = parts
                                        .iter()
                                        .map(|&p| {
                                            let mut rn = 0usize;
                                            let replicas =
                                                ffi::c_array(rd::rd_kafka_TopicPartitionInfo_replicas(p, &mut rn), rn);
                                            let mut inn = 0usize;
                                            let isr =
                                                ffi::c_array(rd::rd_kafka_TopicPartitionInfo_isr(p, &mut inn), inn);
                                            PartitionInfo {
                                                partition: rd::rd_kafka_TopicPartitionInfo_partition(p),
                                                leader: read_node(rd::rd_kafka_TopicPartitionInfo_leader(p))
                                                    .map(|n| n.id),
                                                replicas: replicas.iter().map(|&n| rd::rd_kafka_Node_id(n)).collect(),
                                                isr: isr.iter().map(|&n| rd::rd_kafka_Node_id(n)).collect(),
                                            }
                                        })
                                        .collect();
                                    partitions.sort_by_key(|p| p.partition);
                                    TopicDescription {
                                        name: name.clone(),
                                        topic_id,
                                        is_internal: rd::rd_kafka_TopicDescription_is_internal(t) != 0,
                                        partitions,
                                    }
                                });
                            out.insert(name, described);
                        }
                        Ok(out)
                    },
                )
            }?;
            Ok(names
                .iter()
                .map(|n| {
                    by_name.remove(n).unwrap_or_else(|| {
                        Err(KafkaError::Kafka {
                            operation: OP,
                            resource: n.clone(),
                            code: KafkaCode { code: 3, name: "UNKNOWN_TOPIC_OR_PART".into() },
                            message: "topic missing from the DescribeTopics answer".into(),
                        })
                    })
                })
                .collect())
        })
        .await
    }

    /// Names of every topic in the cluster (internal topics excluded), sorted.
    pub async fn list_topics(&self) -> KafkaResult<Vec<String>> {
        const OP: &str = "Metadata";
        self.blocking(OP, |inner| {
            let md =
                inner.client.inner().fetch_metadata(None, inner.timeout).map_err(|e| rdkafka_error(OP, "topics", e))?;
            let mut names: Vec<String> =
                md.topics().iter().map(|t| t.name().to_string()).filter(|n| !n.starts_with("__")).collect();
            names.sort();
            Ok(names)
        })
        .await
    }

    /// DescribeTopics for one topic.
    pub async fn describe_topic(&self, name: &str) -> KafkaResult<TopicDescription> {
        self.describe_topics(&[name.to_string()]).await?.pop().expect("one result per name")
    }

    /// ListOffsets for each `(topic, partition, spec)`. Any partition error fails the call and
    /// names the partition. Transient leadership errors right after a topic is created or a
    /// leader moves (`UNKNOWN_LEADER_EPOCH`, `NOT_LEADER_OR_FOLLOWER`, ...) are retried briefly.
    pub async fn list_offsets(
        &self,
        requests: &[(String, i32, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> KafkaResult<Vec<ListedOffset>> {
        // librdkafka's ListOffsets matches every partition of the answer against the request with
        // a linear search (strcmp on topic names), so one call for n partitions costs O(n²): at
        // 10,000 partitions the 1 s lag refresh alone kept a core half busy. Chunks keep it
        // linear; they run concurrently.
        if requests.len() > LIST_OFFSETS_CHUNK {
            let calls = requests.chunks(LIST_OFFSETS_CHUNK).map(|chunk| self.list_offsets_retrying(chunk, isolation));
            let answers = futures_util::future::try_join_all(calls).await?;
            return Ok(answers.into_iter().flatten().collect());
        }
        self.list_offsets_retrying(requests, isolation).await
    }

    async fn list_offsets_retrying(
        &self,
        requests: &[(String, i32, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> KafkaResult<Vec<ListedOffset>> {
        let mut delay = Duration::from_millis(50);
        let deadline = std::time::Instant::now() + self.inner.timeout.min(Duration::from_secs(10));
        loop {
            match self.list_offsets_once(requests, isolation).await {
                Err(e)
                    if matches!(e, KafkaError::Kafka { .. })
                        && e.is_retryable()
                        && std::time::Instant::now() + delay < deadline =>
                {
                    // A stale leader or leader epoch in the client's metadata cache (after a
                    // broker restart) is not refreshed by admin requests themselves: refresh it.
                    let topics: BTreeSet<String> = requests.iter().map(|(t, _, _)| t.clone()).collect();
                    let inner = Arc::clone(&self.inner);
                    let _ = tokio::task::spawn_blocking(move || {
                        for t in &topics {
                            let _ = inner.client.inner().fetch_metadata(Some(t), Duration::from_secs(5));
                        }
                    })
                    .await;
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
                r => return r,
            }
        }
    }

    async fn list_offsets_once(
        &self,
        requests: &[(String, i32, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> KafkaResult<Vec<ListedOffset>> {
        const OP: &str = "ListOffsets";
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let requests = requests.to_vec();
        self.blocking(OP, move |inner| {
            let mut tpl = NativeTpl::new(requests.len());
            for (topic, partition, spec) in &requests {
                let raw = match spec {
                    OffsetSpec::Earliest => rd::rd_kafka_OffsetSpec_t::RD_KAFKA_OFFSET_SPEC_EARLIEST as i64,
                    OffsetSpec::Latest => rd::rd_kafka_OffsetSpec_t::RD_KAFKA_OFFSET_SPEC_LATEST as i64,
                    OffsetSpec::MaxTimestamp => rd::rd_kafka_OffsetSpec_t::RD_KAFKA_OFFSET_SPEC_MAX_TIMESTAMP as i64,
                    OffsetSpec::Timestamp(ts) if *ts >= 0 => *ts,
                    OffsetSpec::Timestamp(ts) => {
                        return Err(KafkaError::InvalidArgument {
                            operation: OP,
                            message: format!("negative timestamp {ts}"),
                        });
                    }
                };
                tpl.add(OP, topic, *partition, raw, None)?;
            }
            let call = AdminCall {
                operation: OP,
                resource: describe_partitions(requests.iter().map(|(t, p, _)| (t.as_str(), *p))),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTOFFSETS,
            };
            let level = match isolation {
                IsolationLevel::ReadUncommitted => {
                    rd::rd_kafka_IsolationLevel_t::RD_KAFKA_ISOLATION_LEVEL_READ_UNCOMMITTED
                }
                IsolationLevel::ReadCommitted => rd::rd_kafka_IsolationLevel_t::RD_KAFKA_ISOLATION_LEVEL_READ_COMMITTED,
            };
            // SAFETY: as in describe_cluster; the request list is owned by `tpl` and outlives
            // the call (librdkafka copies it); the setter returns an owned error or NULL.
            unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |opts| ffi::owned_error(OP, "options", rd::rd_kafka_AdminOptions_set_isolation_level(opts, level)),
                    |rk, opts, q| rd::rd_kafka_ListOffsets(rk, tpl.ptr(), opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_ListOffsets_result(ev);
                        let mut n = 0usize;
                        let infos = ffi::c_array(rd::rd_kafka_ListOffsets_result_infos(res, &mut n), n);
                        let mut out = Vec::with_capacity(infos.len());
                        for &info in infos {
                            let tp = ffi::read_tp(rd::rd_kafka_ListOffsetsResultInfo_topic_partition(info));
                            ffi::check_code(OP, &format!("{}-{}", tp.topic, tp.partition), tp.error, || {
                                "partition error".into()
                            })?;
                            out.push(ListedOffset {
                                topic: tp.topic,
                                partition: tp.partition,
                                offset: tp.offset,
                                timestamp: rd::rd_kafka_ListOffsetsResultInfo_timestamp(info),
                                leader_epoch: tp.leader_epoch,
                            });
                        }
                        Ok(out)
                    },
                )
            }
        })
        .await
    }

    /// IncrementalAlterConfigs on one topic: only the named configs change.
    pub async fn alter_topic_configs(&self, topic: &str, ops: &[(String, ConfigOp)]) -> KafkaResult<()> {
        const OP: &str = "IncrementalAlterConfigs";
        if ops.is_empty() {
            return Ok(());
        }
        let topic = topic.to_string();
        let ops = ops.to_vec();
        self.blocking(OP, move |inner| {
            let ctopic = ffi::cstring(OP, &topic)?;
            // SAFETY: librdkafka copies the name; the guard owns the new resource (and is
            // destroyed after the request, which copies it too).
            let resource = unsafe {
                Owned::new(
                    rd::rd_kafka_ConfigResource_new(
                        rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC,
                        ctopic.as_ptr(),
                    ),
                    rd::rd_kafka_ConfigResource_destroy,
                )
            }
            .ok_or_else(|| KafkaError::InvalidArgument {
                operation: OP,
                message: "cannot build config resource".into(),
            })?;
            for (name, op) in &ops {
                use rd::rd_kafka_AlterConfigOpType_t::*;
                let (kind, value) = match op {
                    ConfigOp::Set(v) => (RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET, Some(v)),
                    ConfigOp::Delete => (RD_KAFKA_ALTER_CONFIG_OP_TYPE_DELETE, None),
                    ConfigOp::Append(v) => (RD_KAFKA_ALTER_CONFIG_OP_TYPE_APPEND, Some(v)),
                    ConfigOp::Subtract(v) => (RD_KAFKA_ALTER_CONFIG_OP_TYPE_SUBTRACT, Some(v)),
                };
                let cname = ffi::cstring(OP, name)?;
                let cvalue = value.map(|v| ffi::cstring(OP, v)).transpose()?;
                // SAFETY: resource is live; strings outlive the call and are copied; the
                // returned error (if any) is owned and freed by owned_error.
                unsafe {
                    ffi::owned_error(
                        OP,
                        name,
                        rd::rd_kafka_ConfigResource_add_incremental_config(
                            resource.ptr(),
                            cname.as_ptr(),
                            kind,
                            cvalue.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                        ),
                    )?;
                }
            }
            let call = AdminCall {
                operation: OP,
                resource: format!("topic {topic}"),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_INCREMENTALALTERCONFIGS,
            };
            let mut arr = [resource.ptr()];
            // SAFETY: as in describe_cluster; `arr` and the resource outlive the request call.
            unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |_| Ok(()),
                    |rk, opts, q| rd::rd_kafka_IncrementalAlterConfigs(rk, arr.as_mut_ptr(), 1, opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_IncrementalAlterConfigs_result(ev);
                        let mut n = 0usize;
                        for &r in ffi::c_array(rd::rd_kafka_IncrementalAlterConfigs_result_resources(res, &mut n), n) {
                            ffi::check_code(
                                OP,
                                &format!("topic {topic}"),
                                rd::rd_kafka_ConfigResource_error(r),
                                || ffi::string(rd::rd_kafka_ConfigResource_error_string(r)),
                            )?;
                        }
                        Ok(())
                    },
                )
            }
        })
        .await
    }

    /// DescribeConfigs for one topic: every entry with its source (so overrides are visible).
    pub async fn describe_topic_configs(&self, topic: &str) -> KafkaResult<Vec<ConfigEntry>> {
        const OP: &str = "DescribeConfigs";
        let res = self
            .inner
            .client
            .describe_configs([&ResourceSpecifier::Topic(topic)], &self.options())
            .await
            .map_err(|e| rdkafka_error(OP, topic, e))?;
        let resource = res
            .into_iter()
            .next()
            .ok_or_else(|| KafkaError::InvalidArgument { operation: OP, message: "empty answer".into() })?;
        let resource = resource.map_err(|code| KafkaError::Kafka {
            operation: OP,
            resource: format!("topic {topic}"),
            code: code_of(code),
            message: code.to_string(),
        })?;
        debug_assert!(matches!(resource.specifier, OwnedResourceSpecifier::Topic(_)));
        Ok(resource
            .entries
            .iter()
            .map(|e| ConfigEntry {
                name: e.name.clone(),
                value: e.value.clone(),
                source: from_rd_config_source(&e.source),
                is_default: e.is_default,
                is_read_only: e.is_read_only,
                is_sensitive: e.is_sensitive,
            })
            .collect())
    }

    /// CreateTopics for one topic with the given partitions, replication factor (-1 = broker
    /// default) and configs.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication: i32,
        configs: &[(String, String)],
    ) -> KafkaResult<()> {
        const OP: &str = "CreateTopics";
        let mut nt = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
        for (k, v) in configs {
            nt = nt.set(k, v);
        }
        let res =
            self.inner.client.create_topics([&nt], &self.options()).await.map_err(|e| rdkafka_error(OP, name, e))?;
        for r in res {
            r.map_err(|(t, code)| KafkaError::Kafka {
                operation: OP,
                resource: format!("topic {t}"),
                code: code_of(code),
                message: code.to_string(),
            })?;
        }
        Ok(())
    }

    /// DeleteTopics for one topic.
    pub async fn delete_topic(&self, name: &str) -> KafkaResult<()> {
        const OP: &str = "DeleteTopics";
        let res =
            self.inner.client.delete_topics(&[name], &self.options()).await.map_err(|e| rdkafka_error(OP, name, e))?;
        for r in res {
            r.map_err(|(t, code)| KafkaError::Kafka {
                operation: OP,
                resource: format!("topic {t}"),
                code: code_of(code),
                message: code.to_string(),
            })?;
        }
        Ok(())
    }

    /// CreatePartitions: grows `topic` to `total` partitions.
    pub async fn create_partitions(&self, topic: &str, total: usize) -> KafkaResult<()> {
        const OP: &str = "CreatePartitions";
        let np = NewPartitions::new(topic, total);
        let res = self
            .inner
            .client
            .create_partitions([&np], &self.options())
            .await
            .map_err(|e| rdkafka_error(OP, topic, e))?;
        for r in res {
            r.map_err(|(t, code)| KafkaError::Kafka {
                operation: OP,
                resource: format!("topic {t}"),
                code: code_of(code),
                message: code.to_string(),
            })?;
        }
        Ok(())
    }

    /// DeleteRecords: deletes every record before `before_offset` in each partition
    /// (`-1` = up to the high watermark).
    pub async fn delete_records(&self, topic: &str, partitions: &[(i32, i64)]) -> KafkaResult<()> {
        const OP: &str = "DeleteRecords";
        let mut tpl = rdkafka::TopicPartitionList::new();
        for &(p, off) in partitions {
            let offset = if off < 0 { rdkafka::Offset::End } else { rdkafka::Offset::Offset(off) };
            tpl.add_partition_offset(topic, p, offset).map_err(|e| rdkafka_error(OP, topic, e))?;
        }
        let res =
            self.inner.client.delete_records(&tpl, &self.options()).await.map_err(|e| rdkafka_error(OP, topic, e))?;
        for el in res.elements() {
            if let Err(e) = el.error() {
                return Err(rdkafka_error(OP, &format!("{}-{}", el.topic(), el.partition()), e));
            }
        }
        Ok(())
    }

    /// CreateAcls. Fails with the first binding the broker refused.
    pub async fn create_acls(&self, bindings: &[AclBinding]) -> KafkaResult<()> {
        const OP: &str = "CreateAcls";
        if bindings.is_empty() {
            return Ok(());
        }
        let bindings = bindings.to_vec();
        self.blocking(OP, move |inner| {
            let owned =
                bindings.iter().map(|b| new_acl(OP, &AclFilter::from(b), true)).collect::<KafkaResult<Vec<_>>>()?;
            let mut arr: Vec<_> = owned.iter().map(|o| o.ptr()).collect();
            let call = AdminCall {
                operation: OP,
                resource: format!("{} ACL binding(s)", bindings.len()),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_CREATEACLS,
            };
            // SAFETY: as in describe_cluster; the bindings (owned) and `arr` outlive the call.
            unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |_| Ok(()),
                    |rk, opts, q| rd::rd_kafka_CreateAcls(rk, arr.as_mut_ptr(), arr.len(), opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_CreateAcls_result(ev);
                        let mut n = 0usize;
                        for (i, &r) in
                            ffi::c_array(rd::rd_kafka_CreateAcls_result_acls(res, &mut n), n).iter().enumerate()
                        {
                            let what = bindings.get(i).map(|b| format!("{b:?}")).unwrap_or_default();
                            ffi::borrowed_error(OP, &what, rd::rd_kafka_acl_result_error(r))?;
                        }
                        Ok(())
                    },
                )
            }
        })
        .await
    }

    /// DescribeAcls: every binding matching the filter.
    pub async fn describe_acls(&self, filter: &AclFilter) -> KafkaResult<Vec<AclBinding>> {
        const OP: &str = "DescribeAcls";
        let filter = filter.clone();
        self.blocking(OP, move |inner| {
            let f = new_acl(OP, &filter, false)?;
            let call = AdminCall {
                operation: OP,
                resource: format!("{filter:?}"),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBEACLS,
            };
            // SAFETY: as in describe_cluster; the filter is owned and outlives the call.
            unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |_| Ok(()),
                    |rk, opts, q| rd::rd_kafka_DescribeAcls(rk, f.ptr(), opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_DescribeAcls_result(ev);
                        let mut n = 0usize;
                        let acls = ffi::c_array(rd::rd_kafka_DescribeAcls_result_acls(res, &mut n), n);
                        let mut out: Vec<AclBinding> = acls.iter().map(|&a| read_acl(a)).collect();
                        out.sort();
                        Ok(out)
                    },
                )
            }
        })
        .await
    }

    /// DeleteAcls: deletes every binding matching any filter; returns the deleted bindings.
    pub async fn delete_acls(&self, filters: &[AclFilter]) -> KafkaResult<Vec<AclBinding>> {
        const OP: &str = "DeleteAcls";
        if filters.is_empty() {
            return Ok(Vec::new());
        }
        let filters = filters.to_vec();
        self.blocking(OP, move |inner| {
            let owned = filters.iter().map(|f| new_acl(OP, f, false)).collect::<KafkaResult<Vec<_>>>()?;
            let mut arr: Vec<_> = owned.iter().map(|o| o.ptr()).collect();
            let call = AdminCall {
                operation: OP,
                resource: format!("{} ACL filter(s)", filters.len()),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DELETEACLS,
            };
            // SAFETY: as in describe_cluster; the filters (owned) and `arr` outlive the call.
            unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |_| Ok(()),
                    |rk, opts, q| rd::rd_kafka_DeleteAcls(rk, arr.as_mut_ptr(), arr.len(), opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_DeleteAcls_result(ev);
                        let mut n = 0usize;
                        let mut out = Vec::new();
                        for &r in ffi::c_array(rd::rd_kafka_DeleteAcls_result_responses(res, &mut n), n) {
                            ffi::borrowed_error(OP, "filter", rd::rd_kafka_DeleteAcls_result_response_error(r))?;
                            let mut m = 0usize;
                            let acls =
                                ffi::c_array(rd::rd_kafka_DeleteAcls_result_response_matching_acls(r, &mut m), m);
                            out.extend(acls.iter().map(|&a| read_acl(a)));
                        }
                        out.sort();
                        Ok(out)
                    },
                )
            }
        })
        .await
    }

    /// ListConsumerGroups: every group the cluster knows. Per-broker errors fail the call, so a
    /// partial list is never mistaken for the whole.
    pub async fn list_consumer_groups(&self) -> KafkaResult<Vec<GroupListing>> {
        const OP: &str = "ListConsumerGroups";
        self.blocking(OP, |inner| {
            let call = AdminCall {
                operation: OP,
                resource: "groups".into(),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS,
            };
            // SAFETY: as in describe_cluster.
            unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |_| Ok(()),
                    |rk, opts, q| rd::rd_kafka_ListConsumerGroups(rk, opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_ListConsumerGroups_result(ev);
                        let mut en = 0usize;
                        for &e in ffi::c_array(rd::rd_kafka_ListConsumerGroups_result_errors(res, &mut en), en) {
                            ffi::borrowed_error(OP, "groups", e)?;
                        }
                        let mut n = 0usize;
                        let groups = ffi::c_array(rd::rd_kafka_ListConsumerGroups_result_valid(res, &mut n), n);
                        let mut out: Vec<GroupListing> = groups
                            .iter()
                            .map(|&g| GroupListing {
                                group_id: ffi::string(rd::rd_kafka_ConsumerGroupListing_group_id(g)),
                                is_simple: rd::rd_kafka_ConsumerGroupListing_is_simple_consumer_group(g) != 0,
                                state: from_rd_group_state(rd::rd_kafka_ConsumerGroupListing_state(g)),
                                group_type: from_rd_group_type(rd::rd_kafka_ConsumerGroupListing_type(g)),
                            })
                            .collect();
                        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
                        Ok(out)
                    },
                )
            }
        })
        .await
    }

    /// DescribeConsumerGroups: state and members (with assignments) per group, in request order.
    pub async fn describe_consumer_groups(&self, groups: &[String]) -> KafkaResult<Vec<KafkaResult<GroupDescription>>> {
        const OP: &str = "DescribeConsumerGroups";
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let groups = groups.to_vec();
        self.blocking(OP, move |inner| {
            let cgroups = groups.iter().map(|g| ffi::cstring(OP, g)).collect::<KafkaResult<Vec<_>>>()?;
            let mut ptrs: Vec<*const std::ffi::c_char> = cgroups.iter().map(|c| c.as_ptr()).collect();
            let call = AdminCall {
                operation: OP,
                resource: groups.join(","),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS,
            };
            // SAFETY: as in describe_cluster; the group-name CStrings outlive the request call.
            let mut by_id = unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |_| Ok(()),
                    |rk, opts, q| rd::rd_kafka_DescribeConsumerGroups(rk, ptrs.as_mut_ptr(), ptrs.len(), opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_DescribeConsumerGroups_result(ev);
                        let mut n = 0usize;
                        let mut out = BTreeMap::new();
                        for &g in ffi::c_array(rd::rd_kafka_DescribeConsumerGroups_result_groups(res, &mut n), n) {
                            let id = ffi::string(rd::rd_kafka_ConsumerGroupDescription_group_id(g));
                            let described = ffi::borrowed_error(
                                OP,
                                &id,
                                rd::rd_kafka_ConsumerGroupDescription_error(g),
                            )
                            .map(|()| {
                                let count = rd::rd_kafka_ConsumerGroupDescription_member_count(g);
                                let members = (0..count)
                                    .map(|i| rd::rd_kafka_ConsumerGroupDescription_member(g, i))
                                    .filter(|m| !m.is_null())
                                    .map(|m| {
                                        let assignment = rd::rd_kafka_MemberDescription_assignment(m);
                                        let parts = if assignment.is_null() {
                                            Vec::new()
                                        } else {
                                            ffi::read_tpl(rd::rd_kafka_MemberAssignment_partitions(assignment))
                                        };
                                        MemberDescription {
                                            consumer_id: ffi::string(rd::rd_kafka_MemberDescription_consumer_id(m)),
                                            client_id: ffi::string(rd::rd_kafka_MemberDescription_client_id(m)),
                                            host: ffi::string(rd::rd_kafka_MemberDescription_host(m)),
                                            group_instance_id: ffi::opt_string(
                                                rd::rd_kafka_MemberDescription_group_instance_id(m),
                                            ),
                                            assignment: parts.into_iter().map(|p| (p.topic, p.partition)).collect(),
                                        }
                                    })
                                    .collect();
                                GroupDescription {
                                    group_id: id.clone(),
                                    state: from_rd_group_state(rd::rd_kafka_ConsumerGroupDescription_state(g)),
                                    group_type: from_rd_group_type(rd::rd_kafka_ConsumerGroupDescription_type(g)),
                                    is_simple: rd::rd_kafka_ConsumerGroupDescription_is_simple_consumer_group(g) != 0,
                                    partition_assignor: ffi::string(
                                        rd::rd_kafka_ConsumerGroupDescription_partition_assignor(g),
                                    ),
                                    coordinator: read_node(rd::rd_kafka_ConsumerGroupDescription_coordinator(g)),
                                    members,
                                }
                            });
                            out.insert(id, described);
                        }
                        Ok(out)
                    },
                )
            }?;
            Ok(groups
                .iter()
                .map(|g| {
                    by_id.remove(g).unwrap_or_else(|| {
                        Err(KafkaError::Kafka {
                            operation: OP,
                            resource: g.clone(),
                            code: KafkaCode { code: 69, name: "GROUP_ID_NOT_FOUND".into() },
                            message: "group missing from the answer".into(),
                        })
                    })
                })
                .collect())
        })
        .await
    }

    /// ListConsumerGroupOffsets for one group: all committed offsets, or only those of the given
    /// partitions. `require_stable` waits for pending transactional offset commits to resolve.
    pub async fn list_consumer_group_offsets(
        &self,
        group: &str,
        partitions: Option<&[(String, i32)]>,
        require_stable: bool,
    ) -> KafkaResult<Vec<GroupOffset>> {
        const OP: &str = "ListConsumerGroupOffsets";
        let group = group.to_string();
        let partitions = partitions.map(|p| p.to_vec());
        self.blocking(OP, move |inner| {
            let cgroup = ffi::cstring(OP, &group)?;
            let tpl = match &partitions {
                None => None,
                Some(ps) => {
                    let mut t = NativeTpl::new(ps.len());
                    for (topic, p) in ps {
                        t.add(OP, topic, *p, -1001, None)?;
                    }
                    Some(t)
                }
            };
            // SAFETY: the group name and list are copied by librdkafka; the guard owns the request.
            let req = unsafe {
                Owned::new(
                    rd::rd_kafka_ListConsumerGroupOffsets_new(
                        cgroup.as_ptr(),
                        tpl.as_ref().map_or(std::ptr::null(), |t| t.ptr()),
                    ),
                    rd::rd_kafka_ListConsumerGroupOffsets_destroy,
                )
            }
            .ok_or_else(|| KafkaError::InvalidArgument { operation: OP, message: "cannot build request".into() })?;
            let mut arr = [req.ptr()];
            let call = AdminCall {
                operation: OP,
                resource: format!("group {group}"),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS,
            };
            // SAFETY: as in describe_cluster; `arr` and the request outlive the call.
            unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |opts| {
                        ffi::owned_error(
                            OP,
                            "options",
                            rd::rd_kafka_AdminOptions_set_require_stable_offsets(opts, i32::from(require_stable)),
                        )
                    },
                    |rk, opts, q| rd::rd_kafka_ListConsumerGroupOffsets(rk, arr.as_mut_ptr(), 1, opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_ListConsumerGroupOffsets_result(ev);
                        read_group_results(OP, res, true)
                    },
                )
            }
        })
        .await
    }

    /// AlterConsumerGroupOffsets for one group (the group must have no active members). Each
    /// offset may carry the leader epoch of the record before it.
    pub async fn alter_consumer_group_offsets(&self, group: &str, offsets: &[GroupOffset]) -> KafkaResult<()> {
        const OP: &str = "AlterConsumerGroupOffsets";
        if offsets.is_empty() {
            return Ok(());
        }
        let group = group.to_string();
        let offsets = offsets.to_vec();
        self.blocking(OP, move |inner| {
            let cgroup = ffi::cstring(OP, &group)?;
            let mut tpl = NativeTpl::new(offsets.len());
            for o in &offsets {
                if o.offset < 0 {
                    return Err(KafkaError::InvalidArgument {
                        operation: OP,
                        message: format!("negative offset {} for {}-{}", o.offset, o.topic, o.partition),
                    });
                }
                tpl.add(OP, &o.topic, o.partition, o.offset, o.leader_epoch)?;
            }
            // SAFETY: the group name and list are copied by librdkafka; the guard owns the request.
            let req = unsafe {
                Owned::new(
                    rd::rd_kafka_AlterConsumerGroupOffsets_new(cgroup.as_ptr(), tpl.ptr()),
                    rd::rd_kafka_AlterConsumerGroupOffsets_destroy,
                )
            }
            .ok_or_else(|| KafkaError::InvalidArgument { operation: OP, message: "cannot build request".into() })?;
            let mut arr = [req.ptr()];
            let call = AdminCall {
                operation: OP,
                resource: format!("group {group}"),
                timeout: inner.timeout,
                api: rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS,
            };
            // SAFETY: as in describe_cluster; `arr` and the request outlive the call.
            unsafe {
                ffi::run_admin(
                    inner.client.inner().native_ptr(),
                    &call,
                    |_| Ok(()),
                    |rk, opts, q| rd::rd_kafka_AlterConsumerGroupOffsets(rk, arr.as_mut_ptr(), 1, opts, q),
                    |ev| {
                        let res = rd::rd_kafka_event_AlterConsumerGroupOffsets_result(ev);
                        read_group_results(OP, res, false).map(|_| ())
                    },
                )
            }
        })
        .await
    }
}

/// Reads the single group result of a List/AlterConsumerGroupOffsets answer, failing on the group
/// error or any partition error.
///
/// # Safety
/// `res` must be the live result of a ListConsumerGroupOffsets (`list`) or
/// AlterConsumerGroupOffsets (`!list`) event.
unsafe fn read_group_results(
    operation: &'static str,
    res: *const rd::rd_kafka_event_t,
    list: bool,
) -> KafkaResult<Vec<GroupOffset>> {
    // SAFETY: `res` is live per contract; the typed accessor matches the event kind.
    unsafe {
        let mut n = 0usize;
        let groups = if list {
            rd::rd_kafka_ListConsumerGroupOffsets_result_groups(res, &mut n)
        } else {
            rd::rd_kafka_AlterConsumerGroupOffsets_result_groups(res, &mut n)
        };
        let mut out = Vec::new();
        for &g in ffi::c_array(groups, n) {
            let name = ffi::string(rd::rd_kafka_group_result_name(g));
            ffi::borrowed_error(operation, &format!("group {name}"), rd::rd_kafka_group_result_error(g))?;
            for tp in ffi::read_tpl(rd::rd_kafka_group_result_partitions(g)) {
                ffi::check_code(operation, &format!("group {name} {}-{}", tp.topic, tp.partition), tp.error, || {
                    "partition error".into()
                })?;
                out.push(GroupOffset {
                    topic: tp.topic,
                    partition: tp.partition,
                    offset: tp.offset,
                    leader_epoch: tp.leader_epoch,
                    metadata: tp.metadata,
                });
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }
}

fn describe_partitions<'a>(it: impl Iterator<Item = (&'a str, i32)>) -> String {
    let v: Vec<String> = it.take(8).map(|(t, p)| format!("{t}-{p}")).collect();
    v.join(",")
}
