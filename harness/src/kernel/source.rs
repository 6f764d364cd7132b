//! Kernel source bases: a Debian `linux-source-X.Y` package, a local tree or
//! a git repository + ref, each imported into one bare git repository in the
//! cache (`kbuild/git/bases.git`) so that every base is a commit, and checked
//! out into per-definition work trees.
//!
//! Why git: a work tree is reset to its base with `git reset --hard`, which
//! rewrites only the files that differ (those the previous patch series
//! touched), so `make` in the out-of-tree object directory rebuilds only what
//! changed; the imported source itself stays pristine (it lives only as git
//! objects), and the objects of 7.2 and 7.3 are shared.

use crate::kernel::cache::{Cache, CacheError};
use crate::kernel::deb;
use crate::kernel::definition::BaseSpec;
use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Errors preparing a base.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A command failed.
    #[error("{what} failed ({status}): {stderr}")]
    Command {
        /// The command line.
        what: String,
        /// Exit status.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// A command could not be started.
    #[error("cannot run {what}: {source} (is it installed?)")]
    Spawn {
        /// The program.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// File system trouble.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The cache failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// Fetching the Debian package failed.
    #[error(transparent)]
    Debian(#[from] crate::kernel::debian::DebianError),
    /// Reading the Debian package failed.
    #[error(transparent)]
    Deb(#[from] deb::DebError),
    /// The package has no source tarball or the tarball has no single top directory.
    #[error("{0}")]
    Layout(String),
    /// A local base is not a directory with a kernel Makefile.
    #[error("local base {0}: not a kernel tree (no Makefile and Kconfig)")]
    NotATree(PathBuf),
}

/// Runs `cmd`, returning its stdout; a failure carries the tail of stderr.
pub fn run(cmd: &mut Command) -> Result<String, SourceError> {
    let what = describe(cmd);
    tracing::debug!("running {what}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| SourceError::Spawn {
            what: what.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(SourceError::Command {
            what,
            status: out.status.to_string(),
            stderr: tail(&String::from_utf8_lossy(&out.stderr), 20),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `program arg arg ...` for messages (arguments truncated).
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args().take(8) {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A `git` command with a fixed identity, no auto-gc and no user config.
pub fn git() -> Command {
    let mut c = Command::new("git");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "futex-harness")
        .env("GIT_AUTHOR_EMAIL", "harness@localhost")
        .env("GIT_COMMITTER_NAME", "futex-harness")
        .env("GIT_COMMITTER_EMAIL", "harness@localhost")
        .env("GIT_AUTHOR_DATE", "@0 +0000")
        .env("GIT_COMMITTER_DATE", "@0 +0000")
        .env("GIT_TERMINAL_PROMPT", "0")
        .args(["-c", "gc.auto=0", "-c", "advice.detachedHead=false"]);
    c
}

/// A prepared base: a commit in the bases repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    /// What the base is, for the cache key (`debian:<file>.deb`,
    /// `git:<commit>`, `tree:<tree id>`).
    pub identity: String,
    /// The bases repository.
    pub repo: PathBuf,
    /// The commit to check out.
    pub commit: String,
}

/// The cache's bases repository (created on first use).
pub fn bases_repo(cache: &Cache) -> Result<PathBuf, SourceError> {
    let repo = cache.path("kbuild/git/bases.git");
    if repo.join("HEAD").exists() {
        return Ok(repo);
    }
    let _lock = cache.lock("kbuild-git-init")?;
    if !repo.join("HEAD").exists() {
        fs::create_dir_all(&repo).map_err(|source| SourceError::Io {
            action: "create",
            path: repo.clone(),
            source,
        })?;
        run(git().arg("init").arg("-q").arg("--bare").arg(&repo))?;
    }
    Ok(repo)
}

fn rev_parse(repo: &Path, rev: &str) -> Option<String> {
    run(git()
        .arg("--git-dir")
        .arg(repo)
        .args(["rev-parse", "-q", "--verify", rev]))
    .ok()
    .map(|s| s.trim().to_string())
    .filter(|s| !s.is_empty())
}

fn ref_component(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .replace("..", "_")
        .trim_end_matches(".lock")
        .to_string()
}

/// Imports the directory `tree` as a root commit; `all` also adds files
/// that `.gitignore` would exclude (right for pristine tarballs).
fn import_tree(
    repo: &Path,
    tree: &Path,
    index: &Path,
    all: bool,
    message: &str,
) -> Result<(String, String), SourceError> {
    let g = |args: &[&str]| {
        let mut c = git();
        c.arg("--git-dir")
            .arg(repo)
            .arg("--work-tree")
            .arg(tree)
            .env("GIT_INDEX_FILE", index)
            .args(args);
        c
    };
    let add: &[&str] = if all {
        &["add", "-A", "-f", "."]
    } else {
        &["add", "-A", "."]
    };
    run(&mut g(add))?;
    let tree_id = run(&mut g(&["write-tree"]))?.trim().to_string();
    let commit = run(&mut g(&["commit-tree", &tree_id, "-m", message]))?
        .trim()
        .to_string();
    Ok((tree_id, commit))
}

/// Resolves a base to a commit in the bases repository, importing or
/// fetching it the first time. `mirror` is used for Debian packages.
pub fn prepare(
    spec: &BaseSpec,
    cache: &Cache,
    mirror: &dyn Fn() -> Result<
        crate::kernel::debian::DebianMirror,
        crate::kernel::debian::DebianError,
    >,
    say: &dyn Fn(&str),
) -> Result<Base, SourceError> {
    let repo = bases_repo(cache)?;
    match spec {
        BaseSpec::Debian { package } => {
            let deb_path = {
                let m = mirror()?;
                m.fetch_package(package, cache)?
            };
            let file = deb_path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let identity = format!("debian:{file}");
            let refname = format!("refs/harness/debian/{}", ref_component(&file));
            if let Some(commit) = rev_parse(&repo, &refname) {
                return Ok(Base {
                    identity,
                    repo,
                    commit,
                });
            }
            let _lock = cache.lock(&format!("kbuild-import-{file}"))?;
            if let Some(commit) = rev_parse(&repo, &refname) {
                return Ok(Base {
                    identity,
                    repo,
                    commit,
                });
            }
            say(&format!("extracting the source tarball of {file} (once)"));
            let tmp = tempfile::Builder::new()
                .prefix("import-")
                .tempdir_in(ensure_dir(&cache.path("kbuild/tmp"))?)
                .map_err(|source| SourceError::Io {
                    action: "create temporary directory in",
                    path: cache.path("kbuild/tmp"),
                    source,
                })?;
            let unpack = tmp.path().join("src");
            ensure_dir(&unpack)?;
            let top = unpack_source_tarball(&deb_path, &unpack, &[])?;
            say(&format!(
                "importing {} into {}",
                top.display(),
                repo.display()
            ));
            let (_, commit) = import_tree(
                &repo,
                &top,
                &tmp.path().join("index"),
                true,
                &format!("base {identity}"),
            )?;
            run(git()
                .arg("--git-dir")
                .arg(&repo)
                .args(["update-ref", &refname, &commit]))?;
            Ok(Base {
                identity,
                repo,
                commit,
            })
        }
        BaseSpec::Local { path } => {
            if !path.join("Makefile").is_file() || !path.join("Kconfig").is_file() {
                return Err(SourceError::NotATree(path.clone()));
            }
            let canon = fs::canonicalize(path).map_err(|source| SourceError::Io {
                action: "resolve",
                path: path.clone(),
                source,
            })?;
            let tag = crate::kernel::cache::sha256_hex(canon.as_os_str().as_encoded_bytes());
            let _lock = cache.lock(&format!("kbuild-local-{}", &tag[..16]))?;
            // A persistent index per tree: re-adding an unchanged tree only stats.
            let index = cache.path(format!("kbuild/git/local-index-{}", &tag[..16]));
            let (tree, commit) = import_tree(
                &repo,
                &canon,
                &index,
                false,
                &format!("local tree {}", canon.display()),
            )?;
            run(git().arg("--git-dir").arg(&repo).args([
                "update-ref",
                &format!("refs/harness/local/{}", &tag[..16]),
                &commit,
            ]))?;
            Ok(Base {
                identity: format!("tree:{tree}"),
                repo,
                commit,
            })
        }
        BaseSpec::Git { url, rev } => {
            let full_sha = rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit());
            if full_sha {
                if let Some(c) = rev_parse(&repo, &format!("{rev}^{{commit}}")) {
                    return Ok(Base {
                        identity: format!("git:{c}"),
                        repo,
                        commit: c,
                    });
                }
            }
            let _lock = cache.lock("kbuild-git-fetch")?;
            say(&format!("fetching {rev} from {url}"));
            run(git()
                .arg("--git-dir")
                .arg(&repo)
                .args(["fetch", "-q", "--no-tags", url, rev]))?;
            let commit = rev_parse(&repo, "FETCH_HEAD^{commit}").ok_or_else(|| {
                SourceError::Layout(format!("{url} {rev}: fetched, but no commit"))
            })?;
            let key = crate::kernel::cache::sha256_hex(format!("{url} {rev}").as_bytes());
            run(git().arg("--git-dir").arg(&repo).args([
                "update-ref",
                &format!("refs/harness/git/{}", &key[..16]),
                &commit,
            ]))?;
            Ok(Base {
                identity: format!("git:{commit}"),
                repo,
                commit,
            })
        }
    }
}

fn ensure_dir(p: &Path) -> Result<PathBuf, SourceError> {
    fs::create_dir_all(p).map_err(|source| SourceError::Io {
        action: "create",
        path: p.to_path_buf(),
        source,
    })?;
    Ok(p.to_path_buf())
}

/// Streams the `usr/src/*.tar.*` of a `linux-source` package into `tar -x`
/// below `into`; returns the tarball's one top directory. `exclude`: GNU tar
/// `--exclude` patterns of members left out (`*` does not match a `/`).
pub fn unpack_source_tarball(
    deb_path: &Path,
    into: &Path,
    exclude: &[String],
) -> Result<PathBuf, SourceError> {
    // Only with patterns: without, the command stays one any tar runs.
    let matching: &[&str] = if exclude.is_empty() {
        &[]
    } else {
        &["--no-wildcards-match-slash"]
    };
    let mut child = Command::new("tar")
        .arg("-x")
        .arg("-J")
        .arg("-C")
        .arg(into)
        .arg("-f")
        .arg("-")
        .args(matching)
        .args(exclude.iter().map(|p| format!("--exclude={p}")))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| SourceError::Spawn {
            what: "tar".into(),
            source,
        })?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let res = deb::extract_matching(
        deb_path,
        &|p| {
            let p = p.trim_start_matches("./");
            p.starts_with("usr/src/linux-source-") && p.ends_with(".tar.xz")
        },
        "usr/src/linux-source-*.tar.xz",
        &mut stdin,
    );
    drop(stdin);
    let out = child
        .wait_with_output()
        .map_err(|source| SourceError::Spawn {
            what: "tar".into(),
            source,
        })?;
    res?;
    if !out.status.success() {
        return Err(SourceError::Command {
            what: "tar -xJ".into(),
            status: out.status.to_string(),
            stderr: tail(&String::from_utf8_lossy(&out.stderr), 10),
        });
    }
    single_subdir(into)
}

fn single_subdir(dir: &Path) -> Result<PathBuf, SourceError> {
    let entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|source| SourceError::Io {
            action: "read",
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    match entries.as_slice() {
        [one] if one.is_dir() => Ok(one.clone()),
        _ => Err(SourceError::Layout(format!(
            "the source tarball should hold one top directory, found {} entries",
            entries.len()
        ))),
    }
}

/// Makes `dir` a work tree of `base.repo` at `base.commit`, pristine:
/// created with `git worktree add` the first time, later reset (only
/// changed files are rewritten) and cleaned of anything untracked.
pub fn checkout(base: &Base, dir: &Path) -> Result<(), SourceError> {
    if dir.join(".git").exists() {
        let mut abort = git();
        abort.arg("-C").arg(dir).args(["am", "--abort"]);
        let _ = abort.stderr(Stdio::null()).stdout(Stdio::null()).status();
        run(git()
            .arg("-C")
            .arg(dir)
            .args(["reset", "-q", "--hard", &base.commit]))?;
        run(git()
            .arg("-C")
            .arg(dir)
            .args(["clean", "-q", "-f", "-d", "-x"]))?;
        return Ok(());
    }
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(|source| SourceError::Io {
            action: "remove",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    if let Some(p) = dir.parent() {
        ensure_dir(p)?;
    }
    run(git()
        .arg("--git-dir")
        .arg(&base.repo)
        .args(["worktree", "prune"]))?;
    run(git()
        .arg("--git-dir")
        .arg(&base.repo)
        .args(["worktree", "add", "-q", "--detach", "--force"])
        .arg(dir)
        .arg(&base.commit))?;
    Ok(())
}

/// Removes a work tree (and its registration in the bases repository).
pub fn remove_checkout(repo: &Path, dir: &Path) -> Result<(), SourceError> {
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(|source| SourceError::Io {
            action: "remove",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    if repo.join("HEAD").exists() {
        run(git().arg("--git-dir").arg(repo).args(["worktree", "prune"]))?;
    }
    Ok(())
}

/// Writes `data` to `path` (creating parents).
pub fn write_file(path: &Path, data: &[u8]) -> Result<(), SourceError> {
    if let Some(p) = path.parent() {
        ensure_dir(p)?;
    }
    let mut f = fs::File::create(path).map_err(|source| SourceError::Io {
        action: "create",
        path: path.to_path_buf(),
        source,
    })?;
    f.write_all(data).map_err(|source| SourceError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })
}

/// Whether `program` is on `PATH`.
pub fn on_path(program: impl AsRef<OsStr>) -> bool {
    let program = program.as_ref();
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            let p = d.join(program);
            fs::metadata(&p).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_components_are_safe() {
        assert_eq!(
            ref_component("linux-source-7.3_7.3.4-1~bpo13+1_all.deb"),
            "linux-source-7.3_7.3.4-1_bpo13+1_all.deb"
        );
        assert_eq!(ref_component("a..b.lock"), "a_b");
    }

    #[test]
    fn tails() {
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
        assert_eq!(tail("", 2), "");
    }

    #[test]
    fn local_base_through_git() {
        if !on_path("git") {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::at(d.path().join("cache"));
        let tree = d.path().join("linux");
        fs::create_dir_all(tree.join("kernel")).unwrap();
        fs::write(tree.join("Makefile"), "all:\n").unwrap();
        fs::write(tree.join("Kconfig"), "config A\n\tbool\n").unwrap();
        fs::write(tree.join("kernel/a.c"), "int a;\n").unwrap();
        let nomirror = || -> Result<crate::kernel::debian::DebianMirror, _> { unreachable!() };
        let spec = BaseSpec::Local { path: tree.clone() };
        let b1 = prepare(&spec, &cache, &nomirror, &|_| {}).unwrap();
        let b2 = prepare(&spec, &cache, &nomirror, &|_| {}).unwrap();
        assert_eq!(b1, b2);
        assert!(b1.identity.starts_with("tree:"));
        fs::write(tree.join("kernel/a.c"), "int b;\n").unwrap();
        let b3 = prepare(&spec, &cache, &nomirror, &|_| {}).unwrap();
        assert_ne!(b1.identity, b3.identity);
        // Checkout, dirty it, checkout again: pristine.
        let wt = d.path().join("work/src");
        checkout(&b1, &wt).unwrap();
        assert_eq!(
            fs::read_to_string(wt.join("kernel/a.c")).unwrap(),
            "int a;\n"
        );
        fs::write(wt.join("kernel/a.c"), "dirty").unwrap();
        fs::write(wt.join("junk"), "x").unwrap();
        checkout(&b3, &wt).unwrap();
        assert_eq!(
            fs::read_to_string(wt.join("kernel/a.c")).unwrap(),
            "int b;\n"
        );
        assert!(!wt.join("junk").exists());
        // A git base from the same directory made into a repository.
        assert!(matches!(
            prepare(
                &BaseSpec::Local {
                    path: d.path().join("nope")
                },
                &cache,
                &nomirror,
                &|_| {}
            ),
            Err(SourceError::NotATree(_))
        ));
    }
}
