//! The build and its cache: the tree's own `make` (headers, then the futex
//! selftests, static), the [`Manifest`] of what was built, and
//! `<cache>/kselftest/futex/<key>/` keyed by the source identity, the gcc
//! version, the libnuma package and [`RECIPE`] (and, for arm64, the
//! architecture: x86-64 keys are as before arm64 existed).
//!
//! arm64 is cross-built (`ARCH=arm64` headers, `aarch64-linux-gnu-gcc
//! -static`) without libnuma for now: the libnuma-dev the cache holds is
//! amd64's, so `futex_numa_mpol` skips its MPOL part there.

use super::libnuma::{fetch_libnuma, LibNuma, LIBNUMA_MIN};
use super::suite::{programs, Program};
use super::{io_err, source, KselftestError, Options, SourceSpec, FUTEX_DIR};
use crate::arch::Arch;
use crate::kernel::cache::{sha256_hex, Cache};
use crate::kernel::debian::DebianMirror;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Bumped whenever the build recipe changes (part of the cache key).
pub const RECIPE: &str = "kselftest-futex-2";

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

/// The build for `spec`, from the cache or built now; progress notes go
/// to `say`.
pub fn prepare(
    spec: &SourceSpec,
    cache: &Cache,
    opts: &Options,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Build, KselftestError> {
    prepare_for(spec, cache, opts, Arch::X86_64, say)
}

/// The compiler of `arch`'s selftests (`gcc`, `aarch64-linux-gnu-gcc`).
pub fn compiler(arch: Arch) -> String {
    format!(
        "{}gcc",
        crate::kernel::build::cross_compile(arch).unwrap_or("")
    )
}

/// The cache key of a build (pure): x86-64's text is what it was before
/// arm64 existed; other architectures add their name.
pub fn cache_key(identity: &str, gcc: &str, libnuma: Option<&str>, arch: Arch) -> String {
    let mut key_text = format!("{RECIPE}\n{identity}\n{gcc}\n{}", libnuma.unwrap_or("-"));
    if arch != Arch::X86_64 {
        key_text.push_str(&format!("\narch {}", arch.name()));
    }
    sha256_hex(key_text.as_bytes())[..16].to_string()
}

/// [`prepare`] for guests of `arch` (arm64: cross-built, no libnuma).
pub fn prepare_for(
    spec: &SourceSpec,
    cache: &Cache,
    opts: &Options,
    arch: Arch,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Build, KselftestError> {
    let gcc = compiler_version(&compiler(arch))?;
    let mirror = || DebianMirror::discover(opts.mirror.as_deref());
    // The source identity first: cheap for Debian (the .deb is cached).
    let (identity, deb) = source::identity(spec, cache, &mirror)?;
    let numa = match arch {
        Arch::X86_64 => match mirror()
            .map_err(KselftestError::from)
            .and_then(|m| fetch_libnuma(&m, cache))
        {
            Ok(n) => Some(n),
            Err(e) => {
                say(&format!(
                    "warning: no libnuma >= {LIBNUMA_MIN} ({e}); \
                     futex_numa_mpol will skip its MPOL part"
                ));
                None
            }
        },
        Arch::Arm64 => {
            say("note: no arm64 libnuma yet; futex_numa_mpol will skip its MPOL part");
            None
        }
    };
    let key = &cache_key(
        &identity,
        &gcc,
        numa.as_ref().map(|n| n.package.as_str()),
        arch,
    );
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
    let root = source::tree(spec, deb.as_deref(), work.path(), say)?;
    say("building the upstream futex selftests");
    let staged = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempdir_in(&parent)
        .map_err(io_err("create a temporary directory in", &parent))?;
    let log = cache.checked_path(format!("kselftest/logs/futex-{key}.log"))?;
    if let Some(d) = log.parent() {
        fs::create_dir_all(d).map_err(io_err("create", d))?;
    }
    let _ = fs::remove_file(&log);
    let mut manifest = build_for(
        &root,
        work.path(),
        staged.path(),
        &log,
        numa.as_ref(),
        opts.jobs,
        arch,
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
    compiler_version("gcc")
}

/// `<cc> --version`'s first line.
fn compiler_version(cc: &str) -> Result<String, KselftestError> {
    let out = Command::new(cc)
        .arg("--version")
        .output()
        .map_err(io_err("run", Path::new(cc)))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Runs one build step, its output into `log`.
pub(super) fn step(name: &str, mut cmd: Command, log: &Path) -> Result<(), KselftestError> {
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

/// kselftest_harness's per-test timeout in our builds, in seconds.
/// Upstream's is 30 s (`TEST_TIMEOUT_DEFAULT`), sized for real CPUs: under
/// TCG the same tests run several times slower (`futex_priv_hash` at 18
/// vCPUs, `futex_numa_mpol`'s Regular test and the requeue_pi variants were
/// seen ending at 30 s with every thread done), so a correct kernel failed.
/// Four times upstream's keeps its hang detection meaningful; the guest's
/// per-program timeout ([`super::suite::PROGRAM_TIMEOUT`]) still bounds a
/// whole program.
pub const TEST_TIMEOUT_SECS: u32 = 120;

/// The upstream header's timeout line, as 7.3 has it.
const TIMEOUT_LINE: &str = "#define TEST_TIMEOUT_DEFAULT 30";

/// Writes a copy of `root`'s `kselftest_harness.h` into `dir` with
/// [`TEST_TIMEOUT_SECS`] as its default timeout. The futex tests include
/// it as `"kselftest_harness.h"` through `-I`, and `CFLAGS` from the
/// environment comes first on their command line, so the copy wins and the
/// tree itself (maybe a user's) is never written to. A header without the
/// line (another upstream version) is an error, not a silent 30 s.
pub fn harness_header(root: &Path, dir: &Path) -> Result<(), KselftestError> {
    let from = root.join("tools/testing/selftests/kselftest_harness.h");
    let text = fs::read_to_string(&from).map_err(io_err("read", &from))?;
    if !text.lines().any(|l| l.trim_end() == TIMEOUT_LINE) {
        return Err(KselftestError::HarnessHeader { path: from });
    }
    let patched: String = text
        .lines()
        .map(|l| {
            if l.trim_end() == TIMEOUT_LINE {
                format!("#define TEST_TIMEOUT_DEFAULT {TEST_TIMEOUT_SECS} /* futex-harness: TCG */")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let to = dir.join("kselftest_harness.h");
    fs::write(&to, patched + "\n").map_err(io_err("write", &to))
}

/// The `make` commands of the build (pure: returned, not run); `include`
/// holds the [`harness_header`] copy.
pub fn make_commands(
    root: &Path,
    obj: &Path,
    out: &Path,
    include: &Path,
    numa: Option<&LibNuma>,
    jobs: usize,
) -> (Command, Command) {
    make_commands_for(root, obj, out, include, numa, jobs, Arch::X86_64)
}

/// [`make_commands`] for `arch`: x86-64's are unchanged (host headers and
/// gcc); arm64's install arm64's uapi headers and cross-compile.
pub fn make_commands_for(
    root: &Path,
    obj: &Path,
    out: &Path,
    include: &Path,
    numa: Option<&LibNuma>,
    jobs: usize,
    arch: Arch,
) -> (Command, Command) {
    let cross = crate::kernel::build::cross_compile(arch);
    let mut headers = Command::new("make");
    headers
        .current_dir(root)
        .arg("-s")
        .arg(format!("-j{jobs}"))
        .arg(format!("O={}", obj.display()));
    if let Some(prefix) = cross {
        headers
            .arg(format!("ARCH={}", arch.kbuild_arch()))
            .arg(format!("CROSS_COMPILE={prefix}"));
    }
    headers.arg("headers");
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
        .arg(format!("CC={} -static", compiler(arch)));
    if let Some(prefix) = cross {
        tests
            .arg(format!("ARCH={}", arch.kbuild_arch()))
            .arg(format!("CROSS_COMPILE={prefix}"));
    }
    // CFLAGS/LDFLAGS come from the environment: the Makefile appends to
    // CFLAGS, so these -I come before the tree's own.
    let mut cflags = format!("-I{}", include.display());
    match numa {
        // The Makefile asks pkg-config; the unpacked package has no .pc in
        // its search path, so say the answer directly.
        Some(n) => {
            cflags.push_str(&format!(" -I{}", n.dir.join("include").display()));
            tests
                .arg("LIBNUMA_TEST=SUFFICIENT")
                .env("LDFLAGS", format!("-L{}", n.dir.join("lib").display()));
        }
        None => {
            tests.arg("LIBNUMA_TEST=NO");
        }
    }
    tests.env("CFLAGS", cflags);
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
    build_for(root, work, dest, log, numa, jobs, Arch::X86_64)
}

/// [`build`] for guests of `arch`.
pub fn build_for(
    root: &Path,
    work: &Path,
    dest: &Path,
    log: &Path,
    numa: Option<&LibNuma>,
    jobs: usize,
    arch: Arch,
) -> Result<Manifest, KselftestError> {
    let jobs = if jobs == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        jobs
    };
    let obj = work.join("obj");
    let out = work.join("out");
    fs::create_dir_all(&out).map_err(io_err("create", &out))?;
    let include = work.join("include");
    harness_header(root, &include)?;
    let (headers, tests) = make_commands_for(root, &obj, &out, &include, numa, jobs, arch);
    step("make headers", headers, log)?;
    step("make futex selftests", tests, log)?;

    let run_sh = fs::read_to_string(root.join(FUTEX_DIR).join("run.sh")).unwrap_or_default();
    let mut built: Vec<String> = fs::read_dir(&out)
        .map_err(io_err("list", &out))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| match arch {
            Arch::X86_64 => crate::guestbin::check_static(&out.join(n)).is_ok(),
            _ => fs::read(out.join(n)).is_ok_and(|b| static_elf_of(&b, arch)),
        })
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

/// Whether `b` is a static 64-bit little-endian ELF executable of `arch`
/// (no `PT_INTERP`): what the guest can run without a dynamic loader.
pub fn static_elf_of(b: &[u8], arch: Arch) -> bool {
    use object::elf::{FileHeader64, PT_INTERP};
    use object::read::elf::{FileHeader, ProgramHeader};
    use object::LittleEndian as LE;
    let Ok(header) = FileHeader64::<LE>::parse(b) else {
        return false;
    };
    if !header.is_little_endian() || header.e_machine(LE) != arch.elf_machine() {
        return false;
    }
    header
        .program_headers(LE, b)
        .is_ok_and(|ph| !ph.iter().any(|p| p.p_type(LE) == PT_INTERP))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Path::new("/w/include"),
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
        // Our harness header first, then libnuma's.
        assert!(t
            .get_envs()
            .any(|(k, v)| k == "CFLAGS" && v == Some("-I/w/include -I/c/numa/include".as_ref())));
        let (_, t) = make_commands(
            Path::new("/s"),
            Path::new("/o"),
            Path::new("/u"),
            Path::new("/i"),
            None,
            1,
        );
        assert!(args(&t).contains(&"LIBNUMA_TEST=NO".to_string()));
        assert!(t
            .get_envs()
            .any(|(k, v)| k == "CFLAGS" && v == Some("-I/i".as_ref())));
    }

    #[test]
    fn arm64_selftests_are_cross_built_and_keyed_apart() {
        let args = |c: &Command| {
            c.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        let (h, t) = make_commands_for(
            Path::new("/src"),
            Path::new("/w/obj"),
            Path::new("/w/out"),
            Path::new("/w/include"),
            None,
            2,
            Arch::Arm64,
        );
        assert_eq!(
            args(&h),
            [
                "-s",
                "-j2",
                "O=/w/obj",
                "ARCH=arm64",
                "CROSS_COMPILE=aarch64-linux-gnu-",
                "headers"
            ]
        );
        let ta = args(&t);
        assert!(ta.contains(&"CC=aarch64-linux-gnu-gcc -static".to_string()));
        assert!(ta.contains(&"ARCH=arm64".to_string()));
        assert!(ta.contains(&"LIBNUMA_TEST=NO".to_string()));
        // x86-64 is what make_commands always made.
        let (h, t) = make_commands_for(
            Path::new("/src"),
            Path::new("/w/obj"),
            Path::new("/w/out"),
            Path::new("/w/include"),
            None,
            2,
            Arch::X86_64,
        );
        assert_eq!(args(&h), ["-s", "-j2", "O=/w/obj", "headers"]);
        assert!(!args(&t).iter().any(|a| a.starts_with("ARCH=")));
        assert!(args(&t).contains(&"CC=gcc -static".to_string()));
        assert_eq!(compiler(Arch::Arm64), "aarch64-linux-gnu-gcc");

        let x86 = cache_key("debian:x", "gcc 12", Some("libnuma.deb"), Arch::X86_64);
        let old = format!("{RECIPE}\ndebian:x\ngcc 12\nlibnuma.deb");
        assert_eq!(x86, sha256_hex(old.as_bytes())[..16]);
        assert_ne!(
            cache_key("debian:x", "gcc 12", Some("libnuma.deb"), Arch::Arm64),
            x86
        );
    }

    #[test]
    fn static_binaries_are_told_apart_by_machine() {
        // A minimal ELF64 LE header with no program headers: static.
        let elf = |machine: u16| {
            let mut b = vec![0u8; 64];
            b[..4].copy_from_slice(b"\x7fELF");
            b[4] = 2; // 64-bit
            b[5] = 1; // little-endian
            b[6] = 1; // version
            b[16] = 2; // ET_EXEC
            b[18..20].copy_from_slice(&machine.to_le_bytes());
            b[20] = 1;
            b[52] = 64; // e_ehsize
            b[54] = 56; // e_phentsize
            b
        };
        assert!(static_elf_of(&elf(object::elf::EM_AARCH64), Arch::Arm64));
        assert!(!static_elf_of(&elf(object::elf::EM_X86_64), Arch::Arm64));
        assert!(static_elf_of(&elf(object::elf::EM_X86_64), Arch::X86_64));
        assert!(!static_elf_of(b"#!/bin/sh\n", Arch::Arm64));
    }

    #[test]
    fn the_harness_header_copy_changes_only_the_timeout() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("src");
        let h = root.join("tools/testing/selftests");
        fs::create_dir_all(&h).unwrap();
        let upstream = "#include \"kselftest.h\"\n\n#define TEST_TIMEOUT_DEFAULT 30\n\n/* x */\n";
        fs::write(h.join("kselftest_harness.h"), upstream).unwrap();
        let inc = d.path().join("inc");
        harness_header(&root, &inc).unwrap();
        let copy = fs::read_to_string(inc.join("kselftest_harness.h")).unwrap();
        assert_eq!(
            copy,
            "#include \"kselftest.h\"\n\n#define TEST_TIMEOUT_DEFAULT 120 /* futex-harness: TCG */\n\n/* x */\n"
        );
        // The tree is untouched.
        assert_eq!(
            fs::read_to_string(h.join("kselftest_harness.h")).unwrap(),
            upstream
        );
        // Another upstream version: an error naming the file.
        fs::write(
            h.join("kselftest_harness.h"),
            "#define TEST_TIMEOUT_DEFAULT 45\n",
        )
        .unwrap();
        let e = harness_header(&root, &inc).unwrap_err().to_string();
        assert!(e.contains("kselftest_harness.h"), "{e}");
    }
}
