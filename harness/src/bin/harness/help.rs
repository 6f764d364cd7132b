//! The help and man pages' shared sections: EXIT STATUS, ENVIRONMENT and
//! EXAMPLES, written from the one table in `harness::error::exit`, added
//! to `--help` of every command and to every man page.

use anyhow::Context;
use clap::CommandFactory;
use harness::error::exit;
use std::io::Write;
use std::path::Path;

/// The command line with the shared sections after every command's long
/// help (`--help`; `-h` stays short).
pub fn command() -> clap::Command {
    let sections = exit::help_sections();
    with_sections(super::Cli::command(), &sections)
}

fn with_sections(cmd: clap::Command, sections: &str) -> clap::Command {
    cmd.after_long_help(sections.to_string())
        .mut_subcommands(|s| with_sections(s, sections))
}

/// The roff page of `cmd`: clap_mangen's sections, then ours in place of
/// its EXTRA section.
fn page(cmd: clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    if cmd.has_subcommands() {
        man.render_subcommands_section(w)?;
    }
    w.write_all(sections_roff().as_bytes())?;
    if cmd.get_version().is_some() {
        man.render_version_section(w)?;
    }
    Ok(())
}

/// EXIT STATUS, ENVIRONMENT and EXAMPLES as roff.
fn sections_roff() -> String {
    use roff::{bold, roman, Roff};
    let mut r = Roff::new();
    let mut list = |title: &str, rows: &mut dyn Iterator<Item = (String, &str)>| {
        r.control("SH", [title]);
        for (term, what) in rows {
            r.control("TP", []);
            r.text([bold(term)]);
            r.text([roman(what)]);
        }
    };
    list(
        "EXIT STATUS",
        &mut exit::TABLE.iter().map(|(c, w)| (c.to_string(), *w)),
    );
    list(
        "ENVIRONMENT",
        &mut exit::ENVIRONMENT.iter().map(|(v, w)| (v.to_string(), *w)),
    );
    list(
        "EXAMPLES",
        &mut exit::EXAMPLES.iter().map(|(c, w)| (c.to_string(), *w)),
    );
    r.render()
}

/// `harness man`: the page of `harness` on stdout, or with `dir` one page
/// per visible command, `harness-<sub>[-<subsub>].1`, written there.
pub fn man(dir: Option<&Path>) -> anyhow::Result<()> {
    let mut cmd = super::Cli::command().disable_help_subcommand(true);
    cmd.build();
    match dir {
        None => page(cmd, &mut std::io::stdout().lock())?,
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            write_pages(&cmd, dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))?;
            println!("man pages in {}", dir.display());
        }
    }
    Ok(())
}

fn write_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let mut f = std::fs::File::create(dir.join(format!("{name}.1")))?;
    page(cmd.clone(), &mut f)?;
    f.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_help_and_man_page_has_the_exit_status_table() {
        let mut cmd = command();
        cmd.build();
        let mut all = vec![cmd.clone()];
        let mut i = 0;
        while i < all.len() {
            // clap's own `help` prints the others' help, not its own.
            let subs: Vec<_> = all[i]
                .get_subcommands()
                .filter(|c| c.get_name() != "help")
                .cloned()
                .collect();
            all.extend(subs);
            i += 1;
        }
        for c in &all {
            let help = c.clone().render_long_help().to_string();
            for (code, what) in exit::TABLE {
                assert!(
                    help.contains(&format!("  {code:<4}{what}")),
                    "{}: {help}",
                    c.get_name()
                );
            }
            assert!(help.contains("HARNESS_CACHE_DIR"), "{}", c.get_name());
        }
        let mut roff = Vec::new();
        page(super::super::Cli::command(), &mut roff).unwrap();
        let roff = String::from_utf8(roff).unwrap();
        for s in ["EXIT STATUS", "ENVIRONMENT", "EXAMPLES", "HARNESS_QEMU"] {
            assert!(roff.contains(s), "{s}: {roff}");
        }
        assert!(!roff.contains(".SH EXTRA"), "{roff}");
        // One page per visible command, each with the sections.
        let dir = tempfile::tempdir().unwrap();
        man(Some(dir.path())).unwrap();
        let run = std::fs::read_to_string(dir.path().join("harness-run.1")).unwrap();
        assert!(
            run.contains("EXIT STATUS") && run.contains(r"\-\-kernel"),
            "{run}"
        );
    }

    /// The examples are commands that parse (quotes as a shell removes them).
    #[test]
    fn every_example_parses() {
        for (example, _) in exit::EXAMPLES {
            let argv: Vec<String> = example.split(' ').map(|w| w.replace('\'', "")).collect();
            if let Err(e) = command().try_get_matches_from(&argv) {
                panic!("{example}: {e}");
            }
        }
    }

    /// Every `HARNESS_*` variable the code reads or sets is in ENVIRONMENT
    /// (the build's commit id aside).
    #[test]
    fn every_harness_variable_is_documented() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = std::collections::BTreeSet::new();
        let mut stack = vec![root.join("harness/src"), root.join("guest-tests/src")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    for (i, _) in text.match_indices("\"HARNESS_") {
                        let name: String = text[i + 1..]
                            .chars()
                            .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                            .collect();
                        if text[i + 1 + name.len()..].starts_with('"') {
                            found.insert(name);
                        }
                    }
                }
            }
        }
        let documented: Vec<&str> = exit::ENVIRONMENT.iter().map(|(v, _)| *v).collect();
        let missing: Vec<&String> = found
            .iter()
            // A bare `HARNESS_` is a prefix check, not a variable.
            .filter(|v| !v.ends_with('_'))
            .filter(|v| !documented.contains(&v.as_str()) && *v != "HARNESS_GIT_COMMIT")
            .collect();
        assert!(missing.is_empty(), "not in exit::ENVIRONMENT: {missing:?}");
    }
}
