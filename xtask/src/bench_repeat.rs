//! `cargo xtask bench-repeat`: what `harness run --repeat N` saves over N
//! separate `harness run` calls of the same case, measured in one
//! invocation (the N single runs are the baseline; both on the same
//! kernel, topology and case, the kernel already in the cache).
//!
//! Options: `--times N` (default 50), `--kernel SPEC` (default
//! `debian:7.3.4`), `--test GLOB` (default `futex-prctl/set-16`),
//! `--topology SPEC` (default `nodes=2,cpus=1,mem=512M`), `--out DIR`
//! (default target/bench).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use xshell::{cmd, Shell};

use crate::bench::{median, timed};

struct Opts {
    times: usize,
    kernel: String,
    test: String,
    topology: String,
    out: PathBuf,
}

fn opts(args: &[String], root: &Path) -> Result<Opts> {
    let mut o = Opts {
        times: 50,
        kernel: "debian:7.3.4".into(),
        test: "futex-prctl/set-16".into(),
        topology: "nodes=2,cpus=1,mem=512M".into(),
        out: root.join("target").join("bench"),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut v = || it.next().cloned().context(format!("{a} needs a value"));
        match a.as_str() {
            "--times" => o.times = v()?.parse().context("--times")?,
            "--kernel" => o.kernel = v()?,
            "--test" => o.test = v()?,
            "--topology" => o.topology = v()?,
            "--out" => o.out = v()?.into(),
            other => bail!("unknown option {other:?}"),
        }
    }
    if o.times == 0 {
        bail!("--times must be >= 1");
    }
    Ok(o)
}

pub fn run(sh: &Shell, args: &[String]) -> Result<()> {
    let root = sh.current_dir();
    let o = opts(args, &root)?;
    cmd!(sh, "cargo build --quiet --release --package harness").run()?;
    let harness = root.join("target/release/harness");
    let logs = o.out.join("repeat-logs");
    std::fs::create_dir_all(&logs)?;
    let suite = o.test.split('/').next().unwrap_or("futex");
    let suite = if suite.starts_with("futex") {
        "futex"
    } else {
        "smoke"
    };
    let run = |extra: &[String], tag: &str| -> Result<f64> {
        let mut c = Command::new(&harness);
        c.args(["run", "--kernel", &o.kernel, "--topology", &o.topology])
            .args(["--suite", suite, "--test", &o.test, "--no-artifacts"])
            .arg("--out")
            .arg(o.out.join("repeat-out").join(tag))
            .args(extra);
        let log = logs.join(format!("{tag}.log"));
        let (secs, code, _) = timed(c, Duration::from_secs(3600), &log)?;
        if code != 0 {
            bail!("{tag}: exit {code}; log {}", log.display());
        }
        Ok(secs)
    };
    // Warm: the kernel and guest binaries in the cache for both sides.
    run(&[], "warm")?;
    let mut singles = Vec::new();
    for i in 0..o.times {
        singles.push(run(&[], &format!("single-{i}"))?);
    }
    let repeated = run(&["--repeat".into(), o.times.to_string()], "repeat")?;
    let total: f64 = singles.iter().sum();
    println!(
        "{} x `harness run --test {}` on {} ({}): {total:.1} s in all, median {:.2} s each",
        o.times,
        o.test,
        o.kernel,
        o.topology,
        median(&singles)
    );
    println!(
        "`harness run --repeat {}`: {repeated:.1} s ({:.2} s per iteration); {:.1}x faster than {} runs",
        o.times,
        repeated / o.times as f64,
        total / repeated.max(1e-9),
        o.times
    );
    Ok(())
}
