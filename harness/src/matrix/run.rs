//! Runs the selected cells of a [`Matrix`] through the one planner and
//! runner: the session opened once, each kernel resolved (and its virtiofs
//! support looked up) once, each kselftest suite built once per kernel,
//! each cell's shares decided, then the cells handed to
//! [`crate::runner::run`] largest cost first, concurrently within a
//! [`Budget`]. What happens leaves as events for the reporters.

use super::model::{Cell, SuiteKind};
use super::Matrix;
use crate::error::Error;
use crate::events::{CellMeta, CellOutcome};
use crate::planner::{self, PlannedCell, Session};
use crate::prepare::{CellWant, ExpectWant, PrepareError, ShareWant, SuiteWant};
use crate::reporter::Reporters;
use crate::runner::RunOptions;
pub use crate::runner::{children_cpu_secs, Budget, QEMU_OVERHEAD_MIB};
use crate::share::{self, KernelSupport, ShareError, ShareSetup};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// How to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Reports and logs go here (`target/matrix`).
    pub out_dir: PathBuf,
    /// Budget.
    pub budget: Budget,
    /// Stop starting cells after the first unexpected result.
    pub fail_fast: bool,
    /// `--test GLOB`: only matching cases are reported; top-level tests
    /// the glob's first `/` segment rules out are not run.
    pub test_glob: Option<String>,
    /// Debian mirror override.
    pub debian_mirror: Option<String>,
    /// `--gdb` (address, guest waits) for the one cell.
    pub gdb: Option<(String, bool)>,
    /// What earlier runs taught: the order (longest first) and each
    /// cell's demand for the scheduler.
    pub costs: crate::costs::Costs,
    /// Cells whose VM would be the same boot once together
    /// ([`crate::shared_boot`]; off with `--boot-per-cell`).
    pub share_boots: bool,
    /// TCG's vCPU threads for every cell (`--tcg-thread`, resolved).
    pub tcg_thread: crate::qemu::TcgThread,
}

/// Where a cell's logs and JUnit go.
pub fn cell_dir(out: &Path, cell_name: &str) -> PathBuf {
    let mut p = out.join("cells");
    for part in cell_name.split('/') {
        p.push(part);
    }
    p
}

/// The aggregate report's path.
pub fn aggregate_path(out: &Path) -> PathBuf {
    out.join("junit.xml")
}

pub use crate::planner::keep_case;

/// A cell's share setup from the matrix: its `shares:` (checked on disk
/// now) and artifacts setting, decided by [`share::decide`] as
/// [`Session::prepare`] decides them. `Err` is the message the cell is reported with: an
/// explicit share that cannot work, or a missing directory.
pub fn cell_shares(
    cell: &Cell,
    daemon: Result<PathBuf, String>,
    support: Option<KernelSupport>,
) -> Result<ShareSetup, String> {
    let explicit = explicit_shares(cell)?;
    share::decide(explicit, cell.artifacts, daemon, support).map_err(|e| share_error(cell, e))
}

/// A cell's `shares:`, checked on disk now.
fn explicit_shares(cell: &Cell) -> Result<Vec<share::ShareSpec>, String> {
    cell.shares
        .iter()
        .map(|s| s.resolve())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("shares: {e}"))
}

/// The message a cell whose shares cannot work is reported with.
fn share_error(cell: &Cell, e: ShareError) -> String {
    match e {
        // Not `--share`: say what the matrix asked for.
        ShareError::Unavailable(why) => format!(
            "shares {} asked for, but virtiofs cannot work here: {why}",
            cell.shares
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        e => format!("shares: {e}"),
    }
}

/// What reports say about a matrix cell before it runs.
pub fn meta(m: &Matrix, index: usize, c: usize, out: &Path) -> CellMeta {
    let cell = &m.cells[c];
    let k = &m.kernels[cell.kernel];
    CellMeta {
        index,
        name: cell.name.clone(),
        kernel: k.spec_text.clone(),
        kernel_name: k.name.clone(),
        topology: m.topologies[cell.topology].name.clone(),
        suite: m.suites[cell.suite].name.clone(),
        expect: Some(k.expect.encode()),
        out_dir: cell_dir(out, &cell.name),
        facts: None,
    }
}

/// Plans one matrix cell through [`Session::prepare`]; `Err` is the
/// message the cell is reported with.
async fn plan_cell(
    m: &Matrix,
    c: usize,
    meta: &CellMeta,
    opts: &Options,
    session: &mut Session,
    reporters: &mut Reporters,
) -> Result<crate::planner::ReadyCell, String> {
    let cell = &m.cells[c];
    let kernel = &m.kernels[cell.kernel];
    let topo = &m.topologies[cell.topology];
    let suite = &m.suites[cell.suite];
    let explicit = explicit_shares(cell)?;
    let want = CellWant {
        name: Some(cell.name.clone()),
        kernel_label: kernel.spec_text.clone(),
        kernel_name: Some(kernel.name.clone()),
        kernel: kernel.spec.clone(),
        topology_label: topo.name.clone(),
        topology: topo.topology.clone(),
        suite: match &suite.kind {
            SuiteKind::Builtin(name) if crate::suite::is_kselftest_suite(name) => {
                SuiteWant::Named {
                    name: name.clone(),
                    kselftest_tree: None,
                }
            }
            _ => SuiteWant::Tests {
                label: suite.name.clone(),
                tests: m.suite_tests(cell),
            },
        },
        extra_tests: Vec::new(),
        expect: ExpectWant::Given(meta.expect.clone()),
        accel: cell.accel,
        arch: kernel.arch,
        shares: ShareWant {
            explicit,
            artifacts: cell.artifacts,
        },
        known_failures: suite.known_failures.clone(),
        out_dir: meta.out_dir.clone(),
    };
    let prepared = session
        .prepare(want, reporters)
        .await
        .map_err(|e| match e {
            PrepareError::Shares(e) => share_error(cell, e),
            e => e.to_string(),
        })?;
    if let Some(note) = &prepared.notes.preboot {
        let _ = reporters.step(&format!("{}: {note}", cell.name));
    }
    let mut req = prepared.request;
    req.tcg_thread = opts.tcg_thread;
    req.cmdline = cell.cmdline.clone();
    req.debug.qemu_args = cell.qemu_args.clone();
    if let Some((addr, wait)) = &opts.gdb {
        let stub = crate::qemu::GdbStub {
            listen: crate::debug::gdb_listen(addr, &meta.out_dir),
            wait: *wait,
        };
        let vmlinux = crate::debug::vmlinux_beside(&req.image);
        let _ = reporters.step(&format!(
            "gdb: {}",
            crate::debug::gdb_command(vmlinux.as_deref(), &stub)
        ));
        req.debug.gdb = Some(stub);
    }
    req.timeout_scale = cell.timeout_scale;
    req.test_glob = opts.test_glob.clone();
    Ok(planner::cell(meta.index, req))
}

/// Runs `cells` (indices into `m.cells`). Returns one outcome per cell, in
/// the order given (cells never started are not run).
pub async fn run(
    m: &Matrix,
    cells: &[usize],
    opts: &Options,
    cancel: &CancellationToken,
    reporters: &mut Reporters,
) -> Result<Vec<CellOutcome>, Error> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&opts.out_dir)
        .map_err(|e| Error::infra(format!("cannot create {}: {e}", opts.out_dir.display())))?;
    let mut session = Session::open(opts.debian_mirror.clone(), reporters).await?;
    // The guest binaries first: a cache that cannot hold them ends the run
    // before any download.
    session.guest_bins(reporters).await?;
    let mut planned = Vec::new();
    for (i, &c) in cells.iter().enumerate() {
        let meta = meta(m, i, c, &opts.out_dir);
        if cancel.is_cancelled() {
            planned.push(PlannedCell::Failed {
                meta,
                error: "interrupted while preparing".into(),
            });
            continue;
        }
        match plan_cell(m, c, &meta, opts, &mut session, reporters).await {
            Ok(r) => planned.push(PlannedCell::Ready(Box::new(r))),
            Err(error) => planned.push(PlannedCell::Failed { meta, error }),
        }
    }
    // Exclusive cells first (one at a time, on cores never overcommitted:
    // nothing big runs yet to wait for), then longest
    // first (a long cell started last would end the run late): learned
    // seconds, else the declared cost scaled to them.
    let est = super::plan::estimates(m, cells, &opts.costs);
    let alone = |i: usize| m.suites[m.cells[cells[i]].suite].exclusive;
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by(|&a, &b| {
        alone(b)
            .cmp(&alone(a))
            .then(est[b].total_cmp(&est[a]))
            .then(a.cmp(&b))
    });
    let placement = cells
        .iter()
        .zip(&est)
        .map(|(&c, &seconds)| crate::schedule::Placement {
            demand: opts.costs.get(&m.cells[c].name).and_then(|k| k.demand()),
            exclusive: m.suites[m.cells[c].suite].exclusive,
            seconds: Some(seconds),
        })
        .collect();
    let run_opts = RunOptions {
        budget: opts.budget,
        fail_fast: opts.fail_fast,
        order: Some(order),
        prepare: t0.elapsed(),
        placement,
        share_boots: opts.share_boots,
    };
    crate::runner::run(&mut session, planned, &run_opts, cancel, reporters).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::AccelChoice;
    use crate::share::ShareSpec;

    fn cell(shares: Vec<ShareSpec>, artifacts: bool) -> Cell {
        Cell {
            name: "k/t/s".into(),
            kernel: 0,
            topology: 0,
            suite: 0,
            accel: AccelChoice::Tcg,
            timeout_scale: 1.0,
            cmdline: vec![],
            shares,
            artifacts,
            qemu_args: vec![],
        }
    }

    fn built_in() -> Option<KernelSupport> {
        Some(KernelSupport::AssumedBuiltIn)
    }

    #[test]
    fn cell_shares_resolve_decide_and_say_what_the_matrix_asked_for() {
        let d = tempfile::tempdir().unwrap();
        let ro = ShareSpec::parse(&format!("{}:/mnt/ro:ro", d.path().display())).unwrap();
        let daemon = || Ok::<_, String>(PathBuf::from("/v"));

        // Explicit share and artifacts: both on, the host path canonical.
        let s = cell_shares(&cell(vec![ro.clone()], true), daemon(), built_in()).unwrap();
        assert!(s.active() && s.artifacts);
        assert_eq!(s.shares[0].host, std::fs::canonicalize(d.path()).unwrap());

        // No daemon: artifacts alone fall back with a note ...
        let s = cell_shares(&cell(vec![], true), Err("no virtiofsd".into()), None).unwrap();
        assert!(!s.active());
        assert!(s.notes[0].contains("no artifacts share (no virtiofsd)"));
        // ... an explicit share is the cell's error, naming the share.
        let e = cell_shares(
            &cell(vec![ro.clone()], true),
            Err("no virtiofsd".into()),
            None,
        )
        .unwrap_err();
        assert_eq!(
            e,
            format!(
                "shares {}:/mnt/ro:ro asked for, but virtiofs cannot work here: no virtiofsd",
                d.path().display()
            )
        );
        let e = cell_shares(
            &cell(vec![ro], false),
            daemon(),
            Some(KernelSupport::Missing("kernel without virtiofs".into())),
        )
        .unwrap_err();
        assert!(
            e.ends_with("cannot work here: kernel without virtiofs"),
            "{e}"
        );

        // A directory that is not there is the cell's error too.
        let gone = ShareSpec::parse(&format!("{}/gone", d.path().display())).unwrap();
        let e = cell_shares(&cell(vec![gone], true), daemon(), built_in()).unwrap_err();
        assert!(
            e.starts_with("shares: ") && e.contains("gone") && e.contains("No such file"),
            "{e}"
        );

        // Nothing wanted: nothing looked at.
        let s = cell_shares(&cell(vec![], false), Err("no virtiofsd".into()), None).unwrap();
        assert!(!s.active() && s.notes.is_empty());
    }
}
