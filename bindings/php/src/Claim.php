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
     */
    public function __construct(
        public readonly Outcome $outcome,
        public readonly int $attempt = 0,
        public readonly ?string $reply = null,
    ) {
    }
}
