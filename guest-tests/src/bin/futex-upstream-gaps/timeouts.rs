//! `futex-upstream-gaps`' absolute timeouts: each wait must return
//! ETIMEDOUT no earlier than its deadline on the clock its flags select
//! and at most `clock::LATE` after it (`clock::ensure_deadline`), on both
//! clocks. The two clocks are decades apart, so a deadline read on the
//! other one (the `wrong-clock` model of `ops::MUTATIONS`) ends at once or
//! never; each case starts with the clock whose wrong reading it should
//! show first (`tests/host_kernel.rs` runs them under the model).

use super::{futex, p, word, FUTEX_PRIVATE_FLAG, FUTEX_TID_MASK, U32_PRIV};
use guest_tests::cases::Ctx;
use guest_tests::clock::{clock_name, clocks_too_close, ensure_deadline, futex_clock, read_on, ts};
use guest_tests::hash::{self, done, ensure, skip, Check};
use guest_tests::ktap::Outcome;
use guest_tests::ops::{self, op};
use guest_tests::sys::{self, FutexWaitv};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How far ahead each deadline lies: long enough that a wait which ends at
/// once under the wrong clock is visibly early.
const AFTER: Duration = Duration::from_millis(100);

/// Skips when the clocks are too close for a wrong reading to show.
fn clocks_apart() -> Check {
    clocks_too_close().map_or(Ok(()), |why| Err(skip(why)))
}

/// `op` as the flags read in messages.
fn op_name(o: u32) -> String {
    let cmd = match o & 0x7f {
        op::WAIT_BITSET => "FUTEX_WAIT_BITSET",
        op::WAIT_REQUEUE_PI => "FUTEX_WAIT_REQUEUE_PI",
        op::LOCK_PI => "FUTEX_LOCK_PI",
        op::LOCK_PI2 => "FUTEX_LOCK_PI2",
        _ => "futex op",
    };
    if o & op::CLOCK_REALTIME != 0 {
        format!("{cmd}|FUTEX_CLOCK_REALTIME")
    } else {
        cmd.to_string()
    }
}

/// FUTEX_WAIT_BITSET until now + 100 ms: CLOCK_MONOTONIC, then
/// CLOCK_REALTIME with FUTEX_CLOCK_REALTIME.
pub fn wait_bitset_timeout_absolute(_: &Ctx) -> Outcome {
    done((|| {
        clocks_apart()?;
        let w = word(0);
        for flag in [0, op::CLOCK_REALTIME] {
            let o = op::WAIT_BITSET | op::PRIVATE | flag;
            ensure_deadline(&op_name(o), futex_clock(o), AFTER, move |d| {
                futex(p(w), o, 0, ts(&d), std::ptr::null(), u32::MAX)
            })?;
        }
        Ok(())
    })())
}

/// futex_waitv until now + 100 ms on CLOCK_REALTIME, then on
/// CLOCK_MONOTONIC.
pub fn waitv_timeout(_: &Ctx) -> Outcome {
    done((|| {
        clocks_apart()?;
        let w = word(0);
        for clockid in [libc::CLOCK_REALTIME, libc::CLOCK_MONOTONIC] {
            ensure_deadline(
                &format!("futex_waitv with clockid {}", clock_name(clockid)),
                read_on(clockid),
                AFTER,
                move |d| {
                    let e = FutexWaitv {
                        val: 0,
                        uaddr: p(w) as u64,
                        flags: U32_PRIV,
                        reserved: 0,
                    };
                    sys::futex_waitv(&[e], 0, Some(&d), clockid)
                },
            )?;
        }
        Ok(())
    })())
}

/// A lock this thread holds, taken by another with a deadline: FUTEX_LOCK_PI
/// (always CLOCK_REALTIME), LOCK_PI2 with FUTEX_CLOCK_REALTIME, LOCK_PI2
/// (CLOCK_MONOTONIC). The timed-out waiters leave FUTEX_WAITERS set; the
/// owner's UNLOCK_PI then stores 0.
pub fn lock_pi_timeout(_: &Ctx) -> Outcome {
    done((|| {
        clocks_apart()?;
        let m = word(0);
        let me = hash::gettid() as u32;
        hash::ensure_res(
            "FUTEX_LOCK_PI of a free word",
            futex(
                p(m),
                super::FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG,
                0,
                0,
                std::ptr::null(),
                0,
            ),
            Ok(0),
        )?;
        for o in [
            op::LOCK_PI | op::PRIVATE,
            op::LOCK_PI2 | op::PRIVATE | op::CLOCK_REALTIME,
            op::LOCK_PI2 | op::PRIVATE,
        ] {
            ensure_deadline(
                &format!("{} of a held lock", op_name(o)),
                futex_clock(o),
                AFTER,
                move |d| futex(p(m), o, 0, ts(&d), std::ptr::null(), 0),
            )?;
        }
        ops::ensure_word("after the timed-out waiters", m, me | sys::WAITERS)?;
        hash::ensure_res(
            "FUTEX_UNLOCK_PI",
            futex(
                p(m),
                super::FUTEX_UNLOCK_PI | FUTEX_PRIVATE_FLAG,
                0,
                0,
                std::ptr::null(),
                0,
            ),
            Ok(0),
        )?;
        ops::ensure_word("after FUTEX_UNLOCK_PI", m, 0)
    })())
}

/// FUTEX_WAIT_REQUEUE_PI with nobody requeueing, with FUTEX_CLOCK_REALTIME
/// and then CLOCK_MONOTONIC: ETIMEDOUT (`handle_early_requeue_pi_wakeup()`),
/// neither word touched.
pub fn requeue_pi_timeout(_: &Ctx) -> Outcome {
    done((|| {
        clocks_apart()?;
        let (f1, f2) = (word(0), word(0));
        for flag in [op::CLOCK_REALTIME, 0] {
            let o = op::WAIT_REQUEUE_PI | op::PRIVATE | flag;
            ensure_deadline(
                &format!("{} with nobody requeueing", op_name(o)),
                futex_clock(o),
                AFTER,
                move |d| futex(p(f1), o, 0, ts(&d), p(f2), 0),
            )?;
        }
        let words = (f1.load(Ordering::SeqCst), f2.load(Ordering::SeqCst));
        ensure(words == (0, 0), || {
            format!(
                "the words after the timed-out waits are {:#x}, {:#x} (owner {}), expected 0, 0",
                words.0,
                words.1,
                words.1 & FUTEX_TID_MASK
            )
        })
    })())
}
