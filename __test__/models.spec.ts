import { describe, expect, it } from 'vitest'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { LinearRegression, LogisticRegression, Model, SafeTensorsFile, saveFile, type Matrix, type TensorInput } from '../index.js'
import { dataset, expectedJson, fixture, tempDir, type Dataset } from './helpers'

// ---------------------------------------------------------------------------------------
// Data and reference.

const flat64 = (d: Dataset): Matrix => ({ data: Float64Array.from(d.rows.flat()), rows: d.nRows, cols: d.nCols })
const flat32 = (d: Dataset): Matrix => ({ data: Float32Array.from(d.rows.flat()), rows: d.nRows, cols: d.nCols })
/** The number[][] holding exactly the values a Float32Array form holds. */
const rounded32 = (d: Dataset): number[][] => d.rows.map((r) => r.map(Math.fround))

/** The three forms of a Matrix, with the rows they denote. */
const FORMS: Array<[string, (d: Dataset) => Matrix]> = [
  ['number[][]', (d) => d.rows],
  ['{data: Float64Array}', flat64],
  ['{data: Float32Array}', flat32],
]

const diabetes = dataset('diabetes')
const breastCancer = dataset('breast_cancer')
const wine = dataset('wine')
const DATA: Record<string, Dataset> = { diabetes, breast_cancer: breastCancer, wine }

/** scikit-learn's answers (scripts/sklearn_reference.py). */
const reference = JSON.parse(readFileSync(resolve(__dirname, '../crates/core/tests/data/sklearn_reference.json'), 'utf8'))
const FIRST = reference.first_rows as number
const linearCase = (name: string) => reference.linear_regression.find((c: any) => c.name === name)
const logisticCase = (name: string) => reference.logistic_regression.find((c: any) => c.name === name)

const firstRows = (d: Dataset, n = FIRST) => d.rows.slice(0, n)

function maxRelative(got: ArrayLike<number>, want: number[]): number {
  expect(got.length).toBe(want.length)
  let m = 0
  for (let i = 0; i < want.length; i++) m = Math.max(m, Math.abs(got[i] - want[i]) / Math.abs(want[i]))
  return m
}

function maxScaled(got: ArrayLike<number>, want: number[], scale: number): number {
  expect(got.length).toBe(want.length)
  let m = 0
  for (let i = 0; i < want.length; i++) m = Math.max(m, Math.abs(got[i] - want[i]) / scale)
  return m
}

const maxAbs = (v: number[]) => v.reduce((m, x) => Math.max(m, Math.abs(x)), 0)

/** Element-wise identity (Object.is), for "bit-exact" claims. */
function expectSame(got: ArrayLike<number>, want: ArrayLike<number>, what = '') {
  expect(got.length, what).toBe(want.length)
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got[i], want[i])) expect.fail(`${what}[${i}]: ${got[i]} !== ${want[i]}`)
  }
}

/** The error `f` throws must be an Error with this code. */
function expectCode(f: () => unknown, code: string): any {
  let err: any
  try {
    f()
  } catch (e) {
    err = e
  }
  expect(err, `expected ${code}`).toBeInstanceOf(Error)
  expect(err.code, err?.message).toBe(code)
  return err
}

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z))

// ---------------------------------------------------------------------------------------
// LinearRegression.

describe('LinearRegression vs scikit-learn (diabetes, 442 × 10)', () => {
  const want = linearCase('diabetes')

  it.each(FORMS)('x as %s: coefficients, intercept, predictions within 1e-4 relative; score', (_form, form) => {
    const model = new LinearRegression()
    expect(model.isFitted).toBe(false)
    expect(model.fitIntercept).toBe(true)
    expect(model.fit(form(diabetes), diabetes.y)).toBe(model)
    expect(model.isFitted).toBe(true)
    expect(model.nFeatures).toBe(10)
    expect(model.coefficients).toBeInstanceOf(Float32Array)
    expect(maxRelative(model.coefficients, want.coef)).toBeLessThan(1e-4)
    expect(Math.abs(model.intercept - want.intercept) / Math.abs(want.intercept)).toBeLessThan(1e-4)
    const predictions = model.predict(firstRows(diabetes))
    expect(predictions).toBeInstanceOf(Float32Array)
    expect(maxRelative(predictions, want.predict_first_rows)).toBeLessThan(1e-4)
    expect(model.score(form(diabetes), diabetes.y)).toBeCloseTo(want.score, 6)
  })

  it('fitIntercept: false matches scikit-learn and keeps the intercept at exactly 0', () => {
    const want = linearCase('diabetes_no_intercept')
    const model = new LinearRegression({ fitIntercept: false }).fit(diabetes.rows, diabetes.y)
    expect(model.fitIntercept).toBe(false)
    expect(Object.is(model.intercept, 0)).toBe(true)
    expect(maxRelative(model.coefficients, want.coef)).toBeLessThan(1e-4)
    expect(maxRelative(model.predict(firstRows(diabetes)), want.predict_first_rows)).toBeLessThan(1e-4)
    expect(model.score(diabetes.rows, diabetes.y)).toBeCloseTo(want.score, 6)
  })

  it('a column scaled by 1e6 gives the true least-squares solution (1e-4 relative)', () => {
    const want = linearCase('diabetes_rescaled_column')
    const col = reference.rescaled_column as number
    const rows = diabetes.rows.map((r) => r.map((v, j) => (j === col ? v * reference.rescale : v)))
    const model = new LinearRegression().fit(rows, diabetes.y)
    expect(maxRelative(model.coefficients, want.coef)).toBeLessThan(1e-4)
    expect(maxRelative(model.predict(rows.slice(0, FIRST)), want.predict_first_rows)).toBeLessThan(1e-4)
  })

  it('number[][] and {data: Float64Array} are the same matrix (bit-identical fit and predictions); Float32Array equals its rounded rows', () => {
    const a = new LinearRegression().fit(diabetes.rows, diabetes.y)
    const b = new LinearRegression().fit(flat64(diabetes), Float64Array.from(diabetes.y))
    expectSame(b.coefficients, a.coefficients, 'coefficients')
    expect(Object.is(b.intercept, a.intercept)).toBe(true)
    expectSame(b.predict(flat64(diabetes)), a.predict(diabetes.rows), 'predict')
    const c = new LinearRegression().fit(flat32(diabetes), diabetes.y)
    const d = new LinearRegression().fit(rounded32(diabetes), diabetes.y)
    expectSame(c.coefficients, d.coefficients, 'f32 coefficients')
    expectSame(c.predict(flat32(diabetes)), d.predict(rounded32(diabetes)), 'f32 predict')
  })

  it('a typed-array view with a byteOffset is read from its offset', () => {
    const model = new LinearRegression().fit(diabetes.rows, diabetes.y)
    const rows = firstRows(diabetes, 4)
    for (const Ctor of [Float64Array, Float32Array]) {
      const backing = new Ctor(3 + 40 + 5).fill(1e6)
      backing.set(rows.flat(), 3)
      const view = backing.subarray(3, 43)
      const plain = Ctor === Float64Array ? rows : rows.map((r) => r.map(Math.fround))
      expectSame(model.predict({ data: view, rows: 4, cols: 10 }), model.predict(plain), Ctor.name)
    }
  })

  it('predictAsync equals predict', async () => {
    const model = new LinearRegression().fit(diabetes.rows, diabetes.y)
    const sync = model.predict(diabetes.rows)
    expectSame(await model.predictAsync(diabetes.rows), sync)
    expectSame(await model.predictAsync(flat64(diabetes)), sync)
  })

  it('dependent columns give the minimum-norm solution, not an error', () => {
    // x1 = 2·x0 and y = x0: every a + 2b = 1 fits; the minimum-norm one is (0.2, 0.4).
    const model = new LinearRegression().fit([[1, 2], [2, 4], [3, 6], [5, 10]], [1, 2, 3, 5])
    expect(maxRelative(model.coefficients, [0.2, 0.4])).toBeLessThan(1e-6)
    expect(Math.abs(model.intercept)).toBeLessThan(1e-6)
    expectSame(model.predict([[10, 20]]), [Math.fround(10 * model.coefficients[0] + 20 * model.coefficients[1] + model.intercept)])
  })

  it('predicts exactly on exact data, and refitting replaces the model', () => {
    // y = 2·x0 − 3·x1 + 0.5 on small integers: every value is exact in f32.
    const x = [[0, 0], [1, 0], [0, 1], [2, 3], [-1, 4]]
    const y = x.map(([a, b]) => 2 * a - 3 * b + 0.5)
    const model = new LinearRegression().fit(x, y)
    expect(maxRelative(model.coefficients, [2, -3])).toBeLessThan(1e-6)
    expect(model.intercept).toBeCloseTo(0.5, 6)
    expect(model.score(x, y)).toBeCloseTo(1, 12)
    model.fit(x, y.map((v) => -v))
    expect(maxRelative(model.coefficients, [-2, 3])).toBeLessThan(1e-6)
    expect(model.intercept).toBeCloseTo(-0.5, 6)
  })
})

// ---------------------------------------------------------------------------------------
// LogisticRegression.

const LOGISTIC_CASES: Array<[string, string, number]> = [
  ['breast_cancer', 'breast_cancer', 1.0],
  ['breast_cancer_c0.1', 'breast_cancer', 0.1],
  ['wine', 'wine', 1.0],
]

describe('LogisticRegression vs scikit-learn (breast_cancer binary, wine 3 classes)', () => {
  describe.each(LOGISTIC_CASES)('%s', (name, data, c) => {
    const d = DATA[data]
    const refCase = logisticCase(name)

    it.each(FORMS)('x as %s: coefficients 1e-3 of max|coef|, probabilities 1e-4, labels, score (lbfgs and newton-cholesky)', (_form, form) => {
      const model = new LogisticRegression({ c })
      expect(model.isFitted).toBe(false)
      expect(model.nIter).toBeNull()
      expect(model.fit(form(d), d.y)).toBe(model)
      expect(model.converged).toBe(true)
      expect(model.nIter).toBeGreaterThan(0)
      expect(model.nIter).toBeLessThanOrEqual(100)
      expect(model.nFeatures).toBe(d.nCols)
      const proba = model.predictProba(firstRows(d))
      const labels = model.predict(firstRows(d))
      expect(labels).toBeInstanceOf(Int32Array)
      for (const solver of ['lbfgs', 'newton_cholesky']) {
        const want = refCase[solver]
        expect(want.params.C).toBe(c)
        expect(Array.from(model.classes)).toEqual(want.classes)
        const coef: number[] = want.coef.flat()
        const intercept: number[] = want.intercept
        expect(model.coefficients.length).toBe(coef.length)
        expect(maxScaled(model.coefficients, coef, maxAbs(coef)), `${solver} coefficients`).toBeLessThan(1e-3)
        expect(maxScaled(model.intercept, intercept, maxAbs(intercept)), `${solver} intercept`).toBeLessThan(1e-3)
        expect(maxScaled(proba, want.predict_proba_first_rows.flat(), 1), `${solver} proba`).toBeLessThan(1e-4)
        expect(Array.from(labels)).toEqual(want.predict_first_rows)
        expect(model.score(form(d), d.y)).toBeCloseTo(want.score, 12)
      }
    })
  })

  it('the binary shapes: one intercept and nFeatures coefficients; multiclass: nClasses and nClasses × nFeatures', () => {
    const binary = new LogisticRegression().fit(breastCancer.rows, breastCancer.y)
    expect(binary.coefficients.length).toBe(30)
    expect(binary.intercept.length).toBe(1)
    const multi = new LogisticRegression().fit(wine.rows, wine.y)
    expect(multi.coefficients.length).toBe(3 * 13)
    expect(multi.intercept.length).toBe(3)
    // Probabilities: rows × classes, each row summing to 1.
    const p = multi.predictProba(wine.rows)
    expect(p.length).toBe(wine.nRows * 3)
    for (let i = 0; i < wine.nRows; i++) expect(p[3 * i] + p[3 * i + 1] + p[3 * i + 2]).toBeCloseTo(1, 6)
  })

  it('labels -1/1 give the 0/1 model with relabelled classes (bit-identical)', () => {
    const base = new LogisticRegression().fit(breastCancer.rows, breastCancer.y)
    const pm = breastCancer.y.map((v) => (v === 1 ? 1 : -1))
    for (const y of [pm, Int32Array.from(pm), Float64Array.from(pm)]) {
      const model = new LogisticRegression().fit(breastCancer.rows, y)
      expect(Array.from(model.classes)).toEqual([-1, 1])
      expectSame(model.coefficients, base.coefficients, 'coefficients')
      expectSame(model.intercept, base.intercept, 'intercept')
      expectSame(model.predictProba(breastCancer.rows), base.predictProba(breastCancer.rows), 'proba')
      expect(Array.from(model.predict(breastCancer.rows))).toEqual(Array.from(base.predict(breastCancer.rows)).map((v) => (v === 1 ? 1 : -1)))
      expect(model.score(breastCancer.rows, y)).toBe(base.score(breastCancer.rows, breastCancer.y))
    }
  })

  it('labels 3/7/9 give the 0/1/2 model with relabelled classes (bit-identical)', () => {
    const base = new LogisticRegression().fit(wine.rows, wine.y)
    const map = [3, 7, 9]
    const y = wine.y.map((v) => map[v])
    const model = new LogisticRegression().fit(wine.rows, y)
    expect(Array.from(model.classes)).toEqual([3, 7, 9])
    expectSame(model.coefficients, base.coefficients, 'coefficients')
    expectSame(model.intercept, base.intercept, 'intercept')
    expectSame(model.predictProba(wine.rows), base.predictProba(wine.rows), 'proba')
    expect(Array.from(model.predict(wine.rows))).toEqual(Array.from(base.predict(wine.rows)).map((v) => map[v]))
    expect(model.score(wine.rows, y)).toBeCloseTo(logisticCase('wine').newton_cholesky.score, 12)
  })

  it('unsorted, negative labels: classes come back sorted and probabilities follow that order', () => {
    // Class k sits at x = 10·k (k = 0, 1, 2) with labels 5, −2, 0: sorted classes [−2, 0, 5].
    const labelOf = [5, -2, 0]
    const x: number[][] = []
    const y: number[] = []
    for (let k = 0; k < 3; k++) for (let j = 0; j < 5; j++) { x.push([10 * k + j * 0.1]); y.push(labelOf[k]) }
    const model = new LogisticRegression().fit(x, y)
    expect(Array.from(model.classes)).toEqual([-2, 0, 5])
    expect(Array.from(model.predict([[0.2], [10.2], [20.2]]))).toEqual([5, -2, 0])
    const p = model.predictProba([[0.2]])
    // The row of label 5 (column 2 in sorted order) is the most probable.
    expect(p[2]).toBeGreaterThan(p[0])
    expect(p[2]).toBeGreaterThan(p[1])
  })

  it('fitIntercept: false reaches the analytic optimum, intercept exactly 0', () => {
    // x = [1], [−1]; y = 1, 0; C = 0.5. Objective 0.5·w² − 2C·log σ(w): w = 2C·(1 − σ(w)).
    const C = 0.5
    let lo = 0
    let hi = 2
    for (let i = 0; i < 200; i++) {
      const mid = (lo + hi) / 2
      if (mid - 2 * C * (1 - sigmoid(mid)) > 0) hi = mid
      else lo = mid
    }
    const w = (lo + hi) / 2
    const model = new LogisticRegression({ fitIntercept: false, c: C, tol: 1e-8 }).fit([[1], [-1]], [1, 0])
    expect(Math.abs(model.coefficients[0] - w) / w).toBeLessThan(1e-6)
    expectSame(model.intercept, [0])
    const p = model.predictProba([[1], [-1], [3]])
    const want = [1 - sigmoid(w), sigmoid(w), sigmoid(w), 1 - sigmoid(w), 1 - sigmoid(3 * w), sigmoid(3 * w)]
    expect(maxScaled(p, want, 1)).toBeLessThan(1e-6)
    // Multiclass without intercept: three zeros.
    const multi = new LogisticRegression({ fitIntercept: false }).fit(wine.rows, wine.y)
    expectSame(multi.intercept, [0, 0, 0])
    expect(multi.score(wine.rows, wine.y)).toBeGreaterThan(0.9)
  })

  it('predictAsync / predictProbaAsync equal predict / predictProba', async () => {
    for (const d of [breastCancer, wine]) {
      const model = new LogisticRegression().fit(d.rows, d.y)
      expectSame(await model.predictAsync(d.rows), model.predict(d.rows), 'predict')
      expectSame(await model.predictProbaAsync(flat64(d)), model.predictProba(d.rows), 'proba')
      const labels = await model.predictAsync(flat32(d))
      expect(labels).toBeInstanceOf(Int32Array)
      expectSame(labels, model.predict(rounded32(d)), 'f32 predict')
    }
  })
})

// ---------------------------------------------------------------------------------------
// Errors.

describe('invalid input → ERR_INVALID_ARGUMENT', () => {
  const linear = () => new LinearRegression().fit(diabetes.rows, diabetes.y)
  const logistic = () => new LogisticRegression().fit(wine.rows, wine.y)

  it('ragged rows (fit, predict, score)', () => {
    expectCode(() => new LinearRegression().fit([[1, 2], [3]], [1, 2]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LogisticRegression().fit([[1, 2], [3, 4, 5]], [0, 1]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => linear().predict([diabetes.rows[0], diabetes.rows[1].slice(1)]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => logistic().score([wine.rows[0], [1]], [0, 0]), 'ERR_INVALID_ARGUMENT')
  })

  it('wrong width at predict / predictProba / score', () => {
    const lin = linear()
    const err = expectCode(() => lin.predict([[1, 2, 3]]), 'ERR_INVALID_ARGUMENT')
    expect(err.message).toContain('10')
    expectCode(() => lin.predict({ data: new Float32Array(11), rows: 1, cols: 11 }), 'ERR_INVALID_ARGUMENT')
    expectCode(() => lin.score([[1, 2]], [1]), 'ERR_INVALID_ARGUMENT')
    const log = logistic()
    expectCode(() => log.predict(diabetes.rows.slice(0, 2)), 'ERR_INVALID_ARGUMENT')
    expectCode(() => log.predictProba({ data: new Float64Array(12), rows: 1, cols: 12 }), 'ERR_INVALID_ARGUMENT')
  })

  it('{data, rows, cols} whose sizes disagree, or of the wrong type', () => {
    const lin = linear()
    expectCode(() => lin.predict({ data: new Float64Array(19), rows: 2, cols: 10 }), 'ERR_INVALID_ARGUMENT')
    expectCode(() => lin.predict({ data: new Float64Array(21), rows: 2, cols: 10 }), 'ERR_INVALID_ARGUMENT')
    expectCode(() => lin.predict({ data: new Float64Array(10), rows: 1.5, cols: 10 }), 'ERR_INVALID_ARGUMENT')
    expectCode(() => lin.predict({ data: new Int32Array(10) as any, rows: 1, cols: 10 }), 'ERR_INVALID_ARGUMENT')
    expectCode(() => lin.predict({ data: Array(10).fill(0) as any, rows: 1, cols: 10 }), 'ERR_INVALID_ARGUMENT')
    expectCode(() => lin.predict('x' as any), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LinearRegression().fit({ data: new Float64Array(6), rows: 3, cols: 3 }, [1, 2, 3]), 'ERR_INVALID_ARGUMENT')
  })

  it('y of the wrong length', () => {
    expectCode(() => new LinearRegression().fit(diabetes.rows, diabetes.y.slice(1)), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LinearRegression().fit([[1], [2]], [1, 2, 3]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LogisticRegression().fit(wine.rows, wine.y.slice(0, 10)), 'ERR_INVALID_ARGUMENT')
    expectCode(() => linear().score(diabetes.rows, diabetes.y.slice(2)), 'ERR_INVALID_ARGUMENT')
    expectCode(() => logistic().score(wine.rows, [...wine.y, 0]), 'ERR_INVALID_ARGUMENT')
  })

  it.each([NaN, Infinity, -Infinity])('%s in x (fit and predict) or in y', (bad) => {
    const x = [[1, 2], [3, 4], [5, bad], [7, 9]]
    expectCode(() => new LinearRegression().fit(x, [1, 2, 3, 4]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LogisticRegression().fit(x, [0, 1, 0, 1]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LinearRegression().fit({ data: Float32Array.from(x.flat()), rows: 4, cols: 2 }, [1, 2, 3, 4]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LinearRegression().fit([[1], [2], [3]], [1, bad, 3]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LogisticRegression().fit([[1], [2], [3]], [0, bad, 1]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => linear().predict([[...diabetes.rows[0].slice(0, 9), bad]]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => logistic().predictProba({ data: Float64Array.from([...wine.rows[0].slice(1), bad]), rows: 1, cols: 13 }), 'ERR_INVALID_ARGUMENT')
  })

  it('empty input', () => {
    expectCode(() => new LinearRegression().fit([], []), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LogisticRegression().fit([], []), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LinearRegression().fit([[], []], [1, 2]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LinearRegression().fit({ data: new Float64Array(0), rows: 0, cols: 3 }, []), 'ERR_INVALID_ARGUMENT')
    expectCode(() => linear().predict([]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => logistic().predictProba({ data: new Float32Array(0), rows: 0, cols: 13 }), 'ERR_INVALID_ARGUMENT')
  })

  it('a single class, and labels that are not integers', () => {
    const err = expectCode(() => new LogisticRegression().fit([[1], [2], [3]], [4, 4, 4]), 'ERR_INVALID_ARGUMENT')
    expect(err.message).toContain('class')
    expectCode(() => new LogisticRegression().fit([[1], [2], [3]], [0, 1.5, 1]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LogisticRegression().fit([[1], [2]], [0, 2 ** 40]), 'ERR_INVALID_ARGUMENT')
    expectCode(() => new LogisticRegression().fit([[1], [2]], Float32Array.from([0, 0.25])), 'ERR_INVALID_ARGUMENT')
    expectCode(() => logistic().score(wine.rows.slice(0, 2), [0, 0.5]), 'ERR_INVALID_ARGUMENT')
  })

  it('bad options: c <= 0 or not finite, maxIter 0 or fractional, tol <= 0', () => {
    for (const options of [{ c: 0 }, { c: -1 }, { c: NaN }, { c: Infinity }, { maxIter: 0 }, { maxIter: 2.5 }, { maxIter: -1 }, { tol: 0 }, { tol: -1e-4 }]) {
      expectCode(() => new LogisticRegression(options), 'ERR_INVALID_ARGUMENT')
    }
    // The limits themselves are fine.
    expect(new LogisticRegression({ c: 1e-6, maxIter: 1, tol: 1e-12 }).isFitted).toBe(false)
  })

  // napi-rs's own object conversion would reject these before our validation with its status
  // names as codes ('NumberExpected', …); options are read property by property instead, so
  // callers get API.md's ERR_INVALID_ARGUMENT.
  it('options of the wrong type → ERR_INVALID_ARGUMENT', () => {
    const fitted = new LinearRegression().fit([[1], [2], [3]], [1, 2, 3])
    const codes = [
      () => new LogisticRegression({ c: '1' as any }),
      () => new LogisticRegression({ maxIter: '10' as any }),
      () => new LinearRegression({ fitIntercept: 'no' as any }),
      () => fitted.toGguf(join(tempDir(), 'x.gguf'), { quantization: 8 as any }),
    ].map((f) => {
      try {
        f()
        return 'no error'
      } catch (e: any) {
        return e.code
      }
    })
    expect(codes).toEqual(['ERR_INVALID_ARGUMENT', 'ERR_INVALID_ARGUMENT', 'ERR_INVALID_ARGUMENT', 'ERR_INVALID_ARGUMENT'])
  })

  it('maxIter: 1 stops after one Newton iteration and reports converged = false', () => {
    const model = new LogisticRegression({ maxIter: 1 }).fit(breastCancer.rows, breastCancer.y)
    expect(model.nIter).toBe(1)
    expect(model.converged).toBe(false)
    expect(model.isFitted).toBe(true)
  })

  it('a failed fit leaves the previous fit in place', () => {
    const model = linear()
    const before = Float32Array.from(model.coefficients)
    expectCode(() => model.fit([[1, 2]], [1, 2]), 'ERR_INVALID_ARGUMENT')
    expect(model.isFitted).toBe(true)
    expectSame(model.coefficients, before)
  })
})

describe('use before fit → ERR_NOT_FITTED', () => {
  it('LinearRegression: predict, score, getters, exports, saves', async () => {
    const dir = tempDir()
    const m = new LinearRegression()
    expect(m.isFitted).toBe(false)
    expectCode(() => m.predict([[1]]), 'ERR_NOT_FITTED')
    expectCode(() => m.score([[1]], [1]), 'ERR_NOT_FITTED')
    expectCode(() => m.coefficients, 'ERR_NOT_FITTED')
    expectCode(() => m.intercept, 'ERR_NOT_FITTED')
    expectCode(() => m.nFeatures, 'ERR_NOT_FITTED')
    expectCode(() => m.toOnnx(join(dir, 'm.onnx')), 'ERR_NOT_FITTED')
    expectCode(() => m.toGguf(join(dir, 'm.gguf')), 'ERR_NOT_FITTED')
    expectCode(() => m.saveSafetensors(join(dir, 'm.safetensors')), 'ERR_NOT_FITTED')
    await expect(m.predictAsync([[1]])).rejects.toMatchObject({ code: 'ERR_NOT_FITTED' })
    await expect(m.saveSafetensorsAsync(join(dir, 'a.safetensors'))).rejects.toMatchObject({ code: 'ERR_NOT_FITTED' })
    await expect(m.save(join(dir, 'dir'))).rejects.toMatchObject({ code: 'ERR_NOT_FITTED' })
    for (const f of ['m.onnx', 'm.gguf', 'm.safetensors', 'a.safetensors']) expect(existsSync(join(dir, f)), f).toBe(false)
  })

  it('LogisticRegression: predict, predictProba, score, getters, exports, saves', async () => {
    const dir = tempDir()
    const m = new LogisticRegression()
    expect(m.nIter).toBeNull()
    expect(m.converged).toBeNull()
    expectCode(() => m.predict([[1]]), 'ERR_NOT_FITTED')
    expectCode(() => m.predictProba([[1]]), 'ERR_NOT_FITTED')
    expectCode(() => m.score([[1]], [1]), 'ERR_NOT_FITTED')
    expectCode(() => m.classes, 'ERR_NOT_FITTED')
    expectCode(() => m.coefficients, 'ERR_NOT_FITTED')
    expectCode(() => m.intercept, 'ERR_NOT_FITTED')
    expectCode(() => m.nFeatures, 'ERR_NOT_FITTED')
    expectCode(() => m.toOnnx(join(dir, 'm.onnx')), 'ERR_NOT_FITTED')
    expectCode(() => m.toGguf(join(dir, 'm.gguf'), { quantization: 'Q8_0' }), 'ERR_NOT_FITTED')
    expectCode(() => m.saveSafetensors(join(dir, 'm.safetensors')), 'ERR_NOT_FITTED')
    await expect(m.predictAsync([[1]])).rejects.toMatchObject({ code: 'ERR_NOT_FITTED' })
    await expect(m.predictProbaAsync([[1]])).rejects.toMatchObject({ code: 'ERR_NOT_FITTED' })
    await expect(m.save(join(dir, 'dir'))).rejects.toMatchObject({ code: 'ERR_NOT_FITTED' })
    expect(existsSync(join(dir, 'm.onnx'))).toBe(false)
  })
})

describe('async calls report failures by rejecting', () => {
  // API.md: async calls report failures as a rejected Promise, never a synchronous throw,
  // even when the bad argument is detected on the calling thread.
  it('predictAsync / predictProbaAsync with a ragged or wrong-width x reject (not throw)', async () => {
    const lin = new LinearRegression().fit(diabetes.rows, diabetes.y)
    const log = new LogisticRegression().fit(wine.rows, wine.y)
    const settle = async (f: () => Promise<unknown>) => {
      let promise: Promise<unknown>
      try {
        promise = f()
      } catch (e: any) {
        return `threw synchronously (${e.code})`
      }
      return promise.then(
        () => 'resolved',
        (e: any) => `rejected ${e.code}`,
      )
    }
    expect(await settle(() => lin.predictAsync([[1, 2], [3]]))).toBe('rejected ERR_INVALID_ARGUMENT')
    expect(await settle(() => lin.predictAsync([[1, 2]]))).toBe('rejected ERR_INVALID_ARGUMENT')
    expect(await settle(() => log.predictProbaAsync([[NaN]]))).toBe('rejected ERR_INVALID_ARGUMENT')
    expect(await settle(() => log.predictAsync({ data: new Float64Array(3), rows: 2, cols: 13 }))).toBe('rejected ERR_INVALID_ARGUMENT')
  })

  // The pending task works on its own copy of the model and the input, so a refit is
  // allowed while it runs and does not change what the promise resolves to.
  it('fit while a predictAsync is pending succeeds; the pending promise keeps the old model', async () => {
    const x = [[1], [2], [3]]
    const model = new LinearRegression().fit(x, [2, 4, 6])
    const before = model.predict(x)
    const pending = model.predictAsync(x)
    let refit: unknown = 'ok'
    try {
      model.fit(x, [-2, -4, -6])
    } catch (e: any) {
      refit = `${e.code}: ${e.message}`
    }
    const old = await pending
    expect(refit).toBe('ok')
    expectSame(old, before)
    expect(model.predict([[1]])[0]).toBeCloseTo(-2, 5)
  })

  it('saveSafetensorsAsync / loadSafetensorsAsync reject with the codes of their sync twins', async () => {
    const dir = tempDir()
    const lin = new LinearRegression().fit(diabetes.rows, diabetes.y)
    await expect(lin.saveSafetensorsAsync(join(dir, 'x.safetensors'), { metadata: { model_type: 'other' } })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(LinearRegression.loadSafetensorsAsync(join(dir, 'missing.safetensors'))).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    await expect(LogisticRegression.loadSafetensorsAsync(join(dir, 'missing.safetensors'))).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    expectCode(() => LinearRegression.loadSafetensors(join(dir, 'missing.safetensors')), 'ERR_NOT_FOUND')
  })
})

// ---------------------------------------------------------------------------------------
// Persistence.

/** The JSON header of a SafeTensors file, as written. */
function header(path: string): Record<string, any> {
  const bytes = readFileSync(path)
  const len = Number(bytes.readBigUInt64LE(0))
  return JSON.parse(bytes.subarray(8, 8 + len).toString('utf8'))
}

type Fitted = { kind: 'linear'; model: LinearRegression; d: Dataset } | { kind: 'logistic'; model: LogisticRegression; d: Dataset }

const FITTED: Array<[string, () => Fitted]> = [
  ['linear (diabetes)', () => ({ kind: 'linear', model: new LinearRegression().fit(diabetes.rows, diabetes.y), d: diabetes })],
  ['linear without intercept', () => ({ kind: 'linear', model: new LinearRegression({ fitIntercept: false }).fit(diabetes.rows, diabetes.y), d: diabetes })],
  ['logistic binary 0/1 (breast_cancer)', () => ({ kind: 'logistic', model: new LogisticRegression().fit(breastCancer.rows, breastCancer.y), d: breastCancer })],
  ['logistic binary -1/1', () => ({ kind: 'logistic', model: new LogisticRegression().fit(breastCancer.rows, breastCancer.y.map((v) => 2 * v - 1)), d: breastCancer })],
  ['logistic 3 classes 3/7/9 (wine)', () => ({ kind: 'logistic', model: new LogisticRegression({ c: 0.5 }).fit(wine.rows, wine.y.map((v) => [3, 7, 9][v])), d: wine })],
]

describe('saveSafetensors / loadSafetensors', () => {
  describe.each(FITTED)('%s', (_name, make) => {
    it('round trip (sync and async) is bit-exact: coefficients, intercept, classes, predictions', async () => {
      const f = make()
      const dir = tempDir()
      const path = join(dir, 'model.safetensors')
      f.model.saveSafetensors(path)
      const loaded =
        f.kind === 'linear'
          ? [LinearRegression.loadSafetensors(path), await LinearRegression.loadSafetensorsAsync(path)]
          : [LogisticRegression.loadSafetensors(path), await LogisticRegression.loadSafetensorsAsync(path)]
      for (const m of loaded) {
        expect(m.isFitted).toBe(true)
        expect(m.nFeatures).toBe(f.model.nFeatures)
        expectSame(m.coefficients, f.model.coefficients, 'coefficients')
        if (f.kind === 'linear') {
          const l = m as LinearRegression
          expect(Object.is(l.intercept, f.model.intercept)).toBe(true)
          expect(l.fitIntercept).toBe(f.model.fitIntercept)
          expectSame(l.predict(f.d.rows), f.model.predict(f.d.rows), 'predict')
        } else {
          const l = m as LogisticRegression
          expectSame(l.intercept, f.model.intercept, 'intercept')
          expect(Array.from(l.classes)).toEqual(Array.from(f.model.classes))
          expectSame(l.predictProba(f.d.rows), f.model.predictProba(f.d.rows), 'predictProba')
          expect(Array.from(l.predict(f.d.rows))).toEqual(Array.from(f.model.predict(f.d.rows)))
          // A loaded model was not fitted here: no solver report.
          expect(l.nIter).toBeNull()
        }
      }
    })

    it('bytes are deterministic: saving twice (sync or async) gives identical files', async () => {
      const f = make()
      const dir = tempDir()
      const meta = { metadata: { source: 'models.spec.ts' } }
      f.model.saveSafetensors(join(dir, 'a.safetensors'), meta)
      f.model.saveSafetensors(join(dir, 'b.safetensors'), meta)
      await f.model.saveSafetensorsAsync(join(dir, 'c.safetensors'), meta)
      const a = readFileSync(join(dir, 'a.safetensors'))
      expect(a.equals(readFileSync(join(dir, 'b.safetensors')))).toBe(true)
      expect(a.equals(readFileSync(join(dir, 'c.safetensors')))).toBe(true)
      // Reloaded and saved again: still the same bytes.
      const again = f.kind === 'linear' ? LinearRegression.loadSafetensors(join(dir, 'a.safetensors')) : LogisticRegression.loadSafetensors(join(dir, 'a.safetensors'))
      again.saveSafetensors(join(dir, 'd.safetensors'), meta)
      expect(a.equals(readFileSync(join(dir, 'd.safetensors')))).toBe(true)
    })
  })

  it('metadata: model_type, n_features, fit_intercept, n_classes and the caller’s provenance strings', () => {
    const dir = tempDir()
    const provenance = { source: 'datasets/wine.csv', trained_by: 'models.spec.ts', 'note ✓': 'unicode ok' }
    const lin = new LinearRegression({ fitIntercept: false }).fit(diabetes.rows, diabetes.y)
    lin.saveSafetensors(join(dir, 'lin.safetensors'), { metadata: provenance })
    expect(SafeTensorsFile.open(join(dir, 'lin.safetensors')).metadata).toEqual({
      ...provenance,
      model_type: 'linear_regression',
      n_features: '10',
      fit_intercept: 'false',
    })
    const log = new LogisticRegression().fit(wine.rows, wine.y)
    log.saveSafetensors(join(dir, 'log.safetensors'), { metadata: provenance })
    expect(SafeTensorsFile.open(join(dir, 'log.safetensors')).metadata).toEqual({
      ...provenance,
      model_type: 'logistic_regression',
      n_features: '13',
      fit_intercept: 'true',
      n_classes: '3',
    })
  })

  it('a reserved metadata key with another value → ERR_INVALID_ARGUMENT, and no file', () => {
    const dir = tempDir()
    const lin = new LinearRegression().fit(diabetes.rows, diabetes.y)
    const log = new LogisticRegression().fit(wine.rows, wine.y)
    expectCode(() => lin.saveSafetensors(join(dir, 'a.safetensors'), { metadata: { model_type: 'logistic_regression' } }), 'ERR_INVALID_ARGUMENT')
    expectCode(() => lin.saveSafetensors(join(dir, 'b.safetensors'), { metadata: { n_features: '3' } }), 'ERR_INVALID_ARGUMENT')
    expectCode(() => log.saveSafetensors(join(dir, 'c.safetensors'), { metadata: { n_classes: '2' } }), 'ERR_INVALID_ARGUMENT')
    expectCode(() => lin.saveSafetensors(join(dir, 'd.safetensors'), { metadata: { source: 3 as any } }), 'ERR_INVALID_ARGUMENT')
    for (const f of ['a', 'b', 'c', 'd']) expect(existsSync(join(dir, `${f}.safetensors`))).toBe(false)
  })

  it('a binary 0/1 model is written in aprender’s layout: exactly coefficients F32 [n] and intercept F32 [1]', () => {
    const dir = tempDir()
    const path = join(dir, 'bin.safetensors')
    const model = new LogisticRegression().fit(breastCancer.rows, breastCancer.y)
    model.saveSafetensors(path)
    const h = header(path)
    expect(Object.keys(h).sort()).toEqual(['__metadata__', 'coefficients', 'intercept'])
    expect(h.coefficients).toMatchObject({ dtype: 'F32', shape: [30] })
    expect(h.intercept).toMatchObject({ dtype: 'F32', shape: [1] })
    const f = SafeTensorsFile.open(path)
    expectSame(f.getTensor('coefficients').data as Float32Array, model.coefficients)
    expectSame(f.getTensor('intercept').data as Float32Array, model.intercept)
    // The linear model too.
    const lin = new LinearRegression().fit(diabetes.rows, diabetes.y)
    lin.saveSafetensors(join(dir, 'lin.safetensors'))
    const hl = header(join(dir, 'lin.safetensors'))
    expect(Object.keys(hl).sort()).toEqual(['__metadata__', 'coefficients', 'intercept'])
    expect(hl.coefficients).toMatchObject({ dtype: 'F32', shape: [10] })
    expect(hl.intercept).toMatchObject({ dtype: 'F32', shape: [1] })
  })

  it('other labels add a classes I32 tensor; multiclass stores [n_classes, n_features] and [n_classes]', () => {
    const dir = tempDir()
    const pm = new LogisticRegression().fit(breastCancer.rows, breastCancer.y.map((v) => 2 * v - 1))
    pm.saveSafetensors(join(dir, 'pm.safetensors'))
    const f = SafeTensorsFile.open(join(dir, 'pm.safetensors'))
    expect([...f.tensorNames].sort()).toEqual(['classes', 'coefficients', 'intercept'])
    expect(f.getTensor('classes')).toMatchObject({ dtype: 'I32', shape: [2] })
    expect(Array.from(f.getTensor('classes').data as Int32Array)).toEqual([-1, 1])
    const multi = new LogisticRegression().fit(wine.rows, wine.y.map((v) => [3, 7, 9][v]))
    multi.saveSafetensors(join(dir, 'multi.safetensors'))
    const g = SafeTensorsFile.open(join(dir, 'multi.safetensors'))
    expect(g.info('coefficients')).toMatchObject({ dtype: 'F32', shape: [3, 13] })
    expect(g.info('intercept')).toMatchObject({ dtype: 'F32', shape: [3] })
    expect(g.info('classes')).toMatchObject({ dtype: 'I32', shape: [3] })
    expect(Array.from(g.getTensor('classes').data as Int32Array)).toEqual([3, 7, 9])
    expectSame(g.getTensor('coefficients').data as Float32Array, multi.coefficients)
  })
})

describe('aprender interoperability', () => {
  const expected = expectedJson('aprender')
  const x: number[][] = expected.x

  it('aprender’s linreg.safetensors loads and predicts as aprender did (1e-6)', async () => {
    const want = expected['linreg.safetensors']
    for (const model of [LinearRegression.loadSafetensors(fixture('aprender', 'linreg.safetensors')), await LinearRegression.loadSafetensorsAsync(fixture('aprender', 'linreg.safetensors'))]) {
      expectSame(model.coefficients, want.coefficients.map(Math.fround))
      expect(model.intercept).toBe(Math.fround(want.intercept))
      expect(model.nFeatures).toBe(2)
      expect(model.fitIntercept).toBe(true)
      const p = model.predict(x)
      want.predict.forEach((v: number, i: number) => expect(Math.abs(p[i] - v)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(v))))
    }
  })

  it('aprender’s logreg.safetensors loads and predicts as aprender did (1e-6)', async () => {
    const want = expected['logreg.safetensors']
    for (const model of [LogisticRegression.loadSafetensors(fixture('aprender', 'logreg.safetensors')), await LogisticRegression.loadSafetensorsAsync(fixture('aprender', 'logreg.safetensors'))]) {
      expect(Array.from(model.classes)).toEqual([0, 1])
      const p = model.predictProba(x)
      expect(p.length).toBe(2 * x.length)
      want.predict_proba.forEach((v: number, i: number) => {
        expect(Math.abs(p[2 * i + 1] - v)).toBeLessThanOrEqual(1e-6)
        expect(Math.abs(p[2 * i] - (1 - v))).toBeLessThanOrEqual(1e-6)
      })
      expect(Array.from(model.predict(x))).toEqual(want.predict)
    }
  })

  /**
   * A file in aprender's exact byte layout, built byte by byte: u64 LE header length, the
   * compact header JSON (no padding, no __metadata__), then the F32 data, which therefore
   * starts at an offset that is not a multiple of 4.
   */
  function aprenderBytes(coefficients: number[], intercept: number): Buffer {
    const n = coefficients.length
    const json = `{"coefficients":{"dtype":"F32","shape":[${n}],"data_offsets":[0,${4 * n}]},"intercept":{"dtype":"F32","shape":[1],"data_offsets":[${4 * n},${4 * n + 4}]}}`
    const out = Buffer.alloc(8 + json.length + 4 * n + 4)
    out.writeBigUInt64LE(BigInt(json.length), 0)
    out.write(json, 8, 'latin1')
    let at = 8 + json.length
    for (const c of coefficients) {
      out.writeFloatLE(c, at)
      at += 4
    }
    out.writeFloatLE(intercept, at)
    return out
  }

  it('the hand-built layout is aprender’s: it reproduces linreg.safetensors byte for byte', () => {
    const want = expected['linreg.safetensors']
    const built = aprenderBytes(want.coefficients, want.intercept)
    expect(built.equals(readFileSync(fixture('aprender', 'linreg.safetensors')))).toBe(true)
  })

  it('a hand-built aprender-layout file (unpadded, misaligned, no metadata) loads and predicts', () => {
    const dir = tempDir()
    const coefficients = [2.5, -1.25, 0.5]
    const bytes = aprenderBytes(coefficients, 4)
    expect((bytes.readUInt32LE(0) + 8) % 4).not.toBe(0)
    writeFileSync(join(dir, 'lin.safetensors'), bytes)
    const lin = LinearRegression.loadSafetensors(join(dir, 'lin.safetensors'))
    expectSame(lin.coefficients, coefficients)
    expect(lin.intercept).toBe(4)
    expectSame(lin.predict([[1, 2, 3], [0, 0, 0], [-2, 4, 8]]), [5.5, 4, -2])
    // The same bytes as a binary logistic model: sigmoid(x·w + b), labels 0/1.
    writeFileSync(join(dir, 'log.safetensors'), aprenderBytes([1, -2], 0.5))
    const log = LogisticRegression.loadSafetensors(join(dir, 'log.safetensors'))
    expect(Array.from(log.classes)).toEqual([0, 1])
    const rows = [[1, 1], [2, 0], [0, 0.25], [-3, 1]]
    const z = rows.map(([a, b]) => a - 2 * b + 0.5)
    const p = log.predictProba(rows)
    z.forEach((v, i) => {
      expect(Math.abs(p[2 * i + 1] - sigmoid(v))).toBeLessThan(1e-6)
      expect(Math.abs(p[2 * i] - (1 - sigmoid(v)))).toBeLessThan(1e-6)
    })
    expect(Array.from(log.predict(rows))).toEqual(z.map((v) => (v > 0 ? 1 : 0)))
    // Saved back: the same two tensors with the same values (plus our metadata).
    log.saveSafetensors(join(dir, 'back.safetensors'))
    const back = SafeTensorsFile.open(join(dir, 'back.safetensors'))
    expect([...back.tensorNames].sort()).toEqual(['coefficients', 'intercept'])
    expectSame(back.getTensor('coefficients').data as Float32Array, [1, -2])
  })
})

describe('invalid model files → ERR_INVALID_MODEL', () => {
  const dir = tempDir('bad-models-')
  const f32 = (shape: number[], values: number[]): TensorInput => ({ dtype: 'F32', shape, data: Float32Array.from(values) })
  const good = { coefficients: f32([3], [1, 2, 3]), intercept: f32([1], [0.5]) }

  const cases: Array<[string, Record<string, TensorInput>, Record<string, string> | undefined, 'linear' | 'logistic' | 'both', string | undefined]> = [
    ['no intercept', { coefficients: good.coefficients }, undefined, 'both', 'intercept'],
    ['no coefficients', { intercept: good.intercept }, undefined, 'both', 'coefficients'],
    ['no tensors at all', { weight: f32([3], [1, 2, 3]) }, undefined, 'both', 'coefficients'],
    ['coefficients F64', { ...good, coefficients: { dtype: 'F64', shape: [3], data: Float64Array.from([1, 2, 3]) } }, undefined, 'both', 'coefficients'],
    ['coefficients F16', { ...good, coefficients: { dtype: 'F16', shape: [3], data: Float32Array.from([1, 2, 3]) } }, undefined, 'both', 'coefficients'],
    ['intercept I32', { ...good, intercept: { dtype: 'I32', shape: [1], data: Int32Array.from([1]) } }, undefined, 'both', 'intercept'],
    ['coefficients [1, 3] for a linear model', { ...good, coefficients: f32([1, 3], [1, 2, 3]) }, undefined, 'linear', 'coefficients'],
    ['coefficients [0]', { ...good, coefficients: f32([0], []) }, undefined, 'both', 'coefficients'],
    ['coefficients rank 0', { ...good, coefficients: f32([], [1]) }, undefined, 'both', 'coefficients'],
    ['intercept [2]', { ...good, intercept: f32([2], [0.5, 1]) }, undefined, 'both', 'intercept'],
    ['intercept []', { ...good, intercept: f32([], [0.5]) }, undefined, 'both', 'intercept'],
    ['NaN coefficient', { ...good, coefficients: f32([3], [1, NaN, 3]) }, undefined, 'both', 'coefficients'],
    ['Infinity in the intercept', { ...good, intercept: f32([1], [Infinity]) }, undefined, 'both', 'intercept'],
    ['multiclass without classes', { coefficients: f32([3, 2], [1, 2, 3, 4, 5, 6]), intercept: f32([3], [0, 0, 0]) }, undefined, 'logistic', 'classes'],
    ['classes not ascending', { coefficients: f32([3, 2], [1, 2, 3, 4, 5, 6]), intercept: f32([3], [0, 0, 0]), classes: { dtype: 'I32', shape: [3], data: Int32Array.from([0, 2, 1]) } }, undefined, 'logistic', 'classes'],
    ['classes of the wrong length', { coefficients: f32([3, 2], [1, 2, 3, 4, 5, 6]), intercept: f32([3], [0, 0, 0]), classes: { dtype: 'I32', shape: [2], data: Int32Array.from([0, 1]) } }, undefined, 'logistic', 'classes'],
    ['classes F32', { ...good, classes: f32([2], [0, 1]) }, undefined, 'logistic', 'classes'],
    ['2 × n coefficients (a multiclass model needs 3+)', { coefficients: f32([2, 3], [1, 2, 3, 4, 5, 6]), intercept: f32([2], [0, 0]) }, undefined, 'logistic', 'coefficients'],
    ['metadata: a logistic_regression file read as linear', good, { model_type: 'logistic_regression' }, 'linear', undefined],
    ['metadata: a linear_regression file read as logistic', good, { model_type: 'linear_regression' }, 'logistic', undefined],
    ['metadata: another model_type', good, { model_type: 'random_forest' }, 'both', undefined],
    ['metadata: n_features contradicts the tensors', good, { n_features: '4' }, 'both', undefined],
    ['metadata: n_features not a number', good, { n_features: 'three' }, 'both', undefined],
    ['metadata: fit_intercept false with a non-zero intercept', good, { fit_intercept: 'false' }, 'both', undefined],
  ]

  it.each(cases)('%s', async (name, tensors, metadata, kind, tensor) => {
    const path = join(dir, `${name.replace(/[^a-z0-9]+/gi, '_')}.safetensors`)
    saveFile(path, tensors, metadata ? { metadata } : undefined)
    const loaders: Array<[string, () => unknown, () => Promise<unknown>]> = []
    if (kind !== 'logistic') loaders.push(['linear', () => LinearRegression.loadSafetensors(path), () => LinearRegression.loadSafetensorsAsync(path)])
    if (kind !== 'linear') loaders.push(['logistic', () => LogisticRegression.loadSafetensors(path), () => LogisticRegression.loadSafetensorsAsync(path)])
    for (const [, load, loadAsync] of loaders) {
      const err = expectCode(load, 'ERR_INVALID_MODEL')
      expect(err.message).toContain(path)
      if (tensor) expect(err.tensor).toBe(tensor)
      await expect(loadAsync()).rejects.toMatchObject({ code: 'ERR_INVALID_MODEL' })
    }
  })

  it('the same good tensors load (the cases above fail for their one defect)', () => {
    const path = join(dir, 'good.safetensors')
    saveFile(path, good, { metadata: { n_features: '3', fit_intercept: 'true', source: 'x' } })
    expectSame(LinearRegression.loadSafetensors(path).predict([[1, 1, 1]]), [6.5])
    const p = LogisticRegression.loadSafetensors(path).predictProba([[0, 0, 0]])
    expect(p[1]).toBeCloseTo(sigmoid(0.5), 6)
  })

  it('a file that is not SafeTensors keeps its format error code', () => {
    const path = join(dir, 'garbage.safetensors')
    writeFileSync(path, Buffer.from([1, 2, 3]))
    expectCode(() => LinearRegression.loadSafetensors(path), 'ERR_HEADER_TOO_SMALL')
  })
})

// ---------------------------------------------------------------------------------------
// Model directories.

describe('save(dir) → Model.loadPretrained(dir) → predict', () => {
  it('linear: Model.predict equals the model’s predict; config.json names the model', async () => {
    const dir = join(tempDir(), 'linear')
    const model = new LinearRegression().fit(diabetes.rows, diabetes.y)
    await model.save(dir)
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'))
    expect(config).toMatchObject({ model_type: 'linear_regression', n_features: 10, fit_intercept: true })
    for (const loaded of [await Model.loadPretrained(dir), Model.loadPretrainedSync(dir)]) {
      expect(loaded.files).toEqual(['model.safetensors'])
      expect(loaded.config).toMatchObject({ model_type: 'linear_regression' })
      expectSame(loaded.predict(diabetes.rows), model.predict(diabetes.rows))
      expectSame(loaded.predict(flat32(diabetes)), model.predict(flat32(diabetes)))
      expectCode(() => loaded.predict([[1, 2]]), 'ERR_INVALID_ARGUMENT')
      expect(loaded.predict(diabetes.rows)).toBeInstanceOf(Float32Array)
      // A regression has no class probabilities.
      const e = expectCode(() => loaded.predictProba(diabetes.rows), 'ERR_INVALID_ARGUMENT')
      expect(e.message).toContain('predictProba needs a classifier; this directory holds a linear_regression')
      expect(e.path).toBe(dir)
    }
    // The weights file is a model file too.
    expectSame(LinearRegression.loadSafetensors(join(dir, 'model.safetensors')).coefficients, model.coefficients)
  })

  it.each([
    ['binary (breast_cancer)', breastCancer, (y: number[]) => y],
    ['binary with labels 2/5', breastCancer, (y: number[]) => y.map((v) => (v ? 5 : 2))],
    ['3 classes (wine)', wine, (y: number[]) => y],
  ])('logistic %s: Model.predict gives the labels predict gives, Model.predictProba the probabilities', async (_name, d, labels) => {
    const dir = join(tempDir(), 'logistic')
    const model = new LogisticRegression().fit(d.rows, labels(d.y))
    await model.save(dir)
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'))
    expect(config).toMatchObject({ model_type: 'logistic_regression', n_features: d.nCols, classes: Array.from(model.classes) })
    for (const loaded of [await Model.loadPretrained(dir), Model.loadPretrainedSync(dir)]) {
      const predicted = loaded.predict(d.rows)
      expect(predicted).toBeInstanceOf(Int32Array)
      expect(Array.from(predicted)).toEqual(Array.from(model.predict(d.rows)))
      // The labels are the caller's own (2/5 stay 2/5), not column indices.
      expect(new Set(predicted)).toEqual(new Set(labels(d.y)))
      const p = loaded.predictProba(d.rows)
      expect(p).toBeInstanceOf(Float32Array)
      expect(p.length).toBe(d.nRows * model.classes.length)
      expectSame(p, model.predictProba(d.rows))
      expectCode(() => loaded.predictProba([[1, 2]]), 'ERR_INVALID_ARGUMENT')
    }
  })

  it('a directory whose config has an unknown (or no) model_type → predict throws ERR_INVALID_MODEL', async () => {
    const root = tempDir()
    const tensors = { coefficients: { shape: [2], data: Float32Array.from([1, 2]) }, intercept: { shape: [1], data: Float32Array.from([0]) } }
    for (const [name, config] of [
      ['forest', { model_type: 'random_forest' }],
      ['llama', { model_type: 'llama', hidden_size: 8 }],
      ['none', { hidden_size: 8 }],
    ] as const) {
      const dir = join(root, name)
      mkdirSync(dir)
      saveFile(join(dir, 'weights.safetensors'), tensors)
      writeFileSync(join(dir, 'config.json'), JSON.stringify(config))
      const model = await Model.loadPretrained(dir)
      expect(model.tensorNames.sort()).toEqual(['coefficients', 'intercept'])
      expectCode(() => model.predict([[1, 1]]), 'ERR_INVALID_MODEL')
      expectCode(() => model.predictProba([[1, 1]]), 'ERR_INVALID_MODEL')
    }
  })

  it('a model dir whose config contradicts its tensors → predict throws ERR_INVALID_MODEL', async () => {
    const dir = join(tempDir(), 'contradiction')
    await new LinearRegression().fit(diabetes.rows, diabetes.y).save(dir)
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'linear_regression', n_features: 7 }))
    const model = await Model.loadPretrained(dir)
    expectCode(() => model.predict(diabetes.rows.slice(0, 1)), 'ERR_INVALID_MODEL')
  })
})
