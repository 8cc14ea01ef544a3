//! The `etcdlock` binary: the allocator, and the command line of the
//! `etcdlock_cli` library (src/lib.rs).

/// Linux: jemalloc instead of glibc's (or musl's) malloc, with a background thread that hands
/// freed pages back to the OS within about a second (`dirty_decay_ms:1000`,
/// no lazily-freed "muzzy" stage that RSS would still count): after a burst of
/// concurrent lock calls glibc's malloc keeps the burst's freed request state
/// on pages shared with what the holds keep (`etcdlock bench --burst N`
/// reports RSS per held lock; docs/operations/benchmarks.md has the current figures).
#[cfg(target_os = "linux")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options (its `const char *malloc_conf`), read when it starts.
#[cfg(target_os = "linux")]
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: ConfPtr =
    ConfPtr(c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

/// A C string pointer jemalloc reads once; never written.
#[cfg(target_os = "linux")]
#[repr(transparent)]
pub struct ConfPtr(*const std::ffi::c_char);
// SAFETY: points at an immutable static byte string.
#[cfg(target_os = "linux")]
unsafe impl Sync for ConfPtr {}

fn main() {
    etcdlock_cli::main()
}
