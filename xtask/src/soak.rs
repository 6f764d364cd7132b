//! `cargo xtask soak --minutes M [--matrix FILE] [--out DIR]`: runs a
//! matrix again and again until M minutes are up (an iteration that has
//! started is finished), then counts per case how often it passed, failed
//! and was skipped. A case that both passed and failed is flaky.
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
    skip: u32,
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
        let status = std::process::Command::new(&bin)
            .arg("matrix")
            .arg("--matrix")
            .arg(&matrix)
            .arg("--out")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .status()
            .context("starting the harness")?;
        let xml = match std::fs::read_to_string(dir.join("junit.xml")) {
            Ok(x) => x,
            Err(e) => {
                errors += 1;
                eprintln!("soak: iteration {iterations}: no report ({e}); {status}");
                continue;
            }
        };
        let doc = roxmltree::Document::parse(&xml).context("the matrix JUnit")?;
        let mut failed = 0;
        for tc in doc.descendants().filter(|n| n.has_tag_name("testcase")) {
            let suite = tc.attribute("classname").unwrap_or("");
            let name = format!("{suite}::{}", tc.attribute("name").unwrap_or(""));
            let t = tallies.entry(name).or_default();
            if tc
                .children()
                .any(|c| c.has_tag_name("failure") || c.has_tag_name("error"))
            {
                t.fail += 1;
                failed += 1;
            } else if tc.children().any(|c| c.has_tag_name("skipped")) {
                t.skip += 1;
            } else {
                t.pass += 1;
            }
        }
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
        "# Soak summary\n\nmatrix: {}\niterations: {iterations} in {:.1} min ({errors} without a report)\ncases: {}\nflaky (passed and failed): {}\nalways failing: {always_failing}\n",
        matrix.display(),
        started.elapsed().as_secs_f64() / 60.0,
        tallies.len(),
        flaky.len()
    );
    if !flaky.is_empty() {
        md.push_str("\n| case | pass | fail | skip |\n|---|---|---|---|\n");
        for (n, t) in &flaky {
            md.push_str(&format!("| {n} | {} | {} | {} |\n", t.pass, t.fail, t.skip));
        }
    }
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("soak-summary.md"), &md)?;
    print!("{md}");
    Ok(())
}
