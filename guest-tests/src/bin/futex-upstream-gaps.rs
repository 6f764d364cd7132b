//! Cases the kernel's own futex selftests (`tools/testing/selftests/futex/
//! functional`) check and our other suites did not: the classic futex(2)
//! operations (wait/wake, timeouts, requeue, PI, requeue-PI), futex_waitv's
//! argument checks, and robust lists. Each is named after what it checks;
//! `docs/kselftest.md` maps upstream cases to these.

use guest_tests::cases::{self, Case, Ctx};
use guest_tests::ktap::Outcome;
use guest_tests::sys::{self, Errno, FutexWaitv};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

type R = Result<Outcome, String>;

fn r(res: R) -> Outcome {
    res.unwrap_or_else(Outcome::Fail)
}

const FUTEX_WAIT: i32 = 0;
const FUTEX_WAKE: i32 = 1;
const FUTEX_CMP_REQUEUE: i32 = 4;
const FUTEX_LOCK_PI: i32 = 6;
const FUTEX_UNLOCK_PI: i32 = 7;
const FUTEX_WAIT_BITSET: i32 = 9;
const FUTEX_WAIT_REQUEUE_PI: i32 = 11;
const FUTEX_CMP_REQUEUE_PI: i32 = 12;
const FUTEX_PRIVATE_FLAG: i32 = 128;
const FUTEX_CLOCK_REALTIME: i32 = 256;
const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;

/// Raw futex(2): `(uaddr, op, val, timeout-or-val2, uaddr2, val3)`.
fn futex(
    uaddr: *const u32,
    op: i32,
    val: u32,
    ts: u64,
    uaddr2: *const u32,
    val3: u32,
) -> Result<i64, Errno> {
    // SAFETY: the kernel validates every pointer.
    let r = unsafe { libc::syscall(libc::SYS_futex, uaddr, op, val, ts, uaddr2, val3) };
    if r < 0 {
        Err(Errno(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    } else {
        Ok(r)
    }
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

fn want_err(what: &str, got: Result<i64, Errno>, want: i32) -> R {
    match got {
        Err(e) if e.0 == want => Ok(Outcome::Pass),
        other => Err(format!("{what}: want {}, got {other:?}", Errno(want))),
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

/// A leaked, 'static futex word (threads outlive closures).
fn word(v: u32) -> &'static AtomicU32 {
    Box::leak(Box::new(AtomicU32::new(v)))
}

fn p(w: &AtomicU32) -> *const u32 {
    w.as_ptr() as *const u32
}

// ---- wait / wake -----------------------------------------------------

fn wait_wake(op_flags: i32, w: &'static AtomicU32) -> R {
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
        Ok(Ok(0)) => Ok(Outcome::Pass),
        other => Err(format!("waiter returned {other:?}")),
    }
}

fn wait_wake_private(_: &Ctx) -> R {
    wait_wake(FUTEX_PRIVATE_FLAG, word(0))
}

/// Shared futex in a MAP_SHARED mapping, waiter in a forked child.
fn shared_fork(m: *mut u32) -> R {
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
    fn pipe_ok(self) -> R;
}
impl PipeOk for Outcome {
    fn pipe_ok(self) -> R {
        match self {
            Outcome::Fail(m) => Err(m),
            o => Ok(o),
        }
    }
}

fn map(len: usize, flags: i32, fd: i32) -> Result<*mut u32, String> {
    // SAFETY: a fresh mapping, checked below.
    let a = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    if a == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    Ok(a as *mut u32)
}

fn wait_wake_shared_anon(_: &Ctx) -> R {
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

fn wait_wake_shared_file(_: &Ctx) -> R {
    let fd = temp_file()?;
    shared_fork(map(4096, libc::MAP_SHARED, fd)?)
}

/// Upstream futex_wait_private_mapped_file: a private futex in a
/// MAP_PRIVATE file mapping (COW page) between two threads.
fn wait_private_mapped_file(_: &Ctx) -> R {
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
        Ok(Ok(0)) => Ok(Outcome::Pass),
        o => Err(format!("waiter returned {o:?}")),
    }
}

/// Upstream futex_wait_uninitialized_heap: waiting on a never-touched
/// anonymous page (value 0) for 1 returns EAGAIN instead of faulting.
fn wait_uninitialized_heap(_: &Ctx) -> R {
    let m = map(4096, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)?;
    let t = rel(1000);
    want_err(
        "FUTEX_WAIT on an untouched page",
        futex(m, FUTEX_WAIT, 1, ts_ptr(&t), std::ptr::null(), 0),
        libc::EAGAIN,
    )
}

fn wait_wouldblock(_: &Ctx) -> R {
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

fn wait_timeout_relative(_: &Ctx) -> R {
    let w = word(0);
    let t = rel(50);
    let s = Instant::now();
    want_err(
        "FUTEX_WAIT relative 50 ms",
        futex(
            p(w),
            FUTEX_WAIT | FUTEX_PRIVATE_FLAG,
            0,
            ts_ptr(&t),
            std::ptr::null(),
            0,
        ),
        libc::ETIMEDOUT,
    )?;
    Outcome::check(s.elapsed() >= Duration::from_millis(50), || {
        format!("returned after {:?}", s.elapsed())
    })
    .pipe_ok()
}

fn wait_bitset_timeout_absolute(_: &Ctx) -> R {
    let w = word(0);
    for (clock, flag) in [
        (libc::CLOCK_MONOTONIC, 0),
        (libc::CLOCK_REALTIME, FUTEX_CLOCK_REALTIME),
    ] {
        let t = abs(clock, 50);
        want_err(
            &format!("FUTEX_WAIT_BITSET absolute, clock {clock}"),
            futex(
                p(w),
                FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG | flag,
                0,
                ts_ptr(&t),
                std::ptr::null(),
                u32::MAX,
            ),
            libc::ETIMEDOUT,
        )?;
    }
    Ok(Outcome::Pass)
}

// ---- futex_waitv -----------------------------------------------------

fn waitv_entry(w: &AtomicU32, val: u64, flags: u32) -> FutexWaitv {
    FutexWaitv {
        val,
        uaddr: p(w) as u64,
        flags,
        reserved: 0,
    }
}

const U32_PRIV: u32 = sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE;

fn waitv_timeout(_: &Ctx) -> R {
    let w = word(0);
    let t = abs(libc::CLOCK_MONOTONIC, 50);
    want_err(
        "futex_waitv timeout",
        sys::futex_waitv(
            &[waitv_entry(w, 0, U32_PRIV)],
            0,
            Some(&t),
            libc::CLOCK_MONOTONIC,
        ),
        libc::ETIMEDOUT,
    )
}

fn waitv_wouldblock(_: &Ctx) -> R {
    let w = word(1);
    let t = abs(libc::CLOCK_MONOTONIC, 1000);
    want_err(
        "futex_waitv stale value",
        sys::futex_waitv(
            &[waitv_entry(w, 0, U32_PRIV)],
            0,
            Some(&t),
            libc::CLOCK_MONOTONIC,
        ),
        libc::EAGAIN,
    )
}

fn waitv_invalid_flag(_: &Ctx) -> R {
    let w = word(0);
    let t = abs(libc::CLOCK_MONOTONIC, 1000);
    // A flag bit futex2 does not define, in the entry.
    want_err(
        "futex_waitv entry flags 0x1000",
        sys::futex_waitv(
            &[waitv_entry(w, 0, U32_PRIV | 0x1000)],
            0,
            Some(&t),
            libc::CLOCK_MONOTONIC,
        ),
        libc::EINVAL,
    )
}

fn waitv_unaligned_einval(_: &Ctx) -> R {
    let w = word(0);
    let mut e = waitv_entry(w, 0, U32_PRIV);
    e.uaddr += 1;
    let t = abs(libc::CLOCK_MONOTONIC, 1000);
    want_err(
        "futex_waitv unaligned uaddr",
        sys::futex_waitv(&[e], 0, Some(&t), libc::CLOCK_MONOTONIC),
        libc::EINVAL,
    )
}

fn waitv_null_address(_: &Ctx) -> R {
    let t = abs(libc::CLOCK_MONOTONIC, 1000);
    // SAFETY: a NULL waiters array with nr 1: the kernel must fault cleanly.
    let r = unsafe {
        libc::syscall(
            sys::nr::FUTEX_WAITV,
            0usize,
            1u32,
            0u32,
            &t as *const _,
            libc::CLOCK_MONOTONIC,
        )
    };
    let got = if r < 0 {
        Err(Errno(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    } else {
        Ok(r)
    };
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

fn waitv_invalid_clockid(_: &Ctx) -> R {
    let w = word(0);
    let t = abs(libc::CLOCK_MONOTONIC, 1000);
    want_err(
        "futex_waitv clockid CLOCK_TAI",
        sys::futex_waitv(&[waitv_entry(w, 0, U32_PRIV)], 0, Some(&t), libc::CLOCK_TAI),
        libc::EINVAL,
    )
}

/// futex_waitv on a shared (not PRIVATE) futex woken by a forked process.
fn waitv_shared(_: &Ctx) -> R {
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

// ---- requeue -----------------------------------------------------------

/// FUTEX_CMP_REQUEUE A -> B (waking none), then FUTEX_WAKE B: every
/// waiter must be woken by a wake on B (none times out, A is never woken),
/// and the wakes on B must count each waiter once. A waiter woken
/// spuriously after its requeue waits on A again (`__futex_wait()` retries
/// on its own address; docs/futex-abi.md, section 1), so requeue and wake
/// repeat until every thread has returned, and a requeue total above n is
/// a diagnostic, not a failure.
fn requeue(n: usize) -> R {
    let (f1, f2) = (word(0), word(0));
    let returned: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
    let waiters: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                let t = rel(20_000);
                let r = futex(
                    p(f1),
                    FUTEX_WAIT | FUTEX_PRIVATE_FLAG,
                    0,
                    ts_ptr(&t),
                    std::ptr::null(),
                    0,
                );
                returned.fetch_add(1, Ordering::SeqCst);
                r
            })
        })
        .collect();
    // Requeue everything from A to B (waking none) until n moves were
    // counted, then wake B; again while a thread has not returned.
    let start = Instant::now();
    let mut settle = Settle::new();
    let (mut moved, mut woke) = (0i64, 0i64);
    while returned.load(Ordering::SeqCst) < n && start.elapsed() < Duration::from_secs(10) {
        settle.pause();
        moved += futex(
            p(f1),
            FUTEX_CMP_REQUEUE | FUTEX_PRIVATE_FLAG,
            0,
            i32::MAX as u64,
            p(f2),
            0,
        )
        .map_err(|e| format!("FUTEX_CMP_REQUEUE: {e}"))?;
        if moved >= n as i64 {
            woke += futex(
                p(f2),
                FUTEX_WAKE | FUTEX_PRIVATE_FLAG,
                i32::MAX as u32,
                0,
                std::ptr::null(),
                0,
            )
            .map_err(|e| format!("FUTEX_WAKE B: {e}"))?;
        }
    }
    for w in waiters {
        match w.join() {
            Ok(Ok(0)) => {}
            // A waiter no wake on B found times out still queued; one a
            // wake found returns 0.
            o => {
                return Err(format!(
                    "a waiter returned {o:?} (the requeues moved {moved}, the wakes on B woke {woke} of {n})"
                ))
            }
        }
    }
    if moved > n as i64 {
        cases::diag(&format!(
            "the requeues counted {moved} moves for {n} waiters: a waiter woken spuriously after its requeue waited on A again"
        ));
    }
    Outcome::check(moved >= n as i64 && woke == n as i64, || {
        format!("the requeues moved {moved} and the wakes on B woke {woke} of {n} waiters")
    })
    .pipe_ok()
}

fn requeue_single(_: &Ctx) -> R {
    requeue(1)
}

fn requeue_multiple(_: &Ctx) -> R {
    requeue(10)
}

// ---- PI and requeue-PI -------------------------------------------------

fn lock_pi_timeout(_: &Ctx) -> R {
    let m = word(0);
    futex(
        p(m),
        FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG,
        0,
        0,
        std::ptr::null(),
        0,
    )
    .map_err(|e| format!("first FUTEX_LOCK_PI: {e}"))?;
    let t = std::thread::spawn(move || {
        let ts = abs(libc::CLOCK_REALTIME, 50);
        futex(
            p(m),
            FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG,
            0,
            ts_ptr(&ts),
            std::ptr::null(),
            0,
        )
    })
    .join()
    .map_err(|_| "thread panicked".to_string())?;
    want_err(
        "FUTEX_LOCK_PI on a held lock with a timeout",
        t,
        libc::ETIMEDOUT,
    )
}

fn requeue_pi_timeout(_: &Ctx) -> R {
    let (f1, f2) = (word(0), word(0));
    let ts = abs(libc::CLOCK_MONOTONIC, 50);
    want_err(
        "FUTEX_WAIT_REQUEUE_PI with nobody requeueing",
        futex(
            p(f1),
            FUTEX_WAIT_REQUEUE_PI | FUTEX_PRIVATE_FLAG,
            0,
            ts_ptr(&ts),
            p(f2),
            0,
        ),
        libc::ETIMEDOUT,
    )
}

/// A waiter in FUTEX_WAIT_REQUEUE_PI on f1 is requeued to the PI futex f2
/// held by the waker; when the waker unlocks, the waiter owns f2.
fn requeue_pi_wakes_owner(_: &Ctx) -> R {
    let (f1, f2) = (word(0), word(0));
    futex(
        p(f2),
        FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG,
        0,
        0,
        std::ptr::null(),
        0,
    )
    .map_err(|e| format!("lock f2: {e}"))?;
    let waiter = std::thread::spawn(move || {
        let ts = abs(libc::CLOCK_MONOTONIC, 20_000);
        let r = futex(
            p(f1),
            FUTEX_WAIT_REQUEUE_PI | FUTEX_PRIVATE_FLAG,
            0,
            ts_ptr(&ts),
            p(f2),
            0,
        );
        let owner = f2.load(Ordering::SeqCst) & FUTEX_TID_MASK;
        let me = gettid();
        if r.is_ok() && owner == me {
            let _ = futex(
                p(f2),
                FUTEX_UNLOCK_PI | FUTEX_PRIVATE_FLAG,
                0,
                0,
                std::ptr::null(),
                0,
            );
        }
        (r, owner, me)
    });
    let start = Instant::now();
    let mut settle = Settle::new();
    loop {
        settle.pause();
        // nr_wake must be 1 for requeue-PI; val2 (nr_requeue) in the timeout slot.
        match futex(
            p(f1),
            FUTEX_CMP_REQUEUE_PI | FUTEX_PRIVATE_FLAG,
            1,
            1,
            p(f2),
            0,
        ) {
            Ok(n) if n >= 1 => break,
            Ok(_) => {}
            Err(e) => return Err(format!("FUTEX_CMP_REQUEUE_PI: {e}")),
        }
        if start.elapsed() > Duration::from_secs(10) {
            return Err("FUTEX_CMP_REQUEUE_PI never found the waiter".into());
        }
    }
    futex(
        p(f2),
        FUTEX_UNLOCK_PI | FUTEX_PRIVATE_FLAG,
        0,
        0,
        std::ptr::null(),
        0,
    )
    .map_err(|e| format!("unlock f2: {e}"))?;
    let (res, owner, tid) = waiter.join().map_err(|_| "waiter panicked".to_string())?;
    Outcome::check(res == Ok(0) && owner == tid, || {
        format!("waiter got {res:?}, f2 owner {owner}, waiter tid {tid}")
    })
    .pipe_ok()
}

/// Upstream futex_requeue_pi_mismatched_ops: FUTEX_CMP_REQUEUE_PI on a
/// plain FUTEX_WAIT waiter is EINVAL (and the waiter is still woken by a
/// plain wake).
fn requeue_pi_mismatched_ops(_: &Ctx) -> R {
    let (f1, f2) = (word(0), word(0));
    let waiter = std::thread::spawn(move || {
        let ts = rel(20_000);
        futex(
            p(f1),
            FUTEX_WAIT | FUTEX_PRIVATE_FLAG,
            0,
            ts_ptr(&ts),
            std::ptr::null(),
            0,
        )
    });
    let start = Instant::now();
    let mut settle = Settle::new();
    let mut res = Ok(0);
    while start.elapsed() < Duration::from_secs(3) {
        settle.pause();
        res = futex(
            p(f1),
            FUTEX_CMP_REQUEUE_PI | FUTEX_PRIVATE_FLAG,
            1,
            0,
            p(f2),
            0,
        );
        if res.is_err() {
            break;
        }
    }
    let _ = futex(
        p(f1),
        FUTEX_WAKE | FUTEX_PRIVATE_FLAG,
        1,
        0,
        std::ptr::null(),
        0,
    );
    let _ = waiter.join();
    want_err(
        "FUTEX_CMP_REQUEUE_PI on a FUTEX_WAIT waiter",
        res,
        libc::EINVAL,
    )
}

extern "C" fn on_usr1(_: i32) {}

/// Upstream futex_requeue_pi_signal_restart: a signal to a waiter in
/// FUTEX_WAIT_REQUEUE_PI does not end the wait early with a spurious
/// success; the waiter still gets the lock after the requeue.
fn requeue_pi_signal_restart(_: &Ctx) -> R {
    // SAFETY: installing a no-op handler without SA_RESTART.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    let (f1, f2) = (word(0), word(0));
    let tid = word(0);
    futex(
        p(f2),
        FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG,
        0,
        0,
        std::ptr::null(),
        0,
    )
    .map_err(|e| format!("lock f2: {e}"))?;
    let waiter = std::thread::spawn(move || {
        tid.store(gettid(), Ordering::SeqCst);
        let mut early = 0;
        loop {
            let r = futex(
                p(f1),
                FUTEX_WAIT_REQUEUE_PI | FUTEX_PRIVATE_FLAG,
                0,
                0,
                p(f2),
                0,
            );
            match r {
                // Interrupted before the requeue: wait again, as upstream does.
                Err(e) if e.0 == libc::EINTR || e.0 == libc::EAGAIN => early += 1,
                r => {
                    let owner = f2.load(Ordering::SeqCst) & FUTEX_TID_MASK;
                    if owner == gettid() {
                        let _ = futex(
                            p(f2),
                            FUTEX_UNLOCK_PI | FUTEX_PRIVATE_FLAG,
                            0,
                            0,
                            std::ptr::null(),
                            0,
                        );
                    }
                    return (r, owner == gettid(), early);
                }
            }
        }
    });
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    for _ in 0..5 {
        // A signal every 100 ms while it waits (5 in all).
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: a live thread of this process.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                libc::getpid(),
                tid.load(Ordering::SeqCst),
                libc::SIGUSR1,
            )
        };
    }
    let start = Instant::now();
    let mut settle = Settle::new();
    loop {
        settle.pause();
        match futex(
            p(f1),
            FUTEX_CMP_REQUEUE_PI | FUTEX_PRIVATE_FLAG,
            1,
            1,
            p(f2),
            0,
        ) {
            Ok(n) if n >= 1 => break,
            Ok(_) => {}
            Err(e) => return Err(format!("FUTEX_CMP_REQUEUE_PI: {e}")),
        }
        if start.elapsed() > Duration::from_secs(10) {
            return Err("never requeued the waiter".into());
        }
    }
    futex(
        p(f2),
        FUTEX_UNLOCK_PI | FUTEX_PRIVATE_FLAG,
        0,
        0,
        std::ptr::null(),
        0,
    )
    .map_err(|e| format!("unlock f2: {e}"))?;
    let (res, owns, early) = waiter.join().map_err(|_| "waiter panicked".to_string())?;
    cases::diag(&format!(
        "waiter restarted {early} times before the requeue"
    ));
    Outcome::check(res == Ok(0) && owns, || {
        format!("waiter got {res:?}, owned f2: {owns}")
    })
    .pipe_ok()
}

/// Upstream futex_lock_pi_exiting (owner_dies_with_blocked_waiter): the
/// owner of a PI futex exits with a waiter blocked in FUTEX_LOCK_PI; the
/// waiter gets the lock with FUTEX_OWNER_DIED set.
fn lock_pi_owner_dies(_: &Ctx) -> R {
    let m = word(0);
    let locked = word(0);
    let owner = std::thread::spawn(move || {
        let r = futex(
            p(m),
            FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG,
            0,
            0,
            std::ptr::null(),
            0,
        );
        locked.store(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        r
    });
    while locked.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    let waiter = std::thread::spawn(move || {
        let ts = abs(libc::CLOCK_REALTIME, 20_000);
        let r = futex(
            p(m),
            FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG,
            0,
            ts_ptr(&ts),
            std::ptr::null(),
            0,
        );
        (r, m.load(Ordering::SeqCst), gettid())
    });
    let o = owner.join().map_err(|_| "owner panicked".to_string())?;
    if o != Ok(0) {
        return Err(format!("owner's FUTEX_LOCK_PI: {o:?}"));
    }
    let (r, val, tid) = waiter.join().map_err(|_| "waiter panicked".to_string())?;
    Outcome::check(
        r == Ok(0) && val & FUTEX_TID_MASK == tid && val & FUTEX_OWNER_DIED != 0,
        || format!("waiter got {r:?}, word {val:#x}, its tid {tid}"),
    )
    .pipe_ok()
}

// ---- robust lists ---------------------------------------------------------

#[repr(C)]
struct RobustHead {
    next: usize,
    offset: isize,
    pending: usize,
}

#[repr(C)]
struct RobustLock {
    next: AtomicUsize,
    word: AtomicU32,
}

fn set_robust_list(head: *const RobustHead, len: usize) -> Result<i64, Errno> {
    // SAFETY: the kernel only records the pointer.
    let r = unsafe { libc::syscall(libc::SYS_set_robust_list, head, len) };
    if r < 0 {
        Err(Errno(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    } else {
        Ok(r)
    }
}

fn robust_set_invalid_size(_: &Ctx) -> R {
    let head = Box::leak(Box::new(RobustHead {
        next: 0,
        offset: 0,
        pending: 0,
    }));
    head.next = head as *const _ as usize;
    want_err(
        "set_robust_list with len + 1",
        set_robust_list(head, std::mem::size_of::<RobustHead>() + 1),
        libc::EINVAL,
    )
}

fn robust_get_self(_: &Ctx) -> R {
    let head = Box::leak(Box::new(RobustHead {
        next: 0,
        offset: 0,
        pending: 0,
    }));
    head.next = head as *const _ as usize;
    set_robust_list(head, std::mem::size_of::<RobustHead>())
        .map_err(|e| format!("set_robust_list: {e}"))?;
    let (mut got, mut len): (usize, usize) = (0, 0);
    // SAFETY: both out-pointers are live locals.
    let r = unsafe { libc::syscall(libc::SYS_get_robust_list, 0, &mut got, &mut len) };
    Outcome::check(
        r == 0 && got == head as *const _ as usize && len == std::mem::size_of::<RobustHead>(),
        || {
            format!(
                "get_robust_list: {r}, head {got:#x} (set {:#x}), len {len}",
                head as *const _ as usize
            )
        },
    )
    .pipe_ok()
}

/// Upstream robust_list test_robustness: a thread holding a robust lock
/// exits; the kernel sets FUTEX_OWNER_DIED and wakes the waiter.
fn robust_owner_died(_: &Ctx) -> R {
    let lock: &'static RobustLock = Box::leak(Box::new(RobustLock {
        next: AtomicUsize::new(0),
        word: AtomicU32::new(0),
    }));
    let held = word(0);
    let owner = std::thread::spawn(move || {
        let head = Box::leak(Box::new(RobustHead {
            next: 0,
            offset: std::mem::offset_of!(RobustLock, word) as isize,
            pending: 0,
        }));
        let head_addr = head as *const RobustHead as usize;
        // The list: head -> lock -> head.
        lock.next.store(head_addr, Ordering::SeqCst);
        head.next = lock as *const RobustLock as usize;
        let r = set_robust_list(head, std::mem::size_of::<RobustHead>());
        lock.word.store(gettid(), Ordering::SeqCst);
        held.store(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(200));
        r
    });
    while held.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    let w = lock.word.load(Ordering::SeqCst);
    // Mark waiters present, then wait for the owner's death.
    lock.word.store(w | 0x8000_0000, Ordering::SeqCst);
    let ts = rel(10_000);
    let r = futex(
        p(&lock.word),
        FUTEX_WAIT,
        w | 0x8000_0000,
        ts_ptr(&ts),
        std::ptr::null(),
        0,
    );
    let o = owner.join().map_err(|_| "owner panicked".to_string())?;
    if o != Ok(0) {
        return Err(format!("set_robust_list: {o:?}"));
    }
    let after = lock.word.load(Ordering::SeqCst);
    Outcome::check(
        after & FUTEX_OWNER_DIED != 0 && matches!(r, Ok(0) | Err(Errno(libc::EAGAIN))),
        || format!("wait returned {r:?}; lock word after the owner died {after:#x}"),
    )
    .pipe_ok()
}

/// The first line of `--help`.
const ABOUT: &str =
    "what the kernel's futex selftests check and the other suites did not: futex(2) operations, PI, requeue-PI, futex_waitv, robust lists (docs/kselftest.md).";

fn main() {
    let c = |name, f| Case::new(name, f);
    cases::main(
        ABOUT,
        &[
            c("wait-wake-private", |x| r(wait_wake_private(x))),
            c("wait-wake-shared-anon", |x| r(wait_wake_shared_anon(x))),
            c("wait-wake-shared-file", |x| r(wait_wake_shared_file(x))),
            c("wait-private-mapped-file", |x| {
                r(wait_private_mapped_file(x))
            }),
            c("wait-uninitialized-heap", |x| r(wait_uninitialized_heap(x))),
            c("wait-wouldblock", |x| r(wait_wouldblock(x))),
            c("wait-timeout-relative", |x| r(wait_timeout_relative(x))),
            c("wait-bitset-timeout-absolute", |x| {
                r(wait_bitset_timeout_absolute(x))
            }),
            c("waitv-timeout", |x| r(waitv_timeout(x))),
            c("waitv-wouldblock", |x| r(waitv_wouldblock(x))),
            c("waitv-invalid-flag", |x| r(waitv_invalid_flag(x))),
            c("waitv-unaligned-einval", |x| r(waitv_unaligned_einval(x))),
            c("waitv-null-address", |x| r(waitv_null_address(x))),
            c("waitv-invalid-clockid", |x| r(waitv_invalid_clockid(x))),
            c("waitv-shared", |x| r(waitv_shared(x))),
            c("requeue-single", |x| r(requeue_single(x))),
            c("requeue-multiple", |x| r(requeue_multiple(x))),
            c("lock-pi-timeout", |x| r(lock_pi_timeout(x))),
            c("requeue-pi-timeout", |x| r(requeue_pi_timeout(x))),
            c("requeue-pi-wakes-owner", |x| r(requeue_pi_wakes_owner(x))),
            c("requeue-pi-mismatched-ops", |x| {
                r(requeue_pi_mismatched_ops(x))
            }),
            c("requeue-pi-signal-restart", |x| {
                r(requeue_pi_signal_restart(x))
            }),
            c("lock-pi-owner-dies", |x| r(lock_pi_owner_dies(x))),
            c("robust-set-invalid-size", |x| r(robust_set_invalid_size(x))),
            c("robust-get-self", |x| r(robust_get_self(x))),
            c("robust-owner-died", |x| r(robust_owner_died(x))),
        ],
    );
}
