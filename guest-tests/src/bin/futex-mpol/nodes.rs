//! `futex-mpol`'s cases across two nodes (`docs/futex-abi.md` section 3):
//! the task policy that `futex_mpol()` does not look at, and the node of
//! each entry of a `futex_waitv` and of both words of a `futex_requeue`.
//! Each needs two online nodes with memory and a CPU on one of them, and
//! SKIPs naming what it has otherwise.

use super::{topo, Policy, NO, NUMA_MPOL, PASS};
use guest_tests::cases::{diag, Ctx};
use guest_tests::ktap::{Check, Outcome};
use guest_tests::numa::{
    list_str, mpol, pin_checked, waitv_entry, wake, want_eq, want_ok, Mapping, Topology, Waiter,
    PRIVATE_NUMA, PRIVATE_PLAIN,
};
use guest_tests::sys;
use std::sync::atomic::Ordering;

/// Two memory nodes `(a, b)` with a CPU on `a` (the caller's node), or the
/// SKIP saying what is missing.
fn two_nodes(t: &Topology) -> Result<(u32, u32, u32), Outcome> {
    let mem = t.memory_nodes();
    for &(cpu, a) in &t.pin_targets() {
        if let Some(&b) = mem.iter().find(|&&n| n != a) {
            if mem.contains(&a) {
                return Ok((cpu, a, b));
            }
        }
    }
    Err(Outcome::Skip(format!(
        "needs 2 online nodes with memory and an allowed CPU on one of them; \
         online {}, with memory {}",
        list_str(&t.online),
        list_str(&mem)
    )))
}

fn mask(nodes: &[u32]) -> [u64; 16] {
    let mut m = [0u64; 16];
    for &n in nodes {
        m[n as usize / 64] |= 1 << (n % 64);
    }
    m
}

/// A task policy (set_mempolicy) of PREFERRED, BIND or PREFERRED_MANY
/// naming another node than the caller's, and no VMA policy: NUMA|MPOL
/// writes the caller's node, exactly what NUMA alone writes; an MPOL-only
/// waiter stays in the private table (a plain private waker wakes it).
pub fn task_policy_ignored(ctx: &Ctx) -> Check {
    let t = topo()?;
    let mut pairs = Vec::new();
    for n in t.memory_nodes() {
        for &(cpu, node) in &t.pin_targets() {
            if node != n {
                pairs.push((n, cpu, node));
            }
        }
    }
    if pairs.is_empty() {
        return Err(Outcome::Skip(format!(
            "needs a node with memory and an allowed CPU on another node; online {}, with memory {}",
            list_str(&t.online),
            list_str(&t.memory_nodes())
        )));
    }
    let m = Mapping::anon(1, false)?;
    for mode in [mpol::PREFERRED, mpol::BIND, mpol::PREFERRED_MANY] {
        for &(n, cpu, node) in &pairs {
            want_ok(
                &format!("set_mempolicy({} {{{n}}})", mpol::name(mode)),
                sys::set_mempolicy(mode, &mask(&[n])),
                0,
            )?;
            pin_checked(cpu, node)?;
            let what = format!(
                "task policy {} {{{n}}}, no VMA policy, CPU {cpu} (node {node})",
                mpol::name(mode)
            );
            m.set(0, 0, NO);
            want_ok(
                &format!("wake(nr 0, NUMA|MPOL) under {what}"),
                wake(&m, 0, 0, NUMA_MPOL),
                0,
            )?;
            let mpol_node = m.node(0);
            m.set(0, 0, NO);
            want_ok(
                &format!("wake(nr 0, NUMA) under {what}"),
                wake(&m, 0, 0, PRIVATE_NUMA),
                0,
            )?;
            let numa_node = m.node(0);
            want_eq(
                &format!("node word NUMA|MPOL wrote under {what} (NUMA alone wrote {numa_node})"),
                mpol_node,
                node,
            )?;
            want_eq(
                &format!("node word NUMA wrote under {what}"),
                numa_node,
                node,
            )?;
        }
    }
    // The MPOL-only key keeps FUTEX_NO_NODE: with a private table a plain
    // private waker finds it (a VMA PREFERRED would route it away: the
    // `mpol-only-routes-key` case).
    if ctx.expect.private_hash {
        let (n, cpu, node) = pairs[0];
        want_ok("PR_FUTEX_HASH_SET_SLOTS 2", sys::set_slots(2), 0)?;
        want_ok(
            &format!("set_mempolicy(PREFERRED {{{n}}})"),
            sys::set_mempolicy(mpol::PREFERRED, &mask(&[n])),
            0,
        )?;
        pin_checked(cpu, node)?;
        m.set(0, 0, NO);
        let w = Waiter::wait(m.uaddr(0), 0, super::MPOL_ONLY, 10_000, Some(cpu))?;
        w.blocked()?;
        want_ok(
            &format!(
                "plain private wake of an MPOL-only waiter under task policy PREFERRED {{{n}}}"
            ),
            wake(&m, 0, 1, PRIVATE_PLAIN),
            1,
        )?;
        want_ok("the MPOL-only waiter", w.join(), 0)?;
    } else {
        diag("no private hash: the MPOL-only part (plain waker in the private table) not run");
    }
    want_ok(
        "set_mempolicy(DEFAULT)",
        sys::set_mempolicy(mpol::DEFAULT, &[]),
        0,
    )?;
    PASS
}

/// futex_waitv with entries [NUMA node a, NUMA node b, NUMA|MPOL -1 on a
/// page with VMA PREFERRED {b}], waiting on a CPU of node a: each entry
/// queues on its own node (MPOL resolved in the waitv: the word reads b);
/// a wake of an entry's word with another node misses it (0), one with
/// its node wakes it (1) and waitv returns that entry's index.
pub fn waitv_entry_nodes(ctx: &Ctx) -> Check {
    let t = topo()?;
    let (cpu, a, b) = two_nodes(&t)?;
    pin_checked(cpu, a)?;
    let m = Mapping::anon(1, false)?;
    let p = Mapping::anon(1, false)?;
    Policy::new(mpol::PREFERRED, &[b], None).apply(&p)?;
    // With mpol=0 the MPOL entry gets the waiter's node, a.
    let e2_node = if ctx.expect.mpol { b } else { a };
    let entries = |m: &Mapping, p: &Mapping| {
        vec![
            waitv_entry(m.uaddr(0), 0, PRIVATE_NUMA),
            waitv_entry(m.uaddr(64), 0, PRIVATE_NUMA),
            waitv_entry(p.uaddr(0), 0, NUMA_MPOL),
        ]
    };
    // Round 1: entry 2 (MPOL) is the one woken.
    m.set(0, 0, a);
    m.set(64, 0, b);
    p.set(0, 0, NO);
    let w = Waiter::waitv(entries(&m, &p), 10_000)?;
    w.blocked()?;
    want_eq(
        "node words while waitv waits (entry 0, 1, 2)",
        (m.node(0), m.node(64), p.node(0)),
        (a, b, e2_node),
    )?;
    let other = if e2_node == a { b } else { a };
    p.word(4).store(other, Ordering::SeqCst);
    want_ok(
        &format!("NUMA wake of entry 2's word with node {other}"),
        wake(&p, 0, 1, PRIVATE_NUMA),
        0,
    )?;
    m.word(68).store(a, Ordering::SeqCst);
    want_ok(
        &format!("NUMA wake of entry 1's word with node {a} (it waits on {b})"),
        wake(&m, 64, 1, PRIVATE_NUMA),
        0,
    )?;
    m.word(68).store(b, Ordering::SeqCst);
    p.set(0, 0, NO);
    want_ok(
        "NUMA|MPOL wake of entry 2's word {0, -1}",
        wake(&p, 0, 1, NUMA_MPOL),
        1,
    )?;
    want_ok("waitv (index of the woken entry)", w.join(), 2)?;
    // Round 2: entry 1 (node b), after a miss with node a.
    m.set(0, 0, a);
    m.set(64, 0, b);
    p.set(0, 0, NO);
    let w = Waiter::waitv(entries(&m, &p), 10_000)?;
    w.blocked()?;
    m.word(4).store(b, Ordering::SeqCst);
    want_ok(
        &format!("NUMA wake of entry 0's word with node {b} (it waits on {a})"),
        wake(&m, 0, 1, PRIVATE_NUMA),
        0,
    )?;
    want_ok(
        &format!("NUMA wake of entry 1's word with node {b}"),
        wake(&m, 64, 1, PRIVATE_NUMA),
        1,
    )?;
    want_ok("waitv (index of the woken entry)", w.join(), 1)?;
    m.word(4).store(a, Ordering::SeqCst);
    want_ok(
        "NUMA wake of entry 0's word (node a) after waitv returned",
        wake(&m, 0, 1, PRIVATE_NUMA),
        0,
    )?;
    PASS
}

/// futex_requeue from a NUMA word of node a to one of node b: two waiters
/// on a (the older one woken, the younger moved: 2); the moved one is then
/// missed by wakes of the source word (node a) and of the target word with
/// node a (0), and woken by the target word with node b (1). Then the same
/// with NUMA|MPOL words {0, -1} on pages with VMA PREFERRED {a} and {b}.
pub fn requeue_across_nodes(ctx: &Ctx) -> Check {
    let t = topo()?;
    let (cpu, a, b) = two_nodes(&t)?;
    pin_checked(cpu, a)?;
    let m = Mapping::anon(1, false)?;
    m.set(0, 0, a);
    m.set(64, 0, b);
    let older = Waiter::wait(m.uaddr(0), 0, PRIVATE_NUMA, 10_000, Some(cpu))?;
    older.blocked()?;
    let younger = Waiter::wait(m.uaddr(0), 0, PRIVATE_NUMA, 10_000, Some(cpu))?;
    younger.blocked()?;
    let rq = [
        waitv_entry(m.uaddr(0), 0, PRIVATE_NUMA),
        waitv_entry(m.uaddr(64), 0, PRIVATE_NUMA),
    ];
    want_ok(
        &format!("futex_requeue node {a} -> node {b} (nr_wake 1, nr_requeue 1)"),
        sys::futex_requeue(&rq, 0, 1, 1),
        2,
    )?;
    want_ok("the older waiter (woken by the requeue)", older.join(), 0)?;
    younger.blocked()?;
    want_eq(
        "node words after the requeue",
        (m.node(0), m.node(64)),
        (a, b),
    )?;
    want_ok(
        &format!("NUMA wake of the source word (node {a})"),
        wake(&m, 0, 1, PRIVATE_NUMA),
        0,
    )?;
    m.word(68).store(a, Ordering::SeqCst);
    want_ok(
        &format!("NUMA wake of the target word with node {a}"),
        wake(&m, 64, 1, PRIVATE_NUMA),
        0,
    )?;
    m.word(68).store(b, Ordering::SeqCst);
    want_ok(
        &format!("NUMA wake of the target word with node {b}"),
        wake(&m, 64, 1, PRIVATE_NUMA),
        1,
    )?;
    want_ok("the requeued waiter", younger.join(), 0)?;
    // By policy: both words {0, -1}, the nodes come from the VMAs.
    let (src, dst) = (Mapping::anon(1, false)?, Mapping::anon(1, false)?);
    Policy::new(mpol::PREFERRED, &[a], None).apply(&src)?;
    Policy::new(mpol::PREFERRED, &[b], None).apply(&dst)?;
    let (want_src, want_dst) = if ctx.expect.mpol { (a, b) } else { (a, a) };
    src.set(0, 0, NO);
    dst.set(0, 0, NO);
    let w = Waiter::wait(src.uaddr(0), 0, NUMA_MPOL, 10_000, Some(cpu))?;
    w.blocked()?;
    let rq = [
        waitv_entry(src.uaddr(0), 0, NUMA_MPOL),
        waitv_entry(dst.uaddr(0), 0, NUMA_MPOL),
    ];
    want_ok(
        "futex_requeue of NUMA|MPOL words (nr_wake 0, nr_requeue 1)",
        sys::futex_requeue(&rq, 0, 0, 1),
        1,
    )?;
    want_eq(
        "node words the requeue wrote (source, target)",
        (src.node(0), dst.node(0)),
        (want_src, want_dst),
    )?;
    want_ok(
        "NUMA|MPOL wake of the source word",
        wake(&src, 0, 1, NUMA_MPOL),
        0,
    )?;
    want_ok(
        &format!("NUMA wake of the target word (node {want_dst})"),
        wake(&dst, 0, 1, PRIVATE_NUMA),
        1,
    )?;
    want_ok("the requeued NUMA|MPOL waiter", w.join(), 0)?;
    PASS
}
