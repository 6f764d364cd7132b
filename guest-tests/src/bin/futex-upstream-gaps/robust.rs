//! `futex-upstream-gaps`' owners that die: a PI owner exiting with a
//! blocked waiter, and robust lists (`set_robust_list`, the kernel's
//! exit-time walk in `exit_robust_list()` / `handle_futex_death()`).

use super::{abs, futex, gettid, p, ts_ptr, want_err, word, PipeOk};
use super::{FUTEX_LOCK_PI, FUTEX_OWNER_DIED, FUTEX_PRIVATE_FLAG, FUTEX_TID_MASK};
use guest_tests::cases::Ctx;
use guest_tests::hash::{self, done, ensure_res, Worker};
use guest_tests::ktap::{fail, Check, Outcome};
use guest_tests::ops::{self, addr, ensure_word, op, Waiters, SC_FUTEX};
use guest_tests::sys::{self, Errno};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Upstream futex_lock_pi_exiting (owner_dies_with_blocked_waiter): the
/// owner of a PI futex exits with a waiter blocked in FUTEX_LOCK_PI; the
/// waiter gets the lock with FUTEX_OWNER_DIED set.
pub fn lock_pi_owner_dies(_: &Ctx) -> Check {
    let m = word(0);
    let locked = word(0);
    let owner = std::thread::spawn(move || {
        let r = futex(
            p(m),
            FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG,
            0,
            0,
            std::ptr::null(),
            0,
        );
        locked.store(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        r
    });
    while locked.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    let waiter = std::thread::spawn(move || {
        let ts = abs(libc::CLOCK_REALTIME, 20_000);
        let r = futex(
            p(m),
            FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG,
            0,
            ts_ptr(&ts),
            std::ptr::null(),
            0,
        );
        (r, m.load(Ordering::SeqCst), gettid())
    });
    let o = owner.join().map_err(|_| "owner panicked".to_string())?;
    if o != Ok(0) {
        return Err(fail(format!("owner's FUTEX_LOCK_PI: {o:?}")));
    }
    let (r, val, tid) = waiter.join().map_err(|_| "waiter panicked".to_string())?;
    Outcome::check(
        r == Ok(0) && val & FUTEX_TID_MASK == tid && val & FUTEX_OWNER_DIED != 0,
        || format!("waiter got {r:?}, word {val:#x}, its tid {tid}"),
    )
    .pipe_ok()
}

// ---- robust lists ---------------------------------------------------------

#[repr(C)]
struct RobustHead {
    next: usize,
    offset: isize,
    pending: usize,
}

#[repr(C)]
struct RobustLock {
    next: AtomicUsize,
    word: AtomicU32,
}

fn set_robust_list(head: *const RobustHead, len: usize) -> Result<i64, Errno> {
    // SAFETY: the kernel only records the pointer.
    let r = unsafe { libc::syscall(libc::SYS_set_robust_list, head, len) };
    if r < 0 {
        Err(Errno(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    } else {
        Ok(r)
    }
}

pub fn robust_set_invalid_size(_: &Ctx) -> Check {
    let head = Box::leak(Box::new(RobustHead {
        next: 0,
        offset: 0,
        pending: 0,
    }));
    head.next = head as *const _ as usize;
    want_err(
        "set_robust_list with len + 1",
        set_robust_list(head, std::mem::size_of::<RobustHead>() + 1),
        libc::EINVAL,
    )
}

pub fn robust_get_self(_: &Ctx) -> Check {
    let head = Box::leak(Box::new(RobustHead {
        next: 0,
        offset: 0,
        pending: 0,
    }));
    head.next = head as *const _ as usize;
    set_robust_list(head, std::mem::size_of::<RobustHead>())
        .map_err(|e| format!("set_robust_list: {e}"))?;
    let (mut got, mut len): (usize, usize) = (0, 0);
    // SAFETY: both out-pointers are live locals.
    let r = unsafe { libc::syscall(libc::SYS_get_robust_list, 0, &mut got, &mut len) };
    Outcome::check(
        r == 0 && got == head as *const _ as usize && len == std::mem::size_of::<RobustHead>(),
        || {
            format!(
                "get_robust_list: {r}, head {got:#x} (set {:#x}), len {len}",
                head as *const _ as usize
            )
        },
    )
    .pipe_ok()
}

/// Upstream robust_list test_robustness, with the kernel's wake seen: a
/// thread holds a robust lock (its TID in the word, the lock on its
/// robust list); a waiter is asleep in a shared FUTEX_WAIT (no timeout)
/// on `TID|FUTEX_WAITERS`; only then does the owner exit. The exit
/// (`handle_futex_death()`) stores exactly `FUTEX_WAITERS|FUTEX_OWNER_DIED`
/// (the TID cleared) and wakes one waiter with a shared key: the waiter
/// returns 0, woken by the kernel (nothing else wakes it, and it has no
/// timeout).
pub fn robust_owner_died(_: &Ctx) -> Outcome {
    done((|| {
        let lock: &'static RobustLock = Box::leak(Box::new(RobustLock {
            next: AtomicUsize::new(0),
            word: AtomicU32::new(0),
        }));
        // The owner exits once the gate opens.
        let gate = ops::word(0);
        let owner = Worker::spawn(move || {
            let head = Box::leak(Box::new(RobustHead {
                next: 0,
                offset: std::mem::offset_of!(RobustLock, word) as isize,
                pending: 0,
            }));
            // The list: head -> lock -> head.
            lock.next
                .store(head as *const RobustHead as usize, Ordering::SeqCst);
            head.next = lock as *const RobustLock as usize;
            let r = set_robust_list(head, std::mem::size_of::<RobustHead>());
            lock.word.store(gettid(), Ordering::SeqCst);
            while gate.load(Ordering::SeqCst) == 0 {
                let _ = ops::wait_private(gate, 0);
            }
            r
        })?;
        let otid = owner.tid()? as u32;
        let until = Instant::now() + guest_tests::cases::scaled(Duration::from_secs(5));
        while lock.word.load(Ordering::SeqCst) == 0 {
            if Instant::now() > until {
                return Err(hash::fail("the owner never took the robust lock"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        ensure_word("the robust lock, held", &lock.word, otid)?;
        lock.word.store(otid | sys::WAITERS, Ordering::SeqCst);
        let mut ws = Waiters::new();
        let w = addr(&lock.word);
        let id = ws.add(SC_FUTEX, move || {
            sys::futex(w, op::WAIT, (otid | sys::WAITERS) as u64, 0, 0, 0)
        })?;
        gate.store(1, Ordering::SeqCst);
        ensure_res(
            "FUTEX_WAKE of the owner's gate",
            ops::wake_private(gate, 1),
            Ok(1),
        )?;
        let r = owner.join(guest_tests::cases::scaled(Duration::from_secs(10)))?;
        ensure_res("the owner's set_robust_list", r, Ok(0))?;
        ws.woke("the owner's exit (handle_futex_death)", &[id])?;
        ensure_word(
            "the robust lock after its owner died",
            &lock.word,
            sys::WAITERS | FUTEX_OWNER_DIED,
        )?;
        ws.join()
    })())
}
