//! The one planner every front door (`run`, `matrix`, `bench`, `bisect`)
//! calls: it opens the host once ([`Session`]: QEMU, accelerator, guest
//! binaries), resolves each kernel once into a [`ResolvedKernel`], chooses a
//! suite's tests (built-in, kselftest, bench) with the kernel's
//! expectations, decides a kernel's shares, and turns a [`CellRequest`] into
//! the [`PlannedCell`] the runner accepts — topology check first, `--test`
//! selection, naming, output directory.
//!
//! Architecture invariant: the planner decides, it does not run a VM or
//! write a report; what it does is said through [`Reporters`] steps.

use crate::cell::CellSpec;
use crate::error::Error;
use crate::events::{CellMeta, HostFacts};
use crate::guestbin::GuestBins;
use crate::host::{self, AccelChoice, Kvm, Qemu};
use crate::kernelspec::{KernelSpec, ResolveError, ResolvedKernel};
use crate::qemu::Accel;
use crate::reporter::Reporters;
use crate::result::KnownFailure;
use crate::share::{self, KernelSupport, ShareSetup};
use crate::suite::{self, SuiteTest};
use crate::topology::Topology;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Download progress of a kernel (bytes done, total when known).
pub type Progress = Box<dyn FnMut(crate::kernel::debian::Progress) + Send>;

/// The host, opened once per command, and what it has resolved so far.
pub struct Session {
    /// The QEMU binary of the host's architecture (x86-64 elsewhere).
    pub qemu: Arc<Qemu>,
    /// The QEMU binaries of other architectures, found when first needed.
    qemus: BTreeMap<crate::arch::Arch, Arc<Qemu>>,
    /// Whether KVM works here.
    pub kvm: Kvm,
    /// The static guest binaries, once built ([`Session::guest_bins`]).
    bins: Option<Arc<GuestBins>>,
    /// Other architectures' guest binaries ([`Session::guest_bins_for`]).
    arch_bins: BTreeMap<crate::arch::Arch, Arc<GuestBins>>,
    /// Debian mirror override (`--debian-mirror`).
    pub mirror: Option<String>,
    kernels: BTreeMap<(String, crate::arch::Arch), Result<ResolvedKernel, Arc<ResolveError>>>,
    kselftests: BTreeMap<(String, String), Result<Vec<SuiteTest>, String>>,
    supports: BTreeMap<String, KernelSupport>,
    daemon: Option<Result<PathBuf, String>>,
    /// Makes the progress display of a kernel download
    /// ([`Session::prepare`]'s; none: downloads are quiet).
    pub download_progress: Option<fn() -> Progress>,
}

fn join<T>(r: Result<T, tokio::task::JoinError>) -> Result<T, Error> {
    r.map_err(|e| Error::infra(format!("internal error: {e}")))
}

impl Session {
    /// Finds QEMU and probes KVM (the guest binaries come later, once the
    /// arguments that need no build have been checked).
    pub async fn open(
        mirror: Option<String>,
        _reporters: &mut Reporters,
    ) -> Result<Session, Error> {
        let qemu = host::find_qemu().map_err(Error::infra)?;
        let kvm = host::probe_kvm();
        Ok(Session {
            qemu: Arc::new(qemu),
            qemus: BTreeMap::new(),
            kvm,
            bins: None,
            arch_bins: BTreeMap::new(),
            mirror,
            kernels: BTreeMap::new(),
            kselftests: BTreeMap::new(),
            supports: BTreeMap::new(),
            daemon: None,
            download_progress: None,
        })
    }

    /// The static guest binaries, built (or found) once per session.
    pub async fn guest_bins(&mut self, reporters: &mut Reporters) -> Result<Arc<GuestBins>, Error> {
        if let Some(b) = &self.bins {
            return Ok(b.clone());
        }
        reporters.step("building guest binaries")?;
        let bins = join(tokio::task::spawn_blocking(GuestBins::locate_or_build).await)?
            .map_err(Error::infra)?;
        let bins = Arc::new(bins);
        self.bins = Some(bins.clone());
        Ok(bins)
    }

    /// The QEMU of `arch`: the session's own for the default
    /// architecture, else found (and its version checked) once.
    pub fn qemu_for(&mut self, arch: crate::arch::Arch) -> Result<Arc<Qemu>, host::HostError> {
        if arch == crate::arch::Arch::X86_64 {
            return Ok(self.qemu.clone());
        }
        if let Some(q) = self.qemus.get(&arch) {
            return Ok(q.clone());
        }
        let q = Arc::new(host::find_qemu_for(arch)?);
        self.qemus.insert(arch, q.clone());
        Ok(q)
    }

    /// The guest binaries of `arch`, located once per session.
    pub async fn guest_bins_for(
        &mut self,
        arch: crate::arch::Arch,
        reporters: &mut Reporters,
    ) -> Result<Arc<GuestBins>, Error> {
        if arch == crate::arch::Arch::X86_64 {
            return self.guest_bins(reporters).await;
        }
        if let Some(b) = self.arch_bins.get(&arch) {
            return Ok(b.clone());
        }
        let bins = join(tokio::task::spawn_blocking(move || GuestBins::locate_for(arch)).await)?
            .map_err(Error::infra)?;
        let bins = Arc::new(bins);
        self.arch_bins.insert(arch, bins.clone());
        Ok(bins)
    }

    /// The guest binaries if [`Session::guest_bins`] has built them.
    pub fn built_guest_bins(&self) -> Option<Arc<GuestBins>> {
        self.bins.clone()
    }

    /// What reports say about the host.
    pub fn host_facts(&self) -> HostFacts {
        HostFacts {
            qemu_version: self.qemu.version.clone(),
            harness_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// The accelerator for `choice`, and a note when it is not what was
    /// asked for (TCG instead of KVM).
    pub fn accel(&self, choice: AccelChoice) -> Result<(Accel, Option<String>), host::HostError> {
        host::choose_accel(choice, &self.kvm)
    }

    /// [`Session::accel`] for a guest of `arch` (KVM only for the host's).
    pub fn accel_for(
        &self,
        choice: AccelChoice,
        arch: crate::arch::Arch,
    ) -> Result<(Accel, Option<String>), host::HostError> {
        host::choose_accel_for(choice, &self.kvm, arch)
    }

    /// The kernel `label` names, resolved once per session (Debian's
    /// package fetched and verified, a definition built, a file checked).
    pub async fn kernel(
        &mut self,
        label: &str,
        spec: &KernelSpec,
        reporters: &mut Reporters,
        progress: Option<Progress>,
    ) -> Result<ResolvedKernel, Arc<ResolveError>> {
        self.kernel_for(label, spec, crate::arch::Arch::X86_64, reporters, progress)
            .await
    }

    /// [`Session::kernel`] for `arch` (Debian's kernel of that
    /// architecture, a cross build, a file checked to be one).
    pub async fn kernel_for(
        &mut self,
        label: &str,
        spec: &KernelSpec,
        arch: crate::arch::Arch,
        reporters: &mut Reporters,
        progress: Option<Progress>,
    ) -> Result<ResolvedKernel, Arc<ResolveError>> {
        let key = (label.to_string(), arch);
        if let Some(r) = self.kernels.get(&key) {
            return r.clone();
        }
        let doing = match spec {
            KernelSpec::Tree(_) => "building",
            _ => "fetching",
        };
        let _ = reporters.step(&format!(
            "{doing} kernel {label}{}",
            match arch {
                crate::arch::Arch::X86_64 => String::new(),
                a => format!(" for {a}"),
            }
        ));
        let (spec, mirror) = (spec.clone(), self.mirror.clone());
        let r = reporters
            .blocking(move |say| {
                let mut progress = progress;
                crate::kernelspec::resolve(
                    &spec,
                    arch,
                    mirror.as_deref(),
                    &mut |p| {
                        if let Some(f) = progress.as_mut() {
                            f(p)
                        }
                    },
                    say,
                )
            })
            .await
            .unwrap_or_else(|e| {
                Err(ResolveError::BadImage {
                    path: PathBuf::new(),
                    why: format!("internal error: {e}"),
                })
            })
            .map_err(Arc::new);
        if let Ok(k) = &r {
            let _ = reporters.step(&format!("kernel {} at {}", k.description, k.path.display()));
        }
        self.kernels.insert(key, r.clone());
        r
    }

    /// The tests of the suite `name` for a kernel: built-in suites with the
    /// expectations, kselftest suites built (once per suite and kernel)
    /// from `kselftest_tree` or Debian's source of the kernel's series.
    pub async fn suite_tests(
        &mut self,
        name: &str,
        kernel_label: &str,
        kernel: &ResolvedKernel,
        expect: Option<&str>,
        kselftest_tree: Option<&str>,
        reporters: &mut Reporters,
    ) -> Result<Vec<SuiteTest>, String> {
        if !suite::is_kselftest_suite(name) {
            return suite::builtin(name, expect).map_err(|e| e.to_string());
        }
        // The same kernel label of two architectures: two builds.
        let key = (
            name.to_string(),
            crate::planner::arch_label(kernel_label, kernel.arch),
        );
        if let Some(r) = self.kselftests.get(&key) {
            return r.clone();
        }
        let _ = reporters.step(&format!("building {name} for {kernel_label}"));
        let opts = crate::kselftest::Options {
            mirror: self.mirror.clone(),
            rebuild: false,
            jobs: 0,
        };
        let (name_s, tree, version, arch) = (
            name.to_string(),
            kselftest_tree.map(String::from),
            kernel.version.clone(),
            kernel.arch,
        );
        let r = reporters
            .blocking(move |say| {
                let spec =
                    crate::kselftest::source_spec(&name_s, tree.as_deref(), version.as_deref())?;
                let cache = crate::kernel::cache::Cache::from_env()?;
                crate::kselftest::prepare_for(&spec, &cache, &opts, arch, say)
            })
            .await
            .map_err(|e| format!("internal error: {e}"))
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map(|build| {
                let _ = reporters.step(&format!(
                    "upstream selftests from {} ({}) in {}",
                    build.manifest.source,
                    if build.cached { "cached" } else { "built" },
                    build.dir.display()
                ));
                build.tests()
            });
        self.kselftests.insert(key, r.clone());
        r
    }

    /// Debian's static busybox for `--exec` and `--shell` (fetched and
    /// verified once, then from the cache).
    pub async fn busybox(&mut self, reporters: &mut Reporters) -> Result<PathBuf, Error> {
        let _ = reporters.step("fetching busybox-static (the guest's shell)");
        let mirror = self.mirror.clone();
        join(tokio::task::spawn_blocking(move || crate::busybox::fetch(mirror.as_deref())).await)?
            .map_err(Error::infra)
    }

    /// What [`share::decide`] needs for a cell of this kernel: the
    /// virtiofsd daemon (looked up once) and, where one exists, the
    /// kernel's virtiofs support (looked up once per kernel; the Debian
    /// lookup may download the kernel's modules package). Nothing is looked
    /// up unless `wanted`.
    pub async fn share_inputs(
        &mut self,
        wanted: bool,
        kernel_label: &str,
        kernel: &KernelSpec,
        image: &Path,
        reporters: &mut Reporters,
    ) -> (Result<PathBuf, String>, Option<KernelSupport>) {
        let first = self.daemon.is_none();
        let daemon = self
            .daemon
            .get_or_insert_with(share::find_virtiofsd)
            .clone();
        if !wanted {
            return (daemon, None);
        }
        let Ok(_) = &daemon else {
            if let (true, Err(why)) = (first, &daemon) {
                // Said once here; each cell's notes say it again.
                let _ = reporters.step(&format!("no virtiofs shares: {why}"));
            }
            return (daemon, None);
        };
        if let Some(s) = self.supports.get(kernel_label) {
            return (daemon, Some(s.clone()));
        }
        let _ = reporters.step(&format!("checking virtiofs support of {kernel_label}"));
        let (k, img, mirror) = (kernel.clone(), image.to_path_buf(), self.mirror.clone());
        let s =
            tokio::task::spawn_blocking(move || share::support_for(&k, &img, mirror.as_deref()))
                .await
                .unwrap_or_else(|e| KernelSupport::Missing(format!("internal error: {e}")));
        self.supports.insert(kernel_label.to_string(), s.clone());
        (daemon, Some(s))
    }
}

/// Checks what can be checked of a kernel without the network or a build:
/// a `source:` definition loads (and what it extends), a `path:` file is
/// a bzImage, a `tree:` is still not configured in place, its config file
/// is there and the definition it borrows its config from loads. A usage
/// error otherwise, before anything is fetched, built or booted.
pub fn check_kernel(spec: &KernelSpec) -> Result<(), Error> {
    match spec {
        KernelSpec::Source(name) => {
            crate::kernel::definition::check(name).map_err(Error::usage)?;
        }
        KernelSpec::Path(p) => {
            crate::kernelspec::check_bzimage(p).map_err(|why| {
                Error::usage(ResolveError::BadImage {
                    path: p.clone(),
                    why,
                })
            })?;
        }
        KernelSpec::Tree(t) => {
            crate::kernel::definition::check(crate::kernel::tree::DEFINITION)
                .map_err(Error::usage)?;
            crate::kernel::tree::TreeSpec::parse(&t.dir).map_err(|why| {
                Error::usage(crate::kernel::tree::TreeError::Spec {
                    dir: t.dir.clone(),
                    why,
                })
            })?;
            if let Some(c) = t.config.as_deref().filter(|c| !c.is_file()) {
                return Err(Error::usage(format!(
                    "--kernel-config {}: no such file",
                    c.display()
                )));
            }
        }
        KernelSpec::Debian(_) => {}
    }
    Ok(())
}

/// The pre-boot check of a `path:` image, or of a `tree:` kernel's (its
/// object directory's `.config`, kept beside the cached image), for a
/// topology ([`crate::kernel::preboot`]): `Err` (a usage error) names
/// every option the guest lacks with the line that fixes it;
/// `Ok(Some(note))` when the image's configuration could not be found (it
/// boots, with the note). Definitions (`source:`) are checked when they
/// are built, Debian's kernels have everything.
pub fn preboot(kernel: &ResolvedKernel, topology: &Topology) -> Result<Option<String>, Error> {
    use crate::kernelspec::KernelOrigin;
    if !matches!(
        kernel.origin,
        KernelOrigin::Path | KernelOrigin::Tree { .. }
    ) {
        return Ok(None);
    }
    preboot_image(&kernel.path, topology)
}

/// [`preboot`] of an image file, before anything else is done with it.
pub fn preboot_image(image: &Path, topology: &Topology) -> Result<Option<String>, Error> {
    // Possible nodes: an offline one needs NUMA support as much as an online one.
    let nodes = topology.nodes().len() + topology.offline();
    crate::kernel::preboot::check(image, nodes, topology.cpus()).map_err(Error::usage)
}

/// What an architecture other than x86-64 cannot do yet, refused before
/// anything is downloaded, built or booted (a usage error naming the
/// flag): shares, the interactive shell and gdb.
pub fn check_arch(arch: crate::arch::Arch, shares: bool, shell_or_gdb: bool) -> Result<(), Error> {
    if arch == crate::arch::Arch::X86_64 {
        return Ok(());
    }
    let refuse = |what: &str| {
        Err(Error::usage(format!(
            "--arch {arch}: {what} x86-64 only so far"
        )))
    };
    if shares {
        return refuse("--share is");
    }
    if shell_or_gdb {
        return refuse("--shell and --gdb are");
    }
    Ok(())
}

/// Why a topology cannot boot on `arch`, when it cannot: arm64 has no
/// possible-but-offline nodes. The device tree names a node only with
/// memory or CPUs; ACPI's SRAT can name a hot-pluggable range, but under
/// UEFI firmware QEMU's `virt` leaves 64 MiB of RAM outside every SRAT
/// range, and Linux then drops NUMA altogether ("NUMA: no nodes coverage
/// for 64MB of 1088MB RAM", measured with QEMU 10.0 and AAVMF).
pub fn arch_topology_refusal(arch: crate::arch::Arch, topology: &Topology) -> Option<String> {
    (arch == crate::arch::Arch::Arm64 && topology.offline() > 0).then(|| {
        "arm64 guests cannot have possible-but-offline nodes (offline=): the device tree \
         names no node without memory or CPUs, and QEMU's virt machine under UEFI leaves \
         RAM outside ACPI's SRAT, which makes Linux drop NUMA; the cases that need such a \
         node run on x86-64"
            .to_string()
    })
}

/// A kernel that could not be resolved, with its kind: the user's fault
/// for an unknown version or definition or a file that is not a kernel,
/// the host's otherwise.
pub fn resolve_error(e: Arc<ResolveError>) -> Error {
    if e.is_usage() {
        Error::usage(e)
    } else {
        Error::infra(e)
    }
}

/// Checks a suite name against the registry (kselftest suites included).
pub fn check_suite(name: &str) -> Result<(), Error> {
    match suite::builtin(name, None) {
        Ok(_) | Err(suite::SuiteError::NeedsBuild { .. }) => Ok(()),
        Err(e) => Err(Error::usage(e)),
    }
}

/// Checks `--test GLOB` against the suite (and user binaries) it filters:
/// a glob that selects nothing is a usage error naming what exists.
pub fn check_test(glob: &str, suite: &str, extra: &[SuiteTest]) -> Result<(), Error> {
    let cases = crate::cases::SuiteCases::builtin(suite).with_tests(extra);
    crate::cases::check_selection(glob, &[(suite.to_string(), cases)]).map_err(Error::usage)
}

/// Checks an `--expect` string on its own (keys, values, contradictions).
pub fn check_expect(expect: &str) -> Result<(), Error> {
    guest_tests::expect::Expect::parse(expect)
        .map(|_| ())
        .map_err(|e| Error::usage(format!("--expect {expect:?}: {e}")))
}

/// `--debian-mirror URL`: an http(s) URL, checked before anything is fetched.
pub fn check_mirror(url: Option<&str>) -> Result<(), Error> {
    match url {
        Some(u) => crate::kernel::debian::DebianMirror::new(
            u,
            crate::kernel::debian::MirrorOrigin::Explicit,
        )
        .map(|_| ())
        .map_err(|e| Error::usage(format!("--debian-mirror: {e}"))),
        None => Ok(()),
    }
}

/// `--kselftest-tree`: `debian:X.Y` or a kernel tree holding the futex
/// selftests, checked before anything is fetched.
pub fn check_kselftest_tree(tree: Option<&str>) -> Result<(), Error> {
    match tree {
        Some(t) => crate::kselftest::SourceSpec::parse(t)
            .map(|_| ())
            .map_err(|e| Error::usage(format!("--kselftest-tree: {e}"))),
        None => Ok(()),
    }
}

/// The topology's memory fits the host: QEMU would otherwise fail (or
/// the host swap) only after a kernel was fetched.
pub fn check_host_memory(topology: &Topology) -> Result<(), Error> {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    });
    match total_kib {
        Some(kib) if topology.mem_mib() > kib / 1024 => Err(Error::usage(format!(
            "--topology: {} MiB of guest memory is more than this host has ({} MiB)",
            topology.mem_mib(),
            kib / 1024
        ))),
        _ => Ok(()),
    }
}

/// A cell name component: no `/`, no spaces.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The name of a cell outside a matrix: `<kernel>/<topology>/<suite>`.
pub fn cell_name(kernel_label: &str, topology: &Topology, suite: &str) -> String {
    format!("{}/{topology}/{suite}", sanitize(kernel_label))
}

/// The kernel part of a cell name for `arch`: the label alone for
/// x86-64 (names stay what they were), `<label>-<arch>` otherwise, so
/// the same kernel on two architectures gives two cells.
pub fn arch_label(label: &str, arch: crate::arch::Arch) -> String {
    match arch {
        crate::arch::Arch::X86_64 => label.to_string(),
        a => format!("{label}-{a}"),
    }
}

/// Everything a front door says about one cell.
#[derive(Debug, Clone)]
pub struct CellRequest {
    /// Unique name (see [`cell_name`]).
    pub name: String,
    /// Kernel as the user wrote it.
    pub kernel_label: String,
    /// Kernel name in a matrix (else the label).
    pub kernel_name: String,
    /// The bootable image.
    pub image: PathBuf,
    /// Topology name or spec.
    pub topology_label: String,
    /// The topology.
    pub topology: Topology,
    /// Suite name.
    pub suite_label: String,
    /// The suite's tests (without the topology check).
    pub tests: Vec<SuiteTest>,
    /// Whether the topology check opens the plan.
    pub topology_check: bool,
    /// Accelerator.
    pub accel: Accel,
    /// The guest architecture (the kernel's and the guest binaries').
    pub arch: crate::arch::Arch,
    /// TCG's vCPU threads (multi unless the front door says otherwise).
    pub tcg_thread: crate::qemu::TcgThread,
    /// Extra kernel command line words.
    pub cmdline: Vec<String>,
    /// Whole-VM watchdog (`None`: boot allowance + test timeouts).
    pub watchdog: Option<Duration>,
    /// Multiplies in-guest timeouts.
    pub timeout_scale: f64,
    /// Boots retried when the guest dies before guest-init speaks.
    pub boot_retries: u32,
    /// The expectations the futex binaries get, for reports.
    pub expect: Option<String>,
    /// `--test GLOB`.
    pub test_glob: Option<String>,
    /// Failures accepted in this cell.
    pub known_failures: Vec<KnownFailure>,
    /// virtiofs shares.
    pub shares: ShareSetup,
    /// Where the cell's logs go.
    pub out_dir: PathBuf,
    /// The kernel's source and build, for reports that describe them
    /// (`crate::reporter::kcidb::kernel_facts`).
    pub kernel_facts: Option<crate::events::KernelFacts>,
    /// Shell, gdb, memory image, live lines, extra QEMU words.
    pub debug: crate::debug::DebugOptions,
    /// `--repeat` / `--until-fail` / `--fresh-boot`.
    pub repeat: Option<crate::repeat::Repeat>,
    /// `--guest-env KEY=VALUE`: every test binary's environment.
    pub guest_env: Vec<(String, String)>,
}

impl CellRequest {
    /// A request with the defaults every front door starts from.
    #[allow(clippy::too_many_arguments)] // each is a required fact of a cell
    pub fn new(
        kernel_label: &str,
        image: PathBuf,
        topology_label: &str,
        topology: Topology,
        suite_label: &str,
        tests: Vec<SuiteTest>,
        accel: Accel,
        out_dir: PathBuf,
    ) -> CellRequest {
        CellRequest {
            name: cell_name(kernel_label, &topology, suite_label),
            kernel_label: kernel_label.into(),
            kernel_name: kernel_label.into(),
            image,
            topology_label: topology_label.into(),
            topology,
            suite_label: suite_label.into(),
            tests,
            topology_check: true,
            accel,
            arch: crate::arch::Arch::X86_64,
            tcg_thread: Default::default(),
            cmdline: Vec::new(),
            watchdog: None,
            timeout_scale: 1.0,
            boot_retries: crate::cell::DEFAULT_BOOT_RETRIES,
            expect: None,
            test_glob: None,
            known_failures: Vec::new(),
            shares: ShareSetup::none(),
            out_dir,
            kernel_facts: None,
            debug: Default::default(),
            repeat: None,
            guest_env: Vec::new(),
        }
    }
}

/// A cell the runner can start.
#[derive(Debug, Clone)]
pub struct ReadyCell {
    /// What reports say about it.
    pub meta: CellMeta,
    /// What boots.
    pub spec: CellSpec,
    /// Its shares.
    pub shares: ShareSetup,
    /// Failures accepted in it.
    pub known_failures: Vec<KnownFailure>,
    /// `--test GLOB`: which cases are reported.
    pub test_glob: Option<String>,
}

/// What the runner gets per cell: ready, or already failed while planning.
#[derive(Debug, Clone)]
pub enum PlannedCell {
    /// Ready to boot.
    Ready(Box<ReadyCell>),
    /// Planning failed (kernel, shares, kselftest build): reported as the
    /// cell's error, nothing boots.
    Failed {
        /// The cell.
        meta: CellMeta,
        /// Why.
        error: String,
    },
}

impl PlannedCell {
    /// The cell's report facts.
    pub fn meta(&self) -> &CellMeta {
        match self {
            PlannedCell::Ready(r) => &r.meta,
            PlannedCell::Failed { meta, .. } => meta,
        }
    }
}

/// Turns a request into a cell: the topology check first, then the
/// suite's tests (only those `--test`'s first segment selects).
pub fn cell(index: usize, req: CellRequest) -> ReadyCell {
    // An entry limited to other kernels (`kernel:` of a known failure)
    // does not apply to this cell at all.
    let known_failures = req
        .known_failures
        .iter()
        .filter(|k| k.applies_to_kernel(&req.kernel_name))
        .cloned()
        .collect();
    let mut tests = Vec::new();
    if req.topology_check {
        tests.push(suite::topology_check(&req.topology));
    }
    tests.extend(req.tests);
    // `suite/binary/case` selects as `binary/case` in its suite.
    let test_glob = req.test_glob.as_deref().map(|g| {
        crate::cases::in_suite(
            g,
            &req.suite_label,
            &crate::cases::SuiteCases::tests(&tests),
        )
    });
    if let Some(g) = test_glob.as_deref().filter(|g| g.contains('/')) {
        let first = g.split('/').next().unwrap_or(g);
        tests.retain(|t| t.name == "topology" || crate::glob::matches(first, &t.name));
        // One exact case of a futex binary: only it runs (`--filter` is a
        // substring; the report keeps exactly the glob's cases), which is
        // what makes `--repeat 50` of one case cheap.
        let case = &g[first.len() + 1..];
        if !case.is_empty() && !case.contains(['*', '?', '[', '{', '\\', '/']) {
            for t in tests
                .iter_mut()
                .filter(|t| guest_tests::binaries::futex().any(|b| b == t.name))
            {
                t.args.extend(["--filter".to_string(), case.to_string()]);
            }
        }
    }
    let meta = CellMeta {
        index,
        name: req.name.clone(),
        kernel: req.kernel_label.clone(),
        kernel_name: req.kernel_name,
        topology: req.topology_label.clone(),
        suite: req.suite_label.clone(),
        expect: req.expect,
        out_dir: req.out_dir.clone(),
        facts: Some(Box::new(crate::events::CellFacts {
            kernel: req.kernel_facts,
            topology: req.topology.clone(),
            arch: req.arch,
        })),
    };
    ReadyCell {
        meta,
        spec: CellSpec {
            name: req.name,
            kernel_label: req.kernel_label,
            kernel_image: req.image,
            topology: req.topology,
            topology_label: req.topology_label,
            suite_label: req.suite_label,
            tests,
            accel: req.accel,
            arch: req.arch,
            tcg_thread: req.tcg_thread,
            cmdline_extra: req.cmdline,
            watchdog: req.watchdog,
            timeout_scale: req.timeout_scale,
            boot_retries: req.boot_retries,
            out_dir: req.out_dir,
            debug: req.debug,
            repeat: req.repeat,
            guest_env: req.guest_env,
        },
        shares: req.shares,
        known_failures,
        test_glob,
    }
}

/// Whether a case is reported under `--test GLOB`: cases of the
/// topology check and cell-level cases (`vm`, `ktap`, `boot/...`) always are.
pub fn keep_case(glob_pat: Option<&str>, suite_tests: &[String], case: &str) -> bool {
    let Some(g) = glob_pat else { return true };
    let top = case.split('/').next().unwrap_or(case);
    top == "topology" || !suite_tests.iter().any(|t| t == top) || crate::glob::matches(g, case)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(test_glob: Option<&str>) -> CellRequest {
        let t = Topology::parse_spec("nodes=2,cpus=1,mem=256M").unwrap();
        let mut r = CellRequest::new(
            "debian:7.3.4",
            "/k".into(),
            "two",
            t,
            "futex",
            suite::builtin("futex", Some("numa=1")).unwrap(),
            Accel::Tcg,
            "/o".into(),
        );
        r.test_glob = test_glob.map(String::from);
        r
    }

    #[test]
    fn a_cell_opens_with_the_topology_check_and_keeps_the_selected_binaries() {
        let c = cell(3, request(None));
        assert_eq!(c.meta.index, 3);
        assert_eq!(
            c.spec.name,
            format!("debian-7.3.4/{}/futex", c.spec.topology)
        );
        assert_eq!(c.spec.tests[0].name, "topology");
        assert_eq!(
            c.spec.tests.len(),
            1 + guest_tests::binaries::futex().count()
        );
        let c = cell(0, request(Some("futex-numa/*")));
        let names: Vec<_> = c.spec.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["topology", "futex-numa"]);
        // A glob without `/` selects cases, not binaries.
        assert_eq!(
            cell(0, request(Some("*node*"))).spec.tests.len(),
            1 + guest_tests::binaries::futex().count()
        );
        // One exact case runs alone; a case glob runs the binary's cases.
        let c = cell(0, request(Some("futex-prctl/set-16")));
        assert_eq!(
            c.spec.tests[1].args,
            ["--expect", "numa=1", "--filter", "set-16"]
        );
        assert!(!c.spec.tests[0].args.contains(&"--filter".to_string()));
        let c = cell(0, request(Some("futex-prctl/set-*")));
        assert_eq!(c.spec.tests[1].args, ["--expect", "numa=1"]);
    }

    #[test]
    fn kept_cases_follow_the_glob_but_never_drop_cell_level_cases() {
        let names = vec!["futex-numa".to_string(), "futex-prctl".to_string()];
        let keep = |c: &str| keep_case(Some("futex-numa/*"), &names, c);
        assert!(keep("futex-numa/flag-accepted"));
        assert!(!keep("futex-prctl/get-fresh-is-0"));
        assert!(keep("topology/nodes") && keep("vm") && keep("boot/kernel-warning"));
        assert!(keep_case(None, &names, "futex-prctl/x"));
    }

    #[test]
    fn a_known_failure_for_other_kernels_does_not_reach_the_cell() {
        let entry = |kernels: &[&str]| KnownFailure {
            case: "futex-resize/*".into(),
            reason: "r".into(),
            kernels: kernels.iter().map(|k| k.to_string()).collect(),
            ..Default::default()
        };
        let mut r = request(None);
        r.kernel_name = "debian-7.3".into();
        r.known_failures = vec![
            entry(&["debian-7.3", "source-7.3*"]),
            entry(&["debian-7.0"]),
            entry(&[]),
        ];
        // No kernels names none: an entry must say where it is seen.
        let kept: Vec<_> = cell(0, r)
            .known_failures
            .iter()
            .map(|k| k.kernels.len())
            .collect();
        assert_eq!(
            kept,
            [2],
            "the debian-7.0 and kernel-less entries are dropped"
        );
    }

    #[test]
    fn names_have_no_slashes_or_spaces_from_the_kernel() {
        assert_eq!(sanitize("path:/a b/bzImage"), "path--a-b-bzImage");
    }
}
