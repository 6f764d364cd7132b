//! `harness`: boot kernels under QEMU in NUMA topologies, run KTAP guest
//! tests, write JUnit. The edge: the command line, the terminal reporter
//! (`terminal.rs`), `anyhow`, and the one mapping of errors to exit codes.

mod args;
mod debug;
mod doctor;
mod help;
mod terminal;
mod tools;

use anyhow::Context;
use clap::{Parser, Subcommand};
use harness::error::Error;
use harness::host::{self, AccelChoice};
use harness::kernelspec::KernelSpec;
use harness::planner::{CellRequest, PlannedCell, Session};
use harness::reporter::exit::ExitStatus;
use harness::reporter::json::Json;
use harness::reporter::junit::Junit;
use harness::reporter::Reporters;
use harness::runner::RunOptions;
use harness::suite;
use harness::topology::Topology;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use terminal::{Shape, Terminal};
use tokio_util::sync::CancellationToken;

// The one table of exit statuses (`harness::error::exit`).
use harness::error::exit::{
    INFRASTRUCTURE as EXIT_INFRA, NOT_READY as EXIT_NOT_READY, OK as EXIT_OK,
};

#[derive(Parser)]
#[command(
    name = "harness",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("HARNESS_GIT_COMMIT"), ")"),
    about = "Boot Linux kernels in QEMU NUMA topologies and run futex tests, reporting JUnit"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Boot one kernel in one topology and run a suite.
    Run(Box<RunArgs>),
    /// Print what this host offers: QEMU, and whether KVM or TCG will be used.
    Host,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) of harness, or with --dir write one page
    /// per subcommand there.
    Man {
        /// Write `harness.1` and `harness-<subcommand>.1` into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Check everything the harness may need here, with the fix for each
    /// (exit 3 when the default run cannot work).
    Doctor(doctor::DoctorArgs),
    /// Install what is missing (Debian, Ubuntu): apt packages, QEMU from
    /// backports where the release's is too old for TCG, virtiofsd.
    Setup(doctor::SetupArgs),
    /// Run the cells of a matrix file (kernels x topologies x suites).
    Matrix(args::MatrixArgs),
    /// JUnit report tools.
    #[command(subcommand)]
    Junit(JunitCommand),
    /// The kernel's own futex selftests: build them (cached) or compare
    /// their verdicts with ours.
    #[command(subcommand)]
    Kselftest(tools::KselftestCommand),
    /// Benchmark futex configurations across kernels and topologies (see docs/bench.md).
    Bench(args::BenchArgs),
    /// Kernels built from source (`kernels/<name>.yaml`).
    #[command(subcommand)]
    Kernel(tools::KernelCmd),
    /// Find the commit of a kernel tree that broke a test, or moved a bench
    /// number past a threshold (--metric; git bisect; see docs/bisect.md).
    Bisect(harness::bisect::BisectArgs),
    /// The runs recorded in the results history (docs/history.md).
    History(args::HistoryListArgs),
    /// What changed from run A to run B (JSON results files or runs of the
    /// history): exit 1 when B regressed (docs/history.md).
    Compare(args::CompareArgs),
    /// Reports of a finished run, from its JSON results file.
    #[command(subcommand)]
    Report(args::ReportCommand),
    /// One step of `harness bisect` (run by `git bisect run`).
    #[command(hide = true)]
    BisectStep(harness::bisect::StepArgs),
}

#[derive(Subcommand)]
enum JunitCommand {
    /// Join reports (e.g. of shards) into one, losslessly.
    Merge(args::MergeArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Kernel: `debian:<version>` (Debian's prebuilt cloud kernel),
    /// `path:<bzImage>`, `source:<name>` (kernels/<name>.yaml) or
    /// `tree:<dir>` (your kernel tree, built as it is, out of tree).
    #[arg(long)]
    kernel: String,
    /// With a `tree:` kernel: start its config from FILE instead of
    /// tinyconfig (the guest fragment is merged over it, the required
    /// options checked).
    #[arg(long, value_name = "FILE")]
    kernel_config: Option<PathBuf>,
    /// Topology: `nodes=N,cpus=C,mem=SIZE[,distance=D]` (C vCPUs and SIZE memory per node).
    #[arg(long, default_value = "nodes=1,cpus=2,mem=512M")]
    topology: String,
    /// Built-in suite (smoke, futex, none, fault-*).
    #[arg(long, default_value = "smoke")]
    suite: String,
    /// A static KTAP-speaking (or plain) guest binary to run too; repeatable.
    #[arg(long = "guest-bin", value_name = "PATH")]
    guest_bins: Vec<PathBuf>,
    /// Timeout for each --guest-bin, in seconds.
    #[arg(long, default_value_t = 120)]
    guest_bin_timeout: u64,
    /// An environment variable every test binary in the guest gets
    /// (repeatable), e.g. FUTEX_STRESS_ITERATIONS=50 or
    /// FUTEX_RACE_SERIALIZE=1 (README, "Suites and your own binaries").
    #[arg(long = "guest-env", value_name = "KEY=VALUE")]
    guest_env: Vec<String>,
    /// JUnit XML output (default: <out>/<cell>/junit.xml).
    #[arg(long)]
    junit: Option<PathBuf>,
    /// JSON results file (schema: docs/results.md).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Self-contained HTML report of the run (docs/report.md), rewritten
    /// as cells finish.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    #[command(flatten)]
    kcidb: args::KcidbArgs,
    #[command(flatten)]
    profile: args::ProfileArgs,
    #[command(flatten)]
    history: args::HistoryArgs,
    /// Directory for console logs, raw KTAP and QEMU's argv.
    #[arg(long, default_value = "harness-out")]
    out: PathBuf,
    /// Accelerator: auto uses KVM only where hardware KVM really works.
    #[arg(long, value_enum, default_value_t = AccelChoice::Auto)]
    accel: AccelChoice,
    /// Under TCG: one host thread per vCPU (`multi`, QEMU's default) or
    /// every vCPU on one thread in turns (`single`).
    #[arg(long, value_enum, default_value_t = harness::qemu::TcgThread::Multi)]
    tcg_thread: harness::qemu::TcgThread,
    /// Whole-VM watchdog in seconds (default: boot allowance + test timeouts).
    #[arg(long)]
    timeout: Option<u64>,
    /// Multiply every in-guest timeout by this factor (in (0, 100]).
    #[arg(long, default_value_t = 1.0, value_parser = timeout_scale)]
    timeout_scale: f64,
    /// Extra kernel command line words.
    #[arg(long, allow_hyphen_values = true)]
    append: Option<String>,
    /// Expected kernel features for the futex suites (`numa=1,private_hash=0,...`);
    /// default: from the kernel version's row of the ABI table.
    #[arg(long)]
    expect: Option<String>,
    /// Boot again up to this many times when the guest dies before
    /// guest-init reports anything with a known crash signature (QEMU 7's
    /// TCG crashing Debian's 6.12, docs/reliability.md); any other boot
    /// crash fails the cell at once.
    #[arg(long, default_value_t = harness::cell::DEFAULT_BOOT_RETRIES)]
    boot_retries: u32,
    /// Kernel source for the kselftest-* suites: `debian:X.Y` or a pristine
    /// kernel tree (default: Debian's linux-source of the kernel's series).
    #[arg(long, value_name = "TREE")]
    kselftest_tree: Option<String>,
    /// Skip the topology check.
    #[arg(long)]
    no_topology_check: bool,
    /// Debian mirror for `debian:` kernels (default: $HARNESS_DEBIAN_MIRROR,
    /// else the machine's apt configuration).
    #[arg(long, value_name = "URL")]
    debian_mirror: Option<String>,
    /// Share a host directory with the guest over virtiofs (repeatable):
    /// `HOST_DIR[:GUEST_PATH[:ro|rw]]`, default guest path `/mnt/<name>`.
    /// A `--guest-bin` inside a share runs from there, unpacked.
    #[arg(long = "share", value_name = "HOST_DIR[:GUEST_PATH[:ro|rw]]")]
    shares: Vec<String>,
    /// No per-cell artifacts share (`<out>/<cell>/artifacts`, guest
    /// `/harness/artifacts`, `$HARNESS_ARTIFACTS`), which is on by default
    /// when virtiofs works.
    #[arg(long)]
    no_artifacts: bool,
    /// Only test cases whose `binary/case` name matches (glob, as in the
    /// matrix); with one exact case of a futex binary only that case runs.
    #[arg(long = "test", value_name = "GLOB")]
    test: Option<String>,
    /// Repetition: --repeat N, --until-fail [--max N], --fresh-boot.
    #[command(flatten)]
    repeat: args::RepeatArgs,
    /// Debugging: --dry-run, --live, --exec, --shell, --gdb, --dump-on-panic, --qemu-arg.
    #[command(flatten)]
    debug: debug::DebugArgs,
}

fn main() -> ExitCode {
    end_quietly_on_a_closed_pipe();
    let filter = tracing_subscriber::EnvFilter::try_from_env("HARNESS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let filter = args::cap_wire_log(filter);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .init();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&help::command().get_matches())
    {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("harness: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_INFRA);
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Run(args) => run(*args)
                .await
                .map_err(anyhow::Error::from)
                .map_err(doctor::with_setup_hint),
            Command::Host => host_report(),
            Command::Doctor(args) => tokio::task::spawn_blocking(move || doctor::doctor(args))
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| r),
            Command::Setup(args) => tokio::task::spawn_blocking(move || doctor::setup(args))
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| r),
            Command::Completions { shell } => {
                let mut cmd = <Cli as clap::CommandFactory>::command();
                clap_complete::generate(shell, &mut cmd, "harness", &mut std::io::stdout());
                Ok(EXIT_OK)
            }
            Command::Man { dir } => help::man(dir.as_deref()).map(|()| EXIT_OK),
            Command::Matrix(args) => matrix(args)
                .await
                .map_err(anyhow::Error::from)
                .map_err(doctor::with_setup_hint),
            Command::Junit(JunitCommand::Merge(args)) => {
                harness::matrix::cli::merge(args.request())
                    .map(|said| {
                        println!("{said}");
                        EXIT_OK
                    })
                    .map_err(anyhow::Error::from)
            }
            Command::Kselftest(c) => tools::kselftest(c).await,
            Command::Bench(args) => {
                let exit = ExitStatus::new();
                let mut reporters = Reporters::new();
                reporters.add(exit.clone());
                reporters.add(Terminal::new(Shape::Steps, Vec::new()));
                // Checked before anything is fetched, like run's outputs.
                if let Err(e) = harness::outputs::check_files(&[("--json", args.json.as_deref())]) {
                    return Err(anyhow::Error::from(Error::usage(e)));
                }
                if let Some(p) = &args.json {
                    reporters.add(Json::new(p));
                }
                match harness::bench::run(args.request(), &mut reporters, say).await {
                    Ok(b) => {
                        print!("{}", b.summary);
                        Ok(match b.measured {
                            harness::bench::Measured::Nothing => EXIT_OK,
                            // A number missing because the host failed
                            // its cell stays the host's (69).
                            harness::bench::Measured::Missing => {
                                if exit.code() == EXIT_OK {
                                    exit.unexpected();
                                }
                                exit.code()
                            }
                            harness::bench::Measured::All => exit.code(),
                        })
                    }
                    Err(e) => Err(anyhow::Error::from(Error::from(e))),
                }
            }
            Command::Kernel(cmd) => tokio::task::spawn_blocking(move || tools::kernel_cmd(cmd))
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| r),
            Command::Bisect(args) => bisect(args).await,
            Command::History(args) => history(&args).map_err(anyhow::Error::from),
            Command::Compare(args) => compare(&args).map_err(anyhow::Error::from),
            Command::Report(cmd) => tokio::task::spawn_blocking(move || cmd.run())
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| r.map(|()| EXIT_OK).map_err(anyhow::Error::from)),
            Command::BisectStep(args) => {
                let stepped = harness::bisect::step(args, say).await;
                if !stepped.line.is_empty() {
                    println!("{}", stepped.line);
                }
                Ok(stepped.exit)
            }
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) if broken_pipe(&e) => die_of_sigpipe(),
        Err(e) => {
            eprintln!("harness: error: {}", error_text(&e));
            ExitCode::from(exit_code_for(&e))
        }
    }
}

/// A progress note of the library's blocking work (a build, an unpack) or
/// of a signal, on stderr like every other `harness:` line.
pub(crate) fn say(note: &str) {
    eprintln!("harness: {note}");
}

/// Output to a closed pipe (`harness kernel list | head -c1`) ends the
/// harness the way it ends a C tool: by SIGPIPE, quietly. Rust ignores
/// SIGPIPE, which the harness needs (a QEMU that dies must be an EPIPE on
/// its socket, not the end of the harness), so `println!` panics instead
/// and a writer returns the error: both are turned back into the signal.
/// QEMU and virtiofsd die with the harness (`PR_SET_PDEATHSIG`).
fn end_quietly_on_a_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if msg.contains("Broken pipe") {
            die_of_sigpipe();
        }
        default(info)
    }));
}

/// Whether `e` is a write to a closed pipe.
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Ends the process by SIGPIPE, as the shell expects of a reader gone.
fn die_of_sigpipe() -> ! {
    // SAFETY: plain syscalls; the default action ends the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + libc::SIGPIPE)
}

/// An error and its causes on one line, each cause once: a cause whose
/// text its parent already printed (`cannot create X: <io error>` over the
/// io error) is not repeated.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text
}

/// The one mapping of errors to exit statuses: every front door returns an
/// [`Error`] that says its kind; anything else (a cache or build error of
/// the `kernel` and `kselftest` tools) is the host's.
fn exit_code_for(e: &anyhow::Error) -> u8 {
    if let Some(k) = e.chain().find_map(|c| c.downcast_ref::<Error>()) {
        return k.kind.exit_code();
    }
    EXIT_INFRA
}

async fn run(args: RunArgs) -> Result<u8, Error> {
    // Everything the command line says, checked before the host is touched.
    let topology = Topology::parse_spec(&args.topology).map_err(Error::usage)?;
    harness::planner::check_host_memory(&topology)?;
    harness::planner::check_mirror(args.debian_mirror.as_deref())?;
    harness::planner::check_kselftest_tree(args.kselftest_tree.as_deref())?;
    let mut kernel = KernelSpec::parse(&args.kernel).map_err(Error::usage)?;
    if let Some(file) = &args.kernel_config {
        kernel = kernel
            .with_config(file)
            .map_err(|e| Error::usage(format!("--kernel-config {e}")))?;
    }
    harness::planner::check_kernel(&kernel)?;
    // A `path:` image is checked against the topology before anything
    // else (the note, when it has no config, is said once it is prepared).
    if let KernelSpec::Path(p) = &kernel {
        harness::planner::preboot_image(p, &topology)?;
    }
    harness::planner::check_suite(&args.suite)?;
    let repeat = args.repeat.repeat().map_err(Error::usage)?;
    if repeat.is_some() && (args.debug.shell.is_some() || args.debug.gdb.is_some()) {
        return Err(Error::usage(
            "--repeat/--until-fail cannot be combined with --shell or --gdb (a person in the loop is not an iteration)",
        ));
    }
    if let Some(e) = &args.expect {
        harness::planner::check_expect(e)?;
    }
    let explicit_shares = args
        .shares
        .iter()
        .map(|s| harness::share::ShareSpec::parse(s).and_then(|s| s.resolve()))
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
        harness::planner::check_test(glob, &args.suite, &user_tests)?;
    }
    harness::outputs::check_files(&[
        ("--junit", args.junit.as_deref()),
        ("--json", args.json.as_deref()),
        ("--html", args.html.as_deref()),
        ("--kcidb", args.kcidb.kcidb.as_deref()),
        ("--history", args.history.target().file()),
    ])
    .map_err(Error::usage)?;
    harness::outputs::check_dir("--out", &args.out).map_err(Error::usage)?;
    let guest_env = args
        .guest_env
        .iter()
        .map(|w| suite::guest_env(w))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::usage)?;
    if args.debug.dry_run {
        return dry_run(&args, &kernel, topology, user_tests, guest_env, repeat);
    }
    let junit_path = args.junit.clone();

    let exit = ExitStatus::new();
    let mut reporters = Reporters::new();
    reporters.add(exit.clone());
    let t0 = std::time::Instant::now();
    let mut session = Session::open(args.debian_mirror.clone(), &mut reporters).await?;
    session.download_progress = Some(download_bar);
    let name = harness::planner::cell_name(&args.kernel, &topology, &args.suite);
    let want = harness::prepare::CellWant {
        name: None,
        kernel_label: args.kernel.clone(),
        kernel_name: None,
        kernel,
        topology_label: args.topology.clone(),
        topology,
        suite: harness::prepare::SuiteWant::Named {
            name: args.suite.clone(),
            kselftest_tree: args.kselftest_tree.clone(),
        },
        extra_tests: user_tests,
        expect: harness::prepare::ExpectWant::FromKernel(args.expect.clone()),
        accel: args.accel,
        shares: harness::prepare::ShareWant {
            explicit: explicit_shares,
            artifacts: !args.no_artifacts,
        },
        known_failures: Vec::new(),
        out_dir: args.out.join(name.replace('/', "_")),
    };
    let prepared = session
        .prepare(want, &mut reporters)
        .await
        .map_err(harness::prepare::PrepareError::into_error)?;
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
    args.debug
        .apply(&mut req, &mut session, &mut reporters)
        .await?;
    let cell = harness::planner::cell(0, req);
    let junit_path = junit_path.unwrap_or_else(|| out_dir.join("junit.xml"));
    reporters.add(Junit::new(&junit_path, "harness run"));
    if let Some(p) = &args.json {
        reporters.add(Json::new(p));
    }
    if let Some(p) = &args.html {
        reporters.add(harness::reporter::html::Html::new(p));
    }
    if let Some((p, opts)) = args.kcidb.output() {
        reporters.add(harness::reporter::kcidb::Kcidb::new(&p, opts));
    }
    if let Some(p) = args.history.target().path(&args.out) {
        reporters.add(harness::reporter::history::History::new(
            &p,
            harness::history::command_line(),
        ));
    }
    reporters.add(
        Terminal::new(
            Shape::Cases,
            vec![format!("JUnit: {}", junit_path.display())],
        )
        .live(args.debug.live)
        .profile(args.profile.profile),
    );
    // Built before the handlers: a signal during the build ends it at once.
    session.guest_bins(&mut reporters).await?;
    args.debug.before_boot(&cell, &mut reporters)?;
    // From here on a signal stops the VM and leaves the reports; before,
    // the default action ends a download or build at once.
    let cancel = CancellationToken::new();
    harness::signals::install(cancel.clone(), say)
        .map_err(|e| Error::infra(format!("installing signal handlers: {e}")))?;
    reporters.step(&format!(
        "booting {} under {} ({})",
        cell.meta.name,
        cell.spec.accel.name(),
        session.qemu.version
    ))?;
    harness::runner::run(
        &mut session,
        vec![PlannedCell::Ready(Box::new(cell))],
        &RunOptions::serial(t0.elapsed()),
        &cancel,
        &mut reporters,
    )
    .await?;
    Ok(exit.code())
}

/// `run --dry-run`: the plan of the cell with nothing done (no QEMU
/// needed; nothing fetched, built, unpacked or created:
/// `harness::dry_run`). Says what would be fetched or built.
fn dry_run(
    args: &RunArgs,
    kernel: &KernelSpec,
    topology: Topology,
    user_tests: Vec<harness::suite::SuiteTest>,
    guest_env: Vec<(String, String)>,
    repeat: Option<harness::repeat::Repeat>,
) -> Result<u8, Error> {
    use harness::dry_run;
    let cache = harness::kernel::cache::Cache::from_env().map_err(Error::infra)?;
    let k = dry_run::kernel(kernel, args.debian_mirror.as_deref(), &cache);
    let mut would = k.would.clone();
    let (qemu, qemu_note) = dry_run::qemu();
    let (accel, _) = host::choose_accel(args.accel, &host::probe_kvm()).map_err(Error::infra)?;
    // The expectations a run would give: the version's row, the
    // definition's, --expect over them.
    let (def_version, def_expect) = dry_run::definition_facts(kernel).map_err(Error::usage)?;
    let expect = harness::kernelspec::ResolvedKernel {
        path: k.image.clone(),
        version: k.version.clone().or(def_version),
        description: String::new(),
        expect: def_expect,
        origin: harness::kernelspec::KernelOrigin::Path,
    }
    .expectations(args.expect.as_deref())
    .map_err(|e| Error::usage(format!("--expect: {e}")))?;
    let mut tests = if harness::suite::is_kselftest_suite(&args.suite) {
        would.push(format!(
            "build the upstream futex selftests ({}) into the cache: their programs are this cell's tests",
            args.kselftest_tree
                .as_deref()
                .unwrap_or("from Debian's linux-source of the kernel's series")
        ));
        vec![]
    } else {
        harness::suite::builtin(&args.suite, expect.as_deref()).map_err(Error::usage)?
    };
    tests.extend(user_tests);
    let (bins, unpack) = dry_run::guest_bins(&cache);
    would.extend(unpack);
    let debug = args.debug.planned(&args.out);
    if let Some(busybox) = &debug.busybox {
        would.push("fetch Debian's busybox-static (the guest's shell) into the cache".into());
        let timeout = Duration::from_secs(args.debug.exec_timeout);
        for (i, cmd) in args.debug.exec.iter().enumerate() {
            tests.push(harness::debug::exec_test(i + 1, cmd, busybox, timeout));
        }
    }
    let name = harness::planner::cell_name(&args.kernel, &topology, &args.suite);
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
    settings(args, &mut req, repeat, guest_env);
    let out_dir = req.out_dir.clone();
    req.topology_check &= debug.shell != Some(harness::debug::ShellMode::Only);
    req.debug = args.debug.planned(&req.out_dir);
    let cell = harness::planner::cell(0, req);
    let plan = harness::cell::bootplan::planned(&cell.spec, &qemu, &bins).map_err(Error::infra)?;
    let mut text = dry_run::text(&would, &out_dir, &plan);
    if let Some(n) = qemu_note {
        text.push_str(&format!("note: {n}\n"));
    }
    text.push_str(
        "note: shares (the artifacts share, --share) are decided at run time, with virtiofsd and the kernel's virtiofs support\n",
    );
    print!("{text}");
    Ok(EXIT_OK)
}

/// `run`'s own settings of its cell (a run and its `--dry-run` alike);
/// the caller adds debugging.
fn settings(
    args: &RunArgs,
    req: &mut CellRequest,
    repeat: Option<harness::repeat::Repeat>,
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

/// A progress bar for a kernel download.
fn download_bar() -> Box<dyn FnMut(harness::kernel::debian::Progress) + Send> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bytes}/{total_bytes} {wide_bar} {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Box::new(move |p: harness::kernel::debian::Progress| {
        bar.set_message(p.what.to_string());
        if let Some(t) = p.total {
            bar.set_length(t);
        }
        bar.set_position(p.done);
        if p.total.is_some_and(|t| p.done >= t) {
            bar.finish_and_clear();
        }
    })
}

/// `harness bisect`: the orchestration runs on a blocking thread; SIGINT
/// and SIGTERM are forwarded to the running step, then the tree is reset.
async fn bisect(args: harness::bisect::BisectArgs) -> anyhow::Result<u8> {
    use tokio::signal::unix::{signal, SignalKind};
    let intr = harness::bisect::Interrupt::default();
    let exe = std::env::current_exe().context("locating the harness binary")?;
    if args.dry_run {
        let text = harness::bisect::dry_run(&args, &exe).map_err(Error::from)?;
        print!("{text}");
        return Ok(EXIT_OK);
    }
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let i2 = intr.clone();
    tokio::spawn(async move {
        loop {
            let sig = tokio::select! {
                Some(()) = int.recv() => libc::SIGINT,
                Some(()) = term.recv() => libc::SIGTERM,
                else => return,
            };
            eprintln!("harness: bisect: interrupted; stopping the step and resetting the tree");
            i2.fire(sig);
        }
    });
    let o = tokio::task::spawn_blocking(move || {
        harness::bisect::run(&args, &exe, &intr, say, |line| eprintln!("{line}"))
    })
    .await?
    .map_err(Error::from)?;
    print!("{}", o.report);
    Ok(o.exit)
}

/// `harness history`: the runs of the history, newest first.
fn history(args: &args::HistoryListArgs) -> Result<u8, Error> {
    let db = harness::history::Database::open_existing(&args.db.path())
        .map_err(harness::history::HistoryError::into_error)?;
    let runs = db
        .runs()
        .map_err(harness::history::HistoryError::into_error)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&runs).map_err(Error::infra)?
        );
    } else {
        print!("{}", harness::history::listing(&runs));
    }
    Ok(EXIT_OK)
}

/// `harness compare A B`: exit 1 when B regressed against A.
fn compare(args: &args::CompareArgs) -> Result<u8, Error> {
    use harness::compare::{self, CompareError};
    let db = args.db.path();
    let a = compare::load(&args.a, &db).map_err(CompareError::into_error)?;
    let b = compare::load(&args.b, &db).map_err(CompareError::into_error)?;
    let c = compare::compare(&a, &b);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&c).map_err(Error::infra)?
        );
    } else {
        print!("{}", c.text());
    }
    Ok(c.exit_code())
}

/// `harness host`: the facts `--accel auto` decides from.
fn host_report() -> anyhow::Result<u8> {
    let qemu = host::find_qemu()?;
    println!("qemu: {} ({})", qemu.path.display(), qemu.version);
    if let Some(n) = host::tcg_note(&qemu) {
        println!("note: {n}");
    }
    let kvm = host::probe_kvm();
    let (accel, note) = host::choose_accel(AccelChoice::Auto, &kvm)?;
    println!("accel: {} (--accel auto)", accel.name());
    if let Some(n) = note {
        println!("note: {n}");
    }
    Ok(EXIT_OK)
}

async fn matrix(args: args::MatrixArgs) -> Result<u8, Error> {
    let profile = args.profile.profile;
    let args = args.request();
    let cancel = CancellationToken::new();
    harness::signals::install(cancel.clone(), say)
        .map_err(|e| Error::infra(format!("installing signal handlers: {e}")))?;
    let exit = ExitStatus::new();
    let mut reporters = Reporters::new();
    reporters.add(exit.clone());
    let footer = format!(
        "JUnit: {} (per cell under {})",
        harness::matrix::run::aggregate_path(&args.out).display(),
        args.out.join("cells").display()
    );
    reporters.add(Terminal::new(Shape::Cells, vec![footer]).profile(profile));
    Ok(
        match harness::matrix::cli::matrix(args, cancel, &mut reporters).await? {
            harness::matrix::cli::Done::Text(text) => {
                print!("{text}");
                EXIT_OK
            }
            harness::matrix::cli::Done::Nothing => EXIT_OK,
            harness::matrix::cli::Done::Ran => exit.code(),
        },
    )
}

/// `--timeout-scale`: a factor that leaves every timeout a real duration
/// (0, a negative, NaN or infinity would give each test no time or
/// forever; the same bound as matrix.yaml's `timeout_scale:`).
fn timeout_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 100.0 => Ok(f),
        _ => Err(format!(
            "expected a factor in (0, 100], e.g. 2.5 (got {s:?})"
        )),
    }
}
