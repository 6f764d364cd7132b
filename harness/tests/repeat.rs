//! `harness run --repeat N` / `--until-fail` on a real kernel: a guest
//! binary that fails from its 7th run in a boot is stopped at iteration 7
//! with that iteration's logs kept; a passing futex case repeated 20 times
//! reports 20/20 in the terminal, the JUnit properties and the JSON.
//!
//! Real VMs (TCG here), so they run only with `HARNESS_VM_TESTS=1`; the
//! kernel is `$HARNESS_TEST_KERNEL` (default `debian:7.3.4`).

mod common;
use common::{enabled, kernel, text, vm_lock};

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(dir: &Path, suite: &str, extra: &[&str]) -> Output {
    let t0 = std::time::Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_harness"))
        .stdin(Stdio::null())
        .env_remove("HARNESS_FORCE_KVM")
        .args([
            "run",
            "--kernel",
            &kernel(),
            "--topology",
            "nodes=2,cpus=1,mem=512M",
        ])
        .args(["--suite", suite, "--accel", "tcg", "--no-artifacts"])
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .arg("--json")
        .arg(dir.join("results.json"))
        .arg("--out")
        .arg(dir.join("out"))
        .args(extra)
        .output()
        .unwrap();
    eprintln!(
        "harness run --suite {suite} {}: {:.1} s\n{}",
        extra.join(" "),
        t0.elapsed().as_secs_f64(),
        text(&o)
    );
    o
}

/// The `<property>` values of testcase `case` in a JUnit document.
fn case_properties(xml: &str, case: &str) -> Vec<(String, String)> {
    let doc = roxmltree::Document::parse(xml).expect("well-formed JUnit");
    let tc = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(case))
        .unwrap_or_else(|| panic!("no testcase {case} in {xml}"));
    tc.descendants()
        .filter(|n| n.has_tag_name("property"))
        .map(|n| {
            (
                n.attribute("name").unwrap_or("").to_string(),
                n.attribute("value").unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn prop<'a>(props: &'a [(String, String)], name: &str) -> Option<&'a str> {
    props
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn until_fail_stops_at_the_failing_iteration_and_keeps_its_logs() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let d = tempfile::tempdir().unwrap();
    let o = run(d.path(), "fault-flaky", &["--until-fail", "--max", "20"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout
            .contains("FAIL flaky/run-counter (6/7): failed in 1 of 7 runs, first in iteration 7"),
        "{}",
        text(&o)
    );
    assert!(stdout.contains("until-fail (max 20), one boot: 7 iteration(s) ran"));

    let xml = std::fs::read_to_string(d.path().join("junit.xml")).unwrap();
    let p = case_properties(&xml, "flaky/run-counter");
    assert_eq!(prop(&p, "runs"), Some("7"), "{p:?}");
    assert_eq!(prop(&p, "failures"), Some("1"));
    assert_eq!(prop(&p, "first_failure"), Some("7"));

    // Iteration 7's own console and KTAP, and nothing of an 8th.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("results.json")).unwrap()).unwrap();
    let cell = &json["cells"][0];
    assert_eq!(cell["repeat"]["iterations"], 7, "{cell}");
    assert_eq!(cell["repeat"]["first_failure"], 7);
    let kept = Path::new(cell["repeat"]["failing_iteration_logs"].as_str().unwrap()).to_path_buf();
    assert!(kept.ends_with("iteration-7"), "{}", kept.display());
    let ktap = std::fs::read_to_string(kept.join("results.ktap")).unwrap();
    assert!(ktap.starts_with("# harness iteration 7\n"), "{ktap}");
    assert!(ktap.contains("# run 7, failing from run 7"), "{ktap}");
    assert!(ktap.contains("not ok 1 run-counter"), "{ktap}");
    assert!(!ktap.contains("iteration 8"), "{ktap}");
    let console = std::fs::read_to_string(kept.join("console.log")).unwrap();
    assert!(console.contains("harness: iteration 7"), "{console}");
    assert!(console.contains("harness: begin 8 flaky"), "{console}");
    assert!(!console.contains("harness: iteration 6"), "{console}");
    let whole = std::fs::read_to_string(kept.parent().unwrap().join("results.ktap")).unwrap();
    assert!(
        !whole.contains("iteration 8"),
        "the guest went on after the failure:\n{whole}"
    );
}

#[test]
fn repeat_20_of_a_passing_case_reports_20_of_20() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let d = tempfile::tempdir().unwrap();
    let o = run(
        d.path(),
        "futex",
        &["--test", "futex-prctl/set-16", "--repeat", "20"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("PASS futex-prctl/set-16 (20/20)"),
        "{}",
        text(&o)
    );
    assert!(stdout.contains("every case passed in all 20 iterations"));
    // Only the selected case ran (no other futex-prctl case is reported).
    assert!(!stdout.contains("futex-prctl/set-2 "), "{stdout}");

    let xml = std::fs::read_to_string(d.path().join("junit.xml")).unwrap();
    let p = case_properties(&xml, "futex-prctl/set-16");
    assert_eq!(prop(&p, "runs"), Some("20"), "{p:?}");
    assert_eq!(prop(&p, "failures"), Some("0"));
    assert_eq!(prop(&p, "first_failure"), None);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("results.json")).unwrap()).unwrap();
    let cases = json["cells"][0]["cases"].as_array().unwrap();
    let c = cases
        .iter()
        .find(|c| c["name"] == "futex-prctl/set-16")
        .unwrap();
    assert_eq!(c["repeat"]["runs"], 20, "{c}");
    assert_eq!(c["status"], "pass");
}
