// Free page reporting, and how the bench can keep it from deciding the figures.
//
// On a VM whose balloon driver reports free pages to the host (Linux's `page_reporting`,
// used by virtio-balloon; this project's machines are Firecracker VMs with
// page_reporting_order=9 and min_free_ms=0), every 2 MiB block the guest frees is handed
// back to the host soon after, and touching it again costs host page faults: about 2 s of
// system time per GiB here, against ~0.15 s for memory the host still backs. Which pages a
// process gets is luck, so every row that produces fresh memory (upcasts, dequantisation,
// whole checkpoints) swings by up to 10× between repetitions — for every implementation
// alike, but not equally often. Machines without free page reporting (bare metal, most
// cloud VMs) never pay this.
//
// `--no-page-reporting` (root) turns reporting off for the run (an order above the largest
// the kernel has: nothing is reported), touches most of the free memory once in a child
// process so the host backs it again, and restores the setting when the bench exits.
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'

const DIR = '/sys/module/page_reporting/parameters'
const ORDER = `${DIR}/page_reporting_order`
const OFF = '11' // above MAX_PAGE_ORDER (10 on x86-64): no free block qualifies

const read = (f) => (existsSync(f) ? readFileSync(f, 'utf8').trim() : null)

/** The reporting setting and counter now: `{ order, reportedKiB }` (nulls without it). */
export function pageReporting() {
  const kib = read(`${DIR}/reported_kib`)
  return { order: read(ORDER), reportedKiB: kib == null ? null : Number(kib) }
}

/**
 * Turn reporting off until this process exits and have the host back the free memory again.
 * Returns what was done (for the report), or throws when the setting cannot be changed.
 */
export function holdHostMemory(log) {
  const before = read(ORDER)
  if (before == null) return { changed: false, text: 'this machine has no free page reporting' }
  try {
    writeFileSync(ORDER, OFF)
  } catch (e) {
    throw new Error(`--no-page-reporting cannot write ${ORDER} (${e.code ?? e.message}): run as root, or drop the option`)
  }
  const restore = () => {
    try {
      writeFileSync(ORDER, before)
    } catch {}
  }
  process.on('exit', restore)
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      restore()
      process.exit(130)
    })
  }
  // Touch all but 1 GiB of the free memory (not the page cache: the inputs stay cached),
  // 1 GiB at a time, in a child that then exits: the guest keeps those pages free and, with
  // reporting off, backed by the host.
  const meminfo = readFileSync('/proc/meminfo', 'utf8')
  const freeKiB = Number(meminfo.match(/^MemFree:\s+(\d+)/m)?.[1] ?? 0)
  const gib = Math.max(0, Math.floor(freeKiB / 2 ** 20) - 1)
  const t0 = Date.now()
  const child = spawnSync(process.execPath, ['-e', `
    const keep = []
    for (let i = 0; i < ${gib}; i++) { const b = Buffer.allocUnsafeSlow(2 ** 30); b.fill(1); keep.push(b) }
  `], { stdio: 'inherit' })
  if (child.status !== 0) throw new Error(`touching ${gib} GiB of free memory failed`)
  const s = (Date.now() - t0) / 1000
  log?.(`bench: free page reporting off (order ${before} → ${OFF}) for this run; ${gib} GiB of free memory touched in ${s.toFixed(1)} s`)
  return { changed: true, before, gib, seconds: s, text: `turned off for this run (\`--no-page-reporting\`: page_reporting_order ${before} → ${OFF}, restored after), and ${gib} GiB of free memory touched first (${s.toFixed(0)} s) so the host backs it` }
}
