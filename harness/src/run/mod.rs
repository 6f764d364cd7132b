//! The `harness run` front door: one kernel, one topology, one suite.
//! Its arguments ([`RunArgs`]) are checked before the host is touched;
//! the cell is prepared like every other door's ([`Session::prepare`]);
//! its output is the reporters' (the binary adds the terminal and the
//! exit status; `--junit`, `--json`, `--html`, `--kcidb` and the history
//! are added here).

mod args;
mod debug;

pub use args::{timeout_scale, RepeatArgs, RunArgs};
pub use debug::{DebugArgs, DumpWhat, ShellWhen};

use crate::error::Error;
use crate::host;
use crate::kernelspec::KernelSpec;
use crate::planner::{CellRequest, PlannedCell, Session};
use crate::reporter::json::Json;
use crate::reporter::junit::Junit;
use crate::reporter::Reporters;
use crate::runner::RunOptions;
use crate::suite;
use crate::topology::Topology;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the binary gives the door: how it shows the work that is not an
/// event of the run.
pub struct Door {
    /// A note of a signal (stderr).
    pub say: fn(&str),
    /// A progress bar for each kernel download (none: quiet).
    pub download_progress: Option<fn() -> crate::planner::Progress>,
}

/// How `run` ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// `--dry-run`: the plan, for stdout.
    Text(String),
    /// The cell ran: the exit status is the run's summary's.
    Ran,
}

impl RunArgs {
    /// The cell's directory under `--out` (none while `--topology` does
    /// not parse: the run refuses it).
    pub fn cell_dir(&self) -> Option<PathBuf> {
        let topology = Topology::parse_spec(&self.topology).ok()?;
        let name = crate::planner::cell_name(
            &crate::planner::arch_label(&self.kernel, self.arch),
            &topology,
            &self.suite,
        );
        Some(self.out.join(name.replace('/', "_")))
    }

    /// Where the JUnit report goes: `--junit`, else the cell's directory.
    pub fn junit_path(&self) -> Option<PathBuf> {
        self.junit
            .clone()
            .or_else(|| self.cell_dir().map(|d| d.join("junit.xml")))
    }
}

/// `harness run`: checks every argument, then prepares the one cell
/// ([`Session::prepare`]), adds the reporters its flags ask for to the
/// door's (`reporters` holds the terminal and the exit status), and runs
/// it. `--dry-run` returns the plan as text, with nothing done.
pub async fn run(args: RunArgs, reporters: &mut Reporters, door: Door) -> Result<Done, Error> {
    // Everything the command line says, checked before the host is touched.
    let topology = Topology::parse_spec(&args.topology).map_err(Error::usage)?;
    crate::planner::check_host_memory(&topology)?;
    crate::planner::check_mirror(args.debian_mirror.as_deref())?;
    crate::planner::check_kselftest_tree(args.kselftest_tree.as_deref())?;
    let mut kernel = KernelSpec::parse(&args.kernel).map_err(Error::usage)?;
    if let Some(file) = &args.kernel_config {
        kernel = kernel
            .with_config(file)
            .map_err(|e| Error::usage(format!("--kernel-config {e}")))?;
    }
    crate::planner::check_kernel(&kernel)?;
    if let Some(why) = crate::planner::arch_topology_refusal(args.arch, &topology) {
        return Err(Error::usage(format!("--topology {}: {why}", args.topology)));
    }
    crate::planner::check_arch(
        args.arch,
        !args.shares.is_empty(),
        args.debug.shell.is_some() || args.debug.gdb.is_some(),
    )?;
    // A `path:` image is checked against the topology before anything
    // else (the note, when it has no config, is said once it is prepared).
    if let KernelSpec::Path(p) = &kernel {
        crate::planner::preboot_image(p, &topology)?;
    }
    crate::planner::check_suite(&args.suite)?;
    let repeat = args.repeat.repeat().map_err(Error::usage)?;
    if repeat.is_some() && (args.debug.shell.is_some() || args.debug.gdb.is_some()) {
        return Err(Error::usage(
            "--repeat/--until-fail cannot be combined with --shell or --gdb (a person in the loop is not an iteration)",
        ));
    }
    if let Some(e) = &args.expect {
        crate::planner::check_expect(e)?;
    }
    let explicit_shares = args
        .shares
        .iter()
        .map(|s| crate::share::ShareSpec::parse(s).and_then(|s| s.resolve()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::usage)?;
    let mut user_tests = Vec::new();
    for p in &args.guest_bins {
        user_tests.push(
            suite::user_binary(p.clone(), Duration::from_secs(args.guest_bin_timeout))
                .map_err(Error::usage)?,
        );
    }
    if let Some(glob) = &args.test {
        crate::planner::check_test(glob, &args.suite, &user_tests)?;
    }
    let mut files = vec![
        ("--junit", args.junit.as_deref()),
        ("--json", args.json.as_deref()),
    ];
    files.extend(args.reports.paths());
    crate::outputs::check_files(&files).map_err(Error::usage)?;
    crate::outputs::check_dir("--out", &args.out).map_err(Error::usage)?;
    let guest_env = args
        .guest_env
        .iter()
        .map(|w| suite::guest_env(w))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::usage)?;
    if args.debug.dry_run {
        return dry_run(&args, &kernel, topology, user_tests, guest_env, repeat);
    }
    let t0 = std::time::Instant::now();
    let mut session = Session::open(args.debian_mirror.clone(), reporters).await?;
    session.download_progress = door.download_progress;
    let name = crate::planner::cell_name(
        &crate::planner::arch_label(&args.kernel, args.arch),
        &topology,
        &args.suite,
    );
    let want = crate::prepare::CellWant {
        name: None,
        kernel_label: args.kernel.clone(),
        kernel_name: None,
        kernel,
        topology_label: args.topology.clone(),
        topology,
        suite: crate::prepare::SuiteWant::Named {
            name: args.suite.clone(),
            kselftest_tree: args.kselftest_tree.clone(),
        },
        extra_tests: user_tests,
        expect: crate::prepare::ExpectWant::FromKernel(args.expect.clone()),
        accel: args.accel,
        arch: args.arch,
        shares: crate::prepare::ShareWant {
            explicit: explicit_shares,
            artifacts: !args.no_artifacts,
        },
        known_failures: Vec::new(),
        out_dir: args.out.join(name.replace('/', "_")),
    };
    let prepared = session
        .prepare(want, reporters)
        .await
        .map_err(crate::prepare::PrepareError::into_error)?;
    let notes = &prepared.notes;
    for n in notes
        .accel
        .iter()
        .chain(&notes.preboot)
        .chain(&notes.shares)
    {
        reporters.step(n)?;
    }
    let mut req = prepared.request;
    settings(&args, &mut req, repeat, guest_env);
    let out_dir = req.out_dir.clone();
    args.debug.apply(&mut req, &mut session, reporters).await?;
    let cell = crate::planner::cell(0, req);
    let junit_path = args
        .junit
        .clone()
        .unwrap_or_else(|| out_dir.join("junit.xml"));
    reporters.add(Junit::new(&junit_path, "harness run"));
    if let Some(p) = &args.json {
        reporters.add(Json::new(p));
    }
    args.reports.add_reporters(&args.out, reporters);
    // Built before the handlers: a signal during the build ends it at once.
    session.guest_bins(reporters).await?;
    args.debug.before_boot(&cell, reporters)?;
    // From here on a signal stops the VM and leaves the reports; before,
    // the default action ends a download or build at once.
    let cancel = CancellationToken::new();
    crate::signals::install(cancel.clone(), door.say)
        .map_err(|e| Error::infra(format!("installing signal handlers: {e}")))?;
    reporters.step(&format!(
        "booting {} under {} ({})",
        cell.meta.name,
        cell.spec.accel.name(),
        session.qemu.version
    ))?;
    crate::runner::run(
        &mut session,
        vec![PlannedCell::Ready(Box::new(cell))],
        &RunOptions::serial(t0.elapsed()),
        &cancel,
        reporters,
    )
    .await?;
    Ok(Done::Ran)
}

/// `run --dry-run`: the plan of the cell with nothing done (no QEMU
/// needed; nothing fetched, built, unpacked or created:
/// `crate::dry_run`). Says what would be fetched or built.
fn dry_run(
    args: &RunArgs,
    kernel: &KernelSpec,
    topology: Topology,
    user_tests: Vec<crate::suite::SuiteTest>,
    guest_env: Vec<(String, String)>,
    repeat: Option<crate::repeat::Repeat>,
) -> Result<Done, Error> {
    use crate::dry_run;
    let cache = crate::kernel::cache::Cache::from_env().map_err(Error::infra)?;
    let k = dry_run::kernel_for(kernel, args.arch, args.debian_mirror.as_deref(), &cache);
    let mut would = k.would.clone();
    let (qemu, qemu_note) = dry_run::qemu_for(args.arch);
    let (accel, _) =
        host::choose_accel_for(args.accel, &host::probe_kvm(), args.arch).map_err(Error::infra)?;
    // The expectations a run would give: the version's row, the
    // definition's, --expect over them.
    let (def_version, def_expect) = dry_run::definition_facts(kernel).map_err(Error::usage)?;
    let expect = crate::kernelspec::ResolvedKernel {
        path: k.image.clone(),
        version: k.version.clone().or(def_version),
        description: String::new(),
        expect: def_expect,
        origin: crate::kernelspec::KernelOrigin::Path,
        arch: args.arch,
    }
    .expectations(args.expect.as_deref())
    .map_err(|e| Error::usage(format!("--expect: {e}")))?;
    let mut tests = if crate::suite::is_kselftest_suite(&args.suite) {
        would.push(format!(
            "build the upstream futex selftests ({}) into the cache: their programs are this cell's tests",
            args.kselftest_tree
                .as_deref()
                .unwrap_or("from Debian's linux-source of the kernel's series")
        ));
        vec![]
    } else {
        crate::suite::builtin(&args.suite, expect.as_deref()).map_err(Error::usage)?
    };
    tests.extend(user_tests);
    let (bins, unpack) = dry_run::guest_bins_for(&cache, args.arch);
    would.extend(unpack);
    let debug = args.debug.planned(&args.out);
    if let Some(busybox) = &debug.busybox {
        would.push("fetch Debian's busybox-static (the guest's shell) into the cache".into());
        let timeout = Duration::from_secs(args.debug.exec_timeout);
        for (i, cmd) in args.debug.exec.iter().enumerate() {
            tests.push(crate::debug::exec_test(i + 1, cmd, busybox, timeout));
        }
    }
    let name = crate::planner::cell_name(
        &crate::planner::arch_label(&args.kernel, args.arch),
        &topology,
        &args.suite,
    );
    let mut req = CellRequest::new(
        &args.kernel,
        k.image.clone(),
        &args.topology,
        topology,
        &args.suite,
        tests,
        accel,
        args.out.join(name.replace('/', "_")),
    );
    req.expect = expect;
    req.arch = args.arch;
    req.name = name;
    settings(args, &mut req, repeat, guest_env);
    let out_dir = req.out_dir.clone();
    req.topology_check &= debug.shell != Some(crate::debug::ShellMode::Only);
    req.debug = args.debug.planned(&req.out_dir);
    let cell = crate::planner::cell(0, req);
    let plan = crate::cell::bootplan::planned(&cell.spec, &qemu, &bins).map_err(Error::infra)?;
    let mut text = dry_run::text(&would, &out_dir, &plan);
    if let Some(n) = qemu_note {
        text.push_str(&format!("note: {n}\n"));
    }
    text.push_str(
        "note: shares (the artifacts share, --share) are decided at run time, with virtiofsd and the kernel's virtiofs support\n",
    );
    Ok(Done::Text(text))
}

/// `run`'s own settings of its cell (a run and its `--dry-run` alike);
/// the caller adds debugging.
fn settings(
    args: &RunArgs,
    req: &mut CellRequest,
    repeat: Option<crate::repeat::Repeat>,
    guest_env: Vec<(String, String)>,
) {
    req.topology_check = !args.no_topology_check;
    req.tcg_thread = args.tcg_thread;
    req.cmdline = args
        .append
        .as_deref()
        .map(|a| a.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    req.watchdog = args.timeout.map(Duration::from_secs);
    req.timeout_scale = args.timeout_scale;
    req.boot_retries = args.boot_retries;
    req.test_glob = args.test.clone();
    req.repeat = repeat;
    req.guest_env = guest_env;
}
