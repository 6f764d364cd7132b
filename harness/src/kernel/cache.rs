//! The XDG cache: atomic writes, file locks.
//!
//! Everything the harness downloads or derives (package indexes, `.deb`
//! files, extracted kernel images) lives under one root directory:
//! `$HARNESS_CACHE_DIR` if set, else `$XDG_CACHE_HOME/futex-harness`, else
//! `~/.cache/futex-harness`.
//!
//! Files are only ever created with [`Cache::write_atomic`] /
//! [`Cache::write_atomic_with`] (temporary file in the same directory, fsync,
//! rename), so an interrupted download never leaves a corrupt file at the
//! final path. Concurrent producers of the same entry serialise on
//! [`Cache::lock`]: the second one waits, then finds the entry present.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Environment variable that overrides the cache root directory.
pub const CACHE_DIR_ENV: &str = "HARNESS_CACHE_DIR";

/// Name of the harness' directory inside the XDG cache directory.
pub const CACHE_DIR_NAME: &str = "futex-harness";

/// Errors from cache operations.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// No cache directory could be determined (no `$HOME`, no override).
    #[error("cannot determine a cache directory: set {CACHE_DIR_ENV} or HOME")]
    NoCacheDir,
    /// A relative cache path was absolute or tried to leave the cache root.
    #[error("invalid cache path {path:?}: must be relative and stay inside the cache")]
    InvalidPath {
        /// The offending path.
        path: PathBuf,
    },
    /// An I/O operation on a cache file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("create", "lock", "rename", ...).
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CacheError + 'a {
    move |source| CacheError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The harness' on-disk cache.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// The default cache: `$HARNESS_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/futex-harness`, else `~/.cache/futex-harness`.
    pub fn from_env() -> Result<Cache, CacheError> {
        if let Some(dir) = std::env::var_os(CACHE_DIR_ENV).filter(|d| !d.is_empty()) {
            return Ok(Cache::at(dir));
        }
        let base = directories::BaseDirs::new().ok_or(CacheError::NoCacheDir)?;
        Ok(Cache::at(base.cache_dir().join(CACHE_DIR_NAME)))
    }

    /// A cache rooted at `root` (created lazily on first write).
    pub fn at(root: impl Into<PathBuf>) -> Cache {
        Cache { root: root.into() }
    }

    /// The cache root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The absolute path of the cache entry `rel` (which may not exist).
    ///
    /// Panics never; an invalid `rel` (absolute, or containing `..`) is
    /// reported by the operations that write, see [`Cache::checked_path`].
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root.join(rel)
    }

    /// Like [`Cache::path`] but rejects absolute paths and `..` components.
    pub fn checked_path(&self, rel: impl AsRef<Path>) -> Result<PathBuf, CacheError> {
        let rel = rel.as_ref();
        let ok = !rel.as_os_str().is_empty()
            && rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !ok {
            return Err(CacheError::InvalidPath {
                path: rel.to_path_buf(),
            });
        }
        Ok(self.root.join(rel))
    }

    /// Takes the exclusive lock named `key`, blocking until it is free.
    ///
    /// The lock is a `flock`-style lock on `<root>/locks/<key>.lock`; it is
    /// released when the returned guard is dropped (or the process dies).
    /// Characters of `key` outside `[A-Za-z0-9._+-]` are replaced by `_`.
    pub fn lock(&self, key: &str) -> Result<CacheLock, CacheError> {
        let dir = self.root.join("locks");
        fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        let path = dir.join(format!("{}.lock", sanitize_key(key)));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("open lock file", &path))?;
        fs4::FileExt::lock(&file).map_err(io_err("lock", &path))?;
        Ok(CacheLock { file, path })
    }

    /// Atomically stores everything `reader` yields at `rel`; returns the
    /// absolute path. See [`Cache::write_atomic_with`].
    pub fn write_atomic(
        &self,
        rel: impl AsRef<Path>,
        reader: &mut dyn Read,
    ) -> Result<PathBuf, CacheError> {
        self.write_atomic_with(rel, |file| io::copy(reader, file).map(|_| ()))
            .map_err(|e| match e {
                WriteError::Cache(e) => e,
                WriteError::Producer(source) => CacheError::Io {
                    action: "write",
                    path: self.root.join("<temporary file>"),
                    source,
                },
            })
    }

    /// Atomically creates `rel` with the content `produce` writes into the
    /// given file: the file is a temporary in the destination directory; on
    /// success it is flushed, fsynced and renamed over `rel` (and the directory
    /// fsynced). If `produce` fails, the temporary is removed and `rel` is
    /// untouched; the producer's own error type is handed back.
    pub fn write_atomic_with<E>(
        &self,
        rel: impl AsRef<Path>,
        produce: impl FnOnce(&mut File) -> Result<(), E>,
    ) -> Result<PathBuf, WriteError<E>> {
        let dest = self.checked_path(rel)?;
        let dir = dest.parent().unwrap_or(&self.root).to_path_buf();
        fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&dir)
            .map_err(io_err("create temporary file in", &dir))?;
        produce(tmp.as_file_mut()).map_err(WriteError::Producer)?;
        let file = tmp.as_file_mut();
        // Readable like any cache file (tempfile creates 0600).
        file.set_permissions(perm_0644())
            .map_err(io_err("chmod", &dest))?;
        file.flush().map_err(io_err("flush", &dest))?;
        file.sync_all().map_err(io_err("fsync", &dest))?;
        tmp.persist(&dest)
            .map_err(|e| io_err("rename into", &dest)(e.error))?;
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(dest)
    }
}

/// Error of [`Cache::write_atomic_with`]: either the cache failed, or the
/// caller's producer did.
#[derive(Debug, thiserror::Error)]
pub enum WriteError<E> {
    /// The cache itself failed (directory, temporary file, fsync, rename).
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The producer closure returned this error.
    #[error("producer failed")]
    Producer(E),
}

/// An exclusive cache lock; released on drop.
#[derive(Debug)]
pub struct CacheLock {
    file: File,
    path: PathBuf,
}

impl CacheLock {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CacheLock {
    fn drop(&mut self) {
        let _ = fs4::FileExt::unlock(&self.file);
    }
}

fn perm_0644() -> fs::Permissions {
    std::os::unix::fs::PermissionsExt::from_mode(0o644)
}

fn sanitize_key(key: &str) -> String {
    let s: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Lower-case hex SHA-256 of the file at `path`.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut r = HashingReader::new(File::open(path)?);
    io::copy(&mut r, &mut io::sink())?;
    Ok(r.finish().0)
}

/// A reader that hashes (SHA-256) and counts what passes through it.
#[derive(Debug)]
pub struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R> HashingReader<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Bytes read so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The wrapped reader.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Lower-case hex SHA-256 and byte count of what was read so far.
    pub fn current(&self) -> (String, u64) {
        (hex::encode(self.hasher.clone().finalize()), self.count)
    }

    /// Lower-case hex SHA-256 and byte count of everything read.
    pub fn finish(self) -> (String, u64) {
        (hex::encode(self.hasher.finalize()), self.count)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    #[test]
    fn atomic_write_creates_dirs_and_content() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let p = cache.write_atomic("a/b/c.txt", &mut &b"hello"[..]).unwrap();
        assert_eq!(p, dir.path().join("a/b/c.txt"));
        assert_eq!(fs::read(&p).unwrap(), b"hello");
        // Overwrite.
        cache.write_atomic("a/b/c.txt", &mut &b"bye"[..]).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"bye");
        // No temporaries left.
        let names: Vec<_> = fs::read_dir(dir.path().join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("c.txt")]);
    }

    #[test]
    fn failed_producer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        cache.write_atomic("x.bin", &mut &b"old"[..]).unwrap();
        let r = cache.write_atomic_with("x.bin", |f| {
            f.write_all(b"partial garbage").unwrap();
            Err::<(), _>("interrupted")
        });
        assert!(matches!(r, Err(WriteError::Producer("interrupted"))));
        assert_eq!(fs::read(dir.path().join("x.bin")).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn rejects_escaping_paths() {
        let cache = Cache::at("/nonexistent");
        assert!(cache.checked_path("../x").is_err());
        assert!(cache.checked_path("/etc/passwd").is_err());
        assert!(cache.checked_path("").is_err());
        assert!(cache.checked_path("a/./b").is_ok());
    }

    #[test]
    fn env_override() {
        // Only this test touches the variable.
        std::env::set_var(CACHE_DIR_ENV, "/tmp/some-cache-root");
        let c = Cache::from_env().unwrap();
        std::env::remove_var(CACHE_DIR_ENV);
        assert_eq!(c.root(), Path::new("/tmp/some-cache-root"));
    }

    #[test]
    fn lock_is_exclusive_between_threads() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let inside = Arc::new(AtomicUsize::new(0));
        let max_inside = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let (cache, inside, max_inside, start) = (
                    cache.clone(),
                    inside.clone(),
                    max_inside.clone(),
                    start.clone(),
                );
                std::thread::spawn(move || {
                    start.wait();
                    let _g = cache.lock("kernel/7.3.4").unwrap();
                    let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max_inside.fetch_max(n, Ordering::SeqCst);
                    // The first one in "downloads"; the second finds it.
                    let target = cache.path("entry");
                    let found = target.exists();
                    if !found {
                        std::thread::sleep(Duration::from_millis(150));
                        cache.write_atomic("entry", &mut &b"x"[..]).unwrap();
                    }
                    inside.fetch_sub(1, Ordering::SeqCst);
                    (i, found)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(max_inside.load(Ordering::SeqCst), 1);
        assert_eq!(results.iter().filter(|(_, found)| *found).count(), 1);
        assert!(dir.path().join("locks/kernel_7.3.4.lock").exists());
    }

    #[test]
    fn lock_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let g = cache.lock("k").unwrap();
        drop(g);
        let _g2 = cache.lock("k").unwrap();
    }

    #[test]
    fn sha256_helpers() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(sha256_hex(b""), empty);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        fs::write(&p, b"abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut r = HashingReader::new(&b"abc"[..]);
        io::copy(&mut r, &mut io::sink()).unwrap();
        assert_eq!(r.count(), 3);
        assert_eq!(r.finish().0, sha256_file(&p).unwrap());
    }
}
