//! Writes the guest's initramfs (newc cpio, uncompressed) in Rust: no
//! `cpio` tool needed, and every kernel with `BLK_DEV_INITRD` can unpack it.
//!
//! Layout: `/init` (guest-init), `/harness/plan.json`, `/harness/bin/<name>`,
//! the mount points, and a `/dev/console` node so the kernel can give init
//! its stdio before devtmpfs is mounted.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Errors while writing the initramfs.
#[derive(Debug, thiserror::Error)]
pub enum InitramfsError {
    /// A file to pack could not be read.
    #[error("cannot read {path} for the initramfs: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The archive could not be written.
    #[error("cannot write initramfs {path}: {source}")]
    Write {
        /// The archive.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is too large for newc's 32-bit size field.
    #[error("{path} is {size} bytes; newc entries are limited to 4 GiB")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory (mode 0755).
    Dir,
    /// A regular file from memory, with its permission bits.
    Bytes(Vec<u8>, u32),
    /// A regular file copied from the host, with its permission bits.
    HostFile(PathBuf, u32),
    /// A character device (major, minor), mode 0600.
    CharDev(u32, u32),
}

/// One entry: an absolute guest path and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path inside the guest, without the leading `/`.
    pub path: String,
    /// The node.
    pub node: Node,
}

/// The entries of an initramfs, in archive order (parents first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// Entries.
    pub entries: Vec<Entry>,
}

impl Layout {
    /// The standard guest layout: `/init`, mount points, `/dev/console`,
    /// the plan, and the binaries as `/harness/bin/<name>`.
    pub fn guest(init: &Path, plan_json: Vec<u8>, binaries: &[(String, PathBuf)]) -> Layout {
        let mut l = Layout::default();
        for d in ["dev", "proc", "sys", "tmp", "harness", "harness/bin"] {
            l.push(d, Node::Dir);
        }
        l.push("dev/console", Node::CharDev(5, 1));
        l.push("init", Node::HostFile(init.to_path_buf(), 0o755));
        l.push(
            guest_tests::plan::PLAN_PATH.trim_start_matches('/'),
            Node::Bytes(plan_json, 0o644),
        );
        for (name, path) in binaries {
            l.push(
                &format!("harness/bin/{name}"),
                Node::HostFile(path.clone(), 0o755),
            );
        }
        l
    }

    /// Appends an entry.
    pub fn push(&mut self, path: &str, node: Node) {
        self.entries.push(Entry {
            path: path.trim_start_matches('/').to_string(),
            node,
        });
    }

    /// Writes the archive to `w`.
    pub fn write_to<W: Write>(&self, mut w: W, out_path: &Path) -> Result<W, InitramfsError> {
        let werr = |source| InitramfsError::Write {
            path: out_path.to_path_buf(),
            source,
        };
        for (ino, e) in self.entries.iter().enumerate() {
            let (mode, body, rdev): (u32, Vec<u8>, (u32, u32)) = match &e.node {
                Node::Dir => (0o040_755, Vec::new(), (0, 0)),
                Node::Bytes(b, perm) => (0o100_000 | perm, b.clone(), (0, 0)),
                Node::HostFile(p, perm) => {
                    let b = std::fs::read(p).map_err(|source| InitramfsError::Read {
                        path: p.clone(),
                        source,
                    })?;
                    (0o100_000 | perm, b, (0, 0))
                }
                Node::CharDev(maj, min) => (0o020_600, Vec::new(), (*maj, *min)),
            };
            let size = u32::try_from(body.len()).map_err(|_| InitramfsError::TooLarge {
                path: PathBuf::from(&e.path),
                size: body.len() as u64,
            })?;
            let mut entry = cpio::newc::Builder::new(&e.path)
                .ino(ino as u32 + 1)
                .mode(mode)
                .nlink(if matches!(e.node, Node::Dir) { 2 } else { 1 })
                .rdev_major(rdev.0)
                .rdev_minor(rdev.1)
                .write(w, size);
            entry.write_all(&body).map_err(werr)?;
            w = entry.finish().map_err(werr)?;
        }
        cpio::newc::trailer(w).map_err(werr)
    }

    /// Writes the archive to a file.
    pub fn write_file(&self, path: &Path) -> Result<(), InitramfsError> {
        let f = std::fs::File::create(path).map_err(|source| InitramfsError::Write {
            path: path.to_path_buf(),
            source,
        })?;
        let w = self.write_to(std::io::BufWriter::new(f), path)?;
        w.into_inner()
            .map_err(|e| InitramfsError::Write {
                path: path.to_path_buf(),
                source: e.into_error(),
            })?
            .sync_all()
            .map_err(|source| InitramfsError::Write {
                path: path.to_path_buf(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_reads_back_with_modes_and_contents() {
        let mut l = Layout::default();
        l.push("/harness", Node::Dir);
        l.push("harness/plan.json", Node::Bytes(b"{}".to_vec(), 0o644));
        l.push("dev/console", Node::CharDev(5, 1));
        let bytes = l.write_to(Vec::new(), Path::new("mem")).unwrap();
        assert_eq!(bytes.len() % 4, 0, "newc is 4-byte aligned");

        let mut seen = Vec::new();
        let mut rest: &[u8] = &bytes;
        loop {
            let mut r = cpio::newc::Reader::new(rest).unwrap();
            if r.entry().is_trailer() {
                break;
            }
            let (name, mode, maj, min) = (
                r.entry().name().to_string(),
                r.entry().mode(),
                r.entry().rdev_major(),
                r.entry().rdev_minor(),
            );
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut r, &mut body).unwrap();
            seen.push((name, mode, maj, min, body));
            rest = r.finish().unwrap();
        }
        assert_eq!(
            seen,
            vec![
                ("harness".into(), 0o040_755, 0, 0, vec![]),
                ("harness/plan.json".into(), 0o100_644, 0, 0, b"{}".to_vec()),
                ("dev/console".into(), 0o020_600, 5, 1, vec![]),
            ]
        );
    }

    #[test]
    fn missing_host_file_names_the_file() {
        let mut l = Layout::default();
        l.push("x", Node::HostFile("/nonexistent/bin".into(), 0o755));
        let e = l.write_to(Vec::new(), Path::new("out")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/bin"), "{e}");
    }
}
