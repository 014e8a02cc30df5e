//! `man --out DIR`: the man pages, from the same definitions as `--help`: `slotpartner.1` and
//! one page per subcommand (`slotpartner-journal-status.1`, ...), hidden ones left out.

use std::path::Path;

use crate::args::ManArgs;
use crate::{Fail, Outcome, Verdict};

/// Writes every page into `--out` (made when missing); prints nothing.
pub fn run(args: &ManArgs) -> Outcome {
    let dir = &args.out;
    std::fs::create_dir_all(dir)
        .map_err(|e| Fail(format!("--out: cannot make the directory {}: {e}", dir.display())))?;
    let mut command = crate::args::command();
    // Built once, so that each subcommand is named by its path (`slotpartner-journal-status`).
    command.build();
    write_pages(&command, dir)?;
    Ok(Verdict::Good)
}

/// The page of `command`, then those of its visible subcommands, at any depth.
fn write_pages(command: &clap::Command, dir: &Path) -> Result<(), Fail> {
    let man = clap_mangen::Man::new(command.clone())
        .source(concat!("slotpartner ", env!("CARGO_PKG_VERSION")))
        .manual("slotpartner manual");
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page).map_err(|e| Fail(format!("cannot render {}: {e}", path.display())))?;
    std::fs::write(&path, page).map_err(|e| Fail(format!("--out: cannot write {}: {e}", path.display())))?;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    Ok(())
}
