import { describe, expect, it } from 'vitest'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import ts from 'typescript'

/**
 * docs/api.md is the reference of what index.d.ts declares, checked both ways with the
 * TypeScript compiler's view of index.d.ts (re-exports from binding.d.ts resolved):
 *
 * - every exported name is named in a heading of api.md (in a code span: `### \`Model\``);
 * - in the section of a class or interface, every own member is an entry — a list item that
 *   starts with a code span naming it (`- \`getTensor(name, options?)\``, statics as
 *   `- \`Model.loadPretrained(dir)\``, a public constructor as `- \`new LinearRegression()\``),
 *   and the properties of inline option objects (`{ fitIntercept?: boolean }`) appear in code;
 * - the members of string-literal unions (`DType`, `WeightsFormat`, …) appear in code, and the
 *   ErrorCode table lists exactly the union;
 *
 * and nothing more: a heading names only exported things, an entry of a class or interface
 * section names only a member of it (or an option of its inline options), an entry of a
 * function section only a parameter or inline option. Plus: every relative link of README.md
 * and docs/ leads to a file (and heading) that exists, and docs/benchmarks.md stays a page
 * (at most 300 lines: method and latest results; history is in git).
 */

const ROOT = resolve(__dirname, '..')
const API = join(ROOT, 'docs', 'api.md')

interface Declared {
  kind: 'class' | 'interface' | 'function' | 'alias'
  /** Own members (classes: `constructor` when public); functions: their parameters. */
  own: Set<string>
  /** Names an entry may use: own and inherited members, parameters, inline option properties. */
  allowed: Set<string>
  /** Properties of inline object types of parameters (options written in place). */
  inlineOptions: Set<string>
  /** String-literal union members (type aliases). */
  literals: string[]
}

const memberName = (name: ts.PropertyName, sf: ts.SourceFile): string =>
  ts.isComputedPropertyName(name) ? `[${name.expression.getText(sf)}]` : name.getText(sf)

const isPrivate = (node: ts.Node) => (ts.getCombinedModifierFlags(node as ts.Declaration) & ts.ModifierFlags.Private) !== 0

/** Property names of the object types written in place in `type` (through unions, intersections, parentheses). */
function inlineProperties(type: ts.TypeNode | undefined, sf: ts.SourceFile, out: Set<string>): void {
  if (!type) return
  if (ts.isTypeLiteralNode(type)) {
    for (const m of type.members) if (m.name) out.add(memberName(m.name, sf))
  } else if (ts.isUnionTypeNode(type) || ts.isIntersectionTypeNode(type)) {
    for (const t of type.types) inlineProperties(t, sf, out)
  } else if (ts.isParenthesizedTypeNode(type)) {
    inlineProperties(type.type, sf, out)
  }
}

function parameters(params: ts.NodeArray<ts.ParameterDeclaration>, sf: ts.SourceFile, d: Declared): void {
  for (const p of params) {
    d.allowed.add(p.name.getText(sf))
    inlineProperties(p.type, sf, d.inlineOptions)
  }
}

/** What index.d.ts exports, by name. */
function declarations(): Map<string, Declared> {
  const file = join(ROOT, 'index.d.ts')
  const program = ts.createProgram([file], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, types: ['node'] })
  const checker = program.getTypeChecker()
  const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(file)!)!
  const out = new Map<string, Declared>()
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
    const decls = symbol.declarations ?? []
    const first = decls[0]
    const d: Declared = { kind: 'alias', own: new Set(), allowed: new Set(), inlineOptions: new Set(), literals: [] }
    for (const decl of decls) {
      const sf = decl.getSourceFile()
      if (ts.isClassDeclaration(decl) || ts.isInterfaceDeclaration(decl)) {
        d.kind = ts.isClassDeclaration(decl) ? 'class' : 'interface'
        for (const m of decl.members as ts.NodeArray<ts.ClassElement | ts.TypeElement>) {
          if (isPrivate(m)) continue
          const name = ts.isConstructorDeclaration(m) ? 'constructor' : m.name ? memberName(m.name, sf) : null
          if (!name) continue
          d.own.add(name)
          if ('parameters' in m && m.parameters) parameters(m.parameters as ts.NodeArray<ts.ParameterDeclaration>, sf, d)
        }
        for (const p of checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol))) d.allowed.add(p.name.startsWith('__@') ? `[Symbol.${p.name.slice(3).split('@')[0]}]` : p.name)
      } else if (ts.isFunctionDeclaration(decl)) {
        d.kind = 'function'
        parameters(decl.parameters, sf, d)
        for (const p of decl.parameters) d.own.add(p.name.getText(sf))
      } else if (ts.isTypeAliasDeclaration(decl) && ts.isUnionTypeNode(decl.type)) {
        for (const t of decl.type.types) if (ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal)) d.literals.push(t.literal.text)
      }
    }
    if (!first) continue
    for (const name of [...d.own, ...d.inlineOptions]) d.allowed.add(name)
    out.set(exported.name, d)
  }
  return out
}

interface Section {
  level: number
  line: number
  /** The declared-looking names of the heading's code spans. */
  names: string[]
  /** The section's text, subsections included. */
  text: string
  /** Its own entries (before any subsection): [line, name]. */
  entries: Array<[number, string]>
}

/** The code spans of a line of Markdown. */
const codeSpans = (text: string) => [...text.replace(/^```[\s\S]*?^```/gm, '').matchAll(/`([^`\n]+)`/g)].map((m) => m[1])
/** The identifier a code span names: `getTensor(name)` → getTensor, `Model.save()` → save (with `owner`), `new X()` → constructor. */
function spanName(span: string, owners: string[]): string | null {
  let s = span.trim().replace(/^(static|get|readonly)\s+/, '')
  if (s.startsWith('new ')) return owners.includes(s.slice(4).split(/[(<\s]/)[0]) ? 'constructor' : s.slice(4)
  for (const owner of owners) if (s.startsWith(`${owner}.`)) s = s.slice(owner.length + 1)
  return /^(\[Symbol\.\w+\]|[A-Za-z_$][\w$]*)/.exec(s)?.[1] ?? null
}

function sections(markdown: string): Section[] {
  const lines = markdown.split('\n')
  const heads: Array<{ level: number; line: number; text: string }> = []
  let fenced = false
  lines.forEach((l, i) => {
    if (l.startsWith('```')) fenced = !fenced
    const h = !fenced && /^(#{1,6})\s+(.*)$/.exec(l)
    if (h) heads.push({ level: h[1].length, line: i, text: h[2] })
  })
  return heads.map((h, k) => {
    const next = heads.slice(k + 1).find((o) => o.level <= h.level)
    const sub = heads[k + 1]
    const body = lines.slice(h.line + 1, next ? next.line : lines.length)
    const ownBody = lines.slice(h.line + 1, sub ? sub.line : lines.length)
    const names = codeSpans(h.text).map((s) => /^[A-Za-z_$][\w$]*/.exec(s)?.[0]).filter((n): n is string => !!n)
    const entries: Array<[number, string]> = []
    ownBody.forEach((l, i) => {
      const m = /^- `([^`]+)`/.exec(l)
      const name = m && spanName(m[1], names)
      if (name) entries.push([h.line + 2 + i, name])
    })
    return { level: h.level, line: h.line + 1, names, text: body.join('\n'), entries }
  })
}

const declared = declarations()
const api = readFileSync(API, 'utf8')
const apiSections = sections(api)
/** Every identifier named in a code span of `text`. */
const namedIn = (text: string, owners: string[] = []) => new Set(codeSpans(text).map((s) => spanName(s, owners)).filter((n): n is string => !!n))

describe('docs/api.md against index.d.ts', () => {
  it('index.d.ts is read: its classes, functions and re-exported option types', () => {
    for (const name of ['SafeTensorsFile', 'Model', 'GgufFile', 'convert', 'openWeights', 'ConvertOptions', 'ErrorCode', 'WeightsFile']) expect(declared.has(name), name).toBe(true)
    expect([...declared.get('ConvertOptions')!.own].sort()).toEqual(['base', 'durable', 'lora', 'loraScale', 'maxShardBytes', 'metadata', 'onProgress', 'quantization', 'to'])
    expect(declared.get('SafeTensorsFile')!.own).toContain('[Symbol.dispose]')
    expect(declared.get('SafeTensorsFile')!.own).not.toContain('constructor') // private
    expect(declared.get('LogisticRegression')!.inlineOptions).toEqual(new Set(['fitIntercept', 'c', 'maxIter', 'tol']))
  })

  it('every exported name has a heading, and every heading names only exported things', () => {
    const headed = new Set(apiSections.flatMap((s) => s.names))
    const missing = [...declared.keys()].filter((n) => !headed.has(n))
    expect(missing, 'exported by index.d.ts, without a heading in docs/api.md').toEqual([])
    const unknown = apiSections.flatMap((s) => s.names.filter((n) => !declared.has(n)).map((n) => `docs/api.md:${s.line}: ${n}`))
    expect(unknown, 'named in a heading of docs/api.md, not exported by index.d.ts').toEqual([])
  })

  it('every member of a class or interface is an entry of its section; every inline option appears there', () => {
    const missing: string[] = []
    for (const [name, d] of declared) {
      if (d.kind !== 'class' && d.kind !== 'interface') continue
      const own = apiSections.filter((s) => s.names.includes(name))
      const entries = new Set(own.flatMap((s) => s.entries.map(([, n]) => n)))
      for (const m of d.own) if (!entries.has(m)) missing.push(`${name}.${m}`)
      const named = namedIn(own.map((s) => s.text).join('\n'), [name])
      for (const o of d.inlineOptions) if (!named.has(o)) missing.push(`${name}: option ${o}`)
    }
    expect(missing, 'declared in index.d.ts, not documented in their section of docs/api.md').toEqual([])
  })

  it("every function's inline options appear in its section", () => {
    const missing: string[] = []
    for (const [name, d] of declared) {
      if (d.kind !== 'function') continue
      const named = namedIn(apiSections.filter((s) => s.names.includes(name)).map((s) => s.text).join('\n'), [name])
      for (const o of d.inlineOptions) if (!named.has(o)) missing.push(`${name}: option ${o}`)
    }
    expect(missing).toEqual([])
  })

  it('every entry names a member, parameter or option the section’s declarations have', () => {
    const unknown: string[] = []
    for (const s of apiSections) {
      const owners = s.names.map((n) => declared.get(n)).filter((d): d is Declared => !!d && d.kind !== 'alias')
      if (owners.length === 0) continue
      for (const [line, entry] of s.entries) {
        if (!owners.some((d) => d.allowed.has(entry))) unknown.push(`docs/api.md:${line}: ${entry} (${s.names.join(', ')})`)
      }
    }
    expect(unknown, 'entries of docs/api.md that index.d.ts does not declare').toEqual([])
  })

  it('string-literal unions: every member appears; the ErrorCode table is exactly the union', () => {
    const code = new Set(codeSpans(api).map((s) => s.replace(/^'|'$/g, '')))
    const missing: string[] = []
    for (const [name, d] of declared) {
      if (name === 'ErrorCode') continue
      for (const lit of d.literals) if (!code.has(lit)) missing.push(`${name}: ${lit}`)
    }
    expect(missing).toEqual([])
    const section = apiSections.find((s) => s.names.includes('ErrorCode'))!
    const table = [...section.text.matchAll(/^\| (ERR_\w+) \|/gm)].map((m) => m[1])
    expect(table.sort()).toEqual([...declared.get('ErrorCode')!.literals].sort())
  })
})

/** GitHub's anchor of a heading. */
const slug = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
/** The anchors of a Markdown file's headings. */
function anchors(path: string): Set<string> {
  const lines = readFileSync(path, 'utf8').split('\n')
  return new Set(sections(lines.join('\n')).map((s) => slug(lines[s.line - 1].replace(/^#+\s+/, ''))))
}

describe('the documents', () => {
  const docs = ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]

  it('every relative link leads to a file that exists, and to a heading of it', () => {
    const broken: string[] = []
    for (const doc of docs) {
      const text = readFileSync(join(ROOT, doc), 'utf8').replace(/```[\s\S]*?```/g, '')
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue
        const [file, anchor] = target.split('#')
        const path = file ? join(dirname(join(ROOT, doc)), file) : join(ROOT, doc)
        if (!existsSync(path)) {
          broken.push(`${doc}: ${target}`)
          continue
        }
        if (anchor && path.endsWith('.md') && !anchors(path).has(anchor)) broken.push(`${doc}: ${target} (no such heading)`)
      }
    }
    expect(broken).toEqual([])
  })

  it('docs/benchmarks.md holds the method and the latest results: at most 300 lines', () => {
    expect(readFileSync(join(ROOT, 'docs', 'benchmarks.md'), 'utf8').trimEnd().split('\n').length).toBeLessThanOrEqual(300)
  })
})
