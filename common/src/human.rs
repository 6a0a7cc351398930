//! Human forms for times, counts and rates (`10s`, `500ms`, `5k`, `1.5M`), parsed and printed.

use std::time::Duration;

/// Parses a positive duration such as `10s`, `500ms`, `2m` or `1m30s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let parsed = humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e}); write it like 10s, 500ms or 2m"))?;
    if parsed.is_zero() {
        return Err(format!("`{text}` is zero; a duration must be positive"));
    }
    Ok(parsed)
}

/// Parses a positive count such as `1000`, `5k`, `2.5M` or `1G` (powers of 1,000).
pub fn parse_count(text: &str) -> Result<u64, String> {
    let value = parse_scaled(text)?;
    if value.fract() != 0.0 {
        return Err(format!("`{text}` is not a whole number"));
    }
    if value < 1.0 {
        return Err(format!("`{text}` must be at least 1"));
    }
    Ok(value as u64)
}

/// Parses a count as [`parse_count`] does, of at most `max`; a larger one is refused with
/// `too_many(n)` (the option's limit, said the option's way).
pub fn parse_count_at_most(
    text: &str,
    max: u64,
    too_many: impl FnOnce(u64) -> String,
) -> Result<usize, String> {
    let n = parse_count(text)?;
    if n > max {
        return Err(too_many(n));
    }
    usize::try_from(n).map_err(|_| too_many(n))
}

/// Parses a positive rate in operations per second such as `500`, `5k` or `1.5M`, with or
/// without its unit (`5k/s`).
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let number = text.trim();
    let value = parse_scaled(number.strip_suffix("/s").unwrap_or(number)).map_err(|_| {
        format!("`{text}` is not a rate; write it like 1000, 5k or 1.5M (per second)")
    })?;
    if value <= 0.0 {
        return Err(format!("`{text}` must be a positive rate"));
    }
    Ok(value)
}

/// Parses a share: `5%` or `0.05` (both 0.05); between 0 and 1.
pub fn parse_share(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let value = match trimmed.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|v| v / 100.0),
        None => trimmed.parse::<f64>(),
    }
    .map_err(|_| format!("`{text}` is not a share; write it like 5% or 0.05"))?;
    if !(value.is_finite() && (0.0..1.0).contains(&value)) {
        return Err(format!("`{text}` must be a share from 0% to below 100%"));
    }
    Ok(value)
}

fn parse_scaled(text: &str) -> Result<f64, String> {
    let trimmed = text.trim().replace('_', "");
    let (number, scale) = match trimmed.chars().last() {
        Some('k' | 'K') => (&trimmed[..trimmed.len() - 1], 1e3),
        Some('m' | 'M') => (&trimmed[..trimmed.len() - 1], 1e6),
        Some('g' | 'G') => (&trimmed[..trimmed.len() - 1], 1e9),
        _ => (trimmed.as_str(), 1.0),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a number; write it like 1000, 5k or 1.5M"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("`{text}` must be a positive number"));
    }
    Ok(value * scale)
}

/// Formats a duration the way it would be typed (`10s`, `1.5s`, `250ms`).
pub fn format_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms == 0 {
        format!("{}µs", duration.as_micros())
    } else if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms >= 1000 {
        format!("{:.1}s", duration.as_secs_f64())
    } else {
        format!("{ms}ms")
    }
}

/// Groups thousands: `12345.6` → `12,346`.
pub fn format_thousands(value: f64) -> String {
    let rounded = value.round();
    let digits = format!("{}", rounded.abs() as u64);
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if rounded < 0.0 {
        out.push('-');
    }
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A rate with thousands grouped, and one decimal below 100 so small rates keep their precision.
pub fn format_rate(value: f64) -> String {
    if value < 100.0 {
        format!("{value:.1}")
    } else {
        format_thousands(value)
    }
}

/// A latency in nanoseconds shown in the unit that keeps three significant figures.
pub fn format_latency_ns(ns: u64) -> String {
    let ns = ns as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{} µs", three_figures(ns / 1e3))
    } else if ns < 1e9 {
        format!("{} ms", three_figures(ns / 1e6))
    } else {
        format!("{} s", three_figures(ns / 1e9))
    }
}

fn three_figures(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// Bytes in binary units (`1.5 GiB`).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_human_forms() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert!(parse_duration("0s").unwrap_err().contains("positive"));
        assert!(parse_duration("-1s").is_err());
        assert!(
            parse_duration("ten")
                .unwrap_err()
                .contains("not a duration")
        );
    }

    #[test]
    fn a_bounded_count_says_its_own_limit() {
        let too_many = |n| format!("--topics {n} is more than 100,000");
        assert_eq!(parse_count_at_most("100k", 100_000, too_many), Ok(100_000));
        assert_eq!(
            parse_count_at_most("100001", 100_000, too_many),
            Err("--topics 100001 is more than 100,000".into())
        );
        assert!(parse_count_at_most("0", 100_000, too_many).is_err());
    }

    #[test]
    fn counts_and_rates_take_suffixes() {
        assert_eq!(parse_count("5k").unwrap(), 5_000);
        assert_eq!(parse_count("2.5M").unwrap(), 2_500_000);
        assert_eq!(parse_count("1_000").unwrap(), 1_000);
        assert!(parse_count("0").is_err());
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("-3").is_err());
        assert_eq!(parse_rate("1.5k").unwrap(), 1_500.0);
        assert_eq!(parse_rate("5k/s").unwrap(), 5_000.0);
        assert_eq!(parse_rate("250/s").unwrap(), 250.0);
        assert!(parse_rate("/s").is_err());
        assert!(parse_rate("5k/m").is_err());
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("-5").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("inf").is_err());
    }

    #[test]
    fn numbers_print_for_people() {
        assert_eq!(format_thousands(1_234_567.4), "1,234,567");
        assert_eq!(format_thousands(999.0), "999");
        assert_eq!(format_thousands(-1_000.0), "-1,000");
        assert_eq!(format_rate(79.04), "79.0");
        assert_eq!(format_rate(13_660.2), "13,660");
        assert_eq!(format_latency_ns(830), "830 ns");
        assert_eq!(format_latency_ns(19_400), "19.4 µs");
        assert_eq!(format_latency_ns(1_234_000), "1.23 ms");
        assert_eq!(format_latency_ns(120_000_000_000), "120 s");
        assert_eq!(format_duration(Duration::from_secs(10)), "10s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_micros(1)), "1µs", "not 0ms");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
    }
}
