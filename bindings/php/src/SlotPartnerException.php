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
 * - $httpStatus and $responseBody: what an HTTP endpoint should answer (sp_last_error_response):
 *   401/403/413/400 with {"error":{...}}, or 200 with the event's wrapper and success false for a
 *   known event with invalid fields. Null when the library gave no answer.
 *
 * Subclasses by status: ConfigurationException (1), ValidationException (3-13),
 * AuthenticationException (14-16), TransportException (17-19, 22), ServiceException (20-21).
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
    ): self {
        return match (true) {
            $status === Status::INVALID_ARGUMENT
                => new ConfigurationException($message, $status, $statusName, $field, $httpStatus, $responseBody),
            $status >= Status::BODY_TOO_LARGE && $status <= Status::UNKNOWN_EVENT
                => new ValidationException($message, $status, $statusName, $field, $httpStatus, $responseBody),
            $status >= Status::MISSING_TOKEN && $status <= Status::FORBIDDEN_SOURCE
                => new AuthenticationException($message, $status, $statusName, $field, $httpStatus, $responseBody),
            $status === Status::CONNECT, $status === Status::TIMEOUT, $status === Status::TLS,
            $status === Status::RESPONSE_TOO_LARGE
                => new TransportException($message, $status, $statusName, $field, $httpStatus, $responseBody),
            $status === Status::HTTP_STATUS, $status === Status::BAD_RESPONSE
                => new ServiceException($message, $status, $statusName, $field, $httpStatus, $responseBody),
            default => new self($message, $status, $statusName, $field, $httpStatus, $responseBody),
        };
    }
}
