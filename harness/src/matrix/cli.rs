//! The `harness matrix` and `harness junit merge` subcommands: arguments,
//! the terminal reporter (indicatif), the summary and the exit status.

use super::plan::{self, Filters};
use super::report::{self, Status};
use super::run::{self, Budget, Event, Options};
use super::MatrixError;
use std::path::PathBuf;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// `harness matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct MatrixArgs {
    /// The matrix file.
    #[arg(long, default_value = "matrix.yaml")]
    pub matrix: PathBuf,
    /// Cells at once: `auto` (host cores and ~75% of available memory) or N.
    #[arg(short = 'j', long = "jobs", default_value = "auto")]
    pub jobs: String,
    /// Only kernels whose name matches (glob; repeatable or comma-separated).
    #[arg(long)]
    pub kernel: Vec<String>,
    /// Only topologies whose name matches (glob).
    #[arg(long)]
    pub topology: Vec<String>,
    /// Only suites whose name matches (glob).
    #[arg(long)]
    pub suite: Vec<String>,
    /// Only test cases whose `binary/case` name matches (glob); topology
    /// cases are always kept. `futex-numa/*` also skips the other binaries.
    #[arg(long = "test", value_name = "GLOB")]
    pub test: Option<String>,
    /// List the selected cells (with shard assignments) and exit.
    #[arg(long)]
    pub list: bool,
    /// With --list: JSON for a CI job matrix.
    #[arg(long, requires = "list")]
    pub json: bool,
    /// Run shard I of N (1-based; deterministic, balanced by cost).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Stop starting cells after the first unexpected result.
    #[arg(long, conflicts_with = "keep_going")]
    pub fail_fast: bool,
    /// Run every cell whatever happens (the default).
    #[arg(long)]
    pub keep_going: bool,
    /// Only the cells that did not pass in the last aggregate report under --out.
    #[arg(long)]
    pub rerun_failed: bool,
    /// Reports and logs.
    #[arg(long, default_value = "target/matrix")]
    pub out: PathBuf,
    /// Debian mirror for `debian:` kernels.
    #[arg(long, value_name = "URL")]
    pub debian_mirror: Option<String>,
}

/// `harness junit merge OUT IN...`.
#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// The merged report.
    pub out: PathBuf,
    /// Reports to join (shard reports), in order.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

/// Errors of the matrix command, split by exit status.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad matrix or command line (exit 2).
    #[error(transparent)]
    Matrix(#[from] MatrixError),
    /// Reading a report for --rerun-failed (exit 2).
    #[error(transparent)]
    Report(#[from] report::ReportError),
    /// Infrastructure (exit 69).
    #[error(transparent)]
    Run(#[from] run::RunError),
}

impl CliError {
    /// Whether the user's input is at fault (exit 2) rather than the host.
    pub fn is_usage(&self) -> bool {
        !matches!(self, CliError::Run(_))
    }
}

/// Runs `harness matrix`; returns the exit status (0, 1, 130).
pub async fn matrix(args: MatrixArgs, cancel: CancellationToken) -> Result<u8, CliError> {
    let m = super::load(&args.matrix)?;
    let mut filters = Filters {
        kernel: args.kernel.clone(),
        topology: args.topology.clone(),
        suite: args.suite.clone(),
        only: None,
    };
    if args.rerun_failed {
        let names = report::not_passed(&run::aggregate_path(&args.out))?;
        eprintln!("harness: rerunning {} cells that did not pass", names.len());
        filters.only = Some(names);
    }
    let selected = plan::select(&m, &filters);
    let (shard_i, shard_n) = match &args.shard {
        Some(s) => plan::parse_shard(s)?,
        None => (1, 1),
    };
    if args.list {
        let text = if args.json {
            serde_json::to_string_pretty(&plan::list_json(&m, &selected, shard_n))
                .unwrap_or_default()
                + "\n"
        } else {
            plan::list_text(&m, &selected, shard_n)
        };
        // A closed pipe (`| head`) is not an error worth a panic.
        let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
        return Ok(0);
    }
    let cells = plan::shards(&m, &selected, shard_n)
        .into_iter()
        .nth(shard_i - 1)
        .unwrap_or_default();
    if cells.is_empty() {
        eprintln!("harness: no cells selected");
        return Ok(0);
    }
    let jobs = match args.jobs.as_str() {
        "auto" => None,
        n => match n.parse::<usize>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                return Err(MatrixError::Usage(format!(
                    "-j {n:?}: expected auto or a number of cells >= 1"
                ))
                .into())
            }
        },
    };
    let budget = Budget::from_host(jobs);
    let opts = Options {
        out_dir: args.out.clone(),
        budget,
        fail_fast: args.fail_fast,
        test_glob: args.test.clone(),
        debian_mirror: args.debian_mirror.clone(),
    };
    eprintln!(
        "harness: {} cells (shard {shard_i}/{shard_n}), budget {} cells, {} vCPUs, {} MiB",
        cells.len(),
        budget.max_cells.map_or("any".into(), |n| n.to_string()),
        if budget.cpus == u32::MAX {
            "any".into()
        } else {
            budget.cpus.to_string()
        },
        budget.mem_mib
    );

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let total = cells.len() as u64;
    let reporter = tokio::spawn(async move {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} done {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let (mut running, mut failed) = (Vec::<String>::new(), 0usize);
        let mut step = String::new();
        let msg = |running: &[String], failed: usize, step: &str| {
            let cur = running
                .last()
                .map_or(step.to_string(), |r| format!("booting {r}"));
            format!("| {} running | {failed} failed | {cur}", running.len())
        };
        while let Some(ev) = rx.recv().await {
            match ev {
                Event::Step(s) => {
                    bar.suspend(|| eprintln!("harness: {s}"));
                    step = s;
                }
                Event::Started { name } => running.push(name),
                Event::Finished(o) => {
                    running.retain(|r| *r != o.name);
                    if !o.status.ok() {
                        failed += 1;
                    }
                    let word = match &o.status {
                        Status::Passed => "PASS".to_string(),
                        Status::Failed => "FAIL".to_string(),
                        Status::Interrupted => "INTR".to_string(),
                        Status::Error(e) => format!("ERROR ({e})"),
                        Status::NotRun(why) => format!("SKIP ({why})"),
                    };
                    bar.suspend(|| {
                        eprintln!(
                            "{word} {} ({} passed, {} failed, {} skipped) {:.1} s",
                            o.name,
                            o.counts.pass,
                            o.counts.fail,
                            o.counts.skip,
                            o.duration.as_secs_f64()
                        )
                    });
                    bar.inc(1);
                }
            }
            bar.set_message(msg(&running, failed, &step));
        }
        bar.finish_and_clear();
    });

    let wall = Instant::now();
    let r = run::run(&m, &cells, &opts, &cancel, &tx).await;
    drop(tx);
    let _ = reporter.await;
    let (outcomes, stats) = r?;
    let wall = wall.elapsed().as_secs_f64();
    let (cw, cpu) = (stats.cells_wall.as_secs_f64(), stats.cells_cpu);

    println!("{}", report::summary_table(&outcomes));
    let count = |f: &dyn Fn(&Status) -> bool| outcomes.iter().filter(|o| f(&o.status)).count();
    let passed = count(&|s| s.ok());
    let not_run = count(&|s| matches!(s, Status::NotRun(_)));
    println!(
        "cells: {passed} passed, {} failed, {not_run} not run; {wall:.1} s wall ({:.1} s preparing, {cw:.1} s running cells); QEMU CPU {cpu:.1} s = {:.2} cores busy while cells ran",
        outcomes.len() - passed - not_run,
        stats.prepare.as_secs_f64(),
        cpu / cw.max(1e-9)
    );
    println!(
        "JUnit: {} (per cell under {})",
        run::aggregate_path(&args.out).display(),
        args.out.join("cells").display()
    );
    if cancel.is_cancelled() {
        return Ok(130);
    }
    Ok(if passed == outcomes.len() { 0 } else { 1 })
}

/// Runs `harness junit merge`.
pub fn merge(args: MergeArgs) -> Result<u8, CliError> {
    report::merge(&args.out, &args.inputs)?;
    println!(
        "merged {} reports into {}",
        args.inputs.len(),
        args.out.display()
    );
    Ok(0)
}
