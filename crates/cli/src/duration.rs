//! Durations as operators write them: `500ms`, `1.5s`, `0.25s`, `2m`, `1.5m`, `1h`, `0`.
//!
//! Parsed by hand (a few dozen lines) rather than with `humantime`: the accepted forms
//! are few and fixed, and one crate less builds on a small machine.

use std::time::Duration;

/// What the messages suggest.
const FORMS: &str = "500ms, 1.5s, 20s, 2m, 1h";

/// Parses a number followed by `ms`, `s`, `m` or `h`, or a bare `0`. The number is
/// whole (`20s`) or decimal with digits on both sides of the point (`1.5s`, `0.25s`);
/// a fraction finer than a nanosecond is refused rather than rounded away.
///
/// A bare number other than 0 is refused: `--wait 5` could mean seconds or
/// milliseconds, so the unit must be written.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(format!("`{text}` is not a duration: write a number and a unit ({FORMS}) or 0"));
    }
    let nanos_per_unit: u128 = match unit {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => return Err(format!("`{text}` has no unit: write {FORMS} (only 0 may go without)")),
        _ => return Err(format!("`{text}`: unknown unit `{unit}`: use ms, s, m or h ({FORMS})")),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || (number.contains('.') && fraction.is_empty()) || fraction.contains('.') {
        return Err(format!("`{text}`: write the number with digits on both sides of the point (0.5s, 1.5m)"));
    }
    let too_long = || format!("`{text}` is too long");
    let whole: u128 = whole.parse().map_err(|_| too_long())?;
    // The fraction as a ratio `digits / 10^len`, multiplied out exactly in nanoseconds.
    let fraction_nanos = if fraction.is_empty() {
        0
    } else {
        let digits: u128 = fraction.parse().map_err(|_| format!("`{text}`: too many decimals"))?;
        let scale = 10u128.checked_pow(u32::try_from(fraction.len()).unwrap_or(u32::MAX)).ok_or_else(too_long)?;
        let scaled = digits.checked_mul(nanos_per_unit).ok_or_else(|| format!("`{text}`: too many decimals"))?;
        if scaled % scale != 0 {
            return Err(format!("`{text}` is finer than a nanosecond"));
        }
        scaled / scale
    };
    let nanos = whole.checked_mul(nanos_per_unit).and_then(|n| n.checked_add(fraction_nanos)).ok_or_else(too_long)?;
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| too_long())?;
    // Below 10^9: fits.
    let subsec = u32::try_from(nanos % 1_000_000_000).map_err(|_| too_long())?;
    Ok(Duration::new(secs, subsec))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration(" 7s "), Ok(Duration::from_secs(7)));
    }

    #[test]
    fn accepts_fractions() {
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0.25s"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5h"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("2.5ms"), Ok(Duration::from_micros(2500)));
        assert_eq!(parse_duration("0.0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1.000000001s"), Ok(Duration::new(1, 1)));
        assert_eq!(parse_duration("0.1h"), Ok(Duration::from_secs(360)));
    }

    #[test]
    fn refuses_everything_else() {
        for bad in [
            "",
            "5",
            "1.5",
            "s",
            "-1s",
            "10 s",
            "3d",
            "5sec",
            "ms",
            ".5s",
            "1.s",
            "1.2.3s",
            "1,5s",
            "1e3ms",
            "99999999999999999999999999999999999999999s",
            "0.0000000001s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_duration(&format!("{}h", u64::MAX / 1000)).is_err(), "overflow is refused");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let unit = parse_duration("5sec").expect_err("refused");
        assert!(unit.contains("unknown unit `sec`") && unit.contains("ms, s, m or h"), "{unit}");
        let bare = parse_duration("5").expect_err("refused");
        assert!(bare.contains("no unit"), "{bare}");
        let point = parse_duration(".5s").expect_err("refused");
        assert!(point.contains("both sides of the point"), "{point}");
        let day = parse_duration("1.5d").expect_err("refused");
        assert!(day.contains("unknown unit `d`"), "{day}");
    }
}
