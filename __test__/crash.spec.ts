import { describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Model, SafeTensorsFile, convert, saveFile } from '../index.js'
import { tempDir } from './helpers'

/**
 * Crash-safe saves: a child process writes version A, then B, then A, … of one destination
 * and is killed with SIGKILL at a random moment, many times. After every kill the
 * destination must be exactly the complete A or the complete B (never torn, never empty),
 * because every writer writes a temporary file in the same directory and renames it over
 * the destination. A kill can leave that temporary file behind (a killed process cleans
 * nothing up); it is named `.NAME.PID.RANDOM.tmp` and is never read by a loader.
 */

const CHILD = join(__dirname, 'child/save_loop.cjs')
const KILLS = 20
const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex')
/** The tensors of a SafeTensors file (names, dtypes, shapes, bytes), not its metadata: each
 * Model.save gives its files a save id of their own. */
function tensorsSha(path: string) {
  const h = createHash('sha256')
  const f = SafeTensorsFile.open(path)
  for (const name of f.tensorNames) {
    const t = f.getTensor(name, { as: 'raw' })
    h.update(`${name} ${t.dtype} ${t.shape}\n`).update(t.data as Uint8Array)
  }
  return h.digest('hex')
}

/** A checkpoint of about 6 MiB whose content depends on `seed`. */
function tensors(seed: number) {
  const out: Record<string, { shape: number[]; data: Float32Array }> = {}
  for (let t = 0; t < 6; t++) {
    const data = new Float32Array(256 * 1024)
    for (let i = 0; i < data.length; i++) data[i] = Math.sin(seed * 1000 + t * 7 + i * 0.001)
    out[`layer.${t}.weight`] = { shape: [512, 512], data }
  }
  return out
}

/** Start the loop, wait for its first complete write, kill it after `delayMs`. */
/**
 * `delayMs`: a fixed delay, or one computed from how long a write took in the child
 * (`(writeMs) => ms`), so that kills land within the next writes on a slow machine too.
 */
function killDuringWrites(args: string[], delayMs: number | ((writeMs: number) => number)): Promise<{ signal: string | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    let timer: NodeJS.Timeout | undefined
    const guard = setTimeout(() => child.kill('SIGKILL'), 30_000)
    child.stderr.on('data', (d) => (stderr += d))
    child.stdout.on('data', (d) => {
      const ready = /ready (\d+)/.exec(String(d))
      if (ready && !timer) {
        const ms = typeof delayMs === 'number' ? delayMs : delayMs(Number(ready[1]))
        timer = setTimeout(() => child.kill('SIGKILL'), ms)
      }
    })
    child.on('error', reject)
    child.on('exit', (_code, signal) => {
      clearTimeout(guard)
      clearTimeout(timer)
      resolve({ signal, stderr })
    })
  })
}

/** A deterministic spread of delays over a few writes' duration. */
const delays = (maxMs: number, kills = KILLS) => Array.from({ length: kills }, (_, i) => Math.round(((i * 7919) % 1000) / 1000 * maxMs))

function leftovers(dir: string, keep: string[]) {
  return readdirSync(dir).filter((f) => !keep.includes(f))
}

describe('SIGKILL during a save leaves the complete old or the complete new file', () => {
  for (const [title, mode] of [['saveFile (atomic rename, no fsync)', 'saveFile'], ['saveFile with { durable: true } (fsync)', 'saveFileDurable']] as const) it(title, async () => {
    const dir = tempDir('stn-crash-')
    const [a, b, dest] = ['a.safetensors', 'b.safetensors', 'out.safetensors'].map((f) => join(dir, f))
    saveFile(a, tensors(1))
    saveFile(b, tensors(2))
    const good = new Set([sha(a), sha(b)])
    const outcomes = new Set<string>()
    // Without fsync a write takes a few milliseconds: kill sooner, so that kills still land
    // inside writes.
    const plan = mode === 'saveFileDurable' ? delays(60) : delays(12, 2 * KILLS)
    for (const delay of plan) {
      const { signal, stderr } = await killDuringWrites([mode, dest, a, b], delay)
      expect(signal, stderr).toBe('SIGKILL')
      const got = sha(dest)
      expect(good.has(got), `after a kill at +${delay} ms`).toBe(true)
      outcomes.add(got)
    }
    // Both versions were seen: the kills landed between and during different writes.
    expect(outcomes.size).toBe(2)
    // What a kill can leave: temporary files, each one a kill that landed mid-write.
    const temps = leftovers(dir, ['a.safetensors', 'b.safetensors', 'out.safetensors'])
    for (const f of temps) expect(f).toMatch(/^\.out\.safetensors\.\d+\.[0-9a-f]{16}\.tmp$/)
    console.log(`${plan.length} kills: ${outcomes.size} versions seen, ${temps.length} left a temporary file (killed mid-write)`)
    expect(temps.length).toBeGreaterThan(0)
  }, 120_000)

  it('Model.save (config.json + model.safetensors)', async () => {
    const dir = tempDir('stn-crash-')
    const [a, b, dest] = ['a', 'b', 'out'].map((f) => join(dir, f))
    saveFile(join(dir, 'a.safetensors'), tensors(1))
    saveFile(join(dir, 'b.safetensors'), tensors(2))
    // Two model directories (weights + config.json), and what Model.save writes for each.
    const good = new Set<string>()
    for (const [src, weights] of [[a, 'a.safetensors'], [b, 'b.safetensors']] as const) {
      const m = await Model.loadPretrained(await makeDir(src, join(dir, weights)))
      await m.save(`${src}-saved`)
      good.add(tensorsSha(join(`${src}-saved`, 'model.safetensors')))
    }
    expect(good.size).toBe(2)
    for (const delay of delays(60)) {
      const { signal, stderr } = await killDuringWrites(['modelSave', dest, a, b], delay)
      expect(signal, stderr).toBe('SIGKILL')
      expect(good.has(tensorsSha(join(dest, 'model.safetensors'))), `after a kill at +${delay} ms`).toBe(true)
      expect(JSON.parse(readFileSync(join(dest, 'config.json'), 'utf8'))).toEqual({ model_type: 'crash-test' })
      const loaded = Model.loadPretrainedSync(dest)
      expect(loaded.config).toEqual({ model_type: 'crash-test' })
      expect(loaded.tensorNames.length).toBe(6)
    }
  }, 120_000)

  for (const [title, mode] of [
    ['Model.save of a sharded model: the directory is the unit (never a mix of saves)', 'modelSaveSharded'],
    ['Model.save switching between shards and one file on every save', 'modelSaveMixed'],
  ] as const) it(title, async () => {
    const dir = tempDir('stn-crash-')
    const [a, b, dest] = ['a', 'b', 'out'].map((f) => join(dir, f))
    versionDir(a, 1)
    versionDir(b, 2)
    const seen = new Map<string, number>()
    // Spread over about three saves, however long a save takes here.
    for (const fraction of Array.from({ length: 40 }, (_, i) => (((i * 7919) % 1000) / 1000) * 3)) {
      const delay = (saveMs: number) => Math.round(fraction * saveMs)
      const { signal, stderr } = await killDuringWrites([mode, dest, a, b], delay)
      expect(signal, stderr).toBe('SIGKILL')
      // After a kill the directory is one whole version: a save builds the new directory
      // beside it and swaps the two in one step.
      const outcome = classify(dest)
      expect(outcome, `after a kill at ${fraction.toFixed(2)} saves`).toMatch(/^version [12]$/)
      seen.set(outcome, (seen.get(outcome) ?? 0) + 1)
    }
    console.log(`${mode}, 40 kills:`, Object.fromEntries(seen))
    // The kills landed in different saves: both versions were found whole.
    expect(seen.get('version 1') ?? 0).toBeGreaterThan(0)
    expect(seen.get('version 2') ?? 0).toBeGreaterThan(0)
  }, 180_000)

  it('convert (SafeTensors → GGUF Q8_0)', async () => {
    const dir = tempDir('stn-crash-')
    const [a, b, dest] = ['a.safetensors', 'b.safetensors', 'out.gguf'].map((f) => join(dir, f))
    saveFile(a, tensors(1))
    saveFile(b, tensors(2))
    await convert(a, join(dir, 'a.gguf'), { to: 'gguf', quantization: 'Q8_0' })
    await convert(b, join(dir, 'b.gguf'), { to: 'gguf', quantization: 'Q8_0' })
    const good = new Set([sha(join(dir, 'a.gguf')), sha(join(dir, 'b.gguf'))])
    expect(good.size).toBe(2)
    for (const delay of delays(60)) {
      const { signal, stderr } = await killDuringWrites(['convert', dest, a, b], delay)
      expect(signal, stderr).toBe('SIGKILL')
      expect(existsSync(dest) && statSync(dest).size > 0).toBe(true)
      expect(good.has(sha(dest)), `after a kill at +${delay} ms`).toBe(true)
    }
  }, 120_000)
})

/**
 * A model directory whose every tensor and config say `version`: 6 tensors of 1 MiB, tensor t
 * filled with version × 100 + t, config `{ model_type, version }`.
 */
function versionDir(dir: string, version: number) {
  mkdirSync(dir, { recursive: true })
  const tensors: Record<string, { shape: number[]; data: Float32Array }> = {}
  for (let t = 0; t < 6; t++) tensors[`layer.${t}.weight`] = { shape: [512, 512], data: new Float32Array(512 * 512).fill(version * 100 + t) }
  saveFile(join(dir, 'weights.safetensors'), tensors)
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'crash-test', version }))
}

/** A load must find one version whole (config and every tensor), or fail saying why (a reader
 * beside saves that replaced the directory at each of its reads). */
const ACCEPTABLE = /^version [12]$|^ERR_INVALID_MODEL: .*the directory was replaced while it was read/

/** What loading `dir` gives: "version N" when config and all tensors agree, else the mix or the error. */
function classify(dir: string): string {
  let model
  try {
    model = Model.loadPretrainedSync(dir)
  } catch (e: any) {
    return `${e.code}: ${e.message}`
  }
  const version = model.config.version as number
  const versions = new Set<string>([`config ${version}`])
  if (model.tensorNames.length !== 6) return `MIX: ${model.tensorNames.length} tensors`
  for (const name of model.tensorNames) {
    const data = model.getTensor(name).data as Float32Array
    const t = Number(/layer\.(\d)/.exec(name)![1])
    const v = (data[0] - t) / 100
    if (!data.every((x) => x === data[0])) return `MIX: ${name} is torn`
    versions.add(`config ${v}`)
  }
  return versions.size === 1 ? `version ${version}` : `MIX: ${[...versions].join(', ')}`
}

describe('a reader beside Model.save', () => {
  for (const mode of ['modelSaveSharded', 'modelSaveMixed'] as const) it(`loads only whole versions (${mode})`, async () => {
    const dir = tempDir('stn-reader-')
    const [a, b, dest] = ['a', 'b', 'out'].map((f) => join(dir, f))
    versionDir(a, 1)
    versionDir(b, 2)
    const child = spawn(process.execPath, [CHILD, mode, dest, a, b], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    await new Promise<void>((resolve) => child.stdout.on('data', (d) => String(d).includes('ready') && resolve()))
    const seen = new Map<string, number>()
    const bad: string[] = []
    // Until each version was loaded whole 10 times (4 s here), or a deadline for slow machines.
    const enough = () => (seen.get('version 1') ?? 0) >= 10 && (seen.get('version 2') ?? 0) >= 10
    const until = Date.now() + 45_000
    try {
      while (Date.now() < until && !enough()) {
        const outcome = classify(dest)
        if (!ACCEPTABLE.test(outcome)) bad.push(outcome)
        const key = outcome.startsWith('ERR_') ? 'error' : outcome
        seen.set(key, (seen.get(key) ?? 0) + 1)
        await new Promise((r) => setImmediate(r))
      }
    } finally {
      child.kill('SIGKILL')
    }
    console.log(`reader beside ${mode}:`, Object.fromEntries(seen))
    expect(bad.slice(0, 5), stderr).toEqual([])
    // Both versions were loaded whole, many times: the loads really ran beside the saves.
    expect(seen.get('version 1') ?? 0).toBeGreaterThanOrEqual(5)
    expect(seen.get('version 2') ?? 0).toBeGreaterThanOrEqual(5)
  }, 90_000)
})

describe('two Model.save calls into one directory at once (the documented limit)', () => {
  it('a load finds one whole version or fails with a clear error — never a mix', async () => {
    const dir = tempDir('stn-race-')
    const [a, b, dest] = ['a', 'b', 'out'].map((f) => join(dir, f))
    versionDir(a, 1)
    versionDir(b, 2)
    // Two writers saving in shards, each alternating the two versions, out of step.
    const writers = [[a, b], [b, a]].map(([x, y]) => spawn(process.execPath, [CHILD, 'modelSaveRace', dest, x, y], { stdio: ['ignore', 'pipe', 'pipe'] }))
    let stderr = ''
    const ready = writers.map((w) => {
      w.stderr.on('data', (d) => (stderr += d))
      return new Promise<void>((resolve) => w.stdout.on('data', (d) => String(d).includes('ready') && resolve()))
    })
    await Promise.all(ready)
    const seen = new Map<string, number>()
    const bad: string[] = []
    const until = Date.now() + 30_000
    try {
      for (let i = 0; i < 400 && Date.now() < until; i++) {
        const outcome = classify(dest)
        if (!RACE_ACCEPTABLE.test(outcome)) bad.push(outcome)
        const key = outcome.startsWith('ERR_') ? outcome.slice(0, outcome.indexOf(':')) : outcome
        seen.set(key, (seen.get(key) ?? 0) + 1)
        await new Promise((r) => setImmediate(r))
      }
    } finally {
      for (const w of writers) w.kill('SIGKILL')
    }
    await Promise.all(writers.map((w) => new Promise((r) => (w.exitCode !== null || w.signalCode !== null ? r(null) : w.on('exit', r)))))
    console.log('reader beside two concurrent Model.save:', Object.fromEntries(seen))
    expect(bad.slice(0, 5), stderr).toEqual([])
    expect((seen.get('version 1') ?? 0) + (seen.get('version 2') ?? 0)).toBeGreaterThan(0)
    // What the race left behind is one whole version or a clear error; one more save repairs it.
    expect(classify(dest)).toMatch(RACE_ACCEPTABLE)
    const model = await Model.loadPretrained(a)
    await model.save(dest)
    expect(classify(dest)).toBe('version 1')
  }, 90_000)
})

/** Beside two writers a load may also meet a shard the other writer just removed. */
const RACE_ACCEPTABLE = /^version [12]$|^ERR_(INVALID_MODEL|NOT_FOUND|IO): /

async function makeDir(dir: string, weights: string): Promise<string> {
  const { mkdirSync, copyFileSync, writeFileSync } = await import('node:fs')
  mkdirSync(dir, { recursive: true })
  copyFileSync(weights, join(dir, 'weights.safetensors'))
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'crash-test' }))
  return dir
}
