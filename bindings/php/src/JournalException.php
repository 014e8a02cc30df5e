<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * Status 24 (SP_ERR_JOURNAL): the delivery journal's storage failed (PostgreSQL unreachable,
 * a read-only or corrupt SQLite file, an unknown schema version, a full disk). Answer $httpStatus
 * 503 so that the service delivers again later.
 */
final class JournalException extends SlotPartnerException
{
}
