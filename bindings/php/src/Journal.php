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
 * "Exactly once"). Any number of threads and processes may share one journal. The native journal
 * is freed when this object is destroyed; receivers it was given to keep it open. Not cloneable.
 */
final class Journal
{
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
        $ranges = $out[0];
        try {
            $list = [];
            $count = $ranges->len;
            $items = $ranges->ranges;
            for ($i = 0; $i < $count; $i++) {
                $list[] = [$items[$i]->first, $items[$i]->last];
            }
            return $list;
        } finally {
            $ffi->sp_index_ranges_free($ranges);
        }
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
