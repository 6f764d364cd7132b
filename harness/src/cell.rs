//! One cell = one kernel x one topology x one suite: plan -> initramfs ->
//! VM -> KTAP + console scan -> [`CellResult`]. Keeps the console log, the
//! raw KTAP stream and QEMU's argv in the cell's output directory.

pub mod boot_retry;
pub mod bootplan;

use crate::guestbin::GuestBins;
use crate::host::Qemu;
use crate::initramfs::InitramfsError;
use crate::qemu::Accel;
use crate::result::{BootRetry, CellResult, VmEnd};
use crate::suite::{SuiteError, SuiteTest};
use crate::topology::Topology;
use crate::vm::{Attach, Limits, LiveTap, VmError, VmRequest, WedgeWatch};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};
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
    /// The guest architecture (which QEMU, machine and console).
    pub arch: crate::arch::Arch,
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
    /// TCG's vCPU threads (when it runs under TCG).
    pub tcg_thread: crate::qemu::TcgThread,
    /// Extra kernel command line.
    pub cmdline_extra: Vec<String>,
    /// Whole-VM watchdog; `None`: derived from the tests' timeouts.
    pub watchdog: Option<Duration>,
    /// Multiplies in-guest timeouts.
    pub timeout_scale: f64,
    /// How often a boot that dies before guest-init speaks with a known
    /// crash signature ([`boot_retry::SIGNATURES`]) is booted again.
    pub boot_retries: u32,
    /// Where logs go (created).
    pub out_dir: PathBuf,
    /// Shell, gdb, memory image, extra QEMU words (none by default).
    pub debug: crate::debug::DebugOptions,
    /// `--repeat` / `--until-fail` (`None`: the plan runs once).
    pub repeat: Option<crate::repeat::Repeat>,
    /// Environment every test binary gets (`--guest-env`), after the
    /// harness's own.
    pub guest_env: Vec<(String, String)>,
}

/// Watchdog of a session with a person in it (shell, gdb) and no
/// `--timeout`: long enough never to end one.
pub const INTERACTIVE_WATCHDOG: Duration = Duration::from_secs(30 * 24 * 3600);

/// The watchdog of `spec` under `accel`: `--timeout`, else none to speak
/// of with a person in the loop, else boot allowance + test timeouts.
pub fn watchdog(spec: &CellSpec, accel: Accel) -> Duration {
    match spec.watchdog {
        Some(w) => w,
        None if spec.debug.interactive() => INTERACTIVE_WATCHDOG,
        None => {
            // A guest that loops over the plan runs every test each time.
            let once = default_watchdog(&spec.tests, accel, spec.timeout_scale);
            let times = spec.repeat.map_or(1, |r| r.in_guest());
            boot_allowance(accel) + (once - boot_allowance(accel)) * times
        }
    }
}

/// A private temp directory (sockets, the initramfs), removed on drop.
pub(crate) fn private_dir(prefix: &str) -> Result<tempfile::TempDir, CellError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|source| CellError::Dir {
            path: std::env::temp_dir(),
            source,
        })
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

/// Boots retried by default when a boot crashes with a known signature:
/// Debian's 6.12 kernel crashes in about 3 boots in 10 under QEMU 7.2's TCG
/// (measured with a bare static init, any CPU model), so one retry is not
/// enough for a 50-cell matrix to be reliably green.
pub const DEFAULT_BOOT_RETRIES: u32 = 3;

/// Whether the VM died during boot, before guest-init printed its first
/// KTAP line. Only a crash of a known signature ([`boot_retry`]) is booted
/// again; any other is the cell's result.
pub fn boot_failed(out: &crate::vm::VmOutput) -> bool {
    let crashed = matches!(out.end, VmEnd::KernelPanic | VmEnd::QemuExited { .. });
    crashed && !out.results.windows(4).any(|w| w == b"KTAP")
}

/// Runs a cell. A boot that dies before guest-init speaks with a known
/// crash signature is booted again up to `boot_retries` times, each retry
/// recorded in the result; any other boot crash fails the cell at once. A
/// KVM failure of the kind TCG does not have is retried once under TCG,
/// and the result says so.
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
    run_attached(spec, shares, qemu, bins, cancel, None, None).await
}

/// [`run_with_shares`], its console and result lines sent to `live` as
/// they come when the cell asks for them (`--live`), its QEMU in the host
/// class `class` says (the runner's [`crate::fill`]).
pub async fn run_attached(
    spec: &CellSpec,
    shares: &crate::share::ShareSetup,
    qemu: &Qemu,
    bins: &GuestBins,
    cancel: &CancellationToken,
    live: Option<LiveTap>,
    class: Option<crate::sched_class::ClassHandle>,
) -> Result<CellResult, CellError> {
    let started = SystemTime::now();
    std::fs::create_dir_all(&spec.out_dir).map_err(|source| CellError::Dir {
        path: spec.out_dir.clone(),
        source,
    })?;
    let tmp = private_dir("harness-cell-")?;
    let assembly = Instant::now();
    let guest = crate::cell::bootplan::guest(spec, shares, bins)?;
    let cell_shares = guest.shares;
    let initrd = tmp.path().join("initramfs.cpio");
    guest.layout.write_file(&initrd)?;
    if spec.debug.keep_initramfs {
        let kept = crate::cell::bootplan::kept_initramfs(spec);
        std::fs::copy(&initrd, &kept).map_err(|source| CellError::Dir { path: kept, source })?;
    }
    let initramfs = assembly.elapsed();
    let mut retried = Duration::ZERO;
    let dump = spec.debug.dump.map(|f| (spec.out_dir.clone(), f));

    let mut accel = spec.accel;
    let mut notes = cell_shares.notes.clone();
    let mut attempt = 0u32;
    let mut boot_retries: Vec<BootRetry> = Vec::new();
    let mut qemu_command: String;
    // From the image on the host, once: what a crash signature names.
    let release = crate::kernel::spec::image_release(&spec.kernel_image);
    let out = loop {
        attempt += 1;
        let daemons =
            crate::share::Daemons::start(&cell_shares, tmp.path(), attempt, &spec.out_dir).await?;
        let vm_spec = crate::cell::bootplan::vm_spec(
            spec,
            accel,
            &initrd,
            tmp.path(),
            attempt,
            daemons.devices(),
        );
        qemu_command = crate::cell::bootplan::argv_line(&qemu.path, &vm_spec);
        let _ = std::fs::write(
            spec.out_dir.join("qemu-argv.txt"),
            format!("{qemu_command}\n"),
        );
        if spec.debug.keep_initramfs && attempt == 1 {
            let line = crate::cell::bootplan::by_hand(
                spec,
                &qemu.path,
                &vm_spec,
                !vm_spec.shares.is_empty(),
            )
            .unwrap_or_else(|why| format!("# not available: {why}"));
            let _ = std::fs::write(spec.out_dir.join("qemu-by-hand.txt"), format!("{line}\n"));
        }
        let req = VmRequest {
            qemu: qemu.clone(),
            watchdog: watchdog(spec, accel),
            spec: vm_spec,
            console_log: spec.out_dir.join("console.log"),
            results_log: spec.out_dir.join("results.ktap"),
            limits: Limits::default(),
            attach: Attach {
                live: spec.debug.live.then(|| live.clone()).flatten(),
                dump: dump.clone(),
                class: class.clone(),
            },
            wedge: (!spec.debug.interactive()).then(|| WedgeWatch::for_plan(&guest.plan)),
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
        if accel == Accel::Tcg {
            crate::kernel::lpj::learn(&spec.kernel_image, &out.console);
        }
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
            retried += out.elapsed;
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
        let qemu_stderr = match &out.end {
            VmEnd::QemuExited { stderr, .. } => stderr.as_bytes(),
            _ => &[],
        };
        let crash = boot_retry::Crash {
            release: release.as_deref(),
            accel,
            qemu_major: qemu.major(),
            console: &out.console,
            qemu_stderr,
        };
        let retry = (boot_retries.len() < spec.boot_retries as usize && boot_failed(&out))
            .then(|| boot_retry::decide(&crash, attempt))
            .flatten();
        if let Some(retry) = retry {
            // The crashed boot's console stays beside the cell's.
            let kept = spec
                .out_dir
                .join(format!("console-boot-failure-{attempt}.log"));
            let _ = std::fs::rename(spec.out_dir.join("console.log"), &kept);
            tracing::warn!(
                "{}: boot {attempt} crashed with the known signature {} ({}); booting again",
                spec.name,
                retry.signature,
                retry.line
            );
            boot_retries.push(retry);
            retried += out.elapsed;
            continue;
        }
        break out;
    };
    let ktap = crate::ktap::parse(&out.results);
    notes.extend(crate::debug::exec_notes(&ktap));
    let console = crate::console::scan(&out.console);
    if accel == Accel::Tcg && spec.tcg_thread == crate::qemu::TcgThread::Single {
        notes.push(
            "TCG round-robin: every vCPU on one host thread (-accel tcg,thread=single)".into(),
        );
    }
    if out.qmp_panicked {
        notes.push("QMP reported GUEST_PANICKED".into());
    }
    if let Some(d) = &out.dump {
        notes.push(crate::debug::dump_note(d, spec.topology.mem_mib()));
    }
    notes.extend(cell_shares.finish(&out.console));
    let duration = started.elapsed().unwrap_or(out.elapsed);
    let clock = crate::profile::CellClock {
        initramfs,
        retried,
        vm: out.elapsed,
        wall: duration,
    };
    let profile = crate::profile::cell(&clock, &out.console, &out.console_at, &out.results_at);
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
        duration,
        started,
        qemu_cpu: out.cpu,
        notes,
        known_failures: Vec::new(),
        profile,
        boot_retries,
        qemu_command,
    })
}
