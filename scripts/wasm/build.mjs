#!/usr/bin/env node
// Build wasm/safetensors-node.wasm (crates/wasm over the core without default features:
// no mmap, no threads, no std::fs) for wasm32-unknown-unknown, which needs no libc and so
// runs in any WebAssembly host.
//
// Toolchain: rustup's wasm32-unknown-unknown target where it is installed (the release
// workflow adds it); else Debian's rustc-web / cargo-web 1.96 with rust-web-src, building
// std for the target (`-Zbuild-std`, allowed by RUSTC_BOOTSTRAP) and linking with
// rust-lld (lld-22). As root (CI) the Debian packages are installed when missing.
//
// Size over speed where it costs little: opt-level "z" (5 % smaller than "s" and no slower in
// benchmark row 15), fat LTO, one codegen unit, abort on panic (the JS side turns a trap into
// ERR_INTERNAL and drops the instance), symbols stripped; SIMD128 enabled (every engine this targets has it: Node 16.4+, Chrome 91+,
// Firefox 89+, Safari 16.4+), so LLVM vectorises the upcasts and decoders' loops.
//
// The result is cached outside the clone, keyed by the toolchain's version, these flags and
// the hash of the sources it is built from: ~/.cache/safetensors-node/wasm-<key>/
// (STN_CACHE_DIR moves it). `node scripts/wasm/build.mjs` prints the .wasm's path and size.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const WASM_OUT = join(root, 'wasm', 'safetensors-node.wasm')
const TARGET = 'wasm32-unknown-unknown'
const DEBIAN = { rustc: '/usr/bin/rustc', cargo: '/usr/bin/cargo', src: '/usr/lib/rustlib/src/rust/library/Cargo.lock', lld: '/usr/bin/lld-22' }
const DEBIAN_PACKAGES = ['rustc-web', 'cargo-web', 'rust-web-src', 'lld-22']
const PROFILE = {
  CARGO_PROFILE_RELEASE_OPT_LEVEL: 'z',
  CARGO_PROFILE_RELEASE_LTO: 'fat',
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS: '1',
  CARGO_PROFILE_RELEASE_PANIC: 'abort',
  CARGO_PROFILE_RELEASE_STRIP: 'true',
  CARGO_PROFILE_RELEASE_DEBUG: 'false',
}
const RUSTFLAGS = '-C target-feature=+simd128'

const run = (cmd, args, env) => execFileSync(cmd, args, { encoding: 'utf8', env: { ...process.env, ...env } }).trim()

/** rustup's toolchain when it has the target, else Debian's (installed when missing, as root). */
function toolchain() {
  try {
    if (run('rustup', ['target', 'list', '--installed']).split('\n').includes(TARGET)) {
      return { rustc: 'rustc', cargo: 'cargo', buildStd: false }
    }
  } catch {}
  if (![DEBIAN.rustc, DEBIAN.cargo, DEBIAN.src, DEBIAN.lld].every(existsSync)) {
    if (process.getuid?.() !== 0) {
      throw new Error(`wasm build: install ${DEBIAN_PACKAGES.join(' ')} (apt) or \`rustup target add ${TARGET}\``)
    }
    // A fresh machine's package lists may be empty or stale.
    execFileSync('apt-get', ['update', '-q'], { stdio: 'inherit' })
    execFileSync('apt-get', ['install', '-y', '-q', ...DEBIAN_PACKAGES], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
  }
  return { rustc: DEBIAN.rustc, cargo: DEBIAN.cargo, buildStd: true }
}

function hashTree(hash, dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = join(dir, entry.name)
    if (entry.isDirectory()) hashTree(hash, p)
    else if (entry.isFile()) hash.update(relative(root, p)).update(readFileSync(p))
  }
}

/** The cache key: toolchain, flags and every source the module is built from. */
function key(tc) {
  const hash = createHash('sha256')
  hash.update(run(tc.rustc, ['-vV'])).update(JSON.stringify({ PROFILE, RUSTFLAGS, buildStd: tc.buildStd }))
  for (const f of ['Cargo.lock', 'crates/core/Cargo.toml', 'crates/wasm/Cargo.toml']) hash.update(f).update(readFileSync(join(root, f)))
  hashTree(hash, join(root, 'crates/core/src'))
  hashTree(hash, join(root, 'crates/wasm/src'))
  return hash.digest('hex').slice(0, 16)
}

export function buildWasm() {
  const tc = toolchain()
  const cache = join(process.env.STN_CACHE_DIR ?? join(homedir(), '.cache', 'safetensors-node'), `wasm-${key(tc)}`)
  const cached = join(cache, 'safetensors-node.wasm')
  if (!existsSync(cached)) {
    const targetDir = join(root, 'target', 'wasm')
    const args = ['build', '-p', 'safetensors-node-wasm', '--release', '--target', TARGET]
    if (tc.buildStd) args.push('-Zbuild-std=std,panic_abort')
    const env = { ...PROFILE, RUSTFLAGS, CARGO_TARGET_DIR: targetDir, RUSTC: tc.rustc }
    if (tc.buildStd) Object.assign(env, { RUSTC_BOOTSTRAP: '1', PATH: `/usr/bin:${process.env.PATH}` })
    execFileSync('nice', ['-n', '10', tc.cargo, ...args], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, ...env } })
    mkdirSync(cache, { recursive: true })
    const partial = `${cached}.partial-${process.pid}`
    copyFileSync(join(targetDir, TARGET, 'release', 'safetensors_node_wasm.wasm'), partial)
    renameSync(partial, cached)
  }
  copyFileSync(cached, WASM_OUT)
  return WASM_OUT
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = buildWasm()
  console.log(`${out} (${statSync(out).size} bytes)`)
}
