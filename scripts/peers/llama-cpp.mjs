#!/usr/bin/env node
// Build the llama.cpp programs the tests run, once per llama.cpp version, outside the clone.
//
// llama.cpp comes from PyPI's llama-cpp-python source distribution (its vendor/llama.cpp is
// the library at a pinned commit), CMake and Ninja from PyPI (.venv, requirements-dev.txt).
// Layout (shared with a developer's own build in the same place):
//
//   ~/.cache/safetensors-node/llama.cpp-src-<version>/        the sources (vendor/llama.cpp)
//   ~/.cache/safetensors-node/llama.cpp-src-<version>/build/  the CMake build (Release, Ninja)
//        bin/llama-quantize, llama-embedding, llama-tokenize, llama-simple, libllama.so, …
//        stn/llama-probe-<hash>                               our test glue (peers/llama-cpp)
//
// A build whose targets exist is reused as is (Ninja then finds nothing to do); a partial
// one is resumed. STN_CACHE_DIR moves the cache. Costs ~15–25 min on 2 cores the first time.
//
// Import it for the paths (`llamaCpp()`), or run it (`node scripts/peers/llama-cpp.mjs`).
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const LLAMA_CPP_PYTHON_VERSION = '0.3.36'
/** The programs the tests run (llama-quantize for the GGUF-types tests). */
export const TARGETS = ['llama-quantize', 'llama-embedding', 'llama-tokenize', 'llama-simple']

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const venvBin = join(root, '.venv', 'bin')
const probeSource = join(root, 'peers', 'llama-cpp', 'probe.cpp')

/** Where everything lives (whether built or not). */
export function llamaCpp() {
  const cache = process.env.STN_CACHE_DIR ?? join(homedir(), '.cache', 'safetensors-node')
  const src = join(cache, `llama.cpp-src-${LLAMA_CPP_PYTHON_VERSION}`)
  const build = join(src, 'build')
  const bin = join(build, 'bin')
  const probeHash = createHash('sha256').update(readFileSync(probeSource)).digest('hex').slice(0, 12)
  return {
    src,
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
  const want = JSON.stringify({ version: LLAMA_CPP_PYTHON_VERSION, targets: TARGETS })
  const built = TARGETS.every((t) => existsSync(paths.tool(t)))
  if (built && existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return
  const cmake = join(venvBin, 'cmake')
  if (!existsSync(join(paths.build, 'CMakeCache.txt'))) {
    console.error('llama.cpp: configuring (Release, CPU only)')
    run(cmake, ['-S', paths.src, '-B', paths.build, '-G', 'Ninja', `-DCMAKE_MAKE_PROGRAM=${join(venvBin, 'ninja')}`,
      '-DCMAKE_BUILD_TYPE=Release', '-DLLAMA_CURL=OFF', '-DLLAMA_OPENSSL=OFF', '-DLLAMA_BUILD_TESTS=OFF',
      '-DLLAMA_BUILD_SERVER=OFF', '-DLLAMA_BUILD_UI=OFF', '-DLLAMA_BUILD_MTMD=OFF'])
  }
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
  console.error(`llama.cpp: ready in ${paths.bin}`)
}
