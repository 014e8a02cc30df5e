//! Structs handed to the host written with their padding as zeros: a typed write (or move)
//! leaves a struct's padding undefined, whatever bytes were there, and a host may copy a struct
//! it was handed as bytes (Python's `bytes(struct)`, PHP's `FFI::string`).

/// Writes `$value`, a `$ty`, at `$at` (a `*mut $ty`) field by field over zeroed bytes, so that
/// its padding is zeros. Every field is named (the destructuring fails to compile when one is
/// left out). Expands to raw pointer writes, to be used in `unsafe`: `$at` is valid for writes
/// of a `$ty` and aligned. Write where the struct stays: a move, even inside a `MaybeUninit`,
/// leaves its padding undefined again.
macro_rules! zero_padded {
    ($at:expr, $value:expr, $ty:ident { $($field:ident),+ $(,)? }) => {{
        let at: *mut $ty = $at;
        let $ty { $($field),+ } = $value;
        at.cast::<u8>().write_bytes(0, size_of::<$ty>());
        $((&raw mut (*at).$field).write($field);)+
    }};
}

/// A struct with padding that the library writes into the host's memory through an
/// out-parameter (`args::Out::write_zero_padded`): written field by field over zeros.
pub trait ZeroPadded: Sized {
    /// Writes `self` at `at`, its padding as zeros.
    ///
    /// # Safety
    /// `at` is aligned and valid for writes of a `Self`.
    unsafe fn write_zero_padded(self, at: *mut Self);
}

/// Implements `ZeroPadded` for `$ty`, naming each of its fields (as `zero_padded!`).
macro_rules! impl_zero_padded {
    ($ty:ident { $($field:ident),+ $(,)? }) => {
        impl $crate::ffi::zero_padded::ZeroPadded for $ty {
            unsafe fn write_zero_padded(self, at: *mut Self) {
                // SAFETY: the caller promises `at` aligned and writable for a `$ty`.
                unsafe { zero_padded!(at, self, $ty { $($field),+ }) }
            }
        }
    };
}
