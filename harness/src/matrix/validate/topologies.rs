//! `topologies:`: names, nodes (vCPUs and memory), distances and the
//! possible-but-offline node.

use super::{Ctx, Declared};
use crate::matrix::model::NamedTopology;
use crate::matrix::schema::RawTopology;
use crate::matrix::MatrixError;
use crate::topology::{self, Node, Topology};

/// Validates the `topologies:` list: at least one, names unique.
pub(in crate::matrix) fn topologies(
    cx: &Ctx,
    raw: Vec<RawTopology>,
) -> Result<Vec<NamedTopology>, MatrixError> {
    let mut topologies = Vec::new();
    let mut declared = Declared::new("topologies", "topology");
    declared.at_least_one(cx, &raw)?;
    for t in raw {
        declared.add(cx, &t.name)?;
        topologies.push(named_topology(cx, t)?);
    }
    Ok(topologies)
}

fn named_topology(cx: &Ctx, t: RawTopology) -> Result<NamedTopology, MatrixError> {
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
    let topology = Topology::new(nodes, t.distances.clone())
        .and_then(|topology| topology.with_offline(t.offline));
    let topology = topology.map_err(|e| {
        let field = if e.to_string().contains("offline") {
            Some("offline")
        } else if e.to_string().contains("distance") {
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
    Ok(NamedTopology {
        name: t.name,
        topology,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    const HEAD: &str = "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n";

    fn parse(topology: &str) -> Result<crate::matrix::Matrix, String> {
        crate::matrix::parse_str(&format!("{HEAD}{topology}"), Path::new("m.yaml"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn offline_adds_a_possible_but_offline_node() {
        let m = parse("    nodes: [{cpus: 2, mem: 512M}, {cpus: 2, mem: 512M}]\n    offline: 1\n")
            .unwrap();
        let t = &m.topologies[0].topology;
        assert_eq!((t.nodes().len(), t.offline()), (2, 1));
        assert_eq!(t.check_arg(), "0:0-1:512M,1:2-3:512M,2:offline");
        let plain = parse("    nodes: [{cpus: 2, mem: 512M}]\n").unwrap();
        assert_eq!(plain.topologies[0].topology.offline(), 0);
    }

    #[test]
    fn offline_errors_point_at_the_field() {
        let e = parse("    nodes: [{cpus: 2, mem: 512M}]\n    offline: 2\n").unwrap_err();
        assert!(
            e.starts_with(
                "m.yaml:7:5: topology \"t\": invalid topology: 2 offline nodes; expected 0..=1"
            ),
            "{e}"
        );
        let e = parse(
            "    nodes: [{cpus: 1, mem: 1G}, {cpus: 1, mem: 1G}]\n    distances: [[10, 20], [20, 10]]\n    offline: 1\n",
        )
        .unwrap_err();
        assert!(
            e.contains("topology \"t\": invalid topology: an offline node cannot be combined with a distance matrix"),
            "{e}"
        );
        let e = parse("    nodes: [{cpus: 2, mem: 512M}]\n    offline: one\n").unwrap_err();
        assert!(e.contains("offline: invalid type: string \"one\""), "{e}");
    }
}
