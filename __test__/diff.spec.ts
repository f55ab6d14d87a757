import { describe, expect, it } from 'vitest'
import { execFile, execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { convert, diff, saveFile, type DiffReport, type TensorInput } from '../index.js'
import { PYTHON, fixture, tempDir } from './helpers'
// @ts-expect-error: a plain ESM script without types
import { llamaCpp } from '../scripts/peers/llama-cpp.mjs'

/**
 * `diff`: two weight sources compared tensor by tensor and per layer. numpy computes the
 * reference figures (max |Δ|, mean |Δ|, ‖Δ‖/‖A‖, cosine, bit-identity) from the files
 * themselves, read by a reader of its own (gguf-py for GGUF), and ours must agree within 1e-6.
 */

const root = tempDir('diff-')

/** numpy's figures for the common tensors of two files (and per layer), as diff defines them. */
const REFERENCE = String.raw`
import json, struct, sys
import numpy as np

def safetensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == '__metadata__':
            continue
        raw = data[t['data_offsets'][0]:t['data_offsets'][1]]
        if t['dtype'] == 'BF16':
            v = (np.frombuffer(raw, '<u2').astype(np.uint32) << 16).view(np.float32)
        else:
            v = np.frombuffer(raw, {'F32': '<f4', 'F16': '<f2', 'F64': '<f8'}[t['dtype']]).astype(np.float32)
        out[name] = v.reshape(t['shape'])
    return out

def gguf(path):
    from gguf import GGUFReader
    from gguf.quants import dequantize
    out = {}
    for t in GGUFReader(path).tensors:
        v = dequantize(t.data, t.tensor_type).astype(np.float32)
        out[t.name] = v.reshape([int(d) for d in reversed(t.shape)])
    return out

def load(path):
    return gguf(path) if path.endswith('.gguf') else safetensors(path)

def layer(name):
    parts = name.split('.')
    for i, p in enumerate(parts):
        if p.isdigit():
            return '.'.join(parts[:i + 1])
    return None

a, b = load(sys.argv[1]), load(sys.argv[2])
pairs = json.loads(sys.argv[3])  # [[name in A, name in B, rope heads or 0]]
tensors, layers = {}, {}
for an, bn, heads in pairs:
    x, y = a[an], b[bn]
    if heads:
        # llama.cpp's convert_hf_to_gguf.py LlamaModel.permute, on A (the Hugging Face side).
        x = x.reshape(heads, 2, x.shape[0] // heads // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    d = x64 - y64
    na, nb = np.linalg.norm(x64), np.linalg.norm(y64)
    tensors[an] = {
        'maxAbs': float(np.abs(d).max()) if d.size else 0.0,
        'meanAbs': float(np.abs(d).mean()) if d.size else 0.0,
        'relError': float(np.linalg.norm(d) / na) if na > 0 else (0.0 if not d.any() else None),
        'cosine': float(np.dot(x64.ravel(), y64.ravel()) / (na * nb)) if na > 0 and nb > 0 else None,
        'identical': bool(np.array_equal(x.view(np.uint32), y.view(np.uint32))),
    }
    l = layers.setdefault(layer(an), {'n': 0, 'abs': 0.0, 'sqd': 0.0, 'sqa': 0.0, 'max': 0.0})
    l['n'] += d.size; l['abs'] += float(np.abs(d).sum()); l['sqd'] += float((d * d).sum()); l['sqa'] += float((x64 * x64).sum())
    l['max'] = max(l['max'], tensors[an]['maxAbs'])
print(json.dumps({'tensors': tensors, 'layers': {('null' if k is None else k): {'maxAbs': v['max'], 'meanAbs': v['abs'] / v['n'], 'relError': (v['sqd'] ** 0.5) / (v['sqa'] ** 0.5)} for k, v in layers.items()}}))
`

interface Reference {
  tensors: Record<string, { maxAbs: number; meanAbs: number; relError: number | null; cosine: number | null; identical: boolean }>
  layers: Record<string, { maxAbs: number; meanAbs: number; relError: number }>
}

async function reference(a: string, b: string, pairs: Array<[string, string, number]>): Promise<Reference> {
  const { stdout } = await promisify(execFile)(PYTHON, ['-c', REFERENCE, a, b, JSON.stringify(pairs)], { maxBuffer: 1 << 26 })
  return JSON.parse(stdout)
}

/** Within 1e-6 of numpy's figure (relative to it, absolute below 1). */
function close(ours: number | null, theirs: number | null, what: string) {
  if (theirs === null) return expect(ours, what).toBeNull()
  expect(ours, what).not.toBeNull()
  expect(Math.abs(ours! - theirs), `${what}: ${ours} vs numpy's ${theirs}`).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(theirs)))
}

function checkAgainst(report: DiffReport, ref: Reference) {
  for (const [name, want] of Object.entries(ref.tensors)) {
    const got = report.tensors.find((t) => t.name === name)!
    expect(got, name).toBeDefined()
    for (const k of ['maxAbs', 'meanAbs', 'relError', 'cosine'] as const) close(got[k], want[k], `${name} ${k}`)
    expect(got.identical, name).toBe(want.identical)
  }
  for (const [layer, want] of Object.entries(ref.layers)) {
    const got = report.layers.find((l) => String(l.layer) === layer)!
    expect(got, layer).toBeDefined()
    for (const k of ['maxAbs', 'meanAbs', 'relError'] as const) close(got[k], want[k], `layer ${layer} ${k}`)
  }
}

/** Deterministic values around N(0, 0.02)-ish. */
function values(n: number, seed: number): Float32Array {
  let s = seed * 2654435761
  return Float32Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) >>> 0
    return ((s / 2 ** 32) - 0.5) * 0.08
  })
}

describe('diff: two checkpoints, tensor by tensor and per layer', () => {
  const a = join(root, 'a.safetensors')
  const b = join(root, 'b.safetensors')
  const t = (shape: number[], data: Float32Array, dtype: 'F32' | 'F16' = 'F32'): TensorInput => ({ shape, data, dtype })
  const q0 = values(32 * 32, 1)
  const up0 = values(64 * 32, 2)
  const q1 = values(32 * 32, 3)
  const up1 = values(64 * 32, 4)
  const embed = values(64 * 32, 5)
  const norm = values(32, 6)
  saveFile(a, {
    'model.embed_tokens.weight': t([64, 32], embed),
    'model.layers.0.self_attn.q_proj.weight': t([32, 32], q0),
    'model.layers.0.mlp.up_proj.weight': t([64, 32], up0),
    'model.layers.1.self_attn.q_proj.weight': t([32, 32], q1),
    'model.layers.1.mlp.up_proj.weight': t([64, 32], up1),
    'model.layers.1.zeros.weight': t([8], new Float32Array(8)),
    'model.norm.weight': t([32], norm),
    'only_a.weight': t([4], values(4, 7)),
  })
  // A fine-tune of A: small changes in layer 0, layer 1's q stored as F16, its up
  // transposed, the norm untouched, one tensor dropped and one added.
  const nudged = (v: Float32Array, seed: number) => v.map((x, i) => x + values(v.length, seed)[i] * 0.01)
  saveFile(b, {
    'model.embed_tokens.weight': t([64, 32], nudged(embed, 11)),
    'model.layers.0.self_attn.q_proj.weight': t([32, 32], nudged(q0, 12)),
    'model.layers.0.mlp.up_proj.weight': t([64, 32], nudged(up0, 13)),
    'model.layers.1.self_attn.q_proj.weight': t([32, 32], q1, 'F16'),
    'model.layers.1.mlp.up_proj.weight': t([32, 64], up1),
    'model.layers.1.zeros.weight': t([8], new Float32Array(8)),
    'model.norm.weight': t([32], norm),
    'only_b.bias': t([3], values(3, 8)),
  })

  it("agrees with numpy's figures, per tensor and per layer (within 1e-6)", async () => {
    const report = await diff(a, b)
    expect(report).toMatchObject({ a, b, formatA: 'safetensors', formatB: 'safetensors', nameMap: 'direct', warnings: [] })
    // A's tensors in A's order (saveFile stores them sorted by name), then those only in B.
    expect(report.tensors.map((x) => [x.name, x.status])).toEqual([
      ['model.embed_tokens.weight', 'common'],
      ['model.layers.0.mlp.up_proj.weight', 'common'],
      ['model.layers.0.self_attn.q_proj.weight', 'common'],
      ['model.layers.1.mlp.up_proj.weight', 'common'],
      ['model.layers.1.self_attn.q_proj.weight', 'common'],
      ['model.layers.1.zeros.weight', 'common'],
      ['model.norm.weight', 'common'],
      ['only_a.weight', 'only-a'],
      ['only_b.bias', 'only-b'],
    ])
    const by = (n: string) => report.tensors.find((x) => x.name === n)!
    expect(by('model.layers.1.self_attn.q_proj.weight')).toMatchObject({ dtypeA: 'F32', dtypeB: 'F16', dtypeChanged: true, shapeChanged: false, identical: false })
    expect(by('model.layers.1.mlp.up_proj.weight')).toMatchObject({ shapeA: [64, 32], shapeB: [32, 64], shapeChanged: true, identical: false, maxAbs: null, numel: null })
    expect(by('model.norm.weight')).toMatchObject({ identical: true, maxAbs: 0, relError: 0, cosine: expect.closeTo(1, 12) })
    expect(by('model.layers.1.zeros.weight')).toMatchObject({ identical: true, relError: 0, cosine: null })
    expect(by('only_a.weight')).toMatchObject({ layer: null, shapeA: [4], shapeB: null, maxAbs: null })
    const common = report.tensors.filter((x) => x.status === 'common' && !x.shapeChanged).map((x) => x.name)
    const ref = await reference(a, b, common.map((n) => [n, n, 0]))
    checkAgainst(report, ref)
    expect(report.layers.map((l) => l.layer)).toEqual(['model.layers.0', 'model.layers.1', null])
    expect(report.layers[1]).toMatchObject({ compared: 2, shapeChanged: 1, dtypeChanged: 1, identical: 1 })
    expect(report.summary).toMatchObject({ compared: 6, onlyA: 1, onlyB: 1, shapeChanged: 1, dtypeChanged: 1, identical: 2 })
    // Itself: identical everywhere.
    const same = await diff(a, a)
    expect(same.summary).toMatchObject({ compared: 8, identical: 8, maxAbs: 0, onlyA: 0, onlyB: 0 })
  })

  it('a .bin against its SafeTensors conversion: every tensor bit-identical, types compared as types', async () => {
    const bin = fixture('pytorch', 'hf_bin')
    const out = join(root, 'from-bin')
    const converted = await convert(bin, out, { to: 'safetensors' })
    const report = await diff(bin, out)
    expect(report.formatA).toBe('pytorch')
    // Tied tensors are written once: the copies are only in the .bin.
    expect(report.summary.onlyA).toBe(converted.dropped?.length ?? 0)
    expect(report.summary.onlyB + report.summary.shapeChanged + report.summary.dtypeChanged).toBe(0)
    expect(report.summary.identical).toBe(report.summary.compared)
    expect(report.summary.compared).toBeGreaterThan(0)
  })

  it('errors: a missing input, a bad name map', async () => {
    await expect(diff(a, join(root, 'missing.safetensors'))).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    await expect(diff(a, b, { names: 'fuzzy' as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('options.names') })
    await expect(diff(a, b, { names: 'llama.cpp' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('GGUF') })
  })

  it('the CLI prints a table per layer, or the report as JSON', async () => {
    const bin = join(__dirname, '..', 'bin', 'safetensors-node.js')
    const { stdout } = await promisify(execFile)(process.execPath, [bin, 'diff', a, b])
    expect(stdout).toMatch(/layer\s+tensors\s+identical/)
    expect(stdout).toContain('only in A (1): only_a.weight')
    expect(stdout).toContain('shape model.layers.1.mlp.up_proj.weight: [64, 32] → [32, 64]')
    const json = JSON.parse((await promisify(execFile)(process.execPath, [bin, 'diff', a, b, '--json'])).stdout)
    expect(json.summary).toEqual((await diff(a, b)).summary)
  })
})

describe('diff: a llama.cpp GGUF against the Hugging Face model it came from', () => {
  const LLAMA = llamaCpp() as { src: string }
  const hasSources = existsSync(join(LLAMA.src, 'models', 'ggml-vocab-llama-spm.gguf'))

  it.skipIf(!hasSources)("pairs names through llama.cpp's map, Q/K rows in Hugging Face order; Q8_0 figures agree with gguf-py + numpy", async () => {
    const dir = join(root, 'llama')
    execFileSync(PYTHON, [join(__dirname, '..', 'benches', 'lib', 'make-llama-dir.py'), LLAMA.src, dir, '--quick'])
    const gguf = join(root, 'llama-q8_0.gguf')
    await convert(dir, gguf, { to: 'gguf', quantization: 'Q8_0' })
    const report = await diff(dir, gguf)
    expect(report.nameMap).toBe('llama.cpp')
    expect(report.summary).toMatchObject({ onlyA: 0, shapeChanged: 0 })
    const q = report.tensors.find((x) => x.name === 'model.layers.0.self_attn.q_proj.weight')!
    expect(q).toMatchObject({ nameB: 'blk.0.attn_q.weight', dtypeA: 'BF16', dtypeB: 'Q8_0', dtypeChanged: true })
    expect(q.cosine!).toBeGreaterThan(0.999)
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'))
    const pairs = report.tensors
      .filter((x) => x.status === 'common')
      .map((x): [string, string, number] => [x.name, x.nameB ?? x.name, /q_proj/.test(x.name) ? config.num_attention_heads : /k_proj/.test(x.name) ? config.num_key_value_heads : 0])
    const ref = await reference(join(dir, 'model.safetensors'), gguf, pairs)
    checkAgainst(report, ref)
    // By name only, nothing pairs.
    const direct = await diff(dir, gguf, { names: 'direct' })
    expect(direct).toMatchObject({ nameMap: 'direct', summary: { compared: 0 } })
  }, 300_000)
})

describe('diff: streaming', () => {
  it('two 144 MiB checkpoints diff in bounded memory (one pair at a time)', async () => {
    const dir = tempDir('diff-big-')
    // Tensors of 36 MiB: above glibc's largest mmap threshold (32 MiB), so the F32 buffers of
    // a pair are returned to the system when it is done instead of kept by a thread's arena.
    const tensors = (seed: number) => {
      const out: Record<string, TensorInput> = {}
      for (let i = 0; i < 4; i++) out[`model.layers.${i}.w`] = { shape: [3072, 3072], data: values(3072 * 3072, seed + i) }
      return out
    }
    saveFile(join(dir, 'a.safetensors'), tensors(1))
    saveFile(join(dir, 'b.safetensors'), tensors(2))
    const script = `
      const { diff } = require(${JSON.stringify(join(__dirname, '..', 'index.js'))})
      diff(process.argv[1], process.argv[2]).then((r) => console.log(JSON.stringify({ compared: r.summary.compared, maxRSSKiB: process.resourceUsage().maxRSS })))`
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', script, join(dir, 'a.safetensors'), join(dir, 'b.safetensors')], { timeout: 120_000 })
    const r = JSON.parse(stdout)
    expect(r.compared).toBe(4)
    // Both models as F32 are 288 MiB (over 330 MiB with Node's own); one pair is 72 MiB.
    expect(r.maxRSSKiB * 1024).toBeLessThan(220 * 1024 * 1024)
  }, 180_000)
})
