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
    let mut out = Vec::new();
    BalanceReply::new(prefix, money, currency, coins)?.push_to(&mut out);
    Ok(String::from_utf8(out).expect("a prefix, ASCII digits and letters"))
}

/// Checks what a successful balance reply states: amounts of 0 to 2^53 - 1 and an ISO 4217 code.
fn check_balance(money: i64, currency: &str, coins: i64) -> Result<()> {
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

/// A successful balance reply, checked and ready to be written: `balance_after`'s text in
/// pieces. It borrows only its prefix; the currency code is copied in, so the reply may be
/// written over the memory the code was read from.
#[derive(Debug, Clone, Copy)]
pub struct BalanceReply<'p> {
    prefix: &'p str,
    money: i64,
    currency: [u8; 3],
    coins: i64,
}

impl<'p> BalanceReply<'p> {
    /// The reply from its `balance_prefix`, after `check_balance`.
    pub fn new(prefix: &'p str, money: i64, currency: &str, coins: i64) -> Result<Self> {
        check_balance(money, currency, coins)?;
        let currency = currency.as_bytes().try_into().expect("a checked code is three bytes");
        Ok(BalanceReply { prefix, money, currency, coins })
    }

    /// The length of the longest successful balance reply from `prefix`: both amounts at their
    /// largest.
    pub fn max_len(prefix: &str) -> usize {
        let longest = BalanceReply { prefix, money: MAX_AMOUNT, currency: *b"EUR", coins: MAX_AMOUNT };
        let (mut money, mut coins) = (itoa::Buffer::new(), itoa::Buffer::new());
        longest.pieces(&mut money, &mut coins).iter().map(|piece| piece.len()).sum()
    }

    /// The reply's bytes in order, the amounts formatted into `money` and `coins`.
    pub fn pieces<'a>(&'a self, money: &'a mut itoa::Buffer, coins: &'a mut itoa::Buffer) -> [&'a [u8]; 7] {
        [
            self.prefix.as_bytes(),
            money.format(self.money).as_bytes(),
            br#","currencyISO4217":""#,
            &self.currency,
            br#"","coins":"#,
            coins.format(self.coins).as_bytes(),
            br#","errorMessage":""}}"#,
        ]
    }

    /// Appends the reply to `out`, with room for one more byte (a host's NUL).
    pub fn push_to(&self, out: &mut Vec<u8>) {
        let (mut money, mut coins) = (itoa::Buffer::new(), itoa::Buffer::new());
        let pieces = self.pieces(&mut money, &mut coins);
        out.reserve(pieces.iter().map(|piece| piece.len()).sum::<usize>() + 1);
        for piece in pieces {
            out.extend_from_slice(piece);
        }
    }
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
