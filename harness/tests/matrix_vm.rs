//! `harness matrix` with real VMs: a 2 kernels x 2 topologies smoke matrix
//! end to end, a 2-cell results file against `docs/results.schema.json`, a
//! cell with a `shares:` directory and its artifacts share, and SIGINT in
//! the middle of a matrix. Gated like `vm.rs`: only with
//! `HARNESS_VM_TESTS=1`; under `CI` without it they fail.

mod common;
use common::{
    case, enabled, parse_junit, processes_with, results_schema_errors, vm_lock, wait_for,
};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn harness(matrix: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.arg("matrix")
        .arg("--matrix")
        .arg(matrix)
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdin(Stdio::null());
    c
}

/// (testsuite name, status property) of a report.
fn statuses(path: &Path) -> Vec<(String, String)> {
    let xml = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|ts| {
            let status = ts
                .descendants()
                .filter(|p| p.has_tag_name("property") && p.attribute("name") == Some("status"))
                .find_map(|p| p.attribute("value"))
                .unwrap_or("")
                .to_string();
            (ts.attribute("name").unwrap_or("").to_string(), status)
        })
        .collect()
}

const MINI: &str = "kernels:
  - name: debian-7.3
    spec: debian:7.3
  - name: debian-6.18
    spec: debian:6.18
topologies:
  - name: 1n
    nodes: [{cpus: 1, mem: 384M}]
  - name: 2n
    nodes: [{cpus: 1, mem: 384M}, {cpus: 1, mem: 384M}]
suites:
  - name: smoke
    builtin: smoke
overrides:
  - accel: tcg
";

/// A finished run of the mini matrix (exit 0) in its own temp dir.
struct MiniRun {
    _dir: tempfile::TempDir,
    matrix: PathBuf,
    out: PathBuf,
    stdout: String,
    stderr: String,
    /// The `--json` results file.
    results: serde_json::Value,
}

/// Runs the mini matrix with `--json` and `extra`; it must pass.
fn run_mini(extra: &[&str]) -> MiniRun {
    let dir = tempfile::tempdir().unwrap();
    let matrix = dir.path().join("matrix.yaml");
    std::fs::write(&matrix, MINI).unwrap();
    let out = dir.path().join("out");
    let json = dir.path().join("results.json");
    let mut args = vec!["--json", json.to_str().unwrap()];
    args.extend(extra);
    let r = harness(&matrix, &out, &args).output().unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    assert_eq!(
        r.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let results = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    MiniRun {
        _dir: dir,
        matrix,
        out,
        stdout,
        stderr,
        results,
    }
}

#[test]
fn mini_matrix_runs_end_to_end() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    // `_dir` keeps the temp dir to the end of the test.
    let MiniRun {
        _dir,
        matrix: m,
        out,
        stdout,
        stderr,
        results: doc,
    } = run_mini(&[]);
    let want = [
        "debian-7.3/1n/smoke",
        "debian-7.3/2n/smoke",
        "debian-6.18/1n/smoke",
        "debian-6.18/2n/smoke",
    ];
    let got = statuses(&out.join("junit.xml"));
    assert_eq!(
        got,
        want.iter()
            .map(|n| (n.to_string(), "passed".to_string()))
            .collect::<Vec<_>>()
    );
    for n in want {
        let cell: PathBuf = out.join("cells").join(n);
        assert_eq!(
            statuses(&cell.join("junit.xml")),
            [(n.to_string(), "passed".to_string())]
        );
        assert!(cell.join("console.log").is_file(), "{n}: console log");
    }
    // The JSON reporter saw the same cells and cases as the JUnit one.
    assert_eq!(doc["schema_version"], 1);
    let cells = doc["cells"].as_array().unwrap();
    let names: Vec<&str> = cells.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, want);
    for (c, n) in cells.iter().zip(want) {
        assert_eq!(c["status"], "passed", "{c}");
        let junit_cases = parse_junit(
            &std::fs::read_to_string(out.join("cells").join(n).join("junit.xml")).unwrap(),
        );
        assert_eq!(
            c["cases"].as_array().unwrap().len(),
            junit_cases.len(),
            "{n}"
        );
        assert_eq!(c["vm"]["accel"], "tcg");
    }
    assert!(doc["run"]["stats"]["cells_wall_s"].as_f64().unwrap() > 0.0);
    // Under round-robin TCG the four cells start together: one normal per
    // core, the rest at SCHED_IDLE (harness::fill), and those say so.
    let idle_notes = cells
        .iter()
        .filter(|c| {
            c["vm"]["notes"].as_array().unwrap().iter().any(|n| {
                n.as_str()
                    .unwrap()
                    .starts_with("host: started at SCHED_IDLE")
            })
        })
        .count();
    if stderr.contains("at SCHED_IDLE filling") {
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(idle_notes, 4usize.saturating_sub(cores), "{doc}");
    } else {
        assert_eq!(idle_notes, 0, "no filling without it: {stderr}");
    }
    // The summary table: one row per kernel, one column per topology.
    let row = stdout
        .lines()
        .find(|l| l.starts_with("debian-6.18"))
        .unwrap();
    assert_eq!(
        row.split_whitespace().filter(|w| w.ends_with('s')).count(),
        2,
        "{row}"
    );
    assert!(
        stdout.contains("cells: 4 passed, 0 failed, 0 not run"),
        "{stdout}"
    );
    // Nothing failed: --rerun-failed has nothing to do.
    let r = harness(&m, &out, &["--rerun-failed"]).output().unwrap();
    assert_eq!(r.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&r.stderr).contains("rerunning 0 cells"));
}

#[test]
fn a_two_cell_matrix_writes_a_results_file_the_schema_accepts() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    // One kernel of the mini matrix: its two topologies.
    let doc = run_mini(&["--kernel", "debian-7.3"]).results;
    let errors = results_schema_errors(&doc);
    assert!(errors.is_empty(), "{}\n{doc:#}", errors.join("\n"));
    let names: Vec<&str> = doc["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["debian-7.3/1n/smoke", "debian-7.3/2n/smoke"]);
}

#[test]
fn sigint_leaves_no_qemu_and_reports_finished_and_not_run_cells() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("harness.test_marker=matrix_{}", std::process::id());
    // Costs 3, 2, 1: with -j 1 they run smoke, second, then (never) later.
    let text = format!(
        "kernels:
  - name: k
    spec: debian:7.3
topologies:
  - name: t
    nodes: [{{cpus: 1, mem: 256M}}]
suites:
  - name: smoke
    builtin: smoke
    weight: 2
  - name: second
    builtin: smoke
    weight: 1
  - name: later
    builtin: smoke
    weight: 0
overrides:
  - {{accel: tcg, cmdline: '{marker}'}}
"
    );
    let m = dir.path().join("matrix.yaml");
    std::fs::write(&m, text).unwrap();
    let out = dir.path().join("out");
    let mut child = harness(&m, &out, &["-j", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let _kill = common::KillOnDrop(pid);
    common::signal_during_second_cell(
        pid,
        &out.join("cells/k/t/smoke/junit.xml"),
        &marker,
        libc::SIGINT,
    );
    let status = child.wait().unwrap();
    wait_for("QEMU to go away", Duration::from_secs(15), || {
        processes_with(&marker).is_empty()
    });
    assert_eq!(status.code(), Some(130), "{status:?}");
    let got = statuses(&out.join("junit.xml"));
    let got: Vec<(&str, &str)> = got.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(
        got,
        [
            ("k/t/smoke", "passed"),
            ("k/t/second", "interrupted"),
            ("k/t/later", "not-run")
        ]
    );
}

/// The `note` properties of a report.
fn notes(path: &Path) -> Vec<String> {
    let xml = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    doc.descendants()
        .filter(|p| p.has_tag_name("property") && p.attribute("name") == Some("note"))
        .filter_map(|p| p.attribute("value").map(String::from))
        .collect()
}

#[test]
fn a_cell_mounts_its_shares_and_its_artifacts_land_next_to_its_junit() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    // The read-only share, named relative to the matrix file. The
    // `artifact` binary lies in it, so it runs from the share (not packed):
    // nothing runs unless the share is mounted.
    let ro = dir.path().join("ro");
    std::fs::create_dir_all(ro.join("bin")).unwrap();
    std::fs::write(ro.join("data.txt"), b"keep me").unwrap();
    let bin = ro.join("bin/artifact");
    let built = harness::guestbin::GuestBins::locate_or_build()
        .unwrap()
        .path("artifact")
        .unwrap();
    std::fs::copy(built, &bin).unwrap();
    let text = format!(
        "kernels:
  - name: k
    spec: debian:7.3.4
topologies:
  - name: 1n
    nodes: [{{cpus: 1, mem: 384M}}]
suites:
  - name: art
    tests:
      - {{bin: {bin}, name: write, args: [write, '1']}}
      - {{bin: {bin}, name: readonly, args: [readonly, /mnt/ro]}}
shares:
  - ro:/mnt/ro:ro
overrides:
  - accel: tcg
",
        bin = bin.display()
    );
    let m = dir.path().join("matrix.yaml");
    std::fs::write(&m, text).unwrap();
    let out = dir.path().join("out");
    let r = harness(&m, &out, &[]).output().unwrap();
    let all = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(r.status.code(), Some(0), "{all}");
    let cell = out.join("cells/k/1n/art");
    let junit = cell.join("junit.xml");
    assert_eq!(
        statuses(&junit),
        [("k/1n/art".to_string(), "passed".to_string())]
    );
    let cases = parse_junit(&std::fs::read_to_string(&junit).unwrap());
    for n in [
        "write/write",
        "write/read-back",
        "readonly/mnt-ro-create-erofs",
        "readonly/mnt-ro-open-write-erofs",
        "readonly/mnt-ro-read",
    ] {
        let c = case(&cases, n);
        assert!(c.failure.is_none() && c.skipped.is_none(), "{c:?}\n{all}");
    }
    let cell_notes = notes(&junit);
    assert!(
        cell_notes
            .iter()
            .any(|n| n.contains("runs from share share0 as /mnt/ro/bin/artifact")),
        "{cell_notes:#?}"
    );
    // The artifact is beside the cell's junit.xml, intact, and an attachment.
    let file = std::fs::canonicalize(cell.join("artifacts/artifact-1MiB.bin")).unwrap();
    let mut expected = vec![0u8; 1 << 20];
    guest_tests::artifact::stream().fill(&mut expected);
    assert!(
        std::fs::read(&file).unwrap() == expected,
        "{}",
        file.display()
    );
    let attachment = format!("[[ATTACHMENT|{}]]", file.display());
    assert!(cell_notes.contains(&attachment), "{cell_notes:#?}");
    assert!(notes(&out.join("junit.xml")).contains(&attachment));
    // Read-only for real: the host directory is untouched.
    assert_eq!(std::fs::read(ro.join("data.txt")).unwrap(), b"keep me");
    assert!(!ro.join(".harness-write-probe").exists());
}
