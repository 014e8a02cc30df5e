//! A thread's spare vector for an event's extra fields: the C entry points that parse one body
//! after another (`sp_receiver_handle`, `sp_receiver_handle_record`) hand the vector of the
//! event they are done with to the next one, so that a callback does not allocate and free it.
//! Only its room is kept: it is emptied before it is put aside, and one of more than
//! `MAX_KEPT` fields' room is dropped instead.

use std::cell::Cell;

use crate::callback::json::Field;

/// The most fields' room a thread keeps aside (a body with more is unusual).
const MAX_KEPT: usize = 32;

thread_local! {
    static SPARE: Cell<Vec<Field<'static>>> = const { Cell::new(Vec::new()) };
}

/// The thread's spare vector (empty; without room the first time, after a body with many
/// fields, or on a thread whose thread-locals are already torn down: a host may call from a
/// `pthread_key_create` destructor, which runs after them), to parse the next body with.
pub(crate) fn take<'a>() -> Vec<Field<'a>> {
    SPARE.try_with(Cell::take).unwrap_or_default()
}

/// Empties `fields` and keeps its room for the thread's next `take` (drops it on a thread that is
/// exiting).
pub(crate) fn put_back(mut fields: Vec<Field<'_>>) {
    if fields.capacity() > MAX_KEPT {
        return;
    }
    fields.clear();
    // An empty vector borrows nothing: collected in place (the same allocation) as one that
    // would borrow for ever.
    let empty: Vec<Field<'static>> = fields.into_iter().map(|_| unreachable!("the vector is empty")).collect();
    // On a thread whose thread-locals are torn down the closure does not run and drops `empty`.
    let _ = SPARE.try_with(|spare| spare.set(empty));
}
