//! `cargo xtask fuzz [--seconds N] [--seed S]`: stable-Rust mutation
//! fuzzing of the guest-output parsers (no cargo-fuzz: that needs nightly).
//!
//! Takes the corpus in `harness/tests/fuzz-corpus/{ktap,console}`, mutates
//! entries with `harness::fuzz::mutate` (byte flips, splices, line
//! duplication, deep nesting, hostile tokens) and runs each result through
//! `ktap::parse` or `console::scan`, then the verdict and the JUnit writer
//! (`harness::fuzz::check_*`): no panic, bounded output, JUnit that parses
//! as XML, no input taking more than 5 s. A failing input is saved under
//! `harness/tests/fuzz-corpus/<kind>/crash-<hash>` (replayed by `cargo
//! test` from then on) and the command fails.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

type Oracle = fn(&[u8]) -> Result<(), String>;

/// One input (at most `harness::fuzz::MAX_INPUT` bytes) taking longer
/// than this is reported as a finding.
const SLOW: Duration = Duration::from_secs(5);

const KINDS: &[(&str, Oracle)] = &[
    ("ktap", harness::fuzz::check_ktap),
    ("console", harness::fuzz::check_console),
];

/// Builds xtask with the `fuzz` profile (optimised, unwinding, overflow
/// checks) and runs the fuzz loop in it.
pub fn run(sh: &xshell::Shell, root: &Path, args: &[String]) -> Result<()> {
    xshell::cmd!(sh, "cargo build --quiet --profile fuzz --package xtask").run()?;
    let bin = root.join("target/fuzz/xtask");
    let st = std::process::Command::new(&bin)
        .arg("fuzz-loop")
        .args(args)
        .status()
        .with_context(|| format!("starting {}", bin.display()))?;
    if !st.success() {
        bail!("fuzzing failed ({st})");
    }
    Ok(())
}

/// The fuzz loop itself (`xtask fuzz-loop`, run by [`run`]).
pub fn fuzz_loop(root: &Path, args: &[String]) -> Result<()> {
    let mut seconds = 60u64;
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => seconds = it.next().context("--seconds N")?.parse()?,
            "--seed" => seed = it.next().context("--seed S")?.parse()?,
            other => {
                bail!("fuzz: unknown argument {other:?}; usage: fuzz [--seconds N] [--seed S]")
            }
        }
    }
    let corpus_dir = root.join("harness/tests/fuzz-corpus");
    let mut corpora = Vec::new();
    for (kind, oracle) in KINDS {
        let dir = corpus_dir.join(kind);
        let inputs = load(&dir)?;
        if inputs.is_empty() {
            bail!("empty corpus {}", dir.display());
        }
        corpora.push((*kind, *oracle, dir, inputs));
    }
    // Panics are findings: keep them quiet, count them.
    std::panic::set_hook(Box::new(|_| {}));
    println!("fuzz: seed {seed}, {seconds} s");
    let mut rng = harness::fuzz::Rng::new(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut execs, mut crashes) = (0u64, Vec::new());
    let mut per_kind = vec![0u64; corpora.len()];
    while Instant::now() < deadline {
        let k = rng.below(corpora.len());
        let (kind, oracle, dir, inputs) = &corpora[k];
        let a = &inputs[rng.below(inputs.len())].1;
        let b = &inputs[rng.below(inputs.len())].1;
        let input = harness::fuzz::mutate(&mut rng, a, b);
        execs += 1;
        per_kind[k] += 1;
        let t = Instant::now();
        let verdict = std::panic::catch_unwind(|| oracle(&input));
        let took = t.elapsed();
        let why = match verdict {
            // Work that grows faster than the input is a finding too (a
            // guest must not be able to stall the harness).
            Ok(Ok(())) if took > SLOW => format!("slow: {took:?} for {} bytes", input.len()),
            Ok(Ok(())) => continue,
            Ok(Err(v)) => v,
            Err(p) => format!(
                "panic: {}",
                p.downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| p.downcast_ref::<&str>().copied())
                    .unwrap_or("?")
            ),
        };
        let name = format!("crash-{:016x}", fnv(&input));
        let path = dir.join(&name);
        std::fs::write(&path, &input).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("fuzz: {kind}: {why}; input saved as {}", path.display());
        crashes.push((kind.to_string(), why, path));
        if crashes.len() >= 10 {
            break;
        }
    }
    let _ = std::panic::take_hook();
    let per: Vec<String> = corpora
        .iter()
        .zip(&per_kind)
        .map(|((k, _, _, i), n)| format!("{k}: {n} executions from {} seeds", i.len()))
        .collect();
    println!(
        "fuzz: {execs} executions in {seconds} s ({}), {} failing inputs",
        per.join(", "),
        crashes.len()
    );
    if !crashes.is_empty() {
        bail!("{} failing inputs (saved in the corpus)", crashes.len());
    }
    Ok(())
}

fn load(dir: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.is_file() {
            let b = std::fs::read(&p)?;
            v.push((p, b));
        }
    }
    v.sort();
    Ok(v)
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}
