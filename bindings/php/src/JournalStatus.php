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
     * @param int $unfinished deliveries claimed and never finished (abandoned, or their lease ran
     *     out): nothing was stored; the service or a recovery must deliver them again, or an
     *     operator closes them (Journal::closeUnfinished())
     * @param int $openConflicts entries of Journal::conflicts() no operator resolved yet
     * @param int $indexJumps entries of Journal::indexJumps() no operator decided yet
     * @param int $resolved indexes of the current numbering closed by hand (Journal::resolve())
     * @param int $unrecoverable indexes, missing or carrying an unfinished delivery, the service
     *     answered 404 for notFoundLimit recovery runs: no longer fetched
     *     (Journal::unrecoverable())
     * @param int $numbering the current numbering, 1 until Journal::renumber()
     *
     * $conflicts counts every delivery whose key came before with other decisive content:
     * refused ones, and ones handed out as new because the first was never finished.
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
        public readonly int $unfinished = 0,
        public readonly int $openConflicts = 0,
        public readonly int $indexJumps = 0,
        public readonly int $resolved = 0,
        public readonly int $unrecoverable = 0,
        public readonly int $numbering = 1,
    ) {
    }
}
