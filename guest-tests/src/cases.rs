//! Runs each test case of a binary in a freshly exec'd process.
//!
//! A futex test must start in a process that has never created a thread:
//! the first `clone(CLONE_VM)` allocates the private futex hash
//! (`docs/futex-abi.md` section 7). So the binary re-executes itself with
//! `--case NAME` for every case; the parent only spawns, waits (with a
//! timeout) and prints KTAP.
//!
//! Child protocol on stdout: any number of `# ...` diagnostic lines, then
//! exactly one of `RESULT PASS`, `RESULT FAIL <why>`, `RESULT SKIP <why>`.

use crate::expect::{Expect, Growth, KEYS};
use crate::ktap::{Ktap, Outcome};
use crate::plan::{CASE_BEGIN, CASE_END, CASE_MARKERS_ENV, KMSG_MARKER};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

/// What a case gets: the expectations for the kernel under test.
pub struct Ctx {
    /// The kernel features the matrix says this kernel has.
    pub expect: Expect,
    /// The running case's name (a case of a table finds its row by it).
    pub case: &'static str,
}

/// One test case.
pub struct Case {
    /// KTAP name of the case.
    pub name: &'static str,
    /// The case body; runs in a fresh process.
    pub run: fn(&Ctx) -> Outcome,
    /// Wall-clock limit for the case's process.
    pub timeout: Duration,
}

impl Case {
    /// A case with the default 30 s timeout.
    pub const fn new(name: &'static str, run: fn(&Ctx) -> Outcome) -> Case {
        Case {
            name,
            run,
            timeout: Duration::from_secs(30),
        }
    }
}

const RESULT_TAG: &str = "RESULT ";

/// Environment variable through which the harness scales guest-side
/// waits and timeouts (the cell's `timeout_scale`: many vCPUs under TCG
/// make everything slower, and a slow machine is not a kernel bug).
pub const TIMEOUT_SCALE_ENV: &str = "HARNESS_TIMEOUT_SCALE";

/// The timeout scale from [`TIMEOUT_SCALE_ENV`] (1.0 when unset; clamped to 1..=100).
pub fn timeout_scale() -> f64 {
    std::env::var(TIMEOUT_SCALE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite())
        .map_or(1.0, |v| v.clamp(1.0, 100.0))
}

/// `d` scaled by [`timeout_scale`]: use for every bounded wait in a case.
pub fn scaled(d: Duration) -> Duration {
    d.mul_f64(timeout_scale())
}

/// Entry point of a case-based test binary; `about` says in one line what
/// it tests (the first line of its `--help`). Arguments: `--case NAME`
/// (internal), `--filter SUBSTRING` (repeatable), `--expect key=value,...`
/// (see [`Expect::parse`]), `--list`, the stress knobs `--iterations N` /
/// `--seconds S` (off by default), and `-h`/`--help`.
pub fn main(about: &str, cases: &[Case]) -> ! {
    run(None, about, cases)
}

/// [`main`] for a binary whose first argument `mode` selects these cases
/// among its other modes (the `fault` binary's `cases-lkdtm`); each case
/// process is started with `mode` too.
pub fn main_in_mode(mode: &'static str, about: &str, cases: &[Case]) -> ! {
    run(Some(mode), about, cases)
}

fn run(mode: Option<&'static str>, about: &str, cases: &[Case]) -> ! {
    let mut args = std::env::args();
    let program = args.next().unwrap_or_default();
    let mut args: Vec<String> = args.collect();
    if mode.is_some() && args.first().map(String::as_str) == mode {
        args.remove(0);
    }
    let mut case = None;
    let mut filters = Vec::new();
    let mut expect_arg = None;
    let mut list = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--case" => case = it.next().cloned(),
            "--filter" => filters.extend(it.next().cloned()),
            "--expect" => expect_arg = it.next().cloned(),
            "--list" => list = true,
            "-h" | "--help" => {
                print!("{}", help(&program, about, cases));
                std::process::exit(0);
            }
            // Stress knobs for the race cases, handed to every case process
            // through the environment (see `hash::stress_iterations`).
            "--iterations" | "--seconds" => {
                let var = if a == "--iterations" {
                    "FUTEX_STRESS_ITERATIONS"
                } else {
                    "FUTEX_STRESS_SECONDS"
                };
                match it.next().filter(|v| v.parse::<u64>().is_ok()) {
                    Some(v) => std::env::set_var(var, v),
                    None => {
                        eprintln!("{a} needs a number");
                        std::process::exit(2);
                    }
                }
            }
            other => {
                eprintln!("unknown argument {other:?}");
                std::process::exit(2);
            }
        }
    }
    let expect = match expect_arg.as_deref().map(Expect::parse) {
        Some(Ok(e)) => e,
        Some(Err(e)) => {
            eprintln!("--expect: {e}");
            std::process::exit(2);
        }
        None => Expect::for_running_kernel(),
    };
    if list {
        for c in cases {
            println!("{}", c.name);
        }
        std::process::exit(0);
    }
    if let Some(name) = case {
        let Some(c) = cases.iter().find(|c| c.name == name) else {
            println!("{RESULT_TAG}FAIL no case named {name}");
            std::process::exit(1);
        };
        let ctx = Ctx {
            expect,
            case: c.name,
        };
        let outcome = (c.run)(&ctx);
        let line = match &outcome {
            Outcome::Pass => "PASS".to_string(),
            Outcome::Fail(w) => format!("FAIL {}", w.replace('\n', " | ")),
            Outcome::Skip(w) => format!("SKIP {}", w.replace('\n', " ")),
        };
        println!("{RESULT_TAG}{line}");
        std::process::exit(i32::from(matches!(outcome, Outcome::Fail(_))));
    }

    let selected: Vec<&Case> = cases
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f.as_str())))
        .collect();
    let mut k = Ktap::stdout(selected.len());
    k.diag(&format!("expect: {}", expect.encode()));
    let mut failed = 0;
    let mut markers = CaseMarkers::open();
    for c in selected {
        let started = std::time::Instant::now();
        markers.write(CASE_BEGIN, c.name);
        let outcome = run_child(c, mode, &expect, &mut k);
        markers.write(CASE_END, c.name);
        // Where a binary's time goes, case by case (the host's profile
        // times binaries): the case's last diagnostic, before its result.
        k.diag(&format!("time: {} ms", started.elapsed().as_millis()));
        if !k.result(c.name, &outcome) {
            failed += 1;
        }
    }
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

/// The `--help` text of a binary named `program` (its path, as run).
fn help(program: &str, about: &str, cases: &[Case]) -> String {
    let name = program.rsplit('/').next().filter(|n| !n.is_empty());
    let name = name.unwrap_or("this binary");
    let growth: Vec<&str> = Growth::ALL.iter().map(|g| g.name()).collect();
    let keys: String = KEYS
        .iter()
        .map(|k| match *k {
            "growth" => format!("{:28}growth={}\n", "", growth.join("|")),
            flag => format!("{:28}{flag}=1|0\n", ""),
        })
        .collect();
    let mut text = format!(
        "{name}: {about}

usage: {name} [--list] [--filter SUBSTRING]... [--expect KEY=VALUE,...]
       [--iterations N] [--seconds S]

Runs every case (or those whose name contains a --filter) in a fresh
process each and prints one KTAP document: exit 0 if none failed, 1 if one
did, 2 on bad arguments.

options:
  --list                  print the case names, one a line, and exit
  --filter SUBSTRING      only the cases whose name contains SUBSTRING
                          (repeatable)
  --expect KEY=VALUE,...  what the kernel is expected to support; keys not
                          given: the defaults for the running kernel's
                          release (docs/futex-abi.md). Keys:
{keys}  --iterations N          rounds of the stress loops (FUTEX_STRESS_ITERATIONS)
  --seconds S             least seconds of the stress loops
                          (FUTEX_STRESS_SECONDS)
  -h, --help              print this text and exit

cases ({count}):
",
        count = cases.len(),
    );
    for c in cases {
        text.push_str("  ");
        text.push_str(c.name);
        text.push('\n');
    }
    text
}

/// The `harness: case-begin/case-end <name>` records on `/dev/kmsg` that
/// let the host charge a kernel report to the case that was running
/// (`docs/results.md`); only under guest-init ([`CASE_MARKERS_ENV`]).
struct CaseMarkers(Option<std::fs::File>);

impl CaseMarkers {
    fn open() -> CaseMarkers {
        let wanted = std::env::var_os(CASE_MARKERS_ENV).is_some();
        CaseMarkers(
            wanted
                .then(|| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open("/dev/kmsg")
                        .ok()
                })
                .flatten(),
        )
    }

    /// One record at level 6 (info); errors ignored: a lost marker only
    /// charges a report to the binary instead of the case.
    fn write(&mut self, verb: &str, case: &str) {
        if let Some(f) = &mut self.0 {
            let _ = f.write_all(format!("<6>{KMSG_MARKER} {verb} {case}\n").as_bytes());
        }
    }
}

fn run_child(
    c: &Case,
    mode: Option<&str>,
    expect: &Expect,
    k: &mut Ktap<std::io::Stdout>,
) -> Outcome {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return Outcome::Fail(format!("cannot find own executable: {e}")),
    };
    let mut child = match Command::new(exe)
        .args(mode)
        .args(["--case", c.name, "--expect", &expect.encode()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(ch) => ch,
        Err(e) => return Outcome::Fail(format!("cannot spawn case process: {e}")),
    };
    let mut stdout = child.stdout.take().expect("stdout was piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        // Bounded: a case that floods stdout is cut at 1 MiB.
        let _ = (&mut stdout).take(1 << 20).read_to_end(&mut buf);
        let mut sink = [0u8; 8192];
        while matches!(stdout.read(&mut sink), Ok(n) if n > 0) {}
        buf
    });
    // Wait for the exit itself (a poll every few ms cost ~0.5 s a cell
    // under TCG): a thread reaps, and the timeout kills by pid, which stays
    // the child's until the thread has reaped it.
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    let reaper = std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(scaled(c.timeout)) {
        Ok(Ok(st)) => Some(st),
        Ok(Err(_)) => None,
        Err(_) => {
            // Where each thread is, before it is gone: what the next
            // occurrence of a hang needs (docs/findings.md).
            for line in thread_report(pid) {
                k.diag(&line);
            }
            // SAFETY: kill(2) on our own unreaped child; no memory involved.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = rx.recv();
            None
        }
    };
    let _ = reaper.join();
    let out = reader.join().unwrap_or_default();
    let text = String::from_utf8_lossy(&out);
    let mut result = None;
    for line in text.lines() {
        if let Some(r) = line.strip_prefix(RESULT_TAG) {
            result = Some(r.to_string());
        } else if let Some(d) = line.strip_prefix("# ") {
            k.diag(d);
        } else if !line.is_empty() {
            k.diag(line);
        }
    }
    match (status, result) {
        (None, _) => Outcome::Fail(format!(
            "case timed out after {} ms and was killed",
            scaled(c.timeout).as_millis()
        )),
        (Some(_), Some(r)) if r == "PASS" => Outcome::Pass,
        (Some(_), Some(r)) if r.starts_with("SKIP") => {
            Outcome::Skip(r.trim_start_matches("SKIP").trim().to_string())
        }
        (Some(_), Some(r)) => Outcome::Fail(r.trim_start_matches("FAIL").trim().to_string()),
        (Some(st), None) => Outcome::Fail(format!("case process ended without a result: {st}")),
    }
}

/// At most this many threads, and stack lines per thread, in a
/// timed-out case's report.
const REPORT_THREADS: usize = 16;
const REPORT_FRAMES: usize = 12;

/// One line per thread of `pid` (state, `wchan`), then its kernel stack
/// where `/proc/<pid>/task/<tid>/stack` is readable, bounded. Never reads
/// `syscall`: for a task on a CPU it waits until the task leaves it.
fn thread_report(pid: libc::pid_t) -> Vec<String> {
    let dir = format!("/proc/{pid}/task");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return vec![format!("timed out: {dir} unreadable")];
    };
    let mut tids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let mut out = Vec::new();
    for tid in tids.iter().take(REPORT_THREADS) {
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{tid}/{f}")).ok();
        let state = read("stat")
            .and_then(|s| {
                let after = s.get(s.rfind(')')? + 1..)?;
                after.split_whitespace().next().map(String::from)
            })
            .unwrap_or_else(|| "?".into());
        let wchan = read("wchan").unwrap_or_default();
        out.push(format!(
            "timed out: thread {tid} state {state} wchan {}",
            clean(wchan.trim())
        ));
        for frame in read("stack")
            .unwrap_or_default()
            .lines()
            .take(REPORT_FRAMES)
        {
            out.push(format!("timed out:   {}", clean(frame.trim())));
        }
    }
    if tids.len() > REPORT_THREADS {
        out.push(format!(
            "timed out: {} more threads not shown",
            tids.len() - REPORT_THREADS
        ));
    }
    out
}

/// Printable ASCII only, at most 120 characters (kernel text, but bounded).
fn clean(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(120)
        .collect()
}

/// Prints a diagnostic from inside a case (goes to the KTAP stream).
pub fn diag(msg: &str) {
    for l in msg.lines() {
        println!("# {l}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_report_names_every_thread_of_a_live_process() {
        // This process: its threads are readable, state and wchan lines.
        let report = thread_report(std::process::id() as libc::pid_t);
        let me = format!("timed out: thread {} state ", std::process::id());
        assert!(report.iter().any(|l| l.starts_with(&me)), "{report:?}");
        assert!(report.iter().all(|l| l.starts_with("timed out: ")));
        assert_eq!(
            thread_report(-1),
            vec!["timed out: /proc/-1/task unreadable".to_string()]
        );
        assert_eq!(clean("a\u{1b}[1mb\tc"), "a[1mbc");
        assert_eq!(clean(&"x".repeat(500)).len(), 120);
    }

    fn pass(_: &Ctx) -> Outcome {
        Outcome::Pass
    }

    #[test]
    fn help_names_the_binary_every_option_key_and_case() {
        let cases = [Case::new("set-2", pass), Case::new("get-fresh-is-0", pass)];
        let text = help("/harness/bin/futex-prctl", "prctl(PR_FUTEX_HASH)", &cases);
        assert!(
            text.starts_with("futex-prctl: prctl(PR_FUTEX_HASH)\n"),
            "{text}"
        );
        for word in [
            "--list",
            "--filter SUBSTRING",
            "--expect KEY=VALUE,...",
            "--iterations N",
        ]
        .into_iter()
        .chain(["--seconds S", "--help", "any-vm", "cases (2):"])
        .chain(KEYS.iter().copied())
        {
            assert!(text.contains(word), "{word}: {text}");
        }
        assert!(text.ends_with("  set-2\n  get-fresh-is-0\n"), "{text}");
        assert!(help("", "x", &cases).starts_with("this binary: x\n"));
    }
}
