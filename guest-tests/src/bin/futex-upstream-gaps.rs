//! Cases the kernel's own futex selftests (`tools/testing/selftests/futex/
//! functional`) check and our other suites did not: the classic futex(2)
//! operations (wait/wake, timeouts, requeue, PI, requeue-PI), futex_waitv's
//! argument checks, and robust lists. Each is named after what it checks;
//! `docs/kselftest.md` maps upstream cases to these.
//!
//! The timed cases (`futex-upstream-gaps/timeouts.rs`) check when ETIMEDOUT
//! comes on the clock the flags select; the requeue cases
//! (`futex-upstream-gaps/requeue.rs`) count exactly, with every waiter
//! proven asleep first; the owners that die (`futex-upstream-gaps/robust.rs`)
//! are seen waking their waiter from the kernel.

#[path = "futex-upstream-gaps/requeue.rs"]
mod requeue;
#[path = "futex-upstream-gaps/robust.rs"]
mod robust;
#[path = "futex-upstream-gaps/timeouts.rs"]
mod timeouts;

use guest_tests::cases::{Case, Ctx};
use guest_tests::ktap::{done, fail, Check, Outcome};
use guest_tests::mapping::Mapping;
use guest_tests::ops::word;
use guest_tests::sys::{self, Errno, FutexWaitv};
use guest_tests::{cases, clock, hash};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

// The uapi names, as the kernel's selftests spell them.
use sys::futex_op::{
    CMP_REQUEUE_PI as FUTEX_CMP_REQUEUE_PI, LOCK_PI as FUTEX_LOCK_PI,
    PRIVATE as FUTEX_PRIVATE_FLAG, UNLOCK_PI as FUTEX_UNLOCK_PI, WAIT as FUTEX_WAIT,
    WAIT_REQUEUE_PI as FUTEX_WAIT_REQUEUE_PI, WAKE as FUTEX_WAKE,
};
use sys::{OWNER_DIED as FUTEX_OWNER_DIED, TID_MASK as FUTEX_TID_MASK};

/// [`sys::futex`] on pointers, as the selftests call `futex(2)`.
fn futex(
    uaddr: *const u32,
    op: u32,
    val: u32,
    ts: u64,
    uaddr2: *const u32,
    val3: u32,
) -> Result<i64, Errno> {
    sys::futex(uaddr as u64, op, val as u64, ts, uaddr2 as u64, val3 as u64)
}

fn ts_ptr(t: &libc::timespec) -> u64 {
    t as *const _ as u64
}

fn rel(ms: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ms / 1000) as i64,
        tv_nsec: ((ms % 1000) * 1_000_000) as i64,
    }
}

fn abs(clock: libc::clockid_t, ms: u64) -> libc::timespec {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: now is a live timespec.
    unsafe { libc::clock_gettime(clock, &mut now) };
    let ns = now.tv_nsec as u64 + (ms % 1000) * 1_000_000;
    libc::timespec {
        tv_sec: now.tv_sec + (ms / 1000) as i64 + (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    }
}

fn want_err(what: &str, got: Result<i64, Errno>, want: i32) -> Check {
    match got {
        Err(e) if e.0 == want => Ok(()),
        other => Err(fail(format!("{what}: want {}, got {other:?}", Errno(want)))),
    }
}

fn gettid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// The pause before each try of an operation that succeeds once another
/// thread is queued on a futex (a wake that finds it, a requeue that moves
/// it): a try too early finds nobody and changes nothing, so try soon and
/// back off, 1, 2, 4 ... ms up to 100 ms (a fixed 100 ms before every try
/// cost about a second a cell, the waiter being queued within a few ms).
struct Settle(u32);

impl Settle {
    fn new() -> Settle {
        Settle(0)
    }

    fn pause(&mut self) {
        std::thread::sleep(Duration::from_millis((1u64 << self.0.min(7)).min(100)));
        self.0 += 1;
    }
}

fn p(w: &AtomicU32) -> *const u32 {
    w.as_ptr() as *const u32
}

// ---- wait / wake -----------------------------------------------------

fn wait_wake(op_flags: u32, w: &'static AtomicU32) -> Check {
    let waiter = std::thread::spawn(move || {
        let t = rel(10_000);
        futex(
            p(w),
            FUTEX_WAIT | op_flags,
            0,
            ts_ptr(&t),
            std::ptr::null(),
            0,
        )
    });
    let start = Instant::now();
    let mut settle = Settle::new();
    loop {
        settle.pause();
        if futex(p(w), FUTEX_WAKE | op_flags, 1, 0, std::ptr::null(), 0) == Ok(1) {
            break;
        }
        if start.elapsed() > Duration::from_secs(8) {
            return Err("FUTEX_WAKE never found the waiter".into());
        }
    }
    match waiter.join() {
        Ok(Ok(0)) => Ok(()),
        other => Err(fail(format!("waiter returned {other:?}"))),
    }
}

fn wait_wake_private(_: &Ctx) -> Check {
    wait_wake(FUTEX_PRIVATE_FLAG, word(0))
}

/// Shared futex in a MAP_SHARED mapping, waiter in a forked child.
fn shared_fork(m: *mut u32) -> Check {
    // SAFETY: the child only makes raw syscalls and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err("fork failed".into());
    }
    if pid == 0 {
        let t = rel(10_000);
        let code = match futex(m, FUTEX_WAIT, 0, ts_ptr(&t), std::ptr::null(), 0) {
            Ok(0) => 0,
            _ => 1,
        };
        // SAFETY: leaving the child at once.
        unsafe { libc::_exit(code) };
    }
    let start = Instant::now();
    let mut settle = Settle::new();
    let mut woke = false;
    while start.elapsed() < Duration::from_secs(8) {
        settle.pause();
        if futex(m, FUTEX_WAKE, 1, 0, std::ptr::null(), 0) == Ok(1) {
            woke = true;
            break;
        }
    }
    let mut status = 0;
    if !woke {
        // SAFETY: our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // SAFETY: status is a live local.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if !woke {
        return Err("shared FUTEX_WAKE never found the child waiting".into());
    }
    Outcome::check(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        || format!("child waiter ended with status {status:#x}"),
    )
    .pipe_ok()
}

trait PipeOk {
    fn pipe_ok(self) -> Check;
}
impl PipeOk for Outcome {
    fn pipe_ok(self) -> Check {
        match self {
            Outcome::Pass => Ok(()),
            o => Err(o),
        }
    }
}

/// A mapping the forked waiter and its parent share, never unmapped.
fn map(len: usize, flags: i32, fd: i32) -> Result<*mut u32, String> {
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let m = Mapping::new(len, rw, flags, fd).map_err(|e| format!("mmap: {e}"))?;
    Ok(m.leak().addr() as *mut u32)
}

fn wait_wake_shared_anon(_: &Ctx) -> Check {
    shared_fork(map(4096, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1)?)
}

fn temp_file() -> Result<i32, String> {
    let path = std::ffi::CString::new("/tmp").expect("no NUL");
    // SAFETY: a valid path; O_TMPFILE gives an unnamed file.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_TMPFILE | libc::O_RDWR, 0o600) };
    if fd < 0 {
        return Err(format!(
            "open O_TMPFILE: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fd is ours.
    if unsafe { libc::ftruncate(fd, 4096) } != 0 {
        return Err("ftruncate failed".into());
    }
    Ok(fd)
}

fn wait_wake_shared_file(_: &Ctx) -> Check {
    let fd = temp_file()?;
    shared_fork(map(4096, libc::MAP_SHARED, fd)?)
}

/// Upstream futex_wait_private_mapped_file: a private futex in a
/// MAP_PRIVATE file mapping (COW page) between two threads.
fn wait_private_mapped_file(_: &Ctx) -> Check {
    let fd = temp_file()?;
    let m = map(4096, libc::MAP_PRIVATE, fd)? as usize;
    let waiter = std::thread::spawn(move || {
        let t = rel(10_000);
        futex(
            m as *const u32,
            FUTEX_WAIT | FUTEX_PRIVATE_FLAG,
            0,
            ts_ptr(&t),
            std::ptr::null(),
            0,
        )
    });
    let start = Instant::now();
    let mut settle = Settle::new();
    loop {
        settle.pause();
        if futex(
            m as *const u32,
            FUTEX_WAKE | FUTEX_PRIVATE_FLAG,
            1,
            0,
            std::ptr::null(),
            0,
        ) == Ok(1)
        {
            break;
        }
        if start.elapsed() > Duration::from_secs(8) {
            return Err("wake never found the waiter".into());
        }
    }
    match waiter.join() {
        Ok(Ok(0)) => Ok(()),
        o => Err(fail(format!("waiter returned {o:?}"))),
    }
}

/// Upstream futex_wait_uninitialized_heap: waiting on a never-touched
/// anonymous page (value 0) for 1 returns EAGAIN instead of faulting.
fn wait_uninitialized_heap(_: &Ctx) -> Check {
    let m = map(4096, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)?;
    let t = rel(1000);
    want_err(
        "FUTEX_WAIT on an untouched page",
        futex(m, FUTEX_WAIT, 1, ts_ptr(&t), std::ptr::null(), 0),
        libc::EAGAIN,
    )
}

fn wait_wouldblock(_: &Ctx) -> Check {
    let w = word(1);
    let t = rel(1000);
    want_err(
        "FUTEX_WAIT with a stale value",
        futex(
            p(w),
            FUTEX_WAIT | FUTEX_PRIVATE_FLAG,
            0,
            ts_ptr(&t),
            std::ptr::null(),
            0,
        ),
        libc::EAGAIN,
    )
}

/// FUTEX_WAIT's timeout is relative: ETIMEDOUT no earlier than 50 ms after
/// the call (on CLOCK_MONOTONIC) and within `clock::LATE` of it.
fn wait_timeout_relative(_: &Ctx) -> Outcome {
    let w = word(0);
    hash::done(clock::ensure_deadline(
        "FUTEX_WAIT relative 50 ms",
        libc::CLOCK_MONOTONIC,
        Duration::from_millis(50),
        move |_| {
            let t = rel(50);
            futex(
                p(w),
                FUTEX_WAIT | FUTEX_PRIVATE_FLAG,
                0,
                ts_ptr(&t),
                std::ptr::null(),
                0,
            )
        },
    ))
}

// ---- futex_waitv -----------------------------------------------------

const U32_PRIV: u32 = sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE;

/// A futex_waitv of one entry that must fail at once: the word's value,
/// the entry's value and flags, how far its address is off the word, the
/// clock, the errno, what it is.
struct WaitvArgs(u32, u64, u32, u64, libc::clockid_t, i32, &'static str);

fn waitv_args(&WaitvArgs(word_val, val, flags, off, clock, errno, what): &WaitvArgs) -> Check {
    let w = word(word_val);
    let e = FutexWaitv {
        val,
        uaddr: p(w) as u64 + off,
        flags,
        reserved: 0,
    };
    let t = abs(libc::CLOCK_MONOTONIC, 1000);
    want_err(what, sys::futex_waitv(&[e], 0, Some(&t), clock), errno)
}

fn waitv_null_address(_: &Ctx) -> Check {
    let t = abs(libc::CLOCK_MONOTONIC, 1000);
    // A NULL waiters array with nr 1: the kernel must fault cleanly.
    let got = sys::futex_waitv_raw(0, 1, 0, &t as *const _ as u64, libc::CLOCK_MONOTONIC as u64);
    want_err("futex_waitv(NULL, 1)", got, libc::EINVAL)?;
    let e = FutexWaitv {
        val: 0,
        uaddr: 0,
        flags: U32_PRIV,
        reserved: 0,
    };
    // The kernel reads the NULL word and faults (upstream's test gets
    // EINVAL from flags a previous case left in its shared array).
    want_err(
        "futex_waitv entry uaddr NULL",
        sys::futex_waitv(&[e], 0, Some(&t), libc::CLOCK_MONOTONIC),
        libc::EFAULT,
    )
}

/// futex_waitv on a shared (not PRIVATE) futex woken by a forked process.
fn waitv_shared(_: &Ctx) -> Check {
    let m = map(4096, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1)?;
    // SAFETY: the child makes raw syscalls only and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err("fork failed".into());
    }
    if pid == 0 {
        let t = abs(libc::CLOCK_MONOTONIC, 10_000);
        let e = FutexWaitv {
            val: 0,
            uaddr: m as u64,
            flags: sys::FUTEX2_SIZE_U32,
            reserved: 0,
        };
        let code = match sys::futex_waitv(&[e], 0, Some(&t), libc::CLOCK_MONOTONIC) {
            Ok(0) => 0,
            _ => 1,
        };
        // SAFETY: leaving the child.
        unsafe { libc::_exit(code) };
    }
    let start = Instant::now();
    let mut settle = Settle::new();
    let mut woke = false;
    while start.elapsed() < Duration::from_secs(8) {
        settle.pause();
        if sys::futex_wake(m, sys::FUTEX_BITSET_MATCH_ANY, 1, sys::FUTEX2_SIZE_U32) == Ok(1) {
            woke = true;
            break;
        }
    }
    if !woke {
        // SAFETY: our child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: status is a live local.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if !woke {
        return Err("futex_wake never found the child in futex_waitv".into());
    }
    Outcome::check(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        || format!("child ended {status:#x}"),
    )
    .pipe_ok()
}

/// The first line of `--help`.
const ABOUT: &str =
    "what the kernel's futex selftests check and the other suites did not: futex(2) operations, PI, requeue-PI, futex_waitv, robust lists (docs/kselftest.md).";

/// A case body: a function of its own (returning a check or an
/// outcome), or a futex_waitv argument check.
enum Body {
    C(fn(&Ctx) -> Check),
    O(fn(&Ctx) -> Outcome),
    Waitv(WaitvArgs),
}
use Body::{Waitv, C, O};
const MONO: libc::clockid_t = libc::CLOCK_MONOTONIC;

/// Every case, in order.
#[rustfmt::skip] // one row a line
const CASES: &[(&str, Body)] = &[
    ("wait-wake-private", C(wait_wake_private)),
    ("wait-wake-shared-anon", C(wait_wake_shared_anon)),
    ("wait-wake-shared-file", C(wait_wake_shared_file)),
    ("wait-private-mapped-file", C(wait_private_mapped_file)),
    ("wait-uninitialized-heap", C(wait_uninitialized_heap)),
    ("wait-wouldblock", C(wait_wouldblock)),
    ("wait-timeout-relative", O(wait_timeout_relative)),
    ("wait-bitset-timeout-absolute", O(timeouts::wait_bitset_timeout_absolute)),
    ("waitv-timeout", O(timeouts::waitv_timeout)),
    ("waitv-wouldblock", Waitv(WaitvArgs(1, 0, U32_PRIV, 0, MONO, libc::EAGAIN, "futex_waitv stale value"))),
    // A flag bit futex2 does not define, in the entry.
    ("waitv-invalid-flag", Waitv(WaitvArgs(0, 0, U32_PRIV | 0x1000, 0, MONO, libc::EINVAL, "futex_waitv entry flags 0x1000"))),
    ("waitv-unaligned-einval", Waitv(WaitvArgs(0, 0, U32_PRIV, 1, MONO, libc::EINVAL, "futex_waitv unaligned uaddr"))),
    ("waitv-null-address", C(waitv_null_address)),
    ("waitv-invalid-clockid", Waitv(WaitvArgs(0, 0, U32_PRIV, 0, libc::CLOCK_TAI, libc::EINVAL, "futex_waitv clockid CLOCK_TAI"))),
    ("waitv-shared", C(waitv_shared)),
    ("requeue-single", O(requeue::requeue_single)),
    ("requeue-multiple", O(requeue::requeue_multiple)),
    ("lock-pi-timeout", O(timeouts::lock_pi_timeout)),
    ("requeue-pi-timeout", O(timeouts::requeue_pi_timeout)),
    ("requeue-pi-wakes-owner", C(requeue::requeue_pi_wakes_owner)),
    ("requeue-pi-mismatched-ops", C(requeue::requeue_pi_mismatched_ops)),
    ("requeue-pi-signal-restart", O(requeue::requeue_pi_signal_restart)),
    ("lock-pi-owner-dies", C(robust::lock_pi_owner_dies)),
    ("robust-set-invalid-size", C(robust::robust_set_invalid_size)),
    ("robust-get-self", C(robust::robust_get_self)),
    ("robust-owner-died", O(robust::robust_owner_died)),
];

fn run(ctx: &Ctx) -> Outcome {
    match CASES.iter().find(|r| r.0 == ctx.case).map(|r| &r.1) {
        Some(C(f)) => done(f(ctx)),
        Some(O(f)) => f(ctx),
        Some(Waitv(args)) => done(waitv_args(args)),
        None => fail(format!("no row for case {}", ctx.case)),
    }
}

fn main() {
    let cases: Vec<Case> = CASES.iter().map(|r| Case::new(r.0, run)).collect();
    cases::main(ABOUT, &cases);
}
