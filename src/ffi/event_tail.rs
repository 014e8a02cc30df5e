//! The one allocation behind an `sp_event`: the event's box first, then its tail, sized when the
//! event is made: the extra fields (`sp_field` entries), the strings block (`sp_event.strings`),
//! and room for the usual reply. One `malloc` and one `free` an event, where a box, a strings
//! buffer and a reply buffer took three.
//!
//! Every pointer into the tail is taken from the allocation's own pointer, never through a
//! reference to the box, and the tail lies outside the box: a reference the library later takes
//! to the box covers none of it, so the views handed out stay valid, and a host may hand the
//! event's own bytes back in (a reply as the currency of the next) while the box is borrowed.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr;

use crate::ffi::event::sp_field;
use crate::ffi::str::sp_str;

/// The sizes of a tail's parts: `fields` entries, `strings` bytes, `room` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TailSizes {
    pub fields: usize,
    pub strings: usize,
    pub room: usize,
}

impl TailSizes {
    /// The layout of a `T` followed by the tail, and where the three parts start.
    fn layout<T>(self) -> (Layout, [usize; 3]) {
        let fits = "an event's allocation fits the address space";
        let fields = Layout::array::<sp_field>(self.fields).expect(fits);
        let (layout, fields) = Layout::new::<T>().extend(fields).expect(fits);
        let (layout, strings) = layout.extend(Layout::array::<u8>(self.strings).expect(fits)).expect(fits);
        let (layout, room) = layout.extend(Layout::array::<u8>(self.room).expect(fits)).expect(fits);
        (layout.pad_to_align(), [fields, strings, room])
    }
}

/// The tail of an allocation made by `allocate`: its parts by address. The fields and strings are
/// written once, when the event is made (`StringsWriter`); the room holds the last reply that fits
/// it (`KeptReply`).
#[derive(Debug)]
pub(crate) struct Tail {
    fields: *mut sp_field,
    strings: *mut u8,
    room: *mut u8,
    sizes: TailSizes,
    /// The layout of the whole allocation, to free it with.
    layout: Layout,
}

/// Allocates a `T` (left uninitialised: the caller writes it) followed by a tail of `sizes`.
/// Free it with `free` once the `T` is written.
pub(crate) fn allocate<T>(sizes: TailSizes) -> (*mut T, Tail) {
    let (layout, [fields, strings, room]) = sizes.layout::<T>();
    // SAFETY: the layout is never zero-sized: it holds a `T` that holds an `sp_event`.
    let base = unsafe { alloc(layout) };
    if base.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: the offsets are within the allocation just made, as `layout` placed them.
    let tail = unsafe {
        Tail { fields: base.add(fields).cast(), strings: base.add(strings), room: base.add(room), sizes, layout }
    };
    (base.cast(), tail)
}

/// Drops the `T` at `raw` and frees its allocation, of `layout` (`Tail::layout`).
///
/// # Safety
/// `raw` came from `allocate::<T>` with the tail whose layout is `layout`, its `T` is written
/// and live, and neither is used afterwards.
pub(crate) unsafe fn free<T>(raw: *mut T, layout: Layout) {
    // SAFETY: the caller's promise: a live `T` in an allocation of this layout.
    unsafe {
        ptr::drop_in_place(raw);
        dealloc(raw.cast(), layout);
    }
}

impl Tail {
    /// The layout of the allocation the tail is part of (to `free` it).
    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    /// Where the extra fields start: NULL when there are none.
    pub(crate) fn fields_ptr(&self) -> *const sp_field {
        if self.sizes.fields == 0 { ptr::null() } else { self.fields }
    }

    /// The extra fields, as written when the event was made (or since by the host, which may
    /// write into them: their views are checked with `text_of` before they are read).
    pub(crate) fn fields(&self) -> &[sp_field] {
        // SAFETY: `sizes.fields` entries were written by `write_field` when the event was made
        // (an event hands itself out only then), within the allocation this tail lives in.
        unsafe { std::slice::from_raw_parts(self.fields, self.sizes.fields) }
    }

    /// Writes the `index`th extra field.
    ///
    /// # Safety
    /// Only while the event is made, before it is handed out; `index < sizes.fields`.
    pub(crate) unsafe fn write_field(&self, index: usize, field: sp_field) {
        assert!(index < self.sizes.fields, "an event's tail sized too small");
        // SAFETY: within the fields part, which nothing else reads or writes yet.
        unsafe { self.fields.add(index).write(field) }
    }

    /// The strings block: its start and length.
    pub(crate) fn strings(&self) -> (*const u8, usize) {
        (self.strings, self.sizes.strings)
    }

    /// A writer of the strings block, from its start.
    ///
    /// # Safety
    /// Only while the event is made, before it is handed out, and once.
    pub(crate) unsafe fn strings_writer(&self) -> StringsWriter {
        StringsWriter { at: self.strings, left: self.sizes.strings }
    }

    /// The bytes a view of the strings block shows, found by address arithmetic alone (no
    /// pointer is read); `None` for a view of something else.
    pub(crate) fn text_of(&self, view: sp_str) -> Option<&[u8]> {
        let start = (view.ptr as usize).checked_sub(self.strings as usize)?;
        let end = start.checked_add(view.len)?;
        if end > self.sizes.strings {
            return None;
        }
        // SAFETY: within the strings block, written in full when the event was made.
        Some(unsafe { std::slice::from_raw_parts(self.strings.add(start), view.len) })
    }
}

/// Writes an event's strings into its block, each followed by a NUL, as `Arena::push` does into
/// its buffer.
pub(crate) struct StringsWriter {
    at: *mut u8,
    left: usize,
}

impl StringsWriter {
    /// Appends `s` and a NUL terminator and views it. Panics rather than write past the block
    /// (sized for every string pushed).
    pub(crate) fn push(&mut self, s: &str) -> sp_str {
        assert!(self.left > s.len(), "an event's strings block sized too small");
        let start = self.at;
        // SAFETY: `s.len() + 1` bytes are left in the block, which `s` (borrowed from the body
        // or the parsed event) does not overlap.
        unsafe {
            if !s.is_empty() {
                // Most typed slots of an event are empty: no call for them.
                ptr::copy_nonoverlapping(s.as_ptr(), start, s.len());
            }
            start.add(s.len()).write(0);
            self.at = start.add(s.len() + 1);
        }
        self.left -= s.len() + 1;
        sp_str { ptr: start.cast_const().cast(), len: s.len() }
    }
}

/// The last reply built for an event, NUL-terminated: in its tail's room when it fits (the usual
/// reply, sized for when the event was made), else in a buffer of its own.
#[derive(Debug, Default)]
pub(crate) struct KeptReply {
    /// Bytes of the reply and its NUL; 0 when none was built.
    len: usize,
    on_heap: bool,
    heap: Vec<u8>,
}

impl KeptReply {
    /// Makes the concatenation of `pieces` (which must not overlap the room: they are read
    /// while it is written) the last reply, and views it. Inlined, so that the copies of pieces
    /// of a known length (a balance reply's constant parts) become moves, not calls.
    #[inline(always)]
    pub(crate) fn keep(&mut self, tail: &Tail, pieces: &[&[u8]]) -> sp_str {
        let len = pieces.iter().map(|piece| piece.len()).sum::<usize>();
        if len < tail.sizes.room {
            let mut at = tail.room;
            for piece in pieces {
                // SAFETY: `len + 1` bytes fit the room, which no piece overlaps.
                unsafe {
                    ptr::copy_nonoverlapping(piece.as_ptr(), at, piece.len());
                    at = at.add(piece.len());
                }
            }
            // SAFETY: the NUL's byte is within the room (`len < room`).
            unsafe { at.write(0) };
            (self.len, self.on_heap) = (len + 1, false);
            return sp_str { ptr: tail.room.cast_const().cast(), len };
        }
        self.heap.clear();
        self.heap.reserve_exact(len + 1);
        pieces.iter().for_each(|piece| self.heap.extend_from_slice(piece));
        self.heap.push(0);
        (self.len, self.on_heap) = (len + 1, true);
        sp_str::of_nul_terminated(&self.heap)
    }

    /// The last reply, without its NUL; empty when none was built.
    pub(crate) fn last<'t>(&'t self, tail: &'t Tail) -> &'t [u8] {
        match (self.len, self.on_heap) {
            (0, _) => &[],
            (len, true) => &self.heap[..len - 1],
            // SAFETY: `len` bytes of the room were written by `keep` (the host may have written
            // over them since: they are its reply, sent as it left them).
            (len, false) => unsafe { std::slice::from_raw_parts(tail.room, len - 1) },
        }
    }
}
