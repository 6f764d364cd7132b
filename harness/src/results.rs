//! The JSON results file (`--json FILE`, docs/results.md) as types: the
//! JSON reporter writes them, the KCIDB converter and the xtask read them,
//! and `docs/results.schema.json` is generated from them ([`schema`]).
//!
//! Readers accept a file written before a field existed: every struct
//! takes its `Default` for a missing field. The schema describes what the
//! writer writes (schemars' serialize contract: a field is required unless
//! it is skipped when empty) and closes every object, so a field the
//! writer never writes is refused there, not by the readers.
//!
//! Fields are plain strings and numbers where older files may hold words
//! this harness no longer knows; their allowed words are in the schema,
//! taken from the lists that define them (report kinds, boot-retry
//! signatures, phases).

use crate::events::KernelFacts;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The version of the document's layout; bump it on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Longest untrusted string kept (guest output is unbounded), in bytes.
pub const MAX_MESSAGE: usize = 4096;

/// A whole results file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
#[schemars(
    title = "futex-harness results file, schema_version 1",
    description = "What `harness run --json FILE` and `harness matrix --json FILE` write. Generated from harness/src/results.rs by `cargo xtask results-schema`; the prose is docs/results.md. Every object is closed. Times are seconds since the Unix epoch (numbers); durations are seconds."
)]
pub struct Results {
    /// The layout's version (1).
    #[schemars(extend("const" = 1))]
    pub schema_version: u32,
    /// The run's metadata.
    pub run: Run,
    /// Every cell of the run in report order, listed as not-run from the start.
    pub cells: Vec<Cell>,
}

/// `run` of the results file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Run {
    /// The harness's version.
    pub harness_version: String,
    /// The first line of `qemu-system-x86_64 --version`.
    pub qemu_version: String,
    /// CPUs the harness may use (0 when unknown).
    pub host_cpus: usize,
    /// When the run started, seconds since the epoch.
    #[schemars(range(min = 0))]
    pub started: f64,
    /// Known-failure entries of the matrix, not intermittent, whose case
    /// ran in a cell they apply to but that excused no failure in the
    /// whole run: the bug is gone or its message changed.
    pub stale_known_failures: Vec<KnownFailureEntry>,
    /// Intermittent known-failure entries (a race that fires in some runs
    /// only) whose case ran in a cell they apply to but that did not fire
    /// in this run. One run cannot call them stale.
    pub unseen_known_failures: Vec<KnownFailureEntry>,
    /// The run's totals; present once the run finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<Stats>,
}

/// A `known_failures` entry of the matrix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct KnownFailureEntry {
    /// Where it is declared: `FILE:LINE:COLUMN`.
    pub entry: String,
    /// The suite it applies to.
    pub suite: String,
    /// Glob over case names.
    pub case: String,
    /// Glob over the failure message.
    pub message: String,
    /// The kernels it is seen on.
    #[schemars(length(min = 1))]
    pub kernels: Vec<String>,
    /// Why it is accepted.
    pub reason: String,
    /// How often the failure was seen, as measured (intermittent entries only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intermittent: Option<String>,
}

/// `run.stats`: where the run's time went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Stats {
    /// Preparing the run (kernels, guest binaries), seconds.
    #[schemars(range(min = 0))]
    pub prepare_s: f64,
    /// Wall time of the cells, seconds.
    #[schemars(range(min = 0))]
    pub cells_wall_s: f64,
    /// QEMU CPU time of the cells, seconds.
    #[schemars(range(min = 0))]
    pub cells_cpu_s: f64,
    /// Whether the run was interrupted.
    pub interrupted: bool,
    /// `prepare_s` plus the sum of the wall times of the cells that ran:
    /// the denominator of every phase's share.
    #[schemars(range(min = 0))]
    pub work_s: f64,
    /// Each phase summed over the cells that ran (prepare: the run's),
    /// with its share of `work_s`; every phase, always.
    #[schemars(schema_with = "run_phases_schema")]
    pub phases: BTreeMap<String, RunPhase>,
}

/// One phase of `run.stats.phases`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RunPhase {
    /// Seconds.
    #[schemars(range(min = 0))]
    pub s: f64,
    /// Its share of `work_s`.
    #[schemars(range(min = 0, max = 1))]
    pub share: f64,
}

/// One cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
// Which fields a cell that did not run has is a rule across fields, which
// no type says.
#[schemars(extend(
    "if" = {"properties": {"status": {"enum": ["error", "not-run"]}}},
    "then" = {
        "description": "A cell that did not run: says why, booted nothing, has no cases.",
        "properties": {"error": {"type": "string"}, "vm": {"type": "null"}, "cases": {"maxItems": 0}}
    },
    "else" = {
        "description": "A cell that ran: judged from what its VM produced.",
        "properties": {"error": {"type": "null"}, "vm": {"type": "object"}}
    }
))]
pub struct Cell {
    /// Unique cell name.
    pub name: String,
    /// The kernel as written (`debian:7.3.4`, `source:7.3`, `path:...`, `tree:...`).
    pub kernel: String,
    /// The matrix's name of the kernel (else the same as `kernel`).
    pub kernel_name: String,
    /// The guest architecture (`x86_64`, `arm64`); absent in results
    /// written before there were two, which were x86-64.
    #[serde(default = "x86_64")]
    #[schemars(extend("enum" = ["x86_64", "arm64"]))]
    pub arch: String,
    /// Topology name or spec.
    pub topology: String,
    /// Suite name.
    pub suite: String,
    /// The `--expect` the futex binaries get (`key=value,...`), when known.
    pub expect: Option<String>,
    /// How the cell ended.
    #[schemars(extend("enum" = ["passed", "failed", "error", "interrupted", "not-run"]))]
    pub status: String,
    /// Why, for an `error` or `not-run` cell; null otherwise.
    #[schemars(length(max = MAX_MESSAGE))]
    pub error: Option<String>,
    /// Wall time of the cell, seconds.
    #[schemars(range(min = 0))]
    pub duration_s: f64,
    /// The cell's cases by status.
    pub counts: Counts,
    /// What the VM did; null when nothing booted.
    pub vm: Option<Vm>,
    /// The reported cases.
    pub cases: Vec<Case>,
    /// The cell's output directory.
    pub out_dir: String,
    /// Where the kernel came from; null for a cell never planned.
    pub kernel_facts: Option<KernelFacts>,
    /// The VM's nodes and distances; null for a cell never planned.
    pub topology_layout: Option<Layout>,
    /// The `# BENCH` summaries the cell's tests printed.
    pub bench: Vec<Bench>,
    /// How a repeated cell (`--repeat`, `--until-fail`) repeated; null otherwise.
    pub repeat: Option<CellRepeat>,
}

/// A cell's cases by status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Counts {
    /// Passed.
    pub pass: usize,
    /// Failed.
    pub fail: usize,
    /// Failures a known-failure entry of the matrix names exactly.
    pub xfail: usize,
    /// Skipped.
    pub skip: usize,
}

/// `vm` of a cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Vm {
    /// The accelerator.
    #[schemars(extend("enum" = ["kvm", "tcg"]))]
    pub accel: String,
    /// QEMU's version line.
    pub qemu_version: String,
    /// How the VM ended, in words (e.g. `guest-init finished the plan`).
    pub end: String,
    /// When the cell's VM started, seconds since the epoch.
    #[schemars(range(min = 0))]
    pub started: f64,
    /// The kinds of kernel reports found, sorted, each once.
    #[schemars(schema_with = "report_kinds_schema")]
    pub console_reports: Vec<String>,
    /// Where the full console log was kept.
    pub console_log: Option<String>,
    /// Notes on the cell (bounded).
    pub notes: Vec<String>,
    /// The boots that crashed before guest-init spoke with a known
    /// signature and were booted again, in order; empty for one boot. Any
    /// other boot crash is not retried (docs/reliability.md, Boot retries).
    pub boot_retries: Vec<BootRetry>,
    /// Kernel reports the console scanner found.
    pub kernel_reports: Vec<KernelReport>,
    /// Where the cell's (last boot's) time went.
    pub profile: Profile,
    /// QEMU's command line of the last boot, shell-quoted (`qemu-argv.txt`;
    /// the harness's own words, not the guest's). Empty in files written
    /// before it was recorded.
    pub qemu_command: String,
}

/// A boot that crashed with a known signature and was booted again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct BootRetry {
    /// The crash signature that matched (harness/src/cell/boot_retry.rs, `SIGNATURES`).
    #[schemars(schema_with = "signature_schema")]
    pub signature: String,
    /// Which boot of the cell crashed (1: the first).
    #[schemars(range(min = 1))]
    pub attempt: u32,
    /// The console line that matched (guest output: printable, bounded).
    #[schemars(length(max = MAX_MESSAGE))]
    pub line: String,
}

/// One kernel report (panic, Oops, WARNING, lockup, KASAN, ...).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct KernelReport {
    /// The kind (harness/src/console.rs).
    #[schemars(schema_with = "report_kind_schema")]
    pub kind: String,
    /// The top-level guest test running when it was printed, if any.
    pub test: Option<String>,
    /// The case of `test` running when it was printed (the case it
    /// failed), if the binary marks its cases.
    pub case: Option<String>,
    /// 1-based console line of the report's first line.
    #[schemars(range(min = 1))]
    pub line: usize,
    /// The line that says what happened.
    #[schemars(length(max = MAX_MESSAGE))]
    pub title: String,
    /// The report's text, bounded.
    #[schemars(length(max = MAX_MESSAGE))]
    pub excerpt: String,
}

/// Where a cell's time went, from host instants (harness/src/profile.rs;
/// README.md, Where the time goes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Profile {
    /// Seconds per phase; with the run's prepare left out they add up to
    /// the cell's `duration_s`.
    #[schemars(schema_with = "cell_phases_schema")]
    pub phases: BTreeMap<String, f64>,
    /// Each test binary in the order it ran, begin marker to end marker as
    /// they reached the host.
    pub tests: Vec<ProfileTest>,
}

/// One test binary of a cell's profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ProfileTest {
    /// Its KTAP test number, when known.
    #[schemars(range(min = 1))]
    pub number: Option<usize>,
    /// Its name.
    #[schemars(length(max = MAX_MESSAGE))]
    pub name: String,
    /// Seconds.
    #[schemars(range(min = 0))]
    pub s: f64,
}

/// One case.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
// A message and a known failure depend on the status: a rule across
// fields, which no type says.
#[schemars(extend(
    "if" = {"properties": {"status": {"const": "pass"}}},
    "then" = {"properties": {"message": {"type": "null"}}},
    "else" = {
        "properties": {"message": {"type": "string"}},
        "if": {"properties": {"status": {"const": "xfail"}}},
        "then": {"required": ["known_failure"]},
        "else": {"properties": {"known_failure": false}}
    }
))]
pub struct Case {
    /// `test/case`, e.g. `futex-numa/flag-accepted`.
    #[schemars(length(max = MAX_MESSAGE))]
    pub name: String,
    /// `xfail`: the case failed exactly as a known-failure entry of the
    /// matrix says (`known_failure` names it); its own status, never a
    /// pass or a skip.
    #[schemars(extend("enum" = ["pass", "fail", "xfail", "skip"]))]
    pub status: String,
    /// Why it failed or was skipped; null for a pass.
    #[schemars(length(max = MAX_MESSAGE))]
    pub message: Option<String>,
    /// Only for `xfail`: the matrix entry that expects the failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known_failure: Option<KnownFailureRef>,
    /// Only in a repeated cell: the case over all iterations (fail when it
    /// failed in any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat: Option<CaseRepeat>,
}

/// `known_failure` of an `xfail` case.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct KnownFailureRef {
    /// Where the entry is declared: `FILE:LINE:COLUMN`.
    #[schemars(length(max = MAX_MESSAGE))]
    pub entry: String,
    /// Why it is accepted.
    #[schemars(length(max = MAX_MESSAGE))]
    pub reason: String,
}

/// `repeat` of a case in a repeated cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CaseRepeat {
    /// Iterations the case ran in.
    pub runs: u32,
    /// Iterations it failed in.
    pub failures: u32,
    /// The first failing iteration, 1-based; null when none failed.
    #[schemars(range(min = 1))]
    pub first_failure: Option<u32>,
}

/// `repeat` of a repeated cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CellRepeat {
    /// `--repeat N`, or `--until-fail`'s `--max N`.
    #[schemars(range(min = 1))]
    pub times: u32,
    /// `--until-fail`.
    pub until_fail: bool,
    /// `--fresh-boot`.
    pub fresh_boot: bool,
    /// Iterations that ran (fewer when `--until-fail` stopped).
    pub iterations: u32,
    /// The first failing iteration, 1-based; null when none failed.
    #[schemars(range(min = 1))]
    pub first_failure: Option<u32>,
    /// Where the first failing iteration's console and KTAP were kept.
    pub failing_iteration_logs: Option<String>,
}

/// A topology's nodes and distances.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Layout {
    /// Nodes in id order.
    #[schemars(length(min = 1))]
    pub nodes: Vec<Node>,
    /// The declared distance matrix, row per node; null when none was declared.
    pub distances: Option<Vec<Vec<u8>>>,
}

/// One NUMA node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Node {
    /// vCPUs (0: a CPU-less node).
    pub cpus: u64,
    /// Memory in MiB (0: a memory-less node).
    pub mem_mib: u64,
}

/// One benchmark configuration's summary (`# BENCH` line).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Bench {
    /// The top-level test that printed it (`futex-bench`).
    pub test: String,
    /// Configuration name (the case is `<test>/<config>`).
    pub config: String,
    /// The configuration, encoded.
    pub spec: String,
    /// Mean total operations per second over the rounds.
    pub ops_per_s: f64,
    /// Their standard deviation.
    pub sd: f64,
    /// Rounds.
    pub n: usize,
    /// The slowest round.
    pub min: f64,
    /// The fastest round.
    pub max: f64,
    /// Worker threads.
    pub threads: usize,
}

impl Layout {
    /// A canonical rendering (`2c512M,2c512M;10,20/20,10`): part of test
    /// ids, so two topologies of one name but other shapes never share one.
    pub fn canonical(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("{}c{}M", n.cpus, n.mem_mib))
            .collect();
        let mut s = nodes.join(",");
        if let Some(d) = &self.distances {
            let rows: Vec<String> = d
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect();
            s.push(';');
            s.push_str(&rows.join("/"));
        }
        s
    }
}

/// The report kinds the console scanner knows, as schema words.
fn report_kind_schema(_: &mut SchemaGenerator) -> Schema {
    let kinds: Vec<&str> = crate::console::ReportKind::ALL
        .iter()
        .map(|k| k.name())
        .collect();
    json_schema!({"enum": kinds})
}

fn report_kinds_schema(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": report_kind_schema(generator), "uniqueItems": true})
}

fn signature_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = crate::cell::boot_retry::SIGNATURES
        .iter()
        .map(|s| s.name)
        .collect();
    json_schema!({"enum": names})
}

/// An object with exactly the words of `phases` as keys, each a `value`.
fn phases_schema(phases: &[crate::profile::Phase], value: Schema) -> Schema {
    let words: Vec<&str> = phases.iter().map(|p| p.word()).collect();
    let properties: serde_json::Map<String, serde_json::Value> = words
        .iter()
        .map(|w| (w.to_string(), value.clone().to_value()))
        .collect();
    json_schema!({"type": "object", "required": words, "properties": properties})
}

fn run_phases_schema(generator: &mut SchemaGenerator) -> Schema {
    phases_schema(
        &crate::profile::Phase::ALL,
        generator.subschema_for::<RunPhase>(),
    )
}

fn cell_phases_schema(_: &mut SchemaGenerator) -> Schema {
    // A cell has every phase but the run's prepare.
    phases_schema(
        &crate::profile::Phase::ALL[1..],
        json_schema!({"type": "number", "minimum": 0}),
    )
}

/// Closes every object schema that lists its properties: the schema
/// refuses a field the writer never writes, while the readers (no
/// `deny_unknown_fields`) still read a file with one.
#[derive(Clone)]
struct Closed;

impl schemars::transform::Transform for Closed {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(o) = schema.as_object_mut() {
            // The generated per-field defaults say how readers fill a gap,
            // not what the writer writes.
            o.remove("default");
            // Only typed objects: the `if`/`then`/`else` parts list some
            // properties of an object and must stay open.
            let typed = o.get("type").and_then(|t| t.as_str()) == Some("object");
            if typed && o.contains_key("properties") && !o.contains_key("additionalProperties") {
                o.insert("additionalProperties".into(), false.into());
            }
        }
        schemars::transform::transform_subschemas(self, schema);
    }
}

/// The JSON Schema (draft 2020-12) of what the writer writes:
/// `docs/results.schema.json` is this, rendered by [`schema_text`].
pub fn schema() -> Schema {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(Closed)
        .into_generator()
        .into_root_schema_for::<Results>()
}

/// [`schema`] as the text of `docs/results.schema.json`.
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// The architecture of a cell in results written before there were two.
fn x86_64() -> String {
    crate::arch::Arch::X86_64.name().to_string()
}
