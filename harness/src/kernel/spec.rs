//! Kernel specs as users write them: `debian:<version>`, `path:<bzImage>`
//! or `source:<name>` (built from `kernels/<name>.yaml`).

use std::path::PathBuf;

/// A parsed kernel spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSpec {
    /// Debian's prebuilt cloud kernel of that version (`7.3.4`, `7.3`, or a full ABI).
    Debian(String),
    /// A local bzImage.
    Path(PathBuf),
    /// Built from source by the definition `kernels/<name>.yaml`.
    Source(String),
}

/// Errors in a kernel spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelSpecError {
    /// Not `kind:value`.
    #[error("kernel {0:?}: expected debian:<version> (e.g. debian:7.3.4), path:<bzImage> or source:<name> (kernels/<name>.yaml)")]
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

    /// The upstream version this spec names, when it says (for default expectations).
    pub fn version(&self) -> Option<&str> {
        match self {
            KernelSpec::Debian(v) => Some(v),
            KernelSpec::Path(_) | KernelSpec::Source(_) => None,
        }
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
}

/// Where a [`ResolvedKernel`]'s image came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelOrigin {
    /// A local file (`path:`); its `.config`, if any, lies beside it.
    Path,
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
    /// The build produced no image.
    #[error("kernel source:{0}: the build produced no image")]
    NoImage(String),
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
        matches!(
            self,
            ResolveError::BadImage { .. }
                | ResolveError::Definition(_)
                | ResolveError::Debian(crate::kernel::debian::DebianError::UnknownVersion { .. })
        )
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

/// Gets the image for a spec: a local file as is, Debian's package
/// (fetched, verified and cached), or a definition built from source (a
/// cache hit when nothing changed). Blocking: call from a blocking thread.
pub fn resolve(
    spec: &KernelSpec,
    mirror: Option<&str>,
    progress: &mut dyn FnMut(crate::kernel::debian::Progress),
) -> Result<ResolvedKernel, ResolveError> {
    use crate::kernel::{build, cache::Cache, debian::DebianMirror, definition};
    match spec {
        KernelSpec::Path(p) => {
            check_bzimage(p).map_err(|why| ResolveError::BadImage {
                path: p.clone(),
                why,
            })?;
            Ok(ResolvedKernel {
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
                &build::BuildOptions::default(),
                &|| DebianMirror::discover(mirror.as_deref()),
                &|m| eprintln!("harness: {m}"),
            )?;
            let path = built
                .image
                .ok_or_else(|| ResolveError::NoImage(name.clone()))?;
            Ok(ResolvedKernel {
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
        KernelSpec::Debian(v) => {
            let cache = Cache::from_env()?;
            let image = DebianMirror::discover(mirror)?.fetch_with_progress(v, &cache, progress)?;
            Ok(ResolvedKernel {
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
