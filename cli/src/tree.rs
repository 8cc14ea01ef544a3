//! The command's whole process tree, owned the way systemd's
//! `KillMode=control-group` and `timeout(1) --kill-after` own theirs: the
//! command runs in its own process group; signals etcdlock receives go to the
//! group; what is left of the group after the command exits, after a loss, or
//! after a stop signal gets SIGTERM (or `--signal`) and, after `--grace`,
//! SIGKILL; the lock is released only once no process of the group is left.
//! On Linux etcdlock is the group's subreaper (tini does the same), so
//! grandchildren whose parent exits are reaped here and never linger as
//! zombies; on macOS (no subreaper) they are reparented to launchd, which
//! reaps them, and stay in the group, which is what is waited for.
//!
//! kill -9 of etcdlock: a small supervisor process (etcdlock itself, hidden
//! subcommand `supervise`), started before the command, holds the read end of
//! a pipe whose write end only etcdlock has. The command writes its process
//! group to the pipe between fork and exec, so the supervisor knows the group
//! before the command runs a single instruction of its own; when etcdlock
//! dies the pipe closes and the supervisor SIGKILLs the group. PR_SET_PDEATHSIG
//! alone would reach only the direct child (it is cleared on fork and fires
//! when the parent *thread* exits).

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The job: its process group (= the command's pid), the supervisor's pipe
/// and whether the terminal's foreground was handed to it.
pub struct Tree {
    pub pgid: i32,
    supervisor: Option<(std::process::Child, OwnedFd)>,
    terminal: bool,
}

/// Whether stdin is a terminal whose foreground group is ours.
fn own_terminal() -> bool {
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// What [`prepare`] set up: the terminal hand-over and the supervisor.
pub struct Prepared {
    terminal: bool,
    supervisor: Option<(std::process::Child, OwnedFd)>,
}

impl Prepared {
    /// The command did not start: let the supervisor go without a kill.
    pub fn abandon(self) {
        if let Some((child, fd)) = self.supervisor {
            finish_supervisor(child, fd);
        }
    }
}

/// Start the supervisor and prepare `cmd` to start its own process group,
/// tell the supervisor that group before exec, and (on a terminal we own)
/// take the terminal's foreground, so an interactive command does not stop
/// on SIGTTIN.
pub fn prepare(cmd: &mut tokio::process::Command) -> Prepared {
    let terminal = own_terminal();
    let supervisor = supervise();
    let report = supervisor.as_ref().map(|(_, fd)| fd.as_raw_fd());
    // SAFETY: only async-signal-safe calls (setpgid, getpid, write,
    // sigaction, tcsetpgrp) run in the child between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(fd) = report {
                // 4 bytes: one write below PIPE_BUF is atomic. The fd closes at exec.
                let pid = libc::getpid().to_le_bytes();
                libc::write(fd, pid.as_ptr() as *const libc::c_void, pid.len());
            }
            if terminal {
                set_foreground(libc::getpid());
            }
            Ok(())
        });
    }
    Prepared {
        terminal,
        supervisor,
    }
}

impl Tree {
    /// After `cmd` started as `pid`: give it the terminal too (both sides do
    /// it, as shells do, so neither order races) and become the subreaper.
    pub fn started(pid: i32, prepared: Prepared) -> Tree {
        let terminal = prepared.terminal;
        unsafe {
            // Both parent and child set the group, as shells do.
            libc::setpgid(pid, pid);
            if terminal {
                set_foreground(pid);
            }
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
        Tree {
            pgid: pid,
            supervisor: prepared.supervisor,
            terminal,
        }
    }

    /// Send `sig` to every process of the group.
    pub fn signal(&self, sig: i32) {
        unsafe { libc::kill(-self.pgid, sig) };
    }

    /// Whether any process of the group is left (reaping the zombies of
    /// those reparented to us on the way).
    pub fn alive(&self) -> bool {
        loop {
            let mut st = 0;
            let r = unsafe { libc::waitpid(-self.pgid, &mut st, libc::WNOHANG) };
            if r <= 0 {
                break;
            }
        }
        unsafe {
            libc::kill(-self.pgid, 0) == 0
                || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
        }
    }

    /// Wait until no process of the group is left: `first` (None: none) now,
    /// SIGKILL `grace` later (None: never).
    pub async fn end(&self, first: Option<i32>, grace: Option<Duration>) {
        if !self.alive() {
            return;
        }
        if let Some(sig) = first {
            self.signal(sig);
            // A stopped process cannot act on SIGTERM until continued.
            self.signal(libc::SIGCONT);
        }
        let kill_at = grace.and_then(|g| Instant::now().checked_add(g));
        let mut killed: Option<Instant> = None;
        while self.alive() {
            match killed {
                None if kill_at.is_some_and(|t| Instant::now() >= t) => {
                    self.signal(libc::SIGKILL);
                    killed = Some(Instant::now());
                }
                // SIGKILL cannot end a process in uninterruptible sleep (a hung
                // NFS read): say so rather than hold the lock forever.
                Some(at) if at.elapsed() > Duration::from_secs(10) => {
                    eprintln!("etcdlock: processes of group {} outlived SIGKILL by 10 s (uninterruptible?); releasing anyway", self.pgid);
                    return;
                }
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The group is gone: take the terminal back and let the supervisor go.
    pub fn finish(mut self) {
        if self.terminal {
            unsafe { set_foreground(libc::getpgrp()) };
        }
        if let Some((child, fd)) = self.supervisor.take() {
            finish_supervisor(child, fd);
        }
    }
}

/// tcsetpgrp with SIGTTOU ignored around it (a background group must), and
/// the old disposition restored (an ignored signal would stay ignored across
/// exec). Async-signal-safe: sigaction and tcsetpgrp only.
unsafe fn set_foreground(pgid: i32) {
    let mut old: libc::sigaction = std::mem::zeroed();
    let mut ign: libc::sigaction = std::mem::zeroed();
    ign.sa_sigaction = libc::SIG_IGN;
    libc::sigaction(libc::SIGTTOU, &ign, &mut old);
    libc::tcsetpgrp(0, pgid);
    libc::sigaction(libc::SIGTTOU, &old, std::ptr::null_mut());
}

/// One byte after the group: the job ended here; the supervisor exits
/// without a kill.
fn finish_supervisor(mut child: std::process::Child, fd: OwnedFd) {
    let _ = unsafe { libc::write(fd.as_raw_fd(), b"x".as_ptr() as *const libc::c_void, 1) };
    drop(fd);
    let _ = child.wait();
}

/// Start `etcdlock supervise` with the read end of a pipe as its stdin. The
/// write end is close-on-exec and stays in etcdlock alone (and in the
/// command until its exec), so it closes when etcdlock dies, however it dies.
fn supervise() -> Option<(std::process::Child, OwnedFd)> {
    let mut fds = [0; 2];
    if unsafe { cloexec_pipe(&mut fds) } != 0 {
        eprintln!(
            "etcdlock: cannot start the supervisor (pipe): {}",
            std::io::Error::last_os_error()
        );
        return None;
    }
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let exe = std::env::current_exe().ok()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("supervise")
        .stdin(Stdio::from(read))
        .stdout(Stdio::null());
    // Its own group: a signal to etcdlock's group (the terminal's Ctrl-C, a
    // `kill -- -PGID`) must not end the supervisor before it can act.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    match cmd.spawn() {
        Ok(child) => Some((child, write)),
        Err(e) => {
            eprintln!("etcdlock: cannot start the supervisor: {e}");
            None
        }
    }
}

/// A pipe whose both ends are close-on-exec.
#[cfg(not(target_os = "macos"))]
unsafe fn cloexec_pipe(fds: &mut [i32; 2]) -> i32 {
    libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC)
}

/// A pipe whose both ends are close-on-exec. macOS has no pipe2: the flag is
/// set right after, before etcdlock spawns anything (it spawns from one task,
/// one process at a time), so no child inherits the write end.
#[cfg(target_os = "macos")]
unsafe fn cloexec_pipe(fds: &mut [i32; 2]) -> i32 {
    if libc::pipe(fds.as_mut_ptr()) != 0 {
        return -1;
    }
    for fd in *fds {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    0
}

/// `etcdlock supervise`: read the command's group (4 bytes the command
/// writes before exec), then wait: a byte means the job ended normally; end
/// of file without one means etcdlock died: SIGKILL the job's group.
pub fn supervisor_main() -> i32 {
    unsafe {
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(s, libc::SIG_IGN);
        }
    }
    let mut stdin = std::io::stdin();
    let mut pgid = [0u8; 4];
    if read_full(&mut stdin, &mut pgid).is_err() {
        // No command ever started (or etcdlock died before it forked).
        return 0;
    }
    let pgid = i32::from_le_bytes(pgid);
    let mut b = [0u8; 1];
    if read_full(&mut stdin, &mut b).is_err() && pgid > 1 {
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    0
}

/// Fill `buf`, or fail at end of file.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
