//! One way into a cell: [`Session::prepare`] walks the corridor the front
//! doors used to write out each on its own — accelerator, kernel resolved,
//! image checked against the topology, expectations, the suite's tests,
//! shares, the kernel's facts for reports — and returns the
//! [`CellRequest`] a door finishes with its own settings (command line,
//! timeouts, debugging) before [`crate::planner::cell`].
//!
//! A door says what it wants as a [`CellWant`] (typed, already checked);
//! what goes wrong is a [`PrepareError`] that knows its kind (for `run`,
//! which stops) and its message (for `matrix`, which reports the cell).

use crate::error::Error;
use crate::host::AccelChoice;
use crate::kernelspec::{KernelSpec, ResolveError};
use crate::planner::{CellRequest, Session};
use crate::reporter::Reporters;
use crate::result::KnownFailure;
use crate::share::{ShareError, ShareSpec};
use crate::suite::SuiteTest;
use crate::topology::Topology;
use std::path::PathBuf;
use std::sync::Arc;

/// Where a cell's tests come from.
#[derive(Debug, Clone)]
pub enum SuiteWant {
    /// A suite by name: built-in (with the kernel's expectations) or a
    /// kselftest suite built for the kernel (from `kselftest_tree`, else
    /// Debian's source of its series).
    Named {
        /// The suite's name.
        name: String,
        /// `--kselftest-tree`.
        kselftest_tree: Option<String>,
    },
    /// Tests the door already has (a matrix suite's list).
    Tests {
        /// The suite's name in reports.
        label: String,
        /// The tests.
        tests: Vec<SuiteTest>,
    },
}

impl SuiteWant {
    fn label(&self) -> &str {
        match self {
            SuiteWant::Named { name, .. } => name,
            SuiteWant::Tests { label, .. } => label,
        }
    }
}

/// The expectations the futex binaries get.
#[derive(Debug, Clone)]
pub enum ExpectWant {
    /// The kernel's own (its version's row, its definition's), with
    /// `--expect` over them.
    FromKernel(Option<String>),
    /// Given whole (a matrix kernel's `expect:`).
    Given(Option<String>),
}

/// The virtiofs shares a cell asks for.
#[derive(Debug, Clone, Default)]
pub struct ShareWant {
    /// `--share` / a matrix cell's `shares:`, resolved.
    pub explicit: Vec<ShareSpec>,
    /// The artifacts share.
    pub artifacts: bool,
}

/// What a front door wants of one cell, checked before anything is fetched.
#[derive(Debug, Clone)]
pub struct CellWant {
    /// The cell's name (default: [`crate::planner::cell_name`]).
    pub name: Option<String>,
    /// The kernel as the user wrote it.
    pub kernel_label: String,
    /// The matrix's name of the kernel (default: the label).
    pub kernel_name: Option<String>,
    /// The kernel.
    pub kernel: KernelSpec,
    /// The topology's name or spec.
    pub topology_label: String,
    /// The topology.
    pub topology: Topology,
    /// The tests.
    pub suite: SuiteWant,
    /// Tests added to the suite's (`--guest-bin`).
    pub extra_tests: Vec<SuiteTest>,
    /// The expectations.
    pub expect: ExpectWant,
    /// The accelerator asked for.
    pub accel: AccelChoice,
    /// The guest architecture.
    pub arch: crate::arch::Arch,
    /// The shares.
    pub shares: ShareWant,
    /// Failures accepted in the cell.
    pub known_failures: Vec<KnownFailure>,
    /// Where the cell's logs go.
    pub out_dir: PathBuf,
}

/// What [`Session::prepare`] found worth saying, for the door to say as
/// it sees fit (`run` says each; a matrix of 79 cells says less).
#[derive(Debug, Clone, Default)]
pub struct PrepareNotes {
    /// TCG instead of the KVM asked for, or TCG's own caveat on this QEMU.
    pub accel: Vec<String>,
    /// The image checked against the topology without its config.
    pub preboot: Option<String>,
    /// What the share decision left out, and why.
    pub shares: Vec<String>,
}

/// A prepared cell: its request, ready for the door's own settings.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The request.
    pub request: CellRequest,
    /// What preparing found worth saying.
    pub notes: PrepareNotes,
}

/// Why a cell could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The accelerator asked for is not here.
    #[error("{0}")]
    Accel(#[source] crate::host::HostError),
    /// The kernel could not be resolved.
    #[error("kernel {label}: {source}")]
    Kernel {
        /// As written.
        label: String,
        /// Why.
        #[source]
        source: Arc<ResolveError>,
    },
    /// The image cannot boot the topology.
    #[error("{0}")]
    Preboot(#[source] Error),
    /// `--expect` does not apply to the kernel.
    #[error("--expect: {0}")]
    Expect(String),
    /// The suite's tests could not be had (a kselftest build failed).
    #[error("{name}: {why}")]
    Suite {
        /// The suite.
        name: String,
        /// Whether it is built from a kernel source (the host's fault).
        built: bool,
        /// Why.
        why: String,
    },
    /// The shares cannot work.
    #[error("shares: {0}")]
    Shares(#[source] ShareError),
}

impl PrepareError {
    /// As an error that stops a command, with its kind: the user's for
    /// what they wrote, the host's for what it could not do.
    pub fn into_error(self) -> Error {
        match self {
            PrepareError::Accel(e) => Error::infra(e),
            PrepareError::Kernel { source, .. } => crate::planner::resolve_error(source),
            PrepareError::Preboot(e) => e,
            PrepareError::Expect(why) => Error::usage(format!("--expect: {why}")),
            PrepareError::Suite { built, why, .. } => {
                if built {
                    Error::infra(why)
                } else {
                    Error::usage(why)
                }
            }
            // A malformed share is the user's; one the host cannot serve
            // (no virtiofsd, a kernel without virtiofs) is the host's.
            PrepareError::Shares(e @ ShareError::BadSpec { .. }) => Error::usage(e),
            PrepareError::Shares(e) => Error::infra(e),
        }
    }
}

impl Session {
    /// Prepares one cell: the one sequence every front door walks. Each
    /// kernel is resolved once per session, each kselftest suite built
    /// once per kernel; steps are said through `reporters`.
    pub async fn prepare(
        &mut self,
        want: CellWant,
        reporters: &mut Reporters,
    ) -> Result<Prepared, PrepareError> {
        let mut notes = PrepareNotes::default();
        // The accelerator first: it costs nothing and a host without the
        // one asked for must not download a kernel first.
        let (accel, note) = self
            .accel_for(want.accel, want.arch)
            .map_err(PrepareError::Accel)?;
        let qemu = self.qemu_for(want.arch).map_err(PrepareError::Accel)?;
        notes.accel.extend(note);
        if accel == crate::qemu::Accel::Tcg {
            notes
                .accel
                .extend(crate::host::tcg_note(&qemu).map(|n| format!("note: {n}")));
        }
        let progress = self.download_progress.map(|make| make());
        let resolved = self
            .kernel_for(
                &want.kernel_label,
                &want.kernel,
                want.arch,
                reporters,
                progress,
            )
            .await
            .map_err(|source| PrepareError::Kernel {
                label: want.kernel_label.clone(),
                source,
            })?;
        notes.preboot =
            crate::planner::preboot(&resolved, &want.topology).map_err(PrepareError::Preboot)?;
        let expect = match &want.expect {
            ExpectWant::FromKernel(extra) => resolved
                .expectations(extra.as_deref())
                .map_err(PrepareError::Expect)?,
            ExpectWant::Given(e) => e.clone(),
        };
        let suite_label = want.suite.label().to_string();
        let mut tests = match want.suite {
            SuiteWant::Named {
                name,
                kselftest_tree,
            } => {
                // A matrix's expectations are its own: a kselftest build
                // does not take them.
                let for_suite = match &want.expect {
                    ExpectWant::FromKernel(_) => expect.as_deref(),
                    ExpectWant::Given(_) => None,
                };
                self.suite_tests(
                    &name,
                    &want.kernel_label,
                    &resolved,
                    for_suite,
                    kselftest_tree.as_deref(),
                    reporters,
                )
                .await
                .map_err(|why| PrepareError::Suite {
                    built: crate::suite::is_kselftest_suite(&name),
                    name,
                    why,
                })?
            }
            SuiteWant::Tests { tests, .. } => tests,
        };
        tests.extend(want.extra_tests);
        let ShareWant {
            explicit,
            artifacts,
        } = want.shares;
        let shares = if want.arch != crate::arch::Arch::X86_64 {
            // virtiofs needs the kernel's modules and support decided from
            // Debian's amd64 packages: other architectures run without.
            if !explicit.is_empty() {
                return Err(PrepareError::Shares(ShareError::Unavailable(format!(
                    "shares are x86-64 only so far, not {}",
                    want.arch
                ))));
            }
            crate::share::ShareSetup::none()
        } else if artifacts || !explicit.is_empty() {
            let (daemon, support) = self
                .share_inputs(
                    true,
                    &want.kernel_label,
                    &want.kernel,
                    &resolved.path,
                    reporters,
                )
                .await;
            crate::share::decide(explicit, artifacts, daemon, support)
                .map_err(PrepareError::Shares)?
        } else {
            crate::share::ShareSetup::none()
        };
        notes.shares = shares.notes.clone();
        let mut request = CellRequest::new(
            &want.kernel_label,
            resolved.path.clone(),
            &want.topology_label,
            want.topology,
            &suite_label,
            tests,
            accel,
            want.out_dir,
        );
        request.arch = want.arch;
        match want.name {
            Some(name) => request.name = name,
            None if want.arch != crate::arch::Arch::X86_64 => {
                request.name = crate::planner::cell_name(
                    &crate::planner::arch_label(&want.kernel_label, want.arch),
                    &request.topology,
                    &suite_label,
                )
            }
            None => {}
        }
        if let Some(k) = want.kernel_name {
            request.kernel_name = k;
        }
        request.expect = expect;
        request.shares = shares;
        request.known_failures = want.known_failures;
        request.kernel_facts = Some(crate::reporter::kcidb::kernel_facts(
            &want.kernel_label,
            &resolved,
        ));
        Ok(Prepared { request, notes })
    }
}
