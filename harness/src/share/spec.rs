//! The `--share` grammar: `HOST_DIR[:GUEST_PATH[:ro|rw]]` (also the
//! matrix's `shares:` key), the guest paths a share may use, and the
//! host-side check that the directory exists. Knows nothing of kernels or
//! daemons.

use super::{ShareError, ARTIFACTS_GUEST_PATH};
use std::path::{Path, PathBuf};

/// One host directory shared with the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareSpec {
    /// Host directory (absolute after [`ShareSpec::resolve`]).
    pub host: PathBuf,
    /// Mount point in the guest.
    pub guest: String,
    /// Read-only in the guest (mount flag and daemon).
    pub read_only: bool,
}

/// Guest paths a share must not cover or hide.
const RESERVED: &[&str] = &["/proc", "/sys", "/dev", "/tmp", "/init", "/harness"];

/// Checks a guest mount point: absolute, plain characters, no `.`/`..`
/// components, not `/` nor a reserved path (or below `/proc`, `/sys`,
/// `/dev`; below `/harness` only new directories other than `bin`,
/// `modules`, `artifacts`).
pub fn check_guest_path(p: &str) -> Result<(), String> {
    if !p.starts_with('/') {
        return Err(format!("guest path {p:?} must be absolute"));
    }
    if p.len() > 200
        || !p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
    {
        return Err(format!(
            "guest path {p:?} must be at most 200 characters of [A-Za-z0-9/._-]"
        ));
    }
    let comps: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
    if comps.is_empty() || comps.iter().any(|c| *c == "." || *c == "..") {
        return Err(format!("guest path {p:?} must name a directory below /"));
    }
    let norm = format!("/{}", comps.join("/"));
    let under = |r: &str| norm == r || norm.starts_with(&format!("{r}/"));
    let bad = RESERVED.contains(&norm.as_str())
        || ["/proc", "/sys", "/dev"].iter().any(|r| under(r))
        || ["/harness/bin", "/harness/modules", ARTIFACTS_GUEST_PATH]
            .iter()
            .any(|r| under(r));
    if bad {
        return Err(format!(
            "guest path {p:?} would hide what the guest needs (reserved: {}, {ARTIFACTS_GUEST_PATH})",
            RESERVED.join(", ")
        ));
    }
    Ok(())
}

/// `/mnt/<host dir's name>` (name sanitised).
pub fn default_guest_path(host: &Path) -> String {
    let name: String = host
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = name.trim_start_matches('.');
    format!("/mnt/{}", if name.is_empty() { "share" } else { name })
}

impl ShareSpec {
    /// Parses `HOST_DIR[:GUEST_PATH[:ro|rw]]` (host paths with `:` are not
    /// supported). Pure: the host directory is checked by [`ShareSpec::resolve`].
    pub fn parse(spec: &str) -> Result<ShareSpec, ShareError> {
        let bad = |why: String| ShareError::BadSpec {
            spec: spec.to_string(),
            why,
        };
        let parts: Vec<&str> = spec.split(':').collect();
        let (host, guest, mode) = match parts[..] {
            [h] => (h, None, None),
            [h, g] => (h, Some(g), None),
            [h, g, m] => (h, Some(g), Some(m)),
            _ => return Err(bad("too many ':'".into())),
        };
        if host.is_empty() {
            return Err(bad("empty host directory".into()));
        }
        let read_only = match mode {
            None | Some("rw") => false,
            Some("ro") => true,
            Some(m) => return Err(bad(format!("mode {m:?} is neither ro nor rw"))),
        };
        let host = PathBuf::from(host);
        let guest = match guest {
            None | Some("") => default_guest_path(&host),
            Some(g) => match g.trim_end_matches('/') {
                "" => "/".to_string(),
                g => g.to_string(),
            },
        };
        check_guest_path(&guest).map_err(bad)?;
        Ok(ShareSpec {
            host,
            guest,
            read_only,
        })
    }

    /// The same share with its host directory made absolute; an error
    /// unless it is an existing directory.
    pub fn resolve(&self) -> Result<ShareSpec, ShareError> {
        let host = std::fs::canonicalize(&self.host).map_err(|source| ShareError::Io {
            path: self.host.clone(),
            source,
        })?;
        if !host.is_dir() {
            return Err(ShareError::BadSpec {
                spec: self.host.display().to_string(),
                why: "not a directory".into(),
            });
        }
        Ok(ShareSpec {
            host,
            ..self.clone()
        })
    }
}

/// `HOST:GUEST:ro|rw`: the spec syntax with nothing left to defaults.
impl std::fmt::Display for ShareSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = if self.read_only { "ro" } else { "rw" };
        write!(f, "{}:{}:{mode}", self.host.display(), self.guest)
    }
}

/// Checks that no two shares use one guest path.
pub fn check_distinct(shares: &[ShareSpec]) -> Result<(), ShareError> {
    for (i, a) in shares.iter().enumerate() {
        if let Some(b) = shares[..i].iter().find(|b| b.guest == a.guest) {
            return Err(ShareError::BadSpec {
                spec: a.host.display().to_string(),
                why: format!(
                    "guest path {} is also used by {}",
                    a.guest,
                    b.host.display()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_share_specs() {
        let s = ShareSpec::parse("/srv/out").unwrap();
        assert_eq!((s.guest.as_str(), s.read_only), ("/mnt/out", false));
        let s = ShareSpec::parse("bins:/opt/bins:ro").unwrap();
        assert_eq!(s.host, PathBuf::from("bins"));
        assert_eq!((s.guest.as_str(), s.read_only), ("/opt/bins", true));
        let s = ShareSpec::parse("/a::ro").unwrap();
        assert_eq!((s.guest.as_str(), s.read_only), ("/mnt/a", true));
        assert!(!ShareSpec::parse("/a:/b/:rw").unwrap().read_only);
        assert_eq!(ShareSpec::parse("/a:/b/").unwrap().guest, "/b");
        for (bad, why) in [
            ("", "empty host"),
            ("/a:/b:rx", "neither ro nor rw"),
            ("/a:/b:ro:x", "too many"),
            ("/a:relative", "absolute"),
            ("/a:/", "below /"),
            ("/a:/mnt/../proc", "below /"),
            ("/a:/proc/x", "hide"),
            ("/a:/harness", "hide"),
            ("/a:/harness/bin", "hide"),
            ("/a:/harness/artifacts/x", "hide"),
            ("/a:/tmp", "hide"),
            ("/a:/mnt/a b", "[A-Za-z0-9/._-]"),
        ] {
            let e = ShareSpec::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(ShareSpec::parse("/a:/harness/extra").is_ok());
        assert_eq!(
            default_guest_path(Path::new("/x/.hidden dir")),
            "/mnt/hidden_dir"
        );
        // Display round-trips through parse, defaults spelled out.
        for s in ["/srv/out", "bins:/opt/bins:ro", "/a::rw"] {
            let spec = ShareSpec::parse(s).unwrap();
            assert_eq!(ShareSpec::parse(&spec.to_string()).unwrap(), spec, "{s}");
        }
        assert_eq!(
            ShareSpec::parse("bins:/opt/bins:ro").unwrap().to_string(),
            "bins:/opt/bins:ro"
        );
        assert_eq!(
            ShareSpec::parse("/srv/out").unwrap().to_string(),
            "/srv/out:/mnt/out:rw"
        );
    }

    #[test]
    fn resolve_checks_the_host_directory() {
        let d = tempfile::tempdir().unwrap();
        let s = ShareSpec::parse(&format!("{}:/mnt/x", d.path().display())).unwrap();
        assert!(s.resolve().unwrap().host.is_absolute());
        let f = d.path().join("f");
        std::fs::write(&f, b"").unwrap();
        let e = ShareSpec::parse(&f.display().to_string())
            .unwrap()
            .resolve()
            .unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
        assert!(ShareSpec::parse("/nonexistent/harness")
            .unwrap()
            .resolve()
            .is_err());
    }
}
