//! Durations as operators write them: `500ms`, `20s`, `2m`, `1h`, `0`.
//!
//! Parsed by hand (a dozen lines) rather than with `humantime`: the accepted forms are
//! few and fixed, and one crate less builds on a small machine.

use std::time::Duration;

/// Parses `N` followed by `ms`, `s`, `m` or `h` (`N` a whole number), or a bare `0`.
///
/// A bare number other than 0 is refused: `--wait 5` could mean seconds or
/// milliseconds, so the unit must be written.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(format!("`{text}` is not a duration: write a whole number and a unit (500ms, 20s, 2m, 1h) or 0"));
    }
    let n: u64 = digits.parse().map_err(|_| format!("`{text}`: the number is too large"))?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "" => return Err(format!("`{text}` has no unit: write 500ms, 20s, 2m or 1h (only 0 may go without)")),
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (ms, s, m or h)")),
    };
    let millis = n.checked_mul(millis_per_unit).ok_or_else(|| format!("`{text}` is too long"))?;
    Ok(Duration::from_millis(millis))
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
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration(" 7s "), Ok(Duration::from_secs(7)));
    }

    #[test]
    fn refuses_everything_else() {
        for bad in ["", "5", "s", "1.5s", "-1s", "10 s", "3d", "5sec", "ms", "99999999999999999999s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_duration(&format!("{}h", u64::MAX / 1000)).is_err(), "overflow is refused");
    }
}
