// Shared helpers of the benchmark: paths, a seeded PRNG, statistics, formatting.
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const DATA = join(ROOT, 'bench-data')
export const MiB = 1024 * 1024

/** xorshift32: fast, seeded, identical on every run (inputs must not depend on the clock). */
export function rng(seed) {
  let s = seed >>> 0 || 0x9e3779b9
  return () => {
    s ^= s << 13
    s >>>= 0
    s ^= s >>> 17
    s ^= s << 5
    s >>>= 0
    return s / 4294967296
  }
}

/**
 * Fill `out` with roughly normal values (mean 0, standard deviation `std`) — the shape of
 * trained weights: an Irwin–Hall sum of four uniforms, rescaled. Deterministic for a seed.
 */
export function fillNormal(out, seed, std = 0.02, mean = 0) {
  const r = rng(seed)
  const k = std * Math.sqrt(3) // var of (sum of 4 U(0,1)) = 1/3
  for (let i = 0; i < out.length; i++) out[i] = mean + (r() + r() + r() + r() - 2) * k
  return out
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

export function fmtMs(ms) {
  if (ms == null || !Number.isFinite(ms)) return '—'
  if (ms >= 100) return ms.toFixed(0)
  if (ms >= 10) return ms.toFixed(1)
  if (ms >= 1) return ms.toFixed(2)
  return ms.toFixed(3)
}

export function fmtRatio(r) {
  if (r == null || !Number.isFinite(r)) return '—'
  if (r >= 10) return `${r.toFixed(1)}×`
  if (r >= 0.1) return `${r.toFixed(2)}×`
  return `${r.toFixed(3)}×`
}

export function fmtMiB(kib) {
  return kib == null ? '—' : (kib / 1024).toFixed(0)
}

/** A markdown table from a header row and rows of cells. */
export function mdTable(header, rows, align) {
  const a = align ?? header.map(() => 'l')
  const sep = a.map((x) => (x === 'r' ? '---:' : x === 'c' ? ':---:' : '---'))
  const line = (cells) => `| ${cells.map((c) => String(c).replace(/\|/g, '\\|')).join(' | ')} |`
  return [line(header), line(sep), ...rows.map(line)].join('\n')
}

/** Llama tensor names and shapes (no tied embeddings, no biases). */
export function llamaTensors({ vocab, hidden, inter, layers }) {
  const t = [['model.embed_tokens.weight', [vocab, hidden]]]
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}.`
    t.push(
      [`${p}input_layernorm.weight`, [hidden]],
      [`${p}self_attn.q_proj.weight`, [hidden, hidden]],
      [`${p}self_attn.k_proj.weight`, [hidden, hidden]],
      [`${p}self_attn.v_proj.weight`, [hidden, hidden]],
      [`${p}self_attn.o_proj.weight`, [hidden, hidden]],
      [`${p}post_attention_layernorm.weight`, [hidden]],
      [`${p}mlp.gate_proj.weight`, [inter, hidden]],
      [`${p}mlp.up_proj.weight`, [inter, hidden]],
      [`${p}mlp.down_proj.weight`, [hidden, inter]],
    )
  }
  t.push(['model.norm.weight', [hidden]], ['lm_head.weight', [vocab, hidden]])
  return t
}

/** Deterministic tabular features (row-major rows × cols), columns of different scales. */
export function features(rows, cols) {
  const x = new Float32Array(rows * cols)
  let s = 0x1234567
  for (let i = 0; i < x.length; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0
    x[i] = (s / 4294967296 - 0.5) * (1 + (i % cols) * 0.25)
  }
  return x
}

/**
 * This process's own peak resident set (KiB): VmHWM on Linux. `ru_maxrss` is not used there
 * because Linux carries the parent's RSS over fork + exec into the child's ru_maxrss.
 */
export function peakRssKib(fallbackKib) {
  try {
    const m = (process.platform === 'linux' ? readFileSync('/proc/self/status', 'utf8') : '').match(/^VmHWM:\s*(\d+)\s*kB/m)
    if (m) return Number(m[1])
  } catch {}
  return fallbackKib
}
