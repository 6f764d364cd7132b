//! `prctl(PR_FUTEX_HASH)` argument handling, exactly (`docs/futex-abi.md`
//! sections 1, 2 and 4). Every case checks the expected kernel's result: with
//! `private_hash` the 6.17+ semantics; without it, 6.16's stub (SET EINVAL
//! for every value, GET 0, sub-op 3 -> 0) or, without `prctl`, EINVAL for
//! every call. Each case runs in a fresh process that has created no thread.
//!
//! Cases (33):
//! - `get-fresh-is-0`: GET before any futex op or thread is 0.
//! - `get-after-futex-ops-is-0`: private futex wake/wait do not allocate: GET 0.
//! - `get-ignores-args`: GET with junk in arg3..arg5 returns the same as GET; pins an
//!   implementation accident: GET checks none of its unused arguments.
//! - `set-0-global`: SET 0 -> 0, GET 0, and a later SET 16 is EBUSY (global, not "no table").
//! - `set-2`, `set-4`, `set-16`, `set-128`, `set-1024`, `set-65536`: SET 2^k -> 0, GET 2^k.
//! - `set-pow2-sweep-up`: SET 2, 4, ..., 2^16 in one process, GET after each is exact.
//! - `set-pow2-sweep-down`: SET 2^16, ..., 4, 2 (shrinking), GET after each is exact.
//! - `set-not-pow2-einval`: SET 1, 3, 6, 15, 2^20+1, 0xffffffff -> EINVAL, GET stays 0.
//! - `set-2pow25-enomem`: SET 2^25 -> ENOMEM (kvmalloc limit, nothing allocated), GET stays 0;
//!   pins an implementation accident: SET has no limit of its own, kvmalloc refuses
//!   more than INT_MAX bytes (2^25 buckets of 64 B), so bigger buckets move the edge.
//! - `set-2pow31-enomem`: SET 2^31 (a power of two; 2^31 * 64 B > INT_MAX) -> ENOMEM;
//!   the same accident.
//! - `set-after-enomem-works`: after ENOMEM, SET 32 works and GET 32.
//! - `set-2pow32-acts-as-0`: SET 1<<32 (truncated to 0) -> 0, GET 0, SET 16 -> EBUSY;
//!   pins an implementation accident: `futex_hash_allocate()` takes arg3 as an
//!   `unsigned int`, so its high 32 bits are dropped (a kernel that checks the
//!   whole `unsigned long` would say EINVAL here).
//! - `set-2pow32-or-16-acts-as-16`: SET (1<<32)|16 -> 0, GET 16; the same accident.
//! - `set-high-bits-truncated`: SET (1<<63)|64 -> GET 64; (1<<32)|3 -> EINVAL;
//!   -16 as u64 (0xfffffff0 after truncation) -> EINVAL; 0xffffffff_80000000 -> ENOMEM;
//!   the same accident.
//! - `unknown-subops-einval`: sub-ops 0, 4, 5, 99, 1<<32|2 -> EINVAL (no truncation of arg2).
//! - `subop-3`: GET_IMMUTABLE: EINVAL on 6.17+ (0 on 6.16's stub, 0 with the patch and no table).
//! - `set-arg4-einval`: SET 16 with arg4 = 2 and arg4 = 1<<32 -> EINVAL, GET stays 0
//!   (arg4 = 1 too unless the immutability patch is expected).
//! - `set-arg5-ignored`: SET 16 with arg5 = 0xdead -> 0, GET 16; pins an implementation
//!   accident: `kernel/sys.c` never looks at arg5 (no "must be 0" check).
//! - `set-0-one-way`: after SET 0: SET 0/2/16/2^16 and 2^31 -> EBUSY, 3 -> EINVAL, GET 0;
//!   the EINVAL pins an implementation accident: the value is checked before the
//!   global hash is.
//! - `set-0-after-custom`: SET 32, SET 0 -> 0, GET 0, SET 32 -> EBUSY.
//! - `set-replace-custom`: SET 32, 64, 16, 16: each 0, GET exact after each.
//! - `get-after-failed-set-unchanged`: SET 64, then EINVAL/ENOMEM SETs leave GET 64.
//! - `set-after-thread-immediate`: after a thread (auto table), SET 64 -> GET 64 at once.
//! - `set-from-other-thread`: SET 128 in a second thread -> GET 128 in the first (mm-wide).
//! - `set-0-after-threads`: with threads alive, SET 0 -> GET 0, SET 16 -> EBUSY.
//! - `custom-2-stops-growth`: SET 2, then threads (which would auto-allocate 16): GET stays 2.
//! - `custom-16-stops-growth`: SET 16, then more threads than CPUs: GET stays 16
//!   (>= 5 online CPUs, where growth would reach 32; SKIP with the reason on fewer).
//! - `kernel-version-matches`: not the futex ABI but the run's own premise: the booted
//!   kernel's `uname -r` is of `version=` of the expectations (the version whose row
//!   they are), so a resolver that booted another upload cannot pass the wrong row;
//!   SKIP with the reason when no version is given (a binary run by hand).

use guest_tests::cases::{diag, main as run, Case, Ctx};
use guest_tests::hash::{
    self, done, ensure_get, ensure_res, ensure_set, fail, skip, want_get, Check, Parked, Worker,
    EBUSY, EINVAL, ENOMEM,
};
use guest_tests::ktap::Outcome;
use guest_tests::race;
use guest_tests::sys;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

fn get_fresh(ctx: &Ctx) -> Outcome {
    done(ensure_get(&ctx.expect, "in a fresh process", 0))
}

fn get_after_futex_ops(ctx: &Ctx) -> Outcome {
    done((|| {
        let w = AtomicU32::new(1);
        ensure_res(
            "futex_wake(nobody)",
            hash::wake(&w, 1, hash::priv32()),
            Ok(0),
        )?;
        ensure_res(
            "futex_wait(mismatch)",
            hash::wait_ms(&w, 2, hash::priv32(), 100),
            Err(sys::Errno(libc::EAGAIN)),
        )?;
        ensure_res(
            "futex_wait(1 ms)",
            hash::wait_ms(&w, 1, hash::priv32(), 1),
            Err(sys::Errno(libc::ETIMEDOUT)),
        )?;
        ensure_res(
            "legacy FUTEX_WAKE_PRIVATE",
            hash::futex_legacy(&w, hash::legacy::WAKE | hash::legacy::PRIVATE, 1, None),
            Ok(0),
        )?;
        ensure_get(&ctx.expect, "after private futex ops", 0)
    })())
}

fn get_ignores_args(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_res(
            "GET with arg3..5 = 5, 7, 9",
            sys::prctl_futex_hash(sys::PR_FUTEX_HASH_GET_SLOTS, 5, 7, 9),
            want_get(e, 0),
        )?;
        ensure_set(e, 64, Ok(0))?;
        ensure_res(
            "GET with arg3..5 = u64::MAX",
            sys::prctl_futex_hash(sys::PR_FUTEX_HASH_GET_SLOTS, u64::MAX, u64::MAX, u64::MAX),
            want_get(e, 64),
        )
    })())
}

fn set_0_global(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, 0, Ok(0))?;
        ensure_get(e, "after SET 0", 0)?;
        // Tells "global" apart from "no table yet".
        ensure_set(e, 16, EBUSY)
    })())
}

fn set_pow2(ctx: &Ctx, slots: u64) -> Outcome {
    done((|| {
        ensure_set(&ctx.expect, slots, Ok(0))?;
        ensure_get(&ctx.expect, &format!("after SET {slots}"), slots as i64)
    })())
}

fn set_2(ctx: &Ctx) -> Outcome {
    set_pow2(ctx, 2)
}
fn set_4(ctx: &Ctx) -> Outcome {
    set_pow2(ctx, 4)
}
fn set_16(ctx: &Ctx) -> Outcome {
    set_pow2(ctx, 16)
}
fn set_128(ctx: &Ctx) -> Outcome {
    set_pow2(ctx, 128)
}
fn set_1024(ctx: &Ctx) -> Outcome {
    set_pow2(ctx, 1024)
}
fn set_65536(ctx: &Ctx) -> Outcome {
    set_pow2(ctx, 65536)
}

fn sweep(ctx: &Ctx, ks: impl Iterator<Item = u32>) -> Outcome {
    done((|| {
        for k in ks {
            let slots = 1u64 << k;
            ensure_set(&ctx.expect, slots, Ok(0))?;
            ensure_get(&ctx.expect, &format!("after SET {slots}"), slots as i64)?;
        }
        Ok(())
    })())
}

fn sweep_up(ctx: &Ctx) -> Outcome {
    sweep(ctx, 1..=16)
}

fn sweep_down(ctx: &Ctx) -> Outcome {
    sweep(ctx, (1..=16).rev())
}

fn not_pow2(ctx: &Ctx) -> Outcome {
    done((|| {
        for v in [1u64, 3, 6, 15, (1 << 20) + 1, 0xffff_ffff] {
            ensure_set(&ctx.expect, v, EINVAL)?;
            ensure_get(&ctx.expect, &format!("after SET {v:#x}"), 0)?;
        }
        Ok(())
    })())
}

fn enomem(ctx: &Ctx, slots: u64) -> Outcome {
    done((|| {
        ensure_set(&ctx.expect, slots, ENOMEM)?;
        ensure_get(&ctx.expect, &format!("after SET {slots:#x}"), 0)
    })())
}

fn set_2pow25(ctx: &Ctx) -> Outcome {
    enomem(ctx, 1 << 25)
}

fn set_2pow31(ctx: &Ctx) -> Outcome {
    enomem(ctx, 1 << 31)
}

fn after_enomem(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, 1 << 26, ENOMEM)?;
        ensure_set(e, 32, Ok(0))?;
        ensure_get(e, "after ENOMEM then SET 32", 32)?;
        ensure_set(e, 1 << 30, ENOMEM)?;
        ensure_get(e, "after a second ENOMEM", 32)
    })())
}

fn set_2pow32(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, 1 << 32, Ok(0))?;
        ensure_get(e, "after SET 1<<32", 0)?;
        ensure_set(e, 16, EBUSY)
    })())
}

fn set_2pow32_16(ctx: &Ctx) -> Outcome {
    done((|| {
        ensure_set(&ctx.expect, (1 << 32) | 16, Ok(0))?;
        ensure_get(&ctx.expect, "after SET (1<<32)|16", 16)
    })())
}

fn high_bits(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, (1 << 32) | 3, EINVAL)?;
        ensure_set(e, (-16i64) as u64, EINVAL)?;
        ensure_get(e, "after the EINVALs", 0)?;
        ensure_set(e, (1 << 63) | 64, Ok(0))?;
        ensure_get(e, "after SET (1<<63)|64", 64)?;
        ensure_set(e, 0xffff_ffff_8000_0000, ENOMEM)?;
        ensure_get(e, "after SET 0xffffffff80000000", 64)
    })())
}

fn unknown_subops(ctx: &Ctx) -> Outcome {
    done((|| {
        for op in [0u64, 4, 5, 99, (1 << 32) | 2, (1 << 32) | 1] {
            ensure_res(
                &format!("PR_FUTEX_HASH sub-op {op:#x}"),
                sys::prctl_futex_hash(op, 16, 0, 0),
                EINVAL,
            )?;
        }
        ensure_get(&ctx.expect, "after unknown sub-ops", 0)
    })())
}

fn subop_3(ctx: &Ctx) -> Outcome {
    done((|| {
        ensure_res(
            "sub-op 3 (GET_IMMUTABLE), no table",
            hash::get_immutable(),
            hash::want_get_immutable(&ctx.expect, 0),
        )?;
        ensure_get(&ctx.expect, "after sub-op 3", 0)
    })())
}

fn arg4(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        let mut values = vec![2u64, 1 << 32];
        if !e.immutable {
            values.push(sys::FH_FLAG_IMMUTABLE);
        }
        for a4 in values {
            ensure_res(
                &format!("SET 16 with arg4 = {a4:#x}"),
                sys::prctl_futex_hash(sys::PR_FUTEX_HASH_SET_SLOTS, 16, a4, 0),
                EINVAL,
            )?;
            ensure_get(e, &format!("after SET with arg4 = {a4:#x}"), 0)?;
        }
        Ok(())
    })())
}

fn arg5(ctx: &Ctx) -> Outcome {
    done((|| {
        ensure_res(
            "SET 16 with arg5 = 0xdead",
            sys::prctl_futex_hash(sys::PR_FUTEX_HASH_SET_SLOTS, 16, 0, 0xdead),
            hash::want_set(&ctx.expect, Ok(0)),
        )?;
        ensure_get(&ctx.expect, "after SET 16 with arg5", 16)
    })())
}

fn one_way(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, 0, Ok(0))?;
        for v in [0u64, 2, 16, 1 << 16, 1 << 31] {
            ensure_set(e, v, EBUSY)?;
        }
        // Validation comes before the "global is final" check.
        ensure_set(e, 3, EINVAL)?;
        ensure_get(e, "after SET 0 and the refused SETs", 0)
    })())
}

fn zero_after_custom(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, 32, Ok(0))?;
        ensure_get(e, "after SET 32", 32)?;
        ensure_set(e, 0, Ok(0))?;
        ensure_get(e, "after SET 0", 0)?;
        ensure_set(e, 32, EBUSY)
    })())
}

fn replace_custom(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        for v in [32u64, 64, 16, 16] {
            ensure_set(e, v, Ok(0))?;
            ensure_get(e, &format!("after SET {v}"), v as i64)?;
        }
        Ok(())
    })())
}

fn failed_set_unchanged(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        ensure_set(e, 64, Ok(0))?;
        ensure_set(e, 3, EINVAL)?;
        ensure_set(e, 1 << 25, ENOMEM)?;
        ensure_res(
            "SET 32 with arg4 = 2",
            sys::prctl_futex_hash(sys::PR_FUTEX_HASH_SET_SLOTS, 32, 2, 0),
            EINVAL,
        )?;
        ensure_get(e, "after failed SETs", 64)
    })())
}

fn after_thread(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        let parked = Parked::spawn(1, Duration::from_secs(20))?;
        let auto = if hash::growth_allocates(e.growth, true, false) {
            16
        } else {
            0
        };
        ensure_get(e, "with one extra thread", auto)?;
        ensure_set(e, 64, Ok(0))?;
        ensure_get(e, "right after SET 64", 64)?;
        parked.release()?;
        ensure_get(e, "after the thread exited", 64)
    })())
}

fn from_other_thread(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = ctx.expect.clone();
        let w = Worker::spawn(|| hash::set(128))?;
        let r = w.join(Duration::from_secs(10))?;
        ensure_res("SET 128 from a second thread", r, hash::want_set(&e, Ok(0)))?;
        ensure_get(&e, "in the first thread", 128)
    })())
}

fn zero_after_threads(ctx: &Ctx) -> Outcome {
    done((|| {
        let e = &ctx.expect;
        let parked = Parked::spawn(3, Duration::from_secs(20))?;
        ensure_set(e, 0, Ok(0))?;
        ensure_get(e, "after SET 0 with 3 threads", 0)?;
        ensure_set(e, 16, EBUSY)?;
        parked.release()?;
        ensure_get(e, "after the threads exited", 0)
    })())
}

fn stops_growth(ctx: &Ctx, custom: u64) -> Check {
    let e = &ctx.expect;
    let online = hash::online_cpus();
    let n = (online + 2).clamp(6, 32);
    let would = hash::auto_size_for(n, online, hash::global_size());
    if would <= custom {
        // Nothing to observe: without the SET growth would not pass it either.
        return Err(skip(format!(
            "growth past {custom} slots needs >= 5 online CPUs (4 x 5 threads -> 32); \
             {online} online, where {n} threads would only reach {would}"
        )));
    }
    ensure_set(e, custom, Ok(0))?;
    diag(&format!(
        "{n} threads on {online} online CPUs; without the custom SET growth would reach {would}"
    ));
    let parked = Parked::spawn(n, Duration::from_secs(20))?;
    // Growth is deferred over RCU grace periods: wait for as many as a
    // (wrong) replacement would need to land, then GET.
    let want = want_get(e, custom as i64);
    let r = race::settled_get(want, race::SETTLE);
    parked.release()?;
    ensure_res(&format!("GET after SET {custom} and {n} threads"), r, want)
}

fn custom_2(ctx: &Ctx) -> Outcome {
    done(stops_growth(ctx, 2))
}

fn custom_16(ctx: &Ctx) -> Outcome {
    done(stops_growth(ctx, 16))
}

/// The running kernel's release as `uname -r` prints it (`uname(2)`).
fn uname_release() -> String {
    // SAFETY: utsname is plain old data (arrays of c_char), zero is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a live utsname for the kernel to fill.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let bytes: Vec<u8> = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn version_matches(ctx: &Ctx) -> Outcome {
    let Some(version) = ctx.expect.version.as_deref() else {
        return skip(
            "no version= in the expectations (the harness gives the version whose row they are; \
             a binary run by hand has none)",
        );
    };
    let release = uname_release();
    if guest_tests::expect::release_matches(version, &release) {
        diag(&format!("kernel {release}, expectations for {version}"));
        Outcome::Pass
    } else {
        fail(format!(
            "the booted kernel is {release:?}, but the expectations are {version}'s: \
             another kernel than the resolved one was booted, and every result of this \
             cell was judged against the wrong row"
        ))
    }
}

/// The first line of `--help`.
const ABOUT: &str =
    "prctl(PR_FUTEX_HASH) argument handling, exactly (docs/futex-abi.md sections 1, 2 and 4).";

fn main() {
    run(
        ABOUT,
        &[
            Case::new("get-fresh-is-0", get_fresh),
            Case::new("get-after-futex-ops-is-0", get_after_futex_ops),
            Case::new("get-ignores-args", get_ignores_args),
            Case::new("set-0-global", set_0_global),
            Case::new("set-2", set_2),
            Case::new("set-4", set_4),
            Case::new("set-16", set_16),
            Case::new("set-128", set_128),
            Case::new("set-1024", set_1024),
            Case::new("set-65536", set_65536),
            Case::new("set-pow2-sweep-up", sweep_up),
            Case::new("set-pow2-sweep-down", sweep_down),
            Case::new("set-not-pow2-einval", not_pow2),
            Case::new("set-2pow25-enomem", set_2pow25),
            Case::new("set-2pow31-enomem", set_2pow31),
            Case::new("set-after-enomem-works", after_enomem),
            Case::new("set-2pow32-acts-as-0", set_2pow32),
            Case::new("set-2pow32-or-16-acts-as-16", set_2pow32_16),
            Case::new("set-high-bits-truncated", high_bits),
            Case::new("unknown-subops-einval", unknown_subops),
            Case::new("subop-3", subop_3),
            Case::new("set-arg4-einval", arg4),
            Case::new("set-arg5-ignored", arg5),
            Case::new("set-0-one-way", one_way),
            Case::new("set-0-after-custom", zero_after_custom),
            Case::new("set-replace-custom", replace_custom),
            Case::new("get-after-failed-set-unchanged", failed_set_unchanged),
            Case::new("set-after-thread-immediate", after_thread),
            Case::new("set-from-other-thread", from_other_thread),
            Case::new("set-0-after-threads", zero_after_threads),
            Case::new("custom-2-stops-growth", custom_2),
            Case::new("custom-16-stops-growth", custom_16),
            Case::new("kernel-version-matches", version_matches),
        ],
    )
}
