import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { join, resolve } from 'node:path'
import { GgufFile, Model, convert, inspect, openWeights, openWeightsSync, saveFile, type GgufValue, type RemoteGgufFile, type Tensor } from '../index.js'
import { PYTHON, tempDir } from './helpers'

/**
 * `GgufFile` against gguf-py (llama.cpp's Python package, gguf 0.19): scripts/gguf_file_peer.py
 * writes a file with GGUFWriter — metadata of every value type, one tensor of every ggml type
 * gguf-py dequantizes plus the plain types, random bytes (so block scales include subnormal,
 * infinite and NaN f16 values) — and reports what GGUFReader and `gguf.quants.dequantize` see.
 * Everything is compared to the bit.
 */

interface PeerTensor {
  name: string
  type: string
  shape: number[]
  n_elements: number
  n_bytes: number
  data_offset: number
  raw: string
  values: string | null
}
interface Peer {
  version: number
  alignment: number
  data_offset: number
  metadata: Record<string, { types: string[]; value: unknown }>
  tensors: PeerTensor[]
  skipped: string[]
}

const dir = tempDir('gguf-file-')
const path = join(dir, 'all.gguf')
let peer: Peer

beforeAll(() => {
  const run = spawnSync(PYTHON, [resolve(__dirname, '../scripts/gguf_file_peer.py'), dir], { encoding: 'utf8', maxBuffer: 64 << 20 })
  expect(run.status, run.stderr).toBe(0)
  peer = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8'))
})

const bytesOf = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)

/**
 * Run `body` in a child Node process (so that a crash or a runaway allocation cannot take the
 * runner down), with `st` the package, `path` the file and `report(value)` printing `value`
 * with the child's peak RSS. The child must exit normally and report.
 */
function inChild(body: string, file: string): { report: any } {
  const script = `const st = require(${JSON.stringify(resolve(__dirname, '../index.js'))})
    const path = process.argv[1]
    const report = (value) => console.log(JSON.stringify({ ...value, maxRSSKiB: process.resourceUsage().maxRSS }))
    ${body}`
  const run = spawnSync(process.execPath, ['-e', script, file], { encoding: 'utf8', timeout: 300_000 })
  expect({ status: run.status, signal: run.signal }, run.stderr).toEqual({ status: 0, signal: null })
  return { report: JSON.parse(run.stdout.trim().split('\n').pop()!) }
}
const peerFile = (name: string) => readFileSync(join(dir, name))

/** The block types issue 16 lists (every one gguf 0.19 dequantizes). */
const BLOCK_TYPES = [
  'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0', 'Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K', 'TQ1_0', 'TQ2_0',
  'IQ1_S', 'IQ1_M', 'IQ2_XXS', 'IQ2_XS', 'IQ2_S', 'IQ3_XXS', 'IQ3_S', 'IQ4_NL', 'IQ4_XS', 'MXFP4', 'NVFP4',
]
/** Plain ggml types: what `getTensor` returns natively. */
const PLAIN: Record<string, { dtype: string; array: string }> = {
  F32: { dtype: 'F32', array: 'Float32Array' },
  F16: { dtype: 'F16', array: 'Float32Array' },
  BF16: { dtype: 'BF16', array: 'Float32Array' },
  F64: { dtype: 'F64', array: 'Float64Array' },
  I8: { dtype: 'I8', array: 'Int8Array' },
  I16: { dtype: 'I16', array: 'Int16Array' },
  I32: { dtype: 'I32', array: 'Int32Array' },
  I64: { dtype: 'I64', array: 'BigInt64Array' },
}
const NUMERIC_ARRAYS: Record<string, string> = {
  UINT8: 'Uint8Array', INT8: 'Int8Array', UINT16: 'Uint16Array', INT16: 'Int16Array', UINT32: 'Uint32Array',
  INT32: 'Int32Array', FLOAT32: 'Float32Array', FLOAT64: 'Float64Array', UINT64: 'BigUint64Array', INT64: 'BigInt64Array',
}
const SIXTY_FOUR = new Set(['UINT64', 'INT64'])

/** gguf-py's value as ours should be: 64-bit integers (strings in the JSON) as bigint. */
function expectedValue(types: string[], value: unknown): unknown {
  const element = types[types.length - 1]
  if (Array.isArray(value)) return value.map((v) => expectedValue([element], v))
  return SIXTY_FOUR.has(element) ? BigInt(value as string) : value
}

describe('GgufFile: a file gguf-py wrote, as GGUFReader reads it', () => {
  it('covers every block type gguf-py dequantizes and every plain type', () => {
    const types = new Set(peer.tensors.map((t) => t.type))
    for (const t of [...BLOCK_TYPES, ...Object.keys(PLAIN)]) expect(types, t).toContain(t)
    // What gguf-py cannot dequantize is not in the file (and not claimed).
    for (const t of peer.skipped) expect(BLOCK_TYPES).not.toContain(t)
  })

  it('header: version, alignment, data offset, names in file order, info per tensor (row-major shape, offsets, sizes)', () => {
    const f = GgufFile.open(path)
    expect(f).toBeInstanceOf(GgufFile)
    expect(f.format).toBe('gguf')
    expect(f.path).toBe(path)
    expect(f.config).toBeNull()
    expect(f.version).toBe(peer.version)
    expect(f.alignment).toBe(peer.alignment)
    expect(f.alignment).toBe(64) // not the default: general.alignment was set
    expect(f.dataOffset).toBe(peer.data_offset)
    expect(f.byteLength).toBe(readFileSync(path).length)
    expect(f.tensorNames).toEqual(peer.tensors.map((t) => t.name))
    expect(f.numParameters).toBe(peer.tensors.reduce((n, t) => n + t.n_elements, 0))
    for (const t of peer.tensors) {
      expect(f.has(t.name)).toBe(true)
      const served = PLAIN[t.type]?.dtype ?? 'F32'
      expect(f.info(t.name), t.name).toEqual({
        name: t.name,
        dtype: served,
        ggmlType: t.type,
        storedType: t.type,
        shape: t.shape,
        dataOffsets: [t.data_offset - peer.data_offset, t.data_offset - peer.data_offset + t.n_bytes],
        offset: t.data_offset,
        byteLength: t.n_bytes,
        numel: t.n_elements,
      })
    }
    expect(f.has('missing')).toBe(false)
    // Shapes are row-major: gguf-py's file stores ne innermost first.
    expect(f.info('t.q8_0').shape).toEqual([2, peer.tensors.find((t) => t.name === 't.q8_0')!.shape[1], 32])
    expect(f.info('t.vector').shape).toEqual([256])
    expect(f.info('t.empty').shape).toEqual([0, 4])
  })

  it('metadata: every value and type as GGUFReader gives it (64-bit integers as bigint, numeric arrays as typed arrays)', () => {
    const f = GgufFile.open(path)
    const metadata = f.metadata
    const types = f.metadataTypes
    expect(Object.keys(metadata)).toEqual(Object.keys(peer.metadata))
    expect(Object.keys(types)).toEqual(Object.keys(peer.metadata))
    for (const [key, { types: peerTypes, value }] of Object.entries(peer.metadata)) {
      const ours: GgufValue = metadata[key]
      expect(types[key], key).toBe(peerTypes.length === 1 ? peerTypes[0] : `ARRAY[${peerTypes[1]}]`)
      const expected = expectedValue(peerTypes, value)
      if (peerTypes[0] !== 'ARRAY') {
        const kind = SIXTY_FOUR.has(peerTypes[0]) ? 'bigint' : peerTypes[0] === 'BOOL' ? 'boolean' : peerTypes[0] === 'STRING' ? 'string' : 'number'
        expect(typeof ours, key).toBe(kind)
        expect(ours, key).toBe(expected)
        continue
      }
      const element = peerTypes[1]
      if (NUMERIC_ARRAYS[element]) {
        expect((ours as object).constructor.name, key).toBe(NUMERIC_ARRAYS[element])
        expect(Array.from(ours as ArrayLike<unknown>), key).toEqual(expected)
      } else {
        expect(Array.isArray(ours), key).toBe(true)
        expect(ours, key).toEqual(expected)
      }
    }
    // The values the script wrote at the edges of their types, spelled out.
    expect(metadata['test.u64_max']).toBe(2n ** 64n - 1n)
    expect(metadata['test.i64_min']).toBe(-(2n ** 63n))
    expect(metadata['test.i64_odd']).toBe(2n ** 53n + 1n)
    expect(metadata['test.f32']).toBe(Math.fround(0.1))
    expect(metadata['test.bool_false']).toBe(false)
    expect(metadata['test.arr_str']).toEqual(['a', '', 'üß', '__proto__'])
    // A key or string '__proto__' is data, never a prototype.
    expect(Object.getPrototypeOf(metadata)).toBe(Object.prototype)
    // Made once: every read after the first is the same object, not a new copy of each array.
    expect(f.metadata).toBe(metadata)
    f.close()
    expect(() => f.metadata).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
  })

  it('getTensor: every block type decoded to Float32Array bit-exactly as gguf.quants.dequantize; plain types as their typed array', () => {
    const f = GgufFile.open(path)
    for (const t of peer.tensors) {
      const tensor = f.getTensor(t.name)
      expect(tensor.shape, t.name).toEqual(t.shape)
      const plain = PLAIN[t.type]
      expect(tensor.dtype, t.name).toBe(plain?.dtype ?? 'F32')
      expect(tensor.data.constructor.name, t.name).toBe(plain?.array ?? 'Float32Array')
      expect(tensor.data.length, t.name).toBe(t.n_elements)
      if (t.type === 'F16') {
        // F16 is upcast as SafeTensorsFile upcasts it (F16C where the CPU has it), which sets
        // the quiet bit of a signalling NaN where numpy keeps it: every other value, to the bit.
        const want = new Uint32Array(new Uint8Array(peerFile(t.values!)).buffer)
        for (const data of [tensor.data, f.getTensor(t.name, { as: 'F32' }).data] as Float32Array[]) {
          const got = new Uint32Array(data.buffer, data.byteOffset, data.length)
          for (let i = 0; i < got.length; i++) {
            if (Number.isNaN(data[i])) expect((want[i] & 0x7f800000) === 0x7f800000 && (want[i] & 0x7fffff) !== 0, `${t.name}[${i}]`).toBe(true)
            else expect(got[i], `${t.name}[${i}]`).toBe(want[i])
          }
        }
      } else if (t.values) {
        // F32, BF16 and every block type: dequantize's float32 bits (NaN payloads included).
        expect(bytesOf(tensor.data).equals(peerFile(t.values)), `${t.name} (${t.type})`).toBe(true)
        expect(bytesOf(f.getTensor(t.name, { as: 'F32' }).data).equals(peerFile(t.values)), t.name).toBe(true)
      } else {
        // Integers and F64: the stored values, in their own type.
        expect(bytesOf(tensor.data).equals(peerFile(t.raw)), `${t.name} (${t.type})`).toBe(true)
      }
    }
    // Integers stay integers, exactly (no float on the way).
    const i64 = f.getTensor('t.i64').data as BigInt64Array
    expect(i64[0]).toBe(-(2n ** 63n))
    expect(i64[1]).toBe(2n ** 63n - 1n)
  })

  it("as: 'raw' gives the stored bytes GGUFReader gives, for every type", () => {
    const f = GgufFile.open(path)
    for (const t of peer.tensors) {
      const raw = f.getTensor(t.name, { as: 'raw' })
      expect(raw.data).toBeInstanceOf(Uint8Array)
      expect(raw.data.length, t.name).toBe(t.n_bytes)
      expect(bytesOf(raw.data).equals(peerFile(t.raw)), t.name).toBe(true)
      // The same bytes lie in the file at info().offset.
      const { offset, byteLength } = f.info(t.name)
      expect(bytesOf(raw.data).equals(readFileSync(path).subarray(offset, offset + byteLength)), t.name).toBe(true)
    }
  })

  it('async and sync agree: openAsync, getTensorAsync, tensors, tensorsAsync; backend read too', async () => {
    const sync = GgufFile.open(path)
    const async_ = await GgufFile.openAsync(path)
    const read = GgufFile.open(path, { backend: 'read' })
    expect(async_).toBeInstanceOf(GgufFile)
    const all = sync.tensors()
    const allAsync = await async_.tensorsAsync()
    const rawAll = await read.tensorsAsync({ as: 'raw' })
    expect(Object.keys(all)).toEqual(peer.tensors.map((t) => t.name))
    expect(Object.keys(allAsync)).toEqual(peer.tensors.map((t) => t.name))
    for (const t of peer.tensors) {
      const one = sync.getTensor(t.name)
      const oneAsync = await async_.getTensorAsync(t.name)
      for (const other of [oneAsync, all[t.name], allAsync[t.name], read.getTensor(t.name)]) {
        expect(other.shape, t.name).toEqual(one.shape)
        expect(other.dtype, t.name).toBe(one.dtype)
        expect(bytesOf(other.data).equals(bytesOf(one.data)), t.name).toBe(true)
      }
      expect(bytesOf(rawAll[t.name].data).equals(peerFile(t.raw)), t.name).toBe(true)
      expect(bytesOf((await async_.getTensorAsync(t.name, { as: 'raw' })).data).equals(peerFile(t.raw)), t.name).toBe(true)
    }
  })

  it('openWeights and openWeightsSync of a GGUF file return a GgufFile (by content, not by name)', async () => {
    const renamed = join(dir, 'weights.bin')
    writeFileSync(renamed, readFileSync(path))
    for (const f of [await openWeights(path), openWeightsSync(path), openWeightsSync(renamed), openWeightsSync(path, { format: 'gguf' })]) {
      expect(f).toBeInstanceOf(GgufFile)
      const g = f as GgufFile
      expect(g.version).toBe(peer.version)
      expect(g.info('t.q4_k').ggmlType).toBe('Q4_K')
      expect(g.metadata['test.u64_max']).toBe(2n ** 64n - 1n)
    }
  })
})

describe('GgufFile: errors', () => {
  it('a missing tensor is ERR_NOT_FOUND naming it (sync and async)', async () => {
    const f = GgufFile.open(path)
    const missing = expect.objectContaining({ code: 'ERR_NOT_FOUND', tensor: 'nope', path })
    expect(() => f.getTensor('nope')).toThrow(missing)
    expect(() => f.info('nope')).toThrow(missing)
    expect(() => f.getTensor('nope', { as: 'raw' })).toThrow(missing)
    await expect(f.getTensorAsync('nope')).rejects.toEqual(missing)
  })

  it('a missing file is ERR_NOT_FOUND; new GgufFile() is ERR_INVALID_ARGUMENT naming the factories', async () => {
    const gone = join(dir, 'gone.gguf')
    expect(() => GgufFile.open(gone)).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND' }))
    await expect(GgufFile.openAsync(gone)).rejects.toEqual(expect.objectContaining({ code: 'ERR_NOT_FOUND' }))
    expect(() => new (GgufFile as any)()).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('GgufFile.open(path)') }))
    expect(() => GgufFile.open(path, { backend: 'nope' as any })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
  })

  it('a bad file is ERR_INVALID_GGUF: an unknown version, a lying tensor count, an unknown ggml type', async () => {
    const good = readFileSync(path)
    const variants: Record<string, Buffer> = {}
    const version = Buffer.from(good)
    version.writeUInt32LE(99, 4)
    variants.version = version
    const count = Buffer.from(good)
    count.writeBigUInt64LE(2n ** 40n, 8)
    variants.count = count
    // The first tensor's ggml type: after its name (u64 length + bytes), n_dims (u32) and ne.
    const type = Buffer.from(good)
    const first = peer.tensors[0]
    const len = Buffer.alloc(8)
    len.writeBigUInt64LE(BigInt(first.name.length))
    const nameAt = good.indexOf(Buffer.concat([len, Buffer.from(first.name)]), 24)
    expect(nameAt).toBeGreaterThan(0)
    const typeAt = nameAt + 8 + first.name.length + 4 + 8 * first.shape.length
    expect(type.readUInt32LE(typeAt)).toBe(0) // F32, as written
    type.writeUInt32LE(1000, typeAt)
    variants.type = type
    for (const [what, bytes] of Object.entries(variants)) {
      const p = join(dir, `bad-${what}.gguf`)
      writeFileSync(p, bytes)
      const bad = expect.objectContaining({ code: 'ERR_INVALID_GGUF', path: p })
      expect(() => GgufFile.open(p), what).toThrow(bad)
      await expect(GgufFile.openAsync(p), what).rejects.toEqual(bad)
      expect(() => openWeightsSync(p), what).toThrow(bad)
    }
  })

  it('a truncated file is ERR_INVALID_GGUF, cut in the header or in the data (the last tensor named)', () => {
    const good = readFileSync(path)
    const inHeader = join(dir, 'cut-header.gguf')
    writeFileSync(inHeader, good.subarray(0, 1000))
    expect(() => GgufFile.open(inHeader)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_GGUF', path: inHeader }))
    const inData = join(dir, 'cut-data.gguf')
    writeFileSync(inData, good.subarray(0, good.length - 100))
    const last = [...peer.tensors].sort((a, b) => b.data_offset - a.data_offset).find((t) => t.n_bytes > 0)!
    expect(() => GgufFile.open(inData)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_GGUF', tensor: last.name }))
  })

  it('a 32 MiB array of 2.8 million empty arrays (12 bytes each) is refused at open, as ggml refuses it: in seconds and a few hundred MiB', () => {
    // Read, each inner array became a typed array at every `metadata` read: GiBs and minutes.
    const n = Math.floor((32 << 20) / 12)
    const le = (v: number, bytes: 4 | 8) => {
      const b = Buffer.alloc(bytes)
      if (bytes === 4) b.writeUInt32LE(v)
      else b.writeBigUInt64LE(BigInt(v))
      return b
    }
    const key = (k: string) => Buffer.concat([le(k.length, 8), Buffer.from(k)])
    // Each inner array: element type UINT8 (0), count 0 — 12 zero bytes.
    const bomb = Buffer.concat([Buffer.from('GGUF'), le(3, 4), le(0, 8), le(1, 8), key('k'), le(9, 4), le(9, 4), le(n, 8), Buffer.alloc(12 * n)])
    const p = join(dir, 'nested.gguf')
    writeFileSync(p, bomb)
    const run = inChild(
      `const t0 = Date.now()
      let out
      try {
        const f = st.GgufFile.open(path)
        out = { ok: true, same: f.metadata === f.metadata }
      } catch (e) {
        out = { ok: false, code: e.code, message: e.message }
      }
      report({ ...out, ms: Date.now() - t0 })`,
      p,
    )
    expect(run.report).toMatchObject({ ok: false, code: 'ERR_INVALID_GGUF', message: expect.stringContaining("metadata 'k': an array of arrays") })
    expect(run.report.ms).toBeLessThan(10_000)
    expect(run.report.maxRSSKiB / 1024).toBeLessThan(300)
  })

  it('a file truncated after open: decoding its Q8_0, Q4_K and Q6_K tensors is ERR_IO, never SIGBUS (sync, async, again)', async () => {
    const src = join(dir, 'trunc.safetensors')
    const data = Float32Array.from({ length: 256 * 1024 }, (_, i) => Math.sin(i))
    saveFile(src, { 'blk.0.attn_q.weight': { shape: [256, 1024], data }, 'blk.0.ffn_down.weight': { shape: [256, 1024], data } })
    const runs = []
    for (const quantization of ['Q8_0', 'Q4_K_M'] as const) {
      const p = join(dir, `trunc-${quantization}.gguf`)
      await convert(src, p, { to: 'gguf', quantization })
      runs.push(
        inChild(
          `const fs = require('node:fs')
          const out = { types: [], codes: [] }
          const f = st.GgufFile.open(path)
          const w = st.openWeightsSync(path)
          const names = f.tensorNames.filter((n) => f.info(n).ggmlType !== 'F32')
          out.types = names.map((n) => f.info(n).ggmlType)
          fs.truncateSync(path, f.dataOffset)
          const tried = (fn) => {
            try {
              fn()
              out.codes.push('ok')
            } catch (e) {
              out.codes.push(e.code)
              out.message = e.message
            }
          }
          ;(async () => {
            for (const name of names) {
              for (let i = 0; i < 2; i++) {
                tried(() => f.getTensor(name))
                tried(() => w.getTensor(name, { as: 'F64' }))
                try {
                  await f.getTensorAsync(name)
                  out.codes.push('ok')
                } catch (e) {
                  out.codes.push(e.code)
                }
              }
            }
            report(out)
          })()`,
          p,
        ),
      )
    }
    const [q8, k] = runs
    expect(q8.report.types).toEqual(['Q8_0', 'Q8_0'])
    expect(k.report.types).toEqual(['Q4_K', 'Q6_K'])
    for (const run of runs) {
      expect(run.report.codes).toEqual(Array(12).fill('ERR_IO'))
      expect(run.report.message).toContain('shorter than when it was opened')
    }
  })

  it('a file of another format is ERR_UNKNOWN_FORMAT naming what it is', () => {
    const p = join(dir, 'not.gguf')
    saveFile(p, { w: { shape: [1], data: [1] } })
    expect(() => GgufFile.open(p)).toThrow(expect.objectContaining({ code: 'ERR_UNKNOWN_FORMAT', message: expect.stringContaining('SafeTensors') }))
  })
})

// ---------------------------------------------------------------------------------------
// Over HTTP: the same file, read by range requests, must give what the local file gives
// (itself checked against gguf-py above).

let server: Server
let base: string
const requests: { mode: string; range: string | undefined }[] = []

/** 127.0.0.1 serving `dir` with Range support; a first path segment 'norange' ignores Range. */
function serve() {
  server = createServer((req, res) => {
    const [, mode, ...rest] = decodeURIComponent(new URL(req.url!, 'http://x').pathname).split('/')
    requests.push({ mode, range: req.headers.range })
    let body: Buffer
    try {
      const p = join(dir, ...rest)
      if (!statSync(p).isFile()) throw new Error('not a file')
      body = readFileSync(p)
    } catch {
      res.writeHead(404).end()
      return
    }
    const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
    if (!range || mode === 'norange') {
      res.writeHead(200, { 'Content-Length': body.length }).end(body)
      return
    }
    const start = Number(range[1])
    const end = Math.min(Number(range[2]), body.length - 1)
    res.writeHead(206, { 'Content-Length': end - start + 1, 'Content-Range': `bytes ${start}-${end}/${body.length}` }).end(body.subarray(start, end + 1))
  })
  return new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
}

describe('split GGUFs (llama-gguf-split): the first file opens the whole set', () => {
  // @ts-expect-error: a plain ESM script without types
  const llama = import('../scripts/peers/llama-cpp.mjs') as Promise<{ llamaCpp: () => { tool: (n: string) => string } }>
  const root = tempDir('gguf-split-')
  const single = join(root, 'model.gguf')
  let split: string
  /** `llama-gguf-split --split ARGS single PREFIX` into its own directory; the first file's path. */
  const splitWith = (name: string, args: string[], count: number): string => {
    const out = join(root, name)
    mkdirSync(out)
    const r = spawnSync(split, ['--split', ...args, single, join(out, 'm')], { encoding: 'utf8' })
    expect(r.status, r.stderr + r.stdout).toBe(0)
    const files = Array.from({ length: count }, (_, i) => `m-${String(i + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.gguf`)
    expect(readdirSync(out).sort()).toEqual(files)
    return join(out, files[0])
  }
  const names = (f: { tensorNames: string[] }) => f.tensorNames
  const expectSameTensors = (set: GgufFile, whole: GgufFile) => {
    expect(names(set)).toEqual(names(whole))
    for (const name of names(whole)) {
      expect(bytesOf(set.getTensor(name, { as: 'raw' }).data).equals(bytesOf(whole.getTensor(name, { as: 'raw' }).data)), name).toBe(true)
      expect(set.info(name).ggmlType).toBe(whole.info(name).ggmlType)
    }
  }

  beforeAll(async () => {
    split = (await llama).llamaCpp().tool('llama-gguf-split')
    // 7 tensors of 278,528 bytes (Q8_0 [256, 1024]) and one F32 vector: 1.9 MB in all.
    const tensors: Record<string, { shape: number[]; data: Float32Array }> = {}
    for (let i = 0; i < 7; i++) tensors[`blk.${i}.w.weight`] = { shape: [256, 1024], data: Float32Array.from({ length: 256 * 1024 }, (_, j) => Math.sin(i + j * 0.01)) }
    tensors['norm.weight'] = { shape: [1024], data: new Float32Array(1024).fill(1) }
    const st = join(root, 'model.safetensors')
    saveFile(st, tensors, { metadata: { model_type: 'splitty' } })
    await convert(st, single, { to: 'gguf', quantization: 'Q8_0' })
  }, 120_000)

  it('--split-max-tensors, --split-max-size and --no-tensor-first-split sets: every tensor equal to the single file’s; the first file’s key/values', () => {
    expect(existsSync(split), `${split} is not built (node scripts/peers/llama-cpp.mjs)`).toBe(true)
    const whole = GgufFile.open(single)
    const sets = [
      splitWith('by-tensors', ['--split-max-tensors', '3'], 3),
      splitWith('by-size', ['--split-max-size', '1M'], 3),
      splitWith('empty-first', ['--split-max-tensors', '3', '--no-tensor-first-split'], 4),
    ]
    for (const first of sets) {
      for (const set of [GgufFile.open(first), openWeightsSync(first) as GgufFile]) {
        expectSameTensors(set, whole)
        expect(set.metadata['general.architecture']).toBe('splitty')
        expect(set.metadata['split.no']).toBe(0)
        expect(set.metadata['split.tensors.count']).toBe(8)
        // Offsets are within the file that holds the tensor.
        const last = set.info('norm.weight')
        const lastFile = first.replace('-00001-of-', `-${String(set.metadata['split.count']).padStart(5, '0')}-of-`)
        const onDisk = readFileSync(lastFile).subarray(last.offset, last.offset + last.byteLength)
        expect(onDisk.equals(bytesOf(set.getTensor('norm.weight', { as: 'raw' }).data))).toBe(true)
      }
    }
    expect(GgufFile.open(sets[2]).metadata['split.count']).toBe(4)
  })

  it('Model.loadPretrained of the first file: the set as a model (its key/values as metadata, no config); save says to convert; another file is not a model', async () => {
    const first = join(root, 'by-tensors', 'm-00001-of-00003.gguf')
    const whole = GgufFile.open(single)
    for (const model of [await Model.loadPretrained(first), Model.loadPretrainedSync(first)]) {
      expect(model.format).toBe('gguf')
      expect(model.dir).toBe(join(root, 'by-tensors'))
      expect(model.files).toEqual(['m-00001-of-00003.gguf', 'm-00002-of-00003.gguf', 'm-00003-of-00003.gguf'])
      expect(model.config).toEqual({})
      expect(model.metadata!['split.count']).toBe(3)
      expect(model.tensorNames).toEqual(whole.tensorNames)
      for (const name of whole.tensorNames) expect(bytesOf(model.getTensor(name, { as: 'raw' }).data).equals(bytesOf(whole.getTensor(name, { as: 'raw' }).data)), name).toBe(true)
      await expect(model.save(join(root, 'saved-model'))).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining("convert(gguf, dir, { to: 'safetensors' })") })
    }
    expect(existsSync(join(root, 'saved-model'))).toBe(false)
    expect(() => Model.loadPretrainedSync(join(root, 'model.safetensors'))).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('a model is a directory or a GGUF file') }))
  })

  it('inspect and convert read the whole set (inspect lists its files)', async () => {
    const first = join(root, 'by-tensors', 'm-00001-of-00003.gguf')
    const report = await inspect(first)
    expect(report.numTensors).toBe(8)
    expect(report.files).toEqual(['m-00001-of-00003.gguf', 'm-00002-of-00003.gguf', 'm-00003-of-00003.gguf'])
    expect(report.tensors.find((t) => t.name === 'norm.weight')!.file).toBe('m-00003-of-00003.gguf')
    const merged = join(root, 'merged.gguf')
    await convert(first, merged, { to: 'gguf' })
    const back = GgufFile.open(merged)
    expectSameTensors(back, GgufFile.open(single))
    expect(Object.keys(back.metadata).filter((k) => k.startsWith('split.'))).toEqual([])
  })

  it('a later file, a missing file, a file of another set, a tensor twice or a wrong count: ERR_INVALID_GGUF, never a partial view', () => {
    const from = join(root, 'by-tensors')
    const broken = (name: string, edit: (dir: string) => void): string => {
      const d = join(root, name)
      cpSync(from, d, { recursive: true })
      edit(d)
      return join(d, 'm-00001-of-00003.gguf')
    }
    const expectRefused = (path: string, fragment: string) => {
      for (const open of [() => GgufFile.open(path), () => openWeightsSync(path)]) {
        expect(open, fragment).toThrow(expect.objectContaining({ code: 'ERR_INVALID_GGUF', message: expect.stringContaining(fragment) }))
      }
    }
    expectRefused(join(from, 'm-00002-of-00003.gguf'), "open its first file, '")
    expectRefused(join(from, 'm-00002-of-00003.gguf'), 'm-00001-of-00003.gguf')
    expectRefused(broken('missing', (d) => rmSync(join(d, 'm-00003-of-00003.gguf'))), 'file 3 of the 3 of this split GGUF is missing')
    // The second file of the set split with an empty first file (split.count 4) in this set's place.
    expectRefused(broken('foreign', (d) => cpSync(join(root, 'empty-first', 'm-00002-of-00004.gguf'), join(d, 'm-00002-of-00003.gguf'))), 'belongs to another split GGUF')
    // File 3 in file 2's place: it says split.no 2.
    expectRefused(broken('swapped', (d) => cpSync(join(d, 'm-00003-of-00003.gguf'), join(d, 'm-00002-of-00003.gguf'))), 'belongs to another split GGUF')
    /** Set the UINT16 / INT32 value of `key` in the file at `path`. */
    const patch = (path: string, key: string, value: number) => {
      const bytes = readFileSync(path)
      const at = bytes.indexOf(Buffer.from(key)) + key.length + 4
      if (key === 'split.tensors.count') bytes.writeInt32LE(value, at)
      else bytes.writeUInt16LE(value, at)
      writeFileSync(path, bytes)
    }
    // File 2 again as file 3, its split.no made 2: its tensors are listed twice.
    expectRefused(
      broken('twice', (d) => {
        cpSync(join(d, 'm-00002-of-00003.gguf'), join(d, 'm-00003-of-00003.gguf'))
        patch(join(d, 'm-00003-of-00003.gguf'), 'split.no', 2)
      }),
      'a tensor listed in two files of the split GGUF',
    )
    expectRefused(
      broken('count', (d) => {
        for (const f of readdirSync(d)) patch(join(d, f), 'split.tensors.count', 9)
      }),
      "'split.tensors.count' is 9, but the 3 files of the split GGUF hold 8 tensors",
    )
    // The first file renamed: the others cannot be found from its name.
    const renamed = join(root, 'renamed.gguf')
    cpSync(join(from, 'm-00001-of-00003.gguf'), renamed)
    expectRefused(renamed, 'must be named PREFIX-00001-of-00003.gguf')
  })
})

describe('GgufFile.openUrl: range requests', () => {
  beforeAll(async () => {
    await serve()
    const a = server.address() as { port: number }
    base = `http://127.0.0.1:${a.port}`
  })
  afterAll(() => new Promise<void>((done) => server.close(() => done())))

  /** Everything `remote` serves equals what the local file serves. */
  async function expectSameAsLocal(remote: RemoteGgufFile, local: GgufFile) {
    expect(remote.format).toBe('gguf')
    expect(remote.version).toBe(local.version)
    expect(remote.alignment).toBe(local.alignment)
    expect(remote.dataOffset).toBe(local.dataOffset)
    expect(remote.byteLength).toBe(local.byteLength)
    expect(remote.tensorNames).toEqual(local.tensorNames)
    expect(remote.numParameters).toBe(local.numParameters)
    expect(remote.metadata).toEqual(local.metadata)
    expect(remote.metadataTypes).toEqual(local.metadataTypes)
    const all = await remote.tensorsAsync()
    for (const name of local.tensorNames) {
      expect(remote.has(name)).toBe(true)
      expect(remote.info(name)).toEqual(local.info(name))
      const want = local.getTensor(name)
      for (const got of [await remote.getTensorAsync(name), all[name]] as Tensor[]) {
        expect(got.dtype, name).toBe(want.dtype)
        expect(got.shape, name).toEqual(want.shape)
        expect(got.data.constructor, name).toBe(want.data.constructor)
        expect(bytesOf(got.data).equals(bytesOf(want.data)), name).toBe(true)
      }
      const raw = await remote.getTensorAsync(name, { as: 'raw' })
      expect(bytesOf(raw.data).equals(bytesOf(local.getTensor(name, { as: 'raw' }).data)), name).toBe(true)
      // F64 (block types: decoded to F32 first, then widened) where the type has a float form.
      let wantF64: Tensor | undefined
      try {
        wantF64 = local.getTensor(name, { as: 'F64' })
      } catch (e) {
        await expect(remote.getTensorAsync(name, { as: 'F64' })).rejects.toEqual(expect.objectContaining({ code: (e as { code: string }).code }))
      }
      if (wantF64) {
        const got = await remote.getTensorAsync(name, { as: 'F64' })
        expect(got.data.constructor, name).toBe(Float64Array)
        expect(bytesOf(got.data).equals(bytesOf(wantF64.data)), name).toBe(true)
      }
    }
  }

  it('every tensor of the gguf-py file, decoded as the local file decodes it; every read is a Promise', async () => {
    const url = `${base}/ok/all.gguf`
    const remote = await GgufFile.openUrl(url)
    expect(remote.url).toBe(url)
    expect(remote.path).toBe(url)
    await expectSameAsLocal(remote, GgufFile.open(path))
    const read = remote.getTensor('t.q4_k')
    expect(read).toBeInstanceOf(Promise)
    expect(bytesOf((await read).data).equals(bytesOf(GgufFile.open(path).getTensor('t.q4_k').data))).toBe(true)
    expect(Object.keys(await remote.tensors())).toEqual(remote.tensorNames)
    await expect(remote.getTensor('nope')).rejects.toEqual(expect.objectContaining({ code: 'ERR_NOT_FOUND', tensor: 'nope', path: url }))
    await expect(remote.getTensorAsync('nope')).rejects.toEqual(expect.objectContaining({ code: 'ERR_NOT_FOUND', tensor: 'nope', path: url }))
    expect(() => remote.info('nope')).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND', tensor: 'nope', path: url }))
  })

  it('a header larger than the first request is grown by range requests; tensor data is read only when asked for', async () => {
    const local = GgufFile.open(join(dir, 'bighead.gguf'))
    expect(local.dataOffset).toBeGreaterThan(600 * 1024) // several times the first request
    const url = `${base}/ok/bighead.gguf`
    requests.length = 0
    const progress: number[] = []
    const remote = await GgufFile.openUrl(url, { onProgress: (p) => progress.push(p.loadedBytes) })
    // 100 KiB, then at least doubling: 200, 400, 800, 1600 KiB (capped at the file's end).
    expect(requests.length).toBeGreaterThan(1)
    expect(requests.length).toBeLessThanOrEqual(5)
    expect(requests.every((r) => r.range !== undefined)).toBe(true)
    expect(remote.bytesFetched).toBe(progress[progress.length - 1])
    // The header and at most as much again: no tensor data beyond that.
    expect(remote.bytesFetched).toBeGreaterThanOrEqual(local.dataOffset - local.alignment)
    expect(remote.bytesFetched).toBeLessThan(2 * local.dataOffset)
    expect(remote.bytesFetched).toBeLessThan(local.byteLength / 2)
    expect(remote.metadata['tokenizer.ggml.tokens']).toEqual(local.metadata['tokenizer.ggml.tokens'])
    expect((remote.metadata['tokenizer.ggml.tokens'] as string[])[39999]).toBe('token_39999')
    requests.length = 0
    const before = remote.bytesFetched
    const c = await remote.getTensorAsync('c', { as: 'raw' })
    expect(requests).toEqual([{ mode: 'ok', range: `bytes=${remote.info('c').offset}-${remote.info('c').offset + remote.info('c').byteLength - 1}` }])
    expect(remote.bytesFetched - before).toBe(c.data.length)
    await expectSameAsLocal(remote, local)
  })

  it('openWeights(url) of a GGUF file reads it lazily too', async () => {
    const remote = (await openWeights(`${base}/ok/bighead.gguf` as `http://${string}`)) as RemoteGgufFile
    expect(remote.format).toBe('gguf')
    expect(remote.version).toBe(3)
    expect(remote.info('a').ggmlType).toBe('Q8_0')
    expect(bytesOf((await remote.getTensorAsync('b')).data).equals(bytesOf(GgufFile.open(join(dir, 'bighead.gguf')).getTensor('b').data))).toBe(true)
  })

  it('a server that ignores Range: the whole file, served from memory', async () => {
    const remote = await GgufFile.openUrl(`${base}/norange/all.gguf`)
    const local = GgufFile.open(path)
    expect(remote.bytesFetched).toBe(local.byteLength)
    await expectSameAsLocal(remote, local)
    const before = remote.bytesFetched
    expect(bytesOf((await remote.getTensor('t.iq2_s')).data).equals(bytesOf(local.getTensor('t.iq2_s').data))).toBe(true)
    expect(remote.bytesFetched).toBe(before)
  })

  it('errors name the URL: 404 ERR_NOT_FOUND, a truncated file ERR_INVALID_GGUF at open (the header tells), not a URL ERR_INVALID_ARGUMENT', async () => {
    await expect(GgufFile.openUrl(`${base}/ok/missing.gguf`)).rejects.toEqual(expect.objectContaining({ code: 'ERR_NOT_FOUND' }))
    writeFileSync(join(dir, 'cut.gguf'), readFileSync(join(dir, 'bighead.gguf')).subarray(0, 2_000_000))
    const cut = `${base}/ok/cut.gguf`
    await expect(GgufFile.openUrl(cut)).rejects.toEqual(expect.objectContaining({ code: 'ERR_INVALID_GGUF', path: cut, tensor: 'a' }))
    await expect(GgufFile.openUrl('file.gguf')).rejects.toEqual(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
  })
})

describe('GgufFile.openUrl: errors name the URL whoever raises them', () => {
  it('a missing tensor of a file served whole', async () => {
    await serve()
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/norange/all.gguf`
    try {
      const remote = await GgufFile.openUrl(url)
      const missing = expect.objectContaining({ code: 'ERR_NOT_FOUND', tensor: 'nope', path: url })
      expect(() => remote.info('nope')).toThrow(missing)
      await expect(remote.getTensor('nope')).rejects.toEqual(missing)
      await expect(remote.getTensorAsync('nope')).rejects.toEqual(missing)
    } finally {
      await new Promise<void>((done) => server.close(() => done()))
    }
  })
})
