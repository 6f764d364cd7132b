//! `harness compare` and the results history with real VMs: a case made
//! to fail and another fixed between two runs exits 1 naming both; two
//! green runs exit 0 (read back from the history); a matrix killed by
//! SIGKILL mid-run leaves a sound history listing its finished cells.
//! Gated like `vm.rs`: only with `HARNESS_VM_TESTS=1`; under `CI` without
//! it they fail. Cases are made to fail with the `fault` guest binary's
//! `exit CODE`.

mod common;
use common::{enabled, processes_with, vm_lock, wait_for};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn harness(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.args(args).stdin(Stdio::null());
    c
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A one-cell matrix `k/t/pair` whose cases `alpha` and `beta` exit with
/// the given statuses (0 passes, 1 fails).
fn pair_matrix(alpha: u8, beta: u8) -> String {
    format!(
        "kernels:
  - name: k
    spec: {kernel}
topologies:
  - name: t
    nodes: [{{cpus: 1, mem: 256M}}]
suites:
  - name: pair
    tests:
      - {{bin: fault, name: alpha, args: [exit, '{alpha}'], timeout: 30s}}
      - {{bin: fault, name: beta, args: [exit, '{beta}'], timeout: 30s}}
overrides:
  - accel: tcg
",
        kernel = common::kernel()
    )
}

/// Runs the pair matrix in `dir` with `--json FILE`; returns the file.
fn run_pair(dir: &Path, name: &str, alpha: u8, beta: u8) -> PathBuf {
    let matrix = dir.join(format!("{name}.yaml"));
    std::fs::write(&matrix, pair_matrix(alpha, beta)).unwrap();
    let json = dir.join(format!("{name}.json"));
    let out = dir.join("out");
    let o = harness(&[
        "matrix",
        "--matrix",
        matrix.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let want = if alpha == 0 && beta == 0 { 0 } else { 1 };
    assert_eq!(o.status.code(), Some(want), "{}", text(&o));
    json
}

/// `harness history ARGS`, which must exit 0: its rows, after the header.
fn history_rows(args: &[&str]) -> Vec<String> {
    let mut all = vec!["history"];
    all.extend(args);
    let o = harness(&all).output().unwrap();
    let listed = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!("harness {}:\n{listed}", all.join(" "));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    listed.lines().skip(1).map(String::from).collect()
}

#[test]
fn a_new_failure_and_a_fix_exit_1_and_two_green_runs_exit_0() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    let a = run_pair(dir.path(), "a", 0, 1);
    let b = run_pair(dir.path(), "b", 1, 0);
    let o = harness(&["compare", a.to_str().unwrap(), b.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!("compare A B:\n{said}");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        said.contains("new failures (1):\n  k/t/pair alpha: pass -> fail"),
        "{said}"
    );
    assert!(
        said.contains("fixed (1):\n  k/t/pair beta: fail -> pass\n"),
        "{said}"
    );
    assert!(said.ends_with("B regressed against A\n"), "{said}");
    // The same as JSON.
    let o = harness(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ])
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["new_failures"][0]["case"], "alpha");
    assert_eq!(v["fixes"][0]["case"], "beta");
    assert_eq!(v["regressed"], true);

    // Two green runs, compared from the history the runs wrote under --out.
    run_pair(dir.path(), "green1", 0, 0);
    run_pair(dir.path(), "green2", 0, 0);
    let out = dir.path().join("out");
    let o = harness(&[
        "compare",
        "previous",
        "last",
        "--out",
        out.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!("compare previous last:\n{said}");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(said.ends_with("no regression from A to B\n"), "{said}");
    // All four runs are in the history, finished, newest first.
    let rows = history_rows(&["--out", out.to_str().unwrap()]);
    assert_eq!(rows.len(), 4, "{rows:#?}");
    assert!(rows.iter().all(|r| r.contains(" finished ")), "{rows:#?}");
    assert!(rows[0].contains("green2.yaml"), "{rows:#?}");
}

#[test]
fn a_matrix_killed_mid_run_leaves_a_sound_history_with_its_finished_cells() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("harness.test_marker=history_{}", std::process::id());
    // Weights 2, 1, 0: with -j 1 the cells run first, second, third.
    let yaml = format!(
        "kernels:
  - name: k
    spec: {kernel}
topologies:
  - name: t
    nodes: [{{cpus: 1, mem: 256M}}]
suites:
  - name: first
    builtin: smoke
    weight: 2
  - name: second
    builtin: smoke
    weight: 1
  - name: third
    builtin: smoke
    weight: 0
overrides:
  - {{accel: tcg, cmdline: '{marker}'}}
",
        kernel = common::kernel()
    );
    let matrix = dir.path().join("matrix.yaml");
    std::fs::write(&matrix, yaml).unwrap();
    let out = dir.path().join("out");
    let db = dir.path().join("h/history.sqlite");
    let mut child = harness(&[
        "matrix",
        "--matrix",
        matrix.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--history",
        db.to_str().unwrap(),
        "-j",
        "1",
        "--boot-per-cell",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let pid = child.id();
    let _kill = common::KillOnDrop(pid);
    // By the second cell's boot the first is recorded.
    common::signal_during_second_cell(
        pid,
        &out.join("cells/k/t/first/junit.xml"),
        &marker,
        libc::SIGKILL,
    );
    child.wait().unwrap();
    wait_for("QEMU to go away", Duration::from_secs(15), || {
        processes_with(&marker).is_empty()
    });
    let check = Command::new("sqlite3")
        .arg(&db)
        .arg("pragma integrity_check")
        .output()
        .expect("sqlite3 (apt-get install sqlite3)");
    assert_eq!(
        String::from_utf8_lossy(&check.stdout),
        "ok\n",
        "{}",
        text(&check)
    );
    let cells = Command::new("sqlite3")
        .arg(&db)
        .arg("select name, status from cells order by id")
        .output()
        .unwrap();
    let cells = String::from_utf8_lossy(&cells.stdout).into_owned();
    assert!(cells.starts_with("k/t/first|passed\n"), "{cells}");
    assert!(!cells.contains("third"), "{cells}");
    let rows = history_rows(&["--db", db.to_str().unwrap()]);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    // Killed: not finished, with its finished cell (the first; the second
    // only if it ended in the moment before the kill).
    let n: usize = cells.lines().count();
    assert!(
        rows[0].contains(&format!(" open      {n:>5} ")),
        "{rows:#?}\n{cells}"
    );
}
