//! Timestamps of spec §4: the instant of an RFC 3339 timestamp in microseconds since
//! 1970-01-01T00:00:00Z, or `None`; the same function as `merge.timestamps.parse_timestamp`.

const DAYS_IN_MONTH: [u32; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's algorithm): no
/// year-1 floor, so year 0000 and offsets that leave 0000–9999 still have an instant (§4, 1.1).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn digits(bytes: &[u8]) -> Option<i64> {
    bytes.iter().try_fold(0_i64, |value, &byte| {
        byte.is_ascii_digit().then(|| value * 10 + i64::from(byte - b'0'))
    })
}

/// `YYYY-MM-DDTHH:MM:SS`, optional `.` and 1–6 digits, then `Z` or `±HH:MM`; a real date,
/// hours 00–23, minutes and seconds 00–59 (no leap second), offset hours 00–23, minutes 00–59.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (digits(&b[0..4])?, digits(&b[5..7])?, digits(&b[8..10])?);
    let (hour, minute, second) = (digits(&b[11..13])?, digits(&b[14..16])?, digits(&b[17..19])?);
    let mut position = 19;
    let mut micros = 0;
    if b[position] == b'.' {
        let start = position + 1;
        position = start;
        while position < b.len() && b[position].is_ascii_digit() {
            position += 1;
        }
        let count = position - start;
        if count == 0 || count > 6 {
            return None;
        }
        micros = digits(&b[start..position])? * 10_i64.pow((6 - count) as u32);
    }
    let rest = &b[position..];
    let offset = match rest {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (hours, minutes) = (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = hours * 3600 + minutes * 60;
            if *sign == b'+' {
                offset
            } else {
                -offset
            }
        }
        _ => return None,
    };
    if !(1..=12).contains(&month) {
        return None;
    }
    let last_day = if month == 2 && is_leap(year) {
        29
    } else {
        i64::from(DAYS_IN_MONTH[(month - 1) as usize])
    };
    if !(1..=last_day).contains(&day) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some(seconds * 1_000_000 + micros)
}

#[cfg(test)]
mod tests {
    use super::parse_timestamp;

    #[test]
    fn instants() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_timestamp("1970-01-01T00:00:00.5Z"), Some(500_000));
        assert_eq!(parse_timestamp("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_timestamp("1970-01-01T00:00:00-00:00"), Some(0));
        assert_eq!(parse_timestamp("0000-02-29T00:00:00Z"), Some(-62_162_121_600_000_000));
        for bad in [
            "1970-01-01T00:00:00",
            "1970-02-30T00:00:00Z",
            "1970-01-01T24:00:00Z",
            "1970-01-01T00:00:60Z",
            "1970-01-01t00:00:00Z",
            "1970-01-01T00:00:00.1234567Z",
            "1970-01-01T00:00:00.Z",
            "1970-01-01T00:00:00+24:00",
            "1970-01-01T00:00:00z",
            "1970-01-01T00:00:00Z\n",
            "１970-01-01T00:00:00Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }
}
