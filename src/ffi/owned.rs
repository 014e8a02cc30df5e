//! Objects handed to C: boxed on the way out, unboxed by their `_free` function on the way back.
//!
//! An object whose public C struct is its first field (`#[repr(C)]`, such as `GamesBox` with its
//! `sp_games`) is handed out as a pointer to that struct; for an opaque type the view is the
//! object itself.

/// Moves `value` to the heap and hands out ownership as a pointer to `View`, which must be `T`
/// itself or the first field of a `#[repr(C)]` `T`.
pub fn into_raw<T, View>(value: T) -> *mut View {
    Box::into_raw(Box::new(value)).cast()
}

/// Frees what `into_raw::<T, _>` handed out. NULL does nothing.
///
/// # Safety
/// `ptr` is NULL or came from `into_raw::<T, View>` and is not used afterwards.
pub unsafe fn free<T, View>(ptr: *mut View) {
    if !ptr.is_null() {
        // SAFETY: by the caller's promise, `ptr` is a box of T made by into_raw.
        drop(unsafe { Box::from_raw(ptr.cast::<T>()) });
    }
}
