//! The `localeISO639_ISO3166` parameter: an ISO 639 language code and an ISO 3166 country code
//! joined by a hyphen (`en-US`). `en_US` is accepted and sent as `en-US`.

use crate::callback::json::quoted;
use crate::error::{Error, ErrorKind, Result};

/// The locale in the form the service expects, or an error naming `field`.
pub fn normalize(field: &str, locale: &str) -> Result<String> {
    let (language, country) = locale.split_once(['-', '_']).unwrap_or((locale, ""));
    let language_ok = (2..=3).contains(&language.len()) && language.bytes().all(|b| b.is_ascii_lowercase());
    let country_ok = country.len() == 2 && country.bytes().all(|b| b.is_ascii_uppercase());
    if !(language_ok && country_ok) {
        let problem = format!(
            "expected an ISO 639 language and an ISO 3166 country joined by a hyphen, like \"en-US\", got {}",
            quoted(locale)
        );
        return Err(Error::field(ErrorKind::InvalidArgument, field, problem));
    }
    Ok(format!("{language}-{country}"))
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn accepts_hyphen_and_underscore_forms() {
        assert_eq!(normalize("locale", "en-US").unwrap(), "en-US");
        assert_eq!(normalize("locale", "de_DE").unwrap(), "de-DE");
        assert_eq!(normalize("locale", "fil-PH").unwrap(), "fil-PH");
    }

    #[test]
    fn refuses_everything_else() {
        for bad in ["", "en", "EN-us", "en-us", "english-US", "en-USA", "en US", "en--US", "e-US", "en-U1"] {
            let err = normalize("locale", bad).unwrap_err();
            assert_eq!(err.field, "locale", "{bad}");
            assert!(err.message.contains("en-US"), "{bad}: {}", err.message);
        }
    }
}
