'use strict'
// Output helpers of the command line: colors (only on a terminal, never with NO_COLOR),
// human-readable numbers, aligned tables and readable JSON. No dependencies.

/** Colors for one stream: on a TTY, and only when NO_COLOR is not set (to any value). */
function colorsFor(stream, env = process.env) {
  const on = Boolean(stream && stream.isTTY) && env.NO_COLOR === undefined
  const wrap = (open, close) => (s) => (on ? `\x1b[${open}m${s}\x1b[${close}m` : String(s))
  return { enabled: on, bold: wrap(1, 22), dim: wrap(2, 22), red: wrap(31, 39), green: wrap(32, 39), yellow: wrap(33, 39) }
}

/** Visible width of a string (ANSI color codes do not count). */
const visibleLength = (s) => s.replace(/\x1b\[[0-9;]*m/g, '').length

/** Three significant digits with a unit from `units`, moving up a unit when rounding reaches `base`. */
function scaled(n, base, units) {
  let i = 0
  let v = n
  while (v >= base && i < units.length - 1) {
    v /= base
    i++
  }
  let s = v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)
  if (Number(s) >= base && i < units.length - 1) {
    v /= base
    i++
    s = v.toFixed(2)
  }
  if (s.includes('.')) s = s.replace(/\.?0+$/, '')
  return { s, unit: units[i], i }
}

/** 63184 → "61.7 KiB"; 512 → "512 B". */
function formatBytes(n) {
  if (!Number.isFinite(n) || n < 1024) return `${n} B`
  const { s, unit } = scaled(n, 1024, ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'])
  return `${s} ${unit}`
}

/** 1834567 → "1.83M"; 145 → "145". */
function formatCount(n) {
  if (!Number.isFinite(n) || Math.abs(n) < 1000) return String(n)
  const { s, unit } = scaled(n, 1000, ['', 'K', 'M', 'B', 'T', 'P'])
  return `${s}${unit}`
}

/** 1234567 → "1,234,567". */
const withCommas = (n) => (Number.isFinite(n) ? n.toLocaleString('en-US') : String(n))

/** Seconds → "0:07", "12:03", "1:02:03". */
function formatDuration(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return '--:--'
  const t = Math.round(seconds)
  const h = Math.floor(t / 3600)
  const m = Math.floor((t % 3600) / 60)
  const s = String(t % 60).padStart(2, '0')
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`
}

/** Seconds of a finished operation: "0.12 s", "3.4 s", "2:05". */
function formatElapsed(seconds) {
  if (seconds < 10) return `${seconds.toFixed(2)} s`
  if (seconds < 60) return `${seconds.toFixed(1)} s`
  return formatDuration(seconds)
}

/** A float32 value with the fewest digits that read back as the same float32 (0.1 → "0.1"). */
function formatF32(v) {
  if (!Number.isFinite(v)) return String(v)
  for (let p = 1; p <= 9; p++) {
    const n = Number(v.toPrecision(p))
    if (Math.fround(n) === v) return String(n)
  }
  return String(v)
}

/** The same, as a JSON number (the shortest decimal of the float32). */
const f32Number = (v) => (Number.isFinite(v) ? Number(formatF32(v)) : null)

/** Shape [64, 64] → "[64, 64]"; a scalar → "[]". */
const formatShape = (shape) => `[${shape.join(', ')}]`

/**
 * Characters that act on a terminal rather than show: C0 controls, DEL, C1 controls (0x80-0x9f),
 * the Unicode bidirectional controls and marks (which reorder the text around them) and the
 * line and paragraph separators. The core's `printable` (crates/core/src/error.rs) escapes the
 * same set the same way.
 */
const UNPRINTABLE = /[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g
const UNPRINTABLE_IN_JSON = /[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g
const NAMED = { '\n': '\\n', '\r': '\\r', '\t': '\\t' }
const hex = (c, width) => c.codePointAt(0).toString(16).padStart(width, '0')

/**
 * Text that came from a file (a tensor name, a metadata value, an error message quoting one),
 * safe to print: every unprintable character escaped — \n, \r, \t, else \xNN below U+0100 and
 * \u{NNNN} above — so that no byte of a file can clear the screen, set the window title, move
 * the cursor or reorder a line. Everything the command line prints of a file goes through this.
 */
const printable = (s) => String(s).replace(UNPRINTABLE, (c) => NAMED[c] ?? (c.charCodeAt(0) < 0x100 ? `\\x${hex(c, 2)}` : `\\u{${hex(c, 4)}}`))

/** Characters of a tensor (or file) name a line shows, cut with its length noted. */
const NAME_CHARS = 120
const name = (s) => truncate(s, NAME_CHARS, true)
/** Characters of an error or warning line. */
const MESSAGE_CHARS = 2000

/**
 * `printable(s)` cut to at most `max` visible characters, with an ellipsis; `noted`: and the
 * full length after it ("abc… (5,242,880 chars)"), for names, whose length tells something.
 */
function truncate(s, max, noted = false) {
  const text = String(s)
  // A prefix of the input long enough for `max` escaped characters, so that a 5 MiB name is not
  // escaped whole to show 60 characters of it.
  const chars = Array.from(printable(text.length > 4 * max + 16 ? text.slice(0, 4 * max + 16) : text))
  if (chars.length <= max && text.length <= 4 * max + 16) return chars.join('')
  let length = 0
  for (const _ of text) length++
  const note = noted ? ` (${withCommas(length)} chars)` : ''
  return `${chars.slice(0, Math.max(1, max - 1 - note.length)).join('')}…${note}`
}

/** A metadata value for one line: strings as they are, long arrays abridged, others as JSON. */
function formatValue(v, max) {
  if (typeof v === 'string') return truncate(v, max)
  if (Array.isArray(v) && v.length > 16) {
    const head = JSON.stringify(v.slice(0, 8)).slice(0, -1)
    return truncate(`${head}, … ${withCommas(v.length)} items]`, max)
  }
  return truncate(JSON.stringify(v), max)
}

/**
 * An aligned table. `columns`: [{ title, align: 'left' | 'right' }]; `rows`: arrays of strings.
 * `style(title)` decorates the header row (bold on a terminal). The last column is not padded.
 */
function table(columns, rows, style = (s) => s) {
  const widths = columns.map((c, i) => rows.reduce((w, r) => Math.max(w, visibleLength(r[i])), visibleLength(c.title)))
  const cell = (s, i) => {
    const pad = ' '.repeat(widths[i] - visibleLength(s))
    if (columns[i].align === 'right') return pad + s
    return i === columns.length - 1 ? s : s + pad
  }
  const line = (cells) => cells.map(cell).join('  ').trimEnd()
  return [style(line(columns.map((c) => c.title))), ...rows.map(line)]
}

/**
 * JSON with 2-space indentation, where any array or object that fits on one line stays on one
 * line (a shape, a row of probabilities), and a list of flat records (tensor entries, errors)
 * has one record per line, so large reports stay readable.
 */
function toJson(value, width = 100) {
  const plain = (v) => (v !== null && typeof v === 'object' && typeof v.toJSON === 'function' ? v.toJSON() : v)
  const inline = (v) => {
    v = plain(v)
    if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null'
    if (Array.isArray(v)) return `[${v.map(inline).join(', ')}]`
    const keys = Object.keys(v).filter((k) => v[k] !== undefined)
    return `{${keys.map((k) => `${JSON.stringify(k)}: ${inline(v[k])}`).join(', ')}}`
  }
  const isPrimitive = (v) => v === null || typeof v !== 'object'
  /** An object of primitives and arrays of primitives (a tensor entry, an error): one line in a list. */
  const isRecord = (v) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v).every((x) => isPrimitive(x) || (Array.isArray(x) && x.every(isPrimitive)))
  const walk = (v, indent) => {
    v = plain(v)
    if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null'
    const compact = inline(v)
    if (indent.length + compact.length <= width) return compact
    const inner = indent + '  '
    if (Array.isArray(v)) {
      if (v.length === 0) return '[]'
      return `[\n${v.map((x) => inner + (isRecord(plain(x)) ? inline(x) : walk(x, inner))).join(',\n')}\n${indent}]`
    }
    const keys = Object.keys(v).filter((k) => v[k] !== undefined)
    if (keys.length === 0) return '{}'
    return `{\n${keys.map((k) => `${inner}${JSON.stringify(k)}: ${walk(v[k], inner)}`).join(',\n')}\n${indent}}`
  }
  // JSON.stringify escapes C0 controls (the newlines left are the layout's); the other
  // unprintable characters can only be inside strings, where \uNNNN is the same character.
  return walk(value, '').replace(UNPRINTABLE_IN_JSON, (c) => `\\u${hex(c, 4)}`)
}

/** A progress bar redrawn in place on `stream` (stderr), at most every 80 ms: `update({ doneBytes, totalBytes })`, `clear()`. */
function progressBar(stream) {
  const started = Date.now()
  let lastDraw = 0
  let drawn = false
  const draw = (done, total, force) => {
    const now = Date.now()
    if (!force && now - lastDraw < 80) return
    lastDraw = now
    const elapsed = (now - started) / 1000
    const rate = elapsed > 0 ? done / elapsed : 0
    const eta = rate > 0 && total > done ? (total - done) / rate : done >= total ? 0 : NaN
    const pct = total > 0 ? Math.min(1, done / total) : 0
    const text = ` ${String(Math.floor(pct * 100)).padStart(3)}%  ${formatBytes(done)} / ${formatBytes(total)}  ${formatBytes(Math.round(rate))}/s  ETA ${formatDuration(eta)}`
    const columns = stream.columns || 80
    const barWidth = Math.max(10, Math.min(40, columns - 64))
    const filled = Math.round(pct * barWidth)
    const bar = `[${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}]`
    stream.write(`\r${bar}${text}`.slice(0, columns + 1) + '\x1b[K')
    drawn = true
  }
  return {
    update: (p) => draw(p.doneBytes, p.totalBytes, p.doneBytes >= p.totalBytes),
    clear: () => {
      if (drawn) stream.write('\r\x1b[K')
      drawn = false
    },
  }
}

module.exports = {
  colorsFor,
  progressBar,
  visibleLength,
  formatBytes,
  formatCount,
  withCommas,
  formatDuration,
  formatElapsed,
  formatF32,
  f32Number,
  formatShape,
  name,
  MESSAGE_CHARS,
  printable,
  truncate,
  formatValue,
  table,
  toJson,
}
