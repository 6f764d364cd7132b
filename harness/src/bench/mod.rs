//! `harness bench`: runs `futex-bench` configurations across kernels and
//! topologies — one VM per (kernel, topology) running every configuration,
//! rounds interleaved in the guest — and writes a comparison table
//! (terminal, CSV, JSON) with ratios against a baseline configuration, plus
//! an SVG plot. Also emits the pieces of a bare QEMU boot (`--emit-bare`)
//! for `cargo xtask bench-boot`.

pub mod args;
pub mod bare;
pub mod plot;
pub mod report;
pub mod table;

use crate::kernelspec::{KernelSpec, ResolvedKernel};
use crate::planner::{self, PlannedCell, Session};
use crate::reporter::Reporters;
use crate::runner::RunOptions;
use crate::suite::{self, SuiteTest};
use crate::topology::Topology;
pub use args::BenchArgs;
use tokio_util::sync::CancellationToken;

/// Errors of a benchmark run (tests that fail are rows, not errors).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
    /// Anything in the way of running (QEMU, kernel download, files).
    #[error("{0}")]
    Infra(String),
}

fn infra(e: impl std::fmt::Display) -> BenchError {
    BenchError::Infra(e.to_string())
}

/// The futex-bench arguments for a run (what the `bench` suite passes too).
pub fn guest_args(a: &BenchArgs, nodes: usize) -> Result<(Vec<String>, Vec<String>), BenchError> {
    let mut specs = Vec::new();
    if let Some(s) = &a.set {
        specs.extend(guest_tests::bench::named_set(s, nodes).ok_or_else(|| {
            BenchError::Usage(format!(
                "--set {s:?}: known sets: {}",
                guest_tests::bench::SETS.join(", ")
            ))
        })?);
    }
    specs.extend(a.configs.iter().cloned());
    if specs.is_empty() {
        specs = guest_tests::bench::standard_set(nodes);
    }
    let mut base = guest_tests::bench::Config::new("base");
    base.threads = a.threads;
    if let Some(f) = a.futexes {
        base.futexes = f;
    }
    let mut names = Vec::new();
    let mut args = vec![
        "--rounds".to_string(),
        a.rounds.to_string(),
        "--runtime".into(),
        a.runtime.to_string(),
    ];
    for s in &specs {
        let c = guest_tests::bench::Config::parse_with(s, &base).map_err(BenchError::Usage)?;
        if names.contains(&c.name) {
            return Err(BenchError::Usage(format!(
                "configuration {:?} given twice",
                c.name
            )));
        }
        names.push(c.name.clone());
        args.push("--config".into());
        args.push(c.encode());
    }
    if !((1..=1000).contains(&a.rounds) && a.runtime > 0.0 && a.runtime <= 3600.0) {
        return Err(BenchError::Usage(
            "--rounds must be 1..=1000 and --runtime in (0, 3600] seconds".into(),
        ));
    }
    Ok((args, names))
}

pub use crate::suite::{
    bench_test as suite_test, bench_test_with as suite_test_with, bench_timeout as guest_timeout,
};

/// `--expect` alone when given (it is the whole statement); else what the
/// resolved kernel's version and definition say (`source:7.3-immutable`
/// declares `immutable=1`).
fn expect_for(a: &BenchArgs, k: &ResolvedKernel) -> Option<String> {
    a.expect
        .clone()
        .or_else(|| k.expectations(None).ok().flatten())
}

pub use crate::planner::sanitize;

impl From<BenchError> for crate::error::Error {
    fn from(e: BenchError) -> Self {
        match e {
            BenchError::Usage(_) => crate::error::Error::usage(e),
            BenchError::Infra(_) => crate::error::Error::infra(e),
        }
    }
}

impl From<crate::error::Error> for BenchError {
    fn from(e: crate::error::Error) -> Self {
        match e.kind {
            crate::error::ErrorKind::Usage => BenchError::Usage(e.to_string()),
            crate::error::ErrorKind::Infrastructure => BenchError::Infra(e.to_string()),
        }
    }
}

/// What a benchmark run found beyond its cells' statuses (which the
/// reporters saw).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measured {
    /// `--emit-bare`: nothing ran.
    Nothing,
    /// Every configuration measured (or skipped with a reason).
    All,
    /// A configuration failed or has no number: an unexpected result.
    Missing,
}

/// What [`run`] leaves: what it measured, and the table and file names the
/// front door shows (the library prints nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Benched {
    /// Whether every configuration has its number.
    pub measured: Measured,
    /// The results table and where the CSV, JSON and plot are (empty when
    /// nothing ran).
    pub summary: String,
}

/// Runs the benchmark through the planner and runner (one cell per kernel
/// x topology, one after another). The run's exit status is the exit
/// reporter's, raised to 1 when a configuration is [`Measured::Missing`].
/// `notice` says that a signal arrived (the handlers' note).
pub async fn run(
    a: BenchArgs,
    reporters: &mut Reporters,
    notice: fn(&str),
) -> Result<Benched, BenchError> {
    let mut topologies = Vec::new();
    for t in &a.topologies {
        topologies.push((
            t.clone(),
            Topology::parse_spec(t).map_err(|e| BenchError::Usage(e.to_string()))?,
        ));
    }
    let mut kernels = Vec::new();
    for k in &a.kernels {
        kernels.push((
            k.clone(),
            KernelSpec::parse(k).map_err(|e| BenchError::Usage(e.to_string()))?,
        ));
    }
    if let Some(file) = &a.kernel_config {
        let trees: Vec<&mut KernelSpec> = kernels
            .iter_mut()
            .map(|(_, s)| s)
            .filter(|s| matches!(s, KernelSpec::Tree(_)))
            .collect();
        if trees.is_empty() {
            return Err(BenchError::Usage(format!(
                "--kernel-config {}: only a tree:<dir> kernel is built from a config file, and no --kernel is one",
                file.display()
            )));
        }
        for s in trees {
            *s = s
                .clone()
                .with_config(file)
                .map_err(|e| BenchError::Usage(format!("--kernel-config {e}")))?;
        }
    }
    // Every kernel and configuration checked before anything is fetched
    // or booted.
    for (_, spec) in &kernels {
        crate::planner::check_kernel(spec)?;
    }
    if a.arch != crate::arch::Arch::X86_64 && a.emit_bare.is_some() {
        return Err(BenchError::Usage(format!(
            "--emit-bare: the bare boot is x86-64's (isa-debug-exit ends it), not {}",
            a.arch
        )));
    }
    for (_, topo) in &topologies {
        let (_, names) = guest_args(&a, topo.nodes().len())?;
        if let Some(b) = a.baseline.as_ref().filter(|b| !names.contains(b)) {
            return Err(BenchError::Usage(format!(
                "--baseline {b:?}: not a configuration this run measures ({})",
                names.join(", ")
            )));
        }
    }
    if let Some(e) = &a.expect {
        crate::planner::check_expect(e)?;
    }
    for (spec, topo) in &topologies {
        crate::planner::check_host_memory(topo)?;
        if let Some(why) = crate::planner::arch_topology_refusal(a.arch, topo) {
            return Err(BenchError::Usage(format!("--topology {spec}: {why}")));
        }
    }
    crate::planner::check_mirror(a.debian_mirror.as_deref())?;
    if a.emit_bare.is_some() {
        crate::planner::check_suite(&a.bare_suite)?;
    }
    let t0 = std::time::Instant::now();
    let mut session = Session::open(a.debian_mirror.clone(), reporters).await?;
    let (accel, note) = session.accel_for(a.accel, a.arch).map_err(infra)?;
    if let Some(n) = note {
        reporters.step(&n).map_err(infra)?;
    }

    if let Some(dir) = &a.emit_bare {
        let (label, kspec) = &kernels[0];
        let resolved = session
            .kernel(label, kspec, reporters, None)
            .await
            .map_err(infra)?;
        let (_, topo) = &topologies[0];
        let mut tests = vec![suite::topology_check(topo)];
        tests.extend(
            suite::builtin(&a.bare_suite, expect_for(&a, &resolved).as_deref())
                .map_err(|e| BenchError::Usage(e.to_string()))?,
        );
        let bins = session.guest_bins(reporters).await?;
        bare::emit(dir, &resolved.path, topo, accel, &tests, &bins).map_err(infra)?;
        reporters
            .step(&format!(
                "bare boot of {label} {} written to {}",
                topologies[0].0,
                dir.display()
            ))
            .map_err(infra)?;
        return Ok(Benched {
            measured: Measured::Nothing,
            summary: String::new(),
        });
    }

    let cancel = CancellationToken::new();
    crate::signals::install(cancel.clone(), notice).map_err(infra)?;
    std::fs::create_dir_all(&a.out).map_err(|e| infra(format!("{}: {e}", a.out.display())))?;
    // One cell per kernel x topology; what each measures, by index.
    let mut planned = Vec::new();
    let mut measured: Vec<table::Measures> = Vec::new();
    let mut baseline = a.baseline.clone();
    for (klabel, kspec) in &kernels {
        let resolved = session.kernel(klabel, kspec, reporters, None).await;
        for (tlabel, topo) in &topologies {
            let (mut args, names) = guest_args(&a, topo.nodes().len())?;
            if baseline.is_none() {
                baseline = names.first().cloned();
            }
            let index = planned.len();
            let name = planner::cell_name(klabel, topo, "bench");
            let out_dir = a.out.join(name.replace('/', "_"));
            let resolved = match &resolved {
                Ok(r) => r,
                Err(e) => {
                    planned.push(PlannedCell::Failed {
                        meta: crate::events::CellMeta {
                            index,
                            name,
                            kernel: klabel.clone(),
                            kernel_name: klabel.clone(),
                            topology: tlabel.clone(),
                            suite: "bench".into(),
                            expect: None,
                            out_dir,
                            facts: None,
                        },
                        error: format!("kernel {klabel}: {e}"),
                    });
                    measured.push(table::Measures {
                        kernel: klabel.clone(),
                        topology: tlabel.clone(),
                        configs: names,
                    });
                    continue;
                }
            };
            let expect = expect_for(&a, resolved);
            if let Some(e) = &expect {
                args.push("--expect".into());
                args.push(e.clone());
            }
            let bench_test = SuiteTest {
                name: "futex-bench".into(),
                binary: suite::Binary::Builtin("futex-bench"),
                args,
                timeout: guest_timeout(names.len(), a.rounds, a.runtime),
            };
            let want = crate::prepare::CellWant {
                name: None,
                kernel_label: klabel.clone(),
                kernel_name: None,
                kernel: kspec.clone(),
                topology_label: tlabel.clone(),
                topology: topo.clone(),
                suite: crate::prepare::SuiteWant::Tests {
                    label: "bench".into(),
                    tests: vec![bench_test],
                },
                extra_tests: Vec::new(),
                expect: crate::prepare::ExpectWant::Given(expect),
                accel: a.accel,
                arch: a.arch,
                shares: Default::default(),
                known_failures: Vec::new(),
                out_dir,
            };
            let prepared = session
                .prepare(want, reporters)
                .await
                .map_err(|e| BenchError::from(e.into_error()))?;
            if let Some(note) = &prepared.notes.preboot {
                reporters.step(note).map_err(infra)?;
            }
            let req = prepared.request;
            reporters
                .step(&format!(
                    "{}: {} configurations x {} rounds x {} s under {}",
                    req.name,
                    names.len(),
                    a.rounds,
                    a.runtime,
                    req.accel.name()
                ))
                .map_err(infra)?;
            planned.push(PlannedCell::Ready(Box::new(planner::cell(index, req))));
            measured.push(table::Measures {
                kernel: klabel.clone(),
                topology: tlabel.clone(),
                configs: names,
            });
        }
    }
    let table = table::BenchTable::new(
        table::Setup {
            out: a.out.clone(),
            qemu: session.qemu.version.to_string(),
            baseline: baseline.unwrap_or_default(),
            rounds: a.rounds,
            runtime_s: a.runtime,
        },
        measured,
    );
    reporters.add(table.clone());
    crate::runner::run(
        &mut session,
        planned,
        &RunOptions::serial(t0.elapsed()),
        &cancel,
        reporters,
    )
    .await?;
    table
        .finish()
        .ok_or_else(|| infra("the run ended without finishing the bench table"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `harness bench --kernel debian:7.3.4` (the command line's
    /// defaults), then `change`.
    fn args(change: impl FnOnce(&mut BenchArgs)) -> BenchArgs {
        use clap::{Args, FromArgMatches};
        let m = BenchArgs::augment_args(clap::Command::new("bench")).get_matches_from([
            "bench",
            "--kernel",
            "debian:7.3.4",
        ]);
        let mut o = BenchArgs::from_arg_matches(&m).unwrap();
        change(&mut o);
        o
    }

    #[test]
    fn default_set_is_standard_with_numa_on_two_nodes() {
        let (argv, names) = guest_args(&args(|_| {}), 2).unwrap();
        assert_eq!(names[0], "global");
        assert!(names.contains(&"numa-own".to_string()));
        assert!(!guest_args(&args(|_| {}), 1)
            .unwrap()
            .1
            .contains(&"numa-own".to_string()));
        assert_eq!(&argv[..4], ["--rounds", "3", "--runtime", "1"]);
        assert!(argv.contains(&"--config".to_string()));
    }

    #[test]
    fn configs_and_knobs_reach_the_guest() {
        let (argv, names) = guest_args(
            &args(|o| {
                o.configs = vec!["g:buckets=0".into(), "b:b=16".into()];
                o.threads = Some(3);
                o.futexes = Some(64);
            }),
            2,
        )
        .unwrap();
        assert_eq!(names, ["g", "b"]);
        assert!(argv
            .iter()
            .any(|s| s.starts_with("g:mode=hash,threads=3,futexes=64,buckets=0")));
        let e = guest_args(&args(|o| o.configs = vec!["g".into(), "g".into()]), 1).unwrap_err();
        assert!(e.to_string().contains("twice"));
        let e = guest_args(&args(|o| o.set = Some("nope".into())), 1).unwrap_err();
        assert!(e.to_string().contains("standard, seed, numa"));
        assert!(guest_args(&args(|o| o.rounds = 0), 1).is_err());
    }

    #[test]
    fn bench_suite_runs_futex_bench_with_expectations() {
        let s = crate::suite::builtin("bench", Some("immutable=1")).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].binary, suite::Binary::Builtin("futex-bench"));
        assert!(s[0]
            .args
            .ends_with(&["--expect".to_string(), "immutable=1".to_string()]));
        assert!(s[0]
            .args
            .starts_with(&["--set".to_string(), "standard".to_string()]));
    }

    #[test]
    fn bench_suite_with_some_configurations() {
        let specs = vec!["global:buckets=0".to_string(), "b1024:buckets=1024".into()];
        let t = suite_test_with(&specs, Some("immutable=0"));
        assert_eq!(t.binary, suite::Binary::Builtin("futex-bench"));
        assert_eq!(
            t.args,
            [
                "--rounds",
                "3",
                "--runtime",
                "1",
                "--config",
                "global:buckets=0",
                "--config",
                "b1024:buckets=1024",
                "--expect",
                "immutable=0"
            ]
        );
        assert_eq!(t.timeout, guest_timeout(2, 3, 1.0));
        assert_eq!(
            &suite_test(None).args[..],
            ["--set", "standard", "--rounds", "3", "--runtime", "1"]
        );
    }

    #[test]
    fn timeout_grows_with_work() {
        assert_eq!(guest_timeout(2, 3, 1.0), Duration::from_secs(84));
    }
}
