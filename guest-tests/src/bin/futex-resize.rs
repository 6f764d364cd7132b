//! Resizing the private futex hash with waiters queued, concurrent SETs,
//! automatic sizing, and what fork / exec / vfork / posix_spawn /
//! clone(CLONE_VM) do to it (`docs/futex-abi.md` section 2).
//!
//! On kernels without the private hash (`private_hash=0`) the same cases
//! run: every SET must fail exactly as expected (EINVAL) and every waiter
//! must still be woken with exact counts.
//!
//! Stress knobs: `cases::main` rejects unknown arguments, so the stress
//! amount comes from the environment (inherited by the case processes):
//! `FUTEX_STRESS_ITERATIONS=N` (`--iterations N`; default 3) resize rounds
//! of the `*-load` cases and exactly N rounds of each race case, and
//! `FUTEX_STRESS_SECONDS=S` (`--seconds S`; default 0) minimum wall time
//! for both; their timeouts grow with them. Without them a race case runs
//! 10 rounds, then until 10 of them overlapped (both calls inside the kernel
//! at one instant, by `CLOCK_MONOTONIC` just before and after each), at
//! most 200 rounds or 2 s, and prints `# rounds: N, overlapped: M`
//! (`guest_tests::race`). Each round is a fresh process. A race case in
//! which no round overlapped FAILS (`no round overlapped in N rounds (...):
//! the race was not exercised`), with `--iterations N` too;
//! `FUTEX_RACE_SERIALIZE=1` runs each round's two calls one after the other,
//! which makes every race case fail so.
//!
//! Cases (33):
//! - `wait-private-resize`, `wait-global-resize`: 4 futex_wait waiters queued
//!   on a 16-slot table survive SET 128 -> 32 (resp. SET 0): one wake wakes
//!   exactly 4, each returns 0, a second wake wakes 0.
//! - `waitv-private-resize`, `waitv-global-resize`: 3 futex_waitv waiters on
//!   {a, b}: a wake of b wakes exactly 3, each returns index 1; a then has none.
//! - `requeue-private-resize`, `requeue-global-resize`: 4 waiters on A; after
//!   the first SET futex_requeue(A->B) moves exactly 4; A wakes 0; after the
//!   rest B wakes exactly 4, each returns 0.
//! - `pi-private-resize`, `pi-global-resize`: the main thread holds a PI lock
//!   (legacy FUTEX_LOCK_PI_PRIVATE), 2 waiters block on it; after the resize
//!   UNLOCK_PI hands it on: each waiter gets the lock with its TID in the word,
//!   unlocks with 0, the word ends 0.
//! - `wait-private-resize-load`: the futex_wait scenario repeated
//!   (16 -> 128 -> 32 -> 16, N rounds) while 2 threads hammer other futexes
//!   (every hammer op must return exactly 0 / EAGAIN / ETIMEDOUT).
//! - `mixed-global-resize-load`: wait + waitv + requeued waiters, hammer
//!   threads, then SET 0: all woken with exact counts.
//! - `set0-race`: two threads SET 0 at once, every round: Ok(0) and (Ok(0) or
//!   EBUSY), never both EBUSY (`docs/futex-abi.md` section 2 says when both are 0);
//!   GET 0; SET 16 EBUSY.
//! - `set0-vs-set128-race`: every round SET 0 returns 0, SET 128 0 or EBUSY; GET 0;
//!   SET 16 EBUSY.
//! - `set32-vs-set128-race`: every round both return 0, GET 32 or 128.
//! - `set-vs-thread-create`: (>= 5 online CPUs, else SKIP: the clones
//!   allocate nothing to race, the reason names the automatic size) every
//!   round SET 64 while this thread clones threads (5 alive at each clone:
//!   each allocates 32 slots against the SET): every clone succeeds, SET 0,
//!   GET exactly 64 (an automatic size there, 16 or 32, would mean the SET's
//!   table was lost), SET 16 0. GET 32, the clones' size, is 7.3's known
//!   race (`docs/findings.md`).
//! - `set0-vs-thread-create`: the same with SET 0 (and the same SKIP): every
//!   clone succeeds, GET 0, SET 16 EBUSY (7.3 fails a clone with EBUSY here,
//!   the known race: `docs/findings.md`).
//! - `set-vs-vfork`, `set0-vs-clone-vm`: the two above with vfork
//!   children (`CLONE_VM|CLONE_VFORK`, allocating under `growth=any-vm`)
//!   and `CLONE_VM` children (under `vm-not-vfork` and `any-vm`) that exit
//!   at once, SKIP where they allocate nothing; the same checks, and the
//!   same two known races (`docs/findings.md`).
//! - `set-vs-fork`: SET 64 against fork children that exit at once: every
//!   fork succeeds, each child's GET in its new mm is 0, the parent's GET
//!   exactly 64, SET 16 0.
//! - The eight races above run rounds (at least 10, then until 10 overlapped,
//!   at most 200 or 2 s) and FAIL when none overlapped; on a kernel without
//!   a private hash (nothing to race for) one round checks the absent
//!   behaviour (EINVAL, or 6.16's stub). A known race failure does not end
//!   the rounds: every round runs all its checks, each failure is a
//!   `# round R: ...` line (at most 20), and the case reports any other
//!   failure first, else the first known one with its message unchanged.
//! - `set0-then-threads`: SET 0, then threads one by one, each kept: every spawn
//!   succeeds, GET 0 after each, SET 16 EBUSY.
//! - `custom-survives-growth`: (>= 5 online CPUs, else SKIP) SET 64, then 10
//!   bursts of online+1 (>= 5) threads: GET stays 64 (read after the grace
//!   periods a wrong replacement would need to land, `race::settled_get`).
//! - `auto-first-thread-16`: GET 0, then one thread -> 16 at once (growth != none).
//! - `auto-size-formula`: online+1 threads -> GET reaches exactly
//!   clamp(roundup_pow_of_two(4*min(threads, online)), 16, global) (polled).
//! - `auto-capped-by-cpus`: 4*online+4 threads: GET still the formula (16 on <= 4 CPUs).
//! - `auto-growth-past-16`: (>= 5 online CPUs, else SKIP) GET grows past 16 to the formula.
//! - `auto-only-grows`: after the threads exit GET keeps its size.
//! - `fork-child-get-0`: after SET 32, a forked child sees GET 0; the parent keeps 32.
//! - `fork-threaded-child-get-0`: a child forked from a threaded process sees GET 0.
//! - `exec-get-0`: a process that SET 64 then execs itself sees GET 0.
//! - `vfork-growth`, `posix-spawn-growth`, `clone-vm-growth`: GET after the
//!   clone is 16 or 0 as `growth` says (thread: only CLONE_THREAD; vm-not-vfork:
//!   clone(CLONE_VM) yes, vfork no; any-vm: all three).
//! - `shared-futex-private-2`, `shared-futex-global`: with the parent on a
//!   2-slot (resp. global) hash and the child on its own 4-slot table, a
//!   shared futex on a MAP_SHARED page: the child's wait is woken by the
//!   parent's wake (count exactly 1), and the parent's wait by the child's.
//! - `clone-vm-waiter-then-thread`, `clone-vm-waiter-then-set`: a
//!   clone(CLONE_VM) child (no CLONE_THREAD) asleep in FUTEX_WAIT_PRIVATE,
//!   then a thread (resp. SET 32) gives the process a table: a private wake
//!   returns 1 where the clone allocated (vm-not-vfork, any-vm) or there is
//!   no private hash, 0 with `growth=thread` (the waiter queued in the
//!   global hash and the first table moved nobody; SET 0 then finds it).
//! - `io-uring-wait-allocates`: (io_uring, 7.3.4+, else SKIP naming why) a
//!   shared io_uring FUTEX_WAIT leaves GET 0, a private one makes it 16
//!   before it queues; after a thread a private wake returns 1 and both
//!   completions say 0.

#[path = "futex-resize/hazard.rs"]
mod hazard;
#[path = "futex-resize/races.rs"]
mod races;

use guest_tests::cases::{diag, main as run, Case, Ctx};
use guest_tests::expect::Expect;
use guest_tests::hash::{
    self, done, ensure, ensure_get, ensure_res, ensure_set, fail, legacy, priv32, skip, want_get,
    want_set, Check, Hammer, Parked, Res, SharedPage, Worker,
};
use guest_tests::ktap::Outcome;
use guest_tests::race;
use guest_tests::sys::{self, Errno, FutexWaitv};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROBE_ENV: &str = "FUTEX_RESIZE_PROBE";
const WAIT_MS: u64 = 10_000;
/// A PI waiter's deadline: only a guard against a hang, far beyond the
/// [`BLOCK`] window plus the unlock, because a waiter that spins on the
/// running owner (state R) does not look at its timeout while it spins —
/// its sibling, asleep, would time out first (seen at 10 s under TCG).
const PI_WAIT_MS: u64 = 40_000;
const JOIN: Duration = Duration::from_secs(15);
const BLOCK: Duration = Duration::from_secs(5);
/// How long a PI waiter may take to be seen asleep: it spins (state R)
/// while the lock owner's vCPU runs, and a guest cannot tell a vCPU the
/// host descheduled from one that runs; on a loaded host (a full matrix,
/// 4 x 1 vCPUs beside other cells on 2 cores) one took more than 5 s to
/// reach state S. Only a bound: the wait ends as soon as it sleeps.
const PI_BLOCK: Duration = Duration::from_secs(20);

// ------------------------------------------------------- waiter scenarios

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Wait,
    Waitv,
    Requeue,
    Pi,
}

/// Runs the SETs of `sizes` checking each SET and the GET after it.
fn resize(e: &Expect, sizes: &[u64]) -> Check {
    for &s in sizes {
        ensure_set(e, s, Ok(0))?;
        ensure_get(e, &format!("right after SET {s}"), s as i64)?;
    }
    Ok(())
}

/// One scenario of `kind`: waiters queued, `sizes` applied, exact wake-up.
fn scenario(e: &Expect, kind: Kind, sizes: &[u64]) -> Check {
    match kind {
        Kind::Wait => scenario_wait(e, sizes),
        Kind::Waitv => scenario_waitv(e, sizes),
        Kind::Requeue => scenario_requeue(e, sizes),
        Kind::Pi => scenario_pi(e, sizes),
    }
}

fn spawn_waiters(word: &Arc<AtomicU32>, n: usize) -> Result<Vec<Worker<Res>>, Outcome> {
    (0..n)
        .map(|_| {
            let w = word.clone();
            Worker::spawn(move || hash::wait_ms(&w, 0, priv32(), WAIT_MS))
        })
        .collect()
}

fn check_all(what: &str, rs: Vec<Res>, want: Res) -> Check {
    for (i, r) in rs.into_iter().enumerate() {
        ensure_res(&format!("{what} {i}"), r, want)?;
    }
    Ok(())
}

fn scenario_wait(e: &Expect, sizes: &[u64]) -> Check {
    let word = Arc::new(AtomicU32::new(0));
    let ws = spawn_waiters(&word, 4)?;
    hash::wait_blocked(
        &hash::tids(&ws)?,
        sys::nr::FUTEX_WAIT,
        BLOCK,
        hash::thread_state,
    )?;
    resize(e, sizes)?;
    word.store(1, Ordering::SeqCst);
    let woke = hash::wake(&word, i32::MAX, priv32());
    let rs = hash::join_all(ws, JOIN)?;
    ensure_res("futex_wake(all) after the resize", woke, Ok(4))?;
    check_all("futex_wait waiter", rs, Ok(0))?;
    ensure_res("second wake", hash::wake(&word, i32::MAX, priv32()), Ok(0))
}

fn scenario_waitv(e: &Expect, sizes: &[u64]) -> Check {
    let a = Arc::new(AtomicU32::new(0));
    let b = Arc::new(AtomicU32::new(0));
    let mut ws = Vec::new();
    for _ in 0..3 {
        let (a, b) = (a.clone(), b.clone());
        ws.push(Worker::spawn(move || {
            let v = [
                FutexWaitv {
                    val: 0,
                    uaddr: a.as_ptr() as u64,
                    flags: priv32(),
                    reserved: 0,
                },
                FutexWaitv {
                    val: 0,
                    uaddr: b.as_ptr() as u64,
                    flags: priv32(),
                    reserved: 0,
                },
            ];
            let ts = sys::deadline_ms(WAIT_MS);
            sys::futex_waitv(&v, 0, Some(&ts), libc::CLOCK_MONOTONIC)
        })?);
    }
    hash::wait_blocked(
        &hash::tids(&ws)?,
        sys::nr::FUTEX_WAITV,
        BLOCK,
        hash::thread_state,
    )?;
    resize(e, sizes)?;
    b.store(1, Ordering::SeqCst);
    let woke = hash::wake(&b, i32::MAX, priv32());
    let rs = hash::join_all(ws, JOIN)?;
    ensure_res("futex_wake(b) after the resize", woke, Ok(3))?;
    check_all("futex_waitv waiter (index of b)", rs, Ok(1))?;
    ensure_res(
        "wake(a) after all left",
        hash::wake(&a, i32::MAX, priv32()),
        Ok(0),
    )
}

fn scenario_requeue(e: &Expect, sizes: &[u64]) -> Check {
    let a = Arc::new(AtomicU32::new(0));
    let b = Arc::new(AtomicU32::new(0));
    let ws = spawn_waiters(&a, 4)?;
    hash::wait_blocked(
        &hash::tids(&ws)?,
        sys::nr::FUTEX_WAIT,
        BLOCK,
        hash::thread_state,
    )?;
    let (first, rest) = sizes.split_at(1.min(sizes.len()));
    resize(e, first)?;
    let pair = [
        FutexWaitv {
            val: 0,
            uaddr: a.as_ptr() as u64,
            flags: priv32(),
            reserved: 0,
        },
        FutexWaitv {
            val: 0,
            uaddr: b.as_ptr() as u64,
            flags: priv32(),
            reserved: 0,
        },
    ];
    let moved = sys::futex_requeue(&pair, 0, 0, i32::MAX);
    let left_on_a = hash::wake(&a, i32::MAX, priv32());
    resize(e, rest)?;
    a.store(1, Ordering::SeqCst);
    b.store(1, Ordering::SeqCst);
    let woke = hash::wake(&b, i32::MAX, priv32());
    let rs = hash::join_all(ws, JOIN)?;
    ensure_res("futex_requeue(A -> B, all)", moved, Ok(4))?;
    ensure_res("wake(A) after the requeue", left_on_a, Ok(0))?;
    ensure_res("wake(B) after the resize", woke, Ok(4))?;
    check_all("requeued waiter", rs, Ok(0))
}

/// Milliseconds from CLOCK_REALTIME now until `deadline` (negative: past).
fn realtime_ms_until(deadline: &libc::timespec) -> i64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: now is a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    (deadline.tv_sec - now.tv_sec) * 1000 + (deadline.tv_nsec - now.tv_nsec) / 1_000_000
}

fn scenario_pi(e: &Expect, sizes: &[u64]) -> Check {
    let word = Arc::new(AtomicU32::new(0));
    let me = hash::gettid() as u32;
    let lock = legacy::LOCK_PI | legacy::PRIVATE;
    let unlock = legacy::UNLOCK_PI | legacy::PRIVATE;
    let ts = hash::realtime_deadline_ms(PI_WAIT_MS);
    ensure_res(
        "FUTEX_LOCK_PI_PRIVATE (uncontended)",
        hash::futex_legacy(&word, lock, 0, Some(&ts)),
        Ok(0),
    )?;
    ensure(word.load(Ordering::SeqCst) & legacy::TID_MASK == me, || {
        format!(
            "lock word {:#x} does not hold my TID {me}",
            word.load(Ordering::SeqCst)
        )
    })?;
    let mut ws = Vec::new();
    for _ in 0..2 {
        let w = word.clone();
        ws.push(Worker::spawn(move || {
            let ts = hash::realtime_deadline_ms(PI_WAIT_MS);
            let t0 = std::time::Instant::now();
            let l = hash::futex_legacy(&w, lock, 0, Some(&ts));
            // When it returned: after how long, and where realtime stood
            // against the deadline (an early ETIMEDOUT is the kernel's only
            // if realtime had not reached the deadline yet).
            let took = t0.elapsed();
            let before_deadline_ms = realtime_ms_until(&ts);
            let owner = w.load(Ordering::SeqCst) & legacy::TID_MASK;
            let mine = owner == hash::gettid() as u32;
            let u = if l.is_ok() {
                hash::futex_legacy(&w, unlock, 0, None)
            } else {
                Ok(-1)
            };
            (l, mine, u, took, before_deadline_ms)
        })?);
    }
    // This thread owns the lock: it sleeps while another polls.
    if let Err(o) = hash::wait_blocked_apart(
        &hash::tids(&ws)?,
        libc::SYS_futex,
        PI_BLOCK,
        hash::thread_state,
    ) {
        // Say what a waiter that never blocked got from LOCK_PI (the
        // unlock lets one that did block finish).
        let _ = hash::futex_legacy(&word, unlock, 0, None);
        let got = hash::join_all(ws, JOIN).map(|rs| {
            rs.iter()
                .enumerate()
                .map(|(i, (l, mine, _, took, left))| {
                    format!(
                        "waiter {i}: {} after {} ms, {left} ms before its realtime deadline (owner after: {mine})",
                        hash::show(l),
                        took.as_millis()
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        });
        return Err(match (o, got) {
            (Outcome::Fail(w), Ok(g)) => fail(format!("{w}; LOCK_PI returned: {g}")),
            (o, _) => o,
        });
    }
    ensure(word.load(Ordering::SeqCst) & legacy::WAITERS != 0, || {
        format!(
            "FUTEX_WAITERS not set in {:#x}",
            word.load(Ordering::SeqCst)
        )
    })?;
    resize(e, sizes)?;
    let u = hash::futex_legacy(&word, unlock, 0, None);
    let rs = hash::join_all(ws, JOIN)?;
    ensure_res("FUTEX_UNLOCK_PI_PRIVATE by the owner", u, Ok(0))?;
    for (i, (l, mine, u, _, _)) in rs.into_iter().enumerate() {
        ensure_res(&format!("PI waiter {i} lock"), l, Ok(0))?;
        ensure(mine, || {
            format!("PI waiter {i} got the lock without its TID in the word")
        })?;
        ensure_res(&format!("PI waiter {i} unlock"), u, Ok(0))?;
    }
    ensure(word.load(Ordering::SeqCst) == 0, || {
        format!(
            "lock word ends {:#x}, expected 0",
            word.load(Ordering::SeqCst)
        )
    })
}

fn survive(ctx: &Ctx, kind: Kind, sizes: &[u64]) -> Outcome {
    done((|| {
        ensure_set(&ctx.expect, 16, Ok(0))?;
        scenario(&ctx.expect, kind, sizes)
    })())
}

fn wait_private(ctx: &Ctx) -> Outcome {
    survive(ctx, Kind::Wait, &[128, 32])
}
fn wait_global(ctx: &Ctx) -> Outcome {
    survive(ctx, Kind::Wait, &[0])
}
fn waitv_private(ctx: &Ctx) -> Outcome {
    survive(ctx, Kind::Waitv, &[128, 32])
}
fn waitv_global(ctx: &Ctx) -> Outcome {
    survive(ctx, Kind::Waitv, &[0])
}
fn requeue_private(ctx: &Ctx) -> Outcome {
    survive(ctx, Kind::Requeue, &[128, 32])
}
fn requeue_global(ctx: &Ctx) -> Outcome {
    survive(ctx, Kind::Requeue, &[0])
}
fn pi_private(ctx: &Ctx) -> Outcome {
    survive(ctx, Kind::Pi, &[128, 32])
}
fn pi_global(ctx: &Ctx) -> Outcome {
    survive(ctx, Kind::Pi, &[0])
}

fn stress_rounds() -> (u64, Duration) {
    (
        hash::stress_iterations(3),
        Duration::from_secs(hash::stress_seconds(0)),
    )
}

fn wait_private_load(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, 16, Ok(0))?;
        let hammer = Hammer::start(2)?;
        let (iters, secs) = stress_rounds();
        let start = Instant::now();
        let mut round = 0;
        while round < iters || start.elapsed() < secs {
            let kind = [Kind::Wait, Kind::Waitv, Kind::Requeue, Kind::Pi][round as usize % 4];
            if let Err(o) = scenario(e, kind, &[128, 32, 16]) {
                let _ = hammer.stop();
                return Err(match o {
                    Outcome::Fail(w) => fail(format!("round {round}: {w}")),
                    o => o,
                });
            }
            round += 1;
        }
        let ops = hammer.stop()?;
        diag(&format!("{round} resize rounds, {ops} hammer ops"));
        Ok(())
    })())
}

fn mixed_global_load(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, 16, Ok(0))?;
        let hammer = Hammer::start(2)?;
        // Waiters of three kinds queued at once, then the move to global.
        let w1 = Arc::new(AtomicU32::new(0));
        let a = Arc::new(AtomicU32::new(0));
        let b = Arc::new(AtomicU32::new(0));
        let plain = spawn_waiters(&w1, 3)?;
        let onto_a = spawn_waiters(&a, 3)?;
        let mut all: Vec<i32> = hash::tids(&plain)?;
        all.extend(hash::tids(&onto_a)?);
        hash::wait_blocked(&all, sys::nr::FUTEX_WAIT, BLOCK, hash::thread_state)?;
        let pair = [
            FutexWaitv {
                val: 0,
                uaddr: a.as_ptr() as u64,
                flags: priv32(),
                reserved: 0,
            },
            FutexWaitv {
                val: 0,
                uaddr: b.as_ptr() as u64,
                flags: priv32(),
                reserved: 0,
            },
        ];
        let moved = sys::futex_requeue(&pair, 0, 0, i32::MAX);
        resize(e, &[128, 0])?;
        w1.store(1, Ordering::SeqCst);
        b.store(1, Ordering::SeqCst);
        let woke1 = hash::wake(&w1, i32::MAX, priv32());
        let woke_b = hash::wake(&b, i32::MAX, priv32());
        let r1 = hash::join_all(plain, JOIN)?;
        let r2 = hash::join_all(onto_a, JOIN)?;
        let ops = hammer.stop()?;
        diag(&format!("{ops} hammer ops"));
        ensure_res("futex_requeue(A -> B)", moved, Ok(3))?;
        ensure_res("wake(plain) after SET 0", woke1, Ok(3))?;
        ensure_res("wake(B) after SET 0", woke_b, Ok(3))?;
        check_all("plain waiter", r1, Ok(0))?;
        check_all("requeued waiter", r2, Ok(0))
    })())
}

// ---------------------------------------------------------- auto sizing

fn auto_want(e: &Expect, threads: usize) -> Res {
    if hash::growth_allocates(e.growth, true, false) {
        want_get(
            e,
            hash::auto_size_for(threads, hash::online_cpus(), hash::global_size()) as i64,
        )
    } else {
        want_get(e, 0)
    }
}

fn auto_first(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_get(e, "before any thread", 0)?;
        let p = Parked::spawn(1, Duration::from_secs(20))?;
        let g = hash::get();
        p.release()?;
        ensure_res("GET right after the first thread", g, auto_want(e, 1))
    })())
}

/// Spawns `n` parked threads and polls GET until it equals the formula,
/// then checks it stays there.
fn auto_n(e: &Expect, n: usize) -> Check {
    let want = auto_want(e, n);
    diag(&format!(
        "{n} threads, {} online / {} possible CPUs, {} nodes, global {}: want {}",
        hash::online_cpus(),
        hash::possible_cpus(),
        hash::possible_nodes(),
        hash::global_size(),
        hash::show(&want)
    ));
    let p = Parked::spawn(n, Duration::from_secs(25))?;
    let start = Instant::now();
    // Every 10 ms, 5 s at most: growth lands after two grace periods.
    let g = hash::poll_get(500, 10, |r| *r == want);
    let waited = start.elapsed();
    // No second replacement pending behind it.
    let later = race::settled_get(want, race::SETTLE);
    p.release()?;
    diag(&format!(
        "GET {} after {} ms",
        hash::show(&g),
        waited.as_millis()
    ));
    ensure_res(&format!("GET with {n} threads (polled 5 s)"), g, want)?;
    ensure_res(
        "GET after the grace periods a replacement waits for",
        later,
        want,
    )
}

fn auto_formula(ctx: &Ctx) -> Outcome {
    done(auto_n(&ctx.expect, (hash::online_cpus() + 1).min(16)))
}

fn auto_capped(ctx: &Ctx) -> Outcome {
    done(auto_n(&ctx.expect, (4 * hash::online_cpus() + 4).min(64)))
}

fn auto_past_16(ctx: &Ctx) -> Outcome {
    let online = hash::online_cpus();
    if online < 5 {
        return skip(format!("needs >= 5 online CPUs, have {online}"));
    }
    done((|| {
        let n = online.min(16) + 1;
        ensure(
            !hash::growth_allocates(ctx.expect.growth, true, false)
                || hash::auto_size_for(n, online, hash::global_size()) > 16,
            || "formula does not exceed 16 here".into(),
        )?;
        auto_n(&ctx.expect, n)
    })())
}

fn auto_only_grows(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        let n = (hash::online_cpus() + 1).min(16);
        auto_n(e, n)?;
        let want = auto_want(e, n);
        ensure_res("GET after all threads exited", hash::get(), want)?;
        let p = Parked::spawn(1, Duration::from_secs(20))?;
        let g = race::settled_get(want, race::SETTLE);
        p.release()?;
        ensure_res("GET after one more thread (no shrink)", g, want)
    })())
}

// -------------------------------------------------- fork / exec / clone

fn fork_child(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, 32, Ok(0))?;
        let pid = hash::fork_run(|| hash::res_to_code(hash::get()))?;
        let code = hash::wait_child(pid, Duration::from_secs(10))?;
        ensure(code == hash::want_code(want_get(e, 0)), || {
            format!(
                "forked child's GET: expected {} (code {}), child exit code {code}",
                hash::show(&want_get(e, 0)),
                hash::want_code(want_get(e, 0))
            )
        })?;
        ensure_get(e, "in the parent after fork", 32)
    })())
}

fn fork_threaded(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        let p = Parked::spawn(2, Duration::from_secs(20))?;
        let parent = hash::get();
        // The child only makes raw syscalls (the parent has threads).
        let pid = hash::fork_run(|| hash::res_to_code(hash::get()))?;
        let code = hash::wait_child(pid, Duration::from_secs(10));
        p.release()?;
        let code = code?;
        ensure_res("GET in the threaded parent", parent, auto_want(e, 2))?;
        ensure(code == hash::want_code(want_get(e, 0)), || {
            format!(
                "child of a threaded parent: expected GET {}, child exit code {code}",
                hash::show(&want_get(e, 0))
            )
        })
    })())
}

fn exec_get(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        let exe = std::env::current_exe().map_err(|x| fail(format!("current_exe: {x}")))?;
        let path = std::ffi::CString::new(exe.as_os_str().as_encoded_bytes())
            .map_err(|_| fail("exe path has a NUL"))?;
        let env = std::ffi::CString::new(format!("{PROBE_ENV}=get")).expect("no NUL");
        let set_want = want_set(e, Ok(0));
        let pid = hash::fork_run(|| {
            if hash::set(64) != set_want {
                return 240;
            }
            let argv = [path.as_ptr(), std::ptr::null()];
            let envp = [env.as_ptr(), std::ptr::null()];
            // SAFETY: NULL-terminated arrays of live C strings.
            unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
            241
        })?;
        let code = hash::wait_child(pid, Duration::from_secs(10))?;
        ensure(code != 240, || {
            format!(
                "child's SET 64 before exec did not return {}",
                hash::show(&set_want)
            )
        })?;
        ensure(code != 241, || "execve of self failed".into())?;
        ensure(code == hash::want_code(want_get(e, 0)), || {
            format!(
                "GET after exec: expected {}, probe exit code {code}",
                hash::show(&want_get(e, 0))
            )
        })
    })())
}

fn clone_growth(
    e: &Expect,
    what: &str,
    vfork: bool,
    f: impl FnOnce() -> Result<i32, Outcome>,
) -> Check {
    ensure_get(e, &format!("before {what}"), 0)?;
    let code = f()?;
    ensure(code == 0, || format!("{what} child exit code {code}"))?;
    let allocates = hash::growth_allocates(e.growth, false, vfork);
    let want = want_get(e, if allocates { 16 } else { 0 });
    ensure_res(
        &format!("GET after {what} (growth {:?})", e.growth),
        hash::get(),
        want,
    )
}

fn vfork_growth(ctx: &Ctx) -> Outcome {
    done(clone_growth(
        &ctx.expect,
        "vfork (clone CLONE_VM|CLONE_VFORK)",
        true,
        || hash::clone_and_reap(libc::CLONE_VM | libc::CLONE_VFORK),
    ))
}

fn clone_vm_growth(ctx: &Ctx) -> Outcome {
    done(clone_growth(
        &ctx.expect,
        "clone(CLONE_VM) without CLONE_THREAD",
        false,
        || hash::clone_and_reap(libc::CLONE_VM),
    ))
}

fn posix_spawn_growth(ctx: &Ctx) -> Outcome {
    done(clone_growth(&ctx.expect, "posix_spawn", true, || {
        let exe = std::env::current_exe().map_err(|x| fail(format!("current_exe: {x}")))?;
        let path = std::ffi::CString::new(exe.as_os_str().as_encoded_bytes())
            .map_err(|_| fail("exe path has a NUL"))?;
        let env = std::ffi::CString::new(format!("{PROBE_ENV}=exit")).expect("no NUL");
        let argv = [path.as_ptr() as *mut libc::c_char, std::ptr::null_mut()];
        let envp = [env.as_ptr() as *mut libc::c_char, std::ptr::null_mut()];
        let mut pid = 0;
        // SAFETY: NULL-terminated arrays of live C strings; default attrs.
        let r = unsafe {
            libc::posix_spawn(
                &mut pid,
                path.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                argv.as_ptr(),
                envp.as_ptr(),
            )
        };
        if r != 0 {
            return Err(fail(format!("posix_spawn failed: {}", Errno(r))));
        }
        hash::wait_child(pid, Duration::from_secs(10))
    }))
}

// ------------------------------------------------------ shared futexes

/// Shared futex wait/wake across fork in both directions; the parent is on
/// `parent_slots`, the child on its own 4-slot table.
fn shared(ctx: &Ctx, parent_slots: u64) -> Check {
    let e = &ctx.expect;
    ensure_set(e, parent_slots, Ok(0))?;
    let page = SharedPage::new()?;
    let flags = sys::FUTEX2_SIZE_U32; // shared: no FUTEX2_PRIVATE
    let child_set = want_set(e, Ok(0));
    let parent_pid = std::process::id() as i32;
    let pid = hash::fork_run(|| {
        if hash::set(4) != child_set {
            return 50;
        }
        // 1. Wait on word 0 until the parent wakes us.
        match hash::wait_ms(page.word(0), 0, flags, WAIT_MS) {
            Ok(0) => {}
            _ => return 51,
        }
        // 2. Wake the parent waiting on word 1 once it is blocked.
        let start = Instant::now();
        while !matches!(hash::process_state(parent_pid), Some(('S', n)) if n == sys::nr::FUTEX_WAIT)
        {
            if start.elapsed() > BLOCK {
                return 52;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(20));
        page.word(1).store(1, Ordering::SeqCst);
        match hash::wake(page.word(1), i32::MAX, flags) {
            Ok(1) => 0,
            Ok(_) => 53,
            Err(_) => 54,
        }
    })?;
    let blocked = hash::wait_blocked(&[pid], sys::nr::FUTEX_WAIT, BLOCK, hash::process_state);
    if let Err(o) = blocked {
        let _ = hash::wait_child(pid, Duration::from_millis(1));
        return Err(o);
    }
    page.word(0).store(1, Ordering::SeqCst);
    let woke = hash::wake(page.word(0), i32::MAX, flags);
    let mine = hash::wait_ms(page.word(1), 0, flags, WAIT_MS);
    let code = hash::wait_child(pid, JOIN)?;
    ensure(code == 0, || {
        format!(
            "child exit code {code} (50: own SET 4 wrong, 51: shared wait not woken with 0, 52: parent never blocked, 53/54: wake count/error)"
        )
    })?;
    ensure_res("shared wake of the child", woke, Ok(1))?;
    ensure_res("parent's shared wait, woken by the child", mine, Ok(0))?;
    ensure_get(e, "in the parent at the end", parent_slots as i64)
}

fn shared_private(ctx: &Ctx) -> Outcome {
    done(shared(ctx, 2))
}

fn shared_global(ctx: &Ctx) -> Outcome {
    done(shared(ctx, 0))
}

fn probe(mode: &str) -> ! {
    let code = match mode {
        "get" => hash::res_to_code(hash::get()),
        _ => 0,
    };
    std::process::exit(code)
}

/// The first line of `--help`.
const ABOUT: &str =
    "resizing the private futex hash with waiters queued, concurrent SETs, automatic sizing, fork/exec/vfork/posix_spawn (docs/futex-abi.md section 2).";

fn main() {
    if let Ok(mode) = std::env::var(PROBE_ENV) {
        probe(&mode);
    }
    let extra = Duration::from_secs(hash::stress_seconds(0));
    let long = |name, run| Case {
        name,
        run,
        timeout: Duration::from_secs(60) + 2 * extra,
    };
    let racing = |name, run| Case {
        name,
        run,
        timeout: races::rounds().timeout(),
    };
    run(
        ABOUT,
        &[
            Case::new("wait-private-resize", wait_private),
            Case::new("wait-global-resize", wait_global),
            Case::new("waitv-private-resize", waitv_private),
            Case::new("waitv-global-resize", waitv_global),
            Case::new("requeue-private-resize", requeue_private),
            Case::new("requeue-global-resize", requeue_global),
            Case::new("pi-private-resize", pi_private),
            Case::new("pi-global-resize", pi_global),
            long("wait-private-resize-load", wait_private_load),
            Case::new("mixed-global-resize-load", mixed_global_load),
            racing("set0-race", races::set0_race),
            racing("set0-vs-set128-race", races::set0_vs_128),
            racing("set32-vs-set128-race", races::set32_vs_128),
            racing("set-vs-thread-create", races::set64_vs_create),
            racing("set0-vs-thread-create", races::set0_vs_create),
            racing("set-vs-vfork", races::set64_vs_vfork),
            racing("set0-vs-clone-vm", races::set0_vs_clone_vm),
            racing("set-vs-fork", races::set64_vs_fork),
            Case::new("set0-then-threads", races::set0_then_threads),
            Case::new("custom-survives-growth", races::custom_survives_growth),
            Case::new("auto-first-thread-16", auto_first),
            Case::new("auto-size-formula", auto_formula),
            Case::new("auto-capped-by-cpus", auto_capped),
            Case::new("auto-growth-past-16", auto_past_16),
            Case::new("auto-only-grows", auto_only_grows),
            Case::new("fork-child-get-0", fork_child),
            Case::new("fork-threaded-child-get-0", fork_threaded),
            Case::new("exec-get-0", exec_get),
            Case::new("vfork-growth", vfork_growth),
            Case::new("posix-spawn-growth", posix_spawn_growth),
            Case::new("clone-vm-growth", clone_vm_growth),
            Case::new("shared-futex-private-2", shared_private),
            Case::new("shared-futex-global", shared_global),
            Case::new(
                "clone-vm-waiter-then-thread",
                hazard::clone_vm_waiter_then_thread,
            ),
            Case::new("clone-vm-waiter-then-set", hazard::clone_vm_waiter_then_set),
            Case::new("io-uring-wait-allocates", hazard::io_uring_wait_allocates),
        ],
    )
}
