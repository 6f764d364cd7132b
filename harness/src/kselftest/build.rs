//! The build and its cache: the tree's own `make` (headers, then the futex
//! selftests, static), the [`Manifest`] of what was built, and
//! `<cache>/kselftest/futex/<key>/` keyed by the source identity, the gcc
//! version, the libnuma package and [`RECIPE`].

use super::libnuma::{fetch_libnuma, LibNuma, LIBNUMA_MIN};
use super::suite::{programs, Program};
use super::{io_err, source, KselftestError, Options, SourceSpec, FUTEX_DIR};
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
    let gcc = gcc_version()?;
    let mirror = || DebianMirror::discover(opts.mirror.as_deref());
    // The source identity first: cheap for Debian (the .deb is cached).
    let (identity, deb) = source::identity(spec, cache, &mirror)?;
    let numa = match mirror()
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
    let (headers, tests) = make_commands(root, &obj, &out, &include, numa, jobs);
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
