//! Windows: the command's whole process tree is a Job Object, the promise the
//! process group and supervisor keep on Unix (tree.rs). The command starts
//! suspended, joins the job before it runs an instruction of its own, and
//! every process it starts joins the job too. The job is made with
//! `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE` and only etcdlock holds its handle
//! (not inheritable), so when etcdlock dies, however it dies, Windows
//! terminates every process left in the job: no process of the job outlives
//! etcdlock. The lock is released only once the job has no process left.
//!
//! Windows has no signals. Ctrl-C, Ctrl-Break and closing the console reach
//! every process attached to the console, the job's included (the command
//! shares etcdlock's console); `--grace` after such an event the job is
//! terminated. After the command exits and after a loss, what is left of the
//! job is terminated at once (`--signal` names no Windows event; no grace
//! applies).

use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{CloseHandle, FALSE, HANDLE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicAccountingInformation,
    JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject,
    TerminateJobObject, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    OpenProcess, OpenThread, ResumeThread, TerminateProcess, CREATE_SUSPENDED, PROCESS_SET_QUOTA,
    PROCESS_TERMINATE, THREAD_SUSPEND_RESUME,
};

use crate::run::sig;

/// The exit code of processes the job's end terminates (128 + SIGKILL, as a
/// killed process reports on Unix).
const KILLED: u32 = 137;

/// An owned kernel handle, closed on drop.
struct Handle(HANDLE);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: a handle we opened and close once.
        unsafe { CloseHandle(self.0) };
    }
}

// SAFETY: a kernel handle may be used from any thread.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

/// The job that will hold the command, its process tree and nothing else.
pub struct Tree {
    pub pgid: i32,
    job: Option<Handle>,
}

/// What [`prepare`] set up: the job (None if Windows refused one: then the
/// command does not run).
pub struct Prepared {
    job: Option<Handle>,
}

impl Prepared {
    /// The command did not start: close the (empty) job.
    pub fn abandon(self) {}
}

/// A job that kills what is left in it when its last handle closes.
fn new_job() -> std::io::Result<Handle> {
    // SAFETY: no name, default (non-inheritable) security.
    let h = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if h.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    let job = Handle(h);
    // SAFETY: a zeroed plain-data struct, then the one flag we set.
    let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    // SAFETY: the struct and its size match the information class.
    let ok = unsafe {
        SetInformationJobObject(
            job.0,
            JobObjectExtendedLimitInformation,
            &info as *const _ as *const std::ffi::c_void,
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        )
    };
    if ok == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(job)
}

/// Make the job and have `cmd` start suspended, so it joins the job before
/// it runs.
pub fn prepare(cmd: &mut tokio::process::Command) -> Prepared {
    let job = match new_job() {
        Ok(j) => Some(j),
        Err(e) => {
            eprintln!("etcdlock: cannot create a job object for the command: {e}");
            None
        }
    };
    cmd.creation_flags(CREATE_SUSPENDED);
    Prepared { job }
}

/// Resume every thread of process `pid` (a process made suspended has one).
fn resume(pid: u32) -> std::io::Result<()> {
    // SAFETY: a snapshot of all threads; closed by Handle.
    let snap = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snap.is_null() || snap as isize == -1 {
        return Err(std::io::Error::last_os_error());
    }
    let snap = Handle(snap);
    // SAFETY: plain data; dwSize set as the API requires.
    let mut te: THREADENTRY32 = unsafe { std::mem::zeroed() };
    te.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    // SAFETY: te is ours and sized.
    let mut more = unsafe { Thread32First(snap.0, &mut te) } != 0;
    while more {
        if te.th32OwnerProcessID == pid {
            // SAFETY: a thread id from the snapshot; the handle is closed by Handle.
            let t = unsafe { OpenThread(THREAD_SUSPEND_RESUME, FALSE, te.th32ThreadID) };
            if !t.is_null() {
                let t = Handle(t);
                // SAFETY: a thread handle with THREAD_SUSPEND_RESUME.
                if unsafe { ResumeThread(t.0) } != u32::MAX {
                    resumed += 1;
                }
            }
        }
        // SAFETY: as above.
        more = unsafe { Thread32Next(snap.0, &mut te) } != 0;
    }
    if resumed == 0 {
        return Err(std::io::Error::other("no thread of the command to resume"));
    }
    Ok(())
}

/// Put the suspended process `pid` into `job` and let it run.
fn adopt(job: &Handle, pid: u32) -> std::io::Result<()> {
    // SAFETY: a process we just created; the handle is closed by Handle.
    let p = unsafe { OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, FALSE, pid) };
    if p.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    let p = Handle(p);
    // SAFETY: both handles are valid.
    if unsafe { AssignProcessToJobObject(job.0, p.0) } == 0 {
        let e = std::io::Error::last_os_error();
        // It never ran: end it rather than let it run outside the job.
        // SAFETY: a process handle with PROCESS_TERMINATE.
        unsafe { TerminateProcess(p.0, 1) };
        return Err(e);
    }
    resume(pid)
}

impl Tree {
    /// After `cmd` started (suspended) as `pid`: put it into the job and let
    /// it run. If that fails the command is ended before it runs; the
    /// caller then sees it exit.
    pub fn started(pid: i32, prepared: Prepared) -> Tree {
        let job = match prepared.job {
            Some(job) => match adopt(&job, pid as u32) {
                Ok(()) => Some(job),
                Err(e) => {
                    eprintln!("etcdlock: cannot run the command in a job object: {e}");
                    drop(job);
                    None
                }
            },
            None => None,
        };
        if job.is_none() {
            // Not run outside a job: no promise could be kept for its children.
            // SAFETY: as in adopt.
            let p = unsafe { OpenProcess(PROCESS_TERMINATE, FALSE, pid as u32) };
            if !p.is_null() {
                let p = Handle(p);
                // SAFETY: a process handle with PROCESS_TERMINATE.
                unsafe { TerminateProcess(p.0, 1) };
            }
        }
        Tree { pgid: pid, job }
    }

    /// KILL terminates every process of the job. Other stop events need no
    /// forwarding: the console delivered them to the job's processes itself.
    pub fn signal(&self, sig: i32) {
        if sig == sig::KILL {
            if let Some(job) = &self.job {
                // SAFETY: our job handle.
                unsafe { TerminateJobObject(job.0, KILLED) };
            }
        }
    }

    /// Whether any process of the job is left.
    pub fn alive(&self) -> bool {
        let Some(job) = &self.job else { return false };
        // SAFETY: plain data of the size the information class takes.
        let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        let ok = unsafe {
            QueryInformationJobObject(
                job.0,
                JobObjectBasicAccountingInformation,
                &mut info as *mut _ as *mut std::ffi::c_void,
                std::mem::size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            )
        };
        // Unknown counts as alive: the job is terminated then waited for.
        ok == 0 || info.ActiveProcesses > 0
    }

    /// Wait until no process of the job is left. With `first` (any signal)
    /// what is left is terminated at once; with None, it is terminated
    /// `grace` later (None: never).
    pub async fn end(&self, first: Option<i32>, grace: Option<Duration>) {
        if !self.alive() {
            return;
        }
        let mut kill_at = grace.and_then(|g| Instant::now().checked_add(g));
        if first.is_some() {
            kill_at = Some(Instant::now());
        }
        let mut killed: Option<Instant> = None;
        while self.alive() {
            match killed {
                None if kill_at.is_some_and(|t| Instant::now() >= t) => {
                    self.signal(sig::KILL);
                    killed = Some(Instant::now());
                }
                Some(at) if at.elapsed() > Duration::from_secs(10) => {
                    eprintln!("etcdlock: processes of the job of {} outlived its termination by 10 s; releasing anyway", self.pgid);
                    return;
                }
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The job is empty: close it.
    pub fn finish(self) {}
}

/// `etcdlock supervise`: on Windows the job object does the supervisor's
/// work, so there is nothing to do.
pub fn supervisor_main() -> i32 {
    0
}
