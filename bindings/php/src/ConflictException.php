<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * Status 23 (SP_ERR_CONFLICT): the delivery journal holds this delivery's key (the event's name and
 * transactionId) with other content. The first delivery stays and this one is refused: answer
 * $httpStatus 409 with $responseBody. The message names the transactionId and the fields that
 * differ; log it, something upstream is wrong.
 */
final class ConflictException extends SlotPartnerException
{
}
