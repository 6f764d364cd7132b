//! Files built into the binary (by `harness/build.rs`): the shipped
//! `kernels/` tree and default `matrix.yaml` here, the guest binaries in
//! `guestbin`. Tools that read files (the source builder reads fragments
//! and patches, the matrix loader its file) get them written into the
//! cache once, in a directory named by the SHA-256 of their content, so an
//! installed harness needs no checkout.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::cache::{Cache, CacheError};

/// Files embedded by the build script, with the SHA-256 over their names
/// and contents.
#[derive(Debug)]
pub struct Tree {
    /// Lower-case hex SHA-256 over every file's name, length and content.
    pub hash: &'static str,
    /// `(path relative to the tree, content)`, sorted by path.
    pub files: &'static [(&'static str, &'static [u8])],
}

#[cfg(test)]
impl Tree {
    /// Panics unless `hash` is the one of the files (rendered as
    /// `harness/build.rs` does).
    pub(crate) fn assert_hash(&self) {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for (rel, bytes) in self.files {
            h.update(rel.as_bytes());
            h.update([0]);
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
        assert_eq!(hex::encode(h.finalize()), self.hash);
    }
}

include!(concat!(env!("OUT_DIR"), "/shipped.rs"));

/// The `kernels/` tree and `matrix.yaml` of the checkout this binary was
/// built from.
pub fn shipped() -> &'static Tree {
    shipped_tree()
}

/// Names of the shipped definitions (`kernels/<name>.yaml`), sorted; read
/// from the table, nothing written.
pub fn shipped_definitions() -> Vec<String> {
    let mut names: Vec<String> = shipped()
        .files
        .iter()
        .filter_map(|(rel, _)| rel.strip_prefix("kernels/")?.strip_suffix(".yaml"))
        .filter(|n| !n.contains('/'))
        .map(String::from)
        .collect();
    names.sort();
    names
}

/// The shipped tree written into the default cache: the directory holding
/// `kernels/` and `matrix.yaml`.
pub fn shipped_dir() -> Result<PathBuf, CacheError> {
    materialise(&Cache::from_env()?, "shipped", shipped(), 0o644)
}

/// The shipped kernel definitions, fragments and patches, on disk.
pub fn kernels_dir() -> Result<PathBuf, CacheError> {
    Ok(shipped_dir()?.join("kernels"))
}

/// The shipped default `matrix.yaml`, on disk.
pub fn matrix() -> Result<PathBuf, CacheError> {
    Ok(shipped_dir()?.join("matrix.yaml"))
}

/// Writes `tree` into `<cache>/<kind>/<hash>/` (files with `mode`) unless
/// it is there already; returns that directory. The files are written into
/// a temporary directory beside it, which is then renamed: the directory
/// exists only complete. Writers of the same tree serialise on its cache
/// lock; the second finds it present.
pub fn materialise(
    cache: &Cache,
    kind: &str,
    tree: &Tree,
    mode: u32,
) -> Result<PathBuf, CacheError> {
    let dest = cache.checked_path(Path::new(kind).join(tree.hash))?;
    if dest.is_dir() {
        return Ok(dest);
    }
    let _lock = cache.lock(&format!("{kind}-{}", tree.hash))?;
    if dest.is_dir() {
        return Ok(dest);
    }
    let parent = dest.parent().unwrap_or(cache.root());
    fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempdir_in(parent)
        .map_err(io_err("create temporary directory in", parent))?;
    for (rel, bytes) in tree.files {
        let path = tmp.path().join(rel);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
        }
        write_file(&path, bytes, mode)?;
    }
    fs::rename(tmp.path(), &dest).map_err(io_err("rename into", &dest))?;
    if let Ok(d) = fs::File::open(parent) {
        let _ = d.sync_all();
    }
    Ok(dest)
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CacheError> {
    let mut f = fs::File::create(path).map_err(io_err("create", path))?;
    f.write_all(bytes).map_err(io_err("write", path))?;
    f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .map_err(io_err("chmod", path))?;
    f.sync_all().map_err(io_err("fsync", path))
}

fn io_err<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> CacheError + 'a {
    move |source| CacheError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_tree_is_the_checkouts() {
        let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let t = shipped();
        assert_eq!(t.hash.len(), 64);
        for rel in [
            "kernels/7.3.yaml",
            "kernels/fragments/guest.config",
            "matrix.yaml",
        ] {
            let (_, bytes) = t.files.iter().find(|(p, _)| *p == rel).expect(rel);
            assert_eq!(*bytes, fs::read(ws.join(rel)).unwrap().as_slice(), "{rel}");
        }
        assert!(t.files.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
        let names = crate::kernel::definition::list(&ws.join("kernels")).unwrap();
        assert_eq!(shipped_definitions(), names);
    }

    /// `definition::check` trusts a built-in name without unpacking it.
    #[test]
    fn every_shipped_definition_loads() {
        let dir = tempfile::tempdir().unwrap();
        let d = materialise(&Cache::at(dir.path()), "shipped", shipped(), 0o644).unwrap();
        for name in shipped_definitions() {
            crate::kernel::definition::load(&d.join("kernels"), &name)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn materialise_writes_once_complete() {
        static TREE: Tree = Tree {
            hash: "0123abcd",
            files: &[("a.txt", b"alpha"), ("sub/b.bin", b"beta")],
        };
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let d = materialise(&cache, "test-tree", &TREE, 0o755).unwrap();
        assert_eq!(d, dir.path().join("test-tree/0123abcd"));
        assert_eq!(fs::read(d.join("sub/b.bin")).unwrap(), b"beta");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &fs::metadata(d.join("a.txt")).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o755);
        // Present: not written again (a changed file stays changed).
        fs::write(d.join("a.txt"), b"edited").unwrap();
        assert_eq!(materialise(&cache, "test-tree", &TREE, 0o755).unwrap(), d);
        assert_eq!(fs::read(d.join("a.txt")).unwrap(), b"edited");
        // No temporary left beside it.
        let names: Vec<_> = fs::read_dir(dir.path().join("test-tree"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("0123abcd")]);
    }

    #[test]
    fn the_shipped_hash_is_its_content() {
        shipped().assert_hash();
    }
}
