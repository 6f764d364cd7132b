//! The HTML report (`--html FILE` on `run` and `matrix`, `harness report
//! html`): one self-contained page of one or more results files — a grid
//! kernel x topology per suite, a section per cell, benchmark plots,
//! filters — rewritten atomically after each cell (docs/report.md).
//!
//! The page loads nothing: its CSS and script are inline, its plots are
//! SVG drawn here, and it reads fully without the script (the filters
//! only hide). Every string of the results is guest output or came from
//! it, so every one is HTML-escaped ([`Esc`]) and none is ever written
//! into the `<style>` or the `<script>`.
//!
//! Rendering is one pass over the cells (grid slots indexed by map, no
//! search per cell): a full tier of 79 cells and ~18,000 cases is fine.

mod cell;
mod svg;

use super::json::Document;
use super::{write_atomic, ReportError, Reporter};
use crate::events::Event;
use crate::results::{Cell, Results};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

/// The page's style: fixed text, no results in it.
const STYLE: &str = include_str!("page.css");
/// The filters: fixed text, no results in it (they read `data-*`
/// attributes and the URL's fragment or query).
const SCRIPT: &str = include_str!("page.js");

/// The statuses a cell may have, in the order the page lists them.
const STATUSES: [&str; 5] = ["failed", "error", "interrupted", "passed", "not-run"];

/// Rewrites the HTML report of the run as cells finish.
pub struct Html {
    path: PathBuf,
    doc: Document,
}

impl Html {
    /// The report at `path`.
    pub fn new(path: &Path) -> Html {
        Html {
            path: path.to_path_buf(),
            doc: Document::new(),
        }
    }
}

impl Reporter for Html {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        if !self.doc.observe(event) {
            return Ok(());
        }
        let page = page(&[self.doc.results()]);
        write_atomic(&self.path, page.as_bytes())
    }
}

/// Why `harness report html` could not read a results file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not readable.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not a results file.
    #[error("{}: not a results file (docs/results.md): {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// Reads a results file (`--json` of `run` or `matrix`) with the typed model.
pub fn read(path: &Path) -> Result<Results, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| ReadError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// The page of `results` (one or more runs, in order).
pub fn render(results: &[Results]) -> String {
    page(&results.iter().collect::<Vec<_>>())
}

/// HTML-escaped text, usable in element text and in quoted attribute
/// values alike. Control characters (guest output may hold NUL and ESC)
/// become U+FFFD.
pub struct Esc<'a>(pub &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(i) = rest.find(|c: char| {
            matches!(c, '&' | '<' | '>' | '"' | '\'')
                || (c.is_control() && !matches!(c, '\n' | '\t'))
        }) {
            f.write_str(&rest[..i])?;
            let c = rest[i..].chars().next().unwrap_or('\u{fffd}');
            f.write_str(match c {
                '&' => "&amp;",
                '<' => "&lt;",
                '>' => "&gt;",
                '"' => "&quot;",
                '\'' => "&#39;",
                _ => "\u{fffd}",
            })?;
            rest = &rest[i + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

/// A cell as the page places it: which run, and its section's id.
struct Placed<'a> {
    cell: &'a Cell,
    id: String,
}

/// The name a kernel has in the grid and the filters.
fn kernel_of(c: &Cell) -> &str {
    if c.kernel_name.is_empty() {
        &c.kernel
    } else {
        &c.kernel_name
    }
}

/// A section id from a cell name: `[A-Za-z0-9_.-]` kept, the rest `_`,
/// made unique with a suffix.
fn section_id(name: &str, taken: &mut HashSet<String>) -> String {
    let base: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = format!("cell-{base}");
    let mut id = base.clone();
    let mut n = 1;
    while !taken.insert(id.clone()) {
        n += 1;
        id = format!("{base}-{n}");
    }
    id
}

/// Names in first-seen order, each once.
#[derive(Default)]
struct Order<'a> {
    names: Vec<&'a str>,
    index: HashMap<&'a str, usize>,
}

impl<'a> Order<'a> {
    fn add(&mut self, name: &'a str) -> usize {
        *self.index.entry(name).or_insert_with(|| {
            self.names.push(name);
            self.names.len() - 1
        })
    }
}

fn page(runs: &[&Results]) -> String {
    let mut taken = HashSet::new();
    let placed: Vec<Placed> = runs
        .iter()
        .flat_map(|r| &r.cells)
        .map(|cell| Placed {
            cell,
            id: section_id(&cell.name, &mut taken),
        })
        .collect();
    let mut out = String::with_capacity(64 * 1024 + placed.len() * 4096);
    let by_status = status_counts(&placed);
    let title = format!(
        "futex-harness: {} cells{}",
        placed.len(),
        by_status
            .iter()
            .filter(|(s, _)| *s != "passed" && *s != "not-run")
            .map(|(s, n)| format!(", {n} {s}"))
            .collect::<String>()
    );
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        Esc(&title)
    );
    out.push_str(DOM_HOOKS);
    header(&mut out, runs, &placed, &by_status);
    filters(&mut out, &placed);
    grids(&mut out, &placed);
    svg::bench(&mut out, &placed);
    out.push_str("<main id=\"cells\">\n<h2>Cells</h2>\n");
    for p in &placed {
        cell::section(&mut out, p);
    }
    let _ = write!(
        out,
        "</main>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n"
    );
    out
}

/// The page's stable hooks, said once in the page itself.
const DOM_HOOKS: &str = "<!--
  DOM hooks (stable; tests and scripts may rely on them):
  section.cell#cell-NAME[data-status][data-kernel][data-topology][data-suite]
      one per cell; data-status: failed|error|interrupted|passed|not-run
  a.cellref[data-status][data-kernel][data-topology][data-suite]
      a cell in the grid (table.grid[data-suite]), linking to its section
  select#filter-status, #filter-kernel, #filter-topology, #filter-suite
      the filters (value \"\" = all); the URL's fragment or query sets them:
      report.html#status=failed&kernel=debian-7.3 (comma = any of)
  #filter-count  how many cells the filters show
  li.case[data-case-status=fail|xfail|skip]  a case of a cell section
  #bench  the benchmark plots, when any cell has benchmark rows
  Filtered-out sections and grid entries carry the hidden attribute.
-->
";

fn status_counts<'a>(placed: &[Placed<'a>]) -> Vec<(&'a str, usize)> {
    let mut n: BTreeMap<&str, usize> = BTreeMap::new();
    for p in placed {
        *n.entry(p.cell.status.as_str()).or_default() += 1;
    }
    // Known statuses in page order, then any other word an older or newer
    // file holds.
    let mut out: Vec<(&str, usize)> = STATUSES
        .iter()
        .filter_map(|s| n.remove(s).map(|c| (*s, c)))
        .collect();
    out.extend(n);
    out
}

fn header(out: &mut String, runs: &[&Results], placed: &[Placed], by_status: &[(&str, usize)]) {
    out.push_str("<header>\n<h1>futex-harness report</h1>\n<p id=\"summary\">");
    let _ = write!(out, "{} cells:", placed.len());
    for (i, (s, n)) in by_status.iter().enumerate() {
        let sep = if i == 0 { " " } else { ", " };
        let _ = write!(
            out,
            "{sep}<span class=\"badge s-{0}\">{n} {0}</span>",
            Esc(s)
        );
    }
    let mut cases = crate::results::Counts::default();
    for p in placed {
        cases.pass += p.cell.counts.pass;
        cases.fail += p.cell.counts.fail;
        cases.xfail += p.cell.counts.xfail;
        cases.skip += p.cell.counts.skip;
    }
    let _ = writeln!(
        out,
        "; cases: {} passed, {} failed, {} xfail, {} skipped</p>",
        cases.pass, cases.fail, cases.xfail, cases.skip
    );
    out.push_str(
        "<table class=\"runs\">\n<tr><th>run</th><th>started (UTC)</th><th>harness</th>\
         <th>QEMU</th><th>host CPUs</th><th>cells</th><th>wall</th><th>end</th></tr>\n",
    );
    for (i, r) in runs.iter().enumerate() {
        let (wall, end) = match &r.run.stats {
            Some(s) => (
                duration(s.cells_wall_s + s.prepare_s),
                if s.interrupted {
                    "interrupted"
                } else {
                    "finished"
                },
            ),
            None => (String::new(), "running or killed"),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{end}</td></tr>",
            i + 1,
            utc(r.run.started),
            Esc(&r.run.harness_version),
            Esc(&r.run.qemu_version),
            r.run.host_cpus,
            r.cells.len(),
            wall,
        );
    }
    out.push_str("</table>\n");
    for r in runs {
        for (what, list) in [
            ("Stale known failure", &r.run.stale_known_failures),
            (
                "Unseen intermittent known failure",
                &r.run.unseen_known_failures,
            ),
        ] {
            for k in list.iter() {
                let _ = writeln!(
                    out,
                    "<p class=\"known\">{what} {} (suite {}, case {}, message {}): {}</p>",
                    Esc(&k.entry),
                    Esc(&k.suite),
                    Esc(&k.case),
                    Esc(&k.message),
                    Esc(&k.reason)
                );
            }
        }
    }
    out.push_str("</header>\n");
}

fn filters(out: &mut String, placed: &[Placed]) {
    let mut kernels = Order::default();
    let mut topologies = Order::default();
    let mut suites = Order::default();
    let mut statuses = Order::default();
    for s in STATUSES {
        statuses.add(s);
    }
    for p in placed {
        kernels.add(kernel_of(p.cell));
        topologies.add(&p.cell.topology);
        suites.add(&p.cell.suite);
        statuses.add(&p.cell.status);
    }
    // Hidden until the script shows it: without the script it would do nothing.
    out.push_str("<form id=\"filters\" class=\"filters\" hidden>\n");
    for (key, order) in [
        ("status", &statuses),
        ("kernel", &kernels),
        ("topology", &topologies),
        ("suite", &suites),
    ] {
        let _ = write!(
            out,
            "<label>{key} <select id=\"filter-{key}\" data-key=\"{key}\"><option value=\"\">all</option>"
        );
        for n in &order.names {
            let _ = write!(out, "<option value=\"{0}\">{0}</option>", Esc(n));
        }
        out.push_str("</select></label>\n");
    }
    out.push_str("<span id=\"filter-count\"></span>\n</form>\n");
}

/// One suite's grid: its kernels (rows), topologies (columns) and the
/// cells (indices into the placed cells) of each slot.
type Grid<'a> = (Order<'a>, Order<'a>, HashMap<(usize, usize), Vec<usize>>);

/// The grid of each suite: kernels down, topologies across, each slot
/// the cells (usually one) of that kernel and topology.
fn grids(out: &mut String, placed: &[Placed]) {
    let mut suites = Order::default();
    let mut per_suite: Vec<Grid> = Vec::new();
    for (i, p) in placed.iter().enumerate() {
        let s = suites.add(&p.cell.suite);
        if s == per_suite.len() {
            per_suite.push(Default::default());
        }
        let (kernels, topologies, slots) = &mut per_suite[s];
        let k = kernels.add(kernel_of(p.cell));
        let t = topologies.add(&p.cell.topology);
        slots.entry((k, t)).or_default().push(i);
    }
    out.push_str("<nav id=\"grids\">\n");
    for (suite, (kernels, topologies, slots)) in suites.names.iter().zip(&per_suite) {
        let _ = write!(
            out,
            "<h2>Suite {0}</h2>\n<table class=\"grid\" data-suite=\"{0}\">\n<tr><th>kernel \\ topology</th>",
            Esc(suite)
        );
        for t in &topologies.names {
            let _ = write!(out, "<th>{}</th>", Esc(t));
        }
        out.push_str("</tr>\n");
        for (k, kernel) in kernels.names.iter().enumerate() {
            let _ = write!(out, "<tr><th>{}</th>", Esc(kernel));
            for t in 0..topologies.names.len() {
                out.push_str("<td>");
                for &i in slots.get(&(k, t)).map(Vec::as_slice).unwrap_or_default() {
                    cellref(out, &placed[i]);
                }
                out.push_str("</td>");
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
    }
    out.push_str("</nav>\n");
}

/// The `data-*` filter attributes of a cell.
fn filter_attrs(c: &Cell) -> String {
    format!(
        "data-status=\"{}\" data-kernel=\"{}\" data-topology=\"{}\" data-suite=\"{}\"",
        Esc(&c.status),
        Esc(kernel_of(c)),
        Esc(&c.topology),
        Esc(&c.suite)
    )
}

fn cellref(out: &mut String, p: &Placed) {
    let c = &p.cell.counts;
    let _ = write!(
        out,
        "<a class=\"cellref s-{status}\" href=\"#{id}\" {attrs} title=\"{name}\">{status}<br>\
         <span class=\"counts\">{} pass · {} fail · {} xfail · {} skip</span></a>",
        c.pass,
        c.fail,
        c.xfail,
        c.skip,
        status = Esc(&p.cell.status),
        id = p.id,
        attrs = filter_attrs(p.cell),
        name = Esc(&p.cell.name),
    );
}

/// `12.3 s`, `4 min 05 s`.
fn duration(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return String::new();
    }
    if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{} min {:02} s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!(
            "{} h {:02} min",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    }
}

/// Seconds since the epoch as `2025-01-31 12:00:00`; empty for none.
fn utc(t: f64) -> String {
    if !(t.is_finite() && t > 0.0) {
        return String::new();
    }
    chrono::DateTime::from_timestamp(t as i64, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
