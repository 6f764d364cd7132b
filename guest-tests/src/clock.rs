//! Clocks and deadlines of the timed futex waits: timespec arithmetic,
//! the clock the kernel reads an absolute timeout on (and its
//! `wrong-clock` model, `ops::MUTATIONS`), and the window a timed wait
//! must end in: ETIMEDOUT no earlier than its deadline on that clock and
//! no later than [`LATE`] after it.
//!
//! The two clocks are far apart on purpose: CLOCK_MONOTONIC counts from
//! boot, CLOCK_REALTIME from 1970. An absolute CLOCK_MONOTONIC deadline
//! read as CLOCK_REALTIME lies in 1970 and expires at once (before its
//! deadline on the right clock); a CLOCK_REALTIME one read as
//! CLOCK_MONOTONIC lies decades ahead and never expires (still blocked
//! [`LATE`] after its deadline).

use crate::hash::{self, ensure, fail, Check, Res, Worker};
use crate::ops::{self, err};
use std::time::{Duration, Instant};

/// The current time of `clock`.
pub fn now(clock: libc::clockid_t) -> libc::timespec {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a live timespec.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t
}

/// `t + d`.
pub fn plus(t: libc::timespec, d: Duration) -> libc::timespec {
    let ns = t.tv_nsec as u64 + d.subsec_nanos() as u64;
    libc::timespec {
        tv_sec: t.tv_sec + d.as_secs() as i64 + (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    }
}

/// `d` as a (relative) timespec.
pub fn span(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: d.subsec_nanos() as i64,
    }
}

/// A timespec's address as a syscall argument.
pub fn ts(t: &libc::timespec) -> u64 {
    t as *const libc::timespec as u64
}

/// Runs `f` and returns its result with the time it took.
pub fn timed(f: impl FnOnce() -> Res) -> (Res, Duration) {
    let start = Instant::now();
    let r = f();
    (r, start.elapsed())
}

/// CLOCK_MONOTONIC now as a span: what a relative reading of an absolute
/// "now" would wait.
pub fn uptime() -> Duration {
    let t = now(libc::CLOCK_MONOTONIC);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The timeout of the ETIMEDOUT cases: long enough to tell "waited" from
/// "returned at once" under TCG, short enough to keep the suite fast.
pub const TIMEOUT: Duration = Duration::from_millis(60);

/// Checks that a timed wait ended in ETIMEDOUT after at least `at_least`.
pub fn ensure_waited(what: &str, (r, took): (Res, Duration), at_least: Duration) -> Check {
    hash::ensure_res(what, r, err(libc::ETIMEDOUT))?;
    ensure(took >= at_least, || {
        format!("{what}: ETIMEDOUT after {took:?}, before the {at_least:?} deadline")
    })
}

/// Checks that a timed wait ended in ETIMEDOUT at once: its deadline had
/// passed, where a wrong clock or a relative reading would wait `would`.
pub fn ensure_expired(what: &str, (r, took): (Res, Duration), would: Duration) -> Check {
    hash::ensure_res(what, r, err(libc::ETIMEDOUT))?;
    ensure(took < would / 2, || {
        format!("{what}: waited {took:?}; an expired deadline returns at once (a wrong reading waits {would:?})")
    })
}

// ---------------------------------------------------------------- deadlines

/// How long after its deadline a timed wait may end and still count as
/// on time (scaled by `HARNESS_TIMEOUT_SCALE`): the hrtimer fires at the
/// deadline, but on a loaded TCG host the woken thread's vCPU may not run
/// for seconds. A deadline read on the wrong clock is early (at once) or
/// decades late, so a generous bound loses nothing.
pub const LATE: Duration = Duration::from_secs(5);

/// The name of a clock id in messages.
pub fn clock_name(clock: libc::clockid_t) -> &'static str {
    match clock {
        libc::CLOCK_MONOTONIC => "CLOCK_MONOTONIC",
        libc::CLOCK_REALTIME => "CLOCK_REALTIME",
        _ => "another clock",
    }
}

fn other(clock: libc::clockid_t) -> libc::clockid_t {
    if clock == libc::CLOCK_REALTIME {
        libc::CLOCK_MONOTONIC
    } else {
        libc::CLOCK_REALTIME
    }
}

/// The clock the kernel reads an absolute timeout of `clockid` on
/// (`futex_waitv`, futex2's `futex_wait`): that clock, or the other one
/// under the `wrong-clock` model.
pub fn read_on(clockid: libc::clockid_t) -> libc::clockid_t {
    if ops::mutated("wrong-clock") {
        other(clockid)
    } else {
        clockid
    }
}

/// The clock the kernel reads the absolute timeout of futex(2) `op` on
/// (`futex_init_timeout()` and `do_futex()`, 7.3): CLOCK_REALTIME for
/// `FUTEX_LOCK_PI` (always) and for WAIT_BITSET, WAIT_REQUEUE_PI and
/// LOCK_PI2 with `FUTEX_CLOCK_REALTIME`, else CLOCK_MONOTONIC; under
/// `wrong-clock`, the other one. FUTEX_WAIT's relative timeout has no
/// deadline to read.
pub fn futex_clock(op: u32) -> libc::clockid_t {
    let cmd = op & 0x7f;
    let rt = cmd == ops::op::LOCK_PI || op & ops::op::CLOCK_REALTIME != 0;
    read_on(if rt {
        libc::CLOCK_REALTIME
    } else {
        libc::CLOCK_MONOTONIC
    })
}

fn signed_ns(t: libc::timespec) -> i128 {
    t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128
}

fn show_ns(ns: i128) -> String {
    format!("{:?}", Duration::from_nanos(ns.unsigned_abs() as u64))
}

/// The window rule: a wait that must time out at `deadline` and ended at
/// `ended` (both read on the clock the flags select) ended no earlier than
/// the deadline and at most `late` after it; the error says by how much
/// it missed.
pub fn deadline_window(
    deadline: libc::timespec,
    ended: libc::timespec,
    late: Duration,
) -> Result<(), String> {
    let off = signed_ns(ended) - signed_ns(deadline);
    if off < 0 {
        Err(format!("ETIMEDOUT {} before its deadline", show_ns(-off)))
    } else if off > late.as_nanos() as i128 {
        Err(format!(
            "ETIMEDOUT {} after its deadline (allowed: {late:?})",
            show_ns(off)
        ))
    } else {
        Ok(())
    }
}

/// Why a deadline read on the other clock would not show here: the two
/// clocks less than a day apart (a guest whose CLOCK_REALTIME starts near
/// 1970), or `None`.
pub fn clocks_too_close() -> Option<String> {
    let apart = signed_ns(now(libc::CLOCK_REALTIME)) - signed_ns(now(libc::CLOCK_MONOTONIC));
    (apart < 86_400 * 1_000_000_000).then(|| {
        format!(
            "CLOCK_REALTIME is only {} ahead of CLOCK_MONOTONIC: a deadline read on the \
             other clock would not be visibly early or late",
            show_ns(apart)
        )
    })
}

/// Runs `call(deadline)`, a wait that must time out at the absolute
/// `deadline` = now + `after` on `clock`, on a worker thread, and checks
/// that it returned ETIMEDOUT inside [`deadline_window`] (with [`LATE`],
/// scaled). A call still blocked [`LATE`] after its deadline fails and is
/// left blocked: the case's process ends with it.
pub fn ensure_deadline(
    what: &str,
    clock: libc::clockid_t,
    after: Duration,
    call: impl FnOnce(libc::timespec) -> Res + Send + 'static,
) -> Check {
    let late = crate::cases::scaled(LATE);
    let deadline = plus(now(clock), after);
    let w = Worker::spawn(move || {
        let r = call(deadline);
        (r, now(clock))
    })?;
    let name = clock_name(clock);
    let (r, ended) = w.join(after + late).map_err(|_| {
        fail(format!(
            "{what}: no ETIMEDOUT within {late:?} of its deadline (now + {after:?} on {name}): \
             still blocked, as if the deadline were read on {}",
            clock_name(other(clock))
        ))
    })?;
    hash::ensure_res(what, r, err(libc::ETIMEDOUT))?;
    deadline_window(deadline, ended, late)
        .map_err(|e| fail(format!("{what}: {e} (now + {after:?} on {name})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(sec: i64, nsec: i64) -> libc::timespec {
        libc::timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        }
    }

    #[test]
    fn timespec_arithmetic() {
        let t = plus(t(1, 900_000_000), Duration::from_millis(250));
        assert_eq!((t.tv_sec, t.tv_nsec), (2, 150_000_000));
        assert_eq!(span(Duration::from_millis(1500)).tv_nsec, 500_000_000);
    }

    #[test]
    fn the_window_is_the_deadline_to_late_after_it() {
        let late = Duration::from_secs(5);
        let d = t(100, 500_000_000);
        // On the deadline, and at its last allowed nanosecond.
        assert_eq!(deadline_window(d, d, late), Ok(()));
        assert_eq!(deadline_window(d, t(105, 500_000_000), late), Ok(()));
        // One nanosecond early; 1 ms late past the bound.
        assert_eq!(
            deadline_window(d, t(100, 499_999_999), late),
            Err("ETIMEDOUT 1ns before its deadline".into())
        );
        assert_eq!(
            deadline_window(d, t(105, 501_000_000), late),
            Err("ETIMEDOUT 5.001s after its deadline (allowed: 5s)".into())
        );
        // A CLOCK_MONOTONIC deadline (uptime 100 s) read as CLOCK_REALTIME
        // ends at once: read back on CLOCK_MONOTONIC, before its deadline.
        assert_eq!(
            deadline_window(d, t(100, 400_000_000), late),
            Err("ETIMEDOUT 100ms before its deadline".into())
        );
    }

    #[test]
    fn the_clock_of_each_timed_futex_op() {
        use ops::op::*;
        // Not under FUTEX_OPS_MUTATION: the test binary runs without it.
        for (o, want) in [
            (WAIT_BITSET, libc::CLOCK_MONOTONIC),
            (WAIT_BITSET | PRIVATE, libc::CLOCK_MONOTONIC),
            (WAIT_BITSET | CLOCK_REALTIME, libc::CLOCK_REALTIME),
            (WAIT_REQUEUE_PI | PRIVATE, libc::CLOCK_MONOTONIC),
            (
                WAIT_REQUEUE_PI | PRIVATE | CLOCK_REALTIME,
                libc::CLOCK_REALTIME,
            ),
            (LOCK_PI | PRIVATE, libc::CLOCK_REALTIME),
            (LOCK_PI2 | PRIVATE, libc::CLOCK_MONOTONIC),
            (LOCK_PI2 | CLOCK_REALTIME, libc::CLOCK_REALTIME),
        ] {
            assert_eq!(futex_clock(o), want, "op {o:#x}");
        }
        assert_eq!(read_on(libc::CLOCK_REALTIME), libc::CLOCK_REALTIME);
        assert_eq!(other(libc::CLOCK_REALTIME), libc::CLOCK_MONOTONIC);
        assert_eq!(other(libc::CLOCK_MONOTONIC), libc::CLOCK_REALTIME);
    }
}
