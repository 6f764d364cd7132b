//! What Debian's kernel packages really hold for virtiofs (network; gated
//! like the VM tests by `HARNESS_VM_TESTS=1`).

mod common;
use common::enabled;

use harness::kernel::{cache::Cache, debian::DebianMirror, modules};

fn version() -> String {
    std::env::var("HARNESS_TEST_KERNEL")
        .unwrap_or_else(|_| "debian:7.3.4".into())
        .trim_start_matches("debian:")
        .to_string()
}

#[test]
fn debian_cloud_kernels_have_virtiofs_built_in() {
    if !enabled() {
        return;
    }
    let cache = Cache::from_env().unwrap();
    let mirror = DebianMirror::discover(None).unwrap();
    let image = mirror.fetch(&version(), &cache).unwrap();
    let m = modules::fetch_debian(
        &mirror,
        &cache,
        &image.abi,
        &image.package,
        modules::VIRTIOFS_MODULES,
    )
    .unwrap();
    eprintln!("{}", modules::describe(&m));
    // Measured: 6.12 (bookworm-backports) and 7.x (trixie-backports, sid)
    // cloud-amd64 kernels have FUSE_FS, VIRTIO_FS and VIRTIO_PCI =y.
    assert!(m.load_order.is_empty(), "{m:?}");
    assert!(m.builtin.iter().any(|b| b == "virtiofs"), "{m:?}");
}

#[test]
fn a_modular_filesystem_resolves_with_decompressed_modules() {
    if !enabled() {
        return;
    }
    let cache = Cache::from_env().unwrap();
    let mirror = DebianMirror::discover(None).unwrap();
    let image = mirror.fetch(&version(), &cache).unwrap();
    // cuse is modular; fuse, which it uses, is built in (so no depends=).
    let m = modules::fetch_debian(&mirror, &cache, &image.abi, &image.package, &["cuse"]).unwrap();
    eprintln!("{}", modules::describe(&m));
    let names: Vec<&str> = m.load_order.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["cuse"]);
    for f in &m.load_order {
        let elf = std::fs::read(&f.path).unwrap();
        assert_eq!(&elf[..4], b"\x7fELF", "{} decompressed", f.path.display());
        let info = modules::modinfo(&elf).unwrap();
        assert!(
            info.iter()
                .any(|(k, v)| k == "vermagic" && v.starts_with(&image.version)),
            "{info:?}"
        );
    }
}
