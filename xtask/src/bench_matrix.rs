//! `cargo xtask bench-matrix`: the matrix's schedulers against each other,
//! measured in one invocation (runs of each `-j` interleaved, order rotated
//! each round, so drift of a shared machine hits all alike): `-j 1` (one
//! cell at a time), `-j vcpus` (the old rule: declared vCPUs within the
//! cores) and `-j auto` (measured CPU and learned demand). Every run reads
//! and updates one costs file, so all share the same longest-first order.
//! Per run: wall time, and from its JSON results file
//! (`matrix-logs/j<J>-<run>.json`) cores busy and failed cells; per
//! invocation: flaky cells (passed in one run, not in another).
//!
//! Each entry of `--jobs` is `-j`'s value, optionally with `:multi` or
//! `:single` for `--tcg-thread` (without: the harness's `auto`, which is
//! round-robin TCG whenever cells share the host): `auto:multi` is the
//! measured rule with a host thread per vCPU, as before round-robin.
//!
//! Options: `--runs N` (default 2), `--jobs LIST` (default
//! `1,vcpus:multi,auto:multi,auto`), `--full` (the whole default matrix), `--out DIR`
//! (default target/bench); anything after `--` goes to `harness matrix` as
//! the cell selection (default: `--suite smoke --topology
//! 1n2c,2n2c,4n1c-dist`, 27 cells of the default matrix).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use xshell::{cmd, Shell};

use crate::bench::{median, read_results, timed};

struct Opts {
    runs: usize,
    jobs: Vec<String>,
    out: PathBuf,
    select: Vec<String>,
}

fn opts(args: &[String], root: &Path) -> Result<Opts> {
    let mut o = Opts {
        runs: 2,
        jobs: ["1", "vcpus:multi", "auto:multi", "auto"]
            .map(String::from)
            .to_vec(),
        out: root.join("target").join("bench"),
        select: ["--suite", "smoke", "--topology", "1n2c,2n2c,4n1c-dist"]
            .map(String::from)
            .to_vec(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut v = || it.next().cloned().context(format!("{a} needs a value"));
        match a.as_str() {
            "--runs" => o.runs = v()?.parse().context("--runs")?,
            "--jobs" => o.jobs = v()?.split(',').map(|s| s.trim().to_string()).collect(),
            "--out" => o.out = v()?.into(),
            "--full" => o.select.clear(),
            "--" => {
                o.select = it.by_ref().cloned().collect();
            }
            other => bail!("unknown option {other:?} (matrix selection goes after --)"),
        }
    }
    if o.runs == 0 || o.jobs.is_empty() {
        bail!("--runs must be >= 1 and --jobs non-empty");
    }
    if let Some(bad) = o
        .jobs
        .iter()
        .find(|j| !matches!(job_words(j).1, "auto" | "multi" | "single"))
    {
        bail!("--jobs {bad:?}: the part after ':' must be multi, single or auto");
    }
    Ok(o)
}

/// A `--jobs` entry's `-j` and `--tcg-thread` values: `auto:multi` ->
/// (`auto`, `multi`); `2` -> (`2`, `auto`).
fn job_words(entry: &str) -> (&str, &str) {
    entry.split_once(':').unwrap_or((entry, "auto"))
}

/// What one matrix run measured, from its results file: cores busy
/// while cells ran (QEMU CPU over cells' wall time), cells passed, cells in
/// all, and each cell's name and whether it passed.
struct Measured {
    busy: f64,
    passed: usize,
    total: usize,
    cells: Vec<(String, bool)>,
}

fn measured(r: &harness::results::Results) -> Measured {
    let busy = r
        .run
        .stats
        .as_ref()
        .map_or(0.0, |s| s.cells_cpu_s / s.cells_wall_s.max(1e-9));
    let cells: Vec<(String, bool)> = r
        .cells
        .iter()
        .map(|c| (c.name.clone(), c.status == "passed"))
        .collect();
    Measured {
        busy,
        passed: cells.iter().filter(|c| c.1).count(),
        total: cells.len(),
        cells,
    }
}

/// Cells that passed in some runs and not in others.
fn flaky(runs: &[Vec<(String, bool)>]) -> Vec<String> {
    let mut seen: std::collections::BTreeMap<&str, (bool, bool)> = Default::default();
    for r in runs {
        for (name, ok) in r {
            let e = seen.entry(name).or_default();
            if *ok {
                e.0 = true
            } else {
                e.1 = true
            }
        }
    }
    seen.into_iter()
        .filter(|(_, (p, f))| *p && *f)
        .map(|(n, _)| n.to_string())
        .collect()
}

pub fn run(sh: &Shell, args: &[String]) -> Result<()> {
    let root = sh.current_dir();
    let o = opts(args, &root)?;
    cmd!(sh, "cargo build --quiet --release --package harness").run()?;
    let harness = root.join("target/release/harness");
    let logs = o.out.join("matrix-logs");
    std::fs::create_dir_all(&logs)?;
    // Warm-up: guest binaries built, kernels fetched, not counted.
    let status = Command::new(&harness)
        .arg("matrix")
        .args(["--list"])
        .args(&o.select)
        .status()?;
    if !status.success() {
        bail!("harness matrix --list failed: {status}");
    }
    // (seconds, cores busy, passed, total) per run, per -j.
    let mut samples: Vec<Vec<(f64, f64, usize, usize)>> = vec![Vec::new(); o.jobs.len()];
    let mut statuses = Vec::new();
    let costs = o.out.join("matrix-costs.json");
    for r in 0..o.runs {
        for k in 0..o.jobs.len() {
            let i = (k + r) % o.jobs.len();
            let j = &o.jobs[i];
            let (jobs, thread) = job_words(j);
            let mut c = Command::new(&harness);
            let tag = format!("j{}-{r}", j.replace(':', "-"));
            let results = logs.join(format!("{tag}.json"));
            c.args(["matrix", "-j", jobs, "--tcg-thread", thread, "--out"])
                .arg(o.out.join(format!("matrix-j{}", j.replace(':', "-"))))
                .arg("--costs")
                .arg(&costs)
                .arg("--json")
                .arg(&results)
                .args(&o.select);
            let log = logs.join(format!("{tag}.log"));
            let (secs, code, _) = timed(c, Duration::from_secs(4 * 3600), &log)?;
            // A run that left no results file counts as nothing passed.
            let m = match read_results(&results) {
                Ok(doc) => measured(&doc),
                Err(e) => {
                    eprintln!("xtask: {e:#}");
                    measured(&Default::default())
                }
            };
            let (busy, passed, total) = (m.busy, m.passed, m.total);
            statuses.push(m.cells);
            eprintln!(
                "xtask: run {}/{} -j {j}: {secs:.1} s, {busy:.2} cores busy, {passed}/{total} cells passed (exit {code}; log {})",
                r + 1,
                o.runs,
                log.display()
            );
            samples[i].push((secs, busy, passed, total));
        }
    }
    let base = median(&samples[0].iter().map(|s| s.0).collect::<Vec<_>>());
    let mut table = format!(
        "bench-matrix: harness matrix {}, {} interleaved runs per -j, medians of whole-command wall time\n{:<6} {:>9} {:>9} {:>9} {:>11} {:>9}  cells\n",
        o.select.join(" "),
        o.runs,
        "-j",
        "median s",
        "min s",
        "max s",
        "cores busy",
        "speed-up"
    );
    let mut rows = Vec::new();
    for (j, s) in o.jobs.iter().zip(&samples) {
        let secs: Vec<f64> = s.iter().map(|x| x.0).collect();
        let med = median(&secs);
        let busy = median(&s.iter().map(|x| x.1).collect::<Vec<_>>());
        let min = secs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = secs.iter().copied().fold(0.0, f64::max);
        let speedup = if med > 0.0 { base / med } else { 0.0 };
        let cells = s
            .iter()
            .map(|x| format!("{}/{}", x.2, x.3))
            .collect::<Vec<_>>()
            .join(" ");
        table += &format!(
            "{j:<6} {med:>9.1} {min:>9.1} {max:>9.1} {busy:>11.2} {speedup:>8.2}x  {cells}\n"
        );
        rows.push(format!(
            "{{\"jobs\":{j:?},\"median_s\":{med:.2},\"min_s\":{min:.2},\"max_s\":{max:.2},\"cores_busy\":{busy:.2},\"speedup_over_first\":{speedup:.3},\"samples_s\":{secs:?}}}"
        ));
    }
    let flaky = flaky(&statuses);
    table += &format!(
        "failed cells per run: {}; flaky cells (passed in one run, not in another): {}{}\n",
        samples
            .iter()
            .zip(&o.jobs)
            .map(|(s, j)| format!(
                "-j {j}: {}",
                s.iter()
                    .map(|x| (x.3 - x.2).to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ))
            .collect::<Vec<_>>()
            .join("; "),
        flaky.len(),
        if flaky.is_empty() {
            String::new()
        } else {
            format!(" ({})", flaky.join(", "))
        }
    );
    print!("{table}");
    std::fs::write(o.out.join("matrix.txt"), &table)?;
    std::fs::write(
        o.out.join("matrix.json"),
        format!(
            "{{\"select\":{:?},\"runs\":{},\"flaky\":{:?},\"rows\":[\n{}\n]}}\n",
            o.select,
            o.runs,
            flaky,
            rows.join(",\n")
        ),
    )?;
    println!("written: {}", o.out.join("matrix.json").display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(cells: &[(&str, &str)], cpu_wall: Option<(f64, f64)>) -> harness::results::Results {
        let cells = cells
            .iter()
            .map(|&(name, status)| harness::results::Cell {
                name: name.into(),
                status: status.into(),
                ..Default::default()
            })
            .collect();
        let stats = cpu_wall.map(|(cpu, wall)| harness::results::Stats {
            cells_cpu_s: cpu,
            cells_wall_s: wall,
            ..Default::default()
        });
        harness::results::Results {
            run: harness::results::Run {
                stats,
                ..Default::default()
            },
            cells,
            ..Default::default()
        }
    }

    #[test]
    fn reads_the_results_file_and_finds_flaky_cells() {
        let a = results(
            &[("k/1n2c/smoke", "passed"), ("k/2n2c/futex", "failed")],
            Some((90.2, 77.5)),
        );
        let b = results(
            &[
                ("k/1n2c/smoke", "passed"),
                ("k/2n2c/futex", "passed"),
                ("k/4n1c/smoke", "error"),
            ],
            None,
        );
        let (ma, mb) = (measured(&a), measured(&b));
        assert_eq!((ma.passed, ma.total), (1, 2));
        assert!((ma.busy - 90.2 / 77.5).abs() < 1e-9);
        assert_eq!((mb.passed, mb.total, mb.busy), (2, 3, 0.0));
        assert_eq!(mb.cells[2], ("k/4n1c/smoke".into(), false));
        assert_eq!(
            flaky(&[ma.cells, mb.cells]),
            vec!["k/2n2c/futex".to_string()]
        );
        let none = measured(&Default::default());
        assert_eq!((none.passed, none.total, none.busy), (0, 0, 0.0));
    }

    #[test]
    fn options() {
        let o = opts(
            &["--jobs", "1, 2,auto", "--", "--kernel", "debian-7.3"].map(String::from),
            Path::new("/r"),
        )
        .unwrap();
        assert_eq!(o.jobs, ["1", "2", "auto"]);
        assert_eq!(o.select, ["--kernel", "debian-7.3"]);
        assert!(opts(&["--bogus".into()], Path::new("/r")).is_err());
        let o = opts(&["--full".into()], Path::new("/r")).unwrap();
        assert!(o.select.is_empty());
        assert_eq!(o.jobs, ["1", "vcpus:multi", "auto:multi", "auto"]);
        assert!(opts(&["--runs".into(), "0".into()], Path::new("/r")).is_err());
        assert_eq!(job_words("auto:multi"), ("auto", "multi"));
        assert_eq!(job_words("2"), ("2", "auto"));
        assert!(opts(&["--jobs".into(), "auto:rr".into()], Path::new("/r")).is_err());
    }
}
