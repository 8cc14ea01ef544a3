//! Deadlocks among clients (etcdlock_deadlocks): the cycles of clients
//! waiting on each other's holds, from one read of a prefix (core's
//! `Client::deadlocks`), as a handle of plain C records.

use std::ffi::{c_char, c_int, CStr, CString};

use crate::*;

/// A client in a cycle, from its key. Strings point into the etcdlock_cycles
/// and live until etcdlock_cycles_free.
#[repr(C)]
pub struct etcdlock_party {
    /// Its session's lease: the client.
    pub lease_id: i64,
    /// "host:pid" for etcdlock keys, NULL for etcdctl and Go keys.
    pub owner: *const c_char,
    /// Its host (etcdlock keys), NULL if unknown.
    pub host: *const c_char,
    /// Its process id (etcdlock keys), -1 if unknown.
    pub pid: i64,
    /// The language its client uses etcdlock from ("c", "python", "java",
    /// ...), NULL if unknown.
    pub language: *const c_char,
}

/// One wait of a cycle: waiter waits in name for holder. Strings point into
/// the etcdlock_cycles and live until etcdlock_cycles_free.
#[repr(C)]
pub struct etcdlock_wait_edge {
    /// The waiting client.
    pub waiter: etcdlock_party,
    /// The lock name it waits for.
    pub name: *const c_char,
    /// Its queued key (with the namespace).
    pub waiter_key: *const c_char,
    /// Its key's create_revision: when its wait reached etcd.
    pub waiter_revision: i64,
    /// The client holding name that it waits for.
    pub holder: etcdlock_party,
    /// The holder's key (with the namespace).
    pub holder_key: *const c_char,
    /// The holder's fencing token (its key's create_revision).
    pub fencing_token: i64,
}

/// One cycle: its waits, and its one-line description.
struct Cycle {
    edges: Vec<etcdlock_wait_edge>,
    text: CString,
}

/// The deadlocks under a prefix, as one read saw them (etcdlock_deadlocks):
/// cycles of waits, each edge's holder being the next edge's waiter and the
/// last edge's holder the first edge's waiter. Free with etcdlock_cycles_free.
pub struct etcdlock_cycles {
    cycles: Vec<Cycle>,
    revision: i64,
    clients: usize,
    waits: usize,
    _strings: Vec<CString>,
}

/// A C string of text (a NUL inside it written as `\0`).
fn c_text(s: String) -> CString {
    CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

/// The party's C record; its strings go to `strings` (their heap buffers do
/// not move when the CStrings move into the vector).
fn party(p: etcdlock_core::records::Party, strings: &mut Vec<CString>) -> etcdlock_party {
    let mut keep = |s: Option<String>| match s.map(c_text) {
        Some(c) => {
            let ptr = c.as_ptr();
            strings.push(c);
            ptr
        }
        None => std::ptr::null(),
    };
    etcdlock_party {
        lease_id: p.lease_id,
        owner: keep(p.owner),
        host: keep(p.host),
        pid: p.pid.map_or(-1, i64::from),
        language: keep(p.language),
    }
}

fn cycles_of(d: etcdlock_core::records::Deadlocks) -> etcdlock_cycles {
    let mut strings = Vec::new();
    let mut cycles = Vec::new();
    for c in d.cycles {
        let text = c_text(c.describe());
        let mut edges = Vec::new();
        for e in c.edges {
            let (name, wk, hk) = (c_text(e.name), c_text(e.waiter_key), c_text(e.holder_key));
            edges.push(etcdlock_wait_edge {
                waiter: party(e.waiter, &mut strings),
                name: name.as_ptr(),
                waiter_key: wk.as_ptr(),
                waiter_revision: e.waiter_revision,
                holder: party(e.holder, &mut strings),
                holder_key: hk.as_ptr(),
                fencing_token: e.fencing_token,
            });
            strings.extend([name, wk, hk]);
        }
        cycles.push(Cycle { edges, text });
    }
    etcdlock_cycles {
        cycles,
        revision: d.revision,
        clients: d.clients,
        waits: d.waits,
        _strings: strings,
    }
}

/// Find the clients under prefix that wait on each other ("" for all of the
/// client's namespace), from one read of the keys and their owner records,
/// whatever language each client uses: a client waits for the clients
/// holding the names its queued keys wait on (a semaphore permit for any one
/// of them), and a cycle of such waits is a deadlock: none of them is served
/// until one gives up. *cycles is a new handle (free with
/// etcdlock_cycles_free), empty when there is none: what `etcdlock
/// deadlocks` shows. Two threads of one client waiting on each other are not
/// visible in etcd and are not reported. See also detect_deadlock in
/// etcdlock_acquire_options, which fails the wait that would close a cycle.
///
/// Safety: client is live; prefix is NUL-terminated; cycles is writable.
///
/// Example:
///
///     etcdlock_cycles *d = NULL;
///     if (etcdlock_deadlocks(c, "", &d) == ETCDLOCK_OK)
///         for (size_t i = 0; i < etcdlock_cycles_len(d); i++)
///             printf("deadlock: %s\n", etcdlock_cycles_describe(d, i));
///     etcdlock_cycles_free(d);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_deadlocks(
    client: *const etcdlock_client,
    prefix: *const c_char,
    cycles: *mut *mut etcdlock_cycles,
) -> c_int {
    ffi(|| {
        let out = out_arg(cycles, "cycles (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        if prefix.is_null() {
            return Err(invalid("prefix is NULL"));
        }
        let prefix = CStr::from_ptr(prefix)
            .to_str()
            .map_err(|_| invalid("prefix is not UTF-8"))?
            .to_string();
        let d = block_on(async move { c.deadlocks(&prefix).await })?;
        *out = Box::into_raw(Box::new(cycles_of(d)));
        Ok(())
    })
}

/// Number of cycles found (0 for NULL).
///
/// Safety: cycles is NULL or a live handle.
///
/// Example: if (etcdlock_cycles_len(d) > 0) puts("deadlock");
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cycles_len(cycles: *const etcdlock_cycles) -> usize {
    cycles.as_ref().map_or(0, |d| d.cycles.len())
}

/// Number of waits (edges) in the index-th cycle; 0 when index is out of
/// range or cycles is NULL.
///
/// Safety: cycles is NULL or a live handle.
///
/// Example: size_t n = etcdlock_cycles_edge_count(d, 0);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cycles_edge_count(
    cycles: *const etcdlock_cycles,
    index: usize,
) -> usize {
    cycles
        .as_ref()
        .and_then(|d| d.cycles.get(index))
        .map_or(0, |c| c.edges.len())
}

/// The edge-th wait of the index-th cycle, in order around the cycle (its
/// holder is the next wait's waiter, the last one's holder the first one's
/// waiter), or NULL when either index is out of range. Valid until
/// etcdlock_cycles_free.
///
/// Safety: cycles is NULL or a live handle.
///
/// Example:
///
///     const etcdlock_wait_edge *e = etcdlock_cycles_edge(d, 0, 0);
///     printf("%s waits for %s held by %s\n", e->waiter.owner, e->name, e->holder.owner);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cycles_edge(
    cycles: *const etcdlock_cycles,
    index: usize,
    edge: usize,
) -> *const etcdlock_wait_edge {
    cycles
        .as_ref()
        .and_then(|d| d.cycles.get(index))
        .and_then(|c| c.edges.get(edge))
        .map_or(std::ptr::null(), |e| e as *const _)
}

/// The index-th cycle in one line, as `etcdlock deadlocks` prints it:
/// `host:pid (language, lease 1a2b) waits for "y" held by ...; ...`. NULL
/// when index is out of range. Valid until etcdlock_cycles_free.
///
/// Safety: cycles is NULL or a live handle.
///
/// Example: fprintf(stderr, "%s\n", etcdlock_cycles_describe(d, 0));
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cycles_describe(
    cycles: *const etcdlock_cycles,
    index: usize,
) -> *const c_char {
    cycles
        .as_ref()
        .and_then(|d| d.cycles.get(index))
        .map_or(std::ptr::null(), |c| c.text.as_ptr())
}

/// The store revision of the read (0 for NULL).
///
/// Safety: cycles is NULL or a live handle.
///
/// Example: int64_t rev = etcdlock_cycles_revision(d);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cycles_revision(cycles: *const etcdlock_cycles) -> i64 {
    cycles.as_ref().map_or(0, |d| d.revision)
}

/// Number of clients with a key under the prefix (0 for NULL).
///
/// Safety: cycles is NULL or a live handle.
///
/// Example: printf("%zu clients\n", etcdlock_cycles_clients(d));
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cycles_clients(cycles: *const etcdlock_cycles) -> usize {
    cycles.as_ref().map_or(0, |d| d.clients)
}

/// Number of queued keys under the prefix that wait (0 for NULL).
///
/// Safety: cycles is NULL or a live handle.
///
/// Example: printf("%zu waits\n", etcdlock_cycles_waits(d));
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cycles_waits(cycles: *const etcdlock_cycles) -> usize {
    cycles.as_ref().map_or(0, |d| d.waits)
}

/// Free a handle from etcdlock_deadlocks. NULL is a no-op.
///
/// Safety: cycles is NULL or a live handle not yet freed.
///
/// Example: etcdlock_cycles_free(d);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cycles_free(cycles: *mut etcdlock_cycles) {
    if !cycles.is_null() {
        ffi_void(|| drop(Box::from_raw(cycles)));
    }
}
