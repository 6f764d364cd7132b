//! `matrix.yaml` without VMs: schema errors with positions, expansion,
//! exclusion and overrides, sharding, `junit merge`, the default matrix.

use harness::host::AccelChoice;
use harness::matrix::{self, plan, report, Matrix};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const HEAD: &str = "kernels:
  - name: k73
    spec: debian:7.3
  - name: k616
    spec: debian:6.16
topologies:
  - name: one
    nodes:
      - {cpus: 2, mem: 512M}
  - name: two
    nodes:
      - {cpus: 2, mem: 512M}
      - {cpus: 2, mem: 512M}
";

fn parse(text: &str) -> Result<Matrix, String> {
    matrix::parse_str(text, Path::new("m.yaml")).map_err(|e| e.to_string())
}

fn names(m: &Matrix) -> Vec<String> {
    m.cells.iter().map(|c| c.name.clone()).collect()
}

#[test]
fn schema_errors_say_where_and_what_was_expected() {
    let cases: &[(&str, &str)] = &[
        // Unknown keys, at every level.
        (
            "kernels: []\ntopologies: []\nkernal: 1\n",
            "m.yaml:3:1: unknown field `kernal`, expected one of `kernels`, `topologies`, `suites`, `cells`, `overrides`, `shares`, `artifacts`",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\n    feature: {}\ntopologies: []\n",
            "m.yaml:4:5: kernels[0]: unknown field `feature`, expected one of `name`, `spec`, `arch`, `features`",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\n    features: {numa: true, hash: true}\ntopologies: []\n",
            "m.yaml:4:28: kernels[0].features: unknown field `hash`, expected one of `prctl`, `private_hash`, `immutable`, `numa`, `mpol`, `growth`, `requeue_same_flags`, `robust_pending_owned`",
        ),
        // Type errors.
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\n    features: {numa: maybe}\ntopologies: []\n",
            "m.yaml:4:22: kernels[0].features.numa: invalid type: string \"maybe\", expected a boolean",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\n    features: {growth: sometimes}\ntopologies: []\n",
            "m.yaml:4:24: kernels[0].features.growth: unknown variant `sometimes`, expected one of `none`, `thread`, `vm-not-vfork`, `any-vm`",
        ),
        (
            "kernels: {}\ntopologies: []\n",
            "m.yaml:1:10: kernels: invalid type: map, expected a sequence",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes:\n      - {cpus: two, mem: 1G}\n",
            "m.yaml:7:16: topologies[0].nodes[0].cpus: invalid type: string \"two\", expected u32",
        ),
        (
            "topologies: []\n",
            "m.yaml:1:1: missing field `kernels`",
        ),
        // Validation errors (after parsing), placed at the entry or field.
        (
            "kernels:\n  - name: a\n    spec: debain:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\n",
            "m.yaml:3:5: kernel \"a\": kernel \"debain:7.3\": expected debian:<version> (e.g. debian:7.3.4), path:<bzImage>, source:<name> (kernels/<name>.yaml) or tree:<dir> (your kernel tree)",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\n  - name: a\n    spec: debian:7.2\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\n",
            "m.yaml:2:5: kernel \"a\" is declared twice",
        ),
        (
            "kernels:\n  - name: a b\n    spec: debian:7.3\ntopologies: []\n",
            "m.yaml:2:5: kernel name \"a b\": expected 1-64 characters of [A-Za-z0-9._-]",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies: []\n",
            "m.yaml:4:1: topologies: expected at least one topology",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes:\n      - {cpus: 1, mem: lots}\n",
            "m.yaml:7:19: topology \"t\" node 0: mem \"lots\": expected a size such as 512M or 1G, or 0",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes:\n      - {cpus: 1, mem: 0}\n      - {cpus: 1, mem: 1G}\n",
            "m.yaml:6:5: topology \"t\": invalid topology: node 0 must have memory (the kernel boots from it)",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}, {cpus: 1, mem: 1G}]\n    distances: [[10, 5], [5, 10]]\n",
            "m.yaml:7:5: topology \"t\": invalid topology: distance 0->1 is 5; expected 11..=254",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\nsuites:\n  - name: s\n    builtin: smok\n",
            "m.yaml:9:5: suite \"s\": unknown suite \"smok\"; known suites: smoke, futex, none, fault-panic, fault-hang, fault-garbage, kselftest-futex, bench",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\nsuites:\n  - name: s\n    builtin: smoke\n    tests: []\n",
            "m.yaml:8:5: suite \"s\": expected exactly one of builtin: or tests:",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\nsuites:\n  - name: s\n    tests:\n      - {bin: smoek}\n",
            "m.yaml:10:10: suite \"s\": unknown guest binary \"smoek\"; expected one of smoke, topology, futex-prctl, futex-resize, futex-immutable, futex-numa, futex-mpol, futex-upstream-gaps, futex-robust, futex-ops, futex-wake, futex-requeue, futex-pi, futex-bench, fault, artifact or a path to a static binary",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\nsuites:\n  - name: s\n    tests:\n      - bin: smoke\n        timeout: soon\n",
            "m.yaml:11:9: suite \"s\": timeout \"soon\": expected a duration such as 60s, 10m or 1h",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\ncells:\n  exclude:\n    - {kernel: a}\n    - {kernel: b}\n",
            "m.yaml:10:5: cells.exclude[1]: kernel \"b\" matches no kernel (known: a)",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\ncells:\n  exclude:\n    - {kernel: a}\n",
            "m.yaml:7:1: the matrix has no cells (every combination is excluded)",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\noverrides:\n  - accel: fast\n",
            "m.yaml:8:3: overrides[0]: accel \"fast\": expected auto, kvm or tcg",
        ),
        (
            "kernels:\n  - name: a\n    spec: path:/bin/sh\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\n",
            "m.yaml:3:5: kernel \"a\": spec \"path:/bin/sh\" names no version, so features must give prctl, private_hash, immutable, numa, mpol, growth, requeue_same_flags, robust_pending_owned",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:6.16\n    features: {private_hash: true, prctl: false}\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\n",
            "m.yaml:4:16: kernel \"a\": private_hash: true needs prctl: true",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\n    features: {private_hash: false, growth: thread}\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\n",
            "m.yaml:4:37: kernel \"a\": growth: thread needs private_hash: true",
        ),
        (
            "kernels:\n  - name: a\n    spec: debian:7.3\n    features: {numa: false, mpol: true}\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\n",
            "m.yaml:4:29: kernel \"a\": mpol: true needs numa: true",
        ),
    ];
    let mut cases = cases.to_vec();
    let known = known_failure_error_cases();
    cases.extend(known.iter().map(|(i, w)| (i.as_str(), w.as_str())));
    let shares = share_error_cases();
    cases.extend(shares.iter().map(|(i, w)| (i.as_str(), w.as_str())));
    let mut bad = Vec::new();
    for (input, want) in &cases {
        match parse(input) {
            Ok(_) => bad.push(format!("accepted:\n{input}")),
            Err(got) if got != **want => {
                bad.push(format!("input:\n{input}\n got: {got}\nwant: {want}"))
            }
            Err(_) => {}
        }
    }
    assert!(bad.is_empty(), "\n{}", bad.join("\n\n"));
}

#[test]
fn full_product_by_default_with_builtin_suites() {
    let m = parse(HEAD).unwrap();
    assert_eq!(
        names(&m),
        [
            "k73/one/smoke",
            "k73/one/futex",
            "k73/two/smoke",
            "k73/two/futex",
            "k616/one/smoke",
            "k616/one/futex",
            "k616/two/smoke",
            "k616/two/futex"
        ]
    );
    // Expectations default from the version table and reach the futex binaries.
    let c = &m.cells[1];
    // The suite's tests: the planner puts the topology check first.
    let tests = m.suite_tests(c);
    assert_eq!(tests[0].name, "futex-prctl");
    assert_eq!(
        tests[0].args,
        [
            "--expect",
            "prctl=1,private_hash=1,immutable=0,numa=1,mpol=1,growth=any-vm,requeue_same_flags=1,robust_pending_owned=1,version=7.3"
        ]
    );
    assert!(!m.kernels[1].expect.private_hash && m.kernels[1].expect.prctl);
}

#[test]
fn a_tree_kernel_is_a_kernel_spec_with_its_makefiles_version() {
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("linux");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("Makefile"), "VERSION = 6\nPATCHLEVEL = 16\n").unwrap();
    std::fs::write(tree.join("Kconfig"), "").unwrap();
    let yaml = |spec: &str| {
        format!("kernels:\n  - name: mine\n    spec: {spec}\ntopologies:\n  - name: t\n    nodes: [{{cpus: 1, mem: 1G}}]\n")
    };
    let m = parse(&yaml(&format!("tree:{}", tree.display()))).unwrap();
    let k = &m.kernels[0];
    assert!(matches!(k.spec, harness::kernelspec::KernelSpec::Tree(_)));
    // 6.16's row: prctl, no private hash.
    assert!(k.expect.prctl && !k.expect.private_hash, "{:?}", k.expect);
    std::fs::write(tree.join(".config"), "").unwrap();
    let e = parse(&yaml(&format!("tree:{}", tree.display()))).unwrap_err();
    assert!(
        e.starts_with("m.yaml:3:5: kernel \"mine\": kernel \"tree:"),
        "{e}"
    );
    assert!(e.contains("configured in place"), "{e}");
}

/// `shares:` and `artifacts:` errors: serde's for types and unknown
/// keys, ours (placed at the item) for the `HOST[:GUEST[:ro|rw]]` syntax.
/// `known_failures:` values that cannot work, at the offending value.
fn known_failure_error_cases() -> Vec<(String, String)> {
    let head = "kernels:\n  - name: debian-7.3\n    spec: debian:7.3\n  - name: source-7.3\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\nsuites:\n  - name: futex\n    builtin: futex\n    known_failures:\n      - case: futex-prctl/*\n        reason: r\n        message: \"round *: x\"\n        kernel: [debian-7.3]\n";
    let ok = "        reason: r\n        message: m\n        kernel: [debian-7.3]\n";
    [
        (
            "      - case: futex-prctl/set-2\n        reason: r\n        message: \"[unclosed\"\n        kernel: [debian-7.3]\n".to_string(),
            "m.yaml:19:9: suite \"futex\": known_failures[1]: message \"[unclosed\": unclosed character class; missing ']'; expected a glob over the exact failure message",
        ),
        (
            "      - case: futex-prctl/set-2\n        reason: r\n        message: \"*\"\n        kernel: [debian-7.3]\n".to_string(),
            "m.yaml:19:9: suite \"futex\": known_failures[1]: message \"*\": it matches any failure; expected a glob over the exact failure message",
        ),
        (
            "      - case: futex-prctl/set-2\n        reason: r\n        kernel: [debian-7.3]\n".to_string(),
            "m.yaml:17:7: suite \"futex\": known_failures[1]: expected message: (a glob over the exact failure message it accepts; any other failure of the case stays a failure)",
        ),
        (
            "      - case: futex-prctl/set-2\n        reason: r\n        message: m\n        kernel: []\n".to_string(),
            "m.yaml:20:9: suite \"futex\": known_failures[1]: expected kernel: with at least one glob naming the declared kernels it is seen on",
        ),
        (
            "      - case: futex-prctl/set-2\n        reason: r\n        message: m\n".to_string(),
            "m.yaml:17:7: suite \"futex\": known_failures[1]: expected kernel: with at least one glob naming the declared kernels it is seen on",
        ),
        (
            "      - case: futex-prctl/set-2\n        reason: r\n        message: m\n        kernel: [debian-7.3, \"debain-7*\"]\n".to_string(),
            "m.yaml:20:31: suite \"futex\": known_failures[1]: kernel \"debain-7*\" matches no kernel (known: debian-7.3, source-7.3)",
        ),
        (
            format!("      - case: futex-resize/no-such-case\n{ok}"),
            "m.yaml:17:9: suite \"futex\": known_failures[1]: case \"futex-resize/no-such-case\" names no case of this suite (it has e.g. futex-resize/wait-private-resize, futex-resize/wait-global-resize, futex-resize/waitv-private-resize, futex-resize/waitv-global-resize, futex-resize/requeue-private-resize, futex-resize/requeue-global-resize, futex-resize/pi-private-resize, futex-resize/pi-global-resize, ...)",
        ),
        (
            format!("      - case: kselftest/*\n{ok}"),
            "m.yaml:17:9: suite \"futex\": known_failures[1]: case \"kselftest/*\" names no case of this suite (it has e.g. topology/..., futex-prctl/get-fresh-is-0, futex-prctl/get-after-futex-ops-is-0, futex-resize/wait-private-resize, futex-resize/wait-global-resize, futex-immutable/get-immutable-fresh, futex-immutable/set-immutable, futex-numa/flag-accepted, ...)",
        ),
        (
            format!("      - case: futex-prctl/set-2\n{ok}        intermittent: \" \"\n"),
            "m.yaml:21:9: suite \"futex\": known_failures[1]: intermittent: expected how often the failure was seen (e.g. \"2 of 6 full tiers\")",
        ),
        (
            "      - {case: futex-prctl/set-2, reason: r, accel: qemu, message: m, kernel: [debian-7.3]}\n".to_string(),
            "m.yaml:17:46: suite \"futex\": known_failures accel \"qemu\": expected tcg or kvm",
        ),
    ]
    .into_iter()
    .map(|(tail, want)| (format!("{head}{tail}"), want.to_string()))
    .collect()
}

#[test]
fn known_failures_keep_their_message_kernel_globs_and_position() {
    let text = format!(
        "{HEAD}suites:\n  - name: futex\n    builtin: futex\n    known_failures:\n      - case: futex-resize/set0-*\n        message: \"*(os error 16)\"\n        kernel: [k73]\n        reason: r\n"
    );
    let m = parse(&text).unwrap();
    let k = &m
        .suites
        .iter()
        .find(|s| s.name == "futex")
        .unwrap()
        .known_failures[0];
    assert_eq!(k.message, "*(os error 16)");
    assert_eq!(k.kernels, ["k73"]);
    assert_eq!(k.suite, "futex");
    assert_eq!(k.at, "m.yaml:18:7");
    assert_eq!(k.intermittent, None);
    assert!(k.applies_to_kernel("k73") && !k.applies_to_kernel("k616"));
}

/// Every entry of the shipped matrix names a case its suite has: the
/// futex binaries' own `--list`, the upstream selftests' catalog.
#[test]
fn the_shipped_known_failures_name_real_cases() {
    let futex = harness::guestbin::cases("futex-resize").unwrap();
    assert!(futex.contains(&"set0-vs-thread-create"), "{futex:?}");
    assert!(harness::guestbin::cases("smoke").is_none());
}

fn share_error_cases() -> Vec<(String, String)> {
    // Six lines: the items below start on line 7.
    let base = "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes: [{cpus: 1, mem: 1G}]\n";
    let expected = "(expected HOST_DIR[:GUEST_PATH[:ro|rw]])";
    [
        (
            "shares:\n  - bins:/opt/bins:rx\n".to_string(),
            format!("m.yaml:8:5: shares[0]: bad share \"bins:/opt/bins:rx\": mode \"rx\" is neither ro nor rw {expected}"),
        ),
        (
            "shares: [a:/mnt/a, 'b:rel']\n".to_string(),
            format!("m.yaml:7:21: shares[1]: bad share \"b:rel\": guest path \"rel\" must be absolute {expected}"),
        ),
        (
            "shares:\n  - a:/mnt/x\n  - a:/mnt/x\n".to_string(),
            "m.yaml:9:5: shares[1]: guest path /mnt/x is also used by a; expected one share per guest path".to_string(),
        ),
        (
            "shares:\n  - ''\n".to_string(),
            format!("m.yaml:7:1: shares[0]: bad share \"\": empty host directory {expected}"),
        ),
        (
            "overrides:\n  - accel: tcg\n  - suite: smoke\n    shares: [/srv:/harness/bin]\n".to_string(),
            format!("m.yaml:10:14: overrides[1].shares[0]: bad share \"/srv:/harness/bin\": guest path \"/harness/bin\" would hide what the guest needs (reserved: /proc, /sys, /dev, /tmp, /init, /harness, /harness/artifacts) {expected}"),
        ),
        (
            "shares: /srv\n".to_string(),
            "m.yaml:7:9: shares: invalid type: string \"/srv\", expected a sequence".to_string(),
        ),
        (
            "artifacts: maybe\n".to_string(),
            "m.yaml:7:12: artifacts: invalid type: string \"maybe\", expected a boolean".to_string(),
        ),
        (
            "overrides:\n  - {share: [a]}\n".to_string(),
            "m.yaml:8:6: overrides[0]: unknown field `share`, expected one of `kernel`, `topology`, `suite`, `accel`, `timeout_scale`, `cmdline`, `shares`, `artifacts`, `qemu_args`".to_string(),
        ),
    ]
    .into_iter()
    .map(|(tail, want)| (format!("{base}{tail}"), want))
    .collect()
}

#[test]
fn shares_apply_to_every_cell_overrides_replace_them_and_paths_are_relative_to_the_file() {
    let text = format!(
        "{HEAD}shares:
  - bins:/opt/bins:ro
  - /abs/data
overrides:
  - {{topology: two, shares: []}}
  - {{kernel: k616, topology: one, shares: [../other], artifacts: false}}
"
    );
    let m = matrix::parse_str(&text, Path::new("/srv/m/matrix.yaml")).unwrap();
    let by: BTreeMap<_, _> = m.cells.iter().map(|c| (c.name.as_str(), c)).collect();
    let shares = |n: &str| -> Vec<String> { by[n].shares.iter().map(|s| s.to_string()).collect() };
    assert_eq!(
        shares("k73/one/smoke"),
        ["/srv/m/bins:/opt/bins:ro", "/abs/data:/mnt/data:rw"]
    );
    assert!(by["k73/one/smoke"].artifacts);
    assert!(shares("k73/two/futex").is_empty() && by["k73/two/futex"].artifacts);
    assert_eq!(shares("k616/one/futex"), ["/srv/m/../other:/mnt/other:rw"]);
    assert!(!by["k616/one/futex"].artifacts);

    // Relative to the file's directory, whatever it is; lexical only (the
    // directories need not exist to list the cells).
    for (file, want) in [("m.yaml", "bins"), ("sub/m.yaml", "sub/bins")] {
        let m = matrix::parse_str(&text, Path::new(file)).unwrap();
        assert_eq!(m.cells[0].shares[0].host, PathBuf::from(want), "{file}");
    }

    // No key: no shares, artifacts on; `artifacts: false` at the top level.
    let m = parse(HEAD).unwrap();
    assert!(m.cells.iter().all(|c| c.shares.is_empty() && c.artifacts));
    let m = parse(&format!("{HEAD}artifacts: false\n")).unwrap();
    assert!(m.cells.iter().all(|c| !c.artifacts));

    // --list shows them; without any, the table is as before.
    let m = matrix::parse_str(&text, Path::new("/srv/m/matrix.yaml")).unwrap();
    let all: Vec<usize> = (0..m.cells.len()).collect();
    let list = plan::list_text(&m, &all, 1);
    let line = |name: &str| {
        list.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in\n{list}"))
            .to_string()
    };
    assert!(list.lines().next().unwrap().ends_with("  shares"), "{list}");
    assert!(
        line("k73/one/smoke").ends_with("  /srv/m/bins:/opt/bins:ro, /abs/data:/mnt/data:rw"),
        "{list}"
    );
    assert!(
        line("k616/one/futex").ends_with("  /srv/m/../other:/mnt/other:rw, no artifacts"),
        "{list}"
    );
    let plain_row = line("k73/two/smoke");
    assert_eq!(
        plain_row,
        plain_row.trim_end(),
        "no shares: nothing after expect"
    );
    let json = plan::list_json(&m, &all, 1);
    let cell = |name: &str| {
        json["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        cell("k73/one/smoke")["shares"],
        serde_json::json!(["/srv/m/bins:/opt/bins:ro", "/abs/data:/mnt/data:rw"])
    );
    assert_eq!(cell("k73/one/smoke")["artifacts"], true);
    assert_eq!(cell("k73/two/smoke")["shares"], serde_json::json!([]));
    assert_eq!(cell("k616/one/futex")["artifacts"], false);
    let plain = parse(HEAD).unwrap();
    let all: Vec<usize> = (0..plain.cells.len()).collect();
    let list = plan::list_text(&plain, &all, 1);
    assert!(
        list.lines().next().unwrap().ends_with("shard  expect"),
        "{list}"
    );
    assert!(!list.contains("shares"), "{list}");
}

#[test]
fn exclude_include_suites_and_overrides() {
    let text = format!(
        "{HEAD}suites:
  - name: quick
    tests:
      - {{bin: smoke, timeout: 30s}}
      - {{bin: futex-numa, name: numa, args: [--filter, wake]}}
  - name: smoke
    builtin: smoke
cells:
  suites: [quick]
  exclude:
    - {{kernel: k616, topology: two}}
  include:
    - {{kernel: 'k7*', suite: smoke}}
overrides:
  - {{topology: two, accel: tcg, timeout_scale: 2.5}}
  - {{kernel: k73, suite: smoke, cmdline: 'loglevel=8 quiet'}}
"
    );
    let m = parse(&text).unwrap();
    assert_eq!(
        names(&m),
        [
            "k73/one/quick",
            "k73/one/smoke",
            "k73/two/quick",
            "k73/two/smoke",
            "k616/one/quick"
        ]
    );
    let by: BTreeMap<_, _> = m.cells.iter().map(|c| (c.name.as_str(), c)).collect();
    assert_eq!(by["k73/two/quick"].accel, AccelChoice::Tcg);
    assert_eq!(by["k73/two/quick"].timeout_scale, 2.5);
    assert_eq!(by["k73/one/quick"].accel, AccelChoice::Auto);
    assert_eq!(by["k73/two/smoke"].cmdline, ["loglevel=8", "quiet"]);
    assert!(by["k73/one/quick"].cmdline.is_empty());
    let tests = m.suite_tests(by["k616/one/quick"]);
    let names: Vec<_> = tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["smoke", "numa"]);
    assert_eq!(tests[0].timeout.as_secs(), 30);
    assert_eq!(tests[1].args[..2], ["--filter", "wake"]);
    assert_eq!(tests[1].args[2], "--expect");
    assert!(tests[1].args[3].contains("private_hash=0"));
    // Filters.
    let f = plan::Filters {
        kernel: vec!["k73".into()],
        suite: vec!["quick,nothing".into()],
        ..Default::default()
    };
    let sel: Vec<_> = plan::select(&m, &f)
        .into_iter()
        .map(|i| m.cells[i].name.as_str())
        .collect();
    assert_eq!(sel, ["k73/one/quick", "k73/two/quick"]);
}

#[test]
fn topologies_take_explicit_nodes_distances_and_memoryless_nodes() {
    let text = "kernels:\n  - name: a\n    spec: debian:7.3\ntopologies:\n  - name: t\n    nodes:\n      - {cpus: 2, mem: 1G}\n      - {cpus: 2, mem: 0}\n      - {mem: 256M}\n    distances: [[10, 20, 30], [20, 10, 20], [30, 20, 10]]\n";
    let m = parse(text).unwrap();
    let t = &m.topologies[0].topology;
    assert_eq!(t.check_arg(), "0:0-1:1024M,1:2-3:0M,2::256M");
    assert_eq!(t.distances().unwrap()[0], vec![10, 20, 30]);
}

fn shard_matrix() -> Matrix {
    // Uneven costs: 1, 2, 4 and 8 vCPUs x smoke (1 test) and futex (5).
    let mut text = String::from("kernels:\n");
    for k in ["a", "b", "c"] {
        text.push_str(&format!("  - name: {k}\n    spec: debian:7.3\n"));
    }
    text.push_str("topologies:\n");
    for (n, cpus) in [("t1", 1), ("t2", 2), ("t4", 4), ("t8", 8)] {
        text.push_str(&format!(
            "  - name: {n}\n    nodes: [{{cpus: {cpus}, mem: 512M}}]\n"
        ));
    }
    parse(&text).unwrap()
}

#[test]
fn shards_cover_every_cell_exactly_once_and_balance_cost() {
    let m = shard_matrix();
    let all: Vec<usize> = (0..m.cells.len()).collect();
    let max_cost = m.cells.iter().map(|c| m.cost(c)).max().unwrap();
    for n in 1..=8 {
        let sh = plan::shards(&m, &all, n);
        assert_eq!(sh.len(), n);
        let mut seen: Vec<usize> = sh.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, all, "N={n}: every cell exactly once");
        let loads: Vec<u64> = sh
            .iter()
            .map(|s| s.iter().map(|&c| m.cost(&m.cells[c])).sum())
            .collect();
        let (lo, hi) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
        assert!(hi - lo <= max_cost, "N={n}: loads {loads:?}");
        // Deterministic.
        assert_eq!(sh, plan::shards(&m, &all, n));
        // The JSON listing agrees with the shards.
        let j = plan::list_json(&m, &all, n);
        for (i, s) in sh.iter().enumerate() {
            let listed: Vec<&str> = j["shards"][i]["cells"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            let want: Vec<&str> = s.iter().map(|&c| m.cells[c].name.as_str()).collect();
            assert_eq!(listed, want);
            assert_eq!(j["shards"][i]["shard"], format!("{}/{n}", i + 1));
        }
    }
    assert!(plan::parse_shard("0/2").is_err());
    assert!(plan::parse_shard("3/2").is_err());
    assert!(plan::parse_shard("2").is_err());
    assert_eq!(plan::parse_shard("2/8").unwrap(), (2, 8));
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/matrix")
        .join(name)
}

/// Every testsuite subtree, canonicalised: (name, attributes, and every
/// descendant element with its attributes and text).
fn suites(xml: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(xml).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|ts| {
            ts.descendants()
                .map(|n| {
                    let mut attrs: Vec<String> = n
                        .attributes()
                        .map(|a| format!("{}={:?}", a.name(), a.value()))
                        .collect();
                    attrs.sort();
                    format!("{}[{}]{:?}", n.tag_name().name(), attrs.join(" "), n.text())
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

#[test]
fn junit_merge_is_lossless() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.xml");
    let inputs = [fixture("shard1.xml"), fixture("shard2.xml")];
    report::merge(&out, &inputs).unwrap();
    let merged = std::fs::read_to_string(&out).unwrap();
    let mut want = Vec::new();
    for i in &inputs {
        want.extend(suites(&std::fs::read_to_string(i).unwrap()));
    }
    assert_eq!(suites(&merged), want);
    let doc = roxmltree::Document::parse(&merged).unwrap();
    let root = doc.root_element();
    assert_eq!(root.attribute("tests"), Some("5"));
    assert_eq!(root.attribute("failures"), Some("1"));
    assert_eq!(root.attribute("errors"), Some("1"));
    assert_eq!(root.attribute("skipped"), Some("1"));
    assert_eq!(root.attribute("time"), Some("15.500"));
    assert_eq!(
        root.attribute("timestamp"),
        Some("2026-05-01T09:59:00.000+00:00")
    );
    // Merging a merge changes nothing.
    let again = dir.path().join("again.xml");
    report::merge(&again, std::slice::from_ref(&out)).unwrap();
    assert_eq!(suites(&std::fs::read_to_string(&again).unwrap()), want);
    // What --rerun-failed would pick from it.
    let picked: Vec<String> = report::not_passed(&out).unwrap().into_iter().collect();
    assert_eq!(
        picked,
        [
            "debian-6.12/1n2c/smoke",
            "debian-7.3/1n2c/smoke",
            "debian-7.3/2n2c/smoke"
        ]
    );
    // Not JUnit: a clear error.
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, "<html/>").unwrap();
    let e = report::merge(&out, &[bad]).unwrap_err().to_string();
    assert!(e.contains("root element <html>"), "{e}");
}

fn e_of(m: &harness::matrix::Matrix, name: &str) -> String {
    m.kernels
        .iter()
        .find(|k| k.name == name)
        .unwrap()
        .expect
        .encode()
}

#[test]
fn the_default_matrix_is_valid_and_says_what_each_kernel_has() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../matrix.yaml");
    let m = matrix::load(&path).unwrap();
    let k: Vec<&str> = m.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        k,
        [
            "debian-6.12",
            "debian-6.16",
            "debian-6.17",
            "debian-6.18",
            "debian-7.0",
            "debian-7.3",
            "debian-7.3-arm64",
            "source-7.3",
            "source-7.3-arm64",
            "source-7.3-immutable",
            "source-7.3-debug",
            "source-7.3-hashfix"
        ]
    );
    assert_eq!(m.topologies.len(), 6);
    assert!(m.topologies.iter().any(|t| t.topology.offline() == 1));
    assert!(m.topologies.iter().any(|t| t.topology.cpus() >= 8));
    assert!(m
        .topologies
        .iter()
        .any(|t| t.topology.distances().is_some()));
    // Every kernel x the 4 small topologies x {smoke, futex}, plus Debian's
    // and the source-built 7.3 on 2n9c with our suite and upstream's, and
    // Debian's 7.x and the source-built 7.3 on 2n2c-1off with our suite,
    // and the race-fix build's futex suite on 2n4c and 2n9c; arm64's
    // Debian 7.3 on 1n2c, 2n2c and 2n4c and the source-built 7.3 on 2n2c,
    // with smoke and futex.
    assert_eq!(m.cells.len(), 9 * 4 * 2 + 2 * 2 + 3 + 2 + 4 * 2);
    let arm = m
        .kernels
        .iter()
        .find(|k| k.name == "debian-7.3-arm64")
        .unwrap();
    assert_eq!(arm.arch, harness::arch::Arch::Arm64);
    assert_eq!(arm.expect.encode(), e_of(&m, "debian-7.3"));
    let imm = m
        .kernels
        .iter()
        .find(|k| k.name == "source-7.3-immutable")
        .unwrap();
    assert!(imm.expect.immutable);
    let e = |n: &str| {
        m.kernels
            .iter()
            .find(|k| k.name == n)
            .unwrap()
            .expect
            .encode()
    };
    assert_eq!(
        e("debian-6.12"),
        // 6.12.95 has the backported requeue fix (measured).
        "prctl=0,private_hash=0,immutable=0,numa=0,mpol=0,growth=none,requeue_same_flags=1,robust_pending_owned=0,version=6.12"
    );
    assert_eq!(
        e("debian-6.16"),
        "prctl=1,private_hash=0,immutable=0,numa=1,mpol=1,growth=none,requeue_same_flags=0,robust_pending_owned=0,version=6.16"
    );
    assert_eq!(
        e("debian-6.17"),
        "prctl=1,private_hash=1,immutable=0,numa=1,mpol=1,growth=thread,requeue_same_flags=0,robust_pending_owned=0,version=6.17"
    );
    assert_eq!(
        e("debian-7.3"),
        "prctl=1,private_hash=1,immutable=0,numa=1,mpol=1,growth=any-vm,requeue_same_flags=1,robust_pending_owned=1,version=7.3"
    );
    // Built from source: no version in the spec, none to check.
    assert!(!e("source-7.3").contains("version="));
    // The one known failure of our suite excuses one message on 7.3 kernels.
    let futex = m.suites.iter().find(|s| s.name == "futex").unwrap();
    let k = futex
        .known_failures
        .iter()
        .find(|k| k.case == "futex-resize/set0-vs-thread-create")
        .unwrap();
    assert!(k.excuses(
        "futex-resize/set0-vs-thread-create",
        "round 17: racing SET 0: thread 1 failed to spawn: Device or resource busy (os error 16)",
        "tcg"
    ));
    assert!(!k.excuses(
        "futex-resize/set0-vs-thread-create",
        "round 3: GET after SET 0 raced thread creation: expected Ok(0), got Ok(16)",
        "tcg"
    ));
    let on: Vec<&str> = m
        .kernels
        .iter()
        .map(|k| k.name.as_str())
        .filter(|n| k.applies_to_kernel(n))
        .collect();
    // Every kernel with the private hash (on both architectures); not
    // 6.12, which has none, nor 6.16, where it is compiled out, nor the
    // build with our fix.
    assert_eq!(
        on,
        [
            "debian-6.17",
            "debian-6.18",
            "debian-7.0",
            "debian-7.3",
            "debian-7.3-arm64",
            "source-7.3",
            "source-7.3-arm64",
            "source-7.3-immutable",
            "source-7.3-debug"
        ]
    );
}
