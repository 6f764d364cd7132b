//! `cargo xtask replay [--only NN,...] [--topology T,...] [--json FILE]
//! [--suite S,...] [--out DIR] [--list] [--dry-run] [--keep-work]`: the futex suite against real
//! upstream futex bugs (docs/replay.md).
//!
//! Each directory `kernels/replay/NN-slug/` holds a patch that reverts one
//! upstream futex fix on 7.3.4. For the selected replays this writes a
//! kernels directory of its own under `--out` (the repository's `kernels/`
//! plus, per replay, `patches/replay-NN-slug/` and a definition
//! `source-7.3-replay-NN-slug.yaml` that `extends: "7.3"` with that one
//! patch), and one matrix: the stock `source:7.3` (named `source-7.3`, so
//! `matrix.yaml`'s known failures for `source-7.3*` apply to every kernel
//! alike) and every replay, on the topologies asked for (`2n2c` by
//! default, as `matrix.yaml` defines it), with `matrix.yaml`'s `futex`
//! suite (read with `serde_yaml_ng`, the parser the harness uses). Each
//! replay's image is built first, one at a time, and its work tree removed
//! once the image is cached (unless `--keep-work`); then `harness matrix`
//! runs the matrix (its own scheduler and cache); its JSON results are read
//! back through `harness::results`.
//!
//! A replay is killed when a case fails on it and passes (or is an
//! expected failure, or does not exist) on the stock kernel in the same
//! topology; it survives
//! when no case does. Exit status: 0 when the matrix ran (a survivor is a
//! result), 2 for a bad command line (an unknown replay), 69 when the run
//! could not give results (the harness's infrastructure status, a stock
//! cell without results), 130 when interrupted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use harness::error::exit;
use harness::results::{Cell, Results};
use serde_yaml_ng::{Mapping, Value};
use std::fmt::Write as _;
use xshell::{cmd, Shell};

/// The stock kernel's name in the generated matrix.
pub const STOCK: &str = "source-7.3";

/// One replay: a directory of `kernels/replay/`.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// `NN`, the directory's number.
    pub nn: String,
    /// `NN-slug`, the directory's name.
    pub dir_name: String,
    /// The upstream commit id the patch reverts (`Replays:`).
    pub id: String,
    /// Its title.
    pub title: String,
    /// `Effect:` of the patch header.
    pub effect: String,
    /// `A test must observe:` of the patch header.
    pub observe: String,
    /// The patch files, sorted.
    pub patches: Vec<PathBuf>,
}

impl Replay {
    /// The kernel (and definition) name in the generated matrix.
    pub fn kernel(&self) -> String {
        format!("{STOCK}-replay-{}", self.dir_name)
    }
}

/// The header fields of a replay patch; `None` for a missing field.
fn parse_header(text: &str) -> Option<(String, String, String, String)> {
    let field = |key: &str| {
        text.lines()
            .take_while(|l| !l.starts_with("diff --git") && *l != "---")
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
    };
    let replays = field("Replays:")?;
    let (id, rest) = replays.split_once(' ')?;
    let title = rest
        .trim()
        .strip_prefix("(\"")?
        .strip_suffix("\")")?
        .to_string();
    Some((
        id.to_string(),
        title,
        field("Effect:")?,
        field("A test must observe:")?,
    ))
}

/// Every replay under `dir` (`kernels/replay`), by number.
pub fn discover(dir: &Path) -> Result<Vec<Replay>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = e?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(String::from) else {
            continue;
        };
        let Some((nn, _)) = name.split_once('-') else {
            continue;
        };
        if !path.is_dir() || nn.is_empty() || !nn.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let mut patches: Vec<PathBuf> = std::fs::read_dir(&path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "patch"))
            .collect();
        patches.sort();
        let Some(first) = patches.first() else {
            bail!("{}: no *.patch", path.display());
        };
        let text = std::fs::read_to_string(first)?;
        let Some((id, title, effect, observe)) = parse_header(&text) else {
            bail!(
                "{}: the header needs `Replays: <id> (\"<title>\")`, `Effect:` and `A test must observe:`",
                first.display()
            );
        };
        out.push(Replay {
            nn: nn.to_string(),
            dir_name: name,
            id,
            title,
            effect,
            observe,
            patches,
        });
    }
    out.sort_by(|a, b| a.nn.cmp(&b.nn));
    Ok(out)
}

/// The replays `only` names (`NN` or `NN-slug`), in the set's order; an
/// unknown one is the user's error.
pub fn select<'a>(all: &'a [Replay], only: &[String]) -> Result<Vec<&'a Replay>, String> {
    if only.is_empty() {
        return Ok(all.iter().collect());
    }
    for o in only {
        if !all.iter().any(|r| &r.nn == o || &r.dir_name == o) {
            let known: Vec<&str> = all.iter().map(|r| r.nn.as_str()).collect();
            return Err(format!(
                "replay: no replay {o:?} in kernels/replay (known: {})",
                known.join(", ")
            ));
        }
    }
    Ok(all
        .iter()
        .filter(|r| only.iter().any(|o| o == &r.nn || o == &r.dir_name))
        .collect())
}

/// The entry `- name: NAME` of the top-level list `section` of a matrix
/// document.
pub fn named<'a>(doc: &'a Value, section: &str, name: &str) -> Option<&'a Value> {
    doc.get(section)?
        .as_sequence()?
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
}

/// `suite` (a suite entry of `matrix.yaml`) with each known failure's
/// `kernel:` patterns cut to those that match one of `kernels`, and the
/// entries none of whose patterns does left out: the matrix refuses a
/// pattern that matches no kernel of the file. An entry without `kernel:`
/// applies to every kernel and stays.
pub fn scope_known_failures(suite: &mut Value, kernels: &[String]) {
    let matches = |p: &Value| {
        p.as_str()
            .is_some_and(|p| kernels.iter().any(|k| harness::glob::matches(p, k)))
    };
    let Some(list) = suite
        .get_mut("known_failures")
        .and_then(Value::as_sequence_mut)
    else {
        return;
    };
    list.retain_mut(|entry| match entry.get_mut("kernel") {
        None => true,
        Some(Value::Sequence(patterns)) => {
            patterns.retain(matches);
            !patterns.is_empty()
        }
        Some(one) => matches(one),
    });
}

/// The generated matrix: the stock kernel and `replays` with `features`,
/// the `topologies` and the `suites` taken from `matrix.yaml`.
pub fn matrix_text(
    replays: &[&Replay],
    features: &Value,
    topologies: Vec<Value>,
    suites: Vec<Value>,
) -> Result<String> {
    let kernel = |name: &str, spec: &str| {
        let mut k = Mapping::new();
        k.insert("name".into(), name.into());
        k.insert("spec".into(), spec.into());
        k.insert("features".into(), features.clone());
        Value::Mapping(k)
    };
    let kernels: Vec<Value> = std::iter::once(kernel(STOCK, "source:7.3"))
        .chain(replays.iter().map(|r| {
            let k = r.kernel();
            kernel(&k, &format!("source:{k}"))
        }))
        .collect();
    let mut doc = Mapping::new();
    doc.insert("kernels".into(), Value::Sequence(kernels));
    doc.insert("topologies".into(), Value::Sequence(topologies));
    doc.insert("suites".into(), Value::Sequence(suites));
    Ok(format!(
        "# Generated by `cargo xtask replay` (docs/replay.md): the stock 7.3 and\n\
         # each replay, the futex suite of matrix.yaml.\n{}",
        serde_yaml_ng::to_string(&Value::Mapping(doc))?
    ))
}

/// A replay's definition, extending the stock one with its patch directory.
pub fn definition_text(r: &Replay) -> String {
    format!(
        "# Generated by `cargo xtask replay` from kernels/replay/{dir}/.\n\
         extends: \"7.3\"\n\
         description: \"7.3 with {id} reverted (replay {nn}: {title})\"\n\
         patches:\n  - replay-{dir}\n",
        dir = r.dir_name,
        id = r.id,
        nn = r.nn,
        title = r.title.replace('"', "'"),
    )
}

/// What the matrix says of one replay.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The cases that fail on the replay and pass, xfail or do not exist on
    /// stock.
    Killed(Vec<Kill>),
    /// Every case that fails on the replay fails on stock too, or none fails.
    Survived,
    /// No comparison: a cell of the replay or of stock gave no results.
    Error(String),
}

/// One killing case.
#[derive(Debug, Clone, PartialEq)]
pub struct Kill {
    /// The topology of the cell it failed in.
    pub topology: String,
    /// `binary/case`.
    pub case: String,
    /// Its failure message on the replay.
    pub message: String,
}

/// Whether a cell has results to compare (it ran to a verdict).
fn has_results(c: &Cell) -> bool {
    matches!(c.status.as_str(), "passed" | "failed") && !c.cases.is_empty()
}

/// The kill decision for one topology: the cases failing on `replay` that
/// pass or xfail on `stock`, or that stock does not have at all (a kernel
/// report case such as `futex-numa/kernel-bug` exists only in a cell whose
/// kernel printed one).
pub fn kills(stock: &Cell, replay: &Cell) -> Vec<Kill> {
    let on_stock: BTreeMap<&str, &str> = stock
        .cases
        .iter()
        .map(|c| (c.name.as_str(), c.status.as_str()))
        .collect();
    replay
        .cases
        .iter()
        .filter(|c| c.status == "fail")
        .filter(|c| {
            matches!(
                on_stock.get(c.name.as_str()),
                None | Some(&"pass") | Some(&"xfail")
            )
        })
        .map(|c| Kill {
            topology: replay.topology.clone(),
            case: c.name.clone(),
            message: c.message.clone().unwrap_or_default(),
        })
        .collect()
}

/// The outcome of `kernel` over every topology of `results`.
pub fn outcome(results: &Results, kernel: &str) -> Outcome {
    let mut found = false;
    let mut all = Vec::new();
    for cell in results.cells.iter().filter(|c| c.kernel_name == kernel) {
        found = true;
        let Some(stock) = results.cells.iter().find(|c| {
            c.kernel_name == STOCK && c.topology == cell.topology && c.suite == cell.suite
        }) else {
            return Outcome::Error(format!("no stock cell for {}", cell.topology));
        };
        for (label, c) in [("stock ", stock), ("", cell)] {
            if !has_results(c) {
                let why = c.error.clone().unwrap_or_default();
                return Outcome::Error(format!("{label}{} {}: {why}", c.topology, c.status));
            }
        }
        all.extend(kills(stock, cell));
    }
    if !found {
        return Outcome::Error("no cell in the results".into());
    }
    if all.is_empty() {
        Outcome::Survived
    } else {
        Outcome::Killed(all)
    }
}

/// The terminal table: one line per replay, then each killing case.
pub fn table(rows: &[(&Replay, Outcome)]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<4} {:<13} {:<18} {:<9} killing case(s) / why",
        "NN", "upstream", "effect", "result"
    );
    for (r, o) in rows {
        let (word, detail) = match o {
            Outcome::Killed(k) => (
                "killed",
                k.iter()
                    .map(|k| format!("{} ({})", k.case, k.topology))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Outcome::Survived => ("survived", String::new()),
            Outcome::Error(e) => ("error", e.clone()),
        };
        let _ = writeln!(
            t,
            "{:<4} {:<13} {:<18} {:<9} {}",
            r.nn, r.id, r.effect, word, detail
        );
    }
    let killed = rows
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Killed(_)))
        .count();
    let errors = rows
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Error(_)))
        .count();
    let _ = writeln!(
        t,
        "killed {killed} of {} ({errors} without a result)",
        rows.len()
    );
    t
}

/// The JSON report.
pub fn json(rows: &[(&Replay, Outcome)], wall_s: f64) -> serde_json::Value {
    let replays: Vec<serde_json::Value> = rows
        .iter()
        .map(|(r, o)| {
            let (word, kills, error) = match o {
                Outcome::Killed(k) => ("killed", k.clone(), None),
                Outcome::Survived => ("survived", Vec::new(), None),
                Outcome::Error(e) => ("error", Vec::new(), Some(e.clone())),
            };
            serde_json::json!({
                "nn": r.nn,
                "replay": r.dir_name,
                "kernel": r.kernel(),
                "upstream": r.id,
                "title": r.title,
                "effect": r.effect,
                "observe": r.observe,
                "result": word,
                "killing": kills.iter().map(|k| serde_json::json!({
                    "topology": k.topology, "case": k.case, "message": k.message,
                })).collect::<Vec<_>>(),
                "error": error,
            })
        })
        .collect();
    serde_json::json!({
        "killed": rows.iter().filter(|(_, o)| matches!(o, Outcome::Killed(_))).count(),
        "total": rows.len(),
        "wall_s": wall_s,
        "replays": replays,
    })
}

/// Parsed command line.
#[derive(Debug, Default, PartialEq)]
struct Args {
    only: Vec<String>,
    topologies: Vec<String>,
    suites: Vec<String>,
    json: Option<PathBuf>,
    out: Option<PathBuf>,
    list: bool,
    dry_run: bool,
    keep_work: bool,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.iter();
    let list = |v: Option<&String>, flag: &str| -> Result<Vec<String>, String> {
        let v = v.ok_or(format!("replay: {flag} needs a value"))?;
        Ok(v.split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect())
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--only" => a.only.extend(list(it.next(), "--only")?),
            "--topology" => a.topologies.extend(list(it.next(), "--topology")?),
            "--suite" => a.suites.extend(list(it.next(), "--suite")?),
            "--json" => a.json = Some(it.next().ok_or("replay: --json needs a file")?.into()),
            "--out" => a.out = Some(it.next().ok_or("replay: --out needs a directory")?.into()),
            "--list" => a.list = true,
            "--dry-run" => a.dry_run = true,
            "--keep-work" => a.keep_work = true,
            other => {
                return Err(format!(
                    "replay: unknown argument {other:?} (known: --only NN,..., --topology T,..., --suite S,..., --json FILE, --out DIR, --list, --dry-run, --keep-work)"
                ))
            }
        }
    }
    if a.topologies.is_empty() {
        a.topologies.push("2n2c".into());
    }
    if a.suites.is_empty() {
        a.suites.push("futex".into());
    }
    Ok(a)
}

/// Copies `from` into `to` recursively (the kernels tree is small).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

/// Writes the kernels directory and the matrix under `out`; returns the
/// matrix file.
fn write_inputs(
    root: &Path,
    out: &Path,
    replays: &[&Replay],
    topologies: &[String],
    suites: &[String],
) -> Result<PathBuf> {
    let path = root.join("matrix.yaml");
    let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path)?)
        .with_context(|| format!("parsing {}", path.display()))?;
    let features = named(&doc, "kernels", STOCK)
        .and_then(|k| k.get("features"))
        .context("matrix.yaml has no source-7.3 kernel with features")?;
    let mut topo = Vec::new();
    for t in topologies {
        topo.push(
            named(&doc, "topologies", t)
                .cloned()
                .with_context(|| format!("replay: no topology {t:?} in matrix.yaml"))?,
        );
    }
    let names: Vec<String> = std::iter::once(STOCK.to_string())
        .chain(replays.iter().map(|r| r.kernel()))
        .collect();
    let mut chosen = Vec::new();
    for s in suites {
        let mut suite = named(&doc, "suites", s)
            .cloned()
            .with_context(|| format!("replay: no suite {s:?} in matrix.yaml"))?;
        scope_known_failures(&mut suite, &names);
        chosen.push(suite);
    }

    let kernels = out.join("kernels");
    let _ = std::fs::remove_dir_all(&kernels);
    std::fs::create_dir_all(&kernels)?;
    for e in std::fs::read_dir(root.join("kernels"))? {
        let e = e?;
        let name = e.file_name();
        if name == "replay" {
            continue;
        }
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &kernels.join(&name))?;
        } else {
            std::fs::copy(e.path(), kernels.join(&name))?;
        }
    }
    for r in replays {
        let pdir = kernels
            .join("patches")
            .join(format!("replay-{}", r.dir_name));
        std::fs::create_dir_all(&pdir)?;
        for p in &r.patches {
            std::fs::copy(p, pdir.join(p.file_name().unwrap_or_default()))?;
        }
        std::fs::write(
            kernels.join(format!("{}.yaml", r.kernel())),
            definition_text(r),
        )?;
    }
    let matrix = out.join("matrix.yaml");
    std::fs::write(&matrix, matrix_text(replays, features, topo, chosen)?)?;
    Ok(matrix)
}

/// Builds each replay's image (`harness kernel build`), one at a time, and
/// unless `keep_work` removes its work tree (`harness kernel clean`: about
/// 2 GB of sources and objects each, 40 GB for the set) once the image is
/// cached; the matrix then finds every image in the cache. A build that
/// fails is left to the matrix, which reports the replay's cells as not
/// run. Returns an exit status when interrupted.
fn build_images(
    bin: &Path,
    kernels: &Path,
    replays: &[&Replay],
    keep_work: bool,
) -> Result<Option<i32>> {
    let harness = |args: &[&str]| {
        std::process::Command::new(bin)
            .env("HARNESS_KERNELS_DIR", kernels)
            .args(args)
            .status()
            .context("starting the harness")
    };
    for (i, r) in replays.iter().enumerate() {
        let k = r.kernel();
        eprintln!("replay: image {} of {}: {k}", i + 1, replays.len());
        match harness(&["kernel", "build", &k])?.code() {
            Some(0) => {}
            Some(130) => return Ok(Some(exit::INTERRUPTED.into())),
            other => eprintln!("replay: building {k} ended with {other:?}; the matrix reports it"),
        }
        if !keep_work && harness(&["kernel", "clean", &k])?.code() == Some(130) {
            return Ok(Some(exit::INTERRUPTED.into()));
        }
    }
    Ok(None)
}

/// `cargo xtask replay ...`; returns the exit status.
pub fn run(sh: &Shell, root: &Path, args: &[String]) -> Result<i32> {
    let a = match parse_args(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return Ok(exit::USAGE.into());
        }
    };
    let all = discover(&root.join("kernels/replay"))?;
    let selected = match select(&all, &a.only) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return Ok(exit::USAGE.into());
        }
    };
    if a.list {
        for r in &selected {
            println!("{:<4} {:<13} {:<18} {}", r.nn, r.id, r.effect, r.title);
        }
        return Ok(exit::OK.into());
    }
    let out = a.out.clone().unwrap_or_else(|| root.join("target/replay"));
    let matrix = match write_inputs(root, &out, &selected, &a.topologies, &a.suites) {
        Ok(m) => m,
        Err(e) if e.to_string().starts_with("replay:") => {
            eprintln!("{e}");
            return Ok(exit::USAGE.into());
        }
        Err(e) => return Err(e),
    };
    let kernels = out.join("kernels");
    cmd!(sh, "cargo build --quiet --release --package harness").run()?;
    let bin = root.join("target/release/harness");
    if a.dry_run {
        println!("{}", std::fs::read_to_string(&matrix)?);
        println!(
            "HARNESS_KERNELS_DIR={} {} matrix --matrix {} --out {}",
            kernels.display(),
            bin.display(),
            matrix.display(),
            out.join("matrix").display()
        );
        let status = std::process::Command::new(&bin)
            .env("HARNESS_KERNELS_DIR", &kernels)
            .args(["matrix", "--list", "--matrix"])
            .arg(&matrix)
            .status()
            .context("starting the harness")?;
        return Ok(if status.success() {
            0
        } else {
            exit::INFRASTRUCTURE.into()
        });
    }
    let started = Instant::now();
    if let Some(code) = build_images(&bin, &kernels, &selected, a.keep_work)? {
        return Ok(code);
    }
    let results_file = out.join("results.json");
    let _ = std::fs::remove_file(&results_file);
    let status = std::process::Command::new(&bin)
        .env("HARNESS_KERNELS_DIR", &kernels)
        .arg("matrix")
        .arg("--matrix")
        .arg(&matrix)
        .arg("--out")
        .arg(out.join("matrix"))
        .arg("--json")
        .arg(&results_file)
        .status()
        .context("starting the harness")?;
    let wall = started.elapsed().as_secs_f64();
    match status.code() {
        Some(0) | Some(1) => {}
        Some(130) => return Ok(exit::INTERRUPTED.into()),
        other => {
            eprintln!("replay: harness matrix ended with {other:?}: no comparison");
            return Ok(exit::INFRASTRUCTURE.into());
        }
    }
    let results = crate::bench::read_results(&results_file)?;
    let rows: Vec<(&Replay, Outcome)> = selected
        .iter()
        .map(|r| (*r, outcome(&results, &r.kernel())))
        .collect();
    print!("{}", table(&rows));
    println!("wall time {wall:.0} s");
    if let Some(j) = &a.json {
        let text = serde_json::to_string_pretty(&json(&rows, wall))?;
        std::fs::write(j, text + "\n").with_context(|| format!("writing {}", j.display()))?;
    }
    if rows.iter().all(|(_, o)| matches!(o, Outcome::Error(_))) {
        return Ok(exit::INFRASTRUCTURE.into());
    }
    Ok(exit::OK.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::results::Case;

    type Cases<'a> = &'a [(&'a str, &'a str)];

    fn cell(kernel: &str, topology: &str, status: &str, cases: Cases) -> Cell {
        Cell {
            name: format!("{kernel}/{topology}/futex"),
            kernel_name: kernel.into(),
            topology: topology.into(),
            suite: "futex".into(),
            status: status.into(),
            cases: cases
                .iter()
                .map(|&(name, s)| Case {
                    name: name.into(),
                    status: s.into(),
                    message: (s != "pass").then(|| format!("{name} said no")),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn replay(nn: &str) -> Replay {
        Replay {
            nn: nn.into(),
            dir_name: format!("{nn}-x"),
            id: "0123456789ab".into(),
            title: "futex: Fix x".into(),
            effect: "hang".into(),
            observe: "a wake".into(),
            patches: vec![],
        }
    }

    #[test]
    fn a_case_kills_when_stock_passes_xfails_or_lacks_it() {
        let stock = cell(
            STOCK,
            "2n2c",
            "failed",
            &[
                ("a/p", "pass"),
                ("a/x", "xfail"),
                ("a/f", "fail"),
                ("a/s", "skip"),
            ],
        );
        let r = cell(
            "k",
            "2n2c",
            "failed",
            &[
                ("a/p", "fail"),
                ("a/x", "fail"),
                ("a/f", "fail"),
                ("a/s", "fail"),
                ("a/new", "fail"),
            ],
        );
        let k: Vec<String> = kills(&stock, &r).into_iter().map(|k| k.case).collect();
        assert_eq!(k, ["a/p", "a/x", "a/new"]);
        let same = cell("k", "2n2c", "passed", &[("a/p", "pass")]);
        assert!(kills(&stock, &same).is_empty());
    }

    #[test]
    fn outcome_over_topologies_and_errors() {
        let r = replay("01");
        let k = r.kernel();
        let results = |rc: Vec<Cell>| Results {
            cells: [
                vec![
                    cell(STOCK, "2n2c", "passed", &[("a/p", "pass")]),
                    cell(STOCK, "2n4c", "passed", &[("a/p", "pass")]),
                ],
                rc,
            ]
            .concat(),
            ..Default::default()
        };
        let killed = results(vec![
            cell(&k, "2n2c", "passed", &[("a/p", "pass")]),
            cell(&k, "2n4c", "failed", &[("a/p", "fail")]),
        ]);
        match outcome(&killed, &k) {
            Outcome::Killed(v) => assert_eq!(
                (v[0].topology.as_str(), v[0].case.as_str()),
                ("2n4c", "a/p")
            ),
            o => panic!("{o:?}"),
        }
        let survived = results(vec![cell(&k, "2n2c", "passed", &[("a/p", "pass")])]);
        assert_eq!(outcome(&survived, &k), Outcome::Survived);
        let broken = results(vec![cell(&k, "2n2c", "error", &[])]);
        assert!(matches!(outcome(&broken, &k), Outcome::Error(_)));
        assert!(matches!(outcome(&results(vec![]), &k), Outcome::Error(_)));
    }

    #[test]
    fn table_and_json_name_the_killing_case() {
        let (a, b, c) = (replay("01"), replay("02"), replay("03"));
        let kill = Kill {
            topology: "2n2c".into(),
            case: "futex-ops/x".into(),
            message: "m".into(),
        };
        let rows = vec![
            (&a, Outcome::Killed(vec![kill])),
            (&b, Outcome::Survived),
            (&c, Outcome::Error("2n2c error: build".into())),
        ];
        let t = table(&rows);
        assert!(
            t.contains("01   0123456789ab  hang               killed    futex-ops/x (2n2c)"),
            "{t}"
        );
        assert!(t.contains("survived") && t.contains("2n2c error: build"));
        assert!(t.ends_with("killed 1 of 3 (1 without a result)\n"), "{t}");
        let j = json(&rows, 12.0);
        assert_eq!(j["killed"], 1);
        assert_eq!(j["replays"][0]["killing"][0]["case"], "futex-ops/x");
        assert_eq!(j["replays"][1]["result"], "survived");
        assert_eq!(j["replays"][2]["error"], "2n2c error: build");
    }

    #[test]
    fn headers_parse_and_selection_refuses_unknown_ids() {
        let text = "Replays: ca16d5bee598 (\"futex: Prevent robust futex exit race\")\nUpstream: first released in v5.5\nEffect: hang\nA test must observe: a wake\n\n---\ndiff --git a/x b/x\n";
        let (id, title, effect, observe) = parse_header(text).unwrap();
        assert_eq!(
            (
                id.as_str(),
                title.as_str(),
                effect.as_str(),
                observe.as_str()
            ),
            (
                "ca16d5bee598",
                "futex: Prevent robust futex exit race",
                "hang",
                "a wake"
            )
        );
        assert!(parse_header("Effect: hang\n").is_none());
        let all = vec![replay("01"), replay("02")];
        assert_eq!(select(&all, &["02".into()]).unwrap()[0].nn, "02");
        assert_eq!(select(&all, &["01-x".into()]).unwrap()[0].nn, "01");
        assert_eq!(select(&all, &[]).unwrap().len(), 2);
        let e = select(&all, &["7".into()]).unwrap_err();
        assert!(e.contains("\"7\"") && e.contains("01, 02"), "{e}");
    }

    #[test]
    fn args() {
        let a = parse_args(&[
            "--only".into(),
            "01,03".into(),
            "--json".into(),
            "r.json".into(),
        ])
        .unwrap();
        assert_eq!(a.only, ["01", "03"]);
        assert_eq!(a.topologies, ["2n2c"]);
        assert_eq!(a.json, Some(PathBuf::from("r.json")));
        assert!(parse_args(&["--bogus".into()])
            .unwrap_err()
            .contains("--bogus"));
        assert!(parse_args(&["--only".into()]).is_err());
        assert_eq!(a.suites, ["futex"]);
        assert!(!a.keep_work);
        let b = parse_args(&[
            "--suite".into(),
            "futex,kselftest-futex".into(),
            "--keep-work".into(),
        ])
        .unwrap();
        assert_eq!(b.suites, ["futex", "kselftest-futex"]);
        assert!(b.keep_work);
        let e = parse_args(&["--nope".into()]).unwrap_err();
        assert!(e.contains("--suite S") && e.contains("--keep-work"), "{e}");
    }

    #[test]
    fn entries_are_taken_from_the_matrix_file() {
        let m = "kernels:\n  - name: source-7.3           # stock\n    spec: source:7.3\n    features: {prctl: true}\n  - name: other\n    spec: x\n\ntopologies:\n  - name: 2n2c\n    nodes:\n      - {cpus: 2, mem: 512M}\n\n  - name: 2n4c\n    nodes: []\nsuites:\n  - name: smoke\n    builtin: smoke\n  - name: futex\n    builtin: futex\n    known_failures:\n      - case: a/b\n";
        let doc: Value = serde_yaml_ng::from_str(m).unwrap();
        let features = named(&doc, "kernels", STOCK)
            .unwrap()
            .get("features")
            .unwrap();
        let topology = named(&doc, "topologies", "2n2c").unwrap().clone();
        let suite = named(&doc, "suites", "futex").unwrap().clone();
        assert!(named(&doc, "suites", "nope").is_none());
        let r = replay("01");
        let text = matrix_text(&[&r], features, vec![topology], vec![suite]).unwrap();
        let back: Value = serde_yaml_ng::from_str(&text).unwrap();
        let k = named(&back, "kernels", "source-7.3-replay-01-x").unwrap();
        assert_eq!(
            k.get("spec").unwrap().as_str(),
            Some("source:source-7.3-replay-01-x")
        );
        assert_eq!(k.get("features"), Some(features));
        assert_eq!(
            named(&back, "kernels", STOCK)
                .unwrap()
                .get("spec")
                .unwrap()
                .as_str(),
            Some("source:7.3")
        );
        assert_eq!(
            back.get("topologies").unwrap().as_sequence().unwrap().len(),
            1
        );
        assert!(named(&back, "topologies", "2n2c").is_some());
        assert!(named(&back, "suites", "futex")
            .unwrap()
            .get("known_failures")
            .is_some());
        assert!(named(&back, "suites", "smoke").is_none());
        assert!(
            definition_text(&r).contains("extends: \"7.3\"\n")
                && definition_text(&r).contains("  - replay-01-x\n")
        );
    }

    #[test]
    fn known_failures_keep_only_patterns_of_this_matrix() {
        let suite = "name: futex\nbuiltin: futex\nknown_failures:\n  - case: a/debug\n    # seen once\n    kernel: [source-7.3-debug]\n    reason: r\n  - case: a/race\n    kernel: [debian-7.3, \"source-7.3*\"]\n    reason: r\n  - case: a/one\n    kernel: debian-7.3\n  - case: a/any\n    reason: r\n";
        let mut suite: Value = serde_yaml_ng::from_str(suite).unwrap();
        let names = vec![STOCK.to_string(), "source-7.3-replay-01-x".to_string()];
        scope_known_failures(&mut suite, &names);
        let want: Value = serde_yaml_ng::from_str("name: futex\nbuiltin: futex\nknown_failures:\n  - case: a/race\n    kernel: [\"source-7.3*\"]\n    reason: r\n  - case: a/any\n    reason: r\n").unwrap();
        assert_eq!(suite, want);
    }

    #[test]
    fn the_generated_matrix_of_the_shipped_files_is_valid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = std::env::temp_dir().join(format!("replay-inputs-{}", std::process::id()));
        // Without replays: their definitions exist only in the generated
        // kernels directory, and the matrix looks them up in the
        // repository's (the environment variable is not for a test to set).
        let matrix = write_inputs(
            &root,
            &out,
            &[],
            &["2n2c".into(), "2n4c".into()],
            &["futex".into(), "kselftest-futex".into()],
        )
        .unwrap();
        let text = std::fs::read_to_string(&matrix).unwrap();
        let parsed = harness::matrix::parse_str(&text, &matrix);
        let _ = std::fs::remove_dir_all(&out);
        let m = parsed.unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(m.kernels.len(), 1, "{text}");
        assert_eq!(m.topologies.len(), 2, "{text}");
        assert_eq!(m.cells.len(), 4, "2 topologies x 2 suites: {text}");
    }

    #[test]
    fn the_shipped_set_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/replay");
        let all = discover(&dir).unwrap();
        assert!(all.len() >= 3, "{all:?}");
        for r in &all {
            assert!(
                r.id.len() >= 12 && r.id.chars().all(|c| c.is_ascii_hexdigit()),
                "{r:?}"
            );
            assert!(r.title.starts_with("futex"), "{r:?}");
        }
    }
}
