//! `smoke`: quick real checks that the guest environment works before the
//! futex suites run: uname and the machine, procfs, the monotonic clock, threads, a private
//! futex2 wait/wake pair, and 16 MiB of memory. Prints one KTAP document;
//! exit 0 if every case passed, 1 otherwise. No arguments but `-h`/`--help`.

use guest_tests::ktap::{Ktap, Outcome};
use guest_tests::mapping::Mapping;
use guest_tests::sys::{self, FUTEX2_PRIVATE, FUTEX2_SIZE_U32, FUTEX_BITSET_MATCH_ANY};
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A check: returns its outcome.
type Check = fn() -> Outcome;

const CASES: &[(&str, Check)] = &[
    ("uname", uname),
    ("machine", machine),
    ("proc-self-status", proc_self_status),
    ("clock-monotonic", clock_monotonic),
    ("thread-spawn-join", thread_spawn_join),
    ("futex2-wait-wake", futex2_wait_wake),
    ("memory-16mib", memory_16mib),
];

fn main() {
    match std::env::args().nth(1).as_deref() {
        None => {}
        Some("-h" | "--help") => {
            println!(
                "smoke: quick checks that the guest works before the futex suites run\n\n\
                 usage: smoke\n\n\
                 Prints one KTAP document: exit 0 if every case passed, 1 otherwise.\n\n\
                 cases ({}):",
                CASES.len()
            );
            for (name, _) in CASES {
                println!("  {name}");
            }
            std::process::exit(0);
        }
        Some(_) => {
            eprintln!("smoke takes no arguments but --help");
            std::process::exit(2);
        }
    }
    let mut k = Ktap::stdout(CASES.len());
    // What the host's architecture checks read (`uname -m`).
    k.diag(&format!(
        "uname -m: {}",
        uname_machine().unwrap_or_else(|e| format!("<{e}>"))
    ));
    let mut failed = 0;
    for (name, case) in CASES {
        if !k.result(name, &case()) {
            failed += 1;
        }
    }
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

/// `uname()` works, says Linux, and its release matches procfs's.
fn uname() -> Outcome {
    // SAFETY: utsname is plain data that uname fills.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a live utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Outcome::Fail(format!("uname: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the kernel NUL-terminates every field.
    let field = |f: &[libc::c_char]| {
        unsafe { CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    let (sysname, release) = (field(&u.sysname), field(&u.release));
    let proc_release = match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(s) => s.trim_end().to_string(),
        Err(e) => return Outcome::Fail(format!("/proc/sys/kernel/osrelease: {e}")),
    };
    Outcome::check(
        sysname == "Linux" && !release.is_empty() && release == proc_release,
        || {
            format!(
                "expected sysname Linux and a release equal to /proc/sys/kernel/osrelease \
                 ({proc_release:?}); got sysname {sysname:?}, release {release:?}"
            )
        },
    )
}

/// `uname -m`.
fn uname_machine() -> Result<String, String> {
    // SAFETY: utsname is plain data that uname fills.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a live utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Err(format!("uname: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the kernel NUL-terminates every field.
    Ok(unsafe { CStr::from_ptr(u.machine.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

/// The kernel's machine is the one this binary was built for (`x86_64`,
/// `aarch64`): a 64-bit kernel of the cell's architecture, not a compat
/// personality or another machine's kernel.
fn machine() -> Outcome {
    let m = match uname_machine() {
        Ok(m) => m,
        Err(e) => return Outcome::Fail(e),
    };
    Outcome::check(m == std::env::consts::ARCH, || {
        format!(
            "uname -m is {m:?}, expected {:?} (the architecture this binary was built for)",
            std::env::consts::ARCH
        )
    })
}

/// `/proc/self/status` is readable and names this process.
fn proc_self_status() -> Outcome {
    let status = match std::fs::read_to_string("/proc/self/status") {
        Ok(s) => s,
        Err(e) => return Outcome::Fail(format!("/proc/self/status: {e}")),
    };
    let pid = std::process::id().to_string();
    let seen = status
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .map(str::trim);
    Outcome::check(seen == Some(pid.as_str()), || {
        format!("expected a 'Pid: {pid}' line, got {seen:?}")
    })
}

fn monotonic_ns() -> Result<u128, String> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a live timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) } != 0 {
        return Err(format!(
            "clock_gettime: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128)
}

/// CLOCK_MONOTONIC advances by at least a 20 ms sleep (and by less than 10 s).
fn clock_monotonic() -> Outcome {
    let sleep = Duration::from_millis(20);
    let t0 = match monotonic_ns() {
        Ok(t) => t,
        Err(e) => return Outcome::Fail(e),
    };
    std::thread::sleep(sleep);
    let t1 = match monotonic_ns() {
        Ok(t) => t,
        Err(e) => return Outcome::Fail(e),
    };
    let delta = t1.saturating_sub(t0);
    Outcome::check(delta >= sleep.as_nanos() && delta < 10_000_000_000, || {
        format!("expected 20 ms <= elapsed < 10 s across a 20 ms sleep, got {delta} ns")
    })
}

/// A thread runs as a separate task and hands a value back through join.
fn thread_spawn_join() -> Outcome {
    // SAFETY: plain syscall.
    let main_tid = unsafe { libc::gettid() };
    let input = 41u64;
    let handle = match std::thread::Builder::new().spawn(move || {
        // SAFETY: plain syscall.
        (unsafe { libc::gettid() }, input + 1)
    }) {
        Ok(h) => h,
        Err(e) => return Outcome::Fail(format!("spawning a thread: {e}")),
    };
    match handle.join() {
        Ok((tid, v)) => Outcome::check(tid > 0 && tid != main_tid && v == 42, || {
            format!("expected a new tid (main is {main_tid}) and 42, got tid {tid} and {v}")
        }),
        Err(_) => Outcome::Fail("the thread panicked".into()),
    }
}

/// A private futex2 waiter is woken by exactly one futex_wake.
fn futex2_wait_wake() -> Outcome {
    let flags = FUTEX2_SIZE_U32 | FUTEX2_PRIVATE;
    let word = Arc::new(AtomicU32::new(0));
    let ready = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (word, ready) = (word.clone(), ready.clone());
        std::thread::spawn(move || {
            let deadline = sys::deadline_ms(10_000);
            ready.store(true, Ordering::SeqCst);
            sys::futex_wait(
                word.as_ptr(),
                0,
                FUTEX_BITSET_MATCH_ANY,
                flags,
                Some(&deadline),
                libc::CLOCK_MONOTONIC,
            )
        })
    };
    while !ready.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    // The waiter may not be queued yet: wake until someone was woken.
    let start = Instant::now();
    let woke = loop {
        let r = sys::futex_wake(word.as_ptr(), FUTEX_BITSET_MATCH_ANY, 1, flags);
        if r != Ok(0) || waiter.is_finished() || start.elapsed() > Duration::from_secs(5) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let waited = match waiter.join() {
        Ok(r) => r,
        Err(_) => return Outcome::Fail("the waiter thread panicked".into()),
    };
    let again = sys::futex_wake(word.as_ptr(), FUTEX_BITSET_MATCH_ANY, 1, flags);
    let show = |r: Result<i64, sys::Errno>| match r {
        Ok(v) => v.to_string(),
        Err(e) => e.to_string(),
    };
    Outcome::check(woke == Ok(1) && waited == Ok(0) && again == Ok(0), || {
        format!(
            "expected futex_wake -> 1, futex_wait -> 0, a second futex_wake -> 0; \
             got {}, {}, {}",
            show(woke),
            show(waited),
            show(again)
        )
    })
}

/// 16 MiB of anonymous memory can be mapped, touched (every page becomes
/// resident, per mincore) and read back.
fn memory_16mib() -> Outcome {
    const LEN: usize = 16 << 20;
    // SAFETY: plain sysconf.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    if page == 0 || (LEN / page) * page != LEN {
        return Outcome::Fail(format!("unexpected page size {page}"));
    }
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let map = match Mapping::anon(LEN, rw, false) {
        Ok(m) => m,
        Err(e) => return Outcome::Fail(format!("mmap 16 MiB: {e}")),
    };
    let addr = map.addr().cast::<libc::c_void>();
    let pages = LEN / page;
    let value = |i: usize| (i % 251) as u8 + 1;
    let base = addr.cast::<u8>();
    for i in 0..pages {
        // SAFETY: i * page + page - 1 < LEN, inside the mapping.
        unsafe {
            base.add(i * page).write_volatile(value(i));
            base.add(i * page + page - 1).write_volatile(value(i));
        }
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: addr/LEN is our mapping, vec has one byte per page.
    let mc = unsafe { libc::mincore(addr, LEN, vec.as_mut_ptr()) };
    let mc_err = std::io::Error::last_os_error();
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count();
    let bad = (0..pages).filter(|&i| {
        // SAFETY: as above.
        let (a, b) = unsafe {
            (
                base.add(i * page).read_volatile(),
                base.add(i * page + page - 1).read_volatile(),
            )
        };
        a != value(i) || b != value(i)
    });
    let bad = bad.count();
    drop(map);
    if mc != 0 {
        return Outcome::Fail(format!("mincore: {mc_err}"));
    }
    Outcome::check(resident == pages && bad == 0, || {
        format!(
            "expected {pages} resident pages with their values; \
             {resident} resident, {bad} read back wrong"
        )
    })
}
