//! Durations and byte sizes as the command line spells them.
//!
//! Durations: `500ms`, `30s`, `2m`, `1h30m`, `1h 30m`, or a bare number of
//! seconds (`10`, `2.5`); `0` and `none` mean "no deadline". Unit words are
//! those of the `humantime` crate (`ms`, `s`, `m`, `h`, `d`, ...).
//!
//! Durations with fractions (`1.5s`, `1m0.25s`) are added up exactly; a
//! duration is written back the same way ([`format_duration`]), and a
//! property test checks the round trip.
//!
//! Sizes follow GNU coreutils (`head -c`, `dd`): a bare number is bytes,
//! `K`/`KiB` are 1024, `KB` is 1000, and likewise `M`, `G`, `T`, in any
//! case (`2kb`); a fraction with a unit (`1.5K`) is rounded down to bytes.

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
    if t.starts_with('-') {
        return Err(format!(
            "invalid duration '{t}': a duration cannot be negative (0 or none: no limit)"
        ));
    }
    let d = if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = t
            .parse()
            .map_err(|_| format!("invalid duration '{t}' (expected e.g. 500ms, 30s, 2m, 1h30m)"))?;
        Duration::try_from_secs_f64(secs).map_err(|_| format!("duration '{t}' is out of range"))?
    } else if t.contains('.') {
        fractional_duration(t).ok_or_else(|| {
            format!("invalid duration '{t}' (expected e.g. 1.5s, 500ms, 2m, 1h30m)")
        })?
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

/// A duration whose numbers may have fractions (`1.5s`, `1m0.25s`,
/// `0.5h`), added up exactly in nanoseconds (at most 9 decimals); `None`
/// when it is not of that shape.
fn fractional_duration(t: &str) -> Option<Duration> {
    let mut nanos: u128 = 0;
    let mut rest = t.trim();
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (num, tail) = rest.split_at(num_end);
        let tail = tail.trim_start();
        let unit_end = tail
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(tail.len());
        let (unit, after) = tail.split_at(unit_end);
        let per: u128 = match unit {
            "ms" => 1_000_000,
            "s" | "sec" => 1_000_000_000,
            "m" | "min" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            _ => return None,
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if (int.is_empty() && frac.is_empty()) || frac.len() > 9 || frac.contains('.') {
            return None;
        }
        let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let frac_val: u128 = if frac.is_empty() {
            0
        } else {
            frac.parse().ok()?
        };
        let scale = 10u128.pow(frac.len() as u32);
        nanos = nanos.checked_add(int.checked_mul(per)?)?;
        nanos = nanos.checked_add(frac_val * per / scale)?;
        rest = after.trim_start();
    }
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

/// Formats a duration compactly, in the grammar [`parse_duration`] accepts:
/// `300ms`, `10s`, `1.5s`, `1h30m`, `1m0.5s`; zero is `0s`. Milliseconds
/// below a second are `Nms`; past a second they are the seconds' fraction.
pub fn format_duration(d: Duration) -> String {
    let total_ms = d.as_millis();
    if total_ms == 0 {
        return if d.is_zero() {
            "0s".into()
        } else {
            format!("{}us", d.as_micros())
        };
    }
    if total_ms < 1000 {
        return format!("{total_ms}ms");
    }
    let (h, m, s, ms) = (
        total_ms / 3_600_000,
        total_ms / 60_000 % 60,
        total_ms / 1000 % 60,
        total_ms % 1000,
    );
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if ms > 0 {
        let frac = format!("{ms:03}");
        out.push_str(&format!("{s}.{}s", frac.trim_end_matches('0')));
    } else if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Parses a byte size: `4096`, `64K`, `64KiB`, `64KB`, `2kb`, `1.5K`,
/// `1M`, `1MiB`, `2G`. Units are case-insensitive; `K`, `Ki` and `KiB` are
/// 1024, `KB` is 1000 (as coreutils), and likewise `M`, `G`, `T`. A
/// fraction needs a unit and is rounded down to whole bytes (`1.5K` is
/// 1536).
///
/// Errors, naming the accepted forms, on an empty string, a sign, a
/// fraction of bytes, an unknown unit, or a value past 64 bits.
pub fn parse_size(text: &str) -> Result<u64, String> {
    const FORMS: &str = "e.g. 4096, 64K, 64KiB, 64KB, 1.5M, 1MiB, 2G";
    let t = text.trim();
    let num_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(num_end);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() || frac.contains('.') || (num.contains('.') && frac.is_empty()) {
        return Err(format!("invalid size '{t}' (expected {FORMS})"));
    }
    let factor: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "ki" | "kib" => 1 << 10,
        "kb" => 1000,
        "m" | "mi" | "mib" => 1 << 20,
        "mb" => 1_000_000,
        "g" | "gi" | "gib" => 1 << 30,
        "gb" => 1_000_000_000,
        "t" | "ti" | "tib" => 1 << 40,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "invalid size '{t}': unknown unit '{}' (use K, KiB, KB, M, MiB, MB, G, GiB, GB, T; {FORMS})",
                suffix.trim()
            ));
        }
    };
    if !frac.is_empty() && factor == 1 {
        return Err(format!(
            "invalid size '{t}': not a whole number of bytes ({FORMS})"
        ));
    }
    let too_large = || format!("size '{t}' is too large");
    let n: u64 = int.parse().map_err(|_| too_large())?;
    let whole = n.checked_mul(factor).ok_or_else(too_large)?;
    if frac.is_empty() {
        return Ok(whole);
    }
    if frac.len() > 18 {
        return Err(format!("invalid size '{t}' (at most 18 decimals)"));
    }
    let f: u128 = frac.parse().map_err(|_| too_large())?;
    let part = f * u128::from(factor) / 10u128.pow(frac.len() as u32);
    whole
        .checked_add(u64::try_from(part).map_err(|_| too_large())?)
        .ok_or_else(too_large)
}

/// Parses `--memory-max`: a size (as [`parse_size`]) of at least 1 MiB;
/// less would not hold bash.
///
/// Errors as [`parse_size`], and on less than 1 MiB.
pub fn parse_memory_max(text: &str) -> Result<u64, String> {
    let n = parse_size(text)?;
    if n < 1 << 20 {
        return Err(format!(
            "memory limit '{}' is less than 1MiB, too little to start bash",
            text.trim()
        ));
    }
    Ok(n)
}

/// The most `--pids-max` can be: the kernel's PID_MAX_LIMIT (2^22).
pub const MAX_PIDS: u64 = 1 << 22;

/// Parses `--pids-max`: a whole number of processes and threads, from 1
/// to [`MAX_PIDS`].
///
/// Errors, naming the range, on anything else.
pub fn parse_pids_max(text: &str) -> Result<u64, String> {
    let t = text.trim();
    match t.parse::<u64>() {
        Ok(n) if (1..=MAX_PIDS).contains(&n) => Ok(n),
        _ => Err(format!(
            "invalid process count '{t}' (expected a whole number from 1 to {MAX_PIDS})"
        )),
    }
}

/// Parses `--cpu-max`: a duration (as [`parse_duration`]) of CPU time of
/// at least 10 ms.
///
/// Errors as [`parse_duration`], and on less than 10 ms.
pub fn parse_cpu_max(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_millis(10) {
        return Err(format!(
            "CPU time limit '{}' is less than 10ms (the kernel counts CPU time in ticks)",
            text.trim()
        ));
    }
    Ok(d)
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
            (60_500, "1m0.5s"),
            (1_500, "1.5s"),
            (2_250, "2.25s"),
            (3_600_001, "1h0.001s"),
        ] {
            let d = Duration::from_millis(ms);
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(parse_duration("0.5h"), Ok(Duration::from_secs(1800)));
        assert_eq!(
            parse_duration("1m 0.25s"),
            Ok(Duration::from_millis(60_250))
        );
        assert!(parse_duration("1.5x").is_err());
        assert!(parse_duration("1..5s").is_err());
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
        assert_eq!(parse_size("2kb"), Ok(2000));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("1.5mib"), Ok(3 << 19));
        assert_eq!(parse_size("0.3K"), Ok(307));
        for bad in [
            "",
            "-1",
            "1.5",
            "1.K",
            ".5K",
            "1.2.3K",
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
