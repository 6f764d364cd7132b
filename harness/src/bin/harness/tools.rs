//! The cache tools of the binary: `harness kernel` (kernel definitions
//! and their cached images) and `harness kselftest` (the upstream
//! selftests: build, compare).

use clap::Subcommand;
use std::path::PathBuf;

use crate::{say, EXIT_NOT_READY, EXIT_OK};
use harness::error::Error;

#[derive(Subcommand)]
pub enum KselftestCommand {
    /// Build (or find in the cache) the upstream futex selftests of a tree.
    Build {
        /// `debian:X.Y` (Debian's linux-source-X.Y) or a pristine kernel tree.
        #[arg(long, default_value = "debian:7.3")]
        tree: String,
        /// Rebuild even when cached.
        #[arg(long)]
        rebuild: bool,
        /// Debian mirror (default: $HARNESS_DEBIAN_MIRROR, else apt's).
        #[arg(long, value_name = "URL")]
        debian_mirror: Option<String>,
    },
    /// Upstream verdicts next to ours, per kernel, from JUnit reports.
    Compare {
        /// JUnit files holding kselftest-futex and futex cells.
        #[arg(required = true)]
        junit: Vec<PathBuf>,
        /// Write the Markdown report here (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub enum KernelCmd {
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
        /// The guest architecture built for (default: the host's); arm64
        /// is cross-compiled with aarch64-linux-gnu-gcc.
        #[arg(long, value_parser = harness::args::arch_parser(), default_value_t = harness::arch::Arch::host_or_default())]
        arch: harness::arch::Arch,
        /// Debian mirror for `debian:` bases (default: $HARNESS_DEBIAN_MIRROR, else apt's).
        #[arg(long, value_name = "URL")]
        debian_mirror: Option<String>,
    },
    /// Print the cached bzImage of a definition's current inputs (exit 3 if not built).
    Path {
        /// Definition name.
        name: String,
        /// The guest architecture (default: the host's).
        #[arg(long, value_parser = harness::args::arch_parser(), default_value_t = harness::arch::Arch::host_or_default())]
        arch: harness::arch::Arch,
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

pub async fn kselftest(c: KselftestCommand) -> anyhow::Result<u8> {
    match c {
        KselftestCommand::Build {
            tree,
            rebuild,
            debian_mirror,
        } => {
            let spec = harness::kselftest::SourceSpec::parse(&tree)?;
            let opts = harness::kselftest::Options {
                mirror: debian_mirror,
                rebuild,
                jobs: 0,
            };
            let build = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
                let cache = harness::kernel::cache::Cache::from_env()?;
                Ok(harness::kselftest::prepare(&spec, &cache, &opts, &say)?)
            })
            .await??;
            let m = &build.manifest;
            println!("dir: {}", build.dir.display());
            println!("cached: {}", build.cached);
            println!("source: {}", m.source);
            println!("gcc: {}", m.gcc);
            println!("libnuma: {}", m.libnuma.as_deref().unwrap_or("none"));
            println!("build: {:.1} s", m.build_seconds);
            for p in &m.programs {
                println!("run: {} {}", p.name, p.args.join(" "));
            }
            for (n, why) in &m.not_run {
                println!("not run: {n}: {why}");
            }
            Ok(EXIT_OK)
        }
        KselftestCommand::Compare { junit, out } => {
            // The files are the user's input: unreadable or not JUnit is 2.
            let mut xml = Vec::new();
            for p in &junit {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| Error::usage(format!("{}: {e}", p.display())))?;
                xml.push((p.clone(), text));
            }
            let report = harness::kselftest::compare_junit(&xml).map_err(Error::usage)?;
            match out {
                Some(p) => {
                    harness::reporter::write_atomic(&p, report.as_bytes()).map_err(Error::infra)?
                }
                None => print!("{report}"),
            }
            Ok(EXIT_OK)
        }
    }
}

fn debian_mirror_fn(
    mirror: Option<String>,
) -> impl Fn() -> Result<harness::kernel::debian::DebianMirror, harness::kernel::debian::DebianError>
{
    move || harness::kernel::debian::DebianMirror::discover(mirror.as_deref())
}

/// Every definition a `kernel` command names exists (a typo is the user's,
/// 2, and nothing is unpacked into the cache for it).
fn check_names(cmd: &KernelCmd) -> Result<(), Error> {
    use harness::kernel::definition;
    let names: &[String] = match cmd {
        KernelCmd::List => &[],
        KernelCmd::Build { names, .. } => names,
        KernelCmd::Path { name, .. } => std::slice::from_ref(name),
        KernelCmd::Clean { names, all, .. } => {
            if names.is_empty() && !all {
                return Err(Error::usage(
                    "kernel clean: name the definitions to clean, or give --all",
                ));
            }
            if *all && !names.is_empty() {
                return Err(Error::usage("kernel clean: names and --all together"));
            }
            names
        }
    };
    let cached = |name: &str| -> bool {
        let Ok(cache) = harness::kernel::cache::Cache::from_env() else {
            return false;
        };
        ["kbuild/work", "kbuild/images"]
            .iter()
            .any(|d| cache.path(d).join(name).exists())
    };
    for name in names {
        match definition::check_known(name) {
            Ok(()) => {}
            // A definition since removed can still have a build to clean.
            Err(_)
                if matches!(cmd, KernelCmd::Clean { .. })
                    && definition::valid_name(name)
                    && cached(name) => {}
            Err(e) => return Err(Error::usage(e)),
        }
    }
    Ok(())
}

pub fn kernel_cmd(cmd: KernelCmd) -> anyhow::Result<u8> {
    use harness::kernel::{build, cache::Cache, definition};
    check_names(&cmd)?;
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
                        for arch in harness::arch::ALL {
                            for (key, img, _) in build::cached_images_for(&cache, &name, arch) {
                                println!("    built {key} ({arch}): {}", img.display());
                            }
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
            arch,
            debian_mirror,
        } => {
            let names = if names.is_empty() {
                definition::list(&dir)?
            } else {
                names
            };
            for name in names {
                let def = definition::load(&dir, &name)?;
                let mut opts = build::BuildOptions {
                    arch,
                    ..Default::default()
                };
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
                    &say,
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
            arch,
            debian_mirror,
        } => {
            let def = definition::load(&dir, &name)?;
            let opts = build::BuildOptions {
                no_build: true,
                arch,
                ..Default::default()
            };
            let built = build::build(&def, &cache, &opts, &debian_mirror_fn(debian_mirror), &say)?;
            match built.image {
                Some(p) => {
                    println!("{}", p.display());
                    Ok(EXIT_OK)
                }
                None => {
                    eprintln!(
                        "harness: {name} (key {}) is not built: run `harness kernel build {name} --arch {arch}`",
                        built.key
                    );
                    Ok(EXIT_NOT_READY)
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
                    // `<name>@arm64`: the arm64 build of `<name>` (clean takes every arch's).
                    .map(|n| n.split('@').next().unwrap_or_default().to_string())
                    .filter(|n| definition::valid_name(n))
                    .collect();
                v.sort();
                v.dedup();
                v
            } else {
                names
            };
            for name in names {
                for p in build::clean(&cache, &name, images)? {
                    println!("removed {}", p.display());
                }
            }
            Ok(EXIT_OK)
        }
    }
}
