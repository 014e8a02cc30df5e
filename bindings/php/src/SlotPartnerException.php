<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * A failure reported by libslotpartner (or by this binding before it calls the library).
 *
 * - $status: the sp_status code (Status::*), also getCode();
 * - $statusName: its name, such as "SP_ERR_WRONG_TYPE";
 * - $field: the field or setting concerned, such as "jackpotPayout.moneyWon" ('' when none);
 * - getMessage(): the library's message, naming event, field and problem;
 * - $httpStatus and $responseBody: what an HTTP endpoint should answer: 401/403/413/400 with
 *   {"error":{...}}, 200 with the event's wrapper and success false for a known event with
 *   invalid fields, or 500 (the Receiver's balanceFailureHttpStatus) with
 *   {"playerBalance":{"errorMessage":"..."}} for a balance query with invalid fields; 409 for a
 *   journal conflict, 503 for the journal's other failures. Null when the library gave no answer;
 * - $eventName, $index, $transactionId: for a refused callback body, the event's name (`event`
 *   or `action`), index and transactionId as far as the body let them be read (null otherwise),
 *   to log which delivery was refused.
 *
 * The library's last error is read in one call (sp_last_error) right after the failure and
 * copied: getMessage() may be passed to the next call, e.g. $event->reply(false, $e->getMessage()).
 *
 * Subclasses by status: ConfigurationException (1), ValidationException (3-13),
 * AuthenticationException (14-16), TransportException (17-19, 22), ServiceException (20-21),
 * and for the delivery journal ConflictException (23), JournalException (24),
 * ClaimLostException (25) and BusyException (26).
 * A panic inside the library (2, the call had no effect) is a plain SlotPartnerException.
 */
class SlotPartnerException extends \RuntimeException
{
    public function __construct(
        string $message,
        public readonly int $status,
        public readonly string $statusName,
        public readonly string $field = '',
        public readonly ?int $httpStatus = null,
        public readonly ?string $responseBody = null,
        ?\Throwable $previous = null,
        public readonly ?string $eventName = null,
        public readonly ?int $index = null,
        public readonly ?int $transactionId = null,
    ) {
        parent::__construct($message, $status, $previous);
    }

    /** The exception of the class matching $status. */
    public static function create(
        string $message,
        int $status,
        string $statusName,
        string $field = '',
        ?int $httpStatus = null,
        ?string $responseBody = null,
        ?string $eventName = null,
        ?int $index = null,
        ?int $transactionId = null,
    ): self {
        $args = [$message, $status, $statusName, $field, $httpStatus, $responseBody, null, $eventName, $index, $transactionId];
        return match (true) {
            $status === Status::INVALID_ARGUMENT => new ConfigurationException(...$args),
            $status >= Status::BODY_TOO_LARGE && $status <= Status::UNKNOWN_EVENT => new ValidationException(...$args),
            $status >= Status::MISSING_TOKEN && $status <= Status::FORBIDDEN_SOURCE => new AuthenticationException(...$args),
            $status === Status::CONNECT, $status === Status::TIMEOUT, $status === Status::TLS,
            $status === Status::RESPONSE_TOO_LARGE => new TransportException(...$args),
            $status === Status::HTTP_STATUS, $status === Status::BAD_RESPONSE => new ServiceException(...$args),
            $status === Status::CONFLICT => new ConflictException(...$args),
            $status === Status::JOURNAL => new JournalException(...$args),
            $status === Status::CLAIM_LOST => new ClaimLostException(...$args),
            $status === Status::BUSY => new BusyException(...$args),
            default => new self(...$args),
        };
    }
}
