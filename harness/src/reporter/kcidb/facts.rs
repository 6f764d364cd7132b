//! A resolved kernel's [`KernelFacts`]: what the KCIDB document says of its
//! checkout and build, read once per cell from what resolving left behind
//! (Debian's package names; a definition's or a tree's `meta.json` and
//! `config` beside its cached image; a local file's SHA-256 and
//! `.config`). Nothing is fetched or built here; what cannot be read is
//! left out.

use crate::events::{KernelFacts, PatchFacts};
use crate::kernelspec::{KernelOrigin, ResolvedKernel};
use std::path::Path;

/// The facts of `kernel`, which the user named `label`.
pub fn kernel_facts(label: &str, kernel: &ResolvedKernel) -> KernelFacts {
    let mut f = KernelFacts {
        arch: Some(kernel.arch.name().to_string()),
        version: kernel.version.clone(),
        description: kernel.description.clone(),
        ..KernelFacts::default()
    };
    match &kernel.origin {
        KernelOrigin::Debian { abi, package } => {
            f.kind = "debian".into();
            // One source for every flavour Debian builds from it.
            f.source = format!("debian:linux-{}", debian_source_version(abi));
            f.build = format!("debian:{package}");
            f.config = package.clone();
            f.tree_name = Some("debian".into());
        }
        KernelOrigin::Source => source_facts(label, &kernel.path, &mut f),
        KernelOrigin::Tree { dir } => tree_facts(dir, &kernel.path, &mut f),
        KernelOrigin::Path => {
            f.kind = "path".into();
            let sha = crate::kernel::cache::sha256_file(&kernel.path).unwrap_or_default();
            f.source = format!("path:{sha}");
            f.build = f.source.clone();
            f.config = kernel
                .path
                .file_name()
                .map_or_else(|| "path".into(), |n| n.to_string_lossy().into_owned());
            f.compiler = kernel
                .path
                .parent()
                .and_then(|d| config_compiler(&d.join(".config")));
        }
    }
    f
}

/// `7.3.4+deb13` of the ABI `7.3.4+deb13-cloud-amd64`: the ABI without
/// its flavour.
fn debian_source_version(abi: &str) -> &str {
    [
        "-cloud-amd64",
        "-amd64",
        "-rt-amd64",
        "-cloud-arm64",
        "-arm64",
        "-rt-arm64",
    ]
    .iter()
    .find_map(|f| abi.strip_suffix(f))
    .unwrap_or(abi)
}

/// A definition's image lives at `kbuild/images/<name>/<key>/bzImage`, with
/// `meta.json` (the key's inputs: base identity, patches, toolchain; the
/// build's seconds) and `config` beside it.
fn source_facts(label: &str, image: &Path, f: &mut KernelFacts) {
    f.kind = "source".into();
    let key_dir = image.parent();
    let key = key_dir
        .and_then(|d| d.file_name())
        .map(|k| k.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = label
        .strip_prefix("source:")
        .map(String::from)
        .or_else(|| {
            key_dir
                .and_then(|d| d.parent())
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    f.build = format!("source:{name}@{key}");
    f.config = name.clone();
    f.build_log = Some(format!("{name}/{key}/build.log"));
    let meta_path = key_dir.map(|d| d.join("meta.json"));
    let meta: serde_json::Value = meta_path
        .as_deref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let inputs = &meta["inputs"];
    f.source = inputs["base"].as_str().unwrap_or_default().to_string();
    f.patches = inputs["patches"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some(PatchFacts {
                name: p.get(0)?.as_str()?.to_string(),
                sha256: p.get(1)?.as_str()?.to_string(),
            })
        })
        .collect();
    f.compiler = inputs["toolchain"]
        .get(0)
        .and_then(|t| t.as_str())
        .filter(|t| !t.ends_with(": not found"))
        .map(String::from)
        .or_else(|| key_dir.and_then(|d| config_compiler(&d.join("config"))));
    f.build_seconds = meta["build_seconds"].as_f64();
    if let (Some(secs), Some(written)) = (
        f.build_seconds,
        meta_path
            .and_then(|p| std::fs::metadata(p).ok())
            .and_then(|m| m.modified().ok()),
    ) {
        let end = written
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        f.build_started = Some((end - secs).max(0.0));
    }
    if let Some(commit) = f.source.strip_prefix("git:") {
        f.git_commit = Some(commit.to_string());
    }
    if f.source.starts_with("debian:") {
        f.tree_name = Some("debian".into());
    }
    // The repository URL and ref are only in the definition.
    let def = crate::kernel::definition::kernels_dir()
        .and_then(|d| crate::kernel::definition::load(&d, &name));
    if let Ok(def) = def {
        if let crate::kernel::definition::BaseSpec::Git { url, rev } = &def.base {
            f.git_url = Some(url.clone()).filter(|u| u.starts_with("https://"));
            let is_hash = rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit());
            f.git_ref = Some(rev.clone()).filter(|_| !is_hash);
        }
        if f.patches.is_empty() && meta.is_null() {
            f.patches = def
                .patches
                .iter()
                .map(|p| PatchFacts {
                    name: p.name.clone(),
                    sha256: crate::kernel::cache::sha256_hex(&p.data),
                })
                .collect();
        }
    }
}

/// A tree's image lives at `kbuild/images/tree-<id>/<key>/bzImage` with a
/// `meta.json` of a definition's shape (`inputs.base` is `git:<HEAD>`,
/// `inputs.patches` the files changed over it); the checkout is that
/// commit only when nothing was changed.
fn tree_facts(dir: &Path, image: &Path, f: &mut KernelFacts) {
    source_facts("", image, f);
    f.kind = "tree".into();
    let key = image
        .parent()
        .and_then(|d| d.file_name())
        .map(|k| k.to_string_lossy().into_owned())
        .unwrap_or_default();
    f.build = format!("tree:{}@{key}", dir.display());
    let meta: serde_json::Value = image
        .parent()
        .and_then(|d| std::fs::read(d.join("meta.json")).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    f.config = meta["config"]
        .as_str()
        .map_or_else(|| crate::kernel::tree::DEFINITION.to_string(), String::from);
    if !f.patches.is_empty() {
        f.git_commit = None;
    }
    if f.source.is_empty() {
        f.source = format!("tree:{}", dir.display());
    }
}

/// `CONFIG_CC_VERSION_TEXT` of a kernel `.config`: the compiler that built it.
fn config_compiler(config: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("CONFIG_CC_VERSION_TEXT="))
        .map(|v| v.trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(path: &Path, origin: KernelOrigin) -> ResolvedKernel {
        ResolvedKernel {
            path: path.into(),
            version: Some("7.3".into()),
            description: "d".into(),
            expect: None,
            origin,
            arch: crate::arch::Arch::X86_64,
        }
    }

    #[test]
    fn debian_kernels_share_one_source_per_version() {
        let k = resolved(
            Path::new("/c/vmlinuz"),
            KernelOrigin::Debian {
                abi: "7.3.4+deb13-cloud-amd64".into(),
                package: "linux-image-7.3.4+deb13-cloud-amd64".into(),
            },
        );
        let f = kernel_facts("debian:7.3", &k);
        assert_eq!(f.source, "debian:linux-7.3.4+deb13");
        assert_eq!(f.build, "debian:linux-image-7.3.4+deb13-cloud-amd64");
        assert_eq!(f.tree_name.as_deref(), Some("debian"));
        assert_eq!(f.compiler, None);
    }

    #[test]
    fn a_cached_source_build_says_its_base_patches_compiler_and_time() {
        let d = tempfile::tempdir().unwrap();
        let key_dir = d.path().join("kbuild/images/7.3-immutable/abc123");
        std::fs::create_dir_all(&key_dir).unwrap();
        std::fs::write(key_dir.join("bzImage"), b"x").unwrap();
        std::fs::write(
            key_dir.join("meta.json"),
            serde_json::json!({
                "name": "7.3-immutable", "key": "abc123", "build_seconds": 300.0,
                "inputs": {
                    "base": "debian:linux-source-7.3_7.3.4-1_all.deb",
                    "patches": [["7.3-immutable/0001-x.patch", "ab".repeat(32)]],
                    "toolchain": ["gcc (Debian 14.2.0-19) 14.2.0", "GNU ld 2.44"],
                },
            })
            .to_string(),
        )
        .unwrap();
        let k = resolved(&key_dir.join("bzImage"), KernelOrigin::Source);
        let f = kernel_facts("source:7.3-immutable", &k);
        assert_eq!(f.kind, "source");
        assert_eq!(f.build, "source:7.3-immutable@abc123");
        assert_eq!(f.source, "debian:linux-source-7.3_7.3.4-1_all.deb");
        assert_eq!(f.patches.len(), 1);
        assert_eq!(f.patches[0].sha256, "ab".repeat(32));
        assert_eq!(f.compiler.as_deref(), Some("gcc (Debian 14.2.0-19) 14.2.0"));
        assert_eq!(f.build_seconds, Some(300.0));
        assert!(f.build_started.unwrap() > 1.0e9);
        assert_eq!(
            f.build_log.as_deref(),
            Some("7.3-immutable/abc123/build.log")
        );
    }

    #[test]
    fn a_tree_build_names_its_tree_and_commit_only_when_unchanged() {
        let d = tempfile::tempdir().unwrap();
        let key_dir = d.path().join("kbuild/images/tree-0123456789abcdef/k1");
        std::fs::create_dir_all(&key_dir).unwrap();
        std::fs::write(key_dir.join("bzImage"), b"x").unwrap();
        let head = "ab".repeat(20);
        let meta = |patches: serde_json::Value| {
            serde_json::json!({
                "key": "k1", "build_seconds": 12.0, "config": "7.3 (tinyconfig + fragments)",
                "inputs": {"base": format!("git:{head}"), "patches": patches,
                           "toolchain": ["gcc (Debian 12.2.0-14) 12.2.0", "GNU ld 2.40"]},
            })
            .to_string()
        };
        std::fs::write(key_dir.join("meta.json"), meta(serde_json::json!([]))).unwrap();
        let k = resolved(
            &key_dir.join("bzImage"),
            KernelOrigin::Tree {
                dir: "/src/linux".into(),
            },
        );
        let f = kernel_facts("tree:/src/linux", &k);
        assert_eq!(f.kind, "tree");
        assert_eq!(f.build, "tree:/src/linux@k1");
        assert_eq!(f.source, format!("git:{head}"));
        assert_eq!(f.git_commit.as_deref(), Some(head.as_str()));
        assert_eq!(f.config, "7.3 (tinyconfig + fragments)");
        assert_eq!(f.build_seconds, Some(12.0));
        assert_eq!(
            f.build_log.as_deref(),
            Some("tree-0123456789abcdef/k1/build.log")
        );
        // Changed files: the commit is not what was built.
        let changed = serde_json::json!([["kernel/futex/core.c", "cd".repeat(32)]]);
        std::fs::write(key_dir.join("meta.json"), meta(changed)).unwrap();
        let f = kernel_facts("tree:/src/linux", &k);
        assert_eq!(f.git_commit, None);
        assert_eq!(f.patches[0].name, "kernel/futex/core.c");
    }

    #[test]
    fn a_local_image_is_known_by_its_hash_and_its_config() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("bzImage"), b"image").unwrap();
        std::fs::write(
            d.path().join(".config"),
            "CONFIG_X=y\nCONFIG_CC_VERSION_TEXT=\"gcc (GCC) 15.1\"\n",
        )
        .unwrap();
        let f = kernel_facts(
            "path:x",
            &resolved(&d.path().join("bzImage"), KernelOrigin::Path),
        );
        assert_eq!(
            f.build,
            format!("path:{}", crate::kernel::cache::sha256_hex(b"image"))
        );
        assert_eq!(f.source, f.build);
        assert_eq!(f.compiler.as_deref(), Some("gcc (GCC) 15.1"));
    }
}
