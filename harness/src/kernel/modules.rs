//! Kernel modules for Debian's kernels, whose virtiofs support is modular:
//! fetches `linux-modules-<abi>` (verified and cached like the kernel),
//! picks the modules a virtiofs mount needs and their dependencies,
//! decompresses them on the host (`.ko.xz`/`.ko.zst`: the guest then needs
//! no `CONFIG_MODULE_DECOMPRESS`), and computes the load order
//! (dependencies first) from `modules.dep` when the package ships one, else
//! from each module's own `.modinfo` `depends=` (what depmod writes into
//! `modules.dep`). Modules built into the kernel (`modules.builtin`) are
//! left out. Nothing here runs a tool (`modprobe`, `depmod`, `xz`).
//!
//! Cache layout: `debian/modules/<abi>/<name>.ko` plus a `manifest.json`
//! written last (its presence means the set is complete).

use super::archive::{DebianError, DebianMirror};
use super::cache::{Cache, CacheError, WriteError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// What a virtiofs mount needs: the PCI transport (the device is
/// `vhost-user-fs-pci`) and the filesystem (which pulls in `fuse`).
pub const VIRTIOFS_MODULES: &[&str] = &["virtio_pci", "virtiofs"];

/// Errors getting modules.
#[derive(Debug, thiserror::Error)]
pub enum ModulesError {
    /// Fetching the package failed.
    #[error(transparent)]
    Debian(#[from] DebianError),
    /// The cache failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The package could not be read.
    #[error("reading {deb}: {source}")]
    Read {
        /// The `.deb`.
        deb: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A module is neither in the package nor built in.
    #[error("kernel {abi} has no module {module} (not in {package}, not in modules.builtin)")]
    Missing {
        /// ABI.
        abi: String,
        /// Module name.
        module: String,
        /// Package searched.
        package: String,
    },
    /// A module file could not be decompressed or parsed.
    #[error("module {path}: {why}")]
    BadModule {
        /// Path in the package.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The dependencies form a cycle.
    #[error("module dependency cycle through {0}")]
    Cycle(String),
}

/// One module ready to pack: its name and the decompressed `.ko` on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleFile {
    /// Module name (`fuse`, `virtiofs`; `-` normalised to `_`).
    pub name: String,
    /// The uncompressed `.ko`.
    pub path: PathBuf,
}

/// The modules to load for a kernel, in load order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelModules {
    /// Debian ABI, `7.3.4+deb13-cloud-amd64`.
    pub abi: String,
    /// Load order: every module after its dependencies.
    pub load_order: Vec<ModuleFile>,
    /// Wanted modules (or dependencies) that are built into the kernel.
    pub builtin: Vec<String>,
    /// How the `.ko` files were compressed in the package (`xz`, `zst`, `none`).
    pub compression: String,
    /// The packages read.
    #[serde(default)]
    pub packages: Vec<String>,
}

/// `kernel/fs/fuse/virtiofs.ko.xz` -> `virtiofs`; `None` for non-modules.
pub fn module_name(path: &str) -> Option<String> {
    let file = path.rsplit('/').next()?;
    let stem = [".ko.xz", ".ko.zst", ".ko.gz", ".ko"]
        .iter()
        .find_map(|s| file.strip_suffix(s))?;
    (!stem.is_empty()).then(|| stem.replace('-', "_"))
}

/// `.ko.xz` -> `xz`, `.ko.zst` -> `zst`, `.ko` -> `none`.
pub fn compression_of(path: &str) -> &'static str {
    if path.ends_with(".xz") {
        "xz"
    } else if path.ends_with(".zst") {
        "zst"
    } else if path.ends_with(".gz") {
        "gz"
    } else {
        "none"
    }
}

/// Decompresses a module file by its suffix (xz and zstd; plain `.ko` as is).
pub fn decompress(path: &str, data: &[u8]) -> Result<Vec<u8>, ModulesError> {
    let bad = |why: String| ModulesError::BadModule {
        path: path.to_string(),
        why,
    };
    let mut out = Vec::new();
    match compression_of(path) {
        "none" => return Ok(data.to_vec()),
        "xz" => liblzma::read::XzDecoder::new(data)
            .read_to_end(&mut out)
            .map_err(|e| bad(format!("xz: {e}")))?,
        "zst" => ruzstd::decoding::StreamingDecoder::new(data)
            .map_err(|e| bad(format!("zstd: {e}")))?
            .read_to_end(&mut out)
            .map_err(|e| bad(format!("zstd: {e}")))?,
        other => return Err(bad(format!("{other} compression is not supported"))),
    };
    Ok(out)
}

/// The `key=value` strings of an ELF64 little-endian module's `.modinfo`
/// section.
pub fn modinfo(elf: &[u8]) -> Result<Vec<(String, String)>, String> {
    use object::elf::FileHeader64;
    use object::read::elf::{FileHeader, SectionHeader};
    use object::LittleEndian as LE;
    let header = FileHeader64::<LE>::parse(elf)
        .ok()
        .filter(|h| h.endian().is_ok())
        .ok_or("not a 64-bit little-endian ELF file")?;
    let sections = header
        .sections(LE, elf)
        .map_err(|e| format!("bad section header table: {e}"))?;
    let (_, section) = sections
        .section_by_name(LE, b".modinfo")
        .ok_or("no .modinfo section")?;
    let data = section.data(LE, elf).map_err(|_| ".modinfo out of range")?;
    Ok(data
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let s = String::from_utf8_lossy(kv);
            let (k, v) = s.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect())
}

/// The `depends=` of a module's modinfo (names, `-` normalised to `_`).
pub fn depends(info: &[(String, String)]) -> Vec<String> {
    info.iter()
        .filter(|(k, _)| k == "depends")
        .flat_map(|(_, v)| v.split(','))
        .filter(|s| !s.is_empty())
        .map(|s| s.replace('-', "_"))
        .collect()
}

/// `modules.dep`: `kernel/fs/fuse/virtiofs.ko.xz: kernel/fs/fuse/fuse.ko.xz`
/// -> name -> dependency names.
pub fn parse_modules_dep(text: &str) -> HashMap<String, Vec<String>> {
    text.lines()
        .filter_map(|l| {
            let (m, deps) = l.split_once(':')?;
            Some((
                module_name(m.trim())?,
                deps.split_whitespace().filter_map(module_name).collect(),
            ))
        })
        .collect()
}

/// `modules.builtin`: one path per line -> names.
pub fn parse_builtin(text: &str) -> BTreeSet<String> {
    text.lines().filter_map(|l| module_name(l.trim())).collect()
}

/// A module's direct dependencies (`None`: no such module).
pub type DepsFn<'a> = dyn FnMut(&str) -> Result<Option<Vec<String>>, ModulesError> + 'a;

/// Modules resolved for loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Load order: (name, decompressed `.ko`).
    pub files: Vec<(String, Vec<u8>)>,
    /// Wanted modules (or dependencies) built into the kernel.
    pub builtin: Vec<String>,
    /// Compression of the module files in the package.
    pub compression: String,
}

/// Load order for `wanted`: depth-first, dependencies before dependents,
/// each module once; built-in modules are skipped (they are always
/// there). `deps` gives a module's direct dependencies (`None`: no such
/// module).
pub fn load_order(
    wanted: &[&str],
    builtin: &BTreeSet<String>,
    deps: &mut DepsFn,
) -> Result<(Vec<String>, Vec<String>), ModulesError> {
    fn visit(
        m: &str,
        builtin: &BTreeSet<String>,
        deps: &mut DepsFn,
        stack: &mut Vec<String>,
        order: &mut Vec<String>,
        found_builtin: &mut Vec<String>,
    ) -> Result<(), ModulesError> {
        if order.iter().any(|o| o == m) || found_builtin.iter().any(|b| b == m) {
            return Ok(());
        }
        if builtin.contains(m) {
            found_builtin.push(m.to_string());
            return Ok(());
        }
        if stack.iter().any(|s| s == m) {
            return Err(ModulesError::Cycle(m.to_string()));
        }
        let Some(ds) = deps(m)? else {
            return Err(ModulesError::Missing {
                abi: String::new(),
                module: m.to_string(),
                package: String::new(),
            });
        };
        stack.push(m.to_string());
        for d in ds {
            visit(&d, builtin, deps, stack, order, found_builtin)?;
        }
        stack.pop();
        order.push(m.to_string());
        Ok(())
    }
    let (mut order, mut found_builtin, mut stack) = (Vec::new(), Vec::new(), Vec::new());
    for w in wanted {
        visit(
            &w.replace('-', "_"),
            builtin,
            deps,
            &mut stack,
            &mut order,
            &mut found_builtin,
        )?;
    }
    Ok((order, found_builtin))
}

/// What one pass over the package's `data.tar` keeps: every module file
/// (still compressed) by name, `modules.dep` and `modules.builtin`.
#[derive(Debug, Default)]
pub struct PackageModules {
    /// name -> (path in the package, compressed bytes).
    pub files: HashMap<String, (String, Vec<u8>)>,
    /// `modules.dep`, when shipped.
    pub modules_dep: Option<String>,
    /// `modules.builtin`, when shipped.
    pub modules_builtin: Option<String>,
}

/// Reads every module of `abi` out of the `.deb` in one pass.
pub fn read_package(deb: &Path, abi: &str) -> Result<PackageModules, ModulesError> {
    let err = |source| ModulesError::Read {
        deb: deb.to_path_buf(),
        source,
    };
    let bad_data = |why: String| err(io::Error::new(io::ErrorKind::InvalidData, why));
    let file = std::fs::File::open(deb).map_err(err)?;
    let mut ar = ar::Archive::new(io::BufReader::new(file));
    let mut out = PackageModules::default();
    while let Some(entry) = ar.next_entry() {
        let entry = entry.map_err(err)?;
        let name = String::from_utf8_lossy(entry.header().identifier())
            .trim_end_matches('/')
            .to_string();
        let reader: Box<dyn Read + '_> = match name.as_str() {
            "data.tar" => Box::new(entry),
            "data.tar.xz" => Box::new(liblzma::read::XzDecoder::new(entry)),
            "data.tar.zst" => Box::new(
                ruzstd::decoding::StreamingDecoder::new(entry)
                    .map_err(|e| bad_data(format!("zstd: {e}")))?,
            ),
            n if n.starts_with("data.tar") => {
                return Err(bad_data(format!("unsupported member {n}")))
            }
            _ => continue,
        };
        let mut tar = tar::Archive::new(reader);
        for te in tar.entries().map_err(err)? {
            let mut te = te.map_err(err)?;
            if te.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let path = te.path().map_err(err)?.to_string_lossy().into_owned();
            let p = path.trim_start_matches("./").trim_start_matches('/');
            let Some(rel) = p
                .strip_prefix("usr/lib/modules/")
                .or_else(|| p.strip_prefix("lib/modules/"))
                .and_then(|r| r.strip_prefix(abi))
                .and_then(|r| r.strip_prefix('/'))
            else {
                continue;
            };
            let wanted_text = rel == "modules.dep" || rel == "modules.builtin";
            let module = module_name(rel).filter(|_| rel.contains(".ko"));
            if !wanted_text && module.is_none() {
                continue;
            }
            let mut data = Vec::new();
            te.read_to_end(&mut data).map_err(err)?;
            match (rel, module) {
                ("modules.dep", _) => {
                    out.modules_dep = Some(String::from_utf8_lossy(&data).into_owned())
                }
                ("modules.builtin", _) => {
                    out.modules_builtin = Some(String::from_utf8_lossy(&data).into_owned())
                }
                (_, Some(m)) => {
                    out.files.insert(m, (rel.to_string(), data));
                }
                _ => {}
            }
        }
        return Ok(out);
    }
    Err(bad_data("no data.tar member".into()))
}

/// Resolves `wanted` against a package's modules: the load order with the
/// decompressed bytes, the built-in ones, and the compression seen.
pub fn resolve(pkg: &PackageModules, wanted: &[&str]) -> Result<Resolved, ModulesError> {
    let builtin = pkg
        .modules_builtin
        .as_deref()
        .map(parse_builtin)
        .unwrap_or_default();
    let dep_table = pkg.modules_dep.as_deref().map(parse_modules_dep);
    let mut decompressed: HashMap<String, Vec<u8>> = HashMap::new();
    let mut deps = |m: &str| -> Result<Option<Vec<String>>, ModulesError> {
        let Some((path, data)) = pkg.files.get(m) else {
            return Ok(None);
        };
        let elf = decompress(path, data)?;
        let ds = match dep_table.as_ref().and_then(|t| t.get(m)) {
            Some(ds) => ds.clone(),
            None => depends(&modinfo(&elf).map_err(|why| ModulesError::BadModule {
                path: path.clone(),
                why,
            })?),
        };
        decompressed.insert(m.to_string(), elf);
        Ok(Some(ds))
    };
    let (order, found_builtin) = load_order(wanted, &builtin, &mut deps)?;
    let compression = order
        .first()
        .and_then(|m| pkg.files.get(m))
        .map(|(p, _)| compression_of(p))
        .unwrap_or("none")
        .to_string();
    let files = order
        .into_iter()
        .map(|m| {
            let data = decompressed.remove(&m).unwrap_or_default();
            (m, data)
        })
        .collect();
    Ok(Resolved {
        files,
        builtin: found_builtin,
        compression,
    })
}

/// The packages that may hold `abi`'s modules, smallest first: 7.x
/// splits `linux-base-<abi>` (config, `modules.builtin`) from
/// `linux-modules-<abi>` (the `.ko` files); older kernels ship everything
/// in the image package itself.
pub fn candidate_packages(abi: &str, image_package: &str) -> Vec<String> {
    let mut v = vec![format!("linux-base-{abi}"), format!("linux-modules-{abi}")];
    if !image_package.is_empty() && !v.iter().any(|p| p == image_package) {
        v.push(image_package.to_string());
    }
    v
}

/// Merges what another package of the same kernel holds.
fn merge(into: &mut PackageModules, from: PackageModules) {
    into.files.extend(from.files);
    into.modules_dep = into.modules_dep.take().or(from.modules_dep);
    into.modules_builtin = into.modules_builtin.take().or(from.modules_builtin);
}

/// The modules `wanted` needs for Debian kernel `abi` (whose vmlinuz came
/// from `image_package`), from the cache or from the kernel's packages
/// (downloaded, verified, read once, removed). Stops at the first package
/// that completes the set: on Debian's cloud kernels, where fuse, virtiofs
/// and virtio_pci are built in, that is the 1 MB `linux-base-<abi>`.
pub fn fetch_debian(
    mirror: &DebianMirror,
    cache: &Cache,
    abi: &str,
    image_package: &str,
    wanted: &[&str],
) -> Result<KernelModules, ModulesError> {
    let dir = format!("debian/modules/{abi}");
    let key: Vec<String> = wanted.iter().map(|w| w.replace('-', "_")).collect();
    let manifest_rel = format!("{dir}/manifest-{}.json", key.join("+"));
    let _lock = cache.lock(&format!("debian-modules-{abi}"))?;
    if let Ok(bytes) = std::fs::read(cache.path(&manifest_rel)) {
        if let Ok(m) = serde_json::from_slice::<KernelModules>(&bytes) {
            if m.load_order.iter().all(|f| f.path.is_file()) {
                return Ok(m);
            }
        }
    }
    let mut pkg = PackageModules::default();
    let mut searched = Vec::new();
    let mut resolved = None;
    let mut last_missing = None;
    for package in candidate_packages(abi, image_package) {
        let deb = match mirror.fetch_package(&package, cache) {
            Ok(deb) => deb,
            Err(DebianError::UnknownPackage { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        searched.push(package.clone());
        let read = read_package(&deb, abi);
        if let Err(e) = std::fs::remove_file(&deb) {
            tracing::debug!("removing {}: {e}", deb.display());
        }
        merge(&mut pkg, read?);
        match resolve(&pkg, wanted) {
            Ok(r) => {
                resolved = Some(r);
                break;
            }
            Err(ModulesError::Missing { module, .. }) => last_missing = Some(module),
            Err(e) => return Err(e),
        }
    }
    let Some(Resolved {
        files,
        builtin,
        compression,
    }) = resolved
    else {
        return Err(ModulesError::Missing {
            abi: abi.to_string(),
            module: last_missing.unwrap_or_else(|| wanted.join(",")),
            package: if searched.is_empty() {
                "any package".into()
            } else {
                searched.join(", ")
            },
        });
    };
    let mut load_order = Vec::new();
    for (name, data) in files {
        let path = cache
            .write_atomic(format!("{dir}/{name}.ko"), &mut &data[..])
            .map_err(ModulesError::Cache)?;
        load_order.push(ModuleFile { name, path });
    }
    let m = KernelModules {
        abi: abi.to_string(),
        load_order,
        builtin,
        compression,
        packages: searched,
    };
    let json = serde_json::to_vec_pretty(&m).expect("KernelModules serializes");
    cache
        .write_atomic_with(&manifest_rel, |f| io::Write::write_all(f, &json))
        .map_err(|e| match e {
            WriteError::Cache(e) => ModulesError::Cache(e),
            WriteError::Producer(source) => ModulesError::Read {
                deb: cache.path(&manifest_rel),
                source,
            },
        })?;
    Ok(m)
}

/// The guest path of a packed module.
pub fn guest_path(name: &str) -> String {
    format!("/harness/modules/{name}.ko")
}

/// Names in load order (for notes and logs).
pub fn describe(m: &KernelModules) -> String {
    let names: Vec<&str> = m.load_order.iter().map(|f| f.name.as_str()).collect();
    let mut s = if names.is_empty() {
        format!("no modules needed (per {})", m.packages.join(", "))
    } else {
        format!(
            "modules {} (from {}, .ko.{} decompressed on the host)",
            names.join(" -> "),
            m.packages.join(", "),
            m.compression
        )
    };
    if !m.builtin.is_empty() {
        s += &format!("; built in: {}", m.builtin.join(", "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A relocatable object from the host's C compiler (which the guest
    /// build links with) whose `.modinfo` holds `info` (`;`-separated) as
    /// the kernel's `MODULE_INFO` lays it out: one unaligned string each.
    fn elf(info: &str) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let src: String = info
            .split(';')
            .filter(|kv| !kv.is_empty())
            .enumerate()
            .map(|(i, kv)| {
                format!("static const char m{i}[] __attribute__((section(\".modinfo\"), used, aligned(1))) = {kv:?};\n")
            })
            .collect();
        std::fs::write(dir.path().join("m.c"), src).unwrap();
        let st = std::process::Command::new("cc")
            .args(["-c", "-fno-toplevel-reorder", "-o", "m.o", "m.c"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "cc -c failed");
        std::fs::read(dir.path().join("m.o")).unwrap()
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
        std::io::Write::write_all(&mut e, data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn names_of_module_paths() {
        assert_eq!(
            module_name("kernel/fs/fuse/virtiofs.ko.xz").as_deref(),
            Some("virtiofs")
        );
        assert_eq!(
            module_name("a/virtio-pci.ko.zst").as_deref(),
            Some("virtio_pci")
        );
        assert_eq!(module_name("x/fuse.ko").as_deref(), Some("fuse"));
        assert_eq!(module_name("modules.dep"), None);
    }

    #[test]
    fn modinfo_depends_from_an_elf() {
        let e = elf("license=GPL;depends=fuse,virtio-ring;name=virtiofs;");
        let info = modinfo(&e).unwrap();
        assert_eq!(depends(&info), ["fuse", "virtio_ring"]);
        assert!(info.contains(&("name".into(), "virtiofs".into())));
        assert!(modinfo(b"not elf").is_err());
        // A real ELF without the section: this test program.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(modinfo(&me).unwrap_err(), "no .modinfo section");
        // Cut inside its section headers.
        let cut = &e[..e.len() - 8];
        let why = modinfo(cut).unwrap_err();
        assert!(why.starts_with("bad section header table"), "{why}");
        assert_eq!(
            depends(&modinfo(&elf("depends=;")).unwrap()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn dependencies_first_once_builtin_skipped() {
        let table: HashMap<&str, Vec<&str>> = [
            ("virtiofs", vec!["fuse", "virtio"]),
            ("virtio_pci", vec!["virtio_pci_modern_dev", "virtio"]),
            ("virtio_pci_modern_dev", vec![]),
            ("fuse", vec![]),
        ]
        .into_iter()
        .collect();
        let builtin: BTreeSet<String> = ["virtio".to_string()].into();
        let mut deps = |m: &str| {
            Ok(table
                .get(m)
                .map(|d| d.iter().map(|s| s.to_string()).collect()))
        };
        let (order, b) = load_order(&["virtio_pci", "virtiofs"], &builtin, &mut deps).unwrap();
        assert_eq!(
            order,
            ["virtio_pci_modern_dev", "virtio_pci", "fuse", "virtiofs"]
        );
        assert_eq!(b, ["virtio"]);
        let e = load_order(&["nope"], &builtin, &mut deps).unwrap_err();
        assert!(matches!(e, ModulesError::Missing { ref module, .. } if module == "nope"));
    }

    #[test]
    fn cycles_are_errors() {
        let mut deps = |m: &str| Ok(Some(vec![if m == "a" { "b" } else { "a" }.to_string()]));
        let e = load_order(&["a"], &BTreeSet::new(), &mut deps).unwrap_err();
        assert!(matches!(e, ModulesError::Cycle(_)), "{e}");
    }

    #[test]
    fn modules_dep_and_builtin_files() {
        let dep = parse_modules_dep(
            "kernel/fs/fuse/virtiofs.ko.xz: kernel/fs/fuse/fuse.ko.xz\nkernel/fs/fuse/fuse.ko.xz:\n",
        );
        assert_eq!(dep["virtiofs"], ["fuse"]);
        assert!(dep["fuse"].is_empty());
        let b = parse_builtin(
            "kernel/drivers/virtio/virtio.ko\nkernel/drivers/virtio/virtio_ring.ko\n",
        );
        assert!(b.contains("virtio") && b.contains("virtio_ring"));
    }

    #[test]
    fn package_read_resolved_and_decompressed() {
        use crate::kernel::deb::testdeb::{build, Comp};
        let abi = "7.3.4+deb13-cloud-amd64";
        let fuse = elf("depends=;name=fuse;");
        let vfs = elf("depends=fuse;name=virtiofs;");
        let pci = elf("depends=;name=virtio_pci;");
        let (fx, vx, px) = (xz(&fuse), xz(&vfs), xz(&pci));
        let p = |s: &str| format!("./usr/lib/modules/{abi}/{s}");
        let files = [
            (p("kernel/fs/fuse/fuse.ko.xz"), &fx[..]),
            (p("kernel/fs/fuse/virtiofs.ko.xz"), &vx[..]),
            (p("kernel/drivers/virtio/virtio_pci.ko.xz"), &px[..]),
            (
                p("modules.builtin"),
                &b"kernel/drivers/virtio/virtio.ko\n"[..],
            ),
            ("./usr/share/doc/x".to_string(), &b"doc"[..]),
        ];
        let files: Vec<(&str, &[u8])> = files.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        let dir = tempfile::tempdir().unwrap();
        let deb = dir.path().join("m.deb");
        std::fs::write(&deb, build(&files, Comp::Zst)).unwrap();
        let pkg = read_package(&deb, abi).unwrap();
        assert_eq!(pkg.files.len(), 3);
        assert!(pkg.modules_dep.is_none());
        let Resolved {
            files: order,
            builtin,
            compression: comp,
        } = resolve(&pkg, VIRTIOFS_MODULES).unwrap();
        let names: Vec<&str> = order.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["virtio_pci", "fuse", "virtiofs"]);
        assert_eq!(order[2].1, vfs, "decompressed on the host");
        assert!(builtin.is_empty());
        assert_eq!(comp, "xz");
        // Another ABI's modules are not this kernel's.
        assert!(read_package(&deb, "7.3.5+deb13-cloud-amd64")
            .unwrap()
            .files
            .is_empty());
    }
}
