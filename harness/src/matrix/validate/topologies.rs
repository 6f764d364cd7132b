//! `topologies:`: names, nodes (vCPUs and memory) and distances.

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
    Ok(NamedTopology {
        name: t.name,
        topology,
    })
}
