//! A file written whole or not at all, and never over another: a backup's or an export's. It is
//! written under a temporary name beside its destination (`NAME.partial-PID-N`, 0600: it holds
//! player identifiers and replies), flushed, then given the destination's name by a hard link,
//! which never replaces a file (where the file system has none, a rename after a last look).
//! Until then the temporary file is removed when the `NewFile` is dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, ErrorKind, Result};

/// Tells apart the temporary files written at once in one process.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The temporary file of a destination nothing holds yet. Owns the temporary file until `place`.
pub(crate) struct NewFile {
    dest: PathBuf,
    temp: PathBuf,
    /// The name of the caller's argument that named the destination, for errors (`dest`, `path`).
    field: &'static str,
    /// What is written (`backup`, `export`), for messages.
    what: &'static str,
    placed: bool,
}

impl NewFile {
    /// Checks `dest` (a file name that nothing holds yet) and creates the empty temporary file
    /// beside it, returned open for writing. Errors: `InvalidArgument` naming `field`.
    pub fn create(dest: &Path, field: &'static str, what: &'static str) -> Result<(NewFile, std::fs::File)> {
        use std::os::unix::fs::OpenOptionsExt;
        let refuse = |problem: String| Error::field(ErrorKind::InvalidArgument, field, problem);
        let Some(name) = dest.file_name().filter(|_| !dest.as_os_str().is_empty()) else {
            return Err(refuse(format!("{:?} names no file to write the {what} to", dest.display().to_string())));
        };
        let new = |temp| NewFile { dest: dest.to_owned(), temp, field, what, placed: false };
        if dest.symlink_metadata().is_ok() {
            return Err(new(PathBuf::new()).exists());
        }
        let folder = match dest.parent() {
            Some(folder) if !folder.as_os_str().is_empty() => folder,
            _ => Path::new("."),
        };
        let mut temp_name = name.to_owned();
        temp_name.push(format!(".partial-{}-{}", std::process::id(), SEQUENCE.fetch_add(1, Ordering::Relaxed)));
        let temp = folder.join(temp_name);
        let file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp).map_err(|e| {
            refuse(format!("cannot create {}: {e} (check that the folder exists and is writable)", temp.display()))
        })?;
        Ok((new(temp), file))
    }

    /// The temporary file.
    pub fn temp(&self) -> &Path {
        &self.temp
    }

    /// Flushes the temporary file and gives it the destination's name, unless something took the
    /// name meanwhile (then `InvalidArgument` naming the field, and the file is removed). The
    /// size in bytes. Errors: `InvalidArgument` naming the field when the file system fails.
    pub fn place(mut self) -> Result<u64> {
        let io = |what: &str, e: std::io::Error| {
            Error::field(ErrorKind::InvalidArgument, self.field, format!("cannot {what} {}: {e}", self.temp.display()))
        };
        let file = std::fs::File::open(&self.temp).map_err(|e| io("open", e))?;
        file.sync_all().map_err(|e| io("flush", e))?;
        let bytes = file.metadata().map_err(|e| io("read the size of", e))?.len();
        match std::fs::hard_link(&self.temp, &self.dest) {
            Ok(()) => {
                let _ = std::fs::remove_file(&self.temp);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(self.exists()),
            Err(_) if self.dest.symlink_metadata().is_ok() => return Err(self.exists()),
            Err(_) => std::fs::rename(&self.temp, &self.dest).map_err(|e| io("rename", e))?,
        }
        self.placed = true;
        // The new name survives a power loss too.
        if let Some(folder) = self.dest.parent().filter(|f| !f.as_os_str().is_empty()) {
            let _ = std::fs::File::open(folder).and_then(|f| f.sync_all());
        }
        Ok(bytes)
    }

    fn exists(&self) -> Error {
        Error::field(
            ErrorKind::InvalidArgument,
            self.field,
            format!(
                "{} exists; {} {} never replaces a file: name a new one, or remove it first",
                self.dest.display(),
                if self.what.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" },
                self.what
            ),
        )
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        if !self.placed && !self.temp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}
