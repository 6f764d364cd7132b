//! `futex-numa`'s node write-back: pinned to each CPU, a call writes that
//! CPU's node into each node word it reads as -1 (`writeback-*`), and
//! concurrent writers leave a valid one (`concurrent-writeback-valid-node`).

use super::{entries, NO};
use guest_tests::cases::{diag, Ctx};
use guest_tests::ktap::{fail, Check};
use guest_tests::numa::{
    self, list_str, node_str, pin_checked, wait_ms, waitv_ms, wake, want_res, Mapping, Topology,
    PRIVATE_NUMA,
};
use guest_tests::sys::{self, Errno};
use std::sync::{Arc, Barrier};
/// Pins to each CPU of each online node in turn and runs `op`, which must
/// leave the node word(s) it returns equal to that CPU's node.
fn each_cpu(mut op: impl FnMut(u32, u32) -> Result<Vec<u32>, String>) -> Check {
    let t = Topology::read()?;
    diag(&t.describe());
    let targets = t.pin_targets();
    if targets.is_empty() {
        return Err(fail(format!("no CPU to pin to: {}", t.describe())));
    }
    for (cpu, node) in targets {
        pin_checked(cpu, node)?;
        let words = op(cpu, node)?;
        for (i, w) in words.iter().enumerate() {
            if *w != node {
                return Err(fail(format!(
                    "on CPU {cpu} (node {node}) node word {i} is {}, expected {node}",
                    node_str(*w)
                )));
            }
        }
    }
    Ok(())
}

/// A call that, pinned to each CPU, must write that CPU's node into the
/// node word of each of its futexes.
pub(crate) struct WriteBack {
    /// The futexes, `{val, -1}` at these offsets, reset before each call.
    words: &'static [(usize, u32)],
    call: fn(&Mapping) -> Result<i64, Errno>,
    /// What the call returns: a count, or `Err(errno)`.
    want: Result<i64, i32>,
    /// The call, for messages (`... on CPU n`).
    what: &'static str,
}

pub(crate) const WAIT_EAGAIN: WriteBack = WriteBack {
    words: &[(0, 1)],
    call: |m| wait_ms(m.uaddr(0), 0, PRIVATE_NUMA, 50),
    want: Err(libc::EAGAIN),
    what: "wait (val mismatch)",
};
pub(crate) const WAIT_TIMEOUT: WriteBack = WriteBack {
    words: &[(0, 0)],
    call: |m| wait_ms(m.uaddr(0), 0, PRIVATE_NUMA, 20),
    want: Err(libc::ETIMEDOUT),
    what: "wait (20 ms)",
};
pub(crate) const WAKE_NR0: WriteBack = WriteBack {
    words: &[(0, 0)],
    call: |m| wake(m, 0, 0, PRIVATE_NUMA),
    want: Ok(0),
    what: "wake nr 0",
};
pub(crate) const WAITV_3: WriteBack = WriteBack {
    words: &[(0, 0), (64, 0), (128, 0)],
    call: |m| waitv_ms(&entries(m, [(0, 0), (64, 0), (128, 0)]), 0, 20),
    want: Err(libc::ETIMEDOUT),
    what: "waitv of 3 NUMA entries (20 ms)",
};
pub(crate) const REQUEUE_0: WriteBack = WriteBack {
    words: &[(0, 0), (64, 0)],
    call: |m| sys::futex_requeue(&entries(m, [(0, 0), (64, 0)]), 0, 0, 0),
    want: Ok(0),
    what: "requeue(nr_wake 0, nr_requeue 0)",
};
pub(crate) const REQUEUE_EAGAIN: WriteBack = WriteBack {
    words: &[(0, 5), (64, 0)],
    call: |m| sys::futex_requeue(&entries(m, [(0, 4), (64, 0)]), 0, 1, 1),
    want: Err(libc::EAGAIN),
    what: "requeue with cmpval 4 != 5",
};

pub(crate) fn writeback(wb: &WriteBack) -> Check {
    let m = Mapping::anon(1, false)?;
    each_cpu(|cpu, _| {
        for &(off, val) in wb.words {
            m.set(off, val, NO);
        }
        want_res(&format!("{} on CPU {cpu}", wb.what), (wb.call)(&m), wb.want)?;
        Ok(wb.words.iter().map(|&(off, _)| m.node(off)).collect())
    })
}

pub(crate) fn concurrent_writeback(_: &Ctx) -> Check {
    const THREADS: usize = 8;
    const ROUNDS: usize = 200;
    let t = Topology::read()?;
    let targets = t.pin_targets();
    if targets.is_empty() {
        return Err("no CPU to pin to".into());
    }
    let valid: Vec<u32> = targets.iter().map(|&(_, n)| n).collect();
    let m = Arc::new(Mapping::anon(1, false)?);
    let start = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(Barrier::new(THREADS + 1));
    let mut hs = Vec::new();
    for i in 0..THREADS {
        let (cpu, _) = targets[i % targets.len()];
        let (m, start, done) = (m.clone(), start.clone(), done.clone());
        hs.push(std::thread::spawn(move || -> Result<(), String> {
            let pinned = numa::sched_setaffinity(&[cpu]).map_err(|e| e.to_string());
            let mut err = pinned.err();
            for _ in 0..ROUNDS {
                start.wait();
                let r = wake(&m, 0, 0, PRIVATE_NUMA);
                if err.is_none() && r != Ok(0) {
                    err = Some(format!("wake nr 0 on CPU {cpu} {}", numa::show(&r)));
                }
                done.wait();
            }
            err.map_or(Ok(()), Err)
        }));
    }
    let mut bad = None;
    let mut seen = Vec::new();
    for round in 0..ROUNDS {
        m.set(0, 0, NO);
        start.wait();
        done.wait();
        let n = m.node(0);
        if !valid.contains(&n) && bad.is_none() {
            bad = Some(format!(
                "round {round}: node word {} not a node of the CPUs used {}",
                node_str(n),
                list_str(&valid)
            ));
        }
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    for h in hs {
        h.join().map_err(|_| "thread panicked".to_string())??;
    }
    diag(&format!("final node words seen: {}", list_str(&seen)));
    bad.map_or(Ok(()), |w| Err(fail(w)))
}
