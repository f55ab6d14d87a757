// The package as a user gets it. The release binary of this platform (linux-x64-gnu, built
// against glibc 2.17 by scripts/build-dist.mjs; or the one STN_PACKAGE_BINARY names, as the
// release workflow does on the other platforms) goes into its platform package; both
// packages are packed with `npm pack`, installed from the tarballs into fresh projects with
// no cargo or rustc on PATH, and used from ES modules, CommonJS, TypeScript (nodenext, both
// package types), the CLI, Bun and Deno.
import { beforeAll, describe, expect, it } from 'vitest'
import { execFileSync, spawnSync, type SpawnSyncOptions } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { delimiter, join, resolve } from 'node:path'
import { tempDir } from './helpers'

const ROOT = resolve(__dirname, '..')
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
const WIN = process.platform === 'win32'

/** This machine's napi-rs platform name (lib/missing-binary.js says the same; here computed on its own). */
function platformName(): string {
  const { platform, arch } = process
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform !== 'linux') return `${platform}-${arch}`
  const report = process.report.getReport() as any
  return `linux-${arch}-${report.header.glibcVersionRuntime ? 'gnu' : 'musl'}`
}
const PLATFORM = platformName()
const BINARY = `${PKG.napi.binaryName}.${PLATFORM}.node`
const PREBUILT = process.env.STN_PACKAGE_BINARY
/** Without a prebuilt binary, this machine builds the one platform it can: linux-x64-gnu. */
const CAN_RUN = !!PREBUILT || PLATFORM === 'linux-x64-gnu'

/** napi-rs target triple → platform name, for the targets package.json lists. */
const PLATFORM_OF: Record<string, { name: string; os: string; cpu: string; libc?: string }> = {
  'x86_64-unknown-linux-gnu': { name: 'linux-x64-gnu', os: 'linux', cpu: 'x64', libc: 'glibc' },
  'aarch64-unknown-linux-gnu': { name: 'linux-arm64-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc' },
  'x86_64-unknown-linux-musl': { name: 'linux-x64-musl', os: 'linux', cpu: 'x64', libc: 'musl' },
  'aarch64-unknown-linux-musl': { name: 'linux-arm64-musl', os: 'linux', cpu: 'arm64', libc: 'musl' },
  'x86_64-apple-darwin': { name: 'darwin-x64', os: 'darwin', cpu: 'x64' },
  'aarch64-apple-darwin': { name: 'darwin-arm64', os: 'darwin', cpu: 'arm64' },
  'x86_64-pc-windows-msvc': { name: 'win32-x64-msvc', os: 'win32', cpu: 'x64' },
}

/** PATH without cargo, rustc and their kin: what a user without Rust has. */
function pathWithoutRust(): string {
  const exe = WIN ? '.exe' : ''
  const rust = /^(cargo|rustc|rustdoc|rustup|rust-gdb|rust-lldb|rust-lld)([-.].*)?$/
  const shadows = tempDir('stn-path-')
  return (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => dir)
    .map((dir, i) => {
      if (!existsSync(join(dir, `cargo${exe}`)) && !existsSync(join(dir, `rustc${exe}`))) return dir
      // A directory that also holds what a user has (Debian's cargo and rustc sit in /usr/bin
      // beside node and npm): the same programs, Rust's left out.
      const shadow = join(shadows, String(i))
      mkdirSync(shadow)
      for (const name of readdirSync(dir)) if (!rust.test(name)) symlinkSync(join(dir, name), join(shadow, name))
      return shadow
    })
    .join(delimiter)
}
const USER_ENV: NodeJS.ProcessEnv = { ...process.env, PATH: pathWithoutRust(), CARGO: '', RUSTC: '', npm_config_audit: 'false', npm_config_fund: 'false' }
delete USER_ENV.NAPI_RS_NATIVE_LIBRARY_PATH

/** Run a command, return its stdout; a non-zero exit throws with its stderr. */
function run(cmd: string, args: string[], options: SpawnSyncOptions = {}): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env: USER_ENV, shell: WIN && !cmd.endsWith('.exe') && cmd !== process.execPath, ...options })
  if (r.error) throw r.error
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}:\n${r.stderr}\n${r.stdout}`)
  return String(r.stdout)
}
const runJson = (cmd: string, args: string[], cwd: string) => JSON.parse(run(cmd, args, { cwd }))

interface Packed {
  filename: string
  files: Array<{ path: string; size: number }>
}
const pack = (dir: string, dest: string, dryRun = false): Packed =>
  JSON.parse(run('npm', ['pack', '--json', '--pack-destination', dest, ...(dryRun ? ['--dry-run'] : [])], { cwd: dir, env: process.env }))[0]

describe('the platform packages, the optional dependencies and the release workflow agree', () => {
  it('one npm/<platform> package per napi target, with os, cpu and libc; each an optional dependency at the same version', () => {
    const targets: string[] = PKG.napi.targets
    expect(targets.sort()).toEqual(Object.keys(PLATFORM_OF).sort())
    expect(readdirSync(join(ROOT, 'npm')).sort()).toEqual(targets.map((t) => PLATFORM_OF[t].name).sort())
    const optional: Record<string, string> = {}
    for (const t of targets) {
      const p = PLATFORM_OF[t]
      const pkg = JSON.parse(readFileSync(join(ROOT, 'npm', p.name, 'package.json'), 'utf8'))
      const binary = `${PKG.napi.binaryName}.${p.name}.node`
      expect(pkg, p.name).toMatchObject({ name: `${PKG.name}-${p.name}`, version: PKG.version, os: [p.os], cpu: [p.cpu], main: binary, files: [binary], license: PKG.license })
      expect(pkg.libc, p.name).toEqual(p.libc ? [p.libc] : undefined)
      expect(pkg.repository, p.name).toEqual(PKG.repository)
      optional[pkg.name] = PKG.version
    }
    expect(PKG.optionalDependencies).toEqual(optional)
  })

  it('the release workflow builds, tests and publishes every target, the linux-gnu ones against glibc 2.17', () => {
    const workflow = readFileSync(join(ROOT, '.github', 'workflows', 'release.yml'), 'utf8')
    for (const t of PKG.napi.targets as string[]) {
      const target = t.endsWith('-linux-gnu') ? `${t}.2.17` : t
      expect(workflow, t).toContain(`target: ${target}`)
    }
    expect(workflow).toContain('napi artifacts')
    expect(workflow).toContain('napi pre-publish')
    expect(workflow).toMatch(/npm publish/)
    expect(workflow).toContain('STN_PACKAGE_BINARY')
  })
})

describe.runIf(CAN_RUN)(`installed from npm pack tarballs (${PLATFORM})`, () => {
  const work = tempDir('stn-package-')
  let binary = ''
  let rootPack: Packed
  let platformPack: Packed
  let dryRun: Packed
  const projects = { esm: join(work, 'esm'), cjs: join(work, 'cjs') }

  beforeAll(() => {
    // The binary users get: for linux-x64-gnu the glibc 2.17 build of the release workflow.
    binary = PREBUILT
      ? resolve(PREBUILT)
      : run(process.execPath, [join(ROOT, 'scripts', 'build-dist.mjs'), '--out', join(work, 'dist')], { cwd: ROOT, env: process.env }).trim()
    const platformDir = join(work, 'platform')
    cpSync(join(ROOT, 'npm', PLATFORM), platformDir, { recursive: true })
    copyFileSync(join(ROOT, 'LICENSE'), join(platformDir, 'LICENSE')) // as the release workflow does
    copyFileSync(binary, join(platformDir, BINARY))
    dryRun = pack(ROOT, work, true)
    rootPack = pack(ROOT, work)
    platformPack = pack(platformDir, work)
    for (const [kind, dir] of Object.entries(projects)) {
      mkdirSync(dir)
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `${kind}-app`, private: true, ...(kind === 'esm' ? { type: 'module' } : {}) }))
      // --offline: everything comes from the two tarballs (the other platforms' optional
      // packages are skipped as npm skips any optional dependency it cannot get).
      run('npm', ['install', '--offline', join(work, rootPack.filename), join(work, platformPack.filename)], { cwd: dir })
      for (const f of ['checks.cjs', 'esm.mjs', 'cjs.cjs']) copyFileSync(join(__dirname, 'package', f), join(dir, f))
    }
  }, 30 * 60_000)

  it('npm pack --dry-run lists the entry points, types, docs and license, and no binary, source or test', () => {
    const files = dryRun.files.map((f) => f.path).sort()
    for (const required of [
      'package.json', 'README.md', 'LICENSE', 'docs/cli.md', 'index.js', 'index.mjs', 'index.d.ts', 'index.d.mts',
      'binding.js', 'binding.d.ts', 'lib/remote.js', 'lib/missing-binary.js', 'bin/safetensors-node.js', 'bin/lib/main.js',
      'wasm/index.mjs', 'wasm/index.d.mts', 'wasm/safetensors-node.wasm',
    ]) {
      expect(files, required).toContain(required)
    }
    const allowed = /^(package\.json|README\.md|LICENSE|index\.(js|mjs|d\.ts|d\.mts)|binding\.(js|d\.ts)|(lib|bin)\/[\w/.-]+\.js|docs\/[\w.-]+\.md|wasm\/(index\.(mjs|d\.mts)|safetensors-node\.wasm))$/
    expect(files.filter((f) => !allowed.test(f))).toEqual([])
    // The real tarball holds what the dry run listed.
    expect(rootPack.files.map((f) => f.path).sort()).toEqual(files)
    expect(platformPack.files.map((f) => f.path).sort()).toEqual(['LICENSE', 'README.md', BINARY, 'package.json'].sort())
    const manifest = JSON.parse(readFileSync(join(projects.cjs, 'node_modules', 'safetensors-node', 'package.json'), 'utf8'))
    expect(Object.keys(manifest.scripts ?? {}).filter((s) => /install|prepare/.test(s))).toEqual([]) // nothing runs at install
    expect(manifest).toMatchObject({ license: 'MIT', repository: PKG.repository, keywords: expect.arrayContaining(['safetensors', 'gguf']) })
  })

  it('installs without cargo or rustc, and loads the binary of the platform package', () => {
    const which = spawnSync(WIN ? 'where' : 'sh', WIN ? ['cargo'] : ['-c', 'command -v cargo || command -v rustc'], { env: USER_ENV, encoding: 'utf8' })
    expect(which.status, which.stdout).not.toBe(0)
    for (const dir of Object.values(projects)) {
      const installed = join(dir, 'node_modules')
      expect(readdirSync(join(installed, 'safetensors-node')).filter((f) => f.endsWith('.node'))).toEqual([])
      expect(existsSync(join(installed, `safetensors-node-${PLATFORM}`, BINARY))).toBe(true)
      const loaded = runJson(process.execPath, ['-e', `require('safetensors-node'); console.log(JSON.stringify(process.report.getReport().sharedObjects.filter((s) => s.endsWith('.node'))))`], dir)
      expect(loaded).toEqual([join(installed, `safetensors-node-${PLATFORM}`, BINARY)])
    }
  })

  /** What checks.cjs must find, from values known independently of the package. */
  const expected = () => {
    const header = JSON.stringify({ x: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } })
    return {
      exports: ['GgufFile', 'LinearRegression', 'LogisticRegression', 'Model', 'SafeTensorsFile', 'convert', 'diff', 'download', 'inspect', 'loadFile', 'loadFileAsync', 'openWeights', 'openWeightsSync', 'saveFile', 'saveFileAsync', 'serialize', 'validate', 'verify'],
      tensorNames: ['ids', 'w'], // the reference writer's order: larger dtypes first
      metadata: { source: 'smoke' },
      w: [1, -2.5, 3.140625],
      wRaw: [0x80, 0x3f, 0x20, 0xc0, 0x49, 0x40], // BF16 0x3F80, 0xC020, 0x4049, little-endian
      wAsync: [1, -2.5, 3.140625],
      ids: ['7', '-1'],
      serializedBytes: 8 + Math.ceil(header.length / 8) * 8 + 4, // header padded to 8 bytes, one F32
      predict: [21], // y = 2x + 1 at x = 10
      modelPredict: [21],
      modelFormat: 'safetensors',
      converted: { outputFormat: 'gguf', tensors: 2 },
      inspected: { format: 'gguf', names: ['ids', 'w'] },
      validateOk: true,
      codes: { missingFile: 'ERR_NOT_FOUND', newSafeTensorsFile: 'ERR_INVALID_ARGUMENT', newModel: 'ERR_INVALID_ARGUMENT', badArgument: 'ERR_INVALID_ARGUMENT' },
      defaultIsNamespace: true,
    }
  }

  it('ES module project: named, default and namespace imports', () => {
    expect(runJson(process.execPath, ['esm.mjs'], projects.esm)).toEqual(expected())
  })

  it('CommonJS project: require', () => {
    expect(runJson(process.execPath, ['cjs.cjs'], projects.cjs)).toEqual(expected())
  })

  it('deep imports of internals are refused by the exports map', () => {
    const codes = runJson(process.execPath, ['-e', `const out = {};
      for (const p of ['safetensors-node/binding.js', 'safetensors-node/lib/remote.js']) { try { require(p); out[p] = 'loaded' } catch (e) { out[p] = e.code } }
      console.log(JSON.stringify(out))`], projects.cjs)
    expect(codes).toEqual({ 'safetensors-node/binding.js': 'ERR_PACKAGE_PATH_NOT_EXPORTED', 'safetensors-node/lib/remote.js': 'ERR_PACKAGE_PATH_NOT_EXPORTED' })
  })

  describe.each([
    ['an ES module project', 'esm', 'example.mts', 'index.d.mts'],
    ['a CommonJS project', 'cjs', 'example.cts', 'index.d.ts'],
  ] as const)('TypeScript, module nodenext, in %s', (_what, kind, source, declarations) => {
    it(`type-checks against ${declarations} with skipLibCheck off, compiles and runs`, () => {
      const dir = projects[kind]
      copyFileSync(join(__dirname, 'package', source), join(dir, 'example.ts'))
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
        compilerOptions: {
          module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, skipLibCheck: false, outDir: 'out',
          types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')],
        },
        files: ['example.ts'],
      }))
      const listed = run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.', '--listFiles'], { cwd: dir })
      expect(listed).toContain(join(dir, 'node_modules', 'safetensors-node', declarations))
      expect(runJson(process.execPath, [join('out', 'example.js')], dir)).toEqual({
        w: [0.5, -4],
        raw: [0x00, 0x38, 0x00, 0xc4], // F16 0x3800 and 0xC400, little-endian
        code: 'ERR_NOT_FOUND',
        constructCode: 'ERR_INVALID_ARGUMENT',
        predicted: [5], // y = 2x + 1 at x = 2
        defaultIsNamed: true,
      })
    })
  })

  it('the CLI runs from the installed package', () => {
    const dir = projects.cjs
    run(process.execPath, ['-e', `require('safetensors-node').saveFile('cli.safetensors', { a: { dtype: 'F16', shape: [2, 3], data: [1, 2, 3, 4, 5, 6] } })`], { cwd: dir })
    const cli = join(dir, 'node_modules', '.bin', WIN ? 'safetensors-node.cmd' : 'safetensors-node')
    const report = runJson(cli, ['inspect', 'cli.safetensors', '--json'], dir)
    expect(report).toMatchObject({ format: 'safetensors', numParameters: 6, tensors: [{ name: 'a', dtype: 'F16', shape: [2, 3] }] })
  })

  it.runIf(PLATFORM.endsWith('-gnu') && process.platform === 'linux')('the linux-gnu binary needs no glibc symbol newer than 2.17 (its ELF version needs, as readelf reads them too)', () => {
    const needs = elfVersionNeeds(readFileSync(binary))
    const glibc = needs.filter((n) => n.version.startsWith('GLIBC_')).map((n) => n.version)
    expect(glibc.length).toBeGreaterThan(0)
    const newest = glibc.sort(compareVersions).at(-1)!
    expect(compareVersions(newest, 'GLIBC_2.17'), `newest: ${newest}`).toBeLessThanOrEqual(0)
    expect(needs.map((n) => n.file)).not.toContain('libstdc++.so.6')
    // The parser agrees with binutils, on this binary and on the host build of `npm run build`.
    for (const file of [binary, join(ROOT, BINARY)].filter((f) => existsSync(f))) {
      expect(new Set(elfVersionNeeds(readFileSync(file)).map((n) => n.version)), file).toEqual(readelfVersionNeeds(file))
    }
  })

  describe('other runtimes (their npm packages, cached outside the clone)', () => {
    const runtime = (name: 'bun' | 'deno') => run(process.execPath, [join(ROOT, 'scripts', 'toolchains.mjs'), name], { cwd: ROOT, env: process.env }).trim()
    const DENO_FLAGS = ['run', '--cached-only', '--allow-read', '--allow-write', '--allow-ffi', '--allow-env']

    it('Bun: ES module and CommonJS', () => {
      const bun = runtime('bun')
      expect(runJson(bun, ['esm.mjs'], projects.esm)).toEqual(expected())
      expect(runJson(bun, ['cjs.cjs'], projects.cjs)).toEqual(expected())
    }, 10 * 60_000)

    // Deno publishes no musl build.
    it.runIf(!PLATFORM.endsWith('-musl'))('Deno: ES module and CommonJS, with the permissions the README names', () => {
      const deno = runtime('deno')
      const env = { ...USER_ENV, DENO_DIR: join(work, 'deno-dir'), DENO_NO_UPDATE_CHECK: '1' }
      expect(JSON.parse(run(deno, [...DENO_FLAGS, 'esm.mjs'], { cwd: projects.esm, env }))).toEqual(expected())
      expect(JSON.parse(run(deno, [...DENO_FLAGS, 'cjs.cjs'], { cwd: projects.cjs, env }))).toEqual(expected())
      // Without --allow-ffi the import fails, and says so.
      const denied = spawnSync(deno, ['run', '--cached-only', '--allow-read', '--allow-env', 'esm.mjs'], { cwd: projects.esm, env, encoding: 'utf8' })
      expect(denied.status).not.toBe(0)
      expect(denied.stderr).toContain('--allow-ffi')
    }, 10 * 60_000)
  })
})

/** "GLIBC_2.3.4" before "GLIBC_2.17": numeric, part by part. */
function compareVersions(a: string, b: string): number {
  const pa = a.replace(/^\D+/, '').split('.').map(Number)
  const pb = b.replace(/^\D+/, '').split('.').map(Number)
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0)
    if (d) return d
  }
  return 0
}

/** The (library, symbol version) pairs of an ELF64 little-endian file's SHT_GNU_verneed section. */
function elfVersionNeeds(elf: Buffer): Array<{ file: string; version: string }> {
  expect(elf.subarray(0, 4).toString('latin1')).toBe('\x7fELF')
  expect(elf[4], 'ELFCLASS64').toBe(2)
  expect(elf[5], 'little-endian').toBe(1)
  const shoff = Number(elf.readBigUInt64LE(0x28))
  const shentsize = elf.readUInt16LE(0x3a)
  const shnum = elf.readUInt16LE(0x3c)
  const section = (i: number) => {
    const h = shoff + i * shentsize
    return { type: elf.readUInt32LE(h + 4), offset: Number(elf.readBigUInt64LE(h + 0x18)), link: elf.readUInt32LE(h + 0x28), info: elf.readUInt32LE(h + 0x2c) }
  }
  const out: Array<{ file: string; version: string }> = []
  for (let i = 0; i < shnum; i++) {
    const s = section(i)
    if (s.type !== 0x6ffffffe) continue // SHT_GNU_verneed
    const strtab = section(s.link).offset
    const str = (off: number) => elf.toString('latin1', strtab + off, elf.indexOf(0, strtab + off))
    let need = s.offset
    for (let n = 0; n < s.info; n++) {
      const file = str(elf.readUInt32LE(need + 4))
      let aux = need + elf.readUInt32LE(need + 8)
      for (let k = 0; k < elf.readUInt16LE(need + 2); k++) {
        out.push({ file, version: str(elf.readUInt32LE(aux + 8)) })
        aux += elf.readUInt32LE(aux + 12)
      }
      need += elf.readUInt32LE(need + 12)
    }
  }
  return out
}

/** The same, as binutils' readelf prints it. */
function readelfVersionNeeds(file: string): Set<string> {
  const text = execFileSync('readelf', ['-V', '--wide', file], { encoding: 'utf8' })
  const section = text.slice(text.indexOf(".gnu.version_r'"))
  return new Set([...section.matchAll(/Name: (\S+)\s+Flags/g)].map((m) => m[1]))
}
