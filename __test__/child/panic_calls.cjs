// Child process of panic-policy.spec.ts: one synchronous call of each kind (free function,
// factory, constructor, getter, method, a getter that cannot fail otherwise, the synchronous
// part of an async call, and the conversion of a returned typed array), each made to panic
// inside the binding by SAFETENSORS_NODE_TEST_PANIC (set by the spec; see `guard` in
// src/error.rs), then the same objects used again. Without the variable the same calls are
// made and must succeed (the control: nothing panics by default).
//
//   SAFETENSORS_NODE_TEST_PANIC=... node panic_calls.cjs
//
// Prints one JSON line per call ("first …", then "second …": the same calls again, on the
// same objects), then "done". A panic that escaped into Node would abort the process before
// "done".
'use strict'
const st = require('../../index.js')

/** A SafeTensors file: F32 `w` = [1.5, -2, 3.25] and BF16 `h` = [1, -2] (shape [2]). */
function fileBytes() {
  const header = JSON.stringify({
    w: { dtype: 'F32', shape: [3], data_offsets: [0, 12] },
    h: { dtype: 'BF16', shape: [2], data_offsets: [12, 16] },
  })
  const json = Buffer.from(header, 'utf8')
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(json.length))
  const w = Buffer.from(new Float32Array([1.5, -2, 3.25]).buffer)
  // BF16 is the high half of the F32 bits: 1.0 = 0x3f80, -2.0 = 0xc000.
  const h = Buffer.from([0x80, 0x3f, 0x00, 0xc0])
  return Buffer.concat([len, json, w, h])
}

const lines = []
function record(call, f) {
  try {
    const value = f()
    lines.push({ call, ok: true, value: plain(value) })
  } catch (e) {
    lines.push({ call, ok: false, code: e?.code, message: String(e?.message), isError: e instanceof Error })
  }
}
async function recordAsync(call, f) {
  let p
  try {
    p = f()
  } catch (e) {
    // An async entry must reject, never throw synchronously (index.js's contract).
    lines.push({ call, ok: false, threw: true, code: e?.code, message: String(e?.message) })
    return
  }
  try {
    lines.push({ call, ok: true, value: plain(await p) })
  } catch (e) {
    lines.push({ call, ok: false, rejected: true, code: e?.code, message: String(e?.message), isError: e instanceof Error })
  }
}
function plain(v) {
  if (ArrayBuffer.isView(v)) return Array.from(v)
  if (Array.isArray(v)) return v
  if (v instanceof st.LinearRegression) return 'LinearRegression'
  if (v && typeof v === 'object' && 'data' in v) return { dtype: v.dtype, shape: v.shape, data: Array.from(v.data) }
  if (v && typeof v === 'object') return Object.keys(v)
  return v
}

/** One call of each kind; `round` tells the rounds apart in the output. */
async function calls(round, bytes, state) {
  record(`${round} serialize`, () => Array.from(st.serialize({ x: { dtype: 'F32', shape: [1], data: new Float32Array([7]) } }).subarray(-4)))
  record(`${round} SafeTensorsFile.fromBytes`, () => st.SafeTensorsFile.fromBytes(bytes).tensorNames)
  // The file both rounds read (made after the call above: an injected panic fires once).
  state.file ??= st.SafeTensorsFile.fromBytes(bytes)
  const file = state.file
  record(`${round} LinearRegression.constructor`, () => new st.LinearRegression())
  record(`${round} SafeTensorsFile.tensorNames`, () => file.tensorNames)
  record(`${round} SafeTensorsFile.getTensor`, () => file.getTensor('w'))
  record(`${round} LinearRegression.isFitted`, () => new st.LinearRegression({ fitIntercept: true }).isFitted)
  // BF16 read as F32 on the JS thread: the array is filled when it reaches JS.
  record(`${round} filling a typed array`, () => file.getTensor('h', { as: 'F32' }))
  await recordAsync(`${round} SafeTensorsFile.getTensorAsync`, () => file.getTensorAsync('w'))
  const m = new st.LinearRegression({ fitIntercept: false })
  record(`${round} LinearRegression.fit`, () => m.fit([[1], [2]], [2, 4]) === m)
  record(`${round} LinearRegression.predict`, () => m.predict([[3]]))
}

async function main() {
  const bytes = fileBytes()
  const state = {}
  // With SAFETENSORS_NODE_TEST_PANIC set, the first round's named calls panic (once each);
  // the second round repeats every call on the same objects: all must work.
  await calls('first', bytes, state)
  await calls('second', bytes, state)
  for (const l of lines) console.log(JSON.stringify(l))
  console.log('done')
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
