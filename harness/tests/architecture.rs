//! Tidy checks (rust-analyzer's `tidy.rs` idea) of what ARCHITECTURE.md
//! says: it names every source file and guest binary; every top-level
//! module of the library has a layer and imports nothing above it, and no
//! two import each other in a cycle; and each invariant a program can
//! check holds (the library prints nothing, one exit-code table, clap only
//! in the front doors, QEMU and virtiofsd spawned through `procs`, only
//! the planner builds a `CellSpec`, only the runner starts cells, reports
//! written atomically, reporters decide no verdict). The page cites each
//! test by name ("checked by `...`"), which the last test checks.
//! Quick tier: reads source text, builds nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn architecture_md_names_every_module_and_guest_binary() {
    let root = root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    for src in ["harness/src", "guest-tests/src", "xtask/src"] {
        let base = root.join(src);
        let mut files = Vec::new();
        rust_files(&base, &mut files);
        for f in files {
            let rel = f.strip_prefix(&base).unwrap();
            let name = rel.file_name().unwrap().to_str().unwrap();
            if name == "lib.rs" || rel.starts_with("bin") && src == "guest-tests/src" {
                continue; // the crate itself; guest binaries are checked below
            }
            // A module is named by its file name, a directory module by
            // `dir/`; a file in a directory also needs its directory named.
            let parent = rel.parent().and_then(|p| p.file_name());
            let wanted: Vec<String> = match (name, parent) {
                ("mod.rs", Some(dir)) => vec![format!("{}/", dir.to_str().unwrap())],
                (_, Some(dir)) => vec![name.to_string(), format!("{}/", dir.to_str().unwrap())],
                (_, None) => vec![name.to_string()],
            };
            if wanted.iter().any(|w| !text.contains(w.as_str())) {
                missing.push(format!("{src}/{}", rel.display()));
            }
        }
    }
    for b in guest_tests::binaries::ALL {
        if !text.contains(&format!("`{}`", b.name)) {
            missing.push(format!("guest binary {}", b.name));
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not mention: {}",
        missing.join(", ")
    );
}

/// `crate::X` references of each top-level module of the library.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let base = root().join("harness/src");
    let mut files = Vec::new();
    rust_files(&base, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&base).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let top = top.trim_end_matches(".rs").to_string();
        if top == "lib" || top == "bin" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let uses = graph.entry(top.clone()).or_default();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + 7..];
                // `crate::x`, or each of `crate::{x, y::z}` (on one line).
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group.split('}').next().unwrap_or("").split(',').collect(),
                    None => vec![rest],
                };
                for n in names {
                    let name: String = n
                        .trim_start()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    // `kernelspec` is `lib.rs`'s re-export of `kernel::spec`.
                    let name = if name == "kernelspec" {
                        "kernel".into()
                    } else {
                        name
                    };
                    if !name.is_empty() && name != top {
                        uses.insert(name);
                    }
                }
            }
        }
    }
    let known: BTreeSet<String> = graph.keys().cloned().collect();
    for uses in graph.values_mut() {
        uses.retain(|u| known.contains(u));
    }
    graph
}

#[test]
fn top_level_modules_have_no_import_cycle() {
    let graph = module_graph();
    // Depth-first search; a back edge is a cycle.
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(1) => {
                let at = path.iter().position(|p| p == n).unwrap_or(0);
                let mut cycle = path[at..].to_vec();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            Some(_) => return None,
            None => {}
        }
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, &graph, &mut state, &mut Vec::new()) {
            panic!("import cycle: {}", c.join(" -> "));
        }
    }
}

/// `text` without its `#[cfg(test)]` items (a test may print).
fn without_test_items(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "#[cfg(test)]" {
            out.push_str(l);
            out.push('\n');
            continue;
        }
        // The item: one line, or a block that closes at column 0.
        if lines
            .next()
            .is_some_and(|item| item.trim_end().ends_with('{'))
        {
            for l in lines.by_ref() {
                if l == "}" {
                    break;
                }
            }
        }
    }
    out
}

/// The library prints nothing: progress is an event (`Event::Step`, or a
/// note its front door's callback says), a command's output is returned to
/// the binary, which prints. The one exception is the interactive shell's
/// bridge, whose job is the user's terminal.
#[test]
fn the_library_prints_nothing() {
    const ALLOWED: &[(&str, &str)] = &[(
        "console_bridge.rs",
        "the --shell bridge copies the guest's console to the user's terminal",
    )];
    const PRINTS: &[&str] = &[
        "println!(",
        "print!(",
        "eprintln!(",
        "eprint!(",
        "io::stdout()",
        "io::stderr()",
        "dbg!(",
    ];
    let src = root().join("harness/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        if rel.starts_with("bin/") || ALLOWED.iter().any(|(a, _)| *a == rel) {
            continue;
        }
        let text = without_test_items(&std::fs::read_to_string(&f).unwrap());
        for l in text.lines() {
            let code = l.split("//").next().unwrap_or("");
            if PRINTS.iter().any(|p| code.contains(p)) {
                found.push(format!("harness/src/{rel}: {}", l.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the library prints (send an Event::Step, take a `say` callback, or return the text to the binary):\n{}",
        found.join("\n")
    );
}

/// One exit-code table: statuses are named in `harness/src/error.rs`'s
/// `exit` module (with the one mapping from a run's summary), and nowhere
/// else does a number or a constant of its own become an exit status.
#[test]
fn exit_statuses_come_from_one_table() {
    let src = root().join("harness/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    let mut tables = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let text = without_test_items(&std::fs::read_to_string(&f).unwrap());
        if text.contains("pub mod exit {") {
            tables.push(rel.clone());
        }
        if rel == "error.rs" {
            continue;
        }
        for l in text.lines() {
            let code = l.split("//").next().unwrap_or("");
            let literal = |call: &str| {
                code.split(call)
                    .skip(1)
                    .any(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            };
            // Dying of SIGPIPE is the signal's status, not the table's.
            let sigpipe = code.contains("128 + libc::SIGPIPE");
            if code.contains("const EXIT_")
                || literal("ExitCode::from(")
                || (literal("process::exit(") && !sigpipe)
            {
                found.push(format!("harness/src/{rel}: {}", l.trim()));
            }
        }
    }
    assert_eq!(tables, ["error.rs"], "one exit-code table");
    assert!(
        found.is_empty(),
        "exit statuses outside harness::error::exit:\n{}",
        found.join("\n")
    );
}

/// Each top-level module's layer, read from ARCHITECTURE.md's "Layers"
/// list (`1. **Floors** — `topology.rs`, ...`): the backticked names of
/// each numbered item.
fn layers() -> BTreeMap<String, u32> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let section = text
        .split("\n## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a ## Layers section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut layers = BTreeMap::new();
    let mut current = None;
    for line in section.lines() {
        let t = line.trim_start();
        if let Some((n, _)) = t.split_once(". **") {
            current = n.parse::<u32>().ok();
        } else if t.is_empty() || !line.starts_with(' ') {
            if !t.is_empty() {
                current = None;
            }
            continue;
        }
        let Some(layer) = current else { continue };
        for name in t.split('`').skip(1).step_by(2) {
            // `topology.rs`, `share/`, `kernel/` (a top-level module), not
            // `kernel/spec.rs` or a guest file.
            let name = name.trim_end_matches('/');
            let name = name.trim_end_matches(".rs");
            if !name.contains('/') && !name.is_empty() {
                layers.entry(name.to_string()).or_insert(layer);
            }
        }
    }
    layers
}

/// Every module has a layer and imports nothing from a layer above it.
#[test]
fn every_module_has_a_layer_and_imports_nothing_above_it() {
    let graph = module_graph();
    let layers = layers();
    let missing: Vec<&String> = graph.keys().filter(|m| !layers.contains_key(*m)).collect();
    assert!(
        missing.is_empty(),
        "modules without a layer in ARCHITECTURE.md's Layers: {missing:?}"
    );
    let mut upward = Vec::new();
    for (m, uses) in &graph {
        for u in uses {
            if layers[u] > layers[m] {
                upward.push(format!(
                    "{m} (layer {}) imports {u} (layer {})",
                    layers[m], layers[u]
                ));
            }
        }
    }
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

/// The library's source files (relative to `harness/src`) with their text,
/// `#[cfg(test)]` items and test-only files (`tests.rs`) left out.
fn library_sources() -> Vec<(String, String)> {
    let src = root().join("harness/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            let text = without_test_items(&std::fs::read_to_string(&f).unwrap());
            (rel, text)
        })
        .filter(|(rel, _)| !rel.ends_with("/tests.rs"))
        .collect()
}

/// A line without its comment.
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

/// The top-level module a source file belongs to (`bisect/verdict.rs` is
/// `bisect`).
fn top_module(rel: &str) -> &str {
    rel.split('/').next().unwrap().trim_end_matches(".rs")
}

/// Whether `rel` is a front door that may hold clap types: the binary,
/// `run/`, the groups `run` and `matrix` share, and `bisect`'s argv (the
/// protocol between `harness bisect` and `harness bisect-step`).
fn is_clap_front_door(rel: &str) -> bool {
    rel.starts_with("bin/")
        || rel.starts_with("run/")
        || rel == "args.rs"
        || ["bisect/args.rs", "matrix/args.rs", "bench/args.rs"].contains(&rel)
}

/// The `ValueEnum` derives ARCHITECTURE.md allows outside the front doors:
/// the `module::Type` names of its sentence "`ValueEnum` derives: ...".
fn value_enums_in_page() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let at = text
        .find("`ValueEnum` derives:")
        .expect("ARCHITECTURE.md lists the library's `ValueEnum` derives (\"`ValueEnum` derives: `host::AccelChoice`, ...\")");
    let sentence = text[at..].split(".\n").next().unwrap();
    let sentence = sentence.split(". ").next().unwrap();
    sentence
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|n| n.contains("::"))
        .map(str::to_string)
        .collect()
}

/// The command line is the front doors' business: clap (`clap::`,
/// `#[arg(`, `#[command(`, `#[clap(`, `#[value(`) appears only in
/// `bin/`, `run/`, `args.rs` and a door's own `args.rs` (`bisect/`,
/// `matrix/`, `bench/`); elsewhere a value enum
/// may derive `clap::ValueEnum` (so a flag takes the library's own type),
/// and exactly the derives ARCHITECTURE.md lists exist.
#[test]
fn clap_only_in_front_doors() {
    let listed = value_enums_in_page();
    let mut derived = BTreeSet::new();
    let mut found = Vec::new();
    for (rel, text) in library_sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let c = code(l);
            if c.contains("derive(") && c.contains("ValueEnum") {
                // The enum the derive is on: the next `enum` line.
                let name = lines[i + 1..]
                    .iter()
                    .find_map(|l| {
                        let l = l.trim_start();
                        let l = l.strip_prefix("pub ").unwrap_or(l);
                        l.strip_prefix("pub(crate) ")
                            .unwrap_or(l)
                            .strip_prefix("enum ")
                    })
                    .and_then(|r| r.split(|c: char| !c.is_alphanumeric() && c != '_').next())
                    .unwrap_or("?");
                let name = format!("{}::{name}", top_module(&rel));
                if !is_clap_front_door(&rel) && !listed.contains(&name) {
                    found.push(format!(
                        "harness/src/{rel}: `ValueEnum` on {name}, not in ARCHITECTURE.md's list"
                    ));
                }
                derived.insert(name);
                continue;
            }
            let clap = c.contains("clap")
                || ["#[arg(", "#[command(", "#[clap(", "#[value("]
                    .iter()
                    .any(|a| c.contains(a));
            if clap && !is_clap_front_door(&rel) {
                found.push(format!("harness/src/{rel}: {}", l.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "clap outside the front doors (move the flag into bin/, run/, args.rs or the door's args.rs and \
         hand the library a plain value; a value enum may derive clap::ValueEnum if ARCHITECTURE.md \
         lists it under \"`ValueEnum` derives\"):\n{}",
        found.join("\n")
    );
    let stale: Vec<&String> = listed.difference(&derived).collect();
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md lists `ValueEnum` derives that do not exist (update its list): {stale:?}"
    );
}

/// No child outlives the harness: QEMU (`vm.rs`) and virtiofsd
/// (`share/virtiofsd.rs`) are tokio children started through
/// `procs::spawn_guarded` (own process group, `PR_SET_PDEATHSIG`,
/// `kill_on_drop`, the registry a second Ctrl-C kills), which is the one
/// `.spawn()` of the library besides the short-lived tools listed here.
#[test]
fn qemu_and_virtiofsd_are_spawned_only_through_procs() {
    const OTHER_CHILDREN: &[(&str, &str)] = &[
        (
            "bisect/interrupt.rs",
            "a bisection's step, in its own group that Ctrl-C reaches",
        ),
        ("kernel/build.rs", "make, with PR_SET_PDEATHSIG"),
        (
            "kernel/source.rs",
            "tar unpacking a source tarball from its stdin",
        ),
        (
            "setup.rs",
            "`harness setup`'s install commands, each said first",
        ),
    ];
    let mut found = Vec::new();
    let mut starters = BTreeSet::new();
    for (rel, text) in library_sources() {
        if rel.starts_with("bin/") || rel == "procs.rs" {
            continue;
        }
        let tokio_child = text.contains("tokio::process::Command");
        if tokio_child && (text.contains("spawn_guarded(") || text.contains("class.spawn(")) {
            starters.insert(rel.clone());
        }
        for l in text.lines() {
            let c = code(l);
            if c.contains(".spawn()")
                && (tokio_child || !OTHER_CHILDREN.iter().any(|(f, _)| *f == rel))
            {
                found.push(format!("harness/src/{rel}: {}", l.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a child spawned outside procs.rs (start QEMU and virtiofsd through \
         procs::spawn_guarded or sched_class::ClassHandle::spawn; another tool that \
         cannot outlive the harness goes in OTHER_CHILDREN with why):\n{}",
        found.join("\n")
    );
    for f in ["vm.rs", "share/virtiofsd.rs"] {
        assert!(
            starters.contains(f),
            "harness/src/{f} no longer hands its tokio::process::Command to spawn_guarded \
             (update this test and ARCHITECTURE.md if QEMU or virtiofsd now start elsewhere)"
        );
    }
}

/// Only the planner builds a `CellSpec`: a new kernel source or suite kind
/// is a planner change, not a front door's. (`shared_boot.rs` and the
/// runner adjust a planned spec; they do not write one.)
#[test]
fn only_the_planner_builds_a_cell_spec() {
    let mut found = Vec::new();
    for (rel, text) in library_sources() {
        if rel == "planner.rs" || rel == "cell.rs" {
            continue;
        }
        for l in text.lines() {
            let c = code(l);
            for (i, _) in c.match_indices("CellSpec {") {
                let before = c[..i].trim_end();
                if !before.ends_with("struct") && !before.ends_with("->") {
                    found.push(format!("harness/src/{rel}: {}", l.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a CellSpec built outside planner.rs (give the planner a CellRequest or a \
         CellWant and take its ReadyCell):\n{}",
        found.join("\n")
    );
}

/// Only the runner starts cells: `cell::run*` is called from `runner.rs`
/// alone (so every cell is scheduled, judged and reported the same way),
/// and only `cell.rs` starts a VM (`vm::run`).
#[test]
fn only_the_runner_starts_cells() {
    let mut found = Vec::new();
    for (rel, text) in library_sources() {
        for l in text.lines() {
            let c = code(l);
            let cell = [
                "cell::run(",
                "cell::run_with_shares(",
                "cell::run_attached(",
            ]
            .iter()
            .any(|p| c.contains(p));
            let vm = c.contains("vm::run(");
            if (cell && rel != "runner.rs") || (vm && rel != "cell.rs") {
                found.push(format!("harness/src/{rel}: {}", l.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a cell or VM started outside the runner (plan a ReadyCell and give it to \
         runner::run):\n{}",
        found.join("\n")
    );
}

/// The library's lines, in the files `in_scope` picks, whose code (not
/// comment) contains one of `patterns`, as `harness/src/FILE: line`.
fn lines_with(in_scope: impl Fn(&str) -> bool, patterns: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (rel, text) in library_sources() {
        if !in_scope(&rel) {
            continue;
        }
        for l in text.lines() {
            if patterns.iter().any(|p| code(l).contains(p)) {
                found.push(format!("harness/src/{rel}: {}", l.trim()));
            }
        }
    }
    found
}

/// Reports are written atomically: `reporter/` and the bench's table and
/// plot write through `reporter::write_atomic` or `junit::write_atomic` (a
/// temp file beside the target, renamed), never straight to the path, so a
/// killed run leaves the previous report or the new one, never half of one.
#[test]
fn reports_are_written_atomically() {
    let found = lines_with(
        |rel| rel.starts_with("reporter/") || rel == "bench/table.rs" || rel == "bench/plot.rs",
        &["fs::write(", "File::create(", "OpenOptions::new("],
    );
    assert!(
        found.is_empty(),
        "a report written in place (use harness::reporter::write_atomic, or \
         junit::write_atomic for JUnit):\n{}",
        found.join("\n")
    );
}

/// Reporters never decide a verdict: the runner judges a cell
/// (`verdict::cases`, `verdict::counts`, `CellStatus::judge`) once, and
/// every reporter reads the `CellOutcome` it was given.
#[test]
fn reporters_decide_no_verdict() {
    let found = lines_with(
        |rel| rel.starts_with("reporter/"),
        &["verdict::cases(", "verdict::counts(", "CellStatus::judge("],
    );
    assert!(
        found.is_empty(),
        "a reporter decides a verdict (read CellOutcome's cases and status instead; \
         the runner judges):\n{}",
        found.join("\n")
    );
}

/// ARCHITECTURE.md's invariants say which test checks each ("checked by
/// `name`"): every name it cites is a test of this file, and every test of
/// this file is cited.
#[test]
fn the_page_cites_every_check() {
    let page = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    // "checked by `name`" may wrap across lines.
    let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
    let this = std::fs::read_to_string(root().join("harness/tests/architecture.rs")).unwrap();
    let tests: BTreeSet<String> = this
        .split("#[test]\nfn ")
        .skip(1)
        .map(|r| r.split('(').next().unwrap().to_string())
        .collect();
    let cited: BTreeSet<String> = page
        .split("checked by `")
        .skip(1)
        .map(|r| r.split('`').next().unwrap().to_string())
        .collect();
    let unknown: Vec<&String> = cited.difference(&tests).collect();
    assert!(
        unknown.is_empty(),
        "ARCHITECTURE.md cites checks harness/tests/architecture.rs does not have (fix the name): {unknown:?}"
    );
    let uncited: Vec<&String> = tests.difference(&cited).collect();
    assert!(
        uncited.is_empty(),
        "tests of harness/tests/architecture.rs that ARCHITECTURE.md does not cite (add \
         \"checked by `name`\" to the invariant they check): {uncited:?}"
    );
}
