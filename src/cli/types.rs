//! What the client reads from the API: its own small structs (only the fields it uses), not the
//! server's types. Field names are the API's; `client_types_match_the_openapi_document` checks
//! each of them against the committed OpenAPI document, so a renamed or removed field fails a
//! test instead of a command.
//!
//! Fields marked "not served yet" are read when a newer server sends them and ignored when it
//! does not; the test knows them by name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `GET /api/v1/mirrors`.
#[derive(Debug, Clone, Deserialize)]
pub struct MirrorsResponse {
    pub mirrors: Vec<MirrorView>,
}

/// A mirror (`Mirror`, also the body of `GET /api/v1/mirrors/{mirror}`).
#[derive(Debug, Clone, Deserialize)]
pub struct MirrorView {
    pub name: String,
    pub source: SourceView,
    pub expected_source_cluster_id: Option<String>,
    pub observed_source_cluster_id: Option<String>,
    pub source_cluster_id_status: String,
    pub data_path: String,
    pub created_at: String,
    pub topic_count: usize,
    pub partition_count: usize,
    #[serde(default)]
    pub state_counts: BTreeMap<String, usize>,
    pub lag_records: i64,
    pub lag_seconds: f64,
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// Absent from servers before the field was added: the sync settings are then unknown.
    #[serde(default)]
    pub sync: Option<SyncView>,
    /// Not served yet (the discovery issue's topic policy).
    #[serde(default)]
    pub topic_include: Option<Vec<String>>,
    /// Not served yet (the discovery issue's topic policy).
    #[serde(default)]
    pub topic_exclude: Option<Vec<String>>,
    /// Which calls need a second person's approval (absent from older servers: none known).
    #[serde(default)]
    pub approval: Option<ApprovalPolicyView>,
}

/// `ApprovalPolicyDto`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ApprovalPolicyView {
    #[serde(default)]
    pub required_for: Vec<String>,
    pub expires_after_seconds: u64,
}

/// `Approval`: a request waiting for (or past) a second person's decision.
#[derive(Debug, Clone, Deserialize)]
pub struct ApprovalView {
    pub id: String,
    pub mirror: String,
    pub action: String,
    pub status: String,
    pub reason: String,
    pub requested_by: String,
    pub expires_at: String,
    #[serde(default)]
    pub decided_by: Option<String>,
    #[serde(default)]
    pub executed_operation_id: Option<String>,
}

/// `ApprovalPending`: the 202 answer of a call that waits for a second person.
#[derive(Debug, Clone, Deserialize)]
pub struct ApprovalPendingView {
    pub operation_id: String,
    pub approval: ApprovalView,
}

/// `GET /api/v1/approvals` (`ApprovalsResponse`).
#[derive(Debug, Clone, Deserialize)]
pub struct ApprovalsResponse {
    pub items: Vec<ApprovalView>,
}

/// `DecisionResponse`.
#[derive(Debug, Clone, Deserialize)]
pub struct DecisionResponse {
    pub approval: ApprovalView,
    #[serde(default)]
    pub result: Option<LifecycleResponse>,
    #[serde(default)]
    pub error: Option<TopicProblemView>,
}

/// `DrillStarted`.
#[derive(Debug, Clone, Deserialize)]
pub struct DrillStartedView {
    pub operation_id: String,
    pub status: String,
}

/// `Drill`.
#[derive(Debug, Clone, Deserialize)]
pub struct DrillView {
    pub id: String,
    pub mirror: String,
    pub status: String,
    #[serde(default)]
    pub result: Option<String>,
    pub requested_by: String,
    pub requested_at: String,
    pub canary_topic: String,
    pub steps: Vec<DrillStepView>,
    #[serde(default)]
    pub report: Option<serde_json::Value>,
}

/// `DrillStepDto`.
#[derive(Debug, Clone, Deserialize)]
pub struct DrillStepView {
    pub name: String,
    pub status: String,
    #[serde(default)]
    pub detail: Option<String>,
}

/// `GET /api/v1/mirrors/{mirror}/drills` (`DrillsResponse`).
#[derive(Debug, Clone, Deserialize)]
pub struct DrillsResponse {
    pub items: Vec<DrillView>,
}

/// `SourceBody`.
#[derive(Debug, Clone, Deserialize)]
pub struct SourceView {
    pub bootstrap_servers: String,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// `SyncSettings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncView {
    pub topic_configs: bool,
    pub group_offsets: bool,
    pub acls: bool,
    pub group_include: Vec<String>,
    pub group_exclude: Vec<String>,
}

/// `GET /api/v1/mirrors/{mirror}/partitions` (`PartitionsPage`).
#[derive(Debug, Clone, Deserialize)]
pub struct PartitionsPage {
    pub items: Vec<PartitionView>,
    #[serde(default)]
    pub next_page_token: Option<String>,
}

/// `Partition`.
#[derive(Debug, Clone, Deserialize)]
pub struct PartitionView {
    pub topic: String,
    pub partition: i32,
    pub state: String,
    pub source_last_stable_offset: Option<i64>,
    /// The next source offset to mirror: how far the destination has copied, in source offsets.
    pub mirrored_source_offset: Option<i64>,
    pub lag_records: i64,
    #[serde(default)]
    pub error: Option<PartitionErrorView>,
    pub retry_count: u32,
    #[serde(default)]
    pub next_retry_at: Option<String>,
    /// Not served yet: the server's `engine.failed_retry_max_attempts`.
    #[serde(default)]
    pub retry_max_attempts: Option<u32>,
}

/// `PartitionError`.
#[derive(Debug, Clone, Deserialize)]
pub struct PartitionErrorView {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

/// A lifecycle call's answer (`LifecycleResponse`).
#[derive(Debug, Clone, Deserialize)]
pub struct LifecycleResponse {
    pub operation_id: String,
    pub validate_only: bool,
    pub results: Vec<TopicResultView>,
    /// The pattern the call added to the mirror's topic policy.
    #[serde(default)]
    pub saved_pattern: Option<SavedPatternView>,
}

/// `SavedPatternBody`.
#[derive(Debug, Clone, Deserialize)]
pub struct SavedPatternView {
    /// `topic_include` or `topic_exclude`.
    pub list: String,
    pub pattern: String,
}

/// `TopicResult`.
#[derive(Debug, Clone, Deserialize)]
pub struct TopicResultView {
    pub topic: String,
    pub ok: bool,
    #[serde(default)]
    pub error: Option<TopicProblemView>,
    /// `validate_only` of a stop: what it would leave unmirrored.
    #[serde(default)]
    pub unmirrored: Option<UnmirroredView>,
    /// A promote: partitions whose source holds records the destination does not have.
    #[serde(default)]
    pub behind: Option<Vec<BehindView>>,
}

/// `UnmirroredResult`.
#[derive(Debug, Clone, Deserialize)]
pub struct UnmirroredView {
    pub records: i64,
    pub seconds: f64,
    pub partitions: Vec<UnmirroredPartitionView>,
}

/// `UnmirroredPartition`.
#[derive(Debug, Clone, Deserialize)]
pub struct UnmirroredPartitionView {
    pub partition: i32,
    pub state: String,
    pub records: i64,
    pub seconds: f64,
}

/// `PartitionBehindResult`.
#[derive(Debug, Clone, Deserialize)]
pub struct BehindView {
    pub partition: i32,
    pub state: String,
    #[serde(default)]
    pub lag_records: Option<i64>,
    #[serde(default)]
    pub source_last_stable_offset: Option<i64>,
    #[serde(default)]
    pub mirrored_source_offset: Option<i64>,
}

/// `TopicProblem`.
#[derive(Debug, Clone, Deserialize)]
pub struct TopicProblemView {
    #[serde(rename = "type")]
    pub problem_type: String,
    pub detail: String,
}

/// `GET /api/v1/operations/{id}` (`OperationResponse`: the `Operation` fields and `progress`).
#[derive(Debug, Clone, Deserialize)]
pub struct OperationResponse {
    pub id: String,
    pub mirror: String,
    pub kind: String,
    pub requested_by: String,
    #[serde(default)]
    pub client_address: Option<String>,
    pub requested_at: String,
    #[serde(default)]
    pub finished_at: Option<String>,
    pub outcome: String,
    pub results: Vec<TopicResultView>,
    /// Absent from servers that answered every result at once.
    #[serde(default)]
    pub result_counts: Option<ResultCountsView>,
    #[serde(default)]
    pub error: Option<TopicProblemView>,
    #[serde(default)]
    pub progress: Option<OperationProgress>,
}

/// `ResultCounts`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct ResultCountsView {
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
    pub omitted: u64,
}

/// `OperationProgress`.
#[derive(Debug, Clone, Deserialize)]
pub struct OperationProgress {
    #[serde(default)]
    pub target_state: Option<String>,
    pub done: bool,
    /// Over every page (absent from servers that answered every result at once).
    #[serde(default)]
    pub partitions_total: Option<u64>,
    #[serde(default)]
    pub partitions_done: Option<u64>,
    pub partitions: Vec<PartitionProgress>,
}

/// `PartitionProgress`.
#[derive(Debug, Clone, Deserialize)]
pub struct PartitionProgress {
    pub topic: String,
    pub partition: i32,
    pub state: String,
    pub done: bool,
    #[serde(default)]
    pub error: Option<PartitionErrorView>,
}

/// `GET /api/v1/instances` (`InstancesResponse`).
#[derive(Debug, Clone, Deserialize)]
pub struct InstancesResponse {
    pub cluster_name: String,
    pub mode: String,
    pub slots: i32,
    pub unowned_slots: Vec<i32>,
    pub instances: Vec<InstanceView>,
}

/// `Instance`.
#[derive(Debug, Clone, Deserialize)]
pub struct InstanceView {
    pub id: String,
    #[serde(default)]
    pub advertised_url: Option<String>,
    pub version: String,
    pub slots: Vec<i32>,
    pub partitions: u64,
    pub heartbeat_age_ms: u64,
    pub this: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::{self, Deserializer, Visitor};
    use serde_json::Value;

    /// The field names serde's derive gives a struct (captured from `deserialize_struct`).
    fn fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
        struct Capture<'a>(&'a mut &'static [&'static str]);
        impl<'de> Deserializer<'de> for Capture<'_> {
            type Error = de::value::Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(de::Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _name: &'static str,
                fields: &'static [&'static str],
                _visitor: V,
            ) -> Result<V::Value, Self::Error> {
                *self.0 = fields;
                Err(de::Error::custom("captured"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
                unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
            }
        }
        let mut out: &'static [&'static str] = &[];
        let _ = T::deserialize(Capture(&mut out));
        assert!(!out.is_empty(), "{} is not a plain struct", std::any::type_name::<T>());
        out
    }

    /// A schema's properties, following `allOf` (flattened responses) and `$ref`s.
    fn properties(spec: &Value, schema: &str) -> Vec<String> {
        let s = &spec["components"]["schemas"][schema];
        assert!(s.is_object(), "schema {schema} is not in openapi.json");
        let mut props = Vec::new();
        let mut parts = vec![s.clone()];
        while let Some(p) = parts.pop() {
            if let Some(r) = p["$ref"].as_str() {
                parts.push(spec["components"]["schemas"][r.trim_start_matches("#/components/schemas/")].clone());
                continue;
            }
            if let Some(all) = p["allOf"].as_array() {
                parts.extend(all.iter().cloned());
            }
            if let Some(o) = p["properties"].as_object() {
                props.extend(o.keys().cloned());
            }
        }
        props
    }

    /// Every field a client struct reads is in the API's schema of that name, except the ones
    /// listed as not served yet (and those must not be served, or the list is stale). The
    /// integration tests (tests/integration/client.rs) parse real answers of `kmirror serve`.
    #[test]
    fn client_types_match_the_openapi_document() {
        let spec: Value = serde_json::from_str(kmirror::api::openapi_json()).unwrap();
        let not_served_yet = ["Partition.retry_max_attempts"];
        let checks: Vec<(&str, &[&str])> = vec![
            ("MirrorsResponse", fields::<MirrorsResponse>()),
            ("Mirror", fields::<MirrorView>()),
            ("MirrorResponse", fields::<MirrorView>()),
            ("SourceBody", fields::<SourceView>()),
            ("SyncSettings", fields::<SyncView>()),
            ("PartitionsPage", fields::<PartitionsPage>()),
            ("Partition", fields::<PartitionView>()),
            ("PartitionError", fields::<PartitionErrorView>()),
            ("LifecycleResponse", fields::<LifecycleResponse>()),
            ("TopicResult", fields::<TopicResultView>()),
            ("SavedPatternBody", fields::<SavedPatternView>()),
            ("UnmirroredResult", fields::<UnmirroredView>()),
            ("UnmirroredPartition", fields::<UnmirroredPartitionView>()),
            ("PartitionBehindResult", fields::<BehindView>()),
            ("ResultCounts", fields::<ResultCountsView>()),
            ("TopicProblem", fields::<TopicProblemView>()),
            ("OperationResponse", fields::<OperationResponse>()),
            ("OperationProgress", fields::<OperationProgress>()),
            ("PartitionProgress", fields::<PartitionProgress>()),
            ("InstancesResponse", fields::<InstancesResponse>()),
            ("Instance", fields::<InstanceView>()),
            ("ApprovalPolicyDto", fields::<ApprovalPolicyView>()),
            ("Approval", fields::<ApprovalView>()),
            ("ApprovalPending", fields::<ApprovalPendingView>()),
            ("ApprovalsResponse", fields::<ApprovalsResponse>()),
            ("DecisionResponse", fields::<DecisionResponse>()),
            ("DrillStarted", fields::<DrillStartedView>()),
            ("Drill", fields::<DrillView>()),
            ("DrillStepDto", fields::<DrillStepView>()),
            ("DrillsResponse", fields::<DrillsResponse>()),
            ("ProblemDetails", fields::<super::super::http::Problem>()),
        ];
        for (schema, client_fields) in checks {
            let props = properties(&spec, schema);
            for f in client_fields {
                let served = props.iter().any(|p| p == f);
                if not_served_yet.contains(&format!("{schema}.{f}").as_str()) {
                    assert!(!served, "{schema}.{f} is served now: take it off the not-served-yet list");
                } else {
                    assert!(served, "the client reads {schema}.{f}, which the API does not have");
                }
            }
        }
    }

    #[test]
    fn the_field_capture_sees_every_field() {
        assert_eq!(fields::<SourceView>(), ["bootstrap_servers", "properties"]);
        assert_eq!(fields::<TopicProblemView>(), ["type", "detail"]);
    }
}
