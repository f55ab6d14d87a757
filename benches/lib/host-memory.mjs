// Free page reporting: what the bench meets on these machines.
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
// The bench takes the machine as users have it: it changes no kernel or VM setting. It reads
// the setting and the counter of reported memory, to say in the report what the run met.
import { existsSync, readFileSync } from 'node:fs'

const DIR = '/sys/module/page_reporting/parameters'
const ORDER = `${DIR}/page_reporting_order`

const read = (f) => (existsSync(f) ? readFileSync(f, 'utf8').trim() : null)

/** The reporting setting and counter now: `{ order, reportedKiB }` (nulls without it). */
export function pageReporting() {
  const kib = read(`${DIR}/reported_kib`)
  return { order: read(ORDER), reportedKiB: kib == null ? null : Number(kib) }
}
