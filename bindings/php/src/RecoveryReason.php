<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * Why a missing event was not recovered (enum sp_recovery_reason).
 */
enum RecoveryReason: int
{
    /** The service answered 404: it knows no event with this index. */
    case NotFound = 1;

    /** The service could not be reached, timed out, or answered another HTTP error. */
    case Service = 2;

    /**
     * The answer or the event in it is not valid: it failed the callback validation (the
     * message names the field), or carries another index than the one asked for.
     */
    case InvalidEvent = 3;

    /**
     * The journal refused or failed it: the same transaction came before with other content (a
     * conflict), a worker holds it (a late delivery still running), or the storage failed.
     */
    case Journal = 4;
}
