//! `harness doctor` and `harness setup` on the terminal: the table of what
//! this host has, setup's plan and its steps, and the hint a failed run
//! gets when something every run needs is missing.

use harness::doctor::{self, Need, Probe, Row, Status};
use harness::error::Error;
use harness::kernel::archive::apt;
use harness::setup::{self, Privilege};
use std::io::{BufRead, IsTerminal, Write};

/// The run `harness doctor`'s exit status is about.
const DEFAULT_RUN: &str = "harness run --kernel debian:7.3.4 --suite smoke";

/// `harness doctor`'s arguments.
#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Install what is missing: the same as `harness setup`.
    #[arg(long)]
    fix: bool,
    /// Do not ask the Debian mirror whether it answers.
    #[arg(long)]
    offline: bool,
    #[command(flatten)]
    setup: SetupArgs,
}

/// `harness setup`'s arguments.
#[derive(clap::Args)]
pub struct SetupArgs {
    /// Run the steps without asking (for CI and scripts).
    #[arg(long, short = 'y')]
    yes: bool,
    /// Print the steps; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also install what guests of this architecture need (`arm64`: QEMU's
    /// aarch64 emulator, its firmware, the cross toolchain the harness'
    /// build embeds the arm64 guest binaries with). Repeatable.
    #[arg(long = "arch", value_name = "ARCH", value_parser = harness::args::arch_parser())]
    arch: Vec<harness::arch::Arch>,
}

/// `harness doctor`: the table; exit 0 when the default run can work, 1
/// when something it needs is missing.
pub fn doctor(args: DoctorArgs) -> anyhow::Result<u8> {
    if args.fix {
        return setup(args.setup);
    }
    let mut probe = Probe::host();
    if args.offline {
        probe = probe.offline();
    }
    let rows = doctor::rows(&doctor::probe(&probe));
    print!("{}", table(&rows));
    let blocking = doctor::missing_for_default_run(&rows);
    let missing = |keep: fn(Need) -> bool| -> Vec<&str> {
        rows.iter()
            .filter(|r| r.status == Status::Missing && keep(r.need))
            .map(|r| r.what.as_str())
            .collect()
    };
    let other = missing(|n| !matches!(n, Need::DefaultRun | Need::Optional));
    let optional = missing(|n| n == Need::Optional);
    println!();
    if !other.is_empty() {
        println!(
            "missing, not needed by `{DEFAULT_RUN}`: {}",
            other.join(", ")
        );
    }
    if !optional.is_empty() {
        println!("optional, not installed: {}", optional.join(", "));
    }
    if blocking.is_empty() {
        println!("everything `{DEFAULT_RUN}` needs is here");
        return Ok(super::EXIT_OK);
    }
    let names: Vec<&str> = blocking.iter().map(|r| r.what.as_str()).collect();
    println!("`{DEFAULT_RUN}` cannot work: missing {}", names.join(", "));
    if blocking.iter().any(|r| r.by_setup) {
        println!("`harness setup` installs what is marked (setup)");
    }
    Ok(super::EXIT_NOT_READY)
}

/// The rows, aligned; a row's fix on the line below it.
fn table(rows: &[Row]) -> String {
    let w_what = rows.iter().map(|r| r.what.len()).max().unwrap_or(0);
    let w_need = rows
        .iter()
        .map(|r| r.need.label().len())
        .chain(["NEEDED FOR".len()])
        .max()
        .unwrap_or(0);
    let indent = 8 + w_what + 2 + w_need + 2;
    let mut out = format!(
        "{:<8}{:<w_what$}  {:<w_need$}  FOUND\n",
        "STATUS", "WHAT", "NEEDED FOR"
    );
    for r in rows {
        out += &format!(
            "{:<8}{:<w_what$}  {:<w_need$}  {}\n",
            r.status.name(),
            r.what,
            r.need.label(),
            r.found
        );
        if let Some(fix) = &r.fix {
            let by = if r.by_setup { " (setup)" } else { "" };
            out += &format!("{:indent$}fix{by}: {fix}\n", "");
        }
    }
    out
}

/// `harness setup`: the plan, then (with `--yes`, or when confirmed on a
/// terminal) its steps; exit 0 when nothing it installs is left missing.
pub fn setup(args: SetupArgs) -> anyhow::Result<u8> {
    let facts = doctor::probe(&Probe::host().offline());
    let sources: Vec<_> = apt::apt_source_files(std::path::Path::new("/"))
        .iter()
        .flat_map(|f| apt::read_sources_file(f))
        .collect();
    let mut arches = vec![harness::arch::Arch::X86_64];
    arches.extend(&args.arch);
    let plan = setup::plan_for(&facts, &sources, &arches).map_err(Error::infra)?;
    for n in &plan.notes {
        println!("harness setup: note: {n}");
    }
    if plan.steps.is_empty() {
        println!("harness setup: nothing to do: everything it installs is here");
        return Ok(super::EXIT_OK);
    }
    println!("harness setup: {} step(s):", plan.steps.len());
    for (s, line) in plan.steps.iter().zip(plan.shell_lines()) {
        println!("  # {}\n  {line}", s.why);
    }
    if plan.privilege == Privilege::Unavailable {
        println!("harness setup: not root and no sudo: the apt steps must run as root");
    }
    if args.dry_run {
        return Ok(super::EXIT_OK);
    }
    if !args.yes && !confirm()? {
        println!("harness setup: nothing done");
        return Ok(super::EXIT_OK);
    }
    setup::execute(&plan, &mut |l| println!("harness setup: {l}")).map_err(Error::infra)?;
    let rows = doctor::rows(&doctor::probe(&Probe::host().offline()));
    let arm64 = arches.contains(&harness::arch::Arch::Arm64);
    // The arm64 rows count when asked for, but for the binaries: setup
    // cannot rebuild the harness (its plan's note says so).
    let installed_here = |r: &Row| {
        r.by_setup || (arm64 && r.need == Need::Arm64Guests && r.what != "arm64 guest binaries")
    };
    let left: Vec<String> = rows
        .iter()
        .filter(|r| r.status == Status::Missing && installed_here(r))
        .map(|r| format!("{} ({})", r.what, r.found))
        .collect();
    if left.is_empty() {
        println!("harness setup: done");
        Ok(super::EXIT_OK)
    } else {
        println!("harness setup: still missing: {}", left.join("; "));
        Ok(super::EXIT_NOT_READY)
    }
}

/// Asks on the terminal; without one, refuses (setup changes the system).
fn confirm() -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(
            Error::usage("not a terminal: pass --yes to run these steps (or --dry-run)").into(),
        );
    }
    print!("run them? [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// A failed `run` or `matrix` whose cause may be a missing tool: when
/// something every run needs is missing here, the error says what and how
/// to install it.
pub fn with_setup_hint(e: anyhow::Error) -> anyhow::Error {
    if super::exit_code_for(&e) != super::EXIT_INFRA {
        return e;
    }
    let rows = doctor::rows(&doctor::probe(&Probe::host().offline()));
    let missing = doctor::missing_for_default_run(&rows);
    if missing.is_empty() {
        return e;
    }
    let what: Vec<String> = missing
        .iter()
        .map(|r| match (&r.fix, r.by_setup) {
            (_, true) => format!("{}: {} (`harness setup` installs it)", r.what, r.found),
            (Some(fix), false) => format!("{}: {} (fix: {fix})", r.what, r.found),
            (None, false) => format!("{}: {}", r.what, r.found),
        })
        .collect();
    e.context(format!("missing on this host: {}", what.join("; ")))
}
