//! Runs the GitHub workflow's steps locally, in order, through the same
//! `ci/` scripts: plan -> two shards -> merge, on a small real matrix
//! (real VMs: gated by `HARNESS_VM_TESTS=1` like `tests/vm.rs`). The merged
//! JUnit must hold every cell of the plan exactly once.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn script(name: &str, args: &[&str], matrix: &Path) -> std::process::Output {
    script_env(name, args, matrix, &[])
}

fn script_env(
    name: &str,
    args: &[&str],
    matrix: &Path,
    env: &[(&str, &Path)],
) -> std::process::Output {
    let out = Command::new("bash")
        .arg(root().join("ci").join(name))
        .args(args)
        .envs(env.iter().copied())
        .env("MATRIX", matrix)
        // The test's own build, not a second (release) one.
        .env("HARNESS_BIN", env!("CARGO_BIN_EXE_harness"))
        .env_remove("GITHUB_OUTPUT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ci/{name} {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn plan_two_shards_merge_covers_every_cell_once() {
    if std::env::var_os("HARNESS_VM_TESTS").is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI must run the VM tests");
        eprintln!("skipping: set HARNESS_VM_TESTS=1");
        return;
    }
    let matrix = root().join("harness/tests/fixtures/ci/mini-matrix.yaml");
    let work = tempfile::tempdir().unwrap();

    let plan = script("plan.sh", &["2"], &matrix);
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let cells: Vec<String> = plan["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(cells.len(), 4, "{plan}");
    let shards: Vec<String> = plan["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["shard"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(shards, ["1/2", "2/2"]);

    let mut dirs = Vec::new();
    for s in &shards {
        let dir = work.path().join(format!("shard-{}", s.replace('/', "-")));
        script("run-shard.sh", &[s, dir.to_str().unwrap()], &matrix);
        dirs.push(dir);
    }
    let merged = work.path().join("merged.xml");
    let mut args = vec![merged.to_str().unwrap()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    script("merge.sh", &args, &matrix);

    let xml = std::fs::read_to_string(&merged).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let mut suites: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|n| n.attribute("name").unwrap().to_string())
        .collect();
    suites.sort();
    let mut want = cells.clone();
    want.sort();
    assert_eq!(suites, want, "every planned cell exactly once");
    let failures = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure") || n.has_tag_name("error"))
        .count();
    assert_eq!(failures, 0, "{xml}");

    // The report job: the shards' results joined, the HTML report of the
    // run, and the job summary comparing it with the base branch's last
    // run (here: itself, so nothing regressed).
    let report = work.path().join("report");
    let summary = work.path().join("summary.md");
    let mut args = vec![report.to_str().unwrap()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    let base = work.path().join("base.json");
    script_env(
        "report.sh",
        &args,
        &matrix,
        &[("GITHUB_STEP_SUMMARY", &summary), ("BASE", &base)],
    );
    let joined: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("results.json")).unwrap())
            .unwrap();
    let mut names: Vec<String> = joined["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, want, "the joined results hold every cell once");
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    for c in &cells {
        assert!(html.contains(c.as_str()), "the report names {c}");
    }
    assert!(
        html.contains("data-status=\"passed\"") && !html.contains("data-status=\"failed\""),
        "every cell passed"
    );
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.contains("4 cells (0 not passed): "), "{text}");
    assert!(text.contains("| kernel | "), "the grid: {text}");
    assert!(text.contains("No earlier run of the base branch"), "{text}");

    // With the base branch's results: the comparison is in the summary.
    std::fs::copy(report.join("results.json"), &base).unwrap();
    std::fs::remove_file(&summary).unwrap();
    script_env(
        "report.sh",
        &args,
        &matrix,
        &[("GITHUB_STEP_SUMMARY", &summary), ("BASE", &base)],
    );
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.contains("no regression from A to B"), "{text}");
}
