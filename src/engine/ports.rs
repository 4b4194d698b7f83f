//! The clusters as the coordinator sees them: the seams between the engine and Kafka.
//!
//! The coordinator reaches the outside world only through these traits:
//!
//! - [`ClusterAdmin`]: the admin calls it (and the metadata sync) make on the destination and on
//!   each mirror's source. The method names and arguments are [`KafkaAdmin`]'s, so a call site
//!   reads the same whichever implementation is behind it.
//! - [`StateStore`]: the engine-level transactional writer of `__mirror_state`.
//! - [`Ports`]: everything else, bundled: the destination's admin client, connecting a source,
//!   creating and reading the state topic at startup, opening the state writer and starting a
//!   mirror's data path (whose commands and events are already messages: `PipeCommand`,
//!   `PipeEvent`).
//!
//! [`KafkaPorts`] is the real thing (thin wrappers over `crate::kafka`); `engine::start` uses it.
//! The unit tests use an in-memory fake (`engine::fake`), so every edge the coordinator drives
//! runs in milliseconds without a Kafka cluster.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use crate::data_path::{EncodeProgress, PipeCommand, PipeConfig, PipeEvent, StateWrite};
use crate::domain::quarantine::QuarantinedPartition;
use crate::kafka::membership::{Membership, MembershipConfig, MembershipEvent};
use crate::kafka::pipe;
use crate::kafka::quarantine::{QuarantineError, QuarantineJob};
use crate::kafka::scan::Scanned;
use crate::kafka::state_log::{self, LogRecord, StateWriteError, StateWriter, TailBatch};
use crate::kafka::{
    AclBinding, AclFilter, ClusterDescription, ConfigEntry, ConfigOp, GroupDescription, GroupListing, GroupOffset,
    IsolationLevel, KafkaAdmin, KafkaError, KafkaResult, ListedOffset, OffsetSpec, TopicDescription,
};

use super::EngineConfig;

/// An admin client as the coordinator holds it.
pub(crate) type Admin = Arc<dyn ClusterAdmin>;

/// The admin calls the engine makes on a cluster (see [`KafkaAdmin`] for what each one does).
pub(crate) trait ClusterAdmin: Send + Sync {
    /// True once the cluster has shown it serves only the core APIs ([`KafkaAdmin::is_limited`]).
    fn is_limited(&self) -> bool;
    fn describe_cluster(&self) -> BoxFuture<'_, KafkaResult<ClusterDescription>>;
    fn describe_topics<'a>(
        &'a self,
        names: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<TopicDescription>>>>;
    fn describe_topic<'a>(&'a self, name: &'a str) -> BoxFuture<'a, KafkaResult<TopicDescription>>;
    fn list_topics(&self) -> BoxFuture<'_, KafkaResult<Vec<String>>>;
    fn list_offsets<'a>(
        &'a self,
        requests: &'a [(String, i32, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> BoxFuture<'a, KafkaResult<Vec<ListedOffset>>>;
    fn describe_topic_configs<'a>(&'a self, topic: &'a str) -> BoxFuture<'a, KafkaResult<Vec<ConfigEntry>>>;
    fn alter_topic_configs<'a>(
        &'a self,
        topic: &'a str,
        ops: &'a [(String, ConfigOp)],
    ) -> BoxFuture<'a, KafkaResult<()>>;
    fn create_topic<'a>(
        &'a self,
        name: &'a str,
        partitions: i32,
        replication: i32,
        configs: &'a [(String, String)],
    ) -> BoxFuture<'a, KafkaResult<()>>;
    fn create_partitions<'a>(&'a self, topic: &'a str, total: usize) -> BoxFuture<'a, KafkaResult<()>>;
    fn delete_records<'a>(&'a self, topic: &'a str, partitions: &'a [(i32, i64)]) -> BoxFuture<'a, KafkaResult<()>>;
    fn list_consumer_groups(&self) -> BoxFuture<'_, KafkaResult<Vec<GroupListing>>>;
    fn describe_consumer_groups<'a>(
        &'a self,
        groups: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<GroupDescription>>>>;
    fn list_consumer_group_offsets<'a>(
        &'a self,
        group: &'a str,
        partitions: Option<&'a [(String, i32)]>,
        require_stable: bool,
    ) -> BoxFuture<'a, KafkaResult<Vec<GroupOffset>>>;
    fn alter_consumer_group_offsets<'a>(
        &'a self,
        group: &'a str,
        offsets: &'a [GroupOffset],
    ) -> BoxFuture<'a, KafkaResult<()>>;
    fn describe_acls<'a>(&'a self, filter: &'a AclFilter) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>>;
    fn create_acls<'a>(&'a self, bindings: &'a [AclBinding]) -> BoxFuture<'a, KafkaResult<()>>;
    fn delete_acls<'a>(&'a self, filters: &'a [AclFilter]) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>>;
}

/// The admin of a mirror whose source client cannot be created (a client property the library
/// refuses, a CA file that is gone): every call fails at once with that reason. The mirror stays
/// listed, and what it shows names the reason instead of a timeout of a client built without the
/// mirror's properties.
pub(crate) struct UnusableAdmin {
    why: String,
}

impl UnusableAdmin {
    pub(crate) fn new(why: &KafkaError) -> UnusableAdmin {
        // Shown only through `KafkaError`'s text, which is scrubbed of secrets; a client error
        // names the property at fault.
        let why = match why {
            KafkaError::Client(message) => message.clone(),
            other => other.to_string(),
        };
        UnusableAdmin { why }
    }

    fn fail<'a, T: Send + 'a>(&self) -> BoxFuture<'a, KafkaResult<T>> {
        Box::pin(std::future::ready(Err(KafkaError::Client(self.why.clone()))))
    }
}

impl ClusterAdmin for UnusableAdmin {
    fn is_limited(&self) -> bool {
        false
    }
    fn describe_cluster(&self) -> BoxFuture<'_, KafkaResult<ClusterDescription>> {
        self.fail()
    }
    fn describe_topics<'a>(
        &'a self,
        _: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<TopicDescription>>>> {
        self.fail()
    }
    fn describe_topic<'a>(&'a self, _: &'a str) -> BoxFuture<'a, KafkaResult<TopicDescription>> {
        self.fail()
    }
    fn list_topics(&self) -> BoxFuture<'_, KafkaResult<Vec<String>>> {
        self.fail()
    }
    fn list_offsets<'a>(
        &'a self,
        _: &'a [(String, i32, OffsetSpec)],
        _: IsolationLevel,
    ) -> BoxFuture<'a, KafkaResult<Vec<ListedOffset>>> {
        self.fail()
    }
    fn describe_topic_configs<'a>(&'a self, _: &'a str) -> BoxFuture<'a, KafkaResult<Vec<ConfigEntry>>> {
        self.fail()
    }
    fn alter_topic_configs<'a>(&'a self, _: &'a str, _: &'a [(String, ConfigOp)]) -> BoxFuture<'a, KafkaResult<()>> {
        self.fail()
    }
    fn create_topic<'a>(
        &'a self,
        _: &'a str,
        _: i32,
        _: i32,
        _: &'a [(String, String)],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        self.fail()
    }
    fn create_partitions<'a>(&'a self, _: &'a str, _: usize) -> BoxFuture<'a, KafkaResult<()>> {
        self.fail()
    }
    fn delete_records<'a>(&'a self, _: &'a str, _: &'a [(i32, i64)]) -> BoxFuture<'a, KafkaResult<()>> {
        self.fail()
    }
    fn list_consumer_groups(&self) -> BoxFuture<'_, KafkaResult<Vec<GroupListing>>> {
        self.fail()
    }
    fn describe_consumer_groups<'a>(
        &'a self,
        _: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<GroupDescription>>>> {
        self.fail()
    }
    fn list_consumer_group_offsets<'a>(
        &'a self,
        _: &'a str,
        _: Option<&'a [(String, i32)]>,
        _: bool,
    ) -> BoxFuture<'a, KafkaResult<Vec<GroupOffset>>> {
        self.fail()
    }
    fn alter_consumer_group_offsets<'a>(&'a self, _: &'a str, _: &'a [GroupOffset]) -> BoxFuture<'a, KafkaResult<()>> {
        self.fail()
    }
    fn describe_acls<'a>(&'a self, _: &'a AclFilter) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>> {
        self.fail()
    }
    fn create_acls<'a>(&'a self, _: &'a [AclBinding]) -> BoxFuture<'a, KafkaResult<()>> {
        self.fail()
    }
    fn delete_acls<'a>(&'a self, _: &'a [AclFilter]) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>> {
        self.fail()
    }
}

/// The engine-level writer of `__mirror_state` (lifecycle transitions, mirror definitions,
/// operations): every call is one transaction.
pub(crate) trait StateStore: Send + Sync {
    /// Writes `records` atomically. Blocking: the coordinator calls it on the blocking pool.
    fn write(&self, records: &[StateWrite]) -> Result<(), StateWriteError>;
}

/// A background reader of its own thread (the state tail): ends on `close`.
pub(crate) trait Background: Send + Sync {
    /// Stops it and waits for its thread. Blocking.
    fn close(self: Box<Self>);
}

/// This instance's membership of the slot group (`kafka::membership`).
pub(crate) trait GroupMember: Send + Sync {
    /// Rebalances seen so far.
    fn rebalances(&self) -> u64;
    /// Why the membership ended for good (fenced as a static member, a fatal client error).
    fn failure(&self) -> Option<String>;
    /// Makes the group rebalance (in the background), so slots nobody owns are assigned; `false`
    /// when an earlier one is still running.
    fn nudge(&self) -> bool;
    /// Leaves (a static member: the slots stay assigned until its session times out, so an
    /// instance that comes back in time keeps them). Blocking.
    fn close(self: Box<Self>);
}

/// A data path's command sender and its thread (see [`pipe::spawn`]).
pub(crate) type SpawnedDataPath = (std::sync::mpsc::Sender<PipeCommand>, std::thread::JoinHandle<()>);

/// Which of an instance's state writers (each has its own transactional id, so neither waits
/// for the other's transaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriterRole {
    /// Lifecycle records, operations, slot handovers: everything the coordinator writes in order.
    Engine,
    /// The periodic heartbeat (the instances view). Apart from the engine's writer because a
    /// transaction on a destination busy with a large catch-up took 4-16 s (measured: 10,000
    /// partitions on 16 slots), and the coordinator's loop waited for each one, a failover too.
    Heartbeat,
}

impl WriterRole {
    pub(crate) fn transactional_id(self, instance_id: &str) -> String {
        match self {
            WriterRole::Engine => format!("{instance_id}.state"),
            WriterRole::Heartbeat => format!("{instance_id}.heartbeat"),
        }
    }
}

/// Everything the coordinator reaches outside itself.
pub(crate) trait Ports: Send + Sync {
    /// The destination cluster's admin client.
    fn destination(&self) -> Admin;
    /// An admin client for a mirror's source. Connecting is lazy: an unreachable cluster shows
    /// up on the first call.
    fn connect_source(
        &self,
        bootstrap: &str,
        properties: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> KafkaResult<Admin>;
    /// Creates the state topic on the destination if needed; returns its partition count.
    fn ensure_state_topic<'a>(&'a self, topic: &'a str, partitions: i32) -> BoxFuture<'a, KafkaResult<i32>>;
    /// Every committed record of the state topic (of its partitions in `only`, when given), from
    /// the beginning up to its end.
    fn read_state<'a>(
        &'a self,
        config: &'a EngineConfig,
        only: Option<&'a [i32]>,
    ) -> BoxFuture<'a, KafkaResult<Vec<LogRecord>>>;
    /// Opens a state writer of this instance for `role`; opening it fences any earlier writer of
    /// the same instance and role (a previous incarnation, or a duplicate instance id).
    fn open_state_writer<'a>(
        &'a self,
        config: &'a EngineConfig,
        role: WriterRole,
    ) -> BoxFuture<'a, KafkaResult<Arc<dyn StateStore>>>;
    /// Follows every partition of the state topic from `start` (partition, next offset; `None`
    /// = its beginning), handing what it reads to `batches`.
    fn tail_state(
        &self,
        config: &EngineConfig,
        start: &[(i32, Option<i64>)],
        batches: mpsc::UnboundedSender<TailBatch>,
    ) -> KafkaResult<Box<dyn Background>>;
    /// Joins the slot group of `config.cluster_name`; assignment changes come on `events`.
    fn join_group(
        &self,
        config: &EngineConfig,
        events: mpsc::UnboundedSender<MembershipEvent>,
    ) -> KafkaResult<Box<dyn GroupMember>>;
    /// Every committed record of another cluster's state topic (a failback reads the source's,
    /// issue 18); an empty list when that cluster has no such topic.
    fn read_remote_state<'a>(
        &'a self,
        bootstrap: &'a str,
        properties: &'a BTreeMap<String, String>,
        topic: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, KafkaResult<Vec<LogRecord>>>;
    /// The committed records of the destination's `topic` per partition in `[from, end)`.
    fn scan_destination<'a>(
        &'a self,
        config: &'a EngineConfig,
        topic: &'a str,
        ranges: Vec<(i32, i64, i64)>,
    ) -> BoxFuture<'a, KafkaResult<BTreeMap<i32, Scanned>>>;
    /// Like `scan_destination`, on the cluster at `bootstrap` (a mirror's source: what a
    /// failback will copy).
    fn scan_cluster<'a>(
        &'a self,
        bootstrap: &'a str,
        properties: &'a BTreeMap<String, String>,
        topic: &'a str,
        ranges: Vec<(i32, i64, i64)>,
        timeout: Duration,
    ) -> BoxFuture<'a, KafkaResult<BTreeMap<i32, Scanned>>>;
    /// Copies the destination's divergent records `job` describes to its quarantine topic
    /// before a resync deletes them (`kafka::quarantine::copy`); with `dry_run` only counts
    /// what it would copy. Either way refused when the quarantine topic holds foreign data.
    fn quarantine<'a>(
        &'a self,
        config: &'a EngineConfig,
        job: QuarantineJob,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<BTreeMap<i32, QuarantinedPartition>, QuarantineError>>;
    /// Initialises a transactional producer with `transactional_id` and closes it: whatever
    /// producer had that id is fenced and its open transaction aborted.
    fn fence_writer<'a>(
        &'a self,
        config: &'a EngineConfig,
        transactional_id: &'a str,
    ) -> BoxFuture<'a, KafkaResult<()>>;
    /// Starts a mirror's data path: commands go to the returned sender, events come on `events`.
    fn spawn_data_path(
        &self,
        config: PipeConfig,
        encode: EncodeProgress,
        events: mpsc::UnboundedSender<PipeEvent>,
        runtime: tokio::runtime::Handle,
    ) -> std::io::Result<SpawnedDataPath>;
}

// ----- the real clusters ---------------------------------------------------------------------

impl ClusterAdmin for KafkaAdmin {
    fn is_limited(&self) -> bool {
        KafkaAdmin::is_limited(self)
    }
    fn describe_cluster(&self) -> BoxFuture<'_, KafkaResult<ClusterDescription>> {
        Box::pin(KafkaAdmin::describe_cluster(self))
    }
    fn describe_topics<'a>(
        &'a self,
        names: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<TopicDescription>>>> {
        Box::pin(KafkaAdmin::describe_topics(self, names))
    }
    fn describe_topic<'a>(&'a self, name: &'a str) -> BoxFuture<'a, KafkaResult<TopicDescription>> {
        Box::pin(KafkaAdmin::describe_topic(self, name))
    }
    fn list_topics(&self) -> BoxFuture<'_, KafkaResult<Vec<String>>> {
        Box::pin(KafkaAdmin::list_topics(self))
    }
    fn list_offsets<'a>(
        &'a self,
        requests: &'a [(String, i32, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> BoxFuture<'a, KafkaResult<Vec<ListedOffset>>> {
        Box::pin(KafkaAdmin::list_offsets(self, requests, isolation))
    }
    fn describe_topic_configs<'a>(&'a self, topic: &'a str) -> BoxFuture<'a, KafkaResult<Vec<ConfigEntry>>> {
        Box::pin(KafkaAdmin::describe_topic_configs(self, topic))
    }
    fn alter_topic_configs<'a>(
        &'a self,
        topic: &'a str,
        ops: &'a [(String, ConfigOp)],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        Box::pin(KafkaAdmin::alter_topic_configs(self, topic, ops))
    }
    fn create_topic<'a>(
        &'a self,
        name: &'a str,
        partitions: i32,
        replication: i32,
        configs: &'a [(String, String)],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        Box::pin(KafkaAdmin::create_topic(self, name, partitions, replication, configs))
    }
    fn create_partitions<'a>(&'a self, topic: &'a str, total: usize) -> BoxFuture<'a, KafkaResult<()>> {
        Box::pin(KafkaAdmin::create_partitions(self, topic, total))
    }
    fn delete_records<'a>(&'a self, topic: &'a str, partitions: &'a [(i32, i64)]) -> BoxFuture<'a, KafkaResult<()>> {
        Box::pin(KafkaAdmin::delete_records(self, topic, partitions))
    }
    fn list_consumer_groups(&self) -> BoxFuture<'_, KafkaResult<Vec<GroupListing>>> {
        Box::pin(KafkaAdmin::list_consumer_groups(self))
    }
    fn describe_consumer_groups<'a>(
        &'a self,
        groups: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<GroupDescription>>>> {
        Box::pin(KafkaAdmin::describe_consumer_groups(self, groups))
    }
    fn list_consumer_group_offsets<'a>(
        &'a self,
        group: &'a str,
        partitions: Option<&'a [(String, i32)]>,
        require_stable: bool,
    ) -> BoxFuture<'a, KafkaResult<Vec<GroupOffset>>> {
        Box::pin(KafkaAdmin::list_consumer_group_offsets(self, group, partitions, require_stable))
    }
    fn alter_consumer_group_offsets<'a>(
        &'a self,
        group: &'a str,
        offsets: &'a [GroupOffset],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        Box::pin(KafkaAdmin::alter_consumer_group_offsets(self, group, offsets))
    }
    fn describe_acls<'a>(&'a self, filter: &'a AclFilter) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>> {
        Box::pin(KafkaAdmin::describe_acls(self, filter))
    }
    fn create_acls<'a>(&'a self, bindings: &'a [AclBinding]) -> BoxFuture<'a, KafkaResult<()>> {
        Box::pin(KafkaAdmin::create_acls(self, bindings))
    }
    fn delete_acls<'a>(&'a self, filters: &'a [AclFilter]) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>> {
        Box::pin(KafkaAdmin::delete_acls(self, filters))
    }
}

/// A shared client is a client: `&Arc<dyn ClusterAdmin>` passes where `&dyn ClusterAdmin` is
/// expected.
impl<T: ClusterAdmin + ?Sized> ClusterAdmin for Arc<T> {
    fn is_limited(&self) -> bool {
        (**self).is_limited()
    }
    fn describe_cluster(&self) -> BoxFuture<'_, KafkaResult<ClusterDescription>> {
        (**self).describe_cluster()
    }
    fn describe_topics<'a>(
        &'a self,
        names: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<TopicDescription>>>> {
        (**self).describe_topics(names)
    }
    fn describe_topic<'a>(&'a self, name: &'a str) -> BoxFuture<'a, KafkaResult<TopicDescription>> {
        (**self).describe_topic(name)
    }
    fn list_topics(&self) -> BoxFuture<'_, KafkaResult<Vec<String>>> {
        (**self).list_topics()
    }
    fn list_offsets<'a>(
        &'a self,
        requests: &'a [(String, i32, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> BoxFuture<'a, KafkaResult<Vec<ListedOffset>>> {
        (**self).list_offsets(requests, isolation)
    }
    fn describe_topic_configs<'a>(&'a self, topic: &'a str) -> BoxFuture<'a, KafkaResult<Vec<ConfigEntry>>> {
        (**self).describe_topic_configs(topic)
    }
    fn alter_topic_configs<'a>(
        &'a self,
        topic: &'a str,
        ops: &'a [(String, ConfigOp)],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        (**self).alter_topic_configs(topic, ops)
    }
    fn create_topic<'a>(
        &'a self,
        name: &'a str,
        partitions: i32,
        replication: i32,
        configs: &'a [(String, String)],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        (**self).create_topic(name, partitions, replication, configs)
    }
    fn create_partitions<'a>(&'a self, topic: &'a str, total: usize) -> BoxFuture<'a, KafkaResult<()>> {
        (**self).create_partitions(topic, total)
    }
    fn delete_records<'a>(&'a self, topic: &'a str, partitions: &'a [(i32, i64)]) -> BoxFuture<'a, KafkaResult<()>> {
        (**self).delete_records(topic, partitions)
    }
    fn list_consumer_groups(&self) -> BoxFuture<'_, KafkaResult<Vec<GroupListing>>> {
        (**self).list_consumer_groups()
    }
    fn describe_consumer_groups<'a>(
        &'a self,
        groups: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<GroupDescription>>>> {
        (**self).describe_consumer_groups(groups)
    }
    fn list_consumer_group_offsets<'a>(
        &'a self,
        group: &'a str,
        partitions: Option<&'a [(String, i32)]>,
        require_stable: bool,
    ) -> BoxFuture<'a, KafkaResult<Vec<GroupOffset>>> {
        (**self).list_consumer_group_offsets(group, partitions, require_stable)
    }
    fn alter_consumer_group_offsets<'a>(
        &'a self,
        group: &'a str,
        offsets: &'a [GroupOffset],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        (**self).alter_consumer_group_offsets(group, offsets)
    }
    fn describe_acls<'a>(&'a self, filter: &'a AclFilter) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>> {
        (**self).describe_acls(filter)
    }
    fn create_acls<'a>(&'a self, bindings: &'a [AclBinding]) -> BoxFuture<'a, KafkaResult<()>> {
        (**self).create_acls(bindings)
    }
    fn delete_acls<'a>(&'a self, filters: &'a [AclFilter]) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>> {
        (**self).delete_acls(filters)
    }
}

impl StateStore for StateWriter {
    fn write(&self, records: &[StateWrite]) -> Result<(), StateWriteError> {
        StateWriter::write(self, records)
    }
}

/// The real clusters: librdkafka clients, the state topic on the destination, data-path threads.
#[derive(Debug)]
pub(crate) struct KafkaPorts {
    destination: KafkaAdmin,
}

impl KafkaPorts {
    /// Connects the destination's admin client (lazily: nothing is asked yet).
    pub(crate) fn connect(config: &EngineConfig) -> KafkaResult<KafkaPorts> {
        let destination =
            KafkaAdmin::connect(&config.destination_bootstrap, &config.destination_properties, config.request_timeout)?;
        Ok(KafkaPorts { destination })
    }
}

impl Ports for KafkaPorts {
    fn destination(&self) -> Admin {
        Arc::new(self.destination.clone())
    }

    fn connect_source(
        &self,
        bootstrap: &str,
        properties: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> KafkaResult<Admin> {
        Ok(Arc::new(KafkaAdmin::connect(bootstrap, properties, timeout)?))
    }

    fn ensure_state_topic<'a>(&'a self, topic: &'a str, partitions: i32) -> BoxFuture<'a, KafkaResult<i32>> {
        Box::pin(state_log::ensure_state_topic(&self.destination, topic, partitions))
    }

    fn read_state<'a>(
        &'a self,
        config: &'a EngineConfig,
        only: Option<&'a [i32]>,
    ) -> BoxFuture<'a, KafkaResult<Vec<LogRecord>>> {
        Box::pin(state_log::read_to_end(
            &self.destination,
            &config.destination_bootstrap,
            &config.destination_properties,
            &config.state_topic,
            only,
            config.request_timeout * 4,
        ))
    }

    fn open_state_writer<'a>(
        &'a self,
        config: &'a EngineConfig,
        role: WriterRole,
    ) -> BoxFuture<'a, KafkaResult<Arc<dyn StateStore>>> {
        let c = config.clone();
        Box::pin(async move {
            let writer = tokio::task::spawn_blocking(move || {
                StateWriter::new(
                    &c.destination_bootstrap,
                    &c.destination_properties,
                    &role.transactional_id(&c.instance_id),
                    &c.state_topic,
                    c.request_timeout,
                )
            })
            .await
            .map_err(|e| KafkaError::Task { operation: "open state writer", message: e.to_string() })??;
            Ok(Arc::new(writer) as Arc<dyn StateStore>)
        })
    }

    fn tail_state(
        &self,
        config: &EngineConfig,
        start: &[(i32, Option<i64>)],
        batches: mpsc::UnboundedSender<TailBatch>,
    ) -> KafkaResult<Box<dyn Background>> {
        let tail = state_log::StateTail::spawn(
            &config.destination_bootstrap,
            &config.destination_properties,
            &config.state_topic,
            start,
            batches,
        )?;
        Ok(Box::new(tail))
    }

    fn join_group(
        &self,
        config: &EngineConfig,
        events: mpsc::UnboundedSender<MembershipEvent>,
    ) -> KafkaResult<Box<dyn GroupMember>> {
        let session_timeout = match &config.ownership {
            crate::engine::Ownership::Group { session_timeout, .. } => *session_timeout,
            crate::engine::Ownership::Standalone => Duration::from_secs(10),
        };
        let mut cfg = MembershipConfig::new(
            &config.destination_bootstrap,
            config.destination_properties.clone(),
            group_id(&config.cluster_name),
            &config.instance_id,
            &config.state_topic,
        );
        cfg.session_timeout = session_timeout;
        Ok(Box::new(Membership::start(cfg, events)?))
    }

    fn read_remote_state<'a>(
        &'a self,
        bootstrap: &'a str,
        properties: &'a BTreeMap<String, String>,
        topic: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, KafkaResult<Vec<LogRecord>>> {
        Box::pin(async move {
            let admin = KafkaAdmin::connect(bootstrap, properties, timeout)?;
            let r = match state_log::read_to_end(&admin, bootstrap, properties, topic, None, timeout * 4).await {
                Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => Ok(Vec::new()),
                r => r,
            };
            // Destroying a client can block: not on a runtime worker.
            drop(tokio::task::spawn_blocking(move || drop(admin)));
            r
        })
    }

    fn scan_destination<'a>(
        &'a self,
        config: &'a EngineConfig,
        topic: &'a str,
        ranges: Vec<(i32, i64, i64)>,
    ) -> BoxFuture<'a, KafkaResult<BTreeMap<i32, Scanned>>> {
        let timeout = config.request_timeout * 4;
        self.scan_cluster(&config.destination_bootstrap, &config.destination_properties, topic, ranges, timeout)
    }

    fn scan_cluster<'a>(
        &'a self,
        bootstrap: &'a str,
        properties: &'a BTreeMap<String, String>,
        topic: &'a str,
        ranges: Vec<(i32, i64, i64)>,
        timeout: Duration,
    ) -> BoxFuture<'a, KafkaResult<BTreeMap<i32, Scanned>>> {
        let (bootstrap, properties, topic) = (bootstrap.to_string(), properties.clone(), topic.to_string());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                crate::kafka::scan::scan_committed(&bootstrap, &properties, &topic, &ranges, timeout)
            })
            .await
            .map_err(|e| KafkaError::Task { operation: "scan records", message: e.to_string() })?
        })
    }

    fn quarantine<'a>(
        &'a self,
        config: &'a EngineConfig,
        job: QuarantineJob,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<BTreeMap<i32, QuarantinedPartition>, QuarantineError>> {
        let (bootstrap, properties) = (config.destination_bootstrap.clone(), config.destination_properties.clone());
        let timeout = config.request_timeout * 4;
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                crate::kafka::quarantine::copy(&bootstrap, &properties, &job, dry_run, timeout)
            })
            .await
            .map_err(|e| KafkaError::Task { operation: "quarantine", message: e.to_string() })?
        })
    }

    fn fence_writer<'a>(
        &'a self,
        config: &'a EngineConfig,
        transactional_id: &'a str,
    ) -> BoxFuture<'a, KafkaResult<()>> {
        let c = config.clone();
        let id = transactional_id.to_string();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                StateWriter::new(
                    &c.destination_bootstrap,
                    &c.destination_properties,
                    &id,
                    &c.state_topic,
                    c.request_timeout,
                )
                .map(drop)
            })
            .await
            .map_err(|e| KafkaError::Task { operation: "fence writer", message: e.to_string() })?
        })
    }

    fn spawn_data_path(
        &self,
        config: PipeConfig,
        encode: EncodeProgress,
        events: mpsc::UnboundedSender<PipeEvent>,
        runtime: tokio::runtime::Handle,
    ) -> std::io::Result<SpawnedDataPath> {
        pipe::spawn(config, encode, events, runtime)
    }
}

/// The consumer group of a deployment's instances.
pub(crate) fn group_id(cluster_name: &str) -> String {
    format!("{cluster_name}.slots")
}

impl Background for state_log::StateTail {
    fn close(self: Box<Self>) {
        self.stop();
    }
}

impl GroupMember for Membership {
    fn rebalances(&self) -> u64 {
        Membership::rebalances(self)
    }
    fn failure(&self) -> Option<String> {
        Membership::failure(self).map(|e| e.to_string())
    }
    fn nudge(&self) -> bool {
        Membership::nudge(self)
    }
    fn close(self: Box<Self>) {
        Membership::close(*self);
    }
}
