//! One cell's shares: what [`super::ShareSetup`] means for its run plan
//! (modules to load, mounts, `HARNESS_ARTIFACTS`/`HARNESS_SHARES`,
//! `--guest-bin`s that run from a share instead of being packed), and
//! after the run the notes for the report (attachments, shares the guest
//! could not mount). Starts no daemon: see [`super::virtiofsd`].

use super::{ShareError, ShareSetup, ARTIFACTS_DIR, ARTIFACTS_GUEST_PATH, ARTIFACTS_TAG};
use crate::kernel::modules;
use guest_tests::artifact::{encode_shares, ARTIFACTS_ENV, SHARES_ENV};
use guest_tests::plan::{PlannedShare, RunPlan, BIN_DIR};
use std::path::{Path, PathBuf};

/// At most this many attachments are listed (then one note says how many more).
pub const MAX_ATTACHMENTS: usize = 200;

/// One exported directory of a cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// virtiofs tag.
    pub tag: String,
    /// Host directory.
    pub host: PathBuf,
    /// Guest mount point.
    pub guest: String,
    /// Read-only.
    pub read_only: bool,
    /// Asked for explicitly (a failure to mount is an error).
    pub required: bool,
}

/// A cell's shares: what was exported and where artifacts land.
#[derive(Debug, Clone, Default)]
pub struct CellShares {
    /// The daemon.
    pub virtiofsd: Option<PathBuf>,
    /// The exports, in device order.
    pub exports: Vec<Export>,
    /// The artifacts directory on the host, when shared.
    pub artifacts_dir: Option<PathBuf>,
    /// Extra initramfs files: (guest path without `/`, host file).
    pub initramfs_files: Vec<(String, PathBuf)>,
    /// Notes known before the boot.
    pub notes: Vec<String>,
}

/// `p` below `dir`, as a relative path.
fn below(p: &Path, dir: &Path) -> Option<PathBuf> {
    p.strip_prefix(dir).ok().map(Path::to_path_buf)
}

impl CellShares {
    /// Prepares a cell: creates (empties) `<out_dir>/artifacts`, adds the
    /// modules and mounts to `plan`, exports `HARNESS_ARTIFACTS` and
    /// `HARNESS_SHARES` to every test, and lets `--guest-bin`s that lie in
    /// a share run from there (their entries leave `files`).
    pub fn prepare(
        setup: &ShareSetup,
        out_dir: &Path,
        plan: &mut RunPlan,
        files: &mut Vec<(String, PathBuf)>,
    ) -> Result<CellShares, ShareError> {
        let mut cs = CellShares {
            notes: setup.notes.clone(),
            ..CellShares::default()
        };
        if !setup.active() {
            return Ok(cs);
        }
        cs.virtiofsd = setup.virtiofsd.clone();
        if setup.artifacts {
            let dir = out_dir.join(ARTIFACTS_DIR);
            let io = |source| ShareError::Io {
                path: dir.clone(),
                source,
            };
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(io)?;
            }
            std::fs::create_dir_all(&dir).map_err(io)?;
            let dir = std::fs::canonicalize(&dir).map_err(io)?;
            cs.exports.push(Export {
                tag: ARTIFACTS_TAG.into(),
                host: dir.clone(),
                guest: ARTIFACTS_GUEST_PATH.into(),
                read_only: false,
                required: false,
            });
            cs.artifacts_dir = Some(dir);
        }
        for (i, s) in setup.shares.iter().enumerate() {
            cs.exports.push(Export {
                tag: format!("share{i}"),
                host: s.host.clone(),
                guest: s.guest.clone(),
                read_only: s.read_only,
                required: true,
            });
        }
        for m in &setup.modules {
            let g = modules::guest_path(&m.name);
            cs.initramfs_files
                .push((g.trim_start_matches('/').to_string(), m.path.clone()));
            plan.modules.push(g);
        }
        plan.shares = cs
            .exports
            .iter()
            .map(|e| PlannedShare {
                tag: e.tag.clone(),
                path: e.guest.clone(),
                read_only: e.read_only,
                required: e.required,
            })
            .collect();
        let env_shares = encode_shares(
            &cs.exports
                .iter()
                .map(|e| (e.guest.clone(), e.read_only))
                .collect::<Vec<_>>(),
        );
        for t in &mut plan.tests {
            if setup.artifacts {
                t.env
                    .push((ARTIFACTS_ENV.into(), ARTIFACTS_GUEST_PATH.into()));
            }
            t.env.push((SHARES_ENV.into(), env_shares.clone()));
        }
        // Binaries that are already in a (required) share run from there.
        let mut routed = Vec::new();
        for (file, host) in files.iter() {
            let canon = std::fs::canonicalize(host).unwrap_or_else(|_| host.clone());
            let Some((e, rel)) = cs
                .exports
                .iter()
                .filter(|e| e.required)
                .find_map(|e| below(&canon, &e.host).map(|r| (e, r)))
            else {
                continue;
            };
            let guest = format!("{}/{}", e.guest, rel.to_string_lossy());
            let packed = format!("{BIN_DIR}/{file}");
            for t in plan.tests.iter_mut().filter(|t| t.path == packed) {
                t.path = guest.clone();
            }
            cs.notes.push(format!(
                "{} runs from share {} as {guest} (not packed into the initramfs)",
                host.display(),
                e.tag
            ));
            routed.push(file.clone());
        }
        files.retain(|(f, _)| !routed.contains(f));
        Ok(cs)
    }

    /// Notes after the run: an `[[ATTACHMENT|path]]` per artifact (sorted,
    /// at most [`MAX_ATTACHMENTS`]) and the shares the guest reported it
    /// could not mount (from guest-init's `share TAG not mounted` lines on
    /// the console).
    pub fn finish(&self, console: &[u8]) -> Vec<String> {
        let mut notes = Vec::new();
        let text = String::from_utf8_lossy(console);
        for e in &self.exports {
            let marker = format!("harness: share {} not mounted: ", e.tag);
            if let Some(line) = text.lines().find_map(|l| {
                l.find(&marker)
                    .map(|i| l[i + marker.len()..].trim().to_string())
            }) {
                notes.push(format!(
                    "share {} ({} on {}) was not mounted in the guest: {}",
                    e.tag,
                    e.host.display(),
                    e.guest,
                    crate::vm::tail(&line, 300)
                ));
            }
        }
        if let Some(dir) = &self.artifacts_dir {
            let files = list_files(dir);
            let total = files.len();
            for f in files.iter().take(MAX_ATTACHMENTS) {
                notes.push(attachment(f));
            }
            if total > MAX_ATTACHMENTS {
                notes.push(format!(
                    "{} more artifacts in {} not listed",
                    total - MAX_ATTACHMENTS,
                    dir.display()
                ));
            }
        }
        notes
    }
}

/// The JUnit attachment line for a file (Jenkins' and GitLab's convention).
pub fn attachment(path: &Path) -> String {
    format!("[[ATTACHMENT|{}]]", path.display())
}

/// Regular files below `dir`, sorted, not following symlinks.
pub fn list_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => out.push(e.path()),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::modules::ModuleFile;
    use crate::share::ShareSpec;
    use guest_tests::plan::PlannedTest;

    #[test]
    fn cell_plan_gets_mounts_env_modules_and_routed_binaries() {
        let out = tempfile::tempdir().unwrap();
        let bins = tempfile::tempdir().unwrap();
        let bin = bins.path().join("mytest");
        std::fs::write(&bin, b"\x7fELF").unwrap();
        std::fs::create_dir_all(out.path().join("artifacts")).unwrap();
        std::fs::write(out.path().join("artifacts/stale"), b"old").unwrap();
        let setup = ShareSetup {
            shares: vec![ShareSpec {
                host: std::fs::canonicalize(bins.path()).unwrap(),
                guest: "/mnt/bins".into(),
                read_only: true,
            }],
            artifacts: true,
            virtiofsd: Some("/usr/bin/virtiofsd".into()),
            modules: vec![ModuleFile {
                name: "fuse".into(),
                path: "/cache/fuse.ko".into(),
            }],
            notes: vec!["n".into()],
        };
        let test = |name: &str, path: &str| PlannedTest {
            name: name.into(),
            path: path.into(),
            args: vec![],
            env: vec![],
            timeout_ms: 1,
            max_output_bytes: 1,
            one_pipe: false,
        };
        let mut plan = RunPlan {
            version: 1,
            tests: vec![
                test("smoke", "/harness/bin/smoke"),
                test("mytest", "/harness/bin/user-mytest"),
            ],
            ..RunPlan::default()
        };
        let mut files = vec![
            ("smoke".to_string(), PathBuf::from("/t/smoke")),
            ("user-mytest".to_string(), bin.clone()),
        ];
        let cs = CellShares::prepare(&setup, out.path(), &mut plan, &mut files).unwrap();
        assert!(!out.path().join("artifacts/stale").exists(), "emptied");
        assert_eq!(plan.modules, ["/harness/modules/fuse.ko"]);
        assert_eq!(
            cs.initramfs_files,
            [(
                "harness/modules/fuse.ko".to_string(),
                PathBuf::from("/cache/fuse.ko")
            )]
        );
        let tags: Vec<(&str, &str, bool, bool)> = plan
            .shares
            .iter()
            .map(|s| (s.tag.as_str(), s.path.as_str(), s.read_only, s.required))
            .collect();
        assert_eq!(
            tags,
            [
                ("artifacts", "/harness/artifacts", false, false),
                ("share0", "/mnt/bins", true, true)
            ]
        );
        assert!(plan.tests[0]
            .env
            .contains(&("HARNESS_ARTIFACTS".into(), "/harness/artifacts".into())));
        assert!(plan.tests[0].env.contains(&(
            "HARNESS_SHARES".into(),
            "/harness/artifacts:rw,/mnt/bins:ro".into()
        )));
        assert_eq!(plan.tests[1].path, "/mnt/bins/mytest");
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(
            cs.notes.iter().any(|n| n.contains("not packed")),
            "{:?}",
            cs.notes
        );

        // After the run: attachments and mount failures.
        let art = out.path().join("artifacts");
        std::fs::create_dir_all(art.join("sub")).unwrap();
        std::fs::write(art.join("sub/b.txt"), b"b").unwrap();
        std::fs::write(art.join("a.bin"), b"a").unwrap();
        let notes = cs.finish(b"[ 1.0] harness: share share0 not mounted: mount -t virtiofs share0 /mnt/bins: No such device\n");
        let canon = std::fs::canonicalize(&art).unwrap();
        assert_eq!(notes[0], "share share0 (".to_string() + &cs.exports[1].host.display().to_string() + " on /mnt/bins) was not mounted in the guest: mount -t virtiofs share0 /mnt/bins: No such device");
        assert_eq!(
            notes[1],
            format!("[[ATTACHMENT|{}]]", canon.join("a.bin").display())
        );
        assert_eq!(
            notes[2],
            format!("[[ATTACHMENT|{}]]", canon.join("sub/b.txt").display())
        );
    }

    #[test]
    fn inactive_setup_changes_nothing() {
        let out = tempfile::tempdir().unwrap();
        let mut plan = RunPlan::default();
        let mut files = vec![];
        let setup = ShareSetup {
            notes: vec!["no artifacts share".into()],
            ..ShareSetup::none()
        };
        let cs = CellShares::prepare(&setup, out.path(), &mut plan, &mut files).unwrap();
        assert_eq!(plan, RunPlan::default());
        assert!(cs.exports.is_empty() && cs.notes == ["no artifacts share"]);
        assert!(!out.path().join("artifacts").exists());
    }
}
