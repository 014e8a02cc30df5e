<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * The callback is not from the service: X-Service-Token missing (14) or wrong (15), or the
 * source address not allowed (16).
 *
 * Answer with $httpStatus (401 or 403) and $responseBody; nothing of the body was read.
 */
final class AuthenticationException extends SlotPartnerException
{
}
