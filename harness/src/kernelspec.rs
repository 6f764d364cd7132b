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
