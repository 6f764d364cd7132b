//! `futex-upstream-gaps`' requeue cases: `FUTEX_CMP_REQUEUE` counted
//! exactly, and requeue-PI (`FUTEX_WAIT_REQUEUE_PI` / `FUTEX_CMP_REQUEUE_PI`):
//! the requeued waiter gets the lock, a plain waiter is refused, a signal
//! restarts the wait.
//!
//! Every waiter is a thread proven asleep in its syscall
//! (`ops::Waiters`: `/proc/self/task/<tid>/stat` state S in `futex`)
//! before anything acts on it, so counts are exact, not "at least".

use super::{abs, futex, gettid, p, rel, ts_ptr, want_err, word, PipeOk, Settle};
use super::{FUTEX_CMP_REQUEUE_PI, FUTEX_PRIVATE_FLAG, FUTEX_TID_MASK, FUTEX_UNLOCK_PI};
use super::{FUTEX_LOCK_PI, FUTEX_WAIT, FUTEX_WAIT_REQUEUE_PI, FUTEX_WAKE};
use guest_tests::cases::Ctx;
use guest_tests::hash::{self, done, ensure_res, Check};
use guest_tests::ktap::{fail, Outcome};
use guest_tests::ops::{
    self, addr, ensure_wake, ensure_word, op, Queue, Waiters, ALL, ANY32, SC_FUTEX,
};
use guest_tests::sys;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// `n` waiters in FUTEX_WAIT on A, each proven asleep; one FUTEX_CMP_REQUEUE
/// A -> B (nr_wake 0, nr_requeue INT_MAX, val3 the word) returns woken +
/// requeued, exactly n (`futex_requeue()`); nobody wakes. A wake of A then
/// finds nobody (0), and a wake of B wakes exactly the n, each returning 0.
fn requeue(n: usize) -> Check {
    let (a, b) = (ops::word(0), ops::word(0));
    let mut ws = Waiters::new();
    let (mut on_a, mut on_b) = (Queue::new(), Queue::new());
    for id in ws.add_n(n, SC_FUTEX, ops::waiting_private(a, 0))? {
        on_a.push(id, ANY32);
    }
    let (woken, moved) = on_a.requeue(0, ALL as usize, &mut on_b);
    ensure_res(
        &format!("FUTEX_CMP_REQUEUE A -> B with {n} waiting (nr_wake 0, nr_requeue INT_MAX)"),
        sys::futex(addr(a), op::CMP_REQUEUE | op::PRIVATE, 0, ALL, addr(b), 0),
        Queue::requeue_result(&woken, &moved),
    )?;
    ws.woke("FUTEX_CMP_REQUEUE with nr_wake 0", &woken)?;
    ensure_wake(
        "FUTEX_WAKE A after the requeue",
        ops::wake_private(a, ALL),
        &mut ws,
        &mut on_a,
        (i32::MAX, ANY32, false),
    )?;
    ensure_wake(
        "FUTEX_WAKE B",
        ops::wake_private(b, ALL),
        &mut ws,
        &mut on_b,
        (i32::MAX, ANY32, false),
    )?;
    ws.join()
}

pub fn requeue_single(_: &Ctx) -> Outcome {
    done(requeue(1))
}

pub fn requeue_multiple(_: &Ctx) -> Outcome {
    done(requeue(10))
}

/// A waiter in FUTEX_WAIT_REQUEUE_PI on f1 is requeued to the PI futex f2
/// held by the waker; when the waker unlocks, the waiter owns f2.
pub fn requeue_pi_wakes_owner(_: &Ctx) -> Check {
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
            Err(e) => return Err(fail(format!("FUTEX_CMP_REQUEUE_PI: {e}"))),
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
pub fn requeue_pi_mismatched_ops(_: &Ctx) -> Check {
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

/// Upstream futex_requeue_pi_signal_restart: a waiter asleep in
/// FUTEX_WAIT_REQUEUE_PI gets a signal (a handler without SA_RESTART) three
/// times; each time the handler runs in it and it is asleep in `futex`
/// again without having returned (`handle_early_requeue_pi_wakeup()`:
/// -ERESTARTNOINTR, restarted whatever the handler's flags). Then, with f2
/// held here, FUTEX_CMP_REQUEUE_PI returns 1 (requeued, not woken) and
/// sets FUTEX_WAITERS on f2; UNLOCK_PI hands f2 over: the waiter returns 0
/// owning it (`its TID|FUTEX_WAITERS`), and its own UNLOCK_PI stores 0.
pub fn requeue_pi_signal_restart(_: &Ctx) -> Outcome {
    done((|| {
        ops::install_handler(libc::SIGUSR1, false)?;
        let (f1, f2) = (ops::word(0), ops::word(0));
        let seen: &'static AtomicU32 = ops::word(0);
        let me = hash::gettid() as u32;
        ensure_res(
            "FUTEX_LOCK_PI f2",
            sys::futex(addr(f2), op::LOCK_PI | op::PRIVATE, 0, 0, 0, 0),
            Ok(0),
        )?;
        let mut ws = Waiters::new();
        let id = ws.add(SC_FUTEX, move || {
            let pi = op::PRIVATE;
            let r = sys::futex(addr(f1), op::WAIT_REQUEUE_PI | pi, 0, 0, addr(f2), 0);
            let owned = f2.load(Ordering::SeqCst);
            seen.store(owned, Ordering::SeqCst);
            if r == Ok(0) && owned & FUTEX_TID_MASK == hash::gettid() as u32 {
                sys::futex(addr(f2), op::UNLOCK_PI | pi, 0, 0, 0, 0)?;
            }
            r
        })?;
        for n in 1..=3 {
            ops::interrupt(&ws, id, libc::SIGUSR1)?;
            ws.wait_asleep(id).map_err(|o| match o {
                Outcome::Fail(m) => hash::fail(format!(
                    "after signal {n} the waiter did not restart FUTEX_WAIT_REQUEUE_PI: {m}"
                )),
                o => o,
            })?;
        }
        ws.woke("three signals (each restarts the wait)", &[])?;
        ensure_res(
            "FUTEX_CMP_REQUEUE_PI f1 -> f2 (nr_wake 1, nr_requeue 1) with f2 held",
            sys::futex(
                addr(f1),
                op::CMP_REQUEUE_PI | op::PRIVATE,
                1,
                1,
                addr(f2),
                0,
            ),
            Ok(1),
        )?;
        ws.woke("FUTEX_CMP_REQUEUE_PI (requeued onto f2, not woken)", &[])?;
        ensure_word("f2 after the requeue", f2, me | sys::WAITERS)?;
        ensure_res(
            "FUTEX_UNLOCK_PI f2",
            sys::futex(addr(f2), op::UNLOCK_PI | op::PRIVATE, 0, 0, 0, 0),
            Ok(0),
        )?;
        ws.woke(
            "FUTEX_UNLOCK_PI f2 (hands it to the requeued waiter)",
            &[id],
        )?;
        let tid = ws.tid(id) as u32;
        ensure_word("f2 as the waiter got it", seen, tid | sys::WAITERS)?;
        ensure_word("f2 after the waiter's FUTEX_UNLOCK_PI", f2, 0)?;
        ws.join()
    })())
}
