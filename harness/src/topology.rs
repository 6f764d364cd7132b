//! NUMA topologies: nodes with CPUs and memory, an optional distance
//! matrix, an optional possible-but-offline node. Parsed from the CLI spec
//! (`nodes=2,cpus=2,mem=512M[,offline=1]`) or built from `matrix.yaml`, then
//! validated; only a validated [`Topology`] reaches the QEMU argv builder.

use std::fmt;

/// Errors in a topology spec; each says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// An empty spec (`--topology ""`): not silently the default.
    #[error("topology spec is empty (expected e.g. nodes=2,cpus=2,mem=512M; leave --topology out for the default)")]
    Empty,
    /// A `key=value` item is malformed.
    #[error(
        "topology spec {spec:?}: {item:?} is not key=value (expected e.g. nodes=2,cpus=2,mem=512M)"
    )]
    NotKeyValue {
        /// The whole spec.
        spec: String,
        /// The bad item.
        item: String,
    },
    /// Unknown key.
    #[error(
        "topology spec {spec:?}: unknown key {key:?} (known: nodes, cpus, mem, distance, offline)"
    )]
    UnknownKey {
        /// The whole spec.
        spec: String,
        /// The key.
        key: String,
    },
    /// A value does not parse.
    #[error("topology spec {spec:?}: {key}={value:?}: {expected}")]
    BadValue {
        /// The whole spec.
        spec: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A key given twice.
    #[error("topology spec {spec:?}: {key} given twice")]
    Repeated {
        /// The whole spec.
        spec: String,
        /// The key.
        key: String,
    },
    /// A cross-field rule is broken.
    #[error("invalid topology: {0}")]
    Invalid(String),
}

/// vCPUs per node when a spec does not say (the CLI's default topology).
pub const DEFAULT_CPUS: u32 = 2;
/// MiB per node when a spec does not say.
pub const DEFAULT_MEM_MIB: u64 = 512;

/// One NUMA node as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// vCPUs in this node (0 = CPU-less node).
    pub cpus: u32,
    /// Memory in MiB (0 = memory-less node).
    pub mem_mib: u64,
}

/// A validated topology. Node `i` has id `i`; CPUs are numbered
/// consecutively node by node; the offline nodes come after the declared
/// ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<Node>,
    distances: Option<Vec<Vec<u8>>>,
    offline: usize,
}

/// Most possible-but-offline nodes: one. QEMU gives its hot-pluggable
/// memory range (the only SRAT entry of a node without CPUs and boot
/// memory) to the last node alone, and Linux numbers the proximity domains
/// it finds consecutively, so a second such node is not possible at all
/// (measured with QEMU 10.0 and Debian's 7.0.13 and 7.3.4).
pub const MAX_OFFLINE: usize = 1;
/// MiB of hot-pluggable memory range per offline node (`maxmem` above the
/// boot memory): the range is all the node has, and nothing plugs into it.
pub const OFFLINE_HOTPLUG_MIB: u64 = 256;

/// Most vCPUs QEMU's default i440fx machine takes.
pub const MAX_CPUS: u32 = 255;
/// Most nodes we accept (MAX_NUMNODES is 1024 on Debian, QEMU's limit is 128).
pub const MAX_NODES: usize = 64;

impl Topology {
    /// Validates nodes and an optional distance matrix (`distances[i][j]`,
    /// 10 on the diagonal, 11..=254 elsewhere, as ACPI SLIT wants).
    pub fn new(
        nodes: Vec<Node>,
        distances: Option<Vec<Vec<u8>>>,
    ) -> Result<Topology, TopologyError> {
        let inv = |s: String| Err(TopologyError::Invalid(s));
        if nodes.is_empty() || nodes.len() > MAX_NODES {
            return inv(format!("{} nodes; expected 1..={MAX_NODES}", nodes.len()));
        }
        let cpus: u32 = nodes.iter().map(|n| n.cpus).sum();
        if cpus == 0 || cpus > MAX_CPUS {
            return inv(format!("{cpus} vCPUs in all; expected 1..={MAX_CPUS}"));
        }
        for (i, n) in nodes.iter().enumerate() {
            if n.cpus == 0 && n.mem_mib == 0 {
                return inv(format!("node {i} has neither CPUs nor memory"));
            }
            if n.mem_mib != 0 && n.mem_mib < 64 {
                return inv(format!(
                    "node {i} has {} MiB; a node with memory needs >= 64 MiB",
                    n.mem_mib
                ));
            }
        }
        if nodes[0].mem_mib == 0 {
            return inv("node 0 must have memory (the kernel boots from it)".into());
        }
        if let Some(d) = &distances {
            if d.len() != nodes.len() || d.iter().any(|row| row.len() != nodes.len()) {
                return inv(format!(
                    "distance matrix must be {n}x{n} for {n} nodes",
                    n = nodes.len()
                ));
            }
            for (i, row) in d.iter().enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    if i == j && v != 10 {
                        return inv(format!(
                            "distance {i}->{j} is {v}; a node's distance to itself must be 10"
                        ));
                    }
                    if i != j && !(11..=254).contains(&v) {
                        return inv(format!("distance {i}->{j} is {v}; expected 11..=254"));
                    }
                }
            }
        }
        Ok(Topology {
            nodes,
            distances,
            offline: 0,
        })
    }

    /// Adds `offline` nodes that are possible but not online: no CPUs, no
    /// boot memory, only a hot-pluggable memory range in the SRAT (at most
    /// [`MAX_OFFLINE`]; not with a distance matrix, which would have to
    /// name them).
    pub fn with_offline(mut self, offline: usize) -> Result<Topology, TopologyError> {
        if offline > MAX_OFFLINE {
            return Err(TopologyError::Invalid(format!(
                "{offline} offline nodes; expected 0..={MAX_OFFLINE} (QEMU gives its \
                 hot-pluggable memory range to the last node only, so only one node \
                 can be possible but offline)"
            )));
        }
        if offline > 0 && self.distances.is_some() {
            return Err(TopologyError::Invalid(
                "an offline node cannot be combined with a distance matrix \
                 (QEMU would need its distances too)"
                    .into(),
            ));
        }
        if self.nodes.len() + offline > MAX_NODES {
            return Err(TopologyError::Invalid(format!(
                "{} nodes with the offline one; expected 1..={MAX_NODES}",
                self.nodes.len() + offline
            )));
        }
        self.offline = offline;
        Ok(self)
    }

    /// Parses `nodes=N,cpus=C,mem=SIZE[,distance=D][,offline=O]`: N nodes
    /// of C vCPUs and SIZE memory each; D is the distance between distinct
    /// nodes; O possible-but-offline nodes after them
    /// ([`Topology::with_offline`]).
    pub fn parse_spec(spec: &str) -> Result<Topology, TopologyError> {
        if spec.split(',').all(|s| s.trim().is_empty()) {
            return Err(TopologyError::Empty);
        }
        let (mut nodes, mut cpus, mut mem, mut distance) = (1u32, None, None, None);
        let mut offline = 0usize;
        let mut seen: Vec<&str> = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| TopologyError::NotKeyValue {
                    spec: spec.into(),
                    item: item.into(),
                })?;
            if seen.contains(&k) {
                return Err(TopologyError::Repeated {
                    spec: spec.into(),
                    key: k.into(),
                });
            }
            seen.push(k);
            let bad = |expected| TopologyError::BadValue {
                spec: spec.into(),
                key: k.into(),
                value: v.into(),
                expected,
            };
            match k {
                "nodes" => nodes = v.parse().map_err(|_| bad("a node count such as 2"))?,
                "cpus" => cpus = Some(v.parse().map_err(|_| bad("vCPUs per node such as 2"))?),
                // `mem=0` is a memory-less node, as in matrix.yaml (the
                // cross-field check says why it cannot be every node).
                "mem" => {
                    mem = Some(match v.trim() {
                        "0" => 0,
                        v => parse_size_mib(v)
                            .ok_or_else(|| bad("memory per node such as 512M or 1G"))?,
                    })
                }
                "distance" => {
                    distance = Some(
                        v.parse::<u8>()
                            .map_err(|_| bad("a distance between nodes such as 20"))?,
                    )
                }
                "offline" => {
                    offline = v
                        .parse()
                        .map_err(|_| bad("a number of possible-but-offline nodes such as 1"))?
                }
                _ => {
                    return Err(TopologyError::UnknownKey {
                        spec: spec.into(),
                        key: k.into(),
                    })
                }
            }
        }
        let node = Node {
            cpus: cpus.unwrap_or(DEFAULT_CPUS),
            mem_mib: mem.unwrap_or(DEFAULT_MEM_MIB),
        };
        let n = nodes as usize;
        if n == 0 || n > MAX_NODES {
            return Err(TopologyError::Invalid(format!(
                "nodes={nodes}; expected 1..={MAX_NODES}"
            )));
        }
        let distances = distance.map(|d| {
            (0..n)
                .map(|i| (0..n).map(|j| if i == j { 10 } else { d }).collect())
                .collect()
        });
        Topology::new(vec![node; n], distances)?.with_offline(offline)
    }

    /// The nodes, in id order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The distance matrix, if declared.
    pub fn distances(&self) -> Option<&[Vec<u8>]> {
        self.distances.as_deref()
    }

    /// Possible-but-offline nodes after the declared ones (0 or 1).
    pub fn offline(&self) -> usize {
        self.offline
    }

    /// The ids of the offline nodes.
    pub fn offline_ids(&self) -> std::ops::Range<usize> {
        self.nodes.len()..self.nodes.len() + self.offline
    }

    /// The hot-pluggable memory range above the boot memory, in MiB (0
    /// without offline nodes): what `maxmem` adds.
    pub fn hotplug_mib(&self) -> u64 {
        self.offline as u64 * OFFLINE_HOTPLUG_MIB
    }

    /// Total vCPUs.
    pub fn cpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.cpus).sum()
    }

    /// Total memory in MiB.
    pub fn mem_mib(&self) -> u64 {
        self.nodes.iter().map(|n| n.mem_mib).sum()
    }

    /// The vCPU ids of node `i` (consecutive numbering).
    pub fn node_cpus(&self, i: usize) -> std::ops::Range<u32> {
        let start: u32 = self.nodes[..i].iter().map(|n| n.cpus).sum();
        start..start + self.nodes[i].cpus
    }

    /// The argument of the guest `topology` binary: `id:cpulist:memM,...`
    /// (an empty cpulist for a CPU-less node), then `id:offline` for each
    /// possible-but-offline node.
    pub fn check_arg(&self) -> String {
        (0..self.nodes.len())
            .map(|i| {
                let r = self.node_cpus(i);
                let cpus = match r.len() {
                    0 => String::new(),
                    1 => r.start.to_string(),
                    _ => format!("{}-{}", r.start, r.end - 1),
                };
                format!("{i}:{cpus}:{}M", self.nodes[i].mem_mib)
            })
            .chain(self.offline_ids().map(|i| format!("{i}:offline")))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The `--distances` argument of the guest `topology` binary when a
    /// matrix is declared: rows in node order separated by `/`, entries by
    /// `,` (`10,20/20,10`).
    pub fn distance_arg(&self) -> Option<String> {
        let row = |r: &Vec<u8>| r.iter().map(u8::to_string).collect::<Vec<_>>().join(",");
        self.distances
            .as_ref()
            .map(|d| d.iter().map(row).collect::<Vec<_>>().join("/"))
    }
}

impl fmt::Display for Topology {
    /// A short name such as `2n-2c-512M` (`2n-2c-512M-1off` with an offline
    /// node) used in cell names.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = &self.nodes[0];
        if self.nodes.iter().all(|n| n == first) {
            write!(
                f,
                "{}n-{}c-{}M",
                self.nodes.len(),
                first.cpus,
                first.mem_mib
            )?;
        } else {
            write!(
                f,
                "{}n-{}c-{}M-mixed",
                self.nodes.len(),
                self.cpus(),
                self.mem_mib()
            )?;
        }
        if self.distances.is_some() {
            write!(f, "-dist")?;
        }
        if self.offline > 0 {
            write!(f, "-{}off", self.offline)?;
        }
        Ok(())
    }
}

/// `512M`, `1G`, `1024` (MiB) -> MiB.
pub fn parse_size_mib(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 'M' | 'm') => (&s[..i], 1),
        (i, 'G' | 'g') => (&s[..i], 1024),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()?
        .checked_mul(mult)
        .filter(|&v| v > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_issue_example() {
        let t = Topology::parse_spec("nodes=2,cpus=2,mem=512M").unwrap();
        assert_eq!(t.nodes().len(), 2);
        assert_eq!(t.cpus(), 4);
        assert_eq!(t.mem_mib(), 1024);
        assert_eq!(t.node_cpus(1), 2..4);
        assert_eq!(t.check_arg(), "0:0-1:512M,1:2-3:512M");
        assert_eq!(t.to_string(), "2n-2c-512M");
        assert!(t.distances().is_none());
        assert_eq!(t.distance_arg(), None);
    }

    #[test]
    fn distance_builds_a_symmetric_matrix() {
        let t = Topology::parse_spec("nodes=3,cpus=1,mem=1G,distance=20").unwrap();
        assert_eq!(t.distances().unwrap()[0], vec![10, 20, 20]);
        assert_eq!(t.check_arg(), "0:0:1024M,1:1:1024M,2:2:1024M");
        assert_eq!(
            t.distance_arg().as_deref(),
            Some("10,20,20/20,10,20/20,20,10")
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let cases = [
            ("nodes=two", "nodes=\"two\": a node count such as 2"),
            ("nodes=2,cpu=2", "unknown key \"cpu\""),
            ("nodes=2,mem=12X", "memory per node such as 512M"),
            ("nodes", "is not key=value"),
            ("nodes=0", "expected 1..=64"),
            ("nodes=2,cpus=200", "400 vCPUs in all"),
            ("nodes=2,cpus=0,mem=512M", "0 vCPUs in all"),
            ("nodes=1,mem=32M", "needs >= 64 MiB"),
            ("nodes=2,distance=5", "distance 0->1 is 5"),
            (
                "nodes=2,offline=x",
                "a number of possible-but-offline nodes such as 1",
            ),
            ("nodes=2,offline=2", "2 offline nodes; expected 0..=1"),
            (
                "nodes=2,distance=20,offline=1",
                "cannot be combined with a distance matrix",
            ),
            (
                "nodes=64,cpus=1,mem=64M,offline=1",
                "65 nodes with the offline one",
            ),
            ("", "topology spec is empty"),
            (" , ", "topology spec is empty"),
        ];
        for (spec, want) in cases {
            let e = Topology::parse_spec(spec).unwrap_err().to_string();
            assert!(e.contains(want), "{spec}: {e}");
        }
    }

    #[test]
    fn an_offline_node_comes_after_the_declared_ones() {
        let t = Topology::parse_spec("nodes=2,cpus=2,mem=512M,offline=1").unwrap();
        assert_eq!(
            (t.nodes().len(), t.offline(), t.offline_ids()),
            (2, 1, 2..3)
        );
        assert_eq!((t.cpus(), t.mem_mib(), t.hotplug_mib()), (4, 1024, 256));
        assert_eq!(t.check_arg(), "0:0-1:512M,1:2-3:512M,2:offline");
        assert_eq!(t.to_string(), "2n-2c-512M-1off");
        let none = Topology::parse_spec("nodes=2,offline=0").unwrap();
        assert_eq!((none.offline(), none.hotplug_mib()), (0, 0));
        assert_eq!(none, Topology::parse_spec("nodes=2").unwrap());
    }

    #[test]
    fn explicit_nodes_validate_cross_field_rules() {
        let n = |cpus, mem_mib| Node { cpus, mem_mib };
        assert!(
            Topology::new(vec![n(2, 512), n(2, 0)], None).is_ok(),
            "memory-less node"
        );
        assert!(
            Topology::new(vec![n(2, 512), n(0, 256)], None).is_ok(),
            "CPU-less node"
        );
        let e = Topology::new(vec![n(2, 0), n(2, 512)], None).unwrap_err();
        assert!(e.to_string().contains("node 0 must have memory"));
        let e = Topology::new(vec![n(1, 512), n(1, 512)], Some(vec![vec![10, 20]])).unwrap_err();
        assert!(e.to_string().contains("2x2"));
    }
}
