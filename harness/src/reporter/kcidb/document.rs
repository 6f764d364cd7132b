//! A results file as a KCIDB I/O document, schema 5.3 (kcidb-io's
//! `kcidb_io.schema.V5_3`): one checkout per kernel source, one build per
//! kernel image, one test per cell (the suite's run, `futex_harness.<suite>`)
//! and one per case (`futex_harness.<suite>.<binary>.<case>`), and an issue
//! with an incident for each kernel report the console scanner found.
//!
//! Every id is `<origin>:<hash>` of what the object is (origin, kernel
//! identity, topology, suite, case), never of a time, so submitting a
//! re-run of the same inputs updates the objects instead of adding new
//! ones. Statuses come from the verdict (docs/kcidb.md has the table); this
//! module renames them, it decides nothing.

use super::mapping::{
    case_status, cell_status, object_id, patchset_hash, path_safe_name, report_signature,
    test_path, text, timestamp, url,
};
use super::results::{Case, Cell, KernelReport, Results, Run};
use super::Options;
use crate::events::KernelFacts;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};

/// The schema's major version.
pub const SCHEMA_MAJOR: u64 = 5;
/// The schema's minor version.
pub const SCHEMA_MINOR: u64 = 3;
/// The only architecture the harness builds and boots.
const ARCHITECTURE: &str = "x86_64";
/// The schema's bound on `log_excerpt` (characters; bytes bound them).
const MAX_EXCERPT: usize = 16384;
/// Longest comment or message copied into a field.
const MAX_TEXT: usize = 4096;

/// The document of `results`.
pub fn document(results: &Results, opts: &Options) -> Value {
    let mut doc = Builder::new(opts, &results.run);
    // A cell that never got planned (its kernel not resolved yet) borrows
    // the facts another cell of its kernel has, so it joins the same build.
    let mut known: BTreeMap<&str, &KernelFacts> = BTreeMap::new();
    for c in &results.cells {
        if let Some(f) = &c.kernel_facts {
            known.entry(c.kernel.as_str()).or_insert(f);
        }
    }
    for cell in &results.cells {
        let facts = cell
            .kernel_facts
            .as_ref()
            .or_else(|| known.get(cell.kernel.as_str()).copied());
        doc.cell(cell, facts);
    }
    json!({
        "version": {"major": SCHEMA_MAJOR, "minor": SCHEMA_MINOR},
        "checkouts": doc.checkouts,
        "builds": doc.builds,
        "tests": doc.tests,
        "issues": doc.issues,
        "incidents": doc.incidents,
    })
}

/// Inserts `value` under `key` when there is one.
fn put(m: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(v) = value {
        m.insert(key.into(), v.into());
    }
}

/// A kernel as the document knows it: its facts, or only its label.
struct Kernel<'a> {
    label: &'a str,
    facts: Option<&'a KernelFacts>,
}

impl Kernel<'_> {
    fn build_identity(&self) -> String {
        match self.facts {
            Some(f) if !f.build.is_empty() => f.build.clone(),
            _ => format!("label:{}", self.label),
        }
    }
    fn source_identity(&self) -> String {
        match self.facts {
            Some(f) if !f.source.is_empty() => f.source.clone(),
            _ => format!("label:{}", self.label),
        }
    }
    fn patch_hashes(&self) -> Vec<&str> {
        self.facts
            .map(|f| f.patches.iter().map(|p| p.sha256.as_str()).collect())
            .unwrap_or_default()
    }
}

struct Builder<'a> {
    opts: &'a Options,
    run: &'a Run,
    checkouts: Vec<Value>,
    builds: Vec<Value>,
    tests: Vec<Value>,
    issues: Vec<Value>,
    incidents: Vec<Value>,
    seen: HashSet<String>,
}

impl<'a> Builder<'a> {
    fn new(opts: &'a Options, run: &'a Run) -> Builder<'a> {
        Builder {
            opts,
            run,
            checkouts: Vec::new(),
            builds: Vec::new(),
            tests: Vec::new(),
            issues: Vec::new(),
            incidents: Vec::new(),
            seen: HashSet::new(),
        }
    }

    fn id(&self, parts: &[&str]) -> String {
        object_id(&self.opts.origin, parts)
    }

    /// Whether `id` is new to the document (and remembers it).
    fn first(&mut self, id: &str) -> bool {
        self.seen.insert(id.to_string())
    }

    fn cell(&mut self, cell: &Cell, facts: Option<&KernelFacts>) {
        let k = Kernel {
            label: &cell.kernel,
            facts,
        };
        let checkout_id = self.checkout(&k);
        let build_id = self.build(&k, &checkout_id);
        let build_identity = k.build_identity();
        let layout = cell
            .topology_layout
            .as_ref()
            .map(|l| l.canonical())
            .unwrap_or_default();
        let key = [
            "test",
            build_identity.as_str(),
            cell.topology.as_str(),
            layout.as_str(),
            cell.suite.as_str(),
        ];
        let environment = self.environment(cell);
        let files = self.output_files(cell);
        let started = cell.vm.as_ref().and_then(|v| timestamp(v.started));
        let common = |id: String, path: String, status: &str| {
            let mut t = Map::new();
            t.insert("id".into(), id.into());
            t.insert("build_id".into(), build_id.clone().into());
            t.insert("origin".into(), self.opts.origin.clone().into());
            t.insert("path".into(), path.into());
            t.insert("status".into(), status.into());
            t.insert("environment".into(), environment.clone());
            put(&mut t, "start_time", started.clone());
            put(&mut t, "output_files", files.clone());
            t
        };

        // The suite's run in this cell: the only test of a cell that
        // could not run, and the one that has the cell's duration (KTAP
        // says nothing of a case's time).
        let cell_test_id = self.id(&key);
        let mut t = common(
            cell_test_id.clone(),
            test_path(&cell.suite, None),
            cell_status(&cell.status),
        );
        if cell.duration_s > 0.0 {
            t.insert("duration".into(), cell.duration_s.into());
        }
        let why = cell
            .error
            .clone()
            .or_else(|| cell.vm.as_ref().map(|v| v.end.clone()));
        put(
            &mut t,
            "log_excerpt",
            why.as_deref()
                .filter(|_| cell.status != "passed")
                .map(|w| text(w, MAX_EXCERPT)),
        );
        let mut misc = Map::new();
        misc.insert("cell".into(), cell.name.clone().into());
        misc.insert("kernel".into(), cell.kernel.clone().into());
        misc.insert("kernel_name".into(), cell.kernel_name.clone().into());
        misc.insert("status".into(), cell.status.clone().into());
        put(&mut misc, "why", why.map(|w| text(&w, MAX_TEXT)));
        t.insert("misc".into(), misc.into());
        let mut tests = vec![t];
        let mut case_ids = Vec::new();

        for case in &cell.cases {
            let bench = cell
                .bench
                .iter()
                .find(|b| case.name == format!("{}/{}", b.test, b.config));
            let id = self.id(&[&key[..], &[case.name.as_str()]].concat());
            let status = case_status(case, bench);
            let mut t = common(id.clone(), test_path(&cell.suite, Some(&case.name)), status);
            if let Some(b) = bench.filter(|_| status != "SKIP") {
                t.insert(
                    "number".into(),
                    json!({"value": b.ops_per_s, "unit": "ops/s", "prefix": "metric"}),
                );
            }
            let mut misc = Map::new();
            misc.insert("cell".into(), cell.name.clone().into());
            misc.insert("case".into(), text(&case.name, MAX_TEXT).into());
            if let Some(m) = &case.message {
                misc.insert("message".into(), text(m, MAX_TEXT).into());
                if matches!(status, "FAIL" | "MISS") {
                    t.insert("log_excerpt".into(), text(m, MAX_EXCERPT).into());
                }
            }
            if let Some(b) = bench {
                misc.insert(
                    "bench".into(),
                    json!({"spec": b.spec, "sd": b.sd, "rounds": b.n, "threads": b.threads}),
                );
            }
            if case.status == "xfail" {
                misc.insert("xfail".into(), true.into());
                if let Some(k) = &case.known_failure {
                    misc.insert(
                        "known_failure".into(),
                        json!({"entry": text(&k.entry, MAX_TEXT), "reason": text(&k.reason, MAX_TEXT)}),
                    );
                    self.known_incident(k, &id);
                }
            }
            t.insert("misc".into(), misc.into());
            case_ids.push((case, id));
            tests.push(t);
        }

        // Kernel reports: in the misc of the test they belong to, and as
        // an issue (what the report is) with an incident (where it was).
        let reports = cell.vm.as_ref().map_or(&[][..], |v| &v.kernel_reports[..]);
        for r in reports {
            let at = target(r, &case_ids).map_or(0, |i| i + 1);
            let test_id = if at == 0 {
                cell_test_id.clone()
            } else {
                case_ids[at - 1].1.clone()
            };
            attach(&mut tests[at], r);
            self.incident(r, &test_id);
        }
        self.tests.extend(tests.into_iter().map(Value::Object));
    }

    fn checkout(&mut self, k: &Kernel<'_>) -> String {
        let hashes = k.patch_hashes();
        let patchset = patchset_hash(&hashes);
        let id = self.id(&["checkout", &k.source_identity(), &patchset]);
        if !self.first(&id) {
            return id;
        }
        let mut c = Map::new();
        c.insert("id".into(), id.clone().into());
        c.insert("origin".into(), self.opts.origin.clone().into());
        put(&mut c, "start_time", timestamp(self.run.started));
        let mut misc = Map::new();
        misc.insert("kernel".into(), k.label.into());
        if let Some(f) = k.facts {
            c.insert("valid".into(), true.into());
            put(
                &mut c,
                "tree_name",
                f.tree_name.as_deref().map(|t| text(t, 200)),
            );
            put(
                &mut c,
                "git_repository_url",
                f.git_url
                    .clone()
                    .filter(|u| !u.contains(char::is_whitespace)),
            );
            put(
                &mut c,
                "git_commit_hash",
                f.git_commit.clone().filter(|h| {
                    h.len() == 40
                        && h.bytes()
                            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                }),
            );
            put(
                &mut c,
                "git_repository_branch",
                f.git_ref.as_deref().map(|r| text(r, 200)),
            );
            if f.kind == "source" {
                c.insert("patchset_hash".into(), patchset.into());
                if let Some(base) = self
                    .opts
                    .log_base_url
                    .as_deref()
                    .filter(|_| !f.patches.is_empty())
                {
                    let files: Vec<Value> = f
                        .patches
                        .iter()
                        .map(|p| {
                            let name = p.name.rsplit('/').next().unwrap_or(&p.name);
                            let segs: Vec<&str> = std::iter::once("patches")
                                .chain(p.name.split('/'))
                                .collect();
                            json!({"name": path_safe_name(name), "url": url(base, &segs)})
                        })
                        .collect();
                    c.insert("patchset_files".into(), files.into());
                }
            }
            c.insert(
                "comment".into(),
                text(&format!("{} ({})", f.source, f.kind), MAX_TEXT).into(),
            );
            misc.insert("kind".into(), f.kind.clone().into());
            misc.insert("source".into(), text(&f.source, MAX_TEXT).into());
            put(&mut misc, "version", f.version.clone());
            if !f.patches.is_empty() {
                misc.insert(
                    "patches".into(),
                    serde_json::to_value(&f.patches).unwrap_or_default(),
                );
            }
        }
        c.insert("misc".into(), misc.into());
        self.checkouts.push(c.into());
        id
    }

    fn build(&mut self, k: &Kernel<'_>, checkout_id: &str) -> String {
        let identity = k.build_identity();
        let id = self.id(&["build", &identity]);
        if !self.first(&id) {
            return id;
        }
        let mut b = Map::new();
        b.insert("id".into(), id.clone().into());
        b.insert("origin".into(), self.opts.origin.clone().into());
        b.insert("checkout_id".into(), checkout_id.into());
        // KCIDB's architecture names are the kernel's `ARCH=` words.
        let arch = k
            .facts
            .and_then(|f| f.arch.as_deref())
            .unwrap_or(ARCHITECTURE);
        b.insert("architecture".into(), arch.into());
        let mut misc = Map::new();
        misc.insert("kernel".into(), k.label.into());
        misc.insert("build".into(), text(&identity, MAX_TEXT).into());
        match k.facts {
            Some(f) => {
                b.insert("status".into(), "PASS".into());
                b.insert("config_name".into(), text(&f.config, 200).into());
                put(
                    &mut b,
                    "compiler",
                    f.compiler.as_deref().map(|c| text(c, 200)),
                );
                put(
                    &mut b,
                    "comment",
                    Some(text(&f.description, MAX_TEXT)).filter(|d| !d.is_empty()),
                );
                if f.kind == "source" || f.kind == "tree" {
                    put(&mut b, "duration", f.build_seconds);
                    put(&mut b, "start_time", f.build_started.and_then(timestamp));
                    if let (Some(base), Some(log)) = (&self.opts.log_base_url, &f.build_log) {
                        let segs: Vec<&str> =
                            std::iter::once("kbuild").chain(log.split('/')).collect();
                        b.insert("log_url".into(), url(base, &segs).into());
                    }
                }
                misc.insert("kind".into(), f.kind.clone().into());
                put(&mut misc, "version", f.version.clone());
            }
            None => {
                b.insert("config_name".into(), text(k.label, 200).into());
            }
        }
        b.insert("misc".into(), misc.into());
        self.builds.push(b.into());
        id
    }

    /// Where and on what a cell ran: in `misc`, the topology (nodes, CPUs,
    /// memory, distances), the accelerator, QEMU and the expectations row.
    fn environment(&self, cell: &Cell) -> Value {
        let vm = cell.vm.as_ref();
        let accel = vm.map(|v| v.accel.clone()).filter(|a| !a.is_empty());
        let qemu = vm
            .map(|v| v.qemu_version.clone())
            .filter(|q| !q.is_empty())
            .or_else(|| Some(self.run.qemu_version.clone()).filter(|q| !q.is_empty()));
        let mut topology = Map::new();
        topology.insert("name".into(), cell.topology.clone().into());
        if let Some(l) = &cell.topology_layout {
            let nodes: Vec<Value> = l
                .nodes
                .iter()
                .map(|n| json!({"cpus": n.cpus, "memory_mib": n.mem_mib}))
                .collect();
            topology.insert("nodes".into(), nodes.into());
            topology.insert(
                "cpus".into(),
                l.nodes.iter().map(|n| n.cpus).sum::<u64>().into(),
            );
            topology.insert(
                "memory_mib".into(),
                l.nodes.iter().map(|n| n.mem_mib).sum::<u64>().into(),
            );
            put(&mut topology, "distances", l.distances.clone());
        }
        let mut misc = Map::new();
        misc.insert("topology".into(), topology.into());
        put(&mut misc, "accel", accel.clone());
        put(&mut misc, "qemu_version", qemu);
        put(&mut misc, "expect", cell.expect.clone());
        put(
            &mut misc,
            "harness_version",
            Some(self.run.harness_version.clone()).filter(|v| !v.is_empty()),
        );
        let comment = format!(
            "QEMU {} VM, topology {}",
            accel.as_deref().unwrap_or("(not booted)"),
            cell.topology
        );
        json!({"comment": text(&comment, MAX_TEXT), "misc": misc})
    }

    /// The cell's console log and JUnit, under `--log-base-url`.
    fn output_files(&self, cell: &Cell) -> Option<Value> {
        let base = self.opts.log_base_url.as_deref()?;
        let vm = cell.vm.as_ref()?;
        let dir = Some(cell.out_dir.as_str()).filter(|d| !d.is_empty())?;
        let dir = std::path::Path::new(dir).file_name()?.to_str()?;
        let mut files = Vec::new();
        if let Some(log) = vm.console_log.as_deref() {
            let name = std::path::Path::new(log).file_name()?.to_str()?;
            files.push(json!({"name": path_safe_name(name), "url": url(base, &[dir, name])}));
        }
        files.push(json!({"name": "junit.xml", "url": url(base, &[dir, "junit.xml"])}));
        Some(files.into())
    }

    /// An xfail's known failure as an issue (the matrix entry) with an
    /// incident at the test: how KCIDB marks a failure as already known.
    fn known_incident(&mut self, k: &super::results::KnownFailureRef, test_id: &str) {
        let issue_id = self.id(&["known-failure", &k.entry]);
        if self.first(&issue_id) {
            self.issues.push(json!({
                "id": issue_id,
                "version": 1,
                "origin": self.opts.origin,
                "comment": text(&format!("known failure ({}): {}", k.entry, k.reason), MAX_TEXT),
                "misc": {"known_failure": text(&k.entry, MAX_TEXT)},
            }));
        }
        self.present_at(&issue_id, test_id, &k.reason);
    }

    /// An incident: issue `issue_id` (version 1) seen at `test_id`.
    fn present_at(&mut self, issue_id: &str, test_id: &str, comment: &str) {
        let incident_id = self.id(&["incident", issue_id, test_id]);
        if self.first(&incident_id) {
            self.incidents.push(json!({
                "id": incident_id,
                "origin": self.opts.origin,
                "issue_id": issue_id,
                "issue_version": 1,
                "test_id": test_id,
                "present": true,
                "comment": text(comment, MAX_TEXT),
            }));
        }
    }

    fn incident(&mut self, r: &KernelReport, test_id: &str) {
        let signature = text(&report_signature(&r.kind, &r.title), 1000);
        let issue_id = self.id(&["issue", &signature]);
        if self.first(&issue_id) {
            self.issues.push(json!({
                "id": issue_id,
                "version": 1,
                "origin": self.opts.origin,
                "comment": signature,
                "culprit": {"code": true, "tool": false, "harness": false},
                "misc": {"kind": r.kind, "title": text(&r.title, MAX_TEXT)},
            }));
        }
        self.present_at(&issue_id, test_id, &r.title);
    }
}

/// The case a kernel report belongs to: `<test>/kernel-<kind>` (the case
/// the verdict made of it), else the first failing case of its test (an
/// incomplete one), else none (the cell's own test).
fn target(r: &KernelReport, cases: &[(&Case, String)]) -> Option<usize> {
    let test = r.test.as_deref().unwrap_or("boot");
    let own = format!("{test}/kernel-{}", r.kind);
    let prefix = format!("{test}/");
    cases.iter().position(|(c, _)| c.name == own).or_else(|| {
        cases.iter().position(|(c, _)| {
            c.status == "fail" && (c.name == test || c.name.starts_with(&prefix))
        })
    })
}

/// Adds a report to a test's `misc.kernel_reports` and `log_excerpt`.
fn attach(test: &mut Map<String, Value>, r: &KernelReport) {
    let entry = json!({
        "kind": r.kind,
        "title": text(&r.title, MAX_TEXT),
        "console_line": r.line,
        "excerpt": text(&r.excerpt, MAX_TEXT),
    });
    if let Some(Value::Object(misc)) = test.get_mut("misc") {
        match misc.get_mut("kernel_reports") {
            Some(Value::Array(a)) => a.push(entry),
            _ => {
                misc.insert("kernel_reports".into(), vec![entry].into());
            }
        }
    }
    let mut excerpt = test
        .get("log_excerpt")
        .and_then(|e| e.as_str())
        .map(|e| format!("{e}\n\n"))
        .unwrap_or_default();
    excerpt.push_str(&r.excerpt);
    test.insert("log_excerpt".into(), text(&excerpt, MAX_EXCERPT).into());
}
