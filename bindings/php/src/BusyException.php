<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * Status 26 (SP_ERR_BUSY): another worker holds a live journal claim on this delivery and
 * did not finish within the journal's busy wait. Answer $httpStatus 503 so that the service
 * delivers again later.
 */
final class BusyException extends SlotPartnerException
{
}
