//! Whether a kernel can mount virtiofs, and with which modules: Debian's
//! kernels from their own packages (the virtiofs modules, see
//! [`super::modules`]), `source:`, `tree:` and `path:` kernels from the
//! `.config` beside the image. A fact about the kernel; what to share is
//! [`crate::share`]'s business.

use super::cache::Cache;
use super::debian::DebianMirror;
use super::modules::{self, KernelModules};
use crate::kernelspec::{KernelOrigin, KernelSpec, ResolvedKernel};
use std::path::{Path, PathBuf};

/// Environment variable naming extra modules (comma-separated) to load in
/// the guest with the virtiofs ones, for Debian kernels (a debugging knob;
/// the VM tests use it to load a really modular module).
pub const EXTRA_MODULES_ENV: &str = "HARNESS_GUEST_MODULES";

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

/// What `kernel` can do for virtiofs (blocking): a Debian kernel from
/// its own packages, found by the ABI [`crate::kernelspec::resolve`]
/// carried (the archive's index and the image package are not looked at
/// again; may download the small `linux-base-<abi>` package, or its
/// modules, from the mirror `mirror` names or the one discovered);
/// `source:`, `tree:` and `path:` kernels from the `.config` beside the
/// image ([`image_support`]; a tree's is its object directory's, copied).
pub fn support(kernel: &ResolvedKernel, mirror: Option<&str>) -> KernelSupport {
    match &kernel.origin {
        KernelOrigin::Debian { abi, package } => {
            debian_modules(mirror, |_, _| Ok((abi.clone(), package.clone())))
        }
        KernelOrigin::Path | KernelOrigin::Source | KernelOrigin::Tree { .. } => {
            image_support(&kernel.path)
        }
    }
}

/// What Debian kernel `version` needs for virtiofs (blocking: looks the
/// kernel up in the archive again to learn its ABI, then as [`support`]).
pub fn debian_support(mirror: Option<&str>, version: &str) -> KernelSupport {
    debian_modules(mirror, |mirror, cache| {
        let image = mirror.fetch(version, cache).map_err(|e| e.to_string())?;
        Ok((image.abi, image.package))
    })
}

/// What `kernel`, resolved to `image`, can do for virtiofs (blocking):
/// `debian:` kernels from their own packages ([`debian_support`]; may
/// download), `source:` and `path:` kernels from the `.config` beside the
/// image ([`image_support`]). Superseded by [`support`], which needs no
/// second look at the archive.
pub fn support_for(kernel: &KernelSpec, image: &Path, mirror: Option<&str>) -> KernelSupport {
    match kernel {
        KernelSpec::Debian(version) => debian_support(mirror, version),
        KernelSpec::Path(_) | KernelSpec::Source(_) | KernelSpec::Tree(_) => image_support(image),
    }
}

/// The modules a virtiofs mount needs, plus those `$HARNESS_GUEST_MODULES`
/// names.
fn wanted_modules() -> Vec<String> {
    let extra = std::env::var(EXTRA_MODULES_ENV).unwrap_or_default();
    modules::VIRTIOFS_MODULES
        .iter()
        .map(|m| m.to_string())
        .chain(
            extra
                .split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(String::from),
        )
        .collect()
}

/// A Debian kernel's virtiofs modules from the cache or its packages;
/// `kernel` names it (ABI, image package), given the mirror and cache.
fn debian_modules(
    mirror: Option<&str>,
    kernel: impl FnOnce(&DebianMirror, &Cache) -> Result<(String, String), String>,
) -> KernelSupport {
    let r = (|| -> Result<KernelModules, String> {
        let cache = Cache::from_env().map_err(|e| e.to_string())?;
        let mirror = DebianMirror::discover(mirror).map_err(|e| e.to_string())?;
        let (abi, package) = kernel(&mirror, &cache)?;
        debian_modules_in(&mirror, &cache, &abi, &package)
    })();
    match r {
        Ok(m) => KernelSupport::Known(m),
        Err(e) => KernelSupport::Missing(format!("kernel without virtiofs: {e}")),
    }
}

/// [`modules::fetch_debian`] for the [`wanted_modules`].
fn debian_modules_in(
    mirror: &DebianMirror,
    cache: &Cache,
    abi: &str,
    package: &str,
) -> Result<KernelModules, String> {
    let wanted = wanted_modules();
    let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
    modules::fetch_debian(mirror, cache, abi, package, &wanted).map_err(|e| e.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn support_of_a_resolved_kernel_follows_its_origin() {
        let d = tempfile::tempdir().unwrap();
        let image = d.path().join("bzImage");
        std::fs::write(&image, b"").unwrap();
        let kernel = |origin| ResolvedKernel {
            path: image.clone(),
            version: None,
            description: String::new(),
            expect: None,
            origin,
            arch: crate::arch::Arch::X86_64,
        };
        assert!(matches!(
            support(&kernel(KernelOrigin::Path), None),
            KernelSupport::AssumedBuiltIn
        ));
        std::fs::write(d.path().join("config"), "CONFIG_VIRTIO_PCI=y\n").unwrap();
        assert!(matches!(
            support(&kernel(KernelOrigin::Source), None),
            KernelSupport::Missing(ref why) if why.contains("CONFIG_VIRTIO_FS")
        ));
    }

    #[test]
    fn debian_modules_come_from_the_carried_abi_without_the_archive() {
        // A complete cached set for the ABI: nothing is fetched (the
        // mirror is a closed port), in particular not the image package.
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::at(d.path());
        let abi = "7.3.4+deb13-cloud-amd64";
        let key: Vec<String> = wanted_modules()
            .iter()
            .map(|w| w.replace('-', "_"))
            .collect();
        let cached = KernelModules {
            abi: abi.into(),
            load_order: vec![],
            builtin: vec!["virtiofs".into()],
            compression: "none".into(),
            packages: vec![format!("linux-base-{abi}")],
        };
        let manifest = cache.path(format!(
            "debian/modules/{abi}/manifest-{}.json",
            key.join("+")
        ));
        std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
        std::fs::write(&manifest, serde_json::to_vec(&cached).unwrap()).unwrap();
        let mirror = DebianMirror::new(
            "http://127.0.0.1:9",
            crate::kernel::debian::MirrorOrigin::Explicit,
        )
        .unwrap()
        .with_retries(0, std::time::Duration::ZERO);
        let m = debian_modules_in(&mirror, &cache, abi, &format!("linux-image-{abi}")).unwrap();
        assert_eq!(m, cached);
        // Not cached: the mirror is asked (and fails), by the ABI given.
        let e = debian_modules_in(&mirror, &cache, "7.2.1+deb13-cloud-amd64", "x").unwrap_err();
        assert!(e.contains("127.0.0.1:9"), "{e}");
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
}
