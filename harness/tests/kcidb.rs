//! The KCIDB document (`--kcidb`, `harness report kcidb`) checked with
//! KernelCI's own validator (`kcidb_common`): fixtures of every status, a
//! patched `source:` kernel, a benchmark and a panicking guest; stable ids;
//! old results files; usage errors; a real 2-cell matrix, and a real cell
//! with a known failure (xfail in every report, an unused entry stale, an
//! unused intermittent one unseen) (VM tier).

mod common;
mod kcidb_common;

use harness::reporter::kcidb::Kcidb;
use kcidb_common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

#[test]
fn fixtures_of_every_status_make_a_valid_document_that_report_kcidb_reproduces() {
    let d = tempfile::tempdir().unwrap();
    let started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_583_200);
    let outcomes = outcomes(d.path(), started);
    let doc_path = d.path().join("kcidb.json");
    let json_path = d.path().join("results.json");
    let mut k = Kcidb::new(&doc_path, opts());
    let mut j = harness::reporter::json::Json::new(&json_path);
    run_events(&outcomes, started, &mut [&mut k, &mut j]);
    let bytes = std::fs::read(&doc_path).unwrap();
    validate(&bytes);
    let doc: Value = serde_json::from_slice(&bytes).unwrap();

    // Every status of the mapping, from the verdict.
    let statuses: BTreeSet<&str> = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["DONE", "ERROR", "FAIL", "MISS", "PASS", "SKIP"]
            .into_iter()
            .collect()
    );
    for t in doc["tests"].as_array().unwrap() {
        assert!(t["id"].as_str().unwrap().starts_with("futex_ci:"), "{t}");
        assert!(
            t["path"].as_str().unwrap().starts_with("futex_harness."),
            "{t}"
        );
    }
    let pass = one(&doc, "futex_harness.futex.futex-numa.flag-accepted", "/2n/");
    assert_eq!(pass["status"], "PASS");
    assert_eq!(pass["start_time"], "2025-12-01T10:00:00.000000+00:00");
    let env = &pass["environment"]["misc"];
    assert_eq!(env["topology"]["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(
        env["topology"]["distances"],
        serde_json::json!([[10, 20], [20, 10]])
    );
    assert_eq!(env["accel"], "tcg");
    assert!(env["qemu_version"].as_str().unwrap().contains("10.0.2"));
    assert_eq!(env["expect"], "prctl=1,private_hash=1,numa=1");
    let files = pass["output_files"].as_array().unwrap();
    assert_eq!(files[0]["url"], format!("{BASE}/cell0/console.log"));
    assert_eq!(files[1]["url"], format!("{BASE}/cell0/junit.xml"));
    let known = one(
        &doc,
        "futex_harness.futex.futex-resize.set0-vs-thread-create",
        "/2n/",
    );
    // An expected failure is still the kernel failing: FAIL, marked xfail,
    // tied by an incident to the known failure's issue.
    assert_eq!(known["status"], "FAIL");
    assert_eq!(known["misc"]["xfail"], true);
    assert_eq!(known["misc"]["known_failure"]["entry"], "matrix.yaml:85:9");
    let known_issue = doc["issues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["misc"]["known_failure"] == "matrix.yaml:85:9")
        .expect("an issue for the known failure");
    assert!(doc["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["issue_id"] == known_issue["id"] && i["test_id"] == known["id"]));
    let suite_run = one(&doc, "futex_harness.futex", "/2n/");
    assert_eq!(
        (suite_run["status"].as_str(), suite_run["duration"].as_f64()),
        (Some("PASS"), Some(12.5))
    );

    // The failed cell: the hostile message arrives without its NUL, the
    // WARNING is its own case, in misc, and an issue with an incident.
    let bad = one(&doc, "futex_harness.futex.futex_basic.bad-flags", "/1n/");
    assert_eq!(bad["status"], "FAIL");
    assert!(bad["log_excerpt"].as_str().unwrap().contains("<\"&'>"));
    let warn = one(
        &doc,
        "futex_harness.futex.futex_basic.kernel-warning",
        "/1n/",
    );
    assert_eq!(warn["misc"]["kernel_reports"][0]["kind"], "warning");

    // The panicking guest: the test it interrupted fails with the reports,
    // the one it never reached is MISS.
    let cut = one(&doc, "futex_harness.smoke.smoke._incomplete_", "immutable");
    assert_eq!(cut["status"], "FAIL");
    let kinds: Vec<&str> = cut["misc"]["kernel_reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"panic") && kinds.contains(&"bug"),
        "{kinds:?}"
    );
    assert!(cut["log_excerpt"]
        .as_str()
        .unwrap()
        .contains("Kernel panic - not syncing"));
    assert_eq!(
        one(&doc, "futex_harness.smoke.futex-prctl", "immutable")["status"],
        "MISS"
    );
    let issues = doc["issues"].as_array().unwrap();
    let incidents = doc["incidents"].as_array().unwrap();
    for kind in ["panic", "bug", "warning"] {
        assert!(
            issues.iter().any(|i| i["misc"]["kind"] == kind),
            "{kind}: {issues:?}"
        );
    }
    assert!(incidents
        .iter()
        .any(|i| i["test_id"] == cut["id"] && i["present"] == true));
    for i in incidents {
        assert!(issues.iter().any(|s| s["id"] == i["issue_id"]));
    }

    // The patched source kernel's checkout and build.
    let builds = doc["builds"].as_array().unwrap();
    let checkouts = doc["checkouts"].as_array().unwrap();
    assert_eq!((builds.len(), checkouts.len()), (3, 3));
    let patched = builds
        .iter()
        .find(|b| b["config_name"] == "7.3-immutable")
        .unwrap();
    assert_eq!(patched["compiler"], "gcc (Debian 14.2.0-19) 14.2.0");
    assert_eq!(patched["duration"], 301.5);
    assert_eq!(patched["status"], "PASS");
    assert_eq!(patched["architecture"], "x86_64");
    assert_eq!(
        patched["log_url"],
        format!("{BASE}/kbuild/7.3-immutable/0123456789abcdef0123/build.log")
    );
    let co = checkouts
        .iter()
        .find(|c| c["id"] == patched["checkout_id"])
        .unwrap();
    let want = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(format!("{PATCH_SHA}\n")))
    };
    assert_eq!(co["patchset_hash"], want.as_str());
    assert_eq!(co["tree_name"], "debian");
    assert_eq!(
        co["patchset_files"][0],
        serde_json::json!({
            "name": "0001-futex-immutable private hash.patch",
            "url": format!("{BASE}/patches/7.3-immutable/0001-futex-immutable%20private%20hash.patch"),
        })
    );
    let git = checkouts
        .iter()
        .find(|c| c["git_repository_url"].is_string())
        .unwrap();
    assert_eq!(git["git_commit_hash"], "a1".repeat(20));
    assert_eq!(git["git_repository_branch"], "v7.3");
    assert_eq!(git["patchset_hash"], "");
    let debian = builds
        .iter()
        .find(|b| b["config_name"] == "linux-image-7.3.4+deb13-cloud-amd64")
        .unwrap();
    assert!(debian.get("duration").is_none() && debian.get("log_url").is_none());

    // The benchmark: a number in ops/s, DONE; the skipped one SKIP.
    let measured = one(&doc, "futex_harness.bench.futex-bench.private", "bench");
    assert_eq!(measured["status"], "DONE");
    assert_eq!(measured["number"]["unit"], "ops/s");
    assert!((measured["number"]["value"].as_f64().unwrap() - 1.1e6).abs() < 1.0);
    assert_eq!(
        one(&doc, "futex_harness.bench.futex-bench.immutable", "bench")["status"],
        "SKIP"
    );

    // Cells that could not run, never started, or were interrupted.
    let error = one(&doc, "futex_harness.futex", "mainline/1n");
    assert_eq!(error["status"], "ERROR");
    assert!(error["log_excerpt"]
        .as_str()
        .unwrap()
        .contains("QEMU refused"));
    let never = one(&doc, "futex_harness.smoke", "debian-7.3.4/1n");
    assert_eq!(never["status"], "MISS");
    // The placeholder joined its kernel's build.
    assert_eq!(never["build_id"], pass["build_id"]);
    assert_eq!(
        one(&doc, "futex_harness.smoke", "debian-7.3.4/2n")["status"],
        "MISS"
    );

    // `harness report kcidb` of the JSON results file: the same bytes.
    let again = d.path().join("again.json");
    let r = harness()
        .args([
            "report",
            "kcidb",
            "--origin",
            ORIGIN,
            "--log-base-url",
            BASE,
            "--results",
        ])
        .arg(&json_path)
        .arg("-o")
        .arg(&again)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(
        std::fs::read(&again).unwrap() == bytes,
        "report kcidb differs from --kcidb"
    );
}

#[test]
fn times_come_out_of_the_results_file_exactly_as_the_run_had_them() {
    // serde_json parses floats best-effort, so both paths read them from text.
    let d = tempfile::tempdir().unwrap();
    for k in 0..40u64 {
        let started = SystemTime::UNIX_EPOCH
            + Duration::from_nanos(1_764_583_201_123_456_789 + k * 1_000_003_331);
        let mut outcomes = outcomes(d.path(), started);
        for o in &mut outcomes {
            o.duration = Duration::from_nanos(12_345_678_901 + k * 7_919_113);
        }
        let (doc, json) = (d.path().join("k.json"), d.path().join("r.json"));
        let mut kcidb = Kcidb::new(&doc, opts());
        let mut results = harness::reporter::json::Json::new(&json);
        run_events(&outcomes, started, &mut [&mut kcidb, &mut results]);
        let again = harness::reporter::kcidb::convert(&json, &opts()).unwrap();
        assert!(std::fs::read(&doc).unwrap() == again, "run {k}");
    }
}

#[test]
fn ids_do_not_change_when_the_same_inputs_run_again() {
    let d = tempfile::tempdir().unwrap();
    let ids = |at: u64| {
        let started = SystemTime::UNIX_EPOCH + Duration::from_secs(at);
        let mut outcomes = outcomes(d.path(), started);
        for o in &mut outcomes {
            o.duration += Duration::from_secs(at % 7);
        }
        let path = d.path().join(format!("{at}.json"));
        let mut k = Kcidb::new(&path, opts());
        run_events(&outcomes, started, &mut [&mut k]);
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let mut ids = Vec::new();
        for list in ["checkouts", "builds", "tests", "issues", "incidents"] {
            for o in doc[list].as_array().unwrap() {
                ids.push(o["id"].as_str().unwrap().to_string());
            }
        }
        (ids, doc)
    };
    let (first, doc1) = ids(1_764_583_200);
    let (second, doc2) = ids(1_764_590_000);
    assert_eq!(first, second);
    assert_ne!(doc1, doc2, "the times differ");
    let unique: BTreeSet<&String> = first.iter().collect();
    let tests = doc1["tests"].as_array().unwrap().len();
    assert!(
        unique.len() == first.len() && tests > 20,
        "{} ids, {tests} tests",
        unique.len()
    );
}

#[test]
fn a_results_file_without_the_new_fields_still_converts() {
    let d = tempfile::tempdir().unwrap();
    let old = d.path().join("old.json");
    std::fs::write(
        &old,
        r#"{"schema_version": 1, "run": {"harness_version": "0.1.0", "qemu_version": "QEMU 9", "host_cpus": 2, "started": 1764583200.5},
           "cells": [{"name": "debian-7.3/1n/smoke", "kernel": "debian:7.3", "kernel_name": "debian-7.3", "topology": "1n",
                      "suite": "smoke", "expect": null, "status": "passed", "error": null, "duration_s": 9.5,
                      "counts": {"pass": 1, "fail": 0, "skip": 0},
                      "vm": {"accel": "kvm", "qemu_version": "QEMU 9", "end": "guest-init finished the plan", "started": 1764583201.0,
                             "console_reports": [], "console_log": "out/x/console.log", "notes": []},
                      "cases": [{"name": "smoke/futex-wait", "status": "pass", "message": null}]}]}"#,
    )
    .unwrap();
    let r = harness()
        .args(["report", "kcidb", "--origin", ORIGIN, "--results"])
        .arg(&old)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    validate(&r.stdout);
    let doc: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(
        doc["tests"][1]["path"],
        "futex_harness.smoke.smoke.futex-wait"
    );
    assert_eq!(doc["builds"][0]["config_name"], "debian:7.3");

    // Not a results file, a newer layout, a bad origin: usage errors.
    std::fs::write(d.path().join("bad.json"), "[1]").unwrap();
    std::fs::write(d.path().join("new.json"), r#"{"schema_version": 2}"#).unwrap();
    for (file, origin, says) in [
        ("bad.json", ORIGIN, "not a JSON results file"),
        ("new.json", ORIGIN, "schema_version 2"),
        ("missing.json", ORIGIN, "cannot read"),
        ("old.json", "Futex-CI", "[a-z0-9_]+"),
    ] {
        let r = harness()
            .args(["report", "kcidb", "--origin", origin, "--results"])
            .arg(d.path().join(file))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(says), "{file}: {err}");
    }
}

#[test]
fn a_bad_origin_stops_run_and_matrix_before_anything_boots() {
    let d = tempfile::tempdir().unwrap();
    let start = Instant::now();
    for line in [
        "run --kernel debian:7.3 --kcidb k.json --origin Not-Valid",
        "run --kernel debian:7.3 --kcidb k.json",
        "run --kernel debian:7.3 --origin ci",
        "matrix --kcidb k.json --origin ci:x",
        "run --kernel debian:7.3 --kcidb k.json --origin ci --log-base-url logs/",
    ] {
        let args: Vec<&str> = line.split_whitespace().collect();
        let r = harness()
            .current_dir(d.path())
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(
            r.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    assert!(start.elapsed() < Duration::from_secs(20));
    assert!(!d.path().join("k.json").exists());
}

// ---------------------------------------------------------------- VM tier

const TWO_CELLS: &str = "kernels:
  - name: debian-7.3
    spec: debian:7.3
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

#[test]
fn a_real_two_cell_matrix_writes_a_valid_document() {
    if !common::enabled() {
        return;
    }
    let _vm = common::vm_lock();
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("matrix.yaml");
    std::fs::write(&m, TWO_CELLS).unwrap();
    let (doc_path, json_path) = (d.path().join("kcidb.json"), d.path().join("results.json"));
    let r = harness()
        .arg("matrix")
        .arg("--matrix")
        .arg(&m)
        .arg("--out")
        .arg(d.path().join("out"))
        .arg("--json")
        .arg(&json_path)
        .arg("--kcidb")
        .arg(&doc_path)
        .args(["--origin", "futex_harness_vm", "--log-base-url", BASE])
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let bytes = std::fs::read(&doc_path).unwrap();
    validate(&bytes);
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc["builds"].as_array().unwrap().len(), 1);
    assert_eq!(doc["builds"][0]["status"], "PASS");
    let suites = tests_of(&doc, "futex_harness.smoke");
    assert_eq!(suites.len(), 2, "one suite run per cell");
    assert!(suites.iter().all(|t| t["status"] == "PASS"));
    let topology_nodes: BTreeSet<usize> = suites
        .iter()
        .map(|t| {
            t["environment"]["misc"]["topology"]["nodes"]
                .as_array()
                .unwrap()
                .len()
        })
        .collect();
    assert_eq!(topology_nodes, [1, 2].into_iter().collect());
    assert!(doc["tests"].as_array().unwrap().len() > 4);
    assert!(doc["tests"][0]["output_files"][0]["url"]
        .as_str()
        .unwrap()
        .ends_with("/console.log"));
    let again = harness()
        .args([
            "report",
            "kcidb",
            "--origin",
            "futex_harness_vm",
            "--log-base-url",
            BASE,
            "--results",
        ])
        .arg(&json_path)
        .output()
        .unwrap();
    assert!(again.status.success());
    assert!(again.stdout == bytes, "report kcidb differs from --kcidb");
}

/// A suite with one failure known exactly and one entry that excuses
/// nothing: the failure is xfail in every report, the cell passes, and the
/// unused entry is reported stale.
const KNOWN: &str = "kernels:
  - name: debian-7.3
    spec: debian:7.3
topologies:
  - name: 1n
    nodes: [{cpus: 1, mem: 384M}]
suites:
  - name: faults
    tests:
      - {bin: fault, name: exits1, args: [exit, '1']}
      - {bin: fault, name: exits0, args: [exit, '0']}
    known_failures:
      - case: exits1
        message: 'exited with status 1'
        kernel: [debian-7.3]
        reason: 'known exactly'
      - case: exits0
        message: 'exited with status 1'
        kernel: [debian-7.3]
        reason: 'outlived its bug'
      - case: exits0
        message: 'exited with status 2'
        kernel: [debian-7.3]
        reason: 'a race'
        intermittent: '1 of 3 runs'
overrides:
  - accel: tcg
";

#[test]
fn a_known_failure_is_xfail_in_every_report_and_an_unused_entry_stale() {
    if !common::enabled() {
        return;
    }
    let _vm = common::vm_lock();
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("matrix.yaml");
    std::fs::write(&m, KNOWN).unwrap();
    let (doc_path, json_path, out) = (
        d.path().join("kcidb.json"),
        d.path().join("results.json"),
        d.path().join("out"),
    );
    let r = harness()
        .arg("matrix")
        .arg("--matrix")
        .arg(&m)
        .arg("--out")
        .arg(&out)
        .arg("--json")
        .arg(&json_path)
        .arg("--kcidb")
        .arg(&doc_path)
        .args(["--origin", "futex_harness_vm"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr),
    );
    // Expected results only: exit 0.
    assert_eq!(r.status.code(), Some(0), "{stdout}\n{stderr}");
    let entry = format!("{}:13:7", m.display());
    let stale_entry = format!("{}:17:7", m.display());
    let unseen_entry = format!("{}:21:7", m.display());
    // Terminal: the cell line counts it, the case is shown with its entry.
    assert!(
        stderr.contains("PASS debian-7.3/1n/faults (")
            && stderr.contains(" 0 failed, 1 xfail, 0 skipped)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "  XFAIL exits1: exited with status 1 (known failure, {entry})"
        )),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!(
            "STALE known failure {stale_entry} (suite faults, case exits0"
        )),
        "{stdout}"
    );
    // The intermittent entry that did not fire is unseen, not stale.
    assert!(
        stdout.contains(&format!(
            "UNSEEN intermittent known failure {unseen_entry} (suite faults, case exits0, message \"exited with status 2\"): did not fire in this run (seen: 1 of 3 runs)"
        )) && !stdout.contains(&format!("STALE known failure {unseen_entry}")),
        "{stdout}"
    );

    // JUnit: a skip of type xfail, never a pass or a plain skip.
    let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let jdoc = roxmltree::Document::parse(&xml).unwrap();
    let case = jdoc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some("exits1"))
        .expect("exits1 in JUnit");
    let skipped = case
        .children()
        .find(|n| n.has_tag_name("skipped"))
        .expect("xfail is a typed skip");
    assert_eq!(skipped.attribute("type"), Some("xfail"));
    assert_eq!(
        skipped.attribute("message"),
        Some("xfail: exited with status 1")
    );
    assert!(case
        .descendants()
        .any(|p| p.attribute("name") == Some("known_failure")
            && p.attribute("value") == Some(entry.as_str())));

    // JSON: status xfail with the entry; counted apart; the stale entry.
    let results: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let cell = &results["cells"][0];
    let c = cell["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "exits1")
        .unwrap();
    assert_eq!(
        (&c["status"], &c["message"], &c["known_failure"]["entry"]),
        (
            &Value::from("xfail"),
            &Value::from("exited with status 1"),
            &Value::from(entry.as_str())
        )
    );
    assert_eq!(cell["counts"]["xfail"], 1);
    assert_eq!(cell["counts"]["fail"], 0);
    let stale = results["run"]["stale_known_failures"].as_array().unwrap();
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(stale[0]["entry"], stale_entry.as_str());
    let unseen = results["run"]["unseen_known_failures"].as_array().unwrap();
    assert_eq!(unseen.len(), 1, "{unseen:?}");
    assert_eq!(
        (&unseen[0]["entry"], &unseen[0]["intermittent"]),
        (
            &Value::from(unseen_entry.as_str()),
            &Value::from("1 of 3 runs")
        )
    );

    // KCIDB, checked by kcidb-io: FAIL (the kernel did fail), marked, and
    // tied by an incident to the known failure's issue.
    let bytes = std::fs::read(&doc_path).unwrap();
    validate(&bytes);
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    let t = tests_of(&doc, "futex_harness.faults.exits1");
    assert_eq!(t.len(), 1, "{doc:#}");
    assert_eq!(t[0]["status"], "FAIL");
    assert_eq!(t[0]["misc"]["xfail"], true);
    let issue = doc["issues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["misc"]["known_failure"] == entry.as_str())
        .expect("an issue for the entry");
    assert!(doc["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["issue_id"] == issue["id"] && i["test_id"] == t[0]["id"]));
}
