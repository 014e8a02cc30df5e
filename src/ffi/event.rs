//! Typed events as plain C structs: one call (`sp_receiver_handle`) gives an `sp_event` whose
//! fields are read directly; `sp_event_reply` builds the answer; `sp_event_free` frees it all.

use std::ffi::c_char;
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::event::{Event, EventKind, KnownEvent};
use crate::ffi::args;
use crate::ffi::owned;
use crate::ffi::status::sp_status;
use crate::ffi::str::{Arena, sp_str};
use crate::receiver::Receiver;

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
}

/// The allocation behind an `sp_event` pointer: the public struct first, then what it points to.
/// The host may write into `view` (PHP and Python can), so the library never reads it back: it
/// keeps its own copy of what it needs (`known`, `name`).
#[repr(C)]
struct EventBox {
    view: sp_event,
    /// The event's kind, the library's own copy: `view.kind` may hold any integer by now.
    known: Option<KnownEvent>,
    /// The view of the event's name in `arena`, the library's own copy of `view.name`.
    name: sp_str,
    /// The typed structs live in allocations of their own, so that the views handed out stay
    /// valid whatever the library later borrows of the box itself.
    buy_refund: Option<Box<sp_buy_refund>>,
    jackpot_payout: Option<Box<sp_jackpot_payout>>,
    balance_query: Option<Box<sp_balance_query>>,
    extra_fields: Vec<sp_field>,
    arena: Arena,
    /// The last reply built, NUL-terminated.
    reply: String,
    receiver: Arc<Receiver>,
}

/// Builds the C view of `event` and hands out its ownership as a raw pointer.
pub fn into_raw(event: &Event<'_>, receiver: &Arc<Receiver>) -> *mut sp_event {
    let typed = typed_strings(&event.kind);
    let extra_text = event.extra.iter().flat_map(|f| [f.name.as_ref(), f.raw.get()]);
    let mut arena = Arena::for_strings(typed.iter().flatten().copied().chain(extra_text).chain([event.name.as_ref()]));
    let strings = typed.map(|s| arena.push_opt(s));
    let extra_fields: Vec<sp_field> =
        event.extra.iter().map(|f| sp_field { name: arena.push(&f.name), json: arena.push(f.raw.get()) }).collect();
    let name = arena.push(&event.name);
    let mut boxed = Box::new(EventBox {
        view: sp_event {
            kind: kind_of(&event.kind),
            name,
            has_index: event.index.is_some(),
            index: event.index.unwrap_or(0),
            buy_refund: std::ptr::null(),
            jackpot_payout: std::ptr::null(),
            balance_query: std::ptr::null(),
            extra_fields: std::ptr::null(),
            extra_fields_len: 0,
            index_unreadable: event.index_unreadable,
            reply_http_status: 0,
        },
        known: event.known(),
        name,
        buy_refund: None,
        jackpot_payout: None,
        balance_query: None,
        extra_fields,
        arena,
        reply: String::new(),
        receiver: Arc::clone(receiver),
    });
    fill(&event.kind, strings, &mut boxed);
    // The box is handed out first and its views taken through the pointer handed out, so that
    // no later move of the box invalidates them.
    let raw = Box::into_raw(boxed);
    // SAFETY: `raw` is the live allocation just made; no other reference to it exists yet.
    let b = unsafe { &mut *raw };
    b.view.buy_refund = b.buy_refund.as_deref().map_or(std::ptr::null(), std::ptr::from_ref);
    b.view.jackpot_payout = b.jackpot_payout.as_deref().map_or(std::ptr::null(), std::ptr::from_ref);
    b.view.balance_query = b.balance_query.as_deref().map_or(std::ptr::null(), std::ptr::from_ref);
    if !b.extra_fields.is_empty() {
        b.view.extra_fields = b.extra_fields.as_ptr();
        b.view.extra_fields_len = b.extra_fields.len();
    }
    raw.cast::<sp_event>()
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

fn kind_of(kind: &EventKind<'_>) -> sp_event_kind {
    match kind {
        EventKind::BuyRefund(_) => sp_event_kind::SP_EVENT_KIND_BUY_REFUND,
        EventKind::JackpotPayout(_) => sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT,
        EventKind::BalanceQuery(_) => sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY,
        EventKind::Other => sp_event_kind::SP_EVENT_KIND_OTHER,
    }
}

/// Fills the typed struct of `kind` into the box, with the views of `typed_strings`.
fn fill(kind: &EventKind<'_>, s: [sp_str; 6], b: &mut EventBox) {
    match kind {
        EventKind::BuyRefund(r) => {
            b.buy_refund = Some(Box::new(sp_buy_refund {
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
            }))
        }
        EventKind::JackpotPayout(p) => {
            b.jackpot_payout = Some(Box::new(sp_jackpot_payout {
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
            }))
        }
        EventKind::BalanceQuery(_) => {
            b.balance_query =
                Some(Box::new(sp_balance_query { player_identifier: s[0], player_partner_identifier: s[1] }))
        }
        EventKind::Other => {}
    }
}

/// Frees an event and everything it points to, including a reply built for it. NULL is allowed
/// and does nothing.
///
/// # Safety
/// `event` is NULL or came from `sp_receiver_handle`/`sp_receiver_parse` and is not used
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_free(event: *mut sp_event) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<EventBox, _>(event) } })
}

/// The box behind an event pointer, to change it (build a reply).
///
/// # Safety
/// `event` is NULL or came from `into_raw`, is live and used by no other thread.
unsafe fn event_box_mut<'a>(event: *mut sp_event) -> crate::Result<&'a mut EventBox> {
    // SAFETY: sp_event is the first field of the repr(C) EventBox that into_raw allocated.
    unsafe { args::object_mut("event", event.cast::<EventBox>()) }
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

/// Stores `reply` in the event with the HTTP status to send it with, and points `out` at it.
fn keep_reply(b: &mut EventBox, mut reply: String, http_status: u16, out: &mut std::mem::MaybeUninit<sp_str>) {
    reply.push('\0');
    b.reply = reply;
    b.view.reply_http_status = http_status;
    out.write(sp_str::of_nul_terminated(b.reply.as_bytes()));
}

/// The known event of a box, or the error of asking a reply for an unknown one.
/// Reads the library's own copies, never what the host can write in `view`.
fn known(b: &EventBox) -> crate::Result<KnownEvent> {
    b.known.ok_or_else(|| {
        let name = String::from_utf8_lossy(b.arena.text_of(b.name).unwrap_or_default());
        let problem = format!("no reply is defined for the unknown event {}", crate::json::quoted(&name));
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
        let reply = b.receiver.reply_to(known, success, message.unwrap_or(""))?;
        let http_status = b.receiver.reply_http_status(known, success);
        keep_reply(b, reply, http_status, out);
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
        let reply = b.receiver.balance_reply(money, currency, coins)?;
        keep_reply(b, reply, 200, out);
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
        let found = b.extra_fields.iter().find(|f| b.arena.text_of(f.name) == Some(name.as_bytes()));
        let field =
            found.ok_or_else(|| Error::field(ErrorKind::MissingField, name, "the event has no such extra field"))?;
        out.write(field.json);
        Ok(())
    })
}
