//! `cargo xtask bench-wedge`: what a livelocked cell costs the others.
//! Two matrices in one invocation, interleaved (order rotated each round,
//! so drift of a shared machine hits both alike): three `futex` cells on
//! `source:7.3` (1n2c, 2n1c, 2n2c), with and without a fourth cell whose
//! kernel livelocks (1n4c, LKDTM `SOFTLOCKUP` on three of its four CPUs
//! from children that outlive SIGKILL, 120 s timeout). Per round and per
//! cell: its wall time in each matrix (the results JSON's `duration_s`);
//! then per cell the ratio of the medians, with/without, against the
//! bound the issue sets (1.3), and the livelocked cell's own time and end.
//!
//! Options: `--runs N` (default 2), `--out DIR` (default
//! `target/bench/wedge`), `--kernel SPEC` (default `source:7.3`: needs
//! `CONFIG_LKDTM`, which the 7.3 guest fragment has).

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use xshell::{cmd, Shell};

use crate::bench::{median, read_results, timed};

/// The bound: the others' times within this factor of the matrix without
/// the livelocked cell.
const BOUND: f64 = 1.3;

struct Opts {
    runs: usize,
    out: PathBuf,
    kernel: String,
}

fn opts(args: &[String], root: &Path) -> Result<Opts> {
    let mut o = Opts {
        runs: 2,
        out: root.join("target").join("bench").join("wedge"),
        kernel: "source:7.3".into(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut v = || it.next().cloned().context(format!("{a} needs a value"));
        match a.as_str() {
            "--runs" => o.runs = v()?.parse().context("--runs")?,
            "--out" => o.out = v()?.into(),
            "--kernel" => o.kernel = v()?,
            other => bail!("unknown option {other:?}"),
        }
    }
    if o.runs == 0 {
        bail!("--runs must be >= 1");
    }
    Ok(o)
}

/// The matrix file: the three `futex` cells, and the livelocked one when
/// `livelock`.
fn matrix_yaml(kernel: &str, livelock: bool) -> String {
    let include = if livelock {
        "  include:\n    - {kernel: k, topology: 1n4c, suite: livelock}\n"
    } else {
        ""
    };
    format!(
        "# Written by cargo xtask bench-wedge.\n\
         kernels:\n\
         \x20 - name: k\n\
         \x20   spec: {kernel}\n\
         \x20   features: {{prctl: true, private_hash: true, immutable: false, numa: true, mpol: true, growth: any-vm, requeue_same_flags: true, robust_pending_owned: true}}\n\
         topologies:\n\
         \x20 - name: 1n2c\n\
         \x20   nodes: [{{cpus: 2, mem: 512M}}]\n\
         \x20 - name: 2n1c\n\
         \x20   nodes: [{{cpus: 1, mem: 512M}}, {{cpus: 1, mem: 512M}}]\n\
         \x20 - name: 2n2c\n\
         \x20   nodes: [{{cpus: 2, mem: 512M}}, {{cpus: 2, mem: 512M}}]\n\
         \x20 - name: 1n4c\n\
         \x20   nodes: [{{cpus: 4, mem: 512M}}]\n\
         suites:\n\
         \x20 - name: futex\n\
         \x20   builtin: futex\n\
         \x20 - name: livelock\n\
         \x20   tests:\n\
         \x20     - {{bin: fault, name: livelock, args: [lkdtm-others, SOFTLOCKUP], timeout: 120s}}\n\
         cells:\n\
         \x20 suites: [futex]\n\
         \x20 exclude:\n\
         \x20   - {{topology: 1n4c}}\n\
         {include}"
    )
}

/// `(cell name, duration_s, vm end)` of each cell in a results JSON.
fn cell_times(json: &Path) -> Result<Vec<(String, f64, String)>> {
    Ok(read_results(json)?
        .cells
        .into_iter()
        .map(|c| {
            let end = c.vm.map(|v| v.end).unwrap_or_default();
            (c.name, c.duration_s, end)
        })
        .collect())
}

pub fn run(sh: &Shell, args: &[String]) -> Result<()> {
    let root = sh.current_dir();
    let o = opts(args, &root)?;
    cmd!(sh, "cargo build --quiet --release --package harness").run()?;
    let harness = root.join("target/release/harness");
    std::fs::create_dir_all(&o.out)?;
    let files = [false, true].map(|l| {
        let path = o.out.join(if l { "with.yaml" } else { "without.yaml" });
        (l, path)
    });
    for (l, path) in &files {
        std::fs::write(path, matrix_yaml(&o.kernel, *l))?;
        let status = Command::new(&harness)
            .args(["matrix", "--list", "--matrix"])
            .arg(path)
            .status()?;
        if !status.success() {
            bail!(
                "harness matrix --list --matrix {}: {status}",
                path.display()
            );
        }
    }
    // Per matrix (false: without, true: with), per cell: wall times.
    let mut times: [BTreeMap<String, Vec<f64>>; 2] = Default::default();
    let mut livelocked = Vec::new();
    let costs = o.out.join("costs.json");
    for r in 0..o.runs {
        for k in 0..2 {
            let (with, path) = &files[(k + r) % 2];
            let tag = if *with { "with" } else { "without" };
            let json = o.out.join(format!("{tag}-{r}.json"));
            let mut c = Command::new(&harness);
            c.args(["matrix", "--keep-going", "--matrix"])
                .arg(path)
                .arg("--out")
                .arg(o.out.join(format!("out-{tag}")))
                .arg("--costs")
                .arg(&costs)
                .arg("--json")
                .arg(&json);
            let log = o.out.join(format!("{tag}-{r}.log"));
            let (secs, code, _) = timed(c, Duration::from_secs(3600), &log)?;
            eprintln!(
                "xtask: round {}/{} {tag}: {secs:.1} s (exit {code}; log {})",
                r + 1,
                o.runs,
                log.display()
            );
            for (name, d, end) in cell_times(&json)? {
                if name.contains("/livelock") {
                    livelocked.push((d, end));
                } else {
                    times[usize::from(*with)].entry(name).or_default().push(d);
                }
            }
        }
    }
    let mut table = format!(
        "bench-wedge: 3 futex cells on {} with and without a livelocked 4th, {} interleaved rounds, medians of each cell's wall time\n{:<32} {:>10} {:>10} {:>7}\n",
        o.kernel, o.runs, "cell", "without s", "with s", "ratio"
    );
    let mut worst: f64 = 0.0;
    for (name, without) in &times[0] {
        let with = times[1].get(name).context(format!("{name} missing with"))?;
        let (a, b) = (median(without), median(with));
        let ratio = b / a;
        worst = worst.max(ratio);
        table += &format!("{name:<32} {a:>10.1} {b:>10.1} {ratio:>6.2}x\n");
    }
    for (d, end) in &livelocked {
        table += &format!("livelocked cell: {d:.1} s, {end}\n");
    }
    table += &format!(
        "worst ratio {worst:.2}x (bound {BOUND}x): {}\n",
        if worst <= BOUND { "within" } else { "OVER" }
    );
    print!("{table}");
    std::fs::write(o.out.join("wedge.txt"), &table)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_matrices_differ_by_the_livelocked_cell_only() {
        let without = matrix_yaml("source:7.3", false);
        let with = matrix_yaml("source:7.3", true);
        assert!(!without.contains("include"));
        assert_eq!(
            with.strip_suffix("  include:\n    - {kernel: k, topology: 1n4c, suite: livelock}\n"),
            Some(without.as_str())
        );
        // The harness's own loader takes both, with the cells meant.
        let names = |text: &str| -> Vec<String> {
            let m = harness::matrix::parse_str(text, Path::new("bench-wedge.yaml")).unwrap();
            m.cells.into_iter().map(|c| c.name).collect()
        };
        assert_eq!(
            names(&without),
            ["k/1n2c/futex", "k/2n1c/futex", "k/2n2c/futex"]
        );
        assert_eq!(
            names(&with),
            [
                "k/1n2c/futex",
                "k/2n1c/futex",
                "k/2n2c/futex",
                "k/1n4c/livelock"
            ]
        );
    }
}
