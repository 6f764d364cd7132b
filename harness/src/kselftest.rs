//! The kernel's own futex selftests (`tools/testing/selftests/futex/functional`),
//! built from a kernel source tree and run through the harness next to ours.
//!
//! * Source: Debian's `linux-source-X.Y` (fetched and verified through
//!   [`DebianMirror`], the tarball unpacked into a temporary directory, a few
//!   big directories the build never reads left out) or a local kernel tree
//!   (the one a source-built kernel uses; it must be pristine: `make O=`
//!   refuses trees configured in place).
//! * Build: with the tree's own Makefiles: `make O=<obj> headers`, then
//!   `make -C tools/testing/selftests/futex/functional OUTPUT=<out>
//!   KHDR_INCLUDES="-isystem <obj>/usr/include" CC="gcc -static"`. The MPOL
//!   part of `futex_numa_mpol` needs libnuma >= 2.0.18: a newer Debian
//!   suite's `libnuma-dev` .deb is fetched (verified like everything else from
//!   the archive) and unpacked for its static `libnuma.a`, never installed.
//! * Cache: `<cache>/kselftest/futex/<key>/` with the static binaries and a
//!   `manifest.json`; `key` hashes the source identity, the gcc version, the
//!   libnuma package and [`RECIPE`].
//! * Run: in the order and with the arguments of the tree's `run.sh`, then
//!   the other `TEST_GEN_PROGS` the kselftest runner would run (minus manual
//!   tools, see [`MANUAL_TOOLS`]). Each program prints KTAP (`TAP version
//!   13`) which guest-init nests as is.
//! * Compare: [`MAPPING`] says which of our cases check the behaviour an
//!   upstream case checks; [`compare`] puts both verdicts side by side.

use crate::kernel::apt::{self, PackageEntry};
use crate::kernel::cache::{sha256_hex, Cache, HashingReader};
use crate::kernel::debian::DebianMirror;
use crate::suite::{Binary, SuiteTest};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fs;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Bumped whenever the build recipe changes (part of the cache key).
pub const RECIPE: &str = "kselftest-futex-1";

/// The built-in suite that runs the upstream futex selftests.
pub const SUITE_FUTEX: &str = "kselftest-futex";

/// Where the futex functional selftests live in a kernel tree.
pub const FUTEX_DIR: &str = "tools/testing/selftests/futex/functional";

/// `TEST_GEN_PROGS` that are manual tools, not tests: built, never run.
pub const MANUAL_TOOLS: &[(&str, &str)] = &[(
    "futex_numa",
    "a manual stress/benchmark tool (getopt options, no KTAP), not in run.sh",
)];

/// libnuma version from which `futex_numa_mpol` tests FUTEX2_MPOL.
pub const LIBNUMA_MIN: &str = "2.0.18";

/// Debian suites searched for `libnuma-dev`, in order.
pub const LIBNUMA_SUITES: &[&str] = &["trixie", "sid"];

/// In-guest timeout of one upstream program (scaled by `--timeout-scale`).
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(300);

/// Errors preparing the upstream selftests.
#[derive(Debug, thiserror::Error)]
pub enum KselftestError {
    /// Bad `--kselftest-tree` value.
    #[error("kselftest source {given:?}: {why}")]
    BadSource {
        /// What was given.
        given: String,
        /// Why it does not work.
        why: String,
    },
    /// No source given and none derivable from the kernel.
    #[error("suite {suite} needs a kernel source tree: pass --kselftest-tree DIR or --kselftest-tree debian:X.Y (the kernel {kernel:?} names no version)")]
    NoSource {
        /// The suite.
        suite: String,
        /// The kernel spec.
        kernel: String,
    },
    /// Debian archive trouble.
    #[error(transparent)]
    Debian(#[from] crate::kernel::debian::DebianError),
    /// Cache trouble.
    #[error(transparent)]
    Cache(#[from] crate::kernel::cache::CacheError),
    /// A file operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// A download failed.
    #[error("downloading {url}: {why}")]
    Download {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// A build step failed.
    #[error("{step} failed ({status}); last output:\n{tail}\nfull log: {log}")]
    Build {
        /// The step.
        step: String,
        /// Its exit status.
        status: String,
        /// The end of its output.
        tail: String,
        /// The full log.
        log: PathBuf,
    },
    /// The build produced nothing runnable.
    #[error("the build of {dir} produced no test programs (log: {log})")]
    NoPrograms {
        /// The selftest directory.
        dir: PathBuf,
        /// The build log.
        log: PathBuf,
    },
    /// A built program is not static.
    #[error(transparent)]
    Bin(#[from] crate::guestbin::GuestBinError),
    /// Not a kselftest suite, and not a built-in one either.
    #[error(transparent)]
    Suite(#[from] crate::suite::SuiteError),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> KselftestError + 'a {
    move |source| KselftestError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Where the kernel source comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// Debian's `linux-source-<series>` package (`series` like `7.3`).
    Debian {
        /// `major.minor`.
        series: String,
    },
    /// A local, pristine kernel tree.
    Tree(PathBuf),
}

impl SourceSpec {
    /// `debian:7.3` (or `debian:7.3.4`: the package is per series), or a
    /// directory holding a kernel tree.
    pub fn parse(s: &str) -> Result<SourceSpec, KselftestError> {
        let bad = |why: &str| KselftestError::BadSource {
            given: s.to_string(),
            why: why.to_string(),
        };
        if let Some(v) = s.strip_prefix("debian:") {
            return Self::for_version(v).ok_or_else(|| bad("expected debian:MAJOR.MINOR"));
        }
        let p = PathBuf::from(s.strip_prefix("path:").unwrap_or(s));
        if !p.join(FUTEX_DIR).join("Makefile").is_file() || !p.join("Makefile").is_file() {
            return Err(bad(&format!(
                "not a kernel source tree (no Makefile or {FUTEX_DIR}/Makefile)"
            )));
        }
        Ok(SourceSpec::Tree(p))
    }

    /// Debian's source package for a kernel version (`7.3.4` -> `7.3`).
    pub fn for_version(v: &str) -> Option<SourceSpec> {
        let mut it = v.split('.');
        let (maj, min) = (it.next()?, it.next()?);
        let num = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
        (num(maj) && num(min)).then(|| SourceSpec::Debian {
            series: format!("{maj}.{min}"),
        })
    }
}

/// One upstream program to run, with the arguments run.sh gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// Program (and KTAP test) name, e.g. `futex_wait`.
    pub name: String,
    /// Arguments.
    pub args: Vec<String>,
}

/// What a cached build holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`RECIPE`].
    pub recipe: String,
    /// What the source was (package file name, or tree path and content hash).
    pub source: String,
    /// `gcc --version`, first line.
    pub gcc: String,
    /// The libnuma-dev package used, if any.
    pub libnuma: Option<String>,
    /// Programs in run order.
    pub programs: Vec<Program>,
    /// Programs built but not run, and why.
    pub not_run: Vec<(String, String)>,
    /// Seconds the build took.
    pub build_seconds: f64,
}

/// A ready build: binaries in `dir`, described by `manifest`.
#[derive(Debug, Clone)]
pub struct Build {
    /// Directory of the static binaries.
    pub dir: PathBuf,
    /// What was built.
    pub manifest: Manifest,
    /// Whether it came from the cache.
    pub cached: bool,
}

impl Build {
    /// The suite's tests: one per program, with run.sh's arguments.
    pub fn tests(&self) -> Vec<SuiteTest> {
        self.manifest
            .programs
            .iter()
            .map(|p| SuiteTest {
                name: p.name.clone(),
                binary: Binary::External {
                    file: format!("ksft-{}", p.name),
                    path: self.dir.join(&p.name),
                },
                args: p.args.clone(),
                timeout: PROGRAM_TIMEOUT,
            })
            .collect()
    }
}

/// Options of [`prepare`].
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Debian mirror override (as `--debian-mirror`).
    pub mirror: Option<String>,
    /// Rebuild even when cached.
    pub rebuild: bool,
    /// `make -j`; 0: the number of CPUs.
    pub jobs: usize,
}

/// Is `suite` one of the suites of this module?
pub fn is_kselftest_suite(suite: &str) -> bool {
    suite == SUITE_FUTEX
}

/// Resolves any suite: the kselftest ones are built (or taken from the
/// cache) from `source`, or from Debian's source of `kernel_version`; the
/// others are [`crate::suite::builtin`].
pub fn resolve_suite(
    suite: &str,
    expect: Option<&str>,
    source: Option<&str>,
    kernel_version: Option<&str>,
    opts: &Options,
) -> Result<Vec<SuiteTest>, KselftestError> {
    if !is_kselftest_suite(suite) {
        return Ok(crate::suite::builtin(suite, expect)?);
    }
    let spec = source_spec(suite, source, kernel_version)?;
    let cache = Cache::from_env()?;
    Ok(prepare(&spec, &cache, opts)?.tests())
}

/// The source of a kselftest suite: `source` (`--kselftest-tree`) if
/// given, else Debian's `linux-source` of the kernel's series.
pub fn source_spec(
    suite: &str,
    source: Option<&str>,
    kernel_version: Option<&str>,
) -> Result<SourceSpec, KselftestError> {
    match (source, kernel_version) {
        (Some(s), _) => SourceSpec::parse(s),
        (None, v) => v
            .and_then(SourceSpec::for_version)
            .ok_or_else(|| KselftestError::NoSource {
                suite: suite.into(),
                kernel: v.unwrap_or_default().into(),
            }),
    }
}

/// The build for `spec`, from the cache or built now.
pub fn prepare(spec: &SourceSpec, cache: &Cache, opts: &Options) -> Result<Build, KselftestError> {
    let gcc = gcc_version()?;
    let mirror = || DebianMirror::discover(opts.mirror.as_deref());
    // The source identity first: cheap for Debian (the .deb is cached).
    let (identity, deb) = match spec {
        SourceSpec::Debian { series } => {
            let deb = mirror()?.fetch_package(&format!("linux-source-{series}"), cache)?;
            let name = deb
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (format!("debian {name}"), Some(deb))
        }
        SourceSpec::Tree(dir) => (format!("tree {} {}", dir.display(), tree_hash(dir)?), None),
    };
    let numa = match mirror()
        .map_err(KselftestError::from)
        .and_then(|m| fetch_libnuma(&m, cache))
    {
        Ok(n) => Some(n),
        Err(e) => {
            eprintln!(
                "harness: warning: no libnuma >= {LIBNUMA_MIN} ({e}); \
                 futex_numa_mpol will skip its MPOL part"
            );
            None
        }
    };
    let key_text = format!(
        "{RECIPE}\n{identity}\n{gcc}\n{}",
        numa.as_ref().map(|n| n.package.as_str()).unwrap_or("-")
    );
    let key = &sha256_hex(key_text.as_bytes())[..16];
    let rel = format!("kselftest/futex/{key}");
    let dir = cache.checked_path(&rel)?;
    let _lock = cache.lock(&format!("kselftest-futex-{key}"))?;
    let manifest_path = dir.join("manifest.json");
    if !opts.rebuild {
        if let Ok(bytes) = fs::read(&manifest_path) {
            if let Ok(manifest) = serde_json::from_slice::<Manifest>(&bytes) {
                return Ok(Build {
                    dir,
                    manifest,
                    cached: true,
                });
            }
        }
    }
    let started = Instant::now();
    let parent = dir.parent().unwrap_or(cache.root()).to_path_buf();
    fs::create_dir_all(&parent).map_err(io_err("create", &parent))?;
    let work = tempfile::Builder::new()
        .prefix("kselftest-build-")
        .tempdir()
        .map_err(io_err(
            "create a temporary directory in",
            &std::env::temp_dir(),
        ))?;
    let root = match (spec, &deb) {
        (SourceSpec::Debian { series }, Some(deb)) => {
            eprintln!("harness: unpacking linux-source-{series}");
            unpack_debian_source(deb, series, work.path())?
        }
        (SourceSpec::Tree(dir), _) => {
            if dir.join(".config").exists() || dir.join("include/config").exists() {
                return Err(KselftestError::BadSource {
                    given: dir.display().to_string(),
                    why: "the tree is configured in place; `make O=` needs a pristine tree (make mrproper)".into(),
                });
            }
            dir.clone()
        }
        _ => unreachable!("Debian sources always have a .deb"),
    };
    eprintln!("harness: building the upstream futex selftests");
    let staged = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempdir_in(&parent)
        .map_err(io_err("create a temporary directory in", &parent))?;
    let log = cache.checked_path(format!("kselftest/logs/futex-{key}.log"))?;
    if let Some(d) = log.parent() {
        fs::create_dir_all(d).map_err(io_err("create", d))?;
    }
    let _ = fs::remove_file(&log);
    let mut manifest = build(
        &root,
        work.path(),
        staged.path(),
        &log,
        numa.as_ref(),
        opts.jobs,
    )?;
    let _ = fs::copy(&log, staged.path().join("build.log"));
    manifest.source = identity;
    manifest.gcc = gcc;
    manifest.build_seconds = started.elapsed().as_secs_f64();
    let json = serde_json::to_vec_pretty(&manifest).expect("plain structs serialize");
    fs::write(staged.path().join("manifest.json"), json)
        .map_err(io_err("write", &staged.path().join("manifest.json")))?;
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(io_err("remove", &dir))?;
    }
    let staged = staged.keep();
    fs::rename(&staged, &dir).map_err(io_err("rename into", &dir))?;
    Ok(Build {
        dir,
        manifest,
        cached: false,
    })
}

/// `gcc --version`'s first line (part of the cache key).
pub fn gcc_version() -> Result<String, KselftestError> {
    let out = Command::new("gcc")
        .arg("--version")
        .output()
        .map_err(io_err("run", Path::new("gcc")))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Top-level directories of the kernel tarball the selftest build never
/// reads (headers need `include/`, `arch/x86/`, `scripts/`, `tools/`,
/// the top `Makefile`).
const UNNEEDED: &[&str] = &[
    "Documentation/",
    "drivers/",
    "sound/",
    "net/",
    "fs/",
    "samples/",
    "LICENSES/",
];

/// Whether the tarball member `path` (below the top directory) is kept.
fn wanted_member(path: &str) -> bool {
    if UNNEEDED.iter().any(|d| path.starts_with(d)) {
        return false;
    }
    match path.strip_prefix("arch/") {
        Some(rest) => rest.starts_with("x86/") || !rest.contains('/'),
        None => true,
    }
}

/// Unpacks `usr/src/linux-source-<series>.tar.xz` of the package into
/// `work`; returns the tree's root.
pub fn unpack_debian_source(
    deb: &Path,
    series: &str,
    work: &Path,
) -> Result<PathBuf, KselftestError> {
    let tarball = work.join("linux-source.tar.xz");
    {
        let mut f = fs::File::create(&tarball).map_err(io_err("create", &tarball))?;
        crate::kernel::deb::extract_file(
            deb,
            &format!("usr/src/linux-source-{series}.tar.xz"),
            &mut f,
        )
        .map_err(|e| KselftestError::Io {
            what: "extract the tarball of",
            path: deb.to_path_buf(),
            source: io::Error::other(e.to_string()),
        })?;
    }
    let src = work.join("src");
    fs::create_dir_all(&src).map_err(io_err("create", &src))?;
    let f = fs::File::open(&tarball).map_err(io_err("open", &tarball))?;
    let xz = liblzma::read::XzDecoder::new(BufReader::with_capacity(1 << 20, f));
    let mut ar = tar::Archive::new(xz);
    let mut top: Option<String> = None;
    for entry in ar.entries().map_err(io_err("read", &tarball))? {
        let mut entry = entry.map_err(io_err("read", &tarball))?;
        let path = entry.path().map_err(io_err("read", &tarball))?.into_owned();
        let s = path.to_string_lossy().into_owned();
        let s = s.trim_start_matches("./");
        let (head, rest) = s.split_once('/').unwrap_or((s, ""));
        if top.is_none() && !head.is_empty() {
            top = Some(head.to_string());
        }
        if !rest.is_empty() && !wanted_member(rest) {
            continue;
        }
        // `unpack_in` refuses `..` and absolute paths.
        entry.unpack_in(&src).map_err(io_err("unpack into", &src))?;
    }
    let _ = fs::remove_file(&tarball);
    let root = src.join(top.unwrap_or_default());
    if !root.join(FUTEX_DIR).is_dir() {
        return Err(KselftestError::BadSource {
            given: deb.display().to_string(),
            why: format!("no {FUTEX_DIR} in the tarball"),
        });
    }
    Ok(root)
}

/// A content hash of what the selftest build reads from a tree (the top
/// Makefile, the uapi headers, the selftest sources).
pub fn tree_hash(root: &Path) -> Result<String, KselftestError> {
    let mut files = Vec::new();
    for d in [
        "include/uapi",
        "arch/x86/include/uapi",
        "arch/x86/entry/syscalls",
        "tools/testing/selftests/futex",
        "tools/include",
    ] {
        walk(&root.join(d), &mut files);
    }
    for f in [
        "Makefile",
        "tools/testing/selftests/lib.mk",
        "tools/testing/selftests/kselftest.h",
        "tools/testing/selftests/kselftest_harness.h",
    ] {
        files.push(root.join(f));
    }
    files.sort();
    let mut h = Vec::new();
    for f in files {
        if let Ok(bytes) = fs::read(&f) {
            let rel = f.strip_prefix(root).unwrap_or(&f);
            h.extend_from_slice(rel.to_string_lossy().as_bytes());
            h.push(0);
            h.extend_from_slice(sha256_hex(&bytes).as_bytes());
        }
    }
    Ok(sha256_hex(&h)[..16].to_string())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

/// Runs one build step, its output into `log`.
fn step(name: &str, mut cmd: Command, log: &Path) -> Result<(), KselftestError> {
    tracing::info!("{name}: {cmd:?}");
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io_err("open", log))?;
    let _ = writeln!(f, "### {name}: {cmd:?}");
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(io_err("run make for", Path::new(name)))?;
    let _ = f.write_all(&out.stdout);
    let _ = f.write_all(&out.stderr);
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    Err(KselftestError::Build {
        step: name.to_string(),
        status: out.status.to_string(),
        tail: lines[lines.len().saturating_sub(20)..].join("\n"),
        log: log.to_path_buf(),
    })
}

/// The `make` commands of the build (pure: returned, not run).
pub fn make_commands(
    root: &Path,
    obj: &Path,
    out: &Path,
    numa: Option<&LibNuma>,
    jobs: usize,
) -> (Command, Command) {
    let mut headers = Command::new("make");
    headers
        .current_dir(root)
        .arg("-s")
        .arg(format!("-j{jobs}"))
        .arg(format!("O={}", obj.display()))
        .arg("headers");
    let mut tests = Command::new("make");
    tests
        .arg(format!("-j{jobs}"))
        .arg("-C")
        .arg(root.join(FUTEX_DIR))
        .arg(format!("OUTPUT={}", out.display()))
        .arg(format!(
            "KHDR_INCLUDES=-isystem {}",
            obj.join("usr/include").display()
        ))
        .arg("CC=gcc -static");
    match numa {
        // The Makefile asks pkg-config; the unpacked package has no .pc in
        // its search path, so say the answer directly. CFLAGS/LDFLAGS come
        // from the environment: the Makefile appends to CFLAGS.
        Some(n) => {
            tests
                .arg("LIBNUMA_TEST=SUFFICIENT")
                .env("CFLAGS", format!("-I{}", n.dir.join("include").display()))
                .env("LDFLAGS", format!("-L{}", n.dir.join("lib").display()));
        }
        None => {
            tests.arg("LIBNUMA_TEST=NO");
        }
    }
    (headers, tests)
}

/// Builds the futex selftests of `root` into `dest`; returns the manifest
/// (identity fields left for the caller).
pub fn build(
    root: &Path,
    work: &Path,
    dest: &Path,
    log: &Path,
    numa: Option<&LibNuma>,
    jobs: usize,
) -> Result<Manifest, KselftestError> {
    let jobs = if jobs == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        jobs
    };
    let obj = work.join("obj");
    let out = work.join("out");
    fs::create_dir_all(&out).map_err(io_err("create", &out))?;
    let (headers, tests) = make_commands(root, &obj, &out, numa, jobs);
    step("make headers", headers, log)?;
    step("make futex selftests", tests, log)?;

    let run_sh = fs::read_to_string(root.join(FUTEX_DIR).join("run.sh")).unwrap_or_default();
    let mut built: Vec<String> = fs::read_dir(&out)
        .map_err(io_err("list", &out))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| crate::guestbin::check_static(&out.join(n)).is_ok())
        .collect();
    built.sort();
    if built.is_empty() {
        return Err(KselftestError::NoPrograms {
            dir: root.join(FUTEX_DIR),
            log: log.to_path_buf(),
        });
    }
    let (programs, not_run) = programs(&run_sh, &built);
    for name in &built {
        let to = dest.join(name);
        fs::copy(out.join(name), &to).map_err(io_err("copy", &to))?;
    }
    Ok(Manifest {
        recipe: RECIPE.into(),
        source: String::new(),
        gcc: String::new(),
        libnuma: numa.map(|n| n.package.clone()),
        programs,
        not_run,
        build_seconds: 0.0,
    })
}

/// The programs to run, in order: run.sh's invocations (with their
/// arguments, shell variables set in run.sh substituted, others empty),
/// then the other built programs the kselftest runner would run as
/// `TEST_GEN_PROGS`, minus [`MANUAL_TOOLS`]. Also returns what is not run.
pub fn programs(run_sh: &str, built: &[String]) -> (Vec<Program>, Vec<(String, String)>) {
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut out: Vec<Program> = Vec::new();
    for line in run_sh.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                vars.push((k.to_string(), v.trim_matches('"').to_string()));
                continue;
            }
        }
        let Some(rest) = line.strip_prefix("./") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(name) = words.next() else { continue };
        if !built.iter().any(|b| b == name) {
            continue;
        }
        let args = words
            .map(|w| expand(w, &vars))
            .filter(|w| !w.is_empty())
            .collect();
        out.push(Program {
            name: name.to_string(),
            args,
        });
    }
    let mut not_run = Vec::new();
    for b in built {
        if out.iter().any(|p| &p.name == b) {
            continue;
        }
        if let Some((_, why)) = MANUAL_TOOLS.iter().find(|(n, _)| n == b) {
            not_run.push((b.clone(), why.to_string()));
        } else {
            out.push(Program {
                name: b.clone(),
                args: vec![],
            });
        }
    }
    (out, not_run)
}

/// `$VAR` / `${VAR}` words from run.sh's own assignments (unknown: empty).
fn expand(word: &str, vars: &[(String, String)]) -> String {
    let name = word
        .strip_prefix("${")
        .and_then(|w| w.strip_suffix('}'))
        .or_else(|| word.strip_prefix('$'));
    match name {
        Some(n) => vars
            .iter()
            .rev()
            .find(|(k, _)| k == n)
            .map(|(_, v)| expand(v, vars))
            .unwrap_or_default(),
        None => word.to_string(),
    }
}

/// An unpacked `libnuma-dev`: `include/` and `lib/libnuma.a` below `dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibNuma {
    /// Root of the unpacked files.
    pub dir: PathBuf,
    /// `libnuma-dev_<version>_amd64.deb`.
    pub package: String,
    /// Its Debian version.
    pub version: String,
}

/// The newest `libnuma-dev` >= [`LIBNUMA_MIN`] of [`LIBNUMA_SUITES`],
/// unpacked in the cache (`<cache>/kselftest/libnuma/<version>/`).
pub fn fetch_libnuma(mirror: &DebianMirror, cache: &Cache) -> Result<LibNuma, KselftestError> {
    let mut errors = Vec::new();
    for suite in LIBNUMA_SUITES {
        match suite_packages(mirror, cache, suite, "libnuma-dev") {
            Ok(entries) => {
                let best = entries
                    .into_iter()
                    .filter(|e| apt::dpkg_version_cmp(&e.version, LIBNUMA_MIN) != Ordering::Less)
                    .max_by(|a, b| apt::dpkg_version_cmp(&a.version, &b.version));
                match best {
                    Some(e) => return unpack_libnuma(mirror, cache, &e),
                    None => errors.push(format!("{suite}: no libnuma-dev >= {LIBNUMA_MIN}")),
                }
            }
            Err(e) => errors.push(format!("{suite}: {e}")),
        }
    }
    Err(KselftestError::Download {
        url: format!("{}/dists/{{{}}}", mirror.url(), LIBNUMA_SUITES.join(",")),
        why: errors.join("; "),
    })
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(20)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// `package`'s entries in `suite`'s `main/binary-amd64/Packages.xz`. The
/// suite's `InRelease` is fetched and signature-checked by
/// [`DebianMirror::suite_index`] (which keeps only `linux-*` stanzas); this
/// reads the verified copy from the cache, downloads `Packages.xz`, checks
/// it against `InRelease`'s SHA-256 and keeps the wanted stanzas, cached
/// per `InRelease`.
pub fn suite_packages(
    mirror: &DebianMirror,
    cache: &Cache,
    suite: &str,
    package: &str,
) -> Result<Vec<PackageEntry>, KselftestError> {
    mirror.suite_index(suite, cache, &mut |_| {})?;
    let inrelease_path = cache.path(format!("debian/dists/{suite}/InRelease"));
    let inrelease = fs::read(&inrelease_path).map_err(io_err("read", &inrelease_path))?;
    let key = &sha256_hex(&inrelease)[..16];
    let rel = format!("kselftest/dists/{suite}/{package}-{key}.json");
    let _lock = cache.lock(&format!("kselftest-index-{suite}"))?;
    if let Ok(bytes) = fs::read(cache.path(&rel)) {
        if let Ok(v) = serde_json::from_slice(&bytes) {
            return Ok(v);
        }
    }
    let wanted = format!("main/binary-{}/Packages.xz", crate::kernel::debian::ARCH);
    let file = apt::parse_release_sha256(&String::from_utf8_lossy(&inrelease))
        .into_iter()
        .find(|f| f.path == wanted)
        .ok_or_else(|| KselftestError::Download {
            url: format!("{}/dists/{suite}/InRelease", mirror.url()),
            why: format!("no {wanted} listed"),
        })?;
    let url = format!("{}/dists/{suite}/{wanted}", mirror.url());
    let dl = |why: String| KselftestError::Download {
        url: url.clone(),
        why,
    };
    let resp = agent().get(&url).call().map_err(|e| dl(e.to_string()))?;
    let mut hashing = HashingReader::new(resp.into_body().into_reader());
    let entries = {
        let mut xz = liblzma::read::XzDecoder::new(&mut hashing);
        let entries = apt::scan_packages(BufReader::new(&mut xz), |p| p == package)
            .map_err(|e| dl(e.to_string()))?;
        io::copy(&mut xz, &mut io::sink()).map_err(|e| dl(e.to_string()))?;
        entries
    };
    io::copy(&mut hashing, &mut io::sink()).map_err(|e| dl(e.to_string()))?;
    let (sha, size) = hashing.finish();
    if size != file.size || !sha.eq_ignore_ascii_case(&file.sha256) {
        return Err(dl(format!(
            "checksum mismatch: {size} bytes sha256 {sha}, InRelease says {} bytes {}",
            file.size, file.sha256
        )));
    }
    let json = serde_json::to_vec(&entries).expect("plain structs serialize");
    cache.write_atomic(&rel, &mut &json[..])?;
    Ok(entries)
}

/// Downloads (verified against the index's SHA-256) and unpacks one
/// libnuma-dev package.
fn unpack_libnuma(
    mirror: &DebianMirror,
    cache: &Cache,
    e: &PackageEntry,
) -> Result<LibNuma, KselftestError> {
    let base = e
        .filename
        .rsplit('/')
        .next()
        .unwrap_or(&e.filename)
        .to_string();
    let rel_dir = format!("kselftest/libnuma/{}", sanitize(&e.version));
    let dir = cache.checked_path(&rel_dir)?;
    let numa = LibNuma {
        dir: dir.clone(),
        package: base.clone(),
        version: e.version.clone(),
    };
    let _lock = cache.lock(&format!("kselftest-libnuma-{}", sanitize(&e.version)))?;
    if dir.join("lib/isoc23-shim.o").is_file() {
        return Ok(numa);
    }
    let url = format!("{}/{}", mirror.url(), e.filename);
    let dl = |why: String| KselftestError::Download {
        url: url.clone(),
        why,
    };
    let resp = agent().get(&url).call().map_err(|x| dl(x.to_string()))?;
    let mut bytes = Vec::new();
    resp.into_body()
        .into_reader()
        .take(e.size + 1)
        .read_to_end(&mut bytes)
        .map_err(|x| dl(x.to_string()))?;
    let sha = sha256_hex(&bytes);
    if bytes.len() as u64 != e.size || !sha.eq_ignore_ascii_case(&e.sha256) {
        return Err(dl(format!(
            "checksum mismatch: {} bytes sha256 {sha}, index says {} bytes {}",
            bytes.len(),
            e.size,
            e.sha256
        )));
    }
    let deb = cache.write_atomic(format!("kselftest/debs/{base}"), &mut &bytes[..])?;
    for (member, to) in [
        ("lib/x86_64-linux-gnu/libnuma.a", "lib/libnuma.a"),
        ("include/numa.h", "include/numa.h"),
        ("include/numaif.h", "include/numaif.h"),
        ("include/numacompat1.h", "include/numacompat1.h"),
    ] {
        cache
            .write_atomic_with(format!("{rel_dir}/{to}"), |f| {
                crate::kernel::deb::extract_file(&deb, &format!("usr/{member}"), f).map(|_| ())
            })
            .map_err(|x| match x {
                crate::kernel::cache::WriteError::Cache(e) => KselftestError::Cache(e),
                crate::kernel::cache::WriteError::Producer(e) => KselftestError::Io {
                    what: "extract from",
                    path: deb.clone(),
                    source: io::Error::other(e.to_string()),
                },
            })?;
    }
    add_isoc23_shim(&dir.join("lib"))?;
    Ok(numa)
}

/// Definitions of the C23 `strtol` family and `sscanf` that libraries
/// built against glibc >= 2.38 reference (`__isoc23_*`), for linking them
/// statically with an older glibc. Weak, so a newer libc's own win.
pub const ISOC23_SHIM: &str = r#"#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#define W __attribute__((weak))
W long __isoc23_strtol(const char *s, char **e, int b) { return strtol(s, e, b); }
W unsigned long __isoc23_strtoul(const char *s, char **e, int b) { return strtoul(s, e, b); }
W long long __isoc23_strtoll(const char *s, char **e, int b) { return strtoll(s, e, b); }
W unsigned long long __isoc23_strtoull(const char *s, char **e, int b) { return strtoull(s, e, b); }
W int __isoc23_sscanf(const char *s, const char *f, ...) {
    va_list ap; va_start(ap, f); int r = vsscanf(s, f, ap); va_end(ap); return r;
}
W int __isoc23_vsscanf(const char *s, const char *f, va_list ap) { return vsscanf(s, f, ap); }
"#;

/// Adds [`ISOC23_SHIM`] to `lib/libnuma.a` (once): Debian 12's glibc 2.36
/// lacks the `__isoc23_*` symbols a newer suite's libnuma.a needs.
fn add_isoc23_shim(lib: &Path) -> Result<(), KselftestError> {
    let marker = lib.join("isoc23-shim.o");
    if marker.is_file() {
        return Ok(());
    }
    let src = lib.join("isoc23-shim.c");
    fs::write(&src, ISOC23_SHIM).map_err(io_err("write", &src))?;
    let log = lib.join("isoc23-shim.log");
    let tmp = lib.join(".isoc23-shim.o");
    let mut cc = Command::new("gcc");
    cc.args(["-O2", "-c"]).arg(&src).arg("-o").arg(&tmp);
    step("compile the __isoc23 shim", cc, &log)?;
    let mut ar = Command::new("ar");
    ar.arg("rs").arg(lib.join("libnuma.a")).arg(&tmp);
    step("add the __isoc23 shim to libnuma.a", ar, &log)?;
    fs::rename(&tmp, &marker).map_err(io_err("rename", &marker))?;
    Ok(())
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Upstream case (JUnit name, `*` at the end: prefix) -> our cases that
/// check the same behaviour, and what differs in scope.
pub const MAPPING: &[(&str, &[&str], &str)] = &[
    (
        "futex_priv_hash/global.priv_hash",
        &[
            "futex-prctl/get-fresh-is-0",
            "futex-resize/auto-first-thread-16",
            "futex-resize/auto-growth-past-16",
            "futex-prctl/set-2",
            "futex-prctl/set-4",
            "futex-prctl/set-16",
            "futex-resize/pi-private-resize",
            "futex-prctl/set-not-pow2-einval",
            "futex-prctl/set-2pow25-enomem",
            "futex-prctl/set-0-one-way",
        ],
        "upstream checks growth only with > 16 online CPUs and SKIPs the whole test below that; ours check growth from 5 CPUs",
    ),
    (
        "futex_numa_mpol/global.futex_numa_mpol",
        &[
            "futex-numa/wake-64-waiters",
            "futex-numa/page-end-einval",
            "futex-numa/prot-none-efault",
            "futex-numa/readonly-no-node-efault",
            "futex-mpol/bind-home",
            "futex-mpol/bind-home-remote",
        ],
        "upstream's MPOL part needs libnuma >= 2.0.18 (built in: trixie's, with an __isoc23 shim)",
    ),
    (
        "futex_requeue_pi/args.*",
        &[
            "futex-upstream-gaps/requeue-pi-wakes-owner",
            "futex-upstream-gaps/requeue-pi-timeout",
            "futex-resize/pi-private-resize",
        ],
        "ours: one waiter, requeue then unlock, and the timeout; upstream: 24 variants (broadcast, locked, owner x 4 timeouts)",
    ),
    (
        "futex_requeue_pi_mismatched_ops/*",
        &["futex-upstream-gaps/requeue-pi-mismatched-ops"],
        "",
    ),
    (
        "futex_requeue_pi_signal_restart/*",
        &["futex-upstream-gaps/requeue-pi-signal-restart"],
        "",
    ),
    (
        "futex_wait_timeout/global.wait_bitset",
        &[
            "futex-upstream-gaps/wait-timeout-relative",
            "futex-upstream-gaps/wait-bitset-timeout-absolute",
        ],
        "",
    ),
    (
        "futex_wait_timeout/global.requeue_pi",
        &["futex-upstream-gaps/requeue-pi-timeout"],
        "",
    ),
    (
        "futex_wait_timeout/global.lock_pi",
        &["futex-upstream-gaps/lock-pi-timeout"],
        "",
    ),
    (
        "futex_wait_timeout/global.waitv",
        &[
            "futex-upstream-gaps/waitv-timeout",
            "futex-numa/writeback-wait-timeout-each-cpu",
        ],
        "",
    ),
    (
        "futex_wait_wouldblock/global.futex_wait_wouldblock",
        &[
            "futex-upstream-gaps/wait-wouldblock",
            "futex-numa/writeback-wait-eagain-each-cpu",
        ],
        "",
    ),
    (
        "futex_wait_wouldblock/global.futex_waitv_wouldblock",
        &["futex-upstream-gaps/waitv-wouldblock"],
        "",
    ),
    (
        "futex_wait_uninitialized_heap/*",
        &["futex-upstream-gaps/wait-uninitialized-heap"],
        "",
    ),
    (
        "futex_wait_private_mapped_file/*",
        &["futex-upstream-gaps/wait-private-mapped-file"],
        "",
    ),
    (
        "futex_wait/global.private_futex",
        &["futex-upstream-gaps/wait-wake-private", "futex-numa/wait-wake-one"],
        "",
    ),
    (
        "futex_wait/global.anon_page",
        &["futex-numa/shared-fork-wake", "futex-upstream-gaps/wait-wake-shared-anon"],
        "upstream uses SysV shm (needs CONFIG_SYSVIPC); ours a MAP_SHARED anonymous mapping",
    ),
    (
        "futex_wait/global.file_backed",
        &["futex-upstream-gaps/wait-wake-shared-file"],
        "",
    ),
    (
        "futex_requeue/global.requeue_single",
        &["futex-upstream-gaps/requeue-single", "futex-resize/requeue-private-resize"],
        "",
    ),
    (
        "futex_requeue/global.requeue_multiple",
        &["futex-upstream-gaps/requeue-multiple", "futex-numa/requeue-numa-both-entries"],
        "",
    ),
    (
        "futex_waitv/global.private_waitv",
        &["futex-numa/waitv-numa-wakes", "futex-resize/waitv-private-resize"],
        "",
    ),
    (
        "futex_waitv/global.shared_waitv",
        &["futex-upstream-gaps/waitv-shared"],
        "upstream uses SysV shm (needs CONFIG_SYSVIPC); ours a MAP_SHARED anonymous mapping",
    ),
    (
        "futex_waitv/global.invalid_flag",
        &["futex-numa/waitv-syscall-flags-einval", "futex-upstream-gaps/waitv-invalid-flag"],
        "",
    ),
    (
        "futex_waitv/global.unaligned_address",
        &["futex-upstream-gaps/waitv-unaligned-einval"],
        "",
    ),
    (
        "futex_waitv/global.null_address",
        &["futex-upstream-gaps/waitv-null-address"],
        "",
    ),
    (
        "futex_waitv/global.invalid_clockid",
        &["futex-upstream-gaps/waitv-invalid-clockid"],
        "",
    ),
    (
        "futex_lock_pi_exiting/*",
        &["futex-upstream-gaps/lock-pi-owner-dies", "futex-resize/pi-private-resize"],
        "ours: the owner thread exits holding a PI lock with a waiter blocked; upstream also stresses exits",
    ),
    (
        "robust_list/global.test_robustness",
        &["futex-upstream-gaps/robust-owner-died"],
        "",
    ),
    (
        "robust_list/global.test_set_robust_list_invalid_size",
        &["futex-upstream-gaps/robust-set-invalid-size"],
        "",
    ),
    (
        "robust_list/global.test_get_robust_list_self",
        &["futex-upstream-gaps/robust-get-self"],
        "",
    ),
    (
        "robust_list/*",
        &[],
        "not covered by ours: get_robust_list of a child, list-op-pending, multiple elements, circular lists, the 7.3 vDSO robust unlock, robust unlock via futex ops (see docs/kselftest.md)",
    ),
];

/// Whether `pattern` (from [`MAPPING`]) names `case`.
pub fn pattern_matches(pattern: &str, case: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => case.starts_with(prefix),
        None => pattern == case,
    }
}

/// The first [`MAPPING`] row naming upstream `case`.
pub fn mapping_for(
    case: &str,
) -> Option<&'static (&'static str, &'static [&'static str], &'static str)> {
    MAPPING.iter().find(|(p, _, _)| pattern_matches(p, case))
}

/// Verdict of one JUnit test case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Passed.
    Pass,
    /// Skipped.
    Skip,
    /// Failed (failure or error).
    Fail,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Skip => "SKIP",
            Verdict::Fail => "FAIL",
        }
    }
}

/// One test case read back from JUnit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JunitCase {
    /// The cell's `kernel` property.
    pub kernel: String,
    /// The cell's `suite` property.
    pub suite: String,
    /// `binary/case`.
    pub name: String,
    /// Verdict.
    pub verdict: Verdict,
    /// Failure or skip message.
    pub message: String,
}

/// Reads every test case of a JUnit document (as written by [`crate::junit`]).
pub fn read_junit(xml: &str) -> Result<Vec<JunitCase>, KselftestError> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| KselftestError::BadSource {
        given: "JUnit".into(),
        why: e.to_string(),
    })?;
    let mut out = Vec::new();
    for suite in doc.descendants().filter(|n| n.has_tag_name("testsuite")) {
        let prop = |name: &str| {
            suite
                .descendants()
                .filter(|n| n.has_tag_name("property"))
                .find(|n| n.attribute("name") == Some(name))
                .and_then(|n| n.attribute("value"))
                .unwrap_or("")
                .to_string()
        };
        let (kernel, suite_name) = (prop("kernel"), prop("suite"));
        for tc in suite.children().filter(|n| n.has_tag_name("testcase")) {
            let mut verdict = Verdict::Pass;
            let mut message = String::new();
            for c in tc.children().filter(|n| n.is_element()) {
                let v = match c.tag_name().name() {
                    "failure" | "error" => Verdict::Fail,
                    "skipped" => Verdict::Skip,
                    _ => continue,
                };
                verdict = verdict.max(v);
                message = c.attribute("message").unwrap_or("").to_string();
            }
            out.push(JunitCase {
                kernel: kernel.clone(),
                suite: suite_name.clone(),
                name: tc.attribute("name").unwrap_or("").to_string(),
                verdict,
                message,
            });
        }
    }
    Ok(out)
}

/// Markdown report of upstream verdicts next to ours, per kernel, from
/// JUnit documents holding `kselftest-futex` and other (our) cells.
pub fn compare_junit(docs: &[String]) -> Result<String, KselftestError> {
    let mut cases = Vec::new();
    for d in docs {
        cases.extend(read_junit(d)?);
    }
    Ok(compare(&cases))
}

/// The comparison report of [`compare_junit`] from cases already read.
pub fn compare(cases: &[JunitCase]) -> String {
    use std::fmt::Write as _;
    let mut kernels: Vec<&str> = cases
        .iter()
        .filter(|c| c.suite == SUITE_FUTEX)
        .map(|c| c.kernel.as_str())
        .collect();
    kernels.sort();
    kernels.dedup();
    let mut md = String::from("# Upstream futex selftests next to ours\n");
    if kernels.is_empty() {
        md.push_str("\nNo kselftest-futex cells in the reports.\n");
    }
    for k in kernels {
        let upstream: Vec<&JunitCase> = cases
            .iter()
            .filter(|c| c.kernel == k && c.suite == SUITE_FUTEX && !c.name.starts_with("topology"))
            .collect();
        let ours: Vec<&JunitCase> = cases
            .iter()
            .filter(|c| c.kernel == k && c.suite != SUITE_FUTEX)
            .collect();
        let _ = writeln!(md, "\n## {k}\n");
        md.push_str("| upstream case | upstream | our cases | ours | agree | note |\n|---|---|---|---|---|---|\n");
        let (mut agree, mut differ, mut unmapped) = (0, 0, 0);
        for u in &upstream {
            let row = mapping_for(&u.name);
            let (names, note) = row.map(|(_, n, note)| (*n, *note)).unwrap_or((&[], ""));
            let mut found: Vec<String> = Vec::new();
            let mut our_v: Option<Verdict> = None;
            for n in names {
                if let Some(o) = ours.iter().find(|o| o.name == *n) {
                    found.push(format!("{} ({})", n, o.verdict.word()));
                    our_v = Some(our_v.map_or(o.verdict, |v| v.max(o.verdict)));
                } else {
                    found.push(format!("{n} (not run)"));
                }
            }
            let ours_word = our_v.map_or("-", Verdict::word);
            let same = match our_v {
                None => {
                    unmapped += 1;
                    "n/a"
                }
                Some(v) if v == u.verdict => {
                    agree += 1;
                    "yes"
                }
                Some(_) => {
                    differ += 1;
                    "**no**"
                }
            };
            let mut why = note.to_string();
            if u.verdict != Verdict::Pass && !u.message.is_empty() {
                if !why.is_empty() {
                    why.push_str("; ");
                }
                why.push_str("upstream: ");
                why.push_str(&u.message);
            }
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                cell(&u.name),
                u.verdict.word(),
                cell(&found.join(", ")),
                ours_word,
                same,
                cell(&why)
            );
        }
        let _ = writeln!(
            md,
            "\n{} upstream cases: {agree} agree, {differ} differ, {unmapped} without a counterpart of ours run.",
            upstream.len()
        );
    }
    md
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN_SH_73: &str = "#!/bin/sh\n# comment ./not_this\necho\n./futex_requeue_pi\n\necho\n./futex_wait_uninitialized_heap\n./futex_wait_private_mapped_file\n";

    fn names(p: &[Program]) -> Vec<&str> {
        p.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn run_sh_order_then_other_programs_minus_manual_tools() {
        let built: Vec<String> = [
            "futex_numa",
            "futex_requeue_pi",
            "futex_wait_private_mapped_file",
            "futex_wait_uninitialized_heap",
            "robust_list",
        ]
        .map(String::from)
        .to_vec();
        let (p, not_run) = programs(RUN_SH_73, &built);
        assert_eq!(
            names(&p),
            [
                "futex_requeue_pi",
                "futex_wait_uninitialized_heap",
                "futex_wait_private_mapped_file",
                "robust_list"
            ]
        );
        assert!(p.iter().all(|p| p.args.is_empty()));
        assert_eq!(not_run.len(), 1);
        assert_eq!(not_run[0].0, "futex_numa");
    }

    #[test]
    fn older_run_sh_arguments_are_expanded() {
        let sh = "COLOR=\"\"\nDEFAULT_TIMEOUT=\"-t 5000\"\n./futex_requeue_pi $COLOR\n./futex_requeue_pi_mismatched_ops $COLOR -c\n./futex_wait_timeout ${COLOR} -t 500\n./missing -x\n";
        let built = [
            "futex_requeue_pi",
            "futex_requeue_pi_mismatched_ops",
            "futex_wait_timeout",
        ]
        .map(String::from)
        .to_vec();
        let (p, _) = programs(sh, &built);
        assert_eq!(p[0].args, Vec::<String>::new());
        assert_eq!(p[1].args, ["-c"]);
        assert_eq!(p[2].args, ["-t", "500"]);
        assert_eq!(p.len(), 3, "a program that was not built is not run");
    }

    #[test]
    fn source_specs() {
        assert_eq!(
            SourceSpec::parse("debian:7.3.4").unwrap(),
            SourceSpec::Debian {
                series: "7.3".into()
            }
        );
        assert!(SourceSpec::parse("debian:seven").is_err());
        let e = SourceSpec::parse("/nonexistent").unwrap_err().to_string();
        assert!(e.contains("not a kernel source tree"), "{e}");
        assert!(matches!(
            source_spec(SUITE_FUTEX, None, None),
            Err(KselftestError::NoSource { .. })
        ));
        assert_eq!(
            source_spec(SUITE_FUTEX, None, Some("7.2.13")).unwrap(),
            SourceSpec::Debian {
                series: "7.2".into()
            }
        );
    }

    #[test]
    fn tarball_filter_keeps_what_headers_and_selftests_need() {
        for keep in [
            "Makefile",
            "include/uapi/linux/futex.h",
            "arch/x86/include/uapi/asm/unistd.h",
            "arch/Kconfig",
            "scripts/Makefile.build",
            "tools/testing/selftests/futex/functional/run.sh",
        ] {
            assert!(wanted_member(keep), "{keep}");
        }
        for drop in [
            "drivers/gpu/x.c",
            "arch/arm64/Makefile",
            "Documentation/index.rst",
        ] {
            assert!(!wanted_member(drop), "{drop}");
        }
    }

    #[test]
    fn make_commands_follow_the_tree_makefiles() {
        let numa = LibNuma {
            dir: "/c/numa".into(),
            package: "libnuma-dev_2.0.19-1_amd64.deb".into(),
            version: "2.0.19-1".into(),
        };
        let (h, t) = make_commands(
            Path::new("/src"),
            Path::new("/w/obj"),
            Path::new("/w/out"),
            Some(&numa),
            2,
        );
        let args = |c: &Command| {
            c.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(args(&h), ["-s", "-j2", "O=/w/obj", "headers"]);
        let ta = args(&t);
        assert!(ta.contains(&"KHDR_INCLUDES=-isystem /w/obj/usr/include".to_string()));
        assert!(ta.contains(&"CC=gcc -static".to_string()));
        assert!(ta.contains(&"LIBNUMA_TEST=SUFFICIENT".to_string()));
        assert!(t
            .get_envs()
            .any(|(k, v)| k == "LDFLAGS" && v == Some("-L/c/numa/lib".as_ref())));
        let (_, t) = make_commands(Path::new("/s"), Path::new("/o"), Path::new("/u"), None, 1);
        assert!(args(&t).contains(&"LIBNUMA_TEST=NO".to_string()));
    }

    #[test]
    fn every_upstream_case_of_7_3_has_a_mapping_row() {
        for case in [
            "futex_priv_hash/global.priv_hash",
            "futex_numa_mpol/global.futex_numa_mpol",
            "futex_requeue_pi/args.t_0_broadcast.futex_requeue_pi",
            "futex_requeue_pi_mismatched_ops/global.requeue_pi_mismatched_ops",
            "futex_wait_timeout/global.lock_pi",
            "futex_waitv/global.null_address",
            "futex_lock_pi_exiting/lock_pi_exiting.stress_owner_exits",
            "robust_list/global.test_robustness",
            "robust_list/vdso_unlock.64.test_robust_try_unlock_contended",
        ] {
            assert!(mapping_for(case).is_some(), "{case}");
        }
        assert_eq!(
            mapping_for("robust_list/global.test_robustness").unwrap().1,
            ["futex-upstream-gaps/robust-owner-died"]
        );
    }

    const JUNIT: &str = r#"<?xml version="1.0"?>
<testsuites name="harness run">
 <testsuite name="a/kselftest-futex" tests="3">
  <properties><property name="kernel" value="debian:7.3.4"/><property name="suite" value="kselftest-futex"/></properties>
  <testcase name="topology/node-count"/>
  <testcase name="futex_priv_hash/global.priv_hash"><skipped message="only 8 online"/></testcase>
  <testcase name="futex_wait_wouldblock/global.futex_wait_wouldblock"/>
 </testsuite>
 <testsuite name="a/futex" tests="2">
  <properties><property name="kernel" value="debian:7.3.4"/><property name="suite" value="futex"/></properties>
  <testcase name="futex-prctl/get-fresh-is-0"/>
  <testcase name="futex-upstream-gaps/wait-wouldblock"><failure message="boom"/></testcase>
 </testsuite>
</testsuites>"#;

    #[test]
    fn compare_puts_verdicts_side_by_side() {
        let cases = read_junit(JUNIT).unwrap();
        assert_eq!(cases.len(), 5);
        let md = compare(&cases);
        assert!(md.contains("## debian:7.3.4"), "{md}");
        assert!(!md.contains("topology/node-count"), "{md}");
        let row = md
            .lines()
            .find(|l| l.starts_with("| futex_priv_hash"))
            .unwrap();
        assert!(
            row.contains("| SKIP |") && row.contains("| **no** |"),
            "{row}"
        );
        assert!(row.contains("upstream: only 8 online"), "{row}");
        let row = md
            .lines()
            .find(|l| l.starts_with("| futex_wait_wouldblock"))
            .unwrap();
        assert!(row.contains("wait-wouldblock (FAIL)"), "{row}");
        assert!(
            row.contains("futex-numa/writeback-wait-eagain-each-cpu (not run)"),
            "{row}"
        );
        assert!(md.contains("2 upstream cases: 0 agree, 2 differ"), "{md}");
    }
}
