//! Shared helpers for the FUTEX2_NUMA / FUTEX2_MPOL test binaries
//! (`futex-numa`, `futex-mpol`): NUMA topology from sysfs, CPU pinning,
//! `mbind` / `set_mempolicy_home_node` wrappers, page mappings with chosen
//! protections, the `{u32 val; u32 node}` futex layout, waiter threads that
//! the caller can see blocked in the kernel, and exact-result assertions.
//!
//! See `docs/futex-abi.md` section 3 for the ABI these helpers serve.

use crate::cpulist;
use crate::mapping;
use crate::sys::{self, Errno, FutexWaitv};
use std::fmt::Debug;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `FUTEX2_SIZE_U8`.
pub const FUTEX2_SIZE_U8: u32 = libc::FUTEX2_SIZE_U8 as u32;
/// `FUTEX2_SIZE_U16`.
pub const FUTEX2_SIZE_U16: u32 = libc::FUTEX2_SIZE_U16 as u32;
/// `FUTEX2_SIZE_U64`.
pub const FUTEX2_SIZE_U64: u32 = libc::FUTEX2_SIZE_U64 as u32;

/// `U32 | PRIVATE | NUMA`: the flags most NUMA cases use.
pub const PRIVATE_NUMA: u32 = sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE | sys::FUTEX2_NUMA;
/// `U32 | PRIVATE`: a plain private futex.
pub const PRIVATE_PLAIN: u32 = sys::FUTEX2_SIZE_U32 | sys::FUTEX2_PRIVATE;

/// Node ids we look at when hunting for a not-possible node (the x86_64
/// Debian `MAX_NUMNODES`, `1 << CONFIG_NODES_SHIFT` = 1024; arm64's is no
/// larger, so the scan covers it too).
pub const NODE_SCAN_LIMIT: u32 = 1024;

/// Bits in the nodemasks we pass to `mbind`.
const NODEMASK_BITS: usize = 1024;

/// `syscall(2)` numbers not in [`sys::nr`].
pub mod nr {
    /// mbind
    pub const MBIND: i64 = libc::SYS_mbind;
    /// set_mempolicy_home_node
    pub const SET_MEMPOLICY_HOME_NODE: i64 = crate::sys::nr::SET_MEMPOLICY_HOME_NODE;
    /// sched_setaffinity
    pub const SCHED_SETAFFINITY: i64 = libc::SYS_sched_setaffinity;
    /// sched_getaffinity
    pub const SCHED_GETAFFINITY: i64 = libc::SYS_sched_getaffinity;
}

/// Memory policy modes (`include/uapi/linux/mempolicy.h`).
pub mod mpol {
    /// MPOL_DEFAULT
    pub const DEFAULT: i32 = 0;
    /// MPOL_PREFERRED
    pub const PREFERRED: i32 = 1;
    /// MPOL_BIND
    pub const BIND: i32 = 2;
    /// MPOL_INTERLEAVE
    pub const INTERLEAVE: i32 = 3;
    /// MPOL_LOCAL
    pub const LOCAL: i32 = 4;
    /// MPOL_PREFERRED_MANY
    pub const PREFERRED_MANY: i32 = 5;
    /// MPOL_WEIGHTED_INTERLEAVE
    pub const WEIGHTED_INTERLEAVE: i32 = 6;

    /// The mode's name, for messages.
    pub fn name(mode: i32) -> &'static str {
        match mode {
            DEFAULT => "MPOL_DEFAULT",
            PREFERRED => "MPOL_PREFERRED",
            BIND => "MPOL_BIND",
            INTERLEAVE => "MPOL_INTERLEAVE",
            LOCAL => "MPOL_LOCAL",
            PREFERRED_MANY => "MPOL_PREFERRED_MANY",
            WEIGHTED_INTERLEAVE => "MPOL_WEIGHTED_INTERLEAVE",
            _ => "MPOL_?",
        }
    }
}

// ---------------------------------------------------------------------------
// Results and assertions

/// An errno by name (adds the few names [`Errno`]'s `Display` lacks).
pub fn errno_name(e: Errno) -> String {
    match e.0 {
        libc::EOPNOTSUPP => "EOPNOTSUPP".into(),
        libc::EXDEV => "EXDEV".into(),
        libc::ENOENT => "ENOENT".into(),
        _ => e.to_string(),
    }
}

/// A syscall result for messages: `returned N` or `failed with ENAME`.
pub fn show(r: &Result<i64, Errno>) -> String {
    match r {
        Ok(v) => format!("returned {v}"),
        Err(e) => format!("failed with {}", errno_name(*e)),
    }
}

/// `Ok` if the call returned exactly `want`.
pub fn want_ok(what: &str, got: Result<i64, Errno>, want: i64) -> Result<(), String> {
    if got == Ok(want) {
        Ok(())
    } else {
        Err(format!("{what}: expected {want}, {}", show(&got)))
    }
}

/// `Ok` if the call failed with exactly errno `want`.
pub fn want_err(what: &str, got: Result<i64, Errno>, want: i32) -> Result<(), String> {
    if got == Err(Errno(want)) {
        Ok(())
    } else {
        Err(format!(
            "{what}: expected {}, {}",
            errno_name(Errno(want)),
            show(&got)
        ))
    }
}

/// `Ok` if the call returned `want`: a count, or `Err(errno)`.
pub fn want_res(what: &str, got: Result<i64, Errno>, want: Result<i64, i32>) -> Result<(), String> {
    match want {
        Ok(n) => want_ok(what, got, n),
        Err(e) => want_err(what, got, e),
    }
}

/// `Ok` if `got == want`.
pub fn want_eq<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: expected {want:?}, got {got:?}"))
    }
}

/// A node word for messages: `-1` for `FUTEX_NO_NODE`, else the number.
pub fn node_str(n: u32) -> String {
    if n == sys::FUTEX_NO_NODE {
        "-1".into()
    } else if n > 0xffff {
        format!("{n:#x}")
    } else {
        n.to_string()
    }
}

// ---------------------------------------------------------------------------
// Topology

/// Reads and parses a sysfs list file ([`cpulist::read`]), in order.
pub fn read_list(path: &str) -> Result<Vec<u32>, String> {
    cpulist::read(path).map(|set| set.into_iter().collect())
}

/// Formats a list of ids as `{0,1,3}`.
pub fn list_str(v: &[u32]) -> String {
    let items: Vec<String> = v.iter().map(|n| n.to_string()).collect();
    format!("{{{}}}", items.join(","))
}

/// The NUMA topology as userspace sees it.
#[derive(Debug, Clone)]
pub struct Topology {
    /// `/sys/devices/system/node/possible`.
    pub possible: Vec<u32>,
    /// `/sys/devices/system/node/online`.
    pub online: Vec<u32>,
    /// `/sys/devices/system/node/has_memory`.
    pub memory: Vec<u32>,
    /// For each online node, its `nodeN/cpulist` (may be empty).
    pub cpus: Vec<(u32, Vec<u32>)>,
    /// CPUs this thread may run on (`sched_getaffinity`) at the time of reading.
    pub allowed: Vec<u32>,
}

const NODE_DIR: &str = "/sys/devices/system/node";

/// The mutation check's wrong topology: a node id that [`Topology::read`]
/// adds to `possible` (so it looks possible but offline) although the
/// kernel does not have it, on a host without such a node. The cases that
/// assert the kernel accepts offline nodes must then fail (EINVAL). Unset
/// in the guest.
pub const FAKE_OFFLINE_ENV: &str = "FUTEX_NUMA_FAKE_OFFLINE_NODE";

impl Topology {
    /// Reads the topology from sysfs and the affinity mask.
    pub fn read() -> Result<Topology, String> {
        let mut possible = read_list(&format!("{NODE_DIR}/possible"))?;
        if let Ok(v) = std::env::var(FAKE_OFFLINE_ENV) {
            let n = v
                .parse()
                .map_err(|_| format!("{FAKE_OFFLINE_ENV}={v:?}: not a node id"))?;
            if !possible.contains(&n) {
                possible.push(n);
                possible.sort_unstable();
            }
        }
        let online = read_list(&format!("{NODE_DIR}/online"))?;
        let memory = read_list(&format!("{NODE_DIR}/has_memory"))?;
        let mut cpus = Vec::new();
        for &n in &online {
            cpus.push((n, read_list(&format!("{NODE_DIR}/node{n}/cpulist"))?));
        }
        let allowed = sched_getaffinity().map_err(|e| format!("sched_getaffinity: {e}"))?;
        if possible.is_empty() || online.is_empty() {
            return Err(format!(
                "implausible topology: possible {} online {}",
                list_str(&possible),
                list_str(&online)
            ));
        }
        Ok(Topology {
            possible,
            online,
            memory,
            cpus,
            allowed,
        })
    }

    /// The online node whose cpulist holds `cpu`.
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.cpus
            .iter()
            .find(|(_, c)| c.contains(&cpu))
            .map(|(n, _)| *n)
    }

    /// Every `(cpu, node)` pair a thread can be pinned to: each allowed CPU
    /// of each online node, in node order.
    pub fn pin_targets(&self) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        for (n, cpus) in &self.cpus {
            for c in cpus {
                if self.allowed.contains(c) {
                    v.push((*c, *n));
                }
            }
        }
        v
    }

    /// Online nodes that have at least one allowed CPU.
    pub fn cpu_nodes(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.pin_targets().into_iter().map(|(_, n)| n).collect();
        v.dedup();
        v
    }

    /// Nodes `mbind` accepts: online with memory (cpuset permitting).
    pub fn memory_nodes(&self) -> Vec<u32> {
        self.memory
            .iter()
            .copied()
            .filter(|n| self.online.contains(n))
            .collect()
    }

    /// Possible nodes that are not online.
    pub fn offline_possible(&self) -> Vec<u32> {
        self.possible
            .iter()
            .copied()
            .filter(|n| !self.online.contains(n))
            .collect()
    }

    /// The smallest node id below [`NODE_SCAN_LIMIT`] that is not possible.
    pub fn first_not_possible(&self) -> Option<u32> {
        (0..NODE_SCAN_LIMIT).find(|n| !self.possible.contains(n))
    }

    /// One line for diagnostics.
    pub fn describe(&self) -> String {
        let cpus: Vec<String> = self
            .cpus
            .iter()
            .map(|(n, c)| format!("node{n}={}", list_str(c)))
            .collect();
        format!(
            "possible {} online {} has_memory {} cpus {} allowed {}",
            list_str(&self.possible),
            list_str(&self.online),
            list_str(&self.memory),
            cpus.join(" "),
            list_str(&self.allowed)
        )
    }
}

// ---------------------------------------------------------------------------
// CPU affinity

const CPUSET_WORDS: usize = 64; // 4096 CPUs

/// CPUs the calling thread may run on.
pub fn sched_getaffinity() -> Result<Vec<u32>, Errno> {
    let mut mask = [0u64; CPUSET_WORDS];
    // SAFETY: mask is a live buffer of the size passed.
    let n = unsafe {
        sys::syscall6(
            nr::SCHED_GETAFFINITY,
            [
                0,
                (CPUSET_WORDS * 8) as u64,
                mask.as_mut_ptr() as u64,
                0,
                0,
                0,
            ],
        )?
    };
    let words = (n as usize / 8).min(CPUSET_WORDS);
    let mut cpus = Vec::new();
    for (w, bits) in mask.iter().take(words).enumerate() {
        for b in 0..64 {
            if bits & (1u64 << b) != 0 {
                cpus.push((w * 64 + b) as u32);
            }
        }
    }
    Ok(cpus)
}

/// Restricts the calling thread to the given CPUs.
pub fn sched_setaffinity(cpus: &[u32]) -> Result<(), Errno> {
    let mut mask = [0u64; CPUSET_WORDS];
    for &c in cpus {
        let c = c as usize;
        if c < CPUSET_WORDS * 64 {
            mask[c / 64] |= 1u64 << (c % 64);
        }
    }
    // SAFETY: mask is a live buffer of the size passed.
    unsafe {
        sys::syscall6(
            nr::SCHED_SETAFFINITY,
            [0, (CPUSET_WORDS * 8) as u64, mask.as_ptr() as u64, 0, 0, 0],
        )?;
    }
    Ok(())
}

/// Pins the calling thread to `cpu`, checks with `getcpu()` that it runs
/// there, and returns the node `getcpu()` reports.
pub fn pin_to_cpu(cpu: u32) -> Result<u32, String> {
    sched_setaffinity(&[cpu]).map_err(|e| format!("sched_setaffinity({cpu}): {e}"))?;
    let (c, node) = sys::getcpu().map_err(|e| format!("getcpu: {e}"))?;
    if c != cpu {
        return Err(format!("pinned to CPU {cpu} but getcpu() says CPU {c}"));
    }
    Ok(node)
}

/// Pins to `cpu` and checks that `getcpu()`'s node is `node` (the node whose
/// sysfs cpulist holds the CPU); the kernel's `numa_node_id()` is that node.
pub fn pin_checked(cpu: u32, node: u32) -> Result<(), String> {
    let got = pin_to_cpu(cpu)?;
    if got != node {
        return Err(format!(
            "CPU {cpu} is in node{node}/cpulist but getcpu() reports node {got}"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Memory policy syscalls

fn nodemask(nodes: &[u32]) -> [u64; NODEMASK_BITS / 64] {
    let mut mask = [0u64; NODEMASK_BITS / 64];
    for &n in nodes {
        let n = n as usize;
        if n < NODEMASK_BITS {
            mask[n / 64] |= 1u64 << (n % 64);
        }
    }
    mask
}

/// `mbind(addr, len, mode, nodemask(nodes), maxnode, flags)`. An empty
/// `nodes` passes a NULL mask with maxnode 0 (what DEFAULT and LOCAL need).
///
/// # Safety
/// `addr..addr+len` must be a mapping the caller owns (mbind changes its policy).
pub unsafe fn mbind(
    addr: *const u8,
    len: usize,
    mode: i32,
    nodes: &[u32],
    flags: u32,
) -> Result<i64, Errno> {
    let mask = nodemask(nodes);
    let (ptr, maxnode) = if nodes.is_empty() {
        (0u64, 0u64)
    } else {
        // The kernel reads maxnode - 1 bits (historical off-by-one; libnuma
        // passes size + 1 too).
        (mask.as_ptr() as u64, NODEMASK_BITS as u64 + 1)
    };
    sys::syscall6(
        nr::MBIND,
        [
            addr as u64,
            len as u64,
            mode as u64,
            ptr,
            maxnode,
            flags as u64,
        ],
    )
}

/// `set_mempolicy_home_node(start, len, home_node, flags)` (syscall 450).
pub fn set_mempolicy_home_node(
    addr: *const u8,
    len: usize,
    home: u32,
    flags: u64,
) -> Result<i64, Errno> {
    // SAFETY: only changes the policy of the caller's own range; the kernel
    // validates the range.
    unsafe {
        sys::syscall6(
            nr::SET_MEMPOLICY_HOME_NODE,
            [addr as u64, len as u64, home as u64, flags, 0, 0],
        )
    }
}

// ---------------------------------------------------------------------------
// Mappings and the futex layout

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Anonymous pages holding `{u32 val; u32 node}` futexes, unmapped on drop.
pub struct Mapping {
    map: mapping::Mapping,
}

impl Mapping {
    /// `pages` pages of read-write anonymous memory, private or `MAP_SHARED`.
    /// The pages are touched (faulted in) so the futex code finds them.
    pub fn anon(pages: usize, shared: bool) -> Result<Mapping, String> {
        let len = pages * page_size();
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let map = mapping::Mapping::anon(len, rw, shared)
            .map_err(|e| format!("mmap {len} bytes: {e}"))?;
        let m = Mapping { map };
        for off in (0..len).step_by(page_size()) {
            m.word(off).store(0, Ordering::SeqCst);
        }
        Ok(m)
    }

    /// Start address.
    pub fn addr(&self) -> *mut u8 {
        self.map.addr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Always false (a mapping has at least one page).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// `mprotect` of `len` bytes at byte offset `off`.
    pub fn protect(&self, off: usize, len: usize, prot: i32) -> Result<(), String> {
        self.map
            .protect(off, len, prot)
            .map_err(|e| format!("mprotect: {e}"))
    }

    /// The u32 at byte offset `off` (must be 4-aligned and readable when used).
    pub fn word(&self, off: usize) -> &AtomicU32 {
        self.map.word(off)
    }

    /// Pointer to the u32 at byte offset `off` (no bounds requirement
    /// beyond the mapping: for syscalls only).
    pub fn ptr(&self, off: usize) -> *const u32 {
        assert!(off < self.len());
        // SAFETY: in bounds of our own mapping.
        unsafe { self.addr().add(off) as *const u32 }
    }

    /// Address of byte offset `off` as an integer (to hand to threads).
    pub fn uaddr(&self, off: usize) -> u64 {
        self.ptr(off) as u64
    }

    /// Writes a `{u32 val; u32 node}` futex at `off`.
    pub fn set(&self, off: usize, val: u32, node: u32) {
        self.word(off).store(val, Ordering::SeqCst);
        self.word(off + 4).store(node, Ordering::SeqCst);
    }

    /// The node word of the futex at `off`.
    pub fn node(&self, off: usize) -> u32 {
        self.word(off + 4).load(Ordering::SeqCst)
    }
}

/// `futex_wake(addr, ANY, nr, flags)` on a mapping offset.
pub fn wake(m: &Mapping, off: usize, nr: i32, flags: u32) -> Result<i64, Errno> {
    sys::futex_wake(m.ptr(off), sys::FUTEX_BITSET_MATCH_ANY, nr, flags)
}

/// `futex_wait(addr, val, ANY, flags)` with a `CLOCK_MONOTONIC` deadline
/// `ms` from now (bounded, so a broken kernel fails rather than hangs).
pub fn wait_ms(uaddr: u64, val: u32, flags: u32, ms: u64) -> Result<i64, Errno> {
    let ts = sys::deadline_ms(ms);
    sys::futex_wait(
        uaddr as *const u32,
        val as u64,
        sys::FUTEX_BITSET_MATCH_ANY,
        flags,
        Some(&ts),
        libc::CLOCK_MONOTONIC,
    )
}

/// `futex_waitv(entries, 0, deadline ms from now, CLOCK_MONOTONIC)`.
pub fn waitv_ms(entries: &[FutexWaitv], flags: u32, ms: u64) -> Result<i64, Errno> {
    let ts = sys::deadline_ms(ms);
    sys::futex_waitv(entries, flags, Some(&ts), libc::CLOCK_MONOTONIC)
}

/// A `futex_waitv` entry.
pub fn waitv_entry(uaddr: u64, val: u32, flags: u32) -> FutexWaitv {
    FutexWaitv {
        val: val as u64,
        uaddr,
        flags,
        reserved: 0,
    }
}

// ---------------------------------------------------------------------------
// Waiter threads and "is it blocked yet"

/// The caller's thread id.
pub fn gettid() -> i32 {
    // SAFETY: no arguments, no memory effects.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Waits until the task at `/proc/<proc_path>` (e.g. `self/task/123` or
/// `4567`) sleeps interruptibly inside syscall `nr`, seen twice 2 ms apart
/// (state `S` and `/proc/.../syscall` naming `nr`). A futex waiter in that
/// state has queued itself.
pub fn wait_blocked_in(proc_path: &str, nr: i64, timeout: Duration) -> Result<(), String> {
    let start = Instant::now();
    let mut seen = 0;
    let mut last = String::new();
    while start.elapsed() < timeout {
        let sc = std::fs::read_to_string(format!("/proc/{proc_path}/syscall")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{proc_path}/stat")).unwrap_or_default();
        // State is the field after the ")" that closes comm.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        let in_nr = sc.split_whitespace().next() == Some(nr.to_string().as_str());
        if in_nr && state == "S" {
            seen += 1;
            if seen >= 2 {
                return Ok(());
            }
        } else {
            seen = 0;
        }
        last = format!("state {state}, syscall {:?}", sc.trim());
        std::thread::sleep(Duration::from_millis(2));
    }
    Err(format!(
        "/proc/{proc_path} not blocked in syscall {nr} after {} ms (last: {last})",
        timeout.as_millis()
    ))
}

/// A thread blocked (or about to block) in a futex wait.
pub struct Waiter {
    /// Its thread id.
    pub tid: i32,
    nr: i64,
    handle: JoinHandle<Result<i64, Errno>>,
}

impl Waiter {
    /// Spawns a thread (optionally pinned to `cpu`) that runs
    /// `futex_wait(uaddr, val, flags)` with a `timeout_ms` deadline.
    pub fn wait(
        uaddr: u64,
        val: u32,
        flags: u32,
        timeout_ms: u64,
        cpu: Option<u32>,
    ) -> Result<Waiter, String> {
        Self::spawn(sys::nr::FUTEX_WAIT, cpu, move || {
            wait_ms(uaddr, val, flags, timeout_ms)
        })
    }

    /// [`Waiter::wait`] that first waits on `start` (after pinning), so
    /// that several waiters enter the kernel at once.
    pub fn wait_at(
        uaddr: u64,
        val: u32,
        flags: u32,
        timeout_ms: u64,
        cpu: Option<u32>,
        start: std::sync::Arc<std::sync::Barrier>,
    ) -> Result<Waiter, String> {
        Self::spawn(sys::nr::FUTEX_WAIT, cpu, move || {
            start.wait();
            wait_ms(uaddr, val, flags, timeout_ms)
        })
    }

    /// Spawns a thread that runs `futex_waitv(entries, 0)` with a deadline.
    pub fn waitv(entries: Vec<FutexWaitv>, timeout_ms: u64) -> Result<Waiter, String> {
        Self::spawn(sys::nr::FUTEX_WAITV, None, move || {
            waitv_ms(&entries, 0, timeout_ms)
        })
    }

    fn spawn(
        nr: i64,
        cpu: Option<u32>,
        f: impl FnOnce() -> Result<i64, Errno> + Send + 'static,
    ) -> Result<Waiter, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || {
                if let Some(c) = cpu {
                    if let Err(e) = sched_setaffinity(&[c]) {
                        let _ = tx.send(Err(format!("waiter sched_setaffinity({c}): {e}")));
                        return Err(e);
                    }
                }
                let _ = tx.send(Ok(gettid()));
                f()
            })
            .map_err(|e| format!("spawn waiter thread: {e}"))?;
        let tid = rx
            .recv_timeout(crate::cases::scaled(Duration::from_secs(5)))
            .map_err(|e| format!("waiter thread did not start: {e}"))??;
        Ok(Waiter { tid, nr, handle })
    }

    /// Waits (up to 5 s) until the thread sleeps in its futex syscall.
    pub fn blocked(&self) -> Result<(), String> {
        wait_blocked_in(
            &format!("self/task/{}", self.tid),
            self.nr,
            crate::cases::scaled(Duration::from_secs(5)),
        )
    }

    /// Joins the thread and returns its syscall result (bounded by the
    /// thread's own futex timeout).
    pub fn join(self) -> Result<i64, Errno> {
        self.handle.join().unwrap_or(Err(Errno(-1)))
    }
}

/// The check for kernels without FUTEX2_NUMA (`expect numa=0`, <= 6.15):
/// `futex_wake` and `futex_wait` with `flags` (which include NUMA or MPOL)
/// on a well-formed `{0, -1}` futex fail with exactly EINVAL and leave the
/// node word alone.
pub fn expect_flags_rejected(flags: u32) -> Result<(), String> {
    let m = Mapping::anon(1, false)?;
    m.set(0, 0, sys::FUTEX_NO_NODE);
    want_err(
        &format!("futex_wake(flags {flags:#x}) without FUTEX2_NUMA support"),
        wake(&m, 0, 1, flags),
        libc::EINVAL,
    )?;
    want_err(
        &format!("futex_wait(flags {flags:#x}) without FUTEX2_NUMA support"),
        wait_ms(m.uaddr(0), 0, flags, 50),
        libc::EINVAL,
    )?;
    want_eq(
        "node word after rejected calls",
        m.node(0),
        sys::FUTEX_NO_NODE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodemask_bits() {
        let m = nodemask(&[0, 3, 64, 1023]);
        assert_eq!(m[0], 0b1001);
        assert_eq!(m[1], 1);
        assert_eq!(m[15], 1 << 63);
    }

    #[test]
    fn topology_helpers() {
        let t = Topology {
            possible: vec![0, 1, 2, 3],
            online: vec![0, 1, 2],
            memory: vec![0, 2],
            cpus: vec![(0, vec![0, 1]), (1, vec![2, 3]), (2, vec![])],
            allowed: vec![0, 1, 3],
        };
        assert_eq!(t.pin_targets(), vec![(0, 0), (1, 0), (3, 1)]);
        assert_eq!(t.cpu_nodes(), vec![0, 1]);
        assert_eq!(t.offline_possible(), vec![3]);
        assert_eq!(t.memory_nodes(), vec![0, 2]);
        assert_eq!(t.first_not_possible(), Some(4));
        assert_eq!(t.node_of_cpu(3), Some(1));
        assert_eq!(t.node_of_cpu(9), None);
    }

    #[test]
    fn assertions_name_errnos() {
        assert!(want_ok("x", Ok(1), 1).is_ok());
        let e = want_err("x", Err(Errno(libc::EFAULT)), libc::EINVAL).unwrap_err();
        assert!(e.contains("expected EINVAL") && e.contains("EFAULT"), "{e}");
        assert_eq!(node_str(u32::MAX), "-1");
    }
}
