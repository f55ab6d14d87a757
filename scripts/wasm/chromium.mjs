#!/usr/bin/env node
// Headless Chromium for __test__/wasm-browser.spec.ts (the browser entry run in a page):
// Debian's `chromium` package, installed with apt when missing and running as root (CI);
// otherwise the spec says what to install. CHROMIUM names another binary.
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'

if (!existsSync(CHROMIUM) && process.getuid?.() === 0) {
  // A fresh machine's package lists may be empty or stale.
  execFileSync('apt-get', ['update', '-q'], { stdio: 'inherit' })
  execFileSync('apt-get', ['install', '-y', '-q', 'chromium'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
}
console.log(existsSync(CHROMIUM) ? `chromium: ${CHROMIUM}` : `chromium: missing (apt-get install chromium) — wasm-browser.spec.ts will fail`)
