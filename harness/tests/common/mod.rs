//! Shared by the real-VM test files.

/// Whether the real-VM tests run: `HARNESS_VM_TESTS` set. Under `CI`
/// without it they fail instead of passing silently.
pub fn enabled() -> bool {
    if std::env::var_os("HARNESS_VM_TESTS").is_some() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but HARNESS_VM_TESTS is not: the VM tests must run in CI"
    );
    eprintln!("skipping VM test: set HARNESS_VM_TESTS=1 to boot real VMs");
    false
}
