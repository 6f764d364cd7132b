//! `tree:DIR` kernels: the user's own kernel working tree, built as it is
//! (uncommitted changes included) out of tree, with the `7.3` definition's
//! config (tinyconfig, or a config file instead, + its fragments + its
//! required options), and the image cached by the tree's content.
//!
//! Layout under the cache: `kbuild/trees/<id>/{obj,build.log,tree}` (the
//! object directory, kept for incremental builds; the last log; which tree
//! it is), `kbuild/images/tree-<id>/<key>/` (bzImage, config, build.log,
//! meta.json, vmlinux; the newest [`KEEP_IMAGES`]). `<id>` hashes the
//! canonical DIR, `<key>` the tree's state ([`state`]), config inputs and
//! toolchain: a hit runs no make. A tree without git has no such key, so
//! make runs every time (incrementally).
//!
//! Architecture invariant: nothing is written into DIR — no `.config`, no
//! objects, no git command that writes into its `.git` — and a tree kbuild
//! would refuse to build out of tree (configured in place) is refused
//! before make runs.

pub mod state;

use crate::kernel::build::{self, BuildError, BuildOptions};
use crate::kernel::cache::{sha256_file, sha256_hex, Cache, CacheError};
use crate::kernel::definition::Definition;
use state::TreeState;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The definition whose config base, fragments and required options a
/// tree is built with (its base, patches, version and expectations are
/// not used).
pub const DEFINITION: &str = "7.3";

/// Cached images kept per tree (the newest; a cache hit counts as new).
pub const KEEP_IMAGES: usize = 3;

/// What kbuild's `outputmakefile` refuses an `O=` build for: the source
/// tree configured or built in place.
pub const IN_PLACE: &[&str] = &[
    ".config",
    "include/config",
    "arch/x86/include/generated",
    "arch/arm64/include/generated",
];

/// A `tree:DIR` spec, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeSpec {
    /// The tree, canonical.
    pub dir: PathBuf,
    /// `make kernelversion` as the top Makefile says (`7.3.4`).
    pub version: Option<String>,
    /// A config file to start from instead of tinyconfig (`--kernel-config`).
    pub config: Option<PathBuf>,
}

/// Why a directory cannot be a `tree:` kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeSpecError {
    /// Nothing there.
    #[error("{}: no such directory", .0.display())]
    Missing(PathBuf),
    /// A file.
    #[error("{} is a file, not a kernel tree directory", .0.display())]
    NotADirectory(PathBuf),
    /// Not readable.
    #[error("{}: {why}", path.display())]
    Unreadable {
        /// The directory.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// No top-level `Makefile` and `Kconfig`.
    #[error("{} is not a kernel source tree (no top-level Makefile and Kconfig)", .0.display())]
    NotAKernelTree(PathBuf),
    /// Configured or built in place: kbuild refuses `O=` builds of it.
    #[error(
        "{dir} is configured in place (it has {found}): the harness builds out of tree \
         (make O=<its cache>) and never writes into your tree, and kbuild refuses an O= build \
         of a configured source tree. Run `make mrproper` in {dir} (it deletes .config and the \
         objects: keep a copy of .config and pass it with --kernel-config), or use a clean copy \
         (`git worktree add`)",
        dir = .dir.display(),
        found = .found.join(", ")
    )]
    Configured {
        /// The tree.
        dir: PathBuf,
        /// What is there ([`IN_PLACE`]).
        found: Vec<String>,
    },
}

impl TreeSpec {
    /// Checks `dir`: a directory with a top-level `Makefile` and `Kconfig`,
    /// not configured in place; reads its version. No config file yet.
    pub fn parse(dir: &Path) -> Result<TreeSpec, TreeSpecError> {
        let meta = fs::metadata(dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => TreeSpecError::Missing(dir.into()),
            _ => TreeSpecError::Unreadable {
                path: dir.into(),
                why: e.to_string(),
            },
        })?;
        if !meta.is_dir() {
            return Err(TreeSpecError::NotADirectory(dir.into()));
        }
        let dir = fs::canonicalize(dir).map_err(|e| TreeSpecError::Unreadable {
            path: dir.into(),
            why: e.to_string(),
        })?;
        if !dir.join("Makefile").is_file() || !dir.join("Kconfig").is_file() {
            return Err(TreeSpecError::NotAKernelTree(dir));
        }
        let found: Vec<String> = IN_PLACE
            .iter()
            .filter(|p| dir.join(p).exists())
            .map(|p| p.to_string())
            .collect();
        if !found.is_empty() {
            return Err(TreeSpecError::Configured { dir, found });
        }
        let version = fs::read_to_string(dir.join("Makefile"))
            .ok()
            .and_then(|m| makefile_version(&m));
        Ok(TreeSpec {
            dir,
            version,
            config: None,
        })
    }

    /// `tree:<dir>`.
    pub fn label(&self) -> String {
        format!("tree:{}", self.dir.display())
    }
}

/// What `make kernelversion` prints, from the top Makefile's `VERSION`,
/// `PATCHLEVEL`, `SUBLEVEL` and `EXTRAVERSION` (pure).
pub fn makefile_version(makefile: &str) -> Option<String> {
    let var = |name: &str| {
        makefile.lines().take(20).find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let mut v = var("VERSION").filter(|v| !v.is_empty())?;
    if let Some(p) = var("PATCHLEVEL").filter(|p| !p.is_empty()) {
        v = format!("{v}.{p}");
        if let Some(s) = var("SUBLEVEL").filter(|s| !s.is_empty()) {
            v = format!("{v}.{s}");
        }
    }
    Some(v + &var("EXTRAVERSION").unwrap_or_default())
}

/// Errors building a tree.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The tree is (no longer) buildable out of tree.
    #[error("kernel tree:{}: {why}", dir.display())]
    Spec {
        /// The tree.
        dir: PathBuf,
        /// Why.
        why: TreeSpecError,
    },
    /// The config file could not be read.
    #[error("kernel config {}: {source}", path.display())]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// git could not list the tree's changes.
    #[error("kernel tree:{}: {why}", dir.display())]
    Git {
        /// The tree.
        dir: PathBuf,
        /// git's message.
        why: String,
    },
    /// Configuring or compiling failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The cache.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// I/O in the cache.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What.
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl TreeError {
    /// The user's input is at fault: the tree, the config file, or a
    /// config that lacks a required option. A failing make is the
    /// host's, as for `source:` kernels.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            TreeError::Spec { .. }
                | TreeError::ConfigFile { .. }
                | TreeError::Build(BuildError::Requirements { .. } | BuildError::Fragment(_))
        )
    }
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> TreeError + 'a {
    move |source| TreeError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The tree's id in the cache: 16 hex digits of SHA-256 over its canonical path.
pub fn tree_id(dir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    sha256_hex(dir.as_os_str().as_bytes())[..16].to_string()
}

/// `kbuild/trees/<id>`: the object directory (`obj`) and the last build's
/// log (`build.log`) of the tree `dir`.
pub fn work_dir(cache: &Cache, dir: &Path) -> PathBuf {
    work_dir_for(cache, dir, crate::arch::Arch::X86_64)
}

/// [`work_dir`] of `arch`'s builds: `kbuild/trees/<id>` on x86-64,
/// `kbuild/trees/<id>@arm64` (its own object directory) on arm64.
pub fn work_dir_for(cache: &Cache, dir: &Path, arch: crate::arch::Arch) -> PathBuf {
    cache.path(Path::new("kbuild/trees").join(build::arch_name(&tree_id(dir), arch)))
}

/// The images' name under `kbuild/images/`: `tree-<id>`.
pub fn images_name(dir: &Path) -> String {
    format!("tree-{}", tree_id(dir))
}

/// A tree's image.
#[derive(Debug, Clone)]
pub struct TreeBuilt {
    /// The bzImage in the cache (`config`, `build.log`, `vmlinux` beside it).
    pub image: PathBuf,
    /// Its key.
    pub key: String,
    /// Whether make was skipped.
    pub cache_hit: bool,
    /// `make kernelversion`, as the tree says now.
    pub version: Option<String>,
    /// `tree:<dir> (HEAD <id> + N changed files, built in S s | cache hit)`.
    pub description: String,
    /// Wall time of the whole call.
    pub elapsed: Duration,
    /// Fragment lines that did not survive olddefconfig.
    pub warnings: Vec<String>,
}

/// Builds the tree of `spec` with `def`'s config (or finds its image).
/// `say` gets progress lines. Blocking.
pub fn build(
    spec: &TreeSpec,
    def: &Definition,
    cache: &Cache,
    opts: &BuildOptions,
    say: &dyn Fn(&str),
) -> Result<TreeBuilt, TreeError> {
    let t0 = Instant::now();
    let dir = &spec.dir;
    // Again: it may have been configured since the spec was checked, and
    // make's own refusal comes too late and says less.
    let now = TreeSpec::parse(dir).map_err(|why| TreeError::Spec {
        dir: dir.clone(),
        why,
    })?;
    let label = spec.label();
    let arch = opts.arch;
    let mut def = def.for_arch(arch).map_err(BuildError::from)?;
    def.name = label.clone();
    let config_sha = match &spec.config {
        Some(p) => Some(sha256_file(p).map_err(|source| TreeError::ConfigFile {
            path: p.clone(),
            source,
        })?),
        None => None,
    };
    let tree_state = state::read(dir).map_err(|why| TreeError::Git {
        dir: dir.clone(),
        why,
    })?;
    let mut inputs =
        tree_state.key_inputs(dir, &def, config_sha.as_deref(), build::toolchain_for(arch));
    if arch != crate::arch::Arch::X86_64 {
        inputs.arch = arch.name().into();
    }
    let key = matches!(tree_state, TreeState::Git { .. }).then(|| inputs.key());
    let name = build::arch_name(&images_name(dir), arch);
    let summary = summary(&tree_state);
    let done = |image: PathBuf, key: &str, hit: bool, warnings: Vec<String>| TreeBuilt {
        image,
        key: key.to_string(),
        cache_hit: hit,
        version: now.version.clone(),
        description: match hit {
            true => format!("{label} ({summary}, cache hit)"),
            false => format!(
                "{label} ({summary}, built in {:.0} s)",
                t0.elapsed().as_secs_f64()
            ),
        },
        elapsed: t0.elapsed(),
        warnings,
    };
    let hit = || {
        let key = key.as_deref()?;
        let image = cache.path(
            build::images_rel(&name)
                .join(key)
                .join(build::image_name(arch)),
        );
        if !image.is_file() {
            return None;
        }
        // Used now: the newest, so pruning keeps it (best effort).
        let _ = File::open(&image).and_then(|f| f.set_modified(SystemTime::now()));
        Some(done(image, key, true, Vec::new()))
    };
    if let Some(built) = hit() {
        return Ok(built);
    }
    let _lock = cache.lock(&format!(
        "kbuild-tree-{}",
        build::arch_name(&tree_id(dir), arch)
    ))?;
    if let Some(built) = hit() {
        return Ok(built);
    }
    if let TreeState::NotGit(why) = &tree_state {
        say(&format!(
            "{label}: not a git work tree ({why}): nothing to key its image by, so make runs every time (incrementally)"
        ));
    }
    let work = work_dir_for(cache, dir, arch);
    let (obj, log_path) = (work.join("obj"), work.join("build.log"));
    fs::create_dir_all(&work).map_err(io("create", &work))?;
    fs::write(work.join("tree"), format!("{}\n", dir.display())).map_err(io("write", &work))?;
    let mut log = File::create(&log_path).map_err(io("create", &log_path))?;
    let _ = writeln!(
        log,
        "# {label} key {}\n# {}",
        key.as_deref().unwrap_or("(none: not a git tree)"),
        serde_json::to_string(&inputs).unwrap_or_default()
    );
    say(&format!(
        "building {label} ({summary}) for {arch} in {} with make -j{}; log {}",
        obj.display(),
        opts.jobs.max(1),
        log_path.display()
    ));
    let tb = Instant::now();
    let warnings = build::configure_tree(
        &def,
        arch,
        spec.config.as_deref(),
        dir,
        &obj,
        &mut log,
        &log_path,
        say,
    )?;
    let args = build::image_make_args(&def, opts, &obj);
    build::make(&def, arch, dir, &obj, &args, &mut log, &log_path, say, true)?;
    let seconds = tb.elapsed().as_secs_f64();
    say(&format!("{label}: built in {seconds:.0} s"));
    let _ = log.flush();
    let bz = obj.join(arch.kernel_image());
    let key = match key {
        Some(k) => k,
        None => sha256_file(&bz).map_err(io("read", &bz))?[..20].to_string(),
    };
    let meta = serde_json::json!({
        "name": name,
        "tree": dir,
        "key": key,
        "arch": arch,
        "inputs": inputs,
        "changed_files": changed(&tree_state),
        "config": spec.config.as_ref().map_or_else(
            || format!("{} ({} + fragments)", DEFINITION, def.config_base.target()),
            |p| p.display().to_string(),
        ),
        "build_seconds": seconds,
        "warnings": warnings,
    });
    let dir_rel = build::images_rel(&name).join(&key);
    let image = build::store(cache, arch, &dir_rel, &obj, &log_path, &meta)?;
    prune(cache, &name, &key, arch);
    Ok(done(image, &key, false, warnings))
}

/// How many files differ from HEAD (none without git).
fn changed(s: &TreeState) -> usize {
    match s {
        TreeState::Git { changes, .. } => changes.len(),
        TreeState::NotGit(_) => 0,
    }
}

/// `HEAD 0123456789ab + 2 changed files`, `HEAD 0123456789ab`, `not a git tree`.
fn summary(s: &TreeState) -> String {
    let TreeState::Git { head, .. } = s else {
        return "not a git tree".into();
    };
    let head = head.as_deref().map_or("unborn", |h| &h[..h.len().min(12)]);
    match changed(s) {
        0 => format!("HEAD {head}"),
        1 => format!("HEAD {head} + 1 changed file"),
        n => format!("HEAD {head} + {n} changed files"),
    }
}

/// Keeps the newest [`KEEP_IMAGES`] images of `name` (and `keep`);
/// removes the rest and any incomplete entry (the tree's lock is held, so
/// nothing is being written there). Best effort.
fn prune(cache: &Cache, name: &str, keep: &str, arch: crate::arch::Arch) {
    // `name` is already the arch's (`tree-<id>@arm64`).
    let images = build::list_images(cache, name, build::image_name(arch));
    let complete: Vec<&str> = images.iter().map(|(k, _, _)| k.as_str()).collect();
    let old = images.iter().skip(KEEP_IMAGES).map(|(k, _, _)| k.as_str());
    let dir = cache.path(build::images_rel(name));
    let incomplete: Vec<String> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|k| !complete.contains(&k.as_str()))
        .collect();
    for k in old.chain(incomplete.iter().map(String::as_str)) {
        if k != keep {
            if let Err(e) = fs::remove_dir_all(dir.join(k)) {
                tracing::debug!(%e, key = k, "old tree image not removed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_tree(dir: &Path) {
        fs::create_dir_all(dir).unwrap();
        fs::write(
            dir.join("Makefile"),
            "# SPDX\nVERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 4\nEXTRAVERSION =\n",
        )
        .unwrap();
        fs::write(dir.join("Kconfig"), "").unwrap();
    }

    #[test]
    fn a_tree_spec_is_a_clean_kernel_tree_directory() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("nowhere");
        assert_eq!(
            TreeSpec::parse(&missing),
            Err(TreeSpecError::Missing(missing.clone()))
        );
        let file = d.path().join("file");
        fs::write(&file, "x").unwrap();
        let e = TreeSpec::parse(&file).unwrap_err();
        assert!(
            e.to_string().contains("is a file, not a kernel tree"),
            "{e}"
        );
        assert!(matches!(
            TreeSpec::parse(d.path()),
            Err(TreeSpecError::NotAKernelTree(_))
        ));

        let tree = d.path().join("linux");
        kernel_tree(&tree);
        let spec = TreeSpec::parse(&d.path().join("linux/../linux")).unwrap();
        assert_eq!(spec.dir, fs::canonicalize(&tree).unwrap());
        assert_eq!(spec.version.as_deref(), Some("7.3.4"));
        assert_eq!(spec.config, None);
        assert_eq!(spec.label(), format!("tree:{}", spec.dir.display()));

        fs::write(tree.join(".config"), "CONFIG_X=y\n").unwrap();
        fs::create_dir_all(tree.join("include/config")).unwrap();
        let e = TreeSpec::parse(&tree).unwrap_err();
        assert!(
            matches!(&e, TreeSpecError::Configured { found, .. } if found == &[".config", "include/config"]),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("make mrproper"), "{msg}");
        assert!(msg.contains("--kernel-config"), "{msg}");
        assert!(msg.contains("kbuild refuses an O= build"), "{msg}");
    }

    #[test]
    fn the_version_is_what_make_kernelversion_prints() {
        let mk = |v: &str, p: &str, s: &str, e: &str| {
            makefile_version(&format!(
                "VERSION = {v}\nPATCHLEVEL = {p}\nSUBLEVEL = {s}\nEXTRAVERSION = {e}\nNAME = x\n"
            ))
        };
        assert_eq!(mk("7", "3", "4", "").as_deref(), Some("7.3.4"));
        assert_eq!(mk("6", "19", "0", "-rc1").as_deref(), Some("6.19.0-rc1"));
        assert_eq!(mk("7", "3", "", "").as_deref(), Some("7.3"));
        assert_eq!(makefile_version("all:\n\ttrue\n"), None);
    }

    /// The build tests' fixture tree (a kernel-like Makefile: O=,
    /// tinyconfig, olddefconfig, bzImage) as a git repository, and a
    /// definition for it.
    struct Fixture {
        _dir: tempfile::TempDir,
        tree: PathBuf,
        cache: Cache,
        def: Definition,
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        crate::kernel::source::run(crate::kernel::source::git().arg("-C").arg(dir).args(args))
            .unwrap()
    }

    fn fixture(with_git: bool) -> Option<Fixture> {
        if !["git", "make"].iter().all(crate::kernel::source::on_path) {
            eprintln!("skipped: git or make missing");
            return None;
        }
        let d = tempfile::tempdir().unwrap();
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kbuild/tree");
        let tree = d.path().join("linux");
        fs::create_dir_all(tree.join("kernel")).unwrap();
        for f in ["Makefile", "Kconfig", "kernel/core.c"] {
            fs::copy(from.join(f), tree.join(f)).unwrap();
        }
        if with_git {
            git(&tree, &["init", "-q"]);
            git(&tree, &["add", "."]);
            git(&tree, &["commit", "-q", "-m", "base"]);
        }
        let kernels = d.path().join("kernels");
        fs::create_dir_all(kernels.join("fragments")).unwrap();
        fs::write(
            kernels.join("fragments/guest.config"),
            "CONFIG_A=y\nCONFIG_N=8\n",
        )
        .unwrap();
        let yaml =
            "base: {debian: linux-source-7.3}\nconfig: {fragments: [guest]}\nrequire: [A, N=8]\n";
        let def =
            crate::kernel::definition::parse(&kernels, "7.3", &kernels.join("7.3.yaml"), yaml)
                .unwrap();
        let cache = Cache::at(d.path().join("cache"));
        Some(Fixture {
            tree: fs::canonicalize(tree).unwrap(),
            cache,
            def,
            _dir: d,
        })
    }

    impl Fixture {
        fn spec(&self) -> TreeSpec {
            TreeSpec::parse(&self.tree).unwrap()
        }

        fn build(&self, spec: &TreeSpec) -> Result<TreeBuilt, TreeError> {
            build(
                spec,
                &self.def,
                &self.cache,
                &BuildOptions::default(),
                &|_| {},
            )
        }

        /// How many times the fixture's make built the image.
        fn builds(&self) -> usize {
            let obj = work_dir(&self.cache, &self.tree).join("obj");
            fs::read_to_string(obj.join("builds")).map_or(0, |b| b.lines().count())
        }

        /// Every path below the tree (`.git` included), its length and time.
        fn listing(&self) -> Vec<(PathBuf, u64, SystemTime)> {
            let mut v = Vec::new();
            let mut stack = vec![self.tree.clone()];
            while let Some(d) = stack.pop() {
                for e in fs::read_dir(&d).unwrap().flatten() {
                    let m = fs::symlink_metadata(e.path()).unwrap();
                    if m.is_dir() {
                        stack.push(e.path());
                    }
                    v.push((e.path(), m.len(), m.modified().unwrap()));
                }
            }
            v.sort();
            v
        }
    }

    #[test]
    fn a_tree_builds_out_of_tree_then_hits_then_rebuilds_what_changed() {
        let Some(f) = fixture(true) else { return };
        let before = f.listing();
        let spec = f.spec();
        let first = f.build(&spec).unwrap();
        assert!(!first.cache_hit);
        assert_eq!(f.builds(), 1);
        assert_eq!(f.listing(), before, "nothing written into the tree");
        let name = images_name(&f.tree);
        assert_eq!(
            first.image,
            f.cache
                .path(format!("kbuild/images/{name}/{}/bzImage", first.key))
        );
        let image = fs::read_to_string(&first.image).unwrap();
        assert!(
            image.contains("CONFIG_N=8"),
            "the fragment over tinyconfig: {image}"
        );
        for beside in ["config", "build.log", "meta.json"] {
            assert!(first.image.with_file_name(beside).is_file(), "{beside}");
        }
        let head = git(&f.tree, &["rev-parse", "HEAD"]);
        assert!(
            first.description.starts_with(&format!(
                "tree:{} (HEAD {}, built in ",
                f.tree.display(),
                &head.trim()[..12]
            )),
            "{}",
            first.description
        );

        let hit = f.build(&spec).unwrap();
        assert!(hit.cache_hit && hit.key == first.key && hit.image == first.image);
        assert!(
            hit.description.ends_with(", cache hit)"),
            "{}",
            hit.description
        );
        assert_eq!(f.builds(), 1, "a hit runs no make");

        fs::write(f.tree.join("kernel/core.c"), "static int slots = 64;\n").unwrap();
        fs::write(f.tree.join("kernel/extra.c"), "int extra;\n").unwrap();
        let edited = f.build(&spec).unwrap();
        assert!(!edited.cache_hit && edited.key != first.key);
        assert_eq!(f.builds(), 2, "the same object directory, built again");
        assert!(
            edited.description.contains(" + 2 changed files, built in "),
            "{}",
            edited.description
        );
        assert!(fs::read_to_string(&edited.image)
            .unwrap()
            .contains("int extra;"));
        let meta: serde_json::Value =
            serde_json::from_slice(&fs::read(edited.image.with_file_name("meta.json")).unwrap())
                .unwrap();
        assert_eq!(meta["changed_files"], 2);
        assert_eq!(meta["inputs"]["base"], format!("git:{}", head.trim()));

        // A config file instead of tinyconfig: a new key; the fragment over it.
        let cfg = f.tree.parent().unwrap().join("my.config");
        fs::write(&cfg, "CONFIG_A=y\nCONFIG_MINE=y\nCONFIG_N=2\n").unwrap();
        let with_config = TreeSpec {
            config: Some(cfg),
            ..spec.clone()
        };
        let own = f.build(&with_config).unwrap();
        assert!(!own.cache_hit && own.key != edited.key);
        let image = fs::read_to_string(&own.image).unwrap();
        assert!(
            image.contains("CONFIG_MINE=y") && image.contains("CONFIG_N=8"),
            "{image}"
        );
        assert!(f.build(&with_config).unwrap().cache_hit);

        // Configured in place since: refused before make, as a usage error.
        fs::write(f.tree.join(".config"), "").unwrap();
        let e = f.build(&spec).unwrap_err();
        assert!(
            e.is_usage() && e.to_string().contains("make mrproper"),
            "{e}"
        );
        assert_eq!(f.builds(), 3);
    }

    #[test]
    fn a_compile_error_shows_the_compilers_lines_and_the_log() {
        let Some(mut f) = fixture(true) else { return };
        f.def.make_vars.push("FAIL=1".into());
        let e = f.build(&f.spec()).unwrap_err();
        assert!(!e.is_usage());
        let msg = e.to_string();
        assert!(
            msg.contains("kernel/core.c:1:1: error: FAIL was set"),
            "{msg}"
        );
        let log = work_dir(&f.cache, &f.tree).join("build.log");
        assert!(msg.contains(&log.display().to_string()), "{msg}");
        assert!(build::cached_images(&f.cache, &images_name(&f.tree)).is_empty());
    }

    #[test]
    fn a_config_lacking_a_required_option_is_the_users_error() {
        let Some(f) = fixture(true) else { return };
        let cfg = f.tree.parent().unwrap().join("bad.config");
        fs::write(&cfg, "# CONFIG_A is not set\n").unwrap();
        let mut def = f.def.clone();
        def.fragments.clear();
        let spec = TreeSpec {
            config: Some(cfg),
            ..f.spec()
        };
        let e = build(&spec, &def, &f.cache, &BuildOptions::default(), &|_| {}).unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert!(e.to_string().contains("CONFIG_A"), "{e}");
    }

    #[test]
    fn a_tree_without_git_is_built_every_time() {
        let Some(f) = fixture(false) else { return };
        let said = std::cell::RefCell::new(Vec::new());
        let spec = f.spec();
        for n in 1..=2 {
            let b = build(&spec, &f.def, &f.cache, &BuildOptions::default(), &|m| {
                said.borrow_mut().push(m.to_string())
            })
            .unwrap();
            assert!(!b.cache_hit);
            assert!(
                b.description.contains("(not a git tree, built in "),
                "{}",
                b.description
            );
            assert_eq!(f.builds(), n);
        }
        assert!(
            said.borrow()
                .iter()
                .any(|m| m.contains("not a git work tree") && m.contains("make runs every time")),
            "{:?}",
            said.borrow()
        );
    }

    #[test]
    fn only_the_newest_images_are_kept() {
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::at(d.path());
        let t = SystemTime::now();
        for (i, k) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            let img = cache
                .write_atomic(format!("kbuild/images/tree-x/{k}/bzImage"), &mut &b"x"[..])
                .unwrap();
            let f = File::open(img).unwrap();
            f.set_modified(t - Duration::from_secs(100 - i as u64))
                .unwrap();
        }
        cache
            .write_atomic("kbuild/images/tree-x/partial/config", &mut &b"x"[..])
            .unwrap();
        prune(&cache, "tree-x", "a", crate::arch::Arch::X86_64);
        let mut left: Vec<String> = fs::read_dir(cache.path("kbuild/images/tree-x"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["a", "c", "d", "e"]);
    }

    #[test]
    fn arm64_builds_of_a_tree_have_their_own_objects_and_images() {
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::at(d.path());
        let tree = Path::new("/src/linux");
        let arm = work_dir_for(&cache, tree, crate::arch::Arch::Arm64);
        assert_eq!(
            work_dir(&cache, tree),
            work_dir_for(&cache, tree, crate::arch::Arch::X86_64)
        );
        assert_ne!(arm, work_dir(&cache, tree));
        assert!(arm.ends_with(format!("{}@arm64", tree_id(tree))));
        // An arm64 entry is complete with its Image; pruning keeps it.
        cache
            .write_atomic("kbuild/images/tree-y@arm64/k/Image", &mut &b"x"[..])
            .unwrap();
        prune(&cache, "tree-y@arm64", "other", crate::arch::Arch::Arm64);
        assert!(cache.path("kbuild/images/tree-y@arm64/k/Image").is_file());
        assert!(IN_PLACE.contains(&"arch/arm64/include/generated"));
    }
}
