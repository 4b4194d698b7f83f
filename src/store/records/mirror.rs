//! The values of Mirror and MirrorTopic records: a mirror's definition (source, sync settings,
//! approval policy, ACLs) and each mirrored topic's desired state.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::keys::MirrorTopicKey;

/// The value of a Mirror record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorValue {
    /// The mirror name (as in the key).
    pub name: String,
    /// How to reach the source cluster.
    pub source: SourceClusterValue,
    /// The source cluster ID the mirror was created with; `None` until first seen.
    pub expected_source_cluster_id: Option<String>,
    /// Creation time (ms since the Unix epoch).
    pub created_at: i64,
    /// Last change (ms since the Unix epoch).
    pub updated_at: i64,
    /// Metadata sync settings (defaults when absent).
    #[serde(default)]
    pub sync: SyncSettingsValue,
    /// ACLs kmirror created on the destination for this mirror: only these are ever removed
    /// when they disappear at the source (ACLs kmirror did not create are never touched).
    #[serde(default)]
    pub created_acls: Vec<AclBindingValue>,
    /// The mirror's replication throttle in record bytes per second per instance; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// Topic policy: source topics discovery starts (whole-name patterns). Absent in records
    /// written before the policy existed: empty (only topics someone starts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topic_include: Vec<String>,
    /// Topic policy: exclusions. Absent: the defaults (`domain::topic_policy::DEFAULT_EXCLUDE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_exclude: Option<Vec<String>>,
    /// Which calls need a second person's approval, and how long a request waits; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalPolicyValue>,
}

/// A mirror's approval policy as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalPolicyValue {
    /// The calls that need approval (`stop`, `delete`, `resync`, `failback`, `drill`), sorted; a
    /// name this version does not know is kept and ignored.
    pub required_for: Vec<String>,
    /// How long a request waits for a decision, in seconds.
    pub expires_after_seconds: u64,
}

/// An ACL binding as stored: its canonical record. The kinds are written as stable lowercase
/// names (`"topic"`, `"prefixed"`, `"describe_configs"`, `"allow"`).
///
/// Records written before this form held each kind as the Rust `Debug` text of the Kafka client's
/// enums (`"Topic"`, `"Prefixed"`, `"DescribeConfigs"`, `"Allow"`); they still load (aliases), and
/// are written back in the lowercase form. A name this version does not know loads as `Unknown`,
/// so one odd binding never makes the whole Mirror record unreadable; such a binding is skipped.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBindingValue {
    pub resource_type: AclResourceTypeValue,
    pub name: String,
    pub pattern_type: AclPatternTypeValue,
    pub principal: String,
    pub host: String,
    pub operation: AclOperationValue,
    pub permission: AclPermissionValue,
}

/// The resource an ACL binding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AclResourceTypeValue {
    #[serde(alias = "Topic")]
    Topic,
    #[serde(alias = "Group")]
    Group,
    #[serde(alias = "Cluster")]
    Cluster,
    #[serde(alias = "TransactionalId")]
    TransactionalId,
    /// A name this version does not know (never written).
    #[serde(other)]
    Unknown,
}

/// How an ACL binding's resource name matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AclPatternTypeValue {
    #[serde(alias = "Literal")]
    Literal,
    #[serde(alias = "Prefixed")]
    Prefixed,
    /// A name this version does not know (never written).
    #[serde(other)]
    Unknown,
}

/// The operation an ACL binding allows or denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AclOperationValue {
    #[serde(alias = "All")]
    All,
    #[serde(alias = "Read")]
    Read,
    #[serde(alias = "Write")]
    Write,
    #[serde(alias = "Create")]
    Create,
    #[serde(alias = "Delete")]
    Delete,
    #[serde(alias = "Alter")]
    Alter,
    #[serde(alias = "Describe")]
    Describe,
    #[serde(alias = "ClusterAction")]
    ClusterAction,
    #[serde(alias = "DescribeConfigs")]
    DescribeConfigs,
    #[serde(alias = "AlterConfigs")]
    AlterConfigs,
    #[serde(alias = "IdempotentWrite")]
    IdempotentWrite,
    /// A name this version does not know (never written).
    #[serde(other)]
    Unknown,
}

/// Whether an ACL binding allows or denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AclPermissionValue {
    #[serde(alias = "Allow")]
    Allow,
    #[serde(alias = "Deny")]
    Deny,
    /// A name this version does not know (never written).
    #[serde(other)]
    Unknown,
}

/// The source cluster connection of a mirror.
///
/// `properties` are librdkafka client properties. The state topic is readable by whoever may read
/// `__mirror_state`, so secrets belong outside it: a secret property's value should be a
/// reference (`${env:NAME}`, `${file:/path}`, resolved when a client is built). `Debug` redacts
/// secret values all the same (`crate::domain::secrets`, the program's one rule).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceClusterValue {
    /// `bootstrap.servers` of the source cluster.
    pub bootstrap_servers: String,
    /// Further client properties, sorted by name.
    pub properties: BTreeMap<String, String>,
}

impl fmt::Debug for SourceClusterValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let properties: BTreeMap<&str, &str> = self
            .properties
            .iter()
            .map(|(name, value)| {
                let secret = crate::domain::secrets::is_secret_property(name)
                    && crate::domain::secrets::Reference::parse(value).is_none();
                (name.as_str(), if secret { "<redacted>" } else { value.as_str() })
            })
            .collect();
        f.debug_struct("SourceClusterValue")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("properties", &properties)
            .finish()
    }
}

/// Metadata sync settings of a mirror (a placeholder that will grow: fields are added as
/// optional members, so older records keep decoding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyncSettingsValue {
    /// Sync topic configs.
    pub topic_configs: bool,
    /// Sync consumer-group offsets.
    pub consumer_group_offsets: bool,
    /// Sync ACLs.
    pub acls: bool,
    /// The metadata refresh interval in milliseconds.
    pub refresh_interval_ms: i64,
    /// Consumer groups whose offsets are synced: regexes matched against whole group names.
    pub group_include: Vec<String>,
    /// Groups never synced (wins over `group_include`).
    pub group_exclude: Vec<String>,
}

impl Default for SyncSettingsValue {
    fn default() -> Self {
        Self {
            topic_configs: true,
            consumer_group_offsets: true,
            acls: true,
            refresh_interval_ms: 30_000,
            group_include: vec![".*".to_string()],
            group_exclude: Vec::new(),
        }
    }
}

/// What the operator wants for a mirror topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DesiredStateValue {
    /// Mirror it.
    Mirroring,
    /// Keep it a mirror but stop fetching.
    Paused,
    /// Failed over: an ordinary writable topic.
    Stopped,
}

/// A start's truncation mode, persisted (`{"mode":"none"}`, `{"mode":"resync","quarantine":true}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum TruncationValue {
    /// Refuse a start over local writes.
    #[default]
    None,
    /// Delete the destination records and mirror the source again.
    Resync {
        /// Copy the records to `<topic>.kmirror-diverged` first.
        quarantine: bool,
    },
}

/// The value of a MirrorTopic record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorTopicValue {
    /// The mirror name (as in the key).
    pub mirror: String,
    /// The topic name (as in the key).
    pub topic: String,
    /// The source topic ID.
    pub source_topic_id: String,
    /// The destination topic ID; `None` until kmirror created or adopted the topic.
    pub destination_topic_id: Option<String>,
    /// What the operator wants.
    pub desired_state: DesiredStateValue,
    /// The truncation mode of the last start.
    pub truncation: TruncationValue,
    /// The partition count kmirror mirrors.
    pub partition_count: i32,
    /// When the topic joined the mirror (ms since the Unix epoch).
    pub created_at: i64,
    /// Last change (ms since the Unix epoch).
    pub updated_at: i64,
}

impl MirrorTopicValue {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> MirrorTopicKey {
        MirrorTopicKey { mirror: self.mirror.clone(), topic: self.topic.clone() }
    }
}
