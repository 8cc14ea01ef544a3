//! The command line's own documentation: every subcommand's `--help` ends
//! with examples, the ones that run a command name the variables they give
//! it, and the man pages generate with a page per subcommand. Walks the clap
//! definition, so a new subcommand without examples fails here. No etcd.

use std::process::Command;

/// What each subcommand that runs a command puts in its environment (the
/// variables run.rs, elect.rs and once.rs set).
const CHILD_ENV: &[(&str, &[&str])] = &[
    (
        "run",
        &[
            "ETCDLOCK_LOCK_NAME",
            "ETCDLOCK_FENCING_TOKEN",
            "ETCDLOCK_KEY",
            "ETCDLOCK_LEASE_ID",
        ],
    ),
    (
        "elect",
        &[
            "ETCDLOCK_LOCK_NAME",
            "ETCDLOCK_FENCING_TOKEN",
            "ETCDLOCK_KEY",
            "ETCDLOCK_LEASE_ID",
        ],
    ),
    ("once", &["ETCDLOCK_LOCK_NAME", "ETCDLOCK_FENCING_TOKEN"]),
];

/// The subcommands `etcdlock --help` lists (hidden ones are internal).
fn subcommands() -> Vec<clap::Command> {
    etcdlock_cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect()
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_etcdlock"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_subcommand_help_ends_with_examples() {
    let subs = subcommands();
    assert!(subs.len() >= 11, "{} subcommands", subs.len());
    for sub in &subs {
        let name = sub.get_name();
        for flag in ["--help", "-h"] {
            let text = help(&[name, flag]);
            let at = text
                .rfind("\nExamples:\n")
                .unwrap_or_else(|| panic!("`etcdlock {name} {flag}` has no Examples:\n{text}"));
            // Examples: commands, and comment lines that say what they do.
            let examples: Vec<&str> = text[at..].lines().skip(2).collect();
            assert!(
                !examples.is_empty()
                    && examples.iter().all(|l| {
                        let l = l.trim_start();
                        l.starts_with("etcdlock ")
                            || l.starts_with("cargo run")
                            || l.starts_with("# ")
                    })
                    && examples
                        .iter()
                        .any(|l| l.contains(&format!("etcdlock {name}"))
                            || l.contains(&format!("-- {name}"))),
                "`etcdlock {name} {flag}` must end with examples of itself:\n{text}"
            );
        }
    }
}

#[test]
fn commands_that_run_a_child_name_its_environment() {
    let mut runners = Vec::new();
    for sub in subcommands() {
        // A subcommand runs a command when it takes one after `--`.
        if !sub.get_arguments().any(|a| a.is_last_set()) {
            continue;
        }
        let name = sub.get_name().to_string();
        let vars = CHILD_ENV
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("`{name}` runs a command: list what it sets in CHILD_ENV"))
            .1;
        let text = help(&[&name, "--help"]);
        let env_at = text
            .find("The command's environment gets")
            .unwrap_or_else(|| panic!("`etcdlock {name} --help` names no variables:\n{text}"));
        assert!(
            env_at < text.rfind("Examples:").unwrap(),
            "{name}: variables, then examples"
        );
        for v in vars {
            assert!(
                text[env_at..].contains(v),
                "`etcdlock {name} --help` does not name {v}:\n{text}"
            );
        }
        // Exactly those: a variable named but not set misleads as much.
        let named = text[env_at..]
            .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
            .filter(|w| w.starts_with("ETCDLOCK_"))
            .count();
        assert_eq!(named, vars.len(), "{name}: {text}");
        runners.push(name);
    }
    runners.sort();
    let mut listed: Vec<String> = CHILD_ENV.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(runners, listed);
}

#[test]
fn man_pages_generate_one_per_subcommand() {
    let dir = std::env::temp_dir().join(format!("etcdlock-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = etcdlock_cli::write_man_pages(&dir).unwrap();
    let subs = subcommands();
    assert_eq!(files.len(), subs.len() + 1);
    let top = std::fs::read_to_string(dir.join("etcdlock.1")).unwrap();
    assert!(top.contains(".TH etcdlock 1"), "{top}");
    for sub in &subs {
        let name = sub.get_name();
        assert!(
            top.contains(&format!("etcdlock\\-{name}(1)")),
            "etcdlock.1 does not mention {name}"
        );
        let page = std::fs::read_to_string(dir.join(format!("etcdlock-{name}.1")))
            .unwrap_or_else(|e| panic!("etcdlock-{name}.1: {e}"));
        assert!(
            page.contains(&format!(".TH etcdlock-{name} 1")) && page.contains("Examples:"),
            "etcdlock-{name}.1:\n{page}"
        );
    }
    for f in &files {
        assert!(f.exists(), "{}", f.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
