//! The declared NUMA topology against what the guest kernel shows in sysfs.
//!
//! The host passes the topology it gave QEMU to the `topology` binary as
//! `--nodes 0:0-1:512M,1:2-3:512M`: nodes separated by `,`, each
//! `ID:CPUS:MEMORY`. Inside one node, CPU ranges are joined with `+`
//! (`0:0-1+4:512M`) because `,` separates nodes; a memory-only node has an
//! empty CPU list (`2::256M`). Memory takes a binary suffix as QEMU does:
//! `K`, `M`, `G` or `T` (KiB, MiB, ...); a bare number is rejected. A node
//! that must be possible but not online (no CPUs, no boot memory, only a
//! hot-pluggable range) is `ID:offline` (`2:offline`).
//!
//! [`observe`] reads sysfs/procfs under a root directory (so tests can use a
//! fake tree), [`evaluate`] compares; both never panic, and every failure
//! message names the expected and the seen value. The node distances (the
//! SLIT) are compared in [`distance`].

pub mod distance;

use crate::ktap::Outcome;
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::cpulist::CpuSet;
use crate::cpulist::{format as format_cpulist, parse as parse_cpulist};

/// A node's MemTotal must be at least this percentage of the declared size
/// (and at most all of it): the kernel keeps its image, page structs and
/// early allocations out of MemTotal, which costs a few percent to a few
/// tens of MiB per node — and KASAN's shadow (1/8) and debug structures a
/// third (measured: 340304 kB of 512 MiB on the 7.3-debug kernel, 66%).
/// Half the declared size (a node of the wrong size) still fails.
pub const MEM_MIN_PERCENT: u64 = 60;

/// One declared node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// NUMA node id.
    pub id: u32,
    /// Its CPUs.
    pub cpus: CpuSet,
    /// Its memory in bytes.
    pub mem_bytes: u64,
}

/// A `--nodes` value: the online nodes and the possible-but-offline ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// The online nodes, with their CPUs and memory.
    pub nodes: Vec<NodeSpec>,
    /// Ids of the nodes that must be possible but not online.
    pub offline: Vec<u32>,
}

/// Parses a `--nodes` value with `ID:offline` entries (the module docs):
/// the other entries as [`parse_nodes`] does; an offline id must not be
/// declared twice or be an online node too.
pub fn parse_declared(s: &str) -> Result<Declared, String> {
    let mut offline: Vec<u32> = Vec::new();
    let mut online = Vec::new();
    for part in s.split(',') {
        match part.split_once(':') {
            Some((id, "offline")) => {
                let id: u32 = id.trim().parse().map_err(|_| {
                    format!("offline node {part:?}: node id {id:?} is not a number")
                })?;
                if offline.contains(&id) {
                    return Err(format!("offline node {id} declared twice"));
                }
                offline.push(id);
            }
            _ => online.push(part),
        }
    }
    let nodes = parse_nodes(&online.join(","))?;
    if let Some(n) = nodes.iter().find(|n| offline.contains(&n.id)) {
        return Err(format!("node {} declared online and offline", n.id));
    }
    Ok(Declared { nodes, offline })
}

/// Parses a `--nodes` value (see the module docs). Rejects duplicate node
/// ids, a CPU in two nodes, zero memory and an empty list.
pub fn parse_nodes(s: &str) -> Result<Vec<NodeSpec>, String> {
    let mut nodes: Vec<NodeSpec> = Vec::new();
    if s.trim().is_empty() {
        return Err("empty node list; expected e.g. 0:0-1:512M,1:2-3:512M".into());
    }
    for (i, part) in s.split(',').enumerate() {
        let ctx = |e: String| format!("node {} ({part:?}): {e}", i + 1);
        let fields: Vec<&str> = part.split(':').collect();
        let [id, cpus, mem] = fields[..] else {
            return Err(ctx("expected ID:CPUS:MEMORY, e.g. 0:0-1:512M".into()));
        };
        let id: u32 = id
            .trim()
            .parse()
            .map_err(|_| ctx(format!("node id {id:?} is not a number")))?;
        let cpus = parse_cpulist(&cpus.replace('+', ",")).map_err(ctx)?;
        let mem_bytes = parse_size(mem).map_err(ctx)?;
        if mem_bytes == 0 {
            return Err(ctx("memory must not be zero".into()));
        }
        if nodes.iter().any(|n| n.id == id) {
            return Err(ctx(format!("node {id} declared twice")));
        }
        if let Some(n) = nodes.iter().find(|n| !n.cpus.is_disjoint(&cpus)) {
            let both: CpuSet = n.cpus.intersection(&cpus).copied().collect();
            return Err(ctx(format!(
                "cpus {} are also in node {}",
                format_cpulist(&both),
                n.id
            )));
        }
        nodes.push(NodeSpec {
            id,
            cpus,
            mem_bytes,
        });
    }
    Ok(nodes)
}

/// Parses a memory size with a binary suffix: `512M`, `1G`, `64K`, `1T`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, shift) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 10),
        Some((i, 'M' | 'm')) => (&s[..i], 20),
        Some((i, 'G' | 'g')) => (&s[..i], 30),
        Some((i, 'T' | 't')) => (&s[..i], 40),
        _ => {
            return Err(format!(
                "memory {s:?} needs a unit suffix: K, M, G or T (e.g. 512M)"
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("memory {s:?}: {digits:?} is not a number"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("memory {s:?} is too large"))
}

/// `MemTotal` in kB from a node's `meminfo` (`Node 0 MemTotal:  512000 kB`)
/// or from `/proc/meminfo` (`MemTotal:  512000 kB`).
pub fn parse_mem_total_kb(meminfo: &str) -> Result<u64, String> {
    for line in meminfo.lines() {
        let mut words = line.split_whitespace().peekable();
        if words.peek() == Some(&"Node") {
            words.next();
            words.next();
        }
        if words.next() != Some("MemTotal:") {
            continue;
        }
        return match (words.next().map(str::parse::<u64>), words.next()) {
            (Some(Ok(kb)), Some("kB")) => Ok(kb),
            _ => Err(format!("cannot parse MemTotal line {line:?}")),
        };
    }
    Err("no MemTotal line".into())
}

/// Whether `seen_kb` of MemTotal is plausible for `declared_bytes` of RAM:
/// between [`MEM_MIN_PERCENT`] and 100 percent.
pub fn memory_ok(declared_bytes: u64, seen_kb: u64) -> bool {
    let (lo, hi) = mem_bounds_kb(declared_bytes);
    (lo..=hi).contains(&seen_kb)
}

/// Present memory per node in kB from `/proc/zoneinfo`: the sum of each
/// zone's `present` pages (physical pages in the node's span, holes
/// excluded, early reservations included) at `page_kb` kB a page.
pub fn parse_zoneinfo_present_kb(zoneinfo: &str, page_kb: u64) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    let mut node: Option<u32> = None;
    for line in zoneinfo.lines() {
        let mut w = line.split_whitespace();
        match (w.next(), w.next()) {
            (Some("Node"), Some(id)) => {
                node = id.trim_end_matches(',').parse().ok();
            }
            (Some("present"), Some(pages)) => {
                if let (Some(n), Ok(p)) = (node, pages.parse::<u64>()) {
                    let e: &mut u64 = out.entry(n).or_default();
                    *e = e.saturating_add(p.saturating_mul(page_kb));
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether a node whose MemTotal failed [`memory_ok`] still has the
/// declared memory: MemTotal at most the declared size and the present
/// pages within 2% (at least 4 MiB: the BIOS hole and first page of node
/// 0) below it. A KASAN kernel on small nodes keeps MemTotal far lower
/// (its shadow and image are reserved before MemTotal is counted).
pub fn present_ok(declared_bytes: u64, mem_total_kb: u64, present_kb: u64) -> bool {
    let kb = declared_bytes / 1024;
    let slack = (kb / 50).max(4096);
    mem_total_kb <= kb && (kb.saturating_sub(slack)..=kb).contains(&present_kb)
}

fn mem_bounds_kb(declared_bytes: u64) -> (u64, u64) {
    let kb = declared_bytes / 1024;
    (kb * MEM_MIN_PERCENT / 100, kb)
}

/// One node as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenNode {
    /// Its `cpulist`, parsed.
    pub cpus: Result<CpuSet, String>,
    /// `MemTotal` from its `meminfo`, in kB.
    pub mem_kb: Result<u64, String>,
    /// Its `distance` row: to each online node, in id order.
    pub distance: Result<Vec<u32>, String>,
}

/// What the guest shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Whether `/sys/devices/system/node` exists (the kernel has NUMA).
    pub numa: bool,
    /// The `nodeN` directories.
    pub nodes: BTreeMap<u32, SeenNode>,
    /// `/sys/devices/system/cpu/online`.
    pub online: Result<CpuSet, String>,
    /// `/sys/devices/system/node/possible` (node ids, in cpulist format).
    pub possible_nodes: Result<CpuSet, String>,
    /// `/sys/devices/system/node/online`.
    pub online_nodes: Result<CpuSet, String>,
    /// `MemTotal` of `/proc/meminfo`, in kB.
    pub mem_total_kb: Result<u64, String>,
    /// Present memory per node (`/proc/zoneinfo`), in kB; empty if unread.
    pub present_kb: BTreeMap<u32, u64>,
}

/// Sysfs directory of NUMA nodes, relative to the root.
pub const NODE_DIR: &str = "sys/devices/system/node";
/// Online CPUs, relative to the root.
pub const ONLINE_CPUS: &str = "sys/devices/system/cpu/online";
/// The global meminfo, relative to the root.
pub const PROC_MEMINFO: &str = "proc/meminfo";
/// Per-zone page counts, relative to the root.
pub const PROC_ZONEINFO: &str = "proc/zoneinfo";

/// Reads what [`evaluate`] needs from sysfs and procfs under `root` (`/`
/// in the guest).
pub fn observe(root: &Path) -> Observed {
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let node_dir = root.join(NODE_DIR);
    let mut nodes = BTreeMap::new();
    let numa = node_dir.is_dir();
    if let Ok(entries) = std::fs::read_dir(&node_dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(Ok(id)) = name.strip_prefix("node").map(str::parse::<u32>) else {
                continue;
            };
            let dir = e.path();
            let seen = SeenNode {
                cpus: read(&dir.join("cpulist")).and_then(|s| parse_cpulist(&s)),
                mem_kb: read(&dir.join("meminfo")).and_then(|s| parse_mem_total_kb(&s)),
                distance: read(&dir.join("distance")).and_then(|s| distance::parse_row(&s)),
            };
            nodes.insert(id, seen);
        }
    }
    Observed {
        numa,
        nodes,
        online: read(&root.join(ONLINE_CPUS)).and_then(|s| parse_cpulist(&s)),
        possible_nodes: read(&node_dir.join("possible")).and_then(|s| parse_cpulist(&s)),
        online_nodes: read(&node_dir.join("online")).and_then(|s| parse_cpulist(&s)),
        mem_total_kb: read(&root.join(PROC_MEMINFO)).and_then(|s| parse_mem_total_kb(&s)),
        // zoneinfo counts pages: 4 KiB on x86-64, 4, 16 or 64 KiB on arm64.
        present_kb: read(&root.join(PROC_ZONEINFO))
            .map(|s| parse_zoneinfo_present_kb(&s, page_kb()))
            .unwrap_or_default(),
    }
}

/// This kernel's page size in KiB (4 when sysconf cannot say).
fn page_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(bytes).map_or(4, |b| (b / 1024).max(1))
}

/// One topology check, ready to be reported as a KTAP case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// KTAP case name.
    pub name: String,
    /// Diagnostics to print before the result, whatever it is.
    pub notes: Vec<String>,
    /// The result.
    pub outcome: Outcome,
}

/// Compares the declared topology with what was seen. Cases, in order:
/// `node-count`, `node<N>-cpus` and `node<N>-memory` for each declared node,
/// `online-cpus`. On a kernel without NUMA (no `/sys/devices/system/node`),
/// one declared node is compared with the whole machine (online CPUs,
/// `/proc/meminfo`), with a note; more than one node fails.
pub fn evaluate(declared: &[NodeSpec], seen: &Observed) -> Vec<Check> {
    let mut checks = Vec::new();
    let no_numa = format!("no /{NODE_DIR} (kernel without CONFIG_NUMA?)");
    let flat = !seen.numa && declared.len() == 1;
    let ids =
        |it: &mut dyn Iterator<Item = u32>| it.map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    let declared_ids = ids(&mut declared.iter().map(|n| n.id));

    let (outcome, notes) = if seen.numa {
        let n = seen.nodes.len();
        let outcome = Outcome::check(n == declared.len(), || {
            format!(
                "expected {} node(s) ({declared_ids}), seen {n} ({})",
                declared.len(),
                ids(&mut seen.nodes.keys().copied())
            )
        });
        (outcome, vec![])
    } else if flat {
        (
            Outcome::Pass,
            vec![format!(
                "{no_numa}; one node declared, so the whole machine is that node"
            )],
        )
    } else {
        (
            Outcome::Fail(format!(
                "expected {} node(s) ({declared_ids}), seen none: {no_numa}",
                declared.len()
            )),
            vec![],
        )
    };
    checks.push(Check {
        name: "node-count".into(),
        notes,
        outcome,
    });

    for node in declared {
        let id = node.id;
        let node_path = format!("/{NODE_DIR}/node{id}");
        let (cpus, mem, notes) = if flat {
            let note = format!("{no_numa}: comparing with /{ONLINE_CPUS} and /{PROC_MEMINFO}");
            (seen.online.clone(), seen.mem_total_kb.clone(), vec![note])
        } else {
            match seen.nodes.get(&id) {
                Some(s) => (s.cpus.clone(), s.mem_kb.clone(), vec![]),
                None => {
                    let e = if seen.numa {
                        format!("{node_path} does not exist")
                    } else {
                        no_numa.clone()
                    };
                    (Err(e.clone()), Err(e), vec![])
                }
            }
        };
        let want = format_cpulist(&node.cpus);
        checks.push(Check {
            name: format!("node{id}-cpus"),
            notes: notes.clone(),
            outcome: match cpus {
                Ok(c) => Outcome::check(c == node.cpus, || {
                    format!("expected cpus {want}, seen {}", format_cpulist(&c))
                }),
                Err(e) => Outcome::Fail(format!("expected cpus {want}, seen nothing: {e}")),
            },
        });
        let (lo, hi) = mem_bounds_kb(node.mem_bytes);
        let want = format!(
            "MemTotal {MEM_MIN_PERCENT}-100% of {} MiB ({lo}..={hi} kB)",
            node.mem_bytes >> 20
        );
        // Present pages: of this node, or of the only node when flat.
        let present = seen.present_kb.get(&id).copied().or_else(|| {
            (flat && seen.present_kb.len() == 1)
                .then(|| seen.present_kb.values().next().copied())
                .flatten()
        });
        let mut notes = notes;
        let outcome = match mem {
            Ok(kb) if memory_ok(node.mem_bytes, kb) => Outcome::Pass,
            Ok(kb) => match present {
                Some(p) if present_ok(node.mem_bytes, kb, p) => {
                    notes.push(format!(
                        "MemTotal {kb} kB is below {MEM_MIN_PERCENT}% of {} MiB, but the node has \
                         {p} kB of present pages (/{PROC_ZONEINFO}): the kernel reserved the rest \
                         early (KASAN shadow, kernel image, page structs)",
                        node.mem_bytes >> 20
                    ));
                    Outcome::Pass
                }
                Some(p) => Outcome::Fail(format!(
                    "expected {want}, seen {kb} kB (present pages: {p} kB)"
                )),
                None => Outcome::Fail(format!("expected {want}, seen {kb} kB")),
            },
            Err(e) => Outcome::Fail(format!("expected {want}, seen nothing: {e}")),
        };
        checks.push(Check {
            name: format!("node{id}-memory"),
            notes,
            outcome,
        });
    }

    let union: CpuSet = declared
        .iter()
        .flat_map(|n| n.cpus.iter().copied())
        .collect();
    let want = format_cpulist(&union);
    checks.push(Check {
        name: "online-cpus".into(),
        notes: vec![],
        outcome: match &seen.online {
            Ok(c) => Outcome::check(*c == union, || {
                format!("expected online cpus {want}, seen {}", format_cpulist(c))
            }),
            Err(e) => Outcome::Fail(format!("expected online cpus {want}, seen nothing: {e}")),
        },
    });
    checks
}

/// The node masks, exactly: `possible-nodes` (the online and the offline
/// nodes declared) and `online-nodes` (the online ones). On a kernel
/// without NUMA one online node and no offline node pass with a note.
pub fn evaluate_masks(declared: &Declared, seen: &Observed) -> Vec<Check> {
    let online: CpuSet = declared.nodes.iter().map(|n| n.id).collect();
    let possible: CpuSet = online.iter().chain(&declared.offline).copied().collect();
    let check = |name: &str, file: &str, want: CpuSet, got: &Result<CpuSet, String>| {
        let path = format!("/{NODE_DIR}/{file}");
        let want_s = format_cpulist(&want);
        let (outcome, notes) = if !seen.numa {
            if declared.nodes.len() == 1 && declared.offline.is_empty() {
                let note = format!("no /{NODE_DIR} (kernel without CONFIG_NUMA?): one node");
                (Outcome::Pass, vec![note])
            } else {
                let e = format!("expected {path} {want_s}, seen no /{NODE_DIR}");
                (Outcome::Fail(e), vec![])
            }
        } else {
            let outcome = match got {
                Ok(g) => Outcome::check(*g == want, || {
                    format!("expected {path} {want_s}, seen {}", format_cpulist(g))
                }),
                Err(e) => Outcome::Fail(format!("expected {path} {want_s}, seen nothing: {e}")),
            };
            (outcome, vec![])
        };
        Check {
            name: name.into(),
            notes,
            outcome,
        }
    };
    vec![
        check("possible-nodes", "possible", possible, &seen.possible_nodes),
        check("online-nodes", "online", online, &seen.online_nodes),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        parse_cpulist(s).unwrap()
    }

    #[test]
    fn parses_node_lists() {
        let nodes = parse_nodes("0:0-1:512M,1:2-3+6:1G,2::64K").unwrap();
        assert_eq!(
            nodes,
            vec![
                NodeSpec {
                    id: 0,
                    cpus: set("0-1"),
                    mem_bytes: 512 << 20
                },
                NodeSpec {
                    id: 1,
                    cpus: set("2,3,6"),
                    mem_bytes: 1 << 30
                },
                NodeSpec {
                    id: 2,
                    cpus: CpuSet::new(),
                    mem_bytes: 64 << 10
                },
            ]
        );
    }

    #[test]
    fn offline_entries_are_split_off() {
        let d = parse_declared("0:0-1:512M,1:2-3:512M,2:offline").unwrap();
        assert_eq!(d.nodes, parse_nodes("0:0-1:512M,1:2-3:512M").unwrap());
        assert_eq!(d.offline, vec![2]);
        assert_eq!(parse_declared("0:0:1G").unwrap().offline, Vec::<u32>::new());
        for (input, want) in [
            ("0:0:1G,x:offline", "node id \"x\" is not a number"),
            (
                "0:0:1G,2:offline,2:offline",
                "offline node 2 declared twice",
            ),
            ("0:0:1G,0:offline", "node 0 declared online and offline"),
            ("2:offline", "empty node list"),
        ] {
            let e = parse_declared(input).unwrap_err();
            assert!(e.contains(want), "{input}: {e}");
        }
    }

    #[test]
    fn node_masks_must_match_exactly() {
        let d = parse_declared("0:0-1:512M,1:2-3:512M,2:offline").unwrap();
        let mut seen = numa(&[(0, "0-1", 480000), (1, "2-3", 500000)], "0-3");
        seen.possible_nodes = Ok(set("0-2"));
        assert_eq!(
            summary(&evaluate_masks(&d, &seen)),
            ["ok possible-nodes", "ok online-nodes"]
        );
        // The offline node missing from possible (QEMU gave it no SRAT
        // entry), or online after all.
        seen.possible_nodes = Ok(set("0-1"));
        seen.online_nodes = Ok(set("0-2"));
        assert_eq!(
            summary(&evaluate_masks(&d, &seen)),
            [
                "FAIL possible-nodes: expected /sys/devices/system/node/possible 0-2, seen 0-1",
                "FAIL online-nodes: expected /sys/devices/system/node/online 0-1, seen 0-2"
            ]
        );
        let plain = parse_declared("0:0-1:512M,1:2-3:512M").unwrap();
        seen.online_nodes = Ok(set("0-1"));
        assert_eq!(
            summary(&evaluate_masks(&plain, &seen)),
            ["ok possible-nodes", "ok online-nodes"]
        );
        // No NUMA: one node passes with a note, an offline node cannot.
        seen.numa = false;
        let one = parse_declared("0:0-1:1G").unwrap();
        let c = evaluate_masks(&one, &seen);
        assert_eq!(summary(&c), ["ok possible-nodes", "ok online-nodes"]);
        assert!(c[0].notes[0].contains("CONFIG_NUMA"), "{c:?}");
        let off = parse_declared("0:0-1:1G,1:offline").unwrap();
        assert_eq!(
            summary(&evaluate_masks(&off, &seen))[0],
            "FAIL possible-nodes: expected /sys/devices/system/node/possible 0-1, seen no /sys/devices/system/node"
        );
    }

    #[test]
    fn node_list_errors_say_what_is_wrong() {
        let table: &[(&str, &str)] = &[
            ("", "empty node list"),
            ("0:0-1", "node 1 (\"0:0-1\"): expected ID:CPUS:MEMORY"),
            ("x:0:1G", "node id \"x\" is not a number"),
            ("0:0-1:512", "needs a unit suffix"),
            ("0:0-1:0M", "memory must not be zero"),
            ("0:0-1:1X", "needs a unit suffix"),
            ("0:1-0:1G", "runs backwards"),
            ("0:a:1G", "\"a\" is not a cpu number"),
            (
                "0:0:1G,0:1:1G",
                "node 2 (\"0:1:1G\"): node 0 declared twice",
            ),
            ("0:0-2:1G,1:2-3:1G", "cpus 2 are also in node 0"),
            ("0:0:99999999999T", "too large"),
        ];
        for (input, want) in table {
            let e = parse_nodes(input).unwrap_err();
            assert!(e.contains(want), "{input:?}: {e}");
        }
    }

    #[test]
    fn meminfo_and_tolerance() {
        let node = "Node 0 MemTotal:         480236 kB\nNode 0 MemFree:  1 kB\n";
        assert_eq!(parse_mem_total_kb(node), Ok(480236));
        let global = "MemTotal:        1004096 kB\nMemFree: 3 kB\n";
        assert_eq!(parse_mem_total_kb(global), Ok(1004096));
        assert!(parse_mem_total_kb("MemFree: 3 kB").is_err());
        assert!(parse_mem_total_kb("MemTotal: lots").is_err());
        let m = 512 << 20;
        assert!(memory_ok(m, 524288));
        assert!(memory_ok(m, 314572));
        assert!(!memory_ok(m, 314571));
        assert!(!memory_ok(m, 262144), "half the declared size");
        assert!(!memory_ok(m, 524289));
    }

    fn numa(nodes: &[(u32, &str, u64)], online: &str) -> Observed {
        Observed {
            numa: true,
            nodes: nodes
                .iter()
                .map(|&(id, cpus, kb)| {
                    (
                        id,
                        SeenNode {
                            cpus: Ok(set(cpus)),
                            mem_kb: Ok(kb),
                            distance: Ok(vec![]),
                        },
                    )
                })
                .collect(),
            online: Ok(set(online)),
            possible_nodes: Ok(nodes.iter().map(|n| n.0).collect()),
            online_nodes: Ok(nodes.iter().map(|n| n.0).collect()),
            mem_total_kb: Ok(nodes.iter().map(|n| n.2).sum()),
            present_kb: BTreeMap::new(),
        }
    }

    #[test]
    fn zoneinfo_present_pages_per_node() {
        // Shape of 7.3's /proc/zoneinfo (abridged).
        let z = "Node 0, zone      DMA\n  per-node stats\n      nr_inactive_anon 0\n  pages free     3840\n        boost    0\n        spanned  4095\n        present  3998\n        managed  3840\nNode 0, zone    DMA32\n  pages free     1\n        spanned  61440\n        present  61440\nNode 1, zone    DMA32\n        spanned  65536\n        present  65536\nNode 1, zone   Normal\n        present  0\n";
        let p = parse_zoneinfo_present_kb(z, 4);
        assert_eq!(p.get(&0), Some(&((3998 + 61440) * 4)));
        assert_eq!(p.get(&1), Some(&(65536 * 4)));
        assert!(parse_zoneinfo_present_kb("garbage\npresent x\n", 4).is_empty());
    }

    #[test]
    fn a_kasan_kernel_on_small_nodes_passes_by_its_present_pages() {
        // Measured on source:7.3-debug, 4 x 256M: node 0 MemTotal 81024 kB.
        let declared = parse_nodes("0:0:256M,1:1:256M").unwrap();
        let mut seen = numa(&[(0, "0", 81024), (1, "1", 200000)], "0-1");
        seen.present_kb = [(0, 261756), (1, 262144)].into_iter().collect();
        let checks = evaluate(&declared, &seen);
        assert_eq!(summary(&checks)[2], "ok node0-memory");
        assert!(
            checks[2].notes[0].contains("MemTotal 81024 kB is below 60% of 256 MiB, but the node has 261756 kB of present pages"),
            "{checks:?}"
        );
        // A node of half the size still fails, and says both numbers.
        seen.present_kb.insert(0, 131072);
        assert_eq!(
            summary(&evaluate(&declared, &seen))[2],
            "FAIL node0-memory: expected MemTotal 60-100% of 256 MiB (157286..=262144 kB), seen 81024 kB (present pages: 131072 kB)"
        );
        // 2% of 256 MiB (5242 kB) is more than 4 MiB.
        assert!(present_ok(256 << 20, 81024, 262144 - 5242));
        assert!(!present_ok(256 << 20, 81024, 262144 - 5243));
        assert!(present_ok(64 << 20, 30000, 65536 - 4096), "4 MiB floor");
        assert!(
            !present_ok(256 << 20, 300000, 262144),
            "MemTotal above declared"
        );
    }

    fn summary(checks: &[Check]) -> Vec<String> {
        checks
            .iter()
            .map(|c| match &c.outcome {
                Outcome::Pass => format!("ok {}", c.name),
                Outcome::Skip(w) => format!("skip {} {w}", c.name),
                Outcome::Fail(w) => format!("FAIL {}: {w}", c.name),
            })
            .collect()
    }

    #[test]
    fn matching_two_node_topology_passes() {
        let declared = parse_nodes("0:0-1:512M,1:2-3:512M").unwrap();
        let seen = numa(&[(0, "0-1", 480000), (1, "2-3", 500000)], "0-3");
        assert_eq!(
            summary(&evaluate(&declared, &seen)),
            [
                "ok node-count",
                "ok node0-cpus",
                "ok node0-memory",
                "ok node1-cpus",
                "ok node1-memory",
                "ok online-cpus"
            ]
        );
    }

    #[test]
    fn mismatches_name_expected_and_seen() {
        let declared = parse_nodes("0:0-1:512M,1:2-3:512M").unwrap();
        let seen = numa(&[(0, "0-3", 1000000)], "0-3");
        assert_eq!(
            summary(&evaluate(&declared, &seen)),
            [
                "FAIL node-count: expected 2 node(s) (0,1), seen 1 (0)",
                "FAIL node0-cpus: expected cpus 0-1, seen 0-3",
                "FAIL node0-memory: expected MemTotal 60-100% of 512 MiB (314572..=524288 kB), seen 1000000 kB",
                "FAIL node1-cpus: expected cpus 2-3, seen nothing: /sys/devices/system/node/node1 does not exist",
                "FAIL node1-memory: expected MemTotal 60-100% of 512 MiB (314572..=524288 kB), seen nothing: /sys/devices/system/node/node1 does not exist",
                "ok online-cpus"
            ]
        );
    }

    #[test]
    fn kernel_without_numa() {
        let mut seen = numa(&[], "0-1");
        seen.numa = false;
        seen.mem_total_kb = Ok(1_000_000);
        let one = parse_nodes("0:0-1:1G").unwrap();
        let checks = evaluate(&one, &seen);
        assert_eq!(
            summary(&checks),
            [
                "ok node-count",
                "ok node0-cpus",
                "ok node0-memory",
                "ok online-cpus"
            ]
        );
        assert!(checks[0].notes[0].contains("CONFIG_NUMA"), "{checks:?}");
        assert!(checks[1].notes[0].contains("comparing with"));

        let two = parse_nodes("0:0:512M,1:1:512M").unwrap();
        let s = summary(&evaluate(&two, &seen));
        assert_eq!(
            s[0],
            "FAIL node-count: expected 2 node(s) (0,1), seen none: no /sys/devices/system/node (kernel without CONFIG_NUMA?)"
        );
        assert!(s[1].starts_with("FAIL node0-cpus: expected cpus 0, seen nothing: no /sys"));
        assert_eq!(s[5], "ok online-cpus");
    }

    #[test]
    fn observes_a_sysfs_tree() {
        let root = std::env::temp_dir().join(format!("topology-test-{}", std::process::id()));
        let w = |p: &str, s: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("sys/devices/system/node/node0/cpulist", "0-1\n");
        w(
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal:  500000 kB\n",
        );
        w("sys/devices/system/node/node0/distance", "10 21\n");
        w("sys/devices/system/node/node1/cpulist", "\n");
        w("sys/devices/system/node/possible", "0-1\n");
        w("sys/devices/system/cpu/online", "0-1\n");
        w("proc/meminfo", "MemTotal:  900000 kB\n");
        let seen = observe(&root);
        std::fs::remove_dir_all(&root).unwrap();
        assert!(seen.numa);
        assert_eq!(seen.nodes.len(), 2);
        assert_eq!(seen.nodes[&0].cpus, Ok(set("0-1")));
        assert_eq!(seen.nodes[&0].mem_kb, Ok(500000));
        assert_eq!(seen.nodes[&0].distance, Ok(vec![10, 21]));
        assert_eq!(seen.nodes[&1].cpus, Ok(CpuSet::new()));
        assert!(seen.nodes[&1]
            .distance
            .as_ref()
            .unwrap_err()
            .contains("distance"));
        assert!(seen.nodes[&1]
            .mem_kb
            .as_ref()
            .unwrap_err()
            .contains("meminfo"));
        assert_eq!(seen.online, Ok(set("0-1")));
        assert_eq!(seen.possible_nodes, Ok(set("0-1")));
        assert!(seen.online_nodes.is_err());
        assert_eq!(seen.mem_total_kb, Ok(900000));
        let empty = observe(Path::new("/nonexistent-root"));
        assert!(!empty.numa && empty.nodes.is_empty() && empty.online.is_err());
    }
}
