//! The HTML report: `harness report html` on a hand-written results file
//! (quick), and `harness matrix --html` on a real 4-cell matrix with one
//! failing case, loaded in headless Chromium with the network off (VM
//! tier, gated like `vm.rs` by `HARNESS_VM_TESTS`; under `CI` a missing
//! Chromium fails the test instead of skipping it).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const HOSTILE: &str = "<script>alert(1)</script>";
const ESCAPED: &str = "&lt;script&gt;alert(1)&lt;/script&gt;";

fn harness() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.stdin(Stdio::null());
    c
}

/// What a page that loads nothing may not hold (guest text aside, which
/// is escaped text and never an attribute that fetches).
fn external_references(html: &str) -> Vec<&'static str> {
    [
        "href=\"http",
        "href=\"//",
        "src=",
        "<link",
        "@import",
        "url(",
    ]
    .into_iter()
    .filter(|r| html.contains(r))
    .collect()
}

/// The opening tag of the element with `id`.
fn tag_of<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no element {id}"));
    let start = html[..at].rfind('<').unwrap();
    &html[start..at + html[at..].find('>').unwrap() + 1]
}

/// The element with `id` up to the end of its section.
fn section_of<'a>(html: &'a str, id: &str) -> &'a str {
    let tag = tag_of(html, id);
    let start = html.find(tag).unwrap();
    &html[start..start + html[start..].find("</section>").unwrap()]
}

#[test]
fn report_html_renders_results_files_and_names_a_bad_one() {
    let d = tempfile::tempdir().unwrap();
    let results = serde_json::json!({
        "schema_version": 1,
        "run": {"harness_version": "0.1.0", "qemu_version": "QEMU 10", "host_cpus": 2, "started": 1.7e9},
        "cells": [
            {"name": "debian-7.3/1n/smoke", "kernel": "debian:7.3", "kernel_name": "debian-7.3",
             "topology": "1n", "suite": "smoke", "status": "passed", "duration_s": 10.0,
             "counts": {"pass": 1, "fail": 0, "xfail": 0, "skip": 0},
             "cases": [{"name": "smoke/boots", "status": "pass", "message": null}],
             "out_dir": "out/cells/debian-7.3/1n/smoke"},
            {"name": "debian-7.3/2n/smoke", "kernel": "debian:7.3", "kernel_name": "debian-7.3",
             "topology": "2n", "suite": "smoke", "status": "failed", "duration_s": 11.0,
             "counts": {"pass": 0, "fail": 1, "xfail": 0, "skip": 0},
             "cases": [{"name": "hostile/fail", "status": "fail", "message": HOSTILE}],
             "out_dir": "out/cells/debian-7.3/2n/smoke"}
        ]
    });
    let json = d.path().join("results.json");
    std::fs::write(&json, results.to_string()).unwrap();
    let page = d.path().join("sub/report.html");
    let r = harness()
        .args(["report", "html"])
        .arg(&json)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains(HOSTILE) && html.contains(ESCAPED));
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert_eq!(external_references(&html), Vec::<&str>::new());
    let failed = tag_of(&html, "cell-debian-7.3_2n_smoke");
    assert!(failed.contains("data-status=\"failed\""), "{failed}");
    assert!(tag_of(&html, "filter-status").starts_with("<select"));
    eprintln!("report of 2 cells: {} bytes", html.len());

    // A file that is no results file: exit 2, named.
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, "[1, 2]").unwrap();
    let r = harness()
        .args(["report", "html"])
        .arg(&json)
        .arg(&bad)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{}: not a results file", bad.display())),
        "{stderr}"
    );
}

/// Headless Chromium, or `None` with the reason (a failure under `CI`).
fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser"] {
        let found = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        });
        if found.is_some() {
            return found;
        }
    }
    let why = "chromium is not installed (apt-get install chromium): \
               the HTML report's browser test needs it";
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipping: {why}");
    None
}

/// Chromium headless with the network off, on `url`, with `args`.
fn browse(chromium: &Path, args: &[&str], url: &str) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    let r = Command::new(chromium)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "chromium {args:?} {url}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    r
}

/// The requests a page made (not the browser's own, whose initiator is
/// "not an origin"), from Chromium's net log of loading `url`.
fn page_requests(chromium: &Path, url: &str) -> Vec<String> {
    let log = tempfile::NamedTempFile::new().unwrap();
    browse(
        chromium,
        &[
            &format!("--log-net-log={}", log.path().display()),
            "--dump-dom",
        ],
        url,
    );
    let events: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(log.path()).unwrap()).unwrap();
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            let p = &e["params"];
            let initiator = p["initiator"].as_str()?;
            (initiator != "not an origin").then(|| p["url"].as_str().unwrap_or("?").to_string())
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Two kernels, two topologies, `smoke` on three of the four pairs and a
/// suite on the fourth cell whose first case fails with hostile text and
/// whose second makes the kernel report a hung task (a real kernel report,
/// with its console excerpt, attributed to that test).
const MATRIX: &str = "kernels:
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
  - name: hostile
    tests:
      - {bin: fault, name: hostile, args: [fail, '<script>alert(1)</script>']}
      - {bin: fault, name: hung-task, args: [hung-task], timeout: 60s}
cells:
  suites: [smoke]
  exclude:
    - {kernel: debian-6.18, topology: 2n}
  include:
    - {kernel: debian-7.3, topology: 1n, suite: hostile}
overrides:
  - accel: tcg
";

#[test]
fn a_matrix_report_shows_the_failure_as_text_and_filters_in_a_browser() {
    if !common::enabled() {
        return;
    }
    let Some(chromium) = chromium() else { return };
    let _vm = common::vm_lock();
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("matrix.yaml");
    std::fs::write(&m, MATRIX).unwrap();
    let page = d.path().join("report.html");
    let r = harness()
        .arg("matrix")
        .arg("--matrix")
        .arg(&m)
        .arg("--out")
        .arg(d.path().join("out"))
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr),
    );
    // One case failed: exit 1.
    assert_eq!(r.status.code(), Some(1), "{stdout}\n{stderr}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(external_references(&html), Vec::<&str>::new());
    assert_eq!(html.matches("<section class=\"cell").count(), 4, "4 cells");
    assert!(!html.contains(HOSTILE), "raw guest markup in the page");

    // Kept where a person can look at it after the test.
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report_html");
    std::fs::create_dir_all(&keep).unwrap();
    let kept = keep.join("report.html");
    std::fs::copy(&page, &kept).unwrap();
    let url = format!("file://{}", kept.display());

    // No request left the page. The check can fail: a page that fetches
    // is seen doing it.
    let control = keep.join("control.html");
    std::fs::write(&control, "<img src=\"http://example.invalid/x.png\">").unwrap();
    let seen = page_requests(&chromium, &format!("file://{}", control.display()));
    assert_eq!(
        seen,
        ["http://example.invalid/x.png"],
        "the net log sees a page's request"
    );
    assert_eq!(page_requests(&chromium, &url), Vec::<String>::new());

    // The DOM after the script ran: the failure is text, the cell failed.
    let dom = String::from_utf8(browse(&chromium, &["--dump-dom"], &url).stdout).unwrap();
    let failing = section_of(&dom, "cell-debian-7.3_1n_hostile");
    assert!(failing.contains("data-status=\"failed\""), "{failing}");
    assert!(failing.contains(ESCAPED), "{failing}");
    // The kernel's report (its case, the title and the console excerpt)
    // and the QEMU command the cell booted with.
    for want in [
        "hung-task/kernel-hung-task",
        "blocked for more than",
        "INFO: task",
        "<summary>QEMU command</summary><pre>",
        "qemu-system-x86_64 ",
    ] {
        assert!(failing.contains(want), "no {want:?} in {failing}");
    }
    assert!(
        !dom.contains(HOSTILE),
        "the guest's script became an element"
    );
    assert_eq!(
        dom.matches("<script").count(),
        1,
        "the page's own script only"
    );
    // Without a filter every section shows, and the filters are shown.
    assert!(!tag_of(&dom, "cell-debian-7.3_1n_smoke").contains("hidden"));
    assert!(!tag_of(&dom, "filters").contains("hidden"));

    // `#status=failed`: the passing cells are hidden.
    let filtered = String::from_utf8(
        browse(&chromium, &["--dump-dom"], &format!("{url}#status=failed")).stdout,
    )
    .unwrap();
    for id in [
        "cell-debian-7.3_1n_smoke",
        "cell-debian-7.3_2n_smoke",
        "cell-debian-6.18_1n_smoke",
    ] {
        let tag = tag_of(&filtered, id);
        assert!(
            tag.contains("data-status=\"passed\"") && tag.contains("hidden"),
            "{tag}"
        );
    }
    assert!(!tag_of(&filtered, "cell-debian-7.3_1n_hostile").contains("hidden"));
    assert!(filtered.contains("1 of 4 cells shown"));

    let png = keep.join("report.png");
    let _ = std::fs::remove_file(&png);
    browse(
        &chromium,
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1280,2000",
        ],
        &url,
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG at {}", png.display());
    eprintln!("screenshot: {}", png.display());
    eprintln!("report: {} ({} bytes)", kept.display(), html.len());
}
