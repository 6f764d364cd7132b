//! Which of our cases check the behaviour an upstream futex selftest case
//! checks ([`MAPPING`]), and how an upstream case name finds its row.

/// Upstream case (JUnit name, `*` at the end: prefix) -> our cases that
/// check the same behaviour, and what differs in scope.
pub const MAPPING: &[(&str, &[&str], &str)] = &[
    (
        "futex_priv_hash/global.priv_hash",
        &[
            "futex-prctl/get-fresh-is-0",
            "futex-resize/auto-first-thread-16",
            "futex-resize/auto-growth-past-16",
            "futex-prctl/set-2",
            "futex-prctl/set-4",
            "futex-prctl/set-16",
            "futex-resize/pi-private-resize",
            "futex-prctl/set-not-pow2-einval",
            "futex-prctl/set-2pow25-enomem",
            "futex-prctl/set-0-one-way",
        ],
        "upstream checks growth only with > 16 online CPUs and SKIPs the whole test below that; ours check growth from 5 CPUs",
    ),
    (
        "futex_numa_mpol/global.futex_numa_mpol",
        &[
            "futex-numa/wake-64-waiters",
            "futex-numa/page-end-einval",
            "futex-numa/prot-none-efault",
            "futex-numa/readonly-no-node-efault",
            "futex-mpol/bind-home",
            "futex-mpol/bind-home-remote",
        ],
        "upstream's MPOL part needs libnuma >= 2.0.18 (built in: trixie's, with an __isoc23 shim)",
    ),
    (
        "futex_requeue_pi/args.*",
        &[
            "futex-upstream-gaps/requeue-pi-wakes-owner",
            "futex-upstream-gaps/requeue-pi-timeout",
            "futex-resize/pi-private-resize",
        ],
        "ours: one waiter, requeue then unlock, and the timeout; upstream: 24 variants (broadcast, locked, owner x 4 timeouts)",
    ),
    (
        "futex_requeue_pi_mismatched_ops/*",
        &["futex-upstream-gaps/requeue-pi-mismatched-ops"],
        "",
    ),
    (
        "futex_requeue_pi_signal_restart/*",
        &["futex-upstream-gaps/requeue-pi-signal-restart"],
        "",
    ),
    (
        "futex_wait_timeout/global.wait_bitset",
        &[
            "futex-upstream-gaps/wait-timeout-relative",
            "futex-upstream-gaps/wait-bitset-timeout-absolute",
        ],
        "",
    ),
    (
        "futex_wait_timeout/global.requeue_pi",
        &["futex-upstream-gaps/requeue-pi-timeout"],
        "",
    ),
    (
        "futex_wait_timeout/global.lock_pi",
        &["futex-upstream-gaps/lock-pi-timeout"],
        "",
    ),
    (
        "futex_wait_timeout/global.waitv",
        &[
            "futex-upstream-gaps/waitv-timeout",
            "futex-numa/writeback-wait-timeout-each-cpu",
        ],
        "",
    ),
    (
        "futex_wait_wouldblock/global.futex_wait_wouldblock",
        &[
            "futex-upstream-gaps/wait-wouldblock",
            "futex-numa/writeback-wait-eagain-each-cpu",
        ],
        "",
    ),
    (
        "futex_wait_wouldblock/global.futex_waitv_wouldblock",
        &["futex-upstream-gaps/waitv-wouldblock"],
        "",
    ),
    (
        "futex_wait_uninitialized_heap/*",
        &["futex-upstream-gaps/wait-uninitialized-heap"],
        "",
    ),
    (
        "futex_wait_private_mapped_file/*",
        &["futex-upstream-gaps/wait-private-mapped-file"],
        "",
    ),
    (
        "futex_wait/global.private_futex",
        &["futex-upstream-gaps/wait-wake-private", "futex-numa/wait-wake-one"],
        "",
    ),
    (
        "futex_wait/global.anon_page",
        &["futex-numa/shared-fork-wake", "futex-upstream-gaps/wait-wake-shared-anon"],
        "upstream uses SysV shm (needs CONFIG_SYSVIPC); ours a MAP_SHARED anonymous mapping",
    ),
    (
        "futex_wait/global.file_backed",
        &["futex-upstream-gaps/wait-wake-shared-file"],
        "",
    ),
    (
        "futex_requeue/global.requeue_single",
        &["futex-upstream-gaps/requeue-single", "futex-resize/requeue-private-resize"],
        "",
    ),
    (
        "futex_requeue/global.requeue_multiple",
        &["futex-upstream-gaps/requeue-multiple", "futex-numa/requeue-numa-both-entries"],
        "",
    ),
    (
        "futex_waitv/global.private_waitv",
        &["futex-numa/waitv-numa-wakes", "futex-resize/waitv-private-resize"],
        "",
    ),
    (
        "futex_waitv/global.shared_waitv",
        &["futex-upstream-gaps/waitv-shared"],
        "upstream uses SysV shm (needs CONFIG_SYSVIPC); ours a MAP_SHARED anonymous mapping",
    ),
    (
        "futex_waitv/global.invalid_flag",
        &["futex-numa/waitv-syscall-flags-einval", "futex-upstream-gaps/waitv-invalid-flag"],
        "",
    ),
    (
        "futex_waitv/global.unaligned_address",
        &["futex-upstream-gaps/waitv-unaligned-einval"],
        "",
    ),
    (
        "futex_waitv/global.null_address",
        &["futex-upstream-gaps/waitv-null-address"],
        "",
    ),
    (
        "futex_waitv/global.invalid_clockid",
        &["futex-upstream-gaps/waitv-invalid-clockid"],
        "",
    ),
    (
        "futex_lock_pi_exiting/*",
        &["futex-upstream-gaps/lock-pi-owner-dies", "futex-resize/pi-private-resize"],
        "ours: the owner thread exits holding a PI lock with a waiter blocked; upstream also stresses exits",
    ),
    (
        "robust_list/global.test_robustness",
        &["futex-upstream-gaps/robust-owner-died"],
        "",
    ),
    (
        "robust_list/global.test_set_robust_list_invalid_size",
        &["futex-upstream-gaps/robust-set-invalid-size"],
        "",
    ),
    (
        "robust_list/global.test_get_robust_list_self",
        &["futex-upstream-gaps/robust-get-self"],
        "",
    ),
    (
        "robust_list/global.test_set_list_op_pending",
        &[
            "futex-robust/fork-pending-own",
            "futex-robust/thread-pending-own-waiters",
        ],
        "upstream: a child dies holding the lock as list_op_pending, the parent then takes it and sees FUTEX_OWNER_DIED; ours: every word state as pending, the word and the wakes exact",
    ),
    (
        "robust_list/global.test_robust_list_multiple_elements",
        &["futex-robust/walk-several-entries"],
        "upstream: ten locks, ten waiter processes; ours: three entries in different states, one waiter",
    ),
    (
        "robust_list/global.test_circular_list",
        &["futex-robust/walk-circular-terminates"],
        "ours also checks that the pending entry is handled after the limit",
    ),
    (
        "robust_list/*",
        &[],
        "not covered by ours: get_robust_list of a child, the 7.3 vDSO robust unlock, robust unlock via futex ops (see docs/kselftest.md)",
    ),
];

/// Whether `pattern` (from [`MAPPING`]) names `case`.
pub fn pattern_matches(pattern: &str, case: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => case.starts_with(prefix),
        None => pattern == case,
    }
}

/// The first [`MAPPING`] row naming upstream `case`.
pub fn mapping_for(
    case: &str,
) -> Option<&'static (&'static str, &'static [&'static str], &'static str)> {
    MAPPING.iter().find(|(p, _, _)| pattern_matches(p, case))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_upstream_case_of_7_3_has_a_mapping_row() {
        for case in [
            "futex_priv_hash/global.priv_hash",
            "futex_numa_mpol/global.futex_numa_mpol",
            "futex_requeue_pi/args.t_0_broadcast.futex_requeue_pi",
            "futex_requeue_pi_mismatched_ops/global.requeue_pi_mismatched_ops",
            "futex_wait_timeout/global.lock_pi",
            "futex_waitv/global.null_address",
            "futex_lock_pi_exiting/lock_pi_exiting.stress_owner_exits",
            "robust_list/global.test_robustness",
            "robust_list/vdso_unlock.64.test_robust_try_unlock_contended",
        ] {
            assert!(mapping_for(case).is_some(), "{case}");
        }
        assert_eq!(
            mapping_for("robust_list/global.test_robustness").unwrap().1,
            ["futex-upstream-gaps/robust-owner-died"]
        );
    }
}
