//! `fault`: misbehaves on purpose, for the harness's fault-injection tests.
//! Output is not KTAP unless the mode says so.
//!
//! Usage: `fault MODE [ARG] [--force]`
//!
//! - `panic`: enables sysrq (`/proc/sys/kernel/sysrq` = 1, if that knob
//!   exists; the trigger file works without it) and writes `c` to
//!   `/proc/sysrq-trigger`: the kernel crashes. Exits 1 if it did not.
//! - `hang`: prints one line, ignores SIGTERM and sleeps forever.
//! - `garbage`: prints a KTAP document (all `ok`) whose names and
//!   diagnostics hold NUL, ESC sequences, other control characters, invalid
//!   UTF-8 and XML metacharacters (`<>&"'`, `]]>`); exits 0.
//! - `flood MIB`: prints exactly MIB MiB of 64-byte lines; exits 0.
//! - `exit CODE`: exits with CODE (0-255) at once.
//! - `fail MESSAGE`: a one-case KTAP document whose case fails with
//!   MESSAGE as its diagnostic; exits 1. Hostile text the reports must
//!   show as text (the HTML report's test).
//! - `warn`: triggers a kernel WARNING through LKDTM (mounts debugfs if
//!   needed, writes `WARNING` to `/sys/kernel/debug/provoke-crash/DIRECT`);
//!   exits 4 (skip) if the kernel has no LKDTM (`CONFIG_LKDTM`). There is no
//!   other reliable userspace trigger: a WARN reachable from userspace is a
//!   kernel bug and gets fixed.
//!
//! - `lkdtm TYPE`: writes TYPE (`WARNING`, `BUG`, `EXCEPTION`, `SOFTLOCKUP`,
//!   `HUNG_TASK`, ...) to LKDTM's `DIRECT` file, like `warn`; exits 4 (skip)
//!   without LKDTM. For `SOFTLOCKUP` it first sets
//!   `/proc/sys/kernel/watchdog_thresh` to 1 (a report after ~2 s).
//! - `lkdtm-others TYPE`: one child per online CPU but CPU 0, each pinned
//!   to its CPU, writes TYPE to LKDTM as `lkdtm` does; waits for them.
//!   With `SOFTLOCKUP` every CPU but one spins in the kernel for good and
//!   the children outlive SIGKILL: a planted livelock that leaves CPU 0 to
//!   guest-init and the console printer, so the kernel's reports reach
//!   the host. Exits 4 (skip) on a single CPU or without LKDTM.
//! - `hung-task`: a real hung task without LKDTM: one thread faults on a
//!   `userfaultfd` page inside `write(2)` to a tmpfs file (holding the
//!   inode lock), a second thread blocks uninterruptibly on that lock;
//!   with `hung_task_timeout_secs` = 1 the kernel reports it. Then the
//!   fault is resolved and both finish; exits 0. Exits 4 (skip) when the
//!   kernel has no hung-task detector or no userfaultfd.
//! - `flood-console MIB`: writes MIB MiB of 64-byte lines to `/dev/console`
//!   (past guest-init, straight onto the host's console socket); exits 0.
//! - `fail-on-run N`: counts its runs in this boot (in
//!   `/tmp/harness-fault-runs`, a tmpfs) and fails (exit 1) on the Nth and
//!   every later one; passes (a one-case KTAP document) before. What a
//!   race that bites once in a while looks like to `--until-fail`.
//! - `fake-console`: prints KTAP-looking lines (`ok 1 fake-console-ok`, ...)
//!   and fake harness markers on `/dev/console` and `/dev/kmsg`; exits 0.
//!   None of it may become a result.
//!
//! - `cases-lkdtm`: a case-based binary (`guest_tests::cases`, with
//!   its `case-begin`/`case-end` kmsg markers) of two cases: `calm`
//!   passes; `warns` writes `WARNING` to LKDTM and passes by itself (skips
//!   without LKDTM). The kernel's report must fail `warns` and only it.
//!
//! `panic`, `warn`, `lkdtm` and `hung-task` hurt the machine they run on, so they refuse to run
//! outside the test VM (no `/harness/plan.json`) unless given `--force`.

use guest_tests::cases::{Case, Ctx};
use guest_tests::ktap::Outcome;
use guest_tests::plan::PLAN_PATH;
use std::io::Write;
use std::time::Duration;

const USAGE: &str =
    "usage: fault panic|hang|garbage|warn|hung-task|fake-console [--force]\n       fault flood MIB\n       fault flood-console MIB\n       fault lkdtm TYPE [--force]\n       fault lkdtm-others TYPE [--force]\n       fault exit CODE\n       fault fail MESSAGE\n       fault fail-on-run N\n       fault cases-lkdtm";

/// The cases of `cases-lkdtm`.
const LKDTM_CASES: &[Case] = &[Case::new("calm", calm), Case::new("warns", warns)];

fn calm(_: &Ctx) -> Outcome {
    Outcome::Pass
}

fn warns(_: &Ctx) -> Outcome {
    if !lkdtm_trigger() {
        return Outcome::Skip("no LKDTM (CONFIG_LKDTM) in this kernel".into());
    }
    match std::fs::write(DIRECT, "WARNING\n") {
        Ok(()) => Outcome::Pass,
        Err(e) => Outcome::Fail(format!("{DIRECT}: {e}")),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("cases-lkdtm") {
        if !args.iter().any(|a| a == "--list" || a == "--case")
            && !std::path::Path::new(PLAN_PATH).exists()
        {
            std::process::exit(guarded(false, || 2));
        }
        guest_tests::cases::main_in_mode(
            "cases-lkdtm",
            "a kernel WARNING inside one of two cases",
            LKDTM_CASES,
        );
    }
    let force = args.iter().any(|a| a == "--force");
    let args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--force")
        .collect();
    let code = match args[..] {
        ["-h" | "--help"] => {
            println!(
                "fault: misbehaves on purpose, for the harness's fault-injection tests\n\
                 (panic, warn, lkdtm and hung-task refuse to run outside the test VM\n\
                 without --force)\n\n{USAGE}"
            );
            0
        }
        ["panic"] => guarded(force, panic),
        ["hang"] => hang(),
        ["garbage"] => garbage(),
        ["warn"] => guarded(force, warn),
        ["lkdtm", what] => {
            if !force && !std::path::Path::new(PLAN_PATH).exists() {
                guarded(force, || 2)
            } else {
                lkdtm(what)
            }
        }
        ["lkdtm-others", what] => {
            if !force && !std::path::Path::new(PLAN_PATH).exists() {
                guarded(force, || 2)
            } else {
                lkdtm_others(what)
            }
        }
        ["hung-task"] => guarded(force, hung_task),
        ["fake-console"] => fake_console(),
        ["flood-console", mib] => match mib.parse::<u64>() {
            Ok(mib) => flood_console(mib),
            Err(_) => usage(&format!("flood-console: {mib:?} is not a number of MiB")),
        },
        ["flood", mib] => match mib.parse::<u64>() {
            Ok(mib) => flood(mib),
            Err(_) => usage(&format!("flood: {mib:?} is not a number of MiB")),
        },
        ["fail-on-run", n] => match n.parse::<u32>() {
            Ok(n) if n > 0 => fail_on_run(n),
            _ => usage(&format!("fail-on-run: {n:?} is not a run number >= 1")),
        },
        ["exit", code] => match code.parse::<u8>() {
            Ok(code) => code.into(),
            Err(_) => usage(&format!("exit: {code:?} is not a status 0-255")),
        },
        ["fail", message] => {
            let message = message.replace('\n', " ");
            println!("KTAP version 1\n1..1\n# {message}\nnot ok 1 fail");
            1
        }
        _ => usage("unknown or missing mode"),
    };
    std::process::exit(code)
}

/// Where `fail-on-run` counts (guest-init mounts a tmpfs on `/tmp`).
const RUNS_FILE: &str = "/tmp/harness-fault-runs";

fn fail_on_run(n: u32) -> i32 {
    let path = std::env::var("HARNESS_FAULT_RUNS_FILE").unwrap_or_else(|_| RUNS_FILE.into());
    let run = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0)
        + 1;
    if let Err(e) = std::fs::write(&path, format!("{run}\n")) {
        eprintln!("fault: cannot count runs in {path}: {e}");
        return 2;
    }
    let fail = run >= n;
    println!("KTAP version 1\n1..1\n# run {run}, failing from run {n}");
    println!("{} 1 run-counter", if fail { "not ok" } else { "ok" });
    i32::from(fail)
}

fn usage(msg: &str) -> i32 {
    eprintln!("fault: {msg}\n{USAGE}");
    2
}

/// Runs `f` only inside the test VM (or with `--force`).
fn guarded(force: bool, f: fn() -> i32) -> i32 {
    if !force && !std::path::Path::new(PLAN_PATH).exists() {
        eprintln!(
            "fault: {PLAN_PATH} missing, so this is not the test VM; refusing to hurt this \
             kernel (use --force to insist)"
        );
        return 2;
    }
    f()
}

fn panic() -> i32 {
    if let Err(e) = std::fs::write("/proc/sys/kernel/sysrq", "1\n") {
        eprintln!("fault: cannot enable sysrq ({e}); trying the trigger anyway");
    }
    println!("crashing the kernel through /proc/sysrq-trigger");
    let _ = std::io::stdout().flush();
    if let Err(e) = std::fs::write("/proc/sysrq-trigger", "c") {
        eprintln!("fault: /proc/sysrq-trigger: {e}");
        return 1;
    }
    std::thread::sleep(Duration::from_secs(10));
    eprintln!("fault: the kernel did not crash");
    1
}

fn hang() -> i32 {
    // SAFETY: plain syscall setting a disposition.
    unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    println!("hanging forever; SIGTERM ignored");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// The `garbage` document.
fn garbage_doc() -> Vec<u8> {
    let lines: &[&[u8]] = &[
        b"KTAP version 1",
        b"1..5",
        b"# NUL: a\0b",
        b"# ESC: \x1b[31mred\x1b[0m, title \x1b]0;pwned\x07, CSI \xc2\x9b2J",
        b"# controls: cr\rff\x0cbs\x08del\x7f tab\tend",
        b"# bad UTF-8: \xff\xfe \xc3\x28 \xed\xa0\x80 \xf0\x28\x8c",
        b"# XML: <tag attr=\"v\">&amp;&lt; 'q' ]]> <![CDATA[x]]> &#0; &#x1b;",
        b"ok 1 nul\0name",
        b"ok 2 esc\x1b[31mname\x1b[0m",
        b"ok 3 bad-utf8-\xff\xfe\xc3",
        b"ok 4 xml<>&\"']]>",
        b"# a long line follows",
    ];
    let mut doc = Vec::new();
    for l in lines {
        doc.extend_from_slice(l);
        doc.push(b'\n');
    }
    doc.extend_from_slice(b"# ");
    doc.extend(std::iter::repeat_n(b'<', 10_000));
    doc.extend_from_slice(b"\nok 5 long-line\n");
    doc
}

fn garbage() -> i32 {
    let mut out = std::io::stdout().lock();
    match out.write_all(&garbage_doc()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// Bytes per `flood` line, newline included.
const FLOOD_LINE: usize = 64;

fn flood_line(i: u64) -> String {
    format!("flood line {i:>12} {}\n", "x".repeat(FLOOD_LINE - 25))
}

fn flood(mib: u64) -> i32 {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let lines = (mib << 20) / FLOOD_LINE as u64;
    for i in 0..lines {
        if out.write_all(flood_line(i).as_bytes()).is_err() {
            return 1;
        }
    }
    if out.flush().is_err() {
        return 1;
    }
    0
}

fn warn() -> i32 {
    lkdtm("WARNING")
}

/// `lkdtm what` from a child pinned to each online CPU but CPU 0.
fn lkdtm_others(what: &str) -> i32 {
    // SAFETY: a plain query.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if cpus < 2 {
        println!("# SKIP lkdtm-others needs 2 CPUs or more, this guest has {cpus}");
        return 4;
    }
    if !lkdtm_trigger() {
        return 4;
    }
    quick_detectors(what);
    let mut children = Vec::new();
    for cpu in 1..cpus as usize {
        // SAFETY: fork in a single-threaded process; the child only pins
        // itself, writes a file and exits.
        match unsafe { libc::fork() } {
            -1 => {
                eprintln!("fault: fork: {}", std::io::Error::last_os_error());
                return 1;
            }
            0 => {
                // SAFETY: a zeroed cpu_set_t with one bit set, for ourselves.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                        libc::_exit(3);
                    }
                }
                let code = lkdtm_write(what);
                // SAFETY: ends the forked child without running the
                // parent's exit handlers twice.
                unsafe { libc::_exit(code) };
            }
            pid => children.push(pid),
        }
    }
    println!(
        "# {} children writing {what} on CPUs 1-{}",
        children.len(),
        cpus - 1
    );
    let _ = std::io::stdout().flush();
    let mut worst = 0;
    for pid in children {
        let mut status = 0;
        // SAFETY: waits for a child we forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if libc::WIFEXITED(status) {
            worst = worst.max(libc::WEXITSTATUS(status));
        } else {
            worst = 1;
        }
    }
    worst
}

/// LKDTM's trigger file.
const DIRECT: &str = "/sys/kernel/debug/provoke-crash/DIRECT";

/// Mounts debugfs if needed; whether LKDTM's trigger is there (says why
/// not).
fn lkdtm_trigger() -> bool {
    const DEBUGFS: &str = "/sys/kernel/debug";
    // SAFETY: all pointers are NUL-terminated literals.
    let r = unsafe {
        libc::mount(
            c"debugfs".as_ptr(),
            c"/sys/kernel/debug".as_ptr(),
            c"debugfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EBUSY) {
            eprintln!("fault: mounting debugfs on {DEBUGFS}: {e}");
        }
    }
    if !std::path::Path::new(DIRECT).exists() {
        eprintln!("fault: no {DIRECT}: kernel without LKDTM (CONFIG_LKDTM) or debugfs");
        return false;
    }
    true
}

/// Writes `what` to LKDTM's DIRECT trigger, the kernel's detector for it
/// made quick first.
fn lkdtm(what: &str) -> i32 {
    quick_detectors(what);
    if !lkdtm_trigger() {
        return 4;
    }
    lkdtm_write(what)
}

/// Shortens the detector `what` trips: reports after seconds, not tens.
/// Before any CPU spins: a new threshold waits for work on every CPU.
fn quick_detectors(what: &str) {
    if what == "SOFTLOCKUP" {
        if let Err(e) = std::fs::write("/proc/sys/kernel/watchdog_thresh", "1\n") {
            eprintln!("fault: /proc/sys/kernel/watchdog_thresh: {e}");
        }
    }
    if what == "HUNG_TASK" {
        let _ = std::fs::write("/proc/sys/kernel/hung_task_timeout_secs", "1\n");
    }
}

/// Writes `what` to the trigger ([`lkdtm_trigger`] checked it is there).
fn lkdtm_write(what: &str) -> i32 {
    println!("triggering {what} through LKDTM");
    let _ = std::io::stdout().flush();
    match std::fs::write(DIRECT, format!("{what}\n")) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("fault: {DIRECT}: {e}");
            1
        }
    }
}

fn flood_console(mib: u64) -> i32 {
    let f = match std::fs::OpenOptions::new().write(true).open("/dev/console") {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fault: /dev/console: {e}");
            return 1;
        }
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, f);
    let lines = (mib << 20) / FLOOD_LINE as u64;
    for i in 0..lines {
        if out.write_all(flood_line(i).as_bytes()).is_err() {
            return 1;
        }
    }
    if out.flush().is_err() {
        return 1;
    }
    0
}

/// KTAP-looking lines and fake markers on the console and in the kernel log.
const FAKE_LINES: &[&str] = &[
    "KTAP version 1",
    "1..2",
    "ok 1 fake-console-ok",
    "not ok 2 fake-console-not-ok",
    "harness: end 1 smoke ok",
    "ok 3 fake-kmsg-ok",
];

fn fake_console() -> i32 {
    let mut wrote = 0;
    if let Ok(mut c) = std::fs::OpenOptions::new().write(true).open("/dev/console") {
        for l in FAKE_LINES {
            if writeln!(c, "{l}").is_ok() {
                wrote += 1;
            }
        }
    }
    if let Ok(mut k) = std::fs::OpenOptions::new().write(true).open("/dev/kmsg") {
        for l in FAKE_LINES {
            // One record per write.
            if k.write_all(l.as_bytes()).is_ok() {
                wrote += 1;
            }
        }
    }
    println!("wrote {wrote} fake lines to /dev/console and /dev/kmsg");
    0
}

// userfaultfd ABI (linux/userfaultfd.h): the same on x86-64 and arm64
// (both use the asm-generic ioctl encoding and LP64 structs).
const UFFD_API: u64 = 0xaa;
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFDIO_ZEROPAGE: libc::c_ulong = 0xc020_aa04;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;

fn hung_task() -> i32 {
    const KNOB: &str = "/proc/sys/kernel/hung_task_timeout_secs";
    if std::fs::write(KNOB, "1\n").is_err() {
        eprintln!("fault: no {KNOB}: kernel without CONFIG_DETECT_HUNG_TASK");
        return 4;
    }
    let _ = std::fs::write("/proc/sys/kernel/hung_task_check_interval_secs", "1\n");
    let _ = std::fs::write("/proc/sys/kernel/hung_task_warnings", "10\n");
    // SAFETY: raw syscalls and ioctls on descriptors and a mapping we own,
    // with structs laid out as the kernel ABI says.
    unsafe {
        let uffd = libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) as i32;
        if uffd < 0 {
            eprintln!("fault: userfaultfd: {}", std::io::Error::last_os_error());
            return 4;
        }
        let mut api = [UFFD_API, 0u64, 0u64];
        if libc::ioctl(uffd, UFFDIO_API, api.as_mut_ptr()) != 0 {
            eprintln!("fault: UFFDIO_API: {}", std::io::Error::last_os_error());
            return 4;
        }
        let page = 4096usize;
        let mem = libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if mem == libc::MAP_FAILED {
            eprintln!("fault: mmap: {}", std::io::Error::last_os_error());
            return 1;
        }
        let mut reg = [mem as u64, page as u64, UFFDIO_REGISTER_MODE_MISSING, 0u64];
        if libc::ioctl(uffd, UFFDIO_REGISTER, reg.as_mut_ptr()) != 0 {
            eprintln!(
                "fault: UFFDIO_REGISTER: {}",
                std::io::Error::last_os_error()
            );
            return 4;
        }
        let file = match std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open("/tmp/fault-hung-task")
        {
            Ok(f) => f,
            Err(e) => {
                eprintln!("fault: /tmp/fault-hung-task: {e}");
                return 1;
            }
        };
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        let addr = mem as usize;
        println!("thread A: write(2) from a userfaultfd page (holds the inode lock)");
        let _ = std::io::stdout().flush();
        let a = std::thread::spawn(move || {
            libc::write(fd, addr as *const libc::c_void, page);
        });
        std::thread::sleep(Duration::from_millis(500));
        println!("thread B: write(2) to the same file (blocks uninterruptibly)");
        let _ = std::io::stdout().flush();
        let b = std::thread::spawn(move || {
            libc::write(fd, b"x".as_ptr() as *const libc::c_void, 1);
        });
        // Long enough for khungtaskd (1 s timeout, 1 s interval) to report.
        std::thread::sleep(Duration::from_secs(6));
        let mut zp = [addr as u64, page as u64, 0u64, 0u64];
        if libc::ioctl(uffd, UFFDIO_ZEROPAGE, zp.as_mut_ptr()) != 0 {
            eprintln!(
                "fault: UFFDIO_ZEROPAGE: {}",
                std::io::Error::last_os_error()
            );
            return 1;
        }
        let _ = a.join();
        let _ = b.join();
        println!("both writes finished");
        drop(file);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_tests::init::lines::{is_ktap_header, sanitize_line};

    #[test]
    fn garbage_is_ktap_that_sanitizes_clean() {
        let doc = garbage_doc();
        let lines: Vec<&[u8]> = doc.split(|&b| b == b'\n').collect();
        assert!(is_ktap_header(&sanitize_line(lines[0])));
        assert!(doc.contains(&0) && doc.contains(&0x1b));
        assert!(std::str::from_utf8(&doc).is_err());
        let clean: Vec<String> = lines.iter().map(|l| sanitize_line(l)).collect();
        assert!(clean
            .iter()
            .all(|l| l.chars().all(|c| c == '\t' || !c.is_control())));
        assert_eq!(clean.iter().filter(|l| l.starts_with("ok ")).count(), 5);
        assert!(clean.contains(&"ok 4 xml<>&\"']]>".to_string()));
    }

    #[test]
    fn flood_lines_are_fixed_size() {
        assert_eq!(flood_line(0).len(), FLOOD_LINE);
        assert_eq!(flood_line(999_999_999_999).len(), FLOOD_LINE);
    }
}
