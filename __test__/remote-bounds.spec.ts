import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { gzipSync } from 'node:zlib'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { Model, SafeTensorsFile, serialize } from '../index.js'

/**
 * The HTTP layer's bounds against hostile or broken servers (lib/remote.js): a client reads at
 * most the bytes it asked for (plus one network chunk), refuses a declared length beyond them
 * before reading, never decompresses a range, caps whole-file reads (config.json 16 MiB,
 * index 64 MiB, a server that ignores Range 16 MiB), and notices a file replaced on the server
 * after open. The memory cases run the client in a child process and measure its peak RSS.
 */

const MiB = 1024 * 1024
const CLIENT = join(__dirname, 'child/remote_client.cjs')
const RSS_BOUND = 150 * MiB
const HUGE = 512 * MiB

let server: Server
let base: string
const requests: Array<{ url: string; headers: IncomingMessage['headers'] }> = []

/** Stream `n` bytes of zeros, respecting backpressure, stopping when the client goes away. */
function streamZeros(res: ServerResponse, n: number) {
  const chunk = Buffer.alloc(64 * 1024)
  let left = n
  let closed = false
  res.on('close', () => (closed = true))
  const pump = () => {
    while (left > 0 && !closed) {
      const part = left >= chunk.length ? chunk : chunk.subarray(0, left)
      left -= part.length
      if (!res.write(part)) return void res.once('drain', pump)
    }
    if (!closed) res.end()
  }
  pump()
}

/** 512 MiB of zeros as ~512 gzip members of 1 MiB each (~0.5 MB on the wire). */
const gzipBomb = (() => {
  const member = gzipSync(Buffer.alloc(MiB))
  return Buffer.concat(Array.from({ length: HUGE / MiB }, () => member))
})()

/** Files the `mutable*` routes serve; a test replaces them between requests. */
const files = new Map<string, { body: Buffer; etag?: string; lastModified?: string }>()

function rangeOf(req: IncomingMessage) {
  const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
  return m ? [Number(m[1]), Number(m[2])] : null
}

function handle(req: IncomingMessage, res: ServerResponse) {
  requests.push({ url: req.url!, headers: req.headers })
  const [, mode, ...rest] = new URL(req.url!, 'http://x').pathname.split('/')
  const name = rest.join('/')
  const range = rangeOf(req)
  const asked = range ? `bytes ${range[0]}-${range[1]}` : ''
  switch (mode) {
    case 'endless206': // the range asked for, then 512 MiB more, chunked
      res.writeHead(206, { 'Content-Range': `${asked}/${HUGE}` })
      return streamZeros(res, HUGE)
    case 'gzip206': // a gzip body on a 206 although the request said identity
      res.writeHead(206, { 'Content-Range': `${asked}/${HUGE}`, 'Content-Encoding': 'gzip', 'Content-Length': gzipBomb.length })
      return res.end(gzipBomb)
    case 'big200': // ignores Range: 512 MiB, chunked (no length to refuse up front)
      res.writeHead(200)
      return streamZeros(res, HUGE)
    case 'big200cl': // ignores Range: 512 MiB with its Content-Length
      res.writeHead(200, { 'Content-Length': HUGE })
      return streamZeros(res, HUGE)
    case 'cl20g': // a 206 declaring 20 GiB
      res.writeHead(206, { 'Content-Range': `${asked}/${20 * 1024 * MiB}`, 'Content-Length': 20 * 1024 * MiB })
      return streamZeros(res, HUGE)
    case 'cl20gconfig': // config.json declared as 20 GiB
      if (name.endsWith('config.json')) {
        res.writeHead(200, { 'Content-Length': 20 * 1024 * MiB })
        return streamZeros(res, HUGE)
      }
      return res.writeHead(404).end()
    case 'bigindex': // a directory whose index declares 100 MiB, or whose weights.mlx declares 2 GiB
    case 'bigmlx': // (served by range: what a weights.mlx starts with; whole, it is 2 GiB of zeros)
    case 'bigmlx200': { // (the server ignores Range)
      if (name.endsWith('config.json')) return res.writeHead(200, { 'Content-Length': 2 }).end('{}')
      const huge = mode === 'bigindex' ? name.endsWith('model.safetensors.index.json') && 100 * MiB : name.endsWith('weights.mlx') && 2048 * MiB
      if (!huge) return res.writeHead(404).end()
      if (mode === 'bigmlx' && range) {
        const n = range[1] - range[0] + 1
        const head = Buffer.from('{"version": "1", "weights": {"w": {"shape": [1], "dtype": "float32", "data": [')
        res.writeHead(206, { 'Content-Range': `${asked}/${huge}`, 'Content-Length': n })
        return res.end(Buffer.concat([head, Buffer.alloc(n - head.length)]))
      }
      res.writeHead(200, { 'Content-Length': huge })
      return streamZeros(res, Math.min(huge, HUGE))
    }
    case 'bigconfig': // a 256 MiB config.json (chunked, or with its length)
    case 'bigconfigcl':
      if (name.endsWith('config.json')) {
        res.writeHead(200, mode === 'bigconfigcl' ? { 'Content-Length': 256 * MiB } : {})
        return streamZeros(res, 256 * MiB)
      }
      return res.writeHead(404).end()
    case 'mutable': // honours Range and If-Range, sends the validators it has
    case 'mutable-noifrange': // honours Range, ignores If-Range
    case 'mutable-morebytes': // a 206 whose Content-Range ends past the range asked for
    case 'mutable-bigcl': // a 206 declaring more bytes than the range
    case 'mutable-gzip200': { // a range answered 200 with gzip
      const f = files.get(name)
      if (!f) return res.writeHead(404).end()
      const validators: Record<string, string> = {}
      if (f.etag) validators.ETag = f.etag
      if (f.lastModified) validators['Last-Modified'] = f.lastModified
      const ifRange = req.headers['if-range']
      const current = ifRange === undefined || ifRange === f.etag || ifRange === f.lastModified
      if (mode === 'mutable-gzip200') {
        const z = gzipSync(f.body)
        return res.writeHead(200, { ...validators, 'Content-Encoding': 'gzip', 'Content-Length': z.length }).end(z)
      }
      if (!range || (mode === 'mutable' && !current)) return res.writeHead(200, { ...validators, 'Content-Length': f.body.length }).end(f.body)
      const end = Math.min(range[1], f.body.length - 1)
      const shownEnd = mode === 'mutable-morebytes' ? end + 10 : end
      const part = f.body.subarray(range[0], shownEnd + 1)
      const length = mode === 'mutable-bigcl' ? part.length + 1000 : part.length
      res.writeHead(206, { ...validators, 'Content-Range': `bytes ${range[0]}-${shownEnd}/${f.body.length}`, 'Content-Length': length })
      return mode === 'mutable-bigcl' ? res.end(Buffer.concat([part, Buffer.alloc(1000)])) : res.end(part)
    }
  }
  res.writeHead(404).end()
}

beforeAll(async () => {
  server = createServer(handle)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(() => {
  server.closeAllConnections()
  return new Promise<void>((r) => server.close(() => r()))
})

interface ClientReport {
  ok: boolean
  code?: string
  message?: string
  tensors?: number
  length?: number
  maxRSSKiB: number
}

function client(how: 'open' | 'load', url: string, options?: object, tensor?: string): Promise<ClientReport> {
  return new Promise((resolve, reject) => {
    const args = [CLIENT, how, url, JSON.stringify(options ?? {})]
    if (tensor) args.push(tensor)
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (code !== 0) return reject(new Error(`client exited ${code ?? signal}: ${err}`))
      resolve(JSON.parse(out.trim().split('\n').pop()!))
    })
  })
}

const fast = { timeoutMs: 20_000, retries: 0 }

describe('remote reads hold only what they asked for (peak RSS of the client < 150 MiB)', () => {
  const cases: Array<[string, 'open' | 'load', string, string, RegExp]> = [
    ['an endless 206 (512 MiB for a 100 KiB range)', 'open', '/endless206/m.safetensors', 'ERR_IO', /more than the 102400 bytes asked for/],
    ['a 510 KB gzip body on a 206 (512 MiB inflated)', 'open', '/gzip206/m.safetensors', 'ERR_IO', /Content-Encoding 'gzip'.*not read/],
    ['a 200 with 512 MiB, chunked, to a range request', 'open', '/big200/m.safetensors', 'ERR_IO', /ignores Range requests and the file is larger than 16 MiB/],
    ['a 200 with a Content-Length of 512 MiB to a range request', 'open', '/big200cl/m.safetensors', 'ERR_IO', /ignores Range requests and the file is larger than 16 MiB \(536870912 bytes/],
    ['a 206 declaring a Content-Length of 20 GiB', 'open', '/cl20g/m.safetensors', 'ERR_IO', /declares 21474836480 bytes for a range of 102400; it is not read/],
    ['a config.json declaring 20 GiB', 'load', '/cl20gconfig/dir/', 'ERR_INVALID_MODEL', /config.json is larger than 16 MiB \(21474836480 bytes/],
    ['a 256 MiB config.json, chunked', 'load', '/bigconfig/dir/', 'ERR_INVALID_MODEL', /config.json is larger than 16 MiB/],
    ['a 256 MiB config.json with its Content-Length', 'load', '/bigconfigcl/dir/', 'ERR_INVALID_MODEL', /config.json is larger than 16 MiB \(268435456 bytes/],
    ['a sharded index declaring 100 MiB', 'load', '/bigindex/dir/', 'ERR_INVALID_MODEL', /model.safetensors.index.json is larger than 64 MiB \(104857600 bytes/],
    ['a weights.mlx declaring 2 GiB', 'load', '/bigmlx/dir/', 'ERR_INVALID_MLX', /weights.mlx is larger than 1024 MiB \(2147483648 bytes/],
    // Files are recognised by their first range, so a server that ignores Range gets the cap of any whole answer.
    ['a weights.mlx of 2 GiB from a server that ignores Range', 'load', '/bigmlx200/dir/', 'ERR_IO', /ignores Range requests and the file is larger than 16 MiB \(2147483648 bytes/],
  ]
  for (const [what, how, path, code, message] of cases) {
    it(what, async () => {
      const r = await client(how, base + path, fast)
      expect(r).toMatchObject({ ok: false, code, message: expect.stringMatching(message) })
      expect(r.maxRSSKiB * 1024).toBeLessThan(RSS_BOUND)
    }, 60_000)
  }
})

describe('a file replaced on the server after open', () => {
  // Larger than the first range (100 KiB), so that the tensor is a range of its own.
  const N = 40_000
  const values = (from: number, n = N) => Float32Array.from({ length: n }, (_, i) => from + i)
  const v1 = serialize({ w: { shape: [N], data: values(1) } })
  const v2same = serialize({ w: { shape: [N], data: values(5) } })
  const v2longer = serialize({ w: { shape: [N + 2], data: values(5, N + 2) } })
  const changed = { code: 'ERR_IO', message: expect.stringMatching(/changed on the server since it was opened/) }

  it('unchanged: each range carries If-Range with the ETag and reads the data', async () => {
    files.set('a.safetensors', { body: v1, etag: '"v1"' })
    const f = await SafeTensorsFile.openUrl(`${base}/mutable/a.safetensors`)
    requests.length = 0
    expect((await f.getTensorAsync('w')).data).toEqual(values(1))
    expect(requests.map((r) => r.headers['if-range'])).toEqual(['"v1"'])
    // fetch sends `identity` itself with a Range header (possibly twice, as a list).
    expect(String(requests[0].headers['accept-encoding']).split(',').map((e) => e.trim())).toEqual(expect.arrayContaining(['identity']))
    expect(String(requests[0].headers['accept-encoding'])).not.toMatch(/gzip|deflate|br/)
  })

  it('same size, new ETag, server honours If-Range (answers 200): changed', async () => {
    files.set('b.safetensors', { body: v1, etag: '"v1"' })
    const f = await SafeTensorsFile.openUrl(`${base}/mutable/b.safetensors`)
    files.set('b.safetensors', { body: v2same, etag: '"v2"' })
    await expect(f.getTensorAsync('w')).rejects.toMatchObject(changed)
    await expect(f.getSliceAsync('w', [[0, 2]])).rejects.toMatchObject(changed)
  })

  it('same size, new ETag, server ignores If-Range (answers 206): changed', async () => {
    files.set('c.safetensors', { body: v1, etag: '"v1"' })
    const f = await SafeTensorsFile.openUrl(`${base}/mutable-noifrange/c.safetensors`)
    files.set('c.safetensors', { body: v2same, etag: '"v2"' })
    await expect(f.getTensorAsync('w')).rejects.toMatchObject({ ...changed, message: expect.stringContaining('ETag "v1" → "v2"') })
  })

  it('Last-Modified only: it goes in If-Range, and a newer file is refused', async () => {
    files.set('d.safetensors', { body: v1, lastModified: 'Tue, 21 May 2024 10:00:00 GMT' })
    const f = await SafeTensorsFile.openUrl(`${base}/mutable/d.safetensors`)
    files.set('d.safetensors', { body: v2same, lastModified: 'Tue, 21 May 2024 11:00:00 GMT' })
    requests.length = 0
    await expect(f.getTensorAsync('w')).rejects.toMatchObject(changed)
    expect(requests[0].headers['if-range']).toBe('Tue, 21 May 2024 10:00:00 GMT')
    // Ignoring If-Range does not help it either.
    files.set('e.safetensors', { body: v1, lastModified: 'Tue, 21 May 2024 10:00:00 GMT' })
    const g = await SafeTensorsFile.openUrl(`${base}/mutable-noifrange/e.safetensors`)
    files.set('e.safetensors', { body: v2same, lastModified: 'Tue, 21 May 2024 11:00:00 GMT' })
    await expect(g.getTensorAsync('w')).rejects.toMatchObject({ ...changed, message: expect.stringContaining('Last-Modified') })
  })

  it('no validators at all: a new size in Content-Range is refused', async () => {
    files.set('f.safetensors', { body: v1 })
    const f = await SafeTensorsFile.openUrl(`${base}/mutable/f.safetensors`)
    files.set('f.safetensors', { body: v2longer })
    await expect(f.getTensorAsync('w')).rejects.toMatchObject({ ...changed, message: expect.stringContaining(`size ${v1.length} → ${v2longer.length}`) })
  })

  it('a range with more bytes than asked, or a larger declared length, or a gzip 200: ERR_IO, not read', async () => {
    files.set('g.safetensors', { body: v1, etag: '"v1"' })
    await expect(SafeTensorsFile.openUrl(`${base}/mutable-morebytes/g.safetensors`, fast)).rejects.toMatchObject({ code: 'ERR_IO', message: expect.stringContaining('bad Content-Range') })
    await expect(SafeTensorsFile.openUrl(`${base}/mutable-bigcl/g.safetensors`, fast)).rejects.toMatchObject({ code: 'ERR_IO', message: expect.stringContaining('declares') })
    await expect(SafeTensorsFile.openUrl(`${base}/mutable-gzip200/g.safetensors`, fast)).rejects.toMatchObject({ code: 'ERR_IO', message: expect.stringContaining("Content-Encoding 'gzip'") })
  })
})

describe('remote options are validated', () => {
  it('bad concurrency, timeoutMs, retries, retryDelayMs, headers or options: ERR_INVALID_ARGUMENT', async () => {
    files.set('h.safetensors', { body: serialize({ a: { shape: [1], data: new Float32Array([1]) }, b: { shape: [1], data: new Float32Array([2]) } }) })
    const url = `${base}/mutable/h.safetensors`
    const bad: any[] = [
      5, 'x', [],
      { concurrency: 0 }, { concurrency: -1 }, { concurrency: NaN }, { concurrency: 1.5 }, { concurrency: '2' }, { concurrency: Infinity },
      { timeoutMs: Infinity }, { timeoutMs: 0 }, { timeoutMs: -5 }, { timeoutMs: NaN }, { timeoutMs: '100' },
      { retries: -1 }, { retries: 1.5 }, { retries: Infinity },
      { retryDelayMs: -1 }, { retryDelayMs: Infinity }, { retryDelayMs: NaN },
      { headers: 'Authorization: x' }, { headers: [['a', 'b']] }, { headers: { a: 1 } }, { headers: new Map() },
      { onProgress: 'yes' },
    ]
    for (const options of bad) {
      await expect(SafeTensorsFile.openUrl(url, options), JSON.stringify(options) ?? String(options)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
      await expect(Model.loadPretrained(`${base}/mutable/dir/`, options), JSON.stringify(options)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    }
    // Good ones work: concurrency 1 reads every tensor (0 used to resolve each to undefined).
    const f = await SafeTensorsFile.openUrl(url, { concurrency: 1, timeoutMs: 5000, retries: 0, retryDelayMs: 0, headers: { 'X-Token': 'a' } })
    const all = await f.tensorsAsync()
    expect(Object.fromEntries(Object.entries(all).map(([k, t]) => [k, Array.from(t.data as Float32Array)]))).toEqual({ a: [1], b: [2] })
    expect(requests[requests.length - 1].headers['x-token']).toBe('a')
  })
})
