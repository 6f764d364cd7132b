//! Helpers of the classic futex operation tests (`futex-ops`, `futex-wake`,
//! `futex-requeue`, `futex-pi`; `docs/futex-abi.md` section 8): the op
//! numbers (the raw calls are in `sys`), waiter threads that record which of them returned what, pages with chosen
//! protections, the kernel's queue order as a model, and the named
//! wrong-kernel models the mutation check of `tests/host_kernel.rs` turns
//! on (clocks and deadlines live in `clock`, re-exported here).
//!
//! A waiter counts as asleep only while `/proc` shows it in state `S`
//! inside its syscall; a task the kernel woke is `R` (or gone) before the
//! waking syscall returns, so "which waiters woke" is read right after the
//! wake, with no guessing delay.

use crate::hash::{self, ensure, fail, Check, Res, Worker};
use crate::ktap::Outcome;
use crate::mapping::Mapping;
use crate::sys::{self, futex, Errno};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// The futex(2) ABI numbers live with the raw syscalls.
pub use crate::sys::futex_op as op;
pub use crate::sys::{OWNER_DIED, TID_MASK, WAITERS};

/// `INT_MAX`, the "everybody" count.
pub const ALL: u64 = i32::MAX as u64;
/// An address above user space (`access_ok` fails: EFAULT).
pub const KERNEL_ADDR: u64 = 0xffff_8000_0000_0000;

/// An errno as a syscall result.
pub const fn err(e: i32) -> Res {
    Err(Errno(e))
}

/// `FUTEX2_SIZE_U32 | FUTEX2_PRIVATE`: the flags of a private futex2 word.
pub const U32P: u32 = sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE;
/// `FUTEX_BITSET_MATCH_ANY` as a syscall argument.
pub const ANY: u64 = sys::FUTEX_BITSET_MATCH_ANY;
/// `FUTEX_BITSET_MATCH_ANY` as a waiter's bitset in [`Queue`].
pub const ANY32: u32 = u32::MAX;
/// The syscall a `futex(2)` waiter sleeps in.
pub const SC_FUTEX: i64 = libc::SYS_futex;
/// The syscall a futex2 `futex_wait` waiter sleeps in.
pub const SC_WAIT2: i64 = sys::nr::FUTEX_WAIT;
/// The syscall a `futex_waitv` waiter sleeps in.
pub const SC_WAITV: i64 = sys::nr::FUTEX_WAITV;
/// `EAGAIN` (`EWOULDBLOCK`) as a syscall result.
pub const EAGAIN: Res = err(libc::EAGAIN);
/// `EFAULT` as a syscall result.
pub const EFAULT: Res = err(libc::EFAULT);
/// `ENOSYS` as a syscall result.
pub const ENOSYS: Res = err(libc::ENOSYS);
/// `ETIMEDOUT` as a syscall result.
pub const ETIMEDOUT: Res = err(libc::ETIMEDOUT);
/// `EINTR` as a syscall result.
pub const EINTR: Res = err(libc::EINTR);
/// `EPERM` as a syscall result.
pub const EPERM: Res = err(libc::EPERM);
/// `EDEADLK` as a syscall result.
pub const EDEADLK: Res = err(libc::EDEADLK);
/// `ESRCH` as a syscall result.
pub const ESRCH: Res = err(libc::ESRCH);

/// Checks a futex word's exact value.
pub fn ensure_word(what: &str, w: &AtomicU32, want: u32) -> Check {
    let got = w.load(Ordering::SeqCst);
    ensure(got == want, || {
        format!("{what}: the word is {got:#x}, expected {want:#x}")
    })
}

/// A leaked futex word: waiter threads may outlive any borrow.
pub fn word(v: u32) -> &'static AtomicU32 {
    Box::leak(Box::new(AtomicU32::new(v)))
}

/// The address of a futex word.
pub fn addr(w: &AtomicU32) -> u64 {
    w.as_ptr() as u64
}

/// `FUTEX_WAIT_PRIVATE` without a timeout.
pub fn wait_private(w: &AtomicU32, val: u32) -> Res {
    futex(addr(w), op::WAIT | op::PRIVATE, val as u64, 0, 0, 0)
}

/// `FUTEX_WAKE_PRIVATE` of up to `nr` waiters.
pub fn wake_private(w: &AtomicU32, nr: u64) -> Res {
    futex(addr(w), op::WAKE | op::PRIVATE, nr, 0, 0, 0)
}

/// Flag words futex2 refuses (`futex_flags_valid()`, `FUTEX2_VALID_MASK`):
/// undefined bits, and every size but U32.
pub const FUTEX2_BAD_FLAGS: &[(&str, u64)] = &[
    (
        "U32|PRIVATE|0x10",
        ((sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE) | 0x10) as u64,
    ),
    (
        "U32|PRIVATE|0x20",
        ((sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE) | 0x20) as u64,
    ),
    (
        "U32|PRIVATE|0x40",
        ((sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE) | 0x40) as u64,
    ),
    (
        "U32|PRIVATE|0x100",
        ((sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE) | 0x100) as u64,
    ),
    (
        "U32|PRIVATE|1<<31",
        ((sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE) | 1 << 31) as u64,
    ),
    ("U8|PRIVATE", sys::FUTEX2_PRIVATE as u64),
    ("U8 (flags 0)", 0),
    ("U16|PRIVATE", (sys::FUTEX2_PRIVATE | 1) as u64),
    ("U64|PRIVATE", (sys::FUTEX2_PRIVATE | 3) as u64),
];

// ------------------------------------------------------------------ clocks

// Moved to `clock` (with the deadline window); kept here for the binaries.
pub use crate::clock::{
    ensure_expired, ensure_waited, now, plus, span, timed, ts, uptime, TIMEOUT,
};

// ------------------------------------------------------------------- pages

/// One anonymous page with a chosen protection. Never unmapped: waiter
/// threads may hold its words until the case's process exits.
pub struct Page {
    map: &'static Mapping,
}

impl Page {
    /// Maps a zeroed page, private or shared, with `prot`.
    pub fn new(prot: i32, shared: bool) -> Result<Page, Outcome> {
        let map = Mapping::anon(4096, prot, shared).map_err(|e| fail(format!("mmap: {e}")))?;
        Ok(Page { map: map.leak() })
    }

    /// The address of byte `off`.
    pub fn at(&self, off: usize) -> u64 {
        self.map.addr() as u64 + off as u64
    }

    /// The `i`-th u32 (the page must be readable to use it).
    pub fn word(&self, i: usize) -> &'static AtomicU32 {
        self.map.word(4 * i)
    }

    /// `mprotect` of the page.
    pub fn protect(&self, prot: i32) -> Check {
        self.map
            .protect(0, 4096, prot)
            .map_err(|e| fail(format!("mprotect: {e}")))
    }
}

// ----------------------------------------------------------------- waiters

const PENDING: i64 = i64::MIN;
const SLOTS: usize = 160;

fn encode(r: Res) -> i64 {
    match r {
        Ok(v) => v,
        Err(Errno(e)) => -(e as i64),
    }
}

fn decode(v: i64) -> Option<Res> {
    match v {
        PENDING => None,
        v if v < 0 => Some(Err(Errno(-v as i32))),
        v => Some(Ok(v)),
    }
}

/// Waiter threads, numbered from 0 in the order they were added; each runs
/// one blocking call and records its result.
pub struct Waiters {
    results: Arc<Vec<AtomicI64>>,
    workers: Vec<Worker<()>>,
    tids: Vec<i32>,
    nrs: Vec<i64>,
    checked: BTreeSet<usize>,
}

impl Default for Waiters {
    fn default() -> Self {
        Self::new()
    }
}

impl Waiters {
    /// No waiters yet.
    pub fn new() -> Waiters {
        Waiters {
            results: Arc::new((0..SLOTS).map(|_| AtomicI64::new(PENDING)).collect()),
            workers: Vec::new(),
            tids: Vec::new(),
            nrs: Vec::new(),
            checked: BTreeSet::new(),
        }
    }

    /// Starts the next waiter running `call`, a call that blocks in syscall
    /// `nr`, and returns its number once it sleeps there: waiters added one
    /// after the other queue in that order.
    pub fn add(
        &mut self,
        nr: i64,
        call: impl FnOnce() -> Res + Send + 'static,
    ) -> Result<usize, Outcome> {
        let id = self.workers.len();
        if id >= SLOTS {
            return Err(fail("too many waiters"));
        }
        let results = self.results.clone();
        let w = Worker::spawn(move || results[id].store(encode(call()), Ordering::SeqCst))?;
        let tid = w.tid()?;
        self.workers.push(w);
        self.tids.push(tid);
        self.nrs.push(nr);
        self.wait_asleep(id)?;
        Ok(id)
    }

    /// Like [`Waiters::add`] for `n` waiters of the same call.
    pub fn add_n(
        &mut self,
        n: usize,
        nr: i64,
        call: impl Fn() -> Res + Send + Clone + 'static,
    ) -> Result<Vec<usize>, Outcome> {
        (0..n).map(|_| self.add(nr, call.clone())).collect()
    }

    /// The TID of waiter `id`.
    pub fn tid(&self, id: usize) -> i32 {
        self.tids[id]
    }

    /// Waits (bounded) until waiter `id` sleeps in its syscall (again).
    pub fn wait_asleep(&self, id: usize) -> Check {
        let results = &self.results;
        if let Some(r) = decode(results[id].load(Ordering::SeqCst)) {
            return Err(fail(format!(
                "waiter {id} returned {} instead of sleeping",
                hash::show(&r)
            )));
        }
        // Generous: a loaded TCG host can take seconds to schedule a
        // waiter into its syscall (measured: 5 s was once not enough for
        // LOCK_PI under a full matrix); only a real failure waits it out.
        // Polled from a helper thread while this one sleeps: the caller
        // often owns the PI lock the waiter spins on, and an owner reading
        // the waiter's /proc waits for it to leave its CPU while the
        // waiter spins for the owner to leave its own (docs/findings.md).
        hash::wait_blocked_apart(
            &[self.tids[id]],
            self.nrs[id],
            Duration::from_secs(30),
            hash::thread_state,
        )
        .map_err(|o| match decode(results[id].load(Ordering::SeqCst)) {
            Some(r) => fail(format!(
                "waiter {id} returned {} instead of sleeping",
                hash::show(&r)
            )),
            None => o,
        })
    }

    fn asleep(&self, id: usize) -> bool {
        matches!(hash::thread_state(self.tids[id]), Some(('S', n)) if n == self.nrs[id])
    }

    /// Waiters not yet checked that are no longer asleep in their syscall.
    pub fn awake(&self) -> BTreeSet<usize> {
        (0..self.workers.len())
            .filter(|id| !self.checked.contains(id) && !self.asleep(*id))
            .collect()
    }

    /// The result of waiter `id`, once it has returned.
    pub fn result(&self, id: usize) -> Option<Res> {
        decode(self.results[id].load(Ordering::SeqCst))
    }

    /// Checks, right after `what`, that exactly the waiters `ids` woke (of
    /// those not checked before), then that each returned `Ok(0)`.
    pub fn woke(&mut self, what: &str, ids: &[usize]) -> Check {
        let want: Vec<(usize, Res)> = ids.iter().map(|&i| (i, Ok(0))).collect();
        self.woke_with(what, &want)
    }

    /// Like [`Waiters::woke`] with each waiter's own expected result.
    pub fn woke_with(&mut self, what: &str, want: &[(usize, Res)]) -> Check {
        let ids: BTreeSet<usize> = want.iter().map(|(i, _)| *i).collect();
        // A woken waiter leaves state S only when its CPU runs the wakeup
        // (the kernel queues remote wakeups on the target CPU's list, and
        // an emulated vCPU may not run for a while): wait, bounded, for
        // the expected ones; one that should not have woken fails at once.
        let until = Instant::now() + crate::cases::scaled(Duration::from_secs(5));
        let awake = loop {
            let awake = self.awake();
            if awake == ids || !awake.is_subset(&ids) || Instant::now() > until {
                break awake;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        if awake != ids {
            let asleep: Vec<usize> = (0..self.workers.len())
                .filter(|i| !self.checked.contains(i) && !awake.contains(i))
                .collect();
            return Err(fail(format!(
                "{what}: expected waiters {ids:?} to wake, {awake:?} woke ({asleep:?} still asleep)"
            )));
        }
        let deadline = Instant::now() + crate::cases::scaled(Duration::from_secs(5));
        for (id, r) in want {
            let got = loop {
                if let Some(got) = self.result(*id) {
                    break got;
                }
                if Instant::now() > deadline {
                    return Err(fail(format!("{what}: waiter {id} woke but never returned")));
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            hash::ensure_res(&format!("{what}: waiter {id}"), got, *r)?;
            self.checked.insert(*id);
        }
        Ok(())
    }

    /// Joins every waiter; each must have been checked as woken.
    pub fn join(self) -> Check {
        let unchecked: Vec<usize> = (0..self.workers.len())
            .filter(|i| !self.checked.contains(i))
            .collect();
        ensure(unchecked.is_empty(), || {
            format!("waiters {unchecked:?} were never woken")
        })?;
        hash::join_all(self.workers, Duration::from_secs(5)).map(|_| ())
    }
}

/// `FUTEX_WAIT_PRIVATE` on `w` for `val`, as a [`Waiters::add`] call.
pub fn waiting_private(w: &'static AtomicU32, val: u32) -> impl Fn() -> Res + Send + Clone {
    move || wait_private(w, val)
}

// ----------------------------------------------------------------- signals

static HANDLED: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: i32) {
    HANDLED.fetch_add(1, Ordering::SeqCst);
}

/// Installs a handler for `sig` that only counts, with or without
/// `SA_RESTART`.
pub fn install_handler(sig: i32, restart: bool) -> Check {
    // SAFETY: a plain handler that only touches an atomic.
    let r = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
        libc::sigaction(sig, &sa, std::ptr::null_mut())
    };
    ensure(r == 0, || format!("sigaction({sig}) failed"))
}

/// Sends `sig` to waiter `id` and waits (bounded) until a handler of
/// [`install_handler`] ran.
pub fn interrupt(ws: &Waiters, id: usize, sig: i32) -> Check {
    let before = HANDLED.load(Ordering::SeqCst);
    // SAFETY: tgkill of a live thread of this process.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), ws.tid(id), sig) };
    let deadline = Instant::now() + crate::cases::scaled(Duration::from_secs(5));
    while HANDLED.load(Ordering::SeqCst) == before {
        if Instant::now() > deadline {
            return Err(fail(format!(
                "the handler of signal {sig} never ran in waiter {id}"
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

// ------------------------------------------------------------- the model

/// What the kernel's queue of one futex looks like to `futex_wake()`: a
/// plist ordered by priority (`min(normal_prio, MAX_RT_PRIO)`, so every
/// non-RT task is 100), FIFO within a priority; each entry has its bitset.
#[derive(Debug, Default)]
pub struct Queue {
    entries: Vec<(i32, usize, u32)>,
}

/// The queue priority of a non-RT task (`MAX_RT_PRIO`).
pub const NORMAL_PRIO: i32 = 100;

impl Queue {
    /// An empty queue.
    pub fn new() -> Queue {
        Queue::default()
    }

    /// Waiter `id` queued by a non-RT task with `bitset`.
    pub fn push(&mut self, id: usize, bitset: u32) {
        self.push_prio(id, bitset, NORMAL_PRIO);
    }

    /// Waiter `id` queued with queue priority `prio` (lower first).
    pub fn push_prio(&mut self, id: usize, bitset: u32, prio: i32) {
        let at = if mutated("wake-lifo") {
            self.entries.partition_point(|e| e.0 < prio)
        } else {
            self.entries.partition_point(|e| e.0 <= prio)
        };
        self.entries.insert(at, (prio, id, bitset));
    }

    /// A requeue onto `to`: the first `nr_wake` entries (queue order) are
    /// woken, the next `nr_requeue` move to `to` with their priority and
    /// bitset (`futex_requeue()`: `nr_wake` 0 wakes nobody here). Returns
    /// (woken, moved).
    pub fn requeue(
        &mut self,
        nr_wake: usize,
        nr_requeue: usize,
        to: &mut Queue,
    ) -> (Vec<usize>, Vec<usize>) {
        let n = nr_wake.min(self.entries.len());
        let woken: Vec<usize> = self.entries.drain(..n).map(|e| e.1).collect();
        let m = nr_requeue.min(self.entries.len());
        let moved: Vec<_> = self.entries.drain(..m).collect();
        for &(prio, id, bits) in &moved {
            to.push_prio(id, bits, prio);
        }
        (woken, moved.iter().map(|e| e.1).collect())
    }

    /// What a requeue that woke `woken` and moved `moved` returns:
    /// `woken + moved`.
    pub fn requeue_result(woken: &[usize], moved: &[usize]) -> Res {
        if mutated("requeue-returns-woken") {
            Ok(woken.len() as i64)
        } else {
            Ok((woken.len() + moved.len()) as i64)
        }
    }

    /// The waiters `futex_wake(nr, bitset)` wakes, removed from the queue:
    /// matching entries in order, stopping once `++ret >= nr` (so `nr` 0 or
    /// negative still wakes one) — except futex2's `futex_wake`
    /// (`strict`, FLAGS_STRICT), where `nr` 0 wakes nobody.
    pub fn wake(&mut self, nr: i32, bitset: u32, strict: bool) -> Vec<usize> {
        if nr == 0 && (strict || mutated("wake-nr-0-wakes-none")) {
            return Vec::new();
        }
        let any = mutated("bitset-ignored");
        let mut woken = Vec::new();
        for &(_, id, bits) in &self.entries {
            if !any && bits & bitset == 0 {
                continue;
            }
            woken.push(id);
            if !mutated("wake-ignores-nr") && woken.len() as i64 >= nr as i64 {
                break;
            }
        }
        self.entries.retain(|e| !woken.contains(&e.1));
        woken
    }

    /// Number of queued waiters.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nobody is queued.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Checks a wake's result against the model: it returned the number of
/// waiters [`Queue::wake`] picks, and exactly those woke.
pub fn ensure_wake(
    what: &str,
    got: Res,
    waiters: &mut Waiters,
    queue: &mut Queue,
    (nr, bitset, strict): (i32, u32, bool),
) -> Check {
    let woken = queue.wake(nr, bitset, strict);
    hash::ensure_res(what, got, Ok(woken.len() as i64))?;
    waiters.woke(what, &woken)
}

// --------------------------------------------------------------- mutation

/// Environment variable naming one wrong-kernel model ([`MUTATIONS`]) under
/// which the cases compute their expectations; `tests/host_kernel.rs` sets
/// it to prove the assertions see the difference.
pub const MUTATION_ENV: &str = "FUTEX_OPS_MUTATION";

/// The wrong kernels a case can be asked to expect, each a one-line slip in
/// `kernel/futex/`.
pub const MUTATIONS: &[&str] = &[
    // futex_init_timeout(): FUTEX_WAIT's timeout not added to ktime_get().
    "wait-timeout-absolute",
    // futex_wake(): no `++ret >= nr_wake` break.
    "wake-ignores-nr",
    // __futex_queue(): plist in LIFO order.
    "wake-lifo",
    // futex_wake(): FLAGS_STRICT's nr 0 check applied to futex(2) too.
    "wake-nr-0-wakes-none",
    // futex_wake(): the bitset intersection test dropped.
    "bitset-ignored",
    // futex_atomic_op_inuser(): unsigned comparisons.
    "wake-op-cmp-unsigned",
    // futex_requeue(): the cmpval test dropped.
    "cmp-requeue-no-compare",
    // futex_requeue(): returns the woken count only.
    "requeue-returns-woken",
    // futex_lock_pi_atomic(): no FUTEX_WAITERS on the first waiter.
    "pi-no-waiters-bit",
    // futex_wait_multiple(): index + 1 (one-based).
    "waitv-index-one-based",
    // futex_init_timeout() / futex_setup_timer(): an absolute deadline read
    // on the other clock (FLAGS_CLOCKRT inverted; `clock::futex_clock`).
    "wrong-clock",
];

/// Whether the case should expect the wrong kernel `name` (one of
/// [`MUTATIONS`]; any other value of [`MUTATION_ENV`] is a bug of the
/// caller and panics, so a typo cannot pass for a failing kernel).
pub fn mutated(name: &str) -> bool {
    assert!(MUTATIONS.contains(&name), "unknown mutation {name}");
    match std::env::var(MUTATION_ENV) {
        Ok(v) if v.is_empty() => false,
        Ok(v) => {
            assert!(
                MUTATIONS.contains(&v.as_str()),
                "{MUTATION_ENV}={v}: not one of {MUTATIONS:?}"
            );
            v == name
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip() {
        for r in [Ok(0), Ok(7), err(libc::EINVAL), err(libc::EAGAIN)] {
            assert_eq!(decode(encode(r)), Some(r));
        }
        assert_eq!(decode(PENDING), None);
    }

    #[test]
    fn the_queue_model_is_futex_wake() {
        let mut q = Queue::new();
        for id in 0..4 {
            q.push(id, if id == 1 { 0b10 } else { 0b01 });
        }
        // FIFO, `++ret >= nr`: nr 0 and -1 still wake one (futex(2)).
        assert_eq!(q.wake(0, u32::MAX, false), vec![0]);
        assert_eq!(q.wake(-1, u32::MAX, false), vec![1]);
        // futex2's FLAGS_STRICT: nr 0 wakes nobody.
        assert_eq!(q.wake(0, u32::MAX, true), Vec::<usize>::new());
        // A bitset skips non-matching waiters without counting them.
        q.push(4, 0b10);
        assert_eq!(q.wake(1, 0b10, false), vec![4]);
        assert_eq!(q.wake(i32::MAX, 0b01, false), vec![2, 3]);
        assert!(q.is_empty());
        // RT priorities (lower first) before MAX_RT_PRIO, FIFO within one.
        for (id, prio) in [(0, NORMAL_PRIO), (1, 89), (2, 79), (3, NORMAL_PRIO)] {
            q.push_prio(id, u32::MAX, prio);
        }
        assert_eq!(q.wake(i32::MAX, u32::MAX, false), vec![2, 1, 0, 3]);
    }

    #[test]
    fn the_queue_model_is_futex_requeue() {
        let (mut a, mut b) = (Queue::new(), Queue::new());
        for id in 0..5 {
            a.push(id, u32::MAX);
        }
        let (woken, moved) = a.requeue(1, 2, &mut b);
        assert_eq!((woken.clone(), moved.clone()), (vec![0], vec![1, 2]));
        assert_eq!(Queue::requeue_result(&woken, &moved), Ok(3));
        assert_eq!(a.requeue(0, 0, &mut b), (vec![], vec![]));
        assert_eq!((a.len(), b.len()), (2, 2));
        assert_eq!(b.wake(i32::MAX, u32::MAX, false), vec![1, 2]);
    }
}
