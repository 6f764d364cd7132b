//! Host directories shared with the guest over virtiofs: artifacts out,
//! binaries in, no repacking of the initramfs.
//!
//! - [`ShareSpec`]: `HOST_DIR[:GUEST_PATH[:ro|rw]]` (`--share`, and the
//!   matrix's `shares:` key through [`ShareSpec::parse`]).
//! - [`support_for`]: what a kernel can do for virtiofs (blocking; once
//!   per kernel, for `harness run` and the matrix alike).
//! - [`decide`]: the run-wide decision (pure): which shares, the per-cell
//!   artifacts share when virtiofs is available, the kernel modules to
//!   load, and what to say when virtiofs cannot work (a note for the
//!   default artifacts share, an error for shares asked for explicitly).
//! - [`CellShares::prepare`]: per cell, the plan's modules/mounts/env, the
//!   initramfs additions, and `--guest-bin`s that run from a share instead
//!   of being packed.
//! - [`Daemons::start`]: one `virtiofsd` per share and boot attempt, on a
//!   socket in the cell's private temp dir, in its own process group with
//!   `PR_SET_PDEATHSIG`, `kill_on_drop` and registered in [`crate::procs`];
//!   killed when dropped (so on every exit path of the cell).
//! - [`CellShares::finish`]: notes for the report: one
//!   `[[ATTACHMENT|path]]` per artifact (the convention Jenkins and GitLab
//!   read) and shares the guest could not mount.

use crate::kernel::modules::{self, KernelModules, ModuleFile};
use crate::kernelspec::KernelSpec;
use crate::qemu::FsDevice;
use guest_tests::artifact::{encode_shares, ARTIFACTS_ENV, SHARES_ENV};
use guest_tests::plan::{PlannedShare, RunPlan, BIN_DIR};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Guest path of the per-cell artifacts share.
pub const ARTIFACTS_GUEST_PATH: &str = "/harness/artifacts";
/// Tag of the artifacts share.
pub const ARTIFACTS_TAG: &str = "artifacts";
/// Name of the artifacts directory in the cell's output directory.
pub const ARTIFACTS_DIR: &str = "artifacts";
/// Environment variable naming extra modules (comma-separated) to load in
/// the guest with the virtiofs ones, for Debian kernels (a debugging knob;
/// the VM tests use it to load a really modular module).
pub const EXTRA_MODULES_ENV: &str = "HARNESS_GUEST_MODULES";
/// Environment variable naming the virtiofsd binary.
pub const VIRTIOFSD_ENV: &str = "HARNESS_VIRTIOFSD";
/// How long a daemon gets to create its socket.
pub const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many attachments are listed (then one note says how many more).
pub const MAX_ATTACHMENTS: usize = 200;

/// Errors of shares.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    /// A `--share` spec is malformed.
    #[error("bad share {spec:?}: {why} (expected HOST_DIR[:GUEST_PATH[:ro|rw]])")]
    BadSpec {
        /// As given.
        spec: String,
        /// What is wrong.
        why: String,
    },
    /// Shares were asked for but virtiofs cannot work.
    #[error("--share asked for, but virtiofs cannot work here: {0}")]
    Unavailable(String),
    /// A daemon did not start.
    #[error("virtiofsd for share {tag} ({dir}): {why}")]
    Daemon {
        /// Tag.
        tag: String,
        /// Shared directory.
        dir: PathBuf,
        /// What happened (with the tail of its log).
        why: String,
    },
    /// A directory could not be prepared.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

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

/// The virtiofsd to use: `$HARNESS_VIRTIOFSD`, else `virtiofsd` on `PATH`,
/// in `~/.cargo/bin` (`cargo install virtiofsd`), or where distributions
/// put it.
pub fn find_virtiofsd() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(VIRTIOFSD_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{VIRTIOFSD_ENV}={} is not a file", p.display()))
        };
    }
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("virtiofsd"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
    {
        candidates.push(home.join("bin/virtiofsd"));
    }
    candidates.push("/usr/libexec/virtiofsd".into());
    candidates.push("/usr/lib/qemu/virtiofsd".into());
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        "no virtiofsd (not packaged in Debian 12: `cargo install virtiofsd`, \
         which needs libcap-ng-dev and libseccomp-dev; or set HARNESS_VIRTIOFSD)"
            .to_string()
    })
}

/// The run-wide share decision.
#[derive(Debug, Clone, Default)]
pub struct ShareSetup {
    /// Shares asked for (resolved).
    pub shares: Vec<ShareSpec>,
    /// Whether each cell gets an artifacts share.
    pub artifacts: bool,
    /// The daemon (set whenever a share is on).
    pub virtiofsd: Option<PathBuf>,
    /// Modules to load first, in order (empty: built in or unknown).
    pub modules: Vec<ModuleFile>,
    /// Notes for every cell's report (fallbacks, modules used).
    pub notes: Vec<String>,
}

impl ShareSetup {
    /// No shares at all (the initramfs-only path).
    pub fn none() -> ShareSetup {
        ShareSetup::default()
    }

    /// Whether any share is on.
    pub fn active(&self) -> bool {
        self.virtiofsd.is_some() && (self.artifacts || !self.shares.is_empty())
    }
}

/// What the kernel can do for virtiofs.
#[derive(Debug, Clone)]
pub enum KernelSupport {
    /// Known: these modules (maybe none: built in) make virtiofs work.
    Known(KernelModules),
    /// Built in, per the kernel's `.config` (source-built kernels).
    BuiltIn {
        /// The config file read.
        config: PathBuf,
    },
    /// Not known (a `path:` kernel without a config beside it): assumed
    /// built in; the guest says if not.
    AssumedBuiltIn,
    /// Known not to work.
    Missing(String),
}

/// Decides what a run shares (pure). `explicit` are the `--share`s
/// (resolved), `artifacts` whether the per-cell artifacts share is wanted
/// (`--no-artifacts` not given), `daemon` where virtiofsd is (or why not),
/// `support` what the kernel can do (`None`: not looked at because no
/// share can be on anyway).
pub fn decide(
    explicit: Vec<ShareSpec>,
    artifacts: bool,
    daemon: Result<PathBuf, String>,
    support: Option<KernelSupport>,
) -> Result<ShareSetup, ShareError> {
    check_distinct(&explicit)?;
    let wanted = artifacts || !explicit.is_empty();
    if !wanted {
        return Ok(ShareSetup::none());
    }
    let problem = match (&daemon, &support) {
        (Err(e), _) => Some(e.clone()),
        (_, Some(KernelSupport::Missing(why))) => Some(why.clone()),
        (_, None) => Some("the kernel's virtiofs support was not checked".into()),
        _ => None,
    };
    if let Some(why) = problem {
        if !explicit.is_empty() {
            return Err(ShareError::Unavailable(why));
        }
        return Ok(ShareSetup {
            notes: vec![format!(
                "no artifacts share ({why}); the tests ran from the initramfs only and \
                 {ARTIFACTS_ENV} was not set"
            )],
            ..ShareSetup::none()
        });
    }
    let mut notes = Vec::new();
    let modules = match support {
        Some(KernelSupport::Known(m)) => {
            notes.push(format!("virtiofs: {}", modules::describe(&m)));
            m.load_order
        }
        Some(KernelSupport::BuiltIn { config }) => {
            notes.push(format!(
                "virtiofs: built in (CONFIG_VIRTIO_FS=y, CONFIG_VIRTIO_PCI=y in {})",
                config.display()
            ));
            Vec::new()
        }
        _ => Vec::new(),
    };
    Ok(ShareSetup {
        shares: explicit,
        artifacts,
        virtiofsd: daemon.ok(),
        modules,
        notes,
    })
}

/// What Debian kernel `version` needs for virtiofs (blocking: may
/// download the kernel's small `linux-base-<abi>` package, or its modules).
pub fn debian_support(mirror: Option<&str>, version: &str) -> KernelSupport {
    use crate::kernel::{cache::Cache, debian::DebianMirror};
    let r = (|| -> Result<KernelModules, String> {
        let cache = Cache::from_env().map_err(|e| e.to_string())?;
        let mirror = DebianMirror::discover(mirror).map_err(|e| e.to_string())?;
        let image = mirror.fetch(version, &cache).map_err(|e| e.to_string())?;
        let extra = std::env::var(EXTRA_MODULES_ENV).unwrap_or_default();
        let mut wanted: Vec<&str> = modules::VIRTIOFS_MODULES.to_vec();
        wanted.extend(extra.split(',').map(str::trim).filter(|m| !m.is_empty()));
        modules::fetch_debian(&mirror, &cache, &image.abi, &image.package, &wanted)
            .map_err(|e| e.to_string())
    })();
    match r {
        Ok(m) => KernelSupport::Known(m),
        Err(e) => KernelSupport::Missing(format!("kernel without virtiofs: {e}")),
    }
}

/// What `kernel`, resolved to `image`, can do for virtiofs (blocking):
/// `debian:` kernels from their own packages ([`debian_support`]; may
/// download), `source:` and `path:` kernels from the `.config` beside the
/// image ([`image_support`]). `harness run` and the matrix both decide
/// through this one function.
pub fn support_for(kernel: &KernelSpec, image: &Path, mirror: Option<&str>) -> KernelSupport {
    match kernel {
        KernelSpec::Debian(version) => debian_support(mirror, version),
        KernelSpec::Path(_) | KernelSpec::Source(_) => image_support(image),
    }
}

/// The options a kernel without modules needs for a share.
const BUILT_IN_OPTIONS: &[&str] = &["CONFIG_VIRTIO_PCI", "CONFIG_VIRTIO_FS"];

/// Where a kernel image's `.config` is: `config` beside a cached
/// `harness kernel build` image, `.config` beside the image, or the build
/// tree's `.config` of an `arch/x86/boot/bzImage`.
pub fn config_beside(image: &Path) -> Option<PathBuf> {
    let dir = image.parent()?;
    let mut candidates = vec![dir.join("config"), dir.join(".config")];
    if image.ends_with("arch/x86/boot/bzImage") {
        candidates.extend(dir.ancestors().nth(3).map(|t| t.join(".config")));
    }
    candidates.into_iter().find(|c| c.is_file())
}

/// Whether a kernel whose `.config` reads `config` (at `path`) can mount
/// virtiofs without modules (pure). Source-built guests load no modules,
/// so `=m` is as good as absent.
pub fn support_from_config(path: &Path, config: &str) -> KernelSupport {
    let missing: Vec<&str> = BUILT_IN_OPTIONS
        .iter()
        .copied()
        .filter(|opt| {
            !config
                .lines()
                .any(|l| l.trim().strip_prefix(*opt) == Some("=y"))
        })
        .collect();
    if missing.is_empty() {
        KernelSupport::BuiltIn {
            config: path.to_path_buf(),
        }
    } else {
        KernelSupport::Missing(format!(
            "kernel without virtiofs: {} not built in per {} (source-built guests \
             load no modules; kernels/fragments/guest.config sets them)",
            missing.join(", "),
            path.display()
        ))
    }
}

/// What a `source:` or `path:` kernel image can do, from the `.config`
/// next to it (blocking: reads a file); no config found: assumed built in.
pub fn image_support(image: &Path) -> KernelSupport {
    match config_beside(image) {
        Some(path) => match std::fs::read_to_string(&path) {
            Ok(text) => support_from_config(&path, &text),
            Err(e) => KernelSupport::Missing(format!("reading {}: {e}", path.display())),
        },
        None => KernelSupport::AssumedBuiltIn,
    }
}

/// One exported directory of a cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// virtiofs tag.
    pub tag: String,
    /// Host directory.
    pub host: PathBuf,
    /// Guest mount point.
    pub guest: String,
    /// Read-only.
    pub read_only: bool,
    /// Asked for explicitly (a failure to mount is an error).
    pub required: bool,
}

/// A cell's shares: what was exported and where artifacts land.
#[derive(Debug, Clone, Default)]
pub struct CellShares {
    /// The daemon.
    pub virtiofsd: Option<PathBuf>,
    /// The exports, in device order.
    pub exports: Vec<Export>,
    /// The artifacts directory on the host, when shared.
    pub artifacts_dir: Option<PathBuf>,
    /// Extra initramfs files: (guest path without `/`, host file).
    pub initramfs_files: Vec<(String, PathBuf)>,
    /// Notes known before the boot.
    pub notes: Vec<String>,
}

/// `p` below `dir`, as a relative path.
fn below(p: &Path, dir: &Path) -> Option<PathBuf> {
    p.strip_prefix(dir).ok().map(Path::to_path_buf)
}

impl CellShares {
    /// Prepares a cell: creates (empties) `<out_dir>/artifacts`, adds the
    /// modules and mounts to `plan`, exports `HARNESS_ARTIFACTS` and
    /// `HARNESS_SHARES` to every test, and lets `--guest-bin`s that lie in
    /// a share run from there (their entries leave `files`).
    pub fn prepare(
        setup: &ShareSetup,
        out_dir: &Path,
        plan: &mut RunPlan,
        files: &mut Vec<(String, PathBuf)>,
    ) -> Result<CellShares, ShareError> {
        let mut cs = CellShares {
            notes: setup.notes.clone(),
            ..CellShares::default()
        };
        if !setup.active() {
            return Ok(cs);
        }
        cs.virtiofsd = setup.virtiofsd.clone();
        if setup.artifacts {
            let dir = out_dir.join(ARTIFACTS_DIR);
            let io = |source| ShareError::Io {
                path: dir.clone(),
                source,
            };
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(io)?;
            }
            std::fs::create_dir_all(&dir).map_err(io)?;
            let dir = std::fs::canonicalize(&dir).map_err(io)?;
            cs.exports.push(Export {
                tag: ARTIFACTS_TAG.into(),
                host: dir.clone(),
                guest: ARTIFACTS_GUEST_PATH.into(),
                read_only: false,
                required: false,
            });
            cs.artifacts_dir = Some(dir);
        }
        for (i, s) in setup.shares.iter().enumerate() {
            cs.exports.push(Export {
                tag: format!("share{i}"),
                host: s.host.clone(),
                guest: s.guest.clone(),
                read_only: s.read_only,
                required: true,
            });
        }
        for m in &setup.modules {
            let g = modules::guest_path(&m.name);
            cs.initramfs_files
                .push((g.trim_start_matches('/').to_string(), m.path.clone()));
            plan.modules.push(g);
        }
        plan.shares = cs
            .exports
            .iter()
            .map(|e| PlannedShare {
                tag: e.tag.clone(),
                path: e.guest.clone(),
                read_only: e.read_only,
                required: e.required,
            })
            .collect();
        let env_shares = encode_shares(
            &cs.exports
                .iter()
                .map(|e| (e.guest.clone(), e.read_only))
                .collect::<Vec<_>>(),
        );
        for t in &mut plan.tests {
            if setup.artifacts {
                t.env
                    .push((ARTIFACTS_ENV.into(), ARTIFACTS_GUEST_PATH.into()));
            }
            t.env.push((SHARES_ENV.into(), env_shares.clone()));
        }
        // Binaries that are already in a (required) share run from there.
        let mut routed = Vec::new();
        for (file, host) in files.iter() {
            let canon = std::fs::canonicalize(host).unwrap_or_else(|_| host.clone());
            let Some((e, rel)) = cs
                .exports
                .iter()
                .filter(|e| e.required)
                .find_map(|e| below(&canon, &e.host).map(|r| (e, r)))
            else {
                continue;
            };
            let guest = format!("{}/{}", e.guest, rel.to_string_lossy());
            let packed = format!("{BIN_DIR}/{file}");
            for t in plan.tests.iter_mut().filter(|t| t.path == packed) {
                t.path = guest.clone();
            }
            cs.notes.push(format!(
                "{} runs from share {} as {guest} (not packed into the initramfs)",
                host.display(),
                e.tag
            ));
            routed.push(file.clone());
        }
        files.retain(|(f, _)| !routed.contains(f));
        Ok(cs)
    }

    /// Notes after the run: an `[[ATTACHMENT|path]]` per artifact (sorted,
    /// at most [`MAX_ATTACHMENTS`]) and the shares the guest reported it
    /// could not mount (from guest-init's `share TAG not mounted` lines on
    /// the console).
    pub fn finish(&self, console: &[u8]) -> Vec<String> {
        let mut notes = Vec::new();
        let text = String::from_utf8_lossy(console);
        for e in &self.exports {
            let marker = format!("harness: share {} not mounted: ", e.tag);
            if let Some(line) = text.lines().find_map(|l| {
                l.find(&marker)
                    .map(|i| l[i + marker.len()..].trim().to_string())
            }) {
                notes.push(format!(
                    "share {} ({} on {}) was not mounted in the guest: {}",
                    e.tag,
                    e.host.display(),
                    e.guest,
                    crate::vm::tail(&line, 300)
                ));
            }
        }
        if let Some(dir) = &self.artifacts_dir {
            let files = list_files(dir);
            let total = files.len();
            for f in files.iter().take(MAX_ATTACHMENTS) {
                notes.push(attachment(f));
            }
            if total > MAX_ATTACHMENTS {
                notes.push(format!(
                    "{} more artifacts in {} not listed",
                    total - MAX_ATTACHMENTS,
                    dir.display()
                ));
            }
        }
        notes
    }
}

/// The JUnit attachment line for a file (Jenkins' and GitLab's convention).
pub fn attachment(path: &Path) -> String {
    format!("[[ATTACHMENT|{}]]", path.display())
}

/// Regular files below `dir`, sorted, not following symlinks.
pub fn list_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => out.push(e.path()),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// virtiofsd's `--cache` for an export. Writable: `never`, so what the
/// guest wrote is on the host when the VM ends. Read-only: `always`
/// (`FOPEN_KEEP_CACHE`): the guest keeps a file's page cache across opens,
/// so repeated execs of a share binary skip revalidation and re-reads. The
/// host side of a read-only share is not expected to change during a run;
/// each run mounts it afresh. (Dropping the page cache also exposed a TCG
/// problem with code virtiofsd writes: see `qemu::tcg_share_cmdline`.)
pub fn cache_mode(read_only: bool) -> &'static str {
    if read_only {
        "always"
    } else {
        "never"
    }
}

/// The `virtiofsd` command line for an export (pure).
pub fn daemon_args(e: &Export, socket: &Path) -> Vec<std::ffi::OsString> {
    let mut a: Vec<std::ffi::OsString> = vec![
        "--socket-path".into(),
        socket.into(),
        "--shared-dir".into(),
        e.host.clone().into(),
        // The harness runs as root here; the guest is ours and throwaway.
        "--sandbox".into(),
        "none".into(),
        "--cache".into(),
        cache_mode(e.read_only).into(),
        "--log-level".into(),
        "warn".into(),
    ];
    if e.read_only {
        a.push("--readonly".into());
    }
    a
}

/// The running daemons of one boot attempt; killed on drop.
#[derive(Debug, Default)]
pub struct Daemons {
    children: Vec<(i32, tokio::process::Child)>,
    devices: Vec<FsDevice>,
}

impl Daemons {
    /// Starts one daemon per export (sockets `vfs-<tag>-<attempt>.sock` in
    /// `tmp`, logs `virtiofsd-<tag>.log` in `log_dir`) and waits until each
    /// listens.
    pub async fn start(
        cs: &CellShares,
        tmp: &Path,
        attempt: u32,
        log_dir: &Path,
    ) -> Result<Daemons, ShareError> {
        let mut d = Daemons::default();
        let Some(bin) = &cs.virtiofsd else {
            return Ok(d);
        };
        for e in &cs.exports {
            let socket = tmp.join(format!("vfs-{}-{attempt}.sock", e.tag));
            let log_path = log_dir.join(format!("virtiofsd-{}.log", e.tag));
            let err = |why: String| ShareError::Daemon {
                tag: e.tag.clone(),
                dir: e.host.clone(),
                why,
            };
            let log = std::fs::File::create(&log_path)
                .map_err(|x| err(format!("log {}: {x}", log_path.display())))?;
            let log2 = log
                .try_clone()
                .map_err(|x| err(format!("log {}: {x}", log_path.display())))?;
            let mut cmd = tokio::process::Command::new(bin);
            cmd.args(daemon_args(e, &socket))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log2)
                .kill_on_drop(true)
                .process_group(0);
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let mut child = cmd
                .spawn()
                .map_err(|x| err(format!("cannot start {}: {x}", bin.display())))?;
            let pgid = child.id().map(|p| p as i32).unwrap_or(0);
            crate::procs::register(pgid);
            let started = Instant::now();
            let ready = loop {
                if socket.exists() {
                    break Ok(());
                }
                if let Ok(Some(st)) = child.try_wait() {
                    break Err(format!("exited at start ({st})"));
                }
                if started.elapsed() > DAEMON_START_TIMEOUT {
                    break Err(format!(
                        "no socket after {} s",
                        DAEMON_START_TIMEOUT.as_secs()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            d.children.push((pgid, child));
            if let Err(why) = ready {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(err(format!(
                    "{why}; log {}: {}",
                    log_path.display(),
                    crate::vm::tail(log.trim(), 500)
                )));
            }
            d.devices.push(FsDevice {
                tag: e.tag.clone(),
                socket,
            });
        }
        Ok(d)
    }

    /// The QEMU devices.
    pub fn devices(&self) -> Vec<FsDevice> {
        self.devices.clone()
    }

    /// Kills the daemons and waits for them.
    pub async fn stop(mut self) {
        for (pgid, mut c) in std::mem::take(&mut self.children) {
            crate::procs::kill_group(pgid);
            let _ = c.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(2), c.wait()).await;
            crate::procs::unregister(pgid);
        }
    }
}

impl Drop for Daemons {
    fn drop(&mut self) {
        for (pgid, c) in &mut self.children {
            crate::procs::kill_group(*pgid);
            let _ = c.start_kill();
            crate::procs::unregister(*pgid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_tests::plan::PlannedTest;

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
    fn support_of_non_debian_kernels_comes_from_the_image() {
        let d = tempfile::tempdir().unwrap();
        let image = d.path().join("bzImage");
        std::fs::write(&image, b"").unwrap();
        let spec = KernelSpec::Path(image.clone());
        assert!(matches!(
            support_for(&spec, &image, None),
            KernelSupport::AssumedBuiltIn
        ));
        std::fs::write(d.path().join("config"), "CONFIG_VIRTIO_PCI=y\n").unwrap();
        let source = KernelSpec::Source("7.3".into());
        assert!(matches!(
            support_for(&source, &image, None),
            KernelSupport::Missing(ref why) if why.contains("CONFIG_VIRTIO_FS")
        ));
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

    fn spec(guest: &str) -> ShareSpec {
        ShareSpec {
            host: "/h".into(),
            guest: guest.into(),
            read_only: false,
        }
    }

    fn built_in() -> Option<KernelSupport> {
        Some(KernelSupport::Known(KernelModules {
            abi: "7.3.4+deb13-cloud-amd64".into(),
            load_order: vec![],
            builtin: vec!["virtiofs".into()],
            compression: "none".into(),
            packages: vec!["linux-base-7.3.4+deb13-cloud-amd64".into()],
        }))
    }

    #[test]
    fn fallback_is_a_note_for_artifacts_and_an_error_for_explicit_shares() {
        let no_daemon = || Err("no virtiofsd".to_string());
        let s = decide(vec![], true, no_daemon(), None).unwrap();
        assert!(!s.active());
        assert!(
            s.notes[0].contains("no artifacts share (no virtiofsd)"),
            "{:?}",
            s.notes
        );
        let e = decide(vec![spec("/mnt/a")], true, no_daemon(), None).unwrap_err();
        assert!(
            e.to_string().contains("--share asked for") && e.to_string().contains("no virtiofsd")
        );
        let missing = Some(KernelSupport::Missing(
            "kernel lacks CONFIG_VIRTIO_FS".into(),
        ));
        let e = decide(
            vec![spec("/mnt/a")],
            false,
            Ok("/v".into()),
            missing.clone(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("CONFIG_VIRTIO_FS"), "{e}");
        assert!(!decide(vec![], true, Ok("/v".into()), missing)
            .unwrap()
            .active());
        let s = decide(vec![], true, Ok("/v".into()), built_in()).unwrap();
        assert!(s.active() && s.artifacts && s.modules.is_empty());
        assert!(s.notes[0].contains("no modules needed"), "{:?}", s.notes);
        assert!(!decide(vec![], false, no_daemon(), None).unwrap().active());
        let e = decide(
            vec![spec("/mnt/a"), spec("/mnt/a")],
            false,
            Ok("/v".into()),
            built_in(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("also used"), "{e}");
    }

    #[test]
    fn source_kernel_support_comes_from_its_config() {
        let p = Path::new("/cache/kbuild/images/7.3/k/config");
        let full = "CONFIG_VIRTIO=y\nCONFIG_VIRTIO_PCI=y\nCONFIG_FUSE_FS=y\nCONFIG_VIRTIO_FS=y\n";
        assert!(matches!(
            support_from_config(p, full),
            KernelSupport::BuiltIn { ref config } if config == p
        ));
        let modular = "CONFIG_VIRTIO_PCI=y\nCONFIG_VIRTIO_FS=m\n";
        let KernelSupport::Missing(why) = support_from_config(p, modular) else {
            panic!("=m is not enough without modules")
        };
        assert!(
            why.contains("CONFIG_VIRTIO_FS not built in per /cache"),
            "{why}"
        );
        let none = "# CONFIG_VIRTIO_PCI is not set\n";
        let KernelSupport::Missing(why) = support_from_config(p, none) else {
            panic!()
        };
        assert!(why.contains("CONFIG_VIRTIO_PCI, CONFIG_VIRTIO_FS"), "{why}");
        // A prefix is not the option.
        let prefix = "CONFIG_VIRTIO_PCI_LEGACY=y\nCONFIG_VIRTIO_FS=y\n";
        assert!(matches!(
            support_from_config(p, prefix),
            KernelSupport::Missing(_)
        ));
        let s = decide(
            vec![],
            true,
            Ok("/v".into()),
            Some(support_from_config(p, full)),
        )
        .unwrap();
        assert!(s.active() && s.modules.is_empty());
        assert!(
            s.notes[0].contains("built in (CONFIG_VIRTIO_FS=y"),
            "{:?}",
            s.notes
        );
    }

    #[test]
    fn config_is_found_beside_cached_images_and_in_build_trees() {
        let d = tempfile::tempdir().unwrap();
        let cached = d.path().join("images/7.3/key");
        std::fs::create_dir_all(&cached).unwrap();
        std::fs::write(cached.join("bzImage"), b"").unwrap();
        assert_eq!(config_beside(&cached.join("bzImage")), None);
        std::fs::write(cached.join("config"), b"").unwrap();
        assert_eq!(
            config_beside(&cached.join("bzImage")),
            Some(cached.join("config"))
        );
        let tree = d.path().join("linux");
        let boot = tree.join("arch/x86/boot");
        std::fs::create_dir_all(&boot).unwrap();
        std::fs::write(tree.join(".config"), b"").unwrap();
        assert_eq!(
            config_beside(&boot.join("bzImage")),
            Some(tree.join(".config"))
        );
        assert!(matches!(
            image_support(&d.path().join("nowhere/bzImage")),
            KernelSupport::AssumedBuiltIn
        ));
    }

    #[test]
    fn cell_plan_gets_mounts_env_modules_and_routed_binaries() {
        let out = tempfile::tempdir().unwrap();
        let bins = tempfile::tempdir().unwrap();
        let bin = bins.path().join("mytest");
        std::fs::write(&bin, b"\x7fELF").unwrap();
        std::fs::create_dir_all(out.path().join("artifacts")).unwrap();
        std::fs::write(out.path().join("artifacts/stale"), b"old").unwrap();
        let setup = ShareSetup {
            shares: vec![ShareSpec {
                host: std::fs::canonicalize(bins.path()).unwrap(),
                guest: "/mnt/bins".into(),
                read_only: true,
            }],
            artifacts: true,
            virtiofsd: Some("/usr/bin/virtiofsd".into()),
            modules: vec![ModuleFile {
                name: "fuse".into(),
                path: "/cache/fuse.ko".into(),
            }],
            notes: vec!["n".into()],
        };
        let test = |name: &str, path: &str| PlannedTest {
            name: name.into(),
            path: path.into(),
            args: vec![],
            env: vec![],
            timeout_ms: 1,
            max_output_bytes: 1,
        };
        let mut plan = RunPlan {
            version: 1,
            tests: vec![
                test("smoke", "/harness/bin/smoke"),
                test("mytest", "/harness/bin/user-mytest"),
            ],
            ..RunPlan::default()
        };
        let mut files = vec![
            ("smoke".to_string(), PathBuf::from("/t/smoke")),
            ("user-mytest".to_string(), bin.clone()),
        ];
        let cs = CellShares::prepare(&setup, out.path(), &mut plan, &mut files).unwrap();
        assert!(!out.path().join("artifacts/stale").exists(), "emptied");
        assert_eq!(plan.modules, ["/harness/modules/fuse.ko"]);
        assert_eq!(
            cs.initramfs_files,
            [(
                "harness/modules/fuse.ko".to_string(),
                PathBuf::from("/cache/fuse.ko")
            )]
        );
        let tags: Vec<(&str, &str, bool, bool)> = plan
            .shares
            .iter()
            .map(|s| (s.tag.as_str(), s.path.as_str(), s.read_only, s.required))
            .collect();
        assert_eq!(
            tags,
            [
                ("artifacts", "/harness/artifacts", false, false),
                ("share0", "/mnt/bins", true, true)
            ]
        );
        assert!(plan.tests[0]
            .env
            .contains(&("HARNESS_ARTIFACTS".into(), "/harness/artifacts".into())));
        assert!(plan.tests[0].env.contains(&(
            "HARNESS_SHARES".into(),
            "/harness/artifacts:rw,/mnt/bins:ro".into()
        )));
        assert_eq!(plan.tests[1].path, "/mnt/bins/mytest");
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(
            cs.notes.iter().any(|n| n.contains("not packed")),
            "{:?}",
            cs.notes
        );

        // After the run: attachments and mount failures.
        let art = out.path().join("artifacts");
        std::fs::create_dir_all(art.join("sub")).unwrap();
        std::fs::write(art.join("sub/b.txt"), b"b").unwrap();
        std::fs::write(art.join("a.bin"), b"a").unwrap();
        let notes = cs.finish(b"[ 1.0] harness: share share0 not mounted: mount -t virtiofs share0 /mnt/bins: No such device\n");
        let canon = std::fs::canonicalize(&art).unwrap();
        assert_eq!(notes[0], "share share0 (".to_string() + &cs.exports[1].host.display().to_string() + " on /mnt/bins) was not mounted in the guest: mount -t virtiofs share0 /mnt/bins: No such device");
        assert_eq!(
            notes[1],
            format!("[[ATTACHMENT|{}]]", canon.join("a.bin").display())
        );
        assert_eq!(
            notes[2],
            format!("[[ATTACHMENT|{}]]", canon.join("sub/b.txt").display())
        );
    }

    #[test]
    fn inactive_setup_changes_nothing() {
        let out = tempfile::tempdir().unwrap();
        let mut plan = RunPlan::default();
        let mut files = vec![];
        let setup = ShareSetup {
            notes: vec!["no artifacts share".into()],
            ..ShareSetup::none()
        };
        let cs = CellShares::prepare(&setup, out.path(), &mut plan, &mut files).unwrap();
        assert_eq!(plan, RunPlan::default());
        assert!(cs.exports.is_empty() && cs.notes == ["no artifacts share"]);
        assert!(!out.path().join("artifacts").exists());
    }

    #[test]
    fn daemon_command_line() {
        let e = Export {
            tag: "share0".into(),
            host: "/srv/bins".into(),
            guest: "/mnt/bins".into(),
            read_only: true,
            required: true,
        };
        let line = |e: &Export| {
            daemon_args(e, Path::new("/t/vfs.sock"))
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            line(&e),
            "--socket-path /t/vfs.sock --shared-dir /srv/bins --sandbox none --cache always --log-level warn --readonly"
        );
        let rw = Export {
            read_only: false,
            ..e
        };
        assert_eq!(
            line(&rw),
            "--socket-path /t/vfs.sock --shared-dir /srv/bins --sandbox none --cache never --log-level warn"
        );
    }
}
