//! A weights-only unpickler: a pickle (protocols 0–5) is run on a stack machine that builds
//! plain data — numbers, strings, lists, tuples, dicts — and tensor *descriptions*. Globals
//! stay symbolic: `GLOBAL`/`STACK_GLOBAL` look the name up in the allow-list
//! ([`super::allow`]) and anything else is ERR_UNSAFE_PICKLE naming it; `REDUCE`/`NEWOBJ`
//! only "call" allowed rebuild functions and containers, which this module evaluates
//! itself. Nothing is imported, nothing is executed.
//!
//! Every number read from the pickle is checked before it sizes anything: string and bytes
//! lengths against the bytes that remain (a `BINBYTES8` of 2^63 in a tiny file is refused
//! before any allocation), memo slots by lookup (a missing slot is an error, not a default),
//! nesting depth by [`Limits::max_depth`] (containers live in an arena and are never
//! recursed into while reading, so 100,000 nested lists are a clean error, not a stack
//! overflow), stack, memo and object counts by [`Limits`]. Memory stays proportional to the
//! pickle's length: what an allowed call copies out of its arguments (`set(x)`, `torch.Size(x)`,
//! `OrderedDict(x)`, `_codecs.encode`, a tensor's size and stride) is charged against
//! [`COPY_BASE_BYTES`] plus [`COPY_BYTES_PER_BYTE`] per byte of pickle read so far, a call
//! takes at most [`MAX_CALL_ARGS`] arguments, `bytearray(b)` shares `b`, and a decimal
//! integer (protocol 0/1 `LONG`) has at most [`MAX_DECIMAL_DIGITS`] digits.

use super::allow::{self, RebuildFn, Role, StorageKind};
use crate::dtype::DType;
use crate::error::{CoreError, Result};
use std::collections::HashMap;
use std::rc::Rc;

/// What allowed calls may copy out of their arguments before any pickle byte pays for it.
pub const COPY_BASE_BYTES: u64 = 1 << 20;
/// What allowed calls may copy per byte of pickle read: a checkpoint copies a tensor's size
/// and stride (about 32 bytes for ~120 bytes of pickle), calls on containers copy little.
pub const COPY_BYTES_PER_BYTE: u64 = 4;
/// Most arguments an allowed call, a persistent id or a storage view takes
/// (`_rebuild_tensor_v3` with metadata: 8).
pub const MAX_CALL_ARGS: usize = 8;
/// Most digits of a decimal integer (protocol 0/1 `LONG`): the conversion is quadratic, and
/// no size, offset or magic number of a checkpoint needs more than 25.
pub const MAX_DECIMAL_DIGITS: usize = 256;

/// Bounds on what one pickle may build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of containers (Python's own pickler stops near 1,000).
    pub max_depth: u32,
    /// Values on the stack, marks included.
    pub max_stack: usize,
    /// Memo entries.
    pub max_memo: usize,
    /// Containers built.
    pub max_objects: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // Python's pickler batches containers 1,000 items per APPENDS/SETITEMS, so a real
        // stack stays small; memo entries and containers grow with the checkpoint (~15 and ~5
        // per tensor): 8 Mi of each serves half a million tensors.
        Limits {
            max_depth: 1000,
            max_stack: 1 << 20,
            max_memo: 1 << 23,
            max_objects: 1 << 23,
        }
    }
}

/// A value on the stack. Containers are indices into the arena, so copies are cheap and
/// sharing (memo references) behaves as in Python.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer beyond 64 bits: little-endian two's complement bytes.
    BigInt(Rc<[u8]>),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    Obj(usize),
    /// An allowed global: index into [`Unpickled::globals`].
    Global(usize),
    Storage(usize),
    Tensor(usize),
    /// A value that means nothing for tensor data (`torch.device('cpu')`, a layout, …).
    Opaque(&'static str),
}

/// A container in the arena.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// A dict; `ordered` for `collections.OrderedDict`/`Counter` (the only dicts `BUILD`
    /// may touch, as in torch).
    Dict {
        ordered: bool,
        items: Vec<(Value, Value)>,
    },
    Set(Vec<Value>),
}

impl Object {
    /// Its items (a dict's pairs).
    pub fn len(&self) -> usize {
        match self {
            Object::List(v) | Object::Tuple(v) | Object::Set(v) => v.len(),
            Object::Dict { items, .. } => items.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn kind(&self) -> &'static str {
        match self {
            Object::List(_) => "a list",
            Object::Tuple(_) => "a tuple",
            Object::Dict { .. } => "a dict",
            Object::Set(_) => "a set",
        }
    }
}

#[derive(Debug, Clone)]
struct Node {
    object: Object,
    depth: u32,
}

/// An allowed global the pickle named.
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalRef {
    pub path: String,
    pub role: Role,
}

/// The element type of a storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageElem {
    Typed(DType),
    /// `torch.storage.UntypedStorage`: bytes.
    Bytes,
}

impl StorageElem {
    pub fn size(self) -> u64 {
        match self {
            StorageElem::Typed(d) => d.size().unwrap_or(1) as u64,
            StorageElem::Bytes => 1,
        }
    }
    /// The dtype `_rebuild_tensor_v2` gives tensors over this storage.
    pub fn dtype(self) -> DType {
        match self {
            StorageElem::Typed(d) => d,
            StorageElem::Bytes => DType::U8,
        }
    }
}

/// A storage as the pickle's persistent ids describe it: a window (a legacy view, or the
/// whole) of the bytes stored under `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageDecl {
    pub key: String,
    pub elem: StorageElem,
    /// Elements of the whole stored storage (of `elem`).
    pub numel: u64,
    /// The window tensors see, in bytes from the start of the stored storage.
    pub byte_offset: u64,
    pub byte_len: u64,
}

/// A tensor: a strided view of a storage, validated to lie within it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDecl {
    pub storage: usize,
    pub dtype: DType,
    /// In elements of `dtype`, from the start of the storage's window.
    pub offset: u64,
    pub shape: Vec<u64>,
    pub stride: Vec<u64>,
    /// torch's lazy conjugate / negative bits (`metadata` of `_rebuild_tensor_v2`).
    pub conj: bool,
    pub neg: bool,
}

/// What persistent ids look like in this pickle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistentIds {
    /// None allowed (the small pickles of the legacy header).
    Refused,
    /// `('storage', type, key, location, numel)`: the zip format.
    Zip,
    /// `('storage', type, root_key, location, numel, view)`: the legacy format.
    Legacy,
}

/// The result of reading one pickle.
#[derive(Debug, Clone)]
pub struct Unpickled {
    pub root: Value,
    nodes: Vec<Node>,
    pub globals: Vec<GlobalRef>,
    pub storages: Vec<StorageDecl>,
    pub tensors: Vec<TensorDecl>,
    /// Offset just past the `STOP` opcode.
    pub end: usize,
    /// Bytes of pickle read (from its start to just past `STOP`).
    pub len: usize,
    /// The `PROTO` opcode's protocol (0 when absent).
    pub protocol: u8,
}

impl Unpickled {
    pub fn object(&self, id: usize) -> &Object {
        &self.nodes[id].object
    }
    pub fn objects_len(&self) -> usize {
        self.nodes.len()
    }
}

fn malformed(at: usize, message: impl std::fmt::Display) -> CoreError {
    CoreError::invalid_header(format!("pickle: {message} (at byte {at})"))
}

fn unsafe_global(path: &str) -> CoreError {
    CoreError::unsafe_pickle(format!(
        "the pickle names the global '{path}', which is not in the weights-only allow-list; nothing was executed"
    ))
}

/// Run the pickle that starts at `start` in `data`.
pub fn unpickle(
    data: &[u8],
    start: usize,
    ids: PersistentIds,
    limits: Limits,
) -> Result<Unpickled> {
    let mut m = Machine {
        data,
        start,
        pos: start,
        op_at: start,
        copied: 0,
        ids,
        limits,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        nodes: Vec::new(),
        globals: Vec::new(),
        global_index: HashMap::new(),
        storages: Vec::new(),
        storage_index: HashMap::new(),
        storage_bytes: HashMap::new(),
        tensors: Vec::new(),
        protocol: 0,
    };
    let root = m.run()?;
    Ok(Unpickled {
        root,
        nodes: m.nodes,
        globals: m.globals,
        storages: m.storages,
        tensors: m.tensors,
        end: m.pos,
        len: m.pos - start,
        protocol: m.protocol,
    })
}

struct Machine<'a> {
    data: &'a [u8],
    start: usize,
    pos: usize,
    op_at: usize,
    /// Bytes allowed calls have copied out of their arguments (see [`Machine::charge`]).
    copied: u64,
    ids: PersistentIds,
    limits: Limits,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: HashMap<u32, Value>,
    nodes: Vec<Node>,
    globals: Vec<GlobalRef>,
    global_index: HashMap<String, usize>,
    storages: Vec<StorageDecl>,
    storage_index: HashMap<(String, Option<String>), usize>,
    storage_bytes: HashMap<String, u64>,
    tensors: Vec<TensorDecl>,
    protocol: u8,
}

// Opcodes (CPython Lib/pickle.py).
mod op {
    pub const MARK: u8 = b'(';
    pub const STOP: u8 = b'.';
    pub const POP: u8 = b'0';
    pub const POP_MARK: u8 = b'1';
    pub const DUP: u8 = b'2';
    pub const FLOAT: u8 = b'F';
    pub const INT: u8 = b'I';
    pub const BININT: u8 = b'J';
    pub const BININT1: u8 = b'K';
    pub const LONG: u8 = b'L';
    pub const BININT2: u8 = b'M';
    pub const NONE: u8 = b'N';
    pub const PERSID: u8 = b'P';
    pub const BINPERSID: u8 = b'Q';
    pub const REDUCE: u8 = b'R';
    pub const STRING: u8 = b'S';
    pub const BINSTRING: u8 = b'T';
    pub const SHORT_BINSTRING: u8 = b'U';
    pub const UNICODE: u8 = b'V';
    pub const BINUNICODE: u8 = b'X';
    pub const APPEND: u8 = b'a';
    pub const BUILD: u8 = b'b';
    pub const GLOBAL: u8 = b'c';
    pub const DICT: u8 = b'd';
    pub const EMPTY_DICT: u8 = b'}';
    pub const APPENDS: u8 = b'e';
    pub const GET: u8 = b'g';
    pub const BINGET: u8 = b'h';
    pub const INST: u8 = b'i';
    pub const LONG_BINGET: u8 = b'j';
    pub const LIST: u8 = b'l';
    pub const EMPTY_LIST: u8 = b']';
    pub const OBJ: u8 = b'o';
    pub const PUT: u8 = b'p';
    pub const BINPUT: u8 = b'q';
    pub const LONG_BINPUT: u8 = b'r';
    pub const SETITEM: u8 = b's';
    pub const TUPLE: u8 = b't';
    pub const EMPTY_TUPLE: u8 = b')';
    pub const SETITEMS: u8 = b'u';
    pub const BINFLOAT: u8 = b'G';
    pub const PROTO: u8 = 0x80;
    pub const NEWOBJ: u8 = 0x81;
    pub const EXT1: u8 = 0x82;
    pub const EXT2: u8 = 0x83;
    pub const EXT4: u8 = 0x84;
    pub const TUPLE1: u8 = 0x85;
    pub const TUPLE2: u8 = 0x86;
    pub const TUPLE3: u8 = 0x87;
    pub const NEWTRUE: u8 = 0x88;
    pub const NEWFALSE: u8 = 0x89;
    pub const LONG1: u8 = 0x8a;
    pub const LONG4: u8 = 0x8b;
    pub const BINBYTES: u8 = b'B';
    pub const SHORT_BINBYTES: u8 = b'C';
    pub const SHORT_BINUNICODE: u8 = 0x8c;
    pub const BINUNICODE8: u8 = 0x8d;
    pub const BINBYTES8: u8 = 0x8e;
    pub const EMPTY_SET: u8 = 0x8f;
    pub const ADDITEMS: u8 = 0x90;
    pub const FROZENSET: u8 = 0x91;
    pub const NEWOBJ_EX: u8 = 0x92;
    pub const STACK_GLOBAL: u8 = 0x93;
    pub const MEMOIZE: u8 = 0x94;
    pub const FRAME: u8 = 0x95;
    pub const BYTEARRAY8: u8 = 0x96;
    pub const NEXT_BUFFER: u8 = 0x97;
    pub const READONLY_BUFFER: u8 = 0x98;
}

impl<'a> Machine<'a> {
    fn err(&self, message: impl std::fmt::Display) -> CoreError {
        malformed(self.op_at, message)
    }

    // ---- input ------------------------------------------------------------------------

    fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        let left = (self.data.len() - self.pos) as u64;
        if n > left {
            return Err(CoreError::incomplete_file(format!(
                "pickle: an opcode at byte {} wants {n} bytes, only {left} remain",
                self.op_at
            )));
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// A text line (protocol 0 arguments), without its newline.
    fn line(&mut self) -> Result<&'a str> {
        let rest = &self.data[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| CoreError::incomplete_file("pickle: a text argument has no newline"))?;
        self.pos += n + 1;
        std::str::from_utf8(&rest[..n]).map_err(|_| self.err("a text argument is not UTF-8"))
    }
    fn text(&self, bytes: &[u8]) -> Result<Rc<str>> {
        std::str::from_utf8(bytes)
            .map(Rc::from)
            .map_err(|_| self.err("a string is not valid UTF-8"))
    }

    // ---- stack ------------------------------------------------------------------------

    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }
    fn push(&mut self, v: Value) -> Result<()> {
        if self.stack.len() + self.marks.len() >= self.limits.max_stack {
            return Err(self.err(format!(
                "more than {} values on the stack",
                self.limits.max_stack
            )));
        }
        self.stack.push(v);
        Ok(())
    }
    fn pop(&mut self) -> Result<Value> {
        if self.stack.len() <= self.floor() {
            return Err(self.err("stack underflow"));
        }
        Ok(self.stack.pop().unwrap_or(Value::None))
    }
    fn top(&self) -> Result<&Value> {
        if self.stack.len() <= self.floor() {
            return Err(self.err("stack underflow"));
        }
        self.stack.last().ok_or_else(|| self.err("stack underflow"))
    }
    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.err("no MARK to pop to"))?;
        Ok(self.stack.split_off(m.min(self.stack.len())))
    }

    // ---- arena ------------------------------------------------------------------------

    fn depth_of(&self, v: &Value) -> u32 {
        match v {
            Value::Obj(id) => self.nodes[*id].depth,
            _ => 0,
        }
    }
    fn new_object(&mut self, object: Object) -> Result<Value> {
        if self.nodes.len() >= self.limits.max_objects {
            return Err(self.err(format!("more than {} containers", self.limits.max_objects)));
        }
        let children = match &object {
            Object::List(v) | Object::Tuple(v) | Object::Set(v) => {
                v.iter().map(|x| self.depth_of(x)).max()
            }
            Object::Dict { items, .. } => items
                .iter()
                .map(|(k, x)| self.depth_of(k).max(self.depth_of(x)))
                .max(),
        };
        let depth = children.map_or(1, |d| d + 1);
        self.check_depth(depth)?;
        self.nodes.push(Node { object, depth });
        Ok(Value::Obj(self.nodes.len() - 1))
    }
    fn check_depth(&self, depth: u32) -> Result<()> {
        if depth > self.limits.max_depth {
            return Err(self.err(format!(
                "containers nested deeper than {} levels",
                self.limits.max_depth
            )));
        }
        Ok(())
    }
    /// Record that `child` now lives inside container `id`.
    fn deepen(&mut self, id: usize, child_depth: u32) -> Result<()> {
        let d = child_depth.saturating_add(1);
        self.check_depth(d)?;
        let node = &mut self.nodes[id];
        node.depth = node.depth.max(d);
        Ok(())
    }
    fn describe(&self, v: &Value) -> String {
        match v {
            Value::None => "None".into(),
            Value::Bool(_) => "a bool".into(),
            Value::Int(_) | Value::BigInt(_) => "an int".into(),
            Value::Float(_) => "a float".into(),
            Value::Str(_) => "a str".into(),
            Value::Bytes(_) => "bytes".into(),
            Value::Obj(id) => self.nodes[*id].object.kind().into(),
            Value::Global(g) => format!("'{}'", self.globals[*g].path),
            Value::Storage(_) => "a storage".into(),
            Value::Tensor(_) => "a tensor".into(),
            Value::Opaque(what) => (*what).into(),
        }
    }

    // ---- the loop ---------------------------------------------------------------------

    fn run(&mut self) -> Result<Value> {
        loop {
            self.op_at = self.pos;
            let code = self.u8()?;
            match code {
                op::PROTO => {
                    let p = self.u8()?;
                    if p > 5 {
                        return Err(self.err(format!("unsupported pickle protocol {p}")));
                    }
                    self.protocol = p;
                }
                op::FRAME => {
                    // Framing only groups opcodes for buffered reads; the content is the same.
                    self.u64()?;
                }
                op::STOP => {
                    if !self.marks.is_empty() {
                        return Err(self.err("STOP inside an open MARK"));
                    }
                    return self.pop();
                }
                op::MARK => {
                    if self.stack.len() + self.marks.len() >= self.limits.max_stack {
                        return Err(self.err("too many marks"));
                    }
                    self.marks.push(self.stack.len());
                }
                op::POP => {
                    if self.stack.len() > self.floor() {
                        self.pop()?;
                    } else {
                        self.pop_mark()?;
                    }
                }
                op::POP_MARK => {
                    self.pop_mark()?;
                }
                op::DUP => {
                    let v = self.top()?.clone();
                    self.push(v)?;
                }
                // Numbers.
                op::NONE => self.push(Value::None)?,
                op::NEWTRUE => self.push(Value::Bool(true))?,
                op::NEWFALSE => self.push(Value::Bool(false))?,
                op::BININT => {
                    let v = self.u32()? as i32;
                    self.push(Value::Int(v as i64))?
                }
                op::BININT1 => {
                    let v = self.u8()?;
                    self.push(Value::Int(v as i64))?
                }
                op::BININT2 => {
                    let v = self.u16()?;
                    self.push(Value::Int(v as i64))?
                }
                op::INT => {
                    let line = self.line()?;
                    let v = match line {
                        "00" => Value::Bool(false),
                        "01" => Value::Bool(true),
                        s => Value::Int(s.parse().map_err(|_| self.err("bad INT argument"))?),
                    };
                    self.push(v)?
                }
                op::LONG => {
                    let line = self.line()?;
                    let s = line.strip_suffix('L').unwrap_or(line);
                    let v = match s.parse() {
                        Ok(v) => Value::Int(v),
                        Err(_) => self.decimal_long(s)?,
                    };
                    self.push(v)?
                }
                op::LONG1 => {
                    let n = self.u8()? as u64;
                    let b = self.take(n)?;
                    self.push(long(b))?
                }
                op::LONG4 => {
                    let n = self.u32()? as i32;
                    if n < 0 {
                        return Err(self.err("LONG4 with a negative length"));
                    }
                    let b = self.take(n as u64)?;
                    self.push(long(b))?
                }
                op::FLOAT => {
                    let line = self.line()?;
                    let v = line.parse().map_err(|_| self.err("bad FLOAT argument"))?;
                    self.push(Value::Float(v))?
                }
                op::BINFLOAT => {
                    let b = self.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    self.push(Value::Float(f64::from_be_bytes(a)))?
                }
                // Strings and bytes: lengths checked against the input before any copy.
                op::BINUNICODE => {
                    let n = self.u32()? as u64;
                    let b = self.take(n)?;
                    let s = self.text(b)?;
                    self.push(Value::Str(s))?
                }
                op::SHORT_BINUNICODE => {
                    let n = self.u8()? as u64;
                    let b = self.take(n)?;
                    let s = self.text(b)?;
                    self.push(Value::Str(s))?
                }
                op::BINUNICODE8 => {
                    let n = self.u64()?;
                    let b = self.take(n)?;
                    let s = self.text(b)?;
                    self.push(Value::Str(s))?
                }
                // Python 2 `str`: torch.load decodes them as UTF-8.
                op::BINSTRING => {
                    let n = self.u32()? as i32;
                    if n < 0 {
                        return Err(self.err("BINSTRING with a negative length"));
                    }
                    let b = self.take(n as u64)?;
                    let s = self.text(b)?;
                    self.push(Value::Str(s))?
                }
                op::SHORT_BINSTRING => {
                    let n = self.u8()? as u64;
                    let b = self.take(n)?;
                    let s = self.text(b)?;
                    self.push(Value::Str(s))?
                }
                op::BINBYTES => {
                    let n = self.u32()? as u64;
                    let b = self.take(n)?;
                    self.push(Value::Bytes(Rc::from(b)))?
                }
                op::SHORT_BINBYTES => {
                    let n = self.u8()? as u64;
                    let b = self.take(n)?;
                    self.push(Value::Bytes(Rc::from(b)))?
                }
                op::BINBYTES8 | op::BYTEARRAY8 => {
                    let n = self.u64()?;
                    let b = self.take(n)?;
                    self.push(Value::Bytes(Rc::from(b)))?
                }
                op::STRING | op::UNICODE => {
                    return Err(self.err(
                        "protocol 0 quoted strings are not read (torch writes protocol 2 or later)",
                    ))
                }
                // Containers.
                op::EMPTY_LIST => {
                    let v = self.new_object(Object::List(Vec::new()))?;
                    self.push(v)?
                }
                op::EMPTY_TUPLE => {
                    let v = self.new_object(Object::Tuple(Vec::new()))?;
                    self.push(v)?
                }
                op::EMPTY_DICT => {
                    let v = self.new_object(Object::Dict {
                        ordered: false,
                        items: Vec::new(),
                    })?;
                    self.push(v)?
                }
                op::EMPTY_SET => {
                    let v = self.new_object(Object::Set(Vec::new()))?;
                    self.push(v)?
                }
                op::LIST => {
                    let items = self.pop_mark()?;
                    let v = self.new_object(Object::List(items))?;
                    self.push(v)?
                }
                op::TUPLE => {
                    let items = self.pop_mark()?;
                    let v = self.new_object(Object::Tuple(items))?;
                    self.push(v)?
                }
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                    let n = (code - op::TUPLE1 + 1) as usize;
                    if self.stack.len() < self.floor() + n {
                        return Err(self.err("stack underflow"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    let v = self.new_object(Object::Tuple(items))?;
                    self.push(v)?
                }
                op::FROZENSET => {
                    let items = self.pop_mark()?;
                    let v = self.new_object(Object::Set(items))?;
                    self.push(v)?
                }
                op::DICT => {
                    let items = self.pop_mark()?;
                    let pairs = self.pairs(items)?;
                    let v = self.new_object(Object::Dict {
                        ordered: false,
                        items: pairs,
                    })?;
                    self.push(v)?
                }
                op::APPEND => {
                    let item = self.pop()?;
                    self.extend_list(vec![item], "APPEND")?
                }
                op::APPENDS => {
                    let items = self.pop_mark()?;
                    self.extend_list(items, "APPENDS")?
                }
                op::SETITEM => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.extend_dict(vec![(k, v)], "SETITEM")?
                }
                op::SETITEMS => {
                    let items = self.pop_mark()?;
                    let pairs = self.pairs(items)?;
                    self.extend_dict(pairs, "SETITEMS")?
                }
                op::ADDITEMS => {
                    let items = self.pop_mark()?;
                    let id = self.top_object("ADDITEMS")?;
                    let depth = items.iter().map(|x| self.depth_of(x)).max().unwrap_or(0);
                    self.deepen(id, depth)?;
                    match &mut self.nodes[id].object {
                        Object::Set(s) => s.extend(items),
                        o => {
                            let kind = o.kind();
                            return Err(self.err(format!("ADDITEMS to {kind}, not a set")));
                        }
                    }
                }
                // Memo.
                op::PUT => {
                    let line = self.line()?;
                    let i = line.parse().map_err(|_| self.err("bad PUT argument"))?;
                    self.memo_put(i)?
                }
                op::BINPUT => {
                    let i = self.u8()? as u32;
                    self.memo_put(i)?
                }
                op::LONG_BINPUT => {
                    let i = self.u32()?;
                    self.memo_put(i)?
                }
                op::MEMOIZE => {
                    let i = u32::try_from(self.memo.len())
                        .map_err(|_| self.err("memo too large"))?;
                    self.memo_put(i)?
                }
                op::GET => {
                    let line = self.line()?;
                    let i = line.parse().map_err(|_| self.err("bad GET argument"))?;
                    self.memo_get(i)?
                }
                op::BINGET => {
                    let i = self.u8()? as u32;
                    self.memo_get(i)?
                }
                op::LONG_BINGET => {
                    let i = self.u32()?;
                    self.memo_get(i)?
                }
                // Globals and calls: the allow-list.
                op::GLOBAL => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let g = self.global(module, name)?;
                    self.push(g)?
                }
                op::STACK_GLOBAL => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Value::Str(module), Value::Str(name)) = (module, name) else {
                        return Err(self.err("STACK_GLOBAL of something other than two strings"));
                    };
                    let g = self.global(&module, &name)?;
                    self.push(g)?
                }
                op::INST => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.global(module, name)?;
                    let module = allow::python3_module(module);
                    return Err(CoreError::unsafe_pickle(format!(
                        "the pickle instantiates '{module}.{name}' with INST, which weights-only loading does not allow; nothing was executed"
                    )));
                }
                op::OBJ => {
                    return Err(CoreError::unsafe_pickle(
                        "the pickle instantiates a class with OBJ, which weights-only loading does not allow; nothing was executed",
                    ))
                }
                op::NEWOBJ_EX => {
                    return Err(CoreError::unsafe_pickle(
                        "the pickle instantiates a class with NEWOBJ_EX, which weights-only loading does not allow; nothing was executed",
                    ))
                }
                op::EXT1 | op::EXT2 | op::EXT4 => {
                    return Err(CoreError::unsafe_pickle(
                        "the pickle names a global through the extension registry (EXT), which weights-only loading does not allow; nothing was executed",
                    ))
                }
                op::REDUCE => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let v = self.call(&callable, &args)?;
                    self.push(v)?
                }
                op::NEWOBJ => {
                    let args = self.pop()?;
                    let class = self.pop()?;
                    let v = self.new_instance(&class, &args)?;
                    self.push(v)?
                }
                op::BUILD => {
                    let _state = self.pop()?;
                    let inst = self.top()?.clone();
                    // As torch: state may be set on tensors (attributes we do not keep) and on
                    // OrderedDicts (`_metadata` of a state_dict); on nothing else.
                    let allowed = match &inst {
                        Value::Tensor(_) => true,
                        Value::Obj(id) => matches!(
                            self.nodes[*id].object,
                            Object::Dict { ordered: true, .. }
                        ),
                        _ => false,
                    };
                    if !allowed {
                        return Err(CoreError::unsafe_pickle(format!(
                            "the pickle sets state (BUILD) on {}, which weights-only loading does not allow; nothing was executed",
                            self.describe(&inst)
                        )));
                    }
                }
                op::BINPERSID => {
                    let pid = self.pop()?;
                    let v = self.persistent_load(&pid)?;
                    self.push(v)?
                }
                op::PERSID => {
                    return Err(self.err("a text persistent id (torch writes only tuples)"));
                }
                op::NEXT_BUFFER | op::READONLY_BUFFER => {
                    return Err(self.err("out-of-band buffers are not supported"));
                }
                other => return Err(self.err(format!("unknown opcode 0x{other:02x}"))),
            }
        }
    }

    fn pairs(&self, items: Vec<Value>) -> Result<Vec<(Value, Value)>> {
        if !items.len().is_multiple_of(2) {
            return Err(self.err("an odd number of items for a dict"));
        }
        let mut it = items.into_iter();
        let mut out = Vec::with_capacity(it.len() / 2);
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            out.push((k, v));
        }
        Ok(out)
    }

    fn top_object(&self, opcode: &str) -> Result<usize> {
        match self.top()? {
            Value::Obj(id) => Ok(*id),
            other => Err(self.err(format!("{opcode} to {}", self.describe(other)))),
        }
    }

    fn extend_list(&mut self, items: Vec<Value>, opcode: &str) -> Result<()> {
        let id = self.top_object(opcode)?;
        let depth = items.iter().map(|x| self.depth_of(x)).max().unwrap_or(0);
        if !matches!(self.nodes[id].object, Object::List(_)) {
            return Err(self.err(format!(
                "{opcode} to {}, not a list",
                self.nodes[id].object.kind()
            )));
        }
        self.deepen(id, depth)?;
        if let Object::List(l) = &mut self.nodes[id].object {
            l.extend(items);
        }
        Ok(())
    }

    fn extend_dict(&mut self, pairs: Vec<(Value, Value)>, opcode: &str) -> Result<()> {
        let id = self.top_object(opcode)?;
        let depth = pairs
            .iter()
            .map(|(k, v)| self.depth_of(k).max(self.depth_of(v)))
            .max()
            .unwrap_or(0);
        if !matches!(self.nodes[id].object, Object::Dict { .. }) {
            return Err(self.err(format!(
                "{opcode} to {}, not a dict",
                self.nodes[id].object.kind()
            )));
        }
        self.deepen(id, depth)?;
        if let Object::Dict { items, .. } = &mut self.nodes[id].object {
            items.extend(pairs);
        }
        Ok(())
    }

    fn memo_put(&mut self, i: u32) -> Result<()> {
        let v = self.top()?.clone();
        if self.memo.len() >= self.limits.max_memo && !self.memo.contains_key(&i) {
            return Err(self.err(format!("more than {} memo entries", self.limits.max_memo)));
        }
        self.memo.insert(i, v);
        Ok(())
    }

    fn memo_get(&mut self, i: u32) -> Result<()> {
        let v = self
            .memo
            .get(&i)
            .cloned()
            .ok_or_else(|| self.err(format!("memo slot {i} was never stored")))?;
        self.push(v)
    }

    /// A `LONG` argument beyond 64 bits, its digits capped before the quadratic conversion.
    fn decimal_long(&self, s: &str) -> Result<Value> {
        let digits = s.strip_prefix(['-', '+']).unwrap_or(s).len();
        if digits > MAX_DECIMAL_DIGITS {
            return Err(self.err(format!(
                "a decimal integer of {digits} digits (at most {MAX_DECIMAL_DIGITS} digits are read)"
            )));
        }
        decimal_long(s).ok_or_else(|| self.err("bad LONG argument"))
    }

    fn global(&mut self, module: &str, name: &str) -> Result<Value> {
        let module = allow::python3_module(module);
        let role = allow::lookup(module, name)
            .ok_or_else(|| unsafe_global(&format!("{module}.{name}")))?;
        let path = format!("{module}.{name}");
        if let Some(&i) = self.global_index.get(&path) {
            return Ok(Value::Global(i));
        }
        self.globals.push(GlobalRef {
            path: path.clone(),
            role,
        });
        self.global_index.insert(path, self.globals.len() - 1);
        Ok(Value::Global(self.globals.len() - 1))
    }

    // ---- evaluation of allowed calls --------------------------------------------------

    /// Charge `bytes` that an allowed call copies out of its arguments against the pickle
    /// read so far, so that calls on one large shared value cannot multiply it.
    fn charge(&mut self, bytes: usize) -> Result<()> {
        self.copied = self.copied.saturating_add(bytes as u64);
        let read = (self.pos - self.start) as u64;
        let allowed = COPY_BASE_BYTES.saturating_add(COPY_BYTES_PER_BYTE.saturating_mul(read));
        if self.copied > allowed {
            return Err(self.err(format!(
                "allowed calls copy more than {allowed} bytes out of their arguments \
                 ({COPY_BASE_BYTES} + {COPY_BYTES_PER_BYTE} per byte of pickle read)"
            )));
        }
        Ok(())
    }

    /// The items of a tuple of arguments (a call's, a persistent id's, a storage view's).
    fn tuple_items(&self, v: &Value, what: &str) -> Result<Vec<Value>> {
        match v {
            Value::Obj(id) => match &self.nodes[*id].object {
                Object::Tuple(items) if items.len() <= MAX_CALL_ARGS => Ok(items.clone()),
                Object::Tuple(items) => Err(self.err(format!(
                    "{what}: {} arguments (none takes more than {MAX_CALL_ARGS})",
                    items.len()
                ))),
                o => Err(self.err(format!("{what}: arguments are {}, not a tuple", o.kind()))),
            },
            other => Err(self.err(format!(
                "{what}: arguments are {}, not a tuple",
                self.describe(other)
            ))),
        }
    }

    fn call(&mut self, callable: &Value, args: &Value) -> Result<Value> {
        let Value::Global(g) = callable else {
            return Err(CoreError::unsafe_pickle(format!(
                "the pickle calls (REDUCE) {}, which is not an allowed function; nothing was executed",
                self.describe(callable)
            )));
        };
        let GlobalRef { path, role } = self.globals[*g].clone();
        let args = self.tuple_items(args, &path)?;
        match role {
            Role::Rebuild(f) => self.rebuild(f, &path, &args),
            Role::UnsupportedRebuild(what) => Err(CoreError::unsupported_dtype(format!(
                "the checkpoint holds {what} ('{path}'), which cannot be read as plain tensor data"
            ))),
            Role::Dict => self.make_dict(&path, &args),
            Role::Set => {
                let items = match args.as_slice() {
                    [] => Vec::new(),
                    [v] => self.copy_sequence(v, &path)?,
                    _ => return Err(self.err(format!("{path}: takes at most one argument"))),
                };
                self.new_object(Object::Set(items))
            }
            Role::ByteArray | Role::CodecsEncode => self.make_bytes(&path, &args),
            Role::Size => match args.as_slice() {
                [] => self.new_object(Object::Tuple(Vec::new())),
                [v] => {
                    let items = self.copy_sequence(v, &path)?;
                    self.new_object(Object::Tuple(items))
                }
                _ => Err(self.err(format!("{path}: takes at most one argument"))),
            },
            Role::Parameter => match args.first() {
                Some(Value::Tensor(t)) if args.len() <= 2 => Ok(Value::Tensor(*t)),
                _ => Err(self.err(format!("{path}: takes a tensor"))),
            },
            Role::Opaque => Ok(Value::Opaque("an opaque torch object")),
            Role::Storage(_) | Role::Dtype(_) | Role::TensorType => {
                Err(CoreError::unsafe_pickle(format!(
                    "the pickle calls '{path}', which weights-only loading names but never calls here; nothing was executed"
                )))
            }
        }
    }

    fn new_instance(&mut self, class: &Value, args: &Value) -> Result<Value> {
        let role = match class {
            Value::Global(g) => Some(self.globals[*g].role),
            _ => None,
        };
        match role {
            Some(Role::Dict) | Some(Role::Set) | Some(Role::Size) | Some(Role::Parameter) => {
                self.call(class, args)
            }
            _ => Err(CoreError::unsafe_pickle(format!(
                "the pickle instantiates {} (NEWOBJ), which weights-only loading does not allow; nothing was executed",
                self.describe(class)
            ))),
        }
    }

    /// A copy of the items of a list, tuple or set argument, charged.
    fn copy_sequence(&mut self, v: &Value, what: &str) -> Result<Vec<Value>> {
        let n = self.sequence(v, what)?.len();
        self.charge(n.saturating_mul(std::mem::size_of::<Value>()))?;
        Ok(self.sequence(v, what)?.to_vec())
    }

    /// The items of a list, tuple or set argument.
    fn sequence(&self, v: &Value, what: &str) -> Result<&[Value]> {
        match v {
            Value::Obj(id) => match &self.nodes[*id].object {
                Object::List(x) | Object::Tuple(x) | Object::Set(x) => Ok(x),
                o => Err(self.err(format!("{what}: wants a sequence, got {}", o.kind()))),
            },
            other => Err(self.err(format!(
                "{what}: wants a sequence, got {}",
                self.describe(other)
            ))),
        }
    }

    fn make_dict(&mut self, path: &str, args: &[Value]) -> Result<Value> {
        let items = match args {
            [] => Vec::new(),
            [Value::Obj(id)] => {
                let n = self.nodes[*id].object.len();
                self.charge(n.saturating_mul(std::mem::size_of::<(Value, Value)>()))?;
                self.dict_items(*id, path)?
            }
            _ => return Err(self.err(format!("{path}: unexpected arguments"))),
        };
        self.new_object(Object::Dict {
            ordered: true,
            items,
        })
    }

    /// The items of a dict, or of a list or tuple of pairs, as a new dict's.
    fn dict_items(&self, id: usize, path: &str) -> Result<Vec<(Value, Value)>> {
        match &self.nodes[id].object {
            Object::Dict { items, .. } => Ok(items.clone()),
            Object::List(pairs) | Object::Tuple(pairs) => {
                let mut out = Vec::with_capacity(pairs.len());
                for p in pairs {
                    match self.sequence(p, path)? {
                        [k, v] => out.push((k.clone(), v.clone())),
                        _ => return Err(self.err(format!("{path}: items must be pairs"))),
                    }
                }
                Ok(out)
            }
            o => Err(self.err(format!("{path}: cannot build a dict from {}", o.kind()))),
        }
    }

    fn make_bytes(&mut self, path: &str, args: &[Value]) -> Result<Value> {
        let latin1 = |s: &str| -> Option<Vec<u8>> {
            s.chars().map(|c| u8::try_from(c as u32).ok()).collect()
        };
        let bytes = match args {
            [] => Vec::new(),
            // Never written to here: the copy Python makes can be the same bytes.
            [Value::Bytes(b)] => return Ok(Value::Bytes(b.clone())),
            [Value::Str(s), Value::Str(enc)] if matches!(&**enc, "latin1" | "latin-1") => {
                self.charge(s.len())?;
                latin1(s).ok_or_else(|| self.err(format!("{path}: text beyond latin-1")))?
            }
            _ => return Err(self.err(format!("{path}: unexpected arguments"))),
        };
        Ok(Value::Bytes(Rc::from(bytes)))
    }

    fn int_arg(&self, v: &Value, what: &str) -> Result<u64> {
        match v {
            Value::Int(i) if *i >= 0 => Ok(*i as u64),
            Value::Bool(b) => Ok(*b as u64),
            Value::Int(i) => Err(CoreError::invalid_offsets(format!(
                "pickle: {what} is negative ({i})"
            ))),
            other => Err(self.err(format!("{what} is {}, not an int", self.describe(other)))),
        }
    }

    /// A size or stride: its ints, charged (a tensor keeps them).
    fn ints(&mut self, v: &Value, what: &str) -> Result<Vec<u64>> {
        let n = self.sequence(v, what)?.len();
        self.charge(n.saturating_mul(std::mem::size_of::<u64>()))?;
        self.sequence(v, what)?
            .iter()
            .map(|x| self.int_arg(x, what))
            .collect()
    }

    fn rebuild(&mut self, f: RebuildFn, path: &str, args: &[Value]) -> Result<Value> {
        match f {
            RebuildFn::Tensor => match args {
                [s, o, size, stride] => self.make_tensor(s, o, size, stride, None, None),
                _ => Err(self.err(format!("{path}: takes 4 arguments"))),
            },
            RebuildFn::TensorV2 => match args {
                [s, o, size, stride, _grad, _hooks] => {
                    self.make_tensor(s, o, size, stride, None, None)
                }
                [s, o, size, stride, _grad, _hooks, meta] => {
                    self.make_tensor(s, o, size, stride, None, Some(meta))
                }
                _ => Err(self.err(format!("{path}: takes 6 or 7 arguments"))),
            },
            RebuildFn::TensorV3 => match args {
                [s, o, size, stride, _grad, _hooks, dtype] => {
                    self.make_tensor(s, o, size, stride, Some(dtype), None)
                }
                [s, o, size, stride, _grad, _hooks, dtype, meta] => {
                    self.make_tensor(s, o, size, stride, Some(dtype), Some(meta))
                }
                _ => Err(self.err(format!("{path}: takes 7 or 8 arguments"))),
            },
            RebuildFn::Parameter | RebuildFn::ParameterWithState => match args.first() {
                Some(Value::Tensor(t))
                    if args.len() == if f == RebuildFn::Parameter { 3 } else { 4 } =>
                {
                    Ok(Value::Tensor(*t))
                }
                _ => Err(self.err(format!("{path}: wants (tensor, requires_grad, hooks…)"))),
            },
            RebuildFn::FromTypeV2 => {
                let [func, new_type, inner, _state] = args else {
                    return Err(self.err(format!("{path}: takes 4 arguments")));
                };
                let new_type_ok = matches!(new_type, Value::Global(g)
                    if matches!(self.globals[*g].role, Role::TensorType | Role::Parameter));
                if !new_type_ok {
                    return Err(CoreError::unsupported_dtype(format!(
                        "the checkpoint holds a tensor subclass ({}), which cannot be read as plain tensor data",
                        self.describe(new_type)
                    )));
                }
                let inner_fn = match func {
                    Value::Global(g) => match self.globals[*g].role {
                        Role::Rebuild(f) if f != RebuildFn::FromTypeV2 => Some(f),
                        _ => None,
                    },
                    _ => None,
                };
                let Some(inner_fn) = inner_fn else {
                    return Err(CoreError::unsafe_pickle(format!(
                        "{path} asks to call {}, which is not a tensor rebuild function; nothing was executed",
                        self.describe(func)
                    )));
                };
                let inner_path = self.describe(func);
                let inner_args = self.tuple_items(inner, path)?;
                self.rebuild(inner_fn, &inner_path, &inner_args)
            }
            RebuildFn::DeviceFromCpu => {
                let [Value::Tensor(t), dtype, _device, _grad] = args else {
                    return Err(self.err(format!(
                        "{path}: wants (tensor, dtype, device, requires_grad)"
                    )));
                };
                let want = self.dtype_arg(dtype)?;
                if want != self.tensors[*t].dtype {
                    return Err(CoreError::unsupported_dtype(format!(
                        "{path} converts a {} tensor to {want}: conversions are not performed",
                        self.tensors[*t].dtype
                    )));
                }
                Ok(Value::Tensor(*t))
            }
        }
    }

    fn dtype_arg(&self, v: &Value) -> Result<DType> {
        match v {
            Value::Global(g) => match self.globals[*g].role {
                Role::Dtype(Some(d)) => Ok(d),
                Role::Dtype(None) => Err(CoreError::unsupported_dtype(format!(
                    "dtype '{}' has no SafeTensors equivalent",
                    self.globals[*g].path
                ))),
                _ => Err(self.err(format!("{} is not a dtype", self.globals[*g].path))),
            },
            other => Err(self.err(format!("{} is not a dtype", self.describe(other)))),
        }
    }

    fn make_tensor(
        &mut self,
        storage: &Value,
        offset: &Value,
        size: &Value,
        stride: &Value,
        dtype: Option<&Value>,
        metadata: Option<&Value>,
    ) -> Result<Value> {
        let Value::Storage(sid) = storage else {
            return Err(self.err(format!(
                "a tensor over {}, not a storage",
                self.describe(storage)
            )));
        };
        let decl = self.storages[*sid].clone();
        let dtype = match dtype {
            Some(d) => self.dtype_arg(d)?,
            None => decl.elem.dtype(),
        };
        let offset = self.int_arg(offset, "storage offset")?;
        let shape = self.ints(size, "size")?;
        let stride = self.ints(stride, "stride")?;
        if shape.len() != stride.len() {
            return Err(self.err(format!(
                "size has {} dimensions, stride {}",
                shape.len(),
                stride.len()
            )));
        }
        let (mut conj, mut neg) = (false, false);
        if let Some(Value::Obj(id)) = metadata {
            let Object::Dict { items, .. } = &self.nodes[*id].object else {
                return Err(self.err("tensor metadata is not a dict"));
            };
            for (k, v) in items {
                match (k, v) {
                    (Value::Str(k), Value::Bool(b)) if &**k == "conj" => conj = *b,
                    (Value::Str(k), Value::Bool(b)) if &**k == "neg" => neg = *b,
                    _ => {
                        return Err(CoreError::unsupported_dtype(
                            "tensor metadata other than the conj/neg bits",
                        ))
                    }
                }
            }
        }
        let es = dtype.size().map(|s| s as u64).unwrap_or(1);
        check_extent(&decl, dtype, es, offset, &shape, &stride)?;
        self.tensors.push(TensorDecl {
            storage: *sid,
            dtype,
            offset,
            shape,
            stride,
            conj,
            neg,
        });
        Ok(Value::Tensor(self.tensors.len() - 1))
    }

    fn persistent_load(&mut self, pid: &Value) -> Result<Value> {
        if self.ids == PersistentIds::Refused {
            return Err(self.err("a persistent id where none may appear"));
        }
        let items = self.tuple_items(pid, "persistent id")?;
        let is_storage = match items.first() {
            Some(Value::Str(s)) => &**s == "storage",
            Some(Value::Bytes(b)) => &**b == b"storage",
            _ => false,
        };
        if !is_storage {
            return Err(CoreError::unsafe_pickle(
                "a persistent id other than ('storage', …): only storages may be loaded; nothing was executed",
            ));
        }
        let (ty, key, numel, view) = match (self.ids, items.as_slice()) {
            (PersistentIds::Zip, [_, ty, key, _location, numel]) => (ty, key, numel, None),
            (PersistentIds::Legacy, [_, ty, key, _location, numel, view]) => {
                (ty, key, numel, Some(view))
            }
            _ => return Err(self.err(format!("a storage persistent id of {} fields", items.len()))),
        };
        let elem = match ty {
            Value::Global(g) => match self.globals[*g].role {
                Role::Storage(StorageKind::Typed(Some(d), _)) => StorageElem::Typed(d),
                Role::Storage(StorageKind::Untyped) => StorageElem::Bytes,
                Role::Storage(StorageKind::Typed(None, torch)) => {
                    return Err(CoreError::unsupported_dtype(format!(
                        "a storage of {torch} ('{}'), which SafeTensors has no dtype for",
                        self.globals[*g].path
                    )))
                }
                _ => {
                    return Err(self.err(format!(
                        "a persistent id whose storage type is '{}'",
                        self.globals[*g].path
                    )))
                }
            },
            other => {
                return Err(self.err(format!(
                    "a persistent id whose storage type is {}",
                    self.describe(other)
                )))
            }
        };
        let Value::Str(key) = key else {
            return Err(self.err("a storage key that is not a string"));
        };
        let numel = self.int_arg(numel, "storage size")?;
        let nbytes = numel.checked_mul(elem.size()).ok_or_else(|| {
            CoreError::size_mismatch(format!(
                "pickle: storage '{key}' of {numel} elements overflows"
            ))
        })?;
        // A legacy view: a window (view_key, offset, size) of the root storage.
        let window = match view {
            None | Some(Value::None) => None,
            Some(v) => {
                let parts = self.tuple_items(v, "storage view")?;
                let [Value::Str(vkey), off, len] = parts.as_slice() else {
                    return Err(self.err("a storage view is not (key, offset, size)"));
                };
                let off = self.int_arg(off, "storage view offset")?;
                let len = self.int_arg(len, "storage view size")?;
                if off.checked_add(len).is_none_or(|e| e > numel) {
                    return Err(CoreError::size_mismatch(format!(
                        "pickle: view '{vkey}' ({off}+{len} elements) exceeds storage '{key}' of {numel}"
                    )));
                }
                Some((vkey.to_string(), off * elem.size(), len * elem.size()))
            }
        };
        let index_key = (key.to_string(), window.as_ref().map(|w| w.0.clone()));
        let decl = StorageDecl {
            key: key.to_string(),
            elem,
            numel,
            byte_offset: window.as_ref().map_or(0, |w| w.1),
            byte_len: window.as_ref().map_or(nbytes, |w| w.2),
        };
        if let Some(&id) = self.storage_index.get(&index_key) {
            let first = &self.storages[id];
            if first.elem != decl.elem
                || first.numel != decl.numel
                || first.byte_offset != decl.byte_offset
                || first.byte_len != decl.byte_len
            {
                return Err(CoreError::size_mismatch(format!(
                    "pickle: storage '{key}' is described two different ways (as {} × {:?} and {} × {:?})",
                    first.numel, first.elem, decl.numel, decl.elem
                )));
            }
            return Ok(Value::Storage(id));
        }
        // Other windows of the same stored storage must agree on its size in bytes.
        let stored = *self.storage_bytes.entry(decl.key.clone()).or_insert(nbytes);
        if stored != nbytes {
            return Err(CoreError::size_mismatch(format!(
                "pickle: storage '{key}' is given two sizes ({stored} and {nbytes} bytes)"
            )));
        }
        self.storages.push(decl);
        self.storage_index
            .insert(index_key, self.storages.len() - 1);
        Ok(Value::Storage(self.storages.len() - 1))
    }
}

/// An integer from LONG1/LONG4 bytes (little-endian two's complement): `Int` when it fits
/// 64 bits, else `BigInt` of its shortest encoding.
fn long(mut b: &[u8]) -> Value {
    while let [rest @ .., prev, last] = b {
        let redundant = (*last == 0 && prev & 0x80 == 0) || (*last == 0xFF && prev & 0x80 != 0);
        if !redundant {
            break;
        }
        b = &b[..rest.len() + 1];
    }
    if b.len() <= 8 {
        let fill = if b.last().is_some_and(|&x| x & 0x80 != 0) {
            0xFF
        } else {
            0
        };
        let mut a = [fill; 8];
        a[..b.len()].copy_from_slice(b);
        Value::Int(i64::from_le_bytes(a))
    } else {
        Value::BigInt(Rc::from(b))
    }
}

/// A decimal integer beyond 64 bits as little-endian two's complement bytes, `None` when
/// it is no decimal integer. The conversion is quadratic in the digits: the caller caps them
/// ([`MAX_DECIMAL_DIGITS`]).
fn decimal_long(s: &str) -> Option<Value> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Magnitude, little-endian base 256.
    let mut mag: Vec<u8> = vec![0];
    for d in digits.bytes() {
        let mut carry = (d - b'0') as u32;
        for byte in mag.iter_mut() {
            let v = *byte as u32 * 10 + carry;
            *byte = v as u8;
            carry = v >> 8;
        }
        if carry > 0 {
            mag.push(carry as u8);
        }
    }
    mag.push(0); // room for the sign bit
    if negative {
        // Two's complement: invert and add one.
        let mut carry = 1u16;
        for byte in mag.iter_mut() {
            let v = (!*byte) as u16 + carry;
            *byte = v as u8;
            carry = v >> 8;
        }
    }
    Some(long(&mag))
}

/// Whether the elements a strided view touches lie within its storage window. Sizes and
/// strides are non-negative here (checked by the caller); any zero size means no elements.
pub fn check_extent(
    decl: &StorageDecl,
    dtype: DType,
    es: u64,
    offset: u64,
    shape: &[u64],
    stride: &[u64],
) -> Result<()> {
    let overflow = || {
        CoreError::size_mismatch(format!(
            "pickle: a {dtype} tensor of shape {shape:?}, stride {stride:?} at offset {offset} overflows"
        ))
    };
    let numel = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(overflow)?;
    numel.checked_mul(es).ok_or_else(overflow)?;
    if numel == 0 {
        return Ok(());
    }
    let last = shape
        .iter()
        .zip(stride)
        .try_fold(offset, |acc, (&d, &s)| {
            acc.checked_add((d - 1).checked_mul(s)?)
        })
        .ok_or_else(overflow)?;
    let end = last
        .checked_add(1)
        .and_then(|n| n.checked_mul(es))
        .ok_or_else(overflow)?;
    if end > decl.byte_len {
        return Err(CoreError::size_mismatch(format!(
            "pickle: a {dtype} tensor of shape {shape:?}, stride {stride:?} at offset {offset} reaches byte {end} of storage '{}', which holds {} bytes",
            decl.key, decl.byte_len
        )));
    }
    Ok(())
}
