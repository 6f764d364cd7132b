//! The robust list at exit, exactly (`docs/futex-abi.md` section 8, "The
//! robust list at exit"): an owner registers a real `robust_list_head`
//! (`set_robust_list`, `futex_offset` to the word) whose one lock holds a
//! futex word in a given state, on the list or as `list_op_pending`; then
//! it exits, a thread (`thread-*`, private memory) or a forked child's
//! whole process (`fork-*`, a `MAP_SHARED` page), or the child execs
//! (`exec-*`). The kernel's walk
//! (`exit_robust_list()`, `handle_futex_death()`) must leave the word
//! exactly as 7.3.4's code says, and wake exactly the waiters it says: each
//! waiter is a thread proven asleep in `FUTEX_WAIT` on the word (no
//! timeout), so one that returns 0 was woken by the exit; one that must not
//! be woken is still asleep and queued afterwards: the case's own
//! `FUTEX_WAKE` finds exactly it, and it returns 0.
//!
//! Word states: `0`; `own` (the exiting task's TID); `other` (this
//! thread's TID, alive); `own-waiters`, `other-waiters` (the TID with
//! FUTEX_WAITERS); `own-died` (the TID with FUTEX_OWNER_DIED); `died`
//! (FUTEX_OWNER_DIED alone); `died-waiters` (FUTEX_OWNER_DIED|FUTEX_WAITERS,
//! TID 0). The waiters wait with the shared op (no
//! FUTEX_PRIVATE_FLAG) unless a name says `private-waiter`.
//!
//! Cases (47):
//! - `thread-list-0`: on the list, 0: word 0, no wake.
//! - `thread-list-own`: on the list, own TID: word OWNER_DIED, no wake (no FUTEX_WAITERS).
//! - `thread-list-other`: on the list, another TID: word unchanged, no wake.
//! - `thread-list-own-waiters`: on the list, own TID|WAITERS: word WAITERS|OWNER_DIED, one wake.
//! - `thread-list-other-waiters`: on the list, another TID|WAITERS: word unchanged, no wake.
//! - `thread-list-own-died`: on the list, own TID|OWNER_DIED: word OWNER_DIED, no wake.
//! - `thread-list-died`: on the list, OWNER_DIED alone: word unchanged, no wake.
//! - `thread-pending-0`: pending, 0: word 0, one wake (the pending-op wake).
//! - `thread-pending-own`: pending, own TID: word OWNER_DIED, no wake.
//! - `thread-pending-other`: pending, another TID: word unchanged, one wake on 7.3.4; none on 7.0.13 and older.
//! - `thread-pending-own-waiters`: pending, own TID|WAITERS: word WAITERS|OWNER_DIED, one wake.
//! - `thread-pending-other-waiters`: pending, another TID|WAITERS: word unchanged, no wake.
//! - `thread-pending-own-died`: pending, own TID|OWNER_DIED: word OWNER_DIED, no wake.
//! - `thread-pending-died`: pending, OWNER_DIED alone: word unchanged, one wake.
//! - `thread-list-died-waiters`: on the list, OWNER_DIED|WAITERS (TID 0): word
//!   unchanged, no wake.
//! - `thread-pending-died-waiters`: pending, OWNER_DIED|WAITERS (TID 0): word
//!   unchanged, one wake (the owner part is 0: 6.2's resent death notice).
//! - `fork-list-0`: the `thread-list-0` row, a forked child's process exit on a MAP_SHARED word.
//! - `fork-list-own`: as `thread-list-own`, process exit, shared word.
//! - `fork-list-other`: as `thread-list-other`, process exit, shared word.
//! - `fork-list-own-waiters`: as `thread-list-own-waiters`, process exit, shared word.
//! - `fork-list-other-waiters`: as `thread-list-other-waiters`, process exit, shared word.
//! - `fork-list-own-died`: as `thread-list-own-died`, process exit, shared word.
//! - `fork-pending-0`: as `thread-pending-0`, process exit, shared word.
//! - `fork-pending-own`: as `thread-pending-own`, process exit, shared word.
//! - `fork-pending-other`: as `thread-pending-other`, process exit, shared word.
//! - `fork-pending-own-waiters`: as `thread-pending-own-waiters`, process exit, shared word.
//! - `fork-pending-other-waiters`: as `thread-pending-other-waiters`, process exit, shared word.
//! - `fork-pending-own-died`: as `thread-pending-own-died`, process exit, shared word.
//! - `fork-list-died`: as `thread-list-died`, process exit, shared word.
//! - `fork-pending-died`: as `thread-pending-died`, process exit, shared word.
//! - `fork-pending-died-waiters`: as `thread-pending-died-waiters`, process exit,
//!   shared word.
//! - `exec-list-own-waiters`: a forked child execs with own TID|WAITERS on its list: exec walks it (word WAITERS|OWNER_DIED, one wake).
//! - `exec-pending-0`: a forked child execs with a pending 0: one wake, word 0.
//! - `thread-both-other`: on the list and pending, another TID: handled once, as pending: one wake (none on 7.0.13 and older).
//! - `thread-both-own-waiters`: on the list and pending, own TID|WAITERS, two waiters: exactly one wakes.
//! - `thread-list-own-waiters-private-waiter`: own TID|WAITERS, a FUTEX_WAIT_PRIVATE waiter: word WAITERS|OWNER_DIED, not woken.
//! - `thread-pending-0-private-waiter`: pending 0, a FUTEX_WAIT_PRIVATE waiter: not woken.
//! - `pi-list-own`: a PI entry (bit 0), own TID, no waiter: word OWNER_DIED.
//! - `pi-list-own-waiters-plain-waiter`: a PI entry, own TID|WAITERS, a FUTEX_WAIT waiter: word WAITERS|OWNER_DIED, not woken.
//! - `pi-pending-0-plain-waiter`: a PI entry pending, 0, a FUTEX_WAIT waiter: word 0, not woken.
//! - `pi-lock-pi-waiter-handover`: a PI lock on the list taken with LOCK_PI, a waiter blocked in LOCK_PI: it returns 0 owning the word, exactly its TID|WAITERS|OWNER_DIED.
//! - `walk-several-entries`: three entries (own, another TID, own|WAITERS with a waiter): OWNER_DIED, unchanged, WAITERS|OWNER_DIED, one wake.
//! - `walk-limit-2048`: 2050 entries with the own TID: the first 2048 (ROBUST_LIST_LIMIT) get OWNER_DIED, the last two keep the TID.
//! - `walk-circular-terminates`: an entry whose next is itself (own TID) and a pending one (own TID): the exit ends, both get OWNER_DIED.
//! - `walk-misaligned-stops`: entries own, misaligned word, own, and a pending own: the first gets OWNER_DIED; the walk stops at the misaligned one, the rest and the pending keep the TID.
//! - `walk-fault-stops`: entries own, then one in a PROT_NONE page, and a pending own: the first gets OWNER_DIED; the walk stops at the fault and the pending keeps the TID.
//! - `walk-readonly-stops`: entries own, then own in a read-only page, and a pending own: the first gets OWNER_DIED; the walk gives up at the unwritable word and the pending keeps the TID.

use guest_tests::cases::{self, scaled, Case, Ctx};
use guest_tests::expect::Expect;
use guest_tests::hash::{self, done, ensure, ensure_res, fail, Check, Res, Worker};
use guest_tests::ktap::Outcome;
use guest_tests::mapping::Mapping;
use guest_tests::ops::{addr, ensure_word, op, Waiters, ALL, OWNER_DIED, SC_FUTEX, WAITERS};
use guest_tests::sys::{self, futex};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

// ---- the robust list in memory --------------------------------------------

/// `struct robust_list_head` on a 64-bit kernel (x86-64 and arm64 alike:
/// LP64, 8-byte pointers and `long`): `list.next` at 0, `futex_offset` at
/// 8, `list_op_pending` at 16.
const HEAD_LEN: usize = 24;
/// The gate the owner waits on before it exits (a u32 after the head).
const GATE: usize = 32;
/// Where the owner publishes its TID once its list is registered.
const READY: usize = 36;
/// The first lock: `{ next: u64, word: u32, pad: u32 }`, 16 bytes each.
const LOCK0: usize = 64;
const LOCK_LEN: usize = 16;
/// `futex_offset`: the word, from a lock's `next`.
const FUTEX_OFFSET: u64 = 8;
/// `FUTEX_ROBUST_MOD_PI`: bit 0 of an entry pointer marks a PI futex.
const MOD_PI: u64 = 1;
/// `ROBUST_LIST_LIMIT` (`include/uapi/linux/futex.h`).
const ROBUST_LIST_LIMIT: usize = 2048;

/// One mapping holding a robust list head, the owner's gate and `locks`
/// locks; private (a thread owner) or `MAP_SHARED` (a forked owner).
/// Leaked: waiter threads may outlive the case body.
#[derive(Clone, Copy)]
struct Area {
    map: &'static Mapping,
}

impl Area {
    fn new(locks: usize, shared: bool) -> Result<Area, Outcome> {
        let len = (LOCK0 + locks * LOCK_LEN).next_multiple_of(4096);
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let map = Mapping::anon(len, rw, shared).map_err(|e| fail(format!("mmap: {e}")))?;
        Ok(Area { map: map.leak() })
    }

    fn at(&self, off: usize) -> u64 {
        self.map.addr() as u64 + off as u64
    }

    fn head(&self) -> u64 {
        self.at(0)
    }

    /// Lock `i`'s address (its `next` field): an entry of the list.
    fn lock(&self, i: usize) -> u64 {
        self.at(LOCK0 + i * LOCK_LEN)
    }

    /// Lock `i`'s futex word.
    fn word(&self, i: usize) -> &'static AtomicU32 {
        self.map.word(LOCK0 + i * LOCK_LEN + FUTEX_OFFSET as usize)
    }

    fn gate(&self) -> &'static AtomicU32 {
        self.map.word(GATE)
    }

    fn ready(&self) -> &'static AtomicU32 {
        self.map.word(READY)
    }

    /// Writes a pointer-sized field at address `at` (which may be
    /// misaligned: the walk reads it with `get_user`).
    fn put(&self, at: u64, v: u64) {
        let end = self.map.addr() as u64 + self.map.len() as u64;
        assert!(
            at >= self.head() && at + 8 <= end,
            "a field outside the area"
        );
        // SAFETY: inside the live, writable, leaked mapping (checked above).
        unsafe { (at as *mut u64).write_unaligned(v) };
    }

    /// Links `entries` (addresses, with their mod bits) into a list from
    /// the head and back to it, and sets `futex_offset` and
    /// `list_op_pending` (0: none).
    fn link(&self, entries: &[u64], pending: u64) {
        let head = self.head();
        let mut prev = head;
        for &e in entries {
            self.put(prev & !MOD_PI, e);
            prev = e;
        }
        self.put(prev & !MOD_PI, head);
        self.put(head + 8, FUTEX_OFFSET);
        self.put(head + 16, pending);
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

fn set_robust_list(head: u64) -> Res {
    // SAFETY: the kernel only records the pointer (read at exit).
    unsafe {
        sys::syscall6(
            libc::SYS_set_robust_list,
            [head, HEAD_LEN as u64, 0, 0, 0, 0],
        )
    }
}

// ---- the owner that exits -------------------------------------------------

/// How the owner of the robust list exits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Exit {
    /// A thread of this process returns (`exit`), private memory.
    Thread,
    /// A forked child `_exit`s (`exit_group`), a `MAP_SHARED` page.
    Fork,
    /// A forked child execs (this binary's `--list`, output to
    /// `/dev/null`): exec walks the list as exit does, and the new image
    /// registers a list of its own that does not hold the lock.
    Exec,
}

enum Running {
    Thread(Worker<Res>),
    Child(i32),
}

/// A started owner: its list registered, its TID known, waiting at the
/// gate.
struct Owner {
    run: Running,
    tid: u32,
    area: Area,
}

/// The owner's body (raw syscalls only: it may be a fork child): register
/// the list, publish the TID, wait for the gate, return.
fn own_and_wait(area: Area, before: impl FnOnce() -> Res) -> Res {
    let r = set_robust_list(area.head()).and_then(|_| before());
    area.ready().store(gettid(), Ordering::SeqCst);
    let gate = area.gate();
    while gate.load(Ordering::SeqCst) == 0 {
        let _ = futex(addr(gate), op::WAIT, 0, 0, 0, 0);
    }
    r
}

impl Owner {
    /// Starts the owner; `before` runs right after `set_robust_list` (a
    /// LOCK_PI, say).
    fn start(exit: Exit, area: Area, before: fn(Area) -> Res) -> Result<Owner, Outcome> {
        let run = match exit {
            Exit::Thread => {
                Running::Thread(Worker::spawn(move || own_and_wait(area, || before(area)))?)
            }
            Exit::Fork => Running::Child(hash::fork_run(move || {
                hash::res_to_code(own_and_wait(area, || before(area)))
            })?),
            Exit::Exec => {
                // Everything the child needs, before the fork: it may
                // only make raw syscalls.
                let exe = c"/proc/self/exe";
                let null = c"/dev/null";
                let argv = [
                    c"futex-robust".as_ptr(),
                    c"--list".as_ptr(),
                    std::ptr::null(),
                ];
                let envp = [std::ptr::null::<libc::c_char>()];
                Running::Child(hash::fork_run(move || {
                    let r = own_and_wait(area, || before(area));
                    if r.is_err() {
                        return hash::res_to_code(r);
                    }
                    // SAFETY: raw syscalls on live C strings and arrays;
                    // execve returns only when it failed.
                    unsafe {
                        let fd = libc::open(null.as_ptr(), libc::O_WRONLY);
                        if fd >= 0 {
                            libc::dup2(fd, 1);
                            libc::dup2(fd, 2);
                        }
                        libc::execve(exe.as_ptr(), argv.as_ptr(), envp.as_ptr());
                    }
                    EXEC_FAILED
                })?)
            }
        };
        let until = Instant::now() + scaled(Duration::from_secs(10));
        let tid = loop {
            let t = area.ready().load(Ordering::SeqCst);
            if t != 0 {
                break t;
            }
            if Instant::now() > until {
                return Err(fail("the owner never registered its robust list"));
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        Ok(Owner { run, tid, area })
    }

    /// Opens the gate and waits until the owner is gone: a joined thread
    /// (glibc waits for the kernel's CLONE_CHILD_CLEARTID wake, which
    /// `exit_mm_release()` does after `futex_exit_release()`) or a reaped
    /// child. The robust list has been walked when this returns.
    fn exit(self) -> Check {
        let gate = self.area.gate();
        gate.store(1, Ordering::SeqCst);
        // 0 or 1: the owner may not be asleep at the gate yet (it then
        // sees the gate open).
        let r = futex(addr(gate), op::WAKE, ALL, 0, 0, 0);
        ensure(matches!(r, Ok(0 | 1)), || {
            format!("FUTEX_WAKE of the owner's gate: {}", hash::show(&r))
        })?;
        let limit = scaled(Duration::from_secs(10));
        let r = match self.run {
            Running::Thread(w) => w.join(limit)?,
            Running::Child(pid) => match hash::wait_child(pid, limit)? {
                0 => Ok(0),
                EXEC_FAILED => return Err(fail("the owner child's execve failed")),
                code => return Err(fail(format!("the owner child exited {code}"))),
            },
        };
        ensure_res("the owner's set_robust_list (and its first step)", r, Ok(0))
    }
}

/// The exit code of an owner child whose execve failed.
const EXEC_FAILED: i32 = 127;

fn nothing(_: Area) -> Res {
    Ok(0)
}

// ---- the rows -------------------------------------------------------------

/// The futex word's state when the owner exits.
#[derive(Clone, Copy)]
enum State {
    Zero,
    Own,
    Other,
    OwnWaiters,
    OtherWaiters,
    OwnDied,
    Died,
    DiedWaiters,
}

impl State {
    fn value(self, own: u32, other: u32) -> u32 {
        match self {
            State::Zero => 0,
            State::Own => own,
            State::Other => other,
            State::OwnWaiters => own | WAITERS,
            State::OtherWaiters => other | WAITERS,
            State::OwnDied => own | OWNER_DIED,
            State::Died => OWNER_DIED,
            State::DiedWaiters => OWNER_DIED | WAITERS,
        }
    }
}

/// Where the lock is: on the list, in `list_op_pending`, or both.
#[derive(Clone, Copy)]
enum At {
    List,
    Pending,
    Both,
}

/// The word after the exit.
#[derive(Clone, Copy)]
enum After {
    /// As it was.
    Kept,
    /// Exactly FUTEX_OWNER_DIED.
    Died,
    /// Exactly FUTEX_WAITERS | FUTEX_OWNER_DIED.
    DiedWaiters,
}

impl After {
    fn value(self, before: u32) -> u32 {
        match self {
            After::Kept => before,
            After::Died => OWNER_DIED,
            After::DiedWaiters => WAITERS | OWNER_DIED,
        }
    }
}

/// One owner's death: who exits, where the lock is, whether its entry is
/// marked PI, the word's state, the waiters (how many, with
/// FUTEX_PRIVATE_FLAG or not), how many the exit wakes, the word after.
#[derive(Clone, Copy)]
struct Death {
    exit: Exit,
    at: At,
    pi: bool,
    state: State,
    waiters: usize,
    private: bool,
    woken: usize,
    /// `woken` counts the pending-op wake of a word another task owns
    /// without FUTEX_WAITERS (state B of `handle_futex_death()`'s comment):
    /// 7.3.4 wakes, 7.0.13 and older do not (`--expect
    /// robust_pending_owned`).
    state_b: bool,
    after: After,
}

const fn death(exit: Exit, at: At, state: State, woken: usize, after: After) -> Death {
    Death {
        exit,
        at,
        pi: false,
        state,
        waiters: 1,
        private: false,
        woken,
        state_b: false,
        after,
    }
}

const fn thread(at: At, state: State, woken: usize, after: After) -> Death {
    death(Exit::Thread, at, state, woken, after)
}

const fn fork(at: At, state: State, woken: usize, after: After) -> Death {
    death(Exit::Fork, at, state, woken, after)
}

const fn exec(at: At, state: State, woken: usize, after: After) -> Death {
    death(Exit::Exec, at, state, woken, after)
}

impl Death {
    const fn waiters(self, n: usize) -> Death {
        Death { waiters: n, ..self }
    }

    const fn private_waiter(self) -> Death {
        Death {
            private: true,
            ..self
        }
    }

    const fn pi(self) -> Death {
        Death { pi: true, ..self }
    }

    const fn state_b(self) -> Death {
        Death {
            state_b: true,
            ..self
        }
    }
}

/// A case body: one owner's death, or a function of its own.
enum Body {
    Dies(Death),
    Alone(fn(&Ctx) -> Check),
}
use After::{Died, DiedWaiters, Kept};
use At::{Both, List, Pending};
use Body::{Alone, Dies};
use State::{Other, OtherWaiters, Own, OwnDied, OwnWaiters, Zero};

/// Every case, in order.
#[rustfmt::skip] // one row a line
const CASES: &[(&str, Body)] = &[
    ("thread-list-0", Dies(thread(List, Zero, 0, Kept))),
    ("thread-list-own", Dies(thread(List, Own, 0, Died))),
    ("thread-list-other", Dies(thread(List, Other, 0, Kept))),
    ("thread-list-own-waiters", Dies(thread(List, OwnWaiters, 1, DiedWaiters))),
    ("thread-list-other-waiters", Dies(thread(List, OtherWaiters, 0, Kept))),
    ("thread-list-own-died", Dies(thread(List, OwnDied, 0, Died))),
    ("thread-list-died", Dies(thread(List, State::Died, 0, Kept))),
    ("thread-pending-0", Dies(thread(Pending, Zero, 1, Kept))),
    ("thread-pending-own", Dies(thread(Pending, Own, 0, Died))),
    ("thread-pending-other", Dies(thread(Pending, Other, 1, Kept).state_b())),
    ("thread-pending-own-waiters", Dies(thread(Pending, OwnWaiters, 1, DiedWaiters))),
    ("thread-pending-other-waiters", Dies(thread(Pending, OtherWaiters, 0, Kept))),
    ("thread-pending-own-died", Dies(thread(Pending, OwnDied, 0, Died))),
    ("thread-pending-died", Dies(thread(Pending, State::Died, 1, Kept))),
    ("thread-list-died-waiters", Dies(thread(List, State::DiedWaiters, 0, Kept))),
    ("thread-pending-died-waiters", Dies(thread(Pending, State::DiedWaiters, 1, Kept))),
    ("fork-list-0", Dies(fork(List, Zero, 0, Kept))),
    ("fork-list-own", Dies(fork(List, Own, 0, Died))),
    ("fork-list-other", Dies(fork(List, Other, 0, Kept))),
    ("fork-list-own-waiters", Dies(fork(List, OwnWaiters, 1, DiedWaiters))),
    ("fork-list-other-waiters", Dies(fork(List, OtherWaiters, 0, Kept))),
    ("fork-list-own-died", Dies(fork(List, OwnDied, 0, Died))),
    ("fork-pending-0", Dies(fork(Pending, Zero, 1, Kept))),
    ("fork-pending-own", Dies(fork(Pending, Own, 0, Died))),
    ("fork-pending-other", Dies(fork(Pending, Other, 1, Kept).state_b())),
    ("fork-pending-own-waiters", Dies(fork(Pending, OwnWaiters, 1, DiedWaiters))),
    ("fork-pending-other-waiters", Dies(fork(Pending, OtherWaiters, 0, Kept))),
    ("fork-pending-own-died", Dies(fork(Pending, OwnDied, 0, Died))),
    ("fork-list-died", Dies(fork(List, State::Died, 0, Kept))),
    ("fork-pending-died", Dies(fork(Pending, State::Died, 1, Kept))),
    ("fork-pending-died-waiters", Dies(fork(Pending, State::DiedWaiters, 1, Kept))),
    ("exec-list-own-waiters", Dies(exec(List, OwnWaiters, 1, DiedWaiters))),
    ("exec-pending-0", Dies(exec(Pending, Zero, 1, Kept))),
    ("thread-both-other", Dies(thread(Both, Other, 1, Kept).state_b())),
    ("thread-both-own-waiters", Dies(thread(Both, OwnWaiters, 1, DiedWaiters).waiters(2))),
    ("thread-list-own-waiters-private-waiter", Dies(thread(List, OwnWaiters, 0, DiedWaiters).private_waiter())),
    ("thread-pending-0-private-waiter", Dies(thread(Pending, Zero, 0, Kept).private_waiter())),
    ("pi-list-own", Dies(thread(List, Own, 0, Died).pi().waiters(0))),
    ("pi-list-own-waiters-plain-waiter", Dies(thread(List, OwnWaiters, 0, DiedWaiters).pi())),
    ("pi-pending-0-plain-waiter", Dies(thread(Pending, Zero, 0, Kept).pi())),
    ("pi-lock-pi-waiter-handover", Alone(lock_pi_handover)),
    ("walk-several-entries", Alone(several_entries)),
    ("walk-limit-2048", Alone(limit_2048)),
    ("walk-circular-terminates", Alone(circular)),
    ("walk-misaligned-stops", Alone(misaligned_stops)),
    ("walk-fault-stops", Alone(fault_stops)),
    ("walk-readonly-stops", Alone(readonly_stops)),
];

fn run(ctx: &Ctx) -> Outcome {
    let Some((_, body)) = CASES.iter().find(|r| r.0 == ctx.case) else {
        return fail(format!("no row for case {}", ctx.case));
    };
    done(match body {
        Dies(d) => dies(d, &ctx.expect),
        Alone(f) => f(ctx),
    })
}

/// Checks the waiters right after the exit: exactly the first `woken`
/// (the kernel wakes in queue order) returned 0; the others are still
/// queued, proven by a FUTEX_WAKE that finds exactly them. `flags`: the
/// waiters' FUTEX_PRIVATE_FLAG or 0.
fn after_exit(ws: &mut Waiters, ids: &[usize], woken: usize, w: &AtomicU32, flags: u32) -> Check {
    if woken > 0 {
        ws.woke("the owner's exit", &ids[..woken])?;
    } else {
        // A wrong wake would show here or, at the latest, in the count
        // below (a woken waiter is off the queue before the exit ends).
        std::thread::sleep(scaled(Duration::from_millis(50)));
        let awake = ws.awake();
        ensure(awake.is_empty(), || {
            format!("the owner's exit woke waiters {awake:?}; expected none")
        })?;
    }
    let rest = &ids[woken..];
    let r = futex(addr(w), op::WAKE | flags, ALL, 0, 0, 0);
    ensure_res(
        "the release of the waiters the exit did not wake",
        r,
        Ok(rest.len() as i64),
    )?;
    ws.woke("the release", rest)
}

fn dies(d: &Death, e: &Expect) -> Check {
    let woken = if d.state_b && !e.robust_pending_owned {
        0
    } else {
        d.woken
    };
    let area = Area::new(1, d.exit != Exit::Thread)?;
    let entry = area.lock(0) | if d.pi { MOD_PI } else { 0 };
    match d.at {
        At::List => area.link(&[entry], 0),
        At::Pending => area.link(&[], entry),
        At::Both => area.link(&[entry], entry),
    }
    let owner = Owner::start(d.exit, area, nothing)?;
    let before = d.state.value(owner.tid, gettid());
    let w = area.word(0);
    w.store(before, Ordering::SeqCst);
    let flags = if d.private { op::PRIVATE } else { 0 };
    let wa = addr(w);
    let mut ws = Waiters::new();
    let ids = ws.add_n(d.waiters, SC_FUTEX, move || {
        futex(wa, op::WAIT | flags, before as u64, 0, 0, 0)
    })?;
    owner.exit()?;
    // The word first: the release below does not change it.
    ensure_word("the word after the owner's exit", w, d.after.value(before))?;
    after_exit(&mut ws, &ids, woken, w, flags)?;
    ws.join()
}

// ---- cases of their own ---------------------------------------------------

fn lock_pi(area: Area) -> Res {
    futex(addr(area.word(0)), op::LOCK_PI | op::PRIVATE, 0, 0, 0, 0)
}

/// A PI lock on the list (bit 0), taken by the owner with LOCK_PI; a
/// waiter blocked in LOCK_PI. At the exit the walk stores
/// WAITERS|OWNER_DIED and wakes nobody (a PI futex's waiters are handed
/// over by `exit_pi_state_list()`), then the handover: the waiter returns
/// 0 and `fixup_pi_state_owner()` writes its TID|WAITERS|OWNER_DIED (the
/// pi_state had no owner).
fn lock_pi_handover(_: &Ctx) -> Check {
    let area = Area::new(1, false)?;
    area.link(&[area.lock(0) | MOD_PI], 0);
    let owner = Owner::start(Exit::Thread, area, lock_pi)?;
    let w = area.word(0);
    ensure_word("the PI lock, held", w, owner.tid)?;
    let wa = addr(w);
    let mut ws = Waiters::new();
    let id = ws.add(SC_FUTEX, move || {
        futex(wa, op::LOCK_PI | op::PRIVATE, 0, 0, 0, 0)
    })?;
    ensure_word("the PI lock, contended", w, owner.tid | WAITERS)?;
    owner.exit()?;
    ws.woke("the owner's exit (exit_pi_state_list)", &[id])?;
    let wtid = ws.tid(id) as u32;
    ensure_word("the PI lock, handed over", w, wtid | WAITERS | OWNER_DIED)?;
    ws.join()
}

/// Three entries: own TID, another TID, own TID|WAITERS with a waiter.
fn several_entries(_: &Ctx) -> Check {
    let area = Area::new(3, false)?;
    area.link(&[area.lock(0), area.lock(1), area.lock(2)], 0);
    let owner = Owner::start(Exit::Thread, area, nothing)?;
    let (own, other) = (owner.tid, gettid());
    area.word(0).store(own, Ordering::SeqCst);
    area.word(1).store(other, Ordering::SeqCst);
    let w = area.word(2);
    w.store(own | WAITERS, Ordering::SeqCst);
    let wa = addr(w);
    let mut ws = Waiters::new();
    let id = ws.add(SC_FUTEX, move || {
        futex(wa, op::WAIT, (own | WAITERS) as u64, 0, 0, 0)
    })?;
    owner.exit()?;
    ensure_word("entry 1 (own TID)", area.word(0), OWNER_DIED)?;
    ensure_word("entry 2 (another TID)", area.word(1), other)?;
    ensure_word("entry 3 (own TID|WAITERS)", w, WAITERS | OWNER_DIED)?;
    after_exit(&mut ws, &[id], 1, w, 0)?;
    ws.join()
}

/// ROBUST_LIST_LIMIT + 2 entries, each with the owner's TID.
fn limit_2048(_: &Ctx) -> Check {
    let n = ROBUST_LIST_LIMIT + 2;
    let area = Area::new(n, false)?;
    let entries: Vec<u64> = (0..n).map(|i| area.lock(i)).collect();
    area.link(&entries, 0);
    let owner = Owner::start(Exit::Thread, area, nothing)?;
    let own = owner.tid;
    for i in 0..n {
        area.word(i).store(own, Ordering::SeqCst);
    }
    owner.exit()?;
    let words: Vec<u32> = (0..n)
        .map(|i| area.word(i).load(Ordering::SeqCst))
        .collect();
    let died = words.iter().take_while(|&&v| v == OWNER_DIED).count();
    ensure(
        died == ROBUST_LIST_LIMIT && words[died..].iter().all(|&v| v == own),
        || {
            format!(
                "{died} entries OWNER_DIED, then {:#x?} (own TID {own:#x}); expected {ROBUST_LIST_LIMIT}, then 2 x the TID",
                &words[died..(died + 4).min(n)]
            )
        },
    )
}

/// An entry whose `next` is itself: the walk takes it ROBUST_LIST_LIMIT
/// times, then stops and handles the pending entry.
fn circular(_: &Ctx) -> Check {
    let area = Area::new(2, false)?;
    area.link(&[], area.lock(1));
    area.put(area.head(), area.lock(0));
    area.put(area.lock(0), area.lock(0));
    let owner = Owner::start(Exit::Thread, area, nothing)?;
    area.word(0).store(owner.tid, Ordering::SeqCst);
    area.word(1).store(owner.tid, Ordering::SeqCst);
    owner.exit()?;
    ensure_word("the circular entry", area.word(0), OWNER_DIED)?;
    ensure_word("the pending entry", area.word(1), OWNER_DIED)
}

/// Entries own, misaligned, own; pending own. `handle_futex_death()`
/// refuses a word that is not 4-byte aligned with -1, and the walk returns
/// at once: neither the rest of the list nor the pending entry is handled.
fn misaligned_stops(_: &Ctx) -> Check {
    let area = Area::new(4, false)?;
    // Lock 1's entry two bytes in: its word (entry + 8) is misaligned.
    let odd = area.lock(1) + 2;
    area.link(&[area.lock(0), odd, area.lock(2)], area.lock(3));
    let owner = Owner::start(Exit::Thread, area, nothing)?;
    let own = owner.tid;
    for i in [0, 2, 3] {
        area.word(i).store(own, Ordering::SeqCst);
    }
    owner.exit()?;
    ensure_word("entry 1", area.word(0), OWNER_DIED)?;
    ensure_word("entry 3, after the misaligned one", area.word(2), own)?;
    ensure_word("the pending entry", area.word(3), own)
}

/// Entries own, then one in a PROT_NONE page; pending own. The walk
/// handles the first, cannot read the second (`next` nor word) and
/// returns: the pending entry is not handled.
fn fault_stops(_: &Ctx) -> Check {
    let area = Area::new(2, false)?;
    let none = Mapping::anon(4096, libc::PROT_NONE, false)
        .map_err(|e| fail(format!("mmap(PROT_NONE): {e}")))?
        .leak();
    area.link(&[area.lock(0)], area.lock(1));
    area.put(area.lock(0), none.addr() as u64);
    let owner = Owner::start(Exit::Thread, area, nothing)?;
    let own = owner.tid;
    area.word(0).store(own, Ordering::SeqCst);
    area.word(1).store(own, Ordering::SeqCst);
    owner.exit()?;
    ensure_word("entry 1", area.word(0), OWNER_DIED)?;
    ensure_word("the pending entry", area.word(1), own)
}

/// Entries own, then own in a read-only page; pending own. The walk
/// marks the first; the second's cmpxchg faults and
/// `fault_in_user_writeable()` fails, so `handle_futex_death()` gives up
/// with -1 and the walk returns: the pending entry keeps the TID.
fn readonly_stops(_: &Ctx) -> Check {
    let area = Area::new(2, false)?;
    let ro = Area::new(1, false)?;
    area.link(&[area.lock(0)], area.lock(1));
    area.put(area.lock(0), ro.lock(0));
    ro.put(ro.lock(0), area.head());
    let owner = Owner::start(Exit::Thread, area, nothing)?;
    let own = owner.tid;
    for w in [area.word(0), area.word(1), ro.word(0)] {
        w.store(own, Ordering::SeqCst);
    }
    ro.map
        .protect(0, ro.map.len(), libc::PROT_READ)
        .map_err(|e| fail(format!("mprotect(PROT_READ): {e}")))?;
    owner.exit()?;
    ensure_word("entry 1", area.word(0), OWNER_DIED)?;
    ensure_word("entry 2, read-only", ro.word(0), own)?;
    ensure_word("the pending entry", area.word(1), own)
}

/// The first line of `--help`.
const ABOUT: &str =
    "The robust list at exit: each futex-word state on the list and pending, threads and processes, PI, the walk's limits (docs/futex-abi.md section 8).";

fn main() {
    let cases: Vec<Case> = CASES.iter().map(|r| Case::new(r.0, run)).collect();
    cases::main(ABOUT, &cases);
}
