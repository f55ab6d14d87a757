#!/usr/bin/env node
// Create .venv with the Python peers the tests compare against (safetensors, gguf, onnx,
// onnxruntime, scikit-learn, tokenizers, CMake) and the data packages of
// requirements-nodeps.txt (installed without dependencies). Idempotent: re-installs only
// when one of the two files changed.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const venv = join(root, '.venv')
const python = join(venv, 'bin', 'python')
const reqs = join(root, 'requirements-dev.txt')
const nodeps = join(root, 'requirements-nodeps.txt')
const stamp = join(venv, '.requirements-sha256')
const want = createHash('sha256').update(readFileSync(reqs)).update(readFileSync(nodeps)).digest('hex')

if (existsSync(python) && existsSync(stamp) && readFileSync(stamp, 'utf8') === want) process.exit(0)
const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'inherit', cwd: root })
if (!existsSync(python)) run('python3', ['-m', 'venv', venv])
run(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', reqs])
run(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-deps', '-r', nodeps])
writeFileSync(stamp, want)
