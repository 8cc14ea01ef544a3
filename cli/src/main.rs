//! The `etcdlock` binary: the allocator, and the command line of the
//! `etcdlock_cli` library (src/lib.rs).

/// mimalloc (v2) instead of the C runtime's malloc, on every target. After a
/// burst of concurrent lock calls glibc's malloc keeps the burst's freed
/// request state on pages shared with what the holds keep; mimalloc hands a
/// page back to the OS as soon as it is free (purge delay 0, below).
/// `etcdlock bench --burst N` reports RSS per held lock;
/// docs/operations/benchmarks.md has the current figures.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc v2's `mimalloc.h` (libmimalloc-sys
/// names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() {
    // Purge free pages at once instead of 10 ms later (the burst row of
    // docs/operations/benchmarks.md measures what a burst's holds keep).
    // MIMALLOC_PURGE_DELAY in the environment still wins: set_default leaves
    // an option read from it.
    // SAFETY: sets one integer option; no pointers.
    unsafe { libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, 0) };
    etcdlock_cli::main()
}
