<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * What Event::begin() found (enum sp_begin).
 */
enum Outcome: int
{
    /**
     * The delivery is this worker's: run the partner's logic, build the reply, then
     * Event::finish() (or Event::abandon() after a transient failure, and answer 503).
     */
    case New = 1;

    /**
     * The delivery was handled before: send Claim::$reply (byte for byte the first reply) with
     * HTTP 200 and run nothing.
     */
    case Done = 2;

    /**
     * Not answered from the journal (a balance query, which must be current; an unknown event
     * without an index): run the logic and send its reply; its index was recorded.
     */
    case NotJournaled = 3;
}
