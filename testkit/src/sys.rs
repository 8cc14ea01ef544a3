//! The process controls the harness needs, per OS: stop (SIGSTOP) and
//! continue (SIGCONT) a process, ask it to exit (SIGTERM), wait until it is
//! stopped. Linux is where every suite runs; macOS has the same signals (no
//! /proc: `ps` tells a stopped process); Windows suspends and resumes every
//! thread of the process (ntdll's NtSuspendProcess / NtResumeProcess) and
//! has no SIGTERM. The macOS and Windows halves run on CI's native runners
//! only (.github/workflows/ci.yml); here they are only compiled (cargo check
//! --target).

#[cfg(unix)]
pub(crate) fn stop(pid: u32) {
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
}

#[cfg(unix)]
pub(crate) fn cont(pid: u32) {
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
}

/// SIGTERM; false where there is none (the caller then kills).
#[cfg(unix)]
pub(crate) fn terminate(pid: u32) -> bool {
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    true
}

/// Wait (up to 1 s) until every thread of `pid` is stopped: /proc/PID/task/*/stat
/// shows state `T`.
#[cfg(target_os = "linux")]
pub(crate) fn await_stopped(pid: u32) {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(1);
    let stopped = || -> bool {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return true;
        };
        tasks.flatten().all(|t| {
            std::fs::read_to_string(t.path().join("stat"))
                .map(|st| {
                    st.rsplit_once(')')
                        .map(|(_, rest)| rest.trim_start().starts_with('T'))
                        .unwrap_or(true)
                })
                .unwrap_or(true)
        })
    };
    while !stopped() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Wait (up to 1 s) until `ps` reports `pid` stopped (state T).
#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) fn await_stopped(pid: u32) {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        let state = std::process::Command::new("ps")
            .args(["-o", "stat=", "-p", &pid.to_string()])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        if state.is_empty() || state.starts_with('T') {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(windows)]
mod win {
    pub type Handle = *mut core::ffi::c_void;
    #[link(name = "kernel32")]
    extern "system" {
        pub fn OpenProcess(access: u32, inherit: i32, pid: u32) -> Handle;
        pub fn CloseHandle(h: Handle) -> i32;
    }
    #[link(name = "ntdll")]
    extern "system" {
        pub fn NtSuspendProcess(h: Handle) -> i32;
        pub fn NtResumeProcess(h: Handle) -> i32;
    }
    pub const PROCESS_SUSPEND_RESUME: u32 = 0x0800;
    pub fn with(pid: u32, f: unsafe extern "system" fn(Handle) -> i32) {
        // SAFETY: a handle opened here, used once, closed here.
        unsafe {
            let h = OpenProcess(PROCESS_SUSPEND_RESUME, 0, pid);
            if !h.is_null() {
                f(h);
                CloseHandle(h);
            }
        }
    }
}

#[cfg(windows)]
pub(crate) fn stop(pid: u32) {
    win::with(pid, win::NtSuspendProcess);
}

#[cfg(windows)]
pub(crate) fn cont(pid: u32) {
    win::with(pid, win::NtResumeProcess);
}

#[cfg(windows)]
pub(crate) fn terminate(_pid: u32) -> bool {
    false
}

/// NtSuspendProcess returns once every thread is suspended.
#[cfg(windows)]
pub(crate) fn await_stopped(_pid: u32) {}
