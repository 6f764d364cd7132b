//! The `harness matrix` and `harness junit merge` front doors: their
//! arguments ([`super::args`], typed at the edge), selection, `--list`,
//! then the planner and runner (`run`); the terminal output and the exit
//! status are reporters of the binary.

use super::args::{MatrixArgs, MergeArgs};
use super::plan::{self, Filters};
use super::report;
use super::run::{self, Budget, Options};
use super::MatrixError;
use crate::error::Error;
use crate::kernel::cache::CacheError;
use crate::reporter::junit::Junit;
use crate::reporter::Reporters;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// `--test GLOB` against the suites of the selected cells: one that
/// selects no case of any is a usage error naming what exists.
fn check_test(m: &super::Matrix, selected: &[usize], glob: &str) -> Result<(), MatrixError> {
    let mut suites: Vec<(String, crate::cases::SuiteCases)> = Vec::new();
    for &i in selected {
        let suite = &m.suites[m.cells[i].suite];
        if suites.iter().any(|(n, _)| *n == suite.name) {
            continue;
        }
        let cases = match &suite.kind {
            super::model::SuiteKind::Builtin(b) => crate::cases::SuiteCases::builtin(b),
            super::model::SuiteKind::Custom(ts) => crate::cases::SuiteCases::tests(ts),
        };
        suites.push((suite.name.clone(), cases));
    }
    crate::cases::check_selection(glob, &suites).map_err(MatrixError::Usage)
}

/// The matrix file `--matrix` defaults to, in the current directory.
pub const DEFAULT_MATRIX: &str = "matrix.yaml";

/// The matrix file used for [`DEFAULT_MATRIX`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultMatrix {
    /// The file.
    pub path: PathBuf,
    /// Whether it is the matrix built into the harness (there is no
    /// [`DEFAULT_MATRIX`] in the current directory).
    pub built_in: bool,
}

/// [`DEFAULT_MATRIX`] in the current directory, else the default matrix
/// built into the harness (written into the cache once, `kernel::embedded`),
/// so an installed harness needs no checkout.
pub fn default_matrix() -> Result<DefaultMatrix, CacheError> {
    let here = Path::new(DEFAULT_MATRIX);
    if here.is_file() {
        return Ok(DefaultMatrix {
            path: here.to_path_buf(),
            built_in: false,
        });
    }
    Ok(DefaultMatrix {
        path: crate::kernel::embedded::matrix()?,
        built_in: true,
    })
}

impl From<MatrixError> for crate::error::Error {
    fn from(e: MatrixError) -> Self {
        crate::error::Error::usage(e)
    }
}

impl From<report::ReportError> for crate::error::Error {
    fn from(e: report::ReportError) -> Self {
        crate::error::Error::usage(e)
    }
}

/// What `harness matrix` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// Listed cells or planned a dry run: the text for stdout (exit 0).
    Text(String),
    /// Found no cell to run, or wrote the listing to a file (exit 0).
    Nothing,
    /// Ran cells: the exit status is the reporters' verdict.
    Ran,
}

/// Runs `harness matrix`: selection, `--list`, then the cells, with the
/// matrix's JUnit reporter (one file per cell and the aggregate) added to
/// `reporters`.
pub async fn matrix(
    args: MatrixArgs,
    cancel: CancellationToken,
    reporters: &mut Reporters,
) -> Result<Done, Error> {
    // Every output path is checked before the file is read, let alone a
    // kernel fetched.
    let mut files = vec![
        ("--json", args.json.as_ref().and_then(|j| j.as_deref())),
        ("--costs", args.costs.as_deref()),
    ];
    files.extend(args.reports.paths());
    crate::outputs::check_files(&files).map_err(Error::usage)?;
    if !args.list {
        crate::outputs::check_dir("--out", &args.out).map_err(Error::usage)?;
    }
    if args.list && args.dry_run {
        return Err(Error::usage("--list and --dry-run: give one of them"));
    }
    if args.list && args.reports.html.is_some() {
        return Err(Error::usage(
            "--list writes no report: --html is for a run of the cells",
        ));
    }
    // A dry run writes nothing: the built-in matrix is read from a
    // temporary copy, not unpacked into the cache.
    let mut _shipped = None;
    let path = if args.dry_run
        && args.matrix == Path::new(DEFAULT_MATRIX)
        && !Path::new(DEFAULT_MATRIX).is_file()
    {
        let tmp = tempfile::tempdir().map_err(Error::infra)?;
        let dir = crate::kernel::embedded::materialise(
            &crate::kernel::cache::Cache::at(tmp.path()),
            "shipped",
            crate::kernel::embedded::shipped(),
            0o644,
        )
        .map_err(Error::infra)?;
        _shipped = Some(tmp);
        reporters.step(&format!(
            "no {DEFAULT_MATRIX} in the current directory: using the built-in default matrix"
        ))?;
        dir.join(DEFAULT_MATRIX)
    } else if args.matrix == Path::new(DEFAULT_MATRIX) {
        let d = default_matrix().map_err(Error::infra)?;
        if d.built_in {
            reporters.step(&format!(
                "no {DEFAULT_MATRIX} in the current directory: using the built-in default matrix ({})",
                d.path.display()
            ))?;
        }
        d.path
    } else {
        args.matrix.clone()
    };
    let m = super::load(&path)?;
    let mut filters = Filters {
        kernel: args.kernel.clone(),
        topology: args.topology.clone(),
        suite: args.suite.clone(),
        only: None,
    };
    if args.rerun_failed {
        let names = report::not_passed(&run::aggregate_path(&args.out))?;
        reporters.step(&format!(
            "rerunning {} cells that did not pass",
            names.len()
        ))?;
        filters.only = Some(names);
    }
    let selected = plan::select(&m, &filters);
    if selected.is_empty() && !args.rerun_failed {
        return Err(MatrixError::Usage(no_match(&m, &filters)).into());
    }
    if let Some(glob) = &args.test {
        check_test(&m, &selected, glob)?;
    }
    let (shard_i, shard_n) = args.shard.unwrap_or((1, 1));
    let (admission, tcg_choice) = (args.jobs, args.tcg_thread);
    let costs_path = args
        .costs
        .clone()
        .unwrap_or_else(|| crate::costs::default_path(&args.out));
    let (costs, costs_note) = crate::costs::Costs::load(&costs_path);
    if let Some(note) = costs_note {
        reporters.step(&note)?;
    }
    // Shards must agree across machines: only a file every shard was given
    // balances them; otherwise the declared costs do.
    let shard_costs = if args.costs.is_some() {
        costs.clone()
    } else {
        crate::costs::Costs::default()
    };
    if args.list {
        let text = if args.json.is_some() {
            serde_json::to_string_pretty(&plan::list_json_by(&m, &selected, shard_n, &shard_costs))
                .unwrap_or_default()
                + "\n"
        } else {
            plan::list_shard_text(
                &m,
                &selected,
                shard_n,
                args.shard.as_ref().map(|_| shard_i),
                &shard_costs,
            )
        };
        if let Some(Some(file)) = &args.json {
            // `--list --json FILE`: the listing goes to the file.
            crate::reporter::write_atomic(file, text.as_bytes()).map_err(Error::usage)?;
            return Ok(Done::Nothing);
        }
        return Ok(Done::Text(text));
    }
    if args.json == Some(None) {
        return Err(MatrixError::Usage(
            "--json needs a FILE for the results (or --list for a JSON listing)".into(),
        )
        .into());
    }
    let cells = plan::shards_by(&m, &selected, shard_n, &shard_costs)
        .into_iter()
        .nth(shard_i - 1)
        .unwrap_or_default();
    if args.gdb.is_some() && cells.len() != 1 {
        return Err(MatrixError::Usage(crate::debug::gdb_one_cell(
            cells.iter().map(|&c| m.cells[c].name.as_str()),
        ))
        .into());
    }
    if cells.is_empty() {
        reporters.step("no cells selected")?;
        return Ok(Done::Nothing);
    }
    // Every selected kernel checked before anything is fetched or booted.
    let mut checked = std::collections::BTreeSet::new();
    for &c in &cells {
        let k = &m.kernels[m.cells[c].kernel];
        if checked.insert(k.spec_text.clone()) {
            crate::planner::check_kernel(&k.spec)
                .map_err(|e| Error::usage(format!("kernel {} ({}): {e}", k.name, k.spec_text)))?;
        }
    }
    let mut budget = Budget::from_host(admission);
    let tcg_thread = tcg_choice.resolve(&budget, cells.len());
    // The count of round-robin cells holds where they run under TCG (the
    // choice means nothing to KVM, whose cells keep the measured rule).
    let under_tcg = matches!(
        crate::host::choose_accel(crate::host::AccelChoice::Auto, &crate::host::probe_kvm()),
        Ok((crate::qemu::Accel::Tcg, _))
    );
    budget.round_robin = under_tcg && tcg_thread == crate::qemu::TcgThread::Single;
    // Cells beyond the cores fill at SCHED_IDLE (crate::fill) where the
    // harness may move them back to normal.
    budget.fill = budget.round_robin
        && budget.admission == crate::schedule::Admission::Measured
        && crate::sched_class::can_promote();
    let opts = Options {
        out_dir: args.out.clone(),
        budget,
        fail_fast: args.fail_fast,
        test_glob: args.test.clone(),
        debian_mirror: args.debian_mirror.clone(),
        gdb: args.gdb(),
        costs: costs.clone(),
        share_boots: !args.boot_per_cell,
        tcg_thread,
    };
    if args.dry_run {
        let mut writes = vec![
            format!(
                "{} (the aggregate JUnit)",
                run::aggregate_path(&args.out).display()
            ),
            format!("{} (learned costs)", costs_path.display()),
        ];
        if let Some(Some(p)) = &args.json {
            writes.push(format!("{} (the JSON results)", p.display()));
        }
        writes.extend(args.reports.writes(&args.out));
        let text = super::dry_run::plan(&m, &cells, &opts, &writes)?;
        return Ok(Done::Text(text));
    }
    reporters.step(&format!(
        "{} cells (shard {shard_i}/{shard_n}), budget: {}, TCG thread={}; costs: {}",
        cells.len(),
        budget.describe(),
        tcg_thread.name(),
        if costs.is_empty() {
            format!("none learned yet ({})", costs_path.display())
        } else {
            costs_path.display().to_string()
        }
    ))?;
    reporters.add(crate::reporter::costs::CostsFile::new(costs_path, costs));
    reporters.add(Junit::new(&run::aggregate_path(&args.out), "harness matrix").per_cell());
    if let Some(Some(path)) = &args.json {
        reporters.add(crate::reporter::json::Json::new(path));
    }
    args.reports.add_reporters(&args.out, reporters);
    run::run(&m, &cells, &opts, &cancel, reporters).await?;
    Ok(Done::Ran)
}

/// Why a selection matched nothing, with the names that exist (a typo in
/// `--kernel` must not turn CI green).
fn no_match(m: &super::Matrix, f: &Filters) -> String {
    let names = |v: Vec<&str>| v.join(", ");
    format!(
        "no cell of {} matches{}{}{}; kernels: {}; topologies: {}; suites: {}",
        m.path.display(),
        if f.kernel.is_empty() {
            String::new()
        } else {
            format!(" --kernel {}", f.kernel.join(","))
        },
        if f.topology.is_empty() {
            String::new()
        } else {
            format!(" --topology {}", f.topology.join(","))
        },
        if f.suite.is_empty() {
            String::new()
        } else {
            format!(" --suite {}", f.suite.join(","))
        },
        names(m.kernels.iter().map(|k| k.name.as_str()).collect()),
        names(m.topologies.iter().map(|t| t.name.as_str()).collect()),
        names(m.suites.iter().map(|s| s.name.as_str()).collect()),
    )
}

/// Runs `harness junit merge`; says what it wrote.
pub fn merge(args: MergeArgs) -> Result<String, Error> {
    report::merge(&args.out, &args.inputs)?;
    Ok(format!(
        "merged {} reports into {}",
        args.inputs.len(),
        args.out.display()
    ))
}
