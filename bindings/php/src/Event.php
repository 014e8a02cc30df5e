<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI\CData;

/**
 * A validated callback event: BuyRefund, JackpotPayout, BalanceQuery or OtherEvent.
 *
 * Every field is copied into readonly PHP properties when the event is built (the strings in one
 * copy of the event's `strings` block), so they stay valid whatever happens to the native event.
 *
 * From a Receiver without a journal, the library writes the event into a buffer of the binding's
 * (sp_receiver_handle_record): one FFI call, no native event. A successful reply is built by the
 * library once per Receiver (a balance reply once per currency, around marker amounts) and then
 * reused, so that such a callback costs that one call. A reply the library must build (the first
 * of each kind, a failure) is built inside a native event made for it from the same body
 * (sp_receiver_parse: the event keeps its Receiver and body until then), then kept like any.
 *
 * A native event (owned by this object) is kept only to build replies: it is freed with
 * sp_event_free when this object is destroyed (when the last reference goes, also when an
 * exception unwinds past it) or by free(). From a Receiver with a journal (and from Recovery),
 * the event comes with its native event (sp_receiver_handle), which begin() claims.
 *
 * With a journal (Receiver's $journal), begin() claims the event before the partner's logic
 * runs and finish() stores its reply: five FFI calls for a new delivery (handle, begin, reply,
 * finish, free), three for a repeat answered from the journal (handle, begin, free), four for a
 * balance query (handle, begin, reply, free); a delivery claimed again (attempt 2 and on) two
 * more, sp_event_differing and sp_event_reply_pruned, for Claim::$differing and
 * Claim::$replyPruned; each statement staged with stage() one more, sp_event_stage (it runs
 * inside finish()). Destroying or free()ing a claimed event that was neither finished nor
 * abandoned releases its claim, as abandon() does (its staged statements dropped unrun): the
 * next delivery runs the logic again.
 *
 * One thread at a time; not cloneable.
 */
abstract class Event
{
    private const KIND_BUY_REFUND = 1;
    private const KIND_JACKPOT_PAYOUT = 2;
    private const KIND_BALANCE_QUERY = 3;

    /** Event objects of this process not yet freed. */
    private static int $live = 0;

    /** The owned `sp_event *`; null before one is made for a reply (see handle()), or once freed. */
    private ?CData $handle = null;

    /** Whether this event is not freed yet (free(), or its destruction). */
    private bool $open = false;

    /**
     * For an event read from a record: the Receiver and body to make its native event from,
     * when a reply needs one; null once it is made, or freed.
     */
    private ?Receiver $receiver = null;

    private ?string $body = null;

    /** The `event` value (or `action` for the balance query and other actions). */
    public readonly string $name;

    /**
     * The service's consecutive event index (a non-negative integer); null when the body has
     * none, or when its value is unreadable (see $indexUnreadable).
     */
    public readonly ?int $index;

    /**
     * True when the body has the index field but its value is not a non-negative integer
     * ("42", -1, 1.5): the event is handled anyway, with $index null, and the raw value is in
     * $extra. Never true when the Receiver has strictIndex, which refuses such events instead.
     */
    public readonly bool $indexUnreadable;

    /**
     * The fields the spec does not define for this event (the index among them), name => raw
     * JSON exactly as the body wrote it, in body order.
     *
     * @var array<string, string>
     */
    public readonly array $extra;

    /** See replyHttpStatus(). */
    private int $replyHttpStatus = 0;

    /** Whether begin() was called: a claimed event's reply must be built inside it. */
    private bool $begun = false;

    /** False for an exchange's event (Endpoint): its exchange frees it, never this object. */
    private bool $owned = true;

    /** The library this event's calls go through. */
    protected readonly Native $native;

    /**
     * The success replies of the receiver the event came from, by event class, shared with it
     * (null: none kept). Read in place by reply(); by BalanceQuery::replyBalance() through
     * keptReplies().
     *
     * @var \ArrayObject<string, mixed>|null
     */
    private ?\ArrayObject $successes = null;

    /** Events are built by adopt() and fromRecord() only. */
    protected function __construct()
    {
    }

    /**
     * Builds the typed event for a native `sp_event *`, taking ownership of it (it is freed here
     * if building fails). Its strings are read in one copy of the `strings` block.
     *
     * @param \ArrayObject<string, string>|null $successes the success replies to reuse (see
     *     reply())
     * @param bool $owned false for an event its exchange owns (Endpoint): never freed here, and
     *     let go with disown() before the exchange is freed
     *
     * @internal Called by Receiver, Recovery and Endpoint.
     */
    public static function adopt(Native $native, CData $event, ?\ArrayObject $successes = null, bool $owned = true): self
    {
        try {
            $strings = \explode("\0", \FFI::string($event->strings, $event->strings_len));
            $self = match ($event->kind) {
                self::KIND_BUY_REFUND => new BuyRefund($event->buy_refund, $strings),
                self::KIND_JACKPOT_PAYOUT => new JackpotPayout($event->jackpot_payout, $strings),
                self::KIND_BALANCE_QUERY => new BalanceQuery($strings),
                default => new OtherEvent(),
            };
            $self->native = $native;
            if (!$self instanceof OtherEvent) {
                $self->successes = $successes;
            }
            $count = $event->extra_fields_len;
            $self->name = $strings[6 + 2 * $count];
            $self->index = $event->has_index ? $event->index : null;
            $self->indexUnreadable = $event->index_unreadable;
            $extra = [];
            for ($i = 7, $end = 6 + 2 * $count; $i < $end; $i += 2) {
                $extra[$strings[$i - 1]] = $strings[$i];
            }
            $self->extra = $extra;
        } catch (\Throwable $e) {
            if ($owned) {
                $native->ffi->sp_event_free($event);
            }
            throw $e;
        }
        // Owned only once fully built: a failure above leaves nothing for the destructor.
        $self->handle = $event;
        $self->open = true;
        // An exchange's event was claimed by the library: its reply is built inside it.
        $self->begun = !$owned;
        $self->owned = $owned;
        ++self::$live;
        return $self;
    }

    /**
     * Lets go of a native event this object does not own (adopt() with $owned false), without
     * freeing it: its owner, the exchange, is about to free it. The object then behaves as
     * after free(): the properties stay readable, building a reply fails.
     *
     * @internal Called by Endpoint.
     */
    public function disown(): void
    {
        if (!$this->open) {
            return;
        }
        $this->open = false;
        --self::$live;
        $this->handle = null;
        $this->receiver = null;
        $this->body = null;
    }

    /**
     * Builds the typed event of the record sp_receiver_handle_record just wrote into $native's
     * record buffer: its header read field by field in place, its strings in one copy. Owns no
     * native event; keeps $receiver and $body to make one if a reply needs it. The common
     * fields are set here rather than in a constructor of Event's, and not through a function
     * shared with adopt(), which sets them alike: this runs once a callback, and such a call
     * cost a refund about 0.1 µs of its 2.3 in bench.php (opcache and JIT).
     *
     * @param \ArrayObject<string, string>|null $successes the success replies to reuse
     *
     * @internal Called by Receiver.
     */
    public static function fromRecord(Native $native, Receiver $receiver, string $body, ?\ArrayObject $successes): self
    {
        $record = $native->record;
        $strings = \explode("\0", \FFI::string($native->recordStrings, $record->strings_len));
        $self = match ($record->kind) {
            self::KIND_BUY_REFUND => new BuyRefund($record, $strings),
            self::KIND_JACKPOT_PAYOUT => new JackpotPayout($record, $strings),
            self::KIND_BALANCE_QUERY => new BalanceQuery($strings),
            default => new OtherEvent(),
        };
        $self->native = $native;
        if (!$self instanceof OtherEvent) {
            $self->successes = $successes;
        }
        $count = $record->extra_fields_len;
        $self->name = $strings[6 + 2 * $count];
        $self->index = $record->has_index ? $record->index : null;
        $self->indexUnreadable = $record->index_unreadable;
        $extra = [];
        for ($i = 7, $end = 6 + 2 * $count; $i < $end; $i += 2) {
            $extra[$strings[$i - 1]] = $strings[$i];
        }
        $self->extra = $extra;
        $self->receiver = $receiver;
        $self->body = $body;
        $self->open = true;
        ++self::$live;
        return $self;
    }

    /**
     * The reply body for this event (sp_event_reply): `{"refund":{"success":true,"errorMessage":""}}`
     * or `{"payout":{"success":false,"errorMessage":"<message>"}}`. $message must be null or ''
     * when $success is true and must explain the failure when it is false. For a balance query
     * only a failure is built here: `{"playerBalance":{"errorMessage":"<message>"}}`, stating no
     * balance, sent with the Receiver's balanceFailureHttpStatus (500 by default); use
     * BalanceQuery::replyBalance for the balance. An OtherEvent has no reply:
     * ValidationException (SP_ERR_UNKNOWN_EVENT, HTTP 400).
     *
     * Returns a PHP string (copied from the library); may be called again, the last call wins.
     * Send it with replyHttpStatus(). A success reply to a refund or payout that was not begun
     * is built by the library once per Receiver and event kind, then reused without an FFI call.
     *
     * @throws SlotPartnerException
     */
    public function reply(bool $success, ?string $message = null): string
    {
        // Kept replies serve an event that came from a Receiver, is not freed, and was not begun
        // (a claimed event's reply is built inside it, for finish()).
        $kept = $success && ($message === null || $message === '') && !$this->begun && $this->open ? $this->successes : null;
        if ($kept !== null) {
            $reply = $kept[static::class] ?? null;
            if ($reply !== null) {
                $this->replyHttpStatus = 200;
                return $reply;
            }
        }
        $native = $this->native;
        $handle = $this->handle();
        $status = $native->ffi->sp_event_reply(
            $handle,
            $success,
            $message === null ? null : Native::cString($message, 'message'),
            $native->strOut,
        );
        if ($status !== Status::OK) {
            throw $native->error($status);
        }
        // Read from the struct in place: no call into the library.
        $this->replyHttpStatus = $handle->reply_http_status;
        $reply = $native->str->ptr;
        if ($kept !== null) {
            $kept[static::class] = $reply;
        }
        return $reply;
    }

    /**
     * Claims this delivery in the Receiver's journal (sp_event_begin): the exactly-once step
     * between handle() and the partner's logic. Its key is the event's name and transactionId
     * (refund, payout), or its index for other events. One FFI call; may wait up to the
     * journal's busy wait.
     *
     * - Outcome::New ($claim->attempt): run the logic, build the reply, then finish(); after a
     *   transient failure of the partner (its database is down), abandon() and answer HTTP 503 so
     *   that the service delivers again. From attempt 2 on, $claim->differing lists the decisive
     *   fields in which this delivery differs from the unfinished earlier one (one more FFI
     *   call, sp_event_differing), and $claim->replyPruned says whether it was handled before and
     *   its reply pruned (one more, sp_event_reply_pruned);
     * - Outcome::Done ($claim->reply): send the stored reply with HTTP 200 (replyHttpStatus() is
     *   200) and run nothing;
     * - Outcome::NotJournaled: run the logic and send its reply; finish() is not needed.
     *
     * @throws ConflictException the key came before with other content: HTTP 409 (the first
     *     stays; the message names the transactionId and the fields that differ)
     * @throws BusyException another worker holds the claim and did not finish within the busy
     *     wait: HTTP 503
     * @throws JournalException the journal's storage failed: HTTP 503
     * @throws ConfigurationException the Receiver has no journal, or the event was begun already
     *     or freed
     */
    public function begin(): Claim
    {
        $native = $this->native;
        $handle = $this->handle();
        $this->begun = true;
        $status = $native->ffi->sp_event_begin($handle, $native->claimOut);
        if ($status !== Status::OK) {
            throw $native->error($status);
        }
        $claim = $native->claim;
        return match ($claim->outcome) {
            Outcome::New->value => $claim->attempt < 2
                ? new Claim(Outcome::New, $claim->attempt)
                : new Claim(Outcome::New, $claim->attempt, null, $this->differing($handle), $native->ffi->sp_event_reply_pruned($handle)),
            Outcome::Done->value => $this->replayed($handle, $claim->reply->ptr),
            default => new Claim(Outcome::NotJournaled),
        };
    }

    /**
     * The claimed event's differing decisive fields (sp_event_differing), copied.
     *
     * @return list<string>
     */
    private function differing(CData $handle): array
    {
        $native = $this->native;
        $status = $native->ffi->sp_event_differing($handle, $native->strOut);
        if ($status !== Status::OK) {
            throw $native->error($status);
        }
        $text = Native::text($native->str);
        return $text === '' ? [] : \explode("\n", $text);
    }

    /** A Done claim: the stored reply, and its HTTP status read in place (200). */
    private function replayed(CData $handle, string $reply): Claim
    {
        $this->replyHttpStatus = $handle->reply_http_status;
        return new Claim(Outcome::Done, 0, $reply);
    }

    /**
     * Stages a statement of the partner's own (its ledger's credit, say) on the claim this event
     * holds (sp_event_stage), to run when finish() stores the reply: in the same database
     * transaction, after the claim is confirmed this event's, in the order staged. The credit and
     * the stored reply then commit together, with one durable commit, or not at all; exactly
     * once no longer rests on the ledger's own unique key. Use it when the ledger lives in the
     * journal's database (the journal's SQLite file, or its PostgreSQL database).
     *
     * $sql is written in that database's own dialect, with its own positional placeholders:
     * `$1`, `$2`... on PostgreSQL, `?` (or `?1`) on SQLite. $params is the list of values bound
     * to them, never spliced into the text: null (SQL NULL), an int (64-bit), or a string (sent
     * as text, which must be UTF-8; PostgreSQL reads it as the parameter's type: numeric,
     * timestamptz, uuid...). Both are copied, so they may change after the call. The statement
     * runs for its effect: its rows, if any, are not read, so the reply cannot depend on them
     * (logic that must read first keeps its own transaction and the ledger's unique key). Up to
     * 1,000 statements an event. One FFI call; a statement holding no more parameters and text
     * than an earlier one of the process (up to 64 parameters, 16 KiB of text) allocates no FFI
     * memory.
     *
     * finish() runs them all or none: when one fails it throws JournalException with field
     * `statements[N]` (N from 0, in the order staged), the message naming the statement and the
     * database's error; nothing was stored, the claim is still held and the statements stay
     * staged (finish again, or abandon() and answer 503). ClaimLostException from finish() means
     * that no staged statement ran: answer 503, the delivery holding the claim now runs the
     * logic. abandon(), free() and destroying the event drop them unrun.
     *
     * @param list<mixed> $params null, int or string values, keys 0, 1, 2... in order
     *
     * @throws ConfigurationException nothing staged; HTTP 500 with the invalid_argument body.
     *     Field `event`: the event holds no claim (not begun, answered from the journal, not
     *     journaled, finished, abandoned or freed: no finish() would run the statement); field
     *     `sql`: empty, not UTF-8, over 1 MiB, or not one statement starting with INSERT, UPDATE,
     *     DELETE, MERGE, REPLACE, SELECT, WITH or SET LOCAL as both databases read it
     *     (transaction control, the journal's, a command that outlives the transaction, DDL, a
     *     second statement after `;`: refused), or 1,000 statements staged already;
     *     field `params`: not a list, or over 65,535 values; field `params[N]`: a value that is
     *     not null, an int or a string (a float, a bool, an array, an object); field
     *     `params[N].bytes`: a string that is not UTF-8
     */
    public function stage(string $sql, array $params = []): void
    {
        if (!\array_is_list($params)) {
            throw Native::argumentRefused('params', 'must be a list (keys 0, 1, 2... in order), not an array keyed ' . self::firstKeyOutOfPlace($params));
        }
        $native = $this->native;
        $status = $native->stage($this->handle(), $sql, $params);
        if ($status !== Status::OK) {
            throw $native->error($status);
        }
    }

    /**
     * The first key of $params that a list would not have there, for stage()'s refusal:
     * `'amount' at position 2` or `5 at position 0`.
     *
     * @param array<mixed> $params
     */
    private static function firstKeyOutOfPlace(array $params): string
    {
        $position = 0;
        foreach ($params as $key => $unused) {
            if ($key !== $position) {
                break;
            }
            ++$position;
        }
        $shown = \is_int($key) ? (string) $key : \var_export($key, true);
        return $shown . ' at position ' . $position;
    }

    /**
     * Stores the reply of a claimed event in the journal (sp_event_finish), once the partner
     * committed its own work: every later delivery of the same event gets it, byte for byte (a
     * success:false reply too). $reply null (the usual case) stores the reply last built with
     * reply() or replyBalance(), which is what the host sends. The statements staged with
     * stage() run first, in the same transaction, once the claim is confirmed this event's: the
     * partner's work and the reply commit together, or neither. Does nothing for an event
     * answered from the journal, not journaled, or finished already. One FFI call.
     *
     * @throws ClaimLostException the claim is no longer this worker's, and nothing was stored:
     *     its lease expired and another delivery took it over ("taken over by attempt N"; the
     *     partner's work was done: send the reply all the same, the other delivery finds the
     *     credit in the ledger; but no statement staged with stage() ran: answer 503, and the
     *     delivery holding the claim runs the logic), or abandon() released it ("the claim was
     *     abandoned"). Thrown again by every later finish(), and after a takeover by every
     *     abandon() too
     * @throws ConfigurationException a reply over the journal's limit or none built (field
     *     reply; the claim stays: finish again or abandon), or the event was not begun
     * @throws JournalException a staged statement failed (field `statements[N]`, N from 0, in
     *     the order staged; the message names the statement and the database's error): nothing
     *     was stored, the claim stays held and the statements stay staged (finish again, or
     *     abandon and answer 503). Or the storage failed (the claim stays held: finish again or
     *     abandon; free() or destroying the event abandons it, and if that fails too its lease
     *     ends it)
     */
    public function finish(?string $reply = null): void
    {
        $native = $this->native;
        $status = $native->ffi->sp_event_finish($this->handle(), $reply, $reply === null ? 0 : \strlen($reply));
        if ($status !== Status::OK) {
            throw $native->error($status);
        }
    }

    /**
     * Releases the claim after a transient failure of the partner (its database is down), so
     * that the next delivery runs the logic again (as attempt 2); answer the service with HTTP 503
     * so that it delivers again (sp_event_abandon). The statements staged with stage() are
     * dropped unrun. After it, finish() throws ClaimLostException ("the claim was abandoned"),
     * every time. Does nothing for an event
     * answered from the journal, not journaled, finished or abandoned already. Destroying or
     * free()ing a claimed event releases its claim the same way, without reporting failures.
     *
     * @throws ClaimLostException its lease expired and another delivery took the claim over
     *     ("taken over by attempt N"): finish() and abandon() throw it from now on, every time
     * @throws JournalException the storage failed (the claim stays held: abandon again, or
     *     free() the event, which tries once more; if that fails too, its lease ends it)
     * @throws ConfigurationException the event was not begun
     */
    public function abandon(): void
    {
        $native = $this->native;
        $status = $native->ffi->sp_event_abandon($this->handle());
        if ($status !== Status::OK) {
            throw $native->error($status);
        }
    }

    /**
     * The HTTP status to send the last reply built for this event with (sp_event's
     * reply_http_status): 200, except for a refused balance query (reply(false, ...) on a
     * BalanceQuery), which gets the Receiver's balanceFailureHttpStatus (500 by default). 0
     * until a reply is built; kept after free().
     */
    public function replyHttpStatus(): int
    {
        return $this->replyHttpStatus;
    }

    /** Records the HTTP status of the reply just built into $handle (by a subclass). */
    protected function replied(CData $handle): void
    {
        $this->replyHttpStatus = $handle->reply_http_status;
    }

    /**
     * Frees the native event now instead of when this object is destroyed. Idempotent; the
     * properties stay readable, building a reply afterwards fails (ConfigurationException). A
     * claimed event's claim is released (as abandon() does, failures unreported; its staged
     * statements dropped unrun).
     */
    public function free(): void
    {
        if (!$this->open) {
            return;
        }
        $this->open = false;
        --self::$live;
        $this->receiver = null;
        $this->body = null;
        $handle = $this->handle;
        if ($handle !== null) {
            $this->handle = null;
            if ($this->owned) {
                $this->native->ffi->sp_event_free($handle);
            }
        }
    }

    /** What free() does, written out: every event's destruction runs it, once a callback. */
    public function __destruct()
    {
        if (!$this->open) {
            return;
        }
        $this->open = false;
        --self::$live;
        $this->receiver = null;
        $this->body = null;
        $handle = $this->handle;
        if ($handle !== null) {
            $this->handle = null;
            if ($this->owned) {
                $this->native->ffi->sp_event_free($handle);
            }
        }
    }

    /**
     * The fields, and whether the native event is still held, for var_dump() and print_r().
     *
     * @return array<string, mixed>
     */
    public function __debugInfo(): array
    {
        $vars = get_object_vars($this);
        unset($vars['handle'], $vars['native'], $vars['open'], $vars['receiver'], $vars['body']);
        return ['native' => $this->open ? 'held' : 'freed'] + $vars;
    }

    /**
     * How many events of this process are not freed yet (for leak checks): each holds its
     * native event, or what makes one.
     */
    public static function liveCount(): int
    {
        return self::$live;
    }

    /**
     * The owned `sp_event *`, made now for an event read from a record (sp_receiver_parse of
     * the same body, by the same Receiver: the same event); null once freed (the library then
     * refuses the call).
     */
    protected function handle(): ?CData
    {
        if ($this->handle === null && $this->receiver !== null) {
            $this->handle = $this->receiver->nativeEvent((string) $this->body);
            $this->receiver = null;
            $this->body = null;
        }
        return $this->handle;
    }

    /**
     * The Receiver's kept replies when this event may use them: it came from a Receiver, is not
     * freed, and was not begun (a claimed event's reply is built inside it, for finish()); null
     * otherwise. For BalanceQuery::replyBalance(), which answers with repliedOk() when it uses one.
     *
     * @return \ArrayObject<string, mixed>|null
     */
    final protected function keptReplies(): ?\ArrayObject
    {
        return $this->begun || !$this->open ? null : $this->successes;
    }

    /** Records that a successful reply was put together without the library: HTTP 200. */
    final protected function repliedOk(): void
    {
        $this->replyHttpStatus = 200;
    }

    /**
     * Events are not copied: a copy would free the native event a second time. Private, and
     * throwing for code that gets past the scope (Closure::bind), the copy left owning nothing.
     */
    private function __clone()
    {
        $this->handle = null;
        $this->receiver = null;
        $this->body = null;
        $this->open = false;
        throw new \Error('a SlotPartner event cannot be cloned: it owns a native event');
    }

    /**
     * Events are not restored from serialized data (a crafted string would make the destructor
     * count an event it never owned): refused, the object left owning nothing.
     *
     * @param array<mixed> $data
     */
    public function __unserialize(array $data): void
    {
        throw new \Error('a SlotPartner event cannot be unserialized: it owns a native event');
    }
}
