<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * An argument or setting is unusable (status 1): a missing or malformed token, an unknown source
 * list, an http:// base URL, a string holding a NUL byte, a negative limit, or the library that
 * cannot be loaded.
 */
final class ConfigurationException extends SlotPartnerException
{
}
