import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { tempDir } from './helpers'

/**
 * Hostile arguments: JavaScript that runs while a call converts its arguments (getters,
 * Proxy traps, array element accessors, options) detaches, transfers, resizes or rewrites the
 * buffers the call was given, with garbage collections in between. Every binding entry that
 * takes a buffer is called so (sync and async), in a child process with --expose-gc so a
 * crash cannot take the runner down. Each outcome must be the right data — the file, bytes or
 * result equal what the arrays hold when the call takes them, checked by a reader written in
 * the child — or ERR_INVALID_ARGUMENT; never a crash, never other bytes. The child's oracle
 * and the table of cases are in `child/hostile_args.cjs`.
 */

const CHILD = join(__dirname, 'child/hostile_args.cjs')
/** Generated cases per run (STN_HOSTILE_ARGS_CASES for a long run). */
const RANDOM_CASES = Number(process.env.STN_HOSTILE_ARGS_CASES ?? 400)

interface Line {
  id: string
  outcome: string
  expected: string
  ok: boolean
  why?: string
}

function runChild(args: string[]) {
  const r = spawnSync(process.execPath, ['--expose-gc', CHILD, ...args], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, timeout: 300_000 })
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line)
  const last = lines[lines.length - 1]?.id
  // A crash names the case it died in: the one after the last line printed.
  expect({ status: r.status, signal: r.signal, stderr: r.stderr.slice(0, 2000), lastCaseBeforeExit: last }).toMatchObject({ status: 0, signal: null })
  expect(r.stdout.trimEnd().endsWith('done')).toBe(true)
  return lines
}

const failures = (lines: Line[]) => lines.filter((l) => !l.ok).map((l) => `${l.id}: got ${l.outcome}, expected ${l.expected}: ${l.why}`)

describe('buffers taken away while arguments are converted', () => {
  it('every entry that takes a buffer: the data as the call found it, or ERR_INVALID_ARGUMENT', () => {
    const lines = runChild(['cases', tempDir('stn-args-')])
    expect(failures(lines)).toEqual([])
    const count = (prefix: string) => lines.filter((l) => l.id.startsWith(prefix)).length
    // Each entry point is covered, both outcomes occur, and the refusals are the detached,
    // transferred, shared and resized-away buffers.
    for (const fn of ['saveFile |', 'saveFileAsync |', 'serialize |']) expect(count(fn), fn).toBeGreaterThanOrEqual(70)
    expect(count('RemoteWeights#serve |')).toBe(72)
    for (const fn of ['SafeTensorsFile.fromBytes', 'RemoteOpener#reply']) expect(count(fn), fn).toBeGreaterThanOrEqual(4)
    for (const fn of ['LinearRegression#fit', 'LinearRegression#predict |', 'LinearRegression#predictAsync', 'LinearRegression#score', 'LogisticRegression#fit', 'LogisticRegression#predict |', 'LogisticRegression#predictProba |', 'LogisticRegression#predictAsync', 'LogisticRegression#predictProbaAsync', 'LogisticRegression#score', 'Model#predict']) {
      expect(count(fn), fn).toBeGreaterThanOrEqual(21)
    }
    const by = (pattern: RegExp, outcome: string) => lines.filter((l) => pattern.test(l.id) && l.outcome === outcome).length
    const all = (pattern: RegExp) => lines.filter((l) => pattern.test(l.id)).length
    // A buffer detached or transferred once the call has it is refused, always.
    expect(by(/\| (detach|transfer|detach\+gc) \(/, 'ERR_INVALID_ARGUMENT')).toBe(all(/\| (detach|transfer|detach\+gc) \(/))
    expect(by(/SharedArrayBuffer/, 'ERR_INVALID_ARGUMENT')).toBe(all(/SharedArrayBuffer/))
    // Rewritten bytes and collections in between give the data (as it is when the call reads
    // it; rewritten labels are no integers, which is the one refusal).
    const rewrite = /^(?!.*y typed array).*\| (rewrite|gc) \(/
    expect(by(rewrite, 'data')).toBe(all(rewrite))
    // A resize that the shape follows (the victim's own shape getter) is data, not an error.
    expect(by(/victim shape getter.*\| (shrink|grow)/, 'data')).toBe(all(/victim shape getter.*\| (shrink|grow)/))
  })

  it(`${RANDOM_CASES} generated tensor maps whose getters and traps do random damage`, () => {
    const lines = runChild(['random', tempDir('stn-args-'), '20240521', String(RANDOM_CASES)])
    expect(lines.length).toBe(RANDOM_CASES)
    expect(failures(lines)).toEqual([])
    // Both outcomes are exercised in quantity.
    expect(lines.filter((l) => l.outcome === 'data').length).toBeGreaterThan(RANDOM_CASES / 5)
    expect(lines.filter((l) => l.outcome === 'ERR_INVALID_ARGUMENT').length).toBeGreaterThan(RANDOM_CASES / 5)
  })
})
