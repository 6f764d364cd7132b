//! Build script: makes the harness self-contained (`cargo install` works
//! without the checkout).
//!
//! - Builds the static guest binaries with a nested `cargo build` of the
//!   `guest-tests` path dependency, in a target dir of its own under
//!   `OUT_DIR` (so it never waits on the outer build's lock), and writes
//!   `guest_bins.rs`: a table that embeds each binary of
//!   `guest_tests::binaries::ALL` (read by compiling `binaries.rs` itself
//!   into this script: no build-dependency, no parser) with `include_bytes!`.
//! - Builds the same set for arm64 when this machine can
//!   (`guestbin/cargo.rs`: an aarch64 Rust std, the cross gcc and static
//!   glibc) into `guest_bins_arm64.rs`; else that table is empty and one
//!   `cargo:warning` says what to install. The script reruns when apt or
//!   rustup change what is installed, so the build after
//!   `harness setup --arch arm64` embeds the set.
//! - Writes `guest_cases.rs`: the cases each futex binary lists
//!   (`--list`, run here on the build host), so the matrix can check a
//!   known failure's `case:` against the cases that really exist.
//! - Writes `shipped.rs`: the same kind of table for `kernels/` and the
//!   default `matrix.yaml`.
//! - Sets `HARNESS_GIT_COMMIT` (`git rev-parse --short HEAD`, `-dirty` when
//!   tracked files differ, `unknown` outside git) for `--version`.
//!
//! Each table carries the SHA-256 of its files: the cache directory they
//! are written into at run time is named by it (`kernel::embedded`).

#[path = "../guest-tests/src/binaries.rs"]
#[allow(dead_code)]
mod binaries;
#[path = "src/guestbin/cargo.rs"]
#[allow(dead_code)]
mod cargo;

use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    let manifest =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let workspace = manifest
        .parent()
        .expect("the harness crate is in a workspace")
        .to_path_buf();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));

    for p in [
        "guest-tests/src",
        "guest-tests/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
        "kernels",
        "matrix.yaml",
    ] {
        println!("cargo:rerun-if-changed={}", workspace.join(p).display());
    }

    let bins = build_guest_bins(
        &workspace,
        &out.join("guest-target"),
        &cargo::X86_64,
        &cargo::Rustc::Default,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    write_table(&out.join("guest_bins.rs"), "guest_bins", &bins);
    write_cases(&out.join("guest_cases.rs"), &bins);
    let arm64 = arm64_bins(&workspace, &out.join("guest-target-arm64"));
    write_table(&out.join("guest_bins_arm64.rs"), "guest_bins_arm64", &arm64);

    let mut shipped = Vec::new();
    files_under(&workspace, Path::new("kernels"), &mut shipped);
    shipped.push(("matrix.yaml".to_string(), workspace.join("matrix.yaml")));
    shipped.sort();
    write_table(&out.join("shipped.rs"), "shipped_tree", &shipped);

    println!(
        "cargo:rustc-env=HARNESS_GIT_COMMIT={}",
        git_commit(&workspace)
    );
}

/// Runs the nested cargo for `target`; returns `(name, path)` of every
/// binary of `ALL`, or what went wrong.
fn build_guest_bins(
    workspace: &Path,
    target_dir: &Path,
    target: &cargo::CrossTarget,
    rustc: &cargo::Rustc,
) -> Result<Vec<(String, PathBuf)>, String> {
    let mut cmd = cargo::build_command_for(target, rustc, workspace, target_dir);
    // The script's stdout is cargo's instruction channel: keep it clean.
    cmd.stdout(Stdio::null());
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo to build the guest binaries: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the guest binaries failed ({status}); command: {cmd:?}"
        ));
    }
    let dir = target_dir.join(target.triple).join("release");
    binaries::ALL
        .iter()
        .map(|b| {
            let p = dir.join(b.name);
            match p.is_file() {
                true => Ok((b.name.to_string(), p)),
                false => Err(format!("the guest build made no {}", p.display())),
            }
        })
        .collect()
}

/// The arm64 set when this machine can build it; else none, with one
/// warning. A broken cross toolchain warns too instead of failing the
/// harness' build: the x86 set, which every run needs, is unaffected.
fn arm64_bins(workspace: &Path, target_dir: &Path) -> Vec<(String, PathBuf)> {
    watch_toolchains();
    let fix = "run `harness setup --arch arm64`, then build or install the harness again";
    match cargo::find_rustc(&cargo::ARM64) {
        Err(missing) => {
            println!("cargo:warning=no arm64 guest binaries built in ({missing}): {fix}");
            Vec::new()
        }
        Ok(rustc) => match build_guest_bins(workspace, target_dir, &cargo::ARM64, &rustc) {
            Ok(bins) => bins,
            Err(e) => {
                println!("cargo:warning=no arm64 guest binaries built in: {e}");
                Vec::new()
            }
        },
    }
}

/// Reruns the script when a toolchain is installed or removed: apt's
/// package database and the outer rustc's list of installed components
/// (`rustup target add`). Only paths that exist: a missing one would rerun
/// the script on every build. A change reruns the nested builds, which are
/// up to date in a second or two.
fn watch_toolchains() {
    let mut watched = vec![PathBuf::from("/var/lib/dpkg/status")];
    let sysroot = Command::new(cargo::default_rustc())
        .args(["--print", "sysroot"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if let Some(root) = sysroot {
        watched.push(Path::new(&root).join("lib/rustlib/components"));
    }
    for p in watched.iter().filter(|p| p.is_file()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}

/// `GUEST_CASES`: `(binary, [case, ...])` of every futex binary, from
/// its own `--list`. The host set's binaries (static x86-64 programs, built
/// for this host), never arm64's; listing runs no case.
fn write_cases(dest: &Path, bins: &[(String, PathBuf)]) {
    let mut rows = String::new();
    for b in binaries::ALL
        .iter()
        .filter(|b| b.role == binaries::Role::Futex)
    {
        let (_, path) = bins
            .iter()
            .find(|(n, _)| n == b.name)
            .unwrap_or_else(|| panic!("no built {}", b.name));
        let out = Command::new(path)
            .arg("--list")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{} --list: {e}", path.display()));
        assert!(
            out.status.success(),
            "{} --list failed ({})",
            path.display(),
            out.status
        );
        let cases: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| format!("{l:?}"))
            .collect();
        assert!(!cases.is_empty(), "{} --list printed no case", b.name);
        let _ = writeln!(rows, "    ({:?}, &[{}]),", b.name, cases.join(", "));
    }
    let text = format!(
        "// Generated by harness/build.rs.\n\
         /// Every futex binary's cases, as its `--list` prints them.\n\
         pub const GUEST_CASES: &[(&str, &[&str])] = &[\n{rows}];\n"
    );
    if std::fs::read_to_string(dest).ok().as_deref() != Some(text.as_str()) {
        std::fs::write(dest, text).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
    }
}

/// Every file below `root/rel`, as (path relative to `root`, path).
fn files_under(root: &Path, rel: &Path, out: &mut Vec<(String, PathBuf)>) {
    let dir = root.join(rel);
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let e = e.expect("directory entry");
        let rel = rel.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            files_under(root, &rel, out);
        } else {
            let name = rel
                .to_str()
                .unwrap_or_else(|| panic!("{}: not UTF-8", rel.display()));
            out.push((name.to_string(), root.join(&rel)));
        }
    }
}

/// `fn NAME() -> &'static Tree` with one `include_bytes!` per file and the
/// SHA-256 over names, lengths and contents. A function, not a `static`:
/// rustc writes a static's bytes into the crate metadata too, which every
/// crate using the library then reads. Written only when it changed, so an
/// unchanged table does not recompile the crate.
fn write_table(dest: &Path, name: &str, files: &[(String, PathBuf)]) {
    let mut hash = Sha256::new();
    let mut entries = String::new();
    for (rel, path) in files {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        hash.update(rel.as_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
        let path = path
            .to_str()
            .unwrap_or_else(|| panic!("{}: not UTF-8", path.display()));
        let _ = writeln!(entries, "            ({rel:?}, include_bytes!({path:?})),");
    }
    let hex: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let text = format!(
        "// Generated by harness/build.rs.\n\
         #[inline(never)]\n\
         fn {name}() -> &'static crate::kernel::embedded::Tree {{\n    \
         &crate::kernel::embedded::Tree {{\n        \
         hash: {hex:?},\n        files: &[\n{entries}        ],\n    }}\n}}\n"
    );
    if std::fs::read_to_string(dest).ok().as_deref() != Some(text.as_str()) {
        std::fs::write(dest, text).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
    }
}

/// `git rev-parse --short HEAD` of the checkout, `-dirty` when tracked files
/// differ from it; `unknown` outside git. Reruns when HEAD moves (a commit,
/// a checkout), not on every edit: the dirty mark is that of the last run.
fn git_commit(workspace: &Path) -> String {
    let git = |args: &[&str]| -> Option<String> {
        let o = Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(commit) = git(&["rev-parse", "--short", "HEAD"]).filter(|c| !c.is_empty()) else {
        return "unknown".into();
    };
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for w in watched {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &w]) {
            // A path that does not exist would rerun the script every build.
            if Path::new(&p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    }
}
