//! Patch series: plain diffs (`git apply --index`, then a commit) and mbox
//! files as `git format-patch` and lore produce them (`git am`), applied in
//! order to a git work tree. A patch that does not apply is an error naming
//! the patch file, the file and the hunk (with its `@@` header), from a
//! `patch --dry-run` of it, plus git's own message.

use crate::kernel::definition::InputFile;
use crate::kernel::source::{self, git, SourceError};
use std::path::Path;
use std::process::Stdio;

/// The form of a patch file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// Mail (one or more messages): `git am`.
    Mbox,
    /// A bare diff: `git apply`.
    Diff,
}

/// Tells mbox from plain diff: a mail starts with an mbox `From ` line or
/// has `From:` and `Subject:` headers before the first diff.
pub fn kind(text: &str) -> PatchKind {
    let mut from = false;
    let mut subject = false;
    for line in text.lines() {
        if line.starts_with("diff --git ")
            || line.starts_with("--- ")
            || line.starts_with("Index: ")
        {
            break;
        }
        if line.starts_with("From ") && !from && !subject {
            return PatchKind::Mbox;
        }
        from |= line.starts_with("From:");
        subject |= line.starts_with("Subject:");
    }
    if from && subject {
        PatchKind::Mbox
    } else {
        PatchKind::Diff
    }
}

/// One hunk of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// Target file (`b/` side, prefix stripped).
    pub file: String,
    /// 1-based number of the hunk within its file (as `patch` counts).
    pub number: usize,
    /// The `@@ ... @@ context` line.
    pub header: String,
}

/// The hunks of a patch text, in order.
pub fn hunks(text: &str) -> Vec<Hunk> {
    let mut out = Vec::new();
    let mut file = String::new();
    let mut n = 0;
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("+++ ") {
            let f = f.split('\t').next().unwrap_or(f).trim();
            file = f.strip_prefix("b/").unwrap_or(f).to_string();
            n = 0;
        } else if line.starts_with("@@ ") && !file.is_empty() {
            n += 1;
            out.push(Hunk {
                file: file.clone(),
                number: n,
                header: line.to_string(),
            });
        }
    }
    out
}

/// What `patch --dry-run` said about one failing hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedHunk {
    /// The file.
    pub file: String,
    /// Hunk number in that file.
    pub number: usize,
    /// Line `patch` tried.
    pub at: Option<usize>,
    /// The `@@` header, when found in the patch.
    pub header: Option<String>,
}

/// Parses `patch --dry-run` output into failed hunks (and missing files as
/// hunk 0).
pub fn failed_hunks(patch_output: &str, all: &[Hunk]) -> Vec<FailedHunk> {
    let mut out = Vec::new();
    let mut file = String::new();
    for line in patch_output.lines() {
        if let Some(f) = line
            .strip_prefix("checking file ")
            .or_else(|| line.strip_prefix("patching file "))
        {
            file = f.trim().trim_matches('\'').to_string();
        } else if let Some(rest) = line.strip_prefix("Hunk #") {
            if !rest.contains("FAILED") {
                continue;
            }
            let number: usize = rest
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let at = rest
                .split("FAILED at ")
                .nth(1)
                .and_then(|r| r.trim_end_matches('.').split_whitespace().next())
                .and_then(|n| n.trim_end_matches('.').parse().ok());
            let header = all
                .iter()
                .find(|h| h.file == file && h.number == number)
                .map(|h| h.header.clone());
            out.push(FailedHunk {
                file: file.clone(),
                number,
                at,
                header,
            });
        } else if line.contains("can't find file to patch") || line.contains("No file to patch") {
            out.push(FailedHunk {
                file: file.clone(),
                number: 0,
                at: None,
                header: None,
            });
        }
    }
    out
}

/// A patch of the series that does not apply.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch does not apply.
    #[error("patch {patch} does not apply{}\n{detail}", hunks_summary(.failed))]
    DoesNotApply {
        /// The patch's name (relative to `kernels/patches/`).
        patch: String,
        /// The failing hunks (empty when `patch` could not tell).
        failed: Vec<FailedHunk>,
        /// git's message.
        detail: String,
    },
    /// A tool failed otherwise.
    #[error(transparent)]
    Source(#[from] SourceError),
}

fn hunks_summary(failed: &[FailedHunk]) -> String {
    if failed.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = failed
        .iter()
        .map(|h| {
            if h.number == 0 {
                format!("{}: no such file", h.file)
            } else {
                let mut s = format!("{} hunk #{}", h.file, h.number);
                if let Some(hd) = &h.header {
                    s += &format!(" ({hd})");
                }
                if let Some(at) = h.at {
                    s += &format!(" FAILED at line {at}");
                } else {
                    s += " FAILED";
                }
                s
            }
        })
        .collect();
    format!(": {}", parts.join("; "))
}

/// Applies `patches` in order to the git work tree `src` (which must be
/// clean), committing each.
pub fn apply_series(
    src: &Path,
    patches: &[InputFile],
    say: &dyn Fn(&str),
) -> Result<(), PatchError> {
    let tmp = tempfile::tempdir().map_err(|source| SourceError::Io {
        action: "create temporary directory",
        path: std::env::temp_dir(),
        source,
    })?;
    for (i, p) in patches.iter().enumerate() {
        // Apply exactly the bytes that were hashed into the cache key.
        let file = tmp.path().join(format!("{i:04}.patch"));
        source::write_file(&file, &p.data)?;
        let text = String::from_utf8_lossy(&p.data);
        let k = kind(&text);
        say(&format!(
            "applying {} ({})",
            p.name,
            if k == PatchKind::Mbox {
                "git am"
            } else {
                "git apply"
            }
        ));
        let result = match k {
            PatchKind::Mbox => source::run(
                git()
                    .arg("-C")
                    .arg(src)
                    .args(["am", "-q", "--keep-cr", "--no-3way"])
                    .arg(&file),
            ),
            PatchKind::Diff => source::run(
                git()
                    .arg("-C")
                    .arg(src)
                    .args(["apply", "--index"])
                    .arg(&file),
            )
            .and_then(|_| {
                source::run(git().arg("-C").arg(src).args([
                    "commit",
                    "-q",
                    "--allow-empty",
                    "-m",
                    &format!("harness: {}", p.name),
                ]))
            }),
        };
        if let Err(e) = result {
            let detail = match &e {
                SourceError::Command { stderr, .. } => stderr.clone(),
                other => other.to_string(),
            };
            if k == PatchKind::Mbox {
                let mut abort = git();
                abort.arg("-C").arg(src).args(["am", "--abort"]);
                let _ = abort.stdout(Stdio::null()).stderr(Stdio::null()).status();
            }
            let failed = diagnose(src, &file, &text);
            return Err(PatchError::DoesNotApply {
                patch: p.name.clone(),
                failed,
                detail,
            });
        }
    }
    Ok(())
}

/// Runs `patch -p1 --dry-run` to name the failing hunks (empty when
/// `patch` is missing or reports none).
fn diagnose(src: &Path, file: &Path, text: &str) -> Vec<FailedHunk> {
    let out = std::process::Command::new("patch")
        .current_dir(src)
        .args(["-p1", "--dry-run", "--batch", "--forward", "-F0", "-i"])
        .arg(file)
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) => {
            let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
            s.push_str(&String::from_utf8_lossy(&o.stderr));
            failed_hunks(&s, &hunks(text))
        }
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/k/a.c b/k/a.c\n--- a/k/a.c\n+++ b/k/a.c\n@@ -1,3 +1,3 @@ int f(void)\n a\n-b\n+B\n c\n@@ -10,3 +10,3 @@ int g(void)\n x\n-y\n+Y\n z\ndiff --git a/k/b.c b/k/b.c\n--- a/k/b.c\n+++ b/k/b.c\n@@ -1 +1 @@\n-q\n+Q\n";

    #[test]
    fn kinds() {
        assert_eq!(kind(DIFF), PatchKind::Diff);
        assert_eq!(
            kind(&format!(
                "From 1234 Mon Sep 17 00:00:00 2001\nFrom: a\nSubject: s\n\n---\n{DIFF}"
            )),
            PatchKind::Mbox
        );
        assert_eq!(
            kind(&format!(
                "Message-ID: <x>\nFrom: a <b>\nSubject: [PATCH] s\n\nbody\n{DIFF}"
            )),
            PatchKind::Mbox
        );
        assert_eq!(
            kind(&format!("some notes\nFrom: in text only\n{DIFF}")),
            PatchKind::Diff
        );
    }

    #[test]
    fn hunks_and_failures() {
        let h = hunks(DIFF);
        assert_eq!(h.len(), 3);
        assert_eq!((h[1].file.as_str(), h[1].number), ("k/a.c", 2));
        assert_eq!(h[1].header, "@@ -10,3 +10,3 @@ int g(void)");
        assert_eq!(h[2].number, 1);
        let out = "checking file k/a.c\nHunk #2 FAILED at 10.\n1 out of 2 hunks FAILED\nchecking file k/b.c\n";
        let f = failed_hunks(out, &h);
        assert_eq!(
            f,
            vec![FailedHunk {
                file: "k/a.c".into(),
                number: 2,
                at: Some(10),
                header: Some("@@ -10,3 +10,3 @@ int g(void)".into())
            }]
        );
        let e = PatchError::DoesNotApply {
            patch: "s/0001.patch".into(),
            failed: f,
            detail: "error: patch failed: k/a.c:10".into(),
        };
        assert!(e
            .to_string()
            .starts_with("patch s/0001.patch does not apply: k/a.c hunk #2 (@@ -10,3 +10,3 @@ int g(void)) FAILED at line 10"));
        let missing = failed_hunks("can't find file to patch at input line 3\n", &h);
        assert_eq!(missing[0].number, 0);
    }
}
