//! `KafkaAdmin` calls about consumer groups: list, describe, committed offsets.

#![allow(unsafe_code)]

use std::collections::BTreeMap;

use rdkafka::bindings as rd;

use super::super::error::{KafkaError, KafkaResult};
use super::super::ffi::{self, AdminCall, NativeTpl, Owned};
use super::super::types::*;
use super::convert::*;
use super::*;

impl KafkaAdmin {
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

    /// DeleteGroups for one group (it must have no active members). A group that does not exist
    /// is not an error.
    pub async fn delete_group(&self, group: &str) -> KafkaResult<()> {
        const OP: &str = "DeleteGroups";
        let res = self
            .inner
            .client
            .delete_groups(&[group], &self.options())
            .await
            .map_err(|e| rdkafka_error(OP, group, e))?;
        for r in res {
            match r {
                Ok(_) => {}
                Err((_, rdkafka::types::RDKafkaErrorCode::GroupIdNotFound)) => {}
                Err((g, code)) => {
                    return Err(KafkaError::Kafka {
                        operation: OP,
                        resource: format!("group {g}"),
                        code: code_of(code),
                        message: code.to_string(),
                    });
                }
            }
        }
        Ok(())
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
