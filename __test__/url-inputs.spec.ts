import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createServer, type Server } from 'node:http'
import { execFile } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import type { AddressInfo } from 'node:net'
import { convert, inspect, saveFile, validate, type TensorInput } from '../index.js'
import { minilmDir, rawFile, tempDir } from './helpers'

/**
 * URLs where a path is taken (issue 19 point 8): inspect, validate, convert's input and the
 * CLI give for `http(s)://…` exactly what they give for the same file or directory on disk
 * (the report's paths naming the URL), served by a local HTTP server with Range support.
 */
const root = tempDir('url-inputs-')
const out = tempDir('url-outputs-')
const BIN = resolve(__dirname, '../bin/safetensors-node.js')
let server: Server
let base: string
let bytesSent = 0
const requests: string[] = []

function serve() {
  server = createServer((req, res) => {
    const [, mode, ...rest] = decodeURIComponent(new URL(req.url!, 'http://x').pathname).split('/')
    requests.push(req.url!)
    const path = join(root, ...rest)
    let body: Buffer
    try {
      if (!statSync(path).isFile()) throw new Error('dir')
      body = readFileSync(path)
    } catch {
      res.writeHead(404).end()
      return
    }
    const send = (status: number, headers: Record<string, string | number>, data: Buffer) => {
      res.writeHead(status, { 'Content-Length': data.length, ETag: `"${body.length}-${statSync(path).mtimeMs}"`, ...headers })
      bytesSent += data.length
      res.end(data)
    }
    const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
    if (!range || mode === 'norange') return send(200, {}, body)
    const start = Number(range[1])
    const end = Math.min(Number(range[2]), body.length - 1)
    if (start >= body.length) return void res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }).end()
    send(206, { 'Content-Range': `bytes ${start}-${end}/${body.length}` }, body.subarray(start, end + 1))
  })
  return new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
}

const f32 = (n: number, seed: number) => Float32Array.from({ length: n }, (_, i) => Math.cos(i * 0.11 + seed))

beforeAll(async () => {
  // ~40 MB: copying it in chunks of 16 MiB is three ranges; its header is a few hundred bytes.
  const big: Record<string, TensorInput> = {}
  for (let i = 0; i < 10; i++) big[`layers.${i}.weight`] = { dtype: 'F32', shape: [1024, 1024], data: f32(1024 * 1024, i) }
  big['norm.bf16'] = { dtype: 'BF16', shape: [64], data: f32(64, 99) }
  saveFile(join(root, 'big.safetensors'), big, { metadata: { format: 'pt' } })
  saveFile(join(root, 'small.safetensors'), { a: { shape: [2, 3], data: f32(6, 1) }, b: { dtype: 'F16', shape: [4], data: f32(4, 2) } })
  // Several problems in one header: validate lists each.
  writeFileSync(join(root, 'broken.safetensors'), rawFile(JSON.stringify({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 12] }, b: { dtype: 'XX', shape: [1], data_offsets: [12, 16] } }), 16))
  await convert(join(root, 'small.safetensors'), join(root, 'small.gguf'), { to: 'gguf' })
  const sharded = join(root, 'sharded')
  mkdirSync(join(sharded, 'sub'), { recursive: true })
  saveFile(join(sharded, 'sub', 'model-00001-of-00002.safetensors'), { 'x.weight': { shape: [3, 4], data: f32(12, 3) } })
  saveFile(join(sharded, 'model-00002-of-00002.safetensors'), { 'y.weight': { dtype: 'BF16', shape: [5], data: f32(5, 4) } })
  writeFileSync(join(sharded, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: { 'x.weight': 'sub/model-00001-of-00002.safetensors', 'y.weight': 'model-00002-of-00002.safetensors' } }))
  writeFileSync(join(sharded, 'config.json'), JSON.stringify({ model_type: 'tiny', hidden_size: 4 }))
  const missing = join(root, 'missing-shard')
  mkdirSync(missing)
  writeFileSync(join(missing, 'config.json'), '{}')
  writeFileSync(join(missing, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { 'x.weight': 'model-00001-of-00002.safetensors' } }))
  // config.json past its 16 MiB cap: refused from its length, so the copy stops at the cap.
  const bigConfig = join(root, 'big-config')
  mkdirSync(bigConfig)
  writeFileSync(join(bigConfig, 'config.json'), `{"pad":"${'x'.repeat(20 << 20)}"}`)
  saveFile(join(bigConfig, 'model.safetensors'), { w: { shape: [2], data: new Float32Array([1, 2]) } })
  await serve()
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}, 120_000)

afterAll(() => new Promise<void>((r) => server.close(() => r())))

/** `value` with the local `from` replaced by `to` in every string (what the URL result should be). */
function renamed<T>(value: T, from: string, to: string): T {
  return JSON.parse(JSON.stringify(value).split(JSON.stringify(from).slice(1, -1)).join(JSON.stringify(to).slice(1, -1)))
}
const ourTemps = () => readdirSync(tmpdir()).filter((n) => n.startsWith('safetensors-node-url-')).length

describe('inspect(url)', () => {
  it('a SafeTensors file: the local report, from its header alone', async () => {
    const temps = ourTemps()
    bytesSent = 0
    const url = `${base}/ok/big.safetensors`
    const report = await inspect(url)
    const size = statSync(join(root, 'big.safetensors')).size
    expect(bytesSent).toBeLessThan(200 * 1024)
    expect(report).toEqual(renamed(await inspect(join(root, 'big.safetensors')), join(root, 'big.safetensors'), url))
    expect(report.fileSize).toBe(size)
    expect(report.path).toBe(url)
    expect(ourTemps()).toBe(temps)
  })

  it('GGUF (copied whole), a sharded directory with and without its slash, a server without Range', async () => {
    const gguf = await inspect(`${base}/ok/small.gguf`)
    expect(gguf.format).toBe('gguf')
    expect(gguf).toEqual(renamed(await inspect(join(root, 'small.gguf')), join(root, 'small.gguf'), `${base}/ok/small.gguf`))
    const local = await inspect(join(root, 'sharded'))
    expect(local.format).toBe('sharded-safetensors')
    for (const url of [`${base}/ok/sharded/`, `${base}/ok/sharded`]) {
      expect(await inspect(url)).toEqual(renamed(local, join(root, 'sharded'), `${base}/ok/sharded`))
    }
    expect(await inspect(`${base}/norange/small.safetensors`)).toEqual(renamed(await inspect(join(root, 'small.safetensors')), join(root, 'small.safetensors'), `${base}/norange/small.safetensors`))
  })

  it('errors are coded and name the URL, never the temporary copy', async () => {
    const e = await inspect(`${base}/ok/broken.safetensors`).catch((x) => x)
    const l = await inspect(join(root, 'broken.safetensors')).catch((x) => x)
    expect(e.code).toBe(l.code)
    expect(e.path).toBe(`${base}/ok/broken.safetensors`)
    expect(e.message).toBe(l.message.split(join(root, 'broken.safetensors')).join(`${base}/ok/broken.safetensors`))
    expect(e.message).not.toContain(tmpdir())
    await expect(inspect(`${base}/ok/nothing.safetensors`)).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', path: `${base}/ok/nothing.safetensors` })
    await expect(inspect(`${base}/ok/small.safetensors`, { timeoutMs: -1 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
  })
})

describe('validate(url)', () => {
  it('the local verdict: every problem, named by URL; missing files as a report', async () => {
    for (const name of ['small.safetensors', 'broken.safetensors', 'small.gguf', 'sharded', 'missing-shard']) {
      const url = `${base}/ok/${name}`
      const report = await validate(url)
      expect(report, name).toEqual(renamed(await validate(join(root, name)), join(root, name), url))
    }
    expect((await validate(`${base}/ok/broken.safetensors`)).errors.length).toBeGreaterThan(1)
    bytesSent = 0
    const capped = await validate(`${base}/ok/big-config/`)
    expect(capped).toEqual(renamed(await validate(join(root, 'big-config')), join(root, 'big-config'), `${base}/ok/big-config`))
    expect(capped.errors[0]).toMatchObject({ code: 'ERR_INVALID_MODEL' })
    expect(bytesSent).toBeLessThan((16 << 20) + 300 * 1024)
    expect((await validate(`${base}/ok/missing-shard`)).errors[0].message).toContain(`${base}/ok/missing-shard/model-00001-of-00002.safetensors`)
    const gone = await validate(`${base}/ok/nothing.safetensors`)
    expect(gone).toMatchObject({ path: `${base}/ok/nothing.safetensors`, ok: false, errors: [{ code: 'ERR_NOT_FOUND' }] })
    expect((await validate(join(root, 'nothing.safetensors'))).errors[0].code).toBe('ERR_NOT_FOUND')
  })
})

describe('convert(url, …)', () => {
  it('the same bytes and report as from the local file or directory; the copy is removed', async () => {
    const temps = ourTemps()
    for (const [name, to, ext] of [['big.safetensors', 'gguf', 'gguf'], ['sharded', 'safetensors', 'safetensors'], ['small.gguf', 'safetensors', 'safetensors']] as const) {
      const fromUrl = join(out, `${name}-url.${ext}`)
      const fromFile = join(out, `${name}-file.${ext}`)
      const a = await convert(`${base}/ok/${name}`, fromUrl, { to, ...(to === 'gguf' ? { quantization: 'Q8_0' } : {}) })
      const b = await convert(join(root, name), fromFile, { to, ...(to === 'gguf' ? { quantization: 'Q8_0' } : {}) })
      expect(readFileSync(fromUrl).equals(readFileSync(fromFile)), name).toBe(true)
      expect({ ...a, output: '' }).toEqual(renamed({ ...b, output: '' }, join(root, name), `${base}/ok/${name}`))
      expect(a.input).toBe(`${base}/ok/${name}`)
    }
    expect(ourTemps()).toBe(temps)
    await expect(convert(`${base}/ok/nothing.safetensors`, join(out, 'x.gguf'), { to: 'gguf' })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
  })

  // A conversion for llama.cpp reads the tokenizer and the files beside it, which the copy of
  // a remote directory fetches too.
  it('a Hugging Face model directory by URL to a llama.cpp GGUF: the same file as from the directory on disk', async () => {
    cpSync(minilmDir(), join(root, 'minilm'), { recursive: true })
    const fromUrl = join(out, 'minilm-url.gguf')
    const fromDir = join(out, 'minilm-dir.gguf')
    const a = await convert(`${base}/ok/minilm/`, fromUrl, { to: 'gguf' })
    const b = await convert(join(root, 'minilm'), fromDir, { to: 'gguf' })
    expect(a.architecture).toBe('bert')
    expect({ ...a, input: '', output: '' }).toEqual({ ...b, input: '', output: '' })
    expect(readFileSync(fromUrl).equals(readFileSync(fromDir))).toBe(true)
  }, 120_000)
})

describe('the CLI takes URLs', () => {
  const run = async (...args: string[]) => {
    try {
      const r = await promisify(execFile)(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1' } })
      return { status: 0, stdout: r.stdout, stderr: r.stderr }
    } catch (e: any) {
      return { status: e.code as number, stdout: e.stdout as string, stderr: e.stderr as string }
    }
  }
  it('inspect, validate and convert print what they print for the local file', async () => {
    const url = `${base}/ok/small.safetensors`
    const local = join(root, 'small.safetensors')
    const [ri, li] = [await run('inspect', url, '--json'), await run('inspect', local, '--json')]
    expect(ri.status).toBe(0)
    expect(JSON.parse(ri.stdout)).toEqual(renamed(JSON.parse(li.stdout), local, url))
    const rv = await run('validate', `${base}/ok/broken.safetensors`)
    expect(rv.status).toBe(1)
    expect(rv.stdout).toContain(`${base}/ok/broken.safetensors: invalid (safetensors), 3 problems`)
    expect(rv.stdout).toBe((await run('validate', join(root, 'broken.safetensors'))).stdout.split(join(root, 'broken.safetensors')).join(`${base}/ok/broken.safetensors`))
    const dest = join(out, 'cli.gguf')
    const rc = await run('convert', url, dest, '--to', 'gguf', '--json')
    expect(rc.status).toBe(0)
    expect(JSON.parse(rc.stdout).input).toBe(url)
    await convert(local, join(out, 'cli-local.gguf'), { to: 'gguf' })
    expect(readFileSync(dest).equals(readFileSync(join(out, 'cli-local.gguf')))).toBe(true)
    const missing = await run('inspect', `${base}/ok/nothing.safetensors`)
    expect(missing.status).toBe(1)
    expect(missing.stderr).toMatch(/^error\[ERR_NOT_FOUND\]: .*nothing\.safetensors/)
  })
})
