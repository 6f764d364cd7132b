//! Helpers shared by the private futex hash tests (`futex-prctl`,
//! `futex-resize`, `futex-immutable`): expected `PR_FUTEX_HASH` results per
//! kernel expectation, the automatic sizing formula, topology from sysfs,
//! bounded thread/child helpers, `clone`, and legacy `futex(2)` on a word
//! (the raw call is `sys::futex`).
//!
//! Everything here is bounded in time: waits take deadlines, joins give up
//! after a deadline, so a broken kernel fails a case instead of hanging it.

use crate::expect::{Expect, Growth};
// The assertion vocabulary lives with `Outcome`; re-exported for the
// hash binaries that import it from here.
use crate::ktap::Outcome;
pub use crate::ktap::{done, fail, skip, Check};
use crate::mapping::Mapping;
use crate::sys::{self, Errno};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The result of a raw syscall.
pub type Res = Result<i64, Errno>;

/// `EINVAL` as a syscall result.
pub const EINVAL: Res = Err(Errno(libc::EINVAL));
/// `EBUSY` as a syscall result.
pub const EBUSY: Res = Err(Errno(libc::EBUSY));
/// `ENOMEM` as a syscall result.
pub const ENOMEM: Res = Err(Errno(libc::ENOMEM));

/// `Ok(v)` / `EINVAL` style rendering of a result.
pub fn show(r: &Res) -> String {
    match r {
        Ok(v) => format!("Ok({v})"),
        Err(e) => format!("Err({e})"),
    }
}

/// Fails unless `got == want`; `what` names the call in the message.
pub fn ensure_res(what: &str, got: Res, want: Res) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(fail(format!(
            "{what}: expected {}, got {}",
            show(&want),
            show(&got)
        )))
    }
}

/// Fails with `msg()` unless `cond`.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Check {
    if cond {
        Ok(())
    } else {
        Err(fail(msg()))
    }
}

/// `prctl(PR_FUTEX_HASH, SET_SLOTS, slots, 0, 0)`.
pub fn set(slots: u64) -> Res {
    sys::set_slots(slots)
}

/// `prctl(PR_FUTEX_HASH, SET_SLOTS, slots, FH_FLAG_IMMUTABLE, 0)`.
pub fn set_immutable(slots: u64) -> Res {
    sys::prctl_futex_hash(
        sys::PR_FUTEX_HASH_SET_SLOTS,
        slots,
        sys::FH_FLAG_IMMUTABLE,
        0,
    )
}

/// `prctl(PR_FUTEX_HASH, GET_SLOTS)`.
pub fn get() -> Res {
    sys::get_slots()
}

/// `prctl(PR_FUTEX_HASH, GET_IMMUTABLE)` (sub-op 3).
pub fn get_immutable() -> Res {
    sys::prctl_futex_hash(sys::PR_FUTEX_HASH_GET_IMMUTABLE, 0, 0, 0)
}

/// What a SET whose result on a kernel with the private hash would be
/// `supported` returns on the expected kernel: `supported` itself, or
/// EINVAL when the private hash is absent (no prctl 78 at all, or 6.16's
/// `depends on BROKEN` stub: SET is EINVAL for every value including 0).
pub fn want_set(e: &Expect, supported: Res) -> Res {
    if e.private_hash {
        supported
    } else {
        EINVAL
    }
}

/// What GET returns when the private hash would hold `slots`: `slots`, or
/// 0 (6.16: prctl known, hash stubbed), or EINVAL (prctl 78 unknown).
pub fn want_get(e: &Expect, slots: i64) -> Res {
    if e.private_hash {
        Ok(slots)
    } else if e.prctl {
        Ok(0)
    } else {
        EINVAL
    }
}

/// What `GET_IMMUTABLE` (sub-op 3) returns when the immutability patch would
/// answer `patched`: that value with `immutable`; 6.16's stub answers 0;
/// 6.17+ (sub-op removed) and kernels without prctl 78 answer EINVAL.
pub fn want_get_immutable(e: &Expect, patched: i64) -> Res {
    if e.immutable {
        Ok(patched)
    } else if e.prctl && !e.private_hash {
        Ok(0)
    } else {
        EINVAL
    }
}

/// Checks `GET` against [`want_get`].
pub fn ensure_get(e: &Expect, what: &str, slots: i64) -> Check {
    ensure_res(&format!("GET_SLOTS {what}"), get(), want_get(e, slots))
}

/// Runs `SET slots` and checks it against [`want_set`] of `supported`.
pub fn ensure_set(e: &Expect, slots: u64, supported: Res) -> Check {
    ensure_res(
        &format!("SET_SLOTS {slots:#x}"),
        set(slots),
        want_set(e, supported),
    )
}

// ---------------------------------------------------------------- topology

fn sysfs_count(path: &str) -> Option<usize> {
    crate::cpulist::read(path).ok().map(|set| set.len())
}

/// `num_online_cpus()` (from `/sys/devices/system/cpu/online`).
pub fn online_cpus() -> usize {
    sysfs_count("/sys/devices/system/cpu/online").unwrap_or_else(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize
    })
}

/// `num_possible_cpus()`.
pub fn possible_cpus() -> usize {
    sysfs_count("/sys/devices/system/cpu/possible").unwrap_or_else(online_cpus)
}

/// `num_possible_nodes()` (1 without NUMA sysfs).
pub fn possible_nodes() -> usize {
    sysfs_count("/sys/devices/system/node/possible")
        .unwrap_or(1)
        .max(1)
}

/// `roundup_pow_of_two(x)` for x >= 1.
pub fn roundup_pow2(x: u64) -> u64 {
    x.max(1).next_power_of_two()
}

/// The global per-node futex table size:
/// `roundup_pow_of_two(max(4, 256 * possible_cpus / possible_nodes))`.
pub fn global_size_for(possible_cpus: usize, possible_nodes: usize) -> u64 {
    roundup_pow2((256 * possible_cpus as u64 / possible_nodes.max(1) as u64).max(4))
}

/// [`global_size_for`] of this machine.
pub fn global_size() -> u64 {
    global_size_for(possible_cpus(), possible_nodes())
}

/// The automatic size chosen when a process with `nr_threads` threads (the
/// new one not counted) clones: `clamp(roundup_pow_of_two(4 * min(nr_threads,
/// online)), 16, global)`.
pub fn auto_size_for(nr_threads: usize, online: usize, global: u64) -> u64 {
    let threads = nr_threads.min(online).max(1) as u64;
    roundup_pow2(4 * threads).max(16).min(global)
}

// ------------------------------------------------------------------- time

/// Milliseconds from env var `name`, else `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// `FUTEX_STRESS_ITERATIONS` (default `default`): iterations of stress loops.
pub fn stress_iterations(default: u64) -> u64 {
    env_u64("FUTEX_STRESS_ITERATIONS", default).max(1)
}

/// `FUTEX_STRESS_SECONDS` (default `default`): minimum wall time of stress loops.
pub fn stress_seconds(default: u64) -> u64 {
    env_u64("FUTEX_STRESS_SECONDS", default)
}

/// An absolute `CLOCK_REALTIME` deadline `ms` from now (legacy FUTEX_LOCK_PI
/// takes an absolute realtime timeout).
pub fn realtime_deadline_ms(ms: u64) -> libc::timespec {
    let ms = crate::cases::scaled(Duration::from_millis(ms)).as_millis() as u64;
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: now is a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    let total = now.tv_nsec as u64 + (ms % 1000) * 1_000_000;
    libc::timespec {
        tv_sec: now.tv_sec + (ms / 1000) as i64 + (total / 1_000_000_000) as i64,
        tv_nsec: (total % 1_000_000_000) as i64,
    }
}

/// Polls GET every `interval_ms` (doing a futex op in between so deferred
/// growth can land) until `done(GET)` or `tries` polls; returns the last GET.
pub fn poll_get(tries: u32, interval_ms: u64, done: impl Fn(&Res) -> bool) -> Res {
    let word = AtomicU32::new(0);
    let mut r = get();
    for _ in 0..tries {
        if done(&r) {
            return r;
        }
        // A private futex op: takes (and drops) a hash reference.
        let _ = sys::futex_wake(word.as_ptr(), sys::FUTEX_BITSET_MATCH_ANY, 1, priv32());
        std::thread::sleep(Duration::from_millis(interval_ms));
        r = get();
    }
    r
}

// ------------------------------------------------------------ futex words

/// `FUTEX2_SIZE_U32 | FUTEX2_PRIVATE`.
pub const fn priv32() -> u32 {
    sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE
}

/// futex2 wait on `w` for value `val` with a relative timeout in ms.
pub fn wait_ms(w: &AtomicU32, val: u32, flags: u32, ms: u64) -> Res {
    let ts = sys::deadline_ms(crate::cases::scaled(Duration::from_millis(ms)).as_millis() as u64);
    sys::futex_wait(
        w.as_ptr(),
        val as u64,
        sys::FUTEX_BITSET_MATCH_ANY,
        flags,
        Some(&ts),
        libc::CLOCK_MONOTONIC,
    )
}

/// futex2 wake of up to `nr` waiters on `w`.
pub fn wake(w: &AtomicU32, nr: i32, flags: u32) -> Res {
    sys::futex_wake(w.as_ptr(), sys::FUTEX_BITSET_MATCH_ANY, nr, flags)
}

/// Legacy `futex(2)` operation numbers used here, as the `op` argument of
/// [`futex_legacy`]; the whole table is [`sys::futex_op`].
pub mod legacy {
    pub use crate::sys::futex_op::{LOCK_PI, PRIVATE, UNLOCK_PI, WAIT, WAKE};
    pub use crate::sys::{TID_MASK, WAITERS};
}

/// Legacy `futex(w, op, val, timeout, NULL, 0)` on a live word.
pub fn futex_legacy(w: &AtomicU32, op: u32, val: u32, timeout: Option<&libc::timespec>) -> Res {
    let ts = timeout.map_or(0, |t| t as *const _ as u64);
    sys::futex(w.as_ptr() as u64, op, val as u64, ts, 0, 0)
}

/// The calling thread's TID.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// `(state, syscall nr)` of a thread of this process from /proc, if readable.
/// `syscall nr` is -1 when the thread is running in user space.
pub fn thread_state(tid: i32) -> Option<(char, i64)> {
    proc_state(&format!("/proc/self/task/{tid}"))
}

/// Same as [`thread_state`] for another process.
pub fn process_state(pid: i32) -> Option<(char, i64)> {
    proc_state(&format!("/proc/{pid}"))
}

/// Whether `wchan` names where a sleeping task sleeps here (it needs
/// KALLSYMS and an unwinder): asked once of PID 1, guest-init, which sleeps
/// in wait() while tests run. Where it does not, [`proc_state`] reads
/// `syscall` as before.
fn wchan_names_sleepers() -> bool {
    static NAMES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *NAMES.get_or_init(|| {
        std::fs::read_to_string("/proc/1/wchan")
            .is_ok_and(|w| !w.trim().is_empty() && w.trim() != "0")
    })
}

fn proc_state(dir: &str) -> Option<(char, i64)> {
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let state = after.trim_start().chars().next()?;
    // `syscall` of a task that is not running waits in the kernel
    // (wait_task_inactive) until the task is off its CPU, spinning while
    // the state it read still holds. A LOCK_PI waiter spins on its owner
    // (rtmutex_spin_on_owner) already in state S; when the reader is that
    // owner, each spins on the other until something else wants a CPU:
    // seen as 21 s RCU stalls and 30-60 s timeouts (docs/findings.md).
    // `wchan` never waits and reads 0 for a task still on a runqueue, so
    // such a task is reported running until it really sleeps.
    if state == 'S' && wchan_names_sleepers() {
        if let Ok(w) = std::fs::read_to_string(format!("{dir}/wchan")) {
            if w.trim() == "0" {
                return Some(('R', -1));
            }
        }
    }
    let sc = std::fs::read_to_string(format!("{dir}/syscall")).ok()?;
    let first = sc.split_whitespace().next()?;
    let nr = if first == "running" {
        -1
    } else {
        first.parse().ok()?
    };
    Some((state, nr))
}

/// Waits (bounded) until every task in `tids` sleeps in syscall `nr`
/// (`/proc/.../stat` state S and `/proc/.../syscall` nr), then sleeps a
/// little more so the waiter is past queueing. `state_of` maps a tid to its
/// state ([`thread_state`] or [`process_state`]).
pub fn wait_blocked(
    tids: &[i32],
    nr: i64,
    timeout: Duration,
    state_of: fn(i32) -> Option<(char, i64)>,
) -> Check {
    let timeout = crate::cases::scaled(timeout);
    let start = Instant::now();
    loop {
        let pending: Vec<i32> = tids
            .iter()
            .copied()
            .filter(|&t| !matches!(state_of(t), Some(('S', n)) if n == nr))
            .collect();
        if pending.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(fail(format!(
                "tasks {pending:?} not blocked in syscall {nr} after {} ms (states {:?})",
                timeout.as_millis(),
                pending.iter().map(|&t| state_of(t)).collect::<Vec<_>>()
            )));
        }
        // Quick at first; then slower, so the caller is off its CPU most of
        // the time: a PI waiter spins (already in state S) while the lock's owner — this
        // thread, often — is on a CPU, and under TCG reading /proc is slow
        // enough that fast polling keeps it spinning for seconds.
        let pause = if start.elapsed() < Duration::from_millis(100) {
            2
        } else {
            20
        };
        std::thread::sleep(Duration::from_millis(pause));
    }
}

/// [`wait_blocked`], polled from a helper thread while this one sleeps in
/// `join`: for a caller that owns the PI lock the tasks wait on. A LOCK_PI
/// waiter spins while its owner is on a CPU, and an owner polling /proc is
/// on one; a waiter woken between the `wchan` and the `syscall` read
/// spins on the owner while the owner's read waits for it to leave its
/// CPU (`wait_task_inactive`), each on the other (docs/findings.md). With
/// the owner asleep, a waiter never spins long.
pub fn wait_blocked_apart(
    tids: &[i32],
    nr: i64,
    timeout: Duration,
    state_of: fn(i32) -> Option<(char, i64)>,
) -> Check {
    std::thread::scope(|s| {
        s.spawn(|| wait_blocked(tids, nr, timeout, state_of))
            .join()
            .unwrap_or_else(|_| Err(fail("the thread polling /proc panicked")))
    })
}

// --------------------------------------------------------------- threads

/// A thread running one blocking call, with its TID published.
pub struct Worker<T> {
    tid: Arc<AtomicI32>,
    handle: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> Worker<T> {
    /// Spawns `f` on a new thread (fails the case if the spawn fails).
    pub fn spawn(f: impl FnOnce() -> T + Send + 'static) -> Result<Worker<T>, Outcome> {
        let tid = Arc::new(AtomicI32::new(0));
        let t2 = tid.clone();
        let handle = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                t2.store(gettid(), Ordering::SeqCst);
                f()
            })
            .map_err(|e| fail(format!("thread spawn failed: {e}")))?;
        Ok(Worker {
            tid,
            handle: Some(handle),
        })
    }

    /// The thread's TID (waits up to 5 s for it to start).
    pub fn tid(&self) -> Result<i32, Outcome> {
        let start = Instant::now();
        loop {
            let t = self.tid.load(Ordering::SeqCst);
            if t != 0 {
                return Ok(t);
            }
            if start.elapsed() > crate::cases::scaled(Duration::from_secs(5)) {
                return Err(fail("worker thread did not start in time"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Joins, giving up (and failing) after `timeout`.
    pub fn join(mut self, timeout: Duration) -> Result<T, Outcome> {
        let h = self.handle.take().expect("joined once");
        let start = Instant::now();
        while !h.is_finished() {
            if start.elapsed() > timeout {
                return Err(fail(format!(
                    "thread {} did not finish within {} ms",
                    self.tid.load(Ordering::SeqCst),
                    timeout.as_millis()
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        h.join().map_err(|_| fail("worker thread panicked"))
    }
}

/// TIDs of a set of workers.
pub fn tids<T: Send + 'static>(ws: &[Worker<T>]) -> Result<Vec<i32>, Outcome> {
    ws.iter().map(|w| w.tid()).collect()
}

/// Joins all workers with one overall deadline.
pub fn join_all<T: Send + 'static>(
    ws: Vec<Worker<T>>,
    timeout: Duration,
) -> Result<Vec<T>, Outcome> {
    let deadline = Instant::now() + crate::cases::scaled(timeout);
    ws.into_iter()
        .map(|w| w.join(deadline.saturating_duration_since(Instant::now())))
        .collect()
}

/// `n` threads parked on a private futex until [`Parked::release`]; used to
/// raise the thread count for automatic sizing.
pub struct Parked {
    gate: Arc<AtomicU32>,
    workers: Vec<Worker<()>>,
}

impl Parked {
    /// Spawns `n` parked threads (each bounded to `max` of parking).
    pub fn spawn(n: usize, max: Duration) -> Result<Parked, Outcome> {
        let gate = Arc::new(AtomicU32::new(0));
        let mut workers = Vec::with_capacity(n);
        for _ in 0..n {
            let g = gate.clone();
            workers.push(Worker::spawn(move || {
                let start = Instant::now();
                while g.load(Ordering::SeqCst) == 0 && start.elapsed() < max {
                    let _ = wait_ms(&g, 0, priv32(), 50);
                }
            })?);
        }
        Ok(Parked { gate, workers })
    }

    /// Releases and joins every parked thread.
    pub fn release(self) -> Check {
        self.gate.store(1, Ordering::SeqCst);
        let _ = wake(&self.gate, i32::MAX, priv32());
        join_all(self.workers, Duration::from_secs(10)).map(|_| ())
    }
}

/// Background threads hammering private futex ops on their own words until
/// stopped; every op must return exactly what it must (wake of nobody ->
/// 0, wait on a changed value -> EAGAIN, a 1 ms timed wait -> ETIMEDOUT).
pub struct Hammer {
    stop: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
    workers: Vec<Worker<Option<String>>>,
}

impl Hammer {
    /// Starts `n` hammer threads.
    pub fn start(n: usize) -> Result<Hammer, Outcome> {
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let mut workers = Vec::new();
        for _ in 0..n {
            let (s, o) = (stop.clone(), ops.clone());
            workers.push(Worker::spawn(move || {
                let w = AtomicU32::new(7);
                let start = Instant::now();
                let mut i = 0u64;
                while !s.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(60) {
                    let (what, got, want) = match i % 3 {
                        0 => ("wake", wake(&w, 1, priv32()), Ok(0)),
                        1 => (
                            "wait(mismatch)",
                            wait_ms(&w, 8, priv32(), 1000),
                            Err(Errno(libc::EAGAIN)),
                        ),
                        _ => (
                            "wait(1ms)",
                            wait_ms(&w, 7, priv32(), 1),
                            Err(Errno(libc::ETIMEDOUT)),
                        ),
                    };
                    if got != want {
                        return Some(format!(
                            "hammer {what}: expected {}, got {}",
                            show(&want),
                            show(&got)
                        ));
                    }
                    i += 1;
                    o.fetch_add(1, Ordering::Relaxed);
                }
                None
            })?);
        }
        Ok(Hammer { stop, ops, workers })
    }

    /// Stops and joins the hammer threads; fails on any wrong result.
    /// Returns the number of ops done.
    pub fn stop(self) -> Result<u64, Outcome> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(e) = join_all(self.workers, Duration::from_secs(10))?
            .into_iter()
            .flatten()
            .next()
        {
            return Err(fail(e));
        }
        Ok(self.ops.load(Ordering::SeqCst))
    }
}

// --------------------------------------------------------------- processes

/// An anonymous `MAP_SHARED` page (survives fork as shared memory).
pub struct SharedPage {
    map: Mapping,
}

impl SharedPage {
    /// Maps one zeroed shared page.
    pub fn new() -> Result<SharedPage, Outcome> {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let map = Mapping::anon(4096, rw, true).map_err(|_| fail("mmap(MAP_SHARED) failed"))?;
        Ok(SharedPage { map })
    }

    /// The page's first byte (page-aligned, 4096 bytes), for a caller that
    /// keeps data of its own in it.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.addr()
    }

    /// The `i`-th u32 of the page (i < 1024).
    pub fn word(&self, i: usize) -> &AtomicU32 {
        assert!(i < 1024);
        self.map.word(4 * i)
    }
}

/// Forks; the child runs `f` and `_exit`s with its return value. Only call
/// async-signal-safe things (raw syscalls) in `f` if the parent has threads.
pub fn fork_run(f: impl FnOnce() -> i32) -> Result<i32, Outcome> {
    // SAFETY: the child only runs `f` then _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(fail(format!(
            "fork failed: {}",
            std::io::Error::last_os_error()
        )));
    }
    if pid == 0 {
        let code = f();
        // SAFETY: _exit never returns.
        unsafe { libc::_exit(code) };
    }
    Ok(pid)
}

/// Waits for child `pid` (bounded; kills it on timeout) and returns its exit
/// code (or fails if it was killed by a signal).
pub fn wait_child(pid: i32, timeout: Duration) -> Result<i32, Outcome> {
    let start = Instant::now();
    loop {
        let mut st = 0;
        // SAFETY: st is a live int.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG | libc::__WALL) };
        if r == pid {
            if libc::WIFEXITED(st) {
                return Ok(libc::WEXITSTATUS(st));
            }
            return Err(fail(format!(
                "child {pid} ended abnormally (status {st:#x})"
            )));
        }
        if r < 0 {
            return Err(fail(format!(
                "waitpid({pid}) failed: {}",
                std::io::Error::last_os_error()
            )));
        }
        if start.elapsed() > timeout {
            // SAFETY: plain kill/waitpid of our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut st, libc::__WALL);
            }
            return Err(fail(format!(
                "child {pid} did not exit within {} ms",
                timeout.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Encodes a syscall result as a child exit code: `Ok(n)` for n < 100 -> n
/// ... limited to what the tests need: Ok(0) -> 0, Ok(16) -> 16,
/// Err(EINVAL) -> 200, Err(EBUSY) -> 201, other Ok -> 150, other Err -> 250.
pub fn res_to_code(r: Res) -> i32 {
    match r {
        Ok(n) if (0..100).contains(&n) => n as i32,
        Ok(_) => 150,
        Err(Errno(libc::EINVAL)) => 200,
        Err(Errno(libc::EBUSY)) => 201,
        Err(_) => 250,
    }
}

/// The code [`res_to_code`] gives `r`.
pub fn want_code(r: Res) -> i32 {
    res_to_code(r)
}

extern "C" fn clone_child_exit(_: *mut libc::c_void) -> libc::c_int {
    // SAFETY: exit (not exit_group) of this task only; nothing else runs on
    // the borrowed stack or touches the shared address space.
    unsafe { libc::syscall(libc::SYS_exit, 0) };
    0
}

/// `clone(flags | SIGCHLD)` of a child that exits at once (with CLONE_VM it
/// runs on a private stack); waits for it (bounded). Returns the child's
/// exit code.
pub fn clone_and_reap(flags: i32) -> Result<i32, Outcome> {
    let mut stack = vec![0u8; 64 * 1024];
    // SAFETY: the end of the vec, 16-byte aligned, is a valid stack top.
    let top = unsafe { stack.as_mut_ptr().add(stack.len()) };
    let top = (top as usize & !15) as *mut libc::c_void;
    // SAFETY: clone_child_exit only calls exit; `stack` outlives the child
    // (we wait for it before dropping).
    let pid = unsafe {
        libc::clone(
            clone_child_exit,
            top,
            flags | libc::SIGCHLD,
            std::ptr::null_mut(),
        )
    };
    if pid < 0 {
        return Err(fail(format!(
            "clone({flags:#x}) failed: {}",
            std::io::Error::last_os_error()
        )));
    }
    let r = wait_child(pid, Duration::from_secs(10));
    drop(stack);
    r
}

/// Whether a clone with these flags should allocate the private hash under
/// expectation `g` (CLONE_VM always set by the callers).
pub fn growth_allocates(g: Growth, thread: bool, vfork: bool) -> bool {
    match g {
        Growth::None => false,
        Growth::Thread => thread,
        Growth::VmNotVfork => !vfork,
        Growth::AnyVm => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizing_formula() {
        assert_eq!(global_size_for(2, 1), 512);
        assert_eq!(global_size_for(8, 4), 512);
        assert_eq!(global_size_for(6, 1), 2048);
        assert_eq!(global_size_for(1, 128), 4);
        // 2 CPUs: never above 16.
        assert_eq!(auto_size_for(1, 2, 512), 16);
        assert_eq!(auto_size_for(64, 2, 512), 16);
        // 8 CPUs: 5 threads -> 20 -> 32.
        assert_eq!(auto_size_for(4, 8, 2048), 16);
        assert_eq!(auto_size_for(5, 8, 2048), 32);
        assert_eq!(auto_size_for(9, 8, 2048), 32);
        // Upper clamp.
        assert_eq!(auto_size_for(64, 64, 32), 32);
    }

    #[test]
    fn expectations() {
        let e617 = Expect::for_release("6.17.1");
        let e616 = Expect::for_release("6.16.3");
        let e612 = Expect::for_release("6.12.9");
        assert_eq!(want_set(&e617, Ok(0)), Ok(0));
        assert_eq!(want_set(&e616, Ok(0)), EINVAL);
        assert_eq!(want_get(&e617, 32), Ok(32));
        assert_eq!(want_get(&e616, 32), Ok(0));
        assert_eq!(want_get(&e612, 32), EINVAL);
        assert_eq!(want_get_immutable(&e617, 1), EINVAL);
        assert_eq!(want_get_immutable(&e616, 1), Ok(0));
        assert_eq!(want_get_immutable(&e612, 1), EINVAL);
        let mut patched = e617.clone();
        patched.immutable = true;
        assert_eq!(want_get_immutable(&patched, 1), Ok(1));
        assert!(growth_allocates(Growth::AnyVm, false, true));
        assert!(!growth_allocates(Growth::VmNotVfork, false, true));
        assert!(growth_allocates(Growth::VmNotVfork, false, false));
        assert!(!growth_allocates(Growth::Thread, false, false));
        assert!(res_to_code(Ok(16)) == 16 && res_to_code(EINVAL) == 200);
    }
}
