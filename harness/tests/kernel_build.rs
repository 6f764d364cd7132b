//! Kernel builds from source with real git, patch and make: a small
//! fixture tree stands in for the kernel (its Makefile has the targets and
//! the O= handling the build uses), so these run everywhere in seconds.
//! The tests on a real 7.3 tree (config generation, a dropped requirement
//! named with its Kconfig dependency) need the extracted Debian source and
//! run only with HARNESS_KBUILD_TESTS=1.

use harness::kernel::build::{self, BuildError, BuildOptions};
use harness::kernel::cache::Cache;
use harness::kernel::debian::{DebianError, DebianMirror};
use harness::kernel::definition::{self, Definition};
use harness::kernel::patch::PatchError;
use harness::kernel::source;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kbuild")
}

fn no_mirror() -> Result<DebianMirror, DebianError> {
    panic!("the fixture tests never need a Debian mirror")
}

fn have_tools() -> bool {
    ["git", "make", "patch"].iter().all(source::on_path)
}

/// A scratch kernels directory with the fixture tree as a local base.
struct Env {
    _dir: tempfile::TempDir,
    kernels: PathBuf,
    cache: Cache,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let kernels = dir.path().join("kernels");
        fs::create_dir_all(kernels.join("fragments")).unwrap();
        fs::create_dir_all(kernels.join("patches/series")).unwrap();
        let tree = dir.path().join("tree");
        copy_dir(&fixtures().join("tree"), &tree);
        fs::write(
            kernels.join("fragments/base.config"),
            "CONFIG_A=y\nCONFIG_N=8\n",
        )
        .unwrap();
        let cache = Cache::at(dir.path().join("cache"));
        Env {
            kernels,
            cache,
            _dir: dir,
        }
    }

    fn tree(&self) -> PathBuf {
        self.kernels.parent().unwrap().join("tree")
    }

    fn patch(&self, name: &str) {
        fs::copy(
            fixtures().join(name),
            self.kernels.join("patches/series").join(name),
        )
        .unwrap();
    }

    fn def(&self, name: &str, yaml: &str) -> Definition {
        let full = format!("base:\n  path: ../tree\n{yaml}");
        fs::write(self.kernels.join(format!("{name}.yaml")), &full).unwrap();
        definition::load(&self.kernels, name).unwrap()
    }

    fn build(&self, def: &Definition) -> Result<build::Built, BuildError> {
        build::build(
            def,
            &self.cache,
            &BuildOptions::default(),
            &no_mirror,
            &|_| {},
        )
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn patch_series_diff_then_mbox() {
    if !have_tools() {
        eprintln!("skipped: git, make or patch missing");
        return;
    }
    let env = Env::new();
    env.patch("0001-slots.diff");
    env.patch("0002-immutable.mbox");
    let def = env.def("k", "patches: [series]\nconfig:\n  fragments: [base]\n");
    let names: Vec<_> = def.patches.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["series/0001-slots.diff", "series/0002-immutable.mbox"]
    );
    let built = env.build(&def).unwrap();
    assert!(!built.cache_hit);
    let image = fs::read_to_string(built.image.as_ref().unwrap()).unwrap();
    assert!(image.contains("static int slots = 32;"), "{image}");
    assert!(image.contains("static int immutable;"));
    assert!(image.contains("case 3:"));
    // The fragment was merged over tinyconfig.
    assert!(image.contains("CONFIG_N=8"));
    // The mbox became two commits with their subjects, on top of the diff.
    let src = env.cache.path("kbuild/work/k/src");
    let log = source::run(
        source::git()
            .arg("-C")
            .arg(&src)
            .args(["log", "--format=%s", "-3"]),
    )
    .unwrap();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "core: GET_IMMUTABLE",
            "core: add immutable flag",
            "harness: series/0001-slots.diff"
        ]
    );
    // The cache entry is complete.
    let dir = built
        .image
        .as_ref()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    for f in ["config", "build.log", "meta.json"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
}

#[test]
fn failing_patch_names_patch_file_and_hunk() {
    if !have_tools() {
        return;
    }
    let env = Env::new();
    env.patch("0003-stale.diff");
    let def = env.def("k", "patches: [series/0003-stale.diff]\n");
    let err = env.build(&def).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, BuildError::Patch(PatchError::DoesNotApply { .. })),
        "{msg}"
    );
    assert!(
        msg.contains(
            "patch series/0003-stale.diff does not apply: kernel/core.c hunk #2 \
             (@@ -14,7 +14,7 @@ int futex_hash_prctl(int op)) FAILED at line 14"
        ),
        "{msg}"
    );
    // git's own words are kept.
    assert!(msg.contains("patch failed: kernel/core.c"), "{msg}");
    // Nothing was cached.
    assert!(build::cached_images(&env.cache, "k").is_empty());
}

#[test]
fn failing_mbox_is_aborted_and_named() {
    if !have_tools() {
        return;
    }
    let env = Env::new();
    // The mbox expects slots = 32 (0001 missing): its first message fails.
    env.patch("0002-immutable.mbox");
    let def = env.def("k", "patches: [series/0002-immutable.mbox]\n");
    let msg = env.build(&def).unwrap_err().to_string();
    assert!(
        msg.contains("patch series/0002-immutable.mbox does not apply"),
        "{msg}"
    );
    assert!(
        msg.contains("kernel/core.c hunk #1 (@@ -1,5 +1,6 @@)"),
        "{msg}"
    );
    // No `git am` left in progress: the next build with a good series works.
    env.patch("0001-slots.diff");
    let def = env.def("k", "patches: [series]\n");
    env.build(&def).unwrap();
}

#[test]
fn cache_hit_rebuild_on_change_and_incremental_tree() {
    if !have_tools() {
        return;
    }
    let env = Env::new();
    env.patch("0001-slots.diff");
    let def = env.def("k", "patches: [series]\nconfig:\n  fragments: [base]\n");
    let first = env.build(&def).unwrap();
    let hit = env.build(&def).unwrap();
    assert!(hit.cache_hit);
    assert_eq!(hit.key, first.key);
    assert_eq!(hit.image, first.image);
    // Change the patch: a new key, a new image, the old one stays.
    let p = env.kernels.join("patches/series/0001-slots.diff");
    let changed = fs::read_to_string(&p)
        .unwrap()
        .replace("slots = 32", "slots = 128");
    fs::write(&p, changed).unwrap();
    let def2 = definition::load(&env.kernels, "k").unwrap();
    let second = env.build(&def2).unwrap();
    assert!(!second.cache_hit);
    assert_ne!(second.key, first.key);
    let img = fs::read_to_string(second.image.as_ref().unwrap()).unwrap();
    assert!(img.contains("slots = 128"));
    assert!(first.image.as_ref().unwrap().is_file());
    assert_eq!(build::cached_images(&env.cache, "k").len(), 2);
    // The same object directory was reused (two make runs in it).
    let builds = fs::read_to_string(env.cache.path("kbuild/work/k/obj/builds")).unwrap();
    assert_eq!(builds.lines().count(), 2);
    // A changed base tree changes the key too.
    fs::write(
        env.tree().join("kernel/other.c"),
        "int other(void) { return 2; }\n",
    )
    .unwrap();
    let third = env.build(&def2).unwrap();
    assert_ne!(third.key, second.key);
    // `path` semantics: no_build finds the image, or reports none.
    let opts = BuildOptions {
        no_build: true,
        ..Default::default()
    };
    let look = build::build(&def2, &env.cache, &opts, &no_mirror, &|_| {}).unwrap();
    assert_eq!(look.image, third.image);
    fs::write(
        env.tree().join("kernel/other.c"),
        "int other(void) { return 3; }\n",
    )
    .unwrap();
    let look = build::build(&def2, &env.cache, &opts, &no_mirror, &|_| {}).unwrap();
    assert!(look.image.is_none());
    // clean removes the work tree, and with images the images.
    let removed = build::clean(&env.cache, "k", true).unwrap();
    assert_eq!(removed.len(), 2);
    assert!(build::cached_images(&env.cache, "k").is_empty());
}

#[test]
fn concurrent_builds_of_one_key_build_once() {
    if !have_tools() {
        return;
    }
    let env = Arc::new(Env::new());
    let def = Arc::new(env.def("k", "config:\n  fragments: [base]\n"));
    let start = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let (env, def, start) = (env.clone(), def.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                env.build(&def).unwrap()
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results.iter().filter(|b| !b.cache_hit).count(), 1);
    assert!(results.windows(2).all(|w| w[0].image == w[1].image));
    let builds = fs::read_to_string(env.cache.path("kbuild/work/k/obj/builds")).unwrap();
    assert_eq!(builds.lines().count(), 1);
}

#[test]
fn failed_make_leaves_no_image() {
    if !have_tools() {
        return;
    }
    let env = Env::new();
    let def = env.def("k", "make: [FAIL=1]\n");
    let err = env.build(&def).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, BuildError::Make { .. }), "{msg}");
    assert!(msg.contains("make bzImage failed"), "{msg}");
    assert!(msg.contains("error: FAIL was set"), "{msg}");
    assert!(build::cached_images(&env.cache, "k").is_empty());
    let key_dir = env.cache.path("kbuild/images/k");
    assert!(
        !key_dir.exists()
            || fs::read_dir(&key_dir)
                .unwrap()
                .all(|e| { !e.unwrap().path().join("bzImage").exists() })
    );
}

#[test]
fn dropped_requirement_names_its_dependency() {
    if !have_tools() {
        return;
    }
    let env = Env::new();
    fs::write(
        env.kernels.join("fragments/child.config"),
        "CONFIG_CHILD=y\n",
    )
    .unwrap();
    let def = env.def("k", "config:\n  fragments: [child]\nrequire: [CHILD, A]\n");
    let msg = env.build(&def).unwrap_err().to_string();
    assert!(
        msg.contains("CONFIG_CHILD must be y but is n after olddefconfig"),
        "{msg}"
    );
    assert!(msg.contains("defined at Kconfig:8"), "{msg}");
    assert!(msg.contains("`depends on PARENT && A`"), "{msg}");
    assert!(msg.contains("unmet: PARENT (PARENT=n)"), "{msg}");
    // With the parent it builds; a fragment line that is lost without a
    // requirement is only a warning.
    fs::write(
        env.kernels.join("fragments/child.config"),
        "CONFIG_PARENT=y\nCONFIG_CHILD=y\n",
    )
    .unwrap();
    let def = definition::load(&env.kernels, "k").unwrap();
    assert!(env.build(&def).unwrap().warnings.is_empty());
}

#[test]
fn fragment_only_loss_is_a_warning() {
    if !have_tools() {
        return;
    }
    let env = Env::new();
    fs::write(
        env.kernels.join("fragments/child.config"),
        "CONFIG_CHILD=y\n",
    )
    .unwrap();
    let def = env.def("k", "config:\n  fragments: [child]\n");
    let built = env.build(&def).unwrap();
    assert_eq!(built.warnings.len(), 1, "{:?}", built.warnings);
    assert!(built.warnings[0].contains("CONFIG_CHILD must be y but is n"));
}

// ---- Real kernel tree (HARNESS_KBUILD_TESTS=1) ----

fn real_tests() -> bool {
    let on = std::env::var("HARNESS_KBUILD_TESTS").is_ok_and(|v| v == "1");
    // `cargo xtask ci` sets it; CI without it would pass without checking.
    assert!(
        on || std::env::var_os("CI").is_none(),
        "CI must run the real-tree tests: set HARNESS_KBUILD_TESTS=1 (cargo xtask ci does)"
    );
    on
}

fn real_kernels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels")
}

#[test]
fn real_73_guest_fragment_and_dropped_requirement() {
    if !real_tests() {
        eprintln!("skipped: set HARNESS_KBUILD_TESTS=1 (needs linux-source-7.3)");
        return;
    }
    let cache = Cache::from_env().unwrap();
    let def = definition::load(&real_kernels_dir(), "7.3").unwrap();
    let base = source::prepare(&def.base, &cache, &|| DebianMirror::discover(None), &|m| {
        eprintln!("{m}")
    })
    .unwrap();
    let work = tempfile::tempdir_in(cache.path("kbuild")).unwrap();
    // Every shipped 7.3 definition applies its patches and configures
    // cleanly: every requirement and every fragment line holds.
    for name in [
        "7.3-immutable",
        "7.3-debug",
        "7.3-peers",
        "7.3-hashfix",
        "7.3",
    ] {
        let d = definition::load(&real_kernels_dir(), name).unwrap();
        let (values, warnings) =
            build::configure(&d, &base, work.path(), &|m| eprintln!("{m}")).unwrap();
        assert!(warnings.is_empty(), "{name}: {warnings:?}");
        for r in &d.require {
            assert_eq!(values.get(&r.symbol), r.value, "{name}: {r}");
        }
    }
    // Without PCI, ACPI NUMA is lost: the error names the option and why.
    let mut nopci = def.clone();
    nopci.fragments.push(definition::InputFile {
        name: "nopci.config".into(),
        path: "nopci.config".into(),
        data: b"# CONFIG_PCI is not set\n".to_vec(),
    });
    nopci.require.retain(|r| r.symbol != "PCI");
    let msg = build::configure(&nopci, &base, work.path(), &|_| {})
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("CONFIG_X86_64_ACPI_NUMA must be y but is n"),
        "{msg}"
    );
    assert!(msg.contains("arch/x86/Kconfig:"), "{msg}");
    assert!(
        msg.contains("`depends on X86_64 && NUMA && ACPI && PCI`"),
        "{msg}"
    );
    assert!(msg.contains("unmet: PCI (PCI=n)"), "{msg}");
    // A requirement that no longer exists in 7.3 says so.
    let mut gone = def.clone();
    gone.require
        .push(definition::Requirement::parse("PROC_SYSCTL").unwrap());
    let msg = build::configure(&gone, &base, work.path(), &|_| {})
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("CONFIG_PROC_SYSCTL must be y but is n"),
        "{msg}"
    );
    assert!(msg.contains("no such option in this tree"), "{msg}");
    source::remove_checkout(&base.repo, &work.path().join("src")).unwrap();
}

#[test]
fn shipped_definitions_load() {
    let dir = real_kernels_dir();
    let names = definition::list(&dir).unwrap();
    for want in [
        "7.3",
        "7.3-immutable",
        "7.3-debug",
        "7.3-peers",
        "7.3-gdb",
        "7.3-hashfix",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    for n in &names {
        let def = definition::load(&dir, n).unwrap();
        assert!(!def.fragments.is_empty(), "{n}");
        assert!(def.version.is_some(), "{n}");
    }
    let imm = definition::load(&dir, "7.3-immutable").unwrap();
    assert_eq!(imm.patches.len(), 1);
    assert_eq!(
        harness::kernel::patch::kind(&String::from_utf8_lossy(&imm.patches[0].data)),
        harness::kernel::patch::PatchKind::Mbox
    );
}
