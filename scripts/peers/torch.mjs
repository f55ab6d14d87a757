#!/usr/bin/env node
// The Python that loads what we write as Hugging Face users load it: torch, transformers and
// peft from PyPI, in a virtual environment of their own outside the clone, made once per set
// of versions (torch alone is ~5 GB with the CUDA libraries PyPI's Linux wheels depend on;
// nothing here uses a GPU):
//
//   ~/.cache/safetensors-node/torch-<torch>-transformers-<transformers>-peft-<peft>/
//
// `node scripts/peers/torch.mjs` installs it and prints its python; import `torchPython()`.
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { installOnce } from '../toolchains.mjs'

/** transformers as llama.cpp's converter pins it (4.57.x). */
export const VERSIONS = { torch: '2.15.0', transformers: '4.57.6', peft: '0.17.1' }

/** The environment's python, installed first if missing. */
export function torchPython() {
  const { torch, transformers, peft } = VERSIONS
  const dir = installOnce(`torch-${torch}-transformers-${transformers}-peft-${peft}`, (tmp) => {
    console.error(`torch peer: installing torch ${torch}, transformers ${transformers}, peft ${peft} (~5 GB, once)`)
    execFileSync('python3', ['-m', 'venv', tmp], { stdio: 'inherit' })
    const pkgs = Object.entries(VERSIONS).map(([k, v]) => `${k}==${v}`)
    execFileSync(join(tmp, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-cache-dir', ...pkgs, 'safetensors', 'sentencepiece'], { stdio: 'inherit' })
  })
  return join(dir, 'bin', 'python')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(torchPython())
