//! Raw syscalls the futex tests need, with the kernel's own constants
//! (`docs/futex-abi.md` section 1). Every wrapper returns `Result<i64, Errno>`
//! so tests can assert exact errno values.

/// An errno value (positive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.0 {
            libc::EINVAL => "EINVAL",
            libc::EBUSY => "EBUSY",
            libc::ENOMEM => "ENOMEM",
            libc::EFAULT => "EFAULT",
            libc::EAGAIN => "EAGAIN",
            libc::ETIMEDOUT => "ETIMEDOUT",
            libc::ENOSYS => "ENOSYS",
            libc::EPERM => "EPERM",
            libc::EINTR => "EINTR",
            libc::ESRCH => "ESRCH",
            libc::EDEADLK => "EDEADLK",
            _ => return write!(f, "errno {}", self.0),
        };
        write!(f, "{name}")
    }
}

/// `PR_FUTEX_HASH`.
pub const PR_FUTEX_HASH: i32 = 78;
/// `PR_FUTEX_HASH_SET_SLOTS`.
pub const PR_FUTEX_HASH_SET_SLOTS: u64 = 1;
/// `PR_FUTEX_HASH_GET_SLOTS`.
pub const PR_FUTEX_HASH_GET_SLOTS: u64 = 2;
/// `PR_FUTEX_HASH_GET_IMMUTABLE` (6.16 uapi / the immutability patch).
pub const PR_FUTEX_HASH_GET_IMMUTABLE: u64 = 3;
/// `FH_FLAG_IMMUTABLE`.
pub const FH_FLAG_IMMUTABLE: u64 = 1;

/// `FUTEX2_SIZE_U32`.
pub const FUTEX2_SIZE_U32: u32 = libc::FUTEX2_SIZE_U32 as u32;
/// `FUTEX2_NUMA`.
pub const FUTEX2_NUMA: u32 = libc::FUTEX2_NUMA as u32;
/// `FUTEX2_MPOL`.
pub const FUTEX2_MPOL: u32 = 0x08;
/// `FUTEX2_PRIVATE`.
pub const FUTEX2_PRIVATE: u32 = libc::FUTEX2_PRIVATE as u32;
/// `FUTEX_BITSET_MATCH_ANY`.
pub const FUTEX_BITSET_MATCH_ANY: u64 = libc::FUTEX_BITSET_MATCH_ANY as u32 as u64;
/// `FUTEX_NO_NODE`.
pub const FUTEX_NO_NODE: u32 = u32::MAX;

/// `futex(2)` operation numbers and flags (`include/uapi/linux/futex.h`).
pub mod futex_op {
    /// FUTEX_WAIT
    pub const WAIT: u32 = libc::FUTEX_WAIT as u32;
    /// FUTEX_WAKE
    pub const WAKE: u32 = libc::FUTEX_WAKE as u32;
    /// FUTEX_FD (removed in 2.6.26)
    pub const FD: u32 = libc::FUTEX_FD as u32;
    /// FUTEX_REQUEUE
    pub const REQUEUE: u32 = libc::FUTEX_REQUEUE as u32;
    /// FUTEX_CMP_REQUEUE
    pub const CMP_REQUEUE: u32 = libc::FUTEX_CMP_REQUEUE as u32;
    /// FUTEX_WAKE_OP
    pub const WAKE_OP: u32 = libc::FUTEX_WAKE_OP as u32;
    /// FUTEX_LOCK_PI
    pub const LOCK_PI: u32 = libc::FUTEX_LOCK_PI as u32;
    /// FUTEX_UNLOCK_PI
    pub const UNLOCK_PI: u32 = libc::FUTEX_UNLOCK_PI as u32;
    /// FUTEX_TRYLOCK_PI
    pub const TRYLOCK_PI: u32 = libc::FUTEX_TRYLOCK_PI as u32;
    /// FUTEX_WAIT_BITSET
    pub const WAIT_BITSET: u32 = libc::FUTEX_WAIT_BITSET as u32;
    /// FUTEX_WAKE_BITSET
    pub const WAKE_BITSET: u32 = libc::FUTEX_WAKE_BITSET as u32;
    /// FUTEX_WAIT_REQUEUE_PI
    pub const WAIT_REQUEUE_PI: u32 = libc::FUTEX_WAIT_REQUEUE_PI as u32;
    /// FUTEX_CMP_REQUEUE_PI
    pub const CMP_REQUEUE_PI: u32 = libc::FUTEX_CMP_REQUEUE_PI as u32;
    /// FUTEX_LOCK_PI2
    pub const LOCK_PI2: u32 = libc::FUTEX_LOCK_PI2 as u32;
    /// FUTEX_PRIVATE_FLAG
    pub const PRIVATE: u32 = libc::FUTEX_PRIVATE_FLAG as u32;
    /// FUTEX_CLOCK_REALTIME
    pub const CLOCK_REALTIME: u32 = libc::FUTEX_CLOCK_REALTIME as u32;
    /// FUTEX_ROBUST_UNLOCK (7.3 uapi; an unknown command bit before)
    pub const ROBUST_UNLOCK: u32 = libc::FUTEX_ROBUST_UNLOCK as u32;

    /// FUTEX_OP_SET
    pub const OP_SET: u32 = libc::FUTEX_OP_SET as u32;
    /// FUTEX_OP_ADD
    pub const OP_ADD: u32 = libc::FUTEX_OP_ADD as u32;
    /// FUTEX_OP_OR
    pub const OP_OR: u32 = libc::FUTEX_OP_OR as u32;
    /// FUTEX_OP_ANDN
    pub const OP_ANDN: u32 = libc::FUTEX_OP_ANDN as u32;
    /// FUTEX_OP_XOR
    pub const OP_XOR: u32 = libc::FUTEX_OP_XOR as u32;
    /// FUTEX_OP_OPARG_SHIFT (ORed into the op nibble)
    pub const OPARG_SHIFT: u32 = libc::FUTEX_OP_OPARG_SHIFT as u32;
    /// FUTEX_OP_CMP_EQ
    pub const CMP_EQ: u32 = libc::FUTEX_OP_CMP_EQ as u32;
    /// FUTEX_OP_CMP_NE
    pub const CMP_NE: u32 = libc::FUTEX_OP_CMP_NE as u32;
    /// FUTEX_OP_CMP_LT
    pub const CMP_LT: u32 = libc::FUTEX_OP_CMP_LT as u32;
    /// FUTEX_OP_CMP_LE
    pub const CMP_LE: u32 = libc::FUTEX_OP_CMP_LE as u32;
    /// FUTEX_OP_CMP_GT
    pub const CMP_GT: u32 = libc::FUTEX_OP_CMP_GT as u32;
    /// FUTEX_OP_CMP_GE
    pub const CMP_GE: u32 = libc::FUTEX_OP_CMP_GE as u32;
}

/// `FUTEX_WAITERS`.
pub const WAITERS: u32 = libc::FUTEX_WAITERS;
/// `FUTEX_OWNER_DIED`.
pub const OWNER_DIED: u32 = libc::FUTEX_OWNER_DIED;
/// `FUTEX_TID_MASK`.
pub const TID_MASK: u32 = libc::FUTEX_TID_MASK;
/// Syscall numbers, per architecture: x86-64's from
/// `arch/x86/entry/syscalls/syscall_64.tbl`, arm64's from the generic
/// table (`scripts/syscall.tbl`, `include/uapi/asm-generic/unistd.h`).
/// Written out rather than taken from libc, which lacks the futex2 calls
/// and has only the target's own numbers: both tables compile everywhere,
/// so one host's tests check both against the kernel's tables. The
/// target's table is re-exported (`nr::FUTEX_WAKE`, ...).
pub mod nr {
    /// x86-64 (`syscall_64.tbl`, ABI `common` or `64`).
    pub mod x86_64 {
        /// futex
        pub const FUTEX: i64 = 202;
        /// set_robust_list
        pub const SET_ROBUST_LIST: i64 = 273;
        /// get_robust_list
        pub const GET_ROBUST_LIST: i64 = 274;
        /// io_uring_setup
        pub const IO_URING_SETUP: i64 = 425;
        /// io_uring_enter
        pub const IO_URING_ENTER: i64 = 426;
        /// futex_waitv
        pub const FUTEX_WAITV: i64 = 449;
        /// set_mempolicy_home_node
        pub const SET_MEMPOLICY_HOME_NODE: i64 = 450;
        /// futex_wake
        pub const FUTEX_WAKE: i64 = 454;
        /// futex_wait
        pub const FUTEX_WAIT: i64 = 455;
        /// futex_requeue
        pub const FUTEX_REQUEUE: i64 = 456;
        /// Every number above by the kernel's name for it.
        pub const TABLE: &[(&str, i64)] = &[
            ("futex", FUTEX),
            ("set_robust_list", SET_ROBUST_LIST),
            ("get_robust_list", GET_ROBUST_LIST),
            ("io_uring_setup", IO_URING_SETUP),
            ("io_uring_enter", IO_URING_ENTER),
            ("futex_waitv", FUTEX_WAITV),
            ("set_mempolicy_home_node", SET_MEMPOLICY_HOME_NODE),
            ("futex_wake", FUTEX_WAKE),
            ("futex_wait", FUTEX_WAIT),
            ("futex_requeue", FUTEX_REQUEUE),
        ];
    }

    /// The asm-generic table arm64 uses (`scripts/syscall.tbl`, ABI
    /// `common` or `64`). Calls added since 5.1 have the same number on
    /// every architecture; the older ones differ from x86-64's.
    pub mod generic {
        /// futex
        pub const FUTEX: i64 = 98;
        /// set_robust_list
        pub const SET_ROBUST_LIST: i64 = 99;
        /// get_robust_list
        pub const GET_ROBUST_LIST: i64 = 100;
        /// io_uring_setup
        pub const IO_URING_SETUP: i64 = 425;
        /// io_uring_enter
        pub const IO_URING_ENTER: i64 = 426;
        /// futex_waitv
        pub const FUTEX_WAITV: i64 = 449;
        /// set_mempolicy_home_node
        pub const SET_MEMPOLICY_HOME_NODE: i64 = 450;
        /// futex_wake
        pub const FUTEX_WAKE: i64 = 454;
        /// futex_wait
        pub const FUTEX_WAIT: i64 = 455;
        /// futex_requeue
        pub const FUTEX_REQUEUE: i64 = 456;
        /// Every number above by the kernel's name for it.
        pub const TABLE: &[(&str, i64)] = &[
            ("futex", FUTEX),
            ("set_robust_list", SET_ROBUST_LIST),
            ("get_robust_list", GET_ROBUST_LIST),
            ("io_uring_setup", IO_URING_SETUP),
            ("io_uring_enter", IO_URING_ENTER),
            ("futex_waitv", FUTEX_WAITV),
            ("set_mempolicy_home_node", SET_MEMPOLICY_HOME_NODE),
            ("futex_wake", FUTEX_WAKE),
            ("futex_wait", FUTEX_WAIT),
            ("futex_requeue", FUTEX_REQUEUE),
        ];
    }

    #[cfg(target_arch = "x86_64")]
    pub use self::x86_64::*;

    #[cfg(target_arch = "aarch64")]
    pub use self::generic::*;
}

/// `struct futex_waitv`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct FutexWaitv {
    /// Expected value.
    pub val: u64,
    /// User address.
    pub uaddr: u64,
    /// FUTEX2_* flags.
    pub flags: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// A raw syscall's or libc call's return: -1 is the errno, anything else
/// the value.
pub fn check(ret: i64) -> Result<i64, Errno> {
    if ret == -1 {
        Err(Errno(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    } else {
        Ok(ret)
    }
}

/// Raw `syscall(2)` with six arguments.
///
/// # Safety
/// The caller passes arguments valid for syscall `nr`.
pub unsafe fn syscall6(nr: i64, a: [u64; 6]) -> Result<i64, Errno> {
    check(libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]))
}

/// `prctl(PR_FUTEX_HASH, op, arg3, arg4, arg5)`.
pub fn prctl_futex_hash(op: u64, arg3: u64, arg4: u64, arg5: u64) -> Result<i64, Errno> {
    // SAFETY: prctl takes integers only for PR_FUTEX_HASH.
    unsafe {
        syscall6(
            libc::SYS_prctl,
            [PR_FUTEX_HASH as u64, op, arg3, arg4, arg5, 0],
        )
    }
}

/// `PR_FUTEX_HASH_GET_SLOTS`.
pub fn get_slots() -> Result<i64, Errno> {
    prctl_futex_hash(PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0)
}

/// `PR_FUTEX_HASH_SET_SLOTS` with flags 0.
pub fn set_slots(slots: u64) -> Result<i64, Errno> {
    prctl_futex_hash(PR_FUTEX_HASH_SET_SLOTS, slots, 0, 0)
}

/// Raw `futex(uaddr, op, val, timeout-or-val2, uaddr2, val3)`, every
/// argument a full register so truncation by the kernel is visible.
pub fn futex(
    uaddr: u64,
    op: u32,
    val: u64,
    val2: u64,
    uaddr2: u64,
    val3: u64,
) -> Result<i64, Errno> {
    // SAFETY: the kernel validates every address; nothing here is written
    // by the call except futex words the caller owns.
    unsafe { syscall6(libc::SYS_futex, [uaddr, op as u64, val, val2, uaddr2, val3]) }
}

/// `FUTEX_OP(op, oparg, cmp, cmparg)` of the uapi header.
pub const fn encode_op(op: u32, oparg: u32, cmp: u32, cmparg: u32) -> u64 {
    (((op & 0xf) << 28) | ((cmp & 0xf) << 24) | ((oparg & 0xfff) << 12) | (cmparg & 0xfff)) as u64
}

/// futex2 `futex_wait` with every argument a full register.
pub fn futex_wait_raw(
    uaddr: u64,
    val: u64,
    mask: u64,
    flags: u64,
    timeout: u64,
    clockid: u64,
) -> Result<i64, Errno> {
    // SAFETY: the kernel validates the addresses.
    unsafe { syscall6(nr::FUTEX_WAIT, [uaddr, val, mask, flags, timeout, clockid]) }
}

/// futex2 `futex_wake` with every argument a full register.
pub fn futex_wake_raw(uaddr: u64, mask: u64, nr: u64, flags: u64) -> Result<i64, Errno> {
    // SAFETY: the kernel validates the address.
    unsafe { syscall6(nr::FUTEX_WAKE, [uaddr, mask, nr, flags, 0, 0]) }
}

/// `futex_waitv` with every argument a full register.
pub fn futex_waitv_raw(
    waiters: u64,
    nr: u64,
    flags: u64,
    timeout: u64,
    clockid: u64,
) -> Result<i64, Errno> {
    // SAFETY: the kernel validates the addresses.
    unsafe { syscall6(nr::FUTEX_WAITV, [waiters, nr, flags, timeout, clockid, 0]) }
}

/// `futex_requeue` with every argument a full register.
pub fn futex_requeue_raw(
    waiters: u64,
    flags: u64,
    nr_wake: u64,
    nr_requeue: u64,
) -> Result<i64, Errno> {
    // SAFETY: the kernel validates the address.
    unsafe {
        syscall6(
            nr::FUTEX_REQUEUE,
            [waiters, flags, nr_wake, nr_requeue, 0, 0],
        )
    }
}

fn ts_addr(timeout: Option<&libc::timespec>) -> u64 {
    timeout.map_or(0, |t| t as *const _ as u64)
}

/// `futex_wait(uaddr, val, mask, flags, NULL or abs timeout, clockid)`.
pub fn futex_wait(
    uaddr: *const u32,
    val: u64,
    mask: u64,
    flags: u32,
    timeout: Option<&libc::timespec>,
    clockid: i32,
) -> Result<i64, Errno> {
    futex_wait_raw(
        uaddr as u64,
        val,
        mask,
        flags as u64,
        ts_addr(timeout),
        clockid as u64,
    )
}

/// `futex_wake(uaddr, mask, nr, flags)`.
pub fn futex_wake(uaddr: *const u32, mask: u64, nr: i32, flags: u32) -> Result<i64, Errno> {
    futex_wake_raw(uaddr as u64, mask, nr as u64, flags as u64)
}

/// `futex_waitv(waiters, nr, flags, timeout, clockid)`.
pub fn futex_waitv(
    waiters: &[FutexWaitv],
    flags: u32,
    timeout: Option<&libc::timespec>,
    clockid: i32,
) -> Result<i64, Errno> {
    futex_waitv_raw(
        waiters.as_ptr() as u64,
        waiters.len() as u64,
        flags as u64,
        ts_addr(timeout),
        clockid as u64,
    )
}

/// `futex_requeue(waiters[2], flags, nr_wake, nr_requeue)`.
pub fn futex_requeue(
    waiters: &[FutexWaitv; 2],
    flags: u32,
    nr_wake: i32,
    nr_requeue: i32,
) -> Result<i64, Errno> {
    futex_requeue_raw(
        waiters.as_ptr() as u64,
        flags as u64,
        nr_wake as u64,
        nr_requeue as u64,
    )
}

/// `set_mempolicy(mode, nodemask, maxnode)`: the calling thread's task
/// policy; `mask` holds the node bits (node n is bit n % 64 of word n / 64).
pub fn set_mempolicy(mode: i32, mask: &[u64]) -> Result<i64, Errno> {
    let (ptr, maxnode) = if mask.is_empty() {
        (0, 0)
    } else {
        // The kernel reads maxnode - 1 bits (as for mbind).
        (mask.as_ptr() as u64, 64 * mask.len() as u64 + 1)
    };
    // SAFETY: mask is a live slice of maxnode - 1 bits, or NULL with 0.
    unsafe {
        syscall6(
            libc::SYS_set_mempolicy,
            [mode as u64, ptr, maxnode, 0, 0, 0],
        )
    }
}

/// `getcpu()`: (cpu, node).
pub fn getcpu() -> Result<(u32, u32), Errno> {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: both pointers are live locals.
    unsafe {
        syscall6(
            libc::SYS_getcpu,
            [
                &mut cpu as *mut _ as u64,
                &mut node as *mut _ as u64,
                0,
                0,
                0,
                0,
            ],
        )?;
    }
    Ok((cpu, node))
}

/// An absolute `CLOCK_MONOTONIC` deadline `ms` milliseconds from now.
pub fn deadline_ms(ms: u64) -> libc::timespec {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: now is a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let total = now.tv_nsec as u64 + (ms % 1000) * 1_000_000;
    libc::timespec {
        tv_sec: now.tv_sec + (ms / 1000) as i64 + (total / 1_000_000_000) as i64,
        tv_nsec: (total % 1_000_000_000) as i64,
    }
}

/// io_uring, as far as a futex case needs it (`include/uapi/linux/io_uring.h`):
/// `io_uring_setup`, `io_uring_enter` and the ring layout.
pub mod io_uring {
    use super::{syscall6, Errno};

    /// io_uring_setup (the target's number).
    pub const NR_SETUP: i64 = super::nr::IO_URING_SETUP;
    /// io_uring_enter (the target's number).
    pub const NR_ENTER: i64 = super::nr::IO_URING_ENTER;
    /// `IORING_OP_FUTEX_WAIT`.
    pub const OP_FUTEX_WAIT: u8 = 51;
    /// `IORING_OFF_SQ_RING`.
    pub const OFF_SQ_RING: i64 = 0;
    /// `IORING_OFF_CQ_RING`.
    pub const OFF_CQ_RING: i64 = 0x800_0000;
    /// `IORING_OFF_SQES`.
    pub const OFF_SQES: i64 = 0x1000_0000;

    /// `struct io_sqring_offsets` and `struct io_cqring_offsets` (the same shape).
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct RingOffsets {
        /// head
        pub head: u32,
        /// tail
        pub tail: u32,
        /// ring_mask
        pub ring_mask: u32,
        /// ring_entries
        pub ring_entries: u32,
        /// flags (SQ) / overflow (CQ)
        pub flags_or_overflow: u32,
        /// dropped (SQ) / cqes (CQ)
        pub dropped_or_cqes: u32,
        /// array (SQ) / flags (CQ)
        pub array_or_flags: u32,
        /// resv1
        pub resv1: u32,
        /// user_addr
        pub user_addr: u64,
    }

    /// `struct io_uring_params`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Params {
        /// sq_entries
        pub sq_entries: u32,
        /// cq_entries
        pub cq_entries: u32,
        /// flags
        pub flags: u32,
        /// sq_thread_cpu
        pub sq_thread_cpu: u32,
        /// sq_thread_idle
        pub sq_thread_idle: u32,
        /// features
        pub features: u32,
        /// wq_fd
        pub wq_fd: u32,
        /// resv
        pub resv: [u32; 3],
        /// sq_off
        pub sq_off: RingOffsets,
        /// cq_off
        pub cq_off: RingOffsets,
    }

    /// `struct io_uring_sqe` (64 bytes), with the fields IORING_OP_FUTEX_WAIT uses.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Sqe {
        /// opcode
        pub opcode: u8,
        /// IOSQE_ flags
        pub flags: u8,
        /// ioprio
        pub ioprio: u16,
        /// fd: the FUTEX2_* flags for the futex ops
        pub fd: i32,
        /// off / addr2: the futex value
        pub addr2: u64,
        /// addr: the futex address
        pub addr: u64,
        /// len
        pub len: u32,
        /// op flags (`futex_flags`, must be 0)
        pub op_flags: u32,
        /// user_data
        pub user_data: u64,
        /// buf_index
        pub buf_index: u16,
        /// personality
        pub personality: u16,
        /// file_index
        pub file_index: u32,
        /// addr3: the futex mask
        pub addr3: u64,
        /// __pad2
        pub pad2: u64,
    }

    /// `struct io_uring_cqe` (16 bytes, no `IORING_SETUP_CQE32`).
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Cqe {
        /// user_data of the request
        pub user_data: u64,
        /// its result (a negative errno on failure)
        pub res: i32,
        /// IORING_CQE_F_ flags
        pub flags: u32,
    }

    /// `io_uring_setup(entries, params)`: the ring's fd.
    pub fn setup(entries: u32, params: &mut Params) -> Result<i64, Errno> {
        // SAFETY: params is a live, writable io_uring_params.
        unsafe {
            syscall6(
                NR_SETUP,
                [entries as u64, params as *mut Params as u64, 0, 0, 0, 0],
            )
        }
    }

    /// `io_uring_enter(fd, to_submit, min_complete, flags, NULL, 0)`.
    pub fn enter(fd: i32, to_submit: u32, min_complete: u32, flags: u32) -> Result<i64, Errno> {
        // SAFETY: no pointers (no signal mask).
        unsafe {
            syscall6(
                NR_ENTER,
                [
                    fd as u64,
                    to_submit as u64,
                    min_complete as u64,
                    flags as u64,
                    0,
                    0,
                ],
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_numbers_are_pinned_for_both_tables() {
        let names =
            |t: &'static [(&'static str, i64)]| t.iter().map(|(n, _)| *n).collect::<Vec<_>>();
        assert_eq!(names(nr::x86_64::TABLE), names(nr::generic::TABLE));
        let x86: Vec<i64> = nr::x86_64::TABLE.iter().map(|(_, n)| *n).collect();
        let generic: Vec<i64> = nr::generic::TABLE.iter().map(|(_, n)| *n).collect();
        assert_eq!(x86, [202, 273, 274, 425, 426, 449, 450, 454, 455, 456]);
        assert_eq!(generic, [98, 99, 100, 425, 426, 449, 450, 454, 455, 456]);
    }

    #[test]
    fn the_targets_table_agrees_with_libc() {
        for (name, ours, libc) in [
            ("futex", nr::FUTEX, libc::SYS_futex),
            (
                "set_robust_list",
                nr::SET_ROBUST_LIST,
                libc::SYS_set_robust_list,
            ),
            (
                "get_robust_list",
                nr::GET_ROBUST_LIST,
                libc::SYS_get_robust_list,
            ),
            (
                "io_uring_setup",
                nr::IO_URING_SETUP,
                libc::SYS_io_uring_setup,
            ),
            (
                "io_uring_enter",
                nr::IO_URING_ENTER,
                libc::SYS_io_uring_enter,
            ),
            ("futex_waitv", nr::FUTEX_WAITV, libc::SYS_futex_waitv),
            (
                "set_mempolicy_home_node",
                nr::SET_MEMPOLICY_HOME_NODE,
                libc::SYS_set_mempolicy_home_node,
            ),
        ] {
            assert_eq!(ours, libc, "{name}");
        }
    }

    #[test]
    fn op_encoding_is_the_uapi_macro() {
        // FUTEX_OP(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_GT, 0x7ff)
        assert_eq!(
            encode_op(futex_op::OP_ADD, 1, futex_op::CMP_GT, 0x7ff),
            0x1400_17ff
        );
        assert_eq!(
            encode_op(
                futex_op::OP_SET | futex_op::OPARG_SHIFT,
                31,
                futex_op::CMP_EQ,
                0
            ),
            0x8001_f000
        );
    }
}
