//! `KafkaAdmin` calls about topics: describe, list, offsets, configs, create, delete, partitions, records.

#![allow(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::admin::{NewPartitions, NewTopic, OwnedResourceSpecifier, ResourceSpecifier, TopicReplication};
use rdkafka::bindings as rd;

use super::super::error::{KafkaError, KafkaResult};
use super::super::ffi::{self, AdminCall, NativeTpl, Owned};
use super::super::types::*;
use super::convert::*;
use super::*;

/// Partitions per ListOffsets call (see [`KafkaAdmin::list_offsets`]).
const LIST_OFFSETS_CHUNK: usize = 500;

impl KafkaAdmin {
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
                if e.is(crate::kafka::KafkaErrorKind::UnsupportedFeature)
                    || e.is(crate::kafka::KafkaErrorKind::UnsupportedVersion)
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
        let backoff = crate::domain::Backoff::ADMIN_REQUEST;
        let mut attempt = 0;
        let deadline = std::time::Instant::now() + self.inner.timeout.min(Duration::from_secs(10));
        loop {
            match self.list_offsets_once(requests, isolation).await {
                Err(e)
                    if matches!(e, KafkaError::Kafka { .. })
                        && e.is_retryable()
                        && std::time::Instant::now() + backoff.ceiling(attempt) < deadline =>
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
                    tokio::time::sleep(backoff.ceiling(attempt)).await;
                    attempt += 1;
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
}

fn describe_partitions<'a>(it: impl Iterator<Item = (&'a str, i32)>) -> String {
    let v: Vec<String> = it.take(8).map(|(t, p)| format!("{t}-{p}")).collect();
    v.join(",")
}
