//! The book's command-line reference pages (`docs/src/reference/<tool>.md`): a tool's clap
//! command rendered as its `--help` and every subcommand's `--help` print it, and the check
//! that a committed page is still what the command renders (each tool's `tests/tooling.rs`).

use std::path::{Path, PathBuf};

/// The width the pages are wrapped at: clap's own default when it cannot see a terminal.
const WIDTH: usize = 100;

/// Set to `1` to write the pages instead of checking them.
pub const WRITE_VAR: &str = "FAIRBENCH_WRITE_REFERENCE";

/// What regenerates every page.
pub const REGENERATE: &str =
    "FAIRBENCH_WRITE_REFERENCE=1 cargo test --workspace --test tooling reference_page";

/// The reference page of `command` (a tool's whole command line, as its `main` builds it):
/// one section per command, its `--help` text as the binary prints it in a terminal 100
/// columns wide. An environment variable's value is left out (`[env: NAME=]`, as with the
/// variable unset), so the page does not depend on the shell it was made in.
pub fn page(command: clap::Command) -> String {
    let mut command = fixed(command);
    command.build();
    let name = command.get_name().to_owned();
    let mut out = format!(
        "# {name}\n\n\
         <!-- Generated from {name}'s command line; do not edit. Regenerate with\n     \
         {REGENERATE} -->\n\n\
         What `{name} --help` prints, and the `--help` of each of its subcommands.\n"
    );
    section(&mut command, &name, &mut out);
    out
}

/// `command` and every subcommand below it wrapped at [`WIDTH`].
fn fixed(command: clap::Command) -> clap::Command {
    command.term_width(WIDTH).mut_subcommands(fixed)
}

/// `line` with the value of an `[env: NAME=VALUE]` left out, as the help prints it when the
/// variable is unset (`[env: NAME=]`).
fn without_env_value(line: &str) -> String {
    let Some(start) = line.find("[env: ") else {
        return line.to_owned();
    };
    let rest = &line[start..];
    match (rest.find('='), rest.find(']')) {
        (Some(eq), Some(end)) if eq < end => {
            format!("{}{}", &line[..start + eq + 1], &line[start + end..])
        }
        _ => line.to_owned(),
    }
}

fn section(command: &mut clap::Command, path: &str, out: &mut String) {
    let help = command.render_long_help().to_string();
    let help: Vec<String> = help
        .lines()
        .map(|line| without_env_value(line.trim_end()))
        .collect();
    out.push_str(&format!(
        "\n## `{path}`\n\n```text\n{}\n```\n",
        help.join("\n").trim_end()
    ));
    // In the order `--help` lists them (a subcommand given its examples afterwards is stored
    // last).
    let mut subs: Vec<&mut clap::Command> = command
        .get_subcommands_mut()
        .filter(|sub| sub.get_name() != "help" && !sub.is_hide_set())
        .collect();
    subs.sort_by_key(|sub| sub.get_display_order());
    for sub in subs {
        let path = format!("{path} {}", sub.get_name());
        section(sub, &path, out);
    }
}

/// Where `tool`'s page lives, from a crate of the workspace (`CARGO_MANIFEST_DIR`).
pub fn page_path(manifest_dir: &str, tool: &str) -> PathBuf {
    Path::new(manifest_dir)
        .join("..")
        .join("docs/src/reference")
        .join(format!("{tool}.md"))
}

/// Panics unless `command`'s committed page is what it renders now (or writes the page when
/// `FAIRBENCH_WRITE_REFERENCE=1`); `manifest_dir` is the calling crate's `CARGO_MANIFEST_DIR`.
pub fn assert_page(command: clap::Command, manifest_dir: &str) {
    let path = page_path(manifest_dir, command.get_name());
    if let Err(e) = check_or_write(command, &path) {
        panic!("{e}");
    }
}

/// Checks that the page at `path` is `command`'s page, or writes it when
/// `FAIRBENCH_WRITE_REFERENCE=1`. The error names the first line that differs and the command
/// that regenerates the pages.
pub fn check_or_write(command: clap::Command, path: &Path) -> Result<(), String> {
    let expected = page(command);
    if std::env::var(WRITE_VAR).as_deref() == Ok("1") {
        return std::fs::write(path, &expected)
            .map_err(|e| format!("cannot write {}: {e}", path.display()));
    }
    check(path, &expected)
}

/// Checks the page at `path` against `expected`.
fn check(path: &Path, expected: &str) -> Result<(), String> {
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if committed == expected {
        return Ok(());
    }
    let first = committed
        .lines()
        .zip(expected.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| committed.lines().count().min(expected.lines().count()));
    Err(format!(
        "{} is not what the command line renders now (first difference at line {}:\n  \
         committed: {:?}\n  rendered:  {:?}); regenerate every page with\n  {REGENERATE}",
        path.display(),
        first + 1,
        committed.lines().nth(first).unwrap_or("<end of file>"),
        expected.lines().nth(first).unwrap_or("<end of file>"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Tooling, command_with_tooling};
    use crate::options::CommonOpts;

    #[derive(clap::Parser, Debug)]
    #[command(name = "x-bench", about = "Measures x")]
    struct Opts {
        #[command(flatten)]
        common: CommonOpts,
    }

    #[test]
    fn a_page_holds_every_help_but_no_environment_value() {
        let page = page(command_with_tooling::<Opts>());
        assert!(page.starts_with("# x-bench\n"), "{page}");
        for name in ["compare", "report", "merge", "k8s-manifest"] {
            assert!(page.contains(&format!("\n## `x-bench {name}`\n")), "{name}");
            assert!(<Tooling as clap::Subcommand>::has_subcommand(name));
        }
        assert!(!page.contains("## `x-bench help`"), "{page}");
        assert!(page.contains("Usage: x-bench compare"), "{page}");
        assert!(page.contains("[env: FAIRBENCH_FORKS=]"), "{page}");
        assert!(page.lines().all(|l| l.chars().count() <= WIDTH), "{page}");
    }

    #[test]
    fn an_environment_value_is_left_out() {
        let line = "          [env: FAIRBENCH_FORKS=1]";
        assert_eq!(without_env_value(line), "          [env: FAIRBENCH_FORKS=]");
        let unset = "[env: JOB_COMPLETION_INDEX=]";
        assert_eq!(without_env_value(unset), unset);
        assert_eq!(without_env_value("no variable"), "no variable");
    }

    #[test]
    fn a_stale_page_names_the_line_and_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x-bench.md");
        let current = page(command_with_tooling::<Opts>());
        std::fs::write(&path, current.replace("Measures x", "Measures y")).unwrap();
        let err = check(&path, &current).unwrap_err();
        assert!(
            err.contains("Measures y") && err.contains(REGENERATE),
            "{err}"
        );
        std::fs::write(&path, &current).unwrap();
        check(&path, &current).unwrap();
    }
}
