//! `cargo xtask soak --minutes M [--matrix FILE] [--out DIR]`: runs a
//! matrix again and again until M minutes are up (an iteration that has
//! started is finished), then counts per case how often it passed, failed,
//! failed as a known failure (xfail) and was skipped, from each run's
//! typed results file (`--json`, [`harness::results`]). A case that both
//! passed and failed is flaky.
//!
//! Default matrix: `harness/tests/fixtures/reliability/soak.yaml` (a
//! one-cell smoke matrix). The summary goes to stdout and to
//! `DIR/soak-summary.md` (default `target/soak`).

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    pass: u32,
    fail: u32,
    xfail: u32,
    skip: u32,
}

/// Adds one run's cases to the tallies (by `cell::case`); returns how
/// many failed (xfails are not failures).
fn tally(results: &harness::results::Results, tallies: &mut BTreeMap<String, Tally>) -> u32 {
    let mut failed = 0;
    for cell in &results.cells {
        for case in &cell.cases {
            let t = tallies
                .entry(format!("{}::{}", cell.name, case.name))
                .or_default();
            match case.status.as_str() {
                "pass" => t.pass += 1,
                "xfail" => t.xfail += 1,
                "skip" => t.skip += 1,
                _ => {
                    t.fail += 1;
                    failed += 1;
                }
            }
        }
    }
    failed
}

pub fn run(sh: &Shell, root: &Path, args: &[String]) -> Result<()> {
    let mut minutes: Option<f64> = None;
    let mut matrix = root.join("harness/tests/fixtures/reliability/soak.yaml");
    let mut out = root.join("target/soak");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--minutes" => minutes = Some(it.next().context("--minutes M")?.parse()?),
            "--matrix" => matrix = it.next().context("--matrix FILE")?.into(),
            "--out" => out = it.next().context("--out DIR")?.into(),
            other => bail!("soak: unknown argument {other:?}; usage: soak --minutes M [--matrix FILE] [--out DIR]"),
        }
    }
    let Some(minutes) = minutes else {
        bail!("soak: --minutes M is required (the soak is bounded in time)");
    };
    cmd!(sh, "cargo build --quiet --release --package harness").run()?;
    let bin = root.join("target/release/harness");
    let deadline = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let (mut iterations, mut errors) = (0u32, 0u32);
    let started = Instant::now();
    while Instant::now() < deadline {
        iterations += 1;
        let dir = out.join(format!("iter-{iterations}"));
        let _ = std::fs::remove_dir_all(&dir);
        let json = dir.join("results.json");
        let status = std::process::Command::new(&bin)
            .arg("matrix")
            .arg("--matrix")
            .arg(&matrix)
            .arg("--out")
            .arg(&dir)
            .arg("--json")
            .arg(&json)
            .stdout(std::process::Stdio::null())
            .status()
            .context("starting the harness")?;
        let results = match crate::bench::read_results(&json) {
            Ok(r) => r,
            Err(e) => {
                errors += 1;
                eprintln!("soak: iteration {iterations}: no results ({e:#}); {status}");
                continue;
            }
        };
        let failed = tally(&results, &mut tallies);
        eprintln!(
            "soak: iteration {iterations} done at {:.0} s: {failed} failed case(s) ({status})",
            started.elapsed().as_secs_f64()
        );
    }
    let flaky: Vec<_> = tallies
        .iter()
        .filter(|(_, t)| t.pass > 0 && t.fail > 0)
        .collect();
    let always_failing = tallies
        .values()
        .filter(|t| t.pass == 0 && t.fail > 0)
        .count();
    let mut md = format!(
        "# Soak summary\n\nmatrix: {}\niterations: {iterations} in {:.1} min ({errors} without results)\ncases: {}\nflaky (passed and failed): {}\nalways failing: {always_failing}\n",
        matrix.display(),
        started.elapsed().as_secs_f64() / 60.0,
        tallies.len(),
        flaky.len()
    );
    if !flaky.is_empty() {
        md.push_str("\n| case | pass | fail | xfail | skip |\n|---|---|---|---|---|\n");
        for (n, t) in &flaky {
            md.push_str(&format!(
                "| {n} | {} | {} | {} | {} |\n",
                t.pass, t.fail, t.xfail, t.skip
            ));
        }
    }
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("soak-summary.md"), &md)?;
    print!("{md}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::results::{Case, Cell, Results};

    fn case(name: &str, status: &str) -> Case {
        Case {
            name: name.into(),
            status: status.into(),
            ..Case::default()
        }
    }

    #[test]
    fn cases_are_tallied_by_cell_and_status() {
        let run = |statuses: [&str; 3]| Results {
            cells: vec![Cell {
                name: "k/t/s".into(),
                cases: vec![
                    case("a/x", statuses[0]),
                    case("a/y", statuses[1]),
                    case("a/z", statuses[2]),
                ],
                ..Cell::default()
            }],
            ..Results::default()
        };
        let mut t = BTreeMap::new();
        assert_eq!(tally(&run(["pass", "fail", "xfail"]), &mut t), 1);
        assert_eq!(tally(&run(["fail", "skip", "xfail"]), &mut t), 1);
        let x = t["k/t/s::a/x"];
        assert_eq!((x.pass, x.fail, x.xfail, x.skip), (1, 1, 0, 0));
        let y = t["k/t/s::a/y"];
        assert_eq!((y.pass, y.fail, y.xfail, y.skip), (0, 1, 0, 1));
        let z = t["k/t/s::a/z"];
        assert_eq!((z.pass, z.fail, z.xfail, z.skip), (0, 0, 2, 0));
    }
}
