<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI;
use FFI\CData;

/**
 * The delivery journal (sp_journal): makes a callback's effect happen once, and knows which
 * event indexes never arrived. Open one per process (per request without a persistent worker:
 * connections are pooled per process and URL) and give it to the Receiver:
 *
 * ```php
 * $journal = new Journal('sqlite:/var/lib/partner/journal.db');
 * $receiver = new Receiver(tokens: $token, journal: $journal);
 * ```
 *
 * then claim each event with Event::begin() before running the partner's logic (README.md,
 * "Exactly once"). status() and missing() answer what the journal has seen; indexJumps(),
 * conflicts(), resolutions() and unrecoverable() list what an operator decides on (or did), and
 * acceptJump(), jumpIsGap(), resolveConflict(), closeUnfinished(), resolve() and renumber() record a
 * decision, each with a note kept for audit; backup() copies a SQLite journal while the workers
 * write. prune() removes what the service can no longer resend (or the journal does it by
 * itself, $retentionMs), vitals() says what it did, how big the journal is and how long ago it
 * last heard from the service, and missingOlderThan() leaves out gaps too young to be more than
 * an event still on its way. Any number of threads and processes may share one journal. The native journal
 * is freed when this object is destroyed; receivers it was given to keep it open. Not cloneable.
 */
final class Journal
{
    /** sp_journal_report_kind values. */
    private const REPORT_INDEX_JUMPS = 1;
    private const REPORT_CONFLICTS = 2;
    private const REPORT_RESOLUTIONS = 3;
    private const REPORT_UNRECOVERABLE = 4;

    /** The owned `sp_journal *`. */
    private ?CData $handle = null;

    private readonly Native $native;

    /** `sp_journal_stats`, written by sp_journal_status. */
    private readonly CData $stats;

    /**
     * Every setting after $url is optional: null (the default) keeps the library's default,
     * shown in brackets.
     *
     * @param string $url `sqlite:PATH` (one file that every process and thread of a host shares;
     *     created if absent) or `postgres://USER@HOST/DATABASE` (callbacks on several hosts)
     * @param int|null $leaseMs how long a claim is held for a worker that neither finishes nor
     *     abandons it (it died) before the next delivery takes it over as attempt 2, 1 ms to
     *     24 h [30000]: longer than the longest handling, shorter than the service's retry
     *     interval
     * @param int|null $busyWaitMs how long Event::begin() waits for another worker's live claim on
     *     the same delivery before throwing BusyException, at most 24 h [2000]
     * @param bool|null $durable flush a stored reply to disk before finish() returns (SQLite
     *     synchronous=FULL, PostgreSQL synchronous_commit=on) [true]; false: it survives a crash
     *     of the process, not of the machine
     * @param int|null $firstIndex the index gap detection counts from (stored in the journal)
     *     [null: the lowest index seen]
     * @param int|null $maxReplyBytes the largest reply finish() stores, at least 1 [65536]
     * @param int|null $lockTimeoutMs how long one statement waits for a lock another process
     *     holds (SQLite's busy time-out, PostgreSQL's lock_timeout and connect time-out) [5000]
     * @param int|null $commandTimeoutMs PostgreSQL: how long one round trip waits for the server's
     *     answer before the connection is closed and the call fails (HTTP 503); the URL's
     *     command_timeout (seconds) wins [lock time-out + 10000]
     * @param int|null $maxIndexJump how far beyond the highest index seen an index may land and
     *     still open a gap of that size, at least 1 [100000]; beyond it the index is recorded as
     *     an index jump (indexJumps()): the stretch between is not counted missing until an
     *     operator decides it (acceptJump() or jumpIsGap())
     * @param int|null $notFoundLimit how many recovery runs may get HTTP 404 for an index before
     *     it is reported unrecoverable and no longer fetched, at least 1 [3]; a missing one stays
     *     missing until resolved by hand (resolve()), an unfinished one unfinished until closed
     *     by hand (closeUnfinished())
     * @param int|null $retentionMs the journal's own retention: at least 86400000 (a day), or 0
     *     for none [none: nothing is pruned unless prune() is called]. With it, Event::finish()
     *     runs, at most once a second per open journal and after its own commit, one batch of
     *     prune($retentionMs) (compact records kept); a failure of that batch does not fail the
     *     finish. See prune() for what a repeat beyond the retention gets
     * @param bool|null $claimAtFinish whether a new delivery's claim is written only by
     *     Event::finish(), with the reply and the staged statements, in one transaction [false:
     *     Event::begin() writes it in a commit of its own]. Half the journal's writes and
     *     commits a delivery; but two deliveries of one key arriving at once may both run the
     *     logic: the first finish() to commit stores its reply and none of the other's staged
     *     statements take effect; the other's finish() returns when the stored delivery has the
     *     same content and the very same reply (handled once, this reply the stored one), else
     *     throws ClaimLostException (answer 503). Choose it only when
     *     everything the logic does is staged (Event::stage()) or absorbed by the ledger's unique
     *     transactionId, never when it calls out (a wallet's API) before finish(). A worker
     *     dying before finish() leaves nothing: the index stays missing and recovery fetches
     *     it; abandon() stores the delivery abandoned, as without it
     *
     * @throws ConfigurationException an unusable URL (field journal_url) or setting (its name)
     * @throws JournalException the storage cannot be used (unreachable server, read-only or
     *     corrupt file, a journal of a newer schema version): HTTP 503
     */
    public function __construct(
        string $url,
        ?int $leaseMs = null,
        ?int $busyWaitMs = null,
        ?bool $durable = null,
        ?int $firstIndex = null,
        ?int $maxReplyBytes = null,
        ?int $lockTimeoutMs = null,
        ?int $maxIndexJump = null,
        ?int $notFoundLimit = null,
        ?int $retentionMs = null,
        ?bool $claimAtFinish = null,
        ?int $commandTimeoutMs = null,
    ) {
        $native = Native::get();
        $this->native = $native;
        $ffi = $native->ffi;
        $this->stats = $ffi->new('sp_journal_stats');
        $configOut = $native->out('sp_journal_config');
        $native->check($ffi->sp_journal_config_new(Native::cString($url, 'journal_url'), $configOut));
        $config = $configOut[0];
        try {
            if ($leaseMs !== null) {
                $native->check($ffi->sp_journal_config_set_lease_ms($config, Native::unsigned($leaseMs, 'lease_ms')));
            }
            if ($busyWaitMs !== null) {
                $native->check($ffi->sp_journal_config_set_busy_wait_ms($config, Native::unsigned($busyWaitMs, 'busy_wait_ms')));
            }
            if ($durable !== null) {
                $native->check($ffi->sp_journal_config_set_durable($config, $durable));
            }
            if ($firstIndex !== null) {
                $native->check($ffi->sp_journal_config_set_first_index($config, Native::unsigned($firstIndex, 'first_index')));
            }
            if ($maxReplyBytes !== null) {
                $native->check($ffi->sp_journal_config_set_max_reply_bytes($config, Native::unsigned($maxReplyBytes, 'max_reply_bytes')));
            }
            if ($lockTimeoutMs !== null) {
                $native->check($ffi->sp_journal_config_set_lock_timeout_ms($config, Native::unsigned($lockTimeoutMs, 'lock_timeout_ms')));
            }
            if ($commandTimeoutMs !== null) {
                $native->check($ffi->sp_journal_config_set_command_timeout_ms($config, Native::unsigned($commandTimeoutMs, 'command_timeout_ms')));
            }
            if ($maxIndexJump !== null) {
                $native->check($ffi->sp_journal_config_set_max_index_jump($config, Native::unsigned($maxIndexJump, 'max_index_jump')));
            }
            if ($notFoundLimit !== null) {
                $native->check($ffi->sp_journal_config_set_not_found_limit($config, Native::unsigned($notFoundLimit, 'not_found_limit', 0xFFFFFFFF)));
            }
            if ($retentionMs !== null) {
                $native->check($ffi->sp_journal_config_set_retention_ms($config, Native::unsigned($retentionMs, 'retention')));
            }
            if ($claimAtFinish !== null) {
                $native->check($ffi->sp_journal_config_set_claim_at_finish($config, $claimAtFinish));
            }
            $journalOut = $native->out('sp_journal');
            $native->check($ffi->sp_journal_open($config, $journalOut));
            $this->handle = $journalOut[0];
        } finally {
            $ffi->sp_journal_config_free($config);
        }
    }

    /**
     * The journal's counts and gap figures (one FFI call).
     *
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function status(): JournalStatus
    {
        $native = $this->native;
        $s = $this->stats;
        $native->check($native->ffi->sp_journal_status($this->handle, FFI::addr($s)));
        return new JournalStatus(
            $s->handled,
            $s->replayed,
            $s->conflicts,
            $s->refused,
            $s->in_progress,
            $s->missing,
            $s->has_first_index ? $s->first_index : null,
            $s->has_highest_index ? $s->highest_index : null,
            $s->has_watermark ? $s->watermark : null,
            $s->unfinished,
            $s->open_conflicts,
            $s->index_jumps,
            $s->resolved,
            $s->unrecoverable,
            $s->numbering,
        );
    }

    /**
     * The indexes never seen between the first index and the highest seen, as at most $limit
     * (1 to 1,000,000) inclusive [first, last] ranges in order, such as [[3, 3], [5, 6]]. The cost
     * grows with $limit, not with the deliveries. Two FFI calls (sp_journal_missing,
     * sp_index_ranges_free).
     *
     * @return list<array{0: int, 1: int}>
     *
     * @throws ConfigurationException a $limit out of range (field limit)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function missing(int $limit = 1000): array
    {
        $native = $this->native;
        $ffi = $native->ffi;
        $out = $native->out('sp_index_ranges');
        $native->check($ffi->sp_journal_missing($this->handle, Native::unsigned($limit, 'limit'), $out));
        return $this->takeRanges($out[0]);
    }

    /**
     * missing($limit) without the gaps found missing less than $minAgeMs milliseconds ago: a gap
     * is found missing when an index above it is first seen, and a younger one is usually an
     * event still on its way (reordering, the service's own retry), which a recovery would race.
     * $minAgeMs 0 gives what missing() gives. Two FFI calls (sp_journal_missing_older_than,
     * sp_index_ranges_free).
     *
     * @return list<array{0: int, 1: int}>
     *
     * @throws ConfigurationException a negative $minAgeMs (field min_age), a $limit out of 1 to
     *     1,000,000 (field limit)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function missingOlderThan(int $minAgeMs, int $limit = 1000): array
    {
        $native = $this->native;
        $ffi = $native->ffi;
        $out = $native->out('sp_index_ranges');
        $native->check($ffi->sp_journal_missing_older_than(
            $this->handle,
            Native::unsigned($minAgeMs, 'min_age'),
            Native::unsigned($limit, 'limit'),
            $out,
        ));
        return $this->takeRanges($out[0]);
    }

    /**
     * The ranges of an `sp_index_ranges *` the library handed out, copied, then freed.
     *
     * @return list<array{0: int, 1: int}>
     */
    private function takeRanges(CData $ranges): array
    {
        try {
            $list = [];
            $count = $ranges->len;
            $items = $ranges->ranges;
            for ($i = 0; $i < $count; $i++) {
                $list[] = [$items[$i]->first, $items[$i]->last];
            }
            return $list;
        } finally {
            $this->native->ffi->sp_index_ranges_free($ranges);
        }
    }

    /**
     * The journal's vital signs (one FFI call, sp_journal_vitals): what retention did, the
     * journal's size, when its oldest whole record was finished, when a new index last arrived
     * and when the oldest gap opened. Reads what status() reads, and the journal's size besides.
     *
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function vitals(): JournalVitals
    {
        $native = $this->native;
        $v = $native->ffi->new('sp_journal_vital_signs');
        $native->check($native->ffi->sp_journal_vitals($this->handle, FFI::addr($v)));
        return new JournalVitals(
            $v->pruned,
            $v->forgotten,
            $v->has_size_bytes ? $v->size_bytes : null,
            $v->has_oldest_record_ms ? $v->oldest_record_ms : null,
            $v->has_last_delivery_ms ? $v->last_delivery_ms : null,
            $v->has_oldest_gap_ms ? $v->oldest_gap_ms : null,
        );
    }

    /**
     * Removes what the service can no longer resend (sp_journal_prune; null keeps the library's
     * default, in brackets):
     *
     * - a delivery finished more than $olderThanMs ago (at least 86400000, a day) is compacted:
     *   its reply and content go, a digest of its decisive content and its reply's outcome stay.
     *   A repeat of it with the same decisive content is handed out as its next attempt with
     *   Claim::$replyPruned true: the reply is gone and the ledger, keyed by transactionId,
     *   decides, exactly as after a crash between its commit and finish(). A repeat with other
     *   decisive content throws ConflictException;
     * - with $forgetOlderThanMs (longer than $olderThanMs) [null: kept], compact records older
     *   than it are removed: a repeat of one is then a new delivery (attempt 1);
     * - records of deliveries refused by validation, and resolved conflicts, older than
     *   $olderThanMs are removed;
     * - never removed: unfinished deliveries, a delivery with an open conflict, unresolved
     *   conflicts, open index jumps, and the indexes seen (no gap opens or closes).
     *
     * It runs in batches of $batch rows [200], each its own short transaction, $pauseMs apart
     * [10; at most 60000], so that a delivery waits for at most one batch (longestBatchUs), then
     * gives the space a SQLite journal freed back to the file system. It blocks until done or
     * $maxTimeMs has passed [null: until done]: call it from cron or an operator's job, not inside
     * a callback. Two FFI calls (sp_prune_options_default, sp_journal_prune).
     *
     * @throws ConfigurationException an option out of range, naming it (older_than,
     *     forget_older_than, batch, pause, max_time)
     * @throws JournalException when the storage fails (what earlier batches removed stays
     *     removed)
     */
    public function prune(
        int $olderThanMs,
        ?int $forgetOlderThanMs = null,
        ?int $batch = null,
        ?int $pauseMs = null,
        ?int $maxTimeMs = null,
    ): PruneReport {
        $native = $this->native;
        $ffi = $native->ffi;
        $options = $ffi->new('sp_prune_options');
        $native->check($ffi->sp_prune_options_default(FFI::addr($options), Native::unsigned($olderThanMs, 'older_than')));
        // 0 means "none" to the library for these three: refused here, so that it never says so silently.
        if ($forgetOlderThanMs !== null) {
            $options->forget_older_than_ms = self::positive($forgetOlderThanMs, 'forget_older_than');
        }
        if ($batch !== null) {
            $options->batch = self::positive($batch, 'batch', 0xFFFFFFFF);
        }
        if ($pauseMs !== null) {
            $options->pause_ms = Native::unsigned($pauseMs, 'pause', 0xFFFFFFFF);
        }
        if ($maxTimeMs !== null) {
            $options->max_time_ms = self::positive($maxTimeMs, 'max_time');
        }
        $r = $ffi->new('sp_prune_report');
        $native->check($ffi->sp_journal_prune($this->handle, FFI::addr($options), FFI::addr($r)));
        return new PruneReport(
            $r->compacted,
            $r->forgotten,
            $r->refused_removed,
            $r->conflicts_removed,
            $r->batches,
            $r->longest_batch_us,
            $r->bytes_returned,
            $r->complete,
            $r->export_running,
        );
    }

    /** $value for an option whose 0 the library reads as "none": 1 to $max. */
    private static function positive(int $value, string $field, int $max = PHP_INT_MAX): int
    {
        if ($value < 1 || $value > $max) {
            throw Native::argumentError($field, 'must be 1 to ' . $max . ', or null, got ' . $value);
        }
        return $value;
    }

    // The operator's side. Each decision takes a note (required, at most 4096 bytes of text) that
    // the journal keeps for audit; the library refuses a blank one (ConfigurationException, field
    // note). Decisions are written in one transaction, visible to every process at once.

    /**
     * Closes the missing indexes $first to $last (inclusive) by hand: events the service confirms
     * do not exist, or that were settled another way. They no longer count as missing and
     * recovery no longer fetches them; resolutions() lists the range with $note.
     *
     * @return int how many of the range's indexes were missing
     *
     * @throws ConfigurationException a range that is not one or reaches beyond the highest index
     *     seen (field range), a blank note (field note)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function resolve(int $first, int $last, string $note): int
    {
        $native = $this->native;
        $ffi = $native->ffi;
        $closed = $ffi->new('uint64_t[1]');
        $native->check($ffi->sp_journal_resolve($this->handle, $first, $last, Native::cString($note, 'note'), $closed));
        return $closed[0];
    }

    /**
     * Accepts the open index jump or reused index $id (an entry of indexJumps()): the numbering
     * really moved, and a jump's stretch holds no events.
     *
     * @throws ConfigurationException no open entry has this id (field id), a blank note (note)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function acceptJump(int $id, string $note): void
    {
        $native = $this->native;
        $native->check($native->ffi->sp_journal_accept_jump($this->handle, $id, Native::cString($note, 'note')));
    }

    /**
     * Declares the open index jump $id a gap: the stretch between the highest index before it and
     * the jump counts as missing again, for a recovery to fetch (a real outage longer than
     * $maxIndexJump).
     *
     * @throws ConfigurationException no open entry has this id (field id), a blank note (note)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function jumpIsGap(int $id, string $note): void
    {
        $native = $this->native;
        $native->check($native->ffi->sp_journal_jump_is_gap($this->handle, $id, Native::cString($note, 'note')));
    }

    /**
     * Marks the open conflict $id (an entry of conflicts()) resolved, keeping $note.
     *
     * @throws ConfigurationException no open conflict has this id (field id), a blank note (note)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function resolveConflict(int $id, string $note): void
    {
        $native = $this->native;
        $native->check($native->ffi->sp_journal_resolve_conflict($this->handle, $id, Native::cString($note, 'note')));
    }

    /**
     * Closes by hand the unfinished deliveries (abandoned, or their lease ran out) carrying
     * $index: an event the service answers 404 for, settled another way, or of an earlier
     * numbering. They no longer count as unfinished (JournalStatus::$unfinished) and recovery no
     * longer fetches them; a later delivery of such an event still runs as its next attempt. The
     * closing is listed by resolutions() with $note.
     *
     * @return int how many deliveries were closed
     *
     * @throws ConfigurationException no unfinished delivery carries $index (field index), a
     *     blank note (note)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function closeUnfinished(int $index, string $note): int
    {
        $native = $this->native;
        $ffi = $native->ffi;
        $closed = $ffi->new('uint64_t[1]');
        $native->check($ffi->sp_journal_close_unfinished($this->handle, $index, Native::cString($note, 'note'), $closed));
        return $closed[0];
    }

    /**
     * Starts a new numbering from index $first after the service restarted its indexes: the seen
     * indexes of the old numbering are archived, gap detection counts from $first afresh, open
     * index jumps of the old numbering are settled, and every record and stored reply stays
     * (events keyed by their index keep theirs apart from the new numbering's).
     *
     * @return int the new numbering (JournalStatus::$numbering)
     *
     * Refused while indexes of the current numbering are missing, unless $giveUpGaps: then each
     * missing range is recorded as resolved (resolutions()) with the note "given up by
     * renumbering from FIRST: NOTE".
     *
     * @throws ConfigurationException a negative $first (field first_index), missing indexes
     *     without $giveUpGaps (first_index, naming them), a blank note (note)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function renumber(int $first, string $note, bool $giveUpGaps = false): int
    {
        $native = $this->native;
        $ffi = $native->ffi;
        $numbering = $ffi->new('int64_t[1]');
        $text = Native::cString($note, 'note');
        $native->check($giveUpGaps
            ? $ffi->sp_journal_renumber_giving_up_gaps($this->handle, $first, $text, $numbering)
            : $ffi->sp_journal_renumber($this->handle, $first, $text, $numbering));
        return $numbering[0];
    }

    /**
     * Copies a SQLite journal into a new file at $destPath while the workers go on writing (one
     * FFI call, sp_journal_backup; none of them is held up): the copy holds every delivery
     * committed when the backup started, is written 0600 beside $destPath and takes that name
     * only once complete, so a failed backup leaves nothing there. The copy is a journal of its
     * own: new Journal('sqlite:' . $destPath) opens it. To restore it, stop every worker,
     * remove the journal's -wal and -shm files and move the copy into the journal's place. A
     * fork of this process waits for a backup in progress.
     *
     * @throws ConfigurationException a $destPath that exists (a backup never replaces a file),
     *     names no file, or lies in a folder that does not exist or is not writable (field
     *     dest); a PostgreSQL journal (field journal_url: the message gives the pg_dump command,
     *     PostgreSQL having its own tools)
     * @throws JournalException when reading the journal or writing the copy fails
     */
    public function backup(string $destPath): void
    {
        $native = $this->native;
        $native->check($native->ffi->sp_journal_backup($this->handle, Native::cString($destPath, 'dest')));
    }

    /**
     * Writes every delivery whose first delivery lies in $since to $until ($until left out;
     * null: no end) to a new file at $path, for reconciliation with the service's reports (one
     * FFI call, sp_journal_export).
     *
     * $format is 'csv' (RFC 4180 with a header row, lines ended by CRLF; fgetcsv() reads it) or
     * 'jsonl' (one JSON object per line, null for an empty column). The columns: index, key,
     * event, transactionId, playerIdentifier, playerPartnerIdentifier, moneyWon, coinsWon,
     * isMoney, currencyISO4217 (empty for a refund), gameSessionId, outcome (success, failure or
     * unknown as the stored reply tells; the state for a delivery not finished), errorMessage,
     * state, attempts, first_delivery, last_update, finished (RFC 3339 in UTC); docs/operating.md,
     * "Reconciliation". $since and $until are times (a DateTimeInterface; for a day, its
     * midnight in UTC: new DateTimeImmutable('2026-10-01', new DateTimeZone('UTC'))) or
     * milliseconds since the Unix epoch.
     *
     * The file is created 0600 under a temporary name beside $path and takes the name $path
     * only once complete: an existing file is never replaced. The journal is read 1,000 rows at
     * a time, each in a short read transaction: memory stays constant and the workers are never
     * held up; the call returns when the file is in place.
     *
     * @return int the number of rows written
     *
     * @throws ConfigurationException an unusable $path (field path: it exists, its folder does
     *     not, it cannot be written), $format (format), or $until not after $since (until_ms)
     * @throws BusyException while another export of the journal runs (one at a time: retention
     *     waits for it)
     * @throws JournalException when the storage fails
     */
    public function export(string $path, \DateTimeInterface|int $since, \DateTimeInterface|int|null $until = null, string $format = 'csv'): int
    {
        $formats = ['csv' => 1, 'jsonl' => 2]; // sp_export_format: SP_EXPORT_CSV, SP_EXPORT_JSONL
        if (!isset($formats[$format])) {
            throw Native::argumentError('format', sprintf("expected 'csv' or 'jsonl', got '%s'", $format));
        }
        $native = $this->native;
        $ffi = $native->ffi;
        $rows = $ffi->new('uint64_t[1]');
        $native->check($ffi->sp_journal_export(
            $this->handle,
            self::epochMs($since),
            $until === null ? PHP_INT_MAX : self::epochMs($until),
            $formats[$format],
            Native::cString($path, 'path'),
            $rows,
        ));
        return $rows[0];
    }

    /** Milliseconds since the Unix epoch of a time, or the milliseconds given. */
    private static function epochMs(\DateTimeInterface|int $time): int
    {
        if (is_int($time)) {
            return $time;
        }
        return $time->getTimestamp() * 1000 + intdiv((int) $time->format('u'), 1000);
    }

    /**
     * The index jumps, reused indexes and renumberings, newest first, at most $limit; the decided
     * ones too when $all. Times are milliseconds since the Unix epoch.
     *
     * @return list<array{id: int, kind: string, index: int, previous_highest: ?int, key: ?string,
     *     name: ?string, other_key: ?string, count: int, last_index: int, numbering: int,
     *     at_ms: int, last_ms: int, decision: ?string, decided_ms: ?int, note: ?string}> kind is
     *     "jump", "reused", "renumbered" or "moved"; decision null while open, else "accepted" or "gap"
     *
     * @throws ConfigurationException a negative $limit (field limit)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function indexJumps(bool $all = false, int $limit = 100): array
    {
        return $this->report(self::REPORT_INDEX_JUMPS, $all, $limit);
    }

    /**
     * The conflicts (a key delivered again with other decisive content), newest first, at most
     * $limit; the resolved ones too when $all.
     *
     * @return list<array{id: int, key: string, name: string, transaction_id: ?int, index: ?int,
     *     first_content: string, now_content: string, differing: list<string>, outcome: string,
     *     count: int, first_ms: int, last_ms: int, resolved_ms: ?int, note: ?string}> differing
     *     holds "field: first X, now Y"; outcome is "refused" (the first was finished: this one
     *     got 409) or "handed_out" (the first was never finished: this one was handed out as new)
     *
     * @throws ConfigurationException a negative $limit (field limit)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function conflicts(bool $all = false, int $limit = 100): array
    {
        return $this->report(self::REPORT_CONFLICTS, $all, $limit);
    }

    /**
     * The ranges closed by hand (resolve()), newest first, at most $limit.
     *
     * @return list<array{id: int, first: int, last: int, closed: int, numbering: int, note: string,
     *     at_ms: int}> closed: how many of the range's indexes were missing; an unfinished
     *     delivery closed by hand (closeUnfinished()) is one with first and last its index,
     *     closed 0 and its key named in note
     *
     * @throws ConfigurationException a negative $limit (field limit)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function resolutions(int $limit = 100): array
    {
        return $this->report(self::REPORT_RESOLUTIONS, false, $limit);
    }

    /**
     * The indexes recovery no longer fetches (HTTP 404 for $notFoundLimit runs), missing or
     * carrying an unfinished delivery, in order, at most $limit. Missing ones stay missing until
     * resolved by hand (resolve()), unfinished ones unfinished until closed by hand
     * (closeUnfinished()).
     *
     * @return list<int>
     *
     * @throws ConfigurationException a negative $limit (field limit)
     * @throws JournalException when the storage fails (HTTP 503)
     */
    public function unrecoverable(int $limit = 100): array
    {
        return $this->report(self::REPORT_UNRECOVERABLE, false, $limit);
    }

    /**
     * The JSON array sp_journal_report gives for $kind, decoded (two FFI calls: the report,
     * sp_buffer_free).
     *
     * @return list<mixed>
     */
    private function report(int $kind, bool $all, int $limit): array
    {
        $native = $this->native;
        $ffi = $native->ffi;
        $out = $native->out('sp_buffer');
        $native->check($ffi->sp_journal_report($this->handle, $kind, $all, Native::unsigned($limit, 'limit'), $out));
        $buffer = $out[0];
        try {
            $text = Native::text($buffer->text);
        } finally {
            $ffi->sp_buffer_free($buffer);
        }
        /** @var list<mixed> */
        return json_decode($text, true, 512, JSON_THROW_ON_ERROR);
    }

    /**
     * The owned `sp_journal *`, for Receiver.
     *
     * @internal
     */
    public function handle(): ?CData
    {
        return $this->handle;
    }

    public function __destruct()
    {
        $handle = $this->handle;
        if ($handle !== null) {
            $this->handle = null;
            $this->native->ffi->sp_journal_free($handle);
        }
    }

    private function __clone()
    {
    }
}
