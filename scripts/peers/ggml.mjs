#!/usr/bin/env node
// Build ggml-peer (peers/ggml/ggml_peer.c): ggml's reference quantizers and dequantizers,
// compiled unchanged from llama.cpp's ggml-quants.c with the system C compiler, once per
// llama.cpp version, outside the clone:
//
//   ~/.cache/safetensors-node/llama.cpp-src-<version>/        the sources (shared with
//                                                             scripts/peers/llama-cpp.mjs)
//   ~/.cache/safetensors-node/ggml-peer-<version>-<hash>      the program (hash of our glue)
//
// Compiled as llama.cpp's Release builds compile ggml-base (-O3 -DNDEBUG -std=gnu11, no
// -march: baseline x86-64, so no FMA contraction), which is where llama-quantize's
// quantizers live. The sources come from PyPI's llama-cpp-python sdist when not already
// there. STN_CACHE_DIR moves the cache.
//
// Import it (`ensureGgmlPeer()` returns the program's path) or run it (prints the path).
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const LLAMA_CPP_PYTHON_VERSION = '0.3.36'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const glue = join(root, 'peers', 'ggml', 'ggml_peer.c')

function cacheDir() {
  return process.env.STN_CACHE_DIR ?? join(homedir(), '.cache', 'safetensors-node')
}

/** The llama.cpp sources (the sdist's vendor/llama.cpp), fetched if missing. */
export function llamaCppSources() {
  const src = join(cacheDir(), `llama.cpp-src-${LLAMA_CPP_PYTHON_VERSION}`)
  if (existsSync(join(src, 'ggml', 'src', 'ggml-quants.c'))) return src
  console.error(`ggml-peer: fetching llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} (sdist) from PyPI`)
  mkdirSync(dirname(src), { recursive: true })
  const tmp = mkdtempSync(join(dirname(src), '.llama-fetch-'))
  try {
    execFileSync(join(root, '.venv', 'bin', 'python'), ['-m', 'pip', 'download', '--quiet',
      '--disable-pip-version-check', '--no-deps', '--no-binary', 'llama-cpp-python',
      `llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}`, '-d', tmp], { stdio: 'inherit' })
    const out = join(tmp, 'src')
    mkdirSync(out)
    execFileSync('tar', ['-xzf', join(tmp, `llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}.tar.gz`), '-C', out,
      '--strip-components=3', `llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp`], { stdio: 'inherit' })
    if (!existsSync(src)) renameSync(out, src)
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
  return src
}

/** Build ggml-peer if needed; return its path. */
export function ensureGgmlPeer() {
  const hash = createHash('sha256').update(readFileSync(glue)).digest('hex').slice(0, 12)
  const exe = join(cacheDir(), `ggml-peer-${LLAMA_CPP_PYTHON_VERSION}-${hash}`)
  if (existsSync(exe)) return exe
  const src = llamaCppSources()
  const tmp = `${exe}.${process.pid}.tmp`
  mkdirSync(dirname(exe), { recursive: true })
  execFileSync(process.env.CC ?? 'cc', ['-O3', '-std=gnu11', '-DNDEBUG',
    `-I${join(src, 'ggml', 'include')}`, `-I${join(src, 'ggml', 'src')}`,
    join(src, 'ggml', 'src', 'ggml-quants.c'), glue, '-lm', '-o', tmp], { stdio: 'inherit' })
  renameSync(tmp, exe)
  return exe
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(ensureGgmlPeer())
}
