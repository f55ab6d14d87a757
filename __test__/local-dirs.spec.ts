import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join, relative } from 'node:path'
import { GgufFile, Model, convert, inspect, saveFile, serialize, validate, type TensorInput } from '../index.js'
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

  it('config.json or an index larger than its cap is ERR_INVALID_MODEL at the cap; /proc/self/pagemap is never read as config.json', async () => {
    const dir = dirWithConfig(`{"pad":"${'x'.repeat(16 * MiB)}"}`)
    await expect(Model.loadPretrained(dir)).rejects.toMatchObject({ code: 'ERR_INVALID_MODEL', message: expect.stringContaining('config.json is larger than 16 MiB') })
    if (existsSync('/proc/self/pagemap')) {
      const proc = tempDir('proc-')
      symlinkSync('/proc/self/pagemap', join(proc, 'config.json'))
      saveFile(join(proc, 'weights.safetensors'), { w: { shape: [1], data: new Float32Array([1]) } })
      // It says "regular file, 0 bytes" and reads without end; it resolves outside the directory.
      expect(statSync(join(proc, 'config.json')).isFile()).toBe(true)
      await expect(Model.loadPretrained(proc)).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH', message: expect.stringContaining('resolves to /proc/') })
      // An index is a weight file, read to its cap.
      const idx = tempDir('proc-')
      writeFileSync(join(idx, 'config.json'), '{}')
      symlinkSync('/proc/self/pagemap', join(idx, 'model.safetensors.index.json'))
      await expect(Model.loadPretrained(idx)).rejects.toMatchObject({ code: 'ERR_INVALID_MODEL', message: expect.stringContaining('larger than 64 MiB') })
    }
  })
})

/**
 * A tiny Qwen2 directory the llama.cpp export recognises (hidden size 4, one layer, `vocab`
 * tokens): config.json, model.safetensors, a byte-level BPE tokenizer.json and a
 * tokenizer_config.json.
 */
function tinyQwen2(dir: string, config: Record<string, unknown> = {}, vocab = 4): string {
  mkdirSync(dir, { recursive: true })
  const [E, F] = [4, 8]
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', hidden_size: E, intermediate_size: F, num_attention_heads: 2, num_key_value_heads: 2, num_hidden_layers: 1, vocab_size: vocab, ...config }))
  const zeros = (...shape: number[]): TensorInput => ({ dtype: 'F16', shape, data: new Uint16Array(shape.reduce((a, b) => a * b, 1)) })
  const tensors: Record<string, TensorInput> = { 'model.embed_tokens.weight': zeros(vocab, E), 'model.norm.weight': zeros(E) }
  const layer: [string, number[]][] = [['input_layernorm', [E]], ['post_attention_layernorm', [E]], ['self_attn.q_proj', [E, E]], ['self_attn.k_proj', [E, E]], ['self_attn.v_proj', [E, E]], ['self_attn.o_proj', [E, E]], ['mlp.gate_proj', [F, E]], ['mlp.up_proj', [F, E]], ['mlp.down_proj', [E, F]]]
  for (const [name, shape] of layer) tensors[`model.layers.0.${name}.weight`] = zeros(...shape)
  saveFile(join(dir, 'model.safetensors'), tensors)
  const words = Object.fromEntries(Array.from({ length: vocab - 1 }, (_, i) => [`t${i}`, i]))
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify({ added_tokens: [{ id: vocab - 1, content: '<|endoftext|>', special: true }], pre_tokenizer: { type: 'ByteLevel' }, model: { type: 'BPE', vocab: words, merges: ['t 0'] } }))
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ eos_token: '<|endoftext|>' }))
  return dir
}

/**
 * Run `code` (which prints one JSON line) in a child Node, where `lib` is the package and
 * `peak()` its peak RSS in bytes: a crash or a runaway allocation cannot take the runner
 * down. `peak()` reads VmHWM, the child's own high-water mark: getrusage's maxRSS starts at
 * the parent's (Linux carries it across fork and exec), and the runner may be large.
 */
function inChild(code: string, timeout = 120_000): any {
  const prelude = `const lib = require(${JSON.stringify(join(__dirname, '..', 'index.js'))})
    const peak = () => {
      const status = require('fs').existsSync('/proc/self/status') ? require('fs').readFileSync('/proc/self/status', 'utf8') : ''
      const hwm = /VmHWM:[ \\t]*([0-9]+)/.exec(status)
      return hwm ? Number(hwm[1]) * 1024 : process.resourceUsage().maxRSS * 1024
    }\n`
  const r = spawnSync(process.execPath, ['-e', prelude + code], { encoding: 'utf8', timeout, maxBuffer: 16 * MiB })
  expect(r.signal, r.stderr).toBeNull()
  expect(r.status, r.stderr).toBe(0)
  return JSON.parse(r.stdout)
}

/** A conversion in a child process: its report or error, and its peak RSS in bytes. */
function convertInChild(input: string, output: string, to: string): { report?: any; error?: { code: string; message: string }; rss: number } {
  return inChild(`lib.convert(${JSON.stringify(input)}, ${JSON.stringify(output)}, { to: ${JSON.stringify(to)} })
    .then((report) => ({ report }), (e) => ({ error: { code: e.code, message: e.message } }))
    .then((r) => console.log(JSON.stringify({ ...r, rss: peak() })))`)
}

describe('files beside the weights: read only where they resolve inside the directory', () => {
  const root = tempDir('beside-')
  const secret = join(root, 'credentials.json')
  writeFileSync(secret, JSON.stringify({ chat_template: 'AWS_SECRET_ACCESS_KEY=hunter2', model_type: 'x' }))
  const MKFIFO = ['/usr/bin/mkfifo', '/bin/mkfifo'].find((p) => existsSync(p))
  /** What the GGUF holds that came from outside: the secret, or this process's environment. */
  const leaks = (gguf: string) => {
    const text = JSON.stringify(GgufFile.open(gguf).metadata)
    return ['hunter2', `PATH=${process.env.PATH}`].filter((s) => text.includes(s))
  }

  it('config.json resolving outside the directory is ERR_UNSAFE_PATH from every reader', async () => {
    const dir = join(root, 'config-outside')
    mkdirSync(dir)
    saveFile(join(dir, 'weights.safetensors'), { w: { shape: [1], data: new Float32Array([1]) } })
    symlinkSync(secret, join(dir, 'config.json'))
    const refused = { code: 'ERR_UNSAFE_PATH', path: join(dir, 'config.json'), message: expect.stringContaining('outside the model directory') }
    await expect(Model.loadPretrained(dir)).rejects.toMatchObject(refused)
    expect(() => Model.loadPretrainedSync(dir)).toThrow(expect.objectContaining(refused))
    await expect(inspect(dir)).rejects.toMatchObject(refused)
    await expect(convert(dir, join(root, 'config-outside.safetensors'), { to: 'safetensors' })).rejects.toMatchObject(refused)
    expect((await validate(dir)).errors).toEqual([expect.objectContaining({ code: 'ERR_UNSAFE_PATH' })])
  })

  it('to GGUF: chat templates, tokenizer_config.json and pooling resolving outside, into /proc, or FIFOs are left out with a warning; nothing of them reaches the file', async () => {
    const dir = tinyQwen2(join(root, 'templates'))
    writeFileSync(join(dir, 'chat_template.jinja'), '{{ messages }}')
    mkdirSync(join(dir, 'additional_chat_templates'))
    symlinkSync(secret, join(dir, 'additional_chat_templates', 'tool_use.jinja'))
    symlinkSync('/proc/self/environ', join(dir, 'additional_chat_templates', 'env.jinja'))
    symlinkSync('/proc/self/pagemap', join(dir, 'modules.json'))
    const out = join(root, 'templates.gguf')
    const report = await convert(dir, out, { to: 'gguf' })
    expect(report.architecture).toBe('qwen2')
    const skipped = (name: string, why: string) => expect.stringMatching(new RegExp(`${name}: .*${why}.*: skipped$`))
    expect(report.warnings).toEqual(expect.arrayContaining([skipped('tool_use.jinja', 'outside the model directory'), skipped('env.jinja', 'resolves to /proc/'), skipped('modules.json', 'resolves to /proc/')]))
    const metadata = GgufFile.open(out).metadata
    expect(metadata['tokenizer.chat_template']).toBe('{{ messages }}')
    expect(Object.keys(metadata).filter((k) => k.startsWith('tokenizer.chat_template.'))).toEqual([])
    expect(leaks(out)).toEqual([])

    // A template that is a FIFO (never opened for reading: it would block), then the other
    // template file, linked to this process's environment.
    rmSync(join(dir, 'chat_template.jinja'))
    if (MKFIFO) expect(spawnSync(MKFIFO, [join(dir, 'chat_template.jinja')]).status).toBe(0)
    symlinkSync('/proc/self/environ', join(dir, 'chat_template.json'))
    const again = await convert(dir, out, { to: 'gguf' })
    expect(again.warnings).toEqual(expect.arrayContaining([skipped('chat_template.json', 'resolves to /proc/')]))
    if (MKFIFO) expect(again.warnings).toEqual(expect.arrayContaining([skipped('chat_template.jinja', 'is not a regular file')]))
    expect(GgufFile.open(out).metadata['tokenizer.chat_template']).toBeUndefined()
    expect(leaks(out)).toEqual([])

    // tokenizer_config.json itself (its chat_template would be embedded verbatim).
    rmSync(join(dir, 'tokenizer_config.json'))
    symlinkSync(secret, join(dir, 'tokenizer_config.json'))
    const third = await convert(dir, out, { to: 'gguf' })
    expect(third.warnings).toEqual(expect.arrayContaining([skipped('tokenizer_config.json', 'outside the model directory')]))
    expect(GgufFile.open(out).metadata['tokenizer.chat_template']).toBeUndefined()
    expect(leaks(out)).toEqual([])
  })

  it('tokenizer.json linked to /dev/zero is ERR_UNSAFE_PATH saying where it leads, not "missing"', async () => {
    const dir = tinyQwen2(join(root, 'zero'))
    rmSync(join(dir, 'tokenizer.json'))
    symlinkSync('/dev/zero', join(dir, 'tokenizer.json'))
    await expect(convert(dir, join(root, 'zero.gguf'), { to: 'gguf' })).rejects.toMatchObject({
      code: 'ERR_UNSAFE_PATH',
      path: join(dir, 'tokenizer.json'),
      message: expect.stringContaining('resolves to /dev/zero'),
    })
    if (MKFIFO) {
      rmSync(join(dir, 'tokenizer.json'))
      expect(spawnSync(MKFIFO, [join(dir, 'tokenizer.json')]).status).toBe(0)
      await expect(convert(dir, join(root, 'zero.gguf'), { to: 'gguf' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('is not a regular file') })
    }
  })

  it('a Hugging Face cache snapshot, every file a symlink into ../../blobs/, converts whole (templates included)', async () => {
    const staging = tinyQwen2(join(root, 'staging'))
    writeFileSync(join(staging, 'chat_template.jinja'), '{{ messages }}')
    const repo = join(root, 'hub', 'models--org--tiny-qwen2')
    const snapshot = join(repo, 'snapshots', createHash('sha1').update('tiny').digest('hex'))
    mkdirSync(snapshot, { recursive: true })
    mkdirSync(join(repo, 'blobs'))
    for (const name of readdirSync(staging)) {
      const bytes = readFileSync(join(staging, name))
      const blob = join(repo, 'blobs', createHash('sha256').update(bytes).digest('hex'))
      writeFileSync(blob, bytes)
      symlinkSync(relative(snapshot, blob), join(snapshot, name))
    }
    const out = join(root, 'hub.gguf')
    const report = await convert(snapshot, out, { to: 'gguf' })
    expect(report.warnings ?? []).toEqual([])
    expect(GgufFile.open(out).metadata['tokenizer.chat_template']).toBe('{{ messages }}')
    expect((await Model.loadPretrained(snapshot)).config).toMatchObject({ model_type: 'qwen2' })
  })
})

describe('counts from config.json size nothing before the tensors confirm them', () => {
  it('num_hidden_layers of 4294967295 or 1e9 (also under text_config) is ERR_INVALID_MODEL naming the count, in little memory', () => {
    const root = tempDir('layers-')
    const dirs = [
      tinyQwen2(join(root, 'u32max'), { num_hidden_layers: 4294967295 }),
      tinyQwen2(join(root, 'billion'), { num_hidden_layers: 1e9 }),
      tinyQwen2(join(root, 'text'), { num_hidden_layers: undefined, text_config: { num_hidden_layers: 4294967295 } }),
    ]
    const out = inChild(`Promise.all(${JSON.stringify(dirs)}.map((d) => lib.convert(d, d + '.gguf', { to: 'gguf' }).then(() => 'written', (e) => ({ code: e.code, message: e.message }))))
      .then((results) => console.log(JSON.stringify({ results, rss: peak() })))`)
    const layers = ['4294967295', '1000000000', '4294967295']
    out.results.forEach((r: any, i: number) => {
      expect(r, dirs[i]).toEqual({ code: 'ERR_INVALID_MODEL', message: expect.stringContaining(`config.json has num_hidden_layers = ${layers[i]}, the tensors hold 1 layer`) })
    })
    expect(out.rss).toBeLessThan(300 * MiB)
  })
})

describe('a tokenizer.json of ~100 MiB converts to GGUF within 200 MiB + 3 × its size', () => {
  /** tinyQwen2 with a tokenizer.json written piece by piece by `write`. */
  function withTokenizer(dir: string, vocab: number, write: (put: (s: string) => void) => void): number {
    tinyQwen2(dir, {}, vocab)
    const path = join(dir, 'tokenizer.json')
    const fd = openSync(path, 'w')
    write((s) => writeSync(fd, s))
    closeSync(fd)
    return statSync(path).size
  }
  /** `count` pieces made by `piece`, comma-separated, in batches. */
  const list = (put: (s: string) => void, count: number, piece: (i: number) => string) => {
    for (let start = 0; start < count; start += 100_000) {
      const batch = Array.from({ length: Math.min(100_000, count - start) }, (_, k) => piece(start + k))
      put((start ? ',' : '') + batch.join(','))
    }
  }
  const head = '{"version":"1.0","added_tokens":[{"id":0,"content":"<|endoftext|>","special":true}],"pre_tokenizer":{"type":"ByteLevel"},'

  it('2.5 million tokens and merges (a JSON tree of it took 1.25 GB); the GGUF lists them all', () => {
    const root = tempDir('bigtok-')
    const n = 2_500_000
    const size = withTokenizer(join(root, 'model'), n, (put) => {
      put(head + '"model":{"type":"BPE","vocab":{"<|endoftext|>":0,')
      list(put, n - 1, (i) => `"t${i + 1}":${i + 1}`)
      put('},"merges":[')
      list(put, n - 2, (i) => `["t${i + 1}","t${i + 2}"]`)
      put(']}}')
    })
    expect(size).toBeGreaterThan(90 * MiB)
    const out = convertInChild(join(root, 'model'), join(root, 'model.gguf'), 'gguf')
    expect(out.error).toBeUndefined()
    expect(out.rss, `peak ${(out.rss / MiB).toFixed(0)} MiB for ${(size / MiB).toFixed(0)} MiB`).toBeLessThan(200 * MiB + 3 * size)
    const gguf = GgufFile.open(join(root, 'model.gguf'))
    const kinds = gguf.metadataTypes
    expect([kinds['tokenizer.ggml.tokens'], kinds['tokenizer.ggml.merges']]).toEqual(['ARRAY[STRING]', 'ARRAY[STRING]'])
    const metadata = gguf.metadata as Record<string, any>
    expect(metadata['tokenizer.ggml.tokens'].length).toBe(n)
    expect(metadata['tokenizer.ggml.tokens'][n - 1]).toBe(`t${n - 1}`)
    expect(metadata['tokenizer.ggml.merges'][n - 3]).toBe(`t${n - 2} t${n - 1}`)
  }, 120_000)

  it('100 MiB under a key the export does not read costs nothing', () => {
    const root = tempDir('bigtok-')
    const size = withTokenizer(join(root, 'model'), 4, (put) => {
      put(head + '"decoder":{"type":"ByteLevel","junk":[')
      list(put, 50_000_000, (i) => String(i & 7))
      put(']},"model":{"type":"BPE","vocab":{"<|endoftext|>":0,"a":1,"b":2},"merges":["a b"]}}')
    })
    expect(size).toBeGreaterThan(90 * MiB)
    const out = convertInChild(join(root, 'model'), join(root, 'model.gguf'), 'gguf')
    expect(out.error).toBeUndefined()
    expect(out.rss).toBeLessThan(200 * MiB)
  }, 120_000)
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
    const out = inChild(`lib.inspect(${JSON.stringify(path)}).then((r) => console.log(JSON.stringify({ meta: r.metadata, rss: peak() })))`)
    expect(out.meta).toEqual({ 'test.bools': { arrayOf: 'BOOL', length: 16_000_000 } })
    expect(out.rss).toBeLessThan(200 * MiB + 2 * size)
  })

  it('to SafeTensors, 25 million booleans (140 MB as text) are refused at the header limit, within 200 MiB + 3 × the file size', () => {
    const dir = tempDir('gguf-')
    const path = join(dir, 'bools.gguf')
    const size = ggufWithArray(path, 'test.bools', 'bool', 25_000_000)
    const out = convertInChild(path, join(dir, 'bools.safetensors'), 'safetensors')
    expect(out.error).toEqual({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining("more than 100000000 bytes, the most a SafeTensors header holds ('test.bools' passes the limit)") })
    expect(out.rss).toBeLessThan(200 * MiB + 3 * size)
    expect(existsSync(join(dir, 'bools.safetensors'))).toBe(false)
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

describe('a PEFT LoRA adapter directory where a model is expected', () => {
  // adapter_config.json and adapter_model.safetensors, as PeftModel.save_pretrained writes
  // them: no config.json.
  const dir = join(tempDir('adapter-dir-'), 'my-lora')
  beforeAll(() => {
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: ['q_proj'] }))
    saveFile(join(dir, 'adapter_model.safetensors'), {
      'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': { shape: [2, 4], data: new Float32Array(8) },
      'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight': { shape: [4, 2], data: new Float32Array(8) },
    })
  })

  const expectAdapterError = (e: any) => {
    expect(e.code).toBe('ERR_INVALID_MODEL')
    expect(e.message).toContain('is a PEFT LoRA adapter')
    expect(e.message).toContain("base: baseModelDir")
    expect(e.message).toContain('lora: adapter')
    expect(e.message).not.toContain('no such file')
  }

  it('convert, Model.loadPretrained, openWeights and inspect say what it is and how to convert or merge it', async () => {
    const caught = async (p: Promise<unknown>) => p.then(() => expect.unreachable('accepted'), (e) => e)
    for (const to of ['safetensors', 'gguf'] as const) expectAdapterError(await caught(convert(dir, join(dir, `out.${to}`), { to })))
    expectAdapterError(await caught(Model.loadPretrained(dir)))
    const { openWeights } = await import('../index.js')
    expectAdapterError(await caught(openWeights(dir)))
    expectAdapterError(await caught(inspect(dir)))
    expect(existsSync(join(dir, 'out.gguf'))).toBe(false)
  })
})

describe('merging a LoRA adapter streams one tensor at a time', () => {
  it('a 415 MiB llama-shaped base merged with a rank-8 adapter: peak RSS below 200 MiB, every adapted weight W + (α/r)·B·A', () => {
    const root = tempDir('lora-merge-rss-')
    const [E, F, L, V, R, alpha] = [512, 2048, 24, 8000, 8, 16]
    const [w, a, b] = [0.01, 0.02, 0.03]
    const filled = (shape: number[], v: number) => ({ shape, data: new Float32Array(shape.reduce((x, y) => x * y, 1)).fill(v) })
    const base = join(root, 'base')
    const adapter = join(root, 'adapter')
    mkdirSync(base)
    mkdirSync(adapter)
    const weights: Record<string, TensorInput> = { 'model.embed_tokens.weight': filled([V, E], w), 'model.norm.weight': filled([E], 1), 'lm_head.weight': filled([V, E], w) }
    const pairs: Record<string, TensorInput> = {}
    const linear: [string, number, number][] = [['self_attn.q_proj', E, E], ['self_attn.k_proj', E, E], ['self_attn.v_proj', E, E], ['self_attn.o_proj', E, E], ['mlp.gate_proj', F, E], ['mlp.up_proj', F, E], ['mlp.down_proj', E, F]]
    for (let l = 0; l < L; l++) {
      weights[`model.layers.${l}.input_layernorm.weight`] = filled([E], 1)
      weights[`model.layers.${l}.post_attention_layernorm.weight`] = filled([E], 1)
      for (const [name, out, inp] of linear) {
        weights[`model.layers.${l}.${name}.weight`] = filled([out, inp], w)
        pairs[`base_model.model.model.layers.${l}.${name}.lora_A.weight`] = filled([R, inp], a)
        pairs[`base_model.model.model.layers.${l}.${name}.lora_B.weight`] = filled([out, R], b)
      }
    }
    saveFile(join(base, 'model.safetensors'), weights)
    writeFileSync(join(base, 'config.json'), JSON.stringify({ architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: E, intermediate_size: F, num_hidden_layers: L, num_attention_heads: 8, num_key_value_heads: 8, vocab_size: V }))
    saveFile(join(adapter, 'adapter_model.safetensors'), pairs)
    writeFileSync(join(adapter, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: R, lora_alpha: alpha, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] }))
    const size = statSync(join(base, 'model.safetensors')).size
    expect(size).toBeGreaterThan(400 * MiB)

    const out = join(root, 'merged')
    const r = inChild(`lib.convert(${JSON.stringify(base)}, ${JSON.stringify(out)}, { to: 'safetensors', lora: ${JSON.stringify(adapter)} })
      .then((report) => console.log(JSON.stringify({ report, rss: peak() })), (e) => console.log(JSON.stringify({ error: e.message })))`)
    expect(r.error).toBeUndefined()
    expect(r.rss).toBeLessThan(200 * MiB)

    const merged = Model.loadPretrainedSync(out)
    expect(merged.tensorNames.length).toBe(Object.keys(weights).length)
    const expected = Math.fround(w + (alpha / R) * R * a * b)
    for (const name of ['model.layers.0.self_attn.q_proj.weight', 'model.layers.23.mlp.down_proj.weight']) {
      const t = merged.getTensor(name).data as Float32Array
      expect(Math.max(...[t[0], t[t.length - 1]].map((v) => Math.abs(v - expected) / expected))).toBeLessThan(1e-6)
    }
    expect((merged.getTensor('lm_head.weight').data as Float32Array)[0]).toBe(Math.fround(w))
    merged.close()
    rmSync(root, { recursive: true, force: true })
  })
})
