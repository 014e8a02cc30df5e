<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * What Journal::prune() did (sp_prune_report).
 */
final class PruneReport
{
    /**
     * @param int $compacted finished deliveries compacted (reply and content removed, digest kept)
     * @param int $forgotten compact records removed ($forgetOlderThanMs)
     * @param int $refusedRemoved records of deliveries refused by validation removed
     * @param int $conflictsRemoved resolved conflicts removed
     * @param int $batches transactions run
     * @param int $longestBatchUs the longest a batch's transaction took, in microseconds: what a
     *     delivery may have waited for it
     * @param int $bytesReturned bytes given back to the file system (SQLite journals created by
     *     this release); 0 on PostgreSQL, whose autovacuum reuses the space
     * @param bool $complete whether nothing eligible is left: false when $maxTimeMs stopped it
     *     first, or when an export was running (Journal::export()), which a prune waits for by
     *     stopping at once: run it again once the export is done
     * @param bool $exportRunning whether it stopped at once for an export running
     */
    public function __construct(
        public readonly int $compacted,
        public readonly int $forgotten,
        public readonly int $refusedRemoved,
        public readonly int $conflictsRemoved,
        public readonly int $batches,
        public readonly int $longestBatchUs,
        public readonly int $bytesReturned,
        public readonly bool $complete,
        public readonly bool $exportRunning,
    ) {
    }
}
