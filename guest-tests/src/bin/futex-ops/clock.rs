//! `futex-ops`' FUTEX_CLOCK_REALTIME cases: which commands take the flag,
//! which refuse it with ENOSYS, and every classic command's result with and
//! without it (`clock-realtime-every-op`, its `pinned_by` table).

use super::{MONO, P, REAL};
use guest_tests::cases::{diag, Ctx};
use guest_tests::clock::{clocks_too_close, ensure_deadline, futex_clock};
use guest_tests::hash::{self, done, ensure, ensure_res, EINVAL};
use guest_tests::ktap::Outcome;
use guest_tests::ops::{
    self, addr, ensure_expired, ensure_waited, now, op::*, plus, span, timed, ts, word, ANY,
    EAGAIN, ENOSYS, KERNEL_ADDR, TIMEOUT,
};
use guest_tests::sys::{encode_op, futex};
use std::sync::atomic::Ordering;
use std::time::Duration;

pub(crate) fn wait_bitset_clock_realtime(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let o = WAIT_BITSET | P | CLOCK_REALTIME;
        ensure_waited(
            "FUTEX_WAIT_BITSET|CLOCK_REALTIME until CLOCK_REALTIME now + 60 ms",
            timed(|| {
                let d = plus(now(REAL), TIMEOUT);
                futex(addr(w), o, 0, ts(&d), 0, ANY)
            }),
            TIMEOUT,
        )?;
        let ten = Duration::from_secs(10);
        ensure_expired(
            "FUTEX_WAIT_BITSET|CLOCK_REALTIME until CLOCK_MONOTONIC now + 10 s (1970 on CLOCK_REALTIME)",
            timed(|| {
                let d = plus(now(MONO), ten);
                futex(addr(w), o, 0, ts(&d), 0, ANY)
            }),
            ten,
        )
    })())
}

pub(crate) fn clock_realtime_enosys(_: &Ctx) -> Outcome {
    done((|| {
        let (w, w2) = (word(0), word(0));
        let set7 = encode_op(OP_SET, 7, CMP_EQ, 0);
        for (name, o, val, val2, uaddr2, val3) in [
            ("FUTEX_WAIT", WAIT, 0, 0, 0, 0),
            ("FUTEX_WAKE", WAKE, 1, 0, 0, 0),
            ("FUTEX_REQUEUE", REQUEUE, 1, 1, addr(w2), 0),
            ("FUTEX_CMP_REQUEUE", CMP_REQUEUE, 1, 1, addr(w2), 0),
            ("FUTEX_WAKE_OP", WAKE_OP, 1, 1, addr(w2), set7),
            ("FUTEX_LOCK_PI", LOCK_PI, 0, 0, 0, 0),
            ("FUTEX_UNLOCK_PI", UNLOCK_PI, 0, 0, 0, 0),
            ("FUTEX_TRYLOCK_PI", TRYLOCK_PI, 0, 0, 0, 0),
            ("FUTEX_WAKE_BITSET", WAKE_BITSET, 1, 0, 0, ANY),
            ("FUTEX_CMP_REQUEUE_PI", CMP_REQUEUE_PI, 1, 1, addr(w2), 0),
        ] {
            for (kind, p) in [("private", P), ("shared", 0)] {
                ensure_res(
                    &format!("{name}|CLOCK_REALTIME ({kind})"),
                    futex(addr(w), o | p | CLOCK_REALTIME, val, val2, uaddr2, val3),
                    ENOSYS,
                )?;
            }
        }
        ensure(
            w.load(Ordering::SeqCst) == 0 && w2.load(Ordering::SeqCst) == 0,
            || "an ENOSYS call changed a word (LOCK_PI locked or WAKE_OP wrote)".into(),
        )?;
        for (what, a) in [("an unaligned", addr(w) + 1), ("a kernel", KERNEL_ADDR)] {
            ensure_res(
                &format!("FUTEX_WAKE|CLOCK_REALTIME on {what} address (the op is checked first)"),
                futex(a, WAKE | P | CLOCK_REALTIME, 1, 0, 0, 0),
                ENOSYS,
            )?;
        }
        ensure_res(
            "FUTEX_WAIT_BITSET|CLOCK_REALTIME, value changed",
            futex(addr(w), WAIT_BITSET | P | CLOCK_REALTIME, 1, 0, 0, ANY),
            EAGAIN,
        )?;
        ensure_res(
            "FUTEX_WAIT_REQUEUE_PI|CLOCK_REALTIME, value changed",
            futex(
                addr(w),
                WAIT_REQUEUE_PI | P | CLOCK_REALTIME,
                1,
                0,
                addr(w2),
                0,
            ),
            EAGAIN,
        )?;
        ensure_res(
            "FUTEX_LOCK_PI2|CLOCK_REALTIME on a free word",
            futex(addr(w), LOCK_PI2 | P | CLOCK_REALTIME, 0, 0, 0, 0),
            Ok(0),
        )?;
        let me = hash::gettid() as u32;
        ensure(w.load(Ordering::SeqCst) == me, || {
            format!(
                "after LOCK_PI2 the word is {:#x}, not the TID {me:#x}",
                w.load(Ordering::SeqCst)
            )
        })?;
        ensure_res(
            "FUTEX_UNLOCK_PI",
            futex(addr(w), UNLOCK_PI | P, 0, 0, 0, 0),
            Ok(0),
        )
    })())
}

/// The thirteen classic commands `clock-realtime-every-op` walks.
const CLASSIC: [(&str, u32); 13] = [
    ("FUTEX_WAIT", WAIT),
    ("FUTEX_WAKE", WAKE),
    ("FUTEX_REQUEUE", REQUEUE),
    ("FUTEX_CMP_REQUEUE", CMP_REQUEUE),
    ("FUTEX_WAKE_OP", WAKE_OP),
    ("FUTEX_LOCK_PI", LOCK_PI),
    ("FUTEX_UNLOCK_PI", UNLOCK_PI),
    ("FUTEX_TRYLOCK_PI", TRYLOCK_PI),
    ("FUTEX_WAIT_BITSET", WAIT_BITSET),
    ("FUTEX_WAKE_BITSET", WAKE_BITSET),
    ("FUTEX_WAIT_REQUEUE_PI", WAIT_REQUEUE_PI),
    ("FUTEX_CMP_REQUEUE_PI", CMP_REQUEUE_PI),
    ("FUTEX_LOCK_PI2", LOCK_PI2),
];

/// `futex_cmd_has_timeout()` (7.3): the commands whose arg4 is a timespec.
fn has_timeout(cmd: u32) -> bool {
    matches!(
        cmd,
        WAIT | LOCK_PI | LOCK_PI2 | WAIT_BITSET | WAIT_REQUEUE_PI
    )
}

/// `do_futex()` (7.3): the commands that take FUTEX_CLOCK_REALTIME.
fn takes_realtime(cmd: u32) -> bool {
    matches!(cmd, WAIT_BITSET | WAIT_REQUEUE_PI | LOCK_PI2)
}

/// The case that already pins a combination (command, private, with
/// FUTEX_CLOCK_REALTIME, with a timeout) exactly, if one does;
/// `clock-realtime-every-op` checks the others (docs/futex-abi.md section 8).
fn pinned_by(cmd: u32, private: bool, rt: bool, timeout: bool) -> Option<&'static str> {
    match (cmd, private, rt, timeout) {
        (_, _, true, false) if !takes_realtime(cmd) => Some("futex-ops/clock-realtime-enosys"),
        (_, true, true, false) => Some("futex-ops/clock-realtime-enosys"),
        (WAIT | WAIT_BITSET, _, false, false) => Some("futex-ops/wait-eagain"),
        (WAIT, _, false, true) => Some("futex-ops/wait-timeout-relative"),
        (WAIT_BITSET, true, false, true) => Some("futex-ops/wait-bitset-timeout-absolute"),
        (WAIT_BITSET, true, true, true) => Some("futex-ops/wait-bitset-clock-realtime"),
        (LOCK_PI, true, false, true) | (LOCK_PI2, true, _, true) => {
            Some("futex-pi/lock-pi-timeout-clocks")
        }
        (WAIT_REQUEUE_PI, true, _, true) => Some("futex-upstream-gaps/requeue-pi-timeout"),
        _ => None,
    }
}

/// A timespec {0, 60 ms} at a fixed address: as val2 (nr_requeue,
/// nr_wake2) the pointer's low 32 bits are what the kernel reads.
fn timespec_at(at: u64) -> Result<u64, Outcome> {
    let len = 4096;
    // SAFETY: a fresh anonymous mapping that replaces nothing; it stays
    // mapped until the case's process ends.
    let p = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p as u64 != at {
        return Err(hash::fail(format!(
            "mmap at {at:#x} (MAP_FIXED_NOREPLACE) returned {p:?}: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: p is a fresh writable page, aligned for a timespec.
    unsafe { *(p as *mut libc::timespec) = span(TIMEOUT) };
    Ok(at)
}

/// arg4 pointers whose low 32 bits are a positive and a negative int.
const TS_LOW: u64 = 0x1_4000_0000;
const TS_HIGH: u64 = 0x1_c000_0000;

/// One combination of `clock-realtime-every-op`: the exact result, and the
/// words it must (not) change.
fn every_op_one(name: &str, cmd: u32, p: u32, rt: u32, with_timeout: bool) -> hash::Check {
    let kind = if p == P { "private" } else { "shared" };
    let o = cmd | p | rt;
    let flag = if rt != 0 { "|FUTEX_CLOCK_REALTIME" } else { "" };
    let arg = if with_timeout { "a timeout" } else { "NULL" };
    let what = format!("{name}{flag} ({kind}), arg4 {arg}");
    let (w, w2) = (word(0), word(0));
    let me = hash::gettid() as u32;
    let rel = span(TIMEOUT);
    // A timeout command reads a timespec; the others take arg4 as val2.
    let arg4 = match (with_timeout, has_timeout(cmd)) {
        (false, _) => 0,
        (true, true) => ts(&rel),
        (true, false) => TS_LOW,
    };
    let set7 = encode_op(OP_SET, 7, CMP_EQ, 0);
    if rt != 0 && !takes_realtime(cmd) {
        // do_futex() refuses the flag after the syscall read and checked
        // the timespec, before anything looks at the words.
        w.store(1, Ordering::SeqCst);
        ensure_res(&what, futex(addr(w), o, 0, arg4, addr(w2), set7), ENOSYS)?;
        return ensure(
            w.load(Ordering::SeqCst) == 1 && w2.load(Ordering::SeqCst) == 0,
            || format!("{what}: ENOSYS, yet a word changed"),
        );
    }
    match cmd {
        WAIT | WAIT_BITSET | WAIT_REQUEUE_PI if !with_timeout => {
            // Accepted without sleeping: the word differs from val.
            w.store(1, Ordering::SeqCst);
            ensure_res(&what, futex(addr(w), o, 0, 0, addr(w2), ANY), EAGAIN)
        }
        WAIT => ensure_waited(
            &format!("{what} {{0, 60 ms}} (relative)"),
            timed(|| futex(addr(w), o, 0, arg4, 0, 0)),
            TIMEOUT,
        ),
        WAIT_BITSET | WAIT_REQUEUE_PI | LOCK_PI | LOCK_PI2 if with_timeout => {
            let lock = matches!(cmd, LOCK_PI | LOCK_PI2);
            if lock {
                // Held by this thread: ensure_deadline's worker blocks.
                w.store(me, Ordering::SeqCst);
            }
            ensure_deadline(&what, futex_clock(o), TIMEOUT, move |d| {
                futex(addr(w), o, 0, ts(&d), addr(w2), ANY)
            })?;
            if lock {
                ops::ensure_word(&what, w, me | ops::WAITERS)?;
                ensure_res(
                    "FUTEX_UNLOCK_PI",
                    futex(addr(w), UNLOCK_PI | p, 0, 0, 0, 0),
                    Ok(0),
                )?;
            }
            ops::ensure_word(&what, w, 0)
        }
        LOCK_PI | LOCK_PI2 | TRYLOCK_PI => {
            ensure_res(&what, futex(addr(w), o, 0, arg4, 0, 0), Ok(0))?;
            ops::ensure_word(&what, w, me)?;
            ensure_res(
                "FUTEX_UNLOCK_PI",
                futex(addr(w), UNLOCK_PI | p, 0, 0, 0, 0),
                Ok(0),
            )
        }
        UNLOCK_PI => {
            w.store(me, Ordering::SeqCst);
            ensure_res(&what, futex(addr(w), o, 0, arg4, 0, 0), Ok(0))?;
            ops::ensure_word(&what, w, 0)
        }
        WAKE | WAKE_BITSET => ensure_res(&what, futex(addr(w), o, 1, arg4, 0, ANY), Ok(0)),
        WAKE_OP => {
            ensure_res(&what, futex(addr(w), o, 1, arg4, addr(w2), set7), Ok(0))?;
            ops::ensure_word(&format!("{what}: the second word"), w2, 7)
        }
        _ => {
            // REQUEUE, CMP_REQUEUE, CMP_REQUEUE_PI: arg4 is nr_requeue, an
            // int; futex_requeue() refuses a negative one.
            ensure_res(&what, futex(addr(w), o, 1, arg4, addr(w2), 0), Ok(0))?;
            if !with_timeout {
                return Ok(());
            }
            ensure_res(
                &format!("{name} ({kind}), arg4 {TS_HIGH:#x} (nr_requeue < 0)"),
                futex(addr(w), o, 1, TS_HIGH, addr(w2), 0),
                EINVAL,
            )
        }
    }
}

pub(crate) fn clock_realtime_every_op(_: &Ctx) -> Outcome {
    done((|| {
        if let Some(why) = clocks_too_close() {
            return Err(hash::skip(why));
        }
        timespec_at(TS_LOW)?;
        timespec_at(TS_HIGH)?;
        let mut pinned = Vec::new();
        for (name, cmd) in CLASSIC {
            for p in [P, 0] {
                for rt in [0, CLOCK_REALTIME] {
                    for timeout in [false, true] {
                        if let Some(case) = pinned_by(cmd, p == P, rt != 0, timeout) {
                            pinned.push(case);
                            continue;
                        }
                        every_op_one(name, cmd, p, rt, timeout)?;
                    }
                }
            }
        }
        diag(&format!(
            "{} of {} combinations checked here, the rest pinned by their cases",
            CLASSIC.len() * 8 - pinned.len(),
            CLASSIC.len() * 8
        ));
        Ok(())
    })())
}
