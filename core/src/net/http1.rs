//! HTTP/1.1 message framing (RFC 9112 6 and 7) as the allow-list proxy
//! needs it: where the body of a request ends, so that no byte a client
//! sends after it reaches the upstream, and where the body of a response
//! ends, so that the proxy can close the connection behind it.
//!
//! The proxy ([`super::proxy`]) carries one request per client connection:
//! it judges that request's target, sends the request on with exactly the
//! body its head announces, relays one final response and closes. Every
//! later byte of the client connection (a second request, for any host) is
//! read and dropped, never sent on. That holds only while the proxy and
//! the upstream agree on where the request ends, whatever the upstream
//! makes of `Connection: close` (a server that keeps the connection open
//! would read anything after the body as a next request), so a request's
//! framing is taken strictly, in the forms every server reads alike, and
//! anything else is refused with 400 before a byte goes upstream:
//! - a `Transfer-Encoding` in an HTTP/1.0 request is faulty framing (RFC
//!   9112 6.1);
//! - `Transfer-Encoding` and `Content-Length` together are refused (RFC
//!   9112 6.3 item 3 lets a server reject them; they are the stuff of
//!   request smuggling);
//! - a `Transfer-Encoding` other than exactly `chunked`, once, is refused
//!   (6.3 item 4: with chunked not final the length cannot be determined;
//!   `gzip, chunked` is read by some servers as not chunked at all);
//! - `Content-Length` must be one field of decimal digits (RFC 9110 8.6;
//!   RFC 9112 6.3 item 5); several fields are refused, even when equal;
//! - a field named as one of these with `_` for `-` is refused, since some
//!   servers fold the two;
//! - without either, a request has no body (6.3 item 7);
//! - a chunked body (7.1) is `chunk-size CRLF chunk-data CRLF`, then
//!   `0 CRLF`, trailer fields and `CRLF`; a chunk size has at most 16 hex
//!   digits; a request's chunks carry no extensions (7.1.1: nothing uses
//!   them, and their quoted strings are where parsers have parted ways);
//!   every line ends in CRLF, never a lone LF or CR (2.2 lets a recipient
//!   take a lone LF as a line's end, so a line holding one is one that two
//!   servers may split differently).
//!
//! A response (6.3 items 1, 2, 3, 4, 5 and 8): to `HEAD`, and 1xx, 204 and
//! 304, has no body; `Transfer-Encoding` wins over `Content-Length`, and
//! its body is chunked when `chunked` is the final coding, else it runs
//! until the server closes; `Content-Length` (equal values, once or
//! repeated) gives the length; an invalid one is a bad gateway (502);
//! without either the body runs until the server closes. A response's
//! framing matters for the proxy's liveness, not for the allow-list: what
//! the upstream sends goes to this one client, and the connection ends
//! after it either way.

/// How long a body is, as its head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// The chunked transfer coding (RFC 9112 7.1): see [`Chunked`].
    Chunked,
    /// Until the sender closes the connection (a response only).
    UntilClose,
}

/// The most hex digits of a chunk size: 16 (a 64-bit length).
const SIZE_DIGITS: u8 = 16;

/// The longest chunk-size line of a response, extensions and all: 4 KiB.
const SIZE_LINE_MAX: usize = 4096;

/// The most bytes of trailer fields: 64 KiB, as a request head.
const TRAILER_MAX: usize = 64 * 1024;

/// The value of a field without the spaces and tabs around it.
fn trimmed(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|b| *b != b' ' && *b != b'\t');
    let end = v.iter().rposition(|b| *b != b' ' && *b != b'\t');
    match (start, end) {
        (Some(s), Some(e)) => &v[s..=e],
        _ => &[],
    }
}

/// A Content-Length value: 1 to 19 decimal digits (RFC 9110 8.6), so that
/// it fits in 64 bits.
fn length(v: &[u8]) -> Option<u64> {
    let v = trimmed(v);
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// How long the body of a request with these headers is (`version`: the
/// minor version, 0 or 1), or why the proxy cannot tell for sure (a line
/// for a 400).
pub(crate) fn request_body(version: u8, headers: &[httparse::Header]) -> Result<Body, String> {
    let named = |n: &str| -> Vec<&[u8]> {
        headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(n))
            .map(|h| h.value)
            .collect()
    };
    let (te, cl) = (named("transfer-encoding"), named("content-length"));
    if let Some(h) = headers.iter().find(|h| {
        h.name.eq_ignore_ascii_case("transfer_encoding")
            || h.name.eq_ignore_ascii_case("content_length")
    }) {
        return Err(format!(
            "a request with a '{}' field: framing is Transfer-Encoding or Content-Length",
            h.name
        ));
    }
    match (te.as_slice(), cl.as_slice()) {
        ([], []) => Ok(Body::Empty),
        ([], [v]) => length(v).map(Body::Length).ok_or_else(|| {
            format!(
                "a Content-Length that is not a length: '{}' (RFC 9110 8.6)",
                String::from_utf8_lossy(v)
            )
        }),
        ([], _) => Err(format!(
            "a request with {} Content-Length fields: send one (RFC 9112 6.3)",
            cl.len()
        )),
        (_, [_, ..]) => Err(
            "a request with both Transfer-Encoding and Content-Length: send one (RFC 9112 6.3)"
                .into(),
        ),
        ([_, ..], []) if version == 0 => {
            Err("an HTTP/1.0 request with Transfer-Encoding (RFC 9112 6.1)".into())
        }
        ([v], []) if trimmed(v).eq_ignore_ascii_case(b"chunked") => Ok(Body::Chunked),
        _ => Err(format!(
            "a request with Transfer-Encoding '{}': the proxy takes 'chunked' alone \
             (RFC 9112 6.3)",
            te.iter()
                .map(|v| String::from_utf8_lossy(v))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// How long the body of a final response with these headers is (`head`:
/// the request was a HEAD), or why it cannot be framed (a line for a
/// 502). A 1xx response is interim and has no body.
pub(crate) fn response_body(
    head: bool,
    status: u16,
    headers: &[httparse::Header],
) -> Result<Body, String> {
    if head || (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(Body::Empty);
    }
    let values = |n: &str| -> Vec<&[u8]> {
        headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(n))
            .flat_map(|h| h.value.split(|b| *b == b','))
            .map(trimmed)
            .filter(|v| !v.is_empty())
            .collect()
    };
    let te = values("transfer-encoding");
    if let Some(last) = te.last() {
        return Ok(if last.eq_ignore_ascii_case(b"chunked") {
            Body::Chunked
        } else {
            Body::UntilClose
        });
    }
    let cl = values("content-length");
    let Some(first) = cl.first() else {
        return Ok(Body::UntilClose);
    };
    match length(first) {
        Some(n) if cl.iter().all(|v| v == first) => Ok(Body::Length(n)),
        _ => Err("the upstream's response has an invalid Content-Length (RFC 9112 6.3)".into()),
    }
}

/// Where in a chunked body the parser is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// In a chunk size's hex digits.
    Size,
    /// In a chunk extension (responses only).
    Extension,
    /// After the CR that ends a chunk-size line.
    SizeLf,
    /// In chunk data, with this many bytes to go.
    Data(u64),
    /// After chunk data: its CR, then its LF.
    DataCr,
    DataLf,
    /// At the start of a trailer line (or of the final CRLF).
    LineStart,
    /// In a trailer field line.
    Field,
    /// After the CR that ends a trailer field line.
    FieldLf,
    /// After the CR of the final CRLF.
    EndLf,
    /// Past the end of the body.
    Done,
}

/// Finds the end of a chunked body (RFC 9112 7.1) byte by byte, without
/// decoding it: what it accepted may be passed on as it came.
#[derive(Debug, Clone)]
pub(crate) struct Chunked {
    at: At,
    /// Chunk extensions are accepted (a response's).
    extensions: bool,
    /// The chunk size read so far, and its digits.
    size: u64,
    digits: u8,
    /// The length of the current chunk-size line.
    line: usize,
    /// Bytes of trailer fields so far.
    trailer: usize,
}

impl Chunked {
    /// A parser for a request's body: no chunk extensions.
    pub(crate) fn request() -> Chunked {
        Chunked::new(false)
    }

    /// A parser for a response's body: chunk extensions passed over.
    pub(crate) fn response() -> Chunked {
        Chunked::new(true)
    }

    fn new(extensions: bool) -> Chunked {
        Chunked {
            at: At::Size,
            extensions,
            size: 0,
            digits: 0,
            line: 0,
            trailer: 0,
        }
    }

    /// Whether the whole body, final CRLF included, has been accepted.
    pub(crate) fn done(&self) -> bool {
        self.at == At::Done
    }

    /// Takes bytes that follow those taken so far: `Ok(n)` when the first
    /// `n` bytes of `input` belong to the body (all of them unless the body
    /// ended inside `input`), `Err((n, why))` when the byte after the first
    /// `n` breaks the framing.
    pub(crate) fn feed(&mut self, input: &[u8]) -> Result<usize, (usize, String)> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            let bad = |why: &str| Err((i, why.to_string()));
            self.at = match self.at {
                At::Done => return Ok(i),
                At::Data(left) => {
                    let take = left.min((input.len() - i) as u64);
                    i += take as usize;
                    self.at = if take == left {
                        At::DataCr
                    } else {
                        At::Data(left - take)
                    };
                    continue;
                }
                At::Size => match b {
                    _ if b.is_ascii_hexdigit() => {
                        if self.digits == SIZE_DIGITS {
                            return bad("a chunk size of more than 16 hex digits");
                        }
                        self.digits += 1;
                        let d = (b as char).to_digit(16).unwrap_or(0);
                        self.size = (self.size << 4) | u64::from(d);
                        At::Size
                    }
                    b'\r' if self.digits > 0 => At::SizeLf,
                    b';' if self.digits > 0 && self.extensions => At::Extension,
                    b';' if self.digits > 0 => {
                        return bad("a chunk extension in a request (RFC 9112 7.1.1)");
                    }
                    _ => return bad("a chunk size that is not hex digits and CRLF"),
                },
                At::Extension => match b {
                    b'\r' => At::SizeLf,
                    b'\t' | b' '..=b'~' | 0x80.. => At::Extension,
                    _ => return bad("a control character in a chunk extension"),
                },
                At::SizeLf => match b {
                    b'\n' if self.size == 0 => At::LineStart,
                    b'\n' => At::Data(self.size),
                    _ => return bad("a chunk-size line that does not end in CRLF"),
                },
                At::DataCr => match b {
                    b'\r' => At::DataLf,
                    _ => return bad("chunk data longer than its size"),
                },
                At::DataLf => match b {
                    b'\n' => {
                        (self.size, self.digits, self.line) = (0, 0, 0);
                        At::Size
                    }
                    _ => return bad("chunk data that does not end in CRLF"),
                },
                At::LineStart => match b {
                    b'\r' => At::EndLf,
                    b'!' | b'#'..=b'\'' | b'*' | b'+' | b'-' | b'.' | b'^'..=b'`' | b'|' | b'~' => {
                        At::Field
                    }
                    _ if b.is_ascii_alphanumeric() => At::Field,
                    _ => return bad("a trailer line that is not a field (RFC 9112 7.1.2)"),
                },
                At::Field => match b {
                    b'\r' => At::FieldLf,
                    b'\t' | b' '..=b'~' | 0x80.. => At::Field,
                    _ => return bad("a control character in a trailer field"),
                },
                At::FieldLf => match b {
                    b'\n' => At::LineStart,
                    _ => return bad("a trailer field that does not end in CRLF"),
                },
                At::EndLf => match b {
                    b'\n' => At::Done,
                    _ => return bad("a chunked body that does not end in CRLF"),
                },
            };
            if matches!(self.at, At::Size | At::Extension | At::SizeLf) {
                self.line += 1;
                if self.line > SIZE_LINE_MAX {
                    return Err((i, "a chunk-size line longer than 4 KiB".into()));
                }
            }
            if matches!(self.at, At::Field | At::FieldLf | At::LineStart) {
                self.trailer += 1;
                if self.trailer > TRAILER_MAX {
                    return Err((i, "trailer fields longer than 64 KiB".into()));
                }
            }
            i += 1;
            if self.at == At::Done {
                return Ok(i);
            }
        }
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&'static str, &'static str)]) -> Vec<httparse::Header<'static>> {
        list.iter()
            .map(|(name, value)| httparse::Header {
                name,
                value: value.as_bytes(),
            })
            .collect()
    }

    #[test]
    fn a_request_s_framing_is_taken_strictly() {
        let req = |v: u8, l: &[(&'static str, &'static str)]| request_body(v, &headers(l));
        assert_eq!(req(1, &[("Host", "a")]), Ok(Body::Empty));
        assert_eq!(req(1, &[("content-length", " 42 ")]), Ok(Body::Length(42)));
        assert_eq!(req(0, &[("Content-Length", "0")]), Ok(Body::Length(0)));
        assert_eq!(
            req(1, &[("Transfer-Encoding", "Chunked")]),
            Ok(Body::Chunked)
        );
        for bad in [
            &[("Content-Length", "4, 4")][..],
            &[("Content-Length", "4"), ("Content-Length", "4")],
            &[("Content-Length", "+4")],
            &[("Content-Length", "0x4")],
            &[("Content-Length", "")],
            &[("Content-Length", "99999999999999999999")],
            &[("Transfer-Encoding", "chunked"), ("Content-Length", "4")],
            &[("Transfer-Encoding", "gzip, chunked")],
            &[("Transfer-Encoding", "chunked, identity")],
            &[
                ("Transfer-Encoding", "chunked"),
                ("Transfer-Encoding", "chunked"),
            ],
            &[("Transfer-Encoding", "identity")],
            &[("Transfer-Encoding", "xchunked")],
            &[("Transfer_Encoding", "chunked")],
            &[("content_length", "4")],
        ] {
            assert!(req(1, bad).is_err(), "{bad:?}");
        }
        assert!(req(0, &[("Transfer-Encoding", "chunked")]).is_err());
    }

    #[test]
    fn a_response_s_framing_follows_rfc_9112_6_3() {
        let resp = |head: bool, status: u16, l: &[(&'static str, &'static str)]| {
            response_body(head, status, &headers(l))
        };
        let cl = [("Content-Length", "5")];
        assert_eq!(resp(false, 200, &cl), Ok(Body::Length(5)));
        assert_eq!(resp(true, 200, &cl), Ok(Body::Empty));
        for status in [100, 103, 204, 304] {
            assert_eq!(resp(false, status, &cl), Ok(Body::Empty));
        }
        assert_eq!(
            resp(
                false,
                200,
                &[("Content-Length", "5, 5"), ("content-length", "5")]
            ),
            Ok(Body::Length(5))
        );
        assert!(resp(false, 200, &[("Content-Length", "5, 6")]).is_err());
        assert!(resp(false, 200, &[("Content-Length", "five")]).is_err());
        assert_eq!(
            resp(
                false,
                200,
                &[
                    ("Transfer-Encoding", "gzip, chunked"),
                    ("Content-Length", "5")
                ]
            ),
            Ok(Body::Chunked)
        );
        assert_eq!(
            resp(false, 200, &[("Transfer-Encoding", "gzip")]),
            Ok(Body::UntilClose)
        );
        assert_eq!(resp(false, 200, &[]), Ok(Body::UntilClose));
    }

    /// Feeds `body` one byte at a time and whole: both give the same end.
    fn end(mut p: Chunked, body: &[u8]) -> Result<usize, (usize, String)> {
        let mut whole = p.clone();
        let at_once = whole.feed(body);
        let mut taken = 0;
        let mut bytewise = Ok(0);
        for b in body {
            match p.feed(std::slice::from_ref(b)) {
                Ok(1) => taken += 1,
                Ok(_) => break,
                Err((_, why)) => {
                    bytewise = Err((taken, why));
                    break;
                }
            }
            bytewise = Ok(taken);
        }
        assert_eq!(at_once, bytewise, "{}", String::from_utf8_lossy(body));
        assert_eq!(whole.done(), p.done());
        at_once
    }

    #[test]
    fn a_chunked_body_ends_after_its_last_chunk_and_trailers() {
        let body = b"5\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n";
        let mut more = body.to_vec();
        more.extend_from_slice(b"GET http://b.example/ HTTP/1.1\r\n\r\n");
        assert_eq!(end(Chunked::request(), &more), Ok(body.len()));
        let trailers = b"1\r\nx\r\n000\r\nDigest: abc\r\nX-T: 1\r\n\r\n";
        assert_eq!(end(Chunked::request(), trailers), Ok(trailers.len()));
        // Partial: everything so far belongs to the body.
        let mut p = Chunked::request();
        assert_eq!(p.feed(b"5\r\nhel"), Ok(6));
        assert!(!p.done());
        assert_eq!(p.feed(b"lo\r\n0\r\n\r\nrest"), Ok(9));
        assert!(p.done());
        // A response may carry extensions; a request may not.
        let ext = b"5;name=\"v\"\r\nhello\r\n0\r\n\r\n";
        assert_eq!(end(Chunked::response(), ext), Ok(ext.len()));
        assert_eq!(end(Chunked::request(), ext).unwrap_err().0, 1);
    }

    #[test]
    fn a_chunked_body_framed_two_ways_is_refused_where_it_breaks() {
        for (body, at) in [
            (&b"5\nhello\r\n0\r\n\r\n"[..], 1),
            (b"5\r\nhello\n0\r\n\r\n", 8),
            (b"5\r\nhelloX\r\n0\r\n\r\n", 8),
            (b" 5\r\nhello\r\n0\r\n\r\n", 0),
            (b"0x5\r\nhello\r\n0\r\n\r\n", 1),
            (b"\r\n", 0),
            (b"-1\r\n", 0),
            (b"10000000000000000\r\n", 16),
            (b"0\r\n\r\r", 4),
            (b"0\r\n trailer: folded\r\n\r\n", 3),
            (b"0\r\nX: a\nb\r\n\r\n", 7),
            (b"0\r\n\n", 3),
        ] {
            assert_eq!(
                end(Chunked::request(), body).map_err(|e| e.0),
                Err(at),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // 16 hex digits are a size: the data then follows.
        let mut p = Chunked::request();
        assert_eq!(p.feed(b"000000000000000F\r\n"), Ok(18));
    }
}
