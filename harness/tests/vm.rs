//! Real-VM tests: real QEMU (TCG here, KVM where it works), a real Debian
//! kernel, the real guest binaries. Slow (seconds per boot), so they run
//! only with `HARNESS_VM_TESTS=1` (which `cargo xtask ci` and `.ci/run`
//! set); under `CI` without it they fail rather than silently pass.
//!
//! The kernel is `$HARNESS_TEST_KERNEL` (default `debian:7.3.4`).

mod common;
use common::{case, enabled, kernel, parse_junit, processes_with, vm_lock, wait_for, walk, Case};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

struct Run {
    out: Output,
    dir: tempfile::TempDir,
}

impl Run {
    fn junit(&self) -> Vec<Case> {
        let xml =
            std::fs::read_to_string(self.dir.path().join("junit.xml")).expect("junit.xml written");
        parse_junit(&xml)
    }
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
}

fn harness_cmd(dir: &Path, topology: &str, suite: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.args([
        "run",
        "--kernel",
        &kernel(),
        "--topology",
        topology,
        "--suite",
        suite,
        "--accel",
        "tcg",
    ])
    .arg("--junit")
    .arg(dir.join("junit.xml"))
    .arg("--out")
    .arg(dir.join("out"))
    .args(extra)
    .stdin(Stdio::null());
    c
}

fn harness(topology: &str, suite: &str, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let out = harness_cmd(dir.path(), topology, suite, extra)
        .output()
        .unwrap();
    Run { out, dir }
}

fn assert_pass(cases: &[Case], name: &str) {
    let c = case(cases, name);
    assert!(
        c.failure.is_none() && c.skipped.is_none(),
        "{name} did not pass: {c:?}"
    );
}

fn smoke_in(topology: &str, nodes: usize) {
    let _vm = vm_lock();
    let json = tempfile::NamedTempFile::new().unwrap();
    let r = harness(
        topology,
        "smoke",
        &["--json", json.path().to_str().unwrap()],
    );
    assert_eq!(
        r.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout(),
        r.stderr()
    );
    let cases = r.junit();
    assert_pass(&cases, "topology/node-count");
    // No distances declared: QEMU's defaults, 10 local and 20 remote.
    assert_pass(&cases, "topology/distances");
    for n in 0..nodes {
        assert_pass(&cases, &format!("topology/node{n}-cpus"));
        assert_pass(&cases, &format!("topology/node{n}-memory"));
    }
    assert!(
        !cases
            .iter()
            .any(|c| c.name == format!("topology/node{nodes}-cpus")),
        "a node too many"
    );
    let smoke: Vec<_> = cases
        .iter()
        .filter(|c| c.name.starts_with("smoke/"))
        .collect();
    assert!(smoke.len() >= 5, "smoke cases: {smoke:?}");
    assert!(
        smoke
            .iter()
            .all(|c| c.failure.is_none() && c.skipped.is_none()),
        "{smoke:?}"
    );
    // The JSON reporter got the same cell from `run` as from `matrix`.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json.path()).unwrap()).unwrap();
    assert_eq!(doc["cells"].as_array().unwrap().len(), 1);
    assert_eq!(doc["cells"][0]["status"], "passed");
    assert_eq!(
        doc["cells"][0]["cases"].as_array().unwrap().len(),
        cases.len()
    );
    // The node count the guest saw, as it reported it.
    let ktap = std::fs::read_to_string(find(r.dir.path(), "results.ktap")).unwrap();
    assert!(
        ktap.contains(&format!("# nodes seen: {nodes}")) || ktap.contains("node-count"),
        "{ktap}"
    );
}

fn find(dir: &Path, file: &str) -> PathBuf {
    walk(dir)
        .into_iter()
        .find(|e| e.file_name().is_some_and(|n| n == file))
        .unwrap_or_else(|| panic!("{file} not under {}", dir.display()))
}

#[test]
fn two_nodes_smoke_passes_with_the_right_topology() {
    if enabled() {
        smoke_in("nodes=2,cpus=2,mem=512M", 2);
    }
}

#[test]
fn one_node_smoke_passes() {
    if enabled() {
        smoke_in("nodes=1,cpus=2,mem=512M", 1);
    }
}

/// The node distances are checked in the guest: a declared matrix is seen
/// exactly, and a QEMU given a `-numa dist` the plan does not declare
/// (`--qemu-arg`: the plan expects QEMU's default 20) fails
/// `topology/distances`, naming each node pair and both values.
#[test]
fn distances_the_plan_does_not_declare_fail_the_topology_check() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let declared = harness("nodes=2,cpus=1,mem=256M,distance=30", "smoke", &[]);
    assert_eq!(
        declared.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        declared.stdout(),
        declared.stderr()
    );
    assert_pass(&declared.junit(), "topology/distances");

    let r = harness(
        "nodes=2,cpus=1,mem=256M",
        "smoke",
        &[
            "--qemu-arg",
            "-numa",
            "--qemu-arg",
            "dist,src=0,dst=1,val=30",
        ],
    );
    assert_eq!(
        r.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout(),
        r.stderr()
    );
    let cases = r.junit();
    let failed: Vec<_> = cases.iter().filter(|c| c.failure.is_some()).collect();
    assert_eq!(
        failed.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["topology/distances"],
        "only the distances differ: {failed:#?}"
    );
    let (message, text) = failed[0].failure.clone().unwrap();
    let all = format!("{message}\n{text}");
    for entry in [
        "node0 -> node1: expected 20 (QEMU's default), seen 30 (/sys/devices/system/node/node0/distance: 10 30)",
        "node1 -> node0: expected 20 (QEMU's default), seen 30 (/sys/devices/system/node/node1/distance: 30 10)",
    ] {
        assert!(all.contains(entry), "{entry:?} not in {all:?}");
    }
}

#[test]
fn kernel_panic_fails_the_cell_with_the_panic_text_at_once() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    // A watchdog far longer than a boot: ending by the watchdog would show.
    let r = harness(
        "nodes=1,cpus=2,mem=512M",
        "fault-panic",
        &["--timeout", "900"],
    );
    assert_eq!(
        r.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout(),
        r.stderr()
    );
    let cases = r.junit();
    let (message, text) = case(&cases, "panic")
        .failure
        .clone()
        .expect("the panicking test fails");
    assert!(message.contains("kernel panic"), "{message}");
    assert!(text.contains("Kernel panic - not syncing"), "{text}");
    assert!(r.stdout().contains("kernel panic"), "{}", r.stdout());
    assert!(!r.stdout().contains("watchdog"), "{}", r.stdout());
    // The test before it passed; the one after never ran.
    let smoke: Vec<_> = cases
        .iter()
        .filter(|c| c.name.starts_with("smoke/"))
        .collect();
    assert!(
        !smoke.is_empty() && smoke.iter().all(|c| c.failure.is_none()),
        "{smoke:?}"
    );
    assert!(case(&cases, "smoke-after").failure.is_some());
}

#[test]
fn hanging_test_is_killed_at_its_timeout_and_the_suite_goes_on() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let r = harness("nodes=1,cpus=2,mem=512M", "fault-hang", &[]);
    assert_eq!(
        r.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout(),
        r.stderr()
    );
    let cases = r.junit();
    let (message, text) = case(&cases, "hang")
        .failure
        .clone()
        .expect("the hang fails");
    assert!(
        format!("{message} {text}")
            .to_lowercase()
            .contains("timeout"),
        "{message} / {text}"
    );
    let after: Vec<_> = cases
        .iter()
        .filter(|c| c.name.starts_with("smoke-after/"))
        .collect();
    assert!(!after.is_empty(), "the suite went on after the hang");
    assert!(after.iter().all(|c| c.failure.is_none()), "{after:?}");
}

#[test]
fn hostile_output_still_gives_valid_xml() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let r = harness("nodes=1,cpus=2,mem=512M", "fault-garbage", &[]);
    let xml = std::fs::read_to_string(r.dir.path().join("junit.xml")).unwrap();
    assert!(
        !xml.chars()
            .any(|c| (c as u32) < 0x20 && !"\t\n\r".contains(c)),
        "control characters in the XML"
    );
    let cases = parse_junit(&xml);
    assert!(
        cases.iter().any(|c| c.name.starts_with("garbage")),
        "{cases:?}"
    );
    let after: Vec<_> = cases
        .iter()
        .filter(|c| c.name.starts_with("smoke-after/"))
        .collect();
    assert!(
        !after.is_empty() && after.iter().all(|c| c.failure.is_none()),
        "{after:?}"
    );
}

/// Starts a long cell, waits for its QEMU, stops the harness with `sig`.
fn no_qemu_survives(sig: i32) {
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("harness.test_marker={}_{}", std::process::id(), sig);
    let mut child = harness_cmd(
        dir.path(),
        "nodes=1,cpus=1,mem=256M",
        "fault-hang",
        &["--append", &marker],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let harness_pid = child.id();
    wait_for("QEMU to start", Duration::from_secs(120), || {
        processes_with(&marker).iter().any(|&p| p != harness_pid)
    });
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(harness_pid as i32, sig) };
    let status = child.wait().unwrap();
    wait_for("QEMU to go away", Duration::from_secs(15), || {
        processes_with(&marker).is_empty()
    });
    if sig == libc::SIGINT {
        assert_eq!(status.code(), Some(130), "{status:?}");
        // Partial results are still written.
        let cases = parse_junit(&std::fs::read_to_string(dir.path().join("junit.xml")).unwrap());
        assert!(!cases.is_empty());
    }
}

#[test]
fn ctrl_c_leaves_no_qemu_and_writes_partial_results() {
    if enabled() {
        no_qemu_survives(libc::SIGINT);
    }
}

#[test]
fn sigkill_of_the_harness_leaves_no_qemu() {
    if enabled() {
        no_qemu_survives(libc::SIGKILL);
    }
}

/// Builds a static C program (gcc is a prerequisite of the guest build).
fn static_c(dir: &Path, name: &str, body: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, body).unwrap();
    let bin = dir.join(name);
    let st = Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "gcc -static failed");
    bin
}

#[test]
fn user_binaries_run_unchanged_ktap_or_not() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let src = tempfile::tempdir().unwrap();
    let ktap = static_c(
        src.path(),
        "my_ktap",
        r#"#include <stdio.h>
int main(void){puts("TAP version 13");puts("1..2");puts("ok 1 first");puts("not ok 2 second # my reason");return 1;}"#,
    );
    let plain = static_c(
        src.path(),
        "my_plain",
        r#"#include <stdio.h>
int main(void){puts("just text, no KTAP");return 3;}"#,
    );
    let skip = static_c(src.path(), "my_skip", "int main(void){return 4;}");
    let args: Vec<String> = [&ktap, &plain, &skip]
        .iter()
        .flat_map(|p| ["--guest-bin".to_string(), p.display().to_string()])
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = harness("nodes=1,cpus=1,mem=256M", "none", &args);
    assert_eq!(
        r.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout(),
        r.stderr()
    );
    let cases = r.junit();
    assert_pass(&cases, "my_ktap/first");
    assert!(case(&cases, "my_ktap/second").failure.is_some());
    let (message, text) = case(&cases, "my_plain")
        .failure
        .clone()
        .expect("exit 3 fails");
    assert!(
        format!("{message} {text}").contains("status 3"),
        "{message} / {text}"
    );
    assert!(text.contains("just text, no KTAP"), "{text}");
    assert!(case(&cases, "my_skip").skipped.is_some());
}

/// `(rounds, overlapped)` of the `# rounds: N, overlapped: M` line that
/// `case` (a subtest name) printed before its result line, in a results
/// document.
fn race_tally(ktap: &str, case: &str) -> Option<(u64, u64)> {
    let mut last = None;
    for line in ktap.lines().map(str::trim) {
        if let Some(t) = line.strip_prefix("# rounds: ") {
            let (n, m) = t.split_once(", overlapped: ")?;
            last = Some((n.parse().ok()?, m.parse().ok()?));
        } else if line.starts_with("ok ") || line.starts_with("not ok ") {
            let name = line.split(" # ").next().unwrap_or(line);
            if name.split_whitespace().last() == Some(case) {
                return last;
            }
            last = None;
        }
    }
    None
}

/// A race case must prove it raced: with `FUTEX_RACE_SERIALIZE=1` (each
/// round's two calls one after the other) no round can overlap, and the
/// case FAILS with the no-overlap message; without it the same case
/// passes, having overlapped. 2 nodes x 2 CPUs: a SET-vs-SET race, which
/// needs no more CPUs.
#[test]
fn a_race_case_that_did_not_race_fails_and_one_that_did_passes() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let topology = "nodes=2,cpus=2,mem=512M";
    let name = "futex-resize/set32-vs-set128-race";
    let select = ["--test", name, "--no-artifacts"];
    let serial = [&select[..], &["--guest-env", "FUTEX_RACE_SERIALIZE=1"]].concat();
    let r = harness(topology, "futex", &serial);
    let said = format!("stdout:\n{}\nstderr:\n{}", r.stdout(), r.stderr());
    assert_eq!(r.code(), Some(1), "{said}");
    let cases = r.junit();
    let (message, text) = case(&cases, name)
        .failure
        .clone()
        .unwrap_or_else(|| panic!("{name} did not fail serialized: {said}"));
    let ktap = std::fs::read_to_string(find(r.dir.path(), "results.ktap")).unwrap();
    let (rounds, overlapped) = race_tally(&ktap, "set32-vs-set128-race").expect(&ktap);
    assert_eq!(overlapped, 0, "{ktap}");
    // Exactly the rule's message: its tally and the default bounds.
    assert_eq!(
        message,
        format!(
            "no round overlapped in {rounds} rounds (of at most 200, 2 s): the race was not \
             exercised"
        ),
        "{text}"
    );
    assert!(
        ktap.contains("# FUTEX_RACE_SERIALIZE=1: each round's two calls run one after the other"),
        "{ktap}"
    );

    let r = harness(topology, "futex", &select);
    let said = format!("stdout:\n{}\nstderr:\n{}", r.stdout(), r.stderr());
    assert_eq!(r.code(), Some(0), "{said}");
    assert_pass(&r.junit(), name);
    let ktap = std::fs::read_to_string(find(r.dir.path(), "results.ktap")).unwrap();
    let (rounds, overlapped) = race_tally(&ktap, "set32-vs-set128-race").expect(&ktap);
    assert!(overlapped > 0 && overlapped <= rounds, "{ktap}");
    assert!(!ktap.contains("FUTEX_RACE_SERIALIZE"), "{ktap}");
}

/// On 2 online CPUs a clone's automatic allocation allocates nothing (the
/// 16 buckets it would make are there already): the SET-vs-clone race
/// cannot happen, and the case SKIPs before any round, saying why.
#[test]
fn a_clone_race_skips_where_the_clones_allocate_nothing() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let name = "futex-resize/set0-vs-thread-create";
    let r = harness(
        "nodes=1,cpus=2,mem=512M",
        "futex",
        &["--test", name, "--no-artifacts"],
    );
    let said = format!("stdout:\n{}\nstderr:\n{}", r.stdout(), r.stderr());
    assert_eq!(r.code(), Some(0), "{said}");
    let cases = r.junit();
    let c = case(&cases, name);
    assert!(c.failure.is_none(), "{c:?}");
    let why = c
        .skipped
        .clone()
        .unwrap_or_else(|| panic!("no skip: {c:?}"));
    assert!(
        why.starts_with(
            "the automatic private hash at 2 online CPUs is 16 buckets, the same as the 16 \
             the round's process already has (5 threads at each clone;"
        ),
        "{why}"
    );
    assert!(
        why.ends_with(": a clone allocates nothing to race"),
        "{why}"
    );
    let ktap = std::fs::read_to_string(find(r.dir.path(), "results.ktap")).unwrap();
    assert_eq!(race_tally(&ktap, "set0-vs-thread-create"), None, "{ktap}");
}
