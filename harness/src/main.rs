//! `harness`: boot kernels under QEMU in NUMA topologies, run KTAP guest
//! tests, write JUnit. The only place that uses `anyhow` and maps errors to
//! exit codes.

use anyhow::Context;
use clap::{Parser, Subcommand};
use harness::cell::CellSpec;
use harness::guestbin::GuestBins;
use harness::host::{self, AccelChoice};
use harness::kernelspec::KernelSpec;
use harness::suite::{self, SuiteTest};
use harness::topology::Topology;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Exit status when every result is as expected.
const EXIT_OK: u8 = 0;
/// Exit status when a test failed (or the VM died under a test).
const EXIT_TESTS_FAILED: u8 = 1;
/// Exit status for bad command lines and bad input files.
const EXIT_USAGE: u8 = 2;
/// Exit status when the infrastructure failed (QEMU missing, download failed, ...).
const EXIT_INFRA: u8 = 69;
/// Exit status after SIGINT/SIGTERM.
const EXIT_INTERRUPTED: u8 = 130;

#[derive(Parser)]
#[command(
    name = "harness",
    version,
    about = "Boot Linux kernels in QEMU NUMA topologies and run futex tests, reporting JUnit"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Boot one kernel in one topology and run a suite.
    Run(RunArgs),
    /// Kernels built from source (`kernels/<name>.yaml`).
    #[command(subcommand)]
    Kernel(KernelCmd),
}

#[derive(Subcommand)]
enum KernelCmd {
    /// List the definitions and their cached images (no network).
    List,
    /// Build definitions (a cache hit when nothing changed); prints each bzImage.
    Build {
        /// Definition names (`kernels/<name>.yaml`); default: all.
        names: Vec<String>,
        /// make -j (default: the number of CPUs).
        #[arg(long)]
        jobs: Option<usize>,
        /// Do not use ccache even when it is installed.
        #[arg(long)]
        no_ccache: bool,
        /// Debian mirror for `debian:` bases (default: $HARNESS_DEBIAN_MIRROR, else apt's).
        #[arg(long, value_name = "URL")]
        debian_mirror: Option<String>,
    },
    /// Print the cached bzImage of a definition's current inputs (exit 1 if not built).
    Path {
        /// Definition name.
        name: String,
        /// Debian mirror for `debian:` bases.
        #[arg(long, value_name = "URL")]
        debian_mirror: Option<String>,
    },
    /// Remove work trees (source checkout + objects); with --images also cached images.
    Clean {
        /// Definition names.
        names: Vec<String>,
        /// Every definition that has something in the cache.
        #[arg(long)]
        all: bool,
        /// Remove the cached images too.
        #[arg(long)]
        images: bool,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Kernel: `debian:<version>` (Debian's prebuilt cloud kernel) or `path:<bzImage>`.
    #[arg(long)]
    kernel: String,
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
    /// JUnit XML output (default: <out>/junit.xml).
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Directory for console logs, raw KTAP and QEMU's argv.
    #[arg(long, default_value = "harness-out")]
    out: PathBuf,
    /// Accelerator: auto uses KVM only where hardware KVM really works.
    #[arg(long, value_enum, default_value_t = AccelChoice::Auto)]
    accel: AccelChoice,
    /// Whole-VM watchdog in seconds (default: boot allowance + test timeouts).
    #[arg(long)]
    timeout: Option<u64>,
    /// Multiply every in-guest timeout by this factor.
    #[arg(long, default_value_t = 1.0)]
    timeout_scale: f64,
    /// Extra kernel command line words.
    #[arg(long, allow_hyphen_values = true)]
    append: Option<String>,
    /// Expected kernel features for the futex suites (`numa=1,private_hash=0,...`);
    /// default: from the kernel version's row of the ABI table.
    #[arg(long)]
    expect: Option<String>,
    /// Skip the topology check.
    #[arg(long)]
    no_topology_check: bool,
    /// Debian mirror for `debian:` kernels (default: $HARNESS_DEBIAN_MIRROR,
    /// else the machine's apt configuration).
    #[arg(long, value_name = "URL")]
    debian_mirror: Option<String>,
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HARNESS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("harness: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_INFRA);
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Run(args) => run(args).await,
            Command::Kernel(cmd) => tokio::task::spawn_blocking(move || kernel_cmd(cmd))
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| r),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("harness: error: {e:#}");
            ExitCode::from(exit_code_for(&e))
        }
    }
}

/// Usage errors (bad specs, unknown suites) vs infrastructure errors.
fn exit_code_for(e: &anyhow::Error) -> u8 {
    let usage = e.chain().any(|c| {
        c.is::<harness::topology::TopologyError>()
            || c.is::<harness::kernelspec::KernelSpecError>()
            || c.is::<harness::kernel::definition::DefinitionError>()
            || matches!(
                c.downcast_ref::<harness::suite::SuiteError>(),
                Some(
                    harness::suite::SuiteError::Unknown { .. }
                        | harness::suite::SuiteError::BadName { .. }
                )
            )
    });
    if usage {
        EXIT_USAGE
    } else {
        EXIT_INFRA
    }
}

async fn run(args: RunArgs) -> anyhow::Result<u8> {
    let topology = Topology::parse_spec(&args.topology)?;
    let kernel = KernelSpec::parse(&args.kernel)?;
    let expect = match &kernel {
        KernelSpec::Source(name) => Some(source_expect(name, args.expect.as_deref())?),
        _ => args.expect.clone().or_else(|| {
            kernel
                .version()
                .map(|v| guest_tests::expect::Expect::for_release(v).encode())
        }),
    };
    let mut tests: Vec<SuiteTest> = Vec::new();
    if !args.no_topology_check {
        tests.push(suite::topology_check(&topology));
    }
    tests.extend(suite::builtin(&args.suite, expect.as_deref())?);
    for p in &args.guest_bins {
        tests.push(suite::user_binary(
            p.clone(),
            Duration::from_secs(args.guest_bin_timeout),
        )?);
    }

    let qemu = host::find_qemu()?;
    let (accel, note) = host::choose_accel(args.accel, &host::probe_kvm())?;
    if let Some(n) = note {
        eprintln!("harness: {n}");
    }
    eprintln!("harness: building guest binaries");
    let bins = tokio::task::spawn_blocking(GuestBins::locate_or_build).await??;
    let image = resolve_kernel(&kernel, args.debian_mirror.clone()).await?;

    let cancel = CancellationToken::new();
    harness::signals::install(cancel.clone()).context("installing signal handlers")?;
    let name = format!("{}/{}/{}", sanitize(&args.kernel), topology, args.suite);
    let spec = CellSpec {
        out_dir: args.out.join(name.replace('/', "_")),
        name,
        kernel_label: args.kernel.clone(),
        kernel_image: image,
        topology_label: args.topology.clone(),
        topology,
        suite_label: args.suite.clone(),
        tests,
        accel,
        cmdline_extra: args
            .append
            .as_deref()
            .map(|a| a.split_whitespace().map(String::from).collect())
            .unwrap_or_default(),
        watchdog: args.timeout.map(Duration::from_secs),
        timeout_scale: args.timeout_scale,
    };
    eprintln!(
        "harness: booting {} under {} ({})",
        spec.name,
        accel.name(),
        qemu.version
    );
    let cell = harness::cell::run(&spec, &qemu, &bins, &cancel).await?;
    let junit_path = args
        .junit
        .clone()
        .unwrap_or_else(|| spec.out_dir.join("junit.xml"));
    let report = harness::junit::report("harness run", std::slice::from_ref(&cell));
    harness::junit::write_atomic(&report, &junit_path)?;

    let cases = harness::verdict::cases(&cell);
    let counts = harness::verdict::counts(&cases);
    for c in &cases {
        match &c.status {
            harness::verdict::CaseStatus::Pass => println!("PASS {}", c.name),
            harness::verdict::CaseStatus::Skip(r) => println!("SKIP {} ({r})", c.name),
            harness::verdict::CaseStatus::Fail { message, .. } => {
                println!("FAIL {}: {message}", c.name)
            }
        }
    }
    println!(
        "{}: {} in {:.1} s under {}; console log {}",
        cell.name,
        harness::verdict::describe(&cell.end),
        cell.duration.as_secs_f64(),
        cell.accel,
        spec.out_dir.join("console.log").display()
    );
    println!("JUnit: {}", junit_path.display());
    println!(
        "{} passed, {} failed, {} skipped",
        counts.pass, counts.fail, counts.skip
    );
    if cancel.is_cancelled() {
        return Ok(EXIT_INTERRUPTED);
    }
    Ok(if counts.fail == 0 && !cases.is_empty() {
        EXIT_OK
    } else {
        EXIT_TESTS_FAILED
    })
}

/// A cell name component: no `/`, no spaces.
fn sanitize(s: &str) -> String {
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

/// A bootable image for the spec: a local file, or Debian's package
/// (fetched, verified and cached; a progress bar while downloading).
async fn resolve_kernel(k: &KernelSpec, mirror: Option<String>) -> anyhow::Result<PathBuf> {
    let version = match k {
        KernelSpec::Path(p) => return Ok(p.clone()),
        KernelSpec::Debian(v) => v.clone(),
        KernelSpec::Source(name) => {
            let name = name.clone();
            return tokio::task::spawn_blocking(move || build_source(&name, mirror, false)).await?;
        }
    };
    tokio::task::spawn_blocking(move || -> anyhow::Result<PathBuf> {
        use harness::kernel::{cache::Cache, debian::DebianMirror};
        let cache = Cache::from_env()?;
        let mirror = DebianMirror::discover(mirror.as_deref())?;
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} {bytes}/{total_bytes} {wide_bar} {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let image = mirror.fetch_with_progress(&version, &cache, &mut |p| {
            bar.set_message(p.what.to_string());
            if let Some(t) = p.total {
                bar.set_length(t);
            }
            bar.set_position(p.done);
        })?;
        bar.finish_and_clear();
        eprintln!(
            "harness: kernel {} ({}, {}) at {}",
            image.abi,
            image.package,
            image.suite,
            image.path.display()
        );
        Ok(image.path)
    })
    .await?
}

/// Expectations for a `source:` kernel: the defaults of the definition's
/// `version`, its `expect:` line, then `--expect` over both.
fn source_expect(name: &str, user: Option<&str>) -> anyhow::Result<String> {
    use guest_tests::expect::Expect;
    use harness::kernel::definition;
    let def = definition::load(&definition::kernels_dir()?, name)?;
    let mut e = def
        .version
        .as_deref()
        .map(Expect::for_release)
        .unwrap_or_else(Expect::for_running_kernel)
        .encode();
    for extra in [def.expect.as_deref(), user].into_iter().flatten() {
        e = Expect::parse(&format!("{e},{extra}"))
            .map_err(|m| anyhow::anyhow!("expectations for source:{name}: {m}"))?
            .encode();
    }
    Ok(e)
}

fn debian_mirror_fn(
    mirror: Option<String>,
) -> impl Fn() -> Result<harness::kernel::debian::DebianMirror, harness::kernel::debian::DebianError>
{
    move || harness::kernel::debian::DebianMirror::discover(mirror.as_deref())
}

/// Builds (or finds in the cache) the definition `name`; returns its bzImage.
fn build_source(name: &str, mirror: Option<String>, no_ccache: bool) -> anyhow::Result<PathBuf> {
    use harness::kernel::{build, cache::Cache, definition};
    let def = definition::load(&definition::kernels_dir()?, name)?;
    let cache = Cache::from_env()?;
    let mut opts = build::BuildOptions::default();
    if no_ccache {
        opts.ccache = false;
    }
    let built = build::build(&def, &cache, &opts, &debian_mirror_fn(mirror), &|m| {
        eprintln!("harness: {m}")
    })?;
    let image = built
        .image
        .ok_or_else(|| anyhow::anyhow!("kernel {name}: no image"))?;
    eprintln!(
        "harness: kernel source:{name} {} {} in {:.2} s: {}",
        built.key,
        if built.cache_hit {
            "cache hit"
        } else {
            "built"
        },
        built.elapsed.as_secs_f64(),
        image.display()
    );
    Ok(image)
}

fn kernel_cmd(cmd: KernelCmd) -> anyhow::Result<u8> {
    use harness::kernel::{build, cache::Cache, definition};
    let dir = definition::kernels_dir()?;
    let cache = Cache::from_env()?;
    match cmd {
        KernelCmd::List => {
            for name in definition::list(&dir)? {
                match definition::load(&dir, &name) {
                    Ok(def) => {
                        let base = match &def.base {
                            definition::BaseSpec::Debian { package } => format!("debian {package}"),
                            definition::BaseSpec::Local { path } => {
                                format!("tree {}", path.display())
                            }
                            definition::BaseSpec::Git { url, rev } => format!("git {url} {rev}"),
                        };
                        println!("{name}: {}", def.description);
                        println!(
                            "    base {base}; {} patch(es); {} + {}; {} required option(s)",
                            def.patches.len(),
                            def.config_base.target(),
                            def.fragments
                                .iter()
                                .map(|f| f.name.as_str())
                                .collect::<Vec<_>>()
                                .join(" + "),
                            def.require.len()
                        );
                        for (key, img, _) in build::cached_images(&cache, &name) {
                            println!("    built {key}: {}", img.display());
                        }
                    }
                    Err(e) => println!("{name}: INVALID: {e}"),
                }
            }
            Ok(EXIT_OK)
        }
        KernelCmd::Build {
            names,
            jobs,
            no_ccache,
            debian_mirror,
        } => {
            let names = if names.is_empty() {
                definition::list(&dir)?
            } else {
                names
            };
            for name in names {
                let def = definition::load(&dir, &name)?;
                let mut opts = build::BuildOptions::default();
                if let Some(j) = jobs {
                    opts.jobs = j.max(1);
                }
                if no_ccache {
                    opts.ccache = false;
                }
                let built = build::build(
                    &def,
                    &cache,
                    &opts,
                    &debian_mirror_fn(debian_mirror.clone()),
                    &|m| eprintln!("harness: {m}"),
                )?;
                let image = built
                    .image
                    .ok_or_else(|| anyhow::anyhow!("kernel {name}: no image"))?;
                eprintln!(
                    "harness: {name} {} {} in {:.2} s",
                    built.key,
                    if built.cache_hit {
                        "cache hit"
                    } else {
                        "built"
                    },
                    built.elapsed.as_secs_f64()
                );
                println!("{}", image.display());
            }
            Ok(EXIT_OK)
        }
        KernelCmd::Path {
            name,
            debian_mirror,
        } => {
            let def = definition::load(&dir, &name)?;
            let opts = build::BuildOptions {
                no_build: true,
                ..Default::default()
            };
            let built = build::build(
                &def,
                &cache,
                &opts,
                &debian_mirror_fn(debian_mirror),
                &|m| eprintln!("harness: {m}"),
            )?;
            match built.image {
                Some(p) => {
                    println!("{}", p.display());
                    Ok(EXIT_OK)
                }
                None => {
                    eprintln!(
                        "harness: {name} (key {}) is not built: run `harness kernel build {name}`",
                        built.key
                    );
                    Ok(EXIT_TESTS_FAILED)
                }
            }
        }
        KernelCmd::Clean { names, all, images } => {
            let names = if all {
                let mut v: Vec<String> = ["kbuild/work", "kbuild/images"]
                    .iter()
                    .flat_map(|d| std::fs::read_dir(cache.path(d)).into_iter().flatten())
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| definition::valid_name(n))
                    .collect();
                v.sort();
                v.dedup();
                v
            } else if names.is_empty() {
                anyhow::bail!("kernel clean: name definitions or give --all");
            } else {
                names
            };
            for name in names {
                if !definition::valid_name(&name) {
                    return Err(definition::DefinitionError::BadName(name).into());
                }
                for p in build::clean(&cache, &name, images)? {
                    println!("removed {}", p.display());
                }
            }
            Ok(EXIT_OK)
        }
    }
}
