//! The top-level modules of the core (`crates/core/src`) and of the binding (`src/`) form a
//! DAG: no module reaches, through `crate::` paths, a module that reaches it back. A module is
//! a file or a folder directly under `src/`; an edge is any `crate::X` (or `$crate::X`, or
//! `crate::{X, …}`) written outside test code, documentation included (an intra-doc link is a
//! dependency too). Test code is what `#[cfg(test)]` (or `cfg(all(test, …))`) guards: an
//! inline item, or a module file it declares.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where an edge was first seen: file and line.
type Edges = BTreeMap<(String, String), (PathBuf, usize)>;

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The file with every string and character literal blanked (same length, newlines kept), and
/// a second copy with comments blanked too: paths are searched in the first (documentation
/// counts), items are delimited in the second (braces in comments or strings do not count).
fn blanked(src: &str) -> (Vec<u8>, Vec<u8>) {
    let b = src.as_bytes();
    let mut text = b.to_vec();
    let mut code = b.to_vec();
    let blank = |v: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut v[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            blank(&mut code, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            let mut j = i;
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut code, i, j);
            i = j;
        } else if b[i] == b'r'
            && matches!(b.get(i + 1), Some(b'"' | b'#'))
            && (!ident(b, i) || (b[i - 1] == b'b' && !ident(b, i - 1)))
        {
            // A raw string: r"…", r#"…"#, br"…", …
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let start = i + 2 + hashes;
            let end = b[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |n| start + n + close.len());
            blank(&mut code, i, end);
            blank(&mut text, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut code, i, end);
            blank(&mut text, i, end);
            i = end;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|n| i + 3 + n)
            } else {
                let len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 2 + len)
            };
            match end {
                Some(end) => {
                    blank(&mut code, i, end);
                    blank(&mut text, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    (text, code)
}

/// Whether the byte before `i` continues an identifier.
fn ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The ranges of a file that `#[cfg(…test…)]` guards (from the attribute to the end of its
/// item), and the module files such attributes declare (`mod tests;`, or the `#[path]` given),
/// relative to the file's directory. `raw` is the file, `code` its copy without comments and
/// literals.
fn test_items(raw: &str, code: &[u8], file: &Path) -> (Vec<(usize, usize)>, Vec<PathBuf>) {
    let s = String::from_utf8_lossy(code);
    let stem = file.file_stem().unwrap().to_string_lossy();
    let owns_dir = matches!(&*stem, "mod" | "lib" | "main");
    let mut ranges = Vec::new();
    let mut files = Vec::new();
    let mut from = 0;
    while let Some(at) = s[from..].find("#[cfg(").map(|n| from + n) {
        let close = s[at..].find(']').map_or(s.len(), |n| at + n + 1);
        let cfg = &s[at..close];
        from = close;
        let words: Vec<&str> = cfg
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .collect();
        if !words.contains(&"test") || words.contains(&"not") || words.contains(&"any") {
            continue;
        }
        // The item after this and any further attributes.
        let mut item = close;
        let mut path_attr = None;
        loop {
            let rest = s[item..].trim_start();
            item = s.len() - rest.len();
            if !rest.starts_with("#[") {
                break;
            }
            let end = rest.find(']').map_or(s.len(), |n| item + n + 1);
            if rest.starts_with("#[path") {
                path_attr = raw[item..end].split('"').nth(1).map(str::to_string);
            }
            item = end;
        }
        let semi = s[item..].find(';').map(|n| item + n);
        let brace = s[item..].find('{').map(|n| item + n);
        let end = match (semi, brace) {
            (Some(semi), brace) if brace.is_none_or(|b| semi < b) => {
                let decl: Vec<&str> = s[item..semi].split_whitespace().collect();
                if let [.., "mod", name] = decl[..] {
                    let dir = if owns_dir {
                        PathBuf::new()
                    } else {
                        PathBuf::from(&*stem)
                    };
                    match &path_attr {
                        Some(p) => files.push(PathBuf::from(p)),
                        None => {
                            files.push(dir.join(format!("{name}.rs")));
                            files.push(dir.join(name));
                        }
                    }
                }
                semi + 1
            }
            (_, Some(brace)) => matching(code, brace),
            _ => s.len(),
        };
        ranges.push((at, end));
        from = end;
    }
    (ranges, files)
}

/// The index just past the brace matching the one at `open`.
fn matching(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// The top-level modules of `src` (files and folders directly under it, but the crate root)
/// and the edges between them.
fn module_graph(src: &Path) -> (BTreeSet<String>, Edges) {
    let modules: BTreeSet<String> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let files = rust_files(src);
    // Module files (and their folders) that test code declares.
    let mut test_paths: Vec<PathBuf> = Vec::new();
    for file in &files {
        let raw = std::fs::read_to_string(file).unwrap();
        let (_, code) = blanked(&raw);
        let dir = file.parent().unwrap();
        let (_, declared) = test_items(&raw, &code, file);
        test_paths.extend(declared.into_iter().map(|p| dir.join(p)));
    }
    let is_test = |f: &Path| test_paths.iter().any(|t| f.starts_with(t));
    let mut edges = Edges::new();
    for file in &files {
        if is_test(file) {
            continue;
        }
        let rel = file.strip_prefix(src).unwrap();
        let from = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if !modules.contains(&from) {
            continue;
        }
        let raw = std::fs::read_to_string(file).unwrap();
        let (text, code) = blanked(&raw);
        let (tests, _) = test_items(&raw, &code, file);
        let mut kept = text.clone();
        for (a, b) in tests {
            for c in &mut kept[a..b] {
                if *c != b'\n' {
                    *c = b' ';
                }
            }
        }
        let kept = String::from_utf8_lossy(&kept).into_owned();
        for (at, _) in kept.match_indices("crate::") {
            if ident(kept.as_bytes(), at) {
                continue;
            }
            let rest = &kept[at + "crate::".len()..];
            let targets: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a, b::c, d::{e}}`: the first name of each top-level element.
                let inside = matching(format!("{{{group}").as_bytes(), 0).saturating_sub(2);
                let group = &group[..inside];
                let mut depth = 0;
                let mut names = Vec::new();
                let mut start = true;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => start = true,
                        c if start && (c.is_alphanumeric() || c == '_') => {
                            let end = group[i..]
                                .find(|c: char| !c.is_alphanumeric() && c != '_')
                                .map_or(group.len(), |n| i + n);
                            names.push(&group[i..end]);
                            start = false;
                        }
                        _ => {}
                    }
                }
                names
            } else {
                let end = rest
                    .find(|c: char| !c.is_alphanumeric() && c != '_')
                    .unwrap_or(rest.len());
                vec![&rest[..end]]
            };
            for to in targets {
                if to != from && modules.contains(to) {
                    let line = kept[..at].matches('\n').count() + 1;
                    edges
                        .entry((from.clone(), to.to_string()))
                        .or_insert_with(|| (rel.to_path_buf(), line));
                }
            }
        }
    }
    (modules, edges)
}

/// Every cycle's modules (each strongly connected component of more than one module), with
/// the edges inside it and where each was seen.
fn cycles(modules: &BTreeSet<String>, edges: &Edges) -> Vec<String> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(m) = stack.pop() {
            for ((a, b), _) in edges.range((m.clone(), String::new())..) {
                if *a != m {
                    break;
                }
                if seen.insert(b.clone()) {
                    stack.push(b.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        modules.iter().map(|m| (m, reach(m))).collect();
    let mut reported = BTreeSet::new();
    let mut out = Vec::new();
    for m in modules {
        let component: BTreeSet<&String> = std::iter::once(m)
            .chain(reached[m].iter().filter(|n| reached[*n].contains(m)))
            .collect();
        if component.len() < 2 || !reported.insert(component.clone()) {
            continue;
        }
        let inside: Vec<String> = edges
            .iter()
            .filter(|((a, b), _)| component.contains(a) && component.contains(b))
            .map(|((a, b), (file, line))| format!("{a} -> {b} ({}:{line})", file.display()))
            .collect();
        out.push(format!(
            "{:?}: {}",
            component.iter().collect::<Vec<_>>(),
            inside.join(", ")
        ));
    }
    out
}

fn check(src: &Path) {
    let (modules, edges) = module_graph(src);
    assert!(modules.len() > 5, "{}: modules {modules:?}", src.display());
    let found = cycles(&modules, &edges);
    assert!(
        found.is_empty(),
        "import cycles among the top-level modules of {}:\n{}",
        src.display(),
        found.join("\n")
    );
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_core_modules_form_a_dag() {
    check(&manifest().join("src"));
}

#[test]
fn the_binding_modules_form_a_dag() {
    check(&manifest().join("../../src"));
}

/// The checker sees what it must: `crate::` paths in code and documentation, grouped
/// imports, test code left out, and a cycle reported with where its edges are.
#[test]
fn the_checker_finds_cycles_and_ignores_tests() {
    let dir = std::env::temp_dir().join(format!("stcore-layering-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::create_dir_all(dir.join("a")).unwrap();
    let write = |p: &str, s: &str| std::fs::write(dir.join(p), s).unwrap();
    write("lib.rs", "mod a; mod b; mod c; mod d; mod e; mod f;\n");
    write(
        "a.rs",
        "use crate::{b::X, c};\nfn s() -> &'static str { \"crate::d\" }\n#[cfg(test)]\nmod tests { use crate::e; }\n#[cfg(all(test, feature = \"x\"))]\nmod more;\n",
    );
    write("a/more.rs", "use crate::e;\n");
    write("b/mod.rs", "/// Unlike [`crate::a`].\npub struct X;\n");
    write("c.rs", "pub fn c() { let _ = '\"'; crate::d::d(); }\n");
    write("d.rs", "pub fn d() {}\n");
    write("e.rs", "use crate::a;\n");
    write("f.rs", "#[cfg(test)]\nuse crate::a;\n");
    let (modules, edges) = module_graph(&dir);
    let pairs: Vec<(&str, &str)> = edges
        .keys()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [("a", "b"), ("a", "c"), ("b", "a"), ("c", "d"), ("e", "a")]
    );
    let found = cycles(&modules, &edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("[\"a\", \"b\"]"), "{found:?}");
    assert!(found[0].contains("b -> a (b/mod.rs:1)"), "{found:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
