<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * A missing index a Recovery did not recover (sp_recovery_failure), copied from the library.
 */
final class RecoveryFailure
{
    /**
     * @param int $index the missing event's index
     * @param RecoveryReason $reason NotFound, Service, InvalidEvent or Journal
     * @param int $status the library's status (Status::HTTP_STATUS, Status::CONNECT, ...)
     * @param string $statusName its name, such as "SP_ERR_HTTP_STATUS"
     * @param string $message names the field or the HTTP status ("getEvent: HTTP 500 ...")
     */
    public function __construct(
        public readonly int $index,
        public readonly RecoveryReason $reason,
        public readonly int $status,
        public readonly string $statusName,
        public readonly string $message,
    ) {
    }

    /**
     * The exception a call failing this way throws (ServiceException, TransportException,
     * ValidationException, ConflictException, BusyException, JournalException...), to log or
     * throw.
     */
    public function exception(): SlotPartnerException
    {
        return SlotPartnerException::create($this->message, $this->status, $this->statusName);
    }
}
