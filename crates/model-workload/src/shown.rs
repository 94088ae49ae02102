//! The one way a text read from a file or the environment is shown in a message: control
//! characters escaped, a long value cut with its length shown ([`shown`]).
//!
//! A GGUF key, a profile's `hardware_id`, a serde error quoting an unknown variant or a
//! path from `SIPLLM_HOME` may hold terminal escapes (a fake coloured line, a cleared
//! line, hidden text) or a megabyte of text; every message of the tuner that quotes such a
//! value passes it through [`shown`] (or [`shown_path`], [`shown_bytes`]), and the binaries
//! do the same for what they print from a profile.

use std::path::Path;

/// The most characters of a value [`shown`] keeps; the rest is replaced by its length.
pub const MAX_SHOWN_CHARS: usize = 80;

/// The most characters of a path [`shown_path`] keeps (paths are longer than values).
pub const MAX_SHOWN_PATH_CHARS: usize = 240;

/// The most characters of a whole message quoted from a parser ([`shown_message`]).
pub const MAX_SHOWN_MESSAGE_CHARS: usize = 240;

/// `text` made safe to print: every control character (C0, DEL, C1) and every invisible
/// direction or format mark escaped as `\n`, `\r`, `\t` or `\u{…}`, and cut after
/// [`MAX_SHOWN_CHARS`] characters, the cut marked with the whole value's length in bytes.
///
/// ```
/// use model_workload::shown;
///
/// assert_eq!(shown("llama\n\x1b[31mFAKE\r"), "llama\\n\\u{1b}[31mFAKE\\r");
/// let long = "k".repeat(1 << 20);
/// assert_eq!(shown(&long), format!("{}… (1048576 bytes)", "k".repeat(80)));
/// ```
pub fn shown(text: &str) -> String {
    shown_within(text, MAX_SHOWN_CHARS)
}

/// [`shown`] for a whole message that quotes a value (a parser's error), cut after
/// [`MAX_SHOWN_MESSAGE_CHARS`] characters.
pub fn shown_message(text: &str) -> String {
    shown_within(text, MAX_SHOWN_MESSAGE_CHARS)
}

/// [`shown`] for a path, cut after [`MAX_SHOWN_PATH_CHARS`] characters; bytes that are not
/// UTF-8 are shown as the replacement character (U+FFFD).
pub fn shown_path(path: &Path) -> String {
    shown_within(&path.to_string_lossy(), MAX_SHOWN_PATH_CHARS)
}

/// [`shown`] for bytes that may not be UTF-8 (invalid sequences become the replacement
/// character); only the first bytes are decoded, so a megabyte costs no more than a line.
pub fn shown_bytes(bytes: &[u8]) -> String {
    // Four bytes a character at most: this many bytes hold every character kept.
    let head = &bytes[..bytes.len().min(4 * (MAX_SHOWN_CHARS + 1))];
    escaped(
        &String::from_utf8_lossy(head),
        MAX_SHOWN_CHARS,
        bytes.len(),
        head.len() < bytes.len(),
    )
}

/// [`shown`] with a limit of `max_chars` characters.
pub fn shown_within(text: &str, max_chars: usize) -> String {
    escaped(text, max_chars, text.len(), false)
}

/// `text` escaped and cut after `max_chars` characters; the cut (or, with `cut_before`,
/// the end of a text already cut) is marked with `total_bytes`, the whole value's length.
fn escaped(text: &str, max_chars: usize, total_bytes: usize, cut_before: bool) -> String {
    let mut out = String::with_capacity(text.len().min(4 * max_chars + 32));
    let mark = |out: &mut String| out.push_str(&format!("… ({total_bytes} bytes)"));
    for (kept, c) in text.chars().enumerate() {
        if kept == max_chars {
            mark(&mut out);
            return out;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    if cut_before {
        mark(&mut out);
    }
    out
}

/// Whether `c` would act on a terminal or hide text instead of showing itself: a control
/// character, or one of Unicode's invisible direction and format marks (which can reorder
/// or hide the text around them).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}')
}

/// A key or name of the file in double quotes, through [`shown`]: control
/// characters escaped and a long one cut, so that no message quotes a megabyte or a
/// terminal escape.
pub(crate) fn quoted(text: &str) -> String {
    format!("\"{}\"", crate::shown(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_direction_marks_are_escaped() {
        let fake = "x)\n\x1b[2K\x1b[32mimported 1 profile\x1b[0m\n\x1b[8m";
        let s = shown(fake);
        assert!(!s.chars().any(needs_escape), "{s:?}");
        assert_eq!(
            s,
            "x)\\n\\u{1b}[2K\\u{1b}[32mimported 1 profile\\u{1b}[0m\\n\\u{1b}[8m"
        );
        assert_eq!(
            shown("a\u{9b}b\u{202e}c\u{7f}"),
            "a\\u{9b}b\\u{202e}c\\u{7f}"
        );
        // Plain text, accents included, is kept as is.
        assert_eq!(shown("Llama 3.1 8B (éà)"), "Llama 3.1 8B (éà)");
    }

    #[test]
    fn long_values_are_cut_with_their_length() {
        let s = shown(&"é".repeat(1000));
        assert_eq!(s, format!("{}… (2000 bytes)", "é".repeat(MAX_SHOWN_CHARS)));
        assert_eq!(
            shown(&"a".repeat(MAX_SHOWN_CHARS)),
            "a".repeat(MAX_SHOWN_CHARS)
        );
        let path = Path::new("/tmp").join("p".repeat(10_000));
        assert!(shown_path(&path).len() < MAX_SHOWN_PATH_CHARS + 40);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_within_the_limit() {
        let mut bytes = vec![0xff; 1 << 20];
        bytes[0] = b'k';
        let s = shown_bytes(&bytes);
        assert!(s.starts_with("k\u{fffd}"), "{s}");
        assert!(s.ends_with("… (1048576 bytes)"), "{s}");
        assert!(s.chars().count() < MAX_SHOWN_CHARS + 30, "{s}");
        assert_eq!(shown_bytes(b"ok\x1b"), "ok\\u{1b}");
    }
}
