#!/usr/bin/env node
// Build aprender-peer (peers/aprender: the Rust crate aprender, its own workspace and lock
// file) once per version of the peer's sources, outside the clone:
//
//   ~/.cache/safetensors-node/aprender-peer-target/             cargo's target directory
//   ~/.cache/safetensors-node/aprender-peer-<version>-<hash>    the program (hash of the peer's
//                                                               Cargo.toml, Cargo.lock and src/)
//
// A fresh clone then finds the program built instead of compiling aprender again (minutes on
// two cores). A change to the peer's sources builds anew beside the old program, reusing the
// target directory. STN_CACHE_DIR moves the cache.
//
// Import it (`ensureAprenderPeer()` returns the program's path) or run it (prints the path).
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const peer = join(root, 'peers', 'aprender')

/** The aprender version the peer pins (`aprender = { version = "=X" }` in its Cargo.toml). */
function pinnedVersion(manifest) {
  const m = /^aprender\s*=\s*\{[^}]*version\s*=\s*"=([^"]+)"/m.exec(manifest)
  if (!m) throw new Error(`${join(peer, 'Cargo.toml')} does not pin aprender to one version`)
  return m[1]
}

/** Build aprender-peer if needed; return its path. */
export function ensureAprenderPeer() {
  const cache = process.env.STN_CACHE_DIR ?? join(homedir(), '.cache', 'safetensors-node')
  const manifest = readFileSync(join(peer, 'Cargo.toml'), 'utf8')
  const hash = createHash('sha256')
  for (const f of ['Cargo.toml', 'Cargo.lock']) hash.update(f).update(readFileSync(join(peer, f)))
  for (const f of readdirSync(join(peer, 'src')).sort()) hash.update(f).update(readFileSync(join(peer, 'src', f)))
  const exe = join(cache, `aprender-peer-${pinnedVersion(manifest)}-${hash.digest('hex').slice(0, 12)}`)
  if (existsSync(exe)) return exe
  const target = join(cache, 'aprender-peer-target')
  mkdirSync(target, { recursive: true })
  execFileSync('cargo', ['build', '--release', '--locked', '--manifest-path', join(peer, 'Cargo.toml')], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, CARGO_TARGET_DIR: target },
  })
  const tmp = `${exe}.${process.pid}.tmp`
  copyFileSync(join(target, 'release', 'aprender-peer'), tmp)
  renameSync(tmp, exe)
  return exe
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(ensureAprenderPeer())
}
