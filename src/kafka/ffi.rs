//! The unsafe core of the Kafka layer: owning guards for librdkafka objects, string and
//! partition-list conversion, and the admin-call driver. Everything that dereferences a librdkafka
//! pointer lives here or in `admin.rs`; no pointer leaves these two modules.
//!
//! The admin driver follows librdkafka's documented pattern: a private result queue per call
//! (`rd_kafka_queue_new`), `rd_kafka_AdminOptions_new`, the `rd_kafka_<Op>` request, then a
//! blocking `rd_kafka_queue_poll` for the single result event, whose contents are copied into owned
//! Rust values before `rd_kafka_event_destroy`. Callers run it on tokio's blocking pool.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char};
use std::time::Duration;

use rdkafka::bindings as rd;

use super::error::{KafkaCode, KafkaError, KafkaErrorKind, KafkaResult};

/// Owns a librdkafka object and destroys it with the matching `*_destroy` function on drop.
pub(super) struct Owned<T> {
    ptr: *mut T,
    destroy: unsafe extern "C" fn(*mut T),
}

impl<T> Owned<T> {
    /// Takes ownership of `ptr`; `None` when librdkafka returned NULL.
    ///
    /// # Safety
    /// `ptr` must be NULL or a valid object that the caller owns and that `destroy` frees.
    pub(super) unsafe fn new(ptr: *mut T, destroy: unsafe extern "C" fn(*mut T)) -> Option<Self> {
        if ptr.is_null() { None } else { Some(Owned { ptr, destroy }) }
    }

    pub(super) fn ptr(&self) -> *mut T {
        self.ptr
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: `new` guarantees `ptr` is a live object we own and `destroy` is its destructor;
        // drop runs once.
        unsafe { (self.destroy)(self.ptr) }
    }
}

/// A producer's handle on one topic, created with its own `compression.codec`. librdkafka keeps
/// the configuration a topic gets when the client first creates its handle (later handles and
/// `producev` by name share that one), so the data path creates this before it sends the
/// topic's first record. Dropped before the producer it belongs to (see `pipe::Destination`).
pub(crate) struct ProducerTopic {
    /// Held only to be destroyed: librdkafka's contract is one destroy per topic_new.
    _handle: Owned<rd::rd_kafka_topic_t>,
}

impl ProducerTopic {
    /// Creates `topic`'s handle in `client` with `compression.codec` = `codec`.
    pub(crate) fn with_codec<C: rdkafka::ClientContext>(
        client: &rdkafka::client::Client<C>,
        topic: &str,
        codec: &str,
    ) -> KafkaResult<ProducerTopic> {
        let name = cstring("create topic handle", topic)?;
        let value = cstring("create topic handle", codec)?;
        let mut errstr = [0 as c_char; 256];
        // SAFETY: a fresh configuration object that we own until rd_kafka_topic_new takes it.
        let conf = unsafe { rd::rd_kafka_topic_conf_new() };
        // SAFETY: `conf` is live; the strings outlive the call; `errstr` is writable for its
        // length, which is what librdkafka is told.
        let res = unsafe {
            rd::rd_kafka_topic_conf_set(
                conf,
                c"compression.codec".as_ptr(),
                value.as_ptr(),
                errstr.as_mut_ptr(),
                errstr.len(),
            )
        };
        if res != rd::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK {
            // SAFETY: `conf` was not handed over; we still own it. errstr is NUL-terminated.
            let message = unsafe {
                rd::rd_kafka_topic_conf_destroy(conf);
                string(errstr.as_ptr())
            };
            return Err(KafkaError::InvalidArgument { operation: "create topic handle", message });
        }
        // SAFETY: the client pointer is live for the borrow of `client`; rd_kafka_topic_new takes
        // ownership of `conf` whatever it returns; the returned handle is ours to destroy.
        let ptr = unsafe { rd::rd_kafka_topic_new(client.native_ptr(), name.as_ptr(), conf) };
        // SAFETY: NULL or a handle we own, destroyed with its destructor.
        unsafe { Owned::new(ptr, rd::rd_kafka_topic_destroy) }.map(|_handle| ProducerTopic { _handle }).ok_or_else(
            || KafkaError::InvalidArgument {
                operation: "create topic handle",
                message: format!("librdkafka refused topic {topic:?}"),
            },
        )
    }
}

/// Copies a C string into an owned `String` (lossy on invalid UTF-8); `None` for NULL.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string valid for the duration of the call.
pub(super) unsafe fn opt_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-NULL and NUL-terminated per this function's contract.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

/// Like [`opt_string`] but maps NULL to an empty string.
///
/// # Safety
/// As [`opt_string`].
pub(super) unsafe fn string(p: *const c_char) -> String {
    // SAFETY: forwarded contract.
    unsafe { opt_string(p) }.unwrap_or_default()
}

/// A C string for a request argument; a NUL byte inside is a clear argument error.
pub(super) fn cstring(operation: &'static str, s: &str) -> KafkaResult<CString> {
    CString::new(s)
        .map_err(|_| KafkaError::InvalidArgument { operation, message: format!("{s:?} contains a NUL byte") })
}

/// The symbolic and numeric form of a librdkafka response code.
pub(super) fn kafka_code(err: rd::rd_kafka_resp_err_t) -> KafkaCode {
    // SAFETY: rd_kafka_err2name accepts any code and returns a static string (or NULL).
    let name = unsafe { string(rd::rd_kafka_err2name(err)) };
    KafkaCode { code: err as i32, name }
}

/// The [`KafkaCode`] of an rdkafka error code: the one place rdkafka's codes become kmirror's.
pub(super) fn code_of(c: rdkafka::error::RDKafkaErrorCode) -> KafkaCode {
    let raw = c as i32;
    match rd::rd_kafka_resp_err_t::try_from(raw) {
        Ok(e) => kafka_code(e),
        Err(_) => KafkaCode { code: raw, name: format!("{c:?}") },
    }
}

/// What kmirror makes of an rdkafka error code (see [`KafkaErrorKind::of`]).
pub(super) fn kind_of(c: rdkafka::error::RDKafkaErrorCode) -> KafkaErrorKind {
    code_of(c).kind()
}

/// Turns a borrowed `rd_kafka_error_t` (NULL = success) into a `KafkaError`.
///
/// # Safety
/// `e` must be NULL or a valid error object borrowed for the duration of the call.
pub(super) unsafe fn borrowed_error(
    operation: &'static str,
    resource: &str,
    e: *const rd::rd_kafka_error_t,
) -> KafkaResult<()> {
    if e.is_null() {
        return Ok(());
    }
    // SAFETY: `e` is valid per contract; both accessors only read it.
    let (code, message) = unsafe { (rd::rd_kafka_error_code(e), string(rd::rd_kafka_error_string(e))) };
    if code == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Ok(());
    }
    Err(KafkaError::Kafka { operation, resource: resource.to_string(), code: kafka_code(code), message })
}

/// Takes ownership of an `rd_kafka_error_t` returned by a setter (NULL = success) and frees it.
///
/// # Safety
/// `e` must be NULL or an error object the caller owns.
pub(super) unsafe fn owned_error(
    operation: &'static str,
    resource: &str,
    e: *mut rd::rd_kafka_error_t,
) -> KafkaResult<()> {
    // SAFETY: caller passes ownership; the guard frees it after we read it.
    let guard = unsafe { Owned::new(e, rd::rd_kafka_error_destroy) };
    match guard {
        None => Ok(()),
        // SAFETY: the guard keeps the object alive while it is read.
        Some(g) => unsafe { borrowed_error(operation, resource, g.ptr()) },
    }
}

/// Maps a response code to `Ok` or a `KafkaError` with the given message.
pub(super) fn check_code(
    operation: &'static str,
    resource: &str,
    err: rd::rd_kafka_resp_err_t,
    message: impl FnOnce() -> String,
) -> KafkaResult<()> {
    if err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        Err(KafkaError::Kafka { operation, resource: resource.to_string(), code: kafka_code(err), message: message() })
    }
}

/// A borrowed C array `(ptr, len)` as a slice of pointers; empty for NULL.
///
/// # Safety
/// `ptr` must be NULL or point to `len` valid elements that outlive the returned slice.
pub(super) unsafe fn c_array<'a, T>(ptr: *mut *const T, len: usize) -> &'a [*const T] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: per contract.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// One element of a topic-partition list, owned.
#[derive(Debug, Clone)]
pub(super) struct TpEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: Option<i32>,
    pub metadata: Option<String>,
    pub error: rd::rd_kafka_resp_err_t,
}

/// Copies every element of a borrowed topic-partition list.
///
/// # Safety
/// `list` must be NULL or a valid list borrowed for the duration of the call.
pub(super) unsafe fn read_tpl(list: *const rd::rd_kafka_topic_partition_list_t) -> Vec<TpEntry> {
    if list.is_null() {
        return Vec::new();
    }
    // SAFETY: `list` is valid; `elems` holds `cnt` initialised elements (librdkafka invariant).
    unsafe {
        let l = &*list;
        let n = usize::try_from(l.cnt).unwrap_or(0);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let e = l.elems.add(i);
            out.push(read_tp(e));
        }
        out
    }
}

/// Copies one borrowed topic-partition element.
///
/// # Safety
/// `e` must point to a valid element.
pub(super) unsafe fn read_tp(e: *const rd::rd_kafka_topic_partition_t) -> TpEntry {
    // SAFETY: `e` is valid per contract; metadata is `metadata_size` bytes when non-NULL.
    unsafe {
        let el = &*e;
        let epoch = rd::rd_kafka_topic_partition_get_leader_epoch(e);
        let metadata = if el.metadata.is_null() || el.metadata_size == 0 {
            None
        } else {
            let bytes = std::slice::from_raw_parts(el.metadata as *const u8, el.metadata_size);
            Some(String::from_utf8_lossy(bytes).into_owned())
        };
        TpEntry {
            topic: string(el.topic),
            partition: el.partition,
            offset: el.offset,
            leader_epoch: (epoch >= 0).then_some(epoch),
            metadata,
            error: el.err,
        }
    }
}

/// An owned native topic-partition list built from Rust values.
pub(super) struct NativeTpl(Owned<rd::rd_kafka_topic_partition_list_t>);

impl NativeTpl {
    pub(super) fn new(capacity: usize) -> NativeTpl {
        let cap = i32::try_from(capacity).unwrap_or(i32::MAX);
        // SAFETY: rd_kafka_topic_partition_list_new returns a new list we own (never NULL for
        // a non-negative size); the guard destroys it.
        let owned = unsafe {
            Owned::new(rd::rd_kafka_topic_partition_list_new(cap), rd::rd_kafka_topic_partition_list_destroy)
        };
        NativeTpl(owned.expect("rd_kafka_topic_partition_list_new returned NULL (out of memory)"))
    }

    /// Appends `(topic, partition)` with an offset and an optional leader epoch.
    pub(super) fn add(
        &mut self,
        operation: &'static str,
        topic: &str,
        partition: i32,
        offset: i64,
        leader_epoch: Option<i32>,
    ) -> KafkaResult<()> {
        let t = cstring(operation, topic)?;
        // SAFETY: the list is live and owned; `t` outlives the call (librdkafka copies the
        // topic name); the returned element pointer is valid until the list is modified again.
        unsafe {
            let el = rd::rd_kafka_topic_partition_list_add(self.0.ptr(), t.as_ptr(), partition);
            (*el).offset = offset;
            if let Some(epoch) = leader_epoch {
                rd::rd_kafka_topic_partition_set_leader_epoch(el, epoch);
            }
        }
        Ok(())
    }

    pub(super) fn ptr(&self) -> *mut rd::rd_kafka_topic_partition_list_t {
        self.0.ptr()
    }
}

/// Options shared by every admin call.
pub(super) struct AdminCall {
    pub operation: &'static str,
    pub resource: String,
    pub timeout: Duration,
    pub api: rd::rd_kafka_admin_op_t,
}

/// Runs one admin request and hands the result event to `extract`.
///
/// `configure` may set extra options; `invoke` issues the request with (client, options, queue);
/// `extract` reads the result while the event is alive and must copy everything it returns.
/// Blocks the calling thread for up to `timeout` + 5 s: call it from `spawn_blocking`.
///
/// # Safety
/// `rk` must be a live client handle for the whole call; `invoke` must issue exactly one admin
/// request of the kind `api` on the queue it is given; `extract` must not keep any pointer into the
/// event after it returns.
pub(super) unsafe fn run_admin<R>(
    rk: *mut rd::rd_kafka_t,
    call: &AdminCall,
    configure: impl FnOnce(*mut rd::rd_kafka_AdminOptions_t) -> KafkaResult<()>,
    invoke: impl FnOnce(*mut rd::rd_kafka_t, *const rd::rd_kafka_AdminOptions_t, *mut rd::rd_kafka_queue_t),
    extract: impl FnOnce(*mut rd::rd_kafka_event_t) -> KafkaResult<R>,
) -> KafkaResult<R> {
    let timeout_ms = i32::try_from(call.timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: `rk` is live per contract. The queue and options are owned by guards that outlive
    // the request; librdkafka keeps its own references for the request's lifetime. The event is
    // owned by a guard and `extract` copies out of it before the guard drops.
    unsafe {
        let queue = Owned::new(rd::rd_kafka_queue_new(rk), rd::rd_kafka_queue_destroy)
            .ok_or_else(|| KafkaError::Client("rd_kafka_queue_new returned NULL".into()))?;
        let opts = Owned::new(rd::rd_kafka_AdminOptions_new(rk, call.api), rd::rd_kafka_AdminOptions_destroy)
            .ok_or_else(|| KafkaError::InvalidArgument {
                operation: call.operation,
                message: "admin options not supported for this operation".into(),
            })?;
        let mut errbuf = [0 as c_char; 512];
        let err =
            rd::rd_kafka_AdminOptions_set_request_timeout(opts.ptr(), timeout_ms, errbuf.as_mut_ptr(), errbuf.len());
        check_code(call.operation, &call.resource, err, || string(errbuf.as_ptr()))?;
        configure(opts.ptr())?;
        invoke(rk, opts.ptr(), queue.ptr());
        // librdkafka always posts exactly one result (possibly an error) once the request timeout
        // passes; the margin covers its internal scheduling.
        let wait_ms = timeout_ms.saturating_add(5_000);
        let ev = Owned::new(rd::rd_kafka_queue_poll(queue.ptr(), wait_ms), rd::rd_kafka_event_destroy).ok_or(
            KafkaError::Timeout { operation: call.operation, resource: call.resource.clone(), after: call.timeout },
        )?;
        let err = rd::rd_kafka_event_error(ev.ptr());
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            let message = string(rd::rd_kafka_event_error_string(ev.ptr()));
            if err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__TIMED_OUT {
                return Err(KafkaError::Timeout {
                    operation: call.operation,
                    resource: call.resource.clone(),
                    after: call.timeout,
                });
            }
            return Err(KafkaError::Kafka {
                operation: call.operation,
                resource: call.resource.clone(),
                code: kafka_code(err),
                message,
            });
        }
        extract(ev.ptr())
    }
}

/// One row of librdkafka's own property table (`rd_kafka_conf_properties_show`, the rows of its
/// CONFIGURATION.md): the name, which clients it is for (`C` consumer, `P` producer, `*` both)
/// and, for an alias, the property it names.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct PropertyRow {
    pub name: String,
    pub clients: String,
    pub alias_for: Option<String>,
}

/// librdkafka's property table, global and topic properties alike. Tests check kmirror's alias
/// table and its producer/consumer split against it (`kafka::client`).
#[cfg(test)]
pub(crate) fn property_table() -> Vec<PropertyRow> {
    use std::io::{Read, Seek};
    use std::os::fd::FromRawFd;
    // SAFETY: a temporary FILE that librdkafka only writes to; it is flushed, its descriptor
    // duplicated (the File owns the duplicate) and then closed, so no pointer outlives the block.
    let mut file = unsafe {
        let fp = libc::tmpfile();
        assert!(!fp.is_null(), "tmpfile");
        rd::rd_kafka_conf_properties_show(fp.cast());
        libc::fflush(fp);
        let fd = libc::dup(libc::fileno(fp));
        libc::fclose(fp);
        assert!(fd >= 0, "dup");
        std::fs::File::from_raw_fd(fd)
    };
    let mut text = String::new();
    file.rewind().expect("rewind");
    file.read_to_string(&mut text).expect("librdkafka's property table is text");
    text.lines()
        .filter_map(|line| {
            let mut cells = line.split(" | ");
            let name = cells.next()?.trim();
            let clients = cells.next()?.trim();
            if !matches!(clients, "C" | "P" | "*") {
                return None; // a header, legend or separator line
            }
            let alias_for = line.split_once("Alias for `").and_then(|(_, r)| r.split('`').next()).map(str::to_string);
            Some(PropertyRow { name: name.to_string(), clients: clients.to_string(), alias_for })
        })
        .collect()
}

/// An event librdkafka put on a client's main queue.
pub(super) enum MainEvent {
    /// A client-level error (`error_cb`): a broker refused the credentials, a connection failed.
    Error { code: KafkaCode, reason: String },
    /// A log line (`log.queue` routes librdkafka's logs to the main queue).
    Log { level: i32, facility: String, message: String },
}

/// Takes up to `max` events off `rk`'s main queue without waiting. An admin client never polls
/// that queue itself (rdkafka's admin client polls only its own result queue), so its log lines
/// and client errors (one per failed connection attempt to a broker that is down or refuses the
/// credentials) would pile up there for the client's whole life, unread.
///
/// # Safety
/// `rk` must be a live client handle for the duration of the call.
pub(super) unsafe fn drain_main_queue(rk: *mut rd::rd_kafka_t, max: usize) -> Vec<MainEvent> {
    let mut out = Vec::new();
    // SAFETY: `rk` is live (the caller's contract); the queue reference is ours to destroy.
    let Some(queue) = (unsafe { Owned::new(rd::rd_kafka_queue_get_main(rk), rd::rd_kafka_queue_destroy) }) else {
        return out;
    };
    while out.len() < max {
        // SAFETY: `queue` is a live queue; a zero timeout returns at once; the event (if any) is
        // ours and destroyed by `Owned`.
        let Some(ev) = (unsafe { Owned::new(rd::rd_kafka_queue_poll(queue.ptr(), 0), rd::rd_kafka_event_destroy) })
        else {
            break;
        };
        // SAFETY: `ev` is a live event; the strings it hands out live as long as the event and
        // are copied before it is destroyed.
        unsafe {
            match rd::rd_kafka_event_type(ev.ptr()) {
                rd::RD_KAFKA_EVENT_ERROR => out.push(MainEvent::Error {
                    code: kafka_code(rd::rd_kafka_event_error(ev.ptr())),
                    reason: string(rd::rd_kafka_event_error_string(ev.ptr())),
                }),
                rd::RD_KAFKA_EVENT_LOG => {
                    let (mut fac, mut msg, mut level): (*const c_char, *const c_char, i32) =
                        (std::ptr::null(), std::ptr::null(), 0);
                    if rd::rd_kafka_event_log(ev.ptr(), &mut fac, &mut msg, &mut level) == 0 {
                        out.push(MainEvent::Log { level, facility: string(fac), message: string(msg) });
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Caps the glibc malloc arenas at one per core (at least two) unless `MALLOC_ARENA_MAX` is set,
/// which glibc then applies itself. Call it first in `main`, before any thread exists.
///
/// glibc gives threads up to eight arenas per core, and every librdkafka client brings five or
/// more threads. A client's per-partition objects and fetch buffers are freed into whichever
/// arena its threads used, where the long-lived state of the engine (allocated meanwhile) pins
/// the pages around them: `malloc_trim` cannot return a page with one live block. An instance
/// that started 10,000 partitions under load and then closed its idle data paths held 222 MiB
/// of RSS for 41 MB in use with 16 arenas, and 161 MiB with 2 (the same run on a 2-core box).
/// A thread waits for an arena only while another thread on the same arena is inside malloc,
/// and at one arena per core few threads run at once.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let arenas = libc::c_int::try_from(malloc_arena_cap()).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a parameter of the allocator under its own lock; it has no
        // preconditions. Called before other threads exist, no thread has picked an arena yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

/// The arenas [`limit_malloc_arenas`] allows: one per core, at least two.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn malloc_arena_cap() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).max(2)
}

/// Hands the allocator's free pages back to the system, after clients were destroyed. A
/// client's per-partition objects (~1.6 KB each, one per partition of every topic it knows) are
/// freed as many small blocks spread over glibc's arenas, which keep them: without this an
/// instance that closed its idle data paths would keep the RSS of its busiest hour.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists under its locks; it has no
    // preconditions and may be called from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use std::process::Command;

    /// Set in the child processes of `malloc_arenas_are_capped_unless_the_environment_says_otherwise`.
    const CHILD: &str = "KMIRROR_TEST_ARENA_CHILD";

    /// In a child process: optionally cap the arenas, start more threads than the cap, each
    /// allocating while all are alive, then print glibc's per-arena statistics to stderr.
    #[test]
    fn arena_child() {
        let Ok(mode) = std::env::var(CHILD) else { return };
        if mode == "limited" {
            super::limit_malloc_arenas();
        }
        let threads = 4 * super::malloc_arena_cap() + 4;
        let all_alive = std::sync::Arc::new(std::sync::Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let all_alive = all_alive.clone();
                std::thread::spawn(move || {
                    let held: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 4096]).collect();
                    all_alive.wait();
                    held.len()
                })
            })
            .collect();
        for h in handles {
            h.join().expect("allocating thread");
        }
        // SAFETY: malloc_stats only reads the allocator's statistics under its locks and writes
        // them to stderr; it has no preconditions.
        unsafe { libc::malloc_stats() };
    }

    /// How many arenas a child run of `arena_child` reports.
    fn arenas_of_child(mode: &str, arena_max: Option<&str>) -> usize {
        let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
        cmd.args(["kafka::ffi::tests::arena_child", "--exact", "--test-threads=1", "--nocapture"])
            .env(CHILD, mode)
            .env_remove("MALLOC_ARENA_MAX");
        if let Some(v) = arena_max {
            cmd.env("MALLOC_ARENA_MAX", v);
        }
        let out = cmd.output().expect("run the test binary");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child {mode}: {}\n{stderr}", out.status);
        stderr.lines().filter(|l| l.starts_with("Arena ")).count()
    }

    #[test]
    fn malloc_arenas_are_capped_unless_the_environment_says_otherwise() {
        if std::env::var_os(CHILD).is_some() {
            return;
        }
        let cap = super::malloc_arena_cap();
        let glibc_default = arenas_of_child("default", None);
        assert!(
            glibc_default > cap,
            "without the cap the threads spread over {glibc_default} arenas, not more than {cap}: the child proves nothing"
        );
        let capped = arenas_of_child("limited", None);
        assert!((1..=cap).contains(&capped), "{capped} arenas with the cap of {cap}");
        assert_eq!(arenas_of_child("limited", Some("1")), 1, "MALLOC_ARENA_MAX set by the operator wins");
    }
}
