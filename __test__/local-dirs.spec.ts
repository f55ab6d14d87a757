import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import { existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join, relative } from 'node:path'
import { Model, inspect, saveFile, serialize, validate, type TensorInput } from '../index.js'
import { tempDir } from './helpers'

/**
 * Model directories as people have them: the Hugging Face cache (every file a symlink into
 * ../../blobs/), names from an index judged by their spelling alone (the same rule locally
 * and over HTTP), config.json as JSON.parse would read it (own `__proto__`, no value-count
 * limit), JSON reads capped however large a file claims to be, validate() reports of any
 * size, and GGUF metadata arrays that cannot blow up inspect.
 */

const MiB = 1024 * 1024

function weights(seed: number): Record<string, TensorInput> {
  const out: Record<string, TensorInput> = {}
  for (let l = 0; l < 3; l++) out[`layers.${l}.w`] = { shape: [4, 8], data: Float32Array.from({ length: 32 }, (_, i) => i * 0.5 + l * 100 + seed) }
  return out
}

/**
 * The Hugging Face hub cache layout of `models--org--tiny` at one revision: blobs named by
 * the sha256 of their bytes, refs/main holding the commit, snapshots/<commit>/ with a
 * relative symlink per file, as huggingface_hub writes it. Sharded (index + 3 shards).
 */
function hubCache(): { snapshot: string; weights: Record<string, TensorInput> } {
  const hub = tempDir('hub-')
  const repo = join(hub, 'models--org--tiny')
  const commit = createHash('sha1').update('tiny').digest('hex')
  for (const d of ['blobs', 'refs', join('snapshots', commit)]) mkdirSync(join(repo, d), { recursive: true })
  writeFileSync(join(repo, 'refs', 'main'), commit)
  const w = weights(1)
  const files: Record<string, Buffer> = { 'config.json': Buffer.from(JSON.stringify({ model_type: 'tiny', hidden_size: 8 })) }
  const weightMap: Record<string, string> = {}
  Object.keys(w).forEach((name, i) => {
    const shard = `model-0000${i + 1}-of-00003.safetensors`
    files[shard] = serialize({ [name]: w[name] })
    weightMap[name] = shard
  })
  files['model.safetensors.index.json'] = Buffer.from(JSON.stringify({ metadata: { total_size: 384 }, weight_map: weightMap }))
  const snapshot = join(repo, 'snapshots', commit)
  for (const [name, bytes] of Object.entries(files)) {
    const blob = join(repo, 'blobs', createHash('sha256').update(bytes).digest('hex'))
    writeFileSync(blob, bytes)
    symlinkSync(relative(snapshot, blob), join(snapshot, name))
  }
  return { snapshot, weights: w }
}

describe('the Hugging Face cache layout', () => {
  it('loads a snapshot whose every file is a symlink into ../../blobs/ (sharded and single-file)', async () => {
    const { snapshot, weights: w } = hubCache()
    expect(readFileSync(join(snapshot, '..', '..', 'refs', 'main'), 'utf8')).toMatch(/^[0-9a-f]{40}$/)
    for (const model of [await Model.loadPretrained(snapshot), Model.loadPretrainedSync(snapshot)]) {
      expect(model.format).toBe('sharded-safetensors')
      expect(model.config).toEqual({ model_type: 'tiny', hidden_size: 8 })
      for (const [name, t] of Object.entries(w)) expect(Array.from(model.getTensor(name).data as Float32Array)).toEqual(Array.from(t.data as Float32Array))
    }
    expect((await validate(snapshot)).ok).toBe(true)
    expect((await inspect(snapshot)).numTensors).toBe(3)
    // Single file: model.safetensors as a symlink into blobs too.
    const { snapshot: single } = hubCache()
    const blob = join(single, '..', '..', 'blobs', 'single')
    writeFileSync(blob, serialize({ a: { shape: [2], data: new Float32Array([5, 6]) } }))
    symlinkSync(relative(single, blob), join(single, 'model.safetensors'))
    expect(Array.from(Model.loadPretrainedSync(single).getTensor('a').data as Float32Array)).toEqual([5, 6])
  })
})

describe('names in an index: plain relative paths, the same rule locally and over HTTP', () => {
  let server: Server
  let base: string
  const root = tempDir('names-')
  beforeAll(async () => {
    server = createServer((req, res) => {
      const path = join(root, decodeURIComponent(new URL(req.url!, 'http://x').pathname))
      if (!existsSync(path) || !statSync(path).isFile()) return void res.writeHead(404).end()
      const body = readFileSync(path)
      const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
      if (!range) return void res.writeHead(200, { 'Content-Length': body.length }).end(body)
      const [start, end] = [Number(range[1]), Math.min(Number(range[2]), body.length - 1)]
      res.writeHead(206, { 'Content-Range': `bytes ${start}-${end}/${body.length}`, 'Content-Length': end - start + 1 }).end(body.subarray(start, end + 1))
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(() => new Promise<void>((r) => server.close(() => r())))

  /** A directory whose shard lives at sub/x.safetensors, with the index naming it `name`. */
  function dirNaming(name: string) {
    const dir = join(root, createHash('sha1').update(name).digest('hex'))
    mkdirSync(join(dir, 'sub'), { recursive: true })
    writeFileSync(join(dir, 'config.json'), '{}')
    saveFile(join(dir, 'sub', 'x.safetensors'), { w: { shape: [1], data: new Float32Array([3]) } })
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { w: name } }))
    return dir
  }

  const refused = ['sub/./x.safetensors', 'sub//x.safetensors', './sub/x.safetensors', 'sub/x.safetensors/', '../sub/x.safetensors', 'sub/../sub/x.safetensors', '/sub/x.safetensors', 'sub\\x.safetensors', 'C:sub/x.safetensors', 'file:sub/x.safetensors', '']
  for (const name of refused) {
    it(`${JSON.stringify(name)} is ERR_UNSAFE_PATH, local and remote`, async () => {
      const dir = dirNaming(name)
      await expect(Model.loadPretrained(dir)).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH' })
      await expect(Model.loadPretrained(`${base}/${relative(root, dir)}/`, { retries: 0 })).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH' })
    })
  }
  it('"sub/x.safetensors" loads, local and remote', async () => {
    const dir = dirNaming('sub/x.safetensors')
    expect(Array.from(Model.loadPretrainedSync(dir).getTensor('w').data as Float32Array)).toEqual([3])
    const remote = await Model.loadPretrained(`${base}/${relative(root, dir)}/`)
    expect(Array.from((await remote.getTensorAsync('w')).data as Float32Array)).toEqual([3])
  })
})

describe('config.json and other JSON of a directory', () => {
  function dirWithConfig(config: string) {
    const dir = tempDir('cfg-')
    writeFileSync(join(dir, 'config.json'), config)
    saveFile(join(dir, 'weights.safetensors'), { w: { shape: [1], data: new Float32Array([1]) } })
    return dir
  }

  it('"__proto__" in config.json is an own property of model.config, as JSON.parse makes it', async () => {
    const text = '{"model_type":"x","__proto__":{"polluted":true},"nested":{"__proto__":[1]}}'
    for (const model of [Model.loadPretrainedSync(dirWithConfig(text)), await Model.loadPretrained(dirWithConfig(text))]) {
      const config = model.config as any
      expect(Object.getPrototypeOf(config)).toBe(Object.prototype)
      expect(config.polluted).toBeUndefined()
      expect(Object.getOwnPropertyNames(config).sort()).toEqual(['__proto__', 'model_type', 'nested'])
      expect(Object.getOwnPropertyDescriptor(config, '__proto__')!.value).toEqual({ polluted: true })
      expect(Object.getOwnPropertyDescriptor(config.nested, '__proto__')!.value).toEqual([1])
      expect(config).toEqual(JSON.parse(text))
    }
  })

  it('a config of 1.1 million values reads whole (no value-count limit)', () => {
    const big = Array.from({ length: 1_100_000 }, (_, i) => i % 7)
    const model = Model.loadPretrainedSync(dirWithConfig(JSON.stringify({ model_type: 'x', big })))
    const config = model.config as { big: number[] }
    expect(config.big.length).toBe(1_100_000)
    expect(config.big[999_999]).toBe(999_999 % 7)
  })

  it('config.json or an index larger than its cap, or endless (/proc/self/pagemap), is ERR_INVALID_MODEL at the cap', async () => {
    const dir = dirWithConfig(`{"pad":"${'x'.repeat(16 * MiB)}"}`)
    await expect(Model.loadPretrained(dir)).rejects.toMatchObject({ code: 'ERR_INVALID_MODEL', message: expect.stringContaining('config.json is larger than 16 MiB') })
    if (existsSync('/proc/self/pagemap')) {
      const proc = tempDir('proc-')
      symlinkSync('/proc/self/pagemap', join(proc, 'config.json'))
      saveFile(join(proc, 'weights.safetensors'), { w: { shape: [1], data: new Float32Array([1]) } })
      // It says "regular file, 0 bytes" and reads without end: read to the cap, then refused.
      expect(statSync(join(proc, 'config.json')).isFile()).toBe(true)
      await expect(Model.loadPretrained(proc)).rejects.toMatchObject({ code: 'ERR_INVALID_MODEL', message: expect.stringContaining('larger than 16 MiB') })
      const idx = tempDir('proc-')
      writeFileSync(join(idx, 'config.json'), '{}')
      symlinkSync('/proc/self/pagemap', join(idx, 'model.safetensors.index.json'))
      await expect(Model.loadPretrained(idx)).rejects.toMatchObject({ code: 'ERR_INVALID_MODEL', message: expect.stringContaining('larger than 64 MiB') })
    }
  })
})

describe('reports of any size', () => {
  it('validate() of a file with 260,000 problems lists the first 1,000 and counts the rest', async () => {
    const dir = tempDir('val-')
    const path = join(dir, 'many.safetensors')
    const n = 260_000
    const parts: string[] = []
    for (let i = 0; i < n; i++) parts.push(`"t${i}":{"dtype":"X${i % 10}","shape":[1],"data_offsets":[${i * 4},${i * 4 + 4}]}`)
    const header = Buffer.from(`{${parts.join(',')}}`)
    const len = Buffer.alloc(8)
    len.writeBigUInt64LE(BigInt(header.length))
    writeFileSync(path, Buffer.concat([len, header, Buffer.alloc(n * 4)]))
    const report = await validate(path)
    expect(report.ok).toBe(false)
    expect(report.errors.length).toBe(1000)
    expect(report.errors.length + report.omittedErrors).toBeGreaterThanOrEqual(n)
    expect(report.errors[0]).toMatchObject({ code: 'ERR_INVALID_HEADER', tensor: 't0' })
    // The command line says how many were left out.
    const cli = spawnSync(process.execPath, [join(__dirname, '..', 'bin', 'safetensors-node.js'), 'validate', path], { encoding: 'utf8' })
    expect(cli.status).toBe(1)
    expect(cli.stdout).toContain(`… and ${report.omittedErrors} more (the first 1000 are listed)`)
  })
})

/** A GGUF file (v3, no tensors) with one metadata array of `count` items of `type`. */
function ggufWithArray(path: string, key: string, type: 'bool' | 'string', count: number) {
  const head = Buffer.alloc(24)
  head.write('GGUF', 0)
  head.writeUInt32LE(3, 4)
  head.writeBigUInt64LE(0n, 8)
  head.writeBigUInt64LE(1n, 16)
  const keyBytes = Buffer.from(key)
  const keyLen = Buffer.alloc(8)
  keyLen.writeBigUInt64LE(BigInt(keyBytes.length))
  const arr = Buffer.alloc(16)
  arr.writeUInt32LE(9, 0)
  arr.writeUInt32LE(type === 'bool' ? 7 : 8, 4)
  arr.writeBigUInt64LE(BigInt(count), 8)
  let items: Buffer
  if (type === 'bool') {
    items = Buffer.alloc(count)
    for (let i = 0; i < count; i++) items[i] = i & 1
  } else {
    const parts: Buffer[] = []
    for (let i = 0; i < count; i++) {
      const s = Buffer.from(`tok${i}`)
      const l = Buffer.alloc(8)
      l.writeBigUInt64LE(BigInt(s.length))
      parts.push(l, s)
    }
    items = Buffer.concat(parts)
  }
  let file = Buffer.concat([head, keyLen, keyBytes, arr, items])
  file = Buffer.concat([file, Buffer.alloc((32 - (file.length % 32)) % 32)])
  writeFileSync(path, file)
  return file.length
}

describe('GGUF metadata arrays', () => {
  it('inspect of a 16 MB array of bools stays within 200 MiB + 2 × the file size (it summarizes the array)', () => {
    const dir = tempDir('gguf-')
    const path = join(dir, 'bools.gguf')
    const size = ggufWithArray(path, 'test.bools', 'bool', 16_000_000)
    const script = `require(${JSON.stringify(join(__dirname, '..', 'index.js'))}).inspect(${JSON.stringify(path)}).then((r) => console.log(JSON.stringify({ meta: r.metadata, rss: process.resourceUsage().maxRSS })))`
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.meta).toEqual({ 'test.bools': { arrayOf: 'BOOL', length: 16_000_000 } })
    expect(out.rss * 1024).toBeLessThan(200 * MiB + 2 * size)
  })

  it('a vocabulary-sized array (200,000 strings) is listed whole', async () => {
    const path = join(tempDir('gguf-'), 'vocab.gguf')
    ggufWithArray(path, 'tokenizer.ggml.tokens', 'string', 200_000)
    const report = await inspect(path)
    const tokens = (report.metadata as Record<string, unknown>)['tokenizer.ggml.tokens'] as string[]
    expect(tokens.length).toBe(200_000)
    expect(tokens[199_999]).toBe('tok199999')
  })
})
