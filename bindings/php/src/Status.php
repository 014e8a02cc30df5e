<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * The library's status codes (enum sp_status of slotpartner_ffi.h; a test checks that they
 * match). Codes are never renumbered; new ones are appended. SlotPartnerException::$status holds
 * one of them, SlotPartnerException::$statusName its name.
 */
final class Status
{
    public const OK = 0;
    public const INVALID_ARGUMENT = 1;
    public const PANIC = 2;
    public const BODY_TOO_LARGE = 3;
    public const INVALID_UTF8 = 4;
    public const INVALID_JSON = 5;
    public const DUPLICATE_KEY = 6;
    public const TOO_DEEP = 7;
    public const NOT_AN_OBJECT = 8;
    public const MISSING_FIELD = 9;
    public const WRONG_TYPE = 10;
    public const OUT_OF_RANGE = 11;
    public const INVALID_VALUE = 12;
    public const UNKNOWN_EVENT = 13;
    public const MISSING_TOKEN = 14;
    public const WRONG_TOKEN = 15;
    public const FORBIDDEN_SOURCE = 16;
    public const CONNECT = 17;
    public const TIMEOUT = 18;
    public const TLS = 19;
    public const HTTP_STATUS = 20;
    public const BAD_RESPONSE = 21;
    public const RESPONSE_TOO_LARGE = 22;
    public const CONFLICT = 23;
    public const JOURNAL = 24;
    public const CLAIM_LOST = 25;
    public const BUSY = 26;

    private function __construct()
    {
    }
}
