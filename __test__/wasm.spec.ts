import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { openWeights as openNative, saveFile, type Tensor, type WeightsFile } from '../index.js'
import { PYTHON, fixture, sendRange, tempDir } from './helpers'

/**
 * The WebAssembly build (`safetensors-node/wasm`): every tensor of every file, opened by
 * bytes, by Blob and by URL, the same to the bit as the native addon's, with the same error
 * codes; by URL, SafeTensors and GGUF are read by ranges (the server sees no whole-file read).
 */

const root = resolve(__dirname, '..')
const dir = tempDir('wasm-')
let wasm: any
let server: Server
let base = ''
/** Every request the server answered: the path and its Range header (null: none). */
const requests: { path: string; range: string | null }[] = []
const files = new Map<string, string>()

beforeAll(async () => {
  const { buildWasm } = await import(pathToFileURL(join(root, 'scripts/wasm/build.mjs')).href)
  buildWasm()
  wasm = await import(pathToFileURL(join(root, 'wasm/index.mjs')).href)
  const peer = spawnSync(PYTHON, [join(root, 'scripts/gguf_file_peer.py'), dir], { encoding: 'utf8', maxBuffer: 64 << 20 })
  expect(peer.status, peer.stderr).toBe(0)
  // A SafeTensors file larger than one first request, of every upcast type and an integer.
  const n = 1 << 16
  const bytes = (k: number) => Uint8Array.from({ length: n * k }, (_, i) => (i * 131 + 7) & 0xff)
  saveFile(join(dir, 'big.safetensors'), {
    bf16: { dtype: 'BF16', shape: [256, 256], data: bytes(2) },
    f16: { dtype: 'F16', shape: [n], data: bytes(2) },
    f32: { dtype: 'F32', shape: [n], data: new Float32Array(n).map((_, i) => Math.sin(i)) },
    i64: { dtype: 'I64', shape: [n / 8], data: bytes(1) },
  }, { metadata: { format: 'pt' } })
  for (const f of ['all_dtypes', 'half_special', 'tiny_checkpoint']) files.set(`${f}.safetensors`, fixture('safetensors', `${f}.safetensors`))
  for (const f of ['all.gguf', 'bighead.gguf', 'big.safetensors']) files.set(f, join(dir, f))
  server = createServer((req, res) => {
    const path = decodeURIComponent((req.url ?? '/').slice(1))
    requests.push({ path, range: req.headers.range ?? null })
    const file = files.get(path)
    if (!file) return void res.writeHead(404).end()
    sendRange(req, res, readFileSync(file))
  })
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
}, 600_000)

afterAll(() => new Promise<void>((ok) => (server ? server.close(() => ok()) : ok())))

const bytesOf = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)
const MODES = ['native', 'F32', 'F64', 'raw'] as const

/** The common TensorInfo fields (a GgufFile's info adds ggmlType and offset). */
function common(info: any) {
  const { name, dtype, storedType, shape, byteLength, numel, dataOffsets } = info
  return { name, dtype, storedType, shape, byteLength, numel, ...(dataOffsets ? { dataOffsets } : {}) }
}

type Outcome = { tensor: Tensor } | { code: string }
async function outcome(read: () => Promise<Tensor> | Tensor): Promise<Outcome> {
  try {
    return { tensor: await read() }
  } catch (e: any) {
    return { code: e.code }
  }
}

/** Every tensor in every form, to the bit, and the file's description, as the native addon gives them. */
async function expectSame(opened: any, native: WeightsFile) {
  expect(opened.format).toBe(native.format)
  expect(opened.tensorNames).toEqual(native.tensorNames)
  expect(opened.numParameters).toBe(native.numParameters)
  expect(opened.metadata).toEqual(native.metadata)
  if (native.format === 'gguf') {
    expect(Object.keys(opened.metadata)).toEqual(Object.keys(native.metadata!))
    expect(opened.metadataTypes).toEqual((native as any).metadataTypes)
  }
  for (const name of native.tensorNames) {
    expect(opened.info(name)).toEqual(common(native.info(name)))
    for (const as of MODES) {
      const [w, n] = [await outcome(() => opened.getTensor(name, { as })), await outcome(() => native.getTensor(name, { as }))]
      if ('code' in n) {
        expect(w, `${name} as ${as}`).toEqual(n)
        continue
      }
      expect('tensor' in w, `${name} as ${as}: ${'code' in w ? w.code : ''}`).toBe(true)
      const t = (w as { tensor: Tensor }).tensor
      expect({ name: t.name, dtype: t.dtype, shape: t.shape, kind: t.data.constructor.name }).toEqual({
        name: n.tensor.name, dtype: n.tensor.dtype, shape: n.tensor.shape, kind: n.tensor.data.constructor.name,
      })
      expect(bytesOf(t.data).equals(bytesOf(n.tensor.data)), `${name} as ${as}`).toBe(true)
    }
  }
}

describe('safetensors-node/wasm against the native addon', () => {
  const names = ['all_dtypes.safetensors', 'half_special.safetensors', 'tiny_checkpoint.safetensors', 'big.safetensors', 'all.gguf', 'bighead.gguf']
  for (const name of names) {
    it(`${name}: by bytes, by Blob and by URL, every tensor in every form to the bit`, async () => {
      const path = files.get(name)!
      const native = await openNative(path)
      const body = readFileSync(path)
      for (const input of [new Uint8Array(body), new Blob([body]), `${base}${name}`]) {
        const opened = await wasm.openWeights(input)
        await expectSame(opened, native)
        opened.close()
      }
      native.close()
    }, 120_000)
  }

  it('covers every ggml type the native reader decodes in all.gguf (K-quants and IQ types included)', async () => {
    const g = await wasm.openWeights(readFileSync(files.get('all.gguf')!))
    const types = g.tensorNames.map((n: string) => g.info(n).storedType)
    for (const t of ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K', 'Q6_K', 'Q2_K', 'IQ2_XS', 'IQ4_XS', 'IQ1_M', 'MXFP4']) expect(types).toContain(t)
  })

  it('by URL, SafeTensors and GGUF are read by ranges: the header, then each tensor’s own bytes, never the whole file', async () => {
    for (const name of ['big.safetensors', 'bighead.gguf']) {
      const size = readFileSync(files.get(name)!).length
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
    expect(requests.length).toBeGreaterThan(2)
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
