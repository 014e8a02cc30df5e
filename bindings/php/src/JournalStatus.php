<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * A journal's counts and gap figures (sp_journal_status), over every process using it.
 */
final class JournalStatus
{
    /**
     * @param int $handled deliveries finished with a stored reply
     * @param int $replayed deliveries answered from the journal with a stored reply
     * @param int $conflicts deliveries refused because their key came before with other content
     * @param int $refused deliveries refused by validation whose index could be read
     * @param int $inProgress deliveries claimed and neither finished nor abandoned
     * @param int $missing indexes between $firstIndex and $highestIndex never seen
     * @param int|null $firstIndex where gap detection counts from (configured, else the lowest
     *     index seen); null before any index was seen
     * @param int|null $highestIndex the highest index seen
     * @param int|null $watermark every index from $firstIndex up to this one was seen
     */
    public function __construct(
        public readonly int $handled,
        public readonly int $replayed,
        public readonly int $conflicts,
        public readonly int $refused,
        public readonly int $inProgress,
        public readonly int $missing,
        public readonly ?int $firstIndex,
        public readonly ?int $highestIndex,
        public readonly ?int $watermark,
    ) {
    }
}
