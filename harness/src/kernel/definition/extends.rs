//! `extends: <name>`: a definition as another one of the same directory
//! plus what it states. The merge rules, and the errors for a parent that
//! does not exist or a chain that comes back on itself; what each field
//! means and how it is checked is `super`'s business.
//!
//! Merging (child over parent): `description`, `version`, `expect`,
//! `base` and `config.base` are replaced when the child gives them;
//! `patches`, `config.fragments` and `make` are the parent's followed by
//! the child's (a patch or fragment the parent already has is an error:
//! applied twice it cannot work, merged twice it means nothing); `require`
//! is the parent's with the child's added, a child entry for a symbol the
//! parent requires replacing the parent's entry (`NR_CPUS=8` over
//! `NR_CPUS=4`, or `NAME=n` to require it off).

use super::{
    invalid, io_err, layer, list, valid_name, Definition, DefinitionError, InputFile, Layer,
    Requirement,
};
use serde::Deserialize;
use std::fs;
use std::path::{Path, PathBuf};

/// Parses `text` (the file `path`, definition `name`) and the definitions
/// it extends, merged. `chain` holds the definitions being resolved that
/// extend this one, outermost first, to catch a cycle.
pub(super) fn resolve(
    dir: &Path,
    name: &str,
    path: &Path,
    text: &str,
    chain: &mut Vec<(String, PathBuf)>,
) -> Result<Definition, DefinitionError> {
    let (extends, own) = layer(dir, path, text)?;
    let merged = match extends {
        None => own,
        Some(parent) => {
            chain.push((name.to_string(), path.to_path_buf()));
            let parent = resolve_parent(dir, path, text, &parent, chain);
            chain.pop();
            over(own, parent?, path)?
        }
    };
    merged.into_definition(name, path)
}

/// The definition `parent` that `path` (with `text`) extends.
fn resolve_parent(
    dir: &Path,
    path: &Path,
    text: &str,
    parent: &str,
    chain: &mut Vec<(String, PathBuf)>,
) -> Result<Definition, DefinitionError> {
    let ppath = dir.join(format!("{parent}.yaml"));
    if !valid_name(parent) || !ppath.is_file() {
        return Err(DefinitionError::NoParent {
            path: path.to_path_buf(),
            position: extends_position(text),
            parent: parent.to_string(),
            dir: dir.to_path_buf(),
            known: list(dir).map(|l| l.join(", ")).unwrap_or_default(),
        });
    }
    if let Some(i) = chain.iter().position(|(n, _)| n == parent) {
        let mut files: Vec<PathBuf> = chain[i..].iter().map(|(_, p)| p.clone()).collect();
        files.push(ppath);
        return Err(DefinitionError::Cycle {
            path: path.to_path_buf(),
            position: extends_position(text),
            parent: parent.to_string(),
            files,
        });
    }
    let ptext = fs::read_to_string(&ppath).map_err(io_err(&ppath))?;
    resolve(dir, parent, &ppath, &ptext, chain)
}

/// `own` (from the file `path`) over its resolved parent.
fn over(own: Layer, parent: Definition, path: &Path) -> Result<Layer, DefinitionError> {
    Ok(Layer {
        description: own.description.or(Some(parent.description)),
        version: own.version.or(parent.version),
        expect: own.expect.or(parent.expect),
        base: own.base.or(Some(parent.base)),
        patches: appended("patch", path, &parent.path, parent.patches, own.patches)?,
        config_base: own.config_base.or(Some(parent.config_base)),
        fragments: appended(
            "fragment",
            path,
            &parent.path,
            parent.fragments,
            own.fragments,
        )?,
        require: requirements(parent.require, own.require),
        make_vars: [parent.make_vars, own.make_vars].concat(),
    })
}

/// The parent's files followed by the child's, none given twice.
fn appended(
    what: &str,
    path: &Path,
    parent: &Path,
    mut inherited: Vec<InputFile>,
    own: Vec<InputFile>,
) -> Result<Vec<InputFile>, DefinitionError> {
    for f in own {
        if inherited.iter().any(|i| i.name == f.name) {
            return Err(invalid(
                path,
                format!(
                    "{what} {:?} is already inherited from {} (extends: adds to its list)",
                    f.name,
                    parent.display()
                ),
            ));
        }
        inherited.push(f);
    }
    Ok(inherited)
}

/// The parent's requirements with the child's over them, by symbol.
fn requirements(mut inherited: Vec<Requirement>, own: Vec<Requirement>) -> Vec<Requirement> {
    for r in own {
        match inherited.iter_mut().find(|i| i.symbol == r.symbol) {
            Some(i) => *i = r,
            None => inherited.push(r),
        }
    }
    inherited
}

/// 1-based line and column of the value of `extends:` in `text`.
/// serde_yaml_ng has no spans, only positions in its errors: reading that
/// value into a type that always fails gives its position.
fn extends_position(text: &str) -> Option<(usize, usize)> {
    struct Fails;
    impl<'de> Deserialize<'de> for Fails {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl serde::de::Visitor<'_> for Visitor {
                type Value = Fails;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("nothing (this read only finds where extends: is)")
                }
            }
            d.deserialize_any(Visitor)
        }
    }
    #[derive(Deserialize)]
    struct Probe {
        #[allow(dead_code)] // Never read: deserializing it always fails.
        extends: Fails,
    }
    let e = serde_yaml_ng::from_str::<Probe>(text).err()?;
    e.location().map(|l| (l.line(), l.column()))
}

#[cfg(test)]
mod tests {
    use super::super::{load, BaseSpec, ConfigBase};
    use super::*;

    /// A kernels directory with two fragments and two patches.
    fn setup(definitions: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("fragments")).unwrap();
        fs::create_dir_all(d.path().join("patches")).unwrap();
        fs::write(d.path().join("fragments/a.config"), "CONFIG_A=y\n").unwrap();
        fs::write(d.path().join("fragments/b.config"), "CONFIG_B=y\n").unwrap();
        fs::write(d.path().join("patches/1.patch"), "p1").unwrap();
        fs::write(d.path().join("patches/2.patch"), "p2").unwrap();
        for (name, text) in definitions {
            fs::write(d.path().join(format!("{name}.yaml")), text).unwrap();
        }
        d
    }

    const PARENT: &str = "description: parent\nversion: '7.3'\nexpect: numa=0\nbase: {debian: linux-source-7.3}\npatches: [1.patch]\nconfig: {fragments: [a]}\nrequire: [FUTEX, NR_CPUS=4]\nmake: [KCFLAGS=-O2]\n";

    fn names(files: &[InputFile]) -> Vec<&str> {
        files.iter().map(|f| f.name.as_str()).collect()
    }

    fn require(def: &Definition) -> Vec<String> {
        def.require.iter().map(|r| r.to_string()).collect()
    }

    #[test]
    fn a_child_inherits_what_it_leaves_out_and_appends_lists() {
        let d = setup(&[("p", PARENT), ("c", "extends: p\n")]);
        let c = load(d.path(), "c").unwrap();
        let p = load(d.path(), "p").unwrap();
        assert_eq!(c.name, "c");
        assert_eq!(c.path, d.path().join("c.yaml"));
        assert_eq!(c.description, "parent");
        assert_eq!(c.version.as_deref(), Some("7.3"));
        assert_eq!(c.expect.as_deref(), Some("numa=0"));
        assert_eq!(c.base, p.base);
        assert_eq!(c.config_base, ConfigBase::Tinyconfig);
        assert_eq!(names(&c.patches), ["1.patch"]);
        assert_eq!(names(&c.fragments), ["a.config"]);
        assert_eq!(require(&c), require(&p));
        assert_eq!(c.make_vars, ["KCFLAGS=-O2"]);

        let child = "extends: p\ndescription: child\nversion: '7.4'\nexpect: immutable=1\nbase: {git: /r, ref: v7.4}\npatches: [2.patch]\nconfig: {base: defconfig, fragments: [b]}\nrequire: [NUMA, NR_CPUS=8]\nmake: [KCFLAGS=-Og]\n";
        let d = setup(&[("p", PARENT), ("c", child)]);
        let c = load(d.path(), "c").unwrap();
        assert_eq!(c.description, "child");
        assert_eq!(c.version.as_deref(), Some("7.4"));
        // Replaced, not merged: the child's string is the whole override.
        assert_eq!(c.expect.as_deref(), Some("immutable=1"));
        assert_eq!(
            c.base,
            BaseSpec::Git {
                url: "/r".into(),
                rev: "v7.4".into()
            }
        );
        assert_eq!(c.config_base, ConfigBase::Defconfig);
        assert_eq!(names(&c.patches), ["1.patch", "2.patch"]);
        assert_eq!(names(&c.fragments), ["a.config", "b.config"]);
        // A symbol the parent requires takes the child's value, in place.
        assert_eq!(
            require(&c),
            ["CONFIG_FUTEX=y", "CONFIG_NR_CPUS=8", "CONFIG_NUMA=y"]
        );
        // make takes the last assignment of a variable: the child's.
        assert_eq!(c.make_vars, ["KCFLAGS=-O2", "KCFLAGS=-Og"]);
    }

    #[test]
    fn chains_merge_from_the_root_down() {
        let d = setup(&[
            ("p", PARENT),
            (
                "c",
                "extends: p\nconfig: {fragments: [b]}\nrequire: [NUMA]\n",
            ),
            (
                "g",
                "extends: c\npatches: [2.patch]\nrequire: [NR_CPUS=2]\n",
            ),
        ]);
        let g = load(d.path(), "g").unwrap();
        assert_eq!(names(&g.patches), ["1.patch", "2.patch"]);
        assert_eq!(names(&g.fragments), ["a.config", "b.config"]);
        assert_eq!(
            require(&g),
            ["CONFIG_FUTEX=y", "CONFIG_NR_CPUS=2", "CONFIG_NUMA=y"]
        );
        assert_eq!(g.description, "parent");
    }

    #[test]
    fn a_missing_parent_is_named_at_the_extends_line() {
        let d = setup(&[("p", PARENT), ("c", "description: c\nextends: nope\n")]);
        let e = load(d.path(), "c").unwrap_err().to_string();
        let want = format!(
            "{}:2:10: extends: no kernel definition \"nope\" in {} (known: c, p)",
            d.path().join("c.yaml").display(),
            d.path().display()
        );
        assert_eq!(e, want);
        // A name that cannot be a file is no definition either.
        let d = setup(&[("c", "extends: ../p\n")]);
        let e = load(d.path(), "c").unwrap_err().to_string();
        assert!(
            e.contains("c.yaml:1:10: extends: no kernel definition \"../p\""),
            "{e}"
        );
    }

    #[test]
    fn a_cycle_names_its_files() {
        let d = setup(&[
            ("a", "extends: b\n"),
            ("b", "description: b\nextends: a\n"),
            ("s", "extends: s\n"),
            ("t", "extends: a\n"),
        ]);
        let f = |n: &str| d.path().join(format!("{n}.yaml")).display().to_string();
        let e = load(d.path(), "a").unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}:2:10: extends: \"a\" makes a cycle: {} -> {} -> {}",
                f("b"),
                f("a"),
                f("b"),
                f("a")
            )
        );
        let e = load(d.path(), "s").unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}:1:10: extends: \"s\" makes a cycle: {} -> {}",
                f("s"),
                f("s"),
                f("s")
            )
        );
        // Entered from outside the cycle: only the cycle is named.
        let e = load(d.path(), "t").unwrap_err().to_string();
        assert!(
            e.ends_with(&format!("cycle: {} -> {} -> {}", f("a"), f("b"), f("a"))),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_file_they_are_in() {
        let d = setup(&[
            ("p", "base: {debian: x}\nrequire: ['A B']\n"),
            ("c", "extends: p\n"),
            (
                "twice",
                "extends: q\npatches: [1.patch]\nconfig: {fragments: [b]}\n",
            ),
            ("q", PARENT),
            ("frag", "extends: q\nconfig: {fragments: [a.config]}\n"),
            ("nobase", "description: no base\n"),
        ]);
        let e = load(d.path(), "c").unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "{}: bad requirement",
                d.path().join("p.yaml").display()
            )),
            "{e}"
        );
        let e = load(d.path(), "twice").unwrap_err().to_string();
        assert!(
            e.contains("twice.yaml: patch \"1.patch\" is already inherited from"),
            "{e}"
        );
        assert!(e.contains("q.yaml"), "{e}");
        let e = load(d.path(), "frag").unwrap_err().to_string();
        assert!(
            e.contains("fragment \"a.config\" is already inherited"),
            "{e}"
        );
        let e = load(d.path(), "nobase").unwrap_err().to_string();
        assert!(e.contains("nobase.yaml: missing field `base`"), "{e}");
    }

    #[test]
    fn the_image_key_follows_the_parent() {
        use crate::kernel::build::KeyInputs;
        let key = |d: &Path| {
            let def = load(d, "c").unwrap();
            KeyInputs::new(&def, "debian:x.deb", vec!["gcc".into()]).key()
        };
        let d = setup(&[("p", PARENT), ("c", "extends: p\nrequire: [NUMA]\n")]);
        let before = key(d.path());
        // The same effective definition written flat has the same key.
        let flat = "version: '7.3'\nexpect: numa=0\nbase: {debian: linux-source-7.3}\npatches: [1.patch]\nconfig: {fragments: [a]}\nrequire: [FUTEX, NR_CPUS=4, NUMA]\nmake: [KCFLAGS=-O2]\n";
        let f = setup(&[("c", flat)]);
        assert_eq!(key(f.path()), before);
        // A change to the parent's fragment, or to the parent itself, is
        // a change to the child.
        fs::write(d.path().join("fragments/a.config"), "CONFIG_A=n\n").unwrap();
        let fragment_changed = key(d.path());
        assert_ne!(fragment_changed, before);
        fs::write(
            d.path().join("p.yaml"),
            PARENT.replace("NR_CPUS=4", "NR_CPUS=6"),
        )
        .unwrap();
        assert_ne!(key(d.path()), fragment_changed);
    }
}
