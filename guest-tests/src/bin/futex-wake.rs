//! Who a wake wakes, exactly (`docs/futex-abi.md` section 8): FUTEX_WAKE,
//! WAKE_BITSET, futex2's futex_wake and FUTEX_WAKE_OP. Waiters are threads
//! proven asleep in their syscall before a wake; every wake checks its
//! return value and exactly which waiters woke, against `ops::Queue` (the
//! kernel's queue order: RT priority, then FIFO).
//!
//! Cases (17):
//! - `private-flag-selects-key`: private and shared keys of one word differ: a wake of the other kind finds nobody.
//! - `wake-one-fifo`: FUTEX_WAKE nr 1 of 3 wakes exactly the oldest waiter, one at a time, then 0.
//! - `wake-counts`: nr 2 of 4 wakes exactly 2 (the oldest), INT_MAX the rest, then 0.
//! - `wake-nr-0-legacy-wakes-one`: futex(2) FUTEX_WAKE with nr 0 and nr -1 wakes one waiter each.
//! - `wake2-nr-0-wakes-none`: futex_wake nr 0 wakes nobody (after computing the key), -1 wakes one; nr is an int.
//! - `wake-no-waiter-0`: no waiter -> 0; a waiter on the next word of the page is not woken.
//! - `wake-priority-order`: SCHED_FIFO waiters wake first, by priority, then the others in FIFO order.
//! - `wake-bitset-selects`: WAKE_BITSET wakes only waiters whose bitset intersects; skipped ones do not count.
//! - `bitset-futex2-and-legacy`: futex_wake's mask and WAIT_BITSET's bitset are the same thing (and vice versa).
//! - `wake-op-ops`: SET, ADD, OR, ANDN, XOR with and without OPARG_SHIFT give the exact new word (12-bit oparg sign-extended; a shift outside 0..31 is masked to 5 bits).
//! - `wake-op-cmp`: EQ, NE, LT, LE, GT, GE on the old value, signed, with a sign-extended 12-bit cmparg, decide whether uaddr2's waiter wakes.
//! - `wake-op-return-sum`: the return is woken on uaddr1 + woken on uaddr2; nr 0 wakes one; nr_wake2 is arg4 as a u32; bitsets are not looked at.
//! - `wake-op-same-word`: uaddr1 == uaddr2: both wake passes run on the one queue.
//! - `wake-op-invalid-enosys`: op 5..7 -> ENOSYS, word untouched; cmp 6..15 -> ENOSYS after the op was applied; nobody woken.
//! - `wake-op-faults`: uaddr2 unwritable -> EFAULT before any wake; unaligned -> EINVAL; a private uaddr1 needs no memory.
//! - `readonly-page-keys`: a shared futex on a read-only private page -> EFAULT; private, or on a read-only MAP_SHARED page, it works.
//! - `futex2-wake-validation`: futex_wake's flag, size, mask, alignment and address errnos; flags is an unsigned int.

use guest_tests::cases::{main as run, Case, Ctx};
use guest_tests::hash::{done, ensure_res, skip, Check, Res, EINVAL};
use guest_tests::ktap::Outcome;
use guest_tests::ops::{
    self, addr, ensure_wake, ensure_word, mutated, op::*, span, ts, wake_private, word, Page,
    Queue, Waiters, ALL, ANY, ANY32, EAGAIN, EFAULT, ENOSYS, ETIMEDOUT, KERNEL_ADDR, SC_FUTEX,
    SC_WAIT2, U32P,
};
use guest_tests::sys::{self};
use guest_tests::sys::{encode_op, futex, futex_wait_raw, futex_wake_raw};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const P: u32 = PRIVATE;

fn private_flag_selects_key(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let mut ws = Waiters::new();
        let a = ws.add(SC_FUTEX, ops::waiting_private(w, 0))?;
        ensure_res(
            "shared FUTEX_WAKE of a private waiter",
            futex(addr(w), WAKE, ALL, 0, 0, 0),
            Ok(0),
        )?;
        ws.woke("shared FUTEX_WAKE of a private waiter", &[])?;
        ensure_res(
            "futex_wake shared of a private waiter",
            futex_wake_raw(addr(w), ANY, ALL, 2),
            Ok(0),
        )?;
        ws.woke("futex_wake shared of a private waiter", &[])?;
        ensure_res("FUTEX_WAKE_PRIVATE", wake_private(w, ALL), Ok(1))?;
        ws.woke("FUTEX_WAKE_PRIVATE", &[a])?;
        let b = ws.add(SC_FUTEX, move || futex(addr(w), WAIT, 0, 0, 0, 0))?;
        ensure_res(
            "FUTEX_WAKE_PRIVATE of a shared waiter",
            wake_private(w, ALL),
            Ok(0),
        )?;
        ws.woke("FUTEX_WAKE_PRIVATE of a shared waiter", &[])?;
        ensure_res(
            "shared FUTEX_WAKE",
            futex(addr(w), WAKE, ALL, 0, 0, 0),
            Ok(1),
        )?;
        ws.woke("shared FUTEX_WAKE", &[b])?;
        ws.join()
    })())
}

/// `n` private FUTEX_WAIT waiters on `w` (for 0), queued in order.
fn queue_waiters(w: &'static AtomicU32, n: usize) -> Result<(Waiters, Queue), Outcome> {
    let mut ws = Waiters::new();
    let mut q = Queue::new();
    for id in ws.add_n(n, SC_FUTEX, ops::waiting_private(w, 0))? {
        q.push(id, ANY32);
    }
    Ok((ws, q))
}

/// Legacy FUTEX_WAKE_PRIVATE of `nr` (an int) checked against the model.
fn legacy_wakes(w: &AtomicU32, ws: &mut Waiters, q: &mut Queue, nrs: &[i32]) -> Check {
    for (i, &nr) in nrs.iter().enumerate() {
        let r = wake_private(w, nr as u32 as u64);
        ensure_wake(
            &format!("FUTEX_WAKE_PRIVATE nr {nr} (wake #{i})"),
            r,
            ws,
            q,
            (nr, ANY32, false),
        )?;
    }
    Ok(())
}

fn wake_one_fifo(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let (mut ws, mut q) = queue_waiters(w, 3)?;
        legacy_wakes(w, &mut ws, &mut q, &[1, 1, 1, 1])?;
        ws.join()
    })())
}

fn wake_counts(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let (mut ws, mut q) = queue_waiters(w, 4)?;
        legacy_wakes(w, &mut ws, &mut q, &[2, i32::MAX, i32::MAX])?;
        ws.join()
    })())
}

fn wake_nr_0_legacy(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let (mut ws, mut q) = queue_waiters(w, 2)?;
        legacy_wakes(w, &mut ws, &mut q, &[0, -1])?;
        ws.join()
    })())
}

fn wake2_nr_0(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        ensure_res(
            "futex_wake nr 0 on an unaligned address (key first)",
            futex_wake_raw(addr(w) + 1, ANY, 0, U32P as u64),
            EINVAL,
        )?;
        ensure_res(
            "futex_wake nr 0 with mask 0",
            futex_wake_raw(addr(w), 0, 0, U32P as u64),
            EINVAL,
        )?;
        let mut ws = Waiters::new();
        let mut q = Queue::new();
        for id in ws.add_n(3, SC_WAIT2, move || {
            futex_wait_raw(addr(w), 0, ANY, U32P as u64, 0, 0)
        })? {
            q.push(id, ANY32);
        }
        for (what, nr_reg, nr) in [
            ("nr 0", 0u64, 0),
            ("nr 1<<32 (an int: 0)", 1 << 32, 0),
            ("nr -1", u32::MAX as u64, -1),
            ("nr (1<<32)|1", (1 << 32) | 1, 1),
            ("nr 1", 1, 1),
        ] {
            let r = futex_wake_raw(addr(w), ANY, nr_reg, U32P as u64);
            ensure_wake(
                &format!("futex_wake {what}"),
                r,
                &mut ws,
                &mut q,
                (nr, ANY32, true),
            )?;
        }
        ws.join()
    })())
}

fn wake_no_waiter(_: &Ctx) -> Outcome {
    done((|| {
        let page = Page::new(libc::PROT_READ | libc::PROT_WRITE, false)?;
        let (w0, w1) = (page.word(0), page.word(1));
        ensure_res(
            "FUTEX_WAKE_PRIVATE, nobody waiting",
            wake_private(w0, ALL),
            Ok(0),
        )?;
        ensure_res(
            "FUTEX_WAKE, nobody waiting",
            futex(addr(w0), WAKE, ALL, 0, 0, 0),
            Ok(0),
        )?;
        ensure_res(
            "futex_wake, nobody waiting",
            futex_wake_raw(addr(w0), ANY, ALL, U32P as u64),
            Ok(0),
        )?;
        let mut ws = Waiters::new();
        let a = ws.add(SC_FUTEX, ops::waiting_private(w0, 0))?;
        ensure_res(
            "FUTEX_WAKE_PRIVATE of the next word",
            wake_private(w1, ALL),
            Ok(0),
        )?;
        ws.woke("FUTEX_WAKE_PRIVATE of the next word", &[])?;
        ensure_res(
            "FUTEX_WAKE_PRIVATE of the waiter's word",
            wake_private(w0, ALL),
            Ok(1),
        )?;
        ws.woke("FUTEX_WAKE_PRIVATE of the waiter's word", &[a])?;
        ws.join()
    })())
}

fn set_fifo(prio: i32) -> Res {
    let p = libc::sched_param {
        sched_priority: prio,
    };
    let policy = if prio > 0 {
        libc::SCHED_FIFO
    } else {
        libc::SCHED_OTHER
    };
    // SAFETY: p is a live sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &p) } == 0 {
        Ok(0)
    } else {
        Err(sys::Errno(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    }
}

fn wake_priority_order(_: &Ctx) -> Outcome {
    if let Err(e) = set_fifo(1) {
        return skip(format!(
            "sched_setscheduler(SCHED_FIFO) is {e} here (needs CAP_SYS_NICE): the priority order of the queue cannot be observed"
        ));
    }
    done((|| {
        ensure_res("back to SCHED_OTHER", set_fifo(0), Ok(0))?;
        let w = word(0);
        let mut ws = Waiters::new();
        let mut q = Queue::new();
        for rt in [0, 10, 20, 0] {
            let id = ws.add(SC_FUTEX, move || {
                set_fifo(rt)?;
                ops::wait_private(w, 0)
            })?;
            // normal_prio of SCHED_FIFO rt is MAX_RT_PRIO - 1 - rt.
            let prio = if rt > 0 { 99 - rt } else { ops::NORMAL_PRIO };
            q.push_prio(id, ANY32, prio);
        }
        legacy_wakes(w, &mut ws, &mut q, &[1, 1, 1, 1])?;
        ws.join()
    })())
}

fn wake_bitset_selects(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let mut ws = Waiters::new();
        let mut q = Queue::new();
        for bits in [0b001u32, 0b010, 0b110] {
            let id = ws.add(SC_FUTEX, move || {
                futex(addr(w), WAIT_BITSET | P, 0, 0, 0, bits as u64)
            })?;
            q.push(id, bits);
        }
        let id = ws.add(SC_FUTEX, ops::waiting_private(w, 0))?;
        q.push(id, ANY32);
        for (bits, nr) in [
            (0b100u32, 1),
            (0b010, i32::MAX),
            (0b100, i32::MAX),
            (ANY32, i32::MAX),
        ] {
            let r = futex(addr(w), WAKE_BITSET | P, nr as u64, 0, 0, bits as u64);
            ensure_wake(
                &format!("FUTEX_WAKE_BITSET {bits:#b} nr {nr}"),
                r,
                &mut ws,
                &mut q,
                (nr, bits, false),
            )?;
        }
        ws.join()
    })())
}

fn bitset_futex2_and_legacy(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let mut ws = Waiters::new();
        let mut q = Queue::new();
        let a = ws.add(SC_WAIT2, move || {
            futex_wait_raw(addr(w), 0, 0b01, U32P as u64, 0, 0)
        })?;
        q.push(a, 0b01);
        let b = ws.add(SC_FUTEX, move || {
            futex(addr(w), WAIT_BITSET | P, 0, 0, 0, 0b10)
        })?;
        q.push(b, 0b10);
        let r = futex_wake_raw(addr(w), 0b10, ALL, U32P as u64);
        ensure_wake(
            "futex_wake mask 0b10",
            r,
            &mut ws,
            &mut q,
            (i32::MAX, 0b10, true),
        )?;
        let r = futex(addr(w), WAKE_BITSET | P, ALL, 0, 0, 0b01);
        ensure_wake(
            "FUTEX_WAKE_BITSET 0b01",
            r,
            &mut ws,
            &mut q,
            (i32::MAX, 0b01, false),
        )?;
        ws.join()
    })())
}

/// One FUTEX_WAKE_OP_PRIVATE: `nr_wake` on `w1`, the op on `w2`, `nr_wake2`
/// (arg4) on `w2` if the comparison holds.
fn wake_op(w1: u64, w2: u64, nr_wake: u64, nr_wake2: u64, encoded: u64) -> Res {
    futex(w1, WAKE_OP | P, nr_wake, nr_wake2, w2, encoded)
}

fn wake_op_ops(_: &Ctx) -> Outcome {
    done((|| {
        let (w1, w2) = (word(0), word(0));
        let sh = OPARG_SHIFT;
        for (name, o, oparg, old, new) in [
            ("SET 5", OP_SET, 5, 1, 5),
            ("SET 0x800 (-2048)", OP_SET, 0x800, 0, 0xffff_f800),
            ("SET 1<<3", OP_SET | sh, 3, 0, 8),
            ("SET 1<<(33 & 31)", OP_SET | sh, 33, 0, 2),
            ("SET 1<<(-1 & 31)", OP_SET | sh, 0xfff, 0, 0x8000_0000),
            ("ADD 5", OP_ADD, 5, 1, 6),
            ("ADD 0xfff (-1)", OP_ADD, 0xfff, 10, 9),
            ("ADD 1 (wraps)", OP_ADD, 1, u32::MAX, 0),
            ("ADD 1<<4", OP_ADD | sh, 4, 1, 17),
            ("OR 0b0011", OP_OR, 0b0011, 0b1000, 0b1011),
            ("OR 1<<31", OP_OR | sh, 31, 1, 0x8000_0001),
            ("ANDN 0x0f", OP_ANDN, 0x0f, 0xff, 0xf0),
            ("ANDN 0x800 (-2048)", OP_ANDN, 0x800, u32::MAX, 0x7ff),
            ("ANDN 1<<0", OP_ANDN | sh, 0, 0b11, 0b10),
            ("XOR 0b1010", OP_XOR, 0b1010, 0b1100, 0b0110),
            ("XOR 1<<1", OP_XOR | sh, 1, 0, 2),
        ] {
            w2.store(old, Ordering::SeqCst);
            let what = format!("WAKE_OP {name} on {old:#x}");
            ensure_res(
                &what,
                wake_op(addr(w1), addr(w2), 1, 1, encode_op(o, oparg, CMP_EQ, 0)),
                Ok(0),
            )?;
            ensure_word(&what, w2, new)?;
        }
        Ok(())
    })())
}

/// Whether `old CMP cmparg` holds in `futex_atomic_op_inuser()`: both
/// signed, cmparg a sign-extended 12-bit field.
fn cmp_holds(cmp: u32, old: u32, cmparg: u32) -> bool {
    let arg = ((cmparg << 20) as i32) >> 20;
    let (a, b) = if mutated("wake-op-cmp-unsigned") {
        (old as i64, arg as u32 as i64)
    } else {
        (old as i32 as i64, arg as i64)
    };
    match cmp {
        CMP_EQ => a == b,
        CMP_NE => a != b,
        CMP_LT => a < b,
        CMP_LE => a <= b,
        CMP_GT => a > b,
        _ => a >= b,
    }
}

fn wake_op_cmp(_: &Ctx) -> Outcome {
    done((|| {
        let (w1, w2) = (word(0), word(0));
        let mut trials = Vec::new();
        for (cmp, name) in [
            (CMP_EQ, "EQ"),
            (CMP_NE, "NE"),
            (CMP_LT, "LT"),
            (CMP_LE, "LE"),
            (CMP_GT, "GT"),
            (CMP_GE, "GE"),
        ] {
            for old in [4, 5, 6] {
                trials.push((cmp, name, old, 5));
            }
        }
        trials.push((CMP_LT, "LT", u32::MAX, 0));
        trials.push((CMP_GT, "GT", 0x8000_0000, 0xfff));
        trials.push((CMP_EQ, "EQ", u32::MAX, 0xfff));
        let mut ws = Waiters::new();
        let mut sleeper = None;
        for (cmp, name, old, cmparg) in trials {
            w2.store(old, Ordering::SeqCst);
            let id = match sleeper {
                Some(id) => id,
                None => ws.add(SC_FUTEX, ops::waiting_private(w2, old))?,
            };
            let holds = cmp_holds(cmp, old, cmparg);
            let what = format!("WAKE_OP ADD 0, {old:#x} {name} {cmparg:#x}");
            let r = wake_op(addr(w1), addr(w2), 1, 1, encode_op(OP_ADD, 0, cmp, cmparg));
            ensure_res(&what, r, Ok(holds as i64))?;
            let woken: Vec<usize> = holds.then_some(id).into_iter().collect();
            ws.woke(&what, &woken)?;
            sleeper = (!holds).then_some(id);
        }
        if let Some(id) = sleeper {
            ensure_res("wake of the last sleeper", wake_private(w2, 1), Ok(1))?;
            ws.woke("wake of the last sleeper", &[id])?;
        }
        ws.join()
    })())
}

fn wake_op_return_sum(_: &Ctx) -> Outcome {
    done((|| {
        let (a, b) = (word(0), word(0));
        let mut ws = Waiters::new();
        let (mut qa, mut qb) = (Queue::new(), Queue::new());
        // WAKE_OP matches keys only: a bitset of 1 is woken like any other.
        qa.push(
            ws.add(SC_FUTEX, move || {
                futex(addr(a), WAIT_BITSET | P, 0, 0, 0, 1)
            })?,
            ANY32,
        );
        for id in ws.add_n(2, SC_FUTEX, ops::waiting_private(a, 0))? {
            qa.push(id, ANY32);
        }
        for id in ws.add_n(3, SC_FUTEX, ops::waiting_private(b, 0))? {
            qb.push(id, ANY32);
        }
        let yes = encode_op(OP_SET, 0, CMP_EQ, 0);
        let no = encode_op(OP_SET, 0, CMP_NE, 0);
        for (nr1, nr2_reg, nr2, holds) in [
            (1, 1, 1, true),
            (0, 0, 0, true),
            (i32::MAX, ALL, i32::MAX, false),
            (1, (1 << 32) | 5, 5, true),
        ] {
            let what = format!("WAKE_OP nr_wake {nr1}, nr_wake2 {nr2_reg:#x}, comparison {holds}");
            let r = wake_op(
                addr(a),
                addr(b),
                nr1 as u64,
                nr2_reg,
                if holds { yes } else { no },
            );
            let mut woken = qa.wake(nr1, ANY32, false);
            if holds {
                woken.extend(qb.wake(nr2, ANY32, false));
            }
            ensure_res(&what, r, Ok(woken.len() as i64))?;
            ws.woke(&what, &woken)?;
        }
        ws.join()
    })())
}

fn wake_op_same_word(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let mut ws = Waiters::new();
        let mut q = Queue::new();
        for id in ws.add_n(3, SC_FUTEX, ops::waiting_private(w, 0))? {
            q.push(id, ANY32);
        }
        for (old, holds) in [(0, true), (1, false)] {
            let what = format!("WAKE_OP ADD 1 on one word holding {old}, EQ 0");
            let r = wake_op(addr(w), addr(w), 1, 1, encode_op(OP_ADD, 1, CMP_EQ, 0));
            let mut woken = q.wake(1, ANY32, false);
            if holds {
                woken.extend(q.wake(1, ANY32, false));
            }
            ensure_res(&what, r, Ok(woken.len() as i64))?;
            ws.woke(&what, &woken)?;
            ensure_word(&what, w, old + 1)?;
        }
        ws.join()
    })())
}

fn wake_op_invalid(_: &Ctx) -> Outcome {
    done((|| {
        let (w1, w2) = (word(0), word(100));
        let mut ws = Waiters::new();
        let id = ws.add(SC_FUTEX, ops::waiting_private(w1, 0))?;
        for o in [5, 6, 7, 8 | 5, 8 | 7] {
            let what = format!("WAKE_OP op {o}");
            ensure_res(
                &what,
                wake_op(addr(w1), addr(w2), 1, 1, encode_op(o, 1, CMP_EQ, 100)),
                ENOSYS,
            )?;
            ensure_word(&what, w2, 100)?;
            ws.woke(&what, &[])?;
        }
        let mut want = 100;
        for cmp in 6..16 {
            let what = format!("WAKE_OP ADD 1, cmp {cmp}");
            ensure_res(
                &what,
                wake_op(addr(w1), addr(w2), 1, 1, encode_op(OP_ADD, 1, cmp, 100)),
                ENOSYS,
            )?;
            // The op is done before the comparison is decoded.
            want += 1;
            ensure_word(&what, w2, want)?;
            ws.woke(&what, &[])?;
        }
        ensure_res("FUTEX_WAKE_PRIVATE", wake_private(w1, 1), Ok(1))?;
        ws.woke("FUTEX_WAKE_PRIVATE", &[id])?;
        ws.join()
    })())
}

fn wake_op_faults(_: &Ctx) -> Outcome {
    done((|| {
        let w1 = word(0);
        let ro = Page::new(libc::PROT_READ | libc::PROT_WRITE, false)?;
        ro.word(0).store(3, Ordering::SeqCst);
        ro.protect(libc::PROT_READ)?;
        let none = Page::new(libc::PROT_NONE, false)?;
        let w2 = word(0);
        let set7 = encode_op(OP_SET, 7, CMP_EQ, 0);
        let mut ws = Waiters::new();
        let id = ws.add(SC_FUTEX, ops::waiting_private(w1, 0))?;
        for (what, a2, want) in [
            ("a read-only page", ro.at(0), EFAULT),
            ("a PROT_NONE page", none.at(0), EFAULT),
            ("NULL", 0, EFAULT),
            ("a kernel address", KERNEL_ADDR, EFAULT),
            ("an unaligned address", addr(w2) + 2, EINVAL),
        ] {
            let what = format!("WAKE_OP with uaddr2 on {what}");
            ensure_res(&what, wake_op(addr(w1), a2, 1, 1, set7), want)?;
            ws.woke(&what, &[])?;
        }
        ensure_word("the read-only word", ro.word(0), 3)?;
        ensure_res(
            "WAKE_OP with an unaligned uaddr1",
            wake_op(addr(w1) + 1, addr(w2), 1, 1, set7),
            EINVAL,
        )?;
        ensure_word("uaddr2 after an unaligned uaddr1", w2, 0)?;
        ensure_res(
            "WAKE_OP_PRIVATE with uaddr1 on a PROT_NONE page (a private key needs no memory)",
            wake_op(none.at(0), addr(w2), 1, 1, set7),
            Ok(0),
        )?;
        ensure_word("uaddr2 after it", w2, 7)?;
        ensure_res(
            "shared WAKE_OP with uaddr1 on a PROT_NONE page",
            futex(none.at(0), WAKE_OP, 1, 1, addr(w2), set7),
            EFAULT,
        )?;
        ensure_res("FUTEX_WAKE_PRIVATE", wake_private(w1, 1), Ok(1))?;
        ws.woke("FUTEX_WAKE_PRIVATE", &[id])?;
        ws.join()
    })())
}

fn readonly_page_keys(_: &Ctx) -> Outcome {
    done((|| {
        let t = span(Duration::from_millis(1));
        let page = Page::new(libc::PROT_READ | libc::PROT_WRITE, false)?;
        page.word(0).store(7, Ordering::SeqCst);
        page.protect(libc::PROT_READ)?;
        let a = page.at(0);
        ensure_res(
            "shared FUTEX_WAIT on a read-only private page (it can never change)",
            futex(a, WAIT, 7, ts(&t), 0, 0),
            EFAULT,
        )?;
        ensure_res(
            "shared FUTEX_WAKE there",
            futex(a, WAKE, 1, 0, 0, 0),
            EFAULT,
        )?;
        ensure_res(
            "FUTEX_WAIT_PRIVATE there",
            futex(a, WAIT | P, 7, ts(&t), 0, 0),
            ETIMEDOUT,
        )?;
        ensure_res(
            "FUTEX_WAIT_PRIVATE there, value changed",
            futex(a, WAIT | P, 8, ts(&t), 0, 0),
            EAGAIN,
        )?;
        ensure_res(
            "FUTEX_WAKE_PRIVATE there",
            futex(a, WAKE | P, 1, 0, 0, 0),
            Ok(0),
        )?;
        let shm = Page::new(libc::PROT_READ | libc::PROT_WRITE, true)?;
        shm.word(0).store(7, Ordering::SeqCst);
        shm.protect(libc::PROT_READ)?;
        ensure_res(
            "shared FUTEX_WAIT on a read-only MAP_SHARED page (an inode key)",
            futex(shm.at(0), WAIT, 7, ts(&t), 0, 0),
            ETIMEDOUT,
        )?;
        ensure_res(
            "shared FUTEX_WAKE there",
            futex(shm.at(0), WAKE, 1, 0, 0, 0),
            Ok(0),
        )
    })())
}

fn futex2_wake_validation(_: &Ctx) -> Outcome {
    done((|| {
        let w = word(0);
        let a = addr(w);
        for (name, f) in ops::FUTEX2_BAD_FLAGS {
            ensure_res(
                &format!("futex_wake flags {name}"),
                futex_wake_raw(a, ANY, 1, *f),
                EINVAL,
            )?;
        }
        for (what, mask) in [
            ("1<<32", 1u64 << 32),
            ("(1<<32)|1", (1 << 32) | 1),
            ("0", 0),
        ] {
            ensure_res(
                &format!("futex_wake mask {what}"),
                futex_wake_raw(a, mask, 1, U32P as u64),
                EINVAL,
            )?;
        }
        ensure_res(
            "futex_wake at an address 2 mod 4",
            futex_wake_raw(a + 2, ANY, 1, U32P as u64),
            EINVAL,
        )?;
        ensure_res(
            "futex_wake on a kernel address",
            futex_wake_raw(KERNEL_ADDR, ANY, 1, U32P as u64),
            EFAULT,
        )?;
        ensure_res(
            "futex_wake flags (1<<32)|U32|PRIVATE (an unsigned int)",
            futex_wake_raw(a, ANY, 1, (1 << 32) | U32P as u64),
            Ok(0),
        )
    })())
}

const ABOUT: &str =
    "Who a wake wakes, exactly: FUTEX_WAKE, WAKE_BITSET, futex2's futex_wake and FUTEX_WAKE_OP (docs/futex-abi.md section 8).";

fn main() {
    run(
        ABOUT,
        &[
            Case::new("private-flag-selects-key", private_flag_selects_key),
            Case::new("wake-one-fifo", wake_one_fifo),
            Case::new("wake-counts", wake_counts),
            Case::new("wake-nr-0-legacy-wakes-one", wake_nr_0_legacy),
            Case::new("wake2-nr-0-wakes-none", wake2_nr_0),
            Case::new("wake-no-waiter-0", wake_no_waiter),
            Case::new("wake-priority-order", wake_priority_order),
            Case::new("wake-bitset-selects", wake_bitset_selects),
            Case::new("bitset-futex2-and-legacy", bitset_futex2_and_legacy),
            Case::new("wake-op-ops", wake_op_ops),
            Case::new("wake-op-cmp", wake_op_cmp),
            Case::new("wake-op-return-sum", wake_op_return_sum),
            Case::new("wake-op-same-word", wake_op_same_word),
            Case::new("wake-op-invalid-enosys", wake_op_invalid),
            Case::new("wake-op-faults", wake_op_faults),
            Case::new("readonly-page-keys", readonly_page_keys),
            Case::new("futex2-wake-validation", futex2_wake_validation),
        ],
    )
}
