#!/usr/bin/env node
// `npm version`'s hook (after `napi version` set npm/<platform>/package.json to the new version):
// point the root's optionalDependencies at the platform packages of that same version, so
// the committed package.json always names binaries that match it (the packaging test checks).
import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const path = join(root, 'package.json')
const pkg = JSON.parse(readFileSync(path, 'utf8'))
const optional = {}
for (const dir of readdirSync(join(root, 'npm')).sort()) {
  optional[JSON.parse(readFileSync(join(root, 'npm', dir, 'package.json'), 'utf8')).name] = pkg.version
}
pkg.optionalDependencies = optional
writeFileSync(path, JSON.stringify(pkg, null, 2) + '\n')
