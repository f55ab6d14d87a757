//! Names read from inside a file (a shard in a sharded index, a zip member, an array in an
//! `.npz`, a tensor, a GGUF key): what text they may be, and how a message shows them.
//!
//! Such a name is the file's author's, not the caller's, and it travels: into a file path, a
//! URL (whose parser deletes TAB, LF and CR anywhere and strips C0 controls and spaces at
//! either end, so `"\t/\t/host/x"` names another host), a terminal (which obeys escape
//! sequences) and logs. So it must be printable text that means one thing everywhere.

/// Why `name` is not printable text, or `None` when it is: a control character (C0
/// `0x00-0x1f`, DEL `0x7f`, C1 `0x80-0x9f`), or whitespace at its start or end.
pub fn unprintable(name: &str) -> Option<&'static str> {
    if name.chars().any(char::is_control) {
        Some("it holds a control character")
    } else if name.starts_with(char::is_whitespace) || name.ends_with(char::is_whitespace) {
        Some("it starts or ends with whitespace")
    } else {
        None
    }
}

/// Characters of a name from a file that [`printable`] shows before cutting it.
const PRINTABLE_CHARS: usize = 200;

/// Whether `c` would act on a terminal rather than show: C0 and C1 controls, DEL, the
/// Unicode bidirectional controls and marks (which reorder the text around them) and the
/// line and paragraph separators.
pub fn is_unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A name or text from a file as a message may show it: every [`is_unprintable`] character
/// escaped (`\n`, `\r`, `\t`, else `\xNN` below U+0100 and `\u{NNNN}` above; the command
/// line's `printable`, bin/lib/ui.js, escapes the same way) and, past 200 characters, cut
/// with an ellipsis and its length in bytes noted. A name that needs neither is returned as
/// it is, so that no byte of a file printed with a message can act on a terminal.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write;
    let long = s.len() > PRINTABLE_CHARS && s.chars().nth(PRINTABLE_CHARS).is_some();
    if !long && !s.chars().any(is_unprintable) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::new();
    for c in s.chars().take(PRINTABLE_CHARS) {
        let n = c as u32;
        let _ = match c {
            c if !is_unprintable(c) => write!(out, "{c}"),
            '\n' => write!(out, "\\n"),
            '\r' => write!(out, "\\r"),
            '\t' => write!(out, "\\t"),
            _ if n < 0x100 => write!(out, "\\x{n:02x}"),
            _ => write!(out, "\\u{{{n:04x}}}"),
        };
    }
    if long {
        let _ = write!(out, "… ({} bytes)", s.len());
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_names_only() {
        for ok in [
            "model.safetensors",
            "a b",
            "layer.0/weight",
            "é",
            "a\u{a0}b",
        ] {
            assert_eq!(unprintable(ok), None, "{ok:?}");
        }
        for c in (0u32..0x20).chain(0x7f..0xa0) {
            let name = format!("a{}b", char::from_u32(c).unwrap());
            assert_eq!(
                unprintable(&name),
                Some("it holds a control character"),
                "{c:#x}"
            );
        }
        for bad in [" a", "a ", "\u{a0}a", "a\u{3000}"] {
            assert_eq!(
                unprintable(bad),
                Some("it starts or ends with whitespace"),
                "{bad:?}"
            );
        }
        assert_eq!(
            printable("a\t\n\r\u{1b}[2J\u{7f}b é\u{202e}"),
            "a\\t\\n\\r\\x1b[2J\\x7fb é\\u{202e}"
        );
        let long = "x".repeat(300);
        assert_eq!(
            printable(&long),
            format!("{}… (300 bytes)", "x".repeat(200))
        );
    }
}
