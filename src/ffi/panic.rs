//! The boundary every exported function runs inside: a panic is caught and reported instead of
//! unwinding into C, and every touch of the thread's last error happens inside it.

/// Runs `$body` (a block evaluating to `Result<(), Failure>`; `?` converts core errors) and
/// returns its `sp_status`: `SP_OK`, the status of the failure (recorded as the thread's last
/// error), or `SP_ERR_PANIC`.
///
/// The previous last error is taken out on entry but dropped only when the call returns, so that
/// an argument pointing into it (`sp_last_error_message().ptr` handed back in) stays readable
/// for the whole call.
macro_rules! status_boundary {
    ($body:block) => {{
        let outcome = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| {
            let previous = $crate::ffi::error::take();
            // A closure, so that `return` in the body returns from the body alone.
            #[allow(clippy::redundant_closure_call)]
            let result = (|| -> ::std::result::Result<(), $crate::ffi::error::Failure> { $body })();
            let status = match result {
                Ok(()) => $crate::ffi::status::sp_status::SP_OK,
                Err(failure) => $crate::ffi::error::record(&failure.error, failure.response),
            };
            drop(previous);
            status
        }));
        outcome.unwrap_or_else(|_| $crate::ffi::error::record_panic())
    }};
}

/// Runs `$body` (a block evaluating to the function's value), returning `$on_panic` if it panics.
/// Leaves the thread's last error as it is (accessors and `_free` functions use it).
macro_rules! value_boundary {
    ($on_panic:expr, $body:block) => {{
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(value) => value,
            Err(_) => {
                $crate::ffi::error::record_panic();
                $on_panic
            }
        }
    }};
}

#[cfg(test)]
mod tests {
    use crate::ffi::error::{sp_last_error_message, sp_last_error_response};
    use crate::ffi::status::sp_status;

    fn panicking_export() -> sp_status {
        status_boundary!({
            if std::hint::black_box(true) {
                panic!("a bug inside the library");
            }
            Ok(())
        })
    }

    #[test]
    fn a_panic_becomes_sp_err_panic_with_a_message_and_a_500_answer() {
        let status = panicking_export();
        assert_eq!(status, sp_status::SP_ERR_PANIC);
        let message = sp_last_error_message();
        // SAFETY: the view is valid until the next status-returning call on this thread returns.
        let text = unsafe { std::slice::from_raw_parts(message.ptr.cast::<u8>(), message.len) };
        assert!(std::str::from_utf8(text).unwrap().contains("panicked"));
        let mut http = 0u16;
        let mut body = crate::ffi::str::sp_str::NONE;
        // SAFETY: valid out-pointers.
        assert_eq!(unsafe { sp_last_error_response(&mut http, &mut body) }, sp_status::SP_OK);
        assert_eq!(http, 500);
    }

    #[test]
    fn a_panicking_value_function_returns_its_fallback() {
        let value: usize = value_boundary!(7, {
            if std::hint::black_box(true) {
                panic!("a bug inside the library");
            }
            1
        });
        assert_eq!(value, 7);
    }
}
