//! Reading `.deb` files: an `ar` archive whose `data.tar.{xz,zst}` member
//! holds the package's files. Only extraction of single files is supported;
//! nothing is ever written outside the caller's writer.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// Errors reading a `.deb`.
#[derive(Debug, thiserror::Error)]
pub enum DebError {
    /// The file could not be opened or read.
    #[error("reading {deb}: {source}")]
    Io {
        /// The `.deb`.
        deb: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Writing the extracted member failed.
    #[error("writing {member} extracted from {deb}: {source}")]
    Write {
        /// The `.deb`.
        deb: PathBuf,
        /// The member being written.
        member: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The `.deb` has no `data.tar*` member.
    #[error("{deb}: no data.tar member (members: {members:?})")]
    NoData {
        /// The `.deb`.
        deb: PathBuf,
        /// The `ar` members found.
        members: Vec<String>,
    },
    /// The `data.tar` compression is not supported.
    #[error("{deb}: unsupported data member {member} (supported: data.tar, .xz, .zst)")]
    UnsupportedCompression {
        /// The `.deb`.
        deb: PathBuf,
        /// The member name.
        member: String,
    },
    /// No regular file in `data.tar` matched.
    #[error("{deb}: no file matching {wanted} in its data.tar")]
    NotFound {
        /// The `.deb`.
        deb: PathBuf,
        /// Description of what was looked for.
        wanted: String,
    },
}

/// Whether the tar member path `path` (with or without `./`) ends with the
/// path `suffix` on a component boundary: `boot/vmlinuz-x` matches
/// `./boot/vmlinuz-x` and `vmlinuz-x`, but `linuz-x` does not.
pub fn member_matches(path: &str, suffix: &str) -> bool {
    let path = path.trim_start_matches("./").trim_start_matches('/');
    let suffix = suffix.trim_start_matches("./").trim_start_matches('/');
    if suffix.is_empty() {
        return false;
    }
    path == suffix
        || path
            .strip_suffix(suffix)
            .is_some_and(|head| head.ends_with('/'))
}

/// Extracts the first regular file of `deb`'s `data.tar` whose path ends
/// with `member_path_suffix` (see [`member_matches`]) into `out`; returns
/// the member's path as stored in the archive.
pub fn extract_file(
    deb: &Path,
    member_path_suffix: &str,
    out: &mut dyn Write,
) -> Result<String, DebError> {
    extract_matching(
        deb,
        &|p| member_matches(p, member_path_suffix),
        member_path_suffix,
        out,
    )
}

/// Extracts the first regular file of `deb`'s `data.tar` whose path
/// satisfies `pred` into `out`; returns its path. `wanted` describes `pred`
/// for the error message.
pub fn extract_matching(
    deb: &Path,
    pred: &dyn Fn(&str) -> bool,
    wanted: &str,
    out: &mut dyn Write,
) -> Result<String, DebError> {
    let io_err = |source| DebError::Io {
        deb: deb.to_path_buf(),
        source,
    };
    let file = File::open(deb).map_err(io_err)?;
    let mut ar = ar::Archive::new(BufReader::new(file));
    let mut members = Vec::new();
    while let Some(entry) = ar.next_entry() {
        let entry = entry.map_err(io_err)?;
        let name = String::from_utf8_lossy(entry.header().identifier())
            .trim_end_matches('/')
            .to_string();
        if !name.starts_with("data.tar") {
            members.push(name);
            continue;
        }
        let reader: Box<dyn Read + '_> = match name.as_str() {
            "data.tar" => Box::new(entry),
            "data.tar.xz" => Box::new(liblzma::read::XzDecoder::new(entry)),
            "data.tar.zst" => Box::new(
                ruzstd::decoding::StreamingDecoder::new(entry)
                    .map_err(|e| io_err(io::Error::new(io::ErrorKind::InvalidData, e)))?,
            ),
            _ => {
                return Err(DebError::UnsupportedCompression {
                    deb: deb.to_path_buf(),
                    member: name,
                })
            }
        };
        let mut tar = tar::Archive::new(reader);
        for te in tar.entries().map_err(io_err)? {
            let mut te = te.map_err(io_err)?;
            if te.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let path = te.path().map_err(io_err)?.to_string_lossy().into_owned();
            if pred(&path) {
                copy_split(&mut te, out, deb, &path)?;
                return Ok(path);
            }
        }
        return Err(DebError::NotFound {
            deb: deb.to_path_buf(),
            wanted: wanted.to_string(),
        });
    }
    Err(DebError::NoData {
        deb: deb.to_path_buf(),
        members,
    })
}

/// `io::copy` that tells read errors (the archive) from write errors.
fn copy_split(
    r: &mut dyn Read,
    w: &mut dyn Write,
    deb: &Path,
    member: &str,
) -> Result<(), DebError> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(DebError::Io {
                    deb: deb.to_path_buf(),
                    source,
                })
            }
        };
        w.write_all(&buf[..n]).map_err(|source| DebError::Write {
            deb: deb.to_path_buf(),
            member: member.to_string(),
            source,
        })?;
    }
}

/// Builds small `.deb` files for tests.
#[cfg(test)]
pub(crate) mod testdeb {
    /// How `data.tar` is compressed.
    #[derive(Clone, Copy)]
    pub enum Comp {
        Xz,
        Zst,
    }

    /// A `.deb` whose `data.tar` holds `files` (paths like `./boot/x`), plus
    /// a symlink `./usr/share/doc/link` to show non-regular entries are
    /// skipped.
    pub fn build(files: &[(&str, &[u8])], comp: Comp) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            h.set_cksum();
            tar.append_data(&mut h, path, *data).unwrap();
        }
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        tar.append_link(&mut h, "./usr/share/doc/vmlinuz", "elsewhere")
            .unwrap();
        let tar = tar.into_inner().unwrap();
        let (name, data) = match comp {
            Comp::Xz => {
                let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
                std::io::Write::write_all(&mut e, &tar).unwrap();
                ("data.tar.xz", e.finish().unwrap())
            }
            Comp::Zst => (
                "data.tar.zst",
                ruzstd::encoding::compress_to_vec(
                    &tar[..],
                    ruzstd::encoding::CompressionLevel::Fastest,
                ),
            ),
        };
        let mut ar = ar::Builder::new(Vec::new());
        for (n, d) in [
            ("debian-binary", &b"2.0\n"[..]),
            ("control.tar.xz", &b"not really"[..]),
            (name, &data[..]),
        ] {
            ar.append(&ar::Header::new(n.as_bytes().to_vec(), d.len() as u64), d)
                .unwrap();
        }
        ar.into_inner().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::testdeb::{build, Comp};
    use super::*;

    #[test]
    fn suffix_matching() {
        assert!(member_matches("./boot/vmlinuz-7", "boot/vmlinuz-7"));
        assert!(member_matches("./boot/vmlinuz-7", "vmlinuz-7"));
        assert!(member_matches("boot/vmlinuz-7", "./boot/vmlinuz-7"));
        assert!(!member_matches("./boot/vmlinuz-7", "linuz-7"));
        assert!(!member_matches("./boot/vmlinuz-7", ""));
    }

    #[test]
    fn extracts_from_xz_and_zst() {
        let dir = tempfile::tempdir().unwrap();
        for comp in [Comp::Xz, Comp::Zst] {
            let deb = dir.path().join("k.deb");
            std::fs::write(
                &deb,
                build(
                    &[
                        ("./usr/share/doc/readme", b"doc"),
                        (
                            "./usr/lib/modules/7.3.4+deb13-cloud-amd64/vmlinuz",
                            b"KERNEL",
                        ),
                    ],
                    comp,
                ),
            )
            .unwrap();
            let mut out = Vec::new();
            let p = extract_file(
                &deb,
                "usr/lib/modules/7.3.4+deb13-cloud-amd64/vmlinuz",
                &mut out,
            )
            .unwrap();
            assert!(p.ends_with("usr/lib/modules/7.3.4+deb13-cloud-amd64/vmlinuz"));
            assert_eq!(out, b"KERNEL");
            // Symlinks are not regular files.
            let e = extract_file(&deb, "doc/vmlinuz", &mut Vec::new()).unwrap_err();
            assert!(matches!(e, DebError::NotFound { .. }), "{e}");
        }
    }

    #[test]
    fn not_a_deb() {
        let dir = tempfile::tempdir().unwrap();
        let deb = dir.path().join("x.deb");
        std::fs::write(&deb, b"this is not an ar archive").unwrap();
        assert!(extract_file(&deb, "x", &mut Vec::new()).is_err());
        let e = extract_file(&dir.path().join("missing.deb"), "x", &mut Vec::new()).unwrap_err();
        assert!(matches!(e, DebError::Io { .. }));
    }
}
