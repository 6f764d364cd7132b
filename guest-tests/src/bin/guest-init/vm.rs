//! Ending the VM, whatever happened.

use guest_tests::plan::{GuestExit, DEBUG_EXIT_PORT, GUEST_EXIT_MARK};

/// Syncs, then ends the VM with `exit` through `isa-debug-exit`; without that
/// device, powers off, then reboots (QEMU runs with `-no-reboot`, so a reboot
/// ends it too). On arm64 (`virt` has no such device) the status goes to
/// the console as a [`GUEST_EXIT_MARK`] record first, then PSCI powers
/// off. Never returns: PID 1 must not exit.
pub fn end(exit: GuestExit) -> ! {
    // SAFETY: plain syscalls.
    unsafe { libc::sync() };
    mark_exit(exit as u8);
    debug_exit(exit as u8);
    // SAFETY: plain syscalls; they return only on failure.
    unsafe {
        libc::reboot(libc::RB_POWER_OFF);
        libc::reboot(libc::RB_AUTOBOOT);
    }
    loop {
        // SAFETY: plain syscall.
        unsafe { libc::pause() };
    }
}

/// Writes `code` to QEMU's `isa-debug-exit` port; QEMU exits at once with
/// `(code << 1) | 1`. Returns if the port cannot be enabled or there is no
/// such device (the write then goes nowhere).
#[cfg(target_arch = "x86_64")]
fn debug_exit(code: u8) {
    // SAFETY: ioperm only changes this process's I/O permission bitmap.
    if unsafe { libc::ioperm(DEBUG_EXIT_PORT.into(), 4, 1) } != 0 {
        return;
    }
    // SAFETY: ioperm granted the port; an unclaimed port ignores the write.
    unsafe {
        std::arch::asm!(
            "out dx, al",
            in("dx") DEBUG_EXIT_PORT,
            in("al") code,
            options(nomem, nostack, preserves_flags)
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn debug_exit(_code: u8) {
    let _ = DEBUG_EXIT_PORT;
}

/// Writes `harness: guest-exit <code>` to `/dev/kmsg` (printed on the
/// console before the poweroff's own lines), where the host reads it.
#[cfg(target_arch = "aarch64")]
fn mark_exit(code: u8) {
    use std::io::Write;
    if let Ok(mut k) = std::fs::OpenOptions::new().write(true).open("/dev/kmsg") {
        let _ = k.write_all(format!("<6>{GUEST_EXIT_MARK}{code}\n").as_bytes());
    }
}

#[cfg(not(target_arch = "aarch64"))]
fn mark_exit(_code: u8) {
    let _ = GUEST_EXIT_MARK;
}
