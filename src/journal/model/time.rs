//! Milliseconds since the Unix epoch as RFC 3339 timestamps in UTC, and back.

/// `2024-06-11T08:30:05.123Z` for `ms` milliseconds since 1970-01-01T00:00:00Z.
pub fn rfc3339_ms(ms: i64) -> String {
    let seconds = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date of a day number (0 = 1970-01-01), after Howard Hinnant's
/// `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A date (`2026-10-01`, its midnight in UTC) or an RFC 3339 time (`2026-10-01T08:30:00Z`,
/// `2026-10-01T10:30:00.250+02:00`) as milliseconds since the Unix epoch. A time finer than a
/// millisecond is rounded up: the journal keeps whole milliseconds, and a row at `t` lies in a
/// period from `a` to `b` exactly when it lies from `ceil(a)` to `ceil(b)`.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let wrong = || format!("expected a date (2026-10-01) or an RFC 3339 time (2026-10-01T08:30:00Z), got {text:?}");
    let digits = |part: &str| -> Option<i64> {
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit())).then(|| part.parse().ok()).flatten()
    };
    let date = text.get(..10).ok_or_else(wrong)?;
    let (year, month, day) = match date.as_bytes() {
        [_, _, _, _, b'-', _, _, b'-', _, _] => (digits(&date[..4]), digits(&date[5..7]), digits(&date[8..])),
        _ => return Err(wrong()),
    };
    let (Some(year), Some(month), Some(day)) = (year, month, day) else { return Err(wrong()) };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(format!("{date} is no day of the calendar"));
    }
    let midnight = days_from_civil(year, month, day) * 86_400_000;
    let rest = &text[10..];
    if rest.is_empty() {
        return Ok(midnight);
    }
    let rest = rest.strip_prefix(['T', 't', ' ']).ok_or_else(wrong)?;
    // HH:MM:SS, then a fraction, then Z or an offset.
    let clock = rest.get(..8).ok_or_else(wrong)?;
    let (hour, minute, second) = match clock.as_bytes() {
        [_, _, b':', _, _, b':', _, _] => (digits(&clock[..2]), digits(&clock[3..5]), digits(&clock[6..])),
        _ => return Err(wrong()),
    };
    let (Some(hour), Some(minute), Some(second)) = (hour, minute, second) else { return Err(wrong()) };
    if hour > 23 || minute > 59 || second > 60 {
        return Err(format!("{clock} is no time of day"));
    }
    let mut rest = &rest[8..];
    let mut nanos = 0_i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let end = fraction.find(|c: char| !c.is_ascii_digit()).unwrap_or(fraction.len());
        if end == 0 || end > 9 {
            return Err(wrong());
        }
        nanos = digits(&fraction[..end]).ok_or_else(wrong)? * 10_i64.pow(9 - end as u32);
        rest = &fraction[end..];
    }
    let offset_minutes = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (Some(h), Some(m)) = (digits(&rest[1..3]), digits(&rest[4..])) else { return Err(wrong()) };
            if h > 23 || m > 59 {
                return Err(format!("{rest} is no offset from UTC"));
            }
            if *sign == b'+' { h * 60 + m } else { -(h * 60 + m) }
        }
        [] => return Err(format!("{text:?} needs its offset from UTC: Z or +HH:MM")),
        _ => return Err(wrong()),
    };
    let seconds = hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(midnight + seconds * 1000 + (nanos + 999_999) / 1_000_000)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date, after Howard Hinnant's `days_from_civil`.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::{parse_time, rfc3339_ms};

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_718_064_000_000), "2024-06-11T00:00:00.000Z");
        assert_eq!(rfc3339_ms(951_782_400_000 + 3_723_004), "2000-02-29T01:02:03.004Z");
        assert_eq!(rfc3339_ms(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn dates_and_times() {
        assert_eq!(parse_time("1970-01-01"), Ok(0));
        assert_eq!(parse_time("2026-10-01").map(rfc3339_ms).unwrap(), "2026-10-01T00:00:00.000Z");
        assert_eq!(parse_time("2024-02-29").map(rfc3339_ms).unwrap(), "2024-02-29T00:00:00.000Z");
        assert_eq!(parse_time("2026-10-01T08:30:05Z").map(rfc3339_ms).unwrap(), "2026-10-01T08:30:05.000Z");
        assert_eq!(parse_time("2026-10-01t08:30:05.123z").map(rfc3339_ms).unwrap(), "2026-10-01T08:30:05.123Z");
        assert_eq!(parse_time("2026-10-01T10:30:05.5+02:00").map(rfc3339_ms).unwrap(), "2026-10-01T08:30:05.500Z");
        assert_eq!(parse_time("2026-10-01 00:00:00-01:30").map(rfc3339_ms).unwrap(), "2026-10-01T01:30:00.000Z");
        assert_eq!(parse_time("1969-12-31T23:59:59.999Z"), Ok(-1));
        // Finer than a millisecond: rounded up, as the journal's whole milliseconds need.
        assert_eq!(parse_time("1970-01-01T00:00:00.000001Z"), Ok(1));
        assert_eq!(parse_time("1970-01-01T00:00:00.001000000Z"), Ok(1));
        for bad in [
            "",
            "2026-13-01",
            "2026-02-29",
            "2026-10-32",
            "2026-1-01",
            "26-10-01",
            "2026/10/01",
            "2026-10-01T",
            "2026-10-01T08:30Z",
            "2026-10-01T24:00:00Z",
            "2026-10-01T08:30:00",
            "2026-10-01T08:30:00.Z",
            "2026-10-01T08:30:00+0200",
            "2026-10-01T08:30:00+24:00",
            "2026-10-01Tx8:30:00Z",
            "2026-10-01T08:30:00Z junk",
            "october",
            "2026-10-01\u{e9}",
        ] {
            assert!(parse_time(bad).is_err(), "{bad:?}");
        }
    }
}
