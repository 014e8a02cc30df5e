<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * A journal's vital signs (sp_journal_vitals). Times are milliseconds since the Unix epoch on the
 * journal's clock (on PostgreSQL, the server's), like the reports' at_ms.
 */
final class JournalVitals
{
    /**
     * @param int $pruned deliveries compacted by retention (Journal::prune(), or the journal's
     *     $retentionMs) since the journal was created: their reply and content removed, a digest
     *     kept
     * @param int $forgotten compact records removed entirely (Journal::prune() with
     *     $forgetOlderThanMs) since the journal was created
     * @param int|null $sizeBytes the bytes the journal takes (SQLite: the file and its
     *     write-ahead log; PostgreSQL: its tables with their indexes); null when not known
     * @param int|null $oldestRecordMs when the oldest delivery kept whole (its reply stored) was
     *     finished: what the next prune compacts first; null when none is
     * @param int|null $lastDeliveryMs when a new index was last seen (a delivery carrying an
     *     index the journal had not seen; not a repeat): a busy casino that sees none for long has
     *     a broken route; null when none was seen
     * @param int|null $oldestGapMs when the oldest missing index was found missing (an index
     *     above it was first seen); null when nothing is missing
     */
    public function __construct(
        public readonly int $pruned,
        public readonly int $forgotten,
        public readonly ?int $sizeBytes,
        public readonly ?int $oldestRecordMs,
        public readonly ?int $lastDeliveryMs,
        public readonly ?int $oldestGapMs,
    ) {
    }
}
