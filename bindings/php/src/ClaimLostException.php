<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * Status 25 (SP_ERR_CLAIM_LOST): the journal claim is no longer this worker's: it was abandoned
 * (Event::finish() after Event::abandon(): "the claim was abandoned"), or its lease expired and
 * another attempt took it over ("taken over by attempt N"); nothing was stored. Thrown again by
 * every later finish() of that event, and after a takeover by every abandon() too. Thrown by
 * finish() after a takeover, the partner's work was done: send the reply all the same (the other
 * delivery finds the credit in the ledger).
 */
final class ClaimLostException extends SlotPartnerException
{
}
