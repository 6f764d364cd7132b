//! What `--test`, `--metric` and `--threshold` select, and the checks of the
//! arguments that need no repository (suite, kernel name, topology, bench
//! configurations). Knows nothing of git or of how a step runs.

use super::metric::{self, Metric, Threshold};
use super::{BisectError, CommonArgs};
use crate::glob;

/// The `--test` selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSel {
    /// Built-in suite.
    pub suite: String,
    /// Case glob (`binary/case`), if any.
    pub glob: Option<String>,
}

impl TestSel {
    /// Parses `suite[/case glob]`, or a `binary/case` glob as `run` and
    /// `matrix` take it (the built-in suite whose binary it names).
    pub fn parse(s: &str) -> Result<TestSel, BisectError> {
        let s = s.trim();
        let (suite, glob) = match s.split_once('/') {
            Some((a, _)) if !crate::suite::SUITES.contains(&a) => {
                match crate::suite::SUITES
                    .iter()
                    .filter(|n| !crate::kselftest::is_kselftest_suite(n))
                    .find(|n| crate::cases::SuiteCases::builtin(n).has(s))
                {
                    Some(n) => (*n, Some(s)),
                    None => (a, s.split_once('/').map(|(_, b)| b)),
                }
            }
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        if suite.is_empty() || suite.contains(['*', '?']) {
            return Err(BisectError::Usage(format!(
                "--test {s:?}: expected suite[/case glob] or binary/case, e.g. futex/futex-prctl/* or futex-prctl/*"
            )));
        }
        let mut parts: Vec<String> = glob
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(String::from)
            .collect();
        if suite == BENCH_SUITE {
            // Its cases are `futex-bench/CONFIG`: the glob names configurations.
            for p in &mut parts {
                if p != BENCH_BINARY && !p.starts_with(&format!("{BENCH_BINARY}/")) {
                    *p = format!("{BENCH_BINARY}/{p}");
                }
            }
        }
        let everything = parts.is_empty()
            || parts
                .iter()
                .any(|p| p == "*" || (suite == BENCH_SUITE && p == &format!("{BENCH_BINARY}/*")));
        Ok(TestSel {
            suite: suite.into(),
            glob: (!everything).then(|| parts.join(",")),
        })
    }

    /// The comma-separated globs.
    fn globs(&self) -> impl Iterator<Item = &str> {
        self.glob.iter().flat_map(|g| g.split(','))
    }

    /// Whether the suite test (binary) `name` can hold selected cases.
    pub fn binary_selected(&self, name: &str) -> bool {
        self.glob.is_none()
            || self.globs().any(|g| {
                let first = g.split('/').next().unwrap_or(g);
                glob::matches(first, name) || glob::matches(g, name)
            })
    }

    /// Whether the case `name` (`binary/case`) is selected: a glob
    /// matches it or one of its parents.
    pub fn case_selected(&self, name: &str) -> bool {
        self.glob.is_none()
            || self
                .globs()
                .any(|g| glob::matches(g, name) || glob::matches(&format!("{g}/*"), name))
    }

    /// Whether the bench configuration `config` is selected (its case is
    /// `futex-bench/CONFIG`).
    pub fn config_selected(&self, config: &str) -> bool {
        self.case_selected(&format!("{BENCH_BINARY}/{config}"))
    }
}

/// The suite of performance bisection.
pub const BENCH_SUITE: &str = "bench";
/// Its one binary.
const BENCH_BINARY: &str = "futex-bench";

/// The configuration specs of the bench suite that `sel` selects on a
/// topology of `nodes` nodes (the standard set, in its order).
pub fn bench_specs(sel: &TestSel, nodes: usize) -> Vec<String> {
    guest_tests::bench::standard_set(nodes)
        .into_iter()
        .filter(|s| sel.config_selected(spec_name(s)))
        .collect()
}

fn spec_name(spec: &str) -> &str {
    spec.split(':').next().unwrap_or(spec)
}

/// `--metric` with `--threshold`: what a performance bisection judges.
#[derive(Debug, Clone, PartialEq)]
pub struct Perf {
    /// The bench number.
    pub metric: Metric,
    /// Its bad side.
    pub threshold: Threshold,
}

impl Perf {
    /// `--metric`/`--threshold` of `c` (`None`: a test bisection). Both or
    /// neither; `--metric` only over the bench suite.
    pub fn of(c: &CommonArgs) -> Result<Option<Perf>, BisectError> {
        let usage = |e: metric::MetricError| BisectError::Usage(e.to_string());
        match (&c.metric, &c.threshold) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(BisectError::Usage(
                "--metric needs --threshold, e.g. --threshold '<0.8' (bad below 0.8)".into(),
            )),
            (None, Some(_)) => Err(BisectError::Usage(
                "--threshold needs --metric (the bench number it applies to)".into(),
            )),
            (Some(m), Some(t)) => Ok(Some(Perf {
                metric: Metric::parse(m).map_err(usage)?,
                threshold: Threshold::parse(t).map_err(usage)?,
            })),
        }
    }
}

/// Checks the arguments that need no repository.
pub fn validate(c: &CommonArgs) -> Result<(TestSel, crate::topology::Topology), BisectError> {
    if c.repeat == 0 {
        return Err(BisectError::Usage("--repeat must be at least 1".into()));
    }
    if c.timeout_scale.is_nan() || c.timeout_scale <= 0.0 {
        return Err(BisectError::Usage("--timeout-scale must be > 0".into()));
    }
    let sel = TestSel::parse(&c.test)?;
    let topo = topology(&c.topology)?;
    let perf = Perf::of(c)?;
    if c.step_command.is_none() {
        crate::suite::builtin(&sel.suite, None)
            .map_err(|e| BisectError::Usage(format!("--test: {e}")))?;
        if !crate::kernel::definition::valid_name(&c.kernel) {
            return Err(BisectError::Usage(format!(
                "--kernel {:?}: not a definition name",
                c.kernel
            )));
        }
        if let Some(g) = sel.glob.as_deref().filter(|_| sel.suite != BENCH_SUITE) {
            let suite = [(
                sel.suite.clone(),
                crate::cases::SuiteCases::builtin(&sel.suite),
            )];
            // A glob selects a case or, as `case_selected` reads it, a
            // parent of cases (`futex-prctl` is every case of the binary).
            for part in g.split(',') {
                crate::cases::check_selection(part, &suite)
                    .or_else(|e| {
                        crate::cases::check_selection(&format!("{part}/*"), &suite).map_err(|_| e)
                    })
                    .map_err(BisectError::Usage)?;
            }
        }
        if sel.suite == BENCH_SUITE && bench_specs(&sel, topo.nodes().len()).is_empty() {
            return Err(BisectError::Usage(format!(
                "--test {}: no configuration of the bench suite matches; it has: {}",
                c.test,
                bench_names(topo.nodes().len())
            )));
        }
    }
    if let Some(p) = &perf {
        check_perf(c, p, &sel, topo.nodes().len())?;
    }
    Ok((sel, topo))
}

fn bench_names(nodes: usize) -> String {
    guest_tests::bench::standard_set(nodes)
        .iter()
        .map(|s| spec_name(s))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A metric needs the bench suite, and the configurations it names must
/// run (they are in the suite, and `--test` selects them).
fn check_perf(c: &CommonArgs, p: &Perf, sel: &TestSel, nodes: usize) -> Result<(), BisectError> {
    if sel.suite != BENCH_SUITE {
        return Err(BisectError::Usage(format!(
            "--metric {}: a bench number; use --test bench[/CONFIG glob], not --test {}",
            p.metric, c.test
        )));
    }
    let specs = guest_tests::bench::standard_set(nodes);
    for cfg in p.metric.configs() {
        if c.step_command.is_none() && !specs.iter().any(|s| spec_name(s) == cfg) {
            return Err(BisectError::Usage(format!(
                "--metric {}: {cfg:?} is not a configuration of the bench suite on {nodes} node(s); it has: {}",
                p.metric,
                bench_names(nodes)
            )));
        }
        if !sel.config_selected(cfg) {
            let all: Vec<&str> = p.metric.configs();
            return Err(BisectError::Usage(format!(
                "--metric {}: --test {} does not run configuration {cfg:?}; select it, e.g. --test 'bench/{}'",
                p.metric,
                c.test,
                all.join(",")
            )));
        }
    }
    Ok(())
}

/// A topology spec, or a topology name of the default matrix (`matrix::cli::default_matrix`).
fn topology(s: &str) -> Result<crate::topology::Topology, BisectError> {
    if s.contains('=') {
        return crate::topology::Topology::parse_spec(s)
            .map_err(|e| BisectError::Usage(format!("--topology: {e}")));
    }
    let path = crate::matrix::cli::default_matrix()
        .map_err(|e| BisectError::Usage(format!("--topology {s}: {e}")))?
        .path;
    let m = crate::matrix::load(&path)
        .map_err(|e| BisectError::Usage(format!("--topology {s}: {e}")))?;
    m.topologies
        .iter()
        .find(|t| t.name == s)
        .or_else(|| {
            // `2n-2c` for `2n2c`.
            let bare = |n: &str| n.replace('-', "");
            m.topologies.iter().find(|t| bare(&t.name) == bare(s))
        })
        .map(|t| t.topology.clone())
        .ok_or_else(|| {
            BisectError::Usage(format!(
                "--topology {s:?}: neither a nodes=..,cpus=..,mem=.. spec nor a topology of {}",
                path.display()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::super::args::tests::common;
    use super::*;

    #[test]
    fn test_selection_parses_and_matches() {
        let s = TestSel::parse("futex/futex-prctl/*").unwrap();
        assert_eq!(s.suite, "futex");
        assert!(s.binary_selected("futex-prctl"));
        assert!(!s.binary_selected("futex-numa"));
        assert!(s.case_selected("futex-prctl/get-slots"));
        assert!(!s.case_selected("futex-numa/x"));
        // run's and matrix's binary/case form: the suite that has it.
        assert_eq!(
            TestSel::parse("futex-prctl/*").unwrap(),
            TestSel::parse("futex/futex-prctl/*").unwrap()
        );
        let s = TestSel::parse("futex/futex-prctl").unwrap();
        assert!(s.case_selected("futex-prctl/get-slots"));
        assert!(s.case_selected("futex-prctl/<exit>"));
        let s = TestSel::parse("futex").unwrap();
        assert_eq!(s.glob, None);
        assert!(s.binary_selected("anything") && s.case_selected("a/b"));
        assert_eq!(TestSel::parse("futex/*").unwrap().glob, None);
        let s = TestSel::parse("futex/*resize*/grow*").unwrap();
        assert!(s.binary_selected("futex-resize"));
        assert!(s.case_selected("futex-resize/grow-16"));
        assert!(TestSel::parse("").is_err());
        assert!(TestSel::parse("/x").is_err());
        assert!(TestSel::parse("fu*/x").is_err());
    }

    #[test]
    fn bench_selection_names_configurations() {
        let s = TestSel::parse("bench/b1024").unwrap();
        assert_eq!(s.glob.as_deref(), Some("futex-bench/b1024"));
        assert!(s.binary_selected("futex-bench"));
        assert!(s.case_selected("futex-bench/b1024"));
        assert!(s.config_selected("b1024") && !s.config_selected("b128"));
        let s = TestSel::parse("bench/b1024, global").unwrap();
        assert!(s.config_selected("b1024") && s.config_selected("global"));
        assert!(!s.config_selected("global-pernode"));
        assert_eq!(
            bench_specs(&s, 2),
            ["global:buckets=0", "b1024:buckets=1024"]
        );
        // The binary's own name is accepted too.
        let s = TestSel::parse("bench/futex-bench/b*").unwrap();
        assert!(s.config_selected("b16") && !s.config_selected("global"));
        // b16, b128, b1024, b128-pernode.
        assert_eq!(bench_specs(&s, 1).len(), 4);
        for all in ["bench", "bench/*", "bench/futex-bench/*", "bench/b1,*"] {
            assert_eq!(TestSel::parse(all).unwrap().glob, None, "{all}");
        }
        assert_eq!(
            bench_specs(&TestSel::parse("bench").unwrap(), 2),
            guest_tests::bench::standard_set(2)
        );
        assert!(bench_specs(&TestSel::parse("bench/nope").unwrap(), 2).is_empty());
        // Comma lists for the other suites too.
        let s = TestSel::parse("futex/futex-prctl/*,futex-numa/wake").unwrap();
        assert!(s.binary_selected("futex-prctl") && s.binary_selected("futex-numa"));
        assert!(!s.binary_selected("futex-mpol"));
        assert!(s.case_selected("futex-numa/wake") && !s.case_selected("futex-numa/x"));
    }

    #[test]
    fn metric_arguments() {
        let perf = |m: Option<&str>, t: Option<&str>, test: &str| {
            let mut c = common(test);
            c.metric = m.map(String::from);
            c.threshold = t.map(String::from);
            validate(&c).map(|_| Perf::of(&c).unwrap())
        };
        let err = |m, t, test| match perf(m, t, test) {
            Err(BisectError::Usage(e)) => e,
            other => panic!("{other:?}"),
        };
        let p = perf(Some("ratio:b1024/global"), Some("<0.8"), "bench")
            .unwrap()
            .unwrap();
        assert_eq!(p.metric.to_string(), "ratio:b1024/global");
        assert!(p.threshold.is_bad(0.79));
        assert!(perf(None, None, "bench").unwrap().is_none());
        assert!(perf(Some("ops_per_s_mean:b1024"), Some(">1M"), "bench/b1024").is_ok());
        let e = err(Some("ops_per_s_mean:b1024"), None, "bench");
        assert!(e.contains("--metric needs --threshold"), "{e}");
        let e = err(None, Some("<1"), "bench");
        assert!(e.contains("--threshold needs --metric"), "{e}");
        let e = err(Some("ops_total"), Some("<1"), "bench");
        assert!(e.contains("valid metrics: ops_per_s_mean:CONFIG"), "{e}");
        let e = err(Some("ops_per_s_mean:b1024"), Some("1000"), "bench");
        assert!(e.contains("--threshold \"1000\": say which side"), "{e}");
        let e = err(Some("ops_per_s_mean:b1024"), Some("<1"), "futex");
        assert!(e.contains("use --test bench"), "{e}");
        let e = err(Some("ratio:b1024/global"), Some("<1"), "bench/b1024");
        assert!(e.contains("does not run configuration \"global\""), "{e}");
        assert!(e.contains("--test 'bench/b1024,global'"), "{e}");
        let e = err(Some("ops_per_s_mean:b7"), Some("<1"), "bench");
        assert!(e.contains("not a configuration of the bench suite"), "{e}");
        assert!(e.contains("global, b16,"), "{e}");
        // The NUMA pair only exists on two nodes or more.
        assert!(perf(Some("ops_per_s_mean:numa-own"), Some("<1"), "bench").is_ok());
        let mut c = common("bench");
        c.topology = "nodes=1,cpus=2,mem=256M".into();
        c.metric = Some("ops_per_s_mean:numa-own".into());
        c.threshold = Some("<1".into());
        assert!(matches!(validate(&c), Err(BisectError::Usage(e)) if e.contains("on 1 node(s)")));
        // With a step command the suite's configurations are not checked.
        let mut c = common("bench");
        c.metric = Some("ops_per_s_mean:b7".into());
        c.threshold = Some("<1".into());
        c.step_command = Some("true".into());
        assert!(validate(&c).is_ok());
        let e = match validate(&common("bench/nope")) {
            Err(BisectError::Usage(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(
            e.contains("no configuration of the bench suite matches"),
            "{e}"
        );
    }

    #[test]
    fn validation() {
        assert!(validate(&common("futex/futex-prctl/*")).is_ok());
        // A binary selects its cases (docs/bisect.md), in either form.
        assert!(validate(&common("futex/futex-prctl")).is_ok());
        assert!(validate(&common("futex/futex-prctl,futex-resize/*")).is_ok());
        let e = match validate(&common("futex/futex-nope")) {
            Err(BisectError::Usage(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(e.contains("--test \"futex-nope\" selects no case"), "{e}");
        let mut c = common("futex");
        c.repeat = 0;
        assert!(matches!(validate(&c), Err(BisectError::Usage(m)) if m.contains("--repeat")));
        let mut c = common("futex");
        c.topology = "nodes=x".into();
        assert!(matches!(validate(&c), Err(BisectError::Usage(m)) if m.contains("--topology")));
        assert!(
            matches!(validate(&common("nosuch")), Err(BisectError::Usage(m)) if m.contains("--test"))
        );
        let mut c = common("futex");
        c.kernel = "../x".into();
        assert!(validate(&c).is_err());
        // With a step command, suite and kernel are not checked.
        let mut c = common("nosuch");
        c.kernel = "../x".into();
        c.step_command = Some("true".into());
        assert!(validate(&c).is_ok());
        // Topology names from matrix.yaml, with or without dashes.
        let mut c = common("futex");
        c.topology = "2n2c".into();
        assert_eq!(validate(&c).unwrap().1.nodes().len(), 2);
        c.topology = "2n-2c".into();
        assert_eq!(validate(&c).unwrap().1.nodes().len(), 2);
        c.topology = "7n".into();
        assert!(validate(&c).is_err());
    }
}
