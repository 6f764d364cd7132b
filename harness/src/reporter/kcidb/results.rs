//! The JSON results file (docs/results.md) as the KCIDB converter reads
//! it: every field optional, so a file written before a field existed
//! still converts (with less in the document). The `--kcidb` reporter
//! reads its cells through the same types, so a run's document and a
//! later `harness report kcidb` of its `--json` file are the same.

use crate::events::KernelFacts;
use serde::Deserialize;

/// A whole results file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Results {
    /// The layout's version (1).
    pub schema_version: u32,
    /// The run's metadata.
    pub run: Run,
    /// Every cell, in report order.
    pub cells: Vec<Cell>,
}

/// `run` of the results file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Run {
    /// The harness's version.
    pub harness_version: String,
    /// QEMU's version line.
    pub qemu_version: String,
    /// CPUs of the host.
    pub host_cpus: u64,
    /// When the run started, seconds since the epoch.
    pub started: f64,
}

/// One cell.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Cell {
    /// Unique cell name.
    pub name: String,
    /// Kernel as written.
    pub kernel: String,
    /// The matrix's name of the kernel.
    pub kernel_name: String,
    /// Topology name or spec.
    pub topology: String,
    /// Suite name.
    pub suite: String,
    /// The expectations row.
    pub expect: Option<String>,
    /// `passed`, `failed`, `error`, `interrupted`, `not-run`.
    pub status: String,
    /// Why, for `error` and `not-run`.
    pub error: Option<String>,
    /// Wall time of the cell.
    pub duration_s: f64,
    /// What the VM did, when one booted.
    pub vm: Option<Vm>,
    /// The reported cases.
    pub cases: Vec<Case>,
    /// The cell's output directory.
    pub out_dir: Option<String>,
    /// The kernel's source and build.
    pub kernel_facts: Option<KernelFacts>,
    /// The VM's nodes and distances.
    pub topology_layout: Option<Layout>,
    /// Benchmark summaries.
    pub bench: Vec<Bench>,
}

/// `vm` of a cell.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Vm {
    /// `kvm` or `tcg`.
    pub accel: String,
    /// QEMU's version line.
    pub qemu_version: String,
    /// How the VM ended, in words.
    pub end: String,
    /// When the cell's VM started, seconds since the epoch.
    pub started: f64,
    /// The console log.
    pub console_log: Option<String>,
    /// Kernel reports the console scanner found.
    pub kernel_reports: Vec<KernelReport>,
}

/// One kernel report (panic, Oops, WARNING, lockup, KASAN, ...).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct KernelReport {
    /// `panic`, `oops`, `warning`, `soft-lockup`, `kasan`, ...
    pub kind: String,
    /// The top-level guest test running when it was printed.
    pub test: Option<String>,
    /// Its first console line (1-based).
    pub line: u64,
    /// The line that says what happened.
    pub title: String,
    /// The report's text, bounded.
    pub excerpt: String,
}

/// One case.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Case {
    /// `binary/case`.
    pub name: String,
    /// `pass`, `fail`, `xfail` or `skip`.
    pub status: String,
    /// Failure message or skip reason.
    pub message: Option<String>,
    /// The matrix entry that expects this failure (`xfail` only).
    pub known_failure: Option<KnownFailureRef>,
}

/// `known_failure` of an `xfail` case.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct KnownFailureRef {
    /// Where the entry is declared (`matrix.yaml:85:9`).
    pub entry: String,
    /// Why it is accepted.
    pub reason: String,
}

/// A topology's nodes and distances.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Layout {
    /// Nodes in id order.
    pub nodes: Vec<Node>,
    /// The distance matrix, when declared.
    pub distances: Option<Vec<Vec<u32>>>,
}

/// One NUMA node.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Node {
    /// vCPUs.
    pub cpus: u64,
    /// Memory, MiB.
    pub mem_mib: u64,
}

/// One benchmark configuration's summary (`# BENCH` line).
#[derive(Debug, Clone, Default, Deserialize)]
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
    pub n: u64,
    /// Worker threads.
    pub threads: u64,
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
