//! `futex-pi`'s races and retry paths (`docs/futex-abi.md` section 8, "PI:
//! deadlocks, timeouts and owners that exit"): an ABBA deadlock that
//! `__rt_mutex_start_proxy_lock()` refuses, a LOCK_PI timeout expiring
//! while UNLOCK_PI hands the lock over (`fixup_pi_owner()`), and LOCK_PI
//! meeting an owner that exits (`attach_to_pi_owner()`,
//! `handle_exit_race()`, `wait_for_owner_exiting()`).

use super::{me, P};
use guest_tests::cases::{diag, scaled, Ctx};
use guest_tests::clock::span;
use guest_tests::hash::{done, ensure, ensure_res, fail, show, skip, Check, Res, Worker};
use guest_tests::ktap::Outcome;
use guest_tests::ops::{
    addr, ensure_word, op::*, word, Page, Waiters, EAGAIN, EDEADLK, ESRCH, ETIMEDOUT, OWNER_DIED,
    SC_FUTEX, WAITERS,
};
use guest_tests::race::{now_ns, Call};
use guest_tests::sys::{futex, TID_MASK};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Prefixes a failure with the round it happened in.
fn in_round(label: &str, c: Check) -> Check {
    c.map_err(|o| match o {
        Outcome::Fail(m) => fail(format!("{label}: {m}")),
        o => o,
    })
}

/// ABBA rounds per kind: a waiter the EDEADLK path left enqueued on the
/// rtmutex (use-after-free) shows in a later round's chain walk.
const ABBA_ROUNDS: usize = 4;

pub fn abba_deadlock(_: &Ctx) -> Outcome {
    done((|| {
        let page = Page::new(libc::PROT_READ | libc::PROT_WRITE, true)?;
        for (kind, p) in [("private", P), ("shared", 0)] {
            for round in 0..ABBA_ROUNDS {
                let (f1, f2) = if p == P {
                    (word(0), word(0))
                } else {
                    (page.word(2 * round), page.word(2 * round + 1))
                };
                in_round(&format!("round {round} ({kind})"), abba_round(p, f1, f2))?;
            }
        }
        Ok(())
    })())
}

/// A owns F1 and sleeps in LOCK_PI of F2, which the caller owns; the
/// caller's LOCK_PI of F1 closes the cycle.
fn abba_round(p: u32, f1: &'static AtomicU32, f2: &'static AtomicU32) -> Check {
    let call = move |w: &AtomicU32, o: u32| futex(addr(w), o | p, 0, 0, 0, 0);
    ensure_res("the caller's LOCK_PI of F2", call(f2, LOCK_PI), Ok(0))?;
    let steps: Arc<Mutex<Vec<(&str, Res)>>> = Arc::default();
    let (seen, log) = (word(0), steps.clone());
    let mut ws = Waiters::new();
    let a = ws.add(SC_FUTEX, move || {
        let step = |what, r| log.lock().unwrap().push((what, r));
        let r1 = call(f1, LOCK_PI);
        step("A's LOCK_PI of F1 (free)", r1);
        if r1 != Ok(0) {
            return r1;
        }
        let r = call(f2, LOCK_PI);
        seen.store(f2.load(Ordering::SeqCst), Ordering::SeqCst);
        if r == Ok(0) {
            step("A's UNLOCK_PI of F2", call(f2, UNLOCK_PI));
        }
        step("A's UNLOCK_PI of F1", call(f1, UNLOCK_PI));
        r
    })?;
    let ta = ws.tid(a) as u32;
    ensure_word("F1, taken by A (asleep in LOCK_PI of F2)", f1, ta)?;
    ensure_word("F2 with A waiting", f2, me() | WAITERS)?;
    // The chain walk of __rt_mutex_start_proxy_lock() (full, for futexes)
    // finds F1's owner A blocked on F2, owned by the caller: EDEADLK.
    ensure_res(
        "the caller's LOCK_PI of F1 (A owns it and waits for F2, the caller's)",
        call(f1, LOCK_PI),
        EDEADLK,
    )?;
    ws.woke("the EDEADLK", &[])?;
    // futex_lock_pi_atomic() set FUTEX_WAITERS before attaching.
    ensure_word("F1 after the EDEADLK", f1, ta | WAITERS)?;
    ensure_word("F2 after the EDEADLK", f2, me() | WAITERS)?;
    // C queues on F1 behind where the caller's waiter was: A's unlock of
    // F1 must hand it to C (rt_mutex_cleanup_proxy_lock() dequeued the
    // caller's waiter on the EDEADLK), not to the caller.
    let seen_c = word(0);
    let c = ws.add(SC_FUTEX, move || {
        call(f1, LOCK_PI)?;
        seen_c.store(f1.load(Ordering::SeqCst), Ordering::SeqCst);
        call(f1, UNLOCK_PI)
    })?;
    let tc = ws.tid(c) as u32;
    ensure_word("F1 with C waiting", f1, ta | WAITERS)?;
    ensure_res("the caller's UNLOCK_PI of F2", call(f2, UNLOCK_PI), Ok(0))?;
    ws.woke(
        "the caller's UNLOCK_PI of F2 (hands it to A, whose unlock of F1 hands that to C)",
        &[a, c],
    )?;
    ensure_word(
        "F1 as C saw it when its LOCK_PI returned",
        seen_c,
        tc | WAITERS,
    )?;
    // wake_futex_pi() stores FUTEX_WAITERS | the new owner's TID.
    ensure_word(
        "F2 as A saw it when its LOCK_PI returned",
        seen,
        ta | WAITERS,
    )?;
    let steps = steps.lock().unwrap().clone();
    ensure(steps.len() == 3, || format!("A's steps: {steps:?}"))?;
    for (what, r) in steps {
        ensure_res(what, r, Ok(0))?;
    }
    ensure_word("F1 after A's UNLOCK_PI", f1, 0)?;
    ensure_word("F2 after A's UNLOCK_PI", f2, 0)?;
    ws.join()
}

/// A CLOCK_MONOTONIC instant (`race::now_ns()` ns) as a timespec.
fn mono_ts(ns: u64) -> libc::timespec {
    span(Duration::from_nanos(ns))
}

/// What the timed waiter of one round saw.
struct Timed {
    call: Call,
    /// The word right after its LOCK_PI2 returned.
    seen: u32,
    /// Its UNLOCK_PI, when it got the lock.
    unlock: Option<Res>,
}

pub fn timeout_vs_unlock(_: &Ctx) -> Outcome {
    let budget = scaled(Duration::from_secs(4));
    let (mut rounds, mut overlapped, mut handed) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let w = word(0);
    let r = (|| -> Check {
        while rounds < 2000 && start.elapsed() < budget {
            let o = tv_round(w, rounds)?;
            rounds += 1;
            overlapped += o.0 as u64;
            handed += o.1 as u64;
        }
        Ok(())
    })();
    diag(&format!(
        "rounds: {rounds}, overlapped: {overlapped}, handed over: {handed}"
    ));
    if let Err(o) = r {
        return done(in_round(&format!("round {rounds}"), Err(o)));
    }
    if overlapped == 0 {
        return skip(format!(
            "no round's timeout expired while its UNLOCK_PI ran ({rounds} rounds): the race was not exercised"
        ));
    }
    Outcome::Pass
}

/// One round: the caller owns `w`, a waiter's LOCK_PI2 times out 2 ms
/// from now, and the caller's UNLOCK_PI comes at about that instant (a
/// sweep from 300 us before to 690 us after). Returns (overlapped, the
/// waiter got the lock).
fn tv_round(w: &'static AtomicU32, round: u64) -> Result<(bool, bool), Outcome> {
    ensure_res("the owner's LOCK_PI", super::pi(addr(w), LOCK_PI), Ok(0))?;
    let deadline = now_ns() + 2_000_000;
    let unlock_at = (deadline + (round * 37 % 100) * 10_000).saturating_sub(300_000);
    let t = Worker::spawn(move || {
        let d = mono_ts(deadline);
        let call = Call::timed(|| futex(addr(w), LOCK_PI2 | P, 0, &d as *const _ as u64, 0, 0));
        let seen = w.load(Ordering::SeqCst);
        let unlock = (call.res == Ok(0)).then(|| super::pi(addr(w), UNLOCK_PI));
        Timed { call, seen, unlock }
    })?;
    while now_ns() < unlock_at {
        std::hint::spin_loop();
    }
    let un = Call::timed(|| super::pi(addr(w), UNLOCK_PI));
    let tid = t.tid()? as u32;
    let got = t.join(scaled(Duration::from_secs(10)))?;
    // __futex_unlock_pi() returns EAGAIN when its cmpxchg finds the word
    // changed since it read it (a waiter set FUTEX_WAITERS, then left):
    // the owner still holds the lock and unlocks again.
    if un.res == EAGAIN {
        ensure_res(
            "the owner's UNLOCK_PI after EAGAIN",
            super::pi(addr(w), UNLOCK_PI),
            Ok(0),
        )?;
    } else {
        ensure_res("the owner's UNLOCK_PI", un.res, Ok(0))?;
    }
    let seen = got.seen;
    match got.call.res {
        Ok(0) => {
            // Handed over (wake_futex_pi(), or fixup_pi_owner() after a
            // timeout whose cleanup took the lock): TID|WAITERS; a waiter
            // that came after the unlock took the free word: its TID.
            ensure(seen == tid | WAITERS || seen == tid, || {
                format!("the waiter's LOCK_PI2 returned 0 but the word was {seen:#x} (its TID {tid:#x})")
            })?;
            if let Some(u) = got.unlock {
                ensure_res("the new owner's UNLOCK_PI", u, Ok(0))?;
            }
        }
        r if r == ETIMEDOUT => {
            // 0 is returned whenever the lock was taken (fixup_pi_owner()
            // reports a successful trylock): ETIMEDOUT leaves the word
            // the owner's (TID|WAITERS) or free after its unlock.
            ensure(seen & TID_MASK != tid, || {
                format!("the waiter's LOCK_PI2 returned ETIMEDOUT but the word holds its TID ({seen:#x}): it owns a lock it was told it did not get")
            })?;
            ensure(seen == me() | WAITERS || seen == 0, || {
                format!(
                    "the waiter's LOCK_PI2 timed out seeing the word {seen:#x} (the owner {:#x})",
                    me()
                )
            })?;
        }
        r => {
            return Err(fail(format!(
                "the waiter's LOCK_PI2 returned {}, not 0 or ETIMEDOUT",
                show(&r)
            )))
        }
    }
    ensure_word("after the round", w, 0)?;
    let c = got.call;
    let overlapped = c.start < un.start && un.start < c.end && deadline <= un.end;
    Ok((overlapped, c.res == Ok(0)))
}

/// One round of an owner exiting while a waiter comes for its lock.
struct Exit {
    /// The waiter's LOCK_PI.
    call: Call,
    /// The CPU time the waiter's thread spent in it, in nanoseconds.
    cpu: u64,
    /// The word right after it returned.
    seen: u32,
    /// Its UNLOCK_PI, when it got the lock.
    unlock: Option<Res>,
    owner: u32,
    waiter: u32,
}

/// `sched_setscheduler(0, SCHED_FIFO, prio)` for the calling thread.
fn set_fifo(prio: i32) -> Res {
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: p is a live sched_param; pid 0 is the calling thread.
    guest_tests::sys::check(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) }.into())
}

/// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in ns.
fn thread_cpu_ns() -> u64 {
    let t = guest_tests::clock::now(libc::CLOCK_THREAD_CPUTIME_ID);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC `ns` (absolute).
fn sleep_until(ns: u64) {
    let t = mono_ts(ns);
    // SAFETY: t is a live timespec; no remainder is asked for.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &t,
            std::ptr::null_mut(),
        )
    };
}

/// The owner takes a fresh word, then exits (no robust list names it: the
/// word keeps its TID) `lead` ns before the waiter's LOCK_PI (after it if
/// negative). With `fifo`, both run on that CPU and the waiter is
/// SCHED_FIFO, sleeping until its instant: it preempts the exiting owner.
fn exit_round(lead: i64, fifo: Option<u32>) -> Result<Exit, Outcome> {
    let w = word(0);
    let at = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let pin = move || match fifo {
        Some(c) => guest_tests::numa::sched_setaffinity(&[c])
            .map(|_| 0)
            .map_err(|e| e.to_string()),
        None => Ok(0),
    };
    let a2 = at.clone();
    let owner = Worker::spawn(move || -> Result<Res, String> {
        pin()?;
        let r = super::pi(addr(w), LOCK_PI);
        let until = loop {
            match a2.load(Ordering::SeqCst) {
                0 => std::hint::spin_loop(),
                t => break t.saturating_add_signed(-lead),
            }
        };
        while now_ns() < until {
            std::hint::spin_loop();
        }
        Ok(r)
    })?;
    let otid = owner.tid()? as u32;
    let until = Instant::now() + scaled(Duration::from_secs(5));
    while w.load(Ordering::SeqCst) != otid {
        ensure(Instant::now() < until, || {
            format!(
                "the owner never took the word ({:#x})",
                w.load(Ordering::SeqCst)
            )
        })?;
        std::thread::sleep(Duration::from_micros(50));
    }
    let t = now_ns() + 3_000_000;
    let waiter = Worker::spawn(move || -> Result<(Call, u64, u32, Option<Res>), String> {
        pin()?;
        if fifo.is_some() {
            set_fifo(1).map_err(|e| format!("sched_setscheduler(SCHED_FIFO): {e}"))?;
            sleep_until(t);
        } else {
            while now_ns() < t {
                std::hint::spin_loop();
            }
        }
        // A far deadline: only a lost wakeup reaches it.
        let d = mono_ts(now_ns() + 30_000_000_000);
        let cpu0 = thread_cpu_ns();
        let call = Call::timed(|| futex(addr(w), LOCK_PI2 | P, 0, &d as *const _ as u64, 0, 0));
        let cpu = thread_cpu_ns() - cpu0;
        let seen = w.load(Ordering::SeqCst);
        let unlock = (call.res == Ok(0)).then(|| super::pi(addr(w), UNLOCK_PI));
        Ok((call, cpu, seen, unlock))
    })?;
    let wtid = waiter.tid()? as u32;
    at.store(t, Ordering::SeqCst);
    let limit = scaled(Duration::from_secs(40));
    let o = owner.join(limit)?.map_err(fail)?;
    ensure_res("the owner's LOCK_PI of the free word", o, Ok(0))?;
    let (call, cpu, seen, unlock) = waiter.join(limit)?.map_err(fail)?;
    if unlock.is_some() {
        ensure_word("after the new owner's UNLOCK_PI", w, 0)?;
    }
    Ok(Exit {
        call,
        cpu,
        seen,
        unlock,
        owner: otid,
        waiter: wtid,
    })
}

/// Checks one round exactly; returns whether the waiter got the lock.
fn check_exit(e: &Exit) -> Result<bool, Outcome> {
    let (seen, wt, ot) = (e.seen, e.waiter, e.owner);
    match e.call.res {
        // Attached while the owner lived: exit_pi_state_list() leaves the
        // pi_state ownerless and hands the rtmutex over, and
        // __fixup_pi_state_owner() stores TID|WAITERS|OWNER_DIED.
        Ok(0) => {
            ensure(seen == wt | WAITERS | OWNER_DIED, || {
                format!("the waiter's LOCK_PI2 returned 0 with the word {seen:#x}, not its TID {wt:#x}|WAITERS|OWNER_DIED")
            })?;
            ensure_res(
                "the new owner's UNLOCK_PI",
                e.unlock.unwrap_or(Ok(0)),
                Ok(0),
            )?;
            Ok(true)
        }
        // The owner exiting (EBUSY: wait_for_owner_exiting(), retry) or
        // gone: handle_exit_race() with the word unchanged -> ESRCH, the
        // word still the dead TID with the FUTEX_WAITERS the attempt set.
        r if r == ESRCH => {
            ensure(seen == ot | WAITERS, || {
                format!("ESRCH with the word {seen:#x}, not the dead owner's TID {ot:#x}|WAITERS")
            })?;
            Ok(false)
        }
        r => Err(fail(format!(
            "the waiter's LOCK_PI2 on an exiting owner returned {}, not 0 or ESRCH",
            show(&r)
        ))),
    }
}

/// Rounds whose waiter comes at about the owner's exit: `lead` follows the
/// outcomes (got it: the owner leaves earlier next time; ESRCH: later), so
/// the rounds gather where the waiter meets the exit. `each` checks a round.
fn exit_rounds(fifo: Option<u32>, each: impl Fn(&Exit) -> Check) -> Outcome {
    let budget = scaled(Duration::from_secs(4));
    let start = Instant::now();
    let (mut rounds, mut got, mut esrch, mut lead) = (0u64, 0u64, 0u64, 100_000i64);
    let r = (|| -> Check {
        while rounds < 1000 && start.elapsed() < budget {
            let e = exit_round(lead, fifo)?;
            let took = check_exit(&e).and_then(|g| each(&e).map(|_| g))?;
            rounds += 1;
            if took {
                got += 1;
                lead += 25_000;
            } else {
                esrch += 1;
                lead -= 25_000;
            }
        }
        Ok(())
    })();
    diag(&format!(
        "rounds: {rounds}, handed over by the exit: {got}, ESRCH: {esrch}, last lead: {} us",
        lead / 1000
    ));
    if let Err(o) = r {
        return done(in_round(
            &format!("round {rounds} (lead {} us)", lead / 1000),
            Err(o),
        ));
    }
    if got == 0 || esrch == 0 {
        return skip(format!(
            "the waiters never straddled the exit ({got} handed over, {esrch} ESRCH in {rounds} rounds): the exit was not raced"
        ));
    }
    Outcome::Pass
}

pub fn owner_exiting(_: &Ctx) -> Outcome {
    exit_rounds(None, |_| Ok(()))
}

pub fn owner_exiting_fifo(_: &Ctx) -> Outcome {
    let (cpu, _) = match guest_tests::sys::getcpu() {
        Ok(c) => c,
        Err(e) => return fail(format!("getcpu: {e}")),
    };
    let probe = Worker::spawn(|| set_fifo(1)).and_then(|t| t.join(Duration::from_secs(5)));
    match probe {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            return skip(format!(
            "sched_setscheduler(SCHED_FIFO) is {e} here (needs CAP_SYS_NICE): no SCHED_FIFO waiter"
        ))
        }
        Err(o) => return o,
    }
    // The exit holds futex.exit_mutex from FUTEX_STATE_EXITING to DEAD;
    // wait_for_owner_exiting() sleeps on it, so the waiter that outranks
    // the owner leaves it the CPU: its LOCK_PI2 burns little CPU time (a
    // retry loop instead spins until the owner gets CPU time anyway).
    // CPU time, not wall time: a stalled emulated CPU does not count.
    let limit = scaled(Duration::from_millis(250));
    exit_rounds(Some(cpu), move |e| {
        ensure(e.cpu <= limit.as_nanos() as u64, || {
            format!(
                "the SCHED_FIFO waiter's LOCK_PI2 on its CPU's exiting owner ran {} ms on the CPU (> {} ms; {} ms in all)",
                e.cpu / 1_000_000,
                limit.as_millis(),
                e.call.took() / 1_000_000
            )
        })
    })
}
