//! Durations and byte sizes as the command line spells them.
//!
//! Durations: `500ms`, `30s`, `2m`, `1h30m`, `1h 30m`, or a bare number of
//! seconds (`10`, `2.5`); `0` and `none` mean "no deadline". Unit words are
//! those of the `humantime` crate (`ms`, `s`, `m`, `h`, `d`, ...).
//!
//! Sizes follow GNU coreutils (`head -c`, `dd`): a bare number is bytes,
//! `K`/`KiB` are 1024, `KB` is 1000, and likewise `M`, `G`, `T`.

use std::time::Duration;

/// Largest duration accepted: 100 years, far beyond any sane deadline, small
/// enough that `Instant + d` never overflows.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The shortest deadline: 1 ms (results report deadlines in milliseconds).
pub const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// Largest tail budget of one stream: 1 GiB. The tail is held in memory;
/// the whole stream always goes to the spill file, whatever the budget.
pub const MAX_BUDGET: u64 = 1 << 30;

/// Parses a deadline: `Ok(None)` for `0` / `none` (no deadline).
///
/// Errors (a one-line message) on an empty string, a negative or non-finite
/// number, an unknown unit, a value below [`MIN_TIMEOUT`] that is not zero,
/// or a value above [`MAX_DURATION`].
pub fn parse_timeout(text: &str) -> Result<Option<Duration>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let d = parse_duration(t)?;
    let literal_zero = t
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .trim()
        .bytes()
        .all(|b| b == b'0' || b == b'.');
    if d.is_zero() && literal_zero {
        return Ok(None);
    }
    if d < MIN_TIMEOUT {
        return Err(format!(
            "timeout '{t}' is too small (at least 1ms; 0 means none)"
        ));
    }
    Ok(Some(d))
}

/// Parses a tail budget: a size of at most [`MAX_BUDGET`].
pub fn parse_budget(text: &str) -> Result<u64, String> {
    let n = parse_size(text)?;
    if n > MAX_BUDGET {
        return Err(format!(
            "budget '{}' is too large (at most 1GiB is kept in memory; the whole stream always goes to the spill file)",
            text.trim()
        ));
    }
    Ok(n)
}

/// Parses a duration where zero is a plain value (e.g. the grace period).
///
/// Errors as [`parse_timeout`]; `none` is not accepted here.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration (expected e.g. 500ms, 30s, 2m, 1h30m)".into());
    }
    let d = if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = t
            .parse()
            .map_err(|_| format!("invalid duration '{t}' (expected e.g. 500ms, 30s, 2m, 1h30m)"))?;
        Duration::try_from_secs_f64(secs).map_err(|_| format!("duration '{t}' is out of range"))?
    } else {
        humantime::parse_duration(t).map_err(|e| {
            format!("invalid duration '{t}': {e} (expected e.g. 500ms, 30s, 2m, 1h30m)")
        })?
    };
    if d > MAX_DURATION {
        return Err(format!("duration '{t}' is too large (at most 100 years)"));
    }
    Ok(d)
}

/// Formats a duration compactly, in the grammar [`parse_duration`] accepts:
/// `300ms`, `10s`, `1h30m`, `1m0s500ms` is written `1m500ms`; zero is `0s`.
pub fn format_duration(d: Duration) -> String {
    let total_ms = d.as_millis();
    if total_ms == 0 {
        return if d.is_zero() {
            "0s".into()
        } else {
            format!("{}us", d.as_micros())
        };
    }
    let parts = [
        (total_ms / 3_600_000, "h"),
        (total_ms / 60_000 % 60, "m"),
        (total_ms / 1000 % 60, "s"),
        (total_ms % 1000, "ms"),
    ];
    parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect()
}

/// Parses a byte size: `4096`, `64K`, `64KiB`, `64KB`, `1M`, `1MiB`, `2G`.
///
/// Errors on an empty string, a sign, a fraction, an unknown suffix, or a
/// value that does not fit in 64 bits.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!(
            "invalid size '{t}' (expected a whole number of bytes, e.g. 4096, 64K, 1MiB)"
        ));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("size '{t}' is too large"))?;
    let factor: u64 = match suffix.trim() {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "kiB" => 1 << 10,
        "KB" | "kB" => 1000,
        "M" | "MiB" => 1 << 20,
        "MB" => 1_000_000,
        "G" | "GiB" => 1 << 30,
        "GB" => 1_000_000_000,
        "T" | "TiB" => 1 << 40,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "invalid size '{t}': unknown unit '{other}' (use K, KiB, KB, M, MiB, MB, G, GiB, GB)"
            ));
        }
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("size '{t}' is too large"))
}

/// Formats a byte count exactly: `1MiB`, `64KiB`, `1000` (never rounded).
pub fn format_size(n: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n != 0 && n.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout("500ms"), Ok(Some(Duration::from_millis(500))));
        assert_eq!(parse_timeout("30s"), Ok(Some(Duration::from_secs(30))));
        assert_eq!(parse_timeout("2m"), Ok(Some(Duration::from_secs(120))));
        assert_eq!(parse_timeout("1h30m"), Ok(Some(Duration::from_secs(5400))));
        assert_eq!(parse_timeout("10"), Ok(Some(Duration::from_secs(10))));
        assert_eq!(parse_timeout("2.5"), Ok(Some(Duration::from_millis(2500))));
        assert_eq!(parse_timeout("0"), Ok(None));
        assert_eq!(parse_timeout("none"), Ok(None));
        assert_eq!(parse_timeout("0s"), Ok(None));
        assert_eq!(parse_timeout("0.0"), Ok(None));
        assert!(parse_timeout("0.0000000001").is_err());
        assert!(parse_timeout("500us").is_err());
        assert_eq!(parse_timeout("1ms"), Ok(Some(MIN_TIMEOUT)));
        for bad in [
            "",
            "abc",
            "-1",
            "-1s",
            "5 parsecs",
            "1e400",
            "99999999999999999999999",
        ] {
            assert!(parse_timeout(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn durations_format_in_their_own_grammar() {
        for (ms, text) in [
            (300, "300ms"),
            (10_000, "10s"),
            (5_400_000, "1h30m"),
            (60_500, "1m500ms"),
        ] {
            let d = Duration::from_millis(ms);
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("64KB"), Ok(64000));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("0"), Ok(0));
        for bad in [
            "",
            "-1",
            "1.5K",
            "K",
            "12 parsecs",
            "99999999999999999999",
            "16777216T",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(format_size(1 << 20), "1MiB");
        assert_eq!(format_size(65536), "64KiB");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(format_size(0), "0");
        assert_eq!(parse_budget("1GiB"), Ok(1 << 30));
        assert!(parse_budget("1TiB").is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn duration_parsers_never_panic(s in "\\PC{0,24}") {
            let _ = parse_duration(&s);
            let _ = parse_timeout(&s);
        }

        #[test]
        fn formatted_durations_parse_back(ms in 1u64..=3_153_600_000_000) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }

        #[test]
        fn size_parser_never_panics(s in "\\PC{0,24}") {
            let _ = parse_size(&s);
        }

        #[test]
        fn formatted_sizes_parse_back(n in any::<u64>()) {
            prop_assert_eq!(parse_size(&format_size(n)), Ok(n));
        }

        #[test]
        fn sizes_with_units_multiply(n in 0u64..1 << 30, unit in prop::sample::select(vec![
            ("", 1u64), ("K", 1024), ("KiB", 1024), ("KB", 1000), ("M", 1 << 20), ("MiB", 1 << 20), ("G", 1 << 30),
        ])) {
            prop_assert_eq!(parse_size(&format!("{n}{}", unit.0)), Ok(n * unit.1));
        }
    }
}
