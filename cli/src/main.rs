//! `slotpartner`, the operator command of the slotpartner library: what the delivery journal
//! holds (`journal status`, `journal gaps`, `journal show`) and the operator's decisions about it
//! (`journal resolve`, `conflicts`, `jumps`, `renumber`, ...), a copy of a live SQLite journal
//! (`journal backup`), retention (`journal prune`), recovery of lost events through the
//! partner's own callback endpoint (`recover`), the journal's state for Prometheus (`metrics`,
//! `journal status --prometheus`), a body read with the library's validation (`inspect`), the
//! service's games (`games`), and the command's own shell completions and man pages
//! (`completions`, the hidden `man`).
//!
//! Exit statuses, the same for every command: 0 the answer is good news, 1 the answer is bad
//! news (the journal needs attention: indexes missing, deliveries unfinished, conflicts or index
//! jumps open; an invalid body, nothing found), 2 the command could not answer (usage,
//! configuration, an unreachable journal or service, another recovery running). Errors are one
//! line on stderr.

mod args;
mod check;
mod completions;
mod config;
mod endpoint;
mod games;
mod inspect;
mod journal;
mod journal_admin;
mod journal_backup;
mod journal_export;
mod journal_prune;
mod man;
mod metrics;
mod output;
mod recover;

use std::io::Write;
use std::process::ExitCode;

use clap::FromArgMatches;

use args::{Cli, Command, JournalCommand};

/// What a command says about its answer: 0 good news, 1 bad news.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Good,
    Bad,
}

impl Verdict {
    pub fn bad_if(bad: bool) -> Verdict {
        if bad { Verdict::Bad } else { Verdict::Good }
    }
}

/// Why a command could not answer (exit status 2): one line, without the `slotpartner: ` prefix.
#[derive(Debug)]
pub struct Fail(pub String);

impl From<slotpartner::Error> for Fail {
    /// The library's message, its TLS advice in the command's terms.
    fn from(error: slotpartner::Error) -> Self {
        Fail(endpoint::library_error_text(&error))
    }
}

pub type Outcome = Result<Verdict, Fail>;

fn main() -> ExitCode {
    let mut command = args::command();
    let cli = match command.try_get_matches_from_mut(std::env::args_os()).and_then(|matches| {
        let (subcommand, ignored) = args::ignored_options(&command, &matches);
        for option in ignored {
            eprintln!("slotpartner: note: `{subcommand}` does not use {option}: ignored");
        }
        Cli::from_arg_matches(&matches)
    }) {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
    let outcome = match cli.command {
        Command::Journal { command } => match command {
            JournalCommand::Status(a) => journal::status(&a),
            JournalCommand::Gaps(a) => journal::gaps(&a),
            JournalCommand::Show(a) => journal::show(&a),
            JournalCommand::Prune(a) => journal_prune::prune(&a),
            JournalCommand::Export(a) => journal_export::run(&a),
            JournalCommand::Resolve(a) => journal_admin::resolve(&a),
            JournalCommand::Resolutions(a) => journal_admin::resolutions(&a),
            JournalCommand::Conflicts(a) => journal_admin::conflicts(&a),
            JournalCommand::ResolveConflict(a) => journal_admin::resolve_conflict(&a),
            JournalCommand::CloseUnfinished(a) => journal_admin::close_unfinished(&a),
            JournalCommand::Jumps(a) => journal_admin::jumps(&a),
            JournalCommand::AcceptJump(a) => journal_admin::accept_jump(&a),
            JournalCommand::JumpIsGap(a) => journal_admin::jump_is_gap(&a),
            JournalCommand::Renumber(a) => journal_admin::renumber(&a),
            JournalCommand::Backup(a) => journal_backup::backup(&a),
            JournalCommand::Create(a) => journal::create(&a),
        },
        Command::Check(a) => check::run(&a),
        Command::Recover(a) => recover::run(&a),
        Command::Metrics(a) => metrics::serve(&a),
        Command::Inspect(a) => inspect::run(&a),
        Command::Games(a) => games::run(&a),
        Command::Completions(a) => completions::run(&a),
        Command::Man(a) => man::run(&a),
    };
    // A closed stdout (`| head`) is not worth a message; flush what is left.
    let _ = std::io::stdout().flush();
    match outcome {
        Ok(Verdict::Good) => ExitCode::SUCCESS,
        Ok(Verdict::Bad) => ExitCode::from(1),
        Err(Fail(message)) => {
            eprintln!("slotpartner: {}", one_line(&message));
            ExitCode::from(2)
        }
    }
}

/// `--help` and `--version` print as usual (exit 0); every other argument error is one line
/// naming the problem, clap's tips (`a similar subcommand exists: 'journal'`) and where to read
/// more (exit 2).
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = error.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            ExitCode::from(2)
        }
        _ => {
            // The problem is the first paragraph of clap's message (a list of missing arguments
            // follows its line on indented lines), then its tips; the usage is left out.
            let rendered = error.render().to_string();
            let paragraph: Vec<&str> = rendered
                .lines()
                .skip_while(|l| l.trim().is_empty())
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let problem = paragraph.join(" ");
            let problem = problem.strip_prefix("error: ").unwrap_or(&problem);
            let tips: String =
                rendered.lines().filter_map(|l| l.trim().strip_prefix("tip: ")).map(|tip| format!("{tip}; ")).collect();
            eprintln!("slotpartner: {} ({tips}see '{} --help')", one_line(problem), command_path());
            ExitCode::from(2)
        }
    }
}

/// The subcommand the arguments name (`slotpartner journal show`), for the pointer to its help.
fn command_path() -> String {
    let mut command = args::command();
    let mut path = vec![command.get_name().to_owned()];
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let Some(arg) = arg.to_str() else { break };
        // A shared option may stand before the subcommand: its value (unless after `=`) too.
        if let Some(long) = arg.strip_prefix("--") {
            if command.get_arguments().any(|a| a.get_long() == Some(long) && a.get_action().takes_values()) {
                args.next();
            }
            continue;
        }
        match command.find_subcommand(arg) {
            Some(sub) => {
                path.push(sub.get_name().to_owned());
                let sub = sub.clone();
                command = sub;
            }
            None if arg.starts_with('-') => continue,
            None => break,
        }
    }
    path.join(" ")
}

/// A message as one line: line breaks and other control characters become spaces.
pub fn one_line(text: &str) -> String {
    let mapped: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}
