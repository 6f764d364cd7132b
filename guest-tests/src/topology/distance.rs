//! The node distances (the ACPI SLIT) the host declared against what the
//! guest kernel shows in `/sys/devices/system/node/nodeN/distance`.
//!
//! The host passes a declared matrix as `--distances 10,20/20,10`: rows
//! separated by `/`, entries by `,`, rows and columns in the order of the
//! `--nodes` list. Without one, QEMU builds no SLIT and Linux falls back to
//! `LOCAL_DISTANCE` (10) and `REMOTE_DISTANCE` (20) (`__node_distance()`
//! with `numa_distance_cnt` 0): that is what must be seen.
//!
//! A node's `distance` file (`node_read_distance()`) lists its distance to
//! every online node, in node id order, separated by spaces; possible but
//! offline nodes have neither a directory nor a column.

use super::{Check, Declared, Observed, NODE_DIR};
use crate::ktap::Outcome;

/// A node's distance to itself (`LOCAL_DISTANCE`).
pub const LOCAL: u32 = 10;
/// Linux's distance between two nodes when the firmware gives no SLIT
/// (`REMOTE_DISTANCE`): QEMU's default.
pub const REMOTE: u32 = 20;

/// Parses a `--distances` value: a square matrix of numbers.
pub fn parse_distances(s: &str) -> Result<Vec<Vec<u32>>, String> {
    let rows: Vec<Vec<u32>> = s
        .trim()
        .split('/')
        .enumerate()
        .map(|(i, row)| {
            row.split(',')
                .map(|v| {
                    v.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("row {i} ({row:?}): {v:?} is not a distance"))
                })
                .collect()
        })
        .collect::<Result<_, _>>()?;
    let n = rows.len();
    if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != n) {
        return Err(format!(
            "row {i} has {} entries; a matrix of {n} rows needs {n}",
            r.len()
        ));
    }
    Ok(rows)
}

/// Parses a node's `distance` file (`10 20 30`).
pub fn parse_row(s: &str) -> Result<Vec<u32>, String> {
    s.split_whitespace()
        .map(|v| {
            v.parse::<u32>()
                .map_err(|_| format!("{v:?} is not a distance"))
        })
        .collect()
}

/// The `distances` case: every entry of every declared online node's row
/// exactly, against `declared` (`None`: QEMU's defaults, [`LOCAL`] and
/// [`REMOTE`]). A failure names each differing entry (`node0 -> node1:
/// expected 20, seen 30`) and the row it read. On a kernel without NUMA
/// one node passes with a note.
pub fn evaluate_distances(
    declared: &Declared,
    distances: Option<&[Vec<u32>]>,
    seen: &Observed,
) -> Check {
    let ids: Vec<u32> = declared.nodes.iter().map(|n| n.id).collect();
    let (source, notes) = match distances {
        Some(_) => ("declared", vec![]),
        None => (
            "QEMU's default",
            vec![format!(
                "no distances declared: QEMU gives no SLIT, so Linux's {LOCAL} local and {REMOTE} remote"
            )],
        ),
    };
    let want = |i: usize, j: usize| match distances {
        Some(d) => d[i][j],
        None if i == j => LOCAL,
        None => REMOTE,
    };
    let check = |outcome| Check {
        name: "distances".into(),
        notes: notes.clone(),
        outcome,
    };
    if !seen.numa {
        if ids.len() == 1 {
            let mut c = check(Outcome::Pass);
            c.notes.push(format!(
                "no /{NODE_DIR} (kernel without CONFIG_NUMA?): one node"
            ));
            return c;
        }
        return check(Outcome::Fail(format!(
            "expected the distances of {} nodes, seen no /{NODE_DIR}",
            ids.len()
        )));
    }
    // The kernel's columns are the online nodes in id order.
    let mut order: Vec<(u32, usize)> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    order.sort();
    let mut wrong = Vec::new();
    for (i, &from) in ids.iter().enumerate() {
        let path = format!("/{NODE_DIR}/node{from}/distance");
        let row = match seen.nodes.get(&from).map(|n| &n.distance) {
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                wrong.push(format!("node{from}: {e}"));
                continue;
            }
            None => {
                wrong.push(format!("node{from}: no {path}"));
                continue;
            }
        };
        let shown = row.iter().map(u32::to_string).collect::<Vec<_>>().join(" ");
        if row.len() != ids.len() {
            wrong.push(format!(
                "node{from}: {path} lists {} distances ({shown}), expected {} (one per online node)",
                row.len(),
                ids.len()
            ));
            continue;
        }
        for (&(to, j), &got) in order.iter().zip(row) {
            let w = want(i, j);
            if got != w {
                wrong.push(format!(
                    "node{from} -> node{to}: expected {w} ({source}), seen {got} ({path}: {shown})"
                ));
            }
        }
    }
    check(if wrong.is_empty() {
        Outcome::Pass
    } else {
        Outcome::Fail(wrong.join("; "))
    })
}

#[cfg(test)]
mod tests {
    use super::super::{parse_declared, CpuSet, SeenNode};
    use super::*;
    use std::collections::BTreeMap;

    fn seen(rows: &[(u32, Result<&str, &str>)]) -> Observed {
        let nodes = rows
            .iter()
            .map(|&(id, row)| {
                (
                    id,
                    SeenNode {
                        cpus: Ok(CpuSet::new()),
                        mem_kb: Ok(0),
                        distance: row.map_err(String::from).and_then(parse_row),
                    },
                )
            })
            .collect();
        Observed {
            numa: true,
            nodes,
            online: Ok(CpuSet::new()),
            possible_nodes: Ok(CpuSet::new()),
            online_nodes: Ok(CpuSet::new()),
            mem_total_kb: Ok(0),
            present_kb: BTreeMap::new(),
        }
    }

    fn outcome(c: &Check) -> String {
        match &c.outcome {
            Outcome::Pass => "ok".into(),
            Outcome::Skip(w) => format!("skip {w}"),
            Outcome::Fail(w) => format!("FAIL {w}"),
        }
    }

    #[test]
    fn parses_a_declared_matrix() {
        assert_eq!(
            parse_distances("10,20,30/20,10,20/30,20,10"),
            Ok(vec![vec![10, 20, 30], vec![20, 10, 20], vec![30, 20, 10]])
        );
        assert_eq!(parse_distances("10"), Ok(vec![vec![10]]));
        for (input, want) in [
            (
                "10,20/20",
                "row 1 has 1 entries; a matrix of 2 rows needs 2",
            ),
            ("10,x/20,10", "row 0 (\"10,x\"): \"x\" is not a distance"),
            ("", "row 0 (\"\"): \"\" is not a distance"),
        ] {
            assert_eq!(parse_distances(input), Err(want.into()), "{input:?}");
        }
        assert_eq!(parse_row("10 21 31\n"), Ok(vec![10, 21, 31]));
        assert_eq!(parse_row("10 x"), Err("\"x\" is not a distance".into()));
    }

    #[test]
    fn the_declared_slit_must_be_seen_exactly() {
        let d = parse_declared("0:0:256M,1:1:256M,2:2:256M").unwrap();
        let m = parse_distances("10,20,30/20,10,20/30,20,10").unwrap();
        let ok = seen(&[
            (0, Ok("10 20 30")),
            (1, Ok("20 10 20")),
            (2, Ok("30 20 10")),
        ]);
        let c = evaluate_distances(&d, Some(&m), &ok);
        assert_eq!((c.name.as_str(), outcome(&c)), ("distances", "ok".into()));
        assert!(c.notes.is_empty());
        // One entry differs (an asymmetric QEMU -numa dist): named exactly.
        let one = seen(&[
            (0, Ok("10 40 30")),
            (1, Ok("20 10 20")),
            (2, Ok("30 20 10")),
        ]);
        assert_eq!(
            outcome(&evaluate_distances(&d, Some(&m), &one)),
            "FAIL node0 -> node1: expected 20 (declared), seen 40 \
             (/sys/devices/system/node/node0/distance: 10 40 30)"
        );
        // A short row, an unreadable one, a missing node.
        let bad = seen(&[(0, Ok("10 20")), (1, Err("unreadable"))]);
        assert_eq!(
            outcome(&evaluate_distances(&d, Some(&m), &bad)),
            "FAIL node0: /sys/devices/system/node/node0/distance lists 2 distances (10 20), \
             expected 3 (one per online node); node1: unreadable; \
             node2: no /sys/devices/system/node/node2/distance"
        );
    }

    #[test]
    fn without_a_declared_slit_qemus_defaults_must_be_seen() {
        let d = parse_declared("0:0-1:512M,1:2-3:512M").unwrap();
        let c = evaluate_distances(&d, None, &seen(&[(0, Ok("10 20")), (1, Ok("20 10"))]));
        assert_eq!(outcome(&c), "ok");
        assert!(c.notes[0].contains("10 local and 20 remote"), "{c:?}");
        // QEMU given a -numa dist the plan did not declare.
        let c = evaluate_distances(&d, None, &seen(&[(0, Ok("10 30")), (1, Ok("30 10"))]));
        assert_eq!(
            outcome(&c),
            "FAIL node0 -> node1: expected 20 (QEMU's default), seen 30 \
             (/sys/devices/system/node/node0/distance: 10 30); \
             node1 -> node0: expected 20 (QEMU's default), seen 30 \
             (/sys/devices/system/node/node1/distance: 30 10)"
        );
        // One node, and an offline node (no directory, no column).
        let one = parse_declared("0:0-1:1G,1:offline").unwrap();
        assert_eq!(
            outcome(&evaluate_distances(&one, None, &seen(&[(0, Ok("10"))]))),
            "ok"
        );
    }

    #[test]
    fn a_kernel_without_numa() {
        let mut s = seen(&[]);
        s.numa = false;
        let one = parse_declared("0:0-1:1G").unwrap();
        let c = evaluate_distances(&one, None, &s);
        assert_eq!(outcome(&c), "ok");
        assert!(c.notes.last().unwrap().contains("CONFIG_NUMA"));
        let two = parse_declared("0:0:1G,1:1:1G").unwrap();
        assert_eq!(
            outcome(&evaluate_distances(&two, None, &s)),
            "FAIL expected the distances of 2 nodes, seen no /sys/devices/system/node"
        );
    }
}
