// slotpartner.hpp: a header-only C++17 wrapper over the slotpartner C API (slotpartner.h).
//
// - RAII owners: every object the library allocates is freed by a destructor; nothing to free
//   by hand. Owners are movable, not copyable.
// - Strings are std::string_view borrowed from the owner that returned them (an Event, Games),
//   valid while that owner lives. An absent optional string is std::nullopt.
// - Failures throw slotpartner::Error carrying the status, the field and the message, and, for
//   a refused callback, the HTTP status and body the endpoint should answer with (and the
//   event's name, index and transactionId as far as the body let them be read).
// - Replies: send each with Event::reply_http_status(): 200, except for a refused balance
//   query, which states no balance (`{"playerBalance":{"errorMessage":"..."}}`) and gets the
//   receiver's balance_failure_http_status (500 by default).
// - Threads: Receiver, Client and Journal may be shared by any number of threads;
//   ReceiverConfig, ClientConfig, JournalConfig, Event and Games belong to one thread at a time.
// - Exactly once: a Journal given to ReceiverConfig::journal() claims each delivery with
//   Event::begin() before the partner's logic runs: SP_BEGIN_NEW (run the logic, reply, then
//   Event::finish()), SP_BEGIN_DONE (send Claim::reply with 200, run nothing) or
//   SP_BEGIN_NOT_JOURNALED (a balance query: run the logic). With the ledger in the journal's
//   database, Event::stage() puts its credit in the transaction that finish() commits the reply
//   with (SqlValue parameters). Failures: SP_ERR_CONFLICT (409),
//   SP_ERR_BUSY and SP_ERR_JOURNAL (503), answered with Error::http_status()/response_body().
//   After a transient failure of the partner's own store, Event::abandon() and answer 503. An
//   Event destroyed while claimed releases its claim. From attempt 2 on the logic may have run
//   before (a worker died after crediting): the ledger must refuse a second credit for the same
//   transactionId (a unique key). FFI calls per journaled callback: handle, begin, reply,
//   finish, free (five); a repeat: handle, begin, free.
// - Lost events: a Recovery fetches every index missing from a receiver's journal again through a
//   Client (ClientConfig::fetch_action/fetch_index_param/fetch_event_key; defaults "getEvent",
//   "index", "event", assumptions) and hands out each event already claimed, as after begin()
//   gave SP_BEGIN_NEW: run the logic, reply, finish(). Recovery::report() says what it did.
// - The operator's side: Journal::status() counts what waits (unfinished deliveries, open
//   conflicts and index jumps, unrecoverable indexes); Journal::report() lists it as JSON;
//   resolve(), accept_jump(), jump_is_gap(), resolve_conflict(), close_unfinished() and
//   renumber() settle it, each with a note kept for audit. Journal::prune() (or
//   JournalConfig::retention_ms()) removes what the service can no longer resend;
//   Journal::vitals() says what it did and how long ago the journal last heard from the service.
#ifndef SLOTPARTNER_HPP
#define SLOTPARTNER_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "slotpartner.h"

namespace slotpartner {

/// A failed call: the library's status, the offending field (may be empty), the message and,
/// when the failure has one, the HTTP answer an endpoint should give. status_name() gives the
/// library's name of the status; the journal's are SP_ERR_CONFLICT (the transactionId came
/// before with other content; the message names it; 409), SP_ERR_JOURNAL (the storage failed;
/// 503), SP_ERR_CLAIM_LOST (the claim was abandoned, or its lease expired and another attempt
/// took it over; nothing stored) and SP_ERR_BUSY (another worker holds the claim; 503).
class Error : public std::runtime_error {
public:
    Error(sp_status status, std::string field, const std::string &message, uint16_t http_status,
          std::string response_body, std::optional<std::string> event_name = std::nullopt,
          std::optional<int64_t> index = std::nullopt, std::optional<int64_t> transaction_id = std::nullopt)
        : std::runtime_error(message), status_(status), field_(std::move(field)), http_status_(http_status),
          response_body_(std::move(response_body)), event_name_(std::move(event_name)), index_(index),
          transaction_id_(transaction_id) {}

    sp_status status() const noexcept { return status_; }
    const char *status_name() const noexcept { return sp_status_name(static_cast<int32_t>(status_)); }
    /// The field, such as "jackpotPayout.moneyWon"; empty when the failure concerns none.
    const std::string &field() const noexcept { return field_; }
    /// The HTTP status an endpoint should answer with (401, 403, 413, 400, 200 for a known
    /// event with invalid fields, or the receiver's balance_failure_http_status, 500 by default,
    /// for a balance query with invalid fields; 409 for a journal conflict, 503 for a busy claim
    /// or a journal whose storage failed).
    uint16_t http_status() const noexcept { return http_status_; }
    /// The JSON body an endpoint should answer with (`{"playerBalance":{"errorMessage":"..."}}`,
    /// no balance stated, for a balance query with invalid fields).
    const std::string &response_body() const noexcept { return response_body_; }
    /// For a refused callback body: the `event` (or `action`) value as far as the body let it be
    /// read; nullopt when it could not be, and for other failures.
    const std::optional<std::string> &event_name() const noexcept { return event_name_; }
    /// The refused event's index, when the body carried a readable one.
    std::optional<int64_t> index() const noexcept { return index_; }
    /// The refused event's transactionId, when the body carried a readable one.
    std::optional<int64_t> transaction_id() const noexcept { return transaction_id_; }

private:
    sp_status status_;
    std::string field_;
    uint16_t http_status_;
    std::string response_body_;
    std::optional<std::string> event_name_;
    std::optional<int64_t> index_;
    std::optional<int64_t> transaction_id_;
};

namespace detail {

inline std::string_view view(sp_str s) noexcept { return s.ptr ? std::string_view(s.ptr, s.len) : std::string_view(); }

inline std::optional<std::string_view> optional_view(sp_str s) noexcept {
    return s.ptr ? std::optional<std::string_view>(std::string_view(s.ptr, s.len)) : std::nullopt;
}

/// Throws the calling thread's last failure when `status` is not SP_OK: read whole with
/// sp_last_error (one call) and copied at once, its views being valid only until the thread's
/// next status-returning call.
inline void check(sp_status status) {
    if (status == SP_OK) {
        return;
    }
    sp_error e{};
    if (sp_last_error(&e) != SP_OK) { // no failure recorded
        throw Error(status, std::string(), sp_status_name(static_cast<int32_t>(status)), 0, std::string());
    }
    std::optional<std::string> event_name;
    if (e.event_name.ptr != nullptr) {
        event_name.emplace(view(e.event_name));
    }
    throw Error(status, std::string(view(e.field)), std::string(view(e.message)), e.http_status,
                std::string(view(e.response_body)), std::move(event_name),
                e.has_index ? std::optional<int64_t>(e.index) : std::nullopt,
                e.has_transaction_id ? std::optional<int64_t>(e.transaction_id) : std::nullopt);
}

template <class T, void (*Free)(T *)> struct Deleter {
    void operator()(T *p) const noexcept { Free(p); }
};

template <class T, void (*Free)(T *)> using Owner = std::unique_ptr<T, Deleter<T, Free>>;

/// A NUL-terminated copy for the C API (string_view need not be terminated).
inline std::string terminated(std::string_view s) { return std::string(s); }

/// A request header, address or note for the C API: a NUL inside would cut it short
/// (`<token>\0junk` read as `<token>`), so it becomes 0xFF (never UTF-8) and the library refuses
/// the value.
inline std::string header(std::string_view s) {
    std::string text(s);
    for (char &c : text) {
        if (c == '\0') {
            c = static_cast<char>(0xFF);
        }
    }
    return text;
}

} // namespace detail

/// A delivery journal's settings (sp_journal_config); every setter throws Error on a bad value.
class JournalConfig {
public:
    /// `sqlite:PATH` (one file that every process and thread of a host shares; created if absent)
    /// or `postgres://USER@HOST/DATABASE` (callbacks landing on several hosts).
    explicit JournalConfig(std::string_view url) {
        sp_journal_config *config = nullptr;
        detail::check(sp_journal_config_new(detail::terminated(url).c_str(), &config));
        config_.reset(config);
    }

    /// How long a claim is held for a worker that neither finishes nor abandons it (it died)
    /// before the next delivery takes it over as attempt 2: 1 ms to 24 h (default 30000).
    JournalConfig &lease_ms(uint64_t ms) {
        detail::check(sp_journal_config_set_lease_ms(config_.get(), ms));
        return *this;
    }
    /// How long Event::begin() waits for another worker's live claim on the same delivery before
    /// throwing SP_ERR_BUSY: at most 24 h (default 2000).
    JournalConfig &busy_wait_ms(uint64_t ms) {
        detail::check(sp_journal_config_set_busy_wait_ms(config_.get(), ms));
        return *this;
    }
    /// true (the default): a stored reply is flushed to disk before Event::finish() returns.
    JournalConfig &durable(bool durable) {
        detail::check(sp_journal_config_set_durable(config_.get(), durable));
        return *this;
    }
    /// true: a new delivery's claim is written only by Event::finish(), with the reply and the
    /// staged statements, in one transaction (false, the default: Event::begin() writes it in a
    /// commit of its own): half the journal's writes and commits a delivery. Two deliveries of
    /// one key arriving at once may then both run the logic: the first finish() to commit stores
    /// its reply and none of the other's staged statements take effect: the other's finish()
    /// returns when the stored delivery has the same content and the very same reply (handled
    /// once, this reply the stored one), else throws Error (SP_ERR_CLAIM_LOST). Choose it only when everything the logic does is staged (Event::stage()) or
    /// absorbed by the ledger's unique transactionId, never when it calls out (a wallet's API)
    /// before finish(). A worker dying before finish() leaves nothing: the index stays missing
    /// and recovery fetches it; abandon() stores the delivery abandoned, as without it.
    JournalConfig &claim_at_finish(bool at_finish) {
        detail::check(sp_journal_config_set_claim_at_finish(config_.get(), at_finish));
        return *this;
    }
    /// The index gap detection counts from; nullopt for the lowest index seen (the default).
    JournalConfig &first_index(std::optional<int64_t> index) {
        detail::check(sp_journal_config_set_first_index(config_.get(), index ? *index : -1));
        return *this;
    }
    /// The largest reply Event::finish() stores (default 65536).
    JournalConfig &max_reply_bytes(size_t bytes) {
        detail::check(sp_journal_config_set_max_reply_bytes(config_.get(), bytes));
        return *this;
    }
    /// How long one statement waits for a lock another process holds (default 5000).
    JournalConfig &lock_timeout_ms(uint64_t ms) {
        detail::check(sp_journal_config_set_lock_timeout_ms(config_.get(), ms));
        return *this;
    }
    /// PostgreSQL: how long one round trip waits for the server's answer before the call fails
    /// (default: the lock time-out + 10000); the URL's command_timeout (seconds) wins.
    JournalConfig &command_timeout_ms(uint64_t ms) {
        detail::check(sp_journal_config_set_command_timeout_ms(config_.get(), ms));
        return *this;
    }
    /// How far beyond the highest index seen an index may land and still open a gap of its size
    /// (at least 1; default 100000); beyond it the index is recorded as an index jump for the
    /// operator to decide (Journal::accept_jump(), Journal::jump_is_gap()). Throws Error (field
    /// "max_index_jump") below 1.
    JournalConfig &max_index_jump(int64_t max_jump) {
        detail::check(sp_journal_config_set_max_index_jump(config_.get(), max_jump));
        return *this;
    }
    /// How many runs of recovery may get HTTP 404 for an index before it is reported
    /// unrecoverable and no longer fetched (at least 1; default 3). Throws Error (field
    /// "not_found_limit") for 0.
    JournalConfig &not_found_limit(uint32_t runs) {
        detail::check(sp_journal_config_set_not_found_limit(config_.get(), runs));
        return *this;
    }
    /// The journal's own retention, in milliseconds: 0 (the default) for none, else at least
    /// 86400000 (a day). With it, Event::finish() runs, at most once a second per open journal
    /// and after its own commit, one batch of Journal::prune(PruneOptions(ms)) (compact records
    /// kept); a failure of that batch does not fail the finish. Throws Error (field "retention")
    /// for 1 to 86399999 or from INT64_MAX on.
    JournalConfig &retention_ms(uint64_t ms) {
        detail::check(sp_journal_config_set_retention_ms(config_.get(), ms));
        return *this;
    }

    const sp_journal_config *get() const noexcept { return config_.get(); }

private:
    detail::Owner<sp_journal_config, sp_journal_config_free> config_;
};

/// A journal's counts and gap figures, over every process using it.
struct JournalStatus {
    uint64_t handled;     ///< finished with a stored reply
    uint64_t replayed;    ///< answered from the journal with a stored reply
    uint64_t conflicts;   ///< refused: their key came before with other content
    uint64_t refused;     ///< refused by validation, their index readable (not missing)
    uint64_t in_progress; ///< claimed, neither finished nor abandoned
    uint64_t missing;     ///< indexes between first_index and highest_index never seen
    std::optional<int64_t> first_index;   ///< configured, else the lowest index seen
    std::optional<int64_t> highest_index; ///< the highest index seen
    std::optional<int64_t> watermark;     ///< every index from first_index up to it was seen
    uint64_t unfinished;     ///< claimed and never finished: abandoned, or their lease ran out
    uint64_t open_conflicts; ///< conflicts no operator resolved yet (Journal::resolve_conflict())
    uint64_t index_jumps;    ///< index jumps and reused indexes no operator decided yet
    uint64_t resolved;       ///< indexes of the current numbering closed by hand (Journal::resolve())
    uint64_t unrecoverable;  ///< missing or unfinished indexes answered 404 for not_found_limit runs: not fetched
    int64_t numbering;       ///< the current numbering: 1 until Journal::renumber()

    /// Whether an operator must look: indexes missing, deliveries unfinished, conflicts or index
    /// jumps open.
    bool needs_attention() const noexcept {
        return missing > 0 || unfinished > 0 || open_conflicts > 0 || index_jumps > 0;
    }
};

/// A journal's vital signs (Journal::vitals()). Times are milliseconds since the Unix epoch on
/// the journal's clock (on PostgreSQL, the server's).
struct JournalVitals {
    uint64_t pruned;    ///< deliveries compacted by retention since the journal was created
    uint64_t forgotten; ///< compact records removed entirely (forget_older_than_ms) since then
    std::optional<uint64_t> size_bytes;      ///< the bytes the journal takes, when known
    std::optional<int64_t> oldest_record_ms; ///< when the oldest delivery kept whole was finished
    /// When a new index was last seen (not a repeat): a busy casino that sees none for long has a
    /// broken route.
    std::optional<int64_t> last_delivery_ms;
    std::optional<int64_t> oldest_gap_ms; ///< when the oldest missing index was found missing
};

/// What Journal::prune() removes: the library's defaults for `older_than_ms` (compact records
/// kept, batches of 200 rows 10 ms apart, no time limit), then what the setters change.
class PruneOptions {
public:
    /// Finished deliveries finished more than `older_than_ms` ago (at least 86400000, a day) are
    /// compacted: their reply and content removed, a digest of their decisive content and the
    /// reply's outcome kept.
    explicit PruneOptions(uint64_t older_than_ms) { detail::check(sp_prune_options_default(&options_, older_than_ms)); }
    /// Compact records older than this are removed entirely (a repeat of one is then a new
    /// delivery); longer than older_than_ms. 0: kept (the default).
    PruneOptions &forget_older_than_ms(uint64_t ms) {
        options_.forget_older_than_ms = ms;
        return *this;
    }
    /// Rows per transaction, 1 to 100000 (0: the default, 200): a delivery waits for at most one.
    PruneOptions &batch(uint32_t rows) {
        options_.batch = rows;
        return *this;
    }
    /// The pause between two batches, at most 60000 ms (default 10).
    PruneOptions &pause_ms(uint32_t ms) {
        options_.pause_ms = ms;
        return *this;
    }
    /// Stop after about this long, whatever is left (the next prune goes on); 0: until done.
    PruneOptions &max_time_ms(uint64_t ms) {
        options_.max_time_ms = ms;
        return *this;
    }

    const sp_prune_options &get() const noexcept { return options_; }

private:
    sp_prune_options options_{};
};

/// What Journal::prune() did.
struct PruneReport {
    uint64_t compacted;         ///< finished deliveries compacted (reply and content removed)
    uint64_t forgotten;         ///< compact records removed (forget_older_than_ms)
    uint64_t refused_removed;   ///< records of deliveries refused by validation removed
    uint64_t conflicts_removed; ///< resolved conflicts removed
    uint64_t batches;           ///< transactions run
    uint64_t longest_batch_us;  ///< the longest a batch took: what a delivery may have waited
    uint64_t bytes_returned;    ///< bytes given back to the file system (new SQLite journals)
    /// Nothing eligible is left: false when max_time_ms stopped it first, or when an export was
    /// running (Journal::export_file()), which a prune waits for by stopping at once.
    bool complete;
    bool export_running; ///< it stopped at once for an export running
};

/// Missing indexes `first` to `last`, inclusive.
struct IndexRange {
    int64_t first;
    int64_t last;
    bool operator==(const IndexRange &other) const noexcept { return first == other.first && last == other.last; }
};

/// An open delivery journal; share it among threads. Receivers it was given to keep it open after
/// it is destroyed.
class Journal {
public:
    /// Opens the journal (creating its tables the first time). Throws Error: SP_ERR_INVALID_ARGUMENT
    /// for an unusable URL (field "journal_url") or setting, SP_ERR_JOURNAL (503) when the storage
    /// cannot be used (unreachable server, read-only or corrupt file, a newer schema version).
    explicit Journal(const JournalConfig &config) {
        sp_journal *journal = nullptr;
        detail::check(sp_journal_open(config.get(), &journal));
        journal_.reset(journal);
    }
    /// Opens the journal at `url` with the default settings.
    explicit Journal(std::string_view url) : Journal(JournalConfig(url)) {}

    /// Counts and gap figures. Throws Error (SP_ERR_JOURNAL) when the storage fails.
    JournalStatus status() const {
        sp_journal_stats s{};
        detail::check(sp_journal_status(journal_.get(), &s));
        auto optional = [](bool has, int64_t value) { return has ? std::optional<int64_t>(value) : std::nullopt; };
        return JournalStatus{s.handled,
                             s.replayed,
                             s.conflicts,
                             s.refused,
                             s.in_progress,
                             s.missing,
                             optional(s.has_first_index, s.first_index),
                             optional(s.has_highest_index, s.highest_index),
                             optional(s.has_watermark, s.watermark),
                             s.unfinished,
                             s.open_conflicts,
                             s.index_jumps,
                             s.resolved,
                             s.unrecoverable,
                             s.numbering};
    }

    /// The indexes never seen between the first index and the highest seen, as at most `limit`
    /// (1 to 1,000,000) inclusive ranges in order. Throws Error (SP_ERR_JOURNAL; field "limit"
    /// for a limit out of range).
    std::vector<IndexRange> missing(size_t limit = 1000) const {
        sp_index_ranges *ranges = nullptr;
        detail::check(sp_journal_missing(journal_.get(), limit, &ranges));
        return take(ranges);
    }

    /// missing(limit) without the gaps found missing less than `min_age_ms` ago (an index above
    /// them was first seen that long ago): a younger gap is usually an event still on its way,
    /// which a recovery would race. Throws Error as missing() does.
    std::vector<IndexRange> missing_older_than(uint64_t min_age_ms, size_t limit = 1000) const {
        sp_index_ranges *ranges = nullptr;
        detail::check(sp_journal_missing_older_than(journal_.get(), min_age_ms, limit, &ranges));
        return take(ranges);
    }

    /// What retention did, the journal's size, when its oldest whole record was finished, when a
    /// new index last arrived and when the oldest gap opened (sp_journal_vitals; reads what
    /// status() reads, and the size). Throws Error (SP_ERR_JOURNAL) when the storage fails.
    JournalVitals vitals() const {
        sp_journal_vital_signs v{};
        detail::check(sp_journal_vitals(journal_.get(), &v));
        auto optional = [](bool has, int64_t value) { return has ? std::optional<int64_t>(value) : std::nullopt; };
        return JournalVitals{v.pruned,
                             v.forgotten,
                             v.has_size_bytes ? std::optional<uint64_t>(v.size_bytes) : std::nullopt,
                             optional(v.has_oldest_record_ms, v.oldest_record_ms),
                             optional(v.has_last_delivery_ms, v.last_delivery_ms),
                             optional(v.has_oldest_gap_ms, v.oldest_gap_ms)};
    }

    /// Removes what the service can no longer resend (sp_journal_prune): compacts the deliveries
    /// finished longer ago than `options` says (a repeat of one with the same decisive content is
    /// handed out as its next attempt with Event::reply_pruned() true, and the ledger decides;
    /// other content is SP_ERR_CONFLICT), forgets compact records when asked, removes old refused
    /// records and resolved conflicts; never an unfinished delivery, an open conflict or a gap.
    /// Runs in batches, each its own short transaction, and blocks until done or max_time_ms:
    /// call it from cron or a thread of its own, not inside a callback. Throws Error:
    /// SP_ERR_INVALID_ARGUMENT (field "older_than", "forget_older_than", "batch" or "pause"),
    /// SP_ERR_JOURNAL (what earlier batches removed stays removed).
    PruneReport prune(const PruneOptions &options) const {
        sp_prune_report r{};
        detail::check(sp_journal_prune(journal_.get(), &options.get(), &r));
        return PruneReport{r.compacted,        r.forgotten,      r.refused_removed,
                           r.conflicts_removed, r.batches,        r.longest_batch_us,
                           r.bytes_returned,    r.complete,       r.export_running};
    }

    /// What the journal keeps for an operator, as a JSON array (sp_journal_report): index jumps,
    /// conflicts, resolutions or unrecoverable indexes, at most `limit` (0 gives "[]"); `all`
    /// adds decided jumps and resolved conflicts. Throws Error: SP_ERR_INVALID_ARGUMENT (field
    /// "kind" for a value that is no sp_journal_report_kind), SP_ERR_JOURNAL.
    std::string report(sp_journal_report_kind kind, bool all = false, size_t limit = SIZE_MAX) const {
        sp_buffer *buffer = nullptr;
        detail::check(sp_journal_report(journal_.get(), static_cast<int32_t>(kind), all, limit, &buffer));
        detail::Owner<sp_buffer, sp_buffer_free> owner(buffer);
        return std::string(detail::view(owner->text));
    }

    /// Closes the missing indexes `first` to `last` by hand (events the service confirms do not
    /// exist, or settled another way), with `note` (required) kept for audit; returns how many
    /// were missing. Throws Error: SP_ERR_INVALID_ARGUMENT (field "range": first above last, a
    /// negative index, or beyond the highest index seen; field "note"), SP_ERR_JOURNAL.
    uint64_t resolve(int64_t first, int64_t last, std::string_view note) const {
        uint64_t closed = 0;
        detail::check(sp_journal_resolve(journal_.get(), first, last, detail::header(note).c_str(), &closed));
        return closed;
    }

    /// Accepts the open index jump or reused index `id` (its "id" in the index-jump report): the
    /// numbering really moved. Throws Error: SP_ERR_INVALID_ARGUMENT (field "id": no open entry
    /// has it; field "note"), SP_ERR_JOURNAL.
    void accept_jump(int64_t id, std::string_view note) const {
        detail::check(sp_journal_accept_jump(journal_.get(), id, detail::header(note).c_str()));
    }

    /// Declares the open index jump `id` a gap: its stretch counts as missing again, for recovery
    /// to fetch. Throws Error as accept_jump() does.
    void jump_is_gap(int64_t id, std::string_view note) const {
        detail::check(sp_journal_jump_is_gap(journal_.get(), id, detail::header(note).c_str()));
    }

    /// Marks the open conflict `id` (its "id" in the conflict report) resolved. Throws Error:
    /// SP_ERR_INVALID_ARGUMENT (field "id": no open conflict has it; field "note"), SP_ERR_JOURNAL.
    void resolve_conflict(int64_t id, std::string_view note) const {
        detail::check(sp_journal_resolve_conflict(journal_.get(), id, detail::header(note).c_str()));
    }

    /// Closes by hand the unfinished deliveries (abandoned, or their lease ran out) carrying
    /// `index` (an event the service answers 404 for, settled another way, or of an earlier
    /// numbering), with `note` (required) kept for audit: no longer counted unfinished nor
    /// fetched; a later delivery of such an event still runs as its next attempt. Returns how
    /// many were closed. Throws Error: SP_ERR_INVALID_ARGUMENT (field "index": no unfinished
    /// delivery carries it; field "note"), SP_ERR_JOURNAL.
    uint64_t close_unfinished(int64_t index, std::string_view note) const {
        uint64_t closed = 0;
        detail::check(sp_journal_close_unfinished(journal_.get(), index, detail::header(note).c_str(), &closed));
        return closed;
    }

    /// Starts a new numbering from index `first` after the service restarted its indexes;
    /// records and stored replies stay. Returns the new numbering. Refused while indexes of the
    /// current numbering are missing, unless `give_up_gaps`: then each missing range is recorded
    /// as resolved with the note. Throws Error: SP_ERR_INVALID_ARGUMENT (field "first_index":
    /// negative, or indexes missing; field "note"), SP_ERR_JOURNAL.
    int64_t renumber(int64_t first, std::string_view note, bool give_up_gaps = false) const {
        int64_t numbering = 0;
        const std::string text = detail::header(note);
        detail::check(give_up_gaps ? sp_journal_renumber_giving_up_gaps(journal_.get(), first, text.c_str(), &numbering)
                                   : sp_journal_renumber(journal_.get(), first, text.c_str(), &numbering));
        return numbering;
    }

    /// Copies a SQLite journal into a new file at `dest_path` while the workers go on writing
    /// (sp_journal_backup; none of them is held up): the copy holds every delivery committed when
    /// the backup started, is written 0600 beside `dest_path` and takes that name only once
    /// complete, so a failed backup leaves nothing there. The copy is a journal of its own
    /// (Journal("sqlite:" + dest_path)). To restore it, stop every worker, remove the journal's
    /// -wal and -shm files and move the copy into the journal's place. A fork of this process
    /// waits for a backup in progress. Throws Error: SP_ERR_INVALID_ARGUMENT (field "dest": the
    /// file exists, as a backup never replaces one, names no file, or lies in a folder that does
    /// not exist or is not writable; field "journal_url": a PostgreSQL journal, the message
    /// giving the pg_dump command), SP_ERR_JOURNAL.
    void backup(std::string_view dest_path) const {
        detail::check(sp_journal_backup(journal_.get(), detail::header(dest_path).c_str()));
    }

    /// Writes every delivery whose first delivery lies in `since_ms` to `until_ms` (ms since the
    /// Unix epoch, `until_ms` left out; INT64_MAX for no end) to a new file at `path`, for
    /// reconciliation (sp_journal_export): SP_EXPORT_CSV (RFC 4180, a header row, CRLF) or
    /// SP_EXPORT_JSONL (one JSON object per line). Named export_file because `export` is a C++
    /// keyword. The file is created 0600 beside `path` under a temporary name and takes the name
    /// only once complete; an existing file is never replaced. Returns the number of rows.
    /// Throws Error: SP_ERR_INVALID_ARGUMENT (field "path": it exists, its folder does not, it
    /// cannot be written; "format"; "until_ms": not after `since_ms`), SP_ERR_BUSY (another export
    /// of the journal runs: one at a time, retention waits for it), SP_ERR_JOURNAL.
    uint64_t export_file(std::string_view path, int64_t since_ms, int64_t until_ms,
                         sp_export_format format = SP_EXPORT_CSV) const {
        uint64_t rows = 0;
        detail::check(sp_journal_export(journal_.get(), since_ms, until_ms, static_cast<int32_t>(format),
                                        detail::header(path).c_str(), &rows));
        return rows;
    }

    const sp_journal *get() const noexcept { return journal_.get(); }

private:
    /// The ranges the library handed out, copied, then freed.
    static std::vector<IndexRange> take(sp_index_ranges *ranges) {
        detail::Owner<sp_index_ranges, sp_index_ranges_free> owner(ranges);
        std::vector<IndexRange> out;
        out.reserve(owner->len);
        for (size_t i = 0; i < owner->len; i++) {
            out.push_back({owner->ranges[i].first, owner->ranges[i].last});
        }
        return out;
    }

    detail::Owner<sp_journal, sp_journal_free> journal_;
};

/// What Event::begin() found.
struct Claim {
    /// SP_BEGIN_NEW: run the logic, reply, then Event::finish() (or Event::abandon() after a
    /// transient failure, and answer 503). SP_BEGIN_DONE: send `reply` with HTTP 200, run
    /// nothing. SP_BEGIN_NOT_JOURNALED: a balance query (or an unknown event without an index):
    /// run the logic and send its reply.
    sp_begin outcome;
    /// For SP_BEGIN_NEW: 1 the first time, 2 and on after a worker died or abandoned it (the
    /// logic may have run before: the ledger must refuse a second credit; Event::differing()
    /// names the decisive fields that changed since). 0 otherwise.
    int64_t attempt;
    /// For SP_BEGIN_DONE: the stored reply, byte for byte, owned by the Event (valid until its
    /// next reply or its destruction); empty otherwise.
    std::string_view reply;
};

/// A field the spec does not define, as raw JSON.
struct ExtraField {
    std::string_view name;
    std::string_view json;
};

/// gameSessionBuyRefund.
struct BuyRefund {
    std::string_view game_session_identifier;
    std::optional<std::string_view> player_identifier;
    std::optional<std::string_view> player_partner_identifier;
    int64_t transaction_id;
    int64_t buy_transaction_id;
    int64_t game_session_id;
    std::string_view partner_game_request_identifier;
    int64_t game_id;
    bool is_mobile;
    std::optional<std::string_view> bonus_code;
};

/// jackpotPayout. money_won is in minor currency units.
struct JackpotPayout {
    std::string_view jackpot_identifier;
    std::optional<std::string_view> player_identifier;
    std::optional<std::string_view> player_partner_identifier;
    std::string_view currency_iso4217;
    int64_t money_won;
    int64_t coins_won;
    bool is_money;
    int64_t epoch_released_millis;
    bool is_primary;
    int64_t transaction_id;
    int64_t buy_transaction_id;
    std::string_view partner_game_request_identifier;
    int64_t game_session_id;
    int64_t game_id;
    std::optional<std::string_view> bonus_code;
    std::optional<bool> is_mobile;
};

/// getPlayerBalance.
struct BalanceQuery {
    std::optional<std::string_view> player_identifier;
    std::optional<std::string_view> player_partner_identifier;
};

/// One parameter of a statement staged with Event::stage(): SQL NULL, a 64-bit integer, UTF-8
/// text or bytes (a blob, bytea on PostgreSQL), as the C struct sp_sql_value. Text and bytes are
/// borrowed, not copied: they must outlive the call to stage(), which copies them (a temporary
/// in the call's argument list does). A bool, a floating-point value (an amount is an integer in
/// minor units), a character and a 64-bit unsigned integer (which could exceed INT64_MAX) do not
/// compile: convert explicitly.
class SqlValue {
public:
    /// SQL NULL.
    SqlValue() noexcept : value_{SP_SQL_NULL, 0, nullptr, 0} {}
    /// SQL NULL.
    SqlValue(std::nullptr_t) noexcept : SqlValue() {}
    /// SQL NULL.
    SqlValue(std::nullopt_t) noexcept : SqlValue() {}
    /// A 64-bit integer (an amount in minor units, an id).
    template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
                                            !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char16_t> &&
                                            !std::is_same_v<T, char32_t> && (std::is_signed_v<T> || sizeof(T) < 8),
                                        int> = 0>
    SqlValue(T value) noexcept : value_{SP_SQL_INT, static_cast<int64_t>(value), nullptr, 0} {}
    template <class T, std::enable_if_t<std::is_same_v<T, bool> || std::is_floating_point_v<T> ||
                                            std::is_same_v<T, char> || (std::is_unsigned_v<T> && sizeof(T) >= 8),
                                        int> = 0>
    SqlValue(T value) = delete;
    /// UTF-8 text (the library refuses other bytes, naming params[N].bytes); on PostgreSQL sent in
    /// text format, so that the server reads it as the parameter's type (numeric, uuid...).
    SqlValue(std::string_view text) noexcept
        : value_{SP_SQL_TEXT, 0, reinterpret_cast<const uint8_t *>(text.data()), text.size()} {}
    /// UTF-8 text.
    SqlValue(const std::string &text) noexcept : SqlValue(std::string_view(text)) {}
    /// UTF-8 text up to its NUL; a null pointer is SQL NULL.
    SqlValue(const char *text) noexcept : SqlValue() {
        if (text != nullptr) {
            *this = SqlValue(std::string_view(text));
        }
    }
    /// Bytes.
    static SqlValue blob(const void *data, size_t len) noexcept {
        SqlValue v;
        v.value_ = sp_sql_value{SP_SQL_BLOB, 0, static_cast<const uint8_t *>(data), len};
        return v;
    }
    /// Bytes.
    static SqlValue blob(std::string_view bytes) noexcept { return blob(bytes.data(), bytes.size()); }
    /// Bytes.
    static SqlValue blob(const std::vector<uint8_t> &bytes) noexcept { return blob(bytes.data(), bytes.size()); }

    /// The C value (kind, int_value, bytes, len).
    const sp_sql_value &get() const noexcept { return value_; }

private:
    sp_sql_value value_;
};

static_assert(std::is_standard_layout_v<SqlValue> && sizeof(SqlValue) == sizeof(sp_sql_value),
              "an array of SqlValue is read by the library as an array of sp_sql_value");

/// A validated callback event. Owns everything its views point to; replies built for it are
/// valid until the next reply or its destruction (which releases an unfinished journal claim). The C struct is readable through get()
/// (`index_unreadable`, `reply_http_status` among its fields).
class Event {
public:
    explicit Event(sp_event *event) : event_(event) {}

    sp_event_kind kind() const noexcept { return event_->kind; }
    /// The event (or action) name.
    std::string_view name() const noexcept { return detail::view(event_->name); }
    /// The service's consecutive index, when the body carries one as a non-negative integer.
    std::optional<int64_t> index() const noexcept {
        return event_->has_index ? std::optional<int64_t>(event_->index) : std::nullopt;
    }
    /// True when the body has the index field but its value is not a non-negative integer
    /// ("42", -1, 1.5): the event is handled with no index() and the raw value is in
    /// extra_field("index") (or the configured index field). Never true under
    /// ReceiverConfig::strict_index(true), which refuses such events.
    bool index_unreadable() const noexcept { return event_->index_unreadable; }
    /// The HTTP status to send the last reply built for this event with: 200, except for a
    /// refused balance query (reply(false, ...) on a balance query): the receiver's
    /// balance_failure_http_status, 500 by default. 0 until a reply is built.
    uint16_t reply_http_status() const noexcept { return event_->reply_http_status; }

    /// The refund; throws std::logic_error for another kind.
    BuyRefund buy_refund() const {
        const sp_buy_refund *r = require(event_->buy_refund, "gameSessionBuyRefund");
        return BuyRefund{detail::view(r->game_session_identifier),
                         detail::optional_view(r->player_identifier),
                         detail::optional_view(r->player_partner_identifier),
                         r->transaction_id,
                         r->buy_transaction_id,
                         r->game_session_id,
                         detail::view(r->partner_game_request_identifier),
                         r->game_id,
                         r->is_mobile,
                         detail::optional_view(r->bonus_code)};
    }

    /// The payout; throws std::logic_error for another kind.
    JackpotPayout jackpot_payout() const {
        const sp_jackpot_payout *p = require(event_->jackpot_payout, "jackpotPayout");
        return JackpotPayout{detail::view(p->jackpot_identifier),
                             detail::optional_view(p->player_identifier),
                             detail::optional_view(p->player_partner_identifier),
                             detail::view(p->currency_iso4217),
                             p->money_won,
                             p->coins_won,
                             p->is_money,
                             p->epoch_released_millis,
                             p->is_primary,
                             p->transaction_id,
                             p->buy_transaction_id,
                             detail::view(p->partner_game_request_identifier),
                             p->game_session_id,
                             p->game_id,
                             detail::optional_view(p->bonus_code),
                             p->has_is_mobile ? std::optional<bool>(p->is_mobile) : std::nullopt};
    }

    /// The balance query; throws std::logic_error for another kind.
    BalanceQuery balance_query() const {
        const sp_balance_query *q = require(event_->balance_query, "getPlayerBalance");
        return BalanceQuery{detail::optional_view(q->player_identifier), detail::optional_view(q->player_partner_identifier)};
    }

    /// The fields the spec does not define (the index among them), in body order.
    std::vector<ExtraField> extra_fields() const {
        std::vector<ExtraField> fields;
        fields.reserve(event_->extra_fields_len);
        for (size_t i = 0; i < event_->extra_fields_len; i++) {
            fields.push_back({detail::view(event_->extra_fields[i].name), detail::view(event_->extra_fields[i].json)});
        }
        return fields;
    }

    /// The raw JSON of the extra field `name`, or std::nullopt.
    std::optional<std::string_view> extra_field(std::string_view name) const {
        for (const ExtraField &field : extra_fields()) {
            if (field.name == name) {
                return field.json;
            }
        }
        return std::nullopt;
    }

    /// The reply to a refund or payout: `{"refund":{"success":true,"errorMessage":""}}`, or with
    /// success false and `message` (required then, forbidden on success). For a balance query
    /// only a failure: `{"playerBalance":{"errorMessage":"<message>"}}`, stating no balance.
    /// Send it with reply_http_status().
    std::string_view reply(bool success, std::string_view message = {}) {
        std::string text = detail::terminated(message);
        sp_str out{nullptr, 0};
        detail::check(sp_event_reply(event_.get(), success, message.empty() ? nullptr : text.c_str(), &out));
        return detail::view(out);
    }

    /// The successful reply to a balance query; `currency` empty for the configured one. Sent
    /// with reply_http_status() (200).
    std::string_view reply_balance(int64_t money, std::string_view currency = {}, int64_t coins = 0) {
        std::string text = detail::terminated(currency);
        sp_str out{nullptr, 0};
        detail::check(sp_event_reply_balance(event_.get(), money, currency.empty() ? nullptr : text.c_str(), coins, &out));
        return detail::view(out);
    }

    /// Claims this delivery in the receiver's journal (ReceiverConfig::journal()): the
    /// exactly-once step between Receiver::handle() and the partner's logic. Its key is the
    /// event's name and transactionId (refund, payout), or its index for other events. May wait
    /// up to the journal's busy wait. Throws Error: SP_ERR_CONFLICT (409; the message names the
    /// transactionId and the fields that differ; the first stays), SP_ERR_BUSY (503),
    /// SP_ERR_JOURNAL (503), SP_ERR_INVALID_ARGUMENT (no journal, or begun already).
    Claim begin() {
        sp_claim claim{};
        detail::check(sp_event_begin(event_.get(), &claim));
        return Claim{claim.outcome, claim.attempt, detail::view(claim.reply)};
    }

    /// After begin() gave SP_BEGIN_NEW (or on an event a Recovery handed out): the decisive
    /// fields in which this delivery differs from an earlier delivery of the same key that was
    /// never finished (abandoned, or its worker died), one "field: first X, now Y" each
    /// ("moneyWon: first 100, now 250"). Such a resend is handed out as new rather than refused
    /// with 409, since nothing was stored for the first; the journal records the conflict for
    /// the operator: log it. Empty when none, which is always the case on attempt 1 (and before
    /// begin()). The views are owned by this Event, valid until its destruction. One call
    /// (sp_event_differing) each time it is asked; throws Error for a moved-from Event.
    std::vector<std::string_view> differing() const {
        sp_str out{nullptr, 0};
        detail::check(sp_event_differing(event_.get(), &out));
        std::vector<std::string_view> fields;
        for (std::string_view text = detail::view(out); !text.empty();) {
            const size_t end = text.find('\n');
            fields.push_back(text.substr(0, end));
            text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
        }
        return fields;
    }

    /// After begin() gave SP_BEGIN_NEW (or on an event a Recovery handed out): true when this
    /// delivery was handled before, longer ago than the journal keeps replies (Journal::prune()
    /// or JournalConfig::retention_ms() compacted it): the stored reply is gone and the same
    /// decisive content was seen. It runs as the next attempt (2 and on) and the ledger, keyed by
    /// transactionId, decides, exactly as after a crash between its commit and finish(): answer
    /// what it says of that transaction, and log it. Kept after the claim settles; false without
    /// a claim (before begin(), answered from the journal, not journaled, moved from). One call
    /// (sp_event_reply_pruned) each time it is asked.
    bool reply_pruned() const noexcept { return sp_event_reply_pruned(event_.get()); }

    /// Stages a statement of the partner's own (its ledger's credit, say) on this event's claim,
    /// to run when finish() stores the reply: in the same transaction, after the claim is
    /// confirmed this event's, in the order staged. The credit and the stored reply commit
    /// together, with one durable commit, or not at all; exactly once no longer rests on the
    /// ledger's unique key. For a ledger in the journal's own database. One call
    /// (sp_event_stage); the library copies `sql` and `params`.
    ///
    /// `sql` is the database's own dialect with its own placeholders: `$1, $2` on PostgreSQL,
    /// `?` (or `?1`) on SQLite; `params` are bound to them, never spliced into the text. A
    /// statement runs for its effect: its rows are never read, so the reply cannot depend on them
    /// (logic that must read first keeps its own transaction and the ledger's unique key).
    ///
    /// finish() runs them all or none: when one fails it throws SP_ERR_JOURNAL (503), field
    /// "statements[N]" (from 0), naming the statement and the database's error; nothing was
    /// stored, the claim is still held and the statements stay staged (finish again, or abandon
    /// and answer 503). SP_ERR_CLAIM_LOST from finish() means none of them ran: answer 503.
    /// abandon() and the destructor drop them unrun.
    ///
    /// Throws Error SP_ERR_INVALID_ARGUMENT, staging nothing: field "event" when the event holds
    /// no claim (not begun, answered from the journal, not journaled, finished, abandoned; or
    /// moved from); "sql" when it is empty, not UTF-8, over 1 MiB, or not one statement starting
    /// with INSERT, UPDATE, DELETE, MERGE, REPLACE, SELECT, WITH or SET LOCAL as both databases
    /// read it (transaction control, the journal's, a command that outlives the transaction, DDL,
    /// a second statement after ';': refused), or 1,000 statements are staged already; "params" beyond 65,535 values; "params[N].bytes" for text
    /// that is not UTF-8.
    void stage(std::string_view sql, std::initializer_list<SqlValue> params = {}) {
        stage_values(sql, params.begin(), params.size());
    }
    /// stage() with the parameters in a vector (built at run time).
    void stage(std::string_view sql, const std::vector<SqlValue> &params) {
        stage_values(sql, params.data(), params.size());
    }

    /// Stores the reply of a claimed event once the partner committed its own work: every later
    /// delivery of it gets this reply, byte for byte. `reply` nullopt stores the reply last built
    /// (reply(), reply_balance()), which is what the host sends. The statements staged with
    /// stage() run in the same transaction first. Does nothing for an event answered from the
    /// journal, not journaled or finished. Throws Error: SP_ERR_CLAIM_LOST (nothing stored: the
    /// lease expired and another delivery took the claim, "taken over by attempt N", and the work
    /// was done, so send the reply all the same, unless statements were staged: none of them ran,
    /// answer 503; or abandon() released it, "the claim was abandoned"; thrown again by every
    /// later finish()), SP_ERR_INVALID_ARGUMENT (field "reply": over the journal's limit or none
    /// built, the claim stays; or not begun), SP_ERR_JOURNAL (the storage failed, or a staged
    /// statement did, field "statements[N]": nothing stored, the claim stays held and the
    /// statements staged: finish again or abandon).
    void finish(std::optional<std::string_view> reply = std::nullopt) {
        detail::check(sp_event_finish(event_.get(), reply ? reinterpret_cast<const uint8_t *>(reply->data()) : nullptr,
                                      reply ? reply->size() : 0));
    }

    /// Releases the claim after a transient failure of the partner (its database is down), so
    /// that the next delivery runs the logic again as attempt 2; answer HTTP 503. After it,
    /// finish() throws Error SP_ERR_CLAIM_LOST ("the claim was abandoned"), every time. Does
    /// nothing for an event answered from the journal, not journaled, finished or abandoned
    /// already. Staged statements are dropped unrun. Destroying a claimed Event releases its
    /// claim the same way. Throws Error:
    /// SP_ERR_CLAIM_LOST when another delivery took the claim over ("taken over by attempt N";
    /// finish() and abandon() throw it from then on, every time), SP_ERR_JOURNAL (the claim stays
    /// held: abandon again, or destroy the Event, which tries once more; if that fails too, its
    /// lease ends it), SP_ERR_INVALID_ARGUMENT (not begun).
    void abandon() { detail::check(sp_event_abandon(event_.get())); }

    /// The C event, owned by this object.
    const sp_event *get() const noexcept { return event_.get(); }

private:
    void stage_values(std::string_view sql, const SqlValue *params, size_t len) {
        // SqlValue is an sp_sql_value (standard layout, its only member, the same size).
        detail::check(sp_event_stage(event_.get(), sql.data(), sql.size(),
                                     len == 0 ? nullptr : reinterpret_cast<const sp_sql_value *>(params), len));
    }

    template <class T> static const T *require(const T *typed, const char *expected) {
        if (typed == nullptr) {
            throw std::logic_error(std::string("the event is not a ") + expected);
        }
        return typed;
    }

    detail::Owner<sp_event, sp_event_free> event_;

    friend class Endpoint;
    /// Gives the C event back without freeing it (an exchange's event is the exchange's).
    sp_event *release() noexcept { return event_.release(); }
};

/// A receiver's settings; every setter throws Error on a bad value.
class ReceiverConfig {
public:
    ReceiverConfig() {
        sp_receiver_config *config = nullptr;
        detail::check(sp_receiver_config_new(&config));
        config_.reset(config);
    }

    ReceiverConfig &add_token(std::string_view token) {
        detail::check(sp_receiver_config_add_token(config_.get(), detail::terminated(token).c_str()));
        return *this;
    }
    /// "staging", "production", "any", or a comma-separated list of addresses and CIDR ranges.
    ReceiverConfig &sources(std::string_view sources) {
        detail::check(sp_receiver_config_set_sources(config_.get(), detail::terminated(sources).c_str()));
        return *this;
    }
    ReceiverConfig &trusted_proxies(std::string_view proxies) {
        detail::check(sp_receiver_config_set_trusted_proxies(config_.get(), detail::terminated(proxies).c_str()));
        return *this;
    }
    ReceiverConfig &max_body_bytes(size_t bytes) {
        detail::check(sp_receiver_config_set_max_body_bytes(config_.get(), bytes));
        return *this;
    }
    ReceiverConfig &max_depth(size_t depth) {
        detail::check(sp_receiver_config_set_max_depth(config_.get(), depth));
        return *this;
    }
    ReceiverConfig &max_identifier_bytes(size_t bytes) {
        detail::check(sp_receiver_config_set_max_identifier_bytes(config_.get(), bytes));
        return *this;
    }
    /// The name of the service's event index field (default "index").
    ReceiverConfig &index_field(std::string_view name) {
        detail::check(sp_receiver_config_set_index_field(config_.get(), detail::terminated(name).c_str()));
        return *this;
    }
    /// true: refuse an event whose index field is present but not a non-negative integer,
    /// naming the field (HTTP 200 with the event's wrapper and success false). Default false:
    /// such an event is handled with no index() and index_unreadable() true.
    ReceiverConfig &strict_index(bool strict) {
        detail::check(sp_receiver_config_set_strict_index(config_.get(), strict));
        return *this;
    }
    ReceiverConfig &reject_unknown_events(bool reject) {
        detail::check(sp_receiver_config_set_reject_unknown_events(config_.get(), reject));
        return *this;
    }
    ReceiverConfig &balance_wrapper(std::string_view wrapper) {
        detail::check(sp_receiver_config_set_balance_wrapper(config_.get(), detail::terminated(wrapper).c_str()));
        return *this;
    }
    ReceiverConfig &balance_currency(std::string_view currency) {
        detail::check(sp_receiver_config_set_balance_currency(config_.get(), detail::terminated(currency).c_str()));
        return *this;
    }
    /// The HTTP status a refused balance query is answered with (Event::reply_http_status()
    /// after reply(false, ...), and Error::http_status() of a balance query refused by
    /// validation): 200, or 400 to 599. Default 500. The body states no balance either way.
    ReceiverConfig &balance_failure_http_status(uint16_t http_status) {
        detail::check(sp_receiver_config_set_balance_failure_http_status(config_.get(), http_status));
        return *this;
    }
    ReceiverConfig &omit_empty_error_message(bool omit) {
        detail::check(sp_receiver_config_set_omit_empty_error_message(config_.get(), omit));
        return *this;
    }
    /// Journals the deliveries of receivers made from this configuration: their events can be
    /// claimed with Event::begin(), and a body refused by validation whose index can be read is
    /// recorded as seen and refused (not missing). The receiver keeps the journal open.
    ReceiverConfig &journal(const Journal &journal) {
        detail::check(sp_receiver_config_set_journal(config_.get(), journal.get()));
        return *this;
    }

    const sp_receiver_config *get() const noexcept { return config_.get(); }

private:
    detail::Owner<sp_receiver_config, sp_receiver_config_free> config_;
};

/// A configured callback receiver; share it among threads.
class Receiver {
public:
    explicit Receiver(const ReceiverConfig &config) {
        sp_receiver *receiver = nullptr;
        detail::check(sp_receiver_new(config.get(), &receiver));
        receiver_.reset(receiver);
    }

    /// Authenticates and parses one callback. `token` is the X-Service-Token header (nullopt when
    /// absent; compared case-insensitively), `remote_addr` the peer address (nullopt when
    /// unknown: not looked at under sources "any"), `forwarded_for` the X-Forwarded-For header
    /// as the bytes received (read only when the peer is a trusted proxy, ignored otherwise; not
    /// UTF-8 from a trusted proxy: refused, 403). Throws Error whose http_status() and
    /// response_body() are the answer to give.
    Event handle(std::optional<std::string_view> token, std::optional<std::string_view> remote_addr,
                 std::string_view body, std::optional<std::string_view> forwarded_for = std::nullopt) const {
        std::string token_text = token ? detail::header(*token) : std::string();
        std::string remote = remote_addr ? detail::header(*remote_addr) : std::string();
        std::string forwarded = forwarded_for ? detail::header(*forwarded_for) : std::string();
        sp_event *event = nullptr;
        detail::check(sp_receiver_handle(receiver_.get(), token ? token_text.c_str() : nullptr,
                                         remote_addr ? remote.c_str() : nullptr,
                                         forwarded_for ? forwarded.c_str() : nullptr,
                                         reinterpret_cast<const uint8_t *>(body.data()), body.size(), &event));
        return Event(event);
    }

    /// Checks the source address, then the token, as handle() does first, without a body:
    /// nothing is parsed and no journal is touched (sp_receiver_authenticate). Call it before
    /// opening a Journal, so that a caller without the token never makes the journal connect;
    /// then handle the callback with a Receiver that has the journal. The arguments are those of
    /// handle(). Throws Error as handle() throws it for the same request (SP_ERR_MISSING_TOKEN,
    /// SP_ERR_WRONG_TOKEN: 401; SP_ERR_FORBIDDEN_SOURCE: 403).
    void authenticate(std::optional<std::string_view> token, std::optional<std::string_view> remote_addr,
                      std::optional<std::string_view> forwarded_for = std::nullopt) const {
        std::string token_text = token ? detail::header(*token) : std::string();
        std::string remote = remote_addr ? detail::header(*remote_addr) : std::string();
        std::string forwarded = forwarded_for ? detail::header(*forwarded_for) : std::string();
        detail::check(sp_receiver_authenticate(receiver_.get(), token ? token_text.c_str() : nullptr,
                                               remote_addr ? remote.c_str() : nullptr,
                                               forwarded_for ? forwarded.c_str() : nullptr));
    }

    /// Parses a body without authenticating it.
    Event parse(std::string_view body) const {
        sp_event *event = nullptr;
        detail::check(sp_receiver_parse(receiver_.get(), reinterpret_cast<const uint8_t *>(body.data()), body.size(), &event));
        return Event(event);
    }

    /// The C receiver, owned by this object.
    const sp_receiver *get() const noexcept { return receiver_.get(); }

private:
    detail::Owner<sp_receiver, sp_receiver_free> receiver_;
};

/// The final answer to one request (sp_exchange): send status(), headers() and body(); log()
/// is a line for your log (never send it), empty when there is nothing to say. The views are
/// owned by this object.
class Exchange {
public:
    uint16_t status() const noexcept { return exchange_->response.status; }
    /// The reason phrase of status() (`Service Unavailable`), for a status line.
    const char *reason() const noexcept { return sp_http_reason(status()); }
    std::string_view body() const noexcept { return detail::view(exchange_->response.body); }
    std::string_view log() const noexcept { return detail::view(exchange_->response.log); }
    /// Retry-After on a 503, Allow on a 405, and last Content-Type, always.
    std::vector<std::pair<std::string_view, std::string_view>> headers() const {
        std::vector<std::pair<std::string_view, std::string_view>> all;
        for (size_t i = 0; i < exchange_->response.headers_len; i++) {
            const sp_header &h = exchange_->response.headers[i];
            all.emplace_back(detail::view(h.name), detail::view(h.value));
        }
        return all;
    }
    /// The C exchange, owned by this object.
    const sp_exchange *get() const noexcept { return exchange_.get(); }

private:
    friend class Endpoint;
    explicit Exchange(sp_exchange *exchange) : exchange_(exchange) {}
    detail::Owner<sp_exchange, sp_exchange_free> exchange_;
};

/// A callback endpoint (sp_endpoint): every answer a request can get is decided by the library;
/// your logic runs only for a new refund, payout, balance query or passed-through event. Make one
/// per process and share it among threads; its journal is opened by the first request that
/// needs it.
class Endpoint {
public:
    /// From the SLOTPARTNER_* environment variables (sp_endpoint_from_environment).
    static Endpoint from_environment() {
        sp_endpoint *endpoint = nullptr;
        detail::check(sp_endpoint_from_environment(&endpoint));
        return Endpoint(endpoint);
    }
    /// From a JSON object of settings (sp_endpoint_from_settings).
    static Endpoint from_settings(std::string_view json) {
        sp_endpoint *endpoint = nullptr;
        detail::check(sp_endpoint_from_settings(json.data(), json.size(), &endpoint));
        return Endpoint(endpoint);
    }

    /// Serves one request as the web server saw it (absent headers nullopt). `logic(Event &)`
    /// builds the event's reply (reply(), reply_balance(), stage() the credit); it may return a
    /// string_view, the reply of an event that has no reply builder (SP_EVENT_KIND_OTHER). Any
    /// exception it throws is a failure that may pass: the claim is released, the answer is 503
    /// with Retry-After, and what() goes to log(). Throws Error only for unusable arguments.
    template <class Logic>
    Exchange serve(std::string_view method, std::optional<std::string_view> token,
                   std::optional<std::string_view> remote_addr, std::optional<std::string_view> forwarded_for,
                   std::string_view body, Logic &&logic) const {
        std::string method_text = detail::header(method);
        std::string token_text = token ? detail::header(*token) : std::string();
        std::string remote = remote_addr ? detail::header(*remote_addr) : std::string();
        std::string forwarded = forwarded_for ? detail::header(*forwarded_for) : std::string();
        sp_exchange *raw = nullptr;
        detail::check(sp_endpoint_receive(endpoint_.get(), method_text.c_str(), token ? token_text.c_str() : nullptr,
                                          remote_addr ? remote.c_str() : nullptr,
                                          forwarded_for ? forwarded.c_str() : nullptr,
                                          reinterpret_cast<const uint8_t *>(body.data()), body.size(), &raw));
        Exchange exchange(raw);
        if (raw->event == nullptr) {
            return exchange;
        }
        std::string failure;
        std::optional<std::string> reply;
        {
            Event event(raw->event);
            struct Borrowed { Event &event; ~Borrowed() { event.release(); } } borrowed{event};
            try {
                if constexpr (std::is_void_v<std::invoke_result_t<Logic, Event &>>) {
                    logic(event);
                } else {
                    reply = std::string(std::string_view(logic(event)));
                }
            } catch (const std::exception &e) {
                failure = e.what()[0] != '\0' ? e.what() : "the logic failed";
            } catch (...) {
                failure = "the logic failed";
            }
        }
        detail::check(sp_exchange_complete(raw, failure.empty() ? nullptr : failure.c_str(),
                                           reply ? reinterpret_cast<const uint8_t *>(reply->data()) : nullptr,
                                           reply ? reply->size() : 0));
        return exchange;
    }

    /// The C endpoint, owned by this object.
    const sp_endpoint *get() const noexcept { return endpoint_.get(); }

private:
    explicit Endpoint(sp_endpoint *endpoint) : endpoint_(endpoint) {}
    detail::Owner<sp_endpoint, sp_endpoint_free> endpoint_;
};

/// `{"<wrapper>":{"success":...,"errorMessage":...}}` for any wrapper key.
inline std::string reply_result(std::string_view wrapper, bool success, std::string_view message = {}) {
    std::string wrapper_text = detail::terminated(wrapper), message_text = detail::terminated(message);
    sp_buffer *buffer = nullptr;
    detail::check(sp_reply_result_new(wrapper_text.c_str(), success, message.empty() ? nullptr : message_text.c_str(), false,
                                      &buffer));
    detail::Owner<sp_buffer, sp_buffer_free> owner(buffer);
    return std::string(detail::view(owner->text));
}

/// One game (spec 2.1), viewing the Games it came in.
struct Game {
    int64_t game_id;
    std::string_view name;
    std::vector<std::string_view> rules; ///< raw JSON of each rule
    std::string_view game_type;
    int64_t min_players;
    int64_t max_players;
    bool supports_tournament;
    std::optional<std::vector<std::string_view>> categories; ///< raw JSON of each; nullopt for null
    std::string_view image_square;
    std::string_view image_background;
    std::string_view image_logo;
    std::string_view description_short;
    std::string_view description_long;
};

/// The games of one getGames call; owns every string its Game views point to.
class Games {
public:
    explicit Games(sp_games *games) : games_(games) {}

    size_t size() const noexcept { return games_->len; }

    Game operator[](size_t i) const {
        const sp_game &g = games_->games[i];
        auto list = [](const sp_str *items, size_t len) {
            std::vector<std::string_view> out;
            out.reserve(len);
            for (size_t k = 0; k < len; k++) {
                out.push_back(detail::view(items[k]));
            }
            return out;
        };
        return Game{g.game_id,
                    detail::view(g.name),
                    list(g.rules, g.rules_len),
                    detail::view(g.game_type),
                    g.min_players,
                    g.max_players,
                    g.supports_tournament,
                    g.has_categories ? std::optional<std::vector<std::string_view>>(list(g.categories, g.categories_len))
                                     : std::nullopt,
                    detail::view(g.image_square),
                    detail::view(g.image_background),
                    detail::view(g.image_logo),
                    detail::view(g.description_short),
                    detail::view(g.description_long)};
    }

private:
    detail::Owner<sp_games, sp_games_free> games_;
};

/// A client's settings; every setter throws Error on a bad value.
class ClientConfig {
public:
    /// `base_url` must be https://; `token` a UUID.
    ClientConfig(std::string_view base_url, std::string_view token) {
        sp_client_config *config = nullptr;
        detail::check(
            sp_client_config_new(detail::terminated(base_url).c_str(), detail::terminated(token).c_str(), &config));
        config_.reset(config);
    }

    ClientConfig &add_ca_file(std::string_view path) {
        detail::check(sp_client_config_add_ca_file(config_.get(), detail::terminated(path).c_str()));
        return *this;
    }
    ClientConfig &add_ca_pem(std::string_view pem) {
        detail::check(sp_client_config_add_ca_pem(config_.get(), reinterpret_cast<const uint8_t *>(pem.data()), pem.size()));
        return *this;
    }
    ClientConfig &connect_timeout_ms(uint64_t ms) {
        detail::check(sp_client_config_set_connect_timeout_ms(config_.get(), ms));
        return *this;
    }
    ClientConfig &timeout_ms(uint64_t ms) {
        detail::check(sp_client_config_set_timeout_ms(config_.get(), ms));
        return *this;
    }
    ClientConfig &retries(uint32_t retries, uint64_t backoff_ms) {
        detail::check(sp_client_config_set_retries(config_.get(), retries, backoff_ms));
        return *this;
    }
    ClientConfig &trust_roots(sp_trust_roots roots) {
        detail::check(sp_client_config_set_trust_roots(config_.get(), static_cast<int32_t>(roots)));
        return *this;
    }
    ClientConfig &proxy(std::string_view url) {
        detail::check(sp_client_config_set_proxy(config_.get(), detail::terminated(url).c_str()));
        return *this;
    }
    ClientConfig &max_response_bytes(uint64_t bytes) {
        detail::check(sp_client_config_set_max_response_bytes(config_.get(), bytes));
        return *this;
    }
    ClientConfig &lenient_games(bool lenient) {
        detail::check(sp_client_config_set_lenient_games(config_.get(), lenient));
        return *this;
    }
    /// How a Recovery fetches a lost event again. The spec says a lost event "can be obtained
    /// later through the partner-to-service interface by giving the id of the lost event" but
    /// shows neither the operation, nor its parameter, nor its answer, so all three are
    /// assumptions: the request is `{"action":<fetch_action>,"<fetch_index_param>":<index>}` and
    /// the answer holds the event under `fetch_event_key` (empty: the answer is the event
    /// itself). Defaults "getEvent", "index" and "event": `{"action":"getEvent","index":42}`
    /// answered `{"event":{...}}`, as the sandbox serves it. A fetch is retried like getGames;
    /// a 404 answer means the service knows no such event.
    ClientConfig &fetch_action(std::string_view action) {
        detail::check(sp_client_config_set_fetch_action(config_.get(), detail::terminated(action).c_str()));
        return *this;
    }
    /// The parameter carrying the lost event's index (default "index"); see fetch_action().
    ClientConfig &fetch_index_param(std::string_view name) {
        detail::check(sp_client_config_set_fetch_index_param(config_.get(), detail::terminated(name).c_str()));
        return *this;
    }
    /// The key of the fetch answer holding the event (default "event"; "" for the answer
    /// itself); see fetch_action().
    ClientConfig &fetch_event_key(std::string_view key) {
        detail::check(sp_client_config_set_fetch_event_key(config_.get(), detail::terminated(key).c_str()));
        return *this;
    }

    const sp_client_config *get() const noexcept { return config_.get(); }

private:
    detail::Owner<sp_client_config, sp_client_config_free> config_;
};

/// A client of the service's action address; share it among threads.
class Client {
public:
    explicit Client(const ClientConfig &config) {
        sp_client *client = nullptr;
        detail::check(sp_client_new(config.get(), &client));
        client_.reset(client);
    }

    /// getGames in `locale` ("en-US"), for one game when `game_id` is given.
    Games get_games(std::string_view locale, std::optional<int64_t> game_id = std::nullopt) const {
        sp_games *games = nullptr;
        detail::check(sp_client_get_games(client_.get(), detail::terminated(locale).c_str(), game_id ? *game_id : -1, &games));
        return Games(games);
    }

    /// Any action with `params_json`, a JSON object of its parameters; the answer JSON.
    std::string call(std::string_view action, std::string_view params_json = "{}") const {
        sp_buffer *buffer = nullptr;
        detail::check(sp_client_call(client_.get(), detail::terminated(action).c_str(),
                                     reinterpret_cast<const uint8_t *>(params_json.data()), params_json.size(), &buffer));
        detail::Owner<sp_buffer, sp_buffer_free> owner(buffer);
        return std::string(detail::view(owner->text));
    }

    /// The C client, owned by this object.
    const sp_client *get() const noexcept { return client_.get(); }

private:
    detail::Owner<sp_client, sp_client_free> client_;
};

/// A missing index a Recovery did not recover.
struct RecoveryFailure {
    int64_t index;
    /// SP_RECOVERY_NOT_FOUND (the service answered 404), SP_RECOVERY_SERVICE (unreachable, a
    /// time-out, another HTTP error), SP_RECOVERY_INVALID_EVENT (the answer or the event failed
    /// validation, or carries another index), SP_RECOVERY_JOURNAL (a conflict, a busy claim, the
    /// storage failed).
    sp_recovery_reason reason;
    /// The library's status, such as SP_ERR_HTTP_STATUS.
    sp_status status;
    /// Names the field or the HTTP status ("getEvent: HTTP 500 ...").
    std::string message;

    const char *status_name() const noexcept { return sp_status_name(static_cast<int32_t>(status)); }
};

/// What a Recovery did so far, copied.
struct RecoveryReport {
    uint64_t missing;           ///< missing indexes the recovery set out to fetch (at most its limit)
    uint64_t recovered;         ///< events fetched and handed out, claimed
    uint64_t handled_meanwhile; ///< fetched but handled meanwhile by a late delivery (or not journaled)
    std::vector<RecoveryFailure> failures; ///< not recovered, in the order tried; the next recovery tries again
    /// Missing indexes no longer fetched (HTTP 404 for not_found_limit runs): they stay missing
    /// until resolved by hand (Journal::resolve()); not counted in `missing`.
    size_t unrecoverable;

    /// True when every missing index was tried and none failed.
    bool complete() const noexcept { return failures.empty() && recovered + handled_meanwhile == missing; }
};

/// A recovery of the events missing from a receiver's journal, fetched again through a client
/// (sp_recovery). One thread at a time; movable, not copyable. Events it handed out stay valid
/// after it is destroyed.
///
///     slotpartner::Recovery recovery(receiver, client);
///     while (std::optional<slotpartner::Event> event = recovery.next()) {
///         run_partner_logic(*event);   // credits, then event->reply(...)
///         event->finish();             // already claimed: no begin()
///     }
///     slotpartner::RecoveryReport report = recovery.report();
class Recovery {
public:
    /// Lists the indexes missing from `receiver`'s journal, lowest first, at most `limit` (1 to
    /// 1,000,000); fetches nothing yet. Throws Error: SP_ERR_INVALID_ARGUMENT (the receiver has
    /// no journal; a limit out of range, field "limit"), SP_ERR_JOURNAL (the journal cannot be
    /// read).
    Recovery(const Receiver &receiver, const Client &client, size_t limit = 10000) {
        sp_recovery *recovery = nullptr;
        detail::check(sp_recovery_new(receiver.get(), client.get(), limit, &recovery));
        recovery_.reset(recovery);
    }

    /// The next recovered event, already claimed in the journal (as after Event::begin() gave
    /// SP_BEGIN_NEW): run the logic, reply, then finish() (or abandon() after a transient
    /// failure of the ledger; an Event destroyed unfinished releases the claim). std::nullopt
    /// when every missing index was tried. Blocks for the calls to the service; indexes that
    /// fail go to the report.
    std::optional<Event> next() {
        sp_event *event = nullptr;
        detail::check(sp_recovery_next(recovery_.get(), &event));
        if (event == nullptr) {
            return std::nullopt;
        }
        return std::optional<Event>(std::in_place, event);
    }

    /// What the recovery did so far: counts and each failure, copied.
    RecoveryReport report() {
        sp_recovery_summary summary{};
        detail::check(sp_recovery_report(recovery_.get(), &summary));
        RecoveryReport report{summary.missing, summary.recovered, summary.handled_meanwhile, {}, summary.unrecoverable};
        report.failures.reserve(summary.failures_len);
        for (size_t i = 0; i < summary.failures_len; i++) {
            const sp_recovery_failure &f = summary.failures[i];
            report.failures.push_back({f.index, f.reason, f.status, std::string(detail::view(f.message))});
        }
        return report;
    }

    /// The C recovery, owned by this object.
    sp_recovery *get() noexcept { return recovery_.get(); }

private:
    detail::Owner<sp_recovery, sp_recovery_free> recovery_;
};

} // namespace slotpartner

#endif // SLOTPARTNER_HPP
