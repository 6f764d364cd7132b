//! The git plumbing of a bisection: running git in the tree, refusing trees
//! we must not touch, resolving revisions, putting the tree back, and reading
//! `git bisect run`'s answer.

use super::{infra, BisectError};
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs git in `tree`; stdout on success.
pub(super) fn git(tree: &Path, args: &[&str]) -> Result<String, BisectError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(tree)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| infra(format!("git: {e}")))?;
    if !out.status.success() {
        return Err(infra(format!(
            "git {} in {}: {}",
            args.join(" "),
            tree.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Refuses trees that are not git work trees, are dirty or mid-bisect.
pub fn check_tree(tree: &Path) -> Result<(), BisectError> {
    let top = git(tree, &["rev-parse", "--show-toplevel"])
        .map_err(|_| BisectError::Usage(format!("{}: not a git work tree", tree.display())))?;
    let _ = top;
    // Read-only: no index refresh (a dry run touches nothing).
    let dirty = git(
        tree,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
        ],
    )?;
    if !dirty.trim().is_empty() {
        return Err(BisectError::Usage(format!(
            "{}: the work tree has uncommitted changes; commit or stash them first:\n{}",
            tree.display(),
            dirty.trim_end()
        )));
    }
    let start = git(tree, &["rev-parse", "--git-path", "BISECT_START"])?;
    let start = tree.join(start.trim());
    if start.exists() {
        return Err(BisectError::Usage(format!(
            "{}: a git bisect is already in progress; finish it with `git bisect reset`",
            tree.display()
        )));
    }
    Ok(())
}

/// `r` as a full commit id; `opt` names the option it came from.
pub(super) fn rev(tree: &Path, r: &str, opt: &str) -> Result<String, BisectError> {
    git(
        tree,
        &["rev-parse", "--verify", "-q", &format!("{r}^{{commit}}")],
    )
    .map(|s| s.trim().to_string())
    .map_err(|_| BisectError::Usage(format!("{opt} {r:?}: no such commit")))
}

/// Puts the tree back (`git bisect reset`) when dropped.
pub(super) struct ResetGuard<'a> {
    /// The tree to reset.
    pub(super) tree: &'a Path,
    /// Where a failed reset is said.
    pub(super) say: fn(&str),
}

impl Drop for ResetGuard<'_> {
    fn drop(&mut self) {
        if let Err(e) = git(self.tree, &["bisect", "reset"]) {
            (self.say)(&format!("bisect: could not reset the tree: {e}"));
        }
    }
}

/// The commit `git bisect run`'s output names as the first bad one.
pub fn parse_first_bad(output: &str) -> Option<String> {
    output.lines().find_map(|l| {
        let (sha, rest) = l.trim().split_once(' ')?;
        (rest.trim() == "is the first bad commit"
            && sha.len() >= 7
            && sha.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| sha.to_string())
    })
}

/// The first bad commit's description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// Full id.
    pub id: String,
    /// Subject.
    pub subject: String,
    /// `Name <mail>`.
    pub author: String,
    /// Author date.
    pub date: String,
}

/// The subject, author and date of commit `id`.
pub(super) fn commit_info(tree: &Path, id: &str) -> Result<CommitInfo, BisectError> {
    let s = git(tree, &["show", "-s", "--format=%H%n%s%n%an <%ae>%n%ad", id])?;
    let mut l = s.lines().map(String::from);
    Ok(CommitInfo {
        id: l.next().unwrap_or_default(),
        subject: l.next().unwrap_or_default(),
        author: l.next().unwrap_or_default(),
        date: l.next().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bad_commit_from_git_output() {
        let out = "running 'harness' 'bisect-step'\n\
            Bisecting: 0 revisions left to test after this (roughly 0 steps)\n\
            [0123456789abcdef0123456789abcdef01234567] futex: x\n\
            0123456789abcdef0123456789abcdef01234567 is the first bad commit\n\
            commit 0123456789abcdef0123456789abcdef01234567\n\
            Author: A <a@b>\n\n    this is the first bad commit in a message\n";
        assert_eq!(
            parse_first_bad(out).as_deref(),
            Some("0123456789abcdef0123456789abcdef01234567")
        );
        assert_eq!(
            parse_first_bad("There are only 'skip'ped commits left to test.\nThe first bad commit could be any of:\nabc\n"),
            None
        );
        assert_eq!(parse_first_bad("nothing is the first bad commit\n"), None);
    }
}
