//! Host directories shared with the guest over virtiofs: artifacts out,
//! binaries in, no repacking of the initramfs.
//!
//! - [`spec`]: [`ShareSpec`], `HOST_DIR[:GUEST_PATH[:ro|rw]]` (`--share`,
//!   and the matrix's `shares:` key through [`ShareSpec::parse`]).
//! - [`crate::kernel::virtiofs`]: what a kernel can do for virtiofs
//!   (blocking; once per kernel, for `harness run` and the matrix alike),
//!   re-exported here as [`support_for`] and friends.
//! - [`decision`]: [`decide`], the run-wide decision (pure): which
//!   shares, the per-cell artifacts share when virtiofs is available, the
//!   kernel modules to load, and what to say when virtiofs cannot work (a
//!   note for the default artifacts share, an error for shares asked for
//!   explicitly).
//! - [`cell`]: [`CellShares::prepare`], per cell, the plan's
//!   modules/mounts/env, the initramfs additions, and `--guest-bin`s that
//!   run from a share instead of being packed; [`CellShares::finish`],
//!   notes for the report: one `[[ATTACHMENT|path]]` per artifact (the
//!   convention Jenkins and GitLab read) and shares the guest could not
//!   mount.
//! - [`virtiofsd`]: [`Daemons::start`], one `virtiofsd` per share and boot
//!   attempt, on a socket in the cell's private temp dir, started by
//!   [`crate::procs::spawn_guarded`]; killed when dropped (so on every exit
//!   path of the cell).

pub mod cell;
pub mod decision;
pub mod spec;
pub mod virtiofsd;

pub use crate::kernel::virtiofs::{
    config_beside, debian_support, image_support, support_for, support_from_config, KernelSupport,
    EXTRA_MODULES_ENV,
};
pub use cell::{attachment, list_files, CellShares, Export, MAX_ATTACHMENTS};
pub use decision::{decide, ShareSetup};
pub use spec::{check_distinct, check_guest_path, default_guest_path, ShareSpec};
pub use virtiofsd::{
    cache_mode, daemon_args, find_virtiofsd, Daemons, DAEMON_START_TIMEOUT, VIRTIOFSD_ENV,
};

use std::path::PathBuf;

/// Guest path of the per-cell artifacts share.
pub const ARTIFACTS_GUEST_PATH: &str = "/harness/artifacts";
/// Tag of the artifacts share.
pub const ARTIFACTS_TAG: &str = "artifacts";
/// Name of the artifacts directory in the cell's output directory.
pub const ARTIFACTS_DIR: &str = "artifacts";

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
