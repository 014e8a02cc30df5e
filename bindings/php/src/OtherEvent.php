<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * Any other event or action, passed through untyped (unless the Receiver rejects unknown
 * events): read $name, $index and $extra (every field but `event`/`action`, as raw JSON). The
 * library defines no reply for it: reply() throws ValidationException (SP_ERR_UNKNOWN_EVENT,
 * HTTP 400); answer it yourself. Lifetime and ownership: see Event.
 */
final class OtherEvent extends Event
{
}
