//! Tidy checks (rust-analyzer's `tidy.rs` idea): ARCHITECTURE.md names
//! every source file and guest binary, the library's top-level modules
//! import each other without a cycle, and the library prints nothing.
//! Quick tier.

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
                let name: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != top {
                    uses.insert(name);
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
