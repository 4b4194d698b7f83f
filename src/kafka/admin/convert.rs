//! Conversions between kmirror's Kafka types (`types.rs`) and librdkafka's enums and objects.

#![allow(unsafe_code)]

use rdkafka::bindings as rd;

use super::super::error::{KafkaError, KafkaResult};
use super::super::ffi::{self, Owned};
use super::super::types::*;

pub(super) fn to_rd_resource(t: ResourceType) -> rd::rd_kafka_ResourceType_t {
    use rd::rd_kafka_ResourceType_t::*;
    match t {
        ResourceType::Any => RD_KAFKA_RESOURCE_ANY,
        ResourceType::Topic => RD_KAFKA_RESOURCE_TOPIC,
        ResourceType::Group => RD_KAFKA_RESOURCE_GROUP,
        ResourceType::Cluster => RD_KAFKA_RESOURCE_BROKER,
        ResourceType::TransactionalId => RD_KAFKA_RESOURCE_TRANSACTIONAL_ID,
    }
}

pub(super) fn from_rd_resource(t: rd::rd_kafka_ResourceType_t) -> ResourceType {
    use rd::rd_kafka_ResourceType_t::*;
    match t {
        RD_KAFKA_RESOURCE_TOPIC => ResourceType::Topic,
        RD_KAFKA_RESOURCE_GROUP => ResourceType::Group,
        RD_KAFKA_RESOURCE_BROKER => ResourceType::Cluster,
        RD_KAFKA_RESOURCE_TRANSACTIONAL_ID => ResourceType::TransactionalId,
        _ => ResourceType::Any,
    }
}

pub(super) fn to_rd_pattern(p: PatternType) -> rd::rd_kafka_ResourcePatternType_t {
    use rd::rd_kafka_ResourcePatternType_t::*;
    match p {
        PatternType::Any => RD_KAFKA_RESOURCE_PATTERN_ANY,
        PatternType::Match => RD_KAFKA_RESOURCE_PATTERN_MATCH,
        PatternType::Literal => RD_KAFKA_RESOURCE_PATTERN_LITERAL,
        PatternType::Prefixed => RD_KAFKA_RESOURCE_PATTERN_PREFIXED,
    }
}

pub(super) fn from_rd_pattern(p: rd::rd_kafka_ResourcePatternType_t) -> PatternType {
    use rd::rd_kafka_ResourcePatternType_t::*;
    match p {
        RD_KAFKA_RESOURCE_PATTERN_LITERAL => PatternType::Literal,
        RD_KAFKA_RESOURCE_PATTERN_PREFIXED => PatternType::Prefixed,
        RD_KAFKA_RESOURCE_PATTERN_MATCH => PatternType::Match,
        _ => PatternType::Any,
    }
}

pub(super) fn to_rd_operation(o: AclOperation) -> rd::rd_kafka_AclOperation_t {
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

pub(super) fn from_rd_operation(o: rd::rd_kafka_AclOperation_t) -> AclOperation {
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

pub(super) fn to_rd_permission(p: AclPermission) -> rd::rd_kafka_AclPermissionType_t {
    use rd::rd_kafka_AclPermissionType_t::*;
    match p {
        AclPermission::Any => RD_KAFKA_ACL_PERMISSION_TYPE_ANY,
        AclPermission::Deny => RD_KAFKA_ACL_PERMISSION_TYPE_DENY,
        AclPermission::Allow => RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
    }
}

pub(super) fn from_rd_permission(p: rd::rd_kafka_AclPermissionType_t) -> AclPermission {
    use rd::rd_kafka_AclPermissionType_t::*;
    match p {
        RD_KAFKA_ACL_PERMISSION_TYPE_DENY => AclPermission::Deny,
        RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW => AclPermission::Allow,
        _ => AclPermission::Any,
    }
}

pub(super) fn from_rd_group_state(s: rd::rd_kafka_consumer_group_state_t) -> GroupState {
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

pub(super) fn from_rd_group_type(t: rd::rd_kafka_consumer_group_type_t) -> GroupType {
    use rd::rd_kafka_consumer_group_type_t::*;
    match t {
        RD_KAFKA_CONSUMER_GROUP_TYPE_CONSUMER => GroupType::Consumer,
        RD_KAFKA_CONSUMER_GROUP_TYPE_CLASSIC => GroupType::Classic,
        _ => GroupType::Unknown,
    }
}

pub(super) fn from_rd_config_source(s: &rdkafka::admin::ConfigSource) -> ConfigSource {
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
pub(super) unsafe fn read_node(n: *const rd::rd_kafka_Node_t) -> Option<Node> {
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
pub(super) unsafe fn read_acl(a: *const rd::rd_kafka_AclBinding_t) -> AclBinding {
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
pub(super) fn new_acl(
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
