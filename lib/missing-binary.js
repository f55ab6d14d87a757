'use strict'
// Why the native binary did not load, said so that a user can act on it. The generated loader
// (binding.js) tries `./safetensors-node.<platform>.node` (a build from a clone) and then the
// per-platform package `safetensors-node-<platform>` that npm installs as an optional
// dependency; when both fail its message blames npm whatever happened. This one says which
// of three things it was: loading failed (the first informative error says why: a glibc
// older than 2.17, a runtime without the permission, …), there is no prebuilt binary for this
// platform, or the platform package is not installed.

const { readFileSync } = require('node:fs')
const { join } = require('node:path')

/** The napi-rs name of this platform: linux-x64-gnu, darwin-arm64, win32-x64-msvc, … */
function platformName() {
  const { platform, arch } = process
  if (platform === 'linux') return `${platform}-${arch}-${isMusl() ? 'musl' : 'gnu'}`
  if (platform === 'win32') return `${platform}-${arch}-msvc`
  return `${platform}-${arch}`
}

function isMusl() {
  try {
    const report = process.report?.getReport?.()
    if (report?.header?.glibcVersionRuntime) return false
    if (Array.isArray(report?.sharedObjects) && report.sharedObjects.some((f) => /libc\.musl-|ld-musl-/.test(f))) return true
  } catch {}
  try {
    return readFileSync('/usr/bin/ldd', 'utf8').includes('musl')
  } catch {
    return false
  }
}

/**
 * The first error of the chain that says why loading failed, skipping the loader's summary
 * and its "not found here" entries (the binary is looked for in several places).
 */
function firstLoadError(error) {
  const uninformative = /Cannot find native binding|Failed to load native binding|Cannot find module|Unsupported (OS|architecture)/
  for (let e = error; e; e = e.cause) {
    if (typeof e.message === 'string' && !uninformative.test(e.message)) return e.message
  }
  return null
}

/**
 * The error to throw when `require('./binding.js')` failed with `cause`. `root` is the
 * package directory (where package.json lists the platform packages).
 */
function missingBinaryError(cause, root) {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  const prefix = `${pkg.name}-`
  const prebuilt = Object.keys(pkg.optionalDependencies ?? {})
    .filter((name) => name.startsWith(prefix))
    .map((name) => name.slice(prefix.length))
  const platform = platformName()
  const wanted = prefix + platform
  const fromSource =
    `Build it from source instead (needs Rust): clone the repository, run \`npm install && npm run build\` there, ` +
    `then \`npm install <path of the clone>\`, or point NAPI_RS_NATIVE_LIBRARY_PATH at the built .node file.`
  const why = firstLoadError(cause)
  let message
  if (why) {
    const hint = /GLIBC/.test(why) ? ' Prebuilt Linux binaries need glibc 2.17 or later (or musl).' : ''
    // A runtime's permission (Deno's --allow-ffi, --allow-env) is not solved by a build.
    message = `${pkg.name}: the native binary for ${platform} failed to load: ${why}.${hint}${/--allow-/.test(why) ? '' : ` ${fromSource}`}`
  } else if (!prebuilt.includes(platform)) {
    message =
      `${pkg.name}: no prebuilt binary for this platform (${platform}, Node ${process.version}). ` +
      `Prebuilt binaries exist for ${prebuilt.join(', ')}. ${fromSource}`
  } else {
    message =
      `${pkg.name}: the binary for ${platform} is missing. It comes in the package ${wanted}, which npm installs ` +
      `with ${pkg.name} as an optional dependency, and it is not installed here: was the install run with ` +
      `--omit=optional (or --no-optional), or from a lock file written on another platform? ` +
      `Install it: \`npm install ${wanted}@${pkg.version}\`, or reinstall ${pkg.name} with optional dependencies. ${fromSource}`
  }
  const error = new Error(message)
  error.cause = cause
  return error
}

module.exports = { missingBinaryError, platformName }
