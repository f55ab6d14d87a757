import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { copyFileSync, cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import * as lib from '../index.js'
import { Model, SafeTensorsFile, saveFile, serialize } from '../index.js'
import { tempDir } from './helpers'

const ROOT = resolve(__dirname, '..')
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8')

/** Run `code` with Node in `cwd` (the package root resolves `safetensors-node` to itself); its stdout parsed as JSON. */
function node(code: string, { module = false, cwd = ROOT, args = [] as string[] } = {}): any {
  const env = { ...process.env }
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH
  const r = spawnSync(process.execPath, [...args, ...(module ? ['--input-type=module'] : []), '-e', code], { cwd, env, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`node exited ${r.status}: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** index.d.ts's runtime declarations: classes (with their members) and functions. */
function declared() {
  const classes: Record<string, { statics: Set<string>; members: Set<string> }> = {}
  const functions = new Set<string>()
  let owner = ''
  for (const line of read('index.d.ts').split('\n')) {
    const cls = /^export declare class (\w+)/.exec(line)
    if (cls) classes[(owner = cls[1])] = { statics: new Set(), members: new Set() }
    else if (line === '}') owner = ''
    const fn = /^export declare function (\w+)/.exec(line)
    if (fn) functions.add(fn[1])
    const member = /^ {2}(static )?(?:get )?(\w+)[<(]/.exec(line)
    if (owner && member && member[2] !== 'constructor') classes[owner][member[1] ? 'statics' : 'members'].add(member[2])
  }
  return { classes, functions }
}

const { classes, functions } = declared()
const PUBLIC = [...Object.keys(classes), ...functions].sort()

describe('the public surface', () => {
  // docs/api.md documents exactly what index.d.ts declares: __test__/docs.spec.ts.
  it('index.d.ts declares the public API, nothing internal', () => {
    expect(PUBLIC).toEqual([
      'GgufFile', 'LinearRegression', 'LogisticRegression', 'Model', 'SafeTensorsFile',
      'convert', 'diff', 'download', 'inspect', 'loadFile', 'loadFileAsync', 'openWeights', 'openWeightsSync', 'saveFile', 'saveFileAsync', 'serialize', 'validate', 'verify',
    ])
  })

  it('require gives exactly the declared names; every internal of the binding stays out', () => {
    const cjs = node(`const m = require('safetensors-node'); const b = require('./binding.js');
      console.log(JSON.stringify({ keys: Object.keys(m).sort(), binding: Object.keys(b) }))`)
    expect(cjs.keys).toEqual(PUBLIC)
    const internals = cjs.binding.filter((k: string) => !PUBLIC.includes(k))
    // The list, among others: these are plumbing of lib/remote.js and index.js.
    for (const name of ['RemoteOpener', 'RemoteWeights', 'openWeightsAsync', 'shardUrl', 'resolveModelId', 'inspectJson', '__napiBindingTarget', 'loadModelDir']) {
      expect(internals).toContain(name)
    }
    for (const name of internals) expect((lib as any)[name], name).toBeUndefined()
  })

  it('ES modules get the same objects as named exports and as the default export', () => {
    const esm = node(`import * as ns from 'safetensors-node'; import d from 'safetensors-node'; import { createRequire } from 'node:module';
      const cjs = createRequire(process.cwd() + '/')('safetensors-node');
      const names = Object.keys(ns).filter((k) => k !== 'default').sort();
      console.log(JSON.stringify({ names, defaultIsCjs: d === cjs, same: names.every((k) => ns[k] === cjs[k]) }))`, { module: true })
    expect(esm).toEqual({ names: PUBLIC, defaultIsCjs: true, same: true })
  })

  it('each class has exactly its declared members at run time', () => {
    for (const [name, decl] of Object.entries(classes)) {
      const cls = (lib as any)[name]
      const own = (o: object) => Object.getOwnPropertyNames(o).filter((k) => !['length', 'name', 'prototype', 'arguments', 'caller', 'constructor'].includes(k)).sort()
      expect(own(cls), `${name} statics`).toEqual([...decl.statics].sort())
      expect(own(cls.prototype), `${name} members`).toEqual([...decl.members].sort())
    }
    // What the binding used to expose on the classes themselves.
    expect((SafeTensorsFile as any).fromHeader).toBeUndefined()
    expect((Model as any).loadPretrainedDir).toBeUndefined()
    const f = SafeTensorsFile.fromBytes(serialize({ w: { shape: [1], data: [1] } }))
    expect((f as any).fileRange).toBeUndefined()
    expect((f as any).sliceSpans).toBeUndefined()
  })

  it('new SafeTensorsFile() and new Model() throw ERR_INVALID_ARGUMENT naming the factories', () => {
    expect(() => new (SafeTensorsFile as any)()).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('SafeTensorsFile.open(path)') }))
    expect(() => new (Model as any)('dir')).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('Model.loadPretrained(dir)') }))
    // The factories still make instances of the class.
    expect(SafeTensorsFile.fromBytes(serialize({ w: { shape: [1], data: [1] } }))).toBeInstanceOf(SafeTensorsFile)
  })

  it('the exports map refuses deep imports of internals, from require and import alike', () => {
    const r = node(`const codes = {};
      for (const p of ['safetensors-node/binding.js', 'safetensors-node/lib/remote.js', 'safetensors-node/index.js']) {
        try { require(p); codes[p] = 'loaded' } catch (e) { codes[p] = e.code }
      }
      codes.pkg = require('safetensors-node/package.json').name
      console.log(JSON.stringify(codes))`)
    expect(r).toEqual({
      'safetensors-node/binding.js': 'ERR_PACKAGE_PATH_NOT_EXPORTED',
      'safetensors-node/lib/remote.js': 'ERR_PACKAGE_PATH_NOT_EXPORTED',
      'safetensors-node/index.js': 'ERR_PACKAGE_PATH_NOT_EXPORTED',
      pkg: 'safetensors-node',
    })
    const m = node(`let code = 'loaded'; try { await import('safetensors-node/binding.js') } catch (e) { code = e.code }; console.log(JSON.stringify(code))`, { module: true })
    expect(m).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED')
  })
})

describe('types that match the run time', () => {
  it('as: F32 / F64 / raw give the arrays index.d.ts promises, for every dtype that converts', () => {
    const dir = tempDir()
    const p = join(dir, 'all.safetensors')
    saveFile(p, {
      f16: { dtype: 'F16', shape: [2], data: [1, 2] },
      bf16: { dtype: 'BF16', shape: [2], data: [1, 2] },
      f32: { shape: [2], data: new Float32Array([1, 2]) },
      f64: { shape: [2], data: new Float64Array([1, 2]) },
      i8: { shape: [2], data: new Int8Array([1, 2]) },
      u16: { shape: [2], data: new Uint16Array([1, 2]) },
      i32: { shape: [2], data: new Int32Array([1, 2]) },
      i64: { shape: [2], data: new BigInt64Array([1n, 2n]) },
      u8: { shape: [2], data: new Uint8Array([1, 2]) },
    })
    const f = SafeTensorsFile.open(p)
    for (const name of f.tensorNames) {
      expect(f.getTensor(name, { as: 'F32' }).data, name).toBeInstanceOf(Float32Array)
      expect(Array.from(f.getTensor(name, { as: 'F64' }).data), name).toEqual([1, 2])
      expect(f.getTensor(name, { as: 'F64' }).data, name).toBeInstanceOf(Float64Array)
      expect(f.getTensor(name, { as: 'raw' }).data, name).toBeInstanceOf(Uint8Array)
      expect(f.getSlice(name, [[0, 1]], { as: 'F32' }).data, name).toBeInstanceOf(Float32Array)
    }
  })

  it('a DataView, which TensorInput leaves out, is refused with ERR_INVALID_ARGUMENT', () => {
    const data = new DataView(new ArrayBuffer(4)) as any
    expect(() => serialize({ x: { dtype: 'U8', shape: [4], data } })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', tensor: 'x' }))
  })

  // docs/api.md's table lists ErrorCode: __test__/docs.spec.ts.
  it('ErrorCode lists every code the core and the HTTP layer give', () => {
    const union = new Set(/export type ErrorCode =([^;]*?)\n\n/s.exec(read('types/header.d.ts'))![1].match(/'ERR_\w+'/g)!.map((s) => s.slice(1, -1)))
    const core = new Set(read('crates/core/src/error.rs').match(/"ERR_[A-Z_]+"/g)!.map((s) => s.slice(1, -1)))
    const js = new Set(['lib/remote.js', 'lib/hub.js'].flatMap((f) => [...read(f).matchAll(/codedError\('(ERR_\w+)'/g)].map((m) => m[1])))
    expect([...new Set([...core, ...js])].sort()).toEqual([...union].sort())
  })
})

describe('when no native binary fits', () => {
  /** A copy of the package without any .node file, as npm would lay it out. */
  function copyWithoutBinary(): string {
    const dir = join(tempDir(), 'node_modules', 'safetensors-node')
    mkdirSync(dir, { recursive: true })
    for (const f of ['package.json', 'index.js', 'binding.js']) copyFileSync(join(ROOT, f), join(dir, f))
    cpSync(join(ROOT, 'lib'), join(dir, 'lib'), { recursive: true })
    return dir
  }
  const load = (dir: string, args: string[] = []) =>
    node(`try { require('./index.js'); console.log('null') } catch (e) { console.log(JSON.stringify(e.message)) }`, { cwd: dir, args })
  const platform = `${process.platform}-${process.arch}${process.platform === 'linux' ? '-gnu' : process.platform === 'win32' ? '-msvc' : ''}`

  it('the platform package not installed: says which package, why it may be missing, and how to get it', () => {
    const message: string = load(copyWithoutBinary())
    expect(message).toContain(`the binary for ${platform} is missing`)
    expect(message).toContain(`safetensors-node-${platform}`)
    expect(message).toContain('--omit=optional')
    expect(message).toContain('npm run build')
    expect(message).not.toContain('npm has a bug')
  })

  it('a binary that fails to load: the loader error that says why', () => {
    const dir = copyWithoutBinary()
    const pkg = join(dir, '..', `safetensors-node-${platform}`)
    mkdirSync(pkg)
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: `safetensors-node-${platform}`, version: '0.1.0', main: 'bad.node' }))
    writeFileSync(join(pkg, 'bad.node'), 'not a shared object')
    const message: string = load(dir)
    expect(message).toContain(`the native binary for ${platform} failed to load`)
    expect(message).toMatch(/invalid ELF header|file too short/)
  })

  it('a platform without prebuilt binaries: lists the ones there are, and the source build', () => {
    const dir = copyWithoutBinary()
    writeFileSync(join(dir, 'as-aix.cjs'), `Object.defineProperty(process, 'platform', { value: 'aix' })`)
    const message: string = load(dir, ['--require', join(dir, 'as-aix.cjs')])
    expect(message).toContain(`no prebuilt binary for this platform (aix-${process.arch}`)
    expect(message).toContain('darwin-arm64, darwin-x64, linux-arm64-gnu, linux-arm64-musl, linux-x64-gnu, linux-x64-musl, win32-x64-msvc')
    expect(message).toContain('npm install && npm run build')
  })
})
