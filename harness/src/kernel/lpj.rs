//! The delay-loop constant a kernel computes at boot on this host, learned
//! from one boot's console and given back as `lpj=` to the next boots of
//! the same image under TCG.
//!
//! Why: a TCG guest's CPUs have no constant-TSC flag, so every secondary
//! CPU calibrates its delay loop by itself (`calibrate_delay_direct()`,
//! emulated busy waiting); measured on debian 7.3.4 at 2 x 4 vCPUs, 1.6 s
//! of a 4.7 s boot. The boot CPU computes the same constant from the TSC
//! rate without a loop and prints it ("Calibrating delay loop (skipped),
//! value calculated using timer frequency.. N BogoMIPS (lpj=M)"); with
//! `lpj=M` every CPU takes it.
//!
//! Keyed by the image (canonical path, size, modification time) in
//! `<cache>/lpj.json`: the value is the host's TSC rate over the kernel's
//! HZ, and the cache is this host's. A missing or unreadable file means
//! nothing learned; a failed write loses only the speed-up.

use crate::kernel::cache::Cache;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

/// The file under the cache root.
pub const FILE: &str = "lpj.json";

/// Only the head of a console is searched (the line comes early in boot).
const SEARCH_BYTES: usize = 256 << 10;

/// Values outside this range are not a delay-loop constant (guest output
/// is untrusted).
const PLAUSIBLE: std::ops::RangeInclusive<u64> = 1_000..=1_000_000_000_000;

/// The boot CPU's TSC-derived constant in `console`, if it printed one.
pub fn parse(console: &[u8]) -> Option<u64> {
    let head = &console[..console.len().min(SEARCH_BYTES)];
    let text = String::from_utf8_lossy(head);
    let line = text.lines().find(|l| {
        l.contains("Calibrating delay loop (skipped), value calculated using timer frequency")
    })?;
    let n: u64 = line
        .split("(lpj=")
        .nth(1)?
        .split(')')
        .next()?
        .trim()
        .parse()
        .ok()?;
    PLAUSIBLE.contains(&n).then_some(n)
}

/// What identifies an image: its canonical path, size and mtime (a rebuilt
/// or replaced image is a new key).
pub fn key(image: &Path) -> Option<String> {
    let meta = std::fs::metadata(image).ok()?;
    let mtime = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    let path = image.canonicalize().ok()?;
    Some(format!(
        "{}:{}:{}",
        path.display(),
        meta.len(),
        mtime.as_secs()
    ))
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Learned {
    version: u32,
    /// [`key`] -> lpj.
    kernels: BTreeMap<String, u64>,
}

/// The learned constants of one cache file.
#[derive(Debug)]
pub struct Store {
    file: Option<PathBuf>,
    learned: Learned,
}

impl Store {
    /// The store in `file` (read now; `None`: memory only).
    pub fn open(file: Option<PathBuf>) -> Store {
        let learned = file
            .as_deref()
            .and_then(|f| std::fs::read(f).ok())
            .and_then(|b| serde_json::from_slice::<Learned>(&b).ok())
            .filter(|l| l.version == 1)
            .unwrap_or_default();
        Store { file, learned }
    }

    /// The constant learned for `image`.
    pub fn known(&self, image: &Path) -> Option<u64> {
        self.learned.kernels.get(&key(image)?).copied()
    }

    /// Records what `console` says for `image`; writes the file (atomically)
    /// when that is new.
    pub fn learn(&mut self, image: &Path, console: &[u8]) {
        let (Some(k), Some(n)) = (key(image), parse(console)) else {
            return;
        };
        if self.learned.kernels.insert(k, n) == Some(n) {
            return;
        }
        self.learned.version = 1;
        let Some(file) = &self.file else { return };
        let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
            return;
        };
        let Ok(body) = serde_json::to_vec_pretty(&self.learned) else {
            return;
        };
        let written = Cache::at(dir).write_atomic(name, &mut body.as_slice());
        if let Err(e) = written {
            tracing::debug!("lpj: not kept: {e}");
        }
    }
}

static SHARED: Mutex<Option<Store>> = Mutex::new(None);

fn with_shared<T>(f: impl FnOnce(&mut Store) -> T) -> T {
    let mut guard = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    let store = guard
        .get_or_insert_with(|| Store::open(Cache::from_env().ok().map(|c| c.root().join(FILE))));
    f(store)
}

/// The constant learned for `image` on this host (the cache's store).
pub fn known(image: &Path) -> Option<u64> {
    with_shared(|s| s.known(image))
}

/// Learns from a boot of `image` (the cache's store).
pub fn learn(image: &Path, console: &[u8]) {
    with_shared(|s| s.learn(image, console))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &[u8] = b"[    0.300208] Calibrating delay loop (skipped), value calculated using timer frequency.. 5199.99 BogoMIPS (lpj=10399988)\r\n";

    #[test]
    fn parses_the_boot_cpus_line_only() {
        assert_eq!(parse(LINE), Some(10_399_988));
        // A secondary CPU's own calibration is not the TSC-derived value.
        assert_eq!(
            parse(b"[ 0.5] Calibrating delay loop... 5000.00 BogoMIPS (lpj=10000000)\n"),
            None
        );
        assert_eq!(parse(b"garbage (lpj=12)\n"), None);
        let implausible = b"Calibrating delay loop (skipped), value calculated using timer frequency.. 0.00 BogoMIPS (lpj=7)\n";
        assert_eq!(parse(implausible), None);
        let mut late = vec![b'x'; SEARCH_BYTES];
        late.extend_from_slice(LINE);
        assert_eq!(parse(&late), None);
    }

    #[test]
    fn learned_per_image_kept_across_opens_and_forgotten_when_the_image_changes() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("bzImage");
        std::fs::write(&image, b"kernel").unwrap();
        let file = dir.path().join(FILE);
        let mut s = Store::open(Some(file.clone()));
        assert_eq!(s.known(&image), None);
        s.learn(&image, b"no such line\n");
        assert_eq!(s.known(&image), None);
        s.learn(&image, LINE);
        assert_eq!(s.known(&image), Some(10_399_988));
        assert_eq!(
            Store::open(Some(file.clone())).known(&image),
            Some(10_399_988)
        );
        // A different image (size differs) is not known.
        std::fs::write(&image, b"another kernel").unwrap();
        assert_eq!(Store::open(Some(file.clone())).known(&image), None);
        // A bad file is nothing learned.
        std::fs::write(&file, b"{not json").unwrap();
        assert_eq!(Store::open(Some(file)).known(&image), None);
        assert_eq!(Store::open(None).known(&dir.path().join("none")), None);
    }
}
