//! What the C ABI test files share: the test token and a receiver made with it.

use std::ffi::CStr;
use std::ptr;

use slotpartner::ffi::receiver::{
    sp_receiver, sp_receiver_config, sp_receiver_config_add_token, sp_receiver_config_free, sp_receiver_config_new,
    sp_receiver_new,
};
use slotpartner::ffi::status::sp_status::SP_OK;

pub const TOKEN: &CStr = c"6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";

/// A receiver with the test token; `settings` may change the configuration first. Free it with
/// `sp_receiver_free`.
pub fn receiver(settings: impl FnOnce(*mut sp_receiver_config)) -> *mut sp_receiver {
    let (mut config, mut r) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers throughout; the configuration is freed once the receiver exists.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut config), SP_OK);
        assert_eq!(sp_receiver_config_add_token(config, TOKEN.as_ptr()), SP_OK);
        settings(config);
        assert_eq!(sp_receiver_new(config, &mut r), SP_OK);
        sp_receiver_config_free(config);
    }
    assert!(!r.is_null());
    r
}
