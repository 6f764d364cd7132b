//! The floor for boot benchmarks: the same kernel, initramfs and machine as
//! a harness cell, booted by a bare `qemu-system-x86_64` — serial ports to
//! files instead of the harness's sockets, no QMP monitor. Guest-init still
//! ends QEMU through `isa-debug-exit` once the plan has run.

use crate::guestbin::GuestBins;
use crate::initramfs::Layout;
use crate::qemu::{self, Accel};
use crate::suite::SuiteTest;
use crate::topology::Topology;
use std::ffi::OsString;
use std::path::Path;

/// The bare argv (without the program): the harness's argv with the
/// socket chardevs replaced by `-serial file:...` and no `-mon`.
pub fn argv(
    accel: Accel,
    topology: &Topology,
    kernel: &Path,
    initrd: &Path,
    console: &Path,
    results: &Path,
) -> Vec<OsString> {
    let serial = |p: &Path| {
        let mut s = OsString::from("file:");
        s.push(p);
        s
    };
    [
        qemu::base_args(),
        // A harness cell runs one at a time here: multi-threaded, like it.
        qemu::accel_args(accel, qemu::TcgThread::Multi),
        qemu::smp_mem_args(topology),
        qemu::numa_args(topology),
        // The same image (PVH ELF) and boot words (clocksource, learned
        // lpj) as a cell: the ratio measures the harness, not the boot.
        qemu::kernel_args(
            &crate::kernel::pvh::boot_image(kernel),
            initrd,
            &qemu::kernel_cmdline(&boot_words(accel, kernel)),
        ),
        vec![
            "-serial".into(),
            serial(console),
            "-serial".into(),
            serial(results),
        ],
        qemu::device_args(),
    ]
    .concat()
}

/// The words of ours a cell's kernel command line has under `accel`
/// before any debugging or user word.
fn boot_words(accel: Accel, kernel: &Path) -> Vec<String> {
    let lpj = (accel == Accel::Tcg)
        .then(|| crate::kernel::lpj::known(kernel))
        .flatten()
        .map(|n| format!("lpj={n}"));
    let tsc = (accel == Accel::Tcg)
        .then(crate::kernel::tsc::cmdline_word)
        .flatten();
    lpj.into_iter()
        .chain(tsc)
        .chain(qemu::tcg_clock_cmdline(accel).map(String::from))
        .collect()
}

/// Writes `dir/initramfs.cpio` (the cell's plan and binaries) and
/// `dir/argv` (NUL-separated, program first) for a bare boot that logs to
/// `dir/console.log` and `dir/results.ktap`.
pub fn emit(
    dir: &Path,
    kernel: &Path,
    topology: &Topology,
    accel: Accel,
    tests: &[SuiteTest],
    bins: &GuestBins,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (plan, files) = crate::suite::plan(tests, bins, 1.0).map_err(|e| e.to_string())?;
    let init = bins.path("guest-init").map_err(|e| e.to_string())?;
    let initrd = dir.join("initramfs.cpio");
    Layout::guest(&init, plan.encode(), &files)
        .write_file(&initrd)
        .map_err(|e| e.to_string())?;
    let qemu = crate::host::find_qemu().map_err(|e| e.to_string())?;
    let mut v: Vec<OsString> = vec![qemu.path.into_os_string()];
    v.extend(argv(
        accel,
        topology,
        kernel,
        &initrd,
        &dir.join("console.log"),
        &dir.join("results.ktap"),
    ));
    let mut bytes = Vec::new();
    for a in v {
        use std::os::unix::ffi::OsStrExt;
        bytes.extend_from_slice(a.as_bytes());
        bytes.push(0);
    }
    std::fs::write(dir.join("argv"), bytes).map_err(|e| format!("{}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_argv_has_files_and_no_sockets_or_qmp() {
        let t = Topology::parse_spec("nodes=2,cpus=1,mem=256M").unwrap();
        let a = argv(
            Accel::Tcg,
            &t,
            "/k".as_ref(),
            "/i".as_ref(),
            "/o/c.log".as_ref(),
            "/o/r.ktap".as_ref(),
        );
        let line = a
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            line.contains("-serial file:/o/c.log -serial file:/o/r.ktap"),
            "{line}"
        );
        assert!(
            !line.contains("socket,") && !line.contains(" -mon "),
            "{line}"
        );
        assert!(line.contains("-numa node,nodeid=1"), "{line}");
        assert!(line.contains("isa-debug-exit"), "{line}");
        assert!(line.contains("-accel tcg -cpu max"), "{line}");
    }
}
