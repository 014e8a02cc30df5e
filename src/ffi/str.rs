//! `sp_str`, the borrowed string view every string leaves the library as, and the arena that
//! keeps an object's strings NUL-terminated in one allocation.

use std::ffi::c_char;

/// A borrowed UTF-8 string: `len` bytes at `ptr`, followed by a NUL byte that `len` does not
/// count, with no NUL inside. Owned by the object that returned it and valid until that object
/// is freed (for `sp_last_error_*`: until the next status-returning `sp_` call on the same
/// thread returns, so it may be passed to that call). An absent optional field is `{NULL, 0}`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_str {
    pub ptr: *const c_char,
    pub len: usize,
}

impl sp_str {
    /// The view of an absent optional value: `{NULL, 0}`.
    pub const NONE: sp_str = sp_str { ptr: std::ptr::null(), len: 0 };

    /// A view of a static NUL-terminated string.
    pub fn from_static(s: &'static std::ffi::CStr) -> sp_str {
        sp_str { ptr: s.as_ptr(), len: s.to_bytes().len() }
    }

    /// A view of `bytes`, which must end with a NUL byte not counted in the view and outlive it.
    pub fn of_nul_terminated(bytes: &[u8]) -> sp_str {
        debug_assert_eq!(bytes.last(), Some(&0));
        sp_str { ptr: bytes.as_ptr().cast(), len: bytes.len() - 1 }
    }
}

/// One buffer holding many NUL-terminated strings, sized once for all of them: it never grows,
/// so a view taken when a string is pushed stays valid as long as the arena lives (moving the
/// arena does not move its buffer).
#[derive(Debug)]
pub struct Arena {
    bytes: Vec<u8>,
}

impl Arena {
    /// An arena for `strings`, which must be every string that will be pushed (more bytes would
    /// panic rather than move the buffer under earlier views).
    pub fn for_strings<'s>(strings: impl IntoIterator<Item = &'s str>) -> Arena {
        Arena::with_capacity(strings.into_iter().map(|s| s.len() + 1).sum())
    }

    /// An arena for `bytes` bytes: every string that will be pushed and its NUL (more would
    /// panic rather than move the buffer under earlier views).
    pub fn with_capacity(bytes: usize) -> Arena {
        Arena { bytes: Vec::with_capacity(bytes) }
    }

    /// Appends `s` and a NUL terminator and views it. Strings reaching the C side hold no NUL:
    /// identifiers and names are validated free of control characters, raw JSON escapes them.
    pub fn push(&mut self, s: &str) -> sp_str {
        assert!(self.bytes.capacity() - self.bytes.len() > s.len(), "arena sized too small");
        let start = self.bytes.len();
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
        sp_str { ptr: self.bytes[start..].as_ptr().cast(), len: s.len() }
    }

    /// Everything pushed so far: each string followed by its NUL.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes a view of this arena shows, found by address arithmetic alone (no pointer is
    /// read); `None` for a view of something else.
    pub fn text_of(&self, view: sp_str) -> Option<&[u8]> {
        let start = (view.ptr as usize).checked_sub(self.bytes.as_ptr() as usize)?;
        self.bytes.get(start..start.checked_add(view.len)?)
    }
}
