//! UTF-8 boundaries in byte streams: a cut or a read never splits a
//! character (RFC 3629: a character is 1 to 4 bytes, continuation bytes are
//! `0b10xxxxxx`).

/// Leading bytes to drop so a tail cut does not start inside a UTF-8
/// character: the continuation bytes (`0b10xxxxxx`) before the first
/// character start, at most 3 (the longest UTF-8 sequence is 4 bytes).
pub fn char_boundary_skip(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count()
}

/// Splits off the bytes of an incomplete UTF-8 character at the end of
/// `bytes` (at most 3), unless `last` says no more bytes will come.
pub fn hold_back_partial(bytes: &mut Vec<u8>, last: bool) -> Vec<u8> {
    if last {
        return Vec::new();
    }
    // Only the last character matters: find where it starts (at most 3
    // bytes back) and hold it if it is shorter than its lead byte says.
    let n = bytes.len();
    for back in 1..=n.min(4) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back
        }
        let want = match b {
            0x00..=0x7F => 1,
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return Vec::new(), // not a lead byte: invalid anyway
        };
        return if back < want {
            bytes.split_off(n - back)
        } else {
            Vec::new()
        };
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_character_is_held_back_until_the_last_read() {
        let mut b = "caf\u{e9}".as_bytes().to_vec();
        b.pop();
        assert_eq!(hold_back_partial(&mut b.clone(), true), Vec::<u8>::new());
        let held = hold_back_partial(&mut b, false);
        assert_eq!(held, vec![0xC3]);
        assert_eq!(b, b"caf");
        assert_eq!(char_boundary_skip(&[0x80, 0x80, b'a']), 2);
    }
}
