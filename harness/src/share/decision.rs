//! The run-wide share decision (pure): from the shares asked for, the
//! daemon found (or why not) and what the kernel can do, either share,
//! fall back to the initramfs with a note (the default artifacts share),
//! or refuse (shares asked for explicitly). Looks nothing up itself.

use super::{check_distinct, ShareError, ShareSpec};
use crate::kernel::modules::{self, ModuleFile};
use crate::kernel::virtiofs::KernelSupport;
use guest_tests::artifact::ARTIFACTS_ENV;
use std::path::PathBuf;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::modules::KernelModules;
    use crate::kernel::virtiofs::support_from_config;
    use std::path::Path;

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
    fn built_in_support_is_a_note() {
        let p = Path::new("/cache/kbuild/images/7.3/k/config");
        let full = "CONFIG_VIRTIO=y\nCONFIG_VIRTIO_PCI=y\nCONFIG_FUSE_FS=y\nCONFIG_VIRTIO_FS=y\n";
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
}
