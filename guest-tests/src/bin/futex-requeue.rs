//! The calls that move waiters or take `struct futex_waitv` arrays, exactly
//! (`docs/futex-abi.md` section 8): FUTEX_REQUEUE, FUTEX_CMP_REQUEUE,
//! futex2's futex_requeue and futex_waitv. Every requeue checks its return
//! value, which waiters woke and which moved (a later wake of the target
//! finds exactly those), against `ops::Queue`.
//!
//! Cases (15):
//! - `cmp-requeue-counts`: nr_wake 1, nr_requeue 2 of 5: the oldest wakes, the next two move, the return is 3.
//! - `requeue-nr-boundaries`: (0, 0) does nothing and returns 0; (0, 1) moves one; (2, 0) wakes two.
//! - `requeue-keeps-bitset`: a requeued WAIT_BITSET waiter keeps its bitset on the target.
//! - `cmp-requeue-eagain`: val3 differing from *uaddr1 -> EAGAIN, nobody woken or moved; the keys and counts are checked first.
//! - `requeue-ignores-val3`: FUTEX_REQUEUE compares nothing; nr_requeue is arg4 as a u32.
//! - `requeue-negative-einval`: a negative nr_wake or nr_requeue -> EINVAL (futex(2) and futex_requeue), nothing woken.
//! - `requeue-same-address`: uaddr1 == uaddr2 is allowed for plain requeue (counts the "moved" ones); EINVAL for the PI variants.
//! - `futex2-requeue-counts`: futex_requeue wakes nr_wake, moves nr_requeue, compares waiters[0].val only (EAGAIN).
//! - `futex2-requeue-validation`: futex_requeue's flags, array, entry and count errnos; entries with differing flags per `requeue_same_flags`.
//! - `waitv-validation`: futex_waitv's nr, flags, array, entry, clockid and timeout errnos, in the kernel's order.
//! - `waitv-eagain-order`: keys of all entries first, then values in order: the first changed or unreadable entry decides; nothing stays queued.
//! - `waitv-returns-woken-index`: the return is the index of the woken entry (0, 2 of 3; 127 of 128); the others are unqueued.
//! - `waitv-same-word-twice`: two entries on one word are two queue entries: a wake counts both, the return is the last woken index.
//! - `waitv-entry-flags-select-key`: each entry's FUTEX2_PRIVATE picks its key: a wake of the other kind finds nobody.
//! - `waitv-timeout-clocks`: futex_waitv's timeout is absolute, on the clock its clockid names.

use guest_tests::cases::{main as run, Case, Ctx};
use guest_tests::hash::{done, ensure_res, Check, Res, EINVAL};
use guest_tests::ktap::Outcome;
use guest_tests::ops::{
    self, addr, ensure_expired, ensure_waited, ensure_wake, mutated, now, op::*, plus, timed, ts,
    uptime, wake_private, word, Page, Queue, Waiters, ALL, ANY, ANY32, EAGAIN, EFAULT, KERNEL_ADDR,
    SC_FUTEX, SC_WAIT2, SC_WAITV, TIMEOUT, U32P,
};
use guest_tests::sys::{self, FutexWaitv, FUTEX2_PRIVATE, FUTEX2_SIZE_U32};
use guest_tests::sys::{futex, futex_requeue_raw, futex_wait_raw, futex_waitv_raw, futex_wake_raw};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const P: u32 = PRIVATE;
const MONO: libc::clockid_t = libc::CLOCK_MONOTONIC;
const REAL: libc::clockid_t = libc::CLOCK_REALTIME;

fn cmp_requeue(f1: &AtomicU32, f2: &AtomicU32, nr_wake: u64, nr_requeue: u64, val3: u64) -> Res {
    futex(
        addr(f1),
        CMP_REQUEUE | P,
        nr_wake,
        nr_requeue,
        addr(f2),
        val3,
    )
}

fn entry(w: &AtomicU32, val: u64, flags: u32) -> FutexWaitv {
    FutexWaitv {
        val,
        uaddr: addr(w),
        flags,
        reserved: 0,
    }
}

/// `n` FUTEX_WAIT_PRIVATE waiters on `w` (for 0), in `q`'s order.
fn waiters_on(
    ws: &mut Waiters,
    q: &mut Queue,
    w: &'static AtomicU32,
    n: usize,
) -> Result<(), Outcome> {
    for id in ws.add_n(n, SC_FUTEX, ops::waiting_private(w, 0))? {
        q.push(id, ANY32);
    }
    Ok(())
}

/// Checks a requeue result against the model and that exactly the woken
/// ones woke; returns the moved ones.
fn ensure_requeue(
    what: &str,
    got: Res,
    ws: &mut Waiters,
    (from, to): (&mut Queue, &mut Queue),
    (nr_wake, nr_requeue): (usize, usize),
) -> Result<Vec<usize>, Outcome> {
    let (woken, moved) = from.requeue(nr_wake, nr_requeue, to);
    ensure_res(what, got, Queue::requeue_result(&woken, &moved))?;
    ws.woke(what, &woken)?;
    Ok(moved)
}

/// Wakes everybody left on `w` (modelled by `q`) and checks who woke.
fn wake_rest(what: &str, w: &AtomicU32, ws: &mut Waiters, q: &mut Queue) -> Check {
    let r = wake_private(w, ALL);
    ensure_wake(what, r, ws, q, (i32::MAX, ANY32, false))
}

fn cmp_requeue_counts(_: &Ctx) -> Outcome {
    done((|| {
        let (f1, f2) = (word(0), word(0));
        let mut ws = Waiters::new();
        let (mut q1, mut q2) = (Queue::new(), Queue::new());
        waiters_on(&mut ws, &mut q1, f1, 5)?;
        let r = cmp_requeue(f1, f2, 1, 2, 0);
        ensure_requeue(
            "CMP_REQUEUE nr_wake 1, nr_requeue 2",
            r,
            &mut ws,
            (&mut q1, &mut q2),
            (1, 2),
        )?;
        wake_rest("FUTEX_WAKE of the target", f2, &mut ws, &mut q2)?;
        wake_rest("FUTEX_WAKE of the source", f1, &mut ws, &mut q1)?;
        ws.join()
    })())
}

fn requeue_nr_boundaries(_: &Ctx) -> Outcome {
    done((|| {
        let (f1, f2) = (word(0), word(0));
        let mut ws = Waiters::new();
        let (mut q1, mut q2) = (Queue::new(), Queue::new());
        waiters_on(&mut ws, &mut q1, f1, 4)?;
        for (nw, nr) in [(0, 0), (0, 1), (2, 0)] {
            let what = format!("CMP_REQUEUE nr_wake {nw}, nr_requeue {nr}");
            let r = cmp_requeue(f1, f2, nw as u64, nr as u64, 0);
            ensure_requeue(&what, r, &mut ws, (&mut q1, &mut q2), (nw, nr))?;
        }
        wake_rest("FUTEX_WAKE of the target", f2, &mut ws, &mut q2)?;
        wake_rest("FUTEX_WAKE of the source", f1, &mut ws, &mut q1)?;
        ws.join()
    })())
}

fn requeue_keeps_bitset(_: &Ctx) -> Outcome {
    done((|| {
        let (f1, f2) = (word(0), word(0));
        let mut ws = Waiters::new();
        let (mut q1, mut q2) = (Queue::new(), Queue::new());
        for bits in [0b01u32, 0b10] {
            let id = ws.add(SC_FUTEX, move || {
                futex(addr(f1), WAIT_BITSET | P, 0, 0, 0, bits as u64)
            })?;
            q1.push(id, bits);
        }
        let r = cmp_requeue(f1, f2, 0, ALL, 0);
        ensure_requeue(
            "CMP_REQUEUE of both",
            r,
            &mut ws,
            (&mut q1, &mut q2),
            (0, 2),
        )?;
        for bits in [0b10u32, 0b01] {
            let r = futex(addr(f2), WAKE_BITSET | P, ALL, 0, 0, bits as u64);
            ensure_wake(
                &format!("WAKE_BITSET {bits:#b} of the target"),
                r,
                &mut ws,
                &mut q2,
                (i32::MAX, bits, false),
            )?;
        }
        ws.join()
    })())
}

fn cmp_requeue_eagain(_: &Ctx) -> Outcome {
    done((|| {
        let (f1, f2) = (word(0), word(0));
        let mut ws = Waiters::new();
        let (mut q1, mut q2) = (Queue::new(), Queue::new());
        waiters_on(&mut ws, &mut q1, f1, 2)?;
        f1.store(1, Ordering::SeqCst);
        let none = Page::new(libc::PROT_NONE, false)?;
        for (what, r, want) in [
            (
                "CMP_REQUEUE, val3 differs, uaddr2 unaligned (keys first)",
                futex(addr(f1), CMP_REQUEUE | P, 1, 1, addr(f2) + 1, 0),
                EINVAL,
            ),
            (
                "CMP_REQUEUE, val3 differs, nr_wake -1 (counts first)",
                cmp_requeue(f1, f2, u32::MAX as u64, 1, 0),
                EINVAL,
            ),
            (
                "CMP_REQUEUE from an unreadable word",
                futex(none.at(0), CMP_REQUEUE | P, 1, 1, addr(f2), 0),
                EFAULT,
            ),
        ] {
            ensure_res(what, r, want)?;
            ws.woke(what, &[])?;
        }
        let what = "CMP_REQUEUE with val3 0 on a word holding 1";
        let r = cmp_requeue(f1, f2, 1, 1, 0);
        if mutated("cmp-requeue-no-compare") {
            ensure_requeue(what, r, &mut ws, (&mut q1, &mut q2), (1, 1))?;
        } else {
            ensure_res(what, r, EAGAIN)?;
            ws.woke(what, &[])?;
        }
        ensure_res(
            "FUTEX_WAKE of the target",
            wake_private(f2, ALL),
            Ok(q2.len() as i64),
        )?;
        let r = cmp_requeue(f1, f2, 1, 1, 1);
        ensure_requeue(
            "CMP_REQUEUE with val3 1",
            r,
            &mut ws,
            (&mut q1, &mut q2),
            (1, 1),
        )?;
        wake_rest("FUTEX_WAKE of the target", f2, &mut ws, &mut q2)?;
        ws.join()
    })())
}

fn requeue_ignores_val3(_: &Ctx) -> Outcome {
    done((|| {
        let (f1, f2) = (word(7), word(0));
        let mut ws = Waiters::new();
        let (mut q1, mut q2) = (Queue::new(), Queue::new());
        for id in ws.add_n(3, SC_FUTEX, ops::waiting_private(f1, 7))? {
            q1.push(id, ANY32);
        }
        let what = "FUTEX_REQUEUE nr_wake 1, nr_requeue (1<<32)|1, val3 0xdead";
        let r = futex(addr(f1), REQUEUE | P, 1, (1 << 32) | 1, addr(f2), 0xdead);
        ensure_requeue(what, r, &mut ws, (&mut q1, &mut q2), (1, 1))?;
        wake_rest("FUTEX_WAKE of the target", f2, &mut ws, &mut q2)?;
        wake_rest("FUTEX_WAKE of the source", f1, &mut ws, &mut q1)?;
        ws.join()
    })())
}

fn requeue_negative(_: &Ctx) -> Outcome {
    done((|| {
        let (f1, f2) = (word(0), word(0));
        let mut ws = Waiters::new();
        let mut q1 = Queue::new();
        waiters_on(&mut ws, &mut q1, f1, 1)?;
        for (name, o) in [
            ("FUTEX_REQUEUE", REQUEUE),
            ("FUTEX_CMP_REQUEUE", CMP_REQUEUE),
        ] {
            for (nw, nr) in [
                (0x8000_0000u64, 1u64),
                (1, u32::MAX as u64),
                (1, (1 << 32) | u32::MAX as u64),
            ] {
                let what = format!("{name} nr_wake {nw:#x}, nr_requeue {nr:#x}");
                ensure_res(&what, futex(addr(f1), o | P, nw, nr, addr(f2), 0), EINVAL)?;
                ws.woke(&what, &[])?;
            }
        }
        let pair = [entry(f1, 0, U32P), entry(f2, 0, U32P)];
        for (nw, nr) in [(u32::MAX as u64, 1u64), (1, u32::MAX as u64)] {
            let what = format!("futex_requeue nr_wake {nw:#x}, nr_requeue {nr:#x}");
            ensure_res(
                &what,
                futex_requeue_raw(pair.as_ptr() as u64, 0, nw, nr),
                EINVAL,
            )?;
            ws.woke(&what, &[])?;
        }
        wake_rest("FUTEX_WAKE", f1, &mut ws, &mut q1)?;
        ws.join()
    })())
}

fn requeue_same_address(_: &Ctx) -> Outcome {
    done((|| {
        let (f, f2) = (word(0), word(0));
        let mut ws = Waiters::new();
        let mut q = Queue::new();
        waiters_on(&mut ws, &mut q, f, 3)?;
        // The "moved" ones stay queued on the same key, in place.
        let what = "CMP_REQUEUE from a word onto itself, nr_wake 1, nr_requeue INT_MAX";
        let r = cmp_requeue(f, f, 1, ALL, 0);
        let mut scratch = Queue::new();
        let (woken, moved) = q.requeue(1, usize::MAX, &mut scratch);
        ensure_res(what, r, Queue::requeue_result(&woken, &moved))?;
        ws.woke(what, &woken)?;
        wake_rest("FUTEX_WAKE", f, &mut ws, &mut scratch)?;
        for (what, r) in [
            (
                "CMP_REQUEUE_PI from a word onto itself",
                futex(addr(f), CMP_REQUEUE_PI | P, 1, 1, addr(f), 0),
            ),
            (
                "WAIT_REQUEUE_PI with uaddr2 == uaddr",
                futex(addr(f), WAIT_REQUEUE_PI | P, 0, 0, addr(f), 0),
            ),
            (
                "CMP_REQUEUE_PI with nr_wake 0",
                futex(addr(f), CMP_REQUEUE_PI | P, 0, 1, addr(f2), 0),
            ),
            (
                "CMP_REQUEUE_PI with nr_wake 2",
                futex(addr(f), CMP_REQUEUE_PI | P, 2, 1, addr(f2), 0),
            ),
        ] {
            ensure_res(what, r, EINVAL)?;
        }
        ws.join()
    })())
}

fn futex2_requeue_counts(_: &Ctx) -> Outcome {
    done((|| {
        let (f1, f2) = (word(0), word(0));
        let mut ws = Waiters::new();
        let (mut q1, mut q2) = (Queue::new(), Queue::new());
        for id in ws.add_n(3, SC_WAIT2, move || {
            futex_wait_raw(addr(f1), 0, ANY, U32P as u64, 0, 0)
        })? {
            q1.push(id, ANY32);
        }
        let stale = [entry(f1, 1, U32P), entry(f2, 0, U32P)];
        let what = "futex_requeue with waiters[0].val 1 on a word holding 0";
        ensure_res(what, sys::futex_requeue(&stale, 0, 1, 1), EAGAIN)?;
        ws.woke(what, &[])?;
        // waiters[1].val is validated (u32) but never compared.
        let pair = [entry(f1, 0, U32P), entry(f2, 0xdead, U32P)];
        let r = sys::futex_requeue(&pair, 0, 1, 1);
        ensure_requeue(
            "futex_requeue nr_wake 1, nr_requeue 1",
            r,
            &mut ws,
            (&mut q1, &mut q2),
            (1, 1),
        )?;
        let r = futex_wake_raw(addr(f2), ANY, ALL, U32P as u64);
        ensure_wake(
            "futex_wake of the target",
            r,
            &mut ws,
            &mut q2,
            (i32::MAX, ANY32, true),
        )?;
        let r = futex_wake_raw(addr(f1), ANY, ALL, U32P as u64);
        ensure_wake(
            "futex_wake of the source",
            r,
            &mut ws,
            &mut q1,
            (i32::MAX, ANY32, true),
        )?;
        ws.join()
    })())
}

fn futex2_requeue_validation(ctx: &Ctx) -> Outcome {
    done((|| {
        let (f1, f2) = (word(0), word(0));
        let good = [entry(f1, 0, U32P), entry(f2, 0, U32P)];
        let p = good.as_ptr() as u64;
        ensure_res(
            "futex_requeue, valid, nobody waiting",
            futex_requeue_raw(p, 0, 1, 1),
            Ok(0),
        )?;
        ensure_res(
            "futex_requeue flags 1",
            futex_requeue_raw(p, 1, 1, 1),
            EINVAL,
        )?;
        ensure_res(
            "futex_requeue flags PRIVATE",
            futex_requeue_raw(p, FUTEX2_PRIVATE as u64, 1, 1),
            EINVAL,
        )?;
        ensure_res("futex_requeue NULL", futex_requeue_raw(0, 0, 1, 1), EINVAL)?;
        let none = Page::new(libc::PROT_NONE, false)?;
        ensure_res(
            "futex_requeue of an unreadable array",
            futex_requeue_raw(none.at(0), 0, 1, 1),
            EFAULT,
        )?;
        for i in 0..2 {
            let mut bad = good;
            bad[i].reserved = 1;
            ensure_res(
                &format!("futex_requeue, entry {i} __reserved 1"),
                sys::futex_requeue(&bad, 0, 1, 1),
                EINVAL,
            )?;
            for (name, f) in ops::FUTEX2_BAD_FLAGS {
                let mut bad = good;
                bad[i].flags = *f as u32;
                ensure_res(
                    &format!("futex_requeue, entry {i} flags {name}"),
                    sys::futex_requeue(&bad, 0, 1, 1),
                    EINVAL,
                )?;
            }
            let mut bad = good;
            bad[i].val = 1 << 32;
            ensure_res(
                &format!("futex_requeue, entry {i} val 1<<32"),
                sys::futex_requeue(&bad, 0, 1, 1),
                EINVAL,
            )?;
            let mut bad = good;
            bad[i].uaddr += 2;
            ensure_res(
                &format!("futex_requeue, entry {i} unaligned"),
                sys::futex_requeue(&bad, 0, 1, 1),
                EINVAL,
            )?;
        }
        let mixed = [entry(f1, 0, U32P), entry(f2, 0, FUTEX2_SIZE_U32)];
        let want = if ctx.expect.requeue_same_flags {
            EINVAL
        } else {
            Ok(0)
        };
        ensure_res(
            "futex_requeue of a private and a shared entry (requeue_same_flags)",
            sys::futex_requeue(&mixed, 0, 1, 1),
            want,
        )
    })())
}

fn waitv_validation(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let stale: Vec<FutexWaitv> = (0..129).map(|_| entry(w, 1, U32P)).collect();
        let p = stale.as_ptr() as u64;
        let d = plus(now(MONO), Duration::from_secs(10));
        let m = MONO as u64;
        for (what, r, want) in [
            (
                "nr 128 (entries stale)",
                futex_waitv_raw(p, 128, 0, 0, 0),
                EAGAIN,
            ),
            (
                "nr (1<<32)|1 (an unsigned int)",
                futex_waitv_raw(p, (1 << 32) | 1, 0, 0, 0),
                EAGAIN,
            ),
            ("nr 0", futex_waitv_raw(p, 0, 0, 0, 0), EINVAL),
            ("nr 129", futex_waitv_raw(p, 129, 0, 0, 0), EINVAL),
            ("flags 1", futex_waitv_raw(p, 1, 1, 0, 0), EINVAL),
            (
                "flags PRIVATE (belongs in the entries)",
                futex_waitv_raw(p, 1, FUTEX2_PRIVATE as u64, 0, 0),
                EINVAL,
            ),
            ("NULL array", futex_waitv_raw(0, 1, 0, 0, 0), EINVAL),
            (
                "nr 0, timeout pointer 8 (nr first)",
                futex_waitv_raw(p, 0, 0, 8, m),
                EINVAL,
            ),
            (
                "timeout on CLOCK_TAI",
                futex_waitv_raw(p, 1, 0, ts(&d), libc::CLOCK_TAI as u64),
                EINVAL,
            ),
            (
                "timeout on CLOCK_BOOTTIME",
                futex_waitv_raw(p, 1, 0, ts(&d), libc::CLOCK_BOOTTIME as u64),
                EINVAL,
            ),
            (
                "no timeout, clockid CLOCK_TAI (not looked at)",
                futex_waitv_raw(p, 1, 0, 0, libc::CLOCK_TAI as u64),
                EAGAIN,
            ),
            ("timeout pointer 8", futex_waitv_raw(p, 1, 0, 8, m), EFAULT),
        ] {
            ensure_res(&format!("futex_waitv {what}"), r, want)?;
        }
        let bad_ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000_000,
        };
        ensure_res(
            "futex_waitv timeout {0, 1e9}",
            futex_waitv_raw(p, 1, 0, ts(&bad_ts), m),
            EINVAL,
        )?;
        let none = Page::new(libc::PROT_NONE, false)?;
        ensure_res(
            "futex_waitv of an unreadable array",
            futex_waitv_raw(none.at(0), 1, 0, 0, 0),
            EFAULT,
        )?;
        let mut six: Vec<FutexWaitv> = (0..6).map(|_| entry(w, 1, U32P)).collect();
        six[5].reserved = 1;
        ensure_res(
            "futex_waitv, entry 5 of 6 __reserved 1",
            sys::futex_waitv(&six, 0, None, 0),
            EINVAL,
        )?;
        ensure_res(
            "futex_waitv, entry 5 __reserved 1, timeout pointer 8 (the timeout first)",
            futex_waitv_raw(six.as_ptr() as u64, 6, 0, 8, m),
            EFAULT,
        )?;
        six[0].uaddr = 0;
        ensure_res(
            "futex_waitv, entry 0 NULL, entry 5 __reserved 1 (all entries parsed before any key)",
            sys::futex_waitv(&six, 0, None, 0),
            EINVAL,
        )?;
        for (name, f) in ops::FUTEX2_BAD_FLAGS {
            ensure_res(
                &format!("futex_waitv, entry flags {name}"),
                sys::futex_waitv(&[entry(w, 0, *f as u32)], 0, None, 0),
                EINVAL,
            )?;
        }
        ensure_res(
            "futex_waitv, entry val 1<<32",
            sys::futex_waitv(&[entry(w, 1 << 32, U32P)], 0, None, 0),
            EINVAL,
        )
    })())
}

fn waitv_eagain_order(_: &Ctx) -> Outcome {
    done((|| {
        let (w0, w1) = (word(0), word(1));
        let null = FutexWaitv {
            val: 0,
            uaddr: 0,
            flags: U32P,
            reserved: 0,
        };
        let mut unaligned = entry(w0, 0, U32P);
        unaligned.uaddr += 2;
        let mut kernel = entry(w0, 0, U32P);
        kernel.uaddr = KERNEL_ADDR;
        let stale = entry(w1, 0, U32P);
        for (what, v, want) in [
            ("[current, stale]", vec![entry(w0, 0, U32P), stale], EAGAIN),
            ("[stale, NULL]", vec![stale, null], EAGAIN),
            ("[NULL, stale]", vec![null, stale], EFAULT),
            (
                "[stale, unaligned] (every key before any value)",
                vec![stale, unaligned],
                EINVAL,
            ),
            ("[stale, kernel address]", vec![stale, kernel], EFAULT),
        ] {
            ensure_res(
                &format!("futex_waitv {what}"),
                sys::futex_waitv(&v, 0, None, 0),
                want,
            )?;
            // Entries queued before the stale one were taken off again.
            ensure_res(
                &format!("FUTEX_WAKE after futex_waitv {what}"),
                wake_private(w0, ALL),
                Ok(0),
            )?;
        }
        Ok(())
    })())
}

/// A waiter in futex_waitv on `words` (each for 0, private).
fn waitv_waiter(ws: &mut Waiters, words: Vec<&'static AtomicU32>) -> Result<usize, Outcome> {
    ws.add(SC_WAITV, move || {
        let v: Vec<FutexWaitv> = words.iter().map(|w| entry(w, 0, U32P)).collect();
        sys::futex_waitv(&v, 0, None, 0)
    })
}

fn waitv_index(k: usize) -> Res {
    Ok(k as i64 + mutated("waitv-index-one-based") as i64)
}

fn waitv_returns_woken_index(_: &Ctx) -> Outcome {
    done((|| {
        let mut ws = Waiters::new();
        let many: Vec<&'static AtomicU32> = (0..128).map(|_| word(0)).collect();
        for (n, k) in [(3, 2), (3, 0), (128, 127)] {
            let words = many[..n].to_vec();
            let id = waitv_waiter(&mut ws, words.clone())?;
            let what = format!("FUTEX_WAKE of entry {k} of {n}");
            ensure_res(&what, wake_private(words[k], 1), Ok(1))?;
            ws.woke_with(&what, &[(id, waitv_index(k))])?;
            for (i, w) in words.iter().enumerate() {
                ensure_res(
                    &format!("FUTEX_WAKE of entry {i} afterwards"),
                    wake_private(w, ALL),
                    Ok(0),
                )?;
            }
        }
        ws.join()
    })())
}

fn waitv_same_word_twice(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let mut ws = Waiters::new();
        let a = waitv_waiter(&mut ws, vec![w, w])?;
        ensure_res("FUTEX_WAKE nr 1 of [w, w]", wake_private(w, 1), Ok(1))?;
        ws.woke_with("FUTEX_WAKE nr 1 of [w, w]", &[(a, waitv_index(0))])?;
        let b = waitv_waiter(&mut ws, vec![w, w])?;
        // futex_unqueue_multiple() returns the last woken index (the
        // syscall's comment allows any).
        ensure_res(
            "FUTEX_WAKE nr INT_MAX of [w, w]: both entries",
            wake_private(w, ALL),
            Ok(2),
        )?;
        ws.woke_with("FUTEX_WAKE nr INT_MAX of [w, w]", &[(b, waitv_index(1))])?;
        ws.join()
    })())
}

fn waitv_entry_flags_select_key(_: &Ctx) -> Outcome {
    done((|| {
        let (w0, w1) = (word(0), word(0));
        let mut ws = Waiters::new();
        let id = ws.add(SC_WAITV, move || {
            let v = [entry(w0, 0, U32P), entry(w1, 0, FUTEX2_SIZE_U32)];
            sys::futex_waitv(&v, 0, None, 0)
        })?;
        for (what, r) in [
            (
                "shared FUTEX_WAKE of the private entry",
                futex(addr(w0), WAKE, ALL, 0, 0, 0),
            ),
            (
                "FUTEX_WAKE_PRIVATE of the shared entry",
                wake_private(w1, ALL),
            ),
        ] {
            ensure_res(what, r, Ok(0))?;
            ws.woke(what, &[])?;
        }
        let what = "shared FUTEX_WAKE of the shared entry";
        ensure_res(what, futex(addr(w1), WAKE, ALL, 0, 0, 0), Ok(1))?;
        ws.woke_with(what, &[(id, waitv_index(1))])?;
        ws.join()
    })())
}

fn waitv_timeout_clocks(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let v = [entry(w, 0, U32P)];
        for (name, clock) in [("CLOCK_MONOTONIC", MONO), ("CLOCK_REALTIME", REAL)] {
            ensure_waited(
                &format!("futex_waitv until {name} now + 60 ms"),
                timed(|| sys::futex_waitv(&v, 0, Some(&plus(now(clock), TIMEOUT)), clock)),
                TIMEOUT,
            )?;
        }
        let ten = Duration::from_secs(10);
        ensure_expired(
            "futex_waitv on CLOCK_REALTIME until CLOCK_MONOTONIC now + 10 s",
            timed(|| sys::futex_waitv(&v, 0, Some(&plus(now(MONO), ten)), REAL)),
            ten,
        )?;
        ensure_expired(
            "futex_waitv until CLOCK_MONOTONIC now (absolute, not relative)",
            timed(|| sys::futex_waitv(&v, 0, Some(&now(MONO)), MONO)),
            uptime(),
        )
    })())
}

const ABOUT: &str =
    "FUTEX_REQUEUE, FUTEX_CMP_REQUEUE, futex2's futex_requeue and futex_waitv, exactly (docs/futex-abi.md section 8).";

fn main() {
    run(
        ABOUT,
        &[
            Case::new("cmp-requeue-counts", cmp_requeue_counts),
            Case::new("requeue-nr-boundaries", requeue_nr_boundaries),
            Case::new("requeue-keeps-bitset", requeue_keeps_bitset),
            Case::new("cmp-requeue-eagain", cmp_requeue_eagain),
            Case::new("requeue-ignores-val3", requeue_ignores_val3),
            Case::new("requeue-negative-einval", requeue_negative),
            Case::new("requeue-same-address", requeue_same_address),
            Case::new("futex2-requeue-counts", futex2_requeue_counts),
            Case::new("futex2-requeue-validation", futex2_requeue_validation),
            Case::new("waitv-validation", waitv_validation),
            Case::new("waitv-eagain-order", waitv_eagain_order),
            Case::new("waitv-returns-woken-index", waitv_returns_woken_index),
            Case::new("waitv-same-word-twice", waitv_same_word_twice),
            Case::new("waitv-entry-flags-select-key", waitv_entry_flags_select_key),
            Case::new("waitv-timeout-clocks", waitv_timeout_clocks),
        ],
    )
}
