//! What a `tree:` kernel tree is right now, read without writing to it:
//! for a git work tree its HEAD and every changed or untracked file with
//! the SHA-256 of its content (read by us), which with the config inputs
//! and the toolchain make the image's cache key.
//!
//! Architecture invariant: nothing here writes into the tree or its
//! `.git` — git runs with `--no-optional-locks` (a plain `git status`
//! refreshes and rewrites the index) and without fsmonitor.

use crate::kernel::build::KeyInputs;
use crate::kernel::cache::sha256_file;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The tree's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeState {
    /// A git work tree.
    Git {
        /// `git rev-parse HEAD` (`None`: no commit yet).
        head: Option<String>,
        /// Each changed, deleted or untracked file below the tree, relative
        /// to the repository's top, with its content's identity (SHA-256,
        /// `deleted`, `symlink:<target>`), sorted.
        changes: Vec<(String, String)>,
    },
    /// Not a git work tree (or one git cannot read): why.
    NotGit(String),
}

impl TreeState {
    /// The base identity in the cache key: `git:<HEAD>` (or `git:unborn`),
    /// `tree:<dir>` for a tree without git.
    pub fn base_identity(&self, dir: &Path) -> String {
        match self {
            TreeState::Git { head, .. } => {
                format!("git:{}", head.as_deref().unwrap_or("unborn"))
            }
            TreeState::NotGit(_) => format!("tree:{}", dir.display()),
        }
    }

    /// The cache key's inputs: `def`'s fragments, requirements and make
    /// variables, the config base (`config`: the SHA-256 of a config file
    /// given instead of `def`'s `tinyconfig`), the tree's changes where a
    /// definition has its patches, the toolchain.
    pub fn key_inputs(
        &self,
        dir: &Path,
        def: &crate::kernel::definition::Definition,
        config: Option<&str>,
        toolchain: Vec<String>,
    ) -> KeyInputs {
        let mut inputs = KeyInputs::new(def, &self.base_identity(dir), toolchain);
        if let Some(sha) = config {
            inputs.config_base = format!("file:{sha}");
        }
        inputs.patches = match self {
            TreeState::Git { changes, .. } => changes.clone(),
            TreeState::NotGit(_) => Vec::new(),
        };
        inputs
    }
}

/// git, read-only: no optional locks (no index refresh), no fsmonitor
/// daemon, and none of the caller's `GIT_DIR`-like variables pointing
/// elsewhere.
fn git_read(dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .arg("--no-optional-locks")
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.untrackedCache=false",
        ])
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            err.lines().next().unwrap_or("failed").trim()
        ));
    }
    Ok(out.stdout)
}

/// Reads the state of `dir` (blocking: git status hashes what changed).
/// `Err` when git says it is a work tree but then cannot list it.
pub fn read(dir: &Path) -> Result<TreeState, String> {
    let top = match git_read(dir, &["rev-parse", "--show-toplevel"]) {
        Ok(t) => PathBuf::from(String::from_utf8_lossy(&t).trim()),
        Err(e) => return Ok(TreeState::NotGit(e)),
    };
    let head = git_read(dir, &["rev-parse", "--verify", "-q", "HEAD"])
        .ok()
        .map(|h| String::from_utf8_lossy(&h).trim().to_string())
        .filter(|h| !h.is_empty());
    let status = git_read(
        dir,
        &[
            "status",
            "--porcelain=v2",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=none",
            "--",
            ".",
        ],
    )?;
    let mut changes: Vec<(String, String)> = changed_paths(&status)
        .into_iter()
        .map(|p| {
            let id = content_id(&top.join(&p));
            (p, id)
        })
        .collect();
    changes.sort();
    changes.dedup();
    Ok(TreeState::Git { head, changes })
}

/// The paths `git status --porcelain=v2 -z` names (both sides of a
/// rename), relative to the repository's top (pure).
pub fn changed_paths(status: &[u8]) -> Vec<String> {
    let mut paths = Vec::new();
    let mut fields = status
        .split(|&b| b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    while let Some(rec) = fields.next() {
        // Fields before the path: `1` has 8, `2` 9 (then the original
        // path as the next record), `u` 10, `?` and `!` 1.
        let before = match rec.as_bytes().first() {
            Some(b'1') => 8,
            Some(b'2') => 9,
            Some(b'u') => 10,
            Some(b'?') | Some(b'!') => 1,
            _ => continue,
        };
        if let Some(p) = rec.splitn(before + 1, ' ').nth(before) {
            paths.push(p.to_string());
        }
        if rec.starts_with('2') {
            paths.extend(fields.next());
        }
    }
    paths
}

/// What a changed path holds now: the SHA-256 of its content (`+x` when
/// executable), `deleted`, `symlink:<target>`, `directory` (a submodule).
fn content_id(path: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::symlink_metadata(path) {
        Err(_) => "deleted".into(),
        Ok(m) if m.file_type().is_symlink() => format!(
            "symlink:{}",
            std::fs::read_link(path).unwrap_or_default().display()
        ),
        Ok(m) if m.is_dir() => "directory".into(),
        Ok(m) => {
            let sha = sha256_file(path).unwrap_or_else(|e| format!("unreadable ({e})"));
            if m.permissions().mode() & 0o111 != 0 {
                format!("{sha} +x")
            } else {
                sha
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn every_record_kind_names_its_paths() {
        let status = b"1 .M N... 100644 100644 100644 aa aa sub/a b\0\
            2 R. N... 100644 100644 100644 bb bb R100 new name\0old name\0\
            u UU N... 100644 100644 100644 100644 c1 c2 c3 conflict\0\
            ? untracked file\0! ignored\0# branch.oid x\0";
        assert_eq!(
            changed_paths(status),
            [
                "sub/a b",
                "new name",
                "old name",
                "conflict",
                "untracked file",
                "ignored"
            ]
        );
        assert!(changed_paths(b"").is_empty());
    }

    fn git(dir: &Path, args: &[&str]) {
        let st = crate::kernel::source::git()
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    }

    /// Every path below `dir` (`.git` included) with its length and
    /// modification time: what any write would change.
    fn listing(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
        let mut v = Vec::new();
        for e in fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let m = fs::symlink_metadata(&p).unwrap();
            v.push((p.clone(), m.len(), m.modified().unwrap()));
            if m.is_dir() {
                v.extend(listing(&p));
            }
        }
        v.sort();
        v
    }

    fn status(dir: &Path) -> String {
        String::from_utf8(git_read(dir, &["status", "--porcelain"]).unwrap()).unwrap()
    }

    #[test]
    fn the_key_follows_tracked_and_untracked_changes_and_never_writes_into_the_repo() {
        if !crate::kernel::source::on_path("git") {
            eprintln!("skipped: no git");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let repo = d.path();
        git(repo, &["init", "-q"]);
        fs::create_dir_all(repo.join("kernel/futex")).unwrap();
        fs::write(repo.join("Makefile"), "VERSION = 7\n").unwrap();
        fs::write(repo.join("kernel/futex/core.c"), "int x;\n").unwrap();
        git(repo, &["add", "."]);
        git(repo, &["commit", "-q", "-m", "base"]);
        let def = crate::kernel::definition::Definition {
            name: "tree".into(),
            path: "/k.yaml".into(),
            description: String::new(),
            version: None,
            expect: None,
            base: crate::kernel::definition::BaseSpec::Local { path: "/".into() },
            patches: Vec::new(),
            config_base: crate::kernel::definition::ConfigBase::Tinyconfig,
            fragments: Vec::new(),
            require: Vec::new(),
            make_vars: Vec::new(),
        };
        let key = |config: Option<&str>| {
            let before = (status(repo), listing(repo));
            let k = read(repo)
                .unwrap()
                .key_inputs(repo, &def, config, vec!["gcc 12".into()])
                .key();
            assert_eq!(
                (status(repo), listing(repo)),
                before,
                "the repo was written"
            );
            k
        };
        let clean = key(None);
        assert!(
            matches!(read(repo).unwrap(), TreeState::Git { head: Some(_), ref changes } if changes.is_empty())
        );
        assert_eq!(key(None), clean, "nothing changed: the same key");
        assert_ne!(key(Some("abc")), clean, "another config base");

        fs::write(repo.join("kernel/futex/core.c"), "int y;\n").unwrap();
        let edited = key(None);
        assert_ne!(edited, clean, "a tracked file changed");
        assert_eq!(key(None), edited);
        fs::write(repo.join("kernel/futex/core.c"), "int z;\n").unwrap();
        let edited_again = key(None);
        assert_ne!(
            edited_again, edited,
            "the content is in the key, not only the name"
        );

        fs::write(repo.join("kernel/futex/new.c"), "int n;\n").unwrap();
        let untracked = key(None);
        assert_ne!(untracked, edited_again, "an untracked file appeared");
        let TreeState::Git { changes, .. } = read(repo).unwrap() else {
            panic!("a git tree")
        };
        let names: Vec<&str> = changes.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["kernel/futex/core.c", "kernel/futex/new.c"]);

        // Back as committed but with a new mtime: a plain `git status`
        // would refresh (rewrite) the index here.
        fs::remove_file(repo.join("kernel/futex/new.c")).unwrap();
        fs::write(repo.join("kernel/futex/core.c"), "int x;\n").unwrap();
        assert_eq!(key(None), clean, "back as committed: the clean key");
    }

    #[test]
    fn a_directory_without_git_says_why() {
        let d = tempfile::tempdir().unwrap();
        match read(d.path()).unwrap() {
            TreeState::NotGit(why) => assert!(why.contains("git"), "{why}"),
            s => panic!("{s:?}"),
        }
    }
}
