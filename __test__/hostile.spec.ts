import { beforeAll, describe, expect, it } from 'vitest'
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { PYTHON, tempDir } from './helpers'

/**
 * The hostile corpus (scripts/gen_hostile.py): every validation rule broken, plus files built
 * to hurt parsers. Each file is opened in a child process (so a crash cannot take the runner
 * down) every way the package can: `open` with the mmap and read backends and `openAsync`,
 * then every tensor is read. The reference implementation's verdict on each file is in the
 * manifest; ours must equal it except where the manifest documents a deliberate divergence.
 */

const ROOT = resolve(__dirname, '..')
const CHILD = join(__dirname, 'child/open_hostile.cjs')
const MiB = 1024 * 1024

interface Reference {
  accepted: boolean | null
  error?: string
  code?: string | null
  tensors?: number
}
interface Entry {
  file: string
  format: 'safetensors' | 'gguf'
  what: string
  rule: string
  expected_code: string | null
  bytes: number
  reference: Reference
  divergence?: string
}
interface Outcome {
  ok: boolean
  code?: string
  message?: string
  path?: string
  tensors?: number
  read?: number
  bytes?: number
  checksum?: number
  asyncTensors?: number
  asyncBytes?: number
  syncBytes?: number
}
interface ChildReport {
  mmap?: Outcome
  read?: Outcome
  async?: Outcome
  inspect?: Outcome
  validate?: { ok: boolean; codes: string[] }
  maxRSSKiB: number
}
interface Run {
  entry: Entry
  path: string
  exitCode: number | null
  signal: string | null
  stderr: string
  report: ChildReport | null
}

let dir = ''
let manifest: Entry[] = []
let runs: Run[] = []

function runChild(entry: Entry): Promise<Run> {
  const path = join(dir, entry.file)
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--expose-gc', CHILD, path, entry.format], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('close', (exitCode, signal) => {
      let report: ChildReport | null = null
      try {
        report = JSON.parse(stdout)
      } catch {}
      done({ entry, path, exitCode, signal, stderr, report })
    })
  })
}

/** Run the children two at a time (the machine has two cores), largest files first. */
async function runAll(entries: Entry[]): Promise<Run[]> {
  const queue = [...entries].sort((a, b) => b.bytes - a.bytes)
  const out: Run[] = []
  const worker = async () => {
    for (let e = queue.shift(); e; e = queue.shift()) out.push(await runChild(e))
  }
  await Promise.all([worker(), worker()])
  return out.sort((a, b) => entries.indexOf(a.entry) - entries.indexOf(b.entry))
}

/** The SafeTensors header's length, from the file's 8-byte prefix (0 when it has none). */
function headerBytes(run: Run): number {
  const prefix = readFileSync(run.path).subarray(0, 8)
  if (prefix.length < 8) return 0
  const n = prefix.readBigUInt64LE(0)
  return n <= BigInt(run.entry.bytes) ? Number(n) : 0
}

/**
 * Peak RSS allowed for one child: Node and the addon (~45 MiB) with room to spare, the file
 * twice (a mapping plus one copy), and 8 bytes per byte of header JSON for the parsed header
 * (names, shapes, the name index and the JS `tensorNames` array: ~400 bytes for a ~56-byte
 * entry; the reference implementation needs ~17). A size taken from a lying header field
 * instead of the file would blow through it.
 */
function rssBoundBytes(run: Run): number {
  return 200 * MiB + 2 * run.entry.bytes + (run.entry.format === 'safetensors' ? 8 * headerBytes(run) : 0)
}

beforeAll(async () => {
  dir = tempDir('stn-hostile-')
  const gen = spawnSync(PYTHON, [join(ROOT, 'scripts/gen_hostile.py'), dir], { encoding: 'utf8', timeout: 240_000 })
  if (gen.status !== 0) throw new Error(`gen_hostile.py failed (${gen.status}): ${gen.stderr}`)
  manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'))
  runs = await runAll(manifest)
  // Figures for docs/reliability.md: the largest peaks.
  const peaks = runs
    .filter((r) => r.report)
    .sort((a, b) => b.report!.maxRSSKiB - a.report!.maxRSSKiB)
    .slice(0, 5)
    .map((r) => `${r.entry.file} (${(r.entry.bytes / MiB).toFixed(1)} MiB): peak RSS ${(r.report!.maxRSSKiB / 1024).toFixed(0)} MiB, bound ${(rssBoundBytes(r) / MiB).toFixed(0)} MiB`)
  console.log(`hostile corpus: ${manifest.length} files; largest peaks:\n  ${peaks.join('\n  ')}`)
}, 300_000)

const safetensors = () => runs.filter((r) => r.entry.format === 'safetensors')
const gguf = () => runs.filter((r) => r.entry.format === 'gguf')

describe('hostile SafeTensors files', () => {
  it('the corpus breaks every rule: at least 40 files, every error code, a reference verdict for each', () => {
    const entries = manifest.filter((e) => e.format === 'safetensors')
    expect(entries.length).toBeGreaterThanOrEqual(40)
    const codes = new Set(entries.map((e) => e.expected_code))
    for (const code of ['ERR_HEADER_TOO_SMALL', 'ERR_HEADER_TOO_LARGE', 'ERR_INVALID_HEADER', 'ERR_INVALID_OFFSETS', 'ERR_SIZE_MISMATCH', 'ERR_INCOMPLETE_FILE', null]) {
      expect(codes, `a file expecting ${code}`).toContain(code)
    }
    for (const e of entries) expect(typeof e.reference.accepted, e.file).toBe('boolean')
    // The cases the issue names explicitly.
    for (const name of ['len_u64_max', 'len_limit_plus_1', 'offsets_far_past_eof', 'shape_product_overflow', 'deep_top_open', 'bom', 'trailing_nul', 'whitespace_around', 'duplicate_names', 'million_tensors', 'negative_shape', 'float_shape', 'metadata_number']) {
      expect(entries.map((e) => e.file)).toContain(`${name}.safetensors`)
    }
  })

  it('every child process exits normally and reports', () => {
    for (const run of safetensors()) {
      expect.soft({ file: run.entry.file, exitCode: run.exitCode, signal: run.signal, reported: run.report !== null }, run.stderr).toEqual({
        file: run.entry.file,
        exitCode: 0,
        signal: null,
        reported: true,
      })
    }
  })

  it('our verdict and code equal the reference implementation’s, except documented divergences', () => {
    let compared = 0
    for (const run of safetensors()) {
      const { entry, report } = run
      if (!report?.mmap || entry.divergence) continue
      const ours = { file: entry.file, accepted: report.mmap.ok, code: report.mmap.ok ? null : report.mmap.code }
      const theirs = { file: entry.file, accepted: entry.reference.accepted, code: entry.reference.accepted ? null : entry.reference.code }
      expect.soft(ours, entry.reference.error).toEqual(theirs)
      compared += 1
    }
    expect(compared).toBeGreaterThanOrEqual(40)
    // Each divergence is explained, and is one: the verdicts or codes really differ.
    for (const run of safetensors().filter((r) => r.entry.divergence)) {
      expect(run.entry.divergence!.length).toBeGreaterThan(20)
      const sameVerdict = run.report?.mmap?.ok === run.entry.reference.accepted
      const sameCode = run.report?.mmap?.code === run.entry.reference.code
      expect.soft(sameVerdict && sameCode, `${run.entry.file} is listed as a divergence but agrees`).toBe(false)
    }
  })

  it('each rejection carries the code of the rule it breaks and names the file, in all three modes', () => {
    for (const run of safetensors()) {
      const { entry, report } = run
      for (const mode of ['mmap', 'read', 'async'] as const) {
        const outcome = report?.[mode]
        const got = { file: entry.file, mode, code: outcome?.ok ? null : outcome?.code }
        expect.soft(got, outcome?.message).toEqual({ file: entry.file, mode, code: entry.expected_code })
        if (outcome && !outcome.ok) expect.soft(outcome.path, `${entry.file} ${mode}`).toBe(run.path)
      }
    }
  })

  it('accepted files give the same tensors and bytes through mmap, read and async', () => {
    const accepted = safetensors().filter((r) => r.entry.expected_code === null)
    expect(accepted.length).toBeGreaterThanOrEqual(10)
    for (const { entry, report } of accepted) {
      const { mmap, read, async: viaAsync } = report ?? {}
      expect.soft(mmap?.tensors, entry.file).toBe(entry.reference.tensors)
      expect.soft(read, entry.file).toEqual(mmap)
      const { asyncTensors, asyncBytes, syncBytes, ...asyncSummary } = viaAsync ?? ({} as Outcome)
      expect.soft(asyncSummary, entry.file).toEqual(mmap)
      if (asyncTensors !== undefined) {
        expect.soft(asyncTensors, entry.file).toBe(mmap?.tensors)
        expect.soft(asyncBytes, entry.file).toBe(syncBytes)
      }
    }
    const million = accepted.find((r) => r.entry.file === 'million_tensors.safetensors')
    expect(million?.report?.mmap).toMatchObject({ ok: true, tensors: 1_000_000, read: 10_001, bytes: 10_001 })
  })

  it('peak RSS stays under 200 MiB + 2 × file size (+ 8 × header size)', () => {
    for (const run of safetensors()) {
      if (!run.report) continue
      const peak = run.report.maxRSSKiB * 1024
      expect.soft({ file: run.entry.file, withinBound: peak < rssBoundBytes(run) }, `peak ${(peak / MiB).toFixed(0)} MiB, bound ${(rssBoundBytes(run) / MiB).toFixed(0)} MiB`).toEqual({
        file: run.entry.file,
        withinBound: true,
      })
    }
  })
})

describe('hostile GGUF files', () => {
  it('inspect and validate refuse each with ERR_INVALID_GGUF, the child exiting normally within the memory bound', () => {
    const runs = gguf()
    expect(runs.length).toBeGreaterThanOrEqual(8)
    for (const run of runs) {
      const { entry, report } = run
      expect.soft({ file: entry.file, exitCode: run.exitCode, signal: run.signal }, run.stderr).toEqual({ file: entry.file, exitCode: 0, signal: null })
      expect.soft({ file: entry.file, code: report?.inspect?.code }, report?.inspect?.message).toEqual({ file: entry.file, code: 'ERR_INVALID_GGUF' })
      expect.soft({ file: entry.file, validate: report?.validate }).toEqual({ file: entry.file, validate: { ok: false, codes: expect.arrayContaining(['ERR_INVALID_GGUF']) } })
      if (report) expect.soft(report.maxRSSKiB * 1024, entry.file).toBeLessThan(rssBoundBytes(run))
    }
  })

  it('the reference reader (gguf-py) refuses them too, except documented divergences', () => {
    for (const { entry } of gguf()) {
      if (entry.reference.accepted === null) continue // gguf-py not installed
      if (entry.divergence) expect.soft(entry.reference.accepted, entry.file).toBe(true)
      else expect.soft({ file: entry.file, accepted: entry.reference.accepted }).toEqual({ file: entry.file, accepted: false })
    }
  })
})
