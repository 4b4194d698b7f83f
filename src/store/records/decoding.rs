//! Decoding: a record's bytes back to a [`StateRecord`], checked against the format's rules and
//! limits (key and value agree, lists and partition indexes are bounded).

use std::fmt;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::drill::DrillValue;
use super::instance::InstanceValue;
use super::keys::{DrillKey, InstanceKey, MirrorKey, MirrorTopicKey, OffsetRunsKey, OperationKey, PartitionKey};
use super::mirror::{MirrorTopicValue, MirrorValue};
use super::offsets::OffsetRunsValue;
use super::operation::OperationValue;
use super::partition::{LastMirrorEpochsValue, PartitionStateValue};
use super::{Entry, MAX_PARTITION_COUNT, MAX_RECORD_LIST_LEN, RecordKind, StateRecord};

/// Which half of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// The key.
    Key,
    /// The value.
    Value,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Key => "key",
            Self::Value => "value",
        })
    }
}

/// Why a `__mirror_state` record cannot be decoded. The caller reports it and skips the record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The record has no key.
    #[error("state record has no key")]
    MissingKey,
    /// Not JSON, or not the JSON of the expected struct.
    #[error("malformed state record {part}{}: {message}", kind.map(|k| format!(" ({k})")).unwrap_or_default())]
    Malformed {
        /// The half that is malformed.
        part: Part,
        /// The kind, once known.
        kind: Option<RecordKind>,
        /// The parser's explanation.
        message: String,
    },
    /// A `"type"` this build does not know (written by a newer kmirror, or not a kmirror record).
    #[error("state record {part} has unknown type {type_name:?} (written by a newer kmirror?)")]
    UnknownType {
        /// The half that names it.
        part: Part,
        /// The name (shortened to 64 characters).
        type_name: String,
    },
    /// A version this build does not know.
    #[error("{kind} {part} version {version} is not supported (this kmirror reads up to version {supported}{})",
        if version > supported { "; written by a newer kmirror" } else { "" })]
    UnknownVersion {
        /// The half.
        part: Part,
        /// The record kind.
        kind: RecordKind,
        /// The version found.
        version: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The value does not belong to the key (another type, or other identifying fields).
    #[error("{kind} record value does not match its key: {detail}")]
    KeyValueMismatch {
        /// The key's kind.
        kind: RecordKind,
        /// What differs.
        detail: String,
    },
    /// A count or index outside the format's bounds ([`MAX_PARTITION_COUNT`],
    /// [`MAX_RECORD_LIST_LEN`]): a malformed or hostile record.
    #[error("invalid {kind} record: {field} is {value}, outside 0..={max}")]
    OutOfBounds {
        /// The kind.
        kind: RecordKind,
        /// The field (a list's name for its length).
        field: &'static str,
        /// The value found.
        value: i64,
        /// The largest value allowed.
        max: i64,
    },
    /// Well-formed JSON that breaks a rule of the format.
    #[error("invalid {kind} record: {detail}")]
    Invalid {
        /// The kind.
        kind: RecordKind,
        /// The broken rule.
        detail: String,
    },
}

/// The members every key and value starts with.
#[derive(Deserialize)]
struct Header {
    #[serde(rename = "type")]
    kind: String,
    version: u32,
}

fn malformed(part: Part, kind: Option<RecordKind>, error: &serde_json::Error) -> DecodeError {
    DecodeError::Malformed { part, kind, message: error.to_string() }
}

fn shorten(name: &str) -> String {
    name.chars().take(64).collect()
}

/// Reads the header of one half: its kind (known or not) and version.
fn read_header(bytes: &[u8], part: Part) -> Result<(Result<RecordKind, String>, u32), DecodeError> {
    let header: Header = serde_json::from_slice(bytes).map_err(|e| malformed(part, None, &e))?;
    Ok((RecordKind::from_name(&header.kind).ok_or(header.kind), header.version))
}

fn check_version(part: Part, kind: RecordKind, version: u32) -> Result<(), DecodeError> {
    let supported = match part {
        Part::Key => kind.key_version(),
        Part::Value => kind.value_version(),
    };
    if version == supported { Ok(()) } else { Err(DecodeError::UnknownVersion { part, kind, version, supported }) }
}

fn read_body<T: DeserializeOwned>(bytes: &[u8], part: Part, kind: RecordKind) -> Result<T, DecodeError> {
    serde_json::from_slice(bytes).map_err(|e| malformed(part, Some(kind), &e))
}

/// Checks that `value` is within `0..=max`.
fn bounded(kind: RecordKind, field: &'static str, value: i64, max: i64) -> Result<(), DecodeError> {
    if (0..=max).contains(&value) { Ok(()) } else { Err(DecodeError::OutOfBounds { kind, field, value, max }) }
}

/// Checks a partition index (below [`MAX_PARTITION_COUNT`]).
fn partition_index(kind: RecordKind, field: &'static str, partition: i32) -> Result<(), DecodeError> {
    bounded(kind, field, i64::from(partition), i64::from(MAX_PARTITION_COUNT) - 1)
}

/// Checks a list's length (at most [`MAX_RECORD_LIST_LEN`]).
fn list_len(kind: RecordKind, field: &'static str, len: usize) -> Result<(), DecodeError> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    bounded(kind, field, len, MAX_RECORD_LIST_LEN as i64)
}

/// A value that knows which key it belongs to.
trait ValueOf<K>: DeserializeOwned {
    /// Checks the identifying fields against the key and the format's rules.
    fn check(&self, key: &K) -> Result<(), DecodeError>;
}

fn mismatch(kind: RecordKind, field: &str, in_key: &dyn fmt::Debug, in_value: &dyn fmt::Debug) -> DecodeError {
    DecodeError::KeyValueMismatch {
        kind,
        detail: format!("{field} is {in_key:?} in the key but {in_value:?} in the value"),
    }
}

/// Compares identifying fields, naming the first that differs.
macro_rules! same {
    ($kind:expr, $($field:literal: $key:expr => $value:expr),+ $(,)?) => {
        $(if $key != $value {
            return Err(mismatch($kind, $field, &$key, &$value));
        })+
    };
}

impl ValueOf<MirrorKey> for MirrorValue {
    fn check(&self, key: &MirrorKey) -> Result<(), DecodeError> {
        same!(RecordKind::Mirror, "mirror": key.mirror => self.name);
        let kind = RecordKind::Mirror;
        list_len(kind, "source.properties", self.source.properties.len())?;
        list_len(kind, "sync.group_include", self.sync.group_include.len())?;
        list_len(kind, "sync.group_exclude", self.sync.group_exclude.len())?;
        list_len(kind, "created_acls", self.created_acls.len())?;
        if let Some(a) = &self.approval {
            list_len(kind, "approval.required_for", a.required_for.len())?;
        }
        Ok(())
    }
}

impl ValueOf<MirrorTopicKey> for MirrorTopicValue {
    fn check(&self, key: &MirrorTopicKey) -> Result<(), DecodeError> {
        same!(RecordKind::MirrorTopic, "mirror": key.mirror => self.mirror, "topic": key.topic => self.topic);
        bounded(RecordKind::MirrorTopic, "partition_count", self.partition_count.into(), MAX_PARTITION_COUNT.into())
    }
}

impl ValueOf<PartitionKey> for PartitionStateValue {
    fn check(&self, key: &PartitionKey) -> Result<(), DecodeError> {
        same!(RecordKind::MirrorPartitionState,
            "mirror": key.mirror => self.mirror,
            "topic_id": key.topic_id => self.topic_id,
            "partition": key.partition => self.partition);
        partition_index(RecordKind::MirrorPartitionState, "partition", self.partition)
    }
}

impl ValueOf<MirrorKey> for LastMirrorEpochsValue {
    fn check(&self, _key: &MirrorKey) -> Result<(), DecodeError> {
        let kind = RecordKind::LastMirrorEpochs;
        list_len(kind, "topics", self.topics.len())?;
        for topic in &self.topics {
            bounded(
                kind,
                "partitions",
                i64::try_from(topic.partitions.len()).unwrap_or(i64::MAX),
                MAX_PARTITION_COUNT.into(),
            )?;
            for p in &topic.partitions {
                partition_index(kind, "partition_index", p.partition_index)?;
            }
        }
        Ok(())
    }
}

impl ValueOf<OperationKey> for OperationValue {
    fn check(&self, key: &OperationKey) -> Result<(), DecodeError> {
        same!(RecordKind::Operation, "mirror": key.mirror => self.mirror, "id": key.id => self.id);
        list_len(RecordKind::Operation, "topics", self.topics.len())?;
        if let Some(a) = &self.approval {
            list_len(RecordKind::Operation, "approval.call.topics", a.call.topics.len())?;
        }
        list_len(RecordKind::Operation, "results", self.results.len())
    }
}

impl ValueOf<DrillKey> for DrillValue {
    fn check(&self, key: &DrillKey) -> Result<(), DecodeError> {
        same!(RecordKind::Drill, "mirror": key.mirror => self.mirror, "id": key.id => self.id);
        list_len(RecordKind::Drill, "steps", self.steps.len())
    }
}

impl ValueOf<OffsetRunsKey> for OffsetRunsValue {
    fn check(&self, key: &OffsetRunsKey) -> Result<(), DecodeError> {
        let Some(first) = self.runs.first() else {
            return Err(DecodeError::Invalid { kind: RecordKind::OffsetRuns, detail: "no runs".to_owned() });
        };
        same!(RecordKind::OffsetRuns,
            "mirror": key.mirror => self.mirror,
            "topic_id": key.topic_id => self.topic_id,
            "partition": key.partition => self.partition,
            "first_destination_offset": key.first_destination_offset => first.destination_start());
        partition_index(RecordKind::OffsetRuns, "partition", self.partition)?;
        list_len(RecordKind::OffsetRuns, "runs", self.runs.len())
    }
}

impl ValueOf<InstanceKey> for InstanceValue {
    fn check(&self, key: &InstanceKey) -> Result<(), DecodeError> {
        same!(RecordKind::Instance, "instance": key.instance => self.instance);
        list_len(RecordKind::Instance, "slots", self.slots.len())?;
        for slot in &self.slots {
            partition_index(RecordKind::Instance, "slot", *slot)?;
        }
        Ok(())
    }
}

fn decode_entry<K: DeserializeOwned, V: ValueOf<K>>(
    kind: RecordKind,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Entry<K, V>, DecodeError> {
    let decoded_key: K = read_body(key, Part::Key, kind)?;
    let Some(value) = value else {
        return Ok(Entry::tombstone(decoded_key));
    };
    let (value_kind, version) = read_header(value, Part::Value).map_err(|error| match error {
        DecodeError::Malformed { part, message, .. } => DecodeError::Malformed { part, kind: Some(kind), message },
        other => other,
    })?;
    if value_kind != Ok(kind) {
        let found = value_kind.map_or_else(|name| shorten(&name), |k| k.as_str().to_owned());
        return Err(DecodeError::KeyValueMismatch { kind, detail: format!("the value's type is {found:?}") });
    }
    check_version(Part::Value, kind, version)?;
    let decoded_value: V = read_body(value, Part::Value, kind)?;
    decoded_value.check(&decoded_key)?;
    Ok(Entry::put(decoded_key, decoded_value))
}

/// Decodes one `__mirror_state` record from its key and value bytes (`value: None` is a
/// tombstone). Never panics, whatever the bytes.
///
/// # Errors
///
/// [`DecodeError`]: the caller reports it and skips the record.
pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<StateRecord, DecodeError> {
    let key = key.ok_or(DecodeError::MissingKey)?;
    let (kind, version) = read_header(key, Part::Key)?;
    let kind = kind.map_err(|name| DecodeError::UnknownType { part: Part::Key, type_name: shorten(&name) })?;
    check_version(Part::Key, kind, version)?;
    Ok(match kind {
        RecordKind::Mirror => StateRecord::Mirror(decode_entry(kind, key, value)?),
        RecordKind::MirrorTopic => StateRecord::MirrorTopic(decode_entry(kind, key, value)?),
        RecordKind::MirrorPartitionState => StateRecord::PartitionState(decode_entry(kind, key, value)?),
        RecordKind::LastMirrorEpochs => StateRecord::LastMirrorEpochs(decode_entry(kind, key, value)?),
        RecordKind::Operation => StateRecord::Operation(decode_entry(kind, key, value)?),
        RecordKind::OffsetRuns => StateRecord::OffsetRuns(decode_entry(kind, key, value)?),
        RecordKind::Instance => StateRecord::Instance(decode_entry(kind, key, value)?),
        RecordKind::Drill => StateRecord::Drill(decode_entry(kind, key, value)?),
    })
}
