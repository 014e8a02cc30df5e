<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * Status 25 (SP_ERR_CLAIM_LOST): the journal claim is no longer this worker's (its lease
 * expired and another delivery took it over); nothing was stored. Thrown by Event::finish() after
 * the partner's work was done: send the reply all the same (the other delivery finds the credit
 * in the ledger).
 */
final class ClaimLostException extends SlotPartnerException
{
}
