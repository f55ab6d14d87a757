import { describe, expect, it } from 'vitest'
import { spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { lstatSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { LinearRegression, Model, convert, saveFile, saveFileAsync, type TensorInput } from '../index.js'
import { tempDir } from './helpers'

/**
 * Temporary files of every writer: created exclusively (O_CREAT | O_EXCL | O_NOFOLLOW) under
 * an unpredictable name (`.NAME.PID.<64 random bits in hex>.tmp`), drawn again on a
 * collision. The old names (`.NAME.PID.N.tmp`) were predictable: a symlink planted at one
 * made a save write through it, and two writers with the same PID (containers sharing a
 * volume) shared one temporary file.
 */

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex')
const checkpoint = (v: number): Record<string, TensorInput> => ({ w: { shape: [4, 4], data: new Float32Array(16).fill(v) } })

describe('temporary files of writers', () => {
  it('symlinks planted at every predictable temporary name are never followed', async () => {
    const dir = tempDir('stn-tmp-')
    const victim = join(dir, 'victim.txt')
    writeFileSync(victim, 'precious')
    const outputs = ['out.safetensors', 'async.safetensors', 'out.gguf', 'lin.gguf', 'lin.onnx']
    const planted = (name: string) => {
      for (let n = 0; n < 3000; n++) symlinkSync(victim, join(dir, `.${name}.${process.pid}.${n}.tmp`))
    }
    for (const f of [...outputs, 'weights.safetensors', 'config.json']) planted(f)
    const modelDir = join(dir, 'model')
    saveFile(join(dir, 'out.safetensors'), checkpoint(1))
    await saveFileAsync(join(dir, 'async.safetensors'), checkpoint(2))
    await convert(join(dir, 'out.safetensors'), join(dir, 'out.gguf'), { to: 'gguf' })
    const lin = new LinearRegression().fit([[1], [2], [3]], [2, 4, 6])
    lin.toGguf(join(dir, 'lin.gguf'))
    lin.toOnnx(join(dir, 'lin.onnx'))
    await lin.save(modelDir)
    // The same names planted inside the model directory, then a Model.save into it.
    for (const f of ['weights.safetensors', 'config.json']) {
      for (let n = 0; n < 3000; n++) symlinkSync(victim, join(modelDir, `.${f}.${process.pid}.${n}.tmp`))
    }
    await (await Model.loadPretrained(modelDir)).save(modelDir)
    expect(readFileSync(victim, 'utf8')).toBe('precious')
    for (const f of outputs) expect(lstatSync(join(dir, f)).isFile(), f).toBe(true)
    const saved = Model.loadPretrainedSync(modelDir)
    expect(Array.from(saved.getTensor('coefficients').data as Float32Array)).toEqual([2])
    // Nothing new but the outputs: no temporary file was left behind.
    expect(readdirSync(dir).filter((f) => !f.endsWith('.tmp')).sort()).toEqual([...outputs, 'model', 'victim.txt'].sort())
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp')).length).toBe(7 * 3000)
  })

  // Two processes with the same PID: PID namespaces where this machine allows them (root, or
  // unprivileged user namespaces). The core's unit test `writers_with_colliding_names_never_
  // tear_each_other` covers the same collision everywhere.
  const unshare = [['--pid', '--fork'], ['--user', '--map-root-user', '--pid', '--fork']].find(
    (args) => spawnSync('unshare', [...args, 'true']).status === 0,
  )
  it.skipIf(!unshare)('two writers with the same PID (separate PID namespaces) never tear the shared file', async () => {
    const dir = tempDir('stn-tmp-')
    const dest = join(dir, 'shared.safetensors')
    const version = (seed: number) => {
      const tensors: Record<string, TensorInput> = {}
      for (let t = 0; t < 4; t++) tensors[`w${t}`] = { shape: [64 * 1024], data: new Float32Array(64 * 1024).fill(seed * 10 + t) }
      saveFile(join(dir, `v${seed}.safetensors`), tensors)
      return sha(readFileSync(join(dir, `v${seed}.safetensors`)))
    }
    const good = new Set([version(1), version(2)])
    // Both start their writes at the same moments (see the child).
    const start = Date.now() + 1500
    const run = (seed: number) =>
      new Promise<string>((resolve, reject) => {
        const child = spawn('unshare', [...unshare!, process.execPath, join(__dirname, 'child/same_pid_writer.cjs'), dest, String(seed), '100', String(start)])
        let out = ''
        let err = ''
        child.stdout.on('data', (d) => (out += d))
        child.stderr.on('data', (d) => (err += d))
        child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`writer ${seed}: ${code} ${err}`))))
      })
    const both = Promise.all([run(1), run(2)])
    let reads = 0
    let finished = false
    both.finally(() => (finished = true)).catch(() => {})
    while (!finished) {
      try {
        const got = sha(readFileSync(dest))
        expect(good.has(got), 'a torn or mixed file').toBe(true)
        reads++
      } catch (e: any) {
        if (e.code !== 'ENOENT') throw e
      }
      await new Promise((r) => setImmediate(r))
    }
    const outs = await both
    // Both writers really had the same PID, and no write failed (a shared temporary file
    // made the second rename fail with ENOENT, and readers saw torn files, before).
    expect(outs.map((o) => o.trim())).toEqual(['pid 1: 0 failed writes', 'pid 1: 0 failed writes'])
    expect(good.has(sha(readFileSync(dest)))).toBe(true)
    expect(reads).toBeGreaterThan(10)
    expect(readdirSync(dir).sort()).toEqual(['shared.safetensors', 'v1.safetensors', 'v2.safetensors'])
  }, 120_000)
})
