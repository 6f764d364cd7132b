//! arm64 guests, booted for real: Debian's cloud-arm64 kernel under
//! `qemu-system-aarch64 -machine virt` at two nodes, the smoke suite (the
//! guest's `uname -m`, the declared distances read back by the topology
//! check) and the futex suite (every case passes, or skips for a reason
//! that names the topology). Only with `HARNESS_VM_TESTS=1`, like every
//! VM test (the smoke cell's KCIDB document checked by KernelCI's
//! validator). The kernel is `$HARNESS_TEST_KERNEL_ARM64` (default
//! `debian:7.3.4`); the futex suite runs again on
//! `$HARNESS_SOURCE_KERNEL_ARM64` (`source:7.3` in CI) cross-built for
//! arm64. (Not `$HARNESS_SOURCE_KERNEL`, the x86-64 tests' source kernel:
//! CI gives them `source:7.3-gdb`, whose DWARF would only slow the
//! cross build down.)

mod common;
mod kcidb_common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn kernel() -> String {
    std::env::var("HARNESS_TEST_KERNEL_ARM64").unwrap_or_else(|_| "debian:7.3.4".into())
}

/// `harness run --arch arm64` of `suite` at `topology`, JSON results in `dir`.
fn run_arm64(dir: &Path, topology: &str, suite: &str) -> (Output, serde_json::Value) {
    run_arm64_on(&kernel(), dir, topology, suite)
}

/// [`run_arm64`] of `kernel`.
fn run_arm64_on(
    kernel: &str,
    dir: &Path,
    topology: &str,
    suite: &str,
) -> (Output, serde_json::Value) {
    let json = dir.join("results.json");
    let kcidb = dir.join("kcidb.json");
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "--arch", "arm64", "--kernel", kernel])
        .args(["--topology", topology, "--suite", suite])
        .arg("--json")
        .arg(&json)
        .args(["--origin", "futex_harness", "--kcidb"])
        .arg(&kcidb)
        .arg("--out")
        .arg(dir.join("out"))
        .stdin(Stdio::null())
        .output()
        .expect("run the harness");
    let results = std::fs::read(&json)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    (out, results)
}

fn text(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `(name, status, message)` of every case of the only cell.
fn cases(results: &serde_json::Value) -> Vec<(String, String, String)> {
    results["cells"][0]["cases"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
                    (s("name"), s("status"), s("message"))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn arm64_smoke_at_two_nodes_is_aarch64_with_the_declared_topology() {
    if !common::enabled() {
        return;
    }
    let _vm = common::vm_lock();
    let dir = tempfile::tempdir().unwrap();
    let topology = "nodes=2,cpus=2,mem=512M,distance=31";
    let (out, results) = run_arm64(dir.path(), topology, "smoke");
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    let cell = &results["cells"][0];
    assert_eq!(cell["arch"], "arm64", "{cell}");
    // KCIDB names the build's architecture, and KernelCI's validator
    // takes the document.
    let kcidb = std::fs::read(dir.path().join("kcidb.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&kcidb).unwrap();
    assert_eq!(doc["builds"][0]["architecture"], "arm64", "{doc}");
    kcidb_common::validate(&kcidb);
    assert_eq!(cell["kernel_facts"]["arch"], "arm64", "{cell}");
    let name = cell["name"].as_str().unwrap_or("");
    assert!(name.starts_with("debian-7.3.4-arm64/"), "{name}");
    let cases = cases(&results);
    for want in [
        "topology/node-count",
        "topology/node0-cpus",
        "topology/node1-cpus",
        "topology/node0-memory",
        "topology/node1-memory",
        "topology/distances",
        "smoke/uname",
        "smoke/machine",
        "smoke/futex2-wait-wake",
    ] {
        assert!(
            cases.iter().any(|(n, s, _)| n == want && s == "pass"),
            "{want} did not pass: {cases:?}"
        );
    }
    // The guest says what it is: aarch64, on the results channel (a
    // virtio console), and ended the VM with its mark on the console.
    let cell_dir = dir.path().join("out").join(name.replace('/', "_"));
    let ktap = std::fs::read_to_string(cell_dir.join("results.ktap")).unwrap();
    assert!(ktap.contains("# uname -m: aarch64"), "{ktap}");
    assert!(
        ktap.contains("distance") && !ktap.contains("not ok"),
        "{ktap}"
    );
    let console = std::fs::read_to_string(cell_dir.join("console.log")).unwrap();
    assert!(console.contains("harness: guest-exit 16"), "{console}");
    assert!(
        console.contains("Booting Linux on physical CPU"),
        "{console}"
    );
}

/// The skips the futex suite has at 2 nodes x 2 vCPUs: each names the
/// topology (online CPUs, offline nodes, where the waiters ran), or, for
/// the kernel built here, the config option it lacks as x86-64's does
/// (`CONFIG_IO_URING`). None names arm64: the suite runs the same as on
/// x86-64 there.
const TOPOLOGY_WORDS: &[&str] = &[
    "online CPUs",
    "offline=1",
    "met in one table",
    "(CONFIG_IO_URING)",
];

#[test]
fn arm64_futex_suite_on_debian_7_3_4_passes_or_skips_for_the_topology() {
    if !common::enabled() {
        return;
    }
    let _vm = common::vm_lock();
    futex_suite_passes_or_skips_for_the_topology(&kernel());
}

#[test]
fn arm64_futex_suite_on_the_kernel_built_here_passes_or_skips_for_the_topology() {
    if !common::enabled() {
        return;
    }
    let Ok(kernel) = std::env::var("HARNESS_SOURCE_KERNEL_ARM64") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the source kernel's arm64 test: set HARNESS_SOURCE_KERNEL_ARM64 (cargo xtask ci does)"
        );
        eprintln!("skipped: set HARNESS_SOURCE_KERNEL_ARM64=source:7.3 (a cross build: minutes)");
        return;
    };
    let _vm = common::vm_lock();
    futex_suite_passes_or_skips_for_the_topology(&kernel);
}

/// The futex suite on `kernel` for arm64 at 2 nodes x 2 vCPUs: exit 0,
/// every case passes or skips for the topology, the guest is aarch64.
fn futex_suite_passes_or_skips_for_the_topology(kernel: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (out, results) = run_arm64_on(kernel, dir.path(), "nodes=2,cpus=2,mem=512M", "futex");
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert_eq!(results["cells"][0]["arch"], "arm64", "{all}");
    let cases = cases(&results);
    assert!(cases.len() > 250, "{} cases: {all}", cases.len());
    for want in [
        "topology/node-count",
        "topology/distances",
        "topology/possible-nodes",
    ] {
        assert!(
            cases.iter().any(|(n, s, _)| n == want && s == "pass"),
            "{want} did not pass: {all}"
        );
    }
    let bad: Vec<_> = cases
        .iter()
        .filter(|(_, s, m)| {
            !(s == "pass" || (s == "skip" && TOPOLOGY_WORDS.iter().any(|w| m.contains(w))))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{kernel}: cases that neither passed nor skipped for the topology or the kernel's config: {bad:#?}"
    );
    let skipped: Vec<_> = cases.iter().filter(|(_, s, _)| s == "skip").collect();
    eprintln!("{kernel} arm64 futex skips ({}):", skipped.len());
    for (n, _, m) in &skipped {
        eprintln!("  {n}: {m}");
    }
}
