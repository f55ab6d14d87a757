import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

/**
 * No panic crosses into Node. A panic in an asynchronous task is ERR_INTERNAL (src/tasks.rs);
 * every synchronous `#[napi]` function, method, getter and constructor of src/ runs its whole
 * body in `guard` (src/error.rs: a panic becomes a thrown ERR_INTERNAL naming the call) and
 * carries `#[napi(catch_unwind)]` (napi-rs then catches a panic in its own argument and
 * return-value conversion too, as a plain thrown error). Without them napi-rs lets the panic
 * reach its `extern "C"` callback, which aborts the process.
 *
 * The lint below reads src/**\/*.rs and lists every `#[napi]` fn lacking either; the
 * behaviour is checked in a child process (child/panic_calls.cjs) in which
 * SAFETENSORS_NODE_TEST_PANIC makes one call of each kind panic inside the binding.
 */

const SRC = join(__dirname, '../src')
const CHILD = join(__dirname, 'child/panic_calls.cjs')

/**
 * `src` with the contents of comments, string literals and char literals blanked (same
 * length, newlines kept), so that brackets, braces and `#[napi` are only found in code.
 */
function maskRust(src: string): string {
  const out = src.split('')
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== '\n') out[k] = ' '
  }
  let i = 0
  while (i < src.length) {
    const c = src[i]
    if (src.startsWith('//', i)) {
      const end = src.indexOf('\n', i)
      const stop = end < 0 ? src.length : end
      blank(i, stop)
      i = stop
    } else if (src.startsWith('/*', i)) {
      const stop = src.indexOf('*/', i) + 2
      blank(i, stop)
      i = stop
    } else if ((c === 'r' || c === 'b') && !/[\w]/.test(src[i - 1] ?? '') && /^b?r#*"/.test(src.slice(i, i + 8))) {
      const m = /^b?r(#*)"/.exec(src.slice(i, i + 8))!
      const close = '"' + m[1]
      const stop = src.indexOf(close, i + m[0].length) + close.length
      blank(i + m[0].length, stop - close.length)
      i = stop
    } else if (c === '"') {
      let j = i + 1
      while (src[j] !== '"') j += src[j] === '\\' ? 2 : 1
      blank(i + 1, j)
      i = j + 1
    } else if (c === "'") {
      // A char literal ('x', '\n', '\u{1F600}'); otherwise a lifetime ('a).
      const m = /^'(\\[^']+|[^'\\])'/.exec(src.slice(i, i + 12))
      if (m) blank(i + 1, i + m[0].length - 1)
      i += m ? m[0].length : 1
    } else {
      i++
    }
  }
  return out.join('')
}

/** Index of the bracket closing the one at `open` in masked source. */
function closing(masked: string, open: number): number {
  const pairs: Record<string, string> = { '(': ')', '[': ']', '{': '}' }
  const stack: string[] = []
  for (let i = open; i < masked.length; i++) {
    const c = masked[i]
    if (c in pairs) stack.push(pairs[c])
    else if (c === ')' || c === ']' || c === '}') {
      if (stack.pop() !== c) throw new Error(`unbalanced ${c} at ${i}`)
      if (stack.length === 0) return i
    }
  }
  throw new Error(`no closing bracket for ${open}`)
}

interface NapiFn {
  file: string
  line: number
  name: string
  catchUnwind: boolean
  /** The whole body is one `guard(...)` call. */
  guarded: boolean
}
interface Finding {
  file: string
  line: number
  problem: string
}

/** Every `#[napi…]` fn of one Rust source, and the `#[napi]` classes exposing pub fields. */
function scanNapi(file: string, src: string): { fns: NapiFn[]; findings: Finding[] } {
  const masked = maskRust(src)
  const fns: NapiFn[] = []
  const findings: Finding[] = []
  const lineOf = (i: number) => masked.slice(0, i).split('\n').length
  for (const m of masked.matchAll(/#\[\s*napi\b/g)) {
    const attrEnd = closing(masked, m.index! + 1)
    const args = masked.slice(m.index! + m[0].length, attrEnd)
    // Skip further attributes to the item itself.
    let i = attrEnd + 1
    for (;;) {
      while (/\s/.test(masked[i] ?? '')) i++
      if (masked.startsWith('#[', i)) i = closing(masked, i + 1) + 1
      else break
    }
    const rest = masked.slice(i, i + 300)
    const fn = /^(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+"[^"]*"\s+)?fn\s+(\w+)/.exec(rest)
    if (fn) {
      const bodyOpen = masked.indexOf('{', closing(masked, masked.indexOf('(', i + fn[0].length)))
      const bodyClose = closing(masked, bodyOpen)
      const body = masked.slice(bodyOpen + 1, bodyClose)
      const start = body.search(/\S/)
      // `guard(` as imported, or `$crate::error::guard(` in a macro of src/handle.rs.
      const call = /^(?:\$crate::error::)?guard\(/.exec(body.slice(start))
      const guarded = call !== null && body.slice(closing(body, start + call[0].length - 1) + 1).trim() === ''
      fns.push({ file, line: lineOf(m.index!), name: fn[1], catchUnwind: /\bcatch_unwind\b/.test(args), guarded })
      continue
    }
    // A class (not an `object`): napi-rs would make accessors for its pub fields, which no
    // attribute of ours can guard.
    const struct = /^(?:pub(?:\([^)]*\))?\s+)?struct\s+(\w+)[^{;]*\{/.exec(rest)
    if (struct && !/\bobject\b/.test(args)) {
      const open = i + struct[0].length - 1
      const fields = masked.slice(open + 1, closing(masked, open))
      if (/(^|[\s,{])pub\s+\w+\s*:/.test(fields)) findings.push({ file, line: lineOf(m.index!), problem: `#[napi] class ${struct[1]} has a pub field (an unguarded accessor)` })
    }
  }
  for (const f of fns) {
    if (!f.catchUnwind) findings.push({ file: f.file, line: f.line, problem: `#[napi] fn ${f.name} lacks catch_unwind` })
    if (!f.guarded) findings.push({ file: f.file, line: f.line, problem: `#[napi] fn ${f.name}: body is not one guard(...) call` })
  }
  return { fns, findings }
}

function rustFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? rustFiles(join(dir, e.name)) : e.name.endsWith('.rs') ? [join(dir, e.name)] : [],
  )
}

describe('panic policy: every synchronous #[napi] item catches panics', () => {
  const files = rustFiles(SRC).map((path) => ({ path, src: readFileSync(path, 'utf8') }))
  const scans = files.map(({ path, src }) => scanNapi(path.slice(SRC.length + 1), src))

  it('finds the binding items (so the lint cannot pass on nothing) and none lacks catch_unwind or guard', () => {
    const fns = scans.flatMap((s) => s.fns)
    // 119 today (classes, factories, getters, free functions, the macro-made model methods).
    expect(fns.length).toBeGreaterThanOrEqual(110)
    for (const name of ['not_constructible', 'open', 'tensor_names', 'close', 'load_file', 'save_safetensors', 'is_fitted', 'serialize']) {
      expect(fns.some((f) => f.name === name), name).toBe(true)
    }
    const findings = scans.flatMap((s) => s.findings).map((f) => `src/${f.file}:${f.line}: ${f.problem}`)
    expect(findings).toEqual([])
  })

  it('reports an item whose catch_unwind or guard is removed (the lint can fail)', () => {
    const file = files.find((f) => f.path.endsWith('file.rs'))!
    expect(scanNapi('file.rs', file.src).findings).toEqual([])
    const noAttr = file.src.replace('#[napi(catch_unwind, getter)]', '#[napi(getter)]')
    expect(noAttr).not.toBe(file.src)
    expect(scanNapi('file.rs', noAttr).findings.map((f) => f.problem)).toEqual(['#[napi] fn path lacks catch_unwind'])
    // The same getter with its body outside the guard.
    const unguarded = file.src.replace(/guard\(&env, "SafeTensorsFile\.path", \|\| \{([^]*?)\n {8}\}\)\n/, '$1\n')
    expect(unguarded).not.toBe(file.src)
    expect(scanNapi('file.rs', unguarded).findings.map((f) => f.problem)).toEqual(['#[napi] fn path: body is not one guard(...) call'])
    // A statement before the guard is outside it.
    const before = file.src.replace('guard(&env, "SafeTensorsFile.path"', 'let _ = 1;\n        guard(&env, "SafeTensorsFile.path"')
    expect(scanNapi('file.rs', before).findings.map((f) => f.problem)).toEqual(['#[napi] fn path: body is not one guard(...) call'])
    // Comments and strings do not count: a `#[napi]` or `guard(` in them is not code.
    expect(scanNapi('x.rs', '/// #[napi]\n// #[napi] fn a() {}\nconst S: &str = "#[napi] fn b() { guard( }";\n').fns).toEqual([])
    expect(scanNapi('x.rs', '#[napi]\npub struct C { pub x: u32 }\n').findings.map((f) => f.problem)).toEqual([
      '#[napi] class C has a pub field (an unguarded accessor)',
    ])
  })
})

interface Line {
  call: string
  ok: boolean
  value?: unknown
  code?: string
  message?: string
  isError?: boolean
  rejected?: boolean
  threw?: boolean
}

/** The calls of child/panic_calls.cjs, by the name `guard` gives each (`filling a typed array`
 * is the conversion of a returned typed array, after the body). */
const CALLS = [
  'serialize',
  'SafeTensorsFile.fromBytes',
  'LinearRegression.constructor',
  'SafeTensorsFile.tensorNames',
  'SafeTensorsFile.getTensor',
  'LinearRegression.isFitted',
  'filling a typed array',
  'SafeTensorsFile.getTensorAsync',
  'LinearRegression.fit',
  'LinearRegression.predict',
]

function runChild(inject: string[] | null) {
  const env = { ...process.env }
  delete env.SAFETENSORS_NODE_TEST_PANIC
  if (inject) env.SAFETENSORS_NODE_TEST_PANIC = inject.join(',')
  const r = spawnSync(process.execPath, [CHILD], { env, encoding: 'utf8', timeout: 60_000 })
  // An escaped panic aborts the child (SIGABRT) before "done".
  expect({ status: r.status, signal: r.signal, stderr: r.status === 0 ? '' : r.stderr.slice(0, 2000) }).toEqual({ status: 0, signal: null, stderr: '' })
  expect(r.stdout.trimEnd().endsWith('done')).toBe(true)
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line)
  return { lines, stderr: r.stderr, byCall: (call: string) => lines.find((l) => l.call === call)! }
}

/** The right result of each call (from the bytes the child wrote; y = 2x for the fit). */
function expectRightValues(byCall: (call: string) => Line, round: string) {
  const ok = (call: string) => {
    const l = byCall(`${round} ${call}`)
    expect(l, call).toMatchObject({ ok: true })
    return l.value as any
  }
  expect(ok('serialize')).toEqual([0, 0, 0xe0, 0x40]) // 7.0f32, little-endian
  expect(ok('SafeTensorsFile.fromBytes')).toEqual(['w', 'h'])
  expect(ok('LinearRegression.constructor')).toBe('LinearRegression')
  expect(ok('SafeTensorsFile.tensorNames')).toEqual(['w', 'h'])
  expect(ok('SafeTensorsFile.getTensor')).toEqual({ dtype: 'F32', shape: [3], data: [1.5, -2, 3.25] })
  expect(ok('LinearRegression.isFitted')).toBe(false)
  expect(ok('filling a typed array')).toMatchObject({ shape: [2], data: [1, -2] })
  expect(ok('SafeTensorsFile.getTensorAsync')).toEqual({ dtype: 'F32', shape: [3], data: [1.5, -2, 3.25] })
  expect(ok('LinearRegression.fit')).toBe(true)
  const predicted = ok('LinearRegression.predict') as number[]
  expect(predicted).toHaveLength(1)
  expect(predicted[0]).toBeCloseTo(6, 5)
}

describe('panic policy: a panic in a synchronous call is a thrown ERR_INTERNAL', () => {
  it('without injection every call of the child works (the control)', () => {
    const { lines, byCall } = runChild(null)
    expect(lines.filter((l) => !l.ok)).toEqual([])
    expectRightValues(byCall, 'first')
    expectRightValues(byCall, 'second')
  })

  it('each kind of call throws ERR_INTERNAL naming it; the process and the objects keep working', () => {
    const { byCall, stderr } = runChild(CALLS)
    for (const call of CALLS) {
      const l = byCall(`first ${call}`)
      expect(l, call).toMatchObject({ ok: false, code: 'ERR_INTERNAL', isError: true })
      expect(l.message, call).toBe(
        `internal error: ${call} panicked (panic injected by SAFETENSORS_NODE_TEST_PANIC); this is a bug in safetensors-node, please report it`,
      )
    }
    // The synchronous part of an async call rejects its promise (index.js), never throws.
    expect(byCall('first SafeTensorsFile.getTensorAsync')).toMatchObject({ rejected: true })
    // Rust's panic hook still reports each panic on stderr, as for any bug.
    expect(stderr.match(/panic injected by SAFETENSORS_NODE_TEST_PANIC/g)?.length).toBe(CALLS.length)
    // The same calls again on the same objects (a file, a model): right values.
    expectRightValues(byCall, 'second')
  })
})
