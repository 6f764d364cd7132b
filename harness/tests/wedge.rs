//! A wedged guest costs seconds, not the whole watchdog (VM tier, like
//! `faults.rs`: `HARNESS_VM_TESTS=1`, and LKDTM from
//! `$HARNESS_LKDTM_KERNEL` or `$HARNESS_SOURCE_KERNEL`, `source:7.3`).
//!
//! A test stuck in D state (LKDTM `HUNG_TASK`) outlives its SIGKILL:
//! guest-init reports it stuck and runs the next binary, and the hung-task
//! reports, while results still come, end nothing. A planted livelock
//! (LKDTM `SOFTLOCKUP` on every CPU but one, from children that outlive
//! SIGKILL) ends the guest at the test's timeout: the harness names the
//! test and the lockup, keeps what ran before and leaves no QEMU. Every
//! rule of the host's wedge decision (`VmEnd::Wedged`) is unit-tested in
//! `vm/wedge.rs`.

mod common;
use common::{case, enabled, parse_junit, processes_with, vm_lock, Case};

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A kernel with CONFIG_LKDTM (as `faults.rs::lkdtm_kernel`).
fn lkdtm_kernel() -> Option<String> {
    std::env::var("HARNESS_LKDTM_KERNEL")
        .ok()
        .or_else(common::source_kernel)
}

/// `harness run` under TCG without the topology check, so the suite's
/// first test is the first binary; JUnit and JSON results in `dir`.
fn run(dir: &Path, kernel: &str, topology: &str, suite: &str, watchdog_s: u32) -> Output {
    run_with(dir, kernel, topology, suite, watchdog_s, &[])
}

/// [`run`] with more arguments.
fn run_with(
    dir: &Path,
    kernel: &str,
    topology: &str,
    suite: &str,
    watchdog_s: u32,
    extra: &[&str],
) -> Output {
    Command::new(env!("CARGO_BIN_EXE_harness"))
        .stdin(Stdio::null())
        .env_remove("HARNESS_FORCE_KVM")
        .args(["run", "--kernel", kernel, "--topology", topology])
        .args(["--suite", suite, "--accel", "tcg", "--no-topology-check"])
        .args(["--timeout", &watchdog_s.to_string()])
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .arg("--json")
        .arg(dir.join("results.json"))
        .arg("--out")
        .arg(dir.join("out"))
        .args(extra)
        .output()
        .unwrap()
}

/// The cases, the one cell of the JSON results, and the output in words.
fn results(dir: &Path, out: &Output) -> (Vec<Case>, serde_json::Value, String) {
    let said = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let xml = std::fs::read_to_string(dir.join("junit.xml"))
        .unwrap_or_else(|e| panic!("junit.xml: {e}\n{said}"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    (parse_junit(&xml), json["cells"][0].clone(), said)
}

/// The `harness: ...` kmsg lines of the console log, with their printk
/// timestamps: when guest-init said what.
fn markers(dir: &Path) -> Vec<String> {
    let console = common::walk(&dir.join("out"))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "console.log"))
        .expect("console.log kept");
    String::from_utf8_lossy(&std::fs::read(console).unwrap())
        .lines()
        .filter(|l| l.contains("harness: ") || l.contains("blocked for more than"))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_test_stuck_in_d_state_is_reported_stuck_and_the_next_binary_runs() {
    if !enabled() {
        return;
    }
    let Some(k) = lkdtm_kernel() else { return };
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    // The watchdog is far away: only guest-init's grace may end the test.
    let out = run(
        dir.path(),
        &k,
        "nodes=1,cpus=1,mem=256M",
        "fault-wedge",
        600,
    );
    let (cases, cell, said) = results(dir.path(), &out);
    eprintln!("{said}\nmarkers:\n{}", markers(dir.path()).join("\n"));
    assert_eq!(out.status.code(), Some(1), "{said}");
    let hung = case(&cases, "hung");
    if hung.skipped.is_some() {
        panic!("BLOCKED: the kernel has no LKDTM: {cases:#?}");
    }
    let (msg, text) = hung.failure.clone().expect("hung fails");
    assert!(msg.contains("TIMEOUT"), "{msg}");
    assert!(
        text.contains("stuck in D state after SIGKILL: pid "),
        "{text}"
    );
    assert!(text.contains("lkdtm_HUNG_TASK"), "wchan or stack: {text}");
    // The kernel's own report, attributed to the test that caused it.
    let (msg, text) = case(&cases, "hung/kernel-hung-task")
        .failure
        .clone()
        .expect("the hung-task report fails the test");
    assert!(msg.contains("blocked for more than"), "{msg}");
    assert!(text.contains("INFO: task"), "{text}");
    let smoke: Vec<_> = cases
        .iter()
        .filter(|c| c.name.starts_with("smoke-after/"))
        .collect();
    assert!(!smoke.is_empty(), "smoke-after ran: {cases:#?}");
    assert!(
        smoke
            .iter()
            .all(|c| c.failure.is_none() && c.skipped.is_none()),
        "{smoke:#?}"
    );
    assert_eq!(
        cell["vm"]["end"], "guest-init finished the plan",
        "{cell:#}"
    );
    // Boot, 20 s of timeout, 5 s of grace and smoke: well inside the
    // test's timeout + 30 s (before: the whole watchdog).
    let secs = cell["duration_s"].as_f64().unwrap();
    eprintln!("cell duration: {secs:.1} s");
    assert!(secs < 20.0 + 30.0, "cell took {secs} s");
}

/// The printk time (seconds since boot) of the first console line holding
/// `needle`.
fn first_printk(dir: &Path, needle: &str) -> Option<f64> {
    let console = common::walk(&dir.join("out"))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "console.log"))?;
    let text = String::from_utf8_lossy(&std::fs::read(console).ok()?).into_owned();
    let line = text.lines().find(|l| l.contains(needle))?;
    let stamp = line.strip_prefix('[')?.split(']').next()?;
    stamp.trim().parse().ok()
}

#[test]
fn a_kernel_livelocked_by_a_test_ends_within_the_tests_timeout_and_30_s() {
    if !enabled() {
        return;
    }
    let Some(k) = lkdtm_kernel() else { return };
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("harness-wedge-livelock-{}", std::process::id());
    // Four vCPUs: three spin, one keeps guest-init and the console printer
    // (with every CPU spinning, 7.3's nbcon console prints no report).
    // The watchdog is far away: only the wedge rule may end the guest.
    let out = run_with(
        dir.path(),
        &k,
        "nodes=1,cpus=4,mem=512M",
        "fault-livelock",
        900,
        &["--qemu-arg=-name", "--qemu-arg", &marker],
    );
    assert!(
        processes_with(&marker).is_empty(),
        "a QEMU outlived the harness"
    );
    let (cases, cell, said) = results(dir.path(), &out);
    eprintln!("{said}");
    assert_eq!(out.status.code(), Some(1), "{said}");
    let livelock = case(&cases, "livelock");
    if livelock.skipped.is_some() {
        panic!("BLOCKED: the kernel has no LKDTM: {cases:#?}");
    }
    // What ran before keeps its results.
    let smoke: Vec<_> = cases
        .iter()
        .filter(|c| c.name.starts_with("smoke/"))
        .collect();
    assert!(smoke.len() >= 5, "{cases:#?}");
    assert!(
        smoke
            .iter()
            .all(|c| c.failure.is_none() && c.skipped.is_none()),
        "{smoke:#?}"
    );
    // The test ends one of two ways, each exact. Usually guest-init kills
    // it at its timeout and reports the children still spinning after
    // SIGKILL (a CPU held). When the spinning CPUs starve guest-init (two
    // cores shared by several QEMUs), no result comes at all and the
    // harness ends the cell past the timeout and guest-init's grace.
    let (msg, text) = livelock.failure.clone().expect("livelock fails");
    let wedged = if msg.starts_with("TIMEOUT") {
        assert!(
            text.contains("still alive after SIGKILL (state R): pid "),
            "{text}"
        );
        // The lockup, attributed to it.
        let (msg, _) = case(&cases, "livelock/kernel-soft-lockup")
            .failure
            .clone()
            .expect("the soft lockup fails the test");
        assert!(msg.contains("BUG: soft lockup - CPU#"), "{msg}");
        "the kernel was wedged by livelock (soft-lockup): a task of it spins on in \
         the kernel after SIGKILL"
    } else {
        let wedged = "the kernel was wedged by livelock (soft-lockup): livelock got no \
                      result 10 s past its timeout and guest-init's grace";
        assert!(
            msg.starts_with(&format!("did not finish: {wedged}")),
            "{msg}"
        );
        assert!(msg.contains("BUG: soft lockup - CPU#"), "{msg}");
        wedged
    };
    // The rest: not run, because of it (or, when guest-init had begun it
    // before QEMU quit, cut short for that reason).
    let (name, said) = match cases.iter().find(|c| c.name == "smoke-after") {
        Some(_) => ("smoke-after", "not run"),
        None => ("smoke-after/<incomplete>", "did not finish"),
    };
    let (msg, _) = case(&cases, name).failure.clone().expect("not run");
    assert!(msg.starts_with(&format!("{said}: {wedged}")), "{msg}");
    let end = cell["vm"]["end"].as_str().unwrap_or_default();
    assert!(end.starts_with(wedged), "{cell:#}");
    // Within the test's timeout (20 s) + 30 s of the first report: the
    // cell's whole time less the guest's uptime at the report bounds it.
    let report = first_printk(dir.path(), "soft lockup - CPU#").expect("a report on the console");
    let secs = cell["duration_s"].as_f64().unwrap();
    eprintln!(
        "FIGURE livelock: first soft lockup at {report:.1} s of uptime, cell ended after {secs:.1} s"
    );
    assert!(
        secs - report <= 20.0 + 30.0,
        "{secs} s, report at {report} s"
    );
}
