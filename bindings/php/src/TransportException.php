<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * The service could not be reached or its answer could not be read: connection failure (17),
 * time-out (18), TLS failure such as an untrusted certificate (19), or an answer over the
 * client's limit (22).
 *
 * getGames is retried as configured before this is thrown; Client::call never is.
 */
final class TransportException extends SlotPartnerException
{
}
