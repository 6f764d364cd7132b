//! The comparison report: upstream verdicts next to ours, read back from
//! JUnit documents and paired through [`MAPPING`](super::MAPPING).

use super::mapping::mapping_for;
use super::{KselftestError, SUITE_FUTEX};
use std::path::{Path, PathBuf};

/// Verdict of one JUnit test case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Passed.
    Pass,
    /// Skipped.
    Skip,
    /// Failed (failure or error).
    Fail,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Skip => "SKIP",
            Verdict::Fail => "FAIL",
        }
    }
}

/// One test case read back from JUnit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JunitCase {
    /// The cell's `kernel` property.
    pub kernel: String,
    /// The cell's `suite` property.
    pub suite: String,
    /// `binary/case`.
    pub name: String,
    /// Verdict.
    pub verdict: Verdict,
    /// Failure or skip message.
    pub message: String,
}

/// Reads every test case of a JUnit document (as written by [`crate::junit`]);
/// `file` names it in errors, with the position the XML parser stopped at.
pub fn read_junit(file: &Path, xml: &str) -> Result<Vec<JunitCase>, KselftestError> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| {
        let pos = e.pos();
        KselftestError::BadJunit {
            file: file.to_path_buf(),
            line: pos.row,
            col: pos.col,
            // roxmltree ends its message with the position, said first here.
            why: e
                .to_string()
                .trim_end_matches(&format!(" at {}:{}", pos.row, pos.col))
                .to_string(),
        }
    })?;
    let mut out = Vec::new();
    for suite in doc.descendants().filter(|n| n.has_tag_name("testsuite")) {
        let prop = |name: &str| {
            suite
                .descendants()
                .filter(|n| n.has_tag_name("property"))
                .find(|n| n.attribute("name") == Some(name))
                .and_then(|n| n.attribute("value"))
                .unwrap_or("")
                .to_string()
        };
        let (kernel, suite_name) = (prop("kernel"), prop("suite"));
        for tc in suite.children().filter(|n| n.has_tag_name("testcase")) {
            let mut verdict = Verdict::Pass;
            let mut message = String::new();
            for c in tc.children().filter(|n| n.is_element()) {
                let v = match c.tag_name().name() {
                    "failure" | "error" => Verdict::Fail,
                    "skipped" => Verdict::Skip,
                    _ => continue,
                };
                verdict = verdict.max(v);
                message = c.attribute("message").unwrap_or("").to_string();
            }
            out.push(JunitCase {
                kernel: kernel.clone(),
                suite: suite_name.clone(),
                name: tc.attribute("name").unwrap_or("").to_string(),
                verdict,
                message,
            });
        }
    }
    Ok(out)
}

/// Markdown report of upstream verdicts next to ours, per kernel, from
/// JUnit documents holding `kselftest-futex` and other (our) cells.
pub fn compare_junit(docs: &[(PathBuf, String)]) -> Result<String, KselftestError> {
    let mut cases = Vec::new();
    for (file, xml) in docs {
        cases.extend(read_junit(file, xml)?);
    }
    Ok(compare(&cases))
}

/// The comparison report of [`compare_junit`] from cases already read.
pub fn compare(cases: &[JunitCase]) -> String {
    use std::fmt::Write as _;
    let mut kernels: Vec<&str> = cases
        .iter()
        .filter(|c| c.suite == SUITE_FUTEX)
        .map(|c| c.kernel.as_str())
        .collect();
    kernels.sort();
    kernels.dedup();
    let mut md = String::from("# Upstream futex selftests next to ours\n");
    if kernels.is_empty() {
        md.push_str("\nNo kselftest-futex cells in the reports.\n");
    }
    for k in kernels {
        let upstream: Vec<&JunitCase> = cases
            .iter()
            .filter(|c| c.kernel == k && c.suite == SUITE_FUTEX && !c.name.starts_with("topology"))
            .collect();
        let ours: Vec<&JunitCase> = cases
            .iter()
            .filter(|c| c.kernel == k && c.suite != SUITE_FUTEX)
            .collect();
        let _ = writeln!(md, "\n## {k}\n");
        md.push_str("| upstream case | upstream | our cases | ours | agree | note |\n|---|---|---|---|---|---|\n");
        let (mut agree, mut differ, mut unmapped) = (0, 0, 0);
        for u in &upstream {
            let row = mapping_for(&u.name);
            let (names, note) = row.map(|(_, n, note)| (*n, *note)).unwrap_or((&[], ""));
            let mut found: Vec<String> = Vec::new();
            let mut our_v: Option<Verdict> = None;
            for n in names {
                if let Some(o) = ours.iter().find(|o| o.name == *n) {
                    found.push(format!("{} ({})", n, o.verdict.word()));
                    our_v = Some(our_v.map_or(o.verdict, |v| v.max(o.verdict)));
                } else {
                    found.push(format!("{n} (not run)"));
                }
            }
            let ours_word = our_v.map_or("-", Verdict::word);
            let same = match our_v {
                None => {
                    unmapped += 1;
                    "n/a"
                }
                Some(v) if v == u.verdict => {
                    agree += 1;
                    "yes"
                }
                Some(_) => {
                    differ += 1;
                    "**no**"
                }
            };
            let mut why = note.to_string();
            if u.verdict != Verdict::Pass && !u.message.is_empty() {
                if !why.is_empty() {
                    why.push_str("; ");
                }
                why.push_str("upstream: ");
                why.push_str(&u.message);
            }
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                cell(&u.name),
                u.verdict.word(),
                cell(&found.join(", ")),
                ours_word,
                same,
                cell(&why)
            );
        }
        let _ = writeln!(
            md,
            "\n{} upstream cases: {agree} agree, {differ} differ, {unmapped} without a counterpart of ours run.",
            upstream.len()
        );
    }
    md
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const JUNIT: &str = r#"<?xml version="1.0"?>
<testsuites name="harness run">
 <testsuite name="a/kselftest-futex" tests="3">
  <properties><property name="kernel" value="debian:7.3.4"/><property name="suite" value="kselftest-futex"/></properties>
  <testcase name="topology/node-count"/>
  <testcase name="futex_priv_hash/global.priv_hash"><skipped message="only 8 online"/></testcase>
  <testcase name="futex_wait_wouldblock/global.futex_wait_wouldblock"/>
 </testsuite>
 <testsuite name="a/futex" tests="2">
  <properties><property name="kernel" value="debian:7.3.4"/><property name="suite" value="futex"/></properties>
  <testcase name="futex-prctl/get-fresh-is-0"/>
  <testcase name="futex-upstream-gaps/wait-wouldblock"><failure message="boom"/></testcase>
 </testsuite>
</testsuites>"#;

    #[test]
    fn a_file_that_is_not_xml_is_named_with_its_position() {
        let e = compare_junit(&[("r.xml".into(), "<testsuites>\n<a></b>".into())]).unwrap_err();
        let msg = e.to_string();
        assert_eq!(
            msg, "r.xml:2:4: not a JUnit document: expected 'a' tag, not 'b'",
            "{msg}"
        );
    }

    #[test]
    fn compare_puts_verdicts_side_by_side() {
        let cases = read_junit(Path::new("j.xml"), JUNIT).unwrap();
        assert_eq!(cases.len(), 5);
        let md = compare(&cases);
        assert!(md.contains("## debian:7.3.4"), "{md}");
        assert!(!md.contains("topology/node-count"), "{md}");
        let row = md
            .lines()
            .find(|l| l.starts_with("| futex_priv_hash"))
            .unwrap();
        assert!(
            row.contains("| SKIP |") && row.contains("| **no** |"),
            "{row}"
        );
        assert!(row.contains("upstream: only 8 online"), "{row}");
        let row = md
            .lines()
            .find(|l| l.starts_with("| futex_wait_wouldblock"))
            .unwrap();
        assert!(row.contains("wait-wouldblock (FAIL)"), "{row}");
        assert!(
            row.contains("futex-numa/writeback-wait-eagain-each-cpu (not run)"),
            "{row}"
        );
        assert!(md.contains("2 upstream cases: 0 agree, 2 differ"), "{md}");
    }
}
