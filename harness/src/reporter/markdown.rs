//! The run as Markdown, for a CI job's summary (GitHub's
//! `$GITHUB_STEP_SUMMARY`) or a mail: the counts, a kernel x topology grid
//! per suite, and each cell that did not pass with its failing cases and
//! kernel reports. `--markdown FILE` on `run` and `matrix` (rewritten as
//! cells finish, atomically) and `harness report markdown RESULTS...`
//! draw the same text from the typed results ([`crate::results`]).
//!
//! Guest text is untrusted: messages and titles go into code spans with
//! every backtick, pipe and line break replaced, and are cut to
//! [`MAX_TEXT`] characters, so a guest cannot open a link, an image, an
//! HTML tag or a table cell of its own, nor grow the summary past GitHub's
//! 1 MiB limit ([`MAX_FAILURES`] cases and kernel reports per cell).

use super::json::Document;
use super::{write_atomic, ReportError, Reporter};
use crate::events::Event;
use crate::results::{Cell, Counts, Results};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Characters of one message or title kept.
pub const MAX_TEXT: usize = 300;
/// Failing cases listed per cell (the rest are counted).
pub const MAX_FAILURES: usize = 20;

/// The `--markdown FILE` reporter.
pub struct Markdown {
    path: PathBuf,
    doc: Document,
}

impl Markdown {
    /// The summary at `path`.
    pub fn new(path: &Path) -> Markdown {
        Markdown {
            path: path.to_path_buf(),
            doc: Document::new(),
        }
    }
}

impl Reporter for Markdown {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        if !self.doc.observe(event) {
            return Ok(());
        }
        write_atomic(&self.path, render(&[self.doc.results()]).as_bytes())
    }
}

/// Guest or user text as one inline code span: no backtick, pipe, angle
/// bracket or line break survives, and at most [`MAX_TEXT`] characters.
fn code(text: &str) -> String {
    let mut s: String = text
        .chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .take(MAX_TEXT)
        .map(|c| match c {
            '`' => '\'',
            '|' => '/',
            '\n' | '\t' => ' ',
            c => c,
        })
        .collect();
    if text.chars().count() > MAX_TEXT {
        s.push_str(" ...");
    }
    let s = s.trim();
    if s.is_empty() {
        "` `".to_string()
    } else {
        format!("` {s} `")
    }
}

fn add(total: &mut Counts, c: &Counts) {
    total.pass += c.pass;
    total.fail += c.fail;
    total.xfail += c.xfail;
    total.skip += c.skip;
}

fn counts(c: &Counts) -> String {
    format!(
        "{} pass, {} fail, {} xfail, {} skip",
        c.pass, c.fail, c.xfail, c.skip
    )
}

/// The Markdown of one or more results files (the shards of one run, or
/// runs side by side), cells in the files' order.
pub fn render(results: &[&Results]) -> String {
    let cells: Vec<&Cell> = results.iter().flat_map(|r| &r.cells).collect();
    let mut total = Counts::default();
    cells.iter().for_each(|c| add(&mut total, &c.counts));
    let not_passed: Vec<&&Cell> = cells.iter().filter(|c| c.status != "passed").collect();
    let mut out = String::from("## Kernel test results\n\n");
    let _ = writeln!(
        out,
        "{} cell{} ({} not passed): {}\n",
        cells.len(),
        if cells.len() == 1 { "" } else { "s" },
        not_passed.len(),
        counts(&total)
    );
    let suites: BTreeSet<&str> = cells.iter().map(|c| c.suite.as_str()).collect();
    for suite in suites {
        grid(&mut out, suite, &cells);
    }
    for c in not_passed {
        cell(&mut out, c);
    }
    out
}

/// The kernel x topology table of one suite: each entry a status and counts.
fn grid(out: &mut String, suite: &str, cells: &[&Cell]) {
    let of_suite: Vec<&&Cell> = cells.iter().filter(|c| c.suite == suite).collect();
    let mut kernels: Vec<&str> = Vec::new();
    let mut topologies: Vec<&str> = Vec::new();
    for c in &of_suite {
        if !kernels.contains(&c.kernel_name.as_str()) {
            kernels.push(&c.kernel_name);
        }
        if !topologies.contains(&c.topology.as_str()) {
            topologies.push(&c.topology);
        }
    }
    let _ = writeln!(out, "### Suite {}\n", code(suite));
    let _ = writeln!(
        out,
        "| kernel | {} |",
        topologies
            .iter()
            .map(|t| code(t))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(topologies.len()));
    for k in kernels {
        let row: Vec<String> = topologies
            .iter()
            .map(|t| {
                of_suite
                    .iter()
                    .find(|c| c.kernel_name == k && c.topology == *t)
                    .map_or(String::new(), |c| {
                        let mark = if c.status == "passed" { "✅" } else { "❌" };
                        format!(
                            "{mark} {} ({}/{}/{}/{})",
                            c.status, c.counts.pass, c.counts.fail, c.counts.xfail, c.counts.skip
                        )
                    })
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", code(k), row.join(" | "));
    }
    out.push_str("\n(pass/fail/xfail/skip)\n\n");
}

/// A cell that did not pass: why, its failing cases, its kernel reports.
fn cell(out: &mut String, c: &Cell) {
    let _ = writeln!(out, "#### {} {}\n", code(&c.name), c.status);
    if let Some(e) = &c.error {
        let _ = writeln!(out, "- error: {}", code(e));
    }
    let failing: Vec<_> = c.cases.iter().filter(|k| k.status == "fail").collect();
    for k in failing.iter().take(MAX_FAILURES) {
        let _ = writeln!(
            out,
            "- {} failed: {}",
            code(&k.name),
            code(k.message.as_deref().unwrap_or("(no message)"))
        );
    }
    if failing.len() > MAX_FAILURES {
        let _ = writeln!(
            out,
            "- and {} more failing cases",
            failing.len() - MAX_FAILURES
        );
    }
    let reports: Vec<_> = c.vm.iter().flat_map(|v| &v.kernel_reports).collect();
    for r in reports.iter().take(MAX_FAILURES) {
        let _ = writeln!(
            out,
            "- kernel {} during {}: {} (console line {})",
            code(&r.kind),
            code(&match (&r.test, &r.case) {
                (Some(t), Some(c)) => format!("{t}/{c}"),
                (Some(t), None) => t.clone(),
                _ => "no test".into(),
            }),
            code(&r.title),
            r.line
        );
    }
    if reports.len() > MAX_FAILURES {
        let _ = writeln!(
            out,
            "- and {} more kernel reports",
            reports.len() - MAX_FAILURES
        );
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Case, KernelReport, Vm};

    fn cell(name: &str, kernel: &str, topology: &str, status: &str, fail: usize) -> Cell {
        Cell {
            name: name.into(),
            kernel_name: kernel.into(),
            topology: topology.into(),
            suite: "futex".into(),
            status: status.into(),
            counts: Counts {
                pass: 10,
                fail,
                xfail: 1,
                skip: 2,
            },
            ..Cell::default()
        }
    }

    fn results(cells: Vec<Cell>) -> Results {
        Results {
            cells,
            ..Results::default()
        }
    }

    #[test]
    fn counts_grid_and_the_cells_not_passed() {
        let mut bad = cell("k2/2n/futex", "k2", "2n", "failed", 1);
        bad.cases = vec![
            Case {
                name: "futex-numa/wait-wake-one".into(),
                status: "fail".into(),
                message: Some("wake returned 0, want 1".into()),
                ..Case::default()
            },
            Case {
                name: "futex-numa/flag-accepted".into(),
                status: "pass".into(),
                ..Case::default()
            },
        ];
        bad.vm = Some(Vm {
            kernel_reports: vec![KernelReport {
                kind: "warn".into(),
                test: Some("futex-numa".into()),
                line: 312,
                title: "WARNING: CPU: 1 PID: 77 at kernel/futex/core.c:10".into(),
                ..KernelReport::default()
            }],
            ..Vm::default()
        });
        let md = render(&[
            &results(vec![cell("k1/1n/futex", "k1", "1n", "passed", 0)]),
            &results(vec![bad]),
        ]);
        assert!(
            md.contains("2 cells (1 not passed): 20 pass, 1 fail, 2 xfail, 4 skip"),
            "{md}"
        );
        assert!(md.contains("| kernel | ` 1n ` | ` 2n ` |"), "{md}");
        assert!(md.contains("| ` k1 ` | ✅ passed (10/0/1/2) |  |"), "{md}");
        assert!(md.contains("| ` k2 ` |  | ❌ failed (10/1/1/2) |"), "{md}");
        assert!(md.contains("#### ` k2/2n/futex ` failed"));
        assert!(md.contains("- ` futex-numa/wait-wake-one ` failed: ` wake returned 0, want 1 `"));
        assert!(!md.contains("flag-accepted"), "passes are not listed");
        assert!(md.contains(
            "- kernel ` warn ` during ` futex-numa `: ` WARNING: CPU: 1 PID: 77 at kernel/futex/core.c:10 ` (console line 312)"
        ));
        assert!(!md.contains("#### ` k1/1n/futex `"));
    }

    #[test]
    fn guest_text_cannot_escape_its_code_span() {
        let hostile = "`<script>alert(1)</script>` | [x](http://e.invalid) ![i](http://e.invalid/i.png)\n# heading\u{7}";
        let s = code(hostile);
        assert!(s.starts_with("` ") && s.ends_with(" `"));
        let inner = &s[2..s.len() - 2];
        assert!(!inner.contains('`') && !inner.contains('|') && !inner.contains('\n'));
        assert!(!inner.contains('\u{7}'));
        // Inside a code span `<script>` and `[x](...)` are text.
        assert!(inner.contains("<script>"));
        let long = "x".repeat(MAX_TEXT * 3);
        assert_eq!(code(&long).chars().count(), MAX_TEXT + 4 + 4);
        assert_eq!(code("\n"), "` `");
    }

    #[test]
    fn many_failures_are_counted_not_listed() {
        let mut bad = cell("k/1n/futex", "k", "1n", "failed", 50);
        bad.cases = (0..50)
            .map(|i| Case {
                name: format!("t/c{i}"),
                status: "fail".into(),
                message: Some("m".into()),
                ..Case::default()
            })
            .collect();
        let md = render(&[&results(vec![bad])]);
        assert_eq!(md.matches(" failed: ").count(), MAX_FAILURES);
        assert!(md.contains("- and 30 more failing cases"));
    }
}
