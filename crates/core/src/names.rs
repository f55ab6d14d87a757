//! Names read from inside a file (a shard in a sharded index, an array in an `.npz`): what
//! text they may be, and how a message shows them.
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

/// `name` for a message: control characters escaped (`\t`, `\n`, `\u{1b}`), the rest as
/// written, so a hostile name cannot rewrite the terminal or the log line it lands in.
pub fn shown(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
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
            shown("a\t\n\r\u{1b}[2J\u{7f}b é"),
            "a\\t\\n\\r\\u{1b}[2J\\u{7f}b é"
        );
    }
}
