//! The command line: subcommands, options, their environment variables and help texts.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// The exit statuses, the same for every command.
macro_rules! exit_status {
    () => {
        "\
Exit status: 0 good news (no gap, a valid body, found), 1 bad news (gaps remain, an invalid
body, nothing found), 2 the command could not answer (usage, configuration, journal or
service unreachable). Errors are one line on stderr."
    };
}

const EXIT_STATUS: &str = exit_status!();

const ABOUT: &str = "The operator command of the slotpartner library: the delivery journal, recovery of lost events, callback bodies and games";

const MAIN_HELP: &str = concat!(
    "\
Environment (an option given on the command line wins):
  SLOTPARTNER_JOURNAL            the journal URL: sqlite:PATH or postgres://USER@HOST/DATABASE
  SLOTPARTNER_BASE_URL           the service's base URL (https://...), for recover and games
  SLOTPARTNER_TOKEN              the partner token (a UUID)
  SLOTPARTNER_CA_FILE            extra CA certificates (PEM) to trust for the service
  SLOTPARTNER_CALLBACK_URL       recover's target: your own callback endpoint
  SLOTPARTNER_CALLBACK_CA_FILE   extra CA certificates (PEM) to trust for that endpoint
  SLOTPARTNER_INDEX_FIELD        the event index field's name (default index)

Examples:
  slotpartner journal status --journal sqlite:/var/lib/partner/journal.db
  slotpartner journal gaps || alert 'lost events'
  slotpartner journal show 900002
  slotpartner recover --callback-url https://127.0.0.1:8443/callback
  slotpartner inspect body.json
  slotpartner games en-US

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

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What the delivery journal holds: counts, missing indexes, one transaction's records
    #[command(arg_required_else_help = true, after_help = EXIT_STATUS)]
    Journal {
        #[command(subcommand)]
        command: JournalCommand,
    },
    /// Fetch every missing event from the service and deliver it to your own callback endpoint
    #[command(after_help = RECOVER_HELP)]
    Recover(RecoverArgs),
    /// Read a callback body with the library's validation: every field, or the exact error
    #[command(after_help = INSPECT_HELP)]
    Inspect(InspectArgs),
    /// The service's games in a locale (getGames), as a table or JSON
    #[command(after_help = GAMES_HELP)]
    Games(GamesArgs),
}

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Counts by state, first and highest index, watermark, missing count
    #[command(after_help = STATUS_HELP)]
    Status(StatusArgs),
    /// The missing indexes as ranges, one per line (`3`, `6-8`); nothing when none is missing
    #[command(after_help = GAPS_HELP)]
    Gaps(GapsArgs),
    /// Every record the journal holds for a transactionId: state, attempts, times, stored reply
    #[command(after_help = SHOW_HELP)]
    Show(ShowArgs),
}

/// The journal to read.
#[derive(Debug, Args)]
#[command(next_help_heading = "Journal")]
pub struct JournalOpt {
    /// The delivery journal: sqlite:PATH (an existing file) or postgres://USER@HOST/DATABASE
    #[arg(long, value_name = "URL", env = "SLOTPARTNER_JOURNAL", hide_env_values = true)]
    pub journal: Option<String>,
}

/// How to reach the service's action address.
#[derive(Debug, Args)]
#[command(next_help_heading = "Service")]
pub struct ServiceOpts {
    /// The service's base URL (https://...); actions go to {base_url}/rest/action
    #[arg(long, value_name = "URL", env = "SLOTPARTNER_BASE_URL", hide_env_values = true)]
    pub base_url: Option<String>,
    /// The partner token (a UUID), sent as X-Service-Token
    #[arg(long, value_name = "UUID", env = "SLOTPARTNER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Also trust the CA certificates in this PEM file for the service
    #[arg(long, value_name = "PEM", env = "SLOTPARTNER_CA_FILE", hide_env_values = true)]
    pub ca_file: Option<PathBuf>,
    /// Time allowed for one call to the service (and one delivery to the endpoint), answer included, in seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 15.0)]
    pub timeout: f64,
    /// Times a call is tried again after no connection, a time-out or a 5xx answer
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=10))]
    pub retries: u32,
}

const STATUS_HELP: &str = "\
Examples:
  slotpartner journal status --journal sqlite:/var/lib/partner/journal.db
  SLOTPARTNER_JOURNAL=postgres://partner@db/partner slotpartner journal status --json

Exit status: 0 when the journal could be read (missing indexes or not: `journal gaps` is the
check that alerts), 2 when it could not (usage, configuration, storage).";

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const GAPS_HELP: &str = "\
Examples:
  slotpartner journal gaps --journal sqlite:/var/lib/partner/journal.db
  */10 * * * * slotpartner journal gaps > /dev/null || alert 'lost events'

Exit status: 0 when no index is missing (nothing printed), 1 when some are, 2 when the journal
could not be read.";

#[derive(Debug, Args)]
pub struct GapsArgs {
    /// Print at most this many ranges (a note on stderr says when more exist)
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limit: u64,
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const SHOW_HELP: &str = "\
Examples:
  slotpartner journal show 900002
  slotpartner journal show 900002 --json | jq '.[].reply'

Times are RFC 3339 in UTC. A refund and a payout may share a transactionId: each has its record.
Exit status: 0 when a record was found, 1 when the journal holds nothing for it, 2 when the
journal could not be read.";

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The refund's or payout's transactionId
    #[arg(value_name = "TRANSACTION_ID", allow_negative_numbers = true)]
    pub transaction_id: i64,
    /// Print a JSON array of the records instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
}

const RECOVER_HELP: &str = "\
For each index missing from the journal, fetches the event from the service (the fetch action,
getEvent by default) and POSTs it to your callback endpoint exactly as the service would
(X-Service-Token with the partner token, Content-Type application/json): the endpoint's own
journal and logic handle it, and a repeat is answered from the journal. Nothing is claimed or
written by this command. An event that fails validation is not delivered.

The endpoint must accept the command's deliveries: it carries the partner token; see the
README (Lost events) for the source allow-list behind a reverse proxy.

Examples:
  slotpartner recover --callback-url https://127.0.0.1:8443/callback --callback-ca-file endpoint-ca.pem
  slotpartner recover --callback-url http://127.0.0.1:8080/callback --dry-run
  */10 * * * * slotpartner recover --callback-url https://127.0.0.1:8443/callback > /var/log/partner/recover.log || alert 'lost events remain'

A progress bar is drawn on stderr when it is a terminal; otherwise one line per index goes to
stdout. A summary ends the run (`--json`: one JSON object with every index's result).

Exit status: 0 when no index is missing after the run (the journal is read again at the end),
1 when gaps remain (not found, service errors, invalid events, endpoint failures, or past
--limit; with --dry-run: when there is anything to fetch), 2 on usage or configuration errors.";

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Your own callback endpoint (https://, or http:// to a loopback address only)
    #[arg(long, value_name = "URL", env = "SLOTPARTNER_CALLBACK_URL", hide_env_values = true)]
    pub callback_url: Option<String>,
    /// Trust the CA certificates in this PEM file for the callback endpoint (besides the bundled roots)
    #[arg(long, value_name = "PEM", env = "SLOTPARTNER_CALLBACK_CA_FILE", hide_env_values = true)]
    pub callback_ca_file: Option<PathBuf>,
    /// Take on at most this many missing indexes in this run (the rest wait for the next)
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limit: u64,
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
    /// The name of the event index field, as your endpoint reads it
    #[arg(long, value_name = "NAME", default_value = "index", env = "SLOTPARTNER_INDEX_FIELD", hide_env_values = true)]
    pub index_field: String,
    /// Refuse an event whose index field is not a non-negative integer
    #[arg(long)]
    pub strict_index: bool,
    /// Print one JSON summary object instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
    #[command(flatten)]
    pub service: ServiceOpts,
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
    /// The name of the event index field
    #[arg(long, value_name = "NAME", default_value = "index", env = "SLOTPARTNER_INDEX_FIELD", hide_env_values = true)]
    pub index_field: String,
    /// Refuse an event whose index field is not a non-negative integer
    #[arg(long)]
    pub strict_index: bool,
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
}

const GAMES_HELP: &str = "\
Examples:
  slotpartner games en-US --base-url https://service.example --token 6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f
  slotpartner games de-DE 1003 --json

Exit status: 0 when the service answered, 2 when it could not be asked or its answer is not
valid (the message names the field).";

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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
