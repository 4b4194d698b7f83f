//! `KafkaAdmin` calls about ACLs: create, describe, delete.

#![allow(unsafe_code)]

use rdkafka::bindings as rd;

use super::super::error::KafkaResult;
use super::super::ffi::{self, AdminCall};
use super::super::types::*;
use super::convert::*;
use super::*;

impl KafkaAdmin {
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
                            let what = bindings.get(i).map(ToString::to_string).unwrap_or_default();
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
                resource: filter.to_string(),
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
}
