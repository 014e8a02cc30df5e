//! The reply bodies a partner sends back to the service, with correct JSON escaping.

use crate::callback::fields::{MAX_AMOUNT, is_currency_code};
use crate::callback::json::{push_quoted, quoted};
use crate::error::{Error, ErrorKind, Result};

/// `{"<wrapper>":{"success":<success>,"errorMessage":"<message>"}}`.
///
/// A success carries an empty `errorMessage` (as existing integrations send), or none at all when
/// `omit_empty_message` is set; a failure must carry a non-empty message.
pub fn result(wrapper: &str, success: bool, message: &str, omit_empty_message: bool) -> Result<String> {
    check_wrapper(wrapper)?;
    if success && !message.is_empty() {
        return Err(Error::field(ErrorKind::InvalidArgument, "message", "must be empty when success is true"));
    }
    if !success && message.is_empty() {
        return Err(Error::field(
            ErrorKind::InvalidArgument,
            "message",
            "must explain the failure when success is false",
        ));
    }
    let mut out = String::with_capacity(48 + wrapper.len() + message.len());
    out.push('{');
    push_quoted(&mut out, wrapper);
    out.push_str(if success { r#":{"success":true"# } else { r#":{"success":false"# });
    if !(success && omit_empty_message) {
        out.push_str(r#","errorMessage":"#);
        push_quoted(&mut out, message);
    }
    out.push_str("}}");
    Ok(out)
}

/// `{"<wrapper>":{"money":<money>,"currencyISO4217":"<currency>","coins":<coins>,"errorMessage":""}}`,
/// the balance reply shape existing integrations use (the spec does not show one), when
/// `error_message` is empty. A non-empty `error_message` gives `balance_failure` instead: a
/// failure never states a balance (a `"money":0` could show the player an empty wallet), so
/// `money`, `currency` and `coins` are then not used.
pub fn balance(wrapper: &str, money: i64, currency: &str, coins: i64, error_message: &str) -> Result<String> {
    if !error_message.is_empty() {
        return balance_failure(wrapper, error_message);
    }
    check_wrapper(wrapper)?;
    balance_after(&balance_prefix(wrapper), money, currency, coins)
}

/// The start of every successful balance reply for `wrapper` (a checked name), up to the money:
/// `{"<wrapper>":{"money":`. A receiver keeps it, to put each balance reply together from it.
pub fn balance_prefix(wrapper: &str) -> String {
    let mut out = String::with_capacity(r#"{"":{"money":"#.len() + wrapper.len());
    out.push('{');
    push_quoted(&mut out, wrapper);
    out.push_str(r#":{"money":"#);
    out
}

/// The successful balance reply from its `balance_prefix`, after checking the amounts and the
/// currency.
pub fn balance_after(prefix: &str, money: i64, currency: &str, coins: i64) -> Result<String> {
    check_balance(money, currency, coins)?;
    let mut out = Vec::new();
    push_balance(&mut out, prefix, money, currency, coins);
    Ok(String::from_utf8(out).expect("a prefix, ASCII digits and letters"))
}

/// Checks what a successful balance reply states: amounts of 0 to 2^53 - 1 and an ISO 4217 code.
pub fn check_balance(money: i64, currency: &str, coins: i64) -> Result<()> {
    for (name, value) in [("money", money), ("coins", coins)] {
        if !(0..=MAX_AMOUNT).contains(&value) {
            let problem = format!("expected an integer from 0 to {MAX_AMOUNT}, got {value}");
            return Err(Error::field(ErrorKind::InvalidArgument, name, problem));
        }
    }
    if !is_currency_code(currency) {
        let problem = format!("expected three uppercase letters (ISO 4217), got {}", quoted(currency));
        return Err(Error::field(ErrorKind::InvalidArgument, "currency", problem));
    }
    Ok(())
}

/// Appends the successful balance reply of `balance_after` to `out`, its arguments checked
/// (`check_balance`), with room for one more byte (a host's NUL).
pub fn push_balance(out: &mut Vec<u8>, prefix: &str, money: i64, currency: &str, coins: i64) {
    const REST: &str = r#","currencyISO4217":"XXX","coins":,"errorMessage":""}}"#;
    out.reserve(prefix.len() + REST.len() + 2 * 16 + 1);
    out.extend_from_slice(prefix.as_bytes());
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(money).as_bytes());
    out.extend_from_slice(br#","currencyISO4217":""#);
    out.extend_from_slice(currency.as_bytes());
    out.extend_from_slice(br#"","coins":"#);
    out.extend_from_slice(digits.format(coins).as_bytes());
    out.extend_from_slice(br#","errorMessage":""}}"#);
}

/// `{"<wrapper>":{"errorMessage":"<message>"}}`: a refused balance query, stating no balance.
pub fn balance_failure(wrapper: &str, message: &str) -> Result<String> {
    check_wrapper(wrapper)?;
    if message.is_empty() {
        return Err(Error::field(
            ErrorKind::InvalidArgument,
            "message",
            "must explain the failure when success is false",
        ));
    }
    let mut out = String::with_capacity(24 + wrapper.len() + message.len());
    out.push('{');
    push_quoted(&mut out, wrapper);
    out.push_str(r#":{"errorMessage":"#);
    push_quoted(&mut out, message);
    out.push_str("}}");
    Ok(out)
}

/// A wrapper key must be a non-empty name without control characters.
fn check_wrapper(wrapper: &str) -> Result<()> {
    crate::callback::json::checked_name("wrapper", wrapper).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_failure_replies_are_exact() {
        assert_eq!(result("refund", true, "", false).unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
        assert_eq!(result("payout", true, "", true).unwrap(), r#"{"payout":{"success":true}}"#);
        assert_eq!(
            result("payout", false, "jackpot \"J1\" unknown\n\u{1}é", false).unwrap(),
            r#"{"payout":{"success":false,"errorMessage":"jackpot \"J1\" unknown\n\u0001é"}}"#
        );
    }

    #[test]
    fn replies_refuse_inconsistent_arguments() {
        assert_eq!(result("refund", false, "", false).unwrap_err().field, "message");
        assert_eq!(result("refund", true, "oops", false).unwrap_err().field, "message");
        assert_eq!(result("", true, "", false).unwrap_err().field, "wrapper");
    }

    #[test]
    fn balance_reply_has_the_integration_shape() {
        assert_eq!(
            balance("playerBalance", 12345, "EUR", 0, "").unwrap(),
            r#"{"playerBalance":{"money":12345,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#
        );
        assert_eq!(balance("playerBalance", -1, "EUR", 0, "").unwrap_err().field, "money");
        assert_eq!(balance("playerBalance", 0, "EUR", MAX_AMOUNT + 1, "").unwrap_err().field, "coins");
        assert_eq!(balance("playerBalance", 0, "eur", 0, "").unwrap_err().field, "currency");
    }

    #[test]
    fn a_balance_failure_states_no_balance() {
        let expected = r#"{"playerBalance":{"errorMessage":"player \"p1\" unknown"}}"#;
        assert_eq!(balance_failure("playerBalance", "player \"p1\" unknown").unwrap(), expected);
        assert_eq!(balance("playerBalance", 500, "EUR", 3, "player \"p1\" unknown").unwrap(), expected);
        assert_eq!(balance_failure("playerBalance", "").unwrap_err().field, "message");
    }
}
