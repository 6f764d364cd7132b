//! The PI futex basics, exactly (`docs/futex-abi.md` section 8):
//! FUTEX_LOCK_PI, LOCK_PI2, TRYLOCK_PI and UNLOCK_PI — the word's exact
//! value after each step (owner TID, FUTEX_WAITERS, FUTEX_OWNER_DIED), the
//! errnos of a bad owner, timeouts and their clocks, signals, and how the
//! plain operations refuse a PI waiter (and the other way round).
//!
//! Cases (15):
//! - `lock-pi-free-word`: LOCK_PI / TRYLOCK_PI on 0 store exactly the TID; relocking -> EDEADLK (LOCK_PI, LOCK_PI2, TRYLOCK_PI); UNLOCK_PI stores 0, again -> EPERM.
//! - `lock-pi-owner-died-kept`: taking a free word keeps FUTEX_OWNER_DIED and drops FUTEX_WAITERS; UNLOCK_PI without kernel waiters clears both.
//! - `unlock-pi-eperm`: UNLOCK_PI of a word not holding the caller's TID -> EPERM, checked before the alignment; unreadable -> EFAULT.
//! - `lock-pi-contended-waiters-bit`: a blocked LOCK_PI sets FUTEX_WAITERS; plain WAKE, WAKE_OP, CMP_REQUEUE refuse the PI waiter (EINVAL); UNLOCK_PI hands the lock over as TID|WAITERS.
//! - `trylock-pi-contended-eagain`: TRYLOCK_PI of a held lock -> EAGAIN, leaving FUTEX_WAITERS set; the owner's UNLOCK_PI then stores 0.
//! - `lock-pi-no-owner-esrch`: a TID no task has -> ESRCH (LOCK_PI, TRYLOCK_PI), with FUTEX_WAITERS left set.
//! - `lock-pi-kthread-eperm`: a kernel thread's TID as the owner -> EPERM.
//! - `lock-pi-timeout-clocks`: LOCK_PI's timeout is absolute CLOCK_REALTIME; LOCK_PI2's absolute CLOCK_MONOTONIC unless FUTEX_CLOCK_REALTIME.
//! - `lock-pi-signal-restarts`: a handler without SA_RESTART does not end a blocked LOCK_PI (no EINTR); the unlock still hands it over.
//! - `unlock-pi-plain-waiter-einval`: UNLOCK_PI with a FUTEX_WAIT waiter on the word -> EINVAL, word unchanged.
//! - `requeue-pi-waiter-refuses-plain-ops`: a WAIT_REQUEUE_PI waiter: FUTEX_WAKE and CMP_REQUEUE -> EINVAL, CMP_REQUEUE_PI to another uaddr2 -> EINVAL, to its own takes the free PI word for it.
//!
//! The races and retry paths are `futex-pi/retry.rs`:
//! - `abba-deadlock-edeadlk`: A owns F1 and sleeps in LOCK_PI of F2, the caller owns F2: its LOCK_PI of F1 -> EDEADLK (F1 = A|WAITERS, A still asleep); C then sleeps in LOCK_PI of F1; UNLOCK_PI of F2 hands it to A (A|WAITERS), A's unlock of F1 hands it to C (C|WAITERS), all unlocks return 0 and leave both words 0; 4 rounds, private and shared.
//! - `lock-pi-timeout-vs-unlock`: a LOCK_PI2 timeout expiring as the owner's UNLOCK_PI runs: 0 iff the word holds the waiter's TID (never ETIMEDOUT with it), the owner's UNLOCK_PI 0 (or EAGAIN, word changed under it, then 0), the word 0 after each round; skips unless a round overlapped.
//! - `lock-pi-owner-exiting`: an owner exits holding the lock (no robust list) as a waiter's LOCK_PI2 comes: 0 with the word its TID|WAITERS|OWNER_DIED (attached before the exit) or ESRCH with the dead TID|WAITERS, nothing else; skips unless both happened.
//! - `lock-pi-owner-exiting-fifo`: the same with a SCHED_FIFO waiter pinned to the owner's CPU, waking into its exit: its LOCK_PI2 also spends at most 250 ms (scaled) of CPU time (it sleeps on the exit, never spins); skips where SCHED_FIFO is refused.

#[path = "futex-pi/retry.rs"]
mod retry;

use guest_tests::cases::{main as run, scaled, Case, Ctx};
use guest_tests::hash::{self, done, ensure_res, skip, Check, Res, Worker, EINVAL};
use guest_tests::ktap::Outcome;
use guest_tests::ops::{
    addr, ensure_expired, ensure_waited, ensure_word, install_handler, interrupt, mutated, now,
    op::*, plus, timed, ts, wake_private, word, Page, Waiters, ALL, EAGAIN, EDEADLK, EFAULT, EPERM,
    ESRCH, KERNEL_ADDR, OWNER_DIED, SC_FUTEX, TIMEOUT, WAITERS,
};
use guest_tests::sys::{encode_op, futex};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const P: u32 = PRIVATE;
/// A TID above PID_MAX_LIMIT (4M): no task has it.
const NO_TID: u32 = 0x3fff_fff0;

fn pi(w: u64, o: u32) -> Res {
    futex(w, o | P, 0, 0, 0, 0)
}

fn me() -> u32 {
    hash::gettid() as u32
}

/// FUTEX_WAITERS as the kernel sets it for a contended lock.
fn waiters_bit() -> u32 {
    if mutated("pi-no-waiters-bit") {
        0
    } else {
        WAITERS
    }
}

/// A waiter call: `o` (a PI lock op) on `w`, then the word it saw into
/// `seen`, then UNLOCK_PI; Ok(0) if all went well.
fn lock_then_unlock(
    w: &'static AtomicU32,
    o: u32,
    seen: &'static AtomicU32,
) -> impl FnOnce() -> Res + Send + 'static {
    move || {
        pi(addr(w), o)?;
        seen.store(w.load(Ordering::SeqCst), Ordering::SeqCst);
        pi(addr(w), UNLOCK_PI)
    }
}

fn lock_pi_free_word(_: &Ctx) -> Outcome {
    done((|| {
        for (kind, p) in [("private", P), ("shared", 0)] {
            let w = word(0);
            let a = addr(w);
            let call = |o: u32| futex(a, o | p, 0, 0, 0, 0);
            ensure_res(&format!("LOCK_PI ({kind}) of 0"), call(LOCK_PI), Ok(0))?;
            ensure_word("after LOCK_PI", w, me())?;
            for (name, o) in [
                ("LOCK_PI", LOCK_PI),
                ("LOCK_PI2", LOCK_PI2),
                ("TRYLOCK_PI", TRYLOCK_PI),
            ] {
                ensure_res(
                    &format!("{name} ({kind}) of the caller's own lock"),
                    call(o),
                    EDEADLK,
                )?;
                ensure_word(&format!("after {name}"), w, me())?;
            }
            ensure_res(&format!("UNLOCK_PI ({kind})"), call(UNLOCK_PI), Ok(0))?;
            ensure_word("after UNLOCK_PI", w, 0)?;
            ensure_res(&format!("UNLOCK_PI ({kind}) again"), call(UNLOCK_PI), EPERM)?;
            ensure_res(
                &format!("TRYLOCK_PI ({kind}) of 0"),
                call(TRYLOCK_PI),
                Ok(0),
            )?;
            ensure_word("after TRYLOCK_PI", w, me())?;
            ensure_res(&format!("UNLOCK_PI ({kind})"), call(UNLOCK_PI), Ok(0))?;
        }
        Ok(())
    })())
}

fn lock_pi_owner_died_kept(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(OWNER_DIED);
        ensure_res("LOCK_PI of FUTEX_OWNER_DIED", pi(addr(w), LOCK_PI), Ok(0))?;
        ensure_word("after LOCK_PI of FUTEX_OWNER_DIED", w, OWNER_DIED | me())?;
        ensure_res("UNLOCK_PI", pi(addr(w), UNLOCK_PI), Ok(0))?;
        ensure_word("after UNLOCK_PI", w, 0)?;
        w.store(WAITERS, Ordering::SeqCst);
        ensure_res(
            "LOCK_PI of FUTEX_WAITERS, no waiter",
            pi(addr(w), LOCK_PI),
            Ok(0),
        )?;
        ensure_word("after LOCK_PI of FUTEX_WAITERS", w, me())?;
        w.store(me() | WAITERS | OWNER_DIED, Ordering::SeqCst);
        ensure_res(
            "UNLOCK_PI of TID|WAITERS|OWNER_DIED, no waiter",
            pi(addr(w), UNLOCK_PI),
            Ok(0),
        )?;
        ensure_word("after it", w, 0)
    })())
}

fn unlock_pi_eperm(_: &Ctx) -> Outcome {
    done((|| {
        let (w, other) = (word(0), word(0));
        let mut ws = Waiters::new();
        let id = ws.add(SC_FUTEX, move || futex(addr(other), WAIT | P, 0, 0, 0, 0))?;
        let tid = ws.tid(id) as u32;
        ensure_res("UNLOCK_PI of 0", pi(addr(w), UNLOCK_PI), EPERM)?;
        for (what, v) in [
            ("another live thread's TID", tid),
            ("that TID|WAITERS", tid | WAITERS),
            ("a TID no task has", NO_TID),
        ] {
            w.store(v, Ordering::SeqCst);
            ensure_res(
                &format!("UNLOCK_PI of {what}"),
                pi(addr(w), UNLOCK_PI),
                EPERM,
            )?;
            ensure_word(&format!("after UNLOCK_PI of {what}"), w, v)?;
        }
        w.store(me() | OWNER_DIED, Ordering::SeqCst);
        ensure_res(
            "UNLOCK_PI of TID|OWNER_DIED (the TID matches)",
            pi(addr(w), UNLOCK_PI),
            Ok(0),
        )?;
        ensure_word("after it", w, 0)?;
        let page = Page::new(libc::PROT_READ | libc::PROT_WRITE, false)?;
        let bytes = me().to_le_bytes();
        // SAFETY: bytes 1..5 of our own writable page.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), page.at(1) as *mut u8, 4) };
        ensure_res(
            "UNLOCK_PI at page + 1, holding the caller's TID (then the key: unaligned)",
            pi(page.at(1), UNLOCK_PI),
            EINVAL,
        )?;
        ensure_res(
            "UNLOCK_PI at page + 2, not the caller's TID (the owner is checked first)",
            pi(page.at(2), UNLOCK_PI),
            EPERM,
        )?;
        let none = Page::new(libc::PROT_NONE, false)?;
        ensure_res(
            "UNLOCK_PI of an unreadable word",
            pi(none.at(0), UNLOCK_PI),
            EFAULT,
        )?;
        ensure_res(
            "UNLOCK_PI of a kernel address",
            pi(KERNEL_ADDR, UNLOCK_PI),
            EFAULT,
        )?;
        ensure_res(
            "LOCK_PI of an unreadable word",
            pi(none.at(0), LOCK_PI),
            EFAULT,
        )?;
        ensure_res(
            "FUTEX_WAKE of the other thread",
            wake_private(other, 1),
            Ok(1),
        )?;
        ws.woke("FUTEX_WAKE of the other thread", &[id])?;
        ws.join()
    })())
}

fn lock_pi_contended(_: &Ctx) -> Outcome {
    done((|| {
        let (w, w2, seen) = (word(0), word(0), word(0));
        ensure_res("LOCK_PI", pi(addr(w), LOCK_PI), Ok(0))?;
        let mut ws = Waiters::new();
        let id = ws.add(SC_FUTEX, lock_then_unlock(w, LOCK_PI, seen))?;
        let held = me() | waiters_bit();
        ensure_word("with a LOCK_PI waiter", w, held)?;
        for (what, r) in [
            ("FUTEX_WAKE of a PI waiter", wake_private(w, ALL)),
            (
                "WAKE_OP with a PI waiter on uaddr1",
                futex(
                    addr(w),
                    WAKE_OP | P,
                    1,
                    1,
                    addr(w2),
                    encode_op(OP_SET, 7, CMP_EQ, 0),
                ),
            ),
            (
                "CMP_REQUEUE of a PI waiter",
                futex(addr(w), CMP_REQUEUE | P, 0, 1, addr(w2), held as u64),
            ),
        ] {
            ensure_res(what, r, EINVAL)?;
            ws.woke(what, &[])?;
        }
        ensure_word("WAKE_OP's uaddr2 (its op ran before the EINVAL)", w2, 7)?;
        ensure_res("UNLOCK_PI with a waiter", pi(addr(w), UNLOCK_PI), Ok(0))?;
        ws.woke("UNLOCK_PI with a waiter (it locks, then unlocks)", &[id])?;
        let tid = ws.tid(id) as u32;
        ensure_word("as the new owner saw it", seen, tid | WAITERS)?;
        ensure_word("after the new owner's UNLOCK_PI", w, 0)?;
        ws.join()
    })())
}

fn trylock_pi_contended(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        ensure_res("LOCK_PI", pi(addr(w), LOCK_PI), Ok(0))?;
        let t = Worker::spawn(move || pi(addr(w), TRYLOCK_PI))?;
        ensure_res(
            "TRYLOCK_PI of a held lock",
            t.join(scaled(Duration::from_secs(10)))?,
            EAGAIN,
        )?;
        ensure_word("after the failed TRYLOCK_PI", w, me() | waiters_bit())?;
        ensure_res("UNLOCK_PI", pi(addr(w), UNLOCK_PI), Ok(0))?;
        ensure_word("after UNLOCK_PI", w, 0)
    })())
}

fn lock_pi_no_owner(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(NO_TID);
        for name in ["LOCK_PI", "TRYLOCK_PI"] {
            let o = if name == "LOCK_PI" {
                LOCK_PI
            } else {
                TRYLOCK_PI
            };
            ensure_res(
                &format!("{name} of a TID no task has"),
                pi(addr(w), o),
                ESRCH,
            )?;
            ensure_word(&format!("after {name}"), w, NO_TID | waiters_bit())?;
        }
        Ok(())
    })())
}

/// A kernel thread's PID from /proc (`PF_KTHREAD` in the stat flags).
fn kthread_pid() -> Option<u32> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let dir = std::fs::read_dir("/proc").ok()?;
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(6)?.parse::<u64>().ok()
                })
                .is_some_and(|flags| flags & PF_KTHREAD != 0)
        })
}

fn lock_pi_kthread(_: &Ctx) -> Outcome {
    let Some(pid) = kthread_pid() else {
        return skip("no kernel thread is visible in /proc (a PID namespace): no kernel thread's TID to name");
    };
    done((|| {
        let w = word(pid);
        ensure_res(
            &format!("TRYLOCK_PI of kernel thread {pid}'s TID"),
            pi(addr(w), TRYLOCK_PI),
            EPERM,
        )?;
        ensure_res(
            &format!("LOCK_PI of kernel thread {pid}'s TID"),
            pi(addr(w), LOCK_PI),
            EPERM,
        )
    })())
}

fn lock_pi_timeout_clocks(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        ensure_res("LOCK_PI", pi(addr(w), LOCK_PI), Ok(0))?;
        let t = Worker::spawn(move || -> Check {
            let a = addr(w);
            let ten = Duration::from_secs(10);
            for (name, o, clock) in [
                (
                    "LOCK_PI until CLOCK_REALTIME now + 60 ms",
                    LOCK_PI,
                    libc::CLOCK_REALTIME,
                ),
                (
                    "LOCK_PI2 until CLOCK_MONOTONIC now + 60 ms",
                    LOCK_PI2,
                    libc::CLOCK_MONOTONIC,
                ),
                (
                    "LOCK_PI2|CLOCK_REALTIME until CLOCK_REALTIME now + 60 ms",
                    LOCK_PI2 | CLOCK_REALTIME,
                    libc::CLOCK_REALTIME,
                ),
            ] {
                ensure_waited(
                    name,
                    timed(|| {
                        let d = plus(now(clock), TIMEOUT);
                        futex(a, o | P, 0, ts(&d), 0, 0)
                    }),
                    TIMEOUT,
                )?;
            }
            ensure_expired(
                "LOCK_PI until CLOCK_MONOTONIC now + 10 s (1970 on CLOCK_REALTIME)",
                timed(|| {
                    let d = plus(now(libc::CLOCK_MONOTONIC), ten);
                    futex(a, LOCK_PI | P, 0, ts(&d), 0, 0)
                }),
                ten,
            )?;
            ensure_expired(
                "LOCK_PI2|CLOCK_REALTIME until CLOCK_MONOTONIC now + 10 s",
                timed(|| {
                    let d = plus(now(libc::CLOCK_MONOTONIC), ten);
                    futex(a, LOCK_PI2 | CLOCK_REALTIME | P, 0, ts(&d), 0, 0)
                }),
                ten,
            )
        })?;
        t.join(scaled(Duration::from_secs(30)))??;
        ensure_word("after the timed-out waiters", w, me() | waiters_bit())?;
        ensure_res("UNLOCK_PI", pi(addr(w), UNLOCK_PI), Ok(0))?;
        ensure_word("after UNLOCK_PI", w, 0)
    })())
}

fn lock_pi_signal_restarts(_: &Ctx) -> Outcome {
    done((|| {
        install_handler(libc::SIGUSR2, false)?;
        let (w, seen) = (word(0), word(0));
        ensure_res("LOCK_PI", pi(addr(w), LOCK_PI), Ok(0))?;
        let mut ws = Waiters::new();
        let id = ws.add(SC_FUTEX, lock_then_unlock(w, LOCK_PI, seen))?;
        for _ in 0..2 {
            interrupt(&ws, id, libc::SIGUSR2)?;
            // -EINTR becomes -ERESTARTNOINTR: back to sleep, no EINTR.
            ws.wait_asleep(id)?;
        }
        ensure_res(
            "UNLOCK_PI with the interrupted waiter",
            pi(addr(w), UNLOCK_PI),
            Ok(0),
        )?;
        ws.woke("UNLOCK_PI with the interrupted waiter", &[id])?;
        ensure_word("as the new owner saw it", seen, ws.tid(id) as u32 | WAITERS)?;
        ws.join()
    })())
}

fn unlock_pi_plain_waiter(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        ensure_res("LOCK_PI", pi(addr(w), LOCK_PI), Ok(0))?;
        let mut ws = Waiters::new();
        let v = me();
        let id = ws.add(SC_FUTEX, move || {
            futex(addr(w), WAIT | P, v as u64, 0, 0, 0)
        })?;
        ensure_res(
            "UNLOCK_PI with a FUTEX_WAIT waiter on the word",
            pi(addr(w), UNLOCK_PI),
            EINVAL,
        )?;
        ensure_word("after the refused UNLOCK_PI", w, me())?;
        ws.woke("UNLOCK_PI with a FUTEX_WAIT waiter", &[])?;
        ensure_res(
            "FUTEX_WAKE of the FUTEX_WAIT waiter",
            wake_private(w, ALL),
            Ok(1),
        )?;
        ws.woke("FUTEX_WAKE", &[id])?;
        ensure_res("UNLOCK_PI", pi(addr(w), UNLOCK_PI), Ok(0))?;
        ws.join()
    })())
}

fn requeue_pi_waiter(_: &Ctx) -> Outcome {
    done((|| {
        let (f1, f2, f3, seen) = (word(0), word(0), word(0), word(0));
        let mut ws = Waiters::new();
        let id = ws.add(SC_FUTEX, move || {
            futex(addr(f1), WAIT_REQUEUE_PI | P, 0, 0, addr(f2), 0)?;
            seen.store(f2.load(Ordering::SeqCst), Ordering::SeqCst);
            pi(addr(f2), UNLOCK_PI)
        })?;
        for (what, r) in [
            (
                "FUTEX_WAKE of a WAIT_REQUEUE_PI waiter",
                wake_private(f1, ALL),
            ),
            (
                "CMP_REQUEUE of a WAIT_REQUEUE_PI waiter",
                futex(addr(f1), CMP_REQUEUE | P, 0, 1, addr(f2), 0),
            ),
            (
                "CMP_REQUEUE_PI to another PI word than the waiter's",
                futex(addr(f1), CMP_REQUEUE_PI | P, 1, 0, addr(f3), 0),
            ),
        ] {
            ensure_res(what, r, EINVAL)?;
            ws.woke(what, &[])?;
        }
        // The PI word is free: the requeue takes it for the waiter and
        // wakes it (1 woken), no rt_mutex wait.
        let what = "CMP_REQUEUE_PI to the waiter's free PI word";
        ensure_res(
            what,
            futex(addr(f1), CMP_REQUEUE_PI | P, 1, 0, addr(f2), 0),
            Ok(1),
        )?;
        ws.woke(what, &[id])?;
        ensure_word(
            "the PI word as the woken waiter saw it",
            seen,
            ws.tid(id) as u32,
        )?;
        ensure_word("after its UNLOCK_PI", f2, 0)?;
        ws.join()
    })())
}

const ABOUT: &str =
    "The PI futex basics, exactly: LOCK_PI, LOCK_PI2, TRYLOCK_PI, UNLOCK_PI (docs/futex-abi.md section 8).";

fn main() {
    run(
        ABOUT,
        &[
            Case::new("lock-pi-free-word", lock_pi_free_word),
            Case::new("lock-pi-owner-died-kept", lock_pi_owner_died_kept),
            Case::new("unlock-pi-eperm", unlock_pi_eperm),
            Case::new("lock-pi-contended-waiters-bit", lock_pi_contended),
            Case::new("trylock-pi-contended-eagain", trylock_pi_contended),
            Case::new("lock-pi-no-owner-esrch", lock_pi_no_owner),
            Case::new("lock-pi-kthread-eperm", lock_pi_kthread),
            Case::new("lock-pi-timeout-clocks", lock_pi_timeout_clocks),
            Case::new("lock-pi-signal-restarts", lock_pi_signal_restarts),
            Case::new("unlock-pi-plain-waiter-einval", unlock_pi_plain_waiter),
            Case::new("requeue-pi-waiter-refuses-plain-ops", requeue_pi_waiter),
            Case::new("abba-deadlock-edeadlk", retry::abba_deadlock),
            Case::new("lock-pi-timeout-vs-unlock", retry::timeout_vs_unlock),
            Case::new("lock-pi-owner-exiting", retry::owner_exiting),
            Case::new("lock-pi-owner-exiting-fifo", retry::owner_exiting_fifo),
        ],
    )
}
