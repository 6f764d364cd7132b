//! A wedged guest costs seconds, not the whole watchdog (VM tier, like
//! `faults.rs`: `HARNESS_VM_TESTS=1`, and LKDTM from
//! `$HARNESS_LKDTM_KERNEL` or `$HARNESS_SOURCE_KERNEL`, `source:7.3`).
//!
//! A test stuck in D state (LKDTM `HUNG_TASK`) outlives its SIGKILL:
//! guest-init reports it stuck and runs the next binary, and the hung-task
//! reports, while results still come, end nothing. The host's own wedge
//! decision (`VmEnd::Wedged`) is unit-tested in `vm/wedge.rs`: a guest
//! whose guest-init stops is hard to make on purpose (measured: a soft
//! lockup on the only vCPU printed no report in 600 s, so only the
//! watchdog ends it).

mod common;
use common::{case, enabled, parse_junit, vm_lock, Case};

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
