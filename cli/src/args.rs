//! The command line: subcommands, options, their environment variables and help texts.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, Args, CommandFactory, Parser, Subcommand};
use slotpartner::JournalOptions;

/// The exit statuses, the same for every command.
macro_rules! exit_status {
    () => {
        "\
Exit status: 0 good news (nothing needs attention, a valid body, found, done), 1 bad news
(indexes missing, deliveries unfinished, conflicts or index jumps open, an invalid body,
nothing found), 2 the command could not answer (usage, configuration, journal or service
unreachable, another recovery running). Errors are one line on stderr."
    };
}

const EXIT_STATUS: &str = exit_status!();

const ABOUT: &str = "The operator command of the slotpartner library: the delivery journal, recovery of lost events, callback bodies and games";

const MAIN_HELP: &str = concat!(
    "\
The options above are shared by several commands: each may stand before or after the
subcommand (`slotpartner --journal URL journal status`); a command that does not use one
ignores it, and its own --help lists those it uses.

Environment (an option given on the command line wins):
  SLOTPARTNER_JOURNAL            the journal URL: sqlite:PATH or postgres://USER@HOST/DATABASE
  SLOTPARTNER_BASE_URL           the service's base URL (https://...), for recover and games
  SLOTPARTNER_TOKEN              the partner token (a UUID)
  SLOTPARTNER_CA_FILE            extra CA certificates (PEM) to trust for the service
  SLOTPARTNER_CALLBACK_URL       recover's target: your own callback endpoint
  SLOTPARTNER_CALLBACK_CA_FILE   extra CA certificates (PEM) to trust for that endpoint
  SLOTPARTNER_INDEX_FIELD        the event index field's name (default index)
  SLOTPARTNER_MAX_INDEX_JUMP     the journal's largest index step still counted as a gap
  SLOTPARTNER_NOT_FOUND_LIMIT    recoveries answered 404 before an index is unrecoverable
  SLOTPARTNER_MAX_TIME           how long one recover run may take (default 300s)
  SLOTPARTNER_MIN_AGE            how old a gap is before recover fetches it (default 1m)

Examples:
  slotpartner journal status --journal sqlite:/var/lib/partner/journal.db
  slotpartner journal gaps || alert 'lost events'
  slotpartner journal show 900002
  slotpartner journal export --since 2026-10-01 --until 2026-11-01 --output october.csv
  slotpartner journal resolve 3-4 --note 'the service confirms no events 3 and 4'
  slotpartner journal backup /var/backups/partner/journal-2024-06-11.db
  slotpartner journal prune --older-than 90d
  slotpartner check --callback-url https://127.0.0.1:8443/callback --callback-ca-file endpoint-ca.pem
  slotpartner recover --callback-url https://127.0.0.1:8443/callback
  slotpartner metrics --listen 127.0.0.1:9464
  slotpartner inspect body.json
  slotpartner games en-US
  slotpartner completions bash > /usr/share/bash-completion/completions/slotpartner

",
    exit_status!()
);

#[derive(Debug, Parser)]
#[command(name = "slotpartner", version, about = ABOUT, after_help = MAIN_HELP, propagate_version = true)]
#[command(arg_required_else_help = true, disable_help_subcommand = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The command line as parsed, completed and documented: `Cli`'s, where every option a
/// subcommand marks `global` (an option several subcommands share: the journal, the service,
/// the callback endpoint, the index field) is accepted anywhere on the line, before or after
/// the subcommand. The top level takes a copy of each (without its variable: the subcommand
/// that uses it reads that, so a variable is read where it matters only); a subcommand that does
/// not use one accepts it hidden and ignores it, so that its `--help` lists only what it uses.
/// A new, unbuilt command each call, owned by the caller.
pub fn command() -> clap::Command {
    let mut shared = Vec::new();
    let cli = Cli::command();
    shared_options(&cli, &mut shared);
    let top: Vec<Arg> = shared.iter().map(|arg| arg.clone().env(None::<&str>)).collect();
    with_hidden(cli.args(top), &shared)
}

/// The shared options given on the command line to a subcommand that does not use them: the
/// hidden copies [`command`] gave it (`command` is what parsed `matches`). The subcommand's
/// path (`journal gaps`) and each such option's `--name`, for a note on stderr. An option given
/// before the subcommand counts as given to it.
pub fn ignored_options(command: &clap::Command, matches: &clap::ArgMatches) -> (String, Vec<String>) {
    let (mut leaf_command, mut leaf) = (command, matches);
    let mut path = Vec::new();
    while let Some((name, sub)) = leaf.subcommand() {
        let Some(next) = leaf_command.find_subcommand(name) else { break };
        path.push(name.to_owned());
        (leaf_command, leaf) = (next, sub);
    }
    let ignored = leaf_command
        .get_arguments()
        .filter(|arg| arg.is_global_set() && arg.is_hide_set())
        .filter(|arg| leaf.value_source(arg.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .filter_map(|arg| arg.get_long().map(|long| format!("--{long}")))
        .collect();
    (path.join(" "), ignored)
}

/// Every option marked `global` in the subcommands of `command`, once each (the first definition).
fn shared_options(command: &clap::Command, shared: &mut Vec<Arg>) {
    for sub in command.get_subcommands() {
        for arg in sub.get_arguments().filter(|a| a.is_global_set()) {
            if !shared.iter().any(|s| s.get_id() == arg.get_id()) {
                shared.push(arg.clone());
            }
        }
        shared_options(sub, shared);
    }
}

/// `command` with each subcommand (at any depth) given a hidden copy of the shared options it
/// does not define itself.
fn with_hidden(mut command: clap::Command, shared: &[Arg]) -> clap::Command {
    let names: Vec<String> = command.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    for name in names {
        command = command.mut_subcommand(name, |sub| {
            let missing: Vec<Arg> = shared
                .iter()
                .filter(|arg| !sub.get_arguments().any(|own| own.get_id() == arg.get_id()))
                .map(|arg| arg.clone().env(None::<&str>).hide(true))
                .collect();
            with_hidden(sub.args(missing), shared)
        });
    }
    command
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What the delivery journal holds, and the operator's decisions about it
    #[command(arg_required_else_help = true, after_help = EXIT_STATUS)]
    Journal {
        #[command(subcommand)]
        command: JournalCommand,
    },
    /// Whether everything is wired: your callback endpoint (one balance query), the journal, the service, the clocks
    #[command(after_help = crate::check::CHECK_HELP)]
    Check(crate::check::CheckArgs),
    /// Fetch every missing event from the service and deliver it to your own callback endpoint
    #[command(after_help = RECOVER_HELP)]
    Recover(RecoverArgs),
    /// Serve the journal's state to Prometheus over HTTP (GET /metrics)
    #[command(after_help = METRICS_HELP)]
    Metrics(MetricsArgs),
    /// Read a callback body with the library's validation: every field, or the exact error
    #[command(after_help = INSPECT_HELP)]
    Inspect(InspectArgs),
    /// The service's games in a locale (getGames), as a table or JSON
    #[command(after_help = GAMES_HELP)]
    Games(GamesArgs),
    /// Print the completion script of a shell (bash, zsh, fish) on stdout
    #[command(after_help = COMPLETIONS_HELP)]
    Completions(CompletionsArgs),
    /// Write the man pages: slotpartner.1 and one per subcommand (slotpartner-journal-status.1, ...)
    #[command(hide = true)]
    Man(ManArgs),
}

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Counts by state, first and highest index, watermark, missing, unfinished, open conflicts and index jumps
    #[command(after_help = STATUS_HELP)]
    Status(StatusArgs),
    /// The missing indexes as ranges, one per line (`3`, `6-8`), then what else needs a look
    #[command(after_help = GAPS_HELP)]
    Gaps(GapsArgs),
    /// Every record the journal holds for a transactionId (or an index: --index N), and its open conflicts
    #[command(after_help = SHOW_HELP)]
    Show(ShowArgs),
    /// The deliveries of a period as CSV or JSON Lines, for reconciliation with the service's reports
    #[command(after_help = EXPORT_HELP)]
    Export(ExportArgs),
    /// Compact the deliveries older than a retention, in small batches, and give the space back
    #[command(after_help = PRUNE_HELP)]
    Prune(PruneArgs),
    /// Close missing indexes by hand (events that do not exist or were settled another way)
    #[command(after_help = RESOLVE_HELP)]
    Resolve(ResolveArgs),
    /// The ranges closed by hand, newest first, with their notes
    #[command(after_help = RESOLUTIONS_HELP)]
    Resolutions(ResolutionsArgs),
    /// Deliveries whose key came before with other content: both contents and the fields that differ
    #[command(after_help = CONFLICTS_HELP)]
    Conflicts(ConflictsArgs),
    /// Mark an open conflict resolved, with a note kept for audit
    #[command(after_help = RESOLVE_CONFLICT_HELP)]
    ResolveConflict(DecideArgs),
    /// Index jumps, reused indexes and renumberings: index, kind, event, time, previous highest
    #[command(after_help = JUMPS_HELP)]
    Jumps(JumpsArgs),
    /// Accept an open index jump or reused index: the numbering really moved
    #[command(after_help = ACCEPT_JUMP_HELP)]
    AcceptJump(DecideArgs),
    /// Declare an open index jump a gap: the stretch before it counts as missing, for recovery
    #[command(after_help = JUMP_IS_GAP_HELP)]
    JumpIsGap(DecideArgs),
    /// Start a new numbering after the service restarted its indexes
    #[command(after_help = RENUMBER_HELP)]
    Renumber(RenumberArgs),
    /// Close the unfinished deliveries at an index by hand, with a note kept for audit
    #[command(after_help = CLOSE_UNFINISHED_HELP)]
    CloseUnfinished(DecideArgs),
    /// Copy a SQLite journal into a new file while the workers go on writing
    #[command(after_help = BACKUP_HELP)]
    Backup(BackupArgs),
    /// Create the journal's tables (or bring an older journal to this release's schema) and exit
    #[command(after_help = CREATE_HELP)]
    Create(CreateArgs),
}

const CREATE_HELP: &str = "\
Creates the delivery journal at the URL, as an endpoint's first delivery would (a SQLite file
with mode 0600, or the tables in a PostgreSQL database), and exits; a journal there already is
left as it is (an older one is brought to this release's schema). For the ledger a partner
keeps in the journal's own database (the credit staged with the reply): create the journal
first, then the ledger's table in it. A SQLite file that holds other tables and no journal is
refused, so that the journal never writes into another program's database.

Examples:
  slotpartner journal create --journal sqlite:/var/lib/partner/journal.db
  sqlite3 /var/lib/partner/journal.db 'CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))'

Exit status: 0 when the journal is there, 2 when it is not (the URL refused, the database
unreachable, another program's file).";

/// The journal to create.
#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub journal: JournalOpt,
}

const BACKUP_HELP: &str = "\
Copies the journal with SQLite's online backup API while every worker goes on writing (none is
held up): the copy holds every delivery committed when the backup started, is written beside
FILE (mode 0600, as the journal) and takes the name FILE only once complete, so a failed or
interrupted backup never leaves a half copy. FILE must not exist: a backup never replaces a
file. The copy is a journal of its own: `journal status --journal sqlite:FILE` reads it.

To restore: stop every worker, remove the journal's `-wal` and `-shm` files, move the copy into
the journal's place (give it the journal's owner, group and mode), start the workers. What came
after the backup is not in the copy: recovery fetches those indexes again, and the ledger's
unique transactionId answers any already credited.

A PostgreSQL journal is backed up with PostgreSQL's own tools: the command refuses it and
names the pg_dump command (see docs/operating.md, \"Backup and restore\").

Examples:
  slotpartner journal backup /var/backups/partner/journal-2024-06-11.db
  slotpartner journal backup journal-copy.db --journal sqlite:/var/lib/partner/journal.db --json
  15 3 * * * . /etc/slotpartner.env && slotpartner journal backup /var/backups/partner/journal-$(date +\\%F).db > /dev/null || alert \"slotpartner: journal backup failed\"

Exit status: 0 when the copy is in place, 2 when there is none (FILE exists or cannot be
created, a PostgreSQL journal, the journal unreadable, the disk full).";

/// Where to write a backup.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The new file to write the copy to (it must not exist)
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print one JSON object instead of a line
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const CLOSE_UNFINISHED_HELP: &str = "\
An unfinished delivery (abandoned, or whose worker died) stored no reply: recovery fetches its
index again, and `journal status`, `journal gaps` and `recover` exit 1 while it stays. When the
service answers 404 for it run after run (it is then listed as unrecoverable), or it was settled
another way, or it belongs to an earlier numbering, close it here: it is no longer counted nor
fetched; should the service deliver it again, it runs as its next attempt. ID is the index.

Examples:
  slotpartner journal close-unfinished 5 --note 'refund 900005 paid by hand, ticket 4711'

Exit status: 0 when deliveries were closed, 2 when none could be (no note, no unfinished
delivery at this index, the journal unreachable).";

/// The journal to read.
#[derive(Debug, Args)]
#[command(next_help_heading = "Journal")]
pub struct JournalOpt {
    /// The delivery journal: sqlite:PATH (an existing file) or postgres://USER@HOST/DATABASE
    #[arg(long, global = true, value_name = "URL", env = "SLOTPARTNER_JOURNAL", hide_env_values = true)]
    pub journal: Option<String>,
    /// How far beyond the highest index seen an index may land and still open a gap; beyond it,
    /// an index jump for the operator to decide (set it as your endpoint does)
    #[arg(
        long,
        global = true,
        value_name = "N",
        env = "SLOTPARTNER_MAX_INDEX_JUMP",
        hide_env_values = true,
        default_value_t = JournalOptions::default().max_index_jump,
        value_parser = clap::value_parser!(i64).range(1..)
    )]
    pub max_index_jump: i64,
    /// Recovery runs answered HTTP 404 for an index before it is unrecoverable (no longer fetched)
    #[arg(
        long,
        global = true,
        value_name = "N",
        env = "SLOTPARTNER_NOT_FOUND_LIMIT",
        hide_env_values = true,
        default_value_t = JournalOptions::default().not_found_limit,
        value_parser = clap::value_parser!(u32).range(1..=1000)
    )]
    pub not_found_limit: u32,
}

/// How to reach the service's action address.
#[derive(Debug, Args)]
#[command(next_help_heading = "Service")]
pub struct ServiceOpts {
    /// The service's base URL (https://...); actions go to {base_url}/rest/action
    #[arg(long, global = true, value_name = "URL", env = "SLOTPARTNER_BASE_URL", hide_env_values = true)]
    pub base_url: Option<String>,
    /// The partner token (a UUID), sent as X-Service-Token
    #[arg(long, global = true, value_name = "UUID", env = "SLOTPARTNER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Also trust the CA certificates in this PEM file for the service
    #[arg(long, global = true, value_name = "PEM", env = "SLOTPARTNER_CA_FILE", hide_env_values = true)]
    pub ca_file: Option<PathBuf>,
    /// Time allowed for one call to the service (and one delivery to the endpoint), answer included, in seconds
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 15.0)]
    pub timeout: f64,
    /// Times a call is tried again after no connection, a time-out or a 5xx answer
    #[arg(long, global = true, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=10))]
    pub retries: u32,
}

const STATUS_HELP: &str = "\
Besides the counts: unfinished (deliveries claimed and never finished: abandoned, or their
worker died), open conflicts (`journal conflicts`), open index jumps (`journal jumps`), indexes
resolved by hand (`journal resolutions`), unrecoverable indexes (404 for --not-found-limit
recovery runs), and the numbering (1 until `journal renumber`). Then the journal's upkeep: its
size, pruned and forgotten deliveries (`journal prune`), when the oldest stored reply was
finished, when a new index was last seen, and since when the oldest gap is missing.

--prometheus prints the same as Prometheus text exposition format 0.0.4 (see `slotpartner
metrics`), for node_exporter's textfile collector; when the journal cannot be read it prints
`slotpartner_journal_up 0` alone (the error on stderr and in a `#` line), so that the alert on
it fires.

Examples:
  slotpartner journal status --journal sqlite:/var/lib/partner/journal.db
  SLOTPARTNER_JOURNAL=postgres://partner@db/partner slotpartner journal status --json
  * * * * * . /etc/slotpartner.env && slotpartner journal status --prometheus > /var/lib/prometheus/node-exporter/slotpartner.prom.tmp && mv /var/lib/prometheus/node-exporter/slotpartner.prom.tmp /var/lib/prometheus/node-exporter/slotpartner.prom

Exit status: 0 when nothing needs attention, 1 when indexes are missing, deliveries unfinished,
or conflicts or index jumps open, 2 when the journal could not be read (usage, configuration,
storage). With --prometheus: 0 whenever the exposition was printed (the state is in its
samples, `slotpartner_journal_up 0` included), 2 on usage errors.";

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
    /// Print Prometheus text exposition format (0.0.4) instead of lines
    #[arg(long, conflicts_with = "json")]
    pub prometheus: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const GAPS_HELP: &str = "\
The missing ranges come first, one per line; then labelled lines name what else needs a look or
was decided: `unrecoverable: 5-6` (answered 404 for --not-found-limit recovery runs, no longer
fetched: resolve them by hand), `unfinished: 9` (claimed, never finished: recover fetches them),
`jump: id=2 ...` (each open index jump), `conflicts: 1 open`, `resolved: id=1 range=3-4 ...`
(ranges closed by hand in this numbering).

--older-than DURATION lists only the gaps found missing at least that long ago (an index above
them was first seen then): a younger gap is usually an event still on its way (reordering, the
service's own retry). A note on stderr counts the younger missing indexes left out.

Examples:
  slotpartner journal gaps --journal sqlite:/var/lib/partner/journal.db
  */10 * * * * . /etc/slotpartner.env && slotpartner journal gaps --older-than 10m > /dev/null || alert \"slotpartner: lost events\"

Exit status: 0 when nothing needs attention, 1 when indexes are missing (with --older-than:
found missing at least that long ago), deliveries unfinished, or conflicts or index jumps open,
2 when the journal could not be read.";

#[derive(Debug, Args)]
pub struct GapsArgs {
    /// Print at most this many ranges (a note on stderr says when more exist)
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limit: u64,
    /// Only the gaps found missing at least this long ago (10m, 1h, 2d; a plain number is seconds)
    #[arg(long, value_name = "DURATION", value_parser = parse_age)]
    pub older_than: Option<Duration>,
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const PRUNE_HELP: &str = "\
Retention: a finished delivery whose reply is older than --older-than (at least 1d: the service
resends a delivery for far less) is compacted: its reply and content go, a digest of its decisive
content and the reply's outcome stay, so that a repeat is still never run silently (`journal
show` lists it as `pruned`). Deliveries refused by validation and resolved conflicts older than
that go too. --forget-older-than (longer than --older-than) also removes compact records older
than it: a repeat of one is then a new delivery, and only your ledger knows it. Never removed:
unfinished deliveries, deliveries with an open conflict, the seen indexes (no gap opens or
closes), open index jumps and open conflicts.

The work goes in batches of --batch rows, each its own short transaction, 10 ms apart, so that
workers keep delivering meanwhile (the longest batch is what a delivery may have waited); then a
SQLite journal gives the freed pages back to the file system. Prints what was removed, the
batches, the longest batch and the bytes given back (--json: one object).

Examples:
  slotpartner journal prune --older-than 90d
  slotpartner journal prune --older-than 90d --forget-older-than 3650d --max-time 10m --json
  30 4 * * * . /etc/slotpartner.env && slotpartner journal prune --older-than 90d --max-time 30m > /dev/null || alert \"slotpartner: pruning left work\"

An export running (`journal export`) stops it too: a delivery compacted under the export's pages
would be listed twice; the message names the export.

Exit status: 0 when nothing eligible is left, 1 when --max-time or an export running stopped it
first (more is left for the next run), 2 when it could not run (usage, a retention under a day,
the journal unreachable or failing; what earlier batches removed stays removed).";

/// What to prune.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Compact finished deliveries older than this (at least 1d: 90d, 2160h)
    #[arg(long, value_name = "DURATION", value_parser = parse_retention)]
    pub older_than: Duration,
    /// Also remove compact records older than this (longer than --older-than) [default: keep them]
    #[arg(long, value_name = "DURATION", value_parser = parse_retention)]
    pub forget_older_than: Option<Duration>,
    /// Rows per transaction
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub batch: u64,
    /// Stop after this long, whatever is left (10m, 1h) [default: until done]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub max_time: Option<Duration>,
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const SHOW_HELP: &str = "\
TRANSACTION_ID shows the records of a refund's or payout's transactionId; --index N those of the
deliveries that carried the event index N (an index and a transactionId are both integers, so
the option says which is meant: nothing is guessed). Give one of the two.

Examples:
  slotpartner journal show 900002
  slotpartner journal show 900002 --json | jq '.[].reply'
  slotpartner journal show --index 17

Times are RFC 3339 in UTC. A refund and a payout may share a transactionId: each has its record.
Open conflicts follow their records (`--json`: each record's open_conflicts). With --index, a
delivery that carries no transactionId (an event other than a refund or payout) shows its key,
event, index and state only (`--json`: null for the rest); a delivery refused by validation is
found by its transactionId only.

Exit status: 0 when a record was found, 1 when the journal holds nothing for it, 2 when the
journal could not be read.";

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The refund's or payout's transactionId
    #[arg(
        value_name = "TRANSACTION_ID",
        allow_negative_numbers = true,
        required_unless_present = "index",
        conflicts_with = "index"
    )]
    pub transaction_id: Option<i64>,
    /// Show the deliveries of this event index instead of a transactionId
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub index: Option<i64>,
    /// Print a JSON array of the records instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const EXPORT_HELP: &str = "\
Every delivery the journal holds whose first delivery lies from --since up to (not including)
--until, in the journal's order: index, key, event, transactionId, playerIdentifier,
playerPartnerIdentifier, moneyWon, coinsWon, isMoney, currencyISO4217 (a payout's; empty for a
refund), gameSessionId, outcome (success, failure or unknown as the stored reply tells; the
state for a delivery not finished), errorMessage, state, attempts, first_delivery, last_update,
finished (RFC 3339, UTC). CSV follows RFC 4180 (a header row, CRLF); it is data, not written for
a spreadsheet: import it with every column as text. JSON Lines: one object per line, null for
an empty column.

The journal is read 1,000 rows at a time, each page in its own short read transaction: memory
stays constant and the workers are never held up. A delivery claimed while the export passes may
be left out: export a period that has ended. The export holds the journal's lock `export` while
it runs: `journal prune` waits for it, and a second export at once is refused. With --output the file is written beside FILE under
a temporary name (mode 0600: it names players) and takes the name FILE only once complete; FILE
must not exist. A progress bar is drawn on stderr when it is a terminal.

Examples:
  slotpartner journal export --since 2026-10-01 --until 2026-11-01 --output october.csv
  slotpartner journal export --since 2026-10-01T00:00:00+02:00 --format jsonl | jq -c 'select(.outcome != \"success\")'
  slotpartner journal export --since 2026-10-01 --until 2026-11-01 --output october.jsonl --format jsonl --json

Exit status: 0 when the export was written (an empty period too), 2 when it could not be (a bad
date, FILE exists or cannot be written, another export running, the journal unreadable).";

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The period's start, included: a date (2026-10-01, midnight UTC) or an RFC 3339 time
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = slotpartner::journal::parse_time)]
    pub since: i64,
    /// The period's end, left out (default: no end): a date or an RFC 3339 time
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = slotpartner::journal::parse_time)]
    pub until: Option<i64>,
    /// csv (RFC 4180, a header row) or jsonl (one JSON object per line)
    #[arg(long, value_name = "FORMAT", default_value = "csv", value_parser = ["csv", "jsonl"])]
    pub format: String,
    /// Write to this new file instead of stdout (it must not exist)
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With --output: print a JSON summary (rows, since, until, format, output) on stdout
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const RESOLVE_HELP: &str = "\
Closes the missing indexes of a range (FIRST-LAST, or one index N) by hand: the service
confirms no such events, or they were settled another way. They no longer count as missing and
recovery no longer fetches them; the range and the note are kept for audit (`journal
resolutions`). Indexes of the range already seen stay as they were.

Examples:
  slotpartner journal resolve 3-4 --note 'service ticket 1234: no events 3 and 4'
  slotpartner journal resolve 17 --note 'payout settled by hand, ledger entry 99'

Exit status: 0 when the range was recorded, 2 when it could not be (no note, a range beyond the
highest index seen, the journal unreachable).";

#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// The indexes to close: FIRST-LAST, or one index N
    #[arg(value_name = "FIRST-LAST", value_parser = parse_range)]
    pub range: (i64, i64),
    /// Why (kept for audit; required)
    #[arg(long, value_name = "TEXT")]
    pub note: String,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const RESOLUTIONS_HELP: &str = "\
Examples:
  slotpartner journal resolutions
  slotpartner journal resolutions --json | jq '.[] | select(.closed > 0)'

Exit status: 0 when the journal could be read (resolutions or none), 2 when it could not.";

#[derive(Debug, Args)]
pub struct ResolutionsArgs {
    /// List at most this many (a note on stderr says when more exist)
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limit: u64,
    /// Print a JSON array instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const CONFLICTS_HELP: &str = "\
A conflict is a delivery whose key (event and transactionId) came before with other decisive
content. `refused`: the first was finished, this one was answered 409 and the first stays;
`handed_out`: the first was never finished, so this one was handed out as new; the journal keeps
the first content and answers either with the one stored reply. Each entry shows both contents
and every field that differs; decide it with the service, then `journal resolve-conflict ID
--note TEXT`.

Examples:
  slotpartner journal conflicts
  slotpartner journal conflicts --all --json

Exit status: 0 when no conflict is open, 1 when some are, 2 when the journal could not be read.";

#[derive(Debug, Args)]
pub struct ConflictsArgs {
    /// Resolved conflicts too
    #[arg(long)]
    pub all: bool,
    /// List at most this many (a note on stderr says when more exist)
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limit: u64,
    /// Print a JSON array instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const RESOLVE_CONFLICT_HELP: &str = "\
Examples:
  slotpartner journal resolve-conflict 3 --note 'service confirms the second content is a test event'

Exit status: 0 when the conflict was marked resolved, 2 when it could not be (no note, no open
conflict with this id, the journal unreachable).";

const JUMPS_HELP: &str = "\
An index jump is an index more than --max-index-jump beyond the highest seen: the stretch
between is not counted missing until an operator decides (`accept-jump`: the numbering really
moved; `jump-is-gap`: it is an outage, the stretch is missing and recovery fetches it). A
reused index is one seen before arriving with another event (the service may have restarted
its numbering: see `journal renumber`). Renumberings are listed for audit.

Examples:
  slotpartner journal jumps
  slotpartner journal jumps --all --json

Exit status: 0 when no index jump is open, 1 when some are, 2 when the journal could not be read.";

#[derive(Debug, Args)]
pub struct JumpsArgs {
    /// Decided ones and renumberings too
    #[arg(long)]
    pub all: bool,
    /// List at most this many (a note on stderr says when more exist)
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limit: u64,
    /// Print a JSON array instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const ACCEPT_JUMP_HELP: &str = "\
The service's numbering really moved: the stretch between the previous highest index and the
jump is no events (for a reused index: the new events are real).

Examples:
  slotpartner journal accept-jump 2 --note 'service moved to a new index range on 2024-06-11'

Exit status: 0 when decided, 2 when it could not be (no note, no open index jump with this id,
the journal unreachable).";

const JUMP_IS_GAP_HELP: &str = "\
The jump is a real outage longer than --max-index-jump: the stretch between the previous highest
index and the jump counts as missing again, and recovery fetches it.

Examples:
  slotpartner journal jump-is-gap 2 --note 'endpoint was down for two days'

Exit status: 0 when decided, 2 when it could not be (no note, no open index jump with this id,
the journal unreachable).";

/// An entry to decide, and why.
#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The entry's id (as listed)
    #[arg(value_name = "ID")]
    pub id: i64,
    /// Why (kept for audit; required)
    #[arg(long, value_name = "TEXT")]
    pub note: String,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const RENUMBER_HELP: &str = "\
After the service restarted its indexes: the seen indexes of the current numbering are archived,
gap detection counts from --from afresh, every record and stored reply stays (events keyed by
index keep theirs under a key of the old numbering), and open index jumps of the old numbering
are settled. Prints the new numbering.

Examples:
  slotpartner journal renumber --from 1 --note 'service reset its event index on 2024-06-11'

Exit status: 0 when the new numbering started, 2 when it could not (no note, a negative index,
the journal unreachable).";

#[derive(Debug, Args)]
pub struct RenumberArgs {
    /// The first index of the new numbering
    #[arg(long = "from", value_name = "N")]
    pub first: i64,
    /// Why (kept for audit; required)
    #[arg(long, value_name = "TEXT")]
    pub note: String,
    /// Give up the indexes still missing in the current numbering, each range recorded as
    /// resolved with the note (without it, missing indexes refuse the renumbering)
    #[arg(long)]
    pub give_up_gaps: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

/// `3-4` or `17`: an inclusive range of indexes.
fn parse_range(text: &str) -> Result<(i64, i64), String> {
    let number = |part: &str| {
        part.trim()
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("expected FIRST-LAST or N with non-negative integer indexes, got {text:?}"))
    };
    let (first, last) = match text.split_once('-') {
        Some((first, last)) => (number(first)?, number(last)?),
        None => {
            let n = number(text)?;
            (n, n)
        }
    };
    if last < first {
        return Err(format!("{text:?} ends before it starts"));
    }
    Ok((first, last))
}

/// `300s`, `5m`, `1h`, `1d`, `1500ms`, `2.5s`, `0s`; a plain number is seconds. At most 24 hours.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    duration_up_to(text, 86_400.0, "24h")
}

/// An age: a duration as `parse_duration` reads it, up to 100 years (`90d`, `10m`, `0s`).
pub fn parse_age(text: &str) -> Result<Duration, String> {
    duration_up_to(text, 36_500.0 * 86_400.0, "36500d")
}

/// A retention: an age of at least a day (younger replies are what repeats are answered with).
pub fn parse_retention(text: &str) -> Result<Duration, String> {
    let age = parse_age(text)?;
    if age < Duration::from_secs(86_400) {
        return Err(format!(
            "{:?} is shorter than 1d: a retention keeps replies at least a day (the service resends for less)",
            text.trim()
        ));
    }
    Ok(age)
}

/// A number with `ms`, `s`, `m`, `h` or `d` (a plain number is seconds), from 0 to `max` seconds.
fn duration_up_to(text: &str, max: f64, max_text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        other => return Err(format!("unknown unit {other:?} (expected ms, s, m, h or d)")),
    };
    let value: f64 = number.parse().map_err(|_| format!("expected a duration such as 300s, 5m or 1h, got {text:?}"))?;
    let seconds = value * scale;
    if !seconds.is_finite() || !(0.0..=max).contains(&seconds) {
        return Err(format!("{text:?} is not between 0s and {max_text}"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

const RECOVER_HELP: &str = "\
For each delivery claimed and never finished, then each index missing from the journal (never
tried first, then the least recently tried; never an unrecoverable one), fetches the event from
the service (the fetch action, getEvent by default) and POSTs it to your callback endpoint
exactly as the service would (X-Service-Token with the partner token, Content-Type
application/json): the endpoint's own journal and logic handle it, and a repeat is answered
from the journal. The command claims no delivery; it notes in the journal what each fetch got
(an index answered 404 by --not-found-limit runs becomes unrecoverable: it is reported, no
longer fetched, and stays missing until `journal resolve`), and holds the journal's lock
`recover` for the run, so that two runs never overlap. An event that fails validation is not
delivered, nor one whose index the journal holds for an unfinished delivery of another
transactionId.

Only what is at least --min-age old (default 1m) is taken: gaps found missing that long ago
(an index above them was first seen then) and unfinished deliveries last claimed or abandoned
that long ago. Younger ones are left for the next run: usually an event still on its way
(reordering) or a delivery the service retries itself. `--min-age 0s` takes everything.

The endpoint must accept the command's deliveries: it carries the partner token; see
docs/lost-events.md for the source allow-list behind a reverse proxy.

Examples:
  slotpartner recover --callback-url https://127.0.0.1:8443/callback --callback-ca-file endpoint-ca.pem
  slotpartner recover --callback-url http://127.0.0.1:8080/callback --dry-run
  */10 * * * * . /etc/slotpartner.env && slotpartner recover --callback-url https://127.0.0.1:8443/callback --callback-ca-file /etc/partner/endpoint-ca.pem --max-time 8m >> /var/log/partner/recover.log 2>&1 || alert \"slotpartner recover exited $? (1: the journal needs a human; 2: the run could not work)\"

A progress bar is drawn on stderr when it is a terminal; otherwise one line per index goes to
stdout. A summary ends the run (`--json`: one JSON object with every index's result).

The run stops after --max-time, after three connection failures or time-outs in a row to the
service or to the endpoint, naming how many indexes were not tried.

Exit status: 0 when nothing needs attention after the run (the journal is read again at the
end), 1 when it does: gaps found missing at least --min-age ago remain (not found,
unrecoverable, service errors, invalid events, endpoint failures, past --limit or --max-time),
deliveries stay unfinished, conflicts or index jumps are open (with --dry-run: when anything of
that needs attention); gaps younger than --min-age are counted (`gaps_too_young`) but are no bad
news; 2 on usage or configuration errors, or when another run holds the lock (the message names
it and since when).";

/// How the partner's endpoint reads an event's index, as `recover` and `inspect` parse bodies.
#[derive(Debug, Args)]
pub struct IndexOpts {
    /// The name of the event index field, as your endpoint reads it
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        default_value = "index",
        env = "SLOTPARTNER_INDEX_FIELD",
        hide_env_values = true
    )]
    pub index_field: String,
    /// Refuse an event whose index field is not a non-negative integer
    #[arg(long, global = true)]
    pub strict_index: bool,
}

/// The partner's own callback endpoint, as `recover` delivers to it and `check` asks it.
#[derive(Debug, Args)]
pub struct CallbackOpts {
    /// Your own callback endpoint (https://, or http:// to a loopback address only)
    #[arg(long, global = true, value_name = "URL", env = "SLOTPARTNER_CALLBACK_URL", hide_env_values = true)]
    pub callback_url: Option<String>,
    /// Trust the CA certificates in this PEM file for the callback endpoint (besides the bundled roots)
    #[arg(long, global = true, value_name = "PEM", env = "SLOTPARTNER_CALLBACK_CA_FILE", hide_env_values = true)]
    pub callback_ca_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    #[command(flatten)]
    pub callback: CallbackOpts,
    /// Take on at most this many missing indexes in this run (the rest wait for the next)
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limit: u64,
    /// Stop taking on indexes after this long (300s, 5m, 1h, 1500ms; a plain number is seconds)
    #[arg(long, value_name = "DURATION", default_value = "300s", env = "SLOTPARTNER_MAX_TIME", hide_env_values = true, value_parser = parse_duration)]
    pub max_time: Duration,
    /// Leave gaps and unfinished deliveries younger than this for the next run (0s: take all)
    #[arg(long, global = true, value_name = "DURATION", default_value = "1m", env = "SLOTPARTNER_MIN_AGE", hide_env_values = true, value_parser = parse_age)]
    pub min_age: Duration,
    /// Ask the service for at most this many indexes at each end of the journal's numbering:
    /// after the highest seen (once no new index came for --min-age) and below the lowest seen
    /// (while no first index is stored), delivering each it has, until it has none (0: never)
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub probe: u64,
    /// List the indexes that would be fetched; fetch and deliver nothing
    #[arg(long)]
    pub dry_run: bool,
    /// The service's operation that returns a lost event [default: the library's, getEvent]
    #[arg(long, value_name = "NAME")]
    pub fetch_action: Option<String>,
    /// Its parameter carrying the index [default: the library's, index]
    #[arg(long, value_name = "NAME")]
    pub fetch_index_param: Option<String>,
    /// The answer's key holding the event, empty when the answer is the event itself [default: the library's, event]
    #[arg(long, value_name = "NAME")]
    pub fetch_event_key: Option<String>,
    #[command(flatten)]
    pub index: IndexOpts,
    /// Print one JSON summary object instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
    #[command(flatten)]
    pub service: ServiceOpts,
}

const METRICS_HELP: &str = "\
A small HTTP server for a Prometheus scrape: GET /metrics answers the journal's state, read
afresh for each scrape, in the Prometheus text exposition format 0.0.4 (the same as `journal
status --prometheus`); other paths get 404, other methods 405. Counters: handled, replayed,
conflicts, refused, pruned and forgotten deliveries (`_total`); gauges: missing, unrecoverable
and resolved indexes, unfinished and in-progress deliveries, open conflicts and index jumps, the
highest index, the journal's size, and the times (Unix seconds, 0 when there is none) of the
last new index, the oldest gap and the oldest stored reply. Every sample carries the label
`journal`, the journal URL without its password. When the journal cannot be read, the answer is
`slotpartner_journal_up 0` alone, with the error in a `#` line.

It prints `listening on ADDR` on stderr once bound (port 0 picks a free port), then serves until
stopped (SIGTERM). Idle or slow connections hold up no scrape: each is a task of one thread; its
request head must arrive whole within 5 s (at most 32 KiB: 431; a target over 8 KiB: 414); it
answers one request and lives 30 s at most; at most 512 are open, a new one closing the oldest
still sending its head. No TLS and no authentication: listen on loopback or a private address,
and let the network decide who may scrape (the state names no player, yet tells your volume).

Examples:
  slotpartner metrics --listen 127.0.0.1:9464 --journal sqlite:/var/lib/partner/journal.db
  scrape_configs: [{job_name: slotpartner, static_configs: [{targets: ['partner-1:9464']}]}]

Exit status: it serves until stopped; 2 when it cannot start (usage, no journal given, the
address cannot be bound). An unreadable journal is no reason to stop: its scrape says up 0.";

/// Where to serve the metrics.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// The address to listen on: 127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464 (port 0: any free one)
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const INSPECT_HELP: &str = "\
Parses the body as the callback receiver would (without the token and source checks) and prints
the event's name, kind and index, its typed fields, then its extra fields as raw JSON; or the
exact error: status code name, field, message, and the HTTP answer an endpoint would send.

Examples:
  slotpartner inspect body.json
  curl -s ... | slotpartner inspect - --json

Exit status: 0 when the body is a valid event, 1 when it is refused, 2 on usage or I/O errors.";

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The body's file, or - for stdin
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    #[command(flatten)]
    pub index: IndexOpts,
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
}

const GAMES_HELP: &str = "\
Examples:
  slotpartner games en-US --base-url https://service.example --token 6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f
  slotpartner games de-DE 1003 --json

Exit status: 0 when the service listed games, 1 when it listed none (no game GAME_ID, or none
in the locale: nothing found), 2 when it could not be asked or its answer is not valid (the
message names the field).";

#[derive(Debug, Args)]
pub struct GamesArgs {
    /// The locale, an ISO 639 language and an ISO 3166 country: en-US
    #[arg(value_name = "LOCALE")]
    pub locale: String,
    /// Only this game
    #[arg(value_name = "GAME_ID")]
    pub game_id: Option<i64>,
    /// Accept games missing fields of spec 2.1 (they read as empty)
    #[arg(long)]
    pub lenient: bool,
    /// Print every field of every game as JSON
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub service: ServiceOpts,
}

const COMPLETIONS_HELP: &str = "\
The script completes subcommands, options and their values, written from the same definitions
as --help. Install it where the shell looks:

Examples:
  slotpartner completions bash > /usr/share/bash-completion/completions/slotpartner
  slotpartner completions zsh > /usr/share/zsh/vendor-completions/_slotpartner
  slotpartner completions fish > /usr/share/fish/vendor_completions.d/slotpartner.fish

Exit status: 0 when the script was printed, 2 on usage errors.";

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh or fish (elvish and powershell too)
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The directory to write the pages into (made when missing; pages there are replaced)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
        super::command().debug_assert();
    }

    /// A shared option is one option: wherever a subcommand defines it, it reads the same
    /// variable into the same type with the same default, so that its value may come from
    /// before the subcommand.
    #[test]
    fn shared_options_agree_wherever_defined() {
        fn visit(command: &clap::Command, seen: &mut Vec<(String, String)>) {
            for sub in command.get_subcommands() {
                for arg in sub.get_arguments() {
                    let what = format!(
                        "{:?} {:?} {:?} {:?} {:?} {:?}",
                        arg.get_long(),
                        arg.get_env(),
                        arg.get_value_names(),
                        arg.get_default_values(),
                        arg.get_action(),
                        arg.get_value_parser().type_id(),
                    );
                    match seen.iter().find(|(id, _)| id == arg.get_id().as_str()) {
                        Some((_, first)) => assert_eq!(first, &what, "--{} in {}", arg.get_id(), sub.get_name()),
                        None if arg.is_global_set() => seen.push((arg.get_id().to_string(), what)),
                        None => {}
                    }
                }
                visit(sub, seen);
            }
        }
        let mut seen = Vec::new();
        // Twice: the first pass finds the shared options, the second compares every definition.
        visit(&super::Cli::command(), &mut seen);
        visit(&super::Cli::command(), &mut seen);
        let ids: Vec<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
        for id in ["journal", "base_url", "token", "ca_file", "callback_url", "callback_ca_file", "index_field"] {
            assert!(ids.contains(&id), "{id} is shared: {ids:?}");
        }
    }

    #[test]
    fn durations() {
        use std::time::Duration;
        for (text, want) in [
            ("300s", Duration::from_secs(300)),
            ("300", Duration::from_secs(300)),
            ("0s", Duration::ZERO),
            ("5m", Duration::from_secs(300)),
            ("1h", Duration::from_secs(3600)),
            ("1500ms", Duration::from_millis(1500)),
            ("2.5s", Duration::from_millis(2500)),
            ("1d", Duration::from_secs(86_400)),
        ] {
            assert_eq!(super::parse_duration(text), Ok(want), "{text}");
        }
        for bad in ["", "s", "5x", "-1s", "25h", "2d", "1.2.3s"] {
            assert!(super::parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(super::parse_age("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert_eq!(super::parse_age("0s"), Ok(Duration::ZERO));
        assert!(super::parse_age("36501d").is_err());
        assert_eq!(super::parse_retention("24h"), Ok(Duration::from_secs(86_400)));
        let short = super::parse_retention("1h").unwrap_err();
        assert!(short.contains("shorter than 1d"), "{short}");
    }

    #[test]
    fn ranges() {
        assert_eq!(super::parse_range("3-4"), Ok((3, 4)));
        assert_eq!(super::parse_range("17"), Ok((17, 17)));
        for bad in ["4-3", "-3", "a-b", "3-", "1-2-3", ""] {
            assert!(super::parse_range(bad).is_err(), "{bad}");
        }
    }
}
