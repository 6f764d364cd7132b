//! Race rounds for the private-hash cases (`futex-resize`'s `*-race` and
//! `*-vs-thread-create`, `futex-immutable`'s `immutable-vs-*`): each round
//! runs in a freshly forked process (a new `mm` with no table, so every
//! round starts from the same state), releases two calls at once, and
//! reports their results and `CLOCK_MONOTONIC` timestamps through a shared
//! page; the case process checks every round and counts the rounds whose
//! calls overlapped.
//!
//! "Overlapped" is observable: the timestamps taken just before and just
//! after the two syscalls show both inside the kernel at one instant. That is
//! necessary for a kernel race, not sufficient; it is what a case can see.
//!
//! A race case must prove it raced: when no round overlapped, [`run`] FAILS
//! the case ([`Tally::require_overlap`]: `no round overlapped in N rounds
//! (...): the race was not exercised`), for the default rounds and for
//! `--iterations N` / `--seconds S` alike (a count asked for does not
//! change what a pass means). Only a case with nothing to race (the kernel
//! has no private hash: [`Rounds::once_unless`]) checks its one round
//! without it; a case that cannot race on this machine SKIPs before any
//! round, naming why ([`clones_race`]).
//!
//! A round's failure that is the known kernel race the case is named for
//! (`docs/findings.md`; [`Round::known_race`]) does not end the round or
//! the case: the round's later checks run, the rounds go on, every failure
//! is printed as a `# round R: ...` line (at most [`FAILURE_LINES`]), and
//! the case reports any other failure first (a new bug), else the first
//! known one with its message unchanged (the matrix's known failures match
//! it exactly).
//!
//! How many rounds: `--iterations N` (`FUTEX_STRESS_ITERATIONS`) runs exactly
//! N, `--seconds S` (`FUTEX_STRESS_SECONDS`) at least S seconds; without
//! either a case runs until enough rounds overlapped, within a cap.
//!
//! [`SERIALIZE_ENV`]`=1` runs the two calls of every round one after the
//! other (no overlap possible): it proves in a real VM that a race case
//! which did not race fails (`harness run --guest-env
//! FUTEX_RACE_SERIALIZE=1`, `harness/tests/vm.rs`).
//!
//! This file races (a fresh process, two calls at once, clones); the
//! rounds and what a case reports from them are `race/rounds.rs`.

use crate::hash::{self, fail, skip, Res};
use crate::ktap::Outcome;
use crate::sys::Errno;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Nanoseconds of `CLOCK_MONOTONIC` (the same clock in every process).
pub fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// One syscall: its result and the clock just before and just after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// What it returned.
    pub res: Res,
    /// [`now_ns`] just before the call.
    pub start: u64,
    /// [`now_ns`] just after it returned.
    pub end: u64,
}

impl Call {
    /// Runs `f` between two timestamps.
    pub fn timed(f: impl FnOnce() -> Res) -> Call {
        let start = now_ns();
        let res = f();
        Call {
            res,
            start,
            end: now_ns(),
        }
    }

    /// Whether both calls were between their timestamps at one instant.
    pub fn overlaps(&self, other: &Call) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// How long the call took, in nanoseconds.
    pub fn took(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

mod rounds;
pub use rounds::{run, set_race_rounds, Round, Rounds, Tally, FAILURE_LINES};

/// Whether [`SERIALIZE_ENV`] asks for one call after the other.
pub fn serialized() -> bool {
    std::env::var(SERIALIZE_ENV).is_ok_and(|v| v.trim() == "1")
}

/// `FUTEX_RACE_SERIALIZE=1`: every round runs its two calls one after the
/// other, so no round can overlap (the hook that proves the overlap rule).
pub const SERIALIZE_ENV: &str = "FUTEX_RACE_SERIALIZE";

// ---------------------------------------------------- a fresh process

/// One `T` in a [`hash::SharedPage`] (plain data: a forked child writes
/// it, the parent reads it after the child ended).
struct Shared<T: Copy> {
    page: hash::SharedPage,
    _t: std::marker::PhantomData<T>,
}

impl<T: Copy> Shared<T> {
    fn new(init: T) -> Result<Shared<T>, Outcome> {
        const { assert!(std::mem::size_of::<T>() <= 4096) };
        let s = Shared {
            page: hash::SharedPage::new()?,
            _t: std::marker::PhantomData,
        };
        s.set(init);
        Ok(s)
    }

    fn ptr(&self) -> *mut T {
        // Page-aligned and 4096 bytes: it holds a T.
        self.page.as_ptr() as *mut T
    }

    fn get(&self) -> T {
        // SAFETY: a live mapping big and aligned enough for a T, written
        // with a T by `new` before anything reads it.
        unsafe { std::ptr::read_volatile(self.ptr()) }
    }

    fn set(&self, v: T) {
        // SAFETY: as in get.
        unsafe { std::ptr::write_volatile(self.ptr(), v) }
    }
}

/// A round's report through the shared page: its value or why not.
#[derive(Clone, Copy)]
struct Wire<T: Copy> {
    value: Option<T>,
    why_len: usize,
    why: [u8; 400],
}

/// Runs `f` in a forked child (a new `mm`: no private table, nothing set)
/// and returns what it returned. The caller must have no other threads
/// (the child runs Rust code, threads included). The child is killed after
/// `timeout`.
pub fn in_fresh_process<T: Copy>(
    timeout: Duration,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<T, Outcome> {
    let page = Shared::new(Wire::<T> {
        value: None,
        why_len: 0,
        why: [0; 400],
    })?;
    let pid = hash::fork_run(|| {
        let mut w = page.get();
        match f() {
            Ok(v) => w.value = Some(v),
            Err(why) => {
                let b = why.as_bytes();
                let n = b.len().min(w.why.len());
                w.why[..n].copy_from_slice(&b[..n]);
                w.why_len = n;
            }
        }
        page.set(w);
        0
    })?;
    let code = hash::wait_child(pid, crate::cases::scaled(timeout))?;
    let w = page.get();
    match w.value {
        Some(v) if code == 0 => Ok(v),
        _ if w.why_len > 0 => Err(fail(
            String::from_utf8_lossy(&w.why[..w.why_len]).into_owned(),
        )),
        _ => Err(fail(format!(
            "round process exited {code} without a report"
        ))),
    }
}

// ------------------------------------------------------- two calls at once

/// Grace periods [`settled_get`] waits by default: the two a pending
/// replacement needs, and two more for callbacks that run late on a busy
/// emulated vCPU.
pub const SETTLE: u32 = 4;

/// GET once a table replacement the round may have left pending would
/// have landed: such a replacement waits until the old table's per-CPU
/// references are folded over two RCU grace periods (`futex_ref_drop()`,
/// `futex_ref_rcu()`) and happens at the next private futex call. So, up
/// to `grace_periods` times: a grace period (`membarrier(MEMBARRIER_CMD_GLOBAL)`
/// is a `synchronize_rcu()`), a moment for the callbacks, a private futex
/// call and GET, until GET differs from `settled`. Returns the last GET.
pub fn settled_get(settled: Res, grace_periods: u32) -> Res {
    let w = AtomicU32::new(0);
    let mut g = hash::get();
    for _ in 0..grace_periods {
        if g != settled {
            break;
        }
        // SAFETY: membarrier takes no pointers.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                1, /* MEMBARRIER_CMD_GLOBAL */
                0,
                0,
            )
        };
        std::thread::sleep(Duration::from_millis(1));
        let _ = hash::wake(&w, 1, hash::priv32());
        g = hash::get();
    }
    g
}

/// How far round `r` shifts one call against the other: alternately the
/// first and the second waits, by a fraction of `span_ns` that walks the
/// whole span (golden-ratio steps), so the rounds meet the other call at
/// every point of its time in the kernel.
pub fn stagger(r: u64, span_ns: u64) -> (u64, u64) {
    let frac = (r / 2).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    let d = ((frac as u128 * span_ns as u128) >> 53) as u64;
    if r.is_multiple_of(2) {
        (0, d)
    } else {
        (d, 0)
    }
}

fn spin_until(t: u64) {
    while now_ns() < t {
        std::hint::spin_loop();
    }
}

/// Runs `a` (timed) on a new thread and `b` on this one, released
/// together; `a` starts `delay.0` ns and `b` `delay.1` ns after the
/// release. `b` times what it does itself (one call, or a burst). Under
/// [`SERIALIZE_ENV`]`=1`, `b` starts once `a` has returned.
pub fn two_at_once<A, B>(
    delay: (u64, u64),
    a: A,
    b: impl FnOnce() -> B,
) -> Result<(Call, B), String>
where
    A: FnOnce() -> Res + Send + 'static,
{
    let go = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(AtomicBool::new(false));
    let (g, rd) = (go.clone(), ready.clone());
    let racer = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            rd.store(true, Ordering::Release);
            let t = loop {
                let t = g.load(Ordering::Acquire);
                if t != 0 {
                    break t;
                }
                std::hint::spin_loop();
            };
            spin_until(t + delay.0);
            Call::timed(a)
        })
        .map_err(|e| format!("racing thread failed to spawn: {e}"))?;
    let deadline = Instant::now() + crate::cases::scaled(Duration::from_secs(5));
    while !ready.load(Ordering::Acquire) {
        if Instant::now() > deadline {
            return Err("racing thread did not start within 5 s".into());
        }
        std::thread::yield_now();
    }
    let t = now_ns();
    go.store(t, Ordering::Release);
    let join = |racer: std::thread::JoinHandle<Call>| {
        racer
            .join()
            .map_err(|_| "racing thread panicked".to_string())
    };
    if serialized() {
        // `b` starts only once `a` has returned: no overlap possible.
        let theirs = join(racer)?;
        return Ok((theirs, b()));
    }
    spin_until(t + delay.1);
    let mine = b();
    Ok((join(racer)?, mine))
}

// ------------------------------------------------ clone() of a thread

/// What a racing `clone()` makes, and so what it does to the private hash
/// (`docs/futex-abi.md` section 2, `growth`): a thread and a process that
/// shares the mm (`CLONE_VM` alone, vfork) may allocate the automatic
/// table; a fork gets a new mm with no table and leaves the parent's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spawn {
    /// `CLONE_VM | CLONE_THREAD | ...`, as `pthread_create` asks.
    Thread,
    /// `CLONE_VM` without `CLONE_THREAD` or `CLONE_VFORK`.
    CloneVm,
    /// `CLONE_VM | CLONE_VFORK` (`vfork()`, `posix_spawn`).
    Vfork,
    /// Neither (`fork()`): the child checks GET is 0 in its new mm.
    Fork,
}

impl Spawn {
    /// What the case messages call one.
    pub fn name(self) -> &'static str {
        match self {
            Spawn::Thread => "thread",
            Spawn::CloneVm => "CLONE_VM child",
            Spawn::Vfork => "vfork child",
            Spawn::Fork => "fork child",
        }
    }

    /// Whether a clone of this kind calls `futex_hash_allocate_default()`
    /// under `growth` (7.3.4's `copy_process()`).
    pub fn allocates(self, growth: crate::expect::Growth) -> bool {
        use crate::expect::Growth;
        match self {
            Spawn::Thread => growth != Growth::None,
            Spawn::CloneVm => matches!(growth, Growth::VmNotVfork | Growth::AnyVm),
            Spawn::Vfork => growth == Growth::AnyVm,
            Spawn::Fork => false,
        }
    }

    fn flags(self) -> libc::c_int {
        match self {
            Spawn::Thread => {
                libc::CLONE_VM
                    | libc::CLONE_FS
                    | libc::CLONE_FILES
                    | libc::CLONE_SIGHAND
                    | libc::CLONE_THREAD
                    | libc::CLONE_SYSVSEM
                    | libc::CLONE_PARENT_SETTID
                    | libc::CLONE_CHILD_CLEARTID
            }
            Spawn::CloneVm => libc::CLONE_VM | libc::SIGCHLD,
            Spawn::Vfork => libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            Spawn::Fork => libc::SIGCHLD,
        }
    }
}

extern "C" fn thread_exit(_: *mut libc::c_void) -> libc::c_int {
    // SAFETY: exit (not exit_group) of this task only; it touches nothing
    // else (no TLS of its own: it runs on the borrowed stack only this).
    unsafe { libc::syscall(libc::SYS_exit, 0) };
    0
}

/// A fork child's body: exit 1 when GET in its new mm names a table
/// (> 0), else 0 (0, or EINVAL where prctl 78 is unknown); raw syscalls
/// only: it runs on a borrowed stack.
extern "C" fn fork_child_get(_: *mut libc::c_void) -> libc::c_int {
    // SAFETY: prctl and exit of this task; no memory but the stack.
    let get = unsafe {
        libc::syscall(
            libc::SYS_prctl,
            crate::sys::PR_FUTEX_HASH,
            crate::sys::PR_FUTEX_HASH_GET_SLOTS,
            0,
            0,
            0,
        )
    };
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_exit, i64::from(get > 0)) };
    0
}

/// One `clone()` of `kind`, timed around the syscall itself; the child
/// exits at once and is waited for (bounded) before this returns, so the
/// number of threads stays put. `Ok` with an `Err` result is the errno of
/// the clone; `Err` is a child that did not exit, or a fork child whose
/// GET was not 0.
pub fn spawn_once(kind: Spawn) -> Result<Call, String> {
    let mut stack = vec![0u8; 16 * 1024];
    // SAFETY: the end of the vec, 16-byte aligned, is a valid stack top.
    let top = unsafe { stack.as_mut_ptr().add(stack.len()) };
    let top = (top as usize & !15) as *mut libc::c_void;
    let tid = AtomicU32::new(0);
    let tid_ptr = tid.as_ptr() as *mut libc::pid_t;
    let body = if kind == Spawn::Fork {
        fork_child_get
    } else {
        thread_exit
    };
    let call = Call::timed(|| {
        // SAFETY: the child only calls exit (and, forked, prctl) on the
        // stack given, which outlives it (waited for below).
        let r = unsafe {
            libc::clone(
                body,
                top,
                kind.flags(),
                std::ptr::null_mut(),
                tid_ptr,
                std::ptr::null_mut::<libc::c_void>(),
                tid_ptr,
            )
        };
        if r < 0 {
            Err(Errno(
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            ))
        } else {
            Ok(r as i64)
        }
    });
    let pid = match call.res {
        Err(_) => return Ok(call),
        Ok(pid) => pid as libc::pid_t,
    };
    let deadline = Instant::now() + crate::cases::scaled(Duration::from_secs(5));
    if kind != Spawn::Thread {
        let code = match hash::wait_child(pid, deadline.saturating_duration_since(Instant::now())) {
            Ok(code) => code,
            Err(o) => {
                // A child sharing the mm may still run on the stack.
                std::mem::forget(stack);
                let why = match o {
                    Outcome::Fail(w) | Outcome::Skip(w) => w,
                    Outcome::Pass => "ended".into(),
                };
                return Err(format!("{} {pid}: {why}", kind.name()));
            }
        };
        if code != 0 {
            return Err(format!(
                "{} {pid} exited {code}{}",
                kind.name(),
                if kind == Spawn::Fork {
                    ": PR_FUTEX_HASH GET in its new mm named a table (a fork inherits no private hash)"
                } else {
                    ""
                }
            ));
        }
        return Ok(call);
    }
    // CLONE_CHILD_CLEARTID: the kernel zeroes `tid` and wakes it (a shared
    // futex: this wait does not touch the private hash) once the thread is
    // gone from the mm.
    loop {
        let t = tid.load(Ordering::Acquire);
        if t == 0 {
            break;
        }
        if Instant::now() > deadline {
            // The stack must outlive the thread: never free it now.
            std::mem::forget(stack);
            return Err(format!("cloned thread {t} did not exit within 5 s"));
        }
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 10_000_000,
        };
        let _ = hash::futex_legacy(&tid, hash::legacy::WAIT, t, Some(&ts));
    }
    drop(stack);
    Ok(call)
}

// ------------------------------------------------- whole rounds

/// How far apart the rounds stagger the two calls: the longest call seen,
/// so the shifts cover a whole call (50 us .. 50 ms).
#[derive(Debug, Clone, Copy)]
pub struct Span(pub u64);

impl Span {
    /// Starts at 1 ms.
    pub fn new() -> Span {
        Span(1_000_000)
    }

    /// Widens the span to `c`'s time in the kernel (within the bounds).
    pub fn saw(&mut self, c: &Call) {
        self.0 = self.0.max(c.took()).clamp(50_000, 50_000_000);
    }
}

impl Default for Span {
    fn default() -> Span {
        Span::new()
    }
}

/// Round `r` of two calls: a fresh process whose racing thread (made for
/// `a`, so any `growth` but `none` gave the process an automatic 16-slot
/// table) runs `a` against `b` on the process's first thread, staggered by
/// `span`; then `after` there. Returns `(a, b, after)`.
pub fn two_calls<T: Copy>(
    r: u64,
    span: &mut Span,
    timeout: Duration,
    a: impl FnOnce() -> Res + Send + 'static,
    b: impl FnOnce() -> Res,
    after: impl FnOnce() -> T,
) -> Result<(Call, Call, T), Outcome> {
    let stagger = stagger(r, span.0);
    let round = in_fresh_process(timeout, move || {
        let (ca, cb) = two_at_once(stagger, a, || Call::timed(b))?;
        Ok((ca, cb, after()))
    })?;
    span.saw(&round.0);
    span.saw(&round.1);
    Ok(round)
}

/// What a round of [`set_vs_clones`] saw.
#[derive(Debug, Clone, Copy)]
pub struct ClonesRound<T: Copy> {
    /// The SET.
    pub set: Call,
    /// Clones made.
    pub clones: u32,
    /// Clones that overlapped the SET.
    pub overlapping: u32,
    /// The first failed clone: its index and errno.
    pub failed: Option<(u32, Errno)>,
    /// What `after` returned.
    pub after: T,
}

/// The clones of a [`set_vs_clones`] round.
#[derive(Debug, Clone, Copy)]
pub struct Clones {
    /// What each clone makes.
    pub kind: Spawn,
    /// Threads alive in the round's process at every clone.
    pub alive: usize,
    /// Most clones one round makes while its SET is in the kernel.
    pub burst: usize,
}

/// Round `r` of a SET against clones: a fresh process with `alive`
/// threads (`alive - 2` parked, the SET's and the first one); `set` on one
/// thread while the first clones children of `kind` (each exits at once,
/// at most `burst` of them) until the SET has returned; then `after` there.
pub fn set_vs_clones<T: Copy>(
    r: u64,
    span: &mut Span,
    timeout: Duration,
    Clones { kind, alive, burst }: Clones,
    set: impl FnOnce() -> Res + Send + 'static,
    after: impl FnOnce() -> T,
) -> Result<ClonesRound<T>, Outcome> {
    let stagger = stagger(r, span.0);
    let round = in_fresh_process(timeout, move || {
        let why = |o: Outcome| match o {
            Outcome::Fail(w) | Outcome::Skip(w) => w,
            Outcome::Pass => "passed".into(),
        };
        let parked =
            hash::Parked::spawn(alive.saturating_sub(2), Duration::from_secs(30)).map_err(why)?;
        let set_done = Arc::new(AtomicBool::new(false));
        let flag = set_done.clone();
        let set = move || {
            let r = set();
            flag.store(true, Ordering::Release);
            r
        };
        // At least one clone, then clones until the SET has returned.
        let clones = || {
            let mut calls = Vec::new();
            loop {
                let c: Call = spawn_once(kind)?;
                calls.push(c);
                if c.res.is_err() || calls.len() >= burst || set_done.load(Ordering::Acquire) {
                    return Ok::<_, String>(calls);
                }
            }
        };
        let (set, clones) = two_at_once(stagger, set, clones)?;
        let clones = clones?;
        let failed = clones.iter().enumerate().find_map(|(i, c)| match c.res {
            Err(e) => Some((i as u32, e)),
            Ok(_) => None,
        });
        let after = after();
        // The parked threads die with this process.
        drop(parked);
        Ok(ClonesRound {
            set,
            clones: clones.len() as u32,
            overlapping: clones.iter().filter(|c| c.overlaps(&set)).count() as u32,
            failed,
            after,
        })
    })?;
    span.saw(&round.set);
    Ok(round)
}

/// What each racing clone of a SET-vs-clone round allocates, or why it
/// allocates nothing (the reason to SKIP). The round's process already has
/// the automatic table of its `alive - 1` threads (the racing thread's
/// clone made it); a racing clone, with `alive` threads, calls
/// `futex_hash_allocate_default()`, which allocates only a size above the
/// current one: `clamp(roundup_pow_of_two(4 * min(threads, online)), 16,
/// global)` (`docs/futex-abi.md` section 2, "Automatic allocation and
/// growth"). With 5 threads that needs >= 5 online CPUs.
pub fn clone_allocation(alive: usize, online: usize, global: u64) -> Result<u64, String> {
    let have = hash::auto_size_for(alive.saturating_sub(1), online, global);
    let want = hash::auto_size_for(alive, online, global);
    if want > have {
        return Ok(want);
    }
    Err(format!(
        "the automatic private hash at {online} online CPUs is {want} buckets, the same as \
         the {have} the round's process already has ({alive} threads at each clone; \
         futex_hash_allocate_default() asks for clamp(roundup_pow_of_two(4 * min(threads, \
         online CPUs)), 16, {global}) and allocates only above the current size): a clone \
         allocates nothing to race"
    ))
}

/// Before any round of a SET-vs-clone race: SKIP (with
/// [`clone_allocation`]'s reason) where the clones allocate nothing, so the
/// race cannot happen; else say what they allocate and return that size.
pub fn clones_race(alive: usize) -> Result<u64, Outcome> {
    let online = hash::online_cpus();
    let size = clone_allocation(alive, online, hash::global_size()).map_err(skip)?;
    crate::cases::diag(&format!(
        "{alive} threads at each clone on {online} online CPUs: each clone allocates \
         {size} buckets against the SET"
    ));
    Ok(size)
}

/// The `# outcomes: A: n; B: m` line of a race that counts its endings.
pub fn report_outcomes(outcomes: &std::collections::BTreeMap<String, u64>) {
    let counts: Vec<String> = outcomes.iter().map(|(o, n)| format!("{o}: {n}")).collect();
    crate::cases::diag(&format!("outcomes: {}", counts.join("; ")));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_a_common_instant() {
        let c = |start, end| Call {
            res: Ok(0),
            start,
            end,
        };
        assert!(c(0, 10).overlaps(&c(5, 20)));
        assert!(c(5, 20).overlaps(&c(0, 10)));
        assert!(c(0, 10).overlaps(&c(2, 3)));
        assert!(!c(0, 10).overlaps(&c(10, 20)));
        assert!(!c(11, 20).overlaps(&c(0, 10)));
    }

    #[test]
    fn stagger_alternates_sides_and_walks_the_span() {
        let span = 1_000_000;
        let ds: Vec<(u64, u64)> = (0..200).map(|r| stagger(r, span)).collect();
        assert!(ds.iter().step_by(2).all(|d| d.0 == 0));
        assert!(ds.iter().skip(1).step_by(2).all(|d| d.1 == 0));
        let shifts: Vec<u64> = ds.iter().map(|d| d.0 + d.1).collect();
        assert!(shifts.iter().all(|&d| d < span));
        // Every tenth of the span is visited.
        for tenth in 0..10 {
            assert!(shifts.iter().any(|&d| d / (span / 10) == tenth), "{tenth}");
        }
    }

    #[test]
    fn a_fresh_process_reports_its_value_or_why_not() {
        let v = in_fresh_process(Duration::from_secs(10), || Ok((7u32, hash::get())));
        assert_eq!(v.unwrap().0, 7);
        let e = in_fresh_process::<u32>(Duration::from_secs(10), || Err("no luck".into()));
        assert_eq!(e, Err(fail("no luck")));
    }

    #[test]
    fn a_cloned_thread_is_timed_and_gone_when_it_returns() {
        let c = in_fresh_process(Duration::from_secs(10), || spawn_once(Spawn::Thread)).unwrap();
        assert!(matches!(c.res, Ok(tid) if tid > 0), "{c:?}");
        assert!(c.end >= c.start);
    }

    #[test]
    fn clones_allocate_only_above_the_table_the_round_already_has() {
        // 1n2c, 2n2c, 4n1c-dist, 2n2c-1off: <= 4 online CPUs, nothing to race.
        for online in 1..=4 {
            let why = clone_allocation(5, online, 512).unwrap_err();
            assert!(
                why.starts_with(&format!(
                    "the automatic private hash at {online} online CPUs is 16 buckets, the same \
                     as the 16 the round's process already has"
                )),
                "{why}"
            );
            assert!(
                why.ends_with(": a clone allocates nothing to race"),
                "{why}"
            );
        }
        // 2n4c (8 CPUs), 2n9c (18): 5 threads ask for 32 over 16.
        assert_eq!(clone_allocation(5, 5, 2048), Ok(32));
        assert_eq!(clone_allocation(5, 18, 4096), Ok(32));
        // A global table of 16 caps both.
        assert!(clone_allocation(5, 8, 16).is_err());
    }

    #[test]
    fn serialized_calls_never_overlap() {
        // In a fresh process: the variable stays out of this one.
        let (a, b) = in_fresh_process(Duration::from_secs(10), || {
            std::env::set_var(SERIALIZE_ENV, "1");
            let (a, b) = two_at_once(
                (0, 0),
                || {
                    std::thread::sleep(Duration::from_millis(20));
                    Ok(1)
                },
                || Call::timed(|| Ok(2)),
            )?;
            Ok((a, b))
        })
        .unwrap();
        assert_eq!((a.res, b.res), (Ok(1), Ok(2)));
        assert!(!a.overlaps(&b) && b.start >= a.end, "{a:?} {b:?}");
    }
}
