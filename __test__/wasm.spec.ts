import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { convert as convertNative, openWeights as openNative, saveFile as saveNative, serialize as serializeNative } from '../index.js'
import { LEGACY_TENSORS, PYTHON, legacyPt, tempDir } from './helpers'
import { describe as describeFile } from './wasm-describe.mjs'
import { RANGED, rangedOnly, serveFiles, shardedSets, wasmFiles, type Served } from './wasm-fixtures'

/**
 * The WebAssembly build (`safetensors-node/wasm`): every tensor of every file (SafeTensors,
 * GGUF of every ggml type, PyTorch, NumPy), opened by bytes, by Blob and by URL, the same to
 * the bit as the native addon's, with the same error codes; by URL, SafeTensors and GGUF are
 * read by ranges (the server sees no whole-file read).
 */

const root = resolve(__dirname, '..')
const dir = tempDir('wasm-')
let wasm: any
let served: Served
let base = ''
let files = new Map<string, string>()

beforeAll(async () => {
  const { buildWasm } = await import(pathToFileURL(join(root, 'scripts/wasm/build.mjs')).href)
  buildWasm()
  wasm = await import(pathToFileURL(join(root, 'wasm/index.mjs')).href)
  files = wasmFiles(dir)
  served = await serveFiles(files)
  base = served.base
}, 600_000)

afterAll(() => served?.close())

describe('safetensors-node/wasm against the native addon', () => {
  it('every file: by bytes, by Blob and by URL, every tensor in every form to the bit', async () => {
    for (const [name, path] of files) {
      const native = await openNative(path)
      const expected = await describeFile(native)
      native.close()
      const body = readFileSync(path)
      for (const input of [new Uint8Array(body), new Blob([body]), `${base}${name}`]) {
        const opened = await wasm.openWeights(input)
        expect(await describeFile(opened), `${name} from ${typeof input === 'string' ? 'URL' : input.constructor.name}`).toEqual(expected)
        opened.close()
      }
    }
    for (const name of RANGED) expect(rangedOnly(served.requests, name, readFileSync(files.get(name)!).length), name).toBe(true)
  }, 300_000)

  it('covers every ggml type the native reader decodes in all.gguf (K-quants and IQ types included)', async () => {
    const g = await wasm.openWeights(readFileSync(files.get('all.gguf')!))
    const types = g.tensorNames.map((n: string) => g.info(n).storedType)
    for (const t of ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K', 'Q6_K', 'Q2_K', 'IQ2_XS', 'IQ4_XS', 'IQ1_M', 'MXFP4']) expect(types).toContain(t)
  })

  it('by URL, SafeTensors and GGUF are read by ranges: the header, then each tensor’s own bytes, never the whole file', async () => {
    for (const name of ['big.safetensors', 'bighead.gguf']) {
      const size = readFileSync(files.get(name)!).length
      const requests = served.requests
      requests.length = 0
      const f = await wasm.openWeights(`${base}${name}`)
      const opening = requests.map((r) => r.range)
      const last = f.tensorNames[f.tensorNames.length - 1]
      const t = f.info(last)
      await f.getTensor(last)
      expect(requests.every((r) => r.path === name && r.range !== null), JSON.stringify(requests)).toBe(true)
      const spans = requests.map((r) => /^bytes=(\d+)-(\d+)$/.exec(r.range!)!.slice(1).map(Number))
      expect(spans.every(([a, b]) => b - a + 1 < size)).toBe(true)
      expect(opening[0]).toBe('bytes=0-102399')
      // The last request is the tensor's own bytes.
      const [a, b] = spans[spans.length - 1]
      expect(b - a + 1).toBe(t.byteLength)
      f.close()
    }
    // bighead.gguf's header (~700 KB) took more than the first range: the rest was asked for.
    expect(served.requests.length).toBeGreaterThan(2)
  })

  it('an .npz and a legacy .pt by URL: their headers (zip records; pickles and storage counts), then each tensor by its range, as the native addon reads them', async () => {
    const npz = join(dir, 'large.npz')
    const npzScript = "import numpy as np, sys; a = (np.arange(512 * 512, dtype='<f4') % 997).reshape(512, 512) / 7; np.savez(sys.argv[1], a=a, b=np.asfortranarray(a.T.astype('>f4')))"
    expect(spawnSync(PYTHON, ['-c', npzScript, npz], { encoding: 'utf8' }).status).toBe(0)
    const pt = join(dir, 'large-legacy.pt')
    const w = Float32Array.from({ length: 1024 * 1024 }, (_, i) => Math.sin(i))
    writeFileSync(pt, legacyPt(LEGACY_TENSORS, [['0', w], ['1', Float32Array.from({ length: 64 }, (_, i) => i / 8)]]))
    for (const [name, path] of [['large.npz', npz], ['large-legacy.pt', pt]]) {
      const own = await serveFiles(new Map([[name, path]]))
      try {
        const native = await openNative(path)
        const expected = await describeFile(native)
        native.close()
        const opened = await wasm.openWeights(`${own.base}${name}`)
        const openBytes = own.requests.map((r) => /^bytes=(\d+)-(\d+)$/.exec(r.range ?? '')).reduce((n, m) => n + (m ? Number(m[2]) - Number(m[1]) + 1 : Infinity), 0)
        expect(openBytes, JSON.stringify(own.requests)).toBeLessThan(statSync(path).size / 4)
        expect(await describeFile(opened), name).toEqual(expected)
        opened.close()
        expect(rangedOnly(own.requests, name, statSync(path).size), JSON.stringify(own.requests)).toBe(true)
      } finally {
        await own.close()
      }
    }
  })

  it('a sharded directory and a split GGUF set by URL: every file the core names, by ranges, as the native addon reads them', async () => {
    const { files: names, urls } = await shardedSets(dir)
    const own = await serveFiles(names)
    try {
      for (const [path, local] of urls) {
        const url = own.base + path
        const native = await openNative(local)
        const expected = await describeFile(native)
        native.close()
        own.requests.length = 0
        const opened = await wasm.openWeights(url)
        expect(await describeFile(opened), url).toEqual(expected)
        opened.close()
        // Every request but the directory probe (a 404 for the name without its '/') is a Range request.
        expect(own.requests.filter((r) => r.path !== 'sharded').every((r) => r.range !== null), JSON.stringify(own.requests)).toBe(true)
      }
      const dirFile = await wasm.openWeights(`${own.base}sharded/`)
      expect(dirFile.config).toEqual({ model_type: 'tiny' })
      expect(dirFile.tensorNames).toEqual(['layer.0', 'layer.1', 'layer.2'])
      dirFile.close()
    } finally {
      await own.close()
    }
    // Bytes or a Blob have no directory: a split set's first file names the others it cannot read.
    await expect(wasm.openWeights(readFileSync(urls[1][1]))).rejects.toMatchObject({ code: 'ERR_INVALID_GGUF' })
  })

  it('errors carry the native codes', async () => {
    await expect(wasm.openWeights(`${base}missing.safetensors`)).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', message: expect.stringContaining('missing.safetensors') })
    const bad = new Uint8Array(16)
    new DataView(bad.buffer).setBigUint64(0, 1n << 40n, true)
    const badPath = join(dir, 'bad.safetensors')
    writeFileSync(badPath, bad)
    const nativeCode = await openNative(badPath).then(() => 'opened', (e) => e.code)
    await expect(wasm.openWeights(bad)).rejects.toMatchObject({ code: nativeCode })
    const f = await wasm.openWeights(readFileSync(files.get('all_dtypes.safetensors')!))
    await expect(f.getTensor('nope')).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', message: expect.stringContaining("tensor 'nope'") })
    expect(() => f.info('nope')).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND' }))
    await expect(f.getTensor('f32', { as: 'F16' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    f.close()
    await expect(f.getTensor('f32')).rejects.toMatchObject({ code: 'ERR_CLOSED' })
    await expect(wasm.openWeights(42)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
  })

  it('serialize: the native serialize\'s bytes, read back by the native addon and by Python safetensors', async () => {
    const tensors = {
      f32: { shape: [2, 3], data: Float32Array.of(1, -2.5, NaN, Infinity, -0, 3.4e38) },
      bf16: { dtype: 'BF16', shape: [4], data: Float32Array.of(1.00390625, -3, 65504, 1e-40) },
      f16: { dtype: 'F16', shape: [2, 2], data: [0.1, -2, 65504, 1e-7] },
      i8: { dtype: 'I8', shape: [3], data: [-128, 0, 127] },
      u8: { shape: [2], data: new Uint8ClampedArray([0, 255]) },
      i64: { shape: [2], data: BigInt64Array.of(-(2n ** 63n), 2n ** 62n) },
      u64: { shape: [1], data: BigUint64Array.of(2n ** 64n - 1n) },
      f64: { shape: [], data: Float64Array.of(Math.PI) },
      fp8: { dtype: 'F8_E4M3', shape: [2], data: Uint8Array.of(0x38, 0xfe) },
      empty: { shape: [0, 3], data: new Float32Array(0) },
      'a.b/c ü': { shape: [1], data: Int16Array.of(-7) },
    } as const
    const metadata = { format: 'pt', note: 'wasm ✓' }
    const bytes: Uint8Array = await wasm.serialize(tensors, { metadata })
    expect(bytes).toBeInstanceOf(Uint8Array)
    expect(Buffer.from(bytes).equals(serializeNative(tensors as any, { metadata }))).toBe(true)
    const path = join(dir, 'serialized.safetensors')
    writeFileSync(path, bytes)
    const native = await openNative(path)
    expect(native.metadata).toEqual(metadata)
    expect((await native.getTensor('i64')).data).toEqual(BigInt64Array.of(-(2n ** 63n), 2n ** 62n))
    native.close()
    // Python safetensors: every tensor's dtype, shape and bytes, and the metadata.
    const py = spawnSync(PYTHON, ['-c', `import json, sys
from safetensors import safe_open
from safetensors._safetensors_rust import deserialize
data = open(sys.argv[1], 'rb').read()
with safe_open(sys.argv[1], 'numpy') as f: meta = f.metadata()
print(json.dumps({'metadata': meta, 'tensors': {n: [t['dtype'], t['shape'], bytes(t['data']).hex()] for n, t in deserialize(data)}}))`, path], { encoding: 'utf8' })
    expect(py.status, py.stderr).toBe(0)
    const read = JSON.parse(py.stdout)
    expect(read.metadata).toEqual(metadata)
    const reopened = await wasm.openWeights(bytes)
    for (const name of Object.keys(tensors)) {
      const t = await reopened.getTensor(name, { as: 'raw' })
      expect(read.tensors[name], name).toEqual([reopened.info(name).dtype, t.shape, Buffer.from(t.data).toString('hex')])
    }
    expect(Object.keys(read.tensors).sort()).toEqual(Object.keys(tensors).sort())
  })

  it('serialize: bad input has the native codes', async () => {
    const bad: [string, any, any?][] = [
      ['a non-integer shape', { t: { shape: [1.5], data: [1] } }],
      ['a short shape', { t: { shape: [3], data: Float32Array.of(1, 2) } }],
      ['an unknown dtype', { t: { dtype: 'F12', shape: [1], data: [1] } }],
      ['a number out of range', { t: { dtype: 'U8', shape: [1], data: [300] } }],
      ['strings as data', { t: { shape: [1], data: ['1'] } }],
      ['a DataView', { t: { shape: [4], data: new DataView(new ArrayBuffer(4)) } }],
      ['metadata that is not strings', { t: { shape: [1], data: [1] } }, { metadata: { n: 1 } }],
    ]
    for (const [what, tensors, options] of bad) {
      let nativeCode = 'none'
      try {
        serializeNative(tensors, options)
      } catch (e: any) {
        nativeCode = e.code
      }
      expect(nativeCode, what).toMatch(/^ERR_/)
      await expect(wasm.serialize(tensors, options), what).rejects.toMatchObject({ code: nativeCode })
    }
  })

  it('`safetensors-node/wasm` loads under Node with no native binary in the package', () => {
    // A package holding only package.json and wasm/: the addon cannot be found, the entry must not need it.
    const app = join(dir, 'app')
    const pkg = join(app, 'node_modules', 'safetensors-node')
    mkdirSync(join(pkg, 'wasm'), { recursive: true })
    cpSync(join(root, 'package.json'), join(pkg, 'package.json'))
    for (const f of ['index.mjs', 'safetensors-node.wasm']) cpSync(join(root, 'wasm', f), join(pkg, 'wasm', f))
    const script = `import { openWeights } from 'safetensors-node/wasm'
      import { readFileSync } from 'node:fs'
      const f = await openWeights(readFileSync(${JSON.stringify(files.get('all_dtypes.safetensors'))}))
      const t = await f.getTensor('bf16', { as: 'F64' })
      console.log(JSON.stringify({ names: f.tensorNames.length, kind: t.data.constructor.name, n: t.data.length }))`
    writeFileSync(join(app, 'main.mjs'), script)
    const run = spawnSync(process.execPath, [join(app, 'main.mjs')], { cwd: app, encoding: 'utf8' })
    expect(run.status, run.stderr).toBe(0)
    expect(JSON.parse(run.stdout)).toEqual({ names: 17, kind: 'Float64Array', n: 17 })
  })
})
