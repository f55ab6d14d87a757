//! The list of GGUF quantizations is written in the core's table (`codecs::presets::Preset`)
//! and repeated where another language needs it: the TypeScript type `GgufQuantization`
//! (`types/header.d.ts`) and the CLI's validation (`bin/lib/convert.js`). Both must equal
//! the table, in its order, and every type a preset may choose must have an encoder.

use stcore::codecs::presets::Preset;
use std::path::PathBuf;

fn repo_file(path: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The quoted names between `start` and `end` (exclusive) in `text`.
fn quoted_names(text: &str, start: &str, end: &str) -> Vec<String> {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start} not found"))
        + start.len();
    let to = from + text[from..].find(end).unwrap();
    text[from..to]
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn typescript_and_cli_lists_equal_the_core_table() {
    let want: Vec<String> = Preset::names().iter().map(|s| s.to_string()).collect();
    let ts = quoted_names(
        &repo_file("types/header.d.ts"),
        "export type GgufQuantization =",
        "\n\n",
    );
    assert_eq!(ts, want, "types/header.d.ts GgufQuantization");
    let cli = quoted_names(
        &repo_file("bin/lib/convert.js"),
        "const QUANTIZATIONS = [",
        "]",
    );
    assert_eq!(cli, want, "bin/lib/convert.js QUANTIZATIONS");
    for name in &want {
        let preset = Preset::parse(name).unwrap();
        for ty in preset.possible_types() {
            assert!(
                ty.can_encode(),
                "{name} may choose {ty}, which cannot be written"
            );
        }
    }
}
