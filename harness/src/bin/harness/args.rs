//! The command line of the binary's own small doors (`history`,
//! `compare`, `report kcidb`, `report html`, `report markdown`); the front doors in the
//! library (`run`, `matrix`, `junit merge`, `bench`, `bisect`) keep their
//! clap types beside their code.

use harness::args::{base_url, origin};
use harness::reporter::kcidb;
use std::path::PathBuf;

/// `harness history`: the runs of a history file.
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryListArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// As JSON (one object per run).
    #[arg(long)]
    pub json: bool,
}

/// `--db FILE` / `--out DIR` of `history` and `compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// The history file (default: <out>/history.sqlite).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// The output directory of the runs (`--out` of run or matrix).
    #[arg(long, value_name = "DIR", default_value = "harness-out")]
    pub out: PathBuf,
}

impl DbArgs {
    /// The history file.
    pub fn path(&self) -> PathBuf {
        self.db
            .clone()
            .unwrap_or_else(|| self.out.join(harness::history::FILE_NAME))
    }
}

/// `harness compare A B`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// The earlier run: a JSON results file, a run id of the history,
    /// `last` or `previous`.
    pub a: String,
    /// The later run, the same way.
    pub b: String,
    #[command(flatten)]
    pub db: DbArgs,
    /// As JSON.
    #[arg(long)]
    pub json: bool,
}

/// `harness report ...`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ReportCommand {
    /// A KernelCI KCIDB document (schema 5.3, docs/kcidb.md); with
    /// --submit, posted to a KCIDB-ng service.
    Kcidb(KcidbReportArgs),
    /// One self-contained HTML page of one or more JSON results files
    /// (docs/report.md).
    Html(HtmlReportArgs),
    /// The run as Markdown (counts, the grid, the cells not passed with
    /// their failures) for a CI job summary (docs/report.md).
    Markdown(MarkdownReportArgs),
}

impl ReportCommand {
    /// Runs the report.
    pub fn run(self) -> Result<(), harness::error::Error> {
        match self {
            ReportCommand::Kcidb(a) => a.run(),
            ReportCommand::Html(a) => a.run(),
            ReportCommand::Markdown(a) => a.run(),
        }
    }
}

/// `harness report html RESULTS.json... -o FILE`.
#[derive(Debug, Clone, clap::Args)]
pub struct HtmlReportArgs {
    /// JSON results files (`--json` of run or matrix), in order.
    #[arg(required = true, value_name = "RESULTS")]
    pub results: Vec<PathBuf>,
    /// Write the page here.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
}

impl HtmlReportArgs {
    /// Runs `harness report html`: a results file that cannot be read is
    /// a usage error naming it.
    pub fn run(self) -> Result<(), harness::error::Error> {
        use harness::error::Error;
        use harness::reporter::html;
        harness::outputs::check_file("--output", &self.output).map_err(Error::usage)?;
        let runs = read_results(&self.results)?;
        harness::reporter::write_atomic(&self.output, html::render(&runs).as_bytes())
            .map_err(Error::infra)
    }
}

/// The results files a report is drawn from: one that cannot be read is
/// a usage error naming it.
fn read_results(
    paths: &[PathBuf],
) -> Result<Vec<harness::results::Results>, harness::error::Error> {
    paths
        .iter()
        .map(|p| harness::reporter::html::read(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(harness::error::Error::usage)
}

/// `harness report markdown RESULTS.json... [-o FILE]`.
#[derive(Debug, Clone, clap::Args)]
pub struct MarkdownReportArgs {
    /// JSON results files (`--json` of run or matrix; the shards of one
    /// run), in order.
    #[arg(required = true, value_name = "RESULTS")]
    pub results: Vec<PathBuf>,
    /// Write the Markdown here (default: stdout).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

impl MarkdownReportArgs {
    /// Runs `harness report markdown`: a results file that cannot be read
    /// is a usage error naming it.
    pub fn run(self) -> Result<(), harness::error::Error> {
        use harness::error::Error;
        use harness::reporter::markdown;
        if let Some(o) = &self.output {
            harness::outputs::check_file("--output", o).map_err(Error::usage)?;
        }
        let runs = read_results(&self.results)?;
        let text = markdown::render(&runs.iter().collect::<Vec<_>>());
        match &self.output {
            Some(o) => harness::reporter::write_atomic(o, text.as_bytes()).map_err(Error::infra),
            None => {
                // A closed pipe (`| head`) is not an error worth a panic.
                let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
                Ok(())
            }
        }
    }
}

/// `harness report kcidb`.
#[derive(Debug, Clone, clap::Args)]
pub struct KcidbReportArgs {
    /// The JSON results file of a run (`--json` of run or matrix).
    #[arg(long, value_name = "FILE")]
    pub results: PathBuf,
    /// The CI system's KCIDB origin name ([a-z0-9_]+).
    #[arg(long, value_name = "NAME", value_parser = origin)]
    pub origin: String,
    /// Write the document here (default: stdout, unless --submit).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Where the cell directories are published (see `run --log-base-url`).
    #[arg(long, value_name = "URL", value_parser = base_url)]
    pub log_base_url: Option<String>,
    /// Post the document to this KCIDB-ng service (its base URL), with the
    /// token from $KCIDB_TOKEN, and wait for it to be processed.
    #[arg(long, value_name = "URL")]
    pub submit: Option<String>,
    /// Seconds to wait for the service to process the submission (0: do
    /// not ask).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub wait: u64,
}

impl KcidbReportArgs {
    /// Runs `harness report kcidb`.
    pub fn run(self) -> Result<(), harness::error::Error> {
        let req = kcidb::ReportRequest {
            results: self.results,
            options: kcidb::Options {
                origin: self.origin,
                log_base_url: self.log_base_url,
            },
            output: self.output,
            submit: self.submit,
            wait: std::time::Duration::from_secs(self.wait),
        };
        let doc = kcidb::report(&req, &mut |line| eprintln!("harness: kcidb: {line}"))?;
        if let Some(doc) = doc {
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), &doc);
        }
        Ok(())
    }
}

/// The log filter with ureq's wire-level trace log (which shows request
/// headers unredacted, a KCIDB token among them) capped at its debug log.
pub fn cap_wire_log(filter: tracing_subscriber::EnvFilter) -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::filter::LevelFilter;
    if filter
        .max_level_hint()
        .is_some_and(|l| l < LevelFilter::TRACE)
    {
        return filter;
    }
    ["ureq=debug", "ureq_proto=debug"]
        .iter()
        .filter_map(|d| d.parse().ok())
        .fold(filter, |f, d| f.add_directive(d))
}
