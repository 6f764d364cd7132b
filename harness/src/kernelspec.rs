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
                Ok(KernelSpec::Debian(v.into()))
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
        KernelSpec::Path(p) => Ok(ResolvedKernel {
            path: p.clone(),
            version: None,
            description: format!("local image {}", p.display()),
            expect: None,
        }),
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
            })
        }
    }
}
