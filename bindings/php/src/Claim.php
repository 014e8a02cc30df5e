<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * The answer of Event::begin(): what the journal found for this delivery.
 */
final class Claim
{
    /**
     * @param Outcome $outcome New, Done or NotJournaled
     * @param int $attempt for New: 1 the first time, 2 and on after a worker died (its lease
     *     expired) or abandoned it. From 2 on the partner's logic may have run before: its ledger
     *     must refuse a second credit for the same transactionId. 0 otherwise
     * @param string|null $reply for Done: the reply stored the first time, to send with HTTP 200;
     *     null otherwise
     * @param list<string> $differing for New from attempt 2 on: the decisive fields in which this
     *     delivery differs from the earlier one that was never finished (abandoned, or its worker
     *     died), one "field: first X, now Y" each ("moneyWon: first 100, now 250"). Such a resend
     *     is handed out as new rather than refused, since nothing was stored for the first; the
     *     journal records the conflict for the operator: log it. Empty when none, and always on
     *     attempt 1 (read with sp_event_differing only from attempt 2 on)
     * @param bool $replyPruned for New from attempt 2 on: true when this delivery was handled
     *     before, longer ago than the journal keeps replies (Journal::prune() or its retention
     *     compacted it): the stored reply is gone and the same decisive content was seen. The
     *     ledger, keyed by transactionId, decides, exactly as after a crash between its commit and
     *     finish(): answer what it says of that transaction, and log it (a repeat this late is
     *     rare). False otherwise (read with sp_event_reply_pruned only from attempt 2 on)
     */
    public function __construct(
        public readonly Outcome $outcome,
        public readonly int $attempt = 0,
        public readonly ?string $reply = null,
        public readonly array $differing = [],
        public readonly bool $replyPruned = false,
    ) {
    }
}
