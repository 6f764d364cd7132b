//! `harness run --dry-run`: what a run would do, with nothing done. No
//! QEMU is needed, nothing is fetched, built, unpacked or created (the
//! cache and `--out` stay as they are); the plan names what would be
//! fetched or built and the paths that would be created, and prints QEMU's
//! argv shell-quoted. Reads only: the cache (what is already there), the
//! host's QEMU and KVM, `/proc`.

use crate::guestbin::GuestBins;
use crate::kernel::cache::Cache;
use crate::kernelspec::KernelSpec;
use std::path::{Path, PathBuf};

/// Where a run's kernel would come from.
#[derive(Debug, Clone)]
pub struct KernelPlan {
    /// The image QEMU would boot (where it would be, if not there yet).
    pub image: PathBuf,
    /// The version whose expectations the suite would get.
    pub version: Option<String>,
    /// What would be fetched or built, one line each.
    pub would: Vec<String>,
}

/// What resolving `spec` would do, from what the cache already holds.
pub fn kernel(spec: &KernelSpec, mirror: Option<&str>, cache: &Cache) -> KernelPlan {
    kernel_for(spec, crate::arch::Arch::X86_64, mirror, cache)
}

/// [`kernel`] for `arch` (Debian's kernel of its flavour).
pub fn kernel_for(
    spec: &KernelSpec,
    arch: crate::arch::Arch,
    mirror: Option<&str>,
    cache: &Cache,
) -> KernelPlan {
    match spec {
        KernelSpec::Path(p) => KernelPlan {
            image: p.clone(),
            version: None,
            would: vec![],
        },
        KernelSpec::Debian(v) => debian(v, arch, mirror, cache),
        KernelSpec::Source(name) => {
            let built = crate::kernel::build::cached_images(cache, name);
            let (image, would) = match built.first() {
                Some((key, img, _)) => (
                    img.clone(),
                    format!(
                        "build kernels/{name}.yaml: a cache hit when its inputs are those of the image built last (key {key}), else a build into {}",
                        cache.path(crate::kernel::build::images_rel(name)).display()
                    ),
                ),
                None => {
                    let dir = cache.path(crate::kernel::build::images_rel(name));
                    (
                        dir.join("<key>").join("bzImage"),
                        format!(
                            "build kernels/{name}.yaml (its base fetched first) into {}",
                            dir.display()
                        ),
                    )
                }
            };
            KernelPlan {
                image,
                version: spec.version().map(String::from),
                would: vec![would],
            }
        }
        KernelSpec::Tree(t) => KernelPlan {
            image: cache.path("kbuild/trees").join("<tree>").join("bzImage"),
            version: spec.version().map(String::from),
            would: vec![format!(
                "build the tree {} out of tree (its config: {}) into {}",
                t.dir.display(),
                t.config
                    .as_deref()
                    .map_or("tinyconfig + the guest fragment".into(), |c| c
                        .display()
                        .to_string()),
                cache.path("kbuild/trees").display()
            )],
        },
    }
}

/// The version and the expectations (`expect:`) of a `source:` kernel's
/// definition, read without unpacking the built-in definitions into the
/// cache (into a temporary directory, removed at once).
pub fn definition_facts(spec: &KernelSpec) -> Result<(Option<String>, Option<String>), String> {
    use crate::kernel::{definition, embedded};
    let name = match spec {
        KernelSpec::Source(n) => n.as_str(),
        _ => return Ok((None, None)),
    };
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = match definition::users_kernels_dir() {
        Some(d) => d,
        None => embedded::materialise(
            &Cache::at(tmp.path()),
            "shipped",
            embedded::shipped(),
            0o644,
        )
        .map_err(|e| e.to_string())?
        .join("kernels"),
    };
    definition::load(&dir, name)
        .map(|def| (def.version, def.expect))
        .map_err(|e| e.to_string())
}

/// `debian:X[.Y[.Z]]`: the newest cached package of that version, or the
/// download that would find one.
fn debian(v: &str, arch: crate::arch::Arch, mirror: Option<&str>, cache: &Cache) -> KernelPlan {
    let flavour = arch.debian_flavour();
    let dir = cache.path("debian/kernels");
    let mirror = crate::kernel::debian::DebianMirror::discover(mirror)
        .map(|m| m.url().to_string())
        .unwrap_or_else(|e| format!("<no mirror: {e}>"));
    let want: Vec<&str> = v.split(['.', '+', '-']).collect();
    let newest = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|abi| {
            let have: Vec<&str> = abi.split(['.', '+', '-']).collect();
            have.len() >= want.len() && have[..want.len()] == want[..]
        })
        .filter(|abi| abi.ends_with(flavour) && dir.join(abi).join("vmlinuz").is_file())
        .max_by(|a, b| crate::kernel::apt::dpkg_version_cmp(a, b));
    match newest {
        Some(abi) => KernelPlan {
            image: dir.join(&abi).join("vmlinuz"),
            version: Some(v.to_string()),
            would: vec![format!(
                "read the package index of {mirror} (cached for a while) for the newest {v} {flavour} kernel: the cached {abi} unless the index names a newer one"
            )],
        },
        None => KernelPlan {
            image: dir.join(format!("<newest {v}>")).join("vmlinuz"),
            version: Some(v.to_string()),
            would: vec![format!(
                "download the package index of {mirror} and the newest {v} {flavour} kernel into {}",
                dir.display()
            )],
        },
    }
}

/// The guest binaries where a run would unpack them (nothing is written).
pub fn guest_bins(cache: &Cache) -> (GuestBins, Option<String>) {
    guest_bins_for(cache, crate::arch::Arch::X86_64)
}

/// [`guest_bins`] of `arch`: its directory variable, else where the
/// embedded set would be unpacked, else what is missing.
pub fn guest_bins_for(cache: &Cache, arch: crate::arch::Arch) -> (GuestBins, Option<String>) {
    if let Some(dir) = std::env::var_os(crate::guestbin::bin_dir_env(arch)) {
        return (GuestBins::planned_for(PathBuf::from(dir), arch), None);
    }
    match crate::guestbin::embedded_dir(cache, arch) {
        Ok(dir) => {
            let which = match arch {
                crate::arch::Arch::X86_64 => String::new(),
                a => format!("{a} "),
            };
            let would = (!dir.is_dir())
                .then(|| format!("unpack the {which}guest binaries into {}", dir.display()));
            (GuestBins::planned_for(dir, arch), would)
        }
        Err(e) => (
            GuestBins::planned_for(cache.path("guest-bins").join("<none>"), arch),
            Some(format!("fail: {e}")),
        ),
    }
}

/// QEMU as a run would find it, or its name when this host has none.
pub fn qemu() -> (PathBuf, Option<String>) {
    qemu_for(crate::arch::Arch::X86_64)
}

/// [`qemu`] of `arch`.
pub fn qemu_for(arch: crate::arch::Arch) -> (PathBuf, Option<String>) {
    match crate::host::find_qemu_for(arch) {
        Ok(q) => (q.path, None),
        Err(e) => (
            PathBuf::from(arch.qemu_binary()),
            Some(format!(
                "QEMU is not usable here ({e}); the command names {}",
                arch.qemu_binary()
            )),
        ),
    }
}

/// The whole plan as text: what would be done, then the cell as
/// [`crate::cell::bootplan::describe`] says it, QEMU's argv with the
/// sockets and the initramfs in `<cell-temp-dir>` (created at run time).
pub fn text(would: &[String], out_dir: &Path, plan: &str) -> String {
    let mut s = String::from("dry run: nothing was fetched, built, written or started\n");
    for w in would {
        s.push_str(&format!("would {w}\n"));
    }
    s.push_str(&format!(
        "would write: {} (console.log, results.ktap, junit.xml, qemu-argv.txt)\n",
        out_dir.display()
    ));
    s.push_str(plan);
    s
}
