//! FUTEX2_MPOL: the node a `{val, -1}` futex gets from the VMA memory
//! policy of its page (`docs/futex-abi.md` section 3, `__futex_key_to_node`).
//!
//! The futex page gets a policy with `mbind` (and a home node with
//! `set_mempolicy_home_node`); then, pinned to each CPU of each online node,
//! `futex_wake(nr 0, U32|PRIVATE|NUMA|MPOL)` on `{0, -1}` must return 0 and
//! write the expected node: PREFERRED -> its node; BIND / PREFERRED_MANY ->
//! the home node if set, else the caller's node (`getcpu()`); INTERLEAVE,
//! WEIGHTED_INTERLEAVE, LOCAL, DEFAULT -> the caller's node.
//! Expectations: `numa=0` -> NUMA|MPOL and MPOL alone are EINVAL;
//! `mpol=0` (no CONFIG_FUTEX_MPOL) -> MPOL is accepted and ignored, so every
//! node above is the caller's node. With one node the policy node and the
//! caller's node coincide, so an honoured policy and an ignored one write
//! the same word: `preferred`, `bind-home`, `bind-no-home`,
//! `preferred-many-home`, `preferred-many-no-home`, `interleave`,
//! `weighted-interleave`, `local` and `default` SKIP with fewer than two
//! memory nodes ("one memory node: a policy cannot pick another node");
//! the `-remote` cases need a policy node other than the caller's and SKIP
//! without one.
//!
//! Cases:
//! - `preferred`: PREFERRED {N} for each memory node N -> N on every CPU.
//! - `preferred-remote`: PREFERRED {N} with the caller on another node -> N.
//! - `bind-home`: BIND {memory nodes} + home H for each online H -> H.
//! - `bind-home-remote`: as above with H not the caller's node.
//! - `bind-no-home`: BIND {N} without home node -> the caller's node.
//! - `preferred-many-home`: PREFERRED_MANY {memory nodes} + home H -> H.
//! - `preferred-many-home-remote`: as above with H not the caller's node.
//! - `preferred-many-no-home`: PREFERRED_MANY without home node -> caller's node.
//! - `interleave`: INTERLEAVE {memory nodes} -> caller's node.
//! - `weighted-interleave`: WEIGHTED_INTERLEAVE {memory nodes} -> caller's node.
//! - `local`: LOCAL -> caller's node.
//! - `default`: no policy, and PREFERRED replaced by mbind(DEFAULT) -> caller's node.
//! - `caller-node-modes-remote`: BIND, PREFERRED_MANY, INTERLEAVE,
//!   WEIGHTED_INTERLEAVE over {N} (no home) with the caller on another node ->
//!   the caller's node, not N.
//! - `explicit-node-overrides-policy`: node preset to each possible node P under
//!   PREFERRED {M}: wake 0, word stays P; on a read-only page a preset node
//!   works (wake 0: MPOL not consulted, nothing written) while -1 is EFAULT.
//! - `explicit-node-overrides-policy-remote`: as above with P != M.
//! - `mpol-only-no-writeback`: MPOL without NUMA under PREFERRED {N}: wake 0,
//!   wait EAGAIN / ETIMEDOUT, the following word stays -1; works on a
//!   read-only page.
//! - `mpol-only-no-alignment`: MPOL without NUMA at 4 mod 8 and at page end - 4
//!   (next page PROT_NONE) -> wake 0, while NUMA|MPOL there is EINVAL.
//! - `mpol-only-routes-key`: with a private hash (SET 2), an MPOL-only waiter
//!   under PREFERRED {N} sits in global table N: a plain private waker wakes 0
//!   and a NUMA waker with node N wakes 1 (with `mpol=0` the plain waker wakes
//!   1); without a policy the plain waker wakes it (1). SKIP without a
//!   private hash (a plain waker's node is then a hash of the key).
//! - `mpol-only-routes-key-cross-node`: for memory nodes a != b, an MPOL-only
//!   waiter under PREFERRED {a} is missed by a NUMA waker on node b (0) and hit
//!   by one on node a (1), both ways round; with `mpol=0` that pattern cannot
//!   hold both ways (SKIP with < 2 memory nodes).
//! - `task-policy-ignored`: a task policy (`set_mempolicy` PREFERRED, BIND,
//!   PREFERRED_MANY {N}) and no VMA policy, the caller on another node:
//!   NUMA|MPOL writes the caller's node, as NUMA alone does; an MPOL-only
//!   waiter is woken by a plain private waker (1) on a private table.
//! - `waitv-entry-nodes`: waitv of [NUMA node a, NUMA node b, NUMA|MPOL -1
//!   under VMA PREFERRED {b}] on node a: the MPOL entry's word reads b; a
//!   wake with the wrong node misses (0), the right one wakes (1) and waitv
//!   returns 2, then 1.
//! - `requeue-across-nodes`: two waiters on a NUMA word of node a,
//!   futex_requeue to a word of node b (nr_wake 1, nr_requeue 1) returns 2,
//!   the older wakes; the source and the target with node a wake 0, the
//!   target with node b 1; the same by VMA policy with NUMA|MPOL {0, -1}
//!   words (requeue 1, words a and b). All three SKIP with < 2 memory nodes.

#[path = "futex-mpol/nodes.rs"]
mod nodes;

use guest_tests::cases::{self, diag, Case, Ctx};
use guest_tests::ktap::{done, fail, Check, Outcome};
use guest_tests::numa::{
    self, expect_flags_rejected, list_str, mpol, node_str, page_size, pin_checked,
    set_mempolicy_home_node, wait_ms, wake, want_eq, want_err, want_ok, Mapping, Topology, Waiter,
    PRIVATE_NUMA, PRIVATE_PLAIN,
};
use guest_tests::sys::{self, FUTEX_NO_NODE};
use std::sync::atomic::Ordering;

const NO: u32 = FUTEX_NO_NODE;
const PASS: Check = Ok(());
/// `U32 | PRIVATE | NUMA | MPOL`.
const NUMA_MPOL: u32 = PRIVATE_NUMA | sys::FUTEX2_MPOL;
/// `U32 | PRIVATE | MPOL`.
const MPOL_ONLY: u32 = PRIVATE_PLAIN | sys::FUTEX2_MPOL;

/// What every case checks instead with `numa=0`: NUMA|MPOL and MPOL alone
/// are EINVAL.
fn absent() -> Check {
    expect_flags_rejected(NUMA_MPOL)?;
    Ok(expect_flags_rejected(MPOL_ONLY)?)
}

/// A memory policy for the futex page.
#[derive(Debug, Clone)]
struct Policy {
    mode: i32,
    nodes: Vec<u32>,
    home: Option<u32>,
}

impl Policy {
    fn new(mode: i32, nodes: &[u32], home: Option<u32>) -> Policy {
        Policy {
            mode,
            nodes: nodes.to_vec(),
            home,
        }
    }

    /// What `__futex_key_to_node` resolves (None = FUTEX_NO_NODE).
    fn resolves_to(&self) -> Option<u32> {
        match self.mode {
            mpol::PREFERRED => self.nodes.first().copied(),
            mpol::BIND | mpol::PREFERRED_MANY => self.home,
            _ => None,
        }
    }

    /// The node word NUMA|MPOL must leave when the caller runs on `caller`.
    fn expected(&self, ctx: &Ctx, caller: u32) -> u32 {
        if ctx.expect.mpol {
            self.resolves_to().unwrap_or(caller)
        } else {
            caller
        }
    }

    fn describe(&self) -> String {
        let home = self.home.map_or(String::new(), |h| format!(" home {h}"));
        format!("{} {}{home}", mpol::name(self.mode), list_str(&self.nodes))
    }

    /// Applies the policy to the first page of `m`.
    fn apply(&self, m: &Mapping) -> Result<(), String> {
        // SAFETY: the range is our own mapping.
        let got = unsafe { numa::mbind(m.addr(), page_size(), self.mode, &self.nodes, 0) };
        want_ok(&format!("mbind {}", self.describe()), got, 0)?;
        if let Some(h) = self.home {
            want_ok(
                &format!("set_mempolicy_home_node({h}) on {}", self.describe()),
                set_mempolicy_home_node(m.addr(), page_size(), h, 0),
                0,
            )?;
        }
        Ok(())
    }
}

/// For each `(cpu, node)` target: pins, resets `{0,-1}`, wake(nr 0,
/// NUMA|MPOL) must return 0 and leave `policy.expected(node)`.
fn check_policy(ctx: &Ctx, policy: &Policy, targets: &[(u32, u32)]) -> Result<(), String> {
    let m = Mapping::anon(1, false)?;
    policy.apply(&m)?;
    for &(cpu, node) in targets {
        pin_checked(cpu, node)?;
        m.set(0, 0, NO);
        want_ok(
            &format!(
                "wake(nr 0, NUMA|MPOL) under {} on CPU {cpu}",
                policy.describe()
            ),
            wake(&m, 0, 0, NUMA_MPOL),
            0,
        )?;
        let want = policy.expected(ctx, node);
        if m.node(0) != want {
            return Err(format!(
                "under {} on CPU {cpu} (node {node}) the node word is {}, expected {want}",
                policy.describe(),
                node_str(m.node(0))
            ));
        }
    }
    Ok(())
}

fn topo() -> Result<Topology, String> {
    let t = Topology::read()?;
    diag(&t.describe());
    if t.pin_targets().is_empty() {
        return Err("no CPU to pin to".into());
    }
    if t.memory_nodes().is_empty() {
        return Err("no online node with memory".into());
    }
    Ok(t)
}

/// Pairs of (policy node from `nodes`, target whose node differs).
fn remote_pairs(t: &Topology, nodes: &[u32]) -> Vec<(u32, (u32, u32))> {
    let mut v = Vec::new();
    for &n in nodes {
        for &(cpu, node) in &t.pin_targets() {
            if node != n {
                v.push((n, (cpu, node)));
            }
        }
    }
    v
}

fn skip_remote(t: &Topology, what: &str) -> Check {
    Err(Outcome::Skip(format!(
        "needs >= 2 online nodes ({what} and an allowed CPU on another node), have {} ({})",
        t.online.len(),
        list_str(&t.online)
    )))
}

/// Why a case whose policy may resolve to the caller's node cannot tell
/// an honoured policy from an ignored one.
const ONE_MEMORY_NODE: &str = "one memory node: a policy cannot pick another node";

/// The SKIP of such a case on fewer than two memory nodes: every node a
/// policy names is then the one the caller's memory comes from, and
/// `mpol=0` (the caller's node) expects the same word.
fn another_node(t: &Topology) -> Option<Check> {
    let mem = t.memory_nodes();
    (mem.len() < 2).then(|| {
        Err(Outcome::Skip(format!(
            "{ONE_MEMORY_NODE} (online {}, with memory {})",
            list_str(&t.online),
            list_str(&mem)
        )))
    })
}

/// What a policy case's policies vary over.
#[derive(Clone, Copy)]
enum Over {
    /// Each memory node N: the policy's nodes are {N}.
    Node,
    /// Each online node H: the policy is over every memory node, home H.
    Home,
    /// One policy over every memory node, no home.
    Memory,
    /// One policy without nodes (LOCAL).
    NoNodes,
}

/// A case body: a policy case (its modes, what its policies vary over,
/// whether the caller must be on a node other than the varying one), a
/// preset node under a policy (whether it must differ from the policy's),
/// or a function of its own.
enum Body {
    Policies(&'static [i32], Over, bool),
    Override(bool),
    Own(fn(&Ctx) -> Check),
}
use mpol::{BIND, INTERLEAVE, LOCAL, PREFERRED, PREFERRED_MANY, WEIGHTED_INTERLEAVE};
use Body::{Override, Own, Policies as Pol};
use Over::{Home, Memory, NoNodes, Node};
const ANY_CPU: bool = false;
const REMOTE: bool = true;

/// Every case, in order; with `numa=0` each is [`absent`] instead.
#[rustfmt::skip] // one row a line
const CASES: &[(&str, Body)] = &[
    ("preferred", Pol(&[PREFERRED], Node, ANY_CPU)),
    ("preferred-remote", Pol(&[PREFERRED], Node, REMOTE)),
    ("bind-home", Pol(&[BIND], Home, ANY_CPU)),
    ("bind-home-remote", Pol(&[BIND], Home, REMOTE)),
    ("bind-no-home", Pol(&[BIND], Node, ANY_CPU)),
    ("preferred-many-home", Pol(&[PREFERRED_MANY], Home, ANY_CPU)),
    ("preferred-many-home-remote", Pol(&[PREFERRED_MANY], Home, REMOTE)),
    ("preferred-many-no-home", Pol(&[PREFERRED_MANY], Memory, ANY_CPU)),
    ("interleave", Pol(&[INTERLEAVE], Memory, ANY_CPU)),
    ("weighted-interleave", Pol(&[WEIGHTED_INTERLEAVE], Memory, ANY_CPU)),
    ("local", Pol(&[LOCAL], NoNodes, ANY_CPU)),
    ("default", Own(default_policy)),
    ("caller-node-modes-remote", Pol(&[BIND, PREFERRED_MANY, INTERLEAVE, WEIGHTED_INTERLEAVE], Node, REMOTE)),
    ("explicit-node-overrides-policy", Override(ANY_CPU)),
    ("explicit-node-overrides-policy-remote", Override(REMOTE)),
    ("mpol-only-no-writeback", Own(mpol_only_no_writeback)),
    ("mpol-only-no-alignment", Own(mpol_only_no_alignment)),
    ("mpol-only-routes-key", Own(mpol_only_routes_key)),
    ("mpol-only-routes-key-cross-node", Own(mpol_only_routes_cross_node)),
    ("task-policy-ignored", Own(nodes::task_policy_ignored)),
    ("waitv-entry-nodes", Own(nodes::waitv_entry_nodes)),
    ("requeue-across-nodes", Own(nodes::requeue_across_nodes)),
];

fn run(ctx: &Ctx) -> Outcome {
    let Some((_, body)) = CASES.iter().find(|r| r.0 == ctx.case) else {
        return fail(format!("no row for case {}", ctx.case));
    };
    done(match body {
        _ if !ctx.expect.numa => absent(),
        Pol(modes, over, remote) => policies(ctx, modes, *over, *remote),
        Override(remote) => explicit_override(*remote),
        Own(f) => f(ctx),
    })
}

/// For each mode and each node `over` names, [`check_policy`] on every
/// CPU (SKIP with one memory node), or with `remote` on each CPU of a
/// node other than that one (SKIP without such a CPU).
fn policies(ctx: &Ctx, modes: &[i32], over: Over, remote: bool) -> Check {
    let t = topo()?;
    let mem = t.memory_nodes();
    let (nodes, what) = match over {
        Home => (t.online.clone(), "a home node"),
        Node => (mem.clone(), "a node with memory"),
        Memory | NoNodes => (vec![0], ""),
    };
    let policy = |mode, v| match over {
        Node => Policy::new(mode, &[v], None),
        Home => Policy::new(mode, &mem, Some(v)),
        Memory => Policy::new(mode, &mem, None),
        NoNodes => Policy::new(mode, &[], None),
    };
    if remote {
        let pairs = remote_pairs(&t, &nodes);
        if pairs.is_empty() {
            return skip_remote(&t, what);
        }
        for &mode in modes {
            for &(v, target) in &pairs {
                check_policy(ctx, &policy(mode, v), &[target])?;
            }
        }
    } else {
        if let Some(skip) = another_node(&t) {
            return skip;
        }
        for &mode in modes {
            for &v in &nodes {
                check_policy(ctx, &policy(mode, v), &t.pin_targets())?;
            }
        }
    }
    PASS
}

fn default_policy(_: &Ctx) -> Check {
    let t = topo()?;
    if let Some(skip) = another_node(&t) {
        return skip;
    }
    // No mbind at all: no VMA policy.
    let m = Mapping::anon(1, false)?;
    for (cpu, node) in t.pin_targets() {
        pin_checked(cpu, node)?;
        m.set(0, 0, NO);
        want_ok(
            "wake(nr 0, NUMA|MPOL) without a policy",
            wake(&m, 0, 0, NUMA_MPOL),
            0,
        )?;
        want_eq(
            &format!("node word without a policy on CPU {cpu}"),
            m.node(0),
            node,
        )?;
    }
    // PREFERRED, then replaced by DEFAULT: the PREFERRED node no longer counts.
    // A PREFERRED node other than the first target's, so that a kernel
    // keeping it writes a node the caller is not on.
    let m2 = Mapping::anon(1, false)?;
    let mem = t.memory_nodes();
    let first = t.pin_targets()[0].1;
    let n = mem.iter().copied().find(|&n| n != first).unwrap_or(mem[0]);
    Policy::new(mpol::PREFERRED, &[n], None).apply(&m2)?;
    Policy::new(mpol::DEFAULT, &[], None).apply(&m2)?;
    for (cpu, node) in t.pin_targets() {
        pin_checked(cpu, node)?;
        m2.set(0, 0, NO);
        want_ok(
            "wake(nr 0, NUMA|MPOL) after mbind(DEFAULT)",
            wake(&m2, 0, 0, NUMA_MPOL),
            0,
        )?;
        want_eq(
            &format!("node word after PREFERRED {n} -> DEFAULT on CPU {cpu}"),
            m2.node(0),
            node,
        )?;
    }
    PASS
}

fn override_one(m: &Mapping, preset: u32, pol_node: u32) -> Result<(), String> {
    let ps = page_size();
    m.protect(0, ps, libc::PROT_READ | libc::PROT_WRITE)?;
    m.set(0, 0, preset);
    want_ok(
        &format!("wake(nr 0, NUMA|MPOL) with node {preset} under PREFERRED {pol_node}"),
        wake(m, 0, 0, NUMA_MPOL),
        0,
    )?;
    want_eq(
        &format!("node word preset to {preset} under PREFERRED {pol_node}"),
        m.node(0),
        preset,
    )?;
    m.protect(0, ps, libc::PROT_READ)?;
    want_ok(
        &format!("read-only page: wake with node {preset} under PREFERRED {pol_node}"),
        wake(m, 0, 0, NUMA_MPOL),
        0,
    )?;
    m.protect(0, ps, libc::PROT_READ | libc::PROT_WRITE)?;
    m.set(0, 0, NO);
    m.protect(0, ps, libc::PROT_READ)?;
    want_err(
        &format!("read-only page: wake with node -1 under PREFERRED {pol_node}"),
        wake(m, 0, 0, NUMA_MPOL),
        libc::EFAULT,
    )?;
    m.protect(0, ps, libc::PROT_READ | libc::PROT_WRITE)
}

fn explicit_override(remote: bool) -> Check {
    let t = topo()?;
    let mut pairs = Vec::new();
    for &p in &t.possible {
        for m in t.memory_nodes() {
            if !remote || p != m {
                pairs.push((p, m));
            }
        }
    }
    if pairs.is_empty() {
        return Err(Outcome::Skip(format!(
            "needs a possible node other than a memory node; possible {} has_memory {}",
            list_str(&t.possible),
            list_str(&t.memory)
        )));
    }
    for (p, pol) in pairs {
        let m = Mapping::anon(1, false)?;
        Policy::new(mpol::PREFERRED, &[pol], None).apply(&m)?;
        override_one(&m, p, pol)?;
    }
    PASS
}

fn mpol_only_no_writeback(_: &Ctx) -> Check {
    let t = topo()?;
    for n in t.memory_nodes() {
        let m = Mapping::anon(1, false)?;
        Policy::new(mpol::PREFERRED, &[n], None).apply(&m)?;
        m.set(0, 1, NO);
        want_ok("MPOL-only wake nr 0", wake(&m, 0, 0, MPOL_ONLY), 0)?;
        want_ok("MPOL-only wake nr 1", wake(&m, 0, 1, MPOL_ONLY), 0)?;
        want_err(
            "MPOL-only wait (val mismatch)",
            wait_ms(m.uaddr(0), 0, MPOL_ONLY, 50),
            libc::EAGAIN,
        )?;
        want_err(
            "MPOL-only wait (20 ms)",
            wait_ms(m.uaddr(0), 1, MPOL_ONLY, 20),
            libc::ETIMEDOUT,
        )?;
        want_eq(
            &format!("word after the futex under PREFERRED {n}"),
            m.node(0),
            NO,
        )?;
        m.protect(0, page_size(), libc::PROT_READ)?;
        want_ok(
            "MPOL-only wake nr 0 on a read-only page",
            wake(&m, 0, 0, MPOL_ONLY),
            0,
        )?;
    }
    PASS
}

fn mpol_only_no_alignment(_: &Ctx) -> Check {
    let t = topo()?;
    let ps = page_size();
    let m = Mapping::anon(2, false)?;
    Policy::new(mpol::PREFERRED, &[t.memory_nodes()[0]], None).apply(&m)?;
    m.protect(ps, ps, libc::PROT_NONE)?;
    for off in [4, ps - 4] {
        m.word(off).store(0, Ordering::SeqCst);
        want_ok(
            &format!("MPOL-only wake at offset {off}"),
            wake(&m, off, 1, MPOL_ONLY),
            0,
        )?;
        want_err(
            &format!("MPOL-only wait (val mismatch) at offset {off}"),
            wait_ms(m.uaddr(off), 1, MPOL_ONLY, 50),
            libc::EAGAIN,
        )?;
        want_err(
            &format!("NUMA|MPOL wake at offset {off}"),
            wake(&m, off, 1, NUMA_MPOL),
            libc::EINVAL,
        )?;
    }
    PASS
}

fn mpol_only_routes_key(ctx: &Ctx) -> Check {
    let t = topo()?;
    if !ctx.expect.private_hash {
        return Err(Outcome::Skip(
            "needs the private futex hash: without it a plain waker's node is a hash of the key"
                .into(),
        ));
    }
    want_ok("PR_FUTEX_HASH_SET_SLOTS 2", sys::set_slots(2), 0)?;
    want_ok("PR_FUTEX_HASH_GET_SLOTS", sys::get_slots(), 2)?;
    // Without a policy the MPOL-only key stays FUTEX_NO_NODE: private table.
    let plain = Mapping::anon(1, false)?;
    plain.set(0, 0, NO);
    let w = Waiter::wait(plain.uaddr(0), 0, MPOL_ONLY, 10_000, None)?;
    w.blocked()?;
    want_ok(
        "plain private wake of an MPOL-only waiter without a policy",
        wake(&plain, 0, 1, PRIVATE_PLAIN),
        1,
    )?;
    want_ok("MPOL-only waiter without a policy", w.join(), 0)?;
    for n in t.memory_nodes() {
        let m = Mapping::anon(1, false)?;
        Policy::new(mpol::PREFERRED, &[n], None).apply(&m)?;
        m.set(0, 0, NO);
        let w = Waiter::wait(m.uaddr(0), 0, MPOL_ONLY, 10_000, None)?;
        w.blocked()?;
        want_eq("word after the futex (not written)", m.node(0), NO)?;
        let want_plain = if ctx.expect.mpol { 0 } else { 1 };
        want_ok(
            &format!("plain private wake of an MPOL-only waiter under PREFERRED {n}"),
            wake(&m, 0, 1, PRIVATE_PLAIN),
            want_plain,
        )?;
        if want_plain == 0 {
            m.word(4).store(n, Ordering::SeqCst);
            want_ok(
                &format!("NUMA wake with node {n} of the MPOL-only waiter"),
                wake(&m, 0, 1, PRIVATE_NUMA),
                1,
            )?;
        }
        want_ok(
            &format!("MPOL-only waiter under PREFERRED {n}"),
            w.join(),
            0,
        )?;
    }
    PASS
}

fn mpol_only_routes_cross_node(ctx: &Ctx) -> Check {
    let t = topo()?;
    let mem = t.memory_nodes();
    if mem.len() < 2 {
        return Err(Outcome::Skip(format!(
            "needs >= 2 online nodes with memory, have {} ({})",
            mem.len(),
            list_str(&mem)
        )));
    }
    let (n1, n2) = (mem[0], mem[1]);
    // One address throughout, so an ignored MPOL always hashes to one node.
    let m = Mapping::anon(1, false)?;
    let mut patterns = Vec::new();
    for (a, b) in [(n1, n2), (n2, n1)] {
        Policy::new(mpol::PREFERRED, &[a], None).apply(&m)?;
        m.set(0, 0, NO);
        let w = Waiter::wait(m.uaddr(0), 0, MPOL_ONLY, 10_000, None)?;
        w.blocked()?;
        m.word(4).store(b, Ordering::SeqCst);
        let miss = wake(&m, 0, 1, PRIVATE_NUMA);
        m.word(4).store(a, Ordering::SeqCst);
        let hit = wake(&m, 0, 1, PRIVATE_NUMA);
        // Whatever happened, an MPOL-only wake routes like the waiter.
        let rest = wake(&m, 0, 1, MPOL_ONLY);
        want_ok("MPOL-only waiter", w.join(), 0)?;
        diag(&format!(
            "PREFERRED {a}: NUMA wake node {b} {}, node {a} {}, MPOL-only wake {}",
            numa::show(&miss),
            numa::show(&hit),
            numa::show(&rest)
        ));
        if ctx.expect.mpol {
            want_ok(
                &format!("NUMA wake (node {b}) of an MPOL-only waiter under PREFERRED {a}"),
                miss,
                0,
            )?;
            want_ok(
                &format!("NUMA wake (node {a}) of an MPOL-only waiter under PREFERRED {a}"),
                hit,
                1,
            )?;
        }
        patterns.push((miss, hit));
    }
    if !ctx.expect.mpol && patterns.iter().all(|p| *p == (Ok(0), Ok(1))) {
        return Err(
            "MPOL expected to be ignored, but the MPOL-only waiter followed PREFERRED both times"
                .into(),
        );
    }
    PASS
}

/// The first line of `--help`.
const ABOUT: &str =
    "the node a FUTEX2_MPOL futex ({val, -1}) gets from its page's memory policy (docs/futex-abi.md section 3).";

fn main() {
    let cases: Vec<Case> = CASES.iter().map(|r| Case::new(r.0, run)).collect();
    cases::main(ABOUT, &cases);
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_tests::expect::Expect;

    #[test]
    fn policy_resolution_follows_futex_key_to_node() {
        let on = Ctx {
            expect: Expect::for_release("7.3.4"),
            case: "",
        };
        let mut off = Ctx {
            expect: Expect::for_release("7.3.4"),
            case: "",
        };
        off.expect.mpol = false;
        let caller = 3;
        let cases = [
            (Policy::new(mpol::PREFERRED, &[1, 2], None), 1),
            (Policy::new(mpol::PREFERRED, &[1], Some(2)), 1),
            (Policy::new(mpol::BIND, &[1], Some(2)), 2),
            (Policy::new(mpol::BIND, &[1], None), caller),
            (Policy::new(mpol::PREFERRED_MANY, &[0, 1], Some(0)), 0),
            (Policy::new(mpol::PREFERRED_MANY, &[0, 1], None), caller),
            (Policy::new(mpol::INTERLEAVE, &[1], None), caller),
            (Policy::new(mpol::WEIGHTED_INTERLEAVE, &[1], None), caller),
            (Policy::new(mpol::LOCAL, &[], None), caller),
            (Policy::new(mpol::DEFAULT, &[], None), caller),
        ];
        for (p, want) in cases {
            assert_eq!(p.expected(&on, caller), want, "{}", p.describe());
            assert_eq!(p.expected(&off, caller), caller, "{}", p.describe());
        }
    }
}
