import { describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { Model, convert, saveFile } from '../index.js'
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
function killDuringWrites(args: string[], delayMs: number): Promise<{ signal: string | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    let timer: NodeJS.Timeout | undefined
    const guard = setTimeout(() => child.kill('SIGKILL'), 30_000)
    child.stderr.on('data', (d) => (stderr += d))
    child.stdout.on('data', (d) => {
      if (String(d).includes('ready') && !timer) timer = setTimeout(() => child.kill('SIGKILL'), delayMs)
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

  it('Model.save (config.json + weights.safetensors)', async () => {
    const dir = tempDir('stn-crash-')
    const [a, b, dest] = ['a', 'b', 'out'].map((f) => join(dir, f))
    saveFile(join(dir, 'a.safetensors'), tensors(1))
    saveFile(join(dir, 'b.safetensors'), tensors(2))
    // Two model directories (weights + config.json), and what Model.save writes for each.
    const good = new Set<string>()
    for (const [src, weights] of [[a, 'a.safetensors'], [b, 'b.safetensors']] as const) {
      const m = await Model.loadPretrained(await makeDir(src, join(dir, weights)))
      await m.save(`${src}-saved`)
      good.add(sha(join(`${src}-saved`, 'weights.safetensors')))
    }
    expect(good.size).toBe(2)
    for (const delay of delays(60)) {
      const { signal, stderr } = await killDuringWrites(['modelSave', dest, a, b], delay)
      expect(signal, stderr).toBe('SIGKILL')
      expect(good.has(sha(join(dest, 'weights.safetensors'))), `after a kill at +${delay} ms`).toBe(true)
      expect(JSON.parse(readFileSync(join(dest, 'config.json'), 'utf8'))).toEqual({ model_type: 'crash-test' })
      const loaded = Model.loadPretrainedSync(dest)
      expect(loaded.tensorNames.length).toBe(6)
    }
  }, 120_000)

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

async function makeDir(dir: string, weights: string): Promise<string> {
  const { mkdirSync, copyFileSync, writeFileSync } = await import('node:fs')
  mkdirSync(dir, { recursive: true })
  copyFileSync(weights, join(dir, 'weights.safetensors'))
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'crash-test' }))
  return dir
}
