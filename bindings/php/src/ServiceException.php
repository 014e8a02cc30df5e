<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * The service answered, but not as expected: an HTTP status other than 200 (20, the message
 * holds the status and the start of the body) or an answer of the wrong shape (21, $field names
 * the culprit).
 */
final class ServiceException extends SlotPartnerException
{
}
