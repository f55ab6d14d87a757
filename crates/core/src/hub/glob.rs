//! `include` / `exclude` patterns of a download, matched as huggingface_hub's
//! `filter_repo_objects` matches `allow_patterns` / `ignore_patterns`: Python's
//! `fnmatch.fnmatchcase` (case-sensitive; `*` and `?` cross `/`; `[seq]`, `[!seq]`; no
//! escape character), with `\` read as `/` and a pattern ending in `/` meaning everything
//! below it.

use crate::error::{CoreError, Result};

/// The longest pattern accepted, and the most patterns.
const MAX_PATTERN: usize = 4096;
const MAX_PATTERNS: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Star,
    Any,
    Class {
        negate: bool,
        ranges: Vec<(char, char)>,
    },
    Char(char),
}

/// One compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    tokens: Vec<Token>,
}

impl Pattern {
    /// Compile `pattern` as `fnmatch.translate` reads it.
    pub fn new(pattern: &str) -> Pattern {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            i += 1;
            match c {
                '*' => {
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star)
                    }
                }
                '?' => tokens.push(Token::Any),
                '[' => match class(&chars, i) {
                    Some((token, next)) => {
                        tokens.push(token);
                        i = next;
                    }
                    None => tokens.push(Token::Char('[')),
                },
                c => tokens.push(Token::Char(c)),
            }
        }
        Pattern { tokens }
    }

    /// Whether the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        let (mut t, mut p) = (0usize, 0usize);
        // Where the last `*` was, and the text position it has consumed up to.
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match self.tokens.get(p) {
                Some(Token::Star) => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                Some(token) if one(token, text[t]) => {
                    t += 1;
                    p += 1;
                    continue;
                }
                _ => {}
            }
            match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            }
        }
        self.tokens[p..].iter().all(|t| *t == Token::Star)
    }
}

/// Whether the single-character token matches `c`.
fn one(token: &Token, c: char) -> bool {
    match token {
        Token::Any => true,
        Token::Char(x) => *x == c,
        Token::Class { negate, ranges } => {
            ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negate
        }
        Token::Star => false,
    }
}

/// The class starting after a `[` at `start`, and the index after its `]`; `None` when the
/// `[` opens no class (no closing `]`): then it is a literal `[`, as in fnmatch.
fn class(chars: &[char], start: usize) -> Option<(Token, usize)> {
    let mut i = start;
    let negate = chars.get(i) == Some(&'!');
    if negate {
        i += 1;
    }
    // A `]` first in the set is a member.
    let first = i;
    let mut ranges = Vec::new();
    loop {
        let c = *chars.get(i)?;
        if c == ']' && i > first {
            return Some((Token::Class { negate, ranges }, i + 1));
        }
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&h| h != ']') {
            let hi = chars[i + 2];
            // A reversed range matches nothing (fnmatch drops it).
            if c <= hi {
                ranges.push((c, hi));
            }
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
}

/// Which files of a repository a download takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileFilter {
    include: Option<Vec<Pattern>>,
    exclude: Vec<Pattern>,
}

impl FileFilter {
    /// `include` (none: every file) and `exclude` patterns; ERR_INVALID_ARGUMENT past
    /// 1024 patterns or 4096 characters in one.
    pub fn new(include: Option<&[String]>, exclude: &[String]) -> Result<FileFilter> {
        let compile = |what: &str, patterns: &[String]| -> Result<Vec<Pattern>> {
            if patterns.len() > MAX_PATTERNS {
                return Err(CoreError::invalid_argument(format!(
                    "options.{what} has {} patterns, more than {MAX_PATTERNS}",
                    patterns.len()
                )));
            }
            patterns
                .iter()
                .map(|p| {
                    if p.len() > MAX_PATTERN {
                        return Err(CoreError::invalid_argument(format!(
                            "a pattern of options.{what} is longer than {MAX_PATTERN} bytes"
                        )));
                    }
                    let mut p = p.replace('\\', "/");
                    if p.ends_with('/') {
                        p.push('*');
                    }
                    Ok(Pattern::new(&p))
                })
                .collect()
        };
        Ok(FileFilter {
            include: include.map(|i| compile("include", i)).transpose()?,
            exclude: compile("exclude", exclude)?,
        })
    }

    /// Whether the file at `path` (in the repository, `/`-separated) is taken.
    pub fn takes(&self, path: &str) -> bool {
        let path = path.replace('\\', "/");
        self.include
            .as_ref()
            .is_none_or(|inc| inc.iter().any(|p| p.matches(&path)))
            && !self.exclude.iter().any(|p| p.matches(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_fnmatchcase() {
        // (pattern, text, fnmatch.fnmatchcase's answer)
        let cases = [
            ("*.json", "config.json", true),
            ("*.json", "sub/dir/x.json", true),
            ("*.JSON", "config.json", false),
            ("data/*.json", "data/sub/x.json", true),
            (
                "model-?????-of-*.safetensors",
                "model-00001-of-00002.safetensors",
                true,
            ),
            (
                "model-?????-of-*.safetensors",
                "model-0001-of-00002.safetensors",
                false,
            ),
            ("[!.]*", ".hidden", false),
            ("[!.]*", "visible", true),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[]]", "]", true),
            ("[!]]", "a", true),
            ("[z-a]", "m", false),
            ("[abc", "[abc", true),
            ("a[", "a[", true),
            ("*", "", true),
            ("?", "", false),
            ("**/*.bin", "a/b/c.bin", true),
            (
                "*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
            ("\\*", "\\x", true),
            ("é?", "éa", true),
        ];
        for (pattern, text, want) in cases {
            assert_eq!(
                Pattern::new(pattern).matches(text),
                want,
                "{pattern} ~ {text}"
            );
        }
    }

    #[test]
    fn filters_take_include_then_drop_exclude() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let all = FileFilter::new(None, &[]).unwrap();
        assert!(all.takes("anything/at/all"));
        let f =
            FileFilter::new(Some(&s(&["*.safetensors", "tokenizer/"])), &s(&["*fp16*"])).unwrap();
        assert!(f.takes("model.safetensors"));
        assert!(f.takes("tokenizer/vocab.txt"));
        assert!(!f.takes("model.fp16.safetensors"));
        assert!(!f.takes("config.json"));
        let win = FileFilter::new(Some(&s(&["onnx\\*"])), &[]).unwrap();
        assert!(win.takes("onnx/model.onnx"));
        let many = vec!["x".to_string(); 1025];
        assert_eq!(
            FileFilter::new(Some(&many), &[]).unwrap_err().code(),
            "ERR_INVALID_ARGUMENT"
        );
    }
}
