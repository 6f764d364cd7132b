//! The validated matrix: the only type the runner accepts. Built from
//! [`RawMatrix`] by [`validate`]; every cross-field rule is checked here
//! and reported with the file, line and column of the offending entry.

use super::glob;
use super::locate::{self, Pos};
use super::schema::{RawGrowth, RawMatrix, RawRule};
use super::MatrixError;
use crate::host::AccelChoice;
use crate::kernelspec::KernelSpec;
use crate::share::ShareSpec;
use crate::suite::{self, Binary, SuiteTest};
use crate::topology::{self, Node, Topology};
use guest_tests::expect::{Expect, Growth};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A validated matrix.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// The file it came from.
    pub path: PathBuf,
    /// Kernels, in file order.
    pub kernels: Vec<Kernel>,
    /// Topologies, in file order.
    pub topologies: Vec<NamedTopology>,
    /// Suites, in file order (implicit built-ins after).
    pub suites: Vec<Suite>,
    /// Cells to run, in kernel, topology, suite order.
    pub cells: Vec<Cell>,
}

/// A kernel with its expected features.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Name.
    pub name: String,
    /// The spec as written.
    pub spec_text: String,
    /// Parsed spec.
    pub spec: KernelSpec,
    /// Expected features.
    pub expect: Expect,
}

/// A topology with its name.
#[derive(Debug, Clone)]
pub struct NamedTopology {
    /// Name.
    pub name: String,
    /// The topology.
    pub topology: Topology,
}

/// What a suite runs.
#[derive(Debug, Clone, PartialEq)]
pub enum SuiteKind {
    /// A built-in suite (`suite::builtin`), given the kernel's expectations.
    Builtin(String),
    /// Explicit tests; built-in `futex-*` binaries without `--expect` get
    /// the kernel's expectations appended.
    Custom(Vec<SuiteTest>),
}

/// A named suite.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Name.
    pub name: String,
    /// What it runs.
    pub kind: SuiteKind,
    /// Relative cost for sharding.
    pub weight: u32,
    /// Known failures: (case glob, reason, only under this accel).
    pub known_failures: Vec<(String, String, Option<String>)>,
}

/// One cell: indices into the matrix plus per-cell settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// `kernel/topology/suite`.
    pub name: String,
    /// Index into [`Matrix::kernels`].
    pub kernel: usize,
    /// Index into [`Matrix::topologies`].
    pub topology: usize,
    /// Index into [`Matrix::suites`].
    pub suite: usize,
    /// Accelerator.
    pub accel: AccelChoice,
    /// Timeout scale.
    pub timeout_scale: f64,
    /// Extra kernel command line words.
    pub cmdline: Vec<String>,
    /// virtiofs shares; host paths made relative to the matrix file's
    /// directory, not yet checked on disk ([`ShareSpec::resolve`] runs when
    /// the cell does, so `--list` works before the directories exist).
    pub shares: Vec<ShareSpec>,
    /// Whether the cell gets its artifacts share (when virtiofs works).
    pub artifacts: bool,
}

impl Matrix {
    /// The suite's tests of a cell (the planner puts the topology check
    /// first), with the kernel's expectations.
    pub fn suite_tests(&self, cell: &Cell) -> Vec<SuiteTest> {
        let k = &self.kernels[cell.kernel];
        let expect = k.expect.encode();
        let mut tests = Vec::new();
        match &self.suites[cell.suite].kind {
            SuiteKind::Builtin(name) => {
                // Validated: the name is known.
                tests.extend(suite::builtin(name, Some(&expect)).unwrap_or_default())
            }
            SuiteKind::Custom(list) => tests.extend(list.iter().cloned().map(|mut t| {
                let futex = matches!(t.binary, Binary::Builtin(b) if b.starts_with("futex-"));
                if futex && !t.args.iter().any(|a| a == "--expect") {
                    t.args.extend(["--expect".to_string(), expect.clone()]);
                }
                t
            })),
        }
        tests
    }

    /// Expected cost of a cell for sharding: vCPUs x (1 + suite weight).
    pub fn cost(&self, cell: &Cell) -> u64 {
        let cpus = self.topologies[cell.topology].topology.cpus() as u64;
        cpus * (1 + self.suites[cell.suite].weight as u64)
    }
}

/// Built-in suites usable without a `suites:` entry.
const IMPLICIT_SUITES: &[&str] = &["smoke", "futex"];

struct Ctx<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, pos: Option<Pos>, message: String) -> MatrixError {
        match pos {
            Some((line, column)) => MatrixError::At {
                path: self.path.to_path_buf(),
                line,
                column,
                message,
            },
            None => MatrixError::File {
                path: self.path.to_path_buf(),
                message,
            },
        }
    }
    fn at_item(&self, sect: &str, name: &str, field: Option<&str>, msg: String) -> MatrixError {
        self.err(locate::item(self.text, sect, name, field), msg)
    }
}

fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} name {name:?}: expected 1-64 characters of [A-Za-z0-9._-]"
        ))
    }
}

/// `60s`, `10m`, `1h`, `90` (seconds).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 's') => (&s[..i], 1),
        (i, 'm') => (&s[..i], 60),
        (i, 'h') => (&s[..i], 3600),
        _ => (s, 1),
    };
    let n: u64 = num.trim().parse().ok()?;
    (n > 0).then(|| Duration::from_secs(n * mult))
}

fn growth(g: RawGrowth) -> Growth {
    match g {
        RawGrowth::None => Growth::None,
        RawGrowth::Thread => Growth::Thread,
        RawGrowth::VmNotVfork => Growth::VmNotVfork,
        RawGrowth::AnyVm => Growth::AnyVm,
    }
}

/// A `shares:` list (`what` names it in messages; `at` is where the list
/// starts and `until` the line it ends before, for positions). Relative
/// host paths are taken from `base`, the matrix file's directory.
fn share_list(
    cx: &Ctx,
    list: &[String],
    base: &Path,
    what: &str,
    at: Option<Pos>,
    until: Option<usize>,
) -> Result<Vec<ShareSpec>, MatrixError> {
    let mut out: Vec<ShareSpec> = Vec::new();
    for (j, item) in list.iter().enumerate() {
        let pos = || {
            // Equal items before this one are earlier occurrences.
            let occurrence = list[..j].iter().filter(|o| *o == item).count();
            at.and_then(|(line, _)| locate::scalar(cx.text, line, until, item, occurrence))
                .or(at)
        };
        let mut spec =
            ShareSpec::parse(item).map_err(|e| cx.err(pos(), format!("{what}[{j}]: {e}")))?;
        if spec.host.is_relative() {
            spec.host = base.join(&spec.host);
        }
        if let Some(prev) = out.iter().find(|s| s.guest == spec.guest) {
            return Err(cx.err(
                pos(),
                format!(
                    "{what}[{j}]: guest path {} is also used by {}; expected one share per guest path",
                    spec.guest,
                    prev.host.display()
                ),
            ));
        }
        out.push(spec);
    }
    Ok(out)
}

/// Validates a parsed matrix (`text` is the file's text, for positions).
pub fn validate(raw: RawMatrix, path: &Path, text: &str) -> Result<Matrix, MatrixError> {
    let cx = Ctx { path, text };

    // Kernels.
    let mut kernels = Vec::new();
    let mut seen = HashSet::new();
    if raw.kernels.is_empty() {
        return Err(cx.err(
            locate::section(text, "kernels"),
            "kernels: expected at least one kernel".into(),
        ));
    }
    for k in raw.kernels {
        check_name("kernel", &k.name).map_err(|m| cx.at_item("kernels", &k.name, None, m))?;
        if !seen.insert(k.name.clone()) {
            return Err(cx.at_item(
                "kernels",
                &k.name,
                None,
                format!("kernel {:?} is declared twice", k.name),
            ));
        }
        let spec = KernelSpec::parse(&k.spec).map_err(|e| {
            cx.at_item(
                "kernels",
                &k.name,
                Some("spec"),
                format!("kernel {:?}: {e}", k.name),
            )
        })?;
        let f = &k.features;
        let base = spec.version().map(Expect::for_release);
        let missing: Vec<&str> = [
            ("prctl", f.prctl.is_none()),
            ("private_hash", f.private_hash.is_none()),
            ("immutable", f.immutable.is_none()),
            ("numa", f.numa.is_none()),
            ("mpol", f.mpol.is_none()),
            ("growth", f.growth.is_none()),
            ("requeue_same_flags", f.requeue_same_flags.is_none()),
        ]
        .into_iter()
        .filter(|(_, m)| *m)
        .map(|(n, _)| n)
        .collect();
        let base = match base {
            Some(b) => b,
            None if missing.is_empty() => Expect::for_release("0"),
            None => {
                return Err(cx.at_item(
                    "kernels",
                    &k.name,
                    Some("spec"),
                    format!(
                        "kernel {:?}: spec {:?} names no version, so features must give {}",
                        k.name,
                        k.spec,
                        missing.join(", ")
                    ),
                ))
            }
        };
        // Given features over the version's row, in dependency order so
        // that `prctl: false` alone also means no private hash (see
        // `Expect::apply`); a dependent given back on is an error at it.
        let b = |v: Option<bool>| v.map(|v| if v { "1" } else { "0" });
        let given = [
            ("prctl", b(f.prctl)),
            ("private_hash", b(f.private_hash)),
            ("immutable", b(f.immutable)),
            ("numa", b(f.numa)),
            ("mpol", b(f.mpol)),
            ("growth", f.growth.map(|g| growth(g).name())),
            ("requeue_same_flags", b(f.requeue_same_flags)),
        ];
        let mut expect = base;
        for (key, value) in given.iter().filter_map(|(k, v)| Some((*k, (*v)?))) {
            expect
                .set(key, value)
                .map_err(|m| cx.at_item("kernels", &k.name, Some(key), m))?;
        }
        if let Some(c) = expect.contradiction() {
            // The key of a contradiction is the one expected on.
            let value = if c.key == "growth" {
                expect.growth.name()
            } else {
                "true"
            };
            return Err(cx.at_item(
                "kernels",
                &k.name,
                Some(c.key),
                format!(
                    "kernel {:?}: {}: {value} needs {}: true",
                    k.name, c.key, c.needs
                ),
            ));
        }
        kernels.push(Kernel {
            name: k.name,
            spec_text: k.spec,
            spec,
            expect,
        });
    }

    // Topologies.
    let mut topologies = Vec::new();
    let mut seen = HashSet::new();
    if raw.topologies.is_empty() {
        return Err(cx.err(
            locate::section(text, "topologies"),
            "topologies: expected at least one topology".into(),
        ));
    }
    for t in raw.topologies {
        check_name("topology", &t.name).map_err(|m| cx.at_item("topologies", &t.name, None, m))?;
        if !seen.insert(t.name.clone()) {
            return Err(cx.at_item(
                "topologies",
                &t.name,
                None,
                format!("topology {:?} is declared twice", t.name),
            ));
        }
        let mut nodes = Vec::new();
        for (i, n) in t.nodes.iter().enumerate() {
            let mem = if n.mem.trim() == "0" {
                Some(0)
            } else {
                topology::parse_size_mib(&n.mem)
            };
            let Some(mem_mib) = mem else {
                return Err(cx.at_item(
                    "topologies",
                    &t.name,
                    Some("mem"),
                    format!(
                        "topology {:?} node {i}: mem {:?}: expected a size such as 512M or 1G, or 0",
                        t.name, n.mem
                    ),
                ));
            };
            nodes.push(Node {
                cpus: n.cpus,
                mem_mib,
            });
        }
        let topology = Topology::new(nodes, t.distances.clone()).map_err(|e| {
            let field = if e.to_string().contains("distance") {
                Some("distances")
            } else {
                Some("nodes")
            };
            cx.at_item(
                "topologies",
                &t.name,
                field,
                format!("topology {:?}: {e}", t.name),
            )
        })?;
        topologies.push(NamedTopology {
            name: t.name,
            topology,
        });
    }

    // Suites.
    let mut suites = Vec::new();
    let mut seen = HashSet::new();
    let declared_any = !raw.suites.is_empty();
    for s in raw.suites {
        check_name("suite", &s.name).map_err(|m| cx.at_item("suites", &s.name, None, m))?;
        if !seen.insert(s.name.clone()) {
            return Err(cx.at_item(
                "suites",
                &s.name,
                None,
                format!("suite {:?} is declared twice", s.name),
            ));
        }
        let kind = match (s.builtin, s.tests) {
            (Some(b), None) => {
                // kselftest suites are built per kernel when the matrix runs.
                let known = crate::kselftest::is_kselftest_suite(&b);
                suite::builtin(&b, None)
                    .map(|_| ())
                    .or_else(|e| if known { Ok(()) } else { Err(e) })
                    .map_err(|e| {
                        cx.at_item(
                            "suites",
                            &s.name,
                            Some("builtin"),
                            format!("suite {:?}: {e}", s.name),
                        )
                    })?;
                SuiteKind::Builtin(b)
            }
            (None, Some(tests)) => {
                let mut out = Vec::new();
                for t in tests {
                    let timeout = match &t.timeout {
                        None => Duration::from_secs(120),
                        Some(x) => parse_duration(x).ok_or_else(|| {
                            cx.at_item(
                                "suites",
                                &s.name,
                                Some("timeout"),
                                format!(
                                    "suite {:?}: timeout {x:?}: expected a duration such as 60s, 10m or 1h",
                                    s.name
                                ),
                            )
                        })?,
                    };
                    let test = if t.bin.contains('/') {
                        let mut u =
                            suite::user_binary(PathBuf::from(&t.bin), timeout).map_err(|e| {
                                cx.at_item(
                                    "suites",
                                    &s.name,
                                    Some("bin"),
                                    format!("suite {:?}: {e}", s.name),
                                )
                            })?;
                        u.args = t.args;
                        u
                    } else {
                        let Some(b) = guest_tests::binaries::tests().find(|b| *b == t.bin) else {
                            return Err(cx.at_item(
                                "suites",
                                &s.name,
                                Some("bin"),
                                format!(
                                    "suite {:?}: unknown guest binary {:?}; expected one of {} or a path to a static binary",
                                    s.name,
                                    t.bin,
                                    guest_tests::binaries::tests().collect::<Vec<_>>().join(", ")
                                ),
                            ));
                        };
                        SuiteTest {
                            name: t.bin.clone(),
                            binary: Binary::Builtin(b),
                            args: t.args,
                            timeout,
                        }
                    };
                    let test = match t.name {
                        Some(n) => {
                            check_name("test", &n)
                                .map_err(|m| cx.at_item("suites", &s.name, Some("name"), m))?;
                            SuiteTest { name: n, ..test }
                        }
                        None => test,
                    };
                    if out.iter().any(|o: &SuiteTest| o.name == test.name)
                        || test.name == "topology"
                    {
                        return Err(cx.at_item(
                            "suites",
                            &s.name,
                            Some("tests"),
                            format!(
                                "suite {:?}: test name {:?} is used twice (give one a name:)",
                                s.name, test.name
                            ),
                        ));
                    }
                    out.push(test);
                }
                if out.is_empty() {
                    return Err(cx.at_item(
                        "suites",
                        &s.name,
                        Some("tests"),
                        format!("suite {:?}: tests: expected at least one test", s.name),
                    ));
                }
                SuiteKind::Custom(out)
            }
            _ => {
                return Err(cx.at_item(
                    "suites",
                    &s.name,
                    None,
                    format!(
                        "suite {:?}: expected exactly one of builtin: or tests:",
                        s.name
                    ),
                ))
            }
        };
        let weight = s.weight.unwrap_or(match &kind {
            SuiteKind::Builtin(b) => suite::builtin(b, None).map(|t| t.len()).unwrap_or(1) as u32,
            SuiteKind::Custom(t) => t.len() as u32,
        });
        let mut known_failures = Vec::new();
        for k in s.known_failures {
            if let Some(a) = k.accel.as_deref().filter(|a| !["tcg", "kvm"].contains(a)) {
                return Err(cx.at_item(
                    "suites",
                    &s.name,
                    Some("accel"),
                    format!(
                        "suite {:?}: known_failures accel {a:?}: expected tcg or kvm",
                        s.name
                    ),
                ));
            }
            known_failures.push((k.case, k.reason, k.accel));
        }
        suites.push(Suite {
            name: s.name,
            kind,
            weight,
            known_failures,
        });
    }
    let declared = suites.len();
    for b in IMPLICIT_SUITES {
        if !suites.iter().any(|s| s.name == *b) {
            let weight = suite::builtin(b, None).map(|t| t.len()).unwrap_or(1) as u32;
            suites.push(Suite {
                name: b.to_string(),
                kind: SuiteKind::Builtin(b.to_string()),
                weight,
                known_failures: Vec::new(),
            });
        }
    }

    // Shares of every cell (overrides may replace them below).
    let base = path.parent().unwrap_or(Path::new(""));
    let shares = share_list(
        &cx,
        &raw.shares,
        base,
        "shares",
        locate::section(text, "shares"),
        None,
    )?;
    let artifacts = raw.artifacts.unwrap_or(true);

    // Cells: the product of kernels x topologies x the chosen suites.
    let chosen: Vec<usize> = match &raw.cells.suites {
        Some(names) => {
            let mut v = Vec::new();
            for n in names {
                let Some(i) = suites.iter().position(|s| &s.name == n) else {
                    return Err(cx.err(
                        locate::section(text, "cells"),
                        format!(
                            "cells.suites: unknown suite {n:?}; expected one of {}",
                            suites
                                .iter()
                                .map(|s| s.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                };
                v.push(i);
            }
            v
        }
        None if declared_any => (0..declared).collect(),
        None => (0..suites.len()).collect(),
    };
    fn names<'r>(
        r: &'r RawRule,
        kernels: &'r [Kernel],
        topologies: &'r [NamedTopology],
        suites: &'r [Suite],
    ) -> [(&'static str, &'r Option<String>, Vec<&'r str>); 3] {
        [
            (
                "kernel",
                &r.kernel,
                kernels.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(),
            ),
            (
                "topology",
                &r.topology,
                topologies.iter().map(|t| t.name.as_str()).collect(),
            ),
            (
                "suite",
                &r.suite,
                suites.iter().map(|s| s.name.as_str()).collect(),
            ),
        ]
    }
    for (key, rules) in [
        ("exclude", &raw.cells.exclude),
        ("include", &raw.cells.include),
    ] {
        for (i, r) in rules.iter().enumerate() {
            for (what, pat, known) in names(r, &kernels, &topologies, &suites) {
                if let Some(p) = pat {
                    if !known.iter().any(|n| glob::matches(p, n)) {
                        return Err(cx.err(
                            locate::nth(text, "cells", Some(key), i),
                            format!(
                                "cells.{key}[{i}]: {what} {p:?} matches no {what} (known: {})",
                                known.join(", ")
                            ),
                        ));
                    }
                }
            }
        }
    }
    let rule_matches = |r: &RawRule, k: &str, t: &str, s: &str| {
        r.kernel.as_deref().is_none_or(|p| glob::matches(p, k))
            && r.topology.as_deref().is_none_or(|p| glob::matches(p, t))
            && r.suite.as_deref().is_none_or(|p| glob::matches(p, s))
    };
    let mut cells = Vec::new();
    for (ki, k) in kernels.iter().enumerate() {
        for (ti, t) in topologies.iter().enumerate() {
            for (si, s) in suites.iter().enumerate() {
                let (kn, tn, sn) = (&k.name, &t.name, &s.name);
                let in_product = chosen.contains(&si)
                    && !raw
                        .cells
                        .exclude
                        .iter()
                        .any(|r| rule_matches(r, kn, tn, sn));
                let included = raw
                    .cells
                    .include
                    .iter()
                    .any(|r| rule_matches(r, kn, tn, sn));
                if in_product || included {
                    cells.push(Cell {
                        name: format!("{kn}/{tn}/{sn}"),
                        kernel: ki,
                        topology: ti,
                        suite: si,
                        accel: AccelChoice::Auto,
                        timeout_scale: 1.0,
                        cmdline: vec![],
                        shares: shares.clone(),
                        artifacts,
                    });
                }
            }
        }
    }
    if cells.is_empty() {
        return Err(cx.err(
            locate::section(text, "cells"),
            "the matrix has no cells (every combination is excluded)".into(),
        ));
    }

    // Overrides, in order.
    for (i, o) in raw.overrides.iter().enumerate() {
        let pos = locate::nth(text, "overrides", None, i);
        let accel = match o.accel.as_deref() {
            None => None,
            Some("auto") => Some(AccelChoice::Auto),
            Some("kvm") => Some(AccelChoice::Kvm),
            Some("tcg") => Some(AccelChoice::Tcg),
            Some(other) => {
                return Err(cx.err(
                    pos,
                    format!("overrides[{i}]: accel {other:?}: expected auto, kvm or tcg"),
                ))
            }
        };
        if let Some(s) = o.timeout_scale {
            if !(s.is_finite() && s > 0.0 && s <= 100.0) {
                return Err(cx.err(
                    pos,
                    format!("overrides[{i}]: timeout_scale {s}: expected a number in (0, 100]"),
                ));
            }
        }
        let o_shares = match &o.shares {
            Some(list) => Some(share_list(
                &cx,
                list,
                base,
                &format!("overrides[{i}].shares"),
                pos,
                locate::nth(text, "overrides", None, i + 1).map(|(line, _)| line),
            )?),
            None => None,
        };
        let rule = RawRule {
            kernel: o.kernel.clone(),
            topology: o.topology.clone(),
            suite: o.suite.clone(),
        };
        for (what, pat, known) in names(&rule, &kernels, &topologies, &suites) {
            if let Some(p) = pat {
                if !known.iter().any(|n| glob::matches(p, n)) {
                    return Err(cx.err(
                        pos,
                        format!(
                            "overrides[{i}]: {what} {p:?} matches no {what} (known: {})",
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        for c in &mut cells {
            let (kn, tn, sn) = (
                &kernels[c.kernel].name,
                &topologies[c.topology].name,
                &suites[c.suite].name,
            );
            if !rule_matches(&rule, kn, tn, sn) {
                continue;
            }
            if let Some(a) = accel {
                c.accel = a;
            }
            if let Some(s) = o.timeout_scale {
                c.timeout_scale = s;
            }
            if let Some(cmd) = &o.cmdline {
                c.cmdline = cmd.split_whitespace().map(String::from).collect();
            }
            // Replaced, not added to: like every override key, and `[]`
            // can then take the top-level shares away.
            if let Some(s) = &o_shares {
                c.shares = s.clone();
            }
            if let Some(a) = o.artifacts {
                c.artifacts = a;
            }
        }
    }

    Ok(Matrix {
        path: path.to_path_buf(),
        kernels,
        topologies,
        suites,
        cells,
    })
}
