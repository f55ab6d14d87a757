//! `types/header.d.ts`'s `WeightsFormat` union is written by hand: it must name exactly the
//! formats of the registry (`format::FORMATS`), so a format added there is added here.

use std::collections::BTreeSet;

#[test]
fn the_typescript_union_names_every_registered_format() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../types/header.d.ts");
    let text = std::fs::read_to_string(path).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("export type WeightsFormat ="))
        .expect("types/header.d.ts declares WeightsFormat");
    let union: BTreeSet<&str> = line
        .split('=')
        .nth(1)
        .unwrap()
        .split('|')
        .map(|n| n.trim().trim_matches('\''))
        .collect();
    let registered: BTreeSet<&str> = stcore::format::FORMATS.iter().map(|r| r.name).collect();
    assert_eq!(union, registered);
    for f in stcore::WeightsFormat::ALL {
        assert!(union.contains(f.name()), "{f}");
    }
}
