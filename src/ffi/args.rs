//! Reading arguments from C: NULL checks and UTF-8 checks, each failure naming the argument.

use std::ffi::{CStr, c_char};

use crate::error::{Error, ErrorKind, Result};

/// The refusal of a NULL `name`: an argument, or a buffer the library is to write into.
pub(crate) fn null(name: &str) -> Error {
    Error::field(ErrorKind::InvalidArgument, name, "must not be NULL")
}

/// A required NUL-terminated UTF-8 string.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that outlives `'a`.
pub unsafe fn text<'a>(name: &str, ptr: *const c_char) -> Result<&'a str> {
    // SAFETY: the caller promises NULL or a live NUL-terminated string.
    unsafe { opt_text(name, ptr) }?.ok_or_else(|| null(name))
}

/// An optional NUL-terminated UTF-8 string (NULL gives `None`).
///
/// # Safety
/// As for `text`.
pub unsafe fn opt_text<'a>(name: &str, ptr: *const c_char) -> Result<Option<&'a str>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and, by the caller's promise, NUL-terminated and alive for 'a.
    utf8(name, unsafe { CStr::from_ptr(ptr) }.to_bytes()).map(Some)
}

/// `bytes` as UTF-8 text, or the refusal of argument `name` naming the first bad byte.
pub fn utf8<'a>(name: &str, bytes: &'a [u8]) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|e| {
        Error::field(ErrorKind::InvalidArgument, name, format!("not valid UTF-8 at byte {}", e.valid_up_to()))
    })
}

/// An optional NUL-terminated byte string (NULL gives `None`), not required to be UTF-8.
///
/// # Safety
/// As for `text`.
pub unsafe fn opt_bytes_z<'a>(ptr: *const c_char) -> Option<&'a [u8]> {
    // SAFETY: non-NULL and, by the caller's promise, NUL-terminated and alive for 'a.
    (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }.to_bytes())
}

/// `len` bytes at `data`; NULL is allowed only with `len` 0. A length above `isize::MAX` (such
/// as `(size_t)-1` from a failed `read`) is refused before the bytes are touched: no buffer can
/// be that long.
///
/// # Safety
/// `data` is NULL or points to `len` readable bytes that outlive `'a`.
pub unsafe fn bytes<'a>(name: &str, data: *const u8, len: usize) -> Result<&'a [u8]> {
    if isize::try_from(len).is_err() {
        let problem = format!("length {len} is larger than any buffer can be (a failed read returning -1?)");
        return Err(Error::field(ErrorKind::InvalidArgument, name, problem));
    }
    if data.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(null(name)) };
    }
    // SAFETY: non-NULL and, by the caller's promise, `len` readable bytes alive for 'a.
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// A required reference to an object the library handed out.
///
/// # Safety
/// `ptr` is NULL or a live object of type `T` not mutated during `'a`.
pub unsafe fn object<'a, T>(name: &str, ptr: *const T) -> Result<&'a T> {
    // SAFETY: the caller promises NULL or a live object.
    unsafe { ptr.as_ref() }.ok_or_else(|| null(name))
}

/// A required exclusive reference to an object the library handed out.
///
/// # Safety
/// `ptr` is NULL or a live object of type `T` used by no one else during `'a`.
pub unsafe fn object_mut<'a, T>(name: &str, ptr: *mut T) -> Result<&'a mut T> {
    // SAFETY: the caller promises NULL or a live object it does not share.
    unsafe { ptr.as_mut() }.ok_or_else(|| null(name))
}

/// A required out-parameter, checked before any work so that a NULL one fails early.
///
/// # Safety
/// `ptr` is NULL or valid for writing a `T` during `'a`.
pub unsafe fn out<'a, T>(name: &str, ptr: *mut T) -> Result<Out<'a, T>> {
    let ptr = std::ptr::NonNull::new(ptr).ok_or_else(|| null(name))?;
    Ok(Out { ptr, _written: std::marker::PhantomData })
}

/// A checked out-parameter (`out`): the host's pointer, written once through that pointer alone.
/// No reference to the memory is made, so it may lie inside an object the library borrows
/// meanwhile (a host handing `&event->name` as the `out` of a call on that event).
pub struct Out<'a, T> {
    ptr: std::ptr::NonNull<T>,
    _written: std::marker::PhantomData<&'a mut T>,
}

impl<T> Out<'_, T> {
    /// Writes `value` (without dropping what was there: the host's memory is not a `T` yet).
    /// Call it once the objects the call borrows are no longer used.
    pub fn write(self, value: T) {
        // SAFETY: `out`'s caller promised memory writable for a `T` during the borrow.
        unsafe { self.ptr.as_ptr().write(value) }
    }

    /// Writes `value` as `write` does, its padding as zeros (a typed write leaves the padding
    /// undefined, and a host may copy the struct as bytes).
    pub fn write_zero_padded(self, value: T)
    where
        T: super::zero_padded::ZeroPadded,
    {
        // SAFETY: `out`'s caller promised memory writable for a `T` during the borrow; `NonNull`
        // from the host's pointer, aligned as the host's `T` is.
        unsafe { value.write_zero_padded(self.ptr.as_ptr()) }
    }
}
