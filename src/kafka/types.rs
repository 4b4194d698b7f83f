//! Owned results of Kafka admin calls. Every field is copied out of librdkafka's memory before the
//! result event is destroyed, so nothing here points into C memory.

use std::fmt;

/// A Kafka UUID (topic ID, cluster incarnation). Shown the way Kafka shows it: URL-safe base64
/// without padding, 22 characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KafkaUuid {
    pub most_significant_bits: i64,
    pub least_significant_bits: i64,
}

impl KafkaUuid {
    pub const ZERO: KafkaUuid = KafkaUuid { most_significant_bits: 0, least_significant_bits: 0 };

    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.most_significant_bits.to_be_bytes());
        b[8..].copy_from_slice(&self.least_significant_bits.to_be_bytes());
        b
    }

    /// Parses Kafka's 22-character URL-safe base64 form.
    pub fn parse(s: &str) -> Option<KafkaUuid> {
        let bytes = base64url_decode(s)?;
        let bytes: [u8; 16] = bytes.try_into().ok()?;
        let (hi, lo) = bytes.split_at(8);
        Some(KafkaUuid {
            most_significant_bits: i64::from_be_bytes(hi.try_into().ok()?),
            least_significant_bits: i64::from_be_bytes(lo.try_into().ok()?),
        })
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl fmt::Display for KafkaUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.to_bytes();
        let mut out = String::with_capacity(22);
        for chunk in bytes.chunks(3) {
            let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
            let chars = chunk.len() + 1;
            for i in 0..chars {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        f.write_str(&out)
    }
}

fn base64url_decode(s: &str) -> Option<Vec<u8>> {
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for c in s.bytes() {
        let v = B64.iter().position(|&b| b == c)? as u32;
        bits = (bits << 6) | v;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    Some(out)
}

/// A broker as the cluster describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// The answer to DescribeCluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    pub cluster_id: String,
    pub controller: Option<Node>,
    pub nodes: Vec<Node>,
}

/// One partition of a described topic. Broker ids only; the nodes are in the cluster description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    pub leader: Option<i32>,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// The answer to DescribeTopics for one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    pub name: String,
    pub topic_id: KafkaUuid,
    pub is_internal: bool,
    pub partitions: Vec<PartitionInfo>,
}

/// Which offset ListOffsets should return for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The high watermark (read_uncommitted) or last stable offset (read_committed).
    Latest,
    /// The offset of the record with the largest timestamp.
    MaxTimestamp,
    /// The first offset whose timestamp is >= this (milliseconds since the epoch).
    Timestamp(i64),
}

/// Isolation level for ListOffsets: `ReadCommitted` makes `Latest` return the last stable offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    #[default]
    ReadUncommitted,
    ReadCommitted,
}

/// One partition's answer to ListOffsets. `offset` is -1 when no record matches a timestamp query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub leader_epoch: Option<i32>,
}

/// One operation of IncrementalAlterConfigs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOp {
    Set(String),
    Delete,
    Append(String),
    Subtract(String),
}

/// A config entry as DescribeConfigs returns it (the parts kmirror uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub is_default: bool,
    pub is_read_only: bool,
    pub is_sensitive: bool,
}

/// Where a config value comes from. `DynamicTopic` is a per-topic override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    Unknown,
    Default,
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    Any,
    Topic,
    Group,
    Cluster,
    TransactionalId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PatternType {
    /// Filters only: any pattern type.
    Any,
    /// Filters only: literal, prefixed or wildcard patterns that match the name.
    Match,
    Literal,
    Prefixed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclOperation {
    Any,
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclPermission {
    Any,
    Deny,
    Allow,
}

/// An ACL binding: `principal` may (or may not) perform `operation` on resources of
/// `resource_type` whose name matches `name` under `pattern_type`, from `host`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermission,
}

/// A filter for DescribeAcls / DeleteAcls. `None` matches anything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub name: Option<String>,
    pub pattern_type: Option<PatternType>,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<AclOperation>,
    pub permission: Option<AclPermission>,
}

impl From<&AclBinding> for AclFilter {
    /// A filter matching exactly this binding.
    fn from(b: &AclBinding) -> Self {
        AclFilter {
            resource_type: Some(b.resource_type),
            name: Some(b.name.clone()),
            pattern_type: Some(b.pattern_type),
            principal: Some(b.principal.clone()),
            host: Some(b.host.clone()),
            operation: Some(b.operation),
            permission: Some(b.permission),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Unknown,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
    Empty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupType {
    Unknown,
    /// KIP-848 consumer protocol group.
    Consumer,
    Classic,
}

/// One entry of ListConsumerGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub is_simple: bool,
    pub state: GroupState,
    pub group_type: GroupType,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub consumer_id: String,
    pub client_id: String,
    pub host: String,
    pub group_instance_id: Option<String>,
    pub assignment: Vec<(String, i32)>,
}

/// The answer to DescribeConsumerGroups for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: GroupState,
    pub group_type: GroupType,
    pub is_simple: bool,
    pub partition_assignor: String,
    pub coordinator: Option<Node>,
    pub members: Vec<MemberDescription>,
}

/// A committed group offset: the next offset the group will consume in that partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: Option<i32>,
    pub metadata: Option<String>,
}

pub use crate::data_path::{PartitionPosition, StateWrite};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_round_trips_through_kafka_base64() {
        for s in ["EEB8QEn5XPmjX3cKvknOpQ", "rurTmx9dW7WWA6KnPM7ubQ", "AAAAAAAAAAAAAAAAAAAAAA"] {
            let u = KafkaUuid::parse(s).unwrap();
            assert_eq!(u.to_string(), s);
        }
        let u = KafkaUuid { most_significant_bits: -1, least_significant_bits: 1 };
        assert_eq!(KafkaUuid::parse(&u.to_string()), Some(u));
        assert_eq!(KafkaUuid::parse("not base64!"), None);
        assert_eq!(KafkaUuid::parse("AAAA"), None);
    }
}

/// Kafka's own words for a resource type, as `kafka-acls.sh` prints them.
fn resource_word(r: ResourceType) -> &'static str {
    match r {
        ResourceType::Any => "any resource",
        ResourceType::Topic => "topic",
        ResourceType::Group => "group",
        ResourceType::Cluster => "cluster",
        ResourceType::TransactionalId => "transactional id",
    }
}

fn pattern_word(p: PatternType) -> &'static str {
    match p {
        PatternType::Any => "any pattern",
        PatternType::Match => "matching",
        PatternType::Literal => "literal",
        PatternType::Prefixed => "prefixed",
    }
}

fn operation_word(o: AclOperation) -> &'static str {
    match o {
        AclOperation::Any => "ANY",
        AclOperation::All => "ALL",
        AclOperation::Read => "READ",
        AclOperation::Write => "WRITE",
        AclOperation::Create => "CREATE",
        AclOperation::Delete => "DELETE",
        AclOperation::Alter => "ALTER",
        AclOperation::Describe => "DESCRIBE",
        AclOperation::ClusterAction => "CLUSTER_ACTION",
        AclOperation::DescribeConfigs => "DESCRIBE_CONFIGS",
        AclOperation::AlterConfigs => "ALTER_CONFIGS",
        AclOperation::IdempotentWrite => "IDEMPOTENT_WRITE",
    }
}

fn permission_word(p: AclPermission) -> &'static str {
    match p {
        AclPermission::Any => "ANY",
        AclPermission::Deny => "DENY",
        AclPermission::Allow => "ALLOW",
    }
}

/// As people read a binding: `ALLOW READ on topic orders (prefixed) for User:alice from *`.
impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} on {} {} ({}) for {} from {}",
            permission_word(self.permission),
            operation_word(self.operation),
            resource_word(self.resource_type),
            self.name,
            pattern_word(self.pattern_type),
            self.principal,
            self.host
        )
    }
}

/// As people read a filter: `ACLs on topic orders (literal), any principal, any host`.
impl fmt::Display for AclFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let any = |v: &Option<String>, what: &str| v.clone().unwrap_or_else(|| format!("any {what}"));
        let kind: Vec<&str> =
            [self.permission.map(permission_word), self.operation.map(operation_word)].into_iter().flatten().collect();
        let acls = if kind.is_empty() { "ACLs".to_string() } else { format!("{} ACLs", kind.join(" ")) };
        write!(
            f,
            "{acls} on {} {} ({}), {}, {}",
            self.resource_type.map_or("any resource", resource_word),
            any(&self.name, "name"),
            self.pattern_type.map_or("any pattern", pattern_word),
            any(&self.principal, "principal"),
            any(&self.host, "host"),
        )
    }
}

#[cfg(test)]
mod display_tests {
    use super::*;

    #[test]
    fn acls_read_as_kafka_operators_write_them_not_as_rust_debug() {
        let b = AclBinding {
            resource_type: ResourceType::Topic,
            name: "orders".into(),
            pattern_type: PatternType::Prefixed,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        };
        assert_eq!(b.to_string(), "ALLOW READ on topic orders (prefixed) for User:alice from *");
        let any = AclFilter::default().to_string();
        assert_eq!(any, "ACLs on any resource any name (any pattern), any principal, any host");
        let f = AclFilter::from(&b).to_string();
        assert!(!f.contains("None") && !f.contains('{') && f.contains("User:alice"), "{f}");
    }
}
