//! The cases of the futex selftests the harness builds (Debian's
//! `linux-source-7.3`), as each program's `-l` lists them (generated from
//! the built programs' listings; `futex_numa` is a manual tool, not run):
//! what a matrix's `known_failures:` entry of `kselftest-futex` may name.
//! The VM test of the suite (`harness/tests/kselftest.rs`) checks it against
//! the cases a real run reports, so an upstream case cannot be missing here.

/// `(program, [case, ...])` by program name; a case as the JUnit names it
/// after `program/` (`fixture[.variant].test`).
pub const CASES: &[(&str, &[&str])] = &[
    (
        "futex_lock_pi_exiting",
        &[
            "lock_pi_exiting.lock_unlock_basic",
            "lock_pi_exiting.owner_dies_with_blocked_waiter",
            "lock_pi_exiting.stress_owner_exits",
        ],
    ),
    ("futex_numa_mpol", &["global.futex_numa_mpol"]),
    ("futex_priv_hash", &["global.priv_hash"]),
    (
        "futex_requeue",
        &["global.requeue_single", "global.requeue_multiple"],
    ),
    (
        "futex_requeue_pi",
        &[
            "args.t_0.futex_requeue_pi",
            "args.t_0_broadcast.futex_requeue_pi",
            "args.t_0_broadcast_locked.futex_requeue_pi",
            "args.t_0_broadcast_owner.futex_requeue_pi",
            "args.t_0_locked.futex_requeue_pi",
            "args.t_0_owner.futex_requeue_pi",
            "args.t_5000.futex_requeue_pi",
            "args.t_5000_broadcast.futex_requeue_pi",
            "args.t_5000_broadcast_locked.futex_requeue_pi",
            "args.t_5000_broadcast_owner.futex_requeue_pi",
            "args.t_5000_locked.futex_requeue_pi",
            "args.t_5000_owner.futex_requeue_pi",
            "args.t_500000.futex_requeue_pi",
            "args.t_500000_broadcast.futex_requeue_pi",
            "args.t_500000_broadcast_locked.futex_requeue_pi",
            "args.t_500000_broadcast_owner.futex_requeue_pi",
            "args.t_500000_locked.futex_requeue_pi",
            "args.t_500000_owner.futex_requeue_pi",
            "args.t_2000000000.futex_requeue_pi",
            "args.t_2000000000_broadcast.futex_requeue_pi",
            "args.t_2000000000_broadcast_locked.futex_requeue_pi",
            "args.t_2000000000_broadcast_owner.futex_requeue_pi",
            "args.t_2000000000_locked.futex_requeue_pi",
            "args.t_2000000000_owner.futex_requeue_pi",
        ],
    ),
    (
        "futex_requeue_pi_mismatched_ops",
        &["global.requeue_pi_mismatched_ops"],
    ),
    (
        "futex_requeue_pi_signal_restart",
        &["global.futex_requeue_pi_signal_restart"],
    ),
    (
        "futex_wait",
        &[
            "global.private_futex",
            "global.anon_page",
            "global.file_backed",
        ],
    ),
    (
        "futex_wait_private_mapped_file",
        &["global.wait_private_mapped_file"],
    ),
    (
        "futex_wait_timeout",
        &[
            "global.wait_bitset",
            "global.requeue_pi",
            "global.lock_pi",
            "global.waitv",
        ],
    ),
    (
        "futex_wait_uninitialized_heap",
        &["global.futex_wait_uninitialized_heap"],
    ),
    (
        "futex_wait_wouldblock",
        &[
            "global.futex_wait_wouldblock",
            "global.futex_waitv_wouldblock",
        ],
    ),
    (
        "futex_waitv",
        &[
            "global.private_waitv",
            "global.shared_waitv",
            "global.invalid_flag",
            "global.unaligned_address",
            "global.null_address",
            "global.invalid_clockid",
        ],
    ),
    (
        "robust_list",
        &[
            "global.test_robustness",
            "global.test_set_robust_list_invalid_size",
            "global.test_get_robust_list_self",
            "global.test_get_robust_list_child",
            "global.test_set_list_op_pending",
            "global.test_robust_list_multiple_elements",
            "global.test_circular_list",
            "vdso_unlock.32.test_robust_try_unlock_uncontended",
            "vdso_unlock.32.test_robust_try_unlock_contended",
            "vdso_unlock.64.test_robust_try_unlock_uncontended",
            "vdso_unlock.64.test_robust_try_unlock_contended",
            "futex_op.wake.test_futex_robust_unlock",
            "futex_op.wake_bitset.test_futex_robust_unlock",
            "futex_op.unlock_pi.test_futex_robust_unlock",
            "futex_op.wake32.test_futex_robust_unlock",
            "futex_op.wake_bitset32.test_futex_robust_unlock",
            "futex_op.unlock_pi32.test_futex_robust_unlock",
        ],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_lists_distinct_cases() {
        let total: usize = CASES.iter().map(|(_, c)| c.len()).sum();
        assert_eq!(total, 67);
        for (p, cases) in CASES {
            let mut c = cases.to_vec();
            c.sort_unstable();
            c.dedup();
            assert_eq!(c.len(), cases.len(), "{p}");
        }
    }
}
