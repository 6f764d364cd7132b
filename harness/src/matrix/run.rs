//! Runs the selected cells of a [`Matrix`]: guest binaries built once,
//! each kernel fetched (and its virtiofs support looked up) once, then
//! cells concurrently within a [`Budget`] of host CPUs and memory, each
//! with its shares ([`cell_shares`]). Emits [`Event`]s for reporters;
//! writes each finished cell's JUnit (and the aggregate, with every
//! unfinished cell marked not run) before the next cell is started.

use super::model::{Cell, SuiteKind};
use super::report::{self, Outcome, Status};
use super::{glob, Matrix};
use crate::cell::CellSpec;
use crate::guestbin::GuestBins;
use crate::host;
use crate::kernelspec::{KernelSpec, ResolvedKernel};
use crate::result::VmEnd;
use crate::share::{self, KernelSupport, ShareError, ShareSetup};
use crate::suite::SuiteTest;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// What the runner tells reporters.
#[derive(Debug, Clone)]
pub enum Event {
    /// A preparation step (building guest binaries, fetching a kernel).
    Step(String),
    /// A cell started.
    Started {
        /// Cell name.
        name: String,
    },
    /// A cell finished (its JUnit is on disk).
    Finished(Box<Outcome>),
}

/// Host resources cells may use at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// vCPUs (TCG threads) of all running cells.
    pub cpus: u32,
    /// MiB of all running cells (guest memory + [`QEMU_OVERHEAD_MIB`]).
    pub mem_mib: u64,
    /// Most cells at once (`-j N`), if limited.
    pub max_cells: Option<usize>,
}

/// Host memory a QEMU needs beyond the guest's (TCG code buffer, devices).
pub const QEMU_OVERHEAD_MIB: u64 = 256;

impl Budget {
    /// From the host: its cores and ~75% of MemAvailable; `jobs` (`-j N`)
    /// replaces the CPU limit by a cell count.
    pub fn from_host(jobs: Option<usize>) -> Budget {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let avail_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemAvailable:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .unwrap_or(2 << 20);
        Budget {
            cpus: if jobs.is_some() { u32::MAX } else { cores },
            mem_mib: avail_kib / 1024 * 3 / 4,
            max_cells: jobs,
        }
    }

    /// Whether a cell needing `cpus` and `mem_mib` fits beside what runs.
    /// A cell always fits when nothing runs (a cell bigger than the
    /// budget runs alone).
    pub fn fits(&self, used: (u32, u64, usize), cpus: u32, mem_mib: u64) -> bool {
        let (uc, um, n) = used;
        n == 0
            || (self.max_cells.is_none_or(|m| n < m)
                && uc.saturating_add(cpus) <= self.cpus
                && um + mem_mib <= self.mem_mib)
    }
}

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
}

/// Errors that stop the whole matrix (nothing can run).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// QEMU missing or too old.
    #[error(transparent)]
    Host(#[from] host::HostError),
    /// Guest binaries could not be built.
    #[error(transparent)]
    GuestBins(#[from] crate::guestbin::GuestBinError),
    /// A report could not be written.
    #[error(transparent)]
    Junit(#[from] crate::junit::JunitError),
    /// The output directory.
    #[error("cannot create {}: {source}", path.display())]
    Dir {
        /// Directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A blocking task died.
    #[error("internal error: {0}")]
    Join(String),
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

/// Whether a case is reported under `--test GLOB`: cases of the
/// topology check and cell-level cases (`vm`, `ktap`, `boot/...`) always are.
pub fn keep_case(glob_pat: Option<&str>, suite_tests: &[String], case: &str) -> bool {
    let Some(g) = glob_pat else { return true };
    let top = case.split('/').next().unwrap_or(case);
    top == "topology" || !suite_tests.iter().any(|t| t == top) || glob::matches(g, case)
}

/// Resolves a kernel to a bootable image (blocking; downloads for `debian:`).
pub fn resolve_kernel(spec: &KernelSpec, mirror: Option<&str>) -> Result<ResolvedKernel, String> {
    crate::kernelspec::resolve(spec, mirror, &mut |_| {}).map_err(|e| e.to_string())
}

/// A cell's share setup from the matrix: its `shares:` (checked on disk
/// now) and artifacts setting, decided by [`share::decide`] as for
/// `harness run`. `Err` is the message the cell is reported with: an
/// explicit share that cannot work, or a missing directory.
pub fn cell_shares(
    cell: &Cell,
    daemon: Result<PathBuf, String>,
    support: Option<KernelSupport>,
) -> Result<ShareSetup, String> {
    let explicit = cell
        .shares
        .iter()
        .map(|s| s.resolve())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("shares: {e}"))?;
    share::decide(explicit, cell.artifacts, daemon, support).map_err(|e| match e {
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
    })
}

struct Prepared {
    spec: CellSpec,
    shares: ShareSetup,
    cpus: u32,
    mem: u64,
    index: usize,
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

/// Where the time went.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// Building guest binaries and fetching kernels.
    pub prepare: Duration,
    /// From the first cell's start to the last cell's end.
    pub cells_wall: Duration,
    /// CPU seconds of the QEMUs (children reaped while cells ran).
    pub cells_cpu: f64,
}

/// Runs `cells` (indices into `m.cells`). Returns one outcome per cell, in
/// the order given (cells never started are [`Status::NotRun`]), and timings.
pub async fn run(
    m: &Matrix,
    cells: &[usize],
    opts: &Options,
    cancel: &CancellationToken,
    events: &UnboundedSender<Event>,
) -> Result<(Vec<Outcome>, Stats), RunError> {
    let t0 = std::time::Instant::now();
    let send = |e: Event| {
        let _ = events.send(e);
    };
    std::fs::create_dir_all(&opts.out_dir).map_err(|source| RunError::Dir {
        path: opts.out_dir.clone(),
        source,
    })?;
    let qemu = Arc::new(host::find_qemu()?);
    let kvm = host::probe_kvm();

    send(Event::Step("building guest binaries".into()));
    let bins = tokio::task::spawn_blocking(GuestBins::locate_or_build)
        .await
        .map_err(|e| RunError::Join(e.to_string()))??;
    let bins = Arc::new(bins);

    // Each kernel once, in first-use order.
    let mut images: BTreeMap<String, Result<ResolvedKernel, String>> = BTreeMap::new();
    for &c in cells {
        let k = &m.kernels[m.cells[c].kernel];
        if images.contains_key(&k.spec_text) || cancel.is_cancelled() {
            continue;
        }
        send(Event::Step(format!("fetching kernel {}", k.spec_text)));
        let spec = k.spec.clone();
        let mirror = opts.debian_mirror.clone();
        let r = tokio::task::spawn_blocking(move || resolve_kernel(&spec, mirror.as_deref()))
            .await
            .map_err(|e| RunError::Join(e.to_string()))?;
        images.insert(k.spec_text.clone(), r);
    }

    // virtiofs: the daemon looked up once; each kernel's support once, and
    // only where a cell wants a share and a daemon exists (the Debian
    // lookup may download the kernel's linux-base package).
    let daemon = share::find_virtiofsd();
    if let Err(why) = &daemon {
        let wanted = |&c: &usize| m.cells[c].artifacts || !m.cells[c].shares.is_empty();
        if cells.iter().any(wanted) {
            // Said once here; each cell's notes say it again.
            send(Event::Step(format!("no virtiofs shares: {why}")));
        }
    }
    let mut supports: BTreeMap<String, KernelSupport> = BTreeMap::new();
    for &c in cells {
        let cell = &m.cells[c];
        let k = &m.kernels[cell.kernel];
        let wanted = cell.artifacts || !cell.shares.is_empty();
        if !wanted || daemon.is_err() || supports.contains_key(&k.spec_text) {
            continue;
        }
        let Some(Ok(ResolvedKernel { path: image, .. })) = images.get(&k.spec_text) else {
            continue;
        };
        if cancel.is_cancelled() {
            break;
        }
        send(Event::Step(format!(
            "checking virtiofs support of {}",
            k.spec_text
        )));
        let (spec, image, mirror) = (k.spec.clone(), image.clone(), opts.debian_mirror.clone());
        let s = tokio::task::spawn_blocking(move || {
            share::support_for(&spec, &image, mirror.as_deref())
        })
        .await
        .map_err(|e| RunError::Join(e.to_string()))?;
        supports.insert(k.spec_text.clone(), s);
    }

    // Upstream selftests (kselftest suites): built once per kernel series.
    let mut kselftests: BTreeMap<(String, String), Result<Vec<SuiteTest>, String>> =
        BTreeMap::new();
    for &c in cells {
        let cell = &m.cells[c];
        let SuiteKind::Builtin(name) = &m.suites[cell.suite].kind else {
            continue;
        };
        let k = &m.kernels[cell.kernel];
        let key = (name.clone(), k.spec_text.clone());
        if !crate::kselftest::is_kselftest_suite(name)
            || kselftests.contains_key(&key)
            || cancel.is_cancelled()
        {
            continue;
        }
        send(Event::Step(format!("building {name} for {}", k.spec_text)));
        // The resolved version: a `source:` kernel's definition says it.
        let version = match images.get(&k.spec_text) {
            Some(Ok(r)) => r.version.clone(),
            _ => None,
        }
        .or_else(|| k.spec.version().map(String::from));
        let name = name.clone();
        let ks_opts = crate::kselftest::Options {
            mirror: opts.debian_mirror.clone(),
            rebuild: false,
            jobs: 0,
        };
        let r = tokio::task::spawn_blocking(move || {
            crate::kselftest::resolve_suite(&name, None, None, version.as_deref(), &ks_opts)
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| RunError::Join(e.to_string()))?;
        kselftests.insert(key, r);
    }

    // Slots for the aggregate, in the given order; all "not run" at first.
    let props = |c: usize| {
        let cell = &m.cells[c];
        vec![
            ("kernel", m.kernels[cell.kernel].spec_text.clone()),
            ("kernel_name", m.kernels[cell.kernel].name.clone()),
            ("topology", m.topologies[cell.topology].name.clone()),
            ("suite", m.suites[cell.suite].name.clone()),
            ("expect", m.kernels[cell.kernel].expect.encode()),
        ]
    };
    let outcome_for = |c: usize, status: Status| {
        let cell = &m.cells[c];
        let p = props(c);
        let pr: Vec<(&str, &str)> = p.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let ts = report::placeholder_suite(&cell.name, &pr, &status);
        Outcome {
            name: cell.name.clone(),
            kernel: m.kernels[cell.kernel].name.clone(),
            topology: m.topologies[cell.topology].name.clone(),
            suite: m.suites[cell.suite].name.clone(),
            counts: report::counts_of(&ts),
            status,
            duration: Duration::ZERO,
            testsuite: ts,
        }
    };
    let mut slots: Vec<Outcome> = cells
        .iter()
        .map(|&c| outcome_for(c, Status::NotRun("not run".into())))
        .collect();
    let agg = aggregate_path(&opts.out_dir);
    let write_agg = |slots: &[Outcome]| {
        let suites: Vec<_> = slots.iter().map(|o| o.testsuite.clone()).collect();
        report::write_aggregate(&suites, &agg)
    };
    write_agg(&slots)?;

    // Largest cost first (a long cell started last would end the run late).
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(m.cost(&m.cells[cells[i]])));
    let mut pending: VecDeque<usize> = order.into();

    let prepare = t0.elapsed();
    let (t1, cpu1) = (std::time::Instant::now(), children_cpu_secs());
    let mut running: tokio::task::JoinSet<(Prepared, Result<crate::result::CellResult, String>)> =
        tokio::task::JoinSet::new();
    let mut used = (0u32, 0u64, 0usize);
    let mut stop = false;
    loop {
        while !stop && !cancel.is_cancelled() {
            let fit = pending.iter().position(|&i| {
                let t = &m.topologies[m.cells[cells[i]].topology].topology;
                opts.budget
                    .fits(used, t.cpus(), t.mem_mib() + QEMU_OVERHEAD_MIB)
            });
            let Some(pos) = fit else { break };
            let Some(i) = pending.remove(pos) else { break };
            let c = cells[i];
            let cell = &m.cells[c];
            let kernel = &m.kernels[cell.kernel];
            let image = match images
                .get(&kernel.spec_text)
                .cloned()
                .unwrap_or_else(|| Err("not fetched".into()))
            {
                Ok(r) => r.path,
                Err(e) => {
                    let o = outcome_for(
                        c,
                        Status::Error(format!("kernel {}: {e}", kernel.spec_text)),
                    );
                    finish(&mut slots, i, o, opts, events, &write_agg)?;
                    stop |= opts.fail_fast;
                    continue;
                }
            };
            let shares = match cell_shares(
                cell,
                daemon.clone(),
                supports.get(&kernel.spec_text).cloned(),
            ) {
                Ok(s) => s,
                Err(e) => {
                    let o = outcome_for(c, Status::Error(e));
                    finish(&mut slots, i, o, opts, events, &write_agg)?;
                    stop |= opts.fail_fast;
                    continue;
                }
            };
            let accel = match host::choose_accel(cell.accel, &kvm) {
                Ok((a, _)) => a,
                Err(e) => {
                    let o = outcome_for(c, Status::Error(e.to_string()));
                    finish(&mut slots, i, o, opts, events, &write_agg)?;
                    stop |= opts.fail_fast;
                    continue;
                }
            };
            let topo = &m.topologies[cell.topology];
            let mut tests = m.tests(cell);
            if let SuiteKind::Builtin(name) = &m.suites[cell.suite].kind {
                match kselftests.get(&(name.clone(), kernel.spec_text.clone())) {
                    Some(Ok(built)) => tests.extend(built.iter().cloned()),
                    Some(Err(e)) => {
                        let o = outcome_for(c, Status::Error(format!("{name}: {e}")));
                        finish(&mut slots, i, o, opts, events, &write_agg)?;
                        stop |= opts.fail_fast;
                        continue;
                    }
                    None => {}
                }
            }
            if let Some(g) = opts.test_glob.as_deref().filter(|g| g.contains('/')) {
                let first = g.split('/').next().unwrap_or(g);
                tests.retain(|t| t.name == "topology" || glob::matches(first, &t.name));
            }
            let spec = CellSpec {
                name: cell.name.clone(),
                kernel_label: kernel.spec_text.clone(),
                kernel_image: image,
                topology: topo.topology.clone(),
                topology_label: topo.name.clone(),
                suite_label: m.suites[cell.suite].name.clone(),
                tests,
                accel,
                cmdline_extra: cell.cmdline.clone(),
                watchdog: None,
                timeout_scale: cell.timeout_scale,
                boot_retries: crate::cell::DEFAULT_BOOT_RETRIES,
                out_dir: cell_dir(&opts.out_dir, &cell.name),
            };
            let p = Prepared {
                shares,
                cpus: topo.topology.cpus(),
                mem: topo.topology.mem_mib() + QEMU_OVERHEAD_MIB,
                spec,
                index: i,
            };
            used = (used.0 + p.cpus, used.1 + p.mem, used.2 + 1);
            send(Event::Started {
                name: cell.name.clone(),
            });
            let (qemu, bins, cancel) = (qemu.clone(), bins.clone(), cancel.clone());
            running.spawn(async move {
                let r = crate::cell::run_with_shares(&p.spec, &p.shares, &qemu, &bins, &cancel)
                    .await
                    .map_err(|e| e.to_string());
                (p, r)
            });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        let (p, r) = joined.map_err(|e| RunError::Join(e.to_string()))?;
        used = (used.0 - p.cpus, used.1 - p.mem, used.2 - 1);
        let c = cells[p.index];
        let o = match r {
            Err(e) => outcome_for(c, Status::Error(e)),
            Ok(mut result) => {
                result.known_failures = m.suites[m.cells[c].suite]
                    .known_failures
                    .iter()
                    .filter(|(_, _, accel)| accel.as_deref().is_none_or(|a| a == result.accel))
                    .map(|(case, reason, _)| crate::result::KnownFailure {
                        case: case.clone(),
                        reason: reason.clone(),
                    })
                    .collect();
                let mut ts = crate::junit::report("harness matrix", std::slice::from_ref(&result))
                    .test_suites
                    .remove(0);
                let names: Vec<String> = p.spec.tests.iter().map(|t| t.name.clone()).collect();
                report::retain_cases(&mut ts, |n| keep_case(opts.test_glob.as_deref(), &names, n));
                let counts = report::counts_of(&ts);
                let status = if result.end == VmEnd::Interrupted {
                    Status::Interrupted
                } else if counts.fail == 0 && ts.tests > 0 {
                    Status::Passed
                } else {
                    Status::Failed
                };
                ts.add_property(quick_junit::Property::new("status", status.word()));
                for (k, v) in props(c) {
                    if k == "kernel_name" || k == "expect" {
                        ts.add_property(quick_junit::Property::new(k, v));
                    }
                }
                let cell = &m.cells[c];
                Outcome {
                    name: cell.name.clone(),
                    kernel: m.kernels[cell.kernel].name.clone(),
                    topology: m.topologies[cell.topology].name.clone(),
                    suite: m.suites[cell.suite].name.clone(),
                    status,
                    counts,
                    duration: result.duration,
                    testsuite: ts,
                }
            }
        };
        stop |= opts.fail_fast && !o.status.ok();
        finish(&mut slots, p.index, o, opts, events, &write_agg)?;
    }
    let stats = Stats {
        prepare,
        cells_wall: t1.elapsed(),
        cells_cpu: children_cpu_secs() - cpu1,
    };
    // What never started says why.
    let why = if cancel.is_cancelled() {
        "not run: interrupted"
    } else {
        "not run: --fail-fast after an unexpected result"
    };
    let mut changed = false;
    for i in pending {
        slots[i] = outcome_for(cells[i], Status::NotRun(why.into()));
        changed = true;
    }
    if changed {
        write_agg(&slots)?;
    }
    Ok((slots, stats))
}

fn finish(
    slots: &mut [Outcome],
    i: usize,
    o: Outcome,
    opts: &Options,
    events: &UnboundedSender<Event>,
    write_agg: &dyn Fn(&[Outcome]) -> Result<(), crate::junit::JunitError>,
) -> Result<(), RunError> {
    let dir = cell_dir(&opts.out_dir, &o.name);
    std::fs::create_dir_all(&dir).map_err(|source| RunError::Dir {
        path: dir.clone(),
        source,
    })?;
    report::write_cell(&o.testsuite, &dir.join("junit.xml"))?;
    slots[i] = o.clone();
    write_agg(slots)?;
    let _ = events.send(Event::Finished(Box::new(o)));
    Ok(())
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
