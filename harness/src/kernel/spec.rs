//! Kernel specs as users write them: `debian:<version>`, `path:<bzImage>`,
//! `source:<name>` (built from `kernels/<name>.yaml`) or `tree:<dir>` (the
//! user's own kernel tree, built as it is).

use crate::kernel::tree::{TreeSpec, TreeSpecError};
use std::path::{Path, PathBuf};

/// A parsed kernel spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSpec {
    /// Debian's prebuilt cloud kernel of that version (`7.3.4`, `7.3`, or a full ABI).
    Debian(String),
    /// A local bzImage.
    Path(PathBuf),
    /// Built from source by the definition `kernels/<name>.yaml`.
    Source(String),
    /// The user's own kernel tree, built as it is, out of tree
    /// ([`crate::kernel::tree`]).
    Tree(TreeSpec),
}

/// Errors in a kernel spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelSpecError {
    /// Not `kind:value`.
    #[error("kernel {0:?}: expected debian:<version> (e.g. debian:7.3.4), path:<bzImage>, source:<name> (kernels/<name>.yaml) or tree:<dir> (your kernel tree)")]
    Malformed(String),
    /// `debian:` with something that is not a version.
    #[error("kernel {0:?}: expected a Debian kernel version such as debian:7.3.4, debian:7.3 or debian:7.3.4+deb13")]
    BadDebianVersion(String),
    /// A `path:` that is not a file.
    #[error("kernel {spec:?}: {path} is not a file")]
    NoSuchFile {
        /// The spec.
        spec: String,
        /// The path.
        path: PathBuf,
    },
    /// A `tree:` that cannot be built out of tree.
    #[error("kernel {spec:?}: {why}")]
    Tree {
        /// The spec.
        spec: String,
        /// Why.
        why: TreeSpecError,
    },
}

/// A config file for a kernel that cannot take it (`--kernel-config`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelConfigError {
    /// Not a file.
    #[error("{}: no such file", .0.display())]
    NoSuchFile(PathBuf),
    /// Only a `tree:` kernel is built with a config file.
    #[error("{}: only a tree:<dir> kernel is built from a config file", .0.display())]
    NotATree(PathBuf),
}

impl KernelSpec {
    /// Parses a spec (and checks a `path:` exists).
    pub fn parse(s: &str) -> Result<KernelSpec, KernelSpecError> {
        match s.split_once(':') {
            Some(("debian", v)) if !v.is_empty() && !v.contains('/') => {
                let version_like = v.starts_with(|c: char| c.is_ascii_digit())
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || ".+~-".contains(c));
                if version_like {
                    Ok(KernelSpec::Debian(v.into()))
                } else {
                    Err(KernelSpecError::BadDebianVersion(s.into()))
                }
            }
            Some(("source", n)) if crate::kernel::definition::valid_name(n) => {
                Ok(KernelSpec::Source(n.into()))
            }
            Some(("tree", d)) if !d.is_empty() => TreeSpec::parse(Path::new(d))
                .map(KernelSpec::Tree)
                .map_err(|why| KernelSpecError::Tree {
                    spec: s.into(),
                    why,
                }),
            Some(("path", p)) if !p.is_empty() => {
                let path = PathBuf::from(p);
                if path.is_file() {
                    Ok(KernelSpec::Path(path))
                } else {
                    Err(KernelSpecError::NoSuchFile {
                        spec: s.into(),
                        path,
                    })
                }
            }
            _ => Err(KernelSpecError::Malformed(s.into())),
        }
    }

    /// The upstream version this spec names, when it says (for default
    /// expectations): a Debian version, a tree's top Makefile.
    pub fn version(&self) -> Option<&str> {
        match self {
            KernelSpec::Debian(v) => Some(v),
            KernelSpec::Tree(t) => t.version.as_deref(),
            KernelSpec::Path(_) | KernelSpec::Source(_) => None,
        }
    }

    /// This `tree:` kernel built from the config file `file` instead of
    /// tinyconfig (`--kernel-config`): the file must exist, and only a
    /// `tree:` kernel takes one.
    pub fn with_config(self, file: &Path) -> Result<KernelSpec, KernelConfigError> {
        let KernelSpec::Tree(tree) = self else {
            return Err(KernelConfigError::NotATree(file.into()));
        };
        if !file.is_file() {
            return Err(KernelConfigError::NoSuchFile(file.into()));
        }
        let config = std::path::absolute(file).unwrap_or_else(|_| file.into());
        Ok(KernelSpec::Tree(TreeSpec {
            config: Some(config),
            ..tree
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_layer_version_definition_and_user() {
        let k = |version: Option<&str>, expect: Option<&str>| ResolvedKernel {
            path: "/k".into(),
            version: version.map(String::from),
            description: String::new(),
            expect: expect.map(String::from),
            origin: KernelOrigin::Path,
            arch: crate::arch::Arch::X86_64,
        };
        assert_eq!(k(None, None).expectations(None), Ok(None));
        let imm = k(Some("7.3"), Some("immutable=1"));
        let e = imm.expectations(None).unwrap().unwrap();
        assert!(
            e.contains("immutable=1") && e.contains("growth=any-vm") && e.ends_with(",version=7.3"),
            "{e}"
        );
        let e = imm.expectations(Some("immutable=0")).unwrap().unwrap();
        assert!(e.contains("immutable=0"), "{e}");
        assert!(imm.expectations(Some("bogus=1")).is_err());
    }

    #[test]
    fn specs() {
        assert_eq!(
            KernelSpec::parse("debian:7.3.4").unwrap(),
            KernelSpec::Debian("7.3.4".into())
        );
        assert!(KernelSpec::parse("debian:").is_err());
        assert_eq!(
            KernelSpec::parse("source:7.3-immutable").unwrap(),
            KernelSpec::Source("7.3-immutable".into())
        );
        assert!(KernelSpec::parse("source:../x").is_err());
        assert!(KernelSpec::parse("source:").is_err());
        assert!(KernelSpec::parse("7.3.4")
            .unwrap_err()
            .to_string()
            .contains("expected debian:"));
        let e = KernelSpec::parse("path:/nonexistent/bzImage").unwrap_err();
        assert!(e.to_string().contains("is not a file"));
        assert!(matches!(
            KernelSpec::parse("path:/bin/sh").unwrap(),
            KernelSpec::Path(_)
        ));
    }

    #[test]
    fn tree_specs_are_checked_when_parsed() {
        let d = tempfile::tempdir().unwrap();
        let e = KernelSpec::parse(&format!("tree:{}/none", d.path().display())).unwrap_err();
        assert!(e.to_string().contains("none: no such directory"), "{e}");
        let file = d.path().join("f");
        std::fs::write(&file, "").unwrap();
        let e = KernelSpec::parse(&format!("tree:{}", file.display())).unwrap_err();
        assert!(
            e.to_string().contains("is a file, not a kernel tree"),
            "{e}"
        );
        assert!(KernelSpec::parse("tree:").is_err());
        let tree = d.path().join("linux");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("Makefile"), "VERSION = 7\nPATCHLEVEL = 3\n").unwrap();
        std::fs::write(tree.join("Kconfig"), "").unwrap();
        let spec = KernelSpec::parse(&format!("tree:{}", tree.display())).unwrap();
        assert_eq!(spec.version(), Some("7.3"));
        std::fs::create_dir_all(tree.join("arch/x86/include/generated")).unwrap();
        let e = KernelSpec::parse(&format!("tree:{}", tree.display())).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("kernel \"tree:"), "{msg}");
        assert!(
            msg.contains("configured in place (it has arch/x86/include/generated)"),
            "{msg}"
        );
        assert!(msg.contains("make mrproper"), "{msg}");
        std::fs::remove_dir_all(tree.join("arch")).unwrap();

        // A config file: only for a tree, and only one that exists.
        let cfg = d.path().join("my.config");
        assert_eq!(
            spec.clone().with_config(&cfg),
            Err(KernelConfigError::NoSuchFile(cfg.clone()))
        );
        std::fs::write(&cfg, "CONFIG_X=y\n").unwrap();
        let KernelSpec::Tree(t) = spec.with_config(&cfg).unwrap() else {
            panic!("a tree")
        };
        assert_eq!(t.config, Some(cfg.clone()));
        let e = KernelSpec::parse("debian:7.3").unwrap().with_config(&cfg);
        assert_eq!(e, Err(KernelConfigError::NotATree(cfg)));
    }

    #[test]
    fn bzimage_check_refuses_garbage_and_truncated_images() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("img");
        std::fs::write(&p, b"short").unwrap();
        assert!(check_bzimage(&p).unwrap_err().contains("too short"));
        std::fs::write(&p, vec![0x5a; 4096]).unwrap();
        assert!(check_bzimage(&p)
            .unwrap_err()
            .contains("not an x86 bzImage"));
        let mut h = vec![0u8; 4096];
        h[0x1fe] = 0x55;
        h[0x1ff] = 0xaa;
        h[0x202..0x206].copy_from_slice(b"HdrS");
        h[0x1f1] = 1;
        h[0x1f4..0x1f8].copy_from_slice(&1000u32.to_le_bytes());
        std::fs::write(&p, &h).unwrap();
        assert!(check_bzimage(&p)
            .unwrap_err()
            .contains("truncated: 4096 bytes"));
        h.resize(1024 + 16_000, 0);
        std::fs::write(&p, &h).unwrap();
        check_bzimage(&p).unwrap();
    }

    #[test]
    fn the_release_is_the_first_word_of_the_headers_kernel_version() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("img");
        let mut h = vec![0u8; 0x1000];
        h[0x202..0x206].copy_from_slice(b"HdrS");
        h[0x206..0x208].copy_from_slice(&0x20fu16.to_le_bytes());
        h[0x20e..0x210].copy_from_slice(&0x800u16.to_le_bytes());
        let text = b"6.12.95+deb12-cloud-amd64 (debian-kernel@lists.debian.org) #1 SMP\0";
        h[0xa00..0xa00 + text.len()].copy_from_slice(text);
        std::fs::write(&p, &h).unwrap();
        assert_eq!(
            image_release(&p).as_deref(),
            Some("6.12.95+deb12-cloud-amd64")
        );
        // An old boot protocol has no such field.
        let mut old = h.clone();
        old[0x206..0x208].copy_from_slice(&0x1ffu16.to_le_bytes());
        std::fs::write(&p, &old).unwrap();
        assert_eq!(image_release(&p), None);
        // No offset, no header, text that is no release, a short file.
        let mut none = h.clone();
        none[0x20e..0x210].copy_from_slice(&0u16.to_le_bytes());
        std::fs::write(&p, &none).unwrap();
        assert_eq!(image_release(&p), None);
        let mut junk = h.clone();
        junk[0xa00..0xa05].copy_from_slice(b"linux");
        std::fs::write(&p, &junk).unwrap();
        assert_eq!(image_release(&p), None);
        std::fs::write(&p, vec![0x41; 0x1000]).unwrap();
        assert_eq!(image_release(&p), None);
        std::fs::write(&p, b"short").unwrap();
        assert_eq!(image_release(&p), None);
        assert_eq!(image_release(&d.path().join("absent")), None);
    }
}

/// A bootable kernel image and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedKernel {
    /// The image.
    pub path: PathBuf,
    /// Upstream version when known (`6.18.15`), for default expectations.
    pub version: Option<String>,
    /// One line for the terminal: package, suite, ABI.
    pub description: String,
    /// Expectations the kernel's definition declares (`source:` kernels,
    /// e.g. `immutable=1` for a patched kernel), over the version defaults.
    pub expect: Option<String>,
    /// Where the image came from, with what later steps need to know about
    /// it (a Debian kernel's ABI) without fetching it again.
    pub origin: KernelOrigin,
    /// The architecture the image boots on.
    pub arch: crate::arch::Arch,
}

/// Where a [`ResolvedKernel`]'s image came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelOrigin {
    /// A local file (`path:`); its `.config`, if any, lies beside it.
    Path,
    /// Built from the user's tree (`tree:`); the cache keeps its
    /// `.config` (as `config`), `meta.json` and `vmlinux` beside the image.
    Tree {
        /// The tree, canonical.
        dir: PathBuf,
    },
    /// Built from a definition (`source:`); the cache keeps its `.config`
    /// beside the image.
    Source,
    /// Debian's prebuilt kernel (`debian:`).
    Debian {
        /// Debian's ABI name, `7.3.4+deb13-cloud-amd64`: it names the
        /// kernel's other packages (`linux-base-<abi>`,
        /// `linux-modules-<abi>`).
        abi: String,
        /// The package the vmlinuz came from (`linux-image-<abi>`); older
        /// kernels ship their modules in it too.
        package: String,
    },
}

impl ResolvedKernel {
    /// The expectations the futex suites get: the version's row of the ABI
    /// table (`6.18` -> 6.18.15) with `version=` naming it, then what the
    /// kernel's definition declares, then `extra` (the user's `--expect`),
    /// later keys winning. `None` when nothing is known.
    pub fn expectations(&self, extra: Option<&str>) -> Result<Option<String>, String> {
        use guest_tests::expect::Expect;
        let base = self.version.as_deref().map(|v| {
            let mut e = Expect::for_release(v);
            // For `futex-prctl/kernel-version-matches`; a version the key
            // refuses is left out (that case then skips, saying so).
            let _ = e.set("version", v);
            e.encode()
        });
        let parts: Vec<&str> = [base.as_deref(), self.expect.as_deref(), extra]
            .into_iter()
            .flatten()
            .collect();
        if parts.is_empty() {
            return Ok(None);
        }
        Expect::parse(&parts.join(","))
            .map(|e| Some(e.encode()))
            .map_err(|e| e.to_string())
    }
}

/// Errors getting a kernel image.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The cache.
    #[error(transparent)]
    Cache(#[from] crate::kernel::cache::CacheError),
    /// Debian's archive.
    #[error(transparent)]
    Debian(#[from] crate::kernel::debian::DebianError),
    /// A kernel definition (`kernels/<name>.yaml`).
    #[error(transparent)]
    Definition(#[from] crate::kernel::definition::DefinitionError),
    /// Building a kernel from source.
    #[error(transparent)]
    Build(#[from] crate::kernel::build::BuildError),
    /// Building the user's tree.
    #[error(transparent)]
    Tree(#[from] crate::kernel::tree::TreeError),
    /// The build produced no image.
    #[error("kernel source:{0}: the build produced no image")]
    NoImage(String),
    /// The image is for another architecture than the one asked for.
    #[error("kernel image {}: an {found} image, but --arch is {asked}", path.display())]
    WrongArch {
        /// The image.
        path: PathBuf,
        /// What its header says.
        found: crate::arch::Arch,
        /// What was asked for.
        asked: crate::arch::Arch,
    },
    /// Something this kind of kernel cannot do yet on an architecture.
    #[error("kernel {spec}: not available for {arch}: {why}")]
    NotForArch {
        /// The kernel as written.
        spec: String,
        /// The architecture.
        arch: crate::arch::Arch,
        /// Why.
        why: String,
    },
    /// The file is not a bootable x86 bzImage (garbage, truncated).
    #[error("kernel image {}: {why}", path.display())]
    BadImage {
        /// The image.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

impl ResolveError {
    /// Whether the user's input is at fault (no such version or
    /// definition, not a kernel image) rather than the host or network.
    pub fn is_usage(&self) -> bool {
        match self {
            ResolveError::Tree(e) => e.is_usage(),
            _ => matches!(
                self,
                ResolveError::BadImage { .. }
                    | ResolveError::WrongArch { .. }
                    | ResolveError::NotForArch { .. }
                    | ResolveError::Definition(_)
                    | ResolveError::Debian(
                        crate::kernel::debian::DebianError::UnknownVersion { .. }
                    )
            ),
        }
    }
}

/// Checks a `path:` image for `arch`: an x86 bzImage ([`check_bzimage`])
/// or an arm64 `Image` (its header magic; QEMU also boots a gzip one),
/// and an image of the other architecture is named as such.
fn check_image(path: &std::path::Path, arch: crate::arch::Arch) -> Result<(), ResolveError> {
    use std::io::Read;
    let mut head = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(0x210).read_to_end(&mut head);
    }
    match crate::arch::Arch::of_kernel_image(&head) {
        Some(found) if found != arch => {
            return Err(ResolveError::WrongArch {
                path: path.into(),
                found,
                asked: arch,
            })
        }
        _ => {}
    }
    let bad = |why: String| ResolveError::BadImage {
        path: path.into(),
        why,
    };
    match arch {
        crate::arch::Arch::X86_64 => check_bzimage(path).map_err(bad),
        crate::arch::Arch::Arm64 if head.starts_with(&[0x1f, 0x8b]) => Ok(()),
        crate::arch::Arch::Arm64 if head.len() < 0x40 => Err(bad(format!(
            "only {} bytes: too short for an arm64 Image",
            head.len()
        ))),
        crate::arch::Arch::Arm64 => match crate::arch::Arch::of_kernel_image(&head) {
            Some(_) => Ok(()),
            None => Err(bad(
                "not an arm64 Image (no `ARM\\x64` magic at 0x38); pass \
                 arch/arm64/boot/Image (or Image.gz), not vmlinux or another file"
                    .into(),
            )),
        },
    }
}

/// Checks that `path` looks like a complete x86 bzImage: the boot sector
/// signature, the `HdrS` setup header, and at least as many bytes as the
/// header says the kernel has. A garbage or truncated image otherwise
/// either makes QEMU fail obscurely or hangs the guest in the decompressor
/// until the watchdog fires.
pub fn check_bzimage(path: &std::path::Path) -> Result<(), String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut h = [0u8; 0x208];
    f.read_exact(&mut h)
        .map_err(|_| format!("only {len} bytes: too short for a bzImage"))?;
    if h[0x1fe..0x200] != [0x55, 0xaa] || &h[0x202..0x206] != b"HdrS" {
        return Err(
            "not an x86 bzImage (no boot signature / HdrS setup header); \
             pass the bzImage (arch/x86/boot/bzImage), not vmlinux or another file"
                .into(),
        );
    }
    let setup_sects = match h[0x1f1] {
        0 => 4,
        n => u64::from(n),
    };
    let syssize = u64::from(u32::from_le_bytes([h[0x1f4], h[0x1f5], h[0x1f6], h[0x1f7]]));
    let need = (setup_sects + 1) * 512 + syssize * 16;
    if len < need {
        return Err(format!(
            "truncated: {len} bytes, but its header says {need} (an interrupted copy or download?)"
        ));
    }
    Ok(())
}

/// The kernel release an x86 bzImage names in its setup header
/// (`kernel_version`, boot protocol >= 2.00: the first word of
/// `6.12.95+deb12-cloud-amd64 (debian-kernel@...) #1 SMP ...`), read from
/// the file on the host, never from what the guest prints. `None` when the
/// file has no such header or the string is not a plain release.
pub fn image_release(path: &std::path::Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let mut h = [0u8; 0x210];
    f.read_exact(&mut h).ok()?;
    let protocol = u16::from_le_bytes([h[0x206], h[0x207]]);
    if &h[0x202..0x206] != b"HdrS" || protocol < 0x200 {
        return None;
    }
    let offset = u16::from_le_bytes([h[0x20e], h[0x20f]]);
    if offset == 0 {
        return None;
    }
    f.seek(SeekFrom::Start(u64::from(offset) + 0x200)).ok()?;
    let mut text = [0u8; 64];
    let n = f.read(&mut text).ok()?;
    let word: Vec<u8> = text[..n]
        .iter()
        .copied()
        .take_while(|b| b.is_ascii_graphic())
        .collect();
    let word = String::from_utf8(word).ok()?;
    // A release starts with its version: `6.12.95...`, `7.3.4+`.
    (word.starts_with(|c: char| c.is_ascii_digit()) && word.len() < text.len()).then_some(word)
}

/// Gets the image for a spec: a local file as is, Debian's package
/// (fetched, verified and cached), a definition built from source or the
/// user's tree built as it is (each a cache hit when nothing changed).
/// Blocking: call from a blocking thread. A build's progress notes go to
/// `say`.
pub fn resolve(
    spec: &KernelSpec,
    arch: crate::arch::Arch,
    mirror: Option<&str>,
    progress: &mut dyn FnMut(crate::kernel::debian::Progress),
    say: &(dyn Fn(&str) + Sync),
) -> Result<ResolvedKernel, ResolveError> {
    use crate::kernel::{build, cache::Cache, debian::DebianMirror, definition, tree};
    match spec {
        KernelSpec::Path(p) => {
            check_image(p, arch)?;
            Ok(ResolvedKernel {
                arch,
                path: p.clone(),
                version: None,
                description: format!("local image {}", p.display()),
                expect: None,
                origin: KernelOrigin::Path,
            })
        }
        KernelSpec::Source(name) => {
            let def = definition::load(&definition::kernels_dir()?, name)?;
            let cache = Cache::from_env()?;
            let mirror = mirror.map(String::from);
            let built = build::build(
                &def,
                &cache,
                &build::BuildOptions {
                    arch,
                    ..build::BuildOptions::default()
                },
                &|| DebianMirror::discover(mirror.as_deref()),
                say,
            )?;
            let path = built
                .image
                .ok_or_else(|| ResolveError::NoImage(name.clone()))?;
            Ok(ResolvedKernel {
                arch,
                description: format!(
                    "source:{name} {} ({} in {:.2} s)",
                    built.key,
                    if built.cache_hit {
                        "cache hit"
                    } else {
                        "built"
                    },
                    built.elapsed.as_secs_f64()
                ),
                path,
                version: def.version.clone(),
                expect: def.expect.clone(),
                origin: KernelOrigin::Source,
            })
        }
        KernelSpec::Tree(t) => {
            let def = definition::load(&definition::kernels_dir()?, tree::DEFINITION)?;
            let built = tree::build(
                t,
                &def,
                &Cache::from_env()?,
                &build::BuildOptions {
                    arch,
                    ..build::BuildOptions::default()
                },
                say,
            )?;
            Ok(ResolvedKernel {
                arch,
                path: built.image,
                version: built.version,
                description: built.description,
                expect: None,
                origin: KernelOrigin::Tree { dir: t.dir.clone() },
            })
        }
        KernelSpec::Debian(v) => {
            let cache = Cache::from_env()?;
            let image = DebianMirror::discover(mirror)?
                .with_arch(arch)
                .fetch_with_progress(v, &cache, progress)?;
            Ok(ResolvedKernel {
                arch,
                description: format!("{} ({}, {})", image.abi, image.package, image.suite),
                path: image.path,
                version: Some(image.version),
                expect: None,
                origin: KernelOrigin::Debian {
                    abi: image.abi,
                    package: image.package,
                },
            })
        }
    }
}
