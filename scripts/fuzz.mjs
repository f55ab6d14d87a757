#!/usr/bin/env node
// `npm run fuzz [-- --seconds N] [--targets a,b] [--no-nice]`: seed the corpora from
// ../shared/fixtures, build every cargo-fuzz target of crates/core/fuzz (libFuzzer, ASan,
// overflow checks) and run each for N seconds (default 60). Prints executions and duration
// per target; exits 1 if any target crashed (the input is left in
// crates/core/fuzz/artifacts/<target>/), 2 on a usage or tool error.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { createHash } from 'node:crypto'
import { inflateRawSync } from 'node:zlib'
import { fileURLToPath } from 'node:url'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const CORE = join(ROOT, 'crates/core')
const FUZZ = join(CORE, 'fuzz')
const FIXTURES = resolve(ROOT, '../shared/fixtures')

/** Each target: its dictionary and the largest input libFuzzer may make. */
const TARGETS = {
  safetensors_header: { dict: 'safetensors.dict', maxLen: 4096 },
  safetensors_read: { dict: 'safetensors.dict', maxLen: 65536 },
  mlx_parse: { dict: 'mlx.dict', maxLen: 8192 },
  shard_index: { dict: 'index.dict', maxLen: 2048 },
  gguf_parse: { dict: 'gguf.dict', maxLen: 8192 },
  roundtrip: { dict: null, maxLen: 4096 },
  pickle_read: { dict: 'pickle.dict', maxLen: 8192 },
  checkpoint_read: { dict: 'checkpoint.dict', maxLen: 16384 },
  // Memory and time per input byte: long inputs, so that a quadratic cost shows.
  pickle_resources: { dict: 'pickle.dict', maxLen: 32768 },
}

function usage(message) {
  if (message) console.error(`fuzz: ${message}`)
  console.error('usage: npm run fuzz -- [--seconds N] [--targets t1,t2] [--no-nice] [--seed-only]')
  console.error(`targets: ${Object.keys(TARGETS).join(', ')}`)
  process.exit(2)
}

function parseArgs(argv) {
  const opts = { seconds: 60, targets: Object.keys(TARGETS), nice: true, seedOnly: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--seconds') {
      opts.seconds = Number(argv[++i])
      if (!Number.isInteger(opts.seconds) || opts.seconds < 1) usage('--seconds takes a positive integer')
    } else if (a === '--targets') {
      opts.targets = String(argv[++i] ?? '').split(',').filter(Boolean)
      for (const t of opts.targets) if (!(t in TARGETS)) usage(`unknown target '${t}'`)
    } else if (a === '--no-nice') opts.nice = false
    else if (a === '--seed-only') opts.seedOnly = true
    else if (a === '--help' || a === '-h') usage()
    else usage(`unknown argument '${a}'`)
  }
  return opts
}

// ---------------------------------------------------------------------------------------
// Seeds, built from the fixtures (the corpus directories themselves are not committed).

function listFiles(dir, suffix) {
  if (!existsSync(dir)) return []
  const out = []
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) out.push(...listFiles(p, suffix))
    else if (name.endsWith(suffix)) out.push(p)
  }
  return out
}

/** A parsed SafeTensors fixture: header object and each tensor's bytes. */
function readSafetensors(bytes) {
  const n = Number(bytes.readBigUInt64LE(0))
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'))
  const data = bytes.subarray(8 + n)
  const tensors = []
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue
    const [s, e] = info.data_offsets
    tensors.push({ name, dtype: info.dtype, shape: info.shape, bytes: Buffer.from(data.subarray(s, e)) })
  }
  return { json: bytes.subarray(8, 8 + n), header, tensors }
}

function f16ToNumber(h) {
  const sign = h & 0x8000 ? -1 : 1
  const exp = (h >> 10) & 0x1f
  const frac = h & 0x3ff
  if (exp === 0) return sign * frac * 2 ** -24
  if (exp === 31) return frac ? NaN : sign * Infinity
  return sign * (1 + frac / 1024) * 2 ** (exp - 15)
}

/** Values of a tensor as numbers, for the dtypes weights.mlx holds. */
function tensorValues(t) {
  const b = t.bytes
  const out = []
  const step = { F32: 4, F16: 2, BF16: 2, I32: 4, U32: 4 }[t.dtype]
  for (let i = 0; i + step <= b.length; i += step) {
    if (t.dtype === 'F32') out.push(b.readFloatLE(i))
    else if (t.dtype === 'F16') out.push(f16ToNumber(b.readUInt16LE(i)))
    else if (t.dtype === 'BF16') {
      const w = Buffer.alloc(4)
      w.writeUInt16LE(b.readUInt16LE(i), 2)
      out.push(w.readFloatLE(0))
    } else if (t.dtype === 'I32') out.push(b.readInt32LE(i))
    else out.push(b.readUInt32LE(i))
  }
  return out
}

const MLX_NAMES = { F32: 'float32', F16: 'float16', BF16: 'bfloat16', I32: 'int32', U32: 'uint32' }

function mlxNumber(v) {
  if (Number.isNaN(v)) return '"NaN"'
  if (v === Infinity) return '"Infinity"'
  if (v === -Infinity) return '"-Infinity"'
  if (Object.is(v, -0)) return '-0.0'
  return String(v)
}

function mlxDocument(tensors, metadata) {
  const entries = tensors
    .filter((t) => t.dtype in MLX_NAMES)
    .slice(0, 8)
    .map((t) => `${JSON.stringify(t.name)}:{"shape":${JSON.stringify(t.shape)},"dtype":"${MLX_NAMES[t.dtype]}","data":[${tensorValues(t).slice(0, 256).map(mlxNumber).join(',')}]}`)
  const meta = metadata ? `,"metadata":${JSON.stringify(metadata)}` : ''
  return `{"version":"1.0"${meta},"weights":{${entries.join(',')}}}`
}

/** A small GGUF v3 writer (values and tensor infos as the spec lays them out). */
function gguf({ version = 3, kv = [], tensors = [], alignment = 32 }) {
  const parts = []
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b }
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return b }
  const str = (s) => { const b = Buffer.from(s, 'utf8'); return Buffer.concat([u64(b.length), b]) }
  const value = (type, v) => {
    switch (type) {
      case 4: return u32(v)
      case 5: { const b = Buffer.alloc(4); b.writeInt32LE(v); return b }
      case 6: { const b = Buffer.alloc(4); b.writeFloatLE(v); return b }
      case 7: return Buffer.from([v ? 1 : 0])
      case 8: return str(v)
      case 10: return u64(v)
      case 9: return Buffer.concat([u32(v.type), u64(v.items.length), ...v.items.map((x) => value(v.type, x))])
      default: throw new Error(`value type ${type}`)
    }
  }
  parts.push(Buffer.from('GGUF'), u32(version), u64(tensors.length), u64(kv.length))
  for (const [key, type, v] of kv) parts.push(str(key), u32(type), value(type, v))
  let offset = 0
  const placed = []
  for (const t of tensors) {
    parts.push(str(t.name), u32(t.ne.length), ...t.ne.map(u64), u32(t.type), u64(offset))
    placed.push([offset, t.data])
    offset += Math.ceil(t.data.length / alignment) * alignment
  }
  let head = Buffer.concat(parts)
  if (tensors.length) head = Buffer.concat([head, Buffer.alloc((alignment - (head.length % alignment)) % alignment)])
  const data = Buffer.alloc(offset)
  for (const [o, d] of placed) d.copy(data, o)
  return Buffer.concat([head, data])
}

function ggufTensorsFrom(tensors) {
  const out = []
  for (const t of tensors) {
    const type = { F32: 0, F16: 1, BF16: 30, I8: 24, I16: 25, I32: 26, I64: 27, F64: 28 }[t.dtype]
    if (type === undefined || t.shape.length > 4 || t.shape.includes(0) || t.name.length > 63) continue
    out.push({ name: t.name, ne: t.shape.length ? [...t.shape].reverse() : [1], type, data: t.bytes })
    if (out.length === 6) break
  }
  // One Q8_0 and one Q4_0 block row: f16 scale 1.0 then the quants.
  const scale = Buffer.from([0x00, 0x3c])
  out.push({ name: 'q8', ne: [32, 1], type: 8, data: Buffer.concat([scale, Buffer.from(Array.from({ length: 32 }, (_, i) => (i * 7) & 0xff))]) })
  out.push({ name: 'q4', ne: [32], type: 2, data: Buffer.concat([scale, Buffer.from(Array.from({ length: 16 }, (_, i) => i * 17))]) })
  return out
}

/**
 * One row of two blocks of every ggml block type (id, elements, bytes per block), filled
 * with patterned bytes: f16 scales of every kind (NaN, infinities, subnormals) come up.
 */
function ggufEveryBlockType() {
  const types = [[2, 32, 18], [3, 32, 20], [6, 32, 22], [7, 32, 24], [8, 32, 34], [9, 32, 36], [10, 256, 84], [11, 256, 110],
    [12, 256, 144], [13, 256, 176], [14, 256, 210], [15, 256, 292], [16, 256, 66], [17, 256, 74], [18, 256, 98], [19, 256, 50],
    [20, 32, 18], [21, 256, 110], [22, 256, 82], [23, 256, 136], [29, 256, 56], [34, 256, 54], [35, 256, 66], [39, 32, 17],
    [40, 64, 36], [41, 128, 18], [42, 64, 18]]
  return types.map(([type, block, bytes]) => ({
    name: `t${type}`,
    ne: [block * 2, 1],
    type,
    data: Buffer.from(Array.from({ length: bytes * 2 }, (_, i) => (i * 151 + type * 29) & 0xff)),
  }))
}

function writeSeeds(target, seeds) {
  const dir = join(FUZZ, 'corpus', target)
  mkdirSync(dir, { recursive: true })
  for (const seed of seeds) {
    const bytes = Buffer.isBuffer(seed) ? seed : Buffer.from(seed, 'utf8')
    writeFileSync(join(dir, `seed-${createHash('sha1').update(bytes).digest('hex').slice(0, 16)}`), bytes)
  }
  return seeds.length
}

/** A SafeTensors file from a header string and data bytes (not padded). */
function rawFile(header, data = Buffer.alloc(0)) {
  const json = Buffer.from(header, 'utf8')
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(json.length))
  return Buffer.concat([len, json, data])
}

/** The members of a zip (stored or deflated), or none if it is not one we can walk. */
function zipMembers(buf) {
  const eocd = buf.lastIndexOf(Buffer.from([0x50, 0x4b, 5, 6]))
  if (eocd < 0 || eocd + 22 > buf.length) return []
  const count = buf.readUInt16LE(eocd + 10)
  let at = buf.readUInt32LE(eocd + 16)
  const out = []
  try {
    for (let i = 0; i < count; i++) {
      if (buf.readUInt32LE(at) !== 0x02014b50) break
      const method = buf.readUInt16LE(at + 10)
      const csize = buf.readUInt32LE(at + 20)
      const nameLen = buf.readUInt16LE(at + 28)
      const skip = nameLen + buf.readUInt16LE(at + 30) + buf.readUInt16LE(at + 32)
      const local = buf.readUInt32LE(at + 42)
      const name = buf.subarray(at + 46, at + 46 + nameLen).toString('utf8')
      const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28)
      const raw = buf.subarray(start, start + csize)
      out.push({ name, data: method === 8 ? inflateRawSync(raw) : Buffer.from(raw) })
      at += 46 + skip
    }
  } catch {
    return out
  }
  return out
}

export function seedCorpora() {
  const fixtures = listFiles(FIXTURES, '.safetensors').filter((p) => statSync(p).size <= 256 * 1024)
  if (fixtures.length === 0) console.warn(`fuzz: no fixtures under ${FIXTURES}; seeding from built-in inputs only`)
  const files = fixtures.map((p) => readFileSync(p))
  const parsed = files.map(readSafetensors)
  const handmade = [
    '{}',
    '{"__metadata__":{"format":"pt"}}',
    '{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"I8","shape":[3],"data_offsets":[16,19]}}',
    '{"z":{"dtype":"F4","shape":[2],"data_offsets":[0,1]},"e":{"dtype":"BF16","shape":[0,7],"data_offsets":[1,1]}}',
    '{"s":{"dtype":"F16","shape":[],"data_offsets":[0,2]}}',
    '{"c":{"dtype":"C64","shape":[1],"data_offsets":[0,8]},"f":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[8,12]}}',
  ]
  const n = {}
  n.safetensors_header = writeSeeds('safetensors_header', [...parsed.map((p) => p.json), ...handmade])
  n.safetensors_read = writeSeeds('safetensors_read', [
    ...files,
    ...handmade.map((h) => {
      const need = Math.max(0, ...[...h.matchAll(/"data_offsets":\[\d+,(\d+)\]/g)].map((m) => Number(m[1])))
      return rawFile(h, Buffer.from(Array.from({ length: need }, (_, i) => (i * 37) & 0xff)))
    }),
  ])
  const all = parsed.flatMap((p) => p.tensors)
  n.mlx_parse = writeSeeds('mlx_parse', [
    ...parsed.map((p) => mlxDocument(p.tensors, p.header.__metadata__)),
    '{"version":"1.0","metadata":{"format":"mlx","n":3,"ok":true},"weights":{"w":{"shape":[2,2],"dtype":"float32","data":[1,2.5,-0.0,"NaN"]}}}',
    '{"weights":{"i":{"data":[1,-2,3],"shape":[3],"dtype":1},"h":{"dtype":2,"shape":[2],"data":["Infinity","-Infinity"]},"b":{"dtype":3,"shape":[1,1],"data":[1e-40]},"u":{"dtype":"uint32","shape":[1],"data":[4294967295]}}}',
    '{"version":1,"config":{"hidden":[1,2]},"weights":{"meta":{"shape":[4],"dtype":"float32"}}}',
  ])
  n.gguf_parse = writeSeeds('gguf_parse', [
    gguf({ kv: [['general.architecture', 8, 'llama'], ['general.alignment', 4, 32], ['general.name', 8, 'seed']], tensors: ggufTensorsFrom(all) }),
    gguf({ version: 2, kv: [['general.architecture', 8, 'x'], ['tokens', 9, { type: 8, items: ['a', 'bc', ''] }], ['n', 10, 7], ['f', 6, 0.5], ['b', 7, true], ['i', 5, -3]], tensors: ggufTensorsFrom(all.slice(3)) }),
    gguf({ kv: [['general.alignment', 4, 64]], tensors: [{ name: 'w', ne: [4, 2], type: 0, data: Buffer.alloc(32, 1) }], alignment: 64 }),
    gguf({ kv: [['nested', 9, { type: 4, items: [1, 2, 3] }]], tensors: [] }),
    gguf({ kv: [['general.architecture', 8, 'llama']], tensors: ggufEveryBlockType() }),
  ])
  n.shard_index = writeSeeds('shard_index', [
    '{"metadata":{"total_size":24},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}}',
    '{"weight_map":{"a":"model-00001-of-00002.safetensors","d":"sub/extra.safetensors"}}',
    '{"weight_map":{"c":"link.safetensors"}}',
    '{"weight_map":{"secret":"outside/model.safetensors"}}',
    '{"weight_map":{"a":"../model/model-00001-of-00002.safetensors"}}',
    '{"weight_map":{"x":"sub"}}',
    '{"weight_map":{"x":"not-a-shard.bin"}}',
    '{"weight_map":{}}',
    // Names a URL parser would make another host or a parent directory of.
    '{"weight_map":{"a":"\\t/\\t/evil:8080/model-00001-of-00002.safetensors"}}',
    '{"weight_map":{"a":".\\t./model/model-00001-of-00002.safetensors"}}',
    '{"weight_map":{"a":" model-00001-of-00002.safetensors","b":"sub/extra.safetensors\\r"}}',
    'sub/extra.safetensors',
    '.\t./model-00001-of-00002.safetensors',
  ])
  // PyTorch and NumPy: the checkpoints and arrays of shared/fixtures/pytorch and of
  // tests/data/pytorch (hostile ones included), and the data.pkl of every torch zip.
  const checkpoints = [FIXTURES, join(CORE, 'tests/data/pytorch')]
    .flatMap((d) => ['.pt', '.bin', '.npy', '.npz'].flatMap((ext) => listFiles(d, ext)))
    .filter((p) => statSync(p).size <= 64 * 1024)
    .map((p) => readFileSync(p))
  n.checkpoint_read = writeSeeds('checkpoint_read', checkpoints)
  const pickles = [
    ...checkpoints.flatMap((b) => zipMembers(b).filter((m) => m.name.endsWith('data.pkl')).map((m) => m.data)),
    Buffer.from('80027d71002858010000006171014b01752e', 'hex'),
  ]
  n.pickle_read = writeSeeds('pickle_read', pickles)
  n.pickle_resources = writeSeeds('pickle_resources', pickles)
  // Structured input (arbitrary): any bytes decode to some tensors.
  n.roundtrip = writeSeeds('roundtrip', [0, 1, 2, 3].map((k) => createHash('sha512').update(`roundtrip-${k}`).digest()))
  return n
}

// ---------------------------------------------------------------------------------------
// Running.

function cargoFuzzAvailable() {
  return spawnSync('cargo', ['+nightly', 'fuzz', '--version'], { cwd: CORE, stdio: 'ignore' }).status === 0
}

function run(cmd, args, { nice, capture = false } = {}) {
  const [c, a] = nice ? ['nice', ['-n', '19', cmd, ...args]] : [cmd, args]
  return new Promise((resolveRun) => {
    const child = spawn(c, a, { cwd: CORE, stdio: ['ignore', 'inherit', capture ? 'pipe' : 'inherit'] })
    let stderr = ''
    child.stderr?.on('data', (d) => {
      stderr += d
      process.stderr.write(d)
    })
    child.on('close', (code, signal) => resolveRun({ code, signal, stderr }))
  })
}

/** The shard_index target's model directories (`stcore-fuzz-shards-<pid>`) of finished runs. */
function removeStaleShardFixtures() {
  for (const dir of readdirSync(tmpdir()).filter((d) => d.startsWith('stcore-fuzz-shards-'))) {
    const pid = Number(dir.slice('stcore-fuzz-shards-'.length))
    let alive = false
    try {
      process.kill(pid, 0)
      alive = true
    } catch {}
    if (!alive) rmSync(join(tmpdir(), dir), { recursive: true, force: true })
  }
}

function lastMatch(text, re) {
  const all = [...text.matchAll(re)]
  return all.length ? all[all.length - 1] : null
}

async function main() {
  const opts = parseArgs(process.argv.slice(2))
  const seeded = seedCorpora()
  console.log(`fuzz: seeded corpora from ${FIXTURES}: ${Object.entries(seeded).map(([t, k]) => `${t} ${k}`).join(', ')}`)
  if (opts.seedOnly) return
  if (!cargoFuzzAvailable()) {
    console.error('fuzz: needs a nightly toolchain and cargo-fuzz: `rustup toolchain install nightly && cargo install cargo-fuzz`')
    process.exit(2)
  }
  const build = await run('cargo', ['+nightly', 'fuzz', 'build', ...opts.targets.length === 1 ? opts.targets : []], { nice: opts.nice })
  if (build.code !== 0) {
    console.error('fuzz: build failed')
    process.exit(2)
  }
  const results = []
  for (const target of opts.targets) {
    const { dict, maxLen } = TARGETS[target]
    const artifacts = join(FUZZ, 'artifacts', target)
    mkdirSync(artifacts, { recursive: true })
    const before = new Set(readdirSync(artifacts))
    const libfuzzer = [
      `-max_total_time=${opts.seconds}`,
      `-max_len=${maxLen}`,
      // Generous: on a loaded machine a stalled process must not pass for a hang.
      '-timeout=60',
      '-rss_limit_mb=2560',
      '-print_final_stats=1',
      `-artifact_prefix=${artifacts}/`,
      ...(dict ? [`-dict=${join(FUZZ, 'dicts', dict)}`] : []),
    ]
    console.log(`\nfuzz: ${target} for ${opts.seconds} s`)
    const started = Date.now()
    const r = await run('cargo', ['+nightly', 'fuzz', 'run', target, join(FUZZ, 'corpus', target), '--', ...libfuzzer], { nice: opts.nice, capture: true })
    const seconds = (Date.now() - started) / 1000
    const execs = Number(lastMatch(r.stderr, /stat::number_of_executed_units:\s*(\d+)/g)?.[1] ?? lastMatch(r.stderr, /#(\d+)\s/g)?.[1] ?? 0)
    const cov = lastMatch(r.stderr, /cov: (\d+) ft: (\d+) corp: (\d+)/g)
    // libFuzzer also leaves slow-unit-* files there; only these mean failure.
    const crashes = readdirSync(artifacts).filter((f) => !before.has(f) && /^(crash|oom|leak|timeout)-/.test(f))
    results.push({ target, ok: r.code === 0 && crashes.length === 0, execs, seconds, cov: cov?.[1], corpus: cov?.[3], crashes: crashes.map((f) => join(artifacts, f)) })
  }
  removeStaleShardFixtures()

  console.log('\n| target | executions | seconds | exec/s | coverage | corpus | result |')
  console.log('|---|---:|---:|---:|---:|---:|---|')
  for (const r of results) {
    console.log(`| ${r.target} | ${r.execs.toLocaleString('en-US')} | ${r.seconds.toFixed(0)} | ${Math.round(r.execs / r.seconds).toLocaleString('en-US')} | ${r.cov ?? '?'} | ${r.corpus ?? '?'} | ${r.ok ? 'no crash' : 'CRASH'} |`)
  }
  const failed = results.filter((r) => !r.ok)
  for (const r of failed) {
    console.error(`\nfuzz: ${r.target} crashed; reproduce with: cd crates/core && cargo +nightly fuzz run ${r.target} ${r.crashes[0] ?? '<artifact>'}`)
    for (const c of r.crashes) console.error(`  ${c}`)
  }
  process.exit(failed.length ? 1 : 0)
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(e)
    process.exit(2)
  })
}
