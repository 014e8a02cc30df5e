//! `completions SHELL`: the shell's completion script, from the same definitions as `--help`.

use std::io::Write;

use crate::args::CompletionsArgs;
use crate::{Fail, Outcome, Verdict};

/// Prints the script on stdout; a closed stdout (`| head`) is no error.
pub fn run(args: &CompletionsArgs) -> Outcome {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut crate::args::command(), "slotpartner", &mut script);
    match std::io::stdout().write_all(&script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Fail(format!("cannot write the script: {e}"))),
        _ => Ok(Verdict::Good),
    }
}
