//! The immutable private hash of seed patch `000_b592d6f44c015dd6`
//! ("futex: Allow to make the private hash immutable"): `SET_SLOTS` with
//! arg4 = `FH_FLAG_IMMUTABLE` makes the hash final, `GET_IMMUTABLE` (sub-op 3)
//! reports 1 for an immutable or global hash, 0 otherwise.
//!
//! With `immutable` expected the patched semantics are asserted; without it
//! the exact absent behaviour: 6.16's stub (prctl known, private hash
//! stubbed: sub-op 3 -> 0, every SET -> EINVAL), 6.17+ (sub-op 3 and
//! arg4 != 0 -> EINVAL), no prctl 78 (EINVAL for everything).
//!
//! Cases (11):
//! - `get-immutable-fresh`: sub-op 3 with no table -> 0 (patch, 6.16) / EINVAL (6.17+).
//! - `set-immutable`: SET 32 immutable -> 0, GET 32, sub-op 3 -> 1.
//! - `immutable-blocks-set`: after it, SET 64, 32, 0, and SET 64 immutable -> EBUSY; GET 32.
//! - `mutable-private-is-0`: SET 32 (no flag) -> sub-op 3 -> 0; a later SET 64 works.
//! - `global-is-immutable`: SET 0 -> sub-op 3 -> 1.
//! - `auto-table-is-mutable`: the table a thread allocates -> sub-op 3 -> 0.
//! - `immutable-set-0`: SET 0 immutable -> 0, GET 0, sub-op 3 -> 1, SET 16 -> EBUSY.
//! - `immutable-stops-growth`: SET 2 immutable then 6+ threads: GET stays 2, sub-op 3 -> 1.
//! - `immutable-waiters-work`: on an immutable 16-slot hash 4 futex_wait waiters
//!   are all woken by one wake (count 4), each returning 0; a second wake -> 0.
//! - `immutable-vs-set-race`: rounds (`guest_tests::race`, `# rounds: N,
//!   overlapped: M`) of SET 32 immutable against SET 64: one of two right
//!   endings per round (`futex-immutable/races.rs`); FAIL on the port's third
//!   (the immutable SET returned 0, the table stayed mutable: its known
//!   race, after every round ran) and when no round
//!   overlapped; without the patch the absent behaviour once (EINVAL, then
//!   SET 64 and GET 64).
//! - `immutable-vs-thread-create`: (>= 5 online CPUs, else SKIP: the clones
//!   allocate nothing to race) rounds of SET 32 immutable against clones:
//!   SET 0, GET 32, GET_IMMUTABLE 1, SET 16 EBUSY, every clone succeeds;
//!   FAIL when no round overlapped. A clone's EBUSY is the port's known race:
//!   the rounds go on and it fails the case at the end, unless another
//!   failure came too (reported first).

#[path = "futex-immutable/races.rs"]
mod races;

use guest_tests::cases::{main as run, Case, Ctx};
use guest_tests::expect::Expect;
use guest_tests::hash::{
    self, done, ensure_get, ensure_res, want_get, want_get_immutable, want_set, Check, Parked,
    Worker, EBUSY,
};
use guest_tests::ktap::Outcome;
use guest_tests::race;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// SET with `FH_FLAG_IMMUTABLE`: Ok(supported) with the patch; without it
/// EINVAL (6.17+ rejects arg4 != 0, 6.16 and older reject every SET).
fn want_set_immutable(e: &Expect, supported: hash::Res) -> hash::Res {
    if e.immutable {
        supported
    } else {
        hash::EINVAL
    }
}

fn ensure_set_imm(e: &Expect, slots: u64, supported: hash::Res) -> Check {
    ensure_res(
        &format!("SET {slots} with FH_FLAG_IMMUTABLE"),
        hash::set_immutable(slots),
        want_set_immutable(e, supported),
    )
}

fn ensure_imm(e: &Expect, what: &str, patched: i64) -> Check {
    ensure_res(
        &format!("GET_IMMUTABLE {what}"),
        hash::get_immutable(),
        want_get_immutable(e, patched),
    )
}

/// GET after an immutable SET of `slots`: the size with the patch, else
/// what GET shows with no table (the SET failed).
fn want_get_after_imm(e: &Expect, slots: i64) -> hash::Res {
    if e.immutable {
        want_get(e, slots)
    } else {
        want_get(e, 0)
    }
}

fn fresh(ctx: &Ctx) -> Outcome {
    done(ensure_imm(&ctx.expect, "with no table", 0))
}

fn set_immutable(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set_imm(e, 32, Ok(0))?;
        ensure_res(
            "GET after immutable SET 32",
            hash::get(),
            want_get_after_imm(e, 32),
        )?;
        ensure_imm(e, "after immutable SET 32", 1)
    })())
}

fn blocks_set(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set_imm(e, 32, Ok(0))?;
        // Without the patch there is no immutable table: the plain SETs
        // behave as on a fresh process.
        let plain = if e.immutable {
            EBUSY
        } else {
            want_set(e, Ok(0))
        };
        for v in [64u64, 32, 0] {
            ensure_res(
                &format!("SET {v} after immutable SET 32"),
                hash::set(v),
                plain,
            )?;
            if !e.immutable {
                // Keep the state comparable: stop after the first plain SET.
                return ensure_get(e, &format!("after plain SET {v}"), 64);
            }
        }
        ensure_set_imm(e, 64, EBUSY)?;
        ensure_get(e, "after the refused SETs", 32)
    })())
}

fn mutable_private(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_res("SET 32", hash::set(32), want_set(e, Ok(0)))?;
        ensure_imm(e, "of a mutable 32-slot hash", 0)?;
        ensure_res("SET 64 after SET 32", hash::set(64), want_set(e, Ok(0)))?;
        ensure_get(e, "after SET 64", 64)
    })())
}

fn global(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_res("SET 0", hash::set(0), want_set(e, Ok(0)))?;
        ensure_imm(e, "of the global hash", 1)
    })())
}

fn auto_table(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        let parked = Parked::spawn(1, Duration::from_secs(20))?;
        let auto = if hash::growth_allocates(e.growth, true, false) {
            16
        } else {
            0
        };
        ensure_get(e, "with one extra thread", auto)?;
        ensure_imm(e, "of the automatic table", 0)?;
        parked.release()
    })())
}

fn immutable_set_0(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set_imm(e, 0, Ok(0))?;
        ensure_res(
            "GET after immutable SET 0",
            hash::get(),
            want_get_after_imm(e, 0),
        )?;
        ensure_imm(e, "after immutable SET 0", 1)?;
        if e.immutable {
            ensure_res("SET 16 after immutable SET 0", hash::set(16), EBUSY)?;
        }
        Ok(())
    })())
}

fn stops_growth(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set_imm(e, 2, Ok(0))?;
        let n = (hash::online_cpus() + 2).clamp(6, 32);
        let parked = Parked::spawn(n, Duration::from_secs(20))?;
        let grows = !e.immutable && hash::growth_allocates(e.growth, true, false);
        let want = if e.immutable {
            want_get(e, 2)
        } else if grows {
            // The SET failed: automatic sizing applies.
            want_get(
                e,
                hash::auto_size_for(n, hash::online_cpus(), hash::global_size()) as i64,
            )
        } else {
            want_get(e, 0)
        };
        // Growth is deferred over RCU grace periods (slow under TCG): when
        // it is expected, wait for it (every 10 ms, 5 s at most); otherwise
        // wait for as many grace periods as a (wrong) replacement would
        // need to land, where a private hash could (without one there is
        // no table to grow: GET answers at once).
        let r = if !e.private_hash {
            hash::get()
        } else if grows {
            hash::poll_get(500, 10, |r| *r == want)
        } else {
            race::settled_get(want, race::SETTLE)
        };
        parked.release()?;
        ensure_res(
            &format!("GET after immutable SET 2 and {n} threads"),
            r,
            want,
        )?;
        ensure_imm(e, "after the threads", if e.immutable { 1 } else { 0 })
    })())
}

fn waiters_work(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set_imm(e, 16, Ok(0))?;
        let word = Arc::new(AtomicU32::new(0));
        let mut ws = Vec::new();
        for _ in 0..4 {
            let w = word.clone();
            ws.push(Worker::spawn(move || {
                hash::wait_ms(&w, 0, hash::priv32(), 10_000)
            })?);
        }
        hash::wait_blocked(
            &hash::tids(&ws)?,
            guest_tests::sys::nr::FUTEX_WAIT,
            Duration::from_secs(5),
            hash::thread_state,
        )?;
        ensure_imm(e, "with 4 waiters", if e.immutable { 1 } else { 0 })?;
        word.store(1, Ordering::SeqCst);
        let woke = hash::wake(&word, i32::MAX, hash::priv32());
        let rs = hash::join_all(ws, Duration::from_secs(15))?;
        ensure_res("futex_wake(all) of 4 waiters", woke, Ok(4))?;
        for (i, r) in rs.into_iter().enumerate() {
            ensure_res(&format!("waiter {i}"), r, Ok(0))?;
        }
        ensure_res(
            "second wake",
            hash::wake(&word, i32::MAX, hash::priv32()),
            Ok(0),
        )
    })())
}

/// The first line of `--help`.
const ABOUT: &str =
    "the immutable private hash of the seed patch (FH_FLAG_IMMUTABLE, GET_IMMUTABLE), or exactly its absence.";

fn main() {
    let racing = |name, run| Case {
        name,
        run,
        timeout: races::rounds().timeout(),
    };
    run(
        ABOUT,
        &[
            Case::new("get-immutable-fresh", fresh),
            Case::new("set-immutable", set_immutable),
            Case::new("immutable-blocks-set", blocks_set),
            Case::new("mutable-private-is-0", mutable_private),
            Case::new("global-is-immutable", global),
            Case::new("auto-table-is-mutable", auto_table),
            Case::new("immutable-set-0", immutable_set_0),
            Case::new("immutable-stops-growth", stops_growth),
            Case::new("immutable-waiters-work", waiters_work),
            racing("immutable-vs-set-race", races::immutable_vs_set),
            racing("immutable-vs-thread-create", races::immutable_vs_create),
        ],
    )
}
