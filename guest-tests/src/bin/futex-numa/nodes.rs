//! `futex-numa`'s node ids: which the kernel takes (every possible node,
//! online or not, and -1) and which it refuses with EINVAL, up to every
//! class boundary (`node-*` cases and the node lists they walk).

use super::NO;
use guest_tests::cases::{diag, Ctx};
use guest_tests::ktap::{fail, Check, Outcome};
use guest_tests::numa::{
    self, list_str, node_str, wait_ms, wake, want_eq, want_err, want_ok, want_res, Mapping,
    Topology, Waiter, PRIVATE_NUMA,
};
use guest_tests::sys;
use std::sync::atomic::Ordering;
/// Explicit node `n`: wake 0, wait EAGAIN, word unchanged.
pub(crate) fn accepted_node(_: &Topology, m: &Mapping, n: u32) -> Result<(), String> {
    m.set(0, 1, n);
    want_ok(
        &format!("wake with node {n}"),
        wake(m, 0, 1, PRIVATE_NUMA),
        0,
    )?;
    want_err(
        &format!("wait (val mismatch) with node {n}"),
        wait_ms(m.uaddr(0), 0, PRIVATE_NUMA, 50),
        libc::EAGAIN,
    )?;
    want_eq(&format!("node word preset to {n}"), m.node(0), n)
}
/// Every possible node, after a diagnostic of the topology.
pub(crate) fn described(t: &Topology) -> Result<Vec<u32>, Outcome> {
    diag(&t.describe());
    possible(t)
}

pub(crate) fn possible(t: &Topology) -> Result<Vec<u32>, Outcome> {
    Ok(t.possible.clone())
}

/// The possible-but-offline nodes (with a diagnostic), or the skip of a
/// cell without one (a topology with `offline=1` has one).
pub(crate) fn offline(t: &Topology) -> Result<Vec<u32>, Outcome> {
    let off = t.offline_possible();
    if off.is_empty() {
        return Err(Outcome::Skip(format!(
            "needs a possible but offline node (a topology with offline=1); possible {} online {}",
            list_str(&t.possible),
            list_str(&t.online)
        )));
    }
    diag(&format!(
        "possible {} online {}: offline {}",
        list_str(&t.possible),
        list_str(&t.online),
        list_str(&off)
    ));
    Ok(off)
}

/// A waiter on `{0, node}` asleep in the kernel; if it never sleeps, what
/// its wait returned (EINVAL when the kernel refuses the node).
fn offline_waiter(m: &Mapping, node: u32) -> Result<Waiter, String> {
    m.set(0, 0, node);
    let w = Waiter::wait(m.uaddr(0), 0, PRIVATE_NUMA, 10_000, None)?;
    match w.blocked() {
        Ok(()) => Ok(w),
        Err(e) => Err(format!(
            "waiter on node {node}: {e}; its wait returned {}",
            numa::show(&w.join())
        )),
    }
}
/// A wait on an offline node with a matching value times out and changes
/// neither word.
pub(crate) fn offline_times_out(_: &Topology, m: &Mapping, n: u32) -> Result<(), String> {
    m.set(0, 0, n);
    want_err(
        &format!("wait (value matches) with offline node {n}"),
        wait_ms(m.uaddr(0), 0, PRIVATE_NUMA, 50),
        libc::ETIMEDOUT,
    )?;
    want_eq(&format!("node word preset to {n}"), m.node(0), n)?;
    want_eq("futex value", m.word(0).load(Ordering::SeqCst), 0)
}

pub(crate) fn offline_wake_one(_: &Topology, m: &Mapping, n: u32) -> Result<(), String> {
    let w = offline_waiter(m, n)?;
    want_ok(
        &format!("wake with the waiter's offline node {n}"),
        wake(m, 0, 1, PRIVATE_NUMA),
        1,
    )?;
    want_ok(&format!("waiter on offline node {n}"), w.join(), 0)?;
    want_ok(
        &format!("second wake with node {n}"),
        wake(m, 0, 1, PRIVATE_NUMA),
        0,
    )?;
    want_eq(&format!("node word preset to {n}"), m.node(0), n)
}

/// Missed by a waker with each online node, woken by the offline node's.
pub(crate) fn offline_own_table(t: &Topology, m: &Mapping, n: u32) -> Result<(), String> {
    let w = offline_waiter(m, n)?;
    for &o in &t.online {
        m.word(4).store(o, Ordering::SeqCst);
        want_ok(
            &format!("wake with online node {o} of a waiter on offline node {n}"),
            wake(m, 0, i32::MAX, PRIVATE_NUMA),
            0,
        )?;
    }
    m.word(4).store(n, Ordering::SeqCst);
    want_ok(
        &format!("wake with the waiter's offline node {n}"),
        wake(m, 0, 1, PRIVATE_NUMA),
        1,
    )?;
    want_ok(&format!("waiter on offline node {n}"), w.join(), 0)
}

pub(crate) fn rejected_node(_: &Topology, m: &Mapping, n: u32) -> Result<(), String> {
    m.set(0, 0, n);
    want_err(
        &format!("wake with node {}", node_str(n)),
        wake(m, 0, 1, PRIVATE_NUMA),
        libc::EINVAL,
    )?;
    want_err(
        &format!("wait with node {}", node_str(n)),
        wait_ms(m.uaddr(0), 0, PRIVATE_NUMA, 50),
        libc::EINVAL,
    )?;
    want_eq("node word after EINVAL", m.node(0), n)
}
/// The smallest node id that is not possible.
pub(crate) fn not_possible(t: &Topology) -> Result<Vec<u32>, Outcome> {
    let Some(n) = t.first_not_possible() else {
        return Err(Outcome::Skip(format!(
            "every node id below {} is possible",
            numa::NODE_SCAN_LIMIT
        )));
    };
    diag(&format!(
        "possible {}, testing node {n}",
        list_str(&t.possible)
    ));
    Ok(vec![n])
}

/// The huge node ids that are not possible (at least three).
pub(crate) fn out_of_range(t: &Topology) -> Result<Vec<u32>, Outcome> {
    let huge = [1024, 4096, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe];
    let ids: Vec<u32> = huge
        .into_iter()
        .filter(|n| !t.possible.contains(n))
        .collect();
    if ids.len() < 3 {
        return Err(fail(format!(
            "only {} huge node ids were not possible",
            ids.len()
        )));
    }
    Ok(ids)
}

/// Every node id class boundary (docs/futex-abi.md, "The node word"):
/// `get_futex_key()` (7.3) takes a node word that is `FUTEX_NO_NODE` or
/// both below `MAX_NUMNODES` and in `node_possible_map`, else EINVAL.
/// MAX_NUMNODES is `1 << CONFIG_NODES_SHIFT`, which userspace cannot read
/// without a decompressor for /proc/config.gz: 2^k-1, 2^k, 2^k+1 for every
/// k in 1..=31 bracket it whatever the shift.
fn class_boundaries(t: &Topology) -> Vec<u32> {
    let end = t.possible.iter().max().map_or(0, |n| n + 1); // nr_node_ids
    let mut ids: Vec<u32> = t.possible.clone();
    ids.extend((0..end).filter(|n| !t.possible.contains(n)));
    ids.extend([end.saturating_sub(1), end, end + 1]);
    let lim = numa::NODE_SCAN_LIMIT;
    ids.extend([lim - 1, lim, lim + 1]);
    for k in 1..=31u32 {
        let p = 1u32 << k;
        ids.extend([p - 1, p, p.wrapping_add(1)]);
    }
    ids.extend([i32::MAX as u32, 0x8000_0000, 0xffff_fffe, NO]);
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// One node id on a `{1, n}` futex: wake and a mismatching wait are
/// accepted (0, EAGAIN) for a possible node or -1, else EINVAL; the value
/// word never changes, the node word only for -1 (to a possible node).
fn class_boundary(t: &Topology, m: &Mapping, flags: u32, kind: &str, n: u32) -> Result<(), String> {
    let ok = n == NO || t.possible.contains(&n);
    let class = if ok { "accepted" } else { "refused" };
    for call in ["wake", "wait (val mismatch)"] {
        m.set(0, 1, n);
        let what = format!("{kind} {call} with node {} ({class})", node_str(n));
        let (got, accepted) = if call == "wake" {
            (wake(m, 0, 1, flags), Ok(0))
        } else {
            (wait_ms(m.uaddr(0), 0, flags, 50), Err(libc::EAGAIN))
        };
        want_res(&what, got, if ok { accepted } else { Err(libc::EINVAL) })?;
        want_eq(
            &format!("{what}: value word"),
            m.word(0).load(Ordering::SeqCst),
            1,
        )?;
        let node = m.node(0);
        if n == NO {
            if !t.possible.contains(&node) {
                return Err(format!(
                    "{what}: node word written back as {}, not a possible node",
                    node_str(node)
                ));
            }
        } else {
            want_eq(&format!("{what}: node word"), node, n)?;
        }
    }
    Ok(())
}

pub(crate) fn node_class_boundaries(_: &Ctx) -> Check {
    let t = Topology::read()?;
    let ids = class_boundaries(&t);
    diag(&format!(
        "{}; {} ids: MAX_NUMNODES bracketed by 2^k-1, 2^k, 2^k+1 for k in 1..=31 \
         (/proc/config.gz not read: no decompressor in the guest)",
        t.describe(),
        ids.len()
    ));
    for (kind, shared, flags) in [
        ("private", false, PRIVATE_NUMA),
        ("shared", true, PRIVATE_NUMA & !sys::FUTEX2_PRIVATE),
    ] {
        let m = Mapping::anon(1, shared)?;
        for &n in &ids {
            class_boundary(&t, &m, flags, kind, n)?;
        }
    }
    Ok(())
}
