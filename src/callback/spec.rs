//! The spec's vocabulary: the field names the known events define and which event has which.
//! One table each, depending on nothing else, so that every other part (the scan, the events,
//! the errors) takes its names from here and none can drift from another.

/// Declares `Name`, one variant per field name the known events define, from one table of
/// `Variant => "spelling"`: the enum, its count, its spelling and its lookup by spelling.
macro_rules! field_names {
    ($($variant:ident => $spelling:literal,)+) => {
        /// Every field name the known events define. Each has a slot in the scan's `Slots`, so
        /// that the scan sorts a field with one `match` on its name and readers find it without
        /// searching.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Name {
            $($variant,)+
        }

        impl Name {
            /// Every name, in declaration order.
            pub const ALL: &'static [Name] = &[$(Name::$variant,)+];
            /// How many names there are (the size of the scan's `Slots`).
            pub const COUNT: usize = Name::ALL.len();

            /// The name as the body spells it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Name::$variant => $spelling,)+
                }
            }

            /// The name spelled `name`, if it is one of these.
            pub fn of(name: &str) -> Option<Name> {
                match name {
                    $($spelling => Some(Name::$variant),)+
                    _ => None,
                }
            }

            /// This name's bit in a set of names.
            pub fn bit(self) -> u32 {
                1 << self as u32
            }
        }
    };
}

field_names! {
    Event => "event",
    Action => "action",
    GameSessionIdentifier => "gameSessionIdentifier",
    PlayerIdentifier => "playerIdentifier",
    PlayerPartnerIdentifier => "playerPartnerIdentifier",
    TransactionId => "transactionId",
    BuyTransactionId => "buyTransactionId",
    GameSessionId => "gameSessionId",
    PartnerGameRequestIdentifier => "partnerGameRequestIdentifier",
    GameId => "gameId",
    IsMobile => "isMobile",
    BonusCode => "bonusCode",
    JackpotIdentifier => "jackpotIdentifier",
    CurrencyIso4217 => "currencyISO4217",
    MoneyWon => "moneyWon",
    CoinsWon => "coinsWon",
    IsMoney => "isMoney",
    EpochReleasedMillis => "epochReleasedMillis",
    IsPrimary => "isPrimary",
}

// A set of names is a `u32` of `Name::bit`s.
const _: () = assert!(Name::COUNT <= 32);

/// The events this library knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnownEvent {
    /// `event` = `gameSessionBuyRefund`; replied to with the `refund` wrapper.
    BuyRefund,
    /// `event` = `jackpotPayout`; replied to with the `payout` wrapper.
    JackpotPayout,
    /// `action` = `getPlayerBalance`; replied to with the balance wrapper (`playerBalance`).
    BalanceQuery,
}

impl KnownEvent {
    /// The name the service gives the event.
    pub fn name(self) -> &'static str {
        match self {
            KnownEvent::BuyRefund => "gameSessionBuyRefund",
            KnownEvent::JackpotPayout => "jackpotPayout",
            KnownEvent::BalanceQuery => "getPlayerBalance",
        }
    }

    /// The fields the spec defines for the event; any other field is kept as an extra field.
    pub fn spec_fields(self) -> &'static [Name] {
        match self {
            KnownEvent::BuyRefund => &[
                Name::Event,
                Name::GameSessionIdentifier,
                Name::PlayerIdentifier,
                Name::PlayerPartnerIdentifier,
                Name::TransactionId,
                Name::BuyTransactionId,
                Name::GameSessionId,
                Name::PartnerGameRequestIdentifier,
                Name::GameId,
                Name::IsMobile,
                Name::BonusCode,
            ],
            KnownEvent::JackpotPayout => &[
                Name::Event,
                Name::JackpotIdentifier,
                Name::PlayerIdentifier,
                Name::PlayerPartnerIdentifier,
                Name::CurrencyIso4217,
                Name::MoneyWon,
                Name::CoinsWon,
                Name::IsMoney,
                Name::EpochReleasedMillis,
                Name::IsPrimary,
                Name::TransactionId,
                Name::BuyTransactionId,
                Name::PartnerGameRequestIdentifier,
                Name::GameSessionId,
                Name::GameId,
                Name::BonusCode,
                Name::IsMobile,
            ],
            KnownEvent::BalanceQuery => &[Name::Action, Name::PlayerIdentifier, Name::PlayerPartnerIdentifier],
        }
    }

    /// `spec_fields` as a set of `Name::bit`s.
    pub fn spec_mask(self) -> u32 {
        self.spec_fields().iter().fold(0, |mask, name| mask | name.bit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_spelled_back_and_belongs_to_a_known_event() {
        for &name in Name::ALL {
            assert_eq!(Name::of(name.as_str()), Some(name));
            let used = [KnownEvent::BuyRefund, KnownEvent::JackpotPayout, KnownEvent::BalanceQuery]
                .iter()
                .any(|event| event.spec_fields().contains(&name));
            assert!(used || name == Name::Action || name == Name::Event, "{name:?} belongs to no event");
        }
        assert_eq!(Name::of("index"), None);
    }

    /// A text is a name only when it is the name, byte for byte: not another of its length and
    /// first byte, not a prefix, not the name with more after it.
    #[test]
    fn only_the_name_itself_is_the_name() {
        for &name in Name::ALL {
            let text = name.as_str();
            let mut changed = text.as_bytes().to_vec();
            for at in 1..changed.len() {
                changed[at] ^= 0x20;
                assert_eq!(Name::of(std::str::from_utf8(&changed).unwrap()), None, "{text} changed at {at}");
                changed[at] ^= 0x20;
            }
            assert_eq!(Name::of(&format!("{text}{}", "x".repeat(32))), None);
            assert_eq!(Name::of(&text[..text.len() - 1]), None);
            assert_eq!(Name::of(&format!("{text} ")), None);
        }
        assert_eq!(Name::of(""), None);
        assert_eq!(Name::of(r"\u0065vent"), None);
    }
}
