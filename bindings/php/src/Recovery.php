<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI;
use FFI\CData;

/**
 * A recovery of the events missing from a Receiver's journal, fetched again through a Client
 * (sp_recovery): the pull API for lost events.
 *
 * ```php
 * $recovery = new Recovery($receiver, $client);
 * foreach ($recovery as $index => $event) {   // or: while (($event = $recovery->next()) !== null)
 *     credit($event);                          // the same handler as for callbacks
 *     $event->reply(true);
 *     $event->finish();
 * }
 * $report = $recovery->report();               // missing, recovered, handledMeanwhile, failures,
 *                                              // unrecoverable
 * ```
 *
 * Each event comes **already claimed** in the journal, as after Event::begin() returned
 * Outcome::New: run the handler, reply(), then finish() (or abandon() after a transient failure
 * of the ledger); begin() is not called. It was read with the same validation as a callback (not
 * the token and source checks: it came over the partner's own HTTPS call). A missing event that
 * arrives late while the recovery runs is handled once: whichever claims it first runs the
 * handler, the other finds it done. Indexes that could not be fetched are in the report with the
 * reason, and a later recovery tries them again.
 *
 * One thread at a time; not cloneable. The native recovery is freed by close() or when this
 * object is destroyed; events it handed out stay valid.
 */
final class Recovery implements \IteratorAggregate
{
    /** The most missing indexes one recovery takes on (the library's limit). */
    public const MAX_LIMIT = 1_000_000;

    /** How many missing indexes a recovery takes on when its $limit is null. */
    public const DEFAULT_LIMIT = 10_000;

    /** The owned `sp_recovery *`; null once closed. */
    private ?CData $handle = null;

    private readonly Native $native;

    /** `sp_recovery_summary`, written by sp_recovery_report. */
    private readonly CData $summary;

    /** The report taken when closed. */
    private ?RecoveryReport $final = null;

    /**
     * Lists the indexes missing from $receiver's journal, lowest first, at most $limit of them;
     * the rest wait for the next recovery. Fetches nothing yet.
     *
     * @param Receiver $receiver a receiver with a journal: events are validated with its settings
     *     and claimed in its journal
     * @param Client $client its fetch settings (fetchAction, fetchIndexParam, fetchEventKey) say
     *     how an event is fetched; the recovery keeps the native client
     * @param int|null $limit the most missing indexes this recovery takes on, 1 to 1,000,000
     *     [10,000]
     *
     * @throws ConfigurationException the receiver has no journal, or a $limit out of range
     *     (field limit)
     * @throws JournalException the journal cannot be read
     */
    public function __construct(Receiver $receiver, Client $client, ?int $limit = null)
    {
        $limit ??= self::DEFAULT_LIMIT;
        $native = Native::get();
        $this->native = $native;
        $ffi = $native->ffi;
        if ($limit < 1 || $limit > self::MAX_LIMIT) {
            throw new ConfigurationException('limit: must be 1 to ' . self::MAX_LIMIT . ', got ' . $limit, Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'limit');
        }
        $this->summary = $ffi->new('sp_recovery_summary');
        $out = $native->out('sp_recovery');
        $native->check($ffi->sp_recovery_new($receiver->nativeHandle(), $client->nativeHandle(), $limit, $out));
        $this->handle = $out[0];
    }

    /**
     * The next recovered event, claimed (handle it, reply(), finish()); null when every missing
     * index was tried. Fetches missing indexes one by one until one is recovered, blocking for the
     * calls to the service; those that fail go to the report.
     *
     * @throws ConfigurationException once closed
     */
    public function next(): ?Event
    {
        $native = $this->native;
        if ($this->handle === null) {
            throw new ConfigurationException('recovery: is closed', Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'recovery');
        }
        $out = $native->eventOut;
        $native->check($native->ffi->sp_recovery_next($this->handle, $out));
        $event = $out[0];
        return $event === null ? null : Event::adopt($native, $event);
    }

    /**
     * Every recovered event in turn (next() until null), keyed by its index.
     *
     * @return \Generator<int, Event>
     */
    public function getIterator(): \Generator
    {
        while (($event = $this->next()) !== null) {
            yield (int) $event->index => $event;
        }
    }

    /**
     * What the recovery did so far, copied (one FFI call); after close(), the report as it was
     * then.
     */
    public function report(): RecoveryReport
    {
        if ($this->handle === null) {
            if ($this->final === null) {
                throw new ConfigurationException('recovery: is closed', Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'recovery');
            }
            return $this->final;
        }
        $native = $this->native;
        $s = $this->summary;
        $native->check($native->ffi->sp_recovery_report($this->handle, FFI::addr($s)));
        $failures = [];
        $count = $s->failures_len;
        $items = $s->failures;
        for ($i = 0; $i < $count; $i++) {
            $f = $items[$i];
            $failures[] = new RecoveryFailure($f->index, RecoveryReason::from($f->reason), $f->status, $native->statusName($f->status), Native::text($f->message));
        }
        return new RecoveryReport($s->missing, $s->recovered, $s->handled_meanwhile, $failures, $s->unrecoverable);
    }

    /** Frees the native recovery (idempotent), keeping its last report for report(). */
    public function close(): void
    {
        $handle = $this->handle;
        if ($handle === null) {
            return;
        }
        try {
            $this->final = $this->report();
        } finally {
            $this->handle = null;
            $this->native->ffi->sp_recovery_free($handle);
        }
    }

    public function __destruct()
    {
        $handle = $this->handle;
        if ($handle !== null) {
            $this->handle = null;
            $this->native->ffi->sp_recovery_free($handle);
        }
    }

    private function __clone()
    {
    }
}
