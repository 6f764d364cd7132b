//! Which system this is (`/etc/os-release`) and what its Debian or Ubuntu
//! release offers the harness: whether its own QEMU is recent enough for
//! TCG and which suite has a newer one, whether it packages virtiofsd. The
//! one place that knows releases; `doctor`'s fixes and `setup`'s plan read
//! it.

use std::path::Path;

/// The fields of os-release(5) the harness reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsRelease {
    /// `ID` (`debian`, `ubuntu`, `fedora`, ...).
    pub id: String,
    /// `VERSION_ID` (`12`, `24.04`); none on Debian testing and sid.
    pub version_id: Option<String>,
    /// `VERSION_CODENAME` (`bookworm`, `noble`), else `UBUNTU_CODENAME`.
    pub codename: Option<String>,
    /// `PRETTY_NAME`, else `NAME`, else `ID`.
    pub pretty_name: String,
}

impl OsRelease {
    /// Parses os-release text (`KEY=value`, values optionally quoted).
    pub fn parse(text: &str) -> OsRelease {
        let mut fields = std::collections::BTreeMap::new();
        for line in text.lines() {
            let Some((k, v)) = line.trim().split_once('=') else {
                continue;
            };
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            fields.insert(k.trim().to_string(), v.replace("\\\"", "\""));
        }
        let get = |k: &str| fields.get(k).filter(|v| !v.is_empty()).cloned();
        let id = get("ID").unwrap_or_else(|| "linux".into()).to_lowercase();
        OsRelease {
            pretty_name: get("PRETTY_NAME")
                .or_else(|| get("NAME"))
                .unwrap_or_else(|| id.clone()),
            id,
            version_id: get("VERSION_ID"),
            codename: get("VERSION_CODENAME").or_else(|| get("UBUNTU_CODENAME")),
        }
    }

    /// Reads `<prefix>/etc/os-release`, else `<prefix>/usr/lib/os-release`.
    pub fn read(prefix: &Path) -> Option<OsRelease> {
        ["etc/os-release", "usr/lib/os-release"]
            .iter()
            .find_map(|p| std::fs::read_to_string(prefix.join(p)).ok())
            .map(|t| OsRelease::parse(&t))
    }
}

/// A release `harness setup` installs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distro {
    /// Debian; `major` is none on testing and sid.
    Debian {
        /// `12` for bookworm.
        major: Option<u32>,
        /// `bookworm`, `trixie`, ...
        codename: String,
    },
    /// Ubuntu `year.month`.
    Ubuntu {
        /// `24` for 24.04.
        year: u32,
        /// `4` for 24.04.
        month: u32,
    },
}

/// Oldest Debian release `harness setup` knows (its QEMU is fixed from
/// backports; older ones have no QEMU new enough anywhere in the archive).
pub const MIN_DEBIAN: u32 = 12;
/// Oldest Ubuntu release `harness setup` knows.
pub const MIN_UBUNTU: (u32, u32) = (22, 4);

impl Distro {
    /// The release, or why `harness setup` does not install on it.
    pub fn of(os: &OsRelease) -> Result<Distro, String> {
        let unsupported = || {
            format!(
                "{} is not a system `harness setup` installs on (Debian >= {MIN_DEBIAN}, Ubuntu >= {}.{:02})",
                os.pretty_name, MIN_UBUNTU.0, MIN_UBUNTU.1
            )
        };
        match os.id.as_str() {
            "debian" => {
                let major = match &os.version_id {
                    None => None,
                    Some(v) => Some(
                        v.split('.')
                            .next()
                            .and_then(|m| m.parse::<u32>().ok())
                            .ok_or_else(unsupported)?,
                    ),
                };
                if major.is_some_and(|m| m < MIN_DEBIAN) {
                    return Err(unsupported());
                }
                Ok(Distro::Debian {
                    major,
                    codename: os.codename.clone().unwrap_or_else(|| "sid".into()),
                })
            }
            "ubuntu" => {
                let (y, m) = os
                    .version_id
                    .as_deref()
                    .and_then(|v| v.split_once('.'))
                    .and_then(|(y, m)| Some((y.parse().ok()?, m.parse().ok()?)))
                    .ok_or_else(unsupported)?;
                if (y, m) < MIN_UBUNTU {
                    return Err(unsupported());
                }
                Ok(Distro::Ubuntu { year: y, month: m })
            }
            _ => Err(unsupported()),
        }
    }

    /// The suite that has a QEMU recent enough for TCG when the release's
    /// own is not: Debian 12's is 7.2, bookworm-backports has 10.
    pub fn qemu_backports(&self) -> Option<String> {
        match self {
            Distro::Debian {
                major: Some(12),
                codename,
            } => Some(format!("{codename}-backports")),
            _ => None,
        }
    }

    /// Whether the release's own QEMU is older than
    /// [`crate::host::RELIABLE_TCG_QEMU_MAJOR`] and no suite of its archive
    /// has a newer one (Ubuntu 22.04: 6.2).
    pub fn qemu_unreliable_without_fix(&self) -> bool {
        matches!(self, Distro::Ubuntu { year, .. } if *year < 24)
    }

    /// The packages of an aarch64 Rust std for Debian's `/usr/bin/rustc`
    /// (`:arm64` ones: dpkg must have the arm64 architecture). Debian 12:
    /// `rustc-web`, whose rustc is new enough for the workspace (measured);
    /// later Debian: its own rustc. None on Ubuntu, whose arm64 packages
    /// live in another archive: rustup's `target add` there.
    pub fn arm64_rust_std_packages(&self) -> Option<&'static [&'static str]> {
        match self {
            Distro::Debian {
                major: Some(12), ..
            } => Some(&["rustc-web", "libstd-rust-web-dev:arm64"]),
            Distro::Debian { .. } => Some(&["rustc", "libstd-rust-dev:arm64"]),
            Distro::Ubuntu { .. } => None,
        }
    }

    /// Whether the archive has a `virtiofsd` package (Debian 13, Ubuntu
    /// 24.04 and later); elsewhere it is built with `cargo install`.
    pub fn packages_virtiofsd(&self) -> bool {
        match self {
            Distro::Debian { major, .. } => major.is_none_or(|m| m >= 13),
            Distro::Ubuntu { year, .. } => *year >= 24,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOKWORM: &str = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nVERSION_CODENAME=bookworm\nID=debian\n";

    #[test]
    fn parses_os_release() {
        let os = OsRelease::parse(BOOKWORM);
        assert_eq!(os.id, "debian");
        assert_eq!(os.version_id.as_deref(), Some("12"));
        assert_eq!(os.codename.as_deref(), Some("bookworm"));
        assert_eq!(os.pretty_name, "Debian GNU/Linux 12 (bookworm)");
        let sid = OsRelease::parse("ID=debian\nPRETTY_NAME='Debian GNU/Linux trixie/sid'\n");
        assert_eq!(sid.version_id, None);
        assert_eq!(sid.pretty_name, "Debian GNU/Linux trixie/sid");
    }

    #[test]
    fn releases() {
        let os = |id: &str, v: &str, c: &str| OsRelease {
            id: id.into(),
            version_id: Some(v.into()),
            codename: Some(c.into()),
            pretty_name: format!("{id} {v}"),
        };
        let bookworm = Distro::of(&os("debian", "12", "bookworm")).unwrap();
        assert_eq!(
            bookworm.qemu_backports().as_deref(),
            Some("bookworm-backports")
        );
        assert!(!bookworm.packages_virtiofsd());
        let trixie = Distro::of(&os("debian", "13", "trixie")).unwrap();
        assert_eq!(trixie.qemu_backports(), None);
        assert!(trixie.packages_virtiofsd());
        let noble = Distro::of(&os("ubuntu", "24.04", "noble")).unwrap();
        assert!(noble.packages_virtiofsd() && !noble.qemu_unreliable_without_fix());
        let jammy = Distro::of(&os("ubuntu", "22.04", "jammy")).unwrap();
        assert!(!jammy.packages_virtiofsd() && jammy.qemu_unreliable_without_fix());
        for (id, v) in [("debian", "11"), ("ubuntu", "20.04"), ("fedora", "40")] {
            let e = Distro::of(&os(id, v, "x")).unwrap_err();
            assert!(
                e.contains("not a system `harness setup` installs on"),
                "{e}"
            );
        }
        let sid = Distro::of(&OsRelease::parse("ID=debian\n")).unwrap();
        assert!(sid.packages_virtiofsd() && sid.qemu_backports().is_none());
        assert_eq!(
            bookworm.arm64_rust_std_packages(),
            Some(&["rustc-web", "libstd-rust-web-dev:arm64"][..])
        );
        assert_eq!(
            trixie.arm64_rust_std_packages(),
            Some(&["rustc", "libstd-rust-dev:arm64"][..])
        );
        assert_eq!(noble.arm64_rust_std_packages(), None);
    }
}
