//! Typed events as plain C structs: one call (`sp_receiver_handle`) gives an `sp_event` whose
//! fields are read directly; `sp_event_reply` builds the answer; `sp_event_free` frees it all.

use std::ffi::c_char;
use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::callback::event::{Event, EventKind};
use crate::callback::receiver::Receiver;
use crate::callback::spec::KnownEvent;
use crate::endpoint::{Answer, Endpoint, Handling, Outcome, Settled};
use crate::error::{Error, ErrorKind};
use crate::ffi::args;
use crate::ffi::event_tail::{self, KeptReply, Tail, TailSizes};
use crate::ffi::status::sp_status;
use crate::ffi::str::sp_str;
use crate::journal::{Begin, Claim, Delivery, Staged};

/// Which typed struct an `sp_event` carries.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sp_event_kind {
    /// `gameSessionBuyRefund`: read `sp_event.buy_refund`; answer with `sp_event_reply`.
    SP_EVENT_KIND_BUY_REFUND = 1,
    /// `jackpotPayout`: read `sp_event.jackpot_payout`; answer with `sp_event_reply`.
    SP_EVENT_KIND_JACKPOT_PAYOUT = 2,
    /// `getPlayerBalance`: read `sp_event.balance_query`; answer with `sp_event_reply_balance`.
    SP_EVENT_KIND_BALANCE_QUERY = 3,
    /// Any other event or action: read `name` and `extra_fields` (raw JSON).
    SP_EVENT_KIND_OTHER = 4,
}

/// A field kept as raw JSON: its name and its value exactly as the body wrote it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_field {
    pub name: sp_str,
    pub json: sp_str,
}

/// `gameSessionBuyRefund`. Absent optional strings are `{NULL, 0}`; at least one of the two player
/// identifiers is present.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_buy_refund {
    pub game_session_identifier: sp_str,
    pub player_identifier: sp_str,
    pub player_partner_identifier: sp_str,
    pub transaction_id: i64,
    pub buy_transaction_id: i64,
    pub game_session_id: i64,
    pub partner_game_request_identifier: sp_str,
    pub game_id: i64,
    pub is_mobile: bool,
    pub bonus_code: sp_str,
}

/// `jackpotPayout`. `money_won` is in minor currency units; amounts are 0 to 2^53-1. Absent
/// optional strings are `{NULL, 0}`; `is_mobile` is meaningful only when `has_is_mobile`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_jackpot_payout {
    pub jackpot_identifier: sp_str,
    pub player_identifier: sp_str,
    pub player_partner_identifier: sp_str,
    pub currency_iso4217: sp_str,
    pub money_won: i64,
    pub coins_won: i64,
    pub is_money: bool,
    pub epoch_released_millis: i64,
    pub is_primary: bool,
    pub transaction_id: i64,
    pub buy_transaction_id: i64,
    pub partner_game_request_identifier: sp_str,
    pub game_session_id: i64,
    pub game_id: i64,
    pub bonus_code: sp_str,
    pub has_is_mobile: bool,
    pub is_mobile: bool,
}

/// `getPlayerBalance`. At least one of the two identifiers is present; an absent one is
/// `{NULL, 0}`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_balance_query {
    pub player_identifier: sp_str,
    pub player_partner_identifier: sp_str,
}

/// A validated callback event. Owned by the caller from `sp_receiver_handle` until
/// `sp_event_free`; every pointer in it (and in the structs it points to) is owned by the event
/// and valid until then. Belongs to one thread at a time.
#[repr(C)]
#[derive(Debug)]
pub struct sp_event {
    pub kind: sp_event_kind,
    /// The `event` value (or `action` for the balance query and other actions).
    pub name: sp_str,
    /// Whether the body carries the service's consecutive event index (field `index` by default)
    /// as a non-negative integer; `index` is meaningful only then.
    pub has_index: bool,
    pub index: i64,
    /// Non-NULL exactly when `kind` is `SP_EVENT_KIND_BUY_REFUND`.
    pub buy_refund: *const sp_buy_refund,
    /// Non-NULL exactly when `kind` is `SP_EVENT_KIND_JACKPOT_PAYOUT`.
    pub jackpot_payout: *const sp_jackpot_payout,
    /// Non-NULL exactly when `kind` is `SP_EVENT_KIND_BALANCE_QUERY`.
    pub balance_query: *const sp_balance_query,
    /// The fields the spec does not define for this event (the index among them), in body
    /// order, values as raw JSON. `extra_fields_len` entries; NULL when there are none.
    pub extra_fields: *const sp_field,
    pub extra_fields_len: usize,
    /// True when the body carries the index field but its value is not a non-negative integer
    /// (`"42"`, `-1`, `1.5`): the event is handled with no index (`has_index` false) and the raw
    /// value is readable with `sp_event_field`. Never true under
    /// `sp_receiver_config_set_strict_index`, which refuses such events.
    pub index_unreadable: bool,
    /// The HTTP status to send the last reply built for this event with: 200, except for a
    /// refused balance query (500 by default, see
    /// `sp_receiver_config_set_balance_failure_http_status`). 0 until a reply is built. Written
    /// by the library, never read back.
    pub reply_http_status: u16,
    /// Every string of the event in one block, for hosts that pay for each read of a field (PHP,
    /// Python): `strings_len` bytes at `strings`, each string followed by a NUL byte, in this
    /// order: the six string slots of the typed struct (in the struct's order: refund 5, payout 6,
    /// balance query 2, the unused ones and every absent optional one as an empty string; typed
    /// strings are never empty when present), then each extra field's name and JSON in order,
    /// then `name`. So splitting the block at NUL bytes gives 6 + 2 × `extra_fields_len` + 1
    /// strings (and an empty one after the last NUL). The same bytes the `sp_str` fields view.
    pub strings: *const u8,
    pub strings_len: usize,
}

/// The allocation behind an `sp_event` pointer: the public struct first, then what it points to,
/// then (past the box, `event_tail`) the extra fields, the strings and room for the usual reply.
/// The host may write into `view` (PHP and Python can), so the library never reads it back: it
/// keeps its own copy of what it needs (`known`, `name`). The view is held as bytes that need not
/// be a valid `sp_event` (`MaybeUninit`, the same layout): a host may have written any integer
/// into `kind` or any byte into a `bool`, and a reference to the box must not claim otherwise.
#[repr(C)]
struct EventBox {
    view: MaybeUninit<sp_event>,
    /// The event's kind, the library's own copy: `view.kind` may hold any integer by now.
    known: Option<KnownEvent>,
    /// The view of the event's name in the strings block, the library's own copy of `view.name`.
    name: sp_str,
    /// The typed struct of the event's kind (none for another event). The pointer handed out to
    /// it is taken from the box's own raw pointer, never through a reference, so that it stays
    /// valid whatever the library later borrows of the box itself.
    typed: Typed,
    /// The extra fields, the strings block and the room for a reply, past the box.
    tail: Tail,
    /// The HTTP status to send `reply` with, the library's own copy of `view.reply_http_status`.
    reply_status: u16,
    /// The last reply built (or answered from the journal); none at first. The event's own copy,
    /// even of a reply the receiver keeps built: what a host does to the bytes it was handed
    /// stays with its event.
    reply: KeptReply,
    receiver: Arc<Receiver>,
    /// The event's dealings with its receiver's journal, when the receiver has one: apart, so
    /// that an event without a journal neither builds, moves nor drops any of it.
    journal: Option<Box<JournalPart>>,
    /// Owned by an endpoint's exchange (`into_raw_handling`): `sp_event_free` leaves it alone,
    /// and the exchange frees it (`free_exchange_event`).
    in_exchange: bool,
}

/// The typed struct of an event: the one of its kind (`sp_event` points to it), nothing for
/// another event. Only the field of the event's kind is ever written or read.
#[repr(C)]
#[derive(Clone, Copy)]
union Typed {
    buy_refund: sp_buy_refund,
    jackpot_payout: sp_jackpot_payout,
    balance_query: sp_balance_query,
    none: (),
}

/// What the journal knows of an event's delivery and where the event stands with it.
#[derive(Debug)]
struct JournalPart {
    delivery: Delivery,
    journaled: Journaled,
    /// The claim's differing decisive fields (`Claim::differing`), one per line, NUL-terminated;
    /// empty, nothing allocated, when none (every event that holds no claim, every attempt 1).
    /// Set when the event is claimed and kept after it settles.
    differing: Vec<u8>,
    /// `Claim::reply_pruned` of the event's claim. Set when the event is claimed and kept after
    /// it settles.
    reply_pruned: bool,
    /// The partner's statements staged on the claim (`sp_event_stage`), run by `sp_event_finish`
    /// in the transaction that stores the reply; dropped when the claim ends any other way.
    staged: Vec<Staged>,
}

impl JournalPart {
    /// The part of `event`, in the state `journaled` (claimed for a recovered event).
    fn new(event: &Event<'_>, journaled: Journaled) -> JournalPart {
        JournalPart::with(Delivery::of(event), journaled)
    }

    /// The part of a delivery read already (an endpoint's), in the state `journaled`.
    fn with(delivery: Delivery, journaled: Journaled) -> JournalPart {
        JournalPart {
            delivery,
            differing: differing_text(&journaled),
            reply_pruned: matches!(&journaled, Journaled::Claimed(claim) if claim.reply_pruned()),
            journaled,
            staged: Vec::new(),
        }
    }
}

/// `Claim::differing` as the NUL-terminated text `sp_event_differing` views; empty (no
/// allocation, no NUL: see `differing_view`) when the event holds no claim or nothing differs.
fn differing_text(journaled: &Journaled) -> Vec<u8> {
    let Journaled::Claimed(claim) = journaled else { return Vec::new() };
    let mut text = claim.differing().join("\n").into_bytes();
    if text.is_empty() {
        return text;
    }
    text.retain(|&b| b != 0);
    text.push(0);
    text
}

/// The view of `differing_text`'s `text`: the empty string when it is empty.
fn differing_view(text: &[u8]) -> sp_str {
    if text.is_empty() { sp_str::from_static(c"") } else { sp_str::of_nul_terminated(text) }
}

/// Makes the concatenation of `pieces` the event's last reply, with the HTTP status to send it
/// with, and views it. Takes the box's parts, so that the pieces may borrow the box's receiver;
/// nothing here can fail, so that a reply handed out before stays valid whenever building the
/// next one is refused. Inlined, as `KeptReply::keep` is.
#[inline(always)]
fn keep_written(
    kept: &mut KeptReply,
    tail: &Tail,
    view: &mut MaybeUninit<sp_event>,
    http_status: u16,
    pieces: &[&[u8]],
) -> sp_str {
    let reply = kept.keep(tail, pieces);
    // SAFETY: the view was written whole when the box was made; one field is written through a
    // raw pointer, nothing of what the host may have written elsewhere in it is read or typed.
    unsafe { (&raw mut (*view.as_mut_ptr()).reply_http_status).write(http_status) };
    reply
}

impl EventBox {
    /// Refuses `verb` (finish, abandon) on an exchange's event: `sp_exchange_complete` settles
    /// its claim, as the endpoint decides (a repeat found at finish answered from the journal).
    fn not_in_exchange(&self, verb: &str) -> crate::Result<()> {
        if self.in_exchange {
            let problem =
                format!("belongs to an exchange: sp_exchange_complete settles its claim, not sp_event_{verb}");
            return Err(Error::field(ErrorKind::InvalidArgument, "event", problem));
        }
        Ok(())
    }

    /// Where the event stands with its receiver's journal: not begun when it has none.
    fn journaled(&self) -> &Journaled {
        self.journal.as_ref().map_or(&Journaled::NotBegun, |part| &part.journaled)
    }
}

/// Where an event stands with its receiver's journal.
#[derive(Debug)]
enum Journaled {
    /// `sp_event_begin` was not called.
    NotBegun,
    /// This worker holds the claim: finish or abandon it (freeing the event abandons it).
    Claimed(Claim),
    /// Finished, answered from the journal, or not journaled at all: finishing or abandoning
    /// it again does nothing.
    Settled,
    /// Abandoned by this event: finishing it fails with this error (`ClaimLost`), every time;
    /// abandoning it again does nothing.
    Abandoned(Error),
    /// The claim was found lost (its lease ran out and another delivery took it over) by `verb`
    /// (`finish`, `abandon`): finishing and abandoning fail with this error, every time.
    Lost { error: Error, verb: &'static str },
}

impl Journaled {
    /// The error of finishing (`verb` "finish") or abandoning (`verb` "abandon") an event in
    /// this state: `None` when the call does nothing and succeeds.
    fn refusal(&self, verb: &str) -> Option<Error> {
        match self {
            Journaled::NotBegun => {
                Some(Error::field(ErrorKind::InvalidArgument, "event", "was not begun (sp_event_begin)"))
            }
            Journaled::Claimed(_) | Journaled::Settled => None,
            Journaled::Abandoned(_) if verb == "abandon" => None,
            Journaled::Abandoned(error) => Some(error.clone()),
            // The journal's message says which step found the claim lost: name this one.
            Journaled::Lost { error, verb: found_by } => Some(Error {
                message: error.message.replacen(&format!("cannot {found_by} "), &format!("cannot {verb} "), 1),
                ..error.clone()
            }),
        }
    }
}

/// The error of finishing a claim this event abandoned.
fn abandoned_error(claim: &Claim) -> Error {
    Error::new(
        ErrorKind::ClaimLost,
        format!(
            "journal: cannot finish {} (attempt {}): the claim was abandoned (sp_event_abandon); nothing was stored",
            claim.key(),
            claim.attempt()
        ),
    )
}

impl Drop for EventBox {
    /// An event freed while it still holds its claim (never finished or abandoned, or
    /// `sp_event_finish` or `sp_event_abandon` failed with `SP_ERR_JOURNAL`, which leaves the
    /// claim held) abandons it at once, as `sp_event_abandon` would: the next delivery runs the
    /// partner's logic again (its ledger's unique `transactionId` absorbs a second run). Best
    /// effort: if the abandon fails too, the claim ends with its lease.
    fn drop(&mut self) {
        // A child forked since the claim was taken frees its copy of the event: the claim stays
        // its parent's.
        if let (Some(part), Some(journal)) = (&self.journal, self.receiver.journal())
            && let Journaled::Claimed(claim) = &part.journaled
            && claim.held_by_this_process()
        {
            let _ = journal.abandon(claim);
        }
    }
}

/// What `sp_event_begin` found.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sp_begin {
    /// The delivery is this worker's: run the partner's logic, build the reply, then
    /// `sp_event_finish` (or `sp_event_abandon` after a transient failure).
    SP_BEGIN_NEW = 1,
    /// The delivery was handled before: send `sp_claim.reply` (byte for byte the first reply)
    /// with HTTP 200 and run nothing.
    SP_BEGIN_DONE = 2,
    /// Not answered from the journal (a balance query, which must be current; an unknown event
    /// without an index): run the logic and send its reply; its index was recorded.
    SP_BEGIN_NOT_JOURNALED = 3,
}

/// The answer of `sp_event_begin`. `reply` is owned by the event like the reply of
/// `sp_event_reply`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_claim {
    pub outcome: sp_begin,
    /// For `SP_BEGIN_NEW`: 1 the first time, 2 and on after a worker died (its lease expired) or
    /// abandoned it. From 2 on the partner's logic may have run before: its ledger must refuse a
    /// second credit for the same `transactionId` (`sp_event_differing` names decisive fields
    /// that changed since, `sp_event_reply_pruned` says whether the first reply was pruned).
    /// With `sp_journal_config_set_claim_at_finish`, 1 does not promise a first run: a worker
    /// that died before finishing left nothing, and two deliveries at once are both 1; only
    /// staged statements are made exactly once by the journal. 0 otherwise.
    pub attempt: i64,
    /// For `SP_BEGIN_DONE`: the stored reply; `{NULL, 0}` otherwise.
    pub reply: sp_str,
}

impl_zero_padded!(sp_claim { outcome, attempt, reply });

/// `into_raw` for an event an endpoint hands to the partner's logic (`Endpoint::receive`): it
/// holds the handling's claim, or is settled already (not journaled, or no claim to take).
pub(crate) fn into_raw_handling(handling: Box<Handling<'_>>) -> *mut sp_event {
    let Handling { event, receiver, delivery, claim, .. } = *handling;
    let journaled = claim.map_or(Journaled::Settled, Journaled::Claimed);
    let part = receiver.journal().and(delivery).map(|delivery| Box::new(JournalPart::with(delivery, journaled)));
    let raw = into_raw_parted(&event, &receiver, part);
    // SAFETY: `raw` is the live box just made, not shared yet.
    unsafe { (*raw.cast::<EventBox>()).in_exchange = true };
    raw
}

/// Frees an event of `into_raw_handling`, which `sp_event_free` leaves to its exchange.
///
/// # Safety
/// `event` is NULL or came from `into_raw_handling` and is not used afterwards.
pub(crate) unsafe fn free_exchange_event(event: *mut sp_event) {
    // SAFETY: forwarded caller promise.
    unsafe { free_event_box(event) }
}

/// Completes an endpoint's event (`sp_exchange_complete`): the reply last built for it (or
/// `reply`, when given) with its staged statements, or the logic's `failure`, through
/// `Endpoint::complete`, the event's claim settled as the endpoint settled it.
///
/// # Safety
/// `event` came from `into_raw_handling`, is live and used by no other thread.
pub(crate) unsafe fn complete(
    event: *mut sp_event,
    endpoint: &Endpoint,
    failure: Option<&str>,
    reply: Option<&[u8]>,
) -> crate::Result<Answer> {
    // SAFETY: the caller's promise, passed on.
    let b = unsafe { event_box_mut(event)? };
    let EventBox { journal: part, reply: kept, receiver, reply_status, tail, .. } = b;
    let (claim, delivery, staged) = match part.as_deref() {
        Some(JournalPart { journaled: Journaled::Claimed(claim), delivery, staged, .. }) => {
            (Some(claim), Some(delivery), staged.as_slice())
        }
        Some(part) => (None, Some(&part.delivery), &[][..]),
        None => (None, None, &[][..]),
    };
    let outcome = match failure {
        Some(why) => Outcome::Failed(why),
        None => Outcome::Reply {
            status: if reply.is_some() { 200 } else { *reply_status },
            body: reply.unwrap_or_else(|| kept.last(tail)),
            staged,
        },
    };
    let (answer, settled) = endpoint.complete(receiver, claim, delivery, outcome);
    if let Some(part) = part.as_deref_mut() {
        match settled {
            Settled::Unclaimed | Settled::Held => {}
            Settled::Finished => part.journaled = Journaled::Settled,
            Settled::Released => {
                let Journaled::Claimed(claim) = &part.journaled else { unreachable!("a released claim was held") };
                part.journaled = Journaled::Abandoned(abandoned_error(claim));
            }
            Settled::Lost(error) => part.journaled = Journaled::Lost { error, verb: "finish" },
        }
        if !matches!(part.journaled, Journaled::Claimed(_)) {
            part.staged = Vec::new();
        }
    }
    Ok(answer)
}

/// Builds the C view of `event` and hands out its ownership as a raw pointer.
pub fn into_raw(event: &Event<'_>, receiver: &Arc<Receiver>) -> *mut sp_event {
    into_raw_with(event, receiver, Journaled::NotBegun)
}

/// `into_raw` for an event already claimed in the receiver's journal (a recovered one): it is
/// finished, abandoned or released on free like one claimed with `sp_event_begin`.
pub fn into_raw_claimed(event: &Event<'_>, receiver: &Arc<Receiver>, claim: Claim) -> *mut sp_event {
    into_raw_with(event, receiver, Journaled::Claimed(claim))
}

/// Calls `f` with every string of `event` in the order of the `strings` block (see
/// `sp_event.strings`): the six typed slots (an absent one empty), each extra field's name and
/// JSON, then the name. (Plain loops: an iterator chain of them costs a few hundred instructions
/// more a callback.)
pub(crate) fn for_each_block_string<'e>(event: &'e Event<'_>, f: impl FnMut(&'e str)) {
    each_block_string(typed_strings(&event.kind), event, f)
}

/// `for_each_block_string` of an event whose `typed_strings` are known already.
fn each_block_string<'e>(typed: [Option<&'e str>; 6], event: &'e Event<'_>, mut f: impl FnMut(&'e str)) {
    for slot in typed {
        f(slot.unwrap_or_default());
    }
    for field in &event.extra {
        f(&field.name);
        f(field.raw.get());
    }
    f(&event.name);
}

/// The bytes of an event's `strings` block: every string of `for_each_block_string` and its NUL.
pub(crate) fn block_len(event: &Event<'_>) -> usize {
    block_len_of(typed_strings(&event.kind), event)
}

/// `block_len` of an event whose `typed_strings` are known already.
fn block_len_of(typed: [Option<&str>; 6], event: &Event<'_>) -> usize {
    let mut len = 0;
    each_block_string(typed, event, |s| len += s.len() + 1);
    len
}

fn into_raw_with(event: &Event<'_>, receiver: &Arc<Receiver>, journaled: Journaled) -> *mut sp_event {
    into_raw_parted(event, receiver, receiver.journal().map(|_| Box::new(JournalPart::new(event, journaled))))
}

/// `into_raw_with` with the journal part made by the caller (`None` for a receiver without a
/// journal, or an event the journal has nothing more to do with).
fn into_raw_parted(event: &Event<'_>, receiver: &Arc<Receiver>, journal: Option<Box<JournalPart>>) -> *mut sp_event {
    let slots = typed_strings(&event.kind);
    let known = event.known();
    let sizes = TailSizes {
        fields: event.extra.len(),
        strings: block_len_of(slots, event),
        room: known.map_or(0, |known| receiver.reply_room(known)),
    };
    let (raw, tail) = event_tail::allocate::<EventBox>(sizes);
    // SAFETY: the tail was just made and is written here once, before the event is handed out.
    let mut strings = unsafe { tail.strings_writer() };
    // Every slot takes its place in the block, an absent one as an empty string (see `strings`).
    let slots = slots.map(|s| {
        let view = strings.push(s.unwrap_or_default());
        if s.is_some() { view } else { sp_str::NONE }
    });
    for (at, f) in event.extra.iter().enumerate() {
        let field = sp_field { name: strings.push(&f.name), json: strings.push(f.raw.get()) };
        // SAFETY: as above; `at` is below `sizes.fields`.
        unsafe { tail.write_field(at, field) };
    }
    let name = strings.push(&event.name);
    // The views are taken from the allocation's own pointer, by address alone (nothing is read:
    // the box is not written yet), so that no later borrow of the box invalidates them.
    // SAFETY: `raw` points to the allocation just made, large and aligned for an `EventBox`.
    let typed_view = unsafe { &raw const (*raw).typed };
    let kind = kind_of(&event.kind);
    let view = sp_event {
        kind,
        name,
        has_index: event.index.is_some(),
        index: event.index.unwrap_or(0),
        buy_refund: if kind == sp_event_kind::SP_EVENT_KIND_BUY_REFUND { typed_view.cast() } else { std::ptr::null() },
        jackpot_payout: match kind {
            sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT => typed_view.cast(),
            _ => std::ptr::null(),
        },
        balance_query: match kind {
            sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY => typed_view.cast(),
            _ => std::ptr::null(),
        },
        extra_fields: tail.fields_ptr(),
        extra_fields_len: sizes.fields,
        index_unreadable: event.index_unreadable,
        reply_http_status: 0,
        strings: tail.strings().0,
        strings_len: sizes.strings,
    };
    let typed = typed_struct(&event.kind, slots);
    let boxed = EventBox {
        view: MaybeUninit::uninit(),
        known,
        name,
        // Written below, over zeros.
        typed: Typed { none: () },
        tail,
        reply_status: 0,
        reply: KeptReply::default(),
        receiver: Arc::clone(receiver),
        journal,
        in_exchange: false,
    };
    // SAFETY: as above; the box is written once, and handed out as its first field. The view
    // and the typed struct of the event's kind are then written field by field over zeros (a
    // typed write leaves their padding undefined, and a host may copy them as bytes); the
    // typed struct read is the variant `typed_struct` made for this kind.
    unsafe {
        raw.write(boxed);
        zero_padded!(
            (&raw mut (*raw).view).cast::<sp_event>(),
            view,
            sp_event {
                kind,
                name,
                has_index,
                index,
                buy_refund,
                jackpot_payout,
                balance_query,
                extra_fields,
                extra_fields_len,
                index_unreadable,
                reply_http_status,
                strings,
                strings_len,
            }
        );
        let at = &raw mut (*raw).typed;
        match kind {
            sp_event_kind::SP_EVENT_KIND_BUY_REFUND => zero_padded!(
                at.cast::<sp_buy_refund>(),
                typed.buy_refund,
                sp_buy_refund {
                    game_session_identifier,
                    player_identifier,
                    player_partner_identifier,
                    transaction_id,
                    buy_transaction_id,
                    game_session_id,
                    partner_game_request_identifier,
                    game_id,
                    is_mobile,
                    bonus_code,
                }
            ),
            sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT => zero_padded!(
                at.cast::<sp_jackpot_payout>(),
                typed.jackpot_payout,
                sp_jackpot_payout {
                    jackpot_identifier,
                    player_identifier,
                    player_partner_identifier,
                    currency_iso4217,
                    money_won,
                    coins_won,
                    is_money,
                    epoch_released_millis,
                    is_primary,
                    transaction_id,
                    buy_transaction_id,
                    partner_game_request_identifier,
                    game_session_id,
                    game_id,
                    bonus_code,
                    has_is_mobile,
                    is_mobile,
                }
            ),
            sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY => zero_padded!(
                at.cast::<sp_balance_query>(),
                typed.balance_query,
                sp_balance_query { player_identifier, player_partner_identifier }
            ),
            sp_event_kind::SP_EVENT_KIND_OTHER => {}
        }
    }
    raw.cast::<sp_event>()
}

/// Frees an event's allocation (`sp_event_free`, `free_exchange_event`).
///
/// # Safety
/// `event` is NULL or came from `into_raw_parted` and is not used afterwards.
unsafe fn free_event_box(event: *mut sp_event) {
    let raw = event.cast::<EventBox>();
    if !raw.is_null() {
        // SAFETY: the caller's promise: a live box, from `event_tail::allocate` with these sizes.
        unsafe { event_tail::free(raw, (*raw).tail.layout()) }
    }
}

/// The strings of a typed event, in the order `fill` reads them.
fn typed_strings<'e>(kind: &'e EventKind<'_>) -> [Option<&'e str>; 6] {
    match kind {
        EventKind::BuyRefund(r) => [
            Some(&r.game_session_identifier),
            r.player_identifier.as_deref(),
            r.player_partner_identifier.as_deref(),
            Some(&r.partner_game_request_identifier),
            r.bonus_code.as_deref(),
            None,
        ],
        EventKind::JackpotPayout(p) => [
            Some(&p.jackpot_identifier),
            p.player_identifier.as_deref(),
            p.player_partner_identifier.as_deref(),
            Some(&p.currency_iso4217),
            Some(&p.partner_game_request_identifier),
            p.bonus_code.as_deref(),
        ],
        EventKind::BalanceQuery(q) => {
            [q.player_identifier.as_deref(), q.player_partner_identifier.as_deref(), None, None, None, None]
        }
        EventKind::Other => [None; 6],
    }
}

pub(crate) fn kind_of(kind: &EventKind<'_>) -> sp_event_kind {
    match kind {
        EventKind::BuyRefund(_) => sp_event_kind::SP_EVENT_KIND_BUY_REFUND,
        EventKind::JackpotPayout(_) => sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT,
        EventKind::BalanceQuery(_) => sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY,
        EventKind::Other => sp_event_kind::SP_EVENT_KIND_OTHER,
    }
}

/// The typed struct of an event of `kind`, with the views of `typed_strings`: none for another
/// event.
fn typed_struct(kind: &EventKind<'_>, s: [sp_str; 6]) -> Typed {
    match kind {
        EventKind::BuyRefund(r) => Typed {
            buy_refund: sp_buy_refund {
                game_session_identifier: s[0],
                player_identifier: s[1],
                player_partner_identifier: s[2],
                transaction_id: r.transaction_id,
                buy_transaction_id: r.buy_transaction_id,
                game_session_id: r.game_session_id,
                partner_game_request_identifier: s[3],
                game_id: r.game_id,
                is_mobile: r.is_mobile,
                bonus_code: s[4],
            },
        },
        EventKind::JackpotPayout(p) => Typed {
            jackpot_payout: sp_jackpot_payout {
                jackpot_identifier: s[0],
                player_identifier: s[1],
                player_partner_identifier: s[2],
                currency_iso4217: s[3],
                money_won: p.money_won,
                coins_won: p.coins_won,
                is_money: p.is_money,
                epoch_released_millis: p.epoch_released_millis,
                is_primary: p.is_primary,
                transaction_id: p.transaction_id,
                buy_transaction_id: p.buy_transaction_id,
                partner_game_request_identifier: s[4],
                game_session_id: p.game_session_id,
                game_id: p.game_id,
                bonus_code: s[5],
                has_is_mobile: p.is_mobile.is_some(),
                is_mobile: p.is_mobile.unwrap_or(false),
            },
        },
        EventKind::BalanceQuery(_) => {
            Typed { balance_query: sp_balance_query { player_identifier: s[0], player_partner_identifier: s[1] } }
        }
        EventKind::Other => Typed { none: () },
    }
}

/// Frees an event and everything it points to, including a reply built for it. NULL is allowed
/// and does nothing. An event that still holds its journal claim (begun or recovered, and
/// neither finished nor abandoned, including after `sp_event_finish` or `sp_event_abandon`
/// failed with `SP_ERR_JOURNAL`) has the claim abandoned at once, as `sp_event_abandon` would:
/// the next delivery runs the partner's logic again. Best effort: if that abandon fails too (the
/// storage is still down), the claim ends with its lease instead. The event of an exchange
/// (`sp_exchange.event`) is the exchange's: freeing it here does nothing, `sp_exchange_free`
/// frees it.
///
/// # Safety
/// `event` is NULL or came from `sp_receiver_handle`/`sp_receiver_parse` and is not used
/// afterwards, or is the event of a live exchange.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_free(event: *mut sp_event) {
    value_boundary!((), {
        // SAFETY: the caller promises NULL or a live event; an exchange's is left to it.
        if unsafe { event.cast::<EventBox>().as_ref() }.is_some_and(|b| b.in_exchange) {
            return;
        }
        // SAFETY: forwarded caller promise.
        unsafe { free_event_box(event) }
    })
}

/// The box behind an event pointer, to change it (build a reply).
///
/// # Safety
/// `event` is NULL or came from `into_raw`, is live and used by no other thread.
unsafe fn event_box_mut<'a>(event: *mut sp_event) -> crate::Result<&'a mut EventBox> {
    // SAFETY: sp_event is the first field of the repr(C) EventBox that into_raw allocated.
    unsafe { args::object_mut("event", event.cast::<EventBox>()) }
}

/// Stages `statement` on the claim `event` holds (see `sp_event_stage`). Errors:
/// `InvalidArgument` (field `event`) when the event holds no claim, or (field `sql`) when
/// `MAX_STAGED` statements are staged already.
///
/// # Safety
/// As for `event_box_mut`.
pub(super) unsafe fn stage(event: *mut sp_event, statement: Staged) -> crate::Result<()> {
    // SAFETY: the caller's promise, passed on.
    let b = unsafe { event_box_mut(event)? };
    if !matches!(b.journaled(), Journaled::Claimed(_)) {
        let problem = match b.journaled() {
            Journaled::NotBegun => {
                "was not begun (sp_event_begin): only a claimed delivery (SP_BEGIN_NEW) runs staged statements"
            }
            _ => {
                "holds no claim (answered from the journal, not journaled, finished, abandoned or lost): no finish would run the statement"
            }
        };
        return Err(Error::field(ErrorKind::InvalidArgument, "event", problem));
    }
    let part = b.journal.as_deref_mut().expect("a claimed event has its journal part");
    crate::journal::check_staged_room(part.staged.len())?;
    part.staged.push(statement);
    Ok(())
}

/// The box behind an event pointer, to read it: a shared reference, so that threads reading one
/// event at once alias nothing mutable.
///
/// # Safety
/// `event` is NULL or came from `into_raw`, is live and not changed during `'a`.
unsafe fn event_box<'a>(event: *const sp_event) -> crate::Result<&'a EventBox> {
    // SAFETY: sp_event is the first field of the repr(C) EventBox that into_raw allocated.
    unsafe { args::object("event", event.cast::<EventBox>()) }
}

/// The known event of a box, or the error of asking a reply for an unknown one.
/// Reads the library's own copies, never what the host can write in `view`.
fn known(b: &EventBox) -> crate::Result<KnownEvent> {
    b.known.ok_or_else(|| {
        let name = String::from_utf8_lossy(b.tail.text_of(b.name).unwrap_or_default());
        let problem = format!("no reply is defined for the unknown event {}", crate::callback::json::quoted(&name));
        Error::field(ErrorKind::UnknownEvent, "event", problem)
    })
}

/// Builds the reply to a refund or payout: `{"refund":{"success":true,"errorMessage":""}}` or
/// `{"payout":{"success":false,"errorMessage":"<message>"}}`. `message` must be NULL or empty
/// when `success` is true and must explain the failure when it is false; it may be the thread's
/// own `sp_last_error_message().ptr`. For a balance query only a failure can be built here
/// (`{"playerBalance":{"errorMessage":"<message>"}}`, stating no balance; use
/// `sp_event_reply_balance` for the balance); an unknown event fails with
/// `SP_ERR_UNKNOWN_EVENT` (answer it with `sp_last_error_response`: HTTP 400). Send the reply
/// with the HTTP status in `event->reply_http_status` (200, except for a refused balance query:
/// 500 by default).
///
/// On success `*out` views the reply, owned by the event: valid until the next reply built for
/// the same event or `sp_event_free`.
///
/// # Safety
/// `event` is NULL or live and used by no other thread; `message` is NULL or NUL-terminated;
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_reply(
    event: *mut sp_event,
    success: bool,
    message: *const c_char,
    out: *mut sp_str,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (b, message, out) =
            unsafe { (event_box_mut(event)?, args::opt_text("message", message)?, args::out("out", out)?) };
        let known = known(b)?;
        let EventBox { receiver, reply: kept, view, reply_status, tail, .. } = b;
        let reply = receiver.reply_text(known, success, message.unwrap_or(""))?;
        *reply_status = receiver.reply_http_status(known, success);
        let view = keep_written(kept, tail, view, *reply_status, &[reply.as_bytes()]);
        out.write(view);
        Ok(())
    })
}

/// Builds the successful reply to a balance query:
/// `{"playerBalance":{"money":<money>,"currencyISO4217":"<currency>","coins":<coins>,"errorMessage":""}}`
/// (wrapper and default currency as configured). `money` is in minor units; `money` and `coins`
/// must be 0 to 2^53-1; `currency` is NULL for the configured one. Fails with
/// `SP_ERR_INVALID_ARGUMENT` when the event is not a balance query. `*out` is owned like the
/// reply of `sp_event_reply`.
///
/// # Safety
/// As for `sp_event_reply`; `currency` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_reply_balance(
    event: *mut sp_event,
    money: i64,
    currency: *const c_char,
    coins: i64,
    out: *mut sp_str,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (b, currency, out) =
            unsafe { (event_box_mut(event)?, args::opt_text("currency", currency)?, args::out("out", out)?) };
        if b.known != Some(KnownEvent::BalanceQuery) {
            return Err(
                Error::field(ErrorKind::InvalidArgument, "event", "is not a balance query (getPlayerBalance)").into()
            );
        }
        let EventBox { receiver, reply, view, reply_status, tail, .. } = b;
        let balance = receiver.checked_balance(money, currency, coins)?;
        *reply_status = 200;
        let (mut money, mut coins) = (itoa::Buffer::new(), itoa::Buffer::new());
        out.write(keep_written(reply, tail, view, 200, &balance.pieces(&mut money, &mut coins)));
        Ok(())
    })
}

/// The raw JSON of the extra field `name` (one the spec does not define for this event, such as
/// a field the service added, or the index), exactly as the body wrote it. Fields the spec
/// defines are read from the typed struct instead. Fails with `SP_ERR_MISSING_FIELD` when the
/// event has no such extra field. On success `*out` is owned by the event and valid until
/// `sp_event_free`.
///
/// # Safety
/// `event` is NULL or live; `name` is NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_field(event: *const sp_event, name: *const c_char, out: *mut sp_str) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented; only read here.
        let (b, name, out) = unsafe { (event_box(event)?, args::text("name", name)?, args::out("out", out)?) };
        let found = b.tail.fields().iter().find(|f| b.tail.text_of(f.name) == Some(name.as_bytes()));
        let field =
            found.ok_or_else(|| Error::field(ErrorKind::MissingField, name, "the event has no such extra field"))?;
        out.write(field.json);
        Ok(())
    })
}

/// Claims the event in its receiver's journal (`sp_receiver_config_set_journal`): the
/// exactly-once step between `sp_receiver_handle` and the partner's logic. Its key is the event's
/// name and `transactionId` (refund, payout), or its index for other events carrying one.
///
/// - `SP_BEGIN_NEW`: run the logic, build the reply (`sp_event_reply`), then `sp_event_finish`;
///   after a transient failure of the partner (its database is down), `sp_event_abandon` and
///   answer HTTP 503 so that the service delivers again.
/// - `SP_BEGIN_DONE`: send `out->reply` with HTTP 200 (`event->reply_http_status` is set to 200,
///   and the reply is also the event's last reply); run nothing.
/// - `SP_BEGIN_NOT_JOURNALED`: run the logic and send its reply; finishing is not needed.
///
/// Fails with `SP_ERR_CONFLICT` when the key came before with other content (the first stays;
/// the message names the `transactionId` and the fields that differ; answer with
/// `sp_last_error_response`: HTTP 409), `SP_ERR_BUSY` when another worker holds the claim and did
/// not finish within the busy wait (503), `SP_ERR_JOURNAL` when the storage fails (503), and
/// `SP_ERR_INVALID_ARGUMENT` when the receiver has no journal or the event was begun already.
/// May wait up to the journal's busy wait. `*out` is written only on success.
///
/// # Safety
/// `event` is NULL or live and used by no other thread; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_begin(event: *mut sp_event, out: *mut sp_claim) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (b, out) = unsafe { (event_box_mut(event)?, args::out("out", out)?) };
        let (Some(journal), Some(part)) = (b.receiver.journal().cloned(), b.journal.as_deref_mut()) else {
            let problem = "its receiver has no journal (sp_receiver_config_set_journal)";
            return Err(Error::field(ErrorKind::InvalidArgument, "event", problem).into());
        };
        if !matches!(part.journaled, Journaled::NotBegun) {
            return Err(Error::field(ErrorKind::InvalidArgument, "event", "was begun already").into());
        }
        let claim = match journal.begin(&part.delivery)? {
            Begin::New(claim) => {
                let attempt = claim.attempt();
                part.journaled = Journaled::Claimed(claim);
                part.differing = differing_text(&part.journaled);
                part.reply_pruned = matches!(&part.journaled, Journaled::Claimed(claim) if claim.reply_pruned());
                sp_claim { outcome: sp_begin::SP_BEGIN_NEW, attempt, reply: sp_str::NONE }
            }
            Begin::Done(stored) => {
                part.journaled = Journaled::Settled;
                b.reply_status = 200;
                let reply = keep_written(&mut b.reply, &b.tail, &mut b.view, 200, &[&stored]);
                sp_claim { outcome: sp_begin::SP_BEGIN_DONE, attempt: 0, reply }
            }
            Begin::NotReplayable => {
                part.journaled = Journaled::Settled;
                sp_claim { outcome: sp_begin::SP_BEGIN_NOT_JOURNALED, attempt: 0, reply: sp_str::NONE }
            }
            Begin::Busy => {
                let problem = "another worker is handling this delivery and did not finish within the busy wait";
                return Err(Error::field(ErrorKind::Busy, "event", problem).into());
            }
            Begin::Conflict(error) => return Err(error.into()),
        };
        out.write_zero_padded(claim);
        Ok(())
    })
}

/// After `SP_BEGIN_NEW` (or a recovered event): the decisive fields in which this delivery
/// differs from an earlier, never finished delivery of the same key, one `field: first X, now Y`
/// per line (`moneyWon: first 100, now 250`); empty when it does not differ, which is always the
/// case on attempt 1. Such a delivery is handed out as new because nothing was stored for the
/// first one; the journal records the conflict for the operator, and the partner's ledger, keyed
/// by `transactionId`, absorbs a second credit if the first attempt's logic had run. `*out`
/// views text owned by the event (NUL-terminated), valid until `sp_event_free`.
///
/// # Safety
/// `event` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_differing(event: *const sp_event, out: *mut sp_str) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (b, out) = unsafe { (event_box(event)?, args::out("out", out)?) };
        out.write(differing_view(b.journal.as_ref().map_or(&[], |part| &part.differing)));
        Ok(())
    })
}

/// After `SP_BEGIN_NEW` (or on a recovered event): whether this delivery was handled before,
/// longer ago than the journal keeps replies (`sp_journal_prune`, or the journal's retention,
/// compacted it). Its reply is gone, the same decisive content was seen: it is handed out as the
/// next attempt (`sp_claim.attempt` 2 and on), and the partner's ledger, keyed by
/// `transactionId`, decides, exactly as after a crash between its commit and `sp_event_finish`:
/// answer what the ledger says of that transaction (log it too: a repeat this late is rare).
/// Kept after the claim settles. False for a NULL event and for an event that holds no claim
/// (not begun, answered from the journal, not journaled). Leaves the thread's last error as it
/// is.
///
/// # Safety
/// `event` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_reply_pruned(event: *const sp_event) -> bool {
    value_boundary!(false, {
        // SAFETY: the caller promises NULL or a live event; only read here.
        unsafe { event_box(event) }.is_ok_and(|b| b.journal.as_ref().is_some_and(|part| part.reply_pruned))
    })
}

/// Stores the reply of a claimed event in the journal, once the partner committed its own work:
/// every later delivery of the same event gets it, byte for byte (a `success:false` reply too).
/// The statements staged on the event (`sp_event_stage`) run in the same transaction, after the
/// claim is confirmed this event's: the partner's work and the reply commit together, or
/// neither. A staged statement that fails gives `SP_ERR_JOURNAL` (field `statements[N]`):
/// nothing was stored, the claim stays held and the statements stay staged.
/// `reply`/`len` is the reply to store, or NULL (with `len` 0) for the reply last built for the
/// event (`sp_event_reply`, `sp_event_reply_balance`), which is what a host sends. Does nothing
/// and succeeds for an event answered from the journal (`SP_BEGIN_DONE`), not journaled
/// (`SP_BEGIN_NOT_JOURNALED`), or finished already.
///
/// Fails with `SP_ERR_CLAIM_LOST` when the claim is no longer this event's, and then every time
/// it is called again; nothing was stored, and the message says why:
/// - "the claim was abandoned": `sp_event_abandon` released it (the next delivery runs the
///   partner's logic again);
/// - "taken over by attempt N": its lease expired and another delivery claimed it as attempt N.
///   The partner's work was done, so send the reply all the same (the other delivery finds the
///   credit in the ledger); but when statements were staged, none of them ran: answer 503, and
///   the delivery holding the key runs the logic.
///
/// Fails with `SP_ERR_INVALID_ARGUMENT` (field `reply`) for a reply over the journal's limit or
/// when no reply was built (the claim stays: finish it again or abandon it), or when the event
/// was not begun; `SP_ERR_JOURNAL` when the storage fails (the claim stays held: finish again, or
/// abandon it; `sp_event_free` abandons it at once, and if that fails too, its lease ends it).
/// Refused (`SP_ERR_INVALID_ARGUMENT`, field `event`) for the event of an exchange
/// (`sp_exchange.event`), whose claim `sp_exchange_complete` settles.
///
/// # Safety
/// `event` is NULL or live and used by no other thread; `reply` is NULL or `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_finish(event: *mut sp_event, reply: *const u8, len: usize) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (b, given) = unsafe { (event_box_mut(event)?, args::bytes("reply", reply, len)?) };
        b.not_in_exchange("finish")?;
        if !matches!(b.journaled(), Journaled::Claimed(_)) {
            return b.journaled().refusal("finish").map_or(Ok(()), |error| Err(error.into()));
        }
        let EventBox { journal: part, reply: kept, receiver, tail, .. } = b;
        let part = part.as_deref_mut().expect("a claimed event has its journal part");
        let Journaled::Claimed(claim) = &part.journaled else { unreachable!("claimed, as checked above") };
        let reply = if reply.is_null() { kept.last(tail) } else { given };
        if reply.is_empty() {
            let problem = "no reply was built for the event (sp_event_reply) and none was given";
            return Err(Error::field(ErrorKind::InvalidArgument, "reply", problem).into());
        }
        let journal = receiver.journal().expect("a claimed event's receiver has a journal");
        match journal.finish_with(claim, reply, &part.staged) {
            Ok(()) => {
                part.journaled = Journaled::Settled;
                part.staged = Vec::new();
                Ok(())
            }
            Err(error) => {
                if error.kind == ErrorKind::ClaimLost {
                    part.journaled = Journaled::Lost { error: error.clone(), verb: "finish" };
                    part.staged = Vec::new();
                }
                Err(error.into())
            }
        }
    })
}

/// Releases the claim of an event after a transient failure of the partner (its database is
/// down), so that the next delivery runs the logic again; answer the service with HTTP 503 so
/// that it delivers again. Freeing a claimed event releases its claim the same way. Does nothing
/// and succeeds for an event answered from the journal, not journaled, finished, or abandoned
/// already. After it, `sp_event_finish` fails with `SP_ERR_CLAIM_LOST` ("the claim was
/// abandoned").
///
/// Fails with `SP_ERR_CLAIM_LOST` ("taken over by attempt N") when the claim's lease expired and
/// another delivery took it over, found by this call or an earlier `sp_event_finish` or
/// `sp_event_abandon`, and then every time it is called again; `SP_ERR_JOURNAL` when the storage
/// fails (the claim stays held: abandon it again, or free the event, which tries once more, and
/// if that fails too, its lease ends it); `SP_ERR_INVALID_ARGUMENT` when the event was not begun,
/// or is the event of an exchange (`sp_exchange.event`), whose claim `sp_exchange_complete`
/// settles.
///
/// # Safety
/// `event` is NULL or live and used by no other thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_abandon(event: *mut sp_event) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or a live event it does not share.
        let b = unsafe { event_box_mut(event)? };
        b.not_in_exchange("abandon")?;
        let (Some(part), Some(journal)) = (b.journal.as_deref_mut(), b.receiver.journal()) else {
            return Journaled::NotBegun.refusal("abandon").map_or(Ok(()), |error| Err(error.into()));
        };
        let Journaled::Claimed(claim) = &part.journaled else {
            return part.journaled.refusal("abandon").map_or(Ok(()), |error| Err(error.into()));
        };
        match journal.abandon(claim) {
            Ok(()) => {
                part.journaled = Journaled::Abandoned(abandoned_error(claim));
                part.staged = Vec::new();
                Ok(())
            }
            Err(error) => {
                if error.kind == ErrorKind::ClaimLost {
                    part.journaled = Journaled::Lost { error: error.clone(), verb: "abandon" };
                    part.staged = Vec::new();
                }
                Err(error.into())
            }
        }
    })
}
