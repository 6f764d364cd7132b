//! The one list of guest binaries this crate builds: what the harness
//! packs by name (suites, the matrix's custom-suite allowlist) and what
//! `tests/host_kernel.rs` runs on the host. A unit test checks it against
//! `src/bin/`, so a new binary cannot be forgotten here.

/// What a guest binary is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// PID 1 of every guest (never a test).
    Init,
    /// A test of the futex ABI (the `futex` suite, in this order).
    Futex,
    /// Any other test a suite may run (smoke, topology, bench, faults).
    Test,
}

/// One guest binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestBinary {
    /// File name (`src/bin/<name>.rs` or `src/bin/<name>/`).
    pub name: &'static str,
    /// What it is for.
    pub role: Role,
}

const fn bin(name: &'static str, role: Role) -> GuestBinary {
    GuestBinary { name, role }
}

/// Every guest binary, the futex ones in run order.
pub const ALL: &[GuestBinary] = &[
    bin("guest-init", Role::Init),
    bin("smoke", Role::Test),
    bin("topology", Role::Test),
    bin("futex-prctl", Role::Futex),
    bin("futex-resize", Role::Futex),
    bin("futex-immutable", Role::Futex),
    bin("futex-numa", Role::Futex),
    bin("futex-mpol", Role::Futex),
    bin("futex-upstream-gaps", Role::Futex),
    bin("futex-robust", Role::Futex),
    bin("futex-ops", Role::Futex),
    bin("futex-wake", Role::Futex),
    bin("futex-requeue", Role::Futex),
    bin("futex-pi", Role::Futex),
    bin("futex-bench", Role::Test),
    bin("fault", Role::Test),
    bin("artifact", Role::Test),
];

/// The futex test binaries, in run order (the `futex` suite).
pub fn futex() -> impl Iterator<Item = &'static str> {
    ALL.iter().filter(|b| b.role == Role::Futex).map(|b| b.name)
}

/// Binaries a suite may run (everything but PID 1).
pub fn tests() -> impl Iterator<Item = &'static str> {
    ALL.iter().filter(|b| b.role != Role::Init).map(|b| b.name)
}

/// Whether `name` is a guest binary a suite may run.
pub fn is_test(name: &str) -> bool {
    tests().any(|b| b == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn the_list_is_what_src_bin_builds() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
        let built: BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter_map(|p| {
                let stem = p.file_stem()?.to_str()?.to_string();
                // `guest-init/` holds the modules of `guest-init.rs`.
                (p.extension().is_some_and(|e| e == "rs")).then_some(stem)
            })
            .collect();
        let listed: BTreeSet<String> = ALL.iter().map(|b| b.name.to_string()).collect();
        assert_eq!(built, listed, "guest-tests/src/bin vs binaries::ALL");
        assert_eq!(ALL.len(), listed.len(), "a name listed twice");
    }

    #[test]
    fn futex_binaries_in_run_order() {
        let f: Vec<_> = futex().collect();
        assert_eq!(f.first(), Some(&"futex-prctl"));
        assert!(f.contains(&"futex-upstream-gaps"));
        assert!(!is_test("guest-init") && is_test("smoke") && is_test("futex-mpol"));
    }
}
