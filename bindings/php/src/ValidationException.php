<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * The body or an event is refused: too large, not UTF-8 or JSON, a repeated key, too deep, not
 * an object, a field missing, of the wrong type, out of range or invalid, or an unknown event
 * (statuses 3 to 13).
 *
 * Answer the callback with $httpStatus and $responseBody: 200 with the event's wrapper and
 * success false for a known event with invalid fields, 413 or 400 otherwise.
 */
final class ValidationException extends SlotPartnerException
{
}
