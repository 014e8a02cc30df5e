/*
 * journal_status: what a delivery journal has seen, and which event indexes it never saw.
 *
 * Usage: journal_status URL        (sqlite:PATH or postgres://USER@HOST/DATABASE)
 *
 * Prints the counts (handled, replayed, conflicts, refused, in progress, missing), what waits
 * for an operator (unfinished deliveries, open conflicts, open index jumps, unrecoverable
 * indexes) beside what was resolved by hand and the current numbering, then the first index, the
 * highest index and the watermark (every index up to it was seen), then the missing indexes as
 * ranges, one per line. Exit status: 0 when nothing needs an operator, 1 when indexes are
 * missing, deliveries unfinished, or conflicts or index jumps open (a cron job can alert on it;
 * `sp_journal_report` lists them, `sp_journal_resolve` and its siblings settle them), 2 on a usage
 * error or when the journal cannot be read.
 */
#include <inttypes.h>
#include <stdio.h>

#include "slotpartner.h"

#define MAX_RANGES 1000

static void print_optional(const char *name, bool present, int64_t value) {
    if (present) {
        printf("%s: %" PRId64 "\n", name, value);
    } else {
        printf("%s: none\n", name);
    }
}

int main(int argc, char **argv) {
    sp_journal_config *config = NULL;
    sp_journal *journal = NULL;
    sp_journal_stats stats;
    sp_index_ranges *missing = NULL;
    int rc = 2;

    if (argc != 2) {
        fprintf(stderr, "usage: journal_status URL   (sqlite:PATH or postgres://USER@HOST/DATABASE)\n");
        return 2;
    }
    if (sp_journal_config_new(argv[1], &config) != SP_OK || sp_journal_open(config, &journal) != SP_OK ||
        sp_journal_status(journal, &stats) != SP_OK || sp_journal_missing(journal, MAX_RANGES, &missing) != SP_OK) {
        sp_error error;
        if (sp_last_error(&error) == SP_OK) {
            fprintf(stderr, "journal_status: %s: %s\n", sp_status_name(error.status), error.message.ptr);
        }
        goto done;
    }
    printf("handled: %" PRIu64 "\nreplayed: %" PRIu64 "\nconflicts: %" PRIu64 "\nrefused: %" PRIu64 "\n",
           stats.handled, stats.replayed, stats.conflicts, stats.refused);
    printf("in progress: %" PRIu64 "\nmissing: %" PRIu64 "\n", stats.in_progress, stats.missing);
    printf("unfinished: %" PRIu64 "\nopen conflicts: %" PRIu64 "\nindex jumps: %" PRIu64 "\n", stats.unfinished,
           stats.open_conflicts, stats.index_jumps);
    printf("resolved: %" PRIu64 "\nunrecoverable: %" PRIu64 "\nnumbering: %" PRId64 "\n", stats.resolved,
           stats.unrecoverable, stats.numbering);
    print_optional("first index", stats.has_first_index, stats.first_index);
    print_optional("highest index", stats.has_highest_index, stats.highest_index);
    print_optional("watermark", stats.has_watermark, stats.watermark);
    for (size_t i = 0; i < missing->len; i++) {
        const sp_index_range *r = &missing->ranges[i];
        if (r->first == r->last) {
            printf("missing index %" PRId64 "\n", r->first);
        } else {
            printf("missing indexes %" PRId64 "-%" PRId64 "\n", r->first, r->last);
        }
    }
    if (missing->len == MAX_RANGES) {
        printf("(only the first %d ranges are shown)\n", MAX_RANGES);
    }
    rc = stats.missing == 0 && stats.unfinished == 0 && stats.open_conflicts == 0 && stats.index_jumps == 0 ? 0 : 1;
done:
    sp_index_ranges_free(missing);
    sp_journal_free(journal);
    sp_journal_config_free(config);
    return rc;
}
