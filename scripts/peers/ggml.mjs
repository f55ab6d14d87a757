#!/usr/bin/env node
// Build ggml-peer (peers/ggml/ggml_peer.c): ggml's reference quantizers and dequantizers,
// compiled unchanged from llama.cpp's ggml-quants.c with the system C compiler, once per
// llama.cpp version, outside the clone:
//
//   ~/.cache/safetensors-node/llama.cpp-src-<version>/        the sources (fetched by
//                                                             scripts/peers/llama-cpp.mjs)
//   ~/.cache/safetensors-node/ggml-peer-<version>-<hash>      the program (hash of our glue)
//
// Compiled as llama.cpp's Release builds compile ggml-base (-O3 -DNDEBUG -std=gnu11, no
// -march: baseline x86-64, so no FMA contraction), which is where llama-quantize's
// quantizers live. STN_CACHE_DIR moves the cache.
//
// Import it (`ensureGgmlPeer()` returns the program's path) or run it (prints the path).
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { LLAMA_CPP_PYTHON_VERSION, ensureLlamaCppSources } from './llama-cpp.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const glue = join(root, 'peers', 'ggml', 'ggml_peer.c')

/** Build ggml-peer if needed; return its path. */
export function ensureGgmlPeer() {
  const cache = process.env.STN_CACHE_DIR ?? join(homedir(), '.cache', 'safetensors-node')
  const hash = createHash('sha256').update(readFileSync(glue)).digest('hex').slice(0, 12)
  const exe = join(cache, `ggml-peer-${LLAMA_CPP_PYTHON_VERSION}-${hash}`)
  if (existsSync(exe)) return exe
  const src = ensureLlamaCppSources()
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
