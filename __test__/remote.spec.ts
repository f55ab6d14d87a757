import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createServer, type Server } from 'node:http'
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { Model, SafeTensorsFile, saveFile, type TensorInput } from '../index.js'
import { tempDir } from './helpers'

/**
 * A real HTTP server on 127.0.0.1 serving `root` with `Range` support, counting the body
 * bytes it sends. The first path segment picks a behaviour: ok, norange (ignores Range),
 * truncate (closes mid-body), stall (never answers), 500, badrange (wrong Content-Range).
 */
let server: Server
let base: string
let bytesSent = 0
const root = tempDir('remote-')

function serve() {
  server = createServer((req, res) => {
    const [, mode, ...rest] = decodeURIComponent(new URL(req.url!, 'http://x').pathname).split('/')
    const path = join(root, ...rest)
    if (mode === 'stall') return // never answer: the client must time out
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
      if (mode === 'truncate' && data.length > 16) {
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
  })
  return new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
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
  await serve()
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}, 120_000)

afterAll(() => new Promise<void>((r) => server.close(() => r())))

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

  it('sync accessors that need the network throw ERR_INVALID_ARGUMENT pointing at the async one', async () => {
    const f = await SafeTensorsFile.openUrl(`${base}/ok/big.safetensors`)
    expect(() => f.getTensor('model.layers.0.mlp.weight')).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('getTensorAsync') }))
    expect(() => f.getSlice('model.layers.0.mlp.weight', [0])).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    expect(() => f.tensors()).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    await expect(f.getTensorAsync('nope')).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
  })

  it('a server that ignores Range: the body is streamed once and served from memory', async () => {
    bytesSent = 0
    const f = await SafeTensorsFile.openUrl(`${base}/norange/single/model.safetensors`)
    const sent = bytesSent
    expect(Array.from(f.getTensor('w').data as Float32Array)).toEqual([1, 2, 3])
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
    const f = await SafeTensorsFile.openUrl(`${base}/ok/big.safetensors`, fast)
    ;(f as any).url = `${base}/truncate/big.safetensors`
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
    expect(Array.from(mlx.getTensor('a').data as Float32Array)).toEqual([0.5, 2])
  })

  it('a shard outside the base URL is ERR_UNSAFE_PATH; missing config is ERR_NOT_FOUND', async () => {
    await expect(Model.loadPretrained(`${base}/ok/evil/`)).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH' })
    await expect(Model.loadPretrained(`${base}/ok/nothing/`)).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    await expect(Model.loadPretrained(`${base}/500/sharded/`, fast)).rejects.toMatchObject({ code: 'ERR_IO' })
    expect(() => Model.loadPretrainedSync(`${base}/ok/single`)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
  })
})
