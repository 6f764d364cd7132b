//! The JSON results file (docs/results.md) against its schema,
//! `docs/results.schema.json`: what the reporter writes from fixtures that
//! go through the real verdict (`kcidb_common`) is valid, from the first
//! write (every cell not-run) to the last, with every cell status and a
//! repeated cell, and documents the writer never writes are refused. The
//! schema is generated from `harness/src/results.rs`; the file must be
//! what it generates.
//! Quick tier, no VM; the real matrix's file is checked in `matrix_vm.rs`.

mod common;
mod kcidb_common;

use common::results_schema_errors;
use harness::events::{CellOutcome, Event, HostFacts};
use harness::repeat::Repeat;
use harness::reporter::json::Json;
use harness::reporter::Reporter;
use harness::result::BootRetry;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

fn started() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_583_200)
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn assert_valid(doc: &Value) {
    let errors = results_schema_errors(doc);
    assert!(
        errors.is_empty(),
        "docs/results.schema.json refuses the document:\n{}\n{doc:#}",
        errors.join("\n")
    );
}

/// The results file of a whole run of `outcomes`, as the reporter leaves it.
fn results_of(outcomes: &[CellOutcome], dir: &Path) -> Value {
    let path = dir.join("results.json");
    let mut j = Json::new(&path);
    kcidb_common::run_events(outcomes, started(), &mut [&mut j]);
    read(&path)
}

fn words<'a>(values: impl Iterator<Item = &'a Value>) -> BTreeSet<&'a str> {
    values.map(|v| v.as_str().unwrap()).collect()
}

#[test]
fn a_two_cell_run_with_a_passing_and_a_failing_cell_is_valid_from_first_write_to_last() {
    let d = tempfile::tempdir().unwrap();
    // Cell 0 passes with a known failure, cell 1 fails (a failed case,
    // a kernel WARNING, a hostile message).
    let outcomes = kcidb_common::outcomes(d.path(), started());
    let two = &outcomes[..2];

    // The first write: every cell listed as not run, no stats yet.
    let path = d.path().join("first.json");
    let mut j = Json::new(&path);
    j.report(&Event::RunStarted {
        cells: two.iter().map(|o| o.meta.clone()).collect(),
        host: HostFacts {
            qemu_version: "QEMU emulator version 10.0.2".into(),
            harness_version: "0.1.0".into(),
        },
        at: started(),
    })
    .unwrap();
    let first = read(&path);
    assert!(first["run"].get("stats").is_none());
    assert_eq!(
        words(
            first["cells"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| &c["status"])
        ),
        BTreeSet::from(["not-run"])
    );
    assert_valid(&first);

    let doc = results_of(two, d.path());
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(
        (&cells[0]["status"], &cells[1]["status"]),
        (&json!("passed"), &json!("failed"))
    );
    let cases = || cells.iter().flat_map(|c| c["cases"].as_array().unwrap());
    assert_eq!(
        words(cases().map(|c| &c["status"])),
        BTreeSet::from(["fail", "pass", "skip", "xfail"])
    );
    assert!(
        cases().any(|c| c["status"] == "xfail"
            && c["known_failure"]["entry"].as_str() == Some("matrix.yaml:85:9")
            && c["message"].as_str().is_some_and(|m| m.contains("EBUSY"))),
        "{doc:#}"
    );
    assert_eq!(cells[0]["counts"]["xfail"], 1, "{doc:#}");
    assert!(!cells[1]["vm"]["kernel_reports"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(doc["run"]["stats"].is_object());
    assert_valid(&doc);
}

/// `o` as a repeated cell (`--until-fail`) whose cases are those of
/// `earlier` and then its own, in two iterations.
fn repeated(mut o: CellOutcome, earlier: &CellOutcome) -> CellOutcome {
    let until_fail = Repeat {
        times: 5,
        until_fail: true,
        fresh_boot: false,
    };
    let (cases, mut summary) =
        harness::repeat::aggregate(until_fail, &[earlier.cases.clone(), o.cases.clone()]);
    summary.kept = Some(o.meta.out_dir.join("iteration-2"));
    o.cases = cases;
    o.repeat = Some(Box::new(summary));
    o
}

#[test]
fn every_cell_status_benchmarks_kernel_facts_panics_and_repeats_are_valid() {
    let d = tempfile::tempdir().unwrap();
    let mut outcomes = kcidb_common::outcomes(d.path(), started());
    outcomes[1] = repeated(outcomes[1].clone(), &outcomes[0]);
    // The passing cell booted twice: its first boot crashed as known.
    outcomes[0].result.as_mut().unwrap().boot_retries = vec![BootRetry {
        signature: "qemu7-tcg-debian-6.12".into(),
        attempt: 1,
        line: "[    0.9] traps: PANIC: double fault, error_code: 0x0".into(),
    }];
    // An intermittent known failure that did not fire in this run.
    let known = &mut outcomes[0].result.as_mut().unwrap().known_failures;
    let mut racy = known[0].clone();
    racy.at = "matrix.yaml:90:9".into();
    racy.message = "a race that did not fire".into();
    racy.intermittent = Some("1 of 6 full tiers".into());
    known.push(racy);
    let doc = results_of(&outcomes, d.path());
    assert_eq!(
        doc["run"]["unseen_known_failures"][0]["intermittent"],
        "1 of 6 full tiers"
    );
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells[0]["vm"]["boot_retries"][0]["attempt"], 1);
    assert_eq!(cells[1]["vm"]["boot_retries"], json!([]));
    assert_eq!(cells[1]["repeat"]["first_failure"], 2, "{:#}", cells[1]);
    assert!(cells[1]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["repeat"]["failures"] == 1));
    assert_eq!(
        words(cells.iter().map(|c| &c["status"])),
        BTreeSet::from(["error", "failed", "interrupted", "not-run", "passed"])
    );
    assert!(cells
        .iter()
        .any(|c| !c["bench"].as_array().unwrap().is_empty()));
    assert!(cells.iter().any(|c| c["kernel_facts"]["patches"]
        .as_array()
        .is_some_and(|p| !p.is_empty())));
    assert_valid(&doc);
}

#[test]
fn the_schema_refuses_what_the_writer_never_writes() {
    let d = tempfile::tempdir().unwrap();
    let outcomes = kcidb_common::outcomes(d.path(), started());
    let good = results_of(&outcomes[..2], d.path());
    assert_valid(&good);
    // What is wrong, where the validator must say so, and the change.
    type Mutation = fn(&mut Value);
    let bad: &[(&str, &str, Mutation)] = &[
        ("a cell status that is no status", "/cells/1/status", |v| {
            v["cells"][1]["status"] = json!("broken")
        }),
        (
            "a case status in the cell's words",
            "/cells/0/cases/0/status",
            |v| v["cells"][0]["cases"][0]["status"] = json!("passed"),
        ),
        ("a missing run field", "/run", |v| {
            v["run"].as_object_mut().unwrap().remove("harness_version");
        }),
        ("a missing cell field", "/cells/0", |v| {
            v["cells"][0].as_object_mut().unwrap().remove("out_dir");
        }),
        ("another schema version", "/schema_version", |v| {
            v["schema_version"] = json!(2)
        }),
        (
            "a field the writer does not write",
            "/cells/0/cases/0",
            |v| v["cells"][0]["cases"][0]["extra"] = json!(1),
        ),
        ("an error on a cell that ran", "/cells/0/error", |v| {
            v["cells"][0]["error"] = json!("why")
        }),
        (
            "a failed case without its message",
            "/cells/1/cases/",
            |v| {
                let cases = v["cells"][1]["cases"].as_array_mut().unwrap();
                let fail = cases.iter_mut().find(|c| c["status"] == "fail").unwrap();
                fail["message"] = Value::Null;
            },
        ),
        ("an unknown kernel report kind", "/cells/1/vm", |v| {
            v["cells"][1]["vm"]["console_reports"] = json!(["gremlin"])
        }),
        ("a time as a string", "/run/started", |v| {
            v["run"]["started"] = json!("2025-12-01T10:00:00Z")
        }),
        (
            "a case's repeat without its counts",
            "/cells/0/cases/0",
            |v| v["cells"][0]["cases"][0]["repeat"] = json!({"runs": 3}),
        ),
        ("a negative count", "/cells/0/counts/pass", |v| {
            v["cells"][0]["counts"]["pass"] = json!(-1)
        }),
        ("a vm without its boot retries", "/cells/0/vm", |v| {
            v["cells"][0]["vm"]
                .as_object_mut()
                .unwrap()
                .remove("boot_retries");
        }),
        ("a boot retry of no known signature", "/cells/0/vm", |v| {
            v["cells"][0]["vm"]["boot_retries"] =
                json!([{"signature": "any-panic", "attempt": 1, "line": "x"}])
        }),
        ("a boot retry of attempt 0", "/cells/0/vm", |v| {
            v["cells"][0]["vm"]["boot_retries"] =
                json!([{"signature": "qemu7-tcg-debian-6.12", "attempt": 0, "line": "x"}])
        }),
    ];
    for (what, at, mutate) in bad {
        let mut doc = good.clone();
        mutate(&mut doc);
        assert_ne!(doc, good, "{what}: the mutation changed nothing");
        let errors = results_schema_errors(&doc);
        assert!(
            errors.iter().any(|e| e.starts_with(at)),
            "{what}: no error at {at}: {errors:?}"
        );
    }
}

#[test]
fn the_schema_file_is_the_one_the_model_generates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results.schema.json");
    let on_disk = std::fs::read_to_string(&path).unwrap();
    assert!(
        on_disk == harness::results::schema_text(),
        "{} is not what harness/src/results.rs generates; run `cargo xtask results-schema`",
        path.display()
    );
}

#[test]
fn the_schema_names_exactly_the_retried_signatures() {
    let schema = harness::results::schema().to_value();
    let listed = words(
        schema["$defs"]["BootRetry"]["properties"]["signature"]["enum"]
            .as_array()
            .unwrap()
            .iter(),
    );
    let names: BTreeSet<&str> = harness::cell::boot_retry::SIGNATURES
        .iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(listed, names);
}
