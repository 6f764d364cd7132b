//! Building a kernel definition: base + patches + config fragments →
//! a bootable image (x86-64 bzImage, arm64 `Image`), cached by content.
//!
//! Cache key = SHA-256 over the recipe version, the architecture, the base
//! identity, the config base, every fragment and patch (name and content, in
//! order), the requirements, extra make variables and the compiler and
//! linker versions. Images live at `kbuild/images/<name>/<key>/bzImage`
//! (arm64: `kbuild/images/<name>@arm64/<key>/Image`); the `.config`, the
//! build log, `meta.json` and `vmlinux` (for gdb) beside it.
//!
//! Builds run in a persistent per-definition work directory
//! (`kbuild/work/<name>/{src,obj}`, arm64 `kbuild/work/<name>@arm64/`: a
//! git work tree of the base and an out-of-tree object directory; never
//! shared between architectures), so changing one patch rebuilds only what it
//! touches. Concurrency: the key's lock (a second run of the same key waits,
//! then finds the image), then the work directory's lock. The image is
//! copied into the cache with an atomic rename, bzImage last, so an
//! interrupted build never leaves a cached image behind.
//!
//! arm64 is cross-compiled (`ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-`);
//! x86-64 builds keep their make line (and so their ccache entries) as
//! before arm64 existed.

use crate::arch::Arch;
use crate::kernel::cache::{sha256_hex, Cache, CacheError};
use crate::kernel::config;
use crate::kernel::debian::{DebianError, DebianMirror};
use crate::kernel::definition::{Definition, DefinitionError, Requirement};
use crate::kernel::patch::{self, PatchError};
use crate::kernel::source::{self, Base, SourceError};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bump when the build procedure changes what an image contains.
pub const RECIPE: &str = "futex-harness-kbuild-1";
/// The x86-64 build's `ARCH=` and key `arch` (unchanged since x86-64 was
/// the only architecture, so its cache keys still hit).
pub const ARCH: &str = "x86_64";
/// The cross-compiler prefix of arm64 builds (Debian's gcc-aarch64-linux-gnu).
pub const ARM64_CROSS_COMPILE: &str = "aarch64-linux-gnu-";

/// `ARCH=` of `arch`'s builds: x86-64 keeps `x86_64` (what it always
/// passed; kbuild treats it as `x86` with 64-bit on).
pub fn make_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => ARCH,
        Arch::Arm64 => arch.kbuild_arch(),
    }
}

/// The `CROSS_COMPILE=` prefix of `arch`'s builds (none on x86-64).
pub fn cross_compile(arch: Arch) -> Option<&'static str> {
    match arch {
        Arch::X86_64 => None,
        Arch::Arm64 => Some(ARM64_CROSS_COMPILE),
    }
}

/// The file name of a cached image of `arch` (`bzImage`, `Image`).
pub fn image_name(arch: Arch) -> &'static str {
    arch.kernel_image().rsplit('/').next().unwrap_or("bzImage")
}

/// Errors of a build.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Preparing the source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A patch did not apply.
    #[error(transparent)]
    Patch(#[from] PatchError),
    /// A fragment is malformed.
    #[error(transparent)]
    Fragment(#[from] config::FragmentError),
    /// Required options did not survive olddefconfig.
    #[error("kernel {name}: {} required option(s) not set after olddefconfig:\n  {}", .unmet.len(), .unmet.iter().map(|u| u.to_string()).collect::<Vec<_>>().join("\n  "))]
    Requirements {
        /// Definition.
        name: String,
        /// What is wrong, with Kconfig's reasons.
        unmet: Vec<config::Unmet>,
    },
    /// `make` failed.
    #[error("kernel {name}: make {target} failed ({status}); log {log}:\n{tail}")]
    Make {
        /// Definition.
        name: String,
        /// Target.
        target: String,
        /// Exit status.
        status: String,
        /// Log file.
        log: PathBuf,
        /// The log's last lines.
        tail: String,
    },
    /// The cache failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// Debian mirror trouble.
    #[error(transparent)]
    Debian(#[from] DebianError),
    /// An architecture's fragment variant could not be read (boxed: the
    /// definition's errors are large and this one is rare).
    #[error(transparent)]
    Definition(Box<DefinitionError>),
    /// I/O.
    #[error("{action} {path}: {source}")]
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

impl From<DefinitionError> for BuildError {
    fn from(e: DefinitionError) -> Self {
        BuildError::Definition(Box::new(e))
    }
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BuildError + 'a {
    move |source| BuildError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Everything that goes into the cache key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyInputs {
    /// [`RECIPE`].
    pub recipe: String,
    /// [`ARCH`] or the other architecture's [`Arch::name`].
    pub arch: String,
    /// The base's identity.
    pub base: String,
    /// `tinyconfig` / `defconfig`.
    pub config_base: String,
    /// `(name, sha256)` of each fragment, in order.
    pub fragments: Vec<(String, String)>,
    /// `(name, sha256)` of each patch, in order.
    pub patches: Vec<(String, String)>,
    /// Requirements, rendered, sorted.
    pub require: Vec<String>,
    /// Extra make variables, in order.
    pub make: Vec<String>,
    /// Compiler and linker version lines.
    pub toolchain: Vec<String>,
}

impl KeyInputs {
    /// The inputs of `def` on `base` with `toolchain`, built for x86-64.
    pub fn new(def: &Definition, base_identity: &str, toolchain: Vec<String>) -> KeyInputs {
        KeyInputs::for_arch(def, base_identity, toolchain, Arch::X86_64)
    }

    /// The inputs of `def` (already [`Definition::for_arch`]) on `base`
    /// with `toolchain`, built for `arch`.
    pub fn for_arch(
        def: &Definition,
        base_identity: &str,
        toolchain: Vec<String>,
        arch: Arch,
    ) -> KeyInputs {
        let files = |v: &[crate::kernel::definition::InputFile]| {
            v.iter()
                .map(|f| (f.name.clone(), sha256_hex(&f.data)))
                .collect()
        };
        let mut require: Vec<String> = def.require.iter().map(Requirement::to_string).collect();
        require.sort();
        require.dedup();
        KeyInputs {
            recipe: RECIPE.into(),
            arch: match arch {
                Arch::X86_64 => ARCH.into(),
                Arch::Arm64 => arch.name().into(),
            },
            base: base_identity.into(),
            config_base: def.config_base.target().into(),
            fragments: files(&def.fragments),
            patches: files(&def.patches),
            require,
            make: def.make_vars.clone(),
            toolchain,
        }
    }

    /// The cache key: 20 hex digits of SHA-256 over a canonical rendering.
    pub fn key(&self) -> String {
        let mut s = String::new();
        let mut line = |k: &str, v: &str| {
            s.push_str(k);
            s.push('\t');
            // Values never contain newlines in practice; escape anyway.
            s.push_str(&v.replace('\\', "\\\\").replace('\n', "\\n"));
            s.push('\n');
        };
        line("recipe", &self.recipe);
        line("arch", &self.arch);
        line("base", &self.base);
        line("config", &self.config_base);
        for (n, h) in &self.fragments {
            line("fragment", &format!("{n} {h}"));
        }
        for (n, h) in &self.patches {
            line("patch", &format!("{n} {h}"));
        }
        for r in &self.require {
            line("require", r);
        }
        for m in &self.make {
            line("make", m);
        }
        for t in &self.toolchain {
            line("toolchain", t);
        }
        sha256_hex(s.as_bytes())[..20].to_string()
    }
}

/// First lines of `gcc --version` and `ld --version` (or of `$CC`/`$LD`).
pub fn toolchain() -> Vec<String> {
    toolchain_for(Arch::X86_64)
}

/// The compiler and linker of `arch`'s builds (arm64: the cross ones).
pub fn toolchain_programs(arch: Arch) -> [String; 2] {
    let prefix = cross_compile(arch).unwrap_or("");
    [format!("{prefix}gcc"), format!("{prefix}ld")]
}

/// [`toolchain`] of `arch`'s builds.
pub fn toolchain_for(arch: Arch) -> Vec<String> {
    let first = |prog: &str| {
        Command::new(prog)
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(String::from)
            })
            .unwrap_or_else(|| format!("{prog}: not found"))
    };
    let [cc, ld] = toolchain_programs(arch);
    vec![first(&cc), first(&ld)]
}

/// Options of a build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// `make -j`.
    pub jobs: usize,
    /// Use ccache when it is on PATH.
    pub ccache: bool,
    /// Only look: never build (for `kernel path`).
    pub no_build: bool,
    /// The architecture built for (default x86-64).
    pub arch: Arch,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            ccache: std::env::var("HARNESS_CCACHE").map_or(true, |v| v != "0"),
            no_build: false,
            arch: Arch::X86_64,
        }
    }
}

/// The outcome of [`build`].
#[derive(Debug, Clone)]
pub struct Built {
    /// Definition name.
    pub name: String,
    /// Cache key.
    pub key: String,
    /// The image in the cache (absent with `no_build` and no image).
    pub image: Option<PathBuf>,
    /// Whether it came from the cache.
    pub cache_hit: bool,
    /// Wall time of the whole call.
    pub elapsed: Duration,
    /// Warnings (fragment lines not as asked, overrides).
    pub warnings: Vec<String>,
}

/// Where the images of `name` live (relative to the cache root).
pub fn images_rel(name: &str) -> PathBuf {
    PathBuf::from("kbuild/images").join(name)
}

/// The work directory of `name` (relative).
pub fn work_rel(name: &str) -> PathBuf {
    PathBuf::from("kbuild/work").join(name)
}

/// The name under `kbuild/images/` and `kbuild/work/` of `name` built for
/// `arch`: `name` itself on x86-64 (where it always was), `name@arm64`
/// otherwise (`@` is not allowed in definition names, so no collision).
pub fn arch_name(name: &str, arch: Arch) -> String {
    match arch {
        Arch::X86_64 => name.to_string(),
        Arch::Arm64 => format!("{name}@{}", arch.name()),
    }
}

/// Cached images of `name`: `(key, bzImage, modified)`, newest first.
pub fn cached_images(cache: &Cache, name: &str) -> Vec<(String, PathBuf, std::time::SystemTime)> {
    cached_images_for(cache, name, Arch::X86_64)
}

/// Cached images of `name` built for `arch`: `(key, image, modified)`,
/// newest first.
pub fn cached_images_for(
    cache: &Cache,
    name: &str,
    arch: Arch,
) -> Vec<(String, PathBuf, std::time::SystemTime)> {
    list_images(cache, &arch_name(name, arch), image_name(arch))
}

/// The complete entries below `kbuild/images/<stored>/` (those with the
/// image file `image`): `(key, image, modified)`, newest first.
pub(crate) fn list_images(
    cache: &Cache,
    stored: &str,
    image: &str,
) -> Vec<(String, PathBuf, std::time::SystemTime)> {
    let dir = cache.path(images_rel(stored));
    let mut v: Vec<_> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let img = e.path().join(image);
            let m = fs::metadata(&img).ok()?.modified().ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), img, m))
        })
        .collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.2));
    v
}

/// Builds `def` (or finds it in the cache). `say` gets progress lines.
pub fn build(
    def: &Definition,
    cache: &Cache,
    opts: &BuildOptions,
    mirror: &dyn Fn() -> Result<DebianMirror, DebianError>,
    say: &dyn Fn(&str),
) -> Result<Built, BuildError> {
    let t0 = Instant::now();
    let arch = opts.arch;
    let def = &def.for_arch(arch)?;
    let stored = arch_name(&def.name, arch);
    let base = source::prepare(&def.base, cache, mirror, say)?;
    let inputs = KeyInputs::for_arch(def, &base.identity, toolchain_for(arch), arch);
    let key = inputs.key();
    let dir_rel = images_rel(&stored).join(&key);
    let image = cache.path(dir_rel.join(image_name(arch)));
    let done = |image: Option<PathBuf>, hit: bool, warnings: Vec<String>| Built {
        name: def.name.clone(),
        key: key.clone(),
        image,
        cache_hit: hit,
        elapsed: t0.elapsed(),
        warnings,
    };
    if image.is_file() {
        keep_vmlinux(
            cache,
            &dir_rel,
            &cache.path(work_rel(&stored)).join("obj"),
            &key,
        );
        return Ok(done(Some(image), true, Vec::new()));
    }
    if opts.no_build {
        return Ok(done(None, false, Vec::new()));
    }
    let _key_lock = cache.lock(&format!("kbuild-key-{key}"))?;
    if image.is_file() {
        return Ok(done(Some(image), true, Vec::new()));
    }
    let _work_lock = cache.lock(&format!("kbuild-work-{stored}"))?;
    let work = cache.path(work_rel(&stored));
    fs::create_dir_all(&work).map_err(io("create", &work))?;
    let log_path = work.join("build.log");
    let mut log = File::create(&log_path).map_err(io("create", &log_path))?;
    let _ = writeln!(
        log,
        "# {} key {key}\n# {}",
        def.name,
        serde_json::to_string(&inputs).unwrap_or_default()
    );
    let warnings = prepare_tree(def, arch, &base, &work, &mut log, &log_path, say)?;
    let src = work.join("src");
    let obj = work.join("obj");
    say(&format!(
        "building {} for {arch} (key {key}) with make -j{}{}; log {}",
        def.name,
        opts.jobs,
        if opts.ccache && source::on_path("ccache") {
            " and ccache"
        } else {
            ""
        },
        log_path.display()
    ));
    let tb = Instant::now();
    let extra = image_make_args(def, opts, &obj);
    make(
        def, arch, &src, &obj, &extra, &mut log, &log_path, say, true,
    )?;
    say(&format!(
        "{}: compiled in {:.0} s",
        def.name,
        tb.elapsed().as_secs_f64()
    ));

    let _ = log.flush();
    let meta = serde_json::json!({
        "name": def.name,
        "key": key,
        "arch": arch,
        "inputs": inputs,
        "base_commit": base.commit,
        "build_seconds": tb.elapsed().as_secs_f64(),
        "warnings": warnings,
    });
    store(cache, arch, &dir_rel, &obj, &log_path, &meta)?;
    Ok(done(Some(image), false, warnings))
}

/// Copies the build in `obj` into the cache entry `dir_rel`: its
/// `.config` as `config`, the log, `meta.json`, the debug files, and the
/// image of `arch` ([`Arch::kernel_image`], stored as [`image_name`]) last
/// (its presence means the entry is complete). Returns the cached image.
pub(crate) fn store(
    cache: &Cache,
    arch: Arch,
    dir_rel: &Path,
    obj: &Path,
    log_path: &Path,
    meta: &serde_json::Value,
) -> Result<PathBuf, BuildError> {
    copy_into(cache, dir_rel, "config", &obj.join(".config"))?;
    copy_into(cache, dir_rel, "build.log", log_path)?;
    cache.write_atomic(
        dir_rel.join("meta.json"),
        &mut serde_json::to_vec_pretty(meta)
            .unwrap_or_default()
            .as_slice(),
    )?;
    copy_debug_files(cache, dir_rel, obj)?;
    let name = image_name(arch);
    copy_into(cache, dir_rel, name, &obj.join(arch.kernel_image()))?;
    Ok(cache.path(dir_rel.join(name)))
}

/// Copies `from` into the cache entry `dir_rel` as `name`, atomically.
fn copy_into(cache: &Cache, dir_rel: &Path, name: &str, from: &Path) -> Result<(), BuildError> {
    let mut f = File::open(from).map_err(io("open", from))?;
    cache.write_atomic(dir_rel.join(name), &mut f)?;
    Ok(())
}

/// What `gdb` needs beside a cached bzImage: `vmlinux` (symbols; DWARF
/// when the config has it) and, when the build made them (`make
/// scripts_gdb`, `CONFIG_GDB_SCRIPTS`), `vmlinux-gdb.py` with
/// `scripts/gdb/linux/*.py`.
fn copy_debug_files(cache: &Cache, dir_rel: &Path, obj: &Path) -> Result<(), BuildError> {
    let copy = |name: &str, from: &Path| copy_into(cache, dir_rel, name, from);
    // A tree whose build makes no vmlinux (a stand-in tree in tests) just
    // has no symbols for gdb.
    if obj.join("vmlinux").is_file() {
        copy("vmlinux", &obj.join("vmlinux"))?;
    }
    if obj.join("vmlinux-gdb.py").is_file() {
        copy("vmlinux-gdb.py", &obj.join("vmlinux-gdb.py"))?;
        let scripts = obj.join("scripts/gdb/linux");
        for e in fs::read_dir(&scripts).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") {
                copy(&format!("scripts/gdb/linux/{name}"), &e.path())?;
            }
        }
    }
    Ok(())
}

/// An image cached before `vmlinux` was kept gets it from the work tree,
/// when that tree was last built for the same key (its log says so).
/// Best effort: a debugger is not worth failing a run for.
fn keep_vmlinux(cache: &Cache, dir_rel: &Path, obj: &Path, key: &str) {
    if cache.path(dir_rel.join("vmlinux")).is_file() || !obj.join("vmlinux").is_file() {
        return;
    }
    let log = obj.with_file_name("build.log");
    let same_key = fs::read_to_string(&log)
        .ok()
        .and_then(|l| {
            l.lines()
                .next()
                .map(|first| first.ends_with(&format!(" key {key}")))
        })
        .unwrap_or(false);
    if same_key {
        if let Err(e) = copy_debug_files(cache, dir_rel, obj) {
            tracing::debug!(%e, "no vmlinux kept beside the cached image");
        }
    }
}

/// Prepares `work/{src,obj}` for `def` on `base` without compiling:
/// checkout, patches, config generation and the requirement check
/// (log in `work/build.log`). Returns the final `.config` and warnings.
pub fn configure(
    def: &Definition,
    base: &Base,
    work: &Path,
    say: &dyn Fn(&str),
) -> Result<(config::Values, Vec<String>), BuildError> {
    configure_for(def, Arch::X86_64, base, work, say)
}

/// [`configure`] for `arch` (`def` as written; its arch variant is taken here).
pub fn configure_for(
    def: &Definition,
    arch: Arch,
    base: &Base,
    work: &Path,
    say: &dyn Fn(&str),
) -> Result<(config::Values, Vec<String>), BuildError> {
    let def = &def.for_arch(arch)?;
    fs::create_dir_all(work).map_err(io("create", work))?;
    let log_path = work.join("build.log");
    let mut log = File::create(&log_path).map_err(io("create", &log_path))?;
    let warnings = prepare_tree(def, arch, base, work, &mut log, &log_path, say)?;
    let cfg_path = work.join("obj/.config");
    let cfg = fs::read_to_string(&cfg_path).map_err(io("read", &cfg_path))?;
    Ok((config::Values::parse(&cfg), warnings))
}

/// Checks out the base, applies the patches, generates and checks the
/// config. Returns warnings.
fn prepare_tree(
    def: &Definition,
    arch: Arch,
    base: &Base,
    work: &Path,
    log: &mut File,
    log_path: &Path,
    say: &dyn Fn(&str),
) -> Result<Vec<String>, BuildError> {
    let src = work.join("src");
    let obj = work.join("obj");
    say(&format!(
        "{}: checking out {} ({})",
        def.name,
        base.identity,
        &base.commit[..12]
    ));
    source::checkout(base, &src)?;
    for p in &def.patches {
        let _ = writeln!(log, "# patch {} ({})", p.name, p.path.display());
    }
    patch::apply_series(&src, &def.patches, &|m| say(&format!("{}: {m}", def.name)))?;
    configure_tree(def, arch, None, &src, &obj, log, log_path, say)
}

/// Generates and checks the config of `def` (config base — or the file
/// `base` instead of it —, fragments, olddefconfig, requirements) for the
/// tree `src` in the object directory `obj`, for `arch` (`def` already
/// [`Definition::for_arch`]). Returns warnings.
#[allow(clippy::too_many_arguments)]
pub(crate) fn configure_tree(
    def: &Definition,
    arch: Arch,
    base: Option<&Path>,
    src: &Path,
    obj: &Path,
    log: &mut File,
    log_path: &Path,
    say: &dyn Fn(&str),
) -> Result<Vec<String>, BuildError> {
    let (src, obj) = (src.to_path_buf(), obj.to_path_buf());
    fs::create_dir_all(&obj).map_err(io("create", &obj))?;
    let cfg_path = obj.join(".config");
    if let Some(file) = base {
        let _ = writeln!(log, "# config base {}", file.display());
        fs::copy(file, &cfg_path).map_err(io("copy", file))?;
    } else {
        let target = def.config_base.target().to_string();
        make(def, arch, &src, &obj, &[target], log, log_path, say, false)?;
    }
    let frags: Vec<(String, String)> = def
        .fragments
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                String::from_utf8_lossy(&f.data).into_owned(),
            )
        })
        .collect();
    let frag_refs: Vec<(&str, &str)> = frags
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let merged = config::merge(&frag_refs)?;
    let cfg = fs::read_to_string(&cfg_path).map_err(io("read", &cfg_path))?;
    let new = config::apply(&cfg, &merged.assignments);
    fs::write(&cfg_path, new).map_err(io("write", &cfg_path))?;
    let olddefconfig = ["olddefconfig".to_string()];
    make(
        def,
        arch,
        &src,
        &obj,
        &olddefconfig,
        log,
        log_path,
        say,
        false,
    )?;
    let cfg = fs::read_to_string(&cfg_path).map_err(io("read", &cfg_path))?;
    let values = config::Values::parse(&cfg);
    let mut warnings: Vec<String> = merged.overrides.clone();
    // Required options are errors; other fragment lines are warnings.
    let required: Vec<(String, String)> = def
        .require
        .iter()
        .map(|r| (r.symbol.clone(), r.value.clone()))
        .collect();
    let mut unmet = config::check(&values, &required);
    let frag_unmet: Vec<config::Unmet> = config::check(&values, &merged.assignments)
        .into_iter()
        .filter(|u| !required.iter().any(|(s, _)| *s == u.symbol))
        .collect();
    if !unmet.is_empty() || !frag_unmet.is_empty() {
        let files: Vec<(String, String)> = config::kconfig_files(&src)
            .into_iter()
            .filter_map(|p| {
                let text = fs::read_to_string(&p).ok()?;
                let name = p.strip_prefix(&src).unwrap_or(&p).display().to_string();
                Some((name, text))
            })
            .collect();
        for u in unmet.iter_mut() {
            u.why = Some(config::explain(&files, &u.symbol, &values));
        }
        for mut u in frag_unmet {
            u.why = Some(config::explain(&files, &u.symbol, &values));
            warnings.push(format!("fragment: {u}"));
        }
    }
    for w in &warnings {
        let _ = writeln!(log, "# warning: {w}");
        say(&format!("{}: warning: {w}", def.name));
    }
    if !unmet.is_empty() {
        return Err(BuildError::Requirements {
            name: def.name.clone(),
            unmet,
        });
    }
    Ok(warnings)
}

/// Configures (`def`'s config base, fragments, olddefconfig, required
/// options) and builds the bzImage of an arbitrary kernel tree `src` in the
/// object directory `obj` (incremental when `obj` is reused), without the
/// cache and without `def`'s base and patches. The log goes to `log_path`
/// (truncated). Returns the image in `obj` (`opts.arch`'s; `def` as
/// written, its arch variant is taken here).
pub fn build_tree(
    def: &Definition,
    src: &Path,
    obj: &Path,
    opts: &BuildOptions,
    log_path: &Path,
    say: &dyn Fn(&str),
) -> Result<PathBuf, BuildError> {
    if let Some(d) = log_path.parent() {
        fs::create_dir_all(d).map_err(io("create", d))?;
    }
    let arch = opts.arch;
    let def = &def.for_arch(arch)?;
    let mut log = File::create(log_path).map_err(io("create", log_path))?;
    configure_tree(def, arch, None, src, obj, &mut log, log_path, say)?;
    let extra = image_make_args(def, opts, obj);
    make(def, arch, src, obj, &extra, &mut log, log_path, say, true)?;
    Ok(obj.join(arch.kernel_image()))
}

/// The arguments of the image's `make` in the configured `obj`: `-j`,
/// ccache when wanted and installed, the definition's make variables, the
/// [`targets`].
pub(crate) fn image_make_args(def: &Definition, opts: &BuildOptions, obj: &Path) -> Vec<String> {
    let cfg = fs::read_to_string(obj.join(".config")).unwrap_or_default();
    make_args(
        def,
        opts,
        opts.ccache && source::on_path("ccache"),
        &config::Values::parse(&cfg),
    )
}

/// [`image_make_args`] given whether ccache is used and the `.config`
/// (pure).
pub fn make_args(
    def: &Definition,
    opts: &BuildOptions,
    ccache: bool,
    config: &config::Values,
) -> Vec<String> {
    let mut extra = vec![format!("-j{}", opts.jobs.max(1))];
    if ccache {
        let [cc, _] = toolchain_programs(opts.arch);
        extra.push(format!("CC=ccache {cc}"));
    }
    extra.extend(def.make_vars.iter().cloned());
    extra.extend(targets(opts.arch, config));
    extra
}

/// What `make` builds for `config`: the image (`bzImage`, `Image`), and
/// the kernel's gdb helpers (`vmlinux-gdb.py`) when the config asks for
/// them (`CONFIG_GDB_SCRIPTS`: only `make all` makes them by itself).
fn targets(arch: Arch, config: &config::Values) -> Vec<String> {
    let mut t = Vec::new();
    if config.get("GDB_SCRIPTS") == "y" {
        t.push("scripts_gdb".to_string());
    }
    t.push(image_name(arch).to_string());
    t
}

/// The variables every `make` of `arch` gets before its own arguments:
/// `ARCH=`, and `CROSS_COMPILE=` when cross-compiling (pure).
pub fn arch_make_vars(arch: Arch) -> Vec<String> {
    let mut v = vec![format!("ARCH={}", make_arch(arch))];
    if let Some(prefix) = cross_compile(arch) {
        v.push(format!("CROSS_COMPILE={prefix}"));
    }
    v
}

/// Runs `make -C src O=obj ARCH=… [CROSS_COMPILE=…] args...`, output
/// appended to the log; with `progress`, reports every compiled file to
/// `say` at most every 10 s.
#[allow(clippy::too_many_arguments)]
pub(crate) fn make(
    def: &Definition,
    arch: Arch,
    src: &Path,
    obj: &Path,
    args: &[String],
    log: &mut File,
    log_path: &Path,
    say: &dyn Fn(&str),
    progress: bool,
) -> Result<(), BuildError> {
    let target = args.last().cloned().unwrap_or_default();
    let _ = writeln!(log, "# make {}", args.join(" "));
    let mut cmd = Command::new("make");
    cmd.arg("-C")
        .arg(src)
        .arg(format!("O={}", obj.display()))
        .args(arch_make_vars(arch))
        .args(args)
        .env("KBUILD_BUILD_USER", "harness")
        .env("KBUILD_BUILD_HOST", "futex-harness")
        // Work trees of different definitions share ccache entries: paths
        // under kbuild/work/ are rewritten relative to the object directory.
        .env(
            "CCACHE_BASEDIR",
            obj.parent().and_then(Path::parent).unwrap_or(obj),
        )
        .env("CCACHE_NOHASHDIR", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.try_clone().map_err(io("dup", log_path))?);
    // make dies with the harness (and takes its compilers along on SIGTERM).
    // SAFETY: prctl is async-signal-safe; nothing else runs in the child.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| SourceError::Spawn {
        what: "make".into(),
        source,
    })?;
    let out = child.stdout.take().expect("piped stdout");
    let mut n = 0usize;
    let mut last = Instant::now();
    for line in BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(log, "{line}");
        let t = line.trim_start();
        if t.starts_with("CC ")
            || t.starts_with("AS ")
            || t.starts_with("LD ")
            || t.starts_with("AR ")
        {
            n += 1;
            if progress && last.elapsed() >= Duration::from_secs(10) {
                last = Instant::now();
                say(&format!("{}: {n} steps, {t}", def.name));
            }
        }
    }
    let status = child.wait().map_err(io("wait for make in", src))?;
    let _ = log.flush();
    if !status.success() {
        let text = fs::read_to_string(log_path).unwrap_or_default();
        let errors: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("error:") || l.contains("Error ") || l.contains("***"))
            .collect();
        let tail = if errors.is_empty() {
            source::tail(&text, 25)
        } else {
            errors[errors.len().saturating_sub(15)..].join("\n")
        };
        return Err(BuildError::Make {
            name: def.name.clone(),
            target,
            status: status.to_string(),
            log: log_path.to_path_buf(),
            tail,
        });
    }
    Ok(())
}

/// Removes the work directories of `name` (every architecture's) and,
/// with `images`, its cached images.
pub fn clean(cache: &Cache, name: &str, images: bool) -> Result<Vec<PathBuf>, BuildError> {
    let mut removed = Vec::new();
    for arch in crate::arch::ALL {
        let stored = arch_name(name, arch);
        let _work_lock = cache.lock(&format!("kbuild-work-{stored}"))?;
        let work = cache.path(work_rel(&stored));
        if work.exists() {
            source::remove_checkout(&cache.path("kbuild/git/bases.git"), &work.join("src"))?;
            fs::remove_dir_all(&work).map_err(io("remove", &work))?;
            removed.push(work);
        }
        if images {
            let dir = cache.path(images_rel(&stored));
            if dir.exists() {
                fs::remove_dir_all(&dir).map_err(io("remove", &dir))?;
                removed.push(dir);
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::definition::{parse, InputFile};

    fn def() -> Definition {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("fragments")).unwrap();
        fs::create_dir_all(d.path().join("patches")).unwrap();
        fs::write(d.path().join("fragments/g.config"), "CONFIG_A=y\n").unwrap();
        fs::write(d.path().join("patches/1.patch"), "p1").unwrap();
        fs::write(d.path().join("patches/2.patch"), "p2").unwrap();
        parse(
            d.path(),
            "k",
            &d.path().join("k.yaml"),
            "base: {debian: linux-source-7.3}\npatches: [1.patch, 2.patch]\nconfig: {fragments: [g]}\nrequire: [B, A]\n",
        )
        .unwrap()
    }

    fn tc() -> Vec<String> {
        vec!["gcc (Debian 12.2.0-14) 12.2.0".into(), "GNU ld 2.40".into()]
    }

    #[test]
    fn key_is_stable_and_sensitive() {
        let d = def();
        let k = KeyInputs::new(&d, "debian:x.deb", tc()).key();
        assert_eq!(k.len(), 20);
        assert_eq!(k, KeyInputs::new(&d, "debian:x.deb", tc()).key());
        // Requirement order does not matter.
        let mut r = d.clone();
        r.require.reverse();
        assert_eq!(k, KeyInputs::new(&r, "debian:x.deb", tc()).key());

        let mut keys = std::collections::BTreeSet::new();
        keys.insert(k.clone());
        let mut variants: Vec<(&str, Definition, String, Vec<String>)> = Vec::new();
        variants.push(("base", d.clone(), "debian:y.deb".into(), tc()));
        let mut p = d.clone();
        p.patches[1].data = b"p2 changed".to_vec();
        variants.push(("patch content", p, "debian:x.deb".into(), tc()));
        let mut p = d.clone();
        p.patches.swap(0, 1);
        variants.push(("patch order", p, "debian:x.deb".into(), tc()));
        let mut p = d.clone();
        p.patches.pop();
        variants.push(("patch removed", p, "debian:x.deb".into(), tc()));
        let mut f = d.clone();
        f.fragments[0].data = b"CONFIG_A=n\n".to_vec();
        variants.push(("fragment", f, "debian:x.deb".into(), tc()));
        let mut f = d.clone();
        f.fragments.push(InputFile {
            name: "debug.config".into(),
            path: "x".into(),
            data: vec![],
        });
        variants.push(("fragment added", f, "debian:x.deb".into(), tc()));
        let mut q = d.clone();
        q.require.push(Requirement::parse("NUMA").unwrap());
        variants.push(("requirement", q, "debian:x.deb".into(), tc()));
        let mut c = d.clone();
        c.config_base = crate::kernel::definition::ConfigBase::Defconfig;
        variants.push(("config base", c, "debian:x.deb".into(), tc()));
        let mut m = d.clone();
        m.make_vars.push("KCFLAGS=-O1".into());
        variants.push(("make", m, "debian:x.deb".into(), tc()));
        let mut t = tc();
        t[0] = "gcc 13".into();
        variants.push(("compiler", d.clone(), "debian:x.deb".into(), t));
        for (what, def, base, tc) in variants {
            let k2 = KeyInputs::new(&def, &base, tc).key();
            assert!(keys.insert(k2), "changing the {what} must change the key");
        }
        // Paths and the description are not inputs.
        let mut n = d.clone();
        n.description = "other".into();
        n.patches[0].path = "/elsewhere".into();
        assert_eq!(k, KeyInputs::new(&n, "debian:x.deb", tc()).key());
    }

    #[test]
    fn the_arch_is_in_the_key_and_x86_keys_are_as_before() {
        let d = def();
        let x86 = KeyInputs::new(&d, "debian:x.deb", tc());
        assert_eq!(x86.arch, "x86_64");
        assert_eq!(
            x86.key(),
            KeyInputs::for_arch(&d, "debian:x.deb", tc(), Arch::X86_64).key()
        );
        let arm = KeyInputs::for_arch(&d, "debian:x.deb", tc(), Arch::Arm64);
        assert_eq!(arm.arch, "arm64");
        assert_ne!(x86.key(), arm.key());
        // The rendering x86 keys always had: `arch\tx86_64` among the lines.
        let mut old = String::new();
        for (k, v) in [
            ("recipe", RECIPE),
            ("arch", "x86_64"),
            ("base", "debian:x.deb"),
            ("config", "tinyconfig"),
        ] {
            old.push_str(&format!("{k}\t{v}\n"));
        }
        for (n, h) in &x86.fragments {
            old.push_str(&format!("fragment\t{n} {h}\n"));
        }
        for (n, h) in &x86.patches {
            old.push_str(&format!("patch\t{n} {h}\n"));
        }
        for r in &x86.require {
            old.push_str(&format!("require\t{r}\n"));
        }
        for t in tc() {
            old.push_str(&format!("toolchain\t{t}\n"));
        }
        assert_eq!(x86.key(), sha256_hex(old.as_bytes())[..20]);
    }

    #[test]
    fn arm64_builds_cross_compile_and_make_an_image() {
        assert_eq!(arch_make_vars(Arch::X86_64), ["ARCH=x86_64"]);
        assert_eq!(
            arch_make_vars(Arch::Arm64),
            ["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"]
        );
        assert_eq!(toolchain_programs(Arch::X86_64), ["gcc", "ld"]);
        assert_eq!(
            toolchain_programs(Arch::Arm64),
            ["aarch64-linux-gnu-gcc", "aarch64-linux-gnu-ld"]
        );
        let mut d = def();
        d.make_vars.push("KCFLAGS=-O2".into());
        let cfg = config::Values::parse("CONFIG_GDB_SCRIPTS=y\n");
        let mut opts = BuildOptions {
            jobs: 2,
            ..Default::default()
        };
        assert_eq!(opts.arch, Arch::X86_64);
        // x86-64: exactly the arguments it always had (ccache entries hit).
        assert_eq!(
            make_args(&d, &opts, true, &cfg),
            [
                "-j2",
                "CC=ccache gcc",
                "KCFLAGS=-O2",
                "scripts_gdb",
                "bzImage"
            ]
        );
        assert_eq!(
            make_args(&d, &opts, false, &config::Values::parse("")),
            ["-j2", "KCFLAGS=-O2", "bzImage"]
        );
        opts.arch = Arch::Arm64;
        assert_eq!(
            make_args(&d, &opts, true, &config::Values::parse("")),
            [
                "-j2",
                "CC=ccache aarch64-linux-gnu-gcc",
                "KCFLAGS=-O2",
                "Image"
            ]
        );
        assert_eq!(image_name(Arch::X86_64), "bzImage");
        assert_eq!(image_name(Arch::Arm64), "Image");
    }

    #[test]
    fn arm64_builds_have_their_own_work_tree_and_images() {
        assert_eq!(arch_name("7.3", Arch::X86_64), "7.3");
        assert_eq!(arch_name("7.3", Arch::Arm64), "7.3@arm64");
        assert!(!crate::kernel::definition::valid_name("7.3@arm64"));
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        cache
            .write_atomic("kbuild/images/k/aaa/bzImage", &mut &b"x"[..])
            .unwrap();
        cache
            .write_atomic("kbuild/images/k@arm64/bbb/Image", &mut &b"x"[..])
            .unwrap();
        let x86 = cached_images(&cache, "k");
        assert_eq!(x86.len(), 1);
        assert_eq!(x86[0].0, "aaa");
        let arm = cached_images_for(&cache, "k", Arch::Arm64);
        assert_eq!(arm.len(), 1);
        assert_eq!(arm[0].0, "bbb");
        assert!(arm[0].1.ends_with("k@arm64/bbb/Image"));
        let removed = clean(&cache, "k", true).unwrap();
        assert_eq!(removed.len(), 2, "{removed:?}");
    }

    #[test]
    fn cached_images_lists_only_complete_entries() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        cache
            .write_atomic("kbuild/images/k/aaa/bzImage", &mut &b"x"[..])
            .unwrap();
        cache
            .write_atomic("kbuild/images/k/bbb/config", &mut &b"x"[..])
            .unwrap();
        let v = cached_images(&cache, "k");
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].0, "aaa");
        assert!(cached_images(&cache, "none").is_empty());
    }
}
