//! The one runner: starts planned cells within a host [`Budget`] of CPUs
//! and memory (one at a time for `run`, `bench` and `bisect`; concurrently
//! for `matrix`), judges each finished cell once (cases, `--test`
//! filtering, known failures, status) and tells the [`Reporters`] —
//! before the next cell is started, so a cell's reports are on disk when
//! the next one boots.
//!
//! Architecture invariant: the runner writes no report and prints
//! nothing; everything it knows leaves as an [`Event`].

use crate::error::Error;
use crate::events::{CellOutcome, CellStatus, Event, RunStats};
use crate::planner::{keep_case, PlannedCell, ReadyCell, Session};
use crate::reporter::Reporters;
use crate::result::CellResult;
use crate::shared_boot::BootGroup;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;

pub use crate::schedule::{Budget, QEMU_OVERHEAD_MIB};

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Host budget.
    pub budget: Budget,
    /// Stop starting cells after the first unexpected result.
    pub fail_fast: bool,
    /// The order cells are started in (indices; default: as given).
    pub order: Option<Vec<usize>>,
    /// Time the front door spent preparing (for [`RunStats`]).
    pub prepare: Duration,
    /// Per cell (by index): learned demand, exclusive (default: neither).
    pub placement: Vec<crate::schedule::Placement>,
    /// Cells whose VM would be the same boot once together
    /// ([`crate::shared_boot`]).
    pub share_boots: bool,
}

impl RunOptions {
    /// One cell after another, in order.
    pub fn serial(prepare: Duration) -> RunOptions {
        RunOptions {
            budget: Budget::serial(),
            fail_fast: false,
            order: None,
            prepare,
            placement: Vec::new(),
            share_boots: false,
        }
    }
}

/// CPU seconds of reaped children (QEMU, cargo), user + system.
pub fn children_cpu_secs() -> f64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage we own.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Judges a cell that ran: its cases (known failures applied, `--test`
/// filtering), their counts and the cell's status.
pub fn judge(ready: &ReadyCell, result: CellResult) -> CellOutcome {
    judge_runs(ready, vec![result])
}

/// The cases of one run of `ready` (known failures applied, `--test`
/// filtering).
fn cases_of(ready: &ReadyCell, result: &CellResult) -> Vec<crate::verdict::Case> {
    let names: Vec<String> = ready.spec.tests.iter().map(|t| t.name.clone()).collect();
    crate::verdict::cases(result)
        .into_iter()
        .filter(|c| keep_case(ready.test_glob.as_deref(), &names, &c.name))
        .collect()
}

/// [`judge`] for every boot of a cell: one, or one per iteration with
/// `--fresh-boot`. A repeated cell gets one verdict per case over its
/// iterations ([`crate::repeat::aggregate`]) and keeps the first failing
/// iteration's logs.
pub fn judge_runs(ready: &ReadyCell, mut results: Vec<CellResult>) -> CellOutcome {
    for r in &mut results {
        r.known_failures = ready.known_failures.clone();
    }
    let duration = results.iter().map(|r| r.duration).sum();
    let Some(last) = results.pop() else {
        return CellOutcome::without_result(
            ready.meta.clone(),
            CellStatus::Error("internal error: no run of the cell".into()),
        );
    };
    let (cases, summary) = match ready.spec.repeat {
        None => (cases_of(ready, &last), None),
        Some(repeat) => {
            let iterations = if repeat.fresh_boot {
                results.iter().chain([&last]).cloned().collect()
            } else {
                let names: Vec<String> = last.planned.clone();
                crate::repeat::split(&last, crate::repeat::once(&names))
            };
            let per: Vec<_> = iterations.iter().map(|r| cases_of(ready, r)).collect();
            let (cases, mut summary) = crate::repeat::aggregate(repeat, &per);
            summary.kept = summary.first_failure.and_then(|k| {
                if repeat.fresh_boot {
                    Some(ready.spec.out_dir.join(format!("iteration-{k}")))
                } else {
                    crate::repeat::keep_iteration(&ready.spec.out_dir, k).ok()
                }
            });
            (cases, Some(Box::new(summary)))
        }
    };
    let counts = crate::verdict::counts(&cases);
    let cases = with_dump_notes(cases, &last.notes);
    CellOutcome {
        meta: ready.meta.clone(),
        status: CellStatus::judge(&last, &counts),
        cases,
        counts,
        duration,
        result: Some(Box::new(last)),
        repeat: summary,
    }
}

/// What the boots of one cell gave: a result per boot, or why it could not run.
type Boots = Result<Vec<CellResult>, String>;

/// Boots `ready` once, or (`--fresh-boot`) once per iteration, each in
/// `<out>/iteration-K`, stopping after a failed one under `--until-fail`.
async fn boot_runs(
    ready: &ReadyCell,
    qemu: &crate::host::Qemu,
    bins: &crate::guestbin::GuestBins,
    cancel: &CancellationToken,
    live: crate::vm::LiveTap,
    class: Option<crate::sched_class::ClassHandle>,
) -> Boots {
    let boot = |spec: crate::cell::CellSpec| {
        let (live, class) = (live.clone(), class.clone());
        async move {
            crate::cell::run_attached(&spec, &ready.shares, qemu, bins, cancel, Some(live), class)
                .await
                .map_err(|e| e.to_string())
        }
    };
    let Some(repeat) = ready.spec.repeat.filter(|r| r.fresh_boot) else {
        return Ok(vec![boot(ready.spec.clone()).await?]);
    };
    let mut runs = Vec::new();
    for k in 1..=repeat.times.max(1) {
        let mut spec = ready.spec.clone();
        spec.out_dir = spec.out_dir.join(format!("iteration-{k}"));
        let mut r = boot(spec).await?;
        r.known_failures = ready.known_failures.clone();
        let failed = cases_of(ready, &r)
            .iter()
            .any(|c| matches!(c.status, crate::verdict::CaseStatus::Fail { .. }));
        runs.push(r);
        if cancel.is_cancelled() || (repeat.until_fail && failed) {
            break;
        }
    }
    Ok(runs)
}

/// The memory image's note (see [`crate::debug::dump_note`]) added to the
/// failure text of every failed case, so the JUnit failure names the file.
fn with_dump_notes(
    mut cases: Vec<crate::verdict::Case>,
    notes: &[String],
) -> Vec<crate::verdict::Case> {
    let Some(note) = notes
        .iter()
        .find(|n| n.starts_with(crate::debug::DUMP_NOTE))
    else {
        return cases;
    };
    for c in &mut cases {
        if let crate::verdict::CaseStatus::Fail { text, .. } = &mut c.status {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(note);
        }
    }
    cases
}

/// What one boot ran: a cell, or a group's host and riders
/// ([`crate::shared_boot`]).
struct Booted {
    host: ReadyCell,
    riders: Vec<ReadyCell>,
}

impl Booted {
    /// Each member's outcome, riders first: a group's one result is cut
    /// into one per member, and the riders' directories link to the
    /// host's logs.
    fn outcomes(&self, boots: Boots) -> Vec<CellOutcome> {
        let results = match boots {
            Err(e) => {
                return self
                    .riders
                    .iter()
                    .chain([&self.host])
                    .map(|c| {
                        CellOutcome::without_result(c.meta.clone(), CellStatus::Error(e.clone()))
                    })
                    .collect()
            }
            Ok(results) if self.riders.is_empty() => return vec![judge_runs(&self.host, results)],
            Ok(results) => results,
        };
        let Some(result) = results.last() else {
            return vec![judge_runs(&self.host, results)];
        };
        let refs: Vec<&ReadyCell> = self.riders.iter().collect();
        let parts = crate::shared_boot::split(result, &self.host, &refs);
        refs.into_iter()
            .chain([&self.host])
            .zip(parts)
            .map(|(cell, part)| {
                let mut o = judge_runs(cell, vec![part]);
                if cell.meta.index != self.host.meta.index {
                    if let Err(e) = crate::shared_boot::link_logs(
                        &cell.spec.out_dir,
                        &self.host.spec.out_dir,
                        &self.host.meta.name,
                    ) {
                        if let Some(r) = o.result.as_mut() {
                            r.notes.push(format!("could not link the boot's logs: {e}"));
                        }
                    }
                }
                o
            })
            .collect()
    }
}

/// Runs `cells` (their `meta.index` is their position). Returns one
/// outcome per cell in that order (cells never started are
/// [`CellStatus::NotRun`]).
pub async fn run(
    session: &mut Session,
    cells: Vec<PlannedCell>,
    opts: &RunOptions,
    cancel: &CancellationToken,
    reporters: &mut Reporters,
) -> Result<Vec<CellOutcome>, Error> {
    // Each architecture's QEMU and guest binaries, found before any cell
    // starts (the host's are always there; others only when a cell needs them).
    let mut machines: BTreeMap<
        crate::arch::Arch,
        (Arc<crate::host::Qemu>, Arc<crate::guestbin::GuestBins>),
    > = BTreeMap::new();
    let host_bins = session.guest_bins(reporters).await?;
    machines.insert(crate::arch::Arch::X86_64, (session.qemu.clone(), host_bins));
    for c in &cells {
        if let PlannedCell::Ready(r) = c {
            if let std::collections::btree_map::Entry::Vacant(slot) = machines.entry(r.spec.arch) {
                let qemu = session.qemu_for(r.spec.arch).map_err(Error::infra)?;
                let bins = session.guest_bins_for(r.spec.arch, reporters).await?;
                slot.insert((qemu, bins));
            }
        }
    }
    reporters.send(&Event::RunStarted {
        cells: cells.iter().map(|c| c.meta().clone()).collect(),
        host: session.host_facts(),
        at: SystemTime::now(),
    })?;
    let mut slots: Vec<Option<CellOutcome>> = vec![None; cells.len()];
    let order = opts
        .order
        .clone()
        .unwrap_or_else(|| (0..cells.len()).collect());
    let groups = if opts.share_boots {
        crate::shared_boot::groups(&cells, &order, &opts.placement)
    } else {
        order.into_iter().map(BootGroup::alone).collect()
    };
    let mut pending: VecDeque<BootGroup> = groups.into();
    let (t1, cpu1) = (Instant::now(), children_cpu_secs());
    let mut running: tokio::task::JoinSet<(Box<Booted>, Boots)> = tokio::task::JoinSet::new();
    let mut sched = crate::schedule::Scheduler::new(opts.budget);
    // Cells beyond one per core at SCHED_IDLE (crate::fill), looked at
    // every fill::TICK while any runs idle.
    let mut fill = opts
        .budget
        .fill
        .then(|| crate::fill::Fill::new(opts.budget.cores as usize));
    let mut fill_tick = tokio::time::interval(crate::fill::TICK);
    fill_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Live lines of cells that ask for them (`--live`), forwarded in order.
    let (live_tx, mut live_rx) = tokio::sync::mpsc::channel(crate::vm::LIVE_BACKLOG);
    let mut stop = false;
    let placement = |g: &BootGroup| crate::shared_boot::placement(g, &opts.placement);
    let need = |g: &BootGroup| {
        let p = placement(g);
        let (vcpus, mem) = match &cells[g.host] {
            PlannedCell::Ready(r) => (
                r.spec.topology.cpus(),
                r.spec.topology.mem_mib() + QEMU_OVERHEAD_MIB,
            ),
            PlannedCell::Failed { .. } => (0, 0),
        };
        crate::schedule::Need::new(vcpus, mem, p.demand, p.exclusive, opts.budget.cores)
    };
    let ready_of = |i: usize| match &cells[i] {
        PlannedCell::Ready(r) => Some(r.as_ref().clone()),
        PlannedCell::Failed { .. } => None,
    };
    loop {
        while !stop && !cancel.is_cancelled() {
            // A cell that failed planning needs nothing: it is reported at once.
            // The first waiting cell, else one that ends before it could
            // be delayed (Scheduler::backfills).
            let fit = pending.iter().enumerate().position(|(k, g)| {
                matches!(cells[g.host], PlannedCell::Failed { .. })
                    || ((k == 0 || sched.backfills(placement(g).seconds)) && sched.admits(&need(g)))
            });
            let Some(pos) = fit else { break };
            let Some(g) = pending.remove(pos) else { break };
            let i = g.host;
            let host = match &cells[i] {
                PlannedCell::Failed { meta, error } => {
                    let o =
                        CellOutcome::without_result(meta.clone(), CellStatus::Error(error.clone()));
                    stop |= opts.fail_fast;
                    reporters.send(&Event::CellFinished(Box::new(o.clone())))?;
                    slots[i] = Some(o);
                    continue;
                }
                PlannedCell::Ready(r) => r.as_ref().clone(),
            };
            let riders: Vec<ReadyCell> = g.riders.iter().filter_map(|&r| ready_of(r)).collect();
            sched.start(i, need(&g), placement(&g).seconds);
            // Every cell gets a handle: a suspect wedged guest is held
            // idle even where the runner does not fill.
            let class = Some(fill.as_mut().map_or_else(
                || crate::sched_class::ClassHandle::new(crate::sched_class::Class::Normal),
                |f| f.start(i, Instant::now()),
            ));
            for m in g.members() {
                reporters.send(&Event::CellStarted {
                    index: m,
                    name: cells[m].meta().name.clone(),
                })?;
            }
            let (qemu, bins) = machines[&host.spec.arch].clone();
            let cancel = cancel.clone();
            let live = crate::vm::LiveTap {
                index: i,
                tx: live_tx.clone(),
            };
            running.spawn(async move {
                let booted = Box::new(Booted { host, riders });
                let r = if booted.riders.is_empty() {
                    boot_runs(&booted.host, &qemu, &bins, &cancel, live, class).await
                } else {
                    let refs: Vec<&ReadyCell> = booted.riders.iter().collect();
                    let one = crate::shared_boot::merged(&booted.host, &refs);
                    boot_runs(&one, &qemu, &bins, &cancel, live, class).await
                };
                (booted, r)
            });
        }
        // The measured rule looks at the host again now and then: a
        // running cell going idle makes room without ending.
        let recheck = sched.recheck().filter(|_| !pending.is_empty() && !stop);
        let filling = fill.as_ref().is_some_and(crate::fill::Fill::filling);
        let joined = loop {
            tokio::select! {
                _ = fill_tick.tick(), if filling => {
                    if let Some(f) = fill.as_mut() {
                        f.tick(Instant::now(), crate::sched_class::ClassHandle::run_delay);
                    }
                }
                j = running.join_next() => break Some(j),
                Some((index, line)) = live_rx.recv() => {
                    reporters.send(&Event::Live { index, line })?;
                }
                _ = tokio::time::sleep(recheck.unwrap_or_default()), if recheck.is_some() => break None,
            }
        };
        let Some(joined) = joined else {
            continue;
        };
        // What a finished cell printed last comes before its result.
        while let Ok((index, line)) = live_rx.try_recv() {
            reporters.send(&Event::Live { index, line })?;
        }
        let Some(joined) = joined else {
            break;
        };
        let (booted, r) = joined.map_err(|e| Error::infra(format!("internal error: {e}")))?;
        sched.finish(booted.host.meta.index);
        let note = fill
            .as_mut()
            .and_then(|f| f.finish(booted.host.meta.index, Instant::now()));
        for mut o in booted.outcomes(r) {
            if let (Some(note), Some(r)) = (&note, o.result.as_mut()) {
                r.notes.push(note.clone());
            }
            stop |= opts.fail_fast && !o.status.ok();
            reporters.send(&Event::CellFinished(Box::new(o.clone())))?;
            let i = o.meta.index;
            slots[i] = Some(o);
        }
    }
    let stats = RunStats {
        prepare: opts.prepare,
        cells_wall: t1.elapsed(),
        cells_cpu: children_cpu_secs() - cpu1,
    };
    // What never started says why.
    let why = if cancel.is_cancelled() {
        "not run: interrupted"
    } else {
        "not run: --fail-fast after an unexpected result"
    };
    for i in pending.iter().flat_map(BootGroup::members) {
        let o =
            CellOutcome::without_result(cells[i].meta().clone(), CellStatus::NotRun(why.into()));
        reporters.send(&Event::CellFinished(Box::new(o.clone())))?;
        slots[i] = Some(o);
    }
    reporters.send(&Event::RunFinished {
        stats,
        interrupted: cancel.is_cancelled(),
    })?;
    Ok(slots
        .into_iter()
        .zip(cells.iter())
        .map(|(o, c)| {
            o.unwrap_or_else(|| {
                CellOutcome::without_result(c.meta().clone(), CellStatus::NotRun("not run".into()))
            })
        })
        .collect())
}
