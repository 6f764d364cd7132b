//! Performance bisection: what `--metric` measures in a bench result, how
//! `--threshold` judges it, and how `--repeat` repetitions combine. Pure;
//! the numbers come from the `# BENCH` lines of a `futex-bench` KTAP stream
//! through the bench report's own parser ([`crate::bench::report`]).
//!
//! Metrics are named after the bench report's CSV columns:
//! `ops_per_s_mean:CONFIG`, `per_thread_mean:CONFIG` and
//! `ratio:CONFIG/BASELINE`.

use super::Verdict;
use crate::bench::report::{apply_ratios, rows_from_lines, Row, RowStatus};
use guest_tests::bench::BenchLine;
use std::fmt;

/// The metrics `--metric` accepts, with what they mean (for errors and help).
pub const METRICS: &[(&str, &str)] = &[
    (
        "ops_per_s_mean:CONFIG",
        "mean total ops/s of CONFIG over its rounds",
    ),
    (
        "per_thread_mean:CONFIG",
        "mean ops/s per worker thread of CONFIG over all threads of all rounds",
    ),
    (
        "ratio:CONFIG/BASELINE",
        "ops_per_s_mean of CONFIG / ops_per_s_mean of BASELINE in the same run",
    ),
];

/// Bad `--metric` or `--threshold` values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricError {
    /// Not one of [`METRICS`].
    #[error("--metric {given:?}: {why}; valid metrics: {}", valid_list())]
    Metric {
        /// What was given.
        given: String,
        /// What is wrong with it.
        why: String,
    },
    /// Not `<N` or `>N`.
    #[error("--threshold {given:?}: {why}")]
    Threshold {
        /// What was given.
        given: String,
        /// What is wrong with it.
        why: String,
    },
}

fn valid_list() -> String {
    METRICS
        .iter()
        .map(|(n, what)| format!("{n} ({what})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A number the bench report computes for a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Metric {
    /// `ops_per_s_mean:CONFIG`: the row's `total.mean`.
    OpsPerSMean(String),
    /// `per_thread_mean:CONFIG`: the row's `per_thread.mean`.
    PerThreadMean(String),
    /// `ratio:CONFIG/BASELINE`: the row's `ratio` against BASELINE.
    Ratio {
        /// The configuration measured.
        config: String,
        /// The configuration it is divided by.
        baseline: String,
    },
}

impl Metric {
    /// Parses one of [`METRICS`]; configuration names as futex-bench
    /// accepts them (`[A-Za-z0-9._-]`, 1-40 characters).
    pub fn parse(s: &str) -> Result<Metric, MetricError> {
        let err = |why: &str| MetricError::Metric {
            given: s.to_string(),
            why: why.to_string(),
        };
        let (kind, arg) = s
            .trim()
            .split_once(':')
            .ok_or_else(|| err("unknown metric"))?;
        let config = |c: &str| -> Result<String, MetricError> {
            guest_tests::bench::Config::new(c)
                .validate()
                .map_err(|e| err(&e))?;
            Ok(c.to_string())
        };
        match kind {
            "ops_per_s_mean" => Ok(Metric::OpsPerSMean(config(arg)?)),
            "per_thread_mean" => Ok(Metric::PerThreadMean(config(arg)?)),
            "ratio" => {
                let (a, b) = arg.split_once('/').ok_or_else(|| {
                    err("a ratio names two configurations: ratio:CONFIG/BASELINE")
                })?;
                let (config, baseline) = (config(a)?, config(b)?);
                if config == baseline {
                    return Err(err("a configuration against itself is always 1"));
                }
                Ok(Metric::Ratio { config, baseline })
            }
            _ => Err(err("unknown metric")),
        }
    }

    /// The configurations the bench run must measure for this metric.
    pub fn configs(&self) -> Vec<&str> {
        match self {
            Metric::OpsPerSMean(c) | Metric::PerThreadMean(c) => vec![c],
            Metric::Ratio { config, baseline } => vec![config, baseline],
        }
    }

    /// The metric of one bench run, from its KTAP text (the `# BENCH`
    /// lines, parsed by the bench report); `Err` says why there is none.
    pub fn value(&self, ktap: &str) -> Result<f64, String> {
        let lines: Vec<BenchLine> = ktap.lines().filter_map(BenchLine::parse).collect();
        self.value_of(&lines)
    }

    /// The metric of one bench run's `# BENCH` lines.
    pub fn value_of(&self, lines: &[BenchLine]) -> Result<f64, String> {
        let names: Vec<String> = self.configs().iter().map(|s| s.to_string()).collect();
        let mut rows = rows_from_lines("", "", &names, lines);
        if let Metric::Ratio { baseline, .. } = self {
            apply_ratios(&mut rows, baseline);
        }
        for r in &rows {
            measured(r)?;
        }
        let row = &rows[0];
        let v = match self {
            Metric::OpsPerSMean(_) => row.total.mean,
            Metric::PerThreadMean(_) => row.per_thread.mean,
            Metric::Ratio { baseline, .. } => row
                .ratio
                .ok_or_else(|| format!("{baseline}: 0 ops/s, no ratio"))?,
        };
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("{}: not a number ({v})", row.config))
        }
    }
}

/// Whether a row has numbers, and if not why.
fn measured(r: &Row) -> Result<(), String> {
    match r.status {
        RowStatus::Ok if r.total.n > 0 => Ok(()),
        RowStatus::Ok => Err(format!("{}: no rounds", r.config)),
        RowStatus::Skip => Err(format!("{}: skipped: {}", r.config, r.reason)),
        RowStatus::Fail => Err(format!("{}: failed: {}", r.config, r.reason)),
        RowStatus::Missing if r.reason.is_empty() => {
            Err(format!("{}: no result in the bench output", r.config))
        }
        RowStatus::Missing => Err(format!("{}: incomplete ({})", r.config, r.reason)),
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Metric::OpsPerSMean(c) => write!(f, "ops_per_s_mean:{c}"),
            Metric::PerThreadMean(c) => write!(f, "per_thread_mean:{c}"),
            Metric::Ratio { config, baseline } => write!(f, "ratio:{config}/{baseline}"),
        }
    }
}

/// Which side of the threshold is bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `<N`: bad below N (a throughput that dropped).
    Below,
    /// `>N`: bad above N.
    Above,
}

/// `--threshold`: `<N` (bad below N) or `>N` (bad above N); N may end in
/// k, M or G (as the bench table prints ops/s). A value equal to N is good.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// The bad side.
    pub side: Side,
    /// N.
    pub limit: f64,
}

impl Threshold {
    /// Parses `<N` or `>N`, strictly: one operator, one finite number, an
    /// optional k/M/G suffix, nothing else.
    pub fn parse(s: &str) -> Result<Threshold, MetricError> {
        let err = |why: &str| MetricError::Threshold {
            given: s.to_string(),
            why: why.to_string(),
        };
        let t = s.trim();
        let (side, rest) = if let Some(r) = t.strip_prefix('<') {
            (Side::Below, r)
        } else if let Some(r) = t.strip_prefix('>') {
            (Side::Above, r)
        } else {
            return Err(err(
                "say which side is bad: '<N' (bad below N) or '>N' (bad above N)",
            ));
        };
        if rest.starts_with(['=', '<', '>']) {
            return Err(err(
                "one operator, '<N' or '>N' (a value equal to N is good)",
            ));
        }
        let rest = rest.trim_start();
        let (num, scale) = match rest.char_indices().last() {
            Some((i, 'k')) => (&rest[..i], 1e3),
            Some((i, 'M')) => (&rest[..i], 1e6),
            Some((i, 'G')) => (&rest[..i], 1e9),
            _ => (rest, 1.0),
        };
        // f64's parser takes "inf" and "nan": only digits, sign, dot, exponent.
        let plain = !num.is_empty()
            && num
                .chars()
                .all(|c| c.is_ascii_digit() || "+-.eE".contains(c))
            && num.chars().any(|c| c.is_ascii_digit());
        let limit = num
            .parse::<f64>()
            .ok()
            .filter(|x| plain && x.is_finite())
            .ok_or_else(|| err("expected a number after the operator, e.g. '<0.8' or '<1.2M'"))?
            * scale;
        Ok(Threshold { side, limit })
    }

    /// Whether `v` is on the bad side.
    pub fn is_bad(&self, v: f64) -> bool {
        match self.side {
            Side::Below => v < self.limit,
            Side::Above => v > self.limit,
        }
    }

    /// The verdict of a value (`None`: no value, skip).
    pub fn verdict(&self, v: Option<f64>) -> Verdict {
        match v {
            None => Verdict::Skip,
            Some(v) if self.is_bad(v) => Verdict::Bad,
            Some(_) => Verdict::Good,
        }
    }

    /// `below the threshold <1000` / `not below the threshold <1000`.
    pub fn explain(&self, v: f64) -> String {
        let side = match self.side {
            Side::Below => "below",
            Side::Above => "above",
        };
        let not = if self.is_bad(v) { "" } else { "not " };
        format!("{not}{side} the threshold {self}")
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.side {
            Side::Below => '<',
            Side::Above => '>',
        };
        write!(f, "{op}{}", number(self.limit))
    }
}

/// A metric value for people: whole numbers from 1000 up (ops/s), four
/// decimals at most below (ratios).
pub fn number(x: f64) -> String {
    if x.abs() >= 1000.0 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() || s == "-" || s == "-0" {
            "0".into()
        } else {
            s.to_string()
        }
    }
}

/// A step's value from its repetitions: the median of those that produced
/// one (`None` if none did). The median, not the mean: under TCG on a busy
/// host one repetition can be far off (a stalled vCPU), and the median of
/// three ignores one such outlier where the mean would follow it.
pub fn aggregate(values: &[Option<f64>]) -> Option<f64> {
    let xs: Vec<f64> = values.iter().flatten().copied().collect();
    (!xs.is_empty()).then(|| guest_tests::bench::median(&xs))
}

/// `812 (median of 1000, 812, 790)`, `812 (one run)`; `-` for a
/// repetition without a value.
pub fn describe_value(value: f64, values: &[Option<f64>]) -> String {
    if values.len() <= 1 {
        return format!("{} (one run)", number(value));
    }
    let each: Vec<String> = values
        .iter()
        .map(|v| v.map_or("-".into(), number))
        .collect();
    format!("{} (median of {})", number(value), each.join(", "))
}

/// The step's verdict and reason from its repetitions' values and, for the
/// repetitions without one, why (`misses`).
pub fn judge(
    metric: &Metric,
    threshold: &Threshold,
    values: &[Option<f64>],
    misses: &[String],
) -> (Verdict, Option<f64>, String) {
    let value = aggregate(values);
    let mut why = match value {
        Some(v) => format!(
            "{metric} {}, {}",
            describe_value(v, values),
            threshold.explain(v)
        ),
        None => format!("{metric}: no value"),
    };
    if !misses.is_empty() {
        why.push_str(&format!(" ({})", misses.join("; ")));
    }
    (threshold.verdict(value), value, why)
}

/// Why an end is not what it was said to be, for the end checks:
/// `has ops_per_s_mean:b1024 812 (median of ...), which is below the
/// threshold <1000: not good`.
pub fn end_mismatch(
    metric: &str,
    threshold: &Threshold,
    value: f64,
    values: &[Option<f64>],
    want: Verdict,
) -> String {
    format!(
        "has {metric} {}, which is {}: not {}",
        describe_value(value, values),
        threshold.explain(value),
        want.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_tests::bench::{BenchLine, Config, Round, Summary};

    fn summary(name: &str, per_round: &[&[u64]]) -> String {
        let c = Config::parse(name).unwrap();
        let rounds: Vec<Round> = per_round
            .iter()
            .enumerate()
            .map(|(i, ops)| Round::from_ops(name, i, ops, 1.0))
            .collect();
        format!(
            "  # {}\n",
            BenchLine::Summary(Summary::of(&c, &rounds)).to_diag()
        )
    }

    fn ktap() -> String {
        let mut s = String::from("KTAP version 1\n1..1\n");
        s += &summary("global", &[&[500, 500], &[500, 500]]);
        s += &summary("b1024", &[&[300, 300], &[400, 400]]);
        s += &format!(
            "  # {}\n",
            BenchLine::Skip {
                config: "Ib1024".into(),
                reason: "no immutable private futex hash".into()
            }
            .to_diag()
        );
        s += &format!(
            "  # {}\n",
            BenchLine::Fail {
                config: "b16".into(),
                reason: "GET_SLOTS 17 after SET 16".into()
            }
            .to_diag()
        );
        s += &format!(
            "  # {}\n",
            BenchLine::Round(Round::from_ops("auto", 0, &[10], 1.0)).to_diag()
        );
        s
    }

    #[test]
    fn metric_names_parse_and_print_back() {
        for s in [
            "ops_per_s_mean:b1024",
            "per_thread_mean:global",
            "ratio:b1024/global",
        ] {
            assert_eq!(Metric::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(
            Metric::parse("ratio:b1024/global").unwrap().configs(),
            ["b1024", "global"]
        );
        for (bad, why) in [
            ("ops_total", "unknown metric"),
            ("ops_total:b1024", "unknown metric"),
            ("ops_per_s_mean:", "configuration name"),
            ("ops_per_s_mean:a b", "configuration name"),
            ("ratio:b1024", "two configurations"),
            ("ratio:b1024/", "configuration name"),
            ("ratio:global/global", "always 1"),
        ] {
            let e = Metric::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            // Every metric error lists the valid ones.
            assert!(
                e.contains("ops_per_s_mean:CONFIG") && e.contains("ratio:CONFIG/BASELINE"),
                "{e}"
            );
        }
    }

    #[test]
    fn values_come_from_the_bench_report_rows() {
        let k = ktap();
        let v = |m: &str| Metric::parse(m).unwrap().value(&k);
        assert_eq!(v("ops_per_s_mean:global"), Ok(1000.0));
        assert_eq!(v("ops_per_s_mean:b1024"), Ok(700.0));
        assert_eq!(v("per_thread_mean:b1024"), Ok(350.0));
        assert_eq!(v("ratio:b1024/global"), Ok(0.7));
        let e = v("ops_per_s_mean:Ib1024").unwrap_err();
        assert!(e.contains("Ib1024: skipped: no immutable"), "{e}");
        let e = v("ratio:b16/global").unwrap_err();
        assert!(e.contains("b16: failed: GET_SLOTS 17"), "{e}");
        // A baseline without numbers: no ratio.
        let e = v("ratio:b1024/Ib1024").unwrap_err();
        assert!(e.contains("Ib1024: skipped"), "{e}");
        let e = v("ops_per_s_mean:auto").unwrap_err();
        assert!(
            e.contains("auto: incomplete (no summary: 1 rounds seen)"),
            "{e}"
        );
        let e = v("ops_per_s_mean:shared").unwrap_err();
        assert!(e.contains("shared: no result"), "{e}");
        assert!(v("ops_per_s_mean:x").is_err());
        assert!(Metric::parse("ops_per_s_mean:x")
            .unwrap()
            .value("")
            .is_err());
        // A baseline at 0 ops/s.
        let zero = summary("global", &[&[0]]) + &summary("b1024", &[&[5]]);
        let e = Metric::parse("ratio:b1024/global")
            .unwrap()
            .value(&zero)
            .unwrap_err();
        assert!(e.contains("global: 0 ops/s"), "{e}");
    }

    #[test]
    fn thresholds_parse_strictly() {
        let t = |s: &str| Threshold::parse(s).map(|t| (t.side, t.limit));
        assert_eq!(t("<0.8"), Ok((Side::Below, 0.8)));
        assert_eq!(t(" > 1.5 "), Ok((Side::Above, 1.5)));
        assert_eq!(t("<1.2M"), Ok((Side::Below, 1.2e6)));
        assert_eq!(t("<850k"), Ok((Side::Below, 850e3)));
        assert_eq!(t("<1G"), Ok((Side::Below, 1e9)));
        assert_eq!(t("<1e3"), Ok((Side::Below, 1000.0)));
        assert_eq!(t(">-2"), Ok((Side::Above, -2.0)));
        for (bad, why) in [
            ("0.8", "say which side is bad"),
            ("", "say which side is bad"),
            ("=0.8", "say which side is bad"),
            ("<=0.8", "one operator"),
            ("<<1", "one operator"),
            ("<", "expected a number"),
            ("<x", "expected a number"),
            ("<0.8x", "expected a number"),
            ("<1.2m", "expected a number"),
            ("<1 2", "expected a number"),
            ("<inf", "expected a number"),
            ("<nan", "expected a number"),
            ("<1e999", "expected a number"),
            ("<k", "expected a number"),
            ("<.", "expected a number"),
        ] {
            let e = Threshold::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(e.starts_with("--threshold"), "{e}");
        }
        assert_eq!(Threshold::parse("<1.2M").unwrap().to_string(), "<1200000");
        assert_eq!(Threshold::parse(">0.80").unwrap().to_string(), ">0.8");
    }

    #[test]
    fn verdict_is_the_side_of_the_threshold() {
        let below = Threshold::parse("<1000").unwrap();
        assert_eq!(below.verdict(Some(999.0)), Verdict::Bad);
        assert_eq!(below.verdict(Some(1000.0)), Verdict::Good);
        assert_eq!(below.verdict(Some(5000.0)), Verdict::Good);
        assert_eq!(below.verdict(None), Verdict::Skip);
        let above = Threshold::parse(">1.1").unwrap();
        assert_eq!(above.verdict(Some(1.2)), Verdict::Bad);
        assert_eq!(above.verdict(Some(1.1)), Verdict::Good);
        assert_eq!(below.explain(812.0), "below the threshold <1000");
        assert_eq!(below.explain(1200.0), "not below the threshold <1000");
        assert_eq!(above.explain(1.0), "not above the threshold >1.1");
    }

    #[test]
    fn repetitions_combine_by_median() {
        // One outlier does not move the median.
        assert_eq!(
            aggregate(&[Some(1000.0), Some(50.0), Some(990.0)]),
            Some(990.0)
        );
        assert_eq!(aggregate(&[Some(700.0), None, Some(900.0)]), Some(800.0));
        assert_eq!(aggregate(&[Some(1.5)]), Some(1.5));
        assert_eq!(aggregate(&[None, None]), None);
        assert_eq!(aggregate(&[]), None);
        assert_eq!(number(812.25), "812.25");
        assert_eq!(number(0.70001), "0.7");
        assert_eq!(number(1234567.8), "1234568");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(-0.00001), "0");
    }

    #[test]
    fn judging_a_step_and_the_messages() {
        let m = Metric::parse("ops_per_s_mean:b1024").unwrap();
        let t = Threshold::parse("<1000").unwrap();
        let (v, value, why) = judge(&m, &t, &[Some(812.0), Some(1500.0), Some(790.0)], &[]);
        assert_eq!((v, value), (Verdict::Bad, Some(812.0)));
        assert_eq!(
            why,
            "ops_per_s_mean:b1024 812 (median of 812, 1500, 790), below the threshold <1000"
        );
        let (v, value, why) = judge(
            &m,
            &t,
            &[Some(1200.0), None],
            &["run 2: b1024: failed: x".into()],
        );
        assert_eq!((v, value), (Verdict::Good, Some(1200.0)));
        assert_eq!(
            why,
            "ops_per_s_mean:b1024 1200 (median of 1200, -), not below the threshold <1000 (run 2: b1024: failed: x)"
        );
        let (v, value, why) = judge(&m, &t, &[None], &["b1024: skipped: no".into()]);
        assert_eq!((v, value), (Verdict::Skip, None));
        assert_eq!(why, "ops_per_s_mean:b1024: no value (b1024: skipped: no)");
        let (_, _, why) = judge(&m, &t, &[Some(5.0)], &[]);
        assert!(why.contains("5 (one run)"), "{why}");
        assert_eq!(
            end_mismatch(
                "ops_per_s_mean:b1024",
                &t,
                812.0,
                &[Some(812.0), Some(900.0), Some(700.0)],
                Verdict::Good
            ),
            "has ops_per_s_mean:b1024 812 (median of 812, 900, 700), which is below the threshold <1000: not good"
        );
        assert_eq!(
            end_mismatch(
                "ratio:b/g",
                &Threshold::parse("<0.8").unwrap(),
                1.0,
                &[Some(1.0)],
                Verdict::Bad
            ),
            "has ratio:b/g 1 (one run), which is not below the threshold <0.8: not bad"
        );
    }
}
