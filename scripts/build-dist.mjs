#!/usr/bin/env node
// Build the binary a platform package ships: `napi build --release` for one target, into
// OUT/safetensors-node.<platform>.node. Linux glibc targets are linked by cargo-zigbuild
// against glibc 2.17 (`x86_64-unknown-linux-gnu.2.17`), so the binary loads on any Linux
// from 2012 on (CentOS 7, Ubuntu 14.04, Debian 8) instead of needing the build machine's
// glibc; `npm run build` stays a plain host build for development. The release workflow and
// the packaging test (__test__/package.spec.ts) build with this script.
//
//   node scripts/build-dist.mjs [--target TRIPLE] [--out DIR]
//   (default: x86_64-unknown-linux-gnu.2.17 into dist/)
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createRequire } from 'node:module'
import { delimiter, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { zigbuildPath } from './toolchains.mjs'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
export const GLIBC_BASELINE = '2.17'

/** The napi CLI's script, run with this Node (no `npx`: on Windows that is a .cmd file). */
function napiCli() {
  const require = createRequire(import.meta.url)
  const pkg = require.resolve('@napi-rs/cli/package.json')
  return join(dirname(pkg), require(pkg).bin.napi)
}

/** Build `target` into `out`; returns the path of the .node file. The build's output goes to stderr. */
export function buildDist({ target = `x86_64-unknown-linux-gnu.${GLIBC_BASELINE}`, out = join(ROOT, 'dist') } = {}) {
  const zig = target.includes('-linux-')
  const env = { ...process.env }
  if (zig) env.PATH = [...zigbuildPath(), env.PATH].join(delimiter)
  mkdirSync(out, { recursive: true })
  // napi also writes the type definitions beside the binary: build into a scratch directory so
  // that only the .node file reaches `out` (the committed binding.d.ts is `npm run build`'s).
  const scratch = mkdtempSync(join(tmpdir(), 'stn-dist-'))
  const args = [napiCli(), 'build', '--platform', '--release', '--target', target, '--output-dir', scratch, '--no-js', '--dts', 'binding.d.ts']
  if (zig) args.push('--cross-compile')
  try {
    execFileSync(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 2, 2] })
    const built = readdirSync(scratch).filter((f) => f.endsWith('.node'))
    if (built.length !== 1) throw new Error(`expected one .node file from the build, found ${built.join(', ') || 'none'}`)
    const dest = join(resolve(out), built[0])
    copyFileSync(join(scratch, built[0]), dest)
    return dest
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const opt = (name) => {
    const i = process.argv.indexOf(name)
    return i > 0 ? process.argv[i + 1] : undefined
  }
  console.log(buildDist({ target: opt('--target'), out: opt('--out') }))
}
