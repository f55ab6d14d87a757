import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawn, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join, resolve } from 'node:path'
import { Model, SafeTensorsFile, convert, inspect, openWeights, openWeightsSync, validate, type WeightsFile } from '../index.js'
import { PYTHON, fixture, pk, tempDir, torchZip } from './helpers'

/**
 * PyTorch checkpoints and NumPy arrays through every entry point: each file written by torch or
 * numpy themselves (../shared/fixtures/pytorch and crates/core/tests/data/pytorch, with the
 * values `torch.load(weights_only=True)` / `numpy.load` gave), read back to the exact bit;
 * hostile files refused with their codes and nothing run; conversion to SafeTensors compared
 * byte for byte with what Hugging Face's convert.py writes (__test__/fixtures/pytorch-convert,
 * made by scripts/pytorch/convert_reference.py with torch + safetensors).
 */

const SHARED = fixture('pytorch')
const OURS = resolve(__dirname, '../crates/core/tests/data/pytorch')
const CONVERTED = resolve(__dirname, 'fixtures/pytorch-convert')
const BIN = resolve(__dirname, '../bin/safetensors-node.js')
const dir = tempDir('pytorch-')

interface ExpectedTensor {
  dtype: string
  shape: number[]
  torch_dtype?: string
  numpy_dtype?: string
  hex?: string
  bin?: string
  f32_hex?: string
  f32_bin?: string
}
interface Expected {
  file: string
  weights_format: 'pytorch' | 'numpy'
  tensors: Record<string, ExpectedTensor>
}

const hex = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex')
const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'))

function expectedOf(root: string, file: string): Expected {
  return readJson(join(root, 'expected', `${file}.json`))
}
function listed(root: string): string[] {
  return readJson(join(root, 'expected', 'index.json')).files.map((f: { file: string }) => f.file)
}
/** The expected bytes: stored (row-major, little-endian) or the float32 upcast. */
function bytes(root: string, t: ExpectedTensor, f32 = false): string {
  const inline = f32 ? t.f32_hex : t.hex
  const file = f32 ? t.f32_bin : t.bin
  if (inline !== undefined) return inline
  return readFileSync(join(root, 'expected', file!)).toString('hex')
}
/** A `.npy` lists its one array as `arr_0` (the fixtures call it `*`). */
const tensorName = (name: string) => (name === '*' ? 'arr_0' : name)

/** Every tensor of `file` equals the expected bytes: stored (`as: 'raw'`) and native. */
async function expectTensors(file: WeightsFile, root: string, expected: Expected, ctx: string) {
  const names = Object.keys(expected.tensors).map(tensorName)
  expect([...file.tensorNames].sort(), ctx).toEqual([...names].sort())
  const all = file.tensors()
  for (const [key, t] of Object.entries(expected.tensors)) {
    const name = tensorName(key)
    const at = `${ctx} ${name}`
    const info = file.info(name)
    expect(info.dtype, at).toBe(t.dtype)
    expect(info.shape, at).toEqual(t.shape)
    expect(info.storedType, at).toBe(t.torch_dtype ?? t.numpy_dtype)
    const raw = bytes(root, t)
    expect(info.byteLength, at).toBe(raw.length / 2)
    expect(hex(file.getTensor(name, { as: 'raw' }).data), at).toBe(raw)
    // Natively F16/BF16/F8 upcast to Float32Array (the fixtures carry torch's upcast), the
    // others are their stored bytes.
    const upcast = t.f32_hex !== undefined || t.f32_bin !== undefined
    if (!upcast && /^(F16|BF16|F8_)/.test(t.dtype)) continue // our fixtures carry no upcast
    const native = upcast ? bytes(root, t, true) : raw
    for (const got of [file.getTensor(name).data, (await file.getTensorAsync(name)).data, all[name].data]) {
      // F8 included: NaNs keep torch's sign and payload (0x7F E4M3FN → 0x7FF00000).
      expect(hex(got), at).toBe(native)
    }
  }
}

/**
 * Two SafeTensors files hold the same thing byte for byte, but for the order of the
 * `__metadata__` keys: safetensors' own writer keeps them in a Rust HashMap (an order that
 * changes from run to run), ours sorts them. Same header length, same header (tensors in the
 * same order), same data bytes.
 */
function expectSameSafetensors(ours: string, theirs: string, ctx: string) {
  const [a, b] = [readFileSync(ours), readFileSync(theirs)]
  expect(a.length, ctx).toBe(b.length)
  const [n, m] = [Number(a.readBigUInt64LE(0)), Number(b.readBigUInt64LE(0))]
  expect(n, ctx).toBe(m)
  const [ha, hb] = [JSON.parse(a.subarray(8, 8 + n).toString()), JSON.parse(b.subarray(8, 8 + m).toString())]
  expect(ha, ctx).toEqual(hb)
  expect(Object.keys(ha).filter((k) => k !== '__metadata__'), ctx).toEqual(Object.keys(hb).filter((k) => k !== '__metadata__'))
  expect(a.subarray(8 + n).equals(b.subarray(8 + m)), `${ctx}: data bytes`).toBe(true)
}

describe('PyTorch and NumPy files through openWeights, inspect and validate', () => {
  for (const [label, root] of [['shared fixtures (torch 2.15, numpy 2.4)', SHARED], ['our own fixtures', OURS]] as const) {
    it(`every ${label} file reads back bit-exact, mapped and read, sync and async`, async () => {
      const files = listed(root)
      expect(files.length).toBeGreaterThanOrEqual(13)
      for (const name of files) {
        const path = join(root, name)
        const expected = expectedOf(root, name)
        const opened = [openWeightsSync(path), await openWeights(path), openWeightsSync(path, { backend: 'read' }), openWeightsSync(path, { format: expected.weights_format })]
        for (const file of opened) {
          expect(file.format, name).toBe(expected.weights_format)
          expect(file.path, name).toBe(path)
          expect(file.metadata, name).toBeNull()
          await expectTensors(file, root, expected, name)
        }
        const report = await inspect(path)
        expect(report.format, name).toBe(expected.weights_format)
        expect(report.numTensors, name).toBe(Object.keys(expected.tensors).length)
        expect(report.fileSize, name).toBe(readFileSync(path).length)
        for (const t of report.tensors) {
          const e = expected.tensors[t.name] ?? expected.tensors['*']
          expect(t.dtype, `${name} ${t.name}`).toBe(e.torch_dtype ?? e.numpy_dtype)
          expect(t.shape, `${name} ${t.name}`).toEqual(e.shape)
        }
        expect(await validate(path), name).toEqual({ path, format: expected.weights_format, ok: true, errors: [], omittedErrors: 0 })
      }
    })
  }

  it('a file opened as the other format is refused with an ERR_ code, not misread', () => {
    const pt = join(SHARED, 'zip/tied.pt')
    expect(() => openWeightsSync(pt, { format: 'numpy' })).toThrow(expect.objectContaining({ code: expect.stringMatching(/^ERR_/) }))
    expect(() => openWeightsSync(join(SHARED, 'numpy/c_float32.npy'), { format: 'pytorch' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_HEADER' }))
    expect(() => openWeightsSync(pt).getTensor('nope')).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND', tensor: 'nope', path: pt }))
  })

  it('tied weights are listed under each name and read the same bytes', () => {
    const file = openWeightsSync(join(SHARED, 'zip/tied.pt'))
    expect(hex(file.getTensor('lm_head.weight').data)).toBe(hex(file.getTensor('embed.weight').data))
  })
})

describe('hostile files through the JS API: refused with their code, nothing runs', () => {
  // ../shared/fixtures/pytorch/hostile (see its README): code and a word of the message.
  const SHARED_CASES: Record<string, [string, string]> = {
    'global_os_system.pt': ['ERR_UNSAFE_PICKLE', 'os.system'],
    'reduce_builtins_eval.pt': ['ERR_UNSAFE_PICKLE', 'builtins.eval'],
    'legacy_posix_system.bin': ['ERR_UNSAFE_PICKLE', 'posix.system'],
    'inst_os_system.pt': ['ERR_UNSAFE_PICKLE', 'os.system'],
    'full_module.pt': ['ERR_UNSAFE_PICKLE', 'torch.nn.modules.linear.Linear'],
    'object_array.npy': ['ERR_UNSAFE_PICKLE', 'object array'],
    'zip_parent_evil.pt': ['ERR_UNSAFE_PATH', '../evil'],
    'dup_entry.pt': ['ERR_INVALID_HEADER', 'two members named'],
    'short_storage.pt': ['ERR_SIZE_MISMATCH', 'holds 24 bytes'],
    'short_record.pt': ['ERR_SIZE_MISMATCH', '600 elements'],
    'negative_stride.pt': ['ERR_INVALID_OFFSETS', 'stride is negative'],
    'memo_missing.pt': ['ERR_INVALID_HEADER', 'memo slot 7'],
    'binbytes8_huge.pt': ['ERR_INCOMPLETE_FILE', '9223372036854775808 bytes'],
    'deep_lists.pt': ['ERR_INVALID_HEADER', 'deeper than 1000'],
  }
  const sharedIndex = readJson(join(SHARED, 'expected', 'index.json'))
  const oursIndex = readJson(join(OURS, 'expected', 'index.json'))
  const cases: { root: string; file: string; code: string; needle: string; canary?: string }[] = [
    ...sharedIndex.hostile.map((h: any) => {
      const file = String(h.file).replace(/^hostile\//, '')
      return { root: SHARED, file: `hostile/${file}`, code: SHARED_CASES[file]?.[0], needle: SHARED_CASES[file]?.[1], canary: h.canary ?? undefined }
    }),
    ...oursIndex.hostile.map((h: any) => ({ root: OURS, file: h.file, code: h.code, needle: h.needle, canary: h.canary ?? undefined })),
  ]

  it('every hostile file is ERR_… from openWeights (as its format), inspect, validate and convert', async () => {
    expect(cases.length).toBeGreaterThanOrEqual(55)
    const canaries = cases.map((c) => c.canary).filter((c): c is string => !!c)
    for (const c of canaries) rmSync(c, { force: true })
    for (const { root, file, code, needle } of cases) {
      expect(code, `${file} has a case`).toBeDefined()
      const path = join(root, file)
      const format = /\.np[yz]$/.test(file) ? 'numpy' : 'pytorch'
      let thrown: any
      try {
        openWeightsSync(path, { format })
      } catch (e) {
        thrown = e
      }
      expect(thrown?.code, file).toBe(code)
      expect(thrown.message, file).toContain(needle)
      expect(thrown.message, file).toContain(path)
      // Detected by content: the same refusal, or (for a file whose bytes do not even start
      // like a checkpoint) an ERR_ code all the same, from every entry point.
      const errors: any[] = []
      for (const run of [() => openWeightsSync(path), () => openWeights(path), () => inspect(path), () => convert(path, join(dir, 'hostile.safetensors'), { to: 'safetensors' })]) {
        try {
          await run()
          errors.push(null)
        } catch (e) {
          errors.push(e)
        }
      }
      for (const e of errors) expect(e?.code, file).toMatch(/^ERR_/)
      const report = await validate(path)
      expect(report.ok, file).toBe(false)
      expect(report.errors[0].code, file).toBe(errors[0].code)
      expect(existsSync(join(dir, 'hostile.safetensors')), file).toBe(false)
    }
    for (const c of canaries) expect(existsSync(c), `canary ${c}: something ran`).toBe(false)
    expect(existsSync(resolve(SHARED, '../evil')) || existsSync(resolve('evil'))).toBe(false)
  })

  it('the hostile files of ../shared are recognised as what they claim to be (never ERR_UNKNOWN_FORMAT)', async () => {
    for (const { root, file, code } of cases.filter((c) => c.root === SHARED)) {
      const e: any = await openWeights(join(root, file)).catch((e) => e)
      expect(e.code, file).toBe(code)
    }
  })
})

interface EntryOutcome {
  ok: boolean
  code?: string
  message?: string
  tensors?: number
  ms: number
}
type PyTorchReport = Record<'openWeights' | 'openWeightsSync' | 'inspect' | 'validate' | 'convert' | 'loadPretrained', EntryOutcome> & { maxRSSKiB: number; ms: number }

/** A command run by `sh` with the data segment capped at 1 GiB: a bomb aborts it, not the machine. */
const capped = (command: string, ...args: string[]) => ['-c', `ulimit -d 1048576; exec ${command}`, ...args]

/**
 * Open `bytes` as `pytorch_model.bin` of a model directory through every entry point
 * (`child/open_hostile.cjs`), in a child process with its memory capped, killed after 60 s.
 */
function openInChild(label: string, bytes: Buffer): Promise<{ path: string; report: PyTorchReport | null; status: string }> {
  const d = join(dir, 'bombs', label)
  mkdirSync(d, { recursive: true })
  writeFileSync(join(d, 'config.json'), '{}')
  const path = join(d, 'pytorch_model.bin')
  writeFileSync(path, bytes)
  const child = resolve(__dirname, 'child/open_hostile.cjs')
  return new Promise((done) => {
    const p = spawn('sh', capped('"$0" --expose-gc "$1" "$2" pytorch', process.execPath, child, path), { stdio: ['ignore', 'pipe', 'pipe'] })
    const timer = setTimeout(() => p.kill('SIGKILL'), 60_000)
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', (c) => (stdout += c))
    p.stderr.on('data', (c) => (stderr += c))
    p.on('close', (code, signal) => {
      clearTimeout(timer)
      let report: PyTorchReport | null = null
      try {
        report = JSON.parse(stdout)
      } catch {}
      done({ path, report, status: `exit ${code} ${signal ?? ''} ${stderr.slice(0, 2000)}` })
    })
  })
}

const ENTRY_POINTS = ['openWeights', 'openWeightsSync', 'inspect', 'validate', 'convert', 'loadPretrained'] as const

/**
 * Every entry point gave `want` (an outcome pattern), each within 10 s, the child within
 * 300 MiB; the CLI's `inspect` succeeds or fails as `inspect` did, with its code.
 */
async function expectBounded(label: string, bytes: Buffer, want: (entry: (typeof ENTRY_POINTS)[number]) => { ok: boolean; code?: string }) {
  const { path, report, status } = await openInChild(label, bytes)
  expect(report, `${label}: ${status}`).not.toBeNull()
  for (const entry of ENTRY_POINTS) {
    expect.soft(report![entry], `${label} ${entry}`).toMatchObject(want(entry))
    expect.soft(report![entry].ms, `${label} ${entry}: milliseconds`).toBeLessThan(10_000)
  }
  expect(report!.maxRSSKiB * 1024, `${label}: peak RSS`).toBeLessThan(300 * 1024 * 1024)
  const cli = spawnSync('sh', capped('"$0" "$1" inspect "$2"', process.execPath, BIN, path), { encoding: 'utf8', timeout: 60_000 })
  const inspected = want('inspect')
  if (inspected.ok) expect(cli.status, `${label} CLI: ${cli.stderr}`).toBe(0)
  else expect({ status: cli.status, code: inspected.code && cli.stderr.includes(inspected.code) }, `${label} CLI: ${cli.stderr}`).toEqual({ status: 1, code: true })
  const slowest = Math.max(...ENTRY_POINTS.map((e) => report![e].ms))
  console.log(`${label}: ${bytes.length} bytes, peak RSS ${(report!.maxRSSKiB / 1024).toFixed(0)} MiB, slowest entry point ${slowest.toFixed(0)} ms`)
}

/** The same refusal from every entry point (validate reports it). */
const refused = (code: string, needle: string) => () => ({ ok: false, code, message: expect.stringContaining(needle) })

describe('bombs of a few KB: refused or read within 10 s and 300 MiB, from every entry point', { timeout: 300_000 }, () => {
  const MiB = 1024 * 1024
  const T = pk.tensor('0', 1, 0, [1], [1])
  const one = Buffer.alloc(4)

  it('100,000 keys that are memo references to one 1 MiB string (a name per key, never built)', async () => {
    const pkl = Buffer.concat([pk.bytes('\x80\x02}('), pk.str('a'.repeat(MiB)), pk.bytes('q\x01'), T, pk.bytes('q\x02'), Buffer.from('h\x01h\x02'.repeat(100_000), 'latin1'), pk.bytes('u.')])
    await expectBounded('names-stored', torchZip(pkl, { '0': one }), refused('ERR_INVALID_HEADER', 'tensor names too long'))
    // Deflated, the same pickle is a 2 KB file (refused by the cap on a deflated data.pkl).
    const small = torchZip(pkl, { '0': one }, { pickle: true })
    expect(small.length).toBeLessThan(4096)
    await expectBounded('names-deflated', small, refused('ERR_SIZE_MISMATCH', 'data.pkl'))
  })

  it('a dict that contains itself under a 256 KiB key (418 bytes deflated)', async () => {
    const pkl = Buffer.concat([pk.bytes('\x80\x02}q\x00'), pk.str('k'.repeat(256 * 1024)), pk.bytes('h\x00s.')])
    const bytes = torchZip(pkl, {}, { pickle: true })
    expect(bytes.length).toBeLessThan(1024)
    await expectBounded('cycle', bytes, refused('ERR_INVALID_HEADER', 'a dict contains itself'))
  })

  it('allowed calls that copy their arguments (set, bytearray) cost what the pickle pays for', async () => {
    // [set(L), set(L), …] over one list L of 100,000 ints: 7 bytes of pickle per copy of 2.4 MB.
    const list = Buffer.concat([pk.bytes(']('), Buffer.from('K\x00'.repeat(100_000), 'latin1'), pk.bytes('eq\x02')])
    const sets = Buffer.concat([pk.bytes('\x80\x02]'), pk.global('__builtin__', 'set'), pk.bytes('q\x010'), list, pk.bytes('0'), Buffer.from('h\x01h\x02\x85Ra'.repeat(100_000), 'latin1'), pk.bytes('.')])
    await expectBounded('copies-set', torchZip(sets), refused('ERR_INVALID_HEADER', 'copy'))
    // [bytearray(B), …] over one 512 KiB bytes B: shared, not copied.
    const bytes = Buffer.concat([pk.bytes('\x80\x02]'), pk.global('__builtin__', 'bytearray'), pk.bytes('q\x010B'), Buffer.from([0, 0, 8, 0]), Buffer.alloc(512 * 1024), pk.bytes('q\x020'), Buffer.from('h\x01h\x02\x85Ra'.repeat(100_000), 'latin1'), pk.bytes('.')])
    await expectBounded('copies-bytearray', torchZip(bytes), () => ({ ok: true }))
  })

  it('a deflated data.pkl is capped: protocol 1 LONGs and empty lists by the million', async () => {
    const longs = Buffer.from(`]${`L${'9'.repeat(4300)}L\na`.repeat(10_000)}.`, 'latin1')
    const lists = Buffer.concat([pk.bytes('\x80\x02'), Buffer.alloc(40 * MiB, ']'), pk.bytes('.')])
    for (const [label, pkl] of [['longs', longs], ['lists', lists]] as const) {
      const bytes = torchZip(pkl, {}, { pickle: true })
      expect(bytes.length).toBeLessThan(200 * 1024)
      await expectBounded(`deflated-${label}`, bytes, refused('ERR_SIZE_MISMATCH', 'data.pkl'))
    }
  })

  it('200 one-element views of one deflated 64 MiB storage inflate it once', async () => {
    const views = Array.from({ length: 200 }, (_, i) => Buffer.concat([pk.str(String(i)), pk.tensor('0', 16 * MiB, i, [1], [1])]))
    const pkl = Buffer.concat([pk.bytes('\x80\x02}('), ...views, pk.bytes('u.')])
    const bytes = torchZip(pkl, { '0': Buffer.alloc(64 * MiB) }, { storages: true })
    expect(bytes.length).toBeLessThan(200 * 1024)
    await expectBounded('views', bytes, (entry) => (entry === 'inspect' || entry === 'convert' ? { ok: true, tensors: 200 } : { ok: true }))
  })

  it('stride-0 expansion is bounded per file: two 600 MiB expansions of one element are refused', async () => {
    const n = (600 * MiB) / 4
    const pkl = Buffer.concat([pk.bytes('\x80\x02}('), pk.str('a'), pk.tensor('0', 1, 0, [n], [0]), pk.str('b'), pk.tensor('0', 1, 0, [n], [0]), pk.bytes('u.')])
    await expectBounded('stride0', torchZip(pkl, { '0': one }), refused('ERR_SIZE_MISMATCH', 'expand'))
  })
})

describe('Model.loadPretrained: pytorch_model.bin, then pytorch_model.bin.index.json', () => {
  it('a directory with pytorch_model.bin loads bit-exact; so does a sharded one', async () => {
    for (const [name, files] of [
      ['hf_bin', ['pytorch_model.bin']],
      ['hf_bin_sharded', ['pytorch_model-00001-of-00002.bin', 'pytorch_model-00002-of-00002.bin']],
    ] as const) {
      const root = join(SHARED, name)
      for (const model of [await Model.loadPretrained(root), Model.loadPretrainedSync(root), Model.loadPretrainedSync(root, { backend: 'read' } as any)]) {
        expect(model.format, name).toBe('pytorch')
        expect(model.files, name).toEqual(files)
        expect(model.config, name).toEqual(readJson(join(root, 'config.json')))
        const merged: Expected = { file: name, weights_format: 'pytorch', tensors: {} }
        for (const f of files) Object.assign(merged.tensors, expectedOf(SHARED, `${name}/${f}`).tensors)
        await expectTensors(model as unknown as WeightsFile, SHARED, merged, name)
      }
      const report = await inspect(root)
      expect(report.format, name).toBe('pytorch')
      expect(report.files, name).toEqual(files)
      expect((await validate(root)).ok, name).toBe(true)
    }
  })

  it('SafeTensors layouts come first; pytorch_model.bin before its index; then weights.mlx', async () => {
    const d = join(dir, 'order')
    cpSync(join(SHARED, 'hf_bin_sharded'), d, { recursive: true })
    expect(Model.loadPretrainedSync(d).files).toEqual(['pytorch_model-00001-of-00002.bin', 'pytorch_model-00002-of-00002.bin'])
    cpSync(join(SHARED, 'hf_bin', 'pytorch_model.bin'), join(d, 'pytorch_model.bin'))
    expect(Model.loadPretrainedSync(d).files).toEqual(['pytorch_model.bin'])
    await convert(join(d, 'pytorch_model.bin'), join(d, 'model.safetensors'), { to: 'safetensors' })
    const model = Model.loadPretrainedSync(d)
    expect([model.format, model.files]).toEqual(['safetensors', ['model.safetensors']])
    const empty = join(dir, 'empty-model')
    mkdirSync(empty)
    writeFileSync(join(empty, 'config.json'), '{}')
    await expect(Model.loadPretrained(empty)).rejects.toMatchObject({
      code: 'ERR_NO_WEIGHTS',
      message: expect.stringContaining('model.safetensors.index.json, pytorch_model.bin, pytorch_model.bin.index.json and weights.mlx'),
    })
  })

  it('a hostile pytorch_model.bin in a model directory is refused with its code', async () => {
    const d = join(dir, 'evil-model')
    mkdirSync(d)
    writeFileSync(join(d, 'config.json'), '{}')
    cpSync(join(SHARED, 'hostile', 'global_os_system.pt'), join(d, 'pytorch_model.bin'))
    await expect(Model.loadPretrained(d)).rejects.toMatchObject({ code: 'ERR_UNSAFE_PICKLE', message: expect.stringContaining('os.system') })
  })
})

/** The tensors, metadata and bytes of a SafeTensors file, as Python's safetensors reads it. */
function pythonRead(path: string): { metadata: Record<string, string> | null; tensors: Record<string, { dtype: string; shape: number[]; hex: string }> } {
  const script = `
import json, sys
from safetensors import safe_open
out = {}
with open(sys.argv[1], 'rb') as f:
    raw = f.read()
n = int.from_bytes(raw[:8], 'little')
header = json.loads(raw[8:8 + n])
meta = header.pop('__metadata__', None)
for name, t in header.items():
    a, b = t['data_offsets']
    out[name] = {'dtype': t['dtype'], 'shape': t['shape'], 'hex': raw[8 + n + a:8 + n + b].hex()}
with safe_open(sys.argv[1], 'numpy') as f:
    assert (f.metadata() or None) == meta
    assert sorted(f.keys()) == sorted(out)
print(json.dumps({'metadata': meta, 'tensors': out}))
`
  const r = spawnSync(PYTHON, ['-c', script, path], { encoding: 'utf8', maxBuffer: 64 << 20 })
  expect(r.status, r.stderr).toBe(0)
  return JSON.parse(r.stdout)
}

describe("convert to SafeTensors as Hugging Face's convert.py does", () => {
  const report = readJson(join(CONVERTED, 'report.json'))

  it('single checkpoints: the same bytes as convert.py (tied tensors once, {"format": "pt", dropped: kept})', async () => {
    const converted = Object.entries(report.files as Record<string, any>).filter(([name, r]) => r.output && name.includes('/'))
    expect(converted.length).toBeGreaterThanOrEqual(5)
    for (const [name, r] of converted) {
      const out = join(dir, `${name.replace('/', '__')}.safetensors`)
      const result = await convert(join(SHARED, name), out, { to: 'safetensors' })
      expectSameSafetensors(out, join(CONVERTED, r.output), name)
      expect(result.inputFormat, name).toBe('pytorch')
      expect(result.dropped ?? [], name).toEqual(Object.entries(r.dropped).map(([n, kept]) => ({ name: n, keptAs: kept })))
      expect(result.tensors, name).toBe(Object.keys(pythonRead(out).tensors).length)
      expect(result.outputBytes, name).toBe(readFileSync(out).length)
    }
  })

  it('tied.pt: lm_head.weight dropped and named in the metadata; Python reads the values torch saved', async () => {
    const out = join(dir, 'tied.safetensors')
    const result = await convert(join(SHARED, 'zip/tied.pt'), out, { to: 'safetensors' })
    expect(result.dropped).toEqual([{ name: 'lm_head.weight', keptAs: 'embed.weight' }])
    const py = pythonRead(out)
    expect(py.metadata).toEqual({ format: 'pt', 'lm_head.weight': 'embed.weight' })
    const expected = expectedOf(SHARED, 'zip/tied.pt')
    expect(Object.keys(py.tensors).sort()).toEqual(Object.keys(expected.tensors).filter((n) => n !== 'lm_head.weight').sort())
    for (const [n, t] of Object.entries(py.tensors)) expect(t.hex, n).toBe(bytes(SHARED, expected.tensors[n]))
    expect(SafeTensorsFile.open(out).metadata).toEqual({ format: 'pt', 'lm_head.weight': 'embed.weight' })
  })

  it('views convert.py refuses (no name covers the storage) are written with their own bytes', async () => {
    const refused = Object.entries(report.files as Record<string, any>).filter(([, r]) => r.refused)
    expect(refused.map(([n]) => n).sort()).toEqual(['legacy/legacy.pt', 'zip/noncontiguous.pt', 'zip/storage_offset.pt'])
    for (const [name] of refused) {
      const out = join(dir, `${name.replace('/', '__')}.safetensors`)
      const result = await convert(join(SHARED, name), out, { to: 'safetensors' })
      const expected = expectedOf(SHARED, name)
      const py = pythonRead(out)
      const dropped = new Set((result.dropped ?? []).map((d) => d.name))
      expect(Object.keys(py.tensors).length + dropped.size, name).toBe(Object.keys(expected.tensors).length)
      for (const [n, t] of Object.entries(py.tensors)) expect(t.hex, `${name} ${n}`).toBe(bytes(SHARED, expected.tensors[n]))
      for (const d of result.dropped ?? []) expect(bytes(SHARED, expected.tensors[d.name])).toBe(bytes(SHARED, expected.tensors[d.keptAs]))
    }
  })

  it('a model directory becomes a model directory: model.safetensors (convert.py’s bytes) + config.json, loadable', async () => {
    const out = join(dir, 'hf_bin-out')
    const result = await convert(join(SHARED, 'hf_bin'), out, { to: 'safetensors' })
    expect(result.inputFormat).toBe('model-dir')
    expect(result.files).toEqual(['model.safetensors', 'config.json'])
    expect(result.dropped).toEqual([{ name: 'lm_head.weight', keptAs: 'embed.weight' }])
    expectSameSafetensors(join(out, 'model.safetensors'), join(CONVERTED, 'hf_bin', 'model.safetensors'), 'hf_bin')
    expect(readFileSync(join(out, 'config.json'), 'utf8')).toBe(readFileSync(join(SHARED, 'hf_bin', 'config.json'), 'utf8'))
    expect(result.outputBytes).toBe(readFileSync(join(out, 'model.safetensors')).length + readFileSync(join(out, 'config.json')).length)
    const model = Model.loadPretrainedSync(out)
    expect([model.format, model.files]).toEqual(['safetensors', ['model.safetensors']])
    // A file output from a directory: the one file.
    const single = join(dir, 'hf_bin.safetensors')
    await convert(join(SHARED, 'hf_bin'), single, { to: 'safetensors' })
    expectSameSafetensors(single, join(CONVERTED, 'hf_bin', 'model.safetensors'), 'hf_bin single')
  })

  // The converted directory is the one people upload: a companion file that resolves outside
  // the model directory (a secret, /proc/self/environ), never ends (/proc/self/pagemap) or
  // is not a regular file is not copied; the report says which and why.
  it("a directory's companion files are copied only where they resolve inside it; the others are left out with a warning", async () => {
    const model = join(dir, 'companions')
    cpSync(join(SHARED, 'hf_bin'), model, { recursive: true })
    const outside = tempDir('outside-')
    writeFileSync(join(outside, 'credentials.json'), '{"token": "hf_SECRET"}')
    writeFileSync(join(model, 'tokenizer.json'), '{"model": {}}')
    symlinkSync('tokenizer.json', join(model, 'vocab.json'))
    mkdirSync(join(model, '1_Pooling'))
    symlinkSync(join(outside, 'credentials.json'), join(model, 'special_tokens_map.json'))
    symlinkSync('/proc/self/environ', join(model, 'generation_config.json'))
    symlinkSync('/proc/self/pagemap', join(model, 'tokenizer_config.json'))
    symlinkSync('/dev/zero', join(model, 'merges.txt'))
    // Sparse: 5 GiB that take no disk, more than a companion file may have.
    writeFileSync(join(model, 'notes.txt'), '')
    truncateSync(join(model, 'notes.txt'), 5 * 2 ** 30)
    const mkfifo = ['/usr/bin/mkfifo', '/bin/mkfifo'].find((p) => existsSync(p))
    if (mkfifo) expect(spawnSync(mkfifo, [join(model, 'added_tokens.json')]).status).toBe(0)
    const out = join(dir, 'companions-out')
    const result = await convert(model, out, { to: 'safetensors' })
    const copied = ['config.json', 'tokenizer.json', 'vocab.json']
    expect(result.files).toEqual(['model.safetensors', ...copied])
    expect(readdirSync(out).sort()).toEqual(['model.safetensors', ...copied].sort())
    expect(readFileSync(join(out, 'vocab.json'), 'utf8')).toBe('{"model": {}}')
    const skipped = (name: string, why: string) => expect.stringMatching(new RegExp(`/${name}: .*${why}.*: skipped$`))
    const warnings = [
      skipped('generation_config.json', 'resolves to /proc/'),
      skipped('merges.txt', 'resolves to /dev/zero'),
      expect.stringMatching(/\/notes\.txt: 5368709120 bytes, more than the 4294967296 a file copied beside the weights may have: not copied$/),
      skipped('special_tokens_map.json', 'outside the model directory'),
      skipped('tokenizer_config.json', 'resolves to /proc/'),
    ]
    if (mkfifo) warnings.unshift(skipped('added_tokens.json', 'is not a regular file'))
    expect(result.warnings).toEqual(warnings)
  })

  it('a sharded directory: model-0000i-of-0000N.safetensors as convert.py names and writes them, the index rewritten', async () => {
    const out = join(dir, 'sharded-out')
    const result = await convert(join(SHARED, 'hf_bin_sharded'), out, { to: 'safetensors' })
    const shards = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']
    expect(result.files).toEqual([...shards, 'model.safetensors.index.json', 'config.json'])
    for (const s of shards) expectSameSafetensors(join(out, s), join(CONVERTED, 'hf_bin_sharded', s), s)
    const ours = readJson(join(out, 'model.safetensors.index.json'))
    const theirs = readJson(join(CONVERTED, 'hf_bin_sharded', 'model.safetensors.index.json'))
    expect(ours.weight_map).toEqual(theirs.weight_map) // nothing tied here: the same map
    const stored = shards.reduce((n, s) => n + Object.values(pythonRead(join(out, s)).tensors).reduce((m, t) => m + t.hex.length / 2, 0), 0)
    expect(ours.metadata).toEqual({ ...theirs.metadata, total_size: stored })
    const model = Model.loadPretrainedSync(out)
    expect([model.format, model.files]).toEqual(['sharded-safetensors', shards])
    const source = Model.loadPretrainedSync(join(SHARED, 'hf_bin_sharded'))
    for (const n of source.tensorNames) expect(hex(model.getTensor(n, { as: 'raw' }).data), n).toBe(hex(source.getTensor(n, { as: 'raw' }).data))
    // The index file on its own converts the same way.
    const fromIndex = join(dir, 'sharded-from-index')
    await convert(join(SHARED, 'hf_bin_sharded', 'pytorch_model.bin.index.json'), fromIndex, { to: 'safetensors' })
    expect(readdirSync(fromIndex).sort()).toEqual([...shards, 'model.safetensors.index.json'].sort())
  })

  it('tied tensors across a sharded index are dropped from the shard and from the rewritten index', async () => {
    const d = join(dir, 'sharded-tied')
    mkdirSync(d)
    cpSync(join(SHARED, 'hf_bin', 'pytorch_model.bin'), join(d, 'pytorch_model-00001-of-00001.bin'))
    cpSync(join(SHARED, 'hf_bin', 'config.json'), join(d, 'config.json'))
    const names = openWeightsSync(join(d, 'pytorch_model-00001-of-00001.bin')).tensorNames
    writeFileSync(join(d, 'pytorch_model.bin.index.json'), JSON.stringify({ metadata: { total_size: 1 }, weight_map: Object.fromEntries(names.map((n) => [n, 'pytorch_model-00001-of-00001.bin'])) }))
    const out = join(dir, 'sharded-tied-out')
    const result = await convert(d, out, { to: 'safetensors' })
    expect(result.dropped).toEqual([{ name: 'lm_head.weight', keptAs: 'embed.weight' }])
    const index = readJson(join(out, 'model.safetensors.index.json'))
    expect(Object.keys(index.weight_map).sort()).toEqual(names.filter((n) => n !== 'lm_head.weight').sort())
    expectSameSafetensors(join(out, 'model-00001-of-00001.safetensors'), join(CONVERTED, 'hf_bin', 'model.safetensors'), 'one shard')
    expect(Model.loadPretrainedSync(out).tensorNames.sort()).toEqual(names.filter((n) => n !== 'lm_head.weight').sort())
  })

  it('{"state_dict": …} is unwrapped as convert.py unwraps it; NumPy converts as it reads', async () => {
    const out = join(dir, 'nested.safetensors')
    await convert(join(SHARED, 'zip/nested_state_dict.pt'), out, { to: 'safetensors' })
    expectSameSafetensors(out, join(CONVERTED, 'zip__nested_state_dict.pt.safetensors'), 'nested_state_dict')
    const npz = join(dir, 'stored.safetensors')
    const r = await convert(join(SHARED, 'numpy/stored.npz'), npz, { to: 'safetensors' })
    expect(r.inputFormat).toBe('numpy')
    const expected = expectedOf(SHARED, 'numpy/stored.npz')
    const py = pythonRead(npz)
    expect(py.metadata).toBeNull()
    for (const [n, t] of Object.entries(expected.tensors)) expect(py.tensors[n].hex, n).toBe(bytes(SHARED, t))
  })
})

describe('remote PyTorch and NumPy files: read whole by the core, as the local read', () => {
  let server: Server
  let base = ''
  beforeAll(async () => {
    server = createServer((req, res) => {
      const path = join(SHARED, decodeURIComponent(new URL(req.url!, 'http://x').pathname))
      if (!path.startsWith(SHARED) || !existsSync(path) || !statSync(path).isFile()) return void res.writeHead(404).end()
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

  /** `remote` serves what `local` serves: names, descriptions, metadata and raw bytes. */
  async function expectSame(remote: { tensorNames: string[]; format: string; info(n: string): unknown; getTensor(n: string, o: { as: 'raw' }): Promise<{ data: Uint8Array }> }, local: WeightsFile, what: string) {
    expect(remote.format, what).toBe(local.format)
    expect(remote.tensorNames, what).toEqual(local.tensorNames)
    for (const n of local.tensorNames) {
      expect(remote.info(n), `${what} ${n}`).toEqual(local.info(n))
      expect((await remote.getTensor(n, { as: 'raw' })).data, `${what} ${n}`).toEqual(local.getTensor(n, { as: 'raw' }).data)
    }
  }

  it('pytorch_model.bin and its shards, .pt, .npy and .npz over HTTP: the tensors of the local read', async () => {
    for (const f of ['hf_bin/pytorch_model.bin', 'zip/all_dtypes.pt', 'legacy/legacy.pt', 'numpy/stored.npz', 'numpy/compressed.npz', 'numpy/c_float32.npy']) {
      await expectSame(await openWeights(`${base}/${f}` as `http://${string}`), openWeightsSync(join(SHARED, f)), f)
    }
    for (const d of ['hf_bin', 'hf_bin_sharded']) {
      const remote = await Model.loadPretrained(`${base}/${d}/` as `http://${string}`)
      const local = Model.loadPretrainedSync(join(SHARED, d))
      expect(remote.files, d).toEqual(local.files)
      expect(remote.config, d).toEqual(local.config)
      await expectSame(remote, local as unknown as WeightsFile, d)
    }
    // A hostile pickle is refused by URL as it is locally.
    await expect(openWeights(`${base}/hostile/global_os_system.pt`)).rejects.toMatchObject({ code: 'ERR_UNSAFE_PICKLE' })
  })
})

describe('the CLI reads them too', () => {
  const cli = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60_000 })

  it('inspect, validate and convert of a .bin and an .npz', () => {
    const pt = join(SHARED, 'hf_bin', 'pytorch_model.bin')
    const i = cli('inspect', pt, '--json')
    expect(i.status, i.stderr).toBe(0)
    const report = JSON.parse(i.stdout)
    expect(report.format).toBe('pytorch')
    expect(report.tensors.find((t: any) => t.name === 'embed.weight').dtype).toBe('torch.float32')
    const v = cli('validate', join(SHARED, 'numpy', 'compressed.npz'), '--json')
    expect(v.status, v.stderr).toBe(0)
    expect(JSON.parse(v.stdout)).toMatchObject([{ ok: true, format: 'numpy' }])
    const out = join(dir, 'cli.safetensors')
    const c = cli('convert', pt, out, '--to', 'safetensors', '--json')
    expect(c.status, c.stderr).toBe(0)
    expect(JSON.parse(c.stdout).dropped).toEqual([{ name: 'lm_head.weight', keptAs: 'embed.weight' }])
    expectSameSafetensors(out, join(CONVERTED, 'hf_bin', 'model.safetensors'), 'cli')
    const bad = cli('inspect', join(SHARED, 'hostile', 'global_os_system.pt'))
    expect(bad.status).not.toBe(0)
    expect(bad.stderr).toContain('ERR_UNSAFE_PICKLE')
  })
})
