import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { execFile } from 'node:child_process'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import type { AddressInfo } from 'node:net'
import { GgufFile, Model, SafeTensorsFile, convert, inspect, openWeights, openWeightsSync, saveFile, validate, type TensorInput } from '../index.js'
import { LEGACY_TENSORS, PYTHON, legacyPt, pk, tempDir, torchZip } from './helpers'

/**
 * A real HTTP server on 127.0.0.1 serving `root` with `Range` support, counting the body
 * bytes it sends. The first path segment picks a behaviour: ok, norange (ignores Range),
 * truncate (closes mid-body), stall (never answers), 500, badrange (wrong Content-Range).
 */
let server: Server
let base: string
let bytesSent = 0
const root = tempDir('remote-')
const BIN = resolve(__dirname, '../bin/safetensors-node.js')
/**
 * Another origin (another port) serving the same files, recording what it is sent: the
 * `redirect` behaviour of the first server sends every request here (as the Hub sends its
 * files to a CDN); nothing else may reach it.
 */
let other: Server
let otherBase: string
const otherSeen: Array<{ url: string; headers: IncomingMessage['headers'] }> = []

function serve() {
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const [, mode, ...rest] = decodeURIComponent(new URL(req.url!, 'http://x').pathname).split('/')
    const path = join(root, ...rest)
    if (mode === 'stall') return // never answer: the client must time out
    if (mode === 'redirect') return void res.writeHead(302, { Location: `${otherBase}/ok/${rest.map(encodeURIComponent).join('/')}` }).end()
    if (mode === '500') {
      res.writeHead(500).end('boom')
      return
    }
    let body: Buffer
    try {
      if (!statSync(path).isFile()) throw new Error('dir')
      body = readFileSync(path)
    } catch {
      res.writeHead(404).end()
      return
    }
    const send = (status: number, headers: Record<string, string | number>, data: Buffer) => {
      res.writeHead(status, { 'Content-Length': data.length, ...headers })
      // truncatelate: the header (the first range) whole, tensor bodies cut.
      const cut = mode === 'truncate' || (mode === 'truncatelate' && status === 206 && !String(headers['Content-Range']).startsWith('bytes 0-'))
      if (cut && data.length > 16) {
        const half = data.subarray(0, data.length >> 1)
        bytesSent += half.length
        res.write(half, () => res.destroy())
        return
      }
      bytesSent += data.length
      res.end(data)
    }
    const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
    if (!range || mode === 'norange') return send(200, {}, body)
    const start = Number(range[1])
    const end = Math.min(Number(range[2]), body.length - 1)
    if (start >= body.length) {
      res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }).end()
      return
    }
    const shownStart = mode === 'badrange' ? start + 1 : start
    send(206, { 'Content-Range': `bytes ${shownStart}-${end}/${body.length}` }, body.subarray(start, end + 1))
  }
  server = createServer(handle)
  other = createServer((req, res) => {
    otherSeen.push({ url: req.url!, headers: req.headers })
    handle(req, res)
  })
  const listen = (s: Server) => new Promise<string>((r) => s.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)))
  return Promise.all([listen(server), listen(other)])
}

/** ~90 MB Llama-like F32 checkpoint: 45 tensors of 2 MiB. */
const big = join(root, 'big.safetensors')
function writeBig() {
  const tensors: Record<string, TensorInput> = {}
  for (let i = 0; i < 45; i++) {
    tensors[`model.layers.${i}.mlp.weight`] = { shape: [512, 1024], data: Float32Array.from({ length: 512 * 1024 }, (_, j) => ((i * 7919 + j) % 1000) / 999 - 0.5) }
  }
  saveFile(big, tensors)
}

/** Whether two typed arrays hold the same bytes (bit for bit, NaN payloads included). */
function sameBits(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))
}

/** The slice `ranges` (`[start, end)` of the leading one or two dimensions) of a row-major tensor. */
function cut(all: Float32Array, shape: number[], ranges: ReadonlyArray<readonly [number, number]>) {
  const [[r0, r1], [c0, c1] = [0, shape[1] ?? 1]] = ranges
  const cols = shape[1] ?? 1
  const width = c1 - c0
  const data = Float32Array.from({ length: (r1 - r0) * width }, (_, i) => all[(r0 + Math.floor(i / width)) * cols + c0 + (i % width)])
  return { shape: shape.length === 1 ? [r1 - r0] : [r1 - r0, width, ...shape.slice(2)], data }
}

beforeAll(async () => {
  writeBig()
  const sharded = join(root, 'sharded')
  mkdirSync(sharded)
  const weightMap: Record<string, string> = {}
  for (let s = 0; s < 3; s++) {
    const file = `model-0000${s + 1}-of-00003.safetensors`
    saveFile(join(sharded, file), { [`layer.${s}`]: { dtype: 'BF16', shape: [4, 8], data: Float32Array.from({ length: 32 }, (_, i) => i / 4 + s) } })
    weightMap[`layer.${s}`] = file
  }
  writeFileSync(join(sharded, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 192 }, weight_map: weightMap }))
  writeFileSync(join(sharded, 'config.json'), JSON.stringify({ model_type: 'tiny', hidden: 8 }))
  const single = join(root, 'single')
  mkdirSync(single)
  saveFile(join(single, 'model.safetensors'), { w: { shape: [3], data: new Float32Array([1, 2, 3]) } })
  writeFileSync(join(single, 'config.json'), '{"model_type":"x"}')
  const mlx = join(root, 'mlx')
  mkdirSync(mlx)
  writeFileSync(join(mlx, 'weights.mlx'), JSON.stringify({ version: '1', weights: { a: { shape: [2], dtype: 'float16', data: [0.5, 2] } } }))
  writeFileSync(join(mlx, 'config.json'), '{}')
  const evil = join(root, 'evil')
  mkdirSync(evil)
  writeFileSync(join(evil, 'config.json'), '{}')
  writeFileSync(join(evil, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { x: '../big.safetensors' } }))
  ;[base, otherBase] = await serve()
}, 120_000)

afterAll(() => Promise.all([server, other].map((s) => new Promise<void>((r) => s.close(() => r())))))

const fast = { timeoutMs: 1500, retries: 1, retryDelayMs: 20 }

describe('SafeTensorsFile.openUrl', () => {
  it('opening a 90 MB model transfers under 1% of it; one tensor about its own size; bit-exact', async () => {
    const size = statSync(big).size
    expect(size).toBeGreaterThan(90_000_000)
    bytesSent = 0
    const f = await SafeTensorsFile.openUrl(`${base}/ok/big.safetensors`)
    expect(bytesSent).toBeLessThan(size / 100)
    expect(f.bytesFetched).toBe(bytesSent)
    const local = SafeTensorsFile.open(big)
    expect(f.tensorNames).toEqual(local.tensorNames)
    expect(f.byteLength).toBe(size)
    expect(f.info('model.layers.7.mlp.weight')).toEqual(local.info('model.layers.7.mlp.weight'))
    bytesSent = 0
    const t = await f.getTensorAsync('model.layers.7.mlp.weight')
    expect(bytesSent).toBe(512 * 1024 * 4)
    expect(Buffer.from((t.data as Float32Array).buffer).equals(Buffer.from((local.getTensor('model.layers.7.mlp.weight', { copy: true }).data as Float32Array).buffer))).toBe(true)
    const raw = await f.getTensorAsync('model.layers.44.mlp.weight', { as: 'raw' })
    expect(raw.data.length).toBe(512 * 1024 * 4)
    bytesSent = 0
    const slice = await f.getSliceAsync('model.layers.3.mlp.weight', [[10, 12]])
    expect(slice.shape).toEqual([2, 1024])
    expect(bytesSent).toBe(2 * 1024 * 4)
    expect(Array.from(slice.data as Float32Array)).toEqual(Array.from(local.getSlice('model.layers.3.mlp.weight', [[10, 12]]).data as Float32Array))
  })

  it('every read of a remote file is a Promise: getTensor, getSlice and tensors, and their …Async aliases', async () => {
    const f = await SafeTensorsFile.openUrl(`${base}/ok/big.safetensors`)
    const local = SafeTensorsFile.open(big)
    const name = 'model.layers.0.mlp.weight'
    const read = f.getTensor(name)
    expect(read).toBeInstanceOf(Promise)
    expect(Buffer.from(((await read).data as Float32Array).buffer).equals(Buffer.from((local.getTensor(name).data as Float32Array).buffer))).toBe(true)
    expect((await f.getSlice(name, [0])).shape).toEqual([1024])
    expect((await f.getSliceAsync(name, [0])).data).toEqual((await f.getSlice(name, [0])).data)
    await expect(f.getTensor('nope')).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', tensor: 'nope' })
    await expect(f.getTensorAsync('nope')).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    await expect(f.getSlice('nope', [0])).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    f.close()
    expect(() => f.tensorNames).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
    await expect(f.getTensor(name)).rejects.toMatchObject({ code: 'ERR_CLOSED' })
  })

  it('a server that ignores Range: the body is streamed once and served from memory', async () => {
    bytesSent = 0
    const f = await SafeTensorsFile.openUrl(`${base}/norange/single/model.safetensors`)
    const sent = bytesSent
    expect(Array.from((await f.getTensor('w')).data as Float32Array)).toEqual([1, 2, 3])
    expect(Array.from((await f.getTensorAsync('w')).data as Float32Array)).toEqual([1, 2, 3])
    expect(bytesSent).toBe(sent)
  })

  it('truncated bodies, stalls, 500s, wrong Content-Range and 404 give their codes with the URL', async () => {
    const cases: Array<[string, string]> = [
      [`${base}/truncate/big.safetensors`, 'ERR_IO'],
      [`${base}/stall/big.safetensors`, 'ERR_IO'],
      [`${base}/500/big.safetensors`, 'ERR_IO'],
      [`${base}/badrange/big.safetensors`, 'ERR_IO'],
      [`${base}/ok/missing.safetensors`, 'ERR_NOT_FOUND'],
    ]
    for (const [url, code] of cases) {
      const started = Date.now()
      await expect(SafeTensorsFile.openUrl(url, fast)).rejects.toMatchObject({ code, path: url, message: expect.stringContaining(url) })
      expect(Date.now() - started).toBeLessThan(10_000)
    }
    // A truncated tensor body after a good open: ERR_INCOMPLETE_FILE or ERR_IO, never a hang.
    const f = await SafeTensorsFile.openUrl(`${base}/truncatelate/big.safetensors`, fast)
    await expect(f.getTensorAsync('model.layers.1.mlp.weight')).rejects.toMatchObject({ code: expect.stringMatching(/ERR_IO|ERR_INCOMPLETE_FILE/) })
  }, 60_000)

  it('a header that fails validation has the same code as a local file', async () => {
    writeFileSync(join(root, 'bad.safetensors'), Buffer.concat([Buffer.from([8, 0, 0, 0, 0, 0, 0, 0]), Buffer.from('{"a":1} ')]))
    await expect(SafeTensorsFile.openUrl(`${base}/ok/bad.safetensors`)).rejects.toMatchObject({ code: 'ERR_INVALID_HEADER' })
  })
})

describe('Model.loadPretrained(url)', () => {
  it('loads a sharded directory lazily, bit-exact, with progress', async () => {
    const events: any[] = []
    const model = await Model.loadPretrained(`${base}/ok/sharded/`, { onProgress: (p) => events.push(p) })
    expect(model.format).toBe('sharded-safetensors')
    expect(model.config).toEqual({ model_type: 'tiny', hidden: 8 })
    expect(model.files).toEqual(['model-00001-of-00003.safetensors', 'model-00002-of-00003.safetensors', 'model-00003-of-00003.safetensors'])
    expect(events.map((e) => e.file)).toEqual(model.files)
    const local = await Model.loadPretrained(join(root, 'sharded'))
    for (const name of local.tensorNames) {
      expect(Array.from((await model.getTensorAsync(name)).data as Float32Array)).toEqual(Array.from(local.getTensor(name).data as Float32Array))
    }
    expect(model.numParameters).toBe(local.numParameters)
  })

  it('follows the discovery order (a 404 means try the next) and reads weights.mlx', async () => {
    const single = await Model.loadPretrained(`${base}/ok/single`)
    expect(single.files).toEqual(['model.safetensors'])
    const mlx = await Model.loadPretrained(`${base}/ok/mlx`, { as: 'F32' })
    expect(mlx.format).toBe('mlx')
    expect(Array.from((await mlx.getTensor('a')).data as Float32Array)).toEqual([0.5, 2])
  })

  it('a shard outside the base URL is ERR_UNSAFE_PATH; missing config is ERR_NOT_FOUND', async () => {
    await expect(Model.loadPretrained(`${base}/ok/evil/`)).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH' })
    await expect(Model.loadPretrained(`${base}/ok/nothing/`)).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    await expect(Model.loadPretrained(`${base}/500/sharded/`, fast)).rejects.toMatchObject({ code: 'ERR_IO' })
    expect(() => Model.loadPretrainedSync(`${base}/ok/single`)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
  })
})

/**
 * The caller's headers go only to the origin of the model it named, and a model's files are
 * read only from under its URL: a shard name holding TAB, LF or CR (which a URL parser
 * deletes) must not make another host, or another directory, out of it.
 */
describe('requests and credentials stay with the model the caller named', () => {
  const secrets = { Authorization: 'Bearer s3cret-token', 'X-Api-Key': 's3cret-key' }
  const carriesSecret = (h: IncomingMessage['headers']) => h.authorization !== undefined || h['x-api-key'] !== undefined
  /** A model directory at `/ok/<name>/` whose index names `shard` for its one tensor. */
  const hostile = (name: string, shard: string) => {
    const dir = join(root, name)
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'config.json'), '{}')
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { w: shard } }))
    return `${base}/ok/${name}/`
  }

  it('a shard name that a URL parser would turn into another host or a parent directory is ERR_UNSAFE_PATH everywhere; nothing is sent', async () => {
    const host = otherBase.slice('http://'.length)
    const urls = [
      hostile('escape-tab-host', `\t/\t/${host}/ok/single/model.safetensors`),
      hostile('escape-lf-host', `\n/\n/${host}/ok/single/model.safetensors`),
      hostile('escape-cr-up', '.\r./single/model.safetensors'),
      hostile('escape-tab-up', '.\t./single/model.safetensors'),
    ]
    otherSeen.length = 0
    const out = tempDir('remote-escape-')
    for (const url of urls) {
      const options = { ...fast, headers: secrets }
      await expect(Model.loadPretrained(url, options), url).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH', message: expect.stringContaining('not a plain relative path') })
      await expect(inspect(url, options), url).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH' })
      expect(await validate(url, options), url).toMatchObject({ ok: false, errors: [{ code: 'ERR_UNSAFE_PATH' }] })
      await expect(convert(url, join(out, 'x.safetensors'), { ...options, to: 'safetensors' }), url).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH' })
      const cli = await promisify(execFile)(process.execPath, [BIN, 'inspect', url], { env: { ...process.env, NO_COLOR: '1' } }).catch((e) => e)
      expect(cli.code, url).toBe(1)
      expect(cli.stderr, url).toMatch(/^error\[ERR_UNSAFE_PATH\]/)
    }
    expect(otherSeen).toEqual([])
  }, 60_000)

  it('a redirect to another origin is followed without the caller\'s headers; the origin named gets them', async () => {
    otherSeen.length = 0
    const model = await Model.loadPretrained(`${base}/redirect/sharded/`, { headers: secrets })
    expect(Array.from((await model.getTensorAsync('layer.1')).data as Float32Array)).toEqual(Array.from((await Model.loadPretrained(join(root, 'sharded'))).getTensor('layer.1').data as Float32Array))
    const file = await SafeTensorsFile.openUrl(`${base}/redirect/single/model.safetensors`, { headers: secrets })
    expect(Array.from((await file.getTensorAsync('w')).data as Float32Array)).toEqual([1, 2, 3])
    expect((await inspect(`${base}/redirect/single/model.safetensors`, { headers: secrets })).tensors).toHaveLength(1)
    expect(otherSeen.length).toBeGreaterThan(5)
    expect(otherSeen.filter((r) => carriesSecret(r.headers))).toEqual([])
    // The same server named by the caller is the model's origin: it gets them.
    otherSeen.length = 0
    await SafeTensorsFile.openUrl(`${otherBase}/ok/single/model.safetensors`, { headers: secrets })
    expect(otherSeen.map((r) => r.headers['x-api-key'])).toEqual(['s3cret-key'])
  })

  it('a URL\'s user:password is never in an error, its path or a report', async () => {
    const port = base.slice(base.lastIndexOf(':') + 1)
    const shown = (path: string) => `http://***@127.0.0.1:${port}${path}`
    const withUser = (path: string) => `http://user:pa55word@127.0.0.1:${port}${path}`
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['/ok/single/model.safetensors', () => SafeTensorsFile.openUrl(withUser('/ok/single/model.safetensors'), fast)],
      ['/ok/single/model.safetensors', () => openWeights(withUser('/ok/single/model.safetensors'), fast)],
      ['/ok/single.gguf', () => GgufFile.openUrl(withUser('/ok/single.gguf'), fast)],
      ['/ok/sharded/config.json', () => Model.loadPretrained(withUser('/ok/sharded/'), fast)],
      ['/ok/single/model.safetensors', () => inspect(withUser('/ok/single/model.safetensors'), fast)],
      ['/ok/single/model.safetensors', () => convert(withUser('/ok/single/model.safetensors'), join(tempDir('remote-creds-'), 'x.gguf'), { ...fast, to: 'gguf' })],
    ]
    for (const [path, call] of calls) {
      const e: any = await call().then(() => null, (x) => x)
      expect(e, path).toMatchObject({ code: expect.stringMatching(/^ERR_/), path: shown(path), message: expect.stringContaining(shown(path)) })
      expect(`${e.message} ${JSON.stringify({ ...e })}`, path).not.toContain('pa55word')
    }
    const report = await validate(withUser('/ok/single/model.safetensors'), fast)
    expect(report).toMatchObject({ ok: false, path: shown('/ok/single/model.safetensors') })
    expect(JSON.stringify(report)).not.toContain('pa55word')
    const cli = await promisify(execFile)(process.execPath, [BIN, 'validate', withUser('/ok/single/model.safetensors')], { env: { ...process.env, NO_COLOR: '1' } }).catch((x) => x)
    expect(cli.code).toBe(1)
    expect(`${cli.stdout}${cli.stderr}`).toContain(shown('/ok/single/model.safetensors'))
    expect(`${cli.stdout}${cli.stderr}`).not.toContain('pa55word')
  }, 60_000)
})

/**
 * One table of directory listings, loaded from disk and over HTTP: the core's rules decide
 * both (discovery, shard names, index and config parsing, shard checks), so the verdict, the
 * code and the message (less its path, which is a file there and a URL here) are the same.
 */
describe('model directories: the same verdict locally and remotely', () => {
  const tensor = (name: string, n: number) => ({ [name]: { shape: [n], data: new Float32Array(n).fill(n) } })
  const st = (tensors: Record<string, TensorInput>) => {
    const p = join(root, 'tmp.safetensors')
    saveFile(p, tensors)
    return readFileSync(p)
  }
  const index = (weightMap: Record<string, string>) => JSON.stringify({ metadata: { total_size: 0 }, weight_map: weightMap })
  const ok = '{"model_type": "x"}'
  const cases: Array<[string, Record<string, string | Buffer>, string | null]> = [
    ['single file', { 'config.json': ok, 'model.safetensors': st(tensor('w', 2)) }, null],
    ['weights.safetensors first', { 'config.json': ok, 'model.safetensors': st(tensor('m', 1)), 'weights.safetensors': st(tensor('w', 1)) }, null],
    ['shards in name order, one in a subdirectory', { 'config.json': ok, 'model.safetensors.index.json': index({ a: 'sub/s2.safetensors', b: 's1.safetensors' }), 'sub/s2.safetensors': st(tensor('a', 2)), 's1.safetensors': st({ ...tensor('b', 3), ...tensor('extra', 1) }) }, null],
    ['weights.mlx', { 'config.json': ok, 'weights.mlx': JSON.stringify({ weights: { w: { shape: [1], dtype: 'float32', data: [1] } } }) }, null],
    ['config.json not JSON', { 'config.json': '{"a":', 'model.safetensors': st(tensor('w', 1)) }, 'ERR_INVALID_MODEL'],
    ['config.json an array', { 'config.json': '[1]', 'model.safetensors': st(tensor('w', 1)) }, 'ERR_INVALID_MODEL'],
    ['no weights', { 'config.json': ok, 'pytorch_model.bin.txt': 'x' }, 'ERR_NO_WEIGHTS'],
    ['index not JSON', { 'config.json': ok, 'model.safetensors.index.json': '{' }, 'ERR_INVALID_MODEL'],
    ['index without weight_map', { 'config.json': ok, 'model.safetensors.index.json': '{"metadata": {}}' }, 'ERR_INVALID_MODEL'],
    ...['../up.safetensors', '/abs.safetensors', 'a/./b.safetensors', 'a//b.safetensors', './b.safetensors', 'a\\b.safetensors', '%2e%2e/x.safetensors', 'https:x.safetensors', '.\t./b.safetensors', 'b.safetensors\n', '\r/\r/x/b.safetensors', ' b.safetensors', 'a/b.safetensors ', 'a /b.safetensors', 'b\x7f.safetensors', 'b\x1b[2J.safetensors'].map(
      (name): [string, Record<string, string | Buffer>, string] => [`shard name ${JSON.stringify(name)}`, { 'config.json': ok, 'model.safetensors.index.json': index({ w: name }), 'a/b.safetensors': st(tensor('w', 1)), 'b.safetensors': st(tensor('w', 1)) }, 'ERR_UNSAFE_PATH'],
    ),
    ['a missing shard', { 'config.json': ok, 'model.safetensors.index.json': index({ w: 'gone.safetensors' }) }, 'ERR_INVALID_MODEL'],
    ['a shard that fails validation', { 'config.json': ok, 'model.safetensors.index.json': index({ w: 's.safetensors' }), 's.safetensors': st(tensor('w', 4)).subarray(0, -3) }, 'ERR_INVALID_MODEL'],
    ['a header length past the end', { 'config.json': ok, 'model.safetensors.index.json': index({ w: 's.safetensors' }), 's.safetensors': Buffer.from([200, 0, 0, 0, 0, 0, 0, 0, 123]) }, 'ERR_INVALID_MODEL'],
    ['the index places a tensor in a shard without it', { 'config.json': ok, 'model.safetensors.index.json': index({ w: 's1.safetensors', v: 's1.safetensors' }), 's1.safetensors': st(tensor('w', 1)) }, 'ERR_INVALID_MODEL'],
    ['a tensor in two shards', { 'config.json': ok, 'model.safetensors.index.json': index({ w: 's1.safetensors', v: 's2.safetensors' }), 's1.safetensors': st({ ...tensor('w', 1), ...tensor('v', 1) }), 's2.safetensors': st(tensor('v', 1)) }, 'ERR_INVALID_MODEL'],
    ['a broken single file', { 'config.json': ok, 'model.safetensors': Buffer.from([2, 0, 0, 0, 0, 0, 0, 0, 123, 125, 0]) }, 'ERR_INCOMPLETE_FILE'],
  ]

  /** The error's message without its path prefix, and where it points relative to the directory. */
  const verdict = (e: any, base: string) => {
    if (!e) return null
    const path = String(e.path ?? '')
    const message = String(e.message).startsWith(`${path}: `) ? String(e.message).slice(path.length + 2) : String(e.message)
    return { code: e.code, message, tensor: e.tensor, at: path.startsWith(base) ? path.slice(base.length).replace(/^\//, '') : path }
  }

  it.each(cases)('%s', async (name, files, code) => {
    const dir = join(root, 'layout', name.replace(/[^a-z0-9]+/gi, '-'))
    for (const [file, body] of Object.entries(files)) {
      mkdirSync(join(dir, file, '..'), { recursive: true })
      writeFileSync(join(dir, file), body)
    }
    const url = `${base}/ok/layout/${name.replace(/[^a-z0-9]+/gi, '-')}/`
    const local = await Model.loadPretrained(dir).then((m) => ({ m, e: null }), (e) => ({ m: null, e }))
    const remote = await Model.loadPretrained(url).then((m) => ({ m, e: null }), (e) => ({ m: null, e }))
    expect(local.e?.code ?? null, String(local.e)).toBe(code)
    expect(verdict(remote.e, url)).toEqual(verdict(local.e, dir))
    if (local.m && remote.m) {
      expect(remote.m.tensorNames).toEqual(local.m.tensorNames)
      expect(remote.m.files).toEqual(local.m.files)
      expect(remote.m.format).toBe(local.m.format)
    }
  })
})

describe('openWeights(url)', () => {
  it('SafeTensors and GGUF lazily, weights.mlx whole, recognised by their bytes', async () => {
    const st = await openWeights(`${base}/ok/single/model.safetensors`)
    expect(st.format).toBe('safetensors')
    expect(st.path).toBe(`${base}/ok/single/model.safetensors`)
    expect(st.info('w')).toMatchObject({ storedType: 'F32', dtype: 'F32', shape: [3], byteLength: 12 })
    expect(Array.from((await st.getTensorAsync('w')).data as Float32Array)).toEqual([1, 2, 3])
    const mlx = await openWeights(`${base}/ok/mlx/weights.mlx`)
    expect(mlx.format).toBe('mlx')
    expect(mlx.path).toBe(`${base}/ok/mlx/weights.mlx`)
    expect(Array.from((await mlx.getTensor('a')).data as Float32Array)).toEqual([0.5, 2])
    await convert(join(root, 'single', 'model.safetensors'), join(root, 'single.gguf'), { to: 'gguf' })
    // GGUF lazily too (range requests: __test__/gguf-file.spec.ts).
    const gguf = await openWeights(`${base}/ok/single.gguf`)
    expect(gguf.format).toBe('gguf')
    expect(Array.from((await gguf.getTensorAsync('w')).data as Float32Array)).toEqual([1, 2, 3])
    writeFileSync(join(root, 'archive.zip'), Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(60)]))
    await expect(openWeights(`${base}/ok/archive.zip`)).rejects.toMatchObject({ code: 'ERR_UNKNOWN_FORMAT', message: expect.stringContaining('a zip archive') })
    await expect(openWeights(`${base}/ok/nope.safetensors`)).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    expect(() => openWeightsSync(`${base}/ok/single/model.safetensors`)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
  })

  it('a split GGUF set by the URL of its first file: every file as one, by ranges, the tensors of the local read', async () => {
    const dir = join(root, 'split')
    mkdirSync(dir, { recursive: true })
    const tensors: Record<string, TensorInput> = {}
    for (let i = 0; i < 4; i++) tensors[`blk.${i}.weight`] = { shape: [64, 64], data: Float32Array.from({ length: 4096 }, (_, j) => Math.sin(i + j * 0.01)) }
    tensors['norm.f16'] = { dtype: 'F16', shape: [32], data: Float32Array.from({ length: 32 }, (_, j) => j / 8) }
    saveFile(join(dir, 'src.safetensors'), tensors)
    await convert(join(dir, 'src.safetensors'), join(dir, 'm.gguf'), { to: 'gguf', maxShardBytes: 20_000 })
    const set = require('node:fs').readdirSync(dir).filter((f: string) => f.startsWith('m-')).sort()
    expect(set.length).toBeGreaterThan(2)
    const n = String(set.length).padStart(5, '0')
    expect(set[0]).toBe(`m-00001-of-${n}.gguf`)
    const first = join(dir, set[0])
    const local = openWeightsSync(first)
    expect(local.metadata!['split.count']).toBe(set.length)
    const size = set.reduce((sum: number, f: string) => sum + statSync(join(dir, f)).size, 0)
    const url = `${base}/ok/split/${set[0]}`
    for (const open of [() => openWeights(url), () => GgufFile.openUrl(url), () => Model.loadPretrained(url)]) {
      const remote = await open()
      expect(remote.format).toBe('gguf')
      expect(remote.tensorNames).toEqual(local.tensorNames)
      expect(remote.tensorNames).toHaveLength(5)
      expect(remote.metadata).toEqual(local.metadata)
      expect((remote as unknown as { byteLength: number }).byteLength).toBe(size)
      for (const n of local.tensorNames) {
        expect(remote.info(n), n).toEqual(local.info(n))
        expect((await remote.getTensor(n)).data, n).toEqual(local.getTensor(n).data)
      }
      remote.close()
    }
    // As a model, as the local set is: its directory the URL's, its files the set's, no config.json.
    const model = await Model.loadPretrained(url)
    const localModel = Model.loadPretrainedSync(first)
    expect(model.dir).toBe(`${base}/ok/split/`)
    expect(model.files).toEqual(set)
    expect(localModel.files).toEqual(set)
    expect(model.config).toEqual({})
    expect(localModel.config).toEqual({})
    // inspect of the URL: the local report of the set (the copy holds every file's header).
    const report = await inspect(url)
    const localReport = await inspect(first)
    expect(JSON.parse(JSON.stringify(report).split(`${base}/ok/split`).join(dir))).toEqual(localReport)
    // A missing later file: the local error, naming its URL.
    const later = join(dir, set[2])
    const held = readFileSync(later)
    require('node:fs').rmSync(later)
    await expect(openWeights(url)).rejects.toMatchObject({ code: 'ERR_INVALID_GGUF', path: `${base}/ok/split/${set[2]}`, message: expect.stringContaining(`file 3 of the ${set.length} of this split GGUF is missing`) })
    writeFileSync(later, held)
  })

  it('PyTorch, NumPy and weights.mlx by URL: read whole (capped), the tensors of the local read', async () => {
    const fixtures = resolve(__dirname, '../../shared/fixtures/pytorch')
    const files: Array<[string, string, string]> = [
      [join(fixtures, 'hf_bin', 'pytorch_model.bin'), 'torch.bin', 'pytorch'],
      [join(fixtures, 'numpy', 'stored.npz'), 'arrays.npz', 'numpy'],
      [join(fixtures, 'numpy', 'c_float16.npy'), 'one.npy', 'numpy'],
      [join(root, 'mlx', 'weights.mlx'), 'weights.mlx', 'mlx'],
    ]
    for (const [src, name, format] of files) {
      writeFileSync(join(root, name), readFileSync(src))
      const local = openWeightsSync(join(root, name))
      bytesSent = 0
      const remote = await openWeights(`${base}/ok/${name}`)
      expect(remote.format, name).toBe(format)
      expect(remote.format).toBe(local.format)
      expect(remote.tensorNames).toEqual(local.tensorNames)
      expect(remote.metadata).toEqual(local.metadata)
      for (const n of local.tensorNames) {
        expect(remote.info(n), `${name} ${n}`).toEqual(local.info(n))
        expect((await remote.getTensor(n, { as: 'raw' })).data, `${name} ${n}`).toEqual(local.getTensor(n, { as: 'raw' }).data)
      }
      // Read whole once: the tensors come from memory.
      expect(bytesSent).toBe(statSync(join(root, name)).size)
    }
  })

  it('an .npz by URL is read by its zip headers: inspect reads a fraction of the file, getTensor is the local read', async () => {
    const path = join(root, 'large.npz')
    const script = "import numpy as np, sys; a = (np.arange(512 * 512, dtype='<f4') % 997).reshape(512, 512) / 7; np.savez(sys.argv[1], a=a, b=np.asfortranarray(a.T.astype('>f4')), small=np.arange(3, dtype='<i2'))"
    await promisify(execFile)(PYTHON, ['-c', script, path])
    const size = statSync(path).size
    bytesSent = 0
    const report = await inspect(`${base}/ok/large.npz`)
    expect(JSON.stringify(report)).toContain('"small"')
    expect(bytesSent).toBeGreaterThan(0)
    expect(bytesSent).toBeLessThan(size / 4)
    const local = openWeightsSync(path)
    const remote = await openWeights(`${base}/ok/large.npz` as `http://${string}`)
    expect(remote.tensorNames).toEqual(local.tensorNames)
    for (const n of local.tensorNames) {
      expect(remote.info(n), n).toEqual(local.info(n))
      expect((await remote.getTensor(n)).data, n).toEqual(local.getTensor(n).data)
    }
    // Slices: of the row-major array, its rows' bytes alone; of the big-endian Fortran-order
    // one, cut from its whole range as locally.
    const rows = (n: string, r0: number, r1: number, c0 = 0, c1 = 512) => {
      const all = local.getTensor(n).data as Float32Array
      return Float32Array.from({ length: (r1 - r0) * (c1 - c0) }, (_, i) => all[(r0 + Math.floor(i / (c1 - c0))) * 512 + c0 + (i % (c1 - c0))])
    }
    for (const [n, ranges, shape, want] of [
      ['a', [[100, 103]], [3, 512], rows('a', 100, 103)],
      ['b', [[5, 7], [10, 20]], [2, 10], rows('b', 5, 7, 10, 20)],
      ['b', [300], [512], rows('b', 300, 301)],
    ] as const) {
      bytesSent = 0
      const got = await remote.getSlice(n, ranges as any)
      expect(got.shape, n).toEqual(shape)
      expect(got.data, n).toEqual(want)
      if (n === 'a') expect(bytesSent).toBe(3 * 512 * 4)
    }
  })

  it('a .npy by URL is read by its header: inspect reads a fraction of the file, getTensor is the local read', async () => {
    const path = join(root, 'large.npy')
    await promisify(execFile)(PYTHON, ['-c', "import numpy as np, sys; np.save(sys.argv[1], np.asfortranarray((np.arange(512 * 512, dtype='>f4') % 991).reshape(512, 512)))", path])
    const size = statSync(path).size
    bytesSent = 0
    expect((await inspect(`${base}/ok/large.npy`)).tensors).toEqual([expect.objectContaining({ name: 'arr_0', shape: [512, 512] })])
    expect(bytesSent).toBeGreaterThan(0)
    expect(bytesSent).toBeLessThan(size / 4)
    const remote = await openWeights(`${base}/ok/large.npy` as `http://${string}`)
    bytesSent = 0
    expect((await remote.getTensor('arr_0')).data).toEqual(openWeightsSync(path).getTensor('arr_0').data)
    expect(bytesSent).toBe(512 * 512 * 4)
  })

  it('a legacy .pt by URL is read by its pickles and storage counts: inspect reads a fraction, every tensor and slice is the local read', async () => {
    const path = join(root, 'large-legacy.pt')
    const w = Float32Array.from({ length: 1024 * 1024 }, (_, i) => Math.sin(i) * 3)
    const b = Float32Array.from({ length: 64 }, (_, i) => i - 7.5)
    writeFileSync(path, legacyPt(LEGACY_TENSORS, [['0', w], ['1', b]]))
    const size = statSync(path).size
    expect(size).toBeGreaterThan(4 * 1024 * 1024)
    bytesSent = 0
    const report = await inspect(`${base}/ok/large-legacy.pt`)
    expect(report.tensors.map((t: { name: string }) => t.name)).toEqual(['w', 'wt', 'b', 'b.part'])
    expect(bytesSent).toBeGreaterThan(0)
    expect(bytesSent).toBeLessThan(size / 4)
    const local = openWeightsSync(path)
    bytesSent = 0
    const remote = await openWeights(`${base}/ok/large-legacy.pt` as `http://${string}`)
    expect(bytesSent).toBeLessThan(size / 4)
    expect(remote.format).toBe('pytorch')
    expect(remote.tensorNames).toEqual(local.tensorNames)
    for (const n of local.tensorNames) {
      expect(remote.info(n), n).toEqual(local.info(n))
      expect(sameBits((await remote.getTensor(n, { as: 'raw' })).data, local.getTensor(n, { as: 'raw' }).data), n).toBe(true)
    }
    bytesSent = 0
    expect(sameBits((await remote.getTensor('w')).data, w)).toBe(true)
    expect(bytesSent).toBe(w.byteLength)
    // Slices: of the row-major tensor, its rows alone; of the transposed view, cut from its range.
    for (const [n, ranges] of [['w', [[100, 103]]], ['wt', [[5, 7], [10, 20]]], ['b.part', [[2, 9]]]] as const) {
      bytesSent = 0
      const got = await remote.getSlice(n, ranges as any)
      const all = local.getTensor(n)
      const want = cut(all.data as Float32Array, all.shape, ranges)
      expect(got.shape, n).toEqual(want.shape)
      expect(sameBits(got.data, want.data), n).toBe(true)
      if (n === 'w') expect(bytesSent).toBe(3 * 1024 * 4)
    }
  })

  it('a legacy .pt that lies or is cut fails by URL with the local error code', async () => {
    const w = Float32Array.from({ length: 1024 * 1024 }, (_, i) => i % 251)
    const b = Float32Array.from({ length: 64 }, (_, i) => i)
    const good = legacyPt(LEGACY_TENSORS, [['0', w], ['1', b]])
    // The last storage's count: 8 bytes before its 64 floats at the end.
    const countAt = good.length - 64 * 4 - 8
    const lying = Buffer.from(good)
    lying.writeBigInt64LE(65n, countAt)
    const cases: Array<[string, Buffer, string, string]> = [
      ['lying.pt', lying, 'ERR_SIZE_MISMATCH', "storage '1' should hold 64 elements, the file says 65"],
      ['cut.pt', good.subarray(0, good.length - 1), 'ERR_INCOMPLETE_FILE', "storage '1' (256 bytes) runs past the end of the file"],
      ['nocount.pt', good.subarray(0, countAt + 3), 'ERR_INCOMPLETE_FILE', "storage '1' is missing (file truncated)"],
    ]
    for (const [name, bytes, code, message] of cases) {
      writeFileSync(join(root, name), bytes)
      expect(() => openWeightsSync(join(root, name)), name).toThrow(expect.objectContaining({ code, message: expect.stringContaining(message) }))
      bytesSent = 0
      await expect(openWeights(`${base}/ok/${name}`), name).rejects.toMatchObject({ code, message: expect.stringContaining(message) })
      expect(bytesSent, name).toBeLessThan(bytes.length / 4)
    }
  })

  it('a sharded .bin directory by URL (zip or legacy shards of several MB): each shard by its headers, each tensor by its range, the local read', async () => {
    const w = Float32Array.from({ length: 1024 * 1024 }, (_, i) => Math.cos(i) * 2)
    const b = Float32Array.from({ length: 64 }, (_, i) => i / 3)
    const named = (prefix: string) => LEGACY_TENSORS.map((t) => ({ ...t, name: prefix + t.name }))
    const shards = {
      zip: (prefix: string) => torchZip(Buffer.concat([pk.bytes('\x80\x02}('), ...named(prefix).flatMap((t) => [pk.str(t.name), pk.tensor(t.key, t.numel, t.offset, t.shape, t.stride)]), pk.bytes('u.')]), { 0: Buffer.from(w.buffer), 1: Buffer.from(b.buffer) }),
      legacy: (prefix: string) => legacyPt(named(prefix), [['0', w], ['1', b]]),
    }
    for (const [kind, shard] of Object.entries(shards)) {
      const name = `bin-sharded-${kind}`
      const dir = join(root, name)
      mkdirSync(dir)
      writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'tiny' }))
      const files = ['pytorch_model-00001-of-00002.bin', 'pytorch_model-00002-of-00002.bin']
      const weightMap: Record<string, string> = {}
      let size = 0
      files.forEach((file, i) => {
        const bytes = shard(`layer.${i}.`)
        size += bytes.length
        writeFileSync(join(dir, file), bytes)
        for (const t of named(`layer.${i}.`)) weightMap[t.name] = file
      })
      expect(size).toBeGreaterThan(8 * 1024 * 1024)
      writeFileSync(join(dir, 'pytorch_model.bin.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }))
      const url = `${base}/ok/${name}/`
      const local = Model.loadPretrainedSync(dir)
      bytesSent = 0
      const report = await inspect(url)
      expect(report.tensors.map((t: { name: string }) => t.name).sort(), kind).toEqual([...local.tensorNames].sort())
      expect(bytesSent, kind).toBeLessThan(size / 4)
      bytesSent = 0
      const model = await Model.loadPretrained(url)
      expect(bytesSent, kind).toBeLessThan(size / 4)
      expect(model.format).toBe('pytorch')
      expect(model.tensorNames).toEqual(local.tensorNames)
      for (const n of local.tensorNames) {
        expect(sameBits((await model.getTensorAsync(n, { as: 'raw' })).data, local.getTensor(n, { as: 'raw' }).data), `${kind} ${n}`).toBe(true)
        expect(sameBits((await model.getTensorAsync(n)).data, local.getTensor(n).data), `${kind} ${n}`).toBe(true)
      }
      // One tensor: its own range of the shard holding it; a slice of it: its rows alone.
      bytesSent = 0
      await model.getTensorAsync('layer.1.w')
      expect(bytesSent, kind).toBe(w.byteLength)
      bytesSent = 0
      const slice = await model.getSliceAsync('layer.1.w', [[100, 103]])
      expect(bytesSent, kind).toBe(3 * 1024 * 4)
      expect(sameBits(slice.data, local.getSlice('layer.1.w', [[100, 103]]).data), kind).toBe(true)
      // A damaged shard: the local error.
      const last = join(dir, files[1])
      writeFileSync(last, readFileSync(last).subarray(0, -1))
      const e: any = (() => {
        try {
          Model.loadPretrainedSync(dir)
        } catch (e) {
          return e
        }
      })()
      expect(e?.code, kind).toBe('ERR_INVALID_MODEL')
      await expect(Model.loadPretrained(url), kind).rejects.toMatchObject({ code: e.code, message: expect.stringContaining(files[1]) })
    }
  })

  it('a deflated .npz (np.savez_compressed) by URL: each array by its compressed range, the local read', async () => {
    const path = join(root, 'compressed.npz')
    const script = "import numpy as np, sys; r = np.random.default_rng(7); a = r.standard_normal((1024, 1024)).astype('<f4'); np.savez_compressed(sys.argv[1], a=a, b=np.asfortranarray(a[:512, :256].T.astype('>f4')), small=np.arange(3, dtype='<i2'))"
    await promisify(execFile)(PYTHON, ['-c', script, path])
    const size = statSync(path).size
    expect(size).toBeGreaterThan(3 * 1024 * 1024)
    bytesSent = 0
    expect(JSON.stringify(await inspect(`${base}/ok/compressed.npz`))).toContain('"small"')
    expect(bytesSent).toBeGreaterThan(0)
    expect(bytesSent).toBeLessThan(size / 4)
    const local = openWeightsSync(path)
    bytesSent = 0
    const remote = await openWeights(`${base}/ok/compressed.npz` as `http://${string}`)
    expect(bytesSent).toBeLessThan(size / 4)
    expect(remote.tensorNames).toEqual(local.tensorNames)
    for (const n of local.tensorNames) {
      expect(remote.info(n), n).toEqual(local.info(n))
      bytesSent = 0
      expect(sameBits((await remote.getTensor(n)).data, local.getTensor(n).data), n).toBe(true)
      // One member's compressed bytes, not the file's.
      if (n === 'b') expect(bytesSent).toBeLessThan(size / 4)
    }
    for (const [n, ranges] of [['a', [[100, 103]]], ['b', [[5, 7], [10, 20]]]] as const) {
      const got = await remote.getSlice(n, ranges as any)
      const all = local.getTensor(n)
      const want = cut(all.data as Float32Array, all.shape, ranges)
      expect(got.shape, n).toEqual(want.shape)
      expect(sameBits(got.data, want.data), n).toBe(true)
    }
  })

  it('info() of every remote reader is the TensorInfo the local reader gives, keys and values', async () => {
    const keys = ['name', 'dtype', 'storedType', 'shape', 'byteLength', 'numel', 'dataOffsets']
    const file = join(root, 'sharded', 'model-00002-of-00003.safetensors')
    const local = openWeightsSync(file)
    for (const remote of [await SafeTensorsFile.openUrl(`${base}/ok/sharded/model-00002-of-00003.safetensors`), await openWeights(`${base}/ok/sharded/model-00002-of-00003.safetensors`)]) {
      expect(Object.keys(remote.info('layer.1'))).toEqual(keys)
      expect(remote.info('layer.1')).toEqual(local.info('layer.1'))
    }
    const model = await Model.loadPretrained(`${base}/ok/sharded/`)
    const localModel = Model.loadPretrainedSync(join(root, 'sharded'))
    for (const name of localModel.tensorNames) {
      expect(Object.keys(model.info(name)), name).toEqual(keys)
      expect(model.info(name), name).toEqual(localModel.info(name))
    }
    expect(model.info('layer.2')).toMatchObject({ dtype: 'BF16', storedType: 'BF16', shape: [4, 8], byteLength: 64 })
    await expect(Promise.resolve().then(() => model.info('nope'))).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    await convert(file, join(root, 'info.gguf'), { to: 'gguf' })
    const gguf = GgufFile.open(join(root, 'info.gguf'))
    for (const remote of [await GgufFile.openUrl(`${base}/ok/info.gguf`), await openWeights(`${base}/ok/info.gguf`)]) {
      expect(Object.keys(remote.info('layer.1'))).toEqual([...keys, 'ggmlType', 'offset'])
      expect(remote.info('layer.1')).toEqual(gguf.info('layer.1'))
    }
  })
})
