use super::*;
use crate::results::{
    Bench, Case, Cell, Counts, KernelReport, KnownFailureRef, Profile, Results, Vm,
};

const HOSTILE: &str = "<script>alert(1)</script>";

fn cell(kernel: &str, topology: &str, suite: &str, status: &str) -> Cell {
    Cell {
        name: format!("{kernel}/{topology}/{suite}"),
        kernel: format!("debian:{kernel}"),
        kernel_name: kernel.into(),
        topology: topology.into(),
        suite: suite.into(),
        status: status.into(),
        duration_s: 12.5,
        counts: Counts {
            pass: 3,
            ..Counts::default()
        },
        out_dir: format!("out/cells/{kernel}/{topology}/{suite}"),
        cases: vec![Case {
            name: "smoke/boots".into(),
            status: "pass".into(),
            ..Case::default()
        }],
        ..Cell::default()
    }
}

/// Two kernels x two topologies of `smoke`, one failing with hostile text
/// everywhere the guest reaches, plus a bench cell.
fn fixture() -> Results {
    let mut failing = cell("7.3", "2n", "smoke", "failed");
    failing.counts = Counts {
        pass: 1,
        fail: 1,
        xfail: 1,
        skip: 1,
    };
    failing.cases = vec![
        Case {
            name: format!("futex-numa/{HOSTILE}"),
            status: "fail".into(),
            message: Some(HOSTILE.into()),
            ..Case::default()
        },
        Case {
            name: "futex-numa/known".into(),
            status: "xfail".into(),
            message: Some("timed out".into()),
            known_failure: Some(KnownFailureRef {
                entry: "matrix.yaml:13:7".into(),
                reason: "a known race".into(),
            }),
            ..Case::default()
        },
        Case {
            name: "futex-numa/skipped".into(),
            status: "skip".into(),
            message: Some("no FUTEX2_NUMA".into()),
            ..Case::default()
        },
    ];
    failing.vm = Some(Vm {
        accel: "tcg".into(),
        end: "guest-init finished the plan".into(),
        console_log: Some("out/cells/7.3/2n/smoke/console.log".into()),
        qemu_command: "/usr/bin/qemu-system-x86_64 -m 1024M -append 'console=ttyS0 a<b'".into(),
        notes: vec![format!("note {HOSTILE} https://example.invalid/x")],
        kernel_reports: vec![KernelReport {
            kind: "warning".into(),
            test: Some("futex-numa".into()),
            case: None,
            line: 42,
            title: format!("WARNING: at {HOSTILE}"),
            excerpt: "line 41\nWARNING: at kernel/futex/core.c:1\nline 43".into(),
        }],
        profile: Profile {
            phases: [("boot".to_string(), 3.0), ("tests".to_string(), 9.0)]
                .into_iter()
                .collect(),
            tests: Vec::new(),
        },
        ..Vm::default()
    });
    let mut bench = cell("7.0", "2n", "bench", "passed");
    bench.bench = vec![Bench {
        test: "futex-bench".into(),
        config: "global".into(),
        ops_per_s: 1.5e6,
        sd: 1e5,
        n: 3,
        ..Bench::default()
    }];
    Results {
        schema_version: 1,
        cells: vec![
            cell("7.3", "1n", "smoke", "passed"),
            failing,
            cell("7.0", "1n", "smoke", "passed"),
            cell("7.0", "2n", "smoke", "not-run"),
            bench,
        ],
        ..Results::default()
    }
}

/// The opening tag of the section with `id`.
fn section_tag<'a>(page: &'a str, id: &str) -> &'a str {
    let at = page
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no {id}"));
    let start = page[..at].rfind('<').unwrap();
    let end = at + page[at..].find('>').unwrap();
    &page[start..=end]
}

#[test]
fn guest_text_is_escaped_everywhere() {
    let page = render(&[fixture()]);
    assert!(!page.contains(HOSTILE), "raw guest markup in the page");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // One script element: the page's own.
    assert_eq!(page.matches("<script").count(), 1);
    assert_eq!(
        Esc("a\"b'c&\u{0}\u{1b}").to_string(),
        "a&quot;b&#39;c&amp;\u{fffd}\u{fffd}"
    );
}

#[test]
fn the_failing_cell_is_marked_with_its_counts_and_why() {
    let page = render(&[fixture()]);
    let tag = section_tag(&page, "cell-7.3_2n_smoke");
    assert!(tag.starts_with("<section class=\"cell s-failed\""), "{tag}");
    for attr in [
        "data-status=\"failed\"",
        "data-kernel=\"7.3\"",
        "data-topology=\"2n\"",
        "data-suite=\"smoke\"",
    ] {
        assert!(tag.contains(attr), "{attr} in {tag}");
    }
    assert!(section_tag(&page, "cell-7.3_1n_smoke").contains("data-status=\"passed\""));
    // The grid links to it with its counts.
    assert!(page.contains(
        "href=\"#cell-7.3_2n_smoke\" data-status=\"failed\" data-kernel=\"7.3\" data-topology=\"2n\" data-suite=\"smoke\""
    ));
    assert!(page.contains("1 pass · 1 fail · 1 xfail · 1 skip"));
    // The cases with why, the report with its excerpt, the time.
    assert!(page.contains("data-case-status=\"fail\""));
    assert!(page.contains("known failure matrix.yaml:13:7: a known race"));
    assert!(page.contains("no FUTEX2_NUMA"));
    assert!(page.contains("WARNING: at kernel/futex/core.c:1"));
    assert!(page.contains("during futex-numa"));
    assert!(page.contains("<svg class=\"phases\""));
    assert!(page.contains("out/cells/7.3/2n/smoke/qemu-argv.txt"));
    // The command itself, escaped.
    assert!(page.contains(
        "<summary>QEMU command</summary><pre>/usr/bin/qemu-system-x86_64 -m 1024M -append &#39;console=ttyS0 a&lt;b&#39;</pre>"
    ));
    assert!(page.contains("id=\"summary\">5 cells: <span class=\"badge s-failed\">1 failed</span>"));
}

#[test]
fn the_grid_has_a_table_per_suite_and_the_filters_every_name() {
    let page = render(&[fixture()]);
    assert_eq!(page.matches("<table class=\"grid\"").count(), 2);
    for id in [
        "filter-status",
        "filter-kernel",
        "filter-topology",
        "filter-suite",
    ] {
        assert!(page.contains(&format!("<select id=\"{id}\"")), "{id}");
    }
    assert!(page.contains("<option value=\"7.0\">7.0</option>"));
    assert!(page.contains("<option value=\"not-run\">not-run</option>"));
    assert!(page.contains("<section id=\"bench\">"));
    assert!(page.contains("futex-bench/global on 2n (bench)"));
}

#[test]
fn nothing_is_fetched() {
    let page = render(&[fixture()]);
    // The one address is the guest's note, escaped inside a list item.
    let outside: Vec<&str> = page
        .match_indices("http")
        .map(|(i, _)| &page[i.saturating_sub(60)..i + 30])
        .filter(|around| !around.contains("note &lt;script&gt;"))
        .collect();
    assert!(outside.is_empty(), "{outside:#?}");
    for tag in ["<link", "<img", "<iframe", "src="] {
        assert!(!page.contains(tag), "{tag}");
    }
}

#[test]
fn several_runs_share_one_page_with_unique_ids() {
    let page = render(&[fixture(), fixture()]);
    assert!(page.contains("id=\"cell-7.3_2n_smoke\""));
    assert!(page.contains("id=\"cell-7.3_2n_smoke-2\""));
    assert!(page.contains("10 cells"));
    // An empty run is still a page.
    assert!(render(&[Results::default()]).contains("0 cells"));
}

#[test]
fn the_reporter_rewrites_the_page_as_cells_finish() {
    use crate::events::{CellMeta, CellOutcome, CellStatus, HostFacts};
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("report.html");
    let mut h = Html::new(&path);
    let meta = CellMeta {
        index: 0,
        name: "k/t/smoke".into(),
        kernel: "debian:7.3".into(),
        kernel_name: "k".into(),
        topology: "t".into(),
        suite: "smoke".into(),
        expect: None,
        out_dir: d.path().into(),
        facts: None,
    };
    h.report(&Event::RunStarted {
        cells: vec![meta.clone()],
        host: HostFacts {
            qemu_version: "QEMU 10".into(),
            harness_version: "0.1.0".into(),
        },
        at: std::time::SystemTime::now(),
    })
    .unwrap();
    let page = std::fs::read_to_string(&path).unwrap();
    assert!(page.contains("data-status=\"not-run\""));
    h.report(&Event::CellFinished(Box::new(CellOutcome::without_result(
        meta,
        CellStatus::Failed,
    ))))
    .unwrap();
    let page = std::fs::read_to_string(&path).unwrap();
    assert!(page.contains("<section class=\"cell s-failed\" id=\"cell-k_t_smoke\""));
}

#[test]
fn a_bad_results_file_is_named() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("r.json");
    std::fs::write(&p, "{\"cells\": 3}").unwrap();
    let e = read(&p).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: not a results file", p.display())),
        "{e}"
    );
    assert!(read(&d.path().join("none.json")).is_err());
}
