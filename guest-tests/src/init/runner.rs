//! Runs the planned binaries one after the other and writes the top-level
//! KTAP document.
//!
//! Each binary runs in its own process group with stdin from `/dev/null`
//! and stdout/stderr on pipes. Its output is forwarded live, line by line
//! (the host must see progress before a crash), through [`super::lines`].
//! At the deadline the whole group gets SIGKILL. When the binary itself has
//! exited, leftovers of its group get SIGKILL too, so the next binary starts
//! in a clean guest. A binary that outlives its SIGKILL by [`KILL_GRACE`]
//! (stuck in the kernel: D state) is reported with what `/proc` says
//! ([`super::stuck`]), left behind and never waited for again; the plan
//! goes on with the next binary.
//!
//! Works as any process, not only PID 1: it waits only for the children it
//! started, unless [`Options::reap_orphans`] is set.

use super::lines::{self, Admit, Budget, LineSplitter, Mode, RawLine, MAX_LINE_BYTES};
use super::report::{self, Ending, Verdict};
use super::stuck::Stuck;
use crate::ktap::sanitize_name;
use crate::plan::{PlannedTest, RunPlan, BIN_DIR, ITERATION_MARK, KMSG_MARKER};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a binary killed at its deadline gets to die. SIGKILL ends a
/// process at its next return to user space, so a healthy one is gone in
/// milliseconds (even under TCG); one still there after seconds is stuck in
/// the kernel (uninterruptible sleep, a CPU spinning with preemption off)
/// and may never die: waiting longer only costs the rest of the plan.
pub const KILL_GRACE: Duration = Duration::from_secs(5);

/// How the runner behaves beyond what the plan says.
#[derive(Debug, Clone)]
pub struct Options {
    /// `PATH` of every binary (the plan's `env` may override it).
    pub path_env: String,
    /// After each binary, reap every exited child (`waitpid(-1)`): PID 1
    /// adopts orphans and must reap them. Never set this in a process that
    /// has other children (such as a test harness).
    pub reap_orphans: bool,
    /// How long pipes may stay open after the binary exited (a leftover
    /// process holding them) before its group is killed.
    pub leak_timeout: Duration,
    /// How long to wait for a killed binary to die ([`KILL_GRACE`]).
    pub kill_timeout: Duration,
    /// The signal the group gets at the deadline: `SIGKILL`. Host tests use
    /// 0 (which sends nothing) to play a task that SIGKILL does not end.
    pub kill_signal: libc::c_int,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            path_env: BIN_DIR.to_string(),
            reap_orphans: false,
            leak_timeout: Duration::from_millis(500),
            kill_timeout: KILL_GRACE,
            kill_signal: libc::SIGKILL,
        }
    }
}

/// What one planned binary did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRun {
    /// The planned name.
    pub name: String,
    /// How it ended.
    pub ending: Ending,
    /// Whether its stdout was a KTAP document.
    pub ktap: bool,
    /// Output bytes dropped over `max_output_bytes`.
    pub dropped_bytes: u64,
    /// Still alive [`Options::kill_timeout`] after its SIGKILL: left behind.
    pub stuck: Option<Stuck>,
}

/// Writes the top-level KTAP document for `plan` to `results` (header, one
/// subtest per binary, totals) and `harness: begin/end` markers to `kmsg`
/// (one `write` per record, errors ignored: logging is best effort).
/// Returns an error only if `results` fails.
pub fn run_plan(
    plan: &RunPlan,
    opts: &Options,
    results: &mut dyn Write,
    kmsg: &mut dyn Write,
) -> io::Result<Vec<TestRun>> {
    emit(results, "KTAP version 1")?;
    let shells = usize::from(plan.shell.is_some());
    let (once, repeated, iterations, until_fail) = match plan.repeat {
        Some(r) => {
            let first = r.first.min(plan.tests.len());
            let (once, rest) = plan.tests.split_at(first);
            (once, rest, r.iterations.max(1) as usize, r.until_fail)
        }
        None => (&[][..], &plan.tests[..], 1, false),
    };
    // The plan line counts every iteration; an until-fail run that stops
    // early reports fewer (the host knows why from the iteration marks).
    let planned = once.len() + repeated.len() * iterations + shells;
    emit(results, &format!("1..{planned}"))?;
    let mut runs = Vec::new();
    for test in once {
        runs.push(run_test(runs.len() + 1, test, opts, results, kmsg)?);
    }
    for k in 1..=iterations {
        if plan.repeat.is_some() {
            emit(results, &format!("# harness {ITERATION_MARK}{k}"))?;
            kmsg_line(kmsg, &format!("{KMSG_MARKER} {ITERATION_MARK}{k}"));
        }
        let mut failed = false;
        for test in repeated {
            let run = run_test(runs.len() + 1, test, opts, results, kmsg)?;
            failed |= run.ending.verdict() == Verdict::Fail;
            runs.push(run);
        }
        if until_fail && failed {
            emit(
                results,
                &format!("# harness until-fail: stopped after {ITERATION_MARK}{k}"),
            )?;
            break;
        }
    }
    if let Some(shell) = &plan.shell {
        runs.push(run_shell(runs.len() + 1, shell, opts, results, kmsg)?);
    }
    let verdicts: Vec<Verdict> = runs.iter().map(|r| r.ending.verdict()).collect();
    emit(results, &report::totals_line(&verdicts))?;
    Ok(runs)
}

/// Runs planned binary number `n` as one subtest and writes its lines.
pub fn run_test(
    n: usize,
    test: &PlannedTest,
    opts: &Options,
    results: &mut dyn Write,
    kmsg: &mut dyn Write,
) -> io::Result<TestRun> {
    let name = sanitize_name(&test.name);
    kmsg_line(kmsg, &format!("{KMSG_MARKER} begin {n} {name}"));
    emit(results, &format!("  # Subtest: {name}"))?;

    let mut fwd = Forwarder::new(results, test.max_output_bytes);
    let (ending, stuck) = match spawn(test, opts) {
        Err(e) => (
            Ending::Failed(format!("cannot run {}: {e}", test.path)),
            None,
        ),
        Ok((child, pipes)) => supervise(child, pipes, test.timeout_ms, opts, &mut fwd)?,
    };
    fwd.finish()?;
    for line in stuck.iter().flat_map(Stuck::lines) {
        emit(fwd.results, &line)?;
    }
    let (ktap, dropped_bytes) = (fwd.mode == Mode::Ktap, fwd.budget.dropped());
    end_test(n, &name, &ending, opts, results, kmsg)?;
    Ok(TestRun {
        name,
        ending,
        ktap,
        dropped_bytes,
        stuck,
    })
}

/// The end of test `n`: its result lines, the kmsg markers, the orphans
/// reaped.
fn end_test(
    n: usize,
    name: &str,
    ending: &Ending,
    opts: &Options,
    results: &mut dyn Write,
    kmsg: &mut dyn Write,
) -> io::Result<()> {
    for line in report::result_lines(n, name, ending) {
        emit(results, &line)?;
    }
    kmsg_line(
        kmsg,
        &format!("{KMSG_MARKER} {name}: {}", ending.describe()),
    );
    kmsg_line(kmsg, &format!("{KMSG_MARKER} end {n} {name}"));
    if opts.reap_orphans {
        reap_zombies();
    }
    Ok(())
}

/// Runs the interactive shell as test number `n`, named `shell`: its
/// terminal is its port, not the results stream; its exit status is its
/// result.
fn run_shell(
    n: usize,
    shell: &crate::plan::PlannedShell,
    opts: &Options,
    results: &mut dyn Write,
    kmsg: &mut dyn Write,
) -> io::Result<TestRun> {
    let name = "shell";
    kmsg_line(kmsg, &format!("{KMSG_MARKER} begin {n} {name}"));
    emit(results, &format!("  # Subtest: {name}"))?;
    let mut said = Ok(());
    let mut ready = || {
        said = emit(
            results,
            &format!("  {}{}", crate::plan::SHELL_MARK, shell.port),
        )
    };
    let ending = super::shell::run(shell, &opts.path_env, &mut ready);
    said?;
    end_test(n, name, &ending, opts, results, kmsg)?;
    Ok(TestRun {
        name: name.into(),
        ending,
        ktap: false,
        dropped_bytes: 0,
        stuck: None,
    })
}

/// Reaps every exited child without blocking (PID 1's duty for orphans).
/// Returns how many were reaped.
pub fn reap_zombies() -> usize {
    let mut n = 0;
    loop {
        let mut status = 0;
        // SAFETY: status is a live local.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return n;
        }
        n += 1;
    }
}

fn spawn(test: &PlannedTest, opts: &Options) -> io::Result<(std::process::Child, Pipes)> {
    let mut cmd = Command::new(&test.path);
    cmd.args(&test.args)
        .env_clear()
        .env("PATH", &opts.path_env)
        .env(crate::plan::CASE_MARKERS_ENV, "1")
        .envs(test.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .process_group(0);
    if test.one_pipe {
        let (reader, writer) = io::pipe()?;
        cmd.stdout(writer.try_clone()?).stderr(writer);
        let child = cmd.spawn()?;
        // Our copies of the write end: the pipe ends when the child's do.
        drop(cmd);
        let out = File::from(OwnedFd::from(reader));
        return Ok((
            child,
            Pipes {
                out: Some(out),
                err: None,
            },
        ));
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let pipes = Pipes {
        out: child.stdout.take().map(|p| File::from(OwnedFd::from(p))),
        err: child.stderr.take().map(|p| File::from(OwnedFd::from(p))),
    };
    Ok((child, pipes))
}

/// The child's pipes, read until EOF: stdout (or the one pipe of both),
/// and stderr.
struct Pipes {
    out: Option<File>,
    err: Option<File>,
}

impl Pipes {
    fn open(&self) -> bool {
        self.out.is_some() || self.err.is_some()
    }

    /// Polls the pipes (and `extra`, if any) for up to `timeout`, forwards
    /// what is readable. Returns whether `extra` was ready.
    fn pump(
        &mut self,
        timeout: Duration,
        extra: Option<RawFd>,
        fwd: &mut Forwarder,
    ) -> io::Result<bool> {
        let mut fds = Vec::with_capacity(3);
        for fd in [
            self.out.as_ref().map(|p| p.as_raw_fd()),
            self.err.as_ref().map(|p| p.as_raw_fd()),
            extra,
        ] {
            fds.push(libc::pollfd {
                // poll ignores negative fds.
                fd: fd.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: fds is a live array of pollfd.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        let mut buf = [0u8; 65536];
        if fds[0].revents != 0 {
            if let Some(data) = read_some(&mut self.out, &mut buf) {
                fwd.stdout(data)?;
            }
        }
        if fds[1].revents != 0 {
            if let Some(data) = read_some(&mut self.err, &mut buf) {
                fwd.stderr(data)?;
            }
        }
        Ok(fds[2].revents != 0)
    }
}

/// One read from a readable pipe; closes it (sets `None`) at EOF or error.
fn read_some<'b, R: Read>(pipe: &mut Option<R>, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let p = pipe.as_mut()?;
    match p.read(buf) {
        Ok(0) => {
            *pipe = None;
            None
        }
        Ok(n) => Some(&buf[..n]),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
        Err(_) => {
            *pipe = None;
            None
        }
    }
}

/// Runs `child` to its end or its deadline; says how it ended and, if it
/// outlived its SIGKILL, what it is stuck in.
fn supervise(
    child: std::process::Child,
    mut pipes: Pipes,
    timeout_ms: u64,
    opts: &Options,
    fwd: &mut Forwarder,
) -> io::Result<(Ending, Option<Stuck>)> {
    let start = Instant::now();
    let pid = child.id() as libc::pid_t;
    let deadline = start + Duration::from_millis(timeout_ms);
    let pidfd = pidfd_open(pid);
    // Without a pidfd, poll in short ticks to notice the exit.
    let tick = if pidfd.is_some() {
        Duration::MAX
    } else {
        Duration::from_millis(20)
    };
    // The child is never reaped before its group is killed, so its pid and
    // group id cannot be reused by then.
    let mut exited_at = None;
    let mut timed_out = false;
    loop {
        if exited_at.is_none() && has_exited(pid) {
            exited_at = Some(Instant::now());
        }
        let now = Instant::now();
        let until = match exited_at {
            None if now >= deadline => {
                timed_out = true;
                break;
            }
            None => deadline,
            Some(_) if !pipes.open() => break,
            Some(t) if now >= t + opts.leak_timeout => break,
            Some(t) => t + opts.leak_timeout,
        };
        let wait = (until - now).min(tick);
        // Round up so the loop does not spin on sub-millisecond waits.
        let wait = wait.max(Duration::from_millis(1));
        let watch = match exited_at {
            None => pidfd.as_ref().map(|fd| fd.as_raw_fd()),
            Some(_) => None,
        };
        pipes.pump(wait, watch, fwd)?;
    }

    // SAFETY: plain syscall; a group that no longer exists gives ESRCH.
    unsafe { libc::kill(-pid, opts.kill_signal) };
    // Drain what the group wrote before it died (bounded: a process that
    // left the group may hold the pipes forever).
    let drain_until = Instant::now() + Duration::from_millis(200);
    while pipes.open() {
        let now = Instant::now();
        if now >= drain_until {
            break;
        }
        pipes.pump(drain_until - now, None, fwd)?;
    }
    drop(pipes);

    let dead = exited_at.is_some() || wait_exit(pid, pidfd.as_ref(), opts.kill_timeout);
    // A stuck child is not waited for (`waitpid` would block until it
    // dies, maybe never); PID 1's `reap_zombies` takes it if it ever does.
    let (status, stuck) = if dead {
        // The binary is gone; a task of its group that outlives the
        // group's SIGKILL (a forked child spinning in the kernel) holds
        // the guest the same way.
        let status = reap(pid);
        (
            status,
            group_survivor(pid, opts.kill_timeout).map(Stuck::read),
        )
    } else {
        (None, Some(Stuck::read(pid)))
    };
    let ending = match (timed_out, status) {
        (true, _) => Ending::TimedOut {
            timeout_ms,
            reaped: stuck.is_none(),
        },
        (false, Some(st)) => Ending::from_wait_status(st),
        (false, None) => Ending::Failed(format!("waitpid({pid}) failed")),
    };
    Ok((ending, stuck))
}

/// A task of process group `pgid` still there (not a zombie) after
/// `grace`, if any. Most groups are empty at once (`kill(-pgid, 0)` says
/// `ESRCH`), so this costs nothing on the usual path.
fn group_survivor(pgid: libc::pid_t, grace: Duration) -> Option<libc::pid_t> {
    let until = Instant::now() + grace;
    loop {
        // SAFETY: signal 0 only checks that the group has a member.
        if unsafe { libc::kill(-pgid, 0) } != 0 {
            return None;
        }
        let member = group_member(pgid)?;
        if Instant::now() >= until {
            return Some(member);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A live (not zombie) task whose `/proc/<pid>/stat` names group `pgid`.
fn group_member(pgid: libc::pid_t) -> Option<libc::pid_t> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: libc::pid_t = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
        let (state, pgrp) = stat_state_and_group(&stat)?;
        (pgrp == pgid && state != 'Z').then_some(pid)
    })
}

/// The state letter and process group of a `/proc/<pid>/stat` line
/// (`pid (comm) S ppid pgrp ...`; the name may hold spaces and `)`).
fn stat_state_and_group(stat: &[u8]) -> Option<(char, libc::pid_t)> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: on success the kernel returned a new fd that we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether `pid` has exited, without reaping it.
fn has_exited(pid: libc::pid_t) -> bool {
    // SAFETY: siginfo is plain data, zeroed as waitid(2) asks for WNOHANG.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: info is a live siginfo_t.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: waitid filled info (or left it zeroed).
    r == 0 && unsafe { info.si_pid() } == pid
}

/// Waits up to `limit` for `pid` to exit, without reaping it.
fn wait_exit(pid: libc::pid_t, pidfd: Option<&OwnedFd>, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        if has_exited(pid) {
            return true;
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        let step = (until - now).min(Duration::from_millis(20));
        match pidfd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: p is a live pollfd.
                unsafe { libc::poll(&mut p, 1, step.as_millis().max(1) as i32) };
            }
            None => std::thread::sleep(step),
        }
    }
}

fn reap(pid: libc::pid_t) -> Option<i32> {
    loop {
        let mut status = 0;
        // SAFETY: status is a live local.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Some(status);
        }
        if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

/// Turns the child's bytes into forwarded lines.
struct Forwarder<'w> {
    results: &'w mut dyn Write,
    mode: Mode,
    budget: Budget,
    out: LineSplitter,
    err: LineSplitter,
}

impl<'w> Forwarder<'w> {
    fn new(results: &'w mut dyn Write, limit: u64) -> Forwarder<'w> {
        Forwarder {
            results,
            mode: Mode::Undecided,
            budget: Budget::new(limit),
            out: LineSplitter::new(MAX_LINE_BYTES),
            err: LineSplitter::new(MAX_LINE_BYTES),
        }
    }

    fn stdout(&mut self, data: &[u8]) -> io::Result<()> {
        for l in self.out.push(data) {
            self.line(&l, false)?;
        }
        Ok(())
    }

    fn stderr(&mut self, data: &[u8]) -> io::Result<()> {
        for l in self.err.push(data) {
            self.line(&l, true)?;
        }
        Ok(())
    }

    fn line(&mut self, l: &RawLine, stderr: bool) -> io::Result<()> {
        match self.budget.admit(l.raw_len) {
            Admit::Yes => {
                let text = lines::line_text(l);
                let rendered = if stderr {
                    lines::render_stderr(&text)
                } else {
                    lines::render_stdout(&mut self.mode, &text)
                };
                match rendered {
                    Some(r) => emit(self.results, &r),
                    None => Ok(()),
                }
            }
            Admit::FirstDrop => emit(
                self.results,
                &format!("  # output truncated after {} bytes", self.budget.limit()),
            ),
            Admit::Drop => Ok(()),
        }
    }

    /// Forwards unterminated last lines and notes how much was dropped.
    fn finish(&mut self) -> io::Result<()> {
        if let Some(l) = self.out.finish() {
            self.line(&l, false)?;
        }
        if let Some(l) = self.err.finish() {
            self.line(&l, true)?;
        }
        if self.budget.dropped() > 0 {
            let msg = format!("  # dropped {} bytes of output", self.budget.dropped());
            emit(self.results, &msg)?;
        }
        Ok(())
    }
}

/// Writes one line with a single `write_all` and flushes, so a reader on
/// the other end of the serial port sees whole lines as they happen.
fn emit(w: &mut dyn Write, line: &str) -> io::Result<()> {
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line);
    buf.push('\n');
    w.write_all(buf.as_bytes())?;
    w.flush()
}

/// One `/dev/kmsg` record at level 6 (info); errors ignored.
fn kmsg_line(kmsg: &mut dyn Write, msg: &str) {
    let _ = kmsg.write_all(format!("<6>{msg}\n").as_bytes());
    let _ = kmsg.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PLAN_VERSION;

    fn sh(name: &str, script: &str) -> PlannedTest {
        PlannedTest {
            name: name.into(),
            path: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![],
            timeout_ms: 20_000,
            max_output_bytes: 1 << 20,
            one_pipe: false,
        }
    }

    /// Options for running host tools.
    fn host() -> Options {
        Options {
            path_env: "/usr/bin:/bin".into(),
            ..Options::default()
        }
    }

    /// Runs one test as subtest 1; returns its lines and the run.
    fn run(test: &PlannedTest) -> (Vec<String>, TestRun) {
        let (mut out, mut kmsg) = (Vec::new(), Vec::new());
        let r = run_test(1, test, &host(), &mut out, &mut kmsg).unwrap();
        let text = String::from_utf8(out).unwrap();
        (text.lines().map(str::to_string).collect(), r)
    }

    #[test]
    fn ktap_child_is_nested_and_judged_by_exit_status() {
        let (lines, r) = run(&sh(
            "k",
            "echo; echo 'KTAP version 1'; echo 1..1; echo '# d'; echo 'ok 1 x'",
        ));
        assert_eq!(
            lines,
            [
                "  # Subtest: k",
                "  KTAP version 1",
                "  1..1",
                "  # d",
                "  ok 1 x",
                "ok 1 k"
            ]
        );
        assert!(r.ktap);
        let (lines, _) = run(&sh("k", "echo 'TAP version 13'; echo 'ok 1 x'; exit 1"));
        assert_eq!(
            lines,
            [
                "  # Subtest: k",
                "  TAP version 13",
                "  ok 1 x",
                "  # exited with status 1",
                "not ok 1 k"
            ]
        );
    }

    #[test]
    fn plain_child_becomes_diagnostics() {
        let (lines, r) = run(&sh("p", "echo hello; echo 'KTAP version 1'; printf tail"));
        assert_eq!(
            lines,
            [
                "  # Subtest: p",
                "  # hello",
                "  # KTAP version 1",
                "  # tail",
                "ok 1 p"
            ]
        );
        assert!(!r.ktap);
    }

    #[test]
    fn exit_statuses_and_signals() {
        let table: &[(&str, &str)] = &[
            ("exit 4", "ok 1 t # SKIP exit status 4"),
            ("exit 3", "not ok 1 t"),
            ("kill -SEGV $$", "not ok 1 t"),
        ];
        for (script, last) in table {
            let (lines, _) = run(&sh("t", script));
            assert_eq!(lines.last().map(String::as_str), Some(*last), "{script}");
        }
        let (lines, r) = run(&sh("t", "kill -SEGV $$"));
        assert!(
            lines.contains(&"  # killed by signal SIGSEGV".to_string()) || {
                // A core dump may be configured on the machine running the tests.
                lines.contains(&"  # killed by signal SIGSEGV (core dumped)".to_string())
            },
            "{lines:?}"
        );
        assert!(matches!(r.ending, Ending::Signaled { signal, .. } if signal == libc::SIGSEGV));
        let (lines, _) = run(&sh("t", "exit 3"));
        assert!(lines.contains(&"  # exited with status 3".to_string()));
    }

    #[test]
    fn stderr_is_forwarded_as_diagnostics() {
        let (lines, _) = run(&sh("e", "echo 'KTAP version 1'; echo oops >&2; exit 0"));
        assert!(lines.contains(&"  # stderr: oops".to_string()), "{lines:?}");
        assert_eq!(lines.last().unwrap(), "ok 1 e");
    }

    #[test]
    fn one_pipe_keeps_the_order_the_lines_were_written_in() {
        // kselftest_harness's shape: a test's log on stderr, its result on
        // stdout, then the next test's start on stdout, a hundred times.
        let script = "echo 'KTAP version 1'; for i in $(seq 1 100); do \
                      echo \"# $i log\" >&2; echo \"ok $i t$i\"; done";
        let mut t = sh("o", script);
        t.one_pipe = true;
        let (lines, _) = run(&t);
        let want: Vec<String> = (1..=100)
            .flat_map(|i| [format!("  # {i} log"), format!("  ok {i} t{i}")])
            .collect();
        let got: Vec<String> = lines
            .iter()
            .filter(|l| l.starts_with("  # ") && l.ends_with(" log") || l.starts_with("  ok "))
            .cloned()
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn missing_binary_fails_the_test_only() {
        let mut t = sh("m", "");
        t.path = "/nonexistent/binary".into();
        let (lines, r) = run(&t);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[1].starts_with("  # cannot run /nonexistent/binary: "));
        assert_eq!(lines[2], "not ok 1 m");
        assert!(matches!(r.ending, Ending::Failed(_)));
    }

    #[test]
    fn timeout_kills_the_process_group() {
        let mut t = sh("slow", "echo started; sleep 30 & sleep 30; echo never");
        t.timeout_ms = 1000;
        let start = Instant::now();
        let (lines, r) = run(&t);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(
            lines,
            [
                "  # Subtest: slow",
                "  # started",
                "not ok 1 slow # TIMEOUT 1000 ms"
            ]
        );
        assert_eq!(
            r.ending,
            Ending::TimedOut {
                timeout_ms: 1000,
                reaped: true
            }
        );
    }

    #[test]
    fn child_that_outlives_its_sigkill_is_left_behind_and_the_plan_goes_on() {
        // Signal 0 sends nothing: the child plays a task in D state.
        let opts = Options {
            kill_signal: 0,
            kill_timeout: Duration::from_millis(300),
            ..host()
        };
        let mut stuck = sh("stuck", "echo started; exec sleep 30");
        stuck.timeout_ms = 500;
        let plan = RunPlan {
            version: PLAN_VERSION,
            tests: vec![stuck, sh("next", "echo fine")],
            ..RunPlan::default()
        };
        let (mut out, mut kmsg) = (Vec::new(), Vec::new());
        let start = Instant::now();
        let runs = run_plan(&plan, &opts, &mut out, &mut kmsg).unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        let left = runs[0].stuck.clone().expect("left behind");
        // Clean up the fake before asserting anything.
        // SAFETY: plain syscalls on our own child.
        unsafe {
            libc::kill(-left.pid, libc::SIGKILL);
            libc::waitpid(left.pid, std::ptr::null_mut(), 0);
        }
        assert_eq!(
            runs[0].ending,
            Ending::TimedOut {
                timeout_ms: 500,
                reaped: false
            }
        );
        assert_eq!(runs[1].ending, Ending::Exited(0));
        assert_eq!(runs[1].stuck, None);
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        let said = format!(
            "  # still alive after SIGKILL (state S): pid {}, wchan ",
            left.pid
        );
        assert!(lines.iter().any(|l| l.starts_with(&said)), "{out}");
        assert!(out.contains("not ok 1 stuck # TIMEOUT 500 ms\n"), "{out}");
        assert!(out.contains("  # fine\nok 2 next\n"), "{out}");
    }

    #[test]
    fn a_task_of_the_group_that_outlives_the_sigkill_is_left_behind() {
        // Signal 0 sends nothing: the group's `sleep` plays a forked child
        // spinning in the kernel after the binary itself exited.
        let opts = Options {
            kill_signal: 0,
            kill_timeout: Duration::from_millis(300),
            leak_timeout: Duration::from_millis(100),
            ..host()
        };
        let t = sh("forks", "sleep 30 >/dev/null 2>&1 & echo $!; exit 0");
        let plan = RunPlan {
            version: PLAN_VERSION,
            tests: vec![t],
            ..RunPlan::default()
        };
        let (mut out, mut kmsg) = (Vec::new(), Vec::new());
        let runs = run_plan(&plan, &opts, &mut out, &mut kmsg).unwrap();
        let out = String::from_utf8(out).unwrap();
        let left = runs[0].stuck.clone();
        let pid: libc::pid_t = out
            .lines()
            .find_map(|l| l.strip_prefix("  # ")?.parse().ok())
            .expect("the child's pid");
        // SAFETY: plain syscall on a child of ours.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(runs[0].ending, Ending::Exited(0));
        assert_eq!(left.map(|s| s.pid), Some(pid), "{out}");
        assert!(out.contains(&format!(
            "  # still alive after SIGKILL (state S): pid {pid}"
        )));
        // A group that is empty at once costs no grace.
        let start = Instant::now();
        assert_eq!(
            group_survivor(pid + 1_000_000, Duration::from_secs(5)),
            None
        );
        assert!(start.elapsed() < Duration::from_secs(1));
        assert_eq!(
            stat_state_and_group(b"42 (a b) c) R 1 42 42 0"),
            Some(('R', 42))
        );
        assert_eq!(stat_state_and_group(b"42 (x"), None);
    }

    #[test]
    fn leftover_process_holding_the_pipes_is_killed() {
        let t = sh("leak", "sleep 30 & echo $!; exit 0");
        let start = Instant::now();
        let (lines, r) = run(&t);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(r.ending, Ending::Exited(0));
        let pid: libc::pid_t = lines[1].trim_start_matches("  # ").parse().unwrap();
        // The orphan is reaped by whoever adopted it; wait until it is gone
        // or a zombie.
        let gone = (0..200).any(|_| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let dead = stat.is_empty() || stat.contains(") Z ");
            if !dead {
                std::thread::sleep(Duration::from_millis(10));
            }
            dead
        });
        assert!(gone, "sleep {pid} survived its group's SIGKILL");
    }

    #[test]
    fn flood_is_bounded_and_drained() {
        let mut t = sh("flood", "yes | head -c 5000000; echo done >&2");
        t.max_output_bytes = 1000;
        let (lines, r) = run(&t);
        assert_eq!(lines.len(), 1 + 500 + 2 + 1, "{:?}", &lines[..3]);
        assert!(lines[1..501].iter().all(|l| l == "  # y"));
        assert_eq!(lines[501], "  # output truncated after 1000 bytes");
        assert_eq!(lines[502], "  # dropped 4999005 bytes of output");
        assert_eq!(lines[503], "ok 1 flood");
        assert_eq!(r.dropped_bytes, 5_000_000 - 1000 + 5);
    }

    #[test]
    fn lines_are_sanitized_and_capped() {
        let (lines, _) = run(&sh(
            "s",
            r"printf 'a\033[31mb\000c\377\tz\r\n'; head -c 10000 /dev/zero | tr '\0' x",
        ));
        assert_eq!(lines[1], "  # a[31mbc\u{fffd}\tz");
        assert_eq!(
            lines[2],
            format!(
                "  # {}{}",
                "x".repeat(MAX_LINE_BYTES),
                lines::TRUNCATED_MARK
            )
        );
    }

    #[test]
    fn environment_is_path_plus_plan_env() {
        let mut t = sh("env", "echo \"$PATH|$K|$HOME\"");
        t.env = vec![("K".into(), "V".into())];
        let mut out = Vec::new();
        run_test(1, &t, &Options::default(), &mut out, &mut io::sink()).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.lines().nth(1), Some("  # /harness/bin|V|"));
    }

    /// Records when each line was written.
    struct Stamped(Vec<(Instant, String)>);

    impl Write for Stamped {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0
                .push((Instant::now(), String::from_utf8_lossy(b).into_owned()));
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn output_is_forwarded_live() {
        let mut out = Stamped(Vec::new());
        let t = sh("live", "echo a; sleep 1; echo b");
        run_test(1, &t, &host(), &mut out, &mut io::sink()).unwrap();
        let at = |s: &str| out.0.iter().find(|(_, l)| l == s).map(|(t, _)| *t).unwrap();
        let gap = at("  # b\n") - at("  # a\n");
        assert!(gap >= Duration::from_millis(500), "{gap:?}");
    }

    #[test]
    fn plan_document_and_kmsg_markers() {
        let plan = RunPlan {
            version: PLAN_VERSION,
            tests: vec![
                sh("one", "echo 'KTAP version 1'; echo 1..0"),
                sh("two#x", "exit 1"),
            ],
            ..RunPlan::default()
        };
        let (mut out, mut kmsg) = (Vec::new(), Vec::new());
        let runs = run_plan(&plan, &Options::default(), &mut out, &mut kmsg).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "KTAP version 1\n1..2\n  # Subtest: one\n  KTAP version 1\n  1..0\nok 1 one\n\
             \x20 # Subtest: two_x\n  # exited with status 1\nnot ok 2 two_x\n\
             # Totals: pass:1 fail:1 skip:0\n"
        );
        assert_eq!(
            String::from_utf8(kmsg).unwrap(),
            "<6>harness: begin 1 one\n<6>harness: one: exited with status 0\n\
             <6>harness: end 1 one\n<6>harness: begin 2 two_x\n\
             <6>harness: two_x: exited with status 1\n<6>harness: end 2 two_x\n"
        );
    }

    #[test]
    fn repeated_plan_runs_the_rest_again_and_stops_at_a_failure() {
        let count = std::env::temp_dir().join(format!("harness-repeat-{}", std::process::id()));
        let _ = std::fs::remove_file(&count);
        // Fails on its third run.
        let script = format!(
            "n=0; [ -f {0} ] && read n < {0}; n=$((n+1)); echo $n > {0}; [ $n -lt 3 ]",
            count.display()
        );
        let plan = |until_fail| RunPlan {
            version: PLAN_VERSION,
            tests: vec![sh("topology", "true"), sh("flaky", &script)],
            repeat: Some(crate::plan::PlannedRepeat {
                iterations: 5,
                until_fail,
                first: 1,
            }),
            ..RunPlan::default()
        };
        let (mut out, mut kmsg) = (Vec::new(), Vec::new());
        let runs = run_plan(&plan(true), &Options::default(), &mut out, &mut kmsg).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(runs.len(), 4, "{out}");
        assert!(out.starts_with("KTAP version 1\n1..6\n"), "{out}");
        assert!(out.contains("# harness iteration 3\n"), "{out}");
        assert!(!out.contains("iteration 4"), "{out}");
        assert!(out.contains("not ok 4 flaky\n"), "{out}");
        assert!(out.contains("# harness until-fail: stopped after iteration 3"));
        assert!(String::from_utf8(kmsg)
            .unwrap()
            .contains("<6>harness: iteration 2\n"));
        std::fs::remove_file(&count).unwrap();
        let (mut out, mut kmsg) = (Vec::new(), Vec::new());
        let runs = run_plan(&plan(false), &Options::default(), &mut out, &mut kmsg).unwrap();
        assert_eq!(runs.len(), 6);
        assert!(String::from_utf8(out).unwrap().contains("not ok 6 flaky\n"));
        let _ = std::fs::remove_file(&count);
    }
}
