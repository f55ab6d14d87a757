import { beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { LinearRegression, LogisticRegression, Model } from '../index.js'
import { dataset, tempDir } from './helpers'
import { ensureAprenderPeer } from '../scripts/peers/aprender.mjs'

/**
 * Files written here load in the Rust crate aprender (0.72.3, the version that wrote the
 * fixtures in ../shared/fixtures/aprender, which load here: see models.spec.ts). A small
 * peer program (peers/aprender, its own workspace and lock file) loads each file with
 * aprender's own `load_safetensors` and prints aprender's predictions, which must equal ours.
 * aprender predicts in f32, we accumulate in f64: they agree to f32 rounding.
 *
 * aprender's LogisticRegression is binary only, so multiclass files are not part of this.
 */

let BINARY = ''

beforeAll(() => {
  // Built once per version of the peer's sources, outside the clone (scripts/peers/aprender.mjs):
  // a few minutes the first time, a lookup afterwards.
  BINARY = ensureAprenderPeer()
}, 900_000)

function aprenderPredicts(kind: 'linear' | 'logistic', path: string, rows: number[][]): number[] {
  const args = [kind, path, String(rows[0].length), ...rows.flat().map(String)]
  const run = spawnSync(BINARY, args, { encoding: 'utf8' })
  if (run.status !== 0) throw new Error(`aprender refused ${path}: ${run.stderr}`)
  return run.stdout.trim().split(' ').map(Number)
}

function expectClose(theirs: number[], ours: ArrayLike<number>, tolerance: number) {
  expect(theirs.length).toBe(ours.length)
  const scale = Math.max(1, ...Array.from(ours, Math.abs))
  for (let i = 0; i < theirs.length; i++) expect(Math.abs(theirs[i] - ours[i]), `value ${i}`).toBeLessThanOrEqual(tolerance * scale)
}

describe('aprender loads and runs the model files written here', () => {
  const diabetes = dataset('diabetes')
  const cancer = dataset('breast_cancer')
  const sample = (rows: number[][]) => rows.filter((_, i) => i % 37 === 0)

  it('LinearRegression.saveSafetensors (with provenance metadata): aprender predicts as we do', () => {
    const path = join(tempDir(), 'diabetes.safetensors')
    const model = new LinearRegression().fit(diabetes.rows, diabetes.y)
    model.saveSafetensors(path, { metadata: { dataset: 'diabetes.csv', git_commit: 'abc123' } })
    const rows = sample(diabetes.rows)
    expectClose(aprenderPredicts('linear', path, rows), model.predict(rows), 1e-5)
  })

  it('LogisticRegression.saveSafetensors, binary 0/1: aprender’s probabilities are ours', () => {
    const path = join(tempDir(), 'cancer.safetensors')
    const model = new LogisticRegression().fit(cancer.rows, cancer.y)
    model.saveSafetensors(path)
    const rows = sample(cancer.rows)
    const ours = Array.from(model.predictProba(rows)).filter((_, i) => i % 2 === 1)
    expectClose(aprenderPredicts('logistic', path, rows), ours, 1e-5)
  })

  it('the model.safetensors of model.save(dir) too', async () => {
    const dir = tempDir()
    const model = new LinearRegression({ fitIntercept: false }).fit(diabetes.rows, diabetes.y)
    await model.save(dir)
    const rows = sample(diabetes.rows)
    const theirs = aprenderPredicts('linear', join(dir, 'model.safetensors'), rows)
    expectClose(theirs, model.predict(rows), 1e-5)
    expectClose(theirs, (await Model.loadPretrained(dir)).predict(rows), 1e-5)
  })
})
