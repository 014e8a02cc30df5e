<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * Which certificate authorities a Client trusts besides the CA file or PEM it is given
 * (enum sp_trust_roots).
 */
enum TrustRoots: int
{
    /** Mozilla's root certificates, bundled in the library (the default). */
    case Bundled = 0;

    /** The operating system's certificate store. */
    case System = 1;

    /** Only the certificates given as caFile or caPem. */
    case ExtraOnly = 2;
}
