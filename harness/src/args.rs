//! Command-line groups more than one front door takes (`run` and
//! `matrix`): clap types whose values are already the typed ones their
//! door uses (the parsers run at the edge, before anything is fetched).

use crate::reporter::{kcidb, Reporters};
use std::path::{Path, PathBuf};

/// The report files of `run` and `matrix` besides their JUnit and JSON
/// (whose forms differ between the two): each is a reporter of the run's
/// event stream, and a new one is a field here and a file in
/// `reporter/`, not a change to either door.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportFiles {
    /// Self-contained HTML report of the run (docs/report.md), rewritten
    /// as cells finish.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// The run as Markdown (counts, the grid, the cells not passed with
    /// their failures; docs/report.md), for a CI job summary; rewritten as
    /// cells finish.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// KCIDB output (--kcidb, --origin, --log-base-url).
    #[command(flatten)]
    pub kcidb: KcidbArgs,
    /// Where the run's results history goes (--history).
    #[command(flatten)]
    pub history: HistoryArgs,
}

impl ReportFiles {
    /// Each file's flag and path, for `outputs::check_files` before
    /// anything is fetched.
    pub fn paths(&self) -> Vec<(&'static str, Option<&Path>)> {
        vec![
            ("--html", self.html.as_deref()),
            ("--markdown", self.markdown.as_deref()),
            ("--kcidb", self.kcidb.kcidb.as_deref()),
            (
                "--history",
                self.history.history.as_ref().and_then(|t| t.file()),
            ),
        ]
    }

    /// What a run with `--out out` would write, for a dry run's plan.
    pub fn writes(&self, out: &Path) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(p) = &self.html {
            w.push(format!("{} (the HTML report)", p.display()));
        }
        if let Some(p) = &self.markdown {
            w.push(format!("{} (the Markdown summary)", p.display()));
        }
        if let Some(p) = &self.kcidb.kcidb {
            w.push(format!("{} (the KCIDB document)", p.display()));
        }
        if let Some(p) = self.history.target().path(out) {
            w.push(format!("{} (the results history)", p.display()));
        }
        w
    }

    /// Adds a reporter for each file asked for (`out`: the run's `--out`,
    /// where the history goes by default).
    pub fn add_reporters(&self, out: &Path, reporters: &mut Reporters) {
        if let Some(p) = &self.html {
            reporters.add(crate::reporter::html::Html::new(p));
        }
        if let Some(p) = &self.markdown {
            reporters.add(crate::reporter::markdown::Markdown::new(p));
        }
        if let Some((p, opts)) = self.kcidb.output() {
            reporters.add(kcidb::Kcidb::new(&p, opts));
        }
        if let Some(p) = self.history.target().path(out) {
            reporters.add(crate::reporter::history::History::new(
                &p,
                crate::history::command_line(),
            ));
        }
    }
}

/// `--history FILE|none` of `run` and `matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryArgs {
    /// The results history to add this run to (SQLite, docs/history.md;
    /// `harness history`, `harness compare`), or `none` (default:
    /// <out>/history.sqlite).
    #[arg(long, value_name = "FILE|none", value_parser = history_target)]
    pub history: Option<crate::history::Target>,
}

impl HistoryArgs {
    /// Where the run's history goes.
    pub fn target(&self) -> crate::history::Target {
        self.history.clone().unwrap_or_default()
    }
}

/// `--history`: `none` or a file (checked with the other outputs).
fn history_target(s: &str) -> Result<crate::history::Target, String> {
    Ok(crate::history::Target::parse(s))
}

/// `--profile [N]` of `run` and `matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProfileArgs {
    /// After the summary, the N costliest items (cell phases and test
    /// binaries, with their share of the run's time; README "Where the
    /// time goes").
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "20")]
    pub profile: Option<usize>,
}

/// `--kcidb FILE --origin NAME [--log-base-url URL]` of `run` and `matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct KcidbArgs {
    /// KernelCI KCIDB document of the run (schema 5.3; docs/kcidb.md),
    /// rewritten as cells finish. Needs --origin.
    #[arg(long, value_name = "FILE", requires = "origin")]
    pub kcidb: Option<PathBuf>,
    /// The CI system's KCIDB origin name ([a-z0-9_]+), the prefix of every
    /// id in the --kcidb document.
    #[arg(long, value_name = "NAME", requires = "kcidb", value_parser = origin)]
    pub origin: Option<String>,
    /// Where the cell directories are published: the base of the
    /// console-log, JUnit, patch and build-log URLs of the --kcidb document
    /// (none without it).
    #[arg(long, value_name = "URL", requires = "kcidb", value_parser = base_url)]
    pub log_base_url: Option<String>,
}

impl KcidbArgs {
    /// The document's path and options, when asked for.
    pub fn output(&self) -> Option<(PathBuf, kcidb::Options)> {
        let path = self.kcidb.clone()?;
        let opts = kcidb::Options {
            origin: self.origin.clone()?,
            log_base_url: self.log_base_url.clone(),
        };
        Some((path, opts))
    }
}

/// `--origin`: checked before anything runs (a usage error, exit 2).
pub fn origin(s: &str) -> Result<String, String> {
    kcidb::check_origin(s).map_err(|_| kcidb::ORIGIN_RULE.to_string())
}

/// `--log-base-url`.
pub fn base_url(s: &str) -> Result<String, String> {
    kcidb::check_base_url(s).map_err(|_| kcidb::BASE_URL_RULE.to_string())
}

/// `--arch`'s parser: the architecture names of [`crate::arch::ALL`],
/// listed in `--help` and completions.
pub fn arch_parser() -> impl clap::builder::TypedValueParser<Value = crate::arch::Arch> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(crate::arch::ALL.map(|a| a.name()))
        .map(|s| s.parse().expect("a listed architecture parses"))
}
