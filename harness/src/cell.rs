//! One cell = one kernel x one topology x one suite: plan -> initramfs ->
//! VM -> KTAP + console scan -> [`CellResult`]. Keeps the console log, the
//! raw KTAP stream and QEMU's argv in the cell's output directory.

use crate::guestbin::GuestBins;
use crate::host::Qemu;
use crate::initramfs::{InitramfsError, Layout};
use crate::qemu::{Accel, VmSpec};
use crate::result::{CellResult, VmEnd};
use crate::suite::{SuiteError, SuiteTest};
use crate::topology::Topology;
use crate::vm::{Limits, VmError, VmRequest};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// Errors that prevent a cell from running (infrastructure, not tests).
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    /// Suite/binaries.
    #[error(transparent)]
    Suite(#[from] SuiteError),
    /// Initramfs.
    #[error(transparent)]
    Initramfs(#[from] InitramfsError),
    /// VM setup.
    #[error(transparent)]
    Vm(#[from] VmError),
    /// virtiofs shares.
    #[error(transparent)]
    Share(#[from] crate::share::ShareError),
    /// QEMU exited with an error before the guest printed anything: it
    /// refused the image or its arguments. Not retried.
    #[error("QEMU refused to start the VM (exit status {status}): {stderr}")]
    QemuRefused {
        /// QEMU's exit status.
        status: i32,
        /// The tail of its stderr.
        stderr: String,
    },
    /// Temp or output directory.
    #[error("cannot create {path}: {source}")]
    Dir {
        /// Directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Everything that defines a cell.
#[derive(Debug, Clone)]
pub struct CellSpec {
    /// Unique name (used in JUnit and as a directory name).
    pub name: String,
    /// Kernel as the user named it.
    pub kernel_label: String,
    /// The bootable image.
    pub kernel_image: PathBuf,
    /// Topology.
    pub topology: Topology,
    /// Topology name.
    pub topology_label: String,
    /// Suite name.
    pub suite_label: String,
    /// Tests in order (the topology check first).
    pub tests: Vec<SuiteTest>,
    /// Accelerator to try first.
    pub accel: Accel,
    /// Extra kernel command line.
    pub cmdline_extra: Vec<String>,
    /// Whole-VM watchdog; `None`: derived from the tests' timeouts.
    pub watchdog: Option<Duration>,
    /// Multiplies in-guest timeouts.
    pub timeout_scale: f64,
    /// How often a boot that dies before guest-init speaks is retried.
    pub boot_retries: u32,
    /// Where logs go (created).
    pub out_dir: PathBuf,
}

/// Boot allowance added to the sum of test timeouts for the watchdog.
pub fn boot_allowance(accel: Accel) -> Duration {
    match accel {
        Accel::Kvm => Duration::from_secs(30),
        Accel::Tcg => Duration::from_secs(90),
    }
}

/// Default watchdog: boot allowance + every test's (scaled) timeout.
pub fn default_watchdog(tests: &[SuiteTest], accel: Accel, scale: f64) -> Duration {
    let tests: Duration = tests.iter().map(|t| t.timeout.mul_f64(scale)).sum();
    boot_allowance(accel) + tests
}

/// Boots retried by default when the guest dies before guest-init speaks:
/// Debian's 6.12 kernel crashes in about 3 boots in 10 under QEMU 7.2's TCG
/// (measured with a bare static init, any CPU model), so one retry is not
/// enough for a 50-cell matrix to be reliably green.
pub const DEFAULT_BOOT_RETRIES: u32 = 3;

/// Whether the VM died during boot, before guest-init printed its first
/// KTAP line: an infrastructure failure (measured: Debian's 6.12 kernel
/// crashes in about one boot in five under QEMU 7.2's TCG), not a result.
pub fn boot_failed(out: &crate::vm::VmOutput) -> bool {
    let crashed = matches!(out.end, VmEnd::KernelPanic | VmEnd::QemuExited { .. });
    crashed && !out.results.windows(4).any(|w| w == b"KTAP")
}

/// Runs a cell. A boot that dies before guest-init speaks is retried
/// `boot_retries` times (and the result says so). A KVM failure of the kind TCG does not have is retried
/// once under TCG, and the result says so.
pub async fn run(
    spec: &CellSpec,
    qemu: &Qemu,
    bins: &GuestBins,
    cancel: &CancellationToken,
) -> Result<CellResult, CellError> {
    run_with_shares(spec, &crate::share::ShareSetup::none(), qemu, bins, cancel).await
}

/// [`run`] with virtiofs shares (see [`crate::share`]): one daemon per
/// share and boot attempt, stopped with the VM; artifacts land in
/// `<out_dir>/artifacts` and are listed as attachments in the notes.
pub async fn run_with_shares(
    spec: &CellSpec,
    shares: &crate::share::ShareSetup,
    qemu: &Qemu,
    bins: &GuestBins,
    cancel: &CancellationToken,
) -> Result<CellResult, CellError> {
    let started = SystemTime::now();
    std::fs::create_dir_all(&spec.out_dir).map_err(|source| CellError::Dir {
        path: spec.out_dir.clone(),
        source,
    })?;
    let tmp = tempfile::Builder::new()
        .prefix("harness-cell-")
        .tempdir()
        .map_err(|source| CellError::Dir {
            path: std::env::temp_dir(),
            source,
        })?;
    let (mut plan, mut files) = crate::suite::plan(&spec.tests, bins, spec.timeout_scale)?;
    let cell_shares =
        crate::share::CellShares::prepare(shares, &spec.out_dir, &mut plan, &mut files)?;
    let initrd = tmp.path().join("initramfs.cpio");
    let mut layout = Layout::guest(
        &bins.path("guest-init").map_err(SuiteError::from)?,
        plan.encode(),
        &files,
    );
    if !cell_shares.initramfs_files.is_empty() {
        layout.push(guest_tests::plan::MODULE_DIR, crate::initramfs::Node::Dir);
    }
    for (guest, host) in &cell_shares.initramfs_files {
        layout.push(guest, crate::initramfs::Node::HostFile(host.clone(), 0o644));
    }
    layout.write_file(&initrd)?;

    let mut accel = spec.accel;
    let mut notes = cell_shares.notes.clone();
    let mut attempt = 0u32;
    let mut boot_retries_left = spec.boot_retries;
    let out = loop {
        attempt += 1;
        let daemons =
            crate::share::Daemons::start(&cell_shares, tmp.path(), attempt, &spec.out_dir).await?;
        let vm_spec = VmSpec {
            accel,
            topology: spec.topology.clone(),
            kernel: spec.kernel_image.clone(),
            initrd: initrd.clone(),
            cmdline_extra: spec.cmdline_extra.clone(),
            console_socket: tmp.path().join(format!("console-{attempt}.sock")),
            results_socket: tmp.path().join(format!("results-{attempt}.sock")),
            qmp_socket: tmp.path().join(format!("qmp-{attempt}.sock")),
            shares: daemons.devices(),
        };
        let argv_line = crate::qemu::argv(&vm_spec)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let _ = std::fs::write(
            spec.out_dir.join("qemu-argv.txt"),
            format!("{} {argv_line}\n", qemu.path.display()),
        );
        let req = VmRequest {
            qemu: qemu.clone(),
            watchdog: spec
                .watchdog
                .unwrap_or_else(|| default_watchdog(&spec.tests, accel, spec.timeout_scale)),
            spec: vm_spec,
            console_log: spec.out_dir.join("console.log"),
            results_log: spec.out_dir.join("results.ktap"),
            limits: Limits::default(),
        };
        if let Some(word) = crate::qemu::tcg_share_cmdline(accel, !req.spec.shares.is_empty()) {
            let note = format!(
                "kernel booted with {word}: TCG would run stale translations of code virtiofsd writes into guest RAM (docs/shares.md)"
            );
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        let out = crate::vm::run(&req, cancel).await;
        daemons.stop().await;
        let out = out?;
        // KVM fails in two ways TCG does not: QEMU stops with "KVM internal
        // error", or (a paravirtual /dev/kvm, measured) the guest never
        // prints a byte until the watchdog. Either is retried under TCG.
        let kvm_error = matches!(out.end, VmEnd::QemuExited { .. })
            && crate::host::is_kvm_failure(&out.qemu_stderr);
        let kvm_silent = matches!(out.end, VmEnd::Watchdog(_)) && out.console.is_empty();
        if accel == Accel::Kvm && (kvm_error || kvm_silent) {
            let why = if kvm_error {
                crate::vm::tail(out.qemu_stderr.trim(), 200)
            } else {
                format!(
                    "the guest printed nothing before the watchdog ({})",
                    crate::verdict::describe(&out.end)
                )
            };
            let note = format!("KVM failed ({why}); retried under TCG");
            tracing::warn!("{}: {note}", spec.name);
            notes.push(note);
            accel = Accel::Tcg;
            continue;
        }
        if let VmEnd::QemuExited { status, stderr } = &out.end {
            if *status > 0 && out.console.is_empty() {
                return Err(CellError::QemuRefused {
                    status: *status,
                    stderr: crate::vm::tail(stderr.trim(), 400),
                });
            }
        }
        if boot_retries_left > 0 && boot_failed(&out) {
            boot_retries_left -= 1;
            let kept = spec
                .out_dir
                .join(format!("console-boot-failure-{attempt}.log"));
            let _ = std::fs::rename(spec.out_dir.join("console.log"), &kept);
            let note = format!(
                "the guest died before guest-init reported anything ({}); booted again (console kept in {})",
                crate::verdict::describe(&out.end),
                kept.display()
            );
            tracing::warn!("{}: {note}", spec.name);
            notes.push(note);
            continue;
        }
        break out;
    };
    let ktap = crate::ktap::parse(&out.results);
    let console = crate::console::scan(&out.console);
    if out.qmp_panicked {
        notes.push("QMP reported GUEST_PANICKED".into());
    }
    notes.extend(cell_shares.finish(&out.console));
    Ok(CellResult {
        name: spec.name.clone(),
        kernel: spec.kernel_label.clone(),
        topology: spec.topology_label.clone(),
        suite: spec.suite_label.clone(),
        accel: accel.name().into(),
        qemu_version: qemu.version.clone(),
        planned: spec.tests.iter().map(|t| t.name.clone()).collect(),
        end: out.end,
        ktap,
        console,
        console_log: Some(spec.out_dir.join("console.log")),
        duration: started.elapsed().unwrap_or(out.elapsed),
        started,
        notes,
        known_failures: Vec::new(),
    })
}
