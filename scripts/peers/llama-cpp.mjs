#!/usr/bin/env node
// Build the llama.cpp programs the tests run, once per llama.cpp version, outside the clone.
//
// llama.cpp comes from PyPI's llama-cpp-python source distribution (its vendor/llama.cpp is
// the library at a pinned commit), CMake and Ninja from PyPI (.venv, requirements-dev.txt).
// Layout (shared with a developer's own build in the same place):
//
//   ~/.cache/safetensors-node/llama.cpp-src-<version>/        the sources (vendor/llama.cpp)
//   ~/.cache/safetensors-node/llama.cpp-src-<version>/build-<cpu>/  the CMake build (Release,
//        Ninja), one per instruction-set level (CPU_LEVELS):
//        bin/llama-quantize, llama-embedding, llama-tokenize, llama-simple, libllama.so, …
//        stn/llama-probe-<hash>                               our test glue (peers/llama-cpp)
//
// Portable, never -march=native: the machines that run the tests differ from session to
// session, and a native build made on one host dies with SIGILL on another (an Intel host that
// advertises AMX without granting it took ggml's AMX path for Q8_0). So ggml is configured with
// GGML_NATIVE=OFF and explicit instruction sets: x86-64-v3's (AVX2, FMA, F16C, BMI2) where the
// CPU has them, the x86-64 baseline otherwise. The build directory is named by that level, so
// a build of another level, or a native one from before, is never reused.
//
// A build whose targets exist is reused as is (Ninja then finds nothing to do); a partial
// one is resumed. STN_CACHE_DIR moves the cache. Costs ~15–25 min on 2 cores the first time.
//
// Import it for the paths (`llamaCpp()`), or run it (`node scripts/peers/llama-cpp.mjs`;
// `--tool NAME` prints that program's path on stdout, for the Rust tests).
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const LLAMA_CPP_PYTHON_VERSION = '0.3.36'
/** The programs the tests run (llama-quantize for the GGUF-types tests). */
export const TARGETS = ['llama-quantize', 'llama-embedding', 'llama-tokenize', 'llama-simple', 'llama-gguf-split']

/**
 * The instruction-set levels a build may target, with ggml's CMake options for each. No AVX-512
 * and no AMX: what the level names is all the code may use.
 */
export const CPU_LEVELS = {
  'x86-64-v3': { needs: ['avx2', 'fma', 'f16c', 'bmi2'], cmake: { GGML_SSE42: 'ON', GGML_AVX: 'ON', GGML_AVX2: 'ON', GGML_BMI2: 'ON', GGML_FMA: 'ON', GGML_F16C: 'ON' } },
  'x86-64': { needs: [], cmake: { GGML_SSE42: 'OFF', GGML_AVX: 'OFF', GGML_AVX2: 'OFF', GGML_BMI2: 'OFF', GGML_FMA: 'OFF', GGML_F16C: 'OFF' } },
}
const NEVER = { GGML_NATIVE: 'OFF', GGML_AVX_VNNI: 'OFF', GGML_AVX512: 'OFF', GGML_AVX512_VBMI: 'OFF', GGML_AVX512_VNNI: 'OFF', GGML_AVX512_BF16: 'OFF', GGML_AMX_TILE: 'OFF', GGML_AMX_INT8: 'OFF', GGML_AMX_BF16: 'OFF', GGML_BACKEND_DL: 'OFF', GGML_CPU_ALL_VARIANTS: 'OFF' }

/** The highest level this CPU runs (from /proc/cpuinfo's flags; the baseline where unreadable). */
export function cpuLevel() {
  let flags = new Set()
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((l) => l.startsWith('flags'))
    flags = new Set((line ?? '').split(':')[1]?.trim().split(/\s+/) ?? [])
  } catch {}
  if (process.arch !== 'x64') throw new Error(`llama.cpp peer: only x86-64 hosts are set up (this is ${process.arch})`)
  return Object.keys(CPU_LEVELS).find((level) => CPU_LEVELS[level].needs.every((f) => flags.has(f)))
}

/** The CMake options of a build for `level`. */
export function cmakeFlags(level = cpuLevel()) {
  return Object.entries({ ...NEVER, ...CPU_LEVELS[level].cmake }).map(([k, v]) => `-D${k}=${v}`)
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const venvBin = join(root, '.venv', 'bin')
const probeSource = join(root, 'peers', 'llama-cpp', 'probe.cpp')

/** Where everything lives (whether built or not). */
export function llamaCpp() {
  const cache = process.env.STN_CACHE_DIR ?? join(homedir(), '.cache', 'safetensors-node')
  const src = join(cache, `llama.cpp-src-${LLAMA_CPP_PYTHON_VERSION}`)
  const level = cpuLevel()
  const build = join(src, `build-${level}`)
  const bin = join(build, 'bin')
  const probeHash = createHash('sha256').update(readFileSync(probeSource)).digest('hex').slice(0, 12)
  return {
    src,
    level,
    build,
    bin,
    tool: (name) => join(bin, name),
    probe: join(build, 'stn', `llama-probe-${probeHash}`),
    converter: join(src, 'convert_hf_to_gguf.py'),
    vocab: (name) => join(src, 'models', `ggml-vocab-${name}.gguf`),
  }
}

function run(cmd, args, options = {}) {
  execFileSync(cmd, args, { stdio: 'inherit', ...options })
}

function fetchSources(src) {
  if (existsSync(join(src, 'CMakeLists.txt'))) return
  console.error(`llama.cpp: fetching llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} (sdist) from PyPI`)
  mkdirSync(dirname(src), { recursive: true })
  const tmp = mkdtempSync(join(dirname(src), '.llama-fetch-'))
  try {
    run(join(venvBin, 'python'), ['-m', 'pip', 'download', '--quiet', '--disable-pip-version-check', '--no-deps',
      '--no-binary', 'llama-cpp-python', `llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}`, '-d', tmp])
    const sdist = join(tmp, `llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}.tar.gz`)
    const out = join(tmp, 'src')
    mkdirSync(out)
    run('tar', ['-xzf', sdist, '-C', out, '--strip-components=3', `llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp`])
    // Another process may have finished first; a leftover without sources is replaced.
    if (!existsSync(join(src, 'CMakeLists.txt'))) {
      rmSync(src, { recursive: true, force: true })
      renameSync(out, src)
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}

/** The llama.cpp sources (vendor/llama.cpp of the sdist), fetched if missing, without building. */
export function ensureLlamaCppSources() {
  const paths = llamaCpp()
  fetchSources(paths.src)
  return paths.src
}

function buildTargets(paths) {
  const stamp = join(paths.build, '.stn-targets')
  const want = JSON.stringify({ version: LLAMA_CPP_PYTHON_VERSION, targets: TARGETS, flags: cmakeFlags(paths.level) })
  const built = TARGETS.every((t) => existsSync(paths.tool(t)))
  if (built && existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return
  const cmake = join(venvBin, 'cmake')
  // Configured every time the stamp differs: options given again replace the cached ones.
  console.error(`llama.cpp: configuring (Release, CPU only, ${paths.level}: ${cmakeFlags(paths.level).join(' ')})`)
  run(cmake, ['-S', paths.src, '-B', paths.build, '-G', 'Ninja', `-DCMAKE_MAKE_PROGRAM=${join(venvBin, 'ninja')}`,
    '-DCMAKE_BUILD_TYPE=Release', '-DLLAMA_CURL=OFF', '-DLLAMA_OPENSSL=OFF', '-DLLAMA_BUILD_TESTS=OFF',
    '-DLLAMA_BUILD_SERVER=OFF', '-DLLAMA_BUILD_UI=OFF', '-DLLAMA_BUILD_MTMD=OFF', ...cmakeFlags(paths.level)])
  console.error(`llama.cpp: building ${TARGETS.join(', ')} (once per version: ~15–25 min on 2 cores)`)
  run(cmake, ['--build', paths.build, '-j', String(availableParallelism()), '--target', ...TARGETS])
  writeFileSync(stamp, want)
}

function buildProbe(paths) {
  if (existsSync(paths.probe)) return
  mkdirSync(dirname(paths.probe), { recursive: true })
  // Builds of other versions of probe.cpp stay: checkouts of other commits share the cache.
  const tmp = `${paths.probe}.${process.pid}.tmp`
  run('c++', ['-O2', '-std=c++17', probeSource, `-I${join(paths.src, 'include')}`, `-I${join(paths.src, 'ggml', 'include')}`,
    `-L${paths.bin}`, '-lllama', '-lggml', '-lggml-base', `-Wl,-rpath,${paths.bin}`, '-o', tmp])
  renameSync(tmp, paths.probe)
}

/** Fetch and build whatever is missing; return the paths. */
export function ensureLlamaCpp() {
  const paths = llamaCpp()
  fetchSources(paths.src)
  buildTargets(paths)
  buildProbe(paths)
  return paths
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const paths = ensureLlamaCpp()
  const tool = process.argv.indexOf('--tool')
  if (tool > 0) console.log(paths.tool(process.argv[tool + 1]))
  else console.error(`llama.cpp: ready in ${paths.bin}`)
}
