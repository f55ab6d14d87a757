use super::pickle::{unpickle, Limits, Object, PersistentIds, Unpickled, Value};
use super::*;
use crate::format::zip::tests as zip_tests;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn run(bytes: &[u8]) -> Result<Unpickled> {
    unpickle(bytes, 0, PersistentIds::Zip, Limits::default())
}

/// Python's `repr` of what was built, for comparing with what Python pickled.
fn repr(un: &Unpickled, v: &Value) -> String {
    let join = |items: &[Value]| {
        items
            .iter()
            .map(|x| repr(un, x))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match v {
        Value::None => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Int(i) => i.to_string(),
        Value::BigInt(b) => format!("big{b:02x?}"),
        Value::Float(f) => format!("{f:?}"),
        Value::Str(s) => format!("'{s}'"),
        Value::Bytes(b) => format!(
            "bytes({})",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
        Value::Obj(id) => match un.object(*id) {
            Object::List(x) => format!("[{}]", join(x)),
            Object::Tuple(x) if x.len() == 1 => format!("({},)", join(x)),
            Object::Tuple(x) => format!("({})", join(x)),
            Object::Set(x) => format!("{{{}}}", join(x)),
            Object::Dict { ordered, items } => {
                let body = items
                    .iter()
                    .map(|(k, v)| format!("{}: {}", repr(un, k), repr(un, v)))
                    .collect::<Vec<_>>()
                    .join(", ");
                if *ordered {
                    format!("OrderedDict({{{body}}})")
                } else {
                    format!("{{{body}}}")
                }
            }
        },
        Value::Global(g) => un.globals[*g].path.clone(),
        Value::Storage(s) => format!("storage({})", un.storages[*s].key),
        Value::Tensor(t) => format!("tensor{:?}", un.tensors[*t].shape),
        Value::Opaque(_) => "opaque".into(),
    }
}

/// `pickle.dumps(obj, protocol=p)` from CPython 3.11, for p = 1…5, with
/// obj = {'a': 1, 'b': [1, 2.5, 'x', None, True, False],
///        'c': (b'xy', -1, -2**63, 2**63, 2**100, 300, 70000, -129),
///        'd': {1: 'one'}, 'e': {1, 2}, 'g': 'é', 'od': OrderedDict([('k', [])])}
const PYTHON_PICKLES: [(u8, &str); 5] = [
    (1, "7d71002858010000006171014b0158010000006271025d7103284b0147400400000000000058010000007871044e4930310a4930300a65580100000063710528635f636f646563730a656e636f64650a71062858020000007879710758060000006c6174696e31710874710952710a4affffffff4c2d393232333337323033363835343737353830384c0a4c393232333337323033363835343737353830384c0a4c313236373635303630303232383232393430313439363730333230353337364c0a4d2c014a701101004a7fffffff74710b580100000064710c7d710d4b0158030000006f6e65710e73580100000065710f635f5f6275696c74696e5f5f0a7365740a7110285d7111284b014b026574711252711358010000006771145802000000c3a9711558020000006f64711663636f6c6c656374696f6e730a4f726465726564446963740a71172952711858010000006b71195d711a73752e"),
    (2, "80027d71002858010000006171014b0158010000006271025d7103284b0147400400000000000058010000007871044e888965580100000063710528635f636f646563730a656e636f64650a710658020000007879710758060000006c6174696e31710886710952710a4affffffff8a0800000000000000808a090000000000000080008a0d000000000000000000000000104d2c014a701101004a7fffffff74710b580100000064710c7d710d4b0158030000006f6e65710e73580100000065710f635f5f6275696c74696e5f5f0a7365740a71105d7111284b014b026585711252711358010000006771145802000000c3a9711558020000006f64711663636f6c6c656374696f6e730a4f726465726564446963740a71172952711858010000006b71195d711a73752e"),
    (3, "80037d71002858010000006171014b0158010000006271025d7103284b0147400400000000000058010000007871044e8889655801000000637105284302787971064affffffff8a0800000000000000808a090000000000000080008a0d000000000000000000000000104d2c014a701101004a7fffffff74710758010000006471087d71094b0158030000006f6e65710a73580100000065710b636275696c74696e730a7365740a710c5d710d284b014b026585710e52710f58010000006771105802000000c3a9711158020000006f64711263636f6c6c656374696f6e730a4f726465726564446963740a71132952711458010000006b71155d711673752e"),
    (4, "800495b8000000000000007d94288c0161944b018c0162945d94284b014740040000000000008c0178944e8889658c0163942843027879944affffffff8a0800000000000000808a090000000000000080008a0d000000000000000000000000104d2c014a701101004a7fffffff74948c0164947d944b018c036f6e6594738c0165948f94284b014b02908c0167948c02c3a9948c026f64948c0b636f6c6c656374696f6e73948c0b4f726465726564446963749493942952948c016b945d9473752e"),
    (5, "800595b8000000000000007d94288c0161944b018c0162945d94284b014740040000000000008c0178944e8889658c0163942843027879944affffffff8a0800000000000000808a090000000000000080008a0d000000000000000000000000104d2c014a701101004a7fffffff74948c0164947d944b018c036f6e6594738c0165948f94284b014b02908c0167948c02c3a9948c026f64948c0b636f6c6c656374696f6e73948c0b4f726465726564446963749493942952948c016b945d9473752e"),
];

#[test]
fn python_pickles_of_every_protocol_read_as_python_wrote_them() {
    let want = "{'a': 1, 'b': [1, 2.5, 'x', None, True, False], \
        'c': (bytes(7879), -1, -9223372036854775808, big[00, 00, 00, 00, 00, 00, 00, 80, 00], \
        big[00, 00, 00, 00, 00, 00, 00, 00, 00, 00, 00, 00, 10], 300, 70000, -129), \
        'd': {1: 'one'}, 'e': {1, 2}, 'g': 'é', 'od': OrderedDict({'k': []})}";
    for (protocol, h) in PYTHON_PICKLES {
        let bytes = hex(h);
        let un = run(&bytes).unwrap_or_else(|e| panic!("protocol {protocol}: {e}"));
        assert_eq!(repr(&un, &un.root), want, "protocol {protocol}");
        assert_eq!(un.end, bytes.len());
        assert_eq!(un.protocol, if protocol < 2 { 0 } else { protocol });
    }
}

#[test]
fn frozenset_is_read_by_opcode_but_its_global_is_not_allowed() {
    // pickle.dumps(frozenset([3]), protocol=4) / protocol=2 (GLOBAL __builtin__ frozenset).
    let un = run(&hex("8004950600000000000000284b0391942e")).unwrap();
    assert_eq!(repr(&un, &un.root), "{3}");
    let e = run(&hex(
        "8002635f5f6275696c74696e5f5f0a66726f7a656e7365740a71005d71014b03618571025271032e",
    ))
    .unwrap_err();
    assert_eq!(e.code(), "ERR_UNSAFE_PICKLE");
    assert!(e.to_string().contains("'builtins.frozenset'"), "{e}");
}

#[test]
fn every_truncation_and_corruption_is_an_error_never_a_panic() {
    for (_, h) in PYTHON_PICKLES {
        let bytes = hex(h);
        for n in 0..bytes.len() {
            assert!(
                run(&bytes[..n]).is_err(),
                "a prefix of {n} bytes was accepted"
            );
        }
        for i in 0..bytes.len() {
            for x in [0x01u8, 0x80, 0xFF] {
                let mut b = bytes.clone();
                b[i] ^= x;
                let _ = run(&b);
            }
        }
    }
}

#[test]
fn marks_hide_the_stack_below_them() {
    // EMPTY_LIST MARK APPEND: the list is below the mark, so APPEND has nothing to append to.
    assert!(run(b"\x80\x02](K\x01a.").is_err());
    // POP with an empty frame pops the mark, as CPython does.
    let un = run(b"\x80\x02K\x07(0.").unwrap();
    assert_eq!(un.root, Value::Int(7));
    // STOP inside an open mark, POP_MARK without a mark.
    assert!(run(b"\x80\x02(K\x01.").is_err());
    assert!(run(b"\x80\x02K\x011.").is_err());
    // An empty stack at STOP.
    assert!(run(b"\x80\x02.").is_err());
}

#[test]
fn memo_slots_must_exist_and_memo_growth_is_bounded() {
    let e = run(b"\x80\x02h\x03.").unwrap_err();
    assert!(
        e.to_string().contains("memo slot 3 was never stored"),
        "{e}"
    );
    let e = run(b"\x80\x02j\xff\xff\xff\xff.").unwrap_err();
    assert!(e.to_string().contains("memo slot 4294967295"), "{e}");
    // A high slot number costs one entry, not a table of that size.
    let un = run(b"\x80\x02K\x05r\xfe\xff\xff\xff0j\xfe\xff\xff\xff.").unwrap();
    assert_eq!(un.root, Value::Int(5));
    let tiny = Limits {
        max_memo: 3,
        ..Limits::default()
    };
    let mut p = b"\x80\x04K\x01".to_vec();
    p.extend_from_slice(&[0x94; 4]);
    p.push(b'.');
    let e = unpickle(&p, 0, PersistentIds::Zip, tiny).unwrap_err();
    assert!(e.to_string().contains("more than 3 memo entries"), "{e}");
}

#[test]
fn limits_on_depth_stack_and_containers_hold() {
    let nested = |n: usize| {
        let mut p = b"\x80\x02".to_vec();
        p.extend(std::iter::repeat_n(b']', n));
        p.extend(std::iter::repeat_n(b'a', n - 1));
        p.push(b'.');
        p
    };
    let limits = Limits {
        max_depth: 5,
        ..Limits::default()
    };
    assert!(unpickle(&nested(5), 0, PersistentIds::Zip, limits).is_ok());
    let e = unpickle(&nested(6), 0, PersistentIds::Zip, limits).unwrap_err();
    assert!(e.to_string().contains("deeper than 5"), "{e}");
    // Nesting through tuples and dicts counts the same way.
    let e = unpickle(
        b"\x80\x02)\x85\x85\x85\x85\x85.",
        0,
        PersistentIds::Zip,
        limits,
    )
    .unwrap_err();
    assert!(e.to_string().contains("deeper than 5"), "{e}");
    // Siblings are not nesting: a tuple of six empty dicts is two levels deep.
    assert!(unpickle(b"\x80\x02(}}}}}}t.", 0, PersistentIds::Zip, limits).is_ok());
    let small = Limits {
        max_stack: 10,
        max_objects: 4,
        ..Limits::default()
    };
    let e = unpickle(b"\x80\x02NNNNNNNNNNNN.", 0, PersistentIds::Zip, small).unwrap_err();
    assert!(e.to_string().contains("more than 10 values"), "{e}");
    let e = unpickle(b"\x80\x02]]]]]....", 0, PersistentIds::Zip, small).unwrap_err();
    assert!(e.to_string().contains("more than 4 containers"), "{e}");
}

#[test]
fn lengths_are_checked_against_the_input_before_anything_is_allocated() {
    for p in [
        &b"\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x80."[..], // BINBYTES8 2^63
        b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.",      // BINUNICODE8 2^64-1
        b"\x80\x04\x96\x00\x00\x00\x00\x00\x00\x00\x01.",      // BYTEARRAY8 2^56
        b"\x80\x03B\xff\xff\xff\xff.",                         // BINBYTES 4 GiB
        b"\x80\x02X\x10\x00\x00\x00abc.",                      // BINUNICODE 16 of 4
        b"\x80\x02\x8b\xff\xff\xff\x7f.",                      // LONG4 2^31-1
        b"\x80\x02T\xff\xff\xff\xff.",                         // BINSTRING negative
    ] {
        let e = run(p).unwrap_err();
        assert!(
            matches!(e.code(), "ERR_INCOMPLETE_FILE" | "ERR_INVALID_HEADER"),
            "{e}"
        );
    }
    // FRAME lengths are advisory and never allocate.
    assert_eq!(
        run(b"\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xffK\x01.")
            .unwrap()
            .root,
        Value::Int(1)
    );
}

#[test]
fn big_and_negative_integers() {
    let cases: &[(&[u8], Value)] = &[
        (b"\x80\x02\x8a\x01\xff.", Value::Int(-1)),
        (b"\x80\x02\x8a\x00.", Value::Int(0)),
        (b"\x80\x02\x8a\x02\x7f\x00.", Value::Int(127)),
        (b"\x80\x02J\xff\xff\xff\xff.", Value::Int(-1)),
        (b"\x80\x02M\xff\xff.", Value::Int(65535)),
        (b"\x80\x02I01\n.", Value::Bool(true)),
        (b"\x80\x02I-42\n.", Value::Int(-42)),
        (
            b"\x80\x02L-9223372036854775809L\n.",
            Value::BigInt(std::rc::Rc::from(
                &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF][..],
            )),
        ),
        (
            b"\x80\x02L18446744073709551616L\n.",
            Value::BigInt(std::rc::Rc::from(&[0, 0, 0, 0, 0, 0, 0, 0, 1][..])),
        ),
        (b"\x80\x02F2.5\n.", Value::Float(2.5)),
    ];
    for (p, want) in cases {
        assert_eq!(&run(p).unwrap().root, want, "{p:?}");
    }
    // The legacy magic number, as torch pickles it.
    let magic = run(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.").unwrap();
    assert!(matches!(magic.root, Value::BigInt(ref b) if **b == legacy::LEGACY_MAGIC));
    // Decimal text beyond 256 digits is refused, not computed.
    let mut p = b"\x80\x02L".to_vec();
    p.extend(std::iter::repeat_n(b'9', 5000));
    p.extend_from_slice(b"\n.");
    assert!(run(&p).is_err());
}

#[test]
fn only_allowed_globals_and_calls_pass() {
    let cases: &[(&[u8], &str)] = &[
        (b"\x80\x02cos\nsystem\n.", "'os.system'"),
        (b"\x80\x02cposix\nsystem\n.", "'posix.system'"),
        (b"\x80\x02c__builtin__\neval\n.", "'builtins.eval'"),
        (b"\x80\x02cbuiltins\ngetattr\n.", "'builtins.getattr'"),
        (b"\x80\x02ctorch\nload\n.", "'torch.load'"),
        (
            b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93.",
            "'os.system'",
        ),
        (b"\x80\x02(X\x02\x00\x00\x00lsios\nsystem\n.", "'os.system'"),
        (b"\x80\x02ctorch\nfloat32\n)R.", "calls 'torch.float32'"),
        (
            b"\x80\x02ctorch\nFloatStorage\n)R.",
            "calls 'torch.FloatStorage'",
        ),
        (b"\x80\x02K\x01)R.", "calls (REDUCE) an int"),
        (b"\x80\x02ctorch\nSize\n)\x81}b.", "BUILD) on a tuple"),
        (b"\x80\x02}}b.", "BUILD) on a dict"),
        (b"\x80\x02X\x01\x00\x00\x00x)\x81.", "NEWOBJ"),
        (b"\x80\x02(ccollections\nOrderedDict\no.", "OBJ"),
        (b"\x80\x02ccollections\nOrderedDict\n)}\x92.", "NEWOBJ_EX"),
        (b"\x80\x02\x83\x01\x00.", "extension registry"),
        (b"\x80\x02X\x07\x00\x00\x00storageQ.", "not a tuple"),
        (
            b"\x80\x02(X\x06\x00\x00\x00moduletQ.",
            "persistent id other than",
        ),
    ];
    for (p, needle) in cases {
        let e = run(p).unwrap_err();
        assert!(
            e.to_string().contains(needle)
                && matches!(e.code(), "ERR_UNSAFE_PICKLE" | "ERR_INVALID_HEADER"),
            "{:?}: {} {e}",
            String::from_utf8_lossy(p),
            e.code()
        );
    }
    // What torch's safe loader itself evaluates: OrderedDict (with BUILD state), Counter,
    // set, bytearray, _codecs.encode, torch.Size, torch.device, a dtype.
    let ok: &[(&[u8], &str)] = &[
        (
            b"\x80\x02ccollections\nOrderedDict\n)R}b.",
            "OrderedDict({})",
        ),
        (b"\x80\x02ccollections\nCounter\n)R.", "OrderedDict({})"),
        (b"\x80\x02c__builtin__\nset\n]K\x01a\x85R.", "{1}"),
        (
            b"\x80\x02c__builtin__\nbytearray\nX\x02\x00\x00\x00hiX\x06\x00\x00\x00latin1\x86R.",
            "bytes(6869)",
        ),
        (
            b"\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00\xc3\xbfX\x06\x00\x00\x00latin1\x86R.",
            "bytes(ff)",
        ),
        (b"\x80\x02ctorch\nSize\nK\x02K\x03\x86\x85R.", "(2, 3)"),
        (
            b"\x80\x02ctorch\ndevice\nX\x03\x00\x00\x00cpu\x85R.",
            "opaque",
        ),
        (b"\x80\x02ctorch\nbfloat16\n.", "torch.bfloat16"),
    ];
    for (p, want) in ok {
        let un = run(p).unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(p)));
        assert_eq!(repr(&un, &un.root), *want);
    }
}

/// A torch zip checkpoint built here from a pickle and storages (as torch lays it out).
pub(crate) fn torch_zip(pkl: &[u8], storages: &[(&str, &[u8])]) -> Vec<u8> {
    torch_zip_of(
        zip_tests::stored("t/data.pkl", pkl),
        storages,
        zip_tests::stored,
    )
}

/// The same with the pickle member given and each storage made by `storage`.
fn torch_zip_of(
    pkl: zip_tests::Member,
    storages: &[(&str, &[u8])],
    storage: fn(&str, &[u8]) -> zip_tests::Member,
) -> Vec<u8> {
    let mut members = vec![pkl];
    members.extend(
        storages
            .iter()
            .map(|(k, d)| storage(&format!("t/data/{k}"), d)),
    );
    zip_tests::build(&members, None, false)
}

fn open_bytes(bytes: Vec<u8>) -> Result<PyTorchFile> {
    PyTorchFile::from_memory(Arc::new(Memory::Owned(bytes)))
}

/// `_rebuild_tensor_v2(('storage', FloatStorage, key, 'cpu', numel), offset, size, stride, False, OrderedDict())`.
pub(crate) fn tensor_pickle(
    key: &str,
    numel: u32,
    offset: u32,
    size: &[u32],
    stride: &[u32],
) -> Vec<u8> {
    let mut p =
        b"ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX"
            .to_vec();
    p.extend_from_slice(&(key.len() as u32).to_le_bytes());
    p.extend_from_slice(key.as_bytes());
    // BININT: a signed 32-bit int.
    let int = |p: &mut Vec<u8>, v: u32| {
        p.push(b'J');
        p.extend_from_slice(&v.to_le_bytes());
    };
    p.extend_from_slice(b"X\x03\x00\x00\x00cpu");
    int(&mut p, numel);
    p.extend_from_slice(b"tQ");
    int(&mut p, offset);
    for dims in [size, stride] {
        p.push(b'(');
        for &d in dims {
            int(&mut p, d);
        }
        p.push(b't');
    }
    p.extend_from_slice(b"\x89ccollections\nOrderedDict\n)RtR");
    p
}

/// A [`tensor_pickle`] in the legacy format: its persistent id ends with a view (`None`).
pub(crate) fn legacy_id(mut tensor: Vec<u8>) -> Vec<u8> {
    // After the location ('cpu') and the numel (BININT, 5 bytes).
    let location = (tensor.windows(8))
        .position(|w| w == b"X\x03\x00\x00\x00cpu")
        .unwrap();
    tensor.insert(location + 8 + 5, b'N');
    tensor
}

#[test]
fn names_flatten_dicts_lists_and_int_keys_and_skip_other_leaves() {
    let floats: Vec<u8> = (0..12).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let t = |off: u32| tensor_pickle("0", 12, off, &[2], &[1]);
    // {'sd': {'a': T, 3: [T, (T,)]}, 'epoch': 7, (1, 2): 'ignored'}
    let mut p = b"\x80\x02}(X\x02\x00\x00\x00sd}(X\x01\x00\x00\x00a".to_vec();
    p.extend(t(0));
    p.extend_from_slice(b"K\x03]");
    p.extend(t(2));
    p.push(b'a');
    p.extend(t(4));
    p.extend_from_slice(b"\x85au");
    p.extend_from_slice(b"X\x05\x00\x00\x00epochK\x07K\x01K\x02\x86X\x01\x00\x00\x00xu.");
    let f = open_bytes(torch_zip(&p, &[("0", &floats)])).unwrap();
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["sd.a", "sd.3.0", "sd.3.1.0"]);
    assert_eq!(f.fetch("sd.3.1.0").unwrap().as_slice(), &floats[16..24]);
    // A bare tensor.
    let mut p = b"\x80\x02".to_vec();
    p.extend(t(10));
    p.push(b'.');
    let f = open_bytes(torch_zip(&p, &[("0", &floats)])).unwrap();
    assert_eq!(f.tensors()[0].name, BARE_TENSOR_NAME);
    assert_eq!(
        f.fetch(BARE_TENSOR_NAME).unwrap().as_slice(),
        &floats[40..48]
    );
    // A tensor under a key that is neither a string nor an int.
    let mut p = b"\x80\x02}K\x01K\x02\x86".to_vec();
    p.extend(t(0));
    p.extend_from_slice(b"s.");
    let e = open_bytes(torch_zip(&p, &[("0", &floats)])).unwrap_err();
    assert!(e.to_string().contains("neither a string nor an int"), "{e}");
}

#[test]
fn views_are_checked_against_their_storage_at_open() {
    let floats: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let open = |size: &[u32], stride: &[u32], offset: u32| {
        let mut p = b"\x80\x02}X\x01\x00\x00\x00w".to_vec();
        p.extend(tensor_pickle("0", 6, offset, size, stride));
        p.extend_from_slice(b"s.");
        open_bytes(torch_zip(&p, &[("0", &floats)]))
    };
    assert!(open(&[2, 3], &[3, 1], 0).is_ok());
    assert!(open(&[3, 2], &[1, 3], 0).is_ok());
    assert!(open(&[6], &[1], 0).is_ok());
    assert!(open(&[5], &[1], 1).is_ok());
    assert!(
        open(&[0, 9], &[9, 1], 6).is_ok(),
        "empty views touch nothing"
    );
    for (size, stride, offset) in [
        (&[7u32][..], &[1u32][..], 0u32),
        (&[6], &[1], 1),
        (&[2, 3], &[3, 2], 0),
        (&[1], &[1], 6),
    ] {
        let e = open(size, stride, offset).unwrap_err();
        assert_eq!(
            e.code(),
            "ERR_SIZE_MISMATCH",
            "{size:?} {stride:?} {offset}: {e}"
        );
    }
    // Rank of size and stride must agree.
    assert!(open(&[2, 3], &[1], 0).is_err());
    // The transposed view reads back transposed.
    let f = open(&[3, 2], &[1, 3], 0).unwrap();
    let got: Vec<f32> = f
        .fetch("w")
        .unwrap()
        .as_slice()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
}

#[test]
fn a_storage_declared_two_ways_is_refused() {
    let floats = vec![0u8; 24];
    let mut p = b"\x80\x02}(X\x01\x00\x00\x00a".to_vec();
    p.extend(tensor_pickle("0", 6, 0, &[6], &[1]));
    p.extend_from_slice(b"X\x01\x00\x00\x00b");
    p.extend(tensor_pickle("0", 5, 0, &[5], &[1]));
    p.extend_from_slice(b"u.");
    let e = open_bytes(torch_zip(&p, &[("0", &floats)])).unwrap_err();
    assert!(
        e.to_string().contains("described two different ways"),
        "{e}"
    );
}

#[test]
fn a_deflated_storage_that_is_a_bomb_fails_when_read() {
    // A record that declares 24 bytes but inflates to 1 MiB.
    let mut p = b"\x80\x02}X\x01\x00\x00\x00w".to_vec();
    p.extend(tensor_pickle("0", 6, 0, &[6], &[1]));
    p.extend_from_slice(b"s.");
    let bomb = |name: &str, _: &[u8]| zip_tests::Member {
        usize: 24,
        crc: crate::format::zip::crc32(&[0; 24]),
        ..zip_tests::deflated(name, &vec![0u8; 1 << 20])
    };
    let bytes = torch_zip_of(zip_tests::stored("t/data.pkl", &p), &[("0", &[])], bomb);
    let f = open_bytes(bytes).unwrap();
    let e = f.fetch("w").err().expect("a bomb was read");
    assert!(
        e.to_string().contains("inflates to more than the 24 bytes"),
        "{e}"
    );
}

/// `{key: T, key: T, …}`: `n` pairs whose keys are memo references to one `key_len`-byte key.
fn shared_key_dict(key_len: usize, n: usize) -> Vec<u8> {
    let mut p = b"\x80\x02}(X".to_vec();
    p.extend_from_slice(&(key_len as u32).to_le_bytes());
    p.extend(std::iter::repeat_n(b'k', key_len));
    p.extend_from_slice(b"q\x01");
    p.extend(tensor_pickle("0", 1, 0, &[1], &[1]));
    p.extend_from_slice(b"q\x02");
    for _ in 0..n {
        p.extend_from_slice(b"h\x01h\x02");
    }
    p.extend_from_slice(b"u.");
    p
}

#[test]
fn names_are_bounded_before_they_are_built() {
    let one = [0u8; 4];
    let open = |p: &[u8]| open_bytes(torch_zip(p, &[("0", &one)]));
    // 100,000 names of 1 MiB each (100 GB): refused at the first, before it is built.
    let started = std::time::Instant::now();
    let e = open(&shared_key_dict(1 << 20, 100_000)).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_HEADER");
    assert!(
        e.to_string()
            .contains("tensor names too long (one would be 1048576 bytes, over 65536)"),
        "{e}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // 1,000 names of 60 KiB, each under the limit: refused once they total 16 MiB + 8 per
    // byte of pickle.
    let e = open(&shared_key_dict(60 << 10, 1_000)).unwrap_err();
    assert!(e.to_string().contains("tensor names too long (over"), "{e}");
    // A long key over no tensor names nothing, so it costs nothing.
    let mut p = b"\x80\x02}(X\x00\x00\x02\x00".to_vec();
    p.extend(std::iter::repeat_n(b'k', 1 << 17));
    p.extend_from_slice(b"]K\x01aX\x01\x00\x00\x00w");
    p.extend(tensor_pickle("0", 1, 0, &[1], &[1]));
    p.extend_from_slice(b"u.");
    let f = open(&p).unwrap();
    assert_eq!(f.tensors().len(), 1);
    assert_eq!(f.tensors()[0].name, "w");
}

#[test]
fn a_container_inside_itself_is_refused_without_walking_it() {
    let one = [0u8; 4];
    let open = |p: &[u8]| open_bytes(torch_zip(p, &[("0", &one)]));
    // A dict under a 256 KiB key of its own: a name per level, 1,000 levels deep, before.
    let mut p = b"\x80\x02}q\x00X\x00\x00\x04\x00".to_vec();
    p.extend(std::iter::repeat_n(b'k', 1 << 18));
    p.extend_from_slice(b"h\x00s.");
    let e = open(&p).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_HEADER");
    assert!(e.to_string().contains("a dict contains itself"), "{e}");
    // A list holding a tensor and itself.
    let mut p = b"\x80\x02]q\x00(".to_vec();
    p.extend(tensor_pickle("0", 1, 0, &[1], &[1]));
    p.extend_from_slice(b"h\x00e.");
    let e = open(&p).unwrap_err();
    assert!(e.to_string().contains("a list contains itself"), "{e}");
    // Sharing is no cycle: {'a': D, 'b': D} with D = {'w': T} names both paths.
    let mut p = b"\x80\x02}(X\x01\x00\x00\x00a}X\x01\x00\x00\x00w".to_vec();
    p.extend(tensor_pickle("0", 1, 0, &[1], &[1]));
    p.extend_from_slice(b"sq\x09X\x01\x00\x00\x00bh\x09u.");
    let f = open(&p).unwrap();
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a.w", "b.w"]);
}

#[test]
fn allowed_calls_copy_no_more_than_the_pickle_pays_for() {
    // A list L of 10,000 ints, then [f(L), f(L), …]: 7 bytes of pickle per copy of 240 KB.
    let copies = |global: &[u8], n: usize| {
        let mut p = b"\x80\x02]".to_vec();
        p.extend_from_slice(global);
        p.extend_from_slice(b"q\x010](");
        p.extend(std::iter::repeat_n(*b"K\x00", 10_000).flatten());
        p.extend_from_slice(b"eq\x020");
        for _ in 0..n {
            p.extend_from_slice(b"h\x01h\x02\x85Ra");
        }
        p.push(b'.');
        run(&p)
    };
    for global in [&b"c__builtin__\nset\n"[..], b"ctorch\nSize\n"] {
        assert!(copies(global, 2).is_ok());
        let e = copies(global, 200).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_HEADER");
        assert!(
            e.to_string().contains("allowed calls copy more than"),
            "{e}"
        );
    }
    // OrderedDict(D) over a shared dict of 10,000 items.
    let mut p = b"\x80\x02]ccollections\nOrderedDict\nq\x010}(".to_vec();
    p.extend(std::iter::repeat_n(*b"K\x00K\x00", 10_000).flatten());
    p.extend_from_slice(b"uq\x020");
    p.extend(std::iter::repeat_n(*b"h\x01h\x02\x85Ra", 200).flatten());
    p.push(b'.');
    assert!(run(&p)
        .unwrap_err()
        .to_string()
        .contains("allowed calls copy more than"));
    // bytearray(b) is b itself, not a copy.
    let un = run(b"\x80\x02]C\x03abcq\x01ac__builtin__\nbytearray\nh\x01\x85Ra.").unwrap();
    let Value::Obj(id) = un.root else { panic!() };
    let Object::List(items) = un.object(id) else {
        panic!()
    };
    let [Value::Bytes(a), Value::Bytes(b)] = items.as_slice() else {
        panic!("{items:?}")
    };
    assert!(std::rc::Rc::ptr_eq(a, b));
    // A call takes at most 8 arguments: the tuple is not copied to find out.
    let e = run(b"\x80\x02ctorch\ndevice\n(NNNNNNNNNtR.").unwrap_err();
    assert!(e.to_string().contains("9 arguments"), "{e}");
}

#[test]
fn decimal_integers_have_at_most_256_digits() {
    let long = |digits: usize| {
        let mut p = b"\x80\x02L".to_vec();
        p.extend(std::iter::repeat_n(b'9', digits));
        p.extend_from_slice(b"L\n.");
        run(&p)
    };
    assert!(matches!(long(256).unwrap().root, Value::BigInt(_)));
    let e = long(257).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_HEADER");
    assert!(e.to_string().contains("at most 256 digits"), "{e}");
}

#[test]
fn a_deflated_data_pkl_inflates_to_at_most_1_mib_plus_32_per_compressed_byte() {
    // 4 MiB of empty lists deflate to ~4 KB: refused before inflating.
    let mut lists = b"\x80\x02".to_vec();
    lists.extend(std::iter::repeat_n(b']', 4 << 20));
    lists.push(b'.');
    let bytes = torch_zip_of(
        zip_tests::deflated("t/data.pkl", &lists),
        &[],
        zip_tests::stored,
    );
    let e = open_bytes(bytes).unwrap_err();
    assert_eq!(e.code(), "ERR_SIZE_MISMATCH");
    assert!(
        e.to_string()
            .contains("the deflated \"t/data.pkl\" declares 4194307 bytes"),
        "{e}"
    );
    // A checkpoint's deflated pickle reads.
    let mut p = b"\x80\x02}X\x01\x00\x00\x00w".to_vec();
    p.extend(tensor_pickle("0", 1, 0, &[1], &[1]));
    p.extend_from_slice(b"s.");
    let bytes = torch_zip_of(
        zip_tests::deflated("t/data.pkl", &p),
        &[("0", &[0; 4])],
        zip_tests::deflated,
    );
    assert_eq!(open_bytes(bytes).unwrap().tensors()[0].name, "w");
}

#[test]
fn a_deflated_storage_that_several_tensors_view_is_inflated_once() {
    let floats: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut p = b"\x80\x02}(".to_vec();
    for (name, key, offset) in [("a", "0", 0), ("b", "0", 2), ("c", "0", 4), ("d", "1", 0)] {
        p.extend_from_slice(b"X\x01\x00\x00\x00");
        p.extend_from_slice(name.as_bytes());
        p.extend(tensor_pickle(key, 6, offset, &[2], &[1]));
    }
    p.extend_from_slice(b"u.");
    let bytes = torch_zip_of(
        zip_tests::stored("t/data.pkl", &p),
        &[("0", &floats), ("1", &floats)],
        zip_tests::deflated,
    );
    let f = open_bytes(bytes).unwrap();
    // Storage 0 (three views) has a slot, storage 1 (one view) none.
    assert_eq!(f.shared_inflated.keys().copied().collect::<Vec<_>>(), [0]);
    let slot = || f.shared_inflated[&0].lock().unwrap().clone();
    assert!(slot().is_none(), "inflated at open");
    assert_eq!(f.fetch("a").unwrap().as_slice(), &floats[0..8]);
    let first = slot().expect("kept after the first fetch");
    assert_eq!(f.fetch("b").unwrap().as_slice(), &floats[8..16]);
    assert_eq!(f.fetch("c").unwrap().as_slice(), &floats[16..24]);
    assert!(Arc::ptr_eq(&first, &slot().unwrap()), "inflated again");
    assert_eq!(f.fetch("d").unwrap().as_slice(), &floats[0..8]);
    // What such storages may hold inflated, per file.
    let storage = |len: u64| Storage {
        key: "0".into(),
        bytes: StoredBytes::Deflated(ZipEntry {
            name: "t/data/0".into(),
            method: Method::Deflate,
            data_start: 0,
            compressed_len: len / 1000,
            uncompressed_len: len,
            crc32: 0,
            header_start: 0,
        }),
        len,
    };
    let view = |storage: usize| Layout {
        storage,
        window: 0,
        offset: 0,
        strides: vec![1],
        conj: false,
        neg: false,
    };
    let layouts = [view(0), view(0), view(1), view(1)];
    let half = MAX_SHARED_INFLATED_BYTES / 2;
    assert!(shared_deflated(&[storage(half), storage(half)], &layouts).is_ok());
    let e = shared_deflated(&[storage(half), storage(half + 1)], &layouts).unwrap_err();
    assert_eq!(e.code(), "ERR_SIZE_MISMATCH");
    assert!(e.to_string().contains("kept inflated per file"), "{e}");
}

#[test]
fn stride_0_expansion_is_bounded_per_file() {
    let n = (600u32 << 20) / 4;
    let open = |tensors: usize| {
        let mut p = b"\x80\x02}(".to_vec();
        for name in ["a", "b"].iter().take(tensors) {
            p.extend_from_slice(b"X\x01\x00\x00\x00");
            p.extend_from_slice(name.as_bytes());
            p.extend(tensor_pickle("0", 1, 0, &[n], &[0]));
        }
        p.extend_from_slice(b"u.");
        open_bytes(torch_zip(&p, &[("0", &[0; 4])]))
    };
    assert_eq!(open(1).unwrap().tensors()[0].stored_len, 600 << 20);
    let e = open(2).unwrap_err();
    assert_eq!(e.code(), "ERR_SIZE_MISMATCH");
    assert!(
        e.to_string().contains("expand, with this one (629145600 bytes from 4 it reads), to more than 1073741824 bytes"),
        "{e}"
    );
}

#[test]
fn a_legacy_checkpoint_of_another_version_names_the_number() {
    let mut b = b"\x80\x02\x8a\x0a".to_vec();
    b.extend_from_slice(&legacy::LEGACY_MAGIC);
    b.push(b'.');
    b.extend_from_slice(b"\x80\x02M\xea\x03.");
    let e = open_bytes(b).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_HEADER");
    assert!(
        e.to_string()
            .contains("legacy checkpoint: protocol version 1002, not 1001"),
        "{e}"
    );
}

/// A legacy checkpoint as torch writes it: the magic number, protocol version and sys-info
/// pickles, `obj` (the object's pickle), the key list, then per storage its element count
/// (`counts`, as written) and bytes.
pub(crate) fn legacy_file(obj: &[u8], storages: &[(&str, i64, &[u8])]) -> Vec<u8> {
    let mut b = b"\x80\x02\x8a\x0a".to_vec();
    b.extend_from_slice(&legacy::LEGACY_MAGIC);
    b.push(b'.');
    b.extend_from_slice(b"\x80\x02M\xe9\x03.");
    b.extend_from_slice(b"\x80\x02}(X\x0d\x00\x00\x00little_endian\x88u.");
    b.extend_from_slice(obj);
    b.extend_from_slice(b"\x80\x02](");
    for (key, _, _) in storages {
        b.push(b'X');
        b.extend_from_slice(&(key.len() as u32).to_le_bytes());
        b.extend_from_slice(key.as_bytes());
    }
    b.extend_from_slice(b"e.");
    for (_, count, data) in storages {
        b.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(data);
    }
    b
}

/// `{"w": 6 floats of storage "0", "b": 2 floats of storage "1" from element 1}`, the counts
/// as given.
fn small_legacy(counts: [i64; 2], data: [&[u8]; 2]) -> Vec<u8> {
    let mut p = b"\x80\x02}(X\x01\x00\x00\x00w".to_vec();
    p.extend(legacy_id(tensor_pickle("0", 6, 0, &[2, 3], &[3, 1])));
    p.extend_from_slice(b"X\x01\x00\x00\x00b");
    p.extend(legacy_id(tensor_pickle("1", 3, 1, &[2], &[1])));
    p.extend_from_slice(b"u.");
    legacy_file(&p, &[("0", counts[0], data[0]), ("1", counts[1], data[1])])
}

#[test]
fn a_legacy_checkpoint_places_its_storages_from_its_pickles() {
    let w: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let b: Vec<u8> = (0..3)
        .flat_map(|i| (10.0 + i as f32).to_le_bytes())
        .collect();
    let file = small_legacy([6, 3], [&w, &b]);
    let len = file.len() as u64;
    let head = LegacyHead::parse(&file).unwrap();
    // The counts' places: just past the key list, then past the first storage's 8 + 24 bytes.
    let first = len - (8 + 24 + 8 + 12);
    let none = |_: u64| None;
    assert_eq!(head.unread_counts(len, &none).unwrap(), [first, first + 32]);
    // With the counts held, nothing is unread and the file opens at those places.
    let held = |at: u64| file.get(at as usize..at as usize + 8)?.try_into().ok();
    assert!(head.unread_counts(len, &held).unwrap().is_empty());
    let f = head
        .open(Arc::new(Memory::Owned(Vec::new())), len, &held)
        .unwrap();
    assert_eq!(f.container(), Container::Legacy);
    assert_eq!(f.file_range("w"), Some((first + 8..first + 32, true)));
    assert_eq!(
        f.file_range("b"),
        Some((first + 40 + 4..first + 40 + 12, true))
    );
    assert_eq!(f.from_range("b", &b[4..]).unwrap(), &b[4..]);
    // Opened from memory, the same tensors (the local reader).
    let local = open_bytes(file.clone()).unwrap();
    assert_eq!(local.fetch("w").unwrap().as_slice(), &w[..]);
    assert_eq!(local.fetch("b").unwrap().as_slice(), &b[4..]);
    // The pickles alone parse from the file's first bytes; cut inside them, they do not.
    assert!(LegacyHead::parse(&file[..first as usize]).is_ok());
    let e = LegacyHead::parse(&file[..first as usize - 1])
        .err()
        .unwrap();
    assert_eq!(e.code(), "ERR_INCOMPLETE_FILE", "{e}");
}

#[test]
fn a_legacy_checkpoint_whose_counts_lie_or_whose_storages_are_cut_is_refused() {
    let w = [0u8; 24];
    let b = [0u8; 12];
    let cases: [(&str, Vec<u8>, &str, &str); 4] = [
        (
            "a count that is not the pickle's",
            small_legacy([6, 4], [&w, &b]),
            "ERR_SIZE_MISMATCH",
            "storage '1' should hold 3 elements, the file says 4",
        ),
        (
            "a negative count",
            small_legacy([-6, 3], [&w, &b]),
            "ERR_SIZE_MISMATCH",
            "storage '0' should hold 6 elements, the file says -6",
        ),
        (
            "a storage past the end",
            small_legacy([6, 3], [&w, &b[..11]]),
            "ERR_INCOMPLETE_FILE",
            "storage '1' (12 bytes) runs past the end of the file",
        ),
        (
            "a count past the end",
            {
                let mut f = small_legacy([6, 3], [&w, &b]);
                f.truncate(f.len() - 12 - 5);
                f
            },
            "ERR_INCOMPLETE_FILE",
            "storage '1' is missing (file truncated)",
        ),
    ];
    for (what, file, code, message) in cases {
        let e = open_bytes(file.clone()).err().unwrap();
        assert_eq!(e.code(), code, "{what}: {e}");
        assert!(e.to_string().contains(message), "{what}: {e}");
        // Read by ranges: the counts it lacks are asked for before any verdict that a count
        // read first would change; once held, the same error.
        let len = file.len() as u64;
        let head = LegacyHead::parse(&file).unwrap();
        let unread = head.unread_counts(len, &|_| None);
        if let Ok(unread) = &unread {
            assert!(unread.iter().all(|&at| at + 8 <= len), "{what}: {unread:?}");
        }
        let held = |at: u64| file.get(at as usize..at as usize + 8)?.try_into().ok();
        let remote = head.unread_counts(len, &held).err().unwrap();
        assert_eq!(
            (remote.code(), remote.detail()),
            (e.code(), e.detail()),
            "{what}"
        );
    }
    // A count that lies about the first storage comes before the cut second one, as locally.
    let file = small_legacy([7, 3], [&w, &b[..11]]);
    let e = open_bytes(file.clone()).err().unwrap();
    assert!(
        e.to_string()
            .contains("should hold 6 elements, the file says 7"),
        "{e}"
    );
    let head = LegacyHead::parse(&file).unwrap();
    // Both counts come before the cut storage's end: both are asked for.
    assert_eq!(
        head.unread_counts(file.len() as u64, &|_| None)
            .unwrap()
            .len(),
        2
    );
}
