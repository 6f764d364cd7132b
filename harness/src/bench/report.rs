//! The comparison table: rows from the `# BENCH` lines of each VM's KTAP
//! stream, ratios against a baseline configuration (per kernel and
//! topology), and the terminal / CSV / JSON writers. Pure and unit-tested.

use guest_tests::bench::{si, BenchLine, Stats};
use serde::{Deserialize, Serialize};

/// How a configuration ended in one VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowStatus {
    /// Measured.
    Ok,
    /// Not runnable on that kernel (the reason says why).
    Skip,
    /// Failed (the reason says why).
    Fail,
    /// No result in the stream (the VM died or the guest never got there).
    Missing,
}

/// One configuration on one kernel and topology.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Kernel as the user named it.
    pub kernel: String,
    /// Topology spec.
    pub topology: String,
    /// Configuration name.
    pub config: String,
    /// Encoded configuration (empty if unknown).
    pub spec: String,
    /// Outcome.
    pub status: RowStatus,
    /// Skip/fail reason.
    pub reason: String,
    /// Total ops/s over rounds.
    pub total: Stats,
    /// Per-thread ops/s over all threads of all rounds.
    pub per_thread: Stats,
    /// Worker threads.
    pub threads: usize,
    /// `total.mean` / the baseline's `total.mean` on the same kernel and topology.
    pub ratio: Option<f64>,
}

/// Rows of one VM from its KTAP text, in the order of `configs` (the names
/// asked for); a configuration without a summary, skip or fail line is
/// [`RowStatus::Missing`]. Summary lines are used as the guest computed
/// them; rounds without a summary are summarised here (a VM cut short).
pub fn rows_from_ktap(kernel: &str, topology: &str, configs: &[String], ktap: &str) -> Vec<Row> {
    let lines: Vec<BenchLine> = ktap.lines().filter_map(BenchLine::parse).collect();
    rows_from_lines(kernel, topology, configs, &lines)
}

/// The `# BENCH` lines of a cell's parsed KTAP (the results the runner
/// already read: nothing is read again from disk).
pub fn bench_lines(ktap: &crate::ktap::Document) -> Vec<BenchLine> {
    ktap.all_diagnostics()
        .into_iter()
        .filter_map(|d| BenchLine::parse(&format!("# {d}")))
        .collect()
}

/// The rows of `configs` from `# BENCH` lines.
pub fn rows_from_lines(
    kernel: &str,
    topology: &str,
    configs: &[String],
    lines: &[BenchLine],
) -> Vec<Row> {
    configs
        .iter()
        .map(|name| {
            let mut row = Row {
                kernel: kernel.into(),
                topology: topology.into(),
                config: name.clone(),
                spec: String::new(),
                status: RowStatus::Missing,
                reason: String::new(),
                total: Stats::of(&[]),
                per_thread: Stats::of(&[]),
                threads: 0,
                ratio: None,
            };
            let mut totals = Vec::new();
            let mut per = Vec::new();
            for l in lines.iter().filter(|l| l.config() == name) {
                match l {
                    BenchLine::Round(r) => {
                        totals.push(r.total);
                        per.extend(r.per_thread.iter().copied());
                        row.threads = r.per_thread.len();
                    }
                    BenchLine::Summary(s) => {
                        row.status = RowStatus::Ok;
                        row.spec = s.spec.clone();
                        row.total = s.total;
                        row.per_thread = s.per_thread;
                        row.threads = s.threads;
                    }
                    BenchLine::Skip { reason, .. } => {
                        row.status = RowStatus::Skip;
                        row.reason = reason.clone();
                    }
                    BenchLine::Fail { reason, .. } => {
                        row.status = RowStatus::Fail;
                        row.reason = reason.clone();
                    }
                }
            }
            if row.status == RowStatus::Missing && !totals.is_empty() {
                row.total = Stats::of(&totals);
                row.per_thread = Stats::of(&per);
                row.reason = format!("no summary: {} rounds seen", totals.len());
            }
            row
        })
        .collect()
}

/// Sets every row's ratio against `baseline` on the same kernel and
/// topology (None where the baseline or the row has no numbers).
pub fn apply_ratios(rows: &mut [Row], baseline: &str) {
    let bases: Vec<(String, String, f64)> = rows
        .iter()
        .filter(|r| r.config == baseline && r.status == RowStatus::Ok && r.total.mean > 0.0)
        .map(|r| (r.kernel.clone(), r.topology.clone(), r.total.mean))
        .collect();
    for r in rows.iter_mut() {
        r.ratio = bases
            .iter()
            .find(|(k, t, _)| *k == r.kernel && *t == r.topology)
            .filter(|_| r.total.n > 0)
            .map(|(_, _, b)| r.total.mean / b);
    }
}

/// Facts about how the numbers were produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `kvm` or `tcg` (all cells; mixed runs list each).
    pub accel: String,
    /// QEMU version.
    pub qemu: String,
    /// Baseline configuration of the ratios.
    pub baseline: String,
    /// Rounds per configuration.
    pub rounds: usize,
    /// Seconds per round.
    pub runtime_s: f64,
    /// Host CPUs.
    pub host_cpus: usize,
    /// What the numbers mean.
    pub note: String,
}

impl Meta {
    /// The caveat that goes with the numbers.
    pub fn note_for(accel: &str) -> String {
        if accel == "kvm" {
            "ops/s under KVM; compare configurations and kernels within one run".into()
        } else {
            format!(
                "ops/s under {accel} (software emulation): these compare configurations \
                 within one run on this host, not absolute kernel speed"
            )
        }
    }
}

/// The whole report as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Provenance.
    pub meta: Meta,
    /// Rows in run order.
    pub rows: Vec<Row>,
}

fn pct(s: &Stats) -> String {
    if s.n == 0 {
        "-".into()
    } else {
        format!("{:.1}%", s.rel_sd_pct())
    }
}

/// The terminal table (aligned columns; one block per kernel/topology).
pub fn table(report: &Report) -> String {
    let head = [
        "kernel",
        "topology",
        "config",
        "ops/s",
        "+-",
        "rounds",
        "thr",
        "per-thread",
        "+-",
        "ratio",
    ];
    let mut cells: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for r in &report.rows {
        let num = r.total.n > 0;
        let mut v = vec![
            r.kernel.clone(),
            r.topology.clone(),
            r.config.clone(),
            if num { si(r.total.mean) } else { "-".into() },
            pct(&r.total),
            r.total.n.to_string(),
            r.threads.to_string(),
            if num {
                si(r.per_thread.mean)
            } else {
                "-".into()
            },
            pct(&r.per_thread),
            r.ratio.map_or("-".into(), |x| format!("{x:.2}x")),
        ];
        match r.status {
            RowStatus::Ok => {}
            RowStatus::Skip => v.push(format!("SKIP: {}", r.reason)),
            RowStatus::Fail => v.push(format!("FAIL: {}", r.reason)),
            RowStatus::Missing => v.push(format!("MISSING {}", r.reason).trim().to_string()),
        }
        cells.push(v);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for c in &cells {
        let mut line = String::new();
        for (i, w) in widths.iter().enumerate() {
            // Text columns left, numbers right.
            if i < 3 {
                line += &format!("{:<w$}  ", c[i], w = w);
            } else {
                line += &format!("{:>w$}  ", c[i], w = w);
            }
        }
        if let Some(extra) = c.get(head.len()) {
            line += extra;
        }
        out += line.trim_end();
        out.push('\n');
    }
    out += &format!(
        "ratio = ops/s / ops/s of {:?} on the same kernel and topology; {} rounds x {} s, interleaved; {}\n",
        report.meta.baseline, report.meta.rounds, report.meta.runtime_s, report.meta.note
    );
    out
}

/// A CSV field: quoted when it holds a comma, quote or newline.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The CSV (one header line, one line per row; RFC 4180 quoting).
pub fn csv(report: &Report) -> String {
    let mut out = String::from(
        "kernel,topology,accel,config,status,ops_per_s_mean,ops_per_s_sd,rounds,threads,\
         per_thread_mean,per_thread_sd,ratio,baseline,spec,reason\n",
    );
    for r in &report.rows {
        let f = |x: f64| format!("{x:.1}");
        let fields = [
            r.kernel.clone(),
            r.topology.clone(),
            report.meta.accel.clone(),
            r.config.clone(),
            format!("{:?}", r.status).to_lowercase(),
            f(r.total.mean),
            f(r.total.sd),
            r.total.n.to_string(),
            r.threads.to_string(),
            f(r.per_thread.mean),
            f(r.per_thread.sd),
            r.ratio.map_or(String::new(), |x| format!("{x:.4}")),
            report.meta.baseline.clone(),
            r.spec.clone(),
            r.reason.clone(),
        ];
        let line: Vec<String> = fields.iter().map(|s| csv_field(s)).collect();
        out += &line.join(",");
        out.push('\n');
    }
    out
}

/// The JSON report (pretty).
pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_tests::bench::{Config, Round, Summary};

    fn ktap() -> String {
        let g = Config::parse("global:buckets=0").unwrap();
        let b = Config::parse("b16:buckets=16").unwrap();
        let rg = [
            Round::from_ops("global", 0, &[100, 100], 1.0),
            Round::from_ops("global", 1, &[150, 150], 1.0),
        ];
        let rb = [
            Round::from_ops("b16", 0, &[300, 300], 1.0),
            Round::from_ops("b16", 1, &[200, 200], 1.0),
        ];
        let mut s = String::from("KTAP version 1\n1..2\n  KTAP version 1\n  1..3\n");
        for l in [
            BenchLine::Round(rg[0].clone()),
            BenchLine::Round(rb[0].clone()),
            BenchLine::Round(rg[1].clone()),
            BenchLine::Round(rb[1].clone()),
            BenchLine::Summary(Summary::of(&g, &rg)),
            BenchLine::Summary(Summary::of(&b, &rb)),
            BenchLine::Skip {
                config: "Ib128".into(),
                reason: "no immutable hash, \"EINVAL\"".into(),
            },
        ] {
            s += &format!("  # {}\n", l.to_diag());
        }
        s += "  ok 1 global\n";
        s
    }

    fn report() -> Report {
        let names: Vec<String> = ["global", "b16", "Ib128", "lost"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut rows = rows_from_ktap("debian:7.3.4", "nodes=2,cpus=2,mem=512M", &names, &ktap());
        apply_ratios(&mut rows, "global");
        Report {
            meta: Meta {
                accel: "tcg".into(),
                qemu: "7.2.22".into(),
                baseline: "global".into(),
                rounds: 2,
                runtime_s: 1.0,
                host_cpus: 2,
                note: Meta::note_for("tcg"),
            },
            rows,
        }
    }

    #[test]
    fn rows_statuses_stats_and_ratios() {
        let r = report();
        let by = |n: &str| r.rows.iter().find(|x| x.config == n).unwrap();
        assert_eq!(by("global").status, RowStatus::Ok);
        assert_eq!(by("global").total.mean, 250.0);
        assert_eq!(by("b16").total.mean, 500.0);
        assert_eq!(by("b16").ratio, Some(2.0));
        assert_eq!(by("global").ratio, Some(1.0));
        assert_eq!(by("Ib128").status, RowStatus::Skip);
        assert_eq!(by("Ib128").ratio, None);
        assert_eq!(by("lost").status, RowStatus::Missing);
        assert!(by("b16").spec.starts_with("b16:mode=hash"));
    }

    #[test]
    fn rounds_without_summary_are_summarised() {
        let k = format!(
            "# {}\n",
            BenchLine::Round(Round::from_ops("x", 0, &[10], 1.0)).to_diag()
        );
        let rows = rows_from_ktap("k", "t", &["x".into()], &k);
        assert_eq!(rows[0].status, RowStatus::Missing);
        assert_eq!(rows[0].total.mean, 10.0);
        assert!(rows[0].reason.contains("1 rounds"));
    }

    #[test]
    fn no_baseline_no_ratio() {
        let mut rows = rows_from_ktap("k", "t", &["global".into()], &ktap());
        apply_ratios(&mut rows, "nope");
        assert_eq!(rows[0].ratio, None);
    }

    #[test]
    fn table_layout() {
        let t = table(&report());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("kernel"), "{t}");
        assert!(
            lines[1].contains("global") && lines[1].ends_with("1.00x"),
            "{t}"
        );
        assert!(
            lines[2].contains("500") && lines[2].ends_with("2.00x"),
            "{t}"
        );
        assert!(lines[3].contains("SKIP: no immutable hash"), "{t}");
        assert!(lines[4].contains("MISSING"), "{t}");
        assert!(t.contains("under tcg (software emulation)"), "{t}");
        // Aligned: the ops/s column ends at the same offset on every data line.
        let end = |l: &str, s: &str| l.find(s).map(|i| i + s.len());
        assert_eq!(end(lines[1], "250"), end(lines[2], "500"));
    }

    #[test]
    fn csv_quotes_and_columns() {
        let c = csv(&report());
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines.len(), 5);
        let cols = lines[0].split(',').count();
        assert_eq!(cols, 15);
        assert!(
            lines[1].starts_with("debian:7.3.4,\"nodes=2,cpus=2,mem=512M\",tcg,global,ok,250.0,")
        );
        assert!(lines[2].contains(",2.0000,global,"));
        assert!(
            lines[3].ends_with(",\"no immutable hash, \"\"EINVAL\"\"\""),
            "{}",
            lines[3]
        );
        assert_eq!(csv_field("plain"), "plain");
    }

    #[test]
    fn json_round_trips() {
        let r = report();
        let back: Report = serde_json::from_str(&json(&r)).unwrap();
        assert_eq!(back, r);
        assert!(json(&r).contains("\"status\": \"skip\""));
    }
}
