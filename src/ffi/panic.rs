//! The boundary every exported function runs inside: the thread's last error is cleared on entry,
//! and a panic is caught and reported instead of unwinding into C.

/// Runs `$body` (a block evaluating to `Result<(), Failure>`; `?` converts core errors) and
/// returns its `sp_status`: `SP_OK`, the status of the failure (recorded as the thread's last
/// error), or `SP_ERR_PANIC`.
macro_rules! status_boundary {
    ($body:block) => {{
        $crate::ffi::error::clear();
        let outcome = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(
            || -> ::std::result::Result<(), $crate::ffi::error::Failure> { $body },
        ));
        match outcome {
            Ok(Ok(())) => $crate::ffi::status::sp_status::SP_OK,
            Ok(Err(failure)) => $crate::ffi::error::record(&failure.error, failure.response),
            Err(_) => $crate::ffi::error::record_panic(),
        }
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
