<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * What a Recovery did so far (sp_recovery_summary), copied from the library.
 */
final class RecoveryReport
{
    /**
     * @param int $missing missing indexes the recovery set out to fetch (at most its limit)
     * @param int $recovered events fetched and handed out, claimed
     * @param int $handledMeanwhile events fetched but handled meanwhile by a late delivery
     *     (answered from the journal), or not journaled: nothing to do
     * @param list<RecoveryFailure> $failures the indexes not recovered, in the order tried; a
     *     later recovery tries them again
     * @param int $unrecoverable missing indexes the recovery left alone because the service
     *     answered 404 for them notFoundLimit runs (Journal's $notFoundLimit); not counted in
     *     $missing. They stay missing until resolved by hand (Journal::resolve());
     *     Journal::unrecoverable() lists them
     */
    public function __construct(
        public readonly int $missing,
        public readonly int $recovered,
        public readonly int $handledMeanwhile,
        public readonly array $failures,
        public readonly int $unrecoverable = 0,
    ) {
    }

    /** True when every missing index was tried and none failed. */
    public function complete(): bool
    {
        return $this->failures === [] && $this->recovered + $this->handledMeanwhile === $this->missing;
    }
}
