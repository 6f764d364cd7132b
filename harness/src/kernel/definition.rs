//! Kernel definitions: `kernels/<name>.yaml`.
//!
//! ```yaml
//! description: Debian's 7.3 source with the immutable private hash
//! version: "7.3"                 # upstream version: default expectations
//! expect: immutable=1            # merged over the version's defaults
//! base:
//!   debian: linux-source-7.3     # or  path: /src/linux   or  git: URL + ref: v7.3
//! patches:                       # relative to kernels/patches/, in order;
//!   - 7.3-immutable              # a directory means its files, sorted
//! config:
//!   base: tinyconfig             # or defconfig
//!   fragments: [guest]           # kernels/fragments/<name>.config, in order
//! require: [FUTEX, NUMA, SERIAL_8250_RUNTIME_UARTS=2]
//! ```
//!
//! A definition may instead say `extends: <name>` (another definition of
//! the same directory) and state only what differs; [`Definition`] is then
//! the merged, effective one (rules in the `extends` module).
//!
//! Everything here is pure: loading reads the YAML, the fragments and the
//! patch files, nothing else (the base is resolved by `kernel::source`).

mod extends;

use crate::arch::Arch;
use serde::Deserialize;
use std::fs;
use std::path::{Path, PathBuf};

/// Environment variable naming the kernels directory.
pub const KERNELS_DIR_ENV: &str = "HARNESS_KERNELS_DIR";

/// Errors loading a definition.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    /// The shipped definitions could not be written into the cache.
    #[error("writing the built-in kernel definitions into the cache: {0}")]
    Shipped(#[from] super::cache::CacheError),
    /// No such definition.
    #[error("no kernel definition {name:?} in {dir} (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The kernels directory.
        dir: PathBuf,
        /// The names that exist.
        known: String,
    },
    /// A name that cannot be a file name.
    #[error("bad kernel definition name {0:?}: use letters, digits, '.', '_', '-'")]
    BadName(String),
    /// Reading a file failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `extends:` names no definition of the directory.
    #[error("{}: extends: no kernel definition {parent:?} in {dir} (known: {known})", place(.path, *.position))]
    NoParent {
        /// The file that says `extends:`.
        path: PathBuf,
        /// 1-based line and column of the name after `extends:`.
        position: Option<(usize, usize)>,
        /// The name it gives.
        parent: String,
        /// The kernels directory.
        dir: PathBuf,
        /// The names that exist.
        known: String,
    },
    /// `extends:` leads back to a definition that already extends it.
    #[error("{}: extends: {parent:?} makes a cycle: {}", place(.path, *.position), chain(.files))]
    Cycle {
        /// The file whose `extends:` closes the cycle.
        path: PathBuf,
        /// 1-based line and column of the name after `extends:`.
        position: Option<(usize, usize)>,
        /// The name it gives.
        parent: String,
        /// The files of the cycle, each extending the next; the last is the first.
        files: Vec<PathBuf>,
    },
}

/// `path:line:column`, or `path` when the position is unknown.
fn place(path: &Path, position: Option<(usize, usize)>) -> String {
    match position {
        Some((line, column)) => format!("{}:{line}:{column}", path.display()),
        None => path.display().to_string(),
    }
}

fn chain(files: &[PathBuf]) -> String {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    names.join(" -> ")
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DefinitionError + '_ {
    move |source| DefinitionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where the unpatched source comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseSpec {
    /// A Debian `linux-source-X.Y` package (its `/usr/src/*.tar.xz`).
    Debian {
        /// Package name, e.g. `linux-source-7.3`.
        package: String,
    },
    /// A local kernel tree (taken as it is on disk, `.gitignore`d files excluded).
    Local {
        /// The tree.
        path: PathBuf,
    },
    /// A git repository and a ref (branch, tag or commit).
    Git {
        /// Anything `git fetch` accepts.
        url: String,
        /// The ref.
        rev: String,
    },
}

/// The config starting point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigBase {
    /// `make tinyconfig`.
    Tinyconfig,
    /// `make defconfig`.
    Defconfig,
}

impl ConfigBase {
    /// The make target.
    pub fn target(self) -> &'static str {
        match self {
            ConfigBase::Tinyconfig => "tinyconfig",
            ConfigBase::Defconfig => "defconfig",
        }
    }
}

/// A file that is an input of the build: its name and content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Name relative to its directory (`patches/`, `fragments/`).
    pub name: String,
    /// Absolute path.
    pub path: PathBuf,
    /// Content.
    pub data: Vec<u8>,
}

/// A required option: `NAME` (means `=y`) or `NAME=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Symbol without `CONFIG_`.
    pub symbol: String,
    /// Required value as in `.config` (`y`, `m`, `4`, `"str"`); `n` means unset.
    pub value: String,
}

impl Requirement {
    /// Parses `NAME`, `CONFIG_NAME`, `NAME=v`.
    pub fn parse(s: &str) -> Result<Requirement, String> {
        let s = s.trim();
        let (name, value) = match s.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (s, "y"),
        };
        let name = name.strip_prefix("CONFIG_").unwrap_or(name);
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || value.is_empty()
        {
            return Err(format!(
                "bad requirement {s:?}: expected NAME or NAME=value"
            ));
        }
        Ok(Requirement {
            symbol: name.to_string(),
            value: value.to_string(),
        })
    }
}

impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CONFIG_{}={}", self.symbol, self.value)
    }
}

/// A loaded definition with all its input files read; for one that
/// `extends:` another, the merged result (what the build and its cache key
/// see, so a change to a parent is a change to its children).
#[derive(Debug, Clone)]
pub struct Definition {
    /// Name (file stem).
    pub name: String,
    /// The YAML file.
    pub path: PathBuf,
    /// One line for `kernel list`.
    pub description: String,
    /// Upstream version, for default expectations.
    pub version: Option<String>,
    /// Expectation overrides (`key=value,...`).
    pub expect: Option<String>,
    /// The base.
    pub base: BaseSpec,
    /// Patches, in order.
    pub patches: Vec<InputFile>,
    /// Config starting point.
    pub config_base: ConfigBase,
    /// Fragments, in order.
    pub fragments: Vec<InputFile>,
    /// Options that must be set after `olddefconfig`.
    pub require: Vec<Requirement>,
    /// Extra `make` variables (`KCFLAGS=...`).
    pub make_vars: Vec<String>,
}

/// Options a definition may require that exist on x86 only: on arm64
/// they are dropped from `require` (QEMU's `virt` has no 8250 ports, no
/// isa-debug-exit, no 32-bit x86 compat, no pvpanic MMIO device, and its
/// NUMA nodes come from the device tree).
pub const X86_ONLY: &[&str] = &[
    "SERIAL_8250",
    "SERIAL_8250_CONSOLE",
    "SERIAL_8250_NR_UARTS",
    "SERIAL_8250_RUNTIME_UARTS",
    "X86_IOPL_IOPERM",
    "X86_64_ACPI_NUMA",
    "IA32_EMULATION",
    "PVPANIC_MMIO",
];

/// What an arm64 guest on QEMU's `virt` needs on top of a definition's
/// arch-neutral requirements: the PL011 console, the virtconsole results
/// channel (hvc0), PSCI power-off (how guest-init ends QEMU), GICv3, the
/// generic PCI host (virtio-pci), and device-tree NUMA.
pub const ARM64_REQUIRE: &[&str] = &[
    "SERIAL_AMBA_PL011",
    "SERIAL_AMBA_PL011_CONSOLE",
    "VIRTIO_CONSOLE",
    "VIRTIO_MMIO",
    "ARM_GIC_V3",
    "ARM_PSCI_FW",
    "POWER_RESET",
    "PCI_HOST_GENERIC",
    "OF_NUMA",
    "RTC_DRV_PL031",
    "PVPANIC_PCI",
];

/// The file name of a fragment's variant for `arch` (`guest.config` →
/// `guest-arm64.config`); x86-64 fragments have no variant.
pub fn fragment_variant(name: &str, arch: Arch) -> Option<String> {
    match arch {
        Arch::X86_64 => None,
        Arch::Arm64 => {
            let stem = name.strip_suffix(".config").unwrap_or(name);
            Some(format!("{stem}-{}.config", arch.name()))
        }
    }
}

/// `require` for `arch`: x86-64 keeps the list; arm64 drops [`X86_ONLY`]
/// and adds [`ARM64_REQUIRE`] (a symbol already required keeps its value).
pub fn requirements_for(require: &[Requirement], arch: Arch) -> Vec<Requirement> {
    match arch {
        Arch::X86_64 => require.to_vec(),
        Arch::Arm64 => {
            let mut v: Vec<Requirement> = require
                .iter()
                .filter(|r| !X86_ONLY.contains(&r.symbol.as_str()))
                .cloned()
                .collect();
            for s in ARM64_REQUIRE {
                if !v.iter().any(|r| r.symbol == *s) {
                    v.push(Requirement {
                        symbol: (*s).to_string(),
                        value: "y".into(),
                    });
                }
            }
            v
        }
    }
}

impl Definition {
    /// The definition as built for `arch`: x86-64 is the definition as
    /// written; on arm64 each fragment with an arm64 variant beside it
    /// (`fragments/guest-arm64.config` for `guest`) is replaced by that
    /// variant, and the requirements are [`requirements_for`] arm64. Reads
    /// the variants.
    pub fn for_arch(&self, arch: Arch) -> Result<Definition, DefinitionError> {
        let mut def = self.clone();
        for f in def.fragments.iter_mut() {
            let Some(variant) = fragment_variant(&f.name, arch) else {
                continue;
            };
            let Some(dir) = f.path.parent() else {
                continue;
            };
            let path = dir.join(&variant);
            if path.is_file() {
                let name = Path::new(&f.name)
                    .with_file_name(&variant)
                    .to_string_lossy()
                    .into_owned();
                let data = fs::read(&path).map_err(io_err(&path))?;
                *f = InputFile { name, path, data };
            }
        }
        def.require = requirements_for(&def.require, arch);
        Ok(def)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDef {
    extends: Option<String>,
    description: Option<String>,
    version: Option<String>,
    expect: Option<String>,
    base: Option<RawBase>,
    #[serde(default)]
    patches: Vec<String>,
    #[serde(default)]
    config: RawConfig,
    #[serde(default)]
    require: Vec<String>,
    #[serde(default)]
    make: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBase {
    debian: Option<String>,
    path: Option<PathBuf>,
    git: Option<String>,
    #[serde(rename = "ref")]
    rev: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    base: Option<ConfigBase>,
    #[serde(default)]
    fragments: Vec<String>,
}

/// Patch file names taken from a patch directory.
pub const PATCH_EXTENSIONS: &[&str] = &["patch", "diff", "mbox", "eml"];

/// Valid definition names.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// The kernels directory: `$HARNESS_KERNELS_DIR`, else the first `kernels/`
/// (with `fragments/`) in the current directory or its ancestors, else the
/// definitions built into this binary, written into the cache once
/// (`kernel::embedded`), so an installed harness needs no checkout.
pub fn kernels_dir() -> Result<PathBuf, DefinitionError> {
    match users_kernels_dir() {
        Some(d) => Ok(d),
        None => Ok(super::embedded::kernels_dir()?),
    }
}

/// [`kernels_dir`] for loading the definition `name`: where that would be
/// the built-in tree and it has no such definition, the error at once,
/// without writing the tree into the cache (a typo does no work).
pub fn kernels_dir_for(name: &str) -> Result<PathBuf, DefinitionError> {
    check_known(name)?;
    match users_kernels_dir() {
        Some(d) => Ok(d),
        None => Ok(super::embedded::kernels_dir()?),
    }
}

/// The definition `name` exists and, when it is the user's, loads; a
/// built-in one is not unpacked for this (each is loaded by a unit test).
pub fn check(name: &str) -> Result<(), DefinitionError> {
    check_known(name)?;
    if let Some(d) = users_kernels_dir() {
        load(&d, name)?;
    }
    Ok(())
}

/// The definition `name` exists (in the user's `kernels/`, else among the
/// built-in ones), checked without writing anything.
pub fn check_known(name: &str) -> Result<(), DefinitionError> {
    if !valid_name(name) {
        return Err(DefinitionError::BadName(name.into()));
    }
    if let Some(d) = users_kernels_dir() {
        if d.join(format!("{name}.yaml")).is_file() {
            return Ok(());
        }
        return Err(DefinitionError::Unknown {
            name: name.into(),
            known: list(&d).map(|l| l.join(", ")).unwrap_or_default(),
            dir: d,
        });
    }
    let known = super::embedded::shipped_definitions();
    if !known.iter().any(|k| k == name) {
        return Err(DefinitionError::Unknown {
            name: name.into(),
            dir: PathBuf::from("the harness's built-in kernels/"),
            known: known.join(", "),
        });
    }
    Ok(())
}

/// `$HARNESS_KERNELS_DIR`, else the first `kernels/` with `fragments/` in
/// the current directory or its ancestors.
pub fn users_kernels_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os(KERNELS_DIR_ENV).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .map(|a| a.join("kernels"))
        .find(|k| k.join("fragments").is_dir())
}

/// Names of the definitions in `dir`, sorted.
pub fn list(dir: &Path) -> Result<Vec<String>, DefinitionError> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map_err(io_err(dir))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".yaml").map(String::from)
        })
        .filter(|n| valid_name(n))
        .collect();
    names.sort();
    Ok(names)
}

fn invalid(path: &Path, message: impl Into<String>) -> DefinitionError {
    DefinitionError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn read_input(dir: &Path, name: &str) -> Result<InputFile, DefinitionError> {
    let path = dir.join(name);
    let data = fs::read(&path).map_err(io_err(&path))?;
    Ok(InputFile {
        name: name.to_string(),
        path,
        data,
    })
}

fn relative_ok(p: &str) -> bool {
    !p.is_empty()
        && Path::new(p)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Loads `<dir>/<name>.yaml` and every file it names.
pub fn load(dir: &Path, name: &str) -> Result<Definition, DefinitionError> {
    if !valid_name(name) {
        return Err(DefinitionError::BadName(name.into()));
    }
    let path = dir.join(format!("{name}.yaml"));
    if !path.is_file() {
        return Err(DefinitionError::Unknown {
            name: name.into(),
            dir: dir.to_path_buf(),
            known: list(dir).map(|l| l.join(", ")).unwrap_or_default(),
        });
    }
    let text = fs::read_to_string(&path).map_err(io_err(&path))?;
    parse(dir, name, &path, &text)
}

/// Parses a definition's YAML `text`; files are resolved in `dir`, and so
/// is the definition it `extends:`, merged in (see [`extends`]).
pub fn parse(
    dir: &Path,
    name: &str,
    path: &Path,
    text: &str,
) -> Result<Definition, DefinitionError> {
    extends::resolve(dir, name, path, text, &mut Vec::new())
}

/// What one file states, its files read. What it leaves out is `None` or
/// empty, for the definition it extends to fill in.
struct Layer {
    description: Option<String>,
    version: Option<String>,
    expect: Option<String>,
    base: Option<BaseSpec>,
    patches: Vec<InputFile>,
    config_base: Option<ConfigBase>,
    fragments: Vec<InputFile>,
    require: Vec<Requirement>,
    make_vars: Vec<String>,
}

impl Layer {
    /// The definition, once nothing is left to inherit: the base is
    /// required, the rest has defaults.
    fn into_definition(self, name: &str, path: &Path) -> Result<Definition, DefinitionError> {
        let base = self.base.ok_or_else(|| {
            invalid(
                path,
                "missing field `base` (and no `extends:` to take it from)",
            )
        })?;
        Ok(Definition {
            name: name.to_string(),
            path: path.to_path_buf(),
            description: self.description.unwrap_or_default(),
            version: self.version,
            expect: self.expect,
            base,
            patches: self.patches,
            config_base: self.config_base.unwrap_or(ConfigBase::Tinyconfig),
            fragments: self.fragments,
            require: self.require,
            make_vars: self.make_vars,
        })
    }
}

/// Parses and checks one file on its own: what it states, and the name it
/// `extends:` (not followed here).
fn layer(dir: &Path, path: &Path, text: &str) -> Result<(Option<String>, Layer), DefinitionError> {
    let raw: RawDef = serde_yaml_ng::from_str(text).map_err(|e| invalid(path, e.to_string()))?;
    let base = raw.base.map(|b| base_spec(dir, path, b)).transpose()?;
    let patches = patch_series(dir, path, &raw.patches)?;
    let fdir = dir.join("fragments");
    let mut fragments = Vec::new();
    for f in &raw.config.fragments {
        if !relative_ok(f) {
            return Err(invalid(
                path,
                format!("fragment {f:?}: must be relative to fragments/"),
            ));
        }
        let file = if f.ends_with(".config") {
            f.clone()
        } else {
            format!("{f}.config")
        };
        fragments.push(read_input(&fdir, &file)?);
    }
    let require = raw
        .require
        .iter()
        .map(|r| Requirement::parse(r).map_err(|m| invalid(path, m)))
        .collect::<Result<Vec<_>, _>>()?;
    for m in &raw.make {
        let ok = m.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if !ok {
            return Err(invalid(path, format!("make: {m:?} is not VAR=value")));
        }
    }
    let layer = Layer {
        description: raw.description,
        version: raw.version,
        expect: raw.expect,
        base,
        patches,
        config_base: raw.config.base,
        fragments,
        require,
        make_vars: raw.make,
    };
    Ok((raw.extends, layer))
}

fn base_spec(dir: &Path, path: &Path, raw: RawBase) -> Result<BaseSpec, DefinitionError> {
    Ok(match (raw.debian, raw.path, raw.git, raw.rev) {
        (Some(package), None, None, None) => {
            if package.is_empty() || package.contains('/') {
                return Err(invalid(
                    path,
                    format!("base.debian: bad package {package:?}"),
                ));
            }
            BaseSpec::Debian { package }
        }
        (None, Some(p), None, None) => {
            let p = if p.is_relative() { dir.join(p) } else { p };
            BaseSpec::Local { path: p }
        }
        (None, None, Some(url), rev) => BaseSpec::Git {
            url,
            rev: rev.unwrap_or_else(|| "HEAD".into()),
        },
        _ => return Err(invalid(
            path,
            "base: give exactly one of `debian: PACKAGE`, `path: DIR`, `git: URL` (+ `ref: REV`)",
        )),
    })
}

/// The files of `patches:` in order, a directory meaning its patch files,
/// sorted.
fn patch_series(
    dir: &Path,
    path: &Path,
    list: &[String],
) -> Result<Vec<InputFile>, DefinitionError> {
    let pdir = dir.join("patches");
    let mut patches = Vec::new();
    for p in list {
        if !relative_ok(p) {
            return Err(invalid(
                path,
                format!("patch {p:?}: must be relative to patches/"),
            ));
        }
        let full = pdir.join(p);
        if full.is_dir() {
            let mut names: Vec<String> = fs::read_dir(&full)
                .map_err(io_err(&full))?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    Path::new(n)
                        .extension()
                        .is_some_and(|x| PATCH_EXTENSIONS.iter().any(|e| x == *e))
                })
                .collect();
            names.sort();
            if names.is_empty() {
                return Err(invalid(
                    path,
                    format!(
                        "patch directory {} has no *.patch/*.diff/*.mbox/*.eml",
                        full.display()
                    ),
                ));
            }
            for n in names {
                patches.push(read_input(&pdir, &format!("{p}/{n}"))?);
            }
        } else {
            patches.push(read_input(&pdir, p)?);
        }
    }
    Ok(patches)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("fragments")).unwrap();
        fs::create_dir_all(d.path().join("patches/s")).unwrap();
        fs::write(d.path().join("fragments/a.config"), "CONFIG_A=y\n").unwrap();
        fs::write(d.path().join("patches/s/0002-b.patch"), "b").unwrap();
        fs::write(d.path().join("patches/s/0001-a.patch"), "a").unwrap();
        fs::write(d.path().join("patches/s/README"), "not a patch").unwrap();
        fs::write(d.path().join("patches/x.diff"), "x").unwrap();
        d
    }

    #[test]
    fn arm64_takes_a_fragments_arm64_variant_and_its_requirements() {
        let d = setup();
        fs::write(d.path().join("fragments/b.config"), "CONFIG_B=y\n").unwrap();
        fs::write(d.path().join("fragments/a-arm64.config"), "CONFIG_A64=y\n").unwrap();
        let text = "base: {debian: linux-source-7.3}\nconfig: {fragments: [a, b]}\nrequire: [FUTEX, SERIAL_8250_RUNTIME_UARTS=4, X86_IOPL_IOPERM, NUMA, POWER_RESET=y]\n";
        let def = parse(d.path(), "k", &d.path().join("k.yaml"), text).unwrap();
        let names = |def: &Definition| -> Vec<String> {
            def.fragments.iter().map(|f| f.name.clone()).collect()
        };
        // x86-64: as written.
        let x86 = def.for_arch(Arch::X86_64).unwrap();
        assert_eq!(names(&x86), ["a.config", "b.config"]);
        assert_eq!(x86.require, def.require);
        // arm64: `a` has a variant, `b` has none.
        let arm = def.for_arch(Arch::Arm64).unwrap();
        assert_eq!(names(&arm), ["a-arm64.config", "b.config"]);
        assert_eq!(arm.fragments[0].data, b"CONFIG_A64=y\n");
        let req: Vec<String> = arm.require.iter().map(|r| r.symbol.clone()).collect();
        assert!(
            req.iter().all(|r| !X86_ONLY.contains(&r.as_str())),
            "{req:?}"
        );
        assert_eq!(&req[..3], ["FUTEX", "NUMA", "POWER_RESET"]);
        for s in ARM64_REQUIRE {
            assert_eq!(req.iter().filter(|r| r == s).count(), 1, "{s}");
        }
        assert_eq!(fragment_variant("guest.config", Arch::X86_64), None);
        assert_eq!(
            fragment_variant("guest.config", Arch::Arm64).as_deref(),
            Some("guest-arm64.config")
        );
    }

    #[test]
    fn the_shipped_7_3_builds_for_arm64_with_the_virt_guest_fragment() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
        let def = load(&dir, "7.3").unwrap();
        let arm = def.for_arch(Arch::Arm64).unwrap();
        assert_eq!(arm.fragments[0].name, "guest-arm64.config");
        let text = String::from_utf8_lossy(&arm.fragments[0].data).into_owned();
        // Every arm64 requirement is asked for by the fragment, and no x86
        // option is left in it.
        for r in &arm.require {
            let line = format!("CONFIG_{}={}", r.symbol, r.value);
            assert!(text.lines().any(|l| l == line), "{line} not in guest-arm64");
        }
        for s in X86_ONLY {
            assert!(
                !text.contains(&format!("CONFIG_{s}=")),
                "{s} in guest-arm64"
            );
        }
        // The x86 definition is untouched.
        assert_eq!(
            def.for_arch(Arch::X86_64).unwrap().fragments[0].name,
            "guest.config"
        );
    }

    #[test]
    fn parses_full_definition() {
        let d = setup();
        let text = "description: d\nversion: '7.3'\nexpect: immutable=1\nbase:\n  debian: linux-source-7.3\npatches: [x.diff, s]\nconfig:\n  fragments: [a]\nrequire: [FUTEX, CONFIG_NR_CPUS=8]\nmake: [KCFLAGS=-O2]\n";
        let def = parse(d.path(), "k", &d.path().join("k.yaml"), text).unwrap();
        assert_eq!(
            def.base,
            BaseSpec::Debian {
                package: "linux-source-7.3".into()
            }
        );
        let names: Vec<_> = def.patches.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x.diff", "s/0001-a.patch", "s/0002-b.patch"]);
        assert_eq!(def.fragments[0].data, b"CONFIG_A=y\n");
        assert_eq!(def.config_base, ConfigBase::Tinyconfig);
        assert_eq!(def.require[1].to_string(), "CONFIG_NR_CPUS=8");
        assert_eq!(def.require[0].value, "y");
        assert_eq!(def.version.as_deref(), Some("7.3"));
    }

    #[test]
    fn rejects_bad_definitions() {
        let d = setup();
        let p = d.path().join("k.yaml");
        let bad = |t: &str| parse(d.path(), "k", &p, t).unwrap_err().to_string();
        assert!(bad("base: {}\n").contains("exactly one"));
        assert!(bad("base: {debian: a, git: b}\n").contains("exactly one"));
        assert!(bad("base: {debian: a}\nbogus: 1\n").contains("unknown field"));
        assert!(bad("base: {debian: a}\npatches: [../x]\n").contains("relative"));
        assert!(bad("base: {debian: a}\npatches: [missing.patch]\n").contains("missing.patch"));
        assert!(bad("base: {debian: a}\nrequire: ['A B']\n").contains("bad requirement"));
        assert!(bad("base: {debian: a}\nconfig: {base: allyes}\n").contains("allyes"));
        let git = parse(d.path(), "k", &p, "base: {git: /r}\n").unwrap();
        assert_eq!(
            git.base,
            BaseSpec::Git {
                url: "/r".into(),
                rev: "HEAD".into()
            }
        );
    }

    #[test]
    fn names_and_listing() {
        let d = setup();
        fs::write(d.path().join("b.yaml"), "base: {debian: x}\n").unwrap();
        fs::write(d.path().join("a.yaml"), "base: {debian: x}\n").unwrap();
        assert_eq!(list(d.path()).unwrap(), ["a", "b"]);
        assert!(matches!(
            load(d.path(), "zz"),
            Err(DefinitionError::Unknown { .. })
        ));
        assert!(matches!(
            load(d.path(), "../a"),
            Err(DefinitionError::BadName(_))
        ));
        assert!(load(d.path(), "a").is_ok());
    }

    /// A shipped definition as its flat file gave it.
    struct Shipped {
        name: &'static str,
        description: &'static str,
        expect: Option<&'static str>,
        /// Patch file names, relative to `patches/`.
        patches: &'static [&'static str],
        /// Fragment file names, relative to `fragments/`.
        fragments: &'static [&'static str],
        /// Requirements after [`REQUIRE_73`].
        extra: &'static [&'static str],
    }

    /// The `require:` list every shipped 7.3 definition spelled out in full
    /// before `extends:` existed.
    const REQUIRE_73: &[&str] = &[
        "BLK_DEV_INITRD",
        "BINFMT_ELF",
        "DEVTMPFS",
        "PROC_FS",
        "SYSFS",
        "TMPFS",
        "PRINTK",
        "TTY",
        "SERIAL_8250",
        "SERIAL_8250_CONSOLE",
        "SERIAL_8250_NR_UARTS=4",
        "SERIAL_8250_RUNTIME_UARTS=4",
        "MAGIC_SYSRQ",
        "X86_IOPL_IOPERM",
        "SMP",
        "NUMA",
        "ACPI",
        "PCI",
        "ACPI_NUMA",
        "X86_64_ACPI_NUMA",
        "FUTEX",
        "FUTEX_PI",
        "FUTEX_PRIVATE_HASH",
        "FUTEX_MPOL",
        "POSIX_TIMERS",
        "MULTIUSER",
        "PVPANIC",
        "PVPANIC_MMIO",
        "SOFTLOCKUP_DETECTOR",
        "DETECT_HUNG_TASK",
        "LKDTM",
        "IA32_EMULATION",
        "VIRTIO_PCI",
        "VIRTIO_FS",
    ];

    /// What each shipped definition is, field by field, as the flat files
    /// gave it: a change to how definitions are written must not change
    /// what they build.
    #[test]
    fn shipped_definitions_are_what_they_were() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
        let cases = [
            Shipped {
                name: "7.3",
                description: "Debian's 7.3 source, tinyconfig + the guest fragment",
                expect: None,
                patches: &[],
                fragments: &["guest.config"],
                extra: &[],
            },
            Shipped {
                name: "7.3-immutable",
                description: "7.3 with the immutable private hash (seed 000_b592d6f44c015dd6, forward-ported)",
                expect: Some("immutable=1"),
                patches: &["7.3-immutable/0001-futex-Allow-to-make-the-private-hash-immutable.patch"],
                fragments: &["guest.config"],
                extra: &[],
            },
            Shipped {
                name: "7.3-debug",
                description: "7.3 with lockdep, DEBUG_ATOMIC_SLEEP, DEBUG_LIST and KASAN",
                expect: None,
                patches: &[],
                fragments: &["guest.config", "debug.config"],
                extra: &["PROVE_LOCKING", "DEBUG_ATOMIC_SLEEP", "DEBUG_LIST", "KASAN"],
            },
            Shipped {
                name: "7.3-peers",
                description: "7.3 for the peer tools (vmtest 9p root, virtme-ng): guest + peers fragments",
                expect: None,
                patches: &[],
                fragments: &["guest.config", "peers.config"],
                extra: &["9P_FS", "NET_9P_VIRTIO", "VIRTIO_CONSOLE", "CGROUPS", "OVERLAY_FS"],
            },
        ];
        for c in &cases {
            let name = c.name;
            let def = load(&dir, name).unwrap();
            assert_eq!(def.description, c.description, "{name}");
            assert_eq!(def.version.as_deref(), Some("7.3"), "{name}");
            assert_eq!(def.expect.as_deref(), c.expect, "{name}");
            assert_eq!(
                def.base,
                BaseSpec::Debian {
                    package: "linux-source-7.3".into()
                },
                "{name}"
            );
            assert_eq!(def.config_base, ConfigBase::Tinyconfig, "{name}");
            let names = |v: &[InputFile]| v.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
            assert_eq!(names(&def.patches), c.patches, "{name}");
            assert_eq!(names(&def.fragments), c.fragments, "{name}");
            let require: Vec<String> = def.require.iter().map(|r| r.to_string()).collect();
            let want: Vec<String> = REQUIRE_73
                .iter()
                .chain(c.extra)
                .map(|r| Requirement::parse(r).unwrap().to_string())
                .collect();
            assert_eq!(require, want, "{name}");
            assert!(def.make_vars.is_empty(), "{name}");
        }
    }
}
