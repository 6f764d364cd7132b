//! `topology`: checks that the guest kernel sees the NUMA topology the host
//! declared to QEMU. Prints one KTAP document; exit 0 if every case passed,
//! 1 if one failed, 2 on bad arguments.
//!
//! Usage: `topology --nodes 0:0-1:512M,1:2-3:512M[,2:offline]
//! [--distances 10,20/20,10] [--root DIR]` (node list format in
//! `guest_tests::topology`, distances in `guest_tests::topology::distance`:
//! without `--distances`, QEMU's defaults must be seen; `--root` reads
//! sysfs and procfs under DIR instead of `/`, for trying it on a copy).

use guest_tests::ktap::Ktap;
use guest_tests::topology::distance::{evaluate_distances, parse_distances};
use guest_tests::topology::{evaluate, evaluate_masks, observe, parse_declared, Declared};
use std::path::PathBuf;

const USAGE: &str =
    "usage: topology --nodes ID:CPUS:MEM[,ID:CPUS:MEM...][,ID:offline] [--distances D,D/D,D] [--root DIR]\n\
                     e.g. topology --nodes 0:0-1:512M,1:2-3+6:512M,2:offline\n\
                     e.g. topology --nodes 0:0:256M,1:1:256M --distances 10,30/30,10";

/// What `--help` says before [`USAGE`].
const ABOUT: &str = "topology: checks that the kernel sees the NUMA topology the host declared\n\
                     (nodes, their CPUs and memory, the possible and online node masks,\n\
                     the node distances: --distances, else QEMU's 10 local / 20 remote;\n\
                     from sysfs and procfs under --root).\n\
                     Prints one KTAP document: exit 0 if every check passed, 1 if one failed,\n\
                     2 on bad arguments.";

fn main() {
    let (nodes, distances, root) = match parse_args(std::env::args().skip(1)) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("topology: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let seen = observe(&root);
    let mut checks = evaluate(&nodes.nodes, &seen);
    checks.extend(evaluate_masks(&nodes, &seen));
    checks.push(evaluate_distances(&nodes, distances.as_deref(), &seen));
    let mut k = Ktap::stdout(checks.len());
    let mut failed = 0;
    for c in &checks {
        for note in &c.notes {
            k.diag(note);
        }
        if !k.result(&c.name, &c.outcome) {
            failed += 1;
        }
    }
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

/// The declared nodes, the declared distances (rows in `--nodes` order) and
/// the root.
type Args = (Declared, Option<Vec<Vec<u32>>>, PathBuf);

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut nodes = None;
    let mut distances = None;
    let mut root = PathBuf::from("/");
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--nodes" => {
                nodes = Some(parse_declared(&value()?).map_err(|e| format!("--nodes: {e}"))?)
            }
            "--distances" => {
                distances =
                    Some(parse_distances(&value()?).map_err(|e| format!("--distances: {e}"))?)
            }
            "--root" => root = PathBuf::from(value()?),
            "-h" | "--help" => {
                println!("{ABOUT}\n\n{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let nodes: Declared = nodes.ok_or("--nodes is required")?;
    if let Some(d) = &distances {
        if d.len() != nodes.nodes.len() {
            return Err(format!(
                "--distances: {} rows for {} online nodes",
                d.len(),
                nodes.nodes.len()
            ));
        }
    }
    Ok((nodes, distances, root))
}
