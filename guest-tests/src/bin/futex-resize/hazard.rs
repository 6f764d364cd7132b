//! `futex-resize`'s hash-install hazard (`docs/futex-abi.md` section 2,
//! "Known kernel bugs"): installing the first private table moves nobody
//! (`__futex_pivot_hash()` rehashes only an old private table), so a private
//! waiter queued in the global hash before it is missed by every later
//! private wake. Whether such a waiter can exist depends on who allocates
//! first: `copy_process()` allocates for the clones `growth` names, and
//! 7.3.4's `io_futex_prep_private()` allocates before an io_uring private
//! wait is queued.

use guest_tests::cases::{diag, Ctx};
use guest_tests::expect::{Expect, Growth};
use guest_tests::hash::{
    self, done, ensure, ensure_res, fail, legacy, priv32, skip, want_get, want_set, Check, Parked,
    Res,
};
use guest_tests::ktap::Outcome;
use guest_tests::sys::{self, io_uring, Errno};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The clone(CLONE_VM) child's FUTEX_WAIT timeout (scaled): a guard only.
/// The test wakes the child, or kills it once both wakes missed it; a
/// fixed 10 s ran out under a loaded host (the debug kernel at 2 x 4
/// vCPUs beside other cells) before the wake, which then looked like a
/// lost waiter.
const CHILD_WAIT: Duration = Duration::from_secs(60);

/// What the clone(CLONE_VM) child gets: the word and its timeout (read
/// by the child from the parent's memory, which it shares).
#[repr(C)]
struct ChildArg {
    word: *const AtomicU32,
    timeout: libc::timespec,
}

/// Exit codes of the clone(CLONE_VM) child.
const WOKEN: i32 = 0;
const TIMED_OUT: i32 = 2;

extern "C" fn clone_vm_waiter(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the parent's live ChildArg (it reaps this child before
    // dropping it).
    let arg = unsafe { &*(arg as *const ChildArg) };
    // A raw syscall instruction, not libc: this task shares the parent's
    // memory and thread pointer, so libc's errno would be the parent's.
    let r: i64;
    // SAFETY: FUTEX_WAIT_PRIVATE on the parent's live word with its live
    // relative timeout.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_futex => r,
            in("rdi") arg.word,
            in("rsi") (legacy::WAIT | legacy::PRIVATE) as i64,
            in("rdx") 0i64,
            in("r10") &arg.timeout as *const libc::timespec,
            in("r8") 0i64,
            in("r9") 0i64,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    // SAFETY: as above; arm64 passes the number in x8, arguments in x0-x5.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!(
            "svc #0",
            in("x8") libc::SYS_futex,
            inlateout("x0") arg.word as i64 => r,
            in("x1") (legacy::WAIT | legacy::PRIVATE) as i64,
            in("x2") 0i64,
            in("x3") &arg.timeout as *const libc::timespec,
            in("x4") 0i64,
            in("x5") 0i64,
            options(nostack),
        );
    }
    let code = if r == 0 { WOKEN } else { TIMED_OUT };
    // SAFETY: exit (not exit_group) ends this task only.
    unsafe { libc::syscall(libc::SYS_exit, code) };
    code
}

/// A clone(CLONE_VM) child (no CLONE_THREAD: a process of its own sharing
/// this `mm`) asleep in FUTEX_WAIT_PRIVATE on `word`.
struct CloneVmWaiter {
    pid: i32,
    _stack: Vec<u8>,
    _arg: Box<ChildArg>,
}

impl CloneVmWaiter {
    fn start(word: &AtomicU32) -> Result<CloneVmWaiter, Outcome> {
        let mut stack = vec![0u8; 64 * 1024];
        // SAFETY: the end of the vec, 16-byte aligned, is a valid stack top.
        let top = unsafe { stack.as_mut_ptr().add(stack.len()) };
        let top = (top as usize & !15) as *mut libc::c_void;
        let wait = guest_tests::cases::scaled(CHILD_WAIT);
        let arg = Box::new(ChildArg {
            word,
            timeout: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: 0,
            },
        });
        // SAFETY: clone_vm_waiter makes raw syscalls only; `stack`, `arg`
        // and `word` outlive the child (reap() waits for it before any is
        // dropped).
        let pid = unsafe {
            libc::clone(
                clone_vm_waiter,
                top,
                libc::CLONE_VM | libc::SIGCHLD,
                &*arg as *const ChildArg as *mut libc::c_void,
            )
        };
        if pid < 0 {
            return Err(fail(format!(
                "clone(CLONE_VM) failed: {}",
                std::io::Error::last_os_error()
            )));
        }
        let w = CloneVmWaiter {
            pid,
            _stack: stack,
            _arg: arg,
        };
        if let Err(o) = hash::wait_blocked(
            &[pid],
            libc::SYS_futex,
            Duration::from_secs(5),
            hash::process_state,
        ) {
            // Never free the stack under a live child: kill and reap it first.
            // SAFETY: our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = w.reap();
            return Err(o);
        }
        Ok(w)
    }

    /// Waits for the child; its exit code ([`WOKEN`] or [`TIMED_OUT`]).
    fn reap(self) -> Result<i32, Outcome> {
        hash::wait_child(self.pid, Duration::from_secs(15))
    }

    /// Kills the child (no wake found it) and reaps it.
    fn kill(self) {
        // SAFETY: our own unreaped child.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let _ = self.reap();
    }
}

/// What a private FUTEX_WAKE of the clone(CLONE_VM) child's word returns
/// once the process has a table: 1 when the clone allocated it (the waiter
/// queued in it) or there is no private hash at all; 0 when the clone did
/// not allocate (`growth=thread`): the waiter sits in the global hash and
/// the table installed after it moved nobody.
fn want_wake_after_install(e: &Expect) -> Res {
    let allocates = hash::growth_allocates(e.growth, false, false);
    if e.private_hash && !allocates {
        Ok(0)
    } else {
        Ok(1)
    }
}

/// clone(CLONE_VM) child waits on a private word, then `install` (a thread,
/// or a SET) gives the process a table; a private wake must find the child
/// exactly as `want_wake_after_install` says. A missed child is then found
/// after SET 0 (the global hash is where it queued).
fn clone_vm_waiter_then(
    e: &Expect,
    what: &str,
    install: impl FnOnce() -> Result<Res, Outcome>,
    want_install: Res,
    installed: i64,
) -> Check {
    ensure_res("GET before the clone", hash::get(), want_get(e, 0))?;
    let word = AtomicU32::new(0);
    let child = CloneVmWaiter::start(&word)?;
    let allocates = hash::growth_allocates(e.growth, false, false);
    let get_clone = hash::get();
    let install_res = install()?;
    let get_installed = hash::get();
    let woke = hash::futex_legacy(&word, legacy::WAKE | legacy::PRIVATE, 1, None);
    let want = want_wake_after_install(e);
    diag(&format!(
        "growth {}: GET after clone(CLONE_VM) {}, {what} {}, GET then {}, wake {}",
        e.growth.name(),
        hash::show(&get_clone),
        hash::show(&install_res),
        hash::show(&get_installed),
        hash::show(&woke)
    ));
    let lost = woke == Ok(0);
    let mut found = !lost;
    if lost {
        // Found where it queued: SET 0 makes every private key global.
        let set0 = hash::set(0);
        let again = hash::futex_legacy(&word, legacy::WAKE | legacy::PRIVATE, 1, None);
        diag(&format!(
            "after SET 0 {}: wake {}",
            hash::show(&set0),
            hash::show(&again)
        ));
        found = again == Ok(1);
    }
    if !found {
        // Neither wake found it: do not wait out its guard.
        child.kill();
        return Err(fail(format!(
            "neither FUTEX_WAKE_PRIVATE after {what} ({}) nor one after SET 0 found the clone(CLONE_VM) child asleep on its word: the waiter was lost",
            hash::show(&woke)
        )));
    }
    let code = child.reap()?;
    ensure_res(
        &format!(
            "FUTEX_WAKE_PRIVATE of the clone(CLONE_VM) child's word after {what} \
             (1: it queued in the table the clone allocated; 0: in the global hash, not moved)"
        ),
        woke,
        want,
    )?;
    ensure_res(
        &format!("{what} with the child asleep"),
        install_res,
        want_install,
    )?;
    ensure_res(
        &format!("GET after clone(CLONE_VM), growth {}", e.growth.name()),
        get_clone,
        want_get(e, if allocates { 16 } else { 0 }),
    )?;
    ensure_res(
        &format!("GET after {what}"),
        get_installed,
        want_get(e, installed),
    )?;
    ensure(code == WOKEN, || {
        format!(
            "the clone(CLONE_VM) child was not woken (exit code {code}, {TIMED_OUT} = timed out)"
        )
    })
}

/// clone(CLONE_VM) waiter, then a real thread.
pub fn clone_vm_waiter_then_thread(ctx: &Ctx) -> Outcome {
    let e = &ctx.expect;
    let mut parked = None;
    let r = clone_vm_waiter_then(
        e,
        "a thread",
        || {
            parked = Some(Parked::spawn(1, Duration::from_secs(20))?);
            Ok(Ok(0))
        },
        Ok(0),
        if e.growth == Growth::None { 0 } else { 16 },
    );
    if let Some(p) = parked {
        if let Err(o) = p.release() {
            return o;
        }
    }
    done(r)
}

/// clone(CLONE_VM) waiter, then SET 32.
pub fn clone_vm_waiter_then_set(ctx: &Ctx) -> Outcome {
    let e = &ctx.expect;
    done(clone_vm_waiter_then(
        e,
        "SET 32",
        || Ok(hash::set(32)),
        want_set(e, Ok(0)),
        32,
    ))
}

// ---------------------------------------------------------------- io_uring

/// A mapped ring of `io_uring_setup`; unmapped and closed on drop.
struct Ring {
    fd: i32,
    params: io_uring::Params,
    maps: Vec<(*mut u8, usize)>,
}

const _: () = assert!(std::mem::size_of::<io_uring::Sqe>() == 64);
const _: () = assert!(std::mem::size_of::<io_uring::Cqe>() == 16);
const _: () = assert!(std::mem::size_of::<io_uring::Params>() == 120);

impl Ring {
    /// Sets a 4-entry ring up; Err(errno) when the kernel refuses.
    fn new() -> Result<Result<Ring, Errno>, Outcome> {
        let mut params = io_uring::Params::default();
        let fd = match io_uring::setup(4, &mut params) {
            Ok(fd) => fd as i32,
            Err(e) => return Ok(Err(e)),
        };
        let mut ring = Ring {
            fd,
            params,
            maps: Vec::new(),
        };
        let (sq, cq) = (params.sq_off, params.cq_off);
        ring.map(
            sq.array_or_flags as usize + 4 * params.sq_entries as usize,
            io_uring::OFF_SQ_RING,
        )?;
        ring.map(
            cq.dropped_or_cqes as usize + 16 * params.cq_entries as usize,
            io_uring::OFF_CQ_RING,
        )?;
        ring.map(64 * params.sq_entries as usize, io_uring::OFF_SQES)?;
        Ok(Ok(ring))
    }

    fn map(&mut self, len: usize, off: i64) -> Check {
        // SAFETY: a shared mapping of our own ring fd at one of its offsets.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                self.fd,
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(fail(format!(
                "mmap of the io_uring ring at {off:#x}: {}",
                std::io::Error::last_os_error()
            )));
        }
        self.maps.push((p as *mut u8, len));
        Ok(())
    }

    fn u32_at(&self, map: usize, off: u32) -> &AtomicU32 {
        // SAFETY: the kernel's offsets into our live mapping, 4-aligned.
        unsafe { &*(self.maps[map].0.add(off as usize) as *const AtomicU32) }
    }

    /// Submits one IORING_OP_FUTEX_WAIT on `word` for value 0 with futex2
    /// `flags`, tagged `user_data`: what io_uring_enter returned.
    fn submit_futex_wait(&self, word: &AtomicU32, flags: u32, user_data: u64) -> Res {
        let sq = self.params.sq_off;
        let tail = self.u32_at(0, sq.tail).load(Ordering::Acquire);
        let idx = tail & self.u32_at(0, sq.ring_mask).load(Ordering::Relaxed);
        let sqe = io_uring::Sqe {
            opcode: io_uring::OP_FUTEX_WAIT,
            fd: flags as i32,
            addr: word.as_ptr() as u64,
            addr2: 0,
            addr3: sys::FUTEX_BITSET_MATCH_ANY,
            user_data,
            ..Default::default()
        };
        // SAFETY: idx < sq_entries: inside the SQE array and the SQ index array.
        unsafe {
            std::ptr::write_volatile(
                (self.maps[2].0 as *mut io_uring::Sqe).add(idx as usize),
                sqe,
            );
            std::ptr::write_volatile(
                (self.maps[0].0.add(sq.array_or_flags as usize) as *mut u32).add(idx as usize),
                idx,
            );
        }
        self.u32_at(0, sq.tail)
            .store(tail.wrapping_add(1), Ordering::Release);
        io_uring::enter(self.fd, 1, 0, 0)
    }

    /// The completions there are now, taken off the ring.
    fn completions(&self) -> Vec<io_uring::Cqe> {
        let cq = self.params.cq_off;
        let head = self.u32_at(1, cq.head);
        let tail = self.u32_at(1, cq.tail).load(Ordering::Acquire);
        let mask = self.u32_at(1, cq.ring_mask).load(Ordering::Relaxed);
        let mut h = head.load(Ordering::Relaxed);
        let mut out = Vec::new();
        while h != tail {
            // SAFETY: h & mask < cq_entries: inside the CQE array.
            out.push(unsafe {
                std::ptr::read_volatile(
                    (self.maps[1].0.add(cq.dropped_or_cqes as usize) as *const io_uring::Cqe)
                        .add((h & mask) as usize),
                )
            });
            h = h.wrapping_add(1);
        }
        head.store(h, Ordering::Release);
        out
    }

    /// Completions within `ms` (polled), at least `n` or what came.
    fn wait_completions(&self, n: usize, ms: u64) -> Vec<io_uring::Cqe> {
        let mut got = Vec::new();
        for _ in 0..ms {
            got.extend(self.completions());
            if got.len() >= n {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        for &(p, len) in &self.maps {
            // SAFETY: our own mappings.
            unsafe { libc::munmap(p as *mut libc::c_void, len) };
        }
        // SAFETY: our own fd; closing it cancels what is still queued.
        unsafe { libc::close(self.fd) };
    }
}

/// Whether the running kernel is 7.3.4 or later (the code this case pins).
fn release_at_least_7_3_4() -> Option<bool> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let nums: Vec<u64> = rel
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    Some(nums >= vec![7, 3, 4])
}

const SHARED_TAG: u64 = 0x5348;
const PRIVATE_TAG: u64 = 0x5052;

/// io_uring FUTEX_WAITs in a process with no thread: a shared one leaves
/// GET 0; a private one allocates the table first (GET 16) so that a
/// thread created after it does not strand it: a private wake wakes it (1)
/// and its completion says 0.
pub fn io_uring_wait_allocates(ctx: &Ctx) -> Outcome {
    let e = &ctx.expect;
    let ring = match Ring::new() {
        Ok(Ok(r)) => r,
        Ok(Err(Errno(libc::ENOSYS))) => {
            return skip("io_uring_setup is ENOSYS: the kernel has no io_uring (CONFIG_IO_URING)")
        }
        Ok(Err(Errno(libc::EPERM))) => {
            let d = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
                .unwrap_or_else(|_| "unreadable".into());
            return skip(format!(
                "io_uring_setup is EPERM: kernel.io_uring_disabled = {}",
                d.trim()
            ));
        }
        Ok(Err(err)) => return fail(format!("io_uring_setup: {err}")),
        Err(o) => return o,
    };
    if !e.private_hash {
        return skip("needs the private hash (private_hash=0): there is no table to install");
    }
    if release_at_least_7_3_4() != Some(true) {
        return skip(
            "pins 7.3.4's io_futex_prep_private(); which earlier kernels allocate the \
             table for an io_uring private wait is not known (docs/futex-abi.md section 2)",
        );
    }
    done((|| {
        ensure_res("GET before any wait", hash::get(), Ok(0))?;
        let shared = AtomicU32::new(0);
        let private = AtomicU32::new(0);
        let sys_shared = sys::FUTEX2_SIZE_U32;
        ensure_res(
            "io_uring_enter of a shared FUTEX_WAIT",
            ring.submit_futex_wait(&shared, sys_shared, SHARED_TAG),
            Ok(1),
        )?;
        let get_shared = hash::get();
        ensure_res(
            "io_uring_enter of a private FUTEX_WAIT",
            ring.submit_futex_wait(&private, priv32(), PRIVATE_TAG),
            Ok(1),
        )?;
        let get_private = hash::get();
        let early = ring.completions();
        let parked = Parked::spawn(1, Duration::from_secs(20))?;
        let get_thread = hash::get();
        let woke_private = hash::wake(&private, 1, priv32());
        let woke_shared = hash::wake(&shared, 1, sys_shared);
        parked.release()?;
        let cqes = ring.wait_completions(2, 2000);
        diag(&format!(
            "GET after the shared wait {}, after the private wait {}, after a thread {}; \
             wakes: private {}, shared {}; completions {:?}",
            hash::show(&get_shared),
            hash::show(&get_private),
            hash::show(&get_thread),
            hash::show(&woke_private),
            hash::show(&woke_shared),
            cqes.iter()
                .map(|c| (c.user_data, c.res))
                .collect::<Vec<_>>()
        ));
        ensure(early.is_empty(), || {
            format!(
                "completions before any wake (a wait did not queue): {:?}",
                early
                    .iter()
                    .map(|c| (c.user_data, c.res))
                    .collect::<Vec<_>>()
            )
        })?;
        ensure_res("GET after a shared io_uring wait", get_shared, Ok(0))?;
        ensure_res(
            "GET after a private io_uring wait (io_futex_prep_private allocates)",
            get_private,
            Ok(16),
        )?;
        ensure_res("GET after a thread", get_thread, Ok(16))?;
        ensure_res(
            "private wake of the io_uring waiter after the thread",
            woke_private,
            Ok(1),
        )?;
        ensure_res("shared wake of the io_uring waiter", woke_shared, Ok(1))?;
        let mut seen: Vec<(u64, i32)> = cqes.iter().map(|c| (c.user_data, c.res)).collect();
        seen.sort();
        ensure(seen == [(PRIVATE_TAG, 0), (SHARED_TAG, 0)], || {
            format!(
                "completions: expected [(private {PRIVATE_TAG:#x}, 0), (shared {SHARED_TAG:#x}, 0)], got {seen:?}"
            )
        })
    })())
}
