//! `harness`: boot kernels under QEMU in NUMA topologies, run KTAP guest
//! tests, write JUnit. The edge: the command line, the terminal reporter
//! (`terminal.rs`), `anyhow`, and the one mapping of errors to exit codes.

mod args;
mod doctor;
mod help;
mod terminal;
mod tools;

use anyhow::Context;
use clap::{Parser, Subcommand};
use harness::error::Error;
use harness::host::{self, AccelChoice};
use harness::reporter::exit::ExitStatus;
use harness::reporter::json::Json;
use harness::reporter::Reporters;
use std::path::PathBuf;
use std::process::ExitCode;
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
    Run(Box<harness::run::RunArgs>),
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
    Matrix(harness::matrix::args::MatrixArgs),
    /// JUnit report tools.
    #[command(subcommand)]
    Junit(JunitCommand),
    /// The kernel's own futex selftests: build them (cached) or compare
    /// their verdicts with ours.
    #[command(subcommand)]
    Kselftest(tools::KselftestCommand),
    /// Benchmark futex configurations across kernels and topologies (see docs/bench.md).
    Bench(harness::bench::BenchArgs),
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
    Merge(harness::matrix::args::MergeArgs),
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
            Command::Junit(JunitCommand::Merge(args)) => harness::matrix::cli::merge(args)
                .map(|said| {
                    println!("{said}");
                    EXIT_OK
                })
                .map_err(anyhow::Error::from),
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
                match harness::bench::run(args, &mut reporters, say).await {
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

/// `harness run`: the terminal and the exit status, then the library's door.
async fn run(args: harness::run::RunArgs) -> Result<u8, Error> {
    let exit = ExitStatus::new();
    let mut reporters = Reporters::new();
    reporters.add(exit.clone());
    let footer = args.junit_path().map(|p| format!("JUnit: {}", p.display()));
    reporters.add(
        Terminal::new(Shape::Cases, footer.into_iter().collect())
            .live(args.debug.live)
            .profile(args.profile.profile),
    );
    let door = harness::run::Door {
        say,
        download_progress: Some(download_bar),
    };
    Ok(match harness::run::run(args, &mut reporters, door).await? {
        harness::run::Done::Text(text) => {
            print!("{text}");
            EXIT_OK
        }
        harness::run::Done::Ran => exit.code(),
    })
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

async fn matrix(args: harness::matrix::args::MatrixArgs) -> Result<u8, Error> {
    let profile = args.profile.profile;
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
