//! Matrix report files after the run: the `--rerun-failed` input read from
//! an aggregate report, `junit merge` of shard reports, and the summary
//! table (kernels x topologies) the terminal prints. Writing reports is the
//! reporters' job (`crate::reporter`).

use crate::events::{CellOutcome, CellStatus};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Errors reading or merging reports.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Cannot read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// File.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not JUnit XML.
    #[error("{}: not a JUnit report: {why}", path.display())]
    Parse {
        /// File.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// Cannot write.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// File.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn read(path: &Path) -> Result<String, ReportError> {
    std::fs::read_to_string(path).map_err(|source| ReportError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse<'a>(path: &Path, text: &'a str) -> Result<roxmltree::Document<'a>, ReportError> {
    roxmltree::Document::parse(text).map_err(|e| ReportError::Parse {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// Cells of an aggregate report that did not pass: testsuites with
/// failures or errors, or whose `status` property is not `passed`.
pub fn not_passed(path: &Path) -> Result<BTreeSet<String>, ReportError> {
    let text = read(path)?;
    let doc = parse(path, &text)?;
    let mut out = BTreeSet::new();
    for ts in doc.descendants().filter(|n| n.has_tag_name("testsuite")) {
        let num = |a: &str| {
            ts.attribute(a)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let status = ts
            .descendants()
            .filter(|p| p.has_tag_name("property") && p.attribute("name") == Some("status"))
            .find_map(|p| p.attribute("value"));
        let bad = num("failures") > 0 || num("errors") > 0 || status.is_some_and(|s| s != "passed");
        if bad {
            if let Some(n) = ts.attribute("name") {
                out.insert(n.to_string());
            }
        }
    }
    Ok(out)
}

fn escape_attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('"', "&quot;")
        .replace('>', "&gt;")
}

/// Joins reports into one `<testsuites>`: every `<testsuite>` of every
/// input is copied verbatim (so nothing is lost: properties, cases,
/// system-out, attributes, unknown elements), in input order; the root's
/// counters are the sums, its time the sum, its timestamp the earliest.
pub fn merge(out: &Path, inputs: &[PathBuf]) -> Result<(), ReportError> {
    let mut body = String::new();
    let (mut tests, mut failures, mut errors, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    let mut time = 0f64;
    let mut name: Option<String> = None;
    let mut stamp: Option<String> = None;
    for p in inputs {
        let text = read(p)?;
        let doc = parse(p, &text)?;
        let root = doc.root_element();
        let suites: Vec<roxmltree::Node> = match root.tag_name().name() {
            "testsuites" => root
                .children()
                .filter(|n| n.has_tag_name("testsuite"))
                .collect(),
            "testsuite" => vec![root],
            other => {
                return Err(ReportError::Parse {
                    path: p.clone(),
                    why: format!("root element <{other}>; expected <testsuites> or <testsuite>"),
                })
            }
        };
        if root.has_tag_name("testsuites") {
            if name.is_none() {
                name = root.attribute("name").map(String::from);
            }
            if let Some(t) = root.attribute("timestamp") {
                if stamp.as_deref().is_none_or(|s| t < s) {
                    stamp = Some(t.to_string());
                }
            }
        }
        for ts in suites {
            let num = |a: &str| {
                ts.attribute(a)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            tests += num("tests");
            failures += num("failures");
            errors += num("errors");
            skipped += num("skipped");
            time += ts
                .attribute("time")
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0);
            body.push_str("    ");
            body.push_str(&text[ts.range()]);
            body.push('\n');
        }
    }
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml.push_str(&format!(
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time:.3}\"",
        escape_attr(name.as_deref().unwrap_or("harness matrix"))
    ));
    if let Some(s) = stamp {
        xml.push_str(&format!(" timestamp=\"{}\"", escape_attr(&s)));
    }
    xml.push_str(">\n");
    xml.push_str(&body);
    xml.push_str("</testsuites>\n");
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let werr = |source| ReportError::Write {
        path: out.to_path_buf(),
        source,
    };
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(werr)?;
    std::fs::write(tmp.path(), xml).map_err(werr)?;
    tmp.persist(out).map_err(|e| werr(e.error))?;
    Ok(())
}

/// The summary table: one row per kernel, one column per topology, each
/// entry `passed/failed/xfail/skipped` cases and seconds (all suites together);
/// `-` where no cell ran.
pub fn summary_table(outcomes: &[CellOutcome]) -> String {
    let mut kernels: Vec<&str> = Vec::new();
    let mut topos: Vec<&str> = Vec::new();
    for o in outcomes {
        if !kernels.contains(&o.meta.kernel_name.as_str()) {
            kernels.push(&o.meta.kernel_name);
        }
        if !topos.contains(&o.meta.topology.as_str()) {
            topos.push(&o.meta.topology);
        }
    }
    let cell = |k: &str, t: &str| {
        let os: Vec<&CellOutcome> = outcomes
            .iter()
            .filter(|o| o.meta.kernel_name == k && o.meta.topology == t)
            .collect();
        if os.is_empty() {
            return "-".to_string();
        }
        let (p, f, x, s) = os.iter().fold((0, 0, 0, 0), |a, o| {
            (
                a.0 + o.counts.pass,
                a.1 + o.counts.fail,
                a.2 + o.counts.xfail,
                a.3 + o.counts.skip,
            )
        });
        let secs: f64 = os.iter().map(|o| o.duration.as_secs_f64()).sum();
        let mark = if os.iter().all(|o| o.status.ok()) {
            ""
        } else if os.iter().any(|o| matches!(o.status, CellStatus::NotRun(_))) {
            " !"
        } else {
            " X"
        };
        format!("{p}/{f}/{x}/{s} {secs:.0}s{mark}")
    };
    let kw = kernels.iter().map(|k| k.len()).max().unwrap_or(6).max(6);
    let cols: Vec<Vec<String>> = topos
        .iter()
        .map(|t| kernels.iter().map(|k| cell(k, t)).collect())
        .collect();
    let widths: Vec<usize> = topos
        .iter()
        .zip(&cols)
        .map(|(t, c)| c.iter().map(|s| s.len()).max().unwrap_or(0).max(t.len()))
        .collect();
    let mut out = format!("{:<kw$}", "kernel");
    for (t, w) in topos.iter().zip(&widths) {
        out.push_str(&format!("  {t:<w$}"));
    }
    out.push('\n');
    for (ki, k) in kernels.iter().enumerate() {
        out.push_str(&format!("{k:<kw$}"));
        for (c, w) in cols.iter().zip(&widths) {
            out.push_str(&format!("  {:<w$}", c[ki]));
        }
        out.push('\n');
    }
    out.push_str(
        "(passed/failed/xfail/skipped cases, seconds; X: a cell failed, !: a cell did not run)\n",
    );
    out
}
