// Generate the benchmark's inputs (run by benches/run.mjs in its own process):
//   node benches/lib/make-inputs.mjs '{"dir", "files", "SIZE"}'
// Everything is deterministic (seeded), so every run measures the same bytes.
import { mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { ROOT, features, fillNormal, llamaTensors } from './common.mjs'

const st = createRequire(import.meta.url)(ROOT)
const { dir, files, SIZE } = JSON.parse(process.argv[2])
mkdirSync(dir, { recursive: true })

// Rows 1 and 5: one weight matrix, ~N(0, 0.02) like trained weights (so F16 has its share of
// subnormals), stored as BF16 and F16 (round to nearest even) and as F32.
const [r, c] = SIZE.upcast
const w = fillNormal(new Float32Array(r * c), 1)
st.saveFile(files.bf16, { weight: { dtype: 'BF16', shape: [r, c], data: w } })
st.saveFile(files.f16, { weight: { dtype: 'F16', shape: [r, c], data: w } })
const [qr, qc] = SIZE.quant
st.saveFile(files.quant, { 'model.layers.0.mlp.up_proj.weight': { dtype: 'F32', shape: [qr, qc], data: w.subarray(0, qr * qc) } })

// Row 2: a Llama-shaped F32 checkpoint (norm weights around 1, matrices around 0).
const llama = {}
let seed = 100
for (const [name, shape] of llamaTensors(SIZE.llama)) {
  const n = shape.reduce((a, b) => a * b, 1)
  const data = shape.length === 1 ? fillNormal(new Float32Array(n), seed++, 0.05, 1) : fillNormal(new Float32Array(n), seed++)
  llama[name] = { dtype: 'F32', shape, data }
}
st.saveFile(files.llama, llama)

// Row 3: the tensors to save (each child loads them into fresh arrays first).
const [count, sr, sc] = SIZE.save
const save = {}
for (let i = 0; i < count; i++) {
  save[`layers.${String(i).padStart(2, '0')}.weight`] = { dtype: 'F32', shape: [sr, sc], data: fillNormal(new Float32Array(sr * sc), 1000 + i) }
}
st.saveFile(files.saveSrc, save)

// Row 4: models fitted on 20,000 rows of the same features the children predict on.
mkdirSync(files.models, { recursive: true })
const cols = SIZE.predict[1]
const fitRows = 20000
const x = features(fitRows, cols)
const X = { data: x, rows: fitRows, cols }
const score = (k, i) => {
  let s = 0.3 * k
  for (let j = 0; j < cols; j++) s += x[i * cols + j] * Math.sin(1 + j * (k + 1)) * 0.5
  return s
}
const noise = fillNormal(new Float64Array(fitRows), 7, 0.5)
const yLin = Float64Array.from({ length: fitRows }, (_, i) => score(0, i) + noise[i])
const yBin = Float64Array.from({ length: fitRows }, (_, i) => (score(0, i) + noise[i] > 0 ? 1 : 0))
const yMul = Float64Array.from({ length: fitRows }, (_, i) => {
  const s = [0, 1, 2].map((k) => score(k, i) + noise[(i + k * 7) % fitRows])
  return s.indexOf(Math.max(...s))
})
const models = [
  ['linear', new st.LinearRegression().fit(X, yLin)],
  ['logistic2', new st.LogisticRegression().fit(X, yBin)],
  ['logistic3', new st.LogisticRegression().fit(X, yMul)],
]
for (const [name, m] of models) {
  m.saveSafetensors(join(files.models, `${name}.safetensors`))
  m.toOnnx(join(files.models, `${name}.onnx`))
}
